// SPDX-License-Identifier: MIT
/*
 * libpmguard loaded with dlopen(), as a language binding (ctypes, cffi,
 * JNI) or a plugin loads it: this program does not link it.
 * The shared library's initial-exec TLS (the inline windows' counts) puts
 * its whole TLS block into the static TLS surplus, which glibc keeps small
 * for dlopen (glibc.rtld.optional_static_tls, 512 bytes by default); the
 * library must fit, and its per-thread state must work in threads that
 * existed before it was loaded.  Each case runs in a child started with
 * GLIBC_TUNABLES set to the default budget, explicitly.  Both backends.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdint.h>

#include "tap.h"
#include "pmguard.h"

#define PAGE 4096
#define TLS_BUDGET 512 /* glibc.rtld.optional_static_tls default */
#define TLS_MAX 384 /* what libpmguard may take of it (376 now) */

static char lib[4200];

/* The library next to this binary's directory (build/tests/..), or by
 * its soname (the PKU guest puts it in /lib). */
static void find_lib(void)
{
	char exe[4000];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	snprintf(lib, sizeof(lib), "libpmguard.so.0");
	if (n <= 0)
		return;
	exe[n] = 0;
	slash = strrchr(exe, '/');
	if (!slash)
		return;
	*slash = 0;
	snprintf(lib, sizeof(lib), "%s/../libpmguard.so.0", exe);
	if (access(lib, R_OK))
		snprintf(lib, sizeof(lib), "libpmguard.so.0");
}

/* ---- the child: dlopen, then use it ---- */
static struct {
	int (*init)(void);
	int (*domain_new)(struct pmg_domain **, const char *, unsigned);
	int (*protect)(struct pmg_domain *, void *, size_t);
	int (*map_local)(const void *, int);
	int (*unmap_local)(const void *, int);
	int (*set_mode)(int);
	int (*set_observer)(pmg_fault_observer, void *);
	int (*set_report_fd)(int);
	const char *(*errormsg)(void);
	int (*backend)(void);
} L;

static char *page;
static volatile int strays;
static void *volatile last_addr;

static void observer(const struct pmg_fault_info *fi, void *arg)
{
	(void)arg;
	if (fi->action == PMG_FAULT_SYNCED)
		return;
	strays++;
	last_addr = fi->addr;
}

static size_t tls_size;

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	int i;

	(void)size;
	(void)arg;
	if (!strstr(info->dlpi_name, "libpmguard"))
		return 0;
	for (i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_TLS)
			tls_size = info->dlpi_phdr[i].p_memsz;
	return 1;
}

/* What any thread does with the loaded library; 0 or a failure code. */
static int use(int base)
{
	volatile char *p = page;
	int s0 = strays;

	p[100] = 0x11; /* stray write: caught */
	if (strays != s0 + 1 || last_addr != page + 100)
		return base + 1;
	if (L.map_local(page, PMG_WRITE) != 1)
		return base + 2;
	p[200] = 0x22; /* in a window: no fault */
	if (L.unmap_local(page, PMG_WRITE) != 1 || strays != s0 + 1 ||
	    p[200] != 0x22)
		return base + 3;
	if (L.protect(NULL, page, PAGE) != -EINVAL || !*L.errormsg())
		return base + 4; /* a message, in this thread */
	L.set_mode(PMG_FAULT_CONTAIN);
	p[300] = 0x33; /* contained: undone */
	L.set_mode(PMG_FAULT_AUDIT);
	if (strays != s0 + 2 || p[300] != 0)
		return base + 5;
	return 0;
}

static int go_fd[2];

/* A thread created before the library was loaded. */
static void *old_thread(void *arg)
{
	char c;

	(void)arg;
	if (read(go_fd[0], &c, 1) != 1)
		return (void *)(intptr_t)99;
	return (void *)(intptr_t)use(40);
}

