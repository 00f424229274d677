/* SPDX-License-Identifier: MIT */
/* libpmguard internals: never installed. */
#ifndef PMG_INTERNAL_H
#define PMG_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "pmguard.h"
#include "policy.h"
#include "prim.h"
#include "fmt.h"
#include "arch/x86/cpuid.h"

#define PMG_API __attribute__((visibility("default")))

#define PMG_PAGE_SIZE 4096UL

/*
 * A domain slot, by the domain's number (id, 1..PMG_DOM_MAX-1; 0 is "no
 * domain" everywhere: a registry gap, a free key).  The handle users hold
 * (h) is allocated per pmg_domain_new() and never freed: a stale handle
 * still points to valid memory whose _self is NULL, and a slot reused by
 * a newer domain has another handle, so stale handles are refused instead
 * of acting on the new one.
 *
 * How a domain is kept (pmguard(7), "Virtual domains"): on PKU by its
 * hardware key while it holds one (hw 1..15: pages read-write tagged
 * with hw, windows thread-local in the register), else by page
 * protection (hw 0: pages at the rights of _pmg_process_rights(), key 0,
 * windows process-wide counts gw/gr), as every domain on the mprotect
 * backend.  hw changes only under the lock, with no window open on the
 * domain (keys.c).
 */
#define PMG_DOM_MAX PMG_DOMAINS_MAX

struct _pmg_dom {
	struct pmg_domain *h;
	int id;
	int hw;			/* PKU: the hardware key held; 0: none */
	bool live;
	bool pinned;		/* never evicted: PMG_DOMAIN_PINNED, or kept
				   (a grant left rights on its key) */
	int moving;		/* its key is being taken or given (keys.c):
				   the fault handlers retry */
	unsigned flags;
	unsigned nranges;
	/* page protection: process-wide window counts */
	unsigned gw, gr;
	uint64_t stamp;		/* keys.c: when a window was last seen */
	/* name, default rights, relaxed mode's "reported", callback */
	struct _pmg_consumer ck;
};

/* Process state.  Mutations hold .lock; the fault path only reads. */
struct _pmg_state {
	pthread_mutex_t lock;
	const struct _pmg_prim *prim;
	/* the hardware keys (PKU): default rights of the keys pmguard
	 * holds, for the register resets (threads, handlers, fork) */
	struct _pmg_keytab keytab;
	int keyown[PMG_NR_KEYS];	/* the domain holding each key */
	struct _pmg_dom dom[PMG_DOM_MAX];
	int mode;			/* enum pmg_fault_mode */
	int report_fd;
	bool mode_set, fd_set;		/* set by the API before pmg_init() */
	int keys_max;			/* PMGUARD_KEYS */
	bool inited;
};

extern struct _pmg_state _pmg;

/* The name of domain @id. */
static inline const char *_pmg_dom_name(int id)
{
	return _pmg.dom[id].ck.name;
}

/* The hardware key domain @id holds now (0: none).  AS-safe. */
static inline int _pmg_dom_hw(int id)
{
	return __atomic_load_n(&_pmg.dom[id].hw, __ATOMIC_ACQUIRE);
}
extern int _pmg_noaccess_domains;	/* live PMG_DOMAIN_NOACCESS domains */

/*
 * keys.c: hardware keys for domains (PKU).  All with the lock held but
 * the thread registration (which takes it) and the handlers' bracket.
 */
/* Give @d (holding none) a key: a free one, or one taken from the least
 * recently windowed domain with nothing open on it.  0 (d->hw set),
 * -ENOSPC (none to be had; the message says why), or another -errno. */
int _pmg_key_get(struct _pmg_dom *d, bool pinned);
/* @d is deleted: its key goes back to the kernel. */
void _pmg_key_put(struct _pmg_dom *d);
/* _pmg_tls.r[0]: the thread is registered (keys.c), may hold
 * page-protection windows (window.c: its thread-exit path takes the lock
 * only then) */
#define _PMG_TLS_REG 1u
#define _PMG_TLS_PAGED 2u
/* Make the calling thread's window counts known (PKU; takes the lock). */
int _pmg_thread_register(void);
/* The calling thread ends: forgotten (takes the lock). */
void _pmg_thread_unregister(void);
void _pmg_keys_fork_child(void); /* only the forking thread is left */
/* Some known thread holds a window on key @k (lock held). */
bool _pmg_key_in_use(int k);
/* steps.c: a single step in flight holds rights on key @key (0: any) or
 * has pages of domain @id (0: none) open.  AS-safe reads. */
bool _pmg_steps_on(int key, int id);
/* steps.c: the fault handlers, around every look at a domain's key: a
 * key does not move while one is inside (AS-safe); is one inside? */
