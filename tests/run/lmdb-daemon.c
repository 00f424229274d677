// SPDX-License-Identifier: MIT
/*
 * lmdb-daemon: a small daemon over an LMDB environment (MDB_WRITEMAP) for
 * the `pmguard run` daemon tests (tests/run/test-daemon.sh), doing what
 * servers do at start and at run time.  No pmguard header.
 *
 *   lmdb-daemon DIR LOG [--detach] [--setsid] [--close-fds]
 *               [--go FILE] [--helper PROG ARGS...]
 *
 *   --detach     fork, setsid, fork again (the first two processes exit
 *                0), chdir /, stdin/stdout/stderr to /dev/null
 *   --setsid     setsid() in place (no fork)
 *   --close-fds  close every descriptor from 3 up at start
 *   --go FILE    wait up to 20 s for FILE to exist, then open the
 *                environment (regardless, after 20 s): the test orders the
 *                daemon's first open after an event of its own (e.g.
 *                `pmguard run` has returned)
 *   --helper ... the program SIGUSR2 runs (fork, exec, wait)
 *
 * What a daemon started as root does to run as its own user
 * (tests/run/test-privdrop.sh), after the options above:
 *   --chroot ROOT  chroot(ROOT), chdir("/"): DIR is then a path in ROOT
 *   --drop         setgroups(0), setgid(65534), setuid(65534) (nobody);
 *                  the environment is opened after it; LOG is opened
 *                  once before (the dropped user may not open it)
 *   --close-late   close every descriptor from 3 up after the drop (LOG's
 *                  kept)
 *   --dup2-over    after the drop, LOG dup2()ed over the descriptor
 *                  numbers pmguard passed (PMGUARD_RUN_STATUS,
 *                  PMGUARD_RUN_LEARN: "FD:...", PMGUARD_RUN_REPORT_FD),
 *                  left open across exec: a program that reuses them
 *   --netns        unshare(CLONE_NEWNET) before the drop: a network
 *                  namespace of its own (no abstract socket of the
 *                  launcher's reachable)
 *   --once         no loop: open the environment, 10 records, a stray
 *                  write ("wild"), close it, "bye", exit 0
 *   --open-early   (with --once) the environment opened and its records
 *                  written before the chroot and the drop, the stray
 *                  write after (DIR a path outside ROOT)
 *   --exec-once    after the drop, fork and exec itself with DIR LOG
 *                  --once (the child inherits what the parent has), wait
 *                  for it, "child rc N", exit with its status
 *
 * Records as lmdb-prog writes them (lmdb-prog verify DIR any checks
 * them): one write transaction of 10 records every 50 ms.  Signals:
 * SIGHUP reopens the environment (a reload), SIGUSR1 makes a stray write
 * through a pointer a read transaction returned (a value in the map),
 * SIGUSR2 runs the helper, SIGTERM ends it (exit 0).  Each event is a
 * line appended to LOG (opened by path each time): "ready PID",
 * "reloaded N", "wild", "helper rc N", "bye".
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <grp.h>
#include <lmdb.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t hup, usr1, usr2, term;
static const char *logpath;
static int logfd = -1; /* LOG kept open (--drop), or -1: by path */

static void on_sig(int sig)
{
	if (sig == SIGHUP)
		hup = 1;
	else if (sig == SIGUSR1)
		usr1 = 1;
	else if (sig == SIGUSR2)
		usr2 = 1;
	else
		term = 1;
}

static void logf_(const char *fmt, ...)
{
	FILE *f = logfd < 0 ? fopen(logpath, "ae") : NULL;
	va_list ap;

	if (logfd >= 0) {
		va_start(ap, fmt);
		vdprintf(logfd, fmt, ap);
		va_end(ap);
		dprintf(logfd, "\n");
		return;
	}
	if (!f)
		return;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	fclose(f);
}

static void kv(unsigned i, char *k, char *v)
{
	i %= 100000000u;
	snprintf(k, 16, "k%08u", i);
	snprintf(v, 40, "v%08uv%08uv%08uv%08u", i, i, i, i);
}

