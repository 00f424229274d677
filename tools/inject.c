// SPDX-License-Identifier: MIT
#include <stdio.h>

#include "cmds.h"

/* Placeholder until the demo/inject work lands (issue 4). */
int cmd_inject(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "pmguard inject: not yet implemented\n");
	return 2;
}
