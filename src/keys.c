// SPDX-License-Identifier: MIT
/*
 * Hardware keys for domains (PKU): more domains than keys.
 *
 * x86 has 16 keys, the kernel hands out at most 15, and other code in the
 * process may hold some.  A domain gets a key when it is created if one
 * can be had (a free one: a reserved one, or pkey_alloc(2), while pmguard
 * holds fewer than PMGUARD_KEYS; once keys were reserved, a write-disabled
 * domain takes only a reserved one: "Keys reserved early" below);
 * otherwise it is virtual: its ranges are kept by page protection
 * (process-wide, as on the mprotect backend), key 0.  A window on a
 * virtual domain gets it a key (_pmg_key_get()): a free one, else one
 * taken from the least recently windowed domain that has no window open,
 * no single step and no fault handler on its key (eviction), whose
 * ranges then go back to page protection.  When no key
 * can be had (every keyed domain busy or pinned, PMGUARD_KEYS=0, no
 * membarrier(2)), the window is a page-protection one, process-wide.
 *
 * A key changes hands only under the library lock, and never under a
 * window: a window on a keyed domain lives in the thread's counts
 * (_pmg_tls, per key), which the inline pmg_open() changes without any
 * lock.  So every thread that opens windows inline is known here first
 * (its first pmg_open() comes through _pmg_open_slow(), which registers
 * its counts: _pmg_tls.r[0] says so), and an eviction of key k from
 * domain v:
 *   1. marks v (and the domain getting k) moving, clears v's handle's
 *      _key (an inline open now goes the slow way, or, if it read the key
 *      before, sees the change after its count: pmguard.h);
 *   2. membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED): every thread of the
 *      process passes a full barrier, so its count raised before is
 *      visible now, and its read of _key after it sees the change;
 *   3. reads every registered thread's counts for k, the single steps in
 *      flight (steps.c: a step holds rights on its key, or pages of a
 *      virtual domain open) and the fault handlers inside the bracket
 *      (steps.c's _pmg_keys_enter/leave: a handler that is deciding on
 *      k): any of
 *      them, and v keeps k (stats evict_busy), the next victim is tried;
 *   4. re-protects v's ranges by page protection, key 0
 *      (pkey_mprotect(2): protection and key change at once, never a
 *      moment unprotected), gives k to the new domain, tags its ranges
 *      read-write with k, and publishes its handle (bits, then _key).
 * The handlers retry an access on a moving domain (the page's key or
 * protection is changing under it: retried, it faults afresh, judged by
 * the state after).
 *
 * Which victim: the clock (second-chance) approximation of least
 * recently windowed.  The inline open sets its handle's _ref (one load,
 * a store only the first time after a scan); an eviction first gives
 * every keyed domain whose _ref is set a fresh stamp and clears _ref,
 * then takes the oldest stamp.  A stamp is also set when a domain gets a
 * key.
 *
 * A key whose thread-local rights could leak to its next domain is never
 * taken: a domain whose key a relaxed-mode or callback grant left open in
 * some thread (the grant lasts until that thread's next window edge) is
 * kept on its key for good (_pmg_key_keep(), stats kept), as is a
 * PMG_DOMAIN_PINNED one.  Rights on a key readable by some thread (a
 * write-disabled domain's) go only to write-disabled domains: a no-access
 * domain takes only a key no thread may read.
 *
 * Nothing here assumes a key number: pmguard takes what pkey_alloc(2)
 * gives and never touches a key it does not hold.
 */
#define _GNU_SOURCE
#include <linux/membarrier.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

#ifndef SYS_pkey_mprotect
#define SYS_pkey_mprotect 329
#endif

/* ------------------------------------------------------------ counters */

static struct {
	uint64_t assigned, evictions, evict_busy, kept;
} ks;
uint64_t _pmg_keys_raced, _pmg_keys_paged;

#define KS_INC(f) __atomic_add_fetch(&(f), 1, __ATOMIC_RELAXED)

