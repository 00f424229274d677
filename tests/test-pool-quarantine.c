// SPDX-License-Identifier: MIT
/*
 * test-pool-quarantine: use after close.  A closed pool's addresses (its
 * mapping and, on the mprotect backend, its alias's reservation) stay
 * reserved PROT_NONE for a while, so that no later pool, alias or other
 * mapping lands there: a stale pointer into a closed pool faults (a
 * reported stray access naming the closed pool; strict aborts) instead of
 * writing another pool's file.  The quarantine is bounded: the oldest
 * closed pools are released first (FIFO) past an address-space budget or
 * a count.  Both backends (PKU in the guest).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include "pmguard.h"
#include "tap.h"
#include "capture.h"
#include "dirs.h"

/* Test hooks (quarantine.c); weak: absent, the quarantine tests fail. */
extern size_t _pmg_pool_quarantine_budget __attribute__((weak));
extern unsigned _pmg_pool_quarantine_max __attribute__((weak));
extern unsigned _pmg_pool_quarantined(size_t *bytes) __attribute__((weak));
extern int _pmg_pool_no_file_id __attribute__((weak));

static char dir[256], disk[256], shm[256];

#define MAXR 8
struct ranges {
	int n;
	uintptr_t b[MAXR], e[MAXR];
	char perms[MAXR][8];
};

/* The mappings of @path's file (by inode: O_TMPFILE pools show another
 * name) in /proc/self/maps. */
static void maps_of(const char *path, struct ranges *r)
{
	char line[PATH_MAX + 128], perms[8];
	unsigned long long ino;
	unsigned long lo, hi;
	struct stat sb;
	FILE *f;

	r->n = 0;
	if (stat(path, &sb))
		return;
	f = fopen("/proc/self/maps", "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f) && r->n < MAXR) {
		if (sscanf(line, "%lx-%lx %7s %*s %*s %llu", &lo, &hi, perms,
			   &ino) != 4 || ino != (unsigned long long)sb.st_ino)
			continue;
		r->b[r->n] = lo;
		r->e[r->n] = hi;
		snprintf(r->perms[r->n], sizeof(r->perms[0]), "%s", perms);
		r->n++;
	}
	fclose(f);
}

/* Whether all of [b, e) is mapped PROT_NONE, anonymous ("---p", inode 0). */
static int reserved_none(uintptr_t b, uintptr_t e)
{
	char line[PATH_MAX + 128], perms[8];
	unsigned long long ino;
	unsigned long lo, hi;
	uintptr_t at = b;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return 0;
	while (at < e && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx %7s %*s %*s %llu", &lo, &hi, perms,
			   &ino) != 4 || hi <= at)
			continue;
		if (lo > at || strcmp(perms, "---p") || ino)
			break;
		at = hi;
	}
	fclose(f);
	return at >= e;
}

static int overlaps(const struct ranges *a, uintptr_t b, uintptr_t e)
{
	int i;

	for (i = 0; i < a->n; i++)
		if (a->b[i] < e && b < a->e[i])
			return 1;
	return 0;
}

/* FNV-1a of the file's bytes. */
static uint64_t file_sum(const char *path)
{
	uint64_t h = 1469598103934665603ULL;
	unsigned char buf[8192];
	ssize_t n, i;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return 0;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (i = 0; i < n; i++)
			h = (h ^ buf[i]) * 1099511628211ULL;
	close(fd);
	return h;
}

static struct pmg_pool *create_in(const char *d, const char *name,
				   size_t size, char *path)
{
	struct pmg_pool_config *c = NULL;
	struct pmg_pool *p = NULL;

	snprintf(path, PATH_MAX, "%s/%s", d, name);
	if (pmg_pool_config_new(&c) || pmg_pool_config_set_size(c, size) ||
	    pmg_pool_config_set_flags(c, PMG_POOL_OVERWRITE) ||
	    pmg_pool_create(&p, path, c))
		tap_diag("create %s: %s", path, pmg_errormsg());
	pmg_pool_config_delete(&c);
	return p;
}

static struct pmg_pool *create(const char *name, size_t size, char *path)
{
	return create_in(dir, name, size, path);
}

