// SPDX-License-Identifier: MIT
/*
 * The shared library interposes munmap(), mremap() and mmap() (as the
 * sanitizers do), to see memory of protected ranges taken away behind its
 * back: unmapped, moved or shrunk, or replaced by a MAP_FIXED mapping
 * (which silently resets the key to 0 on Linux).  The call is made, and
 * the ranges it touched are dropped and reported (unmapped.c) under the
 * library lock, so that no window edge changes those addresses between
 * the two.  A call that touches no protected range costs one lock-free
 * registry lookup.
 *
 * It also interposes mprotect() and pkey_mprotect(): over a protected
 * range the program's request is applied around the protection -- on
 * piece by piece (mprotect_pieces()): on the mprotect backend the
 * program's rights remembered (caps.c) so that windows never give
 * those pages more than it asked; on PKU with the range's key
 * (mprotect(PROT_EXEC) would move it to the execute-only key and a later
 * mprotect() to key 0, and pkey_mprotect() names a key of its own; that
 * one is reported).
 * madvise() changes neither page protections nor keys, but some advice
 * drops or changes the data under a protected range: reported (below).
 *
 * Not seen (documented in docs/api.md and pmg_protect(3)): the static
 * library (no interposition), raw syscalls, libc's internal unmaps (a
 * free() of a large malloc() block), libraries that bind to libc's
 * symbols directly (loaded with RTLD_DEEPBIND), and mremap() with
 * MREMAP_DONTUNMAP.  There pmg_unprotect() drops a range it finds no
 * longer mapped; memory mapped at its addresses before then may still be
 * changed by window edges (mprotect backend) and pmg_unprotect().
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"
#include "procfs.h"

int _pmg_mprotect(void *addr, size_t len, int prot)
{
	return (int)syscall(SYS_mprotect, addr, len, prot);
}

#ifdef PMG_SHARED

/*
 * Sanitizer runtimes call mmap() while they initialise, before an
 * instrumented function may run: the interposers are not instrumented.
 */
#if defined(__SANITIZE_THREAD__)
#define NOSAN __attribute__((no_sanitize("thread")))
#elif defined(__SANITIZE_ADDRESS__)
#define NOSAN __attribute__((no_sanitize("address", "undefined")))
#else
#define NOSAN
#endif

typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);
typedef int (*munmap_fn)(void *, size_t);
typedef void *(*mremap_fn)(void *, size_t, size_t, int, ...);
typedef int (*mprotect_fn)(void *, size_t, int);

static mmap_fn real_mmap;
static munmap_fn real_munmap;
static mremap_fn real_mremap;
static mprotect_fn real_mprotect;

/* Resolved at load; until then (another constructor's early calls) the
 * raw syscalls serve. */
__attribute__((constructor)) static void resolve(void)
{
	__atomic_store_n(&real_mmap, (mmap_fn)dlsym(RTLD_NEXT, "mmap"),
			 __ATOMIC_RELEASE);
	__atomic_store_n(&real_munmap, (munmap_fn)dlsym(RTLD_NEXT, "munmap"),
			 __ATOMIC_RELEASE);
	__atomic_store_n(&real_mremap, (mremap_fn)dlsym(RTLD_NEXT, "mremap"),
			 __ATOMIC_RELEASE);
	__atomic_store_n(&real_mprotect,
			 (mprotect_fn)dlsym(RTLD_NEXT, "mprotect"),
			 __ATOMIC_RELEASE);
}

NOSAN static void *do_mmap(void *a, size_t n, int prot, int flags, int fd,
		     off_t off)
{
	mmap_fn f = __atomic_load_n(&real_mmap, __ATOMIC_ACQUIRE);

	if (f)
		return f(a, n, prot, flags, fd, off);
	return (void *)syscall(SYS_mmap, a, n, prot, flags, fd, off);
}

NOSAN static int do_munmap(void *a, size_t n)
{
	munmap_fn f = __atomic_load_n(&real_munmap, __ATOMIC_ACQUIRE);

	return f ? f(a, n) : (int)syscall(SYS_munmap, a, n);
}

NOSAN static void *do_mremap(void *a, size_t o, size_t n, int flags, void *to)
{
	mremap_fn f = __atomic_load_n(&real_mremap, __ATOMIC_ACQUIRE);

	if (f)
		return f(a, o, n, flags, to);
	return (void *)syscall(SYS_mremap, a, o, n, flags, to);
}

NOSAN static size_t pages(size_t n)
{
	return (n + PMG_PAGE_SIZE - 1) & ~(PMG_PAGE_SIZE - 1);
}

/* Does [a, a+n) touch a protected range?  Lock-free. */
NOSAN static bool touches(const void *a, size_t n)
{
	struct _pmg_range r;
	uintptr_t b = (uintptr_t)a;

	if (!n || !__atomic_load_n(&_pmg.inited, __ATOMIC_ACQUIRE))
		return false;
	n = pages(n);
	if (b + n < b)
		n = UINTPTR_MAX - b;
	return _pmg_reg_first_overlap(b, b + n, &r) == 0;
}

NOSAN PMG_API int munmap(void *addr, size_t len)
{
	int rc, e;

	if (!touches(addr, len)) {
		rc = do_munmap(addr, len);
		if (rc == 0) /* a closed pool's quarantine (quarantine.c) */
			_pmg_pool_quarantine_forget((uintptr_t)addr,
						    pages(len));
		return rc;
	}
	pthread_mutex_lock(&_pmg.lock);
	rc = do_munmap(addr, len);
	e = errno;
	if (rc == 0)
		_pmg_ranges_drop((uintptr_t)addr, pages(len), "munmap");
	pthread_mutex_unlock(&_pmg.lock);
	/* a quarantine there too (after the lock: pool_lock comes first) */
	if (rc == 0)
		_pmg_pool_quarantine_forget((uintptr_t)addr, pages(len));
	errno = e;
	return rc;
}

