// SPDX-License-Identifier: MIT
/*
 * Out of memory: every malloc/calloc/realloc/strdup/mmap the library makes
 * in a workload fails once, and each failure must end in a clean error.
 * Run N (N = 1, 2, ...) makes the Nth such call fail (tests/failinject.h,
 * linked with --wrap: the shipped library has no hook for it), in a
 * forked child with a fresh library, until a run makes fewer than N calls.
 * Each run must: not crash or hang; have every call that failed return a
 * negative errno with a message in pmg_errormsg() (pthread_create():
 * EAGAIN); leave no more heap blocks or mappings live after cleaning up
 * than the run with no failure does (and, in the ASan build, no leak
 * LeakSanitizer sees: the child exits through it).  The distinct call
 * sites that failed are named (addr2line) and counted; the sites this
 * workload must reach are listed in want_sites[] and each must have
 * failed at least once.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pmguard.h>

#include "tap.h"
#include "failinject.h"
#include "valgrind-probe.h"

#define PAGE 4096
#define MAX_RUNS 2000
#define NPAGES 20 /* ranges protected: the registry grows past 16 */

/* What a child reports to the parent. */
struct result {
	bool fired; /* the Nth call came and failed */
	void *site;
	char what[8];
	int unclean; /* calls that failed without a clean error */
	char bad[160]; /* the first of them */
	long live_heap, live_maps;
};

static struct result res;
static char pool_path[256];
/* quarantine.c: closed pools' address ranges (docs/pool.md), kept
 * mappings by design; off in the pass that counts mappings */
extern unsigned _pmg_pool_quarantine_max;
static bool quarantine = true;

static void unclean(const char *call, int rc)
{
	if (!res.unclean++)
		snprintf(res.bad, sizeof(res.bad),
			 "%s returned %d, message "
			 "'%s'",
			 call, rc, pmg_errormsg());
}

/*
 * step(name, call): the call's rc must be 0, or a negative errno with a
 * message of its own (pmg_errormsg() changed by the call: the message of
 * an earlier failure left in place does not count).
 */
static char msg_before[512];

static void snap(void)
{
	snprintf(msg_before, sizeof(msg_before), "%s", pmg_errormsg());
}

static int step_check(const char *call, int rc)
{
	if (rc > 0 || rc < -4095 ||
	    (rc < 0 &&
	     (!pmg_errormsg()[0] || !strcmp(pmg_errormsg(), msg_before))))
		unclean(call, rc);
	return rc;
}
#define step(name, call) step_check(name, (snap(), (call)))

static bool granted(const struct pmg_fault_info *f, void *arg)
{
	(void)f;
	(void)arg;
	return false;
}

static void observed(const struct pmg_fault_info *f, void *arg)
{
	(void)f;
	(void)arg;
}

static void *thread_body(void *arg)
{
	struct pmg_domain *d = arg, *x = NULL;

	if (step("pmg_open in a thread", pmg_open(d, PMG_WRITE)) == 0)
		step("pmg_close in a thread", pmg_close(d, PMG_WRITE));
	/* a formatted message: the thread's message buffer */
	if (pmg_domain_new(&x, "", 0) != -EINVAL || !pmg_errormsg()[0])
		unclean("pmg_domain_new(\"\") in a thread", -1);
	return NULL;
}

