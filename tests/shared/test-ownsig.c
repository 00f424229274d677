// SPDX-License-Identifier: MIT
/*
 * The program installs its own SIGSEGV, SIGBUS and SIGTRAP handlers after
 * pmg_init() (sigaction(), signal(), sysv_signal(), sigset(),
 * sigignore(), siginterrupt(): interposed by libpmguard.so, src/sigown.c).
 * pmguard's handlers stay in the kernel (checked with the raw
 * rt_sigaction system call); the program's action is recorded and gets
 * every signal that is not pmguard's, as the kernel would deliver it:
 *  - a stray write in strict mode still aborts with pmguard's report (for
 *    a handler set with sigaction() and with signal());
 *  - a correct program's lazy write windows (mprotect backend) run, the
 *    program's handler never called;
 *  - a null dereference and the program's own PROT_NONE page reach its
 *    handler with the CPU's si_addr and si_code, its sa_mask in force,
 *    and siglongjmp() out of it works; a contained stray write between
 *    them does not reach it;
 *  - SA_RESETHAND: once, then the default action (the recorded one reads
 *    SIG_DFL), pmguard still handling stray writes meanwhile;
 *  - sigaction(sig, NULL, &old) and the old-action out-parameter return
 *    what the program set, or what was there before pmguard (SIG_DFL);
 *  - a shared library linked against libc alone binds signal@GLIBC_2.2.5
 *    (looked up here with dlvsym()): interposed too;
 *  - SIG_IGN on SIGTRAP and a contained stray write: contained, the
 *    program goes on;
 *  - the program's SIGTRAP handler never sees pmguard's single steps
 *    (audit, contain) and does see its own raise(SIGTRAP) and int3;
 *  - threads installing SIGBUS handlers while it is raised, a handler
 *    that calls sigaction() itself, forks: no deadlock, no signal lost;
 *  - signal()'s kin for SIGBUS (sysv_signal() one-shot, sigset(),
 *    sigignore(), siginterrupt()), and the program's SA_RESTART deciding
 *    whether a sent SIGBUS interrupts a blocking read() (EINTR).
 * Each case runs in a forked child.  Linked with the shared library (the
 * interposers); runs on both backends (mprotect here, PKU in the guest).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pmguard.h>

#include "capture.h"
#include "tap.h"

/* the old calls a program may still make: what is tested here */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define PAGE 4096
#ifndef CHECK
#define CHECK(ok, cond)                                              \
	do {                                                         \
		if (!(cond)) {                                       \
			tap_diag("%s:%d: %s", __FILE__, __LINE__, #cond); \
			(ok) = 0;                                    \
		}                                                    \
	} while (0)
#endif

/* What the program's handlers saw, in a page shared with the children. */
struct seen {
	int segv, trap, bus;
	int code[8];
	void *addr[8];
	int masked_usr1, masked_self;
	int after; /* the child got past a point */
};

static struct seen *sh;
static sigjmp_buf jb;

/* The kernel's own idea of the handler, past every libc interposer. */
static void *kernel_handler(int sig)
{
	struct {
		void *handler;
		unsigned long flags;
		void *restorer;
		uint64_t mask;
	} k;

	memset(&k, 0, sizeof(k));
	if (syscall(SYS_rt_sigaction, sig, NULL, &k, sizeof(k.mask)))
		return (void *)-1;
	return k.handler;
}

static int blocked(int sig)
{
	sigset_t m;

	pthread_sigmask(SIG_SETMASK, NULL, &m);
	return sigismember(&m, sig) == 1;
}

static void note(int *n, const siginfo_t *si)
{
	int i = sh->segv + sh->trap + sh->bus;

	if (i < 8 && si) {
		sh->code[i] = si->si_code;
		sh->addr[i] = si->si_addr;
	}
	(*n)++;
}

/* leaves by siglongjmp() */
static void segv_jump(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	sh->masked_usr1 = blocked(SIGUSR1);
	sh->masked_self = blocked(SIGSEGV);
	note(&sh->segv, si);
	siglongjmp(jb, 1);
}

/* a program that exits quietly on any SIGSEGV (faulthandler, a crash
 * reporter): it must never see pmguard's */
static void segv_exit(int sig)
{
	(void)sig;
	sh->segv++;
	_exit(9);
}

static void trap_count(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	note(&sh->trap, si);
}

static void bus_count(int sig)
{
	(void)sig;
	sh->bus++;
}

static void stray_store(volatile char *p, char v)
{
	*p = v;
}

/* the byte as memory holds it (not the value the compiler just stored) */
static char at(const volatile char *p)
{
	return *p;
}

/* One page of a fresh domain, shared with the parent, 0x33 throughout. */
static char *protected_page(struct pmg_domain **d, const char *name)
{
	char *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	memset(p, 0x33, PAGE);
	if (pmg_domain_new(d, name, 0) || pmg_protect(*d, p, PAGE))
		return NULL;
	return p;
}

static void reset_seen(void)
{
	memset(sh, 0, sizeof(*sh));
}

/* Run @fn(@arg) in a child: did it exit 0?  If not, what it died of and
 * what the handlers saw, as a diagnostic. */
static int child_ok(int (*fn)(void *), void *arg)
{
	int st = tap_child(fn, arg);
	int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;

	if (!ok)
		tap_diag("child: status %#x; handler calls: SIGSEGV %d, "
			 "SIGTRAP %d, SIGBUS %d",
			 st, sh->segv, sh->trap, sh->bus);
	return ok;
}

/* ---- strict: pmguard's report and abort, not the program's handler ---- */
struct strict_arg {
	char *page;
	int fd;
	int use_signal;
};

static int strict_child(void *argp)
{
	struct strict_arg *a = argp;
	struct sigaction sa;

	if (a->use_signal) {
		if (signal(SIGSEGV, segv_exit) == SIG_ERR)
			return 3;
	} else {
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = segv_exit;
		if (sigaction(SIGSEGV, &sa, NULL))
			return 3;
	}
	pmg_set_report_fd(a->fd);
	pmg_set_fault_mode(PMG_FAULT_STRICT);
	stray_store(a->page + 100, 0x44);
	return 4;
}

static void test_strict(int use_signal)
{
	struct pmg_domain *d = NULL;
	struct strict_arg a = { protected_page(&d, "ownsig-strict"), tmpfd(),
				use_signal };
	char buf[8192];
	int st, ok = 1;

	reset_seen();
	if (!a.page) {
		tap_ok(0, "set-up: %s", pmg_errormsg());
		return;
	}
	st = tap_child(strict_child, &a);
	slurp(a.fd, buf, sizeof(buf));
	CHECK(ok, WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
	CHECK(ok, strstr(buf, "strict (aborting)") != NULL);
	CHECK(ok, sh->segv == 0);
	CHECK(ok, a.page[100] == 0x33);
	if (!ok)
		tap_diag("status %#x, handler calls %d, report: %.200s", st,
			 sh->segv, buf);
	tap_ok(ok, "strict, the program's SIGSEGV handler set after pmg_init "
	       "with %s: the stray write aborts with pmguard's report, the "
	       "handler never called, the byte unchanged",
	       use_signal ? "signal()" : "sigaction()");
	close(a.fd);
	pmg_unprotect(a.page, PAGE);
	pmg_domain_delete(&d);
	munmap(a.page, PAGE);
}

/* ---- a correct program's write windows ---- */
static int window_child(void *arg)
{
	struct pmg_domain *d = NULL;
	enum { N = 8 };
	char *p = mmap(NULL, N * PAGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int i, round;

	(void)arg;
	if (p == MAP_FAILED || pmg_domain_new(&d, "ownsig-win", 0) ||
	    pmg_protect(d, p, N * PAGE))
		return 3;
	if (signal(SIGSEGV, segv_exit) == SIG_ERR)
		return 3;
	pmg_set_fault_mode(PMG_FAULT_STRICT);
	for (round = 0; round < 3; round++) {
		if (pmg_write_begin(d))
			return 5;
		for (i = 0; i < N; i++)
			p[i * PAGE + round] = (char)(i + round);
		pmg_write_end(d);
	}
	for (round = 0; round < 3; round++)
		for (i = 0; i < N; i++)
			if (p[i * PAGE + round] != (char)(i + round))
				return 6;
	return 0;
}

static void test_windows(void)
{
	reset_seen();
	tap_ok(child_ok(window_child, NULL) && sh->segv == 0,
	       "write windows (%s) run with the program's SIGSEGV handler set "
	       "after pmg_init: the handler never called",
	       pmg_backend_name(pmg_backend()));
}

/* ---- the program's own faults ---- */
static int own_child(void *arg)
{
	struct pmg_domain *d = NULL;
	char *page = protected_page(&d, "ownsig-own");
	char *none = mmap(NULL, PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
			  -1, 0);
	struct sigaction sa;

	(void)arg;
	if (!page || none == MAP_FAILED)
		return 3;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = segv_jump;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGUSR1);
	if (sigaction(SIGSEGV, &sa, NULL))
		return 3;
	pmg_set_report_fd(-1);
	pmg_set_fault_mode(PMG_FAULT_CONTAIN);
	if (!sigsetjmp(jb, 1)) {
		(void)*(volatile int *)0;
		return 10;
	}
	if (sh->segv != 1)
		return 11;
	/* a stray write, contained: not the program's */
	stray_store(page + 7, 0x55);
	if (sh->segv != 1 || at(&page[7]) != 0x33)
		return 12;
	if (!sigsetjmp(jb, 1)) {
		(void)*(volatile char *)(none + 12);
		return 13;
	}
	if (sh->segv != 2 || blocked(SIGSEGV) || blocked(SIGUSR1))
		return 14;
	/* and again: siglongjmp() left nothing behind */
	if (!sigsetjmp(jb, 1)) {
		*(volatile char *)(none + 13) = 1;
		return 15;
	}
	return sh->segv == 3 ? 0 : 16;
}

static void test_own_faults(void)
{
	int ok;

	reset_seen();
	tap_ok(child_ok(own_child, NULL), "contain: a null dereference and the program's PROT_NONE "
	       "page reach its handler (siglongjmp out), a stray write "
	       "between them does not");
	ok = sh->segv == 3 && sh->code[0] == SEGV_MAPERR &&
	     sh->addr[0] == NULL && sh->code[1] == SEGV_ACCERR &&
	     sh->code[2] == SEGV_ACCERR && sh->masked_usr1 && sh->masked_self;
	if (!ok)
		tap_diag("codes %d %d %d, addr %p, masked usr1 %d self %d",
			 sh->code[0], sh->code[1], sh->code[2], sh->addr[0],
			 sh->masked_usr1, sh->masked_self);
	tap_ok(ok, "... with the CPU's si_code (SEGV_MAPERR at NULL, "
	       "SEGV_ACCERR) and its sa_mask (SIGUSR1) and SIGSEGV blocked "
	       "in the handler");
	ok = sh->addr[1] != NULL &&
	     (uintptr_t)sh->addr[2] == (uintptr_t)sh->addr[1] + 1;
	tap_ok(ok, "... and si_addr at the faulting byte of its own page");
}

/* ---- SA_RESETHAND ---- */
static int resethand_child(void *arg)
{
	struct pmg_domain *d = NULL;
	char *page = protected_page(&d, "ownsig-reset");
	struct sigaction sa, old;

	(void)arg;
	if (!page)
		return 3;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = segv_jump;
	sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
	if (sigaction(SIGSEGV, &sa, NULL))
		return 3;
	pmg_set_report_fd(-1);
	pmg_set_fault_mode(PMG_FAULT_AUDIT);
	if (!sigsetjmp(jb, 1)) {
		(void)*(volatile int *)0;
		return 10;
	}
	if (sigaction(SIGSEGV, NULL, &old) || old.sa_handler != SIG_DFL)
		return 11;
	/* pmguard still handles its own: audited, the program goes on */
	stray_store(page + 9, 0x66);
	if (at(&page[9]) != 0x66)
		return 12;
	sh->after = 1;
	(void)*(volatile int *)0;
	return 13;
}

static void test_resethand(void)
{
	int st, ok;

	reset_seen();
	st = tap_child(resethand_child, NULL);
	ok = WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV && sh->segv == 1 &&
	     sh->after == 1;
	if (!ok)
		tap_diag("status %#x, handler calls %d, after %d", st, sh->segv,
			 sh->after);
	tap_ok(ok, "SA_RESETHAND: the handler once, reads back SIG_DFL, a "
	       "stray write audited meanwhile, the next null dereference "
	       "kills (SIGSEGV)");
}

/* ---- what sigaction() reads back ---- */
static int readback_child(void *arg)
{
	struct sigaction sa, old, cur;
	void *kseg = kernel_handler(SIGSEGV);
	int s;

	(void)arg;
	/* before the program set any: what was there before pmguard */
	for (s = 0; s < 3; s++) {
		int sig = s == 0 ? SIGSEGV : s == 1 ? SIGBUS : SIGTRAP;

		if (sigaction(sig, NULL, &old) || old.sa_handler != SIG_DFL ||
		    (old.sa_flags & SA_SIGINFO))
			return 10 + s;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = segv_jump;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGUSR2);
	if (sigaction(SIGSEGV, &sa, &old) || old.sa_handler != SIG_DFL)
		return 20;
	if (sigaction(SIGSEGV, NULL, &cur) || cur.sa_sigaction != segv_jump ||
	    (cur.sa_flags & (SA_SIGINFO | SA_NODEFER | SA_ONSTACK)) !=
		    (SA_SIGINFO | SA_NODEFER | SA_ONSTACK) ||
	    !sigismember(&cur.sa_mask, SIGUSR2) ||
	    sigismember(&cur.sa_mask, SIGUSR1))
		return 21;
	/* the kernel still holds pmguard's handler */
	if (kernel_handler(SIGSEGV) != kseg || kseg == (void *)segv_jump)
		return 22;
	/* signal() returns the program's, and replaces it */
	if (signal(SIGSEGV, segv_exit) != (sighandler_t)(void *)segv_jump)
		return 23;
	if (sigaction(SIGSEGV, NULL, &cur) || cur.sa_handler != segv_exit ||
	    (cur.sa_flags & SA_SIGINFO) || !(cur.sa_flags & SA_RESTART))
		return 24;
	if (kernel_handler(SIGSEGV) != kseg)
		return 25;
	/* restored as read: the old action round-trips */
	if (sigaction(SIGSEGV, &old, NULL) ||
	    signal(SIGSEGV, SIG_DFL) != SIG_DFL)
		return 26;
	return 0;
}

static void test_readback(void)
{
	tap_ok(child_ok(readback_child, NULL),
	       "sigaction(sig, NULL, &old) and the old-action out-parameter "
	       "give the program's action (or SIG_DFL, there before pmguard), "
	       "never pmguard's; the kernel keeps pmguard's");
}

/* ---- a library's call, bound to glibc's version of the symbol ---- */
typedef sighandler_t (*signal_fn)(int, sighandler_t);

static int versioned_child(void *arg)
{
	signal_fn f = (signal_fn)dlvsym(RTLD_DEFAULT, "signal", "GLIBC_2.2.5");
	void *kseg = kernel_handler(SIGSEGV);
	struct sigaction cur;

	(void)arg;
	if (!f)
		return 3;
	if (f(SIGSEGV, segv_exit) != SIG_DFL)
		return 10;
	if (sigaction(SIGSEGV, NULL, &cur) || cur.sa_handler != segv_exit)
		return 11;
	return kernel_handler(SIGSEGV) == kseg ? 0 : 12;
}

static void test_versioned(void)
{
	tap_ok(child_ok(versioned_child, NULL),
	       "signal@GLIBC_2.2.5, as a shared library linked against libc "
	       "alone binds it: recorded, pmguard's handler kept");
}

/* ---- SIGTRAP ---- */
static int trap_ign_child(void *arg)
{
	struct pmg_domain *d = NULL;
	char *page = protected_page(&d, "ownsig-trapign");

	(void)arg;
	if (!page || signal(SIGTRAP, SIG_IGN) == SIG_ERR)
		return 3;
	pmg_set_report_fd(-1);
	pmg_set_fault_mode(PMG_FAULT_CONTAIN);
	stray_store(page + 11, 0x77);
	if (at(&page[11]) != 0x33)
		return 10;
	stray_store(page + 12, 0x77);
	return at(&page[12]) == 0x33 ? 0 : 11;
}

static void test_trap_ignored(void)
{
	tap_ok(child_ok(trap_ign_child, NULL),
	       "signal(SIGTRAP, SIG_IGN) after pmg_init, contain: stray writes "
	       "contained, the program goes on");
}

static int trap_own_child(void *arg)
{
	struct pmg_domain *d = NULL;
	char *page = protected_page(&d, "ownsig-trap");
	struct sigaction sa;

	(void)arg;
	if (!page)
		return 3;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = trap_count;
	sa.sa_flags = SA_SIGINFO;
	if (sigaction(SIGTRAP, &sa, NULL))
		return 3;
	pmg_set_report_fd(-1);
	pmg_set_fault_mode(PMG_FAULT_AUDIT);
	stray_store(page + 20, 0x21);
	pmg_set_fault_mode(PMG_FAULT_CONTAIN);
	stray_store(page + 21, 0x22);
	if (sh->trap != 0 || at(&page[20]) != 0x21 || at(&page[21]) != 0x33)
		return 10;
	raise(SIGTRAP);
	if (sh->trap != 1)
		return 11;
#ifdef __x86_64__
	__asm__ __volatile__("int3" ::: "memory");
#endif
	return sh->trap == 2 ? 0 : 12;
}

static void test_trap_own(void)
{
	int ok;

	reset_seen();
	ok = child_ok(trap_own_child, NULL) && sh->trap == 2 &&
	     sh->code[0] == SI_TKILL && sh->code[1] == SI_KERNEL;
	if (!ok)
		tap_diag("traps %d, codes %d %d", sh->trap, sh->code[0],
			 sh->code[1]);
	tap_ok(ok, "the program's SIGTRAP handler never sees pmguard's "
	       "single steps (audit, contain) and does see its raise(SIGTRAP) "
	       "(SI_TKILL) and int3 (SI_KERNEL)");
}

/* ---- signal()'s kin, SIGBUS ---- */
static int kin_child(void *arg)
{
	struct sigaction cur;
	void *kbus = kernel_handler(SIGBUS);

	(void)arg;
	/* System V: one-shot */
	if (sysv_signal(SIGBUS, bus_count) != SIG_DFL)
		return 10;
	raise(SIGBUS);
	if (sh->bus != 1 || sigaction(SIGBUS, NULL, &cur) ||
	    cur.sa_handler != SIG_DFL)
		return 11;
	/* sigset(): installed, the old one back */
	if (sigset(SIGBUS, bus_count) != SIG_DFL)
		return 12;
	raise(SIGBUS);
	raise(SIGBUS);
	if (sh->bus != 3)
		return 13;
	/* siginterrupt(): SA_RESTART of the recorded action */
	if (signal(SIGBUS, bus_count) != bus_count ||
	    sigaction(SIGBUS, NULL, &cur) || !(cur.sa_flags & SA_RESTART))
		return 14;
	if (siginterrupt(SIGBUS, 1) || sigaction(SIGBUS, NULL, &cur) ||
	    (cur.sa_flags & SA_RESTART) || cur.sa_handler != bus_count)
		return 15;
	if (siginterrupt(SIGBUS, 0) || sigaction(SIGBUS, NULL, &cur) ||
	    !(cur.sa_flags & SA_RESTART))
		return 16;
	/* sigignore(): ignored, the program goes on */
	if (sigignore(SIGBUS) || sigaction(SIGBUS, NULL, &cur) ||
	    cur.sa_handler != SIG_IGN)
		return 17;
	raise(SIGBUS);
	if (sh->bus != 3)
		return 18;
	if (kernel_handler(SIGBUS) != kbus || kbus == (void *)bus_count ||
	    kbus == SIG_IGN || kbus == SIG_DFL)
		return 19;
	return 0;
}

static void test_kin(void)
{
	reset_seen();
	tap_ok(child_ok(kin_child, NULL),
	       "SIGBUS: sysv_signal() one-shot, sigset(), siginterrupt() on the "
	       "recorded SA_RESTART, sigignore(); pmguard's handler stays in "
	       "the kernel");
}

/* ---- threads, a handler and fork() racing on the record ---- */
static volatile int stop_racers;
static volatile int bus_a, bus_b;

static void bus_a_fn(int sig)
{
	struct sigaction old;

	(void)sig;
	bus_a++;
	/* a handler may read and set the record */
	sigaction(SIGBUS, NULL, &old);
}

static void bus_b_fn(int sig)
{
	(void)sig;
	bus_b++;
}

static void *racer(void *arg)
{
	struct sigaction sa;
	int i;

	(void)arg;
	memset(&sa, 0, sizeof(sa));
	for (i = 0; !stop_racers; i++) {
		sa.sa_handler = i & 1 ? bus_a_fn : bus_b_fn;
		sigaction(SIGBUS, &sa, NULL);
	}
	return NULL;
}

/* The child's end within 10 s; else killed (SIGKILL: a child stuck on
 * the record's lock has every other signal blocked) and false. */
static int reaped(pid_t pid, int *st)
{
	int i;

	for (i = 0; i < 10000; i++) {
		if (waitpid(pid, st, WNOHANG) == pid)
			return 1;
		usleep(1000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, st, 0);
	return 0;
}

static int race_child(void *arg)
{
	enum { THREADS = 3, RAISES = 3000 };
	void *kbus = kernel_handler(SIGBUS);
	pthread_t t[THREADS];
	struct sigaction sa;
	int i, st;
	pid_t pid;

	(void)arg;
	alarm(60); /* a deadlock fails the case, not the suite */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = bus_a_fn;
	if (sigaction(SIGBUS, &sa, NULL))
		return 3;
	for (i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, racer, NULL))
			return 3;
	for (i = 0; i < RAISES; i++) {
		raise(SIGBUS);
		if (i % 100 == 0) {
			pid = fork();
			if (pid == 0) {
				sa.sa_handler = bus_b_fn;
				_exit(sigaction(SIGBUS, &sa, NULL) ? 1 : 0);
			}
			if (pid < 0 || !reaped(pid, &st) || !WIFEXITED(st) ||
			    WEXITSTATUS(st))
				return 10;
		}
	}
	stop_racers = 1;
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	if (bus_a + bus_b != RAISES)
		return 11;
	return kernel_handler(SIGBUS) == kbus ? 0 : 12;
}

static void test_race(void)
{
	tap_ok(child_ok(race_child, NULL),
	       "3 threads setting SIGBUS handlers while it is raised 3000 "
	       "times, a handler calling sigaction(), 30 forks whose children "
	       "set one: no deadlock, every signal handled once, pmguard's "
	       "handler kept");
}

/* A sent SIGBUS and a blocking read(): EINTR unless SA_RESTART. */
struct restart_arg {
	pthread_t main;
	int wfd;
};

static void *kicker(void *argp)
{
	struct restart_arg *a = argp;

	usleep(100 * 1000);
	pthread_kill(a->main, SIGBUS);
	usleep(200 * 1000);
	if (write(a->wfd, "x", 1) != 1)
		return NULL;
	return NULL;
}

static int restart_child(void *arg)
{
	int restart = (int)(intptr_t)arg;
	struct restart_arg a;
	struct sigaction sa;
	pthread_t t;
	int p[2];
	ssize_t n;
	char c;

	if (pipe(p))
		return 3;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = bus_count;
	sa.sa_flags = restart ? SA_RESTART : 0;
	if (sigaction(SIGBUS, &sa, NULL))
		return 3;
	a.main = pthread_self();
	a.wfd = p[1];
	if (pthread_create(&t, NULL, kicker, &a))
		return 3;
	n = read(p[0], &c, 1);
	pthread_join(t, NULL);
	if (sh->bus != 1)
		return 10;
	if (restart)
		return n == 1 ? 0 : 11;
	return n == -1 && errno == EINTR ? 0 : 12;
}

static void test_restart(int restart)
{
	reset_seen();
	tap_ok(child_ok(restart_child, (void *)(intptr_t)restart),
	       "a sent SIGBUS to the program's handler %s SA_RESTART: a "
	       "blocking read() %s",
	       restart ? "with" : "without",
	       restart ? "restarts" : "fails with EINTR");
}

int main(void)
{
	tap_init(15);
	sh = tap_shared_page();
	if (!sh || pmg_init()) {
		tap_ok(0, "set-up: %s", pmg_errormsg());
		return tap_done();
	}
	test_strict(0);
	test_strict(1);
	test_windows();
	test_own_faults();
	test_resethand();
	test_readback();
	test_versioned();
	test_trap_ignored();
	test_trap_own();
	test_kin();
	test_race();
	test_restart(0);
	test_restart(1);
	return tap_done();
}
