// SPDX-License-Identifier: MIT
/*
 * libpmem-compatible persistence: flush, drain, persist, msync and the
 * memcpy/memmove/memset family in _persist and _nodrain forms, with the
 * per-thread destination cache and the windows each call opens.  The CPU
 * paths come from persist_cfg.c (picked once, handed out as function
 * pointers); which addresses are pmem, and where a pool's alias is, from
 * the pool table (pooltab.c).  The copy calls are the analog of V8's pmem
 * driver: they open the write window on the destination's domain
 * themselves, so callers need no guards.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "persist.h"
#include "pool.h"

/* ------------------------------------------------------------ windows */

/*
 * The windows one call needs: a write window on the domain of the
 * destination's first and last byte, a read window on an access-disabled
 * domain of the source.  A protected range lying strictly inside the
 * destination (touching neither end) is not looked for: a write to it
 * faults and is reported, never silently done.
 *
 * On the mprotect backend a destination inside a protected pool is
 * written through the pool's alias (pool.c), a second mapping of its file
 * that only the library knows: no window at all, the pool's own mapping
 * stays write-protected, and another thread's stray write anywhere in it
 * still faults during the call.  A destination inside another protected
 * range gets a page window (mpwin.c): write access on the pages it
 * touches only.  PKU windows are the calling thread's alone already.
 */
struct guard {
	struct pmg_domain *d[4];
	int acc[4];
	int n;
	int pw;			/* page window entry, 0: none */
};

static bool needs_read_window(const struct pmg_domain *d)
{
	return _pmg_domain_noaccess(d);
}

static int guard_add(struct guard *g, struct pmg_domain *d, int acc)
{
	int i, rc;

	for (i = 0; i < g->n; i++)
		if (g->d[i] == d && g->acc[i] >= acc)
			return 0;
	if (acc == PMG_READ && !needs_read_window(d))
		return 0;
	rc = pmg_open(d, acc);
	if (rc)
		return rc;
	g->d[g->n] = d;
	g->acc[g->n] = acc;
	g->n++;
	return 0;
}

/* A write window for [@addr, +@len), which lies inside one protected
 * range of @d: a page window on mprotect, unless the table is full. */
static int guard_write(struct guard *g, struct pmg_domain *d,
		       const void *addr, size_t len)
{
	int rc;

	if (!_pmg_fast && !g->pw) {
		rc = _pmg_pw_open(d, addr, len);
		if (rc > 0) {
			g->pw = rc;
			return 0;
		}
		if (rc < 0)
			return rc;
		/* table full: a domain window */
	}
	return guard_add(g, d, PMG_WRITE);
}

static void guard_close_slow(struct guard *g)
{
	while (g->n > 0) {
		g->n--;
		(void)pmg_close(g->d[g->n], g->acc[g->n]);
	}
	if (g->pw) {
		_pmg_pw_close(g->pw);
		g->pw = 0;
	}
}

/* Inline: after a non-temporal copy every store (even a call's pushes)
 * waits for the write-combining buffers; most calls have nothing to close. */
static inline __attribute__((always_inline)) void guard_close(struct guard *g)
{
	if (__builtin_expect(g->n > 0 || g->pw, 0))
		guard_close_slow(g);
}

/* The domain of the protected range holding @addr, and its end. */
static struct pmg_domain *range_of(uintptr_t addr, uintptr_t *end)
{
	int dom = _pmg_reg_dom_at(addr, end);

	return dom ? _pmg.dom[dom].h : NULL;
}

/*
 * Is any live domain access-disabled by default?  Reads need windows only
 * there; without one the source lookups are skipped.  A racy read is fine:
 * a domain created concurrently has no ranges in this call's source yet.
 */
static bool any_noaccess(void)
{
	return __atomic_load_n(&_pmg_noaccess_domains, __ATOMIC_RELAXED) != 0;
}

