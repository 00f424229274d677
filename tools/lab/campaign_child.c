// SPDX-License-Identifier: MIT
/*
 * The child side of the stray-write campaign (tools/lab/campaign_child.h,
 * docs/demo.md): one trial, in a process the parent (tools/lab/campaign.c)
 * forked.
 *
 * T writer threads put records through windows and the persistence
 * calls; between their puts, at planned points, they run buggy code that
 * holds no window: a wild pointer store, a memset overflowing the buffer
 * mapped just below the pool, a store through a pointer cached before the
 * pool was closed and reopened, and a store into another writer's records
 * while that writer holds its window.  The fault observer (same thread, in
 * the SIGSEGV handler) charges each fault to the injection in progress on
 * its thread; a fault with none in progress is a false positive.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "campaign_child.h"
#include "store.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define NB_SIZE		4096	/* the buffer mapped below the pool */
#define NB_SLOT		64	/* ... its last slot is the one overflowed */
#define OVERFLOW_MAX	32	/* off-by-N: N in 1..32 */

static __thread struct inj *cur_inj;

static void child_fail(struct trial *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));

static void child_fail(struct trial *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(t->shm->msg, sizeof(t->shm->msg), fmt, ap);
	va_end(ap);
	_exit(3);
}

static void observer(const struct pmg_fault_info *fi, void *arg)
{
	struct trial *t = arg;
	struct inj *j = cur_inj;
	uintptr_t a = (uintptr_t)fi->addr, lo;

	if (fi->action == PMG_FAULT_SYNCED)
		return;		/* stale rights of a thread fixed: no stray */
	if (!j) {
		__atomic_add_fetch(&t->shm->false_positives, 1,
				   __ATOMIC_RELAXED);
		return;
	}
	j->faults++;
	if (fi->action == PMG_FAULT_RELAXED_REPORTED ||
	    fi->action == PMG_FAULT_AUDITED ||
	    fi->action == PMG_FAULT_CONTAINED ||
	    fi->action == PMG_FAULT_STRICT_ABORT)
		j->reported++;
	if (!j->ip)
		j->ip = (uintptr_t)fi->ip;
	lo = (uintptr_t)t->st.base + j->off;
	if (a < lo || a >= lo + j->len)
		j->wrong_addr++;
}

/*
 * The buggy code.  Each is its own function so that the reports name a
 * site per bug; the asm comments keep the compiler from merging them.
 * The stores are relaxed atomics: one plain 8-byte mov on x86-64, as a
 * buggy store would be, but two threads' strays may hit the same word at
 * once here on purpose, and that is not a data race to report.
 */
static __attribute__((noinline)) void bug_wild_pointer(uint64_t *p,
							uint64_t v)
{
	__asm__ volatile("# wild pointer" ::: "memory");
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
}

static __attribute__((noinline)) void bug_stale_pointer(uint64_t *p,
							 uint64_t v)
{
	__asm__ volatile("# stale pointer" ::: "memory");
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
}

static __attribute__((noinline)) void bug_other_thread(uint64_t *p,
							uint64_t v)
{
	__asm__ volatile("# write from another thread" ::: "memory");
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
}

static void *(*volatile memset_fn)(void *, int, size_t) = memset;

/* Clear the last slot of @buf, off by @n: memset runs into the pool. */
static __attribute__((noinline)) void bug_overflow(char *buf, size_t n, int c)
{
	memset_fn(buf + NB_SIZE - NB_SLOT, c, NB_SLOT + n);
}

/* ---- locks ---- */

static void gate_rd(struct trial *t)
{
	if (t->gate_on)
		pthread_rwlock_rdlock(&t->gate);
}

static void gate_wr(struct trial *t)
{
	if (t->gate_on)
		pthread_rwlock_wrlock(&t->gate);
}

static void gate_unlock(struct trial *t)
{
	if (t->gate_on)
		pthread_rwlock_unlock(&t->gate);
}

/* ---- waiting: futexes, so that waiting threads leave the CPUs alone */

