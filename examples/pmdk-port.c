// SPDX-License-Identifier: MIT
/*
 * pmdk-port - a libpmem program ported to pmguard, mostly by renaming.
 *
 * The program keeps an append-only log in a persistent-memory file: a
 * header with a record count, then fixed-size records.  Appending is the
 * classic libpmem pattern: copy the record and persist it, then update the
 * count and persist that.  Each call that changed is marked "libpmem:"
 * with what it was.
 *
 * What changes beyond names (docs/pool.md, "Porting from libpmem"):
 *  - pmem_map_file() becomes a pool: pmg_pool_create() / pmg_pool_open();
 *  - the pool is write-protected: the pmg_mem*() calls open their own
 *    window, but a plain store (the count below) needs one, here
 *    PMG_WRITE_SCOPE();
 *  - pmg_persist() returns 0 or -errno (an msync on a non-pmem pool).
 *
 * Build: cc -Iinclude examples/pmdk-port.c libpmguard.a \
 *        -Wl,--wrap=pthread_create -lpthread -ldl
 */
#define _GNU_SOURCE
#include <pmguard.h>		/* libpmem: #include <libpmem.h> */

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define POOL_SIZE (1UL << 20)
#define NRECS	  100

struct record {
	uint64_t seq;
	char text[56];
};

struct log {
	uint64_t count;			/* records committed */
	char pad[56];
	struct record rec[];
};

static int n_tests;

static void tap(int ok, const char *what)
{
	printf("%s %d - %s\n", ok ? "ok" : "not ok", ++n_tests, what);
}

/* Append one record: copy and persist it, then commit the count. */
static int append(struct pmg_pool *pool, struct log *log, uint64_t seq)
{
	struct record r = { .seq = seq };

	snprintf(r.text, sizeof(r.text), "record %llu",
		 (unsigned long long)seq);
	/* libpmem: pmem_memcpy_persist(&log->rec[log->count], &r, sizeof(r)) */
	if (!pmg_memcpy_persist(&log->rec[log->count], &r, sizeof(r)))
		return -1;
	{
		/* libpmem: no guard; a plain store to the pool needs a window */
		PMG_WRITE_SCOPE(pmg_pool_domain(pool));
		log->count++;
	}
	/* libpmem: pmem_persist(&log->count, sizeof(log->count)) */
	return pmg_persist(&log->count, sizeof(log->count));
}

int main(void)
{
	char path[] = "/tmp/pmguard-pmdk-port.XXXXXX";
	struct pmg_pool_config *cfg;
	struct pmg_pool *pool;
	struct log *log;
	uint64_t i, good = 0;
	int fd, st, rc = 0;
	pid_t pid;

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("1..3\n");
	fd = mkstemp(path);		/* a fresh name for the pool */
	if (fd < 0)
		return 1;
	close(fd);
	unlink(path);

	/* libpmem: log = pmem_map_file(path, POOL_SIZE,
	 *     PMEM_FILE_CREATE | PMEM_FILE_EXCL, 0600, &mapped_len, &is_pmem) */
	pmg_pool_config_new(&cfg);
	pmg_pool_config_set_size(cfg, POOL_SIZE);
	if (pmg_pool_create(&pool, path, cfg)) {
		printf("Bail out! %s\n", pmg_errormsg());
		return 1;
	}
	pmg_pool_config_delete(&cfg);
	log = pmg_pool_address(pool);
	printf("# pool %s: %zu bytes at %p, is_pmem %d, backend %s\n", path,
	       pmg_pool_size(pool), (void *)log, pmg_pool_is_pmem(pool),
	       pmg_backend_name(pmg_backend()));

	/* libpmem: pmem_memset_persist(log, 0, sizeof(*log)) */
	pmg_memset_persist(log, 0, sizeof(*log));
	for (i = 0; i < NRECS && rc == 0; i++)
		rc = append(pool, log, i);
	tap(rc == 0 && log->count == NRECS,
	    "100 records appended: copy + persist, then count + persist");

	/* libpmem: pmem_unmap(log, mapped_len) */
	pmg_pool_close(&pool);

	/* libpmem: log = pmem_map_file(path, 0, 0, 0, &mapped_len, &is_pmem) */
	if (pmg_pool_open(&pool, path, NULL)) {
		printf("Bail out! %s\n", pmg_errormsg());
		return 1;
	}
	log = pmg_pool_address(pool);
	for (i = 0; i < log->count; i++)	/* reads need no window */
		good += log->rec[i].seq == i;
	tap(log->count == NRECS && good == NRECS,
	    "reopened: every record is there (reads need no window)");

	/* what the port buys: a stray store faults instead of landing (the
	 * pool is shared with the child: a store that landed would show) */
	pid = fork();
	if (pid == 0) {
		struct rlimit no_core = { 0, 0 };

		setrlimit(RLIMIT_CORE, &no_core);
		pmg_set_report_fd(-1);
		pmg_set_fault_mode(PMG_FAULT_STRICT);	/* report, abort */
		log->rec[0].seq = 42;			/* no window */
		_exit(0);
	}
	waitpid(pid, &st, 0);
	tap(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT &&
	    log->rec[0].seq == 0,
	    "a stray store (no window) faults: strict mode stops the "
	    "program, the record is unchanged");

	/* libpmem: pmem_unmap(log, mapped_len) */
	pmg_pool_close(&pool);
	unlink(path);
	return rc == 0 && good == NRECS ? 0 : 1;
}
