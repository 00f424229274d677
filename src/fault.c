// SPDX-License-Identifier: MIT
/*
 * The signal handlers: SIGSEGV for protection-key faults (PKU:
 * SEGV_PKUERR with si_pkey) or faults inside protected ranges (mprotect:
 * SEGV_ACCERR), SIGTRAP for the re-arm after a single step (audit,
 * contain), SIGBUS to end a step the program's handler may leave; and
 * the chaining of every signal that is not ours to the program's action
 * (installed before us, or set after us: sigown.c), unchanged.  The handlers and what
 * they call are async-signal-safe: no locks, no allocation, output
 * through write(2) (report.c).  _pmg_fault_install() is not: it calls
 * sigaction().  The program's own actions for these three signals, set
 * before or after pmguard's, are kept in sigown.c.
 *
 * The decision is the policy's (_pmg_fault_decide(), policy.c); this file
 * only finds the domain, the key, the access and the saved register, and
 * carries the decision out on the signal frame:
 *  - the saved PKRU in the frame's XSAVE area is what sigreturn loads, so
 *    editing it grants or revokes rights for the interrupted context only
 *    (V8's pks_update_exception());
 *  - audit sets the trap flag so the faulting instruction runs once with
 *    access, then the SIGTRAP handler puts the saved rights back;
 *  - contain (contain.c: _pmg_contain_begin/_pmg_contain_end) decodes the
 *    instruction and runs it once against a per-thread scratch copy of
 *    what it writes (its base register moved), or with access and the
 *    protected bytes saved before and put back after; same trap flag.
 * Around them, in files below this one: the step records and the
 * handlers' bracket (steps.c), what steers the handlers from the program
 * (hooks.c: callbacks, observer, fault mode, report fd), the backend's
 * register (prim.h).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "contain.h"
#include "hooks.h"
#include "internal.h"
#include "sites.h"
#include "steps.h"

#ifndef SEGV_PKUERR
#define SEGV_PKUERR 4
#endif
#ifndef TRAP_BRKPT
#define TRAP_BRKPT 1
#endif
#ifndef TRAP_TRACE
#define TRAP_TRACE 2
#endif

/* The handlers' name for the thread's step record (held: steps.c). */
#define pending (*_pmg_cur_step)

/* ---- chaining to whoever was there before us ---- */

/*
 * Nested signals.  pmguard's handlers run with every asynchronous signal
 * blocked (async_set, the handlers' sa_mask), and a stepped instruction
 * too: the SIGSEGV handler adds them to the frame's mask, which sigreturn
 * loads, and the SIGTRAP handler puts the program's mask back into its
 * own frame.  A signal sent meanwhile stays pending and is delivered
 * right after the step, to a program whose state is whole again: its
 * handler's reads and writes of protected memory are judged as any
 * others.  Without this, a handler running inside ours could not fault
 * (SIGSEGV is blocked there: the kernel kills), and one running between
 * the SIGSEGV and the SIGTRAP would find the per-thread step record in
 * use (one record a thread: steps cannot nest) and the trap flag set in
 * the wrong frame.  The synchronous signals stay unblocked: a blocked
 * fault kills.
 */
static sigset_t async_set;
static uint64_t async_bits; /* the same, as the kernel's 64-bit mask */

static void async_set_init(void)
{
	static const int sync_sig[] = { SIGSEGV, SIGBUS,  SIGILL,
					SIGFPE,	 SIGTRAP, SIGSYS };
	unsigned i;
	int s;

	sigfillset(&async_set);
	for (i = 0; i < sizeof(sync_sig) / sizeof(sync_sig[0]); i++)
		sigdelset(&async_set, sync_sig[i]);
	async_bits = 0;
	for (s = 1; s <= 64; s++)
		if (sigismember(&async_set, s) == 1)
			async_bits |= 1ULL << (s - 1);
	/*
	 * glibc's own, which sigfillset() leaves out: cancellation (32) and
	 * setxid (33).  Held up for one step too: an asynchronous
	 * cancellation acted on in our handler or in the middle of the step
	 * would end the thread with the step's pages open for everyone
	 * (mprotect) and its record held; setxid waits for us a few
	 * microseconds.  Into the kernel's mask directly: glibc's
	 * sigaddset() refuses them, sigaction() passes sa_mask as is.
	 */
	async_bits |= 3ULL << 31;
	memcpy(&async_set, &async_bits, sizeof(async_bits));
}

