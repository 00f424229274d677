// SPDX-License-Identifier: MIT
/*
 * test-coexist: pmguard beside other code that uses protection keys in
 * the same process (a JIT, a sandbox: the V8 JavaScript engine,
 * Wasmtime), through virtual domains.  The other code here ("the JIT",
 * below: no pmguard call, its own pkey_alloc(2), pkey_mprotect(2),
 * RDPKRU/WRPKRU and SIGSEGV handler) takes keys
 *   1. before pmguard starts, some of them: pmguard gets the rest, its
 *      domains past them are virtual;
 *   2. before pmguard starts, all of them: every pmguard domain is
 *      virtual (page protection), a pinned one is refused;
 *   3. after pmguard, with PMGUARD_KEYS=8: the JIT gets the other keys;
 *      a key pmguard frees is the kernel's again.
 * Each in a child.  Checked: pmguard never takes, touches or reports a
 * key it does not hold (the JIT's page still faults for the JIT, its
 * handler sees its own si_pkey, its register bits survive pmguard's
 * window edges); pmguard's windows work and its stray writes are caught
 * (probe(): address, domain, key, si_code) on every domain.
 * Needs pkey_alloc(2) (PKU on the host or in the guest): SKIP otherwise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tap.h"
#include "probe.h"

#define PAGE 4096
#define ND 20

#ifndef SYS_pkey_alloc
#define SYS_pkey_mprotect 329
#define SYS_pkey_alloc 330
#define SYS_pkey_free 331
#endif

/* ---------------------------------------------------------- the JIT */

static int jit_keys[16], jit_n;
static char *jit_page;
static sigjmp_buf jit_jmp;
static volatile int jit_faults, jit_last_pkey;
static struct sigaction jit_old;

static uint32_t jit_rdpkru(void)
{
	uint32_t eax, edx;

	__asm__ volatile(".byte 0x0f,0x01,0xee"
			 : "=a"(eax), "=d"(edx)
			 : "c"(0));
	return eax;
}

static void jit_wrpkru(uint32_t v)
{
	__asm__ volatile(".byte 0x0f,0x01,0xef"
			 :
			 : "a"(v), "c"(0), "d"(0)
			 : "memory");
}

/* Its own handler: a fault on its key is its business; any other goes
 * to the handler installed before it (pmguard's, when the JIT comes
 * second), as V8's and Wasmtime's do. */
static void jit_segv(int sig, siginfo_t *si, void *uc)
{
	if (si->si_code == 4 /* SEGV_PKUERR */ &&
	    (char *)si->si_addr >= jit_page &&
	    (char *)si->si_addr < jit_page + PAGE) {
		jit_faults++;
		jit_last_pkey = (int)si->si_pkey;
		siglongjmp(jit_jmp, 1);
	}
	if (jit_old.sa_flags & SA_SIGINFO) {
		jit_old.sa_sigaction(sig, si, uc);
		return;
	}
	signal(sig, jit_old.sa_handler);
}

/* Take up to @n keys (all: n 16), access-disabled; a page of its own
 * tagged with the first; its SIGSEGV handler.  The keys taken. */
static int jit_take(int n)
{
	struct sigaction sa;

	while (jit_n < n) {
		long k = syscall(SYS_pkey_alloc, 0, 1 /* AD */);

		if (k < 0)
			break;
		jit_keys[jit_n++] = (int)k;
	}
	if (!jit_page) {
		jit_page = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = jit_segv;
		sa.sa_flags = SA_SIGINFO | SA_NODEFER;
		sigaction(SIGSEGV, &sa, &jit_old);
	}
	if (jit_n && syscall(SYS_pkey_mprotect, jit_page, PAGE,
			     PROT_READ | PROT_WRITE, jit_keys[0]))
		return -1;
	return jit_n;
}

static bool jit_has(int k)
{
	int i;

	for (i = 0; i < jit_n; i++)
		if (jit_keys[i] == k)
			return true;
	return false;
}

