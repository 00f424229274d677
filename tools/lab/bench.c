// SPDX-License-Identifier: MIT
/*
 * pmguard bench window [--json]: the cost of one window open+close pair on
 * each path available, measured side by side in one run:
 *   software  the inline window code with the register write replaced by
 *             a compiler barrier (runs anywhere: the code's own cost)
 *   wrpkru    pmg_open/pmg_close on the PKU backend
 *   mprotect  pmg_open/pmg_close on the mprotect backend (a child process
 *             with PMGUARD_BACKEND=mprotect when this one runs on PKU)
 *   mprotect-write  the same with one byte written inside the window (a
 *             lazy write window's fault, grant and re-protect)
 * and, on PKU, the floor: two bare WRPKRU (open, close) with nothing
 * else, to which each path's ratio is given (floor_ratio), and the floor
 * with a read: RDPKRU + two WRPKRU (what a window that reads the register
 * once cannot go below).  Without PKU the floor and the PKU paths say SKIP
 * and why (bench_no_pku_why()): no number is made up.
 * Each path runs in rounds; the median round is reported.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "cleanup.h"
#include "cmds.h"
#include "json.h"
#include "pmguard.h"

#define ROUNDS 7
#define QUICK_ROUNDS 3

static int rounds = ROUNDS;

/* The clock of bench_pairs(): monotonic, or the thread's CPU time for
 * bench_floor_pair() (bench persist's clock, so that its ratio compares
 * like with like). */
static double thread_cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double (*now)(void) = cli_now;

static uint32_t soft_reg;

static uint32_t soft_rd(void)
{
	return *(volatile uint32_t *)&soft_reg;
}

static void soft_wr(uint32_t v)
{
	__asm__ volatile("" ::: "memory");
	*(volatile uint32_t *)&soft_reg = v;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[n / 2];
}

/* One window open+close pair: the inline code with a software register. */
static inline __attribute__((always_inline)) void
software_pair(struct pmg_domain *d)
{
	_pmg_open_edge(d, PMG_WRITE, soft_rd, soft_wr);
	_pmg_close_edge(d, PMG_WRITE, soft_rd, soft_wr);
}

/* The floor: two bare WRPKRU, opening then closing the key. */
static uint32_t floor_open, floor_closed;

static inline __attribute__((always_inline)) void
floor_pair(struct pmg_domain *d)
{
	(void)d;
	_pmg_wrpkru(floor_open);
	_pmg_wrpkru(floor_closed);
}

/* The floor with a read: RDPKRU, then the two WRPKRU of the pair. */
static uint32_t floor_mask;

static inline __attribute__((always_inline)) void
floor_rd_pair(struct pmg_domain *d)
{
	uint32_t v = _pmg_rdpkru();

	(void)d;
	_pmg_wrpkru(v & ~floor_mask);
	_pmg_wrpkru(v);
}

static volatile char *write_at;

/* A write window that writes one byte. */
static inline __attribute__((always_inline)) void
api_write_pair(struct pmg_domain *d)
{
	pmg_open(d, PMG_WRITE);
	*write_at = 0x5a;
	pmg_close(d, PMG_WRITE);
}

/* ... and through the API, on the backend in use. */
static inline __attribute__((always_inline)) void
api_pair(struct pmg_domain *d)
{
	pmg_open(d, PMG_WRITE);
	pmg_close(d, PMG_WRITE);
}

/*
 * Nanoseconds per @pair(@d), the median of ROUNDS rounds of @pairs calls.
 * Always inlined with a constant @pair, so that the loop calls it
 * directly, as the code measured would, not through a pointer.
 */
static inline __attribute__((always_inline)) double
bench_pairs(struct pmg_domain *d, long pairs,
	    void (*pair)(struct pmg_domain *))
{
	double r[ROUNDS];
	int i;
	long j;

	for (i = 0; i < rounds; i++) {
		double t0 = now();

		for (j = 0; j < pairs; j++)
			pair(d);
		r[i] = (now() - t0) * 1e9 / (double)pairs;
	}
	return median(r, rounds);
}

