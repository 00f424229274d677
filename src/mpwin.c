// SPDX-License-Identifier: MIT
/*
 * The mprotect backend's windows, in one place.  On mprotect a window's
 * write access is page protection, and two kinds of window open it on
 * fewer pages than the whole domain:
 *
 *   - lazy write windows (pmg_open(), pmg_write_begin(), `pmguard run`'s
 *     LMDB transactions): pages granted on their first write fault,
 *     put back when the domain's last write window closes;
 *   - page windows (the persistence calls): the pages a call's
 *     destination touches, read-write for the call.
 *
 * Each leaves the other's pages alone: a lazy close re-protects through
 * _pmg_pw_mprotect(), which skips the pages of open page windows; a page
 * window's close leaves the pages a lazy window holds (lazy_keep()); the
 * fault path's answer for a page (_pmg_pw_prot()) asks both tables.  They
 * were two files, lazywin.c and pagewin.c, each calling the other (a
 * cycle in the object graph); one file keeps the rules
 * between the two tables in one read and both tables static.  Last, the
 * page protection of a domain kept by it, on either backend
 * (_pmg_paged_set()).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

/* ---------------------------------------------------- lazy write windows */

/*
 * Lazy write windows: a write window (pmg_open(), pmg_write_begin(),
 * `pmguard run`'s LMDB transactions) changes no page when it opens.  The first write to a page of the domain faults; the
 * SIGSEGV handler sees a write window open on the domain, makes that one
 * page read-write, records it and retries the write.  The close that ends
 * the domain's last write window puts back only the recorded pages,
 * coalesced into runs.  A window's cost follows the pages written, not
 * the size of the domain (a 1 GiB LMDB map cost two mprotect(2) of 1 GiB
 * per transaction).  PMGUARD_MPROTECT_WINDOWS=eager restores the old
 * whole-domain edges.
 *
 * Windows stay process-wide: a page granted to one thread is writable by
 * every thread until the domain's last write window closes.
 *
 * Record: per domain, LZ_MAX pages, appended by the fault handlers without a
 * lock (a slot reserved by fetch-and-add, filled by compare-and-swap).
 * When it is full the handler makes the whole domain read-write for the
 * rest of the window (`full`, stats.lazy_full) and the close re-protects
 * it whole, as an eager window would.
 *
 * The race with the close: a handler reads the domain's epoch, checks that
 * a write window is open, records the page, makes it read-write, then
 * reads the epoch again.  The close (lock held) zeroes the count of write
 * windows, bumps the epoch, then reads the record.  Either the handler's
 * record was seen by the close (its epoch read came first), or the
 * handler sees the new epoch and puts the page back itself.  All the
 * handler does is AS-safe: atomics, mprotect(2), the lock-free registry.
 */

#define LZ_MAX 4096
/*
 * A grant opens the aligned block of LZ_BLOCK (1 MiB) around the faulting
 * page, clipped to its range: a write window allows writes anywhere in
 * its domain, so this is still far less than the whole domain, and
 * programs write pages near each other (LMDB's tree and free pages): each
 * fault and mprotect(2) (several µs: signal delivery, a VMA split, later
 * a merge and a TLB flush) then serves many pages.  The close coalesces
 * runs closer than LZ_GAP (8 MiB): one mprotect(2) over a gap of pages
 * already protected costs less than a second call.  Tried on LMDB, 10
 * records per transaction: 16 pages 111 µs per transaction, 64 pages 66,
 * 256 pages 100 (noisy host; 1 record: 66, 37, 53).
 */
#define LZ_BLOCK (256 * PMG_PAGE_SIZE)
#define LZ_GAP (2048 * PMG_PAGE_SIZE)

struct lz {
	unsigned long epoch;
	unsigned n; /* slots reserved (may exceed LZ_MAX) */
	int full; /* the whole domain is read-write */
	int live; /* a write window is open: counted in _pmg_lazy_live */
	uintptr_t page[LZ_MAX]; /* a block's base; 0: free */
};

/*
 * A record per domain that has had a write window (32 KiB of address
 * space, mostly untouched), made by _pmg_lazy_prepare() under the lock
 * and kept for the slot's life (handlers read it without a lock: never
 * freed).  NULL: the domain never had a write window.
 */
static struct lz *lzs[PMG_DOM_MAX];

static struct lz *lz_of(int id)
{
	return __atomic_load_n(&lzs[id], __ATOMIC_ACQUIRE);
}

/* @id's record, made if missing (mmap(2): AS-safe; a racing maker's
 * copy is given back).  NULL: no memory. */
