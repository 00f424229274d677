// SPDX-License-Identifier: MIT
/*
 * pmg_errormsg() describes the call that failed.
 * A message that adds context to an inner call's ("creating the pool
 * domain: <why>") is built without formatting into the buffer it reads
 * (that overlapping vsnprintf() garbled it: "creating the pool domain:
 * creating the pool domain:  'pmem': ..."); a clean-up step after the
 * failure does not replace the failure's message with its own.  The rule
 * (pmguard.h, pmg_errormsg(3)): valid after a failing call; a successful
 * call leaves it as it was (checked here for the main calls, and by
 * test-init for a pmg_init() that falls back from PKU).
 * Each case runs in a child: they leave the shared pool domain odd.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>

#include "tap.h"
#include "capture.h"
#include "pmguard.h"

static char dir[256];
static char *shm;	/* the child's message, for the diagnostic */

static void keep(void)
{
	snprintf(shm, 4096, "%s", pmg_errormsg());
}

static struct pmg_pool_config *config(size_t size)
{
	struct pmg_pool_config *c = NULL;

	if (pmg_pool_config_new(&c) || pmg_pool_config_set_size(c, size))
		return NULL;
	return c;
}

/* The shared "pmem" domain cannot be created: its name is taken. */
static int name_taken(void *arg)
{
	struct pmg_pool_config *c = config(1 << 16);
	struct pmg_domain *d = NULL;
	struct pmg_pool *p = NULL;
	char path[320];
	int rc;

	(void)arg;
	snprintf(path, sizeof(path), "%s/name-taken", dir);
	if (!c || pmg_domain_new(&d, "pmem", 0))
		return 10;
	rc = pmg_pool_create(&p, path, c);
	keep();
	if (rc != -EEXIST || p)
		return 1;
	if (strncmp(pmg_errormsg(), "creating the pool domain: a domain "
		    "named 'pmem' exists", 54))
		return 2;
	if (count_matches(pmg_errormsg(), "creating the pool domain") != 1)
		return 3;
	return access(path, F_OK) == 0 ? 4 : 0;
}

/* The configured domain is not live: protecting the mapping fails. */
static int stale_domain(void *arg)
{
	struct pmg_pool_config *c = config(1 << 16);
	struct pmg_domain *d = NULL, *stale;
	struct pmg_pool *p = NULL;
	char path[320];
	int rc;

	(void)arg;
	snprintf(path, sizeof(path), "%s/stale-domain", dir);
	if (!c || pmg_domain_new(&d, "errmsg-stale", 0))
		return 10;
	stale = d;
	if (pmg_domain_delete(&d) || pmg_pool_config_set_domain(c, stale))
		return 11;
	rc = pmg_pool_create(&p, path, c);
	keep();
	if (rc != -EINVAL || p)
		return 1;
	if (!strstr(pmg_errormsg(), ": protecting the mapping: pmg_protect: "
		    "not a live domain"))
		return 2;
	if (count_matches(pmg_errormsg(), "protecting the mapping") != 1)
		return 3;
	return 0;
}

/*
 * The pool's range was unprotected behind the pool's back (deleting its
 * shared domain too is refused, -EBUSY): closing it
 * fails (-ENOENT, the range is gone), and the message says so, not what
 * the domain clean-up after it hit.
 */
static int close_enoent(void *arg)
{
	struct pmg_pool_config *c = config(1 << 16);
	struct pmg_pool *p = NULL;
	struct pmg_domain *d;
	char path[320];
	int rc;

	(void)arg;
	snprintf(path, sizeof(path), "%s/close-enoent", dir);
	if (!c || pmg_pool_create(&p, path, c))
		return 10;
	d = pmg_pool_domain(p);
	if (pmg_unprotect(pmg_pool_address(p), 1 << 16) ||
	    pmg_domain_delete(&d) != -EBUSY)
		return 11;
	rc = pmg_pool_close(&p);
	keep();
	if (rc == 0)
		return 0;	/* a close that copes is fine too */
	if (!pmg_errormsg()[0] || strstr(pmg_errormsg(), "pmg_domain_delete"))
		return 1;
	return strstr(pmg_errormsg(), "no protected range") ? 0 : 2;
}

