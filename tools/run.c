// SPDX-License-Identifier: MIT
/*
 * pmguard run / pmguard learn: protect an unmodified, dynamically linked
 * program by preloading libpmguard-run.so (src/run/preload.c,
 * docs/run.md).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmds.h"

static void run_usage(FILE *f, const char *verb)
{
	if (!strcmp(verb, "learn"))
		fprintf(f,
"usage: pmguard learn -o SITES [--report FILE] [--lib PATH]\n"
"                     [--lmdb-writemap] -- PROG [ARGS...]\n"
"\n"
"Run PROG under `pmguard run` in audit mode and write every distinct\n"
"instruction that wrote protected memory outside a window to SITES, one\n"
"per line: MODULE+0xOFFSET COUNT SYMBOL (stable across ASLR), most\n"
"frequent first.  Feed SITES to `pmguard run --allow`.\n"
"\n"
"  -o, --output SITES  the sites file (replaced)\n"
"  --report FILE       append the audit reports to FILE (default: none)\n"
"  --lib PATH          the interposition library (default: found next to\n"
"                      pmguard, or $PMGUARD_RUN_LIB)\n"
"  --lmdb-writemap     add MDB_WRITEMAP to every LMDB environment opened\n"
"\n"
"Exit status: PROG's; 2 bad options; 127 PROG could not be run.\n");
	else
		fprintf(f,
"usage: pmguard run [--mode strict|relaxed|audit|contain] [--report FILE]\n"
"                   [--allow SITES] [--lib PATH] [--lmdb-writemap]\n"
"                   -- PROG [ARGS...]\n"
"\n"
"Run an unmodified, dynamically linked PROG with libpmguard-run.so\n"
"preloaded: LMDB environments opened with MDB_WRITEMAP and libpmem /\n"
"libpmem2 mappings are protected; writes outside LMDB write transactions\n"
"and libpmem's copy calls are stray and handled by the fault mode.\n"
"\n"
"  --mode M          strict (default), relaxed, audit or contain\n"
"  --report FILE     append fault reports and module lines to FILE\n"
"                    (default: stderr); read it with `pmguard report`\n"
"  --allow SITES     let the writes at the sites of SITES (from `pmguard\n"
"                    learn`) through, one fault each\n"
"  --lib PATH        the interposition library (default: found next to\n"
"                    pmguard, or $PMGUARD_RUN_LIB)\n"
"  --lmdb-writemap   add MDB_WRITEMAP to every LMDB environment opened\n"
"                    (for programs such as mdb_load that do not ask for\n"
"                    it; never mix with processes that do not)\n"
"\n"
"Exit status: PROG's; 2 bad options or a static PROG; 127 PROG could not\n"
"be run.\n");
}

/* PROG as execvp() would find it. */
static int find_prog(const char *prog, char *out, size_t n)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];

	if (strchr(prog, '/')) {
		snprintf(out, n, "%s", prog);
		return access(out, X_OK) ? -errno : 0;
	}
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		size_t l = strcspn(path, ":");

		snprintf(buf, sizeof(buf), "%.*s/%s", (int)l,
			 l ? path : ".", prog);
		if (!access(buf, X_OK)) {
			snprintf(out, n, "%s", buf);
			return 0;
		}
		path += l + (path[l] == ':');
	}
	return -ENOENT;
}

/* 1: ELF without PT_INTERP (static), 0: anything else (dynamic, script) */
static int is_static(const char *file)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	int fd = open(file, O_RDONLY | O_CLOEXEC), i, st = 1;

	if (fd < 0)
		return 0;
	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64) {
		close(fd);
		return 0;
	}
	for (i = 0; i < eh.e_phnum; i++) {
		if (pread(fd, &ph, sizeof(ph),
			  (off_t)(eh.e_phoff + (size_t)i * eh.e_phentsize)) !=
		    sizeof(ph))
			break;
		if (ph.p_type == PT_INTERP)
			st = 0;
	}
	close(fd);
	return st;
}

