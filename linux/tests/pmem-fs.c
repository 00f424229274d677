// SPDX-License-Identifier: MIT
/*
 * pmem-fs - file I/O on ext4 mounted -o dax on /dev/pmem0, in the Linux
 * test guest (linux/scripts/linux-check).  Static; TAP on stdout.
 *
 * Usage: pmem-fs DIR            write, read back, fsync, mmap, truncate,
 *                               copy; leaves DIR/keep.dat behind
 *        pmem-fs --verify DIR   after a remount: DIR/keep.dat intact
 *
 * Every file test first checks that DAX is really on for the file
 * (statx STATX_ATTR_DAX), so a mount that fell back to the page cache
 * fails here instead of passing quietly.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
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

#define FILE_SIZE (1u << 20)	/* 1 MiB: 256 pages of the pmem */

static int ntest, nfail;
static const char *dir;

#define PRINTF(f, a) __attribute__((format(printf, f, a)))

/* Print one line: head, then fmt formatted. */
static PRINTF(2, 0) void vline(const char *head, const char *fmt, va_list ap)
{
	fputs(head, stdout);
	vprintf(fmt, ap);
	putchar('\n');
}

static PRINTF(2, 3) void result(int ok, const char *fmt, ...)
{
	char head[32];
	va_list ap;

	ntest++;
	if (!ok)
		nfail++;
	snprintf(head, sizeof(head), "%sok %d - ", ok ? "" : "not ", ntest);
	va_start(ap, fmt);
	vline(head, fmt, ap);
	va_end(ap);
}

static PRINTF(1, 2) void diag(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vline("# ", fmt, ap);
	va_end(ap);
}

static char *path(const char *name)
{
	static char buf[4][512];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", dir, name);
	return buf[i];
}

/* Byte i of a file filled with seed. */
static uint8_t pat(unsigned int seed, size_t i)
{
	return (uint8_t)((i * 131 + seed * 7 + (i >> 12)) & 0xff);
}

static void fill(uint8_t *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pat(seed, i);
}

/* First index where p differs from the pattern, or n. */
static size_t check(const uint8_t *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != pat(seed, i))
			return i;
	return n;
}

static int is_dax(const char *f)
{
	struct statx stx;

	if (statx(AT_FDCWD, f, 0, STATX_BASIC_STATS, &stx) != 0) {
		diag("statx %s: %s", f, strerror(errno));
		return 0;
	}
	if (!(stx.stx_attributes_mask & STATX_ATTR_DAX))
		diag("statx %s: the kernel does not report STATX_ATTR_DAX", f);
	return !!(stx.stx_attributes & STATX_ATTR_DAX);
}

/* All n bytes with write() (wr) or read(); 0 on success. */
static int xfer_all(int fd, uint8_t *p, size_t n, int wr)
{
	while (n) {
		ssize_t r = wr ? write(fd, p, n) : read(fd, p, n);

		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Read the whole file f (expected size n) into buf; 0 on success. */
static int slurp(const char *f, uint8_t *buf, size_t n)
{
	struct stat st;
	int fd = open(f, O_RDONLY);
	int rc = -1;

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) == 0 && (size_t)st.st_size == n &&
	    xfer_all(fd, buf, n, 0) == 0)
		rc = 0;
	close(fd);
	return rc;
}

static void test_write_read(uint8_t *buf, uint8_t *back)
{
	const char *f = path("write.dat");
	int fd = open(f, O_CREAT | O_TRUNC | O_RDWR, 0644);
	size_t at;

	if (fd < 0) {
		result(0, "create %s: %s", f, strerror(errno));
		return;
	}
	fill(buf, FILE_SIZE, 1);
	result(xfer_all(fd, buf, FILE_SIZE, 1) == 0, "write 1 MiB with write()");
	result(fsync(fd) == 0, "fsync after write()");
	close(fd);
	result(is_dax(f), "statx: DAX is on for the file (STATX_ATTR_DAX)");
	memset(back, 0, FILE_SIZE);
	at = slurp(f, back, FILE_SIZE) == 0 ? check(back, FILE_SIZE, 1) : 0;
	result(at == FILE_SIZE, "read back with read(): content verified%s",
	       at == FILE_SIZE ? "" : " (MISMATCH)");
	if (at != FILE_SIZE)
		diag("first difference at byte %zu", at);
}

