// SPDX-License-Identifier: MIT
/*
 * libpmguard-run.so: what its adapters share (run.h).  The report lines
 * (run_say()), the launcher's channels (PMGUARD_RUN_STATUS and
 * PMGUARD_RUN_LEARN: run_chans_*(), run_protected_one(), and the
 * wrapped changes of credentials and root that secure them), the wrapped
 * libraries' real functions (run_next(), behind REAL()), and a data
 * set's domain and its protection, said when it fails.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../internal.h"
#include "../safefile.h"
#include "../sites.h"
#include "run.h"

pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER;
bool run_rep_file; /* a report file: module lines go there */
bool run_rep_named; /* a report file or syslog: each LMDB
				 * environment and pmem mapping named */
static bool status_done; /* this process (or its parent) said so */

/* A line on the report fd, as long as it is the file it was (report.c). */
void run_say(const char *fmt, ...)
{
	static const char pre[] = "pmguard-run: ";
	char buf[1024];
	va_list ap;
	int fd = _pmg_report_fd(), n;

	if (fd < 0)
		return;
	memcpy(buf, pre, sizeof(pre) - 1);
	va_start(ap, fmt);
	n = vsnprintf(buf + sizeof(pre) - 1, sizeof(buf) - sizeof(pre) + 1, fmt,
		      ap);
	va_end(ap);
	if (n < 0)
		return;
	n += (int)sizeof(pre) - 1;
	if ((size_t)n >= sizeof(buf))
		n = sizeof(buf) - 1;
	/* a file, a terminal, or a syslog socket (a message per line) */
	_pmg_report_write(fd, buf, (size_t)n);
}

/*
 * PATH:DEV:INO, the launcher's scratch file (a memfd as /proc/PID/fd/N,
 * or a temporary file): false if malformed.
 */
bool run_spec_parse(const char *spec, char *path, size_t n,
		    unsigned long long *dev, unsigned long long *ino)
{
	const char *c2 = strrchr(spec, ':'), *c1;
	int end = 0;

	if (!c2 || c2 == spec)
		return false;
	for (c1 = c2 - 1; c1 > spec && *c1 != ':'; c1--)
		;
	if (c1 == spec || (size_t)(c1 - spec) >= n)
		return false;
	if (sscanf(c1 + 1, "%llu:%llu%n", dev, ino, &end) != 2 || c1[1 + end])
		return false;
	memcpy(path, spec, (size_t)(c1 - spec));
	path[c1 - spec] = 0;
	return path[0] == '/';
}

/*
 * The scratch file @spec opened for appending, if it is still that file
 * (never a file of a process that reused the launcher's pid, never one
 * put at a temporary file's name), else -1.  The memfd's name,
 * /proc/PID/fd/N, is a link by nature: it is opened O_PATH first (no
 * open of a device, no wait on a FIFO), checked, and only that file
 * opened for writing, through this process's own /proc/self/fd; a
 * temporary file is opened where it is, never through a symbolic link
 * (safefile.c).
 */
