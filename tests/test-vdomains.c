// SPDX-License-Identifier: MIT
/*
 * test-vdomains: more domains than keys (pmguard(7), "Virtual domains").
 *
 * 40 domains, each on a page of its own.  On PKU the first ones get the
 * free hardware keys, the rest are virtual (pmg_domain_key() -ENOKEY,
 * page protection); a window on a virtual domain gets it a key, evicting
 * the least recently windowed domain that has nothing open on it.  On the
 * mprotect backend every domain is page-protected all along and the
 * key-only checks say SKIP.  Run also with PMGUARD_KEYS=0 (every domain
 * virtual on PKU: windows are page-protection ones) and PMGUARD_KEYS=4.
 *
 * Each stray write is made through probe() (tools/probe.h): the fault
 * must name the address, access, domain, key (-ENOKEY for a virtual
 * domain) and si_code (SEGV_PKUERR for a key, SEGV_ACCERR for page
 * protection); data is checked byte for byte after.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tap.h"
#include "probe.h"
#include "capture.h"

#define PAGE 4096
#define N 40
#define PLAN 12

static struct pmg_domain *d[N];
static char *pg[N];
static bool pku;
static struct pmg_key_stats ks0;

static void setup(void)
{
	char name[16];
	int i;

	for (i = 0; i < N; i++) {
		pg[i] = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (pg[i] == MAP_FAILED) {
			tap_diag("mmap: %s", strerror(errno));
			exit(1);
		}
		memset(pg[i], 'a' + i % 26, PAGE);
		snprintf(name, sizeof(name), "vd%02d", i);
		if (pmg_domain_new(&d[i], name, 0) ||
		    pmg_protect(d[i], pg[i], PAGE)) {
			tap_diag("domain %s: %s", name, pmg_errormsg());
			exit(1);
		}
	}
}

/* Every page holds its own letter but for the bytes @skip says. */
static int pages_intact(int skip_page, size_t skip_off)
{
	int i, ok = 1;
	size_t j;

	for (i = 0; i < N; i++)
		for (j = 0; j < PAGE; j++)
			if (!(i == skip_page && j == skip_off) &&
			    pg[i][j] != (char)('a' + i % 26)) {
				tap_diag("page %d byte %zu is %#x", i, j,
					 (unsigned char)pg[i][j]);
				ok = 0;
				break;
			}
	return ok;
}

static int count_keyed(void)
{
	int i, n = 0;

	for (i = 0; i < N; i++)
		n += pmg_domain_key(d[i]) > 0;
	return n;
}

/* 1: the first domains keyed, the rest virtual (PKU); all numbered. */
static void t_created(void)
{
	int keyed = count_keyed(), i, ok = 1;

	if (pku) {
		for (i = 0; i < N; i++) {
			int k = pmg_domain_key(d[i]);

			CHECK(ok, (k >= 1 && k <= 15) || k == -ENOKEY);
		}
		CHECK(ok, keyed == ks0.keyed && keyed <= ks0.keys_max);
		CHECK(ok, ks0.domains == N && N - keyed > 0);
		tap_ok(ok,
		       "%d domains: %d hold a key (PMGUARD_KEYS %d), %d "
		       "are virtual (-ENOKEY)",
		       N, keyed, ks0.keys_max, N - keyed);
	} else {
		CHECK(ok, keyed == N && ks0.keyed == 0 && ks0.domains == N);
		tap_ok(ok,
		       "%d domains on mprotect: each numbered, none holds a "
		       "hardware key (page protection)",
		       N);
	}
}

/* A stray write into a virtual domain in @mode, in a child: the fault
 * names it; strict aborts, contain keeps the byte, audit lets it through
 * and re-arms, relaxed lets it through. */
static int v; /* a domain without key (PKU) */
static int rep_fd;

static int mode_child(void *arg)
{
	int mode = (int)(intptr_t)arg, r;

	pmg_set_report_fd(rep_fd);
	pmg_set_fault_observer(probe_observer, &probe_log);
	pmg_set_fault_mode(mode);
	r = probe(d[v], pg[v] + 100, PMG_WRITE);
	if (r != 1)
		return 10 + r;
	switch (mode) {
	case PMG_FAULT_CONTAIN:
		if (pg[v][100] != (char)('a' + v % 26))
			return 20;
		break;
	case PMG_FAULT_AUDIT:
	case PMG_FAULT_RELAXED:
		if (pg[v][100] != 0x5a)
			return 21;
		break;
	}
	/* audit and contain re-arm: a second stray write faults again */
	if (mode != PMG_FAULT_RELAXED &&
	    probe(d[v], pg[v] + 200, PMG_WRITE) != 1)
		return 22;
	return 0;
}

