// SPDX-License-Identifier: MIT
#include <stdio.h>

#include "cmds.h"

/* Placeholder until the pool work lands (issue 3). */
int cmd_bench_persist(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "pmguard bench persist: not yet implemented\n");
	return 2;
}
