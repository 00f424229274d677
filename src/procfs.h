/* SPDX-License-Identifier: MIT */
/*
 * procfs.c: the kernel's text files the library reads (a sysfs
 * attribute's line).  A leaf: libc only.  Not AS-safe (stdio): never
 * called from a signal handler.
 */
#ifndef PMG_PROCFS_H
#define PMG_PROCFS_H

#include <stddef.h>

/* The first line of the file @path (a sysfs attribute), without its
 * newline, cut to @size - 1 bytes.  0, or -errno of the open. */
int _pmg_read_line(const char *path, char *buf, size_t size);

#endif /* PMG_PROCFS_H */
