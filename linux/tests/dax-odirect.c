// SPDX-License-Identifier: MIT
/*
 * dax-odirect - O_DIRECT I/O between a block device that bounces its DMA
 * and a device-dax mapping, in the Linux test guest (linux/tests/dax.sh,
 * debug boot).  Static; TAP on stdout.
 *
 * Usage: dax-odirect DAXDEV BLKDEV
 *   DAXDEV  a device-dax device with 4 KiB alignment (/dev/daxX.Y)
 *   BLKDEV  a scratch block device whose driver maps its requests with
 *           the DMA API (the debug boot's virtio-blk disk, which QEMU
 *           offers with ACCESS_PLATFORM: guest/vmrun --disk), in a kernel
 *           booted with swiotlb=force; its first 192 KiB are overwritten
 *
 * O_DIRECT pins the user buffer's pages and hands them to the driver;
 * with swiotlb=force dma_map_sg() copies a write's pages into the bounce
 * buffer in the caller's context, and the unmap of a read copies the
 * bounce buffer into the pages in the completion, an interrupt.  When the
 * buffer is a DAX mapping, those pages are persistent memory mapped with
 * the PMEM key, which is access-disabled outside a window: the patch
 * "swiotlb: Bounce protected device pages through kmap_local_page()"
 * copies them page by page through kmap_local_page().  Without it both
 * copies fault (relaxed mode: counted in pks_relaxed_faults, which the
 * caller checks; strict: an oops).  Here the bytes are checked end to
 * end: pmem -> disk (read back into ordinary memory) and disk -> pmem
 * (read back through the mapping), for a buffer that starts and ends
 * inside a page and for whole pages.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tap.h"

#define PGSZ	4096
#define NPAGES	32		/* of the device-dax device, from offset 0 */

static unsigned char pat(size_t i, unsigned int seed)
{
	return (unsigned char)((i * 131 + (i >> 9) * 7 + seed) & 0xff);
}

static void fill(unsigned char *p, size_t n, unsigned int seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = pat(i, seed);
}

/* index of the first byte that differs from the pattern, or -1 */
static long mismatch(const unsigned char *p, size_t n, unsigned int seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != pat(i, seed))
			return (long)i;
	return -1;
}

static ssize_t xfer(int write, int fd, void *buf, size_t len, off_t off)
{
	ssize_t n = write ? pwrite(fd, buf, len, off) : pread(fd, buf, len, off);

	if (n < 0)
		return -errno;
	return n;
}

/*
 * One round: LEN bytes of the pattern SEED at pmem offset SRC are written
 * to the disk at DOFF with O_DIRECT, read back into ordinary memory and
 * compared, then read with O_DIRECT into pmem at offset DST and compared
 * through the mapping.
 */
static void round_trip(const char *what, unsigned char *map, int bfd,
		       size_t src, size_t dst, size_t len, off_t doff,
		       unsigned int seed)
{
	unsigned char *ram;
	ssize_t n;
	long bad;

	if (posix_memalign((void **)&ram, PGSZ, len)) {
		result(0, "%s: posix_memalign(%zu)", what, len);
		return;
	}
	fill(map + src, len, seed);
	memset(map + dst, 0, len);

	n = xfer(1, bfd, map + src, len, doff);
	result(n == (ssize_t)len,
	       "%s: pwrite(O_DIRECT) of %zu bytes from pmem offset %zu to the disk at %lld: %zd",
	       what, len, src, (long long)doff, n);

	memset(ram, 0, len);
	n = xfer(0, bfd, ram, len, doff);
	bad = n == (ssize_t)len ? mismatch(ram, len, seed) : -2;
	result(bad == -1,
	       "%s: the disk holds the pmem bytes (O_DIRECT read into RAM: %zd, first difference at %ld)",
	       what, n, bad);

	n = xfer(0, bfd, map + dst, len, doff);
	bad = n == (ssize_t)len ? mismatch(map + dst, len, seed) : -2;
	result(bad == -1,
	       "%s: pread(O_DIRECT) of %zu bytes into pmem offset %zu: %zd, the mapping reads them back (first difference at %ld)",
	       what, len, dst, n, bad);
	free(ram);
}

int main(int argc, char **argv)
{
	unsigned char *map;
	int dfd, bfd;

	if (argc != 3) {
		fprintf(stderr, "usage: dax-odirect DAXDEV BLKDEV\n");
		return 2;
	}
	dfd = open(argv[1], O_RDWR);
	if (dfd < 0) {
		perror(argv[1]);
		return 1;
	}
	map = mmap(NULL, NPAGES * PGSZ, PROT_READ | PROT_WRITE, MAP_SHARED, dfd, 0);
	if (map == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	bfd = open(argv[2], O_RDWR | O_DIRECT);
	if (bfd < 0) {
		perror(argv[2]);
		return 1;
	}

	/* 12 KiB from 512 bytes into page 0: four pages, the first and
	 * the last in part */
	round_trip("pages in part", map, bfd, 512, 16 * PGSZ + 512, 3 * PGSZ,
		   0, 1);
	/* 64 KiB of whole pages: one request of 16 segments */
	round_trip("whole pages", map, bfd, 0, 16 * PGSZ, 16 * PGSZ,
		   64 * 1024, 2);

	munmap(map, NPAGES * PGSZ);
	close(bfd);
	close(dfd);
	return tap_done("dax-odirect");
}
