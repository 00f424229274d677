// SPDX-License-Identifier: MIT
/*
 * The shared library as a user links it (-lpmguard, no --wrap): its
 * pthread_create interposes libc's, so threads created inside a window
 * start at the defaults; exported symbols work through the .so; a thread
 * that ends or is cancelled inside a window has it closed (and reported)
 * at its end, so the domain is write-protected and deletable again.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "tap.h"
#include "probe.h"
#include "capture.h"

#define PAGE 4096

static struct pmg_domain *dom;
static char *pg;

static void *in_thread(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)probe(dom, pg + 1, PMG_WRITE);
}

/* The permissions /proc/self/maps gives the page at @a ("rw-p"), or "". */
static const char *perms_of(const void *a)
{
	static char perms[8];
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];

	perms[0] = '\0';
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 &&
		    lo <= (uintptr_t)a && (uintptr_t)a < hi)
			break;
		perms[0] = '\0';
	}
	if (f)
		fclose(f);
	return perms;
}

/* @d is kept by a hardware key (PKU; not a virtual domain:
 * PMGUARD_KEYS=0 makes every domain virtual). */
static int keyed(const struct pmg_domain *d)
{
	return pmg_backend() == PMG_BACKEND_PKU && pmg_domain_key(d) > 0;
}

static char *map_pages(void *at, int n)
{
	char *m = mmap(at, (size_t)n * PAGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS |
		       (at ? MAP_FIXED_NOREPLACE : 0), -1, 0);

	return m == MAP_FAILED ? NULL : m;
}

/*
 * munmap(), mremap() and MAP_FIXED mmap() under protected ranges, seen by
 * the interposed calls: the ranges are dropped (lookup NULL, unprotect 0,
 * the domain deletable), memory mapped at their addresses later is never
 * changed by window edges, and the other ranges keep working.  What a
 * call leaves of a range where it was stays protected (t_partial()).
 */
static void t_unmapped(void)
{
	struct pmg_domain *d = NULL;
	char *a, *b, *c, *e, *f, *g, *n, *blk, src[64] = "data";
	int ok = 1;

	CHECK(ok, pmg_domain_new(&d, "unmapped", 0) == 0);
	a = map_pages(NULL, 2);
	b = map_pages(NULL, 1);
	c = map_pages(NULL, 3);
	e = map_pages(NULL, 1);
	f = map_pages(NULL, 2);
	CHECK(ok, a && b && c && e && f);
	CHECK(ok, pmg_protect(d, a, 2 * PAGE) == 0);
	CHECK(ok, pmg_protect(d, b, PAGE) == 0);
	CHECK(ok, pmg_protect(d, c, 3 * PAGE) == 0);
	CHECK(ok, pmg_protect(d, e, PAGE) == 0);
	CHECK(ok, pmg_protect(d, f, 2 * PAGE) == 0);
	/* whole range unmapped; a new mapping takes its place */
	CHECK(ok, munmap(a, 2 * PAGE) == 0);
	CHECK(ok, pmg_lookup(a, NULL, NULL) == NULL);
	n = map_pages(a, 2);
	if (!n)
		tap_diag("the address was taken meanwhile: new mapping at "
			 "another place");
	/* window edges (process-wide on mprotect) leave it alone */
	CHECK(ok, pmg_write_begin(d) == 0 && pmg_write_end(d) == 0);
	CHECK(ok, !n || !strcmp(perms_of(n), "rw-p"));
	if (n)
		n[5] = 1;	/* would fault if made read-only */
	/* the other ranges still get windows */
	CHECK(ok, pmg_memcpy_persist(b + 8, src, 5) == b + 8);
	CHECK(ok, !strcmp(b + 8, "data"));
	CHECK(ok, pmg_unprotect(a, 2 * PAGE) == 0);
	CHECK(ok, pmg_unprotect(a, 2 * PAGE) == -ENOENT);
	/* partial munmap: the rest of the range stays protected (split);
	 * pmg_unprotect() of the whole range gives back what is left */
	CHECK(ok, munmap(c + PAGE, PAGE) == 0);
	CHECK(ok, pmg_lookup(c, NULL, NULL) == d &&
		  pmg_lookup(c + 2 * PAGE, NULL, NULL) == d);
	CHECK(ok, pmg_unprotect(c, 3 * PAGE) == 0);
	CHECK(ok, pmg_lookup(c, NULL, NULL) == NULL &&
		  pmg_lookup(c + 2 * PAGE, NULL, NULL) == NULL);
	CHECK(ok, !strcmp(perms_of(c), "rw-p") &&
		  !strcmp(perms_of(c + 2 * PAGE), "rw-p"));
	/* MAP_FIXED over a range */
	CHECK(ok, mmap(e, PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS |
		       MAP_FIXED, -1, 0) == e);
	CHECK(ok, pmg_lookup(e, NULL, NULL) == NULL);
	CHECK(ok, pmg_write_begin(d) == 0 && pmg_write_end(d) == 0);
	CHECK(ok, !strcmp(perms_of(e), "r--p"));	/* as mapped */
	CHECK(ok, pmg_unprotect(e, PAGE) == 0);
	/* mremap moves a range: its pages are the caller's at the new place
	 * (the page after it taken: it cannot grow in place) */
	blk = map_pages(f + 2 * PAGE, 1);
	g = mremap(f, 2 * PAGE, 3 * PAGE, MREMAP_MAYMOVE);
	CHECK(ok, g != f);
	if (blk)
		munmap(blk, PAGE);
	CHECK(ok, g != MAP_FAILED);
	CHECK(ok, pmg_lookup(f, NULL, NULL) == NULL);
	if (g != MAP_FAILED) {
		CHECK(ok, pmg_lookup(g, NULL, NULL) == NULL);
		CHECK(ok, !strcmp(perms_of(g), "rw-p") &&
			  !strcmp(perms_of(g + 2 * PAGE), "rw-p"));
		g[PAGE + 3] = 1;
		munmap(g, 3 * PAGE);
	}
	CHECK(ok, pmg_unprotect(f, 2 * PAGE) == 0);
	CHECK(ok, pmg_unprotect(b, PAGE) == 0);
	/* nothing left: the domain goes, its key is free */
	CHECK(ok, pmg_domain_delete(&d) == 0);
	if (n)
		munmap(n, 2 * PAGE);
	munmap(b, PAGE);
	munmap(c, 3 * PAGE);
	munmap(e, PAGE);
	tap_ok(ok, "munmap, MAP_FIXED mmap and mremap under protected ranges "
	       "(interposed): dropped and reported, unprotect 0, domain "
	       "deleted, new mappings never changed; a partial munmap keeps "
	       "the rest protected until the whole range is unprotected");
}

