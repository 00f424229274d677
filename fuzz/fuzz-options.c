// SPDX-License-Identifier: MIT
/*
 * fuzz-options - PMGUARD_* option parsing (src/options.c) against a model.
 *
 * Input: fields separated by NUL bytes.  Field 0's first byte picks what
 * is fuzzed:
 *   even  _pmg_opt_parse(o, name, value): the name is picked by byte 1 of
 *         field 0: below 0x40 one of the library group (PMGUARD_BACKEND,
 *         _FAULT_MODE, _REPORT_FD), 0x40..0x5f `pmguard run`'s
 *         (PMGUARD_RUN_LMDB_WRITEMAP, _RUN_CONFIRM_S), 0x60..0x7f the
 *         library group's later ones (PMGUARD_KEYS, _MPROTECT_WINDOWS),
 *         0x80..0xbf one of the persistence group (the 0/1 flags,
 *         PMGUARD_MOVNT_THRESHOLD), from 0xc0 on field 1; the value is
 *         the next field, or NULL (unset) if there is none
 *   odd   _pmg_opts_from_env(): PMGUARD_BACKEND, PMGUARD_FAULT_MODE and
 *         PMGUARD_REPORT_FD are set to fields 1, 2, 3 (a missing field
 *         leaves the variable unset)
 *
 * The model is the documented grammar: PMGUARD_BACKEND auto|pku|mprotect,
 * PMGUARD_FAULT_MODE strict|relaxed|audit (exact, case-sensitive),
 * PMGUARD_REPORT_FD -1 or decimal digits up to INT_MAX (no blanks, no
 * sign, nothing after the digits), the flags 0 or 1, the threshold decimal
 * digits up to LONG_MAX, PMGUARD_RUN_LMDB_WRITEMAP 0, 1 or empty (0),
 * PMGUARD_RUN_CONFIRM_S digits, 1 to 3600.  The model's own arithmetic
 * never overflows: a
 * bound is checked before each n * 10 + d.  Every
 * result is compared: return value, the struct (a failed parse leaves it
 * unchanged), and the error message (it names the variable and, truncated
 * to 64 bytes, the bad value).  Any mismatch aborts.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmguard.h"
#include "options.h"

static const char *const names[] = {
	"PMGUARD_BACKEND",
	"PMGUARD_FAULT_MODE",
	"PMGUARD_REPORT_FD",
	/* the persistence group: 0/1 flags, then a byte count */
	"PMGUARD_IS_PMEM_FORCE",
	"PMGUARD_NO_CLWB",
	"PMGUARD_NO_CLFLUSHOPT",
	"PMGUARD_NO_FLUSH",
	"PMGUARD_NO_MOVNT",
	"PMGUARD_NO_AVX512F",
	"PMGUARD_NO_AVX2",
	"PMGUARD_MOVNT_THRESHOLD",
	"PMGUARD_POOL_ALIAS",
	/* the library group's later ones (the fuzzer found KEYS by name) */
	"PMGUARD_KEYS",
	"PMGUARD_MPROTECT_WINDOWS",
	/* `pmguard run`'s group (the fuzzer found CONFIRM_S by name) */
	"PMGUARD_RUN_LMDB_WRITEMAP",
	"PMGUARD_RUN_CONFIRM_S",
};

#define FAIL(...)							\
	do {								\
		fprintf(stderr, "fuzz-options: " __VA_ARGS__);		\
		fputc('\n', stderr);					\
		abort();						\
	} while (0)

/* The model: 0 and *out set, or -1. */
static int model_backend(const char *v, int *out)
{
	if (!strcmp(v, "auto"))
		*out = PMG_BACKEND_NONE;
	else if (!strcmp(v, "pku"))
		*out = PMG_BACKEND_PKU;
	else if (!strcmp(v, "mprotect"))
		*out = PMG_BACKEND_MPROTECT;
	else
		return -1;
	return 0;
}

static int model_mode(const char *v, int *out)
{
	if (!strcmp(v, "strict"))
		*out = PMG_FAULT_STRICT;
	else if (!strcmp(v, "relaxed"))
		*out = PMG_FAULT_RELAXED;
	else if (!strcmp(v, "audit"))
		*out = PMG_FAULT_AUDIT;
	else if (!strcmp(v, "contain"))
		*out = PMG_FAULT_CONTAIN;
	else
		return -1;
	return 0;
}

