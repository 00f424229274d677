// SPDX-License-Identifier: MIT
/*
 * The address space the pools take, and the closed pools' quarantine (use
 * after close): a closed pool's addresses stay reserved, PROT_NONE, so that
 * nothing else is mapped where stale pointers may point, and a stale access
 * is reported naming the pool (_pmg_pool_quarantine_fault(), called by the
 * fault handler); a reopen of the same pool takes its old place back.  Its
 * own file, below fault.c and using only the pool lock and table
 * (pooltab.c), so that the fault path does not depend on the pools' calls.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "arch/x86/ucontext.h"
#include "pool.h"
#include "procfs.h"

/* --------------------------------------------------------- quarantine */

/*
 * Use after close.  A closed pool's addresses -- its mapping and its
 * alias's reservation -- are not given back to the kernel at once: they
 * are replaced in place by PROT_NONE reservations (MAP_FIXED over our own
 * mappings), so that no later pool, alias or other mmap() lands there
 * while stale pointers into the closed pool may exist.  A stale access
 * faults (SEGV_ACCERR, on both backends) and the fault path reports it
 * naming the closed pool (_pmg_pool_quarantine_fault()); strict aborts.
 *
 * Bounded: at most QUAR_MAX_DEFAULT closed pools and QUAR_BUDGET_DEFAULT
 * bytes of address space; past either, the oldest closed pools are
 * released first (FIFO).  The newest is always kept, however large.  A
 * pool create or open that finds no address space (ENOMEM) releases them
 * all and tries again.  Test hooks: the two limits (budget 0: none kept)
 * and _pmg_pool_quarantined().
 */
#define QUAR_CAP 1024
#define QUAR_MAX_DEFAULT 256
#define QUAR_BUDGET_DEFAULT ((size_t)1 << 40) /* 1 TiB */

size_t _pmg_pool_quarantine_budget = QUAR_BUDGET_DEFAULT;
unsigned _pmg_pool_quarantine_max = QUAR_MAX_DEFAULT;

static struct {
	uintptr_t b[2]; /* the mapping, the alias's reservation */
	size_t n[2]; /* 0: none */
	char name[96];
	/* the mapping's file (its life, not only its inode number: one
	 * unlinked is reused), offset and flags: a reopen takes it back */
	dev_t dev;
	ino_t ino;
	struct _pmg_file_id id;
	size_t offset;
	bool map_sync;
} quar[QUAR_CAP];
static unsigned quar_head, quar_count; /* oldest; how many (_pmg_pool_lock) */
static size_t quar_bytes;
/* dom: the quar[] slot; alias: 1 for the alias's reservation */
static struct _pmg_rtab qtab = { .id = _PMG_RT_QUARANTINE };

/*
 * Whether every page of [@a, @a+@n) is, per /proc/self/maps, a shared
 * mapping of the file @ino, or (@ino 0) an anonymous PROT_NONE reservation: what
 * the library left there and may replace or unmap.  Anything else (the
 * program unmapped it and something else took the place) is not ours to
 * touch.  Without /proc: @dflt.
 */
bool _pmg_pool_maps_are(uintptr_t a, size_t n, ino_t ino, bool dflt)
{
	FILE *f = _pmg_maps_open();
	struct _pmg_map m;
	uintptr_t at = a, e = a + n;

	if (!f)
		return dflt;
	while (at < e && _pmg_maps_next(f, &m)) {
		if (m.hi <= at)
			continue;
		if (m.lo > at)
			break;
		/* the file by inode alone: on overlayfs the mapping shows
		 * the underlying file's device, fstat() the overlay's */
		if (ino ? (m.ino != ino || m.perms[3] != 's')
			: (m.ino || m.ma || m.mi || strcmp(m.perms, "---p")))
			break;
		at = m.hi;
	}
	fclose(f);
	return at >= e;
}