/* The frame's signal mask: the kernel's 64 bits, not glibc's sigset_t. */
static uint64_t *frame_mask(void *ucv)
{
	return (uint64_t *)(void *)&((ucontext_t *)ucv)->uc_sigmask;
}

/* The single step about to run: keep asynchronous signals out of it. */
static void step_block(void *ucv)
{
	uint64_t *m = frame_mask(ucv);

	if (!pending.masked) {
		pending.sigmask = *m;
		pending.masked = true;
	}
#ifdef __x86_64__
	pending.step_ip = (greg_t)pmg_uc_ip((ucontext_t *)ucv);
#endif
	/* and the step's own trap through, should the program block it
	 * (a blocked trap kills): its mask is back at the trap */
	*m = (*m | async_bits) & ~(1ULL << (SIGTRAP - 1));
}

/* The step ran: the program's own mask again at sigreturn. */
static void step_unblock(void *ucv)
{
	if (pending.masked) {
		*frame_mask(ucv) = pending.sigmask;
		pending.masked = false;
	}
}

/*
 * The handler we chain to runs with the mask it would have had had we not
 * been there (the interrupted mask, its sa_mask, @sig unless SA_NODEFER),
 * not with ours: it may leave by siglongjmp() without restoring a mask.
 */
static void chain_mask(int sig, void *ucv, const struct sigaction *old)
{
	sigset_t m = old->sa_mask;
	uint64_t was = *frame_mask(ucv);
	int s;

	/* a fault of the stepped instruction itself: the program's mask is
	 * the one step_block() kept, not the frame's */
	if (_pmg_cur_step && pending.masked)
		was = pending.sigmask;

	for (s = 1; s <= 64; s++)
		if (was & (1ULL << (s - 1)))
			sigaddset(&m, s);
	if (!(old->sa_flags & SA_NODEFER))
		sigaddset(&m, sig);
	pthread_sigmask(SIG_SETMASK, &m, NULL);
}

/*
 * A signal that is not pmguard's, to the program's action for it: the one
 * it set after pmguard (recorded by the interposers, sigown.c) or the one
 * there before, as the kernel would have carried it out.
 */
static void chain(int sig, siginfo_t *si, void *uc)
{
	struct sigaction a;
	/* sent (kill(), raise(), sigqueue()), or a machine check "action
	 * optional": not a fault or a trap of this instruction */
	bool sent = si->si_code <= 0 ||
		    (sig == SIGBUS && si->si_code == BUS_MCEERR_AO);

	_pmg_sig_deliver(sig, &a); /* one-shot: reset there */
	if (a.sa_flags & SA_SIGINFO) {
		if (a.sa_sigaction) {
			chain_mask(sig, uc, &a);
			a.sa_sigaction(sig, si, uc);
			return;
		}
	} else if (a.sa_handler != SIG_DFL && a.sa_handler != SIG_IGN) {
		chain_mask(sig, uc, &a);
		a.sa_handler(sig);
		return;
	} else if (a.sa_handler == SIG_IGN && sent) {
		return;
	}
	/*
	 * Default action; also an ignored fault or trap, which the kernel
	 * delivers with the default action (force_sig()).  A fault
	 * re-executes and kills with the original siginfo; a trap, a sent
	 * signal or a machine-check "action optional" SIGBUS does not
	 * recur, so raise it.
	 */
	_pmg_sig_default(sig);
	if (sent || sig == SIGTRAP)
		raise(sig);
}

/*
 * May the report unwind the interrupted stack?  Not where rsp is in
 * protected memory: a NOACCESS domain's pages (mprotect: PROT_NONE) fault
 * under the unwinder, inside the handler (audit and relaxed mode died of
 * it).  As contain_strict().
 */
static bool stack_unprotected(const ucontext_t *uc)
{
	struct _pmg_range r;

	return _pmg_reg_find(pmg_uc_sp(uc), &r) != 0;
}

static void step_abort(ucontext_t *uc);