int run_spec_open(const char *spec)
{
	unsigned long long dev, ino;
	char path[PATH_MAX];
	struct stat want, st;
	int fd, pfd;

	if (!run_spec_parse(spec, path, sizeof(path), &dev, &ino))
		return -1;
	memset(&want, 0, sizeof(want));
	want.st_dev = (dev_t)dev;
	want.st_ino = (ino_t)ino;
	if (strncmp(path, "/proc/", 6)) {
		fd = _pmg_open_checked(AT_FDCWD, path, O_WRONLY | O_APPEND, 0,
				       0, 0, &want);
		return fd < 0 ? -1 : fd;
	}
	pfd = open(path, O_PATH | O_CLOEXEC);
	if (pfd < 0)
		return -1;
	if (fstat(pfd, &st) || !S_ISREG(st.st_mode) ||
	    st.st_dev != want.st_dev || st.st_ino != want.st_ino) {
		close(pfd);
		return -1;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", pfd);
	fd = open(path,
		  O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	close(pfd);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    st.st_dev != want.st_dev || st.st_ino != want.st_ino) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * The launcher's channels (PMGUARD_RUN_STATUS, PMGUARD_RUN_LEARN) reach
 * every process of the run, the ones that dropped privileges or went
 * into a chroot included: each is a descriptor the launcher leaves open
 * across exec (FD of "FD:PATH:DEV:INO"), used while it is still that
 * file (fstat identity), never a number the program reused.  A process
 * keeps a close-on-exec copy of its own at a high number (the program
 * may close or dup2 over FD) and leaves FD to the programs it runs; the
 * copy and FD are checked before each use and again before each change
 * of credentials or root (run_chans_refresh(), while this process still
 * has its privileges), and FD is put back in a forked child where the
 * program closed it (run_chans_fork_child(): the program that child runs
 * finds it).  The path, /proc/LAUNCHER/fd/N or a temporary file, is only
 * the last resort (a privileged process whose copies are gone).
 */
static struct run_chan chan_status, chan_learn;
/* the status file mapped (shared, survives the program closing every
 * descriptor): byte 0 'p' once something was protected, byte 1 'u' and
 * a line from RUN_STATUS_WHY on when a process lost the channel for the
 * programs it may run (the launcher then says "unknown", not "nothing") */
static char *status_map;

/* @fd is the launcher's file @c, open (a regular file). */
static bool chan_is(const struct run_chan *c, int fd)
{
	struct stat st;

	return fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	       st.st_dev == c->dev && st.st_ino == c->ino;
}

/* @fd again, close-on-exec, at a high number out of the program's way
 * (report.c does the same for the report file); -1 if it cannot be */
static int high_dup(int fd)
{
	struct rlimit rl;
	int hi = 3, nfd;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur > 64)
		hi = rl.rlim_cur / 2 > 1000 ? 1000 : (int)(rl.rlim_cur / 2);
	nfd = fcntl(fd, F_DUPFD_CLOEXEC, hi);
	if (nfd < 0)
		nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	return nfd;
}

/*
 * "FD:PATH:DEV:INO" (FD: the launcher's descriptor, or absent) into @c:
 * false if malformed.
 */
static bool chan_parse(struct run_chan *c, const char *spec)
{
	unsigned long long dev, ino;
	char path[PATH_MAX];
	const char *p = spec;
	int fd = -1, end = 0;

	if (isdigit((unsigned char)*p)) {
		if (sscanf(p, "%d:%n", &fd, &end) != 1 || !end || fd < 0)
			return false;
		p += end;
	}
	if (strlen(p) >= sizeof(c->spec) ||
	    !run_spec_parse(p, path, sizeof(path), &dev, &ino))
		return false;
	c->inh = fd;
	c->own = -1;
	c->dev = (dev_t)dev;
	c->ino = (ino_t)ino;
	_pmg_strlcpy(c->spec, p, sizeof(c->spec));
	c->set = true;
	return true;
}

/* The process's own copy of @c: the one it has, else FD, else the file
 * opened again by its path; -1 if none (a copy the program closed or put
 * another file at is forgotten, never closed: that number is the
 * program's now). */
static int chan_fd(struct run_chan *c)
{
	int fd;

	if (!c->set)
		return -1;
	if (chan_is(c, c->own))
		return c->own;
	c->own = -1;
	if (chan_is(c, c->inh))
		fd = high_dup(c->inh);
	else if ((fd = run_spec_open(c->spec)) >= 0) {
		int h = high_dup(fd);

		if (h >= 0) {
			close(fd);
			fd = h;
		}
	}
	c->own = fd;
	return fd;
}

/* Say (stderr, if it is open) that this process has no channel @c. */
static void chan_lost(const struct run_chan *c, const char *var,
		      const char *what)
{
	struct stat st;

	if (fstat(2, &st))
		return;
	dprintf(2,
		"pmguard-run: %s: descriptor %d is closed or another file "
		"and %s cannot be opened (%s): %s (pid %d) %s\n",
		var, c->inh, c->spec, strerror(errno),
		program_invocation_short_name, (int)getpid(), what);
}

/*
 * The last resort of the status channel (PMGUARD_RUN_STATUS_SOCK=NAME:
 * SECRET): the launcher's datagram socket at the abstract address NAME
 * (no file: reachable from any user and root the process has, in the
 * launcher's network namespace), each message "SECRET p" (protected) or
 * "SECRET u REASON" (lost for the programs it runs).  Only for a process
 * that has neither the mapped status file nor its descriptor (the program
 * closed every descriptor between fork and exec, as Python's subprocess
 * does, after a privilege drop).  SECRET is in the environment only: a
 * process that dropped privileges is not dumpable, its environment not
 * readable by the user it became.
 */
static char sock_name[RUN_SOCK_NAME_MAX + 1], sock_secret[RUN_SOCK_SECRET + 1];

static bool sock_parse(const char *v)
{
	const char *c = strrchr(v, ':');

	if (!c || c == v || (size_t)(c - v) > RUN_SOCK_NAME_MAX ||
	    strlen(c + 1) != RUN_SOCK_SECRET)
		return false;
	memcpy(sock_name, v, (size_t)(c - v));
	sock_name[c - v] = 0;
	memcpy(sock_secret, c + 1, RUN_SOCK_SECRET + 1);
	return true;
}

/* A datagram socket connected to the launcher's, or -1 (none, or not in
 * this network namespace).  AS-safe. */
static int sock_open(void)
{
	struct sockaddr_un sa;
	int fd;

	if (!sock_name[0])
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path + 1, sock_name, strlen(sock_name));
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 &&
	    connect(fd, (struct sockaddr *)&sa,
		    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
				strlen(sock_name)))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* The launcher's socket can be reached from here.  AS-safe. */
