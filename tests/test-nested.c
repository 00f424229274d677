// SPDX-License-Identifier: MIT
/*
 * Signals nested into pmguard's own fault handling.
 *
 * Audit and contain mode let a stray write run once with access (or
 * against a scratch copy) by single-stepping it: a SIGSEGV, then a
 * SIGTRAP, with per-thread state in between.  An asynchronous signal
 * whose handler touches protected memory may arrive at any moment:
 * during the SIGSEGV handler, between its return and the SIGTRAP, during
 * the SIGTRAP handler.  Whatever the moment, the program must live on,
 * with the handler's accesses judged like any other: a read of a
 * write-disabled domain is legal, a write is a stray write (audited, or
 * contained).  A domain callback (run inside the SIGSEGV handler) must
 * be able to read the faulting address of a write-disabled domain.
 * Every check runs in a forked child: the bug kills the process.
 * Both backends.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>

#include "tap.h"
#include "pmguard.h"
#include "valgrind-probe.h"

#define PAGE 4096
#define SIG SIGUSR1

static char *page; /* protected, write-disabled, shared */
static struct pmg_domain *dom;

static volatile int n_main, n_handler; /* faults seen by the observer */
static volatile int n_bad; /* faults with wrong details */
static volatile int n_sig, n_badread; /* handler runs, wrong reads */
static volatile int raise_once; /* observer: raise SIG once */

static void observer(const struct pmg_fault_info *fi, void *arg)
{
	char *a = fi->addr;

	(void)arg;
	/* PKU: a handler starts with every key access-disabled; its first
	 * access to the domain brings it to the defaults */
	if (fi->action == PMG_FAULT_SYNCED)
		return;
	if (fi->action != PMG_FAULT_AUDITED &&
	    fi->action != PMG_FAULT_CONTAINED) {
		n_bad++;
		return;
	}
	/* the mode in force, contain too (not audit, as it decides) */
	if (fi->mode != pmg_get_fault_mode())
		n_bad++;
	if (a >= page + 2048 && a < page + 3072)
		n_main++;
	else if (a >= page + 3072 && a < page + PAGE)
		n_handler++;
	else
		n_bad++;
	if (raise_once) {
		/* a signal arriving in the middle of pmguard's handler */
		raise_once = 0;
		pthread_kill(pthread_self(), SIG);
	}
}

/* The program's handler: a legal read, then a stray write. */
static void on_sig(int sig)
{
	int n = n_sig;

	(void)sig;
	if (page[n % 2048] != (char)(n % 2048 & 0x7f))
		n_badread++;
	((volatile char *)page)[3072 + n % 1024] = 0x33;
	n_sig = n + 1;
}

static int setup(int mode)
{
	struct sigaction sa;
	int i;

	page = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		return 3;
	for (i = 0; i < PAGE; i++)
		page[i] = (char)(i % 2048 & 0x7f);
	if (pmg_domain_new(&dom, "nested", 0) || pmg_protect(dom, page, PAGE))
		return 4;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sig;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIG, &sa, NULL);
	pmg_set_report_fd(-1);
	pmg_set_fault_observer(observer, NULL);
	return pmg_set_fault_mode(mode) ? 5 : 0;
}

/* Are the stray writes where the mode says (audit: landed; contain:
 * undone) and is protection armed again? */
static int check_after(int mode, int writes)
{
	int i, landed = 0, seen = n_handler;

	for (i = 2048; i < PAGE; i++)
		if (page[i] != (char)(i % 2048 & 0x7f))
			landed++;
	if (mode == PMG_FAULT_CONTAIN && landed)
		return 10;
	if (mode == PMG_FAULT_AUDIT && !landed)
		return 11;
	(void)writes;
	/* armed: one more stray write faults */
	((volatile char *)page)[3072] = 0x44;
	if (n_handler != seen + 1)
		return 12;
	return 0;
}

/* The observer (inside the SIGSEGV handler) raises a signal whose
 * handler reads and writes protected memory. */
