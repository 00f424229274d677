// SPDX-License-Identifier: MIT
/*
 * The fault path: SIGSEGV for protection-key faults (PKU: SEGV_PKUERR with
 * si_pkey) or faults inside protected ranges (mprotect: SEGV_ACCERR), and
 * SIGTRAP for audit mode's re-arm after a single step.  Everything here is
 * async-signal-safe: no locks, no allocation, output through write(2).
 *
 * The decision is the core's (pmg_core_fault_decide()); this file only
 * finds the key, the access and the saved register, and carries the
 * decision out on the signal frame:
 *  - the saved PKRU in the frame's XSAVE area is what sigreturn loads, so
 *    editing it grants or revokes rights for the interrupted context only
 *    (the seeds' pks_update_exception());
 *  - audit sets the trap flag so the faulting instruction runs once with
 *    access, then the SIGTRAP handler puts the saved rights back.
 * Signals that are not ours go to the handler installed before us, or get
 * the default action, unchanged.
 */
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "internal.h"

#ifndef SEGV_PKUERR
#define SEGV_PKUERR 4
#endif
#ifndef TRAP_TRACE
#define TRAP_TRACE 2
#endif
#define X86_EFLAGS_TF 0x100
#define PF_WRITE 0x2

struct pmg_stats _pmg_stats;

static struct sigaction old_segv, old_trap;

/* Audit: what the SIGTRAP after the single step must put back. */
#define PMG_PENDING_PAGES 4
static __thread struct {
	bool active;
	bool had_tf;
	uint32_t mask, bits;		/* PKU: register bits to restore */
	unsigned npages;		/* mprotect: pages to re-protect */
	uintptr_t page[PMG_PENDING_PAGES];
	int key[PMG_PENDING_PAGES];
} pending;

/* Audit site table: faulting instruction -> count, lock-free. */
#define PMG_SITES 1024
static struct {
	uintptr_t ip;
	uint64_t count;
	int key;
} sites[PMG_SITES];

/* ---- AS-safe formatting ---- */

void _pmg_bs(struct _pmg_buf *b, const char *s)
{
	while (*s && b->n < sizeof(b->b))
		b->b[b->n++] = *s++;
}

void _pmg_bx(struct _pmg_buf *b, uint64_t v)
{
	char t[24];

	pmg_utoa(v, 16, t, sizeof(t));
	_pmg_bs(b, "0x");
	_pmg_bs(b, t);
}

void _pmg_bd(struct _pmg_buf *b, int64_t v)
{
	char t[24];

	if (v < 0) {
		_pmg_bs(b, "-");
		v = -v;
	}
	pmg_utoa((uint64_t)v, 10, t, sizeof(t));
	_pmg_bs(b, t);
}

void _pmg_bflush(struct _pmg_buf *b, int fd)
{
	size_t off = 0;

	while (fd >= 0 && off < b->n) {
		ssize_t w = write(fd, b->b + off, b->n - off);

		if (w <= 0)
			break;
		off += (size_t)w;
	}
	b->n = 0;
}

static int report_fd(void)
{
	return __atomic_load_n(&_pmg.report_fd, __ATOMIC_RELAXED);
}

static void backtrace_to(int fd)
{
	void *bt[32];
	int n;

	if (fd < 0)
		return;
	n = backtrace(bt, 32);
	backtrace_symbols_fd(bt, n, fd);
}

static const char *dom_name(int key)
{
	return _pmg.core.key[key].name;
}

static void report_fault(const struct pmg_fault *f, pid_t tid,
			 const char *what, bool trace)
{
	int fd = report_fd();
	struct _pmg_buf b = { .n = 0 };

	if (fd < 0)
		return;
	_pmg_bs(&b, "pmguard: ");
	_pmg_bs(&b, what);
	_pmg_bs(&b, f->acc == PMG_ACC_WRITE ? ": stray write to "
					     : ": stray read of ");
	_pmg_bx(&b, f->addr);
	_pmg_bs(&b, " in domain '");
	_pmg_bs(&b, dom_name((int)f->key));
	_pmg_bs(&b, "' (key ");
	_pmg_bd(&b, f->key);
	_pmg_bs(&b, ") by thread ");
	_pmg_bd(&b, tid);
	_pmg_bs(&b, " at ip ");
	_pmg_bx(&b, f->ip);
	_pmg_bs(&b, _pmg.prim->id == PMG_BACKEND_PKU ? ", PKRU "
						     : ", emulated PKRU ");
	_pmg_bx(&b, f->saved_pkval);
	_pmg_bs(&b, "\n");
	_pmg_bflush(&b, fd);
	if (trace) {
		_pmg_bs(&b, "pmguard: backtrace (handler frames first):\n");
		_pmg_bflush(&b, fd);
		backtrace_to(fd);
	}
}