void _pmg_keys_stats_reset(void)
{
	__atomic_store_n(&ks.assigned, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&ks.evictions, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&ks.evict_busy, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&ks.kept, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&_pmg_keys_raced, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&_pmg_keys_paged, 0, __ATOMIC_RELAXED);
}

/* The statistics calls: the library's counters (_pmg_stats, state.c) and
 * the keys' above. */
PMG_API int pmg_stats_get(struct pmg_stats *st, size_t size)
{
	struct pmg_stats s;
	uint64_t *dst = (uint64_t *)&s, *src = (uint64_t *)&_pmg_stats;
	size_t i;
	int rc = _pmg_out_check("pmg_stats_get", st, size, PMG_STATS_SIZE_0_1,
				true);

	if (rc)
		return rc;
	for (i = 0; i < sizeof(s) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
	_pmg_out_copy(st, size, &s, sizeof(s));
	return 0;
}

PMG_API void pmg_stats_reset(void)
{
	uint64_t *s = (uint64_t *)&_pmg_stats;
	size_t i;

	for (i = 0; i < sizeof(_pmg_stats) / sizeof(uint64_t); i++)
		__atomic_store_n(&s[i], 0, __ATOMIC_RELAXED);
	_pmg_keys_stats_reset();
	_pmg_audit_sites_reset();
}

/* ------------------------------------------------ the threads' counts */

/*
 * Every thread that may hold a window on a key: its counts' address.
 * Under the lock; an entry goes when its thread ends (thread.c's
 * destructor, armed when it registers), before its TLS is freed.
 */
static struct _pmg_ws **threads;
static size_t nthreads, capthreads;

int _pmg_thread_register(void)
{
	struct _pmg_ws *t = &_pmg_tls;
	int rc = 0;

	if (t->r[0] & _PMG_TLS_REG)
		return 0;
	pthread_mutex_lock(&_pmg.lock);
	if (nthreads == capthreads) {
		size_t n = capthreads ? 2 * capthreads : 16;
		struct _pmg_ws **m = realloc(threads, n * sizeof(*m));

		if (!m) {
			rc = _pmg_err(-ENOMEM,
				      "pmg_open: out of memory to "
				      "register the thread's window counts");
			goto out;
		}
		threads = m;
		capthreads = n;
	}
	threads[nthreads++] = t;
	__atomic_store_n(&t->r[0], t->r[0] | _PMG_TLS_REG, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&_pmg.lock);
	if (!rc)
		_pmg_thread_arm(); /* unregistered as it ends */
	return rc;
}

void _pmg_thread_unregister(void)
{
	struct _pmg_ws *t = &_pmg_tls;
	size_t i;

	if (!(t->r[0] & _PMG_TLS_REG))
		return;
	pthread_mutex_lock(&_pmg.lock);
	for (i = 0; i < nthreads; i++)
		if (threads[i] == t) {
			threads[i] = threads[--nthreads];
			break;
		}
	__atomic_store_n(&t->r[0], t->r[0] & ~_PMG_TLS_REG, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&_pmg.lock);
}

/* Does any known thread hold a window on @k?  Lock held. */
static bool key_windowed(int k)
{
	size_t i;

	for (i = 0; i < nthreads; i++)
		if (__atomic_load_n(&threads[i]->w[k], __ATOMIC_RELAXED) ||
		    __atomic_load_n(&threads[i]->r[k], __ATOMIC_RELAXED))
			return true;
	return false;
}

/* ------------------------------------------------------- grants kept */

void _pmg_key_keep(int id)
{
	if (!__atomic_exchange_n(&_pmg.dom[id].pinned, true, __ATOMIC_SEQ_CST))
		KS_INC(ks.kept);
}

/* -------------------------------------------------------- membarrier */

/*
 * 1: private expedited (IPIs to the CPUs running this process's threads,
 * microseconds), 2: global (waits for every CPU to schedule: slow), -1:
 * none (no eviction), 0: not asked yet.  Lock held.
 */
static int mb_kind;

static int mb_probe(void)
{
	long cmds;

	if (mb_kind)
		return mb_kind;
	mb_kind = -1;
	cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0);
	if (cmds < 0)
		return mb_kind;
	if ((cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
	    (cmds & MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) &&
	    !syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
		     0))
		mb_kind = 1;
	else if (cmds & MEMBARRIER_CMD_GLOBAL)
		mb_kind = 2;
	return mb_kind;
}

