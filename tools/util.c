// SPDX-License-Identifier: MIT
/*
 * General helpers of the pmguard CLI (tools/util.h): messages, time,
 * progress, temporary directories.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "cleanup.h"
#include "util.h"

int cli_error(const char *fmt, ...)
{
	va_list ap;

	fputs("pmguard: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 2;
}

double cli_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------ progress bar */

void cli_bar_init(struct cli_bar *b, const char *verb, const char *label)
{
	const char *term = getenv("TERM"), *e = getenv("PMGUARD_PROGRESS");
	unsigned long long v;

	b->verb = verb;
	b->label = label;
	b->shown = -1;
	/* not on a dumb terminal (the PKU guest's serial console is one) */
	b->tty = isatty(2) && term && *term && strcmp(term, "dumb");
	b->every = CLI_PROGRESS_S;
	if (e && !strcmp(e, "off"))
		b->every = -1;
	else if (e && *e && !cli_number(verb, "PMGUARD_PROGRESS", e, false, 0,
					86400, &v))
		b->every = (int)v;
	b->t0 = cli_now();
	b->last = 0;
}

void cli_bar_draw(double done, void *arg)
{
	struct cli_bar *b = arg;
	char bar[41];
	int pct = (int)(done * 100 + 0.5), n, i;
	double now;

	if (pct > 100)
		pct = 100;
	if (pct == b->shown)
		return;
	if (!b->tty) {
		if (b->every < 0)
			return;
		now = cli_now();
		/* a line every few seconds; the last one at 100% */
		if (!(pct == 100 && b->last) &&
		    now - (b->last ? b->last : b->t0) < b->every)
			return;
		b->shown = pct;
		b->last = now;
		fprintf(stderr, "pmguard %s: %s: %d%% after %.1f s\n",
			b->verb, b->label, pct, now - b->t0);
		fflush(stderr);
		return;
	}
	b->shown = pct;
	n = pct * 40 / 100;
	for (i = 0; i < 40; i++)
		bar[i] = i < n ? '#' : '.';
	bar[40] = '\0';
	fprintf(stderr, "\r  %-8s [%s] %3d%%", b->label, bar, pct);
	fflush(stderr);
}

void cli_bar_clear(struct cli_bar *b)
{
	if (!b->tty || b->shown < 0)
		return;
	fprintf(stderr, "\r%60s\r", "");
	fflush(stderr);
	b->shown = -1;
}

/* ---------------------------------------------- temporary directories */

static char tmp_base[256];

const char *cli_tmp_base(void)
{
	const char *e = getenv("TMPDIR");
	struct stat st;

	if (e && *e)
		snprintf(tmp_base, sizeof(tmp_base), "%s", e);
	else if (!stat("/dev/shm", &st) && S_ISDIR(st.st_mode) &&
		 !access("/dev/shm", W_OK | X_OK))
		snprintf(tmp_base, sizeof(tmp_base), "/dev/shm");
	else
		snprintf(tmp_base, sizeof(tmp_base), "/tmp");
	return tmp_base;
}

int cli_tmpdir(char *dir, size_t n, const char *prefix)
{
	sigset_t old;
	int e;

	if ((size_t)snprintf(dir, n, "%s/%s-XXXXXX", cli_tmp_base(), prefix) >=
	    n) {
		dir[0] = '\0';
		errno = ENAMETOOLONG;
		return -1;
	}
	cli_signals_hold(&old);
	if (!mkdtemp(dir)) {
		e = errno;
		cli_signals_release(&old);
		dir[0] = '\0';
		errno = e;
		return -1;
	}
	cli_scratch(dir, true);
	cli_signals_release(&old);
	return 0;
}
