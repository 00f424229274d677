// SPDX-License-Identifier: MIT
/*
 * dax-reflink - the copy-on-write paths of fs/dax.c on a DAX file system
 * with reflink (XFS -o dax=always, reflink=1), in the Linux test guest
 * (linux/tests/workloads.sh).  Static; TAP on stdout.
 *
 * Usage: dax-reflink DIR    DIR on XFS -o dax=always with reflink
 *
 * Exit 0 all passed, 1 a failure, 4 (kselftest SKIP) when the file
 * system cannot share extents (FICLONE fails with EOPNOTSUPP or EINVAL:
 * Linux 6.1's DAX file systems have no reflink).
 *
 * Each step shares the blocks of a file with a clone (FICLONE) and then
 * makes the kernel copy, zero or compare shared pmem blocks through
 * dax_direct_access() addresses, which patch "dax: Stray access
 * protection for dax_direct_access()" must guard:
 *   1. an unaligned pwrite() into a clone: the CoW copies the head and
 *      tail of the block around the write from the shared source
 *      (dax_iomap_iter(), dax_iomap_copy_around() in 6.12);
 *   2. a store through a MAP_SHARED mapping of a clone: the write fault
 *      copies the shared block (dax_fault_iter());
 *   3. ftruncate() of a clone to an unaligned size: the tail of the last
 *      block is zeroed on a shared extent (dax_memzero() with the copy
 *      around);
 *   4. fallocate(FALLOC_FL_UNSHARE_RANGE): dax_unshare_iter();
 *   5. FIDEDUPERANGE of equal and of different files:
 *      dax_range_compare_iter().
 * The data of the clone and of the source are verified after each step.
 * The caller checks the kernel log and pks_relaxed_faults (relaxed mode:
 * an unguarded access is counted; strict mode: it oopses).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h"

#ifndef STATX_ATTR_DAX
#define STATX_ATTR_DAX 0x00200000
#endif

#define PG 4096u
#define NPG 64u
#define SIZE (NPG * PG)

static const char *dir;

static uint8_t pat(size_t i)
{
	return (uint8_t)(i * 131 + 7 + (i >> 12));
}

static int is_dax(int fd)
{
	struct statx st;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &st))
		return 0;
	return !!(st.stx_attributes & STATX_ATTR_DAX);
}

static int openf(const char *name, int flags)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return open(path, flags, 0644);
}

/* read the whole of fd (len bytes) into buf */
static int readall(int fd, uint8_t *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, buf + done, len - done, done);

		if (n <= 0)
			return -1;
		done += n;
	}
	return 0;
}

/* the first offset where buf differs from want, or -1 */
static long differs(const uint8_t *buf, const uint8_t *want, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != want[i])
			return (long)i;
	return -1;
}

