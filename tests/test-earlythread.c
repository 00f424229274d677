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
 * a thread reads without a fault.  After a reservation a write-disabled
 * domain takes only a reserved key, never a fresh one or a no-access
 * domain's: past the reserved keys it is virtual (page protection, key
 * 0, which every thread reads), however many there are and whatever
 * windows move keys between them.  The protection stays: writes still
 * fault (a thread that blocks every signal dies of it, the data intact),
 * and a no-access domain never gets a reserved key.
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

int _pmg_keys_reserve(unsigned n, unsigned leave); /* internal (keys.c) */

/* what `pmguard run`'s constructor reserves (src/run/start.c) */
#define RUN_KEYS 15
#define RUN_KEYS_LEFT 2

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

	if (reserve && pku && _pmg_keys_reserve(3, 0) != 3)
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
	if (pku && _pmg_keys_reserve(3, 0) != 3)
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

/*
 * Many write-disabled domains, more than the keys, created after an old
 * thread started: NDOM pages, then the no-access domain's, then an
 * unprotected one the child and the parent share (MAP_SHARED, mapped
 * before the fork: the parent checks the data after the child died).
 */
#define NDOM 16
#define NA_PAGE NDOM
#define INFO_PAGE (NDOM + 1)
#define FILL(i) ((char)(0x40 + (i)))

static char *many;

struct many_case {
	unsigned reserve, leave;
	int stray; /* 0: none; the old thread writes into a domain that is
		    * 1: keyed, 2: virtual at the end */
};

/* what the child tells the parent: where the stray write went */
struct info {
	volatile long stray_off;
	volatile int stray_dom;
};

static volatile char *stray_at;

/* The old thread: all signals blocked, reads every domain's page (after
 * the windows that moved keys between them), then, if told to, writes a
 * byte into one: a fault it cannot take, so the process dies there. */
static void *many_reader(void *arg)
{
	sigset_t all;
	char c;
	int i, j, bad = 0;

	(void)arg;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	if (write(up[1], "u", 1) != 1 || read(go[0], &c, 1) != 1)
		return (void *)1;
	for (i = 0; i < NDOM; i++)
		for (j = 0; j < PAGE; j += 64)
			if (((volatile char *)many)[i * PAGE + j] != FILL(i))
				bad = 2;
	if (!bad && stray_at)
		*stray_at = 'X';
	return (void *)(intptr_t)bad;
}

/*
 * Reserve, start the old thread, then a no-access domain (a key no older
 * thread may read, and no write-disabled domain may take after it) and
 * NDOM write-disabled domains, a write window on each in turn (a virtual
 * one takes a key from another: eviction), then let the thread read.
 * 0: it read every domain without a sync fault.
 */
static int many_child(void *arg)
{
	const struct many_case *m = arg;
	struct info *inf = (struct info *)(many + INFO_PAGE * PAGE);
	struct pmg_domain *d[NDOM], *na;
	struct pmg_stats s0, s1;
	char name[16], c;
	int i, nres = 0, keyed = 0;
	pthread_t t;
	void *ret;

	if (pku) {
		nres = _pmg_keys_reserve(m->reserve, m->leave);
		if (nres < 1 || nres > (int)m->reserve)
			return 3;
	}
	if (pipe(go) || pipe(up) ||
	    pthread_create(&t, NULL, many_reader, NULL) ||
	    read(up[0], &c, 1) != 1)
		return 4;
	if (pmg_domain_new(&na, "na", PMG_DOMAIN_NOACCESS) ||
	    pmg_protect(na, many + NA_PAGE * PAGE, PAGE))
		return 5;
	for (i = 0; i < NDOM; i++) {
		snprintf(name, sizeof(name), "wd%02d", i);
		if (pmg_domain_new(&d[i], name, 0) ||
		    pmg_protect(d[i], many + i * PAGE, PAGE))
			return 6;
	}
	for (i = 0; i < NDOM; i++) {
		if (pmg_open(d[i], PMG_WRITE))
			return 7;
		memset(many + i * PAGE, FILL(i), PAGE);
		if (pmg_close(d[i], PMG_WRITE))
			return 8;
	}
	for (i = 0; m->stray && i < NDOM; i++)
		if ((pmg_domain_key(d[i]) > 0) == (m->stray == 1)) {
			inf->stray_dom = i;
			inf->stray_off = (long)i * PAGE + 8;
			stray_at = many + inf->stray_off;
			break;
		}
	if (m->stray && !stray_at)
		return 11;
	pmg_stats_get(&s0, sizeof(s0));
	if (write(go[1], "g", 1) != 1 || pthread_join(t, &ret))
		return 12;
	pmg_stats_get(&s1, sizeof(s1));
	if (ret)
		return 13;
	if (m->stray)
		return 14; /* the stray write went through */
	if (s1.synced != s0.synced)
		return 15; /* needed a fault: not what the test means */
	/* PKU: only reserved keys under write-disabled domains, each
	 * write-disabled in this thread too */
	for (i = 0; pku && i < NDOM; i++) {
		int k = pmg_domain_key(d[i]);

		if (k > 0) {
			keyed++;
			if (((_pmg_rdpkru() >> (2 * k)) & 3) != 2 ||
			    k == pmg_domain_key(na))
				return 9;
		}
	}
	if (keyed > nres)
		return 10;
	return 0;
}

