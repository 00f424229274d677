// SPDX-License-Identifier: MIT
/*
 * test-edgerace: the fault path's mprotect(2) of a page against a window
 * edge that lands just before or just after it (mprotect backend), made
 * deterministic.  The binary wraps the library's raw mprotect
 * (-Wl,--wrap=_pmg_mprotect, mk/edgerace.mk): when a given thread asks
 * for a given protection over an armed page for the Nth time, a hook
 * runs first (a helper thread carries out a window edge) and may run
 * again after the call.  That is the order a loaded machine gives now and
 * then (a TCG guest running test-lazywin's race for minutes: one page
 * left writable after every window had closed).
 *
 *   1. audit: a window opened whole (SIGSEGV blocked) opens before a
 *      stray write's single step and closes just before the step's
 *      re-protect lands: the page must fault again after.
 *   2. relaxed: a window opens and closes between a write grant's record
 *      and its mprotect: the next window's close must still re-arm it.
 *   3. relaxed: a stray read of a no-access domain is granted; a write
 *      window opens whole just before the grant's mprotect(PROT_READ):
 *      the page must stay read-write under that window.
 *   4. a write window's lazy grant on a no-access domain finds the
 *      window closed (a read window opened instead) and puts the block
 *      back; the read window closes just before that mprotect lands: the
 *      block must end up with no access.
 *   5. a persistence call's page window opens on a page whose step
 *      re-protect read "read-only": the call's own store must not fault.
 *   6. eager windows (PMGUARD_MPROTECT_WINDOWS=eager, in a re-executed
 *      child): a window opened whole just before a step's re-protect
 *      lands: the page must stay read-write under it.
 *   7. audit: rep movsb reading a no-access domain (copied page-wise by
 *      the fault path) while a write window opens whole: read-write
 *      under it.
 *
 * A hook whose edge must wait for the fault path (an open that waits
 * for the handlers lowering pages: 3, 6, 7) is started and waited for
 * at most 200 ms: before the fix it completed at once and the late
 * mprotect(2) undid it; after, it completes when the handler is done.
 * Each case checks that its hooks ran, that the access landed, and the
 * protection after.  PKU: SKIP (page protection is this backend's).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"
#include "probe.h"
#include "valgrind-probe.h"

#define PAGE 4096UL
#define BLOCK (256 * PAGE) /* mpwin.c's LZ_BLOCK */

typedef void (*fn_t)(void);

/* ---------------------------------------------------------- the hooks */

struct rule {
	uintptr_t page; /* an mprotect(2) covering it ... */
	int prot; /* ... to this ... */
	pid_t tid; /* ... by this thread ... */
	int nth, count; /* ... for the nth time */
	fn_t pre, post; /* run before and after the call */
};

static struct rule rules[2];
static int nrules, fired;

int __real__pmg_mprotect(void *addr, size_t len, int prot);
int __wrap__pmg_mprotect(void *addr, size_t len, int prot);

static pid_t tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

int __wrap__pmg_mprotect(void *addr, size_t len, int prot)
{
	int n = __atomic_load_n(&nrules, __ATOMIC_SEQ_CST), i, rc, np = 0;
	pid_t me = tid();
	fn_t post[2];

	for (i = 0; i < n; i++) {
		struct rule *r = &rules[i];

		if (r->tid != me || r->prot != prot ||
		    (uintptr_t)addr > r->page ||
		    r->page >= (uintptr_t)addr + len || ++r->count != r->nth)
			continue;
		__atomic_add_fetch(&fired, 1, __ATOMIC_SEQ_CST);
		if (r->pre)
			r->pre();
		if (r->post)
			post[np++] = r->post;
	}
	rc = __real__pmg_mprotect(addr, len, prot);
	for (i = 0; i < np; i++)
		post[i]();
	return rc;
}

static void arm(int i, volatile char *page, int prot, pid_t who, int nth,
		fn_t pre, fn_t post)
{
	rules[i] = (struct rule){ (uintptr_t)page, prot, who, nth, 0, pre,
				  post };
	if (i + 1 > __atomic_load_n(&nrules, __ATOMIC_SEQ_CST))
		__atomic_store_n(&nrules, i + 1, __ATOMIC_SEQ_CST);
}

static void disarm(void)
{
	__atomic_store_n(&nrules, 0, __ATOMIC_SEQ_CST);
}

/* ------------------------------------------------------ the helper */

