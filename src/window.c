// SPDX-License-Identifier: MIT
/*
 * The out-of-line window paths.  The PKU fast path is inline in pmguard.h;
 * it comes here for what it cannot do itself:
 *  - windows on a domain kept by page protection (the mprotect backend;
 *    on PKU a virtual domain that got no key): process-wide counts per
 *    domain, and page permissions that follow them (paged_edge());
 *  - a virtual domain's first window: its key (keys.c);
 *  - a thread's first window on PKU: its counts registered (keys.c);
 *  - validation failures, overflow and unbalanced closes;
 *  - a thread that ends with windows open (thread.c's destructor);
 *  - windows opened in a fresh (signal-handler) context on PKU, below;
 * and the kmap analogs that find a window's domain by address.
 *
 * Windows opened in a fresh context: a signal handler starts with the
 * kernel's default PKRU, not with the rights of the code it interrupted
 * (V8 gives each exception a fresh PKS state the same way).  If that code held a window, this thread's
 * counts say "open" while the handler's register says "closed".  The
 * inline edge notices the mismatch and comes here: the handler gets its own
 * window, and the close that matches it puts the handler's previous rights
 * back instead of keeping the interrupted context's.  Contexts nest LIFO
 * (a handler finishes before the code it interrupted resumes), so a small
 * per-thread stack is enough.  AS-safe.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

#define PMG_CTX_MAX 16
#define PMG_STR_(x) #x
#define PMG_STR(x) PMG_STR_(x)

static __thread struct {
	uint8_t key;
	uint8_t acc;
	uint16_t level;		/* the count this context's open reached */
	uint32_t bits;		/* the key's register bits before it */
} ctx[PMG_CTX_MAX] __attribute__((tls_model("initial-exec")));

PMG_API int _pmg_ctx_open(struct pmg_domain *d, int acc, uint32_t reg)
{
	struct _pmg_ws *t = &_pmg_tls;
	unsigned k = (unsigned)d->_key, depth = t->w[0];
	uint16_t *n = acc ? &t->w[k] : &t->r[k];
	unsigned rights = pmg_window_rights(_pmg.keytab.key[k].dflt,
					    (unsigned)acc);
	uint32_t nv;

	if (depth >= PMG_CTX_MAX)
		return _pmg_err_s(-EOVERFLOW, "windows opened in more than "
				  PMG_STR(PMG_CTX_MAX) " nested signal "
				  "handlers");
	ctx[depth].key = (uint8_t)k;
	ctx[depth].acc = (uint8_t)acc;
	ctx[depth].level = (uint16_t)(*n + 1);
	ctx[depth].bits = reg & d->_mask;
	t->w[0] = (uint16_t)(depth + 1);
	++*n;
	nv = pmg_pkval_update(reg, k, rights);
	if (nv != reg)
		_pmg_wrpkru(nv);
	return 0;
}

PMG_API bool _pmg_ctx_close(struct pmg_domain *d, int acc)
{
	struct _pmg_ws *t = &_pmg_tls;
	unsigned k = (unsigned)d->_key, depth = t->w[0];
	uint16_t *n = acc ? &t->w[k] : &t->r[k];
	uint32_t v, nv;

	if (!depth || ctx[depth - 1].key != k ||
	    ctx[depth - 1].acc != (uint8_t)acc || ctx[depth - 1].level != *n)
		return false;
	--*n;
	t->w[0] = (uint16_t)(depth - 1);
	v = _pmg_rdpkru();
	nv = (v & ~d->_mask) | ctx[depth - 1].bits;
	if (nv != v)
		_pmg_wrpkru(nv);
	return true;
}

/* ------------------------------------------------ page protection */

/*
 * Windows on a domain kept by page protection (every domain on the
 * mprotect backend; a virtual one on PKU, one with no key): the pages
 * follow process-wide counts (gw, gr), and each thread's own windows are
 * counted here, by (thread, domain), for unbalanced closes and for a
 * thread that ends with windows open.  The thread is named by the address
 * of its _pmg_tls (unique among live threads).  Under the lock.
 */