/*
 * Contain decodes the instruction (Zydis), saves and reports bytes: about
 * 5.5 KiB of stack beyond the kernel's frame, more than a fixed 8 KiB
 * alternate signal stack (Rust's std threads') has left.  Below this,
 * contain would overflow it (into a guard page: killed unexplained;
 * without one: into memory below), so it falls back to strict, which
 * needs less.  AS-safe.
 */
#define CONTAIN_STACK (7 * 1024)
/* A report's backtrace (libgcc's unwinder) takes about 1.5 KiB more:
 * below this, reports go without one.  A report itself fits. */
#define TRACE_STACK (5 * 1024)

static size_t altstack_left(void)
{
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0), base;
	stack_t ss;

	if (sigaltstack(NULL, &ss) || !(ss.ss_flags & SS_ONSTACK))
		return SIZE_MAX;
	base = (uintptr_t)ss.ss_sp;
	if (sp < base || sp - base > ss.ss_size)
		return SIZE_MAX;
	return sp - base;
}

/*
 * The register field the emulated PKRU of a page-protection fault uses
 * (the core decides on register values; a domain without a key has
 * none): any key but 0 does.
 */
#define PAGED_FIELD 1

/*
 * What segv_classify() makes of a SIGSEGV, and what the handler does then:
 *  SEGV_OURS      a fault of pmguard's, decided: segv_act() carries it out;
 *  SEGV_NOT_OURS  the program's own (or nothing pmguard knows): chained,
 *                 with the siginfo the CPU gives without pmguard;
 *  SEGV_RETRY     the access is retried as it is: the state it faulted on
 *                 has changed (a domain's key moving, keys.c); it faults
 *                 afresh, judged anew.
 */
enum segv_verdict {
	SEGV_OURS,
	SEGV_NOT_OURS,
	SEGV_RETRY,
};

/*
 * One SIGSEGV, classified: the fault as the policy sees it (address,
 * access, domain, key, mode) with the policy's decision (f.action), and
 * what carrying it out or chaining needs.
 */
struct segv_fault {
	struct pmg_fault f;
	const struct _pmg_prim *p;
	/* keyed: the frame's saved register (what sigreturn loads); NULL:
	 * the domain is kept by page protection */
	uint32_t *reg;
	uint32_t hpkru; /* keyed: the rights to put back for a chain */
	uintptr_t page; /* page protection: the faulting page */
	uintptr_t own; /* the program's own protection refused it */
	int mode; /* the fault mode in force */
	bool allowed; /* --allow: audit, unreported */
};

/*
 * A fault on a domain kept by its key (PKU), or on a page tagged with a
 * key of ours: whose it is (the key the access began with against the
 * domain's now), the saved register, the handler's rights.  @id, @hw: the
 * domain the registry found (0: none) and its key; @k2: the fault's key.
 */
static enum segv_verdict segv_classify_keyed(struct segv_fault *c,
					     ucontext_t *uc, siginfo_t *si,
					     int id, int hw, int k2)
{
	struct pmg_fault *f = &c->f;

	if (!id) {
		/* a page tagged with our key outside every range (moved
		 * pages the static library did not see): its key's domain */
		if (k2 <= 0 || k2 >= PMG_NR_KEYS)
			return SEGV_NOT_OURS;
		id = __atomic_load_n(&_pmg.keyown[k2], __ATOMIC_ACQUIRE);
		if (!id)
			return SEGV_NOT_OURS;
		hw = k2;
	} else if (k2 && k2 != hw) {
		/* the page had another key of ours when the access began:
		 * retried; not ours, a key of the program's */
		if (k2 > 0 && k2 < PMG_NR_KEYS &&
		    __atomic_load_n(&_pmg.keyown[k2], __ATOMIC_ACQUIRE))
			return SEGV_RETRY;
		return SEGV_NOT_OURS;
	} else if (!k2 && si->si_code != SEGV_ACCERR) {
		return SEGV_NOT_OURS;
	}
	/*
	 * A page the program itself made unwritable (unreadable) in the
	 * domain (its own mprotect(), caps.c): the CPU faults there without
	 * pmguard, whatever the key says (the kernel reports the key when
	 * both refuse).  The program's fault, as the CPU gives it with the
	 * page at key 0.
	 */
	if (!_pmg_cap_allows(f->addr, f->acc)) {
		c->own = f->addr;
		return SEGV_NOT_OURS;
	}
	c->reg = c->p->saved_reg(uc);
	if (!c->reg)
		return SEGV_NOT_OURS;
	f->saved_pkval = *c->reg;
	/*
	 * SEGV_ACCERR on a domain that holds a key: the page protection
	 * refused it.  If the key lets the access through, that protection
	 * is the program's (its own mprotect()): not ours.  If not, it is a
	 * stray access to the domain (it may have begun while the domain was
	 * still virtual), judged by the key.
	 */
	if (!k2 &&
	    pmg_rights_allow(pmg_pkval_rights(*c->reg, (unsigned)hw), f->acc))
		return SEGV_NOT_OURS;
	/*
	 * The handler starts with every key access-disabled: give it the
	 * domains' default rights, so that a callback or an observer may
	 * read a write-disabled domain (the faulting address, say).  Put
	 * back for a handler we chain to.
	 */
	c->hpkru = c->p->handler_rights();
	/*
	 * Sync only up to the defaults (no windows): a thread that opened a
	 * window set its register itself, so a register stricter than the
	 * defaults is an older thread or a fresh signal context, and neither
	 * holds the thread's windows.
	 */
	f->no_sync = false;
	f->key = (unsigned)hw;
	f->dom = id;
	return SEGV_OURS;
}

