// SPDX-License-Identifier: MIT
/*
 * The one CPUID decoder (cpuid.h): leaves 0, 1, 7 and 0xD, and XCR0
 * (XGETBV) for the vector state the OS saves.  Decoded once; the copy is
 * published with a flag, so readers never see half of it.
 */
#include <stdint.h>
#include <string.h>

#include "cpuid.h"

static void cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4])
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ volatile("cpuid"
			 : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3])
			 : "a"(leaf), "c"(sub));
#else
	(void)leaf;
	(void)sub;
	r[0] = r[1] = r[2] = r[3] = 0;
#endif
}

/* XCR0: the state components the OS saves (only when CPUID.1:ECX
 * OSXSAVE says XGETBV may run). */
static uint64_t xgetbv0(void)
{
#if defined(__x86_64__) || defined(__i386__)
	uint32_t lo, hi;

	__asm__ volatile(".byte 0x0f,0x01,0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((uint64_t)hi << 32) | lo;
#else
	return 0;
#endif
}

static void decode(struct _pmg_cpu *c)
{
	uint32_t r[4], max;
	uint64_t xcr0 = 0;
	bool avx;

	memset(c, 0, sizeof(*c));
	cpuid(0, 0, r);
	max = r[0];
	if (max < 1)
		return;
	cpuid(1, 0, r);
	c->clflush = r[3] & (1u << 19);
	avx = r[2] & (1u << 28);
	if (r[2] & (1u << 27))	/* OSXSAVE */
		xcr0 = xgetbv0();
	if (max >= 7) {
		cpuid(7, 0, r);
		c->leaf7 = true;
		c->pku = r[2] & (1u << 3);
		c->ospke = r[2] & (1u << 4);
		c->pks = r[2] & (1u << 31);
		c->clflushopt = r[1] & (1u << 23);
		c->clwb = r[1] & (1u << 24);
		/* the OS must save YMM (XCR0 bits 1, 2) and ZMM (5, 6, 7) */
		c->avx2 = avx && (r[1] & (1u << 5)) && (xcr0 & 0x6) == 0x6;
		c->avx512f = c->avx2 && (r[1] & (1u << 16)) &&
			     (xcr0 & 0xe6) == 0xe6;
	}
	if (max >= 0xd) {
		cpuid(0xd, 0, r);
		if (r[0] & (1u << 9)) {	/* XCR0-supported: PKRU state */
			cpuid(0xd, 9, r);
			c->xsave_pkru_off = r[1];
		}
	}
}

static struct _pmg_cpu cpu;
static int state;	/* 0: not decoded, 1: being published, 2: in cpu */

void _pmg_cpu_get(struct _pmg_cpu *c)
{
	int none = 0;

	if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) == 2) {
		*c = cpu;
		return;
	}
	decode(c);
	if (__atomic_compare_exchange_n(&state, &none, 1, false,
					__ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
		cpu = *c;
		__atomic_store_n(&state, 2, __ATOMIC_RELEASE);
	}
}