struct twin {
	const struct _pmg_ws *t;
	int id;
	uint16_t w, r;
};
static struct twin *twins;
static size_t ntwins, captwins;

/* The calling thread's entry for @id; with @add, made if missing (NULL:
 * no memory).  Lock held. */
static struct twin *twin_of(int id, bool add)
{
	const struct _pmg_ws *me = &_pmg_tls;
	size_t i;

	for (i = 0; i < ntwins; i++)
		if (twins[i].t == me && twins[i].id == id)
			return &twins[i];
	if (!add)
		return NULL;
	if (ntwins == captwins) {
		size_t n = captwins ? 2 * captwins : 16;
		struct twin *m = realloc(twins, n * sizeof(*m));

		if (!m)
			return NULL;
		twins = m;
		captwins = n;
	}
	twins[ntwins] = (struct twin){ .t = me, .id = id };
	__atomic_store_n(&ntwins, ntwins + 1, __ATOMIC_RELAXED);
	return &twins[ntwins - 1];
}

/* ntwins: atomic stores (the lock held), as a thread that ends looks at
 * it without the lock (_pmg_release_windows()) */
static void twin_drop(struct twin *e)
{
	size_t n = ntwins - 1;

	*e = twins[n];
	__atomic_store_n(&ntwins, n, __ATOMIC_RELAXED);
}

/* Does the calling thread hold a page-protection window?  Lock held. */
static bool twin_mine(void)
{
	size_t i;

	for (i = 0; i < ntwins; i++)
		if (twins[i].t == &_pmg_tls)
			return true;
	return false;
}

enum edge { EDGE_OPEN, EDGE_CLOSE };

/* A page-protection window edge, process-wide (lock held).  -EPERM for
 * an unbalanced close, -EOVERFLOW, -ENOMEM, or what mprotect() said
 * (the edge undone) -- without a message for the first two. */
static int paged_edge_locked(struct _pmg_dom *d, int acc, enum edge edge)
{
	bool open = edge == EDGE_OPEN;
	unsigned *g = acc ? &d->gw : &d->gr;
	unsigned before, after;
	struct twin *e;
	uint16_t *n;
	int rc = 0;

	e = twin_of(d->id, open);
	if (!e)
		return open ? _pmg_err(-ENOMEM, "pmg_open: out of memory")
			    : -EPERM;
	n = acc ? &e->w : &e->r;
	if (open && *n == UINT16_MAX)
		return -EOVERFLOW;
	if (!open && !*n)
		return -EPERM;
	if (open && acc && _pmg_lazy && _pmg_lazy_prepare(d->id))
		return _pmg_err(-ENOMEM, "pmg_open: out of memory for the "
					 "lazy window's record");
	if (open) {
		++*n;
		_pmg_tls.r[0] |= _PMG_TLS_PAGED; /* its exit looks here */
	} else {
		--*n;
	}
	before = _pmg_process_rights(d);
	__atomic_store_n(g, open ? *g + 1 : *g - 1, __ATOMIC_RELAXED);
	after = _pmg_process_rights(d);
	if (before != after)
		rc = _pmg_paged_set(d->id, after);
	/* (before != after: the whole domain was just set to after) */
	if (!rc && !open && acc && !*g) /* the last write window */
		_pmg_lazy_close(d->id, before != after);
	if (!rc && open && acc) /* SIGSEGV blocked: whole */
		_pmg_lazy_open(d->id);
	if (rc) {
		/* undo: the edge did not happen */
		if (open) {
			__atomic_store_n(g, *g - 1, __ATOMIC_RELAXED);
			--*n;
		} else {
			__atomic_store_n(g, *g + 1, __ATOMIC_RELAXED);
			++*n;
		}
		(void)_pmg_paged_set(d->id, before);
		rc = _pmg_err(rc, "mprotect for a window on '%s': %s",
			      d->ck.name, strerror(-rc));
	}
	if (!e->w && !e->r)
		twin_drop(e);
	return rc;
}

