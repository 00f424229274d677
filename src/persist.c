// SPDX-License-Identifier: MIT
/*
 * libpmem-compatible persistence: flush, drain, persist, msync and the
 * memcpy/memmove/memset family in _persist and _nodrain forms.  The CPU
 * paths are picked once (CPUID, then the PMGUARD_* variables, PMDK's
 * PMEM_* manner, parsed by options.c's table) and handed out as function
 * pointers.  The copy calls are
 * the pmem-driver analog of the seeds: they open the write window on the
 * destination's domain themselves, so callers need no guards.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "options.h"
#include "persist.h"

struct _pmg_persist _pmg_persist_cfg;
int _pmg_persist_cfg_ready;

/* The PMGUARD_* persistence variables, as options.c parsed them. */
static struct _pmg_opts persist_opts;

/* ----------------------------------------------------------------- CPU */

struct cpu {
	bool clflush, clflushopt, clwb, avx2, avx512f;
};

static uint64_t xgetbv0(void)
{
#if defined(__x86_64__)
	uint32_t lo, hi;

	__asm__ volatile(".byte 0x0f,0x01,0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((uint64_t)hi << 32) | lo;
#else
	return 0;
#endif
}

static void cpu_probe(struct cpu *c)
{
	uint32_t r[4], max;
	bool osxsave, avx;
	uint64_t xcr0 = 0;

	memset(c, 0, sizeof(*c));
	_pmg_cpuid(0, 0, r);
	max = r[0];
	if (max < 1)
		return;
	_pmg_cpuid(1, 0, r);
	c->clflush = r[3] & (1u << 19);
	osxsave = r[2] & (1u << 27);
	avx = r[2] & (1u << 28);
	if (osxsave)
		xcr0 = xgetbv0();
	if (max < 7)
		return;
	_pmg_cpuid(7, 0, r);
	c->clflushopt = r[1] & (1u << 23);
	c->clwb = r[1] & (1u << 24);
	/* the OS must save YMM (XCR0 bits 1, 2) and ZMM (5, 6, 7) state */
	c->avx2 = avx && (r[1] & (1u << 5)) && (xcr0 & 0x6) == 0x6;
	c->avx512f = c->avx2 && (r[1] & (1u << 16)) && (xcr0 & 0xe6) == 0xe6;
}

/* -------------------------------------------------------------- eADR */

int _pmg_auto_flush_at(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int regions = 0, all = 1;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		char path[PATH_MAX], buf[32] = "";
		FILE *f;
		size_t n;

		if (strncmp(e->d_name, "region", 6))
			continue;
		snprintf(path, sizeof(path), "%s/%s/persistence_domain", dir,
			 e->d_name);
		f = fopen(path, "re");
		if (!f) {
			all = 0;	/* no such file: an older kernel */
			continue;
		}
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		regions++;
		if (strcmp(buf, "cpu_cache"))
			all = 0;
	}
	closedir(d);
	return regions && all;
}

PMG_API int pmg_has_auto_flush(void)
{
	return _pmg_auto_flush_at("/sys/bus/nd/devices");
}

/* ---------------------------------------------------------- dispatch */

static void pick(struct _pmg_persist *p, const struct _pmg_opts *o,
		 const struct cpu *c)
{
	p->force = o->force;
	p->threshold = (size_t)o->threshold;
	if (o->no_flush == 1 || (o->no_flush != 0 && p->auto_flush == 1)) {
		p->flush = _pmg_flush_none;
		p->flush_name = "none";
	} else if (c->clwb && o->no_clwb != 1) {
		p->flush = _pmg_flush_clwb;
		p->flush_name = "clwb";
	} else if (c->clflushopt && o->no_clflushopt != 1) {
		p->flush = _pmg_flush_clflushopt;
		p->flush_name = "clflushopt";
	} else {
		p->flush = _pmg_flush_clflush;
		p->flush_name = "clflush";
	}
	if (o->no_movnt == 1) {
		p->movnt = NULL;
		p->setnt = NULL;
		p->movnt_name = "none";
	} else if (c->avx512f && o->no_avx512f != 1) {
		p->movnt = _pmg_movnt_avx512f;
		p->setnt = _pmg_setnt_avx512f;
		p->movnt_name = "avx512f";
	} else if (c->avx2 && o->no_avx2 != 1) {
		p->movnt = _pmg_movnt_avx2;
		p->setnt = _pmg_setnt_avx2;
		p->movnt_name = "avx2";
	} else {
		p->movnt = _pmg_movnt_sse2;
		p->setnt = _pmg_setnt_sse2;
		p->movnt_name = "sse2";
	}
}

void _pmg_persist_opts_reset(void)
{
	_pmg_opts_defaults(&persist_opts);
}

