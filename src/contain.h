/* SPDX-License-Identifier: MIT */
/*
 * contain.c: contain mode.  Decode a faulting instruction with Zydis and
 * compute the memory it writes from the signal context; undo the write
 * around its single step (the SIGSEGV and SIGTRAP handlers, fault.c, call
 * in).  AS-safe: Zydis decodes and formats into caller buffers without
 * allocating.
 */
#ifndef PMG_CONTAIN_H
#define PMG_CONTAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <ucontext.h>

#define PMG_CT_MAXWR	2	/* write ranges per instruction */
#define PMG_CT_MAXLEN	64	/* bytes per write range (one zmm) */
#define PMG_CT_TEXT	96

/* What the instruction does to its base register besides addressing. */
#define PMG_CT_BASE_KEEP	0	/* nothing: put the old value back */
#define PMG_CT_BASE_STEP	1	/* string op: advances it (rdi) */

/* rep stos / rep movs (64-bit addressing): what the whole instruction
 * does, for handling a run of iterations at once (_pmg_rep_audit(),
 * contain's undo) */
#define PMG_CT_REP_NONE	0
#define PMG_CT_REP_STOS	1
#define PMG_CT_REP_MOVS	2

struct _pmg_decoded {
	unsigned nwr;			/* memory ranges the instruction writes */
	struct _pmg_wr {
		uintptr_t addr;
		size_t len;
		/* the base register (PMG_X86_*) that may be moved to redirect
		 * the write, or -1: none, rsp, rip, not 64-bit, or moving it
		 * would change something else (it is also the index, a data
		 * or hidden operand, or another operand's address) */
		int base;
		int base_kind;		/* PMG_CT_BASE_* */
		/* an implicit stack write: push, call, enter, pushf (hidden,
		 * through rsp) */
		int stack;
	} wr[PMG_CT_MAXWR];
	int rep;			/* PMG_CT_REP_* */
	unsigned elem;			/* rep: element size in bytes */
	unsigned len;			/* instruction length */
	const char *why;		/* non-NULL: cannot be contained */
	char text[PMG_CT_TEXT];		/* "mov byte ptr [rax+0x10], 0x5a" */
};

/* /proc/self/mem opened once (O_RDWR), or -1 (contain.c).  AS-safe. */
int _pmg_self_mem_fd(void);

/* Decode the instruction at the context's RIP.  0, or -1 with d->why. */
int _pmg_contain_decode(const ucontext_t *uc, struct _pmg_decoded *d);

struct pmg_fault;

/* What _pmg_contain_begin() made of the access. */
#define PMG_CT_READ	0	/* writes no protected byte: audit's */
#define PMG_CT_DONE	1	/* contained, retried, or a rep run done */
#define PMG_CT_OWN	2	/* the program's own fault (*own: where) */

/*
 * A stray access in contain mode (@reg: the interrupted context's saved
 * register, PKU; NULL: page protection).  PMG_CT_DONE when it is a write
 * to be contained: its bytes saved, rights and the trap flag set in @uc
 * (or a rep run done, or the access retried); the step's record, the
 * calling thread's (steps.c), says which.  PMG_CT_READ when the
 * instruction writes no protected byte (a stray read: audit handles it).
 * PMG_CT_OWN when it writes a protected page the program itself made
 * unwritable (its own mprotect(), caps.c): the CPU would fault there
 * without pmguard, so the fault is the program's, at *@own (nothing
 * done, nothing written).  Falls back to strict (reports, ends the
 * process) where a write cannot be contained.
 */
int _pmg_contain_begin(struct pmg_fault *f, ucontext_t *uc, uint32_t *reg,
		       pid_t tid, uintptr_t *own);
/* After the contained step (SIGTRAP): the saved bytes put back, the
 * write reported.  @ran false: the instruction did not run (it faulted
 * for a reason of its own, or a foreign signal came first): the
 * redirected base register put back, nothing written, nothing reported. */
void _pmg_contain_end(ucontext_t *uc, bool ran);
/* Audit, and contain's stray reads: a rep stos/movs run of iterations
 * at once, no single step.  True when done. */
bool _pmg_rep_audit(const struct pmg_fault *f, ucontext_t *uc, bool pku,
		    pid_t tid, int mode);

/* Whole rep string runs at one fault (process_vm_readv/writev usable).
 * _pmg_vm_copy_ok: 1 usable, -1 not, 0 not probed yet; probed at install
 * by _pmg_vm_copy_probe() (test-contain forces -1, then probes again). */
bool _pmg_rep_bulk_usable(void);
extern int _pmg_vm_copy_ok;
void _pmg_vm_copy_probe(void);

#endif /* PMG_CONTAIN_H */
