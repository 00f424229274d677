// SPDX-License-Identifier: MIT
/*
 * test-badinput: every public call given bad input returns the documented
 * negative errno, sets a fresh, non-empty pmg_errormsg() that names the bad
 * value where the header says so, never crashes and never changes data or
 * protection.  Bad environment values are tried first, in forked children
 * of a process that has not initialised the library yet.
 *
 * Runs on both backends: mprotect here, PKU in the QEMU guest.  Fault
 * checks use probe.h (audit mode + an observer), which works on both.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "pmguard.h"
#include "probe.h"
#include "valgrind-probe.h"

#define PLAN 75
#define PAGE 4096UL

/* ------------------------------------------------------------ helpers */

static char sentinel[512];

/* Leave a known message behind, so a call that sets none is caught. */
static void prime(void)
{
	(void)pmg_set_fault_mode(-4242);
}

#define TRY(call) (prime(), (call))

/*
 * 1 if @rc is @want and the call left a message of its own (non-empty,
 * not the primed one) that contains @n1 and @n2 (either may be NULL).
 */
static int err_is(int rc, int want, const char *n1, const char *n2)
{
	const char *m = pmg_errormsg();
	int ok = 1;

	if (rc != want) {
		tap_diag("returned %d (%s), want %d (%s)", rc, strerror(-rc),
			 want, strerror(-want));
		ok = 0;
	}
	if (!m[0] || !strcmp(m, sentinel)) {
		tap_diag("no message of its own: '%s'", m);
		ok = 0;
	}
	if (n1 && !strstr(m, n1)) {
		tap_diag("message '%s' does not name '%s'", m, n1);
		ok = 0;
	}
	if (n2 && !strstr(m, n2)) {
		tap_diag("message '%s' does not name '%s'", m, n2);
		ok = 0;
	}
	return ok;
}

/*
 * pmg_open(@d, @oacc), then pmg_close(@d, @cacc): both return -EINVAL
 * with a message of their own that contains @word.
 */
static int open_close_einval(struct pmg_domain *d, int oacc, int cacc,
			     const char *word)
{
	int ok = err_is(TRY(pmg_open(d, oacc)), -EINVAL, word, NULL);

	return err_is(TRY(pmg_close(d, cacc)), -EINVAL, word, NULL) && ok;
}

static void fill(char *p, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (char)(i * 7 + 3);
}

/* The pattern fill() wrote is still there. */
static int intact(const char *p, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != (char)(i * 7 + 3)) {
			tap_diag("data changed at %p+%zu", (const void *)p, i);
			return 0;
		}
	return 1;
}

static char *map_pages(size_t n, int prot)
{
	char *p = mmap(NULL, n * PAGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		printf("Bail out! mmap: %s\n", strerror(errno));
		exit(1);
	}
	fill(p, n * PAGE);
	if (prot != (PROT_READ | PROT_WRITE) && mprotect(p, n * PAGE, prot)) {
		printf("Bail out! mprotect: %s\n", strerror(errno));
		exit(1);
	}
	return p;
}

/* The permissions /proc/self/maps shows for @addr ("rw-p"), or "" if it
 * cannot tell. */
static const char *maps_perms(const void *addr)
{
	static char perms[8];
	char line[512];
	FILE *f = fopen("/proc/self/maps", "re");
	unsigned long lo, hi;

	perms[0] = '\0';
	if (!f)
		return perms;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 &&
		    lo <= (uintptr_t)addr && (uintptr_t)addr < hi)
			break;
		else
			perms[0] = '\0';
	fclose(f);
	return perms;
}

/* -------------------------------------------------------- environment */

struct env_res {
	int exited;
	int rc;			/* first pmg_init() */
	int rc2;		/* second pmg_init() */
	int rc_new;		/* pmg_domain_new() after it */
	int dnull;		/* *dp was cleared */
	int backend;		/* pmg_backend() */
	int mode;		/* pmg_get_fault_mode() */
	char msg[512];
};

static struct env_res *env_page;

/* Run pmg_init() in a fresh child with only NAME=VALUE pairs set. */
static struct env_res env_try(const char *const *kv)
{
	struct env_res *r = env_page;
	pid_t pid;
	int st;

	memset(r, 0, sizeof(*r));
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		struct pmg_domain *d = (struct pmg_domain *)&st;

		unsetenv("PMGUARD_BACKEND");
		unsetenv("PMGUARD_FAULT_MODE");
		unsetenv("PMGUARD_REPORT_FD");
		for (; kv[0]; kv += 2)
			setenv(kv[0], kv[1], 1);
		r->rc = pmg_init();
		snprintf(r->msg, sizeof(r->msg), "%s", pmg_errormsg());
		r->rc2 = pmg_init();
		r->backend = pmg_backend();
		r->mode = pmg_get_fault_mode();
		r->rc_new = pmg_domain_new(&d, "env-child", 0);
		r->dnull = d == NULL;
		_exit(0);
	}
	if (pid > 0) {
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		r->exited = WIFEXITED(st) && WEXITSTATUS(st) == 0;
	}
	return *r;
}