static fn_t h_cmd;
static int h_seq, h_done, h_stop;
static pid_t h_tid;
static struct pmg_domain *dom;
static int h_rc; /* the first failed edge's error */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void h_start(fn_t f)
{
	int s = __atomic_load_n(&h_seq, __ATOMIC_SEQ_CST) + 1;

	__atomic_store_n(&h_cmd, f, __ATOMIC_SEQ_CST);
	__atomic_store_n(&h_seq, s, __ATOMIC_SEQ_CST);
}

/* Wait for the helper's command, at most @secs (from a signal handler:
 * atomics, clock_gettime()).  Whether it is done. */
static bool h_wait(double secs)
{
	double end = now_s() + secs;

	while (__atomic_load_n(&h_done, __ATOMIC_SEQ_CST) !=
	       __atomic_load_n(&h_seq, __ATOMIC_SEQ_CST))
		if (now_s() > end)
			return false;
	return true;
}

/* Run @f on the helper, and wait for it (10 s: a hang is a failure). */
static void h_run(fn_t f)
{
	h_start(f);
	if (!h_wait(10)) {
		static const char m[] = "# helper stuck: abort\n";

		(void)!write(1, m, sizeof(m) - 1);
		abort();
	}
}

/* Start @f and give it 200 ms: an open that waits for the handler that
 * runs this hook cannot end before it. */
static void h_try(fn_t f)
{
	h_start(f);
	(void)h_wait(0.2);
}

static void *helper(void *arg)
{
	int seen = 0;

	(void)arg;
	__atomic_store_n(&h_tid, tid(), __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&h_stop, __ATOMIC_SEQ_CST)) {
		int s = __atomic_load_n(&h_seq, __ATOMIC_SEQ_CST);

		if (s == seen) {
			sched_yield();
			continue;
		}
		__atomic_load_n(&h_cmd, __ATOMIC_SEQ_CST)();
		seen = s;
		__atomic_store_n(&h_done, s, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

static void h_edge(int rc)
{
	if (rc && !h_rc)
		h_rc = rc;
}

/* A window opened whole: by a thread that blocks every signal. */
static sigset_t h_mask;

static void e_open_whole(void)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &h_mask);
	h_edge(pmg_open(dom, PMG_WRITE));
}

static void e_close_whole(void)
{
	h_edge(pmg_close(dom, PMG_WRITE));
	pthread_sigmask(SIG_SETMASK, &h_mask, NULL);
}

static void e_open_close(void)
{
	h_edge(pmg_open(dom, PMG_WRITE));
	h_edge(pmg_close(dom, PMG_WRITE));
}

static void e_open_w(void)
{
	h_edge(pmg_open(dom, PMG_WRITE));
}

static void e_close_w_open_r(void)
{
	h_edge(pmg_close(dom, PMG_WRITE));
	h_edge(pmg_open(dom, PMG_READ));
}

static void e_close_r(void)
{
	h_edge(pmg_close(dom, PMG_READ));
}

static void hook_open_whole(void)
{
	h_run(e_open_whole);
}

static void hook_close_whole(void)
{
	h_run(e_close_whole);
}

static void hook_try_open_whole(void)
{
	h_try(e_open_whole);
}

static void hook_open_close(void)
{
	h_run(e_open_close);
}

static void hook_close_w_open_r(void)
{
	h_run(e_close_w_open_r);
}

static void hook_close_r(void)
{
	h_run(e_close_r);
}

/* ------------------------------------------------------ the cases */

/* After the fault path's mprotect(2) of the page: if the window opened
 * whole has opened by now, the page must be writable under it (the
 * kernel's store of a read(2) from /dev/zero says; AS-safe).  A late
 * re-read may repair the page a moment later: too late for a thread that
 * blocks SIGSEGV and stored meanwhile. */
static volatile char *rr_pg;
static int rr_zero = -1, rr_lowered;

static void lowered_arm(volatile char *pg)
{
	rr_pg = pg;
	rr_lowered = 0;
	if (rr_zero < 0)
		rr_zero = open("/dev/zero", O_RDONLY | O_CLOEXEC);
}

static int lowered_ok(void)
{
	if (rr_zero < 0)
		tap_diag("/dev/zero: %s", strerror(errno));
	if (rr_lowered)
		tap_diag("the page was not writable under the window opened "
			 "whole, after the fault path's mprotect");
	return rr_zero >= 0 && !rr_lowered;
}

static void hook_lowered_after(void)
{
	if (__atomic_load_n(&h_done, __ATOMIC_SEQ_CST) ==
		    __atomic_load_n(&h_seq, __ATOMIC_SEQ_CST) &&
	    syscall(SYS_read, rr_zero, rr_pg + 2048, 1) != 1)
		__atomic_store_n(&rr_lowered, 1, __ATOMIC_SEQ_CST);
}


