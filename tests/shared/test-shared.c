// SPDX-License-Identifier: MIT
/*
 * The shared library as a user links it (-lpmguard, no --wrap): its
 * pthread_create interposes libc's, so threads created inside a window
 * start at the defaults; exported symbols work through the .so.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>

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

int main(void)
{
	Dl_info info;
	pthread_t t;
	void *res;

	tap_init(4);
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
	probe_end();
	return tap_done();
}