/* Release the oldest closed pool's addresses (_pmg_pool_lock held). */
static void quar_release_oldest(void)
{
	unsigned i = quar_head % QUAR_CAP, k;

	for (k = 0; k < 2; k++) {
		if (!quar[i].n[k])
			continue;
		/* out of the table first: readers are gone when it returns */
		(void)_pmg_rt_remove(&qtab, quar[i].b[k], 0, NULL);
		/* still our reservation (the static library does not see the
		 * program's munmap/MAP_FIXED): else not ours to unmap */
		if (_pmg_pool_maps_are(quar[i].b[k], quar[i].n[k], 0, true))
			munmap((void *)quar[i].b[k], quar[i].n[k]);
		quar_bytes -= quar[i].n[k];
		quar[i].n[k] = 0;
	}
	quar_head++;
	__atomic_sub_fetch(&quar_count, 1, __ATOMIC_RELAXED);
}

/* Within the limits again; @keep: closed pools that stay regardless. */
static void quar_trim(unsigned keep)
{
	unsigned max = _pmg_pool_quarantine_max;

	if (max > QUAR_CAP)
		max = QUAR_CAP;
	while (quar_count > keep &&
	       (quar_bytes > _pmg_pool_quarantine_budget || quar_count > max ||
		!_pmg_pool_quarantine_budget || !max))
		quar_release_oldest();
}

/*
 * Give the whole quarantine back (ENOMEM: the address space is short),
 * and say so: stale pointers into those closed pools are no longer
 * caught.  (quar_trim(0) releases only past the limits: under them it
 * gave nothing back, and the create failed.)
 */
static bool quar_shed(void)
{
	struct _pmg_buf b = { .n = 0 };
	unsigned n;
	size_t bytes;
	int fd;

	pthread_mutex_lock(&_pmg_pool_lock);
	n = quar_count;
	bytes = quar_bytes;
	while (quar_count)
		quar_release_oldest();
	pthread_mutex_unlock(&_pmg_pool_lock);
	fd = n ? _pmg_report_fd() : -1;
	if (fd >= 0) {
		_pmg_buf_str(&b, "pmguard: out of address space (ENOMEM): "
				 "the quarantine of ");
		_pmg_buf_dec(&b, n);
		_pmg_buf_str(&b, " closed pool(s) (");
		_pmg_buf_dec(&b, (int64_t)bytes);
		_pmg_buf_str(&b, " bytes) released to map a pool; stale "
				 "pointers into them are no longer caught\n");
		_pmg_buf_flush(&b, fd);
	}
	return n > 0;
}

/* A PROT_NONE reservation of @len bytes anywhere; the quarantine is given
 * back first if the address space is short.  MAP_FAILED, errno set. */
char *_pmg_pool_reserve(size_t len)
{
	int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
	char *r = mmap(NULL, len, PROT_NONE, flags, -1, 0);

	if (r == MAP_FAILED && errno == ENOMEM && quar_shed())
		r = mmap(NULL, len, PROT_NONE, flags, -1, 0);
	return r;
}

/*
 * Quarantine [a[k], a[k]+n[k]) (k = 0, 1; n 0: none), ours and already
 * PROT_NONE, as the closed pool @p's (_pmg_pool_lock held).  Unmapped at once
 * when the quarantine keeps nothing or the table cannot grow.
 */
void _pmg_pool_quar_add(const struct pmg_pool *p, uintptr_t a[2], size_t n[2])
{
	unsigned i, k;

	if (!_pmg_pool_quarantine_budget || !_pmg_pool_quarantine_max ||
	    (!n[0] && !n[1])) {
		quar_trim(0); /* a lowered limit: none, or fewer, kept */
		goto unmap;
	}
	if (quar_count == QUAR_CAP)
		quar_release_oldest();
	i = (quar_head + quar_count) % QUAR_CAP;
	memcpy(quar[i].name, p->name, sizeof(quar[i].name));
	quar[i].dev = p->dev;
	quar[i].ino = p->ino;
	quar[i].id = p->id;
	quar[i].offset = p->offset;
	quar[i].map_sync = p->map_sync;
	for (k = 0; k < 2; k++) {
		struct _pmg_range r = {
			.base = a[k],
			.end = a[k] + n[k],
			.lim = a[k] + n[k],
			.dom = (int)i,
			.alias = k,
		};

		quar[i].n[k] = 0;
		if (!n[k])
			continue;
		if (_pmg_rt_insert(&qtab, &r)) {
			munmap((void *)a[k], n[k]);
			continue;
		}
		quar[i].b[k] = a[k];
		quar[i].n[k] = n[k];
		quar_bytes += n[k];
	}
	__atomic_add_fetch(&quar_count, 1, __ATOMIC_RELAXED);
	quar_trim(1); /* the newest stays */
	return;
unmap:
	for (k = 0; k < 2; k++)
		if (n[k])
			munmap((void *)a[k], n[k]);
}

