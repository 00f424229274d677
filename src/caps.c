// SPDX-License-Identifier: MIT
/*
 * Page protection under the program's own rights: every mprotect(2) and
 * pkey_mprotect(2) the library makes on protected memory goes through
 * _pmg_cap_pkey_mprotect() here, which never gives a page more than the
 * program asked for it (the table below), and _pmg_prot_of() turns
 * rights into a page protection.  Used by both backends, the page and
 * lazy windows, the keys and the fault path; uses nothing of theirs
 * (docs/design.md, "Object dependencies").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_pkey_mprotect
#define SYS_pkey_mprotect 329
#endif

#include "internal.h"

int _pmg_prot_of(unsigned rights)
{
	switch (rights) {
	case PMG_RIGHTS_RW:
		return PROT_READ | PROT_WRITE;
	case PMG_RIGHTS_WD:
		return PROT_READ;
	}
	return PROT_NONE;
}

/* ------------------------------------------------- the program's rights */

/*
 * The program's own mprotect() over parts of protected ranges (seen by
 * the shared library, interpose.c): what it asked for is remembered here,
 * page-aligned, so that no window edge gives those pages more than it
 * asked (a page it made read-only stays read-only inside a window) and
 * pmg_unprotect() gives them back as it left them.  Pages without an
 * entry: read-write, as pmg_protect() found them.  Under _pmg.lock; the
 * fault path reads without it (an entry changes only under the lock,
 * while the program's own mprotect() runs: the answer is the one before
 * or after).  A full table: -ENOSPC (reported by the caller).
 */
#define CAP_MAX 64

static struct {
	uintptr_t base, end; /* end 0: free */
	int prot;
} cap[CAP_MAX];
static unsigned cap_used;

static int cap_of(uintptr_t page)
{
	unsigned i;

	for (i = 0; i < CAP_MAX; i++) {
		uintptr_t e = __atomic_load_n(&cap[i].end, __ATOMIC_ACQUIRE);

		if (e &&
		    __atomic_load_n(&cap[i].base, __ATOMIC_RELAXED) <= page &&
		    page < e)
			return __atomic_load_n(&cap[i].prot, __ATOMIC_RELAXED);
	}
	return PROT_READ | PROT_WRITE;
}

bool _pmg_cap_allows(uintptr_t addr, unsigned acc)
{
	int c;

	if (!__atomic_load_n(&cap_used, __ATOMIC_RELAXED))
		return true;
	c = cap_of(addr & ~(PMG_PAGE_SIZE - 1));
	return acc == PMG_WRITE ? (c & PROT_WRITE) != 0
				: (c & (PROT_READ | PROT_WRITE)) != 0;
}

/* Our protection @prot where the program allows @c. */
static int capped(int prot, int c)
{
	return (prot & c & (PROT_READ | PROT_WRITE)) | (c & PROT_EXEC);
}

static void cap_put(unsigned i, uintptr_t b, uintptr_t e, int prot)
{
	__atomic_store_n(&cap[i].end, 0, __ATOMIC_RELEASE);
	if (!e)
		return;
	__atomic_store_n(&cap[i].base, b, __ATOMIC_RELAXED);
	__atomic_store_n(&cap[i].prot, prot, __ATOMIC_RELAXED);
	__atomic_store_n(&cap[i].end, e, __ATOMIC_RELEASE);
}

static int cap_free_slot(void)
{
	unsigned i;

	for (i = 0; i < CAP_MAX; i++)
		if (!cap[i].end)
			return (int)i;
	return -1;
}

