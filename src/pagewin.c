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

#include "internal.h"

#define PW_MAX 64

static struct {
	uintptr_t base, end;
	int id; /* the domain; 0: free */
} pw[PW_MAX];
static unsigned pw_used;		/* entries in use */

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
	return _pmg_cap_limit(page, prot);
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

/* ------------------------------------------- domains by page protection */

static int apply(const struct _pmg_range *r, void *arg)
{
	int prot = *(int *)arg;
	/* the pages of the persistence calls' page windows stay writable */
	int rc = _pmg_pw_mprotect(r->dom, r->base, r->end, prot);

	/* unmapped behind the library's back (unmapped.c): not a reason
	 * to fail a window on every other range */
	return rc == -ENOMEM ? 0 : rc;
}

/* Both backends: a domain kept by page protection (every one on
 * mprotect, a virtual one on PKU: its pages have key 0). */
int _pmg_paged_set(int id, unsigned rights)
{
	int prot = _pmg_prot_of(rights);

	return _pmg_reg_each(id, apply, &prot);
}