static int raise_child(void *arg)
{
	int mode = (int)(intptr_t)arg, rc = setup(mode);

	if (rc)
		return rc;
	raise_once = 1;
	((volatile char *)page)[2100] = 0x22;
	if (n_sig != 1 || n_badread || n_bad)
		return 20;
	if (n_main != 1 || n_handler != 1)
		return 21;
	return check_after(mode, 2);
}

/* Another thread sends the signal, one per stray write, while this one makes
 * stray writes in a loop. */
static volatile int stop;

static void *sender(void *arg)
{
	pthread_t t = *(pthread_t *)arg;

	while (!stop) {
		int seen = n_main;

		pthread_kill(t, SIG);
		/* the next one only after the writer's next stray write: a
		 * sender faster than a contained write (a fault and a trap,
		 * slow under TCG) kept the writer in signal handlers for good
		 * (600 s in the guest); at most one signal per write now */
		while (!stop && n_main == seen)
			sched_yield();
	}
	return NULL;
}

#define NWRITES 3000

static int storm_child(void *arg)
{
	int mode = (int)(intptr_t)arg, rc = setup(mode), i;
	pthread_t self = pthread_self(), th;

	if (rc)
		return rc;
	if (pthread_create(&th, NULL, sender, &self))
		return 6;
	for (i = 0; i < NWRITES; i++)
		((volatile char *)page)[2048 + i % 1024] = 0x22;
	stop = 1;
	pthread_join(th, NULL);
	printf("# %d stray writes, %d signals handled, %d + %d faults\n",
	       NWRITES, n_sig, n_main, n_handler);
	if (n_badread || n_bad)
		return 20;
	if (n_main != NWRITES || n_handler != n_sig)
		return 21;
	return check_after(mode, NWRITES + n_sig);
}

/* ---- N2b: a domain callback reads the faulting address ---- */
static volatile int cb_calls, cb_val;

static bool read_cb(const struct pmg_fault_info *fi, void *arg)
{
	(void)arg;
	cb_calls++;
	cb_val = *(volatile char *)fi->addr; /* legal: write-disabled */
	return false;
}

static int callback_child(void *arg)
{
	int rc = setup(PMG_FAULT_AUDIT);

	(void)arg;
	if (rc)
		return rc;
	if (pmg_domain_set_callback(dom, read_cb, NULL))
		return 7;
	((volatile char *)page)[2049] = 0x22;
	if (cb_calls != 1 || cb_val != 1 || n_main != 1 || n_bad)
		return 20;
	return 0;
}

static const char *mode_name(int mode)
{
	return mode == PMG_FAULT_AUDIT ? "audit" : "contain";
}

static void run(int (*fn)(void *), int mode, const char *what)
{
	tap_child_mode(fn, mode, mode_name(mode), what);
}

int main(void)
{
	static const int modes[] = { PMG_FAULT_AUDIT, PMG_FAULT_CONTAIN };
	unsigned i;

	if (pmg_under_valgrind())
		tap_skip_all(PMG_VALGRIND_WHY);
#ifdef __SANITIZE_THREAD__
	/* where a signal lands is this test's subject; TSan holds
	 * asynchronous signals back to its own safe points */
	tap_skip_all("a TSan build: TSan delivers asynchronous signals at its "
		     "own safe points (the plain and ASan suites run this)");
#endif
	tap_init(5);
	if (pmg_init()) {
		tap_diag("pmg_init: %s", pmg_errormsg());
		return 1;
	}
	tap_diag("backend: %s", pmg_backend_name(pmg_backend()));
	for (i = 0; i < 2; i++) {
		run(raise_child, modes[i],
		    "a signal raised inside the fault "
		    "handler, whose handler reads and writes protected memory: "
		    "survives, the read is legal, the write is a stray write");
		run(storm_child, modes[i],
		    "signals from another thread, one per stray write, "
		    "during a loop of stray writes, handlers reading and "
		    "writing protected memory: survives, every write judged");
	}
	run(callback_child, PMG_FAULT_AUDIT,
	    "a domain callback reads the "
	    "faulting address of a write-disabled domain");
	return tap_done();
}