/*
 * The software path runs the inline edges on a stand-in handle that holds
 * a key (the domain's on PKU, else key 1) in a thread whose counts the
 * library knows (_pmg_tls.r[0]), so that it measures the code a keyed
 * window runs whatever the backend: with the register a variable, the
 * stand-in's counts go up and down and end where they were.
 */
static double bench_software(struct pmg_domain *d, long pairs)
{
	struct pmg_domain fake = *d;
	int k = d->_key >= 1 && d->_key <= 15 ? d->_key : 1;
	uint16_t reg0 = _pmg_tls.r[0];
	double ns;

	fake._key = k;
	fake._mask = 3u << (2 * k);
	fake._rd_bits = 2u << (2 * k); /* write-disabled: WD */
	fake._dflt_bits = 2u << (2 * k);
	fake._self = &fake;
	fake._ref = 1;
	_pmg_tls.r[0] = 1;
	ns = bench_pairs(&fake, pairs, software_pair);
	_pmg_tls.r[0] = reg0;
	return ns;
}

static double bench_api(struct pmg_domain *d, long pairs)
{
	return bench_pairs(d, pairs, api_pair);
}

static double bench_api_write(struct pmg_domain *d, char *page, long pairs)
{
	write_at = page;
	return bench_pairs(d, pairs, api_write_pair);
}

/* Two bare WRPKRU on @d's key (PKU backend, @d keyed). */
static double bench_floor(struct pmg_domain *d, long pairs)
{
	floor_closed = _pmg_rdpkru();
	floor_open = floor_closed & ~d->_mask;
	return bench_pairs(d, pairs, floor_pair);
}

/* RDPKRU + two WRPKRU on @d's key. */
static double bench_floor_rd(struct pmg_domain *d, long pairs)
{
	floor_mask = d->_mask;
	return bench_pairs(d, pairs, floor_rd_pair);
}

const char *bench_no_pku_why(void)
{
	static char why[160];
	struct pmg_info in;

	if (pmg_get_info(&in, sizeof(in)))
		return "pmg_init() failed: no backend";
	if (in.backend == PMG_BACKEND_PKU)
		return NULL;
	if (!in.cpu_pku)
		snprintf(why, sizeof(why),
			 "no PKU on this CPU (CPUID pku no; backend %s)",
			 pmg_backend_name(in.backend));
	else if (!in.cpu_ospke)
		snprintf(why, sizeof(why),
			 "PKU not enabled by the kernel (ospke no; backend %s)",
			 pmg_backend_name(in.backend));
	else if (!in.kernel_pkeys)
		snprintf(why, sizeof(why),
			 "pkey_alloc() fails here (backend %s)",
			 pmg_backend_name(in.backend));
	else
		snprintf(why, sizeof(why),
			 "backend %s in use (PMGUARD_BACKEND or no key free)",
			 pmg_backend_name(in.backend));
	return why;
}

double bench_floor_pair(long pairs, int nrounds)
{
	struct pmg_domain *d = NULL;
	double ns = -1;
	int r0 = rounds;

	if (pmg_backend() != PMG_BACKEND_PKU ||
	    pmg_domain_new(&d, "bench-floor", 0))
		return -1;
	/* a domain made now holds a key unless every key is taken */
	if (d->_key >= 1 && d->_key <= 15) {
		rounds = nrounds < 1 ? 1 : nrounds > ROUNDS ? ROUNDS : nrounds;
		now = thread_cpu_now;
		ns = bench_floor(d, pairs);
		now = cli_now;
		rounds = r0;
	}
	pmg_domain_delete(&d);
	return ns;
}

/*
 * A page filled with 0x5a, protected by a new domain "bench" in *@d;
 * NULL after a message naming @verb.
 */
