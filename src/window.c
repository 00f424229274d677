// SPDX-License-Identifier: MIT
/*
 * The out-of-line window paths.  The PKU fast path is inline in pmguard.h;
 * it comes here for what it cannot do itself:
 *  - the mprotect backend's windows: process-wide counts per domain, and
 *    page permissions that follow them (mp_edge());
 *  - validation failures, overflow and unbalanced closes;
 *  - a thread that ends with windows open (thread.c's destructor);
 *  - windows opened in a fresh (signal-handler) context on PKU, below;
 * and the kmap analogs that find a window's domain by address.
 *
 * Windows opened in a fresh context: a signal handler starts with the
 * kernel's default PKRU, not with the rights of the code it interrupted (the seeds give each exception a fresh
 * PKS state the same way).  If that code held a window, this thread's
 * counts say "open" while the handler's register says "closed".  The
 * inline edge notices the mismatch and comes here: the handler gets its own
 * window, and the close that matches it puts the handler's previous rights
 * back instead of keeping the interrupted context's.  Contexts nest LIFO
 * (a handler finishes before the code it interrupted resumes), so a small
 * per-thread stack is enough.  AS-safe.
 */
#define _GNU_SOURCE
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
	unsigned rights = pmg_window_rights(_pmg.core.key[k].dflt,
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

/* ---------------------------------------------- the mprotect backend */

/* The rights a domain's pages have on the mprotect backend: process-wide
 * window counts over its default.  AS-safe (reads only). */
unsigned _pmg_process_rights(const struct _pmg_dom *d)
{
	unsigned dflt = _pmg_default_rights(d);

	/* relaxed: the fault handlers read these while the lock's holder
	 * changes them.  Lazy write windows (lazywin.c) leave the pages at
	 * the other rights and grant them one by one, unless the window
	 * opened the whole domain (full record, SIGSEGV blocked): then
	 * every edge that sets the pages from these rights (a read
	 * window's, a range added, the program's mprotect()) must leave
	 * them read-write, as a thread blocking SIGSEGV cannot fault. */
	if (__atomic_load_n(&d->gw, __ATOMIC_RELAXED) &&
	    (!_pmg_lazy || _pmg_lazy_full(d->key)))
		return pmg_window_rights(dflt, PMG_ACC_WRITE);
	if (__atomic_load_n(&d->gr, __ATOMIC_RELAXED))
		return pmg_window_rights(dflt, PMG_ACC_READ);
	return dflt;
}

enum edge { EDGE_OPEN, EDGE_CLOSE };

/* Window edge on the mprotect backend: process-wide, under the lock. */
static int mp_edge(struct _pmg_dom *d, int acc, enum edge edge, void *caller)
{
	bool open = edge == EDGE_OPEN;
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
	before = _pmg_process_rights(d);
	__atomic_store_n(g, open ? *g + 1 : *g - 1, __ATOMIC_RELAXED);
	after = _pmg_process_rights(d);
	if (before != after)
		rc = _pmg.prim->set_rights((int)key, after);
	/* (before != after: the whole domain was just set to after) */
	if (!rc && !open && acc && !*g) /* the last write window */
		_pmg_lazy_close((int)key, before != after);
	if (!rc && open && acc) /* SIGSEGV blocked: whole */
		_pmg_lazy_open((int)key);
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
	pid_t tid;

	/* Nothing open: nothing to do, no lock taken.  thread.c calls this
	 * in each of glibc's destructor rounds; a sanitizer's runtime may
	 * have ended the thread's own state by the last ones (TSan crashed
	 * in its mutex interceptor there). */
	for (k = 1; k < PMG_NR_KEYS && !(t->w[k] | t->r[k]); k++)
		;
	if (k == PMG_NR_KEYS) {
		t->w[0] = 0;
		return;
	}
	tid = (pid_t)syscall(SYS_gettid);
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
		before = _pmg_process_rights(d);
		__atomic_store_n(&d->gw, d->gw - (w < d->gw ? w : d->gw),
				 __ATOMIC_RELAXED);
		__atomic_store_n(&d->gr, d->gr - (r < d->gr ? r : d->gr),
				 __ATOMIC_RELAXED);
		after = _pmg_process_rights(d);
		if (before != after)
			(void)_pmg.prim->set_rights((int)k, after);
		if (w && !d->gw)
			_pmg_lazy_close((int)k, before != after);
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

/* pmg_open()/pmg_close() when the inline edge cannot decide: a bad
 * window, or the mprotect backend. */
static int slow_edge(struct pmg_domain *d, int acc, enum edge edge,
		     void *caller)
{
	struct _pmg_dom *x = _pmg_dom_of(d);

	if (!x || !_pmg_valid(d, acc))
		return bad_window(d, acc);
	if (_pmg_fast && edge == EDGE_OPEN)
		return _pmg_open_edge(d, acc, _pmg_rdpkru, _pmg_wrpkru);
	if (_pmg_fast)
		return _pmg_close_edge(d, acc, _pmg_rdpkru, _pmg_wrpkru);
	return mp_edge(x, acc, edge, caller);
}

PMG_API int _pmg_open_slow(struct pmg_domain *d, int acc)
{
	return slow_edge(d, acc, EDGE_OPEN, __builtin_return_address(0));
}

PMG_API int _pmg_close_slow(struct pmg_domain *d, int acc)
{
	return slow_edge(d, acc, EDGE_CLOSE, __builtin_return_address(0));
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