static bool sock_reachable(void)
{
	int e = errno, fd = sock_open();

	if (fd >= 0)
		close(fd);
	errno = e;
	return fd >= 0;
}

/* @what ('p', 'u' or 'l', with @why) to the launcher's socket: sent or
 * not. */
static bool sock_send(char what, const char *why)
{
	char msg[600];
	int fd, n, e = errno;
	bool sent;

	n = snprintf(msg, sizeof(msg), "%s %c %s (pid %d): %s", sock_secret,
		     what, program_invocation_short_name, (int)getpid(),
		     why ? why : "");
	if (n < 0)
		return false;
	if ((size_t)n >= sizeof(msg))
		n = sizeof(msg) - 1;
	fd = sock_open();
	sent = fd >= 0 &&
	       send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) == n;
	if (fd >= 0)
		close(fd);
	errno = e;
	return sent;
}

/* The status file's flag @at ('u' at 1: the status channel lost for the
 * programs a process runs; 'l' at 2: learn's sites of a process lost)
 * and the first reason at @why_at (or the socket). */
static void status_flag(int at, char flag, int why_at, const char *why)
{
	if (!status_map) {
		(void)sock_send(flag, why);
		return;
	}
	if (__atomic_exchange_n(&status_map[at], flag, __ATOMIC_ACQ_REL))
		return;
	snprintf(status_map + why_at, RUN_STATUS_WHY_LEN, "%s (pid %d): %s",
		 program_invocation_short_name, (int)getpid(), why);
}

static void status_unknown(const char *why)
{
	status_flag(1, 'u', RUN_STATUS_WHY, why);
}

static void learn_lost(const char *why)
{
	status_flag(2, 'l', RUN_STATUS_LWHY, why);
}

static bool chan_restore(struct run_chan *c);

/*
 * At start-up, while the process still has the credentials it was
 * started with: the channels of PMGUARD_RUN_STATUS (@status) and
 * PMGUARD_RUN_LEARN (@learn), either NULL or "".  False (with the bad
 * variable's name in *@bad) if one is malformed.
 */
bool run_chans_open(const char *status, const char *sock, const char *learn,
		    const char **bad)
{
	struct stat st;
	int fd;

	if (status && *status && !chan_parse(&chan_status, status)) {
		*bad = "PMGUARD_RUN_STATUS";
		return false;
	}
	if (sock && *sock && !sock_parse(sock)) {
		*bad = "PMGUARD_RUN_STATUS_SOCK";
		return false;
	}
	if (learn && *learn && !chan_parse(&chan_learn, learn)) {
		*bad = "PMGUARD_RUN_LEARN";
		return false;
	}
	/* without the file: the socket, tried when there is something to
	 * tell (said then if it fails too) */
	fd = chan_fd(&chan_status);
	if (chan_status.set && fd < 0 && !sock_name[0])
		chan_lost(&chan_status, "PMGUARD_RUN_STATUS",
			  "cannot tell pmguard that it protected anything");
	if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size >= RUN_STATUS_SIZE) {
		void *m = mmap(NULL, RUN_STATUS_SIZE, PROT_READ | PROT_WRITE,
			       MAP_SHARED, fd, 0);

		status_map = m == MAP_FAILED ? NULL : m;
	}
	if (chan_learn.set && chan_fd(&chan_learn) < 0)
		chan_lost(&chan_learn, "PMGUARD_RUN_LEARN",
			  "cannot hand its sites to pmguard learn");
	/* FD for the programs this one runs, if a constructor before this
	 * one closed it (one thread: no open can take the number meanwhile);
	 * a process without the channel cannot say it lost it */
	(void)chan_restore(&chan_status);
	(void)chan_restore(&chan_learn);
	return true;
}

