// SPDX-License-Identifier: MIT
/*
 * A program as a user builds it against an installed libpmguard, with
 * nothing but <pmguard.h> and the flags pkg-config prints (see
 * test-install.sh): a domain, a protected page, a stray write caught, a
 * window opened and closed.  Prints "key: value" lines and, last,
 * "result: ok" (exit 0) or "result: FAIL ..." (exit 1).
 *
 * -DPROG_STATIC: built against libpmguard.a; checks that the link routed
 * pthread_create() to the library's wrapper (-Wl,--wrap=pthread_create
 * from Libs.private).  Otherwise: says which file pmg_version() came from.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include <pmguard.h>

#ifdef PROG_STATIC
int __wrap_pthread_create(pthread_t *, const pthread_attr_t *,
			  void *(*)(void *), void *);
#endif

static int failed;
static volatile char *page;

static void check(int ok, const char *what)
{
	if (!ok) {
		printf("check failed: %s (%s)\n", what, pmg_errormsg());
		failed = 1;
	}
}

static uint64_t strays(void)
{
	struct pmg_stats st;

	return pmg_stats_get(&st, sizeof(st)) == 0 ? st.strays : UINT64_MAX;
}

static void *writer(void *arg)
{
	(void)arg;
	page[64] = 7;		/* a stray write unless the window leaked */
	return NULL;
}

int main(void)
{
	struct pmg_domain *d = NULL;
	uint64_t before;
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = pmg_init();
	check(rc == 0, "pmg_init");
	printf("version: %s\n", pmg_version());
	check(!strcmp(pmg_version(), PMG_VERSION_STRING),
	      "library and header versions agree");
	printf("backend: %s\n", pmg_backend_name(pmg_backend()));
	/* quiet, and every stray write counted and let through once */
	pmg_set_fault_mode(PMG_FAULT_AUDIT);
	pmg_set_report_fd(-1);

	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	check(page != MAP_FAILED, "mmap");
	if (page == MAP_FAILED)
		return 1;
	check(pmg_domain_new(&d, "install-test", 0) == 0, "pmg_domain_new");
	check(pmg_protect(d, (void *)page, 4096) == 0, "pmg_protect");

	before = strays();
	page[0] = 1;		/* stray: caught, audited, allowed once */
	check(strays() == before + 1, "a write outside a window faults");

	before = strays();
	check(pmg_write_begin(d) == 0, "pmg_write_begin");
	page[1] = 2;
	check(pmg_write_end(d) == 0, "pmg_write_end");
	{
		PMG_WRITE_SCOPE(d);
		page[2] = 3;
	}
	check(strays() == before, "writes inside windows do not fault");
	check(pmg_write_end(d) == -EPERM, "an unbalanced close is refused");

	if (pmg_backend() == PMG_BACKEND_PKU) {
		pthread_t t;

		before = strays();
		pmg_write_begin(d);
		check(pthread_create(&t, NULL, writer, NULL) == 0,
		      "pthread_create");
		pthread_join(t, NULL);
		pmg_write_end(d);
		check(strays() == before + 1, "a thread created inside a "
		      "window starts at the defaults");
		printf("thread reset: checked\n");
	} else {
		printf("thread reset: not checkable (windows are "
		       "process-wide on %s)\n", pmg_backend_name(pmg_backend()));
	}
#ifdef PROG_STATIC
	check((void *)pthread_create == (void *)__wrap_pthread_create,
	      "pthread_create is linked to libpmguard's wrapper");
	printf("pthread_create: __wrap_pthread_create\n");
#else
	{
		Dl_info info;

		if (dladdr((void *)pmg_version, &info) && info.dli_fname)
			printf("library: %s\n", info.dli_fname);
		if (dladdr((void *)pthread_create, &info) && info.dli_fname)
			printf("pthread_create: %s\n", info.dli_fname);
	}
#endif
	check(pmg_unprotect((void *)page, 4096) == 0, "pmg_unprotect");
	check(pmg_domain_delete(&d) == 0 && d == NULL, "pmg_domain_delete");
	printf("result: %s\n", failed ? "FAIL" : "ok");
	return failed;
}
