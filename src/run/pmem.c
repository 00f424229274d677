// SPDX-License-Identifier: MIT
/*
 * libpmguard-run.so's libpmem and libpmem2 adapter: every mapping
 * (pmem_map_file(), pmem2_map_new()) is in a domain of its own,
 * "pmem:PATH" or "pmem2:ADDRESS", until it is unmapped; the copy calls
 * (pmem_mem*(), pmem2_get_mem*_fn()'s functions) run through pmg_memcpy()
 * and family, which open the window on the destination's domain
 * themselves; flush, drain and persist pass through.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "../internal.h"
#include "libs.h" /* LMDB's, libpmem's, libpmem2's: ours, not theirs */
#include "run.h"

#define MAX_MAPS 256
static struct {
	void *addr;
	size_t len;
	struct pmg_domain *dom; /* its own: "pmem:PATH", "pmem2:ADDRESS" */
} maps[MAX_MAPS];

/* @kind:@name names the mapping's domain (@name: its file, or NULL: its
 * address). */
static void map_add(void *addr, size_t len, const char *what, const char *kind,
		    const char *name)
{
	struct pmg_domain *d = NULL;
	char at[32];
	int i;

	len = PAGE_UP(len);
	pthread_mutex_lock(&run_lock);
	run_modules();
	for (i = 0; i < MAX_MAPS && maps[i].addr; i++)
		;
	if (i == MAX_MAPS) {
		run_say("more than %d pmem mappings: %p not protected\n",
			MAX_MAPS, addr);
		goto out;
	}
	snprintf(at, sizeof(at), "%p", addr);
	d = run_data_domain(kind, name ? name : at);
	if (!d)
		goto out;
	if (run_protect(d, addr, len, "the pmem mapping")) {
		run_data_domain_delete(&d);
		goto out;
	}
	maps[i].addr = addr;
	maps[i].len = len;
	maps[i].dom = d;
	run_protected_one();
	if (run_rep_named)
		run_say("%s (pid %d): %s: protected, map %p+%#zx in domain '%s'\n",
			program_invocation_short_name, (int)getpid(), what,
			addr, len, pmg_domain_name(d));
out:
	pthread_mutex_unlock(&run_lock);
}

/*
 * [@addr, @addr+@len) is about to be unmapped (@len 0: the whole mapping
 * at @addr, pmem2_map_delete()).  A mapping it covers is unprotected and
 * its domain deleted; one it covers only part of (pmem_unmap() of part of
 * a pmem_map_file() mapping) gives that part back and keeps the rest
 * protected, in its domain, until the rest is unmapped too (the library's
 * registry splits the range: docs/design.md, "What a program may do to a
 * protected mapping").
 */
static void map_del(void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr, e = a + PAGE_UP(len);
	int i, left;

	if (len && (a % PMG_PAGE_SIZE || e < a))
		return; /* the real call refuses it (EINVAL) */
	pthread_mutex_lock(&run_lock);
	for (i = 0; i < MAX_MAPS; i++) {
		uintptr_t mb = (uintptr_t)maps[i].addr, me = mb + maps[i].len;

		if (!maps[i].addr || (len ? e <= mb || a >= me : a != mb))
			continue;
		if (!len || (a <= mb && e >= me)) {
			run_unprotect(maps[i].addr, maps[i].len,
				      "the pmem mapping");
		} else {
			left = _pmg_unprotect_part(a > mb ? a : mb,
						   (e < me ? e : me) -
							   (a > mb ? a : mb),
						   maps[i].dom);
			if (left < 0)
				run_say("pmem_unmap(%p, %#zx): %s: the "
					"unmap drops the whole mapping's "
					"protection\n", addr, len,
					strerror(-left));
			if (left != 0)
				continue;
		}
		run_data_domain_delete(&maps[i].dom);
		maps[i].addr = NULL;
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
#define FL(fl) ((fl)&PMG_F_MEM_VALID_FLAGS)

/*
 * pmg_mem*() failed: a window that cannot be opened or an msync error, the
 * write maybe not done.  Never a silent loss: say so and abort.
 */
static void *copied(void *ret, void *dest, const char *fn)
{
	if (!ret) {
		run_say("%s(%p): %s: the write may not have happened; aborting\n",
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

	/* length 0: the real call fails (EINVAL) and unmaps nothing; the
	 * mapping stays protected (0 means "the whole mapping" only to
	 * map_del(), for pmem2_map_delete()) */
	if (len)
		map_del(addr, len);
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
			real_pmem2_map_get_size(*map), "pmem2_map_new", "pmem2",
			NULL);
	return rc;
}

RUN_API int pmem2_map_delete(struct pmem2_map **map)
{
	REAL(pmem2_map_delete);
	REAL(pmem2_map_get_address);

	if (map && *map)
		map_del(real_pmem2_map_get_address(*map), 0);
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
