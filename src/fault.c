// SPDX-License-Identifier: MIT
/*
 * The fault path: SIGSEGV for protection-key faults (PKU: SEGV_PKUERR with
 * si_pkey) or faults inside protected ranges (mprotect: SEGV_ACCERR), and
 * SIGTRAP for audit mode's re-arm after a single step, with what steers
 * them: the per-domain callbacks, the observer, the fault mode and the
 * report fd.  The handlers and what they call are async-signal-safe: no
 * locks, no allocation, output through write(2) (report.c); so are the
 * mode and report-fd setters (atomic stores).  _pmg_fault_install() and
 * the callback and observer setters are not: they call sigaction(),
 * allocate, or take the library lock.
 *
 * The decision is the policy's (_pmg_fault_decide(), policy.c); this file only
 * finds the key, the access and the saved register, and carries the
 * decision out on the signal frame:
 *  - the saved PKRU in the frame's XSAVE area is what sigreturn loads, so
 *    editing it grants or revokes rights for the interrupted context only
 *    (the seeds' pks_update_exception());
 *  - audit sets the trap flag so the faulting instruction runs once with
 *    access, then the SIGTRAP handler puts the saved rights back;
 *  - contain (contain_begin/contain_end) decodes the instruction
 *    (contain.c) and runs it once against a per-thread scratch copy of
 *    what it writes (its base register moved), or with access and the
 *    protected bytes saved before and put back after; same trap flag.
 * Signals that are not ours go to the handler installed before us, or get
 * the default action, unchanged.
 */
#define _GNU_SOURCE
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include "contain.h"
#include "internal.h"
#include "hooks.h"
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
#define X86_EFLAGS_TF 0x100
#define PF_WRITE 0x2

static struct sigaction old_segv, old_trap, old_bus;

/* The handlers' and contain's name for the thread's step record (held:
 * steps.c). */
#define pending (*_pmg_cur_step)
#define scratch (_pmg_cur_step->scratch)

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
	pending.step_ip = ((ucontext_t *)ucv)->uc_mcontext.gregs[REG_RIP];
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

static void chain(int sig, siginfo_t *si, void *uc, struct sigaction *saved)
{
	struct sigaction dfl, copy = *saved;
	const struct sigaction *old = &copy;

	/* one-shot, as the kernel does it: the default from now on */
	if (copy.sa_flags & SA_RESETHAND) {
		memset(saved, 0, sizeof(*saved));
		saved->sa_handler = SIG_DFL;
	}

	if ((old->sa_flags & SA_SIGINFO) ||
	    (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN))
		chain_mask(sig, uc, old);
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
	 * siginfo; a trap, a sent signal or a machine-check "action
	 * optional" SIGBUS does not recur, so raise it.
	 */
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigaction(sig, &dfl, NULL);
	if (!((sig == SIGSEGV && si->si_code > 0) ||
	      (sig == SIGBUS && si->si_code > 0 &&
	       si->si_code != BUS_MCEERR_AO)))
		raise(sig);
}

/* ---- contain mode ---- */

/* Why a push or call into protected memory is not contained (N5). */
static const char stack_why[] =
	"an implicit stack write (push, call, enter) into protected memory "
	"cannot be undone: the program would read back (pop, ret) the old "
	"bytes";

static void contain_strict(const struct pmg_fault *f, const ucontext_t *uc,
			   pid_t tid, const struct _pmg_decoded *d,
			   const char *why)
{
	struct _pmg_buf b = { .n = 0 };
	struct _pmg_range r;
	int fd = _pmg_report_fd();
	/* no backtrace through a stack in protected memory: the unwinder
	 * would run off it (a fault in this handler is fatal) */
	bool stack_ok = _pmg_reg_find((uintptr_t)uc->uc_mcontext.gregs[REG_RSP],
				      &r) != 0;

	_PMG_STAT_INC(contain_strict);
	_pmg_buf_str(&b, "pmguard: contain: cannot contain '");
	_pmg_buf_str(&b, d->text);
	_pmg_buf_str(&b, "' at ip ");
	_pmg_buf_hex(&b, f->ip);
	_pmg_buf_str(&b, ": ");
	_pmg_buf_str(&b, why);
	_pmg_buf_str(&b, "; falling back to strict\n");
	_pmg_buf_flush(&b, fd);
	_pmg_report_fault(f, tid, "strict (aborting)", stack_ok);
	_pmg_fault_notify(f, tid, PMG_FAULT_STRICT_ABORT);
	_pmg_fault_die();
}

/*
 * mprotect: the saved bytes are read and put back through /proc/self/mem,
 * which ignores page protection for private mappings, so a window closed
 * by another thread (the page made read-only again) between grant and
 * restore cannot make the copy fault.  Where that fails (a shared mapping
 * is not force-writable), plain copies: the pages were made writable, and
 * if a window close re-protected one meanwhile, the fault on the copy
 * grants it again (contain_begin()).  open(2), pread(2), pwrite(2):
 * AS-safe.
 */
static void copy_out(void *dst, uintptr_t src, unsigned len, bool pku)
{
	int fd = pku ? -1 : _pmg_self_mem_fd();

	if (fd < 0 || pread(fd, dst, len, (off_t)src) != (ssize_t)len)
		memcpy(dst, (const void *)src, len);
}

static void copy_in(uintptr_t dst, const void *src, unsigned len, bool pku)
{
	int fd = pku ? -1 : _pmg_self_mem_fd();

	if (fd < 0 || pwrite(fd, src, len, (off_t)dst) != (ssize_t)len)
		memcpy((void *)dst, src, len);
}

/* Open the keys of the saved ranges for the handler's own copies (PKU:
 * @mask is 0 on mprotect and for page protection). */
static uint32_t open_keys(uint32_t mask)
{
	return mask ? _pmg.prim->rights_open(mask) : 0;
}

static void close_keys(uint32_t mask, uint32_t cur)
{
	if (mask)
		_pmg.prim->rights_restore(cur);
}

/*
 * Is range @r kept the way this fault is judged: by a key (@pku: the
 * faulting address's domain holds one on PKU) or by page protection?
 * A write across both kinds at once is not contained (strict), a rep run
 * stops at the change.  AS-safe.
 */
static bool same_kind(const struct _pmg_range *r, bool pku)
{
	return (_pmg_dom_hw(r->dom) != 0) == pku;
}

/* Does the thread (rights in @pkval on PKU) lack write access to the
 * domain of @r (of this fault's kind)? */
static bool write_denied(const struct _pmg_range *r, uint32_t pkval, bool pku)
{
	unsigned x = pku ? pmg_pkval_rights(pkval,
					    (unsigned)_pmg_dom_hw(r->dom))
			 : _pmg_process_rights(&_pmg.dom[r->dom]);

	return x != PMG_RIGHTS_RW;
}