/* The windows for [@addr, +@len) looked up at both ends (no cache): a
 * destination across a protected range's edge, or a source. */
static int guard_range(struct guard *g, const void *addr, size_t len,
		       int acc)
{
	uintptr_t a = (uintptr_t)addr, last = a + len - 1, end = 0;
	struct pmg_domain *d;
	int rc;

	if (acc == PMG_READ && !any_noaccess())
		return 0;
	d = range_of(a, &end);
	if (d) {
		if (acc == PMG_WRITE && last < end)
			return guard_write(g, d, addr, len);
		rc = guard_add(g, d, acc);
		if (rc)
			return rc;
		if (last < end)
			return 0;
	} else if (((a ^ last) & ~(PMG_PAGE_SIZE - 1)) == 0) {
		return 0;	/* ranges are whole pages: same answer */
	}
	d = range_of(last, &end);
	return d ? guard_add(g, d, acc) : 0;
}

/* ------------------------------------------------ the destination cache */

/*
 * What a call decides from its destination, for every destination inside
 * [lo, hi): that interval lies within one pool's usable bytes or a gap
 * without pools, and within one protected range or a gap without ranges.
 * So every destination in it passes the pool check with the same answer
 * (np: a non-pmem pool, whose flush is msync), needs the same write
 * window (on @d; NULL: none) and is written at the same offset (@delta:
 * the pool's alias minus its base; 0: in place).  True while _pmg_rt_gen
 * is @gen.
 */
struct dest {
	uintptr_t lo, hi, delta;
	struct pmg_domain *d;
	unsigned long gen;
	bool np;
};

/*
 * Each thread keeps the last one: the calls look up the same pools over
 * and over, and a hit is a few loads.  A signal handler on the same thread
 * may run in the middle of a fill: sc, odd during one, makes the handler
 * neither trust nor fill the entry, and a reader whose entry changed under
 * it (a handler filled it) takes that as a miss.  Compiler fences suffice:
 * only the thread (and its handlers) touch it.  Initial-exec TLS: no
 * __tls_get_addr() call in the shared library's hot path.
 */
static __thread struct {
	unsigned sc;
	struct dest e;
} dcache __attribute__((tls_model("initial-exec")));

#define SIGFENCE() __atomic_signal_fence(__ATOMIC_SEQ_CST)
#define SC __ATOMIC_SEQ_CST

static inline __attribute__((always_inline)) bool
dest_hit(uintptr_t a, size_t len, struct dest *t)
{
	unsigned sc = dcache.sc;

	SIGFENCE();
	*t = dcache.e;
	SIGFENCE();
	return !(sc & 1) && dcache.sc == sc &&
	       t->gen == __atomic_load_n(&_pmg_rt_gen, __ATOMIC_ACQUIRE) &&
	       a >= t->lo && a < t->hi && len <= t->hi - a;
}

/* A miss: both tables, then the cache.  1: the destination crosses a
 * protected range's edge (only t->np is set; not cached). */
static __attribute__((noinline)) int dest_fill(const char *fn, uintptr_t a,
					       size_t len, struct dest *t)
{
	struct _pmg_range pv, rv;
	unsigned sc = dcache.sc;

	*t = (struct dest){ .gen = __atomic_load_n(&_pmg_rt_gen, SC) };
	if (_pmg_pool_interval(a, len, &pv))
		return _pmg_err(-ERANGE, "%s(%p, %zu): the range is not "
				"within the usable bytes of the pool it "
				"touches (a store past a pool's size is "
				"lost)", fn, (void *)a, len);
	_pmg_reg_interval(a, &rv);
	t->np = pv.dom;
	t->lo = pv.base > rv.base ? pv.base : rv.base;
	t->hi = pv.end < rv.end ? pv.end : rv.end;
	t->d = rv.dom ? _pmg.dom[rv.dom].h : NULL;
	t->delta = t->d && pv.alias ? pv.alias - pv.base : 0;
	if (len > t->hi - a)
		return 1;
	if (!(sc & 1)) {
		dcache.sc = sc + 1;
		SIGFENCE();
		dcache.e = *t;
		SIGFENCE();
		dcache.sc = sc + 2;
	}
	return 0;
}

