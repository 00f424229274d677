// SPDX-License-Identifier: MIT
/*
 * test-persist: the libpmem-compatible calls.  Copy/move/set results
 * against a reference for every flag combination, sizes and alignments
 * around the line size and the non-temporal threshold, overlapping moves;
 * each CPU path (flush instructions, SSE2/AVX2/AVX-512 streams) run
 * directly where the CPU has it; windows opened by the calls themselves
 * (and closed: a later plain store still faults); unprotected memory;
 * option parsing and eADR detection; bad arguments.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/stat.h>

#include "pmguard.h"
#include "tap.h"
#include "dirs.h"
#include "../src/persist.h"
#include "../src/options.h"

static char dir[256];
static const char *devdax;	/* PMG_DEVDAX: a device-dax device */
static int skipped;

#define tap_skip(n, w) (skipped++, tap_skip(n, w))

static uint64_t rng = 88172645463325252ULL;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void fill(unsigned char *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (unsigned char)next();
}

static const unsigned flag_sets[] = {
	0, PMG_F_MEM_NODRAIN, PMG_F_MEM_NONTEMPORAL, PMG_F_MEM_TEMPORAL,
	PMG_F_MEM_WC, PMG_F_MEM_WB, PMG_F_MEM_NOFLUSH,
	PMG_F_MEM_NONTEMPORAL | PMG_F_MEM_NODRAIN,
	PMG_F_MEM_TEMPORAL | PMG_F_MEM_WB | PMG_F_MEM_NODRAIN,
};

static const size_t sizes[] = {
	1, 7, 63, 64, 65, 127, 128, 255, 256, 257, 511, 1000, 4096, 4161,
	9000,
};

#define NFLAGS (sizeof(flag_sets) / sizeof(flag_sets[0]))
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/*
 * Copy, set and move into @dst (a pool or plain memory, @cap bytes) with
 * every flag set, size and a few alignments; compare with a reference.
 * @stride thins the combinations (the guest is slow).
 */
static int exercise(unsigned char *dst, size_t cap, int stride)
{
	static unsigned char src[16384], ref[16384], got[16384];
	size_t si, fi, k = 0;
	int bad = 0;

	for (fi = 0; fi < NFLAGS; fi++)
		for (si = 0; si < NSIZES; si++) {
			unsigned fl = flag_sets[fi];
			size_t n = sizes[si] & 0x3fff, sa, da, base;
			int c;

			if (k++ % (size_t)stride || n + 128 > sizeof(ref))
				continue;
			sa = next() % 64;
			da = next() % 64;
			base = 4096 + da;
			if (base + n + 4200 > cap)
				continue;
			fill(src, n + sa);
			/* copy */
			if (pmg_memcpy(dst + base, src + sa, n, fl) !=
			    dst + base || memcmp(dst + base, src + sa, n)) {
				tap_diag("memcpy n=%zu flags=%#x da=%zu sa=%zu",
					 n, fl, da, sa);
				bad++;
			}
			/* set; the bytes around it are untouched */
			c = (int)(next() & 0xff);
			memcpy(ref, dst + base - 64, n + 128);
			memset(ref + 64, c, n);
			if (pmg_memset(dst + base, c, n, fl) != dst + base ||
			    memcmp(dst + base - 64, ref, n + 128)) {
				tap_diag("memset n=%zu flags=%#x", n, fl);
				bad++;
			}
			/* overlapping moves, both directions */
			fill(ref, n + 128);
			pmg_memcpy(dst + base, ref, n + 128, fl);
			memmove(got, ref, n + 128);
			memmove(got + 37, got, n);
			pmg_memmove(dst + base + 37, dst + base, n, fl);
			if (memcmp(dst + base, got, n + 128)) {
				tap_diag("memmove up n=%zu flags=%#x", n, fl);
				bad++;
			}
			memmove(got, got + 29, n);
			pmg_memmove(dst + base, dst + base + 29, n, fl);
			if (memcmp(dst + base, got, n + 128)) {
				tap_diag("memmove down n=%zu flags=%#x", n, fl);
				bad++;
			}
		}
	if (!(flag_sets[0] & PMG_F_MEM_NODRAIN))
		pmg_drain();
	return bad;
}

