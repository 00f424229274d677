/* SPDX-License-Identifier: MIT */
/*
 * General helpers of the pmguard CLI (tools/util.c): messages, time,
 * progress, temporary directories.  Numbers on the command line and in
 * the environment are parsed by cli_number() (tools/args.h).
 */
#ifndef PMG_UTIL_H
#define PMG_UTIL_H

#include <stdbool.h>
#include <stddef.h>

/* Print "pmguard: " + message to stderr; returns 2 (usage/input error). */
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Monotonic seconds. */
double cli_now(void);

/* The directory temporary files go under: $TMPDIR, /dev/shm or /tmp. */
const char *cli_tmp_base(void);

/*
 * Make a fresh directory "BASE/PREFIX-XXXXXX" (BASE from cli_tmp_base())
 * in @dir (@n bytes) and register it with cli_scratch() in one step, no
 * signal between.  0, or -1 with errno set (@dir then holds "").
 */
int cli_tmpdir(char *dir, size_t n, const char *prefix);

/* Seconds between progress lines when stderr is not a terminal. */
#define CLI_PROGRESS_S	5

/*
 * Progress on stderr: a bar redrawn in place on a terminal; otherwise a
 * line "pmguard VERB: LABEL: N% after S s" every CLI_PROGRESS_S seconds
 * (PMGUARD_PROGRESS=S: every S seconds, 0: at every new percentage, off:
 * none), and a last one at 100% if any was printed.
 */
struct cli_bar {
	const char *verb, *label;
	int shown;		/* last percentage drawn, -1 none */
	bool tty;
	int every;		/* lines: seconds apart, 0 each %, -1 none */
	double t0, last;	/* start, last line printed (0: none) */
};

void cli_bar_init(struct cli_bar *b, const char *verb, const char *label);
/* Draw @done (0..1); a progress hook's shape: @arg is the struct cli_bar. */
void cli_bar_draw(double done, void *arg);
/* Erase the bar (before printing anything else). */
void cli_bar_clear(struct cli_bar *b);

#endif /* PMG_UTIL_H */
