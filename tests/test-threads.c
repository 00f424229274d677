// SPDX-License-Identifier: MIT
/*
 * Windows and threads: windows are thread-local on PKU; a thread created
 * inside a window and a fork child start at the domain defaults; a thread
 * that predates a domain is synced to its defaults on first access; many
 * threads writing through windows while one writes stray: every stray
 * write caught, no legitimate write faults.  On the mprotect backend the
 * checks that need thread-local windows say SKIP and why.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <sys/syscall.h>

#include "tap.h"
#include "probe.h"
#include "valgrind-probe.h"

#define PAGE 4096

static bool pku;
static struct pmg_domain *dom;
static char *pg;

static unsigned key_bits(void)
{
	return (_pmg_rdpkru() >> (2 * pmg_domain_key(dom))) & 3;
}

static void *stray_in_thread(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)probe(dom, pg + 64, PMG_WRITE);
}

/* PKU only: on the mprotect backend, skip test @name saying @why. */
static bool pku_only(const char *name, const char *why)
{
	if (!pku)
		tap_skip(name, why);
	return pku;
}

/*
 * Open a write window on dom, run @fn in a thread created while it is
 * open and return what @fn returned; the window stays open.
 */
static void *thread_in_window(void *(*fn)(void *))
{
	pthread_t t;
	void *res = NULL;

	pmg_open(dom, PMG_WRITE);
	pthread_create(&t, NULL, fn, NULL);
	pthread_join(t, &res);
	return res;
}

static void test_thread_local(void)
{
	void *res;

	if (!pku_only("window is thread-local: another thread's write faults",
		      "mprotect backend: windows are process-wide (a limit "
		      "of the fallback)"))
		return;
	res = thread_in_window(stray_in_thread);
	tap_ok((intptr_t)res == 1 && probe(dom, pg, PMG_WRITE) == 0,
	       "window is thread-local: another thread's write faults, "
	       "the holder's does not");
	pmg_close(dom, PMG_WRITE);
}

static void *report_bits(void *arg)
{
	(void)arg;
	return (void *)(uintptr_t)(key_bits() |
		(unsigned)probe(dom, pg + 128, PMG_WRITE) << 4);
}

static void test_created_in_window(void)
{
	uintptr_t r;

	if (!pku_only("thread created inside a window starts at the defaults",
		      "mprotect backend: windows are process-wide"))
		return;
	r = (uintptr_t)thread_in_window(report_bits);
	pmg_close(dom, PMG_WRITE);
	tap_ok((r & 0xf) == 2 && (r >> 4) == 1, "thread created inside a "
	       "window starts write-disabled (key bits %lu) and its stray "
	       "write faults", (unsigned long)(r & 0xf));
}

static int fork_child(void *arg)
{
	int ok = 1;

	(void)arg;
	if (pku)
		CHECK(ok, key_bits() == 2);
	CHECK(ok, probe(dom, pg + 256, PMG_WRITE) == 1);
	/* the parent's window is not the child's to close */
	CHECK(ok, pmg_close(dom, PMG_WRITE) == -EPERM);
	CHECK(ok, pmg_open(dom, PMG_WRITE) == 0);
	CHECK(ok, probe(dom, pg + 256, PMG_WRITE) == 0);
	CHECK(ok, pmg_close(dom, PMG_WRITE) == 0);
	return ok ? 0 : 1;
}

static void test_fork(void)
{
	int st, ok = 1;

	pmg_open(dom, PMG_WRITE);
	st = tap_child(fork_child, NULL);
	/* the parent's window is untouched by the child's reset */
	CHECK(ok, probe(dom, pg + 300, PMG_WRITE) == 0);
	pmg_close(dom, PMG_WRITE);
	CHECK(ok, probe(dom, pg + 300, PMG_WRITE) == 1);
	tap_ok(ok && WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork child "
	       "of a thread inside a window starts at the defaults; the "
	       "parent keeps its window");
}

struct older {
	int go[2], started[2];
	unsigned before, after;
	int rd, wr;
	struct pmg_domain *d;
	char *p;
};

static void *older_thread(void *arg)
{
	struct older *o = arg;
	char c;

	/* running (past the pthread_create reset) before the domain exists */
	if (write(o->started[1], "s", 1) != 1 || read(o->go[0], &c, 1) != 1)
		return NULL;
	if (pku)
		o->before = (_pmg_rdpkru() >> (2 * pmg_domain_key(o->d))) & 3;
	o->rd = probe(o->d, o->p, PMG_READ);
	if (pku)
		o->after = (_pmg_rdpkru() >> (2 * pmg_domain_key(o->d))) & 3;
	o->wr = probe(o->d, o->p, PMG_WRITE);
	return NULL;
}

