// SPDX-License-Identifier: MIT
/*
 * pmguard run / pmguard learn: protect an unmodified, dynamically linked
 * program by preloading libpmguard-run.so (src/run/, docs/run.md).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "../src/options.h"
#include "../src/procfs.h"
#include "../src/run/run.h"
#include "../src/safefile.h"
#include "cmds.h"

/* How long the preload may take to say it loaded (ld.so, constructors):
 * PMGUARD_RUN_CONFIRM_S (1 to 3600, default 30; options.c), set by
 * setup(). */
static long confirm_s;

/* --report syslog[:SOCKET]: the socket ("" for a report file) */
static char syslog_sock[sizeof(((struct sockaddr_un *)0)->sun_path)];

/*
 * The files named by the user that pmguard opens on the run's behalf
 * (docs/design.md, "Files pmguard opens: threat model"): each is made
 * absolute by its directory only (the last component is never
 * resolved), opened in that directory without following a symbolic
 * link or waiting on a FIFO, and checked by what it is (safefile.c).
 * --report FILE is opened again at the end (the end-of-run line) in the
 * directory it was first opened in; -o SITES is written as a new file
 * renamed over the name, never truncated in place.
 */
static char rep_abs[PATH_MAX]; /* --report FILE, made absolute */
/* --report FILE open, with its identity: PROG's processes get it
 * (PMGUARD_RUN_REPORT_FD), for when they cannot open the path (after a
 * privilege drop, in a chroot) */
static int rep_fd = -1;
static struct stat rep_st;
static struct _pmg_dirid rep_dir; /* its directory */
static char out_abs[PATH_MAX]; /* learn -o SITES, made absolute */
static struct _pmg_dirid out_dir; /* its directory */

/* Why a checked open failed: safefile.c's reason, or strerror(). */
static const char *file_why(int err, unsigned how)
{
	const char *w = _pmg_open_why(err, how);

	return w ? w : strerror(-err);
}

/* @path made absolute into @abs (@n bytes) by its directory's realpath();
 * 0 or -errno. */
static int abs_of(const char *path, char *abs, size_t n)
{
	const char *base = strrchr(path, '/');
	char dir[PATH_MAX], real[PATH_MAX];

	base = base ? base + 1 : path;
	_pmg_dir_of(dir, sizeof(dir), path);
	if (!realpath(dir, real))
		return -errno;
	if ((size_t)snprintf(abs, n, "%s/%s", strcmp(real, "/") ? real : "",
			     base) >= n)
		return -ENAMETOOLONG;
	return 0;
}

/* The absolute @abs opened in its directory (*@id: recorded the first
 * time, checked after), checked (safefile.h); its status in *@st if
 * @st.  The fd or -errno. */
static int open_in_dir(const char *abs, struct _pmg_dirid *id, int flags,
		       unsigned how, struct stat *st)
{
	const char *base;
	int dfd = _pmg_dir_open(abs, id, &base), fd;

	if (dfd < 0)
		return dfd;
	fd = _pmg_open_checked(dfd, base, flags, 0644, id->uid, how, NULL);
	close(dfd);
	if (fd >= 0 && st && fstat(fd, st)) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

/* A datagram socket connected to @path, or -errno. */
static int syslog_open(const char *path)
{
	struct sockaddr_un sa;
	int fd, e;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, strlen(path));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

/* @msg to syslog_sock as the preload sends its lines: user.warning. */
static void syslog_say(const char *msg)
{
	char buf[2048];
	size_t l = strlen(msg);
	int fd = syslog_open(syslog_sock), n;

	while (l && msg[l - 1] == '\n')
		l--;
	n = snprintf(buf, sizeof(buf), "<12>pmguard[%d]: %.*s", (int)getpid(),
		     (int)l, msg);
	if (n >= (int)sizeof(buf))
		n = (int)sizeof(buf) - 1;
	if (fd < 0 || n < 0 || send(fd, buf, (size_t)n, MSG_NOSIGNAL) < 0)
		fprintf(stderr, "%s", msg);
	if (fd >= 0)
		close(fd);
}

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
			"  -o, --output SITES  the sites file (a regular file, replaced)\n"
			"  --report FILE       append the audit reports to FILE (default: none);\n"
			"                      `syslog` or `syslog:/SOCKET` as for pmguard run\n"
			"  --lib PATH          the interposition library (default: found next to\n"
			"                      pmguard, or $PMGUARD_RUN_LIB)\n"
			"  --lmdb-writemap     add MDB_WRITEMAP to every LMDB environment opened\n"
			"\n"
			"Exit status: PROG's; 2 bad options or environment, or a PROG ld.so\n"
			"would run without the library (static, 32-bit, set-user-ID); 127 PROG\n"
			"could not be run, or ran without the library loaded (then stopped,\n"
			"said).\n");
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
			"                    (default: stderr); read it with `pmguard report`;\n"
			"                    `syslog` (/dev/log: journald, rsyslog) or\n"
			"                    `syslog:/SOCKET`: one syslog message per line\n"
			"                    (tag pmguard, facility user); ./syslog for a file\n"
			"  --allow SITES     let the writes at the sites of SITES (from `pmguard\n"
			"                    learn`) through, one fault each\n"
			"  --lib PATH        the interposition library (default: found next to\n"
			"                    pmguard, or $PMGUARD_RUN_LIB)\n"
			"  --lmdb-writemap   add MDB_WRITEMAP to every LMDB environment opened\n"
			"                    (for programs such as mdb_load that do not ask for\n"
			"                    it; never mix with processes that do not)\n"
			"\n"
			"pmguard run stays PROG's parent: it checks that the library loaded into\n"
			"PROG (PROG is killed otherwise), passes signals sent to it on to PROG,\n"
			"stops when PROG stops (job control), and says once, at the end, if no\n"
			"process of the run protected anything.\n"
			"\n"
			"Exit status: PROG's (a signal that killed PROG kills pmguard too); 2 bad\n"
			"options or environment, or a PROG ld.so would run without the library\n"
			"(static, 32-bit, set-user-ID: refused before it runs); 127 PROG could\n"
			"not be run, or ran without the library loaded (then stopped, said).\n");
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

/*
 * Why ld.so would run @file without a preloaded x86-64 library, written
 * to @why (returns true), or false: a static ELF (no PT_INTERP), an ELF
 * of another class or machine (a 32-bit program's ld.so ignores a 64-bit
 * library), a program run in secure-execution mode (set-user-ID or
 * set-group-ID to another owner, file capabilities for a user other than
 * root: ld.so ignores LD_PRELOAD paths with a slash).  A script: its
 * interpreter (#!), once.
 */
