// SPDX-License-Identifier: MIT
/*
 * The library's state: the process state (_pmg), the per-thread window
 * counts (_pmg_tls), the statistics, and the calling thread's error
 * message with the calls that set it.  A leaf of the object graph (it uses
 * only fmt.c, docs/design.md "Object dependencies"): every other file may
 * use it, it uses none of them.  The thread-end key the message buffer is
 * freed by is created by thread.c (_pmg_thread_hooks_install()); arming
 * it, which the first formatted message does, is here.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct _pmg_state _pmg = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.mode = PMG_FAULT_RELAXED,
	.report_fd = 2,
};

PMG_API int _pmg_fast;
PMG_API __thread struct _pmg_ws _pmg_tls
	__attribute__((tls_model("initial-exec"), aligned(64)));

struct pmg_stats _pmg_stats;

/*
 * The calling thread's last error message.  A constant one (the
 * async-signal-safe paths: _pmg_err_s()) is kept as a pointer; a
 * formatted one in a buffer malloc()ed on the thread's first, freed as the
 * thread ends (thread.c).  Two pointers of TLS, not PMG_ERRMSG_MAX bytes:
 * the shared library's whole TLS block must fit the static TLS that
 * dlopen() can get (see _pmg_tls above), so everything big per thread
 * lives elsewhere.  Initial-exec: no __tls_get_addr() (which may allocate)
 * on the async-signal-safe paths.
 */
#define PMG_IE __attribute__((tls_model("initial-exec")))
static __thread const char *errconst PMG_IE;
static __thread char *errbuf PMG_IE;

/* thread.c's thread-end key, set once by _pmg_thread_hooks_install();
 * whether this thread has its value set (thread_end() runs). */
pthread_key_t _pmg_end_key;
bool _pmg_end_key_ok;
__thread bool _pmg_end_armed PMG_IE;

/* Make sure thread_end() runs when the calling thread ends. */
void _pmg_thread_arm(void)
{
	if (_pmg_end_armed ||
	    !__atomic_load_n(&_pmg_end_key_ok, __ATOMIC_ACQUIRE))
		return;
	if (pthread_setspecific(_pmg_end_key, (void *)1) == 0)
		_pmg_end_armed = true;
}

/* The thread's message buffer, allocated on first use; NULL: no memory
 * (the message then says so).  Not AS-safe. */
static char *err_buf(void)
{
	if (!errbuf) {
		errbuf = malloc(PMG_ERRMSG_MAX);
		if (!errbuf) {
			errconst = "out of memory for the error message";
			return NULL;
		}
		errbuf[0] = 0;
		_pmg_thread_arm(); /* freed as the thread ends */
	}
	errconst = NULL;
	return errbuf;
}

/* The thread ends (thread.c's destructor). */
void _pmg_err_free(void)
{
	if (errbuf) /* no call at all when there is none (thread.c) */
		free(errbuf);
	errbuf = NULL;
	errconst = NULL;
}

int _pmg_err(int err, const char *fmt, ...)
{
	char *b = err_buf();
	va_list ap;

	if (!b)
		return err;
	va_start(ap, fmt);
	vsnprintf(b, PMG_ERRMSG_MAX, fmt, ap);
	va_end(ap);
	return err;
}

/*
 * Prefix the current message: "<prefix>: <what the failing call said>".
 * The old message is copied out first: formatting into the buffer that
 * supplies an argument would be an overlapping vsnprintf().
 */
int _pmg_err_prefix(int err, const char *fmt, ...)
{
	char old[PMG_ERRMSG_MAX];
	char *errmsg;
	va_list ap;
	int n;

	_pmg_strlcpy(old, pmg_errormsg(), sizeof(old));
	errmsg = err_buf();
	if (!errmsg)
		return err;
	va_start(ap, fmt);
	n = vsnprintf(errmsg, PMG_ERRMSG_MAX, fmt, ap);
	va_end(ap);
	if (n >= 0 && n < PMG_ERRMSG_MAX && old[0]) {
		_pmg_strlcpy(errmsg + n, ": ", PMG_ERRMSG_MAX - (size_t)n);
		n += 2;
		if (n < PMG_ERRMSG_MAX)
			_pmg_strlcpy(errmsg + n, old,
				     PMG_ERRMSG_MAX - (size_t)n);
	}
	return err;
}

/* Keep the message across steps whose own failures must not show. */
void _pmg_err_save(char *buf, size_t size)
{
	_pmg_strlcpy(buf, pmg_errormsg(), size);
}

void _pmg_err_restore(const char *buf)
{
	char *b;

	if (!buf[0]) {
		errconst = "";
		return;
	}
	b = err_buf();
	if (b)
		_pmg_strlcpy(b, buf, PMG_ERRMSG_MAX);
}

int _pmg_out_check(const char *fn, const void *p, size_t size, size_t first,
		   bool as_safe)
{
	(void)fn;
	if (!p)
		return as_safe ? _pmg_err_s(-EINVAL, "NULL struct pointer")
			       : _pmg_err(-EINVAL, "%s: NULL struct pointer",
					  fn);
	if (size >= first && size <= PMG_OUT_SIZE_MAX)
		return 0;
	if (as_safe)
		return _pmg_err_s(
			-EINVAL,
			size < first
				? "size smaller than the struct's first version: pass "
				  "sizeof the struct"
				: "size over 65536: pass sizeof the struct");
	return _pmg_err(-EINVAL,
			"%s: size %zu is not the size of a version "
			"of the struct (%zu to %d bytes): pass sizeof the "
			"struct",
			fn, size, first, PMG_OUT_SIZE_MAX);
}

void _pmg_out_copy(void *dst, size_t size, const void *src, size_t have)
{
	size_t n = size < have ? size : have;

	memcpy(dst, src, n);
	if (size > n)
		memset((char *)dst + n, 0, size - n);
}

/* AS-safe variant: a constant message (a string that lives for ever). */
int _pmg_err_s(int err, const char *msg)
{
	errconst = msg;
	return err;
}

PMG_API const char *pmg_errormsg(void)
{
	if (errconst)
		return errconst;
	return errbuf ? errbuf : "";
}

/* The rights (PMG_RIGHTS_*: two bits, not shifted into the register) of
 * @d's key with no window open. */
uint32_t _pmg_default_rights(const struct _pmg_dom *d)
{
	return d->ck.dflt;
}

/* ---------------------------------------- reads of the state above */

/* The _pmg_dom behind a handle, or NULL if it is not a live one of ours.
 * AS-safe. */
struct _pmg_dom *_pmg_dom_of(const struct pmg_domain *d)
{
	struct _pmg_dom *x;
	int id;

	if (!d)
		return NULL;
	id = __atomic_load_n(&d->_id, __ATOMIC_ACQUIRE);
	if (id < 1 || id >= PMG_DOM_MAX)
		return NULL;
	x = &_pmg.dom[id];
	if (!__atomic_load_n(&x->live, __ATOMIC_ACQUIRE) || x->h != d)
		return NULL;
	return x;
}

PMG_API const char *pmg_domain_name(const struct pmg_domain *d)
{
	struct _pmg_dom *x = _pmg_dom_of(d);

	return x ? x->ck.name : NULL;
}

PMG_API int pmg_get_fault_mode(void)
{
	return __atomic_load_n(&_pmg.mode, __ATOMIC_RELAXED);
}