/* ---- rep stos / rep movs: a run of iterations at once ---- */

#define X86_EFLAGS_DF 0x400
#define PMG_PAGE_MASK (~(uintptr_t)(PMG_PAGE_SIZE - 1))

/* May this thread not write @page of range @r now (@pkval: PKU rights)? */
static bool page_denied(const struct _pmg_range *r, uintptr_t page,
			uint32_t pkval, bool pku)
{
	if (pku)
		return write_denied(r, pkval, true);
	/* a lazy write window on the domain: the page's first write in
	 * it, granted here (lazywin.c) */
	return !(_pmg_pw_prot(r->dom, page) & PROT_WRITE) &&
	       !_pmg_lazy_grant(r->dom, page);
}

/*
 * process_vm_readv/writev on our own process: 1 usable, -1 not (ENOSYS: a
 * kernel without CONFIG_CROSS_MEMORY_ATTACH; EPERM: a seccomp filter, as
 * container runtimes' default profiles have).  Probed at install.  Where
 * they are missing, vm_copy() copies nothing, so every rep string run
 * takes the per-element path: exact, one fault (and trap) per element.
 * Not static: test-contain sets it to -1 to force the per-element path
 * (the test's own hook; the library ships none).
 */
int _pmg_vm_copy_ok;

void _pmg_vm_copy_probe(void)
{
	uint64_t a = 0x5a, b = 0;
	struct iovec l = { &b, sizeof(b) }, r = { &a, sizeof(a) };
	int saved = errno;

	_pmg_vm_copy_ok = process_vm_readv(getpid(), &l, 1, &r, 1, 0) ==
				 (ssize_t)sizeof(b) && b == a
			     ? 1
			     : -1;
	errno = saved;
}

bool _pmg_rep_bulk_usable(void)
{
	return _pmg_vm_copy_ok > 0;
}

/*
 * Copy @len bytes between @local (a buffer of ours) and @remote: to
 * @remote when @write, else from it, through process_vm_writev/readv on
 * our own process: page protection is honoured
 * (a page that is not mapped, or not writable/readable, gives a short
 * count, never a signal inside the handler), protection keys are not
 * (a remote access).  The bytes copied.  AS-safe.
 */
static size_t vm_copy(void *local, uintptr_t remote, size_t len, bool write)
{
	struct iovec l = { local, len }, r = { (void *)remote, len };
	ssize_t n;

	if (_pmg_vm_copy_ok <= 0)
		return 0;
	n = write ? process_vm_writev(getpid(), &l, 1, &r, 1, 0)
		  : process_vm_readv(getpid(), &l, 1, &r, 1, 0);
	return n > 0 ? (size_t)n : 0;
}

/*
 * Is @page backed (mapped, within its file)?  Contain skips a run of
 * protected pages without touching them; the CPU would take SIGBUS at a
 * page past the end of its file, SIGSEGV at a hole: such a page ends the
 * run.  /proc/self/mem reads any mapped page (PROT_NONE, keys ignored) and
 * fails exactly there; without it, process_vm_readv (a PROT_NONE page
 * then also ends the run: per element, still right).  AS-safe.
 */
static bool page_backed(uintptr_t page)
{
	int fd = _pmg_self_mem_fd();
	uint8_t b;

	if (fd >= 0)
		return pread(fd, &b, 1, (off_t)page) == 1;
	return vm_copy(&b, page, 1, false) == 1;
}

/*
 * The report of a contained run (one line per run, as contain_end).
 */
static void bulk_report(const struct pmg_fault *f, pid_t tid,
			const struct _pmg_decoded *d, uintptr_t lo,
			uintptr_t hi, uint64_t run, bool stack_protected)
{
	struct _pmg_buf b = { .n = 0 };
	uint64_t count = _pmg_audit_site_hit(f->ip, f->dom);
	int fd = _pmg_report_fd();

	if (fd < 0)
		return;
	_pmg_buf_str(&b, "pmguard: contain: stray write by '");
	_pmg_buf_str(&b, d->text);
	_pmg_buf_str(&b, "' at ip ");
	_pmg_buf_hex(&b, f->ip);
	_pmg_buf_str(&b, " (site count ");
	_pmg_buf_dec(&b, (int64_t)count);
	_pmg_buf_str(&b, ") in domain '");
	_pmg_buf_str(&b, _pmg_dom_name(f->dom));
	_pmg_buf_str(&b, "' by thread ");
	_pmg_buf_dec(&b, tid);
	_pmg_buf_str(&b, ": undone\n");
	_pmg_buf_flush(&b, fd);
	_pmg_buf_str(&b, "pmguard: contain:   range [");
	_pmg_buf_hex(&b, lo);
	_pmg_buf_str(&b, ", ");
	_pmg_buf_hex(&b, hi);
	_pmg_buf_str(&b, ") ");
	_pmg_buf_dec(&b, (int64_t)(hi - lo));
	_pmg_buf_str(&b, " byte(s): ");
	_pmg_buf_dec(&b, (int64_t)run);
	_pmg_buf_str(&b, " iteration(s) not written (kept old)\n");
	_pmg_buf_flush(&b, fd);
	if (count == 1 && stack_protected) {
		_pmg_buf_str(&b, "pmguard: contain: no backtrace: the stack "
				 "pointer is in protected memory\n");
		_pmg_buf_flush(&b, fd);
	} else if (count == 1) {
		_pmg_buf_str(&b, "pmguard: backtrace (handler frames "
				 "first):\n");
		_pmg_buf_flush(&b, fd);
		_pmg_backtrace_to(fd);
	}
}

/* What a page of a rep run must be: protected against this thread's
 * writes (and, for contain, backed: RUN_WRITE_BACKED) or reads. */
enum run_need { RUN_WRITE, RUN_WRITE_BACKED, RUN_READ };

static bool page_denied(const struct _pmg_range *r, uintptr_t page,
			uint32_t pkval, bool pku);
static bool page_read_denied(const struct _pmg_range *r, uintptr_t page,
			     uint32_t pkval, bool pku);

static bool run_page(uintptr_t addr, struct _pmg_range *r, enum run_need need,
		     uint32_t pkval, bool pku)
{
	uintptr_t page = addr & PMG_PAGE_MASK;

	if (_pmg_reg_find(addr, r) || !same_kind(r, pku))
		return false;
	if (need == RUN_READ)
		return page_read_denied(r, page, pkval, pku);
	return page_denied(r, page, pkval, pku) &&
	       (need == RUN_WRITE || page_backed(page));
}

/*
 * The run of a rep string instruction's @n elements of @s bytes from
 * @start (the element it is at; @back: DF set, downward) that lies in
 * protected pages as @need says: its element count, its bytes
 * [*@lo, *@hi).  0 when there is none or the addresses wrap.  AS-safe.
 */
