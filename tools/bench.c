// SPDX-License-Identifier: MIT
/*
 * pmguard bench window [--json]: the cost of one window open+close pair on
 * each path available, measured side by side in one run:
 *   software  the inline window code with the register write replaced by
 *             a compiler barrier (runs anywhere: the code's own cost)
 *   wrpkru    pmg_open/pmg_close on the PKU backend
 *   mprotect  pmg_open/pmg_close on the mprotect backend (a child process
 *             with PMGUARD_BACKEND=mprotect when this one runs on PKU)
 * Each path runs in rounds; the median round is reported.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmds.h"
#include "pmguard.h"

#define ROUNDS 7

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

static double bench_software(struct pmg_domain *d, long pairs)
{
	double r[ROUNDS];
	int i;
	long j;

	for (i = 0; i < ROUNDS; i++) {
		double t0 = cli_now();

		for (j = 0; j < pairs; j++) {
			_pmg_open_edge(d, PMG_WRITE, soft_rd, soft_wr);
			_pmg_close_edge(d, PMG_WRITE, soft_rd, soft_wr);
		}
		r[i] = (cli_now() - t0) * 1e9 / (double)pairs;
	}
	return median(r, ROUNDS);
}

static double bench_api(struct pmg_domain *d, long pairs)
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

/* The mprotect path from a child on the mprotect backend. */
static double mprotect_child(void)
{
	int p[2], st;
	char buf[64] = "";
	pid_t pid;
	ssize_t n;

	if (pipe(p))
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		setenv("PMGUARD_BACKEND", "mprotect", 1);
		execl("/proc/self/exe", "pmguard", "bench", "window",
		      "--mprotect-only", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	n = read(p[0], buf, sizeof(buf) - 1);
	close(p[0]);
	waitpid(pid, &st, 0);
	if (n <= 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		return -1;
	buf[n] = '\0';
	return atof(buf);
}

int cmd_bench_window(int argc, char **argv)
{
	bool json = cli_has_flag(argc, argv, "--json");
	bool mp_only = cli_has_flag(argc, argv, "--mprotect-only");
	struct pmg_domain *d = NULL;
	double sw, hw = -1, mp = -1;
	char *page;
	int i, rc;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help")) {
			printf("usage: pmguard bench window [--json]\n");
			return 0;
		}
		if (strcmp(argv[i], "--json") &&
		    strcmp(argv[i], "--mprotect-only"))
			return cli_error("bench window: unknown option '%s'",
					 argv[i]);
	}
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	rc = pmg_domain_new(&d, "bench", 0);
	if (!rc)
		rc = pmg_protect(d, page, 4096);
	if (rc) {
		cli_error("bench window: %s", pmg_errormsg());
		return 1;
	}
	if (mp_only) {
		printf("%.3f\n", bench_api(d, 20000));
		return 0;
	}
	sw = bench_software(d, 20000000);
	if (pmg_backend() == PMG_BACKEND_PKU) {
		hw = bench_api(d, 2000000);
		mp = mprotect_child();
	} else {
		mp = bench_api(d, 20000);
	}
	if (json) {
		printf("{\"backend\": \"%s\", \"results\": [", pmg_backend_name(
		       pmg_backend()));
		printf("{\"path\": \"software\", \"ns_per_pair\": %.3f}", sw);
		if (hw >= 0)
			printf(", {\"path\": \"wrpkru\", \"ns_per_pair\": %.3f}",
			       hw);
		if (mp >= 0)
			printf(", {\"path\": \"mprotect\", \"ns_per_pair\": "
			       "%.3f}", mp);
		printf("]}\n");
	} else {
		printf("backend: %s\n", pmg_backend_name(pmg_backend()));
		printf("window open+close pair, median of %d rounds:\n", ROUNDS);
		printf("  software  %10.2f ns  (register write replaced by a "
		       "compiler barrier)\n", sw);
		if (hw >= 0)
			printf("  wrpkru    %10.2f ns\n", hw);
		else
			printf("  wrpkru    %10s     (no PKU here)\n", "-");
		if (mp >= 0)
			printf("  mprotect  %10.2f ns  (%.0fx software)\n", mp,
			       mp / sw);
	}
	pmg_unprotect(page, 4096);
	pmg_domain_delete(&d);
	return 0;
}

int cmd_bench(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help")) {
		printf("usage: pmguard bench window [--json]\n"
		       "       pmguard bench persist [--json]\n");
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "window"))
		return cmd_bench_window(argc - 1, argv + 1);
	if (!strcmp(argv[1], "persist"))
		return cmd_bench_persist(argc - 1, argv + 1);
	return cli_error("bench: unknown benchmark '%s' (window, persist)",
			 argv[1]);
}
