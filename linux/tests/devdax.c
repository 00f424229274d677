// SPDX-License-Identifier: MIT
/*
 * devdax - map a device-DAX character device from user space, write it
 * and read it back, in the Linux test guest (linux/scripts/linux-check).
 * Static; TAP on stdout.
 *
 * Usage: devdax DEV SIZE ALIGN
 *   DEV    e.g. /dev/dax1.0
 *   SIZE   bytes to map (the device's size from sysfs; rounded down to
 *          ALIGN, at most 32 MiB are used)
 *   ALIGN  the device's mapping alignment from sysfs
 *
 * Writes a pattern through one MAP_SHARED mapping, unmaps, maps the
 * device again and checks every byte; then rewrites a page in the middle
 * and checks that its neighbours kept their contents.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int ntest, nfail;

static void result(int ok, const char *what)
{
	ntest++;
	if (!ok)
		nfail++;
	printf("%sok %d - %s\n", ok ? "" : "not ", ntest, what);
}

static uint64_t pat(uint64_t i, uint64_t seed)
{
	return i * 0x9e3779b97f4a7c15ull ^ seed;
}

/*
 * Map len bytes of the device at an address aligned to align (devdax
 * refuses mappings that are not aligned to its alignment).
 */
static uint64_t *map_dev(int fd, size_t len, size_t align)
{
	size_t over = len + align;
	uint8_t *p = mmap(NULL, over, PROT_NONE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	uint8_t *a, *m;

	if (p == MAP_FAILED)
		return NULL;
	a = (uint8_t *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
	m = mmap(a, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
	if (a > p)
		munmap(p, (size_t)(a - p));
	if (p + over > a + len)
		munmap(a + len, (size_t)(p + over - (a + len)));
	if (m == MAP_FAILED) {
		printf("# mmap %zu bytes at alignment %zu: %s\n", len, align,
		       strerror(errno));
		munmap(a, len);
		return NULL;
	}
	return (uint64_t *)m;
}

int main(int argc, char **argv)
{
	size_t size, align, len, n, bad = 0, page = 4096;
	uint64_t *m;
	int fd;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 4) {
		fprintf(stderr, "usage: devdax DEV SIZE ALIGN\n");
		return 2;
	}
	size = strtoull(argv[2], NULL, 0);
	align = strtoull(argv[3], NULL, 0);
	if (!align || (align & (align - 1)) || size < align) {
		printf("1..1\nnot ok 1 - sane size %zu and align %zu from sysfs\n",
		       size, align);
		printf("0 passed, 1 failed\n");
		return 1;
	}
	len = size > (32u << 20) ? (32u << 20) : size;
	len &= ~(align - 1);
	n = len / sizeof(uint64_t);
	printf("# %s: size %zu, align %zu, using %zu bytes\n", argv[1], size,
	       align, len);

	fd = open(argv[1], O_RDWR);
	result(fd >= 0, "open the devdax device read-write");
	if (fd < 0) {
		printf("# open %s: %s\n", argv[1], strerror(errno));
		goto out;
	}
	m = map_dev(fd, len, align);
	result(m != NULL, "mmap it MAP_SHARED from user space");
	if (!m)
		goto out;
	for (size_t i = 0; i < n; i++)
		m[i] = pat(i, 1);
	for (size_t i = 0; i < n; i++)
		bad += m[i] != pat(i, 1);
	result(bad == 0, "write every byte, read back through the same mapping");
	munmap(m, len);

	m = map_dev(fd, len, align);
	bad = !m;
	for (size_t i = 0; m && i < n; i++)
		bad += m[i] != pat(i, 1);
	result(bad == 0, "unmap, map again: every byte intact");

	if (m) {
		size_t mid = n / 2 / (page / 8) * (page / 8);

		for (size_t i = mid; i < mid + page / 8; i++)
			m[i] = pat(i, 2);
		bad = 0;
		for (size_t i = 0; i < n; i++)
			bad += m[i] != pat(i, i >= mid && i < mid + page / 8 ? 2 : 1);
		munmap(m, len);
	}
	result(m && bad == 0, "rewrite one page: it changed, its neighbours did not");
	close(fd);
out:
	printf("1..%d\n", ntest);
	printf("%d passed, %d failed\n", ntest - nfail, nfail);
	return nfail ? 1 : 0;
}