static __attribute__((noinline, cold)) int
dest_bad(const char *fn, const void *addr, size_t len)
{
	if ((uintptr_t)addr + len < (uintptr_t)addr)
		return _pmg_err(-EINVAL, "%s(%p, %zu): the range wraps past "
				"the end of the address space", fn, addr, len);
	return _pmg_err(-EINVAL, "%s(%p, %zu): the range starts in the NULL "
			"page", fn, addr, len);
}

/*
 * The checks every persistence call makes on its destination (len > 0),
 * and what it needs to know of it: a range that wraps, or starts in the
 * NULL page, is -EINVAL; one that touches an open pool's mapping but does
 * not lie within its usable bytes (the tail of the last page past the
 * pool's size, or across into the next pool) is -ERANGE: a store there
 * would succeed and be lost.  Other unmapped memory is not checked (a
 * flush of it faults, as in libpmem).  0: *t holds for the whole range;
 * 1: it crosses a protected range's edge (t->np only).  Lock-free, AS-safe.
 */
static inline __attribute__((always_inline)) int
dest_of(const char *fn, const void *addr, size_t len, struct dest *t)
{
	uintptr_t a = (uintptr_t)addr;
	struct dest m;
	int rc;

	if (__builtin_expect(a + len < a || a < PMG_PAGE_SIZE, 0))
		return dest_bad(fn, addr, len);
	if (__builtin_expect(dest_hit(a, len, t), 1))
		return 0;
	/* the miss fills a copy: *t stays in registers on the hot path */
	rc = dest_fill(fn, a, len, &m);
	*t = m;
	return rc;
}

/* ------------------------------------------------------ the source cache */

/*
 * The read window a source needs (some domain is access-disabled by
 * default: any_noaccess()), cached per thread as the destination is:
 * every source inside [lo, hi) lies within one protected range or one gap
 * without ranges, and needs a read window on @d (NULL: none) while
 * _pmg_rt_gen is @gen.  A hit is a few loads where the lookup is a
 * binary search under the registry's reader count.  The same sequence
 * count against a signal handler on the thread as dcache's.
 */
#define scache _pmg_scache /* thread.c holds it: see there */

/* A miss: the registry, then the cache; a source across a range's edge
 * is looked up at both ends (guard_range()) and not cached. */
static __attribute__((noinline)) int src_fill(struct guard *g, const void *addr,
					      size_t len)
{
	uintptr_t a = (uintptr_t)addr, last = a + len - 1;
	unsigned sc = scache.sc;
	struct _pmg_src e = { .gen = __atomic_load_n(&_pmg_rt_gen, SC) };
	struct _pmg_range rv;

	_pmg_reg_interval(a, &rv);
	if (last >= rv.end)
		return guard_range(g, addr, len, PMG_READ);
	e.lo = rv.base;
	e.hi = rv.end;
	if (rv.dom && needs_read_window(_pmg.dom[rv.dom].h))
		e.d = _pmg.dom[rv.dom].h;
	if (!(sc & 1)) {
		scache.sc = sc + 1;
		SIGFENCE();
		scache.e = e;
		SIGFENCE();
		scache.sc = sc + 2;
	}
	return e.d ? guard_add(g, e.d, PMG_READ) : 0;
}

/* The read window for the source [@addr, +@len) (len > 0, no wrap). */
static inline __attribute__((always_inline)) int
guard_src(struct guard *g, const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr;
	unsigned sc;
	struct _pmg_src e;

	if (!any_noaccess())
		return 0;
	sc = scache.sc;
	SIGFENCE();
	e = scache.e;
	SIGFENCE();
	if (__builtin_expect(
		    !(sc & 1) && scache.sc == sc &&
			    e.gen == __atomic_load_n(&_pmg_rt_gen,
						     __ATOMIC_ACQUIRE) &&
			    a >= e.lo && a + len - 1 < e.hi,
		    1))
		return e.d ? guard_add(g, e.d, PMG_READ) : 0;
	return src_fill(g, addr, len);
}

