// SPDX-License-Identifier: MIT
/*
 * libwild.so: a wild-write injector for the `pmguard run` tests, preloaded
 * into an unmodified program (before libpmguard-run.so).  It knows nothing
 * of pmguard.  It watches the LMDB or libpmem calls and, after the
 * WILD_AFTER-th mdb_txn_commit() / pmem_memcpy_persist() returned, has a
 * thread of its own write WILD_WRITES 8-byte words of 0xee into the
 * mapping while the program waits (so no write transaction is open):
 *   LMDB: into the upper half of the main database's root page (node
 *         data), found through the newer meta page;
 *   pmem: into the first records of the mapping (from offset 64 up).
 * With WILD_DURING=1 (LMDB) the thread writes before the WILD_AFTER-th
 * commit instead, while the program's write transaction (and its window
 * on its own thread) is open.  With WILD_MPROTECT=1 it first makes the
 * target's page read-write with mprotect(), as a program that manages
 * its mapping's protection itself would.
 * It prints "wild: N writes done" to stderr afterwards (a strict run never
 * gets there).  WILD_AFTER unset: the library does nothing.
 * With WILD_TRIGGER=PATH instead (LMDB, for a server that runs on), a
 * thread of its own, started at the first mdb_env_open(), looks for PATH
 * every 20 ms and, once it exists, writes into the environment opened
 * last (still open) and removes PATH: the test decides when, e.g. after
 * the server answered its queries and is idle (no write transaction
 * open: on the mprotect backend windows are process-wide).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

static void *lmdb_env;
static char *pmem_base;
static unsigned long count, after, writes;
static int during, mprot;
static const char *trigger;
static pthread_mutex_t env_lock = PTHREAD_MUTEX_INITIALIZER;

static void *next(const char *name)
{
	static const char *const libs[] = { "liblmdb.so.0", "libpmem.so.1" };
	void *p = dlsym(RTLD_NEXT, name);
	unsigned i;

	/* a library only in a dlopen()ed module's local scope (py-lmdb) */
	for (i = 0; !p && i < 2; i++) {
		void *h = dlopen(libs[i], RTLD_NOW | RTLD_NOLOAD);

		if (h) {
			p = dlsym(h, name);
			dlclose(h);
		}
	}
	if (!p) {
		fprintf(stderr, "wild: %s not found\n", name);
		abort();
	}
	return p;
}

/* The shared mapping of the env's data file (LMDB does not say where). */
static char *map_of(int (*fd_fn)(void *, int *), size_t len)
{
	struct stat st;
	char line[512];
	char *found = NULL;
	FILE *f;
	int fd;

	if (fd_fn(lmdb_env, &fd) || fstat(fd, &st))
		return NULL;
	f = fopen("/proc/self/maps", "r");
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, off, ino;
		unsigned maj, min;
		char perm[8];

		if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu", &lo, &hi, perm,
			   &off, &maj, &min, &ino) == 7 && ino == st.st_ino &&
		    makedev(maj, min) == st.st_dev && hi - lo >= len) {
			found = (char *)lo;
			break;
		}
	}
	if (f)
		fclose(f);
	return found;
}

/* LMDB's on-disk layout (lmdb 0.9, 64-bit): page header 16 bytes; meta:
 * txnid at 144 (the meta page header, 16 bytes, then mm_txnid at 128 in
 * MDB_meta), main database root at 128 (mm_dbs[MAIN_DBI].md_root). */
static char *lmdb_target(void)
{
	struct { void *addr; size_t mapsize, last_pg, last_txn;
		 unsigned maxr, numr; } info;
	struct { unsigned psize, depth; size_t b, l, o, e; } st;
	int (*info_fn)(void *, void *) = next("mdb_env_info");
	int (*stat_fn)(void *, void *) = next("mdb_env_stat");
	int (*fd_fn)(void *, int *) = next("mdb_env_get_fd");
	char *map, *m0, *m1, *meta;
	uint64_t root;

	if (info_fn(lmdb_env, &info) || stat_fn(lmdb_env, &st))
		return NULL;
	map = info.addr ? info.addr : map_of(fd_fn, info.mapsize);
	if (!map)
		return NULL;
	m0 = map;
	m1 = map + st.psize;
	meta = *(uint64_t *)(m1 + 144) > *(uint64_t *)(m0 + 144) ? m1 : m0;
	root = *(uint64_t *)(meta + 128);
	if (root > info.last_pg) {
		/* an empty main database (P_INVALID): no root page */
		fprintf(stderr, "wild: no root page (%#llx)\n",
			(unsigned long long)root);
		return NULL;
	}
	fprintf(stderr, "wild: LMDB root page %llu (page size %u)\n",
		(unsigned long long)root, st.psize);
	return map + root * st.psize + st.psize / 2;
}