static int pku_rc = 1;
static char pku_msg[512];

static void test_env(void)
{
	static const char *const bad[][2] = {
		{ "PMGUARD_BACKEND", "bogus" },
		{ "PMGUARD_BACKEND", "" },
		{ "PMGUARD_FAULT_MODE", "STRICT" },
		{ "PMGUARD_FAULT_MODE", "strict " },
		{ "PMGUARD_REPORT_FD", "abc" },
		{ "PMGUARD_REPORT_FD", "-5" },
		{ "PMGUARD_REPORT_FD", "99999999999" },
		{ "PMGUARD_REPORT_FD", "3x" },
		{ "PMGUARD_MPROTECT_WINDOWS", "sometimes" },
		{ "PMGUARD_MPROTECT_WINDOWS", "Lazy" },
	};
	const char *good[] = { "PMGUARD_BACKEND", "mprotect",
			       "PMGUARD_FAULT_MODE", "audit",
			       "PMGUARD_REPORT_FD", "-1", NULL };
	const char *pku[] = { "PMGUARD_BACKEND", "pku", NULL };
	struct env_res r;
	int after = 1;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *kv[] = { bad[i][0], bad[i][1], NULL };
		char quoted[80];
		int ok = 1;

		r = env_try(kv);
		snprintf(quoted, sizeof(quoted), "'%s'", bad[i][1]);
		CHECK(ok, r.exited);
		CHECK(ok, r.rc == -EINVAL);
		CHECK(ok, strstr(r.msg, bad[i][0]) != NULL);
		CHECK(ok, strstr(r.msg, quoted) != NULL);
		if (!ok)
			tap_diag("rc %d, message '%s'", r.rc, r.msg);
		tap_ok(ok, "%s='%s': pmg_init() -EINVAL, message names the "
		       "variable and the value", bad[i][0], bad[i][1]);
		CHECK(after, r.rc2 == -EINVAL);
		CHECK(after, r.backend == PMG_BACKEND_NONE);
		CHECK(after, r.rc_new == -EINVAL && r.dnull);
	}
	tap_ok(after, "after a bad environment value: pmg_init() fails again, "
	       "backend none, pmg_domain_new() -EINVAL");

	r = env_try(good);
	tap_ok(r.exited && r.rc == 0 && r.backend == PMG_BACKEND_MPROTECT &&
	       r.mode == PMG_FAULT_AUDIT && r.rc_new == 0,
	       "valid values (mprotect, audit, -1) are accepted: init %d, "
	       "backend %d, mode %d", r.rc, r.backend, r.mode);

	r = env_try(pku);
	pku_rc = r.exited ? r.rc : 1;
	snprintf(pku_msg, sizeof(pku_msg), "%s", r.msg);
}

/* After init: PMGUARD_BACKEND=pku where PKU is missing. */
static void test_env_pku(void)
{
	struct pmg_info info;

	if (pmg_get_info(&info, sizeof(info))) {
		tap_ok(0, "PMGUARD_BACKEND=pku: pmg_get_info failed: %s",
		       pmg_errormsg());
		return;
	}
	if (info.cpu_pku && info.cpu_ospke) {
		tap_diag("PMGUARD_BACKEND=pku gave %d (%s)", pku_rc, pku_msg);
		tap_skip("PMGUARD_BACKEND=pku without PKU: -ENOTSUP naming "
			 "the variable", "this CPU and kernel have PKU");
		return;
	}
	if (pku_rc != -ENOTSUP || !strstr(pku_msg, "PMGUARD_BACKEND"))
		tap_diag("rc %d, message '%s'", pku_rc, pku_msg);
	tap_ok(pku_rc == -ENOTSUP && strstr(pku_msg, "PMGUARD_BACKEND"),
	       "PMGUARD_BACKEND=pku without PKU: -ENOTSUP, message names "
	       "PMGUARD_BACKEND");
}

/* ------------------------------------------------------------ domains */

static int keys_used(void)
{
	struct pmg_info info;

	return pmg_get_info(&info, sizeof(info)) ? -1 : info.keys_used;
}