static void t_modes(void)
{
	static const struct {
		int mode;
		const char *name;
	} m[] = { { PMG_FAULT_STRICT, "strict" },
		  { PMG_FAULT_RELAXED, "relaxed" },
		  { PMG_FAULT_AUDIT, "audit" },
		  { PMG_FAULT_CONTAIN, "contain" } };
	char rep[4096], want[64];
	unsigned i;
	int ok = 1, st;

	for (v = N - 1; v > 0 && pmg_domain_key(d[v]) > 0 && pku; v--)
		;
	for (i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
		rep_fd = tmpfd();
		if (rep_fd < 0)
			exit(1);
		st = tap_child(mode_child, (void *)(intptr_t)m[i].mode);
		slurp(rep_fd, rep, sizeof(rep));
		close(rep_fd);
		/* contain's report names no key */
		snprintf(want, sizeof(want), "in domain 'vd%02d'%s", v,
			 m[i].mode == PMG_FAULT_CONTAIN ? ""
			 : pku ? " (no key: page protection)"
			       : " (key");
		if (m[i].mode == PMG_FAULT_STRICT)
			CHECK(ok, WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
		else
			CHECK(ok, WIFEXITED(st) && WEXITSTATUS(st) == 0);
		if (!strstr(rep, want)) {
			tap_diag("%s: report lacks \"%s\": %.300s", m[i].name,
				 want, rep);
			ok = 0;
		}
		if (WIFEXITED(st) && WEXITSTATUS(st))
			tap_diag("%s: child exit %d", m[i].name,
				 WEXITSTATUS(st));
	}
	CHECK(ok, pages_intact(-1, 0));
	tap_ok(ok,
	       "a stray write into %s domain vd%02d in each mode: "
	       "SEGV_ACCERR with its address and domain, reported; strict "
	       "aborts, contain undoes it, audit and relaxed let it through "
	       "(in children: the parent's page unchanged)",
	       pku ? "a virtual" : "a page-protected", v);
}

/* 3: a window on each in turn writes its page; strays into others are
 * caught meanwhile; every page holds what was written after. */
static void t_each(void)
{
	int i, j, ok = 1, r;
	struct pmg_key_stats ks;

	probe_begin();
	for (i = 0; i < N; i++) {
		CHECK(ok, pmg_open(d[i], PMG_WRITE) == 0);
		pg[i][8] = 'W';
		/* thread-local on PKU: the window is on d[i] only */
		for (j = 1; j < N; j += 13) {
			int o = (i + j) % N;

			r = probe(d[o], pg[o] + 16 + (size_t)i, PMG_WRITE);
			if (r != 1) {
				tap_diag("window on vd%02d: stray into vd%02d: "
					 "%d",
					 i, o, r);
				ok = 0;
			}
			/* audit let it through: put the letter back */
			CHECK(ok, pmg_open(d[o], PMG_WRITE) == 0);
			pg[o][16 + i] = (char)('a' + o % 26);
			CHECK(ok, pmg_close(d[o], PMG_WRITE) == 0);
		}
		CHECK(ok, pmg_close(d[i], PMG_WRITE) == 0);
		r = probe(d[i], pg[i] + 24, PMG_WRITE);
		CHECK(ok, r == 1);
		if (r == 1) {
			CHECK(ok, pmg_open(d[i], PMG_WRITE) == 0);
			pg[i][24] = (char)('a' + i % 26);
			CHECK(ok, pmg_close(d[i], PMG_WRITE) == 0);
		}
	}
	probe_end();
	for (i = 0; i < N; i++)
		CHECK(ok, pg[i][8] == 'W');
	pmg_key_stats_get(&ks, sizeof(ks));
	tap_diag("key stats: %llu assigned, %llu evictions, %llu busy, %llu "
		 "page-protection windows, %llu raced",
		 (unsigned long long)(ks.assigned - ks0.assigned),
		 (unsigned long long)(ks.evictions - ks0.evictions),
		 (unsigned long long)(ks.evict_busy - ks0.evict_busy),
		 (unsigned long long)(ks.paged_windows - ks0.paged_windows),
		 (unsigned long long)ks.raced);
	/* with one key, the windows nested in another's are page
	 * protection: that key is busy */
	if (pku && ks0.keys_max > 0 && ks.evict)
		CHECK(ok, ks.evictions - ks0.evictions >=
					  (uint64_t)(N - ks0.keys_max) &&
				  (ks0.keys_max < 2 ||
				   ks.paged_windows == ks0.paged_windows));
	else if (pku)
		CHECK(ok, ks.paged_windows - ks0.paged_windows >= 1);
	tap_ok(ok,
	       "a write window on each of %d domains in turn writes its "
	       "page; a stray write into others meanwhile is caught (right "
	       "domain, address, key, si_code)%s",
	       N,
	       pku ? (ks0.keys_max ? "; virtual ones got keys by eviction"
				   : "; PMGUARD_KEYS=0: page-protection "
				     "windows")
		   : "");
	/* the writes through the windows (in place again) */
	for (i = 0; i < N; i++) {
		CHECK(ok, pmg_open(d[i], PMG_WRITE) == 0);
		pg[i][8] = (char)('a' + i % 26);
		CHECK(ok, pmg_close(d[i], PMG_WRITE) == 0);
	}
	tap_ok(pages_intact(-1, 0), "every page holds exactly what its "
				    "windows wrote, no other byte changed");
}

/* ---- PKU only ---- */

struct holder {
	int i;
	volatile int stage; /* 1 window open, 2 close it */
	int wrote_ok;
	int key;
};

static void *hold(void *arg)
{
	struct holder *h = arg;

	if (pmg_open(d[h->i], PMG_WRITE))
		return NULL;
	h->key = pmg_domain_key(d[h->i]);
	__atomic_store_n(&h->stage, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&h->stage, __ATOMIC_SEQ_CST) != 2)
		sched_yield();
	/* still its window, on its key */
	h->wrote_ok = probe(d[h->i], pg[h->i] + 40, PMG_WRITE) == 0 &&
		      pmg_domain_key(d[h->i]) == h->key;
	pmg_close(d[h->i], PMG_WRITE);
	return NULL;
}

