/* SPDX-License-Identifier: MIT */
/*
 * tap.h - TAP output of the static guest programs of linux/tests (one
 * program per .c; each includes this once).  result() prints one numbered
 * result line and returns OK; tap_done() prints the plan and the summary
 * line that linux/tests/dax.sh's dax_run shows ("NAME: N passed, N
 * failed") and returns the exit status.
 */
#ifndef PMG_LINUX_TESTS_TAP_H
#define PMG_LINUX_TESTS_TAP_H

#include <stdarg.h>
#include <stdio.h>

static int ntest, nfail;

__attribute__((format(printf, 2, 3)))
static int result(int ok, const char *fmt, ...)
{
	va_list ap;

	ntest++;
	if (!ok)
		nfail++;
	printf("%sok %d - ", ok ? "" : "not ", ntest);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	return ok;
}

static int tap_done(const char *name)
{
	printf("1..%d\n", ntest);
	printf("%s: %d passed, %d failed\n", name, ntest - nfail, nfail);
	return nfail ? 1 : 0;
}

#endif