static int alias_off(void)
{
	const char *e = getenv("PMGUARD_POOL_ALIAS");

	return e && !strcmp(e, "0");
}

/* ------------------------------------------------------------ stale */

#define NLATER 4
static struct {
	char a[PATH_MAX];		/* the closed pool */
	struct ranges ar;		/* its former mappings */
	char later[NLATER][PATH_MAX];	/* pools opened after the close */
	uint64_t sum[NLATER];
	int report;			/* report fd (a temporary file) */
} s;

enum stale_how { STORE, PERSIST, AUDIT_STORE };
struct stale_arg {
	uintptr_t at;
	enum stale_how how;
};

static int stale_child(void *v)
{
	const struct stale_arg *sa = v;
	static const char rec[64] = "a record written through a stale ptr";

	pmg_set_report_fd(s.report);
	pmg_set_fault_mode(sa->how == AUDIT_STORE ? PMG_FAULT_AUDIT
						  : PMG_FAULT_STRICT);
	if (sa->how == PERSIST)
		pmg_memcpy_persist((void *)sa->at, rec, sizeof(rec));
	else
		*(volatile char *)sa->at = 'S';
	return 0;	/* reached: the stale pointer wrote something */
}

static int later_intact(void)
{
	int i, ok = 1;

	for (i = 0; i < NLATER; i++)
		CHECK(ok, file_sum(s.later[i]) == s.sum[i]);
	return ok;
}

/* A stale access at @at: how the child ended, what it reported. */
static void t_stale(uintptr_t at, enum stale_how how, const char *what)
{
	struct stale_arg sa = { .at = at, .how = how };
	char rep[4096];
	int st, ok = 1, want = how == AUDIT_STORE ? SIGSEGV : SIGABRT;

	if (ftruncate(s.report, 0))
		tap_diag("ftruncate: %m");
	lseek(s.report, 0, SEEK_SET);
	st = tap_child(stale_child, &sa);
	slurp(s.report, rep, sizeof(rep));
	CHECK(ok, WIFSIGNALED(st) && WTERMSIG(st) == want);
	CHECK(ok, strstr(rep, "closed pool") != NULL);
	CHECK(ok, strstr(rep, strrchr(s.a, '/') + 1) != NULL);
	CHECK(ok, later_intact());
	if (!ok)
		tap_diag("child status %#x; report: %s", st, rep);
	tap_ok(ok, "use after close: %s into a closed pool at %#lx: %s, the "
	       "report names the closed pool, no later pool's file changed",
	       what, (unsigned long)at, want == SIGABRT ? "SIGABRT" :
	       "SIGSEGV (a closed pool cannot be let through)");
}

/*
 * Close pool A, then open pools of 4x, 1x, 16x and 2 MiB + 4x A's size and
 * map anonymous memory: none lands on A's former addresses, which stay
 * reserved PROT_NONE; stale stores and persistence calls there fault.
 */