static void *other_writer(void *arg)
{
	int i = (int)(intptr_t)arg;

	return (void *)(intptr_t)probe(d[i], pg[i] + 48, PMG_WRITE);
}

/* 5: thread-local; a window in another thread keeps its key. */
static void t_threads(void)
{
	struct holder h = { .i = 0 };
	pthread_t t;
	void *res;
	int ok = 1, i, vi;

	if (!pku || !ks0.keys_max || !ks0.evict) {
		tap_skip("a virtual domain's window, once keyed, is "
			 "thread-local",
			 !pku	      ? "mprotect: windows are process-wide"
			 : !ks0.evict ? "no membarrier(2) in this kernel: no "
					"eviction, a virtual domain's window "
					"is a page-protection one"
				      : "PMGUARD_KEYS=0: no key to take");
		tap_skip("a domain with a window open in another thread keeps "
			 "its key through every eviction",
			 !pku	      ? "mprotect: no keys"
			 : !ks0.evict ? "no membarrier(2) in this kernel"
				      : "PMGUARD_KEYS=0");
		return;
	}
	probe_begin();
	for (vi = N - 1; vi > 0 && pmg_domain_key(d[vi]) > 0; vi--)
		;
	CHECK(ok, pmg_domain_key(d[vi]) == -ENOKEY);
	CHECK(ok, pmg_open(d[vi], PMG_WRITE) == 0);
	CHECK(ok, pmg_domain_key(d[vi]) > 0);
	CHECK(ok, pthread_create(&t, NULL, other_writer,
				 (void *)(intptr_t)vi) == 0);
	pthread_join(t, &res);
	CHECK(ok, (intptr_t)res == 1);
	CHECK(ok, probe(d[vi], pg[vi] + 56, PMG_WRITE) == 0);
	CHECK(ok, pmg_close(d[vi], PMG_WRITE) == 0);
	tap_ok(ok,
	       "a window on virtual domain vd%02d gets it a key and is "
	       "thread-local: another thread's write faults (SEGV_PKUERR), "
	       "the window's own goes through",
	       vi);

	ok = 1;
	for (h.i = 0; h.i < N && pmg_domain_key(d[h.i]) < 0; h.i++)
		;
	CHECK(ok, pthread_create(&t, NULL, hold, &h) == 0);
	while (!__atomic_load_n(&h.stage, __ATOMIC_SEQ_CST))
		sched_yield();
	for (i = 0; i < N; i++) {
		if (i == h.i)
			continue;
		CHECK(ok, pmg_open(d[i], PMG_WRITE) == 0);
		CHECK(ok, pmg_close(d[i], PMG_WRITE) == 0);
		CHECK(ok, pmg_domain_key(d[h.i]) == h.key);
	}
	__atomic_store_n(&h.stage, 2, __ATOMIC_SEQ_CST);
	pthread_join(t, NULL);
	CHECK(ok, h.wrote_ok);
	probe_end();
	tap_ok(ok,
	       "vd%02d, with a window open in another thread, keeps key "
	       "%d through windows on the %d others (evictions pass it over); "
	       "that thread's write goes through",
	       h.i, h.key, N - 1);
	/* the probes' bytes back */
	for (i = 0; i < N; i++) {
		pmg_open(d[i], PMG_WRITE);
		memset(pg[i], 'a' + i % 26, PAGE);
		pmg_close(d[i], PMG_WRITE);
	}
}

