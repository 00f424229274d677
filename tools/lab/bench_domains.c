// SPDX-License-Identifier: MIT
/*
 * pmguard bench domains [--json] [--domains N] [--pairs N]: many domains,
 * each on a mapping of its own (pmguard(7) "Virtual domains"),
 * for each count (100 and 1000 by default, or the one --domains gives):
 *   keyed    a window open+close pair on a domain that holds a key, with
 *            all the others live (PKU: the inline path; mprotect: every
 *            domain is page-protected, its window path)
 *   base     the same pair measured first, in the same run, with one
 *            domain live: the classic window (PKU: a hardware window)
 *   ratio    keyed / base (1.0: many domains cost the keyed window
 *            nothing)
 *   floor    PKU: two bare WRPKRU (bench window's floor)
 *   evicting a pair on each domain in turn, round robin, so that each
 *            open must take a key from another domain (PKU: eviction;
 *            the count of evictions is given); on mprotect there are no
 *            keys: the round-robin pair is given with a note
 *   strays   one stray write into each domain (contain mode, reports
 *            off): how many were caught (a fault naming that domain and
 *            that address), whether every byte is intact after
 * Medians of 7 rounds.  TCG (the PKU guest) times mean nothing: there
 * the figures show that it works.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "args.h"
#include "cmds.h"
#include "json.h"
#include "pmguard.h"

#define ROUNDS 7
#define PAGE 4096

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

/* ns per open+close pair on @d, the median of ROUNDS rounds of @pairs. */
static double pairs_on(struct pmg_domain *d, long pairs)
{
	double r[ROUNDS];
	int i;
	long j;

	for (i = 0; i < ROUNDS; i++) {
		double t0 = cli_now();

		for (j = 0; j < pairs; j++) {
			pmg_open(d, PMG_WRITE);
			pmg_close(d, PMG_WRITE);
		}
		r[i] = (cli_now() - t0) * 1e9 / (double)pairs;
	}
	return median(r, ROUNDS);
}

/* ns per pair, round robin over @n domains, @pairs pairs per round. */
static double pairs_round_robin(struct pmg_domain **d, int n, long pairs)
{
	double r[ROUNDS];
	int i;
	long j;

	for (i = 0; i < ROUNDS; i++) {
		double t0 = cli_now();

		for (j = 0; j < pairs; j++) {
			pmg_open(d[j % n], PMG_WRITE);
			pmg_close(d[j % n], PMG_WRITE);
		}
		r[i] = (cli_now() - t0) * 1e9 / (double)pairs;
	}
	return median(r, ROUNDS);
}

static double floor_pairs(struct pmg_domain *d, long pairs)
{
	uint32_t closed = _pmg_rdpkru(), open = closed & ~d->_mask;
	double r[ROUNDS];
	int i;
	long j;

	for (i = 0; i < ROUNDS; i++) {
		double t0 = cli_now();

		for (j = 0; j < pairs; j++) {
			_pmg_wrpkru(open);
			_pmg_wrpkru(closed);
		}
		r[i] = (cli_now() - t0) * 1e9 / (double)pairs;
	}
	return median(r, ROUNDS);
}

/* Stray writes: each caught must name its domain and address. */
static struct {
	const struct pmg_domain *volatile want_d;
	void *volatile want_addr;
	volatile int right, wrong; /* the handler's */
} catch_;

static void observer(const struct pmg_fault_info *fi, void *arg)
{
	(void)arg;
	if (fi->domain == catch_.want_d && fi->addr == catch_.want_addr)
		catch_.right = catch_.right + 1;
	else
		catch_.wrong = catch_.wrong + 1;
}

static __attribute__((noinline)) void stray(volatile char *p)
{
	*p = 0x5a;
}

struct figures {
	int n, keyed, keys_held;
	double base, keyed_ns, floor, evicting;
	uint64_t evictions, paged;
	int caught, wrong;
	double stray_ns;
	bool intact;
};

