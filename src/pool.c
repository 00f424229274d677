// SPDX-License-Identifier: MIT
/*
 * Persistent-memory pools: a file (fs-DAX or any filesystem) or a
 * device-dax device, mapped shared (MAP_SYNC where supported) and
 * protected by the shared "pmem" domain, the seeds' single PMEM key.  Also
 * the dax_direct_access() / dax_mk_readwrite() / dax_mk_noaccess() /
 * dax_map_protected() analogs, and the pool table that tells the
 * persistence calls which addresses are not pmem (flushed by msync).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <ucontext.h>
#include <unistd.h>

#include "persist.h"
#include "procfs.h"

#ifndef MAP_SHARED_VALIDATE
#define MAP_SHARED_VALIDATE 0x03
#endif
#ifndef MAP_SYNC
#define MAP_SYNC 0x80000
#endif
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define HUGE_ALIGN (2UL << 20)
#define POOL_MAX 1024

struct pmg_pool_config {
	size_t size, offset;
	unsigned flags;
	mode_t mode;
	struct pmg_domain *domain;
};

struct pmg_pool {
	int fd;
	char *addr;
	char *alias;		/* writable second mapping, NULL: none */
	char *alias_resv;	/* its reservation (alias_resv_len()): the
				   guard pages and it, all ours */
	size_t size;		/* usable bytes */
	size_t maplen;		/* page-rounded mapping */
	size_t offset, align;
	struct pmg_domain *dom;	/* NULL: unprotected */
	int shared;		/* index into shared[], -1: caller's domain */
	bool pmem, map_sync, devdax, noaccess;
	char name[96];		/* the path's tail, for use-after-close reports */
	dev_t dev; /* the file's, for a reopen's quarantine */
	ino_t ino;
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

static bool quar_shed(void);
static char *quar_take(struct pmg_pool *p, bool alias, char **alias_resv);

/* A PROT_NONE reservation of @len bytes anywhere; the quarantine is given
 * back first if the address space is short.  MAP_FAILED, errno set. */
static char *reserve(size_t len)
{
	int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
	char *r = mmap(NULL, len, PROT_NONE, flags, -1, 0);

	if (r == MAP_FAILED && errno == ENOMEM && quar_shed())
		r = mmap(NULL, len, PROT_NONE, flags, -1, 0);
	return r;
}

/* fork: held across it (before _pmg.lock, the usual order), so a child
 * never inherits it locked or the pool table half-written. */
void _pmg_pool_fork_prepare(void)
{
	pthread_mutex_lock(&pool_lock);
}

void _pmg_pool_fork_release(void)
{
	pthread_mutex_unlock(&pool_lock);
}

/*
 * The shared domains: [0] "pmem" (write-disabled), [1] "pmem-noaccess".
 * Each is deleted with its last pool and re-created, with its handle in
 * .h each time (a handle allocated per creation would leak 16 bytes per
 * last close and reopen: domain handles are never freed).
 */
static struct {
	struct pmg_domain *d;
	unsigned refs;
	struct pmg_domain h;
} shared[2];

/* --------------------------------------------------------- pool table */

/*
 * The open pools' mappings, sorted: [base, base + maplen), lim the end of
 * the usable bytes, dom 1 if pmem.  Written under pool_lock, read without
 * locks (registry.c's left-right tables: readers never fail).
 */
static struct _pmg_rtab ptab = { .id = _PMG_RT_POOLS };

static int ptab_insert(const struct pmg_pool *p)
{
	struct _pmg_range r = {
		.base = (uintptr_t)p->addr,
		.end = (uintptr_t)p->addr + p->maplen,
		.lim = (uintptr_t)p->addr + p->size,
		.dom = p->pmem,
		.alias = (uintptr_t)p->alias,
	};
	int rc;

	if (_pmg_rt_count(&ptab) >= POOL_MAX)
		return _pmg_err(-EMFILE, "too many pools open (%d)", POOL_MAX);
	rc = _pmg_rt_insert(&ptab, &r);
	if (rc)
		return _pmg_err(rc, "registering the pool at %p: %s", p->addr,
				strerror(-rc));
	return 0;
}

static void ptab_remove(const struct pmg_pool *p)
{
	(void)_pmg_rt_remove(&ptab, (uintptr_t)p->addr, 0, NULL);
}

/*
 * Scan the pools overlapping [a, a+len) (len > 0, no wrap): whether any is
 * not pmem, whether one pmem pool's usable bytes hold it all, and whether
 * it passes the usable end of a pool it starts in or touches (the tail of
 * the last page, or the next pool).  With @iv, the interval around @a in
 * which every such range gets the same answers: one pool's usable bytes
 * (iv->dom: the pool is not pmem; iv->alias: its writable alias, 0: none)
 * or a gap without pools.  Lock-free, AS-safe, never fails.
 */
static void ptab_scan(uintptr_t a, size_t len, bool *any_nonpmem,
		      bool *in_pmem, bool *outside, struct _pmg_range *iv)
{
	uintptr_t end = a + len;
	const struct _pmg_range *r;
	bool np = false, in = false, out = false;
	size_t n, i;
	int slot;

	r = _pmg_rt_enter(&ptab, &n, &slot);
	i = _pmg_rt_search(r, n, a);
	if (iv && _pmg_rt_around(r, n, i, a, iv)) {
		iv->end = r[i].lim;
		iv->dom = !r[i].dom;
	}
	for (; i < n && r[i].base < end; i++) {
		if (!r[i].dom)
			np = true;
		if (a < r[i].base || end > r[i].lim)
			out = true;
		else if (r[i].dom)
			in = true;
	}
	_pmg_rt_leave(&ptab, slot);
	*any_nonpmem = np;
	*in_pmem = in;
	if (outside)
		*outside = out;
}

int _pmg_pool_range_pmem(const void *addr, size_t len)
{
	bool np, in;

	if ((uintptr_t)addr + len < (uintptr_t)addr)
		return 0;
	ptab_scan((uintptr_t)addr, len, &np, &in, NULL, NULL);
	return in;
}

int _pmg_pool_interval(uintptr_t a, size_t len, struct _pmg_range *iv)
{
	bool np, in, out;

	if (a + len < a)
		return -EINVAL;
	ptab_scan(a, len, &np, &in, &out, iv);
	return out ? -ERANGE : 0;
}

/* ------------------------------------------------------------- config */

PMG_API int pmg_pool_config_new(struct pmg_pool_config **cfgp)
{
	struct pmg_pool_config *c;

	if (!cfgp)
		return _pmg_err(-EINVAL, "pmg_pool_config_new: cfgp is NULL");
	c = calloc(1, sizeof(*c));
	*cfgp = c;
	if (!c)
		return _pmg_err(-ENOMEM, "pmg_pool_config_new: out of memory");
	c->mode = 0600;
	return 0;
}

PMG_API int pmg_pool_config_delete(struct pmg_pool_config **cfgp)
{
	if (cfgp) {
		free(*cfgp);
		*cfgp = NULL;
	}
	return 0;
}

/* A setter called with a NULL configuration. */
static int cfg_null(const char *setter)
{
	return _pmg_err(-EINVAL, "%s: cfg is NULL", setter);
}

PMG_API int pmg_pool_config_set_size(struct pmg_pool_config *cfg,
				     size_t size)
{
	if (!cfg)
		return cfg_null(__func__);
	if (size > (size_t)LONG_MAX)
		return _pmg_err(-EINVAL, "pool size %zu does not fit in "
				"off_t", size);
	cfg->size = size;
	return 0;
}

