// SPDX-License-Identifier: MIT
/*
 * test-pool: pools on files (create, open, close, reopen), the shared
 * "pmem" domain, direct access and its guards, stray writes and reads
 * stopped (forked children, strict mode: the fault is proven by si_code
 * and address, the data by reopening), and bad input: each refused with a
 * negative errno and a message, the file checksummed before and after.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>

#include "pmguard.h"
#include "tap.h"
#include "dirs.h"
#include "valgrind-probe.h"
#include "../src/persist.h"
#include "../src/pool.h"

static char dir[256];
static int skipped;

#define tap_skip(n, w) (skipped++, tap_skip(n, w))

static void pathof(char *buf, const char *name)
{
	snprintf(buf, PATH_MAX / 2, "%s/%s", dir, name);
}

/* FNV-1a of the file's bytes, size and mode: "left as it was". */
static uint64_t file_sum(const char *path)
{
	uint64_t h = 1469598103934665603ULL;
	unsigned char buf[8192];
	struct stat st;
	ssize_t n, i;
	int fd;

	if (stat(path, &st))
		return 0;
	h ^= (uint64_t)st.st_size * 31 + st.st_mode;
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return h * 3;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (i = 0; i < n; i++)
			h = (h ^ buf[i]) * 1099511628211ULL;
	close(fd);
	return h;
}

static int write_file(const char *path, size_t size, int c, mode_t mode)
{
	char buf[4096];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	size_t n;

	if (fd < 0)
		return -1;
	memset(buf, c, sizeof(buf));
	for (n = 0; n < size; n += sizeof(buf))
		if (write(fd, buf, size - n < sizeof(buf) ? size - n
					: sizeof(buf)) < 0)
			break;
	close(fd);
	return 0;
}

static struct pmg_pool_config *cfg_of(size_t size, size_t off,
				      unsigned flags)
{
	struct pmg_pool_config *c;

	if (pmg_pool_config_new(&c))
		return NULL;
	pmg_pool_config_set_size(c, size);
	pmg_pool_config_set_offset(c, off);
	pmg_pool_config_set_flags(c, flags);
	return c;
}

/*
 * pmg_pool_create(@p, @path, *@c); on failure a failed TAP test "@what:
 * why" and *@c deleted.  0, or -1 when it failed.
 */
static int create_or_fail(struct pmg_pool **p, const char *path,
			  struct pmg_pool_config **c, const char *what)
{
	if (!pmg_pool_create(p, path, *c))
		return 0;
	tap_ok(0, "%s: %s", what, pmg_errormsg());
	pmg_pool_config_delete(c);
	return -1;
}

static int expected_pmem(bool map_sync)
{
	struct pmg_persist_info pi;

	pmg_persist_get_info(&pi, sizeof(pi));
	return pi.is_pmem_force >= 0 ? pi.is_pmem_force : map_sync;
}

/* ------------------------------------------------------------ basics */

static void t_create_open(void)
{
	struct pmg_pool_config *c = cfg_of(1 << 20, 0, 0);
	struct pmg_pool *p = NULL, *q = NULL;
	struct pmg_pool_info in;
	char path[PATH_MAX], path2[PATH_MAX], *a;
	int ok = 1, rc;
	bool alias_off;

	pathof(path, "basic.pool");
	rc = pmg_pool_create(&p, path, c);
	CHECK(ok, rc == 0);
	if (rc) {
		tap_diag("create: %d %s", rc, pmg_errormsg());
		tap_ok(0, "create, write, close, reopen");
		pmg_pool_config_delete(&c);
		return;
	}
	CHECK(ok, pmg_pool_size(p) == 1 << 20);
	a = pmg_pool_address(p);
	CHECK(ok, a && ((uintptr_t)a & 4095) == 0);
	CHECK(ok, pmg_pool_get_info(p, &in, sizeof(in)) == 0);
	CHECK(ok, in.guarded && !in.noaccess && !in.devdax);
	/* an alias on mprotect (unless PMGUARD_POOL_ALIAS=0), never on PKU */
	alias_off = getenv("PMGUARD_POOL_ALIAS") &&
		    !strcmp(getenv("PMGUARD_POOL_ALIAS"), "0");
	CHECK(ok, in.aliased == (pmg_backend() == PMG_BACKEND_MPROTECT &&
				 !alias_off));
	CHECK(ok, pmg_pool_is_pmem(p) == expected_pmem(in.map_sync));
	CHECK(ok, pmg_dax_map_protected(p) == 1);
	CHECK(ok, pmg_pool_domain(p) &&
		  !strcmp(pmg_domain_name(pmg_pool_domain(p)), "pmem"));
	CHECK(ok, pmg_lookup(a + 4096, NULL, NULL) == pmg_pool_domain(p));
	CHECK(ok, pmg_memcpy_persist(a + 100, "hello pool", 11) == a + 100);
	CHECK(ok, pmg_memset_persist(a + (1 << 19), 0x5a, 70000) ==
		  a + (1 << 19));
	tap_diag("pool: map_sync %d, is_pmem %d, align %zu", in.map_sync,
		 in.is_pmem, in.align);
	/* the same pool again: it is open (its lock is held) */
	pmg_pool_config_set_size(c, 0);
	CHECK(ok, pmg_pool_open(&q, path, c) == -EBUSY && q == NULL);
	/* a second pool shares the one "pmem" domain */
	pathof(path2, "basic2.pool");
	pmg_pool_config_set_size(c, 1 << 16);
	CHECK(ok, pmg_pool_create(&q, path2, c) == 0);
	CHECK(ok, q && pmg_pool_domain(q) == pmg_pool_domain(p));
	CHECK(ok, pmg_pool_close(&q) == 0 && q == NULL);
	unlink(path2);
	CHECK(ok, pmg_pool_close(&p) == 0 && p == NULL);
	CHECK(ok, pmg_pool_close(&p) == 0);	/* NULL-safe */
	/* reopen: the data is there, the file was not truncated */
	CHECK(ok, pmg_pool_open(&p, path, NULL) == 0);
	if (p) {
		a = pmg_pool_address(p);
		CHECK(ok, pmg_pool_size(p) == 1 << 20);
		CHECK(ok, !memcmp(a + 100, "hello pool", 11));
		CHECK(ok, a[(1 << 19) + 69999] == 0x5a &&
			  a[(1 << 19) + 70000] == 0);
		pmg_pool_close(&p);
	}
	/* offset + size: a window into the file */
	pmg_pool_config_set_offset(c, 4096);
	pmg_pool_config_set_size(c, 8192);
	CHECK(ok, pmg_pool_open(&p, path, c) == 0);
	if (p) {
		CHECK(ok, pmg_pool_size(p) == 8192);
		CHECK(ok, ((char *)pmg_pool_address(p))[(1 << 19) - 4096] ==
			  0x5a || 8192 + 4096 <= (1 << 19));
		pmg_pool_close(&p);
	}
	pmg_pool_config_delete(&c);
	CHECK(ok, c == NULL);
	tap_ok(ok, "create, write, close, reopen: data kept, one shared "
	       "domain");
}

