// SPDX-License-Identifier: MIT
/*
 * The kernel's own accesses to protected memory inside a write window:
 * read(2) and the like write the caller's buffer, write(2) and the like
 * read it, and neither takes a fault.  On the mprotect backend's lazy
 * windows (docs/design.md, "What a program may do to a protected
 * mapping") the shared library's interposers grant the buffer's blocks
 * first; a call must come back with its full length whatever the layout:
 *  - two ranges of one domain in one 1 MiB block; a range split by a
 *    partial munmap(); a persistence call's page window kept in the
 *    block; a granted block lowered by a read window's edges;
 *  - fread_unlocked(), recvmmsg() with more entries than the kernel
 *    takes (UIO_MAXIOV) and its timeout, the fortified recvfrom()'s
 *    source address, recvmsg()'s header, name and control buffers;
 *  - the write family from a no-access domain (the kernel READS it):
 *    write, pwrite, writev, pwritev, pwritev2, send, sendto, sendmsg,
 *    sendmmsg, fwrite, fwrite_unlocked;
 * and outside a window (or in a window that does not allow the access)
 * the kernel's access is refused as the program's own would be: EFAULT,
 * nothing written.  Runs on both backends (keys: the kernel honours the
 * thread's PKRU; eager windows: the whole domain is open).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>

#include <pmguard.h>

#include "tap.h"
#include "capture.h"

#define MB (1UL << 20)
#define PAGE 4096UL
#define N (3 * MB)

#define FN (4 * MB)
static char *src; /* FN bytes of the pattern */
static int fd = -1; /* a file of FN bytes of the pattern */

/* @n bytes aligned to 1 MiB (a lazy window's block), shared (as a pool
 * or a database map is) */