static struct lz *lz_make(int id)
{
	struct lz *l = lz_of(id), *none = NULL;

	if (l)
		return l;
	l = mmap(NULL, sizeof(*l), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (l == MAP_FAILED)
		return NULL;
	if (__atomic_compare_exchange_n(&lzs[id], &none, l, false,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return l;
	munmap(l, sizeof(*l));
	return none;
}

int _pmg_lazy_prepare(int id)
{
	return lz_make(id) ? 0 : -ENOMEM;
}

bool _pmg_lazy; /* set by pmg_init(): mprotect backend, lazy */

/*
 * Handlers that lower pages from the rights they read (a stale grant's
 * put-back, a single step's or a contained write's re-protect) race a
 * window that opens its domain whole: read "read-only", the domain opens
 * whole, mprotect(PROT_READ) lands after it, and the thread that blocks
 * SIGSEGV dies at its next write.  Such a handler brackets the read and
 * the mprotect (_pmg_lazy_lower_begin/end: a count in one of two
 * phases); the whole open, the full flag set, flips the phase twice and
 * waits each time for the old phase's count to drain: every bracket
 * that began before the flag was set has ended, and every later one
 * reads the flag.  Handlers entering meanwhile cannot starve it.
 */
static unsigned lower_phase, lower_busy[2];

unsigned _pmg_lazy_lower_begin(void)
{
	unsigned ph = __atomic_load_n(&lower_phase, __ATOMIC_SEQ_CST) & 1;

	__atomic_add_fetch(&lower_busy[ph], 1, __ATOMIC_SEQ_CST);
	return ph;
}

void _pmg_lazy_lower_end(unsigned ph)
{
	__atomic_sub_fetch(&lower_busy[ph], 1, __ATOMIC_SEQ_CST);
}

static void lowerers_wait(void)
{
	int i;

	for (i = 0; i < 2; i++) {
		unsigned ph = __atomic_fetch_xor(&lower_phase, 1,
						 __ATOMIC_SEQ_CST);

		ph &= 1; /* the phase before the flip */
		while (__atomic_load_n(&lower_busy[ph], __ATOMIC_SEQ_CST))
			sched_yield();
	}
}

static bool lazy_full(int id)
{
	struct lz *l = lz_of(id);

	return l && __atomic_load_n(&l->full, __ATOMIC_SEQ_CST) != 0;
}

/* @page of @id was granted in the open window (or @id is full).
 * AS-safe. */
static bool lazy_has(int id, uintptr_t page)
{
	struct lz *l = lz_of(id);
	unsigned i, n;

	if (!_pmg_lazy || !l ||
	    !__atomic_load_n(&_pmg.dom[id].gw, __ATOMIC_RELAXED))
		return false;
	if (lazy_full(id))
		return true;
	n = __atomic_load_n(&l->n, __ATOMIC_ACQUIRE);
	if (n > LZ_MAX)
		n = LZ_MAX;
	page &= ~(LZ_BLOCK - 1);
	for (i = 0; i < n; i++)
		if (__atomic_load_n(&l->page[i], __ATOMIC_RELAXED) == page)
			return true;
	return false;
}

/* Make every range of @id @prot (AS-safe: the lock-free registry). */
static void ranges_prot(int id, int prot)
{
	uintptr_t at = 0;
	struct _pmg_range r;

	while (!_pmg_reg_first_overlap(at, UINTPTR_MAX, &r)) {
		if (r.dom == id)
			(void)_pmg_pw_mprotect(id, r.base, r.end, prot);
		at = r.end;
	}
}

/* Put [@b, @e) of @id back to @prot where it is still a range of @id.
 * EINVAL (device dax, hugetlb: a mapping split only at its alignment, a
 * relaxed grant's page noted as a block): the whole range, as an eager
 * close would (protect_page() granted the aligned block around it). */
static void run_prot(int id, uintptr_t b, uintptr_t e, int prot)
{
	struct _pmg_range r;

	while (b < e && !_pmg_reg_first_overlap(b, e, &r)) {
		uintptr_t x = r.base > b ? r.base : b;
		uintptr_t y = r.end < e ? r.end : e;

		if (r.dom == id && _pmg_pw_mprotect(id, x, y, prot) == -EINVAL)
			(void)_pmg_pw_mprotect(id, r.base, r.end, prot);
		b = y;
	}
}

/* Record @page (slot taken by CAS).  false: the record is full. */
static bool record(struct lz *l, uintptr_t page)
{
	for (;;) {
		unsigned i = __atomic_fetch_add(&l->n, 1, __ATOMIC_SEQ_CST);
		uintptr_t zero = 0;

		if (i >= LZ_MAX)
			return false;
		if (__atomic_compare_exchange_n(&l->page[i], &zero, page, false,
						__ATOMIC_SEQ_CST,
						__ATOMIC_RELAXED))
			return true;
		/* a stale entry from an earlier window: the next slot */
	}
}

/*
 * Make every range of @id in the block at @b read-write (where the
 * program allows it), so that a recorded block is exactly what is
 * writable: two ranges of one domain may share a block (two
 * pmg_protect() calls, a range split by a partial munmap()), and a
 * read(2)'s grant (_pmg_lazy_pregrant()) trusts the record.  0, -EINVAL
 * (device dax, hugetlb: no split inside the mapping), or another
 * -errno; ENOMEM (a hole: every mapped page granted, caps.c) is 0.
 * AS-safe (the lock-free registry).
 */
static int block_grant(int id, uintptr_t b)
{
	uintptr_t at = b, e = b + LZ_BLOCK;
	struct _pmg_range r;
	int worst = 0;

	while (at < e && !_pmg_reg_first_overlap(at, e, &r)) {
		uintptr_t x = r.base > at ? r.base : at;
		uintptr_t y = r.end < e ? r.end : e;
		int rc;

		at = y;
		if (r.dom != id)
			continue;
		rc = _pmg_cap_mprotect(x, y, PROT_READ | PROT_WRITE);
		if (rc == -EINVAL || (rc && rc != -ENOMEM && !worst))
			worst = rc;
	}
	return worst;
}

/*
 * The window closed while a handler granted the block at @b (the whole
 * domain if @full): the close may not have seen it; put it back to the
 * domain's rights (the retry decides again).  Inside the lowering
 * bracket.  The rights are read again after the mprotect(2) and it is
 * redone until they hold, as _pmg_fault_set_page() does: another edge
 * may have changed them in between (a read window opened and closed on
 * a no-access domain), and rights read before its count changed must not
 * land after its pages did.  AS-safe.
 */
static void put_back(int id, uintptr_t b, bool full)
{
	int prot = _pmg_prot_of(_pmg_process_rights(&_pmg.dom[id])), now, i;

	for (i = 0; i < 64; i++) {
		if (!full)
			run_prot(id, b, b + LZ_BLOCK, prot);
		else
			ranges_prot(id, prot);
		now = _pmg_prot_of(_pmg_process_rights(&_pmg.dom[id]));
		if (now == prot)
			break;
		prot = now;
	}
}

/*
 * The fault handler: a fault on @page of @id, in a range the program
 * lets us write.  true: a write window is open on @id and the page is
 * now writable (retry the access); false: not ours to grant.  AS-safe.
 *
 * The block is made writable before it is recorded: a block in the
 * record is writable (a racing read(2) that finds it there skips it).
 * A block already recorded is made writable again without a second
 * record (an edge that set the domain's pages meanwhile -- a read
 * window opening on a no-access domain, a range added, the program's
 * own mprotect() -- may have lowered it).  The close's race (above)
 * holds in this order too: the epoch is read again after the record.
 */
bool _pmg_lazy_grant(int id, uintptr_t page)
{
	uintptr_t b = page & ~(LZ_BLOCK - 1);
	struct lz *l = lz_of(id);
	struct _pmg_range r;
	unsigned long e;
	unsigned ph;
	bool full;
	int rc;

	/* no record: no write window was ever opened on it */
	if (!_pmg_lazy || !l)
		return false;
	e = __atomic_load_n(&l->epoch, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&_pmg.dom[id].gw, __ATOMIC_SEQ_CST))
		return false;
	if (_pmg_reg_find(page, &r) || r.dom != id)
		return false;
	full = lazy_full(id);
	if (!full) {
		rc = block_grant(id, b);
		/* device dax: no single-page split; the whole domain */
		if (rc == -EINVAL)
			full = true;
		else if (rc)
			return false;
		else if (lazy_has(id, b))
			; /* recorded before: made writable again */
		else if (record(l, b))
			_PMG_STAT_INC(lazy_grants);
		else
			full = true;
	}
	if (full) {
		if (!__atomic_exchange_n(&l->full, 1, __ATOMIC_SEQ_CST))
			_PMG_STAT_INC(lazy_full);
		ranges_prot(id, PROT_READ | PROT_WRITE);
	}
	ph = _pmg_lazy_lower_begin();
	if (__atomic_load_n(&l->epoch, __ATOMIC_SEQ_CST) != e ||
	    !__atomic_load_n(&_pmg.dom[id].gw, __ATOMIC_SEQ_CST))
		put_back(id, b, full);
	_pmg_lazy_lower_end(ph);
	return true;
}

unsigned _pmg_lazy_live;

/* @l's domain has no write window open any more. */
static void lz_unlive(struct lz *l)
{
	if (__atomic_exchange_n(&l->live, 0, __ATOMIC_SEQ_CST))
		__atomic_sub_fetch(&_pmg_lazy_live, 1, __ATOMIC_SEQ_CST);
}

/*
 * A kernel write into a lazily windowed range takes no fault: the copy
 * (copy_to_user()) stops at the first block not yet granted, and read(2)
 * returns a short count -- not an error -- so a program that trusts a
 * regular file's read commits stale bytes.  The interposed calls that
 * write user memory (interpose.c: the read and recv families, fread(),
 * process_vm_readv()'s local side) grant their destination first, as
 * the program's own first writes would have been: each block of
 * [@a, @a+@n) in a range of a domain with a write window open (where
 * the program's own rights allow writes: caps.c), through the fault
 * path's grant.
 * A window that closes meanwhile makes the write fail or come back short,
 * as without a window.  AS-safe (a read() in a signal handler): atomics,
 * mprotect(2), the lock-free registry.
 */
static void pregrant(uintptr_t a, size_t n, bool src);

void _pmg_lazy_pregrant(uintptr_t a, size_t n)
{
	pregrant(a, n, false);
}

/*
 * The mirror: a kernel READ of the caller's memory (write(2), send(2)
 * and the like: their source) takes no fault either, and a domain whose
 * pages are not readable now (PMG_DOMAIN_NOACCESS, no read window open)
 * has them granted by a write window only block by block: the blocks of
 * [@a, @a+@n) there are granted as a user load's fault would grant them.
 * A domain whose pages are readable (write-disabled, or a read window
 * open) is left alone.  AS-safe.
 */
void _pmg_lazy_pregrant_src(uintptr_t a, size_t n)
{
	pregrant(a, n, true);
}

static void pregrant(uintptr_t a, size_t n, bool src)
{
	uintptr_t e = a + n, at = a & ~(PMG_PAGE_SIZE - 1), last = 0;
	struct _pmg_range r;
	int last_dom = 0;

	if (!_pmg_lazy || !n ||
	    !__atomic_load_n(&_pmg_lazy_live, __ATOMIC_RELAXED))
		return;
	if (e < a)
		e = UINTPTR_MAX;
	while (at < e && !_pmg_reg_first_overlap(at, e, &r)) {
		uintptr_t p = r.base > at ? r.base : at;
		uintptr_t hi = r.end < e ? r.end : e;
		struct lz *l = lz_of(r.dom);

		at = r.end;
		if (!l || !__atomic_load_n(&l->live, __ATOMIC_SEQ_CST) ||
		    !__atomic_load_n(&_pmg.dom[r.dom].gw, __ATOMIC_SEQ_CST))
			continue;
		if (src && (_pmg_prot_of(_pmg_process_rights(
				    &_pmg.dom[r.dom])) & PROT_READ))
			continue; /* readable as it is */
		/* each block, even one recorded: an edge may have lowered
		 * it since (_pmg_lazy_grant()); a block shared with the
		 * range before was granted with it */
		for (; p < hi; p = (p & ~(LZ_BLOCK - 1)) + LZ_BLOCK) {
			uintptr_t blk = p & ~(LZ_BLOCK - 1);

			if (blk == last && r.dom == last_dom)
				continue;
			(void)_pmg_lazy_grant(r.dom, p);
			last = blk;
			last_dom = r.dom;
		}
	}
}

/*
 * A write window opens on @id (lock held, the count already raised) in
 * a thread that blocks SIGSEGV: a signal handler whose sa_mask holds it
 * (a SIGSEGV handler's own, or a full mask; TSan runs every deferred
 * handler with all signals blocked), or a worker that blocked them all.
 * The first write there would fault with the signal blocked, and the
 * kernel kills for that: no handler could grant the block.  Such a window
 * opens the whole domain now, as an eager window does, and the close
 * that ends the last write window re-protects it whole.  Read from the
 * kernel, not a libc wrapper a sanitizer intercepts.  Eager windows
 * (PMGUARD_MPROTECT_WINDOWS=eager) are whole already; each waits for the
 * lowering handlers inside their bracket, if any.
 */
void _pmg_lazy_open(int id)
{
	struct lz *l = lz_of(id); /* made by _pmg_lazy_prepare() */
	uint64_t set = 0;

	if (!_pmg_lazy) {
		/* eager windows: the edge has made the domain read-write,
		 * but a handler's re-protect that read the rights before
		 * the count changed (inside its bracket) may land after
		 * it: wait for those, then again.  A handler entering the
		 * bracket after the fence reads the new count.  No
		 * sigprocmask(2) here: one load when no handler is in. */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (__atomic_load_n(&lower_busy[0], __ATOMIC_SEQ_CST) ||
		    __atomic_load_n(&lower_busy[1], __ATOMIC_SEQ_CST)) {
			lowerers_wait();
			ranges_prot(id, PROT_READ | PROT_WRITE);
		}
		return;
	}
	if (!l)
		return;
	if (!__atomic_exchange_n(&l->live, 1, __ATOMIC_SEQ_CST))
		__atomic_add_fetch(&_pmg_lazy_live, 1, __ATOMIC_SEQ_CST);
	if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &set, sizeof(set)))
		set = ~0ULL; /* cannot tell: take the safe side */
	if (!(set & (1ULL << (SIGSEGV - 1))))
		return;
	/* from here _pmg_process_rights() says read-write: every edge
	 * keeps the domain so until the last close */
	if (!__atomic_exchange_n(&l->full, 1, __ATOMIC_SEQ_CST))
		_PMG_STAT_INC(lazy_full);
	lowerers_wait(); /* no handler lowers a page after this */
	/* even if the edge made it read-write (a full record left from
	 * before): a handler may have lowered pages before the wait */
	ranges_prot(id, PROT_READ | PROT_WRITE);
}

