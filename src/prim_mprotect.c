// SPDX-License-Identifier: MIT
/*
 * mprotect backend, for machines without PKU.  A "key" is a slot in our own
 * table; its rights are page permissions on every range of the domain, so
 * a window is process-wide: while any thread holds it open, every thread
 * can write.  Each window edge that changes rights costs one mprotect(2)
 * per range (and a TLB shootdown).  Stray accesses fault as SEGV_ACCERR
 * inside a registered range.
 */
#define _GNU_SOURCE
#include <sys/mman.h>

#include "internal.h"

static uint16_t used_slots;	/* bit k: slot k taken (lock held) */

int _pmg_prot_of(unsigned rights)
{
	switch (rights) {
	case PMG_RIGHTS_RW:
		return PROT_READ | PROT_WRITE;
	case PMG_RIGHTS_WD:
		return PROT_READ;
	}
	return PROT_NONE;
}

static int mp_probe(void)
{
	return 0;
}

static int mp_key_alloc(unsigned rights)
{
	int k;

	(void)rights;
	for (k = 1; k < PMG_NR_KEYS; k++) {
		if (!(used_slots & (1u << k))) {
			used_slots |= (uint16_t)(1u << k);
			return k;
		}
	}
	return -ENOSPC;
}

static int mp_key_free(int key)
{
	if (key < 1 || key >= PMG_NR_KEYS || !(used_slots & (1u << key)))
		return -EINVAL;
	used_slots &= (uint16_t)~(1u << key);
	return 0;
}

static int mp_tag(void *addr, size_t len, int key, unsigned rights)
{
	(void)key;
	return _pmg_cap_mprotect((uintptr_t)addr, (uintptr_t)addr + len,
				 _pmg_prot_of(rights));
}

static int mp_untag(void *addr, size_t len)
{
	/* as the program left them (pagewin.c's entries) */
	return _pmg_cap_mprotect((uintptr_t)addr, (uintptr_t)addr + len,
				 PROT_READ | PROT_WRITE);
}

static int apply(const struct _pmg_range *r, void *arg)
{
	int prot = *(int *)arg;
	/* the pages of the persistence calls' page windows stay writable */
	int rc = _pmg_pw_mprotect(r->key, r->base, r->end, prot);

	/* unmapped behind the library's back (unmapped.c): not a reason
	 * to fail a window on every other range */
	return rc == -ENOMEM ? 0 : rc;
}

static int mp_set_rights(int key, unsigned rights)
{
	int prot = _pmg_prot_of(rights);

	return _pmg_reg_each(key, apply, &prot);
}

static uint32_t *mp_saved_reg(ucontext_t *uc)
{
	(void)uc;
	return NULL;
}

const struct _pmg_prim _pmg_prim_mprotect = {
	.id = PMG_BACKEND_MPROTECT,
	.thread_local = false,
	.probe = mp_probe,
	.key_alloc = mp_key_alloc,
	.key_free = mp_key_free,
	.tag = mp_tag,
	.untag = mp_untag,
	.set_rights = mp_set_rights,
	.saved_reg = mp_saved_reg,
};