PMG_API int pmg_pool_config_set_offset(struct pmg_pool_config *cfg,
				       size_t offset)
{
	if (!cfg)
		return cfg_null(__func__);
	if (offset % PMG_PAGE_SIZE || offset > (size_t)LONG_MAX)
		return _pmg_err(-EINVAL, "pool offset %zu is not a multiple "
				"of the page size %lu (or too big)", offset,
				PMG_PAGE_SIZE);
	cfg->offset = offset;
	return 0;
}

#define POOL_FLAGS (PMG_POOL_NOACCESS | PMG_POOL_UNPROTECTED | \
		    PMG_POOL_OVERWRITE)

PMG_API int pmg_pool_config_set_flags(struct pmg_pool_config *cfg,
				      unsigned flags)
{
	if (!cfg)
		return cfg_null(__func__);
	if (flags & ~POOL_FLAGS)
		return _pmg_err(-EINVAL, "unknown pool flags %#x",
				flags & ~POOL_FLAGS);
	if ((flags & PMG_POOL_NOACCESS) && (flags & PMG_POOL_UNPROTECTED))
		return _pmg_err(-EINVAL, "PMG_POOL_NOACCESS and "
				"PMG_POOL_UNPROTECTED contradict each other");
	cfg->flags = flags;
	return 0;
}

PMG_API int pmg_pool_config_set_mode(struct pmg_pool_config *cfg,
				     mode_t mode)
{
	if (!cfg)
		return cfg_null(__func__);
	if (mode & ~(mode_t)07777)
		return _pmg_err(-EINVAL, "file mode %#o has bits outside "
				"07777", (unsigned)mode);
	cfg->mode = mode;
	return 0;
}

PMG_API int pmg_pool_config_set_domain(struct pmg_pool_config *cfg,
				       struct pmg_domain *d)
{
	if (!cfg)
		return cfg_null(__func__);
	cfg->domain = d;
	return 0;
}

/* ------------------------------------------------------ shared domains */

static int domain_get(struct pmg_pool *p, const struct pmg_pool_config *c)
{
	int i = (c->flags & PMG_POOL_NOACCESS) ? 1 : 0, rc;

	if (c->flags & PMG_POOL_UNPROTECTED) {
		p->shared = -1;
		return 0;
	}
	if (c->domain) {
		p->dom = c->domain;
		p->shared = -1;
		p->noaccess = _pmg_domain_noaccess(p->dom);
		return 0;
	}
	/*
	 * Left over by a last close that could not delete it (the program
	 * held a window on it), and deleted by the program since (no pool
	 * used it, so pmg_domain_delete() allowed it): a new one, or every
	 * create failed on the dead handle.  Counted first: a delete from
	 * now on is refused.
	 */
	__atomic_add_fetch(&shared[i].refs, 1, __ATOMIC_ACQ_REL);
	/* (a live domain may hold no key: pmg_domain_key() says -ENOKEY) */
	if (shared[i].d && !_pmg_dom_of(shared[i].d))
		__atomic_store_n(&shared[i].d, NULL, __ATOMIC_RELEASE);
	if (!shared[i].d) {
		rc = _pmg_domain_new_at(&shared[i].d,
					i ? "pmem-noaccess" : "pmem",
					i ? PMG_DOMAIN_NOACCESS : 0,
					&shared[i].h);
		if (rc) {
			__atomic_sub_fetch(&shared[i].refs, 1,
					   __ATOMIC_RELEASE);
			return _pmg_err_prefix(rc, "creating the pool domain");
		}
	}
	p->dom = shared[i].d;
	p->shared = i;
	p->noaccess = i;
	return 0;
}

static void domain_put(struct pmg_pool *p)
{
	int i = p->shared;

	if (i < 0 || !shared[i].d)
		return;
	if (__atomic_sub_fetch(&shared[i].refs, 1, __ATOMIC_RELEASE) == 0)
		(void)pmg_domain_delete(&shared[i].d);
}

/*
 * pmg_domain_delete() of @d, the pool layer's shared domain while pools
 * use it, would leave the layer holding a dead domain (every later create
 * failed): refused.  The open pools on @d, 0 if it is not one.  Reads
 * without pool_lock: pmg_domain_delete() holds _pmg.lock, taken after it.
 */
unsigned _pmg_pool_domain_refs(const struct pmg_domain *d)
{
	unsigned i;

	for (i = 0; i < 2 && d; i++)
		if (__atomic_load_n(&shared[i].d, __ATOMIC_ACQUIRE) == d)
			return __atomic_load_n(&shared[i].refs,
					       __ATOMIC_ACQUIRE);
	return 0;
}

/* ------------------------------------------------------------ mapping */

/* Device dax: size and alignment from sysfs, or -ENODEV. */
static int devdax_probe(const char *path, const struct stat *st,
			size_t *size, size_t *align)
{
	unsigned ma = major(st->st_rdev), mi = minor(st->st_rdev);
	char sys[128], link[PATH_MAX], buf[64];
	ssize_t n;
	const char *tail;

	snprintf(sys, sizeof(sys), "/sys/dev/char/%u:%u/subsystem", ma, mi);
	n = readlink(sys, link, sizeof(link) - 1);
	if (n < 0)
		return _pmg_err(-ENODEV, "%s: character device %u:%u is not "
				"device dax (no %s)", path, ma, mi, sys);
	link[n] = '\0';
	tail = strrchr(link, '/');
	tail = tail ? tail + 1 : link;
	if (strcmp(tail, "dax"))
		return _pmg_err(-ENODEV, "%s: character device %u:%u is not "
				"device dax (subsystem %s)", path, ma, mi,
				tail);
	snprintf(sys, sizeof(sys), "/sys/dev/char/%u:%u/size", ma, mi);
	if (_pmg_read_line(sys, buf, sizeof(buf)))
		return _pmg_err(-ENODEV, "%s: cannot read %s", path, sys);
	*size = strtoull(buf, NULL, 0);
	snprintf(sys, sizeof(sys), "/sys/dev/char/%u:%u/device/align", ma,
		 mi);
	if (_pmg_read_line(sys, buf, sizeof(buf))) {
		snprintf(sys, sizeof(sys),
			 "/sys/dev/char/%u:%u/device/dax_region/align", ma,
			 mi);
		if (_pmg_read_line(sys, buf, sizeof(buf)))
			snprintf(buf, sizeof(buf), "%lu", HUGE_ALIGN);
	}
	*align = strtoull(buf, NULL, 0);
	if (!*align || (*align & (*align - 1)))
		return _pmg_err(-ENODEV, "%s: bad device alignment '%s'",
				path, buf);
	return 0;
}

int _pmg_pool_check_align(const char *path, size_t offset, size_t size,
			  size_t align)
{
	if (offset % align)
		return _pmg_err(-EINVAL, "%s: offset %zu is not a multiple of "
				"the device-dax alignment %zu", path, offset,
				align);
	if (size % align)
		return _pmg_err(-EINVAL, "%s: size %zu is not a multiple of "
				"the device-dax alignment %zu", path, size,
				align);
	return 0;
}

/*
 * Place a mapping of @p->maplen bytes of @fd at @p->offset at @a, never
 * over anything else: MAP_FIXED_NOREPLACE fails with EEXIST if another
 * mapping (another thread's) took the place.  MAP_SYNC is tried first; on
 * a filesystem without DAX the kernel refuses it (EOPNOTSUPP, or EINVAL
 * before Linux 4.15) after placing nothing, and the plain shared mapping
 * is tried at the same place, again without replacing anything.  A kernel
 * older than 4.17 takes MAP_FIXED_NOREPLACE as a hint: a mapping placed
 * elsewhere is undone and counts as "taken".  @a NULL: anywhere.
 */
