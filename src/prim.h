/* SPDX-License-Identifier: MIT */
/*
 * The primitive contract between libpmguard and a backend (mimalloc's
 * prim.h shape).  A backend is the answer to four questions the core
 * cannot answer itself: how to read and write the permission register, how
 * to tag pages with a key, and where an interrupted context's register is
 * saved.  Two implementations: prim_pku.c (x86 PKU) and prim_mprotect.c
 * (page permissions).  The Linux series (linux/) answers the same
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
};

extern const struct _pmg_prim _pmg_prim_pku;
extern const struct _pmg_prim _pmg_prim_mprotect;

/* PKU only: how many keys the kernel would still give this process. */
int _pmg_pku_free_keys(void);

#endif /* PMG_PRIM_H */
