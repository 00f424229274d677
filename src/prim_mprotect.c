// SPDX-License-Identifier: MIT
/*
 * mprotect backend, for machines without PKU.  No hardware keys: a
 * domain's rights are page permissions on every range of it
 * (_pmg_paged_set(), also a virtual domain's on PKU), so a window is
 * process-wide: while any thread holds it open, every thread can write.
 * Each window edge that changes rights costs one mprotect(2) per range
 * (and a TLB shootdown).  Stray accesses fault as SEGV_ACCERR
 * inside a registered range.  The page protection itself is caps.c's
 * (_pmg_cap_mprotect(), _pmg_prot_of()) and mpwin.c's (_pmg_paged_set()).
 */
#define _GNU_SOURCE
#include <sys/mman.h>

#include "internal.h"

static int mp_probe(void)
{
	return 0;
}

static int mp_key_alloc(unsigned rights)
{
	(void)rights;
	return -ENOSPC; /* no hardware keys: every domain is page-protected */
}

static int mp_key_free(int key)
{
	(void)key;
	return -EINVAL;
}

static int mp_tag(void *addr, size_t len, int key, unsigned rights)
{
	(void)key;
	return _pmg_cap_mprotect((uintptr_t)addr, (uintptr_t)addr + len,
				 _pmg_prot_of(rights));
}

static int mp_untag(void *addr, size_t len)
{
	/* as the program left them (caps.c's entries) */
	return _pmg_cap_mprotect((uintptr_t)addr, (uintptr_t)addr + len,
				 PROT_READ | PROT_WRITE);
}

static int mp_set_rights(int key, unsigned rights)
{
	(void)key;
	(void)rights;
	return 0; /* no register: page protection is _pmg_paged_set()'s */
}

static uint32_t *mp_saved_reg(ucontext_t *uc)
{
	(void)uc;
	return NULL;
}

/* no hardware keys: a domain's number names it, as it always did */
static int mp_paged_key(int dom)
{
	return dom;
}

/* no register: a handler's rights are the pages' */
static uint32_t mp_handler_rights(void)
{
	return 0;
}

static uint32_t mp_rights_open(uint32_t mask)
{
	(void)mask;
	return 0;
}

static void mp_rights_restore(uint32_t saved)
{
	(void)saved;
}

static void mp_rights_reset(void)
{
}

const struct _pmg_prim _pmg_prim_mprotect = {
	.id = PMG_BACKEND_MPROTECT,
	.thread_local = false,
	.page_keys = false,
	.probe = mp_probe,
	.key_alloc = mp_key_alloc,
	.key_free = mp_key_free,
	.tag = mp_tag,
	.untag = mp_untag,
	.set_rights = mp_set_rights,
	.saved_reg = mp_saved_reg,
	.paged_key = mp_paged_key,
	.handler_rights = mp_handler_rights,
	.rights_open = mp_rights_open,
	.rights_restore = mp_rights_restore,
	.rights_reset = mp_rights_reset,
};