/*
 * A fault on a domain kept by page protection (the mprotect backend; a
 * virtual domain on PKU): whose it is, the page, the rights.  @id: the
 * domain the registry found (0: none); @k2: the fault's key.
 */
static enum segv_verdict segv_classify_paged(struct segv_fault *c,
					     siginfo_t *si, int id, int k2)
{
	struct pmg_fault *f = &c->f;

	if (!id)
		return SEGV_NOT_OURS;
	/* PKU: a key fault on a domain that holds none now: it had one when
	 * the access began (a raced move), retried */
	if (k2 > 0 && k2 < PMG_NR_KEYS &&
	    __atomic_load_n(&_pmg.keyown[k2], __ATOMIC_ACQUIRE))
		return SEGV_RETRY;
	if (si->si_code != SEGV_ACCERR ||
	    !_pmg_cap_allows(f->addr, f->acc)) /* the program's own */
		return SEGV_NOT_OURS;
	c->page = f->addr & ~(PMG_PAGE_SIZE - 1);
	/* a write window is open on the domain: the page's first write in
	 * it (mpwin.c); granted, recorded, retried */
	if (_pmg_lazy_grant(id, c->page))
		return SEGV_RETRY;
	/* page permissions are the process-wide rights: never stale */
	f->saved_pkval = pmg_pkval_update(0, PAGED_FIELD,
					  _pmg_process_rights(&_pmg.dom[id]));
	f->no_sync = true;
	f->key = PAGED_FIELD;
	f->dom = id;
	return SEGV_OURS;
}

/*
 * Classify the fault: the address, the access, the domain and its key,
 * whose fault it is, and the policy's decision.  Fills @c.  The domain is
 * the address's (the registry), kept as it is now: by its key, or by page
 * protection (the mprotect backend; a virtual domain on PKU).  The kind of
 * fault says how it was kept when the access began: where that differs
 * (the key moved meanwhile), the access is retried, or judged as the
 * domain is kept now.
 */