/* The protection /proc/self/maps shows for @a ("rw-s"). */
static void perms(const volatile void *a, char out[5])
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];

	strcpy(out, "????");
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char p[5];

		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, p) == 3 &&
		    lo <= (uintptr_t)a && (uintptr_t)a < hi) {
			memcpy(out, p, 5);
			break;
		}
	}
	if (f)
		fclose(f);
}

/* A fresh domain (@flags) over a fresh mapping of 4 blocks. */
static char *setup(const char *name, unsigned flags)
{
	char *p = mmap(NULL, 4 * BLOCK, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED || pmg_domain_new(&dom, name, flags) ||
	    pmg_protect(dom, p, 4 * BLOCK)) {
		tap_diag("setup %s: %s", name, pmg_errormsg());
		exit(1);
	}
	h_rc = 0;
	__atomic_store_n(&fired, 0, __ATOMIC_SEQ_CST);
	return p;
}

static void teardown(char *p)
{
	pmg_unprotect(p, 4 * BLOCK);
	pmg_domain_delete(&dom);
	munmap(p, 4 * BLOCK);
}

/* Both hooks ran, no edge failed. */
static int hooks_ran(int want)
{
	int n = __atomic_load_n(&fired, __ATOMIC_SEQ_CST);

	if (n != want || h_rc)
		tap_diag("hooks run: %d (want %d), helper edge: %d", n, want,
			 h_rc);
	return n == want && !h_rc;
}

static void test_step_reprotect(void)
{
	char *p = setup("edgerace-1", 0);
	volatile char *pg = p + BLOCK;
	struct pmg_stats a, b;
	int ok = 1, s0 = probe_log.strays;

	pmg_stats_get(&a, sizeof(a));
	/* the step's own grant (the helper opens whole first), then the
	 * re-protect after the step (the helper closes first) */
	arm(0, pg, PROT_READ | PROT_WRITE, tid(), 1, hook_open_whole, NULL);
	arm(1, pg, PROT_READ | PROT_WRITE, tid(), 2, hook_close_whole, NULL);
	pg[8] = 7;
	disarm();
	pmg_stats_get(&b, sizeof(b));
	CHECK(ok, hooks_ran(2));
	CHECK(ok, b.audited - a.audited == 1);
	CHECK(ok, probe_log.strays == s0 + 1);
	CHECK(ok, pg[8] == 7);
	/* no window open: the page faults again, and so does the rest */
	CHECK(ok, probe(dom, pg + 16, PMG_WRITE) == 1);
	CHECK(ok, probe(dom, p + 8, PMG_WRITE) == 1);
	CHECK(ok, probe(dom, p + 3 * BLOCK, PMG_WRITE) == 1);
	tap_ok(ok, "audit: a window opened whole and closed around a single "
		   "step (the close landing before the step's re-protect): "
		   "the page is protected after");
	teardown(p);
}

static bool eager(void)
{
	const char *e = getenv("PMGUARD_MPROTECT_WINDOWS");

	return e && !strcmp(e, "eager");
}

static void test_relaxed_note(void)
{
	const char *what = "relaxed: a window opened and closed between a "
			   "grant's record and its mprotect: the next "
			   "window's close re-arms the page";
	char *p;
	volatile char *pg;
	int ok = 1;

	if (eager()) { /* no record: every close re-protects whole */
		tap_skip(what, "eager windows keep no record");
		return;
	}
	p = setup("edgerace-2", 0);
	pg = p + 2 * BLOCK;
	CHECK(ok, pmg_set_fault_mode(PMG_FAULT_RELAXED) == 0);
	arm(0, pg, PROT_READ | PROT_WRITE, tid(), 1, hook_open_close, NULL);
	pg[8] = 9;
	disarm();
	CHECK(ok, pmg_set_fault_mode(PMG_FAULT_AUDIT) == 0);
	CHECK(ok, hooks_ran(1));
	CHECK(ok, pg[8] == 9);
	/* relaxed: writable until a write window's edge re-arms it */
	CHECK(ok, probe(dom, pg + 16, PMG_WRITE) == 0);
	CHECK(ok, pmg_open(dom, PMG_WRITE) == 0);
	CHECK(ok, pmg_close(dom, PMG_WRITE) == 0);
	CHECK(ok, probe(dom, pg + 16, PMG_WRITE) == 1);
	CHECK(ok, probe(dom, pg + 32, PMG_WRITE) == 1);
	tap_ok(ok, "%s", what);
	teardown(p);
}