static void fwait(int *addr, int val)
{
	syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void fwake(int *addr)
{
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL,
		0);
}

/* Wait while *@addr == @val. */
static void wait_while(int *addr, int val)
{
	while (__atomic_load_n(addr, __ATOMIC_ACQUIRE) == val)
		fwait(addr, val);
}

static void set_wake(int *addr, int val)
{
	__atomic_store_n(addr, val, __ATOMIC_RELEASE);
	fwake(addr);
}

static void ring(struct wslot *w)
{
	__atomic_add_fetch(&w->bell, 1, __ATOMIC_RELEASE);
	fwake(&w->bell);
}

static uint64_t committed(struct trial *t, unsigned l)
{
	return __atomic_load_n(&t->committed[l], __ATOMIC_ACQUIRE);
}

/*
 * Hold a window for another thread's cross-thread stray if one asked:
 * open the window, say so, wait until the stray is done, make a
 * legitimate store (rewrite our tail), close.
 */
static void service(struct trial *t, unsigned self)
{
	struct wslot *w = &t->ws[self];

	if (!__atomic_load_n(&w->req, __ATOMIC_ACQUIRE))
		return;
	__atomic_store_n(&w->req, 0, __ATOMIC_RELAXED);
	gate_rd(t);
	if (store_window_open(&t->st))
		child_fail(t, "window open: %s", pmg_errormsg());
	set_wake(&w->holding, 1);
	wait_while(&w->done, 0);
	__atomic_store_n(&w->done, 0, __ATOMIC_RELAXED);
	__atomic_store_n(store_tail_ptr(&t->st, self), committed(t, self),
			 __ATOMIC_RELEASE);
	if (store_window_close(&t->st))
		child_fail(t, "window close: %s", pmg_errormsg());
	gate_unlock(t);
	set_wake(&w->holding, 0);
}

/*
 * Take the stray lock.  Its holder may be waiting for us to hold a window
 * (cross-thread stray), so wait on our bell, which both a request and a
 * release ring, and serve requests meanwhile.
 */
static void slock_take(struct trial *t, unsigned self)
{
	struct wslot *w = &t->ws[self];
	int bell;

	if (!pthread_mutex_trylock(&t->slock))
		return;
	__atomic_add_fetch(&t->slock_waiters, 1, __ATOMIC_ACQ_REL);
	for (;;) {
		bell = __atomic_load_n(&w->bell, __ATOMIC_ACQUIRE);
		if (!pthread_mutex_trylock(&t->slock))
			break;
		service(t, self);
		if (!__atomic_load_n(&w->req, __ATOMIC_ACQUIRE))
			fwait(&w->bell, bell);
	}
	__atomic_sub_fetch(&t->slock_waiters, 1, __ATOMIC_ACQ_REL);
}

static void slock_release(struct trial *t)
{
	unsigned i;

	pthread_mutex_unlock(&t->slock);
	if (__atomic_load_n(&t->slock_waiters, __ATOMIC_ACQUIRE) > 0)
		for (i = 0; i < t->T; i++)
			ring(&t->ws[i]);
}

/* ---- targets ---- */

/* The expected 8-byte word @word of record @slot of log @l. */
static uint64_t expected_word(struct trial *t, unsigned l, uint64_t slot,
			      unsigned word)
{
	struct store_rec r;
	uint64_t v;

	store_rec_make(&r, t->seed, t->kv[l][slot].key,
		       t->kv[l][slot].version, l);
	memcpy(&v, (char *)&r + 8 * word, 8);
	return v;
}

/*
 * Records that @self may aim at in log @l: what was committed when the
 * phase began (deterministic), or its own records so far.
 */
static uint64_t aimable(struct trial *t, unsigned self, unsigned l)
{
	return l == self ? committed(t, l) : t->at_start[l];
}

/*
 * Record 0 of log 0 is where the overflow lands (a plain memset, not
 * atomic); the other bugs aim elsewhere, so that no two threads' strays
 * race on it.
 */