static bool unreachable(const char *file, char *why, size_t n, int depth)
{
	struct stat st;
	struct statvfs vfs;
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	/* never waits: a FIFO named as PROG (or as a script's
	 * interpreter) is no program, exec refuses it */
	int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY), i;
	bool interp = false;
	ssize_t r;

	if (fd < 0)
		return false;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return false;
	}
	r = pread(fd, &eh, sizeof(eh), 0);
	if (r >= 2 && !memcmp(&eh, "#!", 2) && depth == 0) {
		char line[PATH_MAX + 2], *p, *e;

		r = pread(fd, line, sizeof(line) - 1, 0);
		close(fd);
		line[r > 0 ? r : 0] = 0;
		p = line + 2 + strspn(line + 2, " \t");
		e = p + strcspn(p, " \t\n");
		*e = 0;
		return *p && unreachable(p, why, n, 1);
	}
	if (fstat(fd, &st) == 0 &&
	    (((st.st_mode & S_ISUID) && st.st_uid != getuid()) ||
	     ((st.st_mode & S_ISGID) && st.st_gid != getgid())) &&
	    !(fstatvfs(fd, &vfs) == 0 && (vfs.f_flag & ST_NOSUID)) &&
	    prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1) {
		close(fd);
		snprintf(why, n,
			 "%s is set-%s-ID (to %s %u): ld.so runs it in "
			 "secure-execution mode and ignores the preloaded "
			 "library; it would run unprotected",
			 file, (st.st_mode & S_ISUID) ? "user" : "group",
			 (st.st_mode & S_ISUID) ? "uid" : "gid",
			 (st.st_mode & S_ISUID) ? st.st_uid : st.st_gid);
		return true;
	}
	if (getuid() != 0 &&
	    fgetxattr(fd, "security.capability", NULL, 0) > 0) {
		close(fd);
		snprintf(why, n,
			 "%s has file capabilities: ld.so runs it in "
			 "secure-execution mode and ignores the preloaded "
			 "library; it would run unprotected",
			 file);
		return true;
	}
	if (r != sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG)) {
		close(fd);
		return false;
	}
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64) {
		close(fd);
		snprintf(why, n,
			 "%s is %s: its ld.so cannot load the x86-64 "
			 "interposition library; it would run unprotected",
			 file,
			 eh.e_ident[EI_CLASS] == ELFCLASS32
				 ? "a 32-bit program"
				 : "not an x86-64 program");
		return true;
	}
	for (i = 0; i < eh.e_phnum; i++) {
		if (pread(fd, &ph, sizeof(ph),
			  (off_t)(eh.e_phoff + (size_t)i * eh.e_phentsize)) !=
		    sizeof(ph))
			break;
		if (ph.p_type == PT_INTERP)
			interp = true;
	}
	close(fd);
	if (!interp)
		snprintf(why, n,
			 "%s is statically linked (no program interpreter): "
			 "a preloaded library cannot reach it; link it "
			 "dynamically, or use libpmguard directly",
			 file);
	return !interp;
}

/*
 * Where `make install` puts libpmguard-run.so, relative to the directory it
 * puts pmguard in (mk/install.mk: pkglibdir from bindir, written to
 * $(O)/gen/pmg_paths.h): relative, so that an installed tree works wherever
 * it is unpacked (a package extracted with dpkg -x, a DESTDIR).
 */
#if __has_include("pmg_paths.h")
#include "pmg_paths.h"
#endif
#ifndef PMG_RUN_LIBREL
#define PMG_RUN_LIBREL "../lib/pmguard"
#endif

/*
 * The library: --lib, else $PMGUARD_RUN_LIB, else next to this binary (the
 * build tree: $(O)/pmguard and $(O)/libpmguard-run.so), else in the
 * installed place relative to it.  Nothing absolute is compiled in, so an
 * installed pmguard never falls back to the tree it was built in.
 */
