// SPDX-License-Identifier: MIT
/*
 * Page windows: on the mprotect backend a persistence call opens write
 * access only on the pages its destination touches, not on the domain's
 * every range (a domain window costs one mprotect(2) of the whole pool per
 * edge, and while it is open every thread may write anywhere in the
 * domain).  Windows opened with pmg_open()/pmg_write_begin() stay
 * domain-wide.
 *
 * Each open page window is an entry [base, end) of a domain in a small
 * table,
 * under _pmg.lock.  The pages of an entry are read-write; whoever lowers
 * a key's rights (a domain window's last close, the fault path's re-arm,
 * an entry's own close) leaves the pages of the remaining entries alone,
 * so two threads' calls on one page, or a domain window that closes while
 * a call is inside, never take a page away from a call in progress (the
 * entries act as per-page counts).  A full table makes the caller fall
 * back to a domain window.  A fork child drops every entry (their threads
 * are not in the child) and puts the keys' rights back.
 *
 * The fault path reads the table without the lock: an entry appears or
 * goes only while its pages are changed under the lock, so the answer for
 * a faulting page is the one before or after the edge.
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_pkey_mprotect
#define SYS_pkey_mprotect 329
#endif

#include "internal.h"

#define PW_MAX 64

static struct {
	uintptr_t base, end;
	int id; /* the domain; 0: free */
} pw[PW_MAX];
static unsigned pw_used;		/* entries in use */

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

static bool pw_covers(int id, uintptr_t page)
{
	unsigned i;

	for (i = 0; i < PW_MAX; i++)
		if (__atomic_load_n(&pw[i].id, __ATOMIC_ACQUIRE) == id &&
		    __atomic_load_n(&pw[i].base, __ATOMIC_RELAXED) <= page &&
		    page < __atomic_load_n(&pw[i].end, __ATOMIC_RELAXED))
			return true;
	return false;
}

/* The protection @page of domain @id should have now: read-write while
 * it holds a key (PKU: the key protects it), else its page protection.
 * AS-safe. */
int _pmg_pw_prot(int id, uintptr_t page)
{
	int prot = _pmg_prot_of(_pmg_process_rights(&_pmg.dom[id]));

	if (_pmg_dom_hw(id) ||
	    (__atomic_load_n(&pw_used, __ATOMIC_RELAXED) &&
	     pw_covers(id, page)) ||
	    _pmg_lazy_has(id, page))
		prot = PROT_READ | PROT_WRITE;
	if (__atomic_load_n(&cap_used, __ATOMIC_RELAXED))
		prot = capped(prot, cap_of(page));
	return prot;
}

/*
 * mprotect [@base, @end) of @key to @prot, leaving out the pages of page
 * windows on @key unless @prot is read-write.  Lock held (or the fault
 * path).  0 or -errno.
 */
int _pmg_pw_mprotect(int id, uintptr_t base, uintptr_t end, int prot)
{
	uintptr_t b[PW_MAX], e[PW_MAX], cur = base;
	unsigned i, j, n = 0;
	int rc;

	if (prot == (PROT_READ | PROT_WRITE) ||
	    !__atomic_load_n(&pw_used, __ATOMIC_RELAXED))
		return _pmg_cap_mprotect(base, end, prot);
	for (i = 0; i < PW_MAX; i++) {
		uintptr_t x, y;

		if (pw[i].id != id || pw[i].end <= base || pw[i].base >= end)
			continue;
		x = pw[i].base < base ? base : pw[i].base;
		y = pw[i].end > end ? end : pw[i].end;
		/* insertion sort by start */
		for (j = n; j > 0 && b[j - 1] > x; j--) {
			b[j] = b[j - 1];
			e[j] = e[j - 1];
		}
		b[j] = x;
		e[j] = y;
		n++;
	}
	for (i = 0; i < n; i++) {
		if (b[i] > cur && (rc = _pmg_cap_mprotect(cur, b[i], prot)))
			return rc;
		if (e[i] > cur)
			cur = e[i];
	}
	if (cur < end)
		return _pmg_cap_mprotect(cur, end, prot);
	return 0;
}