static void test_lazy_sync(void)
{
	struct older o = { 0 };
	pthread_t t;
	int synced0, ok = 1;
	char c;

	o.p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pipe(o.go) || pipe(o.started) ||
	    pthread_create(&t, NULL, older_thread, &o) ||
	    read(o.started[0], &c, 1) != 1) {
		tap_ok(0, "lazy sync: set-up failed");
		return;
	}
	/* the thread exists; now the domain is made */
	CHECK(ok, pmg_domain_new(&o.d, "threads-late", 0) == 0);
	CHECK(ok, pmg_protect(o.d, o.p, PAGE) == 0);
	synced0 = probe_log.synced;
	CHECK(ok, write(o.go[1], "g", 1) == 1);
	pthread_join(t, NULL);
	CHECK(ok, o.rd == 0);		/* read allowed: no stray */
	CHECK(ok, o.wr == 1);		/* write still protected */
	if (pku) {
		CHECK(ok, o.before == 1);	/* Linux: AD in older threads */
		CHECK(ok, o.after == 2);	/* synced to write-disabled */
		CHECK(ok, probe_log.synced == synced0 + 1);
	}
	tap_ok(ok, "thread older than the domain sees its defaults "
	       "(%s)", pku ? "synced lazily from the fault handler"
			   : "page permissions are process-wide");
	pmg_unprotect(o.p, PAGE);
	pmg_domain_delete(&o.d);
	close(o.go[0]);
	close(o.go[1]);
	close(o.started[0]);
	close(o.started[1]);
}

/* ---- many writers in windows, one stray writer ---- */
#define WRITERS 4
#define WRITES 2000
#define STRAYS 500

static char *region;
static volatile int stray_from_writer;
static pid_t writer_tids[WRITERS];

static void mt_observer(const struct pmg_fault_info *fi, void *arg)
{
	int i;

	(void)arg;
	if (fi->action != PMG_FAULT_AUDITED)
		return;
	__atomic_add_fetch(&probe_log.strays, 1, __ATOMIC_RELAXED);
	for (i = 0; i < WRITERS; i++)
		if (fi->tid == writer_tids[i])
			__atomic_add_fetch(&stray_from_writer, 1,
					   __ATOMIC_RELAXED);
}

static void *writer(void *arg)
{
	int id = (int)(intptr_t)arg, i;
	char *mine = region + (size_t)id * PAGE;

	writer_tids[id] = (pid_t)syscall(SYS_gettid);
	for (i = 0; i < WRITES; i++) {
		pmg_open(dom, PMG_WRITE);
		mine[i % PAGE] = (char)i;
		pmg_close(dom, PMG_WRITE);
	}
	return NULL;
}

static __attribute__((noinline)) void stray_store(volatile char *p)
{
	*p = 0x7e;
}

static void test_concurrent(void)
{
	pthread_t t[WRITERS];
	int i, before;

	if (!pku_only("concurrent windowed writers and a stray writer",
		      "mprotect backend: a stray write made while another "
		      "thread holds a window is missed by design"))
		return;
	region = mmap(NULL, (WRITERS + 1) * PAGE, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	pmg_protect(dom, region, (WRITERS + 1) * PAGE);
	pmg_set_fault_observer(mt_observer, NULL);
	before = probe_log.strays;
	for (i = 0; i < WRITERS; i++)
		pthread_create(&t[i], NULL, writer, (void *)(intptr_t)i);
	for (i = 0; i < STRAYS; i++)
		stray_store(region + WRITERS * PAGE + i);
	for (i = 0; i < WRITERS; i++)
		pthread_join(t[i], NULL);
	tap_ok(probe_log.strays - before == STRAYS && !stray_from_writer,
	       "%d windowed writes in %d threads and %d stray writes: %d "
	       "caught, %d false positives", WRITERS * WRITES, WRITERS,
	       STRAYS, probe_log.strays - before, stray_from_writer);
	pmg_set_fault_observer(probe_observer, &probe_log);
	pmg_unprotect(region, (WRITERS + 1) * PAGE);
	munmap(region, (WRITERS + 1) * PAGE);
}

static void *echo(void *arg)
{
	return (char *)arg + 1;
}

int main(void)
{
	pthread_t t;
	void *res;

	if (pmg_under_valgrind())
		tap_skip_all(PMG_VALGRIND_WHY);
	tap_init(7);
	pg = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pmg_domain_new(&dom, "threads", 0) || pmg_protect(dom, pg, PAGE)) {
		tap_diag("set-up: %s", pmg_errormsg());
		return 1;
	}
	pku = pmg_backend() == PMG_BACKEND_PKU;
	tap_diag("backend: %s", pmg_backend_name(pmg_backend()));
	probe_begin();
	pthread_create(&t, NULL, echo, pg);
	pthread_join(t, &res);
	tap_ok(res == pg + 1, "pthread_create wrapper passes the argument "
	       "and the return value through");
	test_thread_local();
	test_created_in_window();
	test_fork();
	test_lazy_sync();
	test_concurrent();
	tap_ok(probe(dom, pg, PMG_WRITE) == 1 && probe(dom, pg, PMG_READ) == 0,
	       "main thread still at the defaults after all of it");
	probe_end();
	return tap_done();
}