static void t_direct_access(void)
{
	struct pmg_pool_config *c = cfg_of(64 << 10, 0, 0);
	struct pmg_pool *p = NULL;
	char path[PATH_MAX];
	void *addr = (void *)1;
	ssize_t n;
	int ok = 1, fd;

	pathof(path, "dax.pool");
	if (create_or_fail(&p, path, &c, "direct access"))
		return;
	n = pmg_dax_direct_access(p, 4096, 100, &addr);
	CHECK(ok, n == (64 << 10) - 4096);
	CHECK(ok, addr == (char *)pmg_pool_address(p) + 4096);
	CHECK(ok, pmg_dax_mk_readwrite(p) == 0);
	memcpy(addr, "direct", 7);
	CHECK(ok, pmg_dax_mk_noaccess(p) == 0);
	CHECK(ok, pmg_persist(addr, 7) == 0);
	CHECK(ok, !memcmp(addr, "direct", 7));
	/* bounds */
	CHECK(ok, pmg_dax_direct_access(p, 0, 64 << 10, &addr) == 64 << 10);
	CHECK(ok, pmg_dax_direct_access(p, (64 << 10) - 1, 1, &addr) == 1);
	CHECK(ok, pmg_dax_direct_access(p, 0, 0, &addr) == -EINVAL &&
		  addr == NULL && *pmg_errormsg());
	CHECK(ok, pmg_dax_direct_access(p, 64 << 10, 1, &addr) == -ERANGE);
	CHECK(ok, pmg_dax_direct_access(p, 100, 64 << 10, &addr) == -ERANGE);
	CHECK(ok, pmg_dax_direct_access(p, 1, SIZE_MAX, &addr) == -ERANGE);
	CHECK(ok, pmg_dax_direct_access(p, SIZE_MAX, 2, &addr) == -ERANGE);
	CHECK(ok, pmg_dax_direct_access(NULL, 0, 1, &addr) == -EINVAL);
	CHECK(ok, pmg_dax_direct_access(p, 0, 1, NULL) == -EINVAL);
	fd = pmg_set_report_fd(-1);	/* the unbalanced close is reported */
	CHECK(ok, pmg_dax_mk_noaccess(p) == -EPERM);
	pmg_set_report_fd(fd);
	CHECK(ok, pmg_dax_mk_readwrite(NULL) == -EINVAL);
	CHECK(ok, pmg_dax_map_protected(NULL) == -EINVAL);
	pmg_pool_close(&p);
	/* an unprotected pool: guards are no-ops, map_protected says 0 */
	pmg_pool_config_set_flags(c, PMG_POOL_UNPROTECTED);
	CHECK(ok, pmg_pool_open(&p, path, c) == 0);
	if (p) {
		CHECK(ok, pmg_dax_map_protected(p) == 0);
		CHECK(ok, pmg_pool_domain(p) == NULL);
		CHECK(ok, pmg_dax_mk_readwrite(p) == 0);
		((char *)pmg_pool_address(p))[0] = 1;	/* no window */
		CHECK(ok, pmg_dax_mk_noaccess(p) == 0);
		pmg_pool_close(&p);
	}
	pmg_pool_config_delete(&c);
	tap_ok(ok, "dax_direct_access analog: address, bounds, guards, "
	       "map_protected");
}

/* --------------------------------------------- faults (forked children) */

struct seen {
	int si_code, sig;
	void *fault_addr, *want;
	void *obs_addr;
	int obs_access, obs_action;
};

static struct seen *seen;
static struct sigaction lib_sa;

/* Record the kernel's siginfo, then hand the fault to pmguard. */
static void spy(int sig, siginfo_t *si, void *uc)
{
	seen->sig = sig;
	seen->si_code = si->si_code;
	seen->fault_addr = si->si_addr;
	if (lib_sa.sa_flags & SA_SIGINFO)
		lib_sa.sa_sigaction(sig, si, uc);
}

static void observe(const struct pmg_fault_info *fi, void *arg)
{
	(void)arg;
	seen->obs_addr = fi->addr;
	seen->obs_access = fi->access;
	seen->obs_action = fi->action;
}