NOSAN static void *fixed_mmap(void *addr, size_t len, int prot, int flags, int fd,
			off_t off)
{
	void *m;
	int e;

	if (!(flags & MAP_FIXED))
		return do_mmap(addr, len, prot, flags, fd, off);
	if (!touches(addr, len)) {
		m = do_mmap(addr, len, prot, flags, fd, off);
		if (m != MAP_FAILED)
			_pmg_pool_quarantine_forget((uintptr_t)addr,
						    pages(len));
		return m;
	}
	pthread_mutex_lock(&_pmg.lock);
	m = do_mmap(addr, len, prot, flags, fd, off);
	e = errno;
	if (m != MAP_FAILED)
		_pmg_ranges_drop((uintptr_t)addr, pages(len),
				 "MAP_FIXED mmap");
	pthread_mutex_unlock(&_pmg.lock);
	if (m != MAP_FAILED)
		_pmg_pool_quarantine_forget((uintptr_t)addr, pages(len));
	errno = e;
	return m;
}

NOSAN PMG_API void *mmap(void *addr, size_t len, int prot, int flags, int fd,
		   off_t off)
{
	return fixed_mmap(addr, len, prot, flags, fd, off);
}

/* _FILE_OFFSET_BITS=64 programs call mmap64 (the same on 64-bit). */
NOSAN PMG_API void *mmap64(void *addr, size_t len, int prot, int flags, int fd,
		     off_t off)
{
	return fixed_mmap(addr, len, prot, flags, fd, off);
}

/*
 * After mremap(@old, @osz, @nsz) returned @m: in place (@m == @old) the
 * pages that stay are the same pages at the same addresses and keep their
 * protection -- a shrink drops only the tail it unmapped, a grow leaves
 * the range as it was and gives the new tail (which took the protection
 * of the page before it) to the caller.  Moved, the pages keep the
 * protection of their range at their new place: they are the caller's
 * now, so they are untagged there; what the range has outside the moved
 * span stays protected (unmapped.c splits it).
 */
static void untag_moved(uintptr_t old, size_t osz, uintptr_t m, size_t nsz)
{
	struct _pmg_range r;

	if (m == old) {
		if (nsz < osz)
			_pmg_ranges_drop(old + nsz, osz - nsz, "mremap");
		else if (nsz > osz && !_pmg_reg_find(old + osz - 1, &r))
			(void)_pmg.prim->untag((void *)(old + osz), nsz - osz);
		return;
	}
	while (_pmg_reg_first_overlap(old, old + osz, &r) == 0) {
		uintptr_t lo = r.base > old ? r.base : old;
		uintptr_t hi = r.end < old + osz ? r.end : old + osz;
		uintptr_t nlo = m + (lo - old), nhi = m + (hi - old);

		if (hi == old + osz)	/* grown: the new tail too */
			nhi = m + nsz;
		if (nhi > m + nsz)
			nhi = m + nsz;
		_pmg_range_drop(&r, old, osz, "mremap");
		if (nlo < nhi)
			(void)_pmg.prim->untag((void *)nlo, nhi - nlo);
	}
}

NOSAN PMG_API void *mremap(void *old, size_t osz, size_t nsz, int flags, ...)
{
	void *to = NULL, *m;
	va_list ap;
	int e;

	if (flags & MREMAP_FIXED) {
		va_start(ap, flags);
		to = va_arg(ap, void *);
		va_end(ap);
	}
	if (!touches(old, osz) &&
	    !((flags & MREMAP_FIXED) && touches(to, nsz))) {
		m = do_mremap(old, osz, nsz, flags, to);
		if (m != MAP_FAILED) {
			_pmg_pool_quarantine_forget((uintptr_t)old, pages(osz));
			_pmg_pool_quarantine_forget((uintptr_t)m, pages(nsz));
		}
		return m;
	}
	pthread_mutex_lock(&_pmg.lock);
	m = do_mremap(old, osz, nsz, flags, to);
	e = errno;
	if (m != MAP_FAILED) {
		if (flags & MREMAP_FIXED)
			_pmg_ranges_drop((uintptr_t)to, pages(nsz), "mremap");
		untag_moved((uintptr_t)old, pages(osz), (uintptr_t)m,
			    pages(nsz));
	}
	pthread_mutex_unlock(&_pmg.lock);
	if (m != MAP_FAILED) {
		_pmg_pool_quarantine_forget((uintptr_t)old, pages(osz));
		_pmg_pool_quarantine_forget((uintptr_t)m, pages(nsz));
	}
	errno = e;
	return m;
}

NOSAN static int do_mprotect(void *a, size_t n, int prot)
{
	mprotect_fn f = __atomic_load_n(&real_mprotect, __ATOMIC_ACQUIRE);

	return f ? f(a, n, prot) : (int)syscall(SYS_mprotect, a, n, prot);
}

static void report_reprotect(const char *what, uintptr_t a, size_t n,
			     const struct _pmg_range *r, const char *fate)
{
	struct _pmg_buf b = { .n = 0 };
	int fd = _pmg_report_fd();

	if (fd < 0)
		return;
	_pmg_buf_str(&b, "pmguard: ");
	_pmg_buf_str(&b, what);
	_pmg_buf_str(&b, "(");
	_pmg_buf_hex(&b, a);
	_pmg_buf_str(&b, ", ");
	_pmg_buf_dec(&b, (int64_t)n);
	_pmg_buf_str(&b, ") over protected range ");
	_pmg_buf_hex(&b, r->base);
	_pmg_buf_str(&b, "-");
	_pmg_buf_hex(&b, r->end);
	_pmg_buf_str(&b, " of domain '");
	_pmg_buf_str(&b, _pmg_dom_name(r->dom));
	_pmg_buf_str(&b, "': ");
	_pmg_buf_str(&b, fate);
	_pmg_buf_str(&b, "\n");
	_pmg_buf_flush(&b, fd);
}

