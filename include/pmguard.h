/* SPDX-License-Identifier: MIT */
/*
 * pmguard.h - stray-write protection for persistent memory and mapped data.
 *
 * Memory registered with a domain stays write-disabled (or access-disabled)
 * by a protection key.  A thread opens a short, thread-local window around
 * its legitimate accesses; any other access faults and is handled by the
 * fault mode (strict, relaxed or audit).  On x86-64 with PKU the windows are
 * one RDPKRU/WRPKRU pair; where PKU is missing, the mprotect backend emulates
 * the domains with page permissions and its windows are process-wide.
 * The design is that of Intel's PKS/PMEM patch set for Linux (V8, 2022),
 * named "V8" below; docs/api.md, "Porting from the PKS patch set".
 *
 * Every function returning int returns 0 (or a documented non-negative
 * value) on success and a negative errno on failure; pmg_errormsg() then
 * names what was wrong.  Async-signal-safety is stated per function
 * ("AS-safe").  See pmguard(7) and docs/api.md.
 */
#ifndef PMGUARD_H
#define PMGUARD_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PMG_VERSION_MAJOR 0
#define PMG_VERSION_MINOR 3
#define PMG_VERSION_PATCH 0
#define PMG_VERSION_STRING "0.3.0"

/* ---------------------------------------------------------------- setup */

/** Backends: how domains are enforced. */
enum pmg_backend {
	PMG_BACKEND_NONE = 0,		/* not initialised */
	PMG_BACKEND_PKU = 1,		/* x86 PKU: thread-local windows */
	PMG_BACKEND_MPROTECT = 2,	/* page permissions: process-wide */
};

/**
 * pmg_init() - initialise the library (idempotent, thread-safe).
 *
 * Reads PMGUARD_BACKEND (auto|pku|mprotect), PMGUARD_FAULT_MODE
 * (strict|relaxed|audit|contain) and PMGUARD_REPORT_FD (-1 or a descriptor), picks
 * the backend and installs the SIGSEGV and SIGTRAP handlers (the ones
 * installed before are chained to).  A fault mode or report fd set through
 * the API before pmg_init() wins over the environment.  Called implicitly
 * by pmg_domain_new() and pmg_get_info().  After a failure it may be
 * called again (the pthread_atfork() handlers are registered once per
 * process however often it is retried).  On success pmg_errormsg() is
 * left as it was.  Returns 0, -ENOTSUP (pku asked for but missing), -EINVAL
 * (a bad environment value; pmg_errormsg() names it), or what
 * sigaction()/pthread_atfork() returned.  Not AS-safe.
 */
int pmg_init(void);

/** The backend in use (enum pmg_backend).  AS-safe. */
int pmg_backend(void);

/** "pku", "mprotect" or "none".  AS-safe. */
const char *pmg_backend_name(int backend);

/**
 * pmg_errormsg() - what the last failing call in this thread objected to.
 * The rule: read it right after a call has failed; it describes that call's
 * failure (a step inside it is named as part of it: "creating the pool
 * domain: a domain named 'pmem' exists").  A call that succeeds leaves it
 * as it was, also when it recovered from an inner failure (pmg_init()
 * falling back from PKU); the next failing call in the thread replaces it.
 * Per-thread, empty until a call fails.  AS-safe.
 */
const char *pmg_errormsg(void);

/** Library version string, e.g. "0.3.0".  AS-safe. */
const char *pmg_version(void);

/* -------------------------------------------------------------- domains */

/** Domain flags. */
#define PMG_DOMAIN_NOACCESS	(1u << 0)	/* no reads outside windows */
#define PMG_DOMAIN_PINNED	(1u << 1)	/* PKU: a hardware key for life */

/**
 * struct pmg_domain - a protection domain.
 *
 * Opaque: the fields are read by the inline window code below and are not
 * part of the API.  Create with pmg_domain_new(), free with
 * pmg_domain_delete().  The library allocates every handle: fields are
 * only ever appended (0.1 ends at _self), so code compiled against an
 * older header keeps reading the fields it knows at their places; new
 * fields take _reserved's place (the struct stays 64 bytes: static
 * asserts below "Sizes", scripts/abi-check).
 *
 * On PKU a domain holds a hardware key (1..15) or, when more domains
 * exist than keys, none: a "virtual" domain, kept by page protection;
 * a window on it gets it a key (pmguard(7), "Virtual domains").  _key and
 * the register bits change only under the library lock, the bits before
 * _key (release); the inline code reads _key with acquire.
 */
struct pmg_domain {
	int _key;		/* PKU: its hardware key 1..15; 0 while it
				   holds none, on mprotect, once deleted */
	uint32_t _mask;		/* the key's two register bits */
	uint32_t _rd_bits;	/* register bits with a read window open */
	uint32_t _dflt_bits;	/* register bits with no window open */
	const struct pmg_domain *_self;	/* this handle's address while it
					   is live: a copy's is not its own */
	/* 0.2: virtual domains */
	int _id;		/* the domain's number, 1..PMG_DOMAINS_MAX-1 */
	uint32_t _ref;		/* a window opened since the last eviction
				   scan (the clock bit: set inline) */
	uintptr_t _reserved[4];
};

/** The most domains that can live at once (pmg_domain_new(): -ENOSPC). */
#define PMG_DOMAINS_MAX	4096

/**
 * pmg_domain_new() - create a domain.
 * @dp:    where the handle goes
 * @name:  1..31 printable characters, unique among live domains
 * @flags: 0 (write-disabled outside windows), PMG_DOMAIN_NOACCESS,
 *         PMG_DOMAIN_PINNED
 *
 * On PKU the domain gets a hardware key if one can be had (a free one, up
 * to PMGUARD_KEYS held by pmguard); otherwise it is virtual: its ranges
 * are kept by page protection until a window opens on it, which gets it a
 * key, evicting the least recently windowed domain that has no window
 * open (pmguard(7), "Virtual domains").  PMG_DOMAIN_PINNED asks for a key
 * now and for life (never evicted; the domain's windows are always
 * thread-local and AS-safe): -ENOSPC if none can be had.  On the mprotect
 * backend every domain is kept by page protection and PMG_DOMAIN_PINNED
 * changes nothing.  The calling thread and every thread created later see
 * the default rights at once; threads that already exist pick them up on
 * their first access.
 * Returns 0, -EINVAL (bad name or flags, or a bad PMGUARD_* value at the
 * implicit pmg_init()), -EEXIST (name in use), -ENOSPC (PMG_DOMAINS_MAX
 * domains live, or PMG_DOMAIN_PINNED and no key to be had: the message
 * says how many exist and who holds them), -ENOTSUP (PMGUARD_BACKEND=pku
 * where PKU is missing), -ENOMEM, -EBUSY (the kernel gave a key pmguard
 * cannot use), or another pkey_alloc() error.  Not AS-safe.
 */
int pmg_domain_new(struct pmg_domain **dp, const char *name, unsigned flags);