static void workload(void)
{
	struct pmg_domain *d = NULL, *bad = NULL;
	struct pmg_pool_config *cfg = NULL;
	struct pmg_pool *pool = NULL;
	char *mem, buf[64];
	bool prot[NPAGES] = { false };
	pthread_t t;
	int i, rc;

	if (step("pmg_init", pmg_init()))
		return;
	pmg_set_fault_mode(PMG_FAULT_AUDIT);
	pmg_set_report_fd(-1);
	mem = __real_mmap(NULL, NPAGES * PAGE, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return;
	/* a formatted message: this thread's message buffer */
	if (pmg_domain_new(&bad, "", 0) != -EINVAL || !pmg_errormsg()[0])
		unclean("pmg_domain_new(\"\")", -1);
	step("pmg_set_fault_observer", pmg_set_fault_observer(observed, NULL));
	if (step("pmg_domain_new", pmg_domain_new(&d, "oom", 0)) == 0) {
		step("pmg_domain_set_callback",
		     pmg_domain_set_callback(d, granted, NULL));
		for (i = 0; i < NPAGES; i++)
			prot[i] = step("pmg_protect",
				       pmg_protect(d, mem + i * PAGE, PAGE)) ==
				  0;
		if (step("pmg_open", pmg_open(d, PMG_WRITE)) == 0) {
			mem[0] = 1;
			step("pmg_close", pmg_close(d, PMG_WRITE));
		}
		if (prot[1])
			*(volatile char *)(mem + PAGE) = 2; /* audited */
		rc = pthread_create(&t, NULL, thread_body, d);
		if (rc == 0)
			pthread_join(t, NULL);
		else if (rc != EAGAIN)
			unclean("pthread_create", rc);
	}
	if (step("pmg_pool_config_new", pmg_pool_config_new(&cfg)) == 0) {
		pmg_pool_config_set_size(cfg, 4 * PAGE);
		pmg_pool_config_set_flags(cfg, PMG_POOL_OVERWRITE);
		if (step("pmg_pool_create",
			 pmg_pool_create(&pool, pool_path, cfg)) == 0) {
			memset(buf, 7, sizeof(buf));
			if (!pmg_memcpy_persist(pmg_pool_address(pool), buf,
						sizeof(buf)) &&
			    !pmg_errormsg()[0])
				unclean("pmg_memcpy_persist", -errno);
			step("pmg_pool_close", pmg_pool_close(&pool));
		}
		if (step("pmg_pool_open",
			 pmg_pool_open(&pool, pool_path, NULL)) == 0)
			step("pmg_pool_close", pmg_pool_close(&pool));
		pmg_pool_config_delete(&cfg);
	}
	/* cleaning up: each of these must work whatever failed before */
	for (i = 0; i < NPAGES; i++)
		if (prot[i] && pmg_unprotect(mem + i * PAGE, PAGE))
			unclean("pmg_unprotect (cleanup)", -1);
	if (d &&
	    (pmg_domain_set_callback(d, NULL, NULL) || pmg_domain_delete(&d)))
		unclean("pmg_domain_delete (cleanup)", -1);
	pmg_set_fault_observer(NULL, NULL);
	__real_munmap(mem, NPAGES * PAGE);
	unlink(pool_path);
}

static int run(long n, int fd)
{
	if (!quarantine)
		_pmg_pool_quarantine_max = 0;
	fi_arm(n);
	workload();
	fi_disarm();
	res.fired = fi.site != NULL;
	res.site = fi.site;
	snprintf(res.what, sizeof(res.what), "%s", fi.what ? fi.what : "");
	res.live_heap = fi.live_heap;
	res.live_maps = fi.live_maps;
	if (getenv("PMG_OOM_VERBOSE"))
		for (size_t i = 0; i < FI_SLOTS; i++)
			if (fi.maps[i].n)
				fprintf(stderr,
					"#   run %ld: live map %#lx+%zu "
					"from %p\n",
					n, (unsigned long)fi.maps[i].a,
					fi.maps[i].n, fi.maps[i].site);
	if (write(fd, &res, sizeof(res)) != (ssize_t)sizeof(res))
		return 2;
	return res.unclean ? 1 : 0;
}

/* One run in a child; 0 and *r filled, or -1 (crash: *st). */
static int run_child(long n, struct result *r, int *st)
{
	int p[2];
	pid_t pid;
	ssize_t got;

	if (pipe(p))
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		close(p[0]);
		exit(run(n, p[1])); /* exit(): LeakSanitizer looks */
	}
	close(p[1]);
	got = read(p[0], r, sizeof(*r));
	close(p[0]);
	while (waitpid(pid, st, 0) < 0 && errno == EINTR)
		;
	return got == (ssize_t)sizeof(*r) ? 0 : -1;
}

extern char __executable_start[]; /* the linker's: where we are loaded */

