// SPDX-License-Identifier: MIT
/*
 * A pool whose program unmapped part of it, then closed it (linked with
 * the shared library, which sees the munmap()): the close returns 0, what
 * is left of the pool's mapping is sealed (PROT_NONE, no longer the
 * file's), so a stale store into it faults instead of landing in the
 * file, and the same process can open the pool again (no mapping keeps
 * the file's lock).  docs/pool.md, "What a program can do to a pool".
 * Runs on either backend (the host suite: mprotect; the guest: PKU).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pmguard.h>
#include <stdbool.h>

#include "tap.h"

#define SZ (4u << 20)
#define OFF_LO 100u		/* a byte in the first half */
#define OFF_HI (SZ - 100u)	/* a byte in the second half */

static char dir[64], path[96];
static char *stale;		/* the closed pool's byte, for the child */

static int stale_store(void *arg)
{
	(void)arg;
	*(volatile char *)stale = 'X';
	return 0;	/* landed: the test fails */
}

/* The file's byte at @off, read by pread (not through any mapping). */
static int file_byte(size_t off)
{
	unsigned char c;
	int fd = open(path, O_RDONLY);
	ssize_t r = fd < 0 ? -1 : pread(fd, &c, 1, (off_t)off);

	if (fd >= 0)
		close(fd);
	return r == 1 ? c : -1;
}

/* Is [a, a+n) one PROT_NONE mapping of no file ("---p", inode 0)? */
static bool sealed(uintptr_t a, size_t n)
{
	char line[512];
	unsigned long lo, hi, ino;
	char perms[8];
	bool ok = false;
	FILE *f = fopen("/proc/self/maps", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %7s %*s %*s %lu", &lo, &hi, perms,
			   &ino) == 4 && lo <= a && a < hi)
			ok = hi >= a + n && !strcmp(perms, "---p") && !ino;
	if (f)
		fclose(f);
	return ok;
}

static void one(const char *half, bool first)
{
	struct pmg_pool_config *cfg = NULL;
	struct pmg_pool *pool = NULL;
	size_t keep = first ? OFF_HI : OFF_LO;	/* a byte of the rest */
	char *base;
	int rc, st;

	snprintf(path, sizeof(path), "%s/part-%s.pool", dir, half);
	unlink(path);
	if (pmg_pool_config_new(&cfg) || pmg_pool_config_set_size(cfg, SZ) ||
	    pmg_pool_create(&pool, path, cfg)) {
		tap_diag("pool: %s", pmg_errormsg());
		tap_ok(0, "%s half unmapped: the pool made", half);
		pmg_pool_config_delete(&cfg);
		return;
	}
	base = pmg_pool_address(pool);
	pmg_memcpy_persist(base + keep, "d", 1);
	munmap(first ? base : base + SZ / 2, SZ / 2);
	rc = pmg_pool_close(&pool);
	tap_ok(rc == 0 && sealed((uintptr_t)base + (first ? SZ / 2 : 0),
				 SZ / 2),
	       "%s half unmapped, then closed: 0 (%d), the rest sealed "
	       "PROT_NONE, not the file's", half, rc);

	stale = base + keep;
	st = tap_child(stale_store, NULL);
	if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV))
		tap_diag("child: %s %d", WIFEXITED(st) ? "exit" : "signal",
			 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	tap_ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV &&
	       file_byte(keep) == 'd',
	       "%s half: a stale store into the rest faults (SIGSEGV), "
	       "the file's byte intact ('%c')", half, file_byte(keep));

	rc = pmg_pool_open(&pool, path, cfg);
	if (rc)
		tap_diag("open: %s", pmg_errormsg());
	tap_ok(rc == 0, "%s half: the same process opens the pool again "
	       "(%d: no mapping holds its lock)", half, rc);
	if (!rc)
		pmg_pool_close(&pool);
	pmg_pool_config_delete(&cfg);
	unlink(path);
}

int main(void)
{
	const char *t = getenv("TMPDIR");

	tap_init(6);
	snprintf(dir, sizeof(dir), "%s/pmg-poolclose.XXXXXX", t && *t ? t :
		 "/tmp");
	if (!mkdtemp(dir)) {
		printf("1..0 # SKIP mkdtemp %s: %s\n", dir, strerror(errno));
		return 77;
	}
	one("first", true);
	one("second", false);
	rmdir(dir);
	return tap_done();
}
