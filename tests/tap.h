/* SPDX-License-Identifier: MIT */
/*
 * Minimal kselftest-style TAP for pmguard's tests: one binary per feature,
 * `ok N name`, `not ok N name`, `ok N name # SKIP why`, `# ` diagnostics;
 * exit 0 when every test passed or skipped, 1 on any failure, 77 when the
 * whole binary skipped.  Fault tests use tap_child() to run a body in a
 * forked child and check how it ended.
 */
#ifndef PMG_TAP_H
#define PMG_TAP_H

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"	/* CHECK(ok, cond), shared with the CLI (tools/) */

static int tap_n, tap_failed, tap_plan;

static inline void tap_init(int plan)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	tap_plan = plan;
	printf("TAP version 13\n1..%d\n", plan);
}

static inline void tap_diag(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
static inline void tap_diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static inline int tap_ok(int cond, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static inline int tap_ok(int cond, const char *fmt, ...)
{
	va_list ap;

	printf("%s %d ", cond ? "ok" : "not ok", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (!cond)
		tap_failed++;
	return cond;
}

static inline void tap_skip(const char *name, const char *why)
{
	printf("ok %d %s # SKIP %s\n", ++tap_n, name, why);
}

/* Skip the whole binary (exit 77). */
static inline void tap_skip_all(const char *why)
{
	printf("TAP version 13\n1..0 # SKIP %s\n", why);
	exit(77);
}

static inline int tap_done(void)
{
	if (tap_plan && tap_n != tap_plan) {
		printf("# planned %d tests, ran %d\n", tap_plan, tap_n);
		return 1;
	}
	return tap_failed ? 1 : 0;
}

/*
 * Run @fn(@arg) in a forked child; returns the raw wait status.  The child
 * exits with fn's return value.
 */
static inline int tap_child(int (*fn)(void *), void *arg)
{
	pid_t pid;
	int st;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0)
		_exit(fn(arg));
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return st;
}

/*
 * Run @fn(@mode) in a child (tap_child()) and report it as "MODE: @what":
 * ok when it exits 0, else its exit status or signal as a diagnostic.
 * For tests that run one child per fault mode.
 */
static inline void tap_child_mode(int (*fn)(void *), int mode,
				  const char *mode_name, const char *what)
{
	int st = tap_child(fn, (void *)(intptr_t)mode);
	int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;

	if (!ok)
		tap_diag("child: %s %d", WIFEXITED(st) ? "exit" : "signal",
			 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	tap_ok(ok, "%s: %s", mode_name, what);
}

/* A page shared with forked children, to see what a dying child wrote. */
static inline void *tap_shared_page(void)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Seconds on the monotonic clock, for test durations and time limits. */
static inline double tap_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#endif /* PMG_TAP_H */