#define SYM(f, name)                                                 \
	do {                                                         \
		*(void **)&L.f = dlsym(h, name);                     \
		if (!L.f) {                                          \
			printf("# dlsym %s: %s\n", name, dlerror()); \
			return 3;                                    \
		}                                                    \
	} while (0)

static int child(void)
{
	struct pmg_domain *d;
	pthread_t t;
	void *h, *ret;
	int rc;

	if (pipe(go_fd) || pthread_create(&t, NULL, old_thread, NULL))
		return 2;
	h = dlopen(lib, RTLD_NOW);
	if (!h) {
		printf("# dlopen %s: %s\n", lib, dlerror());
		return 10;
	}
	dl_iterate_phdr(phdr_cb, NULL);
	printf("# %s: PT_TLS %zu bytes\n", lib, tls_size);
	SYM(init, "pmg_init");
	SYM(domain_new, "pmg_domain_new");
	SYM(protect, "pmg_protect");
	SYM(map_local, "pmg_map_local");
	SYM(unmap_local, "pmg_unmap_local");
	SYM(set_mode, "pmg_set_fault_mode");
	SYM(set_observer, "pmg_set_fault_observer");
	SYM(set_report_fd, "pmg_set_report_fd");
	SYM(errormsg, "pmg_errormsg");
	SYM(backend, "pmg_backend");
	if (L.init()) {
		printf("# pmg_init: %s\n", L.errormsg());
		return 11;
	}
	printf("# backend %d\n", L.backend());
	page = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED || L.domain_new(&d, "dl", 0) ||
	    L.protect(d, page, PAGE))
		return 12;
	L.set_report_fd(-1);
	L.set_observer(observer, NULL);
	L.set_mode(PMG_FAULT_AUDIT);
	rc = use(20);
	if (rc)
		return rc;
	if (write(go_fd[1], "g", 1) != 1 || pthread_join(t, &ret))
		return 13;
	if (ret)
		return (int)(intptr_t)ret;
	if (tls_size > TLS_MAX)
		return 14;
	return 0;
}

/*
 * dlclose(), as a plugin host or a language runtime unloads a library it
 * is done with: pmguard's signal handlers, the thread-end destructor of a
 * thread that has an error message, must not be left pointing into
 * unmapped code.  The program's own SIGSEGV handler, installed before
 * the load, must still get the program's own faults; loading again works.
 */
static sigjmp_buf jb;
static volatile int prog_faults;

static void prog_segv(int sig)
{
	(void)sig;
	prog_faults++;
	siglongjmp(jb, 1);
}

static void *msg_thread(void *arg)
{
	char c;

	(void)arg;
	if (L.protect(NULL, page, PAGE) != -EINVAL || !*L.errormsg())
		return (void *)(intptr_t)60; /* a message: destructor armed */
	if (read(go_fd[0], &c, 1) != 1) /* after the dlclose() */
		return (void *)(intptr_t)61;
	return NULL;
}

static int load(void **hp)
{
	void *h = dlopen(lib, RTLD_NOW);

	*hp = h;
	if (!h) {
		printf("# dlopen %s: %s\n", lib, dlerror());
		return 10;
	}
	SYM(init, "pmg_init");
	SYM(domain_new, "pmg_domain_new");
	SYM(protect, "pmg_protect");
	SYM(map_local, "pmg_map_local");
	SYM(unmap_local, "pmg_unmap_local");
	SYM(set_mode, "pmg_set_fault_mode");
	SYM(set_observer, "pmg_set_fault_observer");
	SYM(set_report_fd, "pmg_set_report_fd");
	SYM(errormsg, "pmg_errormsg");
	SYM(backend, "pmg_backend");
	if (L.init()) {
		printf("# pmg_init: %s\n", L.errormsg());
		return 11;
	}
	return 0;
}

