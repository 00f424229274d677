/* SPDX-License-Identifier: MIT */
/*
 * dax-test - pools on real (emulated) persistent memory, run inside the
 * PKU guest by tests/dax/suite.sh:
 *
 *   dax-test fsdax DIR    DIR on a filesystem mounted -o dax (ext4 on
 *                         /dev/pmem0): created pools get MAP_SYNC
 *   dax-test devdax DEV   a device-dax device (/dev/daxX.Y): pools opened
 *                         on it with its alignment
 *
 * Either: the pool is pmem by its own account (pmg_pool_is_pmem() with no
 * PMGUARD_IS_PMEM_FORCE set; fs-DAX: map_sync, devdax: devdax and the
 * device's alignment), the persistence calls write what they are given
 * and it is there after a close and reopen, a stray write outside a window
 * is stopped (the child is aborted, the byte is unchanged), and appends
 * killed by SIGKILL at random moments lose no record they reported.
 * Without arguments (as the VM suite would run it) it skips.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pmguard.h"
#include "tap.h"
#include "kill-mid.h"

#define POOL_SIZE (8u << 20)
#define NSLOTS 256
#define SLOT 4096

static int devdax;
static char path[4096];

static struct pmg_pool *pool_get(int create)
{
	struct pmg_pool_config *c;
	struct pmg_pool *p = NULL;
	int rc;

	pmg_pool_config_new(&c);
	pmg_pool_config_set_size(c, POOL_SIZE);
	if (create && !devdax) {
		unlink(path);
		rc = pmg_pool_create(&p, path, c);
	} else {
		rc = pmg_pool_open(&p, path, c);
	}
	pmg_pool_config_delete(&c);
	if (rc) {
		tap_diag("%s %s: %d: %s", create ? "create" : "open", path, rc,
			 pmg_errormsg());
		return NULL;
	}
	return p;
}

static void t_is_pmem(void)
{
	struct pmg_pool *p;
	struct pmg_pool_info in;
	int ok = 1;

	CHECK(ok, getenv("PMGUARD_IS_PMEM_FORCE") == NULL);
	p = pool_get(1);
	CHECK(ok, p != NULL);
	if (!p) {
		tap_ok(0, "pool on %s", path);
		return;
	}
	CHECK(ok, pmg_pool_get_info(p, &in, sizeof(in)) == 0);
	CHECK(ok, pmg_pool_is_pmem(p) == 1 && in.is_pmem);
	CHECK(ok, pmg_is_pmem(pmg_pool_address(p), POOL_SIZE) == 1);
	if (devdax) {
		CHECK(ok, in.devdax && in.align >= 4096 &&
			  (uintptr_t)in.addr % in.align == 0);
	} else {
		CHECK(ok, in.map_sync && !in.devdax);
	}
	tap_diag("%s: addr %p size %zu align %zu map_sync %d devdax %d "
		 "is_pmem %d guarded %d", path, in.addr, in.size, in.align,
		 in.map_sync, in.devdax, in.is_pmem, in.guarded);
	pmg_pool_close(&p);
	tap_ok(ok, "%s pool on %s is pmem by its own account (%s), no force "
	       "variable", devdax ? "device-dax" : "fs-DAX", path,
	       devdax ? "device dax, aligned to the device" : "MAP_SYNC");
}

static void t_misaligned(void)
{
	struct pmg_pool_config *c;
	struct pmg_pool *p = NULL;
	int rc;

	if (!devdax) {
		tap_skip("device dax: misaligned offset", "fs-DAX run");
		return;
	}
	pmg_pool_config_new(&c);
	pmg_pool_config_set_size(c, POOL_SIZE);
	pmg_pool_config_set_offset(c, 4096);
	rc = pmg_pool_open(&p, path, c);
	pmg_pool_config_delete(&c);
	if (p)
		pmg_pool_close(&p);
	tap_ok(rc == -EINVAL && strstr(pmg_errormsg(), "alignment"),
	       "device dax: offset 4096 refused with the alignment named "
	       "(%d: %s)", rc, pmg_errormsg());
}

static unsigned char pat(size_t i, unsigned s)
{
	return (unsigned char)((i * 131u + s * 7u) ^ (i >> 9));
}

static void t_persist(void)
{
	static const size_t sizes[] = { 1, 64, 256, 4096, 65536, 1 << 20 };
	static unsigned char buf[1 << 20];
	struct pmg_pool *p = pool_get(0);
	unsigned char *a;
	size_t i, k, off = 0;
	int ok = 1;

	if (!p) {
		tap_ok(0, "persistence calls on %s", path);
		return;
	}
	a = pmg_pool_address(p);
	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		for (i = 0; i < sizes[k]; i++)
			buf[i] = pat(i, (unsigned)k);
		off = (off + 4095) & ~(size_t)4095;
		off += 3 * k;		/* unaligned starts too */
		CHECK(ok, pmg_memcpy_persist(a + off, buf, sizes[k]) ==
			  a + off);
		off += sizes[k];
	}
	CHECK(ok, pmg_memset_persist(a + off + 100, 0x5a, 5000) ==
		  a + off + 100);
	PMG_WITH_WRITE(pmg_pool_domain(p)) {
		memset(a + POOL_SIZE - 8192, 0xc3, 8192);
	}
	CHECK(ok, pmg_persist(a + POOL_SIZE - 8192, 8192) == 0);
	pmg_pool_close(&p);
	p = pool_get(0);
	CHECK(ok, p != NULL);
	if (p) {
		a = pmg_pool_address(p);
		off = 0;
		for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			off = (off + 4095) & ~(size_t)4095;
			off += 3 * k;
			for (i = 0; i < sizes[k]; i++)
				if (a[off + i] != pat(i, (unsigned)k))
					break;
			CHECK(ok, i == sizes[k]);
			off += sizes[k];
		}
		for (i = 0; i < 5000; i++)
			if (a[off + 100 + i] != 0x5a)
				break;
		CHECK(ok, i == 5000);
		for (i = 0; i < 8192; i++)
			if (a[POOL_SIZE - 8192 + i] != 0xc3)
				break;
		CHECK(ok, i == 8192);
		pmg_pool_close(&p);
	}
	tap_ok(ok, "memcpy_persist (1 B..1 MiB, unaligned), memset_persist, "
	       "window + pmg_persist: all there after close and reopen");
}