/* ------------------------------------------------- flush, drain, msync */

static int msync_range(const void *addr, size_t len)
{
	uintptr_t b = (uintptr_t)addr & ~(PMG_PAGE_SIZE - 1);

	if (msync((void *)b, (uintptr_t)addr + len - b, MS_SYNC))
		return _pmg_err(-errno, "msync(%p, %zu): %s", addr, len,
				strerror(errno));
	return 0;
}

PMG_API int pmg_msync(const void *addr, size_t len)
{
	uintptr_t b = (uintptr_t)addr & ~(PMG_PAGE_SIZE - 1);
	struct dest t = { 0 };
	int rc;

	if (!len)
		return 0;
	rc = dest_of("pmg_msync", addr, len, &t);
	if (rc < 0)
		return rc;
	/*
	 * Device dax has no fsync: msync(2) of its mapping is EINVAL.  A
	 * range inside pmem pools needs only the flush and the drain.
	 */
	if (!msync((void *)b, (uintptr_t)addr + len - b, MS_SYNC))
		return 0;
	rc = -errno;
	if (rc != -EINVAL || _pmg_pool_range_pmem(addr, len) != 1)
		return _pmg_err(rc, "msync(%p, %zu): %s", addr, len,
				strerror(-rc));
	_pmg_persist_get()->flush(addr, len);
	_pmg_sfence();
	return 0;
}

PMG_API void pmg_drain(void)
{
	_pmg_sfence();
}

static int flush(const struct _pmg_persist *p, const char *fn,
		 const void *addr, size_t len)
{
	struct guard g = { .n = 0, .pw = 0 };
	struct dest t = { 0 };
	int rc;

	rc = dest_of(fn, addr, len, &t);
	if (rc < 0)
		return rc;
	if (t.np)
		return msync_range(addr, len);
	if (!any_noaccess()) {
		p->flush(addr, len);
		return 0;
	}
	if (rc == 0 && t.delta) {
		/* the alias is readable: no read window */
		p->flush((const char *)addr + t.delta, len);
		return 0;
	}
	rc = guard_src(&g, addr, len);
	if (rc == 0)
		p->flush(addr, len);
	guard_close(&g);
	return rc;
}

PMG_API void pmg_flush(const void *addr, size_t len)
{
	if (len)
		(void)flush(_pmg_persist_get(), "pmg_flush", addr, len);
}

PMG_API int pmg_persist(const void *addr, size_t len)
{
	int rc;

	if (!len)
		return 0;
	rc = flush(_pmg_persist_get(), "pmg_persist", addr, len);
	_pmg_sfence();
	return rc;
}

PMG_API int pmg_is_pmem(const void *addr, size_t len)
{
	const struct _pmg_persist *p = _pmg_persist_get();

	if (p->force >= 0)
		return p->force;
	return _pmg_pool_range_pmem(addr, len ? len : 1);
}

/* ---------------------------------------------------------- copy, set */

/*
 * A move of 1..64 bytes without a call: every load before any store (so
 * overlap either way is fine), two possibly overlapping moves of the
 * largest power of two not above @n, as libpmem's small moves do.
 */
#define MOVE2(T, d, s, n)						\
	do {								\
		T x_, y_;						\
		__builtin_memcpy(&x_, (s), sizeof(T));			\
		__builtin_memcpy(&y_, (s) + (n) - sizeof(T), sizeof(T)); \
		__builtin_memcpy((d), &x_, sizeof(T));			\
		__builtin_memcpy((d) + (n) - sizeof(T), &y_, sizeof(T)); \
	} while (0)

