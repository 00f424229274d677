/* SPDX-License-Identifier: MIT */
/*
 * Test directories on two kinds of filesystem: a disk filesystem (ext4,
 * xfs: no DAX, so pools map without MAP_SYNC and flush with msync, and a
 * refused MAP_SYNC mmap happens after the kernel placed it) and tmpfs.
 * PMG_DISK_DIR and PMG_SHM_DIR override the places looked at.
 */
#ifndef PMG_TEST_DIRS_H
#define PMG_TEST_DIRS_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>

#define PMG_TMPFS_MAGIC 0x01021994
#define PMG_RAMFS_MAGIC 0x858458f6

/* mkdtemp a "pmg-test-XXXXXX" in the first candidate whose filesystem is
 * (@want_tmpfs) or is not tmpfs/ramfs; "" if none. */
static inline void dirs_pick(char *out, size_t n, const char *const *cand,
			     unsigned nc, int want_tmpfs)
{
	unsigned i;

	out[0] = '\0';
	for (i = 0; i < nc; i++) {
		struct statfs sf;
		int tmpfs;

		if (!cand[i] || statfs(cand[i], &sf))
			continue;
		tmpfs = sf.f_type == PMG_TMPFS_MAGIC ||
			sf.f_type == PMG_RAMFS_MAGIC;
		if (tmpfs != want_tmpfs)
			continue;
		snprintf(out, n, "%s/pmg-test-XXXXXX", cand[i]);
		if (mkdtemp(out)) {
			printf("# %s directory: %s\n",
			       want_tmpfs ? "tmpfs" : "disk", out);
			return;
		}
		out[0] = '\0';
	}
}

/* @disk and @shm (size @m each); @dir (size @n) the first of them.
 * 0, or -1 if there is neither. */
static inline int probe_dirs(char *dir, size_t n, char *disk, char *shm,
			     size_t m)
{
	const char *dc[] = { getenv("PMG_DISK_DIR"), getenv("TMPDIR"),
			     "/tmp", "/var/tmp", "." };
	const char *sc[] = { getenv("PMG_SHM_DIR"), getenv("TMPDIR"),
			     "/dev/shm", "/tmp" };

	dirs_pick(disk, m, dc, sizeof(dc) / sizeof(dc[0]), 0);
	dirs_pick(shm, m, sc, sizeof(sc) / sizeof(sc[0]), 1);
	snprintf(dir, n, "%s", *disk ? disk : shm);
	return *dir ? 0 : -1;
}

static inline void probe_dirs_remove(const char *disk, const char *shm)
{
	const char *d[2] = { disk, shm };
	char cmd[600];
	int i;

	if (getenv("PMG_KEEP"))
		return;
	for (i = 0; i < 2; i++) {
		if (!*d[i])
			continue;
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d[i]);
		if (system(cmd))
			printf("# could not remove %s\n", d[i]);
	}
}

/*
 * Entries of directory @dir (not . and ..) whose name contains @match
 * (NULL: every one); the first one's name into @first (@size bytes) when
 * @first is not NULL.  -1 if @dir cannot be read.
 */
static inline int dir_entries(const char *dir, const char *match,
			      char *first, size_t size)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    (match && !strstr(e->d_name, match)))
			continue;
		if (!n && first)
			snprintf(first, size, "%s", e->d_name);
		n++;
	}
	closedir(d);
	return n;
}

#endif /* PMG_TEST_DIRS_H */