static char *map_aligned(size_t n)
{
	char *m = mmap(NULL, n + MB, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	uintptr_t a;

	if (m == MAP_FAILED)
		return NULL;
	a = ((uintptr_t)m + MB - 1) & ~(MB - 1);
	if (a > (uintptr_t)m)
		munmap(m, a - (uintptr_t)m);
	munmap((char *)a + n, (uintptr_t)m + MB - a);
	return (char *)a;
}

static void pattern(char *p, size_t n)
{
	for (size_t k = 0; k < n; k++)
		p[k] = (char)('a' + (k * 7 + k / 4093) % 26);
}

/* ------------------------------------------------ layouts of the blocks */

static void t_two_ranges(void)
{
	struct pmg_domain *d = NULL;
	size_t n = 2 * MB, cut = 256 * 1024;
	char *m = map_aligned(n);
	ssize_t got = -1;

	if (m && !pmg_domain_new(&d, "kw2", 0) && !pmg_protect(d, m, cut) &&
	    !pmg_protect(d, m + cut, n - cut) && !pmg_write_begin(d)) {
		got = pread(fd, m, n, 0);
		pmg_write_end(d);
	}
	tap_ok(got == (ssize_t)n && !memcmp(m, src, n),
	       "pread of 2 MiB over two ranges of one domain sharing a block: "
	       "%zd of %zu, data %s", got, n,
	       m && !memcmp(m, src, n) ? "right" : "wrong");
	pmg_unprotect(m, cut);
	pmg_unprotect(m + cut, n - cut);
	pmg_domain_delete(&d);
	munmap(m, n);
}

static void t_split(void)
{
	struct pmg_domain *d = NULL;
	size_t n = 4 * MB, hole = MB + 64 * 1024; /* inside block 1 */
	size_t rest = MB - 64 * 1024 - PAGE; /* the 2nd piece's part */
	char *m = map_aligned(n);
	ssize_t got = -1, got2 = -1;
	int ok = 0;

	if (m && !pmg_domain_new(&d, "kws", 0) && !pmg_protect(d, m, n) &&
	    !munmap(m + hole, PAGE)) {
		struct iovec iov[2] = { { m, hole },
					{ m + hole + PAGE, n - hole - PAGE } };

		pmg_write_begin(d);
		got = preadv(fd, iov, 2, 0);
		pmg_write_end(d);
		ok = got == (ssize_t)(n - PAGE) && !memcmp(m, src, hole) &&
		     !memcmp(m + hole + PAGE, src + hole, n - hole - PAGE);
		/* the block granted by a store into the first piece */
		pmg_write_begin(d);
		m[hole - 1] = 1;
		got2 = pread(fd, m + hole + PAGE, rest, 0);
		pmg_write_end(d);
		ok = ok && got2 == (ssize_t)rest &&
		     !memcmp(m + hole + PAGE, src, rest);
	}
	tap_ok(ok, "a range split by munmap() of a page: preadv over both "
	       "pieces %zd of %zu; pread into the 2nd piece's part of a block "
	       "a store into the 1st granted: %zd of %zu; data right",
	       got, n - PAGE, got2, rest);
	pmg_unprotect(m, n);
	pmg_domain_delete(&d);
	munmap(m, hole);
	munmap(m + hole + PAGE, n - hole - PAGE);
}

static void t_pagewin(void)
{
	struct pmg_domain *d = NULL;
	size_t n = 2 * MB;
	char *m = map_aligned(n);
	ssize_t got = -1;

	if (m && !pmg_domain_new(&d, "kwp", 0) && !pmg_protect(d, m, n) &&
	    !pmg_write_begin(d)) {
		/* a header by a persistence call (its page window is kept
		 * in the window), then the payload after it by read(2) */
		pmg_memcpy_persist(m, "HDR", 4);
		got = pread(fd, m + PAGE, MB, 0);
		pmg_write_end(d);
	}
	tap_ok(got == (ssize_t)MB && !memcmp(m, "HDR", 4) &&
	       !memcmp(m + PAGE, src, MB),
	       "pmg_memcpy_persist() of a header, then pread of 1 MiB after "
	       "it in the same window: %zd of %lu", got, MB);
	pmg_unprotect(m, n);
	pmg_domain_delete(&d);
	munmap(m, n);
}

static void t_lowered(void)
{
	struct pmg_domain *d = NULL;
	size_t n = 2 * MB;
	char *m = map_aligned(n);
	ssize_t got = -1;
	int same = 0;

	if (m && !pmg_domain_new(&d, "kwl", PMG_DOMAIN_NOACCESS) &&
	    !pmg_protect(d, m, n) && !pmg_write_begin(d)) {
		m[0] = 1; /* block 0 granted */
		/* a read window's edges set the no-access domain's pages
		 * (read-only, then no access): block 0 too */
		pmg_open(d, PMG_READ);
		pmg_close(d, PMG_READ);
		got = pread(fd, m + PAGE, MB - PAGE, 0);
		same = !memcmp(m + PAGE, src, MB - PAGE);
		pmg_write_end(d);
	}
	tap_ok(got == (ssize_t)(MB - PAGE) && same,
	       "no-access domain: a granted block lowered by a read window's "
	       "edges, then pread into it: %zd of %lu", got, MB - PAGE);
	pmg_unprotect(m, n);
	pmg_domain_delete(&d);
	munmap(m, n);
}

/* ---------------------------------------------------- the read family */

static void t_fread_unlocked(void)
{
	struct pmg_domain *d = NULL;
	char *m = map_aligned(N);
	FILE *f = fdopen(dup(fd), "r");
	size_t got = 0;

	if (m && f && !pmg_domain_new(&d, "kwf", 0) && !pmg_protect(d, m, N) &&
	    !fseek(f, 0, SEEK_SET) && !pmg_write_begin(d)) {
		m[0] = 0;
		got = fread_unlocked(m, 1, N, f);
		pmg_write_end(d);
	}
	tap_ok(got == N && !memcmp(m, src, N),
	       "fread_unlocked() of 3 MiB into a write window: %zu of %lu, "
	       "data %s", got, N, m && !memcmp(m, src, N) ? "right" : "wrong");
	if (f)
		fclose(f);
	pmg_unprotect(m, N);
	pmg_domain_delete(&d);
	munmap(m, N);
}

/* _FORTIFY_SOURCE's recvfrom() with a buffer of known size */
ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
		       struct sockaddr *from, socklen_t *fromlen);

/*
 * Does this kernel have AF_UNIX sockets?  The series' test kernels
 * (tinyconfig and a fragment, linux/pmguard.config) have no CONFIG_NET
 * (socket(2) is ENOSYS) and so no AF_UNIX:
 * there the socket calls are not tried, and the tests say so.
 */
static bool have_unix(void)
{
	int s = socket(AF_UNIX, SOCK_DGRAM, 0);

	if (s < 0)
		return errno != EAFNOSUPPORT && errno != ENOSYS;
	close(s);
	return true;
}

