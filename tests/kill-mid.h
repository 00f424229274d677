/* SPDX-License-Identifier: MIT */
/*
 * kill-mid.h - kill a writer at a random moment (test-crash, dax-test).
 * Header-only, like tap.h.
 */
#ifndef PMG_TESTS_KILL_MID_H
#define PMG_TESTS_KILL_MID_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/*
 * Fork a child that runs @appender(wfd) and writes one uint64_t to the
 * pipe @wfd for every record it has made durable; read @want of them,
 * spin @spins more times (to kill it inside a call), SIGKILL it, read
 * what is already in the pipe and reap it.  Returns how many values were
 * read (-1 if the pipe or the fork failed); *@last is the last one
 * (UINT64_MAX if none), *@status the child's wait status.
 */
static inline int64_t kill_mid_append(int (*appender)(int wfd),
				      uint64_t want, uint64_t spins,
				      uint64_t *last, int *status)
{
	uint64_t got = 0, n;
	int pfd[2];
	pid_t pid;

	*last = UINT64_MAX;
	*status = 0;
	if (pipe(pfd))
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return -1;
	}
	if (pid == 0) {
		close(pfd[0]);
		_exit(appender(pfd[1]));
	}
	close(pfd[1]);
	while (got < want && read(pfd[0], &n, sizeof(n)) == sizeof(n)) {
		*last = n;
		got++;
	}
	for (; spins; spins--)
		__asm__ volatile("" ::: "memory");
	kill(pid, SIGKILL);
	/* values already in the pipe count too */
	while (read(pfd[0], &n, sizeof(n)) == sizeof(n)) {
		*last = n;
		got++;
	}
	close(pfd[0]);
	waitpid(pid, status, 0);
	return (int64_t)got;
}

#endif
