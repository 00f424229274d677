// SPDX-License-Identifier: MIT
/*
 * test-pool-ops: what a program may do to a pool's memory and file besides
 * loads, stores and the persistence calls, and what pmguard does then
 * (docs/pool.md, "What a program can do to a pool"): read(2) into it,
 * fork, deleting the file while the pool is open, munmap of part of it
 * (the static library does not see it).  Both backends (PKU in the
 * guest).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <sys/stat.h>

#include "pmguard.h"
#include "tap.h"
#include "capture.h"
#include "dirs.h"

#define PAGE 4096
#define SIZE (16 * PAGE)

static char dir[256];
static int rep_fd;

static struct pmg_pool *create(const char *name, char *path)
{
	struct pmg_pool_config *c = NULL;
	struct pmg_pool *p = NULL;

	snprintf(path, PATH_MAX, "%s/%s", dir, name);
	if (pmg_pool_config_new(&c) || pmg_pool_config_set_size(c, SIZE) ||
	    pmg_pool_config_set_flags(c, PMG_POOL_OVERWRITE) ||
	    pmg_pool_create(&p, path, c))
		tap_diag("create %s: %s", path, pmg_errormsg());
	pmg_pool_config_delete(&c);
	return p;
}

/* A file of known bytes to read(2) from. */
static int source_fd(void)
{
	int fd = tmpfd();

	if (fd >= 0 && write(fd, "0123456789abcdef", 16) != 16) {
		close(fd);
		return -1;
	}
	return fd;
}

/* A strict-mode store at @v: the child must die by SIGABRT with a
 * report naming the address. */
static int store_child(void *v)
{
	pmg_set_report_fd(rep_fd);
	pmg_set_fault_mode(PMG_FAULT_STRICT);
	*(volatile char *)v = 'S';
	return 0;
}

