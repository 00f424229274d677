// SPDX-License-Identifier: MIT
/*
 * The stray-write campaign, for real: runs `pmguard inject ... --json`
 * (the CLI named by $PMGUARD_CLI, else `pmguard` from PATH, else
 * build/pmguard) and checks the promises on whatever backend it
 * runs on:
 *  - audit: every stray write caught except those the backend cannot
 *    catch by design (mprotect: another thread's write during a window;
 *    none on PKU), no silent corruption, no false positive, and the
 *    corrupted records are exactly the reported ones;
 *  - off, same seed: the same records corrupted, nothing caught;
 *    reproducible by seed;
 *  - strict, 200 trials: every pool verifies clean on reopen (apart from
 *    by-design misses on mprotect);
 *  - relaxed: reported once per domain, no false positive;
 *  - bad options: exit 2 with a message naming the bad value.
 * Sized to stay well under a minute in the QEMU TCG guest.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "tap.h"

#define SEED "7"

static char cli[4096];

static bool executable(const char *p)
{
	struct stat st;

	return !stat(p, &st) && S_ISREG(st.st_mode) && !access(p, X_OK);
}

/* $PMGUARD_CLI, else pmguard in PATH, else build/pmguard; false if none. */
static bool find_cli(void)
{
	const char *e = getenv("PMGUARD_CLI"), *path = getenv("PATH");

	if (e && *e) {
		snprintf(cli, sizeof(cli), "%s", e);
		return executable(cli);
	}
	while (path && *path) {
		size_t n = strcspn(path, ":");

		snprintf(cli, sizeof(cli), "%.*s/pmguard", (int)n, path);
		if (n && executable(cli))
			return true;
		path += n + (path[n] == ':');
	}
	snprintf(cli, sizeof(cli), "build/pmguard");
	return executable(cli);
}

struct run {
	int status;		/* exit status, or -1 (signal, exec) */
	char out[16384];
	char err[4096];
};

static void slurp(int fd, char *buf, size_t size)
{
	size_t got = 0;
	ssize_t n;

	lseek(fd, 0, SEEK_SET);
	while (got < size - 1 && (n = read(fd, buf + got, size - 1 - got)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
}

static int tmpfd(void)
{
	const char *d = getenv("TMPDIR");
	char p[4200];
	int fd;

	snprintf(p, sizeof(p), "%s/pmg-test-inject-XXXXXX",
		 d && *d ? d : "/tmp");
	fd = mkstemp(p);
	if (fd >= 0)
		unlink(p);
	return fd;
}

/* Run the CLI with "inject" and @args (NULL-terminated). */
static void run_inject(struct run *r, const char *const *args)
{
	const char *argv[32];
	int o = tmpfd(), e = tmpfd(), n = 0, st;
	pid_t pid;

	argv[n++] = cli;
	argv[n++] = "inject";
	while (*args && n < 31)
		argv[n++] = *args++;
	argv[n] = NULL;
	r->status = -1;
	r->out[0] = r->err[0] = '\0';
	if (o < 0 || e < 0)
		return;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		dup2(o, 1);
		dup2(e, 2);
		execv(cli, (char *const *)argv);
		_exit(127);
	}
	if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st))
		r->status = WEXITSTATUS(st);
	slurp(o, r->out, sizeof(r->out));
	slurp(e, r->err, sizeof(r->err));
	close(o);
	close(e);
}

/* The number after "@key": in @json (from @from if not NULL), or -1. */
static long long num_in(const char *json, const char *from, const char *key)
{
	char k[64];
	const char *p;

	snprintf(k, sizeof(k), "\"%s\": ", key);
	p = strstr(from ? from : json, k);
	if (!p)
		return -1;
	return strtoll(p + strlen(k), NULL, 10);
}

static long long num(const struct run *r, const char *key)
{
	return num_in(r->out, NULL, key);
}

static long long bug_num(const struct run *r, const char *bug,
			 const char *key)
{
	char k[64];
	const char *p;

	snprintf(k, sizeof(k), "\"%s\": {", bug);
	p = strstr(r->out, k);
	return p ? num_in(r->out, p, key) : -1;
}

static void backend_of(const struct run *r, char *buf, size_t size)
{
	const char *p = strstr(r->out, "\"backend\": \"");

	buf[0] = '\0';
	if (p)
		snprintf(buf, size, "%.*s", (int)strcspn(p + 12, "\""),
			 p + 12);
}