/* 7: every keyed domain has a window open: the next window on a virtual
 * domain is page protection, process-wide. */
static void t_all_busy(void)
{
	struct pmg_key_stats a, b;
	int open[N], n = 0, i, vi = -1, ok = 1;

	if (!pku || !ks0.keys_max) {
		tap_skip("every keyed domain busy: a window on a virtual one "
			 "is a page-protection window",
			 pku ? "PMGUARD_KEYS=0: every window is one"
			     : "mprotect: every window is one");
		return;
	}
	probe_begin();
	pmg_key_stats_get(&a, sizeof(a));
	/* windows on domains until every key is held by one */
	for (i = 0; i < N && n < a.keys_held; i++) {
		CHECK(ok, pmg_open(d[i], PMG_WRITE) == 0);
		open[n++] = i;
	}
	for (i = 0; i < N && vi < 0; i++)
		if (pmg_domain_key(d[i]) < 0)
			vi = i;
	CHECK(ok, vi >= 0 && pmg_open(d[vi], PMG_WRITE) == 0);
	pmg_key_stats_get(&b, sizeof(b));
	CHECK(ok, vi >= 0 && pmg_domain_key(d[vi]) == -ENOKEY);
	CHECK(ok, b.paged_windows == a.paged_windows + 1);
	if (vi >= 0) {
		CHECK(ok, probe(d[vi], pg[vi] + 64, PMG_WRITE) == 0);
		/* process-wide: another thread's write goes through too */
		{
			pthread_t t;
			void *res;

			pthread_create(&t, NULL, other_writer,
				       (void *)(intptr_t)vi);
			pthread_join(t, &res);
			CHECK(ok, (intptr_t)res == 0);
		}
		CHECK(ok, pmg_close(d[vi], PMG_WRITE) == 0);
		CHECK(ok, probe(d[vi], pg[vi] + 72, PMG_WRITE) == 1);
	}
	while (n)
		CHECK(ok, pmg_close(d[open[--n]], PMG_WRITE) == 0);
	probe_end();
	tap_ok(ok,
	       "%d keys each held by a window: a window on virtual "
	       "vd%02d is a page-protection one (stats.paged_windows +1), "
	       "process-wide (another thread's write goes through); after it "
	       "closes a stray write faults (SEGV_ACCERR)",
	       a.keys_held, vi);
	for (i = 0; i < N; i++) {
		pmg_open(d[i], PMG_WRITE);
		memset(pg[i], 'a' + i % 26, PAGE);
		pmg_close(d[i], PMG_WRITE);
	}
}

