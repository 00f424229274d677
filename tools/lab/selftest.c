// SPDX-License-Identifier: MIT
/*
 * pmguard selftest [N...]: the pks_test list of Intel's PKS/PMEM patch set
 * (V8), run in-process on the current backend, TAP out (numbering as
 * V10's pks_test):
 *   0 check defaults     1 single key       2 context switch (threads)
 *   3 context switch (processes)            4 exception
 *   5 exception update   6 all keys         9 crash test (give it twice)
 * Exit 0 only if every test run passed (skips are stated with a reason).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "args.h"
#include "cmds.h"
#include "pmguard.h"
#include "probe.h"

#define PAGE 4096

static bool pku;

struct page_dom {
	struct pmg_domain *d;
	char *p;
};

/* A fresh page protected by a fresh domain; NULL d on failure. */
static int page_dom_new(struct page_dom *pd, const char *name, unsigned flags)
{
	int rc;

	pd->d = NULL;
	pd->p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pd->p == MAP_FAILED) {
		pd->p = NULL;
		return -errno;
	}
	memset(pd->p, 0xa5, PAGE);
	rc = pmg_domain_new(&pd->d, name, flags);
	if (!rc)
		rc = pmg_protect(pd->d, pd->p, PAGE);
	if (rc)
		printf("# %s: %s\n", name, pmg_errormsg());
	return rc;
}

static void page_dom_free(struct page_dom *pd)
{
	if (pd->p) {
		pmg_unprotect(pd->p, PAGE);
		munmap(pd->p, PAGE);
	}
	pmg_domain_delete(&pd->d);
	pd->p = NULL;
}

static unsigned key_bits(const struct pmg_domain *d)
{
	return (_pmg_rdpkru() >> (2 * pmg_domain_key(d))) & 3;
}

/* Expect probe results for read and write; 1 if both as expected. */
static int expect(struct pmg_domain *d, char *p, int rd_faults,
		  int wr_faults, const char *state)
{
	int r = probe(d, p, PMG_READ), w = probe(d, p, PMG_WRITE);

	if (r == rd_faults && w == wr_faults)
		return 1;
	printf("# %s: read %s (want %s), write %s (want %s)\n", state,
	       r ? "faulted" : "did not fault",
	       rd_faults ? "fault" : "no fault",
	       w ? "faulted" : "did not fault",
	       wr_faults ? "fault" : "no fault");
	return 0;
}

/* ---- 1: single key: three rights states x read/write ---- */
static int run_single(void)
{
	struct page_dom wd, ad;
	int ok = 1;

	if (page_dom_new(&wd, "selftest-wd", 0) ||
	    page_dom_new(&ad, "selftest-ad", PMG_DOMAIN_NOACCESS)) {
		page_dom_free(&wd);
		return 0;
	}
	ok &= expect(wd.d, wd.p, 0, 1, "write-disabled (default)");
	ok &= expect(ad.d, ad.p, 1, 1, "access-disabled (default)");
	pmg_open(wd.d, PMG_WRITE);
	ok &= expect(wd.d, wd.p, 0, 0, "read-write (write window)");
	pmg_close(wd.d, PMG_WRITE);
	ok &= expect(wd.d, wd.p, 0, 1, "write-disabled after close");
	pmg_open(ad.d, PMG_READ);
	ok &= expect(ad.d, ad.p, 0, 1, "read window on access-disabled");
	pmg_open(ad.d, PMG_WRITE);
	ok &= expect(ad.d, ad.p, 0, 0, "write window nested in read");
	pmg_close(ad.d, PMG_WRITE);
	ok &= expect(ad.d, ad.p, 0, 1, "back to the read window");
	pmg_close(ad.d, PMG_READ);
	ok &= expect(ad.d, ad.p, 1, 1, "access-disabled after close");
	page_dom_free(&wd);
	page_dom_free(&ad);
	return ok;
}

/* ---- 0: defaults ---- */
struct older {
	int go[2], started[2];
	unsigned before, after;
	int read_stray, write_stray;
	struct page_dom *pd;
};

static void *older_thread(void *arg)
{
	struct older *o = arg;
	char c;

	/* running (past the pthread_create reset) before the domain exists */
	if (write(o->started[1], "s", 1) != 1 || read(o->go[0], &c, 1) != 1)
		return NULL;
	o->before = pku ? key_bits(o->pd->d) : 0;
	o->read_stray = probe(o->pd->d, o->pd->p, PMG_READ);
	o->after = pku ? key_bits(o->pd->d) : 0;
	o->write_stray = probe(o->pd->d, o->pd->p, PMG_WRITE);
	return NULL;
}

