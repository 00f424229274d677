// SPDX-License-Identifier: MIT
/*
 * The program's own actions for the signals pmguard's handlers hold
 * (SIGSEGV, SIGBUS, SIGTRAP: fault.c).  Once _pmg_sig_take() has put one
 * of pmguard's handlers into the kernel, it stays there: the shared
 * library interposes every libc call that installs a handler
 * (sigaction(), __sigaction(), signal(), bsd_signal(), ssignal(),
 * sysv_signal(), __sysv_signal(), sigset(), sigignore(), siginterrupt()),
 * and for those three signals records the program's action here instead
 * of installing it.  fault.c passes every signal that is not pmguard's to
 * the recorded action (_pmg_sig_deliver()), and sigaction()'s old-action
 * out-parameter reads the record: the program sees what it set, or what
 * was there before pmguard, never pmguard's handler.  Every other signal,
 * and these three before pmguard took them, go straight to libc.
 *
 * The kernel's flags follow the program's in one respect: SA_RESTART
 * (what a sent SIGBUS or SIGTRAP does to the system call it interrupts
 * is decided by the kernel before any handler runs).  pmguard's handler
 * always runs with SA_SIGINFO and SA_ONSTACK; the rest of the program's
 * action (SA_RESETHAND, SA_NODEFER, sa_mask, SIG_IGN, SIG_DFL) is carried
 * out by chain() in fault.c.
 *
 * One record a signal, changed and read under a spin lock taken with
 * every signal blocked (the raw rt_sigprocmask: glibc's wrappers leave
 * its own two out): a handler that calls sigaction() cannot interrupt a
 * thread holding it, and another thread holding it lets go within a few
 * instructions and one system call.  So every call here is
 * async-signal-safe and thread-safe.  The program's struct is copied
 * before the lock is taken: a bad pointer faults (as in glibc) outside it.
 *
 * Not seen: the static library (no interposition), a library loaded
 * after the program started without LD_PRELOAD (dlopen(): its symbols come
 * after libc's), raw rt_sigaction system calls (Go without cgo) and
 * libraries bound with RTLD_DEEPBIND.  Their handler replaces pmguard's
 * in the kernel, as it always did (docs/api.md, pmguard(7) "Signals").
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000
#endif

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);

#ifdef PMG_SHARED
/* libc's own @name: resolved at load (below); a call before then
 * (another constructor's) asks dlsym() itself */
static void *next(void **slot, const char *name)
{
	void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);

	if (!f) {
		f = dlsym(RTLD_NEXT, name);
		__atomic_store_n(slot, f, __ATOMIC_RELEASE);
	}
	return f;
}

static void *real_sigaction, *real_signal, *real_sysv, *real_sigset,
	*real_sigignore, *real_siginterrupt;

__attribute__((constructor)) static void sigown_resolve(void)
{
	(void)next(&real_sigaction, "sigaction");
	(void)next(&real_signal, "signal");
	(void)next(&real_sysv, "sysv_signal");
	(void)next(&real_sigset, "sigset");
	(void)next(&real_sigignore, "sigignore");
	(void)next(&real_siginterrupt, "siginterrupt");
}
#endif

/* libc's sigaction(), not the interposer below: pmguard's own calls. */
static int real(int sig, const struct sigaction *act, struct sigaction *old)
{
#ifdef PMG_SHARED
	sigaction_fn f = (sigaction_fn)next(&real_sigaction, "sigaction");

	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	return f(sig, act, old);
#else
	return sigaction(sig, act, old);
#endif
}

/* One signal pmguard's handler holds. */
struct own {
	bool taken; /* pmguard's handler is in the kernel */
	bool intr; /* siginterrupt(sig, 1): signal() leaves SA_RESTART out */
	struct sigaction prog; /* the program's action (or the one before) */
	struct sigaction ours; /* pmguard's, as _pmg_sig_take() got it */
};

static struct own own[3];
static int own_lock_word;
/* glibc's signal return trampoline, as the kernel reports it back */
static void (*restorer)(void);

static struct own *own_of(int sig)
{
	switch (sig) {
	case SIGSEGV:
		return &own[0];
	case SIGBUS:
		return &own[1];
	case SIGTRAP:
		return &own[2];
	}
	return NULL;
}

static uint64_t own_block(void)
{
	uint64_t all = ~0ULL, old = 0;

	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &old, sizeof(all));
	while (__atomic_exchange_n(&own_lock_word, 1, __ATOMIC_ACQUIRE)) {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
	}
	return old;
}

static void own_unblock(uint64_t old)
{
	__atomic_store_n(&own_lock_word, 0, __ATOMIC_RELEASE);
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, sizeof(old));
}

/* pmguard's handler again, its SA_RESTART the program's.  Locked. */
static void own_restart(int sig, struct own *o)
{
	struct sigaction k = o->ours;
	bool want = !!(o->prog.sa_flags & SA_RESTART);

	/* SIG_DFL and SIG_IGN: as installed (the default kills; an ignored
	 * signal interrupts nothing without pmguard) */
	if (!(o->prog.sa_flags & SA_SIGINFO) &&
	    (o->prog.sa_handler == SIG_DFL || o->prog.sa_handler == SIG_IGN))
		want = true;
	if (want == !!(k.sa_flags & SA_RESTART))
		return;
	k.sa_flags = want ? k.sa_flags | SA_RESTART : k.sa_flags & ~SA_RESTART;
	if (!real(sig, &k, NULL))
		o->ours = k;
}

