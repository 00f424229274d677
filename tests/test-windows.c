// SPDX-License-Identifier: MIT
/*
 * test-windows: what each kind of window lets through, on the backend in
 * use (mprotect on the host, PKU in the VM).  A read window on an
 * access-disabled domain lets reads through and nothing more; a write
 * window lets writes through; closing the last window of a kind takes
 * exactly that access away again.  Every access is made through probe()
 * (tools/probe.h): a fault must name the address, the access kind, the
 * key and the backend's si_code.
 *
 * Written for the mutation check (tests/mutation/mutants, U03, U14, U90):
 * no other host test noticed a read window that granted write access, a
 * persistence copy that read a no-access source without a window, or
 * one whose source cache outlived a pmg_protect().
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tap.h"
#include "probe.h"

#define PAGE 4096

static char *new_page(void)
{
	char *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		tap_diag("mmap: %s", strerror(errno));
		exit(1);
	}
	memset(p, 0x11, PAGE);
	return p;
}

/*
 * A write window on @d, which holds read rights: a write at @p goes
 * through; once it is closed a write at @p + 8 faults and a read at
 * @p + 16 still goes through (read-only, not read-write).  1 if so.
 */
static int write_window_leaves_readonly(struct pmg_domain *d, char *p)
{
	int ok = 1;

	CHECK(ok, pmg_open(d, PMG_WRITE) == 0);
	CHECK(ok, probe(d, p, PMG_WRITE) == 0);
	CHECK(ok, pmg_close(d, PMG_WRITE) == 0);
	CHECK(ok, probe(d, p + 8, PMG_WRITE) == 1);
	CHECK(ok, probe(d, p + 16, PMG_READ) == 0);
	return ok;
}

/* An access-disabled domain: read window, write window, both nested. */
static void test_noaccess(void)
{
	struct pmg_domain *d = NULL;
	char *p = new_page();
	int ok = 1;

	CHECK(ok, pmg_domain_new(&d, "win-noaccess", PMG_DOMAIN_NOACCESS) == 0);
	CHECK(ok, d && pmg_protect(d, p, PAGE) == 0);
	if (!ok) {
		tap_ok(0, "set up a no-access domain: %s", pmg_errormsg());
		for (int i = 0; i < 3; i++)
			tap_ok(0, "no-access domain windows: no domain");
		return;
	}
	tap_ok(probe(d, p, PMG_READ) == 1 && probe(d, p + 8, PMG_WRITE) == 1,
	       "no-access domain, no window: a read and a write both fault");

	ok = 1;
	CHECK(ok, pmg_open(d, PMG_READ) == 0);
	CHECK(ok, probe(d, p + 16, PMG_READ) == 0);
	CHECK(ok, probe(d, p + 24, PMG_WRITE) == 1);
	CHECK(ok, probe(d, p + 32, PMG_READ) == 0);
	tap_ok(ok, "read window: reads go through, a write still faults");

	tap_ok(write_window_leaves_readonly(d, p + 40),
	       "write window nested in the read window: writes go through; "
	       "closing it leaves read-only, not read-write");

	ok = 1;
	CHECK(ok, pmg_close(d, PMG_READ) == 0);
	CHECK(ok, probe(d, p + 64, PMG_READ) == 1);
	tap_ok(ok, "last read window closed: reads fault again");

	pmg_unprotect(p, PAGE);
	pmg_domain_delete(&d);
	munmap(p, PAGE);
}

/* A write-disabled (default) domain: reads never fault. */
static void test_readonly(void)
{
	struct pmg_domain *d = NULL;
	char *p = new_page();
	int ok = 1;

	CHECK(ok, pmg_domain_new(&d, "win-readonly", 0) == 0);
	CHECK(ok, d && pmg_protect(d, p, PAGE) == 0);
	if (!ok) {
		tap_ok(0, "set up a read-only domain: %s", pmg_errormsg());
		return;
	}
	CHECK(ok, probe(d, p, PMG_READ) == 0);
	CHECK(ok, probe(d, p + 8, PMG_WRITE) == 1);
	CHECK(ok, write_window_leaves_readonly(d, p + 16));
	tap_ok(ok, "read-only domain: reads always, writes only inside a "
	       "write window");

	pmg_unprotect(p, PAGE);
	pmg_domain_delete(&d);
	munmap(p, PAGE);
}

/*
 * The persistence calls open their own windows: a write window on the
 * destination's domain and a read window on an access-disabled source's.
 * Not one stray fault, the bytes copied, the rights as before.
 */