/**
 * pmg_domain_delete() - free a domain and its key; NULL-safe, clears *dp.
 * All windows on it must be closed first: the calling thread's are seen
 * (and on mprotect every thread's), other threads' on PKU are not, and a
 * thread that still holds one would keep rights on the key's next domain.
 * Windows of a thread that has ended (returned, pthread_exit(),
 * cancelled) were closed when it ended (and reported on the report fd), so
 * they never keep a domain busy.
 * Returns 0, -EBUSY (ranges are still protected by it, or windows are
 * open), -EINVAL (not a live domain: also a stale copy of a handle).  Not
 * AS-safe.
 */
int pmg_domain_delete(struct pmg_domain **dp);

/**
 * pmg_domain_key() - on PKU the hardware key @d holds now (1..15), or
 * -ENOKEY when it holds none (a virtual domain: page protection); on the
 * mprotect backend the domain's number (1..PMG_DOMAINS_MAX-1; no hardware
 * key), as struct pmg_fault_info.key reports it.  -EINVAL: not a live
 * domain.  A virtual domain's key changes as windows open on it and on
 * others: the answer is a snapshot.  AS-safe.
 */
int pmg_domain_key(const struct pmg_domain *d);

/** The name of @d, or NULL.  AS-safe. */
const char *pmg_domain_name(const struct pmg_domain *d);

/* ---------------------------------------------------------------- ranges */

/**
 * pmg_protect() - tag [addr, addr+len) with @d's key.
 *
 * The range must be page-aligned, mapped, readable and writable, and must
 * not overlap a protected range.  Unprotecting restores PROT_READ |
 * PROT_WRITE.  Returns 0, -EINVAL (NULL domain, unaligned or zero length,
 * wrapping), -EEXIST (overlaps a protected range), -ENOMEM (not entirely
 * mapped, or no memory to grow the registry), -EACCES (part of it is not
 * mapped read-write), or what pkey_mprotect()/mprotect() returned.  Not
 * AS-safe.
 */
int pmg_protect(struct pmg_domain *d, void *addr, size_t len);

/**
 * pmg_unprotect() - remove the range that starts at @addr, of length @len,
 * exactly as it was protected.  A range whose memory was unmapped behind
 * the library's back is removed too (returns 0): the shared library drops
 * it at the munmap()/mremap()/MAP_FIXED mmap() itself; otherwise a range
 * no longer entirely mapped is dropped here without touching the memory.
 * See "Unmapped ranges" in docs/api.md for what cannot be detected.
 * Returns 0, -EINVAL (zero or wrapping length), -ENOENT (no such range),
 * or what pkey_mprotect()/mprotect() returned (the range then stays
 * protected and registered).  Not AS-safe.
 */
int pmg_unprotect(void *addr, size_t len);

/**
 * pmg_lookup() - the domain protecting @addr, or NULL (not protected).
 * O(log n), no lock, never a wrong answer however busy the writers are
 * (left-right registry: a lookup never retries).  If @base/@len are not
 * NULL they receive the range.  AS-safe.
 */
struct pmg_domain *pmg_lookup(const void *addr, void **base, size_t *len);

/* --------------------------------------------------------------- windows */

/** Window kinds. */
#define PMG_READ	0	/* reads of a PMG_DOMAIN_NOACCESS domain */
#define PMG_WRITE	1	/* reads and writes */

/*
 * private: per-thread window counts per hardware key, one cache line.
 * w[0] counts the nested signal-handler contexts with windows (window.c);
 * r[0] bit 0 is set once the thread is known to the library (its counts
 * are then seen by key eviction): until then pmg_open() goes the slow
 * way once; it is set on the PKU backend only, so the inline open tests
 * it instead of _pmg_fast (an ABI rule: it stays clear on page
 * protection); bit 1: the thread may hold page-protection windows.
 * ABI: 16 counts per kind cover every PKU key, so it is complete; it is
 * one cache line and never grows (the shared library's whole TLS must fit
 * the static TLS that dlopen() can get: test-dlopen).  Per-thread state
 * a later version needs inline comes as a new symbol in a new version
 * node, never as a field here (static assert below "Sizes").
 */
struct _pmg_ws {
	uint16_t w[16];
	uint16_t r[16];
};

extern __thread struct _pmg_ws _pmg_tls
	__attribute__((tls_model("initial-exec")));
extern int _pmg_fast;	/* 1: PKU, windows are inline */

int _pmg_open_slow(struct pmg_domain *d, int acc);
int _pmg_close_slow(struct pmg_domain *d, int acc);
int _pmg_unbalanced(struct pmg_domain *d, int acc, void *caller);
int _pmg_overflow(struct pmg_domain *d);
int _pmg_bad_handle(struct pmg_domain *d, int acc);
int _pmg_ctx_open(struct pmg_domain *d, int acc, uint32_t reg);
bool _pmg_ctx_close(struct pmg_domain *d, int acc);
int _pmg_open_raced(struct pmg_domain *d, int acc, unsigned key);

#define _PMG_INLINE static inline __attribute__((always_inline))

#if defined(__x86_64__)
_PMG_INLINE uint32_t _pmg_rdpkru(void)
{
	uint32_t eax, edx;

	__asm__ volatile(".byte 0x0f,0x01,0xee" : "=a"(eax), "=d"(edx)
			 : "c"(0));
	return eax;
}

_PMG_INLINE void _pmg_wrpkru(uint32_t v)
{
	__asm__ volatile(".byte 0x0f,0x01,0xef" : : "a"(v), "c"(0), "d"(0)
			 : "memory");
}
#else
_PMG_INLINE uint32_t _pmg_rdpkru(void) { return 0; }
_PMG_INLINE void _pmg_wrpkru(uint32_t v) { (void)v; }
#endif

/* The key's register bits for the window counts @w, @r. */
_PMG_INLINE uint32_t _pmg_bits(const struct pmg_domain *d, unsigned w,
			       unsigned r)
{
	return w ? 0 : r ? d->_rd_bits : d->_dflt_bits;
}

/*
 * The window edges, generic over the register access so that benchmarks can
 * run the same code with the register replaced.  One read and at most one
 * write of the register per edge; the write is skipped when the value
 * would not change (tested for read windows and nested edges: the
 * outermost write window's two edges always change it).  The register is read, not cached: a signal handler
 * starts with a reset register.  If the register does not hold what this
 * thread's open windows say, the edge runs in a fresh context (a signal
 * handler that interrupted a window): _pmg_ctx_open() gives that context
 * its own window and the matching close puts its rights back
 * (_pmg_tls.w[0], unused by any key, counts such nested contexts).
 */