static void t_info(void)
{
	struct pmg_persist_info pi;
	struct pmg_info in;
	int ok = 1;

	CHECK(ok, pmg_persist_get_info(&pi, sizeof(pi)) == 0);
	CHECK(ok, pmg_persist_get_info(NULL, sizeof(struct pmg_persist_info)) ==
			  -EINVAL);
	pmg_get_info(&in, sizeof(in));
	tap_diag("flush %s, movnt %s, threshold %zu, auto_flush %d, force %d",
		 pi.flush, pi.movnt, pi.movnt_threshold, pi.auto_flush,
		 pi.is_pmem_force);
	CHECK(ok, pi.auto_flush == 0 || pi.auto_flush == 1);
	CHECK(ok, pmg_has_auto_flush() == pi.auto_flush);
	if (!pi.auto_flush && !getenv("PMGUARD_NO_FLUSH") &&
	    !getenv("PMGUARD_NO_CLWB") && !getenv("PMGUARD_NO_CLFLUSHOPT"))
		CHECK(ok, !strcmp(pi.flush, in.cpu_clwb ? "clwb" :
				  in.cpu_clflushopt ? "clflushopt" :
				  "clflush"));
	CHECK(ok, !strcmp(pi.movnt, "avx512f") || !strcmp(pi.movnt, "avx2") ||
		  !strcmp(pi.movnt, "sse2") || !strcmp(pi.movnt, "none"));
	tap_ok(ok, "paths picked by CPUID: flush %s, movnt %s", pi.flush,
	       pi.movnt);
}

static void t_plain_memory(void)
{
	size_t cap = 64 << 10;
	unsigned char *m = aligned_alloc(4096, cap);
	int bad;

	memset(m, 0, cap);
	bad = exercise(m, cap, 1);
	free(m);
	tap_ok(bad == 0, "copy/set/move on unprotected memory: %zu flag sets "
	       "x %zu sizes x alignments, overlaps both ways (%d bad)",
	       NFLAGS, NSIZES, bad);
}

static void t_pool_memory(struct pmg_pool *p)
{
	int bad, stride = pmg_backend() == PMG_BACKEND_PKU ? 3 : 1;

	bad = exercise(pmg_pool_address(p), pmg_pool_size(p), stride);
	tap_ok(bad == 0, "the same on a protected pool, no guards by the "
	       "caller (%d bad)", bad);
}

/* Each CPU loop, called directly where the CPU has it. */
static void t_paths(void)
{
	static unsigned char s[8192 + 64], d[8192 + 64]
		__attribute__((aligned(64)));
	struct {
		const char *name, *feat;
		void (*mv)(char *, const char *, size_t);
		void (*st)(char *, int, size_t);
	} v[] = {
		{ "sse2", "sse2", _pmg_movnt_sse2, _pmg_setnt_sse2 },
		{ "avx2", "avx2", _pmg_movnt_avx2, _pmg_setnt_avx2 },
		{ "avx512f", "avx512f", _pmg_movnt_avx512f,
		  _pmg_setnt_avx512f },
	};
	struct pmg_info in;
	size_t i, n;
	int ok;

	__builtin_cpu_init();
	for (i = 0; i < 3; i++) {
		bool has = i == 0 ? __builtin_cpu_supports("sse2") :
			   i == 1 ? __builtin_cpu_supports("avx2") :
				    __builtin_cpu_supports("avx512f");

		if (!has) {
			char why[64];

			snprintf(why, sizeof(why), "this CPU has no %s",
				 v[i].feat);
			tap_skip(v[i].name, why);
			continue;
		}
		ok = 1;
		for (n = 64; n <= 8192; n += n < 1024 ? 64 : 1472) {
			size_t k = n & ~63UL;

			fill(s, n + 64);
			memset(d, 0, sizeof(d));
			v[i].mv((char *)d, (char *)s + 3, k);
			_pmg_sfence();
			CHECK(ok, !memcmp(d, s + 3, k) && d[k] == 0);
			v[i].st((char *)d, 0xa7, k);
			_pmg_sfence();
			CHECK(ok, d[0] == 0xa7 && d[k - 1] == 0xa7 &&
				  d[k] == 0);
		}
		tap_ok(ok, "%s non-temporal copy and set loops", v[i].name);
	}
	pmg_get_info(&in, sizeof(in));
	ok = 1;
	memset(d, 1, 256);
	_pmg_flush_clflush(d + 1, 200);
	if (in.cpu_clflushopt)
		_pmg_flush_clflushopt(d + 1, 200);
	if (in.cpu_clwb)
		_pmg_flush_clwb(d + 1, 200);
	_pmg_flush_none(d, 1);
	CHECK(ok, d[0] == 1 && d[255] == 1);
	tap_ok(ok, "flush instructions run: clflush%s%s", in.cpu_clflushopt ?
	       ", clflushopt" : "", in.cpu_clwb ? ", clwb" : "");
}

