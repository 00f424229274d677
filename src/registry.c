// SPDX-License-Identifier: MIT
/*
 * The protected-range registry (V8's pgmap / devmap_protected()) and
 * the table machinery pooltab.c's pool table shares: a sorted array of
 * non-overlapping [base, end) ranges, searched in O(log n).
 *
 * Readers take no lock and never retry: the left-right scheme (Ramalhete
 * and Correia).  There are two copies of the array.  A reader joins the
 * reader count readers[vi], reads the copy lr names, and leaves.  A writer
 * (serialised by the caller's lock: _pmg.lock for the registry, the pool
 * lock for the pool table) changes the copy readers do not use, publishes
 * it (lr), then moves new readers to the other count (vi) and waits until
 * both counts have drained of readers that may still read the old copy,
 * and finally makes the old copy equal to the new one.  A reader's work is
 * bounded (two atomic adds, two loads, a binary search), so a lookup can
 * neither starve nor give up: the seqlock this replaces answered "no
 * range" after 1,000 retries when writers kept it busy.  Only writers
 * wait, and only for readers already inside.
 *
 * A copy readers cannot reach is changed, grown and freed with plain
 * stores: the reader counts' atomics order it with every reader.  AS-safe
 * readers: the fault handlers use them; a writer never runs inside a
 * handler, and a handler that interrupts a writer's wait reads the
 * published copy and leaves, so the wait ends.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define SC __ATOMIC_SEQ_CST

/* ------------------------------------------------------------ readers */

const struct _pmg_range *_pmg_rt_enter(struct _pmg_rtab *t, size_t *n,
				       int *slot)
{
	int vi = __atomic_load_n(&t->vi, SC), lr;

	__atomic_add_fetch(&t->readers[vi], 1, SC);
	lr = __atomic_load_n(&t->lr, SC);
	*slot = vi;
	*n = t->c[lr].n;
	return t->c[lr].r;
}

void _pmg_rt_leave(struct _pmg_rtab *t, int slot)
{
	__atomic_sub_fetch(&t->readers[slot], 1, __ATOMIC_RELEASE);
}

