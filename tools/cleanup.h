/* SPDX-License-Identifier: MIT */
/*
 * Nothing left behind (tools/cleanup.c): the children a verb forks and
 * the scratch files and directories it makes are registered here, and a
 * terminating signal (SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGALRM, SIGTERM,
 * SIGUSR1, SIGUSR2; not those ignored at start, as shells leave them for
 * background jobs) first kills and reaps the children, removes the
 * scratch files and directories, and then ends the process by the same
 * signal, so that its exit status still tells.  Children also get
 * SIGKILL when the parent dies any other way (PR_SET_PDEATHSIG; SIGKILL
 * of the parent leaves the scratch files, nothing can remove them then).
 * The normal and error paths remove their files themselves.
 */
#ifndef PMG_CLEANUP_H
#define PMG_CLEANUP_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

/* Install the handlers (once; cli_fork() and cli_scratch() call it). */
void cli_cleanup_init(void);

/* Block the handled signals (to make and register a scratch file as one
 * step), and restore the mask. */
void cli_signals_hold(sigset_t *old);
void cli_signals_release(const sigset_t *old);

/*
 * fork(2) with the rules above.  In the child the handlers are back to
 * the defaults and the child dies with its parent.  -1 with errno on
 * failure.
 */
pid_t cli_fork(void);

/*
 * waitpid(@pid, @status, @nohang ? WNOHANG : 0) for a child of
 * cli_fork(), retried on EINTR; the child is forgotten once it has been
 * reaped.  Returns @pid, 0 (still running, @nohang) or -1.
 */
pid_t cli_wait(pid_t pid, int *status, bool nohang);

/*
 * Remove @path if a signal ends the process: a file (and the hidden
 * temporary names "<dir>/.<base>.pmg-<pid>-*" that pmg_pool_create()
 * uses while it makes one), or, with @dir, a directory and every entry
 * in it.  Call cli_scratch_done(@path) once it is removed or kept.
 * Returns 0, or -1 when the table is full (8 entries) or @path too long.
 */
int cli_scratch(const char *path, bool dir);
void cli_scratch_done(const char *path);

#endif /* PMG_CLEANUP_H */
