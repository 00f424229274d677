// SPDX-License-Identifier: MIT
/*
 * lmdb-locks DIR MAXW: the LMDB adapter of `pmguard run` takes no lock on a
 * read-only transaction's path, and none per write transaction once it
 * knows the environment (LMDB's readers are lock-free by design;
 * per-transaction state O(1); no mdb_env_info() per transaction, which the
 * adapter calls only under its lock).  No pmguard header.
 *
 * The program defines pthread_mutex_lock() and pthread_mutex_trylock():
 * an executable's definition comes first in the global scope, so the
 * preload's calls reach it; it counts those whose caller is in
 * libpmguard-run.so (dladdr()) and passes every call on to libc's.
 * Linked with -rdynamic so that the definitions are exported.
 *
 * Under `pmguard run`: mdb_env_open() must show at least one lock of the
 * adapter (the count works: the preload is there and its calls are
 * seen); then 2000 read-only transactions (begin, one mdb_get, abort or
 * commit, alternately, on 1 and then 2 threads) must show none; 200 write
 * transactions at most MAXW: 1 on PKU (the first looks the environment
 * up); on the mprotect backend each window's open and close also take the
 * library's lock (windows are process-wide there), 401.  Prints
 * "ok ..." lines or "not ok ..." with the counts; exit 0 all fine, 1 a
 * count is wrong, 2 usage or an LMDB error.  Plain (no preload): the
 * counts stay 0 and it says so (exit 3: nothing to check).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x)                                                       \
	do {                                                        \
		int rc_ = (x);                                      \
		if (rc_) {                                          \
			fprintf(stderr, "lmdb-locks: %s: %s\n", #x, \
				mdb_strerror(rc_));                 \
			exit(2);                                    \
		}                                                   \
	} while (0)

static unsigned long preload_locks; /* by libpmguard-run.so's code */

static void count_caller(const void *ra)
{
	Dl_info di;

	if (ra && dladdr(ra, &di) && di.dli_fname &&
	    strstr(di.dli_fname, "libpmguard-run"))
		__atomic_add_fetch(&preload_locks, 1, __ATOMIC_RELAXED);
}

int pthread_mutex_lock(pthread_mutex_t *m)
{
	static int (*real)(pthread_mutex_t *);

	if (!real)
		real = (int (*)(pthread_mutex_t *))dlsym(RTLD_NEXT,
							 "pthread_mutex_lock");
	count_caller(__builtin_return_address(0));
	return real(m);
}

int pthread_mutex_trylock(pthread_mutex_t *m)
{
	static int (*real)(pthread_mutex_t *);

	if (!real)
		real = (int (*)(pthread_mutex_t *))
			dlsym(RTLD_NEXT, "pthread_mutex_trylock");
	count_caller(__builtin_return_address(0));
	return real(m);
}

static MDB_env *env;
static MDB_dbi dbi;
/* the threads' start and end (their creation, first steps and exit may
 * take the library's locks: counted outside the measured stretch) */
static int ready, go, done;

static void read_txns(unsigned n)
{
	unsigned i;
	MDB_txn *txn;
	MDB_val k, v;
	char key[16];

	for (i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "k%04u", i % 100);
		k.mv_data = key;
		k.mv_size = strlen(key);
		CK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
		CK(mdb_get(txn, dbi, &k, &v));
		if (i & 1)
			CK(mdb_txn_commit(txn));
		else
			mdb_txn_abort(txn);
	}
}

static void *reader(void *arg)
{
	MDB_txn *txn;

	/* LMDB takes a reader slot at a thread's first read-only
	 * transaction (its own mutex): done before the count */
	CK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	mdb_txn_abort(txn);
	__atomic_add_fetch(&ready, 1, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&go, __ATOMIC_SEQ_CST))
		;
	read_txns((unsigned)(uintptr_t)arg);
	__atomic_add_fetch(&done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static int report(const char *what, unsigned long got, unsigned long lo,
		  unsigned long hi)
{
	bool ok = got >= lo && got <= hi;

	printf("%s %s: %lu lock(s) by the preload (expected %lu..%lu)\n",
	       ok ? "ok" : "not ok", what, got, lo, hi);
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	unsigned long c0, c1;
	pthread_t th[2];
	MDB_txn *txn;
	MDB_val k, v;
	char key[16], val[16];
	unsigned i;
	int bad = 0;

	if (argc != 3)
		return 2;
	CK(mdb_env_create(&env));
	CK(mdb_env_set_mapsize(env, 64ul << 20));
	CK(mdb_env_set_maxreaders(env, 16));
	c0 = __atomic_load_n(&preload_locks, __ATOMIC_RELAXED);
	CK(mdb_env_open(env, argv[1], MDB_WRITEMAP, 0644));
	c1 = __atomic_load_n(&preload_locks, __ATOMIC_RELAXED);
	if (c1 == c0) {
		printf("lmdb-locks: no lock of libpmguard-run.so seen in "
		       "mdb_env_open(): not under pmguard run, or its calls "
		       "not seen\n");
		return 3;
	}
	printf("ok mdb_env_open: %lu lock(s) by the preload (the count "
	       "works)\n",
	       c1 - c0);

	/* 200 write transactions: the first may look the environment up */
	c0 = __atomic_load_n(&preload_locks, __ATOMIC_RELAXED);
	for (i = 0; i < 200; i++) {
		CK(mdb_txn_begin(env, NULL, 0, &txn));
		CK(mdb_dbi_open(txn, NULL, 0, &dbi));
		snprintf(key, sizeof(key), "k%04u", i % 100);
		snprintf(val, sizeof(val), "v%u", i);
		k.mv_data = key;
		k.mv_size = strlen(key);
		v.mv_data = val;
		v.mv_size = strlen(val);
		CK(mdb_put(txn, dbi, &k, &v, 0));
		CK(mdb_txn_commit(txn));
	}
	c1 = __atomic_load_n(&preload_locks, __ATOMIC_RELAXED);
	bad |= report("200 write transactions", c1 - c0, 0,
		      strtoul(argv[2], NULL, 10));

	/* read-only: none at all, on one thread and then two */
	c0 = c1;
	read_txns(2000);
	c1 = __atomic_load_n(&preload_locks, __ATOMIC_RELAXED);
	bad |= report("2000 read-only transactions, 1 thread", c1 - c0, 0, 0);
	for (i = 0; i < 2; i++)
		if (pthread_create(&th[i], NULL, reader,
				   (void *)(uintptr_t)2000))
			return 2;
	while (__atomic_load_n(&ready, __ATOMIC_SEQ_CST) < 2)
		;
	c0 = __atomic_load_n(&preload_locks, __ATOMIC_SEQ_CST);
	__atomic_store_n(&go, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&done, __ATOMIC_SEQ_CST) < 2)
		;
	c1 = __atomic_load_n(&preload_locks, __ATOMIC_SEQ_CST);
	for (i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	bad |= report("2x2000 read-only transactions, 2 threads", c1 - c0, 0,
		      0);
	mdb_env_close(env);
	return bad;
}