int _pmg_persist_opt(struct _pmg_persist *p, const char *name,
		     const char *value)
{
	struct _pmg_opts o = persist_opts;
	struct cpu c;
	int rc;

	rc = _pmg_opt_parse(&o, name, value);
	if (rc) {
		pmg_strlcpy(p->env_msg, pmg_errormsg(), sizeof(p->env_msg));
		return rc;
	}
	persist_opts = o;
	cpu_probe(&c);
	pick(p, &o, &c);
	return 0;
}

/* A bad value: report it, keep the default, remember the first. */
static void bad_env(const char *msg, void *arg)
{
	struct _pmg_persist *p = arg;

	fprintf(stderr, "pmguard: %s (ignored)\n", msg);
	if (!p->env_err) {
		p->env_err = -EINVAL;
		pmg_strlcpy(p->env_msg, msg, sizeof(p->env_msg));
	}
}

static void persist_init(void)
{
	struct _pmg_persist *p = &_pmg_persist_cfg;
	struct cpu c;

	(void)_pmg_opts_from_env_group(&persist_opts, _PMG_OPT_PERSIST, bad_env,
				       p);
	p->auto_flush = pmg_has_auto_flush();
	cpu_probe(&c);
	pick(p, &persist_opts, &c);
	__atomic_store_n(&_pmg_persist_cfg_ready, 1, __ATOMIC_RELEASE);
}

static pthread_once_t persist_once = PTHREAD_ONCE_INIT;

void _pmg_persist_init_once(void)
{
	pthread_once(&persist_once, persist_init);
}

int _pmg_persist_env_check(void)
{
	const struct _pmg_persist *p = _pmg_persist_get();

	if (p->env_err)
		return _pmg_err(p->env_err, "%s", p->env_msg);
	return 0;
}

PMG_API int pmg_persist_get_info(struct pmg_persist_info *pi)
{
	const struct _pmg_persist *p = _pmg_persist_get();

	if (!pi)
		return _pmg_err(-EINVAL, "pmg_persist_get_info: pi is NULL");
	pi->flush = p->flush_name;
	pi->movnt = p->movnt_name;
	pi->movnt_threshold = p->threshold;
	pi->auto_flush = p->auto_flush;
	pi->is_pmem_force = p->force;
	return _pmg_persist_env_check();
}

/* ------------------------------------------------------------ windows */