/* 8: the domain windowed between every other window keeps its key. */
static void t_lru(void)
{
	int hot, i, ok = 1, k;
	struct pmg_key_stats a, b;

	/* the clock (keys.c) orders domains windowed since the last
	 * eviction after those that were not, not among themselves: with
	 * two keys both holders were windowed since */
	if (!pku || ks0.keys_max < 3 || !ks0.evict) {
		tap_skip("the most recently windowed domain keeps its key",
			 !pku	      ? "mprotect: no keys"
			 : !ks0.evict ? "no membarrier(2) in this kernel: no "
					"eviction"
				      : "fewer than 3 keys (PMGUARD_KEYS): the "
					"clock cannot order two domains both "
					"windowed since the last eviction");
		return;
	}
	pmg_key_stats_get(&a, sizeof(a));
	hot = N / 2;
	CHECK(ok, pmg_open(d[hot], PMG_WRITE) == 0);
	CHECK(ok, pmg_close(d[hot], PMG_WRITE) == 0);
	k = pmg_domain_key(d[hot]);
	for (i = 0; i < N; i++) {
		if (i == hot)
			continue;
		CHECK(ok, pmg_open(d[i], PMG_WRITE) == 0);
		CHECK(ok, pmg_close(d[i], PMG_WRITE) == 0);
		CHECK(ok, pmg_open(d[hot], PMG_WRITE) == 0);
		CHECK(ok, pmg_close(d[hot], PMG_WRITE) == 0);
		if (pmg_domain_key(d[hot]) != k) {
			tap_diag("vd%02d lost key %d at vd%02d", hot, k, i);
			ok = 0;
			k = pmg_domain_key(d[hot]);
		}
	}
	pmg_key_stats_get(&b, sizeof(b));
	tap_ok(ok && b.evictions > a.evictions,
	       "vd%02d, windowed between every other window, keeps its key "
	       "through %llu evictions (least recently windowed goes first)",
	       hot, (unsigned long long)(b.evictions - a.evictions));
}

/* 9: an inline window racing evictions of its own key: no fault. */
static volatile int race_stop;
static int race_faults;

static void race_observer(const struct pmg_fault_info *fi, void *arg)
{
	(void)arg;
	if (fi->domain == d[0])
		__atomic_add_fetch(&race_faults, 1, __ATOMIC_RELAXED);
}

static void *race_windows(void *arg)
{
	long n = 0;

	(void)arg;
	while (!race_stop) {
		if (pmg_open(d[0], PMG_WRITE))
			return (void *)-1L;
		pg[0][(n % 64) + 128] = 'R';
		pg[0][(n % 64) + 128] = 'a';
		/* an eviction trying vd00 (its _key 0 for a moment) must
		 * not make this close look unbalanced */
		if (pmg_close(d[0], PMG_WRITE)) {
			printf("# close %ld: %s\n", n, pmg_errormsg());
			return (void *)-2L;
		}
		n++;
	}
	return (void *)n;
}

static void t_race(void)
{
	struct pmg_key_stats a, b;
	struct pmg_stats s0, s1;
	pthread_t t;
	void *res;
	int ok = 1, i, round;
	double end;

	if (!pku || !ks0.keys_max) {
		tap_skip("windows racing evictions of their key: never a "
			 "fault, never a lost byte",
			 pku ? "PMGUARD_KEYS=0" : "mprotect: no keys");
		return;
	}
	pmg_set_report_fd(-1);
	pmg_set_fault_observer(race_observer, NULL);
	pmg_set_fault_mode(PMG_FAULT_AUDIT);
	pmg_key_stats_get(&a, sizeof(a));
	pmg_stats_get(&s0, sizeof(s0));
	race_stop = 0;
	CHECK(ok, pthread_create(&t, NULL, race_windows, NULL) == 0);
	end = tap_now() + 3;
	for (round = 0; tap_now() < end; round++)
		for (i = 1; i < N; i++) {
			pmg_open(d[i], PMG_WRITE);
			pmg_close(d[i], PMG_WRITE);
		}
	race_stop = 1;
	pthread_join(t, &res);
	pmg_key_stats_get(&b, sizeof(b));
	pmg_set_fault_observer(NULL, NULL);
	pmg_set_fault_mode(PMG_FAULT_RELAXED);
	pmg_set_report_fd(2);
	tap_diag("%ld windows on vd00 beside %d rounds of %d: %llu "
		 "evictions, %llu passed over busy, %llu inline opens raced",
		 (long)(intptr_t)res, round, N - 1,
		 (unsigned long long)(b.evictions - a.evictions),
		 (unsigned long long)(b.evict_busy - a.evict_busy),
		 (unsigned long long)(b.raced - a.raced));
	pmg_stats_get(&s1, sizeof(s1));
	CHECK(ok, (intptr_t)res > 0 && race_faults == 0 &&
		  s1.unbalanced == s0.unbalanced);
	CHECK(ok, pages_intact(-1, 0));
	tap_ok(ok,
	       "windows on vd00 in one thread racing evictions in "
	       "another: %d faults on vd00 (want 0), no close refused, every "
	       "byte in place", race_faults);
}