void _pmg_report_unbalanced(struct pmg_domain *d, int acc, void *caller)
{
	struct _pmg_buf b = { .n = 0 };

	_pmg_bs(&b, "pmguard: unbalanced ");
	_pmg_bs(&b, acc ? "write" : "read");
	_pmg_bs(&b, " window close on domain '");
	_pmg_bs(&b, dom_name(d->_key));
	_pmg_bs(&b, "' by thread ");
	_pmg_bd(&b, syscall(SYS_gettid));
	_pmg_bs(&b, " from ");
	_pmg_bx(&b, (uintptr_t)caller);
	_pmg_bs(&b, ": no such window is open; nothing changed\n");
	_pmg_bflush(&b, report_fd());
	backtrace_to(report_fd());
}

void _pmg_report_dead_windows(pid_t tid, const char *name, unsigned w,
			      unsigned r)
{
	struct _pmg_buf b = { .n = 0 };

	_pmg_bs(&b, "pmguard: thread ");
	_pmg_bd(&b, tid);
	_pmg_bs(&b, " ended with ");
	_pmg_bd(&b, w);
	_pmg_bs(&b, " write and ");
	_pmg_bd(&b, r);
	_pmg_bs(&b, " read window(s) open on domain '");
	_pmg_bs(&b, name);
	_pmg_bs(&b, "': closed them\n");
	_pmg_bflush(&b, report_fd());
}

void _pmg_report_long_term(const void *addr, struct pmg_domain *d,
			   void *caller)
{
	struct _pmg_buf b = { .n = 0 };
	int fd = report_fd();

	_pmg_bs(&b, "pmguard: warning: long-term map of protected address ");
	_pmg_bx(&b, (uintptr_t)addr);
	_pmg_bs(&b, " (domain '");
	_pmg_bs(&b, dom_name(d->_key));
	_pmg_bs(&b, "') from ");
	_pmg_bx(&b, (uintptr_t)caller);
	_pmg_bs(&b, ": windows are per thread; use pmg_map_local()\n");
	_pmg_bflush(&b, fd);
	backtrace_to(fd);
}

/* Count an audit fault at @ip; returns the count (1: first at site). */
static uint64_t site_hit(uintptr_t ip, int key)
{
	unsigned i, h = (unsigned)((ip * 0x9E3779B97F4A7C15ull) >> 54);

	for (i = 0; i < PMG_SITES; i++) {
		unsigned s = (h + i) % PMG_SITES;
		uintptr_t cur = __atomic_load_n(&sites[s].ip, __ATOMIC_ACQUIRE);

		if (cur == 0) {
			uintptr_t zero = 0;

			if (__atomic_compare_exchange_n(&sites[s].ip, &zero, ip,
							false, __ATOMIC_ACQ_REL,
							__ATOMIC_ACQUIRE)) {
				sites[s].key = key;
				_PMG_STAT_INC(audit_sites);
				cur = ip;
			} else {
				cur = zero;
			}
		}
		if (cur == ip)
			return __atomic_add_fetch(&sites[s].count, 1,
						  __ATOMIC_RELAXED);
	}
	return 0;	/* table full: counted in stats only */
}

PMG_API int pmg_audit_dump(int fd)
{
	struct _pmg_buf b = { .n = 0 };
	unsigned i;
	int n = 0;

	for (i = 0; i < PMG_SITES; i++) {
		uintptr_t ip = __atomic_load_n(&sites[i].ip, __ATOMIC_ACQUIRE);

		if (!ip)
			continue;
		n++;
		_pmg_bs(&b, "pmguard: audit site ");
		_pmg_bx(&b, ip);
		_pmg_bs(&b, ": ");
		_pmg_bd(&b, (int64_t)__atomic_load_n(&sites[i].count,
						    __ATOMIC_RELAXED));
		_pmg_bs(&b, " stray access(es), domain '");
		_pmg_bs(&b, dom_name(sites[i].key));
		_pmg_bs(&b, "'\n");
		_pmg_bflush(&b, fd);
	}
	return n;
}