struct child_arg {
	struct pmg_pool *p;
	int what;
};

/* After a copy call returns, its window is closed: a store faults. */
static int window_closed(void *v)
{
	struct child_arg *a = v;
	char *x = pmg_pool_address(a->p);

	pmg_set_report_fd(-1);
	pmg_set_fault_mode(PMG_FAULT_STRICT);
	if (a->what == 0)
		pmg_memcpy_persist(x + 64, "abc", 3);
	else if (a->what == 1)
		pmg_memset_nodrain(x + 64, 'q', 5000);
	else
		pmg_memmove(x + 64, x + 70, 300, PMG_F_MEM_NONTEMPORAL);
	x[1] = 'Z';
	return 0;
}

static void t_windows(struct pmg_pool *p)
{
	struct child_arg a = { p, 0 };
	char *x = pmg_pool_address(p);
	int ok = 1, st;

	(void)*(volatile char *)&x[1];	/* reads need no window */
	for (a.what = 0; a.what < 3; a.what++) {
		pmg_memset_persist(x, 0, 2);
		st = tap_child(window_closed, &a);
		CHECK(ok, WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
		CHECK(ok, x[1] == 0);
	}
	tap_ok(ok, "the copy calls close their window: a plain store after "
	       "them still faults (strict: SIGABRT, byte unchanged)");
}

/*
 * Mappings of @path's file in /proc/self/maps, by inode (a pool created
 * through O_TMPFILE shows as "#inode (deleted)"): all, and the read-write
 * shared ones.
 */
static int maps_of(const char *path, int *rw)
{
	char line[PATH_MAX + 128], perms[8];
	unsigned long long ino;
	struct stat sb;
	int n = 0;
	FILE *f;

	*rw = 0;
	if (stat(path, &sb))
		return -1;
	f = fopen("/proc/self/maps", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%*s %7s %*s %*s %llu", perms, &ino) != 2 ||
		    ino != (unsigned long long)sb.st_ino)
			continue;
		n++;
		if (!strcmp(perms, "rw-s"))
			(*rw)++;
	}
	fclose(f);
	return n;
}

struct strayer {
	volatile char *at;
	atomic_int stop, started, done;
	atomic_long made;
};

/* Named stray: the TSan suppressions (mk/sanitize.mk) take races whose
 * top frame is a function called so for the deliberate stray stores. */
static __attribute__((noinline)) void stray(volatile char *at, char v)
{
	*at = v;	/* no window */
}

static void *strayer(void *arg)
{
	struct strayer *s = arg;
	long n;

	atomic_store(&s->started, 1);
	while (!atomic_load_explicit(&s->stop, memory_order_relaxed)) {
		n = atomic_load_explicit(&s->made, memory_order_relaxed);
		stray(s->at, (char)n);
		atomic_store_explicit(&s->made, n + 1, memory_order_relaxed);
	}
	atomic_store(&s->done, 1);
	return NULL;
}

/*
 * mprotect backend: a protected pool has an alias, a second read-write
 * mapping of its file only the library knows, and the persistence calls
 * write through it.  The pool's own pages are never opened: another
 * thread's stray store into the very page a call is writing faults, each
 * one (audit mode counts them; page windows, PMGUARD_POOL_ALIAS=0, let
 * those that land during a call through unseen).  The data written by
 * the calls is right, and nothing of the alias is left after the close
 * (checked by the caller).
 */
