// SPDX-License-Identifier: MIT
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "options.h"

static int parse_backend(struct _pmg_opts *o, void *f, const char *v)
{
	(void)f;
	if (!strcmp(v, "auto"))
		o->backend = PMG_BACKEND_NONE;
	else if (!strcmp(v, "pku"))
		o->backend = PMG_BACKEND_PKU;
	else if (!strcmp(v, "mprotect"))
		o->backend = PMG_BACKEND_MPROTECT;
	else
		return -1;
	return 0;
}

static int parse_mp_windows(struct _pmg_opts *o, void *f, const char *v)
{
	(void)f;
	if (!strcmp(v, "lazy"))
		o->mp_eager = 0;
	else if (!strcmp(v, "eager"))
		o->mp_eager = 1;
	else
		return -1;
	return 0;
}

static int parse_mode(struct _pmg_opts *o, void *f, const char *v)
{
	int m = _pmg_mode_parse(v);

	(void)f;
	if (m < 0)
		return -1;
	o->mode = m;
	return 0;
}

/*
 * Decimal digits only (no blanks, no sign), up to LONG_MAX: 0, or -1 with
 * *@n untouched (a bad value must leave the option as it was).
 */
static int parse_digits(const char *v, long *n)
{
	const char *p;
	char *end;
	long x;

	for (p = v; *p; p++)
		if (*p < '0' || *p > '9')
			return -1;
	if (p == v)
		return -1;
	errno = 0;
	x = strtol(v, &end, 10);
	if (errno || *end)
		return -1;
	*n = x;
	return 0;
}

/* "-1", or decimal digits up to INT_MAX. */
static int parse_fd(struct _pmg_opts *o, void *f, const char *v)
{
	long n;

	(void)f;
	if (!strcmp(v, "-1")) {
		o->report_fd = -1;
		return 0;
	}
	if (parse_digits(v, &n) || n > INT_MAX)
		return -1;
	o->report_fd = (int)n;
	return 0;
}

/* 0..15: the most hardware keys pmguard holds at once. */
static int parse_keys(struct _pmg_opts *o, void *f, const char *v)
{
	long n;

	(void)f;
	if (parse_digits(v, &n) || n > PMG_NR_KEYS - 1)
		return -1;
	o->keys_max = (int)n;
	return 0;
}

/* "0" or "1" into the int at @f. */
static int parse_bool(struct _pmg_opts *o, void *f, const char *v)
{
	(void)o;
	if (strcmp(v, "0") && strcmp(v, "1"))
		return -1;
	*(int *)f = v[0] - '0';
	return 0;
}

/* "0", "1" or empty (as unset: 0) into the int at @f: the preload's
 * variables, which `pmguard run` sets, or leaves empty, for it. */
static int parse_run_bool(struct _pmg_opts *o, void *f, const char *v)
{
	if (!*v) {
		*(int *)f = 0;
		return 0;
	}
	return parse_bool(o, f, v);
}

/* 1..3600: how long `pmguard run` waits for its preload to say it
 * loaded, in seconds. */
static int parse_confirm_s(struct _pmg_opts *o, void *f, const char *v)
{
	long n;

	(void)f;
	if (parse_digits(v, &n) || n < 1 || n > 3600)
		return -1;
	o->run_confirm_s = (int)n;
	return 0;
}

/* Decimal digits only (no blanks, no sign) into the long at @f. */
static int parse_size(struct _pmg_opts *o, void *f, const char *v)
{
	(void)o;
	return parse_digits(v, (long *)f);
}

#define F(field) offsetof(struct _pmg_opts, field)
#define BOOL(name, field)						\
	{ name, "0 or 1", parse_bool, F(field), _PMG_OPT_PERSIST }

