// SPDX-License-Identifier: MIT
/*
 * lmdb-writemap - an LMDB environment opened with MDB_WRITEMAP, guarded by
 * pmguard.
 *
 * MDB_WRITEMAP maps the data file writable: LMDB updates its B-tree pages
 * in place, and so does any stray pointer in the process - a wild write
 * lands in the database file.  Here the map is protected by a pmguard
 * domain: everyone may read it, and it is writable only inside a window
 * that the program opens around each write transaction:
 *
 *	pmg_write_begin(dom);                  window open
 *	mdb_txn_begin(env, NULL, 0, &txn);     write transaction
 *	mdb_put(...); mdb_txn_commit(txn);     LMDB writes the map
 *	pmg_write_end(dom);                    window closed
 *
 * Read transactions need no window.
 *
 * The demonstration: a worker process fills the database, then a second
 * thread makes a wild write into the map.  It faults; in strict mode the
 * worker is stopped before the byte changes.  This process then reopens
 * the database and reads every key back.
 *
 *   PKU:      windows belong to a thread.  The wild write is made while the
 *             worker's main thread has a write transaction (and its window)
 *             open, and it still faults.
 *   mprotect: (the fallback where PKU is missing) windows are process-wide.
 *             The wild write is made with no window open, and faults.  A
 *             wild write made while any thread holds a window is NOT
 *             caught on this backend.
 *
 * Build: cc -Iinclude examples/lmdb-writemap.c libpmguard.a \
 *        -Wl,--wrap=pthread_create -llmdb -lpthread -ldl
 */
#define _GNU_SOURCE
#include <lmdb.h>
#include <pmguard.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#define NKEYS	  200
#define PER_TXN	  10
#define MAPSIZE	  (1UL << 20)

#define MDB_OK(call)							\
	do {								\
		int rc_ = (call);					\
		if (rc_) {						\
			printf("Bail out! %s: %s\n", #call,		\
			       mdb_strerror(rc_));			\
			exit(1);					\
		}							\
	} while (0)

/* What the worker tells this process (a shared page: it may die). */
struct shared {
	int tests;		/* TAP lines the worker printed */
	int pku;		/* backend */
	void *target;		/* address of the wild write */
};

static struct shared *sh;

static void tap(int ok, const char *what)
{
	printf("%s %d - %s\n", ok ? "ok" : "not ok", ++sh->tests, what);
}

static MDB_env *open_env(const char *dir, MDB_dbi *dbi)
{
	MDB_env *env;
	MDB_txn *txn;

	MDB_OK(mdb_env_create(&env));
	MDB_OK(mdb_env_set_mapsize(env, MAPSIZE));
	MDB_OK(mdb_env_open(env, dir, MDB_WRITEMAP, 0600));
	MDB_OK(mdb_txn_begin(env, NULL, 0, &txn));
	MDB_OK(mdb_dbi_open(txn, NULL, 0, dbi));
	MDB_OK(mdb_txn_commit(txn));
	return env;
}

/*
 * The data file's map.  mdb_env_info() gives its size; its me_mapaddr is
 * set only for MDB_FIXEDMAP environments, so the address is the mapping of
 * the data file (device and inode of mdb_env_get_fd()) in /proc/self/maps.
 */
static int find_map(MDB_env *env, void **addr, size_t *len)
{
	MDB_envinfo info;
	struct stat st;
	unsigned long lo, hi, ino, maj, min;
	char line[512];
	mdb_filehandle_t fd;
	FILE *f;
	int found = 0;

	if (mdb_env_info(env, &info) || mdb_env_get_fd(env, &fd) ||
	    fstat(fd, &st) || !(f = fopen("/proc/self/maps", "re")))
		return -1;
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, "%lx-%lx %*s %*s %lx:%lx %lu", &lo, &hi,
			       &maj, &min, &ino) == 5 &&
			maj == major(st.st_dev) && min == minor(st.st_dev) &&
			ino == st.st_ino && hi - lo == info.me_mapsize;
	fclose(f);
	*addr = (void *)lo;
	*len = info.me_mapsize;	/* a multiple of the page size */
	return found ? 0 : -1;
}

static void key_of(int i, char *k, char *v)
{
	snprintf(k, 16, "key-%04d", i);
	snprintf(v, 32, "value %d, kept safe", i);
}

/* Every key, read in one read transaction: no window needed. */
static int read_all(MDB_env *env, MDB_dbi dbi, void **first_value)
{
	char k[16], v[32];
	MDB_txn *txn;
	MDB_val key, val;
	int i, good = 0;

	MDB_OK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	for (i = 0; i < NKEYS; i++) {
		key_of(i, k, v);
		key.mv_size = strlen(k);
		key.mv_data = k;
		if (mdb_get(txn, dbi, &key, &val) == 0 &&
		    val.mv_size == strlen(v) + 1 && !memcmp(val.mv_data, v,
							    val.mv_size))
			good++;
		if (i == 0 && first_value)
			*first_value = val.mv_data;	/* in the map */
	}
	mdb_txn_abort(txn);
	return good;
}

