// SPDX-License-Identifier: MIT
/*
 * dax-msync - msync(2) of a dirty MAP_SHARED mapping of a DAX file, in the
 * Linux test guest (linux/tests/exc.sh).  Static; TAP on stdout.
 *
 * Usage: dax-msync DIR      DIR on ext4 mounted -o dax on /dev/pmem0
 *
 * msync() writes back every dirty DAX entry of the range:
 * dax_writeback_one() -> dax_flush(), a cache line write back (CLWB) of
 * each page through the direct map, which the series guards with a
 * window (dax_mk_readwrite()).  CLWB is checked like a load on real
 * hardware but is a no-op in QEMU TCG, so a missing window cannot fault
 * here: the guard is seen by the windows it opens instead, counted by
 * the test kernel in /sys/module/memremap/parameters/pks_windows (every
 * __pgmap_mk_readwrite(), PKS_TEST).  NPAGES pages, each its own 4 KiB
 * DAX entry, dirtied through the mapping, must raise the count by at least
 * NPAGES.  The data is verified with pread(2).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tap.h"

#define NPAGES	64
#define PGSZ	4096
#define WINDOWS	"/sys/module/memremap/parameters/pks_windows"

static long windows(void)
{
	FILE *f = fopen(WINDOWS, "r");
	long n = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%ld", &n) != 1)
		n = -1;
	fclose(f);
	return n;
}

int main(int argc, char **argv)
{
	char path[4096], buf[PGSZ];
	long w0, w1, w2, w3;
	int fd, i, bad = 0;
	unsigned char *m;

	if (argc != 2) {
		fprintf(stderr, "usage: dax-msync DIR\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/msync", argv[1]);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0) {
		perror(path);
		return 1;
	}
	/* blocks allocated and written first: the faults below zero nothing */
	memset(buf, 0x11, sizeof(buf));
	for (i = 0; i < NPAGES; i++)
		if (pwrite(fd, buf, PGSZ, (off_t)i * PGSZ) != PGSZ) {
			perror("pwrite");
			return 1;
		}
	if (fsync(fd)) {
		perror("fsync");
		return 1;
	}
	m = mmap(NULL, NPAGES * PGSZ, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	for (i = 0; i < NPAGES; i++)
		memset(m + (size_t)i * PGSZ, 0xa0 + (i & 0xf), PGSZ);

	w0 = windows();
	if (!result(w0 >= 0, "%s is readable (%ld)", WINDOWS, w0))
		return tap_done("dax-msync");
	w1 = windows();
	result(msync(m, NPAGES * PGSZ, MS_SYNC) == 0,
	       "msync(MS_SYNC) of %d dirty pages", NPAGES);
	w2 = windows();
	/* w1 - w0: the windows opened meanwhile by anything else */
	result(w2 - w1 >= NPAGES,
	       "msync opened a window per dirty page for dax_flush() (pks_windows %ld -> %ld: %ld, want >= %d; %ld between two reads before)",
	       w1, w2, w2 - w1, NPAGES, w1 - w0);
	/* nothing dirty any more: no write back, no window for it */
	msync(m, NPAGES * PGSZ, MS_SYNC);
	w3 = windows();
	result(w3 - w2 < NPAGES,
	       "a second msync() with nothing dirty opens fewer (pks_windows %ld -> %ld)",
	       w2, w3);
	for (i = 0; i < NPAGES; i++) {
		if (pread(fd, buf, PGSZ, (off_t)i * PGSZ) != PGSZ ||
		    buf[0] != (char)(0xa0 + (i & 0xf)) ||
		    buf[PGSZ - 1] != (char)(0xa0 + (i & 0xf)))
			bad++;
	}
	result(bad == 0, "pread() reads what the mapping wrote (%d bad pages)",
	       bad);
	munmap(m, NPAGES * PGSZ);
	close(fd);
	unlink(path);
	return tap_done("dax-msync");
}
