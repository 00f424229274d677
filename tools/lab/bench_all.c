// SPDX-License-Identifier: MIT
/*
 * pmguard bench all [--json] [--quick] [--rounds N] [--lmdb-prog PATH]
 *
 * Every benchmark side by side in one run, and one table of
 * ratios (docs/performance.md):
 *   window   `bench window --json` in a child: each path over the floor
 *            (two bare WRPKRU) on PKU; the mprotect pair otherwise
 *   persist  `bench persist --json` in a child: ours / PMDK's libpmem,
 *            protected / unprotected and, on PKU, floor_ratio per size
 *   fault    `bench fault --json`: a contained stray write over an
 *            audited one
 *   domains  `bench domains --json`: a keyed window pair with 100 and
 *            1000 domains live over one on a lone domain (--quick: 100)
 *   lmdb     lmdb-prog (tests/run/lmdb-prog.c, a 1 GiB MDB_WRITEMAP map
 *            in a fresh directory) plain and under `pmguard run`,
 *            alternated in each round (the order flips every round):
 *            write transactions of 1, 10 and 1000 records, and read-only
 *            transactions with 1 and 2 threads; the process CPU time of
 *            lmdb-prog's own loop (user + system, so mprotect(2) and the
 *            faults count, start-up does not), per transaction.  Each
 *            round gives a ratio; the median and the spread are
 *            reported (window and persist rows: the median of their own
 *            rounds, n = rounds, no spread).  On PKU the write rows run a second time with
 *            PMGUARD_BACKEND=mprotect (mprotect / plain).
 * A row that cannot be measured here says SKIP and why; nothing is
 * asserted: a benchmark, not a test (exit 0 unless a child fails).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "args.h"
#include "cleanup.h"
#include "cmds.h"
#include "json.h"
#include "pmguard.h"

#define MAX_ROWS 64
#define MAX_ROUNDS 31
#define OUT_MAX (64 << 10)

struct row {
	const char *group;
	char name[64];
	const char *unit; /* "x" (a ratio) or "ns" */
	double value; /* the median; < 0: SKIP */
	double lo, hi; /* the spread of the rounds' values */
	int n; /* rounds */
	char detail[200];
	char skip[200];
};

static struct row rows[MAX_ROWS];
static int nrows;

static struct row *row_add(const char *group, const char *unit, const char *fmt,
			   ...) __attribute__((format(printf, 3, 4)));
static struct row *row_add(const char *group, const char *unit, const char *fmt,
			   ...)
{
	struct row *r = &rows[nrows < MAX_ROWS - 1 ? nrows++ : nrows];
	va_list ap;

	memset(r, 0, sizeof(*r));
	r->group = group;
	r->unit = unit;
	r->value = -1;
	va_start(ap, fmt);
	vsnprintf(r->name, sizeof(r->name), fmt, ap);
	va_end(ap);
	return r;
}