static char *map_at(struct pmg_pool *p, char *a)
{
	int prot = PROT_READ | PROT_WRITE, fixed = a ? MAP_FIXED_NOREPLACE : 0;
	char *m;

	m = mmap(a, p->maplen, prot, MAP_SHARED_VALIDATE | MAP_SYNC | fixed,
		 p->fd, (off_t)p->offset);
	if (m == MAP_FAILED && errno == EOPNOTSUPP && fixed) {
		/*
		 * Linux 6.1 and other kernels whose LEGACY_MAP_MASK lacks
		 * MAP_FIXED_NOREPLACE refuse it with MAP_SHARED_VALIDATE
		 * (EOPNOTSUPP) even on DAX: ask for @a as a hint, which
		 * replaces nothing either; elsewhere counts as taken.
		 */
		m = mmap(a, p->maplen, prot, MAP_SHARED_VALIDATE | MAP_SYNC,
			 p->fd, (off_t)p->offset);
		if (m != MAP_FAILED && m != a) {
			munmap(m, p->maplen);
			errno = EEXIST;
			return MAP_FAILED;
		}
		if (m == MAP_FAILED && errno != EOPNOTSUPP && errno != EINVAL)
			return MAP_FAILED;
	}
	p->map_sync = m != MAP_FAILED;
	if (m == MAP_FAILED && (errno == EOPNOTSUPP || errno == EINVAL))
		m = mmap(a, p->maplen, prot, MAP_SHARED | fixed, p->fd,
			 (off_t)p->offset);
	if (m != MAP_FAILED && a && m != a) {
		munmap(m, p->maplen);
		errno = EEXIST;
		return MAP_FAILED;
	}
	return m;
}

/*
 * Map @p->maplen bytes of @fd at @p->offset, aligned to @p->align.  An
 * aligned place is found with a PROT_NONE reservation, which is given back
 * before the file is mapped there: the library never maps with MAP_FIXED
 * over memory it does not own at that moment (a failed MAP_FIXED mmap
 * unmaps what was there, and another thread's mmap can take the hole).
 * If other threads keep taking the place, a new one is found.
 */
static int map_pool(struct pmg_pool *p, const char *path, char *a)
{
	size_t resv = p->maplen + p->align;
	int tries, e = 0, flags;
	char *r, *m;

	if (a) {
		/* a reopen, over our own reservation (quar_take()), with the
		 * flags that worked before: a refused MAP_SYNC would leave a
		 * hole, not retried there */
		flags = p->map_sync ? MAP_SHARED_VALIDATE | MAP_SYNC
				    : MAP_SHARED;
		m = mmap(a, p->maplen, PROT_READ | PROT_WRITE,
			 flags | MAP_FIXED, p->fd, (off_t)p->offset);
		if (m == a) {
			p->addr = m;
			return 0;
		}
	}
	for (tries = 0; tries < 64; tries++) {
		r = reserve(resv);
		if (r == MAP_FAILED)
			return _pmg_err(-errno, "%s: reserving %zu bytes of "
					"address space: %s", path, resv,
					strerror(errno));
		a = (char *)(((uintptr_t)r + p->align - 1) & ~(p->align - 1));
		munmap(r, resv);
		m = map_at(p, a);
		if (m != MAP_FAILED) {
			p->addr = m;
			return 0;
		}
		e = errno;
		if (e != EEXIST)
			break;
	}
	if (e == EEXIST && !p->devdax) {
		/* alignment is only a help for files: take any place */
		m = map_at(p, NULL);
		if (m != MAP_FAILED) {
			p->addr = m;
			return 0;
		}
		e = errno;
	}
	return _pmg_err(-e, "%s: mmap of %zu bytes at offset %zu: %s", path,
			p->maplen, p->offset, strerror(e));
}

/*
 * The alias (mprotect backend, protected pools): a second mapping of the
 * pool's file, read-write, at an address only the library knows, with
 * PROT_NONE pages on either side.  The persistence calls write through
 * it (persist.c), so they open no window on the pool's own mapping:
 * mprotect(2) of the pages a call touches cost two VMA splits and merges
 * per call (21-30 us here), more than the copy below 2 MiB, and left
 * those pages writable by every thread meanwhile.  Same flags as the
 * pool's mapping (MAP_SYNC on DAX): the same pages, so a flush through
 * the alias flushes the pool's lines.  It is mapped over a PROT_NONE
 * reservation of its own whose ends stay as the guard pages.  No alias
 * (the calls fall back to page windows) if it cannot be mapped, or with
 * PMGUARD_POOL_ALIAS=0.
 */
static size_t alias_resv_len(const struct pmg_pool *p)
{
	return p->maplen + p->align + 2 * PMG_PAGE_SIZE;
}

static char *alias_reserve(const struct pmg_pool *p)
{
	char *r = reserve(alias_resv_len(p));

	return r == MAP_FAILED ? NULL : r;
}

/*
 * Before the pool's own mapping: its reservation takes the place above
 * the pool, which is then mapped below it as it would be without one (the
 * space below stays free, a reopened pool lands where the old one was).
 */
static bool alias_wanted(const struct pmg_pool_config *c)
{
	return !(c->flags & PMG_POOL_UNPROTECTED) && !_pmg_fast &&
	       _pmg_persist_get()->pool_alias;
}

static void alias_prepare(struct pmg_pool *p, const struct pmg_pool_config *c,
			  char *taken)
{
	if (alias_wanted(c))
		p->alias_resv = taken ? taken : alias_reserve(p);
}

static void map_alias(struct pmg_pool *p)
{
	int flags = p->map_sync ? MAP_SHARED_VALIDATE | MAP_SYNC : MAP_SHARED;
	size_t resv = alias_resv_len(p);
	char *r = p->alias_resv, *a, *m;

	p->alias_resv = NULL;
	if (!r)
		return;
	if (!p->dom || _pmg_fast) {
		munmap(r, resv);
		return;
	}
	/*
	 * MAP_FIXED over our own reservation: the place is never free for
	 * another thread to take.  (A hint would not do: the kernel ignores
	 * it for DAX files it aligns to 2 MiB itself.)
	 */
	a = (char *)(((uintptr_t)r + PMG_PAGE_SIZE + p->align - 1) &
		     ~(p->align - 1));
	m = mmap(a, p->maplen, PROT_READ | PROT_WRITE, flags | MAP_FIXED,
		 p->fd, (off_t)p->offset);
	/* the guard pages and the alignment slack stay reserved: ours */
	if (m == a) {
		p->alias = a;
		p->alias_resv = r;
		return;
	}
	/*
	 * A failed MAP_FIXED may or may not have unmapped the middle first:
	 * give back the two ends only, never what may now be another
	 * thread's (at worst the middle stays reserved, PROT_NONE).
	 */
	munmap(r, (size_t)(a - r));
	munmap(a + p->maplen, (size_t)(r + resv - (a + p->maplen)));
}

static void unmap_alias(struct pmg_pool *p)
{
	if (p->alias_resv)
		munmap(p->alias_resv, alias_resv_len(p));
	p->alias = p->alias_resv = NULL;
}

