// SPDX-License-Identifier: MIT
/*
 * test-pool-overrun: a linear overrun past the end of a pool, for every
 * size class of pool (the tail of a page, page multiples aligned to 4 KiB,
 * 2 MiB-aligned mappings with and without a tail, large), faults and
 * leaves every pool's bytes as they were.  On the mprotect backend a
 * protected pool has a writable alias, a second mapping of its file: it
 * used to lie 8 KiB above the pool's end, so a store a little past the
 * end rewrote the pool's own header through it with no fault, strict mode
 * included.  Aliases now lie at a distance from every pool: at least the
 * pool's own size (at least 2 MiB, at most 1 GiB) from its own pool, at
 * least 2 MiB from any other, with nothing but PROT_NONE reservation in
 * between.  And whatever is placed after a pool -- another pool, the
 * alias of a smaller pool behind the smaller gap that pool's size gives
 * it, the program's own memory -- lies at least the pool's own size past
 * its end: every pool reserves a PROT_NONE guard of that size above its
 * mapping.  Checked on a layout the program shapes with holes of its own
 * (a 1 MiB pool's alias at the top of a hole, an 8 MiB pool placed right
 * under it used to have that alias 6 MiB past its end) and on random
 * layouts of program mmaps and munmaps and pool creates and closes.
 * Both backends (PKU in the guest: no alias, the same faults).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdint.h>
#include <sys/stat.h>

#include "pmguard.h"
#include "tap.h"
#include "dirs.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define GAP_MIN (2 * MIB)	/* any alias from any pool */
#define GAP_MAX ((size_t)1 << 30)

/* One of each size class (how pool_finish() sizes and aligns mappings). */
static const struct {
	size_t size;
	const char *what;
} cls[] = {
	{ 100, "100 bytes (one page, mostly tail)" },
	{ 5000, "5000 bytes (a page and a tail)" },
	{ 64 * KIB, "64 KiB (page multiple, 4 KiB-aligned)" },
	{ 2 * MIB - 4 * KIB, "2 MiB - 4 KiB (the largest 4 KiB-aligned)" },
	{ 2 * MIB, "2 MiB (2 MiB-aligned)" },
	{ 2 * MIB + 12 * KIB + 100, "2 MiB + 12 KiB + 100 (2 MiB-aligned, "
				    "tail)" },
	{ 32 * MIB, "32 MiB (large)" },
};
#define NCLS (sizeof(cls) / sizeof(cls[0]))

static char dir[256];
/* the size classes' pools, then the two of t_near() */
#define NPL (NCLS + 2)
static unsigned npl = NCLS;
static struct {
	struct pmg_pool *p;
	const char *what;
	char path[PATH_MAX];
	uintptr_t b, e;		/* the mapping: base, page-rounded end */
	size_t size;
	ino_t ino;
	uint64_t sum;		/* FNV-1a of the file */
	uint64_t head;		/* of all but its last 64 bytes */
} pl[NPL];

static size_t page_round(size_t n)
{
	return (n + 4095) & ~(size_t)4095;
}

/* The least distance from a pool's mapping to its own alias. */
static size_t own_gap(size_t maplen)
{
	return maplen < GAP_MIN ? GAP_MIN : maplen > GAP_MAX ? GAP_MAX : maplen;
}

static uint64_t file_sum(const char *path, size_t len)
{
	uint64_t h = 1469598103934665603ULL;
	unsigned char buf[8192];
	size_t done = 0;
	ssize_t n, i;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return 0;
	while (done < len && (n = read(fd, buf, sizeof(buf))) > 0)
		for (i = 0; i < n && done < len; i++, done++)
			h = (h ^ buf[i]) * 1099511628211ULL;
	close(fd);
	return h;
}

/* ------------------------------------------------- /proc/self/maps */

#define MAXM 1024
static struct mapping {
	uintptr_t lo, hi;
	char perms[8];
	unsigned long long ino;
} mm[MAXM];
static int nmm;

static void read_maps(void)
{
	char line[PATH_MAX + 128];
	unsigned long lo, hi;
	FILE *f = fopen("/proc/self/maps", "r");

	nmm = 0;
	while (f && fgets(line, sizeof(line), f) && nmm < MAXM) {
		struct mapping *m = &mm[nmm];

		if (sscanf(line, "%lx-%lx %7s %*s %*s %llu", &lo, &hi,
			   m->perms, &m->ino) != 4)
			continue;
		m->lo = lo;
		m->hi = hi;
		nmm++;
	}
	if (f)
		fclose(f);
}

