/* SPDX-License-Identifier: MIT */
/*
 * capture.h - capture what a test's child process or the library writes
 * to a file descriptor, and count what it said (cli-run.h, test-modes,
 * test-endwin, test-errmsg).  Header-only, like tap.h.
 */
#ifndef PMG_TESTS_CAPTURE_H
#define PMG_TESTS_CAPTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* An anonymous temporary file ($TMPDIR or /tmp), already unlinked; -1. */
static inline int tmpfd(void)
{
	const char *d = getenv("TMPDIR");
	char p[4200];
	int fd;

	snprintf(p, sizeof(p), "%s/pmg-test-run-XXXXXX",
		 d && *d ? d : "/tmp");
	fd = mkstemp(p);
	if (fd >= 0)
		unlink(p);
	return fd;
}

/* Read a whole fd (from its start) into @buf, NUL-terminated. */
static inline size_t slurp(int fd, char *buf, size_t size)
{
	size_t got = 0;
	ssize_t n;

	lseek(fd, 0, SEEK_SET);
	while (got < size - 1 && (n = read(fd, buf + got, size - 1 - got)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	return got;
}

/* How many times @needle occurs in @hay (overlapping ones too). */
static inline int count_matches(const char *hay, const char *needle)
{
	int n = 0;

	while ((hay = strstr(hay, needle))) {
		n++;
		hay++;
	}
	return n;
}

#endif