/* -1, or digits only, nothing after; saturates instead of overflowing. */
static int model_fd(const char *v, int *out)
{
	const char *s = v;
	long long n = 0;

	if (!strcmp(v, "-1")) {
		*out = -1;
		return 0;
	}
	if (!isdigit((unsigned char)*s))
		return -1;
	for (; isdigit((unsigned char)*s); s++) {
		n = n * 10 + (*s - '0');
		if (n > (long long)INT_MAX + 1)
			n = (long long)INT_MAX + 2;	/* saturate: too big */
	}
	if (*s || n > INT_MAX)
		return -1;
	*out = (int)n;
	return 0;
}

static int model_bool(const char *v, int *out)
{
	if (strcmp(v, "0") && strcmp(v, "1"))
		return -1;
	*out = v[0] - '0';
	return 0;
}

static int model_size(const char *v, long *out)
{
	long n = 0;
	const char *s = v;

	if (!isdigit((unsigned char)*s))
		return -1;
	for (; isdigit((unsigned char)*s); s++) {
		/* too big: checked before n * 10 + d can overflow */
		if (n > (LONG_MAX - (*s - '0')) / 10)
			return -1;
		n = n * 10 + (*s - '0');
	}
	if (*s)
		return -1;
	*out = (long)n;
	return 0;
}

/* Digits only, 0..15. */
static int model_keys(const char *v, int *out)
{
	long n;

	if (model_size(v, &n) || n > 15)
		return -1;
	*out = (int)n;
	return 0;
}

static int model_mp_windows(const char *v, int *out)
{
	if (!strcmp(v, "lazy"))
		*out = 0;
	else if (!strcmp(v, "eager"))
		*out = 1;
	else
		return -1;
	return 0;
}

/* Empty is 0 (the launcher sets it so), else 0 or 1. */
static int model_run_bool(const char *v, int *out)
{
	if (!*v) {
		*out = 0;
		return 0;
	}
	return model_bool(v, out);
}

/* Digits only, 1..3600 seconds. */
static int model_confirm_s(const char *v, int *out)
{
	long n;

	if (model_size(v, &n) || n < 1 || n > 3600)
		return -1;
	*out = (int)n;
	return 0;
}

static int model_parse(struct _pmg_opts *o, int which, const char *v)
{
	int *flags[] = { &o->force, &o->no_clwb, &o->no_clflushopt,
			 &o->no_flush, &o->no_movnt, &o->no_avx512f,
			 &o->no_avx2, NULL, &o->pool_alias };

	switch (which) {
	case 0:
		return model_backend(v, &o->backend);
	case 1:
		return model_mode(v, &o->mode);
	case 2:
		return model_fd(v, &o->report_fd);
	case 10:
		return model_size(v, &o->threshold);
	case 12:
		return model_keys(v, &o->keys_max);
	case 13:
		return model_mp_windows(v, &o->mp_eager);
	case 14:
		return model_run_bool(v, &o->run_writemap);
	case 15:
		return model_confirm_s(v, &o->run_confirm_s);
	default:
		return model_bool(v, flags[which - 3]);
	}
}

static int known(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(name, names[i]))
			return (int)i;
	return -1;
}

static void same(const struct _pmg_opts *a, const struct _pmg_opts *b,
		 const char *what)
{
	if (a->backend != b->backend || a->mode != b->mode ||
	    a->report_fd != b->report_fd || a->force != b->force ||
	    a->no_clwb != b->no_clwb || a->no_clflushopt != b->no_clflushopt ||
	    a->no_flush != b->no_flush || a->no_movnt != b->no_movnt ||
	    a->no_avx512f != b->no_avx512f || a->no_avx2 != b->no_avx2 ||
	    a->threshold != b->threshold || a->pool_alias != b->pool_alias ||
	    a->keys_max != b->keys_max || a->mp_eager != b->mp_eager ||
	    a->run_writemap != b->run_writemap ||
	    a->run_confirm_s != b->run_confirm_s)
		FAIL("%s: got {%d, %d, %d}, model {%d, %d, %d}", what,
		     a->backend, a->mode, a->report_fd, b->backend, b->mode,
		     b->report_fd);
}