static void *wild_thread(void *arg)
{
	char *p = arg;
	unsigned long i;

	for (i = 0; i < writes; i++)
		*(volatile uint64_t *)(p + 8 * i) = 0xeeeeeeeeeeeeeeeeull;
	return NULL;
}

static void fire(char *target)
{
	pthread_t t;

	if (!target)
		return;
	if (mprot) {
		uintptr_t pg = (uintptr_t)target & ~(uintptr_t)4095;

		if (mprotect((void *)pg, 4096, PROT_READ | PROT_WRITE))
			perror("wild: mprotect");
		else
			fprintf(stderr, "wild: mprotect(%p, 4096, RW) done\n",
				(void *)pg);
	}
	fprintf(stderr, "wild: writing %lu word(s) at %p\n", writes, target);
	pthread_create(&t, NULL, wild_thread, target);
	pthread_join(t, NULL);
	fprintf(stderr, "wild: %lu writes done\n", writes);
}

static int tick(void)
{
	return after && __atomic_add_fetch(&count, 1, __ATOMIC_RELAXED) ==
		after;
}

/* WILD_TRIGGER: the test creates PATH when the write is due. */
static void *trigger_thread(void *arg)
{
	struct timespec ts = { 0, 20 * 1000 * 1000 };

	(void)arg;
	for (;;) {
		nanosleep(&ts, NULL);
		if (access(trigger, F_OK))
			continue;
		unlink(trigger);
		pthread_mutex_lock(&env_lock);
		if (lmdb_env)
			fire(lmdb_target());
		else
			fprintf(stderr, "wild: no environment open\n");
		pthread_mutex_unlock(&env_lock);
	}
	return NULL;
}

__attribute__((constructor)) static void wild_init(void)
{
	const char *a = getenv("WILD_AFTER"), *w = getenv("WILD_WRITES");
	const char *d = getenv("WILD_DURING"), *m = getenv("WILD_MPROTECT");

	trigger = getenv("WILD_TRIGGER");
	if (trigger && !*trigger)
		trigger = NULL;

	during = d && !strcmp(d, "1");
	mprot = m && !strcmp(m, "1");
	after = a ? strtoul(a, NULL, 0) : 0;
	writes = w ? strtoul(w, NULL, 0) : 1;
	if (writes < 1 || writes > 256)
		writes = 1;
}

int mdb_env_open(void *env, const char *path, unsigned flags, unsigned mode);
int mdb_env_open(void *env, const char *path, unsigned flags, unsigned mode)
{
	int (*fn)(void *, const char *, unsigned, unsigned) =
		next("mdb_env_open");
	static int started;
	pthread_t t;
	int rc = fn(env, path, flags, mode);

	pthread_mutex_lock(&env_lock);
	if (rc == 0)
		lmdb_env = env;
	pthread_mutex_unlock(&env_lock);
	/* started here, not in the constructor: pmguard's library (preloaded
	 * after this one) is set up by now and sees the thread created */
	if (trigger && !started++ &&
	    pthread_create(&t, NULL, trigger_thread, NULL) == 0)
		pthread_detach(t);
	return rc;
}

void mdb_env_close(void *env);
void mdb_env_close(void *env)
{
	void (*fn)(void *) = next("mdb_env_close");

	pthread_mutex_lock(&env_lock);
	if (lmdb_env == env)
		lmdb_env = NULL;
	pthread_mutex_unlock(&env_lock);
	fn(env);
}

int mdb_txn_commit(void *txn);
int mdb_txn_commit(void *txn)
{
	int (*fn)(void *) = next("mdb_txn_commit");
	int rc;

	/* WILD_DURING=1: while the write transaction is still open */
	if (during && lmdb_env && tick())
		fire(lmdb_target());
	rc = fn(txn);
	if (!during && rc == 0 && lmdb_env && tick())
		fire(lmdb_target());
	return rc;
}

void *pmem_map_file(const char *path, size_t len, int flags, mode_t mode,
		    size_t *ml, int *ip);
void *pmem_map_file(const char *path, size_t len, int flags, mode_t mode,
		    size_t *ml, int *ip)
{
	void *(*fn)(const char *, size_t, int, mode_t, size_t *, int *) =
		next("pmem_map_file");
	void *r = fn(path, len, flags, mode, ml, ip);

	if (r)
		pmem_base = r;
	return r;
}

void *pmem_memcpy_persist(void *d, const void *s, size_t n);
void *pmem_memcpy_persist(void *d, const void *s, size_t n)
{
	void *(*fn)(void *, const void *, size_t) =
		next("pmem_memcpy_persist");
	void *r = fn(d, s, n);

	if (pmem_base && tick())
		fire(pmem_base + 64);
	return r;
}
