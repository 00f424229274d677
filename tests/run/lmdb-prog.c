// SPDX-License-Identifier: MIT
/*
 * lmdb-prog: a small LMDB program (MDB_WRITEMAP) for the `pmguard run`
 * tests, in C so that it runs in the guest too.  No pmguard header.
 *
 *   lmdb-prog write DIR TXNS PER [--abort-null | --clearenv]
 *                                  TXNS write transactions of PER records
 *                                  each (key "k%08u", value "v%08u" x 4);
 *                                  --abort-null: mdb_txn_abort(NULL) in
 *                                  each one before its puts (a no-op
 *                                  LMDB allows, and knotd does);
 *                                  --clearenv: clear the environment
 *                                  (as daemons do) and open without
 *                                  MDB_WRITEMAP (for --lmdb-writemap); prints
 *                                  the loop's wall and process CPU time
 *                                  ("lmdb-prog: write time W s, cpu C s",
 *                                  read by `pmguard bench all`)
 *   lmdb-prog read DIR TXNS THREADS  THREADS threads each run TXNS
 *                                  read-only transactions (begin, one
 *                                  mdb_get of a written key, abort; the
 *                                  environment must hold records) and
 *                                  print the throughput and the CPU time
 *                                  of all threads (a benchmark)
 *   lmdb-prog verify DIR N         exactly N records, each intact (N
 *                                  "any": as many as there are)
 *   lmdb-prog reserve DIR FILE     one write transaction: a value of
 *                                  FILE's size put with MDB_RESERVE and
 *                                  filled with one read(2) of FILE (the
 *                                  zero-copy idiom); prints "lmdb-prog:
 *                                  read N of SIZE bytes", exit 1 if N is
 *                                  short; then reads the value back in a
 *                                  read-only transaction, compares it
 *                                  with FILE ("reserved value intact")
 *   lmdb-prog unmap DIR            one write transaction of 10 records,
 *                                  then munmap() the second half of the
 *                                  map (found in /proc/self/maps) and a
 *                                  plain store into record 0's value in
 *                                  the first half, the address printed
 *                                  first ("stray at P");
 *                                  survived: "the stray store landed",
 *                                  exit 1
 * Exit 0 fine, 1 wrong data (printed), 2 usage or an LMDB error.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CK(x) do { int rc_ = (x); if (rc_) { fprintf(stderr, \
	"lmdb-prog: %s: %s\n", #x, mdb_strerror(rc_)); return 2; } } while (0)

static double clock_s(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void kv(unsigned i, char *k, char *v)
{
	snprintf(k, 16, "k%08u", i % 100000000u);
	i %= 100000000u;
	snprintf(v, 40, "v%08uv%08uv%08uv%08u", i, i, i, i);
}

struct reader {
	MDB_env *env;
	MDB_dbi dbi;
	unsigned txns, nrec, seed;
	int rc;
};

static void *reader(void *arg)
{
	struct reader *r = arg;
	MDB_txn *txn;
	MDB_val key, val;
	char k[16], v[40];
	unsigned t;

	for (t = 0; t < r->txns; t++) {
		r->seed = r->seed * 1103515245u + 12345u;
		kv(r->seed % r->nrec, k, v);
		key.mv_data = k;
		key.mv_size = strlen(k);
		if ((r->rc = mdb_txn_begin(r->env, NULL, MDB_RDONLY, &txn)))
			return NULL;
		r->rc = mdb_get(txn, r->dbi, &key, &val);
		mdb_txn_abort(txn);
		if (r->rc)
			return NULL;
	}
	return NULL;
}

/* reserve DIR FILE: a value filled by read(2) in its write transaction */
static int reserve(MDB_env *env, const char *file)
{
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val key = { 3, "big" }, val;
	struct stat st;
	ssize_t got;
	char *want;
	int fd = open(file, O_RDONLY);

	if (fd < 0 || fstat(fd, &st) || !(want = malloc((size_t)st.st_size)) ||
	    pread(fd, want, (size_t)st.st_size, 0) != st.st_size) {
		perror(file);
		return 2;
	}
	CK(mdb_txn_begin(env, NULL, 0, &txn));
	CK(mdb_dbi_open(txn, NULL, 0, &dbi));
	val.mv_size = (size_t)st.st_size;
	val.mv_data = NULL;
	CK(mdb_put(txn, dbi, &key, &val, MDB_RESERVE));
	got = read(fd, val.mv_data, val.mv_size);
	printf("lmdb-prog: read %zd of %zu bytes\n", got, val.mv_size);
	if (got != (ssize_t)val.mv_size) {
		mdb_txn_abort(txn);
		return 1;
	}
	CK(mdb_txn_commit(txn));
	CK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	CK(mdb_get(txn, dbi, &key, &val));
	if (val.mv_size != (size_t)st.st_size ||
	    memcmp(val.mv_data, want, val.mv_size)) {
		printf("lmdb-prog: reserved value wrong\n");
		return 1;
	}
	mdb_txn_abort(txn);
	mdb_env_close(env);
	free(want);
	close(fd);
	printf("lmdb-prog: reserved value intact\n");
	return 0;
}

