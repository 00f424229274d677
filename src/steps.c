// SPDX-License-Identifier: MIT
/*
 * What the fault path holds while it runs, below the handlers (fault.c)
 * and contain's undo (contain.c), which use it, and keys.c, which reads
 * it before it moves a key:
 *  - the single-step records: from the SIGSEGV that opens rights for one
 *    instruction (audit, contain) to the SIGTRAP after it, what must be
 *    put back (register bits, pages, contain's saved bytes);
 *  - the handlers' bracket: how many handlers are looking at a domain's
 *    key now;
 *  - the page protection a step opens and puts back, and the strict end
 *    (_pmg_fault_die(): the bracket left first).
 * A key eviction (keys.c) takes no key that a step holds rights on or
 * that a handler inside the bracket may be deciding on: _pmg_steps_on()
 * and _pmg_handlers_inside().  Apart from the fork child, AS-safe.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/mman.h>

#include "internal.h"
#include "steps.h"

/*
 * Where the step records live.  A record is needed only from the SIGSEGV
 * to the SIGTRAP of one single step, so the records are a process-wide
 * pool that threads take (compare-and-swap on the owner) and give back at
 * the trap, not thread-local storage: the shared library's TLS must stay
 * small enough for dlopen() (static TLS: see _pmg_tls in state.c), and a
 * thread that existed before the library was loaded, or that was not
 * created through pthread_create(), gets one like any other.  A few are
 * static; more come in chunks from mmap(2) (async-signal-safe), kept for
 * the life of the process: as many as steps were ever in flight at once.
 * The thread's own record is one initial-exec pointer.
 */
#define STEP_STATIC 8
#define STEP_CHUNK 16
struct step_chunk {
	struct step_chunk *next;
	struct _pmg_step s[STEP_CHUNK];
};
static struct _pmg_step step_static[STEP_STATIC];
static struct step_chunk *step_chunks;
__thread struct _pmg_step *_pmg_cur_step
	__attribute__((tls_model("initial-exec")));

