/* SPDX-License-Identifier: MIT */
/*
 * The CPU features the library looks at, decoded from CPUID (and XGETBV)
 * in one place, once per process (cpuid.c).  Every user asks
 * _pmg_cpu_get(): the PKU probe (prim_pku.c), the frame's PKRU offset
 * (init.c), the persistence paths (persist_cfg.c), pmg_info(), the
 * backtrace in a report (report.c).  Off x86 every feature reads as
 * absent.
 */
#ifndef PMG_ARCH_X86_CPUID_H
#define PMG_ARCH_X86_CPUID_H

#include <stdbool.h>

struct _pmg_cpu {
	bool leaf7;		/* CPUID leaf 7 exists */
	bool pku;		/* CPUID.7.0:ECX[3] */
	bool ospke;		/* CPUID.7.0:ECX[4]: the OS enabled PKU */
	bool pks;		/* CPUID.7.0:ECX[31] */
	bool clflush;		/* CPUID.1:EDX[19] */
	bool clflushopt;	/* CPUID.7.0:EBX[23] */
	bool clwb;		/* CPUID.7.0:EBX[24] */
	bool avx2;		/* CPUID.7.0:EBX[5], YMM state enabled in XCR0 */
	bool avx512f;		/* CPUID.7.0:EBX[16], ZMM state enabled too */
	/* CPUID.(0xD,9).EBX: PKRU's offset in the XSAVE area; 0 when the
	 * CPU saves no PKRU state */
	unsigned xsave_pkru_off;
};

/* The features, decoded on the first call and kept.  AS-safe (no lock:
 * a caller that races the first one decodes for itself). */
void _pmg_cpu_get(struct _pmg_cpu *c);

#endif /* PMG_ARCH_X86_CPUID_H */