struct b16 {
	uint64_t q[2];
};

struct b32 {
	uint64_t q[4];
};

static inline __attribute__((always_inline)) void
move_small(char *d, const char *s, size_t n)
{
	if (n >= 32)
		MOVE2(struct b32, d, s, n);
	else if (n >= 16)
		MOVE2(struct b16, d, s, n);
	else if (n >= 8)
		MOVE2(uint64_t, d, s, n);
	else if (n >= 4)
		MOVE2(uint32_t, d, s, n);
	else if (n >= 2)
		MOVE2(uint16_t, d, s, n);
	else
		*d = *s;
}

/* The flush of [@a, @a+@n): CLWB inline (the usual case), else the
 * picked loop. */
static inline __attribute__((always_inline)) void
flush_lines(const struct _pmg_persist *p, const void *a, size_t n)
{
#if defined(__x86_64__)
	if (p->flush == _pmg_flush_clwb) {
		_pmg_clwb_lines(a, n);
		return;
	}
#endif
	p->flush(a, n);
}

static bool want_nt(const struct _pmg_persist *p, unsigned flags, size_t n)
{
	if (!p->movnt)
		return false;
	if (flags & (PMG_F_MEM_NONTEMPORAL | PMG_F_MEM_WC))
		return true;
	if (flags & (PMG_F_MEM_TEMPORAL | PMG_F_MEM_WB))
		return false;
	return n >= p->threshold;
}

/*
 * Non-temporal copy from @s, or (@s NULL) set to @c: the partial lines at
 * either end are written with plain stores and flushed; the aligned middle
 * is streamed (no flush needed).  Safe for overlap with dest below src;
 * the caller sends dest above an overlapping src to the temporal path (a
 * backward copy).
 */
static inline __attribute__((always_inline)) void
nt_op(const struct _pmg_persist *p, char *d, const char *s, int c, size_t n)
{
	size_t head = (size_t)(-(uintptr_t)d & (PMG_CL - 1)), body;

	if (head) {
		if (head > n)
			head = n;
		if (s)
			move_small(d, s, head);
		else
			memset(d, c, head);
		flush_lines(p, d, head);
		d += head;
		s = s ? s + head : NULL;
		n -= head;
	}
	body = n & ~(PMG_CL - 1);
	if (body) {
		if (s)
			p->movnt(d, s, body);
		else
			p->setnt(d, c, body);
		d += body;
		s = s ? s + body : NULL;
		n -= body;
	}
	if (n) {
		if (s)
			move_small(d, s, n);
		else
			memset(d, c, n);
		flush_lines(p, d, n);
	}
}

static void *fail(int rc)
{
	errno = -rc;
	return NULL;
}

/* One call of the family: a copy from @src, or (@set) a memset with @c.
 * Inlined into each entry point: its flags and @set are constants there. */