static int find_lib(const char *opt, char *out, size_t n)
{
	const char *env = getenv("PMGUARD_RUN_LIB");
	const char *rel[] = { "libpmguard-run.so",
			      PMG_RUN_LIBREL "/libpmguard-run.so" };
	char self[PATH_MAX];
	ssize_t l;
	size_t i;

	if (opt || (env && *env)) {
		const char *p = opt ? opt : env;

		/* absolute: a process of the run may change directory */
		if (!realpath(p, self))
			return cli_error("run: interposition library %s: %s", p,
					 strerror(errno));
		snprintf(out, n, "%s", self);
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
	return cli_error("run: libpmguard-run.so not found in %s nor in "
			 "%s/%s (set PMGUARD_RUN_LIB or --lib)",
			 self, self, PMG_RUN_LIBREL);
}

/*
 * Root runs PROG: a process of it that drops privileges (a daemon that
 * setuid()s to its own user) and then runs a program has ld.so load @lib
 * as that user, which fails if @lib or a directory above it is closed to
 * others (a build tree under root's 0700 home): that program runs
 * without pmguard.  Said as a warning (PROG may never drop them).
 */
static void warn_unreachable_lib(const char *verb, const char *lib)
{
	char dir[PATH_MAX], *slash;
	struct stat st;

	if (geteuid() != 0)
		return;
	if (stat(lib, &st) == 0 && !(st.st_mode & S_IROTH)) {
		fprintf(stderr,
			"pmguard %s: warning: the interposition library %s "
			"is not readable by other users (mode %04o): a "
			"program run by a process that dropped root's "
			"privileges would run unprotected (install pmguard, "
			"or copy the library where all may read it, --lib)\n",
			verb, lib, (unsigned)(st.st_mode & 07777));
		return;
	}
	snprintf(dir, sizeof(dir), "%s", lib);
	while ((slash = strrchr(dir, '/')) && slash != dir) {
		*slash = 0;
		if (stat(dir, &st) == 0 && !(st.st_mode & S_IXOTH)) {
			fprintf(stderr,
				"pmguard %s: warning: the interposition "
				"library %s is under %s, which other users "
				"cannot search (mode %04o): a program run by a "
				"process that dropped root's privileges would "
				"run unprotected (install pmguard, or copy the "
				"library where all may reach it, --lib)\n",
				verb, lib, dir, (unsigned)(st.st_mode & 07777));
			return;
		}
	}
}

struct run_opts {
	const char *mode, *report, *allow, *lib, *out;
	bool writemap;
	int argi;
};

static int parse(int argc, char **argv, const char *verb, struct run_opts *o)
{
	struct stat st;
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
	if (o->allow && (lstat(o->allow, &st) || !S_ISREG(st.st_mode)))
		return cli_error("run: --allow %s: %s", o->allow,
				 errno == ENOENT ? strerror(errno)
				 : S_ISDIR(st.st_mode)
					 ? "is a directory, not a sites file"
				 : S_ISLNK(st.st_mode)
					 ? _pmg_open_why(-ELOOP, 0)
					 : "not a regular file");
	o->argi = i;
	return 0;
}

static int bad_envs;

static void bad_env(const char *msg, void *arg)
{
	(void)arg;
	cli_error("run: %s", msg);
	bad_envs++;
}

/* Set the environment for PROG; returns 0 or the exit status. */
static int setup(const struct run_opts *o, char **argv, char *lib,
		 size_t libn)
{
	char prog[PATH_MAX], pre[2 * PATH_MAX + 16], why[2 * PATH_MAX];
	const char *old = getenv("LD_PRELOAD");
	struct _pmg_opts opts, run;
	struct stat st;
	int rc;

	/* the preload's PMGUARD_RUN_* are this run's, set below from its
	 * options: never an allow list, report path, learn file or
	 * MDB_WRITEMAP inherited from a caller (a nested run, an export) */
	unsetenv("PMGUARD_RUN_ALLOW");
	unsetenv("PMGUARD_RUN_LEARN");
	unsetenv("PMGUARD_RUN_LMDB_WRITEMAP");
	unsetenv("PMGUARD_RUN_REPORT");
	unsetenv("PMGUARD_RUN_REPORT_FD");
	unsetenv("PMGUARD_RUN_STATUS");
	unsetenv("PMGUARD_RUN_STATUS_SOCK");
	unsetenv("PMGUARD_RUN_CONFIRM");
	/* every PMGUARD_* value the library will read: bad is an error */
	bad_envs = 0;
	(void)_pmg_opts_from_env_group(&opts, _PMG_OPT_PERSIST, bad_env, NULL);
	(void)_pmg_opts_from_env_group(&opts, _PMG_OPT_LIB, bad_env, NULL);
	(void)_pmg_opts_from_env_group(&run, _PMG_OPT_RUN, bad_env, NULL);
	if (bad_envs)
		return 2;
	confirm_s = run.run_confirm_s;
	/* a report fd by number must be open for writing here (without
	 * --report, which replaces it) */
	if (!o->report && opts.report_fd >= 0) {
		int fl = fcntl(opts.report_fd, F_GETFL);

		if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY)
			return cli_error(
				"run: PMGUARD_REPORT_FD='%d': descriptor "
				"%d is not open for writing",
				opts.report_fd, opts.report_fd);
	}

	if (find_prog(argv[o->argi], prog, sizeof(prog))) {
		cli_error("run: %s: not found or not executable",
			  argv[o->argi]);
		return 127;
	}
	if (unreachable(prog, why, sizeof(why), 0))
		return cli_error("run: %s", why);
	rc = find_lib(o->lib, lib, libn);
	if (rc)
		return rc;
	warn_unreachable_lib(o->out ? "learn" : "run", lib);
	/* ld.so splits LD_PRELOAD at blanks and colons, and would ignore
	 * the pieces: the program would run unprotected */
	if (strpbrk(lib, " :\t\n"))
		return cli_error("run: the interposition library's path '%s' "
				 "holds a blank or a ':', which LD_PRELOAD "
				 "cannot carry: install pmguard (or copy the "
				 "library, --lib) under a path without them",
				 lib);
	/* ours last: a library preloaded by the caller wraps us */
	if (old && *old)
		snprintf(pre, sizeof(pre), "%s:%s", old, lib);
	else
		snprintf(pre, sizeof(pre), "%s", lib);
	setenv("LD_PRELOAD", pre, 1);
	setenv("PMGUARD_FAULT_MODE", o->mode, 1);
	syslog_sock[0] = 0;
	if (o->report && (!strcmp(o->report, "syslog") ||
			  !strncmp(o->report, "syslog:", 7))) {
		/* syslog (/dev/log: journald, rsyslog), or a socket given;
		 * each process connects by the path, like a report file */
		const char *sock = o->report[6] ? o->report + 7 : "/dev/log";
		char v[sizeof(syslog_sock) + 8];
		int fd;

		if (sock[0] != '/')
			return cli_error("run: --report %s: the syslog socket "
					 "must be an absolute path",
					 o->report);
		fd = syslog_open(sock);
		if (fd < 0)
			return cli_error("run: --report %s: cannot send to "
					 "the syslog socket %s: %s",
					 o->report, sock, strerror(-fd));
		close(fd);
		snprintf(syslog_sock, sizeof(syslog_sock), "%s", sock);
		snprintf(v, sizeof(v), "syslog:%s", sock);
		setenv("PMGUARD_RUN_REPORT", v, 1);
		unsetenv("PMGUARD_REPORT_FD");
	} else if (o->report) {
		/* each process opens the file by its path (never a number
		 * a program may reuse): a regular file or a terminal */
		int fd;

		memset(&rep_dir, 0, sizeof(rep_dir));
		rc = abs_of(o->report, rep_abs, sizeof(rep_abs));
		fd = rc ? rc
			: open_in_dir(rep_abs, &rep_dir,
				      O_WRONLY | O_CREAT | O_APPEND, PMG_SF_TTY,
				      NULL);
		if (fd < 0)
			return cli_error("run: --report %s: %s", o->report,
					 file_why(fd, PMG_SF_TTY));
		if (rep_fd >= 0)
			close(rep_fd);
		rep_fd = fd;
		if (fcntl(fd, F_SETFD, FD_CLOEXEC) || fstat(fd, &rep_st))
			return cli_error("run: --report %s: %s", o->report,
					 strerror(errno));
		setenv("PMGUARD_RUN_REPORT", rep_abs, 1);
		unsetenv("PMGUARD_REPORT_FD");
	}
	if (o->allow) {
		/* checked here, and passed with its identity and a sum of
		 * its content: each process reads that file or none
		 * (start.c) */
		char abs[PATH_MAX], v[PATH_MAX + 64];
		struct _pmg_dirid id = { 0 };
		uint64_t sum = 0;
		int fd;

		rc = abs_of(o->allow, abs, sizeof(abs));
		fd = rc ? rc : open_in_dir(abs, &id, O_RDONLY, 0, &st);
		if (fd >= 0) {
			rc = _pmg_fd_digest(fd, &sum);
			close(fd);
			fd = rc ? rc : 0;
		}
		if (fd < 0)
			return cli_error("run: --allow %s: %s", o->allow,
					 file_why(fd, 0));
		/* whoever may write the list chooses the stores that pass:
		 * writable by group or others, it is nobody's list */
		if (st.st_mode & 022)
			return cli_error("run: --allow %s: writable by %s "
					 "(mode %04o): refused (chmod go-w)",
					 o->allow,
					 st.st_mode & 002 ? "others" : "group",
					 (unsigned)(st.st_mode & 07777));
		if ((size_t)snprintf(v, sizeof(v), "%s:%llu:%llu:%016llx", abs,
				     (unsigned long long)st.st_dev,
				     (unsigned long long)st.st_ino,
				     (unsigned long long)sum) >= sizeof(v))
			return cli_error("run: --allow %s: %s", o->allow,
					 strerror(ENAMETOOLONG));
		setenv("PMGUARD_RUN_ALLOW", v, 1);
	}
	if (o->writemap)
		setenv("PMGUARD_RUN_LMDB_WRITEMAP", "1", 1);
	return 0;
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

/*
 * @out (out_abs, in the directory out_writable() recorded) written whole:
 * a new file, ".NAME.XXXXXXXX" in that directory (O_EXCL, never through
 * a link), renamed over the name.  A symbolic link or anything else not
 * a regular file put at the name meanwhile is refused, never written
 * through (the rename itself would replace the link, not its target).
 * The new file is 0644 less the umask, or, where it replaces a file
 * of this process's user, that file's permission bits less group's and
 * others' write.
 * Returns the open stream or NULL (said); *@dfd and @tmp for
 * sites_finish().
 */
static FILE *sites_new(const char *out, int *dfd, char *tmp, size_t n)
{
	const char *base;
	unsigned r = (unsigned)getpid() * 2654435761u;
	struct timespec ts;
	struct stat st;
	int fd = -1, i;
	FILE *o;

	*dfd = _pmg_dir_open(out_abs, &out_dir, &base);
	if (*dfd < 0) {
		cli_error("learn: -o %s: %s", out, file_why(*dfd, 0));
		return NULL;
	}
	for (i = 0; i < 100 && fd < 0; i++) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		r ^= (unsigned)ts.tv_nsec + (unsigned)i * 40503u;
		snprintf(tmp, n, ".%.200s.%08x", base, r);
		fd = openat(*dfd, tmp,
			    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
				    O_CLOEXEC,
			    0644);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	/* the old file's permission bits only when it is this user's
	 * own (another user may have put it there, in a sticky /tmp, with
	 * the bits of their choice); never writable by group or others,
	 * whose-ever it was: `run --allow` refuses such a list */
	if (fd >= 0 && !fstatat(*dfd, base, &st, AT_SYMLINK_NOFOLLOW) &&
	    S_ISREG(st.st_mode) && st.st_uid == geteuid())
		(void)fchmod(fd, st.st_mode & 0755);
	o = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!o) {
		cli_error("learn: -o %s: a new file in its directory: %s", out,
			  strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlinkat(*dfd, tmp, 0);
		}
		close(*dfd);
	}
	return o;
}