static void test_domain_new(void)
{
	struct pmg_domain *d = NULL, *d2;
	int used0 = keys_used(), rc;
	const char *n32 = "abcdefghijklmnopqrstuvwxyz012345";
	const char *n31 = "abcdefghijklmnopqrstuvwxyz01234";

	rc = TRY(pmg_domain_new(NULL, "x", 0));
	tap_ok(err_is(rc, -EINVAL, "dp", NULL),
	       "domain_new(dp NULL): -EINVAL, message names dp");

	d = (struct pmg_domain *)&rc;
	rc = TRY(pmg_domain_new(&d, NULL, 0));
	tap_ok(err_is(rc, -EINVAL, "NULL", NULL) && !d,
	       "domain_new(name NULL): -EINVAL, message says NULL, *dp "
	       "cleared");

	d = (struct pmg_domain *)&rc;
	rc = TRY(pmg_domain_new(&d, "", 0));
	tap_ok(err_is(rc, -EINVAL, "''", "31") && !d,
	       "domain_new(\"\"): -EINVAL, message shows '' and the limit");

	rc = TRY(pmg_domain_new(&d, n32, 0));
	tap_ok(err_is(rc, -EINVAL, n32, "31") && !d,
	       "domain_new(32-character name): -EINVAL, message names it");

	rc = pmg_domain_new(&d, n31, 0);
	tap_ok(rc == 0 && d && !strcmp(pmg_domain_name(d), n31) &&
	       pmg_domain_delete(&d) == 0,
	       "domain_new(31-character name) is accepted");

	rc = TRY(pmg_domain_new(&d, "has blank", 0));
	tap_ok(err_is(rc, -EINVAL, "blank", "offset 3") && !d,
	       "domain_new(\"has blank\"): -EINVAL, message gives offset 3");

	{
		int ok;

		rc = TRY(pmg_domain_new(&d, "tab\there", 0));
		ok = err_is(rc, -EINVAL, "offset 3", NULL) && !d;
		rc = TRY(pmg_domain_new(&d, "ctl\x01", 0));
		ok &= err_is(rc, -EINVAL, "offset 3", NULL) && !d;
		rc = TRY(pmg_domain_new(&d, "del\x7f", 0));
		ok &= err_is(rc, -EINVAL, "offset 3", NULL) && !d;
		rc = TRY(pmg_domain_new(&d, "hi\xc3\xa9", 0));
		ok &= err_is(rc, -EINVAL, "offset 2", NULL) && !d;
		tap_ok(ok, "domain_new with tab, \\x01, DEL, UTF-8: -EINVAL "
		       "with the offset");
	}

	{
		int ok;

		rc = TRY(pmg_domain_new(&d, "flags", 4));
		ok = err_is(rc, -EINVAL, "flags", "0x4") && !d;
		rc = TRY(pmg_domain_new(&d, "flags", 0x80000001u));
		ok &= err_is(rc, -EINVAL, "0x80000000", NULL) && !d;
		tap_ok(ok, "domain_new with unknown flags: -EINVAL, message "
		       "names the unknown bits");
	}

	rc = pmg_domain_new(&d, "dup", 0);
	if (rc)
		tap_diag("domain_new(dup): %s", pmg_errormsg());
	d2 = (struct pmg_domain *)&rc;
	rc = TRY(pmg_domain_new(&d2, "dup", PMG_DOMAIN_NOACCESS));
	tap_ok(err_is(rc, -EEXIST, "'dup'", NULL) && !d2 && d &&
	       pmg_domain_key(d) > 0 && !strcmp(pmg_domain_name(d), "dup"),
	       "domain_new of a live name: -EEXIST naming it, the first "
	       "domain untouched");
	pmg_domain_delete(&d);

	tap_ok(keys_used() == used0, "failed domain_new calls hold no key "
	       "(%d used, %d before)", keys_used(), used0);
}

static void test_exhaustion(void)
{
	static struct pmg_domain *v[PMG_DOMAINS_MAX];
	struct pmg_domain *d[16], *x;
	char name[16], want[40], msg[600];
	int n, i, rc = 0, listed = 1, nv, keyed = 0;
	bool pku = pmg_backend() == PMG_BACKEND_PKU;

	memset(d, 0, sizeof(d));
	if (!pku) {
		tap_skip("key exhaustion: a pinned domain gets -ENOSPC once "
			 "no key is left",
			 "mprotect: no hardware keys, "
			 "PMG_DOMAIN_PINNED takes none");
		tap_skip("the -ENOSPC message says how many keys exist and "
			 "are held",
			 "mprotect: no hardware keys");
		tap_skip("the -ENOSPC message lists every holder with its key",
			 "mprotect: no hardware keys");
		n = 0;
		goto virtual;
	}
	/* pinned: a key for life, or -ENOSPC */
	for (n = 0; n < 16; n++) {
		snprintf(name, sizeof(name), "ks%02d", n + 1);
		rc = TRY(pmg_domain_new(&d[n], name, PMG_DOMAIN_PINNED));
		if (rc)
			break;
	}
	snprintf(msg, sizeof(msg), "%s", pmg_errormsg());
	snprintf(want, sizeof(want), "'%s'", name);
	tap_ok(n >= 1 && n < 16 &&
		       err_is(rc, -ENOSPC,
			      "no protection key "
			      "for",
			      want) &&
		       !d[n],
	       "key exhaustion: a pinned domain gets -ENOSPC after %d, "
	       "naming the one refused, *dp cleared",
	       n);

	snprintf(want, sizeof(want), "%d of 15 keys", n);
	if (!strstr(msg, want))
		tap_diag("message '%s' lacks '%s'", msg, want);
	tap_ok(strstr(msg, want) != NULL,
	       "the -ENOSPC message says how many keys exist and are held "
	       "('%s')", want);

	for (i = 0; i < n; i++) {
		snprintf(want, sizeof(want), "ks%02d (key %d, pinned)", i + 1,
			 pmg_domain_key(d[i]));
		if (!strstr(msg, want)) {
			tap_diag("holder '%s' not listed", want);
			listed = 0;
		}
	}
	tap_ok(listed, "the -ENOSPC message lists every holder with its key");
	for (i = 0; i < n; i++)
		pmg_domain_delete(&d[i]);

	virtual :
		/* past the keys: virtual domains (PKU), page protection all along
	 * (mprotect), up to PMG_DOMAINS_MAX live */
		memset(v, 0, sizeof(v));
	for (nv = 0; nv < PMG_DOMAINS_MAX; nv++) {
		snprintf(name, sizeof(name), "v%04d", nv);
		rc = TRY(pmg_domain_new(&v[nv], name, 0));
		if (rc)
			break;
		keyed += pmg_domain_key(v[nv]) > 0 &&
			 (!pku || pmg_domain_key(v[nv]) < 16);
	}
	snprintf(msg, sizeof(msg), "%s", pmg_errormsg());
	tap_diag("%d domains before %s ('%s'), %d with a key", nv,
		 strerror(-rc), msg, keyed);
	tap_ok(rc == -ENOSPC && strstr(msg, "no room") && !v[nv] &&
		       nv == PMG_DOMAINS_MAX - 1 &&
		       (pku ? keyed >= 1 && keyed <= 15 : keyed == nv),
	       "domains past the keys: %d live (PMG_DOMAINS_MAX - 1), %s; "
	       "the next -ENOSPC 'no room'",
	       nv,
	       pku ? "those without a key say -ENOKEY"
		   : "each with its own number");
	for (i = 0; i < nv; i++)
		pmg_domain_delete(&v[i]);
	rc = pmg_domain_new(&x, "after-exhaustion", 0);
	tap_ok(rc == 0 && keys_used() == (pku ? 1 : 0) &&
		       pmg_domain_key(x) > 0 && pmg_domain_delete(&x) == 0,
	       "after deleting them all, keys are free again");
}