static void *newer_thread(void *arg)
{
	struct page_dom *pd = arg;

	return (void *)(uintptr_t)(pku ? key_bits(pd->d) : 0);
}

static int run_defaults(void)
{
	struct page_dom wd = { 0 }, ad = { 0 };
	struct older o = { .pd = &wd };
	pthread_t old_t, new_t;
	void *res;
	int ok = 1, synced0;
	char c;

	if (pipe(o.go) || pipe(o.started))
		return 0;
	/* A thread that exists before the domain does. */
	if (pthread_create(&old_t, NULL, older_thread, &o) ||
	    read(o.started[0], &c, 1) != 1)
		return 0;
	if (page_dom_new(&wd, "selftest-defaults", 0) ||
	    page_dom_new(&ad, "selftest-defaults-na", PMG_DOMAIN_NOACCESS)) {
		ok = 0;
		goto out;
	}
	if (pku) {
		CHECK(ok, key_bits(wd.d) == 2);	/* WD */
		CHECK(ok, key_bits(ad.d) == 1);	/* AD */
		CHECK(ok, (_pmg_rdpkru() & 3) == 0);	/* key 0 RW */
	}
	ok &= expect(wd.d, wd.p, 0, 1, "write-disabled default");
	ok &= expect(ad.d, ad.p, 1, 1, "access-disabled default");
	/* A thread created after the domain starts at the default. */
	if (pthread_create(&new_t, NULL, newer_thread, &wd) == 0) {
		pthread_join(new_t, &res);
		if (pku)
			CHECK(ok, (uintptr_t)res == 2);
	}
	synced0 = probe_log.synced;
	if (write(o.go[1], "g", 1) != 1)
		ok = 0;
	pthread_join(old_t, NULL);
	/* The older thread: stale rights synced on its first read. */
	CHECK(ok, o.read_stray == 0);
	CHECK(ok, o.write_stray == 1);
	if (pku) {
		printf("# older thread: key bits %u before its first access, "
		       "%u after (synced %d)\n", o.before, o.after,
		       probe_log.synced - synced0);
		CHECK(ok, o.before == 1);	/* Linux: AD in other threads */
		CHECK(ok, o.after == 2);
		CHECK(ok, probe_log.synced > synced0);
	}
out:
	page_dom_free(&wd);
	page_dom_free(&ad);
	close(o.go[0]);
	close(o.go[1]);
	close(o.started[0]);
	close(o.started[1]);
	return ok;
}

