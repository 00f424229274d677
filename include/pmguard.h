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
#define PMG_VERSION_MINOR 1
#define PMG_VERSION_PATCH 0
#define PMG_VERSION_STRING "0.1.0"

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
 * Reads PMGUARD_BACKEND (auto|pku|mprotect) and PMGUARD_FAULT_MODE
 * (strict|relaxed|audit), picks the backend and installs the SIGSEGV and
 * SIGTRAP handlers.  Called implicitly by pmg_domain_new().
 * Returns 0, -ENOTSUP (pku asked for but missing), -EINVAL (a bad
 * environment value; pmg_errormsg() names it).  Not AS-safe.
 */
int pmg_init(void);

/** The backend in use (enum pmg_backend).  AS-safe. */
int pmg_backend(void);

/** "pku", "mprotect" or "none".  AS-safe. */
const char *pmg_backend_name(int backend);

/**
 * pmg_errormsg() - what the last failing call in this thread objected to.
 * The string is per-thread and valid until the next call.  AS-safe.
 */
const char *pmg_errormsg(void);

/** Library version string, e.g. "0.1.0".  AS-safe. */
const char *pmg_version(void);

/* -------------------------------------------------------------- domains */

/** Domain flags. */
#define PMG_DOMAIN_NOACCESS	(1u << 0)	/* no reads outside windows */

/**
 * struct pmg_domain - a protection domain (one protection key).
 *
 * Opaque: the fields are read by the inline window code below and are not
 * part of the API.  Create with pmg_domain_new(), free with
 * pmg_domain_delete().
 */
struct pmg_domain {
	int _key;		/* protection key, 1..15 */
	uint32_t _mask;		/* the key's two register bits */
	uint32_t _rd_bits;	/* register bits with a read window open */
	uint32_t _dflt_bits;	/* register bits with no window open */
};

/**
 * pmg_domain_new() - create a domain and allocate its protection key.
 * @dp:    where the handle goes
 * @name:  1..31 printable characters, unique among live domains
 * @flags: 0 (write-disabled outside windows) or PMG_DOMAIN_NOACCESS
 *
 * The calling thread and every thread created later see the default rights
 * at once; threads that already exist pick them up on their first access.
 * Returns 0, -EINVAL (bad name or flags), -EEXIST (name in use), -ENOSPC
 * (no protection key left: the message says how many exist and who holds
 * them), -ENOTSUP (backend init failed).  Not AS-safe.
 */
int pmg_domain_new(struct pmg_domain **dp, const char *name, unsigned flags);

/**
 * pmg_domain_delete() - free a domain and its key; NULL-safe, clears *dp.
 * Returns 0, -EBUSY (ranges are still protected by it), -EINVAL.  Not
 * AS-safe.
 */
int pmg_domain_delete(struct pmg_domain **dp);

/** The protection key of @d (1..15), or -EINVAL.  AS-safe. */
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
 * wrapping), -ENOMEM (not mapped), -EEXIST (overlaps a protected range),
 * or what pkey_mprotect()/mprotect() returned.  Not AS-safe.
 */
int pmg_protect(struct pmg_domain *d, void *addr, size_t len);

/**
 * pmg_unprotect() - remove the range that starts at @addr, of length @len,
 * exactly as it was protected.  Returns 0, -EINVAL, -ENOENT (no such
 * range).  Not AS-safe.
 */
int pmg_unprotect(void *addr, size_t len);

/**
 * pmg_lookup() - the domain protecting @addr, or NULL.  O(log n).
 * If @base/@len are not NULL they receive the range.  AS-safe.
 */
struct pmg_domain *pmg_lookup(const void *addr, void **base, size_t *len);

/* --------------------------------------------------------------- windows */

/** Window kinds. */
#define PMG_READ	0	/* reads of a PMG_DOMAIN_NOACCESS domain */
#define PMG_WRITE	1	/* reads and writes */

/* private: per-thread window counts, one cache line */
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
int _pmg_ctx_open(struct pmg_domain *d, int acc, uint32_t reg);
bool _pmg_ctx_close(struct pmg_domain *d, int acc);

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
 * would not change.  The register is read, not cached: a signal handler
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
	unsigned k = (unsigned)d->_key;
	uint16_t *n = acc ? &t->w[k] : &t->r[k];
	unsigned w = t->w[k], r = t->r[k];
	uint32_t v = rd(), nv;

	if (__builtin_expect(w | r, 0)) {
		/* nested: check the register still holds our windows */
		if (__builtin_expect(*n == UINT16_MAX, 0))
			return -EOVERFLOW;
		if ((v & d->_mask) != _pmg_bits(d, w, r))
			return _pmg_ctx_open(d, acc, v);
		++*n;
		nv = (v & ~d->_mask) | _pmg_bits(d, t->w[k], t->r[k]);
	} else {
		++*n;
		nv = (v & ~d->_mask) | (acc ? 0 : d->_rd_bits);
	}
	if (nv != v)
		wr(nv);
	return 0;
}