static void row_skip(struct row *r, const char *why)
{
	r->value = -1;
	{
		size_t l = strlen(why);

		if (l >= sizeof(r->skip))
			l = sizeof(r->skip) - 1;
		memcpy(r->skip, why, l);
		r->skip[l] = '\0';
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of @v[@n] (sorted in place), its extremes in @r. */
static void row_set(struct row *r, double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	r->n = n;
	r->lo = v[0];
	r->hi = v[n - 1];
	r->value = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/*
 * Run @argv (with @env_set "NAME=VALUE" put in its environment, or NULL),
 * its stdout and stderr into @out (@n bytes, NUL-terminated).  Returns
 * its exit status, or -1 if it did not exit (said).
 */
static int capture(char *const argv[], const char *env_set, char *out, size_t n)
{
	size_t len = 0;
	int p[2], st;
	pid_t pid;
	ssize_t k;

	out[0] = '\0';
	if (pipe2(p, O_CLOEXEC))
		return -1;
	fflush(NULL);
	pid = cli_fork();
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		if (env_set)
			putenv((char *)env_set);
		execv(argv[0], argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		return -1;
	}
	while (len + 1 < n && (k = read(p[0], out + len, n - 1 - len)) != 0) {
		if (k < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		len += (size_t)k;
	}
	out[len] = '\0';
	/* drain what did not fit, so that the child never blocks */
	{
		char sink[4096];

		while ((k = read(p[0], sink, sizeof(sink))) > 0 ||
		       (k < 0 && errno == EINTR))
			;
	}
	close(p[0]);
	if (cli_wait(pid, &st, false) < 0 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/*
 * The number after "@key": in our own JSON output @s, in the object that
 * contains @anchor (from @anchor to the next '}'; @anchor NULL: from the
 * start); -1 if absent or null.
 */
static double jnum(const char *s, const char *anchor, const char *key)
{
	const char *p = anchor ? strstr(s, anchor) : s, *end, *q;
	char pat[80];

	if (!p)
		return -1;
	end = strchr(p, '}');
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	q = strstr(p, pat);
	if (!q || (end && q > end))
		return -1;
	q += strlen(pat);
	while (*q == ' ')
		q++;
	if (*q < '0' || *q > '9')
		return -1;
	return strtod(q, NULL);
}

/* The string after "@key": in @s into @out, or "" if absent. */
static void jstr(const char *s, const char *key, char *out, size_t n)
{
	char pat[80];
	const char *q;
	size_t i = 0;

	out[0] = '\0';
	snprintf(pat, sizeof(pat), "\"%s\": \"", key);
	q = strstr(s, pat);
	if (!q)
		return;
	for (q += strlen(pat); *q && *q != '"' && i + 1 < n; q++)
		out[i++] = *q == '\\' && q[1] ? *++q : *q;
	out[i] = '\0';
}

static char self[PATH_MAX];

/* ------------------------------------------------------------- window */
static int do_window(bool quick, char *buf)
{
	char *argv[] = {
		self, "bench", "window", "--json", quick ? "--quick" : NULL,
		NULL
	};
	static const char *const paths[] = { "floor-rdpkru", "software",
					     "wrpkru" };
	char skip[200];
	double fl;
	unsigned i;
	int rc = capture(argv, NULL, buf, OUT_MAX);
	struct row *r;

	if (rc) {
		fprintf(stderr, "bench all: bench window failed (%d):\n%s\n",
			rc, buf);
		r = row_add("window", "x", "bench window");
		row_skip(r, "failed (see above)");
		return 1;
	}
	jstr(buf, "skip", skip, sizeof(skip));
	fl = jnum(buf, NULL, "floor_ns_per_pair");
	for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		char a[64];
		double ns;

		snprintf(a, sizeof(a), "\"path\": \"%s\"", paths[i]);
		ns = jnum(buf, a, "ns_per_pair");
		r = row_add("window", "x", "%s pair / floor", paths[i]);
		if (fl > 0 && ns > 0) {
			r->value = ns / fl;
			r->lo = r->hi = -1;
			r->n = quick ? 3 : 7;
			snprintf(r->detail, sizeof(r->detail),
				 "%.2f ns vs floor %.2f ns (median of the "
				 "rounds)",
				 ns, fl);
		} else {
			row_skip(r, skip[0] ? skip : "no floor measured");
		}
	}
	r = row_add("window", "ns", "mprotect pair");
	r->value = jnum(buf, "\"path\": \"mprotect\"", "ns_per_pair");
	if (r->value < 0)
		row_skip(r, "the mprotect child failed");
	r->n = quick ? 3 : 7;
	r->lo = r->hi = -1;
	snprintf(r->detail, sizeof(r->detail),
		 "open+close, nothing written "
		 "(lazy window)");
	r = row_add("window", "ns", "mprotect pair, one write");
	r->value = jnum(buf, "\"path\": \"mprotect-write\"", "ns_per_pair");
	if (r->value < 0)
		row_skip(r, "the mprotect child failed");
	r->n = quick ? 3 : 7;
	r->lo = r->hi = -1;
	snprintf(r->detail, sizeof(r->detail),
		 "a lazy window's fault, grant "
		 "and re-protect");
	return 0;
}

/* ------------------------------------------------------------ persist */
static int do_persist(bool quick, int rounds, char *buf)
{
	static const unsigned sizes[] = { 64, 256, 4096, 65536, 2097152 };
	char nr[16], skip[200] = "", pmdk[64] = "";
	char *argv[] = { self,	     "bench", "persist", "--json",
			 "--rounds", nr,      NULL };
	unsigned i;
	int rc;
	struct row *r;

	snprintf(nr, sizeof(nr), "%d", quick ? 3 : rounds < 15 ? 15 : rounds);
	rc = capture(argv, NULL, buf, OUT_MAX);
	if (rc) {
		fprintf(stderr, "bench all: bench persist failed (%d):\n%s\n",
			rc, buf);
		r = row_add("persist", "x", "bench persist");
		row_skip(r, "failed (see above)");
		return 1;
	}
	jstr(buf, "floor_skip", skip, sizeof(skip));
	jstr(buf, "pmdk", pmdk, sizeof(pmdk));
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char a[64], sz[16];
		double v, pu, fr;

		snprintf(a, sizeof(a), "\"size\": %u,", sizes[i]);
		snprintf(sz, sizeof(sz),
			 sizes[i] >= 1 << 20 ? "%u MiB"
			 : sizes[i] >= 1024  ? "%u KiB"
					     : "%u B",
			 sizes[i] >= 1 << 20 ? sizes[i] >> 20
			 : sizes[i] >= 1024  ? sizes[i] >> 10
					     : sizes[i]);
		v = jnum(buf, a, "ratio_vs_pmdk");
		r = row_add("persist", "x", "ours / PMDK, %s", sz);
		if (v > 0) {
			r->value = v;
			r->lo = r->hi = -1;
			r->n = atoi(nr);
			snprintf(r->detail, sizeof(r->detail),
				 "pmg_memcpy_persist vs pmem_memcpy_persist, "
				 "unprotected, median of %s rounds",
				 nr);
		} else {
			row_skip(
				r,
				pmdk[0] ? "no figure"
					: "libpmem.so.1 not found (install libpmem1)");
		}
		pu = jnum(buf, a, "protected_over_unprotected");
		fr = jnum(buf, a, "floor_ratio");
		r = row_add("persist", "x", "protected / unprotected, %s", sz);
		r->value = pu;
		r->lo = r->hi = -1;
		r->n = atoi(nr);
		if (fr > 0)
			snprintf(r->detail, sizeof(r->detail),
				 "floor_ratio %.4f (goal: within 0.03): %+.4f",
				 fr, pu - fr);
		else
			snprintf(r->detail, sizeof(r->detail),
				 "floor_ratio SKIP: %.180s",
				 skip[0] ? skip : "not measured");
	}
	return 0;
}

/* -------------------------------------------------------------- fault */
static int do_fault(bool quick, char *buf)
{
	char *argv[] = { self,	   "bench",    "fault",
			 "--json", "--writes", quick ? "300" : "20000",
			 NULL };
	int rc = capture(argv, NULL, buf, OUT_MAX);
	double au = jnum(buf, "\"mode\": \"audit\"", "ns_per_stray_write");
	double ct = jnum(buf, "\"mode\": \"contain\"", "ns_per_stray_write");
	struct row *r = row_add("fault", "x", "contain / audit, a stray write");

	if (rc || au <= 0 || ct <= 0) {
		fprintf(stderr, "bench all: bench fault failed (%d):\n%s\n", rc,
			buf);
		row_skip(r, "failed (see above)");
		return 1;
	}
	r->value = ct / au;
	r->lo = r->hi = -1;
	r->n = 7;
	snprintf(r->detail, sizeof(r->detail),
		 "audit %.0f ns, contain %.0f ns per stray write (%s writes "
		 "a round), protected page intact",
		 au, ct, argv[5]);
	return 0;
}

/* ------------------------------------------------------------ domains */
static int do_domains(bool quick, char *buf)
{
	char *argv[] = { self,
			 "bench",
			 "domains",
			 "--json",
			 quick ? "--domains" : NULL,
			 "100",
			 "--pairs",
			 "2000",
			 NULL };
	static const unsigned counts[] = { 100, 1000 };
	int rc = capture(argv, NULL, buf, OUT_MAX), bad = 0;
	unsigned i;

	for (i = 0; i < (quick ? 1u : 2u); i++) {
		char a[48];
		double kb, kf, caught, strays;
		struct row *r = row_add("domains", "x",
					"keyed pair, %u domains / one",
					counts[i]);

		snprintf(a, sizeof(a), "\"domains\": %u,", counts[i]);
		kb = jnum(buf, a, "keyed_base_ratio");
		kf = jnum(buf, a, "keyed_floor_ratio");
		caught = jnum(buf, a, "strays_caught");
		strays = jnum(buf, a, "strays");
		if (rc || kb <= 0) {
			fprintf(stderr,
				"bench all: bench domains failed (%d):\n%s\n",
				rc, buf);
			row_skip(r, "failed (see above)");
			bad = 1;
			continue;
		}
		r->value = kb;
		r->lo = r->hi = -1;
		r->n = 7;
		if (kf > 0)
			snprintf(r->detail, sizeof(r->detail),
				 "keyed pair / floor %.2f; %.0f of %.0f strays "
				 "caught",
				 kf, caught, strays);
		else
			snprintf(r->detail, sizeof(r->detail),
				 "%.0f of %.0f strays caught (one per domain, "
				 "contain mode)",
				 caught, strays);
	}
	return bad;
}

/* --------------------------------------------------------------- lmdb */
static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	return remove(p) && errno != ENOENT ? -1 : 0;
}

static void rm_tree(const char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/*
 * lmdb-prog ARGS... plain (@run false) or under `pmguard run` (with
 * @env_set), into @buf; the CPU seconds it reports after @tag ("write
 * time" or "txns/s, cpu"), or -1 (said).
 */
static double lmdb_one(char *const *args, int nargs, bool run,
		       const char *env_set, char *buf)
{
	char *argv[16];
	const char *tag;
	int n = 0, i, rc;
	char *p;

	if (run) {
		argv[n++] = self;
		argv[n++] = "run";
		argv[n++] = "--";
	}
	for (i = 0; i < nargs && n < 15; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	rc = capture(argv, run ? env_set : NULL, buf, OUT_MAX);
	tag = !strcmp(args[1], "write") ? "write time " : "txns/s, cpu ";
	p = strstr(buf, tag);
	if (rc || !p) {
		fprintf(stderr, "bench all: %s%s %s failed (%d):\n%.2000s\n",
			run ? "pmguard run -- " : "", args[0], args[1], rc,
			buf);
		return -1;
	}
	if (!strcmp(args[1], "write")) {
		p = strstr(p, "cpu ");
		return p ? strtod(p + 4, NULL) : -1;
	}
	return strtod(p + strlen(tag), NULL);
}

/* A fresh empty directory @dir/@name in @out. */
static int fresh(const char *dir, const char *name, char *out, size_t n)
{
	if ((size_t)snprintf(out, n, "%s/%s", dir, name) >= n) {
		errno = ENAMETOOLONG;
		return -1;
	}
	rm_tree(out);
	return mkdir(out, 0700);
}

struct lmdb_cfg {
	const char *prog, *dir;
	int rounds;
	bool quick;
};

/*
 * Write transactions of @per records: plain vs run (@env_set picks the
 * backend), alternated; a row in @group.
 */
static int lmdb_write(const struct lmdb_cfg *c, unsigned per, const char *group,
		      const char *label, const char *env_set, char *buf)
{
	double ratio[MAX_ROUNDS], pl[MAX_ROUNDS], rn[MAX_ROUNDS];
	unsigned txns = per == 1000
				? (c->quick ? 5 : 200)
				: (c->quick ? (per == 1 ? 1000 : 300) : 20000);
	char t[16], pe[16], db[PATH_MAX];
	char *args[] = { (char *)c->prog, "write", db, t, pe };
	struct row *r;
	int i, k;

	snprintf(t, sizeof(t), "%u", txns);
	snprintf(pe, sizeof(pe), "%u", per);
	r = row_add(group, "x", "%s / plain, write, %u rec/txn", label, per);
	for (i = 0; i < c->rounds; i++) {
		for (k = 0; k < 2; k++) {
			bool run = (k + i) % 2 == 1; /* the order flips */
			double s;

			if (fresh(c->dir, "db", db, sizeof(db)))
				return 1;
			s = lmdb_one(args, 5, run, env_set, buf);
			if (s < 0) {
				row_skip(r, "a run failed (see above)");
				return 1;
			}
			(run ? rn : pl)[i] = s * 1e6 / txns;
		}
		ratio[i] = rn[i] / pl[i];
	}
	row_set(r, ratio, c->rounds);
	qsort(pl, (size_t)c->rounds, sizeof(double), cmp_double);
	qsort(rn, (size_t)c->rounds, sizeof(double), cmp_double);
	snprintf(r->detail, sizeof(r->detail),
		 "%u txns; plain %.2f us/txn, %s %.2f us/txn (medians, CPU)",
		 txns, pl[c->rounds / 2], label, rn[c->rounds / 2]);
	return 0;
}

/* Read-only transactions, @thr threads, on the database in @db. */
static int lmdb_read(const struct lmdb_cfg *c, const char *db, unsigned thr,
		     char *buf)
{
	double ratio[MAX_ROUNDS], pl[MAX_ROUNDS], rn[MAX_ROUNDS];
	double tp[2][MAX_ROUNDS];
	unsigned txns = c->quick ? 20000 : 400000;
	char t[16], th[16];
	char *args[] = { (char *)c->prog, "read", (char *)db, t, th };
	struct row *r;
	int i, k;

	snprintf(t, sizeof(t), "%u", txns);
	snprintf(th, sizeof(th), "%u", thr);
	r = row_add("lmdb", "x", "run / plain, read-only, %u thread%s", thr,
		    thr > 1 ? "s" : "");
	for (i = 0; i < c->rounds; i++) {
		for (k = 0; k < 2; k++) {
			bool run = (k + i) % 2 == 1;
			double s = lmdb_one(args, 5, run, NULL, buf);
			const char *p = strstr(buf, " s, ");

			if (s < 0) {
				row_skip(r, "a run failed (see above)");
				return 1;
			}
			(run ? rn : pl)[i] = s * 1e9 / ((double)txns * thr);
			tp[run][i] = p ? strtod(p + 4, NULL) : 0;
		}
		ratio[i] = rn[i] / pl[i];
	}
	row_set(r, ratio, c->rounds);
	qsort(pl, (size_t)c->rounds, sizeof(double), cmp_double);
	qsort(rn, (size_t)c->rounds, sizeof(double), cmp_double);
	qsort(tp[0], (size_t)c->rounds, sizeof(double), cmp_double);
	qsort(tp[1], (size_t)c->rounds, sizeof(double), cmp_double);
	snprintf(r->detail, sizeof(r->detail),
		 "%u txns/thread; CPU plain %.0f ns/txn, run %.0f; "
		 "throughput plain %.0fk/s, run %.0fk/s (medians)",
		 txns, pl[c->rounds / 2], rn[c->rounds / 2],
		 tp[0][c->rounds / 2] / 1e3, tp[1][c->rounds / 2] / 1e3);
	return 0;
}

/* The default lmdb-prog: beside a build tree's pmguard. */
static const char *lmdb_prog_default(char *out, size_t n)
{
	char *slash;

	snprintf(out, n, "%s", self);
	slash = strrchr(out, '/');
	if (!slash)
		return NULL;
	*slash = '\0';
	if (strlen(out) + sizeof("/tests/run/lmdb-prog") > n)
		return NULL;
	strcat(out, "/tests/run/lmdb-prog");
	return out;
}

static int do_lmdb(const struct lmdb_cfg *c0, bool pku, char *buf)
{
	static const unsigned pers[] = { 1, 10, 1000 };
	struct lmdb_cfg c = *c0;
	char tmp[PATH_MAX], db[PATH_MAX], t[8] = "100", pe[8] = "100";
	char *fill[] = { (char *)c.prog, "write", db, t, pe };
	const char *be = pku ? "run (pku)" : "run (mprotect)";
	unsigned i;
	int bad = 0;

	if (cli_tmpdir(tmp, sizeof(tmp), "pmguard-bench-all"))
		return cli_error("bench all: temporary directory: %s",
				 strerror(errno)) -
		       1;
	c.dir = tmp;
	for (i = 0; i < 3; i++)
		bad |= lmdb_write(&c, pers[i], "lmdb", be, NULL, buf);
	if (pku)
		for (i = 0; i < 3; i++)
			bad |= lmdb_write(&c, pers[i], "lmdb", "mprotect",
					  "PMGUARD_BACKEND=mprotect", buf);
	/* readers on 10,000 records written plain */
	if (fresh(tmp, "read", db, sizeof(db)) ||
	    lmdb_one(fill, 5, false, NULL, buf) < 0) {
		bad = 1;
	} else {
		bad |= lmdb_read(&c, db, 1, buf);
		bad |= lmdb_read(&c, db, 2, buf);
	}
	rm_tree(tmp);
	cli_scratch_done(tmp);
	return bad;
}

/* ---------------------------------------------------------------- all */
static void usage(FILE *f)
{
	fprintf(f,
		"usage: pmguard bench all [--json] [--quick] [--rounds N] "
		"[--lmdb-prog PATH]\n"
		"  every benchmark side by side in one run and a table of "
		"ratios: window\n"
		"  pair / floor (PKU), ours / PMDK and protected / "
		"unprotected (persist),\n"
		"  LMDB under `pmguard run` / plain at 1, 10 and 1000 "
		"records per write\n"
		"  transaction and read-only with 1 and 2 threads "
		"(mprotect / plain too on PKU)\n"
		"  --quick       one short round of each (checks that it "
		"works: CI)\n"
		"  --rounds N    LMDB rounds, plain and run alternated, "
		"1..%d (default 5)\n"
		"  --lmdb-prog PATH  the LMDB program (default: "
		"tests/run/lmdb-prog beside\n"
		"                this pmguard, as in a build tree; missing: "
		"the LMDB rows say SKIP)\n",
		MAX_ROUNDS);
}

static double loadavg(void)
{
	FILE *f = fopen("/proc/loadavg", "re");
	double l = -1;

	if (f) {
		if (fscanf(f, "%lf", &l) != 1)
			l = -1;
		fclose(f);
	}
	return l;
}

int cmd_bench_all(int argc, char **argv)
{
	bool json = false, quick = false;
	unsigned long long nrounds = 0;
	const char *prog = NULL, *nopku;
	char dflt[PATH_MAX], *buf;
	const struct cli_opt opts[] = {
		{ .name = "--json", .kind = CLI_FLAG, .out = &json },
		{ .name = "--quick", .kind = CLI_FLAG, .out = &quick },
		{ .name = "--rounds",
		  .kind = CLI_COUNT,
		  .lo = 1,
		  .hi = MAX_ROUNDS,
		  .out = &nrounds },
		{ .name = "--lmdb-prog", .kind = CLI_STRING, .out = &prog },
		{ .name = NULL },
	};
	const struct cli_verb verb = { "bench all", opts, usage, NULL, NULL };
	struct lmdb_cfg lc;
	double t0 = cli_now(), l0, l1;
	ssize_t n;
	int rc, bad = 0, i;

	rc = cli_args(&verb, argc, argv);
	if (rc != CLI_GO_ON)
		return rc;
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return cli_error("bench all: /proc/self/exe: %s",
				 strerror(errno)) -
		       1;
	self[n] = '\0';
	if (!nrounds)
		nrounds = quick ? 1 : 5;
	buf = malloc(OUT_MAX);
	if (!buf)
		return cli_error("bench all: out of memory") - 1;
	nopku = bench_no_pku_why();
	l0 = loadavg();
	if (!json)
		fprintf(stderr, "pmguard bench all: window ...\n");
	bad |= do_window(quick, buf);
	if (!json)
		fprintf(stderr, "pmguard bench all: persist ...\n");
	bad |= do_persist(quick, (int)nrounds, buf);
	if (!json)
		fprintf(stderr, "pmguard bench all: fault, domains ...\n");
	bad |= do_fault(quick, buf);
	bad |= do_domains(quick, buf);
	if (!prog)
		prog = lmdb_prog_default(dflt, sizeof(dflt));
	if (!prog || access(prog, X_OK)) {
		char why[PATH_MAX + 80];
		struct row *r = row_add("lmdb", "x", "run / plain");

		snprintf(why, sizeof(why),
			 "no LMDB program at %s (build "
			 "tree: make; else --lmdb-prog PATH)",
			 prog ? prog : "?");
		row_skip(r, why);
	} else {
		if (!json)
			fprintf(stderr,
				"pmguard bench all: lmdb, %llu "
				"round(s) ...\n",
				nrounds);
		lc = (struct lmdb_cfg){ prog, NULL, (int)nrounds, quick };
		bad |= do_lmdb(&lc, !nopku, buf);
	}
	l1 = loadavg();
	if (json) {
		struct json j;

		json_begin(&j, stdout, true);
		json_str(&j, "backend", pmg_backend_name(pmg_backend()));
		if (nopku)
			json_str(&j, "pku_skip", nopku);
		else
			json_null(&j, "pku_skip");
		json_bool(&j, "quick", quick);
		json_int(&j, "lmdb_rounds", (long long)nrounds);
		json_num(&j, "loadavg_start", l0, 2);
		json_num(&j, "loadavg_end", l1, 2);
		json_num(&j, "seconds", cli_now() - t0, 1);
		json_arr(&j, "rows");
		for (i = 0; i < nrows; i++) {
			json_obj(&j, NULL);
			json_str(&j, "group", rows[i].group);
			json_str(&j, "name", rows[i].name);
			json_str(&j, "unit", rows[i].unit);
			if (rows[i].value < 0) {
				json_null(&j, "value");
				json_str(&j, "skip", rows[i].skip);
			} else {
				json_num(&j, "value", rows[i].value, 4);
				if (rows[i].lo >= 0) {
					json_num(&j, "min", rows[i].lo, 4);
					json_num(&j, "max", rows[i].hi, 4);
				}
				json_int(&j, "n", rows[i].n);
				json_str(&j, "detail", rows[i].detail);
			}
			json_end(&j);
		}
		json_finish(&j);
	} else {
		printf("pmguard bench all: backend %s%s, LMDB %llu round(s), "
		       "load average %.2f -> %.2f, %.0f s\n",
		       pmg_backend_name(pmg_backend()),
		       quick ? ", --quick" : "", nrounds, l0, l1,
		       cli_now() - t0);
		if (nopku)
			printf("PKU rows: SKIP: %s\n", nopku);
		printf("\n%-8s %-44s %10s %20s  %s\n", "group", "row", "median",
		       "min..max (n)", "detail");
		for (i = 0; i < nrows; i++) {
			const struct row *r = &rows[i];
			bool x = r->unit[0] == 'x';
			char v[24], sp[48];

			if (r->value < 0) {
				printf("%-8s %-44s %10s %20s  %s\n", r->group,
				       r->name, "SKIP", "", r->skip);
				continue;
			}
			snprintf(v, sizeof(v), x ? "%.3fx" : "%.0f ns",
				 r->value);
			if (x && r->lo >= 0)
				snprintf(sp, sizeof(sp), "%.3f..%.3f (%d)",
					 r->lo, r->hi, r->n);
			else
				snprintf(sp, sizeof(sp), "(%d)", r->n);
			printf("%-8s %-40s %10s %20s  %s\n", r->group, r->name,
			       v, sp, r->detail);
		}
		printf("\nratios are reported, never asserted: compare within "
		       "one run (docs/performance.md)\n");
	}
	free(buf);
	return bad ? 1 : 0;
}