/* Record @page of @id for the next close (see _pmg_lazy_note_begin()). */
static void lazy_note(struct lz *l, int id, uintptr_t page)
{
	if (lazy_full(id))
		return;
	if (!record(l, page & ~(LZ_BLOCK - 1)) &&
	    !__atomic_exchange_n(&l->full, 1, __ATOMIC_SEQ_CST))
		_PMG_STAT_INC(lazy_full);
}

/*
 * The handler grants @page of @id outside a lazy grant (relaxed mode, a
 * domain callback): the page is recorded, so that the next close of a
 * write window puts it back, as the whole-domain edges used to
 * ("re-armed by the next window edge").  The caller records it
 * (_pmg_lazy_note_begin()), makes it writable, then
 * _pmg_lazy_note_end(): a close that took the record in between (the
 * epoch moved; a close keeps it odd while it takes the record) put the
 * page back while it was still read-only and forgot it, so it is
 * recorded again: the next close, not that one, re-arms it.  AS-safe.
 */
unsigned long _pmg_lazy_note_begin(int id, uintptr_t page)
{
	/* a domain that never had a write window has no record yet */
	struct lz *l = _pmg_lazy ? lz_make(id) : NULL;
	unsigned long e;

	if (!l)
		return 0;
	e = __atomic_load_n(&l->epoch, __ATOMIC_SEQ_CST);
	lazy_note(l, id, page);
	return e;
}