_PMG_INLINE int _pmg_open_edge(struct pmg_domain *d, int acc,
			       uint32_t (*rd)(void), void (*wr)(uint32_t))
{
	struct _pmg_ws *t = &_pmg_tls;
	unsigned k = (unsigned)__atomic_load_n(&d->_key, __ATOMIC_ACQUIRE);
	uint16_t *n;
	unsigned w, r;
	uint32_t v, nv;

	/* a copy or a forged struct: not at the address it names */
	if (__builtin_expect(d->_self != d, 0))
		return _pmg_bad_handle(d, acc);
	/* no key now (virtual), or a thread the library has not seen */
	if (__builtin_expect(k - 1 >= 15 || !(t->r[0] & 1), 0))
		return _pmg_open_slow(d, acc);
	n = acc ? &t->w[k] : &t->r[k];
	w = t->w[k];
	r = t->r[k];
	v = rd();
	if (__builtin_expect(w | r, 0)) {
		/* nested: check the register still holds our windows */
		if (__builtin_expect(*n == UINT16_MAX, 0))
			return _pmg_overflow(d);
		if ((v & d->_mask) != _pmg_bits(d, w, r))
			return _pmg_ctx_open(d, acc, v);
		++*n;
		nv = (v & ~d->_mask) | _pmg_bits(d, t->w[k], t->r[k]);
		if (nv != v)
			wr(nv);
	} else {
		++*n;
		nv = (v & ~d->_mask) | (acc ? 0 : d->_rd_bits);
		/* a first write window always changes the register: a
		 * key's default bits are never 0 (write-disabled at
		 * least), so no compare for it */
		if (acc || nv != v)
			wr(nv);
	}
	if (__builtin_expect(!d->_ref, 0))
		d->_ref = 1;
	/*
	 * The key may have been taken from the domain between the first
	 * read and the count (key eviction, pmguard(7)): the evictor
	 * clears _key, waits for every thread to pass a barrier
	 * (membarrier), then reads the counts; so either it saw ours, or
	 * this read sees the change.  The edge is then undone.
	 */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (__builtin_expect((unsigned)__atomic_load_n(&d->_key,
						       __ATOMIC_RELAXED) != k,
			     0))
		return _pmg_open_raced(d, acc, k);
	return 0;
}

_PMG_INLINE int _pmg_close_edge(struct pmg_domain *d, int acc,
				uint32_t (*rd)(void), void (*wr)(uint32_t))
{
	struct _pmg_ws *t = &_pmg_tls;
	unsigned k = (unsigned)d->_key;
	uint16_t *n = acc ? &t->w[k] : &t->r[k];
	uint32_t v, nv;

	if (__builtin_expect(d->_self != d, 0))
		return _pmg_bad_handle(d, acc);
	if (__builtin_expect(*n == 0, 0))
		return _pmg_unbalanced(d, acc, __builtin_return_address(0));
	if (__builtin_expect(t->w[0] != 0, 0) && _pmg_ctx_close(d, acc))
		return 0;
	--*n;
	v = rd();
	if (__builtin_expect(t->w[k] | t->r[k], 0)) {
		nv = (v & ~d->_mask) | _pmg_bits(d, t->w[k], t->r[k]);
		if (nv != v)
			wr(nv);
		return 0;
	}
	nv = (v & ~d->_mask) | d->_dflt_bits;
	/* the last write window always changes the register (its bits
	 * were 0, the default's never are): no compare for it */
	if (acc || nv != v)
		wr(nv);
	return 0;
}

_PMG_INLINE bool _pmg_valid(const struct pmg_domain *d, int acc)
{
	return d && (unsigned)(d->_key - 1) < 15 && (acc & ~1) == 0;
}

/*
 * PMGUARD_INLINE - how the public window edges below are defined.  C and
 * C++ get them static inline (the edge is a few instructions in the
 * caller).  Languages that cannot call inline C (Python ctypes, Rust or
 * Go without C wrappers, any FFI) call the library's out-of-line copies
 * of the same functions, which src/ffi.c makes by defining PMGUARD_INLINE
 * to an exported definition before including this header: one
 * definition, same semantics, same async-signal-safety, exported from
 * libpmguard.so (version node PMGUARD_0.3) and libpmguard.a.  Leave it
 * undefined in programs.
 */
#ifndef PMGUARD_INLINE
#if defined(__GNUC__)
/* always_inline: gcc otherwise keeps one outlined copy of pmg_open() for
 * a caller that uses it more than once (a call, three pushes, three pops
 * and a return on every edge) */
#define PMGUARD_INLINE static inline __attribute__((always_inline))
#else
#define PMGUARD_INLINE static inline
#endif
#endif

/**
 * pmg_open() - open a window on @d for the calling thread.
 * @acc: PMG_WRITE (read and write) or PMG_READ (read only; meaningful for
 *       PMG_DOMAIN_NOACCESS domains)
 *
 * Windows nest (up to 65535 deep per kind); each pmg_open() needs one
 * pmg_close() of the same kind.  On PKU the window is this thread's only:
 * no syscall, no lock.  On the mprotect backend it is process-wide.  A
 * thread that ends with windows open (return, pthread_exit(),
 * cancellation) has them closed as it ends, reported once on the report
 * fd ("thread T ended with N write and M read window(s) open on domain
 * 'x': closed them"); on PKU that needs the thread to have been created
 * through pmguard's pthread_create wrapper (the default).  @d must be the
 * handle pmg_domain_new() gave: a copy of it, or a struct made by hand,
 * is refused with -EINVAL on both backends.
 * A virtual domain (PKU, no key now) first gets a key, evicting another
 * domain's if none is free: the lock, a membarrier(2) and a
 * pkey_mprotect(2) per range of the two domains; when no key can be had
 * (every keyed domain has a window open, is pinned, or PMGUARD_KEYS is
 * 0) the window is a page-protection one, process-wide as on the mprotect
 * backend (counted in pmg_key_stats_get()).  A thread's first window goes
 * through the library once (the lock) to make its counts known.
 * Returns 0, -EINVAL (bad domain or kind), -EOVERFLOW (nesting too deep,
 * or more than 16 nested signal handlers with windows), -ENOMEM, and for
 * page protection what mprotect() returned (the edge is then undone).
 * AS-safe on PKU for a domain that holds a key (PMG_DOMAIN_PINNED: always)
 * in a thread that has opened a window before (a window opened in a
 * signal handler is that handler's own; the interrupted context's rights
 * come back when it returns); otherwise not AS-safe: it takes the library
 * lock.
 */
PMGUARD_INLINE int pmg_open(struct pmg_domain *d, int acc)
{
	/* no test of _pmg_fast: the edge's test of the thread's "known" bit
	 * covers it (set on PKU only) */
	if (__builtin_expect(!d || (acc & ~1), 0))
		return _pmg_open_slow(d, acc);
	return _pmg_open_edge(d, acc, _pmg_rdpkru, _pmg_wrpkru);
}

/**
 * pmg_close() - close a window opened by pmg_open() with the same @acc.
 * Returns 0, -EINVAL, -EPERM (no such window is open in this thread: the
 * unbalanced close is reported with a backtrace and nothing changes), and
 * on mprotect what mprotect() returned.  AS-safe on PKU only.
 */
PMGUARD_INLINE int pmg_close(struct pmg_domain *d, int acc)
{
	/* no test of _pmg_fast: a domain holds a key (_pmg_valid()) on PKU
	 * only */
	if (__builtin_expect(!_pmg_valid(d, acc), 0))
		return _pmg_close_slow(d, acc);
	return _pmg_close_edge(d, acc, _pmg_rdpkru, _pmg_wrpkru);
}

