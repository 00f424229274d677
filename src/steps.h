/* SPDX-License-Identifier: MIT */
/*
 * steps.c: what the fault path holds while it runs, which a key eviction
 * (keys.c) must not move a key under and a fork child must drop: the
 * single steps in flight (audit and contain: a record per stepping
 * thread, from its SIGSEGV to its SIGTRAP) and the handlers' bracket;
 * with the page protection a step opens and puts back, and the strict
 * end.  Below the handlers (fault.c), contain's undo (contain.c), which
 * keeps its bytes in the record, and keys.c, which reads both.
 */
#ifndef PMG_STEPS_H
#define PMG_STEPS_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <ucontext.h>

#include "arch/x86/ucontext.h"
#include "contain.h"
#include "policy.h"

/*
 * Audit and contain: what the SIGTRAP after the single step must put back.
 * Contain also keeps the protected bytes the instruction writes (up to two
 * ranges of 64 bytes, each split at most once per protected range).
 */
#define PMG_PENDING_PAGES 8
#define PMG_SAVES (2 * PMG_CT_MAXWR)
struct _pmg_save {
	uintptr_t addr;
	unsigned len;
	int dom;
	uint8_t old[PMG_CT_MAXLEN];
};
struct _pmg_step {
	int owner; /* tid holding it; 0: free */
	bool active;
	bool had_tf;
	uintptr_t ip; /* the stepped instruction */
	bool contain; /* saved bytes to put back */
	uint32_t mask, bits; /* PKU: register bits to restore */
	unsigned npages; /* mprotect: pages to re-protect */
	uintptr_t page[PMG_PENDING_PAGES];
	int dom[PMG_PENDING_PAGES]; /* their domains */
	/* contain */
	unsigned nsave;
	struct _pmg_save save[PMG_SAVES];
	uint32_t rd_mask; /* PKU: keys the handlers must open */
	struct pmg_fault f;
	pid_t tid;
	uint64_t count;
	bool stack_protected;
	struct _pmg_decoded dec;
	/* redirect: the write went to scratch, memory was never granted */
	bool redirect;
	int base; /* PMG_X86_* register moved by delta */
	int base_kind;
	greg_t base_orig;
	uintptr_t delta, ea; /* scratch = ea + delta */
	unsigned len;
	uint8_t snap[PMG_CT_MAXLEN]; /* the range before the step */
	/* the step runs with asynchronous signals blocked (step_block()) */
	bool masked;
	greg_t step_ip; /* the stepped instruction (step_block()) */
	uint64_t sigmask; /* the program's mask, to put back */
	/* Redirect target: the written range at the same offset mod 64 (so
	 * alignment-checking stores, cmpxchg16b, movntdq, still fit). */
	uint8_t scratch[4 * PMG_CT_MAXLEN]
		__attribute__((aligned(PMG_CT_MAXLEN)));
};

/* The calling thread's record while it is in a step (NULL: none). */
extern __thread struct _pmg_step *_pmg_cur_step
	__attribute__((tls_model("initial-exec")));

/* The calling thread's record, taken if it holds none; NULL: out of
 * memory.  AS-safe. */
struct _pmg_step *_pmg_step_claim(pid_t tid);
/* The step is over (or never began): give the record back.  AS-safe. */
void _pmg_step_release(void);

/* mprotect(2) of the page at @page to @prot (a bigger block where the
 * mapping cannot be split there: device dax).  AS-safe. */
void _pmg_fault_protect_page(uintptr_t page, int prot);
/* @page of domain @id back to the protection it should have now.
 * AS-safe. */
void _pmg_fault_reprotect_page(int id, uintptr_t page);
/* The same, at least @floor (a grant's protection; never lower than what
 * the rights give now).  AS-safe. */
void _pmg_fault_set_page(int id, uintptr_t page, int floor);

/* strict: leave the bracket, end the process (abort()). */
__attribute__((noreturn)) void _pmg_fault_die(void);

#endif /* PMG_STEPS_H */
