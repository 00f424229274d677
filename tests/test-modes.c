// SPDX-License-Identifier: MIT
/*
 * Fault modes, end to end: strict aborts before the byte changes, relaxed
 * reports once per domain and lets the program go on, audit reports every
 * stray write, lets that one through and re-arms at once; domain callbacks;
 * signals that are not ours reach the previous handler or the default
 * action unchanged.  Runs on both backends.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <stdint.h>

#include "tap.h"
#include "capture.h"
#include "probe.h"
#include "valgrind-probe.h"

#define PAGE 4096

static bool pku;

static char *shared_pages(size_t n, int fill)
{
	char *p = mmap(NULL, n * PAGE, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	memset(p, fill, n * PAGE);
	return p;
}

/* One store instruction: every stray write below has the same site. */
static __attribute__((noinline)) void stray_store(volatile char *p, char v)
{
	*p = v;
}

/* ---- strict ---- */
struct strict_arg {
	char *page;
	int acc;
	int fd;
	unsigned flags;
};

static int strict_child(void *argp)
{
	struct strict_arg *a = argp;
	struct pmg_domain *d;

	if (pmg_domain_new(&d, "strict", a->flags) ||
	    pmg_protect(d, a->page, PAGE))
		return 3;
	pmg_set_report_fd(a->fd);
	pmg_set_fault_mode(PMG_FAULT_STRICT);
	if (a->acc == PMG_WRITE)
		stray_store(a->page + 100, 0x44);
	else
		(void)*(volatile char *)(a->page + 100);
	return 4;		/* must not get here */
}