/* unmap DIR: part of the map taken away, a stray store into the rest */
static int unmap_half(MDB_env *env, const char *dir)
{
	char k[16], v[40], line[4200], want[4200];
	unsigned long lo, hi;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val key, val;
	char *map = NULL;
	size_t len = 0;
	unsigned i;
	FILE *f;

	CK(mdb_txn_begin(env, NULL, 0, &txn));
	CK(mdb_dbi_open(txn, NULL, 0, &dbi));
	for (i = 0; i < 10; i++) {
		kv(i, k, v);
		key.mv_data = k;
		key.mv_size = strlen(k);
		val.mv_data = v;
		val.mv_size = strlen(v);
		CK(mdb_put(txn, dbi, &key, &val, 0));
	}
	CK(mdb_txn_commit(txn));
	/* the target: record 0's value, in the map (MDB_WRITEMAP) */
	kv(0, k, v);
	key.mv_data = k;
	key.mv_size = strlen(k);
	CK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	CK(mdb_get(txn, dbi, &key, &val));
	mdb_txn_abort(txn);
	snprintf(want, sizeof(want), "/data.mdb");
	f = fopen("/proc/self/maps", "r");
	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 &&
		    strstr(line, want) && strstr(line, dir) &&
		    hi - lo > len) {
			map = (char *)lo;
			len = hi - lo;
		}
	}
	if (f)
		fclose(f);
	if (!map || (char *)val.mv_data < map ||
	    (char *)val.mv_data >= map + len / 2 ||
	    munmap(map + len / 2, len / 2))
		return 2;
	printf("lmdb-prog: stray at %p\n", val.mv_data);
	fflush(stdout);
	*(char *)val.mv_data = 'X';
	printf("lmdb-prog: the stray store landed\n");
	return 1;
}

/* read DIR TXNS THREADS: read-only transaction throughput */
static int read_bench(MDB_env *env, unsigned txns, unsigned nthr)
{
	struct reader r[64];
	pthread_t th[64];
	struct timespec a, b;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_stat st;
	double s, c0;
	unsigned i;

	if (!nthr || nthr > 64)
		return 2;
	CK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	CK(mdb_dbi_open(txn, NULL, 0, &dbi));
	CK(mdb_stat(txn, dbi, &st));
	mdb_txn_abort(txn);
	if (!st.ms_entries)
		return 2;
	c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (i = 0; i < nthr; i++) {
		r[i] = (struct reader){ env, dbi, txns, (unsigned)st.ms_entries,
					i + 1, 0 };
		if (pthread_create(&th[i], NULL, reader, &r[i]))
			return 2;
	}
	for (i = 0; i < nthr; i++)
		pthread_join(th[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &b);
	for (i = 0; i < nthr; i++)
		CK(r[i].rc);
	s = (double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
	printf("lmdb-prog: %u threads, %u read-only txns each: %.3f s, "
	       "%.0f txns/s, cpu %.6f s\n", nthr, txns, s,
	       nthr * (double)txns / s, clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0);
	mdb_env_close(env);
	return 0;
}

int main(int argc, char **argv)
{
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val key, val;
	char k[16], v[40];
	unsigned t, i, n = 0, want;

	if (argc < 3)
		return 2;
	CK(mdb_env_create(&env));
	CK(mdb_env_set_mapsize(env, 1ul << 30));
	if (argc == 6 && !strcmp(argv[5], "--clearenv"))
		clearenv();
	CK(mdb_env_open(env, argv[2], argc == 6 &&
			!strcmp(argv[5], "--clearenv") ? 0 : MDB_WRITEMAP,
			0644));
	if (!strcmp(argv[1], "write") && (argc == 5 || argc == 6)) {
		unsigned txns = (unsigned)atoi(argv[3]);
		unsigned per = (unsigned)atoi(argv[4]);
		int abort_null = argc == 6 && !strcmp(argv[5], "--abort-null");
		double w0 = clock_s(CLOCK_MONOTONIC);
		double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);

		for (t = 0; t < txns; t++) {
			CK(mdb_txn_begin(env, NULL, 0, &txn));
			CK(mdb_dbi_open(txn, NULL, 0, &dbi));
			if (abort_null)
				mdb_txn_abort(NULL);
			for (i = 0; i < per; i++) {
				kv(t * per + i, k, v);
				key.mv_data = k;
				key.mv_size = strlen(k);
				val.mv_data = v;
				val.mv_size = strlen(v);
				CK(mdb_put(txn, dbi, &key, &val, 0));
			}
			CK(mdb_txn_commit(txn));
		}
		printf("lmdb-prog: wrote %u records\n", txns * per);
		printf("lmdb-prog: write time %.6f s, cpu %.6f s\n",
		       clock_s(CLOCK_MONOTONIC) - w0,
		       clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0);
		mdb_env_close(env);
		return 0;
	}
	if (!strcmp(argv[1], "unmap") && argc == 3)
		return unmap_half(env, argv[2]);
	if (!strcmp(argv[1], "reserve") && argc == 4)
		return reserve(env, argv[3]);
	if (!strcmp(argv[1], "read") && argc == 5)
		return read_bench(env, (unsigned)atoi(argv[3]),
				  (unsigned)atoi(argv[4]));
	if (strcmp(argv[1], "verify") || argc < 4)
		return 2;
	CK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	CK(mdb_dbi_open(txn, NULL, 0, &dbi));
	{
		MDB_stat st;

		CK(mdb_stat(txn, dbi, &st));
		want = strcmp(argv[3], "any") ? (unsigned)atoi(argv[3])
					      : (unsigned)st.ms_entries;
	}
	for (i = 0; i < want; i++) {
		kv(i, k, v);
		key.mv_data = k;
		key.mv_size = strlen(k);
		if (mdb_get(txn, dbi, &key, &val) || val.mv_size != strlen(v) ||
		    memcmp(val.mv_data, v, val.mv_size)) {
			printf("lmdb-prog: record %u missing or corrupted\n",
			       i);
			return 1;
		}
		n++;
	}
	{
		MDB_stat st;

		CK(mdb_stat(txn, dbi, &st));
		if (st.ms_entries != n) {
			printf("lmdb-prog: %zu entries, expected %u\n",
			       st.ms_entries, n);
			return 1;
		}
	}
	mdb_txn_abort(txn);
	mdb_env_close(env);
	printf("lmdb-prog: %u records intact\n", n);
	return 0;
}
