/* SPDX-License-Identifier: MIT */
/*
 * capture.h - capture what a test's child process or the library writes
 * to a file descriptor (cli-run.h, test-modes).  Header-only, like tap.h.
 */
#ifndef PMG_TESTS_CAPTURE_H
#define PMG_TESTS_CAPTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* An anonymous temporary file ($TMPDIR or /tmp), already unlinked; -1. */
static int tmpfd(void)
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
static size_t slurp(int fd, char *buf, size_t size)
{
	size_t got = 0;
	ssize_t n;

	lseek(fd, 0, SEEK_SET);
	while (got < size - 1 && (n = read(fd, buf + got, size - 1 - got)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	return got;
}

#endif
