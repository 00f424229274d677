/* SPDX-License-Identifier: MIT */
/*
 * Options from PMGUARD_<NAME> environment variables: one table, every bad
 * value reported by name (mimalloc's options.c shape).
 */
#ifndef PMG_OPTIONS_H
#define PMG_OPTIONS_H

struct _pmg_opts {
	/* library (read by pmg_init()) */
	int backend;	/* PMGUARD_BACKEND: auto (NONE) | pku | mprotect */
	int mode;	/* PMGUARD_FAULT_MODE: strict | relaxed | audit */
	int report_fd;	/* PMGUARD_REPORT_FD: -1 (none) .. INT_MAX */
	int mp_eager; /* PMGUARD_MPROTECT_WINDOWS: lazy (0) | eager (1) */
	int keys_max;	/* PMGUARD_KEYS: hardware keys pmguard holds, 0..15 */
	/* persistence (read by the first persistence call); -1 = unset */
	int force;	/* PMGUARD_IS_PMEM_FORCE: 0 | 1 */
	int no_clwb, no_clflushopt, no_flush;	/* PMGUARD_NO_*: 0 | 1 */
	int no_movnt, no_avx512f, no_avx2;
	long threshold;	/* PMGUARD_MOVNT_THRESHOLD: bytes, >= 0 */
	int pool_alias;	/* PMGUARD_POOL_ALIAS: 0 | 1 */
	/* `pmguard run` (read by the launcher and its preload) */
	int run_writemap; /* PMGUARD_RUN_LMDB_WRITEMAP: 0 | 1 */
	int run_confirm_s; /* PMGUARD_RUN_CONFIRM_S: 1..3600 s */
};

/* Which variables a reader wants. */
enum _pmg_opt_group {
	_PMG_OPT_LIB,
	_PMG_OPT_PERSIST,
	_PMG_OPT_RUN,
};

/* Every field at its default. */
void _pmg_opts_defaults(struct _pmg_opts *o);

/*
 * Defaults, then each variable of @group that is set.  0, or -EINVAL with
 * the message naming the variable and its value.  With @bad NULL it stops
 * at the first bad value; otherwise it calls @bad with each one's message,
 * keeps the default for it, and returns the first error.
 */
int _pmg_opts_from_env_group(struct _pmg_opts *o, int group,
			     void (*bad)(const char *msg, void *arg),
			     void *arg);

/* The library's variables, stopping at the first bad value. */
int _pmg_opts_from_env(struct _pmg_opts *o);

/* Parse one option (any group); @value NULL means unset.  Exposed for
 * tests and fuzzing. */
int _pmg_opt_parse(struct _pmg_opts *o, const char *name, const char *value);

#endif /* PMG_OPTIONS_H */