static uint64_t rep_run(uintptr_t start, uint64_t n, uint64_t s, bool back,
			enum run_need need, uint32_t pkval, bool pku,
			uintptr_t *lo, uintptr_t *hi)
{
	uintptr_t pos, limit, top = start + s;
	struct _pmg_range r;
	uint64_t run;

	if (!back) {
		limit = start + n * s;
		if (limit < start)
			return 0;
		for (pos = start; pos < limit;) {
			uintptr_t next = (pos | (PMG_PAGE_SIZE - 1)) + 1;

			if (!run_page(pos, &r, need, pkval, pku))
				break;
			if (next > r.end)
				next = r.end;
			pos = next < limit ? next : limit;
		}
		run = (pos - start) / s;
		*lo = start;
		*hi = start + run * s;
		return run;
	}
	if (top < start || top < n * s)
		return 0;
	limit = top - n * s;
	for (pos = top; pos > limit;) {
		uintptr_t next = (pos - 1) & PMG_PAGE_MASK;

		if (!run_page(pos - 1, &r, need, pkval, pku))
			break;
		if (next < r.base)
			next = r.base;
		pos = next > limit ? next : limit;
	}
	run = (top - pos) / s;
	*hi = top;
	*lo = top - run * s;
	return run;
}

/*
 * A write fault of rep stos / rep movs (@d).  Under the trap flag each
 * iteration would cost a fault and a trap (a stray memset: ~30 us per
 * byte); instead the run of iterations whose elements lie in protected
 * pages this thread may not write, from the faulting one on, is handled
 * here in one go:
 *  - contain (@audit false): nothing is written (the writes are undone
 *    before they happen);
 *  - audit: the run is written from here (process_vm_writev: a page a
 *    racing window close re-protects ends the run early, no signal).
 * Then the registers are what the CPU leaves after those iterations:
 * rdi (and rsi) advanced in the direction of DF, rcx counted down, rip
 * past the instruction when rcx reaches 0 (rep stos/movs change no
 * flag).  The CPU does the rest of the instruction natively and faults
 * again at the next protected run.  False (nothing done: the caller takes
 * the per-element path) when it does not apply: not a rep stos/movs, a
 * program that single-steps itself, the faulting element not at rdi or
 * straddling into memory it may write, a movs source that is not
 * readable or overlaps the run (the CPU's own fault or byte order is
 * then what the per-element path gives).  AS-safe.
 */
static bool rep_bulk(const struct pmg_fault *f, ucontext_t *uc,
		     const struct _pmg_decoded *d, bool pku, pid_t tid,
		     bool audit)
{
	greg_t *g = uc->uc_mcontext.gregs;
	uint64_t n = (uint64_t)g[REG_RCX], run, done, s = d->elem;
	uintptr_t di = (uintptr_t)g[REG_RDI], si = (uintptr_t)g[REG_RSI];
	bool back = g[REG_EFL] & X86_EFLAGS_DF;
	uintptr_t lo, hi, slo = 0, pg;
	/* the redirect scratch buffer is free (no step pending): no 4 KiB
	 * on a signal stack that may be SIGSTKSZ */
	uint8_t *buf = scratch;
	const size_t bufsz = sizeof(scratch);

	if (d->rep == PMG_CT_REP_NONE || !s || !n ||
	    (g[REG_EFL] & X86_EFLAGS_TF) || f->acc != PMG_WRITE ||
	    f->addr < di || f->addr - di >= s)
		return false;
	if (n > ((uintptr_t)1 << 47) / s)
		n = ((uintptr_t)1 << 47) / s; /* past user space anyway */
	run = rep_run(di, n, s, back, audit ? RUN_WRITE : RUN_WRITE_BACKED,
		      f->saved_pkval, pku, &lo, &hi);
	if (!run)
		return false;
	if (d->rep == PMG_CT_REP_MOVS) {
		uintptr_t shi;

		slo = back ? si + s - run * s : si;
		shi = slo + run * s;
		if ((back && si + s < run * s) || shi < slo ||
		    (slo < hi && lo < shi))
			return false; /* wraps or overlaps the run */
		/* readable, as the CPU would need (not pkeys: the CPU reads
		 * protected sources in contain/audit mode anyway) */
		for (pg = slo & PMG_PAGE_MASK; pg < shi; pg += PMG_PAGE_SIZE)
			if (!vm_copy(buf, pg < slo ? slo : pg, 1, false))
				return false;
	}
	done = run;
	if (audit) {
		uint64_t stosv = (uint64_t)g[REG_RAX];
		uintptr_t a;
		size_t k;

		if (!pku)
			for (pg = lo & PMG_PAGE_MASK; pg < hi;
			     pg += PMG_PAGE_SIZE)
				_pmg_fault_protect_page(pg,
							PROT_READ | PROT_WRITE);
		for (k = 0; k < bufsz; k += s)
			memcpy(buf + k, &stosv, s);
		/* in the instruction's order, so a short copy leaves the
		 * iterations before it done */
		for (done = 0; done < run;) {
			uint64_t m = bufsz / s, got;

			if (m > run - done)
				m = run - done;
			a = back ? hi - (done + m) * s : lo + done * s;
			if (d->rep == PMG_CT_REP_MOVS) {
				uintptr_t sa = back ? slo + (run - done - m) * s
						    : slo + done * s;

				got = vm_copy(buf, sa, m * s, false) / s;
				if (got < m)
					m = back ? 0 : got;
			}
			got = vm_copy(buf, a, m * s, true) / s;
			if (got < m && back)
				got = 0; /* its low part: not in order */
			done += got;
			if (got < m || !m)
				break;
		}
		if (!pku)
			for (pg = lo & PMG_PAGE_MASK; pg < hi;
			     pg += PMG_PAGE_SIZE) {
				struct _pmg_range r;

				if (!_pmg_reg_find(pg < lo ? lo : pg, &r))
					_pmg_fault_reprotect_page(r.dom, pg);
			}
		if (!done)
			return false;
	} else {
		struct _pmg_range r;

		_PMG_STAT_INC(contained);
		_pmg_fault_notify(f, tid, PMG_FAULT_CONTAINED);
		bulk_report(f, tid, d, lo, hi, run,
			    !_pmg_reg_find((uintptr_t)g[REG_RSP], &r));
	}
	g[REG_RDI] += back ? -(greg_t)(done * s) : (greg_t)(done * s);
	if (d->rep == PMG_CT_REP_MOVS)
		g[REG_RSI] += back ? -(greg_t)(done * s) : (greg_t)(done * s);
	g[REG_RCX] -= (greg_t)done;
	if (!g[REG_RCX])
		g[REG_RIP] += d->len;
	return true;
}