/** pmg_write_begin() / pmg_write_end(): pmg_open/close(d, PMG_WRITE). */
PMGUARD_INLINE int pmg_write_begin(struct pmg_domain *d)
{
	return pmg_open(d, PMG_WRITE);
}

PMGUARD_INLINE int pmg_write_end(struct pmg_domain *d)
{
	return pmg_close(d, PMG_WRITE);
}

/* private: scope guard for PMG_WRITE_SCOPE() and PMG_WITH_WRITE() */
struct _pmg_scope {
	struct pmg_domain *d;
	int rc;
};

/* private: report that PMG_WRITE_SCOPE() at @where could not open its
 * window (rc, pmg_errormsg()) and abort().  AS-safe. */
__attribute__((noreturn, cold)) void
_pmg_scope_abort(struct pmg_domain *d, int rc, const char *where);

#define _PMG_STR2(x) #x
#define _PMG_STR(x) _PMG_STR2(x)

/* private: open the window, or abort (PMG_WRITE_SCOPE()) */
static inline struct _pmg_scope _pmg_scope_begin(struct pmg_domain *d,
						 const char *where)
{
	struct _pmg_scope s = { d, pmg_open(d, PMG_WRITE) };

	if (__builtin_expect(s.rc != 0, 0))
		_pmg_scope_abort(d, s.rc, where);
	return s;
}

/* private: open the window; on failure errno = -rc (PMG_WITH_WRITE()) */
static inline struct _pmg_scope _pmg_scope_try(struct pmg_domain *d)
{
	struct _pmg_scope s = { d, pmg_open(d, PMG_WRITE) };

	if (__builtin_expect(s.rc != 0, 0))
		errno = -s.rc;
	return s;
}

static inline void _pmg_scope_end(struct _pmg_scope *s)
{
	if (s->rc == 0)
		(void)pmg_close(s->d, PMG_WRITE);
}

/* private: PMG_WITH_WRITE()'s block ran: close, end the loop */
static inline void _pmg_scope_done(struct _pmg_scope *s)
{
	_pmg_scope_end(s);
	s->rc = 1;
}

#define _PMG_CAT2(a, b) a##b
#define _PMG_CAT(a, b) _PMG_CAT2(a, b)

/**
 * PMG_WRITE_SCOPE(d) - a write window on @d until the end of the enclosing
 * block (GNU C cleanup attribute; C++ too, also when an exception leaves
 * the block).  Declares a guard; use as a statement.  @d is evaluated
 * exactly once.  The code after it never runs without the window: if
 * pmg_open() fails (a bad or deleted handle, nesting too deep, -ENOMEM,
 * an mprotect() failure), the guard writes "pmguard: PMG_WRITE_SCOPE at
 * FILE:LINE: ..." with the error and pmg_errormsg() to stderr and calls
 * abort(), as a failed assertion would.  Where a failure must be handled,
 * use PMG_WITH_WRITE() (skips its block) or pmg_open() itself.
 */
#define PMG_WRITE_SCOPE(d)                                         \
	struct _pmg_scope _PMG_CAT(_pmg_scope_, __LINE__)          \
		__attribute__((cleanup(_pmg_scope_end), unused)) = \
			_pmg_scope_begin((d), __FILE__ ":" _PMG_STR(__LINE__))

/**
 * PMG_WITH_WRITE(d) { ... } - run the block once with a write window on
 * @d.  @d is evaluated exactly once.  If pmg_open() fails the block does
 * not run and errno is set to the error (EINVAL, EOVERFLOW, ENOMEM, or
 * what mprotect() set; pmg_errormsg() says why): clear errno before and
 * test it after where that matters.  Do not leave the block with
 * return/goto/break: use PMG_WRITE_SCOPE() where the block may exit
 * early.
 */
#define PMG_WITH_WRITE(d)                                     \
	for (struct _pmg_scope _pmg_with = _pmg_scope_try(d); \
	     _pmg_with.rc == 0; _pmg_scope_done(&_pmg_with))

/**
 * pmg_map_local() - the kmap_local_page() analog: if @addr is protected,
 * open a window of kind @acc on its domain for this thread.
 * Returns 1 (a window was opened: pair with pmg_unmap_local()), 0 (@addr is
 * not protected; nothing to undo), or pmg_open()'s errors.  O(log n).
 * AS-safe on PKU only (as pmg_open()).
 */
int pmg_map_local(const void *addr, int acc);

/** pmg_unmap_local() - undo pmg_map_local(); returns 1, 0 or pmg_close()'s
 * errors.  AS-safe on PKU only. */
int pmg_unmap_local(const void *addr, int acc);

/**
 * pmg_map() - the kmap() analog: a long-term mapping is not supported for
 * protected memory (windows are thread-local).  If @addr is protected, a
 * warning naming the caller is reported and 1 returned; access still needs a
 * window.  Returns 0 for unprotected addresses.  AS-safe once pmg_init()
 * has run (it loads backtrace()'s unwinder beforehand).
 */
int pmg_map(const void *addr);

/* --------------------------------------------------------- fault handling */

/** Fault modes: what a stray access does. */
enum pmg_fault_mode {
	PMG_FAULT_STRICT = 0,	/* report, then abort (core dump) */
	PMG_FAULT_RELAXED = 1,	/* report once per domain, then allow */
	PMG_FAULT_AUDIT = 2,	/* report each, allow that one, re-arm */
	/*
	 * Contain (x86-64): a stray write is reported and undone.  The
	 * faulting instruction is decoded (Zydis) and run once (single
	 * step) against a per-thread copy of what it writes (base register
	 * moved), or, for forms that cannot be moved (push, rip-relative),
	 * with access and its protected bytes saved and put back:
	 * registers and flags are as it left them, protected memory is
	 * unchanged.  A write whose range cannot
	 * be determined (scatter, xsave, movdir64b, undecodable) falls back
	 * to strict with the reason.  Stray reads: as audit.  On mprotect
	 * the pages are writable for the whole process during the step; see
	 * pmg_set_fault_mode(3) for what may race there.
	 */
	PMG_FAULT_CONTAIN = 3,
};

/** What happened to a fault (struct pmg_fault_info.action). */
enum pmg_fault_action {
	PMG_FAULT_SYNCED = 1,	/* stale rights of an older thread: fixed */
	PMG_FAULT_GRANTED,	/* the domain's callback granted access */
	PMG_FAULT_RELAXED_REPORTED,
	PMG_FAULT_RELAXED_SILENT,
	PMG_FAULT_AUDITED,
	PMG_FAULT_STRICT_ABORT,
	PMG_FAULT_CONTAINED,	/* contain: the write ran and was undone */
};