static void test_domain_delete(void)
{
	struct pmg_domain *d = NULL, *stale, **none = NULL;
	char *p = map_pages(1, PROT_READ | PROT_WRITE);
	void *base = NULL;
	int rc, ok;

	tap_ok(pmg_domain_delete(none) == 0 && pmg_domain_delete(&d) == 0,
	       "domain_delete(NULL) and of a NULL handle: 0");

	ok = 1;
	CHECK(ok, pmg_domain_new(&d, "del-busy", 0) == 0);
	CHECK(ok, pmg_protect(d, p, PAGE) == 0);
	rc = TRY(pmg_domain_delete(&d));
	tap_ok(ok && err_is(rc, -EBUSY, "'del-busy'", "1 range") && d &&
	       pmg_domain_key(d) > 0 && pmg_lookup(p, &base, NULL) == d &&
	       base == p && intact(p, PAGE),
	       "domain_delete with a protected range: -EBUSY naming the "
	       "domain; domain, range, data kept");

	ok = 1;
	CHECK(ok, pmg_unprotect(p, PAGE) == 0);
	stale = d;
	CHECK(ok, pmg_domain_delete(&d) == 0 && d == NULL);
	CHECK(ok, pmg_domain_delete(&d) == 0);
	tap_ok(ok, "domain_delete clears *dp; deleting through it again is "
	       "a no-op (0)");

	rc = TRY(pmg_domain_delete(&stale));
	tap_ok(err_is(rc, -EINVAL, "live", NULL) && stale,
	       "domain_delete of a stale handle: -EINVAL, message says not "
	       "live");

	tap_ok(pmg_domain_key(NULL) == -EINVAL &&
	       pmg_domain_key(stale) == -EINVAL &&
	       pmg_domain_name(NULL) == NULL && pmg_domain_name(stale) == NULL,
	       "domain_key/domain_name of NULL and of a stale handle: "
	       "-EINVAL / NULL");

	rc = TRY(pmg_domain_set_callback(NULL, NULL, NULL));
	ok = err_is(rc, -EINVAL, "domain", NULL);
	rc = TRY(pmg_domain_set_callback(stale, NULL, NULL));
	ok &= err_is(rc, -EINVAL, "domain", NULL);
	tap_ok(ok, "domain_set_callback on NULL and on a stale handle: "
	       "-EINVAL with a message");

	/* A stale handle with a fresh range: nothing may be registered. */
	rc = TRY(pmg_protect(stale, p, PAGE));
	tap_ok(err_is(rc, -EINVAL, "domain", NULL) &&
	       !pmg_lookup(p, NULL, NULL) && intact(p, PAGE),
	       "protect with a deleted domain: -EINVAL, nothing registered");

	/* The slot reused by a newer domain: the stale handle is not it. */
	{
		struct pmg_domain *newer = NULL;

		ok = pmg_domain_new(&newer, "bad-reuse", 0) == 0 &&
		     newer != stale;
		rc = TRY(pmg_domain_delete(&stale));
		ok &= err_is(rc, -EINVAL, "live", NULL);
		ok &= pmg_domain_key(newer) > 0 &&
		      !strcmp(pmg_domain_name(newer), "bad-reuse");
		ok &= pmg_domain_delete(&newer) == 0;
		tap_ok(ok, "a stale handle whose key was reused cannot delete "
		       "the newer domain");
	}
	munmap(p, PAGE);
}

