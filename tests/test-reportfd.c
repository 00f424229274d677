// SPDX-License-Identifier: MIT
/*
 * The report fd is verified before each report (src/report.c): pmguard
 * writes only to the open file it was given, never to a file the program
 * opened later under the same number.  Each case runs in a
 * child: the report fd (or stderr) is closed and a "data" file opened at
 * its number, then an audit-mode stray write is made; the data file must
 * stay empty, the write itself is let through (audit), and pmguard must
 * not report anything anywhere else either.  Both backends.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pmguard.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "tap.h"
#include "capture.h"

#define PAGE 4096

/* One store instruction. */
static __attribute__((noinline)) void stray_store(volatile char *p, char v)
{
	*p = v;
}

struct arg {
	char *page;
	int data; /* the data file, to be put at the report fd's number */
	int report; /* the report file given to pmg_set_report_fd() */
	bool stderr_case; /* the default fd 2 instead */
};

static int child(void *argp)
{
	struct arg *a = argp;
	struct pmg_domain *d;
	int num;

	if (a->stderr_case) {
		/* stderr is a file of ours when the library starts */
		if (dup2(a->report, 2) < 0)
			return 10;
	}
	if (pmg_init() || pmg_domain_new(&d, "reportfd", 0) ||
	    pmg_protect(d, a->page, PAGE))
		return 3;
	pmg_set_fault_mode(PMG_FAULT_AUDIT);
	if (!a->stderr_case) {
		num = fcntl(a->report, F_DUPFD, 100);
		if (num < 0)
			return 11;
		pmg_set_report_fd(num);
	} else {
		num = 2;
	}
	stray_store(a->page + 1, 0x11); /* reported to the report file */
	/* the program closes that fd and opens its own file there */
	if (dup2(a->data, num) != num)
		return 12;
	stray_store(a->page + 2, 0x22); /* must not go into the data file */
	return a->page[1] == 0x11 && a->page[2] == 0x22 ? 0 : 13;
}

static void one(bool stderr_case, const char *what)
{
	struct arg a;
	char buf[8192], rep[8192];
	int st, ok = 1;

	a.page = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	a.data = tmpfd();
	a.report = tmpfd();
	a.stderr_case = stderr_case;
	if (a.page == MAP_FAILED || a.data < 0 || a.report < 0) {
		tap_ok(0, "%s: setup", what);
		return;
	}
	st = tap_child(child, &a);
	slurp(a.data, buf, sizeof(buf));
	slurp(a.report, rep, sizeof(rep));
	if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
		tap_diag("child status %#x", st);
		ok = 0;
	}
	if (buf[0]) {
		tap_diag("the data file got: %.300s", buf);
		ok = 0;
	}
	/* the first report went to the report file, the second nowhere */
	if (count_matches(rep, "audit: stray write") != 1) {
		tap_diag("report file: %.600s", rep);
		ok = 0;
	}
	tap_ok(ok,
	       "%s: the data file now at its number stays empty, the "
	       "first report reached the report file",
	       what);
	munmap(a.page, PAGE);
	close(a.data);
	close(a.report);
}

int main(void)
{
	tap_init(2);
	one(false, "pmg_set_report_fd(N), N closed and reused by the program");
	one(true, "stderr (fd 2), closed and reused by the program");
	return tap_done();
}