/* The program's request on a piece outside protected ranges. */
static int plain_piece(uintptr_t a, size_t n, int prot, int pkey)
{
	if (pkey < 0)
		return do_mprotect((void *)a, n, prot);
	return (int)syscall(SYS_pkey_mprotect, a, n, prot, pkey);
}

/*
 * The program's mprotect(@prot) -- pkey_mprotect() with @pkey; -1: none
 * -- of [@a, @a+@n) made piece by piece (_pmg.lock held), so that a
 * protected page is never writable in between (the call made whole and
 * the range protected again after it left it read-write, key 0 or the
 * program's key, for a moment: another thread's stray write landed):
 * the pieces outside protected ranges get what was asked, the protected
 * ones our protection -- on PKU @prot with the range's key (a key of the
 * program's own is reported, the range keeps its key); on mprotect our
 * protection capped by @prot (never more than either: pmg_protect() took
 * only read-write mappings, so the kernel's answer for them does not
 * depend on what is asked).  As the kernel does, a failure part-way
 * leaves the pieces before it changed.  0 or -1 and errno.
 */
static int mprotect_pieces(const char *what, uintptr_t a, size_t n, int prot,
			   int pkey)
{
	uintptr_t at = a, e = a + n;
	bool told = false;
	struct _pmg_range r;

	while (at < e) {
		uintptr_t lo, hi;
		int hw;

		if (_pmg_reg_first_overlap(at, e, &r)) {
			lo = hi = e;
		} else {
			lo = r.base > at ? r.base : at;
			hi = r.end < e ? r.end : e;
		}
		if (lo > at && plain_piece(at, lo - at, prot, pkey))
			return -1;
		if (lo == e)
			break;
		hw = _pmg_dom_hw(r.dom);
		if (pkey >= 0 && pkey != hw && !told) {
			told = true;
			report_reprotect(what, a, n, &r,
					 "the range keeps its own protection "
					 "(its key, or page protection)");
		}
		/* remembered on both backends: a domain whose key goes
		 * (PKU: page protection) or comes back keeps the program's
		 * rights (keys.c, _pmg_cap_pkey_mprotect()) */
		if (_pmg_cap_set(lo, hi, prot))
			report_reprotect(what, a, n, &r,
					 "applied, the "
					 "range stays protected, but too many "
					 "such requests are remembered: "
					 "windows may give these pages "
					 "read-write");
		if (hw) {
			/* PKU, a key: the request with the range's key */
			if (syscall(SYS_pkey_mprotect, lo, hi - lo, prot, hw))
				return -1;
			at = hi;
			continue;
		}
		/* page protection: ours, capped by the request */
		if (_pmg_pw_mprotect(r.dom, lo, hi,
				     _pmg_prot_of(_pmg_process_rights(
					     &_pmg.dom[r.dom]))) == -ENOMEM) {
			errno = ENOMEM;
			return -1;
		}
		at = hi;
	}
	return 0;
}

static int mprotect_split(uintptr_t a, size_t n, int prot)
{
	return mprotect_pieces("mprotect", a, n, prot, -1);
}

/*
 * What the kernel would refuse before changing anything: @prot with an
 * unknown bit (0x8 is PROT_SEM, a no-op), or PROT_GROWS*, which a
 * protected range (never a stack) refuses too; @pkey not allocated (or
 * PKU absent): asked of the kernel on a scratch page of our own.  The
 * pieces would have applied the known bits, our key.  0 or -1, errno.
 */