/*
 * Open write access on the pages of [@addr, @addr+@len), all inside one
 * protected range of @d.  Returns the entry (> 0), 0 when the table is
 * full or the mapping cannot be split there (use a domain window), or
 * -errno.
 */
int _pmg_pw_open(struct pmg_domain *d, const void *addr, size_t len)
{
	uintptr_t pb = (uintptr_t)addr & ~(PMG_PAGE_SIZE - 1);
	uintptr_t pe = ((uintptr_t)addr + len + PMG_PAGE_SIZE - 1) &
		       ~(PMG_PAGE_SIZE - 1);
	int id = d->_id, rc = 0;
	unsigned i;

	pthread_mutex_lock(&_pmg.lock);
	for (i = 0; i < PW_MAX && pw[i].id; i++)
		;
	/* (a domain holding a key needs a window, not pages) */
	if (i == PW_MAX || id < 1 || id >= PMG_DOM_MAX || !_pmg.dom[id].live ||
	    _pmg.dom[id].h != d || _pmg.dom[id].hw) {
		pthread_mutex_unlock(&_pmg.lock);
		return 0;
	}
	if (_pmg_process_rights(&_pmg.dom[id]) != PMG_RIGHTS_RW &&
	    (rc = _pmg_cap_mprotect(pb, pe, PROT_READ | PROT_WRITE))) {
		pthread_mutex_unlock(&_pmg.lock);
		/* device dax splits mappings only at its alignment: there a
		 * page window cannot be made, a domain window can */
		if (rc == -EINVAL)
			return 0;
		return _pmg_err(rc, "mprotect for a page window %p-%#lx: %s",
				(void *)pb, (unsigned long)pe, strerror(-rc));
	}
	/* relaxed: the fault handlers read a slot while it is reused */
	__atomic_store_n(&pw[i].base, pb, __ATOMIC_RELAXED);
	__atomic_store_n(&pw[i].end, pe, __ATOMIC_RELAXED);
	__atomic_store_n(&pw[i].id, id, __ATOMIC_RELEASE);
	__atomic_add_fetch(&pw_used, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&_pmg.lock);
	return (int)i + 1;
}

/* Close entry @slot (from _pmg_pw_open()): its pages get the key's rights
 * back, except those another entry still holds. */
void _pmg_pw_close(int slot)
{
	unsigned i = (unsigned)slot - 1;
	int id, prot;

	pthread_mutex_lock(&_pmg.lock);
	id = pw[i].id;
	__atomic_store_n(&pw[i].id, 0, __ATOMIC_RELEASE);
	__atomic_sub_fetch(&pw_used, 1, __ATOMIC_RELAXED);
	prot = _pmg_prot_of(_pmg_process_rights(&_pmg.dom[id]));
	/* inside a lazy write window on the domain the pages stay writable
	 * until it closes (lazywin.c), as if the call had faulted them in */
	if (prot != (PROT_READ | PROT_WRITE) &&
	    !_pmg_lazy_keep(id, pw[i].base, pw[i].end))
		(void)_pmg_pw_mprotect(id, pw[i].base, pw[i].end, prot);
	pthread_mutex_unlock(&_pmg.lock);
}

/* Fork child (lock held by the atfork handlers' thread): no entry's call
 * runs here; drop them all, then each key's pages get its rights. */
void _pmg_pw_fork_child(void)
{
	int ids[PW_MAX];
	unsigned i, n = 0;

	if (!pw_used)
		return;
	for (i = 0; i < PW_MAX; i++) {
		if (pw[i].id)
			ids[n++] = pw[i].id;
		pw[i].id = 0;
	}
	__atomic_store_n(&pw_used, 0, __ATOMIC_RELAXED);
	for (i = 0; i < n; i++)
		if (_pmg.dom[ids[i]].live && !_pmg.dom[ids[i]].hw)
			(void)_pmg_paged_set(ids[i],
					     _pmg_process_rights(
						     &_pmg.dom[ids[i]]));
}