/* May this thread not read @page of range @r now? */
static bool page_read_denied(const struct _pmg_range *r, uintptr_t page,
			     uint32_t pkval, bool pku)
{
	if (pku)
		return pmg_pkval_rights(pkval, (unsigned)_pmg_dom_hw(r->dom)) ==
		       PMG_RIGHTS_AD;
	return !(_pmg_pw_prot(r->dom, page) & PROT_READ);
}

/*
 * A read fault of rep movs (@d) on its source in a domain the thread may
 * not read (a stray read, let through in audit and contain mode): as
 * rep_bulk(), the run of iterations whose source elements lie in such
 * pages is copied from here (process_vm_readv, which does not check
 * protection keys; mprotect: the pages made readable for the copy), when
 * every destination page of the run is outside protected memory (where
 * process_vm_writev honours the page protection, so an unwritable page
 * ends the run early: the CPU then faults there itself).  rdi, rsi, rcx
 * and rip as the CPU leaves them.  False: not applicable, per element.
 * AS-safe.
 */
static bool rep_read_bulk(const struct pmg_fault *f, ucontext_t *uc,
			  const struct _pmg_decoded *d, bool pku)
{
	greg_t *g = uc->uc_mcontext.gregs;
	uint64_t n = (uint64_t)g[REG_RCX], run, done, s = d->elem;
	uintptr_t di = (uintptr_t)g[REG_RDI], si = (uintptr_t)g[REG_RSI];
	bool back = g[REG_EFL] & X86_EFLAGS_DF;
	uintptr_t lo, hi, dlo, dhi, pg;
	uint8_t *buf = scratch;
	const size_t bufsz = sizeof(scratch);

	if (d->rep != PMG_CT_REP_MOVS || !s || !n ||
	    (g[REG_EFL] & X86_EFLAGS_TF) || f->acc != PMG_READ ||
	    f->addr < si || f->addr - si >= s)
		return false;
	if (n > ((uintptr_t)1 << 47) / s)
		n = ((uintptr_t)1 << 47) / s;
	run = rep_run(si, n, s, back, RUN_READ, f->saved_pkval, pku, &lo, &hi);
	if (!run || (back && di + s < run * s))
		return false;
	dlo = back ? di + s - run * s : di;
	hi = lo + run * s;
	dhi = dlo + run * s;
	if (dhi < dlo || (dlo < hi && lo < dhi))
		return false; /* wraps or overlaps */
	for (pg = dlo & PMG_PAGE_MASK; pg < dhi; pg += PMG_PAGE_SIZE) {
		struct _pmg_range r;

		if (!_pmg_reg_find(pg < dlo ? dlo : pg, &r))
			return false; /* into protected memory: per element */
	}
	if (!pku)
		for (pg = lo & PMG_PAGE_MASK; pg < hi; pg += PMG_PAGE_SIZE)
			_pmg_fault_protect_page(pg, PROT_READ);
	/* chunks in the instruction's order; a short copy stops the run */
	for (done = 0; done < run;) {
		uint64_t m = bufsz / s, got;
		uint64_t off;

		if (m > run - done)
			m = run - done;
		off = back ? (run - done - m) * s : done * s;
		got = vm_copy(buf, lo + off, m * s, false) / s;
		if (got == m)
			got = vm_copy(buf, dlo + off, m * s, true) / s;
		if (got < m) {
			if (!back)
				done += got;
			break;
		}
		done += m;
	}
	if (!pku)
		for (pg = lo & PMG_PAGE_MASK; pg < hi; pg += PMG_PAGE_SIZE) {
			struct _pmg_range r;

			if (!_pmg_reg_find(pg < lo ? lo : pg, &r))
				_pmg_fault_reprotect_page(r.dom, pg);
		}
	if (!done)
		return false;
	g[REG_RDI] += back ? -(greg_t)(done * s) : (greg_t)(done * s);
	g[REG_RSI] += back ? -(greg_t)(done * s) : (greg_t)(done * s);
	g[REG_RCX] -= (greg_t)done;
	if (!g[REG_RCX])
		g[REG_RIP] += d->len;
	return true;
}

/*
 * Audit, and contain's stray reads: a rep stos/movs run at once, no trap
 * (contain's writes go through contain_begin()).  True when done.
 */
static bool rep_audit(const struct pmg_fault *f, ucontext_t *uc, bool pku,
		      pid_t tid, int mode)
{
	struct _pmg_decoded d;

	if (f->acc == PMG_WRITE && mode != PMG_FAULT_AUDIT)
		return false;
	if (_pmg_contain_decode(uc, &d) || d.rep == PMG_CT_REP_NONE)
		return false;
	if (f->acc == PMG_WRITE)
		return rep_bulk(f, uc, &d, pku, tid, true);
	return rep_read_bulk(f, uc, &d, pku);
}

/* Is byte @a one of the first @nsave saved (protected) pieces? */
static bool in_saves(uintptr_t a, unsigned nsave)
{
	unsigned j;

	for (j = 0; j < nsave; j++)
		if (a >= pending.save[j].addr &&
		    a < pending.save[j].addr + pending.save[j].len)
			return true;
	return false;
}

/*
 * The redirect's snapshot of [@ea, +@len) into pending.snap: the saved
 * (protected) pieces as copy_out() reads them, the other bytes through
 * process_vm_readv() (page protection honoured: no fault here).  False
 * when some byte outside the saved pieces cannot be read: a masked store
 * (vmaskmov, AVX-512 {k}) whose masked-off elements lie in an unmapped or
 * PROT_NONE page, which the CPU does not touch and does not fault on.
 * Then no redirect: the save-and-step path runs the instruction on the
 * real memory, where the CPU decides (issue 21, third pass).
 */
static bool redirect_snap(uintptr_t ea, unsigned len, unsigned nsave, bool pku)
{
	uint32_t all = pku ? ~(uint32_t)PMG_PKR_MASK(0) : 0;
	unsigned k, e;
	uint32_t cur;

	for (k = 0; k < len; k = e) {
		bool saved = in_saves(ea + k, nsave);

		for (e = k + 1; e < len && in_saves(ea + e, nsave) == saved;)
			e++;
		if (saved) {
			cur = open_keys(all);
			copy_out(&pending.snap[k], ea + k, e - k, pku);
			close_keys(all, cur);
		} else if (vm_copy(&pending.snap[k], ea + k, e - k, false) !=
			   e - k) {
			return false;
		}
	}
	return true;
}

/*
 * A stray access in contain mode.  Returns true when it is a write to be
 * contained (everything set up: saved bytes, rights, trap flag); false
 * when the instruction writes no protected byte (a stray read: audit
 * handles it).  Aborts (strict) when the written range is unknown.
 */