static void test_mmap(uint8_t *back)
{
	const char *f = path("mmap.dat");
	int fd = open(f, O_CREAT | O_TRUNC | O_RDWR, 0644);
	uint8_t *m;
	size_t at;

	if (fd < 0 || ftruncate(fd, FILE_SIZE) != 0) {
		result(0, "create and size %s: %s", f, strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	m = mmap(NULL, FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		result(0, "mmap MAP_SHARED: %s", strerror(errno));
		close(fd);
		return;
	}
	fill(m, FILE_SIZE, 2);
	result(msync(m, FILE_SIZE, MS_SYNC) == 0, "write through a MAP_SHARED mapping, msync");
	munmap(m, FILE_SIZE);
	result(fsync(fd) == 0, "fsync after the mapping");
	close(fd);
	result(is_dax(f), "statx: DAX is on for the mapped file");
	memset(back, 0, FILE_SIZE);
	at = slurp(f, back, FILE_SIZE) == 0 ? check(back, FILE_SIZE, 2) : 0;
	result(at == FILE_SIZE, "what the mapping wrote reads back with read()");
	if (at != FILE_SIZE)
		diag("first difference at byte %zu", at);

	/* And the other way: write() then a fresh mapping sees it. */
	fd = open(f, O_RDWR);
	if (fd < 0) {
		result(0, "reopen %s: %s", f, strerror(errno));
		return;
	}
	fill(back, FILE_SIZE, 3);
	at = 0;
	if (pwrite(fd, back, FILE_SIZE, 0) == FILE_SIZE && fsync(fd) == 0) {
		m = mmap(NULL, FILE_SIZE, PROT_READ, MAP_SHARED, fd, 0);
		if (m != MAP_FAILED) {
			at = check(m, FILE_SIZE, 3);
			munmap(m, FILE_SIZE);
		}
	}
	close(fd);
	result(at == FILE_SIZE, "what write() wrote reads back through a new mapping");
}

static void test_truncate(uint8_t *back)
{
	const char *f = path("write.dat");
	size_t half = FILE_SIZE / 2 + 123;
	struct stat st;
	size_t at = 0;
	int ok = 0;

	if (truncate(f, (off_t)half) == 0 && stat(f, &st) == 0 &&
	    (size_t)st.st_size == half && slurp(f, back, half) == 0)
		at = check(back, half, 1);
	result(at == half, "truncate to %zu bytes: size and kept content right", half);

	/* Growing again gives zeros past the old end, not the old data. */
	if (truncate(f, FILE_SIZE) == 0 && slurp(f, back, FILE_SIZE) == 0 &&
	    check(back, half, 1) == half) {
		ok = 1;
		for (size_t i = half; i < FILE_SIZE; i++)
			if (back[i]) {
				ok = 0;
				diag("byte %zu is 0x%02x after extending", i, back[i]);
				break;
			}
	}
	result(ok, "extend again: the tail reads as zeros");
}

static void test_copy(uint8_t *buf, uint8_t *back)
{
	const char *from = path("mmap.dat"), *to = path("copy.dat");
	int in = open(from, O_RDONLY);
	int out = open(to, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	int ok = in >= 0 && out >= 0;
	ssize_t r;
	size_t at = 0;

	while (ok && (r = read(in, buf, 65536)) > 0)
		ok = xfer_all(out, buf, (size_t)r, 1) == 0;
	if (ok)
		ok = fsync(out) == 0;
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	if (ok && slurp(to, back, FILE_SIZE) == 0)
		at = check(back, FILE_SIZE, 3);
	result(ok && at == FILE_SIZE, "copy a file, fsync, the copy verified");
	result(unlink(from) == 0, "unlink the source");
	result(rename(to, path("keep.dat")) == 0, "rename the copy to keep.dat");
}

int main(int argc, char **argv)
{
	int verify = 0;
	uint8_t *buf, *back;
	size_t at = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && !strcmp(argv[1], "--verify")) {
		verify = 1;
		dir = argv[2];
	} else if (argc == 2) {
		dir = argv[1];
	} else {
		fprintf(stderr, "usage: pmem-fs [--verify] DIR\n");
		return 2;
	}
	buf = malloc(FILE_SIZE);
	back = malloc(FILE_SIZE);
	if (!buf || !back)
		return 1;
	if (verify) {
		if (slurp(path("keep.dat"), back, FILE_SIZE) == 0)
			at = check(back, FILE_SIZE, 3);
		result(at == FILE_SIZE, "after umount and mount -o dax: keep.dat intact");
		result(is_dax(path("keep.dat")), "statx: DAX still on after the remount");
	} else {
		test_write_read(buf, back);
		test_mmap(back);
		test_truncate(back);
		test_copy(buf, back);
	}
	printf("1..%d\n", ntest);
	printf("%d passed, %d failed\n", ntest - nfail, nfail);
	return nfail ? 1 : 0;
}
