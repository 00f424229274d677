// SPDX-License-Identifier: MIT
/*
 * Persistent-memory pools: a file (fs-DAX or any filesystem) or a
 * device-dax device, mapped shared (MAP_SYNC where supported) and
 * protected by the shared "pmem" domain, V8's single PMEM key.  Also
 * the dax_direct_access() / dax_mk_readwrite() / dax_mk_noaccess() /
 * dax_map_protected() analogs.  The calls and the mapping; the rest of the
 * pool layer is below it (pool.h): the pool table and lock (pooltab.c), the
 * closed pools' quarantine (quarantine.c), the aliases (alias.c), the files
 * (poolfile.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "persist.h"
#include "pool.h"
#include "procfs.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

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
	__atomic_add_fetch(&_pmg_pool_shared[i].refs, 1, __ATOMIC_ACQ_REL);
	/* (a live domain may hold no key: pmg_domain_key() says -ENOKEY) */
	if (_pmg_pool_shared[i].d && !_pmg_dom_of(_pmg_pool_shared[i].d))
		__atomic_store_n(&_pmg_pool_shared[i].d, NULL,
				 __ATOMIC_RELEASE);
	if (!_pmg_pool_shared[i].d) {
		rc = _pmg_domain_new_at(&_pmg_pool_shared[i].d,
					i ? "pmem-noaccess" : "pmem",
					i ? PMG_DOMAIN_NOACCESS : 0,
					&_pmg_pool_shared[i].h);
		if (rc) {
			__atomic_sub_fetch(&_pmg_pool_shared[i].refs, 1,
					   __ATOMIC_RELEASE);
			return _pmg_err_prefix(rc, "creating the pool domain");
		}
	}
	p->dom = _pmg_pool_shared[i].d;
	p->shared = i;
	p->noaccess = i;
	return 0;
}

static void domain_put(struct pmg_pool *p)
{
	int i = p->shared;

	if (i < 0 || !_pmg_pool_shared[i].d)
		return;
	if (__atomic_sub_fetch(&_pmg_pool_shared[i].refs, 1,
			       __ATOMIC_RELEASE) == 0)
		(void)pmg_domain_delete(&_pmg_pool_shared[i].d);
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

/* Reserve [@a, @a+@n) PROT_NONE where nothing is mapped: @a or MAP_FAILED. */
static char *reserve_at(char *a, size_t n)
{
	char *r = mmap(a, n, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
			       MAP_FIXED_NOREPLACE,
		       -1, 0);

	if (r != MAP_FAILED && r != a) { /* a kernel that takes a hint */
		munmap(r, n);
		errno = EEXIST;
		return MAP_FAILED;
	}
	return r;
}

/*
 * Map @p->maplen bytes of @fd at @p->offset, aligned to @p->align, with
 * the guard (pool_guard_len(), pool.h) reserved directly above it.  An
 * aligned place is found with a PROT_NONE reservation of the mapping, its
 * alignment slack and the guard, which is given back before the file is
 * mapped there: the library never maps with MAP_FIXED over memory it does
 * not own at that moment (a failed MAP_FIXED mmap unmaps what was there,
 * and another thread's mmap can take the hole).  The guard is reserved
 * again right after the mapping, not kept: where the kernel takes the
 * address as a hint (MAP_SYNC on a kernel whose MAP_SHARED_VALIDATE
 * refuses MAP_FIXED_NOREPLACE, map_at()), it looks for a 2 MiB-aligned
 * place for a DAX file with room for the alignment past the end, and a
 * reservation there makes it go elsewhere.  If other threads keep taking
 * the place (or the guard's), a new one is found.
 */
static int map_pool(struct pmg_pool *p, const char *path, char *a)
{
	size_t guard = pool_guard_len(p);
	size_t resv = p->maplen + p->align + guard;
	int tries, e = 0, flags;
	char *r, *m, *g;

	if (a) {
		/* a reopen, over our own reservation (_pmg_pool_quar_take():
		 * the mapping's place and the guard), with the flags that
		 * worked before: a refused MAP_SYNC would leave a hole, not
		 * retried there */
		flags = p->map_sync ? MAP_SHARED_VALIDATE | MAP_SYNC
				    : MAP_SHARED;
		m = mmap(a, p->maplen, PROT_READ | PROT_WRITE,
			 flags | MAP_FIXED, p->fd, (off_t)p->offset);
		if (m == a) {
			p->addr = m;
			return 0;
		}
		munmap(a + p->maplen, guard);
	}
	for (tries = 0; tries < 64; tries++) {
		r = _pmg_pool_reserve(resv);
		if (r == MAP_FAILED)
			return _pmg_err(-errno, "%s: reserving %zu bytes of "
					"address space: %s", path, resv,
					strerror(errno));
		a = (char *)(((uintptr_t)r + p->align - 1) & ~(p->align - 1));
		munmap(r, resv);
		m = map_at(p, a);
		if (m != MAP_FAILED) {
			g = reserve_at(m + p->maplen, guard);
			if (g != MAP_FAILED) {
				p->addr = m;
				return 0;
			}
			/* another thread's mapping took the guard's place */
			e = errno;
			munmap(m, p->maplen);
		} else {
			e = errno;
		}
		if (e != EEXIST)
			break;
	}
	if (e == EEXIST && !p->devdax) {
		/* alignment is only a help for files: take any place that
		 * has room for the guard above it */
		m = map_at(p, NULL);
		if (m != MAP_FAILED) {
			if (reserve_at(m + p->maplen, guard) != MAP_FAILED) {
				p->addr = m;
				return 0;
			}
			e = errno;
			munmap(m, p->maplen);
		} else {
			e = errno;
		}
	}
	return _pmg_err(-e, "%s: mmap of %zu bytes at offset %zu: %s", path,
			p->maplen, p->offset, strerror(e));
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
		_pmg_pool_file_id(p->fd, &p->id);
		at = _pmg_pool_quar_take(p, _pmg_pool_alias_wanted(c),
					 &alias_at);
	}
	_pmg_pool_alias_prepare(p, c, alias_at);
	rc = map_pool(p, path, at);
	if (rc) {
		_pmg_pool_unmap_alias(p);
		return rc;
	}
	p->pmem = pp->force >= 0 ? pp->force == 1 : (p->devdax || p->map_sync);
	pthread_mutex_lock(&_pmg_pool_lock);
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
	_pmg_pool_map_alias(p);
	rc = _pmg_pool_tab_insert(p);
	if (rc)
		goto err_prot;
	pthread_mutex_unlock(&_pmg_pool_lock);
	return 0;
err_prot:
	_pmg_pool_unmap_alias(p);
	if (p->dom)
		(void)pmg_unprotect(p->addr, p->maplen);
err_dom:
	domain_put(p);
err_unmap:
	pthread_mutex_unlock(&_pmg_pool_lock);
	_pmg_pool_unmap_alias(p);
	munmap(p->addr, pool_place_len(p)); /* the mapping and its guard */
	p->addr = NULL;
	return rc;
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
	rc = _pmg_pool_open_fd(p, path, cfg);
	if (!rc)
		rc = pool_finish(p, path, cfg);
	if (rc) {
		pool_free(p);
		return rc;
	}
	*pp = p;
	return 0;
}

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
 * What is left of a pool the program unmapped part of (or mapped over):
 * each piece still mapped from the pool's file is made a PROT_NONE
 * reservation in place and kept, never handed back read-write.  A stale
 * store into it faults instead of landing in the file, and no mapping
 * keeps the file (and so its lock) open after the close.  The pieces are
 * not quarantined (a reopen cannot take back a layout with holes) and
 * stay reserved until the process ends (docs/pool.md).
 */