size_t _pmg_rt_search(const struct _pmg_range *r, size_t n, uintptr_t addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Does r[@i], the first range ending above @addr (_pmg_rt_search()),
 * hold @addr?  One test for every lookup of the registry. */
static inline bool holds(const struct _pmg_range *r, size_t n, size_t i,
			 uintptr_t addr)
{
	return i < n && r[i].base <= addr;
}

bool _pmg_rt_around(const struct _pmg_range *r, size_t n, size_t i,
		    uintptr_t addr, struct _pmg_range *out)
{
	if (holds(r, n, i, addr)) {
		*out = r[i];
		return true;
	}
	out->base = i ? r[i - 1].end : 0;
	out->end = out->lim = i < n ? r[i].base : UINTPTR_MAX;
	out->dom = 0;
	out->alias = 0;
	out->obase = out->oend = 0;
	return false;
}

unsigned long _pmg_rt_gen;

/* ------------------------------------------------------------ writers */

/*
 * A fork child has only the forking thread, which is not inside a read
 * (fork is not called from one): readers other threads had inside at the
 * fork never leave in the child.  Its counts start at zero.
 */
static struct _pmg_rtab *tabs[_PMG_RT_NR];

static void atfork_child(void)
{
	unsigned i;

	for (i = 0; i < _PMG_RT_NR; i++)
		if (tabs[i])
			tabs[i]->readers[0] = tabs[i]->readers[1] = 0;
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void atfork_register(void)
{
	pthread_atfork(NULL, NULL, atfork_child);
}

static void register_tab(struct _pmg_rtab *t)
{
	if (tabs[t->id])
		return;
	pthread_once(&atfork_once, atfork_register);
	tabs[t->id] = t;
}

size_t _pmg_rt_count(const struct _pmg_rtab *t)
{
	return t->c[t->lr].n;
}

static void wait_drained(struct _pmg_rtab *t, int slot)
{
	unsigned spins = 0;

	while (__atomic_load_n(&t->readers[slot], __ATOMIC_ACQUIRE)) {
		if (++spins < 256)
			__builtin_ia32_pause();
		else
			sched_yield();
	}
}

/*
 * Publish the copy readers do not use (already changed) and wait until no
 * reader can be reading the other one; then bring that one up to date.
 * @spare, if not NULL, is an array of the new copy's capacity for it.
 */
static void publish(struct _pmg_rtab *t, struct _pmg_range *spare)
{
	int lr = t->lr, vi = t->vi;
	struct _pmg_rcopy *now = &t->c[!lr], *old = &t->c[lr];

	__atomic_store_n(&t->lr, !lr, SC);
	__atomic_add_fetch(&_pmg_rt_gen, 1, SC);
	wait_drained(t, !vi);
	__atomic_store_n(&t->vi, !vi, SC);
	wait_drained(t, vi);
	/* no reader can reach @old now */
	if (spare) {
		free(old->r);
		old->r = spare;
		old->cap = now->cap;
	}
	memcpy(old->r, now->r, now->n * sizeof(now->r[0]));
	old->n = now->n;
}

/* Room for one more range in the copy readers do not use: grown if full,
 * *@spare then the other copy's new array (for publish()).  0, -ENOMEM. */
static int rt_grow(struct _pmg_rcopy *w, struct _pmg_range **spare)
{
	size_t cap = w->cap ? w->cap * 2 : 16;
	struct _pmg_range *a;

	*spare = NULL;
	if (w->n < w->cap)
		return 0;
	a = malloc(cap * sizeof(*a));
	*spare = malloc(cap * sizeof(**spare));
	if (!a || !*spare) {
		free(a);
		free(*spare);
		*spare = NULL;
		return -ENOMEM;
	}
	if (w->n)
		memcpy(a, w->r, w->n * sizeof(*a));
	free(w->r);
	w->r = a;
	w->cap = cap;
	return 0;
}

int _pmg_rt_insert(struct _pmg_rtab *t, const struct _pmg_range *r)
{
	struct _pmg_rcopy *w = &t->c[!t->lr];
	struct _pmg_range *spare;
	size_t i;

	register_tab(t);
	i = _pmg_rt_search(w->r, w->n, r->base);
	if (i < w->n && w->r[i].base < r->end)
		return -EEXIST;
	if (rt_grow(w, &spare))
		return -ENOMEM;
	memmove(&w->r[i + 1], &w->r[i], (w->n - i) * sizeof(w->r[0]));
	w->r[i] = *r;
	w->n++;
	publish(t, spare);
	return 0;
}

int _pmg_rt_split(struct _pmg_rtab *t, uintptr_t base, uintptr_t end,
		  const struct _pmg_range *p, size_t np)
{
	struct _pmg_rcopy *w = &t->c[!t->lr];
	struct _pmg_range *spare = NULL;
	size_t i = _pmg_rt_search(w->r, w->n, base);

	if (i >= w->n || w->r[i].base != base || w->r[i].end != end ||
	    np > 2)
		return -ENOENT;
	if (np == 2 && rt_grow(w, &spare))
		return -ENOMEM;
	if (np == 2)
		memmove(&w->r[i + 2], &w->r[i + 1],
			(w->n - i - 1) * sizeof(w->r[0]));
	else if (np == 0)
		memmove(&w->r[i], &w->r[i + 1],
			(w->n - i - 1) * sizeof(w->r[0]));
	if (np)
		memcpy(&w->r[i], p, np * sizeof(*p));
	w->n = w->n - 1 + np;
	publish(t, spare);
	return 0;
}

int _pmg_rt_remove(struct _pmg_rtab *t, uintptr_t base, uintptr_t end,
		   struct _pmg_range *out)
{
	struct _pmg_rcopy *w = &t->c[!t->lr];
	size_t i = _pmg_rt_search(w->r, w->n, base);

	if (i >= w->n || w->r[i].base != base || (end && w->r[i].end != end))
		return -ENOENT;
	if (out)
		*out = w->r[i];
	memmove(&w->r[i], &w->r[i + 1], (w->n - i - 1) * sizeof(w->r[0]));
	w->n--;
	publish(t, NULL);
	return 0;
}

/* ----------------------------------------------------------- registry */

static struct _pmg_rtab reg = { .id = _PMG_RT_REGISTRY };

/* Whether [base, end) overlaps a registered range (lock held). */
bool _pmg_reg_overlaps(uintptr_t base, uintptr_t end)
{
	const struct _pmg_rcopy *c = &reg.c[reg.lr];
	size_t i = _pmg_rt_search(c->r, c->n, base);

	return i < c->n && c->r[i].base < end;
}

int _pmg_reg_insert(uintptr_t base, uintptr_t end, int id)
{
	struct _pmg_range r = {
		.base = base, .end = end, .lim = end, .dom = id,
		.obase = base, .oend = end
	};
	return _pmg_rt_insert(&reg, &r);
}

int _pmg_reg_cut(const struct _pmg_range *r, uintptr_t a, uintptr_t e)
{
	struct _pmg_range p[2];
	size_t np = 0;
	int rc;

	if (a < r->base)
		a = r->base;
	if (e > r->end)
		e = r->end;
	if (a > r->base) {
		p[np] = *r;
		p[np].end = p[np].lim = a;
		np++;
	}
	if (e < r->end) {
		p[np] = *r;
		p[np].base = e;
		np++;
	}
	rc = _pmg_rt_split(&reg, r->base, r->end, p, np);
	if (rc)
		return rc;
	_pmg_cap_drop(a, e); /* no longer ours to cap */
	return (int)np;
}

int _pmg_reg_remove(uintptr_t base, uintptr_t end, int *id)
{
	struct _pmg_range r;
	int rc = _pmg_rt_remove(&reg, base, end, &r);

	if (!rc) {
		*id = r.dom;
		_pmg_cap_drop(r.base, r.end); /* no longer ours to cap */
	}
	return rc;
}

/*
 * The protected range holding @addr, or the gap between ranges around it
 * (dom 0; for a cache validated by _pmg_rt_gen read before the call).
 * AS-safe.
 */
void _pmg_reg_interval(uintptr_t addr, struct _pmg_range *out)
{
	const struct _pmg_range *r;
	size_t n;
	int slot;

	r = _pmg_rt_enter(&reg, &n, &slot);
	(void)_pmg_rt_around(r, n, _pmg_rt_search(r, n, addr), addr, out);
	_pmg_rt_leave(&reg, slot);
	out->lim = out->end;
	out->alias = 0;
}

/* AS-safe.  0 and *out filled, or -ENOENT (*out untouched): never a
 * wrong answer. */
int _pmg_reg_find(uintptr_t addr, struct _pmg_range *out)
{
	struct _pmg_range r;

	_pmg_reg_interval(addr, &r);
	if (!r.dom)
		return -ENOENT;
	*out = r;
	return 0;
}

/*
 * The domain number of the protected range holding @addr, and (*end) that
 * range's end; 0 if none (*end untouched).  The persistence calls' lookup
 * of a source or of a destination across a range's edge: it reads the
 * three fields they need where _pmg_reg_find() copies the whole range
 * twice.  AS-safe.
 */
int _pmg_reg_dom_at(uintptr_t addr, uintptr_t *end)
{
	const struct _pmg_range *r;
	size_t n, i;
	int slot, dom = 0;

	r = _pmg_rt_enter(&reg, &n, &slot);
	i = _pmg_rt_search(r, n, addr);
	if (holds(r, n, i, addr)) {
		dom = r[i].dom;
		*end = r[i].end;
	}
	_pmg_rt_leave(&reg, slot);
	return dom;
}

int _pmg_reg_first_overlap(uintptr_t base, uintptr_t end,
			   struct _pmg_range *out)
{
	const struct _pmg_range *r;
	size_t n, i;
	int slot, rc = -ENOENT;

	r = _pmg_rt_enter(&reg, &n, &slot);
	i = _pmg_rt_search(r, n, base);
	if (i < n && r[i].base < end) {
		*out = r[i];
		rc = 0;
	}
	_pmg_rt_leave(&reg, slot);
	return rc;
}

int _pmg_reg_each(int id, int (*fn)(const struct _pmg_range *, void *),
		  void *arg)
{
	const struct _pmg_rcopy *c = &reg.c[reg.lr];
	size_t i;
	int rc, first = 0;

	for (i = 0; i < c->n; i++) {
		if (c->r[i].dom != id)
			continue;
		rc = fn(&c->r[i], arg);
		if (rc && !first)
			first = rc;
	}
	return first;
}
