// SPDX-License-Identifier: MIT
/*
 * libpmguard-run.so's LMDB adapter: an environment opened with
 * MDB_WRITEMAP (added by --lmdb-writemap, PMGUARD_RUN_LMDB_WRITEMAP) has
 * its whole data map in a domain of its own, "lmdb:PATH"; a write
 * transaction holds a write window on that domain only, on the thread
 * that began it, from mdb_txn_begin() to the end of mdb_txn_commit() /
 * mdb_txn_abort() (nested ones nest): the process's other environments
 * stay protected; read-only transactions are not touched.  The wrapped
 * calls: mdb_env_open(), mdb_env_close(), mdb_env_set_mapsize(),
 * mdb_txn_begin(), mdb_txn_commit(), mdb_txn_abort().
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "../internal.h"
#include "../procfs.h"
#include "libs.h" /* LMDB's, libpmem's, libpmem2's: ours, not theirs */
#include "run.h"

#define MAX_ENVS 256

static struct {
	MDB_env *env;
	void *addr;
	size_t len; /* protected length; 0: not protected */
	struct pmg_domain *dom; /* "lmdb:PATH", from mdb_env_open() to
				   mdb_env_close() */
} envs[MAX_ENVS];
static unsigned long env_gen; /* bumped by each change of envs[] */
static bool warned_nowritemap;
/* PMGUARD_RUN_LMDB_WRITEMAP (--lmdb-writemap), 0 or 1; -1: not read yet */
int run_lmdb_writemap = -1;

/*
 * With a report file: one line per environment opened, protected or not
 * and why, naming the process and the environment's path (made absolute
 * where it can be), so that an operator sees what a run covers.
 */
static void env_said(const char *path, const char *what)
{
	char abs[PATH_MAX];
	const char *p;

	if (!run_rep_named)
		return;
	p = path && realpath(path, abs) ? abs : path ? path : "?";
	run_say("%s (pid %d): LMDB environment %s: %s\n",
		program_invocation_short_name, (int)getpid(), p, what);
}

static int env_slot(MDB_env *env)
{
	int i;

	for (i = 0; i < MAX_ENVS; i++)
		if (envs[i].env == env)
			return i;
	return -1;
}

/*
 * The map's address: LMDB reports it (me_mapaddr) only for MDB_FIXEDMAP,
 * so it is the shared mapping of the data file found in /proc/self/maps
 * (same device and inode as mdb_env_get_fd()'s file), of the map size.
 */
static void *map_of_fd(int fd, size_t len)
{
	struct stat st;
	struct _pmg_map m;
	FILE *f;
	void *found = NULL;

	if (fstat(fd, &st) || !(f = _pmg_maps_open()))
		return NULL;
	while (_pmg_maps_next(f, &m)) {
		if (m.ino == st.st_ino && makedev(m.ma, m.mi) == st.st_dev &&
		    m.off == 0 && m.perms[3] == 's' && m.hi - m.lo >= len) {
			found = (void *)m.lo;
			break;
		}
	}
	fclose(f);
	return found;
}

static void env_info(MDB_env *env, void **addr, size_t *len)
{
	REAL(mdb_env_info);
	REAL(mdb_env_get_fd);
	MDB_envinfo in;
	mdb_filehandle_t fd;

	memset(&in, 0, sizeof(in));
	*addr = NULL;
	*len = 0;
	if (real_mdb_env_info(env, &in) || real_mdb_env_get_fd(env, &fd))
		return;
	*len = PAGE_UP(in.me_mapsize);
	*addr = in.me_mapaddr ? in.me_mapaddr : map_of_fd(fd, *len);
}

/* Protect @env's map as it is now (lock held), in its own domain (made
 * the first time, named after @path). */
static void env_protect(MDB_env *env, int slot, const char *path)
{
	struct pmg_domain *d = envs[slot].dom;
	char abs[PATH_MAX];
	void *addr;
	size_t len;

	if (!d && path) {
		const char *p = realpath(path, abs) ? abs : path;

		d = envs[slot].dom = run_data_domain("lmdb", p);
	}
	env_info(env, &addr, &len);
	envs[slot].env = env;
	envs[slot].addr = addr;
	envs[slot].len = 0;
	__atomic_add_fetch(&env_gen, 1, __ATOMIC_RELEASE);
	if (d && addr && len && !run_protect(d, addr, len, "the LMDB map")) {
		envs[slot].len = len;
		run_protected_one();
	}
}

static void env_unprotect(int slot)
{
	if (envs[slot].len)
		run_unprotect(envs[slot].addr, envs[slot].len, "the LMDB map");
	envs[slot].len = 0;
	__atomic_add_fetch(&env_gen, 1, __ATOMIC_RELEASE);
}