/* The mapping holding @a, or NULL: unmapped. */
static const struct mapping *mapping_at(uintptr_t a)
{
	int i;

	for (i = 0; i < nmm; i++)
		if (mm[i].lo <= a && a < mm[i].hi)
			return &mm[i];
	return NULL;
}

/* The pool whose file @m maps, or -1. */
static int pool_of(const struct mapping *m)
{
	unsigned i;

	for (i = 0; m && m->ino && i < npl; i++)
		if (pl[i].p && m->ino == (unsigned long long)pl[i].ino)
			return (int)i;
	return -1;
}

/* Memory the program mapped itself (not a pool's, not a reservation):
 * the library does not place it, a store there is not the pool's. */
static int foreign(const struct mapping *m)
{
	return m && pool_of(m) < 0 && strcmp(m->perms, "---p");
}

/* --------------------------------------------------------- layout */

/*
 * Every alias (a read-write mapping of a pool's file) lies at least
 * own_gap() from its own pool's mapping and at least GAP_MIN from every
 * pool's mapping, either side.
 */
static void t_layout(void)
{
	int i, naliases = 0, ok = 1, above;
	size_t dist;
	unsigned j;

	read_maps();
	for (i = 0; i < nmm; i++) {
		int k = pool_of(&mm[i]);

		if (k < 0 || strncmp(mm[i].perms, "rw", 2))
			continue;
		if (mm[i].lo == pl[k].b)
			continue;	/* the pool itself (unprotected) */
		naliases++;
		above = mm[i].lo >= pl[k].e;
		dist = above ? mm[i].lo - pl[k].e :
		       mm[i].hi <= pl[k].b ? pl[k].b - mm[i].hi : 0;
		tap_diag("pool %s: mapping %#lx-%#lx, alias %#lx-%#lx (%zu KiB "
			 "%s it)", cls[k].what, (unsigned long)pl[k].b,
			 (unsigned long)pl[k].e, (unsigned long)mm[i].lo,
			 (unsigned long)mm[i].hi, dist >> 10,
			 above ? "above" : "below");
		if (dist < own_gap(pl[k].e - pl[k].b)) {
			tap_diag("  less than %zu KiB from its pool",
				 own_gap(pl[k].e - pl[k].b) >> 10);
			ok = 0;
		}
		for (j = 0; j < NCLS; j++) {
			if (!pl[j].p || (mm[i].hi + GAP_MIN <= pl[j].b) ||
			    (pl[j].e + GAP_MIN <= mm[i].lo))
				continue;
			tap_diag("  within %zu KiB of pool %s (%#lx-%#lx)",
				 GAP_MIN >> 10, cls[j].what,
				 (unsigned long)pl[j].b,
				 (unsigned long)pl[j].e);
			ok = 0;
		}
	}
	if (pmg_backend() == PMG_BACKEND_MPROTECT &&
	    !(getenv("PMGUARD_POOL_ALIAS") &&
	      !strcmp(getenv("PMGUARD_POOL_ALIAS"), "0")))
		CHECK(ok, naliases == (int)NCLS);
	else
		CHECK(ok, naliases == 0);
	tap_ok(ok, "%d aliases: each at least its pool's size (2 MiB to "
	       "1 GiB) from its pool, none within 2 MiB of any pool",
	       naliases);
}

/* ------------------------------------------- stores past the end */

static sigjmp_buf probe_jb;
static volatile uintptr_t probe_fault;

static void probe_segv(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	probe_fault = (uintptr_t)si->si_addr;
	siglongjmp(probe_jb, 1);
}

struct probe_res {
	unsigned long tried, faulted, landed_pool, foreign, wrong_addr;
	uintptr_t first_landed;
};
static struct probe_res *pres;	/* shared with the child */

/*
 * A store at every page from the pool's end on, up to own_gap() past it,
 * as a loop over page-sized records that runs past the end does (each
 * fault is caught and the next page is tried): every one must fault at
 * its own address, none may reach a pool's file.  Pages of the program's
 * own mappings there are skipped and counted.
 */