_PMG_INLINE int _pmg_close_edge(struct pmg_domain *d, int acc,
				uint32_t (*rd)(void), void (*wr)(uint32_t))
{
	struct _pmg_ws *t = &_pmg_tls;
	unsigned k = (unsigned)d->_key;
	uint16_t *n = acc ? &t->w[k] : &t->r[k];
	uint32_t v, nv;

	if (__builtin_expect(*n == 0, 0))
		return _pmg_unbalanced(d, acc, __builtin_return_address(0));
	if (__builtin_expect(t->w[0] != 0, 0) && _pmg_ctx_close(d, acc))
		return 0;
	--*n;
	v = rd();
	if (__builtin_expect(t->w[k] | t->r[k], 0))
		nv = (v & ~d->_mask) | _pmg_bits(d, t->w[k], t->r[k]);
	else
		nv = (v & ~d->_mask) | d->_dflt_bits;
	if (nv != v)
		wr(nv);
	return 0;
}

_PMG_INLINE bool _pmg_valid(const struct pmg_domain *d, int acc)
{
	return d && (unsigned)(d->_key - 1) < 15 && (acc & ~1) == 0;
}

/**
 * pmg_open() - open a window on @d for the calling thread.
 * @acc: PMG_WRITE (read and write) or PMG_READ (read only; meaningful for
 *       PMG_DOMAIN_NOACCESS domains)
 *
 * Windows nest (up to 65535 deep per kind); each pmg_open() needs one
 * pmg_close() of the same kind.  On PKU the window is this thread's only:
 * no syscall, no lock.  On the mprotect backend it is process-wide.
 * Returns 0, -EINVAL (bad domain or kind), -EOVERFLOW (nesting too deep).
 * AS-safe on PKU; a window opened in a signal handler works there, and the
 * interrupted context's rights are restored when the handler returns.
 */
static inline int pmg_open(struct pmg_domain *d, int acc)
{
	if (__builtin_expect(!_pmg_fast || !_pmg_valid(d, acc), 0))
		return _pmg_open_slow(d, acc);
	return _pmg_open_edge(d, acc, _pmg_rdpkru, _pmg_wrpkru);
}

/**
 * pmg_close() - close a window opened by pmg_open() with the same @acc.
 * Returns 0, -EINVAL, -EPERM (no such window is open in this thread: the
 * unbalanced close is reported with its caller and nothing changes).
 * AS-safe on PKU.
 */
static inline int pmg_close(struct pmg_domain *d, int acc)
{
	if (__builtin_expect(!_pmg_fast || !_pmg_valid(d, acc), 0))
		return _pmg_close_slow(d, acc);
	return _pmg_close_edge(d, acc, _pmg_rdpkru, _pmg_wrpkru);
}

/** pmg_write_begin() / pmg_write_end(): pmg_open/close(d, PMG_WRITE). */
static inline int pmg_write_begin(struct pmg_domain *d)
{
	return pmg_open(d, PMG_WRITE);
}

static inline int pmg_write_end(struct pmg_domain *d)
{
	return pmg_close(d, PMG_WRITE);
}

/* private: scope guard for PMG_WRITE_SCOPE() */
struct _pmg_scope {
	struct pmg_domain *d;
	int rc;
};

static inline void _pmg_scope_end(struct _pmg_scope *s)
{
	if (s->rc == 0)
		(void)pmg_close(s->d, PMG_WRITE);
}

#define _PMG_CAT2(a, b) a##b
#define _PMG_CAT(a, b) _PMG_CAT2(a, b)

/**
 * PMG_WRITE_SCOPE(d) - a write window on @d until the end of the enclosing
 * block (GNU C cleanup attribute).  Declares a guard; use as a statement.
 */
#define PMG_WRITE_SCOPE(d)						\
	struct _pmg_scope _PMG_CAT(_pmg_scope_, __LINE__)		\
		__attribute__((cleanup(_pmg_scope_end))) =		\
		{ (d), pmg_open((d), PMG_WRITE) }

/**
 * PMG_WITH_WRITE(d) { ... } - run the block with a write window on @d.
 * Do not leave the block with return/goto/break: use PMG_WRITE_SCOPE()
 * where the block may exit early.
 */