void _pmg_keys_enter(void);
void _pmg_keys_leave(void);
bool _pmg_handlers_inside(void);
/* A grant (relaxed mode, a callback) left a thread with rights on @id's
 * key: it keeps the key for good (AS-safe). */
void _pmg_key_keep(int id);
/* The inline open lost its key to an eviction (window.c). */
extern uint64_t _pmg_keys_raced;
extern uint64_t _pmg_keys_paged; /* a window with no key to be had */
/* Reset the counters (pmg_stats_reset(), here with pmg_stats_get()). */
void _pmg_keys_stats_reset(void);

/*
 * Below init.c: the layers' halves of the entry points that start the
 * library on first use (init.c: pmg_domain_new(), pmg_pool_open(),
 * pmg_pool_create(), pmg_key_stats_get()).  Each entry point checks its
 * arguments as it always did (_pmg_*_args/checks: no start-up for a bad
 * call), starts the library, then calls its layer's function, which
 * takes a started library.  A layer never starts the library itself: it
 * would call up into init.c (docs/design.md, "Object dependencies").
 */
int _pmg_domain_args(struct pmg_domain **dp, const char *name, unsigned flags);
int _pmg_pool_checks(struct pmg_pool **pp, const char *path, const char *fn);
int _pmg_pool_open(struct pmg_pool **pp, const char *path,
		   const struct pmg_pool_config *cfg);
int _pmg_pool_create(struct pmg_pool **pp, const char *path,
		     const struct pmg_pool_config *cfg);
int _pmg_key_stats_get(struct pmg_key_stats *st);
/* mpwin.c: every range of domain @id to page protection @rights
 * (pages of persistence calls' page windows left as they are) */
int _pmg_paged_set(int id, unsigned rights);
/* state.c: the state above, the statistics, the calling thread's error
 * message */