static bool contain_begin(struct pmg_fault *f, ucontext_t *uc, uint32_t *reg,
			  pid_t tid)
{
	struct _pmg_decoded d;
	bool pku = reg != NULL, hit = false;
	uint32_t grant = 0, cur;
	unsigned i, nsave = 0, npages = 0;
	uintptr_t pages[PMG_PENDING_PAGES];
	int pkeys[PMG_PENDING_PAGES];

	if (pending.active && pending.contain && !pku) {
		uintptr_t pg = f->addr & ~(PMG_PAGE_SIZE - 1);

		/*
		 * mprotect: another thread closed a window on a page between
		 * our grant and the step, or the restore (page rights are
		 * process-wide; /proc/self/mem cannot write a read-only
		 * shared mapping): grant again and retry; the bytes are saved
		 * already.
		 */
		for (i = 0; i < pending.npages; i++)
			if (pending.page[i] == pg)
				break;
		if (i < pending.npages) {
			for (i = 0; i < pending.npages; i++)
				_pmg_fault_protect_page(pending.page[i],
							PROT_READ | PROT_WRITE);
			f->new_pkval = f->saved_pkval;
			_PMG_STAT_INC(contain_regrant);
			return true;
		}
	}
	if (_pmg_contain_decode(uc, &d))
		contain_strict(f, uc, tid, &d, d.why);
	if (!pending.active && rep_bulk(f, uc, &d, pku, tid, false)) {
		f->new_pkval = f->saved_pkval;
		return true;
	}
	for (i = 0; i < d.nwr; i++) {
		uintptr_t a = d.wr[i].addr, end = a + d.wr[i].len;

		if (f->addr >= a && f->addr < end)
			hit = true;
		while (a < end) {
			struct _pmg_range r;
			uintptr_t next = (a | (PMG_PAGE_SIZE - 1)) + 1;

			if (next > end)
				next = end;
			if (!_pmg_reg_find(a, &r)) {
				if (next > r.end)
					next = r.end;
				if (!same_kind(&r, pku))
					contain_strict(
						f, uc, tid, &d,
						"the write spans a domain kept "
						"by a key and one kept by page "
						"protection (a virtual domain)");
				/* a lazy write window's block: granted */
				if (write_denied(&r, f->saved_pkval, pku) &&
				    (pku || !_pmg_lazy_grant(r.dom, a))) {
					struct _pmg_save *sv;

					if (d.wr[i].stack)
						contain_strict(f, uc, tid, &d,
							       stack_why);
					if (nsave == PMG_SAVES)
						contain_strict(
							f, uc, tid, &d,
							"the write spans too many "
							"protected ranges");
					sv = &pending.save[nsave++];
					sv->addr = a;
					sv->len = (unsigned)(next - a);
					sv->dom = r.dom;
					if (pku)
						grant |= PMG_PKR_MASK(
							_pmg_dom_hw(r.dom));
					if (!pku && npages < PMG_PENDING_PAGES) {
						pages[npages] = a &
							~(PMG_PAGE_SIZE - 1);
						pkeys[npages++] = r.dom;
					}
				}
			}
			a = next;
		}
	}
	if (!nsave && !pku && f->acc == PMG_WRITE) {
		/*
		 * mprotect: another thread opened a window on these pages
		 * since the fault (rights are process-wide): the write is
		 * now allowed, as any write while a window is open there.
		 * Put the pages at the current rights and retry.
		 */
		for (i = 0; i < d.nwr; i++) {
			uintptr_t a = d.wr[i].addr & ~(PMG_PAGE_SIZE - 1);
			struct _pmg_range r;

			for (; a < d.wr[i].addr + d.wr[i].len;
			     a += PMG_PAGE_SIZE)
				if (!_pmg_reg_find(a, &r))
					_pmg_fault_reprotect_page(r.dom, a);
		}
		_PMG_STAT_INC(contain_regrant);
		f->new_pkval = f->saved_pkval;
		return true;
	}
	if (!nsave) {
		if (f->acc == PMG_WRITE)
			contain_strict(f, uc, tid, &d,
				       "the decoded instruction "
				       "writes no protected byte, yet a write "
				       "faulted");
		return false;	/* a read: audit lets it through */
	}
	if (!hit && f->acc == PMG_WRITE)
		contain_strict(f, uc, tid, &d,
			       "the faulting address is outside "
			       "the decoded written range");
	if (pending.active)
		contain_strict(f, uc, tid, &d,
			       "a second write fault inside a "
			       "contained step");
	pending.active = true;
	pending.ip = f->ip;
	pending.contain = true;
	pending.redirect = false;
	pending.had_tf = uc->uc_mcontext.gregs[REG_EFL] & X86_EFLAGS_TF;
	pending.nsave = nsave;
	pending.f = *f;
	pending.tid = tid;
	pending.dec = d;
	pending.count = _pmg_audit_site_hit(f->ip, f->dom);
	{
		struct _pmg_range r;

		/* unwinding through a stack in protected memory: no */
		pending.stack_protected = !_pmg_reg_find(
			(uintptr_t)uc->uc_mcontext.gregs[REG_RSP], &r);
	}
	pending.npages = 0;
	pending.mask = 0;
	pending.bits = 0;
	pending.rd_mask = pku ? grant : 0;
	if (d.nwr == 1 && d.wr[0].base >= 0 &&
	    redirect_snap(d.wr[0].addr, (unsigned)d.wr[0].len, nsave, pku)) {
		/*
		 * Redirect: the one written operand's base register is moved
		 * so that the instruction writes a copy of the range in a
		 * per-thread scratch buffer instead; memory is never granted
		 * (no other thread can see or race anything) and the bytes
		 * outside protected memory the instruction changed are
		 * copied out after the step (redirect_end()).
		 */
		uintptr_t ea = d.wr[0].addr;
		unsigned len = (unsigned)d.wr[0].len;
		uint8_t *s = scratch + PMG_CT_MAXLEN + (ea & (PMG_CT_MAXLEN - 1));
		/* PKU: the handler runs with the default register; the bytes
		 * outside the saved pieces may be in a domain this thread has
		 * a window on: open every key for the copies */
		uint32_t all = pku ? ~(uint32_t)PMG_PKR_MASK(0) : 0;

		memcpy(s, pending.snap, len);
		for (i = 0; i < nsave; i++)
			memcpy(pending.save[i].old,
			       s + (pending.save[i].addr - ea),
			       pending.save[i].len);
		pending.redirect = true;
		pending.rd_mask = all;	/* contain_end's copies, again */
		pending.mask = 0;
		pending.ea = ea;
		pending.len = len;
		pending.delta = (uintptr_t)s - ea;
		pending.base = d.wr[0].base;
		pending.base_kind = d.wr[0].base_kind;
		pending.base_orig = uc->uc_mcontext.gregs[pending.base];
		uc->uc_mcontext.gregs[pending.base] += (greg_t)pending.delta;
		f->new_pkval = f->saved_pkval;
		_PMG_STAT_INC(contain_redirected);
		uc->uc_mcontext.gregs[REG_EFL] |= X86_EFLAGS_TF;
		return true;
	}
	if (pku) {
		/* this thread only: the frame's register */
		pending.mask = grant;
		pending.bits = f->saved_pkval & grant;
		f->new_pkval = f->saved_pkval & ~grant;
	} else {
		/* process-wide: the pages are writable during the step */
		for (i = 0; i < npages; i++) {
			pending.page[pending.npages] = pages[i];
			pending.dom[pending.npages++] = pkeys[i];
			_pmg_fault_protect_page(pages[i],
						PROT_READ | PROT_WRITE);
		}
		f->new_pkval = f->saved_pkval;
	}
	cur = open_keys(pending.rd_mask);
	for (i = 0; i < nsave; i++)
		copy_out(pending.save[i].old, pending.save[i].addr,
			 pending.save[i].len, pku);
	close_keys(pending.rd_mask, cur);
	uc->uc_mcontext.gregs[REG_EFL] |= X86_EFLAGS_TF;
	return true;
}

