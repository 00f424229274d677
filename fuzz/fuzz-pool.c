// SPDX-License-Identifier: MIT
/*
 * fuzz-pool - pmg_pool_open() of hostile files and configurations.
 *
 * Pools have no header (docs/pool.md): what a hostile file can vary is its
 * type, its size (up to a 1 TiB sparse file), its contents, and what the
 * caller asks for (size, offset, flags, domain).  Each input is turned
 * into a file and a configuration:
 *
 *   byte 0      file kind (regular, empty, directory, FIFO, missing,
 *               symlink to a regular file, dangling symlink, /dev/null);
 *               bit 3: NULL configuration; bit 4: the caller's own domain
 *   byte 1      pool flags (bit 7 set: passed raw, unknown bits included)
 *   byte 2      how the next three words scale (2 bits each)
 *   bytes 3-14  size, offset, sparse extension (32 bits each, scaled)
 *   the rest    the file's contents; the extension is a hole after them
 *
 * The outcome must be exactly the model's: each setter's return value, and
 * pmg_pool_open()'s (0, -EINVAL, -ENOENT, -EISDIR, -ENODEV, -ERANGE) with a
 * message.  An open pool must have the size, offset, protection and domain
 * the model says, read back the file's bytes at its offset, answer
 * pmg_lookup() and pmg_dax_direct_access() as the model says, and close
 * cleanly; its range is unregistered after.  The file must be unchanged
 * after all of it: size, times, and contents (all of it up to 1 MiB, else
 * the data and a sample of the hole).  Any mismatch aborts.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pmguard.h"

#define PAGE	4096UL
#define HUGE_ALIGN (2UL << 20)
#define FULL_CHECK (1UL << 20)	/* compare whole files up to this size */
#define HDR	15

#define FAIL(...)							\
	do {								\
		fprintf(stderr, "fuzz-pool: " __VA_ARGS__);		\
		fputc('\n', stderr);					\
		abort();						\
	} while (0)

enum kind { REG, EMPTY, DIR_, FIFO, MISSING, SYMLINK, DANGLING, DEVNULL };

static char dir[64], path[128], target[128];
static struct pmg_domain *own;

static void cleanup(void)
{
	unlink(path);
	rmdir(path);
	unlink(target);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(dir, sizeof(dir), "/dev/shm/fuzz-pool.XXXXXX");
	if (!mkdtemp(dir)) {
		snprintf(dir, sizeof(dir), "/tmp/fuzz-pool.XXXXXX");
		if (!mkdtemp(dir))
			FAIL("mkdtemp: %s", strerror(errno));
	}
	snprintf(path, sizeof(path), "%s/pool", dir);
	snprintf(target, sizeof(target), "%s/target", dir);
	atexit(cleanup);
	if (pmg_domain_new(&own, "fz-own", 0))
		FAIL("pmg_domain_new: %s", pmg_errormsg());
	pmg_set_report_fd(-1);
	return 0;
}

static uint32_t word(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t scaled(uint32_t w, unsigned how, int what)
{
	switch (how & 3) {
	case 0:
		return 0;
	case 1:
		return w;				/* bytes, any */
	case 2:
		return (uint64_t)(w % 1024) * PAGE;	/* pages */
	default:
		/* huge: sizes past LONG_MAX, a 1 TiB hole at most */
		return what == 2 ? ((uint64_t)w << 8) % (1ULL << 40)
				 : (uint64_t)w << 32;
	}
}

/* Write a regular file of @len data bytes and a hole up to @total. */
static void make_file(const char *p, const uint8_t *data, size_t len,
		      uint64_t total)
{
	int fd = open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0)
		FAIL("create %s: %s", p, strerror(errno));
	if (len && write(fd, data, len) != (ssize_t)len)
		FAIL("write %s: %s", p, strerror(errno));
	if (total > len && ftruncate(fd, (off_t)total))
		FAIL("ftruncate %s to %llu: %s", p,
		     (unsigned long long)total, strerror(errno));
	close(fd);
}

