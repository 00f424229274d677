// SPDX-License-Identifier: MIT
/*
 * The 0.1 ABI's calls whose signature changed, kept in libpmguard.so for
 * binaries linked against 0.1 (and only there: not in the static library,
 * not in libpmguard-run.so; the Makefile links this file into $(SHARED)
 * alone).  0.2 gave the info and stats calls a size argument (pmguard.h,
 * "Sizes"); a 0.1 binary's pmg_stats_get(st) binds to
 * pmg_stats_get@PMGUARD_0.1, which is the 0.2 call with the 0.1 struct's
 * size.  New callers get the default version, pmg_stats_get@@PMGUARD_0.2
 * (src/libpmguard.map).
 */
#include "../internal.h"

/* name@ver (not the default version) is @impl */
#define PMG_SYMVER(impl, name, ver) __asm__(".symver " #impl ", " #name "@" ver)

PMG_API int _pmg_stats_get_0_1(struct pmg_stats *st);
PMG_API int _pmg_stats_get_0_1(struct pmg_stats *st)
{
	return pmg_stats_get(st, PMG_STATS_SIZE_0_1);
}
PMG_SYMVER(_pmg_stats_get_0_1, pmg_stats_get, "PMGUARD_0.1");

PMG_API int _pmg_get_info_0_1(struct pmg_info *info);
PMG_API int _pmg_get_info_0_1(struct pmg_info *info)
{
	return pmg_get_info(info, PMG_INFO_SIZE_0_1);
}
PMG_SYMVER(_pmg_get_info_0_1, pmg_get_info, "PMGUARD_0.1");

PMG_API int _pmg_pool_get_info_0_1(const struct pmg_pool *pool,
				   struct pmg_pool_info *info);
PMG_API int _pmg_pool_get_info_0_1(const struct pmg_pool *pool,
				   struct pmg_pool_info *info)
{
	return pmg_pool_get_info(pool, info, PMG_POOL_INFO_SIZE_0_1);
}
PMG_SYMVER(_pmg_pool_get_info_0_1, pmg_pool_get_info, "PMGUARD_0.1");

PMG_API int _pmg_persist_get_info_0_1(struct pmg_persist_info *pi);
PMG_API int _pmg_persist_get_info_0_1(struct pmg_persist_info *pi)
{
	return pmg_persist_get_info(pi, PMG_PERSIST_INFO_SIZE_0_1);
}
PMG_SYMVER(_pmg_persist_get_info_0_1, pmg_persist_get_info, "PMGUARD_0.1");