/*
 * Part of a protected range unmapped (munmap(), mremap() shrinking it or
 * moving part of it away): the registry splits the range, what is still
 * mapped stays protected -- a stray store there aborts (strict), the
 * report names its address, the data is intact -- and windows still
 * write it; pmg_unprotect() of the whole range gives back what is left
 * (read-write again), then answers -ENOENT.  Both backends.
 */
static int pu_rep = -1, pu_rd = -1; /* the report pipe's ends */

static int pu_child(void *v)
{
	pmg_set_fault_mode(PMG_FAULT_STRICT);
	pmg_set_report_fd(pu_rep);
	*(volatile char *)v = 'Z';
	return 0;
}

/* A stray store at @at aborts, is reported at its address, and the
 * byte there is still @was. */
static int pu_stray(char *at, char was)
{
	char rep[4096], want[32];
	ssize_t got;
	int st = tap_child(pu_child, at);

	got = read(pu_rd, rep, sizeof(rep) - 1);
	rep[got > 0 ? got : 0] = '\0';
	snprintf(want, sizeof(want), "%p", (void *)at);
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(rep, want) &&
	    strstr(rep, "stray write") && *at == was)
		return 1;
	tap_diag("stray store at %p: status %#x, byte %#x, report: %.300s",
		 (void *)at, st, *at & 0xff, rep);
	return 0;
}

