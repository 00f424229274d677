/* SPDX-License-Identifier: MIT */
/*
 * Options from PMGUARD_<NAME> environment variables: one table, every bad
 * value reported by name (mimalloc's options.c shape).
 */
#ifndef PMG_OPTIONS_H
#define PMG_OPTIONS_H

struct _pmg_opts {
	int backend;	/* PMGUARD_BACKEND: auto (NONE) | pku | mprotect */
	int mode;	/* PMGUARD_FAULT_MODE: strict | relaxed | audit */
	int report_fd;	/* PMGUARD_REPORT_FD: -1 (none) .. INT_MAX */
};

/* Defaults, then each variable that is set.  0, or -EINVAL with the
 * message naming the variable and its value. */
int _pmg_opts_from_env(struct _pmg_opts *o);

/* Parse one option; @value NULL means unset.  Exposed for tests/fuzzing. */
int _pmg_opt_parse(struct _pmg_opts *o, const char *name, const char *value);

#endif /* PMG_OPTIONS_H */
