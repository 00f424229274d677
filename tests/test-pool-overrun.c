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
 * between.  Both backends (PKU in the guest: no alias, the same faults).
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
static struct {
	struct pmg_pool *p;
	char path[PATH_MAX];
	uintptr_t b, e;		/* the mapping: base, page-rounded end */
	size_t size;
	ino_t ino;
	uint64_t sum;		/* FNV-1a of the file */
	uint64_t head;		/* of all but its last 64 bytes */
} pl[NCLS];

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

	for (i = 0; m && m->ino && i < NCLS; i++)
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
	for (j = 0; j < NCLS; j++)
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
	       cls[k].what, pres->tried,
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

int main(void)
{
	char disk[256], shm[256];
	struct pmg_pool_config *c = NULL;
	unsigned k;

	tap_init(1 + 2 * NCLS);
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
	probe_dirs_remove(disk, shm);
	return tap_done();
}