/* "function at file:line" of @site in this binary, via addr2line. */
static void site_name(void *site, char *out, size_t size)
{
	char cmd[600], self[400], line[100];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	FILE *f;

	snprintf(out, size, "%p", site);
	if (n <= 0)
		return;
	self[n] = 0;
	/* the call instruction, not the one after it */
	snprintf(cmd, sizeof(cmd), "addr2line -f -s -e '%s' %#lx 2>/dev/null",
		 self, (unsigned long)((char *)site - 1 - __executable_start));
	f = popen(cmd, "r");
	if (!f)
		return;
	if (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		snprintf(out, size, "%s", line);
		if (fgets(line, sizeof(line), f)) {
			line[strcspn(line, "\n")] = 0;
			snprintf(out + strlen(out), size - strlen(out),
				 " at %s", line);
		}
	}
	pclose(f);
}

/*
 * The allocations this workload must make fail, by the function that
 * calls (as addr2line names it: static functions may be inlined into
 * their callers, so a site can show up under either name); mprotect:
 * required on the mprotect backend only (the host suite's).  On PKU (the
 * guest) the thread's start record (thread.c create()) and the
 * registration of its window counts (keys.c _pmg_thread_register()) are
 * reached instead of the mprotect ones: named, not required.
 */
static const struct {
	const char *fn;
	bool mprotect;
} want_sites[] = {
	{ "err_buf", false }, /* state.c: a thread's messages */
	{ "domain_new", false }, /* domain.c: the handle */
	{ "hook_publish", false }, /* hooks.c: callback, observer */
	{ "rt_grow", false }, /* registry.c: both copies, grown by an insert */
	{ "twin_of", true }, /* window.c: windows per thread */
	{ "lz_make", true }, /* mpwin.c: lazy write windows */
	{ "pmg_pool_config_new", false }, /* pool.c */
	{ "pool_alloc", false }, /* pool.c: the pool */
	{ "_pmg_pool_reserve", false }, /* quarantine.c: its address range */
	{ "map_at", false }, /* pool.c: MAP_SYNC, then without */
	{ "_pmg_pool_map_alias", true }, /* alias.c: mprotect's alias */
	{ "make_none", false }, /* pool.c: the quarantine */
};
#define NWANT (sizeof(want_sites) / sizeof(want_sites[0]))

static void *sites[256];
static char names[256][200];
static int nsites;

struct pass {
	long runs; /* the last one completed: no failure */
	int crashed, unclean;
	char first_bad[300];
	struct result clean;
	long leak_n, leak_heap, leak_maps; /* the worst run */
};

static void pass(bool quar, struct pass *p)
{
	struct result r;
	long n;
	int i, st;

	memset(p, 0, sizeof(*p));
	quarantine = quar;
	for (n = 1; n <= MAX_RUNS; n++) {
		if (run_child(n, &r, &st)) {
			p->crashed++;
			tap_diag("run %ld: the child %s %d", n,
				 WIFSIGNALED(st) ? "died of signal" : "exited",
				 WIFSIGNALED(st) ? WTERMSIG(st)
						 : WEXITSTATUS(st));
			continue;
		}
		if (!r.fired) {
			p->clean = r;
			if (WEXITSTATUS(st))
				p->unclean++;
			break;
		}
		if (r.unclean || WEXITSTATUS(st)) {
			p->unclean++;
			if (!p->first_bad[0])
				snprintf(p->first_bad, sizeof(p->first_bad),
					 "run %ld (%s): %s (exit %d)", n,
					 r.what, r.bad, WEXITSTATUS(st));
		}
		for (i = 0; i < nsites && sites[i] != r.site; i++)
			;
		if (i == nsites && nsites < 256) {
			sites[nsites] = r.site;
			site_name(r.site, names[nsites], sizeof(names[0]));
			tap_diag("site %d: %s fails first at run %ld: %s",
				 nsites + 1, r.what, n, names[nsites]);
			nsites++;
		}
		if (getenv("PMG_OOM_VERBOSE"))
			tap_diag("run %ld: %s at %p; live %ld heap, %ld maps",
				 n, r.what, r.site, r.live_heap, r.live_maps);
		if (r.live_heap > p->leak_heap ||
		    (!quar && r.live_maps > p->leak_maps)) {
			p->leak_heap = r.live_heap > p->leak_heap
					       ? r.live_heap
					       : p->leak_heap;
			p->leak_maps = r.live_maps > p->leak_maps
					       ? r.live_maps
					       : p->leak_maps;
			p->leak_n = n;
		}
	}
	p->runs = n;
	unlink(pool_path);
	tap_diag("quarantine %s: %ld runs, %ld calls failing one at a time; "
		 "%d distinct call sites so far",
		 quar ? "on" : "off", n, n - 1, nsites);
	if (p->first_bad[0])
		tap_diag("%s", p->first_bad);
}