/*
 * The same file's life: the same file handle (_pmg_pool_file_id()).  A
 * file whose handle is not known is never the same: its inode number may
 * be another, later file's.
 */
static bool same_file(const struct _pmg_file_id *a,
		      const struct _pmg_file_id *b)
{
	return a->len && a->len == b->len && a->type == b->type &&
	       !memcmp(a->h, b->h, a->len);
}

/*
 * A reopen of a closed pool -- the same file (device, inode and file
 * handle: a new file given an unlinked one's inode number is not the
 * same file), offset and length -- takes its quarantined mapping back:
 * the pool is mapped at
 * its old address again, over the library's own reservation, so that
 * pointers kept across the close point at the same bytes of the same
 * pool, which is protected again (a stale store outside a window faults
 * as any stray does); its alias takes its old reservation back too.
 * Never another pool's: a writable mapping of another file never lands
 * where pointers into a closed pool may point.  The address, or NULL
 * (then mapped as usual); *@alias_resv the alias's reservation, or NULL.
 */
char *_pmg_pool_quar_take(struct pmg_pool *p, bool alias, char **alias_resv)
{
	size_t alen = alias_resv_len(p);
	char *a = NULL;
	unsigned j;

	*alias_resv = NULL;
	if (!__atomic_load_n(&quar_count, __ATOMIC_RELAXED))
		return NULL;
	pthread_mutex_lock(&_pmg_pool_lock);
	for (j = 0; j < quar_count; j++) {
		unsigned q = (quar_head + j) % QUAR_CAP;

		/* the whole layout back (the pool's place, the guard above
		 * its mapping included, and its alias's reservation, gaps
		 * included), or nothing */
		if (!quar[q].n[0] || !same_file(&quar[q].id, &p->id) ||
		    quar[q].ino != p->ino ||
		    quar[q].dev != p->dev || quar[q].offset != p->offset ||
		    quar[q].n[0] != pool_place_len(p) ||
		    quar[q].b[0] % p->align ||
		    (alias && quar[q].n[1] != alen))
			continue;
		(void)_pmg_rt_remove(&qtab, quar[q].b[0], 0, NULL);
		quar_bytes -= quar[q].n[0];
		quar[q].n[0] = 0;
		/* still our reservation: else not ours to map over */
		if (_pmg_pool_maps_are(quar[q].b[0], pool_place_len(p), 0,
				       false)) {
			a = (char *)quar[q].b[0];
			p->map_sync = quar[q].map_sync;
		}
		/* its alias's too: the same file's bytes, an address only
		 * the library knew */
		if (alias) {
			(void)_pmg_rt_remove(&qtab, quar[q].b[1], 0, NULL);
			quar_bytes -= alen;
			quar[q].n[1] = 0;
			if (_pmg_pool_maps_are(quar[q].b[1], alen, 0, false))
				*alias_resv = (char *)quar[q].b[1];
		}
		break;
	}
	pthread_mutex_unlock(&_pmg_pool_lock);
	return a;
}

/*
 * The program unmapped, moved or replaced [@a, @a+@n) (interpose.c, after
 * the call): quarantined ranges there are no longer the library's.  They
 * are forgotten (what is left of them outside that span, still ours, is
 * unmapped), never unmapped later, and faults there are not reported as
 * closed pools'.  The lock-free look first: the library's own unmaps of
 * ranges already out of the table return at once (_pmg_pool_lock may be held).
 */