static enum segv_verdict segv_classify(struct segv_fault *c, siginfo_t *si,
				       ucontext_t *uc)
{
	struct pmg_fault *f = &c->f;
	struct _pmg_range r;
	enum segv_verdict v;
	int id = 0, hw = 0, k2;

	f->addr = (uintptr_t)si->si_addr;
#ifdef __x86_64__
	f->ip = pmg_uc_ip(uc);
	f->acc = pmg_uc_pf_write(uc) ? PMG_WRITE : PMG_READ;
#else
	f->ip = 0;
	f->acc = PMG_WRITE;
#endif
	c->mode = pmg_get_fault_mode();
	f->mode = (unsigned)c->mode;
	f->code = si->si_code;
	if (!_pmg_reg_find(f->addr, &r)) {
		id = r.dom;
		if (__atomic_load_n(&_pmg.dom[id].moving, __ATOMIC_SEQ_CST))
			return SEGV_RETRY;
		hw = _pmg_dom_hw(id);
	}
	k2 = si->si_code == SEGV_PKUERR ? (int)si->si_pkey : 0;
	if (c->p->page_keys && (id ? hw != 0 : k2 != 0))
		v = segv_classify_keyed(c, uc, si, id, hw, k2);
	else
		v = segv_classify_paged(c, si, id, k2);
	if (v != SEGV_OURS)
		return v;
	c->allowed = _pmg_site_allowed(f->ip); /* --allow: audit, unreported */
	if (c->allowed) {
		f->mode = PMG_FAULT_AUDIT;
		c->mode = PMG_FAULT_AUDIT; /* the write goes through */
	}
	_pmg_fault_decide(&_pmg.dom[f->dom].ck, f);
	if (f->action == PMG_ACT_NOT_OURS)
		return SEGV_NOT_OURS;
	/* a grant that outlives this access leaves the thread with rights on
	 * the key: it must not move to another domain (keys.c) */
	if (c->reg &&
	    (f->action == PMG_ACT_GRANT || f->action == PMG_ACT_RELAX_REPORT ||
	     f->action == PMG_ACT_RELAX_SILENT))
		_pmg_key_keep(f->dom);
	return SEGV_OURS;
}

/* The strict end: reported, told, the process aborted. */
__attribute__((noreturn)) static void
segv_strict(const struct pmg_fault *f, pid_t tid, const char *how, bool trace)
{
	_pmg_report_fault(f, tid, how, trace);
	_pmg_fault_notify(f, tid, PMG_FAULT_STRICT_ABORT);
	_pmg_fault_die();
}

#ifdef __x86_64__
/*
 * Contain: the step's record claimed, the write undone around a single
 * step (contain.c).  SEGV_OURS: contain did not take it (a read in a step,
 * a write it falls back to audit for): go on as audit; SEGV_RETRY: done,
 * the handler returns; SEGV_NOT_OURS: the program's own protection
 * refused it.  Contain's strict ends do not return.
 */
static enum segv_verdict segv_contain(struct segv_fault *c, ucontext_t *uc,
				      pid_t tid)
{
	struct pmg_fault *f = &c->f;

	if (!_pmg_step_claim(tid))
		segv_strict(f, tid,
			    "strict (aborting: no memory for the single step)",
			    stack_unprotected(uc));
	if (f->action == PMG_ACT_CONTAIN && f->acc == PMG_WRITE &&
	    !pending.active && altstack_left() < CONTAIN_STACK)
		segv_strict(f, tid,
			    "strict (aborting: contain needs about 7 KiB of "
			    "signal stack, the alternate stack has less left; "
			    "no backtrace: it needs stack too)",
			    false);
	if (f->action != PMG_ACT_CONTAIN ||
	    (pending.active && f->acc == PMG_READ))
		return SEGV_OURS;
	switch (_pmg_contain_begin(f, uc, c->reg, tid, &c->own)) {
	case PMG_CT_DONE:
		/* PKU: this context only; mprotect: pages done */
		if (c->reg)
			*c->reg = f->new_pkval;
		if (pending.active)
			step_block(uc);
		else
			_pmg_step_release(); /* retried */
		return SEGV_RETRY;
	case PMG_CT_OWN:
		/* the CPU faults on the program's own protection: its fault,
		 * nothing stepped, not one of ours (counted before it was
		 * known) */
		if (!pending.active)
			_pmg_step_release();
		__atomic_sub_fetch(&_pmg_stats.faults, 1, __ATOMIC_RELAXED);
		__atomic_sub_fetch(&_pmg_stats.strays, 1, __ATOMIC_RELAXED);
		return SEGV_NOT_OURS;
	}
	return SEGV_OURS;
}

/*
 * Audit: the access runs once with the rights it needs, single-stepped
 * (the trap flag); the SIGTRAP puts the rights back (step_finish()).  A
 * rep stos/movs run is done at once instead (_pmg_rep_audit()):
 * SEGV_RETRY, the handler returns.
 */
