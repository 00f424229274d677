// SPDX-License-Identifier: MIT
/*
 * pmguard bench persist [--json] [--rounds N] [--dir DIR]
 *
 * pmg_memcpy_persist() against PMDK's pmem_memcpy_persist() on the same
 * mapping, and ours with protection on vs off, at 64 B .. 2 MiB.  PMDK's
 * libpmem is loaded with dlopen("libpmem.so.1"): no link-time dependency;
 * without it only ours is reported.  Both sides take the flush-instruction
 * path (PMDK never msyncs in this call): on a DAX directory, where a
 * MAP_SYNC mapping works, because the pool is pmem (no force variable);
 * elsewhere both are forced to treat the file as pmem
 * (PMGUARD_IS_PMEM_FORCE=1, PMEM_IS_PMEM_FORCE=1): apples to apples.
 * The protected pool is a second file of the same size in DIR (a pool is
 * open once per process).  Measurements are interleaved (the variants
 * rotate order each round) and the median of the rounds is reported.
 * On PKU the floor (two bare WRPKRU, bench_floor_pair(), in thread CPU
 * time as the copies are) is measured in the same run after each size's
 * rounds, and floor_ratio = t_unprot /
 * (t_unprot + floor) is what a protected call would reach if its window
 * cost only the floor; elsewhere it is null, with the reason.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "cleanup.h"
#include "cmds.h"
#include "json.h"
#include "pmguard.h"

#define POOL_SIZE (8UL << 20)
#define MAX_ROUNDS 101

typedef void *(*memcpy_fn)(void *, const void *, size_t);

enum { OURS, PMDK, PROT, NVAR };

static const size_t sizes[] = { 64, 256, 4096, 64 << 10, 2 << 20 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

struct bench {
	char *unprot, *prot;	/* the pools' mappings */
	char *src;
	memcpy_fn pmdk;
	size_t span;		/* destinations rotate through this */
};

/*
 * The calling thread's CPU time (user + system, so mprotect(2) counts):
 * unlike wall-clock time it does not grow while other processes have the
 * CPU, so ratios stay meaningful on a loaded machine.
 */
static double cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU seconds for @ops copies of @size bytes by variant @v. */
static double run(const struct bench *b, int v, size_t size, long ops)
{
	char *base = v == PROT ? b->prot : b->unprot;
	size_t step = size < 4096 ? 4096 + 64 : size, off = 0;
	double t0 = cpu_now();
	long i;

	for (i = 0; i < ops; i++) {
		char *d = base + off;

		if (v == PMDK)
			b->pmdk(d, b->src, size);
		else
			pmg_memcpy_persist(d, b->src, size);
		off += step;
		if (off + size > b->span)
			off = (off + 64) % step;
	}
	return cpu_now() - t0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: pmguard bench persist [--json] [--rounds N] "
		   "[--dir DIR]\n"
		   "  pmg_memcpy_persist vs PMDK pmem_memcpy_persist (dlopen "
		   "libpmem.so.1)\n"
		   "  on one file mapping in DIR (default /dev/shm, else "
		   "/tmp), both on\n"
		   "  the flush path (forced there unless DIR is on DAX and "
		   "maps with MAP_SYNC);\n"
		   "  and ours with protection on vs off (a second pool "
		   "file in DIR).\n"
		   "  --rounds N  rounds per size, 1..%d (default 15)\n",
		   MAX_ROUNDS);
}

#ifndef MAP_SYNC
#define MAP_SYNC 0x80000
#endif
#ifndef MAP_SHARED_VALIDATE
#define MAP_SHARED_VALIDATE 0x03
#endif

