// SPDX-License-Identifier: MIT
/*
 * The protected-range registry (V8's pgmap/devmap_protected) and the
 * kmap analogs: many ranges protected and unprotected in random order,
 * every lookup checked against a plain model; pmg_map_local opens a
 * window only for protected addresses; pmg_map of a protected address is
 * flagged.  Runs on both backends.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>

#include "tap.h"
#include "probe.h"
#include "../src/internal.h"
#include "valgrind-probe.h"

#define PAGE 4096
#define NPAGES 512

static char *base;
static struct pmg_domain *dom[3];
static int model[NPAGES];	/* domain index + 1 of each page's range, 0 */
static int start_of[NPAGES];	/* first page of the range it is in */
static int len_of[NPAGES];

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static unsigned rnd(unsigned n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng % n);
}

/* Check pmg_lookup() on every page (first and last byte) and page gap. */
static int check_model(void)
{
	int i, bad = 0;

	for (i = 0; i < NPAGES; i++) {
		char *a[2] = { base + (size_t)i * PAGE,
			       base + (size_t)i * PAGE + PAGE - 1 };
		int j;

		for (j = 0; j < 2; j++) {
			void *rb = NULL;
			size_t rl = 0;
			struct pmg_domain *d = pmg_lookup(a[j], &rb, &rl);

			if (!model[i]) {
				bad += d != NULL;
				continue;
			}
			bad += d != dom[model[i] - 1] ||
			       rb != base + (size_t)start_of[i] * PAGE ||
			       rl != (size_t)len_of[i] * PAGE;
		}
	}
	return bad;
}

static void test_registry(void)
{
	int ranges = 0, removed = 0, i, bad, rc, fails = 0;

	/* protect random runs of 1-4 free pages with random domains */
	for (i = 0; i < 400; i++) {
		int p = (int)rnd(NPAGES), n = 1 + (int)rnd(4), k, free_run = 1;
		int di = (int)rnd(3);

		if (p + n > NPAGES)
			continue;
		for (k = p; k < p + n; k++)
			free_run &= !model[k];
		rc = pmg_protect(dom[di], base + (size_t)p * PAGE,
				 (size_t)n * PAGE);
		if (free_run != (rc == 0) || (!free_run && rc != -EEXIST)) {
			fails++;
			continue;
		}
		if (rc)
			continue;
		for (k = p; k < p + n; k++) {
			model[k] = di + 1;
			start_of[k] = p;
			len_of[k] = n;
		}
		ranges++;
	}
	bad = check_model();
	tap_ok(!bad && !fails, "registry: %d ranges protected in random "
	       "order, overlaps refused with -EEXIST, %d wrong lookups",
	       ranges, bad);

	/* unprotect about half of them, in random order */
	for (i = 0; i < NPAGES / 4; i++) {
		int p = (int)rnd(NPAGES), s, n, k;

		if (!model[p] || rnd(2))
			continue;
		s = start_of[p];
		n = len_of[p];
		if (n > 1 && pmg_unprotect(base + (size_t)s * PAGE,
					   (size_t)(n - 1) * PAGE) != -ENOENT)
			fails++;	/* a part of a range is not a range */
		if (pmg_unprotect(base + (size_t)s * PAGE, (size_t)n * PAGE))
			fails++;
		for (k = s; k < s + n; k++)
			model[k] = 0;
		removed++;
	}
	bad = check_model();
	tap_ok(!bad && !fails, "registry: %d ranges unprotected, partial "
	       "unprotect refused, %d wrong lookups", removed, bad);

	/* the memory of unprotected ranges is plainly writable again */
	bad = 0;
	for (i = 0; i < NPAGES; i++)
		if (!model[i])
			bad += probe(dom[0], base + (size_t)i * PAGE,
				     PMG_WRITE) != 0;
	tap_ok(!bad, "registry: unprotected pages take writes without a "
	       "window (%d faulted)", bad);

	/* and protected ones still fault */
	bad = 0;
	for (i = 0; i < NPAGES; i++)
		if (model[i])
			bad += probe(dom[model[i] - 1],
				     base + (size_t)i * PAGE + 5,
				     PMG_WRITE) != 1;
	tap_ok(!bad, "registry: protected pages still fault (%d did not)",
	       bad);
}