static void t_alias(struct pmg_pool *p, const char *path)
{
	unsigned char *x = pmg_pool_address(p), want[1024];
	struct pmg_stats st0, st1;
	struct pmg_pool_info in;
	struct strayer s = { .at = NULL };
	pthread_t th;
	int ok = 1, n, rw, mode, fd;
	long calls = 0, made;
	double t0;

	if (pmg_backend() != PMG_BACKEND_MPROTECT) {
		tap_skip("alias: persistence calls write through the pool's "
			 "alias", "PKU: windows are per thread, no alias");
		return;
	}
	if (getenv("PMGUARD_POOL_ALIAS") &&
	    !strcmp(getenv("PMGUARD_POOL_ALIAS"), "0")) {
		tap_skip("alias: persistence calls write through the pool's "
			 "alias", "PMGUARD_POOL_ALIAS=0: page windows");
		return;
	}
	n = maps_of(path, &rw);
	tap_diag("alias: %s mapped %d times, %d read-write", path, n, rw);
	CHECK(ok, n == 2 && rw == 1);
	CHECK(ok, !pmg_pool_get_info(p, &in, sizeof(in)) && in.aliased);
	s.at = (volatile char *)x + 4096 + 2048;
	mode = pmg_get_fault_mode();
	fd = pmg_set_report_fd(-1);
	pmg_set_fault_mode(PMG_FAULT_AUDIT);
	pmg_stats_get(&st0, sizeof(st0));
	if (pthread_create(&th, NULL, strayer, &s)) {
		tap_ok(0, "alias: pthread_create");
		return;
	}
	while (!atomic_load(&s.started))
		;
	/* 1000 strays; under TCG a fault is slow: 20 after 5 s will do */
	t0 = tap_now();
	for (calls = 0;; calls++) {
		memset(want, (int)(calls & 0xff), sizeof(want));
		pmg_memcpy_persist(x + 4096, want, sizeof(want));
		if (memcmp(x + 4096, want, sizeof(want)))
			ok = 0;
		if (calls < 2000 || calls % 64)
			continue;
		made = atomic_load(&s.made);
		if (made >= 1000 || (made >= 20 && tap_now() - t0 > 5) ||
		    tap_now() - t0 > 60)
			break;
	}
	atomic_store(&s.stop, 1);
	/* a stray the library cannot grant faults again forever: the thread
	 * never sees the flag (seen on device dax before protect_page()) */
	for (t0 = tap_now(); !atomic_load(&s.done) && tap_now() - t0 < 10;)
		usleep(1000);
	if (atomic_load(&s.done)) {
		pthread_join(th, NULL);
	} else {
		tap_diag("alias: the stray thread is stuck in its fault");
		pthread_detach(th);
		ok = 0;
	}
	pmg_stats_get(&st1, sizeof(st1));
	pmg_set_fault_mode(mode);
	pmg_set_report_fd(fd);
	tap_diag("alias: %ld calls, %ld stray stores into the page they "
		 "write, %llu caught", calls, atomic_load(&s.made),
		 (unsigned long long)(st1.strays - st0.strays));
	made = atomic_load(&s.made);
	CHECK(ok, made > 0 && st1.strays - st0.strays == (uint64_t)made);
	pmg_memset_persist(x + 4096 + 2048, 0, 64);	/* the strays' byte */
	tap_ok(ok, "alias: persistence calls write through the pool's alias "
	       "(mapped twice, once read-write); every stray store another "
	       "thread makes into the page being written faults; data right");
}

/* After the pool's close: no mapping of its file is left, alias included. */
static void t_alias_gone(const char *path)
{
	int rw, n = maps_of(path, &rw);

	if (pmg_backend() != PMG_BACKEND_MPROTECT) {
		tap_skip("alias: gone with the pool", "PKU: no alias");
		return;
	}
	tap_ok(n == 0, "alias: gone with the pool (%s mapped %d times after "
	       "the close)", path, n);
}

/* A range the caller protected with its own domain (not a pool). */
static void t_own_domain(void)
{
	struct pmg_domain *d = NULL;
	char *m = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int ok = 1, rc;

	rc = pmg_domain_new(&d, "test-persist", 0);
	if (rc || m == MAP_FAILED) {
		tap_ok(0, "own domain: %s", pmg_errormsg());
		return;
	}
	CHECK(ok, pmg_protect(d, m + 4096, 4096) == 0);
	/* spans unprotected, protected, unprotected: both ends checked */
	CHECK(ok, pmg_memset_persist(m + 4000, 7, 100) == m + 4000);
	CHECK(ok, pmg_memset_persist(m + 8100, 8, 200) == m + 8100);
	CHECK(ok, m[4096] == 7 && m[4095] == 7 && m[8191] == 8 &&
		  m[8192] == 8);
	CHECK(ok, pmg_unprotect(m + 4096, 4096) == 0);
	CHECK(ok, pmg_domain_delete(&d) == 0);
	munmap(m, 3 * 4096);
	tap_ok(ok, "copy calls find windows for ranges the caller protected "
	       "(pmg_lookup), across range edges");
}

