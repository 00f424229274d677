// SPDX-License-Identifier: MIT
/*
 * API contracts that span calls: settings made before pmg_init() win over
 * the environment; a domain with open windows cannot be deleted; callbacks
 * and observers can be swapped while other threads fault.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "tap.h"
#include "probe.h"
#include "valgrind-probe.h"

#define PAGE 4096

static int before_init_child(void *arg)
{
	struct pmg_domain *d;

	(void)arg;
	setenv("PMGUARD_FAULT_MODE", "strict", 1);
	setenv("PMGUARD_REPORT_FD", "2", 1);
	pmg_set_fault_mode(PMG_FAULT_AUDIT);
	pmg_set_report_fd(-1);
	if (pmg_domain_new(&d, "before-init", 0))
		return 3;
	if (pmg_get_fault_mode() != PMG_FAULT_AUDIT)
		return 1;
	if (pmg_set_report_fd(-1) != -1)
		return 2;
	return 0;
}

static struct pmg_domain *hold_d;
static int hold_go[2], hold_held[2];

/* Holds a window until told to end (ending inside it closes it: see
 * test-endwin). */
static void *hold_window(void *arg)
{
	char c;

	(void)arg;
	pmg_open(hold_d, PMG_WRITE);
	if (write(hold_held[1], "h", 1) != 1 || read(hold_go[0], &c, 1) != 1)
		return NULL;
	pmg_close(hold_d, PMG_WRITE);
	return NULL;
}

static void test_delete_busy(void)
{
	struct pmg_domain *d = NULL;
	pthread_t t;
	int ok = 1;

	CHECK(ok, pmg_domain_new(&d, "api-busy", 0) == 0);
	CHECK(ok, pmg_open(d, PMG_WRITE) == 0);
	CHECK(ok, pmg_domain_delete(&d) == -EBUSY && d != NULL);
	CHECK(ok, strstr(pmg_errormsg(), "open windows") != NULL);
	CHECK(ok, pmg_close(d, PMG_WRITE) == 0);
	CHECK(ok, pmg_domain_delete(&d) == 0 && d == NULL);
	tap_ok(ok, "delete refuses -EBUSY while this thread holds a window");

	ok = 1;
	CHECK(ok, pmg_domain_new(&d, "api-busy2", 0) == 0);
	CHECK(ok, pipe(hold_go) == 0 && pipe(hold_held) == 0);
	hold_d = d;
	if (pmg_backend() == PMG_BACKEND_MPROTECT) {
		char c;

		pthread_create(&t, NULL, hold_window, NULL);
		CHECK(ok, read(hold_held[0], &c, 1) == 1);
		CHECK(ok, pmg_domain_delete(&d) == -EBUSY);
		CHECK(ok, write(hold_go[1], "g", 1) == 1);
		pthread_join(t, NULL);
		CHECK(ok, pmg_domain_delete(&d) == 0);
		tap_ok(ok, "mprotect: delete refuses -EBUSY while another "
		       "thread holds a window, succeeds once it closed it");
	} else {
		tap_skip("delete refuses while another thread holds a window",
			 "PKU: other threads' windows are thread-local state "
			 "the library cannot see (documented)");
	}
}

/* ---- swapping callbacks and observers under faults ---- */
static struct pmg_domain *sd;
static char *spage;
static volatile int stop;
static volatile int cb_a, cb_b, obs_a, obs_b;

static bool cba(const struct pmg_fault_info *fi, void *arg)
{
	(void)fi;
	if (arg != (void *)&cb_a)
		__builtin_trap();	/* a mixed pair */
	__atomic_add_fetch(&cb_a, 1, __ATOMIC_RELAXED);
	return false;
}

static bool cbb(const struct pmg_fault_info *fi, void *arg)
{
	(void)fi;
	if (arg != (void *)&cb_b)
		__builtin_trap();
	__atomic_add_fetch(&cb_b, 1, __ATOMIC_RELAXED);
	return false;
}

static void oba(const struct pmg_fault_info *fi, void *arg)
{
	(void)fi;
	if (arg != (void *)&obs_a)
		__builtin_trap();
	__atomic_add_fetch(&obs_a, 1, __ATOMIC_RELAXED);
}

