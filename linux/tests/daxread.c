// SPDX-License-Identifier: MIT
/*
 * daxread - read(2) from a DAX file into a mapping of another DAX file, in
 * the Linux test guest (linux/tests/exc.sh).  Static; TAP on stdout.
 *
 * Usage: daxread DIR      DIR on ext4 mounted -o dax on /dev/pmem0
 *
 * The kernel copies a DAX read to the user buffer with the pmem window
 * open (dax_iomap_rw()).  When the buffer is a fresh mapping of another DAX
 * file, the copy takes a page fault, and the fault itself goes to the pmem:
 *   1. MAP_SHARED of a sparse file: the fault allocates blocks and zeroes
 *      them through the pmem driver;
 *   2. MAP_PRIVATE of a written file: the write fault copies the pmem page
 *      to a private page (the CoW copy of fs/dax.c).
 * Both are legitimate accesses made in a #PF that interrupted a thread
 * already inside a window: they must enable access themselves (relaxed
 * mode: no counted fault; strict mode: no oops).  The data is verified.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef STATX_ATTR_DAX
#define STATX_ATTR_DAX 0x00200000
#endif

#define SIZE (1u << 20)	/* 1 MiB: 256 pages */

static int ntest, nfail;

static void result(int ok, const char *what, const char *detail)
{
	ntest++;
	if (!ok)
		nfail++;
	printf("%sok %d - %s%s%s\n", ok ? "" : "not ", ntest, what,
	       detail[0] ? ": " : "", detail);
	fflush(stdout);
}

static uint8_t pat(unsigned int seed, size_t i)
{
	return (uint8_t)(i * 131 + seed * 7 + (i >> 12));
}

static int is_dax(int fd)
{
	struct statx st;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &st))
		return 0;
	return !!(st.stx_attributes & STATX_ATTR_DAX);
}

/* Write SIZE bytes of pattern seed to path; return an O_RDONLY fd */
static int make_src(const char *path, unsigned int seed)
{
	static uint8_t buf[SIZE];
	size_t i;
	int fd;

	for (i = 0; i < SIZE; i++)
		buf[i] = pat(seed, i);
	fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
	if (fd < 0)
		return -1;
	if (write(fd, buf, SIZE) != SIZE || fsync(fd)) {
		close(fd);
		return -1;
	}
	close(fd);
	return open(path, O_RDONLY);
}

/* read() all of src into dst; bytes read or -1 */
static ssize_t read_all(int fd, uint8_t *dst)
{
	size_t done = 0;
	ssize_t n;

	if (lseek(fd, 0, SEEK_SET) < 0)
		return -1;
	while (done < SIZE) {
		n = read(fd, dst + done, SIZE - done);
		if (n <= 0)
			return n < 0 ? -1 : (ssize_t)done;
		done += n;
	}
	return done;
}

static size_t first_bad(const uint8_t *p, unsigned int seed)
{
	size_t i;

	for (i = 0; i < SIZE; i++)
		if (p[i] != pat(seed, i))
			return i;
	return SIZE;
}

/* One case: read src into a mapping of dst (MAP_SHARED or MAP_PRIVATE) */
static void one(const char *dir, int src, int shared)
{
	char path[512], detail[600];
	static uint8_t back[SIZE];
	uint8_t *map;
	ssize_t n;
	size_t bad;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir,
		 shared ? "dst-sparse.dat" : "dst-private.dat");
	if (shared) {
		fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
		if (fd >= 0 && ftruncate(fd, SIZE)) {
			close(fd);
			fd = -1;
		}
	} else {
		fd = make_src(path, 9);
		if (fd >= 0) {
			close(fd);
			fd = open(path, O_RDWR);
		}
	}
	if (fd < 0) {
		snprintf(detail, sizeof(detail), "%s: %s", path, strerror(errno));
		result(0, "the destination file is made", detail);
		return;
	}
	snprintf(detail, sizeof(detail), "%s", path);
	result(is_dax(fd), "the destination file is DAX (statx)", detail);

	map = mmap(NULL, SIZE, PROT_READ | PROT_WRITE,
		   shared ? MAP_SHARED : MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED) {
		snprintf(detail, sizeof(detail), "%s", strerror(errno));
		result(0, "mmap of the destination", detail);
		close(fd);
		return;
	}
	/* The read: each destination page faults inside the copy */
	n = read_all(src, map);
	snprintf(detail, sizeof(detail), "%zd of %u bytes%s%s", n, SIZE,
		 n < 0 ? ", " : "", n < 0 ? strerror(errno) : "");
	result(n == SIZE, shared ?
	       "read(2) of a DAX file into a MAP_SHARED mapping of a sparse DAX file" :
	       "read(2) of a DAX file into a MAP_PRIVATE mapping of a DAX file",
	       detail);
	bad = first_bad(map, 1);
	snprintf(detail, sizeof(detail), "first bad byte %zu of %u", bad, SIZE);
	result(bad == SIZE, "the mapping holds the data read", detail);
	if (shared) {
		if (msync(map, SIZE, MS_SYNC))
			perror("msync");
		n = pread(fd, back, SIZE, 0);
		bad = n == SIZE ? first_bad(back, 1) : 0;
		snprintf(detail, sizeof(detail), "pread %zd, first bad byte %zu",
			 n, bad);
		result(bad == SIZE, "the sparse file holds the data (pread)",
		       detail);
	}
	munmap(map, SIZE);
	close(fd);
	unlink(path);
}

int main(int argc, char **argv)
{
	char path[512], detail[600];
	int src;

	if (argc != 2) {
		fprintf(stderr, "usage: daxread DIR\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("TAP version 13\n");
	snprintf(path, sizeof(path), "%s/src.dat", argv[1]);
	src = make_src(path, 1);
	snprintf(detail, sizeof(detail), "%s", path);
	result(src >= 0 && is_dax(src), "the source file is written and DAX",
	       detail);
	if (src < 0)
		goto out;
	one(argv[1], src, 1);
	one(argv[1], src, 0);
	close(src);
	unlink(path);
out:
	printf("1..%d\n%d passed, %d failed\n", ntest, ntest - nfail, nfail);
	return nfail ? 1 : 0;
}