/* Map, register, protect.  On failure everything is undone but the fd. */
static int pool_finish(struct pmg_pool *p, const char *path,
		       const struct pmg_pool_config *c)
{
	const struct _pmg_persist *pp = _pmg_persist_get();
	char *at = NULL, *alias_at = NULL;
	struct stat st;
	size_t n;
	int rc;

	n = strlen(path);
	snprintf(p->name, sizeof(p->name), "%s%s", n >= sizeof(p->name) ?
		 "..." : "", n >= sizeof(p->name) ?
		 path + n - (sizeof(p->name) - 4) : path);
	p->maplen = (p->size + PMG_PAGE_SIZE - 1) & ~(PMG_PAGE_SIZE - 1);
	if (!p->devdax)
		p->align = p->maplen >= HUGE_ALIGN ? HUGE_ALIGN : PMG_PAGE_SIZE;
	/* a reopen of a closed pool: its old places (quarantine) */
	if (!fstat(p->fd, &st)) {
		p->dev = st.st_dev;
		p->ino = st.st_ino;
		at = quar_take(p, alias_wanted(c), &alias_at);
	}
	alias_prepare(p, c, alias_at);
	rc = map_pool(p, path, at);
	if (rc) {
		unmap_alias(p);
		return rc;
	}
	p->pmem = pp->force >= 0 ? pp->force == 1 : (p->devdax || p->map_sync);
	pthread_mutex_lock(&pool_lock);
	rc = domain_get(p, c);
	if (rc)
		goto err_unmap;
	if (p->dom) {
		rc = pmg_protect(p->dom, p->addr, p->maplen);
		if (rc) {
			rc = _pmg_err_prefix(rc, "%s: protecting the mapping",
					     path);
			goto err_dom;
		}
	}
	map_alias(p);
	rc = ptab_insert(p);
	if (rc)
		goto err_prot;
	pthread_mutex_unlock(&pool_lock);
	return 0;
err_prot:
	unmap_alias(p);
	if (p->dom)
		(void)pmg_unprotect(p->addr, p->maplen);
err_dom:
	domain_put(p);
err_unmap:
	pthread_mutex_unlock(&pool_lock);
	unmap_alias(p);
	munmap(p->addr, p->maplen);
	p->addr = NULL;
	return rc;
}

static int stat_err(const char *path, int e, const char *what)
{
	return _pmg_err(-e, "%s: %s: %s", path, what, strerror(e));
}

/*
 * The holder of a lock on the file open as @fd, from /proc/locks (flock
 * and OFD locks name the process that took them): its pid, or 0.
 */
static long lock_holder(int fd)
{
	FILE *f = fopen("/proc/locks", "re");
	char line[256];
	struct stat st;
	long pid = 0;

	if (!f)
		return 0;
	if (fstat(fd, &st)) {
		fclose(f);
		return 0;
	}
	while (fgets(line, sizeof(line), f)) {
		unsigned maj, min;
		unsigned long ino;
		long who;
		char *c = strchr(line, ':');

		/* "1: FLOCK  ADVISORY  WRITE 1234 08:02:5678 0 EOF" */
		if (!c || sscanf(c + 1, " %*s %*s %*s %ld %x:%x:%lu", &who,
				 &maj, &min, &ino) != 4)
			continue;
		if (ino == st.st_ino && makedev(maj, min) == st.st_dev &&
		    who > 0) {
			pid = who;
			break;
		}
	}
	fclose(f);
	return pid;
}

/*
 * One process at a time: an exclusive flock() on the pool's file, held
 * while the pool is open (it goes with the file descriptor: a fork child
 * shares it until it closes its copy or execs, O_CLOEXEC).  A filesystem
 * without flock() (ENOLCK, EINVAL) opens unlocked.
 */
static int lock_pool(int fd, const char *path)
{
	long pid;

	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return 0;
	if (errno != EWOULDBLOCK)
		return 0;
	pid = lock_holder(fd);
	if (pid)
		return _pmg_err(-EBUSY, "%s: the pool is open in process %ld "
				"(it holds the pool's lock; a pool is open "
				"in one process at a time)", path, pid);
	return _pmg_err(-EBUSY, "%s: the pool is open elsewhere (another "
			"process holds the pool's lock; a pool is open in "
			"one process at a time)", path);
}

/* Open @path read-write; fill @p->fd, size/offset/devdax from @c. */
static int pool_open_fd(struct pmg_pool *p, const char *path,
			const struct pmg_pool_config *c)
{
	struct stat st;
	size_t total;
	int rc;

	if (stat(path, &st))
		return stat_err(path, errno, "cannot open the pool");
	if (S_ISDIR(st.st_mode))
		return _pmg_err(-EISDIR, "%s: is a directory, not a pool "
				"file", path);
	if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode))
		return _pmg_err(-ENODEV, "%s: not a regular file or a "
				"device-dax device", path);
	p->fd = open(path, O_RDWR | O_CLOEXEC);
	if (p->fd < 0) {
		int e = errno;

		return _pmg_err(-e, "%s: cannot open read-write (pools are "
				"mapped writable): %s", path, strerror(e));
	}
	if (fstat(p->fd, &st))
		return stat_err(path, errno, "fstat");
	rc = lock_pool(p->fd, path);
	if (rc)
		return rc;
	p->offset = c->offset;
	if (S_ISCHR(st.st_mode)) {
		rc = devdax_probe(path, &st, &total, &p->align);
		if (rc)
			return rc;
		p->devdax = true;
	} else if (S_ISREG(st.st_mode)) {
		total = (size_t)st.st_size;
		if (!total)
			return _pmg_err(-EINVAL, "%s: the file is empty", path);
	} else {
		return _pmg_err(-ENODEV, "%s: not a regular file or a "
				"device-dax device", path);
	}
	if (p->offset >= total)
		return _pmg_err(-ERANGE, "%s: offset %zu is past the end (%zu "
				"bytes)", path, p->offset, total);
	p->size = c->size ? c->size : total - p->offset;
	if (c->size > total - p->offset)
		return _pmg_err(-ERANGE, "%s: the %s is %zu bytes, smaller "
				"than the %zu asked at offset %zu", path,
				p->devdax ? "device" : "file", total,
				c->size, p->offset);
	if (p->devdax)
		return _pmg_pool_check_align(path, p->offset, p->size,
					     p->align);
	return 0;
}

static const struct pmg_pool_config defaults = { .mode = 0600 };

static struct pmg_pool *pool_alloc(void)
{
	struct pmg_pool *p = calloc(1, sizeof(*p));

	if (p)
		p->fd = -1;
	return p;
}

static void pool_free(struct pmg_pool *p)
{
	if (p->fd >= 0)
		close(p->fd);
	free(p);
}

/* pmg_pool_open()'s and pmg_pool_create()'s checks, before the library
 * starts (init.c) and again in _pmg_pool_open() and _pmg_pool_create(). */
int _pmg_pool_checks(struct pmg_pool **pp, const char *path, const char *fn)
{
	if (!pp)
		return _pmg_err(-EINVAL, "%s: pp is NULL", fn);
	*pp = NULL;
	if (!path || !*path)
		return _pmg_err(-EINVAL, "%s: path is NULL or empty", fn);
	return _pmg_persist_env_check();
}

/* pmg_pool_open() (init.c) after the library started. */
int _pmg_pool_open(struct pmg_pool **pp, const char *path,
		   const struct pmg_pool_config *cfg)
{
	struct pmg_pool *p;
	int rc;

	rc = _pmg_pool_checks(pp, path, "pmg_pool_open");
	if (rc)
		return rc;
	if (!cfg)
		cfg = &defaults;
	p = pool_alloc();
	if (!p)
		return _pmg_err(-ENOMEM, "pmg_pool_open: out of memory");
	rc = pool_open_fd(p, path, cfg);
	if (!rc)
		rc = pool_finish(p, path, cfg);
	if (rc) {
		pool_free(p);
		return rc;
	}
	*pp = p;
	return 0;
}

