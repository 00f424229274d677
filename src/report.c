// SPDX-License-Identifier: MIT
/*
 * Reporting: what the library writes on the report fd (faults, unbalanced
 * closes, long-term maps, threads that ended inside windows), the audit
 * site table, and the statistics.  Everything here may run in a signal
 * handler: it formats into a stack buffer with the AS-safe helpers of fmt.c
 * and writes it with one write(2); no locks, no allocation.  (The
 * backtraces use backtrace(), which pmg_init() loads before any handler
 * can need it.)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "safefile.h"
#include "sites.h"

static bool rep_is_syslog(int fd);
static void syslog_lines(int fd, const char *s, size_t n);

void _pmg_buf_flush(struct _pmg_buf *b, int fd)
{
	size_t off = 0;

	if (fd >= 0 && rep_is_syslog(fd)) {
		syslog_lines(fd, b->b, b->n);
		b->n = 0;
		return;
	}
	while (fd >= 0 && off < b->n) {
		ssize_t w = write(fd, b->b + off, b->n - off);

		if (w <= 0)
			break;
		off += (size_t)w;
	}
	b->n = 0;
}

/* ---------------------------------------------------------- reports */

/*
 * The report fd is verified before each report: pmguard writes only to the
 * open file it was given (or opened), never to a file the program opened
 * later under the same number (a program that closes its inherited
 * descriptors, or stderr, and opens a data file).  Its identity (device,
 * inode) is recorded when the fd is set; each report fstat()s the fd and
 * compares.  If it changed (or the fd is closed, or the report file
 * opened by path was deleted: its reports would vanish): with a report
 * path (the preload's PMGUARD_RUN_REPORT) the file is opened again by its
 * name in its directory, checked to be the directory it was opened in
 * (safefile.c: never through a symbolic link, never a FIFO, a hard link
 * or another user's file; the old descriptor is left open: another
 * thread may be writing a report to it now); if that fails reporting
 * stops, said once on stderr if stderr is still the file it was when the
 * report path was opened; without a report path it stops, said nowhere
 * (there is nowhere safe).
 * fstat, open, fcntl, close: AS-safe.  The identity is updated under a
 * sequence count; a reader that races an update skips the check's
 * verdict and reports nothing this time rather than guess.
 */
static struct {
	unsigned seq; /* odd while being updated */
	int fd; /* the fd the identity belongs to */
	bool ok; /* fstat worked when recorded */
	dev_t dev;
	ino_t ino;
} rep_id = { 0, -1, false, 0, 0 };
static char rep_path[PATH_MAX]; /* "" or the path to open again */
static struct _pmg_dirid rep_dir; /* the directory rep_path is in */
/* stderr as it was when rep_path was opened: where a failed reopen is
 * said (never a file the program opened later as fd 2) */
static struct {
	bool ok;
	dev_t dev;
	ino_t ino;
} rep_fallback;
static int rep_said; /* the failed reopen was said */
static int rep_busy; /* a reopen in progress (try-lock) */
/* the report "file" is syslog:SOCKET (rep_path): a datagram socket
 * connected to a syslog daemon's socket (/dev/log: journald, rsyslog) */
static bool rep_syslog;
#define SYSLOG_PREFIX "syslog:"

static void id_record(int fd)
{
	struct stat st;
	bool ok = fd >= 0 && fstat(fd, &st) == 0;

	__atomic_add_fetch(&rep_id.seq, 1, __ATOMIC_ACQ_REL);
	rep_id.fd = fd;
	rep_id.ok = ok;
	rep_id.dev = ok ? st.st_dev : 0;
	rep_id.ino = ok ? st.st_ino : 0;
	__atomic_add_fetch(&rep_id.seq, 1, __ATOMIC_ACQ_REL);
}