/* ---- 2/3: context switch ---- */
static void pin_cpu0(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

struct ctxsw {
	int to_a[2], to_b[2];
	struct page_dom *pd;
	int a_ok, b_ok;
};

static void *ctx_a(void *arg)
{
	struct ctxsw *c = arg;
	char ch;
	int ok = 1;

	pmg_open(c->pd->d, PMG_WRITE);		/* arm */
	if (write(c->to_b[1], "a", 1) != 1 || read(c->to_a[0], &ch, 1) != 1)
		ok = 0;
	/* check: our rights survived B's run on the same key */
	CHECK(ok, key_bits(c->pd->d) == 0);
	CHECK(ok, probe(c->pd->d, c->pd->p, PMG_WRITE) == 0);
	pmg_close(c->pd->d, PMG_WRITE);
	CHECK(ok, probe(c->pd->d, c->pd->p, PMG_WRITE) == 1);
	c->a_ok = ok;
	return NULL;
}

static void *ctx_b(void *arg)
{
	struct ctxsw *c = arg;
	char ch;
	int ok = 1;

	if (read(c->to_b[0], &ch, 1) != 1)
		ok = 0;
	CHECK(ok, key_bits(c->pd->d) == 2);
	ok &= expect(c->pd->d, c->pd->p, 0, 1, "B: write-disabled");
	pmg_open(c->pd->d, PMG_WRITE);
	ok &= expect(c->pd->d, c->pd->p, 0, 0, "B: read-write");
	pmg_close(c->pd->d, PMG_WRITE);
	ok &= expect(c->pd->d, c->pd->p, 0, 1, "B: closed");
	c->b_ok = ok;
	if (write(c->to_a[1], "b", 1) != 1)
		c->b_ok = 0;
	return NULL;
}

static int run_ctx_threads(void)
{
	struct page_dom pd;
	struct ctxsw c = { .pd = &pd };
	pthread_t a, b;

	if (page_dom_new(&pd, "selftest-ctx", 0) || pipe(c.to_a) ||
	    pipe(c.to_b)) {
		page_dom_free(&pd);
		return 0;
	}
	pin_cpu0();
	pthread_create(&a, NULL, ctx_a, &c);
	pthread_create(&b, NULL, ctx_b, &c);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	page_dom_free(&pd);
	close(c.to_a[0]);
	close(c.to_a[1]);
	close(c.to_b[0]);
	close(c.to_b[1]);
	return c.a_ok && c.b_ok;
}

static int run_ctx_processes(void)
{
	struct page_dom pd;
	int to_child[2], to_parent[2], st, ok = 1;
	pid_t pid;
	char ch;

	if (page_dom_new(&pd, "selftest-ctxp", 0) || pipe(to_child) ||
	    pipe(to_parent)) {
		page_dom_free(&pd);
		return 0;
	}
	pin_cpu0();
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		int cok = 1;

		pmg_open(pd.d, PMG_WRITE);	/* arm in the child */
		if (write(to_parent[1], "c", 1) != 1 ||
		    read(to_child[0], &ch, 1) != 1)
			_exit(2);
		if (pku)
			CHECK(cok, key_bits(pd.d) == 0);
		CHECK(cok, probe(pd.d, pd.p, PMG_WRITE) == 0);
		pmg_close(pd.d, PMG_WRITE);
		CHECK(cok, probe(pd.d, pd.p, PMG_WRITE) == 1);
		_exit(cok ? 0 : 1);
	}
	if (pid < 0 || read(to_parent[0], &ch, 1) != 1)
		ok = 0;
	/* the parent runs through every state on the same key */
	ok &= expect(pd.d, pd.p, 0, 1, "parent: write-disabled");
	pmg_open(pd.d, PMG_WRITE);
	ok &= expect(pd.d, pd.p, 0, 0, "parent: read-write");
	pmg_close(pd.d, PMG_WRITE);
	if (write(to_child[1], "p", 1) != 1)
		ok = 0;
	if (pid > 0) {
		waitpid(pid, &st, 0);
		CHECK(ok, WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	page_dom_free(&pd);
	close(to_child[0]);
	close(to_child[1]);
	close(to_parent[0]);
	close(to_parent[1]);
	return ok;
}

/* ---- 4: exception ---- */
static struct page_dom exc_pd;
static volatile int exc_ok;

/*
 * What each handler checks: it starts fresh (PKU: the interrupted window
 * does not reach in here), a window opened in it works, and closing it
 * gives the handler its own rights back, not the window of the code it
 * interrupted.  The outer handler, with @nest, raises the inner one while
 * its window is open: the nested handler is a fresh context too, and
 * leaves the outer window as it was.
 */
static void exc_handler_check(bool nest)
{
	struct pmg_domain *d = exc_pd.d;
	char *p = exc_pd.p;
	int ok = 1;

	if (pku) {
		CHECK(ok, key_bits(d) != 0);
		CHECK(ok, probe(d, p, PMG_WRITE) == 1);
	}
	CHECK(ok, pmg_open(d, PMG_WRITE) == 0);
	CHECK(ok, probe(d, p, PMG_WRITE) == 0);
	if (nest) {
		raise(SIGUSR2);
		CHECK(ok, probe(d, p, PMG_WRITE) == 0);
	}
	CHECK(ok, pmg_close(d, PMG_WRITE) == 0);
	if (pku)
		CHECK(ok, probe(d, p, PMG_WRITE) == 1);
	if (!ok)
		exc_ok = 0;
}

static void exc_inner(int sig)
{
	(void)sig;
	exc_handler_check(false);
}

static void exc_outer(int sig)
{
	(void)sig;
	exc_handler_check(true);
}

static int run_exception(void)
{
	struct sigaction sa, o1, o2;
	uint32_t before;
	int ok = 1;

	if (page_dom_new(&exc_pd, "selftest-exc", 0)) {
		page_dom_free(&exc_pd);
		return 0;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = exc_outer;
	sigaction(SIGUSR1, &sa, &o1);
	sa.sa_handler = exc_inner;
	sigaction(SIGUSR2, &sa, &o2);
	exc_ok = 1;

	pmg_open(exc_pd.d, PMG_WRITE);
	before = pku ? _pmg_rdpkru() : 0;
	raise(SIGUSR1);
	/* the interrupted context's rights are restored */
	if (pku)
		CHECK(ok, _pmg_rdpkru() == before);
	CHECK(ok, probe(exc_pd.d, exc_pd.p, PMG_WRITE) == 0);
	pmg_close(exc_pd.d, PMG_WRITE);
	CHECK(ok, probe(exc_pd.d, exc_pd.p, PMG_WRITE) == 1);
	if (!pku)
		printf("# mprotect: windows are process-wide, so a handler "
		       "shares the interrupted window; only the nesting and "
		       "restore are checked\n");
	sigaction(SIGUSR1, &o1, NULL);
	sigaction(SIGUSR2, &o2, NULL);
	page_dom_free(&exc_pd);
	return ok && exc_ok;
}

/* ---- 5: exception update (a callback grants access) ---- */
static volatile int grant_calls;

static bool grant_cb(const struct pmg_fault_info *fi, void *arg)
{
	(void)arg;
	(void)fi;
	grant_calls++;
	return true;
}

static int run_exception_update(void)
{
	struct page_dom pd;
	int ok = 1, strays0 = probe_log.strays;
	struct pmg_stats st0, st1;

	if (page_dom_new(&pd, "selftest-update", 0)) {
		page_dom_free(&pd);
		return 0;
	}
	pmg_stats_get(&st0, sizeof(st0));
	grant_calls = 0;
	CHECK(ok, pmg_domain_set_callback(pd.d, grant_cb, NULL) == 0);
	pd.p[0] = 1;			/* faults; the callback grants */
	CHECK(ok, grant_calls == 1);
	pd.p[1] = 2;			/* no second fault */
	CHECK(ok, grant_calls == 1);
	CHECK(ok, pd.p[0] == 1 && pd.p[1] == 2);
	pmg_stats_get(&st1, sizeof(st1));
	CHECK(ok, st1.granted == st0.granted + 1);
	CHECK(ok, probe_log.strays == strays0);	/* not seen as audit */
	/* the next window edge puts the default back */
	pmg_domain_set_callback(pd.d, NULL, NULL);
	pmg_open(pd.d, PMG_WRITE);
	pmg_close(pd.d, PMG_WRITE);
	CHECK(ok, probe(pd.d, pd.p, PMG_WRITE) == 1);
	page_dom_free(&pd);
	return ok;
}

/* ---- 6: all keys ---- */
static int run_all_keys(void)
{
	struct page_dom pd[16];
	int n = 0, ok = 1, i, rc = 0;
	char name[32];

	/* pinned: a hardware key each, for life (PKU), until none is
	 * left; on mprotect there are no keys and pinning takes none */
	memset(pd, 0, sizeof(pd));
	for (n = 0; n < 16; n++) {
		snprintf(name, sizeof(name), "selftest-key%d", n);
		rc = page_dom_new(&pd[n], name, PMG_DOMAIN_PINNED);
		if (rc)
			break;
	}
	printf("# %d pinned domains created before %s\n", n,
	       rc ? strerror(-rc) : "the limit of this test (16)");
	CHECK(ok, n >= 1);
	if (pku) {
		CHECK(ok, rc == -ENOSPC);
		CHECK(ok,
		      strstr(pmg_errormsg(), "no protection key for") != NULL);
	} else {
		CHECK(ok, n == 16 && rc == 0);
	}
	if (n < 16)
		page_dom_free(&pd[n]);	/* the page of the failed one */
	for (i = 0; i < n; i++) {
		CHECK(ok, probe(pd[i].d, pd[i].p, PMG_WRITE) == 1);
		pmg_open(pd[i].d, PMG_WRITE);
		CHECK(ok, probe(pd[i].d, pd[i].p, PMG_WRITE) == 0);
		pmg_close(pd[i].d, PMG_WRITE);
	}
	for (i = 0; i < n; i++)
		page_dom_free(&pd[i]);
	return ok;
}

/* ---- 9: crash test, in a child so the report can be checked ---- */
static int run_crash(void)
{
	char *shared = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
			    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int rep[2], st, ok = 1;
	char buf[4096];
	ssize_t n, got = 0;
	pid_t pid;

	if (shared == MAP_FAILED || pipe(rep))
		return 0;
	memset(shared, 0x33, PAGE);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		struct pmg_domain *d;

		close(rep[0]);
		if (pmg_domain_new(&d, "selftest-crash", 0) ||
		    pmg_protect(d, shared, PAGE))
			_exit(3);
		pmg_set_fault_observer(NULL, NULL);
		pmg_set_report_fd(rep[1]);
		pmg_set_fault_mode(PMG_FAULT_STRICT);
		printf("# child: stray write to %p\n", (void *)(shared + 8));
		fflush(stdout);
		shared[8] = 0x44;	/* this purposely faults */
		_exit(4);		/* never reached if the test passes */
	}
	close(rep[1]);
	while (got < (ssize_t)sizeof(buf) - 1 &&
	       (n = read(rep[0], buf + got, sizeof(buf) - 1 - got)) > 0)
		got += n;
	buf[got] = '\0';
	close(rep[0]);
	waitpid(pid, &st, 0);
	CHECK(ok, WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
	CHECK(ok, strstr(buf, "strict") && strstr(buf, "stray write to"));
	CHECK(ok, shared[8] == 0x33);	/* the byte never changed */
	printf("# child ended with %s %d; report: %.*s", WIFSIGNALED(st)
	       ? "signal" : "status", WIFSIGNALED(st) ? WTERMSIG(st)
	       : WEXITSTATUS(st), (int)strcspn(buf, "\n") + 1, buf);
	munmap(shared, PAGE);
	return ok;
}

static const struct {
	int nr;
	const char *name;
	int (*fn)(void);
} tests[] = {
	{ 0, "check defaults", run_defaults },
	{ 1, "single key: rights x access", run_single },
	{ 2, "context switch between threads on one CPU", run_ctx_threads },
	{ 3, "context switch between processes on one CPU",
	  run_ctx_processes },
	{ 4, "exception: fresh handler state, nested, restored",
	  run_exception },
	{ 5, "exception update: a callback grants access",
	  run_exception_update },
	{ 6, "all keys", run_all_keys },
	{ 9, "crash test (strict stray write)", run_crash },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: pmguard selftest [N...]\n"
		   "  0 defaults, 1 single, 2/3 context switch, "
		   "4 exception, 5 exception update,\n"
		   "  6 all keys, 9 crash test (give 9 twice); "
		   "default: 0 1 2 3 4 5 6\n");
}

struct tlist {
	int list[64];
	int n, nines;
};

/* A test number: decimal digits, 0..99. */
static int take(const char *arg, void *ctx)
{
	struct tlist *l = ctx;
	unsigned long long v;

	if (cli_number("selftest", "test number", arg, false, 0, 99, &v))
		return 2;
	if (l->n == 64)
		return cli_error("selftest: too many tests (64 at most)");
	l->list[l->n++] = (int)v;
	l->nines += v == 9;
	return 0;
}

int cmd_selftest(int argc, char **argv)
{
	static const struct cli_opt opts[] = { { .name = NULL } };
	struct tlist tl = { .n = 0 };
	const struct cli_verb verb = { "selftest", opts, usage, take, &tl };
	int *list = tl.list, n, i, j, failed = 0, nines, rc;
	int passed = 0, skipped = 0;
	bool armed = false;

	rc = cli_args(&verb, argc, argv);
	if (rc != CLI_GO_ON)
		return rc;
	n = tl.n;
	nines = tl.nines;
	if (!n)
		for (j = 0; j <= 6; j++)
			list[n++] = j;
	setvbuf(stdout, NULL, _IOLBF, 0);	/* TAP survives a crash */
	rc = pmg_init();
	if (rc) {
		cli_error("selftest: %s", pmg_errormsg());
		return 1;
	}
	pku = pmg_backend() == PMG_BACKEND_PKU;
	printf("TAP version 13\n# backend: %s\n1..%d\n",
	       pmg_backend_name(pmg_backend()), n - (nines >= 2 ? 1 : 0));
	probe_begin();
	for (i = 0, j = 0; i < n; i++) {
		size_t t;
		int ok;

		if (list[i] == 9 && nines >= 2) {
			if (!armed) {	/* the first 9 arms, the second runs */
				armed = true;
				printf("# CAUTION: the crash test makes a "
				       "child process abort\n");
				continue;
			}
		} else if (list[i] == 9) {
			printf("ok %d - test 9: crash test # SKIP armed "
			       "only: give 9 twice to run it\n", ++j);
			skipped++;
			continue;
		}
		for (t = 0; t < sizeof(tests) / sizeof(tests[0]); t++)
			if (tests[t].nr == list[i])
				break;
		if (t == sizeof(tests) / sizeof(tests[0])) {
			printf("not ok %d - test %d: unknown test\n", ++j,
			       list[i]);
			failed++;
			continue;
		}
		if (!pku && list[i] == 2) {
			printf("ok %d - test 2: %s # SKIP mprotect backend: "
			       "windows are process-wide, no per-thread "
			       "state to switch\n", ++j, tests[t].name);
			skipped++;
			continue;
		}
		ok = tests[t].fn();
		printf("%s %d - test %d: %s\n", ok ? "ok" : "not ok", ++j,
		       list[i], tests[t].name);
		failed += !ok;
		passed += ok;
	}
	probe_end();
	printf("selftest: %d passed, %d failed, %d skipped\n", passed, failed,
	       skipped);
	return failed ? 1 : 0;
}
