// SPDX-License-Identifier: MIT
/*
 * Domains and protected ranges: creation and deletion, key allocation,
 * protect, unprotect and lookup.  Windows are window.c's.
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

int _pmg_noaccess_domains;

/* The _pmg_dom behind a handle, or NULL if it is not a live one of ours. */
struct _pmg_dom *_pmg_dom_of(const struct pmg_domain *d)
{
	struct _pmg_dom *x;
	int k;

	if (!d)
		return NULL;
	k = __atomic_load_n(&d->_key, __ATOMIC_ACQUIRE);
	if (k < 1 || k >= PMG_NR_KEYS)
		return NULL;
	x = &_pmg.dom[k];
	if (!__atomic_load_n(&x->live, __ATOMIC_ACQUIRE) || x->h != d)
		return NULL;
	return x;
}

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

static void describe_holders(char *buf, size_t size)
{
	size_t n = 0;
	unsigned k;

	buf[0] = '\0';
	for (k = 1; k < PMG_NR_KEYS && n < size; k++)
		if (_pmg.dom[k].live)
			n += (size_t)snprintf(buf + n, size - n, "%s%s (key %u)",
					      n ? ", " : "",
					      _pmg.core.key[k].name, k);
}

/*
 * Keys reserved early (_pmg_keys_reserve(): `pmguard run`'s constructor,
 * before the program creates threads).  pkey_alloc() sets the rights of
 * the calling thread only, and a thread inherits its creator's register:
 * a thread created before a domain's key was allocated has it
 * access-disabled, and its first read of the domain needs the handler to
 * sync its rights in the signal frame, which a thread that blocks SIGSEGV
 * cannot take (a blocked fault kills).  A key allocated write-disabled
 * before any such thread exists is write-disabled in all of them: a
 * write-disabled domain created later on it needs no sync.  Only
 * write-disabled domains take one: every thread created since the
 * reservation may read the key, which a no-access domain must not allow.
 * Under the library lock.
 */
static int reserved[PMG_NR_KEYS];
static unsigned nreserved;

/*
 * Keys that some thread may read (PKU): a write-disabled domain's default
 * (every thread that synced or was created since has it readable) or a
 * reservation.  pmg_domain_delete() can reset the calling thread's
 * register only, so such a key, freed and allocated again, is still
 * readable in those threads: it may serve a write-disabled domain again,
 * never a no-access one (whose memory they would read unnoticed).
 */
static uint32_t key_readable;
static unsigned nskipped; /* readable keys key_get() passed over */

int _pmg_keys_reserve(unsigned n)
{
	int k;

	if (_pmg_ensure_init() || !_pmg.prim->thread_local)
		return 0; /* mprotect: rights are process-wide */
	pthread_mutex_lock(&_pmg.lock);
	while (nreserved < n && nreserved < PMG_NR_KEYS - 1) {
		k = _pmg.prim->key_alloc(PMG_RIGHTS_WD);
		if (k < 0)
			break;
		if (k < 1 || k >= PMG_NR_KEYS || _pmg.dom[k].live) {
			_pmg.prim->key_free(k);
			break;
		}
		reserved[nreserved++] = k;
		key_readable |= 1u << k;
	}
	n = nreserved;
	pthread_mutex_unlock(&_pmg.lock);
	return (int)n;
}

/* A key for a new domain whose default is @dflt (lock held). */
static int key_get(unsigned dflt)
{
	int held[PMG_NR_KEYS], k;
	unsigned n = 0;

	nskipped = 0;
	if (dflt == PMG_RIGHTS_WD && nreserved)
		return reserved[--nreserved];
	for (;;) {
		k = _pmg.prim->key_alloc(dflt);
		if (k < 1 || k >= PMG_NR_KEYS || dflt == PMG_RIGHTS_WD ||
		    !(key_readable & (1u << k)) || n == PMG_NR_KEYS)
			break;
		held[n++] = k; /* readable somewhere: not for no-access */
	}
	nskipped = n;
	while (n)
		_pmg.prim->key_free(held[--n]);
	return k;
}

/*
 * @storage: the handle's memory, owned by the caller (pool.c's shared
 * domains, re-created at the same place each time), or NULL to allocate
 * one that is never freed.
 */