static int run_one(int n, long pairs, struct figures *fg)
{
	struct pmg_domain **d = calloc((size_t)n, sizeof(*d)), *base = NULL;
	char **pg = calloc((size_t)n, sizeof(*pg)), *bpg, name[32];
	bool pku = pmg_backend() == PMG_BACKEND_PKU;
	struct pmg_key_stats a, b;
	int i, hot = 0, rc = 0;
	double t0;

	memset(fg, 0, sizeof(*fg));
	fg->n = n;
	if (!d || !pg)
		return cli_error("bench domains: out of memory");
	/* the base: one domain, the classic window */
	bpg = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (bpg == MAP_FAILED || pmg_domain_new(&base, "bench-base", 0) ||
	    pmg_protect(base, bpg, PAGE))
		return cli_error("bench domains: %s", pmg_errormsg());
	fg->base = pairs_on(base, pairs);
	if (pku)
		fg->floor = floor_pairs(base, pairs);
	pmg_unprotect(bpg, PAGE);
	pmg_domain_delete(&base);
	munmap(bpg, PAGE);
	/* @n domains, a mapping each */
	for (i = 0; i < n; i++) {
		pg[i] = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		snprintf(name, sizeof(name), "bench-%04d", i);
		if (pg[i] == MAP_FAILED) {
			rc = cli_error("bench domains: mmap: %s",
				       strerror(errno));
			goto out;
		}
		memset(pg[i], 'a' + i % 26, PAGE);
		if (pmg_domain_new(&d[i], name, 0) ||
		    pmg_protect(d[i], pg[i], PAGE)) {
			rc = cli_error("bench domains: %s: %s", name,
				       pmg_errormsg());
			goto out;
		}
	}
	for (i = 0; i < n; i++)
		fg->keyed += pmg_domain_key(d[i]) > 0 && pku;
	pmg_key_stats_get(&a, sizeof(a));
	fg->keys_held = a.keys_held;
	/* a domain that holds a key (the first) windowed over and over:
	 * no eviction touches it */
	fg->keyed_ns = pairs_on(d[hot], pairs);
	/* round robin: each open takes a key from another domain (PKU) */
	pmg_key_stats_get(&a, sizeof(a));
	fg->evicting = pairs_round_robin(d, n, n > 200 ? n : 4L * n);
	pmg_key_stats_get(&b, sizeof(b));
	fg->evictions = b.evictions - a.evictions;
	fg->paged = b.paged_windows - a.paged_windows;
	/* a stray write into each: caught, undone */
	pmg_set_report_fd(-1);
	pmg_set_fault_observer(observer, NULL);
	pmg_set_fault_mode(PMG_FAULT_CONTAIN);
	t0 = cli_now();
	for (i = 0; i < n; i++) {
		int before = catch_.right;

		catch_.want_d = d[i];
		catch_.want_addr = pg[i] + 100;
		stray(pg[i] + 100);
		fg->caught += catch_.right == before + 1;
	}
	fg->stray_ns = (cli_now() - t0) * 1e9 / n;
	fg->wrong = catch_.wrong;
	pmg_set_fault_mode(PMG_FAULT_RELAXED);
	pmg_set_fault_observer(NULL, NULL);
	pmg_set_report_fd(2);
	fg->intact = true;
	for (i = 0; i < n && fg->intact; i++)
		for (int j = 0; j < PAGE; j++)
			if (pg[i][j] != (char)('a' + i % 26)) {
				fg->intact = false;
				break;
			}
out:
	for (i = 0; i < n; i++) {
		if (d[i]) {
			pmg_unprotect(pg[i], PAGE);
			pmg_domain_delete(&d[i]);
		}
		if (pg[i] && pg[i] != MAP_FAILED)
			munmap(pg[i], PAGE);
	}
	free(d);
	free(pg);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: pmguard bench domains [--json] [--domains N] "
		"[--pairs N]\n"
		"  many domains, each on its own mapping (100 and 1000 by "
		"default): a window on\n  a domain that holds a key vs the "
		"classic window, a window that must take\n  a key from "
		"another domain, a stray write into each caught; medians of "
		"%d rounds\n  of N pairs (default 200000 on PKU, 20000 on "
		"mprotect)\n",
		ROUNDS);
}