static void t_bad_args(struct pmg_pool *p)
{
	char buf[64] = "untouched", *x = pmg_pool_address(p);
	int ok = 1;

	errno = 0;
	CHECK(ok, pmg_memcpy(buf, "abc", 3, 0x40) == NULL && errno == EINVAL &&
		  strstr(pmg_errormsg(), "0x40"));
	CHECK(ok, !strcmp(buf, "untouched"));
	CHECK(ok, pmg_memset(buf, 0, 3, ~0u) == NULL && buf[0] == 'u');
	CHECK(ok, pmg_memcpy_persist(buf, NULL, 3) == NULL && errno == EINVAL);
	CHECK(ok, pmg_memset_persist(NULL, 0, 3) == NULL);
	CHECK(ok, pmg_memcpy_persist(buf, NULL, 0) == buf);
	CHECK(ok, pmg_memmove_nodrain(NULL, NULL, 0) == NULL);	/* dest */
	CHECK(ok, pmg_persist(x, 0) == 0 && pmg_msync(x, 0) == 0);
	pmg_flush(x, 0);
	pmg_flush(x, 1);
	CHECK(ok, pmg_persist(x + 17, 100) == 0);
	CHECK(ok, pmg_msync(x + 17, 100) == 0);
	{
		char *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		munmap(m, 8192);
		CHECK(ok, pmg_msync(m + 10, 10) == -ENOMEM &&
			  *pmg_errormsg());
	}
	tap_ok(ok, "bad flags and NULL pointers refused before any store; "
	       "length 0 is a no-op; msync of unmapped memory -ENOMEM");
}

/* pmg_persist(NULL, 64) in a child: it must return, not fault. */
static int null_child(void *v)
{
	(void)v;
	if (pmg_persist(NULL, 64) != -EINVAL)
		return 2;
	pmg_flush(NULL, 64);
	pmg_flush((void *)16, 64);
	return 0;
}

/*
 * A pool of 5000 bytes: the rest of its second page is mapped but is not
 * the pool's (a store there is lost at close).  Ranges past the usable end
 * are -ERANGE, wrapping ones -EINVAL; the pool's bytes are untouched.
 */
static void t_outside(const char *d)
{
	struct pmg_pool_config *c;
	struct pmg_pool *p = NULL;
	char path[PATH_MAX], src[64];
	unsigned char *x;
	int ok = 1, st;

	snprintf(path, sizeof(path), "%s/small.pool", d);
	pmg_pool_config_new(&c);
	pmg_pool_config_set_size(c, 5000);
	st = pmg_pool_create(&p, path, c);
	pmg_pool_config_delete(&c);
	if (st) {
		tap_ok(0, "pool of 5000 bytes: %s", pmg_errormsg());
		return;
	}
	x = pmg_pool_address(p);
	memset(src, 0x5a, sizeof(src));
	CHECK(ok, pmg_memcpy_persist(x + 4990, src, 10) == x + 4990);
	errno = 0;
	CHECK(ok, pmg_memcpy_persist(x + 4990, src, 11) == NULL &&
		  errno == ERANGE && strstr(pmg_errormsg(), "pool"));
	CHECK(ok, pmg_memset_persist(x + 5000, 1, 1) == NULL &&
		  errno == ERANGE);
	CHECK(ok, pmg_memcpy(x + 6000, src, 8, PMG_F_MEM_NOFLUSH) == NULL &&
		  errno == ERANGE);
	CHECK(ok, pmg_persist(x + 4990, 20) == -ERANGE);
	CHECK(ok, pmg_msync(x + 4096, 4096) == -ERANGE);
	CHECK(ok, pmg_persist(x, 5000) == 0 && pmg_msync(x, 5000) == 0);
	CHECK(ok, x[5000] == 0 && x[6000] == 0 && x[4999] == 0x5a);
	CHECK(ok, pmg_msync(x, SIZE_MAX) == -EINVAL &&
		  strstr(pmg_errormsg(), "wraps"));
	CHECK(ok, pmg_persist(x, SIZE_MAX - 4096) == -EINVAL);
	CHECK(ok, pmg_msync(src, SIZE_MAX) == -EINVAL);
	CHECK(ok, pmg_memcpy_persist(src, x, SIZE_MAX) == NULL &&
		  errno == EINVAL);
	st = tap_child(null_child, NULL);
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		tap_diag("pmg_persist(NULL, 64): child status %#x", st);
		ok = 0;
	}
	pmg_pool_close(&p);
	unlink(path);
	tap_ok(ok, "%s: stores and flushes past a pool's size (tail of its "
	       "last page) -ERANGE, wrapping lengths -EINVAL, NULL page "
	       "-EINVAL (no SIGSEGV)", d);
}