/* ------------------------------------------------------------- ranges */

static int write_ro(void *arg)
{
	*(volatile char *)arg = 1;
	return 0;
}

static void test_protect(struct pmg_domain *d)
{
	char *p = map_pages(4, PROT_READ | PROT_WRITE), *hole, *ro;
	char want[64];
	void *base = NULL;
	size_t len = 0;
	int rc, ok, st;

	rc = TRY(pmg_protect(NULL, p, PAGE));
	tap_ok(err_is(rc, -EINVAL, "domain", NULL) &&
	       !pmg_lookup(p, NULL, NULL) && intact(p, 4 * PAGE),
	       "protect(NULL domain): -EINVAL, nothing registered");

	snprintf(want, sizeof(want), "%p", (void *)(p + 1));
	rc = TRY(pmg_protect(d, p + 1, PAGE));
	tap_ok(err_is(rc, -EINVAL, want, NULL) &&
	       !pmg_lookup(p, NULL, NULL) && intact(p, 4 * PAGE),
	       "protect(unaligned address): -EINVAL naming the address");

	rc = TRY(pmg_protect(d, p, PAGE + 1));
	tap_ok(err_is(rc, -EINVAL, "4097", NULL) &&
	       !pmg_lookup(p, NULL, NULL) && intact(p, 4 * PAGE),
	       "protect(unaligned length 4097): -EINVAL naming the length");

	rc = TRY(pmg_protect(d, p, 0));
	tap_ok(err_is(rc, -EINVAL, ", 0)", NULL) &&
	       !pmg_lookup(p, NULL, NULL) && intact(p, 4 * PAGE),
	       "protect(zero length): -EINVAL naming the length");

	rc = TRY(pmg_protect(d, p, (size_t)0 - PAGE));
	ok = err_is(rc, -EINVAL, "wraps", NULL);
	rc = TRY(pmg_protect(d, p, (size_t)0 - (uintptr_t)p));
	ok &= err_is(rc, -EINVAL, "wraps", NULL);
	tap_ok(ok && !pmg_lookup(p, NULL, NULL) && intact(p, 4 * PAGE),
	       "protect of a range that wraps (or ends at 2^64): -EINVAL");

	/* A hole in the middle of a mapping. */
	hole = map_pages(3, PROT_READ | PROT_WRITE);
	munmap(hole + PAGE, PAGE);
	snprintf(want, sizeof(want), "%#lx", (unsigned long)(hole + PAGE));
	rc = TRY(pmg_protect(d, hole, 3 * PAGE));
	tap_ok(err_is(rc, -ENOMEM, want, NULL) &&
	       !pmg_lookup(hole, NULL, NULL) &&
	       !pmg_lookup(hole + 2 * PAGE, NULL, NULL) &&
	       intact(hole, PAGE) && !strncmp(maps_perms(hole), "rw", 2),
	       "protect over an unmapped hole: -ENOMEM naming the hole, the "
	       "mapped pages untouched");
	munmap(hole, PAGE);
	munmap(hole + 2 * PAGE, PAGE);

	/* A read-only mapping must not be upgraded. */
	ro = map_pages(1, PROT_READ);
	rc = TRY(pmg_protect(d, ro, PAGE));
	tap_ok(err_is(rc, -EACCES, "r--", NULL) &&
	       !pmg_lookup(ro, NULL, NULL) && intact(ro, PAGE),
	       "protect of a read-only mapping: -EACCES, message shows its "
	       "permissions");
	st = tap_child(write_ro, ro);
	ok = WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV && intact(ro, PAGE);
	if (maps_perms(ro)[0]) {
		CHECK(ok, !strcmp(maps_perms(ro), "r--p"));
	} else {
		tap_diag("no /proc/self/maps: only the write was checked");
	}
	tap_ok(ok, "the mapping stays read-only: '%s', a write kills a child "
	       "with SIGSEGV", maps_perms(ro));
	munmap(ro, PAGE);

	/* Overlaps with [p + 1 page, p + 3 pages). */
	ok = pmg_protect(d, p + PAGE, 2 * PAGE) == 0;
	if (!ok)
		tap_diag("protect: %s", pmg_errormsg());
	rc = TRY(pmg_protect(d, p + PAGE, 2 * PAGE));
	tap_ok(ok && err_is(rc, -EEXIST, "overlaps", NULL) &&
	       intact(p, 4 * PAGE),
	       "protect of the same range again: -EEXIST (full overlap)");
	rc = TRY(pmg_protect(d, p, 2 * PAGE));
	tap_ok(err_is(rc, -EEXIST, "overlaps", NULL) &&
	       !pmg_lookup(p, NULL, NULL) && intact(p, 4 * PAGE),
	       "protect overlapping the start of a range: -EEXIST (partial)");
	rc = TRY(pmg_protect(d, p + 2 * PAGE, 2 * PAGE));
	tap_ok(err_is(rc, -EEXIST, "overlaps", NULL) &&
	       !pmg_lookup(p + 3 * PAGE, NULL, NULL) && intact(p, 4 * PAGE),
	       "protect overlapping the end of a range: -EEXIST (partial)");
	rc = TRY(pmg_protect(d, p, 4 * PAGE));
	tap_ok(err_is(rc, -EEXIST, "overlaps", NULL) &&
	       pmg_lookup(p + PAGE, &base, &len) == d && base == p + PAGE &&
	       len == 2 * PAGE && intact(p, 4 * PAGE),
	       "protect enclosing a range: -EEXIST, the range unchanged");

	/* ---- unprotect ---- */
	snprintf(want, sizeof(want), "%p", (void *)p);
	rc = TRY(pmg_unprotect(p, PAGE));
	tap_ok(err_is(rc, -ENOENT, want, NULL),
	       "unprotect of a range never protected: -ENOENT naming it");

	rc = TRY(pmg_unprotect(p + PAGE, PAGE));
	ok = err_is(rc, -ENOENT, NULL, NULL);
	rc = TRY(pmg_unprotect(p + PAGE, 3 * PAGE));
	ok &= err_is(rc, -ENOENT, NULL, NULL);
	rc = TRY(pmg_unprotect(p + 2 * PAGE, PAGE));
	ok &= err_is(rc, -ENOENT, NULL, NULL);
	tap_ok(ok && pmg_lookup(p + PAGE, &base, &len) == d &&
	       base == p + PAGE && len == 2 * PAGE,
	       "unprotect with a wrong length or start: -ENOENT, the range "
	       "stays protected");

	rc = TRY(pmg_unprotect(p, 0));
	ok = err_is(rc, -EINVAL, NULL, NULL);
	rc = TRY(pmg_unprotect(p, (size_t)0 - PAGE));
	ok &= err_is(rc, -EINVAL, NULL, NULL);
	tap_ok(ok, "unprotect with zero length or a wrapping range: -EINVAL");

	/* ---- lookup at the edges of [p + PAGE, p + 3 PAGE) ---- */
	base = NULL;
	len = 0;
	tap_ok(pmg_lookup(p + PAGE, &base, &len) == d && base == p + PAGE &&
	       len == 2 * PAGE, "lookup(base) gives the domain, base and "
	       "length");
	tap_ok(pmg_lookup(p + 3 * PAGE - 1, NULL, NULL) == d,
	       "lookup(base + len - 1) gives the domain");
	tap_ok(!pmg_lookup(p + 3 * PAGE, &base, &len) &&
	       !pmg_lookup(p + PAGE - 1, NULL, NULL),
	       "lookup(base + len) and lookup(base - 1): NULL");
	tap_ok(!pmg_lookup(NULL, NULL, NULL) && !pmg_lookup(p, NULL, NULL) &&
	       !pmg_lookup((void *)UINTPTR_MAX, NULL, NULL),
	       "lookup of NULL, an unprotected page, UINTPTR_MAX: NULL");

	ok = pmg_unprotect(p + PAGE, 2 * PAGE) == 0;
	rc = TRY(pmg_unprotect(p + PAGE, 2 * PAGE));
	tap_ok(ok && err_is(rc, -ENOENT, NULL, NULL) &&
	       !pmg_lookup(p + PAGE, NULL, NULL) && intact(p, 4 * PAGE),
	       "unprotect twice: 0, then -ENOENT; data intact");
	munmap(p, 4 * PAGE);
}

