// SPDX-License-Identifier: MIT
/*
 * The stray-write campaign (tools/campaign.h, docs/demo.md).
 *
 * Parent: for each trial, plan the stray writes from the seed, create a
 * fresh pool file, fork a child that runs the trial, wait for it (drawing
 * progress), then reopen the pool, verify every record and add up what
 * happened.  The plan and what each injection did live in memory shared
 * with the child, so a child that a strict abort killed still tells.
 *
 * Child: T writer threads put records through windows and the persistence
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
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <linux/futex.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "campaign.h"
#include "cleanup.h"
#include "cmds.h"
#include "store.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define L0		4	/* records per log before the threads start */
#define NB_SIZE		4096	/* the buffer mapped below the pool */
#define NB_SLOT		64	/* ... its last slot is the one overflowed */
#define OVERFLOW_MAX	32	/* off-by-N: N in 1..32 */

/* ------------------------------------------------------------ names */

static const char *const mode_names[CM_MODES] = {
	"off", "strict", "relaxed", "audit", "contain"
};

const char *campaign_mode_name(int mode)
{
	return mode >= 0 && mode < CM_MODES ? mode_names[mode] : "?";
}

int campaign_mode_parse(const char *s)
{
	int i;

	for (i = 0; s && i < CM_MODES; i++)
		if (!strcmp(s, mode_names[i]))
			return i;
	return -1;
}

const char *bug_name(int kind)
{
	static const char *const n[BUG_KINDS] = {
		"wild", "overflow", "stale", "xthread"
	};

	return kind >= 0 && kind < BUG_KINDS ? n[kind] : "?";
}

const char *bug_title(int kind)
{
	static const char *const n[BUG_KINDS] = {
		"wild pointer",
		"off-by-N overflow from the buffer below the pool",
		"stale pointer after close + reopen",
		"another thread's write during a window",
	};

	return kind >= 0 && kind < BUG_KINDS ? n[kind] : "?";
}

const char *bug_site(int kind)
{
	static const char *const n[BUG_KINDS] = {
		"bug_wild_pointer()",
		"memset() from bug_overflow()",
		"bug_stale_pointer()",
		"bug_other_thread()",
	};

	return kind >= 0 && kind < BUG_KINDS ? n[kind] : "?";
}

const char *campaign_by_design_reason(void)
{
	if (pmg_init() || pmg_backend() != PMG_BACKEND_MPROTECT)
		return "";
	return "mprotect backend: windows opened with pmg_open()/"
	       "pmg_write_begin() are process-wide, so a write from another "
	       "thread while any thread holds one on the domain is not "
	       "caught (a persistence call opens only the pages it touches: "
	       "another thread's write elsewhere during one is caught)";
}

unsigned campaign_default_trials(int mode, uint64_t writes)
{
	uint64_t n = (writes + CAMPAIGN_TRIAL_WRITES - 1) /
		     CAMPAIGN_TRIAL_WRITES;

	if (mode == CM_STRICT && n < 200)
		n = 200;
	if (n > writes)
		n = writes;
	if (n > CAMPAIGN_MAX_TRIALS)
		n = CAMPAIGN_MAX_TRIALS;
	return n ? (unsigned)n : 1;
}

/* -------------------------------------------------------------- rng */