static uint64_t not_first(unsigned l, uint64_t slot)
{
	return l == 0 && slot == 0 ? 1 : slot;
}

static void begin(struct trial *t, struct inj *j, char *p, uint32_t len)
{
	j->off = (uint64_t)(p - t->st.base);
	j->len = len;
	j->state = INJ_STARTED;
	__atomic_add_fetch(&t->shm->progress, 1, __ATOMIC_RELAXED);
	cur_inj = j;
	__asm__ volatile("" ::: "memory");
}

static void end(struct inj *j)
{
	__asm__ volatile("" ::: "memory");
	cur_inj = NULL;
	j->state = INJ_DONE;
}

static void skip(struct trial *t, struct inj *j)
{
	j->state = INJ_SKIPPED;
	__atomic_add_fetch(&t->shm->progress, 1, __ATOMIC_RELAXED);
}

static void inject(struct trial *t, unsigned self, struct inj *j)
{
	unsigned l, word = (unsigned)(j->r1 >> 56) % 8;
	uint64_t slot, n;
	char *p;

	if (t->serialize || j->kind == BUG_XTHREAD)
		slock_take(t, self);
	switch (j->kind) {
	case BUG_WILD:
		l = (unsigned)(j->r1 % t->T);
		n = aimable(t, self, l);
		slot = not_first(l, (j->r1 >> 8) % n);
		p = (char *)store_slot(&t->st, l, (uint32_t)slot) + 8 * word;
		gate_wr(t);
		begin(t, j, p, 8);
		bug_wild_pointer((uint64_t *)p,
				 expected_word(t, l, slot, word) ^ (j->r2 | 1));
		end(j);
		gate_unlock(t);
		break;
	case BUG_STALE: {
		uintptr_t base = (uintptr_t)t->st.base, q;
		uint64_t off;

		/* a pointer this thread took before the last reopen */
		slot = not_first(self, j->r1 % t->at_start[self]);
		q = (uintptr_t)t->cached[self][slot] + 8 * word;
		off = q - base;
		/* it must land on a committed record of the reopened pool */
		if (q < base || off >= store_logs_bytes(t->T, t->cap) ||
		    (off / STORE_REC_SIZE) % t->cap >=
			    aimable(t, self,
				    (unsigned)(off / STORE_REC_SIZE / t->cap))) {
			skip(t, j);
			break;
		}
		l = (unsigned)(off / STORE_REC_SIZE / t->cap);
		slot = (off / STORE_REC_SIZE) % t->cap;
		gate_wr(t);
		begin(t, j, (char *)q, 8);
		bug_stale_pointer((uint64_t *)q,
				  expected_word(t, l, slot, word) ^
					  (j->r2 | 1));
		end(j);
		gate_unlock(t);
		break;
	}
	case BUG_OVERFLOW: {
		size_t len = 1 + (size_t)(j->r1 % OVERFLOW_MAX);
		int c = (int)((expected_word(t, 0, 0, 0) & 0xff) ^
			      (1 + (j->r1 >> 8) % 255));

		if (!t->nb) {
			skip(t, j);
			break;
		}
		gate_wr(t);
		begin(t, j, t->st.base, (uint32_t)len);
		bug_overflow(t->nb, len, c);
		end(j);
		gate_unlock(t);
		break;
	}
	case BUG_XTHREAD: {
		struct wslot *w = &t->ws[j->holder];

		l = j->holder;
		slot = not_first(l, j->r1 % t->at_start[l]);
		p = (char *)store_slot(&t->st, l, (uint32_t)slot) + 8 * word;
		__atomic_store_n(&w->req, 1, __ATOMIC_RELEASE);
		ring(w);
		wait_while(&w->holding, 0);
		/* the holder has its window open now, and keeps it */
		begin(t, j, p, 8);
		bug_other_thread((uint64_t *)p,
				 expected_word(t, l, slot, word) ^
					 (j->r2 | 1));
		end(j);
		set_wake(&w->done, 1);
		wait_while(&w->holding, 1);
		break;
	}
	}
	if (t->serialize || j->kind == BUG_XTHREAD)
		slock_release(t);
}