static int refused(int prot, int pkey)
{
	static void *scratch;

	if (prot & ~(PROT_READ | PROT_WRITE | PROT_EXEC | 0x8)) {
		errno = EINVAL;
		return -1;
	}
	if (pkey < 0)
		return 0;
	if (!scratch) {
		void *m = do_mmap(NULL, PMG_PAGE_SIZE, PROT_NONE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (m == MAP_FAILED)
			return -1;
		scratch = m;
	}
	return (int)syscall(SYS_pkey_mprotect, scratch, PMG_PAGE_SIZE, prot,
			    pkey);
}

/* [@a, @a+@len) in pages ends above @a: else the kernel's error (ENOMEM)
 * -- the pieces would have seen an empty range and returned 0. */
static bool wraps_not(const void *a, size_t len)
{
	uintptr_t b = (uintptr_t)a, n = pages(len);

	return n >= len && b + n > b;
}

NOSAN PMG_API int mprotect(void *addr, size_t len, int prot)
{
	int rc, e;

	if (!touches(addr, len))
		return do_mprotect(addr, len, prot);
	pthread_mutex_lock(&_pmg.lock);
	if ((uintptr_t)addr % PMG_PAGE_SIZE || !wraps_not(addr, len)) {
		rc = do_mprotect(addr, len, prot); /* EINVAL, ENOMEM */
	} else if (refused(prot, -1)) {
		rc = -1;
	} else if (_pmg.prim->page_keys) {
		/* re-tagged as it goes: mprotect(PROT_EXEC) alone would
		 * move it to the execute-only key, a later one to key 0 */
		rc = mprotect_pieces("mprotect", (uintptr_t)addr, pages(len),
				     prot, -1);
	} else {
		rc = mprotect_split((uintptr_t)addr, pages(len), prot);
	}
	e = errno;
	pthread_mutex_unlock(&_pmg.lock);
	errno = e;
	return rc;
}

NOSAN PMG_API int pkey_mprotect(void *addr, size_t len, int prot, int pkey)
{
	int rc, e;

	if (!touches(addr, len))
		return (int)syscall(SYS_pkey_mprotect, addr, len, prot, pkey);
	pthread_mutex_lock(&_pmg.lock);
	if ((uintptr_t)addr % PMG_PAGE_SIZE || !wraps_not(addr, len))
		rc = (int)syscall(SYS_pkey_mprotect, addr, len, prot, pkey);
	else if (refused(prot, pkey))
		rc = -1;
	else
		rc = mprotect_pieces("pkey_mprotect", (uintptr_t)addr,
				     pages(len), prot, pkey);
	e = errno;
	pthread_mutex_unlock(&_pmg.lock);
	errno = e;
	return rc;
}

/*
 * madvise() changes neither page protections nor keys (a protected range
 * stays protected: tested), but some advice changes or drops the data
 * without a write: MADV_DONTNEED and MADV_FREE on private pages (zero
 * pages, or the file's bytes, come back), MADV_REMOVE (the backing store
 * is freed: shared data too), MADV_DONTNEED_LOCKED, MADV_HWPOISON.  Over
 * a protected range that is a write the protection would have refused,
 * made by the kernel: the call is made as asked, and reported.
 */
#ifndef MADV_FREE
#define MADV_FREE 8
#endif
#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24
#endif
#ifndef MADV_HWPOISON
#define MADV_HWPOISON 100
#endif

typedef int (*madvise_fn)(void *, size_t, int);

static const char *advice_name(int advice)
{
	switch (advice) {
	case MADV_DONTNEED:
		return "MADV_DONTNEED";
	case MADV_FREE:
		return "MADV_FREE";
	case MADV_REMOVE:
		return "MADV_REMOVE";
	case MADV_DONTNEED_LOCKED:
		return "MADV_DONTNEED_LOCKED";
	case MADV_HWPOISON:
		return "MADV_HWPOISON";
	}
	return NULL;
}

/* Is any page of [@a, @b) in a private mapping?  (/proc/self/maps; where
 * it cannot be read: yes, the report errs on the side of saying it.) */
static bool any_private(uintptr_t a, uintptr_t b)
{
	FILE *f = _pmg_maps_open();
	struct _pmg_map m;
	bool priv = false;

	if (!f)
		return true;
	while (!priv && _pmg_maps_next(f, &m))
		if (m.lo < b && m.hi > a && m.perms[3] == 'p')
			priv = true;
	fclose(f);
	return priv;
}

NOSAN PMG_API int madvise(void *addr, size_t len, int advice)
{
	static madvise_fn real;
	madvise_fn f = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
	const char *name = advice_name(advice);
	uintptr_t a = (uintptr_t)addr, e;
	struct _pmg_range r;
	int rc, err;

	if (!f) {
		f = (madvise_fn)dlsym(RTLD_NEXT, "madvise");
		if (f)
			__atomic_store_n(&real, f, __ATOMIC_RELEASE);
	}
	rc = f ? f(addr, len, advice)
	       : (int)syscall(SYS_madvise, addr, len, advice);
	if (rc || !name || !touches(addr, len))
		return rc;
	err = errno;
	e = a + pages(len);
	if (e < a)
		e = UINTPTR_MAX;
	for (; a < e && !_pmg_reg_first_overlap(a, e, &r); a = r.end) {
		uintptr_t lo = r.base > a ? r.base : a;
		uintptr_t hi = r.end < e ? r.end : e;
		char fate[160];

		if ((advice == MADV_DONTNEED || advice == MADV_FREE) &&
		    !any_private(lo, hi))
			continue; /* shared pages: the data stays */
		snprintf(fate, sizeof(fate),
			 "%s: its data there %s, not by a window; the range "
			 "stays protected",
			 name,
			 advice == MADV_HWPOISON
				 ? "is poisoned"
				 : "was dropped (zero pages or the "
				   "file's bytes come back)");
		report_reprotect("madvise", (uintptr_t)addr, len, &r, fate);
	}
	errno = err;
	return rc;
}

/*
 * The calls that have the kernel write into the caller's memory: their
 * destination is granted first where a lazy write window is open on it
 * (mpwin.c, _pmg_lazy_pregrant(): a kernel write takes no fault, so the
 * copy stopped short at the first block not yet granted and read(2)
 * returned a short count).  One relaxed load when no lazy write window is
 * open (PKU, eager windows, none open).  The real function, resolved at
 * load; until then (another constructor's early calls) the raw syscall,
 * or dlsym() there (fread() and the _chk variants, which have none).
 * Not seen: raw syscalls, libc's internal reads (getline(), fgets() and
 * the like fill their FILE's buffer, not the caller's memory), io_uring
 * and aio (the kernel writes later, from another context), a write in
 * another process (process_vm_writev() into ours) -- docs/design.md.
 */
#include <limits.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/uio.h>

#define LIVE() __atomic_load_n(&_pmg_lazy_live, __ATOMIC_RELAXED)

static void grant(const void *buf, size_t n)
{
	int e = errno;

	_pmg_lazy_pregrant((uintptr_t)buf, n);
	errno = e;
}

static void grant_iov(const struct iovec *iov, long cnt)
{
	long i;

	if (!iov || cnt <= 0 || cnt > IOV_MAX)
		return;
	for (i = 0; i < cnt; i++)
		grant(iov[i].iov_base, iov[i].iov_len);
}

/* What recvmsg() writes: the message header's fields, name, control
 * data and the buffers. */
static void grant_msg(struct msghdr *mh)
{
	if (!mh)
		return;
	grant(mh, sizeof(*mh));
	if (mh->msg_name)
		grant(mh->msg_name, mh->msg_namelen);
	if (mh->msg_control)
		grant(mh->msg_control, mh->msg_controllen);
	grant_iov(mh->msg_iov, (long)mh->msg_iovlen);
}

enum rd_fn {
	RD_READ, RD_PREAD, RD_PREAD64, RD_READV, RD_PREADV, RD_PREADV64,
	RD_PREADV2, RD_PREADV64V2, RD_RECV, RD_RECVFROM, RD_RECVMSG,
	RD_RECVMMSG, RD_FREAD, RD_PVREADV, RD_READ_CHK, RD_PREAD_CHK,
	RD_PREAD64_CHK, RD_RECV_CHK, RD_RECVFROM_CHK, RD_FREAD_CHK,
	RD_FREAD_UNLOCKED, WR_WRITE, WR_PWRITE, WR_PWRITE64, WR_WRITEV,
	WR_PWRITEV, WR_PWRITEV64, WR_PWRITEV2, WR_PWRITEV64V2, WR_SEND,
	WR_SENDTO, WR_SENDMSG, WR_SENDMMSG, WR_FWRITE, WR_FWRITE_UNLOCKED,
	WR_PVWRITEV, RD_NR
};
static const char *const rd_name[RD_NR] = {
	"read", "pread", "pread64", "readv", "preadv", "preadv64",
	"preadv2", "preadv64v2", "recv", "recvfrom", "recvmsg",
	"recvmmsg", "fread", "process_vm_readv", "__read_chk", "__pread_chk",
	"__pread64_chk", "__recv_chk", "__recvfrom_chk", "__fread_chk",
	"fread_unlocked", "write", "pwrite", "pwrite64", "writev", "pwritev",
	"pwritev64", "pwritev2", "pwritev64v2", "send", "sendto", "sendmsg",
	"sendmmsg", "fwrite", "fwrite_unlocked", "process_vm_writev",
};
static void *rd_real[RD_NR];

__attribute__((constructor)) static void rd_resolve(void)
{
	int i;

	for (i = 0; i < RD_NR; i++)
		__atomic_store_n(&rd_real[i], dlsym(RTLD_NEXT, rd_name[i]),
				 __ATOMIC_RELEASE);
}

/* The real function @i; NULL before rd_resolve() ran (@may_dlsym: ask
 * dlsym() now -- not AS-safe, so not for the calls a signal handler may
 * make). */
static void *rd(enum rd_fn i, bool may_dlsym)
{
	void *f = __atomic_load_n(&rd_real[i], __ATOMIC_ACQUIRE);

	if (!f && may_dlsym) {
		f = dlsym(RTLD_NEXT, rd_name[i]);
		__atomic_store_n(&rd_real[i], f, __ATOMIC_RELEASE);
	}
	return f;
}

typedef ssize_t (*read_fn)(int, void *, size_t);
typedef ssize_t (*pread_fn)(int, void *, size_t, off_t);
typedef ssize_t (*readv_fn)(int, const struct iovec *, int);
typedef ssize_t (*preadv_fn)(int, const struct iovec *, int, off_t);
typedef ssize_t (*preadv2_fn)(int, const struct iovec *, int, off_t, int);
typedef ssize_t (*recv_fn)(int, void *, size_t, int);
typedef ssize_t (*recvfrom_fn)(int, void *, size_t, int, struct sockaddr *,
			       socklen_t *);
typedef ssize_t (*recvmsg_fn)(int, struct msghdr *, int);
typedef int (*recvmmsg_fn)(int, struct mmsghdr *, unsigned, int,
			   struct timespec *);
typedef size_t (*fread_fn)(void *, size_t, size_t, FILE *);
typedef ssize_t (*pvreadv_fn)(pid_t, const struct iovec *, unsigned long,
			      const struct iovec *, unsigned long,
			      unsigned long);
typedef ssize_t (*read_chk_fn)(int, void *, size_t, size_t);
typedef ssize_t (*pread_chk_fn)(int, void *, size_t, off_t, size_t);
typedef ssize_t (*recv_chk_fn)(int, void *, size_t, size_t, int);
typedef ssize_t (*recvfrom_chk_fn)(int, void *, size_t, size_t, int,
				   struct sockaddr *, socklen_t *);
typedef size_t (*fread_chk_fn)(void *, size_t, size_t, size_t, FILE *);

NOSAN PMG_API ssize_t read(int fd, void *buf, size_t n)
{
	read_fn f = (read_fn)rd(RD_READ, false);

	if (LIVE())
		grant(buf, n);
	return f ? f(fd, buf, n) : syscall(SYS_read, fd, buf, n);
}

NOSAN PMG_API ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
	pread_fn f = (pread_fn)rd(RD_PREAD, false);

	if (LIVE())
		grant(buf, n);
	return f ? f(fd, buf, n, off) : syscall(SYS_pread64, fd, buf, n, off);
}