/* 10: a key freed by a deleted domain goes to the next window without
 * an eviction. */
static void t_delete(void)
{
	struct pmg_key_stats a, b;
	int keyed = -1, virt = -1, i, ok = 1;

	for (i = 0; i < N; i++) {
		if (pmg_domain_key(d[i]) > 0 && keyed < 0)
			keyed = i;
		if (pmg_domain_key(d[i]) < 0 && virt < 0)
			virt = i;
	}
	if (!pku || keyed < 0 || virt < 0) {
		tap_skip("a deleted domain's key goes to the next virtual "
			 "domain's window, no eviction",
			 pku ? "no keyed or no virtual domain" : "mprotect");
		return;
	}
	CHECK(ok, pmg_unprotect(pg[keyed], PAGE) == 0);
	CHECK(ok, pmg_domain_delete(&d[keyed]) == 0);
	pmg_key_stats_get(&a, sizeof(a));
	CHECK(ok, pmg_open(d[virt], PMG_WRITE) == 0);
	CHECK(ok, pmg_domain_key(d[virt]) > 0);
	CHECK(ok, pmg_close(d[virt], PMG_WRITE) == 0);
	pmg_key_stats_get(&b, sizeof(b));
	CHECK(ok, b.evictions == a.evictions && b.assigned == a.assigned + 1);
	/* back: a new domain for that page */
	CHECK(ok, pmg_domain_new(&d[keyed], "vd-again", 0) == 0 &&
			  pmg_protect(d[keyed], pg[keyed], PAGE) == 0);
	tap_ok(ok,
	       "vd%02d deleted: its key goes to virtual vd%02d's window "
	       "with no eviction",
	       keyed, virt);
}

int main(void)
{
	int i;

	tap_init(PLAN);
	if (pmg_init()) {
		tap_diag("pmg_init: %s", pmg_errormsg());
		return 1;
	}
	pku = pmg_backend() == PMG_BACKEND_PKU;
	tap_diag("backend: %s", pmg_backend_name(pmg_backend()));
	setup();
	pmg_key_stats_get(&ks0, sizeof(ks0));
	tap_diag("%d domains, %d keyed, %d keys held, PMGUARD_KEYS %d, "
		 "eviction %s",
		 ks0.domains, ks0.keyed, ks0.keys_held, ks0.keys_max,
		 ks0.evict ? "possible" : "not possible");
	t_created();
	t_modes();
	t_each();
	t_threads();
	t_all_busy();
	t_lru();
	t_race();
	t_delete();
	/* fork: the child's windows are its own copies */
	{
		int st, ok = 1;

		CHECK(ok, pmg_open(d[N - 1], PMG_WRITE) == 0);
		fflush(NULL);
		st = fork();
		if (st == 0) {
			/* unbalanced in the child: its copy is closed */
			_exit(pmg_close(d[N - 1], PMG_WRITE) == -EPERM &&
					      pmg_open(d[N - 2], PMG_WRITE) ==
						      0 &&
					      pmg_close(d[N - 2], PMG_WRITE) ==
						      0
				      ? 0
				      : 1);
		}
		waitpid(st, &st, 0);
		CHECK(ok, WIFEXITED(st) && WEXITSTATUS(st) == 0);
		CHECK(ok, pmg_close(d[N - 1], PMG_WRITE) == 0);
		tap_ok(ok,
		       "fork inside a window on vd%02d: the child's copy is "
		       "closed (its close -EPERM), its own windows work; the "
		       "parent's close succeeds",
		       N - 1);
	}
	{
		int ok = 1;

		for (i = 0; i < N; i++) {
			CHECK(ok, pmg_unprotect(pg[i], PAGE) == 0);
			CHECK(ok, pmg_domain_delete(&d[i]) == 0);
		}
		tap_ok(ok, "every range unprotected, every domain deleted");
	}
	return tap_done();
}