/* 1: @fd is the recorded file, 0: it is not, -1: an update raced. */
static int id_same(int fd)
{
	unsigned s = __atomic_load_n(&rep_id.seq, __ATOMIC_ACQUIRE);
	struct stat st;
	int same;

	if (s == 0) {
		/* never set (no pmg_init() yet): the default, as it is now */
		id_record(fd);
		return 1;
	}
	if (s & 1)
		return -1;
	same = rep_id.fd == fd && rep_id.ok && fstat(fd, &st) == 0 &&
	       st.st_dev == rep_id.dev && st.st_ino == rep_id.ino &&
	       (!rep_path[0] || rep_syslog || st.st_nlink > 0);
	if (__atomic_load_n(&rep_id.seq, __ATOMIC_ACQUIRE) != s)
		return -1;
	return same;
}

int _pmg_report_fd_set(int fd)
{
	if (fd < -1)
		fd = -1;
	id_record(fd);
	return __atomic_exchange_n(&_pmg.report_fd, fd, __ATOMIC_RELAXED);
}

/* Connect @fd to the syslog socket @path: 0 or -errno.  AS-safe. */
static int syslog_connect(int fd, const char *path)
{
	struct sockaddr_un sa;
	size_t l = strlen(path);

	if (l >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, l);
	return connect(fd, (struct sockaddr *)&sa, sizeof(sa)) ? -errno : 0;
}

/* @path opened for appending, close-on-exec, without blocking, if it is a
 * regular file or a terminal (safefile.c: never through a symbolic link,
 * in the directory it was first opened in), or syslog:SOCKET (a datagram
 * socket connected to SOCKET), at a high number out of the
 * program's way: from half the descriptor limit, at most 1000 (a higher
 * number would grow the process's descriptor table for nothing); the
 * lowest free one if there is no room up there. */
static int open_high(const char *path)
{
	const char *base;
	struct rlimit rl;
	int fd, hi;

	if (!strncmp(path, SYSLOG_PREFIX, strlen(SYSLOG_PREFIX))) {
		fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			    0);
		if (fd < 0)
			return -errno;
		hi = syslog_connect(fd, path + strlen(SYSLOG_PREFIX));
		if (hi) {
			close(fd);
			return hi == -EINVAL ? -ENOTSOCK : hi;
		}
		goto high;
	}
	/* never block (this may run in the fault handler): the open is
	 * non-blocking, and only a regular file or a terminal is kept (a
	 * FIFO put at the path, with no reader, would block each write) */
	hi = _pmg_dir_open(path, &rep_dir, &base);
	if (hi < 0)
		return hi;
	fd = _pmg_open_checked(hi, base, O_WRONLY | O_APPEND | O_CREAT, 0644,
			       rep_dir.uid, PMG_SF_TTY, NULL);
	close(hi);
	if (fd < 0)
		return fd;
high:
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur > 64) {
		hi = rl.rlim_cur / 2 > 1000 ? 1000 : (int)(rl.rlim_cur / 2);
		hi = fcntl(fd, F_DUPFD_CLOEXEC, hi);
		if (hi >= 0) {
			close(fd);
			fd = hi;
		}
	}
	return fd;
}

int _pmg_report_open(const char *path)
{
	struct stat st;
	int fd;

	if (!path || !*path || strlen(path) >= sizeof(rep_path))
		return _pmg_err(-EINVAL,
				"report file '%.64s': empty or too "
				"long",
				path ? path : "");
	/* a new path: its directory is recorded anew */
	if (strcmp(path, rep_path))
		memset(&rep_dir, 0, sizeof(rep_dir));
	fd = open_high(path);
	if (fd < 0 && _pmg_open_why(fd, PMG_SF_TTY))
		return _pmg_err(fd == -ENXIO ? -ENODEV : fd,
				"report file %s: %s", path,
				_pmg_open_why(fd, PMG_SF_TTY));
	if (fd < 0)
		return _pmg_err(fd, "report file %s: %s", path, strerror(-fd));
	if (fstat(2, &st) == 0) {
		rep_fallback.dev = st.st_dev;
		rep_fallback.ino = st.st_ino;
		rep_fallback.ok = true;
	}
	rep_syslog = !strncmp(path, SYSLOG_PREFIX, strlen(SYSLOG_PREFIX));
	_pmg_strlcpy(rep_path, path, sizeof(rep_path));
	__atomic_store_n(&_pmg.fd_set, true, __ATOMIC_RELEASE);
	_pmg_report_fd_set(fd);
	return fd;
}