/* ------------------------------------------------------------ windows */

/*
 * The verdict of a check whose probes need audit mode's re-arm after a
 * fault (a single step): valgrind cannot run that, so there it says SKIP.
 */
static void tap_ok_rearm(int ok, const char *name)
{
	if (pmg_under_valgrind())
		tap_skip(name, PMG_VALGRIND_WHY);
	else
		tap_ok(ok, "%s", name);
}

static void test_windows(void)
{
	struct pmg_domain *d = NULL, *stale = NULL, *gone = NULL;
	struct pmg_stats st0, st1;
	char *p = map_pages(1, PROT_READ | PROT_WRITE);
	char rep[1024];
	int rc, ok, i, fds[2];
	ssize_t n;

	if (pmg_domain_new(&d, "win", 0) || pmg_protect(d, p, PAGE) ||
	    pmg_domain_new(&gone, "win-gone", 0)) {
		printf("Bail out! window domain: %s\n", pmg_errormsg());
		exit(1);
	}
	stale = gone;
	pmg_domain_delete(&gone);
	probe_begin();

	ok = open_close_einval(NULL, PMG_WRITE, PMG_WRITE, "NULL");
	tap_ok(ok, "open/close on a NULL domain: -EINVAL, message says "
	       "NULL");

	ok = open_close_einval(stale, PMG_WRITE, PMG_READ, "live");
	tap_ok(ok, "open/close on a deleted domain: -EINVAL, message says "
	       "not live");

	/*
	 * A copy of a live handle, and a forged one whose key no live domain
	 * has: both backends refuse them (the PKU fast path used to take
	 * them, write-enabling the key).
	 */
	{
		struct pmg_domain copy = *d, forged = *d;
		int k = pmg_domain_key(d) == 15 ? 14 : 15;

		forged._key = k;
		forged._mask = 3u << (2 * k);
		forged._rd_bits = 0;
		forged._dflt_bits = 2u << (2 * k);
		rc = TRY(pmg_open(&copy, PMG_WRITE));
		ok = err_is(rc, -EINVAL, "live", NULL);
		CHECK(ok, probe(d, p, PMG_WRITE) == 1);
		rc = TRY(pmg_close(&copy, PMG_WRITE));
		ok &= err_is(rc, -EINVAL, "live", NULL);
		rc = TRY(pmg_open(&copy, PMG_READ));
		ok &= err_is(rc, -EINVAL, "live", NULL);
		tap_ok_rearm(ok, "open/close on a copy of a live handle: "
			     "-EINVAL, memory still write-protected");
		ok = open_close_einval(&forged, PMG_WRITE, PMG_WRITE, "live");
		CHECK(ok, probe(d, p, PMG_WRITE) == 1);
		tap_diag("forged handle: key %d", k);
		tap_ok_rearm(ok, "open/close on a forged handle (a key with "
			     "no live domain): -EINVAL");
	}

	ok = 1;
	for (i = 0; i < 4; i++) {
		static const int kinds[] = { 2, -1, 3, 0x100 };

		ok &= open_close_einval(d, kinds[i], kinds[i], "kind");
	}
	ok = ok && probe(d, p, PMG_WRITE) == 1 && probe(d, p, PMG_READ) == 0;
	tap_ok_rearm(ok, "open/close with kind 2, -1, 3, 0x100: -EINVAL, "
		     "memory still write-protected");

	/* Unbalanced closes, with the report captured. */
	ok = pipe(fds) == 0;
	if (ok) {
		fcntl(fds[0], F_SETFL, O_NONBLOCK);
		pmg_set_report_fd(fds[1]);
	}
	pmg_stats_get(&st0, sizeof(st0));
	rc = TRY(pmg_close(d, PMG_WRITE));
	ok &= err_is(rc, -EPERM, "unbalanced", NULL);
	rc = TRY(pmg_close(d, PMG_READ));
	ok &= err_is(rc, -EPERM, "unbalanced", NULL);
	pmg_stats_get(&st1, sizeof(st1));
	tap_ok(ok, "unbalanced close (write, read): -EPERM with a message");
	tap_ok(st1.unbalanced == st0.unbalanced + 2,
	       "stats.unbalanced counts both (%llu -> %llu)",
	       (unsigned long long)st0.unbalanced,
	       (unsigned long long)st1.unbalanced);
	pmg_set_report_fd(-1);
	n = read(fds[0], rep, sizeof(rep) - 1);
	rep[n > 0 ? n : 0] = '\0';
	tap_ok(strstr(rep, "unbalanced write window close on domain 'win'") &&
	       strstr(rep, "unbalanced read window close"),
	       "each unbalanced close is reported on the report fd with the "
	       "domain name");
	close(fds[0]);
	close(fds[1]);

	ok = 1;
	CHECK(ok, pmg_open(d, PMG_WRITE) == 0);
	CHECK(ok, probe(d, p, PMG_WRITE) == 0);
	CHECK(ok, pmg_close(d, PMG_WRITE) == 0);
	CHECK(ok, probe(d, p, PMG_WRITE) == 1);
	CHECK(ok, probe(d, p, PMG_READ) == 0);
	CHECK(ok, pmg_close(d, PMG_WRITE) == -EPERM);
	tap_ok(ok, "after unbalanced closes: open/close pair works, memory "
	       "protected after it, counts not underflowed");

	/* Nesting beyond 65535. */
	ok = 1;
	for (i = 0, rc = 0; i < 65535 && !rc; i++)
		rc = pmg_open(d, PMG_WRITE);
	CHECK(ok, rc == 0 && i == 65535);
	rc = TRY(pmg_open(d, PMG_WRITE));
	tap_ok(ok && rc == -EOVERFLOW, "the 65536th nested open: -EOVERFLOW "
	       "(got %d)", rc);
	tap_ok(err_is(rc, -EOVERFLOW, "65535", NULL),
	       "the -EOVERFLOW sets a message naming the limit");
	ok = 1;
	for (i = 0, rc = 0; i < 65535 && !rc; i++)
		rc = pmg_close(d, PMG_WRITE);
	CHECK(ok, rc == 0);
	CHECK(ok, probe(d, p, PMG_WRITE) == 1);
	CHECK(ok, pmg_close(d, PMG_WRITE) == -EPERM);
	tap_ok(ok, "65535 closes undo 65535 opens: protected again, one "
	       "more close -EPERM");

	/* map_local on addresses nobody protects. */
	pmg_stats_get(&st0, sizeof(st0));
	rc = TRY(pmg_map_local(p + PAGE, PMG_WRITE));
	ok = rc == 0;
	ok &= pmg_unmap_local(p + PAGE, PMG_WRITE) == 0;
	ok &= pmg_map_local(NULL, PMG_READ) == 0;
	ok &= pmg_unmap_local(NULL, PMG_READ) == 0;
	ok &= pmg_map_local(NULL, 7) == 0;
	ok &= pmg_map(NULL) == 0 && pmg_map(p + PAGE) == 0;
	pmg_stats_get(&st1, sizeof(st1));
	tap_ok(ok && st1.long_term_maps == st0.long_term_maps &&
	       st1.unbalanced == st0.unbalanced,
	       "map_local/unmap_local/map on unprotected addresses: 0, "
	       "nothing counted");

	rc = TRY(pmg_map_local(p, 2));
	ok = err_is(rc, -EINVAL, "kind", NULL);
	rc = TRY(pmg_unmap_local(p, PMG_WRITE));
	ok &= err_is(rc, -EPERM, "unbalanced", NULL);
	ok = ok && probe(d, p, PMG_WRITE) == 1;
	tap_ok_rearm(ok, "map_local(protected, kind 2) -EINVAL; unmap_local "
		     "without a window -EPERM; still protected");

	probe_end();
	pmg_set_report_fd(-1);
	pmg_unprotect(p, PAGE);
	pmg_domain_delete(&d);
	munmap(p, PAGE);
}