static int mb(void)
{
	return (int)syscall(SYS_membarrier,
			    mb_kind == 1 ? MEMBARRIER_CMD_PRIVATE_EXPEDITED
					 : MEMBARRIER_CMD_GLOBAL,
			    0);
}

/* ------------------------------------------------------ the key pool */

/*
 * Keys reserved early (_pmg_keys_reserve(): `pmguard run`'s constructor,
 * before the program creates threads).  pkey_alloc() sets the rights of
 * the calling thread only, and a thread inherits its creator's register:
 * a thread created before a domain's key was allocated has it
 * access-disabled, and its first read of the domain needs the handler to
 * sync its rights in the signal frame, which a thread that blocks SIGSEGV
 * cannot take (a blocked fault kills).  A key allocated write-disabled
 * before any such thread exists is write-disabled in all of them
 * (key_everywhere): a write-disabled domain on it needs no sync.  Only
 * write-disabled domains take one: every thread created since the
 * reservation may read the key, which a no-access domain must not allow.
 *
 * Once keys were reserved (reserved_early), a write-disabled domain takes
 * only such a key: a free one, or by eviction one a write-disabled domain
 * holds; never a fresh key from the kernel (access-disabled in the
 * threads older than it) nor a no-access domain's.  When none can be had
 * it stays virtual: page protection, key 0, which every thread reads.  A
 * key_everywhere key never goes back to the kernel: a domain deleted or
 * a failed hand-over puts it back in reserved[], write-disabled in the
 * calling thread as in every other.  So no thread ever has a key
 * access-disabled that a write-disabled domain it may read stands on.
 * Under the library lock.
 */
static int reserved[PMG_NR_KEYS];
static unsigned nreserved;
static uint32_t key_everywhere;
static bool reserved_early;

/*
 * Keys that some thread may read (PKU): a write-disabled domain's default
 * (every thread that synced or was created since has it readable) or a
 * reservation.  pmg_domain_delete() and an eviction can reset the calling
 * thread's register only, so such a key, freed and allocated again or
 * handed on, is still readable in those threads: it may serve a
 * write-disabled domain again, never a no-access one (whose memory they
 * would read unnoticed).
 */
static uint32_t key_readable;
static unsigned nskipped; /* readable keys kernel_key() passed over */

/* Hardware keys pmguard holds now: the keyed domains' and the reserved. */
static int keys_held(void)
{
	int k, n = (int)nreserved;

	for (k = 1; k < PMG_NR_KEYS; k++)
		n += _pmg.keyown[k] != 0;
	return n;
}

/* A usable key from the kernel (1..15, not held by a domain), or -errno. */
static int take_kernel_key(unsigned dflt)
{
	int k = _pmg.prim->key_alloc(dflt);

	if (k >= 0 && (k < 1 || k >= PMG_NR_KEYS || _pmg.keyown[k])) {
		_pmg.prim->key_free(k);
		return -EBUSY;
	}
	return k;
}

/* Key @k, no longer a domain's, back where it came from: a reserved one
 * to the reserve (write-disabled here, as in every other thread), any
 * other to the kernel (access-disabled here first).  Lock held. */
static void key_release(int k)
{
	if (key_everywhere & (1u << k)) {
		_pmg.prim->set_rights(k, PMG_RIGHTS_WD);
		reserved[nreserved++] = k;
		return;
	}
	_pmg.prim->set_rights(k, PMG_RIGHTS_AD);
	_pmg.prim->key_free(k);
}

