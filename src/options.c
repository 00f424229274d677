// SPDX-License-Identifier: MIT
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "options.h"

static int parse_backend(struct _pmg_opts *o, const char *v)
{
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

static int parse_mode(struct _pmg_opts *o, const char *v)
{
	int m = pmg_mode_parse(v);

	if (m < 0)
		return -1;
	o->mode = m;
	return 0;
}

/* "-1", or decimal digits only (no blanks, no sign) up to INT_MAX. */
static int parse_fd(struct _pmg_opts *o, const char *v)
{
	const char *p;
	char *end;
	long n;

	if (!strcmp(v, "-1")) {
		o->report_fd = -1;
		return 0;
	}
	for (p = v; *p; p++)
		if (*p < '0' || *p > '9')
			return -1;
	if (p == v)
		return -1;
	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || *end || n > INT_MAX)
		return -1;
	o->report_fd = (int)n;
	return 0;
}

static const struct {
	const char *name;
	const char *expect;
	int (*parse)(struct _pmg_opts *, const char *);
} table[] = {
	{ "PMGUARD_BACKEND", "auto, pku or mprotect", parse_backend },
	{ "PMGUARD_FAULT_MODE", "strict, relaxed or audit", parse_mode },
	{ "PMGUARD_REPORT_FD", "-1 or a file descriptor number (digits only)",
	  parse_fd },
};

int _pmg_opt_parse(struct _pmg_opts *o, const char *name, const char *value)
{
	size_t i;

	for (i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		if (strcmp(name, table[i].name))
			continue;
		if (!value)
			return 0;
		if (table[i].parse(o, value))
			return _pmg_err(-EINVAL, "%s='%.64s' is not valid: "
					"expected %s", name, value,
					table[i].expect);
		return 0;
	}
	return _pmg_err(-EINVAL, "unknown option %.64s", name);
}

int _pmg_opts_from_env(struct _pmg_opts *o)
{
	size_t i;
	int rc;

	o->backend = PMG_BACKEND_NONE;
	o->mode = PMG_FAULT_RELAXED;
	o->report_fd = 2;
	for (i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		rc = _pmg_opt_parse(o, table[i].name, getenv(table[i].name));
		if (rc)
			return rc;
	}
	return 0;
}