static int child_dlclose(void)
{
	struct pmg_domain *d;
	char *own;
	pthread_t t;
	void *h, *ret;
	int rc;

	signal(SIGSEGV, prog_segv);
	own = mmap(NULL, PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	page = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (own == MAP_FAILED || page == MAP_FAILED || pipe(go_fd))
		return 2;
	rc = load(&h);
	if (rc)
		return rc;
	if (L.domain_new(&d, "dl", 0) || L.protect(d, page, PAGE))
		return 12;
	L.set_report_fd(-1);
	L.set_observer(observer, NULL);
	L.set_mode(PMG_FAULT_AUDIT);
	if (pthread_create(&t, NULL, msg_thread, NULL))
		return 13;
	rc = use(20);
	if (rc)
		return rc;
	if (dlclose(h))
		return 50;
	/* the thread ends after the unload */
	if (write(go_fd[1], "g", 1) != 1 || pthread_join(t, &ret))
		return 51;
	if (ret)
		return (int)(intptr_t)ret;
	/* the program's own fault reaches the program's handler */
	if (!sigsetjmp(jb, 1))
		*(volatile char *)own = 1;
	if (prog_faults != 1)
		return 52;
	/* loaded again: the page is still protected, strays caught */
	rc = load(&h);
	if (rc)
		return 50 + rc;
	return use(70);
}

/* ---- the parent ---- */
static int run_child(const char *self, const char *which)
{
	char tun[128];
	pid_t pid;
	int st;

	snprintf(tun, sizeof(tun), "glibc.rtld.optional_static_tls=%d",
		 TLS_BUDGET);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		setenv("GLIBC_TUNABLES", tun, 1);
		setenv("PMG_DLOPEN_CHILD", which, 1);
		execl("/proc/self/exe", self, (char *)NULL);
		_exit(127);
	}
	if (pid < 0)
		return -1;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return st;
}

static void ctypes_case(void)
{
	char cmd[8192];
	int st;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* a sanitizer's runtime must be the first library; python3 does not
	 * link it */
	tap_skip("python3 ctypes.CDLL loads the library",
		 "a sanitizer build: python3 does not load its runtime first");
	return;
#endif
	if (system("python3 -c 'import ctypes' >/dev/null 2>&1")) {
		tap_skip("python3 ctypes.CDLL loads the library",
			 "no python3 with ctypes here");
		return;
	}
	snprintf(cmd, sizeof(cmd),
		 "GLIBC_TUNABLES=glibc.rtld.optional_static_tls=%d python3 "
		 "-c 'import ctypes, sys\n"
		 "l = ctypes.CDLL(sys.argv[1])\n"
		 "l.pmg_version.restype = ctypes.c_char_p\n"
		 "assert l.pmg_init() == 0\n"
		 "print(\"# python3 ctypes: pmguard\", "
		 "l.pmg_version().decode())' '%s'",
		 TLS_BUDGET, lib);
	fflush(NULL);
	st = system(cmd);
	tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "python3 ctypes.CDLL loads the library and pmg_init() works");
}

/*
 * The ABI's versions (src/libpmguard.map, src/compat/): a binary linked
 * against 0.1 calls pmg_stats_get(st) and friends without a size and
 * binds to their @PMGUARD_0.1 versions, which fill the 0.1 structs; the
 * default @@PMGUARD_0.2 versions take the caller's size, fill min(size,
 * theirs), zero the rest and refuse nonsense sizes.
 */