static void t_is_pmem(struct pmg_pool *p)
{
	struct pmg_persist_info pi;
	struct pmg_pool_info in;
	char *x = pmg_pool_address(p);
	int ok = 1, want;

	pmg_persist_get_info(&pi, sizeof(pi));
	pmg_pool_get_info(p, &in, sizeof(in));
	want = pi.is_pmem_force >= 0 ? pi.is_pmem_force : in.map_sync;
	CHECK(ok, pmg_pool_is_pmem(p) == want);
	CHECK(ok, pmg_is_pmem(x, pmg_pool_size(p)) == want);
	CHECK(ok, pmg_is_pmem(x + 10, 100) == want);
	if (pi.is_pmem_force < 0) {
		char local;

		CHECK(ok, pmg_is_pmem(&local, 1) == 0);
		CHECK(ok, pmg_is_pmem(x, pmg_pool_size(p) + 4096) == 0);
	}
	tap_ok(ok, "pmg_is_pmem/pmg_pool_is_pmem = %d (map_sync %d, force "
	       "%d): pmem_is_pmem's rules", want, in.map_sync,
	       pi.is_pmem_force);
}

static int mkfile(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	fputs(text, f);
	fclose(f);
	return 0;
}

static void t_eadr(void)
{
	char a[512], b[512], nd[300];
	int ok = 1;

	snprintf(nd, sizeof(nd), "%s/nd", dir);
	CHECK(ok, _pmg_auto_flush_at(nd) == 0);	/* missing: no regions */
	mkdir(nd, 0700);
	CHECK(ok, _pmg_auto_flush_at(nd) == 0);	/* no regions */
	snprintf(a, sizeof(a), "%s/region0", nd);
	mkdir(a, 0700);
	snprintf(a, sizeof(a), "%s/region0/persistence_domain", nd);
	mkfile(a, "cpu_cache\n");
	CHECK(ok, _pmg_auto_flush_at(nd) == 1);
	snprintf(b, sizeof(b), "%s/region1", nd);
	mkdir(b, 0700);
	snprintf(b, sizeof(b), "%s/region1/persistence_domain", nd);
	mkfile(b, "memory_controller\n");
	CHECK(ok, _pmg_auto_flush_at(nd) == 0);
	mkfile(b, "cpu_cache");
	CHECK(ok, _pmg_auto_flush_at(nd) == 1);
	snprintf(b, sizeof(b), "%s/ndbus0", nd);
	mkdir(b, 0700);			/* not a region: ignored */
	CHECK(ok, _pmg_auto_flush_at(nd) == 1);
	tap_ok(ok, "eADR: all regions cpu_cache -> 1; one not, or none -> 0");
}