#define PMG_WITH_WRITE(d)						\
	for (int _pmg_once = pmg_open((d), PMG_WRITE) == 0;		\
	     _pmg_once; _pmg_once = 0, (void)pmg_close((d), PMG_WRITE))

/**
 * pmg_map_local() - the kmap_local_page() analog: if @addr is protected,
 * open a window of kind @acc on its domain for this thread.
 * Returns 1 (a window was opened: pair with pmg_unmap_local()), 0 (@addr is
 * not protected; nothing to undo), or a negative errno.  O(log n).  AS-safe.
 */
int pmg_map_local(const void *addr, int acc);

/** pmg_unmap_local() - undo pmg_map_local(); same return values. AS-safe. */
int pmg_unmap_local(const void *addr, int acc);

/**
 * pmg_map() - the kmap() analog: a long-term mapping is not supported for
 * protected memory (windows are thread-local).  If @addr is protected, a
 * warning naming the caller is reported and 1 returned; access still needs a
 * window.  Returns 0 for unprotected addresses.  AS-safe.
 */
int pmg_map(const void *addr);

/* --------------------------------------------------------- fault handling */

/** Fault modes: what a stray access does. */
enum pmg_fault_mode {
	PMG_FAULT_STRICT = 0,	/* report, then abort (core dump) */
	PMG_FAULT_RELAXED = 1,	/* report once per domain, then allow */
	PMG_FAULT_AUDIT = 2,	/* report each, allow that one, re-arm */
};

/** What happened to a fault (struct pmg_fault_info.action). */
enum pmg_fault_action {
	PMG_FAULT_SYNCED = 1,	/* stale rights of an older thread: fixed */
	PMG_FAULT_GRANTED,	/* the domain's callback granted access */
	PMG_FAULT_RELAXED_REPORTED,
	PMG_FAULT_RELAXED_SILENT,
	PMG_FAULT_AUDITED,
	PMG_FAULT_STRICT_ABORT,
};

/** A fault on a protected address, as handed to callbacks and observers. */
struct pmg_fault_info {
	void *addr;			/* faulting address */
	void *ip;			/* faulting instruction */
	struct pmg_domain *domain;	/* domain of the address */
	int key;			/* its protection key */
	int access;			/* PMG_READ or PMG_WRITE */
	uint32_t pkru;			/* interrupted register (emulated
					   on mprotect) */
	pid_t tid;			/* faulting thread */
	int mode;			/* enum pmg_fault_mode in force */
	int action;			/* enum pmg_fault_action (observers) */
};

/**
 * pmg_fault_cb - per-domain fault callback (the seeds' pks_key_callback).
 * Called in the SIGSEGV handler for each stray access to the domain before
 * the fault mode applies.  Return true to grant the faulting thread the
 * access (the interrupted context keeps the rights until its next window
 * edge on the domain); false to let the mode decide.  Must be AS-safe.
 */
typedef bool (*pmg_fault_cb)(const struct pmg_fault_info *fi, void *arg);

/** Set or clear (@cb NULL) @d's fault callback.  0 or -EINVAL. */
int pmg_domain_set_callback(struct pmg_domain *d, pmg_fault_cb cb,
			    void *arg);

/**
 * pmg_fault_observer - called in the SIGSEGV handler for every fault the
 * library handled (stray or synced), after the decision, with
 * fi->action set; before the abort in strict mode.  Must be AS-safe.
 */
typedef void (*pmg_fault_observer)(const struct pmg_fault_info *fi,
				   void *arg);

/** Install (or clear with NULL) the process-wide observer.  Returns 0. */
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
};

/** Read the counters.  0 or -EINVAL.  AS-safe. */
int pmg_stats_get(struct pmg_stats *st);

/** Zero the counters and the audit site table.  Not AS-safe. */
void pmg_stats_reset(void);

/**
 * pmg_audit_dump() - write the audit site table (instruction, count,
 * domain) to @fd.  Returns the number of sites.  AS-safe.
 */
int pmg_audit_dump(int fd);

/* ------------------------------------------------------------------ info */

/** What pmg_get_info() reports. */
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

/** Fill @info.  0 or -EINVAL.  Not AS-safe. */
int pmg_get_info(struct pmg_info *info);

/* ----------------------------------------------------------------- pools */
/* Persistent-memory pools and persistence primitives: see docs/pool.md. */

/* (pool API goes here) */

#ifdef __cplusplus
}
#endif

#endif /* PMGUARD_H */