static void t_partial(void)
{
	static const struct {
		const char *name;
		int off, n; /* pages unmapped, of 8 */
	} cs[] = {
		{ "first half", 0, 4 },
		{ "second half", 4, 4 },
		{ "middle", 2, 4 },
	};
	const int rw = PROT_READ | PROT_WRITE;
	struct pmg_domain *d = NULL;
	int fds[2], ok, i, p;
	char *m, *g, *blk;
	void *base;
	size_t len;

	if (pipe(fds) || fcntl(fds[0], F_SETFL, O_NONBLOCK)) {
		tap_ok(0, "partial unmaps: pipe");
		return;
	}
	pu_rep = fds[1];
	pu_rd = fds[0];
	for (i = 0; i < 3; i++) {
		ok = 1;
		m = mmap(NULL, 8 * PAGE, rw, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		CHECK(ok, m != MAP_FAILED && pmg_domain_new(&d, "part", 0) == 0);
		if (!ok) {
			tap_ok(0, "partial munmap (%s): setup", cs[i].name);
			continue;
		}
		memset(m, 'p', 8 * PAGE);
		CHECK(ok, pmg_protect(d, m, 8 * PAGE) == 0);
		CHECK(ok, munmap(m + cs[i].off * PAGE,
				 (size_t)cs[i].n * PAGE) == 0);
		for (p = 0; p < 8; p++) {
			char *at = m + p * PAGE + 100 + p;

			if (p >= cs[i].off && p < cs[i].off + cs[i].n)
				continue;
			/* registered as the piece it is in */
			CHECK(ok, pmg_lookup(at, &base, &len) == d &&
				  (char *)base == (p < cs[i].off
						  ? m : m + (cs[i].off +
							     cs[i].n) * PAGE));
			CHECK(ok, pu_stray(at, 'p'));
		}
		/* a window still writes it */
		p = cs[i].off ? 0 : 7;
		CHECK(ok, pmg_write_begin(d) == 0);
		if (ok)
			m[p * PAGE + 1] = 'w';
		pmg_write_end(d);
		CHECK(ok, m[p * PAGE + 1] == 'w');
		CHECK(ok, pu_stray(m + p * PAGE + 1, 'w'));
		/* the domain still holds ranges */
		CHECK(ok, pmg_domain_delete(&d) == -EBUSY && d);
		CHECK(ok, pmg_unprotect(m, 8 * PAGE) == 0);
		CHECK(ok, pmg_unprotect(m, 8 * PAGE) == -ENOENT);
		p = cs[i].off ? 0 : 7;
		CHECK(ok, pmg_lookup(m + p * PAGE, NULL, NULL) == NULL &&
			  !strcmp(perms_of(m + p * PAGE), "rw-s"));
		if (ok)
			m[p * PAGE] = 'x'; /* the caller's again */
		CHECK(ok, pmg_domain_delete(&d) == 0);
		munmap(m, 8 * PAGE);
		tap_ok(ok, "munmap() of the %s of a protected range (%s): the "
		       "rest stays protected (a stray store aborts, reported "
		       "at its address, data intact), windows write it, "
		       "pmg_unprotect() of the whole range gives it back",
		       cs[i].name, pmg_backend_name(pmg_backend()));
	}

	/* the first half, then the second: nothing left */
	ok = 1;
	m = mmap(NULL, 8 * PAGE, rw, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(ok, m != MAP_FAILED && pmg_domain_new(&d, "part", 0) == 0 &&
		  pmg_protect(d, m, 8 * PAGE) == 0);
	CHECK(ok, munmap(m, 4 * PAGE) == 0);
	CHECK(ok, pu_stray(m + 5 * PAGE, 0));
	CHECK(ok, munmap(m + 4 * PAGE, 4 * PAGE) == 0);
	CHECK(ok, pmg_lookup(m + 5 * PAGE, NULL, NULL) == NULL);
	CHECK(ok, pmg_domain_delete(&d) == 0);
	CHECK(ok, pmg_unprotect(m, 8 * PAGE) == 0);
	CHECK(ok, pmg_unprotect(m, 8 * PAGE) == -ENOENT);
	tap_ok(ok, "munmap() of a protected range's first half, then its "
	       "second: the second half stays protected until it goes, then "
	       "nothing is left (domain deletable, unprotect 0 once)");

	/* mremap(): shrunk in place, and its second half moved away */
	ok = 1;
	m = mmap(NULL, 8 * PAGE, rw, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(ok, m != MAP_FAILED && pmg_domain_new(&d, "part", 0) == 0);
	if (ok)
		memset(m, 'p', 8 * PAGE);
	CHECK(ok, pmg_protect(d, m, 8 * PAGE) == 0);
	g = m != MAP_FAILED ? mremap(m, 8 * PAGE, 6 * PAGE, 0) : MAP_FAILED;
	CHECK(ok, g == m);
	CHECK(ok, pmg_lookup(m + 5 * PAGE, &base, &len) == d && base == m &&
		  len == 6 * PAGE);
	CHECK(ok, pu_stray(m + 5 * PAGE, 'p'));
	/* the page after it taken: the last 3 pages, grown, must move */
	blk = m != MAP_FAILED ? map_pages(m + 6 * PAGE, 1) : NULL;
	g = m != MAP_FAILED ? mremap(m + 3 * PAGE, 3 * PAGE, 4 * PAGE,
				     MREMAP_MAYMOVE) : MAP_FAILED;
	if (blk)
		munmap(blk, PAGE);
	CHECK(ok, g != MAP_FAILED && g != m + 3 * PAGE);
	CHECK(ok, pmg_lookup(m + 2 * PAGE, &base, &len) == d && base == m &&
		  len == 3 * PAGE);
	CHECK(ok, pu_stray(m + 2 * PAGE + 5, 'p'));
	/* the moved pages are the caller's at their new place */
	CHECK(ok, g != MAP_FAILED && pmg_lookup(g, NULL, NULL) == NULL &&
		  !strcmp(perms_of(g), "rw-s"));
	if (g != MAP_FAILED && pmg_lookup(g, NULL, NULL) == NULL &&
	    !strcmp(perms_of(g), "rw-s"))
		g[7] = 'x';
	CHECK(ok, pmg_unprotect(m, 8 * PAGE) == 0);
	CHECK(ok, pmg_domain_delete(&d) == 0);
	if (g != MAP_FAILED)
		munmap(g, 4 * PAGE);
	munmap(m, 3 * PAGE);
	tap_ok(ok, "mremap() shrinking a protected range in place, then "
	       "moving part of it away: what stays keeps its protection "
	       "(a stray store aborts), the moved pages are the caller's");

	/* a pool: its second half unmapped by the program */
	{
		struct pmg_pool_config *pc = NULL;
		struct pmg_pool *pl = NULL;
		char path[64];

		ok = 1;
		snprintf(path, sizeof(path), "/tmp/pmg-shared-pu-%d.pool",
			 (int)getpid());
		unlink(path);
		CHECK(ok, pmg_pool_config_new(&pc) == 0 &&
			  pmg_pool_config_set_size(pc, 8 * PAGE) == 0 &&
			  pmg_pool_create(&pl, path, pc) == 0);
		m = pl ? pmg_pool_address(pl) : NULL;
		CHECK(ok, m && pmg_memcpy_persist(m + 10, "pool", 5) ==
				       m + 10);
		CHECK(ok, m && munmap(m + 4 * PAGE, 4 * PAGE) == 0);
		CHECK(ok, m && pu_stray(m + 10, 'p') && !strcmp(m + 10, "pool"));
		CHECK(ok, m && pmg_memcpy_persist(m + 20, "kept", 5) == m + 20 &&
			  !strcmp(m + 20, "kept"));
		CHECK(ok, pmg_pool_close(&pl) == 0);
		pmg_pool_config_delete(&pc);
		unlink(path);
		tap_ok(ok, "a pool whose second half the program unmapped: "
		       "the first half stays protected (a stray store "
		       "aborts), copies into it work, the pool closes");
	}
	close(fds[0]);
	close(fds[1]);
	pu_rep = pu_rd = -1;
}

/*
 * The file under a protected mapping deleted, then the mapping closed
 * and the file reopened: deleting it changes no mapping (the range stays
 * protected, windows write it, the data stays readable); a new mapping of
 * the reopened file, protected again, is protected as the first was.
 */
static void t_file_gone(void)
{
	const int rw = PROT_READ | PROT_WRITE;
	struct pmg_domain *d = NULL;
	char path[64], *m = MAP_FAILED;
	int fd, fds[2], ok = 1;

	snprintf(path, sizeof(path), "/tmp/pmg-shared-fg-%d", (int)getpid());
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	CHECK(ok, fd >= 0 && ftruncate(fd, 4 * PAGE) == 0 &&
		  pipe(fds) == 0 && fcntl(fds[0], F_SETFL, O_NONBLOCK) == 0);
	pu_rep = fds[1];
	pu_rd = fds[0];
	if (ok)
		m = mmap(NULL, 4 * PAGE, rw, MAP_SHARED, fd, 0);
	CHECK(ok, m != MAP_FAILED && pmg_domain_new(&d, "fg", 0) == 0);
	if (ok)
		memset(m, 'p', 4 * PAGE);
	CHECK(ok, pmg_protect(d, m, 4 * PAGE) == 0);
	close(fd);
	CHECK(ok, unlink(path) == 0);
	CHECK(ok, pu_stray(m + 3 * PAGE + 9, 'p'));
	CHECK(ok, pmg_write_begin(d) == 0);
	if (ok)
		m[5] = 'w';
	pmg_write_end(d);
	CHECK(ok, m[5] == 'w' && m[6] == 'p');
	/* closed, the file made again and mapped again */
	CHECK(ok, pmg_unprotect(m, 4 * PAGE) == 0);
	if (m != MAP_FAILED)
		munmap(m, 4 * PAGE);
	m = MAP_FAILED;
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	CHECK(ok, fd >= 0 && ftruncate(fd, 4 * PAGE) == 0);
	if (ok)
		m = mmap(NULL, 4 * PAGE, rw, MAP_SHARED, fd, 0);
	CHECK(ok, m != MAP_FAILED && pmg_protect(d, m, 4 * PAGE) == 0);
	CHECK(ok, pu_stray(m + 100, 0));
	CHECK(ok, pmg_unprotect(m, 4 * PAGE) == 0 &&
		  pmg_domain_delete(&d) == 0);
	if (m != MAP_FAILED)
		munmap(m, 4 * PAGE);
	if (fd >= 0)
		close(fd);
	unlink(path);
	close(fds[0]);
	close(fds[1]);
	pu_rep = pu_rd = -1;
	tap_ok(ok, "the file under a protected mapping deleted: the range "
	       "stays protected (a stray store aborts), windows write it; "
	       "closed and the file reopened, the new mapping protected "
	       "again is protected as the first");
}

/*
 * Kernel writes into a lazily windowed range (mprotect backend: a write
 * window grants each 1 MiB block on its first write fault; the kernel's
 * copy takes no fault and stopped at the first block not granted, so a
 * read() came back short): the library's read family grants the
 * destination inside an open write window first.  3 MiB from a file or a
 * socket, through each call: full length, the data right.
 */
#define RL (3u << 20)

struct rl_feed {
	int fd;
	const char *src;
};

static void *rl_send(void *v)
{
	const struct rl_feed *f = v;
	size_t at = 0;
	ssize_t n;

	while (at < RL &&
	       (n = send(f->fd, f->src + at, RL - at, MSG_NOSIGNAL)) > 0)
		at += (size_t)n;
	return NULL;
}

/* Does this kernel have AF_UNIX sockets (CONFIG_UNIX)? */
static int socket_unix_ok(void)
{
	int s = socket(AF_UNIX, SOCK_STREAM, 0);

	if (s < 0)
		return errno != EAFNOSUPPORT && errno != ENOSYS;
	close(s);
	return 1;
}

static void t_read_lazy(void)
{
	static const char *const how[] = {
		"read", "pread", "readv", "preadv", "fread", "recv",
		"recvfrom", "recvmsg", "recvmmsg",
	};
	const int rw = PROT_READ | PROT_WRITE;
	struct pmg_domain *d = NULL;
	char *m, *src;
	int fd, ok = 1, i, unix_ok;

	m = mmap(NULL, RL, rw, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	src = malloc(RL);
	fd = tmpfd();
	CHECK(ok, m != MAP_FAILED && src && fd >= 0 &&
		  pmg_domain_new(&d, "rd", 0) == 0 &&
		  pmg_protect(d, m, RL) == 0);
	if (!ok) {
		tap_ok(0, "read family into a lazily windowed range: setup");
		return;
	}
	for (size_t k = 0; k < RL; k++)
		src[k] = (char)('a' + (k * 7 + k / 4093) % 26);
	CHECK(ok, write(fd, src, RL) == (ssize_t)RL);
	/* the series' test kernels (tinyconfig) have no AF_UNIX sockets
	 * (CONFIG_UNIX): there the recv family is not tried, and said so */
	unix_ok = socket_unix_ok();
	for (i = 0; i < (int)(sizeof(how) / sizeof(how[0])); i++) {
		struct iovec iov[3];
		struct msghdr mh;
		struct mmsghdr mm;
		pthread_t t;
		struct rl_feed feed;
		int sv[2] = { -1, -1 }, sock = i >= 5, c = 1;
		ssize_t got = -1;
		FILE *f = NULL;

		if (sock && !unix_ok) {
			tap_diag("%s: not tried: no AF_UNIX sockets in this "
				 "kernel (CONFIG_UNIX)", how[i]);
			continue;
		}
		for (int k = 0; k < 3; k++) {
			iov[k].iov_base = m + k * (RL / 3);
			iov[k].iov_len = RL / 3;
		}
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = iov;
		mh.msg_iovlen = 3;
		if (sock) {
			c = socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0;
			feed.fd = sv[1];
			feed.src = src;
			c = c && !pthread_create(&t, NULL, rl_send, &feed);
		}
		if (!strcmp(how[i], "fread"))
			c = lseek(fd, 0, SEEK_SET) == 0 &&
			    (f = fdopen(dup(fd), "r")) != NULL;
		CHECK(ok, c && pmg_write_begin(d) == 0);
		if (!c)
			continue;
		/* the page the destination starts in written first (as
		 * LMDB writes a page's header): on lazy windows its block is
		 * granted, the ones after it are not */
		m[0] = 0;
		switch (i) {
		case 0:
			lseek(fd, 0, SEEK_SET);
			got = read(fd, m, RL);
			break;
		case 1:
			got = pread(fd, m, RL, 0);
			break;
		case 2:
			lseek(fd, 0, SEEK_SET);
			got = readv(fd, iov, 3);
			break;
		case 3:
			got = preadv(fd, iov, 3, 0);
			break;
		case 4:
			got = (ssize_t)fread(m, 1, RL, f);
			break;
		case 5:
			got = recv(sv[0], m, RL, MSG_WAITALL);
			break;
		case 6:
			got = recvfrom(sv[0], m, RL, MSG_WAITALL, NULL, NULL);
			break;
		case 7:
			got = recvmsg(sv[0], &mh, MSG_WAITALL);
			break;
		case 8:
			memset(&mm, 0, sizeof(mm));
			mm.msg_hdr = mh;
			got = recvmmsg(sv[0], &mm, 1, MSG_WAITALL, NULL) == 1
				      ? (ssize_t)mm.msg_len : -1;
			break;
		}
		pmg_write_end(d);
		if (sock) {
			/* a short receive left the sender blocked: unblock */
			shutdown(sv[0], SHUT_RDWR);
			pthread_join(t, NULL);
			close(sv[0]);
			close(sv[1]);
		}
		if (f)
			fclose(f);
		if (got != (ssize_t)RL || memcmp(m, src, RL)) {
			tap_diag("%s into the windowed 3 MiB: %zd of %u bytes, "
				 "data %s", how[i], got, RL,
				 memcmp(m, src, RL) ? "wrong" : "right");
			ok = 0;
		}
		/* fresh for the next call: zeroed, every block given back */
		pmg_write_begin(d);
		memset(m, 0, RL);
		pmg_write_end(d);
	}
	/* outside a window the kernel's write is refused as the
	 * program's own would be: EFAULT, nothing written */
	lseek(fd, 0, SEEK_SET);
	errno = 0;
	if (read(fd, m + 5, 100) != -1 || errno != EFAULT || m[5] != 0) {
		tap_diag("read into the range outside a window: errno %d, "
			 "byte %#x", errno, m[5] & 0xff);
		ok = 0;
	}
	tap_ok(ok, "read, pread, readv, preadv, fread, %s of 3 MiB into a "
	       "write window on a range (%s, %s windows): full length, data "
	       "right; outside a window read() fails with EFAULT, nothing "
	       "written",
	       unix_ok ? "recv, recvfrom, recvmsg, recvmmsg" :
	       "(recv, recvfrom, recvmsg, recvmmsg SKIPPED: no AF_UNIX)",
	       pmg_backend_name(pmg_backend()),
	       pmg_backend() == PMG_BACKEND_PKU ? "keyed" : "lazy");
	pmg_unprotect(m, RL);
	pmg_domain_delete(&d);
	munmap(m, RL);
	free(src);
	close(fd);
}

/*
 * A pool unmapped behind the library's back, and a new mapping at its
 * address: the other pool keeps working, and closing the first one leaves
 * the new mapping alone.
 */
static void t_unmapped_pool(void)
{
	struct pmg_pool_config *c = NULL;
	struct pmg_pool *p = NULL, *q = NULL;
	char path[2][64], *a = NULL, *n = NULL, *b;
	int ok = 1, i;

	for (i = 0; i < 2; i++) {
		snprintf(path[i], sizeof(path[i]), "/tmp/pmg-shared-%d-%d.pool",
			 (int)getpid(), i);
		unlink(path[i]);
	}
	CHECK(ok, pmg_pool_config_new(&c) == 0 &&
		  pmg_pool_config_set_size(c, 4 * PAGE) == 0);
	CHECK(ok, pmg_pool_create(&p, path[0], c) == 0);
	CHECK(ok, pmg_pool_create(&q, path[1], c) == 0);
	if (p && q) {
		a = pmg_pool_address(p);
		b = pmg_pool_address(q);
		CHECK(ok, munmap(a, 4 * PAGE) == 0);
		n = map_pages(a, 4);
		if (n)
			memset(n, 0x33, 4 * PAGE);
		CHECK(ok, pmg_memcpy_persist(b + 100, "other", 6) == b + 100);
		CHECK(ok, pmg_pool_close(&p) == 0);
		CHECK(ok, !n || (!strcmp(perms_of(n), "rw-p") &&
				 n[0] == 0x33 && n[4 * PAGE - 1] == 0x33));
		CHECK(ok, pmg_memcpy_persist(b + 200, "still", 6) == b + 200);
		CHECK(ok, !strcmp(b + 100, "other") && !strcmp(b + 200, "still"));
	}
	pmg_pool_close(&p);
	pmg_pool_close(&q);
	pmg_pool_config_delete(&c);
	if (n)
		munmap(n, 4 * PAGE);
	for (i = 0; i < 2; i++)
		unlink(path[i]);
	tap_ok(ok, "a pool unmapped behind pmguard's back: the other pool's "
	       "copies still work, closing it leaves the new mapping at its "
	       "address alone");
}

/*
 * N11: the program's own mprotect(), pkey_mprotect() and madvise() over a
 * protected range never take its protection away (interposed): a stray
 * write after them still aborts (strict), a page the program made
 * read-only stays read-only inside a window, and its own rights come
 * back when it asks for them.
 */
static struct pmg_domain *mpd;

struct mp_arg {
	char *at;
	int window;
};

static int mp_child(void *v)
{
	const struct mp_arg *a = v;

	pmg_set_fault_mode(PMG_FAULT_STRICT);
	pmg_set_report_fd(-1);
	if (a->window && pmg_write_begin(mpd))
		return 3;
	*(volatile char *)a->at = 'Z';
	if (a->window)
		pmg_write_end(mpd);
	return 0;
}

/* How a child's write to @at ended: 'A' SIGABRT, 'S' SIGSEGV, 'w'
 * written (exit 0), '?' other; the byte is put back if it was written. */
static int mp_write(char *at, int window)
{
	struct mp_arg a = { .at = at, .window = window };
	int st = tap_child(mp_child, &a);

	if (WIFSIGNALED(st))
		return WTERMSIG(st) == SIGABRT ? 'A' :
		       WTERMSIG(st) == SIGSEGV ? 'S' : '?';
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 && *at == 'Z' ? 'w' : '?';
}

/* Put a byte a child wrote back, in a window (the parent is relaxed:
 * a stray write there would be let through for good). */
static void mp_restore(char *at)
{
	pmg_write_begin(mpd);
	*at = 'o';
	pmg_write_end(mpd);
}

/*
 * madvise(MADV_DONTNEED) over a private protected range drops its data
 * (zero pages come back) without a write: reported, naming the domain;
 * the range stays protected (a stray write aborts).  Shared pages keep
 * their data: not reported (above).
 */
static void t_madvise_private(void)
{
	char *m = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct pmg_domain *md = NULL;
	char buf[2048];
	int ok = 1, fd = -1, old, r;
	ssize_t n;

	CHECK(ok, m != MAP_FAILED && pmg_domain_new(&md, "madv", 0) == 0 &&
		  pmg_protect(md, m, 2 * PAGE) == 0);
	if (!ok) {
		tap_ok(0, "madvise(MADV_DONTNEED) over a private protected "
		       "range: setup");
		return;
	}
	CHECK(ok, pmg_write_begin(md) == 0);
	memset(m, 'p', 2 * PAGE);
	CHECK(ok, pmg_write_end(md) == 0);
	fd = tmpfd();
	old = pmg_set_report_fd(fd);
	CHECK(ok, madvise(m + PAGE, PAGE, MADV_DONTNEED) == 0);
	pmg_set_report_fd(old);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	close(fd);
	tap_diag("report: %.200s", buf);
	CHECK(ok, strstr(buf, "madvise(") && strstr(buf, "MADV_DONTNEED") &&
		  strstr(buf, "domain 'madv'") && strstr(buf, "dropped"));
	CHECK(ok, m[0] == 'p' && m[PAGE] == 0 && m[2 * PAGE - 1] == 0);
	mpd = md;
	r = mp_write(m + PAGE + 8, 0);
	CHECK(ok, r == 'A' && m[PAGE + 8] == 0);
	r = mp_write(m + 8, 0);
	CHECK(ok, r == 'A' && m[8] == 'p');
	mpd = NULL;
	tap_ok(ok, "madvise(MADV_DONTNEED) over a private protected range "
	       "(%s): reported (its data dropped, not by a window), the range "
	       "stays protected: a stray write aborts",
	       keyed(md) ? "a key" : "page protection");
	pmg_unprotect(m, 2 * PAGE);
	pmg_domain_delete(&md);
	munmap(m, 2 * PAGE);
}

static void t_mprotect_over(void)
{
	const int rw = PROT_READ | PROT_WRITE;
	int pku, ok, r, k2 = -1, mr;
	char *m = mmap(NULL, 4 * PAGE, rw, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	ok = m != MAP_FAILED && pmg_domain_new(&mpd, "mp", 0) == 0;
	pku = ok && keyed(mpd);
	if (ok) {
		memset(m, 'o', 4 * PAGE);
		ok = pmg_protect(mpd, m, 4 * PAGE) == 0;
	}
	if (!ok) {
		tap_ok(0, "mprotect over a protected range: setup");
		tap_ok(0, "mprotect(PROT_READ) inside a window");
		tap_ok(0, "pkey_mprotect over a protected range");
		tap_ok(0, "madvise over a protected range");
		tap_ok(0, "pmg_unprotect() after the program's mprotect()");
		return;
	}
	/* the program asks for read-write: still protected */
	ok = 1;
	CHECK(ok, mprotect(m, 4 * PAGE, rw) == 0);
	r = mp_write(m + 100, 0);
	tap_diag("after mprotect(RW): a stray write: %c", r);
	CHECK(ok, r == 'A' && m[100] == 'o');
	/* PROT_EXEC then read-write (PKU: the execute-only key, then key
	 * 0 -- unless re-tagged) */
	CHECK(ok, mprotect(m, 4 * PAGE, PROT_EXEC) == 0);
	CHECK(ok, mprotect(m, 4 * PAGE, rw) == 0);
	r = mp_write(m + 200, 0);
	tap_diag("after mprotect(EXEC), mprotect(RW): a stray write: %c", r);
	CHECK(ok, r == 'A' && m[200] == 'o');
	CHECK(ok, pmg_lookup(m, NULL, NULL) == mpd);
	tap_ok(ok, "the program's mprotect(PROT_READ|PROT_WRITE) (also after "
	       "PROT_EXEC) over a protected range keeps it protected: a stray "
	       "write aborts, byte unchanged");
	/* the program makes page 1 read-only: so it stays in a window */
	ok = 1;
	CHECK(ok, mprotect(m + PAGE, PAGE, PROT_READ) == 0);
	r = mp_write(m + PAGE + 8, 1);
	tap_diag("page made read-only by the program, written in a window: "
		 "%c", r);
	CHECK(ok, r == 'S' && m[PAGE + 8] == 'o');	/* the program's own */
	r = mp_write(m + 8, 1);
	CHECK(ok, r == 'w');		/* the other pages: windows work */
	mp_restore(m + 8);
	/* outside windows both refuse it: the program's protection (S) or,
	 * on PKU, the key first (SEGV_PKUERR: strict, A) */
	r = mp_write(m + PAGE + 8, 0);
	CHECK(ok, (r == 'S' || (pku && r == 'A')) && m[PAGE + 8] == 'o');
	/* its rights back: windows write there again */
	CHECK(ok, mprotect(m + PAGE, PAGE, rw) == 0);
	r = mp_write(m + PAGE + 8, 1);
	tap_diag("read-write again, written in a window: %c", r);
	CHECK(ok, r == 'w');
	mp_restore(m + PAGE + 8);
	CHECK(ok, mp_write(m + PAGE + 8, 0) == 'A');
	tap_ok(ok, "mprotect(PROT_READ) by the program over part of a "
	       "protected range: read-only inside windows too, until it "
	       "asks for read-write again");
	/* pkey_mprotect() with another key (PKU) or none (-1) */
	ok = 1;
	if (pmg_backend() == PMG_BACKEND_PKU)
		k2 = (int)syscall(SYS_pkey_alloc, 0, 0);
	CHECK(ok, pmg_backend() != PMG_BACKEND_PKU || k2 > 0);
	/* the glibc wrapper (a raw syscall is not seen: docs/api.md) */
	CHECK(ok, pkey_mprotect(m, 4 * PAGE, rw, k2) == 0);
	r = mp_write(m + 300, 0);
	tap_diag("after pkey_mprotect(RW, key %d): a stray write: %c", k2, r);
	CHECK(ok, r == 'A' && m[300] == 'o');
	if (k2 > 0)
		syscall(SYS_pkey_free, k2);
	tap_ok(ok, "pkey_mprotect() over a protected range (%s): the range "
	       "keeps its protection", k2 > 0 ? "another key" : "key -1");
	/* madvise(MADV_DONTNEED) drops pages, never the protection */
	ok = 1;
	mr = madvise(m, 4 * PAGE, MADV_DONTNEED);
	if (mr && errno == ENOSYS) {
		tap_skip("madvise(MADV_DONTNEED) over a protected range",
			 "madvise(2): ENOSYS (a kernel without "
			 "CONFIG_ADVISE_SYSCALLS)");
	} else {
		CHECK(ok, mr == 0);
		CHECK(ok, m[0] == 'o' && m[4 * PAGE - 1] == 'o');
		r = mp_write(m + 400, 0);
		CHECK(ok, r == 'A' && m[400] == 'o');
		tap_ok(ok, "madvise(MADV_DONTNEED) over a protected range: "
		       "data kept (shared), a stray write still aborts");
	}
	t_madvise_private();
	/* pmg_unprotect() gives the pages back as the program left them */
	ok = 1;
	CHECK(ok, mprotect(m + 2 * PAGE, PAGE, PROT_READ) == 0);
	CHECK(ok, pmg_unprotect(m, 4 * PAGE) == 0);
	tap_diag("after unprotect: page 2 '%s'", perms_of(m + 2 * PAGE));
	tap_diag("after unprotect: page 3 '%s'", perms_of(m + 3 * PAGE));
	CHECK(ok, !strcmp(perms_of(m + 2 * PAGE), "r--s"));
	CHECK(ok, !strcmp(perms_of(m + 3 * PAGE), "rw-s"));
	tap_ok(ok, "pmg_unprotect() leaves the pages as the program's "
	       "mprotect() set them (a read-only page stays read-only; %s)",
	       pku ? "a key" : "page protection");
	pmg_domain_delete(&mpd);
	munmap(m, 4 * PAGE);
}

/*
 * A closed pool's quarantined addresses (quarantine.c), unmapped by the
 * program and reserved again by it: the library forgets them (interposed
 * munmap), so a fault there is the program's, not reported as a closed
 * pool's.
 */
static int qf_rep = -1;

static int qf_child(void *v)
{
	pmg_set_fault_mode(PMG_FAULT_STRICT);
	pmg_set_report_fd(qf_rep);
	*(volatile char *)v = 'Z';
	return 0;
}

static void t_quarantine_forget(void)
{
	struct pmg_pool_config *c = NULL;
	struct pmg_pool *p = NULL;
	char path[64], rep[2048], *a = NULL, *n;
	ssize_t got;
	int ok = 1, st, fds[2];

	snprintf(path, sizeof(path), "/tmp/pmg-shared-q-%d.pool",
		 (int)getpid());
	CHECK(ok, pipe(fds) == 0 && fcntl(fds[0], F_SETFL, O_NONBLOCK) == 0);
	qf_rep = fds[1];
	CHECK(ok, pmg_pool_config_new(&c) == 0 &&
		  pmg_pool_config_set_size(c, 4 * PAGE) == 0 &&
		  pmg_pool_create(&p, path, c) == 0);
	a = pmg_pool_address(p);
	CHECK(ok, pmg_pool_close(&p) == 0);
	st = tap_child(qf_child, a + 5);
	got = read(fds[0], rep, sizeof(rep) - 1);
	rep[got > 0 ? got : 0] = '\0';
	CHECK(ok, WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT &&
		  strstr(rep, "closed pool"));
	/* the program takes the place back */
	CHECK(ok, a && munmap(a, 4 * PAGE) == 0);
	n = mmap(a, 4 * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS |
		 MAP_FIXED_NOREPLACE, -1, 0);
	CHECK(ok, n == a);
	st = tap_child(qf_child, a + 5);
	got = read(fds[0], rep, sizeof(rep) - 1);
	rep[got > 0 ? got : 0] = '\0';
	CHECK(ok, WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV &&
		  !strstr(rep, "closed pool"));
	if (!ok)
		tap_diag("status %#x, report: %s", st, rep);
	if (n != MAP_FAILED)
		munmap(n, 4 * PAGE);
	unlink(path);
	pmg_pool_config_delete(&c);
	close(fds[0]);
	close(fds[1]);
	tap_ok(ok, "a closed pool's quarantined range: a stray write there "
	       "is reported as the closed pool's; once the program unmapped "
	       "it and mapped its own, it is the program's (plain SIGSEGV)");
}

/*
 * The interposers against unusual calls:
 * (a) mprotect() with a bit the kernel refuses, over a protected range:
 *     EINVAL as the kernel says, nothing changed (it returned 0 and set
 *     the pages to what the known bits asked).
 * (b) munmap() over a protected range and a closed pool's quarantined
 *     range at once (the locked path): the quarantine is forgotten too,
 *     so a fault in the program's own mapping there is the program's.
 */
static void t_hostile(void)
{
	struct pmg_pool_config *c = NULL;
	struct pmg_pool *p = NULL;
	struct pmg_domain *d = NULL;
	char path[64], rep[2048], *a = NULL, *m, *n = MAP_FAILED;
	const int rw = PROT_READ | PROT_WRITE;
	ssize_t got;
	int ok = 1, rc, e, st, fds[2];

	/* (a) */
	m = mmap(NULL, 2 * PAGE, rw, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(ok, m != MAP_FAILED && pmg_domain_new(&d, "hm", 0) == 0);
	if (ok) {
		memset(m, 'o', 2 * PAGE);
		CHECK(ok, pmg_protect(d, m, 2 * PAGE) == 0);
	}
	errno = 0;
	rc = ok ? mprotect(m, 2 * PAGE, PROT_READ | 0x10000) : 0;
	e = errno;
	tap_diag("mprotect(protected, PROT_READ|0x10000): %d, errno %d (%s)",
		 rc, e, perms_of(m));
	CHECK(ok, rc == -1 && e == EINVAL);
	CHECK(ok, pmg_write_begin(d) == 0);
	if (ok) {
		m[8] = 'w';	/* windows still write: nothing changed */
		m[8] = 'o';
	}
	pmg_write_end(d);
	/* a length that wraps the address space: the kernel's ENOMEM */
	errno = 0;
	rc = ok ? mprotect(m, SIZE_MAX - 2 * PAGE, PROT_READ | PROT_WRITE) : 0;
	e = errno;
	tap_diag("mprotect(protected, SIZE_MAX - 2 pages, RW): %d, errno %d",
		 rc, e);
	CHECK(ok, rc == -1 && e == ENOMEM);
	tap_ok(ok, "mprotect() with an unknown prot bit, or a length that "
	       "wraps, over a protected range: EINVAL / ENOMEM, as the kernel "
	       "says, nothing changed");
	if (d)
		pmg_unprotect(m, 2 * PAGE);
	if (m != MAP_FAILED)
		munmap(m, 2 * PAGE);

	/* (b) */
	ok = 1;
	snprintf(path, sizeof(path), "/tmp/pmg-shared-h-%d.pool",
		 (int)getpid());
	CHECK(ok, pipe(fds) == 0 && fcntl(fds[0], F_SETFL, O_NONBLOCK) == 0);
	qf_rep = fds[1];
	CHECK(ok, pmg_pool_config_new(&c) == 0 &&
		  pmg_pool_config_set_size(c, 4 * PAGE) == 0 &&
		  pmg_pool_create(&p, path, c) == 0);
	a = pmg_pool_address(p);
	CHECK(ok, pmg_pool_close(&p) == 0);
	/* a protected range of the program's right after its place: the
	 * 4 pages and the 2 MiB guard above them (docs/pool.md, "Mapping"),
	 * quarantined with them */
	m = a ? mmap(a + 4 * PAGE + (2 << 20), PAGE, rw,
		     MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0)
	      : MAP_FAILED;
	CHECK(ok, m == a + 4 * PAGE + (2 << 20) &&
		  pmg_protect(d, m, PAGE) == 0);
	/* one munmap over both, the place taken by the program */
	CHECK(ok, a && munmap(a, 5 * PAGE + (2 << 20)) == 0);
	n = a ? mmap(a, 4 * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS |
		     MAP_FIXED_NOREPLACE, -1, 0) : MAP_FAILED;
	CHECK(ok, n == a);
	st = ok ? tap_child(qf_child, a + 5) : 0;
	got = read(fds[0], rep, sizeof(rep) - 1);
	rep[got > 0 ? got : 0] = '\0';
	CHECK(ok, WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV &&
		  !strstr(rep, "closed pool"));
	if (!ok)
		tap_diag("status %#x, report: %s", st, rep);
	if (n != MAP_FAILED)
		munmap(n, 4 * PAGE);
	unlink(path);
	pmg_pool_config_delete(&c);
	pmg_domain_delete(&d);
	close(fds[0]);
	close(fds[1]);
	tap_ok(ok, "munmap() over a protected range and a quarantined one at "
	       "once: the quarantine is forgotten too (a fault in the "
	       "program's mapping there is its own: plain SIGSEGV)");
}

/*
 * (c) pkey_mprotect() over a protected range, racing a stray writer on
 * another thread: the range must never be writable in between (the call
 * was made as asked -- read-write, key -1 or 0 -- and only then
 * protected again).  Contain mode, so that each caught write is undone
 * and the writer goes on; a write that landed shows in the byte.
 */
static int race_stop;
static char *race_at;

static void *race_writer(void *arg)
{
	(void)arg;
	/* atomic: the sanitizers see no race on the byte (each store is
	 * a plain mov, contained) */
	while (!__atomic_load_n(&race_stop, __ATOMIC_RELAXED))
		__atomic_store_n(race_at, 'Z', __ATOMIC_RELAXED);
	return NULL;
}

static int race_child(void *v)
{
	struct pmg_domain *rd = NULL;
	int pku = pmg_backend() == PMG_BACKEND_PKU, i, key = *(int *)v;
	pthread_t t;
	char *m = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED || pmg_domain_new(&rd, "race", 0))
		return 3;
	m[0] = 'o';
	if (pmg_protect(rd, m, PAGE))
		return 4;
	pmg_set_report_fd(-1);
	pmg_set_fault_mode(PMG_FAULT_CONTAIN);
	race_at = m;
	if (pthread_create(&t, NULL, race_writer, NULL))
		return 5;
	for (i = 0; i < 20000 && __atomic_load_n(m, __ATOMIC_RELAXED) == 'o';
	     i++)
		if (pkey_mprotect(m, PAGE, PROT_READ | PROT_WRITE,
				  pku ? key : -1))
			return 6;
	__atomic_store_n(&race_stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	if (m[0] != 'o') {
		fprintf(stderr, "# the stray write landed after %d calls\n",
			i);
		return 1;
	}
	return 0;
}

static void t_pkey_race(void)
{
	int st, key = 0;

	st = tap_child(race_child, &key);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		tap_diag("child status %#x", st);
	tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "pkey_mprotect(RW, %s) over a protected range, 20000 times, "
	       "while another thread writes there (contain): no write lands",
	       pmg_backend() == PMG_BACKEND_PKU ? "key 0" : "key -1");
}

static int ready[2];

static void *end_inside(void *arg)
{
	pmg_write_begin(dom);
	pmg_write_begin(dom);
	if (arg) {
		if (write(ready[1], "r", 1) != 1)
			return NULL;
		for (;;)
			pause();
	}
	pthread_exit(NULL);
}

/* A thread ends (@cancel: is cancelled) inside two nested windows. */
static int end_case(int cancel, int rep)
{
	struct pmg_domain *d2 = NULL;
	char buf[2048], c;
	pthread_t t;
	ssize_t n;
	int ok = 1;

	CHECK(ok, pthread_create(&t, NULL, end_inside,
				 (void *)(intptr_t)cancel) == 0);
	if (cancel) {
		CHECK(ok, read(ready[0], &c, 1) == 1);
		CHECK(ok, pthread_cancel(t) == 0);
	}
	CHECK(ok, pthread_join(t, NULL) == 0);
	CHECK(ok, probe(dom, pg + 64, PMG_WRITE) == 1);
	n = read(rep, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	CHECK(ok, strstr(buf, "ended with 2 write and 0 read window(s) open "
			 "on domain 'shared'") != NULL);
	CHECK(ok, pmg_unprotect(pg, PAGE) == 0);
	CHECK(ok, pmg_domain_delete(&dom) == 0);
	/* a fresh domain for the next case */
	CHECK(ok, pmg_domain_new(&d2, "shared", 0) == 0 &&
		  pmg_protect(d2, pg, PAGE) == 0);
	dom = d2;
	return ok;
}

/*
 * A write window opened where SIGSEGV is blocked opens its domain whole
 * (mprotect backend, lazy windows): the program's own mprotect(RW) over
 * the range inside it must leave it writable (interposed: our
 * protection, capped by what it asked), or the thread's next write
 * faults with SIGSEGV blocked and the kernel kills it.  After the close
 * the range is protected again.
 */
static int mw_child(void *v)
{
	char *m = v;
	sigset_t all, old;

	sigfillset(&all);
	if (pthread_sigmask(SIG_BLOCK, &all, &old) || pmg_write_begin(mpd))
		return 3;
	m[8] = 'a';
	if (mprotect(m, 4 * PAGE, PROT_READ | PROT_WRITE))
		return 4;
	m[PAGE + 8] = 'b'; /* killed here, if mprotect() lowered it */
	m[3 * PAGE + 8] = 'c';
	pmg_write_end(mpd);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (pmg_backend() != PMG_BACKEND_PKU &&
	    strcmp(perms_of(m + PAGE), "r--s"))
		return 5;
	return m[8] == 'a' && m[PAGE + 8] == 'b' && m[3 * PAGE + 8] == 'c'
		       ? 0 : 6;
}

static void t_mprotect_whole(void)
{
	char *m = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int ok = m != MAP_FAILED && pmg_domain_new(&mpd, "mpw", 0) == 0 &&
		 pmg_protect(mpd, m, 4 * PAGE) == 0, st;

	if (ok) {
		st = tap_child(mw_child, m);
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			tap_diag("child: %s %d", WIFSIGNALED(st) ? "signal"
				 : "exit", WIFSIGNALED(st) ? WTERMSIG(st)
				 : WEXITSTATUS(st));
		ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
	}
	tap_ok(ok, "SIGSEGV blocked, a window open: the program's "
	       "mprotect(RW) over the range keeps it writable; protected "
	       "after the close");
	if (m != MAP_FAILED) {
		pmg_unprotect(m, 4 * PAGE);
		munmap(m, 4 * PAGE);
	}
	pmg_domain_delete(&mpd);
}

int main(void)
{
	Dl_info info;
	pthread_t t;
	void *res;

	int rep[2];

	tap_init(27);
	pg = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int ok = pmg_domain_new(&dom, "shared", 0) == 0 &&
		 pmg_protect(dom, pg, PAGE) == 0;

	tap_ok(ok, "domain and range through libpmguard.so (%s)",
	       pmg_backend_name(pmg_backend()));
	probe_begin();
	memset(&info, 0, sizeof(info));
	ok = dladdr((void *)pthread_create, &info) && info.dli_fname &&
	     strstr(info.dli_fname, "libpmguard.so");
	tap_ok(ok, "pthread_create resolves to libpmguard.so (%s)",
	       info.dli_fname ? info.dli_fname : "?");
	tap_ok(probe(dom, pg, PMG_WRITE) == 1 &&
	       pmg_write_begin(dom) == 0 && probe(dom, pg, PMG_WRITE) == 0,
	       "stray write faults, windowed write does not");
	if (keyed(dom)) {
		pthread_create(&t, NULL, in_thread, NULL);
		pthread_join(t, &res);
		tap_ok((intptr_t)res == 1, "thread created inside a window "
		       "starts at the defaults (interposed pthread_create)");
	} else {
		tap_skip("thread created inside a window starts at the "
			 "defaults", "page protection (mprotect backend, or "
			 "a virtual domain): windows are process-wide");
	}
	pmg_write_end(dom);
	if (pipe(ready) || pipe(rep) || fcntl(rep[0], F_SETFL, O_NONBLOCK))
		return 1;
	pmg_set_report_fd(rep[1]);
	tap_ok(end_case(0, rep[0]), "a thread ending inside a window has it "
	       "closed and reported; stray write faults; delete succeeds");
	tap_ok(end_case(1, rep[0]), "a thread cancelled inside a window: "
	       "the same");
	probe_end();
	pmg_set_report_fd(2);
	t_unmapped();
	t_unmapped_pool();
	t_partial();
	t_read_lazy();
	t_file_gone();
	t_mprotect_over();
	t_mprotect_whole();
	t_quarantine_forget();
	t_hostile();
	t_pkey_race();
	return tap_done();
}