static int stray_child(void)
{
	struct pmg_pool *p = pool_get(0);
	volatile char *a;

	if (!p)
		return 3;
	pmg_set_fault_mode(PMG_FAULT_STRICT);
	a = pmg_pool_address(p);
	a[5000] = 'X';			/* no window: must not land */
	return 4;
}

static void t_stray(void)
{
	struct pmg_pool *p = pool_get(0);
	pid_t pid;
	int ok = 1, st = 0;
	char *a;

	if (!p) {
		tap_ok(0, "stray write on %s", path);
		return;
	}
	a = pmg_pool_address(p);
	pmg_memset_persist(a + 5000, 'a', 1);
	pmg_pool_close(&p);
	fflush(NULL);
	pid = fork();
	if (pid == 0)
		_exit(stray_child());
	waitpid(pid, &st, 0);
	CHECK(ok, WIFSIGNALED(st) && (WTERMSIG(st) == SIGABRT ||
				      WTERMSIG(st) == SIGSEGV));
	p = pool_get(0);
	CHECK(ok, p != NULL);
	if (p) {
		a = pmg_pool_address(p);
		CHECK(ok, a[5000] == 'a');
		pmg_pool_close(&p);
	}
	tap_ok(ok, "stray write outside a window (backend %s): child stopped "
	       "(status %#x), byte unchanged after reopen",
	       pmg_backend_name(pmg_backend()), st);
}

struct rec {
	uint64_t n, len, sum;
	unsigned char data[SLOT - 24];
};