static MDB_env *env_open(const char *dir)
{
	MDB_env *env;

	if (mdb_env_create(&env) || mdb_env_set_mapsize(env, 64ul << 20) ||
	    mdb_env_open(env, dir, MDB_WRITEMAP, 0644)) {
		logf_("cannot open %s", dir);
		exit(2);
	}
	return env;
}

/* 10 records, keys from *n on */
static int put10(MDB_env *env, unsigned *n)
{
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val key, val;
	char k[16], v[40];
	int i, rc;

	rc = mdb_txn_begin(env, NULL, 0, &txn);
	if (rc)
		return rc;
	rc = mdb_dbi_open(txn, NULL, 0, &dbi);
	for (i = 0; !rc && i < 10; i++, (*n)++) {
		kv(*n, k, v);
		key.mv_data = k;
		key.mv_size = strlen(k);
		val.mv_data = v;
		val.mv_size = strlen(v);
		rc = mdb_put(txn, dbi, &key, &val, 0);
	}
	if (rc) {
		mdb_txn_abort(txn);
		return rc;
	}
	return mdb_txn_commit(txn);
}

/* A bug: a value read in a read-only transaction, written through. */
static void wild(MDB_env *env)
{
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val key = { 9, "k00000000" }, val;

	if (mdb_txn_begin(env, NULL, MDB_RDONLY, &txn))
		return;
	if (!mdb_dbi_open(txn, NULL, 0, &dbi) &&
	    !mdb_get(txn, dbi, &key, &val)) {
		logf_("wild");
		memset(val.mv_data, '#', 8);
	}
	mdb_txn_abort(txn);
}

static int helper(char **argv)
{
	pid_t p = fork();
	int st;

	if (p == 0) {
		execv(argv[0], argv);
		_exit(127);
	}
	if (p < 0 || waitpid(p, &st, 0) != p)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The daemon's user: root's groups, group and user given up. */
static void drop(void)
{
	if (setgroups(0, NULL) || setgid(65534) || setuid(65534)) {
		logf_("cannot drop privileges");
		exit(2);
	}
	logf_("dropped to %d", (int)getuid());
}

/* --dup2-over: LOG at each number pmguard passed. */
static void dup2_over(void)
{
	static const char *const vars[] = { "PMGUARD_RUN_STATUS",
					    "PMGUARD_RUN_LEARN",
					    "PMGUARD_RUN_REPORT_FD" };
	unsigned i;

	for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i]);
		int fd;

		if (v && sscanf(v, "%d:", &fd) == 1 && fd > 2 && fd != logfd &&
		    dup2(logfd, fd) == fd)
			logf_("log at %d", fd);
	}
}

/* --once: 10 records and a stray write, then a clean end; @env: opened
 * and written already (--open-early), or NULL. */
static int once(const char *dir, MDB_env *env)
{
	unsigned n = 0;

	if (!env) {
		env = env_open(dir);
		if (put10(env, &n))
			return 2;
	}
	logf_("ready %d", (int)getpid());
	wild(env);
	mdb_env_close(env);
	logf_("bye");
	return 0;
}

/* --exec-once: this program again, run by a child, DIR LOG --once. */
static int exec_once(const char *self, const char *dir)
{
	char *argv[] = { (char *)self, (char *)dir, (char *)logpath,
			 (char *)"--once", NULL };
	pid_t p = fork();
	int st;

	if (p == 0) {
		execv(self, argv);
		_exit(127);
	}
	if (p < 0 || waitpid(p, &st, 0) != p)
		return 2;
	st = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	logf_("child rc %d", st);
	return st;
}