static void obb(const struct pmg_fault_info *fi, void *arg)
{
	(void)fi;
	if (arg != (void *)&obs_b)
		__builtin_trap();
	__atomic_add_fetch(&obs_b, 1, __ATOMIC_RELAXED);
}

/* Both callbacks and both observers have run (the fault threads write). */
static bool all_seen(void)
{
	return __atomic_load_n(&cb_a, __ATOMIC_RELAXED) &&
	       __atomic_load_n(&cb_b, __ATOMIC_RELAXED) &&
	       __atomic_load_n(&obs_a, __ATOMIC_RELAXED) &&
	       __atomic_load_n(&obs_b, __ATOMIC_RELAXED);
}

static __attribute__((noinline)) void stray(volatile char *p)
{
	*p = 1;
}

static void *faulter(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED))
		stray(spage + 17);
	return NULL;
}

static void test_swap(void)
{
	pthread_t t[2];
	int i, n = 0;
	time_t t0;

	if (pmg_under_valgrind()) {
		tap_skip("callback and observer swaps while threads fault",
			 PMG_VALGRIND_WHY);
		return;
	}
	pmg_domain_new(&sd, "api-swap", 0);
	spage = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	pmg_protect(sd, spage, PAGE);
	pmg_set_report_fd(-1);
	pmg_set_fault_mode(PMG_FAULT_AUDIT);
	for (i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, faulter, NULL);
	/*
	 * 2000 swaps at least, and on until both pairs have seen faults: on
	 * a loaded machine the faulting threads may not run at all during
	 * the first 2000 (seen: "callbacks 0+0").  30 s at most.
	 */
	t0 = time(NULL);
	for (i = 0; i < 2000 || (!all_seen() && time(NULL) - t0 < 30); i++) {
		/* each pair stays installed over a yield, so that on an
		 * oversubscribed machine the faulters see both (pair a had
		 * none: "callbacks 0+140541", when only b's was followed by
		 * the yield) */
		switch (i % 6) {
		case 0:
			pmg_domain_set_callback(sd, cba, (void *)&cb_a);
			pmg_set_fault_observer(oba, (void *)&obs_a);
			break;
		case 3:
			pmg_domain_set_callback(sd, cbb, (void *)&cb_b);
			pmg_set_fault_observer(obb, (void *)&obs_b);
			break;
		case 2:
		case 5:
			pmg_domain_set_callback(sd, NULL, NULL);
			pmg_set_fault_observer(NULL, NULL);
			break;
		default:
			sched_yield();
		}
		n++;
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	pmg_domain_set_callback(sd, NULL, NULL);
	pmg_set_fault_observer(NULL, NULL);
	tap_ok(all_seen(), "%d callback and "
	       "observer swaps while 2 threads fault: no mixed pair, no "
	       "crash (callbacks %d+%d, observers %d+%d)", n, cb_a, cb_b,
	       obs_a, obs_b);
	pmg_set_fault_mode(PMG_FAULT_RELAXED);
}

/* ---- fork while another thread opens and closes pools ---- */
static char pool_path[64], pool_path2[64];

static void *pool_churn(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		struct pmg_pool *p;

		if (!pmg_pool_open(&p, pool_path, NULL))
			pmg_pool_close(&p);
	}
	return NULL;
}

