// SPDX-License-Identifier: MIT
/*
 * The protected-range registry (the seeds' pgmap / devmap_protected()):
 * a sorted array of non-overlapping [base, end) ranges, searched in
 * O(log n).  Writers hold _pmg.lock; readers (the fault handlers) take no
 * lock: a sequence count tells them to retry a read that raced a write.
 * Arrays outgrown are retired, never freed, so a reader that still holds
 * one reads valid memory; growth doubles, so retired arrays add up to less
 * than the live one.  Fields readers may see mid-write are stored and
 * loaded with relaxed atomics, so the retried reads are not data races.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct table {
	size_t cap;
	struct _pmg_range r[];
};

static struct {
	unsigned seq;		/* odd while a write is in progress */
	struct table *t;
	size_t n;
} reg;

static void write_begin(void)
{
	__atomic_store_n(&reg.seq, reg.seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static void write_end(void)
{
	__atomic_store_n(&reg.seq, reg.seq + 1, __ATOMIC_RELEASE);
}

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

static void put(struct _pmg_range *dst, uintptr_t base, uintptr_t end,
		int key)
{
	STORE(dst->base, base);
	STORE(dst->end, end);
	STORE(dst->key, key);
}

/* First index whose end > addr. */
static size_t search(const struct _pmg_range *r, size_t n, uintptr_t addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (LOAD(r[mid].end) <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Whether [base, end) overlaps a registered range (lock held). */
bool _pmg_reg_overlaps(uintptr_t base, uintptr_t end)
{
	size_t i;

	if (!reg.t)
		return false;
	i = search(reg.t->r, reg.n, base);
	return i < reg.n && reg.t->r[i].base < end;
}

int _pmg_reg_insert(uintptr_t base, uintptr_t end, int key)
{
	struct table *t = reg.t;
	size_t i, j;

	i = t ? search(t->r, reg.n, base) : 0;
	if (t && i < reg.n && t->r[i].base < end)
		return -EEXIST;
	if (!t || reg.n == t->cap) {
		size_t cap = t ? t->cap * 2 : 16;
		struct table *nt = calloc(1, sizeof(*nt) + cap * sizeof(nt->r[0]));

		if (!nt)
			return -ENOMEM;
		nt->cap = cap;
		if (t)
			memcpy(nt->r, t->r, reg.n * sizeof(t->r[0]));
		/* the old table is retired: readers may still hold it */
		__atomic_store_n(&reg.t, nt, __ATOMIC_RELEASE);
		t = nt;
	}
	write_begin();
	for (j = reg.n; j > i; j--)
		put(&t->r[j], t->r[j - 1].base, t->r[j - 1].end,
		    t->r[j - 1].key);
	put(&t->r[i], base, end, key);
	__atomic_store_n(&reg.n, reg.n + 1, __ATOMIC_RELAXED);
	write_end();
	return 0;
}

int _pmg_reg_remove(uintptr_t base, uintptr_t end, int *key)
{
	struct table *t = reg.t;
	size_t i;

	if (!t)
		return -ENOENT;
	i = search(t->r, reg.n, base);
	if (i >= reg.n || t->r[i].base != base || t->r[i].end != end)
		return -ENOENT;
	*key = t->r[i].key;
	write_begin();
	for (; i + 1 < reg.n; i++)
		put(&t->r[i], t->r[i + 1].base, t->r[i + 1].end,
		    t->r[i + 1].key);
	__atomic_store_n(&reg.n, reg.n - 1, __ATOMIC_RELAXED);
	write_end();
	return 0;
}

/*
 * The range holding @addr, or the gap between ranges around it (*key 0),
 * read under the sequence count; *seq is the version read.  AS-safe.
 */
static int lookup(uintptr_t addr, uintptr_t *lo, uintptr_t *hi, int *key,
		  unsigned *seq)
{
	int tries;

	for (tries = 0; tries < 1000; tries++) {
		unsigned s1 = __atomic_load_n(&reg.seq, __ATOMIC_ACQUIRE);
		struct table *t = __atomic_load_n(&reg.t, __ATOMIC_ACQUIRE);
		size_t n = __atomic_load_n(&reg.n, __ATOMIC_RELAXED), i;

		if (s1 & 1)
			continue;
		*lo = 0;
		*hi = UINTPTR_MAX;
		*key = 0;
		if (t) {
			if (n > t->cap)
				n = t->cap;
			i = search(t->r, n, addr);
			if (i < n && LOAD(t->r[i].base) <= addr) {
				*lo = LOAD(t->r[i].base);
				*hi = LOAD(t->r[i].end);
				*key = LOAD(t->r[i].key);
			} else {
				*lo = i ? LOAD(t->r[i - 1].end) : 0;
				*hi = i < n ? LOAD(t->r[i].base) : UINTPTR_MAX;
			}
		}
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&reg.seq, __ATOMIC_RELAXED) != s1)
			continue;
		*seq = s1;
		return 0;
	}
	return -EAGAIN;
}

static int answer(uintptr_t lo, uintptr_t hi, int key,
		  struct _pmg_range *out)
{
	if (!key)
		return -ENOENT;
	out->base = lo;
	out->end = hi;
	out->key = key;
	return 0;
}

/* AS-safe.  0 and *out filled, or -ENOENT. */
int _pmg_reg_find(uintptr_t addr, struct _pmg_range *out)
{
	uintptr_t lo, hi;
	unsigned seq;
	int key, rc = lookup(addr, &lo, &hi, &key, &seq);

	return rc ? rc : answer(lo, hi, key, out);
}

/*
 * _pmg_reg_find() with a per-thread one-entry cache of the last answer: the
 * range that held the address, or the gap between ranges that did not.
 * The entry is valid while the registry's sequence count has not moved.
 * For the persistence calls, which look up the same destinations over and
 * over.  AS-safe: the entry has its own sequence count (odd while being
 * written); a signal handler that finds it odd neither trusts nor writes
 * it, and a reader whose entry changed under it (a handler wrote it)
 * treats that as a miss.
 */
static __thread struct {
	unsigned sc;		/* odd while the entry is being written */
	unsigned seq;		/* registry version it is valid for */
	uintptr_t lo, hi;	/* [lo, hi): the range or the gap */
	int key;		/* 0 for a gap */
} cache = { 0, 1, 0, 0, 0 };

#define SIGFENCE() __atomic_signal_fence(__ATOMIC_SEQ_CST)

int _pmg_reg_find_cached(uintptr_t addr, struct _pmg_range *out)
{
	unsigned sc = cache.sc, seq;
	uintptr_t lo, hi;
	int key, rc;

	SIGFENCE();
	if (!(sc & 1)) {
		seq = cache.seq;
		lo = cache.lo;
		hi = cache.hi;
		key = cache.key;
		SIGFENCE();
		if (cache.sc == sc &&
		    seq == __atomic_load_n(&reg.seq, __ATOMIC_ACQUIRE) &&
		    addr >= lo && addr < hi)
			goto answer;
	}
	rc = lookup(addr, &lo, &hi, &key, &seq);
	if (rc)
		return rc;
	sc = cache.sc;
	SIGFENCE();
	if (!(sc & 1)) {
		cache.sc = sc + 1;
		SIGFENCE();
		cache.seq = seq;
		cache.lo = lo;
		cache.hi = hi;
		cache.key = key;
		SIGFENCE();
		cache.sc = sc + 2;
	}
answer:
	return answer(lo, hi, key, out);
}

int _pmg_reg_each(int key, int (*fn)(const struct _pmg_range *, void *),
		  void *arg)
{
	size_t i;
	int rc, first = 0;

	for (i = 0; reg.t && i < reg.n; i++) {
		if (reg.t->r[i].key != key)
			continue;
		rc = fn(&reg.t->r[i], arg);
		if (rc && !first)
			first = rc;
	}
	return first;
}