/*
 * Up to @n keys (PMGUARD_KEYS counts them), leaving the kernel at least
 * @leave it could still hand to the program's own pkey_alloc(2): when it
 * has fewer, reserved keys go back until it has them (or none is left
 * reserved).  The caller has started the library (pmg_init()) and
 * created no thread yet (a thread that exists already is not covered).
 * Returns the number of keys reserved.
 */
int _pmg_keys_reserve(unsigned n, unsigned leave)
{
	const struct _pmg_prim *prim = __atomic_load_n(&_pmg.prim,
						       __ATOMIC_ACQUIRE);
	int spare[PMG_NR_KEYS], k;
	unsigned nspare = 0, left;

	if (!prim || !prim->thread_local)
		return 0; /* mprotect: rights are process-wide */
	pthread_mutex_lock(&_pmg.lock);
	reserved_early = true;
	while (nreserved < n && nreserved < PMG_NR_KEYS - 1 &&
	       keys_held() < _pmg.keys_max) {
		k = take_kernel_key(PMG_RIGHTS_WD);
		if (k < 0)
			break;
		reserved[nreserved++] = k;
		key_readable |= 1u << k;
		key_everywhere |= 1u << k;
	}
	/* how many the kernel has left: taken access-disabled (its
	 * default in every thread) and given straight back */
	while (nspare < leave && (k = take_kernel_key(PMG_RIGHTS_AD)) > 0)
		spare[nspare++] = k;
	for (left = nspare; left < leave && nreserved; left++) {
		/* no other thread yet: access-disabled again everywhere */
		k = reserved[--nreserved];
		key_readable &= ~(1u << k);
		key_everywhere &= ~(1u << k);
		_pmg.prim->set_rights(k, PMG_RIGHTS_AD);
		_pmg.prim->key_free(k);
	}
	while (nspare)
		_pmg.prim->key_free(spare[--nspare]);
	n = nreserved;
	pthread_mutex_unlock(&_pmg.lock);
	return (int)n;
}

/* A free key for a domain whose default is @dflt: reserved (write-
 * disabled only; after a reservation nothing else) or from the kernel (a
 * no-access domain passes over readable ones); -ENOSPC when none
 * (PMGUARD_KEYS reached too). */
static int free_key(unsigned dflt)
{
	int held[PMG_NR_KEYS], k;
	unsigned n = 0;

	nskipped = 0;
	if (dflt == PMG_RIGHTS_WD && nreserved)
		return reserved[--nreserved];
	if (dflt == PMG_RIGHTS_WD && reserved_early)
		return -ENOSPC; /* a fresh key: no read in older threads */
	if (keys_held() >= _pmg.keys_max)
		return -ENOSPC;
	for (;;) {
		k = take_kernel_key(dflt);
		if (k < 1 || dflt == PMG_RIGHTS_WD ||
		    !(key_readable & (1u << k)) || n == PMG_NR_KEYS)
			break;
		held[n++] = k; /* readable somewhere: not for no-access */
	}
	nskipped = n;
	while (n)
		_pmg.prim->key_free(held[--n]);
	return k;
}

/* The handle's register bits for key @k (before its _key). */
static void handle_bits(struct _pmg_dom *d, int k)
{
	struct pmg_domain *h = d->h;
	unsigned dflt = d->ck.dflt;

	h->_mask = PMG_PKR_MASK(k);
	h->_rd_bits = pmg_window_rights(dflt, PMG_READ) << PMG_PKR_SHIFT(k);
	h->_dflt_bits = dflt << PMG_PKR_SHIFT(k);
}

/* Every range of @d to @prot with @key (-1: keep the key), the program's
 * own mprotect() rights capping it.  On failure the ranges done are put
 * back to @back_prot/@back_key and -errno returned. */
struct retag {
	int prot, key;
	int err;
	uintptr_t failed_at;
};