static enum segv_verdict segv_audit_step(struct segv_fault *c, ucontext_t *uc,
					 pid_t tid)
{
	struct pmg_fault *f = &c->f;

	/* the decoder needs contain's stack (altstack_left()) */
	if (!pending.active && altstack_left() >= CONTAIN_STACK &&
	    _pmg_rep_audit(f, uc, c->reg != NULL, tid, c->mode)) {
		if (c->reg)
			*c->reg = f->saved_pkval;
		return SEGV_RETRY;
	}
	if (!pending.active) {
		pending.active = true;
		pending.ip = f->ip;
		pending.had_tf = pmg_uc_tf(uc);
		pending.mask = 0;
		pending.bits = 0;
		pending.npages = 0;
	}
	if (c->reg) {
		pending.mask |= PMG_PKR_MASK(f->key);
		pending.bits |= f->saved_pkval & PMG_PKR_MASK(f->key);
	} else if (pending.npages < PMG_PENDING_PAGES) {
		pending.page[pending.npages] = c->page;
		pending.dom[pending.npages++] = f->dom;
	}
	pmg_uc_set_tf(uc);
	step_block(uc);
	return SEGV_OURS;
}
#endif

/* Audit and contain: the access stepped once, or contained. */
static enum segv_verdict segv_step(struct segv_fault *c, ucontext_t *uc,
				   pid_t tid, bool trace)
{
	struct pmg_fault *f = &c->f;
	enum segv_verdict v = SEGV_OURS;
	uint64_t n;

#ifdef __x86_64__
	v = segv_contain(c, uc, tid);
	if (v != SEGV_OURS)
		return v;
#endif
	n = c->allowed ? 0 : _pmg_audit_site_hit(f->ip, f->dom);
	if (!c->allowed)
		_pmg_report_fault(f, tid,
				  trace || n != 1 ? "audit"
						  : "audit (no backtrace: "
						    "little signal stack left)",
				  n == 1 && trace && stack_unprotected(uc));
	_PMG_STAT_INC(audited);
	_pmg_fault_notify(f, tid, PMG_FAULT_AUDITED);
#ifdef __x86_64__
	v = segv_audit_step(c, uc, tid);
#endif
	return v;
}

/*
 * Act on the decision, on the frame: told, reported, counted; a step set
 * up (audit, contain) or the process aborted (strict); then the new rights
 * for the interrupted context (the saved register, or the page).
 * SEGV_NOT_OURS: contain found the program's own protection.
 */
static enum segv_verdict segv_act(struct segv_fault *c, ucontext_t *uc)
{
	struct pmg_fault *f = &c->f;
	pid_t tid = (pid_t)syscall(SYS_gettid);
	bool trace = f->action == PMG_ACT_SYNC || f->action == PMG_ACT_GRANT ||
		     f->action == PMG_ACT_RELAX_SILENT ||
		     altstack_left() >= TRACE_STACK;
	enum segv_verdict v;

	_PMG_STAT_INC(faults);
	if (f->action != PMG_ACT_SYNC)
		_PMG_STAT_INC(strays);

	switch (f->action) {
	case PMG_ACT_SYNC:
		_PMG_STAT_INC(synced);
		_pmg_fault_notify(f, tid, PMG_FAULT_SYNCED);
		break;
	case PMG_ACT_GRANT:
		_PMG_STAT_INC(granted);
		_pmg_fault_notify(f, tid, PMG_FAULT_GRANTED);
		break;
	case PMG_ACT_RELAX_REPORT:
		_pmg_report_fault(f, tid,
				  trace ? "relaxed (reported once per domain, "
					  "access allowed)"
					: "relaxed (reported once per domain, "
					  "access allowed; no backtrace: "
					  "little signal stack left)",
				  trace && stack_unprotected(uc));
		/* fall through */
	case PMG_ACT_RELAX_SILENT:
		_PMG_STAT_INC(relaxed);
		_pmg_fault_notify(f, tid,
				  f->action == PMG_ACT_RELAX_REPORT
					  ? PMG_FAULT_RELAXED_REPORTED
					  : PMG_FAULT_RELAXED_SILENT);
		break;
	case PMG_ACT_CONTAIN:
	case PMG_ACT_AUDIT:
		v = segv_step(c, uc, tid, trace);
		if (v != SEGV_OURS)
			return v;
		break;
	default:
		segv_strict(f, tid,
			    trace ? "strict (aborting)"
				  : "strict (aborting; no backtrace: "
				    "little signal stack left)",
			    trace && stack_unprotected(uc));
	}
	/* Carry out the new rights for the interrupted context. */
	if (c->reg)
		*c->reg = f->new_pkval;
	else if (c->page) {
		unsigned rights = pmg_pkval_rights(f->new_pkval, f->key);

		/* lazy windows: the next write window's close re-arms it */
		if (rights == PMG_RIGHTS_RW) {
			unsigned long e = _pmg_lazy_note_begin(f->dom, c->page);

			_pmg_fault_protect_page(c->page,
						PROT_READ | PROT_WRITE);
			_pmg_lazy_note_end(f->dom, c->page, e);
		} else { /* a read grant: never below what a window gave */
			_pmg_fault_set_page(f->dom, c->page,
					    _pmg_prot_of(rights));
		}
	}
	return SEGV_OURS;
}