/** A fault on a protected address, as handed to callbacks and observers. */
struct pmg_fault_info {
	void *addr;			/* faulting address */
	void *ip;			/* faulting instruction */
	struct pmg_domain *domain;	/* domain of the address */
	int key;			/* pmg_domain_key() of the domain as
					   the fault was handled: PKU its
					   key, or -ENOKEY (virtual: page
					   protection); mprotect its number */
	int access;			/* PMG_READ or PMG_WRITE */
	uint32_t pkru;			/* interrupted register (emulated
					   on mprotect) */
	pid_t tid;			/* faulting thread */
	int mode;			/* enum pmg_fault_mode in force */
	int action;			/* enum pmg_fault_action (observers) */
	int si_code;			/* SEGV_PKUERR (a key) or SEGV_ACCERR
					   (page protection: mprotect, or a
					   virtual domain on PKU) */
};

/**
 * pmg_fault_cb - per-domain fault callback (V8's pks_key_callback).
 * Called in the SIGSEGV handler for each stray access to the domain before
 * the fault mode applies.  Return true to grant the faulting thread the
 * access (the interrupted context keeps the rights until its next window
 * edge on the domain); false to let the mode decide.  Must be AS-safe.
 * Runs with asynchronous signals blocked and every domain at its default
 * rights: it may read a write-disabled domain (the faulting address);
 * a write to protected memory or a read of a no-access domain there
 * kills the process (SIGSEGV is blocked) unless a window is open (PKU).
 */
typedef bool (*pmg_fault_cb)(const struct pmg_fault_info *fi, void *arg);

/**
 * Set or clear (@cb NULL) @d's fault callback.  The (callback, argument)
 * pair is replaced whole: a fault in flight uses the old pair or the new.
 * Returns 0, -EINVAL (not a live domain), -ENOMEM.  Not AS-safe.
 */
int pmg_domain_set_callback(struct pmg_domain *d, pmg_fault_cb cb,
			    void *arg);

/**
 * pmg_fault_observer - called in the SIGSEGV handler for every fault the
 * library handled (stray or synced), after the decision, with
 * fi->action set; before the abort in strict mode.  Must be AS-safe.
 * The same rights and signal mask as a pmg_fault_cb.
 */
typedef void (*pmg_fault_observer)(const struct pmg_fault_info *fi,
				   void *arg);

/**
 * Install (or clear with NULL) the process-wide observer; the pair is
 * replaced whole.  Returns 0 or -ENOMEM.  Not AS-safe.
 */
int pmg_set_fault_observer(pmg_fault_observer fn, void *arg);

/** Set the fault mode (enum pmg_fault_mode).  0 or -EINVAL.  AS-safe. */
int pmg_set_fault_mode(int mode);

/** The fault mode in force.  AS-safe. */
int pmg_get_fault_mode(void);

/**
 * pmg_set_report_fd() - where fault reports are written (default 2, -1
 * for none).  Returns the previous fd.  AS-safe.
 */
int pmg_set_report_fd(int fd);

/** Counters since start (or the last pmg_stats_reset()). */
struct pmg_stats {
	uint64_t faults;	/* SIGSEGVs handled as ours */
	uint64_t synced;	/* stale thread rights fixed, retried */
	uint64_t strays;	/* stray accesses (all modes) */
	uint64_t granted;	/* granted by a domain callback */
	uint64_t relaxed;	/* allowed by relaxed mode */
	uint64_t audited;	/* allowed once by audit mode */
	uint64_t rearmed;	/* audit re-arms done */
	uint64_t audit_sites;	/* distinct faulting instructions */
	uint64_t unbalanced;	/* refused unbalanced closes */
	uint64_t long_term_maps;/* pmg_map() of protected memory */
	uint64_t contained;	/* stray writes undone by contain mode */
	uint64_t contain_strict;/* contain fell back to strict */
	uint64_t contain_redirected;/* contained into a scratch copy */
	uint64_t contain_regrant;/* mprotect: a window raced a contained
				   write; page rights re-applied, retried */
	uint64_t lazy_grants; /* mprotect: 1 MiB blocks granted to a
				 write window on their first write */
	uint64_t lazy_full; /* mprotect: a write window's record of
			       blocks filled, or it opened with SIGSEGV
			       blocked: the whole domain opened */
};

/**
 * pmg_stats_get() - read the counters into @st; @size is sizeof(*@st) as
 * the caller was compiled (see "Sizes" above struct pmg_info).  Returns 0
 * or -EINVAL (@st NULL, @size below the first struct's 128 bytes or over
 * 65536).  AS-safe.
 */
int pmg_stats_get(struct pmg_stats *st, size_t size);

/**
 * struct pmg_key_stats - domains and hardware keys (pmguard(7), "Virtual
 * domains").  Gauges are now; counters since start or pmg_stats_reset().
 */
struct pmg_key_stats {
	int domains;		/* live domains */
	int keyed;		/* ... holding a hardware key now (PKU) */
	int pinned;		/* ... PMG_DOMAIN_PINNED or kept (below) */
	int keys_held;		/* hardware keys pmguard holds (keyed
				   domains and reserved keys) */
	int keys_max;		/* PMGUARD_KEYS: the most it takes */
	bool evict;		/* eviction possible (PKU, membarrier(2)) */
	uint64_t assigned;	/* keys given to a virtual domain */
	uint64_t evictions;	/* domains that lost their key to another */
	uint64_t evict_busy;	/* victims passed over: a window, a single
				   step or a fault handler on their key */
	uint64_t paged_windows;	/* windows on a virtual domain that got
				   no key: process-wide page protection */
	uint64_t raced;		/* inline opens that met an eviction */
	uint64_t kept;		/* domains kept on their key for good: a
				   relaxed-mode or callback grant left a
				   thread with rights on it */
};

/**
 * pmg_key_stats_get() - fill @st; @size is sizeof(*@st) ("Sizes").
 * Returns 0 or -EINVAL (@st NULL, @size below 72 or over 65536, or
 * pmg_init() failed).  Not AS-safe (the library lock).
 */
int pmg_key_stats_get(struct pmg_key_stats *st, size_t size);

/** Zero the counters and the audit site table.  Not AS-safe. */
void pmg_stats_reset(void);

/**
 * pmg_audit_dump() - write the audit site table (instruction, count,
 * domain) to @fd.  Returns the number of sites.  AS-safe.
 */
int pmg_audit_dump(int fd);

/* ------------------------------------------------------------------ info */

/*
 * Sizes.  The calls that fill a struct (pmg_get_info(), pmg_stats_get(),
 * pmg_key_stats_get(), pmg_pool_get_info(), pmg_persist_get_info()) take
 * the struct's size as the caller knows it: pass sizeof(*ptr).  A later
 * version appends fields (never moves one); the library fills the
 * first min(@size, its own size) bytes and zeroes the rest of @size, so a
 * program built against an older header gets the fields it knows and one
 * built against a newer header finds zeros in fields this library does
 * not have.  A size below the struct's first version or over 65536 is
 * -EINVAL.  Binaries linked against 0.1, which passed no size, keep
 * working (their calls bind to the 0.1 symbols).  struct pmg_fault_info,
 * which the library hands to callbacks, also only grows at its end.
 */

