// SPDX-License-Identifier: MIT
/*
 * Children and scratch files of the verbs, cleaned up on terminating
 * signals (tools/cleanup.h).  The handler only makes async-signal-safe
 * calls (kill, waitpid, open, getdents64, unlinkat, rmdir, sigaction,
 * sigprocmask, raise, _exit) on tables written before it can run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../src/procfs.h"
#include "cleanup.h"

#define NCHILD		8
#define NSCRATCH	8
#define PATH_SZ		512

static const int sigs[] = { SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGALRM,
			    SIGTERM, SIGUSR1, SIGUSR2 };
#define NSIGS ((int)(sizeof(sigs) / sizeof(sigs[0])))

static bool handled[NSIGS];
static bool inited;
static sigset_t set;			/* the handled signals */

static volatile pid_t child[NCHILD];

static struct scratch {
	volatile sig_atomic_t used;	/* set last, cleared first */
	bool dir;
	char path[PATH_SZ];
	char parent[PATH_SZ];		/* a file's directory */
	char prefix[PATH_SZ];		/* ".<base>.pmg-<pid>-" */
} scratch[NSCRATCH];

static void barrier(void)
{
	__asm__ volatile("" ::: "memory");
}

/* Unlink the entries of @dir (all of them, or those starting with
 * @prefix); the directory stays. */
static void clear_dir(const char *dir, const char *prefix)
{
	static char buf[4096];
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	size_t plen = prefix ? strlen(prefix) : 0;
	long n, at;

	if (fd < 0)
		return;
	while ((n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
		for (at = 0; at < n;) {
			/* struct linux_dirent64: ino, off, reclen, type, name */
			unsigned short reclen;
			const char *name = buf + at + 19;

			memcpy(&reclen, buf + at + 16, sizeof(reclen));
			at += reclen;
			if (!strcmp(name, ".") || !strcmp(name, ".."))
				continue;
			if (prefix && strncmp(name, prefix, plen))
				continue;
			unlinkat(fd, name, 0);
		}
	}
	close(fd);
}

static void on_signal(int sig)
{
	struct sigaction dfl;
	sigset_t one;
	int i, k;

	for (i = 0; i < NCHILD; i++) {
		pid_t p = child[i];

		if (p > 0) {
			kill(p, SIGKILL);
			while (waitpid(p, NULL, 0) < 0 && errno == EINTR)
				;
		}
	}
	/* files first, then the directories that may hold them */
	for (k = 0; k < 2; k++)
		for (i = 0; i < NSCRATCH; i++) {
			struct scratch *s = &scratch[i];

			if (!s->used || s->dir != (k == 1))
				continue;
			if (s->dir) {
				clear_dir(s->path, NULL);
				rmdir(s->path);
			} else {
				unlink(s->path);
				if (s->prefix[0])
					clear_dir(s->parent, s->prefix);
			}
		}
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigaction(sig, &dfl, NULL);
	sigemptyset(&one);
	sigaddset(&one, sig);
	sigprocmask(SIG_UNBLOCK, &one, NULL);
	raise(sig);
	_exit(128 + sig);
}

void cli_cleanup_init(void)
{
	struct sigaction sa, old;
	int i;

	if (inited)
		return;
	inited = true;
	sigemptyset(&set);
	for (i = 0; i < NSIGS; i++)
		sigaddset(&set, sigs[i]);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_mask = set;		/* one cleanup at a time */
	for (i = 0; i < NSIGS; i++) {
		if (sigaction(sigs[i], NULL, &old) ||
		    old.sa_handler == SIG_IGN)
			continue;	/* ignored at start: stays so */
		handled[i] = !sigaction(sigs[i], &sa, NULL);
	}
}

void cli_signals_hold(sigset_t *old)
{
	cli_cleanup_init();
	sigprocmask(SIG_BLOCK, &set, old);
}

void cli_signals_release(const sigset_t *old)
{
	sigprocmask(SIG_SETMASK, old, NULL);
}

pid_t cli_fork(void)
{
	pid_t parent = getpid(), pid;
	sigset_t old;
	int i;

	cli_cleanup_init();
	fflush(NULL);
	sigprocmask(SIG_BLOCK, &set, &old);
	pid = fork();
	if (pid == 0) {
		struct sigaction dfl;

		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		for (i = 0; i < NSIGS; i++)
			if (handled[i])
				sigaction(sigs[i], &dfl, NULL);
		for (i = 0; i < NCHILD; i++)
			child[i] = 0;
		for (i = 0; i < NSCRATCH; i++)
			scratch[i].used = 0;
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);	/* the parent died before prctl */
	} else if (pid > 0) {
		for (i = 0; i < NCHILD; i++)
			if (!child[i]) {
				child[i] = pid;
				break;
			}
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	return pid;
}

pid_t cli_wait(pid_t pid, int *status, bool nohang)
{
	siginfo_t si;
	pid_t r;
	int i;

	/* Wait without reaping, forget the child, then reap: a signal
	 * handler never kills a pid that may have been reused. */
	for (;;) {
		memset(&si, 0, sizeof(si));
		if (!waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT |
			    (nohang ? WNOHANG : 0)))
			break;
		if (errno != EINTR)
			return -1;
	}
	if (si.si_pid != pid)
		return 0;		/* WNOHANG: still running */
	for (i = 0; i < NCHILD; i++)
		if (child[i] == pid)
			child[i] = 0;
	barrier();
	while ((r = waitpid(pid, status, 0)) < 0 && errno == EINTR)
		;
	return r;
}

int cli_scratch(const char *path, bool dir)
{
	const char *slash, *base;
	struct scratch *s = NULL;
	int i, n;

	cli_cleanup_init();
	for (i = 0; i < NSCRATCH && !s; i++)
		if (!scratch[i].used)
			s = &scratch[i];
	if (!s || strlen(path) >= PATH_SZ)
		return -1;
	s->dir = dir;
	snprintf(s->path, sizeof(s->path), "%s", path);
	slash = strrchr(path, '/');
	base = slash ? slash + 1 : path;
	_pmg_dir_of(s->parent, sizeof(s->parent), path);
	n = snprintf(s->prefix, sizeof(s->prefix), ".%s.pmg-%d-", base,
		     (int)getpid());
	if (n < 0 || n >= (int)sizeof(s->prefix))
		s->prefix[0] = '\0';
	barrier();
	s->used = 1;
	return 0;
}

void cli_scratch_done(const char *path)
{
	int i;

	for (i = 0; i < NSCRATCH; i++)
		if (scratch[i].used && !strcmp(scratch[i].path, path))
			scratch[i].used = 0;
}