/* --------------------------------------------------------------- misc */

/* The size arguments (pmguard.h, "Sizes"): nonsense is -EINVAL with a
 * message; the struct is left alone. */
static void test_sizes(void)
{
	union {
		struct pmg_stats s;
		struct pmg_key_stats k;
		struct pmg_info i;
		struct pmg_persist_info p;
		unsigned char b[512];
	} u;
	int ok = 1;

	memset(&u, 0x5a, sizeof(u));
	ok &= err_is(pmg_get_info(&u.i, 3), -EINVAL, "pmg_get_info: size 3",
		     NULL);
	ok &= err_is(pmg_key_stats_get(&u.k, 71), -EINVAL,
		     "pmg_key_stats_get: size 71", NULL);
	ok &= err_is(pmg_persist_get_info(&u.p, 100000), -EINVAL,
		     "pmg_persist_get_info: size 100000", NULL);
	ok &= err_is(pmg_stats_get(&u.s, 0), -EINVAL, "size smaller", NULL);
	ok &= err_is(pmg_stats_get(&u.s, 65537), -EINVAL, "size over", NULL);
	ok &= u.b[0] == 0x5a && u.b[511] == 0x5a;
	ok &= pmg_stats_get(&u.s, sizeof(u)) == 0 && u.b[511] == 0 &&
	      pmg_key_stats_get(&u.k, sizeof(u.k)) == 0;
	tap_ok(ok, "info/stats sizes: below the first struct or over 65536 "
		   "is -EINVAL naming the size, the struct untouched; a larger "
		   "size gets its tail zeroed");
}