/* A fresh name next to @path: "<dir>/.<base>.pmg-<pid>-<n>". */
static int temp_name(char *buf, size_t size, const char *path)
{
	static unsigned counter;
	const char *slash = strrchr(path, '/');
	int dlen = slash ? (int)(slash - path + 1) : 0;
	int n;

	n = snprintf(buf, size, "%.*s.%s.pmg-%d-%u", dlen, path,
		     slash ? slash + 1 : path, (int)getpid(),
		     __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
	return n > 0 && (size_t)n < size ? 0 : -ENAMETOOLONG;
}

static int allocate(int fd, off_t len)
{
	if (fallocate(fd, 0, 0, len) == 0)
		return 0;
	if (errno != EOPNOTSUPP && errno != ENOSYS)
		return -errno;
	return -posix_fallocate(fd, 0, len);
}

static void fsync_dir(const char *path)
{
	char dir[PATH_MAX];
	int fd;

	_pmg_dir_of(dir, sizeof(dir), path);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
}

/*
 * Temporary files of creates that died: ".<name>.pmg-<pid>-<n>" in @dir
 * whose creator no longer runs (kill(pid, 0): ESRCH) and whose lock
 * nobody holds (a live creator holds it from the start).  Removed on the
 * next create in the directory that needs a named temporary file.  Test
 * hook: _pmg_pool_stale_removed counts them.
 */
unsigned long _pmg_pool_stale_removed;

static bool stale_name(const char *n, long *pid)
{
	const char *t = strstr(n, ".pmg-");
	char *e;

	if (n[0] != '.' || !t)
		return false;
	while (strstr(t + 1, ".pmg-"))
		t = strstr(t + 1, ".pmg-");
	*pid = strtol(t + 5, &e, 10);
	if (*pid <= 0 || *e != '-' || !e[1])
		return false;
	strtoul(e + 1, &e, 10);
	return !*e;
}

static void remove_stale(const char *path)
{
	char d[PATH_MAX];
	struct dirent *e;
	DIR *dd;
	int dfd;

	_pmg_dir_of(d, sizeof(d), path);
	dd = opendir(d);
	if (!dd)
		return;
	dfd = dirfd(dd);
	while ((e = readdir(dd))) {
		long pid;
		int fd;

		if (!stale_name(e->d_name, &pid) || pid == getpid() ||
		    kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		fd = openat(dfd, e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW |
			    O_NONBLOCK);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0 &&
		    unlinkat(dfd, e->d_name, 0) == 0)
			__atomic_add_fetch(&_pmg_pool_stale_removed, 1,
					   __ATOMIC_RELAXED);
		close(fd);
	}
	closedir(dd);
}

/* Test hook: 1 makes creates use a named temporary file, as on a
 * filesystem without O_TMPFILE. */
int _pmg_pool_no_tmpfile;

/*
 * Build the file, blocks allocated and locked: an unnamed O_TMPFILE file
 * in @path's directory where the filesystem has them (a killed create
 * then leaves nothing behind), else the temporary name @tmp (*named set).
 */
static int create_file(struct pmg_pool *p, const char *path, const char *tmp,
		       const struct pmg_pool_config *c, bool *named)
{
	char d[PATH_MAX];
	off_t total;
	int rc, e;

	if (c->offset > (size_t)LONG_MAX - c->size)
		return _pmg_err(-EFBIG, "%s: offset %zu + size %zu does not "
				"fit in off_t", path, c->offset, c->size);
	total = (off_t)(c->offset + c->size);

	*named = false;
	p->fd = -1;
	if (!_pmg_pool_no_tmpfile && access("/proc/self/fd", X_OK) == 0) {
		_pmg_dir_of(d, sizeof(d), path);
		p->fd = open(d, O_TMPFILE | O_RDWR | O_CLOEXEC, c->mode);
		if (p->fd < 0 && errno != EOPNOTSUPP && errno != EISDIR &&
		    errno != EINVAL) {
			e = errno;
			return _pmg_err(-e, "%s: cannot create a file in its "
					"directory: %s", path, strerror(e));
		}
	}
	if (p->fd < 0) {
		remove_stale(path);
		p->fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
			     c->mode);
		if (p->fd < 0) {
			e = errno;
			return _pmg_err(-e, "%s: cannot create a file in its "
					"directory: %s", path, strerror(e));
		}
		*named = true;
	}
	(void)flock(p->fd, LOCK_EX | LOCK_NB);	/* new: nobody else has it */
	rc = allocate(p->fd, total);
	if (rc)
		return _pmg_err(rc, "%s: allocating %lld bytes: %s", path,
				(long long)total, strerror(-rc));
	if (fsync(p->fd))
		return _pmg_err(-errno, "%s: fsync: %s", path,
				strerror(errno));
	p->offset = c->offset;
	p->size = c->size;
	return 0;
}

/* Give the unnamed file @fd the name @to; never replaces (EEXIST). */
static int link_fd(int fd, const char *to)
{
	char proc[64];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (linkat(AT_FDCWD, proc, AT_FDCWD, to, AT_SYMLINK_FOLLOW) == 0)
		return 0;
	if (errno == EEXIST)
		return -1;
	return linkat(fd, "", AT_FDCWD, to, AT_EMPTY_PATH);
}

/*
 * Move the new file into place: atomically, replacing only if @overwrite.
 * @named: it is at @tmp; else it is the unnamed file @fd, linked to @path
 * directly (never replacing) or, to replace, linked to @tmp and renamed.
 */
static int publish(int fd, bool named, const char *tmp, const char *path,
		   bool overwrite)
{
	int e;

	if (!named) {
		if (!overwrite) {
			if (link_fd(fd, path) == 0)
				goto done;
			e = errno;
			goto fail;
		}
		remove_stale(path);
		if (link_fd(fd, tmp)) {
			e = errno;
			return _pmg_err(-e, "%s: naming the new file: %s",
					path, strerror(e));
		}
	}
	if (overwrite) {
		if (rename(tmp, path) == 0)
			goto done;
		e = errno;
		unlink(tmp);
		return _pmg_err(-e, "%s: replacing it: %s", path, strerror(e));
	}
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
		goto done;
	e = errno;
	if (e == EINVAL || e == ENOSYS) {
		/* no RENAME_NOREPLACE here: link() never replaces either */
		if (link(tmp, path) == 0) {
			unlink(tmp);
			goto done;
		}
		e = errno;
	}
fail:
	if (e == EEXIST)
		return _pmg_err(-e, "%s: exists (use PMG_POOL_OVERWRITE to "
				"replace it)", path);
	return _pmg_err(-e, "%s: putting the new file in place: %s", path,
			strerror(e));
done:
	fsync_dir(path);
	return 0;
}

/*
 * An existing pool to be replaced must not be open in another process:
 * its lock is taken (and held, in *@fd, until the replacement is done).
 */
static int lock_existing(const char *path, int *fd)
{
	int rc;

	*fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (*fd < 0)
		return 0;
	rc = lock_pool(*fd, path);
	if (rc) {
		close(*fd);
		*fd = -1;
	}
	return rc;
}

/* --------------------------------------------------------- quarantine */