int main(void)
{
	struct pass a, b;
	unsigned w, found = 0, need = 0;
	bool leaky, mprotect;
	int i;

	tap_init(4);
	if (pmg_under_valgrind()) {
		/* valgrind's malloc is its own; the wrappers still run, but
		 * the fault path does not (docs/testing.md) */
		for (i = 0; i < 4; i++)
			tap_skip("allocation-failure injection",
				 PMG_VALGRIND_WHY);
		return tap_done();
	}
	snprintf(pool_path, sizeof(pool_path), "/tmp/pmg-oom-%d.pool",
		 (int)getpid());
	pass(true, &a);
	pass(false, &b);
	tap_ok(a.crashed + b.crashed == 0 && a.runs <= MAX_RUNS &&
		       b.runs <= MAX_RUNS,
	       "%ld + %ld runs, each with one allocation failing: none "
	       "crashed or hung (%d did)",
	       a.runs, b.runs, a.crashed + b.crashed);
	tap_ok(a.unclean + b.unclean == 0,
	       "every failed allocation ended in a clean error: a negative "
	       "errno and a message (%d runs did not)",
	       a.unclean + b.unclean);
	leaky = a.leak_heap > a.clean.live_heap ||
		b.leak_heap > b.clean.live_heap ||
		b.leak_maps > b.clean.live_maps;
	if (leaky)
		tap_diag("worst runs: %ld (quarantine on) left %ld heap blocks "
			 "live, the clean run %ld; %ld (off) %ld blocks and %ld "
			 "mappings, the clean run %ld and %ld",
			 a.leak_n, a.leak_heap, a.clean.live_heap, b.leak_n,
			 b.leak_heap, b.leak_maps, b.clean.live_heap,
			 b.clean.live_maps);
	tap_ok(!leaky && a.runs <= MAX_RUNS && b.runs <= MAX_RUNS,
	       "no run leaves more heap blocks live than the clean run (%ld), "
	       "nor, with the quarantine off, more mappings (%ld)",
	       a.clean.live_heap, b.clean.live_maps);
	/* addr2line missing (the guest's initramfs): sites not named */
	if (nsites && !strncmp(names[0], "0x", 2)) {
		tap_skip("the allocation sites this workload must reach each "
			 "failed",
			 "no addr2line to name the call sites");
		return tap_done();
	}
	/* the backend the children had (after them: each starts fresh) */
	if (pmg_init())
		tap_diag("pmg_init: %s", pmg_errormsg());
	mprotect = pmg_backend() == PMG_BACKEND_MPROTECT;
	for (w = 0; w < NWANT; w++) {
		bool hit = false;

		if (want_sites[w].mprotect && !mprotect)
			continue;
		need++;
		for (i = 0; i < nsites && !hit; i++)
			hit = !strncmp(names[i], want_sites[w].fn,
				       strlen(want_sites[w].fn));
		if (hit)
			found++;
		else
			tap_diag("no failure at %s", want_sites[w].fn);
	}
	tap_ok(found == need,
	       "the %u allocation sites this workload must "
	       "reach on the %s backend each failed (%u of them; %d call "
	       "sites in all)",
	       need, pmg_backend_name(pmg_backend()), found, nsites);
	return tap_done();
}