static void test_misc(void)
{
	int rc, ok;

	/* prime() uses pmg_set_fault_mode(): leave another message here */
	ok = pmg_set_fault_mode(PMG_FAULT_RELAXED) == 0;
	(void)pmg_get_info(NULL, sizeof(struct pmg_info));
	snprintf(sentinel, sizeof(sentinel), "%s", pmg_errormsg());
	rc = pmg_set_fault_mode(99);
	ok &= err_is(rc, -EINVAL, "fault mode", NULL);
	(void)pmg_get_info(NULL, sizeof(struct pmg_info));
	rc = pmg_set_fault_mode(-1);
	ok &= err_is(rc, -EINVAL, "fault mode", NULL);
	tap_ok(ok && pmg_get_fault_mode() == PMG_FAULT_RELAXED,
	       "set_fault_mode(99), (-1): -EINVAL, mode unchanged");
	prime();
	snprintf(sentinel, sizeof(sentinel), "%s", pmg_errormsg());

	rc = TRY(pmg_stats_get(NULL, sizeof(struct pmg_stats)));
	tap_ok(rc == -EINVAL, "stats_get(NULL): -EINVAL");
	tap_ok(err_is(rc, -EINVAL, NULL, NULL),
	       "stats_get(NULL) sets a message");

	rc = TRY(pmg_get_info(NULL, sizeof(struct pmg_info)));
	tap_ok(err_is(rc, -EINVAL, "info", NULL),
	       "get_info(NULL): -EINVAL, message names info");
	test_sizes();
}

int main(void)
{
	env_page = tap_shared_page();
	tap_init(PLAN);
	if (!env_page) {
		printf("Bail out! no shared page\n");
		return 1;
	}
	/* First, while this process has not initialised the library. */
	test_env();

	if (pmg_init()) {
		printf("Bail out! pmg_init: %s\n", pmg_errormsg());
		return 1;
	}
	tap_diag("backend: %s", pmg_backend_name(pmg_backend()));
	pmg_set_report_fd(-1);
	prime();
	snprintf(sentinel, sizeof(sentinel), "%s", pmg_errormsg());

	test_env_pku();
	test_domain_new();
	test_exhaustion();
	test_domain_delete();
	{
		struct pmg_domain *d = NULL;

		if (pmg_domain_new(&d, "bad-prot", 0)) {
			printf("Bail out! %s\n", pmg_errormsg());
			return 1;
		}
		test_protect(d);
		pmg_domain_delete(&d);
	}
	test_windows();
	test_misc();
	return tap_done();
}
