// SPDX-License-Identifier: MIT
/*
 * The program's own handlers, installed before pmg_init(), get the signals
 * that are not pmguard's as the kernel would have delivered them. A handler
 * installed with SA_RESETHAND is one-shot: the kernel resets the action to
 * the default as it runs it, so a crash reporter that prints and returns
 * dies on the fault's second time.  pmguard, chaining, called it again for
 * ever: the program hung in a loop of "crash" reports instead of dying.
 * Each case runs in a forked child that installs its handler, then calls
 * pmg_init().  Both backends (the same code).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>

#include "tap.h"
#include "pmguard.h"
#include "valgrind-probe.h"

#define PAGE 4096
#define LOOPING 42

static volatile int *calls; /* shared with the parent */
static int *volatile wild = (int *)(uintptr_t)8; /* nothing mapped */

static void one_shot(int sig)
{
	(void)sig;
	if (++calls[0] > 3)
		_exit(LOOPING); /* called again and again */
}

static int install(int sig)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = one_shot;
	sa.sa_flags = SA_RESETHAND;
	if (sigaction(sig, &sa, NULL) || pmg_init())
		return 2;
	pmg_set_report_fd(-1);
	return 0;
}

static int segv_child(void *arg)
{
	(void)arg;
	if (install(SIGSEGV))
		return 2;
	*(volatile int *)wild = 1; /* the program's own crash */
	return 3; /* survived */
}

static int bus_child(void *arg)
{
	char path[] = "/tmp/pmg-test-chain-XXXXXX";
	char *m;
	int fd;

	(void)arg;
	if (install(SIGBUS))
		return 2;
	fd = mkstemp(path);
	if (fd < 0)
		return 4;
	unlink(path);
	if (ftruncate(fd, PAGE))
		return 5;
	m = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return 6;
	m[PAGE] = 1; /* beyond the end of the file: SIGBUS */
	return 3;
}

static int trap_child(void *arg)
{
	(void)arg;
	if (install(SIGTRAP))
		return 2;
	__asm__ volatile("int3");
	__asm__ volatile("int3"); /* the default now: killed */
	return 3;
}

static void run(int (*fn)(void *), int sig, const char *what)
{
	int st;

	calls[0] = 0;
	st = tap_child(fn, NULL);
	if (!WIFSIGNALED(st) || WTERMSIG(st) != sig || calls[0] != 1)
		tap_diag("child: %s %d, handler called %d time(s)",
			 WIFEXITED(st) ? "exit" : "signal",
			 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
			 calls[0]);
	tap_ok(WIFSIGNALED(st) && WTERMSIG(st) == sig && calls[0] == 1, "%s",
	       what);
}

int main(void)
{
	if (pmg_under_valgrind())
		tap_skip_all(PMG_VALGRIND_WHY);
	tap_init(3);
	calls = tap_shared_page();
	if (!calls) {
		printf("Bail out! no shared page\n");
		return 1;
	}
	run(segv_child, SIGSEGV,
	    "an SA_RESETHAND SIGSEGV handler that returns: called once, "
	    "then the program dies of the fault");
	run(bus_child, SIGBUS,
	    "an SA_RESETHAND SIGBUS handler that returns: called once, "
	    "then the program dies of the fault");
	run(trap_child, SIGTRAP,
	    "an SA_RESETHAND SIGTRAP handler: called for the first int3 "
	    "only, the second kills");
	return tap_done();
}