RUN_API int mdb_env_open(MDB_env *env, const char *path, unsigned int flags,
			 mdb_mode_t mode)
{
	REAL(mdb_env_open);
	REAL(mdb_env_get_flags);
	bool added = false;
	unsigned f = 0;
	int rc, slot;

	if (__atomic_load_n(&run_lmdb_writemap, __ATOMIC_ACQUIRE) < 0)
		run_opts_read(); /* a constructor that ran before ours */
	if (run_lmdb_writemap == 1 && !(flags & MDB_RDONLY) &&
	    !(flags & MDB_WRITEMAP)) {
		flags |= MDB_WRITEMAP;
		added = true;
	}
	rc = real_mdb_env_open(env, path, flags, mode);
	if (rc)
		return rc;
	real_mdb_env_get_flags(env, &f);
	pthread_mutex_lock(&run_lock);
	run_modules();
	if (f & MDB_RDONLY) {
		/* the map is read-only to the program anyway */
		env_said(path, "not protected: opened read-only (MDB_RDONLY)");
	} else if (!(f & MDB_WRITEMAP)) {
		if (!warned_nowritemap && !run_rep_named)
			run_say("LMDB environment %s opened without MDB_WRITEMAP: "
				"its map is read-only to the program, pmguard "
				"protects nothing (said once)\n",
				path);
		warned_nowritemap = true;
		env_said(path, "not protected: opened without MDB_WRITEMAP, "
			       "its map is read-only to the program "
			       "(--lmdb-writemap adds it)");
	} else if ((slot = env_slot(NULL)) < 0) {
		run_say("more than %d LMDB environments: %s not protected\n",
			MAX_ENVS, path);
	} else {
		env_protect(env, slot, path);
		if (envs[slot].len) {
			char what[200];

			snprintf(what, sizeof(what),
				 "protected, map %p+%#zx in domain '%s' "
				 "(MDB_WRITEMAP %s)",
				 envs[slot].addr, envs[slot].len,
				 pmg_domain_name(envs[slot].dom),
				 added ? "added by --lmdb-writemap"
				       : "asked by the program");
			env_said(path, what);
		} else {
			env_said(path, "not protected (said above)");
		}
	}
	pthread_mutex_unlock(&run_lock);
	return 0;
}

RUN_API void mdb_env_close(MDB_env *env)
{
	REAL(mdb_env_close);
	int slot;

	pthread_mutex_lock(&run_lock);
	slot = env_slot(env);
	if (slot >= 0) {
		env_unprotect(slot);
		run_data_domain_delete(&envs[slot].dom);
		envs[slot].env = NULL;
	}
	pthread_mutex_unlock(&run_lock);
	real_mdb_env_close(env);
}

/* The map moves or changes size: unprotect, remap, protect again. */
RUN_API int mdb_env_set_mapsize(MDB_env *env, size_t size)
{
	REAL(mdb_env_set_mapsize);
	int rc, slot;

	pthread_mutex_lock(&run_lock);
	slot = env_slot(env);
	if (slot >= 0)
		env_unprotect(slot);
	rc = real_mdb_env_set_mapsize(env, size);
	if (slot >= 0)
		env_protect(env, slot, NULL); /* its domain again */
	pthread_mutex_unlock(&run_lock);
	return rc;
}

/*
 * Per-transaction state, O(1) and without a lock: a write
 * transaction and the ones nested in it live on the thread that began
 * them (LMDB's writer mutex is owned by that thread), so each thread
 * keeps a stack of its own write transactions.  Read-only transactions
 * are never recorded: their mdb_txn_abort()/mdb_txn_commit() see an empty
 * (or foreign) stack and pass through, with no lock taken and no shared
 * cache line written, as LMDB's readers are lock-free by design.
 *
 * Whether an environment is protected: a thread-local cache of the last
 * one asked about, valid while env_gen (bumped under run_lock by every
 * change of the table: mdb_env_open/close/set_mapsize, which LMDB forbids
 * while a transaction of the environment begins) is unchanged.  No
 * mdb_env_info() per transaction: the map moves or changes size only in
 * mdb_env_set_mapsize(), which is wrapped (a size another process set is
 * adopted by calling it, LMDB says so with MDB_MAP_RESIZED).
 */
#define MAX_WTXNS 32

static __thread struct {
	MDB_txn *txn;
	struct pmg_domain *dom; /* its environment's */
} wtx[MAX_WTXNS] __attribute__((tls_model("initial-exec")));
static __thread unsigned nwtx __attribute__((tls_model("initial-exec")));
static __thread struct {
	MDB_env *env;
	unsigned long gen;
	struct pmg_domain *dom;
} env_cache __attribute__((tls_model("initial-exec")));

/* @env's domain if its map is protected, else NULL. */
static struct pmg_domain *env_domain(MDB_env *env)
{
	unsigned long g = __atomic_load_n(&env_gen, __ATOMIC_ACQUIRE);
	struct pmg_domain *d = NULL;
	int slot;