static void t_recv_args(void)
{
	struct pmg_domain *d = NULL;
	char *m = map_aligned(4 * MB);
	unsigned vlen = 1100, i;
	struct mmsghdr *mm = calloc(vlen, sizeof(*mm));
	struct iovec *iov = calloc(vlen, sizeof(*iov));
	/* datagrams between two bound AF_UNIX sockets (abstract names):
	 * the receiver gets the sender's address; no network needed */
	struct sockaddr_un a = { .sun_family = AF_UNIX }, b = a;
	socklen_t al = offsetof(struct sockaddr_un, sun_path) + 20;
	int sv[2] = { -1, -1 }, in[2] = { -1, -1 }, r = -1, r2 = -1, e = 0;
	ssize_t rf = -1, rm = -1;
	char buf[64];
	struct timespec *tmo;
	struct sockaddr_un *from;
	socklen_t *fl;
	struct msghdr *mh;
	int ok;

	if (!have_unix()) {
		tap_skip("recvmmsg, fortified recvfrom, recvmsg",
			 "no AF_UNIX sockets in this kernel (CONFIG_UNIX)");
		free(mm);
		free(iov);
		return;
	}
	ok = m && mm && iov && !pmg_domain_new(&d, "kwr", 0) &&
		 !pmg_protect(d, m, 4 * MB) &&
		 !socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) &&
		 (in[0] = socket(AF_UNIX, SOCK_DGRAM, 0)) >= 0 &&
		 (in[1] = socket(AF_UNIX, SOCK_DGRAM, 0)) >= 0 &&
		 snprintf(a.sun_path + 1, 19, "pmg-kw-r%d", (int)getpid()) > 0 &&
		 snprintf(b.sun_path + 1, 19, "pmg-kw-s%d", (int)getpid()) > 0 &&
		 !bind(in[0], (struct sockaddr *)&a, al) &&
		 !bind(in[1], (struct sockaddr *)&b, al);

	if (!ok) {
		tap_ok(0, "recvmmsg, fortified recvfrom, recvmsg: setup");
		return;
	}
	/* recvmmsg: 1100 entries (the kernel takes UIO_MAXIOV, 1024),
	 * each 1 KiB in block 1; its timeout (written back) in block 2 */
	for (i = 0; i < vlen; i++) {
		iov[i].iov_base = m + MB + (size_t)i * 512;
		iov[i].iov_len = 512;
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
	}
	send(sv[1], src, 500, 0);
	pmg_write_begin(d);
	m[0] = 0;
	r = recvmmsg(sv[0], mm, vlen, MSG_DONTWAIT, NULL);
	e = errno;
	pmg_write_end(d);
	ok = r == 1 && mm[0].msg_len == 500 && !memcmp(m + MB, src, 500);
	if (!ok)
		tap_diag("recvmmsg with vlen %u: %d (errno %d), first %u bytes",
			 vlen, r, r < 0 ? e : 0, r > 0 ? mm[0].msg_len : 0);
	tmo = (struct timespec *)(m + 2 * MB + 16);
	send(sv[1], src, 500, 0);
	pmg_write_begin(d);
	tmo->tv_sec = 5; /* (a store: block 2 granted; then lowered) */
	tmo->tv_nsec = 0;
	pmg_write_end(d);
	pmg_write_begin(d);
	r2 = recvmmsg(sv[0], mm, 1, MSG_DONTWAIT, tmo);
	e = errno;
	pmg_write_end(d);
	if (r2 != 1 || mm[0].msg_len != 500) {
		tap_diag("recvmmsg with its timeout in the window: %d "
			 "(errno %d)", r2, r2 < 0 ? e : 0);
		ok = 0;
	}
	/* the fortified recvfrom(): the peer's address and its length
	 * (both written by the kernel) in blocks 2 and 3 */
	from = (struct sockaddr_un *)(m + 2 * MB + 4096);
	fl = (socklen_t *)(m + 3 * MB + 8);
	pmg_write_begin(d);
	*fl = sizeof(*from); /* (a store: block 3 granted; then lowered) */
	pmg_write_end(d);
	sendto(in[1], "hello", 6, 0, (struct sockaddr *)&a, al);
	pmg_write_begin(d);
	rf = __recvfrom_chk(in[0], buf, sizeof(buf), sizeof(buf), MSG_DONTWAIT,
			    (struct sockaddr *)from, fl);
	e = errno;
	pmg_write_end(d);
	if (rf != 6 || strcmp(buf, "hello") || from->sun_family != AF_UNIX ||
	    *fl != al || memcmp(from->sun_path, b.sun_path, 20)) {
		tap_diag("__recvfrom_chk with its source address in the "
			 "window: %zd (errno %d)", rf, rf < 0 ? e : 0);
		ok = 0;
	}
	/* recvmsg(): the header itself, its name and control buffers in
	 * the domain (the kernel writes msg_namelen, msg_controllen,
	 * msg_flags back) */
	mh = (struct msghdr *)(m + 3 * MB + 4096);
	sendto(in[1], "world", 6, 0, (struct sockaddr *)&a, al);
	pmg_write_begin(d);
	memset(mh, 0, sizeof(*mh));
	mh->msg_name = m + 3 * MB + 2 * MB / 8;
	mh->msg_namelen = sizeof(struct sockaddr_un);
	mh->msg_control = m + 3 * MB + 3 * MB / 8;
	mh->msg_controllen = 256;
	iov[0].iov_base = m + 3 * MB + 4 * MB / 8;
	iov[0].iov_len = 64;
	mh->msg_iov = iov;
	mh->msg_iovlen = 1;
	pmg_write_end(d); /* every block given back */
	pmg_write_begin(d);
	rm = recvmsg(in[0], mh, MSG_DONTWAIT);
	e = errno;
	pmg_write_end(d);
	if (rm != 6 || strcmp(iov[0].iov_base, "world") ||
	    ((struct sockaddr_un *)mh->msg_name)->sun_family != AF_UNIX) {
		tap_diag("recvmsg with its header, name and control in the "
			 "window: %zd (errno %d)", rm, rm < 0 ? e : 0);
		ok = 0;
	}
	tap_ok(ok, "recvmmsg() of 1100 entries (the kernel takes 1024), "
	       "recvmmsg()'s timeout, the fortified recvfrom()'s source "
	       "address and recvmsg()'s header, name and control, in a write "
	       "window: received, written");
	for (i = 0; i < 2; i++) {
		close(sv[i]);
		close(in[i]);
	}
	free(mm);
	free(iov);
	pmg_unprotect(m, 4 * MB);
	pmg_domain_delete(&d);
	munmap(m, 4 * MB);
}