static void segv_handler(int sig, siginfo_t *si, void *ucv)
{
	int saved_errno = errno;
	ucontext_t *uc = ucv;
	struct segv_fault c;
	bool in = false;

	c.p = __atomic_load_n(&_pmg.prim, __ATOMIC_ACQUIRE);
	c.reg = NULL;
	c.hpkru = 0;
	c.page = 0;
	c.own = 0;
	if (!c.p)
		goto not_ours;
	/* no domain's key moves while this handler looks at one (keys.c);
	 * left on every way out: return, chain, abort (_pmg_fault_die()) */
	_pmg_keys_enter();
	in = true;
	switch (segv_classify(&c, si, uc)) {
	case SEGV_OURS:
		if (segv_act(&c, uc) == SEGV_NOT_OURS)
			goto not_ours;
		break;
	case SEGV_NOT_OURS:
		goto not_ours;
	case SEGV_RETRY:
		break;
	}
	_pmg_keys_leave();
	errno = saved_errno;
	return;

not_ours:
	if (in) {
		step_abort(uc);
		_pmg_keys_leave();
	}
	if (c.reg)
		c.p->rights_restore(c.hpkru);
	/* the program's own protection refused the access: the siginfo the
	 * CPU gives without pmguard (page protection, key 0) */
	if (c.own) {
		si->si_code = SEGV_ACCERR;
		si->si_addr = (void *)c.own;
#ifdef si_pkey
		si->si_pkey = 0;
#endif
	}
	/* a closed pool's quarantined address: reported (strict aborts) */
	_pmg_pool_quarantine_fault(sig, si->si_code,
				   (uintptr_t)si->si_addr, ucv);
	errno = saved_errno;
	chain(sig, si, ucv);
}

/*
 * The step is over: put back what the SIGSEGV handler opened (contain's
 * bytes, the PKU register bits, the mprotect pages), the trap flag and the
 * program's signal mask, in the frame @uc, and give the record back.  The
 * caller gave the handler its rights (the observer may read).  @ran false
 * (step_abort()): the instruction did not run, contain has no write to
 * undo or report.
 */
static void step_finish(ucontext_t *uc, bool ran)
{
	unsigned i;
	bool had_tf;

	if (pending.contain) {
		/* pages still writable, keys opened */
		_pmg_contain_end(uc, ran);
		pending.contain = false;
	}
	if (pending.mask) {
		uint32_t *reg = _pmg.prim->saved_reg(uc);

		if (reg)
			*reg = (*reg & ~pending.mask) | pending.bits;
	}
	for (i = 0; i < pending.npages; i++)
		_pmg_fault_reprotect_page(pending.dom[i], pending.page[i]);
	had_tf = pending.had_tf;
#ifdef __x86_64__
	if (!had_tf)
		pmg_uc_clear_tf(uc);
#endif
	step_unblock(uc);
	_pmg_step_release();
}

/*
 * A signal that is not pmguard's arrives in the middle of a step: the
 * stepped instruction's own fault on memory that is not pmguard's, say,
 * for the program's handler.  That handler may leave by siglongjmp() (or
 * end the thread), and the trap would never come: the pages the step
 * opened would stay open for every thread (mprotect), the record held.
 * End the step first, as if the instruction had not run (it has not: it
 * faulted); should the handler return, the instruction runs again and
 * faults on pmguard's memory again, a fresh step.
 */
