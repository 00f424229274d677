// SPDX-License-Identifier: MIT
/*
 * The single step of audit and contain mode left unfinished.  A stray write
 * in audit or contain mode runs once with access (mprotect: its page
 * read-write for the process) between a SIGSEGV and the SIGTRAP of a single
 * step.  Whatever happens in between, protection must come back and the
 * program must live on:
 *  - the program blocks SIGTRAP (a thread that blocks every signal but
 *    the fault signals): the step's trap must still reach pmguard;
 *  - the stepped instruction faults again on memory that is not
 *    pmguard's (a store straddling into the program's own PROT_NONE
 *    page) and the program's handler leaves by siglongjmp(): the pages
 *    the step opened must not stay open;
 *  - the thread is cancelled (asynchronous cancellation) during the
 *    step: the same;
 *  - the stepped store hits a page beyond the end of a shrunk file
 *    (SIGBUS, not pmguard's signal) and the program's handler leaves by
 *    siglongjmp() (pmem programs catch SIGBUS for bad blocks): the page
 *    must be protected when the file grows again;
 *  - another thread forks during the step: the child's pages must be
 *    protected, although the stepping thread does not exist there, and
 *    the record that thread held must be whole again (a stale "active"
 *    made the child's first contained write abort as "a second write
 *    fault inside a contained step").
 * And 48 threads stepping at once (the step records are a process-wide
 * pool: 8 static, then chunks of 16).
 * Every check runs in a forked child; "protected" is proved by one more
 * stray write that the observer must see.  Both backends (PKU: rights
 * are per thread, a cancelled thread's cannot stay open).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <sys/wait.h>
#include <stdint.h>

#include "tap.h"
#include "pmguard.h"
#include "valgrind-probe.h"

#define PAGE 4096

static char *page; /* protected, write-disabled */
static struct pmg_domain *dom;
static volatile long n_obs; /* stray accesses the observer saw */
static volatile void *last_addr;

static void observer(const struct pmg_fault_info *fi, void *arg)
{
	(void)arg;
	if (fi->action == PMG_FAULT_SYNCED)
		return;
	__atomic_add_fetch(&n_obs, 1, __ATOMIC_RELAXED);
	last_addr = fi->addr;
}

/* @page: protected; the page after it: the program's own, read-write. */
static int setup(int mode)
{
	page = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		return 3;
	memset(page, 0x11, 2 * PAGE);
	if (pmg_domain_new(&dom, "steps", 0) || pmg_protect(dom, page, PAGE))
		return 4;
	pmg_set_report_fd(-1);
	pmg_set_fault_observer(observer, NULL);
	return pmg_set_fault_mode(mode) ? 5 : 0;
}

/* Is the page protected?  One more stray write must be seen. */
static int armed(int off)
{
	long seen = __atomic_load_n(&n_obs, __ATOMIC_RELAXED);

	((volatile char *)page)[off] = 0x22;
	return __atomic_load_n(&n_obs, __ATOMIC_RELAXED) == seen + 1 &&
	       last_addr == page + off;
}

/* ---- the program blocks SIGTRAP ---- */
static int trapblock_child(void *arg)
{
	int rc = setup((int)(intptr_t)arg);
	sigset_t m;

	if (rc)
		return rc;
	/* every signal but the fault signals, as a worker thread might */
	sigfillset(&m);
	sigdelset(&m, SIGSEGV);
	sigdelset(&m, SIGBUS);
	sigdelset(&m, SIGILL);
	sigdelset(&m, SIGFPE);
	pthread_sigmask(SIG_SETMASK, &m, NULL);
	((volatile char *)page)[100] = 0x33;
	if (n_obs != 1)
		return 20;
	if (!armed(200))
		return 21;
	pthread_sigmask(SIG_SETMASK, NULL, &m);
	if (sigismember(&m, SIGTRAP) != 1 || sigismember(&m, SIGUSR1) != 1)
		return 22; /* the program's mask, whole again */
	return 0;
}

/* ---- the stepped instruction faults again; siglongjmp ---- */
static sigjmp_buf jb;
static volatile int n_prog, fix_and_return, catching;

static void prog_segv(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	if (!catching) {
		signal(SIGSEGV, SIG_DFL); /* a real crash: the fault again */
		return;
	}
	n_prog++;
	if ((char *)si->si_addr < page + PAGE ||
	    (char *)si->si_addr >= page + 2 * PAGE)
		_exit(40); /* not the program's page: pmguard's fault leaked */
	if (fix_and_return) {
		mprotect(page + PAGE, PAGE, PROT_READ | PROT_WRITE);
		return;
	}
	siglongjmp(jb, 1);
}

