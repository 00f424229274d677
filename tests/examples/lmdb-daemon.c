// SPDX-License-Identifier: MIT
/*
 * lmdb-daemon: a stand-in for an LMDB server (MDB_WRITEMAP) started by a
 * systemd unit, for tests/examples/test-systemd.py.  No pmguard header, no
 * pmguard library: pmguard reaches it through the unit's command line.
 *
 *   lmdb-daemon DIR [MS [PER]]  open DIR (MDB_WRITEMAP, MDB_NOSYNC),
 *                          then one write transaction every MS
 *                          milliseconds (default 10) putting the next PER
 *                          records (default 3; record i: key "k%08u",
 *                          value "v%08u" x 4, as tests/run/lmdb-prog)
 *                          until SIGTERM or SIGINT; prints "ready" after
 *                          the first commit and "stopped after N
 *                          records" at the end.  3 records a commit: at
 *                          the 20th commit (the injector's WILD_AFTER in
 *                          the test) the root is one leaf page whose
 *                          upper half, where tests/run/wild.c writes,
 *                          holds records that later commits copy on
 *   lmdb-daemon verify DIR N   at least N records (0: any number), each
 *                          intact, and no gap
 * Exit 0 fine, 1 wrong data (printed), 2 usage or an LMDB error.
 */
#include <lmdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(x) do { int rc_ = (x); if (rc_) { fprintf(stderr, \
	"lmdb-daemon: %s: %s\n", #x, mdb_strerror(rc_)); return 2; } } while (0)

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static void kv(unsigned i, char *k, char *v)
{
	snprintf(k, 16, "k%08u", i % 100000000u);
	i %= 100000000u;
	snprintf(v, 40, "v%08uv%08uv%08uv%08u", i, i, i, i);
}

static int verify(MDB_env *env, unsigned want)
{
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_cursor *cur;
	MDB_val key, val;
	char k[16], v[40];
	unsigned n = 0;
	int rc;

	CK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	CK(mdb_dbi_open(txn, NULL, 0, &dbi));
	CK(mdb_cursor_open(txn, dbi, &cur));
	while ((rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) == 0) {
		kv(n, k, v);
		if (key.mv_size != strlen(k) || memcmp(key.mv_data, k, key.mv_size) ||
		    val.mv_size != strlen(v) || memcmp(val.mv_data, v, val.mv_size)) {
			printf("record %u: wrong key or value\n", n);
			return 1;
		}
		n++;
	}
	if (rc != MDB_NOTFOUND)
		CK(rc);
	mdb_txn_abort(txn);
	printf("lmdb-daemon: %u records intact\n", n);
	return n >= want ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_term };
	struct timespec ts;
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val key, val;
	char k[16], v[40];
	unsigned i = 0, j, ms = 10, per = 3;
	int verifying = argc == 4 && !strcmp(argv[1], "verify");
	const char *dir = verifying ? argv[2] : argv[1];

	if (argc < 2 || (!verifying && argc > 4))
		return 2;
	if (!verifying && argc >= 3)
		ms = (unsigned)strtoul(argv[2], NULL, 10);
	if (!verifying && argc == 4)
		per = (unsigned)strtoul(argv[3], NULL, 10);
	setvbuf(stdout, NULL, _IOLBF, 0);
	CK(mdb_env_create(&env));
	CK(mdb_env_set_mapsize(env, 1ul << 28));
	CK(mdb_env_open(env, dir, MDB_WRITEMAP | MDB_NOSYNC, 0644));
	if (verifying)
		return verify(env, (unsigned)strtoul(argv[3], NULL, 10));
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (long)(ms % 1000) * 1000000;
	while (!stop) {
		CK(mdb_txn_begin(env, NULL, 0, &txn));
		CK(mdb_dbi_open(txn, NULL, 0, &dbi));
		for (j = 0; j < per; j++, i++) {
			kv(i, k, v);
			key.mv_data = k;
			key.mv_size = strlen(k);
			val.mv_data = v;
			val.mv_size = strlen(v);
			CK(mdb_put(txn, dbi, &key, &val, 0));
		}
		CK(mdb_txn_commit(txn));
		if (i == per)
			printf("ready\n");
		nanosleep(&ts, NULL);
	}
	mdb_env_close(env);
	printf("stopped after %u records\n", i);
	return 0;
}
