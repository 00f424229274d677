// SPDX-License-Identifier: MIT
/*
 * The CLI's argument handling and JSON output, table-driven: runs the CLI
 * named by $PMGUARD_CLI (else `pmguard` from PATH, else build/pmguard).
 *
 *  - every verb's -h and --help: usage on stdout, nothing on stderr, exit
 *    0, also when other (even bad) arguments stand beside it;
 *  - bad values of every option kind: exit 2, nothing on stdout, one
 *    message naming the option and the bad value (counts are decimal
 *    digits only: "010" is ten, "08" eight, "1x", " 1", "-0", "+1" and
 *    "0x10" are refused; a missing value says so);
 *  - --json of every verb that has it is valid JSON (RFC 8259, UTF-8),
 *    checked by a strict validator, also for paths with quotes,
 *    backslashes, control bytes and bytes that are not UTF-8;
 *  - bench persist ended by SIGTERM while it runs removes its pool file
 *    and ends by SIGTERM (inject's interruptions: tests/test-inject.c).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "tap.h"
#include "cli-run.h"

/* ------------------------------------------------ a strict JSON check */

struct jp {
	const unsigned char *p;
	const char *why;
};

static void ws(struct jp *j)
{
	while (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' ||
	       *j->p == '\r')
		j->p++;
}

static bool jfail(struct jp *j, const char *why)
{
	if (!j->why)
		j->why = why;
	return false;
}

static bool hex4(const unsigned char *p)
{
	int i;

	for (i = 0; i < 4; i++)
		if (!((p[i] >= '0' && p[i] <= '9') ||
		      (p[i] >= 'a' && p[i] <= 'f') ||
		      (p[i] >= 'A' && p[i] <= 'F')))
			return false;
	return true;
}

