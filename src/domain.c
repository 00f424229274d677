// SPDX-License-Identifier: MIT
/*
 * Domains and protected ranges: creation and deletion, protect,
 * unprotect and lookup.  Hardware keys are keys.c's, windows window.c's.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"
#include "procfs.h"

int _pmg_noaccess_domains;

static int check_name(const char *name)
{
	size_t i, n;

	if (!name)
		return _pmg_err(-EINVAL, "domain name is NULL");
	n = strlen(name);
	if (n == 0 || n >= PMG_KEY_NAME_MAX)
		return _pmg_err(-EINVAL, "domain name '%.40s' must have 1 to "
				"%d characters", name, PMG_KEY_NAME_MAX - 1);
	for (i = 0; i < n; i++)
		if (!isgraph((unsigned char)name[i]))
			return _pmg_err(-EINVAL, "domain name has a "
					"non-printable or blank character "
					"at offset %zu", i);
	return 0;
}

/* A free slot (lock held): the next after the last one taken, so that a
 * number is not reused at once (a stale handle's _id names an empty slot
 * for a while).  0: none. */
static int slot_get(void)
{
	static int next = 1;
	int i, id;

	for (i = 1; i < PMG_DOM_MAX; i++) {
		id = next;
		next = next + 1 < PMG_DOM_MAX ? next + 1 : 1;
		if (!_pmg.dom[id].live && !_pmg.dom[id].h)
			return id;
	}
	return 0;
}

#define DOMAIN_FLAGS (PMG_DOMAIN_NOACCESS | PMG_DOMAIN_PINNED)

/* pmg_domain_new()'s checks of its arguments, before the library starts
 * (init.c) and again in domain_new(). */
int _pmg_domain_args(struct pmg_domain **dp, const char *name, unsigned flags)
{
	int rc;

	if (!dp)
		return _pmg_err(-EINVAL, "pmg_domain_new: dp is NULL");
	*dp = NULL;
	rc = check_name(name);
	if (rc)
		return rc;
	if (flags & ~DOMAIN_FLAGS)
		return _pmg_err(-EINVAL, "pmg_domain_new: unknown flags 0x%x",
				flags & ~DOMAIN_FLAGS);
	return 0;
}

/*
 * @storage: the handle's memory, owned by the caller (pool.c's shared
 * domains, re-created at the same place each time), or NULL to allocate
 * one that is never freed.  The library is started (init.c's
 * pmg_domain_new(), a pool's open or create).
 */
static int domain_new(struct pmg_domain **dp, const char *name,
		      unsigned flags, struct pmg_domain *storage)
{
	struct pmg_domain *h;
	struct _pmg_dom *d;
	unsigned dflt;
	int rc, id;

	rc = _pmg_domain_args(dp, name, flags);
	if (rc)
		return rc;
	dflt = (flags & PMG_DOMAIN_NOACCESS) ? PMG_RIGHTS_AD : PMG_RIGHTS_WD;
	h = storage ? storage : calloc(1, sizeof(*h));
	if (!h)
		return _pmg_err(-ENOMEM, "pmg_domain_new: out of memory");

	pthread_mutex_lock(&_pmg.lock);
	for (id = 1; id < PMG_DOM_MAX; id++) {
		if (_pmg.dom[id].live && !strcmp(_pmg.dom[id].ck.name, name)) {
			rc = _pmg_err(-EEXIST, "a domain named '%s' exists",
				      name);
			goto out;
		}
	}
	id = slot_get();
	if (!id) {
		rc = _pmg_err(-ENOSPC,
			      "no room for domain '%s': %d domains "
			      "live (PMG_DOMAINS_MAX)",
			      name, PMG_DOM_MAX - 1);
		goto out;
	}
	d = &_pmg.dom[id];
	memset(d, 0, sizeof(*d));
	d->h = h;
	d->id = id;
	d->flags = flags;
	d->pinned = flags & PMG_DOMAIN_PINNED;
	d->ck.used = true;
	d->ck.dflt = (uint8_t)dflt;
	_pmg_strlcpy(d->ck.name, name, sizeof(d->ck.name));
	h->_key = 0;
	h->_mask = h->_rd_bits = h->_dflt_bits = 0;
	h->_ref = 0;
	__atomic_store_n(&h->_id, id, __ATOMIC_RELEASE);
	/* the inline edges refuse a handle not at this address (a copy) */
	h->_self = h;
	_pmg_lazy_reset(id);
	_pmg_fault_cb_clear(id);
	/* PKU: a key if one is free (a pinned domain takes one from
	 * another domain if it must); else virtual, page protection */
	if (_pmg.prim->thread_local) {
		char msg[PMG_ERRMSG_MAX];

		/* virtual is success: the message stays as it was */
		_pmg_err_save(msg, sizeof(msg));
		rc = _pmg_key_get(d, d->pinned);
		if (rc && (rc != -ENOSPC || d->pinned)) {
			d->h = NULL;
			d->ck.used = false;
			__atomic_store_n(&h->_self, NULL, __ATOMIC_RELEASE);
			goto out;
		}
		if (rc)
			_pmg_err_restore(msg);
		rc = 0;
	}
	if (flags & PMG_DOMAIN_NOACCESS)
		__atomic_add_fetch(&_pmg_noaccess_domains, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&d->live, true, __ATOMIC_RELEASE);
	*dp = h;
	h = NULL;
out:
	pthread_mutex_unlock(&_pmg.lock);
	if (!storage)
		free(h);	/* NULL once handed out */
	return rc;
}