/* The report path could not be opened again (@err): said once, on
 * stderr if it is still the stderr the path was opened with (never on a
 * file the program opened under number 2).  AS-safe. */
static void reopen_failed(int err)
{
	const char *why = _pmg_open_why(err, PMG_SF_TTY);
	struct _pmg_buf b;
	struct stat st;

	if (__atomic_exchange_n(&rep_said, 1, __ATOMIC_ACQ_REL) ||
	    !rep_fallback.ok || fstat(2, &st) ||
	    st.st_dev != rep_fallback.dev || st.st_ino != rep_fallback.ino)
		return;
	b.n = 0;
	_pmg_buf_str(&b, "pmguard: report file ");
	_pmg_buf_str(&b, rep_path);
	_pmg_buf_str(&b, ": ");
	if (why) {
		_pmg_buf_str(&b, why);
	} else {
		_pmg_buf_str(&b, "cannot open it again (errno ");
		_pmg_buf_dec(&b, -err);
		_pmg_buf_str(&b, ")");
	}
	_pmg_buf_str(&b, ": stopped reporting to it (pid ");
	_pmg_buf_dec(&b, getpid());
	_pmg_buf_str(&b, ")\n");
	_pmg_buf_flush(&b, 2);
}

static int report_fd(void)
{
	int fd = __atomic_load_n(&_pmg.report_fd, __ATOMIC_RELAXED), nfd;
	int same = fd < 0 ? 0 : id_same(fd);

	if (fd < 0 || same < 0)
		return -1;
	if (same)
		return fd;
	/* not the file it was: open the report path again, or stop */
	if (rep_path[0] &&
	    !__atomic_exchange_n(&rep_busy, 1, __ATOMIC_ACQUIRE)) {
		nfd = open_high(rep_path);
		if (nfd >= 0) {
			id_record(nfd);
			if (__atomic_compare_exchange_n(&_pmg.report_fd, &fd,
							nfd, false,
							__ATOMIC_RELAXED,
							__ATOMIC_RELAXED)) {
				__atomic_store_n(&rep_busy, 0,
						 __ATOMIC_RELEASE);
				return nfd;
			}
			close(nfd);
		}
		__atomic_store_n(&rep_busy, 0, __ATOMIC_RELEASE);
		if (nfd >= 0)
			return -1; /* the fd was set meanwhile */
		reopen_failed(nfd);
	} else if (rep_path[0]) {
		return -1; /* another thread is reopening */
	}
	__atomic_compare_exchange_n(&_pmg.report_fd, &fd, -1, false,
				    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
	return -1;
}

/* @fd is the report socket of a syslog:SOCKET report (lines go out one
 * datagram each, with a syslog header). */
static bool rep_is_syslog(int fd)
{
	return rep_syslog && fd == __atomic_load_n(&rep_id.fd,
						   __ATOMIC_RELAXED);
}

/*
 * One datagram per line, "<PRI>pmguard[PID]: LINE" (the form syslog(3)
 * sends to /dev/log, without a time stamp: journald and rsyslog stamp
 * local messages on receipt).  Facility user; severity notice for
 * pmguard run's own lines ("pmguard-run: ..."), err for the rest
 * (reports).  Never blocks: a daemon's full queue is waited for at most
 * 50 ms per line, then the line is dropped; a daemon restarted (a new
 * socket at the path) is connected again.  AS-safe.
 */
static void syslog_lines(int fd, const char *s, size_t n)
{
	char msg[1024];
	const char *sock = rep_path + strlen(SYSLOG_PREFIX);
	struct _pmg_buf h;

	while (n > 0) {
		const char *nl = memchr(s, '\n', n);
		size_t l = nl ? (size_t)(nl - s) : n, hl, tries;

		h.n = 0;
		_pmg_buf_str(&h, !strncmp(s, "pmguard-run:", 12) && l >= 12
					 ? "<13>pmguard["
					 : "<11>pmguard[");
		_pmg_buf_dec(&h, getpid());
		_pmg_buf_str(&h, "]: ");
		hl = h.n;
		if (l > sizeof(msg) - hl)
			l = sizeof(msg) - hl;
		memcpy(msg, h.b, hl);
		memcpy(msg + hl, s, l);
		for (tries = 0; l && tries < 26; tries++) {
			struct timespec ts = { 0, 2000000 };

			if (send(fd, msg, hl + l, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0)
				break;
			if (errno == EAGAIN || errno == ENOBUFS)
				nanosleep(&ts, NULL);
			else if ((errno == ECONNREFUSED || errno == ENOTCONN ||
				  errno == ENOENT) &&
				 tries < 2)
				(void)syslog_connect(fd, sock);
			else
				break;
		}
		if (!nl)
			break;
		n -= (size_t)(nl - s) + 1;
		s = nl + 1;
	}
}

/* @s as a report on @fd: written, or one syslog message per line. */
void _pmg_report_write(int fd, const char *s, size_t n)
{
	if (fd >= 0 && rep_is_syslog(fd)) {
		syslog_lines(fd, s, n);
		return;
	}
	while (fd >= 0 && n > 0) {
		ssize_t w = write(fd, s, n);

		if (w <= 0)
			break;
		s += w;
		n -= (size_t)w;
	}
}

/* The check leaves errno as it found it (callers are not all handlers). */
int _pmg_report_fd(void)
{
	int e = errno, fd = report_fd();

	errno = e;
	return fd;
}

/*
 * Where the kernel enables PKU, PROT_EXEC alone is execute-only code: a
 * protection key that is access-disabled in every signal handler (and in
 * the program).  The unwinder reads the code bytes at a frame's pc that
 * has no unwind info (its sigreturn check), so a backtrace through a
 * stray write from execute-only code (a JIT) faulted inside pmguard's
 * handler.  Every key but 0 readable (and write-disabled) for the walk.
 */
void _pmg_backtrace_to(int fd)
{
	struct _pmg_cpu cpu;
	void *bt[32];
	uint32_t pkru = 0;
	int n;

	if (fd < 0)
		return;
	_pmg_cpu_get(&cpu);
	if (cpu.ospke)
		pkru = _pmg_pku_all_readable();
	n = backtrace(bt, 32);
	if (cpu.ospke)
		_pmg_pku_restore(pkru);
	if (rep_is_syslog(fd)) {
		/* a line per frame: address and module+offset */
		struct _pmg_buf b = { .n = 0 };
		int i;

		for (i = 0; i < n; i++) {
			_pmg_buf_str(&b, "pmguard:   #");
			_pmg_buf_dec(&b, i);
			_pmg_buf_str(&b, " ");
			_pmg_buf_hex(&b, (uintptr_t)bt[i]);
			_pmg_site_fmt(&b, (uintptr_t)bt[i]);
			_pmg_buf_str(&b, "\n");
			_pmg_buf_flush(&b, fd);
		}
		return;
	}
	backtrace_symbols_fd(bt, n, fd);
}

/* A fault report's backtrace: its header line, then the frames (the
 * handler's own first).  @b is the caller's buffer, flushed: a second
 * one would cost the handler's frame 520 bytes of the signal stack its
 * budget (fault.c's TRACE_STACK) counts.  AS-safe as _pmg_backtrace_to(). */
void _pmg_backtrace_handler(struct _pmg_buf *b, int fd)
{
	_pmg_buf_str(b, "pmguard: backtrace (handler frames first):\n");
	_pmg_buf_flush(b, fd);
	_pmg_backtrace_to(fd);
}

/* Start the line "pmguard: <what>" in @b: the report fd, or -1 (none:
 * the caller reports nothing). */
static int report_begin(struct _pmg_buf *b, const char *what)
{
	int fd = _pmg_report_fd();

	if (fd >= 0) {
		_pmg_buf_str(b, "pmguard: ");
		_pmg_buf_str(b, what);
	}
	return fd;
}

void _pmg_report_fault(const struct pmg_fault *f, pid_t tid,
		       const char *what, bool trace)
{
	struct _pmg_buf b = { .n = 0 };
	int fd = report_begin(&b, what), key;

	if (fd < 0)
		return;
	_pmg_buf_str(&b, f->acc == PMG_WRITE ? ": stray write to "
					     : ": stray read of ");
	_pmg_buf_hex(&b, f->addr);
	_pmg_buf_str(&b, " in domain '");
	_pmg_buf_str(&b, _pmg_dom_name(f->dom));
	/* a key (PKU); its number (mprotect: no keys, as before); no key
	 * (a virtual domain on PKU: page protection) */
	key = f->no_sync ? _pmg.prim->paged_key(f->dom) : (int)f->key;
	if (key >= 0) {
		_pmg_buf_str(&b, "' (key ");
		_pmg_buf_dec(&b, key);
		_pmg_buf_str(&b, ") by thread ");
	} else {
		_pmg_buf_str(&b, "' (no key: page protection) by thread ");
	}
	_pmg_buf_dec(&b, tid);
	_pmg_buf_str(&b, " at ip ");
	_pmg_buf_hex(&b, f->ip);
	_pmg_site_fmt(&b, f->ip);
	_pmg_buf_str(&b, !f->no_sync ? ", PKRU " : ", emulated PKRU ");
	_pmg_buf_hex(&b, f->saved_pkval);
	_pmg_buf_str(&b, "\n");
	_pmg_buf_flush(&b, fd);
	if (trace) {
		_pmg_backtrace_handler(&b, fd);
	}
}

void _pmg_report_unbalanced(struct pmg_domain *d, int acc, void *caller)
{
	struct _pmg_buf b = { .n = 0 };

	_pmg_buf_str(&b, "pmguard: unbalanced ");
	_pmg_buf_str(&b, acc ? "write" : "read");
	_pmg_buf_str(&b, " window close on domain '");
	_pmg_buf_str(&b, pmg_domain_name(d) ? pmg_domain_name(d) : "?");
	_pmg_buf_str(&b, "' by thread ");
	_pmg_buf_dec(&b, syscall(SYS_gettid));
	_pmg_buf_str(&b, " from ");
	_pmg_buf_hex(&b, (uintptr_t)caller);
	_pmg_buf_str(&b, ": no such window is open; nothing changed\n");
	_pmg_buf_flush(&b, _pmg_report_fd());
	_pmg_backtrace_to(_pmg_report_fd());
}

void _pmg_report_dead_windows(pid_t tid, const char *name, unsigned w,
			      unsigned r)
{
	struct _pmg_buf b = { .n = 0 };

	_pmg_buf_str(&b, "pmguard: thread ");
	_pmg_buf_dec(&b, tid);
	_pmg_buf_str(&b, " ended with ");
	_pmg_buf_dec(&b, w);
	_pmg_buf_str(&b, " write and ");
	_pmg_buf_dec(&b, r);
	_pmg_buf_str(&b, " read window(s) open on domain '");
	_pmg_buf_str(&b, name);
	_pmg_buf_str(&b, "': closed them\n");
	_pmg_buf_flush(&b, _pmg_report_fd());
}

void _pmg_report_long_term(const void *addr, struct pmg_domain *d,
			   void *caller)
{
	struct _pmg_buf b = { .n = 0 };
	int fd = _pmg_report_fd();

	_pmg_buf_str(&b, "pmguard: warning: long-term map of protected "
		     "address ");
	_pmg_buf_hex(&b, (uintptr_t)addr);
	_pmg_buf_str(&b, " (domain '");
	_pmg_buf_str(&b, pmg_domain_name(d) ? pmg_domain_name(d) : "?");
	_pmg_buf_str(&b, "') from ");
	_pmg_buf_hex(&b, (uintptr_t)caller);
	_pmg_buf_str(&b, ": windows are per thread; use pmg_map_local()\n");
	_pmg_buf_flush(&b, fd);
	_pmg_backtrace_to(fd);
}

/* @what(@a, @n) took the protected range @r away: say so, and its @fate. */
void _pmg_report_range_gone(const char *what, uintptr_t a, size_t n,
			    const struct _pmg_range *r, const char *fate)
{
	struct _pmg_buf b = { .n = 0 };
	int fd = report_begin(&b, what);

	if (fd < 0)
		return;
	_pmg_buf_str(&b, "(");
	_pmg_buf_hex(&b, a);
	_pmg_buf_str(&b, ", ");
	_pmg_buf_dec(&b, (int64_t)n);
	_pmg_buf_str(&b, ") took protected range ");
	_pmg_buf_hex(&b, r->base);
	_pmg_buf_str(&b, "-");
	_pmg_buf_hex(&b, r->end);
	_pmg_buf_str(&b, " of domain '");
	_pmg_buf_str(&b, _pmg_dom_name(r->dom));
	_pmg_buf_str(&b, "' away from pmguard: ");
	_pmg_buf_str(&b, fate);
	_pmg_buf_str(&b, "\n");
	_pmg_buf_flush(&b, fd);
}

/* ------------------------------------------------------- audit sites */

/* Audit site table: faulting instruction -> count, lock-free. */
#define PMG_SITES_BITS 10
#define PMG_SITES (1u << PMG_SITES_BITS)
static struct {
	uintptr_t ip;
	uint64_t count;
	int id; /* the domain */
} sites[PMG_SITES];

/* Count an audit fault at @ip; returns the count (1: first at site). */
uint64_t _pmg_audit_site_hit(uintptr_t ip, int id)
{
	bool fresh;
	int s = _pmg_ip_slot(&sites[0].ip, sizeof(sites[0]), PMG_SITES_BITS,
			     ip, true, &fresh);

	if (s < 0)
		return 0;	/* table full: counted in stats only */
	if (fresh) {
		sites[s].id = id;
		_PMG_STAT_INC(audit_sites);
	}
	return __atomic_add_fetch(&sites[s].count, 1, __ATOMIC_RELAXED);
}

PMG_API int pmg_audit_dump(int fd)
{
	struct _pmg_buf b = { .n = 0 };
	unsigned i;
	int n = 0;

	for (i = 0; i < PMG_SITES; i++) {
		uintptr_t ip = __atomic_load_n(&sites[i].ip, __ATOMIC_ACQUIRE);

		if (!ip)
			continue;
		n++;
		_pmg_buf_str(&b, "pmguard: audit site ");
		_pmg_buf_hex(&b, ip);
		_pmg_buf_str(&b, ": ");
		_pmg_buf_dec(&b, (int64_t)__atomic_load_n(&sites[i].count,
						    __ATOMIC_RELAXED));
		_pmg_buf_str(&b, " stray access(es), domain '");
		_pmg_buf_str(&b, _pmg_dom_name(sites[i].id));
		_pmg_buf_str(&b, "'\n");
		_pmg_buf_flush(&b, fd);
	}
	return n;
}

/* Empty the site table (pmg_stats_reset(), keys.c). */
void _pmg_audit_sites_reset(void)
{
	unsigned i;

	for (i = 0; i < PMG_SITES; i++) {
		sites[i].count = 0;
		sites[i].id = 0;
		__atomic_store_n(&sites[i].ip, 0, __ATOMIC_RELEASE);
	}
}