static void test_fork_pools(void)
{
	struct pmg_pool_config *c = NULL;
	struct pmg_pool *p = NULL;
	int i, ok = 0, hung = 0, other = 0;
	pthread_t t;

	snprintf(pool_path, sizeof(pool_path), "/tmp/pmg-api-%d.pool",
		 (int)getpid());
	snprintf(pool_path2, sizeof(pool_path2), "/tmp/pmg-api-%d-2.pool",
		 (int)getpid());
	unlink(pool_path);
	unlink(pool_path2);
	if (pmg_pool_config_new(&c) || pmg_pool_config_set_size(c, 1 << 16) ||
	    pmg_pool_create(&p, pool_path, c) || pmg_pool_close(&p) ||
	    pmg_pool_create(&p, pool_path2, c)) {
		tap_ok(0, "fork during pool churn: set-up: %s", pmg_errormsg());
		return;
	}
	pmg_pool_close(&p);
	__atomic_store_n(&stop, 0, __ATOMIC_RELAXED);
	pthread_create(&t, NULL, pool_churn, NULL);
	for (i = 0; i < 20; i++) {
		pid_t pid = fork();
		int st;

		if (pid == 0) {
			struct pmg_pool *q;
			int rc;

			alarm(5);
			/* its own pool: the churned one is locked by the
			 * parent whenever the other thread has it open */
			rc = pmg_pool_open(&q, pool_path2, NULL);
			if (!rc)
				rc = pmg_pool_close(&q);
			_exit(rc ? 1 : 0);
		}
		waitpid(pid, &st, 0);
		if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
			hung++;
		else if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
			ok++;
		else
			other++;
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	unlink(pool_path);
	unlink(pool_path2);
	pmg_pool_config_delete(&c);
	tap_ok(ok == 20, "fork while another thread opens and closes pools: "
	       "%d children opened a pool, %d hung, %d failed", ok, hung,
	       other);
}

/*
 * PMG_WRITE_SCOPE(d) and PMG_WITH_WRITE(d) evaluate @d once, and never run
 * their code without the window: the scope guard aborts (a child here,
 * which must die by SIGABRT before its next statement), PMG_WITH_WRITE
 * skips its block with errno set.
 */
static int scope_evals;

static struct pmg_domain *scope_arg(struct pmg_domain *d)
{
	scope_evals++;
	return d;
}

static int scope_bad_child(void *arg)
{
	struct pmg_domain fake = { 0 };

	(void)arg;
	{
		PMG_WRITE_SCOPE(scope_arg(&fake));
		_exit(9); /* ran without a window */
	}
	return 8;
}

static void test_scopes(void)
{
	struct pmg_domain *d, fake = { 0 };
	char *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int st, ran = 0, ok;

	if (p == MAP_FAILED || pmg_domain_new(&d, "scopes", 0) ||
	    pmg_protect(d, p, PAGE)) {
		tap_diag("scope setup: %s", pmg_errormsg());
		for (int i = 0; i < 3; i++)
			tap_ok(0, "scope setup");
		return;
	}
	scope_evals = 0;
	{
		PMG_WRITE_SCOPE(scope_arg(d));
		p[0] = 1;
	}
	ok = scope_evals == 1;
	scope_evals = 0;
	PMG_WITH_WRITE(scope_arg(d))
	{
		p[1] = 2;
		ran++;
	}
	tap_ok(ok && scope_evals == 1 && ran == 1 && p[0] == 1 && p[1] == 2,
	       "PMG_WRITE_SCOPE(d) and PMG_WITH_WRITE(d) evaluate d once "
	       "(%d)",
	       scope_evals);
	scope_evals = 0;
	errno = 0;
	ran = 0;
	PMG_WITH_WRITE(scope_arg(&fake))
	ran++;
	tap_ok(ran == 0 && errno == EINVAL && scope_evals == 1,
	       "PMG_WITH_WRITE on a bad handle: block skipped, errno EINVAL "
	       "(ran %d, errno %d)",
	       ran, errno);
	st = tap_child(scope_bad_child, NULL);
	tap_ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT,
	       "PMG_WRITE_SCOPE on a bad handle aborts before the code after "
	       "it (status %#x)",
	       st);
	if (pmg_unprotect(p, PAGE) || pmg_domain_delete(&d))
		tap_diag("scope teardown: %s", pmg_errormsg());
	munmap(p, PAGE);
}

int main(void)
{
	int st;

	tap_init(8);
	st = tap_child(before_init_child, NULL);
	tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fault mode and report "
	       "fd set before pmg_init() win over PMGUARD_* (status %#x)", st);
	if (pmg_init()) {
		printf("Bail out! %s\n", pmg_errormsg());
		return 1;
	}
	tap_diag("backend: %s", pmg_backend_name(pmg_backend()));
	test_delete_busy();
	test_swap();
	test_fork_pools();
	test_scopes();
	return tap_done();
}
