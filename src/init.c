// SPDX-License-Identifier: MIT
/*
 * Library start-up: options from the environment, backend choice, error
 * messages, version and info.
 */
#define _GNU_SOURCE
#include <execinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "options.h"

struct _pmg_state _pmg = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.mode = PMG_FAULT_RELAXED,
	.report_fd = 2,
};

PMG_API int _pmg_fast;
PMG_API __thread struct _pmg_ws _pmg_tls
	__attribute__((tls_model("initial-exec"), aligned(64)));

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

PMG_API const char *pmg_version(void)
{
	return PMG_VERSION_STRING;
}

PMG_API const char *pmg_backend_name(int backend)
{
	switch (backend) {
	case PMG_BACKEND_PKU:
		return "pku";
	case PMG_BACKEND_MPROTECT:
		return "mprotect";
	}
	return "none";
}

PMG_API int pmg_backend(void)
{
	const struct _pmg_prim *p = __atomic_load_n(&_pmg.prim, __ATOMIC_ACQUIRE);

	return p ? p->id : PMG_BACKEND_NONE;
}

/* The rights (PMG_RIGHTS_*: two bits, not shifted into the register) of
 * @d's key with no window open. */
uint32_t _pmg_default_rights(const struct _pmg_dom *d)
{
	return d->ck.dflt;
}

PMG_API int pmg_init(void)
{
	struct _pmg_opts o;
	const struct _pmg_prim *prim = NULL;
	char msg[PMG_ERRMSG_MAX];
	int rc;

	if (__atomic_load_n(&_pmg.inited, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&_pmg.lock);
	if (_pmg.inited) {
		pthread_mutex_unlock(&_pmg.lock);
		return 0;
	}
	/* a successful init leaves the message as it found it (the PKU
	 * probe's "no PKU" before the mprotect fallback is not a failure) */
	_pmg_err_save(msg, sizeof(msg));
	rc = _pmg_opts_from_env(&o);
	if (rc)
		goto out;
	if (o.backend == PMG_BACKEND_PKU || o.backend == PMG_BACKEND_NONE) {
		rc = _pmg_prim_pku.probe();
		if (rc == 0)
			prim = &_pmg_prim_pku;
		else if (o.backend == PMG_BACKEND_PKU) {
			char why[200];

			_pmg_strlcpy(why, pmg_errormsg(), sizeof(why));
			_pmg_err(-ENOTSUP, "PMGUARD_BACKEND=pku, but %s", why);
			rc = -ENOTSUP;
			goto out;
		}
	}
	if (!prim) {
		rc = _pmg_prim_mprotect.probe();
		if (rc)
			goto out;
		prim = &_pmg_prim_mprotect;
	}
	/* before any domain: windows grant pages on their first write */
	_pmg_lazy = prim == &_pmg_prim_mprotect && !o.mp_eager;
	_pmg_keytab_init(&_pmg.keytab);
	_pmg.keys_max = o.keys_max;
	/* the environment, unless the API set a value before init */
	if (!__atomic_load_n(&_pmg.mode_set, __ATOMIC_ACQUIRE))
		__atomic_store_n(&_pmg.mode, o.mode, __ATOMIC_RELAXED);
	if (!__atomic_load_n(&_pmg.fd_set, __ATOMIC_ACQUIRE))
		_pmg_report_fd_set(o.report_fd);
	{
		/* backtrace() loads libgcc on first use: not in a handler. */
		void *bt[2];

		(void)backtrace(bt, 2);
	}
	/* atfork and the thread-exit key: registered once per process, a
	 * retried init does not add a second set */
	rc = _pmg_thread_hooks_install();
	if (rc)
		goto out;
	rc = _pmg_fault_install();
	if (rc)
		goto out;
	__atomic_store_n(&_pmg.prim, prim, __ATOMIC_RELEASE);
	__atomic_store_n(&_pmg_fast, prim == &_pmg_prim_pku, __ATOMIC_RELEASE);
	__atomic_store_n(&_pmg.inited, true, __ATOMIC_RELEASE);
	_pmg_err_restore(msg);
out:
	pthread_mutex_unlock(&_pmg.lock);
	return rc;
}

int _pmg_ensure_init(void)
{
	return __atomic_load_n(&_pmg.inited, __ATOMIC_ACQUIRE) ? 0 : pmg_init();
}

static int get_info(struct pmg_info *info)
{
	struct _pmg_cpu cpu;
	int rc;

	memset(info, 0, sizeof(*info));
	rc = _pmg_ensure_init();
	info->backend = pmg_backend();
	_pmg_cpu_get(&cpu);
	info->cpu_pku = cpu.pku;
	info->cpu_ospke = cpu.ospke;
	info->cpu_pks = cpu.pks;
	info->cpu_clwb = cpu.clwb;
	info->cpu_clflushopt = cpu.clflushopt;
	info->xsave_pkru_offset = cpu.xsave_pkru_off;
	info->keys_total = PMG_NR_KEYS - 1;
	pthread_mutex_lock(&_pmg.lock);
	info->keys_used = 0;
	if (_pmg.inited && _pmg.prim->thread_local) {
		int k;

		for (k = 1; k < PMG_NR_KEYS; k++)
			info->keys_used += _pmg.keyown[k] != 0;
	}
	info->keys_free = info->keys_total - info->keys_used;
	if (info->backend == PMG_BACKEND_PKU || info->cpu_ospke) {
		int n = _pmg_pku_free_keys();

		info->kernel_pkeys = n > 0 || info->keys_used > 0;
		if (info->backend == PMG_BACKEND_PKU)
			info->keys_free = n;
	}
	pthread_mutex_unlock(&_pmg.lock);
	info->fault_mode = pmg_get_fault_mode();
	return rc;
}

PMG_API int pmg_get_info(struct pmg_info *info, size_t size)
{
	struct pmg_info i;
	int rc = _pmg_out_check("pmg_get_info", info, size, PMG_INFO_SIZE_0_1,
				false);

	if (rc)
		return rc;
	rc = get_info(&i);
	_pmg_out_copy(info, size, &i, sizeof(i));
	return rc;
}