static void put(struct trial *t, unsigned self)
{
	uint64_t slot = t->committed[self];
	struct store_rec r;
	int rc;

	store_rec_make(&r, t->seed, t->kv[self][slot].key,
		       t->kv[self][slot].version, self);
	gate_rd(t);
	rc = store_append(&t->st, self, (uint32_t)slot, &r);
	gate_unlock(t);
	if (rc)
		child_fail(t, "put by writer %u: %s", self, pmg_errormsg());
	t->cached[self][slot] = (char *)store_slot(&t->st, self,
						   (uint32_t)slot);
	__atomic_store_n(&t->committed[self], slot + 1, __ATOMIC_RELEASE);
	__atomic_store_n(&t->shm->done[self], slot + 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&t->shm->progress, 1, __ATOMIC_RELAXED);
}

struct warg {
	struct trial *t;
	unsigned self;
};

static void *writer(void *arg)
{
	struct warg *a = arg;
	struct trial *t = a->t;
	unsigned self = a->self;
	uint32_t k, *q = t->sched[self], n = t->nsched[self];

	for (k = 0;; k++) {
		while (t->next[self] < n) {
			struct inj *j = &t->inj[q[t->next[self]]];

			if (j->phase != t->phase || j->pos != k)
				break;
			t->next[self]++;
			inject(t, self, j);
		}
		if (k == t->puts_pp)
			break;
		service(t, self);
		put(t, self);
	}
	/* stay available as a window holder until every writer is done */
	if (__atomic_sub_fetch(&t->active, 1, __ATOMIC_ACQ_REL) == 0) {
		unsigned i;

		for (i = 0; i < t->T; i++)
			ring(&t->ws[i]);
		return NULL;
	}
	for (;;) {
		int bell = __atomic_load_n(&t->ws[self].bell,
					   __ATOMIC_ACQUIRE);

		if (__atomic_load_n(&t->active, __ATOMIC_ACQUIRE) == 0)
			break;
		service(t, self);
		if (!__atomic_load_n(&t->ws[self].req, __ATOMIC_ACQUIRE))
			fwait(&t->ws[self].bell, bell);
	}
	return NULL;
}

static void *warm(void *arg)
{
	free(malloc(64));
	return arg;
}

/*
 * Give threads their stacks and arenas before the pool is mapped, so that
 * mappings made later do not fill the hole the pool leaves when closed:
 * then the reopened pool lands where the old one was (docs/demo.md).
 */
static void warm_up(unsigned n)
{
	pthread_t th[CAMPAIGN_MAX_THREADS + 2];
	unsigned i, made = 0;

	for (i = 0; i < n && i < CAMPAIGN_MAX_THREADS + 2; i++)
		if (!pthread_create(&th[i], NULL, warm, NULL))
			made++;
		else
			break;
	for (i = 0; i < made; i++)
		pthread_join(th[i], NULL);
}