/* A JIT access to its page without opening its key: faults (its
 * handler, its key).  1 if so. */
static int jit_denied(void)
{
	uint32_t v = jit_rdpkru();
	int before = jit_faults;

	if (!sigsetjmp(jit_jmp, 1))
		*(volatile char *)jit_page = 'j';
	else
		jit_wrpkru(v); /* a handler left by longjmp: its register */
	return jit_faults == before + 1 && jit_last_pkey == jit_keys[0];
}

/* The JIT opens its key, writes, closes: no fault, bits as before. */
static int jit_allowed(void)
{
	uint32_t v = jit_rdpkru(), sh = 2 * (unsigned)jit_keys[0];
	int before = jit_faults, ok;

	jit_wrpkru(v & ~(3u << sh));
	if (!sigsetjmp(jit_jmp, 1))
		*(volatile char *)jit_page = 'J';
	ok = jit_faults == before && jit_page[0] == 'J';
	jit_wrpkru(v);
	return ok;
}

/* ------------------------------------------------------- pmguard's */

static struct pmg_domain *d[ND];
static char *pg[ND];

static int domains(unsigned flags)
{
	char name[16];
	int i;

	for (i = 0; i < ND; i++) {
		pg[i] = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		snprintf(name, sizeof(name), "co%02d", i);
		if (pg[i] == MAP_FAILED || pmg_domain_new(&d[i], name, flags) ||
		    pmg_protect(d[i], pg[i], PAGE)) {
			printf("# domain %s: %s\n", name, pmg_errormsg());
			return -1;
		}
	}
	return 0;
}

/* Windows on every domain, a stray write into each caught, none of its
 * keys the JIT's, the JIT's key untouched by pmguard's edges.  0 or a
 * code. */
static int exercise(void)
{
	int i, k;

	probe_begin();
	for (i = 0; i < ND; i++) {
		if (pmg_open(d[i], PMG_WRITE))
			return 20;
		k = pmg_domain_key(d[i]);
		if (k > 0 && jit_has(k))
			return 21;
		pg[i][8] = 'w';
		/* the JIT, inside pmguard's window: its key as it was */
		if (jit_n && (!jit_denied() || !jit_allowed()))
			return 22;
		if (pmg_close(d[i], PMG_WRITE))
			return 23;
		if (probe(d[i], pg[i] + 16, PMG_WRITE) != 1)
			return 24;
		if (probe(d[(i + 7) % ND], pg[(i + 7) % ND] + 24, PMG_WRITE) !=
		    1)
			return 25;
	}
	probe_end();
	if (jit_n && (!jit_denied() || !jit_allowed()))
		return 26;
	return 0;
}

static int keyed_count(void)
{
	int i, n = 0;

	for (i = 0; i < ND; i++)
		n += pmg_domain_key(d[i]) > 0;
	return n;
}

/* 1: the JIT takes 10 keys first. */
static int before_some(void *arg)
{
	struct pmg_key_stats ks;
	int rc;

	(void)arg;
	if (jit_take(10) != 10)
		return 2;
	if (pmg_init() || domains(0))
		return 3;
	pmg_key_stats_get(&ks, sizeof(ks));
	printf("# JIT holds %d keys; pmguard: %d keyed of %d, %d held\n", jit_n,
	       keyed_count(), ND, ks.keys_held);
	if (pmg_backend() == PMG_BACKEND_PKU &&
	    (ks.keys_held != 15 - jit_n || keyed_count() != 15 - jit_n))
		return 4;
	rc = exercise();
	if (rc)
		return rc;
	pmg_key_stats_get(&ks, sizeof(ks));
	/* evictions happen where they can (membarrier(2): not in every
	 * kernel's config) */
	return pmg_backend() == PMG_BACKEND_PKU && ks.evict && !ks.evictions
		       ? 5
		       : 0;
}