static void test_relaxed_read(void)
{
	char *p = setup("edgerace-3", PMG_DOMAIN_NOACCESS), pr[5], nx[5];
	volatile char *pg = p + 8 * PAGE;
	int ok = 1, v;

	p[8 * PAGE + 3] = 0; /* (not yet protected: set before) */
	CHECK(ok, pmg_set_fault_mode(PMG_FAULT_RELAXED) == 0);
	lowered_arm(pg);
	arm(0, pg, PROT_READ, tid(), 1, hook_try_open_whole,
	    hook_lowered_after);
	v = pg[3];
	disarm();
	CHECK(ok, h_wait(10));
	CHECK(ok, hooks_ran(1));
	CHECK(ok, lowered_ok());
	CHECK(ok, v == 0);
	perms(pg, pr);
	perms(pg + PAGE, nx);
	if (pr[1] != 'w')
		tap_diag("page %s, the next %s (want rw under the window)", pr,
			 nx);
	CHECK(ok, pr[1] == 'w');
	pg[64] = 1; /* the window's write (a fault here: not ours) */
	h_run(e_close_whole);
	CHECK(ok, h_rc == 0);
	CHECK(ok, pmg_set_fault_mode(PMG_FAULT_AUDIT) == 0);
	tap_ok(ok, "relaxed: a read grant's mprotect racing a write window "
		   "opened whole on a no-access domain: read-write under it");
	teardown(p);
}

static void test_putback(void)
{
	const char *what = "a lazy grant's put-back racing a read window's "
			   "close on a no-access domain: no access after";
	char *p, pr[5];
	volatile char *pg;
	int ok = 1;

	if (eager()) {
		tap_skip(what, "eager windows grant no block");
		return;
	}
	p = setup("edgerace-4", PMG_DOMAIN_NOACCESS);
	pg = p + 8 * PAGE;
	h_run(e_open_w);
	/* the grant of the block (the write window closes, a read window
	 * opens first), then its put-back (the read window closes first) */
	arm(0, pg, PROT_READ | PROT_WRITE, tid(), 1, hook_close_w_open_r,
	    NULL);
	arm(1, pg, PROT_READ, tid(), 1, hook_close_r, NULL);
	pg[0] = 1; /* retried with no window: an audited stray */
	disarm();
	CHECK(ok, hooks_ran(2));
	perms(pg + 5 * PAGE, pr);
	if (pr[0] != '-')
		tap_diag("a page of the block, no window open: %s (want ---)",
			 pr);
	CHECK(ok, pr[0] == '-');
	CHECK(ok, probe(dom, pg + 5 * PAGE, PMG_READ) == 1);
	tap_ok(ok, "%s", what);
	teardown(p);
}

static volatile char *pw_pg;
static int pw_raised, main_done;

static void e_memset(void)
{
	h_edge(pmg_memset((void *)pw_pg, 5, 64, PMG_F_MEM_NOFLUSH) == NULL
		       ? -EIO
		       : 0);
}

/* main's re-protect: the page window opens and makes its pages
 * read-write first */
static void hook_start_memset(void)
{
	double end = now_s() + 10;

	h_start(e_memset);
	while (!__atomic_load_n(&pw_raised, __ATOMIC_SEQ_CST))
		if (now_s() > end)
			return;
}

/* the page window's mprotect done: main's lands now; the call waits
 * until main's step is over */
static void hook_hold_memset(void)
{
	double end = now_s() + 10;

	__atomic_store_n(&pw_raised, 1, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&main_done, __ATOMIC_SEQ_CST))
		if (now_s() > end)
			return;
}

static void test_pagewin(void)
{
	char *p = setup("edgerace-5", 0);
	int ok = 1, s0 = probe_log.strays;

	pw_pg = p + 8 * PAGE;
	pw_raised = main_done = 0;
	arm(0, pw_pg, PROT_READ, tid(), 1, hook_start_memset, NULL);
	arm(1, pw_pg, PROT_READ | PROT_WRITE, h_tid, 1, NULL,
	    hook_hold_memset);
	pw_pg[100] = 1;
	__atomic_store_n(&main_done, 1, __ATOMIC_SEQ_CST);
	CHECK(ok, h_wait(10));
	disarm();
	CHECK(ok, hooks_ran(2));
	if (probe_log.strays - s0 != 1)
		tap_diag("strays: %d (want 1, main's: 2 is the page window's "
			 "own store)", probe_log.strays - s0);
	CHECK(ok, probe_log.strays - s0 == 1);
	CHECK(ok, pw_pg[0] == 5 && pw_pg[63] == 5 && pw_pg[100] == 1);
	CHECK(ok, probe(dom, pw_pg + 200, PMG_WRITE) == 1);
	tap_ok(ok, "a page window opening while a step's re-protect that "
		   "read \"read-only\" lands: the call's stores do not fault");
	teardown(p);
}