static void test_map_local(void)
{
	struct pmg_domain *d = NULL;
	char *p = NULL, *plain;
	struct pmg_stats s0, s1;
	int i, ok = 1;

	for (i = 0; i < NPAGES && !p; i++) {
		if (model[i]) {
			p = base + (size_t)i * PAGE;
			d = dom[model[i] - 1];
		}
	}
	plain = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!p) {
		tap_ok(0, "map_local: no protected page left to test");
		return;
	}
	CHECK(ok, pmg_map_local(plain, PMG_WRITE) == 0);
	CHECK(ok, pmg_unmap_local(plain, PMG_WRITE) == 0);
	CHECK(ok, pmg_map_local(p + 10, PMG_WRITE) == 1);
	CHECK(ok, probe(d, p + 10, PMG_WRITE) == 0);
	CHECK(ok, pmg_map_local(p + 20, PMG_WRITE) == 1);	/* nests */
	CHECK(ok, pmg_unmap_local(p + 20, PMG_WRITE) == 1);
	CHECK(ok, probe(d, p + 10, PMG_WRITE) == 0);
	CHECK(ok, pmg_unmap_local(p + 10, PMG_WRITE) == 1);
	CHECK(ok, probe(d, p + 10, PMG_WRITE) == 1);
	CHECK(ok, pmg_unmap_local(p, PMG_WRITE) == -EPERM);
	tap_ok(ok, "map_local: opens a nested window only on protected "
	       "addresses, unmap_local closes it");

	ok = 1;
	pmg_stats_get(&s0, sizeof(s0));
	pmg_set_report_fd(-1);
	CHECK(ok, pmg_map(plain) == 0);
	CHECK(ok, pmg_map(p) == 1);
	pmg_stats_get(&s1, sizeof(s1));
	CHECK(ok, s1.long_term_maps == s0.long_term_maps + 1);
	CHECK(ok, probe(d, p, PMG_WRITE) == 1);	/* grants nothing */
	tap_ok(ok, "map (kmap analog): a long-term map of protected memory "
	       "is flagged and grants nothing");
	munmap(plain, PAGE);
}

/* ---- lock-free lookups while another thread edits the registry ---- */
#define CPAGES 64
static char *cbase;
static int cstop;

static void *lookup_loop(void *arg)
{
	struct pmg_domain *want = arg;
	uintptr_t bad = 0;

	while (!__atomic_load_n(&cstop, __ATOMIC_RELAXED)) {
		for (int i = 0; i < CPAGES; i++) {
			char *a = cbase + (size_t)i * PAGE + 7;
			void *rb = NULL;
			size_t rl = 0;
			struct pmg_domain *d = pmg_lookup(a, &rb, &rl);

			/* absent, or exactly its own one-page range */
			if (d && (d != want || rb != a - 7 || rl != PAGE))
				bad++;
		}
	}
	return (void *)bad;
}