void _pmg_pool_quarantine_forget(uintptr_t a, size_t n)
{
	const struct _pmg_range *r;
	size_t cnt, i;
	unsigned j, k;
	int slot, e = errno;
	bool hit;

	if (!n || !__atomic_load_n(&quar_count, __ATOMIC_RELAXED))
		return;
	r = _pmg_rt_enter(&qtab, &cnt, &slot);
	i = _pmg_rt_search(r, cnt, a);
	hit = i < cnt && r[i].base < a + n;
	_pmg_rt_leave(&qtab, slot);
	if (!hit)
		return;
	pthread_mutex_lock(&_pmg_pool_lock);
	for (j = 0; j < quar_count; j++) {
		unsigned q = (quar_head + j) % QUAR_CAP;

		for (k = 0; k < 2; k++) {
			uintptr_t b = quar[q].b[k], end = b + quar[q].n[k];

			if (!quar[q].n[k] || end <= a || b >= a + n)
				continue;
			(void)_pmg_rt_remove(&qtab, b, 0, NULL);
			if (b < a)
				munmap((void *)b, a - b);
			if (end > a + n)
				munmap((void *)(a + n), end - (a + n));
			quar_bytes -= quar[q].n[k];
			quar[q].n[k] = 0;
		}
	}
	pthread_mutex_unlock(&_pmg_pool_lock);
	errno = e;
}

/* Test hook: closed pools quarantined now, and their bytes. */
unsigned _pmg_pool_quarantined(size_t *bytes)
{
	unsigned n;

	pthread_mutex_lock(&_pmg_pool_lock);
	n = quar_count;
	if (bytes)
		*bytes = quar_bytes;
	pthread_mutex_unlock(&_pmg_pool_lock);
	return n;
}

void _pmg_pool_quarantine_fault(int sig, int si_code, uintptr_t a,
				const void *ucv)
{
	uintptr_t ip = 0;
	const struct _pmg_range *r;
	struct _pmg_buf b = { .n = 0 };
	char name[sizeof(quar[0].name)];
	bool hit = false, alias = false, write = true, strict;
	size_t n, i;
	int slot, fd;

	if (sig != SIGSEGV || si_code != SEGV_ACCERR ||
	    !__atomic_load_n(&quar_count, __ATOMIC_RELAXED))
		return;
	r = _pmg_rt_enter(&qtab, &n, &slot);
	i = _pmg_rt_search(r, n, a);
	if (i < n && r[i].base <= a) {
		hit = true;
		alias = r[i].alias;
		/* copied inside: the slot is reused only after we leave */
		memcpy(name, quar[r[i].dom].name, sizeof(name));
		name[sizeof(name) - 1] = '\0';
	}
	_pmg_rt_leave(&qtab, slot);
	if (!hit)
		return;
#ifdef __x86_64__
	if (ucv) {
		const ucontext_t *uc = ucv;

		ip = pmg_uc_ip(uc);
		write = pmg_uc_pf_write(uc);
	}
#endif
	strict = pmg_get_fault_mode() == PMG_FAULT_STRICT;
	_PMG_STAT_INC(faults);
	_PMG_STAT_INC(strays);
	fd = _pmg_report_fd();
	if (fd >= 0) {
		_pmg_buf_str(&b, strict ? "pmguard: strict (aborting): "
					: "pmguard: not allowed (SIGSEGV): ");
		_pmg_buf_str(&b, write ? "stray write to " : "stray read of ");
		_pmg_buf_hex(&b, a);
		_pmg_buf_str(&b, " in a closed pool: ");
		_pmg_buf_str(&b, name);
		_pmg_buf_str(&b, alias ? " (its alias's former place)" : "");
		_pmg_buf_str(&b, " was closed; its addresses stay reserved "
				 "(PROT_NONE) so that nothing else is mapped "
				 "there (use after close), by thread ");
		_pmg_buf_dec(&b, syscall(SYS_gettid));
		_pmg_buf_str(&b, " at ip ");
		_pmg_buf_hex(&b, ip);
		_pmg_buf_str(&b, "\n");
		_pmg_buf_flush(&b, fd);
		if (strict) {
			_pmg_backtrace_handler(&b, fd);
		}
	}
	if (strict)
		abort();
}