static int retag_one(const struct _pmg_range *r, void *arg)
{
	struct retag *t = arg;
	int rc;

	if (t->err)
		return 0;
	rc = _pmg_cap_pkey_mprotect(r->base, r->end, t->prot, t->key);
	/* a hole (unmapped behind our back, static library): every mapped
	 * page was done; pmg_unprotect() drops it later */
	if (rc && rc != -ENOMEM) {
		t->err = rc;
		t->failed_at = r->base;
	}
	return 0;
}

struct retag_back {
	uintptr_t stop;
	int prot, key;
};

static int retag_back_one(const struct _pmg_range *r, void *arg)
{
	struct retag_back *t = arg;

	if (r->base < t->stop)
		(void)_pmg_cap_pkey_mprotect(r->base, r->end, t->prot, t->key);
	return 0;
}

static int retag(struct _pmg_dom *d, int prot, int key, int back_prot,
		 int back_key)
{
	struct retag t = { .prot = prot, .key = key };

	_pmg_reg_each(d->id, retag_one, &t);
	if (t.err) {
		/* ranges are visited in address order: those before it */
		struct retag_back b = { .stop = t.failed_at,
					.prot = back_prot,
					.key = back_key };

		_pmg_reg_each(d->id, retag_back_one, &b);
	}
	return t.err;
}

static uint64_t clock_now;

/* Give key @k to @d (holding none; lock held): its ranges tagged with
 * it, its handle published.  @fresh: the key came from the kernel or the
 * reserve (this thread's counts for it are stale, if any). */
static int assign(struct _pmg_dom *d, int k, bool fresh)
{
	unsigned dflt = d->ck.dflt;
	int rc;

	rc = retag(d, PROT_READ | PROT_WRITE, k,
		   _pmg_prot_of(_pmg_process_rights(d)), 0);
	if (rc)
		return _pmg_err(rc,
				"tagging the ranges of '%s' with key %d: "
				"%s",
				d->ck.name, k, strerror(-rc));
	if (fresh)
		_pmg_tls.w[k] = _pmg_tls.r[k] = 0;
	_pmg_keytab_release(&_pmg.keytab, (unsigned)k);
	(void)_pmg_keytab_claim(&_pmg.keytab, (unsigned)k, d->ck.name, dflt);
	_pmg.prim->set_rights(k, dflt); /* this thread at once */
	if (dflt == PMG_RIGHTS_WD)
		key_readable |= 1u << k;
	__atomic_store_n(&_pmg.keyown[k], d->id, __ATOMIC_RELEASE);
	__atomic_store_n(&d->hw, k, __ATOMIC_RELEASE);
	d->stamp = ++clock_now;
	handle_bits(d, k);
	d->h->_ref = 0;
	__atomic_store_n(&d->h->_key, k, __ATOMIC_RELEASE);
	return 0;
}

/* The key of @v back to page protection (lock held, v moving, checked
 * idle): 0, or -errno with v as it was. */
static int unassign(struct _pmg_dom *v)
{
	int k = v->hw, rc;

	rc = retag(v, _pmg_prot_of(_pmg_process_rights(v)), 0,
		   PROT_READ | PROT_WRITE, k);
	if (rc)
		return rc;
	__atomic_store_n(&v->hw, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&_pmg.keyown[k], 0, __ATOMIC_RELEASE);
	return 0;
}

/* Nothing in flight on key @k of @v or on @d's pages?  After the
 * barrier (lock held). */
static bool idle(int k, const struct _pmg_dom *v, const struct _pmg_dom *d)
{
	return !_pmg_handlers_inside() && !key_windowed(k) &&
	       !_pmg_steps_on(k, v->id) && !_pmg_steps_on(0, d->id) &&
	       !__atomic_load_n(&v->pinned, __ATOMIC_SEQ_CST) && !v->gw &&
	       !v->gr;
}

/* The victim for @d: least recently windowed among those that may give
 * their key, not yet tried this round; NULL if none. */
static struct _pmg_dom *victim(const struct _pmg_dom *d, uint32_t tried)
{
	struct _pmg_dom *best = NULL;
	int k;

