/* SPDX-License-Identifier: MIT */
/* The pmguard CLI's verbs: one file each, dispatched by tools/pmguard.c. */
#ifndef PMG_CMDS_H
#define PMG_CMDS_H

#include <stdbool.h>

int cmd_info(int argc, char **argv);		/* tools/info.c */
int cmd_selftest(int argc, char **argv);	/* tools/selftest.c */
int cmd_bench(int argc, char **argv);		/* tools/bench.c */
int cmd_bench_window(int argc, char **argv);	/* tools/bench.c */
int cmd_bench_persist(int argc, char **argv);	/* tools/bench_persist.c */
int cmd_demo(int argc, char **argv);		/* tools/demo.c */
int cmd_inject(int argc, char **argv);		/* tools/inject.c */

/* Shared helpers (tools/util.c). */
/* Print "pmguard: " + message to stderr; returns 2 (usage/input error). */
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Monotonic seconds. */
double cli_now(void);

#endif /* PMG_CMDS_H */
