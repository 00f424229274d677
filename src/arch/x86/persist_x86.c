// SPDX-License-Identifier: MIT
/*
 * x86-64 persistence loops: cache-line flushes and non-temporal copies.
 * Each vector path carries its own target attribute, so the library builds
 * without -march and persist_cfg.c picks one by CPUID at start-up.
 */
#include <string.h>

#include "../../persist.h"

#if defined(__x86_64__)
#include <immintrin.h>

/*
 * Keep the streaming stores in address order, a line at a time: the
 * compiler would otherwise interleave lines, and a write-combining buffer
 * left half full is flushed as a partial (slow) write.
 */
#define LINE_DONE() __asm__ volatile("" ::: "memory")

#define LINES(addr, len, p, e)						\
	uintptr_t p = (uintptr_t)(addr) & ~(PMG_CL - 1),		\
		  e = (uintptr_t)(addr) + (len)

void _pmg_flush_clwb(const void *addr, size_t len)
{
	_pmg_clwb_lines(addr, len);
}

/* CLFLUSHOPT is 66 0F AE /7 (clflush with a 66 prefix). */
void _pmg_flush_clflushopt(const void *addr, size_t len)
{
	LINES(addr, len, p, e);

	for (; p < e; p += PMG_CL)
		__asm__ volatile(".byte 0x66; clflush %0"
				 : "+m"(*(volatile char *)p));
}

void _pmg_flush_clflush(const void *addr, size_t len)
{
	LINES(addr, len, p, e);

	for (; p < e; p += PMG_CL)
		__asm__ volatile("clflush %0" : "+m"(*(volatile char *)p));
}

/* ---- SSE2: the x86-64 baseline */

void _pmg_movnt_sse2(char *d, const char *s, size_t n)
{
	for (; n >= 128; n -= 128, d += 128, s += 128) {
		__m128i a = _mm_loadu_si128((const __m128i *)s);
		__m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
		__m128i x = _mm_loadu_si128((const __m128i *)(s + 48));
		__m128i e = _mm_loadu_si128((const __m128i *)(s + 64));
		__m128i f = _mm_loadu_si128((const __m128i *)(s + 80));
		__m128i g = _mm_loadu_si128((const __m128i *)(s + 96));
		__m128i h = _mm_loadu_si128((const __m128i *)(s + 112));

		_mm_stream_si128((__m128i *)d, a);
		_mm_stream_si128((__m128i *)(d + 16), b);
		_mm_stream_si128((__m128i *)(d + 32), c);
		_mm_stream_si128((__m128i *)(d + 48), x);
		LINE_DONE();
		_mm_stream_si128((__m128i *)(d + 64), e);
		_mm_stream_si128((__m128i *)(d + 80), f);
		_mm_stream_si128((__m128i *)(d + 96), g);
		_mm_stream_si128((__m128i *)(d + 112), h);
	}
	for (; n >= 64; n -= 64, d += 64, s += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)s);
		__m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
		__m128i x = _mm_loadu_si128((const __m128i *)(s + 48));

		_mm_stream_si128((__m128i *)d, a);
		_mm_stream_si128((__m128i *)(d + 16), b);
		_mm_stream_si128((__m128i *)(d + 32), c);
		_mm_stream_si128((__m128i *)(d + 48), x);
	}
}

void _pmg_setnt_sse2(char *d, int c, size_t n)
{
	__m128i v = _mm_set1_epi8((char)c);

	for (; n >= 64; n -= 64, d += 64) {
		_mm_stream_si128((__m128i *)d, v);
		_mm_stream_si128((__m128i *)(d + 16), v);
		_mm_stream_si128((__m128i *)(d + 32), v);
		_mm_stream_si128((__m128i *)(d + 48), v);
	}
}

/* ---- AVX2 */

/*
 * The source is prefetched ahead of the loads (its first 4 KiB at once,
 * then 512 bytes per 512 copied), and each 512-byte step loads all of its
 * bytes before it streams them: the loads then hit the cache and do not
 * wait between the stores.  libpmem's AVX loops do the same.
 *
 * Eight lines per test of the bound, unrolled: a test per line cost
 * 7 instructions a line (more than the line's loads and stores).  A
 * prefetch never faults, so the last group may reach up to 7 lines past
 * the source's end: hints for lines nobody reads, nothing more.
 */
#define PF_AHEAD 4096
#define PF_STEP (8 * PMG_CL)

static inline __attribute__((always_inline)) void prefetch8(const char *p)
{
	int i;

#pragma GCC unroll 8
	for (i = 0; i < 8; i++)
		_mm_prefetch(p + i * PMG_CL, _MM_HINT_T0);
}

static inline __attribute__((always_inline)) void
prefetch_start(const char *s, size_t n, const char **pf)
{
	const char *e = s + (n < PF_AHEAD ? n : PF_AHEAD);

	for (*pf = s; *pf < e; *pf += PF_STEP)
		prefetch8(*pf);
}