/* A reservation as `pmguard run`'s, NDOM write-disabled domains and a
 * no-access one after an older thread (signals not blocked): its stray
 * write to every write-disabled domain faults, and so does its read of
 * the no-access one. */
static volatile int many_rc = -1;

static void *many_prober(void *arg)
{
	struct pmg_domain **dd = arg;
	char c;
	int i, s0;

	if (write(up[1], "u", 1) != 1 || read(go[0], &c, 1) != 1)
		return NULL;
	s0 = probe_log.strays;
	many_rc = 0;
	for (i = 0; i < NDOM && !many_rc; i++)
		if (probe(dd[i], many + i * PAGE + 16, PMG_WRITE) != 1)
			many_rc = 1;
	if (!many_rc &&
	    probe(dd[NDOM], many + NA_PAGE * PAGE + 8, PMG_READ) != 1)
		many_rc = 2;
	if (!many_rc && probe_log.strays != s0 + NDOM + 1)
		many_rc = 3;
	return NULL;
}

static int many_protect_child(void *arg)
{
	struct pmg_domain *dd[NDOM + 1];
	char name[16], c;
	pthread_t t;
	int i;

	(void)arg;
	if (pku && _pmg_keys_reserve(RUN_KEYS, RUN_KEYS_LEFT) < 1)
		return 3;
	if (pipe(go) || pipe(up) || pthread_create(&t, NULL, many_prober, dd) ||
	    read(up[0], &c, 1) != 1)
		return 4;
	probe_begin();
	for (i = 0; i < NDOM; i++) {
		snprintf(name, sizeof(name), "wd%02d", i);
		if (pmg_domain_new(&dd[i], name, 0) ||
		    pmg_protect(dd[i], many + i * PAGE, PAGE))
			return 5;
	}
	if (pmg_domain_new(&dd[NDOM], "na", PMG_DOMAIN_NOACCESS) ||
	    pmg_protect(dd[NDOM], many + NA_PAGE * PAGE, PAGE))
		return 6;
	for (i = 0; i < NDOM; i++)
		if (pmg_open(dd[i], PMG_WRITE) || pmg_close(dd[i], PMG_WRITE))
			return 7;
	if (write(go[1], "g", 1) != 1 || pthread_join(t, NULL))
		return 8;
	probe_end();
	return many_rc ? 10 + many_rc : 0;
}

static void many_reset(void)
{
	int i;

	for (i = 0; i < NDOM; i++)
		memset(many + i * PAGE, FILL(i), PAGE);
	memset(many + NA_PAGE * PAGE, 0, 2 * PAGE);
}

static void many_report(int st, const char *what)
{
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		tap_diag("child: %s %d", WIFEXITED(st) ? "exit" : "signal",
			 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", what);
}

/* A stray write from the old thread that blocks every signal: the
 * process dies of SIGSEGV, the byte never lands. */
static void many_stray(int kind)
{
	static const struct many_case run_keyed = { RUN_KEYS, RUN_KEYS_LEFT,
						    1 };
	static const struct many_case run_virt = { RUN_KEYS, RUN_KEYS_LEFT, 2 };
	struct info *inf = (struct info *)(many + INFO_PAGE * PAGE);
	const char *what = kind == 1 ? "keyed" : "virtual";
	int st;

	if (kind == 2 && !pku) {
		tap_skip("a stray write from the old thread into a virtual "
			 "domain kills the process",
			 "mprotect: every domain is page protection (the "
			 "keyed case covers it)");
		return;
	}
	many_reset();
	inf->stray_dom = -1;
	st = tap_child(many_child,
		       (void *)(kind == 1 ? &run_keyed : &run_virt));
	if (!WIFSIGNALED(st))
		tap_diag("child: exit %d", WEXITSTATUS(st));
	tap_ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV &&
		       inf->stray_dom >= 0 &&
		       many[inf->stray_off] == FILL(inf->stray_dom),
	       "after the reservation of `pmguard run`: a stray write from "
	       "the old thread that blocks every signal into a %s "
	       "write-disabled domain kills the process (SIGSEGV), the "
	       "byte not written",
	       what);
}

int main(void)
{
	int st;

	if (pmg_under_valgrind())
		tap_skip_all(PMG_VALGRIND_WHY);
	tap_init(8);
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

	many = mmap(NULL, (NDOM + 2) * PAGE, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (many == MAP_FAILED) {
		tap_diag("mmap: %s", strerror(errno));
		return 1;
	}
	{
		static const struct many_case three = { 3, 0, 0 };
		static const struct many_case run = { RUN_KEYS, RUN_KEYS_LEFT,
						      0 };

		many_reset();
		many_report(tap_child(many_child, (void *)&three),
			    "3 keys reserved, then an old thread that blocks "
			    "every signal, then a no-access domain and 16 "
			    "write-disabled ones, windows moving keys: the "
			    "thread reads all 16, no sync fault");
		many_reset();
		many_report(tap_child(many_child, (void *)&run),
			    "the reservation of `pmguard run`, the same: "
			    "the thread reads all 16, no sync fault");
	}
	many_stray(1);
	many_stray(2);
	many_reset();
	many_report(tap_child(many_protect_child, NULL),
		    "after the reservation of `pmguard run`: an older "
		    "thread's stray writes to 16 write-disabled domains "
		    "fault, and its read of a no-access domain faults");
	return tap_done();
}
