// SPDX-License-Identifier: MIT
/*
 * libpmguard-run.so: start-up, options and exit.  The constructor reads
 * and checks the environment, opens the report file, starts the library
 * (pmg_init(), three keys reserved), loads the allowed sites and
 * confirms to the launcher; at exit, learn mode's sites (learn.c) and
 * the count of writes let through.
 *
 * Environment (set by `pmguard run` / `pmguard learn`):
 *   PMGUARD_RUN_ALLOW=PATH:DEV:INO:SUM  grant the sites of PATH
 *                                 (sites.c), if it is still the file the
 *                                 launcher checked, with the content it
 *                                 read (SUM: FNV-1a, hex): else exit 127,
 *                                 said
 *   PMGUARD_RUN_LEARN=FD:PATH:DEV:INO  append the audit sites at exit
 *                                 to the launcher's file (its memfd,
 *                                 /proc/PID/fd/N): through FD, left open
 *                                 across exec, while it is that file, a
 *                                 copy of it, else PATH (common.c)
 *   PMGUARD_RUN_LMDB_WRITEMAP=1   add MDB_WRITEMAP to every mdb_env_open()
 *   PMGUARD_RUN_REPORT=FILE       fault reports (and module lines) to FILE
 *                                 (stderr, said, in a process that cannot
 *                                 open it),
 *                                 opened by each process itself
 *                                 (close-on-exec, a high fd, verified
 *                                 before each report, reopened if the
 *                                 program closed it)
 *   PMGUARD_RUN_REPORT_FD=FD:DEV:INO  FILE as the launcher opened it,
 *                                 left open across exec: the report fd
 *                                 of a process that cannot open FILE
 *                                 (after a privilege drop, in a chroot)
 *   PMGUARD_RUN_STATUS=FD:PATH:DEV:INO  the launcher's status file, mapped
 *                                 by each process (through FD or PATH,
 *                                 common.c) and marked by each one that
 *                                 protected something (the launcher says
 *                                 "nothing was protected" once if none
 *                                 did, "unknown" if one could not tell)
 *   PMGUARD_RUN_STATUS_SOCK=NAME:SECRET  the launcher's socket at an
 *                                 abstract address: the status of a
 *                                 process without the file
 *   PMGUARD_RUN_CONFIRM=FD:DEV:INO:PID:RFD  the launcher's pipe (FD, or
 *                                 /proc/PID/fd/RFD if FD was closed): one
 *                                 byte once the
 *                                 library is loaded and initialised (the
 *                                 launcher refuses a run that never says
 *                                 so); then closed and unset
 * A bad value of these or of the library's PMGUARD_* variables, or a
 * failed pmg_init(), ends the process before main() with exit 127 and a
 * message: never an unprotected run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../internal.h"
#include "../options.h"
#include "../safefile.h"
#include "../sites.h"
#include "run.h"

static void run_exit(void)
{
	const char *learn = getenv("PMGUARD_RUN_LEARN");
	uint64_t hits = _pmg_sites_hits();

	if (learn && *learn)
		run_learn_write();
	if (hits)
		run_say("%llu write(s) let through at allowed sites\n",
			(unsigned long long)hits);
}

/*
 * Before main(), nothing has run yet: a fatal error is said on stderr, if
 * stderr is open, and the process ends with 127 (as a program that could
 * not be run), never running unprotected.
 */
static void fatal(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));
static void fatal(const char *fmt, ...)
{
	struct stat st;
	char buf[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0 && fstat(2, &st) == 0)
		dprintf(2,
			"pmguard-run: %.*s: not running %s unprotected "
			"(exit 127)\n",
			n, buf, program_invocation_short_name);
	_exit(127);
}

static void bad_env(const char *msg, void *arg)
{
	(void)arg;
	fatal("%s", msg);
}

/* PMGUARD_RUN_* of the options table, read once at start-up (a program
 * may clear its environment before it opens LMDB). */
void run_opts_read(void)
{
	struct _pmg_opts o;

	(void)_pmg_opts_from_env_group(&o, _PMG_OPT_RUN, bad_env, NULL);
	__atomic_store_n(&run_lmdb_writemap, o.run_writemap, __ATOMIC_RELEASE);
}

