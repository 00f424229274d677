/* SPDX-License-Identifier: MIT */
/*
 * Fault probes for pmguard's self-tests (V8's pks_test fault hook),
 * shared by `pmguard selftest` (tools/lab/selftest.c) and the tests in tests/
 * (which build with -Itools; the CLI never reads tests/).
 *
 * probe_begin() puts the process in audit mode with an observer: every
 * stray access is recorded, allowed once, and protection re-armed at once,
 * so a probe leaves the rights exactly as they were.  probe() makes one
 * access and says whether it faulted, after checking that the fault named
 * the right address, access kind, key (si_pkey on PKU) and si_code.
 */
#ifndef PMG_PROBE_H
#define PMG_PROBE_H

#include <stdio.h>

#include "check.h"
#include "pmguard.h"

struct probe_log {
	volatile int strays;		/* stray faults seen */
	volatile int synced;		/* stale-rights syncs seen */
	volatile int granted;		/* granted by a domain callback */
	void *volatile addr;
	volatile int access;
	volatile int key;
	volatile unsigned pkru;
	volatile int si_code;
	struct pmg_domain *volatile domain;
};

static struct probe_log probe_log;

static void probe_observer(const struct pmg_fault_info *fi, void *arg)
{
	struct probe_log *l = arg;

	/* atomics: several threads' faults may be observed at once (the
	 * last one's details win) */
	if (fi->action == PMG_FAULT_SYNCED) {
		__atomic_add_fetch(&l->synced, 1, __ATOMIC_RELAXED);
		return;
	}
	if (fi->action == PMG_FAULT_GRANTED) {
		__atomic_add_fetch(&l->granted, 1, __ATOMIC_RELAXED);
		return;
	}
	__atomic_store_n(&l->addr, fi->addr, __ATOMIC_RELAXED);
	__atomic_store_n(&l->access, fi->access, __ATOMIC_RELAXED);
	__atomic_store_n(&l->key, fi->key, __ATOMIC_RELAXED);
	__atomic_store_n(&l->pkru, fi->pkru, __ATOMIC_RELAXED);
	__atomic_store_n(&l->si_code, fi->si_code, __ATOMIC_RELAXED);
	__atomic_store_n(&l->domain, fi->domain, __ATOMIC_RELAXED);
	__atomic_add_fetch(&l->strays, 1, __ATOMIC_SEQ_CST);
}

static inline int probe_begin(void)
{
	pmg_set_report_fd(-1);
	pmg_set_fault_observer(probe_observer, &probe_log);
	return pmg_set_fault_mode(PMG_FAULT_AUDIT);
}

static inline void probe_end(void)
{
	pmg_set_fault_observer(NULL, NULL);
	pmg_set_fault_mode(PMG_FAULT_RELAXED);
	pmg_set_report_fd(2);
}

/* The si_code a stray access must arrive with on this backend. */
static inline int probe_si_code(void)
{
	return pmg_backend() == PMG_BACKEND_PKU ? 4 /* SEGV_PKUERR */
						: 2 /* SEGV_ACCERR */;
}

/* ... to @d: a virtual domain (PKU, no key now) is page protection. */
static inline int probe_si_code_for(const struct pmg_domain *d)
{
	return pmg_backend() == PMG_BACKEND_PKU && pmg_domain_key(d) < 0
		       ? 2 /* SEGV_ACCERR */
		       : probe_si_code();
}

/*
 * One access of kind @acc to @p, which @d protects.  Returns 1 if it
 * faulted with the right address, kind and key, 0 if it did not fault, and
 * -1 if it faulted with the wrong details (printed as a diagnostic).
 */
static inline int probe(struct pmg_domain *d, volatile char *p, int acc)
{
	int before = probe_log.strays;

	if (acc == PMG_WRITE)
		*p = (char)0x5a;
	else
		(void)*p;
	__asm__ volatile("" ::: "memory");
	if (probe_log.strays == before)
		return 0;
	if (probe_log.strays != before + 1 || probe_log.addr != (void *)p ||
	    probe_log.access != acc || probe_log.key != pmg_domain_key(d) ||
	    probe_log.si_code != probe_si_code_for(d) ||
	    probe_log.domain != d) {
		printf("# probe: fault details wrong: %d faults, addr %p "
		       "(want %p), access %d (want %d), key %d (want %d), "
		       "si_code %d (want %d), domain %s\n",
		       probe_log.strays - before, probe_log.addr, (void *)p,
		       probe_log.access, acc, probe_log.key, pmg_domain_key(d),
		       probe_log.si_code, probe_si_code_for(d),
		       probe_log.domain == d ? "right" : "WRONG");
		return -1;
	}
	return 1;
}

#endif /* PMG_PROBE_H */