/* 2: the JIT takes every key first. */
static int before_all(void *arg)
{
	struct pmg_domain *pin = NULL;
	struct pmg_key_stats ks;
	int rc;

	(void)arg;
	if (jit_take(16) < 1)
		return 2;
	if (pmg_init() || domains(0))
		return 3;
	pmg_key_stats_get(&ks, sizeof(ks));
	printf("# JIT holds %d keys; pmguard: %d keyed, %d held\n", jit_n,
	       keyed_count(), ks.keys_held);
	if (keyed_count() != (pmg_backend() == PMG_BACKEND_PKU ? 0 : ND))
		return 4;
	rc = exercise();
	if (rc)
		return rc;
	pmg_key_stats_get(&ks, sizeof(ks));
	if (pmg_backend() == PMG_BACKEND_PKU && ks.paged_windows < ND)
		return 5;
	rc = pmg_domain_new(&pin, "pinned", PMG_DOMAIN_PINNED);
	if (pmg_backend() == PMG_BACKEND_PKU &&
	    (rc != -ENOSPC || !strstr(pmg_errormsg(), "other code"))) {
		printf("# pinned: %d %s\n", rc, pmg_errormsg());
		return 6;
	}
	return 0;
}

/* 3: pmguard first, PMGUARD_KEYS=8; the JIT after. */
static int after(void *arg)
{
	struct pmg_key_stats ks;
	int rc, i, n0;

	(void)arg;
	setenv("PMGUARD_KEYS", "8", 1);
	if (pmg_init() || domains(0))
		return 3;
	rc = exercise();
	if (rc)
		return rc;
	pmg_key_stats_get(&ks, sizeof(ks));
	n0 = jit_take(16);
	printf("# pmguard holds %d keys (max %d); the JIT got %d after it\n",
	       ks.keys_held, ks.keys_max, n0);
	if (pmg_backend() == PMG_BACKEND_PKU &&
	    (ks.keys_held != 8 || n0 != 15 - 8))
		return 4;
	rc = exercise(); /* keys moving between pmguard's domains */
	if (rc)
		return 30 + rc;
	/* pmguard gives a key back when it deletes its keyed domain */
	for (i = 0; i < ND; i++)
		if (pmg_domain_key(d[i]) > 0 &&
		    pmg_backend() == PMG_BACKEND_PKU) {
			if (pmg_unprotect(pg[i], PAGE) ||
			    pmg_domain_delete(&d[i]))
				return 5;
			if (jit_take(16) != n0 + 1)
				return 6;
			break;
		}
	return 0;
}

static void run(int (*fn)(void *), const char *what)
{
	int st = tap_child(fn, NULL);

	if (!WIFEXITED(st) || WEXITSTATUS(st))
		tap_diag("child: %s %d", WIFEXITED(st) ? "exit" : "signal",
			 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", what);
}

int main(void)
{
	long k = syscall(SYS_pkey_alloc, 0, 0);

	if (k < 0)
		tap_skip_all("pkey_alloc(2) fails here (no PKU): no other "
			     "key user can exist");
	syscall(SYS_pkey_free, k);
	tap_init(3);
	tap_diag("backend (each child): %s", getenv("PMGUARD_BACKEND")
						     ? getenv("PMGUARD_BACKEND")
						     : "auto");
	run(before_some,
	    "other code takes 10 keys before pmguard: pmguard gets the other "
	    "5, its 20 domains past them virtual; windows work, strays "
	    "caught on each, never one of the other's keys, the other's key "
	    "faults for it (its handler, its si_pkey) and opens for it, also "
	    "inside pmguard's windows");
	run(before_all,
	    "other code takes every key before pmguard: every pmguard "
	    "domain virtual (page protection), windows process-wide, strays "
	    "caught (SEGV_ACCERR); a pinned domain -ENOSPC naming other "
	    "code; the other's keys untouched");
	run(after,
	    "pmguard first with PMGUARD_KEYS=8 (20 domains, evicting): "
	    "other code then gets the 7 other keys, both keep working; a "
	    "key pmguard frees (domain deleted) goes back to the kernel");
	return tap_done();
}