/* Options: bad values named; each variable steers the pick. */
static void t_options(void)
{
	struct _pmg_persist t;
	struct _pmg_opts po;
	struct pmg_info in;
	int ok = 1;

	memset(&t, 0, sizeof(t));
	pmg_get_info(&in, sizeof(in));
	_pmg_persist_opts_reset();
	CHECK(ok, _pmg_persist_opt(&t, "PMGUARD_MOVNT_THRESHOLD", "-1") ==
		  -EINVAL && strstr(pmg_errormsg(), "PMGUARD_MOVNT_THRESHOLD") &&
		  strstr(pmg_errormsg(), "'-1'"));
	CHECK(ok, _pmg_persist_opt(&t, "PMGUARD_NO_MOVNT", "true") == -EINVAL &&
		  strstr(pmg_errormsg(), "'true'"));
	CHECK(ok, _pmg_persist_opt(&t, "PMGUARD_NO_SUCH", "1") == -EINVAL);
	CHECK(ok, _pmg_persist_opt(&t, "PMGUARD_MOVNT_THRESHOLD", "1024") == 0
		  && t.threshold == 1024);
	/* the parser itself: a value past LONG_MAX leaves the option as is */
	_pmg_opts_defaults(&po);
	po.threshold = 1024;
	CHECK(ok, _pmg_opt_parse(&po, "PMGUARD_MOVNT_THRESHOLD",
				 "99999999999999999999") == -EINVAL &&
		  po.threshold == 1024);
	CHECK(ok, _pmg_persist_opt(&t, "PMGUARD_NO_MOVNT", "1") == 0 &&
		  !strcmp(t.movnt_name, "none") && !t.movnt);
	CHECK(ok, _pmg_persist_opt(&t, "PMGUARD_NO_MOVNT", "0") == 0 &&
		  t.movnt);
	CHECK(ok, _pmg_persist_opt(&t, "PMGUARD_NO_AVX512F", "1") == 0 &&
		  strcmp(t.movnt_name, "avx512f"));
	CHECK(ok, _pmg_persist_opt(&t, "PMGUARD_NO_AVX2", "1") == 0 &&
		  !strcmp(t.movnt_name, "sse2"));
	CHECK(ok, _pmg_persist_opt(&t, "PMGUARD_NO_CLWB", "1") == 0 &&
		  strcmp(t.flush_name, "clwb"));
	CHECK(ok, _pmg_persist_opt(&t, "PMGUARD_NO_CLFLUSHOPT", "1") == 0 &&
		  !strcmp(t.flush_name, "clflush"));
	CHECK(ok, _pmg_persist_opt(&t, "PMGUARD_NO_FLUSH", "1") == 0 &&
		  !strcmp(t.flush_name, "none"));
	CHECK(ok, _pmg_persist_opt(&t, "PMGUARD_IS_PMEM_FORCE", "1") == 0 &&
		  t.force == 1);
	_pmg_persist_opts_reset();
	tap_ok(ok, "options: bad values named with their value and change "
	       "nothing; NO_MOVNT, "
	       "NO_AVX512F, NO_AVX2, NO_CLWB, NO_CLFLUSHOPT, NO_FLUSH, "
	       "MOVNT_THRESHOLD, IS_PMEM_FORCE steer the pick");
}

/* The environment, read once: a fresh child per setting. */
struct envt {
	const char *name, *value;
	const char *want_flush, *want_movnt;
	int want_rc;
};

static int env_child(void *v)
{
	struct envt *t = v;
	struct pmg_persist_info pi;
	char buf[600];
	int rc;

	setenv(t->name, t->value, 1);
	fclose(stderr);
	rc = pmg_persist_get_info(&pi, sizeof(pi));
	if (rc != t->want_rc)
		return 1;
	if (rc && (!strstr(pmg_errormsg(), t->name) ||
		   !strstr(pmg_errormsg(), t->value)))
		return 2;
	if (t->want_flush && strcmp(pi.flush, t->want_flush))
		return 3;
	if (t->want_movnt && strcmp(pi.movnt, t->want_movnt))
		return 4;
	/* the calls still work with the defaults */
	memset(buf, 1, sizeof(buf));
	if (pmg_memcpy_persist(buf, buf + 300, 300) != buf)
		return 5;
	return 0;
}

/* PMGUARD_POOL_ALIAS=0: a protected pool without an alias, written
 * through page windows (mprotect), mapped once. */
static int alias_off_child(void *v)
{
	struct pmg_pool_config *c = NULL;
	struct pmg_pool *p = NULL;
	struct pmg_pool_info in;
	char path[PATH_MAX], buf[100], *x;
	int n, rw, rc = 0;

	(void)v;
	setenv("PMGUARD_POOL_ALIAS", "0", 1);
	snprintf(path, sizeof(path), "%s/alias-off.pool", dir);
	if (pmg_pool_config_new(&c) || pmg_pool_config_set_size(c, 65536) ||
	    pmg_pool_create(&p, path, c))
		return 1;
	pmg_pool_config_delete(&c);
	x = pmg_pool_address(p);
	memset(buf, 7, sizeof(buf));
	n = maps_of(path, &rw);
	if (pmg_pool_get_info(p, &in, sizeof(in)) || in.aliased)
		rc = 2;
	else if (n != 1 ||
		 (pmg_backend() == PMG_BACKEND_MPROTECT && rw != 0))
		rc = 3;	/* PKU pages stay read-write: the key guards them */
	else if (pmg_memcpy_persist(x + 5000, buf, sizeof(buf)) != x + 5000 ||
		 memcmp(x + 5000, buf, sizeof(buf)))
		rc = 4;
	pmg_pool_close(&p);
	unlink(path);
	return rc;
}

static void t_alias_off(void)
{
	int st = tap_child(alias_off_child, NULL);

	tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "PMGUARD_POOL_ALIAS=0: "
	       "a protected pool has no alias (not 'aliased', mapped once), "
	       "the persistence calls still write it (child status %#x)",
	       st);
}