static int find_lib(const char *opt, char *out, size_t n)
{
	const char *env = getenv("PMGUARD_RUN_LIB");
	const char *rel[] = { "libpmguard-run.so", "../lib/libpmguard-run.so",
			      "../lib/pmguard/libpmguard-run.so" };
	char self[PATH_MAX];
	ssize_t l;
	size_t i;

	if (opt || (env && *env)) {
		snprintf(out, n, "%s", opt ? opt : env);
		if (access(out, R_OK))
			return cli_error("run: interposition library %s: %s",
					 out, strerror(errno));
		return 0;
	}
	l = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (l <= 0)
		return cli_error("run: cannot find my own binary");
	self[l] = 0;
	*strrchr(self, '/') = 0;
	for (i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		snprintf(out, n, "%.3800s/%s", self, rel[i]);
		if (!access(out, R_OK))
			return 0;
	}
	return cli_error("run: libpmguard-run.so not found next to %s "
			 "(set PMGUARD_RUN_LIB or --lib)", self);
}

struct run_opts {
	const char *mode, *report, *allow, *lib, *out;
	bool writemap;
	int argi;
};

static int parse(int argc, char **argv, const char *verb, struct run_opts *o)
{
	int i;

	memset(o, 0, sizeof(*o));
	o->mode = "strict";
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char **dst = NULL;

		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			run_usage(stdout, verb);
			exit(0);
		}
		if (!strcmp(a, "--lmdb-writemap")) {
			o->writemap = true;
			continue;
		}
		if (!strcmp(a, "--report"))
			dst = &o->report;
		else if (!strcmp(a, "--lib"))
			dst = &o->lib;
		else if (!strcmp(verb, "run") && !strcmp(a, "--mode"))
			dst = &o->mode;
		else if (!strcmp(verb, "run") && !strcmp(a, "--allow"))
			dst = &o->allow;
		else if (!strcmp(verb, "learn") &&
			 (!strcmp(a, "-o") || !strcmp(a, "--output")))
			dst = &o->out;
		else if (a[0] == '-')
			return cli_error("%s: unknown option '%s' (see "
					 "--help)", verb, a);
		else
			break;
		if (i + 1 >= argc)
			return cli_error("%s: %s needs a value", verb, a);
		*dst = argv[++i];
	}
	if (i >= argc)
		return cli_error("%s: no program given (pmguard %s [options] "
				 "-- PROG [ARGS])", verb, verb);
	if (strcmp(o->mode, "strict") && strcmp(o->mode, "relaxed") &&
	    strcmp(o->mode, "audit") && strcmp(o->mode, "contain"))
		return cli_error("run: --mode '%s': strict, relaxed, audit or "
				 "contain", o->mode);
	if (!strcmp(verb, "learn") && !o->out)
		return cli_error("learn: -o SITES is required");
	o->argi = i;
	return 0;
}

/* Set the environment for PROG; returns 0 or the exit status. */
static int setup(const struct run_opts *o, char **argv, char *lib,
		 size_t libn)
{
	char prog[PATH_MAX], pre[2 * PATH_MAX + 16], num[16];
	const char *old = getenv("LD_PRELOAD");
	int rc;

	if (find_prog(argv[o->argi], prog, sizeof(prog))) {
		cli_error("run: %s: not found or not executable",
			  argv[o->argi]);
		return 127;
	}
	if (is_static(prog))
		return cli_error("run: %s is statically linked (no program "
				 "interpreter): a preloaded library cannot "
				 "reach it; link it dynamically, or use "
				 "libpmguard directly", prog);
	rc = find_lib(o->lib, lib, libn);
	if (rc)
		return rc;
	/* ours last: a library preloaded by the caller wraps us */
	if (old && *old)
		snprintf(pre, sizeof(pre), "%s:%s", old, lib);
	else
		snprintf(pre, sizeof(pre), "%s", lib);
	setenv("LD_PRELOAD", pre, 1);
	setenv("PMGUARD_FAULT_MODE", o->mode, 1);
	if (o->report) {
		int fd = open(o->report, O_WRONLY | O_CREAT | O_APPEND, 0644);

		if (fd < 0)
			return cli_error("run: --report %s: %s", o->report,
					 strerror(errno));
		snprintf(num, sizeof(num), "%d", fd);
		setenv("PMGUARD_REPORT_FD", num, 1);
	}
	if (o->allow) {
		char abs[PATH_MAX];

		if (!realpath(o->allow, abs))
			return cli_error("run: --allow %s: %s", o->allow,
					 strerror(errno));
		setenv("PMGUARD_RUN_ALLOW", abs, 1);
	}
	if (o->writemap)
		setenv("PMGUARD_RUN_LMDB_WRITEMAP", "1", 1);
	return 0;
}