int main(int argc, char **argv)
{
	int detach = 0, setsid_ = 0, closefds = 0, i, fd, reloads = 0;
	int drop_ = 0, late = 0, once_ = 0, exec_ = 0, early = 0, netns = 0;
	int over = 0;
	MDB_env *env0 = NULL;
	char **help = NULL, go[4096] = "", self[4096];
	const char *root = NULL;
	struct sigaction sa;
	unsigned n = 0;
	MDB_env *env;
	char dir[4096];

	if (argc < 3)
		return 2;
	logpath = argv[2];
	/* the path this program is at, for --exec-once (absolute: a chroot
	 * makes it unreachable, so the two are not combined) */
	if (!realpath("/proc/self/exe", self))
		return 2;
	for (i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "--detach"))
			detach = 1;
		else if (!strcmp(argv[i], "--setsid"))
			setsid_ = 1;
		else if (!strcmp(argv[i], "--close-fds"))
			closefds = 1;
		else if (!strcmp(argv[i], "--go") && i + 1 < argc) {
			/* absolute: --detach changes directory to / */
			if (argv[++i][0] == '/')
				snprintf(go, sizeof(go), "%s", argv[i]);
			else if (!getcwd(go, sizeof(go) / 2))
				return 2;
			else
				snprintf(go + strlen(go), sizeof(go) / 2,
					 "/%s", argv[i]);
		}
		else if (!strcmp(argv[i], "--chroot") && i + 1 < argc)
			root = argv[++i];
		else if (!strcmp(argv[i], "--drop"))
			drop_ = 1;
		else if (!strcmp(argv[i], "--close-late"))
			late = 1;
		else if (!strcmp(argv[i], "--netns"))
			netns = 1;
		else if (!strcmp(argv[i], "--dup2-over"))
			over = 1;
		else if (!strcmp(argv[i], "--once"))
			once_ = 1;
		else if (!strcmp(argv[i], "--open-early"))
			early = 1;
		else if (!strcmp(argv[i], "--exec-once"))
			exec_ = 1;
		else if (!strcmp(argv[i], "--helper") && i + 1 < argc) {
			help = argv + i + 1;
			break;
		} else
			return 2;
	}
	/* DIR as given when it is a path in the chroot */
	if (root && !early)
		snprintf(dir, sizeof(dir), "%s", argv[1]);
	else if (!realpath(argv[1], dir))
		return 2;
	if (detach) {
		if (fork() > 0)
			_exit(0);
		setsid();
		if (fork() > 0)
			_exit(0);
		if (chdir("/"))
			return 2;
		fd = open("/dev/null", O_RDWR);
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	} else if (setsid_ && setsid() < 0) {
		perror("setsid");
		return 2;
	}
	if (closefds)
		for (fd = 3; fd < 1024; fd++)
			close(fd);
	if (drop_ || root || over) {
		logfd = open(logpath, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
			     0644);
		if (logfd < 0)
			return 2;
	}
	if (early) {
		unsigned n0 = 0;

		env0 = env_open(dir);
		if (put10(env0, &n0))
			return 2;
	}
	if (root && (chroot(root) || chdir("/"))) {
		logf_("cannot chroot to %s", root);
		return 2;
	}
	if (netns && unshare(CLONE_NEWNET)) {
		logf_("cannot unshare the network namespace");
		return 3;
	}
	if (drop_)
		drop();
	if (late)
		for (fd = 3; fd < 1024; fd++)
			if (fd != logfd)
				close(fd);
	if (over)
		dup2_over();
	if (once_)
		return once(dir, env0);
	if (exec_)
		return exec_once(self, dir);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sig;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGUSR2, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	for (i = 0; go[0] && !term && access(go, F_OK) && i < 2000; i++) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };

		nanosleep(&ts, NULL);
	}
	env = env_open(dir);
	if (put10(env, &n))
		return 2;
	logf_("ready %d", (int)getpid());
	while (!term) {
		struct timespec ts = { 0, 50 * 1000 * 1000 };

		nanosleep(&ts, NULL);
		if (hup) {
			hup = 0;
			mdb_env_close(env);
			env = env_open(dir);
			logf_("reloaded %d", ++reloads);
		}
		if (usr1) {
			usr1 = 0;
			wild(env);
		}
		if (usr2) {
			usr2 = 0;
			logf_("helper rc %d", help ? helper(help) : -1);
		}
		if (n < 100000 && put10(env, &n)) {
			logf_("write failed");
			return 2;
		}
	}
	mdb_env_close(env);
	logf_("bye");
	return 0;
}