/*
 * fork() while another thread holds the lock would leave the child's copy
 * held for good (and the record half written): fork waits for it.  The
 * forking thread blocks every signal meanwhile, as the holder does.
 * Registered at load, before pmg_init() registers the library's own
 * (thread.c; pmguard run's constructor calls it: this constructor's
 * priority puts it first): prepare handlers run in the reverse order, so this one
 * runs last, once the others hold their locks.  A thread that holds one
 * of those and chains a signal (_pmg_sig_deliver()) then never waits
 * for a forking thread that waits for it.
 */
static uint64_t fork_mask;

static void fork_prepare(void)
{
	fork_mask = own_block();
}

static void fork_done(void)
{
	own_unblock(fork_mask);
}

__attribute__((constructor(101))) static void sigown_fork_hook(void)
{
	/* fails only without memory: fork then does not wait */
	(void)pthread_atfork(fork_prepare, fork_done, fork_done);
}

int _pmg_sig_take(int sig, const struct sigaction *ours)
{
	struct own *o = own_of(sig);
	struct sigaction prev, cur;
	uint64_t m;
	int rc = 0;

	if (!o)
		return -EINVAL;
	m = own_block();
	if (real(sig, ours, &prev)) {
		rc = -errno;
		goto out;
	}
	if (!real(sig, NULL, &cur) && (cur.sa_flags & SA_RESTORER))
		restorer = cur.sa_restorer;
	o->ours = *ours;
	/* a retried init must not record pmguard's own handler; one that
	 * replaced it behind our back (the static library: no interposer)
	 * is the program's now */
	if (prev.sa_sigaction != ours->sa_sigaction)
		o->prog = prev;
	__atomic_store_n(&o->taken, true, __ATOMIC_RELEASE);
	own_restart(sig, o);
out:
	own_unblock(m);
	return rc;
}

void _pmg_sig_deliver(int sig, struct sigaction *out)
{
	struct own *o = own_of(sig);
	uint64_t m;

	memset(out, 0, sizeof(*out));
	out->sa_handler = SIG_DFL;
	if (!o)
		return;
	m = own_block();
	*out = o->prog;
	/* one-shot, as the kernel does it: the handler only, the flags
	 * stay (sigaction() reads them back) */
	if (o->prog.sa_flags & SA_RESETHAND)
		o->prog.sa_handler = SIG_DFL;
	own_unblock(m);
}

/*
 * The default action from now on, for pmguard's end of a signal: the raw
 * system call (SIG_DFL needs no trampoline), and the record too.
 * Async-signal-safe.
 */
void _pmg_sig_default(int sig)
{
	struct own *o = own_of(sig);
	/* the kernel's struct sigaction: handler, flags, restorer, mask */
	struct {
		void (*handler)(int);
		unsigned long flags;
		void (*restorer)(void);
		uint64_t mask;
	} k = { SIG_DFL, 0, NULL, 0 };
	uint64_t m = 0;

	if (o) {
		m = own_block();
		o->prog.sa_handler = SIG_DFL;
		o->prog.sa_flags &= ~SA_SIGINFO;
	}
	syscall(SYS_rt_sigaction, sig, &k, NULL, sizeof(k.mask));
	if (o)
		own_unblock(m);
}

#ifdef PMG_SHARED

/* The program's action as libc and the kernel give it back: with libc's
 * trampoline, signals the kernel never blocks taken out. */
static void own_record(struct own *o, const struct sigaction *act)
{
	o->prog = *act;
	sigdelset(&o->prog.sa_mask, SIGKILL);
	sigdelset(&o->prog.sa_mask, SIGSTOP);
	if (restorer) {
		o->prog.sa_flags |= SA_RESTORER;
		o->prog.sa_restorer = restorer;
	}
}

/*
 * sigaction() for one of pmguard's signals: recorded once taken, else
 * libc's (under the lock: _pmg_sig_take() cannot slip in between).
 */
static int own_sigaction(int sig, struct own *o, const struct sigaction *act,
			 struct sigaction *old)
{
	struct sigaction a, prev;
	uint64_t m;
	int rc = 0;

	if (act)
		a = *act;
	m = own_block();
	if (!__atomic_load_n(&o->taken, __ATOMIC_ACQUIRE)) {
		rc = real(sig, act ? &a : NULL, old ? &prev : NULL);
		own_unblock(m);
		if (!rc && old)
			*old = prev;
		return rc;
	}
	prev = o->prog;
	if (act) {
		own_record(o, &a);
		own_restart(sig, o);
	}
	own_unblock(m);
	if (old)
		*old = prev;
	return rc;
}