/* The sizes below are part of the ABI (x86-64): a change fails here and in
 * scripts/abi-check. */
#ifdef __cplusplus
#define _PMG_ASSERT(e, m) static_assert(e, m)
#else
#define _PMG_ASSERT(e, m) _Static_assert(e, m)
#endif
#if defined(__x86_64__)
_PMG_ASSERT(sizeof(struct pmg_domain) == 64 &&
		    offsetof(struct pmg_domain, _key) == 0 &&
		    offsetof(struct pmg_domain, _mask) == 4 &&
		    offsetof(struct pmg_domain, _rd_bits) == 8 &&
		    offsetof(struct pmg_domain, _dflt_bits) == 12 &&
		    offsetof(struct pmg_domain, _self) == 16 &&
		    offsetof(struct pmg_domain, _ref) == 28 &&
		    offsetof(struct pmg_domain, _reserved) == 32,
	    "struct pmg_domain: the inline window code reads these offsets");
_PMG_ASSERT(sizeof(struct _pmg_ws) == 64 && offsetof(struct _pmg_ws, r) == 32,
	    "struct _pmg_ws: one cache line, read inline");
_PMG_ASSERT(sizeof(struct pmg_fault_info) == 56,
	    "struct pmg_fault_info grows only at its end");
_PMG_ASSERT(sizeof(struct pmg_stats) >= 128 &&
		    sizeof(struct pmg_key_stats) >= 72,
	    "stats structs: fields are appended, never removed");
#endif

/** What pmg_get_info() reports (0.1: 32 bytes; see "Sizes"). */
struct pmg_info {
	int backend;			/* enum pmg_backend */
	bool cpu_pku, cpu_ospke, cpu_pks, cpu_clwb, cpu_clflushopt;
	bool kernel_pkeys;		/* pkey_alloc() works */
	int keys_total;			/* keys usable besides key 0 */
	int keys_used;			/* held by pmguard domains */
	int keys_free;			/* could still be allocated */
	int fault_mode;
	unsigned xsave_pkru_offset;	/* 0 when not known */
};

/**
 * pmg_get_info() - fill @info; @size is sizeof(*@info) ("Sizes").
 * Initialises the library if needed (the backend shown is the one in
 * use).  Returns 0, -EINVAL (@info NULL, @size below 32 or over 65536),
 * or pmg_init()'s error (then @info still holds the CPU facts, backend
 * "none").  Not AS-safe.
 */
int pmg_get_info(struct pmg_info *info, size_t size);

/* ----------------------------------------------------------------- pools */
/* Persistent-memory pools and persistence primitives: see docs/pool.md. */

/*
 * A pool is a file (on fs-DAX or any filesystem) or a device-dax character
 * device (/dev/daxX.Y) mapped shared, with MAP_SHARED_VALIDATE|MAP_SYNC
 * where the filesystem supports it.  By default every pool is protected by
 * one shared domain named "pmem" (write-disabled outside windows; V8's
 * single PMEM key); PMG_POOL_NOACCESS pools share a second one,
 * "pmem-noaccess".  The persistence calls below (pmg_memcpy_persist() and
 * family) open and close the write window themselves: callers need no
 * guards.  Plain stores through a pool address need a window:
 * pmg_dax_mk_readwrite() / pmg_dax_mk_noaccess() or PMG_WRITE_SCOPE(
 * pmg_pool_domain(pool)).  docs/pool.md maps every libpmem call to ours.
 */

/* Pool flags (pmg_pool_config_set_flags()). */
#define PMG_POOL_NOACCESS	(1u << 0)	/* no reads outside windows */
#define PMG_POOL_UNPROTECTED	(1u << 1)	/* no domain: plain mapping */
#define PMG_POOL_OVERWRITE	(1u << 2)	/* create: replace an existing
						   file (atomically) */

struct pmg_pool;		/* opaque */
struct pmg_pool_config;		/* opaque */

/**
 * pmg_pool_config_new() - a pool configuration with defaults: size 0,
 * offset 0, flags 0, mode 0600, the shared "pmem" domain.
 * Returns 0, -EINVAL (@cfgp NULL), -ENOMEM.  Not AS-safe.
 */
int pmg_pool_config_new(struct pmg_pool_config **cfgp);

/** Free a configuration; NULL-safe, clears *cfgp.  Returns 0. */
int pmg_pool_config_delete(struct pmg_pool_config **cfgp);

/**
 * pmg_pool_config_set_size() - pool size in bytes.
 * Create: the size of the new file (required, > 0).  Open: 0 maps the
 * whole file (or device) from the offset; > 0 maps exactly that much and
 * fails with -ERANGE if the file is smaller.  Returns 0, -EINVAL (NULL
 * @cfg, or a size that does not fit in off_t).
 */
int pmg_pool_config_set_size(struct pmg_pool_config *cfg, size_t size);

/**
 * pmg_pool_config_set_offset() - where in the file the pool starts: a
 * multiple of the page size (files) or of the device alignment (device
 * dax; checked at open time).  Returns 0, -EINVAL (NULL @cfg, not a
 * multiple of the page size, too big for off_t).
 */
int pmg_pool_config_set_offset(struct pmg_pool_config *cfg, size_t offset);

/**
 * pmg_pool_config_set_flags() - PMG_POOL_NOACCESS, PMG_POOL_UNPROTECTED,
 * PMG_POOL_OVERWRITE.  Returns 0, -EINVAL (NULL @cfg, unknown flags,
 * NOACCESS together with UNPROTECTED).
 */
int pmg_pool_config_set_flags(struct pmg_pool_config *cfg, unsigned flags);

/**
 * pmg_pool_config_set_mode() - permission bits of a created file (default
 * 0600; the umask applies).  Returns 0, -EINVAL (NULL @cfg, bits outside
 * 07777).
 */
int pmg_pool_config_set_mode(struct pmg_pool_config *cfg, mode_t mode);

/**
 * pmg_pool_config_set_domain() - protect the pool with @d (the caller's
 * domain, which must outlive the pool) instead of the shared one; NULL
 * restores the default.  Returns 0, -EINVAL (NULL @cfg).
 */
int pmg_pool_config_set_domain(struct pmg_pool_config *cfg,
			       struct pmg_domain *d);

