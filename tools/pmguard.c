// SPDX-License-Identifier: MIT
/*
 * pmguard - stray-write protection for persistent memory: the CLI.
 * See pmguard(1) / docs/cli.md.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "cmds.h"
#include "pmguard.h"

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *help;
} verbs[] = {
	{ "info", cmd_info, "backend, CPU features, keys, fault mode" },
	{ "selftest", cmd_selftest, "the PKS patch set's numbered test list" },
	{ "demo", cmd_demo, "stray writes stopped: the main job" },
	{ "inject", cmd_inject, "a reproducible stray-write campaign" },
	{ "bench", cmd_bench, "window and persistence benchmarks" },
	{ "run", cmd_run, "protect an unmodified LMDB/libpmem program" },
	{ "learn", cmd_learn, "record a program's own stray-write sites" },
	{ "report", cmd_report, "symbolize a `pmguard run` report file" },
};

static int usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: pmguard <verb> [options]   (pmguard <verb> --help)\n\n");
	for (i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		fprintf(f, "  %-9s %s\n", verbs[i].name, verbs[i].help);
	fprintf(f, "\nenvironment: PMGUARD_BACKEND=auto|pku|mprotect, "
		   "PMGUARD_FAULT_MODE=strict|relaxed|audit|contain,\n"
		   "             PMGUARD_REPORT_FD=N\n");
	return f == stderr ? 2 : 0;
}

int main(int argc, char **argv)
{
	size_t i;

	if (argc < 2)
		return usage(stderr);
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		return usage(stdout);
	if (!strcmp(argv[1], "--version")) {
		printf("pmguard %s\n", pmg_version());
		return 0;
	}
	for (i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (!strcmp(argv[1], verbs[i].name))
			return verbs[i].fn(argc - 1, argv + 1);
	cli_error("unknown verb '%s'", argv[1]);
	return usage(stderr);
}