int cmd_bench_domains(int argc, char **argv)
{
	bool json = false, seen_n = false, seen_p = false;
	unsigned long long nd = 0, pairs = 0;
	const struct cli_opt opts[] = {
		{ .name = "--json", .kind = CLI_FLAG, .out = &json },
		{ .name = "--domains",
		  .kind = CLI_COUNT,
		  .lo = 2,
		  .hi = PMG_DOMAINS_MAX - 2,
		  .out = &nd,
		  .seen = &seen_n },
		{ .name = "--pairs",
		  .kind = CLI_COUNT,
		  .lo = 1,
		  .hi = 100000000,
		  .out = &pairs,
		  .seen = &seen_p },
		{ .name = NULL },
	};
	const struct cli_verb verb = { "bench domains", opts, usage, NULL,
				       NULL };
	int counts[2] = { 100, 1000 }, nc = 2, i, rc;
	bool pku, all_ok = true;
	struct figures fg[2];

	rc = cli_args(&verb, argc, argv);
	if (rc != CLI_GO_ON)
		return rc;
	if (pmg_init())
		return cli_error("bench domains: %s", pmg_errormsg());
	pku = pmg_backend() == PMG_BACKEND_PKU;
	if (!seen_p)
		pairs = pku ? 200000 : 20000;
	if (seen_n) {
		counts[0] = (int)nd;
		nc = 1;
	}
	for (i = 0; i < nc; i++) {
		rc = run_one(counts[i], (long)pairs, &fg[i]);
		if (rc)
			return rc;
		all_ok &= fg[i].caught == fg[i].n && !fg[i].wrong &&
			  fg[i].intact;
	}
	if (json) {
		struct json j;

		json_begin(&j, stdout, false);
		json_str(&j, "backend", pmg_backend_name(pmg_backend()));
		json_int(&j, "rounds", ROUNDS);
		json_u64(&j, "pairs_per_round", pairs);
		if (!pku)
			json_str(&j, "note",
				 "mprotect: no hardware keys, every "
				 "domain is page-protected; no eviction, no "
				 "floor");
		json_arr(&j, "results");
		for (i = 0; i < nc; i++) {
			json_obj(&j, NULL);
			json_int(&j, "domains", fg[i].n);
			json_int(&j, "keyed_at_start", fg[i].keyed);
			json_int(&j, "keys_held", fg[i].keys_held);
			json_num(&j, "base_ns_per_pair", fg[i].base, 3);
			json_num(&j, "keyed_ns_per_pair", fg[i].keyed_ns, 3);
			json_num(&j, "keyed_base_ratio",
				 fg[i].keyed_ns / fg[i].base, 3);
			if (pku) {
				json_num(&j, "floor_ns_per_pair", fg[i].floor,
					 3);
				json_num(&j, "keyed_floor_ratio",
					 fg[i].keyed_ns / fg[i].floor, 3);
			} else {
				json_null(&j, "floor_ns_per_pair");
			}
			json_num(&j, "round_robin_ns_per_pair", fg[i].evicting,
				 1);
			json_u64(&j, "round_robin_evictions", fg[i].evictions);
			json_u64(&j, "round_robin_paged_windows", fg[i].paged);
			json_int(&j, "strays", fg[i].n);
			json_int(&j, "strays_caught", fg[i].caught);
			json_int(&j, "strays_misattributed", fg[i].wrong);
			json_num(&j, "ns_per_stray", fg[i].stray_ns, 1);
			json_bool(&j, "bytes_intact", fg[i].intact);
			json_end(&j);
		}
		json_finish(&j);
	} else {
		printf("backend: %s%s\n", pmg_backend_name(pmg_backend()),
		       pku ? ""
			   : " (no hardware keys: every domain "
			     "page-protected, no eviction)");
		for (i = 0; i < nc; i++) {
			printf("%d domains, a mapping each (%d held a key at "
			       "start, %d keys held), median of %d rounds:\n",
			       fg[i].n, fg[i].keyed, fg[i].keys_held, ROUNDS);
			printf("  base      %10.2f ns  (one domain live)\n",
			       fg[i].base);
			printf("  %-9s %10.2f ns  (%.2fx base%s)\n",
			       pku ? "keyed" : "one of N", fg[i].keyed_ns,
			       fg[i].keyed_ns / fg[i].base,
			       pku ? "; a domain holding a key" : "");
			if (pku)
				printf("  floor     %10.2f ns  (two bare WRPKRU; "
				       "keyed %.2fx)\n",
				       fg[i].floor,
				       fg[i].keyed_ns / fg[i].floor);
			printf("  round robin %8.1f ns  (%llu evictions, %llu "
			       "page-protection windows)\n",
			       fg[i].evicting,
			       (unsigned long long)fg[i].evictions,
			       (unsigned long long)fg[i].paged);
			printf("  strays    %d of %d caught (%d misattributed), "
			       "%.0f ns each, bytes %s\n",
			       fg[i].caught, fg[i].n, fg[i].wrong,
			       fg[i].stray_ns,
			       fg[i].intact ? "intact" : "CHANGED");
		}
	}
	return all_ok ? 0 : 1;
}