int _pmg_err(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int _pmg_err_s(int err, const char *msg);	/* AS-safe */
/* "<fmt...>: <the current message>", overlap-safe: use this, never
 * _pmg_err(..., pmg_errormsg()) */
int _pmg_err_prefix(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
#define PMG_ERRMSG_MAX 512
void _pmg_err_save(char *buf, size_t size);
void _pmg_err_free(void); /* the thread ends */
/* keys.c: up to @n keys WD in later threads, @leave left to the kernel;
 * the library started, no thread created yet */
int _pmg_keys_reserve(unsigned n, unsigned leave);
void _pmg_err_restore(const char *buf);

/*
 * Size arguments of the info and stats calls (pmguard.h, "Sizes"): the
 * caller passes sizeof the struct it was compiled with.  @first is the
 * struct's size in the first version that had it; a size below that, or
 * above PMG_OUT_SIZE_MAX, is nonsense.  _pmg_out_check(): 0, or -EINVAL
 * with a message naming @fn and the size (@as_safe: a constant message
 * that names the bound it broke, no formatting).  _pmg_out_copy(): the
 * first min(@size, @have) bytes of @src to @dst, the rest of @size zeroed.
 */
#define PMG_OUT_SIZE_MAX 65536
/* The structs' sizes in their first version (x86-64; src/compat/). */
#define PMG_STATS_SIZE_0_1 128
#define PMG_KEY_STATS_SIZE_0_2 72
#define PMG_INFO_SIZE_0_1 32
#define PMG_POOL_INFO_SIZE_0_1 40
#define PMG_PERSIST_INFO_SIZE_0_1 32
int _pmg_out_check(const char *fn, const void *p, size_t size, size_t first,
		   bool as_safe);
void _pmg_out_copy(void *dst, size_t size, const void *src, size_t have);

uint32_t _pmg_default_rights(const struct _pmg_dom *d);

/* state.c: the _pmg_dom behind a live handle, or NULL. */
struct _pmg_dom *_pmg_dom_of(const struct pmg_domain *d);
/* domain.c: a read of @d's memory needs a window (PMG_DOMAIN_NOACCESS). */
bool _pmg_domain_noaccess(const struct pmg_domain *d);
/* domain.c: pmg_domain_new() with the handle at @storage (the caller's,
 * reused by each re-creation) instead of a new allocation. */
int _pmg_domain_new_at(struct pmg_domain **dp, const char *name,
		       unsigned flags, struct pmg_domain *storage);

/* mpwin.c / caps.c: the rights of a domain kept by page protection,
 * and their page protection */
unsigned _pmg_process_rights(const struct _pmg_dom *d);
int _pmg_prot_of(unsigned rights);
/* mpwin.c: lazy write windows (mprotect backend): a page is granted on
 * its first write fault and recorded; the last close re-protects those.
 * By domain number (@id). */
extern bool _pmg_lazy;
bool _pmg_lazy_grant(int id, uintptr_t page); /* AS-safe */
void _pmg_lazy_close(int id, bool whole_done);
void _pmg_lazy_open(int id);
/* a grant outside a lazy window: recorded for the next close (begin),
 * made read-write by the caller, recorded again if a close took the
 * record meanwhile (end, with begin's value).  AS-safe. */
unsigned long _pmg_lazy_note_begin(int id, uintptr_t page);
void _pmg_lazy_note_end(int id, uintptr_t page, unsigned long e);
void _pmg_lazy_reset(int id);
/* a write window opens on @id (lock held): its record, allocated on
 * first use.  0 or -ENOMEM. */
int _pmg_lazy_prepare(int id);
unsigned _pmg_lazy_lower_begin(void); /* AS-safe */
void _pmg_lazy_lower_end(unsigned ph); /* AS-safe */
void _pmg_lazy_fork_child(void);
/* mpwin.c: domains with a lazy write window open (0: nothing to grant
 * before a kernel access), and the grant of [@a, @a+@n) where a write
 * window is open on it (interpose.c's read family; _src: the write
 * family's source, where the domain's pages are unreadable).  AS-safe. */
extern unsigned _pmg_lazy_live;
void _pmg_lazy_pregrant(uintptr_t a, size_t n);
void _pmg_lazy_pregrant_src(uintptr_t a, size_t n);
/* mpwin.c: page windows of the persistence calls (mprotect backend) */
int _pmg_pw_open(struct pmg_domain *d, const void *addr, size_t len);
void _pmg_pw_close(int slot);
int _pmg_pw_prot(int id, uintptr_t page);
int _pmg_pw_mprotect(int id, uintptr_t base, uintptr_t end, int prot);
void _pmg_pw_fork_child(void);
/* caps.c: the program's own mprotect() rights over protected ranges,
 * which our protection never exceeds (lock held; _pmg_cap_mprotect() on
 * one page also from the fault path) */
int _pmg_cap_set(uintptr_t b, uintptr_t e, int prot);
void _pmg_cap_drop(uintptr_t b, uintptr_t e);
int _pmg_cap_mprotect(uintptr_t b, uintptr_t e, int prot);
/* the same with pkey_mprotect(2) and @key (PKU: a range changing from
 * page protection to a key or back) */
int _pmg_cap_pkey_mprotect(uintptr_t b, uintptr_t e, int prot, int key);
/* whether the program's own rights at @addr allow access @acc: a fault
 * they forbid is the program's, not pmguard's.  AS-safe. */
bool _pmg_cap_allows(uintptr_t addr, unsigned acc);
/* @prot limited to what the program's own rights at @page allow.
 * AS-safe. */
int _pmg_cap_limit(uintptr_t page, int prot);
/* interpose.c: mprotect(2) itself, never the interposer: the library's
 * own protection changes (AS-safe; -1 and errno) */
int _pmg_mprotect(void *addr, size_t len, int prot);

/*
 * registry.c: sorted tables of non-overlapping [base, end) ranges, read
 * without locks (from the fault handlers too) by the left-right scheme:
 * two copies, readers announce themselves and read the published one,
 * writers (serialised by the caller's lock) change the other copy, publish
 * it, wait for the readers of the old one to leave, then bring the old
 * one up to date.  Readers never retry and never fail: wait-free and
 * AS-safe.  Used for the protected ranges and for pooltab.c's pool table.
 */
struct _pmg_range {
	uintptr_t base, end;
	uintptr_t lim;		/* pool table: end of the usable bytes */
	int dom;		/* registry: the domain's number; pool
				   table: is pmem; quarantine: its slot */
	uintptr_t alias;	/* pool table: writable alias of base, 0: none */
	uintptr_t obase, oend;	/* registry: the range pmg_protect()
				   registered, of which this is what an
				   unmap of part of it left (unmapped.c) */
};
struct _pmg_rcopy {
	size_t n, cap;
	struct _pmg_range *r;
};
/* The tables: each names its fork-reset slot. */
enum _pmg_rtab_id {
	_PMG_RT_REGISTRY,
	_PMG_RT_POOLS,
	_PMG_RT_QUARANTINE, /* quarantine.c: closed pools' reserved addresses */
	_PMG_RT_NR
};
struct _pmg_rtab {
	enum _pmg_rtab_id id;	/* set in the table's initialiser */
	struct _pmg_rcopy c[2];
	int lr;			/* the copy readers use */
	int vi;			/* the reader count new readers join */
	unsigned long readers[2];
};
/* Writers (the caller's lock held).  Insert: 0, -EEXIST (overlaps a
 * range), -ENOMEM.  Remove the range at @base (and @end, unless 0), its
 * copy in *out if not NULL: 0 or -ENOENT. */
int _pmg_rt_insert(struct _pmg_rtab *t, const struct _pmg_range *r);
int _pmg_rt_remove(struct _pmg_rtab *t, uintptr_t base, uintptr_t end,
		   struct _pmg_range *out);
/* Replace the range [@base, @end) with the @np ranges @p (0 to 2, sorted,
 * inside it) in one publish: a reader sees the range or the pieces,
 * never neither.  0, -ENOENT, -ENOMEM. */
int _pmg_rt_split(struct _pmg_rtab *t, uintptr_t base, uintptr_t end,
		  const struct _pmg_range *p, size_t np);
/* The number of ranges (the caller's lock held). */
size_t _pmg_rt_count(const struct _pmg_rtab *t);
/* Readers: enter, use the copy (n ranges), leave with the slot.  AS-safe. */
const struct _pmg_range *_pmg_rt_enter(struct _pmg_rtab *t, size_t *n,
				       int *slot);
void _pmg_rt_leave(struct _pmg_rtab *t, int slot);
/* First index whose end > addr. */
size_t _pmg_rt_search(const struct _pmg_range *r, size_t n, uintptr_t addr);
/* With @i = _pmg_rt_search(@r, @n, @addr): true and *@out = the range
 * holding @addr, or false and *@out = the gap around it (from the end of
 * the range below to the base of the one above, lim = end, dom and alias
 * 0).  AS-safe. */
bool _pmg_rt_around(const struct _pmg_range *r, size_t n, size_t i,
		    uintptr_t addr, struct _pmg_range *out);
/*
 * Bumped (SC) by every change to any table, after the change is
 * published: read it before lookups whose answers go into a cache; the
 * answers stay true while it is unchanged.  AS-safe to read.
 */
extern unsigned long _pmg_rt_gen;	/* 64 bits: never wraps */

/* The protected ranges (dom: the domain's number). */
bool _pmg_reg_overlaps(uintptr_t base, uintptr_t end);
int _pmg_reg_insert(uintptr_t base, uintptr_t end, int id);
int _pmg_reg_remove(uintptr_t base, uintptr_t end, int *id);
/* Cut [@a, @e) out of the registered range @r: what is left on either
 * side stays registered (its domain, its origin).  The pieces left (0 to
 * 2), or -ENOENT, -ENOMEM (nothing changed).  Lock held. */
int _pmg_reg_cut(const struct _pmg_range *r, uintptr_t a, uintptr_t e);
int _pmg_reg_find(uintptr_t addr, struct _pmg_range *out);
/* the domain number of the range holding @addr and its end, 0 if none:
 * _pmg_reg_find() without copying the range (the persistence calls) */
int _pmg_reg_dom_at(uintptr_t addr, uintptr_t *end);
/* The range holding @addr, or the gap around it (dom 0).  AS-safe. */
void _pmg_reg_interval(uintptr_t addr, struct _pmg_range *out);
/* The first range overlapping [base, end): 0 and *out, or -ENOENT.
 * AS-safe. */
int _pmg_reg_first_overlap(uintptr_t base, uintptr_t end,
			   struct _pmg_range *out);
/* Call fn for each range of domain @id (lock held by the caller). */
int _pmg_reg_each(int id, int (*fn)(const struct _pmg_range *, void *),
		  void *arg);

/* unmapped.c: ranges whose memory went away (munmap, mremap, MAP_FIXED);
 * all with _pmg.lock held. */
void _pmg_range_drop(const struct _pmg_range *r, uintptr_t a, size_t n,
		     const char *what);
void _pmg_ranges_drop(uintptr_t a, size_t n, const char *what);
void _pmg_range_drop_unmapped(const struct _pmg_range *r);
/* pmg_unprotect(@base, @end - @base) of a range unmaps split (lock
 * held): its pieces given back; true if it had any (*rc: 0 or -errno). */
bool _pmg_pieces_unprotect(uintptr_t base, uintptr_t end, int *rc);
/* [@a, @a+@n) of the protected ranges given back (untagged) before the
 * caller unmaps it, the rest of each range kept (libpmguard-run.so's
 * pmem_unmap() of part of a mapping).  Takes the lock.  The ranges @d
 * has left, or -errno. */
int _pmg_unprotect_part(uintptr_t a, size_t n, const struct pmg_domain *d);
bool _pmg_all_mapped(uintptr_t base, uintptr_t end);
bool _pmg_gone_take(uintptr_t base, uintptr_t end);
void _pmg_gone_forget(uintptr_t base, uintptr_t end);

/* fault.c */
int _pmg_fault_install(void);
/* The program's actions for pmguard's signals (sigown.c): pmguard's
 * handler installed and kept; the recorded action read (and reset if
 * one-shot) for a signal that is not pmguard's; the default action from
 * now on.  The last two are async-signal-safe. */
struct sigaction;
int _pmg_sig_take(int sig, const struct sigaction *ours);
void _pmg_sig_deliver(int sig, struct sigaction *out);
void _pmg_sig_default(int sig);
/* hooks.c: a new domain in slot @id starts without the old one's
 * callback (lock held) */
void _pmg_fault_cb_clear(int id);

/* report.c: @b's text (fmt.h) written to @fd as a report (syslog: one
 * message per line), then emptied (n back to 0).  AS-safe. */
void _pmg_buf_flush(struct _pmg_buf *b, int fd);
/* report.c: reports on the report fd (-1: none); all AS-safe.
 * _pmg_report_fd() returns the fd only while it is still the file it was
 * set to (fstat identity), else -1 (or the report path opened again). */
int _pmg_report_fd(void);
int _pmg_report_fd_set(int fd); /* records its identity; old fd */
int _pmg_report_open(const char *path); /* open, set; fd or -errno;
					* "syslog:SOCKET": to a syslog socket */
void _pmg_report_write(int fd, const char *s, size_t n); /* as a report */
void _pmg_backtrace_to(int fd);
/* A fault report's backtrace: its header line through @b (the caller's
 * buffer: the handlers' stack budget counts one), then the frames. */
void _pmg_backtrace_handler(struct _pmg_buf *b, int fd);
void _pmg_report_fault(const struct pmg_fault *f, pid_t tid,
		       const char *what, bool trace);
void _pmg_report_unbalanced(struct pmg_domain *d, int acc, void *caller);
void _pmg_report_long_term(const void *addr, struct pmg_domain *d,
			   void *caller);
void _pmg_report_dead_windows(pid_t tid, const char *name, unsigned w,
			      unsigned r);
void _pmg_report_range_gone(const char *what, uintptr_t a, size_t n,
			    const struct _pmg_range *r, const char *fate);
/* Count an audit fault at @ip: the site's count (1: first), 0 if the
 * site table is full. */
uint64_t _pmg_audit_site_hit(uintptr_t ip, int id);
void _pmg_audit_sites_reset(void); /* the table emptied */
extern struct pmg_stats _pmg_stats; /* state.c */
#define _PMG_STAT_INC(f) __atomic_add_fetch(&_pmg_stats.f, 1, __ATOMIC_RELAXED)

/* pooltab.c: the pool lock is held across fork() (thread.c) */
void _pmg_pool_fork_prepare(void);
void _pmg_pool_fork_release(void);
/* pooltab.c: the open pools on @d if it is the pool layer's shared domain
 * (pmg_domain_delete() refuses it), else 0 */
unsigned _pmg_pool_domain_refs(const struct pmg_domain *d);
/* quarantine.c: a SIGSEGV (SEGV_ACCERR) at a closed pool's quarantined
 * address is reported, naming the pool; strict mode aborts, other modes
 * return (the caller chains).  AS-safe. */
void _pmg_pool_quarantine_fault(int sig, int si_code, uintptr_t addr,
				const void *uc);
/* quarantine.c: the program unmapped, moved or replaced [a, a+n)
 * (interpose.c): closed pools' reservations there are no longer ours */
void _pmg_pool_quarantine_forget(uintptr_t a, size_t n);

/* thread.c */
int _pmg_thread_hooks_install(void);	/* once per process; lock held */
/* state.c: run thread.c's thread_end() (_pmg_release_windows(), the
 * message freed) when the calling thread ends; thread.c's key, created
 * once, and whether the calling thread has its value set */
void _pmg_thread_arm(void);
extern pthread_key_t _pmg_end_key;
extern bool _pmg_end_key_ok;
extern __thread bool _pmg_end_armed __attribute__((tls_model("initial-exec")));

/* window.c: close the calling thread's windows as it ends; report them */
void _pmg_release_windows(void);
/* window.c: the program forked (lock held): the child's windows are its
 * copies of the forking thread's; page-protection ones closed */
void _pmg_windows_fork_child(void);
/* steps.c: no step in flight, no handler inside, in the child */
void _pmg_fault_fork_child(void);

#endif /* PMG_INTERNAL_H */