static int domain_new(struct pmg_domain **dp, const char *name,
		      unsigned flags, struct pmg_domain *storage)
{
	struct pmg_domain *h;
	struct _pmg_dom *d;
	unsigned dflt;
	int key, rc, k;

	if (!dp)
		return _pmg_err(-EINVAL, "pmg_domain_new: dp is NULL");
	*dp = NULL;
	rc = check_name(name);
	if (rc)
		return rc;
	if (flags & ~PMG_DOMAIN_NOACCESS)
		return _pmg_err(-EINVAL, "pmg_domain_new: unknown flags 0x%x",
				flags & ~PMG_DOMAIN_NOACCESS);
	rc = _pmg_ensure_init();
	if (rc)
		return rc;
	dflt = (flags & PMG_DOMAIN_NOACCESS) ? PMG_RIGHTS_AD : PMG_RIGHTS_WD;
	h = storage ? storage : calloc(1, sizeof(*h));
	if (!h)
		return _pmg_err(-ENOMEM, "pmg_domain_new: out of memory");

	pthread_mutex_lock(&_pmg.lock);
	for (k = 1; k < PMG_NR_KEYS; k++) {
		if (_pmg.dom[k].live &&
		    !strcmp(_pmg.core.key[k].name, name)) {
			rc = _pmg_err(-EEXIST, "a domain named '%s' exists "
				      "(key %d)", name, k);
			goto out;
		}
	}
	key = key_get(dflt);
	if (key < 0) {
		char who[400];

		describe_holders(who, sizeof(who));
		if (key == -ENOSPC)
			rc = _pmg_err(-ENOSPC,
				      "no protection key left for "
				      "'%s': %d of %d keys are held by "
				      "pmguard domains [%s], %u reserved "
				      "for write-disabled domains, %u "
				      "readable in some threads (a deleted "
				      "write-disabled domain's: not for a "
				      "no-access one), the rest by the "
				      "kernel or other code in this process",
				      name, pmg_core_count_used(&_pmg.core),
				      PMG_NR_KEYS - 1, who, nreserved,
				      nskipped);
		else
			rc = _pmg_err(key, "allocating a key for '%s': %s",
				      name, strerror(-key));
		goto out;
	}
	if (key < 1 || key >= PMG_NR_KEYS || _pmg.dom[key].live) {
		_pmg.prim->key_free(key);
		rc = _pmg_err(-EBUSY, "the backend returned key %d, which "
			      "pmguard cannot use", key);
		goto out;
	}
	rc = pmg_core_key_claim(&_pmg.core, (unsigned)key, name, dflt);
	if (rc) {
		_pmg.prim->key_free(key);
		rc = _pmg_err(rc, "claiming key %d failed", key);
		goto out;
	}
	d = &_pmg.dom[key];
	d->h = h;
	d->key = key;
	h->_mask = PMG_PKR_MASK(key);
	h->_rd_bits = pmg_window_rights(dflt, PMG_ACC_READ)
		      << PMG_PKR_SHIFT(key);
	h->_dflt_bits = dflt << PMG_PKR_SHIFT(key);
	/* the inline edges refuse a handle not at this address (a copy) */
	h->_self = h;
	__atomic_store_n(&h->_key, key, __ATOMIC_RELEASE);
	d->flags = flags;
	d->nranges = 0;
	d->gw = d->gr = 0;
	_pmg_lazy_reset(key);
	/* A key reused after pmg_domain_delete(): no stale counts here. */
	_pmg_tls.w[key] = _pmg_tls.r[key] = 0;
	if (_pmg.prim->thread_local)
		_pmg.prim->set_rights(key, dflt);
	if (_pmg.prim->thread_local && dflt == PMG_RIGHTS_WD)
		key_readable |= 1u << key;
	if (flags & PMG_DOMAIN_NOACCESS)
		__atomic_add_fetch(&_pmg_noaccess_domains, 1, __ATOMIC_RELAXED);
	_pmg_fault_cb_clear(key);
	__atomic_store_n(&d->live, true, __ATOMIC_RELEASE);
	*dp = h;
	h = NULL;
out:
	pthread_mutex_unlock(&_pmg.lock);
	if (!storage)
		free(h);	/* NULL once handed out */
	return rc;
}

PMG_API int pmg_domain_new(struct pmg_domain **dp, const char *name,
			   unsigned flags)
{
	return domain_new(dp, name, flags, NULL);
}

int _pmg_domain_new_at(struct pmg_domain **dp, const char *name,
		       unsigned flags, struct pmg_domain *storage)
{
	return domain_new(dp, name, flags, storage);
}