/* The file's state: size, times, a checksum of what is compared. */
struct snap {
	off_t size;
	struct timespec mtime, ctime;
	uint64_t sum;
};

/* 8 bytes a step, not instrumented: the checksum adds no coverage and
 * would otherwise take most of the time. */
__attribute__((no_sanitize("coverage", "address"), noinline))
static uint64_t checksum(uint64_t h, const char *p, size_t n)
{
	uint64_t w;

	for (; n >= 8; n -= 8, p += 8) {
		memcpy(&w, p, 8);
		h = (h ^ w) * 0x100000001b3ULL;
		h ^= h >> 29;
	}
	while (n--)
		h = (h ^ (unsigned char)*p++) * 0x100000001b3ULL;
	return h;
}

static void snapshot(const char *p, size_t data_len, struct snap *s)
{
	static char buf[65536];
	struct stat st;
	uint64_t h = 0xcbf29ce484222325ULL, at, end, step;
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0 || fstat(fd, &st))
		FAIL("snapshot %s: %s", p, strerror(errno));
	s->size = st.st_size;
	s->mtime = st.st_mtim;
	s->ctime = st.st_ctim;
	end = (uint64_t)st.st_size;
	if (end > FULL_CHECK)
		end = data_len;
	for (at = 0; at < end; at += (uint64_t)n) {
		size_t want = end - at < sizeof(buf) ? end - at : sizeof(buf);

		n = pread(fd, buf, want, (off_t)at);
		if (n <= 0)
			FAIL("pread %s: %s", p, strerror(errno));
		h = checksum(h, buf, (size_t)n);
	}
	/* a big file: 64 pages of the hole, spread out */
	step = ((uint64_t)st.st_size - end) / 64;
	for (at = end; step && at + PAGE <= (uint64_t)st.st_size; at += step) {
		n = pread(fd, buf, PAGE, (off_t)at);
		if (n != (ssize_t)PAGE)
			FAIL("pread %s: %s", p, strerror(errno));
		h = checksum(h, buf, PAGE);
	}
	close(fd);
	s->sum = h;
}

static void same_snap(const struct snap *a, const struct snap *b)
{
	if (a->size != b->size || a->sum != b->sum ||
	    a->mtime.tv_sec != b->mtime.tv_sec ||
	    a->mtime.tv_nsec != b->mtime.tv_nsec ||
	    a->ctime.tv_sec != b->ctime.tv_sec ||
	    a->ctime.tv_nsec != b->ctime.tv_nsec)
		FAIL("the pool file changed: size %lld -> %lld, checksum "
		     "%016llx -> %016llx, or its times",
		     (long long)a->size, (long long)b->size,
		     (unsigned long long)a->sum, (unsigned long long)b->sum);
}

