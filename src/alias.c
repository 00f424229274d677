// SPDX-License-Identifier: MIT
/*
 * The pools' aliases (mprotect backend): a second, writable mapping of a
 * protected pool's file that only the library knows, which the persistence
 * calls write through instead of opening a window on the pool's own
 * mapping.  Mapped, reserved and given back here; pool.c calls it when it
 * maps and closes a pool, persist.c finds it in the pool table.
 */
#define _GNU_SOURCE
#include <sys/mman.h>

#include "persist.h"
#include "pool.h"

/*
 * The alias (mprotect backend, protected pools): a second mapping of the
 * pool's file, read-write, at an address only the library knows, with a
 * PROT_NONE gap of alias_gap() on either side.  The persistence calls write through
 * it (persist.c), so they open no window on the pool's own mapping:
 * mprotect(2) of the pages a call touches cost two VMA splits and merges
 * per call (21-30 us here), more than the copy below 2 MiB, and left
 * those pages writable by every thread meanwhile.  Same flags as the
 * pool's mapping (MAP_SYNC on DAX): the same pages, so a flush through
 * the alias flushes the pool's lines.  It is mapped over a PROT_NONE
 * reservation of its own whose ends stay as the gaps: the alias is
 * writable at all times, so nothing a stray store might run into from a
 * neighbour may lie next to it.  A gap of one page used to sit 8 KiB
 * above the pool's end (the pool below its alias, a page of slack between
 * them): a store a little past the pool's end rewrote the pool's own
 * header through the alias, no fault, strict mode included.  The gap
 * below the alias is at least the pool's own size (at least 2 MiB, at
 * most 1 GiB): an overrun past the pool's end by up to that faults in it.
 * That gap guards this pool only: a larger pool placed later right below
 * the reservation would have the alias within its own size past its end.
 * Every pool's own guard above its mapping (pool_guard_len(), pool.h)
 * keeps that place for it.
 * Address space only (PROT_NONE, MAP_NORESERVE).  No alias
 * (the calls fall back to page windows) if it cannot be mapped, or with
 * PMGUARD_POOL_ALIAS=0.
 */
static char *alias_reserve(const struct pmg_pool *p)
{
	char *r = _pmg_pool_reserve(alias_resv_len(p));

	return r == MAP_FAILED ? NULL : r;
}

/*
 * Before the pool's own mapping: its reservation is made first, and the
 * pool is then mapped where it would be without one (below it, or in a
 * smaller hole above; a reopened pool lands where the old one was).
 */
bool _pmg_pool_alias_wanted(const struct pmg_pool_config *c)
{
	return !(c->flags & PMG_POOL_UNPROTECTED) && !_pmg_fast &&
	       _pmg_persist_get()->pool_alias;
}

void _pmg_pool_alias_prepare(struct pmg_pool *p,
			     const struct pmg_pool_config *c, char *taken)
{
	if (_pmg_pool_alias_wanted(c))
		p->alias_resv = taken ? taken : alias_reserve(p);
}

void _pmg_pool_map_alias(struct pmg_pool *p)
{
	int flags = p->map_sync ? MAP_SHARED_VALIDATE | MAP_SYNC : MAP_SHARED;
	size_t resv = alias_resv_len(p);
	char *r = p->alias_resv, *a, *m;

	p->alias_resv = NULL;
	if (!r)
		return;
	if (!p->dom || _pmg_fast) {
		munmap(r, resv);
		return;
	}
	/*
	 * MAP_FIXED over our own reservation: the place is never free for
	 * another thread to take.  (A hint would not do: the kernel ignores
	 * it for DAX files it aligns to 2 MiB itself.)
	 */
	a = (char *)(((uintptr_t)r + alias_gap(p) + p->align - 1) &
		     ~(p->align - 1));
	m = mmap(a, p->maplen, PROT_READ | PROT_WRITE, flags | MAP_FIXED, p->fd,
		 (off_t)p->offset);
	/* the gaps and the alignment slack stay reserved: ours */
	if (m == a) {
		p->alias = a;
		p->alias_resv = r;
		return;
	}
	/*
	 * A failed MAP_FIXED may or may not have unmapped the middle first:
	 * give back the two ends only, never what may now be another
	 * thread's (at worst the middle stays reserved, PROT_NONE).
	 */
	munmap(r, (size_t)(a - r));
	munmap(a + p->maplen, (size_t)(r + resv - (a + p->maplen)));
}

void _pmg_pool_unmap_alias(struct pmg_pool *p)
{
	if (p->alias_resv)
		munmap(p->alias_resv, alias_resv_len(p));
	p->alias = p->alias_resv = NULL;
}