static void test_strict(int acc, unsigned flags, const char *what)
{
	struct strict_arg a = { shared_pages(1, 0x33), acc, tmpfd(),
				flags };
	char buf[8192], want[64];
	int st, ok = 1;

	st = tap_child(strict_child, &a);
	slurp(a.fd, buf, sizeof(buf));
	snprintf(want, sizeof(want), "%s %p", acc == PMG_WRITE
		 ? "stray write to" : "stray read of", (void *)(a.page + 100));
	CHECK(ok, WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
	CHECK(ok, strstr(buf, "strict (aborting)") != NULL);
	CHECK(ok, strstr(buf, want) != NULL);
	CHECK(ok, strstr(buf, "backtrace") != NULL);
	CHECK(ok, a.page[100] == 0x33);
	if (!ok)
		tap_diag("status %#x, report: %.300s", st, buf);
	tap_ok(ok, "strict: %s aborts (SIGABRT), reports the address, "
	       "byte unchanged", what);
	close(a.fd);
	munmap(a.page, PAGE);
}

/* ---- relaxed ---- */
static void test_relaxed(void)
{
	struct pmg_domain *d1 = NULL, *d2 = NULL;
	char *p1 = shared_pages(1, 0), *p2 = shared_pages(1, 0);
	struct pmg_stats s0, s1;
	char buf[16384];
	int fd = tmpfd(), ok = 1;

	pmg_domain_new(&d1, "relaxed-1", 0);
	pmg_domain_new(&d2, "relaxed-2", 0);
	CHECK(ok, pmg_protect(d1, p1, PAGE) == 0);
	CHECK(ok, pmg_protect(d2, p2, PAGE) == 0);
	pmg_set_report_fd(fd);
	pmg_set_fault_mode(PMG_FAULT_RELAXED);
	pmg_stats_get(&s0, sizeof(s0));

	stray_store(p1, 1);	/* reported, allowed */
	stray_store(p1 + 1, 2);	/* the thread kept access: no fault */
	pmg_open(d1, PMG_WRITE);	/* the next edge re-arms */
	pmg_close(d1, PMG_WRITE);
	stray_store(p1 + 2, 3);	/* faults again, silently this time */
	stray_store(p2, 4);	/* another domain: reported once too */
	pmg_stats_get(&s1, sizeof(s1));
	slurp(fd, buf, sizeof(buf));

	CHECK(ok, p1[0] == 1 && p1[1] == 2 && p1[2] == 3 && p2[0] == 4);
	CHECK(ok, s1.relaxed - s0.relaxed == 3);
	CHECK(ok, count_matches(buf, "pmguard: relaxed") == 2);
	CHECK(ok, count_matches(buf, "domain 'relaxed-1'") == 1);
	CHECK(ok, count_matches(buf, "domain 'relaxed-2'") == 1);
	if (!ok)
		tap_diag("relaxed: %llu allowed, report: %.400s",
			 (unsigned long long)(s1.relaxed - s0.relaxed), buf);
	tap_ok(ok, "relaxed: reported once per domain, program continues, "
	       "re-armed by the next window edge");

	pmg_set_report_fd(2);
	pmg_open(d1, PMG_WRITE);
	pmg_close(d1, PMG_WRITE);
	pmg_open(d2, PMG_WRITE);
	pmg_close(d2, PMG_WRITE);
	pmg_unprotect(p1, PAGE);
	pmg_unprotect(p2, PAGE);
	pmg_domain_delete(&d1);
	pmg_domain_delete(&d2);
	close(fd);
}

/* ---- audit ---- */
#define NSTRAY 1000
static void *audit_addrs[NSTRAY + 8];
static volatile int audit_n;

static void audit_observer(const struct pmg_fault_info *fi, void *arg)
{
	(void)arg;
	if (fi->action != PMG_FAULT_AUDITED)
		return;
	if (audit_n < NSTRAY + 8)
		audit_addrs[audit_n] = fi->addr;
	audit_n++;
}

static void test_audit(void)
{
	struct pmg_domain *d = NULL;
	char *p = shared_pages(4, 0x11);
	struct pmg_stats s0, s1;
	static char buf[1 << 20];
	int fd = tmpfd(), ok = 1, i, wrong = 0, landed = 0;

	CHECK(ok, pmg_domain_new(&d, "audit", 0) == 0);
	CHECK(ok, pmg_protect(d, p, 4 * PAGE) == 0);
	pmg_set_report_fd(fd);
	pmg_set_fault_observer(audit_observer, NULL);
	pmg_set_fault_mode(PMG_FAULT_AUDIT);
	pmg_stats_reset();
	pmg_stats_get(&s0, sizeof(s0));
	audit_n = 0;

	for (i = 0; i < NSTRAY; i++)
		stray_store(p + (size_t)i * 13, (char)(i & 0x7f));
	pmg_stats_get(&s1, sizeof(s1));
	for (i = 0; i < NSTRAY; i++) {
		wrong += audit_addrs[i] != p + (size_t)i * 13;
		landed += p[(size_t)i * 13] == (char)(i & 0x7f);
	}
	slurp(fd, buf, sizeof(buf));
	CHECK(ok, audit_n == NSTRAY);
	CHECK(ok, wrong == 0);
	CHECK(ok, s1.audited - s0.audited == NSTRAY);
	CHECK(ok, s1.rearmed - s0.rearmed == NSTRAY);
	CHECK(ok, count_matches(buf, "pmguard: audit: stray write to") ==
		  NSTRAY);
	CHECK(ok, s1.audit_sites == 1);	/* one instruction, counted */
	tap_ok(ok, "audit: %d stray writes at distinct addresses, each "
	       "reported with its address (%d seen, %d wrong), one site",
	       NSTRAY, audit_n, wrong);
	tap_ok(landed == NSTRAY, "audit: each stray write was let through "
	       "exactly once (%d of %d landed)", landed, NSTRAY);

	/* still protected: one more stray write faults */
	stray_store(p + 4 * PAGE - 1, 1);
	ok = audit_n == NSTRAY + 1;
	if (pku)
		ok &= ((_pmg_rdpkru() >> (2 * pmg_domain_key(d))) & 3) == 2;
	tap_ok(ok, "audit: protection re-armed after the campaign "
	       "(a further stray write faults)");

	/* a legitimate write in a window is no fault */
	pmg_open(d, PMG_WRITE);
	p[5] = 5;
	pmg_close(d, PMG_WRITE);
	tap_ok(audit_n == NSTRAY + 1, "audit: no false positive for a "
	       "windowed write");

	pmg_set_fault_observer(NULL, NULL);
	pmg_set_report_fd(2);
	pmg_set_fault_mode(PMG_FAULT_RELAXED);
	pmg_unprotect(p, 4 * PAGE);
	pmg_domain_delete(&d);
	close(fd);
}

/* ---- callbacks ---- */
static volatile int cb_calls;
static void *volatile cb_addr;

static bool deny_cb(const struct pmg_fault_info *fi, void *arg)
{
	cb_calls++;
	cb_addr = fi->addr;
	return *(bool *)arg;
}

static void test_callbacks(void)
{
	struct pmg_domain *d = NULL;
	char *p = shared_pages(1, 0);
	bool grant = false;
	int ok = 1, strays0;

	pmg_domain_new(&d, "callback", 0);
	pmg_protect(d, p, PAGE);
	probe_begin();
	pmg_domain_set_callback(d, deny_cb, &grant);
	strays0 = probe_log.strays;
	cb_calls = 0;
	CHECK(ok, probe(d, p + 7, PMG_WRITE) == 1);	/* callback, then audit */
	CHECK(ok, cb_calls == 1 && cb_addr == p + 7);
	CHECK(ok, probe_log.strays == strays0 + 1);
	tap_ok(ok, "callback declining: the fault mode applies");

	ok = 1;
	grant = true;
	cb_calls = 0;
	stray_store(p + 8, 8);
	stray_store(p + 9, 9);
	CHECK(ok, cb_calls == 1);
	CHECK(ok, probe_log.granted >= 1);
	CHECK(ok, p[8] == 8 && p[9] == 9);
	tap_ok(ok, "callback granting: access granted to the faulting "
	       "context, no second fault");

	pmg_domain_set_callback(d, NULL, NULL);
	pmg_open(d, PMG_WRITE);
	pmg_close(d, PMG_WRITE);
	tap_ok(probe(d, p, PMG_WRITE) == 1, "callback cleared: re-armed by "
	       "the next window edge, faults again");
	probe_end();
	pmg_unprotect(p, PAGE);
	pmg_domain_delete(&d);
}

/* ---- signals that are not ours ---- */
static sigjmp_buf jb;
static volatile int prev_calls, prev_code;
static void *volatile prev_addr;

static void prev_handler(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	prev_calls++;
	prev_code = si->si_code;
	prev_addr = si->si_addr;
	siglongjmp(jb, 1);
}

static int chain_child(void *arg)
{
	char *none = mmap(NULL, PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
			  -1, 0);
	struct sigaction sa;
	struct pmg_domain *d;

	(void)arg;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = prev_handler;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGSEGV, &sa, NULL);
	/* pmguard installs its handler on top of ours */
	if (pmg_domain_new(&d, "chain", 0))
		return 3;
	if (!sigsetjmp(jb, 1))
		*(volatile char *)none = 1;
	if (prev_calls != 1 || prev_addr != none || prev_code != SEGV_ACCERR)
		return 1;
	return 0;
}

