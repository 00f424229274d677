// SPDX-License-Identifier: MIT
/*
 * fuzz-registry - the protected-range registry through the public calls,
 * checked against a model (one entry per page) after every step.
 *
 * A fixed mapping of NPAGES read-write pages, with a PROT_NONE guard page
 * on either side, and three domains: two write-disabled, one
 * access-disabled.  The input is a list of 4-byte steps:
 *
 *   protect     pmg_protect(dom, page, npages) (sometimes unaligned, or an
 *               address outside the mapping); return value checked
 *   unprotect   pmg_unprotect() of a random or of an existing range
 *   lookup      pmg_lookup() of any byte: domain, base, length
 *   write/read  one access to a page: it must fault exactly when the model
 *               says the page is protected (audit mode: the fault is
 *               counted by an observer and let through once)
 *   window      a write window on one domain: its pages take writes
 *               without a fault, the other domains' pages still fault
 *   map_local   pmg_map_local() opens a window only on protected bytes
 *   memset      pmg_memset() (any flags) over a byte range: no fault if
 *               every range it touches is in the domain of its first or
 *               last byte (the call opens windows on those), a fault
 *               otherwise; the bytes are all set either way (audit lets
 *               strays through)
 *   cycle       pmg_domain_delete(): -EBUSY while the domain has ranges;
 *               else deleted, its stale handle refused, created again
 *
 * At the end of each input every range is unprotected and every page must
 * take a write without a fault.  Any mismatch aborts.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "pmguard.h"

#define PAGE	 4096UL
#define NPAGES	 48
#define NDOMS	 3
#define MAXSTEPS 96

#define FAIL(...)							\
	do {								\
		fprintf(stderr, "fuzz-registry: " __VA_ARGS__);	\
		fputc('\n', stderr);					\
		abort();						\
	} while (0)

static char *map;			/* page 0 of the usable pages */
static struct pmg_domain *dom[NDOMS];
static const char *const dom_name[NDOMS] = { "fz-a", "fz-b", "fz-noacc" };
static const unsigned dom_flags[NDOMS] = { 0, 0, PMG_DOMAIN_NOACCESS };

/* The model: per page, the range it belongs to (first page, length in
 * pages) and its domain index; dom -1 means unprotected. */
static struct {
	int dom;
	int first, npages;
} model[NPAGES];

/* written by the observer, in the SIGSEGV handler */
static volatile sig_atomic_t faults;	/* stray faults seen */
static void *volatile fault_addr;
static volatile sig_atomic_t fault_access;
static struct pmg_domain *volatile fault_dom;

