// SPDX-License-Identifier: MIT
/*
 * Domains, protected ranges and the out-of-line window paths: the mprotect
 * backend's process-wide windows, validation failures and unbalanced
 * closes.  The PKU fast path is inline in pmguard.h.
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

static struct ucb *ucbs[PMG_NR_KEYS];

/* The _pmg_dom behind a handle, or NULL if it is not a live one of ours. */
static struct _pmg_dom *dom_of(const struct pmg_domain *d)
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
	key = _pmg.prim->key_alloc(dflt);
	if (key < 0) {
		char who[400];

		describe_holders(who, sizeof(who));
		if (key == -ENOSPC)
			rc = _pmg_err(-ENOSPC, "no protection key left for "
				      "'%s': %d of %d keys are held by "
				      "pmguard domains [%s], the rest by "
				      "the kernel or other code in this "
				      "process", name,
				      pmg_core_count_used(&_pmg.core),
				      PMG_NR_KEYS - 1, who);
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
	/* A key reused after pmg_domain_delete(): no stale counts here. */
	_pmg_tls.w[key] = _pmg_tls.r[key] = 0;
	if (_pmg.prim->thread_local)
		_pmg.prim->set_rights(key, dflt);
	if (flags & PMG_DOMAIN_NOACCESS)
		__atomic_add_fetch(&_pmg_noaccess_domains, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&ucbs[key], NULL, __ATOMIC_RELEASE);
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
	d = dom_of(*dp);
	if (!d) {
		rc = _pmg_err(-EINVAL, "pmg_domain_delete: not a live domain");
		goto out;
	}
	key = d->key;
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

PMG_API int pmg_domain_key(const struct pmg_domain *d)
{
	struct _pmg_dom *x = dom_of(d);

	return x ? x->key : _pmg_err_s(-EINVAL, "pmg_domain_key: not a live domain");
}

PMG_API const char *pmg_domain_name(const struct pmg_domain *d)
{
	struct _pmg_dom *x = dom_of(d);

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

/* The rights a domain's pages have on the mprotect backend: process-wide
 * window counts over its default.  AS-safe (reads only). */
unsigned _pmg_global_rights(const struct _pmg_dom *d)
{
	unsigned dflt = _pmg_domain_rights(d);

	/* relaxed: the fault handlers read these while the lock's holder
	 * changes them */
	if (__atomic_load_n(&d->gw, __ATOMIC_RELAXED))
		return pmg_window_rights(dflt, PMG_ACC_WRITE);
	if (__atomic_load_n(&d->gr, __ATOMIC_RELAXED))
		return pmg_window_rights(dflt, PMG_ACC_READ);
	return dflt;
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
	d = dom_of(dom);
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
	rc = _pmg.prim->tag(addr, len, d->key, _pmg_global_rights(d));
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

/* Window edge on the mprotect backend: process-wide, under the lock. */
static int mp_edge(struct _pmg_dom *d, int acc, bool open, void *caller)
{
	struct pmg_ws *ws = (struct pmg_ws *)&_pmg_tls;
	unsigned key = (unsigned)d->key, before, after;
	unsigned *g = acc ? &d->gw : &d->gr;
	int rc;

	if (open)
		_pmg_thread_arm();	/* a thread ending inside it */
	pthread_mutex_lock(&_pmg.lock);
	rc = open ? pmg_ws_open(ws, key, (unsigned)acc)
		  : pmg_ws_close(ws, key, (unsigned)acc);
	if (rc) {
		pthread_mutex_unlock(&_pmg.lock);
		if (rc == -PMG_E_PERM)
			return _pmg_unbalanced(d->h, acc, caller);
		return _pmg_overflow(d->h);
	}
	before = _pmg_global_rights(d);
	__atomic_store_n(g, open ? *g + 1 : *g - 1, __ATOMIC_RELAXED);
	after = _pmg_global_rights(d);
	if (before != after)
		rc = _pmg.prim->set_rights((int)key, after);
	if (rc) {
		/* undo: the edge did not happen */
		if (open) {
			__atomic_store_n(g, *g - 1, __ATOMIC_RELAXED);
			pmg_ws_close(ws, key, (unsigned)acc);
		} else {
			__atomic_store_n(g, *g + 1, __ATOMIC_RELAXED);
			pmg_ws_open(ws, key, (unsigned)acc);
		}
		(void)_pmg.prim->set_rights((int)key, before);
		rc = _pmg_err(rc, "mprotect for a window on '%s': %s",
			      _pmg.core.key[key].name, strerror(-rc));
	}
	pthread_mutex_unlock(&_pmg.lock);
	return rc;
}

/*
 * The calling thread ends with windows open (thread.c's destructor): close
 * them all.  On mprotect its counts leave the process-wide ones and the
 * pages get the rights the remaining windows say; on PKU the register dies
 * with the thread.  Each domain it held is reported once, here.
 */
void _pmg_release_windows(void)
{
	struct _pmg_ws *t = &_pmg_tls;
	struct {
		char name[PMG_KEY_NAME_MAX];
		unsigned w, r;
	} gone[PMG_NR_KEYS];
	unsigned k, n = 0, i;
	pid_t tid = (pid_t)syscall(SYS_gettid);

	pthread_mutex_lock(&_pmg.lock);
	for (k = 1; k < PMG_NR_KEYS; k++) {
		struct _pmg_dom *d = &_pmg.dom[k];
		unsigned w = t->w[k], r = t->r[k], before, after;

		if (!(w | r))
			continue;
		t->w[k] = t->r[k] = 0;
		pmg_strlcpy(gone[n].name, d->live ? _pmg.core.key[k].name
				: "(deleted)", sizeof(gone[n].name));
		gone[n].w = w;
		gone[n].r = r;
		n++;
		if (!d->live || _pmg.prim->thread_local)
			continue;
		before = _pmg_global_rights(d);
		__atomic_store_n(&d->gw, d->gw - (w < d->gw ? w : d->gw),
				 __ATOMIC_RELAXED);
		__atomic_store_n(&d->gr, d->gr - (r < d->gr ? r : d->gr),
				 __ATOMIC_RELAXED);
		after = _pmg_global_rights(d);
		if (before != after)
			(void)_pmg.prim->set_rights((int)k, after);
	}
	t->w[0] = 0;
	pthread_mutex_unlock(&_pmg.lock);
	for (i = 0; i < n; i++)
		_pmg_report_dead_windows(tid, gone[i].name, gone[i].w,
					 gone[i].r);
}

PMG_API int _pmg_bad_handle(struct pmg_domain *d, int acc)
{
	(void)d;
	(void)acc;
	return _pmg_err_s(-EINVAL, "window on a domain that is not live "
			  "(deleted, or not a handle pmg_domain_new() gave)");
}

static int bad_window(const struct pmg_domain *d, int acc)
{
	if (acc != PMG_READ && acc != PMG_WRITE)
		return _pmg_err_s(-EINVAL,
				  "window kind must be PMG_READ or PMG_WRITE");
	if (!d)
		return _pmg_err_s(-EINVAL, "window on a NULL domain");
	return _pmg_err_s(-EINVAL, "window on a domain that is not live");
}

PMG_API int _pmg_open_slow(struct pmg_domain *d, int acc)
{
	struct _pmg_dom *x = dom_of(d);

	if (!x || !_pmg_valid(d, acc))
		return bad_window(d, acc);
	if (_pmg_fast)
		return _pmg_open_edge(d, acc, _pmg_rdpkru, _pmg_wrpkru);
	return mp_edge(x, acc, true, __builtin_return_address(0));
}

PMG_API int _pmg_close_slow(struct pmg_domain *d, int acc)
{
	struct _pmg_dom *x = dom_of(d);

	if (!x || !_pmg_valid(d, acc))
		return bad_window(d, acc);
	if (_pmg_fast)
		return _pmg_close_edge(d, acc, _pmg_rdpkru, _pmg_wrpkru);
	return mp_edge(x, acc, false, __builtin_return_address(0));
}

PMG_API int _pmg_overflow(struct pmg_domain *d)
{
	(void)d;
	return _pmg_err_s(-EOVERFLOW, "windows on this domain nest deeper "
			  "than 65535 in this thread");
}

PMG_API int _pmg_unbalanced(struct pmg_domain *d, int acc, void *caller)
{
	_PMG_STAT_INC(unbalanced);
	_pmg_report_unbalanced(d, acc, caller);
	return _pmg_err_s(-EPERM, "unbalanced close: no window of that kind "
			  "is open on this domain in this thread");
}

PMG_API int pmg_map_local(const void *addr, int acc)
{
	struct pmg_domain *d = pmg_lookup(addr, NULL, NULL);
	int rc;

	if (!d)
		return 0;
	rc = pmg_open(d, acc);
	return rc ? rc : 1;
}

PMG_API int pmg_unmap_local(const void *addr, int acc)
{
	struct pmg_domain *d = pmg_lookup(addr, NULL, NULL);
	int rc;

	if (!d)
		return 0;
	rc = pmg_close(d, acc);
	return rc ? rc : 1;
}

PMG_API int pmg_map(const void *addr)
{
	struct pmg_domain *d = pmg_lookup(addr, NULL, NULL);

	if (!d)
		return 0;
	_PMG_STAT_INC(long_term_maps);
	_pmg_report_long_term(addr, d, __builtin_return_address(0));
	return 1;
}

/*
 * Bridge from the core's callback to the public one.  Each key's
 * (callback, argument) pair is immutable once published and swapped whole
 * with one atomic store, so a fault in flight sees the old pair or the new
 * one, never a mix or a half-cleared one.  Replaced pairs are retired, not
 * freed: a handler may still be reading one.
 */
struct ucb {
	pmg_fault_cb cb;
	void *arg;
};

static bool cb_bridge(const struct pmg_fault *f, void *unused)
{
	struct ucb *u = __atomic_load_n(&ucbs[f->key], __ATOMIC_ACQUIRE);
	struct pmg_fault_info fi;

	(void)unused;
	if (!u)
		return false;
	_pmg_fault_info(f, (pid_t)syscall(SYS_gettid), 0, &fi);
	return u->cb(&fi, u->arg);
}

PMG_API int pmg_domain_set_callback(struct pmg_domain *dom, pmg_fault_cb cb,
				    void *arg)
{
	struct ucb *u = NULL;
	struct _pmg_dom *d;
	int rc;

	if (cb) {
		u = malloc(sizeof(*u));
		if (!u)
			return _pmg_err(-ENOMEM, "pmg_domain_set_callback: "
					"out of memory");
		u->cb = cb;
		u->arg = arg;
	}
	pthread_mutex_lock(&_pmg.lock);
	d = dom_of(dom);
	if (!d) {
		pthread_mutex_unlock(&_pmg.lock);
		free(u);
		return _pmg_err(-EINVAL, "pmg_domain_set_callback: not a "
				"live domain");
	}
	__atomic_store_n(&ucbs[d->key], u, __ATOMIC_RELEASE);
	rc = pmg_core_set_callback(&_pmg.core, (unsigned)d->key, cb_bridge,
				   NULL);
	pthread_mutex_unlock(&_pmg.lock);
	return rc;
}