static char *bench_page(struct pmg_domain **d, const char *verb)
{
	char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int rc;

	if (page == MAP_FAILED) {
		cli_error("%s: mmap: %s", verb, strerror(errno));
		return NULL;
	}
	memset(page, 0x5a, 4096);
	rc = pmg_domain_new(d, "bench", 0);
	if (!rc)
		rc = pmg_protect(*d, page, 4096);
	if (rc) {
		cli_error("%s: %s", verb, pmg_errormsg());
		return NULL;
	}
	return page;
}

/* The mprotect paths from a child on the mprotect backend: the pair
 * and the pair with a write (*@wr). */
static double mprotect_child(double *wr, bool quick)
{
	int p[2], st;
	char buf[64] = "";
	pid_t pid;
	ssize_t n;

	if (pipe(p))
		return -1;
	fflush(NULL);
	pid = cli_fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		setenv("PMGUARD_BACKEND", "mprotect", 1);
		execl("/proc/self/exe", "pmguard", "bench", "window",
		      "--mprotect-only", quick ? "--quick" : (char *)NULL,
		      (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		return -1;
	}
	n = read(p[0], buf, sizeof(buf) - 1);
	close(p[0]);
	cli_wait(pid, &st, false);
	if (n <= 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		return -1;
	buf[n] = '\0';
	{
		char *end;
		double a = strtod(buf, &end);

		*wr = strtod(end, NULL);
		return a;
	}
}

static void window_usage(FILE *f)
{
	fprintf(f,
		"usage: pmguard bench window [--json] [--quick]\n"
		"  the cost of one window open+close pair on each path "
		"available, and on PKU\n"
		"  its ratio to the floor (two bare WRPKRU) measured in "
		"the same run;\n"
		"  --quick: a tenth of the pairs, %d rounds (checks that "
		"it works)\n",
		QUICK_ROUNDS);
}

/* One line of the text output: @ns < 0 is SKIP with @why. */
static void window_line(const char *path, double ns, double fl,
			const char *what, const char *why)
{
	if (ns < 0) {
		printf("  %-15s %10s     SKIP: %s\n", path, "-", why);
		return;
	}
	printf("  %-15s %10.2f ns  ", path, ns);
	if (fl > 0)
		printf("(%.2fx floor) ", ns / fl);
	printf("%s\n", what);
}

int cmd_bench_window(int argc, char **argv)
{
	bool json = false, mp_only = false, quick = false;
	const struct cli_opt opts[] = {
		{ .name = "--json", .kind = CLI_FLAG, .out = &json },
		{ .name = "--quick", .kind = CLI_FLAG, .out = &quick },
		/* internal: the child that measures mprotect on PKU */
		{ .name = "--mprotect-only", .kind = CLI_FLAG, .out = &mp_only },
		{ .name = NULL },
	};
	const struct cli_verb verb = { "bench window", opts, window_usage,
				       NULL, NULL };
	struct pmg_domain *d = NULL;
	double sw, hw = -1, mp = -1, mpw = -1, fl = -1, flr = -1;
	const char *nopku;
	long div;
	char *page;
	int rc;

	rc = cli_args(&verb, argc, argv);
	if (rc != CLI_GO_ON)
		return rc;
	if (quick)
		rounds = QUICK_ROUNDS;
	div = quick ? 10 : 1;
	page = bench_page(&d, "bench window");
	if (!page)
		return 1;
	if (mp_only) {
		printf("%.3f %.3f\n", bench_api(d, 20000 / div),
		       bench_api_write(d, page, 20000 / div));
		return 0;
	}
	nopku = bench_no_pku_why();
	sw = bench_software(d, 20000000 / div);
	if (!nopku && !(d->_key >= 1 && d->_key <= 15))
		nopku = "every protection key is held by other code: the "
			"domain is virtual";
	if (!nopku) {
		/* side by side: floor, floor with a read, the API pair */
		fl = bench_floor(d, 2000000 / div);
		flr = bench_floor_rd(d, 2000000 / div);
		hw = bench_api(d, 2000000 / div);
		mp = mprotect_child(&mpw, quick);
	} else {
		mp = bench_api(d, 20000 / div);
		mpw = bench_api_write(d, page, 20000 / div);
	}
	if (json) {
		struct json j;

		const char *path[] = { "floor-rdpkru", "software", "wrpkru",
				       "mprotect", "mprotect-write" };
		double ns[] = { flr, sw, hw, mp, mpw };
		unsigned i;

		json_begin(&j, stdout, false);
		json_str(&j, "backend", pmg_backend_name(pmg_backend()));
		json_int(&j, "rounds", rounds);
		json_bool(&j, "quick", quick);
		if (fl > 0) {
			json_num(&j, "floor_ns_per_pair", fl, 3);
			json_num(&j, "floor_rdpkru_ns_per_pair", flr, 3);
		} else {
			json_null(&j, "floor_ns_per_pair");
			json_null(&j, "floor_rdpkru_ns_per_pair");
			json_str(&j, "floor_note",
				 "two bare WRPKRU: no PKU "
				 "backend here, the floor does not apply");
			json_str(&j, "skip", nopku);
		}
		json_arr(&j, "results");
		for (i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
			if (ns[i] < 0)
				continue;
			json_obj(&j, NULL);
			json_str(&j, "path", path[i]);
			json_num(&j, "ns_per_pair", ns[i], 3);
			if (fl > 0)
				json_num(&j, "floor_ratio", ns[i] / fl, 3);
			json_end(&j);
		}
		json_finish(&j);
	} else {
		printf("backend: %s\n", pmg_backend_name(pmg_backend()));
		printf("window open+close pair, median of %d rounds%s:\n",
		       rounds, quick ? " (--quick)" : "");
		window_line("floor", fl, -1, "(two bare WRPKRU)", nopku);
		window_line("floor-rdpkru", flr, fl, "(RDPKRU + two WRPKRU)",
			    nopku);
		window_line("software", sw, -1,
			    "(register write replaced by a compiler barrier)",
			    "");
		window_line("wrpkru", hw, fl,
			    "(pmg_open + pmg_close, PKU backend)", nopku);
		if (mp >= 0)
			printf("  %-15s %10.2f ns  (%.0fx software)\n",
			       "mprotect", mp, mp / sw);
		if (mpw >= 0)
			printf("  %-15s %10.0f ns  (one byte written in the "
			       "window)\n",
			       "mprotect-write", mpw);
	}
	pmg_unprotect(page, 4096);
	pmg_domain_delete(&d);
	return 0;
}

/*
 * pmguard bench fault: the cost of one handled stray write (SIGSEGV,
 * decision, single step, SIGTRAP, re-arm) in audit and in contain mode
 * (contain also decodes the instruction and saves and restores the bytes),
 * side by side, on the backend in use; reports off.
 */
static __attribute__((noinline)) void stray8(volatile uint64_t *p,
					     uint64_t v)
{
	*p = v;
}

static double bench_strays(char *page, int mode, long n)
{
	double r[ROUNDS];
	int i;
	long j;

	pmg_set_fault_mode(mode);
	for (i = 0; i < ROUNDS; i++) {
		double t0 = cli_now();

		for (j = 0; j < n; j++)
			stray8((volatile uint64_t *)(page + (j & 511) * 8),
			       (uint64_t)j);
		r[i] = (cli_now() - t0) * 1e9 / (double)n;
	}
	return median(r, ROUNDS);
}

static void fault_usage(FILE *f)
{
	fprintf(f, "usage: pmguard bench fault [--json] [--writes N]\n"
		   "  the cost of one handled stray write in audit and in "
		   "contain mode,\n  median of %d rounds of N writes "
		   "(default 20000)\n", ROUNDS);
}

int cmd_bench_fault(int argc, char **argv)
{
	bool json = false;
	unsigned long long n = 20000;
	const struct cli_opt opts[] = {
		{ .name = "--json", .kind = CLI_FLAG, .out = &json },
		{ .name = "--writes", .kind = CLI_COUNT, .lo = 1,
		  .hi = 100000000, .out = &n },
		{ .name = NULL },
	};
	const struct cli_verb verb = { "bench fault", opts, fault_usage,
				       NULL, NULL };
	struct pmg_domain *d = NULL;
	struct pmg_stats st;
	double au, ct;
	uint64_t kept = 0;
	char *page;
	int rc, i;

	rc = cli_args(&verb, argc, argv);
	if (rc != CLI_GO_ON)
		return rc;
	page = bench_page(&d, "bench fault");
	if (!page)
		return 1;
	pmg_set_report_fd(-1);
	au = bench_strays(page, PMG_FAULT_AUDIT, (long)n);
	/* audit let the writes land: the reference bytes again */
	pmg_open(d, PMG_WRITE);
	memset(page, 0x5a, 4096);
	pmg_close(d, PMG_WRITE);
	pmg_stats_reset();
	ct = bench_strays(page, PMG_FAULT_CONTAIN, (long)n);
	pmg_set_fault_mode(PMG_FAULT_RELAXED);
	pmg_stats_get(&st, sizeof(st));
	for (i = 0; i < 4096; i++)
		kept += page[i] == 0x5a;
	if (json) {
		struct json j;

		json_begin(&j, stdout, false);
		json_str(&j, "backend", pmg_backend_name(pmg_backend()));
		json_u64(&j, "writes_per_round", n);
		json_int(&j, "rounds", ROUNDS);
		json_arr(&j, "results");
		json_obj(&j, NULL);
		json_str(&j, "mode", "audit");
		json_num(&j, "ns_per_stray_write", au, 1);
		json_end(&j);
		json_obj(&j, NULL);
		json_str(&j, "mode", "contain");
		json_num(&j, "ns_per_stray_write", ct, 1);
		json_u64(&j, "contained", st.contained);
		json_bool(&j, "bytes_intact", kept == 4096);
		json_end(&j);
		json_end(&j);
		json_finish(&j);
	} else {
		printf("backend: %s\n", pmg_backend_name(pmg_backend()));
		printf("one handled stray write (8-byte mov), median of %d "
		       "rounds of %llu:\n", ROUNDS, n);
		printf("  audit    %10.1f ns  (fault, single step, re-arm; the "
		       "write lands)\n", au);
		printf("  contain  %10.1f ns  (+ decode, save, restore; "
		       "%.2fx audit)\n", ct, ct / au);
		printf("  contained %llu, protected page %s\n",
		       (unsigned long long)st.contained,
		       kept == 4096 ? "intact" : "CHANGED");
	}
	pmg_unprotect(page, 4096);
	pmg_domain_delete(&d);
	return kept == 4096 ? 0 : 1;
}

static void bench_usage(FILE *f)
{
	fprintf(f, "usage: pmguard bench window [--json] [--quick]\n"
		   "       pmguard bench all [--json] [--quick] [--rounds N] "
		   "[--lmdb-prog PATH]\n"
		   "       pmguard bench fault [--json] [--writes N]\n"
		   "       pmguard bench persist [--json] [--rounds N] "
		   "[--dir DIR]\n"
		   "       pmguard bench domains [--json] [--domains N] "
		   "[--pairs N]\n"
		   "       pmguard bench count [--iters N] [--dir DIR]\n"
		   "  (pmguard bench NAME --help for each)\n");
}

int cmd_bench(int argc, char **argv)
{
	if (argc < 2) {
		bench_usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		bench_usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "window"))
		return cmd_bench_window(argc - 1, argv + 1);
	if (!strcmp(argv[1], "persist"))
		return cmd_bench_persist(argc - 1, argv + 1);
	if (!strcmp(argv[1], "fault"))
		return cmd_bench_fault(argc - 1, argv + 1);
	if (!strcmp(argv[1], "domains"))
		return cmd_bench_domains(argc - 1, argv + 1);
	if (!strcmp(argv[1], "all"))
		return cmd_bench_all(argc - 1, argv + 1);
	if (!strcmp(argv[1], "count"))
		return cmd_bench_count(argc - 1, argv + 1);
	return cli_error("bench: unknown benchmark '%s' (window, persist, "
			 "fault, domains, all, count)",
			 argv[1]);
}
