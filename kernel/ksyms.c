// SPDX-License-Identifier: MIT
/*
 * Address -> "function+0xoff" for oops traces and WARN callers.  The table
 * is generated from the first link (ksyms.awk); an empty one is linked
 * the first time round.
 */
#include "kernel.h"

extern const u64 ksyms_num;
extern const u64 ksyms_addr[];
extern const char *const ksyms_name[];
extern char _etext[];

const char *ksym(unsigned long addr, char *buf, size_t size)
{
	u64 lo = 0, hi = ksyms_num;

	if (!ksyms_num || addr < ksyms_addr[0] ||
	    addr >= (unsigned long)_etext) {
		snprintf(buf, size, "0x%lx", addr);
		return buf;
	}
	/* Last symbol at or below @addr (the table is sorted). */
	while (hi - lo > 1) {
		u64 mid = (lo + hi) / 2;

		if (ksyms_addr[mid] <= addr)
			lo = mid;
		else
			hi = mid;
	}
	snprintf(buf, size, "%s+0x%lx", ksyms_name[lo],
		 addr - (unsigned long)ksyms_addr[lo]);
	return buf;
}
