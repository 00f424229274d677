// SPDX-License-Identifier: MIT
/*
 * pmguard bench count [--iters N] [--dir DIR]
 *
 * Runs each operation N times inside a region marked for the TCG counting
 * plugin (tools/tcg/count.c, tools/tcg/marker.h) and prints, after each
 * region, one line
 *
 *   region ID LABEL/NAME ITERS
 *
 * in the order the regions ran; the plugin writes one JSON line per region
 * in the same order, with the same ID, and guest/count-check joins the
 * two (docs/performance.md, "Counts, not times").  LABEL is the backend:
 * pku, mprotect-lazy or mprotect-eager (PMGUARD_MPROTECT_WINDOWS).
 * Without the plugin (on hardware, or QEMU without it) the markers are
 * NOPs and this prints the same lines: nothing is measured here, the
 * plugin counts.
 *
 * The operations:
 *   loop        the empty loop (the loop's own instructions per iteration,
 *               present in every region below)
 *   floor       two bare WRPKRU, opening then closing the domain's key
 *               (PKU only): what a window pair cannot go below
 *   floor_rd    RDPKRU and the two WRPKRU (PKU only)
 *   write_pair  pmg_write_begin() + pmg_write_end()
 *   write_touch the same with one byte written inside the window (on the
 *               lazy mprotect backend: the fault, the grant, the
 *               re-protection)
 *   read_pair   pmg_open/close(PMG_READ) on a PMG_DOMAIN_NOACCESS domain
 *   neg_extra_wrpkru  a window pair with one more WRPKRU inside (PKU
 *               only): a test-only variant that the budget check must
 *               reject (its negative control)
 *   persist_S, pmdk_S, persist_prot_S  pmg_memcpy_persist() on an
 *               unprotected pool, PMDK's pmem_memcpy_persist() on the same
 *               mapping (libpmem.so.1 dlopen'ed; left out without it), and
 *               ours on a protected pool, S = 64, 256, 4096, 65536,
 *               2097152 bytes; both sides on the flush path
 *               (PMGUARD_IS_PMEM_FORCE, PMEM_IS_PMEM_FORCE, as bench
 *               persist does off DAX)
 * Each operation runs once before its region (the thread's first window,
 * the pages faulted in), so that the region counts the steady state.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "cleanup.h"
#include "cmds.h"
#include "pmguard.h"
#include "tcg/marker.h"

#define POOL_SIZE (8UL << 20)

/* Region ids: constants (the marker's displacement is in the code). */
enum {
	R_LOOP = 1,
	R_FLOOR,
	R_FLOOR_RD,
	R_WRITE_PAIR,
	R_WRITE_TOUCH,
	R_READ_PAIR,
	R_NEG_EXTRA,
	R_PERSIST = 16, /* + 3 * size index + variant */
};

typedef void *(*memcpy_fn)(void *, const void *, size_t);

static const char *label;

static void said(int id, const char *name, long iters)
{
	printf("region %d %s/%s %ld\n", id, label, name, iters);
	fflush(stdout);
}

/*
 * One region: @expr once (warm: the thread's first window, the page
 * faults), then @iters times between the markers.  A macro, so that each
 * region's id is a constant in its marker and @expr is inlined.
 */
#define REGION(id, name, iters, expr)                      \
	do {                                               \
		long _i;                                   \
                                                           \
		(void)(expr);                              \
		PMG_COUNT_BEGIN(id);                       \
		for (_i = 0; _i < (iters); _i++) {         \
			(void)(expr);                      \
			__asm__ volatile("" ::: "memory"); \
		}                                          \
		PMG_COUNT_END(id);                         \
		said(id, name, iters);                     \
	} while (0)

#define INLINE static inline __attribute__((always_inline))

static volatile char *touch_at;
static uint32_t floor_open, floor_closed, floor_mask;

INLINE int floor_pair(void)
{
	_pmg_wrpkru(floor_open);
	_pmg_wrpkru(floor_closed);
	return 0;
}

INLINE int floor_rd_pair(void)
{
	uint32_t v = _pmg_rdpkru();

	_pmg_wrpkru(v & ~floor_mask);
	_pmg_wrpkru(v);
	return 0;
}