/*
 * Use after close.  A closed pool's addresses -- its mapping and its
 * alias's reservation -- are not given back to the kernel at once: they
 * are replaced in place by PROT_NONE reservations (MAP_FIXED over our own
 * mappings), so that no later pool, alias or other mmap() lands there
 * while stale pointers into the closed pool may exist.  A stale access
 * faults (SEGV_ACCERR, on both backends) and the fault path reports it
 * naming the closed pool (_pmg_pool_quarantine_fault()); strict aborts.
 *
 * Bounded: at most QUAR_MAX_DEFAULT closed pools and QUAR_BUDGET_DEFAULT
 * bytes of address space; past either, the oldest closed pools are
 * released first (FIFO).  The newest is always kept, however large.  A
 * pool create or open that finds no address space (ENOMEM) releases them
 * all and tries again.  Test hooks: the two limits (budget 0: none kept)
 * and _pmg_pool_quarantined().
 */
#define QUAR_CAP 1024
#define QUAR_MAX_DEFAULT 256
#define QUAR_BUDGET_DEFAULT ((size_t)1 << 40)	/* 1 TiB */

size_t _pmg_pool_quarantine_budget = QUAR_BUDGET_DEFAULT;
unsigned _pmg_pool_quarantine_max = QUAR_MAX_DEFAULT;

static struct {
	uintptr_t b[2];		/* the mapping, the alias's reservation */
	size_t n[2];		/* 0: none */
	char name[96];
	/* the mapping's file, offset and flags: a reopen takes it back */
	dev_t dev;
	ino_t ino;
	size_t offset;
	bool map_sync;
} quar[QUAR_CAP];
static unsigned quar_head, quar_count;	/* oldest; how many (pool_lock) */
static size_t quar_bytes;
/* dom: the quar[] slot; alias: 1 for the alias's reservation */
static struct _pmg_rtab qtab = { .id = _PMG_RT_QUARANTINE };

/* Replace [a, a+n), our mapping, by a PROT_NONE reservation in place. */
static bool make_none(void *a, size_t n)
{
	if (mmap(a, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS |
		 MAP_NORESERVE | MAP_FIXED, -1, 0) == a)
		return true;
	munmap(a, n);	/* a failed MAP_FIXED may have unmapped it: ours */
	return false;
}

/*
 * Whether every page of [@a, @a+@n) is, per /proc/self/maps, a shared
 * mapping of the file @ino, or (@ino 0) an anonymous PROT_NONE reservation: what
 * the library left there and may replace or unmap.  Anything else (the
 * program unmapped it and something else took the place) is not ours to
 * touch.  Without /proc: @dflt.
 */
static bool maps_are(uintptr_t a, size_t n, ino_t ino, bool dflt)
{
	FILE *f = _pmg_maps_open();
	struct _pmg_map m;
	uintptr_t at = a, e = a + n;

	if (!f)
		return dflt;
	while (at < e && _pmg_maps_next(f, &m)) {
		if (m.hi <= at)
			continue;
		if (m.lo > at)
			break;
		/* the file by inode alone: on overlayfs the mapping shows
		 * the underlying file's device, fstat() the overlay's */
		if (ino ? (m.ino != ino || m.perms[3] != 's')
			: (m.ino || m.ma || m.mi || strcmp(m.perms, "---p")))
			break;
		at = m.hi;
	}
	fclose(f);
	return at >= e;
}

/* Release the oldest closed pool's addresses (pool_lock held). */
static void quar_release_oldest(void)
{
	unsigned i = quar_head % QUAR_CAP, k;

	for (k = 0; k < 2; k++) {
		if (!quar[i].n[k])
			continue;
		/* out of the table first: readers are gone when it returns */
		(void)_pmg_rt_remove(&qtab, quar[i].b[k], 0, NULL);
		/* still our reservation (the static library does not see the
		 * program's munmap/MAP_FIXED): else not ours to unmap */
		if (maps_are(quar[i].b[k], quar[i].n[k], 0, true))
			munmap((void *)quar[i].b[k], quar[i].n[k]);
		quar_bytes -= quar[i].n[k];
		quar[i].n[k] = 0;
	}
	quar_head++;
	__atomic_sub_fetch(&quar_count, 1, __ATOMIC_RELAXED);
}

/* Within the limits again; @keep: closed pools that stay regardless. */
static void quar_trim(unsigned keep)
{
	unsigned max = _pmg_pool_quarantine_max;

	if (max > QUAR_CAP)
		max = QUAR_CAP;
	while (quar_count > keep &&
	       (quar_bytes > _pmg_pool_quarantine_budget || quar_count > max ||
		!_pmg_pool_quarantine_budget || !max))
		quar_release_oldest();
}

/*
 * Give the whole quarantine back (ENOMEM: the address space is short),
 * and say so: stale pointers into those closed pools are no longer
 * caught.  (quar_trim(0) releases only past the limits: under them it
 * gave nothing back, and the create failed.)
 */
static bool quar_shed(void)
{
	struct _pmg_buf b = { .n = 0 };
	unsigned n;
	size_t bytes;
	int fd;

	pthread_mutex_lock(&pool_lock);
	n = quar_count;
	bytes = quar_bytes;
	while (quar_count)
		quar_release_oldest();
	pthread_mutex_unlock(&pool_lock);
	fd = n ? _pmg_report_fd() : -1;
	if (fd >= 0) {
		_pmg_buf_str(&b, "pmguard: out of address space (ENOMEM): "
				 "the quarantine of ");
		_pmg_buf_dec(&b, n);
		_pmg_buf_str(&b, " closed pool(s) (");
		_pmg_buf_dec(&b, (int64_t)bytes);
		_pmg_buf_str(&b, " bytes) released to map a pool; stale "
				 "pointers into them are no longer caught\n");
		_pmg_buf_flush(&b, fd);
	}
	return n > 0;
}

/*
 * Quarantine [a[k], a[k]+n[k]) (k = 0, 1; n 0: none), ours and already
 * PROT_NONE, as the closed pool @p's (pool_lock held).  Unmapped at once
 * when the quarantine keeps nothing or the table cannot grow.
 */
static void quar_add(const struct pmg_pool *p, uintptr_t a[2], size_t n[2])
{
	unsigned i, k;

	if (!_pmg_pool_quarantine_budget || !_pmg_pool_quarantine_max ||
	    (!n[0] && !n[1])) {
		quar_trim(0);	/* a lowered limit: none, or fewer, kept */
		goto unmap;
	}
	if (quar_count == QUAR_CAP)
		quar_release_oldest();
	i = (quar_head + quar_count) % QUAR_CAP;
	memcpy(quar[i].name, p->name, sizeof(quar[i].name));
	quar[i].dev = p->dev;
	quar[i].ino = p->ino;
	quar[i].offset = p->offset;
	quar[i].map_sync = p->map_sync;
	for (k = 0; k < 2; k++) {
		struct _pmg_range r = {
			.base = a[k], .end = a[k] + n[k], .lim = a[k] + n[k],
			.dom = (int)i, .alias = k,
		};

		quar[i].n[k] = 0;
		if (!n[k])
			continue;
		if (_pmg_rt_insert(&qtab, &r)) {
			munmap((void *)a[k], n[k]);
			continue;
		}
		quar[i].b[k] = a[k];
		quar[i].n[k] = n[k];
		quar_bytes += n[k];
	}
	__atomic_add_fetch(&quar_count, 1, __ATOMIC_RELAXED);
	quar_trim(1);	/* the newest stays */
	return;
unmap:
	for (k = 0; k < 2; k++)
		if (n[k])
			munmap((void *)a[k], n[k]);
}

/*
 * A reopen of a closed pool -- the same file (device and inode), offset
 * and length -- takes its quarantined mapping back: the pool is mapped at
 * its old address again, over the library's own reservation, so that
 * pointers kept across the close point at the same bytes of the same
 * pool, which is protected again (a stale store outside a window faults
 * as any stray does); its alias takes its old reservation back too.
 * Never another pool's: a writable mapping of another file never lands
 * where pointers into a closed pool may point.  The address, or NULL
 * (then mapped as usual); *@alias_resv the alias's reservation, or NULL.
 */