static void rec_make(struct rec *r, uint64_t n)
{
	uint64_t i, s = 0;

	r->n = n;
	r->len = 64 + (n * 977) % (SLOT - 24 - 64);
	for (i = 0; i < r->len; i++) {
		r->data[i] = (unsigned char)(n * 31 + i);
		s += r->data[i];
	}
	r->sum = s ^ n;
}

static int rec_ok(const struct rec *r, uint64_t n)
{
	uint64_t i, s = 0;

	if (r->n != n || r->len > sizeof(r->data))
		return 0;
	for (i = 0; i < r->len; i++)
		s += r->data[i];
	return r->sum == (s ^ n);
}

/* Appends records and reports each after its commit persisted. */
static int appender(int wfd)
{
	struct pmg_pool *p = pool_get(0);
	uint64_t *count, n;
	struct rec r;
	char *a;

	if (!p)
		return 3;
	a = pmg_pool_address(p);
	count = (uint64_t *)a;
	for (n = *count; n < NSLOTS; n++) {
		rec_make(&r, n);
		pmg_memcpy_persist(a + SLOT + n * SLOT, &r, 24 + r.len);
		pmg_memcpy_persist(count, &(uint64_t){ n + 1 }, 8);
		if (write(wfd, &n, sizeof(n)) != sizeof(n))
			return 4;
	}
	return 0;
}

static void t_crash(int iters)
{
	struct pmg_pool *p = pool_get(0);
	uint64_t seed = (uint64_t)time(NULL) ^ (uint64_t)getpid();
	uint64_t reported = 0, lost = 0, bad = 0, resets = 0;
	int i, ok = 1;

	if (!p) {
		tap_ok(0, "crash on %s", path);
		return;
	}
	pmg_memset_persist(pmg_pool_address(p), 0, 8);
	pmg_pool_close(&p);
	for (i = 0; i < iters && ok; i++) {
		uint64_t want, last, c, k;
		int64_t got;
		int st;
		char *a;

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		want = (seed >> 33) % 24;
		got = kill_mid_append(appender, want, (seed >> 20) % 20000,
				      &last, &st);
		if (got < 0)
			break;
		reported += got;
		p = pool_get(0);
		if (!p) {
			ok = 0;
			break;
		}
		a = pmg_pool_address(p);
		c = *(uint64_t *)a;
		if (last != UINT64_MAX && c < last + 1) {
			lost += last + 1 - c;
			ok = 0;
		}
		for (k = 0; k < c && k < NSLOTS; k++)
			if (!rec_ok((struct rec *)(a + SLOT + k * SLOT), k))
				bad++;
		if (bad)
			ok = 0;
		if (c >= NSLOTS - 32) {
			pmg_memset_persist(a, 0, 8);
			resets++;
		}
		pmg_pool_close(&p);
	}
	tap_diag("%d kills, %llu records reported, %llu lost, %llu torn, "
		 "%llu resets", i, (unsigned long long)reported,
		 (unsigned long long)lost, (unsigned long long)bad,
		 (unsigned long long)resets);
	tap_ok(ok && i == iters, "%d appenders SIGKILLed at random moments: "
	       "every reported record there and whole", i);
}

int main(int argc, char **argv)
{
	const char *it = getenv("PMG_DAX_ITERS");

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 3 || (strcmp(argv[1], "fsdax") && strcmp(argv[1], "devdax"))) {
		printf("1..0 # SKIP usage: dax-test fsdax DIR | devdax DEV "
		       "(run by tests/dax/suite.sh in the guest)\n");
		return 77;
	}
	devdax = !strcmp(argv[1], "devdax");
	if (devdax)
		snprintf(path, sizeof(path), "%s", argv[2]);
	else
		snprintf(path, sizeof(path), "%s/dax-test.pool", argv[2]);
	tap_init(5);
	tap_diag("backend %s, %s", pmg_backend_name(pmg_backend()), path);
	t_is_pmem();
	t_misaligned();
	t_persist();
	t_stray();
	t_crash(it ? atoi(it) : 30);
	if (!devdax && !getenv("PMG_KEEP"))
		unlink(path);
	return tap_done();
}