static void t_reuse(size_t asize)
{
	static const size_t mul[NLATER] = { 4, 1, 16, 0 };
	struct pmg_pool *a, *later[NLATER] = { NULL };
	void *anon[3];
	char name[64];
	int i, j, ok = 1, rok = 1;

	snprintf(name, sizeof(name), "closed-%zu.pool", asize);
	a = create(name, asize, s.a);
	if (!a) {
		tap_ok(0, "use after close: create the first pool");
		return;
	}
	maps_of(s.a, &s.ar);
	tap_diag("pool %s (%zu bytes) mapped %d times", s.a, asize, s.ar.n);
	CHECK(ok, s.ar.n == (pmg_backend() == PMG_BACKEND_MPROTECT &&
			     !alias_off() ? 2 : 1));
	pmg_pool_close(&a);
	for (i = 0; i < NLATER; i++) {
		size_t sz = mul[i] ? mul[i] * asize : (2u << 20) + 4 * asize;
		struct ranges lr;

		snprintf(name, sizeof(name), "later-%zu-%d.pool", asize, i);
		later[i] = create(name, sz, s.later[i]);
		CHECK(ok, later[i] != NULL);
		if (!later[i])
			continue;
		maps_of(s.later[i], &lr);
		for (j = 0; j < lr.n; j++)
			if (overlaps(&s.ar, lr.b[j], lr.e[j])) {
				tap_diag("%s's mapping %#lx-%#lx (%s) lies on "
					 "the closed pool's addresses",
					 s.later[i], (unsigned long)lr.b[j],
					 (unsigned long)lr.e[j], lr.perms[j]);
				rok = 0;
			}
		s.sum[i] = file_sum(s.later[i]);
	}
	for (i = 0; i < 3; i++) {
		size_t sz = asize << (2 * i);

		anon[i] = mmap(NULL, sz, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (anon[i] != MAP_FAILED &&
		    overlaps(&s.ar, (uintptr_t)anon[i],
			     (uintptr_t)anon[i] + sz)) {
			tap_diag("anonymous mmap %p (%zu) lies on the closed "
				 "pool's addresses", anon[i], sz);
			rok = 0;
		}
	}
	for (i = 0; i < s.ar.n; i++)
		if (!reserved_none(s.ar.b[i], s.ar.e[i])) {
			tap_diag("%#lx-%#lx: not reserved PROT_NONE",
				 (unsigned long)s.ar.b[i],
				 (unsigned long)s.ar.e[i]);
			rok = 0;
		}
	tap_ok(ok && rok, "use after close (%zu-byte pool): no later pool, "
	       "alias or mmap lands on its former addresses; they stay "
	       "reserved PROT_NONE", asize);
	for (i = 0; i < s.ar.n; i++)
		t_stale(s.ar.b[i] + 100, STORE, i ? "a store (the alias's "
			"former place)" : "a store");
	if (s.ar.n < 2)
		tap_skip("use after close: a store into the alias's former "
			 "place", "no alias (PKU, or PMGUARD_POOL_ALIAS=0)");
	t_stale(s.ar.b[0] + 100, PERSIST, "pmg_memcpy_persist()");
	t_stale(s.ar.b[0] + asize - 1, AUDIT_STORE, "an audit-mode store");
	for (i = 0; i < 3; i++)
		if (anon[i] != MAP_FAILED)
			munmap(anon[i], asize << (2 * i));
	for (i = 0; i < NLATER; i++)
		pmg_pool_close(&later[i]);
}

/*
 * A reopen of the closed pool itself (same file, offset, length) takes its
 * old address back: pointers kept across the close point at the same
 * bytes of the same pool, protected again, so a stale store outside a
 * window is an ordinary stray (strict: SIGABRT, the byte unchanged);
 * another pool never gets the address.
 */
static int reopen_child(void *v)
{
	pmg_set_report_fd(s.report);
	pmg_set_fault_mode(PMG_FAULT_STRICT);
	*(volatile char *)v = 'S';
	return 0;
}

static void t_reopen(void)
{
	struct pmg_pool *p, *q = NULL;
	char path[PATH_MAX], other[PATH_MAX], rep[4096];
	uintptr_t a;
	int ok = 1, st;

	p = create("reopen.pool", 64 << 10, path);
	a = (uintptr_t)pmg_pool_address(p);
	CHECK(ok, p && pmg_memcpy_persist((char *)a + 100, "kept", 5));
	pmg_pool_close(&p);
	/* another pool of the same size first: not at that address */
	q = create("reopen-other.pool", 64 << 10, other);
	CHECK(ok, q && (uintptr_t)pmg_pool_address(q) != a);
	CHECK(ok, pmg_pool_open(&p, path, NULL) == 0);
	tap_diag("closed at %#lx, reopened at %p, the other pool at %p",
		 (unsigned long)a, pmg_pool_address(p), pmg_pool_address(q));
	CHECK(ok, p && (uintptr_t)pmg_pool_address(p) == a);
	CHECK(ok, p && !strcmp((char *)a + 100, "kept"));
	if (ftruncate(s.report, 0))
		tap_diag("ftruncate: %m");
	lseek(s.report, 0, SEEK_SET);
	st = tap_child(reopen_child, (char *)a + 100);
	slurp(s.report, rep, sizeof(rep));
	CHECK(ok, WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
	CHECK(ok, strstr(rep, "domain 'pmem'") != NULL);
	CHECK(ok, p && !strcmp((char *)a + 100, "kept"));
	if (!ok)
		tap_diag("child status %#x; report: %s", st, rep);
	pmg_pool_close(&p);
	pmg_pool_close(&q);
	tap_ok(ok,
	       "use after close: a reopen of the same pool takes its old "
	       "address back (another pool does not); a stale store there is "
	       "a stray into the protected pool (SIGABRT, byte unchanged)");
}

/* ------------------------------------------------- inode number reuse */

#define EXT4_MAGIC 0xEF53
static char ext4_mnt[PATH_MAX];	/* a loop mount of ours, "" if none */

/*
 * A directory on ext4, which gives a file created after an unlink the
 * freed inode's number at once: the disk directory if it is ext4, else
 * (as root, with mkfs.ext4) a loop-mounted ext4 image.  0, or -1 with the
 * reason in @why.
 */
static int ext4_dir(char *out, size_t n, char *why, size_t wn)
{
	char img[PATH_MAX], cmd[3 * PATH_MAX];
	struct statfs sf;

	if (*disk && !statfs(disk, &sf) && sf.f_type == EXT4_MAGIC) {
		snprintf(out, n, "%s", disk);
		return 0;
	}
	if (!*disk)
		snprintf(why, wn, "no disk directory");
	else
		snprintf(why, wn, "the disk directory '%s' is not ext4", disk);
	if (geteuid()) {
		snprintf(why + strlen(why), wn - strlen(why), ", and "
			 "loop-mounting an ext4 image needs root");
		return -1;
	}
	snprintf(img, sizeof(img), "%s/ext4.img", dir);
	snprintf(out, n, "%s/ext4", dir);
	snprintf(cmd, sizeof(cmd), "mkfs.ext4 -q -F '%s' 16M >/dev/null 2>&1",
		 img);
	if (mkdir(out, 0700) || system(cmd)) {
		snprintf(why + strlen(why), wn - strlen(why), ", and "
			 "mkfs.ext4 failed (is e2fsprogs installed?)");
		return -1;
	}
	snprintf(cmd, sizeof(cmd), "mount -o loop '%s' '%s' 2>&1", img, out);
	if (system(cmd)) {
		snprintf(why + strlen(why), wn - strlen(why), ", and the "
			 "ext4 image could not be loop-mounted");
		return -1;
	}
	snprintf(ext4_mnt, sizeof(ext4_mnt), "%s", out);
	tap_diag("ext4 image loop-mounted on %s", out);
	return 0;
}

/*
 * Pool A is closed and its file unlinked; pool B, another file of the same
 * size, is created: on ext4 B's file gets A's inode number.  A closed pool
 * used to be matched by device, inode, offset and length only, so B was
 * mapped at A's quarantined address and a stale pointer into A wrote B's
 * file with no fault, strict mode included.  A closed pool is now matched
 * by its file's identity over its life (the file handle, whose generation
 * differs for a reused inode number): B lands elsewhere, the stale
 * pointer's pmg_memcpy_persist() and store fault (strict: SIGABRT, the
 * report names A and the address), and B's bytes are intact.
 */
static void t_inode_reuse(void)
{
	static const char *what[2] = { "pmg_memcpy_persist()", "a store" };
	static const enum stale_how how[2] = { PERSIST, STORE };
	char d[PATH_MAX], why[PATH_MAX + 128], b[PATH_MAX], rep[4096], hex[32];
	char name[32];
	struct pmg_pool *pa, *pb = NULL;
	struct stat sa, sb;
	uintptr_t a = 0;
	uint64_t sum;
	int i, r, ok = 1, st;

	if (ext4_dir(d, sizeof(d), why, sizeof(why))) {
		if (getenv("CI") && !strcmp(getenv("CI"), "true") &&
		    !geteuid() && !system("command -v mkfs.ext4 >/dev/null"))
			tap_ok(0, "use after close, inode number reused: %s",
			       why);
		else
			tap_skip("use after close, inode number reused", why);
		tap_skip("use after close, inode number reused: a store",
			 why);
		return;
	}
	/* another process may take the freed inode first: a few tries */
	for (r = 0; r < 5 && ok; r++) {
		snprintf(name, sizeof(name), "reuse-a%d.pool", r);
		pa = create_in(d, name, 1 << 20, s.a);
		CHECK(ok, pa && !stat(s.a, &sa));
		a = (uintptr_t)pmg_pool_address(pa);
		pmg_pool_close(&pa);
		CHECK(ok, unlink(s.a) == 0);
		pb = create_in(d, "reuse-b.pool", 1 << 20, b);
		CHECK(ok, pb && !stat(b, &sb));
		if (!ok || (sa.st_ino == sb.st_ino && sa.st_dev == sb.st_dev))
			break;
		tap_diag("try %d: A's inode %lu, B's %lu", r,
			 (unsigned long)sa.st_ino, (unsigned long)sb.st_ino);
		pmg_pool_close(&pb);
		unlink(b);
	}
	if (!ok) {
		tap_ok(0, "use after close, inode number reused: setup");
		tap_skip("use after close, inode number reused: a store",
			 "no pools");
		pmg_pool_close(&pb);
		return;
	}
	tap_diag("A %s: inode %lu, was at %#lx; B %s: inode %lu, at %p", s.a,
		 (unsigned long)sa.st_ino, (unsigned long)a, b,
		 (unsigned long)sb.st_ino, pmg_pool_address(pb));
	if (sa.st_ino != sb.st_ino || sa.st_dev != sb.st_dev) {
		tap_skip("use after close, inode number reused",
			 "in 5 tries this ext4 never gave B the unlinked A's "
			 "inode number");
		tap_skip("use after close, inode number reused: a store",
			 "no inode reused");
		pmg_pool_close(&pb);
		return;
	}
	sum = file_sum(b);
	snprintf(hex, sizeof(hex), "%#lx", (unsigned long)a + 100);
	for (i = 0; i < 2; i++) {
		struct stale_arg arg = { .at = a + 100, .how = how[i] };

		ok = 1;
		CHECK(ok, (uintptr_t)pmg_pool_address(pb) != a);
		if (ftruncate(s.report, 0))
			tap_diag("ftruncate: %m");
		lseek(s.report, 0, SEEK_SET);
		st = tap_child(stale_child, &arg);
		slurp(s.report, rep, sizeof(rep));
		CHECK(ok, WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
		CHECK(ok, strstr(rep, "closed pool") != NULL);
		CHECK(ok, strstr(rep, strrchr(s.a, '/') + 1) != NULL);
		CHECK(ok, strstr(rep, hex) != NULL);
		CHECK(ok, file_sum(b) == sum);
		CHECK(ok, ((char *)pmg_pool_address(pb))[100] == 0);
		if (!ok)
			tap_diag("child status %#x; B's byte 100: %#x; report: "
				 "%s", st, ((char *)pmg_pool_address(pb))[100],
				 rep);
		tap_ok(ok, "use after close, inode number %lu reused by "
		       "another pool: %s through a stale pointer into the "
		       "closed one at %s: SIGABRT, the report names the closed "
		       "pool and the address, the new pool's file unchanged",
		       (unsigned long)sb.st_ino, what[i], hex);
	}
	pmg_pool_close(&pb);
	unlink(b);
}

/*
 * Where the file's identity is not known (a filesystem without file
 * handles, as the test hook makes every one), a closed pool's address is
 * never given back, not even to a reopen of the same file: its inode
 * number alone could be a later file's.  The reopen lands elsewhere and a
 * stale pointer still faults as a closed pool's.
 */
static void t_no_file_id(void)
{
	struct stale_arg arg;
	struct pmg_pool *p;
	char rep[4096];
	uintptr_t a;
	int ok = 1, st;

	if (!&_pmg_pool_no_file_id) {
		tap_ok(0, "use after close, no file identity (no test hook)");
		return;
	}
	_pmg_pool_no_file_id = 1;
	p = create("noid.pool", 64 << 10, s.a);
	a = (uintptr_t)pmg_pool_address(p);
	pmg_pool_close(&p);
	CHECK(ok, pmg_pool_open(&p, s.a, NULL) == 0);
	tap_diag("closed at %#lx, reopened at %p", (unsigned long)a,
		 pmg_pool_address(p));
	CHECK(ok, a && p && (uintptr_t)pmg_pool_address(p) != a);
	CHECK(ok, reserved_none(a, a + (64 << 10)));
	if (ftruncate(s.report, 0))
		tap_diag("ftruncate: %m");
	lseek(s.report, 0, SEEK_SET);
	arg.at = a + 100;
	arg.how = STORE;
	st = tap_child(stale_child, &arg);
	slurp(s.report, rep, sizeof(rep));
	CHECK(ok, WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
	CHECK(ok, strstr(rep, "closed pool") && strstr(rep, "noid.pool"));
	if (!ok)
		tap_diag("child status %#x; report: %s", st, rep);
	pmg_pool_close(&p);
	_pmg_pool_no_file_id = 0;
	tap_ok(ok, "use after close, the file's identity unknown: a reopen "
	       "of the same file does not get the quarantined address, which "
	       "stays reserved (a stale store: SIGABRT naming the closed pool)");
}

/* ------------------------------------------------------------ bounds */

/*
 * The quarantine is bounded: past the budget (bytes) or the count, the
 * oldest closed pools are released first; the newest is always kept.
 */
static void t_fifo(void)
{
	struct pmg_pool *p;
	char path[PATH_MAX], name[32];
	uintptr_t addr[5];
	size_t budget0, bytes = 0, one = 0;
	unsigned max0, n0, n;
	int i, ok = 1;

	if (!&_pmg_pool_quarantine_budget || !&_pmg_pool_quarantine_max ||
	    !_pmg_pool_quarantined) {
		tap_ok(0, "quarantine: bounded (no quarantine in the library)");
		tap_ok(0, "quarantine: the newest closed pool is kept");
		return;
	}
	budget0 = _pmg_pool_quarantine_budget;
	max0 = _pmg_pool_quarantine_max;
	/* an empty quarantine to start from: a close with a budget of 0 */
	_pmg_pool_quarantine_budget = 0;
	p = create("fifo-empty.pool", 64 << 10, path);
	pmg_pool_close(&p);
	CHECK(ok, _pmg_pool_quarantined(&bytes) == 0 && bytes == 0);
	_pmg_pool_quarantine_budget = budget0;
	n0 = 0;
	/* one 64 KiB pool's worth: its mapping and its alias reservation */
	p = create("fifo-0.pool", 64 << 10, path);
	addr[0] = (uintptr_t)pmg_pool_address(p);
	pmg_pool_close(&p);
	n = _pmg_pool_quarantined(&one);
	one -= bytes;
	CHECK(ok, n == n0 + 1 && one >= (64 << 10));
	tap_diag("a closed 64 KiB pool holds %zu bytes of address space", one);
	/* room for two */
	_pmg_pool_quarantine_budget = 2 * one;
	for (i = 1; i < 5; i++) {
		snprintf(name, sizeof(name), "fifo-%d.pool", i);
		p = create(name, 64 << 10, path);
		addr[i] = (uintptr_t)pmg_pool_address(p);
		pmg_pool_close(&p);
	}
	n = _pmg_pool_quarantined(&bytes);
	tap_diag("after 5 closes: %u quarantined, %zu bytes", n, bytes);
	CHECK(ok, n == 2 && bytes == 2 * one);
	CHECK(ok, reserved_none(addr[4], addr[4] + (64 << 10)));
	CHECK(ok, reserved_none(addr[3], addr[3] + (64 << 10)));
	/* a count of 1 */
	_pmg_pool_quarantine_budget = budget0;
	_pmg_pool_quarantine_max = 1;
	p = create("fifo-5.pool", 64 << 10, path);
	addr[0] = (uintptr_t)pmg_pool_address(p);
	pmg_pool_close(&p);
	n = _pmg_pool_quarantined(&bytes);
	CHECK(ok, n == 1 && reserved_none(addr[0], addr[0] + (64 << 10)));
	tap_ok(ok, "quarantine: bounded by its budget and count, the oldest "
	       "closed pools released first");
	/* a budget smaller than one pool: the newest is kept anyway */
	ok = 1;
	_pmg_pool_quarantine_budget = 1;
	_pmg_pool_quarantine_max = max0;
	p = create("fifo-6.pool", 64 << 10, path);
	addr[0] = (uintptr_t)pmg_pool_address(p);
	pmg_pool_close(&p);
	n = _pmg_pool_quarantined(&bytes);
	CHECK(ok, n == 1 && reserved_none(addr[0], addr[0] + (64 << 10)));
	/* no quarantine (budget 0): nothing kept */
	_pmg_pool_quarantine_budget = 0;
	p = create("fifo-7.pool", 64 << 10, path);
	addr[0] = (uintptr_t)pmg_pool_address(p);
	pmg_pool_close(&p);
	CHECK(ok, _pmg_pool_quarantined(&bytes) == 0 && bytes == 0);
	CHECK(ok, !reserved_none(addr[0], addr[0] + (64 << 10)));
	_pmg_pool_quarantine_budget = budget0;
	tap_ok(ok, "quarantine: the newest closed pool is kept even past the "
	       "budget; a budget of 0 keeps none");
}

/*
 * The library never unmaps or replaces what is no longer its own: a
 * closed pool's quarantined range the program unmapped and mapped again
 * itself is left alone when the quarantine releases it; an unprotected
 * pool the program unmapped and replaced is left alone by its close.
 */
static int mapped_rw_with(uintptr_t a, size_t n, char c)
{
	char line[PATH_MAX + 128], perms[8];
	unsigned long lo, hi;
	FILE *f = fopen("/proc/self/maps", "r");
	int ok = 0;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 &&
		    lo <= a && a + n <= hi && !strncmp(perms, "rw", 2))
			ok = 1;
	if (f)
		fclose(f);
	return ok && ((volatile char *)a)[0] == c &&
	       ((volatile char *)a)[n - 1] == c;
}

static void t_not_ours(void)
{
	struct pmg_pool_config *c = NULL;
	struct pmg_pool *p;
	char path[PATH_MAX];
	uintptr_t a;
	size_t budget0;
	char *m;
	int ok = 1;

	if (!&_pmg_pool_quarantine_budget) {
		tap_ok(0, "quarantine: a range the program took back is left "
			  "alone (no quarantine in the library)");
	} else {
		budget0 = _pmg_pool_quarantine_budget;
		p = create("mine.pool", 64 << 10, path);
		a = (uintptr_t)pmg_pool_address(p);
		pmg_pool_close(&p);
		CHECK(ok, a && reserved_none(a, a + (64 << 10)));
		/* the program's own (static library: unseen) */
		CHECK(ok, munmap((void *)a, 64 << 10) == 0);
		m = mmap((void *)a, 64 << 10, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1,
			 0);
		CHECK(ok, m == (char *)a);
		if (m != MAP_FAILED)
			memset(m, 'm', 64 << 10);
		/* release it all */
		_pmg_pool_quarantine_budget = 0;
		p = create("mine2.pool", 64 << 10, path);
		pmg_pool_close(&p);
		_pmg_pool_quarantine_budget = budget0;
		CHECK(ok, m == (char *)a && mapped_rw_with(a, 64 << 10, 'm'));
		if (m != MAP_FAILED)
			munmap(m, 64 << 10);
		tap_ok(ok,
		       "quarantine: a closed pool's range the program "
		       "unmapped and mapped again itself is left alone when "
		       "released");
	}
	/* an unprotected pool unmapped and replaced by the program */
	ok = 1;
	snprintf(path, sizeof(path), "%s/unprot.pool", dir);
	p = NULL;
	CHECK(ok, pmg_pool_config_new(&c) == 0 &&
			  pmg_pool_config_set_size(c, 64 << 10) == 0 &&
			  pmg_pool_config_set_flags(
				  c, PMG_POOL_UNPROTECTED |
					     PMG_POOL_OVERWRITE) == 0 &&
			  pmg_pool_create(&p, path, c) == 0);
	pmg_pool_config_delete(&c);
	a = (uintptr_t)pmg_pool_address(p);
	CHECK(ok, a && munmap((void *)a, 64 << 10) == 0);
	m = mmap((void *)a, 64 << 10, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	CHECK(ok, m == (char *)a);
	if (m != MAP_FAILED)
		memset(m, 'u', 64 << 10);
	pmg_pool_close(&p);
	CHECK(ok, m == (char *)a && mapped_rw_with(a, 64 << 10, 'u'));
	if (m != MAP_FAILED)
		munmap(m, 64 << 10);
	tap_ok(ok, "an unprotected pool the program unmapped and replaced: "
		   "its close leaves the new mapping alone");
}

/*
 * Out of address space (ENOMEM, here under RLIMIT_AS, which counts the
 * reservations): a pool create releases the whole quarantine and tries
 * again.  Stale pointers into those closed pools are no longer caught
 * from then on: it says so on the report fd (it used to say nothing).
 * In a child: the limit stays there.
 */
static int shed_rep = -1;

static long vm_size(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %ld kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

static int shed_child(void *v)
{
	struct pmg_pool *p;
	struct rlimit rl;
	char path[PATH_MAX];
	size_t bytes;
	long kb;

	(void)v;
	pmg_set_report_fd(shed_rep);
	p = create("shed-a.pool", 16 << 20, path);
	if (!p)
		return 10;
	pmg_pool_close(&p);
	if (_pmg_pool_quarantined(&bytes) < 1 || bytes < (16 << 20))
		return 11;
	kb = vm_size();
	if (kb < 0)
		return 12;
	/* room for the new pool (about as much as the closed one holds)
	 * once the quarantine is given back, not before */
	rl.rlim_cur = rl.rlim_max = (rlim_t)kb * 1024 + bytes / 2;
	if (setrlimit(RLIMIT_AS, &rl))
		return 13;
	p = create("shed-b.pool", 16 << 20, path);
	if (!p) {
		tap_diag("VmSize %ld kB, then %ld kB; %u quarantined", kb,
			 vm_size(), _pmg_pool_quarantined(&bytes));
		return 14;
	}
	if (_pmg_pool_quarantined(NULL) != 0)
		return 15;
	pmg_pool_close(&p);
	return 0;
}

static void t_shed(void)
{
	char rep[4096];
	int st, ok = 1;

	if (!_pmg_pool_quarantined) {
		tap_ok(0, "quarantine released for address space: said");
		return;
	}
	shed_rep = tmpfd();
	CHECK(ok, shed_rep >= 0);
	st = tap_child(shed_child, NULL);
	slurp(shed_rep, rep, sizeof(rep));
	tap_diag("child status %#x; report: %s", st, rep);
	CHECK(ok, WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(ok, strstr(rep, "out of address space") &&
			  strstr(rep, "quarantine of 1 closed pool") &&
			  strstr(rep, "no longer caught"));
	close(shed_rep);
	tap_ok(ok,
	       "out of address space (RLIMIT_AS): a create releases the "
	       "quarantine and tries again, and says on the report fd that "
	       "stale pointers into those closed pools are no longer caught");
}

int main(void)
{
	tap_init(19);
	if (probe_dirs(dir, sizeof(dir), disk, shm, sizeof(disk)))
		tap_skip_all("no temporary directory");
	s.report = tmpfd();
	if (s.report < 0)
		tap_skip_all("no temporary file");
	pmg_set_fault_mode(PMG_FAULT_STRICT);
	tap_diag("backend: %s", pmg_backend_name(pmg_backend()));
	t_reuse(64 << 10);
	t_reuse(1 << 20);
	t_reopen();
	t_inode_reuse();
	t_no_file_id();
	t_fifo();
	t_not_ours();
	t_shed();
	if (*ext4_mnt && umount(ext4_mnt))
		tap_diag("umount %s: %m", ext4_mnt);
	probe_dirs_remove(disk, shm);
	return tap_done();
}