PMG_API int pmg_stats_get(struct pmg_stats *st)
{
	uint64_t *dst = (uint64_t *)st, *src = (uint64_t *)&_pmg_stats;
	size_t i;

	if (!st)
		return _pmg_err_s(-EINVAL, "pmg_stats_get: st is NULL");
	for (i = 0; i < sizeof(*st) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
	return 0;
}

PMG_API void pmg_stats_reset(void)
{
	uint64_t *s = (uint64_t *)&_pmg_stats;
	size_t i;

	for (i = 0; i < sizeof(_pmg_stats) / sizeof(uint64_t); i++)
		__atomic_store_n(&s[i], 0, __ATOMIC_RELAXED);
	for (i = 0; i < PMG_SITES; i++) {
		sites[i].count = 0;
		sites[i].key = 0;
		__atomic_store_n(&sites[i].ip, 0, __ATOMIC_RELEASE);
	}
}

/* ---- chaining to whoever was there before us ---- */

static void chain(int sig, siginfo_t *si, void *uc, const struct sigaction *old)
{
	struct sigaction dfl;

	if (old->sa_flags & SA_SIGINFO) {
		if (old->sa_sigaction) {
			old->sa_sigaction(sig, si, uc);
			return;
		}
	} else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
		old->sa_handler(sig);
		return;
	} else if (old->sa_handler == SIG_IGN && sig == SIGTRAP) {
		return;
	}
	/*
	 * Default action.  A fault re-executes and kills with the original
	 * siginfo; a trap or a sent signal does not recur, so raise it.
	 */
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigaction(sig, &dfl, NULL);
	if (sig != SIGSEGV || si->si_code <= 0)
		raise(sig);
}

/* The public view of a core fault, for callbacks and observers. */
void _pmg_fault_info(const struct pmg_fault *f, pid_t tid, int action,
		     struct pmg_fault_info *fi)
{
	fi->addr = (void *)f->addr;
	fi->ip = (void *)f->ip;
	fi->domain = _pmg.dom[f->key].h;
	fi->key = (int)f->key;
	fi->access = (int)f->acc;
	fi->pkru = f->saved_pkval;
	fi->tid = tid;
	fi->mode = (int)f->mode;
	fi->action = action;
	fi->si_code = f->code;
}

static void notify(const struct pmg_fault *f, pid_t tid, int action)
{
	struct _pmg_observer *o = __atomic_load_n(&_pmg.observer,
						  __ATOMIC_ACQUIRE);
	struct pmg_fault_info fi;

	if (!o)
		return;
	_pmg_fault_info(f, tid, action, &fi);
	o->fn(&fi, o->arg);
}