/* 6, in the child re-executed with eager windows */
static int eager_child(void)
{
	char *p = setup("edgerace-6", 0), pr[5];
	volatile char *pg = p + 8 * PAGE;
	int ok = 1;

	lowered_arm(pg);
	arm(0, pg, PROT_READ, tid(), 1, hook_try_open_whole,
	    hook_lowered_after);
	pg[100] = 1; /* audited: the step's re-protect is the hooked call */
	disarm();
	CHECK(ok, h_wait(10));
	CHECK(ok, hooks_ran(1));
	CHECK(ok, lowered_ok());
	perms(pg, pr);
	if (pr[1] != 'w')
		tap_diag("eager: page %s under a window opened whole", pr);
	CHECK(ok, pr[1] == 'w');
	pg[64] = 2; /* the window's store (a fault here kills) */
	h_run(e_close_whole);
	CHECK(ok, h_rc == 0);
	CHECK(ok, probe(dom, pg + 16, PMG_WRITE) == 1);
	teardown(p);
	return ok ? 0 : 1;
}

static void test_eager(const char *self)
{
	int ok = 1, st = 0;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		setenv("PMGUARD_MPROTECT_WINDOWS", "eager", 1);
		execl(self, self, "--eager-child", (char *)NULL);
		_exit(127);
	}
	CHECK(ok, pid > 0 && waitpid(pid, &st, 0) == pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		tap_diag("eager child: %s %d",
			 WIFSIGNALED(st) ? "killed by signal" : "exit",
			 WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	CHECK(ok, WIFEXITED(st) && WEXITSTATUS(st) == 0);
	tap_ok(ok, "eager windows: a window opened whole while a step's "
		   "re-protect lands: read-write under it");
}

static void test_rep_read(void)
{
	char *p = setup("edgerace-7", PMG_DOMAIN_NOACCESS), pr[5];
	volatile char *pg = p + 8 * PAGE;
	char buf[64];
	void *dst = buf;
	const void *src = (const void *)(pg + 32);
	size_t n = sizeof(buf);
	int ok = 1;

	memset(buf, 1, sizeof(buf));
	lowered_arm(pg);
	arm(0, pg, PROT_READ, tid(), 1, hook_try_open_whole,
	    hook_lowered_after);
	__asm__ volatile("rep movsb"
			 : "+D"(dst), "+S"(src), "+c"(n)
			 :
			 : "memory");
	disarm();
	CHECK(ok, h_wait(10));
	CHECK(ok, hooks_ran(1));
	CHECK(ok, n == 0 && buf[0] == 0 && buf[63] == 0);
	CHECK(ok, lowered_ok());
	perms(pg, pr);
	if (pr[1] != 'w')
		tap_diag("page %s under a window opened whole", pr);
	CHECK(ok, pr[1] == 'w');
	pg[64] = 1;
	h_run(e_close_whole);
	CHECK(ok, h_rc == 0);
	CHECK(ok, probe(dom, pg + 16, PMG_READ) == 1);
	tap_ok(ok, "audit: rep movsb reading a no-access domain while a write "
		   "window opens whole: read-write under it");
	teardown(p);
}

int main(int argc, char **argv)
{
	bool child = argc > 1 && !strcmp(argv[1], "--eager-child");
	pthread_t t;
	int rc;

	if (pmg_under_valgrind())
		tap_skip_all(PMG_VALGRIND_WHY);
	if (pmg_init()) {
		tap_diag("pmg_init: %s", pmg_errormsg());
		return 1;
	}
	if (pmg_backend() != PMG_BACKEND_MPROTECT) {
		printf("1..0 # SKIP the page protection edges are the mprotect "
		       "backend's (backend: %s)\n",
		       pmg_backend_name(pmg_backend()));
		return 77;
	}
	if (!child)
		tap_init(7);
	if (probe_begin()) {
		tap_diag("audit mode: %s", pmg_errormsg());
		return 1;
	}
	if (pthread_create(&t, NULL, helper, NULL)) {
		tap_diag("pthread_create failed");
		return 1;
	}
	while (!__atomic_load_n(&h_tid, __ATOMIC_SEQ_CST))
		sched_yield();
	if (child) {
		rc = eager_child();
	} else {
		test_step_reprotect();
		test_relaxed_note();
		test_relaxed_read();
		test_putback();
		test_pagewin();
		test_eager(argv[0]);
		test_rep_read();
	}
	__atomic_store_n(&h_stop, 1, __ATOMIC_SEQ_CST);
	pthread_join(t, NULL);
	probe_end();
	return child ? rc : tap_done();
}