static int probe_child(void *v)
{
	unsigned k = (unsigned)(uintptr_t)v;
	uintptr_t a, end = pl[k].e + own_gap(pl[k].e - pl[k].b);
	struct sigaction sa;

	read_maps();
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = probe_segv;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	for (a = pl[k].e; a < end; a += 4096) {
		const struct mapping *m = mapping_at(a);

		if (foreign(m)) {
			pres->foreign++;
			continue;
		}
		pres->tried++;
		probe_fault = 0;
		if (sigsetjmp(probe_jb, 1) == 0) {
			*(volatile char *)(a + 64) = 'O';
			if (pool_of(m) >= 0) {
				if (!pres->landed_pool)
					pres->first_landed = a + 64;
				pres->landed_pool++;
			}
			continue;
		}
		pres->faulted++;
		if (probe_fault != a + 64)
			pres->wrong_addr++;
	}
	return 0;
}

static void t_probe(unsigned k)
{
	int st, ok = 1;
	unsigned j;

	memset(pres, 0, sizeof(*pres));
	st = tap_child(probe_child, (void *)(uintptr_t)k);
	CHECK(ok, WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(ok, pres->tried > 0 && pres->faulted == pres->tried);
	CHECK(ok, pres->landed_pool == 0 && pres->wrong_addr == 0);
	for (j = 0; j < npl; j++)
		CHECK(ok, !pl[j].p || file_sum(pl[j].path, pl[j].size) ==
					      pl[j].sum);
	if (!ok || pres->foreign)
		tap_diag("child status %#x: %lu stores, %lu faulted at their "
			 "address, %lu elsewhere, %lu landed in a pool's file, "
			 "%lu pages of the program's own skipped", st,
			 pres->tried, pres->faulted - pres->wrong_addr,
			 pres->wrong_addr, pres->landed_pool, pres->foreign);
	if (pres->landed_pool)
		tap_diag("the first store that landed: %#lx, %#lx past the "
			 "pool's end", (unsigned long)pres->first_landed,
			 (unsigned long)(pres->first_landed - pl[k].e));
	tap_ok(ok, "pool of %s: a store at each of the %lu pages up to %zu KiB "
	       "past its end faults at its address; no pool's file changed",
	       pl[k].what, pres->tried,
	       own_gap(pl[k].e - pl[k].b) >> 10);
}

/* ------------------------------------------- a linear overrun */

struct seen {
	int sig, si_code;
	uintptr_t addr;
};
static struct seen *seen;
static struct sigaction lib_sa;

/* Record the kernel's siginfo, then hand the fault to pmguard. */
static void spy(int sig, siginfo_t *si, void *uc)
{
	seen->sig = sig;
	seen->si_code = si->si_code;
	seen->addr = (uintptr_t)si->si_addr;
	if (lib_sa.sa_flags & SA_SIGINFO)
		lib_sa.sa_sigaction(sig, si, uc);
	else
		signal(sig, SIG_DFL);
}

/* Bytes stored one after the other from 64 bytes before the pool's end,
 * inside a write window (the pool's own bytes may be written), on past
 * the end: the first store past the mapping must fault. */
static int linear_child(void *v)
{
	unsigned k = (unsigned)(uintptr_t)v;
	volatile char *x = (volatile char *)pl[k].b;
	struct sigaction sa;
	size_t i, n = pl[k].e - pl[k].b + own_gap(pl[k].e - pl[k].b);

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = spy;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigaction(SIGSEGV, &sa, &lib_sa);
	pmg_set_report_fd(-1);
	pmg_set_fault_mode(PMG_FAULT_STRICT);
	if (pmg_dax_mk_readwrite(pl[k].p))
		return 3;
	for (i = pl[k].size - 64; i < n; i++)
		x[i] = 'L';
	return 0;	/* the whole overrun landed */
}

static void t_linear(unsigned k)
{
	const struct mapping *m;
	uintptr_t want;
	int st, ok = 1;
	unsigned j;

	/* the first page past the mapping that the program could not
	 * write anyway (its own writable mappings there, if any, are run
	 * through first) */
	read_maps();
	for (want = pl[k].e; (m = mapping_at(want)) && foreign(m) &&
			     !strncmp(m->perms, "rw", 2);
	     want = m->hi)
		;
	memset(seen, 0, sizeof(*seen));
	st = tap_child(linear_child, (void *)(uintptr_t)k);
	CHECK(ok, WIFSIGNALED(st) &&
		  (WTERMSIG(st) == SIGSEGV || WTERMSIG(st) == SIGABRT));
	CHECK(ok, seen->sig == SIGSEGV && seen->addr == want);
	/* the pool's bytes before the last 64 (which the window let the
	 * child write), every other pool's file whole */
	CHECK(ok, file_sum(pl[k].path, pl[k].size - 64) == pl[k].head);
	for (j = 0; j < NCLS; j++)
		CHECK(ok, !pl[j].p || j == k ||
			  file_sum(pl[j].path, pl[j].size) == pl[j].sum);
	pl[k].sum = file_sum(pl[k].path, pl[k].size);
	tap_diag("child status %#x, si_code %d at %#lx: %s", st, seen->si_code,
		 (unsigned long)seen->addr,
		 seen->addr == pl[k].e ? "the first byte past the mapping" :
		 "past the program's own mappings after it");
	tap_ok(ok, "pool of %s: a linear overrun in a write window faults at "
	       "the first byte past the pool's mapping (%#lx past its size); "
	       "the pool's other bytes and every other pool intact",
	       cls[k].what, (unsigned long)(pl[k].e - pl[k].b - pl[k].size));
}

/* -------------------------------------- what is placed after a pool */

/* Pool @k of @size bytes (file "@name.pool"), a header and its last
 * bytes written and summed; 0, or -1 (said). */
static int pool_make(unsigned k, size_t size, const char *name,
		     const char *what)
{
	struct pmg_pool_config *c = NULL;
	struct stat st;
	char *a;

	snprintf(pl[k].path, sizeof(pl[k].path), "%s/%s.pool", dir, name);
	unlink(pl[k].path);
	pl[k].size = size;
	pl[k].what = what;
	if (pmg_pool_config_new(&c) || pmg_pool_config_set_size(c, size) ||
	    pmg_pool_create(&pl[k].p, pl[k].path, c) ||
	    stat(pl[k].path, &st)) {
		tap_diag("create %s: %s", pl[k].path, pmg_errormsg());
		pl[k].p = NULL;
	}
	pmg_pool_config_delete(&c);
	if (!pl[k].p)
		return -1;
	pl[k].ino = st.st_ino;
	a = pmg_pool_address(pl[k].p);
	pl[k].b = (uintptr_t)a;
	pl[k].e = pl[k].b + page_round(size);
	pmg_memset_persist(a, 'H', 64);
	pmg_memset_persist(a + size - 64, 'T', 64);
	pl[k].sum = file_sum(pl[k].path, size);
	pl[k].head = file_sum(pl[k].path, size - 64);
	return 0;
}

/*
 * The program's own memory with two holes shaped so that a 1 MiB pool's
 * alias reservation takes the top of the lower hole and its mapping the
 * upper one (too small for the reservation); an 8 MiB pool created next
 * fits under that alias's 2 MiB gap, not its own size from it: without
 * a guard of its own above it, a store 6 MiB past its end rewrote the
 * 1 MiB pool's file with no fault.  Each pool: a store at every page up
 * to its own size (at least 2 MiB) past its end faults, no file changes.
 */
static void t_near(void)
{
	size_t zs = 64 * MIB, bsz = MIB, asz = 8 * MIB;
	unsigned b = NCLS, a = NCLS + 1;
	char *z, *top, *h1, *h2, *h2e;

	z = mmap(NULL, zs, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (z == MAP_FAILED) {
		tap_ok(0, "64 MiB of the program's own memory: %s",
		       strerror(errno));
		tap_ok(0, "64 MiB of the program's own memory");
		return;
	}
	top = z + zs;
	/* the upper hole: the 1 MiB pool fits, its alias reservation
	 * (1 MiB, a page, two 2 MiB gaps) does not */
	h1 = top - bsz - 64 * KIB;
	munmap(h1, (size_t)(top - h1));
	/* the lower one, under a page of the program's: that reservation
	 * and 12 MiB more */
	h2e = h1 - 4096;
	h2 = h2e - (bsz + 4096 + 4 * MIB) - 12 * MIB;
	munmap(h2, (size_t)(h2e - h2));
	npl = NPL;
	pool_make(b, bsz, "near-1m", "1 MiB, created first in holes the "
		  "program left");
	pool_make(a, asz, "near-8m", "8 MiB, created next in what is left");
	read_maps();
	if (pl[a].p && pl[b].p)
		tap_diag("holes %p-%p and %p-%p; 1 MiB pool at %#lx, 8 MiB "
			 "pool at %#lx-%#lx", (void *)h2, (void *)h2e,
			 (void *)h1, (void *)top, (unsigned long)pl[b].b,
			 (unsigned long)pl[a].b, (unsigned long)pl[a].e);
	if (pl[b].p)
		t_probe(b);
	else
		tap_ok(0, "pool of %s: created", pl[b].what);
	if (pl[a].p)
		t_probe(a);
	else
		tap_ok(0, "pool of %s: created", pl[a].what);
	pmg_pool_close(&pl[a].p);
	pmg_pool_close(&pl[b].p);
	npl = NCLS;
	unlink(pl[a].path);
	unlink(pl[b].path);
	/* the program's own, what is left of it (the holes hold the
	 * closed pools' quarantine now) */
	munmap(z, (size_t)(h2 - z));
	munmap(h2e, (size_t)(h1 - h2e));
}

/*
 * Random layouts: program mmaps and munmaps and pool creates and closes
 * (a fixed xorshift sequence per seed, not the libc's random()); after
 * every step no mapping of a pool file (an alias, another pool) lies
 * within any open pool's own size (2 MiB to 1 GiB) past its end.
 */
#define FZ_NP 24
#define FZ_NM 64
#define FZ_BYTES (96 * MIB) /* open pools' files at most (a guest's tmpfs) */
static uint64_t fz_rng;

static unsigned fz_rand(unsigned n)
{
	fz_rng ^= fz_rng << 13;
	fz_rng ^= fz_rng >> 7;
	fz_rng ^= fz_rng << 17;
	return (unsigned)(fz_rng % n);
}

/* 1 if the promise holds for every open pool of @fp, else 0 (said). */
static int fuzz_layout_ok(struct pmg_pool **fp, const size_t *fsz,
			  unsigned long seed, unsigned step)
{
	char line[PATH_MAX + 128];
	FILE *f = fopen("/proc/self/maps", "r");
	unsigned long lo[MAXM], hi[MAXM];
	char perms[MAXM][8];
	int n = 0, j, ok = 1;
	unsigned i;

	while (f && fgets(line, sizeof(line), f) && n < MAXM) {
		unsigned long l, h;

		if (sscanf(line, "%lx-%lx %7s", &l, &h, perms[n]) == 3 &&
		    strstr(line, dir)) {
			lo[n] = l;
			hi[n++] = h;
		}
	}
	if (f)
		fclose(f);
	for (i = 0; i < FZ_NP; i++) {
		uintptr_t e;
		size_t lim;

		if (!fp[i])
			continue;
		e = (uintptr_t)pmg_pool_address(fp[i]) + page_round(fsz[i]);
		lim = own_gap(page_round(fsz[i]));
		for (j = 0; j < n; j++) {
			if (lo[j] >= e + lim || hi[j] <= e)
				continue;
			tap_diag("seed %lu step %u: pool of %zu bytes ends at "
				 "%#lx; a pool file mapped %s at %#lx-%#lx, "
				 "%#lx past its end (less than %zu KiB)",
				 seed, step, fsz[i], (unsigned long)e,
				 perms[j], lo[j], hi[j],
				 (unsigned long)(lo[j] - e), lim >> 10);
			ok = 0;
		}
	}
	return ok;
}

static void t_fuzz(unsigned long seed, unsigned steps)
{
	struct pmg_pool *fp[FZ_NP] = { NULL };
	size_t fsz[FZ_NP] = { 0 }, msz[FZ_NM] = { 0 };
	void *m[FZ_NM] = { NULL };
	char path[PATH_MAX];
	unsigned s, i, pools = 0, fails = 0;
	size_t open_bytes = 0;
	int ok = 1;

	fz_rng = 0x9e3779b97f4a7c15ull * (seed + 1);
	for (s = 0; s < steps && ok; s++) {
		if (fz_rand(4) == 0) {
			i = fz_rand(FZ_NM);
			if (m[i]) {
				munmap(m[i], msz[i]);
				m[i] = NULL;
				continue;
			}
			msz[i] = ((size_t)fz_rand(4096) + 1) << 12;
			m[i] = mmap(NULL, msz[i], PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (m[i] == MAP_FAILED)
				m[i] = NULL;
			continue;
		}
		i = fz_rand(FZ_NP);
		snprintf(path, sizeof(path), "%s/fuzz-%u.pool", dir, i);
		if (fp[i]) {
			pmg_pool_close(&fp[i]);
			unlink(path);
			open_bytes -= fsz[i];
		} else {
			struct pmg_pool_config *c = NULL;
			unsigned r = fz_rand(3);
			int rc;
			size_t sz = r == 0 ? ((size_t)fz_rand(512) + 1) << 12 :
				    r == 1 ? ((size_t)fz_rand(64) + 1) << 20 :
					     (size_t)fz_rand(8 << 20) + 1;

			if (open_bytes + sz > FZ_BYTES)
				continue;	/* no room: a step without a change */
			unlink(path);
			rc = pmg_pool_config_new(&c);
			if (!rc)
				rc = pmg_pool_config_set_size(c, sz);
			if (!rc)
				rc = pmg_pool_create(&fp[i], path, c);
			if (rc == -ENOSPC) {
				/* a small filesystem (fs-DAX in the
				 * guest): a step without a change */
				fp[i] = NULL;
				unlink(path);
			} else if (rc) {
				tap_diag("seed %lu step %u: create %s: %s",
					 seed, s, path, pmg_errormsg());
				fp[i] = NULL;
				fails++;
			} else {
				fsz[i] = sz;
				open_bytes += sz;
				pools++;
			}
			pmg_pool_config_delete(&c);
		}
		ok = fuzz_layout_ok(fp, fsz, seed, s);
	}
	for (i = 0; i < FZ_NP; i++) {
		snprintf(path, sizeof(path), "%s/fuzz-%u.pool", dir, i);
		pmg_pool_close(&fp[i]);
		unlink(path);
	}
	for (i = 0; i < FZ_NM; i++)
		if (m[i])
			munmap(m[i], msz[i]);
	CHECK(ok, fails == 0 && pools > 0);
	tap_ok(ok, "random layout, seed %lu: %u steps (%u pools created), "
	       "after each no pool file mapped within an open pool's own "
	       "size past its end", seed, s, pools);
}

static const unsigned long fuzz_seeds[] = { 1, 2, 3, 4, 5, 6, 7, 8,
					    9, 10 };
#define FUZZ_STEPS 200
#define NFUZZ (sizeof(fuzz_seeds) / sizeof(fuzz_seeds[0]))

int main(void)
{
	char disk[256], shm[256];
	struct pmg_pool_config *c = NULL;
	unsigned k;

	tap_init((int)(1 + 2 * NCLS + 2 + NFUZZ));
	if (probe_dirs(dir, sizeof(dir), disk, shm, sizeof(disk)))
		tap_skip_all("no temporary directory");
	pres = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	seen = (struct seen *)(pres + 1);
	for (k = 0; k < NCLS; k++) {
		struct stat st;
		char *a;

		snprintf(pl[k].path, sizeof(pl[k].path), "%s/overrun-%u.pool",
			 dir, k);
		pl[k].size = cls[k].size;
		pl[k].what = cls[k].what;
		if (pmg_pool_config_new(&c) ||
		    pmg_pool_config_set_size(c, cls[k].size) ||
		    pmg_pool_create(&pl[k].p, pl[k].path, c) ||
		    stat(pl[k].path, &st)) {
			tap_diag("create %s: %s", pl[k].path, pmg_errormsg());
			pl[k].p = NULL;
		}
		pmg_pool_config_delete(&c);
		if (!pl[k].p)
			continue;
		pl[k].ino = st.st_ino;
		a = pmg_pool_address(pl[k].p);
		pl[k].b = (uintptr_t)a;
		pl[k].e = pl[k].b + page_round(cls[k].size);
		/* a header, and the pool's last bytes */
		pmg_memset_persist(a, 'H', 64);
		pmg_memset_persist(a + cls[k].size - 64, 'T', 64);
		pl[k].sum = file_sum(pl[k].path, cls[k].size);
		pl[k].head = file_sum(pl[k].path, cls[k].size - 64);
	}
	tap_diag("backend: %s", pmg_backend_name(pmg_backend()));
	t_layout();
	for (k = 0; k < NCLS; k++) {
		if (!pl[k].p) {
			tap_ok(0, "pool of %s: created", cls[k].what);
			tap_ok(0, "pool of %s: created", cls[k].what);
			continue;
		}
		t_probe(k);
		t_linear(k);
	}
	for (k = 0; k < NCLS; k++)
		pmg_pool_close(&pl[k].p);
	t_near();
	for (k = 0; k < NFUZZ; k++)
		t_fuzz(fuzz_seeds[k], FUZZ_STEPS);
	probe_dirs_remove(disk, shm);
	return tap_done();
}