NOSAN PMG_API ssize_t pread64(int fd, void *buf, size_t n, off_t off)
{
	pread_fn f = (pread_fn)rd(RD_PREAD64, false);

	if (LIVE())
		grant(buf, n);
	return f ? f(fd, buf, n, off) : syscall(SYS_pread64, fd, buf, n, off);
}

NOSAN PMG_API ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	readv_fn f = (readv_fn)rd(RD_READV, false);

	if (LIVE())
		grant_iov(iov, cnt);
	return f ? f(fd, iov, cnt) : syscall(SYS_readv, fd, iov, cnt);
}

/* preadv2(2) and pwritev2(2) (@nr): the raw syscall takes the offset in
 * two halves */
static ssize_t sys_rwv2(long nr, int fd, const struct iovec *iov, int cnt,
			off_t off, int flags)
{
	return syscall(nr, fd, iov, cnt, (unsigned long)off,
		       (unsigned long)((uint64_t)off >> 32), flags);
}

NOSAN PMG_API ssize_t preadv(int fd, const struct iovec *iov, int cnt,
			     off_t off)
{
	preadv_fn f = (preadv_fn)rd(RD_PREADV, false);

	if (LIVE())
		grant_iov(iov, cnt);
	return f ? f(fd, iov, cnt, off)
		 : sys_rwv2(SYS_preadv2, fd, iov, cnt, off, 0);
}