PMG_API int pmg_domain_delete(struct pmg_domain **dp)
{
	struct _pmg_dom *d;
	int key, rc = 0;

	if (!dp || !*dp)
		return 0;
	pthread_mutex_lock(&_pmg.lock);
	d = _pmg_dom_of(*dp);
	if (!d) {
		rc = _pmg_err(-EINVAL, "pmg_domain_delete: not a live domain");
		goto out;
	}
	key = d->key;
	if (_pmg_pool_domain_refs(*dp)) {
		rc = _pmg_err(
			-EBUSY,
			"domain '%s' is the pool layer's shared "
			"domain, used by %u open pool(s): pmg_pool_close() "
			"deletes it with the last",
			_pmg.core.key[key].name, _pmg_pool_domain_refs(*dp));
		goto out;
	}
	if (d->gw || d->gr || _pmg_tls.w[key] || _pmg_tls.r[key]) {
		rc = _pmg_err(-EBUSY, "domain '%s' has open windows: close "
			      "them first", _pmg.core.key[key].name);
		goto out;
	}
	if (d->nranges) {
		rc = _pmg_err(-EBUSY, "domain '%s' still protects %u "
			      "range(s): unprotect them first",
			      _pmg.core.key[key].name, d->nranges);
		goto out;
	}
	__atomic_store_n(&d->live, false, __ATOMIC_RELEASE);
	if (d->flags & PMG_DOMAIN_NOACCESS)
		__atomic_sub_fetch(&_pmg_noaccess_domains, 1, __ATOMIC_RELAXED);
	if (_pmg.prim->thread_local)
		_pmg.prim->set_rights(key, PMG_RIGHTS_AD);
	pmg_core_key_release(&_pmg.core, (unsigned)key);
	_pmg.prim->key_free(key);
	/* the handle stays allocated: a stale copy reads key 0 */
	__atomic_store_n(&d->h->_key, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&d->h->_self, NULL, __ATOMIC_RELEASE);
	d->h = NULL;
	*dp = NULL;
out:
	pthread_mutex_unlock(&_pmg.lock);
	return rc;
}

/*
 * Whether @d's default denies reads too (PMG_DOMAIN_NOACCESS): a read of
 * its memory needs a read window.  From the handle alone, as the inline
 * edges see it: no lock, AS-safe.
 */
bool _pmg_domain_noaccess(const struct pmg_domain *d)
{
	return d->_rd_bits != d->_dflt_bits;
}

PMG_API int pmg_domain_key(const struct pmg_domain *d)
{
	struct _pmg_dom *x = _pmg_dom_of(d);

	return x ? x->key : _pmg_err_s(-EINVAL, "pmg_domain_key: not a live domain");
}

PMG_API const char *pmg_domain_name(const struct pmg_domain *d)
{
	struct _pmg_dom *x = _pmg_dom_of(d);

	return x ? _pmg.core.key[x->key].name : NULL;
}

/*
 * Every byte of [base, end) must be mapped readable and writable: tagging
 * sets PROT_READ|PROT_WRITE and must not upgrade a read-only mapping.
 * Where /proc is missing, fall back to msync() for "is it mapped".
 */
static int check_mapping(uintptr_t base, uintptr_t end)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	uintptr_t at = base;

	if (!f) {
		if (msync((void *)base, end - base, MS_ASYNC) && errno == ENOMEM)
			return _pmg_err(-ENOMEM, "range %#lx-%#lx is not "
					"(entirely) mapped", (unsigned long)base,
					(unsigned long)end);
		return 0;
	}
	while (at < end && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[8];

		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3)
			continue;
		if (hi <= at)
			continue;
		if (lo > at)
			break;
		if (perms[0] != 'r' || perms[1] != 'w') {
			fclose(f);
			return _pmg_err(-EACCES, "range %#lx-%#lx: the "
					"mapping at %#lx is '%.4s', not "
					"read-write", (unsigned long)base,
					(unsigned long)end, lo, perms);
		}
		at = hi;
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
	if (!rc)
		rc = _pmg_reg_insert(base, end, d->key);
	if (rc == -EEXIST) {
		rc = _pmg_err(-EEXIST, "range %p-%#lx overlaps a protected "
			      "range", addr, (unsigned long)end);
		goto out;
	}
	if (rc == -ENOMEM || rc == -EACCES)
		goto out;	/* check_mapping() said why */
	if (rc) {
		rc = _pmg_err(rc, "registering %p-%#lx: %s", addr,
			      (unsigned long)end, strerror(-rc));
		goto out;
	}
	rc = _pmg.prim->tag(addr, len, d->key, _pmg_process_rights(d));
	if (rc) {
		_pmg_reg_remove(base, end, &dummy);
		rc = _pmg_err(rc, "tagging %p-%#lx with key %d: %s", addr,
			      (unsigned long)end, d->key, strerror(-rc));
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
	int rc, key;

	if (!len || base + len < base)
		return _pmg_err(-EINVAL, "pmg_unprotect(%p, %zu): bad length",
				addr, len);
	if (!__atomic_load_n(&_pmg.inited, __ATOMIC_ACQUIRE))
		return _pmg_err(-ENOENT, "pmg_unprotect(%p, %zu): nothing is "
				"protected", addr, len);
	pthread_mutex_lock(&_pmg.lock);
	if (_pmg_reg_find(base, &r) || r.base != base || r.end != base + len) {
		rc = 0;
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
	_pmg_reg_remove(base, base + len, &key);
	_pmg.dom[key].nranges--;
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
	return _pmg.dom[r.key].h;
}
