/* SPDX-License-Identifier: MIT */
/*
 * The primitive contract between libpmguard and a backend (mimalloc's
 * prim.h shape).  A backend is the answer to the questions the core
 * cannot answer itself: how to read and write the permission register, how
 * to tag pages with a key, where an interrupted context's register is
 * saved, and what a fault handler's own rights are.  Nothing outside the
 * two backends checks which backend runs or touches the register, but
 * the window edges (pmguard.h's inline ones, window.c's slow paths): the
 * hot path, behind _pmg_fast.  Two implementations: prim_pku.c (x86 PKU)
 * and prim_mprotect.c (page permissions).  The Linux series (linux/) answers the same
 * questions for PKS in the kernel itself.
 *
 * All functions return 0 (or a key) or a negative errno.  Only probe sets
 * the thread's error message (why the backend cannot run); the others
 * leave it to their caller, which names what it was doing.  Those marked
 * AS-safe are called from the SIGSEGV/SIGTRAP handlers.
 */
#ifndef PMG_PRIM_H
#define PMG_PRIM_H

#include <stddef.h>
#include <stdint.h>
#include <ucontext.h>

struct _pmg_prim {
	int id;				/* enum pmg_backend */
	bool thread_local;		/* windows are per thread */
	/* Pages carry protection keys (pkey_mprotect(2)): a domain's key
	 * faults as SEGV_PKUERR with si_pkey and a saved register, and the
	 * program's mprotect() may move a page to another key (PROT_EXEC
	 * alone: the execute-only key). */
	bool page_keys;

	/* Can this backend run here?  0, or -ENOTSUP with a message. */
	int (*probe)(void);

	/* Allocate a hardware key (1..15) whose rights in the calling
	 * thread are @rights; others see it per the backend.  -ENOSPC when
	 * none left (always on mprotect, which has none). */
	int (*key_alloc)(unsigned rights);
	int (*key_free)(int key);

	/* Protect [addr, addr+len): with hardware key @key (1..15, PKU;
	 * pages read-write), or, @key 0, by page protection at @rights
	 * (key 0 on PKU); untag restores PROT_READ|PROT_WRITE and key 0. */
	int (*tag)(void *addr, size_t len, int key, unsigned rights);
	int (*untag)(void *addr, size_t len);

	/* Make @key's rights @rights in the calling thread's register
	 * (PKU); a no-op where there is none (mprotect: page protection is
	 * _pmg_paged_set()'s).  AS-safe. */
	int (*set_rights)(int key, unsigned rights);

	/* The interrupted context's register in a signal frame: a pointer to
	 * it, or NULL where the backend keeps no register (mprotect).
	 * AS-safe. */
	uint32_t *(*saved_reg)(ucontext_t *uc);

	/* What names domain @dom while it holds no hardware key
	 * (pmg_domain_key(), the fault callbacks and reports): -ENOKEY on
	 * PKU (a virtual domain: page protection), its number on mprotect
	 * (no hardware keys: the number stands in).  AS-safe. */
	int (*paged_key)(int dom);

	/* A fault handler's own rights: the domains' default rights in the
	 * calling thread's register (the kernel starts a handler with every
	 * key access-disabled), so that a callback or an observer may read
	 * a write-disabled domain.  Returns the register as it was, for
	 * rights_restore(); 0 and nothing done where there is none.
	 * AS-safe. */
	uint32_t (*handler_rights)(void);
	/* The keys in @mask (register bits, not 0) opened in the calling
	 * thread: a handler's own copies of protected bytes (contain).
	 * Returns the register as it was, for rights_restore().  AS-safe. */
	uint32_t (*rights_open)(uint32_t mask);
	/* The calling thread's register back to @saved (what
	 * handler_rights() or rights_open() returned).  AS-safe. */
	void (*rights_restore)(uint32_t saved);
	/* The calling thread's rights to the domains' defaults, the
	 * register written only if it differs: a new thread, a fork
	 * child (thread.c); nothing where there is no register.
	 * AS-safe. */
	void (*rights_reset)(void);
};

extern const struct _pmg_prim _pmg_prim_pku;
extern const struct _pmg_prim _pmg_prim_mprotect;

/*
 * PKU the hardware, whichever backend runs: where the kernel enables it
 * (CPUID OSPKE), prim_pku.c's.
 */
/* How many keys the kernel would still give this process. */
int _pmg_pku_free_keys(void);
/* Every key but 0 readable (and write-disabled) in the calling thread:
 * execute-only code (PROT_EXEC alone, a key the kernel access-disables)
 * readable for an unwinder.  Returns the register as it was, for
 * _pmg_pku_restore().  AS-safe. */
uint32_t _pmg_pku_all_readable(void);
/* The calling thread's register back to @saved.  AS-safe. */
void _pmg_pku_restore(uint32_t saved);

#endif /* PMG_PRIM_H */
