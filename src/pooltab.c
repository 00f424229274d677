// SPDX-License-Identifier: MIT
/*
 * The pool layer's shared state, below everything that uses it: the pool
 * lock (held across fork()), the table of the open pools' mappings that the
 * persistence calls check their addresses against (which are pmem, which
 * are flushed by msync, where a pool's alias is), and the shared domains'
 * table whose counts pmg_domain_delete() asks.  Apart from pool.c (which
 * creates the domains and fills the table) so that domain.c, persist.c and
 * thread.c can reach it without depending on the pools' calls: docs/design.md,
 * "Object dependencies".
 */
#define _GNU_SOURCE
#include <string.h>

#include "pool.h"

#define POOL_MAX 1024

/* Taken by the pool calls, the quarantine (quarantine.c) and fork. */
pthread_mutex_t _pmg_pool_lock = PTHREAD_MUTEX_INITIALIZER;

/* fork: held across it (before _pmg.lock, the usual order), so a child
 * never inherits it locked or the pool table half-written. */
void _pmg_pool_fork_prepare(void)
{
	pthread_mutex_lock(&_pmg_pool_lock);
}

void _pmg_pool_fork_release(void)
{
	pthread_mutex_unlock(&_pmg_pool_lock);
}

/*
 * The shared domains: [0] "pmem" (write-disabled), [1] "pmem-noaccess".
 * Each is deleted with its last pool and re-created, with its handle in
 * .h each time (a handle allocated per creation would leak 16 bytes per
 * last close and reopen: domain handles are never freed).
 */
struct _pmg_shared_dom _pmg_pool_shared[2];

/* --------------------------------------------------------- pool table */

/*
 * The open pools' mappings, sorted: [base, base + maplen), lim the end of
 * the usable bytes, dom 1 if pmem.  Written under _pmg_pool_lock, read without
 * locks (registry.c's left-right tables: readers never fail).
 */
static struct _pmg_rtab ptab = { .id = _PMG_RT_POOLS };

int _pmg_pool_tab_insert(const struct pmg_pool *p)
{
	struct _pmg_range r = {
		.base = (uintptr_t)p->addr,
		.end = (uintptr_t)p->addr + p->maplen,
		.lim = (uintptr_t)p->addr + p->size,
		.dom = p->pmem,
		.alias = (uintptr_t)p->alias,
	};
	int rc;

	if (_pmg_rt_count(&ptab) >= POOL_MAX)
		return _pmg_err(-EMFILE, "too many pools open (%d)", POOL_MAX);
	rc = _pmg_rt_insert(&ptab, &r);
	if (rc)
		return _pmg_err(rc, "registering the pool at %p: %s", p->addr,
				strerror(-rc));
	return 0;
}

void _pmg_pool_tab_remove(const struct pmg_pool *p)
{
	(void)_pmg_rt_remove(&ptab, (uintptr_t)p->addr, 0, NULL);
}

/*
 * Scan the pools overlapping [a, a+len) (len > 0, no wrap): whether any is
 * not pmem, whether one pmem pool's usable bytes hold it all, and whether
 * it passes the usable end of a pool it starts in or touches (the tail of
 * the last page, or the next pool).  With @iv, the interval around @a in
 * which every such range gets the same answers: one pool's usable bytes
 * (iv->dom: the pool is not pmem; iv->alias: its writable alias, 0: none)
 * or a gap without pools.  Lock-free, AS-safe, never fails.
 */
static void ptab_scan(uintptr_t a, size_t len, bool *any_nonpmem, bool *in_pmem,
		      bool *outside, struct _pmg_range *iv)
{
	uintptr_t end = a + len;
	const struct _pmg_range *r;
	bool np = false, in = false, out = false;
	size_t n, i;
	int slot;

	r = _pmg_rt_enter(&ptab, &n, &slot);
	i = _pmg_rt_search(r, n, a);
	if (iv && _pmg_rt_around(r, n, i, a, iv)) {
		iv->end = r[i].lim;
		iv->dom = !r[i].dom;
	}
	for (; i < n && r[i].base < end; i++) {
		if (!r[i].dom)
			np = true;
		if (a < r[i].base || end > r[i].lim)
			out = true;
		else if (r[i].dom)
			in = true;
	}
	_pmg_rt_leave(&ptab, slot);
	*any_nonpmem = np;
	*in_pmem = in;
	if (outside)
		*outside = out;
}

int _pmg_pool_range_pmem(const void *addr, size_t len)
{
	bool np, in;

	if ((uintptr_t)addr + len < (uintptr_t)addr)
		return 0;
	ptab_scan((uintptr_t)addr, len, &np, &in, NULL, NULL);
	return in;
}

int _pmg_pool_interval(uintptr_t a, size_t len, struct _pmg_range *iv)
{
	bool np, in, out;

	if (a + len < a)
		return -EINVAL;
	ptab_scan(a, len, &np, &in, &out, iv);
	return out ? -ERANGE : 0;
}

/*
 * pmg_domain_delete() of @d, the pool layer's shared domain while pools
 * use it, would leave the layer holding a dead domain (every later create
 * failed): refused.  The open pools on @d, 0 if it is not one.  Reads
 * without _pmg_pool_lock: pmg_domain_delete() holds _pmg.lock, taken after it.
 */
unsigned _pmg_pool_domain_refs(const struct pmg_domain *d)
{
	unsigned i;

	for (i = 0; i < 2 && d; i++)
		if (__atomic_load_n(&_pmg_pool_shared[i].d, __ATOMIC_ACQUIRE) ==
		    d)
			return __atomic_load_n(&_pmg_pool_shared[i].refs,
					       __ATOMIC_ACQUIRE);
	return 0;
}