static uint64_t splitmix(uint64_t *s)
{
	uint64_t x = (*s += 0x9E3779B97F4A7C15ull);

	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

/* -------------------------------------------------- shared with child */

enum { INJ_PLANNED = 0, INJ_STARTED, INJ_DONE, INJ_SKIPPED };

/* One planned stray write and what became of it. */
struct inj {
	/* the plan (parent) */
	uint8_t kind, thread, phase, holder;
	uint32_t pos;		/* made before put #pos of the phase */
	uint64_t r1, r2;	/* target choice, value mask */
	/* the outcome (child; the observer runs on the injecting thread) */
	uint8_t state;
	uint32_t faults;	/* stray faults charged to it */
	uint32_t reported;	/* ... of which reported */
	uint32_t wrong_addr;	/* ... whose address was off target */
	uint64_t off;		/* target: pool offset and length */
	uint32_t len;
	uintptr_t ip;		/* first faulting instruction */
};

/* Per-trial results the child leaves for the parent. */
struct trial_shm {
	uint64_t progress;	/* puts done + injections made */
	uint64_t false_positives;
	uint64_t done[CAMPAIGN_MAX_THREADS]; /* puts finished per log */
	uint32_t reopens, moved;
	char msg[256];		/* why the child failed */
};

/* ------------------------------------------------------- the trial */

struct wslot {			/* cross-thread handshake, per writer */
	int req;		/* 1: hold a window for another thread */
	int holding;		/* 1: holding it */
	int done;		/* 1: the other thread's stray is done */
	int bell;		/* futex: bumped to wake this writer */
} __attribute__((aligned(64)));

struct trial {
	/* set by the parent before the fork */
	int mode;
	bool protect;		/* pool under a domain (not "off") */
	bool gate_on;		/* mprotect: order strays against windows */
	bool serialize;		/* strict: one stray at a time */
	unsigned T, phases;
	uint32_t puts_pp;	/* puts per thread per phase */
	uint32_t cap, nkeys;
	uint64_t seed;
	const char *path;
	int report_fd;		/* the --reports file, or -1 */
	struct store_kv **kv;	/* [T][cap]: what each writer puts */
	struct inj *inj;	/* [ninj], shared */
	uint32_t ninj;
	struct trial_shm *shm;	/* shared */
	/* child only */
	struct store st;
	uint32_t **sched;	/* per thread: injection indexes in order */
	uint32_t *nsched, *next;
	char ***cached;		/* [T][cap]: record pointers as taken */
	uint64_t committed[CAMPAIGN_MAX_THREADS];
	uint64_t at_start[CAMPAIGN_MAX_THREADS]; /* committed at phase start */
	struct wslot ws[CAMPAIGN_MAX_THREADS];
	pthread_mutex_t slock;	/* one cross-thread (strict: any) stray */
	int slock_waiters;
	pthread_rwlock_t gate;	/* mprotect: windows (rd) vs strays (wr) */
	int active;		/* writers not finished with the phase */
	unsigned phase;
	char *nb;		/* the buffer just below the pool, or NULL */
};

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
static void child_run(struct trial *t)
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

/* ------------------------------------------------------ progress bar */

void campaign_bar_init(struct campaign_bar *b, const char *verb,
		       const char *label)
{
	const char *term = getenv("TERM"), *e = getenv("PMGUARD_PROGRESS");
	unsigned long long v;

	b->verb = verb;
	b->label = label;
	b->shown = -1;
	/* not on a dumb terminal (the PKU guest's serial console is one) */
	b->tty = isatty(2) && term && *term && strcmp(term, "dumb");
	b->every = CAMPAIGN_PROGRESS_S;
	if (e && !strcmp(e, "off"))
		b->every = -1;
	else if (e && *e && !cli_number(verb, "PMGUARD_PROGRESS", e, false, 0,
					86400, &v))
		b->every = (int)v;
	b->t0 = cli_now();
	b->last = 0;
}

void campaign_bar_draw(double done, void *arg)
{
	struct campaign_bar *b = arg;
	char bar[41];
	int pct = (int)(done * 100 + 0.5), n, i;
	double now;

	if (pct > 100)
		pct = 100;
	if (pct == b->shown)
		return;
	if (!b->tty) {
		if (b->every < 0)
			return;
		now = cli_now();
		/* a line every few seconds; the last one at 100% */
		if (!(pct == 100 && b->last) &&
		    now - (b->last ? b->last : b->t0) < b->every)
			return;
		b->shown = pct;
		b->last = now;
		fprintf(stderr, "pmguard %s: %s: %d%% after %.1f s\n",
			b->verb, b->label, pct, now - b->t0);
		fflush(stderr);
		return;
	}
	b->shown = pct;
	n = pct * 40 / 100;
	for (i = 0; i < 40; i++)
		bar[i] = i < n ? '#' : '.';
	bar[40] = '\0';
	fprintf(stderr, "\r  %-8s [%s] %3d%%", b->label, bar, pct);
	fflush(stderr);
}

void campaign_bar_clear(struct campaign_bar *b)
{
	if (!b->tty || b->shown < 0)
		return;
	fprintf(stderr, "\r%60s\r", "");
	fflush(stderr);
	b->shown = -1;
}

/* ------------------------------------------------------------ parent */

static char tmp_base[256];

const char *campaign_tmp_base(void)
{
	const char *e = getenv("TMPDIR");
	struct stat st;

	if (e && *e)
		snprintf(tmp_base, sizeof(tmp_base), "%s", e);
	else if (!stat("/dev/shm", &st) && S_ISDIR(st.st_mode) &&
		 !access("/dev/shm", W_OK | X_OK))
		snprintf(tmp_base, sizeof(tmp_base), "/dev/shm");
	else
		snprintf(tmp_base, sizeof(tmp_base), "/tmp");
	return tmp_base;
}

static void *shared_alloc(size_t n)
{
	void *p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Sizes of trial @i. */
static void trial_shape(const struct campaign_opts *o, unsigned i,
			struct trial *t)
{
	uint64_t strays = o->writes / o->trials + (i < o->writes % o->trials);
	uint64_t puts = strays > 16ull * o->threads ? strays
						     : 16ull * o->threads;

	t->T = o->threads;
	t->ninj = (uint32_t)strays;
	t->phases = o->mode == CM_STRICT ? 2 : strays >= 64 ? 4 : 2;
	t->puts_pp = (uint32_t)((puts + (uint64_t)t->T * t->phases - 1) /
				((uint64_t)t->T * t->phases));
	t->cap = L0 + t->puts_pp * t->phases;
	t->nkeys = t->T * (t->puts_pp * t->phases / 8 > 4
				   ? t->puts_pp * t->phases / 8 : 4);
}

static void plan(struct trial *t, uint64_t seed)
{
	uint64_t rng = seed ^ 0x706c616eull;
	uint32_t j;

	for (j = 0; j < t->ninj; j++) {
		struct inj *x = &t->inj[j];
		unsigned kind = (unsigned)(splitmix(&rng) % BUG_KINDS);

		memset(x, 0, sizeof(*x));
		if (kind == BUG_XTHREAD && t->T < 2)
			kind = BUG_WILD;
		x->kind = (uint8_t)kind;
		x->thread = (uint8_t)(splitmix(&rng) % t->T);
		x->phase = (uint8_t)(kind == BUG_STALE
			? 1 + splitmix(&rng) % (t->phases - 1)
			: splitmix(&rng) % t->phases);
		x->pos = (uint32_t)(splitmix(&rng) % (t->puts_pp + 1));
		x->holder = (uint8_t)((x->thread + 1 +
				       splitmix(&rng) % (t->T > 1 ? t->T - 1
								  : 1)) %
				      t->T);
		x->r1 = splitmix(&rng);
		x->r2 = splitmix(&rng);
	}
}

/* Wait for @pid, calling the progress hook now and then. */
static int wait_child(pid_t pid, const struct campaign_opts *o,
		      const struct trial *t, unsigned trial, uint64_t total)
{
	struct timespec ts = { 0, 1000000 };
	int st;
	pid_t r;

	for (;;) {
		r = cli_wait(pid, &st, o->progress != NULL);
		if (r == pid)
			return st;
		if (r < 0)
			return -1;
		if (r == 0) {
			double in = total ? (double)__atomic_load_n(
					&t->shm->progress, __ATOMIC_RELAXED) /
					(double)total : 0;

			o->progress(((double)trial + (in > 1 ? 1 : in)) /
					    o->trials,
				    o->progress_arg);
			nanosleep(&ts, NULL);
			if (ts.tv_nsec < 64000000)
				ts.tv_nsec *= 2;
		}
	}
}

/*
 * What aimed at a record: a stray that landed and was reported, one that
 * landed as a stated limit of the backend, one that landed otherwise
 * (nobody told), or a caught stray that never landed (strict).
 */
enum { T_REP = 1, T_BD = 2, T_OTHER = 4, T_STOP = 8 };

/* Add up trial @t (verified into @bad) into @r. */
static void account(const struct trial *t, const uint8_t *bad,
		    uint8_t *touch, struct campaign_result *r, bool mp)
{
	size_t nrec = (size_t)t->T * t->cap, i;
	uint32_t j;

	memset(touch, 0, nrec);
	for (j = 0; j < t->ninj; j++) {
		const struct inj *x = &t->inj[j];
		struct bug_count *b = &r->bug[x->kind];
		bool caught, rep, by_design;
		uint64_t first, last, k;
		uint8_t flag;

		if (x->state == INJ_PLANNED)
			continue;	/* strict: the trial ended first */
		if (x->state == INJ_SKIPPED) {
			r->skipped++;
			b->skipped++;
			continue;
		}
		r->injected++;
		b->injected++;
		caught = x->faults > 0;
		rep = x->reported > 0;
		by_design = !caught && mp && t->protect &&
			    x->kind == BUG_XTHREAD;
		r->faults += x->faults;
		r->wrong_address += x->wrong_addr;
		if (caught) {
			r->caught++;
			b->caught++;
			if (!r->site[x->kind])
				r->site[x->kind] = x->ip;
		} else if (by_design) {
			r->missed_by_design++;
			b->missed_by_design++;
		} else {
			r->missed++;
			b->missed++;
		}
		if (rep) {
			r->reported++;
			b->reported++;
		}
		/*
		 * Contain undoes a caught write: it explains no corruption,
		 * so a record it alone touched that is bad counts silent.
		 */
		flag = caught && t->mode == CM_STRICT ? T_STOP
		       : caught && t->mode == CM_CONTAIN ? 0
		       : rep ? T_REP : by_design ? T_BD : T_OTHER;
		first = x->off / STORE_REC_SIZE;
		last = (x->off + x->len - 1) / STORE_REC_SIZE;
		for (k = first; k <= last && k < nrec; k++)
			touch[k] |= flag;
	}
	for (i = 0; i < nrec; i++) {
		if (touch[i] & (T_REP | T_STOP))
			r->reported_records++;
		if (!bad[i]) {
			if (touch[i] & (T_REP | T_STOP))
				r->reported_intact++;
			continue;
		}
		r->corrupted_records++;
		if (touch[i] & T_REP)
			continue;
		if (touch[i] & T_BD) {
			r->corrupted_by_design++;
			continue;
		}
		r->silent_corruptions++;
		if (!(touch[i] & (T_REP | T_BD | T_OTHER)))
			r->unexplained++;
	}
}

static int rm_tree_file(const char *dir, const char *name)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return unlink(p);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(struct campaign_result *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The first error is the one that tells: later ones are its effects. */
static int fail(struct campaign_result *r, const char *fmt, ...)
{
	va_list ap;

	if (r->error[0])
		return -1;
	va_start(ap, fmt);
	vsnprintf(r->error, sizeof(r->error), fmt, ap);
	va_end(ap);
	return -1;
}

/* Run trial @i in a child and account for it.  0, or -1 (r->error). */
static int run_trial(const struct campaign_opts *o, unsigned i,
		     const char *dir, struct trial *t, struct inj *inj_shm,
		     struct trial_shm *shm, struct campaign_result *r)
{
	uint64_t seed = o->seed + 0x9E3779B97F4A7C15ull * i;
	char path[512];
	struct store st;
	struct store_check chk;
	uint8_t *bad = NULL, *touch = NULL;
	unsigned l;
	int rc = -1, status;
	pid_t pid;

	trial_shape(o, i, t);
	t->seed = seed;
	t->inj = inj_shm;
	t->shm = shm;
	memset(shm, 0, sizeof(*shm));
	plan(t, seed);
	snprintf(path, sizeof(path), "%s/kv-%s.pool", dir,
		 campaign_mode_name(o->mode));
	t->path = path;
	t->kv = calloc(t->T, sizeof(*t->kv));
	bad = calloc((size_t)t->T * t->cap, 1);
	touch = calloc((size_t)t->T * t->cap, 1);
	if (!t->kv || !bad || !touch) {
		fail(r, "out of memory");
		goto out;
	}
	for (l = 0; l < t->T; l++) {
		t->kv[l] = malloc((size_t)t->cap * sizeof(**t->kv));
		if (!t->kv[l]) {
			fail(r, "out of memory");
			goto out;
		}
		store_keys(seed, l, t->T, t->nkeys, t->cap, t->kv[l]);
	}
	if (cli_scratch(path, false)) {
		fail(r, "%s: path too long", path);
		goto out;
	}
	if (store_create_file(path, store_pool_size(t->T, t->cap))) {
		fail(r, "creating the pool %s: %s", path, pmg_errormsg());
		goto out_file;
	}
	pid = cli_fork();
	if (pid < 0) {
		fail(r, "fork: %s", strerror(errno));
		goto out_file;
	}
	if (pid == 0)
		child_run(t);
	status = wait_child(pid, o, t, i, (uint64_t)t->ninj +
			    (uint64_t)t->T * (L0 + (uint64_t)t->puts_pp *
					      t->phases));
	r->trials++;
	r->false_positives += shm->false_positives;
	r->reopens += shm->reopens;
	r->reopens_moved += shm->moved;
	if (status == -1 || !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
		if (status != -1 && WIFSIGNALED(status) &&
		    WTERMSIG(status) == SIGABRT && o->mode == CM_STRICT) {
			r->trials_aborted++;	/* stopped at a stray */
		} else {
			r->trials_failed++;
			if (shm->msg[0])
				fail(r, "trial %u: %s", i, shm->msg);
			else if (status != -1 && WIFSIGNALED(status))
				fail(r, "trial %u: the child died by signal "
				     "%d (%s)", i, WTERMSIG(status),
				     strsignal(WTERMSIG(status)));
			else
				fail(r, "trial %u: the child exited with "
				     "status %d", i, status == -1 ? -1
				     : WEXITSTATUS(status));
		}
	}
	/* verify on reopen, whatever became of the child */
	if (store_open(&st, path, t->T, t->cap, false)) {
		fail(r, "reopening %s to verify it: %s", path, pmg_errormsg());
		goto out_file;
	}
	if (store_verify(&st, seed, t->nkeys, t->kv, shm->done, bad, &chk)) {
		fail(r, "trial %u: the superblock of %s is unusable", i, path);
		r->trials_failed++;
	}
	store_close(&st);
	r->records += chk.records;
	r->crc_failures += chk.crc_failures;
	r->bad_keys += chk.bad_keys;
	r->lost_records += chk.lost;
	account(t, bad, touch, r, !strcmp(r->backend, "mprotect"));
	rc = r->trials_failed ? -1 : 0;
out_file:
	unlink(path);
	cli_scratch_done(path);
out:
	if (t->kv)
		for (l = 0; l < t->T; l++)
			free(t->kv[l]);
	free(t->kv);
	t->kv = NULL;
	free(bad);
	free(touch);
	return rc;
}

int campaign_run(const struct campaign_opts *o, struct campaign_result *r)
{
	char dir[300];
	bool own_dir = !o->dir;
	struct trial *t = NULL;
	struct inj *inj = NULL;
	struct trial_shm *shm = NULL;
	sigset_t old;
	int report_fd = -1;
	uint64_t most = 0;
	double t0 = now_s();
	unsigned i;
	int rc = -1;

	memset(r, 0, sizeof(*r));
	dir[0] = '\0';
	r->mode = o->mode;
	r->planned = o->writes;
	r->backend = "none";
	store_init();
	if (pmg_init())
		return fail(r, "pmg_init: %s", pmg_errormsg());
	r->backend = pmg_backend_name(pmg_backend());
	if (o->threads < 1 || o->threads > CAMPAIGN_MAX_THREADS ||
	    o->trials < 1 || o->writes < o->trials || o->mode < 0 ||
	    o->mode >= CM_MODES)
		return fail(r, "bad campaign options");
	/* the reports file first: a bad path is the error to report */
	if (o->report_path) {
		report_fd = open(o->report_path, O_WRONLY | O_CREAT |
				 O_APPEND | O_CLOEXEC, 0644);
		if (report_fd < 0)
			return fail(r, "--reports %s: %s", o->report_path,
				    strerror(errno));
	}
	if (own_dir) {
		snprintf(dir, sizeof(dir), "%s/pmguard-XXXXXX",
			 campaign_tmp_base());
		/* no signal between mkdtemp and the registration */
		cli_signals_hold(&old);
		if (!mkdtemp(dir)) {
			cli_signals_release(&old);
			fail(r, "making a directory in %s: %s",
			     campaign_tmp_base(), strerror(errno));
			dir[0] = '\0';
			goto out;
		}
		cli_scratch(dir, true);
		cli_signals_release(&old);
	} else {
		snprintf(dir, sizeof(dir), "%s", o->dir);
	}
	t = calloc(1, sizeof(*t));
	most = o->writes / o->trials + 1;
	inj = shared_alloc(most * sizeof(*inj));
	shm = shared_alloc(sizeof(*shm));
	if (!t || !inj || !shm) {
		fail(r, "out of memory");
		goto out;
	}
	t->mode = o->mode;
	t->protect = o->mode != CM_OFF;
	t->gate_on = t->protect && pmg_backend() == PMG_BACKEND_MPROTECT;
	t->serialize = o->mode == CM_STRICT;
	t->report_fd = report_fd;
	rc = 0;
	for (i = 0; i < o->trials && rc == 0; i++)
		rc = run_trial(o, i, dir, t, inj, shm, r);
	if (o->progress && rc == 0)
		o->progress(1.0, o->progress_arg);
out:
	r->elapsed_s = now_s() - t0;
	if (own_dir && dir[0]) {
		char name[64];

		snprintf(name, sizeof(name), "kv-%s.pool",
			 campaign_mode_name(o->mode));
		rm_tree_file(dir, name);
		rmdir(dir);
		cli_scratch_done(dir);
	}
	if (report_fd >= 0)
		close(report_fd);
	free(t);
	if (inj)
		munmap(inj, most * sizeof(*inj));
	if (shm)
		munmap(shm, sizeof(*shm));
	return rc;
}