static void test_persist_windows(void)
{
	struct pmg_domain *src_d = NULL, *dst_d = NULL;
	char *src = new_page(), *dst = new_page();
	int ok = 1, strays;

	memset(src, 0x5c, PAGE);
	CHECK(ok, pmg_domain_new(&src_d, "win-src", PMG_DOMAIN_NOACCESS) == 0);
	CHECK(ok, pmg_domain_new(&dst_d, "win-dst", 0) == 0);
	CHECK(ok, src_d && pmg_protect(src_d, src, PAGE) == 0);
	CHECK(ok, dst_d && pmg_protect(dst_d, dst, PAGE) == 0);
	strays = probe_log.strays;
	CHECK(ok, pmg_memcpy_persist(dst + 100, src + 200, 300) == dst + 100);
	strays = probe_log.strays - strays;
	CHECK(ok, strays == 0);
	CHECK(ok, pmg_open(src_d, PMG_READ) == 0);
	CHECK(ok, dst[100] == 0x5c && dst[399] == 0x5c && dst[99] == 0x11 &&
		  dst[400] == 0x11);
	CHECK(ok, pmg_close(src_d, PMG_READ) == 0);
	CHECK(ok, probe(src_d, src, PMG_READ) == 1);
	CHECK(ok, probe(dst_d, dst + 8, PMG_WRITE) == 1);
	tap_ok(ok, "pmg_memcpy_persist from a no-access source to a "
	       "read-only destination: no stray fault (%d), data copied, "
	       "rights restored after", strays);

	pmg_unprotect(src, PAGE);
	pmg_unprotect(dst, PAGE);
	pmg_domain_delete(&src_d);
	pmg_domain_delete(&dst_d);
	munmap(src, PAGE);
	munmap(dst, PAGE);
}

/*
 * The persistence calls remember, per thread, which read window a source
 * needs (persist.c's source cache): an answer for a gap between ranges
 * must not outlive a pmg_protect() inside that gap, nor one for a range
 * its pmg_unprotect().  Three pages: a copy from the first caches "no
 * window" for the gap around all three; then the middle one is protected
 * access-disabled, and a copy from it must open a read window (no stray
 * read); then unprotected, and a copy needs none.
 */
static void test_persist_source_cache(void)
{
	struct pmg_domain *d = NULL;
	char *m = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *dst = new_page();
	int ok = m != MAP_FAILED, from = probe_log.strays, strays;

	if (!ok) {
		tap_ok(0, "persistence source cache: mmap: %s",
		       strerror(errno));
		return;
	}
	memset(m, 0x21, PAGE);
	memset(m + PAGE, 0x42, PAGE);
	memset(m + 2 * PAGE, 0x63, PAGE);
	CHECK(ok, pmg_domain_new(&d, "win-srccache", PMG_DOMAIN_NOACCESS) == 0);
	CHECK(ok, pmg_memcpy_persist(dst, m + 8, 64) == dst && dst[0] == 0x21);
	CHECK(ok, d && pmg_protect(d, m + PAGE, PAGE) == 0);
	CHECK(ok, pmg_memcpy_persist(dst, m + PAGE + 8, 64) == dst);
	CHECK(ok, dst[0] == 0x42 && dst[63] == 0x42);
	strays = probe_log.strays - from;
	/* the window closed after the copy (the probe's fault: not a
	 * copy's stray) */
	CHECK(ok, probe(d, m + PAGE, PMG_READ) == 1);
	from = probe_log.strays;
	CHECK(ok, pmg_unprotect(m + PAGE, PAGE) == 0);
	CHECK(ok, pmg_memcpy_persist(dst, m + PAGE + 8, 64) == dst);
	CHECK(ok, pmg_memcpy_persist(dst, m + 2 * PAGE, 64) == dst &&
			  dst[0] == 0x63);
	strays += probe_log.strays - from;
	CHECK(ok, strays == 0);
	tap_ok(ok,
	       "persistence source cache: a range protected inside a "
	       "gap it remembered gets its read window, an unprotected one "
	       "none (%d stray reads)",
	       strays);
	pmg_domain_delete(&d);
	munmap(m, 3 * PAGE);
	munmap(dst, PAGE);
}

int main(void)
{
	tap_init(7);
	if (pmg_init() || probe_begin()) {
		tap_diag("pmg_init / audit mode: %s", pmg_errormsg());
		return 1;
	}
	tap_diag("backend: %s", pmg_backend_name(pmg_backend()));
	test_noaccess();
	test_readonly();
	test_persist_windows();
	test_persist_source_cache();
	probe_end();
	return tap_done();
}
