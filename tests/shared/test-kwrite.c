// SPDX-License-Identifier: MIT
/*
 * The kernel's own accesses to protected memory inside a write window:
 * read(2) and the like write the caller's buffer, write(2) and the like
 * read it, and neither takes a fault.  On the mprotect backend's lazy
 * windows (docs/design.md, "What a program may do to a protected
 * mapping") the shared library's interposers grant the buffer's blocks
 * first; a call must come back with its full length whatever the layout:
 *  - two ranges of one domain in one 1 MiB block; a range split by a
 *    partial munmap(); a persistence call's page window kept in the
 *    block; a granted block lowered by a read window's edges.
 * Runs on both backends (keys: the kernel honours the thread's PKRU;
 * eager windows: the whole domain is open).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <pmguard.h>

#include "tap.h"
#include "capture.h"

#define MB (1UL << 20)
#define PAGE 4096UL
#define N (3 * MB)

#define FN (4 * MB)
static char *src; /* FN bytes of the pattern */
static int fd = -1; /* a file of FN bytes of the pattern */

/* @n bytes aligned to 1 MiB (a lazy window's block), shared (as a pool
 * or a database map is) */
static char *map_aligned(size_t n)
{
	char *m = mmap(NULL, n + MB, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	uintptr_t a;

	if (m == MAP_FAILED)
		return NULL;
	a = ((uintptr_t)m + MB - 1) & ~(MB - 1);
	if (a > (uintptr_t)m)
		munmap(m, a - (uintptr_t)m);
	munmap((char *)a + n, (uintptr_t)m + MB - a);
	return (char *)a;
}

static void pattern(char *p, size_t n)
{
	for (size_t k = 0; k < n; k++)
		p[k] = (char)('a' + (k * 7 + k / 4093) % 26);
}

/* ------------------------------------------------ layouts of the blocks */

static void t_two_ranges(void)
{
	struct pmg_domain *d = NULL;
	size_t n = 2 * MB, cut = 256 * 1024;
	char *m = map_aligned(n);
	ssize_t got = -1;

	if (m && !pmg_domain_new(&d, "kw2", 0) && !pmg_protect(d, m, cut) &&
	    !pmg_protect(d, m + cut, n - cut) && !pmg_write_begin(d)) {
		got = pread(fd, m, n, 0);
		pmg_write_end(d);
	}
	tap_ok(got == (ssize_t)n && !memcmp(m, src, n),
	       "pread of 2 MiB over two ranges of one domain sharing a block: "
	       "%zd of %zu, data %s", got, n,
	       m && !memcmp(m, src, n) ? "right" : "wrong");
	pmg_unprotect(m, cut);
	pmg_unprotect(m + cut, n - cut);
	pmg_domain_delete(&d);
	munmap(m, n);
}

static void t_split(void)
{
	struct pmg_domain *d = NULL;
	size_t n = 4 * MB, hole = MB + 64 * 1024; /* inside block 1 */
	size_t rest = MB - 64 * 1024 - PAGE; /* the 2nd piece's part */
	char *m = map_aligned(n);
	ssize_t got = -1, got2 = -1;
	int ok = 0;

	if (m && !pmg_domain_new(&d, "kws", 0) && !pmg_protect(d, m, n) &&
	    !munmap(m + hole, PAGE)) {
		struct iovec iov[2] = { { m, hole },
					{ m + hole + PAGE, n - hole - PAGE } };

		pmg_write_begin(d);
		got = preadv(fd, iov, 2, 0);
		pmg_write_end(d);
		ok = got == (ssize_t)(n - PAGE) && !memcmp(m, src, hole) &&
		     !memcmp(m + hole + PAGE, src + hole, n - hole - PAGE);
		/* the block granted by a store into the first piece */
		pmg_write_begin(d);
		m[hole - 1] = 1;
		got2 = pread(fd, m + hole + PAGE, rest, 0);
		pmg_write_end(d);
		ok = ok && got2 == (ssize_t)rest &&
		     !memcmp(m + hole + PAGE, src, rest);
	}
	tap_ok(ok, "a range split by munmap() of a page: preadv over both "
	       "pieces %zd of %zu; pread into the 2nd piece's part of a block "
	       "a store into the 1st granted: %zd of %zu; data right",
	       got, n - PAGE, got2, rest);
	pmg_unprotect(m, n);
	pmg_domain_delete(&d);
	munmap(m, hole);
	munmap(m + hole + PAGE, n - hole - PAGE);
}

static void t_pagewin(void)
{
	struct pmg_domain *d = NULL;
	size_t n = 2 * MB;
	char *m = map_aligned(n);
	ssize_t got = -1;

	if (m && !pmg_domain_new(&d, "kwp", 0) && !pmg_protect(d, m, n) &&
	    !pmg_write_begin(d)) {
		/* a header by a persistence call (its page window is kept
		 * in the window), then the payload after it by read(2) */
		pmg_memcpy_persist(m, "HDR", 4);
		got = pread(fd, m + PAGE, MB, 0);
		pmg_write_end(d);
	}
	tap_ok(got == (ssize_t)MB && !memcmp(m, "HDR", 4) &&
	       !memcmp(m + PAGE, src, MB),
	       "pmg_memcpy_persist() of a header, then pread of 1 MiB after "
	       "it in the same window: %zd of %lu", got, MB);
	pmg_unprotect(m, n);
	pmg_domain_delete(&d);
	munmap(m, n);
}

static void t_lowered(void)
{
	struct pmg_domain *d = NULL;
	size_t n = 2 * MB;
	char *m = map_aligned(n);
	ssize_t got = -1;
	int same = 0;

	if (m && !pmg_domain_new(&d, "kwl", PMG_DOMAIN_NOACCESS) &&
	    !pmg_protect(d, m, n) && !pmg_write_begin(d)) {
		m[0] = 1; /* block 0 granted */
		/* a read window's edges set the no-access domain's pages
		 * (read-only, then no access): block 0 too */
		pmg_open(d, PMG_READ);
		pmg_close(d, PMG_READ);
		got = pread(fd, m + PAGE, MB - PAGE, 0);
		same = !memcmp(m + PAGE, src, MB - PAGE);
		pmg_write_end(d);
	}
	tap_ok(got == (ssize_t)(MB - PAGE) && same,
	       "no-access domain: a granted block lowered by a read window's "
	       "edges, then pread into it: %zd of %lu", got, MB - PAGE);
	pmg_unprotect(m, n);
	pmg_domain_delete(&d);
	munmap(m, n);
}

int main(void)
{
	tap_init(4);
	src = malloc(FN);
	fd = tmpfd();
	if (!src || fd < 0)
		return 1;
	pattern(src, FN);
	if (write(fd, src, FN) != (ssize_t)FN)
		return 1;
	t_two_ranges();
	t_split();
	t_pagewin();
	t_lowered();
	tap_diag("backend %s", pmg_backend_name(pmg_backend()));
	return tap_done();
}
