// SPDX-License-Identifier: MIT
/*
 * The stray-write campaign, for real: runs `pmguard inject ... --json` (the
 * CLI named by $PMGUARD_CLI, else `pmguard` from PATH, else build/pmguard)
 * and checks what docs/demo.md promises on whatever backend it runs on:
 *  - audit: every stray write caught except those the backend cannot
 *    catch by design (mprotect: another thread's write during a window;
 *    none on PKU), no silent corruption, no false positive, and the
 *    corrupted records are exactly the reported ones;
 *  - off, same seed: the same records corrupted, nothing caught;
 *    reproducible by seed;
 *  - strict, 200 trials: every pool verifies clean on reopen (apart from
 *    by-design misses on mprotect);
 *  - relaxed: reported once per domain, no false positive;
 *  - bad options: exit 2 with a message naming the bad value;
 *  - --reports to a path that cannot be opened: exit 1, and the message
 *    is that path's error, not a later one;
 *  - interrupted: SIGTERM to the parent alone (kill, timeout), SIGINT to
 *    the process group (Ctrl-C), SIGHUP, at random moments: the CLI ends
 *    by that signal, no process of its session is left (no orphaned
 *    trial child) and no scratch file or directory is left, in its own
 *    temporary directory or in --dir; after SIGKILL of the parent (which
 *    nothing can clean up after) the trial child still dies.
 * Sized to stay well under a minute in the QEMU TCG guest.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "tap.h"
#include "cli-run.h"
#include "dirs.h"

#define SEED "7"

/* Run the CLI with "inject" and @args (NULL-terminated). */
static void run_inject(struct run *r, const char *const *args)
{
	const char *argv[32] = { "inject" };
	int n = 1;

	while (*args && n < 31)
		argv[n++] = *args++;
	argv[n] = NULL;
	run_cli(r, argv);
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

/*
 * Long campaigns stay linear: by default a trial makes at most 10000
 * stray writes (its pool, whose every window edge is an mprotect of the
 * whole pool on that backend, stays bounded); and progress goes to stderr
 * as lines when it is not a terminal (PMGUARD_PROGRESS=0: a line per new
 * percentage, so the test does not depend on timing).
 */
static void test_long(void)
{
	struct run r;
	const char *last;

	setenv("PMGUARD_PROGRESS", "0", 1);
	run_inject(&r, (const char *const[]){ "--writes", "25000",
		   "--threads", "2", "--mode", "off", "--json", NULL });
	unsetenv("PMGUARD_PROGRESS");
	if (!tap_ok(ran(&r, "off, 25000") && num(&r, "trials") == 3 &&
		    num(&r, "injected") + num(&r, "skipped") == 25000,
		    "25000 stray writes: 3 trials by default (at most 10000 "
		    "each), all made"))
		tap_diag("trials %lld", num(&r, "trials"));
	last = strrchr(r.err, '\n');
	while (last && last > r.err && last[-1] != '\n')
		last--;
	if (!tap_ok(strstr(r.err, "pmguard inject: off: ") &&
		    last && strstr(last, ": 100% after "),
		    "progress on stderr (not a terminal): lines 'pmguard "
		    "inject: off: N%% after S s', the last at 100%%"))
		tap_diag("stderr: %.300s", r.err);
}

/* --reports to a path that cannot be opened: that path's error. */
static void test_reports_enoent(void)
{
	struct run r;

	run_inject(&r, (const char *const[]){ "--writes", "8", "--reports",
		   "/nonexistent/x", NULL });
	if (!tap_ok(r.status == 1 && strstr(r.err, "/nonexistent/x") &&
		    strstr(r.err, strerror(ENOENT)) &&
		    !strstr(r.err, "superblock"),
		    "--reports /nonexistent/x: exit 1, the message is the "
		    "path's ENOENT"))
		tap_diag("status %d, stderr: %.300s", r.status, r.err);
}

/* ------------------------------------------------ interruption */

/* Processes in session @sid (/proc/PID/stat field 6), other than @not. */
static int in_session(pid_t sid)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char p[300], buf[1024], *rp;
		int fd, s = -1;
		ssize_t len;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(p, sizeof(p), "/proc/%s/stat", e->d_name);
		fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		len = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (len <= 0)
			continue;
		buf[len] = '\0';
		/* after "(comm)": state ppid pgrp session */
		rp = strrchr(buf, ')');
		if (rp && sscanf(rp + 1, " %*c %*d %*d %d", &s) == 1 &&
		    s == sid)
			n++;
	}
	closedir(d);
	return n;
}

/* Empty @dir of files (one level; the CLI's directory may hold its pool,
 * report files or a pool's temporary name) and remove it. */
static void rm_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[4400], sub[4400];

	if (d) {
		while ((e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			if (unlink(p)) {
				snprintf(sub, sizeof(sub), "%s", p);
				rm_dir(sub);
			}
		}
		closedir(d);
	}
	rmdir(dir);
}

/*
 * Start the CLI in its own session, TMPDIR=@tmp, args @args; after
 * @delay_ms, send @sig to the parent (@group: to the process group, as
 * Ctrl-C does).  Its wait status, or -1.
 */
