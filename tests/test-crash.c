// SPDX-License-Identifier: MIT
/*
 * test-crash: crash consistency of the persistence calls on a protected
 * pool.  A child appends checksummed records (pmg_memcpy_persist of the
 * record, then of the 8-byte commit count) and reports each persisted
 * record on a pipe; the parent SIGKILLs it at a random point, reopens the
 * pool and verifies every reported record, and every committed one, across
 * all iterations so far: none may be lost or torn.
 *
 * A SIGKILL loses no page-cache data, so this proves the protocol, the
 * windows (the child writes only through the calls) and that a kill in
 * the middle of a call leaves nothing half-committed; power-loss
 * durability is the flush/msync path's job (test-persist).
 *
 * PMG_CRASH_ITERS overrides the iteration count (default 200).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <time.h>

#include "pmguard.h"
#include "tap.h"
#include "kill-mid.h"

#define POOL_SIZE (4UL << 20)
#define SLOT 512UL
#define FIRST 4096UL
#define NSLOTS ((POOL_SIZE - FIRST) / SLOT)
#define MAGIC 0x504d4743524153ULL	/* "PMGCRAS" */

struct head {
	uint64_t magic;
	uint64_t count;		/* committed records */
};

struct rec {
	uint64_t seq;
	uint32_t len;		/* payload bytes */
	uint32_t pad;
	uint64_t sum;		/* over seq, len, payload */
	unsigned char payload[SLOT - 24];
};

static uint64_t fnv(const void *p, size_t n, uint64_t h)
{
	const unsigned char *c = p;

	while (n--)
		h = (h ^ *c++) * 1099511628211ULL;
	return h;
}

static uint64_t rec_sum(const struct rec *r)
{
	uint64_t h = fnv(&r->seq, sizeof(r->seq), 1469598103934665603ULL);

	h = fnv(&r->len, sizeof(r->len), h);
	return fnv(r->payload, r->len, h);
}

static void rec_make(struct rec *r, uint64_t seq)
{
	uint64_t x = seq * 0x9e3779b97f4a7c15ULL + 1;
	uint32_t i;

	memset(r, 0, sizeof(*r));
	r->seq = seq;
	r->len = (uint32_t)(16 + (seq * 37) % (sizeof(r->payload) - 16));
	for (i = 0; i < r->len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		r->payload[i] = (unsigned char)x;
	}
	r->sum = rec_sum(r);
}

/* 0: valid record @seq; 1: torn. */
static int rec_check(const struct rec *r, uint64_t seq)
{
	return !(r->seq == seq && r->len <= sizeof(r->payload) &&
		 r->sum == rec_sum(r));
}

static const char *path;

/* The child: append until killed (or the log is full). */
static int appender(int wfd)
{
	struct pmg_pool *p;
	struct head *h;
	struct rec r;
	char *base;
	uint64_t n;

	if (pmg_pool_open(&p, path, NULL))
		return 3;
	base = pmg_pool_address(p);
	h = (struct head *)base;
	pmg_set_fault_mode(PMG_FAULT_STRICT);	/* no stray store here */
	for (n = h->count; n < NSLOTS; n++) {
		size_t sz;

		rec_make(&r, n);
		sz = 24 + r.len;
		pmg_memcpy_persist(base + FIRST + n * SLOT, &r, sz);
		/* commit: one aligned 8-byte store, persisted */
		pmg_memcpy_persist(&h->count, &(uint64_t){ n + 1 }, 8);
		if (write(wfd, &n, sizeof(n)) != sizeof(n))
			return 4;
	}
	return 0;
}