static void segv_handler(int sig, siginfo_t *si, void *ucv)
{
	int saved_errno = errno;
	ucontext_t *uc = ucv;
	const struct _pmg_prim *p = __atomic_load_n(&_pmg.prim,
						    __ATOMIC_ACQUIRE);
	struct pmg_fault f;
	uint32_t *reg = NULL;
	uintptr_t page = 0;
	pid_t tid;
	int key;

	if (!p)
		goto not_ours;
	f.addr = (uintptr_t)si->si_addr;
#ifdef __x86_64__
	f.ip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	f.acc = (uc->uc_mcontext.gregs[REG_ERR] & PF_WRITE) ? PMG_ACC_WRITE
							     : PMG_ACC_READ;
#else
	f.ip = 0;
	f.acc = PMG_ACC_WRITE;
#endif
	f.mode = (unsigned)pmg_get_fault_mode();
	f.code = si->si_code;
	if (p->id == PMG_BACKEND_PKU) {
		if (si->si_code != SEGV_PKUERR)
			goto not_ours;
		key = (int)si->si_pkey;
		if (key <= 0 || key >= PMG_NR_KEYS)
			goto not_ours;
		reg = p->saved_reg(uc);
		if (!reg)
			goto not_ours;
		f.saved_pkval = *reg;
		/*
		 * Sync only up to the defaults (no windows): a thread that
		 * opened a window set its register itself, so a register
		 * stricter than the defaults is an older thread or a fresh
		 * signal context, and neither holds the thread's windows.
		 */
		f.no_sync = false;
	} else {
		struct _pmg_range r;

		if (si->si_code != SEGV_ACCERR ||
		    _pmg_reg_find(f.addr, &r))
			goto not_ours;
		key = r.key;
		page = f.addr & ~(PMG_PAGE_SIZE - 1);
		/* page permissions are the process-wide rights: never stale */
		f.saved_pkval = pmg_pkval_update(0, (unsigned)key,
				_pmg_global_rights(&_pmg.dom[key]));
		f.no_sync = true;
	}
	f.key = (unsigned)key;
	pmg_core_fault_decide(&_pmg.core, &f);
	if (f.action == PMG_ACT_NOT_OURS)
		goto not_ours;

	tid = (pid_t)syscall(SYS_gettid);
	_PMG_STAT_INC(faults);
	if (f.action != PMG_ACT_SYNC)
		_PMG_STAT_INC(strays);

	switch (f.action) {
	case PMG_ACT_SYNC:
		_PMG_STAT_INC(synced);
		notify(&f, tid, PMG_FAULT_SYNCED);
		break;
	case PMG_ACT_GRANT:
		_PMG_STAT_INC(granted);
		notify(&f, tid, PMG_FAULT_GRANTED);
		break;
	case PMG_ACT_RELAX_REPORT:
		report_fault(&f, tid, "relaxed (reported once per domain, "
			     "access allowed)", true);
		/* fall through */
	case PMG_ACT_RELAX_SILENT:
		_PMG_STAT_INC(relaxed);
		notify(&f, tid, f.action == PMG_ACT_RELAX_REPORT
				    ? PMG_FAULT_RELAXED_REPORTED
				    : PMG_FAULT_RELAXED_SILENT);
		break;
	case PMG_ACT_AUDIT: {
		uint64_t n = site_hit(f.ip, key);

		report_fault(&f, tid, "audit", n == 1);
		_PMG_STAT_INC(audited);
		notify(&f, tid, PMG_FAULT_AUDITED);
#ifdef __x86_64__
		if (!pending.active) {
			pending.active = true;
			pending.had_tf = uc->uc_mcontext.gregs[REG_EFL] &
					 X86_EFLAGS_TF;
			pending.mask = 0;
			pending.bits = 0;
			pending.npages = 0;
		}
		if (reg) {
			pending.mask |= PMG_PKR_MASK(key);
			pending.bits |= f.saved_pkval & PMG_PKR_MASK(key);
		} else if (pending.npages < PMG_PENDING_PAGES) {
			pending.page[pending.npages] = page;
			pending.key[pending.npages++] = key;
		}
		uc->uc_mcontext.gregs[REG_EFL] |= X86_EFLAGS_TF;
#endif
		break;
	}
	default:
		report_fault(&f, tid, "strict (aborting)", true);
		notify(&f, tid, PMG_FAULT_STRICT_ABORT);
		abort();
	}
	/* Carry out the new rights for the interrupted context. */
	if (reg)
		*reg = f.new_pkval;
	else if (page)
		mprotect((void *)page, PMG_PAGE_SIZE,
			 _pmg_prot_of(pmg_pkval_rights(f.new_pkval, f.key)));
	errno = saved_errno;
	return;

not_ours:
	errno = saved_errno;
	chain(sig, si, ucv, &old_segv);
}

static void trap_handler(int sig, siginfo_t *si, void *ucv)
{
	int saved_errno = errno;
	ucontext_t *uc = ucv;
	unsigned i;

	if (!pending.active || si->si_code != TRAP_TRACE) {
		errno = saved_errno;
		chain(sig, si, ucv, &old_trap);
		return;
	}
	if (pending.mask) {
		uint32_t *reg = _pmg.prim->saved_reg(uc);

		if (reg)
			*reg = (*reg & ~pending.mask) | pending.bits;
	}
	for (i = 0; i < pending.npages; i++)
		mprotect((void *)pending.page[i], PMG_PAGE_SIZE,
			 _pmg_pw_prot(pending.key[i], pending.page[i]));
#ifdef __x86_64__
	if (!pending.had_tf)
		uc->uc_mcontext.gregs[REG_EFL] &= ~(greg_t)X86_EFLAGS_TF;
#endif
	pending.active = false;
	_PMG_STAT_INC(rearmed);
	errno = saved_errno;
}

int _pmg_fault_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	struct sigaction prev;

	sa.sa_sigaction = segv_handler;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	/* a retried init must not chain to itself */
	if (sigaction(SIGSEGV, &sa, &prev))
		return _pmg_err(-errno, "installing the SIGSEGV handler: %s",
				strerror(errno));
	if (prev.sa_sigaction != segv_handler)
		old_segv = prev;
	sa.sa_sigaction = trap_handler;
	if (sigaction(SIGTRAP, &sa, &prev))
		return _pmg_err(-errno, "installing the SIGTRAP handler: %s",
				strerror(errno));
	if (prev.sa_sigaction != trap_handler)
		old_trap = prev;
	return 0;
}
