// SPDX-License-Identifier: MIT
/* The one argument parser of every verb: see tools/args.h. */
#define _GNU_SOURCE
#include <string.h>

#include "args.h"
#include "cmds.h"

static bool is_help(const char *a)
{
	return !strcmp(a, "-h") || !strcmp(a, "--help");
}

int cli_number(const char *verb, const char *what, const char *s, bool hex,
	       unsigned long long lo, unsigned long long hi,
	       unsigned long long *out)
{
	const char *p = s, *form = hex ? "a decimal or 0x hex number"
				       : "a decimal number";
	unsigned long long v = 0, base = 10, d;
	bool range = false;

	if (!*s)
		return cli_error("%s: %s needs a value", verb, what);
	if (hex && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		base = 16;
		p += 2;
	}
	if (!*p)
		goto bad;
	for (; *p; p++) {
		if (*p >= '0' && *p <= '9')
			d = (unsigned long long)(*p - '0');
		else if (base == 16 && *p >= 'a' && *p <= 'f')
			d = (unsigned long long)(*p - 'a' + 10);
		else if (base == 16 && *p >= 'A' && *p <= 'F')
			d = (unsigned long long)(*p - 'A' + 10);
		else
			goto bad;
		/* checked before v * base + d can wrap */
		if (v > (~0ull - d) / base)
			range = true;
		else
			v = v * base + d;
	}
	if (range || v < lo || v > hi)
		return cli_error("%s: %s: value '%s' out of range (%llu..%llu)",
				 verb, what, s, lo, hi);
	*out = v;
	return 0;
bad:
	return cli_error("%s: %s: bad value '%s' (%s, %llu..%llu)", verb, what,
			 s, form, lo, hi);
}

static const struct cli_opt *find(const struct cli_verb *v, const char *a,
				  size_t len)
{
	const struct cli_opt *o;

	for (o = v->opts; o && o->name; o++)
		if (strlen(o->name) == len && !strncmp(o->name, a, len))
			return o;
	return NULL;
}

static int one(const struct cli_verb *v, const struct cli_opt *o,
	       const char *val)
{
	unsigned long long n;
	int i;

	switch (o->kind) {
	case CLI_FLAG:
		*(bool *)o->out = true;
		break;
	case CLI_COUNT:
	case CLI_SEED:
		if (cli_number(v->name, o->name, val, o->kind == CLI_SEED,
			       o->lo, o->hi, &n))
			return 2;
		*(unsigned long long *)o->out = n;
		break;
	case CLI_STRING:
		if (!*val)
			return cli_error("%s: %s needs a value", v->name,
					 o->name);
		*(const char **)o->out = val;
		break;
	case CLI_CHOICE:
		for (i = 0; o->choices[i]; i++)
			if (!strcmp(val, o->choices[i]))
				break;
		if (!o->choices[i]) {
			char list[128] = "";
			size_t at = 0;
			int k;

			for (k = 0; o->choices[k] && at < sizeof(list); k++)
				at += (size_t)snprintf(list + at,
						       sizeof(list) - at,
						       "%s%s", k ? ", " : "",
						       o->choices[k]);
			return cli_error("%s: %s: bad value '%s' (%s)",
					 v->name, o->name, val, list);
		}
		*(int *)o->out = i;
		break;
	}
	if (o->seen)
		*o->seen = true;
	return 0;
}

int cli_args(const struct cli_verb *v, int argc, char **argv)
{
	const struct cli_opt *o;
	int i, rc;

	/* -h/--help wins wherever it stands as an option */
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (is_help(a)) {
			v->usage(stdout);
			return 0;
		}
		o = a[0] == '-' && a[1] == '-' && !strchr(a, '=')
			    ? find(v, a, strlen(a)) : NULL;
		if (o && o->kind != CLI_FLAG)
			i++;		/* its value, whatever it looks like */
	}
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *eq, *val = NULL;

		if (a[0] != '-' || !a[1]) {
			if (!v->positional)
				return cli_error("%s: unexpected argument '%s' "
						 "(see pmguard %s --help)",
						 v->name, a, v->name);
			rc = v->positional(a, v->ctx);
			if (rc)
				return rc;
			continue;
		}
		eq = a[1] == '-' ? strchr(a, '=') : NULL;
		o = find(v, a, eq ? (size_t)(eq - a) : strlen(a));
		if (!o)
			return cli_error("%s: unknown option '%s' (see "
					 "pmguard %s --help)", v->name, a,
					 v->name);
		if (o->kind == CLI_FLAG) {
			if (eq)
				return cli_error("%s: %s takes no value",
						 v->name, o->name);
		} else if (eq) {
			val = eq + 1;
		} else if (i + 1 < argc) {
			val = argv[++i];
		} else {
			return cli_error("%s: %s needs a value", v->name,
					 o->name);
		}
		rc = one(v, o, val);
		if (rc)
			return rc;
	}
	return CLI_GO_ON;
}