/* The message names @name and the first 64 bytes of @value. */
static void check_msg(const char *name, const char *value)
{
	const char *msg = pmg_errormsg();
	char want[128];

	if (!msg || !*msg)
		FAIL("-EINVAL for %s without a message", name);
	if (value) {
		snprintf(want, sizeof(want), "%s='%.64s'", name, value);
		if (strncmp(msg, want, strlen(want)))
			FAIL("message '%s' does not start with \"%s\"", msg,
			     want);
	} else if (!strstr(msg, "unknown option")) {
		FAIL("message '%s' for unknown option", msg);
	}
}

static void one_parse(const char *name, const char *value)
{
	struct _pmg_opts o, m;
	int which = known(name), rc, want;

	_pmg_opts_defaults(&o);
	o.backend = 7;		/* values no parse produces */
	o.mode = 8;
	o.report_fd = 9;
	m = o;

	rc = _pmg_opt_parse(&o, name, value);
	if (which < 0) {
		want = -EINVAL;
	} else if (!value) {
		want = 0;
	} else {
		struct _pmg_opts t = m;

		want = model_parse(&t, which, value) ? -EINVAL : 0;
		if (!want)
			m = t;
	}
	if (rc != want)
		FAIL("_pmg_opt_parse(%s, '%s') = %d, model %d", name,
		     value ? value : "(null)", rc, want);
	same(&o, &m, "_pmg_opt_parse");
	if (rc) {
		char cut[65];

		if (which < 0) {
			snprintf(cut, sizeof(cut), "%s", name);
			if (!strstr(pmg_errormsg(), cut))
				FAIL("message '%s' does not name '%s'",
				     pmg_errormsg(), cut);
			check_msg(name, NULL);
		} else {
			check_msg(name, value);
		}
	}
}

static void from_env(const char *const vals[3])
{
	struct _pmg_opts o, m;
	int i, rc, want = 0, bad = -1;

	_pmg_opts_defaults(&m);

	for (i = 0; i < 3; i++) {
		if (vals[i])
			setenv(names[i], vals[i], 1);
		else
			unsetenv(names[i]);
	}
	for (i = 0; i < 3 && bad < 0; i++)
		if (vals[i] && model_parse(&m, i, vals[i]))
			bad = i;
	if (bad >= 0)
		want = -EINVAL;
	rc = _pmg_opts_from_env(&o);
	if (rc != want)
		FAIL("_pmg_opts_from_env = %d, model %d", rc, want);
	if (rc)
		check_msg(names[bad], vals[bad]);
	else
		same(&o, &m, "_pmg_opts_from_env");
	for (i = 0; i < 3; i++)
		unsetenv(names[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *f[4] = { NULL, NULL, NULL, NULL };
	char *buf;
	size_t i, nf = 0;

	if (size < 1 || size > 4096)
		return 0;
	/* NUL-separated fields, each NUL-terminated */
	buf = malloc(size + 1);
	memcpy(buf, data, size);
	buf[size] = '\0';
	f[nf++] = buf;
	for (i = 0; i < size && nf < 4; i++)
		if (!buf[i])
			f[nf++] = buf + i + 1;

	if (!(buf[0] & 1)) {
		unsigned pick = size > 1 ? (unsigned char)buf[1] : 0;

		if (pick >= 0xc0)	/* the name from the input */
			one_parse(f[1] ? f[1] : "", f[2]);
		else if (pick >= 0x80)	/* the persistence group */
			one_parse(names[3 + pick % 9], f[1]);
		else if (pick >= 0x60) /* the library group's later ones */
			one_parse(names[12 + pick % 2], f[1]);
		else if (pick >= 0x40) /* `pmguard run`'s group */
			one_parse(names[14 + pick % 2], f[1]);
		else			/* the library group */
			one_parse(names[pick % 3], f[1]);
	} else {
		from_env(&f[1]);
	}
	free(buf);
	return 0;
}