/* One UTF-8 sequence (RFC 3629: no overlongs, surrogates, > U+10FFFF). */
static int utf8(const unsigned char *s)
{
	unsigned lo = 0x80, hi = 0xbf;
	int n, i;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4;
	else
		return 0;
	if (s[0] == 0xe0)
		lo = 0xa0;
	if (s[0] == 0xed)
		hi = 0x9f;
	if (s[0] == 0xf0)
		lo = 0x90;
	if (s[0] == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

static bool jstring(struct jp *j)
{
	int n;

	if (*j->p != '"')
		return jfail(j, "expected a string");
	j->p++;
	while (*j->p != '"') {
		if (!*j->p)
			return jfail(j, "unterminated string");
		if (*j->p < 0x20)
			return jfail(j, "raw control byte in a string");
		if (*j->p == '\\') {
			j->p++;
			if (*j->p == 'u') {
				if (!hex4(j->p + 1))
					return jfail(j, "bad \\u escape");
				j->p += 5;
				continue;
			}
			if (!*j->p || !strchr("\"\\/bfnrt", *j->p))
				return jfail(j, "bad escape");
			j->p++;
			continue;
		}
		n = utf8(j->p);
		if (!n)
			return jfail(j, "not UTF-8");
		j->p += n;
	}
	j->p++;
	return true;
}

static bool jnumber(struct jp *j)
{
	const unsigned char *p = j->p;

	if (*p == '-')
		p++;
	if (*p == '0')
		p++;
	else if (*p >= '1' && *p <= '9')
		while (*p >= '0' && *p <= '9')
			p++;
	else
		return jfail(j, "bad number");
	if (*p == '.') {
		p++;
		if (!(*p >= '0' && *p <= '9'))
			return jfail(j, "bad fraction");
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!(*p >= '0' && *p <= '9'))
			return jfail(j, "bad exponent");
		while (*p >= '0' && *p <= '9')
			p++;
	}
	j->p = p;
	return true;
}

static bool jvalue(struct jp *j, int depth)
{
	ws(j);
	if (depth > 64)
		return jfail(j, "too deep");
	switch (*j->p) {
	case '{':
		j->p++;
		ws(j);
		if (*j->p == '}') {
			j->p++;
			return true;
		}
		for (;;) {
			ws(j);
			if (!jstring(j))
				return false;
			ws(j);
			if (*j->p != ':')
				return jfail(j, "expected ':'");
			j->p++;
			if (!jvalue(j, depth + 1))
				return false;
			ws(j);
			if (*j->p == '}') {
				j->p++;
				return true;
			}
			if (*j->p != ',')
				return jfail(j, "expected ',' or '}'");
			j->p++;
		}
	case '[':
		j->p++;
		ws(j);
		if (*j->p == ']') {
			j->p++;
			return true;
		}
		for (;;) {
			if (!jvalue(j, depth + 1))
				return false;
			ws(j);
			if (*j->p == ']') {
				j->p++;
				return true;
			}
			if (*j->p != ',')
				return jfail(j, "expected ',' or ']'");
			j->p++;
		}
	case '"':
		return jstring(j);
	case 't':
		if (strncmp((const char *)j->p, "true", 4))
			return jfail(j, "bad literal");
		j->p += 4;
		return true;
	case 'f':
		if (strncmp((const char *)j->p, "false", 5))
			return jfail(j, "bad literal");
		j->p += 5;
		return true;
	case 'n':
		if (strncmp((const char *)j->p, "null", 4))
			return jfail(j, "bad literal");
		j->p += 4;
		return true;
	default:
		return jnumber(j);
	}
}

/* @s is exactly one JSON value (and white space); else *@why says why. */
static bool json_valid(const char *s, const char **why, size_t *at)
{
	struct jp j = { (const unsigned char *)s, NULL };
	bool ok = jvalue(&j, 0);

	if (ok) {
		ws(&j);
		if (*j.p)
			ok = jfail(&j, "text after the value");
	}
	*why = j.why;
	*at = (size_t)((const char *)j.p - s);
	return ok;
}

static void check_json(const struct run *r, const char *what)
{
	const char *why = NULL;
	size_t at = 0;
	bool ok = r->status == 0 && r->out[0] && json_valid(r->out, &why,
							     &at);

	if (!tap_ok(ok, "%s: exit 0, stdout is valid JSON", what))
		tap_diag("status %d, %s at byte %zu; stdout: %.400s; stderr: "
			 "%.300s", r->status, why ? why : "-", at, r->out,
			 r->err);
}

/* The validator itself must refuse what is not JSON. */
static void test_validator(void)
{
	static const char *const bad[] = {
		"{\"a\": \"x\"y\"}", "{\"a\": \"\\q\"}", "{\"a\": \"\x01\"}",
		"{\"a\": \"\xff\"}", "{\"a\": \"\xc0\xaf\"}",
		"{\"a\": \"\xed\xa0\x80\"}", "{\"a\": nan}", "{\"a\": inf}",
		"{\"a\": 01}", "{\"a\": 1,}", "{\"a\" 1}", "[1 2]", "{} {}",
		"{\"a\": \"x\"", "{\"a\": -}",
	};
	static const char *const good[] = {
		"{\"a\": \"\\\"\\\\\\u0001\\n\\ufffd\xc3\xa9\xe2\x82\xac\"}",
		"{\"a\": [1, -0.5, 2e10, true, false, null, {}]}",
	};
	const char *why;
	size_t i, at, nbad = 0, ngood = 0;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (json_valid(bad[i], &why, &at))
			tap_diag("validator took '%s'", bad[i]);
		else
			nbad++;
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (!json_valid(good[i], &why, &at))
			tap_diag("validator refused '%s': %s", good[i], why);
		else
			ngood++;
	tap_ok(nbad == sizeof(bad) / sizeof(bad[0]) &&
	       ngood == sizeof(good) / sizeof(good[0]),
	       "the JSON validator refuses %zu broken texts and takes %zu "
	       "valid ones", nbad, ngood);
}

/* ------------------------------------------------- the argument table */

#define A(...) { __VA_ARGS__, NULL }

static const struct ccase {
	const char *args[12];
	int status;
	const char *out;	/* stdout contains it; "" must be empty */
	const char *err;	/* stderr contains it; "" must be empty */
} cases[] = {
	/* help: exit 0, stdout, nothing on stderr */
	{ A("-h"), 0, "usage: pmguard <verb>", "" },
	{ A("--help"), 0, "usage: pmguard <verb>", "" },
	{ A("info", "-h"), 0, "usage: pmguard info", "" },
	{ A("info", "--help"), 0, "usage: pmguard info", "" },
	{ A("selftest", "-h"), 0, "usage: pmguard selftest", "" },
	{ A("selftest", "--help"), 0, "usage: pmguard selftest", "" },
	{ A("bench", "-h"), 0, "usage: pmguard bench window", "" },
	{ A("bench", "--help"), 0, "usage: pmguard bench window", "" },
	{ A("bench", "window", "-h"), 0, "usage: pmguard bench window", "" },
	{ A("bench", "window", "--help"), 0, "usage: pmguard bench window",
	  "" },
	{ A("bench", "persist", "-h"), 0, "usage: pmguard bench persist", "" },
	{ A("bench", "all", "-h"), 0, "usage: pmguard bench all", "" },
	{ A("bench", "all", "--rounds", "0"), 2, "",
	  "bench all: --rounds: value '0' out of range (1..31)" },
	{ A("bench", "persist", "--help"), 0, "usage: pmguard bench persist",
	  "" },
	{ A("demo", "-h"), 0, "usage: pmguard demo", "" },
	{ A("demo", "--help"), 0, "usage: pmguard demo", "" },
	{ A("inject", "-h"), 0, "usage: pmguard inject", "" },
	{ A("inject", "--help"), 0, "usage: pmguard inject", "" },
	/* help wins over other arguments, bad ones included */
	{ A("inject", "--writes", "x", "--help"), 0, "usage: pmguard inject",
	  "" },
	{ A("selftest", "1", "-0", "-h"), 0, "usage: pmguard selftest", "" },
	{ A("bench", "persist", "--rounds", "1x", "-h"), 0,
	  "usage: pmguard bench persist", "" },
	/* a value that looks like -h is a value */
	{ A("bench", "persist", "--rounds", "-h"), 2, "",
	  "--rounds: bad value '-h'" },
	/* top level */
	{ A("--version"), 0, "pmguard ", "" },
	{ { NULL }, 2, "", "usage: pmguard <verb>" },
	{ A("frob"), 2, "", "unknown verb 'frob'" },
	{ A("bench"), 2, "", "usage: pmguard bench" },
	{ A("bench", "frob"), 2, "", "unknown benchmark 'frob'" },
	/* unknown options, flags with values, stray arguments */
	{ A("info", "--bogus"), 2, "", "info: unknown option '--bogus'" },
	{ A("info", "--json=1"), 2, "", "info: --json takes no value" },
	{ A("info", "extra"), 2, "", "info: unexpected argument 'extra'" },
	{ A("bench", "window", "--bogus"), 2, "",
	  "bench window: unknown option '--bogus'" },
	{ A("demo", "--bogus"), 2, "", "demo: unknown option '--bogus'" },
	{ A("inject", "--frobnicate"), 2, "",
	  "inject: unknown option '--frobnicate'" },
	{ A("inject", "--json=yes"), 2, "", "inject: --json takes no value" },
	{ A("inject", "stray"), 2, "", "unexpected argument 'stray'" },
	/* selftest's numbers */
	{ A("selftest", "-0"), 2, "", "selftest: unknown option '-0'" },
	{ A("selftest", " 1"), 2, "", "selftest: test number: bad value ' 1'" },
	{ A("selftest", "1x"), 2, "", "selftest: test number: bad value '1x'" },
	{ A("selftest", "+1"), 2, "", "selftest: test number: bad value '+1'" },
	{ A("selftest", "0x1"), 2, "",
	  "selftest: test number: bad value '0x1'" },
	{ A("selftest", "100"), 2, "",
	  "selftest: test number: value '100' out of range (0..99)" },
	{ A("selftest", ""), 2, "", "selftest: test number needs a value" },
	/* counts: decimal digits only, in range, a value given */
	{ A("bench", "persist", "--rounds"), 2, "",
	  "bench persist: --rounds needs a value" },
	{ A("bench", "persist", "--rounds", "1x"), 2, "",
	  "bench persist: --rounds: bad value '1x'" },
	{ A("bench", "persist", "--rounds", " 1"), 2, "",
	  "--rounds: bad value ' 1'" },
	{ A("bench", "persist", "--rounds", "+1"), 2, "",
	  "--rounds: bad value '+1'" },
	{ A("bench", "persist", "--rounds", "-1"), 2, "",
	  "--rounds: bad value '-1'" },
	{ A("bench", "persist", "--rounds", "0x10"), 2, "",
	  "--rounds: bad value '0x10'" },
	{ A("bench", "persist", "--rounds", "0"), 2, "",
	  "--rounds: value '0' out of range (1..101)" },
	{ A("bench", "persist", "--rounds=102"), 2, "",
	  "--rounds: value '102' out of range (1..101)" },
	{ A("bench", "persist", "--rounds="), 2, "", "--rounds needs a value" },
	{ A("bench", "persist", "--dir"), 2, "", "--dir needs a value" },
	{ A("bench", "persist", "--dir", ""), 2, "", "--dir needs a value" },
	/* 010 is ten and 08 eight (decimal, not octal): --trials says so */
	{ A("inject", "--writes", "010", "--trials", "11"), 2, "",
	  "--trials 11 is more than --writes 10" },
	{ A("inject", "--writes", "08", "--trials", "9"), 2, "",
	  "--trials 9 is more than --writes 8" },
	{ A("inject", "--writes=0010", "--trials=11"), 2, "",
	  "--trials 11 is more than --writes 10" },
	{ A("inject", "--writes", "99999999999999999999999"), 2, "",
	  "--writes: value '99999999999999999999999' out of range" },
	{ A("inject", "--writes", "10000001"), 2, "",
	  "--writes: value '10000001' out of range (1..10000000)" },
	{ A("inject", "--threads", "65"), 2, "",
	  "--threads: value '65' out of range (1..64)" },
	{ A("inject", "--threads", "4 "), 2, "", "--threads: bad value '4 '" },
	{ A("inject", "--trials", "0"), 2, "", "--trials: value '0' out of" },
	{ A("inject", "--mode"), 2, "", "inject: --mode needs a value" },
	{ A("inject", "--mode", "Audit"), 2, "",
	  "--mode: bad value 'Audit' (off, strict, relaxed, audit, contain)" },
	{ A("inject", "--dir", ""), 2, "", "--dir needs a value" },
	{ A("inject", "--reports"), 2, "", "--reports needs a value" },
	/* seeds: decimal or 0x hex, 64 bits */
	{ A("inject", "--seed", "0x"), 2, "", "--seed: bad value '0x'" },
	{ A("inject", "--seed", "0xg"), 2, "", "--seed: bad value '0xg'" },
	{ A("inject", "--seed", "-1"), 2, "", "--seed: bad value '-1'" },
	{ A("inject", "--seed", "0x10000000000000000"), 2, "",
	  "--seed: value '0x10000000000000000' out of range" },
	{ A("demo", "--seed", "18446744073709551616"), 2, "",
	  "demo: --seed: value '18446744073709551616' out of range" },
	{ A("demo", "--writes", "x"), 2, "", "demo: --writes: bad value 'x'" },
	{ A("demo", "--writes", "19"), 2, "",
	  "demo: --writes: value '19' out of range (20..10000000)" },
	{ A("demo", "--threads"), 2, "", "demo: --threads needs a value" },
	/* run, learn, report: a directory or an unwritable -o is an error
	 * before anything runs */
	{ A("report", "/"), 2, "", "report: /: is a directory" },
	{ A("run", "--allow", "/", "--", "/bin/true"), 2, "",
	  "run: --allow /: is a directory" },
	{ A("learn", "-o", "/nonexistent-pmg/sites", "--", "/bin/true"), 2, "",
	  "learn: -o /nonexistent-pmg/sites: directory /nonexistent-pmg" },
	{ A("learn", "-o", "/", "--", "/bin/true"), 2, "",
	  "learn: -o /: is a directory" },
};

static void test_case(const struct ccase *c)
{
	static struct run r;
	char line[256];
	size_t at = 0;
	int i;
	bool ok;

	for (i = 0; c->args[i] && at < sizeof(line); i++)
		at += (size_t)snprintf(line + at, sizeof(line) - at, "%s'%s'",
				       i ? " " : "", c->args[i]);
	if (!i)
		snprintf(line, sizeof(line), "(no arguments)");
	run_cli(&r, c->args);
	ok = r.status == c->status &&
	     (*c->out ? !!strstr(r.out, c->out) : !r.out[0]) &&
	     (*c->err ? !!strstr(r.err, c->err) : !r.err[0]);
	if (!tap_ok(ok, "pmguard %s: exit %d, %s%s%s", line, c->status,
		    *c->err ? "stderr names " : "stderr empty",
		    *c->err ? c->err : "", c->status ? ", stdout empty" : ""))
		tap_diag("status %d, stdout: %.200s, stderr: %.300s",
			 r.status, r.out, r.err);
}

/* ------------------------------------------------------- JSON outputs */

static char odd[4200];

/* A directory whose name has every kind of byte JSON must escape. */
static bool make_odd_dir(void)
{
	const char *d = getenv("TMPDIR");
	char base[4096];

	snprintf(base, sizeof(base), "%s/pmg-test-cli-XXXXXX",
		 d && *d ? d : "/tmp");
	if (!mkdtemp(base))
		return false;
	snprintf(odd, sizeof(odd), "%s/q\"b\\s\x01\t\n\x1f\x7f "
		 "\xff\xc3(\xed\xa0\x80\xe2\x82\xac", base);
	return !mkdir(odd, 0700);
}

static void rm_odd_dir(void)
{
	char *slash;

	rmdir(odd);
	slash = strrchr(odd, '/');
	if (slash) {
		*slash = '\0';
		rmdir(odd);
	}
}

/*
 * Off PKU (the host suite): bench window says SKIP for the floor with the
 * reason and gives no PKU figure; bench all --quick runs every benchmark
 * once (window, persist, fault, domains, LMDB: the CI check that they
 * work: ratios shown, never asserted), its
 * PKU rows SKIP with the reason, its LMDB rows measured where the build
 * has lmdb-prog.
 */
static void test_bench_all(struct run *r)
{
	char *line, *save = NULL;
	const char *row, *end, *val, *skip;
	bool lmdb;

	tap_ok(strstr(r->out, "\"floor_ns_per_pair\": null") &&
		       strstr(r->out, "\"skip\": \"") &&
		       !strstr(r->out, "\"path\": \"wrpkru\"") &&
		       !strstr(r->out, "floor_ratio"),
	       "bench window --json off PKU: floor null with the reason, "
	       "no wrpkru figure, no floor_ratio");
	run_cli(r, (const char *const[]){ "bench", "window", "--quick", NULL });
	tap_ok(r->status == 0 && strstr(r->out, "floor ") &&
		       strstr(r->out, "SKIP: ") && strstr(r->out, "(--quick)"),
	       "bench window --quick off PKU: exit 0, the floor says SKIP");
	run_cli(r, (const char *const[]){ "bench", "all", "--quick", "--json",
					  NULL });
	check_json(r, "bench all --quick --json");
	lmdb = strstr(r->out, "\"name\": \"run (mprotect) / plain, write, "
			      "10 rec/txn\"") != NULL;
	row = strstr(r->out, "\"name\": \"wrpkru pair / floor\"");
	end = row ? strchr(row, '}') : NULL;
	val = row ? strstr(row, "\"value\": null") : NULL;
	skip = row ? strstr(row, "\"skip\": \"") : NULL;
	tap_ok(strstr(r->out, "\"pku_skip\": \"") && end && val && val < end &&
		       skip && skip < end,
	       "bench all --json off PKU: pku_skip, the wrpkru row null "
	       "with the reason");
	if (!lmdb)
		tap_diag("no LMDB rows (lmdb-prog not built beside %s)",
			 getenv("PMGUARD_CLI") ? getenv("PMGUARD_CLI") : "?");
	run_cli(r, (const char *const[]){ "bench", "all", "--quick", NULL });
	tap_ok(r->status == 0 && strstr(r->out, "SKIP") &&
		       strstr(r->out, "persist  ours / PMDK") &&
		       strstr(r->out, "fault    contain / audit") &&
		       strstr(r->out, "domains  keyed pair, 100 domains"),
	       "bench all --quick: exit 0, a table (ratios below, not "
	       "asserted)");
	for (line = strtok_r(r->out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save))
		tap_diag("%s", line);
}

static void test_json(void)
{
	static struct run r;
	char missing[4400];
	bool have_odd = make_odd_dir();

	run_cli(&r, (const char *const[]){ "info", "--json", NULL });
	check_json(&r, "info --json");
	if (strstr(r.out, "\"backend\": \"pku\"")) {
		/* millions of WRPKRU: minutes in the TCG guest */
		for (int i = 0; i < 6; i++)
			tap_skip("bench window --json, bench all --quick",
				 "PKU backend (the QEMU TCG guest: minutes); "
				 "the host suite checks it");
	} else {
		run_cli(&r, (const char *const[]){ "bench", "window",
						   "--json", NULL });
		check_json(&r, "bench window --json");
		test_bench_all(&r);
	}
	if (!have_odd) {
		for (int i = 0; i < 4; i++)
			tap_skip("JSON with an odd --dir", "cannot make the "
				 "directory");
		return;
	}
	tap_diag("odd directory: '%.*s/' + q\"b\\s, \\x01 \\t \\n "
		 "\\x1f \\x7f, \\xff \\xc3( \\xed\\xa0\\x80 (not "
		 "UTF-8), a euro sign", (int)(strrchr(odd, '/') - odd), odd);
	run_cli(&r, (const char *const[]){ "bench", "persist", "--json",
					   "--rounds", "1", "--dir", odd,
					   NULL });
	check_json(&r, "bench persist --json --dir <quotes, backslashes, "
		   "control bytes, not UTF-8>");
	tap_ok(r.status == 0 && strstr(r.out, "q\\\"b\\\\s\\u0001\\t\\n"
				       "\\u001f\\u007f \\ufffd\\ufffd("
				       "\\ufffd\\ufffd\\ufffd\xe2\x82\xac"),
	       "bench persist --json: \"file\" escapes \" \\ and control "
	       "bytes, marks bytes that are not UTF-8 as U+FFFD, keeps "
	       "UTF-8");
	run_cli(&r, (const char *const[]){ "inject", "--json", "--writes",
					   "8", "--dir", odd, NULL });
	check_json(&r, "inject --json --dir <odd>");
	snprintf(missing, sizeof(missing), "%s/missing/x", odd);
	run_cli(&r, (const char *const[]){ "inject", "--json", "--writes",
					   "8", "--dir", odd, "--reports",
					   missing, NULL });
	{
		const char *why = NULL;
		size_t at = 0;

		tap_ok(r.status == 1 && strstr(r.out, "\"error\": ") &&
		       json_valid(r.out, &why, &at),
		       "inject --json that fails on an odd --reports path: "
		       "exit 1, valid JSON with \"error\"");
	}
	rm_odd_dir();
}

/* bench persist, SIGTERM once its pool file exists: gone, and the
 * process ended by SIGTERM. */
static void test_bench_sigterm(void)
{
	const char *d = getenv("TMPDIR");
	char dir[4096], name[256] = "";
	int st = -1, i, left = -1;
	pid_t pid;

	snprintf(dir, sizeof(dir), "%s/pmg-test-cli-XXXXXX",
		 d && *d ? d : "/tmp");
	if (!mkdtemp(dir)) {
		tap_skip("bench persist, SIGTERM", "cannot make a directory");
		return;
	}
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR);

		signal(SIGTERM, SIG_DFL);
		dup2(nul, 0);
		dup2(nul, 1);
		dup2(nul, 2);
		execl(cli, cli, "bench", "persist", "--rounds", "101", "--dir",
		      dir, (char *)NULL);
		_exit(127);
	}
	/* wait (up to 10 s) for the pool file, then SIGTERM */
	for (i = 0; pid > 0 && i < 1000; i++) {
		DIR *dd = opendir(dir);
		struct dirent *e;
		bool found = false;

		while (dd && (e = readdir(dd)))
			if (!strncmp(e->d_name, "pmguard-bench-", 14)) {
				snprintf(name, sizeof(name), "%s", e->d_name);
				found = true;
			}
		if (dd)
			closedir(dd);
		if (found)
			break;
		usleep(10000);
	}
	if (pid > 0) {
		usleep(100000);
		kill(pid, SIGTERM);
		waitpid(pid, &st, 0);
	}
	{
		DIR *dd = opendir(dir);
		struct dirent *e;

		left = 0;
		while (dd && (e = readdir(dd)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
				left++;
		if (dd)
			closedir(dd);
	}
	if (!tap_ok(name[0] && st != -1 && WIFSIGNALED(st) &&
		    WTERMSIG(st) == SIGTERM && left == 0,
		    "bench persist ended by SIGTERM while running: its pool "
		    "file removed, ended by SIGTERM"))
		tap_diag("pool file '%s' seen, wait status %#x, %d entries "
			 "left", name, st, left);
	if (left && name[0]) {
		char p[4400];

		snprintf(p, sizeof(p), "%s/%s", dir, name);
		unlink(p);
	}
	rmdir(dir);
}

int main(void)
{
	size_t i, n = sizeof(cases) / sizeof(cases[0]);

	if (!find_cli())
		tap_skip_all("no pmguard CLI ($PMGUARD_CLI, PATH, "
			     "build/pmguard)");
	tap_init((int)n + 13);
	tap_diag("cli: %s", cli);
	for (i = 0; i < n; i++)
		test_case(&cases[i]);
	test_validator();
	test_json();
	test_bench_sigterm();
	return tap_done();
}