/* @o written out and renamed over -o's name; 0 or 2 (said). */
static int sites_finish(const char *out, FILE *o, int dfd, const char *tmp)
{
	const char *base = strrchr(out_abs, '/') + 1;
	struct stat st;
	int rc = 0;

	if (fflush(o) || fsync(fileno(o)) || ferror(o)) {
		rc = cli_error("learn: -o %s: %s", out, strerror(errno));
		fclose(o);
	} else if (fclose(o)) {
		rc = cli_error("learn: -o %s: %s", out, strerror(errno));
	} else if (!fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) &&
		   !S_ISREG(st.st_mode)) {
		rc = cli_error("learn: -o %s: %s: the sites are not written",
			       out,
			       file_why(S_ISLNK(st.st_mode) ? -ELOOP : -ENODEV,
					0));
	} else if (renameat(dfd, tmp, dfd, base)) {
		rc = cli_error("learn: -o %s: %s", out, strerror(errno));
	}
	if (rc)
		unlinkat(dfd, tmp, 0);
	close(dfd);
	return rc;
}

/* @src with learn.c's escapes (\ooo) undone into @dst (@n bytes). */
static void unescape(char *dst, size_t n, const char *src)
{
	size_t j = 0;

	for (; *src && j + 1 < n; src++) {
		if (src[0] == '\\' && src[1] >= '0' && src[1] <= '3' &&
		    src[2] >= '0' && src[2] <= '7' && src[3] >= '0' &&
		    src[3] <= '7') {
			dst[j++] = (char)((src[1] - '0') * 64 +
					  (src[2] - '0') * 8 + (src[3] - '0'));
			src += 3;
		} else {
			dst[j++] = *src;
		}
	}
	dst[j] = 0;
}