static void arm_spy(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = spy;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigaction(SIGSEGV, &sa, &lib_sa);
	pmg_set_fault_observer(observe, NULL);
	pmg_set_report_fd(-1);
	pmg_set_fault_mode(PMG_FAULT_STRICT);
}

struct fault_arg {
	const char *path;
	unsigned flags;
	size_t off;
	int write;
};

static int stray(void *v)
{
	struct fault_arg *fa = v;
	struct pmg_pool_config *c = cfg_of(0, 0, fa->flags);
	struct pmg_pool *p;
	volatile char *x;

	if (pmg_pool_open(&p, fa->path, c))
		return 3;
	x = (volatile char *)pmg_pool_address(p) + fa->off;
	seen->want = (void *)x;
	arm_spy();
	if (fa->write)
		*x = 'X';
	else
		(void)*x;
	return 0;	/* not reached in strict mode */
}

static int expect_code(void)
{
	return pmg_backend() == PMG_BACKEND_PKU ? 4 /* SEGV_PKUERR */
						: SEGV_ACCERR;
}

/*
 * Run stray(@fa) in a child: it must die by SIGABRT (strict) after one
 * SIGSEGV with the backend's si_code at the address it aimed at, which
 * the observer saw as an access of kind @acc.  1 if so; what the child
 * saw stays in *seen.
 */
