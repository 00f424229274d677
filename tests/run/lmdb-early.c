// SPDX-License-Identifier: MIT
/*
 * An LMDB reader thread started before mdb_env_open() that blocks every
 * signal, then reads.  Under `pmguard run` on PKU it died
 * on its first read (the lazy rights sync is a SIGSEGV it cannot take);
 * the run library's constructor now reserves write-disabled keys before
 * the program starts threads.  Prints TAP; exit 0 on success.
 * Run by tests/run/test-run.sh (`make run-check`, `make run-vm-check`):
 *   pmguard run -- lmdb-early DIR
 */
#define _GNU_SOURCE
#include <lmdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static MDB_env *env;
static int up[2], go[2];

static void *reader(void *arg)
{
	MDB_val k = { 3, "key" }, v = { 0, NULL };
	sigset_t all;
	MDB_txn *t;
	MDB_dbi dbi;
	char c;
	int rc;

	(void)arg;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	if (write(up[1], "u", 1) != 1 || read(go[0], &c, 1) != 1)
		return NULL;
	rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &t);
	if (!rc)
		rc = mdb_dbi_open(t, NULL, 0, &dbi);
	if (!rc)
		rc = mdb_get(t, dbi, &k, &v);
	printf("%s 1 reader thread started before mdb_env_open, all signals "
	       "blocked, reads the record (rc %d)\n",
	       !rc && v.mv_size == 5 && !memcmp(v.mv_data, "value", 5)
		       ? "ok"
		       : "not ok",
	       rc);
	mdb_txn_abort(t);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "/tmp/lmdb-early";
	MDB_val k = { 3, "key" }, v = { 5, "value" };
	pthread_t th;
	MDB_txn *t;
	MDB_dbi dbi;
	char c;

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("1..1\n");
	if (pipe(up) || pipe(go) ||
	    pthread_create(&th, NULL, reader, NULL) ||
	    read(up[0], &c, 1) != 1)
		return 2;
	mkdir(dir, 0700);
	if (mdb_env_create(&env) || mdb_env_set_mapsize(env, 1 << 20) ||
	    mdb_env_open(env, dir, MDB_WRITEMAP, 0600)) {
		printf("not ok 1 opening the environment %s\n", dir);
		return 1;
	}
	if (mdb_txn_begin(env, NULL, 0, &t) ||
	    mdb_dbi_open(t, NULL, 0, &dbi) || mdb_put(t, dbi, &k, &v, 0) ||
	    mdb_txn_commit(t))
		return 3;
	if (write(go[1], "g", 1) != 1 || pthread_join(th, NULL))
		return 4;
	mdb_env_close(env);
	return 0;
}