static int merge(int raw, const char *out)
{
	int d = dup(raw), dfd;
	FILE *f = d >= 0 && lseek(d, 0, SEEK_SET) == 0 ? fdopen(d, "r") : NULL;
	FILE *o;
	struct site *s = NULL;
	size_t ns = 0, i;
	char line[PATH_MAX + 256], tmp[256];

	if (!f && d >= 0)
		close(d);
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
	o = sites_new(out, &dfd, tmp, sizeof(tmp));
	if (!o)
		return 2;
	fprintf(o, "# pmguard learn: %zu site(s): MODULE+0xOFFSET COUNT "
		   "SYMBOL\n", ns);
	for (i = 0; i < ns; i++) {
		char *plus = strrchr(s[i].where, '+'), sym[PATH_MAX];

		/* dladdr() sees exported symbols only: ask libdw (the
		 * module's path unescaped: learn.c writes every blank,
		 * every byte not printable ASCII and the backslash as
		 * \ooo, so that sscanf("%s") above reads it as one word) */
		if (!strcmp(s[i].sym, "?") && plus) {
			char mod[PATH_MAX];

			*plus = 0;
			unescape(mod, sizeof(mod), s[i].where);
			if (report_symbol(mod, strtoul(plus + 1, NULL, 16), sym,
					  sizeof(sym))) {
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
	if (sites_finish(out, o, dfd, tmp))
		return 2;
	fprintf(stderr, "pmguard learn: %zu site(s) written to %s\n", ns,
		out);
	return 0;
}

/* ------------------------------------------------ PROG as a child */

static pid_t child = -1;
static pid_t parent0; /* pmguard's parent when the run began */
static struct sigaction saved[NSIG]; /* the dispositions pmguard got */
static bool caught[NSIG];

/* Every signal a process may send is passed on, except those that
 * cannot be caught, SIGCHLD (pmguard's own) and the synchronous faults. */
static bool passed_on(int sig)
{
	switch (sig) {
	case SIGKILL:
	case SIGSTOP:
	case SIGCHLD:
	case SIGSEGV:
	case SIGBUS:
	case SIGFPE:
	case SIGILL:
	case SIGTRAP:
	case SIGSYS:
	case SIGABRT:
		return false;
	}
	return true;
}

/*
 * A signal sent to pmguard (kill, timeout(1), sigqueue) goes on to PROG;
 * one the kernel or the terminal sent (SI_KERNEL: ^C, ^Z, hangup, window
 * size) reached PROG's process group already.  One PROG sent is never
 * sent back to it: from PROG in a process group of its own it was meant
 * for PROG's parent (a readiness notice, SIGUSR1 to getppid()) and goes
 * on to pmguard's parent; from PROG in pmguard's group it may as well
 * have been sent to the whole group (kill(0, sig), `trap 'kill 0' EXIT`),
 * which PROG got itself and pmguard's parent, in another group, must not
 * get: it is passed nowhere.
 */
static void forward(int sig, siginfo_t *si, void *uc)
{
	int e = errno;

	(void)uc;
	if (child <= 0 || si->si_pid == getpid() ||
	    (si->si_code != SI_USER && si->si_code != SI_QUEUE &&
	     si->si_code != SI_TKILL)) {
		errno = e;
		return;
	}
	if (si->si_pid == child) {
		/* PROG in pmguard's group may have signalled the group
		 * (kill(0, sig): it has its copy): passed nowhere; PROG in a
		 * group of its own meant pmguard, its parent */
		if (getpgid(child) != getpgrp() && parent0 > 1 &&
		    getppid() == parent0)
			kill(parent0, sig);
	} else if (si->si_code == SI_QUEUE) {
		sigqueue(child, sig, si->si_value);
	} else {
		kill(child, sig);
	}
	errno = e;
}

static void forward_all(void)
{
	struct sigaction sa;
	int sig;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = forward;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	for (sig = 1; sig < NSIG; sig++)
		caught[sig] = passed_on(sig) &&
			      !sigaction(sig, &sa, &saved[sig]);
}

/* Back to the dispositions pmguard was given (before it writes anything:
 * a caught SIGTTOU would make a background write retry forever). */
static void forward_none(void)
{
	int sig;

	for (sig = 1; sig < NSIG; sig++)
		if (caught[sig])
			sigaction(sig, &saved[sig], NULL);
	memset(caught, 0, sizeof(caught));
}

/* pmguard's process group is the terminal's foreground job. */
static bool foreground_job(void)
{
	int fd = open("/dev/tty", O_RDONLY | O_NOCTTY | O_CLOEXEC);
	pid_t pg = fd >= 0 ? tcgetpgrp(fd) : -1;

	if (fd >= 0)
		close(fd);
	return pg > 0 && pg == getpgrp();
}

/*
 * PROG stopped: stop the same way, so that the shell sees the job
 * stopped; SIGCONT to pmguard (fg, kill -CONT) goes on to PROG.  Only a
 * job-control stop (^Z, SIGTSTP, SIGTTIN, SIGTTOU: the terminal's, or
 * PROG stopping itself as less and vi do), or a SIGSTOP while pmguard is
 * the terminal's foreground job: a SIGSTOP someone sent to PROG alone
 * (a debugger, a scheduler) is theirs to undo with a SIGCONT to PROG,
 * and a pmguard stopped then would never be continued nor reap PROG.
 * Returns whether pmguard stopped.
 */
static bool stop_like(int sig)
{
	struct sigaction dfl, old;
	sigset_t set;

	if (sig == SIGSTOP && !foreground_job())
		return false;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	if (sig != SIGSTOP && sigaction(sig, &dfl, &old))
		sig = SIGSTOP;
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	raise(sig);
	if (sig != SIGSTOP)
		sigaction(sig, &old, NULL);
	return true;
}

/* Die of @sig as PROG did (no core file of our own), else 128 + sig. */
static int die_like(int sig)
{
	struct rlimit rl = { 0, 0 };
	sigset_t set;

	setrlimit(RLIMIT_CORE, &rl);
	signal(sig, SIG_DFL);
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	fflush(NULL);
	raise(sig);
	return 128 + sig;
}

static long ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000L +
	       (t.tv_nsec - t0->tv_nsec) / 1000000L;
}

/* @lib is mapped into PROG: ld.so took it, its constructor will answer. */
static bool lib_mapped(const char *lib)
{
	char path[64], line[PATH_MAX + 128], real[PATH_MAX];
	bool found = false;
	FILE *f;

	if (!realpath(lib, real))
		return false;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)child);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *p = strchr(line, '/'), *nl;

		if (!p)
			continue;
		nl = strchr(p, '\n');
		if (nl)
			*nl = 0;
		found = !strcmp(p, real);
	}
	fclose(f);
	return found;
}

/*
 * Wait for the preload's byte on @fd: up to confirm_s seconds of PROG not
 * stopped, or for as long as it takes once ld.so mapped the library (a
 * slow machine, long constructors).  PROG may stop meanwhile (^Z): then
 * pmguard stops too, and that time does not count.  If PROG ends without
 * the byte, its status is in *@st and *@reaped is set.
 */
