// SPDX-License-Identifier: MIT
/*
 * lmdb-multi: several LMDB environments (MDB_WRITEMAP) in one process,
 * for the `pmguard run` tests of one domain per environment.
 * No pmguard header.
 *
 *   lmdb-multi DIR N [--stray I] [--verify]
 *     opens N environments DIR/e00 .. (each 1 MiB, made if missing),
 *     runs a write transaction in each in turn that puts record "r%02d"
 *     (twice over, the value of the whole round); with --stray I, inside
 *     environment I's transaction the thread writes one byte into
 *     environment (I+1) % N's map (the value of its record "k", found
 *     through a read transaction: MDB_WRITEMAP values point into the
 *     map) and prints the byte there after its commit.
 *     --verify: only check every environment's records.
 * Output: "stray: env J byte now 'X'" for --stray; "ok N environments"
 * when everything was written (and read back) as expected.
 * Exit 0 fine, 1 wrong data (printed), 2 usage or an LMDB error.
 */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_ENVS 64
#define CK(x) do { int rc_ = (x); if (rc_) { fprintf(stderr, \
	"lmdb-multi: %s: %s\n", #x, mdb_strerror(rc_)); return 2; } } while (0)

static MDB_env *env[MAX_ENVS];
static MDB_dbi dbi[MAX_ENVS];

static int put(int i, const char *k, const char *v)
{
	MDB_txn *txn;
	MDB_val key = { strlen(k), (void *)k }, val = { strlen(v) + 1,
							  (void *)v };

	CK(mdb_txn_begin(env[i], NULL, 0, &txn));
	CK(mdb_put(txn, dbi[i], &key, &val, 0));
	CK(mdb_txn_commit(txn));
	return 0;
}

/* The value of @k in environment @i, as a pointer into its map. */
static char *get(int i, const char *k)
{
	MDB_txn *txn;
	MDB_val key = { strlen(k), (void *)k }, val;
	char *p = NULL;

	if (mdb_txn_begin(env[i], NULL, MDB_RDONLY, &txn))
		return NULL;
	if (!mdb_get(txn, dbi[i], &key, &val))
		p = val.mv_data;
	mdb_txn_abort(txn);
	return p;
}

int main(int argc, char **argv)
{
	int n, i, stray = -1, verify = 0, bad = 0;
	char path[4096], k[16], v[64];
	MDB_txn *txn;

	if (argc < 3)
		goto usage;
	n = atoi(argv[2]);
	for (i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "--stray") && i + 1 < argc)
			stray = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--verify"))
			verify = 1;
		else
			goto usage;
	}
	if (n < 2 || n > MAX_ENVS || stray >= n)
		goto usage;
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/e%02d", argv[1], i);
		mkdir(path, 0700);
		CK(mdb_env_create(&env[i]));
		CK(mdb_env_set_mapsize(env[i], 1 << 20));
		CK(mdb_env_open(env[i], path, MDB_WRITEMAP, 0600));
		CK(mdb_txn_begin(env[i], NULL, 0, &txn));
		CK(mdb_dbi_open(txn, NULL, 0, &dbi[i]));
		CK(mdb_txn_commit(txn));
		if (!verify) {
			snprintf(v, sizeof(v), "env %02d", i);
			if (put(i, "k", v))
				return 2;
		}
	}
	if (!verify) {
		for (i = 0; i < n; i++) {
			MDB_val key, val;
			char *victim = NULL;

			snprintf(k, sizeof(k), "r%02d", i);
			snprintf(v, sizeof(v), "round of env %02d", i);
			key.mv_size = strlen(k);
			key.mv_data = k;
			val.mv_size = strlen(v) + 1;
			val.mv_data = v;
			if (i == stray)
				victim = get((i + 1) % n, "k");
			CK(mdb_txn_begin(env[i], NULL, 0, &txn));
			CK(mdb_put(txn, dbi[i], &key, &val, 0));
			if (victim) /* the thread holds env i's window */
				*(volatile char *)victim = 'X';
			CK(mdb_txn_commit(txn));
			if (victim)
				printf("stray: env %02d byte now '%c'\n",
				       (i + 1) % n, *victim);
		}
	}
	for (i = 0; i < n; i++) {
		char *p;

		snprintf(v, sizeof(v), "env %02d", i);
		p = get(i, "k");
		if (!p || strcmp(p, v)) {
			printf("env %02d: record k is '%s', want '%s'\n", i,
			       p ? p : "(none)", v);
			bad = 1;
		}
		snprintf(k, sizeof(k), "r%02d", i);
		snprintf(v, sizeof(v), "round of env %02d", i);
		p = get(i, k);
		if (!p || strcmp(p, v)) {
			printf("env %02d: record %s is '%s', want '%s'\n", i, k,
			       p ? p : "(none)", v);
			bad = 1;
		}
	}
	for (i = 0; i < n; i++)
		mdb_env_close(env[i]);
	if (!bad)
		printf("ok %d environments\n", n);
	return bad;
usage:
	fprintf(stderr, "usage: lmdb-multi DIR N [--stray I] [--verify]\n");
	return 2;
}
