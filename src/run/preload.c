// SPDX-License-Identifier: MIT
/*
 * libpmguard-run.so: the interposition library behind `pmguard run` and
 * `pmguard learn` (docs/run.md).  Preloaded into an unmodified, dynamically
 * linked program, it wraps the public calls of liblmdb, libpmem and
 * libpmem2 (looked up with dlsym(RTLD_NEXT): an adapter does nothing until
 * its library is loaded and called) and protects their mappings with
 * pmguard domains:
 *  - LMDB: an environment opened with MDB_WRITEMAP has its whole data map
 *    in a domain of its own, "lmdb:PATH"; a write transaction holds a
 *    write window on that domain only, on the thread that began it, from
 *    mdb_txn_begin() to the end of mdb_txn_commit() / mdb_txn_abort()
 *    (nested ones nest): the process's other environments stay
 *    protected; read-only transactions are not touched;
 *  - libpmem / libpmem2: every mapping is in a domain of its own,
 *    "pmem:PATH" or "pmem2:ADDRESS"; the copy calls run through
 *    pmg_memcpy() and family, which open the window on the destination's
 *    domain themselves; flush, drain and persist pass through.
 * Past the hardware keys (15, fewer when other code holds some) the
 * domains are virtual: a transaction's window gets its environment a key
 * (pmguard(7), "Virtual domains").
 * Everything else of the library (fault modes, reports) is pmguard's own,
 * linked in whole; only the wrapped calls and pthread_create are exported.
 *
 * Environment (set by `pmguard run` / `pmguard learn`):
 *   PMGUARD_RUN_ALLOW=FILE        grant the sites of FILE (sites.c)
 *   PMGUARD_RUN_LEARN=PATH:DEV:INO  append the audit sites to PATH at
 *                                 exit, if it is still that file (the
 *                                 launcher's memfd, /proc/PID/fd/N)
 *   PMGUARD_RUN_LMDB_WRITEMAP=1   add MDB_WRITEMAP to every mdb_env_open()
 *   PMGUARD_RUN_REPORT=FILE       fault reports (and module lines) to FILE
 *                                 (stderr, said, in a process that cannot
 *                                 open it),
 *                                 opened by each process itself
 *                                 (close-on-exec, a high fd, verified
 *                                 before each report, reopened if the
 *                                 program closed it)
 *   PMGUARD_RUN_STATUS=PATH:DEV:INO  a byte appended to PATH (if still
 *                                 that file) by each process that
 *                                 protected something (the launcher says
 *                                 "nothing was protected" once if none did)
 *   PMGUARD_RUN_CONFIRM=FD:DEV:INO:PID:RFD  the launcher's pipe (FD, or
 *                                 /proc/PID/fd/RFD if FD was closed): one
 *                                 byte once the
 *                                 library is loaded and initialised (the
 *                                 launcher refuses a run that never says
 *                                 so); then closed and unset
 * A bad value of these or of the library's PMGUARD_* variables, or a
 * failed pmg_init(), ends the process before main() with exit 127 and a
 * message: never an unprotected run.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "../internal.h"
#include "../options.h"
#include "../procfs.h"
#include "../sites.h"

#include "libs.h"	/* LMDB's, libpmem's, libpmem2's: ours, not theirs */

#define RUN_API __attribute__((visibility("default")))
#define PAGE_UP(n) (((n) + PMG_PAGE_SIZE - 1) & ~(PMG_PAGE_SIZE - 1))

static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER;
static bool rep_file;		/* a report file: module lines go there */
static bool rep_named;		/* a report file or syslog: each LMDB
				 * environment and pmem mapping named */
static char status_path[PATH_MAX];	/* PMGUARD_RUN_STATUS */
static bool status_done;	/* this process (or its parent) said so */