int _pmg_domain_new_at(struct pmg_domain **dp, const char *name,
		       unsigned flags, struct pmg_domain *storage)
{
	return domain_new(dp, name, flags, storage);
}

PMG_API int pmg_domain_delete(struct pmg_domain **dp)
{
	struct _pmg_dom *d;
	int rc = 0;

	if (!dp || !*dp)
		return 0;
	pthread_mutex_lock(&_pmg.lock);
	d = _pmg_dom_of(*dp);
	if (!d) {
		rc = _pmg_err(-EINVAL, "pmg_domain_delete: not a live domain");
		goto out;
	}
	if (_pmg_pool_domain_refs(*dp)) {
		rc = _pmg_err(
			-EBUSY,
			"domain '%s' is the pool layer's shared "
			"domain, used by %u open pool(s): pmg_pool_close() "
			"deletes it with the last",
			d->ck.name, _pmg_pool_domain_refs(*dp));
		goto out;
	}
	if (d->gw || d->gr || (d->hw && _pmg_key_in_use(d->hw))) {
		rc = _pmg_err(-EBUSY,
			      "domain '%s' has open windows: close "
			      "them first",
			      d->ck.name);
		goto out;
	}
	if (d->nranges) {
		rc = _pmg_err(-EBUSY,
			      "domain '%s' still protects %u "
			      "range(s): unprotect them first",
			      d->ck.name, d->nranges);
		goto out;
	}
	__atomic_store_n(&d->live, false, __ATOMIC_RELEASE);
	if (d->flags & PMG_DOMAIN_NOACCESS)
		__atomic_sub_fetch(&_pmg_noaccess_domains, 1, __ATOMIC_RELAXED);
	_pmg_key_put(d);
	/* the handle stays allocated: a stale copy is refused */
	__atomic_store_n(&d->h->_key, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&d->h->_self, NULL, __ATOMIC_RELEASE);
	d->h = NULL;
	d->ck.used = false;
	*dp = NULL;
out:
	pthread_mutex_unlock(&_pmg.lock);
	return rc;
}

/*
 * Whether @d's default denies reads too (PMG_DOMAIN_NOACCESS): a read of
 * its memory needs a read window.  No lock, AS-safe.
 */
bool _pmg_domain_noaccess(const struct pmg_domain *d)
{
	int id = __atomic_load_n(&d->_id, __ATOMIC_RELAXED);

	return id > 0 && id < PMG_DOM_MAX &&
	       _pmg.dom[id].ck.dflt == PMG_RIGHTS_AD;
}

PMG_API int pmg_domain_key(const struct pmg_domain *d)
{
	struct _pmg_dom *x = _pmg_dom_of(d);
	int k;

	if (!x)
		return _pmg_err_s(-EINVAL, "pmg_domain_key: not a live domain");
	if (!_pmg.prim->thread_local)
		return x->id; /* mprotect: no hardware key, its number */
	k = _pmg_dom_hw(x->id);
	return k ? k : -ENOKEY;
}

/*
 * Every byte of [base, end) must be mapped readable and writable: tagging
 * sets PROT_READ|PROT_WRITE and must not upgrade a read-only mapping.
 * Where /proc is missing, fall back to msync() for "is it mapped".
 */
static int check_mapping(uintptr_t base, uintptr_t end)
{
	FILE *f = _pmg_maps_open();
	struct _pmg_map m;
	uintptr_t at = base;

	if (!f) {
		if (msync((void *)base, end - base, MS_ASYNC) && errno == ENOMEM)
			return _pmg_err(-ENOMEM, "range %#lx-%#lx is not "
					"(entirely) mapped", (unsigned long)base,
					(unsigned long)end);
		return 0;
	}
	while (at < end && _pmg_maps_next(f, &m)) {
		if (m.hi <= at)
			continue;
		if (m.lo > at)
			break;
		if (m.perms[0] != 'r' || m.perms[1] != 'w') {
			fclose(f);
			return _pmg_err(-EACCES, "range %#lx-%#lx: the "
					"mapping at %#lx is '%.4s', not "
					"read-write", (unsigned long)base,
					(unsigned long)end, m.lo, m.perms);
		}
		at = m.hi;
	}
	fclose(f);
	if (at < end)
		return _pmg_err(-ENOMEM, "range %#lx-%#lx is not (entirely) "
				"mapped: nothing at %#lx", (unsigned long)base,
				(unsigned long)end, (unsigned long)at);
	return 0;
}