/* --------------------------------------------------- the write family */

struct drain {
	int fd;
	char *to;
	size_t got;
};

static void *drain(void *v)
{
	struct drain *dr = v;
	ssize_t n;

	while (dr->got < N &&
	       (n = read(dr->fd, dr->to + dr->got, N - dr->got)) > 0)
		dr->got += (size_t)n;
	return NULL;
}

static void t_write_noaccess(void)
{
	static const char *const how[] = {
		"write", "pwrite", "writev", "pwritev", "pwritev2", "send",
		"sendto", "sendmsg", "sendmmsg", "fwrite", "fwrite_unlocked",
	};
	struct pmg_domain *d = NULL;
	char *m = map_aligned(N), *back = malloc(N);
	int out = tmpfd(), ok, i;
	bool unix_ok;

	unix_ok = have_unix();
	ok = m && back && out >= 0;
	if (ok)
		memcpy(m, src, N);
	ok = ok && !pmg_domain_new(&d, "kwn", PMG_DOMAIN_NOACCESS) &&
	     !pmg_protect(d, m, N);
	if (!ok) {
		tap_ok(0, "write family from a no-access domain: setup");
		return;
	}
	for (i = 0; i < (int)(sizeof(how) / sizeof(how[0])); i++) {
		struct iovec iov[3];
		struct msghdr mh;
		struct mmsghdr mmh;
		struct drain dr = { -1, back, 0 };
		pthread_t t;
		int sv[2] = { -1, -1 }, sock = i >= 5 && i <= 8, c = 1;
		ssize_t got = -1;
		FILE *f = NULL;

		for (int k = 0; k < 3; k++) {
			iov[k].iov_base = m + k * MB;
			iov[k].iov_len = MB;
		}
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = iov;
		mh.msg_iovlen = 3;
		memset(back, 0, N);
		c = !ftruncate(out, 0) && lseek(out, 0, SEEK_SET) == 0;
		if (sock && !unix_ok) {
			tap_diag("%s: not tried: no AF_UNIX sockets in this "
				 "kernel (CONFIG_UNIX)", how[i]);
			continue;
		}
		if (sock) {
			c = c && !socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
			dr.fd = sv[0];
			c = c && !pthread_create(&t, NULL, drain, &dr);
		}
		if (i >= 9)
			c = c && (f = fdopen(dup(out), "w")) != NULL;
		if (!c || pmg_write_begin(d)) {
			tap_diag("%s: setup", how[i]);
			ok = 0;
			continue;
		}
		/* a load of the first page: block 0 granted, the ones
		 * after it are not */
		*(volatile char *)m;
		switch (i) {
		case 0:
			got = write(out, m, N);
			break;
		case 1:
			got = pwrite(out, m, N, 0);
			break;
		case 2:
			got = writev(out, iov, 3);
			break;
		case 3:
			got = pwritev(out, iov, 3, 0);
			break;
		case 4:
			got = pwritev2(out, iov, 3, 0, 0);
			break;
		case 5:
			got = send(sv[1], m, N, MSG_NOSIGNAL);
			break;
		case 6:
			got = sendto(sv[1], m, N, MSG_NOSIGNAL, NULL, 0);
			break;
		case 7:
			got = sendmsg(sv[1], &mh, MSG_NOSIGNAL);
			break;
		case 8:
			memset(&mmh, 0, sizeof(mmh));
			mmh.msg_hdr = mh;
			got = sendmmsg(sv[1], &mmh, 1, MSG_NOSIGNAL) == 1
				      ? (ssize_t)mmh.msg_len : -1;
			break;
		case 9:
			got = (ssize_t)fwrite(m, 1, N, f);
			break;
		case 10:
			got = (ssize_t)fwrite_unlocked(m, 1, N, f);
			break;
		}
		pmg_write_end(d);
		if (f)
			fclose(f);
		if (sock) {
			shutdown(sv[1], SHUT_WR);
			pthread_join(t, NULL);
			close(sv[0]);
			close(sv[1]);
		} else {
			dr.got = (size_t)pread(out, back, N, 0);
		}
		if (got != (ssize_t)N || dr.got != N || memcmp(back, src, N)) {
			tap_diag("%s of 3 MiB from the no-access domain in its "
				 "write window: %zd of %lu, %zu bytes arrived",
				 how[i], got, N, dr.got);
			ok = 0;
		}
	}
	tap_ok(ok, "write, pwrite, writev, pwritev, pwritev2, %sfwrite, "
	       "fwrite_unlocked of 3 MiB from a no-access domain inside its "
	       "write window: full length, data right",
	       unix_ok ? "send, sendto, sendmsg, sendmmsg, " :
	       "(send, sendto, sendmsg, sendmmsg SKIPPED: no AF_UNIX) ");
	/* outside a window nothing is granted: the kernel's read is
	 * refused as the program's own load would be */
	errno = 0;
	ok = write(out, m + MB, 100) == -1 && errno == EFAULT;
	tap_ok(ok, "write(2) from a no-access domain outside a window: EFAULT "
	       "(errno %d)", errno);
	pmg_unprotect(m, N);
	pmg_domain_delete(&d);
	munmap(m, N);
	free(back);
	close(out);
}