static int stray_aborted(struct fault_arg *fa, int acc)
{
	int ok = 1, st;

	memset(seen, 0, sizeof(*seen));
	st = tap_child(stray, fa);
	CHECK(ok, WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
	CHECK(ok, seen->sig == SIGSEGV && seen->si_code == expect_code());
	CHECK(ok, seen->fault_addr == seen->want && seen->want != NULL);
	CHECK(ok, seen->obs_addr == seen->fault_addr &&
		  seen->obs_access == acc);
	tap_diag("child status %#x, si_code %d, addr offset %#lx", st,
		 seen->si_code,
		 (unsigned long)((uintptr_t)seen->fault_addr & 0xfff));
	return ok;
}

static void t_stray_write(void)
{
	struct pmg_pool_config *c = cfg_of(64 << 10, 0, 0);
	struct fault_arg fa = { .off = 5000, .write = 1 };
	struct pmg_pool *p = NULL;
	char path[PATH_MAX], *a;
	int ok = 1;

	pathof(path, "stray.pool");
	fa.path = path;
	if (create_or_fail(&p, path, &c, "stray write"))
		return;
	pmg_memset_persist((char *)pmg_pool_address(p) + 5000, 'a', 1);
	pmg_pool_close(&p);
	CHECK(ok, stray_aborted(&fa, PMG_WRITE));
	CHECK(ok, seen->obs_action == PMG_FAULT_STRICT_ABORT);
	CHECK(ok, pmg_pool_open(&p, path, NULL) == 0);
	if (p) {
		a = pmg_pool_address(p);
		CHECK(ok, a[5000] == 'a');
		pmg_pool_close(&p);
	}
	pmg_pool_config_delete(&c);
	tap_ok(ok, "stray write to a pool outside a window: SIGSEGV "
	       "(si_code %d) at the address, strict abort, byte unchanged",
	       expect_code());
}

static void t_noaccess(void)
{
	struct pmg_pool_config *c = cfg_of(64 << 10, 0, PMG_POOL_NOACCESS);
	struct fault_arg fa = { .off = 8192, .write = 0,
				.flags = PMG_POOL_NOACCESS };
	struct pmg_pool *p = NULL;
	struct pmg_pool_info in;
	char path[PATH_MAX], buf[16] = "";
	int ok = 1;

	if (pmg_under_valgrind()) {
		tap_skip("access-disabled pool: stray read faults",
			 PMG_VALGRIND_WHY);
		pmg_pool_config_delete(&c);
		return;
	}
	pathof(path, "noaccess.pool");
	fa.path = path;
	if (create_or_fail(&p, path, &c, "noaccess"))
		return;
	CHECK(ok, pmg_pool_get_info(p, &in, sizeof(in)) == 0 && in.noaccess);
	CHECK(ok, !strcmp(pmg_domain_name(pmg_pool_domain(p)),
			  "pmem-noaccess"));
	/* the copy calls open read windows on the source themselves */
	CHECK(ok, pmg_memcpy_persist((char *)pmg_pool_address(p) + 8192,
				     "secret", 7) != NULL);
	CHECK(ok, pmg_memcpy_persist(buf, (char *)pmg_pool_address(p) + 8192,
				     7) == buf && !strcmp(buf, "secret"));
	CHECK(ok, pmg_persist((char *)pmg_pool_address(p) + 8192, 7) == 0);
	pmg_flush((char *)pmg_pool_address(p), 64 << 10);
	pmg_pool_close(&p);
	CHECK(ok, stray_aborted(&fa, PMG_READ));
	pmg_pool_config_set_size(c, 0);
	CHECK(ok, pmg_pool_open(&p, path, c) == 0);
	if (p) {
		CHECK(ok, pmg_memcpy(buf, (char *)pmg_pool_address(p) + 8192,
				     7, PMG_F_MEM_NOFLUSH) == buf);
		CHECK(ok, !strcmp(buf, "secret"));
		pmg_pool_close(&p);
	}
	pmg_pool_config_delete(&c);
	tap_ok(ok, "access-disabled pool: stray read faults (si_code, "
	       "address), copies and flushes open read windows themselves");
}

/* ------------------------------------------------------------- bad input */

static void t_bad_config(void)
{
	struct pmg_pool_config *c = NULL;
	struct pmg_pool *p = (struct pmg_pool *)1;
	char path[PATH_MAX];
	int ok = 1;

	pathof(path, "never.pool");
	CHECK(ok, pmg_pool_config_new(NULL) == -EINVAL);
	CHECK(ok, pmg_pool_config_new(&c) == 0 && c);
	CHECK(ok, pmg_pool_config_set_flags(c, 0x100) == -EINVAL &&
		  strstr(pmg_errormsg(), "0x100"));
	CHECK(ok, pmg_pool_config_set_flags(c, PMG_POOL_NOACCESS |
					    PMG_POOL_UNPROTECTED) == -EINVAL);
	CHECK(ok, pmg_pool_config_set_offset(c, 100) == -EINVAL &&
		  strstr(pmg_errormsg(), "100"));
	CHECK(ok, pmg_pool_config_set_mode(c, 010000) == -EINVAL);
	CHECK(ok, pmg_pool_config_set_size(NULL, 1) == -EINVAL);
	/* zero length */
	CHECK(ok, pmg_pool_create(&p, path, c) == -EINVAL && p == NULL &&
		  strstr(pmg_errormsg(), "size 0"));
	CHECK(ok, pmg_pool_create(&p, path, NULL) == -EINVAL);
	CHECK(ok, pmg_pool_create(&p, NULL, c) == -EINVAL);
	CHECK(ok, pmg_pool_open(&p, "", c) == -EINVAL);
	CHECK(ok, pmg_pool_create(NULL, path, c) == -EINVAL);
	CHECK(ok, access(path, F_OK) != 0);
	pmg_pool_config_delete(&c);
	tap_ok(ok, "bad configuration and zero size refused, nothing "
	       "created");
}

static void t_bad_files(void)
{
	struct pmg_pool_config *c = cfg_of(1 << 20, 0, 0);
	struct pmg_pool *p = NULL;
	char path[PATH_MAX], small[PATH_MAX], empty[PATH_MAX];
	uint64_t sum;
	int ok = 1, rc;

	pathof(path, "exists.pool");
	pathof(small, "small.pool");
	pathof(empty, "empty.pool");
	write_file(path, 20000, 'e', 0644);
	write_file(small, 8192, 's', 0644);
	write_file(empty, 0, 0, 0644);
	sum = file_sum(path);

	/* create over an existing file: refused, untouched */
	rc = pmg_pool_create(&p, path, c);
	CHECK(ok, rc == -EEXIST && strstr(pmg_errormsg(), path) &&
		  strstr(pmg_errormsg(), "OVERWRITE"));
	CHECK(ok, file_sum(path) == sum);
	/* open never truncates or extends: a bigger size is refused */
	rc = pmg_pool_open(&p, path, c);
	CHECK(ok, rc == -ERANGE && strstr(pmg_errormsg(), "smaller"));
	CHECK(ok, file_sum(path) == sum);
	tap_diag("file smaller than asked: %d (%s)", rc, pmg_errormsg());
	/* offset past the end */
	pmg_pool_config_set_size(c, 0);
	pmg_pool_config_set_offset(c, 20480);
	rc = pmg_pool_open(&p, path, c);
	CHECK(ok, rc == -ERANGE && strstr(pmg_errormsg(), "past the end"));
	CHECK(ok, file_sum(path) == sum);
	pmg_pool_config_set_offset(c, 0);
	/* an odd-sized file opens whole, and stays as it was */
	CHECK(ok, pmg_pool_open(&p, path, c) == 0 &&
		  pmg_pool_size(p) == 20000);
	pmg_pool_close(&p);
	CHECK(ok, file_sum(path) == sum);
	/* empty file */
	rc = pmg_pool_open(&p, empty, c);
	CHECK(ok, rc == -EINVAL && strstr(pmg_errormsg(), "empty"));
	/* missing file */
	pathof(path, "missing.pool");
	rc = pmg_pool_open(&p, path, c);
	CHECK(ok, rc == -ENOENT && strstr(pmg_errormsg(), path));
	CHECK(ok, access(path, F_OK) != 0);
	/* a directory */
	CHECK(ok, pmg_pool_open(&p, dir, c) == -EISDIR &&
		  strstr(pmg_errormsg(), "directory"));
	pmg_pool_config_set_size(c, 4096);
	CHECK(ok, pmg_pool_create(&p, dir, c) == -EISDIR);
	/* a character device that is not device dax */
	rc = pmg_pool_open(&p, "/dev/null", NULL);
	CHECK(ok, rc == -ENODEV && strstr(pmg_errormsg(), "dax"));
	tap_diag("/dev/null: %d (%s)", rc, pmg_errormsg());
	/* OVERWRITE replaces atomically */
	pathof(path, "exists.pool");
	pmg_pool_config_set_flags(c, PMG_POOL_OVERWRITE);
	CHECK(ok, pmg_pool_create(&p, path, c) == 0 &&
		  pmg_pool_size(p) == 4096);
	CHECK(ok, p && ((char *)pmg_pool_address(p))[0] == 0);
	pmg_pool_close(&p);
	CHECK(ok, file_sum(path) != sum);
	CHECK(ok, dir_entries(dir, NULL, NULL, 0) >= 0);
	pmg_pool_config_delete(&c);
	tap_ok(ok, "existing file, file smaller than asked, offset past end, "
	       "empty, missing, directory, not dax: refused, files "
	       "unchanged");
}

static int ro_child(void *v)
{
	const char *path = v;
	struct pmg_pool *p;
	int rc;

	if (geteuid() == 0 && (setgid(65534) || setuid(65534)))
		return 77;
	rc = pmg_pool_open(&p, path, NULL);
	if (rc != -EACCES) {
		printf("# read-only open gave %d (%s)\n", rc, pmg_errormsg());
		return 1;
	}
	if (!strstr(pmg_errormsg(), "read-write"))
		return 2;
	printf("# read-only: %s\n", pmg_errormsg());
	return 0;
}

static void t_read_only(void)
{
	char path[PATH_MAX];
	uint64_t sum;
	int st;

	pathof(path, "ro.pool");
	write_file(path, 8192, 'r', 0444);
	chmod(dir, 0755);
	sum = file_sum(path);
	st = tap_child(ro_child, path);
	chmod(dir, 0700);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
		tap_skip("read-only file", "cannot drop root privileges");
		return;
	}
	tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
	       file_sum(path) == sum,
	       "read-only file: -EACCES with a message, file unchanged");
}