static void nb_map(struct trial *t)
{
	char *want = t->st.base - NB_SIZE, *m;

	t->nb = NULL;
	m = mmap(want, NB_SIZE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (m == MAP_FAILED)
		return;
	if (m != want) {	/* a kernel without MAP_FIXED_NOREPLACE */
		munmap(m, NB_SIZE);
		return;
	}
	t->nb = m;
}

static void nb_unmap(struct trial *t)
{
	if (t->nb)
		munmap(t->nb, NB_SIZE);
	t->nb = NULL;
}

static int cmp_sched(const void *a, const void *b, void *arg)
{
	const struct inj *inj = arg;
	const struct inj *x = &inj[*(const uint32_t *)a];
	const struct inj *y = &inj[*(const uint32_t *)b];

	if (x->phase != y->phase)
		return x->phase < y->phase ? -1 : 1;
	if (x->pos != y->pos)
		return x->pos < y->pos ? -1 : 1;
	return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

static void child_alloc(struct trial *t)
{
	unsigned i;
	uint32_t j;

	t->sched = calloc(t->T, sizeof(*t->sched));
	t->nsched = calloc(t->T, sizeof(*t->nsched));
	t->next = calloc(t->T, sizeof(*t->next));
	t->cached = calloc(t->T, sizeof(*t->cached));
	if (!t->sched || !t->nsched || !t->next || !t->cached)
		child_fail(t, "out of memory");
	for (j = 0; j < t->ninj; j++)
		t->nsched[t->inj[j].thread]++;
	for (i = 0; i < t->T; i++) {
		t->sched[i] = calloc(t->nsched[i] + 1, sizeof(uint32_t));
		t->cached[i] = calloc(t->cap, sizeof(char *));
		if (!t->sched[i] || !t->cached[i])
			child_fail(t, "out of memory");
		t->nsched[i] = 0;
	}
	for (j = 0; j < t->ninj; j++) {
		unsigned th = t->inj[j].thread;

		t->sched[th][t->nsched[th]++] = j;
	}
	for (i = 0; i < t->T; i++)
		qsort_r(t->sched[i], t->nsched[i], sizeof(uint32_t),
			cmp_sched, t->inj);
}

static void child_open(struct trial *t)
{
	int rc = store_open(&t->st, t->path, t->T, t->cap, t->protect);

	if (rc)
		child_fail(t, "opening the pool %s: %s", t->path,
			   pmg_errormsg());
}

/* The child: one trial, start to end.  Never returns. */
void campaign_child_run(struct trial *t)
{
	pthread_t th[CAMPAIGN_MAX_THREADS];
	struct warg args[CAMPAIGN_MAX_THREADS];
	pthread_rwlockattr_t ga;
	struct rlimit nocore = { 0, 0 };
	unsigned i, p;
	uint32_t s;

	setrlimit(RLIMIT_CORE, &nocore);	/* strict aborts: no cores */
	pmg_set_report_fd(t->report_fd);
	pmg_set_fault_observer(observer, t);
	if (t->mode != CM_OFF)
		pmg_set_fault_mode(t->mode == CM_STRICT ? PMG_FAULT_STRICT
				   : t->mode == CM_RELAXED ? PMG_FAULT_RELAXED
				   : t->mode == CM_CONTAIN ? PMG_FAULT_CONTAIN
				   : PMG_FAULT_AUDIT);
	pthread_mutex_init(&t->slock, NULL);
	pthread_rwlockattr_init(&ga);
	pthread_rwlockattr_setkind_np(&ga,
		PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&t->gate, &ga);
	warm_up(t->T + 2);
	child_alloc(t);

	child_open(t);
	if (store_format(&t->st, t->seed, t->nkeys))
		child_fail(t, "formatting the store: %s", pmg_errormsg());
	/* a few records in every log first, so every bug has targets */
	for (i = 0; i < t->T; i++)
		for (s = 0; s < L0; s++)
			put(t, i);
	pmg_stats_reset();
	for (p = 0; p < t->phases; p++) {
		if (p > 0) {
			char *old = t->st.base;

			/* close and reopen: cached pointers go stale */
			if (store_close(&t->st))
				child_fail(t, "closing the pool: %s",
					   pmg_errormsg());
			child_open(t);
			t->shm->reopens++;
			if (t->st.base != old)
				t->shm->moved++;
		}
		nb_map(t);
		for (i = 0; i < t->T; i++)
			t->at_start[i] = t->committed[i];
		t->phase = p;
		t->active = (int)t->T;
		for (i = 0; i < t->T; i++) {
			args[i].t = t;
			args[i].self = i;
			if (pthread_create(&th[i], NULL, writer, &args[i]))
				child_fail(t, "pthread_create failed");
		}
		for (i = 0; i < t->T; i++)
			pthread_join(th[i], NULL);
		nb_unmap(t);
	}
	if (store_close(&t->st))
		child_fail(t, "closing the pool: %s", pmg_errormsg());
	_exit(0);
}