static int compat_child(void *arg)
{
	void *h = dlopen(lib, RTLD_NOW);
	int (*old_stats)(struct pmg_stats *), (*old_info)(struct pmg_info *);
	int (*new_stats)(struct pmg_stats *, size_t);
	int (*new_info)(struct pmg_info *, size_t);
	const char *(*msg)(void);
	union {
		struct pmg_stats s;
		struct pmg_info i;
		unsigned char b[256];
	} u;
	const char *olds[] = { "pmg_stats_get", "pmg_get_info",
			       "pmg_pool_get_info", "pmg_persist_get_info" };
	size_t k;

	(void)arg;
	if (!h)
		return 10;
	for (k = 0; k < sizeof(olds) / sizeof(olds[0]); k++)
		if (!dlvsym(h, olds[k], "PMGUARD_0.1") ||
		    !dlvsym(h, olds[k], "PMGUARD_0.2") ||
		    dlvsym(h, olds[k], "PMGUARD_0.1") ==
			    dlvsym(h, olds[k], "PMGUARD_0.2")) {
			printf("# %s: no distinct 0.1 and 0.2 versions\n",
			       olds[k]);
			return 11;
		}
	*(void **)&old_stats = dlvsym(h, "pmg_stats_get", "PMGUARD_0.1");
	*(void **)&old_info = dlvsym(h, "pmg_get_info", "PMGUARD_0.1");
	*(void **)&new_stats = dlvsym(h, "pmg_stats_get", "PMGUARD_0.2");
	*(void **)&new_info = dlvsym(h, "pmg_get_info", "PMGUARD_0.2");
	*(void **)&msg = dlsym(h, "pmg_errormsg");
	if (!msg || dlsym(h, "pmg_stats_get") != (void *)new_stats)
		return 12; /* the default is 0.2 */
	memset(&u, 0xa5, sizeof(u));
	if (old_stats(&u.s) || u.b[0] || u.b[127] || u.b[128] != 0xa5)
		return 13; /* 0.1: 128 bytes, no more */
	memset(&u, 0xa5, sizeof(u));
	if (old_info(&u.i) || u.i.backend == PMG_BACKEND_NONE ||
	    u.b[32] != 0xa5)
		return 14;
	memset(&u, 0xa5, sizeof(u));
	if (new_stats(&u.s, 200) || u.b[199] || u.b[200] != 0xa5)
		return 15; /* a newer caller's tail: zeroed */
	memset(&u, 0xa5, sizeof(u));
	if (new_info(&u.i, 32) || u.b[32] != 0xa5)
		return 16;
	if (new_stats(&u.s, 127) != -EINVAL || new_stats(&u.s, 0) != -EINVAL ||
	    new_stats(&u.s, 65537) != -EINVAL ||
	    new_stats(NULL, 128) != -EINVAL)
		return 17;
	if (new_info(&u.i, 3) != -EINVAL || !strstr(msg(), "size 3")) {
		printf("# message: %s\n", msg());
		return 18;
	}
	return 0;
}

static void compat_case(void)
{
	int st = tap_child(compat_child, NULL);

	tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "pmg_stats_get, pmg_get_info, pmg_pool_get_info, "
	       "pmg_persist_get_info: 0.1 versions (no size) fill the 0.1 "
	       "struct; 0.2 (default) fill min(size), zero the rest, refuse "
	       "sizes below the first struct or over 65536 (status %#x)",
	       st);
}

int main(int argc, char **argv)
{
	int st;

	(void)argc;
	find_lib();
	if (getenv("PMG_DLOPEN_CHILD"))
		return strcmp(getenv("PMG_DLOPEN_CHILD"), "close")
			       ? child()
			       : child_dlclose();
	tap_init(4);
	tap_diag("library: %s", lib);
	st = run_child(argv[0], "1");
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		tap_diag("child: %s %d", WIFEXITED(st) ? "exit" : "signal",
			 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "dlopen() with the default static TLS budget (%d bytes): "
	       "loads, PT_TLS <= %d bytes, domain, protect, window, stray "
	       "writes caught (audit, contain) and error messages in the "
	       "loading thread and in one that predates the load",
	       TLS_BUDGET, TLS_MAX);
	st = run_child(argv[0], "close");
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		tap_diag("child: %s %d", WIFEXITED(st) ? "exit" : "signal",
			 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "dlclose(): a thread with an error message ends after it, the "
	       "program's own SIGSEGV handler still gets its faults, loading "
	       "again works and catches stray writes");
	ctypes_case();
	compat_case();
	return tap_done();
}