/* Before a change of credentials or root (the wrappers below): the
 * process's copies made again where the program closed them, while it
 * can still open the files by path. */
void run_chans_refresh(void)
{
	(void)chan_fd(&chan_status);
	(void)chan_fd(&chan_learn);
	(void)_pmg_report_fd();
}

/* FD of @c back in place, from the process's copy, if the program closed
 * it: only where no other thread can open a file meanwhile (a forked
 * child, the constructor).  False if FD is not the file afterwards. */
static bool chan_restore(struct run_chan *c)
{
	int fd;

	if (!c->set || c->inh < 0 || chan_is(c, c->inh))
		return true;
	if (fcntl(c->inh, F_GETFD) >= 0 || errno != EBADF)
		return false; /* the program's file at that number */
	fd = chan_fd(c);
	return fd >= 0 && dup2(fd, c->inh) == c->inh;
}

/* The report file's FD (PMGUARD_RUN_REPORT_FD) back, the same way. */
static int rep_inh = -1;
static dev_t rep_dev;
static ino_t rep_ino;

void run_report_inherited(int fd, dev_t dev, ino_t ino)
{
	rep_inh = fd;
	rep_dev = dev;
	rep_ino = ino;
}

static void report_restore(void)
{
	struct stat st;
	int fd;

	if (rep_inh < 0 || (fstat(rep_inh, &st) == 0 && st.st_dev == rep_dev &&
			    st.st_ino == rep_ino))
		return;
	if (fcntl(rep_inh, F_GETFD) >= 0 || errno != EBADF)
		return;
	fd = _pmg_report_fd();
	if (fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == rep_dev &&
	    st.st_ino == rep_ino)
		(void)dup2(fd, rep_inh);
}

/* In a forked child (pthread_atfork; one thread): the launcher's
 * descriptors back at their numbers for the program it may run; where
 * the status one cannot be (the program put another file there, or the
 * file cannot be opened any more) and there is no socket to fall back
 * on, the launcher is told it cannot know. */
void run_chans_fork_child(void)
{
	int e = errno;

	if (!chan_restore(&chan_status) && !sock_reachable())
		status_unknown("a child process was forked after the "
			       "program closed or replaced the status "
			       "descriptor: what the programs it runs "
			       "protect cannot be told");
	if (!chan_restore(&chan_learn))
		learn_lost("a child process was forked after the program "
			   "closed or replaced the learn descriptor: the "
			   "sites of the programs it runs cannot be handed "
			   "over");
	report_restore();
	errno = e;
}

/* Something was protected: tell the launcher once (PMGUARD_RUN_STATUS). */
void run_protected_one(void)
{
	int fd;

	if (status_done || !chan_status.set)
		return;
	status_done = true;
	if (status_map) {
		__atomic_store_n(&status_map[0], 'p', __ATOMIC_RELEASE);
		return;
	}
	fd = chan_fd(&chan_status);
	if ((fd < 0 || write(fd, "p", 1) < 0) && !sock_send('p', NULL))
		chan_lost(&chan_status, "PMGUARD_RUN_STATUS",
			  "protected something, and pmguard cannot be told");
}

/* The process's copy of the learn channel (learn.c), or -1, said. */
int run_learn_fd(void)
{
	int fd = chan_fd(&chan_learn);

	if (fd < 0) {
		chan_lost(&chan_learn, "PMGUARD_RUN_LEARN",
			  "cannot hand its sites to pmguard learn");
		learn_lost("the learn descriptor was closed and its file "
			   "cannot be opened again: its sites are missing");
		return -1;
	}
	/* a copy of its own: learn.c closes what it gets */
	return fcntl(fd, F_DUPFD_CLOEXEC, 3);
}

/*
 * A change of credentials or root: the process may not open the
 * launcher's files, nor the report file, by path afterwards; the copies
 * it needs are made first (run_chans_refresh()).  glibc's own calls
 * between these (initgroups() to setgroups()) are not seen; the public
 * ones a daemon makes are.
 */
#define CRED_WRAP(name, params, args)            \
	RUN_API int name params                  \
	{                                        \
		REAL(name);                      \
		run_chans_refresh();             \
		return real_##name args;         \
	}