/*
 * After a redirected step: fix the base register, copy out the bytes
 * outside protected memory that the instruction changed, keep the
 * protected ones as they were.  Bytes it left as they were are not
 * written: a masked store's masked-off elements may lie in a read-only
 * page, where the CPU does not write (nor fault).  The copy is
 * process_vm_writev() (page protection honoured, no fault in here): a
 * changed byte in a page the program cannot write is a store the CPU
 * would have faulted on: false, the caller falls back to strict.
 */
static bool redirect_end(ucontext_t *uc, uint8_t now[][PMG_CT_MAXLEN])
{
	greg_t *g = &uc->uc_mcontext.gregs[pending.base];
	uint8_t *s = (uint8_t *)(pending.ea + pending.delta);
	unsigned k, i, e;
	bool ok = true;

	/* the decoder redirects only a base nothing else uses (contain.c) */
	if (pending.base_kind == PMG_CT_BASE_STEP)
		*g -= (greg_t)pending.delta;
	else
		*g = pending.base_orig;
	for (k = 0; k < pending.len; k++) {
		for (i = 0; i < pending.nsave; i++)
			if (pending.ea + k >= pending.save[i].addr &&
			    pending.ea + k < pending.save[i].addr +
						     pending.save[i].len)
				break;
		if (i < pending.nsave)
			now[i][pending.ea + k - pending.save[i].addr] = s[k];
	}
	for (k = 0; k < pending.len; k = e) {
		e = k + 1;
		if (in_saves(pending.ea + k, pending.nsave) ||
		    s[k] == pending.snap[k])
			continue;
		while (e < pending.len &&
		       !in_saves(pending.ea + e, pending.nsave) &&
		       s[e] != pending.snap[e])
			e++;
		if (vm_copy(&s[k], pending.ea + k, e - k, true) != e - k)
			ok = false;
	}
	return ok;
}

/* After the step: put the saved bytes back, report old -> new. */
static void contain_end(ucontext_t *uc)
{
	uint8_t now[PMG_SAVES][PMG_CT_MAXLEN];
	struct _pmg_buf b = { .n = 0 };
	bool pku = pending.rd_mask != 0;
	uint32_t cur = open_keys(pending.rd_mask);
	unsigned i;
	int fd = _pmg_report_fd();

	if (pending.redirect && !redirect_end(uc, now)) {
		close_keys(pending.rd_mask, cur);
		contain_strict(&pending.f, uc, pending.tid, &pending.dec,
			       "the store's bytes outside protected memory "
			       "lie in a page the program cannot write: the "
			       "CPU would have faulted");
	}
	for (i = 0; !pending.redirect && i < pending.nsave; i++) {
		struct _pmg_save *sv = &pending.save[i];

		copy_out(now[i], sv->addr, sv->len, pku);
		copy_in(sv->addr, sv->old, sv->len, pku);
	}
	close_keys(pending.rd_mask, cur);
	_PMG_STAT_INC(contained);
	_pmg_fault_notify(&pending.f, pending.tid, PMG_FAULT_CONTAINED);
	if (fd < 0)
		return;
	_pmg_buf_str(&b, "pmguard: contain: stray write by '");
	_pmg_buf_str(&b, pending.dec.text);
	_pmg_buf_str(&b, "' at ip ");
	_pmg_buf_hex(&b, pending.f.ip);
	_pmg_buf_str(&b, " (site count ");
	_pmg_buf_dec(&b, (int64_t)pending.count);
	_pmg_buf_str(&b, ") in domain '");
	_pmg_buf_str(&b, _pmg_dom_name(pending.f.dom));
	_pmg_buf_str(&b, "' by thread ");
	_pmg_buf_dec(&b, pending.tid);
	_pmg_buf_str(&b, ": undone\n");
	_pmg_buf_flush(&b, fd);
	for (i = 0; i < pending.nsave; i++) {
		struct _pmg_save *sv = &pending.save[i];

		_pmg_buf_str(&b, "pmguard: contain:   range [");
		_pmg_buf_hex(&b, sv->addr);
		_pmg_buf_str(&b, ", ");
		_pmg_buf_hex(&b, sv->addr + sv->len);
		_pmg_buf_str(&b, ") ");
		_pmg_buf_dec(&b, sv->len);
		_pmg_buf_str(&b, " byte(s) old ");
		_pmg_buf_bytes(&b, sv->old, sv->len);
		_pmg_buf_str(&b, " -> new ");
		_pmg_buf_bytes(&b, now[i], sv->len);
		_pmg_buf_str(&b, " (kept old)\n");
		_pmg_buf_flush(&b, fd);
	}
	if (pending.count == 1 && pending.stack_protected) {
		_pmg_buf_str(&b, "pmguard: contain: no backtrace: the stack "
			"pointer is in protected memory\n");
		_pmg_buf_flush(&b, fd);
	} else if (pending.count == 1) {
		_pmg_buf_str(&b, "pmguard: backtrace (handler frames "
			     "first):\n");
		_pmg_buf_flush(&b, fd);
		_pmg_backtrace_to(fd);
	}
}

/*
 * May the report unwind the interrupted stack?  Not where rsp is in
 * protected memory: a NOACCESS domain's pages (mprotect: PROT_NONE) fault
 * under the unwinder, inside the handler (issue 21, third pass: audit and
 * relaxed mode died of it).  As contain_strict().
 */
