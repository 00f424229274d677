// SPDX-License-Identifier: MIT
/*
 * Library start-up: options from the environment, backend choice, the
 * fault handlers and the fork and thread-exit hooks (pmg_init()); the
 * entry points that start the library on first use; version and info.
 *
 * This file is the top of the library's object graph: pmg_init() pulls
 * in fault.c and thread.c, whose fork handlers call into nearly every
 * layer, so nothing below calls up here.  The public calls that start
 * the library without pmg_init() (pmg_domain_new(), pmg_pool_open(),
 * pmg_pool_create(), pmg_key_stats_get(), pmg_get_info()) are defined
 * here for that reason: each checks its arguments with its layer's
 * function as before, starts the library, then calls the layer.  A
 * program linked with the static library that calls only one of them
 * still gets the handlers: the call is the link to init.o.
 */
#define _GNU_SOURCE
#include <execinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "options.h"

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

static int ensure_init(void)
{
	return __atomic_load_n(&_pmg.inited, __ATOMIC_ACQUIRE) ? 0 : pmg_init();
}

static int get_info(struct pmg_info *info)
{
	struct _pmg_cpu cpu;
	int rc;

	memset(info, 0, sizeof(*info));
	rc = ensure_init();
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

/* ------------------------------------ entry points that start the library */

PMG_API int pmg_domain_new(struct pmg_domain **dp, const char *name,
			   unsigned flags)
{
	int rc = _pmg_domain_args(dp, name, flags);

	if (!rc)
		rc = ensure_init();
	return rc ? rc : _pmg_domain_new_at(dp, name, flags, NULL);
}

PMG_API int pmg_pool_open(struct pmg_pool **pp, const char *path,
			  const struct pmg_pool_config *cfg)
{
	int rc = _pmg_pool_checks(pp, path, "pmg_pool_open");

	if (!rc)
		rc = ensure_init();
	return rc ? rc : _pmg_pool_open(pp, path, cfg);
}

PMG_API int pmg_pool_create(struct pmg_pool **pp, const char *path,
			    const struct pmg_pool_config *cfg)
{
	int rc = _pmg_pool_checks(pp, path, "pmg_pool_create");

	if (!rc)
		rc = ensure_init();
	return rc ? rc : _pmg_pool_create(pp, path, cfg);
}

PMG_API int pmg_key_stats_get(struct pmg_key_stats *st, size_t size)
{
	struct pmg_key_stats s;
	int rc = _pmg_out_check("pmg_key_stats_get", st, size,
				PMG_KEY_STATS_SIZE_0_2, false);

	if (rc)
		return rc;
	if (ensure_init()) {
		memset(&s, 0, sizeof(s));
		rc = _pmg_err_prefix(-EINVAL, "pmg_key_stats_get");
	} else {
		rc = _pmg_key_stats_get(&s);
	}
	_pmg_out_copy(st, size, &s, sizeof(s));
	return rc;
}