NOSAN PMG_API ssize_t preadv64(int fd, const struct iovec *iov, int cnt,
			       off_t off)
{
	preadv_fn f = (preadv_fn)rd(RD_PREADV64, false);

	if (LIVE())
		grant_iov(iov, cnt);
	return f ? f(fd, iov, cnt, off)
		 : sys_rwv2(SYS_preadv2, fd, iov, cnt, off, 0);
}

NOSAN PMG_API ssize_t preadv2(int fd, const struct iovec *iov, int cnt,
			      off_t off, int flags)
{
	preadv2_fn f = (preadv2_fn)rd(RD_PREADV2, false);

	if (LIVE())
		grant_iov(iov, cnt);
	return f ? f(fd, iov, cnt, off, flags)
		 : sys_rwv2(SYS_preadv2, fd, iov, cnt, off, flags);
}

NOSAN PMG_API ssize_t preadv64v2(int fd, const struct iovec *iov, int cnt,
				 off_t off, int flags)
{
	preadv2_fn f = (preadv2_fn)rd(RD_PREADV64V2, false);

	if (LIVE())
		grant_iov(iov, cnt);
	return f ? f(fd, iov, cnt, off, flags)
		 : sys_rwv2(SYS_preadv2, fd, iov, cnt, off, flags);
}

NOSAN PMG_API ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	recv_fn f = (recv_fn)rd(RD_RECV, false);

	if (LIVE())
		grant(buf, n);
	return f ? f(fd, buf, n, flags)
		 : syscall(SYS_recvfrom, fd, buf, n, flags, NULL, NULL);
}

NOSAN PMG_API ssize_t recvfrom(int fd, void *buf, size_t n, int flags,
			       struct sockaddr *from, socklen_t *fromlen)
{
	recvfrom_fn f = (recvfrom_fn)rd(RD_RECVFROM, false);

	if (LIVE()) {
		grant(buf, n);
		if (fromlen) {
			grant(fromlen, sizeof(*fromlen));
			if (from)
				grant(from, *fromlen);
		}
	}
	return f ? f(fd, buf, n, flags, from, fromlen)
		 : syscall(SYS_recvfrom, fd, buf, n, flags, from, fromlen);
}

NOSAN PMG_API ssize_t recvmsg(int fd, struct msghdr *mh, int flags)
{
	recvmsg_fn f = (recvmsg_fn)rd(RD_RECVMSG, false);

	if (LIVE())
		grant_msg(mh);
	return f ? f(fd, mh, flags) : syscall(SYS_recvmsg, fd, mh, flags);
}

NOSAN PMG_API int recvmmsg(int fd, struct mmsghdr *v, unsigned vlen, int flags,
			   struct timespec *tmo)
{
	recvmmsg_fn f = (recvmmsg_fn)rd(RD_RECVMMSG, false);
	unsigned i;

	if (LIVE() && v) {
		/* the kernel takes at most UIO_MAXIOV (IOV_MAX) entries */
		unsigned n = vlen < IOV_MAX ? vlen : IOV_MAX;

		grant(v, n * sizeof(*v));
		for (i = 0; i < n; i++)
			grant_msg(&v[i].msg_hdr);
		if (tmo) /* the time left, written back */
			grant(tmo, sizeof(*tmo));
	}
	return f ? f(fd, v, vlen, flags, tmo)
		 : (int)syscall(SYS_recvmmsg, fd, v, vlen, flags, tmo);
}

NOSAN PMG_API size_t fread(void *buf, size_t size, size_t n, FILE *fp)
{
	fread_fn f = (fread_fn)rd(RD_FREAD, true);

	if (LIVE() && size && n <= SIZE_MAX / size)
		grant(buf, size * n);
	if (!f) {
		errno = ENOSYS;
		return 0;
	}
	return f(buf, size, n, fp);
}

/* glibc's fread_unlocked() of more than its buffer reads straight into
 * the caller's memory, as fread() (the name in parentheses: stdio.h may
 * make it a macro) */
NOSAN PMG_API size_t(fread_unlocked)(void *buf, size_t size, size_t n,
				     FILE *fp)
{
	fread_fn f = (fread_fn)rd(RD_FREAD_UNLOCKED, true);

	if (LIVE() && size && n <= SIZE_MAX / size)
		grant(buf, size * n);
	if (!f) {
		errno = ENOSYS;
		return 0;
	}
	return f(buf, size, n, fp);
}

NOSAN PMG_API ssize_t process_vm_readv(pid_t pid, const struct iovec *local,
				       unsigned long nl,
				       const struct iovec *remote,
				       unsigned long nr, unsigned long flags)
{
	pvreadv_fn f = (pvreadv_fn)rd(RD_PVREADV, false);

	if (LIVE())
		grant_iov(local, (long)nl); /* ours: the local side */
	return f ? f(pid, local, nl, remote, nr, flags)
		 : syscall(SYS_process_vm_readv, pid, local, nl, remote, nr,
			   flags);
}

