/* SPDX-License-Identifier: MIT */
/*
 * The persistence layer's internal header (never installed): the contract
 * between persist_cfg.c (the pick of the calls' CPU paths, the eADR
 * check), persist.c (the libpmem-style calls), arch/x86/persist_x86.c (the
 * CPU-specific loops) and the pools, which read the configuration (the
 * pool table the calls check addresses against is pool.h's).  The
 * PMGUARD_* variables that steer the pick are parsed by options.c.
 */
#ifndef PMG_PERSIST_H
#define PMG_PERSIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

#define PMG_CL 64UL			/* cache line */

/* ---- persist_cfg.c */

/* Picked once, from CPUID and the PMGUARD_* variables (options.c). */
struct _pmg_persist {
	void (*flush)(const void *addr, size_t len);
	/* d 64-byte aligned, n a multiple of 64 */
	void (*movnt)(char *d, const char *s, size_t n);
	void (*setnt)(char *d, int c, size_t n);
	const char *flush_name, *movnt_name;
	size_t threshold;
	int force;			/* PMGUARD_IS_PMEM_FORCE, -1 unset */
	bool pool_alias;		/* PMGUARD_POOL_ALIAS (default 1) */
	int auto_flush;
	int env_err;			/* 0 or -EINVAL */
	char env_msg[256];
};

extern struct _pmg_persist _pmg_persist_cfg;
extern int _pmg_persist_cfg_ready;

void _pmg_persist_init_once(void);

static inline const struct _pmg_persist *_pmg_persist_get(void)
{
	if (__builtin_expect(!__atomic_load_n(&_pmg_persist_cfg_ready,
					      __ATOMIC_ACQUIRE), 0))
		_pmg_persist_init_once();
	return &_pmg_persist_cfg;
}

/* persist.c's per-thread source cache (its comment says what it holds) */
struct _pmg_src {
	uintptr_t lo, hi;
	struct pmg_domain *d;
	unsigned long gen;
};

struct _pmg_src_cache {
	unsigned sc;
	struct _pmg_src e;
};

extern __thread struct _pmg_src_cache _pmg_scache
	__attribute__((tls_model("initial-exec")));

/* 0, or -EINVAL with the message naming the bad variable. */
int _pmg_persist_env_check(void);

/*
 * Tests: parse one persistence variable into the options behind @p and
 * pick @p's routines again (@value NULL: unset); put the options back to
 * their defaults.
 */
int _pmg_persist_opt(struct _pmg_persist *p, const char *name,
		     const char *value);
void _pmg_persist_opts_reset(void);

/* eADR from @dir (normally /sys/bus/nd/devices): 1, 0, -errno. */
int _pmg_auto_flush_at(const char *dir);

/* ---- arch/x86/persist_x86.c */
void _pmg_flush_clwb(const void *addr, size_t len);
void _pmg_flush_clflushopt(const void *addr, size_t len);
void _pmg_flush_clflush(const void *addr, size_t len);
void _pmg_flush_none(const void *addr, size_t len);
void _pmg_movnt_sse2(char *d, const char *s, size_t n);
void _pmg_movnt_avx2(char *d, const char *s, size_t n);
void _pmg_movnt_avx512f(char *d, const char *s, size_t n);
void _pmg_setnt_sse2(char *d, int c, size_t n);
void _pmg_setnt_avx2(char *d, int c, size_t n);
void _pmg_setnt_avx512f(char *d, int c, size_t n);

#if defined(__x86_64__)
/*
 * CLWB of each cache line of [@addr, @addr+@len): 66 0F AE /6 (xsaveopt
 * with a 66 prefix), no -mclwb needed.  _pmg_flush_clwb()'s loop, inlined
 * into the copy calls' hot path too (persist.c flush_lines()).
 */
static inline __attribute__((always_inline)) void
_pmg_clwb_lines(const void *addr, size_t len)
{
	uintptr_t p = (uintptr_t)addr & ~(PMG_CL - 1),
		  e = (uintptr_t)addr + len;

	for (; p < e; p += PMG_CL)
		__asm__ volatile(".byte 0x66; xsaveopt %0"
				 : "+m"(*(volatile char *)p));
}
#endif

static inline void _pmg_sfence(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ volatile("sfence" ::: "memory");
#else
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

#endif /* PMG_PERSIST_H */