/**
 * pmg_pool_create() - create a pool file of the configured size and map it.
 * @pp:   where the handle goes (set to NULL on failure)
 * @path: the file to create; a device-dax path is opened as it is
 * @cfg:  size required; flags, mode, domain optional
 *
 * The file is built unnamed (O_TMPFILE) in @path's directory, its blocks
 * allocated (fallocate), and linked into place only when mapped and
 * protected: a failure, or a kill, leaves no file behind.  Where the
 * filesystem has no O_TMPFILE it is built under a temporary name
 * ".NAME.pmg-PID-N" and renamed; such names left by creators that no
 * longer run (and hold no lock on them) are removed by the next create in
 * the directory.  An existing @path is never touched unless
 * PMG_POOL_OVERWRITE is set (then it is replaced atomically, and -EBUSY if
 * it is open in a process).  The new pool is locked as pmg_pool_open()'s
 * are.  Reads the
 * PMGUARD_* persistence variables (see pmg_persist_get_info()).
 * Returns 0, or -EINVAL (NULL argument, size 0, bad environment variable),
 * -EEXIST (@path exists; a device-dax path too, without
 * PMG_POOL_OVERWRITE), -EBUSY (replacing a pool that is open), -EISDIR (@path is a directory), -ENOSPC / -EFBIG /
 * -EDQUOT (no room: nothing is left behind), -EACCES / -EROFS / -ENOENT
 * (from the filesystem), -ENODEV (a device that is not device dax),
 * -ERANGE, -ENOMEM, -EMFILE (too many pools), or what pmg_protect()
 * returned (-ENOSPC: no protection key left).  Not AS-safe.
 */
int pmg_pool_create(struct pmg_pool **pp, const char *path,
		    const struct pmg_pool_config *cfg);

/**
 * pmg_pool_open() - map an existing pool file or device-dax device.
 * @cfg may be NULL (whole file, shared domain).  Never creates, truncates
 * or extends anything.  A pool is open in one process at a time: open
 * takes an exclusive flock() on the file, held until pmg_pool_close() (a
 * fork child shares it while it keeps the inherited descriptor; exec
 * closes it).  Returns 0, or -EBUSY (the pool is open, in this process or
 * another: pmg_errormsg() names the holder's pid), -EINVAL (NULL argument,
 * empty file,
 * offset not aligned to the device-dax alignment, bad environment
 * variable), -ENOENT, -EACCES (not writable: pools are mapped read-write),
 * -EISDIR, -ERANGE (offset past the end, or the file is smaller than the
 * configured size), -ENODEV (not a regular file or device dax), -ENOMEM,
 * -EMFILE, or what pmg_protect() returned.  Not AS-safe.
 */
int pmg_pool_open(struct pmg_pool **pp, const char *path,
		  const struct pmg_pool_config *cfg);

/**
 * pmg_pool_close() - unprotect, unmap and close a pool; NULL-safe, clears
 * *pp.  Does not persist anything: persist before closing.  The shared
 * domain is deleted with its last pool.  A protected pool whose memory was
 * unmapped behind the library's back is closed without unmapping anything
 * (what is mapped there now is not the pool's).  Returns 0, or the first
 * error of unprotect/munmap (the pool is closed anyway).
 * Not AS-safe.
 */
int pmg_pool_close(struct pmg_pool **pp);

/** The pool's base address, or NULL for NULL.  AS-safe. */
void *pmg_pool_address(const struct pmg_pool *pool);

/** The pool's size in bytes, or 0 for NULL.  AS-safe. */
size_t pmg_pool_size(const struct pmg_pool *pool);

/**
 * pmg_pool_domain() - the domain protecting @pool, or NULL (unprotected
 * pool, NULL @pool).  Use it for windows: PMG_WRITE_SCOPE(pmg_pool_domain(
 * p)).  AS-safe.
 */
struct pmg_domain *pmg_pool_domain(const struct pmg_pool *pool);

/**
 * pmg_pool_is_pmem() - 1 if the mapping is real persistent memory by
 * pmem_is_pmem()'s rules (device dax, or a file mapped with MAP_SYNC),
 * overridden by PMGUARD_IS_PMEM_FORCE=0|1; 0 otherwise; -EINVAL for NULL.
 * On a non-pmem pool every flush of the persistence calls is an
 * msync(MS_SYNC).  AS-safe.
 */
int pmg_pool_is_pmem(const struct pmg_pool *pool);

/** What pmg_pool_get_info() reports. */
struct pmg_pool_info {
	void *addr;		/* base address */
	size_t size;		/* bytes */
	size_t offset;		/* of the pool in the file */
	size_t align;		/* mapping alignment (device dax: the
				   device's) */
	bool is_pmem;		/* pmg_pool_is_pmem() */
	bool map_sync;		/* MAP_SYNC mapping */
	bool devdax;		/* a device-dax device */
	bool guarded;		/* protected by a domain */
	bool noaccess;		/* ... that is access-disabled */
	bool aliased;		/* the persistence calls write it through
				   an alias, opening no window (mprotect
				   backend; PMGUARD_POOL_ALIAS) */
};

/**
 * pmg_pool_get_info() - fill @info for @pool; @size is sizeof(*@info)
 * ("Sizes"; 0.1: 40 bytes).  Returns 0, -EINVAL (NULL argument, @size
 * below 40 or over 65536).  AS-safe.
 */
int pmg_pool_get_info(const struct pmg_pool *pool, struct pmg_pool_info *info,
		      size_t size);

/* ------------------------------------------------ direct access (dax) */

/**
 * pmg_dax_direct_access() - the dax_direct_access() analog: the address of
 * [@offset, @offset+@len) of @pool in *@addr.  Access through it must be
 * guarded by pmg_dax_mk_readwrite()/pmg_dax_mk_noaccess() (or a window on
 * pmg_pool_domain()); merely computing or passing it on needs no guard.
 * Returns the number of bytes accessible from *@addr to the pool's end
 * (>= @len), or -EINVAL (NULL argument, @len 0), -ERANGE (the range
 * overflows or passes the end of the pool).  AS-safe.
 */
ssize_t pmg_dax_direct_access(const struct pmg_pool *pool, size_t offset,
			      size_t len, void **addr);

/**
 * pmg_dax_mk_readwrite() - the dax_mk_readwrite() analog: open a write
 * window on @pool's domain (this thread on PKU; process-wide on mprotect).
 * Pair with pmg_dax_mk_noaccess().  Needed around direct stores and loads
 * (loads only for PMG_POOL_NOACCESS pools), not around the pmg_mem*()
 * calls.  No-op for unprotected pools.  Returns 0, -EINVAL, -EOVERFLOW.
 * AS-safe on PKU.
 */
int pmg_dax_mk_readwrite(const struct pmg_pool *pool);

/**
 * pmg_dax_mk_noaccess() - the dax_mk_noaccess() analog: close the window
 * opened by pmg_dax_mk_readwrite().  Returns 0, -EINVAL, -EPERM
 * (unbalanced: reported, nothing changes).  AS-safe on PKU.
 */
int pmg_dax_mk_noaccess(const struct pmg_pool *pool);

/**
 * pmg_dax_map_protected() - the dax_map_protected() analog: 1 if @pool's
 * mapping is protected, so that a user wanting a permanent writable
 * mapping (V8's dm-writecache case) must map the file itself; 0 if
 * not; -EINVAL for NULL.  AS-safe.
 */
int pmg_dax_map_protected(const struct pmg_pool *pool);

/* ---------------------------------------- persistence (libpmem analogs) */