static void t_enospc(void)
{
	char mnt[PATH_MAX / 2], path[PATH_MAX], keep[PATH_MAX];
	struct pmg_pool_config *c;
	struct pmg_pool *p = NULL;
	uint64_t sum;
	int ok = 1, rc;

	snprintf(mnt, sizeof(mnt), "%s/tiny", dir);
	mkdir(mnt, 0700);
	if (mount("tmpfs", mnt, "tmpfs", 0, "size=64k,mode=0700")) {
		char why[128];

		snprintf(why, sizeof(why), "mount -t tmpfs -o size=64k: %s "
			 "(needs root)", strerror(errno));
		tap_skip("ENOSPC on a full filesystem", why);
		rmdir(mnt);
		return;
	}
	snprintf(path, sizeof(path), "%s/big.pool", mnt);
	snprintf(keep, sizeof(keep), "%s/keep.pool", mnt);
	write_file(keep, 16384, 'k', 0600);
	sum = file_sum(keep);
	c = cfg_of(1 << 20, 0, 0);
	rc = pmg_pool_create(&p, path, c);
	CHECK(ok, rc == -ENOSPC && strstr(pmg_errormsg(), path));
	tap_diag("ENOSPC: %d (%s)", rc, pmg_errormsg());
	CHECK(ok, access(path, F_OK) != 0);
	/* no temporary left */
	CHECK(ok, dir_entries(mnt, NULL, NULL, 0) == 1);
	/* replacing a file on a full filesystem: the old one survives */
	pmg_pool_config_set_flags(c, PMG_POOL_OVERWRITE);
	rc = pmg_pool_create(&p, keep, c);
	CHECK(ok, rc == -ENOSPC);
	CHECK(ok, file_sum(keep) == sum &&
		  dir_entries(mnt, NULL, NULL, 0) == 1);
	pmg_pool_config_delete(&c);
	if (umount2(mnt, MNT_DETACH))
		tap_diag("umount %s: %s", mnt, strerror(errno));
	rmdir(mnt);
	tap_ok(ok, "ENOSPC (64 KiB tmpfs): -ENOSPC, nothing left behind, an "
	       "existing file kept");
}

static void t_devdax(void)
{
	char why[160];
	DIR *d;
	struct dirent *e;
	char dev[PATH_MAX] = "";
	int ok = 1;

	/* the alignment rule itself, as open applies it to device dax */
	CHECK(ok, _pmg_pool_check_align("/dev/dax0.0", 4096, 2 << 20,
					 2 << 20) == -EINVAL &&
		  strstr(pmg_errormsg(), "offset 4096"));
	CHECK(ok, _pmg_pool_check_align("/dev/dax0.0", 2 << 20, 4096,
					 2 << 20) == -EINVAL &&
		  strstr(pmg_errormsg(), "size 4096"));
	CHECK(ok, _pmg_pool_check_align("/dev/dax0.0", 4 << 20, 2 << 20,
					 2 << 20) == 0);
	tap_ok(ok, "device-dax alignment rule: misaligned offset and size "
	       "refused with the alignment named");
	d = opendir("/dev");
	while (d && (e = readdir(d)))
		if (!strncmp(e->d_name, "dax", 3))
			snprintf(dev, sizeof(dev), "/dev/%s", e->d_name);
	if (d)
		closedir(d);
	if (!*dev) {
		snprintf(why, sizeof(why), "no /dev/dax* device here");
		tap_skip("device dax: misaligned offset refused", why);
		return;
	} else {
		struct pmg_pool_config *c = cfg_of(0, 4096, 0);
		struct pmg_pool *p;
		int rc = pmg_pool_open(&p, dev, c);

		tap_ok(rc == -EINVAL, "device dax %s: offset 4096 refused "
		       "(%d: %s)", dev, rc, pmg_errormsg());
		pmg_pool_config_delete(&c);
	}
}

/* PMGUARD_IS_PMEM_FORCE and bad values: fresh children, read once. */
struct envt {
	const char *name, *value;
	int want_rc, want_pmem;
};

static int env_child(void *v)
{
	struct envt *t = v;
	struct pmg_pool_config *c = cfg_of(8192, 0, PMG_POOL_OVERWRITE);
	struct pmg_pool *p = NULL;
	char path[PATH_MAX];
	int rc;

	setenv(t->name, t->value, 1);
	pathof(path, "env.pool");
	unlink(path);
	fclose(stderr);		/* the once-only warning is expected */
	rc = pmg_pool_create(&p, path, c);
	if (rc != t->want_rc)
		return 1;
	if (rc) {
		if (!strstr(pmg_errormsg(), t->name) ||
		    !strstr(pmg_errormsg(), t->value))
			return 2;
		return access(path, F_OK) == 0 ? 4 : 0;
	}
	return pmg_pool_is_pmem(p) == t->want_pmem ? 0 : 3;
}

