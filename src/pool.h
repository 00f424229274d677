/* SPDX-License-Identifier: MIT */
/*
 * The pool layer's internal header (never installed): a pool and its
 * configuration, and the calls between the files of the layer, from the
 * bottom up: pooltab.c (the pool lock, the pool table, the shared domains'
 * counts), quarantine.c (the address space pools take, the closed pools'
 * quarantine), alias.c (the aliases, mprotect), poolfile.c (the files and
 * devices), pool.c (the calls).  Each file uses only those before it, so
 * the objects below pool.o need nothing of it: docs/design.md, "Object
 * dependencies".  domain.c, fault.c, interpose.c and thread.c reach the
 * layer through internal.h's _pmg_pool_* declarations.
 */
#ifndef PMG_POOL_H
#define PMG_POOL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/types.h>

#include "internal.h"

#ifndef MAP_SHARED_VALIDATE
#define MAP_SHARED_VALIDATE 0x03
#endif
#ifndef MAP_SYNC
#define MAP_SYNC 0x80000
#endif

#define HUGE_ALIGN (2UL << 20)

struct pmg_pool_config {
	size_t size, offset;
	unsigned flags;
	mode_t mode;
	struct pmg_domain *domain;
};

/*
 * A file's identity over its life (_pmg_pool_file_id()): its file handle
 * (name_to_handle_at(2)), which tells a file from a later one that the
 * filesystem gave the same inode number after an unlink (ext4 does at
 * once): ext4, xfs and tmpfs put the inode's generation in it.  len 0:
 * none known (no handles there, or one longer than h[]).
 */
#define PMG_FILE_ID_MAX 64
struct _pmg_file_id {
	int type;
	unsigned len;
	unsigned char h[PMG_FILE_ID_MAX];
};

struct pmg_pool {
	int fd;
	char *addr;
	char *alias; /* writable second mapping, NULL: none */
	char *alias_resv; /* its reservation (alias_resv_len()): the
				   gaps and it, all ours */
	size_t size; /* usable bytes */
	size_t maplen; /* page-rounded mapping */
	size_t offset, align;
	struct pmg_domain *dom; /* NULL: unprotected */
	int shared; /* index into _pmg_pool_shared[], -1: caller's domain */
	bool pmem, map_sync, devdax, noaccess;
	char name[96]; /* the path's tail, for use-after-close reports */
	dev_t dev; /* the file's, for a reopen's quarantine */
	ino_t ino;
	struct _pmg_file_id id; /* the file's life, for the same */
};

/*
 * The PROT_NONE gap on either side of a pool's alias, within its
 * reservation (alias.c): the pool's mapping length, at least 2 MiB and at
 * most 1 GiB, so that an overrun past the end of the pool (below the
 * alias) by up to its own size, or one past any other mapping by up to
 * 2 MiB, faults before it reaches the alias.
 */
#define ALIAS_GAP_MIN ((size_t)2 << 20)
#define ALIAS_GAP_MAX ((size_t)1 << 30)
static inline size_t alias_gap(const struct pmg_pool *p)
{
	return p->maplen < ALIAS_GAP_MIN ? ALIAS_GAP_MIN :
	       p->maplen > ALIAS_GAP_MAX ? ALIAS_GAP_MAX : p->maplen;
}

/*
 * The guard above every pool's mapping (both backends, with or without an
 * alias): alias_gap() of PROT_NONE reservation directly past the
 * mapping's end, part of the pool's own place (map_pool(), kept with it
 * in the quarantine and released with it).  Whatever is placed later --
 * another pool's alias behind a gap sized by that smaller pool, another
 * pool's mapping, the program's own memory -- lies at least the pool's
 * own size (2 MiB to 1 GiB) past its end: an overrun by up to that
 * faults before it reaches anything writable.
 */
static inline size_t pool_guard_len(const struct pmg_pool *p)
{
	return alias_gap(p);
}

/* The pool's place: its mapping and the guard above it. */
static inline size_t pool_place_len(const struct pmg_pool *p)
{
	return p->maplen + pool_guard_len(p);
}

/* The alias's reservation: the alias, its alignment slack and a gap on
 * either side (alias.c). */
static inline size_t alias_resv_len(const struct pmg_pool *p)
{
	return p->maplen + p->align + 2 * alias_gap(p);
}

/* ---- pooltab.c */

/* The pool lock: the pool table, the shared domains' creation, the
 * quarantine.  Held across fork() (_pmg_pool_fork_prepare()). */
extern pthread_mutex_t _pmg_pool_lock;

/*
 * The shared domains: [0] "pmem" (write-disabled), [1] "pmem-noaccess";
 * created and deleted by pool.c, their counts asked by pmg_domain_delete()
 * (_pmg_pool_domain_refs()).
 */