static void observer(const struct pmg_fault_info *fi, void *arg)
{
	(void)arg;
	if (fi->action == PMG_FAULT_SYNCED || fi->action == PMG_FAULT_GRANTED)
		return;
	fault_addr = fi->addr;
	fault_access = fi->access;
	fault_dom = fi->domain;
	faults++;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char *m;
	int i;

	(void)argc;
	(void)argv;
	m = mmap(NULL, (NPAGES + 2) * PAGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		FAIL("mmap: %s", strerror(errno));
	mprotect(m, PAGE, PROT_NONE);
	mprotect(m + (NPAGES + 1) * PAGE, PAGE, PROT_NONE);
	map = m + PAGE;
	for (i = 0; i < NDOMS; i++)
		if (pmg_domain_new(&dom[i], dom_name[i], dom_flags[i]))
			FAIL("pmg_domain_new: %s", pmg_errormsg());
	pmg_set_report_fd(-1);
	pmg_set_fault_observer(observer, NULL);
	pmg_set_fault_mode(PMG_FAULT_AUDIT);
	for (i = 0; i < NPAGES; i++)
		model[i].dom = -1;
	return 0;
}

static void access_page(int pg, unsigned off, int acc)
{
	volatile char *p = map + (size_t)pg * PAGE + off % PAGE;
	int before = faults, want;

	if (acc == PMG_WRITE)
		*p = (char)pg;
	else
		(void)*p;
	__asm__ volatile("" ::: "memory");
	want = model[pg].dom >= 0 &&
	       (acc == PMG_WRITE || dom_flags[model[pg].dom]);
	if (faults - before != want)
		FAIL("%s of page %d (domain %d): %d faults, model %d",
		     acc == PMG_WRITE ? "write" : "read", pg, model[pg].dom,
		     faults - before, want);
	if (want && (fault_addr != (void *)p || fault_access != acc ||
		     fault_dom != dom[model[pg].dom]))
		FAIL("fault details: addr %p (want %p), access %d (want %d), "
		     "domain %p (want %p)", fault_addr, (void *)p,
		     fault_access, acc, (void *)fault_dom,
		     (void *)dom[model[pg].dom]);
}

/*
 * Look up the byte at @off from page 0 (it may lie in a guard page or
 * beyond the mapping: the address is made with integer arithmetic, as
 * pointer arithmetic outside an object is undefined).
 */
static void check_lookup(intptr_t off)
{
	const char *addr = (const char *)((uintptr_t)map + (uintptr_t)off);
	void *base = NULL;
	size_t len = 0;
	struct pmg_domain *d = pmg_lookup(addr, &base, &len);
	int pg = off >= 0 && off < (intptr_t)(NPAGES * PAGE) ?
		(int)(off / (intptr_t)PAGE) : -1;

	if (pg < 0 || model[pg].dom < 0) {
		if (d)
			FAIL("lookup(%p) found a domain, model: none",
			     (const void *)addr);
		return;
	}
	if (d != dom[model[pg].dom] ||
	    base != map + (size_t)model[pg].first * PAGE ||
	    len != (size_t)model[pg].npages * PAGE)
		FAIL("lookup(page %d) = %p %p+%zu, model domain %d pages "
		     "%d+%d", pg, (void *)d, base, len, model[pg].dom,
		     model[pg].first, model[pg].npages);
}

/* pages [first, first+n) of the mapping; -1 and NPAGES are the guards */
static void do_protect(int di, int first, int n, unsigned tweak)
{
	char *addr = map + (ptrdiff_t)first * (ptrdiff_t)PAGE;
	size_t len = (size_t)n * PAGE;
	int rc, want = 0, i;

	switch (tweak % 8) {
	case 1:
		addr += 1 + tweak % (PAGE - 1);		/* unaligned */
		break;
	case 2:
		len += 1 + tweak % (PAGE - 1);		/* unaligned */
		break;
	case 3:
		addr = (char *)(uintptr_t)(-(intptr_t)PAGE);	/* wraps */
		break;
	case 4:
		addr = NULL;				/* page 0 */
		break;
	}
	rc = pmg_protect(dom[di], addr, len);
	if (tweak % 8 == 3) {
		if (rc != -EINVAL)
			FAIL("protect of a wrapping range: %d", rc);
		return;
	}
	if (tweak % 8 == 4) {
		if (rc != -EINVAL && rc != -ENOMEM)
			FAIL("protect of page 0: %d", rc);
		return;
	}
	if (len == 0 || (uintptr_t)addr % PAGE || len % PAGE) {
		want = -EINVAL;
	} else {
		for (i = first; i < first + n; i++)
			if (i >= 0 && i < NPAGES && model[i].dom >= 0)
				want = -EEXIST;
		if (!want && (first < 0 || first + n > NPAGES))
			want = -EACCES;			/* a guard page */
	}
	if (rc != want)
		FAIL("protect(dom %d, page %d, %d pages, tweak %u) = %d (%s), "
		     "model %d", di, first, n, tweak % 8, rc, pmg_errormsg(),
		     want);
	if (rc)
		return;
	for (i = first; i < first + n; i++) {
		model[i].dom = di;
		model[i].first = first;
		model[i].npages = n;
	}
}

static void do_unprotect(int first, int n)
{
	char *addr = map + (ptrdiff_t)first * (ptrdiff_t)PAGE;
	int rc, want, i;

	want = n > 0 && first >= 0 && first < NPAGES &&
	       model[first].dom >= 0 && model[first].first == first &&
	       model[first].npages == n ? 0 : n ? -ENOENT : -EINVAL;
	rc = pmg_unprotect(addr, (size_t)n * PAGE);
	if (rc != want)
		FAIL("unprotect(page %d, %d pages) = %d, model %d", first, n,
		     rc, want);
	if (rc)
		return;
	for (i = first; i < first + n; i++)
		model[i].dom = -1;
}

static void do_window(int di, unsigned sel)
{
	int pg, before;

	if (pmg_write_begin(dom[di]))
		FAIL("pmg_write_begin: %s", pmg_errormsg());
	for (pg = (int)(sel % 5); pg < NPAGES; pg += 5) {
		if (model[pg].dom == di) {
			before = faults;
			map[(size_t)pg * PAGE + sel % PAGE] = 1;
			__asm__ volatile("" ::: "memory");
			if (faults != before)
				FAIL("write to page %d faulted inside a window "
				     "on its domain %d", pg, di);
		} else {
			access_page(pg, sel, PMG_WRITE);
		}
	}
	if (pmg_write_end(dom[di]))
		FAIL("pmg_write_end: %s", pmg_errormsg());
}

static void do_map_local(int pg, unsigned off)
{
	char *p = map + (size_t)pg * PAGE + off % PAGE;
	int want = model[pg].dom >= 0, rc, before;

	rc = pmg_map_local(p, PMG_WRITE);
	if (rc != want)
		FAIL("map_local(page %d) = %d, model %d", pg, rc, want);
	before = faults;
	*(volatile char *)p = 7;
	__asm__ volatile("" ::: "memory");
	if (faults != before)
		FAIL("write after map_local(page %d) faulted", pg);
	rc = pmg_unmap_local(p, PMG_WRITE);
	if (rc != want)
		FAIL("unmap_local(page %d) = %d, model %d", pg, rc, want);
}

static void do_memset(unsigned a, unsigned b, int c, unsigned flags)
{
	size_t start = a % (NPAGES * PAGE), len = b % (3 * PAGE) + 1, i;
	int d0, d1, stray = 0, before = faults;
	char *p;

	if (start + len > NPAGES * PAGE)
		len = NPAGES * PAGE - start;
	d0 = model[start / PAGE].dom;
	d1 = model[(start + len - 1) / PAGE].dom;
	for (i = start / PAGE; i <= (start + len - 1) / PAGE; i++)
		if (model[i].dom >= 0 && model[i].dom != d0 &&
		    model[i].dom != d1)
			stray = 1;
	p = pmg_memset(map + start, c, len, flags);
	if (p != map + start)
		FAIL("pmg_memset returned %p: %s", (void *)p, pmg_errormsg());
	if (!stray && faults != before)
		FAIL("pmg_memset(%zu+%zu) faulted %d times; domains %d, %d",
		     start, len, faults - before, d0, d1);
	if (stray && faults == before)
		FAIL("pmg_memset(%zu+%zu) over another domain's range did "
		     "not fault", start, len);
	/* reads of the noaccess domain need a window */
	pmg_open(dom[2], PMG_READ);
	for (i = 0; i < len; i++)
		if (map[start + i] != (char)c)
			FAIL("pmg_memset: byte %zu is %d, not %d", start + i,
			     map[start + i], c);
	pmg_close(dom[2], PMG_READ);
}

static void do_cycle(int di)
{
	struct pmg_domain *d = dom[di], *stale;
	int busy = 0, i, rc;

	for (i = 0; i < NPAGES; i++)
		busy |= model[i].dom == di;
	rc = pmg_domain_delete(&d);
	if (busy) {
		if (rc != -EBUSY || d != dom[di])
			FAIL("delete of a domain with ranges: %d", rc);
		return;
	}
	if (rc || d)
		FAIL("pmg_domain_delete: %d %s", rc, pmg_errormsg());
	stale = dom[di];
	if (pmg_protect(stale, map, PAGE) != -EINVAL)
		FAIL("a deleted domain's handle was accepted");
	if (pmg_domain_new(&dom[di], dom_name[di], dom_flags[di]))
		FAIL("pmg_domain_new again: %s", pmg_errormsg());
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t s, steps = size / 4;
	int i;

	if (steps > MAXSTEPS)
		steps = MAXSTEPS;
	for (s = 0; s < steps; s++) {
		const uint8_t *b = data + 4 * s;
		int pg = b[1] % NPAGES, di = b[2] % NDOMS;
		unsigned w = (unsigned)b[2] << 8 | b[3];

		switch (b[0] % 12) {
		case 0:
		case 1:
			/* pages -1 .. NPAGES, 0..8 of them */
			do_protect(di, (int)(b[1] % (NPAGES + 2)) - 1,
				   b[3] % 9, b[0] >= 0x80 ?
				   (unsigned)(b[0] >> 4) + 8u * b[3] : 0);
			break;
		case 2:
			do_unprotect((int)(b[1] % (NPAGES + 2)) - 1,
				     b[3] % 9);
			break;
		case 3:
			if (model[pg].dom >= 0)
				do_unprotect(model[pg].first,
					     model[pg].npages);
			break;
		case 4:
			/* pages -2 .. NPAGES + 1 */
			check_lookup(((intptr_t)(b[1] % (NPAGES + 4)) - 2) *
					     (intptr_t)PAGE +
				     (intptr_t)(w % PAGE));
			break;
		case 5:
			access_page(pg, w, PMG_WRITE);
			break;
		case 6:
			access_page(pg, w, PMG_READ);
			break;
		case 7:
			do_window(di, w);
			break;
		case 8:
			do_map_local(pg, w);
			break;
		case 9:
			do_memset((unsigned)b[1] * PAGE / 4 + b[3], w, b[3],
				  (b[0] >> 2) & PMG_F_MEM_VALID_FLAGS);
			break;
		case 10:
			do_cycle(di);
			break;
		default:
			check_lookup((intptr_t)pg * (intptr_t)PAGE);
			break;
		}
	}
	/* leave nothing protected; every page writable without a fault */
	for (i = 0; i < NPAGES; i++)
		if (model[i].dom >= 0)
			do_unprotect(model[i].first, model[i].npages);
	for (i = 0; i < NPAGES; i++) {
		check_lookup((intptr_t)i * (intptr_t)PAGE);
		access_page(i, 0, PMG_WRITE);
	}
	return 0;
}