void _pmg_lazy_note_end(int id, uintptr_t page, unsigned long e)
{
	struct lz *l = _pmg_lazy ? lz_of(id) : NULL;
	int i;

	if (!l)
		return;
	/* until a record was made with no close taking records around it
	 * (the epoch even and unchanged): a close that reserved no slot
	 * for it may have emptied the slot before it was filled */
	for (i = 0; i < 64; i++) {
		unsigned long now = __atomic_load_n(&l->epoch,
						    __ATOMIC_SEQ_CST);

		if (now == e && !(e & 1))
			break;
		e = now;
		lazy_note(l, id, page);
	}
}

/*
 * Record the blocks of [@b, @e) of @id from outside the handler (lock
 * held): a page window's pages on a domain with a write window open stay
 * writable for the rest of that window, and so does the rest of their
 * blocks, as if the call had faulted them in (a recorded block is
 * writable whole: _pmg_lazy_grant()).  false: no write window open (the
 * caller protects them as usual).  A full record (or a mapping that
 * cannot be split inside it): the whole domain read-write, as the
 * handler does.
 */
static bool lazy_keep(int id, uintptr_t b, uintptr_t e)
{
	struct lz *l = lz_of(id);

	if (!_pmg_lazy || !l || !_pmg.dom[id].gw)
		return false;
	for (b &= ~(LZ_BLOCK - 1); b < e && !lazy_full(id); b += LZ_BLOCK) {
		if (lazy_has(id, b))
			continue; /* its pages: read-write since the grant */
		if (block_grant(id, b) == -EINVAL || !record(l, b)) {
			if (!__atomic_exchange_n(&l->full, 1, __ATOMIC_SEQ_CST))
				_PMG_STAT_INC(lazy_full);
			ranges_prot(id, PROT_READ | PROT_WRITE);
		}
	}
	return true;
}