/*
 * PMGUARD_RUN_CONFIRM=FD:DEV:INO:PID:RFD: the launcher's pipe, if FD is
 * still that pipe; else (a constructor that ran before this one closed
 * the descriptors it inherited) the pipe opened again through the
 * launcher's read end, /proc/PID/fd/RFD, if that is the pipe.
 */
static void confirm(void)
{
	const char *v = getenv("PMGUARD_RUN_CONFIRM");
	unsigned long long dev, ino;
	struct stat st;
	char path[64];
	int fd, pid, rfd, end = 0;

	if (!v)
		return;
	if (sscanf(v, "%d:%llu:%llu:%d:%d%n", &fd, &dev, &ino, &pid, &rfd,
		   &end) != 5 ||
	    v[end] || fd < 0 || pid <= 0 || rfd < 0)
		fatal("PMGUARD_RUN_CONFIRM='%.64s' is not valid: expected "
		      "FD:DEV:INO:PID:RFD",
		      v);
	/* only the launcher's pipe, never a file the number now names */
	if (!(fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) &&
	      st.st_dev == (dev_t)dev && st.st_ino == (ino_t)ino)) {
		snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, rfd);
		fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		if (fd >= 0 &&
		    !(fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) &&
		      st.st_dev == (dev_t)dev && st.st_ino == (ino_t)ino)) {
			close(fd);
			fd = -1;
		}
	}
	if (fd >= 0) {
		if (write(fd, "1", 1) != 1)
			fatal("cannot confirm to pmguard run: %s",
			      strerror(errno));
		close(fd);
	}
	unsetenv("PMGUARD_RUN_CONFIRM");
}

/*
 * PMGUARD_RUN_REPORT_FD=FD:DEV:INO: the report file the launcher opened,
 * left open across exec.  Recorded for forked children (common.c); if
 * @use, the report fd from now on (a close-on-exec copy), if FD is still
 * that file and it still has a name.  The fd, or -1.
 */
static int report_inherited_fd(const char *v, bool use)
{
	unsigned long long dev, ino;
	struct stat st;
	int fd, end = 0;

	if (!v || !*v)
		return -1;
	if (sscanf(v, "%d:%llu:%llu%n", &fd, &dev, &ino, &end) != 3 ||
	    v[end] || fd < 0)
		fatal("PMGUARD_RUN_REPORT_FD='%.64s' is not valid: expected "
		      "FD:DEV:INO",
		      v);
	run_report_inherited(fd, (dev_t)dev, (ino_t)ino);
	/* a file removed since (its name taken by a link, say) would keep
	 * the reports where no one reads them: stderr then */
	if (!use || fstat(fd, &st) || st.st_dev != (dev_t)dev ||
	    st.st_ino != (ino_t)ino ||
	    !(S_ISREG(st.st_mode) || S_ISCHR(st.st_mode)) ||
	    (S_ISREG(st.st_mode) && st.st_nlink == 0))
		return -1;
	fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (fd >= 0) {
		__atomic_store_n(&_pmg.fd_set, true, __ATOMIC_RELEASE);
		_pmg_report_fd_set(fd);
	}
	return fd;
}