/* A line on the report fd, as long as it is the file it was (report.c). */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	static const char pre[] = "pmguard-run: ";
	char buf[1024];
	va_list ap;
	int fd = _pmg_report_fd(), n;

	if (fd < 0)
		return;
	memcpy(buf, pre, sizeof(pre) - 1);
	va_start(ap, fmt);
	n = vsnprintf(buf + sizeof(pre) - 1, sizeof(buf) - sizeof(pre) + 1,
		      fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	n += (int)sizeof(pre) - 1;
	if ((size_t)n >= sizeof(buf))
		n = sizeof(buf) - 1;
	/* a file, a terminal, or a syslog socket (a message per line) */
	_pmg_report_write(fd, buf, (size_t)n);
}

/*
 * PATH:DEV:INO, the launcher's scratch file (a memfd as /proc/PID/fd/N,
 * or a temporary file): false if malformed.
 */
static bool spec_parse(const char *spec, char *path, size_t n,
		       unsigned long long *dev, unsigned long long *ino)
{
	const char *c2 = strrchr(spec, ':'), *c1;
	int end = 0;

	if (!c2 || c2 == spec)
		return false;
	for (c1 = c2 - 1; c1 > spec && *c1 != ':'; c1--)
		;
	if (c1 == spec || (size_t)(c1 - spec) >= n)
		return false;
	if (sscanf(c1 + 1, "%llu:%llu%n", dev, ino, &end) != 2 || c1[1 + end])
		return false;
	memcpy(path, spec, (size_t)(c1 - spec));
	path[c1 - spec] = 0;
	return path[0] == '/';
}

/* The scratch file @spec opened for appending, if it is still that file
 * (never a file of a process that reused the launcher's pid), else -1. */
static int spec_open(const char *spec)
{
	unsigned long long dev, ino;
	char path[PATH_MAX];
	struct stat st;
	int fd;

	if (!spec_parse(spec, path, sizeof(path), &dev, &ino))
		return -1;
	fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK |
				O_NOCTTY);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || st.st_dev != (dev_t)dev ||
	    st.st_ino != (ino_t)ino) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Something was protected: tell the launcher once (PMGUARD_RUN_STATUS). */
static void protected_one(void)
{
	int fd;

	if (status_done || !status_path[0])
		return;
	status_done = true;
	fd = spec_open(status_path);
	if (fd < 0)
		return;
	if (write(fd, "p", 1) < 0) {
		/* the launcher says "nothing was protected": wrong, harmless */
	}
	close(fd);
}

/*
 * The real function.  RTLD_NEXT searches the global scope; a library
 * loaded as a dependency of a dlopen()ed module (py-lmdb's extension pulls
 * in liblmdb that way) is only in that module's local scope, so it is
 * then looked up by its soname, already loaded (RTLD_NOLOAD).
 */
static void *next(const char *name)
{
	static const char *const libs[] = { "liblmdb.so.0", "libpmem.so.1",
					    "libpmem2.so.1" };
	void *p = dlsym(RTLD_NEXT, name);
	size_t i;

	for (i = 0; !p && i < sizeof(libs) / sizeof(libs[0]); i++) {
		void *h = dlopen(libs[i], RTLD_NOW | RTLD_NOLOAD);

		if (h) {
			p = dlsym(h, name);
			dlclose(h);
		}
	}
	if (!p) {
		say("%s not found after the preload\n", name);
		abort();
	}
	return p;
}