/*
 * An 8-byte store addressed by an index register without a base: contain
 * grants and steps it (rather than redirecting a base register to a
 * scratch copy), so that in both modes the stepped instruction itself
 * faults on the program's page.
 */
static void straddle_store(char *a)
{
	uint64_t v = 0x1122334455667788ULL;

	__asm__ volatile("movq %1, 0(,%0,1)" : : "r"(a), "r"(v) : "memory");
}

static int longjmp_child(void *arg)
{
	int rc = setup((int)(intptr_t)arg);

	if (rc)
		return rc;
	catching = 1;
	mprotect(page + PAGE, PAGE, PROT_NONE);
	if (!sigsetjmp(jb, 1))
		straddle_store(page + PAGE - 4);
	if (n_prog != 1)
		return 30;
	/* audit: the step began (contain reports at the step's end) */
	if (pmg_get_fault_mode() == PMG_FAULT_AUDIT && n_obs != 1)
		return 31;
	if (!armed(300))
		return 32; /* the step's page left open */
	if (!armed(301))
		return 33;
	/* and a handler that fixes its page and returns: the store runs */
	fix_and_return = 1;
	mprotect(page + PAGE, PAGE, PROT_NONE);
	n_obs = 0;
	straddle_store(page + PAGE - 4);
	if (n_prog != 2 || n_obs < 1)
		return 34;
	if (pmg_get_fault_mode() == PMG_FAULT_AUDIT) {
		uint64_t v; /* unaligned: read it as bytes (UBSan) */

		memcpy(&v, page + PAGE - 4, sizeof(v));
		if (v != 0x1122334455667788ULL)
			return 35;
	}
	if (!armed(302))
		return 36;
	return 0;
}

/* ---- asynchronous cancellation during the step ---- */
static volatile int going, stop;

static void *stray_loop(void *arg)
{
	(void)arg;
	pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL);
	going = 1;
	while (!stop)
		((volatile char *)page)[400] = 0x44;
	return NULL;
}

#define CANCELS 40

static int cancel_child(void *arg)
{
	int rc = setup((int)(intptr_t)arg), i;
	pthread_t t;

	if (rc)
		return rc;
	for (i = 0; i < CANCELS; i++) {
		going = 0;
		if (pthread_create(&t, NULL, stray_loop, NULL))
			return 50;
		while (!going)
			;
		usleep(200 + (unsigned)(i * 37 % 400));
		pthread_cancel(t);
		pthread_join(t, NULL);
		if (!armed(500 + i))
			return 51;
	}
	return 0;
}

/* ---- fork while another thread steps ---- */
#define FORKS 60

static int fork_child(void *arg)
{
	int rc = setup((int)(intptr_t)arg), i, st, bad = 0;
	pthread_t t;

	if (rc)
		return rc;
	going = 0;
	stop = 0;
	if (pthread_create(&t, NULL, stray_loop, NULL))
		return 60;
	while (!going)
		;
	for (i = 0; i < FORKS; i++) {
		pid_t pid = fork();

		if (pid < 0)
			return 61;
		if (pid == 0)
			_exit(armed(600 + i) ? 0 : 1);
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			bad++;
	}
	stop = 1;
	pthread_join(t, NULL);
	if (bad) {
		fprintf(stderr, "# %d of %d children: page left open\n", bad,
			FORKS);
		return 62;
	}
	return 0;
}

/* ---- on the alternate signal stack ---- */
/*
 * pmguard's handler runs there when the thread has one (SA_ONSTACK).
 * pmguard(7) states what it needs: glibc's SIGSTKSZ (sysconf, from the
 * CPU's signal frame size) is enough; below it, a guard page.  The
 * high-water mark is printed (kernel frame included).
 */