struct _pmg_shared_dom {
	struct pmg_domain *d;
	unsigned refs;
	struct pmg_domain h;
};
extern struct _pmg_shared_dom _pmg_pool_shared[2];

/* @p's mapping into the pool table, and out (_pmg_pool_lock held). */
int _pmg_pool_tab_insert(const struct pmg_pool *p);
void _pmg_pool_tab_remove(const struct pmg_pool *p);

/*
 * [a, a+len) against the open pools: -EINVAL if it wraps, -ERANGE if it
 * touches a pool's mapping without lying within its usable bytes, else 0
 * and *iv the interval around @a in which every range gets the same
 * answer: one pool's usable bytes (iv->dom: not pmem, so its flush is
 * msync; iv->alias: the writable alias of its mapping, 0: none) or a gap
 * without pools (dom 0, alias 0).  Lock-free, AS-safe, never a wrong
 * answer; valid while _pmg_rt_gen is what it was before the call.
 */
int _pmg_pool_interval(uintptr_t a, size_t len, struct _pmg_range *iv);

/* 1 if [addr, addr+len) lies within one pmem pool.  AS-safe. */
int _pmg_pool_range_pmem(const void *addr, size_t len);

/* ---- quarantine.c */

/* A PROT_NONE reservation of @len bytes anywhere; the quarantine is given
 * back first if the address space is short.  MAP_FAILED, errno set. */
char *_pmg_pool_reserve(size_t len);

/* Every page of [a, a+n) a shared mapping of the file @ino, or (@ino 0)
 * our PROT_NONE reservation, per /proc/self/maps; without /proc: @dflt. */
bool _pmg_pool_maps_are(uintptr_t a, size_t n, ino_t ino, bool dflt);

/* Quarantine the closed pool @p's ranges [a[k], a[k]+n[k]) (PROT_NONE
 * already; n 0: none), _pmg_pool_lock held. */
void _pmg_pool_quar_add(const struct pmg_pool *p, uintptr_t a[2], size_t n[2]);

/* A reopen of a closed pool: its old address, or NULL; *@alias_resv its
 * alias's old reservation, or NULL. */
char *_pmg_pool_quar_take(struct pmg_pool *p, bool alias, char **alias_resv);

/* Test hooks: the quarantine's limits (budget 0: none kept), and the
 * closed pools quarantined now. */
extern size_t _pmg_pool_quarantine_budget;
extern unsigned _pmg_pool_quarantine_max;
unsigned _pmg_pool_quarantined(size_t *bytes);

/* ---- alias.c */

/* Whether a pool opened with @c gets an alias (mprotect, protected). */
bool _pmg_pool_alias_wanted(const struct pmg_pool_config *c);
/* Before the pool is mapped: the alias's reservation (@taken: the one the
 * quarantine gave back, else a new one), if wanted. */
void _pmg_pool_alias_prepare(struct pmg_pool *p,
			     const struct pmg_pool_config *c, char *taken);
/* After it is mapped and protected: the alias mapped in the reservation. */
void _pmg_pool_map_alias(struct pmg_pool *p);
/* The alias and its reservation given back. */
void _pmg_pool_unmap_alias(struct pmg_pool *p);

/* ---- poolfile.c */

/* "@path: @what: strerror(@e)", -@e. */
int _pmg_pool_stat_err(const char *path, int e, const char *what);
/* Open @path read-write and lock it; fill @p->fd, size/offset/devdax. */
int _pmg_pool_open_fd(struct pmg_pool *p, const char *path,
		      const struct pmg_pool_config *c);
/* A fresh temporary name next to @path. */
int _pmg_pool_temp_name(char *buf, size_t size, const char *path);
/* A new pool file, allocated and locked (O_TMPFILE, or the name @tmp). */
int _pmg_pool_create_file(struct pmg_pool *p, const char *path, const char *tmp,
			  const struct pmg_pool_config *c, bool *named);
/* The new file put in place at @path, atomically. */
int _pmg_pool_publish(int fd, bool named, const char *tmp, const char *path,
		      bool overwrite);
/* The lock of an existing pool file that a create replaces. */
int _pmg_pool_lock_existing(const char *path, int *fd);

/* The identity over its life of the file open at @fd, into *@id (len 0:
 * none known). */
void _pmg_pool_file_id(int fd, struct _pmg_file_id *id);

/* Device-dax alignment rule: 0 or -EINVAL with a message. */
int _pmg_pool_check_align(const char *path, size_t offset, size_t size,
			  size_t align);

/* Test hooks: creates as without O_TMPFILE; stale temporary files removed;
 * no file's identity known (as on a filesystem without file handles). */
extern int _pmg_pool_no_tmpfile;
extern int _pmg_pool_no_file_id;
extern unsigned long _pmg_pool_stale_removed;

#endif /* PMG_POOL_H */
