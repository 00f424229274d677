// SPDX-License-Identifier: MIT
/*
 * The persistence configuration: the CPU paths of the persistence calls
 * (flush, non-temporal copy and set), picked once from CPUID and the
 * PMGUARD_* variables (PMDK's PMEM_* manner, parsed by options.c's table),
 * the eADR check (pmg_has_auto_flush()), and the variables' errors.  Apart
 * from the calls (persist.c) because the pools read it too (whether a pool
 * gets an alias, whether it counts as pmem) while the calls read the pool
 * table: both depend on it, it on neither.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "options.h"
#include "persist.h"
#include "procfs.h"

struct _pmg_persist _pmg_persist_cfg;
int _pmg_persist_cfg_ready;

/* The PMGUARD_* persistence variables, as options.c parsed them. */
static struct _pmg_opts persist_opts;

/* -------------------------------------------------------------- eADR */

int _pmg_auto_flush_at(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int regions = 0, all = 1;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		char path[PATH_MAX], buf[32];

		if (strncmp(e->d_name, "region", 6))
			continue;
		snprintf(path, sizeof(path), "%s/%s/persistence_domain", dir,
			 e->d_name);
		if (_pmg_read_line(path, buf, sizeof(buf))) {
			all = 0; /* no such file: an older kernel */
			continue;
		}
		regions++;
		if (strcmp(buf, "cpu_cache"))
			all = 0;
	}
	closedir(d);
	return regions && all;
}

PMG_API int pmg_has_auto_flush(void)
{
	return _pmg_auto_flush_at("/sys/bus/nd/devices");
}

/* ---------------------------------------------------------- dispatch */

static void pick(struct _pmg_persist *p, const struct _pmg_opts *o,
		 const struct _pmg_cpu *c)
{
	p->force = o->force;
	p->pool_alias = o->pool_alias != 0;
	p->threshold = (size_t)o->threshold;
	if (o->no_flush == 1 || (o->no_flush != 0 && p->auto_flush == 1)) {
		p->flush = _pmg_flush_none;
		p->flush_name = "none";
	} else if (c->clwb && o->no_clwb != 1) {
		p->flush = _pmg_flush_clwb;
		p->flush_name = "clwb";
	} else if (c->clflushopt && o->no_clflushopt != 1) {
		p->flush = _pmg_flush_clflushopt;
		p->flush_name = "clflushopt";
	} else {
		p->flush = _pmg_flush_clflush;
		p->flush_name = "clflush";
	}
	if (o->no_movnt == 1) {
		p->movnt = NULL;
		p->setnt = NULL;
		p->movnt_name = "none";
	} else if (c->avx512f && o->no_avx512f != 1) {
		p->movnt = _pmg_movnt_avx512f;
		p->setnt = _pmg_setnt_avx512f;
		p->movnt_name = "avx512f";
	} else if (c->avx2 && o->no_avx2 != 1) {
		p->movnt = _pmg_movnt_avx2;
		p->setnt = _pmg_setnt_avx2;
		p->movnt_name = "avx2";
	} else {
		p->movnt = _pmg_movnt_sse2;
		p->setnt = _pmg_setnt_sse2;
		p->movnt_name = "sse2";
	}
}

void _pmg_persist_opts_reset(void)
{
	_pmg_opts_defaults(&persist_opts);
}

int _pmg_persist_opt(struct _pmg_persist *p, const char *name,
		     const char *value)
{
	struct _pmg_opts o = persist_opts;
	struct _pmg_cpu c;
	int rc;

	rc = _pmg_opt_parse(&o, name, value);
	if (rc) {
		_pmg_strlcpy(p->env_msg, pmg_errormsg(), sizeof(p->env_msg));
		return rc;
	}
	persist_opts = o;
	_pmg_cpu_get(&c);
	pick(p, &o, &c);
	return 0;
}

/* A bad value: report it, keep the default, remember the first. */
static void bad_env(const char *msg, void *arg)
{
	struct _pmg_persist *p = arg;

	fprintf(stderr, "pmguard: %s (ignored)\n", msg);
	if (!p->env_err) {
		p->env_err = -EINVAL;
		_pmg_strlcpy(p->env_msg, msg, sizeof(p->env_msg));
	}
}

static void persist_init(void)
{
	struct _pmg_persist *p = &_pmg_persist_cfg;
	struct _pmg_cpu c;

	(void)_pmg_opts_from_env_group(&persist_opts, _PMG_OPT_PERSIST, bad_env,
				       p);
	p->auto_flush = pmg_has_auto_flush();
	_pmg_cpu_get(&c);
	pick(p, &persist_opts, &c);
	__atomic_store_n(&_pmg_persist_cfg_ready, 1, __ATOMIC_RELEASE);
}

static pthread_once_t persist_once = PTHREAD_ONCE_INIT;

void _pmg_persist_init_once(void)
{
	pthread_once(&persist_once, persist_init);
}

int _pmg_persist_env_check(void)
{
	const struct _pmg_persist *p = _pmg_persist_get();

	if (p->env_err)
		return _pmg_err(p->env_err, "%s", p->env_msg);
	return 0;
}

PMG_API int pmg_persist_get_info(struct pmg_persist_info *pi, size_t size)
{
	const struct _pmg_persist *p;
	struct pmg_persist_info i = { 0 };
	int rc = _pmg_out_check("pmg_persist_get_info", pi, size,
				PMG_PERSIST_INFO_SIZE_0_1, false);

	if (rc)
		return rc;
	p = _pmg_persist_get();
	i.flush = p->flush_name;
	i.movnt = p->movnt_name;
	i.movnt_threshold = p->threshold;
	i.auto_flush = p->auto_flush;
	i.is_pmem_force = p->force;
	_pmg_out_copy(pi, size, &i, sizeof(i));
	return _pmg_persist_env_check();
}