/* A complete JSON object from a campaign that ran. */
static bool ran(const struct run *r, const char *what)
{
	bool ok = r->status == 0 && num(r, "injected") >= 0 &&
		  num(r, "elapsed_s") >= 0 && strstr(r->out, "\"by_bug\"") &&
		  num(r, "trials_failed") == 0;

	if (!ok)
		tap_diag("%s: status %d, stderr: %.300s, stdout: %.300s",
			 what, r->status, r->err, r->out);
	return ok;
}

static void show(const struct run *r, const char *what)
{
	const char *e = strstr(r->out, "\"elapsed_s\": ");

	tap_diag("%s: injected %lld caught %lld missed %lld missed_by_design "
		 "%lld corrupted %lld (by design %lld) silent %lld false+ "
		 "%lld skipped %lld, %.1f s", what, num(r, "injected"),
		 num(r, "caught"), num(r, "missed"),
		 num(r, "missed_by_design"), num(r, "corrupted_records"),
		 num(r, "corrupted_by_design"), num(r, "silent_corruptions"),
		 num(r, "false_positives"), num(r, "skipped"),
		 e ? strtod(e + 13, NULL) : -1.0);
}

static struct run audit, off, off2, strict, relaxed;

static void test_audit(bool pku)
{
	long long inj, mbd;

	run_inject(&audit, (const char *const[]){ "--writes", "20000",
		   "--threads", "4", "--mode", "audit", "--seed", SEED,
		   "--json", NULL });
	if (!tap_ok(ran(&audit, "audit"), "audit campaign, 20000 stray "
		    "writes, 4 threads: ran, JSON complete")) {
		for (int i = 0; i < 4; i++)
			tap_skip("audit checks", "the campaign did not run");
		return;
	}
	show(&audit, "audit");
	inj = num(&audit, "injected");
	mbd = num(&audit, "missed_by_design");
	tap_ok(inj > 0 && inj + num(&audit, "skipped") == 20000 &&
	       num(&audit, "skipped") <= 200 &&
	       num(&audit, "caught") == inj - mbd &&
	       num(&audit, "missed") == 0, "audit: caught == injected - "
	       "missed_by_design (%lld == %lld - %lld), missed 0",
	       num(&audit, "caught"), inj, mbd);
	if (pku)
		tap_ok(mbd == 0 && num(&audit, "corrupted_by_design") == 0 &&
		       num(&audit, "caught") == inj, "audit on pku: nothing "
		       "missed by design, caught == injected");
	else
		tap_ok(mbd > 0 && mbd == bug_num(&audit, "xthread",
						 "injected") &&
		       bug_num(&audit, "xthread", "caught") == 0 &&
		       bug_num(&audit, "wild", "missed_by_design") == 0 &&
		       bug_num(&audit, "overflow", "missed_by_design") == 0 &&
		       bug_num(&audit, "stale", "missed_by_design") == 0,
		       "audit on mprotect: exactly the writes from another "
		       "thread during a window are missed by design (%lld), "
		       "none counted as caught", mbd);
	tap_ok(num(&audit, "silent_corruptions") == 0 &&
	       num(&audit, "false_positives") == 0 &&
	       num(&audit, "wrong_address") == 0 &&
	       num(&audit, "unexplained_corruptions") == 0 &&
	       num(&audit, "lost_records") == 0,
	       "audit: no silent corruption, no false positive, every "
	       "report at the stray address");
	tap_ok(num(&audit, "corrupted_records") > 0 &&
	       num(&audit, "reported_intact") == 0 &&
	       num(&audit, "corrupted_records") -
			       num(&audit, "corrupted_by_design") ==
		       num(&audit, "reported_records"),
	       "audit: the corrupted records are exactly the reported ones "
	       "(%lld)", num(&audit, "reported_records"));
}

static void test_off(void)
{
	const char *const args[] = { "--writes", "20000", "--threads", "4",
				     "--mode", "off", "--seed", SEED,
				     "--json", NULL };

	run_inject(&off, args);
	if (!ran(&off, "off")) {
		tap_ok(0, "off: the campaign ran");
		tap_skip("off: reproducible", "the campaign did not run");
		return;
	}
	show(&off, "off");
	tap_ok(num(&off, "caught") == 0 && num(&off, "corrupted_records") > 0 &&
	       num(&off, "silent_corruptions") ==
		       num(&off, "corrupted_records") &&
	       (audit.status != 0 || num(&off, "corrupted_records") ==
					     num(&audit, "corrupted_records")),
	       "off, same seed: %lld records corrupted (audit saw the same "
	       "ones: %lld), caught 0, all silent",
	       num(&off, "corrupted_records"),
	       num(&audit, "corrupted_records"));
	run_inject(&off2, args);
	tap_ok(ran(&off2, "off again") &&
	       num(&off2, "corrupted_records") ==
		       num(&off, "corrupted_records") &&
	       num(&off2, "records") == num(&off, "records") &&
	       bug_num(&off2, "stale", "injected") ==
		       bug_num(&off, "stale", "injected"),
	       "reproducible by seed: a second off run corrupts the same "
	       "number of records (%lld)", num(&off2, "corrupted_records"));
}