static char *quar_take(struct pmg_pool *p, bool alias, char **alias_resv)
{
	size_t alen = alias_resv_len(p);
	char *a = NULL;
	unsigned j;

	*alias_resv = NULL;
	if (!__atomic_load_n(&quar_count, __ATOMIC_RELAXED))
		return NULL;
	pthread_mutex_lock(&pool_lock);
	for (j = 0; j < quar_count; j++) {
		unsigned q = (quar_head + j) % QUAR_CAP;

		/* the whole layout back (the alias above the pool, the
		 * space below it free), or nothing */
		if (!quar[q].n[0] || quar[q].ino != p->ino ||
		    quar[q].dev != p->dev || quar[q].offset != p->offset ||
		    quar[q].n[0] != p->maplen || quar[q].b[0] % p->align ||
		    (alias && quar[q].n[1] != alen))
			continue;
		(void)_pmg_rt_remove(&qtab, quar[q].b[0], 0, NULL);
		quar_bytes -= quar[q].n[0];
		quar[q].n[0] = 0;
		/* still our reservation: else not ours to map over */
		if (maps_are(quar[q].b[0], p->maplen, 0, false)) {
			a = (char *)quar[q].b[0];
			p->map_sync = quar[q].map_sync;
		}
		/* its alias's too: the same file's bytes, an address only
		 * the library knew */
		if (alias) {
			(void)_pmg_rt_remove(&qtab, quar[q].b[1], 0, NULL);
			quar_bytes -= alen;
			quar[q].n[1] = 0;
			if (maps_are(quar[q].b[1], alen, 0, false))
				*alias_resv = (char *)quar[q].b[1];
		}
		break;
	}
	pthread_mutex_unlock(&pool_lock);
	return a;
}

/*
 * The program unmapped, moved or replaced [@a, @a+@n) (interpose.c, after
 * the call): quarantined ranges there are no longer the library's.  They
 * are forgotten (what is left of them outside that span, still ours, is
 * unmapped), never unmapped later, and faults there are not reported as
 * closed pools'.  The lock-free look first: the library's own unmaps of
 * ranges already out of the table return at once (pool_lock may be held).
 */
void _pmg_pool_quarantine_forget(uintptr_t a, size_t n)
{
	const struct _pmg_range *r;
	size_t cnt, i;
	unsigned j, k;
	int slot, e = errno;
	bool hit;

	if (!n || !__atomic_load_n(&quar_count, __ATOMIC_RELAXED))
		return;
	r = _pmg_rt_enter(&qtab, &cnt, &slot);
	i = _pmg_rt_search(r, cnt, a);
	hit = i < cnt && r[i].base < a + n;
	_pmg_rt_leave(&qtab, slot);
	if (!hit)
		return;
	pthread_mutex_lock(&pool_lock);
	for (j = 0; j < quar_count; j++) {
		unsigned q = (quar_head + j) % QUAR_CAP;

		for (k = 0; k < 2; k++) {
			uintptr_t b = quar[q].b[k], end = b + quar[q].n[k];

			if (!quar[q].n[k] || end <= a || b >= a + n)
				continue;
			(void)_pmg_rt_remove(&qtab, b, 0, NULL);
			if (b < a)
				munmap((void *)b, a - b);
			if (end > a + n)
				munmap((void *)(a + n), end - (a + n));
			quar_bytes -= quar[q].n[k];
			quar[q].n[k] = 0;
		}
	}
	pthread_mutex_unlock(&pool_lock);
	errno = e;
}

/* Test hook: closed pools quarantined now, and their bytes. */
unsigned _pmg_pool_quarantined(size_t *bytes)
{
	unsigned n;

	pthread_mutex_lock(&pool_lock);
	n = quar_count;
	if (bytes)
		*bytes = quar_bytes;
	pthread_mutex_unlock(&pool_lock);
	return n;
}

void _pmg_pool_quarantine_fault(int sig, int si_code, uintptr_t a,
				const void *ucv)
{
	uintptr_t ip = 0;
	const struct _pmg_range *r;
	struct _pmg_buf b = { .n = 0 };
	char name[sizeof(quar[0].name)];
	bool hit = false, alias = false, write = true, strict;
	size_t n, i;
	int slot, fd;

	if (sig != SIGSEGV || si_code != SEGV_ACCERR ||
	    !__atomic_load_n(&quar_count, __ATOMIC_RELAXED))
		return;
	r = _pmg_rt_enter(&qtab, &n, &slot);
	i = _pmg_rt_search(r, n, a);
	if (i < n && r[i].base <= a) {
		hit = true;
		alias = r[i].alias;
		/* copied inside: the slot is reused only after we leave */
		memcpy(name, quar[r[i].dom].name, sizeof(name));
		name[sizeof(name) - 1] = '\0';
	}
	_pmg_rt_leave(&qtab, slot);
	if (!hit)
		return;
#ifdef __x86_64__
	if (ucv) {
		const ucontext_t *uc = ucv;

		ip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
		write = uc->uc_mcontext.gregs[REG_ERR] & 2;
	}
#endif
	strict = pmg_get_fault_mode() == PMG_FAULT_STRICT;
	_PMG_STAT_INC(faults);
	_PMG_STAT_INC(strays);
	fd = _pmg_report_fd();
	if (fd >= 0) {
		_pmg_buf_str(&b, strict ? "pmguard: strict (aborting): "
				       : "pmguard: not allowed (SIGSEGV): ");
		_pmg_buf_str(&b, write ? "stray write to " : "stray read of ");
		_pmg_buf_hex(&b, a);
		_pmg_buf_str(&b, " in a closed pool: ");
		_pmg_buf_str(&b, name);
		_pmg_buf_str(&b, alias ? " (its alias's former place)" : "");
		_pmg_buf_str(&b, " was closed; its addresses stay reserved "
			     "(PROT_NONE) so that nothing else is mapped "
			     "there (use after close), by thread ");
		_pmg_buf_dec(&b, syscall(SYS_gettid));
		_pmg_buf_str(&b, " at ip ");
		_pmg_buf_hex(&b, ip);
		_pmg_buf_str(&b, "\n");
		_pmg_buf_flush(&b, fd);
		if (strict) {
			_pmg_buf_str(&b, "pmguard: backtrace (handler frames "
				     "first):\n");
			_pmg_buf_flush(&b, fd);
			_pmg_backtrace_to(fd);
		}
	}
	if (strict)
		abort();
}

/* Undo pool_finish(): unregister, unprotect, unmap.  First error. */
/*
 * Is a protected pool's mapping still the library's?  Not if its range was
 * dropped (the shared library saw it unmapped, moved or replaced) or is no
 * longer entirely mapped: then closing must not munmap whatever is mapped
 * there now.  (An unprotected pool, or a mapping replaced whole behind the
 * static library's back, cannot be told apart: see docs/api.md.)
 */
static bool still_mapped(const struct pmg_pool *p)
{
	uintptr_t base = (uintptr_t)p->addr;
	struct _pmg_range r;

	if (!p->dom)
		return true;
	return !_pmg_reg_find(base, &r) && r.base == base &&
	       r.end == base + p->maplen &&
	       _pmg_all_mapped(base, base + p->maplen);
}