static void t_env(void)
{
	static struct envt ts[] = {
		{ "PMGUARD_IS_PMEM_FORCE", "1", 0, 1 },
		{ "PMGUARD_IS_PMEM_FORCE", "0", 0, 0 },
		{ "PMGUARD_IS_PMEM_FORCE", "yes", -EINVAL, 0 },
		{ "PMGUARD_MOVNT_THRESHOLD", "12k", -EINVAL, 0 },
		{ "PMGUARD_NO_CLWB", "2", -EINVAL, 0 },
	};
	size_t i;
	int ok = 1, st;

	for (i = 0; i < sizeof(ts) / sizeof(ts[0]); i++) {
		st = tap_child(env_child, &ts[i]);
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			tap_diag("%s=%s: child status %#x", ts[i].name,
				 ts[i].value, st);
			ok = 0;
		}
	}
	tap_ok(ok, "PMGUARD_IS_PMEM_FORCE=0|1 honoured; bad values make "
	       "pool create fail -EINVAL naming variable and value");
}

/* ---- one process at a time: the pool's lock */

/* Test hooks in poolfile.c (weak: the test links, and fails, without them). */
extern int _pmg_pool_no_tmpfile __attribute__((weak));
extern unsigned long _pmg_pool_stale_removed __attribute__((weak));

static const char *lock_path, *self_path;

/* In a fork child (no exec): the parent's lock is not this process's. */
static int lock_child(void *v)
{
	struct pmg_pool *q = NULL;
	char want[32];
	int rc = pmg_pool_open(&q, lock_path, NULL);

	(void)v;
	snprintf(want, sizeof(want), "process %d ", (int)getppid());
	if (rc != -EBUSY || q || !strstr(pmg_errormsg(), want)) {
		printf("# fork child: open %d: %s\n", rc, pmg_errormsg());
		return 1;
	}
	return 0;
}