static void t_env(void)
{
	static struct envt ts[] = {
		{ "PMGUARD_NO_MOVNT", "1", NULL, "none", 0 },
		{ "PMGUARD_NO_FLUSH", "1", "none", NULL, 0 },
		{ "PMGUARD_NO_CLWB", "1", NULL, NULL, 0 },
		{ "PMGUARD_MOVNT_THRESHOLD", "lots", NULL, NULL, -EINVAL },
		{ "PMGUARD_NO_AVX512F", "on", NULL, NULL, -EINVAL },
		{ "PMGUARD_NO_FLUSH", "", NULL, NULL, -EINVAL },
		{ "PMGUARD_POOL_ALIAS", "yes", NULL, NULL, -EINVAL },
	};
	size_t i;
	int ok = 1, st;

	for (i = 0; i < sizeof(ts) / sizeof(ts[0]); i++) {
		st = tap_child(env_child, &ts[i]);
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			tap_diag("%s='%s': child status %#x", ts[i].name,
				 ts[i].value, st);
			ok = 0;
		}
	}
	tap_ok(ok, "environment: PMGUARD_NO_MOVNT/NO_FLUSH/NO_CLWB honoured; "
	       "bad values -> -EINVAL naming variable and value, defaults "
	       "used");
}

/*
 * The tests that use pool files, in @d: run once in a tmpfs directory and
 * once in a directory of a disk filesystem (ext4, xfs: no DAX, so MAP_SYNC
 * is refused after the kernel placed the mapping, and flushes are msync).
 */
#define POOL_TESTS 8
/* @dev: @d is a device-dax device (PMG_DEVDAX), not a directory */
static int pool_tests(const char *d, bool dev)
{
	struct pmg_pool_config *c;
	struct pmg_pool *p = NULL;
	char path[PATH_MAX];
	int rc;

	pmg_pool_config_new(&c);
	if (dev) {
		/* the device's first 2 MiB (its alignment) */
		snprintf(path, sizeof(path), "%s", d);
		pmg_pool_config_set_size(c, 2 << 20);
		rc = pmg_pool_open(&p, path, c);
	} else {
		snprintf(path, sizeof(path), "%s/persist.pool", d);
		pmg_pool_config_set_size(c, 256 << 10);
		rc = pmg_pool_create(&p, path, c);
	}
	pmg_pool_config_delete(&c);
	if (rc) {
		tap_diag("pool in %s: %s", d, pmg_errormsg());
		return -1;
	}
	tap_diag("backend %s, pool in %s", pmg_backend_name(pmg_backend()),
		 d);
	t_pool_memory(p);
	t_windows(p);
	t_own_domain();
	t_bad_args(p);
	t_is_pmem(p);
	t_alias(p, path);
	pmg_pool_close(&p);
	t_alias_gone(path);
	if (dev) {
		tap_skip("pool of 5000 bytes", "a device-dax pool is the "
			 "device's, in 2 MiB units");
		return 0;
	}
	unlink(path);
	t_outside(d);
	return 0;
}

int main(void)
{
	char disk[256], shm[256];
	int i, ran = 0;

	tap_init(10 + 2 * POOL_TESTS);
	if (probe_dirs(dir, sizeof(dir), disk, shm, sizeof(disk)))
		tap_skip_all("no temporary directory");
	/* PMG_DEVDAX=/dev/daxX.Y (the dax suite): the pool tests' first
	 * run opens that device instead of a file on a disk filesystem */
	devdax = getenv("PMG_DEVDAX");
	if (devdax && !*devdax)
		devdax = NULL;
	t_env();		/* first: the children read the variables */
	t_alias_off();
	t_info();
	t_options();
	t_eadr();
	t_paths();
	t_plain_memory();
	for (i = 0; i < 2; i++) {
		const char *d = i ? shm : devdax ? devdax : disk;

		if (!*d) {
			int k;

			for (k = 0; k < POOL_TESTS; k++)
				tap_skip("pool tests", i ? "no tmpfs directory"
					 : "no disk filesystem directory");
			continue;
		}
		if (pool_tests(d, !i && devdax))
			return tap_done() | 1;
		ran++;
	}
	probe_dirs_remove(disk, shm);
	printf("%d passed, %d failed, %d skipped\n",
	       tap_n - tap_failed - skipped, tap_failed, skipped);
	return tap_done() | !ran;
}
