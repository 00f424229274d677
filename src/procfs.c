// SPDX-License-Identifier: MIT
/*
 * The kernel's text files the library reads, each parsed in one place:
 * sysfs attributes (device dax geometry in poolfile.c, the persistence
 * domain of nd regions in persist_cfg.c) and /proc/self/maps
 * (pmg_protect()'s read-write check, madvise()'s report, the pool
 * quarantine, and the LMDB map of `pmguard run`); and the directory of a
 * path (poolfile.c's files, the CLI's scratch files and learn's -o).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "procfs.h"

void _pmg_dir_of(char *d, size_t size, const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(d, size, ".");
	else if (slash == path)
		snprintf(d, size, "/");
	else
		snprintf(d, size, "%.*s", (int)(slash - path), path);
}

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

FILE *_pmg_maps_open(void)
{
	return fopen("/proc/self/maps", "re");
}

bool _pmg_maps_next(FILE *f, struct _pmg_map *m)
{
	/* the fields before the path fit: 2 x 16 + 4 + 16 + 8 + 20 digits */
	char line[256];

	while (fgets(line, sizeof(line), f)) {
		size_t n = strlen(line);
		int c;

		/* a long path: the rest of its line is not a mapping */
		if (n && line[n - 1] != '\n')
			while ((c = getc(f)) != EOF && c != '\n')
				;
		if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu", &m->lo, &m->hi,
			   m->perms, &m->off, &m->ma, &m->mi, &m->ino) == 7)
			return true;
	}
	return false;
}