static bool confirmed(int fd, const char *lib, int *st, bool *reaped)
{
	sigset_t all, old;
	struct timespec t0, s0;
	long stopped_ms = 0;
	bool mapped = false, stopped = false;
	char c;

	sigfillset(&all);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		long left = confirm_s * 1000L - ms_since(&t0) + stopped_ms;
		int r;

		if (left <= 0 && !stopped && !mapped &&
		    !(mapped = lib_mapped(lib)))
			return false;
		r = poll(&p, 1, 100);
		if (r < 0 && errno != EINTR)
			return false;
		if (r > 0) {
			r = (int)read(fd, &c, 1);
			if (r < 0 && errno == EINTR)
				continue;
			if (r == 1)
				return true;
			if (r < 0)
				return false;
			/* no writer left, PROG maybe alive: a constructor
			 * that ran before the library's closed the pipe; the
			 * library then writes through /proc/PID/fd/RFD */
			poll(NULL, 0, 100);
		}
		/* signals held while PROG may be reaped: none is passed to
		 * a process that got its pid */
		sigprocmask(SIG_BLOCK, &all, &old);
		r = waitpid(child, st, WUNTRACED | WCONTINUED | WNOHANG);
		if (r == child && !WIFSTOPPED(*st) && !WIFCONTINUED(*st))
			child = -1; /* reaped: forward() passes nothing on */
		sigprocmask(SIG_SETMASK, &old, NULL);
		if (r == child && WIFSTOPPED(*st)) {
			/* the time PROG is stopped does not count */
			clock_gettime(CLOCK_MONOTONIC, &s0);
			stopped = !stop_like(WSTOPSIG(*st));
			if (!stopped)
				stopped_ms += ms_since(&s0);
		} else if (r == child && WIFCONTINUED(*st)) {
			if (stopped)
				stopped_ms += ms_since(&s0);
			stopped = false;
		} else if (r > 0) {
			*reaped = true;
			/* its byte may be in the pipe still */
			p.revents = 0;
			return poll(&p, 1, 0) == 1 && read(fd, &c, 1) == 1;
		}
	}
}

/* Reap PROG with signals held, and forget it before they are let
 * through: a signal passed on after that would go to whatever process
 * got its pid. */
static void reap(int *st)
{
	sigset_t all, old;

	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	while (waitpid(child, st, 0) < 0 && errno == EINTR)
		;
	child = -1;
	sigprocmask(SIG_SETMASK, &old, NULL);
}

/*
 * Wait for PROG to end, stopping with it (job control); its end is seen
 * with waitid(WNOWAIT), then it is reaped by reap().
 */
static void wait_child(int *st)
{
	siginfo_t si;

	for (;;) {
		memset(&si, 0, sizeof(si));
		if (waitid(P_PID, (id_t)child, &si,
			   WEXITED | WSTOPPED | WNOWAIT) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (si.si_code == CLD_STOPPED) {
			waitpid(child, st, WUNTRACED | WNOHANG);
			(void)stop_like(si.si_status);
			continue;
		}
		break;
	}
	reap(st);
}

/*
 * Run PROG (argv) as a child with the environment setup() made, check
 * that the library loaded into it (PMGUARD_RUN_CONFIRM), wait for it.
 * Returns its wait status in *@st, or an exit status (127, said) when it
 * could not be run or ran without the library.
 */
/* The launcher's files PROG's processes write to: status and learn's
 * sites (scratch files), each a descriptor and PATH:DEV:INO (-1, NULL:
 * none). */
struct chan_pass {
	int status_fd, learn_fd;
	const char *status, *learn;
};

/*
 * In the child, before exec: @fd (close-on-exec here) again without
 * close-on-exec, its number before @spec in @var ("FD:SPEC"): every
 * process of the run reaches the file through it, whatever credentials
 * or root it has by then (src/run/common.c).  False if it cannot be.
 */
static bool pass_fd(const char *var, int fd, const char *spec)
{
	char v[PATH_MAX + 96];
	int nfd;

	if (fd < 0)
		return true;
	nfd = fcntl(fd, F_DUPFD, 3);
	if (nfd < 0 ||
	    (size_t)snprintf(v, sizeof(v), "%d:%s", nfd, spec) >= sizeof(v))
		return false;
	return setenv(var, v, 1) == 0;
}

static int spawn(char **argv, const char *verb, const char *lib,
		 const struct chan_pass *pass, int *st)
{
	struct sigaction dfl, chld;
	sigset_t all, mask;
	pid_t parent;
	int cp[2], ep[2], err = 0;
	bool reaped = false;
	ssize_t r;

	if (pipe2(cp, O_CLOEXEC) || pipe2(ep, O_CLOEXEC))
		return cli_error("%s: pipe: %s", verb, strerror(errno));
	/* pmguard must reap PROG itself: with SIGCHLD ignored (or
	 * SA_NOCLDWAIT), inherited from the caller, the kernel would, and
	 * waitpid() would give no status (exit 0 for a PROG that aborted);
	 * PROG gets the caller's disposition back */
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	sigaction(SIGCHLD, &dfl, &chld);
	/* no signal lost between fork and the handlers: blocked, then
	 * delivered to forward() (the child starts with none pending) */
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &mask);
	fflush(NULL);
	parent = getpid();
	parent0 = getppid();
	child = fork();
	if (child < 0) {
		sigprocmask(SIG_SETMASK, &mask, NULL);
		return cli_error("%s: fork: %s", verb, strerror(errno));
	}
	if (child == 0) {
		/* the write end without close-on-exec, named with its
		 * identity: the preload writes only to that pipe */
		int fd = fcntl(cp[1], F_DUPFD, 3);
		char v[96];
		struct stat ps;

		/* pmguard and PROG die together, as when they were one
		 * process (a SIGKILL cannot be passed on) */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent || fd < 0 || fstat(fd, &ps))
			_exit(127);
		if (!pass_fd("PMGUARD_RUN_STATUS", pass->status_fd,
			     pass->status) ||
		    !pass_fd("PMGUARD_RUN_LEARN", pass->learn_fd, pass->learn))
			_exit(127);
		if (rep_fd >= 0) {
			snprintf(v, sizeof(v), "%llu:%llu",
				 (unsigned long long)rep_st.st_dev,
				 (unsigned long long)rep_st.st_ino);
			if (!pass_fd("PMGUARD_RUN_REPORT_FD", rep_fd, v))
				_exit(127);
		}
		sigaction(SIGCHLD, &chld, NULL);
		sigprocmask(SIG_SETMASK, &mask, NULL);
		snprintf(v, sizeof(v), "%d:%llu:%llu:%d:%d", fd,
			 (unsigned long long)ps.st_dev,
			 (unsigned long long)ps.st_ino, (int)parent, cp[0]);
		setenv("PMGUARD_RUN_CONFIRM", v, 1);
		execvp(argv[0], argv);
		err = errno;
		if (write(ep[1], &err, sizeof(err)) < 0)
			_exit(127);
		_exit(127);
	}
	close(cp[1]);
	close(ep[1]);
	forward_all();
	sigprocmask(SIG_SETMASK, &mask, NULL);
	while ((r = read(ep[0], &err, sizeof(err))) < 0 && errno == EINTR)
		;
	close(ep[0]);
	if (r == sizeof(err)) {
		close(cp[0]);
		reap(st);
		forward_none();
		cli_error("%s: %s: %s", verb, argv[0], strerror(err));
		return 127;
	}
	if (!confirmed(cp[0], lib, st, &reaped)) {
		if (reaped && WIFSIGNALED(*st)) {
			/* killed (^C at start-up) before the library said it
			 * loaded: said, and pmguard dies the same way */
			close(cp[0]);
			forward_none();
			cli_error("%s: %s was killed by signal %d before the "
				  "interposition library %s said it loaded",
				  verb, argv[0], WTERMSIG(*st), lib);
			return die_like(WTERMSIG(*st));
		}
		if (!reaped) {
			kill(child, SIGKILL);
			reap(st);
		}
		close(cp[0]);
		forward_none();
		cli_error("%s: the interposition library %s did not load into "
			  "%s (ld.so ignores it for a set-user-ID program, a "
			  "program of another architecture, or a library "
			  "that is not pmguard's) or did not say so within "
			  "%ld s: %s may have run unprotected and was stopped",
			  verb, lib, argv[0], confirm_s, argv[0]);
		return 127;
	}
	close(cp[0]);
	if (!reaped)
		wait_child(st);
	forward_none();
	return 0;
}