static int paged_edge(struct _pmg_dom *d, int acc, enum edge edge, void *caller)
{
	int rc;

	if (edge == EDGE_OPEN)
		_pmg_thread_arm(); /* a thread ending inside it */
	pthread_mutex_lock(&_pmg.lock);
	rc = paged_edge_locked(d, acc, edge);
	pthread_mutex_unlock(&_pmg.lock);
	if (rc == -EPERM)
		return _pmg_unbalanced(d->h, acc, caller);
	if (rc == -EOVERFLOW)
		return _pmg_overflow(d->h);
	return rc;
}

/* Close the calling thread's page-protection windows (lock held); each
 * domain it held goes into @gone. */
struct gone {
	char name[PMG_KEY_NAME_MAX];
	unsigned w, r;
};

static unsigned paged_release(struct gone *gone, unsigned max)
{
	const struct _pmg_ws *me = &_pmg_tls;
	unsigned n = 0;
	size_t i;

	for (i = 0; i < ntwins;) {
		struct twin *e = &twins[i];
		struct _pmg_dom *d = &_pmg.dom[e->id];
		unsigned before, after;

		if (e->t != me) {
			i++;
			continue;
		}
		if (n < max) {
			_pmg_strlcpy(gone[n].name,
				     d->live ? d->ck.name : "(deleted)",
				     sizeof(gone[n].name));
			gone[n].w = e->w;
			gone[n].r = e->r;
			n++;
		}
		if (d->live) {
			before = _pmg_process_rights(d);
			__atomic_store_n(&d->gw,
					 d->gw - (e->w < d->gw ? e->w : d->gw),
					 __ATOMIC_RELAXED);
			__atomic_store_n(&d->gr,
					 d->gr - (e->r < d->gr ? e->r : d->gr),
					 __ATOMIC_RELAXED);
			after = _pmg_process_rights(d);
			if (before != after)
				(void)_pmg_paged_set(d->id, after);
			if (e->w && !d->gw)
				_pmg_lazy_close(d->id, before != after);
		}
		twin_drop(e); /* the last one moved here: look at it */
	}
	return n;
}

/* fork child (lock held by the atfork handlers' thread): the windows
 * are the forking thread's copies (its pmg_close() of them is
 * unbalanced there): page-protection ones closed, pages at defaults. */
void _pmg_windows_fork_child(void)
{
	int id;

	__atomic_store_n(&ntwins, 0, __ATOMIC_RELAXED);
	for (id = 1; id < PMG_DOM_MAX; id++) {
		struct _pmg_dom *d = &_pmg.dom[id];

		if (!d->live || (!d->gw && !d->gr))
			continue;
		__atomic_store_n(&d->gw, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&d->gr, 0, __ATOMIC_RELAXED);
		_pmg_lazy_reset(id); /* the pages: just below */
		(void)_pmg_paged_set(id, d->ck.dflt);
	}
}

/*
 * The calling thread ends with windows open (thread.c's destructor): close
 * them all.  Its page-protection windows leave the process-wide counts and
 * the pages get the rights the remaining windows say; its keyed ones die
 * with its register.  Each domain it held is reported once, here.  Then
 * the thread is forgotten (keys.c: its counts are about to be freed).
 */