static void *wild_writer(void *target)
{
	memset(target, 0xee, 16);	/* a stray pointer's write */
	return NULL;
}

static void worker(const char *dir, int report_fd)
{
	struct rlimit no_core = { 0, 0 };
	struct pmg_domain *dom;
	char k[16], v[32];
	MDB_env *env;
	MDB_dbi dbi;
	MDB_txn *txn;
	MDB_val key, val;
	pthread_t t;
	void *map;
	size_t len;
	int i, j;

	setrlimit(RLIMIT_CORE, &no_core);	/* strict mode dumps core */
	env = open_env(dir, &dbi);
	if (find_map(env, &map, &len) || pmg_domain_new(&dom, "lmdb", 0) ||
	    pmg_protect(dom, map, len)) {
		printf("Bail out! protecting the map: %s\n", pmg_errormsg());
		exit(1);
	}
	sh->pku = pmg_backend() == PMG_BACKEND_PKU;
	printf("# backend %s; data file map %p, %zu bytes, protected\n",
	       pmg_backend_name(pmg_backend()), map, len);

	/* writes: one window per write transaction */
	for (i = 0; i < NKEYS; i += PER_TXN) {
		pmg_write_begin(dom);
		MDB_OK(mdb_txn_begin(env, NULL, 0, &txn));
		for (j = i; j < i + PER_TXN; j++) {
			key_of(j, k, v);
			key = (MDB_val){ strlen(k), k };
			val = (MDB_val){ strlen(v) + 1, v };
			MDB_OK(mdb_put(txn, dbi, &key, &val, 0));
		}
		MDB_OK(mdb_txn_commit(txn));
		pmg_write_end(dom);
	}
	tap(1, "200 keys written in 20 write transactions, each inside a "
	    "write window");
	tap(read_all(env, dbi, &sh->target) == NKEYS,
	    "all keys read back in a read transaction, no window");

	/* the wild write: strict mode reports it and stops the process */
	pmg_set_report_fd(report_fd);
	pmg_set_fault_mode(PMG_FAULT_STRICT);
	fflush(stdout);
	if (sh->pku) {
		/* a write transaction is open, and its window, in this
		 * thread; the wild thread has no window */
		pmg_write_begin(dom);
		MDB_OK(mdb_txn_begin(env, NULL, 0, &txn));
		key = (MDB_val){ 7, "pending" };
		val = (MDB_val){ 8, "never!" };
		MDB_OK(mdb_put(txn, dbi, &key, &val, 0));
	}
	pthread_create(&t, NULL, wild_writer, sh->target);
	pthread_join(t, NULL);
	tap(0, "the wild write did not fault");
	exit(1);
}

int main(void)
{
	char dir[] = "/tmp/pmguard-lmdb.XXXXXX", path[64], report[4096];
	int fds[2], status, good;
	ssize_t n = 0, r;
	void *ignored;
	MDB_env *env;
	MDB_dbi dbi;
	MDB_stat st;
	pid_t pid;

	setvbuf(stdout, NULL, _IOLBF, 0);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED || !mkdtemp(dir) || pipe(fds))
		return 1;
	printf("1..5\n");
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		worker(dir, fds[1]);
	}
	close(fds[1]);
	while (n < (ssize_t)sizeof(report) - 1 &&
	       (r = read(fds[0], report + n, sizeof(report) - 1 - n)) > 0)
		n += r;
	report[n] = '\0';
	waitpid(pid, &status, 0);

	/* the report (its first line here) names the address; the worker
	 * died by SIGABRT */
	report[strcspn(report, "\n")] = '\0';
	printf("# pmguard's report: %s\n", n ? report : "(none)");
	snprintf(path, sizeof(path), "%p", sh->target);
	if (sh->tests == 2)
		tap(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT &&
		    strstr(report, path),
		    sh->pku ? "wild write from another thread, during a write "
			      "transaction in the main thread: faulted, "
			      "reported at its address, worker stopped"
			    : "wild write from another thread, no window open: "
			      "faulted, reported at its address, worker "
			      "stopped");
	if (!sh->pku)
		printf("# mprotect backend: windows are process-wide, so a "
		       "wild write made while a transaction window is open "
		       "would not be caught (PKU catches it)\n");

	/* reopen and read everything */
	env = open_env(dir, &dbi);
	good = read_all(env, dbi, &ignored);
	tap(good == NKEYS, "reopened: every key reads back intact");
	{
		MDB_txn *txn;

		MDB_OK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
		MDB_OK(mdb_stat(txn, dbi, &st));
		mdb_txn_abort(txn);
	}
	tap(st.ms_entries == NKEYS,
	    "no other entries (an uncommitted put is gone)");
	mdb_env_close(env);

	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/lock.mdb", dir);
	unlink(path);
	rmdir(dir);
	return sh->tests == 5 && good == NKEYS ? 0 : 1;
}