/* clone the source into NAME; -1 with errno on failure */
static int clone_of(int src, const char *name)
{
	int fd = openf(name, O_RDWR | O_CREAT | O_TRUNC);

	if (fd < 0)
		return -1;
	if (ioctl(fd, FICLONE, src)) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int main(int argc, char **argv)
{
	static uint8_t want[SIZE], got[SIZE];
	uint8_t *m;
	long at;
	int src, fd;

	if (argc != 2) {
		fprintf(stderr, "usage: dax-reflink DIR\n");
		return 2;
	}
	dir = argv[1];
	for (size_t i = 0; i < SIZE; i++)
		want[i] = pat(i);

	src = openf("reflink.src", O_RDWR | O_CREAT | O_TRUNC);
	if (src < 0 || pwrite(src, want, SIZE, 0) != SIZE || fsync(src)) {
		perror("reflink.src");
		return 1;
	}
	fd = clone_of(src, "reflink.a");
	if (fd < 0 && (errno == EOPNOTSUPP || errno == EINVAL || errno == EXDEV)) {
		printf("# SKIP: FICLONE on %s: %s (no reflink on this DAX file system)\n",
		       dir, strerror(errno));
		return 4;
	}
	if (!result(fd >= 0, "FICLONE of a %u KiB DAX file%s%s", SIZE / 1024,
		    fd < 0 ? ": " : "", fd < 0 ? strerror(errno) : ""))
		return tap_done("dax-reflink");
	result(is_dax(src) && is_dax(fd), "the source and the clone are DAX files (STATX_ATTR_DAX)");

	/* 1. unaligned write into the clone: CoW with the head and tail copied */
	{
		size_t off = 3 * PG + 100, len = 200;
		uint8_t w[200];

		memset(w, 0xab, sizeof(w));
		result(pwrite(fd, w, len, off) == (ssize_t)len,
		       "unaligned pwrite() of %zu bytes at %zu into the clone", len, off);
		memset(want + off, 0xab, len);
		at = readall(fd, got, SIZE) ? 0 : differs(got, want, SIZE);
		result(at < 0, "clone after the CoW write: head and tail copied, the write in place (first difference at %ld)", at);
		for (size_t i = off; i < off + len; i++)
			want[i] = pat(i);
		at = readall(src, got, SIZE) ? 0 : differs(got, want, SIZE);
		result(at < 0, "source unchanged by the CoW write (first difference at %ld)", at);
		close(fd);
	}

	/* 2. a store through a MAP_SHARED mapping of a clone: CoW write fault */
	fd = clone_of(src, "reflink.b");
	m = fd < 0 ? MAP_FAILED : mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (result(m != MAP_FAILED, "MAP_SHARED mapping of a second clone")) {
		at = differs(m, want, SIZE);
		result(at < 0, "the mapping reads the shared data (first difference at %ld)", at);
		m[10 * PG + 5] = 0x5a;
		result(msync(m, SIZE, MS_SYNC) == 0, "store into page 10 of the mapping and msync()");
		want[10 * PG + 5] = 0x5a;
		at = readall(fd, got, SIZE) ? 0 : differs(got, want, SIZE);
		result(at < 0, "clone after the CoW fault: the page copied, the store in place (first difference at %ld)", at);
		want[10 * PG + 5] = pat(10 * PG + 5);
		at = readall(src, got, SIZE) ? 0 : differs(got, want, SIZE);
		result(at < 0, "source unchanged by the CoW fault (first difference at %ld)", at);
		munmap(m, SIZE);
	}
	if (fd >= 0)
		close(fd);

	/* 3. truncate a clone to an unaligned size: zero the tail on a shared extent */
	fd = clone_of(src, "reflink.c");
	if (result(fd >= 0 && ftruncate(fd, SIZE - 100) == 0 && ftruncate(fd, SIZE) == 0,
		   "ftruncate() of a third clone to %u bytes and back", SIZE - 100)) {
		memset(want + SIZE - 100, 0, 100);
		at = readall(fd, got, SIZE) ? 0 : differs(got, want, SIZE);
		result(at < 0, "clone after the truncation: the tail zeroed, the rest shared data (first difference at %ld)", at);
		for (size_t i = SIZE - 100; i < SIZE; i++)
			want[i] = pat(i);
		at = readall(src, got, SIZE) ? 0 : differs(got, want, SIZE);
		result(at < 0, "source unchanged by the truncation (first difference at %ld)", at);
	}
	if (fd >= 0)
		close(fd);

	/* 4. unshare a clone */
	fd = clone_of(src, "reflink.d");
	if (result(fd >= 0 && fallocate(fd, FALLOC_FL_UNSHARE_RANGE, 0, SIZE) == 0,
		   "fallocate(FALLOC_FL_UNSHARE_RANGE) of a fourth clone")) {
		at = readall(fd, got, SIZE) ? 0 : differs(got, want, SIZE);
		result(at < 0, "clone after unsharing: the data copied (first difference at %ld)", at);
	}

	/* 5. dedupe: equal files compare same, different ones differ */
	if (fd >= 0) {
		struct {
			struct file_dedupe_range r;
			struct file_dedupe_range_info i;
		} d;
		int other = openf("reflink.a", O_RDWR);

		memset(&d, 0, sizeof(d));
		d.r.src_offset = 0;
		d.r.src_length = SIZE;
		d.r.dest_count = 1;
		d.i.dest_fd = fd;
		result(ioctl(src, FIDEDUPERANGE, &d) == 0 && d.i.status == FILE_DEDUPE_RANGE_SAME &&
		       d.i.bytes_deduped == SIZE,
		       "FIDEDUPERANGE of the source and the unshared equal clone: same, %llu bytes deduplicated (status %d)",
		       (unsigned long long)d.i.bytes_deduped, d.i.status);
		memset(&d, 0, sizeof(d));
		d.r.src_length = SIZE;
		d.r.dest_count = 1;
		d.i.dest_fd = other;
		result(other >= 0 && ioctl(src, FIDEDUPERANGE, &d) == 0 &&
		       d.i.status == FILE_DEDUPE_RANGE_DIFFERS,
		       "FIDEDUPERANGE of the source and the written clone: differs (status %d)",
		       d.i.status);
		if (other >= 0)
			close(other);
		close(fd);
	}
	close(src);
	for (const char *n = "src\0a\0b\0c\0d\0"; *n; n += strlen(n) + 1) {
		char path[4096];

		snprintf(path, sizeof(path), "%s/reflink.%s", dir, n);
		unlink(path);
	}
	return tap_done("dax-reflink");
}