/* Does a file in @dir map with MAP_SYNC (a DAX filesystem)? */
static bool dir_is_dax(const char *dir)
{
	char p[512];
	void *m;
	int fd;

	if (snprintf(p, sizeof(p), "%s/.pmguard-bench-probe-%d", dir,
		     (int)getpid()) >= (int)sizeof(p))
		return false;
	fd = open(p, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return false;
	unlink(p);
	if (ftruncate(fd, 4096)) {
		close(fd);
		return false;
	}
	m = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		 MAP_SHARED_VALIDATE | MAP_SYNC, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return false;
	munmap(m, 4096);
	return true;
}

static const char *pick_dir(const char *want)
{
	struct stat st;

	if (want)
		return want;
	if (!stat("/dev/shm", &st) && S_ISDIR(st.st_mode) &&
	    !access("/dev/shm", W_OK))
		return "/dev/shm";
	return "/tmp";
}

/* Close both pools (either may be NULL) and remove their files. */
static void teardown(struct pmg_pool **pu, struct pmg_pool **pp,
		     const char *path, const char *path2)
{
	pmg_pool_close(pp);
	pmg_pool_close(pu);
	unlink(path);
	unlink(path2);
	cli_scratch_done(path);
	cli_scratch_done(path2);
}

/*
 * The pool pair the persistence benchmarks compare on (bench persist,
 * bench count): @path, pmguard-@stem-PID.pool in @dir, an unprotected
 * pool of @size bytes, and @path2 (@path ".prot") a protected one, both
 * registered as scratch files.  0; a pool error's negative errno
 * (pmg_errormsg() says why); or, a path too long for @n or @n2, the exit
 * status of the message "@verb: --dir: path too long".
 */
int bench_pool_pair(const char *verb, const char *dir, const char *stem,
		    size_t size, char *path, size_t n, char *path2, size_t n2,
		    struct pmg_pool **pu, struct pmg_pool **pp)
{
	struct pmg_pool_config *cfg = NULL;
	int rc;

	if (snprintf(path, n, "%s/pmguard-%s-%d.pool", dir, stem,
		     (int)getpid()) >= (int)n ||
	    snprintf(path2, n2, "%s.prot", path) >= (int)n2 ||
	    cli_scratch(path, false) || cli_scratch(path2, false))
		return cli_error("%s: --dir: path too long", verb);
	rc = pmg_pool_config_new(&cfg);
	if (!rc)
		rc = pmg_pool_config_set_size(cfg, size);
	if (!rc)
		rc = pmg_pool_config_set_flags(cfg, PMG_POOL_UNPROTECTED);
	if (!rc)
		rc = pmg_pool_create(pu, path, cfg);
	if (!rc)
		rc = pmg_pool_config_set_flags(cfg, 0);
	if (!rc)
		rc = pmg_pool_create(pp, path2, cfg);
	pmg_pool_config_delete(&cfg);
	return rc;
}

int cmd_bench_persist(int argc, char **argv)
{
	double gb[NVAR][NSIZES], samples[NVAR][MAX_ROUNDS], fl[NSIZES];
	const char *nopku;
	long ops[NVAR][NSIZES];
	struct pmg_pool *pu = NULL, *pp = NULL;
	struct pmg_persist_info pi;
	struct pmg_pool_info info;
	bool aliased;
	const char *dir = NULL, *pmdk_why = NULL;
	char path[512], path2[520];
	struct bench b;
	bool dax, forced;
	void *lib;
	bool json = false;
	unsigned long long nrounds = 15;
	const struct cli_opt opts[] = {
		{ .name = "--json", .kind = CLI_FLAG, .out = &json },
		{ .name = "--rounds", .kind = CLI_COUNT, .lo = 1,
		  .hi = MAX_ROUNDS, .out = &nrounds },
		{ .name = "--dir", .kind = CLI_STRING, .out = &dir },
		{ .name = NULL },
	};
	const struct cli_verb verb = { "bench persist", opts, usage, NULL,
				       NULL };
	int rounds, i, r, v, nv, rc, vars[NVAR];
	size_t s;
	double t_start = cli_now();

	rc = cli_args(&verb, argc, argv);
	if (rc != CLI_GO_ON)
		return rc;
	rounds = (int)nrounds;

	/* Before our first pool call and before libpmem's constructor. */
	dir = pick_dir(dir);
	dax = dir_is_dax(dir);
	forced = !dax;
	if (forced) {
		setenv("PMGUARD_IS_PMEM_FORCE", "1", 1);
		setenv("PMEM_IS_PMEM_FORCE", "1", 1);
	}
	memset(&b, 0, sizeof(b));
	lib = dlopen("libpmem.so.1", RTLD_NOW | RTLD_LOCAL);
	if (lib) {
		b.pmdk = (memcpy_fn)dlsym(lib, "pmem_memcpy_persist");
		if (!b.pmdk)
			pmdk_why = "libpmem.so.1 has no pmem_memcpy_persist";
	} else {
		pmdk_why = "libpmem.so.1 not found (install libpmem1): "
			   "reporting pmguard only";
	}
	nv = 0;
	vars[nv++] = OURS;
	if (b.pmdk)
		vars[nv++] = PMDK;
	vars[nv++] = PROT;

	rc = bench_pool_pair("bench persist", dir, "bench", POOL_SIZE, path,
			     sizeof(path), path2, sizeof(path2), &pu, &pp);
	if (rc > 0)
		return rc;
	if (rc) {
		cli_error("bench persist: %s", pmg_errormsg());
		teardown(&pu, &pp, path, path2);
		return 1;
	}
	pmg_persist_get_info(&pi, sizeof(pi));
	nopku = bench_no_pku_why();
	aliased = !pmg_pool_get_info(pp, &info, sizeof(info)) && info.aliased;
	b.unprot = pmg_pool_address(pu);
	b.prot = pmg_pool_address(pp);
	b.span = POOL_SIZE;
	b.src = aligned_alloc(4096, 2 << 20);
	if (!b.src) {
		teardown(&pu, &pp, path, path2);
		return cli_error("bench persist: out of memory") - 1;
	}
	for (s = 0; s < (2 << 20); s++)
		b.src[s] = (char)(s * 131 + 7);
	/* fault every page in on both sides before timing */
	pmg_memset_persist(b.unprot, 0, POOL_SIZE);
	pmg_memset_persist(b.prot, 0, POOL_SIZE);
	if (!json)
		printf("pmguard bench persist: backend %s, flush %s, movnt %s "
		       "(threshold %zu), %s, %d rounds\n",
		       pmg_backend_name(pmg_backend()), pi.flush, pi.movnt,
		       pi.movnt_threshold, path, rounds);

	/* calibrate: about 3 ms per measurement */
	for (s = 0; s < NSIZES; s++)
		for (i = 0; i < nv; i++) {
			long n = 8;
			double t;

			v = vars[i];
			while ((t = run(&b, v, sizes[s], n)) < 3e-3 &&
			       n < (1L << 26))
				n *= 2;
			ops[v][s] = n;
		}
	for (s = 0; s < NSIZES; s++) {
		for (r = 0; r < rounds; r++)
			for (i = 0; i < nv; i++) {
				v = vars[(i + r) % nv];	/* rotate the order */
				samples[v][r] = (double)sizes[s] *
						(double)ops[v][s] /
						run(&b, v, sizes[s], ops[v][s]) /
						1e9;
			}
		for (i = 0; i < nv; i++)
			gb[vars[i]][s] = median(samples[vars[i]], rounds);
		fl[s] = nopku ? -1 : bench_floor_pair(200000, 5);
	}

	if (json) {
		struct json j;

		json_begin(&j, stdout, true);
		json_str(&j, "backend", pmg_backend_name(pmg_backend()));
		json_str(&j, "flush", pi.flush);
		json_str(&j, "movnt", pi.movnt);
		json_u64(&j, "movnt_threshold", pi.movnt_threshold);
		json_str(&j, "file", path);
		json_bool(&j, "forced_pmem", forced);
		json_bool(&j, "map_sync", dax);
		json_bool(&j, "is_pmem", pmg_pool_is_pmem(pu) == 1 &&
				       pmg_pool_is_pmem(pp) == 1);
		json_int(&j, "rounds", rounds);
		json_bool(&j, "protected_pool_aliased", aliased);
		json_str(&j, "clock", "thread CPU time");
		if (nopku) {
			json_null(&j, "floor_ns_per_pair");
			json_str(&j, "floor_skip", nopku);
		} else {
			json_str(&j, "floor",
				 "two bare WRPKRU, measured "
				 "after each size's rounds; floor_ratio = "
				 "t_unprot / (t_unprot + floor pair)");
		}
		if (b.pmdk)
			json_str(&j, "pmdk", "libpmem.so.1");
		else
			json_null(&j, "pmdk");
		json_str(&j, "note", forced ?
			 "both sides forced to the flush path "
			 "(PMGUARD_IS_PMEM_FORCE=1, PMEM_IS_PMEM_FORCE=1) on "
			 "one mapping; pmguard_gbps is pmg_memcpy_persist on "
			 "an unprotected pool; protected_over_unprotected "
			 "is ours on a protected pool (a second file) "
			 "over ours unprotected (each call opens and closes "
			 "a window, or with protected_pool_aliased writes "
			 "through the pool's alias); medians of interleaved "
			 "rounds" :
			 "DAX directory: both pools mapped with MAP_SYNC, "
			 "pmem without force variables; pmguard_gbps is "
			 "pmg_memcpy_persist on an unprotected pool; "
			 "protected_over_unprotected is ours on a protected "
			 "pool (a second file) over ours unprotected; "
			 "medians of interleaved rounds");
		json_arr(&j, "results");
		for (s = 0; s < NSIZES; s++) {
			json_obj(&j, NULL);
			json_u64(&j, "size", sizes[s]);
			json_num(&j, "pmguard_gbps", gb[OURS][s], 4);
			if (b.pmdk) {
				json_num(&j, "pmdk_gbps", gb[PMDK][s], 4);
				json_num(&j, "ratio_vs_pmdk",
					 gb[OURS][s] / gb[PMDK][s], 3);
			} else {
				json_null(&j, "pmdk_gbps");
				json_null(&j, "ratio_vs_pmdk");
			}
			json_num(&j, "pmguard_protected_gbps", gb[PROT][s],
				 4);
			json_num(&j, "protected_over_unprotected",
				 gb[PROT][s] / gb[OURS][s], 4);
			if (fl[s] > 0) {
				double t = (double)sizes[s] / gb[OURS][s];
				double fr = t / (t + fl[s]);

				json_num(&j, "floor_ns_per_pair", fl[s], 3);
				json_num(&j, "floor_ratio", fr, 4);
				json_num(&j, "below_floor_ratio",
					 fr - gb[PROT][s] / gb[OURS][s], 4);
			} else {
				json_null(&j, "floor_ratio");
			}
			json_end(&j);
		}
		json_finish(&j);
	} else {
		if (pmdk_why)
			printf("PMDK: %s\n", pmdk_why);
		printf("%s\n\n%9s %12s %12s %8s %14s %10s %10s\n",
		       forced ? "both sides forced to the flush path "
				"(PMGUARD_IS_PMEM_FORCE=1, PMEM_IS_PMEM_FORCE=1)"
			      : "DAX: both pools MAP_SYNC, pmem by their own account "
				"(no force variable)",
		       "size", "pmguard", "pmdk", "ratio", "protected",
		       "prot/unprot", "floor_ratio");
		for (s = 0; s < NSIZES; s++) {
			char pm[24] = "-", ra[16] = "-", fr[16] = "SKIP";

			if (b.pmdk) {
				snprintf(pm, sizeof(pm), "%.3f GB/s",
					 gb[PMDK][s]);
				snprintf(ra, sizeof(ra), "%.3f",
					 gb[OURS][s] / gb[PMDK][s]);
			}
			if (fl[s] > 0) {
				double t = (double)sizes[s] / gb[OURS][s];

				snprintf(fr, sizeof(fr), "%.4f",
					 t / (t + fl[s]));
			}
			printf("%9zu %7.3f GB/s %12s %8s %9.3f GB/s %10.4f "
			       "%10s\n",
			       sizes[s], gb[OURS][s], pm, ra, gb[PROT][s],
			       gb[PROT][s] / gb[OURS][s], fr);
		}
		if (nopku)
			printf("floor_ratio: SKIP: %s\n", nopku);
		else
			printf("floor_ratio = t_unprot / (t_unprot + two bare "
			       "WRPKRU), the floor measured in this run\n");
		printf("\n(%.1f s; protected = calls on a protected pool: %s)\n",
		       cli_now() - t_start,
		       pmg_backend() == PMG_BACKEND_PKU ?
		       "each opens and closes a write window, WRPKRU, "
		       "thread-local" : aliased ?
		       "no window, each writes through the pool's alias" :
		       "each opens and closes a page window, mprotect(2) of "
		       "the pages it touches");
	}
	free(b.src);
	teardown(&pu, &pp, path, path2);
	if (lib)
		dlclose(lib);
	return 0;
}