PMG_API int pmg_protect(struct pmg_domain *dom, void *addr, size_t len)
{
	uintptr_t base = (uintptr_t)addr, end = base + len;
	struct _pmg_dom *d;
	int rc, dummy;

	if (base % PMG_PAGE_SIZE || len % PMG_PAGE_SIZE || !len)
		return _pmg_err(-EINVAL, "pmg_protect(%p, %zu): address and "
				"length must be non-zero multiples of %lu",
				addr, len, PMG_PAGE_SIZE);
	if (end < base)
		return _pmg_err(-EINVAL, "pmg_protect(%p, %zu): range wraps",
				addr, len);
	pthread_mutex_lock(&_pmg.lock);
	d = _pmg_dom_of(dom);
	if (!d) {
		rc = _pmg_err(-EINVAL, "pmg_protect: not a live domain");
		goto out;
	}
	/* overlap first: a protected range is not read-write on mprotect */
	rc = _pmg_reg_overlaps(base, end) ? -EEXIST : check_mapping(base, end);
	if (rc == -ENOMEM || rc == -EACCES)
		goto out; /* check_mapping() said why */
	if (!rc)
		rc = _pmg_reg_insert(base, end, d->id);
	if (!rc) /* registered again: no longer a dropped range */
		_pmg_gone_forget(base, end);
	if (rc == -EEXIST) {
		rc = _pmg_err(-EEXIST, "range %p-%#lx overlaps a protected "
			      "range", addr, (unsigned long)end);
		goto out;
	}
	if (rc) { /* -ENOMEM: the registry could not grow */
		rc = _pmg_err(rc, "registering %p-%#lx: %s", addr,
			      (unsigned long)end, strerror(-rc));
		goto out;
	}
	rc = _pmg.prim->tag(addr, len, d->hw, _pmg_process_rights(d));
	if (rc) {
		_pmg_reg_remove(base, end, &dummy);
		rc = _pmg_err(rc, "protecting %p-%#lx for domain '%s' (%s): %s",
			      addr, (unsigned long)end, d->ck.name,
			      d->hw ? "its key" : "page protection",
			      strerror(-rc));
		goto out;
	}
	d->nranges++;
out:
	pthread_mutex_unlock(&_pmg.lock);
	return rc;
}

PMG_API int pmg_unprotect(void *addr, size_t len)
{
	uintptr_t base = (uintptr_t)addr;
	struct _pmg_range r;
	int rc, id;

	if (!len || base + len < base)
		return _pmg_err(-EINVAL, "pmg_unprotect(%p, %zu): bad length",
				addr, len);
	if (!__atomic_load_n(&_pmg.inited, __ATOMIC_ACQUIRE))
		return _pmg_err(-ENOENT, "pmg_unprotect(%p, %zu): nothing is "
				"protected", addr, len);
	pthread_mutex_lock(&_pmg.lock);
	if (_pmg_reg_find(base, &r) || r.base != base || r.end != base + len) {
		rc = 0;
		/* a range an unmap of part of it split: what is left */
		if (_pmg_pieces_unprotect(base, base + len, &rc))
			goto out;
		if (!_pmg_gone_take(base, base + len))	/* unmapped.c */
			rc = _pmg_err(-ENOENT, "pmg_unprotect(%p, %zu): no "
				      "protected range starts there with "
				      "that length", addr, len);
		goto out;
	}
	if (!_pmg_all_mapped(base, base + len)) {
		/* unmapped behind our back: drop it, change nothing */
		_pmg_range_drop_unmapped(&r);
		rc = 0;
		goto out;
	}
	/* untag first: on failure the range stays registered and handled */
	rc = _pmg.prim->untag(addr, len);
	if (rc) {
		rc = _pmg_err(rc, "untagging %p: %s", addr, strerror(-rc));
		goto out;
	}
	_pmg_reg_remove(base, base + len, &id);
	_pmg.dom[id].nranges--;
out:
	pthread_mutex_unlock(&_pmg.lock);
	return rc;
}

PMG_API struct pmg_domain *pmg_lookup(const void *addr, void **base,
				      size_t *len)
{
	struct _pmg_range r;

	if (_pmg_reg_find((uintptr_t)addr, &r))
		return NULL;
	if (base)
		*base = (void *)r.base;
	if (len)
		*len = r.end - r.base;
	return _pmg.dom[r.dom].h;
}