/* Forget the program's rights over [@b, @e) (lock held). */
void _pmg_cap_drop(uintptr_t b, uintptr_t e)
{
	unsigned i, n = 0;

	if (!cap_used)
		return;
	for (i = 0; i < CAP_MAX; i++) {
		uintptr_t cb = cap[i].base, ce = cap[i].end;
		int f;

		if (!ce || ce <= b || cb >= e)
			continue;
		if (cb < b && ce > e && (f = cap_free_slot()) >= 0) {
			cap_put((unsigned)f, e, ce, cap[i].prot);
			cap_put(i, cb, b, cap[i].prot);
		} else if (cb < b) {
			cap_put(i, cb, b, cap[i].prot);
		} else if (ce > e) {
			cap_put(i, e, ce, cap[i].prot);
		} else {
			cap_put(i, 0, 0, 0);
		}
	}
	for (i = 0; i < CAP_MAX; i++)
		n += cap[i].end != 0;
	__atomic_store_n(&cap_used, n, __ATOMIC_RELAXED);
}

/* The program asked for @prot over [@b, @e), part of a protected range
 * (lock held).  0 or -ENOSPC (nothing remembered). */
int _pmg_cap_set(uintptr_t b, uintptr_t e, int prot)
{
	int f;

	prot &= PROT_READ | PROT_WRITE | PROT_EXEC;
	/* a split may take one slot, the entry another */
	if (cap_used + 2 > CAP_MAX)
		return -ENOSPC;
	_pmg_cap_drop(b, e);
	if (prot == (PROT_READ | PROT_WRITE))
		return 0;
	f = cap_free_slot();
	cap_put((unsigned)f, b, e, prot);
	__atomic_add_fetch(&cap_used, 1, __ATOMIC_RELAXED);
	return 0;
}

/* mprotect(2), or pkey_mprotect(2) with @key (>= 0).  -1 and errno. */
static int prot_call(uintptr_t b, uintptr_t e, int prot, int key)
{
	if (key < 0)
		return _pmg_mprotect((void *)b, e - b, prot);
	return (int)syscall(SYS_pkey_mprotect, b, e - b, prot, key);
}

static int cap_mprotect_once(uintptr_t b, uintptr_t e, int prot, int key)
{
	uintptr_t at = b;

	if (!__atomic_load_n(&cap_used, __ATOMIC_RELAXED))
		return prot_call(b, e, prot, key) ? -errno : 0;
	/* page by page where entries are: a rare case, kept simple */
	while (at < e) {
		int c = cap_of(at);
		uintptr_t nx = at + PMG_PAGE_SIZE;

		while (nx < e && cap_of(nx) == c)
			nx += PMG_PAGE_SIZE;
		if (prot_call(at, nx, capped(prot, c), key))
			return -errno;
		at = nx;
	}
	return 0;
}

/*
 * mprotect(2) [@b, @e) to our @prot, where the program allows it.  Lock
 * held (or the fault path).  0 or -errno.  Around holes: the kernel
 * stops at the first page not mapped (ENOMEM), having changed only what
 * came before it; a protected range unmapped in part behind the
 * library's back (the static library does not see munmap(): the range
 * stays registered until pmg_unprotect()) would keep whatever its pages
 * past the hole had, read-write after a lazy window's grant there.  On
 * ENOMEM the span is halved until each piece succeeds or is one page not
 * mapped: every mapped page gets @prot, -ENOMEM still returned.  AS-safe.
 */
int _pmg_cap_pkey_mprotect(uintptr_t b, uintptr_t e, int prot, int key)
{
	uintptr_t m;
	int rc = cap_mprotect_once(b, e, prot, key), r2;

	if (rc != -ENOMEM || e - b <= PMG_PAGE_SIZE)
		return rc;
	m = b + (((e - b) / 2) & ~(uintptr_t)(PMG_PAGE_SIZE - 1));
	rc = _pmg_cap_pkey_mprotect(b, m, prot, key);
	r2 = _pmg_cap_pkey_mprotect(m, e, prot, key);
	return rc ? rc : r2;
}

int _pmg_cap_mprotect(uintptr_t b, uintptr_t e, int prot)
{
	return _pmg_cap_pkey_mprotect(b, e, prot, -1);
}

/* @prot where the program allows it at @page (the table above).  AS-safe
 * (reads only; the fault path). */
int _pmg_cap_limit(uintptr_t page, int prot)
{
	if (__atomic_load_n(&cap_used, __ATOMIC_RELAXED))
		prot = capped(prot, cap_of(page));
	return prot;
}