/* Flags of pmg_memcpy()/pmg_memmove()/pmg_memset(): libpmem's values. */
#define PMG_F_MEM_NODRAIN	(1u << 0)	/* skip the final drain */
#define PMG_F_MEM_NONTEMPORAL	(1u << 1)	/* hint: non-temporal stores */
#define PMG_F_MEM_TEMPORAL	(1u << 2)	/* hint: temporal + flush */
#define PMG_F_MEM_WC		(1u << 3)	/* hint: write-combining */
#define PMG_F_MEM_WB		(1u << 4)	/* hint: write-back */
#define PMG_F_MEM_NOFLUSH	(1u << 5)	/* no flush (implies NODRAIN) */
#define PMG_F_MEM_VALID_FLAGS	0x3fu

/**
 * pmg_flush() - pmem_flush(): write back the cache lines of [@addr,
 * @addr+@len) with the instruction picked at start-up (CLWB > CLFLUSHOPT >
 * CLFLUSH; none with eADR).  On a non-pmem pool it is msync(MS_SYNC).
 * Opens a read window itself on an access-disabled domain.  A range that
 * wraps, starts in the NULL page or passes the usable end of a pool is
 * not flushed (see pmg_persist()).  Other memory is not checked: as with
 * pmem_flush(), flushing unmapped memory kills the process (SIGSEGV).
 * AS-safe on
 * PKU with pmem (no lock, no allocation) once the persistence layer has
 * initialised (the first persistence call in the process reads the
 * environment and sysfs; call pmg_persist_get_info() early to do it).
 */
void pmg_flush(const void *addr, size_t len);

/** pmg_drain() - pmem_drain(): wait for flushes (SFENCE).  AS-safe. */
void pmg_drain(void);

/**
 * pmg_persist() - pmem_persist(): pmg_flush() + pmg_drain().  Unlike
 * pmem_persist() it returns a value: 0, -EINVAL (the range wraps, or
 * starts in the NULL page), -ERANGE (it touches an open pool's mapping
 * but does not lie within the pool's bytes: the tail of its last page
 * past its size, where stores are lost), or on a non-pmem pool the
 * negative errno of msync() (-EIO).  Memory outside pools is flushed with
 * CPU instructions and not checked: as with pmem_persist(), unmapped
 * memory there kills the process with SIGSEGV.  Not AS-safe on non-pmem
 * pools.
 */
int pmg_persist(const void *addr, size_t len);

/**
 * pmg_msync() - pmem_msync(): msync(MS_SYNC) of the pages spanning
 * [@addr, @addr+@len).  Returns 0, -EINVAL (wraps, NULL page), -ERANGE
 * (outside a pool's bytes, as pmg_persist()), or msync()'s negative errno
 * (-ENOMEM: not mapped).  libpmem returns -1 and errno.  Not AS-safe.
 */
int pmg_msync(const void *addr, size_t len);

/**
 * pmg_is_pmem() - pmem_is_pmem(): 1 if [@addr, @addr+@len) lies in one
 * pool that pmg_pool_is_pmem() calls pmem, or if PMGUARD_IS_PMEM_FORCE=1;
 * 0 otherwise (always with PMGUARD_IS_PMEM_FORCE=0).  AS-safe after the
 * first persistence call (which reads the environment; see pmg_flush()).
 */
int pmg_is_pmem(const void *addr, size_t len);

/**
 * pmg_has_auto_flush() - pmem_has_auto_flush(): 1 if every NVDIMM region
 * in /sys/bus/nd/devices has persistence_domain "cpu_cache" (eADR: no
 * flush needed), 0 if one does not or there are none, a negative errno if
 * sysfs could not be read.  Not AS-safe.
 */
int pmg_has_auto_flush(void);

/*
 * The copy family: pmem_memcpy()/... semantics.  Each returns @dest, opens
 * the write window on the destination's domain itself (and a read window
 * on an access-disabled source domain), and works on unprotected memory
 * too.  Above the PMGUARD_MOVNT_THRESHOLD (default 256 bytes) it uses
 * non-temporal stores (AVX-512F, AVX2 or SSE2, by CPUID) unless a flag
 * says otherwise.  On a non-pmem pool the flush is msync(MS_SYNC).
 * Differences from libpmem: unknown @flags, or a NULL pointer with @len >
 * 0, or a range that wraps or starts in the NULL page, copy nothing and
 * return NULL with errno EINVAL; a destination that touches an open
 * pool's mapping but does not lie within its bytes (past its size) copies
 * nothing and returns NULL with errno ERANGE; a window or msync
 * failure returns NULL with errno set (the data may have been written).
 * pmg_errormsg() says what failed.  AS-safe on PKU with pmem after the
 * first persistence call (see pmg_flush()); the per-thread lookup cache
 * they use is itself safe against signal handlers.
 */
void *pmg_memmove(void *dest, const void *src, size_t len, unsigned flags);
void *pmg_memcpy(void *dest, const void *src, size_t len, unsigned flags);
void *pmg_memset(void *dest, int c, size_t len, unsigned flags);
/* flags 0: copy, flush, drain */
void *pmg_memmove_persist(void *dest, const void *src, size_t len);
void *pmg_memcpy_persist(void *dest, const void *src, size_t len);
void *pmg_memset_persist(void *dest, int c, size_t len);
/* PMG_F_MEM_NODRAIN: copy, flush; call pmg_drain() later */
void *pmg_memmove_nodrain(void *dest, const void *src, size_t len);
void *pmg_memcpy_nodrain(void *dest, const void *src, size_t len);
void *pmg_memset_nodrain(void *dest, int c, size_t len);

/** What pmg_persist_get_info() reports. */
struct pmg_persist_info {
	const char *flush;		/* "clwb", "clflushopt", "clflush",
					   "none" (eADR or PMGUARD_NO_FLUSH=1) */
	const char *movnt;		/* "avx512f", "avx2", "sse2", "none" */
	size_t movnt_threshold;		/* bytes */
	int auto_flush;			/* pmg_has_auto_flush() */
	int is_pmem_force;		/* PMGUARD_IS_PMEM_FORCE: -1 unset */
};

/**
 * pmg_persist_get_info() - the paths picked at start-up.  They come from
 * CPUID and, PMDK-style, from PMGUARD_NO_CLWB, PMGUARD_NO_CLFLUSHOPT,
 * PMGUARD_NO_FLUSH, PMGUARD_NO_MOVNT, PMGUARD_NO_AVX512F, PMGUARD_NO_AVX2
 * (each 0|1), PMGUARD_MOVNT_THRESHOLD (bytes) and PMGUARD_IS_PMEM_FORCE
 * (0|1), read once per process.  A bad value is reported on stderr once
 * and ignored (the default applies); this call (and pool create/open)
 * then fails with -EINVAL, @pi still filled, pmg_errormsg() naming the
 * variable and value.  @size is sizeof(*@pi) ("Sizes" above struct
 * pmg_info; 0.1: 32 bytes): below 32 or over 65536 is -EINVAL, @pi
 * untouched.  Returns 0, -EINVAL.  Not AS-safe.
 */
int pmg_persist_get_info(struct pmg_persist_info *pi, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* PMGUARD_H */
