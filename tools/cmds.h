/* SPDX-License-Identifier: MIT */
/* The pmguard CLI's verbs: one file each, dispatched by tools/pmguard.c. */
#ifndef PMG_CMDS_H
#define PMG_CMDS_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"	/* the helpers every verb uses */

int cmd_info(int argc, char **argv);		/* tools/info.c */
int cmd_selftest(int argc, char **argv);	/* tools/lab/selftest.c */
int cmd_bench(int argc, char **argv);		/* tools/lab/bench.c */
int cmd_bench_window(int argc, char **argv);	/* tools/lab/bench.c */
int cmd_bench_fault(int argc, char **argv);	/* tools/lab/bench.c */
int cmd_bench_persist(int argc, char **argv);	/* tools/lab/bench_persist.c */
int cmd_bench_domains(int argc, char **argv);	/* tools/lab/bench_domains.c */
int cmd_bench_all(int argc, char **argv); /* tools/lab/bench_all.c */
int cmd_bench_count(int argc, char **argv); /* tools/lab/bench_count.c */
/* Why the PKU figures cannot be measured here, or NULL on PKU. */
const char *bench_no_pku_why(void); /* tools/lab/bench.c */
/* ns per floor pair (two bare WRPKRU), median of @rounds rounds of
 * @pairs, in the thread's CPU time (bench persist's clock); -1 unless on
 * PKU with a key free. */
double bench_floor_pair(long pairs, int rounds); /* tools/lab/bench.c */
struct pmg_pool;
/* The unprotected and protected pools the persistence benchmarks use
 * (tools/lab/bench_persist.c). */
int bench_pool_pair(const char *verb, const char *dir, const char *stem,
		    size_t size, char *path, size_t n, char *path2, size_t n2,
		    struct pmg_pool **pu, struct pmg_pool **pp);
int cmd_demo(int argc, char **argv);		/* tools/lab/demo.c */
int cmd_inject(int argc, char **argv);		/* tools/lab/inject.c */
int cmd_run(int argc, char **argv);		/* tools/run.c */
int cmd_learn(int argc, char **argv);		/* tools/run.c */
int cmd_report(int argc, char **argv);		/* tools/report.c */
/* "func+0x.. at file:line" for @off in the ELF file @path (libdw). */
bool report_symbol(const char *path, unsigned long off, char *out, size_t n);


#endif /* PMG_CMDS_H */
