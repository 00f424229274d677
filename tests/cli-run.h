/* SPDX-License-Identifier: MIT */
/*
 * cli-run.h - run the pmguard CLI from a test and capture what it says
 * (test-cli, test-inject).  Header-only, like tap.h.
 *
 * find_cli(): $PMGUARD_CLI, else pmguard in PATH, else build/pmguard.
 * run_cli(): the CLI with the given arguments, stdin /dev/null, stdout and
 * stderr into r->out and r->err, its exit status (or -1) in r->status.
 */
#ifndef PMG_TESTS_CLI_RUN_H
#define PMG_TESTS_CLI_RUN_H

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capture.h"

static char cli[4096];

static bool executable(const char *p)
{
	struct stat st;

	return !stat(p, &st) && S_ISREG(st.st_mode) && !access(p, X_OK);
}

/* $PMGUARD_CLI, else pmguard in PATH, else build/pmguard; false if none. */
static bool find_cli(void)
{
	const char *e = getenv("PMGUARD_CLI"), *path = getenv("PATH");

	if (e && *e) {
		snprintf(cli, sizeof(cli), "%s", e);
		return executable(cli);
	}
	while (path && *path) {
		size_t n = strcspn(path, ":");

		snprintf(cli, sizeof(cli), "%.*s/pmguard", (int)n, path);
		if (n && executable(cli))
			return true;
		path += n + (path[n] == ':');
	}
	snprintf(cli, sizeof(cli), "build/pmguard");
	return executable(cli);
}

struct run {
	int status;		/* exit status, or -1 (signal, exec) */
	char out[65536];
	char err[16384];
};

/* Run the CLI with @args (NULL-terminated). */
static void run_cli(struct run *r, const char *const *args)
{
	const char *argv[32];
	int o = tmpfd(), e = tmpfd(), n = 0, st;
	pid_t pid;

	argv[n++] = cli;
	while (*args && n < 31)
		argv[n++] = *args++;
	argv[n] = NULL;
	r->status = -1;
	r->out[0] = r->err[0] = '\0';
	if (o < 0 || e < 0)
		return;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		int nul = open("/dev/null", O_RDONLY);

		dup2(nul, 0);
		dup2(o, 1);
		dup2(e, 2);
		execv(cli, (char *const *)argv);
		_exit(127);
	}
	if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st))
		r->status = WEXITSTATUS(st);
	slurp(o, r->out, sizeof(r->out));
	slurp(e, r->err, sizeof(r->err));
	close(o);
	close(e);
}

#endif
