// SPDX-License-Identifier: MIT
/*
 * LMDB reader threads started before mdb_env_open() that block every
 * signal, then read.  Under `pmguard run` on PKU such a thread died on
 * its first read of an environment whose domain had a key allocated after
 * the thread started (the lazy rights sync is a SIGSEGV it cannot take):
 * the first with no reservation, the fourth when the run library's
 * constructor reserved three keys.  It now reserves every key a
 * write-disabled domain may get, and the environments past them are
 * virtual domains (page protection), which every thread reads.
 * Prints TAP; exit 0 on success.
 * Run by tests/run/test-run.sh (`make run-check`, `make run-vm-check`):
 *   pmguard run -- lmdb-early DIR [N] [--stray I]
 * opens N environments DIR/e00 .. (default 1; each 1 MiB, MDB_WRITEMAP),
 * puts "key" = "value NN" in each, a write transaction on every one in
 * turn (a virtual domain's window takes a key from another), then the
 * thread reads every environment's record.  --stray I: the thread then
 * writes a byte into environment I's value (a pointer into its map):
 * the process must die of SIGSEGV there (the thread cannot take the
 * fault), and "lmdb-early DIR N --verify" (without pmguard run) then
 * finds every record intact.
 */
#define _GNU_SOURCE
#include <lmdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_ENVS 64

static MDB_env *env[MAX_ENVS];
static MDB_dbi dbi[MAX_ENVS];
static int n = 1, stray = -1, up[2], go[2];

/* Environment @i's record: 0 and its value (a pointer into the map), or
 * an LMDB error. */
static int get(int i, MDB_val *v)
{
	MDB_val k = { 3, "key" };
	MDB_txn *t;
	int rc;

	rc = mdb_txn_begin(env[i], NULL, MDB_RDONLY, &t);
	if (rc)
		return rc;
	rc = mdb_get(t, dbi[i], &k, v);
	mdb_txn_abort(t); /* MDB_WRITEMAP: the value stays in the map */
	return rc;
}

static int want(int i, const MDB_val *v)
{
	char w[24];

	snprintf(w, sizeof(w), "value %02d", i);
	return v->mv_size == strlen(w) + 1 && !memcmp(v->mv_data, w, v->mv_size);
}

static void *reader(void *arg)
{
	sigset_t all;
	MDB_val v;
	char c;
	int i, rc, ok = 0;

	(void)arg;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	if (write(up[1], "u", 1) != 1 || read(go[0], &c, 1) != 1)
		return NULL;
	for (i = 0; i < n; i++) {
		rc = get(i, &v);
		if (!rc && want(i, &v))
			ok++;
		else
			printf("# env %02d: rc %d\n", i, rc);
	}
	printf("%s 1 reader thread started before mdb_env_open, all signals "
	       "blocked, reads the record of %d of %d environments\n",
	       ok == n ? "ok" : "not ok", ok, n);
	if (stray >= 0 && !get(stray, &v)) {
		printf("# stray write into env %02d\n", stray);
		*(volatile char *)v.mv_data = 'X';
		printf("not ok 2 the stray write into env %02d went through\n",
		       stray);
	}
	return NULL;
}

static int open_envs(const char *dir)
{
	char path[4096];
	MDB_txn *t;
	int i;

	mkdir(dir, 0700);
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/e%02d", dir, i);
		mkdir(path, 0700);
		if (mdb_env_create(&env[i]) ||
		    mdb_env_set_mapsize(env[i], 1 << 20) ||
		    mdb_env_open(env[i], path, MDB_WRITEMAP, 0600) ||
		    mdb_txn_begin(env[i], NULL, 0, &t) ||
		    mdb_dbi_open(t, NULL, 0, &dbi[i]) || mdb_txn_commit(t)) {
			printf("not ok 1 opening the environment %s\n", path);
			return 1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "/tmp/lmdb-early";
	int i, verify = 0, bad = 0;
	pthread_t th;
	MDB_txn *t;
	MDB_val v;
	char c, val[24];

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 2)
		n = atoi(argv[2]);
	for (i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "--stray") && i + 1 < argc)
			stray = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--verify"))
			verify = 1;
		else
			n = 0;
	}
	if (n < 1 || n > MAX_ENVS || stray >= n) {
		fprintf(stderr, "usage: lmdb-early DIR [N [--stray I | "
				"--verify]]\n");
		return 2;
	}
	if (verify) {
		if (open_envs(dir))
			return 1;
		for (i = 0; i < n; i++)
			if (get(i, &v) || !want(i, &v)) {
				printf("env %02d: record changed or gone\n", i);
				bad = 1;
			}
		if (!bad)
			printf("ok %d environments intact\n", n);
		return bad;
	}
	printf("1..%d\n", stray >= 0 ? 2 : 1);
	if (pipe(up) || pipe(go) ||
	    pthread_create(&th, NULL, reader, NULL) ||
	    read(up[0], &c, 1) != 1)
		return 2;
	if (open_envs(dir))
		return 1;
	for (i = 0; i < n; i++) {
		MDB_val k = { 3, "key" };

		snprintf(val, sizeof(val), "value %02d", i);
		v.mv_size = strlen(val) + 1;
		v.mv_data = val;
		if (mdb_txn_begin(env[i], NULL, 0, &t) ||
		    mdb_put(t, dbi[i], &k, &v, 0) || mdb_txn_commit(t))
			return 3;
	}
	if (write(go[1], "g", 1) != 1 || pthread_join(th, NULL))
		return 4;
	for (i = 0; i < n; i++)
		mdb_env_close(env[i]);
	return 0;
}