INLINE int write_pair(struct pmg_domain *d)
{
	pmg_write_begin(d);
	return pmg_write_end(d);
}

INLINE int write_touch(struct pmg_domain *d)
{
	pmg_write_begin(d);
	*touch_at = 0x5a;
	return pmg_write_end(d);
}

INLINE int read_pair(struct pmg_domain *d)
{
	pmg_open(d, PMG_READ);
	return pmg_close(d, PMG_READ);
}

/* Test-only: a pair with one WRPKRU more, which the budgets must reject. */
INLINE int extra_wrpkru_pair(struct pmg_domain *d)
{
	pmg_write_begin(d);
	_pmg_wrpkru(_pmg_rdpkru());
	return pmg_write_end(d);
}

static void pairs(struct pmg_domain *d, struct pmg_domain *rd, long n)
{
	bool pku = pmg_backend() == PMG_BACKEND_PKU;

	REGION(R_LOOP, "loop", n, 0);
	if (pku) {
		floor_closed = _pmg_rdpkru();
		floor_open = floor_closed & ~d->_mask;
		floor_mask = d->_mask;
		REGION(R_FLOOR, "floor", n, floor_pair());
		REGION(R_FLOOR_RD, "floor_rd", n, floor_rd_pair());
	}
	REGION(R_WRITE_PAIR, "write_pair", n, write_pair(d));
	REGION(R_WRITE_TOUCH, "write_touch", n, write_touch(d));
	REGION(R_READ_PAIR, "read_pair", n, read_pair(rd));
	if (pku)
		REGION(R_NEG_EXTRA, "neg_extra_wrpkru", n,
		       extra_wrpkru_pair(d));
}

static const size_t sizes[] = { 64, 256, 4096, 65536, 2 << 20 };
static const long size_iters[] = { 256, 128, 32, 8, 2 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* One size's three variants; @i the index in sizes[] (a constant after
 * unrolling: the region id must be one). */
#define PERSIST(i)                                                          \
	do {                                                                \
		size_t sz = sizes[i];                                       \
		long it = size_iters[i];                                    \
		char nm[40];                                                \
                                                                            \
		snprintf(nm, sizeof(nm), "persist_%zu", sz);                \
		REGION(R_PERSIST + 3 * (i), nm, it,                         \
		       pmg_memcpy_persist(unprot + next_dst(sz), src, sz)); \
		if (pmdk) {                                                 \
			snprintf(nm, sizeof(nm), "pmdk_%zu", sz);           \
			REGION(R_PERSIST + 3 * (i) + 1, nm, it,             \
			       pmdk(unprot + next_dst(sz), src, sz));       \
		}                                                           \
		snprintf(nm, sizeof(nm), "persist_prot_%zu", sz);           \
		REGION(R_PERSIST + 3 * (i) + 2, nm, it,                     \
		       pmg_memcpy_persist(prot + next_dst(sz), src, sz));   \
	} while (0)

/* Destinations rotate (as in bench persist) within the pool. */
static size_t step_off;

static size_t next_dst(size_t sz)
{
	step_off = (step_off + (sz < 4096 ? 4096 + 64 : sz)) % (POOL_SIZE - sz);
	return step_off;
}