static bool step_take(struct _pmg_step *s, pid_t tid)
{
	int free_ = 0;

	return !__atomic_load_n(&s->owner, __ATOMIC_RELAXED) &&
	       __atomic_compare_exchange_n(&s->owner, &free_, (int)tid, false,
					   __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

/* The calling thread's record, taken if it holds none; NULL: out of
 * memory.  AS-safe. */
struct _pmg_step *_pmg_step_claim(pid_t tid)
{
	struct step_chunk *c;
	unsigned i;

	if (_pmg_cur_step)
		return _pmg_cur_step; /* a second fault in the same step */
	for (i = 0; i < STEP_STATIC; i++)
		if (step_take(&step_static[i], tid))
			return _pmg_cur_step = &step_static[i];
	for (c = __atomic_load_n(&step_chunks, __ATOMIC_ACQUIRE); c;
	     c = c->next)
		for (i = 0; i < STEP_CHUNK; i++)
			if (step_take(&c->s[i], tid))
				return _pmg_cur_step = &c->s[i];
	c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (c == MAP_FAILED)
		return NULL;
	c->s[0].owner = (int)tid;
	c->next = __atomic_load_n(&step_chunks, __ATOMIC_RELAXED);
	while (!__atomic_compare_exchange_n(&step_chunks, &c->next, c, true,
					    __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
	return _pmg_cur_step = &c->s[0];
}

/* The step is over (or never began): give the record back.  AS-safe. */
void _pmg_step_release(void)
{
	struct _pmg_step *s = _pmg_cur_step;

	_pmg_cur_step = NULL;
	s->active = false;
	s->contain = false;
	s->masked = false;
	__atomic_store_n(&s->owner, 0, __ATOMIC_RELEASE);
}

/* ---------------------------------------------- the handlers' bracket */

static unsigned long handlers_in;

void _pmg_keys_enter(void)
{
	__atomic_add_fetch(&handlers_in, 1, __ATOMIC_SEQ_CST);
}

void _pmg_keys_leave(void)
{
	__atomic_sub_fetch(&handlers_in, 1, __ATOMIC_SEQ_CST);
}

bool _pmg_handlers_inside(void)
{
	return __atomic_load_n(&handlers_in, __ATOMIC_SEQ_CST) != 0;
}

bool _pmg_steps_on(int key, int id)
{
	uint32_t m = key ? PMG_PKR_MASK(key) : 0;
	struct step_chunk *c;
	unsigned i, j;
	struct _pmg_step *st;

	for (i = 0;; i++) {
		if (i < STEP_STATIC) {
			st = &step_static[i];
		} else {
			unsigned n = i - STEP_STATIC;

			for (c = __atomic_load_n(&step_chunks,
						 __ATOMIC_ACQUIRE);
			     c && n >= STEP_CHUNK; c = c->next)
				n -= STEP_CHUNK;
			if (!c)
				return false;
			st = &c->s[n];
		}
		if (!__atomic_load_n(&st->owner, __ATOMIC_ACQUIRE))
			continue;
		if (m && ((__atomic_load_n(&st->mask, __ATOMIC_RELAXED) |
			   __atomic_load_n(&st->rd_mask, __ATOMIC_RELAXED)) &
			  m))
			return true;
		if (!id)
			continue;
		j = __atomic_load_n(&st->npages, __ATOMIC_RELAXED);
		while (j-- > 0 && j < PMG_PENDING_PAGES)
			if (__atomic_load_n(&st->dom[j], __ATOMIC_RELAXED) ==
			    id)
				return true;
	}
}

/* fork child: a step another thread was in has no trap here: its pages
 * (mprotect: open for the process) are protected again, the record
 * freed. */
static void step_fork_free(struct _pmg_step *s)
{
	unsigned i;

	if (s->owner && s->active)
		for (i = 0; i < s->npages && i < PMG_PENDING_PAGES; i++)
			_pmg_fault_reprotect_page(s->dom[i], s->page[i]);
	s->active = false;
	s->contain = false;
	s->masked = false;
	s->owner = 0;
}

/* fork child: only the forking thread exists, and it is not in a step
 * (fork is no single-stepped store, and a handler we chain to runs after
 * step_abort()); the others' records are free. */
void _pmg_fault_fork_child(void)
{
	struct step_chunk *c;
	unsigned i;

	_pmg_cur_step = NULL;
	for (i = 0; i < STEP_STATIC; i++)
		step_fork_free(&step_static[i]);
	for (c = step_chunks; c; c = c->next)
		for (i = 0; i < STEP_CHUNK; i++)
			step_fork_free(&c->s[i]);
	/* the other threads' handlers are not here */
	__atomic_store_n(&handlers_in, 0, __ATOMIC_SEQ_CST);
}

/*
 * mprotect(2) of the page at @page to @prot, or, where the mapping cannot
 * be split there, of the 2 MiB (then 1 GiB) block around it, clipped to
 * its protected range: device dax splits its mappings only at the
 * device's alignment, and a one-page mprotect() there is EINVAL (granting
 * nothing, so the access would fault again forever).  On the mprotect
 * backend rights are process-wide anyway; a bigger block is only a bigger
 * window for the length of one instruction.  Never more than the program
 * allows the page (its own mprotect(), caps.c): a grant for a step or a
 * rep run leaves a page it made read-only read-only, so the CPU (or
 * process_vm_writev()) refuses there as it would without pmguard.
 * AS-safe.
 */
void _pmg_fault_protect_page(uintptr_t page, int prot)
{
	static const uintptr_t block[] = { 2UL << 20, 1UL << 30 };
	struct _pmg_range r;
	unsigned i;

	prot = _pmg_cap_limit(page, prot);
	if (!_pmg_mprotect((void *)page, PMG_PAGE_SIZE, prot) ||
	    errno != EINVAL || _pmg_reg_find(page, &r))
		return;
	for (i = 0; i < sizeof(block) / sizeof(block[0]); i++) {
		uintptr_t b = page & ~(block[i] - 1), e = b + block[i];

		if (b < r.base)
			b = r.base;
		if (e > r.end)
			e = r.end;
		if (!_pmg_mprotect((void *)b, e - b, prot) || errno != EINVAL)
			return;
	}
}

/*
 * @page of domain @id to the protection it should have now, and at least
 * @floor (a grant's: PROT_READ for a read let through on a no-access
 * domain; 0 for a re-protect after a step).  The rights are read inside
 * the bracket a write window opening its domain whole waits for
 * (mpwin.c), so that this never lowers a page after it.  Nor may it
 * raise one after a window's close: a close changes the window count
 * first and the pages after, so rights read before the count changed
 * ("read-write": a window open whole, or the page's block granted in it)
 * and an mprotect(2) that lands after the close's would leave the page
 * writable with no window open, past every later close that does not
 * open the domain whole.  The rights are read again after the
 * mprotect(2) and it is redone until they hold (a change after that read
 * comes with its own mprotect(2), later than this one; 64 tries bound a
 * handler that windows opening and closing without pause keep busy).
 * AS-safe.
 */
void _pmg_fault_set_page(int id, uintptr_t page, int floor)
{
	unsigned ph = _pmg_lazy_lower_begin();
	int prot = _pmg_pw_prot(id, page) | floor, now, i;

	for (i = 0; i < 64; i++) {
		_pmg_fault_protect_page(page, prot);
		now = _pmg_pw_prot(id, page) | floor;
		if (now == prot)
			break;
		prot = now;
	}
	_pmg_lazy_lower_end(ph);
}

void _pmg_fault_reprotect_page(int id, uintptr_t page)
{
	_pmg_fault_set_page(id, page, 0);
}

/*
 * strict: the process ends.  Every pmguard handler runs inside the keys'
 * bracket (no domain's key moves under it); leave it first, as a
 * program's SIGABRT handler may carry on.
 */
void _pmg_fault_die(void)
{
	_pmg_keys_leave();
	abort();
}