/* An open pool: everything the model knows about it. */
static void check_pool(struct pmg_pool *pool, const uint8_t *data,
		       size_t data_len, uint64_t off, uint64_t size,
		       unsigned flags, int own_dom, const uint8_t *rnd)
{
	struct pmg_pool_info info;
	struct pmg_domain *d = pmg_pool_domain(pool), *want_d;
	char *base = pmg_pool_address(pool);
	size_t maplen = (size + PAGE - 1) & ~(PAGE - 1), i, o, l;
	void *lb, *a;
	size_t ll;
	ssize_t n;
	int guarded = !(flags & PMG_POOL_UNPROTECTED);
	int noacc = guarded && !own_dom && (flags & PMG_POOL_NOACCESS);

	if (pmg_pool_size(pool) != size ||
	    pmg_pool_get_info(pool, &info, sizeof(info)))
		FAIL("size %zu, model %llu", pmg_pool_size(pool),
		     (unsigned long long)size);
	if (info.addr != base || info.size != size || info.offset != off ||
	    info.guarded != guarded || info.noaccess != noacc)
		FAIL("info: addr %p/%p size %zu offset %zu guarded %d "
		     "noaccess %d; model offset %llu guarded %d noaccess %d",
		     info.addr, (void *)base, info.size, info.offset,
		     info.guarded, info.noaccess, (unsigned long long)off,
		     guarded, noacc);
	if ((uintptr_t)base % (maplen >= HUGE_ALIGN ? HUGE_ALIGN : PAGE))
		FAIL("pool at %p is not aligned (%zu bytes)", (void *)base,
		     maplen);
	want_d = !guarded ? NULL : own_dom ? own : d;
	if (guarded && !d)
		FAIL("a protected pool without a domain");
	if (d != want_d || pmg_dax_map_protected(pool) != guarded)
		FAIL("domain %p, model %p", (void *)d, (void *)want_d);
	if (pmg_lookup(base + size - 1, &lb, &ll) != d ||
	    (d && (lb != base || ll != maplen)))
		FAIL("lookup of the pool's last byte");

	/* the bytes: the file's at the pool's offset (reads need a window
	 * on an access-disabled pool) */
	if (noacc && pmg_open(d, PMG_READ))
		FAIL("read window: %s", pmg_errormsg());
	for (i = 0; off + i < data_len && i < size; i++)
		if ((uint8_t)base[i] != data[off + i])
			FAIL("pool byte %zu is %#x, file %#x", i,
			     (uint8_t)base[i], data[off + i]);
	for (o = i; o < size; o += size / 16 + 1)
		if (base[o])
			FAIL("pool byte %zu in the hole is %#x", o,
			     (uint8_t)base[o]);
	if (noacc && pmg_close(d, PMG_READ))
		FAIL("read window close: %s", pmg_errormsg());

	/* the persistence calls: within the pool fine, past its size (the
	 * tail of its last page) -ERANGE, wrapping -EINVAL */
	if (pmg_persist(base, size))
		FAIL("pmg_persist of the pool: %s", pmg_errormsg());
	if (pmg_persist(base + size - 1, 2) != -ERANGE)
		FAIL("pmg_persist past the pool's %llu bytes not -ERANGE",
		     (unsigned long long)size);
	if (pmg_msync(base, SIZE_MAX) != -EINVAL)
		FAIL("pmg_msync(base, SIZE_MAX) not -EINVAL");

	/* direct access bounds */
	o = word(rnd) % (size + 2);
	l = word(rnd + 4) % (size + 2);
	n = pmg_dax_direct_access(pool, o, l, &a);
	if (!l ? n != -EINVAL :
	    o + l > size ? n != -ERANGE :
	    n != (ssize_t)(size - o) || a != base + o)
		FAIL("dax_direct_access(%zu, %zu) = %zd on %llu bytes", o, l,
		     n, (unsigned long long)size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pmg_pool_config *cfg = NULL;
	struct pmg_pool *pool = NULL;
	struct snap before, after;
	const uint8_t *body = data + HDR;
	size_t body_len = size > HDR ? size - HDR : 0;
	uint64_t csize, coff, ext, total = 0, usable;
	unsigned kind, flags, want_flags_rc;
	const char *p = path;
	int rc, want, own_dom, file = 0;
	static const uint8_t zero[8];

	if (size < HDR || size > HDR + 65536)
		return 0;
	kind = data[0] & 7;
	flags = data[1] & 0x80 ? data[1] : data[1] & 7;
	csize = scaled(word(data + 3), data[2], 0);
	coff = scaled(word(data + 7), data[2] >> 2, 1);
	ext = scaled(word(data + 11), data[2] >> 4, 2);
	own_dom = !!(data[0] & 0x10);

	cleanup();
	if (mkdir(dir, 0700) && errno != EEXIST)
		FAIL("mkdir %s: %s", dir, strerror(errno));
	switch (kind) {
	case REG:
	case EMPTY:
		if (kind == EMPTY)
			body_len = ext = 0;
		total = body_len + ext;
		make_file(path, body, body_len, total);
		file = 1;
		break;
	case DIR_:
		mkdir(path, 0700);
		break;
	case FIFO:
		mkfifo(path, 0600);
		break;
	case MISSING:
		break;
	case SYMLINK:
		total = body_len + ext;
		make_file(target, body, body_len, total);
		if (symlink(target, path))
			FAIL("symlink: %s", strerror(errno));
		file = 1;
		break;
	case DANGLING:
		if (symlink(target, path))
			FAIL("symlink: %s", strerror(errno));
		break;
	default:
		p = "/dev/null";
		break;
	}
	if (file)
		snapshot(p, body_len, &before);

	/* the configuration, each setter against the model */
	if (!(data[0] & 8)) {
		if (pmg_pool_config_new(&cfg))
			FAIL("pmg_pool_config_new: %s", pmg_errormsg());
		rc = pmg_pool_config_set_size(cfg, csize);
		if (rc != (csize > LONG_MAX ? -EINVAL : 0))
			FAIL("set_size(%llu) = %d", (unsigned long long)csize,
			     rc);
		if (rc)
			csize = 0;
		rc = pmg_pool_config_set_offset(cfg, coff);
		if (rc != (coff % PAGE || coff > LONG_MAX ? -EINVAL : 0))
			FAIL("set_offset(%llu) = %d", (unsigned long long)coff,
			     rc);
		if (rc)
			coff = 0;
		want_flags_rc = (flags & ~7u) ||
				((flags & PMG_POOL_NOACCESS) &&
				 (flags & PMG_POOL_UNPROTECTED));
		rc = pmg_pool_config_set_flags(cfg, flags);
		if (rc != (want_flags_rc ? -EINVAL : 0))
			FAIL("set_flags(%#x) = %d", flags, rc);
		if (rc)
			flags = 0;
		if (own_dom && pmg_pool_config_set_domain(cfg, own))
			FAIL("set_domain: %s", pmg_errormsg());
	} else {
		csize = coff = 0;
		flags = 0;
		own_dom = 0;
	}

	/* the model of pmg_pool_open() */
	switch (kind) {
	case MISSING:
	case DANGLING:
		want = -ENOENT;
		break;
	case DIR_:
		want = -EISDIR;
		break;
	case FIFO:
	case DEVNULL:
		want = -ENODEV;
		break;
	default:
		usable = total > coff ? total - coff : 0;
		want = !total ? -EINVAL : coff >= total ? -ERANGE :
		       csize > usable ? -ERANGE : 0;
		break;
	}
	rc = pmg_pool_open(&pool, p, cfg);
	if (rc != want)
		FAIL("pmg_pool_open(kind %u, file %llu bytes, size %llu, "
		     "offset %llu, flags %#x) = %d (%s), model %d", kind,
		     (unsigned long long)total, (unsigned long long)csize,
		     (unsigned long long)coff, flags, rc, pmg_errormsg(),
		     want);
	if (rc) {
		if (pool)
			FAIL("failed open left a pool handle");
		if (!*pmg_errormsg())
			FAIL("failed open without a message");
	} else {
		char *base = pmg_pool_address(pool);
		uint64_t psize = csize ? csize : total - coff;

		check_pool(pool, body, body_len, coff, psize, flags, own_dom,
			   body_len >= 8 ? body : zero);
		rc = pmg_pool_close(&pool);
		if (rc || pool)
			FAIL("pmg_pool_close = %d: %s", rc, pmg_errormsg());
		if (pmg_lookup(base, NULL, NULL))
			FAIL("a closed pool's range is still registered");
	}
	pmg_pool_config_delete(&cfg);
	if (file) {
		snapshot(p, body_len, &after);
		same_snap(&before, &after);
	}
	return 0;
}