static void seal_rest(const struct pmg_pool *p)
{
	uintptr_t lo[32], hi[32], a = (uintptr_t)p->addr, e = a + p->maplen;
	unsigned n = 0, i;
	struct _pmg_map m;
	FILE *f = _pmg_maps_open();

	if (!f)
		return;
	while (n < 32 && _pmg_maps_next(f, &m)) {
		if (m.hi <= a || m.lo >= e || m.ino != p->ino ||
		    m.perms[3] != 's')
			continue;
		lo[n] = m.lo < a ? a : m.lo;
		hi[n] = m.hi > e ? e : m.hi;
		n++;
	}
	fclose(f);
	for (i = 0; i < n; i++)
		if (!make_none((void *)lo[i], hi[i] - lo[i]))
			_pmg_err(-ENOMEM, "pool '%s': the rest of its mapping "
				 "at %#lx could not be sealed", p->name,
				 (unsigned long)lo[i]);
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
	bool ours, guard;

	uintptr_t qa[2] = { 0, 0 };
	size_t qn[2] = { 0, 0 };

	pthread_mutex_lock(&_pmg_pool_lock);
	_pmg_pool_tab_remove(p);
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
	if (ours &&
	    !_pmg_pool_maps_are((uintptr_t)p->addr, p->maplen, p->ino, true))
		ours = false; /* replaced behind our back: not ours */
	if (!ours && p->dom)
		seal_rest(p); /* part of it unmapped: the rest sealed */
	/* the guard above the mapping: ours while it is still our
	 * reservation (the program may have unmapped it too) */
	guard = _pmg_pool_maps_are((uintptr_t)p->addr + p->maplen,
				   pool_guard_len(p), 0, true);
	if (ours && !rc && make_none(p->addr, p->maplen)) {
		/* the pool's whole place, guard included (a reopen takes
		 * back the same layout), or the mapping alone */
		qa[0] = (uintptr_t)p->addr;
		qn[0] = guard ? pool_place_len(p) : p->maplen;
		guard = false;
	} else if (ours && munmap(p->addr, p->maplen) && !rc) {
		rc = _pmg_err(-errno, "munmap: %s", strerror(errno));
	}
	if (guard)
		munmap(p->addr + p->maplen, pool_guard_len(p));
	if (p->alias && make_none(p->alias, p->maplen)) {
		qa[1] = (uintptr_t)p->alias_resv;
		qn[1] = alias_resv_len(p);
		p->alias = p->alias_resv = NULL;
	}
	_pmg_pool_unmap_alias(p); /* what is left of it */
	_pmg_pool_quar_add(p, qa, qn);
	pthread_mutex_unlock(&_pmg_pool_lock);
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
		return _pmg_pool_stat_err(path, errno,
					  "cannot create the pool");
	}
	if (!cfg->size)
		return _pmg_err(-EINVAL, "pmg_pool_create(%s): size 0 (set it "
				"with pmg_pool_config_set_size)", path);
	if (_pmg_pool_temp_name(tmp, sizeof(tmp), path))
		return _pmg_err(-ENAMETOOLONG, "%s: path too long", path);
	if (cfg->flags & PMG_POOL_OVERWRITE) {
		rc = _pmg_pool_lock_existing(path, &old_fd);
		if (rc)
			return rc;
	}
	p = pool_alloc();
	if (!p) {
		rc = _pmg_err(-ENOMEM, "pmg_pool_create: out of memory");
		goto out;
	}
	/* map and protect first: @path is touched only when all worked */
	rc = _pmg_pool_create_file(p, path, tmp, cfg, &named);
	if (!rc) {
		rc = pool_finish(p, path, cfg);
		if (!rc) {
			rc = _pmg_pool_publish(p->fd, named, tmp, path,
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