int main(void)
{
	const char *tmp = getenv("TMPDIR"), *it = getenv("PMG_CRASH_ITERS");
	const char *dev = getenv("PMG_CRASH_DEV");
	struct pmg_pool_config *c;
	struct pmg_pool *p;
	struct head *h;
	char pbuf[PATH_MAX];
	int iters = it ? atoi(it) : 200, i, ok = 1, rc;
	uint64_t reported = 0, verified = 0, lost = 0, torn = 0, resets = 0;
	uint64_t killed_mid = 0, seed = (uint64_t)time(NULL) ^ getpid();
	double t0;

	tap_init(2);
	snprintf(pbuf, sizeof(pbuf), "%s/pmg-crash-%d.pool",
		 tmp ? tmp : "/tmp", (int)getpid());
	path = dev && *dev ? dev : pbuf;
	pmg_pool_config_new(&c);
	pmg_pool_config_set_size(c, POOL_SIZE);
	/* PMG_CRASH_DEV=/dev/daxX.Y: the pool is the device's first 4 MiB */
	rc = path == pbuf ? pmg_pool_create(&p, path, c) :
			    pmg_pool_open(&p, path, c);
	pmg_pool_config_delete(&c);
	if (rc) {
		tap_diag("%s", pmg_errormsg());
		if (path != pbuf)	/* the device was asked for: a failure */
			return 1;
		tap_skip_all("cannot create the pool");
	}
	h = pmg_pool_address(p);
	pmg_memset_persist(h, 0, FIRST);	/* a device has old bytes */
	pmg_memcpy_persist(&h->magic, &(uint64_t){ MAGIC }, 8);
	pmg_pool_close(&p);
	tap_diag("backend %s, seed %llu, %d iterations, pool %s",
		 pmg_backend_name(pmg_backend()), (unsigned long long)seed,
		 iters, path);
	t0 = tap_now();

	for (i = 0; i < iters && ok; i++) {
		int st;
		uint64_t want, last, n;
		int64_t got;

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		want = (seed >> 33) % 48;	/* reports before the kill */
		/* then a random extra delay: kill inside a call */
		got = kill_mid_append(appender, want, (seed >> 20) % 20000,
				      &last, &st);
		if (got < 0)
			return 1;
		if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
			killed_mid++;
		else if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			tap_diag("iteration %d: child status %#x", i, st);
			ok = 0;
		}
		reported += got;

		/* reopen and verify everything committed so far */
		if (pmg_pool_open(&p, path, NULL)) {
			tap_diag("reopen: %s", pmg_errormsg());
			ok = 0;
			break;
		}
		h = pmg_pool_address(p);
		if (h->magic != MAGIC) {
			tap_diag("iteration %d: header clobbered", i);
			ok = 0;
		}
		if (last != UINT64_MAX && h->count <= last) {
			tap_diag("iteration %d: record %llu reported, count "
				 "%llu", i, (unsigned long long)last,
				 (unsigned long long)h->count);
			lost += last + 1 - h->count;
		}
		for (n = 0; n < h->count && n < NSLOTS; n++) {
			if (rec_check((struct rec *)((char *)h + FIRST +
						     n * SLOT), n)) {
				tap_diag("iteration %d: record %llu torn", i,
					 (unsigned long long)n);
				torn++;
			}
			verified++;
		}
		if (h->count > NSLOTS - 64) {	/* start the log again */
			pmg_memset_persist(&h->count, 0, 8);
			resets++;
		}
		pmg_pool_close(&p);
	}
	tap_diag("%d iterations in %.2f s: %llu killed mid-run, %llu records "
		 "reported, %llu record checks, %llu lost, %llu torn, "
		 "%llu log resets", i,
		 tap_now() - t0,
		 (unsigned long long)killed_mid,
		 (unsigned long long)reported, (unsigned long long)verified,
		 (unsigned long long)lost, (unsigned long long)torn,
		 (unsigned long long)resets);
	tap_ok(ok && i == iters && lost == 0 && torn == 0,
	       "%d SIGKILLs at random points: every reported record found, "
	       "0 lost, 0 torn", i);
	tap_ok(reported > 0 && killed_mid > (uint64_t)iters / 2,
	       "the kills landed while the child was appending (%llu of %d)",
	       (unsigned long long)killed_mid, i);
	if (path == pbuf)
		unlink(path);
	printf("%d passed, %d failed\n", tap_n - tap_failed, tap_failed);
	return tap_done();
}