static int default_child(void *arg)
{
	char *none = mmap(NULL, PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
			  -1, 0);
	struct pmg_domain *d;

	if (pmg_domain_new(&d, "default", 0))
		return 3;
	if (arg)
		raise(SIGTRAP);
	else
		*(volatile char *)none = 1;
	return 0;
}

static void test_chaining(void)
{
	int st;

	st = tap_child(chain_child, NULL);
	tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a SIGSEGV that is "
	       "not ours reaches the previous handler unchanged (si_addr, "
	       "si_code)");
	st = tap_child(default_child, NULL);
	tap_ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "a SIGSEGV that "
	       "is not ours gets the default action (died by signal %d)",
	       WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	st = tap_child(default_child, (void *)1);
	tap_ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGTRAP, "a SIGTRAP that "
	       "is not ours gets the default action");
}

int main(void)
{
	if (pmg_under_valgrind())
		tap_skip_all(PMG_VALGRIND_WHY);
	tap_init(13);
	if (pmg_init())
		tap_diag("pmg_init: %s", pmg_errormsg());
	/* PKU with keys for the domains (PMGUARD_KEYS=0: every domain
	 * virtual, page protection: the mprotect backend's semantics) */
	{
		struct pmg_key_stats ks;

		pku = pmg_backend() == PMG_BACKEND_PKU &&
		      !pmg_key_stats_get(&ks, sizeof(ks)) && ks.keys_max > 0;
	}
	tap_diag("backend: %s", pmg_backend_name(pmg_backend()));
	test_strict(PMG_WRITE, 0, "stray write");
	test_strict(PMG_READ, PMG_DOMAIN_NOACCESS,
		    "stray read of an access-disabled domain");
	test_relaxed();
	test_audit();
	test_callbacks();
	test_chaining();
	return tap_done();
}
