// SPDX-License-Identifier: MIT
/*
 * Threads older than a domain's key.  On PKU,
 * pkey_alloc() sets the rights of the calling thread only and a thread
 * inherits its creator's register: a thread created before the key was
 * allocated has it access-disabled, and its first read of a
 * write-disabled domain needs the fault handler to sync its rights.  A
 * thread that blocks every signal cannot take that fault: the kernel
 * kills the process (an LMDB reader thread started before
 * mdb_env_open(), under `pmguard run`).  Keys reserved early
 * (_pmg_keys_reserve(), what `pmguard run`'s constructor does before the
 * program starts threads) are write-disabled in every later thread: such
 * a thread reads without a fault.  The protection stays: writes still
 * fault, and a no-access domain never gets a reserved key.
 * Each case runs in a forked child.  Both backends (the cases that need
 * per-thread rights say SKIP on mprotect).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>

#include "tap.h"
#include "probe.h"
#include "valgrind-probe.h"

#define PAGE 4096

int _pmg_keys_reserve(unsigned n); /* internal (src/keys.c) */

static bool pku;
static char *page;
static int go[2], done[2], up[2];

/* An old thread: all signals blocked, waits, then reads the page. */
static void *blocked_reader(void *arg)
{
	sigset_t all;
	char c;
	int sum = 0, i;

	(void)arg;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	/* running (past the pthread_create wrapper's reset to the
	 * defaults of the keys claimed so far) before the domain exists */
	if (write(up[1], "u", 1) != 1 || read(go[0], &c, 1) != 1)
		return (void *)1;
	for (i = 0; i < PAGE; i += 64)
		sum += ((volatile char *)page)[i];
	return (void *)(intptr_t)(sum == PAGE / 64 * 7 ? 0 : 2);
}

/* Reserve (or not), start the old thread, then create the domain and
 * protect the page, then let the thread read.  0: it read the right
 * bytes without a sync. */
static int reader_child(void *arg)
{
	bool reserve = arg != NULL;
	struct pmg_domain *d;
	struct pmg_stats s0, s1;
	pthread_t t;
	void *ret;
	char c;

	if (reserve && pku && _pmg_keys_reserve(3) != 3)
		return 3;
	page = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		return 4;
	memset(page, 7, PAGE);
	if (pipe(go) || pipe(up) ||
	    pthread_create(&t, NULL, blocked_reader, NULL) ||
	    read(up[0], &c, 1) != 1)
		return 5;
	/* what mdb_env_open() does under pmguard run, after the thread */
	if (pmg_domain_new(&d, "lmdb", 0) || pmg_protect(d, page, PAGE))
		return 6;
	pmg_stats_get(&s0, sizeof(s0));
	if (write(go[1], "g", 1) != 1 || pthread_join(t, &ret))
		return 7;
	pmg_stats_get(&s1, sizeof(s1));
	if (ret)
		return 8;
	if (s1.synced != s0.synced)
		return 9; /* needed a fault: not what the test means */
	return 0;
}

/* After a reservation: writes to the reserved-key domain still fault,
 * in this thread and in an older one; a no-access domain gets a fresh
 * key, which older threads cannot read. */
static volatile int older_rc = -1;

static void *older_thread(void *arg)
{
	struct pmg_domain **dd = arg;
	char c;
	int s0;

	if (write(up[1], "u", 1) != 1 || read(go[0], &c, 1) != 1)
		return NULL;
	s0 = probe_log.strays;
	older_rc = probe(dd[0], page + 64, PMG_WRITE) == 1 ? 0 : 1;
	if (!older_rc && probe(dd[1], page + PAGE + 8, PMG_READ) != 1)
		older_rc = 2;
	if (!older_rc && probe_log.strays != s0 + 2)
		older_rc = 3;
	if (write(done[1], "d", 1) != 1)
		older_rc = 4;
	return NULL;
}

static int protect_child(void *arg)
{
	struct pmg_domain *dd[2];
	pthread_t t;
	int k0, i;

	(void)arg;
	if (pku && _pmg_keys_reserve(3) != 3)
		return 3;
	page = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED || pipe(go) || pipe(done) || pipe(up) ||
	    pthread_create(&t, NULL, older_thread, dd) ||
	    read(up[0], &i, 1) != 1)
		return 4;
	probe_begin();
	if (pmg_domain_new(&dd[0], "wd", 0) ||
	    pmg_domain_new(&dd[1], "na", PMG_DOMAIN_NOACCESS) ||
	    pmg_protect(dd[0], page, PAGE) ||
	    pmg_protect(dd[1], page + PAGE, PAGE))
		return 5;
	k0 = pmg_domain_key(dd[0]);
	/* the reserved keys, all write-disabled here; the no-access
	 * domain's must not be one of them */
	if (pku) {
		uint32_t v = _pmg_rdpkru();

		if (((v >> (2 * k0)) & 3) != 2 /* write-disabled */)
			return 6;
	}
	if (probe(dd[0], page + 32, PMG_WRITE) != 1)
		return 7;
	if (write(go[1], "g", 1) != 1 || read(done[0], &i, 1) != 1)
		return 8;
	pthread_join(t, NULL);
	probe_end();
	return older_rc ? 10 + older_rc : 0;
}

int main(void)
{
	int st;

	if (pmg_under_valgrind())
		tap_skip_all(PMG_VALGRIND_WHY);
	tap_init(3);
	if (pmg_init()) {
		tap_diag("pmg_init: %s", pmg_errormsg());
		return 1;
	}
	pku = pmg_backend() == PMG_BACKEND_PKU;
	tap_diag("backend: %s", pmg_backend_name(pmg_backend()));

	if (pku) {
		st = tap_child(reader_child, NULL);
		if (!WIFSIGNALED(st))
			tap_diag("child: exit %d", WEXITSTATUS(st));
		tap_ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV,
		       "no reservation: a thread older than the key that "
		       "blocks every signal dies on its first read (the "
		       "documented limit)");
	} else {
		tap_skip("no reservation: an older thread blocking every "
			 "signal dies on its first read",
			 "mprotect: rights are process-wide, nothing to sync");
	}
	st = tap_child(reader_child, (void *)1);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		tap_diag("child: %s %d", WIFEXITED(st) ? "exit" : "signal",
			 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "keys reserved before the thread started: it reads the "
	       "write-disabled domain with every signal blocked, no sync "
	       "fault");
	st = tap_child(protect_child, NULL);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		tap_diag("child: %s %d", WIFEXITED(st) ? "exit" : "signal",
			 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "after a reservation: stray writes to a reserved-key domain "
	       "fault in this and an older thread, and a no-access domain "
	       "(fresh key) faults on an older thread's read");
	return tap_done();
}