static void t_read_window(void)
{
	struct pmg_domain *d = NULL;
	char *m = map_aligned(2 * MB);
	int ok = 0, e = 0;

	if (m && !pmg_domain_new(&d, "kwo", 0) && !pmg_protect(d, m, 2 * MB) &&
	    !pmg_open(d, PMG_READ)) {
		errno = 0;
		ok = pread(fd, m + MB, 100, 0) == -1 && errno == EFAULT;
		e = errno;
		pmg_close(d, PMG_READ);
		ok = ok && m[MB] == 0;
	}
	tap_ok(ok, "read(2) into a domain inside a read window only: EFAULT "
	       "(errno %d), nothing written", e);
	pmg_unprotect(m, 2 * MB);
	pmg_domain_delete(&d);
	munmap(m, 2 * MB);
}

int main(void)
{
	tap_init(9);
	src = malloc(FN);
	fd = tmpfd();
	if (!src || fd < 0)
		return 1;
	pattern(src, FN);
	if (write(fd, src, FN) != (ssize_t)FN)
		return 1;
	t_two_ranges();
	t_split();
	t_pagewin();
	t_lowered();
	t_fread_unlocked();
	t_recv_args();
	t_write_noaccess();
	t_read_window();
	tap_diag("backend %s", pmg_backend_name(pmg_backend()));
	return tap_done();
}
