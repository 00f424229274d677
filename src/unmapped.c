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
 *
 * A call that takes part of a range away leaves the rest protected: the
 * registry splits the range (_pmg_reg_cut()), each piece keeps its
 * domain and remembers the range pmg_protect() registered (its origin),
 * so that pmg_unprotect() of that whole range -- what a program or an
 * adapter that unmapped part of it still calls at its end -- gives back
 * the pieces left (docs/design.md, "What a program may do to a protected
 * mapping").
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

/* Is a piece of the origin [@ob, @oe) still registered?  (lock held) */
static bool origin_left(uintptr_t ob, uintptr_t oe)
{
	struct _pmg_range r;
	uintptr_t at = ob;

	while (at < oe && !_pmg_reg_first_overlap(at, oe, &r)) {
		if (r.obase == ob && r.oend == oe)
			return true;
		at = r.end;
	}
	return false;
}

enum dropped { NOT_OURS, WHOLE, PART };

/*
 * [@a, @a+@n) of the range @r (registered; _pmg.lock held) is no longer
 * the library's.  Where that is only part of @r, the rest stays
 * registered and protected (the pieces keep @r's domain and origin);
 * where it is all of @r, or the registry cannot grow for the pieces
 * (then the parts outside that span, still mapped, are untagged: read-
 * write, key 0, as before pmg_protect()), @r is dropped.  The report
 * names @what and @fate (or the rest kept).
 */
static enum dropped drop(const struct _pmg_range *r, uintptr_t a, size_t n,
			 const char *what, const char *fate)
{
	uintptr_t e = a + n;
	uintptr_t lo = a > r->base ? a : r->base;
	uintptr_t hi = e < r->end ? e : r->end;
	int id, left;

	if (lo > r->base || hi < r->end) {
		left = _pmg_reg_cut(r, lo, hi);
		if (left == -ENOENT)
			return NOT_OURS;
		if (left > 0) {
			_pmg.dom[r->dom].nranges += (unsigned)left - 1;
			_pmg_report_range_gone(what, a, n, r,
					       "that part dropped, the rest "
					       "stays protected");
			return PART;
		}
		/* -ENOMEM: no room for the pieces */
	}
	if (_pmg_reg_remove(r->base, r->end, &id))
		return NOT_OURS;
	_pmg.dom[id].nranges--;
	if (r->base < a)
		(void)_pmg.prim->untag((void *)r->base, a - r->base);
	if (e < r->end)
		(void)_pmg.prim->untag((void *)e, r->end - e);
	_pmg_report_range_gone(what, a, n, r, fate);
	return WHOLE;
}

/* @r is gone whole: pmg_unprotect() of it, and of its origin once no
 * piece of that is left, answers 0 once. */
static void remember_gone(const struct _pmg_range *r)
{
	remember(r->base, r->end);
	if ((r->obase != r->base || r->oend != r->end) &&
	    !origin_left(r->obase, r->oend))
		remember(r->obase, r->oend);
}

void _pmg_range_drop(const struct _pmg_range *r, uintptr_t a, size_t n,
		     const char *what)
{
	if (drop(r, a, n, what, "dropped (pmg_unprotect() of it returns 0)") ==
	    WHOLE)
		remember_gone(r);
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

bool _pmg_pieces_unprotect(uintptr_t base, uintptr_t end, int *rc)
{
	struct _pmg_range r;
	uintptr_t at = base;
	bool any = false;
	int id, e;

	*rc = 0;
	while (at < end && !_pmg_reg_first_overlap(at, end, &r)) {
		at = r.end;
		if (r.obase != base || r.oend != end)
			continue;
		any = true;
		if (!_pmg_all_mapped(r.base, r.end)) {
			_pmg_range_drop_unmapped(&r);
			continue;
		}
		/* untag first: on failure the piece stays registered */
		e = _pmg.prim->untag((void *)r.base, r.end - r.base);
		if (e) {
			if (!*rc)
				*rc = _pmg_err(e, "untagging %#lx: %s",
					       (unsigned long)r.base,
					       strerror(-e));
			continue;
		}
		_pmg_reg_remove(r.base, r.end, &id);
		_pmg.dom[id].nranges--;
	}
	if (any)
		(void)_pmg_gone_take(base, end);
	return any;
}

int _pmg_unprotect_part(uintptr_t a, size_t n, const struct pmg_domain *d)
{
	struct _pmg_range r;
	struct _pmg_dom *x;
	uintptr_t at = a, e = a + n;
	int rc = 0, id;

	if (!__atomic_load_n(&_pmg.inited, __ATOMIC_ACQUIRE))
		return -ENOENT;
	pthread_mutex_lock(&_pmg.lock);
	while (at < e && !_pmg_reg_first_overlap(at, e, &r)) {
		uintptr_t lo = r.base > a ? r.base : a;
		uintptr_t hi = r.end < e ? r.end : e;
		int left;

		at = r.end;
		if (lo == r.base && hi == r.end) {
			if (!_pmg_reg_remove(r.base, r.end, &id))
				_pmg.dom[id].nranges--;
		} else {
			left = _pmg_reg_cut(&r, lo, hi);
			if (left < 0) {
				/* kept whole: the unmap (interposed) drops
				 * it, untagging the rest */
				rc = left;
				continue;
			}
			_pmg.dom[r.dom].nranges += (unsigned)left - 1;
		}
		/* the caller unmaps it next: read-write, key 0, as the
		 * whole range's pmg_unprotect() leaves it */
		(void)_pmg.prim->untag((void *)lo, hi - lo);
	}
	x = _pmg_dom_of(d);
	if (!rc)
		rc = x ? (int)x->nranges : 0;
	pthread_mutex_unlock(&_pmg.lock);
	return rc;
}