static int altstack_child(void *arg)
{
	long sz = sysconf(_SC_SIGSTKSZ), i;
	int rc = setup((int)(intptr_t)arg);
	stack_t ss;
	char *m;

	if (rc)
		return rc;
	if (sz < 8192)
		sz = 8192;
	sz = (sz + PAGE - 1) & ~(long)(PAGE - 1);
	m = mmap(NULL, (size_t)sz + PAGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED || mprotect(m, PAGE, PROT_NONE))
		return 90;
	memset(m + PAGE, 0xa5, (size_t)sz);
	ss.ss_sp = m + PAGE;
	ss.ss_size = (size_t)sz;
	ss.ss_flags = 0;
	if (sigaltstack(&ss, NULL))
		return 91;
	((volatile char *)page)[700] = 0x66; /* first time: backtrace */
	if (n_obs != 1 || !armed(701))
		return 92;
	for (i = 0; i < sz && (uint8_t)m[PAGE + i] == 0xa5; i++)
		;
	printf("# alternate stack %ld bytes (SIGSTKSZ %ld), %ld used\n", sz,
	       sysconf(_SC_SIGSTKSZ), sz - i);
	return 0;
}

/*
 * A fixed 8 KiB alternate stack (Rust's std threads'), guard page below:
 * too small for contain (pmguard(7)).  Contain falls back to strict with
 * the reason: SIGABRT and a report, not a SIGSEGV inside the handler.
 * Audit fits (reports drop their backtrace when little is left).
 */
static int __attribute__((unused)) small_altstack_child(void *arg)
{
	int rc = setup((int)(intptr_t)arg), fd[2];
	stack_t ss;
	char *m, buf[2048];
	ssize_t n;

	if (rc)
		return rc;
	m = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED || mprotect(m, PAGE, PROT_NONE) || pipe(fd))
		return 90;
	ss.ss_sp = m + PAGE;
	ss.ss_size = 2 * PAGE;
	ss.ss_flags = 0;
	if (sigaltstack(&ss, NULL))
		return 91;
	pmg_set_report_fd(fd[1]);
	if (fork() == 0) {
		((volatile char *)page)[800] = 0x77;
		/* audit: handled, the page protected again */
		_exit(pmg_get_fault_mode() == PMG_FAULT_AUDIT && armed(801)
			      ? 0
			      : 1);
	}
	close(fd[1]);
	wait(&rc);
	n = read(fd[0], buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = 0;
	if (pmg_get_fault_mode() == PMG_FAULT_AUDIT) {
		if (!WIFEXITED(rc) || WEXITSTATUS(rc) || !strstr(buf, "audit"))
			return 94;
		return 0;
	}
	if (!WIFSIGNALED(rc) || WTERMSIG(rc) != SIGABRT) {
		printf("# child: %s %d\n", WIFEXITED(rc) ? "exit" : "signal",
		       WIFEXITED(rc) ? WEXITSTATUS(rc) : WTERMSIG(rc));
		return 92;
	}
	if (!strstr(buf, "signal stack") || page[800] == 0x77)
		return 93;
	return 0;
}

/* ---- many threads in steps at once: the record pool grows ---- */
#define MANY 48 /* > 8 static records + 2 chunks of 16 */
#define MANY_WRITES 200
static char *many_pages;
static pthread_barrier_t many_bar;

static void *many_thread(void *arg)
{
	volatile char *p = many_pages + PAGE * (uintptr_t)arg;
	int i;

	pthread_barrier_wait(&many_bar);
	for (i = 0; i < MANY_WRITES; i++)
		p[i % PAGE] = (char)i;
	return NULL;
}