static int persists(const char *dir)
{
	struct pmg_pool *pu = NULL, *pp = NULL;
	char path[512], path2[520];
	char *unprot, *prot, *src;
	memcpy_fn pmdk = NULL;
	void *lib;
	int rc;

	lib = dlopen("libpmem.so.1", RTLD_NOW | RTLD_LOCAL);
	if (lib)
		pmdk = (memcpy_fn)dlsym(lib, "pmem_memcpy_persist");
	if (!pmdk)
		printf("# pmdk: SKIP: %s\n",
		       lib ? "libpmem.so.1 has no pmem_memcpy_persist"
			   : "libpmem.so.1 not found (install libpmem1)");
	rc = bench_pool_pair("bench count", dir, "count", POOL_SIZE, path,
			     sizeof(path), path2, sizeof(path2), &pu, &pp);
	if (rc > 0)
		return rc;
	src = aligned_alloc(4096, 2 << 20);
	if (rc || !src) {
		cli_error("bench count: %s",
			  rc ? pmg_errormsg() : "out of memory");
		rc = 1;
		goto out;
	}
	memset(src, 0x3c, 2 << 20);
	unprot = pmg_pool_address(pu);
	prot = pmg_pool_address(pp);
	pmg_memset_persist(unprot, 0, POOL_SIZE);
	pmg_memset_persist(prot, 0, POOL_SIZE);
	PERSIST(0);
	PERSIST(1);
	PERSIST(2);
	PERSIST(3);
	PERSIST(4);
out:
	free(src);
	pmg_pool_close(&pp);
	pmg_pool_close(&pu);
	unlink(path);
	unlink(path2);
	cli_scratch_done(path);
	cli_scratch_done(path2);
	if (lib)
		dlclose(lib);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: pmguard bench count [--iters N] [--dir DIR]\n"
		   "  each operation N times (default 1000) in a region "
		   "marked for the TCG\n"
		   "  counting plugin (tools/tcg/count.c; make bench-count "
		   "runs it in the\n"
		   "  PKU guest); prints 'region ID LABEL/NAME ITERS' per "
		   "region\n"
		   "  --dir DIR  where the persist pools go (default "
		   "/dev/shm, else /tmp)\n");
}

int cmd_bench_count(int argc, char **argv)
{
	unsigned long long iters = 1000;
	const char *dir = NULL, *mw;
	const struct cli_opt opts[] = {
		{ .name = "--iters",
		  .kind = CLI_COUNT,
		  .lo = 1,
		  .hi = 1000000,
		  .out = &iters },
		{ .name = "--dir", .kind = CLI_STRING, .out = &dir },
		{ .name = NULL },
	};
	const struct cli_verb verb = { "bench count", opts, usage, NULL, NULL };
	struct pmg_domain *d = NULL, *rd = NULL;
	char *page = MAP_FAILED, *rpage = MAP_FAILED;
	struct stat st;
	int rc;

	rc = cli_args(&verb, argc, argv);
	if (rc != CLI_GO_ON)
		return rc;
	if (!dir)
		dir = !stat("/dev/shm", &st) && S_ISDIR(st.st_mode) &&
				      !access("/dev/shm", W_OK)
			      ? "/dev/shm"
			      : "/tmp";
	/* before the first pool call and before libpmem's constructor */
	setenv("PMGUARD_IS_PMEM_FORCE", "1", 1);
	setenv("PMEM_IS_PMEM_FORCE", "1", 1);
	if (pmg_init())
		return cli_error("bench count: %s", pmg_errormsg());
	mw = getenv("PMGUARD_MPROTECT_WINDOWS");
	label = pmg_backend() == PMG_BACKEND_PKU ? "pku"
		: mw && !strcmp(mw, "eager")	 ? "mprotect-eager"
						 : "mprotect-lazy";
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	rpage = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED || rpage == MAP_FAILED) {
		rc = cli_error("bench count: mmap failed");
		goto out;
	}
	memset(page, 0, 4096);
	memset(rpage, 0, 4096);
	rc = pmg_domain_new(&d, "count", 0);
	if (!rc)
		rc = pmg_protect(d, page, 4096);
	if (!rc)
		rc = pmg_domain_new(&rd, "count-read", PMG_DOMAIN_NOACCESS);
	if (!rc)
		rc = pmg_protect(rd, rpage, 4096);
	if (rc) {
		rc = cli_error("bench count: %s", pmg_errormsg());
		goto out;
	}
	touch_at = page;
	printf("# pmguard bench count: backend %s, %llu iterations\n", label,
	       iters);
	/* instruction counts depend on it (guest/count-check: cc=) */
#ifdef __clang__
	printf("# compiler: clang %s\n", __clang_version__);
#else
	printf("# compiler: gcc %s\n", __VERSION__);
#endif
	pairs(d, rd, (long)iters);
	rc = persists(dir);
out:
	if (page != MAP_FAILED) {
		pmg_unprotect(page, 4096);
		munmap(page, 4096);
	}
	if (rpage != MAP_FAILED) {
		pmg_unprotect(rpage, 4096);
		munmap(rpage, 4096);
	}
	pmg_domain_delete(&rd);
	pmg_domain_delete(&d);
	return rc;
}