#define REAL(name) \
	static __typeof__(&name) real_##name; \
	if (!real_##name) \
		real_##name = (__typeof__(&name))next(#name)

/*
 * A domain for one data set: "KIND:PATH" in the 31 characters a name may
 * have (a long path keeps its end: "lmdb:...b/c/data"), blanks and other
 * non-printable characters as '_', and "#N" at the end when another live
 * domain has the name.  NULL (said) if it cannot be made.
 */
static struct pmg_domain *data_domain(const char *kind, const char *path)
{
	char base[PMG_KEY_NAME_MAX], name[PMG_KEY_NAME_MAX];
	struct pmg_domain *d = NULL;
	size_t k = strlen(kind), n = strlen(path), room, i;
	int rc = -EEXIST, tries;

	char tmp[PATH_MAX + 16];

	room = sizeof(base) - 1 - k - 1;
	if (n > room)
		snprintf(tmp, sizeof(tmp), "%s:...%s", kind,
			 path + n - (room - 3));
	else
		snprintf(tmp, sizeof(tmp), "%s:%s", kind, path);
	_pmg_strlcpy(base, tmp, sizeof(base));
	for (i = 0; base[i]; i++)
		if (!isgraph((unsigned char)base[i]))
			base[i] = '_';
	for (tries = 0; tries < 1000 && rc == -EEXIST; tries++) {
		if (tries) {
			char suf[8];
			size_t sl = (size_t)snprintf(suf, sizeof(suf), "#%d",
						     tries);
			size_t bl = strlen(base);

			if (bl + sl >= sizeof(name))
				bl = sizeof(name) - 1 - sl;
			memcpy(name, base, bl);
			memcpy(name + bl, suf, sl + 1);
		} else {
			memcpy(name, base, sizeof(name));
		}
		rc = pmg_domain_new(&d, name, 0);
	}
	if (rc) {
		say("cannot create domain '%s': %s: nothing protected\n", base,
		    pmg_errormsg());
		return NULL;
	}
	return d;
}

static void data_domain_delete(struct pmg_domain **d)
{
	char name[PMG_KEY_NAME_MAX];

	if (!*d)
		return;
	_pmg_strlcpy(name, pmg_domain_name(*d), sizeof(name));
	if (pmg_domain_delete(d))
		say("cannot delete domain '%s': %s\n", name, pmg_errormsg());
	*d = NULL;
}

static int protect(struct pmg_domain *d, void *addr, size_t len,
		   const char *what)
{
	int rc = pmg_protect(d, addr, len);

	if (rc)
		say("cannot protect %s at %p (+%zu): %s\n", what, addr, len,
		    pmg_errormsg());
	return rc;
}

static void unprotect(void *addr, size_t len, const char *what)
{
	int rc = pmg_unprotect(addr, len);

	if (rc)
		say("cannot unprotect %s at %p (+%zu): %s\n", what, addr, len,
		    pmg_errormsg());
}

/* A library loaded since the last look: new module lines, sites. */
static void modules(void)
{
	_pmg_modules_refresh(rep_file ? _pmg_report_fd() : -1);
}

/* ------------------------------------------------------------- LMDB */
#define MAX_ENVS 256

static struct {
	MDB_env *env;
	void *addr;
	size_t len;		/* protected length; 0: not protected */
	struct pmg_domain *dom;	/* "lmdb:PATH", from mdb_env_open() to
				   mdb_env_close() */
} envs[MAX_ENVS];
static unsigned long env_gen;	/* bumped by each change of envs[] */
static bool warned_nowritemap;
/* PMGUARD_RUN_LMDB_WRITEMAP (--lmdb-writemap), 0 or 1; -1: not read yet */
static int lmdb_writemap = -1;

/*
 * With a report file: one line per environment opened, protected or not
 * and why, naming the process and the environment's path (made absolute
 * where it can be), so that an operator sees what a run covers.
 */
static void env_said(const char *path, const char *what)
{
	char abs[PATH_MAX];

	if (!rep_named)
		return;
	say("%s (pid %d): LMDB environment %s: %s\n",
	    program_invocation_short_name, (int)getpid(),
	    path && realpath(path, abs) ? abs : path ? path : "?", what);
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

	if (!d && path)
		d = envs[slot].dom = data_domain(
			"lmdb", realpath(path, abs) ? abs : path);
	env_info(env, &addr, &len);
	envs[slot].env = env;
	envs[slot].addr = addr;
	envs[slot].len = 0;
	__atomic_add_fetch(&env_gen, 1, __ATOMIC_RELEASE);
	if (d && addr && len && !protect(d, addr, len, "the LMDB map")) {
		envs[slot].len = len;
		protected_one();
	}
}

static void env_unprotect(int slot)
{
	if (envs[slot].len)
		unprotect(envs[slot].addr, envs[slot].len, "the LMDB map");
	envs[slot].len = 0;
	__atomic_add_fetch(&env_gen, 1, __ATOMIC_RELEASE);
}

static void run_opts_read(void);

RUN_API int mdb_env_open(MDB_env *env, const char *path, unsigned int flags,
			 mdb_mode_t mode)
{
	REAL(mdb_env_open);
	REAL(mdb_env_get_flags);
	bool added = false;
	unsigned f = 0;
	int rc, slot;

	if (__atomic_load_n(&lmdb_writemap, __ATOMIC_ACQUIRE) < 0)
		run_opts_read();	/* a constructor that ran before ours */
	if (lmdb_writemap == 1 && !(flags & MDB_RDONLY) &&
	    !(flags & MDB_WRITEMAP)) {
		flags |= MDB_WRITEMAP;
		added = true;
	}
	rc = real_mdb_env_open(env, path, flags, mode);
	if (rc)
		return rc;
	real_mdb_env_get_flags(env, &f);
	pthread_mutex_lock(&run_lock);
	modules();
	if (f & MDB_RDONLY) {
		/* the map is read-only to the program anyway */
		env_said(path, "not protected: opened read-only (MDB_RDONLY)");
	} else if (!(f & MDB_WRITEMAP)) {
		if (!warned_nowritemap && !rep_named)
			say("LMDB environment %s opened without MDB_WRITEMAP: "
			    "its map is read-only to the program, pmguard "
			    "protects nothing (said once)\n", path);
		warned_nowritemap = true;
		env_said(path, "not protected: opened without MDB_WRITEMAP, "
			 "its map is read-only to the program "
			 "(--lmdb-writemap adds it)");
	} else if ((slot = env_slot(NULL)) < 0) {
		say("more than %d LMDB environments: %s not protected\n",
		    MAX_ENVS, path);
	} else {
		env_protect(env, slot, path);
		if (envs[slot].len) {
			char what[200];

			snprintf(what, sizeof(what),
				 "protected, map %p+%#zx in domain '%s' "
				 "(MDB_WRITEMAP %s)", envs[slot].addr,
				 envs[slot].len, pmg_domain_name(envs[slot].dom),
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
		data_domain_delete(&envs[slot].dom);
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
 * Per-transaction state, O(1) and without a lock (issue 22): a write
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
	struct pmg_domain *dom;	/* its environment's */
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

RUN_API int mdb_txn_begin(MDB_env *env, MDB_txn *parent, unsigned int flags,
			  MDB_txn **txn)
{
	REAL(mdb_txn_begin);
	struct pmg_domain *d;
	int rc;

	if ((flags & MDB_RDONLY) || !(d = env_domain(env)))
		return real_mdb_txn_begin(env, parent, flags, txn);
	if (nwtx == MAX_WTXNS) {
		say("more than %d write transactions nested in one thread: "
		    "one runs without a window\n", MAX_WTXNS);
		return real_mdb_txn_begin(env, parent, flags, txn);
	}
	rc = pmg_open(d, PMG_WRITE);
	if (rc) {
		say("cannot open the write window: %s\n", pmg_errormsg());
		return real_mdb_txn_begin(env, parent, flags, txn);
	}
	rc = real_mdb_txn_begin(env, parent, flags, txn);
	if (rc) {
		pmg_close(d, PMG_WRITE);
		return rc;
	}
	wtx[nwtx].txn = *txn;
	wtx[nwtx++].dom = d;
	return 0;
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

RUN_API int mdb_txn_commit(MDB_txn *txn)
{
	REAL(mdb_txn_commit);
	struct pmg_domain *d[MAX_WTXNS];
	unsigned n = txn_forget(txn, d);
	int rc;

	rc = real_mdb_txn_commit(txn);
	while (n-- > 0)
		pmg_close(d[n], PMG_WRITE);
	return rc;
}

RUN_API void mdb_txn_abort(MDB_txn *txn)
{
	REAL(mdb_txn_abort);
	struct pmg_domain *d[MAX_WTXNS];
	unsigned n = txn_forget(txn, d);

	real_mdb_txn_abort(txn);
	while (n-- > 0)
		pmg_close(d[n], PMG_WRITE);
}

/* ----------------------------------------------------- libpmem(2) */
#define MAX_MAPS 256
static struct {
	void *addr;
	size_t len;
	struct pmg_domain *dom;	/* its own: "pmem:PATH", "pmem2:ADDRESS" */
} maps[MAX_MAPS];

/* @kind:@name names the mapping's domain (@name: its file, or NULL: its
 * address). */
static void map_add(void *addr, size_t len, const char *what,
		    const char *kind, const char *name)
{
	struct pmg_domain *d = NULL;
	char at[32];
	int i;

	len = PAGE_UP(len);
	pthread_mutex_lock(&run_lock);
	modules();
	for (i = 0; i < MAX_MAPS && maps[i].addr; i++)
		;
	if (i == MAX_MAPS) {
		say("more than %d pmem mappings: %p not protected\n",
		    MAX_MAPS, addr);
		goto out;
	}
	snprintf(at, sizeof(at), "%p", addr);
	d = data_domain(kind, name ? name : at);
	if (!d)
		goto out;
	if (protect(d, addr, len, "the pmem mapping")) {
		data_domain_delete(&d);
		goto out;
	}
	maps[i].addr = addr;
	maps[i].len = len;
	maps[i].dom = d;
	protected_one();
	if (rep_named)
		say("%s (pid %d): %s: protected, map %p+%#zx in domain '%s'\n",
		    program_invocation_short_name, (int)getpid(), what, addr,
		    len, pmg_domain_name(d));
out:
	pthread_mutex_unlock(&run_lock);
}

static void map_del(void *addr)
{
	int i;

	pthread_mutex_lock(&run_lock);
	for (i = 0; i < MAX_MAPS; i++)
		if (maps[i].addr == addr) {
			unprotect(addr, maps[i].len, "the pmem mapping");
			data_domain_delete(&maps[i].dom);
			maps[i].addr = NULL;
			break;
		}
	pthread_mutex_unlock(&run_lock);
}

/*
 * The flags as libpmem(2) takes them: bits it does not know are ignored
 * (its release build does not even check them), so they are dropped here
 * rather than make pmg_mem*() refuse the copy.  The PMEM_F_MEM_* and
 * PMEM2_F_MEM_* bits are pmguard's PMG_F_MEM_* bits (tests/run/libs-abi.c
 * checks it against their headers).
 */
#define FL(fl) ((fl) & PMG_F_MEM_VALID_FLAGS)

/*
 * pmg_mem*() failed: a window that cannot be opened or an msync error, the
 * write maybe not done.  Never a silent loss: say so and abort.
 */
static void *copied(void *ret, void *dest, const char *fn)
{
	if (!ret) {
		say("%s(%p): %s: the write may not have happened; aborting\n",
		    fn, dest, pmg_errormsg());
		abort();
	}
	return dest;
}

RUN_API void *pmem_map_file(const char *path, size_t len, int flags,
			    mode_t mode, size_t *mapped_lenp, int *is_pmemp)
{
	REAL(pmem_map_file);
	size_t ml = 0;
	void *a = real_pmem_map_file(path, len, flags, mode, &ml, is_pmemp);

	if (a) {
		char what[PATH_MAX + 32], abs[PATH_MAX];
		const char *p = realpath(path, abs) ? abs : path;

		snprintf(what, sizeof(what), "pmem_map_file %s", p);
		map_add(a, ml, what, "pmem", p);
	}
	if (mapped_lenp)
		*mapped_lenp = ml;
	return a;
}

RUN_API int pmem_unmap(void *addr, size_t len)
{
	REAL(pmem_unmap);

	map_del(addr);
	return real_pmem_unmap(addr, len);
}

RUN_API void *pmem_memcpy_persist(void *d, const void *s, size_t n)
{
	return copied(pmg_memcpy_persist(d, s, n), d, __func__);
}

RUN_API void *pmem_memmove_persist(void *d, const void *s, size_t n)
{
	return copied(pmg_memmove_persist(d, s, n), d, __func__);
}

RUN_API void *pmem_memset_persist(void *d, int c, size_t n)
{
	return copied(pmg_memset_persist(d, c, n), d, __func__);
}

RUN_API void *pmem_memcpy_nodrain(void *d, const void *s, size_t n)
{
	return copied(pmg_memcpy_nodrain(d, s, n), d, __func__);
}

RUN_API void *pmem_memmove_nodrain(void *d, const void *s, size_t n)
{
	return copied(pmg_memmove_nodrain(d, s, n), d, __func__);
}

RUN_API void *pmem_memset_nodrain(void *d, int c, size_t n)
{
	return copied(pmg_memset_nodrain(d, c, n), d, __func__);
}

RUN_API void *pmem_memcpy(void *d, const void *s, size_t n, unsigned fl)
{
	return copied(pmg_memcpy(d, s, n, FL(fl)), d, __func__);
}

RUN_API void *pmem_memmove(void *d, const void *s, size_t n, unsigned fl)
{
	return copied(pmg_memmove(d, s, n, FL(fl)), d, __func__);
}

RUN_API void *pmem_memset(void *d, int c, size_t n, unsigned fl)
{
	return copied(pmg_memset(d, c, n, FL(fl)), d, __func__);
}

RUN_API int pmem2_map_new(struct pmem2_map **map,
			  const struct pmem2_config *cfg,
			  const struct pmem2_source *src)
{
	REAL(pmem2_map_new);
	REAL(pmem2_map_get_address);
	REAL(pmem2_map_get_size);
	int rc = real_pmem2_map_new(map, cfg, src);

	if (rc == 0)
		map_add(real_pmem2_map_get_address(*map),
			real_pmem2_map_get_size(*map), "pmem2_map_new",
			"pmem2", NULL);
	return rc;
}

RUN_API int pmem2_map_delete(struct pmem2_map **map)
{
	REAL(pmem2_map_delete);
	REAL(pmem2_map_get_address);

	if (map && *map)
		map_del(real_pmem2_map_get_address(*map));
	return real_pmem2_map_delete(map);
}

static void *run2_memcpy(void *d, const void *s, size_t n, unsigned fl)
{
	return copied(pmg_memcpy(d, s, n, FL(fl)), d, "pmem2 memcpy_fn");
}

static void *run2_memmove(void *d, const void *s, size_t n, unsigned fl)
{
	return copied(pmg_memmove(d, s, n, FL(fl)), d, "pmem2 memmove_fn");
}

static void *run2_memset(void *d, int c, size_t n, unsigned fl)
{
	return copied(pmg_memset(d, c, n, FL(fl)), d, "pmem2 memset_fn");
}

RUN_API pmem2_memcpy_fn pmem2_get_memcpy_fn(struct pmem2_map *map)
{
	(void)map;
	return run2_memcpy;
}

RUN_API pmem2_memmove_fn pmem2_get_memmove_fn(struct pmem2_map *map)
{
	(void)map;
	return run2_memmove;
}

RUN_API pmem2_memset_fn pmem2_get_memset_fn(struct pmem2_map *map)
{
	(void)map;
	return run2_memset;
}

/* ---------------------------------------------------------- start, exit */

/* Learn mode: the audit sites, as PATH+0xOFF COUNT SYMBOL, appended. */
static void learn_write(const char *file)
{
	int mfd = memfd_create("pmguard-sites", MFD_CLOEXEC);
	FILE *in, *out;
	char line[512];

	if (mfd < 0)
		return;
	int ofd = spec_open(file);

	pmg_audit_dump(mfd);
	lseek(mfd, 0, SEEK_SET);
	in = fdopen(mfd, "r");
	out = ofd >= 0 ? fdopen(ofd, "a") : NULL;
	if (!in || !out) {
		say("learn: cannot write %s: %s\n", file, strerror(errno));
		if (in)
			fclose(in);
		else
			close(mfd);
		if (out)
			fclose(out);
		else if (ofd >= 0)
			close(ofd);
		return;
	}
	/* one write(2) per line, appended: the processes of a run that
	 * end together never interleave inside a line (a full buffer would
	 * be written at any byte) */
	setvbuf(out, NULL, _IOLBF, PATH_MAX + 512);
	_pmg_modules_refresh(-1);
	/* "pmguard: audit site 0xIP: N stray access(es), domain 'D'" */
	while (fgets(line, sizeof(line), in)) {
		unsigned long ip;
		unsigned long long n;
		char path[PATH_MAX];
		uintptr_t off;
		Dl_info di;

		if (sscanf(line, "pmguard: audit site %lx: %llu", &ip, &n) != 2)
			continue;
		if (!_pmg_module_of(ip, path, sizeof(path), &off)) {
			fprintf(out, "# %#lx %llu (in no module)\n", ip, n);
			continue;
		}
		if (dladdr((void *)ip, &di) && di.dli_sname)
			fprintf(out, "%s+%#lx %llu %s+%#lx\n", path,
				(unsigned long)off, n, di.dli_sname,
				ip - (unsigned long)di.dli_saddr);
		else
			fprintf(out, "%s+%#lx %llu ?\n", path,
				(unsigned long)off, n);
	}
	fclose(in);
	fclose(out);
}

static void run_exit(void)
{
	const char *learn = getenv("PMGUARD_RUN_LEARN");
	uint64_t hits = _pmg_sites_hits();

	if (learn && *learn)
		learn_write(learn);
	if (hits)
		say("%llu write(s) let through at allowed sites\n",
		    (unsigned long long)hits);
}

/*
 * Before main(), nothing has run yet: a fatal error is said on stderr, if
 * stderr is open, and the process ends with 127 (as a program that could
 * not be run), never running unprotected.
 */
static void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2),
						       noreturn));
static void fatal(const char *fmt, ...)
{
	struct stat st;
	char buf[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0 && fstat(2, &st) == 0)
		dprintf(2, "pmguard-run: %.*s: not running %s unprotected "
			"(exit 127)\n", n, buf,
			program_invocation_short_name);
	_exit(127);
}

static void bad_env(const char *msg, void *arg)
{
	(void)arg;
	fatal("%s", msg);
}

/* PMGUARD_RUN_* of the options table, read once at start-up (a program
 * may clear its environment before it opens LMDB). */
static void run_opts_read(void)
{
	struct _pmg_opts o;

	(void)_pmg_opts_from_env_group(&o, _PMG_OPT_RUN, bad_env, NULL);
	__atomic_store_n(&lmdb_writemap, o.run_writemap, __ATOMIC_RELEASE);
}

/*
 * PMGUARD_RUN_CONFIRM=FD:DEV:INO:PID:RFD: the launcher's pipe, if FD is
 * still that pipe; else (a constructor that ran before this one closed
 * the descriptors it inherited) the pipe opened again through the
 * launcher's read end, /proc/PID/fd/RFD, if that is the pipe.
 */
static void confirm(void)
{
	const char *v = getenv("PMGUARD_RUN_CONFIRM");
	unsigned long long dev, ino;
	struct stat st;
	char path[64];
	int fd, pid, rfd, end = 0;

	if (!v)
		return;
	if (sscanf(v, "%d:%llu:%llu:%d:%d%n", &fd, &dev, &ino, &pid, &rfd,
		   &end) != 5 ||
	    v[end] || fd < 0 || pid <= 0 || rfd < 0)
		fatal("PMGUARD_RUN_CONFIRM='%.64s' is not valid: expected "
		      "FD:DEV:INO:PID:RFD", v);
	/* only the launcher's pipe, never a file the number now names */
	if (!(fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) &&
	      st.st_dev == (dev_t)dev && st.st_ino == (ino_t)ino)) {
		snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, rfd);
		fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		if (fd >= 0 && !(fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) &&
				 st.st_dev == (dev_t)dev &&
				 st.st_ino == (ino_t)ino)) {
			close(fd);
			fd = -1;
		}
	}
	if (fd >= 0) {
		if (write(fd, "1", 1) != 1)
			fatal("cannot confirm to pmguard run: %s",
			      strerror(errno));
		close(fd);
	}
	unsetenv("PMGUARD_RUN_CONFIRM");
}