static void step_abort(ucontext_t *uc)
{
	uint32_t hpkru;

	/* only the stepped instruction's own frame, the step set up: not a
	 * fault inside pmguard's handler (contain's copies, say) */
	if (!_pmg_cur_step || !pending.active || !pending.masked)
		return;
#ifdef __x86_64__
	if ((greg_t)pmg_uc_ip(uc) != pending.step_ip)
		return;
#endif
	hpkru = _pmg.prim->handler_rights();
	step_finish(uc, false);
	_pmg.prim->rights_restore(hpkru);
}

/*
 * Is this SIGTRAP the single step's?  The kernel sends TRAP_TRACE for a
 * step (DR6.BS).  On a loaded virtual machine (Firecracker on KVM, this
 * project's CI) the step's trap also arrives with DR6 empty, which the
 * kernel reports as an icebp: TRAP_BRKPT, the trap flag still set in the
 * frame (seen: 8 of 100 audit runs under CPU oversubscription, each killed
 * by its own step's SIGTRAP).  While a step is active the stepped
 * instruction is the memory access that faulted, never an icebp (and int3
 * gives SI_KERNEL), so a kernel trap with the trap flag set is the step's.
 */
static bool step_trap(const siginfo_t *si, const ucontext_t *uc)
{
	if (!_pmg_cur_step || !pending.active)
		return false;
	if (si->si_code == TRAP_TRACE)
		return true;
#ifdef __x86_64__
	return si->si_code == TRAP_BRKPT && pmg_uc_tf(uc);
#else
	(void)uc;
	return false;
#endif
}

static void trap_handler(int sig, siginfo_t *si, void *ucv)
{
	int saved_errno = errno;
	ucontext_t *uc = ucv;
	bool had_tf;

	if (!step_trap(si, uc)) {
		_pmg_keys_enter();
		step_abort(uc);
		_pmg_keys_leave();
		errno = saved_errno;
		chain(sig, si, ucv);
		return;
	}
	/* as the SIGSEGV handler: contain_end() may fall back to strict
	 * (_pmg_fault_die() leaves the bracket) */
	_pmg_keys_enter();
	had_tf = pending.had_tf;
	(void)_pmg.prim->handler_rights();
	step_finish(uc, true);
	_pmg_keys_leave();
	_PMG_STAT_INC(rearmed);
	errno = saved_errno;
	/*
	 * The program single-steps itself (TF was set at the fault): this
	 * trap is also the one the CPU owes it after the instruction.
	 */
	if (had_tf)
		chain(sig, si, ucv);
}

/*
 * SIGBUS is not pmguard's, but the stepped instruction may raise it (a
 * store beyond the end of a shrunk file, a machine check on a bad pmem
 * block) and the program's handler may leave by siglongjmp(): end the
 * step first (step_abort()), then pass it on unchanged.
 */
static void bus_handler(int sig, siginfo_t *si, void *ucv)
{
	int saved_errno = errno;

	if (__atomic_load_n(&_pmg.prim, __ATOMIC_ACQUIRE)) {
		_pmg_keys_enter();
		step_abort(ucv);
		_pmg_keys_leave();
	}
	errno = saved_errno;
	chain(sig, si, ucv);
}

/*
 * pmguard's handlers into the kernel, for good: the program's own later
 * actions for these signals are recorded, not installed (sigown.c).
 * SA_ONSTACK: on a thread with an alternate signal stack (Rust's, Go's)
 * a stray write on an overflowing stack is still handled; a program's
 * handler chained to runs there too, whether it asked for it or not.
 */
int _pmg_fault_install(void)
{
	static const struct {
		int sig;
		void (*fn)(int, siginfo_t *, void *);
		const char *name;
	} h[] = {
		{ SIGSEGV, segv_handler, "SIGSEGV" },
		{ SIGTRAP, trap_handler, "SIGTRAP" },
		{ SIGBUS, bus_handler, "SIGBUS" },
	};
	struct sigaction sa;
	unsigned i;
	int rc;

	async_set_init();
	_pmg_vm_copy_probe();
	memset(&sa, 0, sizeof(sa));
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
	sa.sa_mask = async_set; /* nothing nests into ours */
	for (i = 0; i < sizeof(h) / sizeof(h[0]); i++) {
		sa.sa_sigaction = h[i].fn;
		rc = _pmg_sig_take(h[i].sig, &sa);
		if (rc)
			return _pmg_err(rc, "installing the %s handler: %s",
					h[i].name, strerror(-rc));
	}
	return 0;
}
