// SPDX-License-Identifier: MIT
/*
 * New threads and fork children start at the domain defaults.
 *
 * clone() copies the creator's PKRU, so a thread created inside a window
 * would start with write access and no window count to close it.  The
 * library therefore wraps pthread_create(): the new thread resets its
 * rights for pmguard's keys before it runs the caller's start routine.
 * The shared library interposes pthread_create itself; a static link needs
 * -Wl,--wrap=pthread_create (pkg-config's Libs.private carries it).
 * A fork child is a copy of the forking thread, window and all: the atfork
 * child handler closes its windows (counts to zero, rights to defaults).
 *
 * A thread that ends (returns, pthread_exit(), cancellation) with windows
 * open has them closed by a thread-specific-data destructor, which reports
 * them once on the report fd.  On the mprotect backend windows are
 * process-wide counts, so a dead thread's would otherwise keep the domain
 * writable for everyone and undeletable forever.  The destructor is armed
 * by the first window edge on mprotect and at thread start on PKU (through
 * the pthread_create wrapper: the inline PKU edges have no hook); it works
 * for threads however they were created, as long as they were armed.
 * The atfork handlers and the key are registered once per process, however
 * often pmg_init() is retried: a second set of handlers would take the
 * pool lock twice in fork() and deadlock.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "persist.h"

/*
 * persist.c's source cache, defined here and not there: the shared
 * library's TLS must fit the static TLS that dlopen() can get
 * (test-dlopen), and objects' TLS is laid out in link order.  In
 * persist.c, ahead of state.c's 64-byte-aligned _pmg_tls, its 40 bytes
 * pushed _pmg_tls to the next 64-byte boundary (396 bytes in all); after
 * it, they take 40 (372).
 */
__thread struct _pmg_src_cache _pmg_scache
	__attribute__((tls_model("initial-exec")));

static __thread unsigned char end_rounds
	__attribute__((tls_model("initial-exec")));

/*
 * The thread ends: close what it left open (domain.c), report it.  A
 * destructor of the program's may run after this one (a later key) and
 * open a window (inline on PKU: nothing arms us then) or set a message:
 * so armed again, and glibc calls this again in its next round, up to
 * PTHREAD_DESTRUCTOR_ITERATIONS (windows opened in the last round after
 * this one stay: glibc stops there).
 */
static void thread_end(void *unused)
{
	(void)unused;
	_pmg_end_armed = false;
	_pmg_release_windows();
	_pmg_err_free();
	if (++end_rounds < PTHREAD_DESTRUCTOR_ITERATIONS &&
	    pthread_setspecific(_pmg_end_key, (void *)1) == 0)
		_pmg_end_armed = true;
}

/* Set the calling thread's rights for every pmguard key to its default
 * (keyed windows: PKU). */
static void thread_reset(void)
{
	if (_pmg_fast)
		_pmg.prim->rights_reset();
}

struct start {
	void *(*fn)(void *);
	void *arg;
};

static void *start_thread(void *p)
{
	struct start s = *(struct start *)p;

	free(p);
	thread_reset();
	_pmg_thread_arm();
	return s.fn(s.arg);
}

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *,
			 void *(*)(void *), void *);

static int create(create_fn real, pthread_t *t, const pthread_attr_t *a,
		  void *(*fn)(void *), void *arg)
{
	struct start *s;
	int rc;

	if (!__atomic_load_n(&_pmg_fast, __ATOMIC_ACQUIRE))
		return real(t, a, fn, arg);
	s = malloc(sizeof(*s));
	if (!s)
		return EAGAIN;
	s->fn = fn;
	s->arg = arg;
	rc = real(t, a, start_thread, s);
	if (rc)
		free(s);
	return rc;
}

#ifdef PMG_SHARED
PMG_API int pthread_create(pthread_t *t, const pthread_attr_t *a,
			   void *(*fn)(void *), void *arg)
{
	static create_fn real;
	create_fn r = __atomic_load_n(&real, __ATOMIC_ACQUIRE);

	if (!r) {
		r = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
		if (!r)
			return EAGAIN;
		__atomic_store_n(&real, r, __ATOMIC_RELEASE);
	}
	return create(r, t, a, fn, arg);
}
#else
int __real_pthread_create(pthread_t *, const pthread_attr_t *,
			  void *(*)(void *), void *);
int __wrap_pthread_create(pthread_t *, const pthread_attr_t *,
			  void *(*)(void *), void *);

PMG_API int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a,
				  void *(*fn)(void *), void *arg)
{
	return create(__real_pthread_create, t, a, fn, arg);
}
#endif

static void fork_prepare(void)
{
	_pmg_pool_fork_prepare();	/* lock order: pool, then library */
	pthread_mutex_lock(&_pmg.lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&_pmg.lock);
	_pmg_pool_fork_release();
}

static void fork_child(void)
{
	/* locked by fork_prepare() in this very thread: unlock, as POSIX
	 * intends (re-initialising a locked mutex confuses checkers) */
	pthread_mutex_unlock(&_pmg.lock);
	_pmg_pool_fork_release();
	/* counts and the fresh-context depth (w[0]) of the forking thread */
	memset(&_pmg_tls, 0, sizeof(_pmg_tls));
	_pmg_fault_fork_child();
	_pmg_lazy_fork_child();
	/* (_pmg_end_armed and the key's value are the forking thread's: still
	 * true of this, its copy) */
	if (_pmg_fast) {
		/* keyed windows: the register back to the defaults; the
		 * thread registers again at its next window */
		_pmg_keys_fork_child();
		thread_reset();
	}
	/* page-protection windows (the mprotect backend, virtual domains
	 * on PKU) are the child's own copies: closed; the persistence
	 * calls' page windows first (mpwin.c) */
	_pmg_pw_fork_child();
	_pmg_windows_fork_child();
}

/*
 * Once per process, under the library lock (pmg_init() holds it): each step
 * is done once, and a step that failed is tried again by the next
 * pmg_init() rather than never (what pthread_once() would do).
 */
int _pmg_thread_hooks_install(void)
{
	static bool atfork_done;
	int rc;

	if (!atfork_done) {
		rc = pthread_atfork(fork_prepare, fork_parent, fork_child);
		if (rc)
			return _pmg_err(-rc, "pthread_atfork: %s",
					strerror(rc));
		atfork_done = true;
	}
	if (!_pmg_end_key_ok) {
		rc = pthread_key_create(&_pmg_end_key, thread_end);
		if (rc)
			return _pmg_err(-rc, "pthread_key_create: %s",
					strerror(rc));
		__atomic_store_n(&_pmg_end_key_ok, true, __ATOMIC_RELEASE);
	}
	return 0;
}