__attribute__((constructor)) static void run_init(void)
{
	const char *rep = getenv("PMGUARD_RUN_REPORT");
	const char *allow = getenv("PMGUARD_RUN_ALLOW");
	const char *st = getenv("PMGUARD_RUN_STATUS");
	const char *learn = getenv("PMGUARD_RUN_LEARN");
	const char *rep_fd = getenv("PMGUARD_RUN_REPORT_FD");
	const char *sock = getenv("PMGUARD_RUN_STATUS_SOCK");
	const char *bad = NULL;
	struct _pmg_opts o;
	int rc;

	/* every PMGUARD_* value the library reads, now, not later */
	(void)_pmg_opts_from_env_group(&o, _PMG_OPT_LIB, bad_env, NULL);
	(void)_pmg_opts_from_env_group(&o, _PMG_OPT_PERSIST, bad_env, NULL);
	run_opts_read();
	if (!run_chans_open(st, sock, learn, &bad)) {
		bool is_sock = !strcmp(bad, "PMGUARD_RUN_STATUS_SOCK");
		const char *val = is_sock ? sock
				  : !strcmp(bad, "PMGUARD_RUN_LEARN") ? learn
								      : st;

		fatal("%s='%.64s' is not valid: expected %s", bad, val,
		      is_sock ? "NAME:SECRET" : "[FD:]/PATH:DEV:INO");
	}
	if (rep && *rep) {
		rc = _pmg_report_open(rep);
		if (rc == -EINVAL)
			fatal("PMGUARD_RUN_REPORT: %s", pmg_errormsg());
		/* by path it cannot (a program run after a privilege drop or
		 * in a chroot): the launcher's descriptor, if it is that file */
		if (rc < 0)
			rc = report_inherited_fd(rep_fd, true);
		else
			(void)report_inherited_fd(rep_fd, false);
		run_rep_named = rc >= 0;
		/* module lines are for `pmguard report FILE`, not syslog */
		run_rep_file = rc >= 0 && strncmp(rep, "syslog:", 7);
		/* this process cannot open it (it dropped privileges, went
		 * into a chroot, lost its terminal): protected all the same,
		 * its reports on stderr, said there */
		if (rc < 0)
			dprintf(2,
				"pmguard-run: %s: this process (%s, pid %d) "
				"reports on stderr instead\n",
				pmg_errormsg(), program_invocation_short_name,
				(int)getpid());
	} else if (getenv("PMGUARD_REPORT_FD")) {
		run_rep_file = run_rep_named = true;
	}
	rc = pmg_init();
	if (rc)
		fatal("pmg_init: %s", pmg_errormsg());
	/* every key a write-disabled domain may get, WD in every thread the
	 * program creates (keys.c): a reader that blocks every signal never
	 * needs a rights sync (a fault).  Past them domains are virtual.
	 * Two keys stay with the kernel for the program's own pkey_alloc()
	 * (PMGUARD_KEYS lowers what pmguard takes) */
	(void)_pmg_keys_reserve(PMG_NR_KEYS - 1, 2);
	if (allow && *allow) {
		char spec[PATH_MAX + 48], p[PATH_MAX], *c;
		unsigned long long d, i, sum = 0;
		uint64_t got;
		struct stat want;
		int end = 0;

		_pmg_strlcpy(spec, allow, sizeof(spec));
		c = strrchr(spec, ':');
		if (c)
			*c++ = 0;
		if (!c || sscanf(c, "%16llx%n", &sum, &end) != 1 || c[end] ||
		    !run_spec_parse(spec, p, sizeof(p), &d, &i))
			fatal("PMGUARD_RUN_ALLOW='%.64s' is not valid: "
			      "expected /PATH:DEV:INO:SUM",
			      allow);
		/* the file pmguard run checked, with the content it read,
		 * never another put at its name since (safefile.c): a FIFO
		 * would block, a link or a new file would grant what it
		 * says */
		memset(&want, 0, sizeof(want));
		want.st_dev = (dev_t)d;
		want.st_ino = (ino_t)i;
		rc = _pmg_open_checked(AT_FDCWD, p, O_RDONLY, 0, 0, 0, &want);
		if (rc >= 0 && (_pmg_fd_digest(rc, &got) || got != sum)) {
			close(rc);
			rc = -ESTALE;
		}
		if (rc < 0)
			fatal("allow file %s: %s", p,
			      rc == -ESTALE ? "not the file pmguard run "
					      "checked (replaced or changed "
					      "since)"
			      : _pmg_open_why(rc, 0) ? _pmg_open_why(rc, 0)
						     : strerror(-rc));
		rc = _pmg_sites_load(rc, p);
		if (rc < 0)
			fatal("%s", pmg_errormsg());
	}
	_pmg_modules_refresh(run_rep_file ? _pmg_report_fd() : -1);
	atexit(run_exit);
	/* the launcher's descriptors back in a forked child that lost them */
	pthread_atfork(NULL, NULL, run_chans_fork_child);
	confirm();
}