	if (env_cache.env == env && env_cache.gen == g)
		return env_cache.dom;
	pthread_mutex_lock(&run_lock);
	g = env_gen;
	slot = env_slot(env);
	if (slot >= 0 && envs[slot].len)
		d = envs[slot].dom;
	pthread_mutex_unlock(&run_lock);
	env_cache.env = env;
	env_cache.gen = g;
	env_cache.dom = d;
	return d;
}

/*
 * A read-only transaction's path through the wrappers is a load, two
 * tests and a tail call each, with no stack frame: the lookup of the real
 * function (its first call) and what a write transaction needs are out of
 * line.  With both inline gcc saved six registers and set up a 256-byte
 * frame before the test, on every read-only transaction too.
 */
typedef int (*txn_begin_fn)(MDB_env *, MDB_txn *, unsigned int, MDB_txn **);
typedef int (*txn_commit_fn)(MDB_txn *);
typedef void (*txn_abort_fn)(MDB_txn *);

static txn_begin_fn real_begin;
static txn_commit_fn real_commit;
static txn_abort_fn real_abort;

static __attribute__((noinline)) int
txn_begin_slow(MDB_env *env, MDB_txn *parent, unsigned int flags,
	       MDB_txn **txn)
{
	struct pmg_domain *d;
	int rc;

	if (!real_begin)
		real_begin = (txn_begin_fn)run_next("mdb_txn_begin");
	if ((flags & MDB_RDONLY) || !(d = env_domain(env)))
		return real_begin(env, parent, flags, txn);
	if (nwtx == MAX_WTXNS) {
		run_say("more than %d write transactions nested in one thread: "
			"one runs without a window\n",
			MAX_WTXNS);
		return real_begin(env, parent, flags, txn);
	}
	rc = pmg_open(d, PMG_WRITE);
	if (rc) {
		run_say("cannot open the write window: %s\n", pmg_errormsg());
		return real_begin(env, parent, flags, txn);
	}
	rc = real_begin(env, parent, flags, txn);
	if (rc) {
		pmg_close(d, PMG_WRITE);
		return rc;
	}
	wtx[nwtx].txn = *txn;
	wtx[nwtx++].dom = d;
	return 0;
}

RUN_API int mdb_txn_begin(MDB_env *env, MDB_txn *parent, unsigned int flags,
			  MDB_txn **txn)
{
	txn_begin_fn f = real_begin;

	if (f && (flags & MDB_RDONLY))
		return f(env, parent, flags, txn);
	return txn_begin_slow(env, parent, flags, txn);
}

/*
 * Forget @txn and the write transactions nested in it (begun after it on
 * this thread: above it on the stack; commit and abort end those too):
 * their windows' domains into @d (their environment's, one each); returns
 * how many windows to close.  Done before the real call: the handle may
 * be reused as soon as it is freed.
 */
static unsigned txn_forget(MDB_txn *txn, struct pmg_domain **d)
{
	unsigned i, n, j;

	/* mdb_txn_abort(NULL) is a no-op LMDB allows (knotd calls it);
	 * a read-only transaction: not on the stack */
	if (!txn || !nwtx)
		return 0;
	for (i = nwtx; i-- > 0;)
		if (wtx[i].txn == txn) {
			n = nwtx - i;
			for (j = 0; j < n; j++)
				d[j] = wtx[i + j].dom;
			nwtx = i;
			return n;
		}
	return 0;
}

static __attribute__((noinline)) int txn_commit_slow(MDB_txn *txn)
{
	struct pmg_domain *d[MAX_WTXNS];
	unsigned n;
	int rc;

	if (!real_commit)
		real_commit = (txn_commit_fn)run_next("mdb_txn_commit");
	n = txn_forget(txn, d);
	rc = real_commit(txn);
	while (n-- > 0)
		pmg_close(d[n], PMG_WRITE);
	return rc;
}

RUN_API int mdb_txn_commit(MDB_txn *txn)
{
	txn_commit_fn f = real_commit;

	/* txn_forget()'s own test: no write transaction on this thread */
	if (f && (!txn || !nwtx))
		return f(txn);
	return txn_commit_slow(txn);
}

static __attribute__((noinline)) void txn_abort_slow(MDB_txn *txn)
{
	struct pmg_domain *d[MAX_WTXNS];
	unsigned n;

	if (!real_abort)
		real_abort = (txn_abort_fn)run_next("mdb_txn_abort");
	n = txn_forget(txn, d);
	real_abort(txn);
	while (n-- > 0)
		pmg_close(d[n], PMG_WRITE);
}

RUN_API void mdb_txn_abort(MDB_txn *txn)
{
	txn_abort_fn f = real_abort;

	if (f && (!txn || !nwtx))
		f(txn);
	else
		txn_abort_slow(txn);
}
