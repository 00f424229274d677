/* SPDX-License-Identifier: MIT */
/*
 * CHECK(ok, cond): check-and-count without a TAP line, to collect a test's
 * sub-checks: when @cond is false, print "# FILE:LINE: check failed: COND"
 * and clear @ok.  Shared by the tests (tests/tap.h) and the CLI's
 * self-test (tools/probe.h, tools/lab/selftest.c).
 */
#ifndef PMG_CHECK_H
#define PMG_CHECK_H

#include <stdio.h>

#define CHECK(ok_, cond)						\
	do {								\
		if (!(cond)) {						\
			printf("# %s:%d: check failed: %s\n", __FILE__,	\
			       __LINE__, #cond);			\
			(ok_) = 0;					\
		}							\
	} while (0)

#endif /* PMG_CHECK_H */