/*
 * The windows one call needs: write windows on the domains of the first
 * and last byte of the destination, a read window on an access-disabled
 * domain of the source.  A protected range lying strictly inside the
 * destination (touching neither end) is not looked for: a write to it
 * faults and is reported, never silently done.
 *
 * On the mprotect backend a destination inside one protected range gets a
 * page window (pagewin.c): write access on the pages it touches only, so
 * another thread's stray write elsewhere in the domain still faults
 * during the call.  PKU windows are the calling thread's alone already.
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
	struct _pmg_range r;

	if (_pmg_reg_find_cached(addr, &r))
		return NULL;
	*end = r.end;
	return _pmg.dom[r.key].h;
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

static int guard_range(struct guard *g, const void *addr, size_t len,
		       int acc)
{
	uintptr_t a = (uintptr_t)addr, last = a + len - 1, end = 0;
	struct pmg_domain *d;
	int rc;

	if (acc == PMG_READ && !any_noaccess())
		return 0;
	d = range_of(a, &end);
	if (d && acc == PMG_WRITE && last < end && !_pmg_fast && !g->pw) {
		rc = _pmg_pw_open(d, addr, len);
		if (rc > 0) {
			g->pw = rc;
			return 0;
		}
		if (rc < 0)
			return rc;
		/* table full: a domain window */
	}
	if (d) {
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

/* ------------------------------------------------- flush, drain, msync */

static int msync_range(const void *addr, size_t len)
{
	uintptr_t b = (uintptr_t)addr & ~(PMG_PAGE_SIZE - 1);

	if (msync((void *)b, (uintptr_t)addr + len - b, MS_SYNC))
		return _pmg_err(-errno, "msync(%p, %zu): %s", addr, len,
				strerror(errno));
	return 0;
}

/*
 * The checks every persistence call makes on its destination: a range
 * that wraps, or starts in the NULL page, is -EINVAL; one that touches an
 * open pool's mapping but does not lie within its usable bytes (the tail
 * of the last page past the pool's size, or across into the next pool)
 * is -ERANGE: a store there would succeed and be lost.  *@np: the range
 * touches a non-pmem pool (its flush is msync).  Other unmapped memory is
 * not checked (a flush of it faults, as in libpmem).  Lock-free.
 */
static int range_check(const char *fn, const void *addr, size_t len,
		       bool *np)
{
	uintptr_t a = (uintptr_t)addr;

	*np = false;
	if (a + len < a)
		return _pmg_err(-EINVAL, "%s(%p, %zu): the range wraps past "
				"the end of the address space", fn, addr, len);
	if (a < PMG_PAGE_SIZE)
		return _pmg_err(-EINVAL, "%s(%p, %zu): the range starts in "
				"the NULL page", fn, addr, len);
	if (!__atomic_load_n(&_pmg_open_pools, __ATOMIC_RELAXED))
		return 0;
	if (_pmg_pool_check_range(addr, len, np))
		return _pmg_err(-ERANGE, "%s(%p, %zu): the range is not "
				"within the usable bytes of the pool it "
				"touches (a store past a pool's size is "
				"lost)", fn, addr, len);
	return 0;
}

PMG_API int pmg_msync(const void *addr, size_t len)
{
	uintptr_t b = (uintptr_t)addr & ~(PMG_PAGE_SIZE - 1);
	bool np;
	int rc;

	if (!len)
		return 0;
	rc = range_check("pmg_msync", addr, len, &np);
	if (rc)
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
	bool np;
	int rc;

	rc = range_check(fn, addr, len, &np);
	if (rc)
		return rc;
	if (np)
		return msync_range(addr, len);
	rc = guard_range(&g, addr, len, PMG_READ);
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
		uintptr_t l = (uintptr_t)a & ~(PMG_CL - 1),
			  e = (uintptr_t)a + n;

		do {
			__asm__ volatile(".byte 0x66; xsaveopt %0"
					 : "+m"(*(volatile char *)l));
			l += PMG_CL;
		} while (l < e);
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
 * Non-temporal copy: the partial lines at either end are copied with
 * plain stores and flushed; the aligned middle is streamed (no flush
 * needed).  Safe for overlap with dest below src; the caller sends dest
 * above an overlapping src to the temporal path (a backward copy).
 */
static void nt_move(const struct _pmg_persist *p, char *d, const char *s,
		    size_t n)
{
	size_t head = (size_t)(-(uintptr_t)d & (PMG_CL - 1)), body;

	if (head) {
		if (head > n)
			head = n;
		move_small(d, s, head);
		flush_lines(p, d, head);
		d += head;
		s += head;
		n -= head;
	}
	body = n & ~(PMG_CL - 1);
	if (body) {
		p->movnt(d, s, body);
		d += body;
		s += body;
		n -= body;
	}
	if (n) {
		move_small(d, s, n);
		flush_lines(p, d, n);
	}
}

static void nt_set(const struct _pmg_persist *p, char *d, int c, size_t n)
{
	size_t head = (size_t)(-(uintptr_t)d & (PMG_CL - 1)), body;

	if (head) {
		if (head > n)
			head = n;
		memset(d, c, head);
		p->flush(d, head);
		d += head;
		n -= head;
	}
	body = n & ~(PMG_CL - 1);
	if (body) {
		p->setnt(d, c, body);
		d += body;
		n -= body;
	}
	if (n) {
		memset(d, c, n);
		p->flush(d, n);
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
	struct guard g = { .n = 0, .pw = 0 };
	char *d = dest;
	bool np;
	int rc;

	if (__builtin_expect(flags & ~PMG_F_MEM_VALID_FLAGS, 0))
		return fail(_pmg_err(-EINVAL, "%s: unknown flags %#x", fn,
				     flags & ~PMG_F_MEM_VALID_FLAGS));
	if (__builtin_expect(!len, 0))
		return dest;
	if (__builtin_expect(!dest || (!set && !src), 0))
		return fail(_pmg_err(-EINVAL, "%s: NULL %s with length %zu",
				     fn, dest ? "source" : "destination",
				     len));
	rc = range_check(fn, dest, len, &np);
	if (rc == 0 && src && (uintptr_t)src + len < (uintptr_t)src)
		rc = _pmg_err(-EINVAL, "%s: source %p + %zu wraps", fn, src,
			      len);
	if (rc)
		return fail(rc);
	rc = guard_range(&g, dest, len, PMG_WRITE);
	if (rc == 0 && src)
		rc = guard_range(&g, src, len, PMG_READ);
	if (rc) {
		guard_close(&g);
		return fail(rc);
	}
	if (flags & PMG_F_MEM_NOFLUSH) {
		if (src)
			memmove(d, src, len);
		else
			memset(d, c, len);
		guard_close(&g);
		return dest;
	}
	if (np) {
		/* not pmem: the flush is msync, which also drains */
		if (src)
			memmove(d, src, len);
		else
			memset(d, c, len);
		rc = msync_range(dest, len);
		guard_close(&g);
		return rc ? fail(rc) : dest;
	}
	if (!want_nt(p, flags, len) ||
	    (src && (uintptr_t)d - (uintptr_t)src < len && d != src)) {
		if (src && len <= PMG_CL)
			move_small(d, src, len);
		else if (src)
			memmove(d, src, len);
		else
			memset(d, c, len);
		flush_lines(p, d, len);
	} else if (src) {
		nt_move(p, d, src, len);
	} else {
		nt_set(p, d, c, len);
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
