// SPDX-License-Identifier: MIT
/*
 * An LMDB program that installs its own signal handlers in main(), after
 * `pmguard run`'s preload constructor installed pmguard's, as slapd does
 * (signal(SIGTRAP, slap_sig_shutdown)) and as crash reporters and
 * Python's faulthandler do for SIGSEGV; then it makes one stray write into
 * its own map, between transactions.  It knows nothing of pmguard.
 *   lmdb-ownsig DIR trap   signal(SIGTRAP, h) only: under --mode contain
 *                          the write is undone, h never called, the
 *                          program goes on: "lmdb-ownsig: ok" and exit 0
 *   lmdb-ownsig DIR segv   also sigaction(SIGSEGV, SA_SIGINFO) whose
 *                          handler prints "lmdb-ownsig: own handler"
 *                          and exits 9: under --mode strict pmguard's
 *                          report and abort, never that handler
 * Run by tests/run/test-run.sh (`make run-check`, `make run-vm-check`).
 */
#define _GNU_SOURCE
#include <lmdb.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static volatile sig_atomic_t traps;

static void on_trap(int sig)
{
	(void)sig;
	traps++;
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	static const char msg[] = "lmdb-ownsig: own handler\n";

	(void)sig;
	(void)si;
	(void)uc;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(8);
	_exit(9);
}

static int put(MDB_env *env, int i)
{
	char kb[16], vb[32];
	MDB_val k, v;
	MDB_txn *t;
	MDB_dbi dbi;

	k.mv_size = (size_t)snprintf(kb, sizeof(kb), "k%05d", i);
	k.mv_data = kb;
	v.mv_size = (size_t)snprintf(vb, sizeof(vb), "value %d", i);
	v.mv_data = vb;
	if (mdb_txn_begin(env, NULL, 0, &t))
		return -1;
	if (mdb_dbi_open(t, NULL, 0, &dbi) || mdb_put(t, dbi, &k, &v, 0)) {
		mdb_txn_abort(t);
		return -1;
	}
	return mdb_txn_commit(t) ? -1 : 0;
}

/* Where record 0's value lies in the map (MDB_WRITEMAP: the page itself). */
static volatile char *record(MDB_env *env)
{
	MDB_val k = { 6, "k00000" }, v = { 0, NULL };
	MDB_txn *t;
	MDB_dbi dbi;
	int rc;

	if (mdb_txn_begin(env, NULL, MDB_RDONLY, &t))
		return NULL;
	rc = mdb_dbi_open(t, NULL, 0, &dbi) || mdb_get(t, dbi, &k, &v);
	mdb_txn_abort(t);
	return rc ? NULL : (volatile char *)v.mv_data;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "/tmp/lmdb-ownsig";
	int segv = argc > 2 && !strcmp(argv[2], "segv");
	volatile char *stray;
	struct sigaction sa;
	MDB_env *env;
	char was;
	int i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (signal(SIGTRAP, on_trap) == SIG_ERR)
		return 2;
	if (segv) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_segv;
		sa.sa_flags = SA_SIGINFO;
		if (sigaction(SIGSEGV, &sa, NULL))
			return 2;
	}
	mkdir(dir, 0700);
	if (mdb_env_create(&env) || mdb_env_set_mapsize(env, 1 << 20) ||
	    mdb_env_open(env, dir, MDB_WRITEMAP, 0600))
		return 3;
	for (i = 0; i < 100; i++)
		if (put(env, i))
			return 4;
	/* a byte of a record's value in the map, between transactions */
	stray = record(env);
	if (!stray)
		return 4;
	was = *stray;
	printf("lmdb-ownsig: stray at %p\n", (void *)stray);
	*stray = (char)(was ^ 0x5a);
	printf("lmdb-ownsig: after the stray write: byte %s, SIGTRAP handler "
	       "called %d times\n",
	       *stray == was ? "unchanged" : "changed", (int)traps);
	if (*stray != was || traps)
		return 5;
	/* the program goes on: more transactions, then its own trap */
	for (i = 100; i < 200; i++)
		if (put(env, i))
			return 6;
	raise(SIGTRAP);
	if (traps != 1)
		return 7;
	mdb_env_close(env);
	printf("lmdb-ownsig: ok\n");
	return 0;
}