/* Run this test binary again (exec) to open @path: its exit status. */
static int exec_open(const char *path, const char *want)
{
	pid_t pid;
	int st;

	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		/* argv[0], not /proc/self/exe: under valgrind that is
		 * valgrind's tool */
		execl(self_path, "test-pool", "--open", path, want,
		      (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The exec'd side: "busy" (-EBUSY naming the parent) or "free" (opens). */
static int open_mode(const char *path, const char *want)
{
	struct pmg_pool *q = NULL;
	char holder[32];
	int rc = pmg_pool_open(&q, path, NULL);

	snprintf(holder, sizeof(holder), "process %d ", (int)getppid());
	if (!strcmp(want, "free")) {
		if (rc)
			printf("# exec'd: open %d: %s\n", rc, pmg_errormsg());
		return rc ? 1 : pmg_pool_close(&q) ? 2 : 0;
	}
	if (rc != -EBUSY || !strstr(pmg_errormsg(), holder)) {
		printf("# exec'd: open %d: %s\n", rc, pmg_errormsg());
		return 1;
	}
	return 0;
}

static void t_lock(void)
{
	struct pmg_pool_config *c = cfg_of(1 << 16, 0, 0);
	struct pmg_pool *p = NULL, *q = NULL;
	char path[PATH_MAX], want[32];
	int ok = 1, st, rc;

	pathof(path, "locked.pool");
	lock_path = path;
	CHECK(ok, pmg_pool_create(&p, path, c) == 0);
	snprintf(want, sizeof(want), "process %d ", (int)getpid());
	rc = pmg_pool_open(&q, path, NULL);
	CHECK(ok, rc == -EBUSY && q == NULL);
	CHECK(ok, strstr(pmg_errormsg(), want) != NULL);
	tap_diag("second open: %d (%s)", rc, pmg_errormsg());
	st = tap_child(lock_child, NULL);
	CHECK(ok, WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(ok, exec_open(path, "busy") == 0);
	/* replacing a pool that is open is refused too */
	pmg_pool_config_set_flags(c, PMG_POOL_OVERWRITE);
	CHECK(ok, pmg_pool_create(&q, path, c) == -EBUSY && q == NULL);
	CHECK(ok, pmg_pool_close(&p) == 0);
	CHECK(ok, exec_open(path, "free") == 0);
	CHECK(ok, pmg_pool_open(&p, path, NULL) == 0);
	pmg_pool_close(&p);
	unlink(path);
	pmg_pool_config_delete(&c);
	tap_ok(ok, "a pool open in one process: a second open (same process, "
	       "fork child, exec'd program) and an overwrite get -EBUSY "
	       "naming the holder's pid; after close it opens");
}

/* ---- killed creates leave nothing behind */

static int create_loop(void *v)
{
	struct pmg_pool_config *c = cfg_of(64 << 20, 0, 0);
	const char *path = v;

	for (;;) {
		struct pmg_pool *p = NULL;

		if (pmg_pool_create(&p, path, c) == 0)
			pmg_pool_close(&p);
		unlink(path);
	}
	return 0;
}

static void t_killed_create(void)
{
	char path[PATH_MAX], stale[PATH_MAX], live[PATH_MAX];
	int ok = 1, i, left, fd;
	pid_t pid, dead;

	pathof(path, "kill.pool");
	for (i = 0; i < 12; i++) {
		struct timespec ts = { 0, (5 + 7 * i) * 1000000L };

		fflush(NULL);
		pid = fork();
		if (pid == 0)
			_exit(create_loop(path));
		nanosleep(&ts, NULL);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	left = dir_entries(dir, ".pmg-", NULL, 0);
	tap_diag("12 creates of 64 MiB pools killed: %d temporary files left",
		 left);
	CHECK(ok, left == 0);
	unlink(path);
	/* no O_TMPFILE: stale temporary files of dead creators go */
	pid = fork();
	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	dead = pid;
	snprintf(stale, sizeof(stale), "%s/.x.pool.pmg-%d-1", dir, (int)dead);
	snprintf(live, sizeof(live), "%s/.y.pool.pmg-%d-1", dir,
		 (int)getppid());
	fd = open(stale, O_CREAT | O_WRONLY, 0600);
	close(fd);
	fd = open(live, O_CREAT | O_WRONLY, 0600);
	close(fd);
	CHECK(ok, &_pmg_pool_no_tmpfile != NULL);
	if (&_pmg_pool_no_tmpfile) {
		struct pmg_pool_config *c = cfg_of(1 << 16, 0, 0);
		struct pmg_pool *p = NULL;
		unsigned long before = _pmg_pool_stale_removed;

		_pmg_pool_no_tmpfile = 1;
		pathof(path, "fallback.pool");
		CHECK(ok, pmg_pool_create(&p, path, c) == 0);
		_pmg_pool_no_tmpfile = 0;
		pmg_pool_close(&p);
		unlink(path);
		pmg_pool_config_delete(&c);
		CHECK(ok, access(stale, F_OK) && errno == ENOENT);
		CHECK(ok, access(live, F_OK) == 0);
		CHECK(ok, _pmg_pool_stale_removed == before + 1);
	}
	unlink(stale);
	unlink(live);
	tap_ok(ok, "killed creates leave no temporary file (O_TMPFILE); "
	       "without O_TMPFILE a create removes those of dead creators, "
	       "keeps a live one's");
}

/* ---- no memory kept per last close and reopen */
static void t_reopen_leak(void)
{
	struct pmg_pool_config *c = cfg_of(1 << 16, 0, 0);
	struct pmg_pool *p = NULL;
	char path[PATH_MAX];
	size_t before = 0, after;
	int ok = 1, i;

	/* the quarantine's table (bounded, test-pool-quarantine) kept
	 * small: only the shared domain's memory is measured */
	_pmg_pool_quarantine_max = 1;
	pathof(path, "leak.pool");
	CHECK(ok, pmg_pool_create(&p, path, c) == 0);
	pmg_pool_close(&p);
	for (i = 0; i < 300; i++) {
		if (i == 20)
			before = mallinfo2().uordblks;
		CHECK(ok, pmg_pool_open(&p, path, NULL) == 0);
		pmg_pool_close(&p);
		if (!ok)
			break;
	}
	after = mallinfo2().uordblks;
	tap_diag("280 last-close/reopen cycles: %zd bytes more in use",
		 (ssize_t)(after - before));
	CHECK(ok, after < before + 280 * 16 / 2);
	_pmg_pool_quarantine_max = 256;
	unlink(path);
	pmg_pool_config_delete(&c);
	tap_ok(ok, "each last close deletes the shared domain and a reopen "
	       "re-creates it without keeping memory (its handle is reused)");
}

/*
 * N12: the pool layer's shared domain (pmg_pool_domain()) cannot be
 * deleted behind it, even with its ranges unprotected: -EBUSY and a
 * message; later creates still work and are protected.
 */
static void t_shared_domain_delete(void)
{
	struct pmg_pool_config *c = cfg_of(1 << 16, 0, 0);
	struct pmg_pool *p = NULL, *q = NULL, *r = NULL;
	struct pmg_pool_info in;
	struct pmg_domain *d;
	char path[PATH_MAX], path2[PATH_MAX], path3[PATH_MAX];
	int ok = 1, rc;

	pathof(path, "shdom1.pool");
	pathof(path2, "shdom2.pool");
	pathof(path3, "shdom3.pool");
	CHECK(ok, pmg_pool_create(&p, path, c) == 0);
	if (!p) {
		tap_ok(0, "the pool layer's shared domain: create");
		pmg_pool_config_delete(&c);
		return;
	}
	d = pmg_pool_domain(p);
	CHECK(ok, pmg_unprotect(pmg_pool_address(p), 1 << 16) == 0);
	rc = pmg_domain_delete(&d);
	tap_diag("delete of the shared domain: %d (%s)", rc,
		 rc ? pmg_errormsg() : "deleted");
	CHECK(ok, rc == -EBUSY && d != NULL);
	CHECK(ok, rc && strstr(pmg_errormsg(), "pmem") &&
			  strstr(pmg_errormsg(), "pool"));
	rc = pmg_pool_create(&q, path2, c);
	if (rc)
		tap_diag("the next create: %d %s", rc, pmg_errormsg());
	CHECK(ok, rc == 0);
	CHECK(ok, q && !pmg_pool_get_info(q, &in, sizeof(in)) && in.guarded &&
			  pmg_lookup(pmg_pool_address(q), NULL, NULL) ==
				  pmg_pool_domain(q));
	pmg_pool_close(&q);
	pmg_pool_close(&p);
	/* the last close deletes it, a create makes a new one */
	CHECK(ok, pmg_pool_create(&r, path3, c) == 0);
	CHECK(ok, r && pmg_lookup(pmg_pool_address(r), NULL, NULL) ==
				  pmg_pool_domain(r));
	pmg_pool_close(&r);
	unlink(path);
	unlink(path2);
	unlink(path3);
	pmg_pool_config_delete(&c);
	tap_ok(ok,
	       "the pool layer's shared domain, its range unprotected: "
	       "delete refused (-EBUSY, a message), later creates protected");
}

/*
 * N12, third pass: the last pool closed while the program holds a window
 * on the shared domain (the layer cannot delete it then: it stays, used
 * by no pool), then deleted by the program (allowed: no pool uses it).
 * Later creates must make a new one: they failed, every one, with "not
 * a live domain".
 */
static void t_shared_domain_left(void)
{
	struct pmg_pool_config *c = cfg_of(1 << 16, 0, 0);
	struct pmg_pool *p = NULL;
	struct pmg_pool_info in;
	struct pmg_domain *d;
	char path[PATH_MAX];
	int ok = 1, rc, i;

	pathof(path, "shdom4.pool");
	CHECK(ok, pmg_pool_create(&p, path, c) == 0);
	d = p ? pmg_pool_domain(p) : NULL;
	CHECK(ok, d && pmg_write_begin(d) == 0);
	CHECK(ok, pmg_pool_close(&p) == 0);
	CHECK(ok, d && pmg_write_end(d) == 0);
	rc = pmg_domain_delete(&d);
	tap_diag("the program's delete of the shared domain no pool uses: "
		 "%d",
		 rc);
	unlink(path);
	for (i = 0; i < 2; i++) {
		rc = pmg_pool_create(&p, path, c);
		if (rc)
			tap_diag("create %d after: %d %s", i, rc,
				 pmg_errormsg());
		CHECK(ok, rc == 0);
		CHECK(ok, p && pmg_lookup(pmg_pool_address(p), NULL, NULL) ==
					  pmg_pool_domain(p));
		CHECK(ok, p && !pmg_pool_get_info(p, &in, sizeof(in)) &&
				  in.guarded);
		pmg_pool_close(&p);
		unlink(path);
	}
	unlink(path);
	pmg_pool_config_delete(&c);
	tap_ok(ok, "the shared domain left by a last close inside a window, "
		   "then deleted by the program: later creates make a new one, "
		   "protected");
}

/* ---- a pool unmapped behind the library's back (static: not seen) */
static void t_unmapped_pool(void)
{
	struct pmg_pool_config *c = cfg_of(4 << 12, 0, 0);
	struct pmg_pool *p = NULL, *q = NULL;
	char path[PATH_MAX], path2[PATH_MAX], *a, *b;
	int ok = 1, rc;

	pathof(path, "gone1.pool");
	pathof(path2, "gone2.pool");
	CHECK(ok, pmg_pool_create(&p, path, c) == 0);
	CHECK(ok, pmg_pool_create(&q, path2, c) == 0);
	if (p && q) {
		a = pmg_pool_address(p);
		b = pmg_pool_address(q);
		CHECK(ok, munmap(a, 4 << 12) == 0);
		CHECK(ok, pmg_memcpy_persist(b + 10, "first", 6) == b + 10);
		rc = pmg_pool_close(&p);
		CHECK(ok, rc == 0 && p == NULL);
		if (rc)
			tap_diag("close: %d %s", rc, pmg_errormsg());
		CHECK(ok, pmg_lookup(a, NULL, NULL) == NULL);
		CHECK(ok, pmg_memcpy_persist(b + 20, "second", 7) == b + 20);
		CHECK(ok, !strcmp(b + 10, "first") && !strcmp(b + 20, "second"));
	}
	CHECK(ok, pmg_pool_close(&q) == 0);
	pmg_pool_close(&p);
	/* the shared domain went with the last pool: a new one works */
	CHECK(ok, pmg_pool_open(&p, path2, NULL) == 0);
	CHECK(ok, p && !strcmp((char *)pmg_pool_address(p) + 20, "second"));
	pmg_pool_close(&p);
	unlink(path);
	unlink(path2);
	pmg_pool_config_delete(&c);
	tap_ok(ok, "a pool unmapped behind pmguard's back (munmap not seen): "
	       "the other pool's copies still work, closing it returns 0 and "
	       "unmaps nothing, the domain goes with the last pool");
}

/* The file tests, in @d (see tests/dirs.h). */
#define FILE_TESTS 7
static void file_tests(const char *d)
{
	snprintf(dir, sizeof(dir), "%s", d);
	tap_diag("pool files in %s", dir);
	t_create_open();
	t_direct_access();
	t_stray_write();
	t_noaccess();
	t_bad_files();
	t_lock();
	t_killed_create();
}

int main(int argc, char **argv)
{
	char disk[256], shm[256];
	int i, k;

	if (argc == 4 && !strcmp(argv[1], "--open"))
		return open_mode(argv[2], argv[3]);
	self_path = argv[0];
	tap_init(10 + 2 * FILE_TESTS);
	seen = tap_shared_page();
	if (!seen || probe_dirs(dir, sizeof(dir), disk, shm, sizeof(disk)))
		tap_skip_all("no temporary directory");
	tap_diag("backend on first use; files in %s", dir);
	t_env();		/* first: children must read the variables */
	t_bad_config();
	tap_diag("backend: %s", pmg_backend_name(pmg_backend()));
	for (i = 0; i < 2; i++) {
		const char *d = i ? shm : disk;

		if (*d) {
			file_tests(d);
			continue;
		}
		for (k = 0; k < FILE_TESTS; k++)
			tap_skip("pool file tests", i ? "no tmpfs directory"
				 : "no disk filesystem directory");
	}
	snprintf(dir, sizeof(dir), "%s", *disk ? disk : shm);
	t_read_only();
	t_reopen_leak();
	t_shared_domain_delete();
	t_shared_domain_left();
	t_unmapped_pool();
	t_enospc();
	t_devdax();
	probe_dirs_remove(disk, shm);
	printf("%d passed, %d failed, %d skipped\n",
	       tap_n - tap_failed - skipped, tap_failed, skipped);
	return tap_done();
}