static void test_strict(bool pku)
{
	long long inj, mbd;

	run_inject(&strict, (const char *const[]){ "--writes", "200",
		   "--trials", "200", "--threads", "4", "--mode", "strict",
		   "--seed", SEED, "--json", NULL });
	if (!tap_ok(ran(&strict, "strict"), "strict campaign, 200 trials, "
		    "each in a child: ran")) {
		tap_skip("strict checks", "the campaign did not run");
		return;
	}
	show(&strict, "strict");
	inj = num(&strict, "injected");
	mbd = num(&strict, "missed_by_design");
	tap_ok(num(&strict, "corrupted_records") ==
		       num(&strict, "corrupted_by_design") &&
	       (!pku || num(&strict, "corrupted_records") == 0) &&
	       num(&strict, "caught") == inj - mbd &&
	       num(&strict, "caught") == num(&strict, "trials_aborted") &&
	       num(&strict, "silent_corruptions") == 0 &&
	       num(&strict, "false_positives") == 0 &&
	       num(&strict, "reported_intact") ==
		       num(&strict, "reported_records"),
	       "strict: every trial stopped at its first caught stray write "
	       "(%lld), every pool verified on reopen: %lld corrupted "
	       "records beyond %lld by design",
	       num(&strict, "trials_aborted"),
	       num(&strict, "corrupted_records") -
		       num(&strict, "corrupted_by_design"),
	       num(&strict, "corrupted_by_design"));
}

static void test_relaxed(void)
{
	long long rep;

	run_inject(&relaxed, (const char *const[]){ "--writes", "2000",
		   "--threads", "4", "--mode", "relaxed", "--seed", SEED,
		   "--json", NULL });
	if (!ran(&relaxed, "relaxed")) {
		tap_ok(0, "relaxed: the campaign ran");
		return;
	}
	show(&relaxed, "relaxed");
	rep = num(&relaxed, "reported");
	tap_ok(rep >= 1 && rep <= num(&relaxed, "reopens") + 1 &&
	       num(&relaxed, "caught") >= rep &&
	       num(&relaxed, "false_positives") == 0 &&
	       num(&relaxed, "unexplained_corruptions") == 0,
	       "relaxed: reported once per domain (%lld reports, %lld "
	       "opens), later strays pass, no false positive", rep,
	       num(&relaxed, "reopens") + 1);
}

static void test_bad(const char *what, const char *const *args,
		     const char *needle)
{
	struct run r;

	run_inject(&r, args);
	if (!tap_ok(r.status == 2 && strstr(r.err, needle), "bad option %s: "
		    "exit 2, message names '%s'", what, needle))
		tap_diag("status %d, stderr: %.300s", r.status, r.err);
}

int main(void)
{
	struct run info;
	char be[32];
	bool pku;

	if (!find_cli())
		tap_skip_all("no pmguard CLI ($PMGUARD_CLI, PATH, "
			     "build/pmguard)");
	tap_init(16);
	tap_diag("cli: %s", cli);
	run_inject(&info, (const char *const[]){ "--writes", "8", "--json",
		   NULL });
	backend_of(&info, be, sizeof(be));
	pku = !strcmp(be, "pku");
	tap_diag("backend: %s", be[0] ? be : "unknown");

	test_audit(pku);
	test_off();
	test_strict(pku);
	test_relaxed();
	test_bad("--mode", (const char *const[]){ "--mode", "bogus", NULL },
		 "bogus");
	test_bad("--writes", (const char *const[]){ "--writes", "-5", NULL },
		 "-5");
	test_bad("--threads", (const char *const[]){ "--threads", "0",
		 NULL }, "'0'");
	test_bad("--seed", (const char *const[]){ "--seed", "x12", NULL },
		 "x12");
	test_bad("--trials", (const char *const[]){ "--writes", "3",
		 "--trials", "9", NULL }, "9");
	test_bad("unknown", (const char *const[]){ "--frobnicate", NULL },
		 "--frobnicate");
	return tap_done();
}
