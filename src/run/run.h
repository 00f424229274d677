/* SPDX-License-Identifier: MIT */
/*
 * libpmguard-run.so: the interposition library behind `pmguard run` and
 * `pmguard learn` (docs/run.md).  Preloaded into an unmodified, dynamically
 * linked program, it wraps the public calls of liblmdb, libpmem and
 * libpmem2 (looked up with dlsym(RTLD_NEXT): an adapter does nothing until
 * its library is loaded and called) and protects their mappings with
 * pmguard domains:
 *  - LMDB: an environment opened with MDB_WRITEMAP has its whole data map
 *    in a domain of its own, "lmdb:PATH"; a write transaction holds a
 *    write window on that domain only, on the thread that began it, from
 *    mdb_txn_begin() to the end of mdb_txn_commit() / mdb_txn_abort()
 *    (nested ones nest): the process's other environments stay
 *    protected; read-only transactions are not touched;
 *  - libpmem / libpmem2: every mapping is in a domain of its own,
 *    "pmem:PATH" or "pmem2:ADDRESS"; the copy calls run through
 *    pmg_memcpy() and family, which open the window on the destination's
 *    domain themselves; flush, drain and persist pass through.
 * Past the hardware keys (15, fewer when other code holds some) the
 * domains are virtual: a transaction's window gets its environment a key
 * (pmguard(7), "Virtual domains").
 * Everything else of the library (fault modes, reports) is pmguard's own,
 * linked in whole; only the wrapped calls and pthread_create are exported
 * (preload.map).
 *
 * Its files, by job (this header: what they share):
 *   start.c    start-up, options (the environment) and exit
 *   common.c   report lines, the launcher's files, the real functions,
 *              a data set's domain
 *   lmdb.c     the LMDB adapter
 *   pmem.c     the libpmem and libpmem2 adapter
 *   learn.c    learn mode: the audit sites written at exit
 *   libs.h     the wrapped libraries' declarations
 */
#ifndef PMG_RUN_H
#define PMG_RUN_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define RUN_API __attribute__((visibility("default")))
#define PAGE_UP(n) (((n) + PMG_PAGE_SIZE - 1) & ~(PMG_PAGE_SIZE - 1))

struct pmg_domain;

/* common.c */
extern pthread_mutex_t run_lock; /* the adapters' tables */
extern bool run_rep_file; /* a report file: module lines go there */
extern bool run_rep_named; /* a report file or syslog: each LMDB
				  * environment and pmem mapping named */
void run_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
bool run_spec_parse(const char *spec, char *path, size_t n,
		    unsigned long long *dev, unsigned long long *ino);
int run_spec_open(const char *spec);

/* The status file's layout (tools/run.c makes it this size): byte 0 'p'
 * once a process protected something, byte 1 'u' once one lost the
 * channel for the programs it runs (the first reason, a line, at
 * RUN_STATUS_WHY), byte 2 'l' once one could not hand over learn's
 * sites (the reason at RUN_STATUS_LWHY). */
#define RUN_STATUS_SIZE 4096
#define RUN_STATUS_WHY 64
#define RUN_STATUS_LWHY 2048
#define RUN_STATUS_WHY_LEN 1024
/* PMGUARD_RUN_STATUS_SOCK=NAME:SECRET, the status channel's last resort
 * (common.c): NAME an abstract socket address, SECRET hex digits */
#define RUN_SOCK_NAME_MAX 64
#define RUN_SOCK_SECRET 32

/* A launcher's channel: its descriptor FD (inherited, left open for the
 * program's children), this process's close-on-exec copy, the file's
 * identity and PATH:DEV:INO to open it again. */
struct run_chan {
	bool set;
	int inh, own;
	dev_t dev;
	ino_t ino;
	char spec[PATH_MAX + 48];
};
bool run_chans_open(const char *status, const char *sock, const char *learn,
		    const char **bad);
void run_chans_refresh(void);
void run_chans_fork_child(void);
void run_report_inherited(int fd, dev_t dev, ino_t ino);
int run_learn_fd(void);
void run_protected_one(void);
void *run_next(const char *name);
struct pmg_domain *run_data_domain(const char *kind, const char *path);
void run_data_domain_delete(struct pmg_domain **d);
int run_protect(struct pmg_domain *d, void *addr, size_t len, const char *what);
void run_unprotect(void *addr, size_t len, const char *what);
void run_modules(void);

/* The real function @name of the wrapped library, looked up once:
 * real_##name. */
#define REAL(name)                            \
	static __typeof__(&name) real_##name; \
	if (!real_##name)                     \
	real_##name = (__typeof__(&name))run_next(#name)

/* lmdb.c: PMGUARD_RUN_LMDB_WRITEMAP (--lmdb-writemap), 0 or 1; -1: not
 * read yet */
extern int run_lmdb_writemap;

/* start.c: PMGUARD_RUN_* read (at start-up, or by an adapter called
 * before the constructor ran) */
void run_opts_read(void);

/* learn.c: the audit sites appended to the launcher's file */
void run_learn_write(void);

#endif