__attribute__((constructor)) static void run_init(void)
{
	const char *rep = getenv("PMGUARD_RUN_REPORT");
	const char *allow = getenv("PMGUARD_RUN_ALLOW");
	const char *st = getenv("PMGUARD_RUN_STATUS");
	const char *learn = getenv("PMGUARD_RUN_LEARN");
	struct _pmg_opts o;
	int rc;

	/* every PMGUARD_* value the library reads, now, not later */
	(void)_pmg_opts_from_env_group(&o, _PMG_OPT_LIB, bad_env, NULL);
	(void)_pmg_opts_from_env_group(&o, _PMG_OPT_PERSIST, bad_env, NULL);
	run_opts_read();
	if (st && *st) {
		char p[PATH_MAX];
		unsigned long long d, i;

		if (strlen(st) >= sizeof(status_path) ||
		    !spec_parse(st, p, sizeof(p), &d, &i))
			fatal("PMGUARD_RUN_STATUS='%.64s' is not valid: "
			      "expected /PATH:DEV:INO", st);
		_pmg_strlcpy(status_path, st, sizeof(status_path));
	}
	if (learn && *learn) {
		char p[PATH_MAX];
		unsigned long long d, i;

		if (!spec_parse(learn, p, sizeof(p), &d, &i))
			fatal("PMGUARD_RUN_LEARN='%.64s' is not valid: "
			      "expected /PATH:DEV:INO", learn);
	}
	if (rep && *rep) {
		rc = _pmg_report_open(rep);
		if (rc == -EINVAL)
			fatal("PMGUARD_RUN_REPORT: %s", pmg_errormsg());
		rep_named = rc >= 0;
		/* module lines are for `pmguard report FILE`, not syslog */
		rep_file = rc >= 0 && strncmp(rep, "syslog:", 7);
		/* this process cannot open it (it dropped privileges, went
		 * into a chroot, lost its terminal): protected all the same,
		 * its reports on stderr, said there */
		if (rc < 0)
			dprintf(2, "pmguard-run: %s: this process (%s, pid %d) "
				"reports on stderr instead\n", pmg_errormsg(),
				program_invocation_short_name, (int)getpid());
	} else if (getenv("PMGUARD_REPORT_FD")) {
		rep_file = rep_named = true;
	}
	rc = pmg_init();
	if (rc)
		fatal("pmg_init: %s", pmg_errormsg());
	/* keys WD in every thread the program creates (domain.c) */
	(void)_pmg_keys_reserve(3);
	if (allow && *allow) {
		rc = _pmg_sites_load(allow);
		if (rc < 0)
			fatal("%s", pmg_errormsg());
	}
	_pmg_modules_refresh(rep_file ? _pmg_report_fd() : -1);
	atexit(run_exit);
	confirm();
}
