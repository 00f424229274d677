// SPDX-License-Identifier: MIT
/*
 * Protected ranges whose memory went away behind the library's back:
 * munmap(), mremap() or a MAP_FIXED mmap() over them.  The shared library
 * sees those calls (interpose.c) and drops the ranges there; without it
 * (the static library, or a raw syscall) pmg_unprotect() finds the range
 * no longer mapped and drops it then.  A dropped range no longer counts
 * for its domain (which can then be deleted, freeing its key), is no
 * longer looked up (its faults are not pmguard's) and no window edge
 * changes its addresses again: the library never changes protections of
 * memory it does not own.  Each drop is reported once on the report fd.
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

/* Dropped ranges, so that pmg_unprotect() of one answers 0 once. */
#define GONE_MAX 64
static struct {
	uintptr_t base, end;
} gone[GONE_MAX];
static unsigned gone_next;

static void remember(uintptr_t base, uintptr_t end)
{
	gone[gone_next % GONE_MAX].base = base;
	gone[gone_next % GONE_MAX].end = end;
	gone_next++;
}

bool _pmg_gone_take(uintptr_t base, uintptr_t end)
{
	unsigned i;

	for (i = 0; i < GONE_MAX; i++) {
		if (gone[i].base == base && gone[i].end == end && end) {
			gone[i].base = gone[i].end = 0;
			return true;
		}
	}
	return false;
}

void _pmg_gone_forget(uintptr_t base, uintptr_t end)
{
	unsigned i;

	for (i = 0; i < GONE_MAX; i++)
		if (gone[i].base < end && base < gone[i].end)
			gone[i].base = gone[i].end = 0;
}

/*
 * Drop the range @r (registered; _pmg.lock held), whose part [@a, @a+@n)
 * is no longer the library's.  Its parts outside that span are still
 * mapped and still the library's: they are untagged (read-write, key 0,
 * as they were before pmg_protect()).  The report names @what and @fate.
 * false: @r was not registered.
 */
static bool drop(const struct _pmg_range *r, uintptr_t a, size_t n,
		 const char *what, const char *fate)
{
	uintptr_t e = a + n;
	int id;

	if (_pmg_reg_remove(r->base, r->end, &id))
		return false;
	_pmg.dom[id].nranges--;
	if (r->base < a)
		(void)_pmg.prim->untag((void *)r->base, a - r->base);
	if (e < r->end)
		(void)_pmg.prim->untag((void *)e, r->end - e);
	_pmg_report_range_gone(what, a, n, r, fate);
	return true;
}

void _pmg_range_drop(const struct _pmg_range *r, uintptr_t a, size_t n,
		     const char *what)
{
	if (drop(r, a, n, what, "dropped (pmg_unprotect() of it returns 0)"))
		remember(r->base, r->end);
}

/* Drop every range overlapping [@a, @a+@n) (_pmg.lock held). */
void _pmg_ranges_drop(uintptr_t a, size_t n, const char *what)
{
	struct _pmg_range r;

	while (_pmg_reg_first_overlap(a, a + n, &r) == 0)
		_pmg_range_drop(&r, a, n, what);
}

/* Is all of [base, end) mapped?  One msync() (ENOMEM: a hole). */
bool _pmg_all_mapped(uintptr_t base, uintptr_t end)
{
	return !(msync((void *)base, end - base, MS_ASYNC) && errno == ENOMEM);
}

/*
 * pmg_unprotect() of a range that is no longer (entirely) mapped: drop
 * it and touch no memory (what is mapped there now may not be the
 * library's).  _pmg.lock held.
 */
void _pmg_range_drop_unmapped(const struct _pmg_range *r)
{
	/* the whole range: nothing is untagged, nor remembered (this
	 * pmg_unprotect() is the one that returns 0) */
	(void)drop(r, r->base, r->end - r->base, "pmg_unprotect",
		   "no longer (entirely) mapped: dropped, nothing there "
		   "changed");
}