/* signal() and its kin, for one of pmguard's signals. */
static sighandler_t own_signal(int sig, struct own *o, sighandler_t h,
			       int flags, bool self_mask)
{
	struct sigaction a, old;

	if (h == SIG_ERR) {
		errno = EINVAL;
		return SIG_ERR;
	}
	memset(&a, 0, sizeof(a));
	a.sa_handler = h;
	a.sa_flags = flags;
	sigemptyset(&a.sa_mask);
	if (self_mask)
		sigaddset(&a.sa_mask, sig);
	if (own_sigaction(sig, o, &a, &old))
		return SIG_ERR;
	return old.sa_handler;
}

typedef sighandler_t (*signal_fn)(int, sighandler_t);
typedef int (*sigint_fn)(int, int);
typedef int (*sigig_fn)(int);

/* libc declares these under feature macros of their own, or not at all */
int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);
sighandler_t bsd_signal(int sig, sighandler_t h);
sighandler_t __sysv_signal(int sig, sighandler_t h);

PMG_API int sigaction(int sig, const struct sigaction *act,
		      struct sigaction *old)
{
	struct own *o = own_of(sig);

	if (!o)
		return real(sig, act, old);
	return own_sigaction(sig, o, act, old);
}

PMG_API int __sigaction(int sig, const struct sigaction *act,
			struct sigaction *old)
{
	return sigaction(sig, act, old);
}

/* BSD semantics (glibc's signal()): restarting, unless siginterrupt()
 * said otherwise; the signal blocked in its handler. */
PMG_API sighandler_t signal(int sig, sighandler_t h)
{
	struct own *o = own_of(sig);

	if (!o)
		return ((signal_fn)next(&real_signal, "signal"))(sig, h);
	return own_signal(sig, o, h,
			  __atomic_load_n(&o->intr, __ATOMIC_RELAXED)
				  ? 0
				  : SA_RESTART,
			  true);
}

PMG_API sighandler_t bsd_signal(int sig, sighandler_t h)
{
	return signal(sig, h);
}

PMG_API sighandler_t ssignal(int sig, sighandler_t h)
{
	return signal(sig, h);
}

/* System V semantics: one-shot, not blocked in its handler. */
PMG_API sighandler_t sysv_signal(int sig, sighandler_t h)
{
	struct own *o = own_of(sig);

	if (!o)
		return ((signal_fn)next(&real_sysv, "sysv_signal"))(sig, h);
	return own_signal(sig, o, h, SA_RESETHAND | SA_NODEFER, false);
}

PMG_API sighandler_t __sysv_signal(int sig, sighandler_t h)
{
	return sysv_signal(sig, h);
}

/* glibc's sigset(): SIG_HOLD blocks; any other disposition is installed
 * with no flags and unblocks.  Returns the old one, SIG_HOLD if it was
 * blocked. */
PMG_API sighandler_t sigset(int sig, sighandler_t disp)
{
	struct own *o = own_of(sig);
	struct sigaction a, old;
	sigset_t set, oset;

	if (!o)
		return ((signal_fn)next(&real_sigset, "sigset"))(sig, disp);
	sigemptyset(&set);
	sigaddset(&set, sig);
	if (disp == SIG_HOLD) {
		if (sigprocmask(SIG_BLOCK, &set, &oset) < 0)
			return SIG_ERR;
		if (sigismember(&oset, sig))
			return SIG_HOLD;
		if (own_sigaction(sig, o, NULL, &old) < 0)
			return SIG_ERR;
		return old.sa_handler;
	}
	memset(&a, 0, sizeof(a));
	a.sa_handler = disp;
	sigemptyset(&a.sa_mask);
	if (own_sigaction(sig, o, &a, &old) < 0)
		return SIG_ERR;
	if (sigprocmask(SIG_UNBLOCK, &set, &oset) < 0)
		return SIG_ERR;
	return sigismember(&oset, sig) ? SIG_HOLD : old.sa_handler;
}

PMG_API int sigignore(int sig)
{
	struct own *o = own_of(sig);

	if (!o)
		return ((sigig_fn)next(&real_sigignore, "sigignore"))(sig);
	return own_signal(sig, o, SIG_IGN, 0, false) == SIG_ERR ? -1 : 0;
}

/* SA_RESTART of the recorded action; remembered for signal() too. */
PMG_API int siginterrupt(int sig, int flag)
{
	struct own *o = own_of(sig);
	uint64_t m;
	int rc = 0;

	if (!o)
		return ((sigint_fn)next(&real_siginterrupt,
					"siginterrupt"))(sig, flag);
	m = own_block();
	__atomic_store_n(&o->intr, flag != 0, __ATOMIC_RELAXED);
	if (!__atomic_load_n(&o->taken, __ATOMIC_ACQUIRE)) {
		rc = ((sigint_fn)next(&real_siginterrupt,
				      "siginterrupt"))(sig, flag);
	} else {
		if (flag)
			o->prog.sa_flags &= ~SA_RESTART;
		else
			o->prog.sa_flags |= SA_RESTART;
		own_restart(sig, o);
	}
	own_unblock(m);
	return rc;
}

#endif /* PMG_SHARED */