/*
 * A scratch file the processes of the run append to by path (the status
 * byte, learn's sites): a memfd, named /proc/PID/fd/N, so that nothing is
 * left on disk whatever ends pmguard (SIGKILL included) and no directory
 * matters (a relative TMPDIR, a PROG that changes directory); a file
 * under $TMPDIR, made absolute and removed at the end, where /proc is
 * not there.  The processes get PATH:DEV:INO and append only to a file
 * with that identity (never to a file of a process that reused our pid).
 */
struct scratch {
	int fd;
	char tmp[PATH_MAX]; /* the temporary file, or "" */
	char spec[PATH_MAX + 64]; /* PATH:DEV:INO */
};

static void scratch_end(struct scratch *s);

static int scratch_new(const char *verb, const char *name, struct scratch *s)
{
	const char *dir = getenv("TMPDIR");
	char path[PATH_MAX], abs[PATH_MAX];
	struct stat st;
	int t;

	s->tmp[0] = 0;
	s->fd = memfd_create(name, MFD_CLOEXEC);
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getpid(), s->fd);
	if (s->fd >= 0 &&
	    (t = open(path, O_WRONLY | O_APPEND | O_CLOEXEC)) >= 0) {
		close(t);
	} else {
		if (s->fd >= 0)
			close(s->fd);
		if (!realpath(dir && *dir ? dir : "/tmp", abs))
			return cli_error("%s: TMPDIR %s: %s", verb, dir,
					 strerror(errno));
		snprintf(s->tmp, sizeof(s->tmp), "%.4000s/%s.XXXXXX", abs,
			 name);
		s->fd = mkostemp(s->tmp, O_CLOEXEC);
		if (s->fd < 0)
			return cli_error("%s: temporary file %s: %s", verb,
					 s->tmp, strerror(errno));
		snprintf(path, sizeof(path), "%s", s->tmp);
	}
	/* the status file: mapped by each process (src/run/run.h) */
	if (!strcmp(name, "pmguard-run") && ftruncate(s->fd, RUN_STATUS_SIZE)) {
		cli_error("%s: status file: %s", verb, strerror(errno));
		scratch_end(s);
		return 2;
	}
	fstat(s->fd, &st);
	snprintf(s->spec, sizeof(s->spec), "%s:%llu:%llu", path,
		 (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	return 0;
}

static void scratch_end(struct scratch *s)
{
	if (s->tmp[0])
		unlink(s->tmp);
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
}

/*
 * The status channel's last resort (src/run/common.c): a datagram socket
 * at a random abstract address, for a process of the run that has
 * neither the status file mapped nor its descriptor.  Messages carry a
 * secret that only the run's environment holds.  No socket (an error):
 * no last resort, the variable unset.
 */
static int sock_fd = -1;
static char sock_secret[RUN_SOCK_SECRET + 1];

static void status_sock_new(void)
{
	unsigned char r[8 + RUN_SOCK_SECRET / 2];
	char name[RUN_SOCK_NAME_MAX + 1], v[sizeof(name) + sizeof(sock_secret)];
	struct sockaddr_un sa;
	int big = 1 << 20;
	size_t i;

	unsetenv("PMGUARD_RUN_STATUS_SOCK");
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return;
	snprintf(name, sizeof(name), "pmguard-run.");
	for (i = 0; i < 8; i++)
		snprintf(name + strlen(name), 3, "%02x", r[i]);
	for (i = 0; i < RUN_SOCK_SECRET / 2; i++)
		snprintf(sock_secret + 2 * i, 3, "%02x", r[8 + i]);
	sock_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (sock_fd < 0)
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path + 1, name, strlen(name));
	(void)setsockopt(sock_fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	if (bind(sock_fd, (struct sockaddr *)&sa,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			     strlen(name)))) {
		close(sock_fd);
		sock_fd = -1;
		return;
	}
	snprintf(v, sizeof(v), "%s:%s", name, sock_secret);
	setenv("PMGUARD_RUN_STATUS_SOCK", v, 1);
}

/*
 * The run's status: the status file into @map (RUN_STATUS_SIZE bytes;
 * src/run/run.h: 'p' at 0, 'u' at 1, 'l' at 2 with their reasons), and
 * what came on the socket merged in.  A byte appended past the mapped
 * size (a process that could not map the file) is 'p' too.
 */
static void status_read(const struct scratch *status, char *map)
{
	size_t sl = strlen(sock_secret);
	char msg[RUN_STATUS_WHY_LEN + 80];
	struct stat st;
	ssize_t r;

	memset(map, 0, RUN_STATUS_SIZE);
	if (pread(status->fd, map, RUN_STATUS_SIZE - 1, 0) < 0 ||
	    (fstat(status->fd, &st) == 0 && st.st_size > RUN_STATUS_SIZE))
		map[0] = 'p';
	while (sock_fd >= 0 &&
	       (r = recv(sock_fd, msg, sizeof(msg) - 1, MSG_DONTWAIT)) >= 0) {
		char f;
		int at = -1;

		msg[r] = 0;
		if ((size_t)r < sl + 2 || memcmp(msg, sock_secret, sl) ||
		    msg[sl] != ' ')
			continue;
		f = msg[sl + 1];
		if (f == 'p')
			map[0] = 'p';
		else if (f == 'u' && map[1] != 'u')
			at = 1;
		else if (f == 'l' && map[2] != 'l')
			at = 2;
		if (at < 0 || (size_t)r < sl + 3)
			continue;
		map[at] = f;
		snprintf(map + (at == 1 ? RUN_STATUS_WHY : RUN_STATUS_LWHY),
			 RUN_STATUS_WHY_LEN, "%s", msg + sl + 3);
	}
	if (sock_fd >= 0)
		close(sock_fd);
	sock_fd = -1;
	map[RUN_STATUS_LWHY - 1] = map[RUN_STATUS_SIZE - 1] = 0;
}