/* _FORTIFY_SOURCE's checked variants (a destination of known size);
 * glibc declares them only inside its fortified inlines */
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
		       struct sockaddr *from, socklen_t *fromlen);
size_t __fread_chk(void *buf, size_t buflen, size_t size, size_t n, FILE *fp);

NOSAN PMG_API ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	read_chk_fn f = (read_chk_fn)rd(RD_READ_CHK, true);

	if (LIVE())
		grant(buf, n < buflen ? n : buflen);
	return f ? f(fd, buf, n, buflen) : read(fd, buf, n);
}

NOSAN PMG_API ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off,
				  size_t buflen)
{
	pread_chk_fn f = (pread_chk_fn)rd(RD_PREAD_CHK, true);

	if (LIVE())
		grant(buf, n < buflen ? n : buflen);
	return f ? f(fd, buf, n, off, buflen) : pread(fd, buf, n, off);
}

NOSAN PMG_API ssize_t __pread64_chk(int fd, void *buf, size_t n, off_t off,
				    size_t buflen)
{
	pread_chk_fn f = (pread_chk_fn)rd(RD_PREAD64_CHK, true);

	if (LIVE())
		grant(buf, n < buflen ? n : buflen);
	return f ? f(fd, buf, n, off, buflen) : pread(fd, buf, n, off);
}

NOSAN PMG_API ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen,
				 int flags)
{
	recv_chk_fn f = (recv_chk_fn)rd(RD_RECV_CHK, true);

	if (LIVE())
		grant(buf, n < buflen ? n : buflen);
	return f ? f(fd, buf, n, buflen, flags) : recv(fd, buf, n, flags);
}

NOSAN PMG_API ssize_t __recvfrom_chk(int fd, void *buf, size_t n,
				     size_t buflen, int flags,
				     struct sockaddr *from,
				     socklen_t *fromlen)
{
	recvfrom_chk_fn f = (recvfrom_chk_fn)rd(RD_RECVFROM_CHK, true);

	if (LIVE()) {
		grant(buf, n < buflen ? n : buflen);
		if (fromlen) { /* as recvfrom() */
			grant(fromlen, sizeof(*fromlen));
			if (from)
				grant(from, *fromlen);
		}
	}
	return f ? f(fd, buf, n, buflen, flags, from, fromlen)
		 : recvfrom(fd, buf, n, flags, from, fromlen);
}

NOSAN PMG_API size_t __fread_chk(void *buf, size_t buflen, size_t size,
				 size_t n, FILE *fp)
{
	fread_chk_fn f = (fread_chk_fn)rd(RD_FREAD_CHK, true);

	if (LIVE() && size && n <= SIZE_MAX / size)
		grant(buf, size * n < buflen ? size * n : buflen);
	return f ? f(buf, buflen, size, n, fp) : fread(buf, size, n, fp);
}

/*
 * The mirror: the calls that have the kernel READ the caller's memory
 * (their source).  A no-access domain's pages are unreadable until a
 * load faults inside its write window; the kernel's read takes no fault
 * and stops short (or fails with EFAULT) at the first block not yet
 * granted.  Its blocks there are granted first (mpwin.c,
 * _pmg_lazy_pregrant_src(): only where a write window is open on a
 * domain whose pages are unreadable now).  Not seen: vmsplice(2) (the
 * kernel takes the pages later, from the pipe's reader), raw syscalls,
 * io_uring and aio, as for the read family.
 */
static void grant_src(const void *buf, size_t n)
{
	int e = errno;

	_pmg_lazy_pregrant_src((uintptr_t)buf, n);
	errno = e;
}

static void grant_src_iov(const struct iovec *iov, long cnt)
{
	long i;

	if (!iov || cnt <= 0)
		return;
	if (cnt > IOV_MAX) /* the kernel refuses more (EINVAL) */
		return;
	grant_src(iov, (size_t)cnt * sizeof(*iov));
	for (i = 0; i < cnt; i++)
		grant_src(iov[i].iov_base, iov[i].iov_len);
}

/* What sendmsg() reads: the header, its name, control data, buffers. */
static void grant_src_msg(const struct msghdr *mh)
{
	if (!mh)
		return;
	grant_src(mh, sizeof(*mh));
	if (mh->msg_name)
		grant_src(mh->msg_name, mh->msg_namelen);
	if (mh->msg_control)
		grant_src(mh->msg_control, mh->msg_controllen);
	grant_src_iov(mh->msg_iov, (long)mh->msg_iovlen);
}

typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef ssize_t (*send_fn)(int, const void *, size_t, int);
typedef ssize_t (*sendto_fn)(int, const void *, size_t, int,
			     const struct sockaddr *, socklen_t);
typedef ssize_t (*sendmsg_fn)(int, const struct msghdr *, int);
typedef int (*sendmmsg_fn)(int, struct mmsghdr *, unsigned, int);
typedef size_t (*fwrite_fn)(const void *, size_t, size_t, FILE *);

NOSAN PMG_API ssize_t write(int fd, const void *buf, size_t n)
{
	write_fn f = (write_fn)rd(WR_WRITE, false);

	if (LIVE())
		grant_src(buf, n);
	return f ? f(fd, buf, n) : syscall(SYS_write, fd, buf, n);
}

NOSAN PMG_API ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	pwrite_fn f = (pwrite_fn)rd(WR_PWRITE, false);

	if (LIVE())
		grant_src(buf, n);
	return f ? f(fd, buf, n, off) : syscall(SYS_pwrite64, fd, buf, n, off);
}