static inline __attribute__((always_inline)) void *
mem_op(const char *fn, void *dest, const void *src, int c, size_t len,
       unsigned flags, bool set)
{
	const struct _pmg_persist *p = _pmg_persist_get();
	struct guard g;	/* only n and pw: zeroing d[] costs stores */
	const char *s = src;
	char *d = dest;
	struct dest t = { 0 };
	int rc;

	g.n = 0;
	g.pw = 0;
	if (__builtin_expect(flags & ~PMG_F_MEM_VALID_FLAGS, 0))
		return fail(_pmg_err(-EINVAL, "%s: unknown flags %#x", fn,
				     flags & ~PMG_F_MEM_VALID_FLAGS));
	if (__builtin_expect(!len, 0))
		return dest;
	if (__builtin_expect(!dest || (!set && !src), 0))
		return fail(_pmg_err(-EINVAL, "%s: NULL %s with length %zu",
				     fn, dest ? "source" : "destination",
				     len));
	if (__builtin_expect(s && (uintptr_t)s + len < (uintptr_t)s, 0))
		return fail(_pmg_err(-EINVAL, "%s: source %p + %zu wraps", fn,
				     src, len));
	rc = dest_of(fn, dest, len, &t);
	if (__builtin_expect(rc < 0, 0))
		return fail(rc);
	if (rc == 0 && t.delta && s &&
	    (uintptr_t)s < t.hi && (uintptr_t)s + len > t.lo) {
		/* a source in the same pool: read it through the alias too
		 * (memmove's overlap test needs both views alike) */
		if ((uintptr_t)s >= t.lo && (uintptr_t)s + len <= t.hi)
			s += t.delta;
		else
			t.delta = 0;	/* partly outside: a page window */
	}
	if (rc == 0 && t.delta)
		d += t.delta;
	else if (rc == 0 && t.d)
		rc = guard_write(&g, t.d, dest, len);
	else if (rc == 1)
		rc = guard_range(&g, dest, len, PMG_WRITE);
	if (rc == 0 && s == src && s)
		rc = guard_src(&g, s, len);
	if (rc) {
		guard_close(&g);
		return fail(rc);
	}
	if (flags & PMG_F_MEM_NOFLUSH) {
		if (s)
			memmove(d, s, len);
		else
			memset(d, c, len);
		guard_close(&g);
		return dest;
	}
	if (t.np) {
		/* not pmem: the flush is msync, which also drains */
		if (s)
			memmove(d, s, len);
		else
			memset(d, c, len);
		rc = msync_range(dest, len);
		guard_close(&g);
		return rc ? fail(rc) : dest;
	}
	if (!want_nt(p, flags, len) ||
	    (s && (uintptr_t)d - (uintptr_t)s < len && d != s)) {
		if (s && len <= PMG_CL)
			move_small(d, s, len);
		else if (s)
			memmove(d, s, len);
		else
			memset(d, c, len);
		flush_lines(p, d, len);
	} else {
		nt_op(p, d, s, c, len);
	}
	guard_close(&g);
	if (!(flags & PMG_F_MEM_NODRAIN))
		_pmg_sfence();
	return dest;
}

PMG_API void *pmg_memmove(void *dest, const void *src, size_t len,
			  unsigned flags)
{
	return mem_op("pmg_memmove", dest, src, 0, len, flags, false);
}

PMG_API void *pmg_memcpy(void *dest, const void *src, size_t len,
			 unsigned flags)
{
	return mem_op("pmg_memcpy", dest, src, 0, len, flags, false);
}

PMG_API void *pmg_memset(void *dest, int c, size_t len, unsigned flags)
{
	return mem_op("pmg_memset", dest, NULL, c, len, flags, true);
}

PMG_API void *pmg_memmove_persist(void *dest, const void *src, size_t len)
{
	return mem_op("pmg_memmove_persist", dest, src, 0, len, 0, false);
}

PMG_API void *pmg_memcpy_persist(void *dest, const void *src, size_t len)
{
	return mem_op("pmg_memcpy_persist", dest, src, 0, len, 0, false);
}

PMG_API void *pmg_memset_persist(void *dest, int c, size_t len)
{
	return mem_op("pmg_memset_persist", dest, NULL, c, len, 0, true);
}

PMG_API void *pmg_memmove_nodrain(void *dest, const void *src, size_t len)
{
	return mem_op("pmg_memmove_nodrain", dest, src, 0, len,
		      PMG_F_MEM_NODRAIN, false);
}

PMG_API void *pmg_memcpy_nodrain(void *dest, const void *src, size_t len)
{
	return mem_op("pmg_memcpy_nodrain", dest, src, 0, len,
		      PMG_F_MEM_NODRAIN, false);
}

PMG_API void *pmg_memset_nodrain(void *dest, int c, size_t len)
{
	return mem_op("pmg_memset_nodrain", dest, NULL, c, len,
		      PMG_F_MEM_NODRAIN, true);
}