static inline __attribute__((always_inline)) void
prefetch_next(const char **pf, const char *end)
{
	if (*pf < end) {
		prefetch8(*pf);
		*pf += PF_STEP;
	}
}

__attribute__((target("avx2")))
void _pmg_movnt_avx2(char *d, const char *s, size_t n)
{
	const char *pf = s, *end = s + n;

	/* under one 512-byte step the loads come at once: no prefetch */
	if (n >= 512)
		prefetch_start(s, n, &pf);
	for (; n >= 512; n -= 512, d += 512, s += 512) {
		const __m256i *x = (const __m256i *)s;
		__m256i *y = (__m256i *)d, v[16];
		int i;

		prefetch_next(&pf, end);
#pragma GCC unroll 16
		for (i = 0; i < 16; i++)
			v[i] = _mm256_loadu_si256(x + i);
#pragma GCC unroll 8
		for (i = 0; i < 16; i += 2) {
			_mm256_stream_si256(y + i, v[i]);
			_mm256_stream_si256(y + i + 1, v[i + 1]);
			LINE_DONE();
		}
	}
	for (; n >= 64; n -= 64, d += 64, s += 64) {
		__m256i a = _mm256_loadu_si256((const __m256i *)s);
		__m256i b = _mm256_loadu_si256((const __m256i *)(s + 32));

		_mm256_stream_si256((__m256i *)d, a);
		_mm256_stream_si256((__m256i *)(d + 32), b);
	}
	_mm256_zeroupper();
}

__attribute__((target("avx2")))
void _pmg_setnt_avx2(char *d, int c, size_t n)
{
	__m256i v = _mm256_set1_epi8((char)c);

	for (; n >= 128; n -= 128, d += 128) {
		_mm256_stream_si256((__m256i *)d, v);
		_mm256_stream_si256((__m256i *)(d + 32), v);
		LINE_DONE();
		_mm256_stream_si256((__m256i *)(d + 64), v);
		_mm256_stream_si256((__m256i *)(d + 96), v);
	}
	for (; n >= 64; n -= 64, d += 64) {
		_mm256_stream_si256((__m256i *)d, v);
		_mm256_stream_si256((__m256i *)(d + 32), v);
	}
	_mm256_zeroupper();
}

/* ---- AVX-512F */

__attribute__((target("avx512f")))
void _pmg_movnt_avx512f(char *d, const char *s, size_t n)
{
	const char *pf = s, *end = s + n;

	/* under one 512-byte step the loads come at once: no prefetch */
	if (n >= 512)
		prefetch_start(s, n, &pf);
	for (; n >= 512; n -= 512, d += 512, s += 512) {
		__m512i v[8];
		int i;

		prefetch_next(&pf, end);
#pragma GCC unroll 8
		for (i = 0; i < 8; i++)
			v[i] = _mm512_loadu_si512((const void *)(s + 64 * i));
#pragma GCC unroll 8
		for (i = 0; i < 8; i++) {
			_mm512_stream_si512((void *)(d + 64 * i), v[i]);
			LINE_DONE();
		}
	}
	for (; n >= 64; n -= 64, d += 64, s += 64)
		_mm512_stream_si512((void *)d,
				    _mm512_loadu_si512((const void *)s));
	_mm256_zeroupper();
}

__attribute__((target("avx512f")))
void _pmg_setnt_avx512f(char *d, int c, size_t n)
{
	/* set1_epi8 needs AVX512BW: broadcast a 32-bit pattern instead */
	__m512i v = _mm512_set1_epi32((int)(0x01010101u * (uint8_t)c));

	for (; n >= 64; n -= 64, d += 64)
		_mm512_stream_si512((void *)d, v);
	_mm256_zeroupper();
}

#else /* not x86-64: portable fallbacks (never picked by CPUID there) */

void _pmg_flush_clwb(const void *addr, size_t len)
{
	(void)addr;
	(void)len;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

void _pmg_flush_clflushopt(const void *addr, size_t len)
{
	_pmg_flush_clwb(addr, len);
}

void _pmg_flush_clflush(const void *addr, size_t len)
{
	_pmg_flush_clwb(addr, len);
}

void _pmg_movnt_sse2(char *d, const char *s, size_t n)
{
	memcpy(d, s, n);
}

void _pmg_movnt_avx2(char *d, const char *s, size_t n)
{
	memcpy(d, s, n);
}

void _pmg_movnt_avx512f(char *d, const char *s, size_t n)
{
	memcpy(d, s, n);
}

void _pmg_setnt_sse2(char *d, int c, size_t n)
{
	memset(d, c, n);
}

void _pmg_setnt_avx2(char *d, int c, size_t n)
{
	memset(d, c, n);
}

void _pmg_setnt_avx512f(char *d, int c, size_t n)
{
	memset(d, c, n);
}
#endif

/* eADR, or PMGUARD_NO_FLUSH=1: the caches are in the persistence domain. */
void _pmg_flush_none(const void *addr, size_t len)
{
	(void)addr;
	(void)len;
}