NOSAN PMG_API ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
	pwrite_fn f = (pwrite_fn)rd(WR_PWRITE64, false);

	if (LIVE())
		grant_src(buf, n);
	return f ? f(fd, buf, n, off) : syscall(SYS_pwrite64, fd, buf, n, off);
}

NOSAN PMG_API ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	readv_fn f = (readv_fn)rd(WR_WRITEV, false);

	if (LIVE())
		grant_src_iov(iov, cnt);
	return f ? f(fd, iov, cnt) : syscall(SYS_writev, fd, iov, cnt);
}

NOSAN PMG_API ssize_t pwritev(int fd, const struct iovec *iov, int cnt,
			      off_t off)
{
	preadv_fn f = (preadv_fn)rd(WR_PWRITEV, false);

	if (LIVE())
		grant_src_iov(iov, cnt);
	return f ? f(fd, iov, cnt, off)
		 : sys_rwv2(SYS_pwritev2, fd, iov, cnt, off, 0);
}

NOSAN PMG_API ssize_t pwritev64(int fd, const struct iovec *iov, int cnt,
				off_t off)
{
	preadv_fn f = (preadv_fn)rd(WR_PWRITEV64, false);

	if (LIVE())
		grant_src_iov(iov, cnt);
	return f ? f(fd, iov, cnt, off)
		 : sys_rwv2(SYS_pwritev2, fd, iov, cnt, off, 0);
}

NOSAN PMG_API ssize_t pwritev2(int fd, const struct iovec *iov, int cnt,
			       off_t off, int flags)
{
	preadv2_fn f = (preadv2_fn)rd(WR_PWRITEV2, false);

	if (LIVE())
		grant_src_iov(iov, cnt);
	return f ? f(fd, iov, cnt, off, flags)
		 : sys_rwv2(SYS_pwritev2, fd, iov, cnt, off, flags);
}

NOSAN PMG_API ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt,
				  off_t off, int flags)
{
	preadv2_fn f = (preadv2_fn)rd(WR_PWRITEV64V2, false);

	if (LIVE())
		grant_src_iov(iov, cnt);
	return f ? f(fd, iov, cnt, off, flags)
		 : sys_rwv2(SYS_pwritev2, fd, iov, cnt, off, flags);
}

NOSAN PMG_API ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	send_fn f = (send_fn)rd(WR_SEND, false);

	if (LIVE())
		grant_src(buf, n);
	return f ? f(fd, buf, n, flags)
		 : syscall(SYS_sendto, fd, buf, n, flags, NULL, 0);
}

NOSAN PMG_API ssize_t sendto(int fd, const void *buf, size_t n, int flags,
			     const struct sockaddr *to, socklen_t tolen)
{
	sendto_fn f = (sendto_fn)rd(WR_SENDTO, false);

	if (LIVE()) {
		grant_src(buf, n);
		if (to)
			grant_src(to, tolen);
	}
	return f ? f(fd, buf, n, flags, to, tolen)
		 : syscall(SYS_sendto, fd, buf, n, flags, to, tolen);
}

NOSAN PMG_API ssize_t sendmsg(int fd, const struct msghdr *mh, int flags)
{
	sendmsg_fn f = (sendmsg_fn)rd(WR_SENDMSG, false);

	if (LIVE())
		grant_src_msg(mh);
	return f ? f(fd, mh, flags) : syscall(SYS_sendmsg, fd, mh, flags);
}

NOSAN PMG_API int sendmmsg(int fd, struct mmsghdr *v, unsigned vlen,
			   int flags)
{
	sendmmsg_fn f = (sendmmsg_fn)rd(WR_SENDMMSG, false);
	unsigned i;

	if (LIVE() && v) {
		/* the kernel takes at most UIO_MAXIOV entries, and writes
		 * each one's msg_len back */
		unsigned n = vlen < IOV_MAX ? vlen : IOV_MAX;

		grant(v, n * sizeof(*v));
		for (i = 0; i < n; i++)
			grant_src_msg(&v[i].msg_hdr);
	}
	return f ? f(fd, v, vlen, flags)
		 : (int)syscall(SYS_sendmmsg, fd, v, vlen, flags);
}

/* glibc's fwrite() of more than its buffer hands the caller's memory to
 * write(2) itself (not through the interposed write()) */
NOSAN PMG_API size_t fwrite(const void *buf, size_t size, size_t n, FILE *fp)
{
	fwrite_fn f = (fwrite_fn)rd(WR_FWRITE, true);

	if (LIVE() && size && n <= SIZE_MAX / size)
		grant_src(buf, size * n);
	if (!f) {
		errno = ENOSYS;
		return 0;
	}
	return f(buf, size, n, fp);
}

NOSAN PMG_API size_t(fwrite_unlocked)(const void *buf, size_t size,
				      size_t n, FILE *fp)
{
	fwrite_fn f = (fwrite_fn)rd(WR_FWRITE_UNLOCKED, true);

	if (LIVE() && size && n <= SIZE_MAX / size)
		grant_src(buf, size * n);
	if (!f) {
		errno = ENOSYS;
		return 0;
	}
	return f(buf, size, n, fp);
}

NOSAN PMG_API ssize_t process_vm_writev(pid_t pid, const struct iovec *local,
					unsigned long nl,
					const struct iovec *remote,
					unsigned long nr, unsigned long flags)
{
	pvreadv_fn f = (pvreadv_fn)rd(WR_PVWRITEV, false);

	if (LIVE())
		grant_src_iov(local, (long)nl); /* ours: the local side */
	return f ? f(pid, local, nl, remote, nr, flags)
		 : syscall(SYS_process_vm_writev, pid, local, nl, remote, nr,
			   flags);
}

#endif /* PMG_SHARED */
