// SPDX-License-Identifier: MIT
/*
 * What steers the fault path from the program: the per-domain callbacks
 * (pmg_domain_set_callback()), the observer (pmg_set_fault_observer()),
 * the fault mode (pmg_set_fault_mode()) and the report fd
 * (pmg_set_report_fd()); and the public view of a fault they are given
 * (struct pmg_fault_info).  The handlers (fault.c) and contain's undo
 * (contain.c) read them; domain.c clears a new domain's callback.  Below
 * all three, so that none depends on the handlers to reach them.
 *
 * The readers, the mode and report-fd setters are async-signal-safe
 * (atomic loads and stores); the callback and observer setters are not:
 * they allocate, or take the library lock.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hooks.h"
#include "internal.h"

/* The public view of a core fault, for callbacks and observers. */
static void fault_info(const struct pmg_fault *f, pid_t tid, int action,
		       struct pmg_fault_info *fi)
{
	fi->addr = (void *)f->addr;
	fi->ip = (void *)f->ip;
	fi->domain = _pmg.dom[f->dom].h;
	/* pmg_domain_key()'s answer: a key (PKU), none (a virtual domain,
	 * page protection), or the domain's number (mprotect) */
	fi->key = !f->no_sync ? (int)f->key : _pmg.prim->paged_key(f->dom);
	fi->access = (int)f->acc;
	fi->pkru = f->saved_pkval;
	fi->tid = tid;
	fi->mode = (int)f->mode;
	fi->action = action;
	fi->si_code = f->code;
}

/*
 * A (function, argument) pair the fault handler reads: a domain's
 * callback, the observer.  Immutable once published and swapped whole with
 * one atomic store, so a fault in flight sees the old pair or the new one,
 * never a mix or a half-cleared one.  A replaced pair is retired, never
 * freed: a handler may still be reading it.
 */
struct hook {
	union {
		pmg_fault_cb cb;
		pmg_fault_observer observer;
	} fn;
	void *arg;
};

/* Publish a copy of @h (NULL: none) in @slot.  0 or -ENOMEM. */
static int hook_publish(struct hook **slot, const struct hook *h)
{
	struct hook *n = NULL;

	if (h) {
		n = malloc(sizeof(*n));
		if (!n)
			return -ENOMEM;
		*n = *h;
	}
	__atomic_store_n(slot, n, __ATOMIC_RELEASE);
	return 0;
}

static struct hook *domain_cb[PMG_DOM_MAX];
static struct hook *observer;

/* The core's callback for every domain: calls the domain's public one. */
static bool cb_bridge(const struct pmg_fault *f)
{
	struct hook *h = __atomic_load_n(&domain_cb[f->dom], __ATOMIC_ACQUIRE);
	struct pmg_fault_info fi;

	if (!h)
		return false;
	fault_info(f, (pid_t)syscall(SYS_gettid), 0, &fi);
	return h->fn.cb(&fi, h->arg);
}

/* A new domain in slot @id starts without the old one's callback (lock
 * held). */
void _pmg_fault_cb_clear(int id)
{
	__atomic_store_n(&domain_cb[id], NULL, __ATOMIC_RELEASE);
}

PMG_API int pmg_domain_set_callback(struct pmg_domain *dom, pmg_fault_cb cb,
				    void *arg)
{
	struct hook h = { .fn.cb = cb, .arg = arg };
	struct _pmg_dom *d;
	int rc;

	pthread_mutex_lock(&_pmg.lock);
	d = _pmg_dom_of(dom);
	if (!d) {
		pthread_mutex_unlock(&_pmg.lock);
		return _pmg_err(-EINVAL, "pmg_domain_set_callback: not a "
					 "live domain");
	}
	rc = hook_publish(&domain_cb[d->id], cb ? &h : NULL);
	if (rc)
		rc = _pmg_err(rc, "pmg_domain_set_callback: out of memory");
	else
		__atomic_store_n(&d->ck.cb, cb_bridge, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&_pmg.lock);
	return rc;
}

PMG_API int pmg_set_fault_observer(pmg_fault_observer fn, void *arg)
{
	struct hook h = { .fn.observer = fn, .arg = arg };

	if (hook_publish(&observer, fn ? &h : NULL))
		return _pmg_err_s(-ENOMEM, "pmg_set_fault_observer: "
					   "out of memory");
	return 0;
}

void _pmg_fault_notify(const struct pmg_fault *f, pid_t tid, int action)
{
	struct hook *o = __atomic_load_n(&observer, __ATOMIC_ACQUIRE);
	struct pmg_fault_info fi;

	if (!o)
		return;
	fault_info(f, tid, action, &fi);
	o->fn.observer(&fi, o->arg);
}

PMG_API int pmg_set_fault_mode(int mode)
{
	if (mode != PMG_FAULT_STRICT && mode != PMG_FAULT_RELAXED &&
	    mode != PMG_FAULT_AUDIT && mode != PMG_FAULT_CONTAIN)
		/* AS-safe: a constant (formatting allocates the buffer) */
		return _pmg_err_s(-EINVAL,
				  "pmg_set_fault_mode: not a fault "
				  "mode: must be PMG_FAULT_STRICT, _RELAXED, "
				  "_AUDIT or _CONTAIN");
	__atomic_store_n(&_pmg.mode, mode, __ATOMIC_RELAXED);
	/* wins over PMGUARD_FAULT_MODE; atomic: AS-safe */
	__atomic_store_n(&_pmg.mode_set, true, __ATOMIC_RELEASE);
	return 0;
}

PMG_API int pmg_set_report_fd(int fd)
{
	if (fd < -1)
		fd = -1;
	/* wins over PMGUARD_REPORT_FD; atomic: AS-safe */
	__atomic_store_n(&_pmg.fd_set, true, __ATOMIC_RELEASE);
	return _pmg_report_fd_set(fd);
}