static int store_aborts(char *at)
{
	char rep[4096], hex[32];
	int st, ok = 1;

	if (ftruncate(rep_fd, 0))
		tap_diag("ftruncate: %m");
	lseek(rep_fd, 0, SEEK_SET);
	st = tap_child(store_child, at);
	slurp(rep_fd, rep, sizeof(rep));
	snprintf(hex, sizeof(hex), "%#lx", (unsigned long)(uintptr_t)at);
	CHECK(ok, WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
	CHECK(ok, strstr(rep, "stray write") && strstr(rep, hex));
	if (!ok)
		tap_diag("child status %#x; report: %s", st, rep);
	return ok;
}

/*
 * read(2) into a protected pool: the kernel's store meets the protection
 * too (page protection, or the thread's PKRU: the CPU checks it for the
 * kernel's accesses to user pages), so outside a window it fails with
 * EFAULT and writes nothing; no signal.  Inside a write window it works
 * on PKU; on the mprotect backend's lazy windows only once the page was
 * written (the kernel's fault is not a SIGSEGV that could open it).
 */
static void t_read_into(void)
{
	char path[PATH_MAX], *a;
	struct pmg_pool *p = create("read.pool", path);
	const char *wm = getenv("PMGUARD_MPROTECT_WINDOWS");
	int fd = source_fd(), ok = 1, lazy;
	ssize_t n;

	if (!p || fd < 0) {
		tap_ok(0, "read(2) into a pool: setup");
		tap_ok(0, "read(2) into a pool in a window: setup");
		pmg_pool_close(&p);
		return;
	}
	a = pmg_pool_address(p);
	CHECK(ok, pmg_memset_persist(a, 'H', SIZE) == a);
	lseek(fd, 0, SEEK_SET);
	errno = 0;
	n = read(fd, a + PAGE + 100, 16);
	CHECK(ok, n == -1 && errno == EFAULT);
	CHECK(ok, a[PAGE + 100] == 'H' && a[PAGE + 115] == 'H');
	tap_ok(ok, "read(2) into a protected pool outside a window: -1 EFAULT "
	       "(got %zd, %s), nothing written, no signal", n,
	       strerror(errno));

	ok = 1;
	lazy = pmg_backend() == PMG_BACKEND_MPROTECT &&
	       !(wm && !strcmp(wm, "eager"));
	CHECK(ok, pmg_dax_mk_readwrite(p) == 0);
	lseek(fd, 0, SEEK_SET);
	errno = 0;
	n = read(fd, a + 2 * PAGE, 16);
	CHECK(ok, lazy ? n == -1 && errno == EFAULT : n == 16);
	a[3 * PAGE] = 'w';	/* the page written first */
	lseek(fd, 0, SEEK_SET);
	CHECK(ok, read(fd, a + 3 * PAGE, 16) == 16);
	CHECK(ok, pmg_dax_mk_noaccess(p) == 0);
	CHECK(ok, !memcmp(a + 3 * PAGE, "0123456789abcdef", 16));
	CHECK(ok, lazy ? a[2 * PAGE] == 'H' :
			 !memcmp(a + 2 * PAGE, "0123456789abcdef", 16));
	tap_ok(ok, "read(2) into a pool in a write window: %s; into a page "
	       "written first in the window: works",
	       lazy ? "EFAULT on a page not yet written (mprotect, lazy "
		      "windows)" : "works");
	close(fd);
	pmg_pool_close(&p);
	unlink(path);
}

/*
 * fork(): the child has the pool's mapping (shared: its persistence
 * calls write the same file, which the parent sees) and its protection
 * (a store outside a window aborts, strict).
 */
static int persist_child(void *v)
{
	return pmg_memcpy_persist((char *)v, "child", 6) == v ? 0 : 1;
}

static void t_fork(void)
{
	char path[PATH_MAX], *a;
	struct pmg_pool *p = create("fork.pool", path);
	int ok = 1, st;

	if (!p) {
		tap_ok(0, "fork: setup");
		return;
	}
	a = pmg_pool_address(p);
	st = tap_child(persist_child, a + 100);
	CHECK(ok, WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(ok, !strcmp(a + 100, "child"));
	CHECK(ok, store_aborts(a + 200));
	CHECK(ok, a[200] == 0);
	pmg_pool_close(&p);
	unlink(path);
	tap_ok(ok, "fork: a child's pmg_memcpy_persist() writes the pool the "
	       "parent sees; a child's store outside a window aborts (strict), "
	       "the byte unchanged");
}

/*
 * The pool's file deleted while the pool is open: the mapping and the
 * descriptor keep the file; the pool works and stays protected; the
 * close is clean and the name is gone (a reopen: -ENOENT naming it).
 */
static void t_unlink_open(void)
{
	char path[PATH_MAX], *a;
	struct pmg_pool *p = create("unlinked.pool", path);
	int ok = 1, rc;

	if (!p) {
		tap_ok(0, "the file deleted while open: setup");
		return;
	}
	a = pmg_pool_address(p);
	CHECK(ok, unlink(path) == 0);
	CHECK(ok, pmg_memcpy_persist(a + 100, "kept", 5) == a + 100);
	CHECK(ok, !strcmp(a + 100, "kept"));
	CHECK(ok, store_aborts(a + 200));
	CHECK(ok, a[200] == 0);
	CHECK(ok, pmg_pool_close(&p) == 0);
	rc = pmg_pool_open(&p, path, NULL);
	CHECK(ok, rc == -ENOENT && strstr(pmg_errormsg(), "unlinked.pool"));
	if (rc != -ENOENT)
		tap_diag("reopen: %d %s", rc, pmg_errormsg());
	tap_ok(ok, "the file deleted while the pool is open: persistence "
	       "calls work, a stray store aborts, the close returns 0, a "
	       "reopen is -ENOENT naming the path");
}

/*
 * munmap() of the pool's second half behind the library's back (the
 * static library does not see it: docs/api.md, "Unmapped ranges"): the
 * first half stays protected and its persistence calls work; the close
 * returns 0 and leaves what is mapped there alone.
 */
static void t_munmap_part(void)
{
	char path[PATH_MAX], *a;
	struct pmg_pool *p = create("half.pool", path);
	int ok = 1;

	if (!p) {
		tap_ok(0, "munmap of part of a pool: setup");
		return;
	}
	a = pmg_pool_address(p);
	CHECK(ok, munmap(a + SIZE / 2, SIZE / 2) == 0);
	CHECK(ok, pmg_memcpy_persist(a + 100, "half", 5) == a + 100);
	CHECK(ok, !strcmp(a + 100, "half"));
	CHECK(ok, store_aborts(a + 200));
	CHECK(ok, a[200] == 0);
	pmg_set_report_fd(-1);	/* the close says the range was dropped */
	CHECK(ok, pmg_pool_close(&p) == 0);
	pmg_set_report_fd(2);
	unlink(path);
	tap_ok(ok, "munmap of half a pool (static library: unseen): the other "
	       "half stays protected (a stray store aborts) and its "
	       "persistence calls work; the close returns 0");
}

int main(void)
{
	char disk[256], shm[256];

	tap_init(5);
	if (probe_dirs(dir, sizeof(dir), disk, shm, sizeof(disk)))
		tap_skip_all("no temporary directory");
	rep_fd = tmpfd();
	if (rep_fd < 0)
		tap_skip_all("no temporary file");
	t_read_into();
	tap_diag("backend: %s", pmg_backend_name(pmg_backend()));
	t_fork();
	t_unlink_open();
	t_munmap_part();
	probe_dirs_remove(disk, shm);
	return tap_done();
}
