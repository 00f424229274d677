/* SPDX-License-Identifier: MIT */
/*
 * procfs.c: the kernel's text files the library reads (a sysfs
 * attribute's line, /proc/self/maps), and the directory of a path.  A
 * leaf: libc only.  Not AS-safe (stdio): never
 * called from a signal handler.
 */
#ifndef PMG_PROCFS_H
#define PMG_PROCFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The directory of @path into @d (@size bytes): "." for a bare name, "/"
 * for a name in the root.  poolfile.c's and the CLI's (tools/). */
void _pmg_dir_of(char *d, size_t size, const char *path);

/* The first line of the file @path (a sysfs attribute), without its
 * newline, cut to @size - 1 bytes.  0, or -errno of the open. */
int _pmg_read_line(const char *path, char *buf, size_t size);

/* One line of /proc/self/maps, the path left out. */
struct _pmg_map {
	unsigned long lo, hi;	/* [lo, hi) */
	char perms[8];		/* "rw-s": r, w, x, then p(rivate) or s */
	unsigned long off;	/* file offset */
	unsigned ma, mi;	/* device */
	unsigned long ino;	/* inode, 0: anonymous */
};

/* /proc/self/maps opened for _pmg_maps_next() (fclose() it); NULL with
 * errno set where /proc is missing. */
FILE *_pmg_maps_open(void);
/* The next mapping of @f into *@m: true, or false at the end.  A line
 * longer than the buffer (a long path) is read to its end: its rest is
 * never taken for a line of its own. */
bool _pmg_maps_next(FILE *f, struct _pmg_map *m);

#endif /* PMG_PROCFS_H */
