// SPDX-License-Identifier: MIT
/*
 * src/run/libs.h against the real headers: compiled (never run) by
 * mk/run.mk wherever <lmdb.h>, <libpmem.h> and <libpmem2.h> exist.  A
 * function, typedef or macro of libs.h that differs from theirs is a
 * conflicting redeclaration or a macro redefinition (-Werror): the build
 * fails; MDB_envinfo's layout and the flag bits are compared below.
 */
#include <lmdb.h>
#include <libpmem.h>
#include <libpmem2.h>

#include "pmguard.h"

#define PMG_RUN_LIBS_CHECK 1
#include "../../src/run/libs.h"

struct envinfo_copy {
	PMG_MDB_ENVINFO_FIELDS
};

#define SAME_FIELD(f)                                                   \
	_Static_assert(offsetof(MDB_envinfo, f) ==                       \
			       offsetof(struct envinfo_copy, f) &&      \
		       sizeof(((MDB_envinfo *)0)->f) ==                  \
			       sizeof(((struct envinfo_copy *)0)->f),   \
		       "MDB_envinfo." #f " as lmdb.h has it")
_Static_assert(sizeof(MDB_envinfo) == sizeof(struct envinfo_copy),
	       "MDB_envinfo's size");
SAME_FIELD(me_mapaddr);
SAME_FIELD(me_mapsize);
SAME_FIELD(me_last_pgno);
SAME_FIELD(me_last_txnid);
SAME_FIELD(me_maxreaders);
SAME_FIELD(me_numreaders);

/* src/run/pmem.c passes the flags on as pmguard's (its FL()). */
_Static_assert(PMEM_F_MEM_VALID_FLAGS == PMG_F_MEM_VALID_FLAGS &&
		       PMEM_F_MEM_NODRAIN == PMG_F_MEM_NODRAIN &&
		       PMEM_F_MEM_NOFLUSH == PMG_F_MEM_NOFLUSH,
	       "libpmem's flag bits are pmguard's");
_Static_assert(PMEM2_F_MEM_VALID_FLAGS == PMG_F_MEM_VALID_FLAGS &&
		       PMEM2_F_MEM_NODRAIN == PMG_F_MEM_NODRAIN &&
		       PMEM2_F_MEM_NOFLUSH == PMG_F_MEM_NOFLUSH,
	       "libpmem2's flag bits are pmguard's");
