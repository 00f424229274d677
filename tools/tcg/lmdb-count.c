// SPDX-License-Identifier: MIT
/*
 * lmdb-count LABEL DIR [N] - LMDB transactions in regions marked for the
 * TCG counting plugin (tools/tcg/count.c), for guest/count-check: run
 * plain (LABEL "plain") and under `pmguard run` (LABEL "run"), the same
 * binary, so that the counts' difference is what the interposition and
 * its windows add to a transaction.
 *
 * Opens (creates) an LMDB environment in DIR with MDB_WRITEMAP (what
 * `pmguard run` protects; docs/run.md), then, each N times (default 200)
 * after one warm-up:
 *   lmdb_put_txn  a write transaction: begin, one mdb_put (a 16-byte key,
 *                 a 64-byte value), commit (LMDB's default sync)
 *   lmdb_get_txn  a read-only transaction: begin, one mdb_get (a key
 *                 written above), abort
 * and prints "region ID LABEL/NAME N" after each region (the format of
 * `pmguard bench count`).  Exit 0, 1 on an LMDB error (named), 2 usage.
 */
#define _GNU_SOURCE
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "marker.h"

enum { R_PUT = 100, R_GET = 101 };

static MDB_env *env;
static MDB_dbi dbi;
static unsigned seq, nput;
static int failed;

static void check(int rc, const char *what)
{
	if (rc && !failed) {
		fprintf(stderr, "lmdb-count: %s: %s\n", what, mdb_strerror(rc));
		failed = 1;
	}
}

static inline __attribute__((always_inline)) void put_txn(void)
{
	char k[16], v[64];
	MDB_val key = { sizeof(k), k }, val = { sizeof(v), v };
	MDB_txn *txn;

	memset(v, 'v', sizeof(v));
	snprintf(k, sizeof(k), "k%014u", seq++);
	check(mdb_txn_begin(env, NULL, 0, &txn), "mdb_txn_begin");
	if (failed)
		return;
	check(mdb_put(txn, dbi, &key, &val, 0), "mdb_put");
	check(mdb_txn_commit(txn), "mdb_txn_commit");
}

static inline __attribute__((always_inline)) void get_txn(void)
{
	char k[16];
	MDB_val key = { sizeof(k), k }, val;
	MDB_txn *txn;

	snprintf(k, sizeof(k), "k%014u", seq++ % nput);
	check(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), "mdb_txn_begin");
	if (failed)
		return;
	check(mdb_get(txn, dbi, &key, &val), "mdb_get");
	mdb_txn_abort(txn);
}

int main(int argc, char **argv)
{
	long n = argc > 3 ? atol(argv[3]) : 200, i;
	MDB_txn *txn;

	if (argc < 3 || argc > 4 || n < 1) {
		fprintf(stderr, "usage: lmdb-count LABEL DIR [N]\n");
		return 2;
	}
	check(mdb_env_create(&env), "mdb_env_create");
	check(mdb_env_set_mapsize(env, 64ul << 20), "mdb_env_set_mapsize");
	check(mdb_env_open(env, argv[2], MDB_WRITEMAP, 0644), argv[2]);
	if (!failed)
		check(mdb_txn_begin(env, NULL, 0, &txn), "mdb_txn_begin");
	if (!failed) {
		check(mdb_dbi_open(txn, NULL, 0, &dbi), "mdb_dbi_open");
		check(mdb_txn_commit(txn), "mdb_txn_commit");
	}
	if (failed)
		return 1;

	put_txn();
	PMG_COUNT_BEGIN(R_PUT);
	for (i = 0; i < n; i++)
		put_txn();
	PMG_COUNT_END(R_PUT);
	printf("region %d %s/lmdb_put_txn %ld\n", R_PUT, argv[1], n);
	nput = seq; /* the reads cycle through the keys written */
	seq = 0;
	get_txn();
	PMG_COUNT_BEGIN(R_GET);
	for (i = 0; i < n; i++)
		get_txn();
	PMG_COUNT_END(R_GET);
	printf("region %d %s/lmdb_get_txn %ld\n", R_GET, argv[1], n);
	mdb_env_close(env);
	return failed;
}