void _pmg_release_windows(void)
{
	struct _pmg_ws *t = &_pmg_tls;
	struct gone gone[PMG_NR_KEYS + 16];
	unsigned k, n = 0, i;
	bool any = false;
	pid_t tid;

	/* Nothing open: nothing to do, no lock taken (but the thread's
	 * registration).  thread.c calls this in each of glibc's
	 * destructor rounds; a sanitizer's runtime may have ended the
	 * thread's own state by the last ones (TSan crashed in its mutex
	 * interceptor there). */
	for (k = 1; k < PMG_NR_KEYS && !(t->w[k] | t->r[k]); k++)
		;
	if (k < PMG_NR_KEYS)
		any = true;
	/* page-protection windows: only a thread that opened one looks
	 * (the lock) */
	if (!any && (t->r[0] & _PMG_TLS_PAGED)) {
		pthread_mutex_lock(&_pmg.lock);
		any = twin_mine();
		pthread_mutex_unlock(&_pmg.lock);
		if (!any)
			t->r[0] &= (uint16_t)~_PMG_TLS_PAGED;
	}
	if (!any) {
		t->w[0] = 0;
		_pmg_thread_unregister();
		return;
	}
	tid = (pid_t)syscall(SYS_gettid);
	pthread_mutex_lock(&_pmg.lock);
	for (k = 1; k < PMG_NR_KEYS; k++) {
		int id = _pmg.keyown[k];
		unsigned w = t->w[k], r = t->r[k];

		if (!(w | r))
			continue;
		t->w[k] = t->r[k] = 0;
		_pmg_strlcpy(gone[n].name,
			     id ? _pmg.dom[id].ck.name : "(deleted)",
			     sizeof(gone[n].name));
		gone[n].w = w;
		gone[n].r = r;
		n++;
	}
	n += paged_release(gone + n,
			   (unsigned)(sizeof(gone) / sizeof(gone[0])) - n);
	t->r[0] &= (uint16_t)~_PMG_TLS_PAGED;
	t->w[0] = 0;
	pthread_mutex_unlock(&_pmg.lock);
	_pmg_thread_unregister();
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

/*
 * PMG_WRITE_SCOPE() could not open its window: the code after the guard
 * must not run without it (pmguard.h), so say where and why, and abort.
 * AS-safe (write(2), abort()).
 */
PMG_API void _pmg_scope_abort(struct pmg_domain *d, int rc, const char *where)
{
	struct _pmg_buf b = { .n = 0 };
	const char *name = NULL;

	if (d && d->_self == d)
		name = pmg_domain_name(d);
	_pmg_buf_str(&b, "pmguard: PMG_WRITE_SCOPE at ");
	_pmg_buf_str(&b, where ? where : "?");
	_pmg_buf_str(&b, ": no write window on domain ");
	if (name) {
		_pmg_buf_str(&b, "'");
		_pmg_buf_str(&b, name);
		_pmg_buf_str(&b, "'");
	} else {
		_pmg_buf_hex(&b, (uintptr_t)d);
	}
	_pmg_buf_str(&b, " (error ");
	_pmg_buf_dec(&b, rc);
	_pmg_buf_str(&b, ": ");
	_pmg_buf_str(&b, pmg_errormsg());
	_pmg_buf_str(&b, "): abort\n");
	_pmg_buf_flush(&b, 2);
	abort();
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

static bool keyed(const struct pmg_domain *d)
{
	int k = __atomic_load_n(&d->_key, __ATOMIC_ACQUIRE);

	return k >= 1 && k < PMG_NR_KEYS;
}

/* pmg_open() when the inline edge cannot do it: a bad window, the
 * mprotect backend, a thread not registered yet, a domain without key. */
PMG_API int _pmg_open_slow(struct pmg_domain *d, int acc)
{
	void *caller = __builtin_return_address(0);
	struct _pmg_dom *x = _pmg_dom_of(d);
	int rc;

	if (!x || (acc & ~1))
		return bad_window(d, acc);
	if (!_pmg_fast)
		return paged_edge(x, acc, EDGE_OPEN, caller);
	/* the thread's counts known first: then no key moves under them */
	if (!(_pmg_tls.r[0] & _PMG_TLS_REG) && (rc = _pmg_thread_register()))
		return rc;
	if (keyed(d))
		return _pmg_open_edge(d, acc, _pmg_rdpkru, _pmg_wrpkru);
	_pmg_thread_arm();
	pthread_mutex_lock(&_pmg.lock);
	if (!x->live || x->h != d) {
		pthread_mutex_unlock(&_pmg.lock);
		return bad_window(d, acc);
	}
	/* a virtual domain: a key, unless page-protection windows are open
	 * on it (they stay process-wide until the last closes) */
	if (!x->hw && !x->gw && !x->gr) {
		char msg[PMG_ERRMSG_MAX];

		_pmg_err_save(msg, sizeof(msg));
		rc = _pmg_key_get(x, true);
		if (rc && rc != -ENOSPC) {
			pthread_mutex_unlock(&_pmg.lock);
			return rc;
		}
		if (rc) /* no key: a page-protection window, no failure */
			_pmg_err_restore(msg);
	}
	if (x->hw) {
		pthread_mutex_unlock(&_pmg.lock);
		return _pmg_open_edge(d, acc, _pmg_rdpkru, _pmg_wrpkru);
	}
	/* no key to be had: a page-protection window, process-wide */
	__atomic_add_fetch(&_pmg_keys_paged, 1, __ATOMIC_RELAXED);
	rc = paged_edge_locked(x, acc, EDGE_OPEN);
	pthread_mutex_unlock(&_pmg.lock);
	if (rc == -EOVERFLOW)
		return _pmg_overflow(d);
	return rc;
}

PMG_API int _pmg_close_slow(struct pmg_domain *d, int acc)
{
	void *caller = __builtin_return_address(0);
	struct _pmg_dom *x = _pmg_dom_of(d);

	if (!x || (acc & ~1))
		return bad_window(d, acc);
	/* a domain's windows are all keyed or all page-protection: its
	 * key does not move while one is open */
	if (_pmg_fast && keyed(d))
		return _pmg_close_edge(d, acc, _pmg_rdpkru, _pmg_wrpkru);
	if (_pmg_fast && __atomic_load_n(&x->hw, __ATOMIC_ACQUIRE)) {
		/* _key 0 with a key held: an eviction is trying the domain
		 * (keys.c) and, finding this window, gives the key back;
		 * it does so under the lock: look again after it */
		pthread_mutex_lock(&_pmg.lock);
		pthread_mutex_unlock(&_pmg.lock);
		if (keyed(d))
			return _pmg_close_edge(d, acc, _pmg_rdpkru,
					       _pmg_wrpkru);
	}
	return paged_edge(x, acc, EDGE_CLOSE, caller);
}

/*
 * The inline open counted a window on key @k after the key was taken
 * from @d (an eviction between its first read of _key and its count:
 * pmguard.h): undo the edge, as if it had not happened, and open again
 * the slow way.  AS-safe as far as pmg_open() is.
 */
PMG_API int _pmg_open_raced(struct pmg_domain *d, int acc, unsigned k)
{
	struct _pmg_ws *t = &_pmg_tls;
	struct _pmg_dom *x = _pmg_dom_of(d);
	uint16_t *n = acc ? &t->w[k] : &t->r[k];
	unsigned dflt = x ? x->ck.dflt : PMG_RIGHTS_AD;
	uint32_t v = _pmg_rdpkru(), nv;

	--*n;
	nv = pmg_pkval_update(v, k,
			      t->w[k] | t->r[k] ? _pmg_ws_rights(t, k, dflt)
						: dflt);
	if (nv != v)
		_pmg_wrpkru(nv);
	__atomic_add_fetch(&_pmg_keys_raced, 1, __ATOMIC_RELAXED);
	return _pmg_open_slow(d, acc);
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

/* A window edge on the domain protecting @addr: 1, 0 if none does, or the
 * edge's error. */
static int edge_at(const void *addr, int acc, enum edge edge)
{
	struct pmg_domain *d = pmg_lookup(addr, NULL, NULL);
	int rc;

	if (!d)
		return 0;
	rc = edge == EDGE_OPEN ? pmg_open(d, acc) : pmg_close(d, acc);
	return rc ? rc : 1;
}

PMG_API int pmg_map_local(const void *addr, int acc)
{
	return edge_at(addr, acc, EDGE_OPEN);
}

PMG_API int pmg_unmap_local(const void *addr, int acc)
{
	return edge_at(addr, acc, EDGE_CLOSE);
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