/* Say once for the whole run if no process of it protected anything. */
static void nothing_said(const struct run_opts *o, const char *verb,
			 const char *prog, const char *map)
{
	char msg[RUN_STATUS_WHY_LEN + 128];
	size_t off = 0, len;
	int fd = -1;

	if (map[0] == 'p')
		return;
	if (map[1] == 'u')
		/* a process could not have told: never "nothing" */
		snprintf(msg, sizeof(msg),
			 "pmguard %s: unknown whether anything was protected: "
			 "%s\n",
			 verb, map + RUN_STATUS_WHY);
	else
		snprintf(
			msg, sizeof(msg),
			"pmguard %s: nothing was protected: no process of this run "
			"opened an LMDB environment with MDB_WRITEMAP or a libpmem "
			"mapping through the dynamic linker before %s ended (a copy "
			"linked into the program itself, as in Debian's lmdb-utils, "
			"cannot be interposed; a process left running, a daemon, is "
			"not counted after that)\n",
			verb, prog);
	if (syslog_sock[0]) {
		syslog_say(msg);
		return;
	}
	/* the report file again, in the directory it was first opened in,
	 * never through a link or into a FIFO put there since */
	if (o->report) {
		fd = open_in_dir(rep_abs, &rep_dir,
				 O_WRONLY | O_CREAT | O_APPEND, PMG_SF_TTY,
				 NULL);
		if (fd < 0)
			fprintf(stderr,
				"pmguard %s: --report %s: %s: the end-of-run "
				"line goes to stderr\n",
				verb, rep_abs, file_why(fd, PMG_SF_TTY));
	}
	if (fd < 0) {
		fputs(msg, stderr);
		return;
	}
	len = strlen(msg);
	while (off < len) {
		ssize_t w = write(fd, msg + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	close(fd);
}

int cmd_run(int argc, char **argv)
{
	struct run_opts o;
	struct scratch status;
	struct chan_pass pass;
	char lib[PATH_MAX], map[RUN_STATUS_SIZE];
	int rc = parse(argc, argv, "run", &o), st = 0;

	if (rc)
		return rc;
	rc = setup(&o, argv, lib, sizeof(lib));
	if (rc)
		return rc;
	rc = scratch_new("run", "pmguard-run", &status);
	if (rc)
		return rc;
	status_sock_new();
	pass = (struct chan_pass){ status.fd, -1, status.spec, NULL };
	rc = spawn(argv + o.argi, "run", lib, &pass, &st);
	status_read(&status, map);
	if (!rc)
		nothing_said(&o, "run", argv[o.argi], map);
	scratch_end(&status);
	if (rc)
		return rc;
	if (WIFSIGNALED(st))
		return die_like(WTERMSIG(st));
	return WEXITSTATUS(st);
}

/* -o SITES can be written (before the program runs, not after). */
static int out_writable(const char *out)
{
	char dir[PATH_MAX];
	const char *base;
	struct stat st;
	int rc;

	if (!lstat(out, &st)) {
		if (S_ISDIR(st.st_mode))
			return cli_error("learn: -o %s: is a directory", out);
		/* never written through: name the file itself */
		if (S_ISLNK(st.st_mode))
			return cli_error("learn: -o %s: %s", out,
					 _pmg_open_why(-ELOOP, 0));
		/* a FIFO would block the open at the end, a device is no
		 * sites file */
		if (!S_ISREG(st.st_mode))
			return cli_error("learn: -o %s: not a regular file",
					 out);
	} else if (errno != ENOENT) {
		return cli_error("learn: -o %s: %s", out, strerror(errno));
	}
	/* the new file is renamed over the name: the directory must take
	 * it; recorded, so that the end writes into this directory */
	_pmg_dir_of(dir, sizeof(dir), out);
	rc = abs_of(out, out_abs, sizeof(out_abs));
	if (rc)
		return cli_error("learn: -o %s: directory %s: %s", out, dir,
				 strerror(-rc));
	if (access(dir, W_OK | X_OK))
		return cli_error("learn: -o %s: directory %s: %s", out, dir,
				 strerror(errno));
	memset(&out_dir, 0, sizeof(out_dir));
	rc = _pmg_dir_open(out_abs, &out_dir, &base);
	if (rc < 0)
		return cli_error("learn: -o %s: %s", out, file_why(rc, 0));
	close(rc);
	return 0;
}

int cmd_learn(int argc, char **argv)
{
	struct run_opts o;
	struct scratch raw, status;
	struct chan_pass pass;
	char lib[PATH_MAX], map[RUN_STATUS_SIZE];
	int rc = parse(argc, argv, "learn", &o), st = 0;

	if (rc)
		return rc;
	rc = out_writable(o.out);
	if (rc)
		return rc;
	o.mode = "audit";
	rc = setup(&o, argv, lib, sizeof(lib));
	if (rc)
		return rc;
	rc = scratch_new("learn", "pmguard-learn", &raw);
	if (rc)
		return rc;
	rc = scratch_new("learn", "pmguard-run", &status);
	if (rc) {
		scratch_end(&raw);
		return rc;
	}
	status_sock_new();
	if (!o.report)
		setenv("PMGUARD_REPORT_FD", "-1", 1);
	pass = (struct chan_pass){ status.fd, raw.fd, status.spec, raw.spec };
	rc = spawn(argv + o.argi, "learn", lib, &pass, &st);
	status_read(&status, map);
	if (!rc)
		nothing_said(&o, "learn", argv[o.argi], map);
	scratch_end(&status);
	if (!rc)
		rc = merge(raw.fd, o.out);
	if (!rc && map[2] == 'l')
		fprintf(stderr,
			"pmguard learn: warning: %s may lack sites: %s\n",
			o.out, map + RUN_STATUS_LWHY);
	scratch_end(&raw);
	if (rc)
		return rc;
	if (WIFSIGNALED(st)) {
		fprintf(stderr, "pmguard learn: %s was killed by signal %d\n",
			argv[o.argi], WTERMSIG(st));
		return 128 + WTERMSIG(st);
	}
	return WEXITSTATUS(st);
}
