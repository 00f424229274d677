/* SPDX-License-Identifier: MIT */
/*
 * failinject.h - allocation-failure injection for one test binary, never
 * in the shipped library.  The binary that includes it is linked with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,
 * --wrap=free,--wrap=mmap,--wrap=munmap (mk/oom.mk): every call the static
 * library (and the test) makes to those comes here; calls inside libc and
 * shared libraries do not.  While armed, the Nth call fails (NULL or
 * MAP_FAILED, errno ENOMEM) and its call site (the return address) is
 * kept; every block and mapping handed out is counted until freed, so a
 * test can compare what is still live after cleaning up.  The test's own
 * allocations use the __real_*() functions.  Not thread-safe beyond the
 * atomic call counter: the tests that use it run one library thread at a
 * time.
 */
#ifndef PMG_FAILINJECT_H
#define PMG_FAILINJECT_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/types.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
void __real_free(void *p);
void *__real_mmap(void *a, size_t n, int prot, int flags, int fd, off_t off);
int __real_munmap(void *a, size_t n);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
void __wrap_free(void *p);
void *__wrap_mmap(void *a, size_t n, int prot, int flags, int fd, off_t off);
int __wrap_munmap(void *a, size_t n);

#define FI_SLOTS 8192

static struct {
	bool armed;
	long calls; /* calls counted while armed */
	long fail_at; /* the call that fails (1-based); 0: none */
	void *site; /* where the failed call returns to */
	const char *what; /* "malloc", "mmap", ... */
	long live_heap, live_maps; /* handed out, not yet given back */
	void *heap[FI_SLOTS];
	struct {
		uintptr_t a;
		size_t n;
		void *site; /* who mapped it */
	} maps[FI_SLOTS];
} fi;

static inline void fi_arm(long fail_at)
{
	fi.calls = 0;
	fi.fail_at = fail_at;
	fi.site = NULL;
	fi.what = NULL;
	__atomic_store_n(&fi.armed, true, __ATOMIC_SEQ_CST);
}

static inline void fi_disarm(void)
{
	__atomic_store_n(&fi.armed, false, __ATOMIC_SEQ_CST);
}

static inline bool fi_fail(const char *what, void *site)
{
	if (!__atomic_load_n(&fi.armed, __ATOMIC_SEQ_CST))
		return false;
	if (__atomic_add_fetch(&fi.calls, 1, __ATOMIC_SEQ_CST) != fi.fail_at)
		return false;
	fi.site = site;
	fi.what = what;
	errno = ENOMEM;
	return true;
}

static inline void fi_heap_add(void *p)
{
	size_t i, h;

	if (!p)
		return;
	h = ((uintptr_t)p >> 4) % FI_SLOTS;
	for (i = 0; i < FI_SLOTS; i++, h = (h + 1) % FI_SLOTS)
		if (!fi.heap[h]) {
			fi.heap[h] = p;
			fi.live_heap++;
			return;
		}
}

static inline void fi_heap_del(void *p)
{
	size_t i, h;

	if (!p)
		return;
	h = ((uintptr_t)p >> 4) % FI_SLOTS;
	for (i = 0; i < FI_SLOTS && fi.heap[h]; i++, h = (h + 1) % FI_SLOTS)
		if (fi.heap[h] == p) {
			/* backward-shift deletion keeps the probe chains */
			size_t j = h;

			fi.heap[h] = NULL;
			fi.live_heap--;
			for (j = (h + 1) % FI_SLOTS; fi.heap[j];
			     j = (j + 1) % FI_SLOTS) {
				void *q = fi.heap[j];

				fi.heap[j] = NULL;
				fi.live_heap--;
				fi_heap_add(q);
			}
			return;
		}
}

void *__wrap_malloc(size_t n)
{
	void *p;

	if (fi_fail("malloc", __builtin_return_address(0)))
		return NULL;
	p = __real_malloc(n);
	fi_heap_add(p);
	return p;
}

void *__wrap_calloc(size_t n, size_t m)
{
	void *p;

	if (fi_fail("calloc", __builtin_return_address(0)))
		return NULL;
	p = __real_calloc(n, m);
	fi_heap_add(p);
	return p;
}

void *__wrap_realloc(void *o, size_t n)
{
	void *p;

	if (fi_fail("realloc", __builtin_return_address(0)))
		return NULL;
	p = __real_realloc(o, n);
	if (p) {
		fi_heap_del(o);
		fi_heap_add(p);
	}
	return p;
}

char *__wrap_strdup(const char *s)
{
	char *p;

	if (fi_fail("strdup", __builtin_return_address(0)))
		return NULL;
	p = __real_strdup(s);
	fi_heap_add(p);
	return p;
}

void __wrap_free(void *p)
{
	fi_heap_del(p);
	__real_free(p);
}

void *__wrap_mmap(void *a, size_t n, int prot, int flags, int fd, off_t off)
{
	void *p;
	size_t i;

	if (fi_fail("mmap", __builtin_return_address(0)))
		return MAP_FAILED;
	p = __real_mmap(a, n, prot, flags, fd, off);
	if (p == MAP_FAILED)
		return p;
	/* MAP_FIXED over a mapping counted before: that one is gone */
	for (i = 0; i < FI_SLOTS; i++)
		if (fi.maps[i].n && fi.maps[i].a >= (uintptr_t)p &&
		    fi.maps[i].a + fi.maps[i].n <= (uintptr_t)p + n) {
			fi.maps[i].n = 0;
			fi.live_maps--;
		}
	for (i = 0; i < FI_SLOTS; i++)
		if (!fi.maps[i].n) {
			fi.maps[i].a = (uintptr_t)p;
			fi.maps[i].n = n;
			fi.maps[i].site = __builtin_return_address(0);
			fi.live_maps++;
			break;
		}
	return p;
}

/* A mapping counts as given back when an munmap() covers its first
 * byte (the library unmaps reservations in parts). */
int __wrap_munmap(void *a, size_t n)
{
	size_t i;

	for (i = 0; i < FI_SLOTS; i++)
		if (fi.maps[i].n && fi.maps[i].a >= (uintptr_t)a &&
		    fi.maps[i].a < (uintptr_t)a + n) {
			fi.maps[i].n = 0;
			fi.live_maps--;
		}
	return __real_munmap(a, n);
}

#endif /* PMG_FAILINJECT_H */