/* Successful calls leave the message as it was: the documented rule. */
static int success_keeps(void *arg)
{
	static char page[8192] __attribute__((aligned(4096)));
	struct pmg_pool_config *c = config(1 << 16);
	struct pmg_domain *d = NULL;
	struct pmg_pool *p = NULL;
	char path[320], before[512];
	int bad = 0;

	(void)arg;
	snprintf(path, sizeof(path), "%s/success", dir);
	(void)pmg_set_fault_mode(-4242);	/* a message of our own */
	snprintf(before, sizeof(before), "%s", pmg_errormsg());
#define KEEPS(call)							\
	do {								\
		if ((call) || strcmp(pmg_errormsg(), before)) {		\
			printf("# %s: '%s'\n", #call, pmg_errormsg());	\
			bad++;						\
		}							\
	} while (0)
	KEEPS(!c);
	KEEPS(pmg_pool_create(&p, path, c));
	KEEPS(pmg_pool_close(&p));
	KEEPS(pmg_pool_open(&p, path, NULL));
	KEEPS(!pmg_memcpy_persist(pmg_pool_address(p), "abc", 3));
	KEEPS(pmg_pool_close(&p));
	KEEPS(pmg_domain_new(&d, "errmsg-ok", 0));
	KEEPS(pmg_protect(d, page, 4096));
	KEEPS(pmg_open(d, PMG_WRITE));
	KEEPS(pmg_close(d, PMG_WRITE));
	KEEPS(pmg_unprotect(page, 4096));
	KEEPS(pmg_domain_delete(&d));
#undef KEEPS
	keep();
	return bad ? 1 : 0;
}

/*
 * The calls documented as async-signal-safe set a constant message,
 * without formatting or allocating (pmg_errormsg(3)): in a thread that
 * has no message buffer yet, each one's message must not be the buffer
 * that the thread's first formatted message then gets.
 */
static void *as_safe_thread(void *arg)
{
	const char *m[4], *buf;
	struct pmg_stats *st = NULL;
	unsigned i;
	int bad = 0;

	(void)arg;
	bad |= pmg_set_fault_mode(99) != -EINVAL;
	m[0] = pmg_errormsg();
	bad |= pmg_stats_get(st, sizeof(*st)) != -EINVAL;
	m[1] = pmg_errormsg();
	bad |= pmg_dax_direct_access(NULL, 0, 1, NULL) != -EINVAL;
	m[2] = pmg_errormsg();
	bad |= pmg_pool_get_info(NULL, NULL, sizeof(struct pmg_pool_info)) !=
	       -EINVAL;
	m[3] = pmg_errormsg();
	/* a formatted message: the thread's buffer */
	bad |= pmg_unprotect((void *)4097, 5) >= 0;
	buf = pmg_errormsg();
	for (i = 0; i < 4; i++)
		if (m[i] == buf || !*m[i]) {
			snprintf(shm, 4096, "call %u: message '%s' in the "
				 "buffer", i, m[i]);
			bad = 1;
		}
	return (void *)(intptr_t)bad;
}

static int as_safe_const(void *arg)
{
	pthread_t t;
	void *ret;

	(void)arg;
	if (pmg_init() || pthread_create(&t, NULL, as_safe_thread, NULL) ||
	    pthread_join(t, &ret))
		return 2;
	return (int)(intptr_t)ret;
}

static void run(int (*fn)(void *), const char *what)
{
	int st;

	shm[0] = '\0';
	st = tap_child(fn, NULL);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		tap_diag("status %#x, message '%s'", st, shm);
	tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", what);
}

int main(void)
{
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";

	tap_init(5);
	shm = tap_shared_page();
	snprintf(dir, sizeof(dir), "%s/pmg-errmsg-XXXXXX", base);
	if (!shm || !mkdtemp(dir)) {
		printf("Bail out! set-up: %s\n", strerror(errno));
		return 1;
	}
	run(name_taken, "pool create, 'pmem' name taken: -EEXIST, message "
	    "'creating the pool domain: a domain named 'pmem' exists...', "
	    "the prefix once; no file left");
	run(stale_domain, "pool create with a deleted domain: -EINVAL, "
	    "message '<path>: protecting the mapping: pmg_protect: not a live "
	    "domain', the prefix once");
	run(close_enoent,
	    "pool close after its range went behind its "
	    "back (its domain's delete refused): the message names the "
	    "failed unprotect, not the domain clean-up after it");
	run(as_safe_const, "the async-signal-safe calls' messages are "
	    "constants (pmg_set_fault_mode, pmg_stats_get, "
	    "pmg_dax_direct_access, pmg_pool_get_info): no buffer allocated, "
	    "none formatted");
	run(success_keeps, "successful create, close, open, memcpy_persist, "
	    "domain_new, protect, open/close, unprotect, delete leave the "
	    "message as it was");
	{
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd))
			tap_diag("could not remove %s", dir);
	}
	return tap_done();
}