static void test_concurrent_lookups(void)
{
	pthread_t t[2];
	void *res;
	uintptr_t bad = 0;
	int r, i, edits = 0;

	cbase = mmap(NULL, CPAGES * PAGE, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	for (i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, lookup_loop, dom[2]);
	for (r = 0; r < 3000; r++) {
		char *a = cbase + (size_t)((r * 7) % CPAGES) * PAGE;

		if (pmg_protect(dom[2], a, PAGE))
			pmg_unprotect(a, PAGE);
		edits++;
	}
	__atomic_store_n(&cstop, 1, __ATOMIC_RELAXED);
	for (i = 0; i < 2; i++) {
		pthread_join(t[i], &res);
		bad += (uintptr_t)res;
	}
	tap_ok(bad == 0, "registry: %d protect/unprotect edits under 2 "
	       "threads' lock-free lookups, %lu wrong answers", edits,
	       (unsigned long)bad);
	for (i = 0; i < CPAGES; i++)
		pmg_unprotect(cbase + (size_t)i * PAGE, PAGE);
	munmap(cbase, CPAGES * PAGE);
}

/* ---- ranges that never change, looked up while writers hammer others ---- */
#define SPAGES 64
#define LOOKUPS 1000000UL
static char *sbase;
static int sdone;

static void *stable_loop(void *arg)
{
	struct pmg_domain *want = arg;
	unsigned long bad = 0, n;

	for (n = 0; n < LOOKUPS; n++) {
		char *pg = sbase + (n % SPAGES) * 2 * PAGE;
		void *rb = NULL;
		size_t rl = 0;
		struct pmg_domain *d = pmg_lookup(pg + 100, &rb, &rl);

		if (d != want || rb != pg || rl != PAGE)
			bad++;
	}
	__atomic_add_fetch(&sdone, 1, __ATOMIC_RELEASE);
	return (void *)bad;
}

static void test_stable_lookups(void)
{
	pthread_t t[2];
	void *res;
	unsigned long bad = 0, edits = 0;
	int i, key2 = pmg_domain_key(dom[2]);

	/* stable ranges: every other page; the writer's pages in between */
	sbase = mmap(NULL, SPAGES * 2 * PAGE, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	for (i = 0; i < SPAGES; i++)
		if (pmg_protect(dom[1], sbase + (size_t)i * 2 * PAGE, PAGE))
			tap_diag("set-up: %s", pmg_errormsg());
	for (i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, stable_loop, dom[1]);
	/*
	 * The registry's own writers, as fast as they go (pmg_protect() is
	 * slowed by its /proc/self/maps check): insert and remove ranges
	 * between the stable ones, under the lock as pmg_protect() does.
	 */
	while (__atomic_load_n(&sdone, __ATOMIC_ACQUIRE) < 2) {
		uintptr_t a = (uintptr_t)sbase +
			      ((edits * 7) % SPAGES) * 2 * PAGE + PAGE;
		int k;

		pthread_mutex_lock(&_pmg.lock);
		if (_pmg_reg_insert(a, a + PAGE, key2))
			_pmg_reg_remove(a, a + PAGE, &k);
		pthread_mutex_unlock(&_pmg.lock);
		edits++;
	}
	for (i = 0; i < 2; i++) {
		pthread_join(t[i], &res);
		bad += (unsigned long)(uintptr_t)res;
	}
	tap_ok(bad == 0, "registry: %lu lookups of %d ranges that never "
	       "change while %lu protect/unprotect edits of other ranges "
	       "run: %lu wrong answers", 2 * LOOKUPS, SPAGES, edits, bad);
	for (i = 0; i < SPAGES; i++) {
		uintptr_t a = (uintptr_t)sbase + (size_t)i * 2 * PAGE + PAGE;
		int k;

		pthread_mutex_lock(&_pmg.lock);
		_pmg_reg_remove(a, a + PAGE, &k);
		pthread_mutex_unlock(&_pmg.lock);
	}
	for (i = 0; i < SPAGES * 2; i++)
		pmg_unprotect(sbase + (size_t)i * PAGE, PAGE);
	munmap(sbase, SPAGES * 2 * PAGE);
}

/*
 * munmap() behind the library's back (the static library sees no munmap):
 * pmg_unprotect() drops the range and returns 0, the domain can be deleted
 * and its key is free again (20 rounds: a leak would run out of keys), and
 * the domain's other ranges keep their windows.
 */
static void test_unmapped(void)
{
	char *a, *b, src[8] = "kept";
	int ok = 1, i;

	for (i = 0; i < 20 && ok; i++) {
		struct pmg_domain *d = NULL;
		int rc;

		a = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		b = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		rc = pmg_domain_new(&d, "unmapped", 0);
		CHECK(ok, rc == 0);
		if (rc) {
			tap_diag("round %d: %s", i, pmg_errormsg());
			break;
		}
		CHECK(ok, pmg_protect(d, a, 2 * PAGE) == 0);
		CHECK(ok, pmg_protect(d, b, PAGE) == 0);
		munmap(a, 2 * PAGE);
		CHECK(ok, pmg_write_begin(d) == 0 && pmg_write_end(d) == 0);
		CHECK(ok, pmg_memcpy_persist(b + 16, src, 5) == b + 16);
		CHECK(ok, !strcmp(b + 16, "kept"));
		rc = pmg_unprotect(a, 2 * PAGE);
		CHECK(ok, rc == 0);
		if (rc)
			tap_diag("unprotect: %d %s", rc, pmg_errormsg());
		CHECK(ok, pmg_lookup(a, NULL, NULL) == NULL);
		CHECK(ok, pmg_unprotect(b, PAGE) == 0);
		CHECK(ok, pmg_domain_delete(&d) == 0);
		munmap(b, PAGE);
	}
	tap_ok(ok, "a range unmapped behind pmguard's back: unprotect 0, "
	       "other ranges keep their windows, domain deleted, key "
	       "reused (%d rounds)", i);
}

/*
 * A mapped file with a long path: its /proc/self/maps line is longer than
 * the library's line buffer.  The rest of that line is part of the path,
 * never a mapping of its own, even when it reads like one: here the path
 * holds "LO-HI rw-p" just where the buffer ends (the scanners of
 * pmg_protect(), madvise() and the pool quarantine read 256 or 512 bytes
 * at a time and took that rest for a mapping above the range: "not
 * (entirely) mapped").
 */
static void test_long_map_line(void)
{
	char dir[64], sub[512], path[128], fake[64], name[256];
	char line[1024], full[PATH_MAX];
	char *r = NULL, *col;
	size_t pos = 0, k, fill;
	FILE *f;
	int ok = 1, fd = -1, rc;

	snprintf(dir, sizeof(dir), "/tmp/pmg-ranges-XXXXXX");
	if (!mkdtemp(dir)) {
		tap_ok(0, "long maps line: mkdtemp: %s", strerror(errno));
		return;
	}
	/* a 3-page region: the file's page first, then two private pages,
	 * the last of them protected */
	snprintf(path, sizeof(path), "%s/f", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	r = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(ok, fd >= 0 && r != MAP_FAILED && ftruncate(fd, PAGE) == 0 &&
		  mmap(r, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		       fd, 0) == r);
	/* where the path starts in the file's line */
	f = fopen("/proc/self/maps", "re");
	while (ok && f && fgets(line, sizeof(line), f))
		if (strtoul(line, NULL, 16) == (uintptr_t)r &&
		    (col = strchr(line, '/')))
			pos = (size_t)(col - line);
	if (f)
		fclose(f);
	CHECK(ok, pos > 0 && pos < 200);
	if (!ok) {
		tap_ok(0, "long maps line: set-up");
		goto out;
	}
	/* the path's byte at line offset 511 (and 255, with a 256-byte
	 * buffer, but 511 is the longer reach) starts the fake mapping */
	snprintf(fake, sizeof(fake), "%lx-%lx rw-p",
		 (unsigned long)(r + 2 * PAGE + PAGE / 2),
		 (unsigned long)(r + 3 * PAGE));
	k = 511 - pos;			/* the fake's offset in the path */
	snprintf(sub, sizeof(sub), "%s/", dir);
	memset(sub + strlen(sub), 'd', 200);	/* a 200-byte directory */
	sub[strlen(dir) + 1 + 200] = '\0';
	fill = k - strlen(sub) - 1;	/* filler bytes in the file's name */
	CHECK(ok, k > strlen(sub) + 1 && fill + strlen(fake) < 255);
	CHECK(ok, mkdir(sub, 0700) == 0);
	memset(name, 'x', fill);
	snprintf(name + fill, sizeof(name) - fill, "%s", fake);
	snprintf(full, sizeof(full), "%s/%s", sub, name);
	CHECK(ok, strlen(sub) + 1 + fill == k);
	CHECK(ok, rename(path, full) == 0);
	rc = ok ? pmg_protect(dom[0], r + 2 * PAGE, PAGE) : -1;
	if (rc)
		tap_diag("pmg_protect: %d %s", rc, pmg_errormsg());
	CHECK(ok, rc == 0 && pmg_unprotect(r + 2 * PAGE, PAGE) == 0);
	unlink(full);
	rmdir(sub);
	tap_ok(ok, "long maps line: the rest of a mapped file's long path is "
	       "not taken for a mapping (pmg_protect of the range below it)");
out:
	if (fd >= 0)
		close(fd);
	if (r && r != MAP_FAILED)
		munmap(r, 3 * PAGE);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	static const char *names[3] = { "ranges-a", "ranges-b", "ranges-c" };
	int i;

	if (pmg_under_valgrind())
		tap_skip_all(PMG_VALGRIND_WHY);
	tap_init(10);
	base = mmap(NULL, (size_t)NPAGES * PAGE, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	for (i = 0; i < 3; i++)
		if (pmg_domain_new(&dom[i], names[i], 0)) {
			tap_diag("set-up: %s", pmg_errormsg());
			return 1;
		}
	tap_diag("backend: %s", pmg_backend_name(pmg_backend()));
	probe_begin();
	test_registry();
	test_map_local();
	test_concurrent_lookups();
	test_stable_lookups();
	test_unmapped();
	test_long_map_line();
	probe_end();
	return tap_done();
}