static int interrupted(const char *tmp, const char *const *args, int sig,
		       bool group, int delay_ms, pid_t *sid)
{
	const char *argv[32];
	struct timespec ts = { delay_ms / 1000,
			       (long)(delay_ms % 1000) * 1000000L };
	int n = 0, st = -1, gate[2];
	pid_t pid;
	char c;

	argv[n++] = cli;
	argv[n++] = "inject";
	while (*args && n < 31)
		argv[n++] = *args++;
	argv[n] = NULL;
	/* the delay counts from the exec: before it, under load, a
	 * signal to the group could find no group yet (seen: status 0) */
	if (pipe2(gate, O_CLOEXEC))
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR);
		sigset_t none;

		/* as a foreground program of a terminal: a test runner in a
		 * non-interactive shell starts us with SIGINT and SIGQUIT
		 * ignored, and the CLI keeps ignored signals ignored */
		signal(SIGINT, SIG_DFL);
		signal(SIGQUIT, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		setsid();
		dup2(nul, 0);
		dup2(nul, 1);
		dup2(nul, 2);
		setenv("TMPDIR", tmp, 1);
		execv(cli, (char *const *)argv);
		_exit(127);
	}
	*sid = pid;
	close(gate[1]);
	if (pid < 0) {
		close(gate[0]);
		return -1;
	}
	while (read(gate[0], &c, 1) < 0 && errno == EINTR)
		;			/* EOF: exec'd (or exited) */
	close(gate[0]);
	nanosleep(&ts, NULL);
	kill(group ? -pid : pid, sig);
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return st;
}

/* Wait up to 5 s for session @sid to be empty; processes left. */
static int session_left(pid_t sid)
{
	int i, n = 0;

	for (i = 0; i < 500; i++) {
		n = in_session(sid);
		if (n <= 0)
			return n;
		usleep(10000);
	}
	return n;
}

static void test_interrupt(void)
{
	static const struct {
		int sig;
		bool group;
		const char *how;
	} how[] = {
		{ SIGTERM, false, "SIGTERM to the parent (kill, timeout)" },
		{ SIGINT, true, "SIGINT to the process group (Ctrl-C)" },
		{ SIGHUP, false, "SIGHUP to the parent" },
		{ SIGINT, false, "SIGINT to the parent alone" },
	};
	const char *d = getenv("TMPDIR");
	char base[4096], tmp[4200], user[4300], first[256];
	unsigned seed = (unsigned)time(NULL);
	int bad_sig, orphans, left, k, i, st, n;
	pid_t sid;

	snprintf(base, sizeof(base), "%s", d && *d ? d : "/tmp");
	if (in_session(getsid(0)) < 0) {
		tap_skip("interrupted inject", "no /proc to find processes");
		tap_skip("interrupted inject, --dir", "no /proc");
		tap_skip("inject parent SIGKILLed", "no /proc");
		return;
	}
	tap_diag("interrupt delays from seed %u", seed);
	srand(seed);
	/* the CLI's own temporary directory (under TMPDIR), then --dir */
	for (k = 0; k < 2; k++) {
		bad_sig = orphans = left = 0;
		for (i = 0; i < 12; i++) {
			int h = i % 4, delay = rand() % 400;
			const char *const own[] = { "--writes", "100000",
						    "--json", NULL };
			const char *const dir[] = { "--writes", "100000",
						    "--dir", user, NULL };

			snprintf(tmp, sizeof(tmp),
				 "%s/pmg-test-inject-XXXXXX", base);
			user[0] = '\0';
			if (mkdtemp(tmp))
				snprintf(user, sizeof(user), "%s/user", tmp);
			if (!user[0] || (k && mkdir(user, 0700))) {
				left++;
				tap_diag("cannot make %s", tmp);
				break;
			}
			st = interrupted(tmp, k ? dir : own, how[h].sig,
					 how[h].group, delay, &sid);
			if (st == -1 || !WIFSIGNALED(st) ||
			    WTERMSIG(st) != how[h].sig) {
				bad_sig++;
				tap_diag("%s after %d ms: wait status %#x",
					 how[h].how, delay, st);
			}
			n = session_left(sid);
			if (n) {
				orphans++;
				tap_diag("%s after %d ms: %d process(es) of "
					 "its session left", how[h].how,
					 delay, n);
				kill(-sid, SIGKILL);
				session_left(sid);
			}
			first[0] = '\0';
			n = dir_entries(k ? user : tmp, NULL, first,
					sizeof(first));
			if (n != 0) {
				left++;
				tap_diag("%s after %d ms: %d entries left in "
					 "%s, e.g. '%s'", how[h].how, delay, n,
					 k ? "--dir" : "TMPDIR", first);
			}
			rm_dir(tmp);
		}
		tap_ok(!bad_sig && !orphans && !left,
		       "inject interrupted 12 times at random moments%s: "
		       "ended by the signal each time (%d not), no process "
		       "of its session left (%d times), no scratch file left "
		       "(%d times)", k ? ", pool in --dir" : "", bad_sig,
		       orphans, left);
	}
	/* SIGKILL of the parent: nothing can clean up after it, but the
	 * trial child must not run on */
	orphans = 0;
	for (i = 0; i < 3; i++) {
		const char *const own[] = { "--writes", "100000", NULL };

		snprintf(tmp, sizeof(tmp), "%s/pmg-test-inject-XXXXXX", base);
		if (!mkdtemp(tmp))
			break;
		interrupted(tmp, own, SIGKILL, false, 300 + rand() % 300,
			    &sid);
		if (session_left(sid)) {
			orphans++;
			kill(-sid, SIGKILL);
			session_left(sid);
		}
		rm_dir(tmp);
	}
	tap_ok(i == 3 && !orphans, "inject parent SIGKILLed 3 times: its "
	       "trial child died with it each time (%d left running)",
	       orphans);
}

int main(void)
{
	struct run info;
	char be[32];
	bool pku;

	if (!find_cli())
		tap_skip_all("no pmguard CLI ($PMGUARD_CLI, PATH, "
			     "build/pmguard)");
	tap_init(22);
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
	test_reports_enoent();
	test_long();
	test_interrupt();
	return tap_done();
}