static int many_child(void *arg)
{
	int rc = setup((int)(intptr_t)arg), i;
	pthread_t t[MANY];

	if (rc)
		return rc;
	many_pages = mmap(NULL, PAGE * MANY, PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (many_pages == MAP_FAILED ||
	    pmg_protect(dom, many_pages, PAGE * MANY) ||
	    pthread_barrier_init(&many_bar, NULL, MANY))
		return 80;
	n_obs = 0;
	for (i = 0; i < MANY; i++)
		if (pthread_create(&t[i], NULL, many_thread,
				   (void *)(uintptr_t)i))
			return 81;
	for (i = 0; i < MANY; i++)
		pthread_join(t[i], NULL);
	if (n_obs != MANY * MANY_WRITES) {
		fprintf(stderr, "# %ld of %d stray writes seen\n", n_obs,
			MANY * MANY_WRITES);
		return 82;
	}
	for (i = 0; i < MANY; i++) {
		page = many_pages + PAGE * i;
		if (!armed(PAGE - 1))
			return 83;
	}
	return 0;
}

/* ---- the stepped store hits a truncated file: SIGBUS ---- */
static volatile int n_bus;

static void prog_bus(int sig)
{
	(void)sig;
	if (!catching) {
		signal(SIGBUS, SIG_DFL); /* a real crash: the fault again */
		return;
	}
	n_bus++;
	siglongjmp(jb, 1);
}

static int sigbus_child(void *arg)
{
	char path[] = "/tmp/pmg-test-steps-XXXXXX";
	char *f;
	int fd, rc;

	rc = setup((int)(intptr_t)arg);
	if (rc)
		return rc;
	fd = mkstemp(path);
	if (fd < 0)
		return 70;
	unlink(path);
	if (ftruncate(fd, 2 * PAGE))
		return 71;
	f = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (f == MAP_FAILED || pmg_protect(dom, f, 2 * PAGE))
		return 72;
	catching = 1;
	/* the file shrinks under the mapping: the second page is gone */
	if (ftruncate(fd, PAGE))
		return 73;
	n_obs = 0;
	if (!sigsetjmp(jb, 1))
		((volatile char *)f)[PAGE + 8] = 0x55;
	if (n_bus != 1)
		return 74;
	if (pmg_get_fault_mode() == PMG_FAULT_AUDIT && n_obs != 1)
		return 75; /* the step did not begin: nothing tested */
	/* the file grows back: the page must be protected */
	if (ftruncate(fd, 2 * PAGE))
		return 76;
	page = f + PAGE;
	if (!armed(16) || !armed(24))
		return 77;
	if (f[PAGE + 8] != 0)
		return 78;
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
	struct sigaction sa;
	unsigned i;

	if (pmg_under_valgrind())
		tap_skip_all(PMG_VALGRIND_WHY);
#ifdef __SANITIZE_THREAD__
	/* where a signal lands is this test's subject; TSan holds
	 * asynchronous signals back to its own safe points */
	tap_skip_all("a TSan build: TSan delivers asynchronous signals at its "
		     "own safe points (the plain and ASan suites run this)");
#endif
	tap_init(15);
	/* the program's own SIGSEGV and SIGBUS handlers, installed before
	 * pmguard's: pmguard chains to them */
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = prog_segv;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGSEGV, &sa, NULL);
	sa.sa_handler = prog_bus;
	sa.sa_flags = 0;
	sigaction(SIGBUS, &sa, NULL);
	if (pmg_init()) {
		tap_diag("pmg_init: %s", pmg_errormsg());
		return 1;
	}
	tap_diag("backend: %s", pmg_backend_name(pmg_backend()));
	for (i = 0; i < 2; i++) {
		run(trapblock_child, modes[i],
		    "a stray write by a thread that blocks SIGTRAP: survives, "
		    "protection back, the program's mask kept");
		run(longjmp_child, modes[i],
		    "the stepped store faults again, the program's handler "
		    "leaves by siglongjmp(): protection back");
		run(cancel_child, modes[i],
		    "a thread cancelled (asynchronous) in a loop of stray "
		    "writes: protection back");
		run(fork_child, modes[i],
		    "fork() while another thread steps a stray write: the "
		    "child's page protected");
		run(altstack_child, modes[i],
		    "on an alternate signal stack of glibc's SIGSTKSZ with a "
		    "guard page below: the stray write is handled, protection "
		    "back");
		run(many_child, modes[i],
		    "48 threads in steps at once (the record pool grows past "
		    "its static records and a chunk): every stray write seen, "
		    "every page protected after");
	}
#ifdef __SANITIZE_ADDRESS__
	/* the stack thresholds (fault.c) are measured on plain builds;
	 * ASan's instrumented frames are several times larger */
	tap_skip("contain on a fixed 8 KiB alternate stack",
		 "an ASan build: its handler frames outgrow 8 KiB");
	tap_skip("audit on a fixed 8 KiB alternate stack",
		 "an ASan build: its handler frames outgrow 8 KiB");
#else
	run(small_altstack_child, PMG_FAULT_CONTAIN,
	    "contain on a fixed 8 KiB alternate stack (guard page below): "
	    "strict with the reason, not a crash inside the handler");
	run(small_altstack_child, PMG_FAULT_AUDIT,
	    "audit on a fixed 8 KiB alternate stack (guard page below): "
	    "handled and reported (the backtrace dropped if little is "
	    "left), protection back");
#endif
	/* audit only: contain reads the written bytes itself, in its
	 * handler, and takes the SIGBUS there (listed for contain mode) */
	run(sigbus_child, PMG_FAULT_AUDIT,
	    "the stepped store hits a truncated file (SIGBUS), the "
	    "program's handler leaves by siglongjmp(): protection back when "
	    "the file grows again");
	return tap_done();
}
