/* SPDX-License-Identifier: MIT */
/*
 * The parts of liblmdb's, libpmem's and libpmem2's ABI that the preload
 * (lmdb.c, pmem.c) wraps, declared here rather than taken from <lmdb.h>,
 * <libpmem.h> and <libpmem2.h>: libpmguard-run.so then builds from the
 * tree alone, the same library with or without those -dev packages
 * installed (it never links them: the real functions are looked up with
 * dlsym(RTLD_NEXT) when the program has loaded them).
 *
 * Copied from LMDB 0.9 (lmdb.h), PMDK 1.12 (libpmem.h, libpmem2/base.h),
 * whose ABIs are stable (soname liblmdb.so.0, libpmem.so.1,
 * libpmem2.so.1).  tests/run/libs-abi.c includes the real headers and then
 * this one with PMG_RUN_LIBS_CHECK: every declaration must agree with
 * theirs (a conflicting redeclaration, typedef or macro does not compile),
 * and MDB_envinfo's layout is compared field by field; it is built with
 * the run tests wherever the headers exist.
 */
#ifndef PMG_RUN_LIBS_H
#define PMG_RUN_LIBS_H

#include <stddef.h>
#include <sys/types.h>

/* ---- LMDB (lmdb.h) */
typedef struct MDB_env MDB_env;
typedef struct MDB_txn MDB_txn;
typedef mode_t mdb_mode_t;
typedef int mdb_filehandle_t;

#define MDB_RDONLY		0x20000
#define MDB_WRITEMAP		0x80000

#define PMG_MDB_ENVINFO_FIELDS \
	void *me_mapaddr; \
	size_t me_mapsize; \
	size_t me_last_pgno; \
	size_t me_last_txnid; \
	unsigned int me_maxreaders; \
	unsigned int me_numreaders;
#ifndef PMG_RUN_LIBS_CHECK
typedef struct MDB_envinfo {
	PMG_MDB_ENVINFO_FIELDS
} MDB_envinfo;
#endif

int mdb_env_open(MDB_env *env, const char *path, unsigned int flags,
		 mdb_mode_t mode);
int mdb_env_info(MDB_env *env, MDB_envinfo *stat);
void mdb_env_close(MDB_env *env);
int mdb_env_get_flags(MDB_env *env, unsigned int *flags);
int mdb_env_get_fd(MDB_env *env, mdb_filehandle_t *fd);
int mdb_env_set_mapsize(MDB_env *env, size_t size);
int mdb_txn_begin(MDB_env *env, MDB_txn *parent, unsigned int flags,
		  MDB_txn **txn);
int mdb_txn_commit(MDB_txn *txn);
void mdb_txn_abort(MDB_txn *txn);

/* ---- libpmem (libpmem.h); its PMEM_F_MEM_* bits are PMG_F_MEM_*'s */
void *pmem_map_file(const char *path, size_t len, int flags, mode_t mode,
		    size_t *mapped_lenp, int *is_pmemp);
int pmem_unmap(void *addr, size_t len);
void *pmem_memmove_persist(void *pmemdest, const void *src, size_t len);
void *pmem_memcpy_persist(void *pmemdest, const void *src, size_t len);
void *pmem_memset_persist(void *pmemdest, int c, size_t len);
void *pmem_memmove_nodrain(void *pmemdest, const void *src, size_t len);
void *pmem_memcpy_nodrain(void *pmemdest, const void *src, size_t len);
void *pmem_memset_nodrain(void *pmemdest, int c, size_t len);
void *pmem_memmove(void *pmemdest, const void *src, size_t len,
		   unsigned flags);
void *pmem_memcpy(void *pmemdest, const void *src, size_t len,
		  unsigned flags);
void *pmem_memset(void *pmemdest, int c, size_t len, unsigned flags);

/* ---- libpmem2 (libpmem2/base.h); PMEM2_F_MEM_* are PMG_F_MEM_* too */
struct pmem2_map;
struct pmem2_config;
struct pmem2_source;
typedef void *(*pmem2_memmove_fn)(void *pmemdest, const void *src,
				  size_t len, unsigned flags);
typedef void *(*pmem2_memcpy_fn)(void *pmemdest, const void *src,
				 size_t len, unsigned flags);
typedef void *(*pmem2_memset_fn)(void *pmemdest, int c, size_t len,
				 unsigned flags);
int pmem2_map_new(struct pmem2_map **map_ptr,
		  const struct pmem2_config *cfg,
		  const struct pmem2_source *src);
int pmem2_map_delete(struct pmem2_map **map_ptr);
void *pmem2_map_get_address(struct pmem2_map *map);
size_t pmem2_map_get_size(struct pmem2_map *map);
pmem2_memmove_fn pmem2_get_memmove_fn(struct pmem2_map *map);
pmem2_memcpy_fn pmem2_get_memcpy_fn(struct pmem2_map *map);
pmem2_memset_fn pmem2_get_memset_fn(struct pmem2_map *map);

#endif
