// SPDX-License-Identifier: MIT
/*
 * Threads that end inside windows.  A thread that
 * returns, calls pthread_exit() or is cancelled while it holds windows has
 * them closed when it ends, reported once on the report fd.  Before, on
 * the mprotect backend (process-wide windows) the domain then stayed
 * writable for every thread and pmg_domain_delete() said -EBUSY forever.
 * Each case: the dead thread's nested windows, then a stray write from
 * this thread faults again (probe: address, kind, key, si_code), the data
 * written inside the window is intact, unprotect and delete succeed, and
 * exactly one report line names the thread's windows.  Also windows
 * opened by the program's own destructor after pmguard's has run (the
 * thread was once marked done and left them open).  Both backends.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>

#include "tap.h"
#include "capture.h"
#include "probe.h"
#include "valgrind-probe.h"

#define PAGE 4096

enum how { RETURN, EXIT, CANCEL, DTOR };

struct job {
	struct pmg_domain *d;
	char *p;
	enum how how;
	int nw, nr;		/* nested windows to leave open */
	int wrote;		/* the in-window write did not fault */
	int ready[2];
};

static __attribute__((noinline)) void leave(struct job *j)
{
	if (j->how == EXIT)
		pthread_exit(NULL);
	if (j->how == CANCEL) {
		if (write(j->ready[1], "r", 1) != 1)
			return;
		for (;;)
			pause();	/* a cancellation point */
	}
}

static void open_windows(struct job *j)
{
	int i;

	for (i = 0; i < j->nw; i++)
		pmg_open(j->d, PMG_WRITE);
	for (i = 0; i < j->nr; i++)
		pmg_open(j->d, PMG_READ);
	j->wrote = probe(j->d, j->p + 8, PMG_WRITE) == 0;
}

/*
 * The program's own thread-specific-data destructor, whose key was made
 * after pmg_init(): it runs after pmguard's in the thread's end, and
 * opens windows there (a cleanup that writes a last record, say).
 */
static pthread_key_t prog_key;

static void prog_dtor(void *arg)
{
	open_windows(arg);
}

static void *in_window(void *arg)
{
	struct job *j = arg;

	if (j->how == DTOR) {
		/* a balanced window first: pmguard knows the thread */
		pmg_open(j->d, PMG_WRITE);
		pmg_close(j->d, PMG_WRITE);
		pthread_setspecific(prog_key, j);
		return NULL;
	}
	open_windows(j);
	leave(j);
	return NULL;
}

/* Everything readable now from the report pipe. */
static void drain(int fd, char *buf, size_t size)
{
	ssize_t n, t = 0;

	while ((size_t)t < size - 1 &&
	       (n = read(fd, buf + t, size - 1 - (size_t)t)) > 0)
		t += n;
	buf[t] = '\0';
}

static void run(const char *name, enum how how, int nw, int nr, int rep)
{
	struct job j = { .how = how, .nw = nw, .nr = nr };
	char buf[2048], want[128];
	pthread_t t;
	void *res = NULL;
	int ok = 1, n;

	j.p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(ok, j.p != MAP_FAILED);
	CHECK(ok, pmg_domain_new(&j.d, name, 0) == 0);
	CHECK(ok, pmg_protect(j.d, j.p, PAGE) == 0);
	CHECK(ok, pipe(j.ready) == 0);
	if (!ok) {
		tap_ok(0, "%s: set-up: %s", name, pmg_errormsg());
		return;
	}
	CHECK(ok, pthread_create(&t, NULL, in_window, &j) == 0);
	if (how == CANCEL) {
		char c;

		CHECK(ok, read(j.ready[0], &c, 1) == 1);
		CHECK(ok, pthread_cancel(t) == 0);
	}
	CHECK(ok, pthread_join(t, &res) == 0);
	CHECK(ok, res == (how == CANCEL ? PTHREAD_CANCELED : NULL));
	CHECK(ok, j.wrote);
	/* write-protected again for this thread: a stray write faults */
	CHECK(ok, probe(j.d, j.p + 16, PMG_WRITE) == 1);
	/* audit let the stray in; the window's write is there */
	CHECK(ok, j.p[8] == 0x5a && j.p[16] == 0x5a);
	CHECK(ok, probe(j.d, j.p, PMG_READ) == 0);
	/* and this thread's own windows still work */
	CHECK(ok, pmg_open(j.d, PMG_WRITE) == 0);
	CHECK(ok, probe(j.d, j.p + 24, PMG_WRITE) == 0);
	CHECK(ok, pmg_close(j.d, PMG_WRITE) == 0);
	CHECK(ok, probe(j.d, j.p + 32, PMG_WRITE) == 1);
	CHECK(ok, pmg_unprotect(j.p, PAGE) == 0);
	if (pmg_domain_delete(&j.d) != 0) {
		tap_diag("%s: delete: %s", name, pmg_errormsg());
		ok = 0;
	}
	drain(rep, buf, sizeof(buf));
	snprintf(want, sizeof(want), " ended with %d write and %d read "
		 "window(s) open on domain '%s'", nw, nr, name);
	n = count_matches(buf, want);
	if (n != 1 || count_matches(buf, "ended with") != 1) {
		tap_diag("%s: report '%s': %d line(s) like '%s'", name, buf,
			 n, want);
		ok = 0;
	}
	tap_ok(ok,
	       "thread %s inside %d write + %d read window(s): closed "
	       "at its end, reported once, stray write faults again, "
	       "delete succeeds",
	       how == RETURN ? "returns"
	       : how == EXIT ? "calls pthread_exit()"
	       : how == CANCEL
		       ? "is cancelled"
		       : "ends, a later destructor of its own opening them",
	       nw, nr);
	close(j.ready[0]);
	close(j.ready[1]);
	munmap(j.p, PAGE);
}

/* A thread that ends with no window open reports nothing. */
static void *balanced(void *arg)
{
	struct pmg_domain *d = arg;

	pmg_open(d, PMG_WRITE);
	pmg_close(d, PMG_WRITE);
	return NULL;
}

int main(void)
{
	struct pmg_domain *d = NULL;
	char buf[512];
	pthread_t t;
	int rep[2];

	if (pmg_under_valgrind())
		tap_skip_all(PMG_VALGRIND_WHY);
	tap_init(7);
	if (pmg_init() || pthread_key_create(&prog_key, prog_dtor) ||
	    pipe(rep) || fcntl(rep[0], F_SETFL, O_NONBLOCK)) {
		printf("Bail out! %s\n", pmg_errormsg());
		return 1;
	}
	tap_diag("backend: %s", pmg_backend_name(pmg_backend()));
	probe_begin();
	pmg_set_report_fd(rep[1]);
	run("end-return", RETURN, 1, 0, rep[0]);
	run("end-exit", EXIT, 3, 0, rep[0]);
	run("end-cancel", CANCEL, 1, 0, rep[0]);
	run("end-nested", EXIT, 2, 2, rep[0]);
	run("end-cancel-nested", CANCEL, 4, 1, rep[0]);
	run("end-dtor", DTOR, 2, 1, rep[0]);
	pmg_domain_new(&d, "end-none", 0);
	pthread_create(&t, NULL, balanced, d);
	pthread_join(t, NULL);
	drain(rep[0], buf, sizeof(buf));
	tap_ok(!strstr(buf, "ended with") && pmg_domain_delete(&d) == 0,
	       "a thread that closed its windows ends without a report");
	probe_end();
	return tap_done();
}