static int pool_teardown(struct pmg_pool *p)
{
	char msg[PMG_ERRMSG_MAX];
	int rc = 0;
	bool ours;

	uintptr_t qa[2] = { 0, 0 };
	size_t qn[2] = { 0, 0 };

	pthread_mutex_lock(&pool_lock);
	ptab_remove(p);
	ours = still_mapped(p);
	if (p->dom)
		rc = pmg_unprotect(p->addr, p->maplen);
	_pmg_err_save(msg, sizeof(msg));	/* the first error's */
	domain_put(p);
	_pmg_err_restore(msg);
	/*
	 * Quarantine what is ours: the mapping (unless it went away behind
	 * our back, or is still registered: unprotecting failed) and the
	 * alias's reservation, the alias made PROT_NONE in it.
	 */
	if (ours && !maps_are((uintptr_t)p->addr, p->maplen, p->ino, true))
		ours = false; /* replaced behind our back: not ours */
	if (ours && !rc && make_none(p->addr, p->maplen)) {
		qa[0] = (uintptr_t)p->addr;
		qn[0] = p->maplen;
	} else if (ours && munmap(p->addr, p->maplen) && !rc) {
		rc = _pmg_err(-errno, "munmap: %s", strerror(errno));
	}
	if (p->alias && make_none(p->alias, p->maplen)) {
		qa[1] = (uintptr_t)p->alias_resv;
		qn[1] = alias_resv_len(p);
		p->alias = p->alias_resv = NULL;
	}
	unmap_alias(p);		/* what is left of it */
	quar_add(p, qa, qn);
	pthread_mutex_unlock(&pool_lock);
	p->addr = NULL;
	return rc;
}

/* pmg_pool_create() (init.c) after the library started. */
int _pmg_pool_create(struct pmg_pool **pp, const char *path,
		     const struct pmg_pool_config *cfg)
{
	char tmp[PATH_MAX];
	struct pmg_pool *p;
	struct stat st;
	bool named = false;
	int rc, old_fd = -1;

	rc = _pmg_pool_checks(pp, path, "pmg_pool_create");
	if (rc)
		return rc;
	if (!cfg)
		return _pmg_err(-EINVAL, "pmg_pool_create(%s): cfg is NULL "
				"(the size is required)", path);
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return _pmg_err(-EISDIR, "%s: is a directory", path);
		if (S_ISCHR(st.st_mode)) {
			/* device dax: the device is the pool */
			if (!(cfg->flags & PMG_POOL_OVERWRITE))
				return _pmg_err(-EEXIST, "%s: a device exists "
						"there (use PMG_POOL_OVERWRITE "
						"to take it as a new pool)",
						path);
			return _pmg_pool_open(pp, path, cfg);
		}
		if (!S_ISREG(st.st_mode))
			return _pmg_err(-ENODEV, "%s: exists and is not a "
					"regular file", path);
		if (!(cfg->flags & PMG_POOL_OVERWRITE))
			return _pmg_err(-EEXIST, "%s: exists (use "
					"PMG_POOL_OVERWRITE to replace it)",
					path);
	} else if (errno != ENOENT) {
		return stat_err(path, errno, "cannot create the pool");
	}
	if (!cfg->size)
		return _pmg_err(-EINVAL, "pmg_pool_create(%s): size 0 (set it "
				"with pmg_pool_config_set_size)", path);
	if (temp_name(tmp, sizeof(tmp), path))
		return _pmg_err(-ENAMETOOLONG, "%s: path too long", path);
	if (cfg->flags & PMG_POOL_OVERWRITE) {
		rc = lock_existing(path, &old_fd);
		if (rc)
			return rc;
	}
	p = pool_alloc();
	if (!p) {
		rc = _pmg_err(-ENOMEM, "pmg_pool_create: out of memory");
		goto out;
	}
	/* map and protect first: @path is touched only when all worked */
	rc = create_file(p, path, tmp, cfg, &named);
	if (!rc) {
		rc = pool_finish(p, path, cfg);
		if (!rc) {
			rc = publish(p->fd, named, tmp, path,
				     cfg->flags & PMG_POOL_OVERWRITE);
			if (rc)
				(void)pool_teardown(p);
		}
	}
	if (rc) {
		if (p->fd >= 0 && named)
			unlink(tmp);
		pool_free(p);
		goto out;
	}
	*pp = p;
out:
	if (old_fd >= 0)
		close(old_fd);
	return rc;
}

PMG_API int pmg_pool_close(struct pmg_pool **pp)
{
	int rc;

	if (!pp || !*pp)
		return 0;
	rc = pool_teardown(*pp);
	pool_free(*pp);
	*pp = NULL;
	return rc;
}

PMG_API void *pmg_pool_address(const struct pmg_pool *pool)
{
	return pool ? pool->addr : NULL;
}

PMG_API size_t pmg_pool_size(const struct pmg_pool *pool)
{
	return pool ? pool->size : 0;
}

PMG_API struct pmg_domain *pmg_pool_domain(const struct pmg_pool *pool)
{
	return pool ? pool->dom : NULL;
}

PMG_API int pmg_pool_is_pmem(const struct pmg_pool *pool)
{
	if (!pool)
		return _pmg_err_s(-EINVAL, "pmg_pool_is_pmem: pool is NULL");
	return pool->pmem;
}

PMG_API int pmg_pool_get_info(const struct pmg_pool *pool,
			      struct pmg_pool_info *info, size_t size)
{
	struct pmg_pool_info i = { 0 };
	int rc;

	if (!pool)
		return _pmg_err_s(-EINVAL, "pmg_pool_get_info: NULL pool");
	rc = _pmg_out_check("pmg_pool_get_info", info, size,
			    PMG_POOL_INFO_SIZE_0_1, true);
	if (rc)
		return rc;
	i.addr = pool->addr;
	i.size = pool->size;
	i.offset = pool->offset;
	i.align = pool->align;
	i.is_pmem = pool->pmem;
	i.map_sync = pool->map_sync;
	i.devdax = pool->devdax;
	i.guarded = pool->dom != NULL;
	i.noaccess = pool->dom && pool->noaccess;
	i.aliased = pool->alias != NULL;
	_pmg_out_copy(info, size, &i, sizeof(i));
	return 0;
}

/* ------------------------------------------------------ direct access */

PMG_API ssize_t pmg_dax_direct_access(const struct pmg_pool *pool,
				      size_t offset, size_t len, void **addr)
{
	if (!pool || !addr)
		return _pmg_err_s(-EINVAL, "pmg_dax_direct_access: NULL "
				  "argument");
	*addr = NULL;
	if (!len)
		return _pmg_err_s(-EINVAL, "pmg_dax_direct_access: length 0");
	if (offset >= pool->size || len > pool->size - offset)
		return _pmg_err_s(-ERANGE, "pmg_dax_direct_access: range "
				  "passes the end of the pool");
	*addr = pool->addr + offset;
	return (ssize_t)(pool->size - offset);
}

PMG_API int pmg_dax_mk_readwrite(const struct pmg_pool *pool)
{
	if (!pool)
		return _pmg_err_s(-EINVAL, "pmg_dax_mk_readwrite: NULL pool");
	return pool->dom ? pmg_open(pool->dom, PMG_WRITE) : 0;
}

PMG_API int pmg_dax_mk_noaccess(const struct pmg_pool *pool)
{
	if (!pool)
		return _pmg_err_s(-EINVAL, "pmg_dax_mk_noaccess: NULL pool");
	return pool->dom ? pmg_close(pool->dom, PMG_WRITE) : 0;
}

PMG_API int pmg_dax_map_protected(const struct pmg_pool *pool)
{
	if (!pool)
		return _pmg_err_s(-EINVAL, "pmg_dax_map_protected: NULL pool");
	return pool->dom != NULL;
}