static uintptr_t sorted[LZ_MAX]; /* scratch of the close (lock held) */

static int cmp_page(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The last write window on @id closed (lock held; the count of write
 * windows is already 0): put the recorded pages back to the domain's
 * rights, coalesced; a full record, the whole domain.  @whole_done: the
 * caller has just set the whole domain to its rights (the process-wide
 * rights changed: the window was full when it read them), so only the
 * record is reset.
 */
void _pmg_lazy_close(int id, bool whole_done)
{
	struct lz *l = lz_of(id);
	unsigned i, n, m = 0;
	int prot, full;

	if (!_pmg_lazy || !l)
		return;
	lz_unlive(l);
	/* odd while the record is taken (_pmg_lazy_note_end()) */
	__atomic_add_fetch(&l->epoch, 1, __ATOMIC_SEQ_CST);
	n = __atomic_exchange_n(&l->n, 0, __ATOMIC_SEQ_CST);
	if (n > LZ_MAX)
		n = LZ_MAX;
	for (i = 0; i < n; i++) {
		uintptr_t p = __atomic_exchange_n(&l->page[i], 0,
						  __ATOMIC_SEQ_CST);

		if (p)
			sorted[m++] = p;
	}
	prot = _pmg_prot_of(_pmg_process_rights(&_pmg.dom[id]));
	full = __atomic_exchange_n(&l->full, 0, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&l->epoch, 1, __ATOMIC_SEQ_CST);
	if (full) {
		if (!whole_done)
			ranges_prot(id, prot); /* as an eager window closes */
		return;
	}
	if (!m || whole_done)
		return;
	qsort(sorted, m, sizeof(sorted[0]), cmp_page);
	for (i = 0; i < m;) {
		uintptr_t b = sorted[i], e = b + LZ_BLOCK;

		for (i++; i < m && sorted[i] <= e + LZ_GAP; i++)
			if (sorted[i] + LZ_BLOCK > e)
				e = sorted[i] + LZ_BLOCK;
		run_prot(id, b, e, prot);
	}
}

/* Fork child: the handlers of the other threads are not here. */
void _pmg_lazy_fork_child(void)
{
	__atomic_store_n(&lower_busy[0], 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&lower_busy[1], 0, __ATOMIC_SEQ_CST);
}

/* Fork child, or a domain's slot reset (lock held): forget the record
 * (the caller sets the pages' rights). */
void _pmg_lazy_reset(int id)
{
	struct lz *l = lz_of(id);
	unsigned i;

	if (!_pmg_lazy || !l)
		return;
	lz_unlive(l);
	__atomic_add_fetch(&l->epoch, 1, __ATOMIC_SEQ_CST); /* odd */
	__atomic_store_n(&l->n, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&l->full, 0, __ATOMIC_SEQ_CST);
	for (i = 0; i < LZ_MAX; i++)
		if (l->page[i])
			l->page[i] = 0;
	__atomic_add_fetch(&l->epoch, 1, __ATOMIC_SEQ_CST);
}

/* The rights a domain's pages have under page protection: process-wide
 * window counts over its default.  AS-safe (reads only). */
unsigned _pmg_process_rights(const struct _pmg_dom *d)
{
	unsigned dflt = _pmg_default_rights(d);

	/* relaxed: the fault handlers read these while the lock's holder
	 * changes them.  Lazy write windows (above) leave the pages at
	 * the other rights and grant them one by one, unless the window
	 * opened the whole domain (full record, SIGSEGV blocked): then
	 * every edge that sets the pages from these rights (a read
	 * window's, a range added, the program's mprotect()) must leave
	 * them read-write, as a thread blocking SIGSEGV cannot fault. */
	if (__atomic_load_n(&d->gw, __ATOMIC_RELAXED) &&
	    (!_pmg_lazy || lazy_full(d->id)))
		return pmg_window_rights(dflt, PMG_WRITE);
	if (__atomic_load_n(&d->gr, __ATOMIC_RELAXED))
		return pmg_window_rights(dflt, PMG_READ);
	return dflt;
}

/* ---------------------------------------------------------- page windows */

/*
 * Page windows: a persistence call opens write access only on the pages
 * its destination touches, not on the domain's every range (a domain
 * window costs one mprotect(2) of the whole pool per edge, and while it
 * is open every thread may write anywhere in the domain).  Windows opened
 * with pmg_open()/pmg_write_begin() stay domain-wide.
 *
 * Each open page window is an entry [base, end) of a domain in a small
 * table, under _pmg.lock.  The pages of an entry are read-write; whoever lowers
 * a key's rights (a domain window's last close, the fault path's re-arm,
 * an entry's own close) leaves the pages of the remaining entries alone,
 * so two threads' calls on one page, or a domain window that closes while
 * a call is inside, never take a page away from a call in progress (the
 * entries act as per-page counts).  A full table makes the caller fall
 * back to a domain window.  A fork child drops every entry (their threads
 * are not in the child) and puts the keys' rights back.
 *
 * The fault path reads the table without the lock: an entry appears or
 * goes only while its pages are changed under the lock, so the answer for
 * a faulting page is the one before or after the edge.
 */

#define PW_MAX 64

static struct {
	uintptr_t base, end;
	int id; /* the domain; 0: free */
} pw[PW_MAX];
static unsigned pw_used; /* entries in use */

static bool pw_covers(int id, uintptr_t page)
{
	unsigned i;

	for (i = 0; i < PW_MAX; i++)
		if (__atomic_load_n(&pw[i].id, __ATOMIC_ACQUIRE) == id &&
		    __atomic_load_n(&pw[i].base, __ATOMIC_RELAXED) <= page &&
		    page < __atomic_load_n(&pw[i].end, __ATOMIC_RELAXED))
			return true;
	return false;
}

/* The protection @page of domain @id should have now: read-write while
 * it holds a key (PKU: the key protects it), else its page protection.
 * AS-safe. */
int _pmg_pw_prot(int id, uintptr_t page)
{
	int prot = _pmg_prot_of(_pmg_process_rights(&_pmg.dom[id]));

	if (_pmg_dom_hw(id) ||
	    (__atomic_load_n(&pw_used, __ATOMIC_RELAXED) &&
	     pw_covers(id, page)) ||
	    lazy_has(id, page))
		prot = PROT_READ | PROT_WRITE;
	return _pmg_cap_limit(page, prot);
}

/*
 * mprotect [@base, @end) of @key to @prot, leaving out the pages of page
 * windows on @key unless @prot is read-write.  Lock held (or the fault
 * path).  0 or -errno.
 */
int _pmg_pw_mprotect(int id, uintptr_t base, uintptr_t end, int prot)
{
	uintptr_t b[PW_MAX], e[PW_MAX], cur = base;
	unsigned i, j, n = 0;
	int rc;

	if (prot == (PROT_READ | PROT_WRITE) ||
	    !__atomic_load_n(&pw_used, __ATOMIC_RELAXED))
		return _pmg_cap_mprotect(base, end, prot);
	for (i = 0; i < PW_MAX; i++) {
		uintptr_t x, y;

		if (pw[i].id != id || pw[i].end <= base || pw[i].base >= end)
			continue;
		x = pw[i].base < base ? base : pw[i].base;
		y = pw[i].end > end ? end : pw[i].end;
		/* insertion sort by start */
		for (j = n; j > 0 && b[j - 1] > x; j--) {
			b[j] = b[j - 1];
			e[j] = e[j - 1];
		}
		b[j] = x;
		e[j] = y;
		n++;
	}
	for (i = 0; i < n; i++) {
		if (b[i] > cur && (rc = _pmg_cap_mprotect(cur, b[i], prot)))
			return rc;
		if (e[i] > cur)
			cur = e[i];
	}
	if (cur < end)
		return _pmg_cap_mprotect(cur, end, prot);
	return 0;
}

/*
 * Open write access on the pages of [@addr, @addr+@len), all inside one
 * protected range of @d.  Returns the entry (> 0), 0 when the table is
 * full or the mapping cannot be split there (use a domain window), or
 * -errno.
 */
int _pmg_pw_open(struct pmg_domain *d, const void *addr, size_t len)
{
	uintptr_t pb = (uintptr_t)addr & ~(PMG_PAGE_SIZE - 1);
	uintptr_t pe = ((uintptr_t)addr + len + PMG_PAGE_SIZE - 1) &
		       ~(PMG_PAGE_SIZE - 1);
	int id = d->_id, rc = 0;
	unsigned i;

	pthread_mutex_lock(&_pmg.lock);
	for (i = 0; i < PW_MAX && pw[i].id; i++)
		;
	/* (a domain holding a key needs a window, not pages) */
	if (i == PW_MAX || id < 1 || id >= PMG_DOM_MAX || !_pmg.dom[id].live ||
	    _pmg.dom[id].h != d || _pmg.dom[id].hw) {
		pthread_mutex_unlock(&_pmg.lock);
		return 0;
	}
	/* the entry first, the pages after, as every edge changes its
	 * count first: a handler's re-protect that read the rights before
	 * the entry appeared reads them again after its mprotect(2) and
	 * finds it (_pmg_fault_set_page()).  Relaxed: the fault handlers
	 * read a slot while it is reused. */
	__atomic_store_n(&pw[i].base, pb, __ATOMIC_RELAXED);
	__atomic_store_n(&pw[i].end, pe, __ATOMIC_RELAXED);
	__atomic_store_n(&pw[i].id, id, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&pw_used, 1, __ATOMIC_SEQ_CST);
	if (_pmg_process_rights(&_pmg.dom[id]) != PMG_RIGHTS_RW &&
	    (rc = _pmg_cap_mprotect(pb, pe, PROT_READ | PROT_WRITE))) {
		__atomic_store_n(&pw[i].id, 0, __ATOMIC_RELEASE);
		__atomic_sub_fetch(&pw_used, 1, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&_pmg.lock);
		/* device dax splits mappings only at its alignment: there a
		 * page window cannot be made, a domain window can */
		if (rc == -EINVAL)
			return 0;
		return _pmg_err(rc, "mprotect for a page window %p-%#lx: %s",
				(void *)pb, (unsigned long)pe, strerror(-rc));
	}
	pthread_mutex_unlock(&_pmg.lock);
	return (int)i + 1;
}

/* Close entry @slot (from _pmg_pw_open()): its pages get the key's rights
 * back, except those another entry still holds. */
void _pmg_pw_close(int slot)
{
	unsigned i = (unsigned)slot - 1;
	int id, prot;

	pthread_mutex_lock(&_pmg.lock);
	id = pw[i].id;
	__atomic_store_n(&pw[i].id, 0, __ATOMIC_RELEASE);
	__atomic_sub_fetch(&pw_used, 1, __ATOMIC_RELAXED);
	prot = _pmg_prot_of(_pmg_process_rights(&_pmg.dom[id]));
	/* inside a lazy write window on the domain the pages stay writable
	 * until it closes (lazy_keep()), as if the call had faulted them in */
	if (prot != (PROT_READ | PROT_WRITE) &&
	    !lazy_keep(id, pw[i].base, pw[i].end))
		(void)_pmg_pw_mprotect(id, pw[i].base, pw[i].end, prot);
	pthread_mutex_unlock(&_pmg.lock);
}

/* Fork child (lock held by the atfork handlers' thread): no entry's call
 * runs here; drop them all, then each key's pages get its rights. */
void _pmg_pw_fork_child(void)
{
	int ids[PW_MAX];
	unsigned i, n = 0;

	if (!pw_used)
		return;
	for (i = 0; i < PW_MAX; i++) {
		if (pw[i].id)
			ids[n++] = pw[i].id;
		pw[i].id = 0;
	}
	__atomic_store_n(&pw_used, 0, __ATOMIC_RELAXED);
	for (i = 0; i < n; i++)
		if (_pmg.dom[ids[i]].live && !_pmg.dom[ids[i]].hw)
			(void)_pmg_paged_set(ids[i],
					     _pmg_process_rights(
						     &_pmg.dom[ids[i]]));
}

/* ------------------------------------------- domains by page protection */

static int apply(const struct _pmg_range *r, void *arg)
{
	int prot = *(int *)arg;
	/* the pages of the persistence calls' page windows stay writable */
	int rc = _pmg_pw_mprotect(r->dom, r->base, r->end, prot);

	/* unmapped behind the library's back (unmapped.c): not a reason
	 * to fail a window on every other range */
	return rc == -ENOMEM ? 0 : rc;
}

/* Both backends: a domain kept by page protection (every one on
 * mprotect, a virtual one on PKU: its pages have key 0). */
int _pmg_paged_set(int id, unsigned rights)
{
	int prot = _pmg_prot_of(rights);

	return _pmg_reg_each(id, apply, &prot);
}