	for (k = 1; k < PMG_NR_KEYS; k++) {
		struct _pmg_dom *v;

		if (!_pmg.keyown[k] || (tried & (1u << k)))
			continue;
		v = &_pmg.dom[_pmg.keyown[k]];
		if (v == d || !v->live ||
		    __atomic_load_n(&v->pinned, __ATOMIC_RELAXED))
			continue;
		/* a no-access domain: never a key some thread may read */
		if (d->ck.dflt == PMG_RIGHTS_AD && (key_readable & (1u << k)))
			continue;
		/* after a reservation, a write-disabled one: only a key
		 * every thread reads (not a no-access domain's) */
		if (d->ck.dflt == PMG_RIGHTS_WD && reserved_early &&
		    !(key_everywhere & (1u << k)))
			continue;
		if (!best || v->stamp < best->stamp)
			best = v;
	}
	return best;
}

static int evict_into(struct _pmg_dom *d)
{
	uint32_t tried = 0;
	struct _pmg_dom *v;
	int k, rc;

	if (mb_probe() < 0)
		return _pmg_err(-ENOSPC,
				"no free protection key for '%s', "
				"and none can be taken from another domain: "
				"membarrier(2) is missing",
				d->ck.name);
	/* the clock: domains windowed since the last scan are young */
	for (k = 1; k < PMG_NR_KEYS; k++) {
		struct _pmg_dom *x;

		if (!_pmg.keyown[k])
			continue;
		x = &_pmg.dom[_pmg.keyown[k]];
		if (__atomic_exchange_n(&x->h->_ref, 0, __ATOMIC_RELAXED))
			x->stamp = ++clock_now;
	}
	while ((v = victim(d, tried))) {
		k = v->hw;
		tried |= 1u << k;
		/* cheap look first: no barrier for a key plainly in use */
		if (key_windowed(k) || _pmg_steps_on(k, v->id) || v->gw ||
		    v->gr) {
			KS_INC(ks.evict_busy);
			continue;
		}
		__atomic_store_n(&v->moving, 1, __ATOMIC_SEQ_CST);
		__atomic_store_n(&d->moving, 1, __ATOMIC_SEQ_CST);
		__atomic_store_n(&v->h->_key, 0, __ATOMIC_SEQ_CST);
		if (mb() || !idle(k, v, d) || unassign(v)) {
			__atomic_store_n(&v->h->_key, k, __ATOMIC_RELEASE);
			__atomic_store_n(&v->moving, 0, __ATOMIC_RELEASE);
			__atomic_store_n(&d->moving, 0, __ATOMIC_RELEASE);
			KS_INC(ks.evict_busy);
			continue;
		}
		KS_INC(ks.evictions);
		rc = assign(d, k, false);
		if (rc) {
			/* @d's ranges could not be tagged: @v takes its
			 * key back (the same calls that worked before) */
			if (!retag(v, PROT_READ | PROT_WRITE, k,
				   _pmg_prot_of(_pmg_process_rights(v)), 0)) {
				__atomic_store_n(&_pmg.keyown[k], v->id,
						 __ATOMIC_RELEASE);
				__atomic_store_n(&v->hw, k, __ATOMIC_RELEASE);
				__atomic_store_n(&v->h->_key, k,
						 __ATOMIC_RELEASE);
			} else {
				/* neither: @v stays virtual, the key goes */
				_pmg_keytab_release(&_pmg.keytab, (unsigned)k);
				key_release(k);
			}
		}
		__atomic_store_n(&v->moving, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&d->moving, 0, __ATOMIC_RELEASE);
		if (!rc)
			KS_INC(ks.assigned);
		return rc;
	}
	return -ENOSPC;
}

/* Who holds keys, for -ENOSPC messages. */
static void describe_holders(char *buf, size_t size)
{
	size_t n = 0;
	int k;

	buf[0] = '\0';
	for (k = 1; k < PMG_NR_KEYS && n < size; k++)
		if (_pmg.keyown[k])
			n += (size_t)snprintf(buf + n, size - n,
					      "%s%s (key %d%s)", n ? ", " : "",
					      _pmg.dom[_pmg.keyown[k]].ck.name,
					      k,
					      _pmg.dom[_pmg.keyown[k]].pinned
						      ? ", pinned"
						      : "");
}