CRED_WRAP(setuid, (uid_t u), (u))
CRED_WRAP(setgid, (gid_t g), (g))
CRED_WRAP(seteuid, (uid_t u), (u))
CRED_WRAP(setegid, (gid_t g), (g))
CRED_WRAP(setreuid, (uid_t r, uid_t e), (r, e))
CRED_WRAP(setregid, (gid_t r, gid_t e), (r, e))
CRED_WRAP(setresuid, (uid_t r, uid_t e, uid_t s), (r, e, s))
CRED_WRAP(setresgid, (gid_t r, gid_t e, gid_t s), (r, e, s))
CRED_WRAP(setgroups, (size_t n, const gid_t *l), (n, l))
CRED_WRAP(chroot, (const char *p), (p))

/*
 * The real function.  RTLD_NEXT searches the global scope; a library
 * loaded as a dependency of a dlopen()ed module (py-lmdb's extension pulls
 * in liblmdb that way) is only in that module's local scope, so it is
 * then looked up by its soname, already loaded (RTLD_NOLOAD).
 */
void *run_next(const char *name)
{
	static const char *const libs[] = { "liblmdb.so.0", "libpmem.so.1",
					    "libpmem2.so.1" };
	void *p = dlsym(RTLD_NEXT, name);
	size_t i;

	for (i = 0; !p && i < sizeof(libs) / sizeof(libs[0]); i++) {
		void *h = dlopen(libs[i], RTLD_NOW | RTLD_NOLOAD);

		if (h) {
			p = dlsym(h, name);
			dlclose(h);
		}
	}
	if (!p) {
		run_say("%s not found after the preload\n", name);
		abort();
	}
	return p;
}

/*
 * A domain for one data set: "KIND:PATH" in the 31 characters a name may
 * have (a long path keeps its end: "lmdb:...b/c/data"), blanks and other
 * non-printable characters as '_', and "#N" at the end when another live
 * domain has the name.  NULL (said) if it cannot be made.
 */
struct pmg_domain *run_data_domain(const char *kind, const char *path)
{
	char base[PMG_KEY_NAME_MAX], name[PMG_KEY_NAME_MAX];
	struct pmg_domain *d = NULL;
	size_t k = strlen(kind), n = strlen(path), room, i;
	int rc = -EEXIST, tries;

	char tmp[PATH_MAX + 16];

	room = sizeof(base) - 1 - k - 1;
	if (n > room)
		snprintf(tmp, sizeof(tmp), "%s:...%s", kind,
			 path + n - (room - 3));
	else
		snprintf(tmp, sizeof(tmp), "%s:%s", kind, path);
	_pmg_strlcpy(base, tmp, sizeof(base));
	for (i = 0; base[i]; i++)
		if (!isgraph((unsigned char)base[i]))
			base[i] = '_';
	for (tries = 0; tries < 1000 && rc == -EEXIST; tries++) {
		if (tries) {
			char suf[8];
			size_t sl = (size_t)snprintf(suf, sizeof(suf), "#%d",
						     tries);
			size_t bl = strlen(base);

			if (bl + sl >= sizeof(name))
				bl = sizeof(name) - 1 - sl;
			memcpy(name, base, bl);
			memcpy(name + bl, suf, sl + 1);
		} else {
			memcpy(name, base, sizeof(name));
		}
		rc = pmg_domain_new(&d, name, 0);
	}
	if (rc) {
		run_say("cannot create domain '%s': %s: nothing protected\n",
			base, pmg_errormsg());
		return NULL;
	}
	return d;
}

void run_data_domain_delete(struct pmg_domain **d)
{
	char name[PMG_KEY_NAME_MAX];

	if (!*d)
		return;
	_pmg_strlcpy(name, pmg_domain_name(*d), sizeof(name));
	if (pmg_domain_delete(d))
		run_say("cannot delete domain '%s': %s\n", name,
			pmg_errormsg());
	*d = NULL;
}

int run_protect(struct pmg_domain *d, void *addr, size_t len, const char *what)
{
	int rc = pmg_protect(d, addr, len);

	if (rc)
		run_say("cannot protect %s at %p (+%zu): %s\n", what, addr, len,
			pmg_errormsg());
	return rc;
}

void run_unprotect(void *addr, size_t len, const char *what)
{
	int rc = pmg_unprotect(addr, len);

	if (rc)
		run_say("cannot unprotect %s at %p (+%zu): %s\n", what, addr,
			len, pmg_errormsg());
}

/* A library loaded since the last look: new module lines, sites. */
void run_modules(void)
{
	_pmg_modules_refresh(run_rep_file ? _pmg_report_fd() : -1);
}
