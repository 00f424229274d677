// SPDX-License-Identifier: MIT
/*
 * The kernel's text files the library reads, each parsed in one place:
 * sysfs attributes (device dax geometry in pool.c, the persistence domain
 * of nd regions in persist.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "procfs.h"

int _pmg_read_line(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return -errno;
	n = fread(buf, 1, size - 1, f);
	fclose(f);
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}