int _pmg_key_get(struct _pmg_dom *d, bool evict)
{
	unsigned dflt = d->ck.dflt;
	int k, rc;

	if (!_pmg.prim->thread_local)
		return -ENOSPC; /* mprotect: no hardware keys at all */
	k = free_key(dflt);
	if (k > 0) {
		rc = assign(d, k, true);
		if (rc)
			key_release(k);
		else
			KS_INC(ks.assigned);
		return rc;
	}
	if (k != -ENOSPC && k != -EBUSY)
		return _pmg_err(k, "allocating a key for '%s': %s", d->ck.name,
				strerror(-k));
	if (evict) {
		rc = evict_into(d);
		if (rc != -ENOSPC)
			return rc;
	}
	{
		char who[600];

		describe_holders(who, sizeof(who));
		return _pmg_err(
			-ENOSPC,
			"no protection key for '%s': %d of %d keys "
			"held by pmguard (PMGUARD_KEYS=%d) [%s], %u "
			"reserved for write-disabled domains, %u "
			"readable in some threads (a write-disabled "
			"domain's: not for a no-access one)%s, the rest "
			"by the kernel or other code in this process%s",
			d->ck.name, keys_held(), PMG_NR_KEYS - 1, _pmg.keys_max,
			who, nreserved, nskipped,
			evict ? ", every keyed domain busy (a window "
				"open), pinned or no-access-incompatible"
			      : "",
			dflt == PMG_RIGHTS_WD && reserved_early
				? "; keys were reserved before threads "
				  "started: a write-disabled domain takes "
				  "only one of those (a fresh key is "
				  "access-disabled in the older threads)"
				: "");
	}
}

void _pmg_key_put(struct _pmg_dom *d)
{
	int k = d->hw;

	if (!k)
		return;
	_pmg_keytab_release(&_pmg.keytab, (unsigned)k);
	__atomic_store_n(&_pmg.keyown[k], 0, __ATOMIC_RELEASE);
	__atomic_store_n(&d->hw, 0, __ATOMIC_RELEASE);
	key_release(k);
}

/* Is key @k in a window of some thread? (pmg_domain_delete()) */
bool _pmg_key_in_use(int k)
{
	return key_windowed(k);
}

void _pmg_keys_fork_child(void)
{
	/* the other threads are not here; the forking one registers again
	 * (its counts were zeroed: thread.c) */
	nthreads = 0;
}

/* pmg_key_stats_get() (init.c) after the library started. */
int _pmg_key_stats_get(struct pmg_key_stats *st)
{
	int id;

	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&_pmg.lock);
	for (id = 1; id < PMG_DOM_MAX; id++) {
		const struct _pmg_dom *d = &_pmg.dom[id];

		if (!d->live)
			continue;
		st->domains++;
		st->keyed += d->hw != 0;
		st->pinned += d->pinned;
	}
	st->keys_held = keys_held();
	st->keys_max = _pmg.prim->thread_local ? _pmg.keys_max : 0;
	st->evict = _pmg.prim->thread_local && mb_probe() > 0;
	pthread_mutex_unlock(&_pmg.lock);
	st->assigned = __atomic_load_n(&ks.assigned, __ATOMIC_RELAXED);
	st->evictions = __atomic_load_n(&ks.evictions, __ATOMIC_RELAXED);
	st->evict_busy = __atomic_load_n(&ks.evict_busy, __ATOMIC_RELAXED);
	st->kept = __atomic_load_n(&ks.kept, __ATOMIC_RELAXED);
	st->raced = __atomic_load_n(&_pmg_keys_raced, __ATOMIC_RELAXED);
	st->paged_windows = __atomic_load_n(&_pmg_keys_paged, __ATOMIC_RELAXED);
	return 0;
}