static const struct {
	const char *name;
	const char *expect;
	int (*parse)(struct _pmg_opts *, void *field, const char *);
	size_t field;
	int group;
} table[] = {
	{ "PMGUARD_BACKEND", "auto, pku or mprotect", parse_backend, 0,
	  _PMG_OPT_LIB },
	{ "PMGUARD_FAULT_MODE", "strict, relaxed, audit or contain", parse_mode,
	  0, _PMG_OPT_LIB },
	{ "PMGUARD_MPROTECT_WINDOWS", "lazy or eager", parse_mp_windows, 0,
	  _PMG_OPT_LIB },
	{ "PMGUARD_REPORT_FD", "-1 or a file descriptor number (digits only)",
	  parse_fd, 0, _PMG_OPT_LIB },
	{ "PMGUARD_KEYS", "0 to 15 (the most protection keys pmguard holds)",
	  parse_keys, 0, _PMG_OPT_LIB },
	BOOL("PMGUARD_IS_PMEM_FORCE", force),
	BOOL("PMGUARD_NO_CLWB", no_clwb),
	BOOL("PMGUARD_NO_CLFLUSHOPT", no_clflushopt),
	BOOL("PMGUARD_NO_FLUSH", no_flush),
	BOOL("PMGUARD_NO_MOVNT", no_movnt),
	BOOL("PMGUARD_NO_AVX512F", no_avx512f),
	BOOL("PMGUARD_NO_AVX2", no_avx2),
	BOOL("PMGUARD_POOL_ALIAS", pool_alias),
	{ "PMGUARD_MOVNT_THRESHOLD", "a number of bytes (digits only)",
	  parse_size, F(threshold), _PMG_OPT_PERSIST },
	{ "PMGUARD_RUN_LMDB_WRITEMAP", "0 or 1", parse_run_bool,
	  F(run_writemap), _PMG_OPT_RUN },
	{ "PMGUARD_RUN_CONFIRM_S", "seconds, 1 to 3600", parse_confirm_s, 0,
	  _PMG_OPT_RUN },
};
#undef BOOL
#undef F

void _pmg_opts_defaults(struct _pmg_opts *o)
{
	o->backend = PMG_BACKEND_NONE;
	o->mode = PMG_FAULT_RELAXED;
	o->report_fd = 2;
	o->mp_eager = 0;
	o->keys_max = PMG_NR_KEYS - 1;
	o->force = -1;
	o->no_clwb = o->no_clflushopt = o->no_flush = -1;
	o->no_movnt = o->no_avx512f = o->no_avx2 = -1;
	o->threshold = 256;	/* PMDK's default */
	o->pool_alias = -1;
	o->run_writemap = 0;
	o->run_confirm_s = 30;
}

int _pmg_opt_parse(struct _pmg_opts *o, const char *name, const char *value)
{
	size_t i;

	for (i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		if (strcmp(name, table[i].name))
			continue;
		if (!value)
			return 0;
		if (table[i].parse(o, (char *)o + table[i].field, value))
			return _pmg_err(-EINVAL, "%s='%.64s' is not valid: "
					"expected %s", name, value,
					table[i].expect);
		return 0;
	}
	return _pmg_err(-EINVAL, "unknown option %.64s", name);
}

int _pmg_opts_from_env_group(struct _pmg_opts *o, int group,
			     void (*bad)(const char *msg, void *arg),
			     void *arg)
{
	size_t i;
	int rc, first = 0;

	_pmg_opts_defaults(o);
	for (i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		struct _pmg_opts t = *o;

		if (table[i].group != group)
			continue;
		rc = _pmg_opt_parse(&t, table[i].name, getenv(table[i].name));
		if (!rc) {
			*o = t;
			continue;
		}
		if (!bad)
			return rc;
		bad(pmg_errormsg(), arg);
		if (!first)
			first = rc;
	}
	return first;
}

int _pmg_opts_from_env(struct _pmg_opts *o)
{
	return _pmg_opts_from_env_group(o, _PMG_OPT_LIB, NULL, NULL);
}
