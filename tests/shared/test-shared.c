// SPDX-License-Identifier: MIT
/*
 * The shared library as a user links it (-lpmguard, no --wrap): its
 * pthread_create interposes libc's, so threads created inside a window
 * start at the defaults; exported symbols work through the .so; a thread
 * that ends or is cancelled inside a window has it closed (and reported)
 * at its end, so the domain is write-protected and deletable again.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>

#include "tap.h"
#include "probe.h"

#define PAGE 4096

static struct pmg_domain *dom;
static char *pg;

static void *in_thread(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)probe(dom, pg + 1, PMG_WRITE);
}

static int ready[2];

static void *end_inside(void *arg)
{
	pmg_write_begin(dom);
	pmg_write_begin(dom);
	if (arg) {
		if (write(ready[1], "r", 1) != 1)
			return NULL;
		for (;;)
			pause();
	}
	pthread_exit(NULL);
}

/* A thread ends (@cancel: is cancelled) inside two nested windows. */
static int end_case(int cancel, int rep)
{
	struct pmg_domain *d2 = NULL;
	char buf[2048], c;
	pthread_t t;
	ssize_t n;
	int ok = 1;

	CHECK(ok, pthread_create(&t, NULL, end_inside,
				 (void *)(intptr_t)cancel) == 0);
	if (cancel) {
		CHECK(ok, read(ready[0], &c, 1) == 1);
		CHECK(ok, pthread_cancel(t) == 0);
	}
	CHECK(ok, pthread_join(t, NULL) == 0);
	CHECK(ok, probe(dom, pg + 64, PMG_WRITE) == 1);
	n = read(rep, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	CHECK(ok, strstr(buf, "ended with 2 write and 0 read window(s) open "
			 "on domain 'shared'") != NULL);
	CHECK(ok, pmg_unprotect(pg, PAGE) == 0);
	CHECK(ok, pmg_domain_delete(&dom) == 0);
	/* a fresh domain for the next case */
	CHECK(ok, pmg_domain_new(&d2, "shared", 0) == 0 &&
		  pmg_protect(d2, pg, PAGE) == 0);
	dom = d2;
	return ok;
}

int main(void)
{
	Dl_info info;
	pthread_t t;
	void *res;

	int rep[2];

	tap_init(6);
	pg = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int ok = pmg_domain_new(&dom, "shared", 0) == 0 &&
		 pmg_protect(dom, pg, PAGE) == 0;

	tap_ok(ok, "domain and range through libpmguard.so (%s)",
	       pmg_backend_name(pmg_backend()));
	probe_begin();
	memset(&info, 0, sizeof(info));
	ok = dladdr((void *)pthread_create, &info) && info.dli_fname &&
	     strstr(info.dli_fname, "libpmguard.so");
	tap_ok(ok, "pthread_create resolves to libpmguard.so (%s)",
	       info.dli_fname ? info.dli_fname : "?");
	tap_ok(probe(dom, pg, PMG_WRITE) == 1 &&
	       pmg_write_begin(dom) == 0 && probe(dom, pg, PMG_WRITE) == 0,
	       "stray write faults, windowed write does not");
	if (pmg_backend() == PMG_BACKEND_PKU) {
		pthread_create(&t, NULL, in_thread, NULL);
		pthread_join(t, &res);
		tap_ok((intptr_t)res == 1, "thread created inside a window "
		       "starts at the defaults (interposed pthread_create)");
	} else {
		tap_skip("thread created inside a window starts at the "
			 "defaults", "mprotect backend: windows are "
			 "process-wide");
	}
	pmg_write_end(dom);
	if (pipe(ready) || pipe(rep) || fcntl(rep[0], F_SETFL, O_NONBLOCK))
		return 1;
	pmg_set_report_fd(rep[1]);
	tap_ok(end_case(0, rep[0]), "a thread ending inside a window has it "
	       "closed and reported; stray write faults; delete succeeds");
	tap_ok(end_case(1, rep[0]), "a thread cancelled inside a window: "
	       "the same");
	probe_end();
	return tap_done();
}