int cmd_run(int argc, char **argv)
{
	struct run_opts o;
	char lib[PATH_MAX];
	int rc = parse(argc, argv, "run", &o);

	if (rc)
		return rc;
	rc = setup(&o, argv, lib, sizeof(lib));
	if (rc)
		return rc;
	execvp(argv[o.argi], argv + o.argi);
	cli_error("run: %s: %s", argv[o.argi], strerror(errno));
	return 127;
}

/* Merge the lines the preloaded processes appended: sum per site. */
struct site {
	char *where, *sym;
	unsigned long long n;
};

static int by_count(const void *a, const void *b)
{
	const struct site *x = a, *y = b;

	if (x->n != y->n)
		return x->n < y->n ? 1 : -1;
	return strcmp(x->where, y->where);
}

static int merge(const char *raw, const char *out)
{
	FILE *f = fopen(raw, "r"), *o;
	struct site *s = NULL;
	size_t ns = 0, i;
	char line[PATH_MAX + 256];

	if (f) {
		while (fgets(line, sizeof(line), f)) {
			char where[PATH_MAX + 32], sym[256] = "?";
			unsigned long long n;

			if (line[0] == '#' ||
			    sscanf(line, "%4127s %llu %255s", where, &n,
				   sym) < 2)
				continue;
			for (i = 0; i < ns; i++)
				if (!strcmp(s[i].where, where))
					break;
			if (i == ns) {
				struct site *t = realloc(s, (ns + 1) *
							 sizeof(*s));

				if (!t)
					break;
				s = t;
				s[ns].where = strdup(where);
				s[ns].sym = strdup(sym);
				s[ns++].n = 0;
			}
			s[i].n += n;
		}
		fclose(f);
	}
	qsort(s, ns, sizeof(*s), by_count);
	o = fopen(out, "w");
	if (!o)
		return cli_error("learn: %s: %s", out, strerror(errno));
	fprintf(o, "# pmguard learn: %zu site(s): MODULE+0xOFFSET COUNT "
		   "SYMBOL\n", ns);
	for (i = 0; i < ns; i++) {
		char *plus = strrchr(s[i].where, '+'), sym[PATH_MAX];

		/* dladdr() sees exported symbols only: ask libdw */
		if (!strcmp(s[i].sym, "?") && plus) {
			*plus = 0;
			if (report_symbol(s[i].where, strtoul(plus + 1, NULL,
							      16),
					  sym, sizeof(sym))) {
				char *sp = strstr(sym, " at ");

				/* one word: "func+0x12@file.c:34" */
				if (sp)
					memmove(sp + 1, sp + 4,
						strlen(sp + 4) + 1);
				if (sp)
					*sp = '@';
				while ((sp = strchr(sym, ' ')))
					*sp = '_';
				free(s[i].sym);
				s[i].sym = strdup(sym);
			}
			*plus = '+';
		}
		fprintf(o, "%s %llu %s\n", s[i].where, s[i].n,
			s[i].sym ? s[i].sym : "?");
	}
	fclose(o);
	fprintf(stderr, "pmguard learn: %zu site(s) written to %s\n", ns,
		out);
	return 0;
}

int cmd_learn(int argc, char **argv)
{
	struct run_opts o;
	char lib[PATH_MAX], raw[] = "/tmp/pmguard-learn.XXXXXX";
	int rc = parse(argc, argv, "learn", &o), st, fd;
	pid_t pid;

	if (rc)
		return rc;
	o.mode = "audit";
	fd = mkstemp(raw);
	if (fd < 0)
		return cli_error("learn: temporary file: %s", strerror(errno));
	close(fd);
	rc = setup(&o, argv, lib, sizeof(lib));
	if (rc) {
		unlink(raw);
		return rc;
	}
	setenv("PMGUARD_RUN_LEARN", raw, 1);
	if (!o.report)
		setenv("PMGUARD_REPORT_FD", "-1", 1);
	pid = fork();
	if (pid < 0) {
		unlink(raw);
		return cli_error("learn: fork: %s", strerror(errno));
	}
	if (pid == 0) {
		execvp(argv[o.argi], argv + o.argi);
		fprintf(stderr, "pmguard: learn: %s: %s\n", argv[o.argi],
			strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	rc = merge(raw, o.out);
	unlink(raw);
	if (rc)
		return rc;
	if (WIFSIGNALED(st)) {
		fprintf(stderr, "pmguard learn: %s was killed by signal %d\n",
			argv[o.argi], WTERMSIG(st));
		return 128 + WTERMSIG(st);
	}
	return WEXITSTATUS(st);
}