static bool stack_unprotected(const ucontext_t *uc)
{
	struct _pmg_range r;

	return _pmg_reg_find((uintptr_t)uc->uc_mcontext.gregs[REG_RSP], &r) !=
	       0;
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

/* The access is retried as it is: the state it faulted on has changed
 * (a domain's key moving, keys.c).  It faults afresh, judged anew. */
#define RETRY (-1)

static void segv_handler(int sig, siginfo_t *si, void *ucv)
{
	int saved_errno = errno;
	ucontext_t *uc = ucv;
	const struct _pmg_prim *p = __atomic_load_n(&_pmg.prim,
						    __ATOMIC_ACQUIRE);
	struct pmg_fault f;
	struct _pmg_range r;
	uint32_t *reg = NULL, hpkru = 0;
	uintptr_t page = 0;
	pid_t tid;
	int key, mode, id = 0, hw = 0, k2;
	bool allowed, trace, in = false;

	if (!p)
		goto not_ours;
	/* no domain's key moves while this handler looks at one (keys.c);
	 * left on every way out: return, chain, abort (_pmg_fault_die()) */
	_pmg_keys_enter();
	in = true;
	f.addr = (uintptr_t)si->si_addr;
#ifdef __x86_64__
	f.ip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	f.acc = (uc->uc_mcontext.gregs[REG_ERR] & PF_WRITE) ? PMG_WRITE
							    : PMG_READ;
#else
	f.ip = 0;
	f.acc = PMG_WRITE;
#endif
	mode = pmg_get_fault_mode();
	f.mode = (unsigned)mode;
	f.code = si->si_code;
	/*
	 * The domain is the address's (the registry), kept as it is now: by
	 * its key, or by page protection (the mprotect backend; a virtual
	 * domain on PKU).  The kind of fault says how it was kept when the
	 * access began: where that differs (the key moved meanwhile), the
	 * access is retried, or judged as the domain is kept now.
	 */
	if (!_pmg_reg_find(f.addr, &r)) {
		id = r.dom;
		if (__atomic_load_n(&_pmg.dom[id].moving, __ATOMIC_SEQ_CST))
			goto retry;
		hw = _pmg_dom_hw(id);
	}
	k2 = si->si_code == SEGV_PKUERR ? (int)si->si_pkey : 0;
	if (p->page_keys && (id ? hw != 0 : k2 != 0)) {
		if (!id) {
			/* a page tagged with our key outside every range
			 * (moved pages the static library did not see): its
			 * key's domain */
			if (k2 <= 0 || k2 >= PMG_NR_KEYS)
				goto not_ours;
			id = __atomic_load_n(&_pmg.keyown[k2],
					     __ATOMIC_ACQUIRE);
			if (!id)
				goto not_ours;
			hw = k2;
		} else if (k2 && k2 != hw) {
			/* the page had another key of ours when the access
			 * began: retried; not ours, a key of the program's */
			if (k2 > 0 && k2 < PMG_NR_KEYS &&
			    __atomic_load_n(&_pmg.keyown[k2], __ATOMIC_ACQUIRE))
				goto retry;
			goto not_ours;
		} else if (!k2 && si->si_code != SEGV_ACCERR) {
			goto not_ours;
		}
		key = hw;
		reg = p->saved_reg(uc);
		if (!reg)
			goto not_ours;
		f.saved_pkval = *reg;
		/*
		 * SEGV_ACCERR on a domain that holds a key: the page
		 * protection refused it.  If the key lets the access
		 * through, that protection is the program's (its own
		 * mprotect()): not ours.  If not, it is a stray access to
		 * the domain (it may have begun while the domain was still
		 * virtual), judged by the key.
		 */
		if (!k2 &&
		    pmg_rights_allow(pmg_pkval_rights(*reg, (unsigned)hw),
				     f.acc))
			goto not_ours;
		/*
		 * The handler starts with every key access-disabled: give it
		 * the domains' default rights, so that a callback or an
		 * observer may read a write-disabled domain (the faulting
		 * address, say).  Put back for a handler we chain to.
		 */
		hpkru = p->handler_rights();
		/*
		 * Sync only up to the defaults (no windows): a thread that
		 * opened a window set its register itself, so a register
		 * stricter than the defaults is an older thread or a fresh
		 * signal context, and neither holds the thread's windows.
		 */
		f.no_sync = false;
	} else {
		if (!id)
			goto not_ours;
		/* PKU: a key fault on a domain that holds none now: it had
		 * one when the access began (a raced move), retried */
		if (k2 > 0 && k2 < PMG_NR_KEYS &&
		    __atomic_load_n(&_pmg.keyown[k2], __ATOMIC_ACQUIRE))
			goto retry;
		if (si->si_code != SEGV_ACCERR ||
		    !_pmg_cap_allows(f.addr, f.acc)) /* the program's own */
			goto not_ours;
		key = PAGED_FIELD;
		page = f.addr & ~(PMG_PAGE_SIZE - 1);
		/* a write window is open on the domain: the page's first
		 * write in it (lazywin.c); granted, recorded, retried */
		if (_pmg_lazy_grant(id, page))
			goto retry;
		/* page permissions are the process-wide rights: never stale */
		f.saved_pkval = pmg_pkval_update(0, (unsigned)key,
						 _pmg_process_rights(
							 &_pmg.dom[id]));
		f.no_sync = true;
	}
	f.key = (unsigned)key;
	f.dom = id;
	allowed = _pmg_site_allowed(f.ip);	/* --allow: audit, unreported */
	if (allowed) {
		f.mode = PMG_FAULT_AUDIT;
		mode = PMG_FAULT_AUDIT;		/* the write goes through */
	}
	_pmg_fault_decide(&_pmg.dom[id].ck, &f);
	if (f.action == PMG_ACT_NOT_OURS)
		goto not_ours;
	/* a grant that outlives this access leaves the thread with rights
	 * on the key: it must not move to another domain (keys.c) */
	if (reg &&
	    (f.action == PMG_ACT_GRANT || f.action == PMG_ACT_RELAX_REPORT ||
	     f.action == PMG_ACT_RELAX_SILENT))
		_pmg_key_keep(id);

	tid = (pid_t)syscall(SYS_gettid);
	trace = f.action == PMG_ACT_SYNC || f.action == PMG_ACT_GRANT ||
		f.action == PMG_ACT_RELAX_SILENT ||
		altstack_left() >= TRACE_STACK;
	_PMG_STAT_INC(faults);
	if (f.action != PMG_ACT_SYNC)
		_PMG_STAT_INC(strays);

	switch (f.action) {
	case PMG_ACT_SYNC:
		_PMG_STAT_INC(synced);
		_pmg_fault_notify(&f, tid, PMG_FAULT_SYNCED);
		break;
	case PMG_ACT_GRANT:
		_PMG_STAT_INC(granted);
		_pmg_fault_notify(&f, tid, PMG_FAULT_GRANTED);
		break;
	case PMG_ACT_RELAX_REPORT:
		_pmg_report_fault(&f, tid,
				  trace ? "relaxed (reported once per domain, "
					  "access allowed)"
					: "relaxed (reported once per domain, "
					  "access allowed; no backtrace: "
					  "little signal stack left)",
				  trace && stack_unprotected(uc));
		/* fall through */
	case PMG_ACT_RELAX_SILENT:
		_PMG_STAT_INC(relaxed);
		_pmg_fault_notify(&f, tid,
				  f.action == PMG_ACT_RELAX_REPORT
					  ? PMG_FAULT_RELAXED_REPORTED
					  : PMG_FAULT_RELAXED_SILENT);
		break;
	case PMG_ACT_CONTAIN:
	case PMG_ACT_AUDIT: {
		uint64_t n;

#ifdef __x86_64__
		if (!_pmg_step_claim(tid)) {
			_pmg_report_fault(&f, tid,
					  "strict (aborting: no "
					  "memory for the single step)",
					  stack_unprotected(uc));
			_pmg_fault_notify(&f, tid, PMG_FAULT_STRICT_ABORT);
			_pmg_fault_die();
		}
		if (f.action == PMG_ACT_CONTAIN && f.acc == PMG_WRITE &&
		    !pending.active && altstack_left() < CONTAIN_STACK) {
			_pmg_report_fault(&f, tid,
					  "strict (aborting: contain needs "
					  "about 7 KiB of signal stack, the "
					  "alternate stack has less left; no "
					  "backtrace: it needs stack too)",
					  false);
			_pmg_fault_notify(&f, tid, PMG_FAULT_STRICT_ABORT);
			_pmg_fault_die();
		}
		if (f.action == PMG_ACT_CONTAIN &&
		    !(pending.active && f.acc == PMG_READ) &&
		    contain_begin(&f, uc, reg, tid)) {
			/* PKU: this context only; mprotect: pages done */
			if (reg)
				*reg = f.new_pkval;
			if (pending.active)
				step_block(uc);
			else
				_pmg_step_release(); /* retried, no step */
			goto out;
		}
#endif
		n = allowed ? 0 : _pmg_audit_site_hit(f.ip, f.dom);
		if (!allowed)
			_pmg_report_fault(&f, tid,
					  trace || n != 1
						  ? "audit"
						  : "audit (no backtrace: "
						    "little signal stack left)",
					  n == 1 && trace &&
						  stack_unprotected(uc));
		_PMG_STAT_INC(audited);
		_pmg_fault_notify(&f, tid, PMG_FAULT_AUDITED);
#ifdef __x86_64__
		/* the decoder needs contain's stack (altstack_left()) */
		if (!pending.active && altstack_left() >= CONTAIN_STACK &&
		    rep_audit(&f, uc, reg != NULL, tid, mode)) {
			if (reg)
				*reg = f.saved_pkval;
			goto out;
		}
		if (!pending.active) {
			pending.active = true;
			pending.ip = f.ip;
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
			pending.dom[pending.npages++] = f.dom;
		}
		uc->uc_mcontext.gregs[REG_EFL] |= X86_EFLAGS_TF;
		step_block(uc);
#endif
		break;
	}
	default:
		_pmg_report_fault(&f, tid,
				  trace ? "strict (aborting)"
					: "strict (aborting; no backtrace: "
					  "little signal stack left)",
				  trace && stack_unprotected(uc));
		_pmg_fault_notify(&f, tid, PMG_FAULT_STRICT_ABORT);
		_pmg_fault_die();
	}
	/* Carry out the new rights for the interrupted context. */
	if (reg)
		*reg = f.new_pkval;
	else if (page) {
		unsigned rights = pmg_pkval_rights(f.new_pkval, f.key);

		/* lazy windows: the next write window's close re-arms it */
		if (rights == PMG_RIGHTS_RW)
			_pmg_lazy_note(f.dom, page);
		_pmg_fault_protect_page(page, _pmg_prot_of(rights));
	}
retry:
out:
	_pmg_keys_leave();
	errno = saved_errno;
	return;

not_ours:
	if (in) {
		step_abort(uc);
		_pmg_keys_leave();
	}
	if (reg)
		p->rights_restore(hpkru);
	/* a closed pool's quarantined address: reported (strict aborts) */
	_pmg_pool_quarantine_fault(sig, si->si_code,
				   (uintptr_t)si->si_addr, ucv);
	errno = saved_errno;
	chain(sig, si, ucv, &old_segv);
}

/*
 * The step is over: put back what the SIGSEGV handler opened (contain's
 * bytes, the PKU register bits, the mprotect pages), the trap flag and the
 * program's signal mask, in the frame @uc, and give the record back.  The
 * caller gave the handler its rights (the observer may read).
 */
static void step_finish(ucontext_t *uc)
{
	unsigned i;
	bool had_tf;

	if (pending.contain) {
		contain_end(uc);	/* pages still writable, keys opened */
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
		uc->uc_mcontext.gregs[REG_EFL] &= ~(greg_t)X86_EFLAGS_TF;
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
	if (uc->uc_mcontext.gregs[REG_RIP] != pending.step_ip)
		return;
#endif
	hpkru = _pmg.prim->handler_rights();
	step_finish(uc);
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
	return si->si_code == TRAP_BRKPT &&
	       (uc->uc_mcontext.gregs[REG_EFL] & X86_EFLAGS_TF);
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
		chain(sig, si, ucv, &old_trap);
		return;
	}
	/* as the SIGSEGV handler: contain_end() may fall back to strict
	 * (_pmg_fault_die() leaves the bracket) */
	_pmg_keys_enter();
	had_tf = pending.had_tf;
	(void)_pmg.prim->handler_rights();
	step_finish(uc);
	_pmg_keys_leave();
	_PMG_STAT_INC(rearmed);
	errno = saved_errno;
	/*
	 * The program single-steps itself (TF was set at the fault): this
	 * trap is also the one the CPU owes it after the instruction.
	 */
	if (had_tf)
		chain(sig, si, ucv, &old_trap);
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
	chain(sig, si, ucv, &old_bus);
}

int _pmg_fault_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	struct sigaction prev;

	async_set_init();
	_pmg_vm_copy_probe();
	sa.sa_sigaction = segv_handler;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
	sa.sa_mask = async_set; /* nothing nests into ours */
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
	sa.sa_sigaction = bus_handler;
	if (sigaction(SIGBUS, &sa, &prev))
		return _pmg_err(-errno, "installing the SIGBUS handler: %s",
				strerror(errno));
	if (prev.sa_sigaction != bus_handler)
		old_bus = prev;
	return 0;
}
