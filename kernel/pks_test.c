// SPDX-License-Identifier: MIT
/*
 * The seeds' pks_test (lib/pks/pks_test.c, V8 with V10's numbering) run at
 * boot, plus the PMEM tests, reported as TAP on the serial console.
 *
 *  0  check defaults: every CPU's PKRS is the init value
 *  1  run single: three rights states x read/write, fault or not
 *  2  arm context switch: thread A opens the TEST key, is preempted while
 *     thread B runs RUN_SINGLE on the same key (tools/.../test_pks.c)
 *  3  check context switch: A's PKRS came back
 *  4  exception: handlers run with the init value; nested; restored
 *  5  exception update: a key callback grants via pks_update_exception()
 *  6  all keys 1..15 through every API form
 *  9  crash test, armed twice: the first 9 arms, a second 9 oopses
 * 10  pmem stray write faults, data intact
 * 11  kmap_local_page() opens a nesting, per-thread window
 * 12  kmap() of a protected page is flagged
 * 13  dax_direct_access() with dax_mk_readwrite()/dax_mk_noaccess()
 * 14  relaxed mode warns once and allows
 * 15  an exception gets no pmem window from the thread it interrupted
 * 16  the context-switch test with voluntary yields instead of preemption
 * 17  the boot's default fault mode is relaxed: a stray read is reported
 *     and the key becomes read-write for that context
 * 18  a key callback that returns true without granting gets no grant
 * 19  pmem crash test, armed twice: a plain stray write (oops if strict)
 *
 * The crash tests only arm on their first run: that is reported as a
 * skip, never as a pass.
 */
#include "dax.h"
#include "kernel.h"
#include "memremap.h"
#include "pgtable.h"
#include "pks.h"
#include "ptrace.h"
#include "sched.h"
#include "x86.h"

#define CHECK_DEFAULTS		0
#define RUN_SINGLE		1
#define ARM_CTX_SWITCH		2
#define CHECK_CTX_SWITCH	3
#define RUN_EXCEPTION		4
#define RUN_EXCEPTION_UPDATE	5
#define RUN_ALL_KEYS		6
#define RUN_CRASH_TEST		9
#define PMEM_STRAY_WRITE	10
#define PMEM_KMAP_LOCAL		11
#define PMEM_KMAP_FLAGGED	12
#define PMEM_DAX_GUARDS		13
#define PMEM_RELAXED		14
#define PMEM_EXCEPTION		15
#define RUN_CTX_SWITCH_YIELD	16
#define PMEM_RELAXED_DEFAULT	17
#define CALLBACK_NO_GRANT	18
#define RUN_PMEM_CRASH_TEST	19

extern void (*int3_hook)(struct pt_regs *regs);

#define CHECK(ok, cond, ...) do {					\
	if (!(cond)) {							\
		(ok) = false;						\
		printk("FAIL %s:%d: (%s) ", __func__, __LINE__, #cond);	\
		printk(__VA_ARGS__);					\
	}								\
} while (0)

static inline u32 pkrs_key(u32 pkrs, int pkey)
{
	return (pkrs >> PKR_PKEY_SHIFT(pkey)) & PKEY_ACCESS_MASK;
}

/* ---- Test context and the TEST key's fault callback ---- */

struct pks_test_ctx {
	int pkey;
	volatile bool armed;
	u32 read_grant;		/* what a read fault is granted */
	int handle_no_grant;	/* this many faults: true, no grant */
	volatile int fault_cnt;
	unsigned long last_addr;
	bool last_write;
	u32 handler_pkrs;	/* PKRS the callback ran with */
	u32 saved_pkrs;		/* PKRS of the context that faulted */
	char data[64];
};

static struct pks_test_ctx ctx_pool[8];

static struct pks_test_ctx *alloc_ctx(int pkey)
{
	unsigned long flags = local_irq_save();
	struct pks_test_ctx *ctx = NULL;
	unsigned i;

	for (i = 0; i < ARRAY_SIZE(ctx_pool); i++) {
		if (!ctx_pool[i].pkey) {
			ctx = &ctx_pool[i];
			memset(ctx, 0, sizeof(*ctx));
			ctx->pkey = pkey;
			break;
		}
	}
	local_irq_restore(flags);
	if (!ctx)
		panic("pks_test: out of contexts");
	ctx->read_grant = PKEY_READ_WRITE;
	memcpy(ctx->data, "DEADBEEF", 9);
	return ctx;
}

static void free_ctx(struct pks_test_ctx *ctx)
{
	WRITE_ONCE(ctx->pkey, 0);
}

static void *alloc_test_page(int pkey)
{
	return vmalloc_pages(1, PAGE_KERNEL_PKEY(pkey));
}

static void free_test_page(void *p)
{
	vfree_pages(p, 1);
}

/*
 * The TEST key's callback (V9's pks_test_callback): a fault the running
 * test expects is counted and granted in the interrupted context with
 * pks_update_exception(), so the access retries and completes.
 */
static bool pks_test_callback(struct pt_regs *regs, unsigned long address,
			      bool write)
{
	struct pks_test_ctx *ctx = current->pks_test_ctx;

	if (!ctx || !ctx->armed)
		return false;
	ctx->fault_cnt++;
	ctx->last_addr = address;
	ctx->last_write = write;
	ctx->handler_pkrs = pks_read_pkrs();
	ctx->saved_pkrs = pks_saved_pkrs(regs);
	if (ctx->handle_no_grant > 0) {
		/* "handled" without pks_update_exception(), then (-1) let
		 * the mode decide: test 18 */
		if (--ctx->handle_no_grant == 0)
			ctx->handle_no_grant = -1;
		return true;
	}
	if (ctx->handle_no_grant < 0)
		return false;
	pks_update_exception(regs, (u8)ctx->pkey,
			     write ? PKEY_READ_WRITE : (u8)ctx->read_grant);
	return true;
}

static void __attribute__((noinline)) do_access(void *ptr, bool write)
{
	if (write)
		WRITE_ONCE(*(u8 *)ptr, 0xa5);
	else
		(void)READ_ONCE(*(u8 *)ptr);
}

static bool check_access(struct pks_test_ctx *ctx, void *ptr, bool write,
			 bool expect_fault)
{
	bool ok = true;

	ctx->fault_cnt = 0;
	barrier();
	ctx->armed = true;
	barrier();
	do_access(ptr, write);
	barrier();
	ctx->armed = false;
	barrier();
	CHECK(ok, ctx->fault_cnt == (expect_fault ? 1 : 0),
	      "pkey %d %s: %d fault(s), expected %d\n", ctx->pkey,
	      write ? "write" : "read", ctx->fault_cnt, expect_fault);
	if (expect_fault && ctx->fault_cnt)
		CHECK(ok, ctx->last_write == write &&
		      ctx->last_addr == (unsigned long)ptr,
		      "fault reported for the wrong access\n");
	return ok;
}

static const struct {
	u32 prot;
	bool read_faults;
	bool write_faults;
	const char *name;
} prot_states[] = {
	{ PKEY_DISABLE_ACCESS, true, true, "access-disabled" },
	{ PKEY_DISABLE_WRITE, false, true, "write-disabled" },
	{ PKEY_READ_WRITE, false, false, "read-write" },
};

/* Set @prot with the API form @form, check the register, then access. */
static bool test_prot(struct pks_test_ctx *ctx, void *ptr, unsigned i,
		      int form)
{
	u32 before = pks_read_pkrs(), after, expect;
	u32 prot = prot_states[i].prot;
	bool ok = true;
	int w;

	for (w = 0; w < 2; w++) {
		switch (form) {
		case 0:
			pks_update_protection(ctx->pkey, prot);
			break;
		case 1:	/* V8 names */
			if (prot == PKEY_READ_WRITE)
				pks_mk_readwrite(ctx->pkey);
			else if (prot == PKEY_DISABLE_ACCESS)
				pks_mk_noaccess(ctx->pkey);
			else
				pks_set_nowrite(ctx->pkey);
			break;
		default: /* V10 names */
			if (prot == PKEY_READ_WRITE)
				pks_set_readwrite(ctx->pkey);
			else if (prot == PKEY_DISABLE_ACCESS)
				pks_set_noaccess(ctx->pkey);
			else
				pks_set_nowrite(ctx->pkey);
			break;
		}
		after = pks_read_pkrs();
		expect = pmg_pkval_update(before, (unsigned)ctx->pkey, prot);
		CHECK(ok, after == expect,
		      "pkey %d %s: PKRS 0x%08x, expected 0x%08x\n", ctx->pkey,
		      prot_states[i].name, after, expect);
		CHECK(ok, current->pkrs == after,
		      "thread pkrs 0x%08x != MSR 0x%08x\n", current->pkrs,
		      after);
		ok &= check_access(ctx, ptr, w,
				   w ? prot_states[i].write_faults
				     : prot_states[i].read_faults);
	}
	return ok;
}

/* The seeds' run_single(): every rights state, read and write. */
static bool run_single_key(int pkey, int form)
{
	struct pks_test_ctx *ctx = alloc_ctx(pkey);
	struct pks_test_ctx *saved = current->pks_test_ctx;
	void *ptr = alloc_test_page(pkey);
	bool ok = true;
	unsigned i;

	current->pks_test_ctx = ctx;
	for (i = 0; i < ARRAY_SIZE(prot_states); i++)
		ok &= test_prot(ctx, ptr, i, form);
	pks_mk_noaccess(pkey);
	current->pks_test_ctx = saved;
	free_test_page(ptr);
	free_ctx(ctx);
	return ok;
}

static bool run_single(void)
{
	return run_single_key(PKS_KEY_TEST, 0);
}

/* ---- 0: defaults ---- */

struct defaults_result {
	bool seen[NR_CPUS];
	u32 pkrs[NR_CPUS];
	u32 boot_pkrs[NR_CPUS];
	u32 thread_pkrs[NR_CPUS];
	bool cr4_pks[NR_CPUS];
};

static void check_pkey_settings(void *data)
{
	struct defaults_result *r = data;
	struct cpu *c = this_cpu();

	r->pkrs[c->id] = pks_read_pkrs();
	r->boot_pkrs[c->id] = c->boot_pkrs;
	r->thread_pkrs[c->id] = c->curr->pkrs;
	r->cr4_pks[c->id] = !!(read_cr4() & X86_CR4_PKS);
	r->seen[c->id] = true;
}

static volatile u32 child_pkrs;

static void record_pkrs(void *arg)
{
	(void)arg;
	child_pkrs = pks_read_pkrs();
}

static bool check_defaults(void)
{
	struct defaults_result r;
	pteval_t *pte;
	bool ok = true;
	int i, missing;

	memset(&r, 0, sizeof(r));
	missing = on_each_cpu(check_pkey_settings, &r);
	CHECK(ok, !missing, "%d CPU(s) did not answer\n", missing);
	for (i = 0; i < nr_cpus_online; i++) {
		printk("cpu%d: PKRS 0x%08x (at setup 0x%08x) CR4.PKS %d\n", i,
		       r.pkrs[i], r.boot_pkrs[i], r.cr4_pks[i]);
		CHECK(ok, r.seen[i], "cpu%d did not run the check\n", i);
		CHECK(ok, r.cr4_pks[i], "cpu%d: CR4.PKS clear\n", i);
		CHECK(ok, r.pkrs[i] == pks_init_value,
		      "cpu%d value incorrect: 0x%x expected 0x%x\n", i,
		      r.pkrs[i], pks_init_value);
		CHECK(ok, r.boot_pkrs[i] == pks_init_value,
		      "cpu%d set up with 0x%x\n", i, r.boot_pkrs[i]);
		CHECK(ok, r.thread_pkrs[i] == pks_init_value,
		      "cpu%d thread value 0x%x\n", i, r.thread_pkrs[i]);
	}

	/* The consumer table and the seeds' macro agree. */
	CHECK(ok, PKS_INIT_VALUE == 0x55555554, "PKS_INIT_VALUE 0x%08x\n",
	      PKS_INIT_VALUE);
	CHECK(ok, pmg_core_init_value(&pks_core) == pks_init_value,
	      "table 0x%08x\n", pmg_core_init_value(&pks_core));
	CHECK(ok, pkrs_key(pks_init_value, PKS_KEY_DEFAULT) == 0,
	      "key 0 not read/write\n");

	/* A thread created inside a window starts at the defaults. */
	pks_mk_readwrite(PKS_KEY_TEST);
	kthread_join(kthread_run(record_pkrs, NULL, "pks_child"));
	pks_mk_noaccess(PKS_KEY_TEST);
	CHECK(ok, child_pkrs == pks_init_value,
	      "new thread started with 0x%08x\n", child_pkrs);
	CHECK(ok, pks_read_pkrs() == pks_init_value, "PKRS 0x%08x after\n",
	      pks_read_pkrs());

	/* The page-table macros: key in PTE bits 59..62. */
	CHECK(ok, _PAGE_PKEY(PKS_KEY_PGMAP_PROTECTION) == (2ULL << 59),
	      "_PAGE_PKEY\n");
	CHECK(ok, (PAGE_KERNEL_PKEY(15).pgprot & _PAGE_PKEY_MASK) ==
	      (0xfULL << 59), "PAGE_KERNEL_PKEY\n");
	pte = lookup_pte((unsigned long)pmem0.virt);
	CHECK(ok, pte && pte_pkey(*pte) == PKS_KEY_PGMAP_PROTECTION,
	      "pmem0 PTE key\n");
	pte = lookup_pte((unsigned long)&r);
	CHECK(ok, pte && pte_pkey(*pte) == PKS_KEY_DEFAULT, "stack PTE key\n");
	return ok;
}

/* ---- 2/3/16: context switch (tools/testing/selftests/x86/test_pks.c) ---- */

static struct {
	struct task *a, *b;
	bool use_yield;
	volatile int a_stage;		/* 1 armed, 2 resumed after B */
	volatile bool a_armed;
	volatile bool b_done;
	volatile bool check_req;
	volatile bool cancel;
	volatile bool a_done;
	bool a_single_pass, b_pass, a_check_pass;
	u32 a_armed_pkrs, b_start_pkrs, b_end_pkrs;
	u32 a_saved_pkrs;		/* A's task->pkrs, read by B */
	unsigned long a_switches;
} cs;

/*
 * Wait for @flag: by yielding, or (preemption variant) by spinning so that
 * only the timer can switch us out.  Bounded, so a kernel that never
 * preempts fails the test instead of hanging the boot.
 */
static bool cs_wait(volatile bool *flag)
{
	unsigned long end = jiffies + 2 * HZ;

	while (!*flag) {
		if ((long)(jiffies - end) >= 0)
			return false;
		if (cs.use_yield)
			yield();
		else
			cpu_relax();
	}
	return true;
}

static void ctx_thread_a(void *arg)
{
	struct pks_test_ctx *ctx = alloc_ctx(PKS_KEY_TEST);
	unsigned long sw;
	u32 pkrs;

	(void)arg;
	current->pks_test_ctx = ctx;
	/* "Allocate and run test." */
	cs.a_single_pass = run_single_key(ctx->pkey, 0);
	/* arm_ctx_switch(): a known state to survive the switch. */
	pks_mk_readwrite(ctx->pkey);
	cs.a_armed_pkrs = pks_read_pkrs();
	sw = current->nr_switch_in;
	cs.a_stage = 1;
	cs.a_armed = true;
	if (!cs_wait(&cs.b_done))
		printk("A: B did not finish (no context switch?)\n");
	cs.a_switches = current->nr_switch_in - sw;
	cs.a_stage = 2;

	/* Armed and switched: now just wait for test 3 (or cleanup). */
	while (!cs.check_req && !cs.cancel)
		yield();
	if (cs.check_req) {
		/* check_ctx_switch() */
		pkrs = pks_read_pkrs();
		cs.a_check_pass = pkrs_key(pkrs, ctx->pkey) == 0 &&
				  pkrs == cs.a_armed_pkrs;
		if (!cs.a_check_pass)
			printk("Context switch check failed: pkey %d: 0x%x "
			       "reg: 0x%x\n", ctx->pkey,
			       pkrs_key(pkrs, ctx->pkey), pkrs);
	}
	pks_mk_noaccess(ctx->pkey);
	current->pks_test_ctx = NULL;
	free_ctx(ctx);
	cs.a_done = true;
}

static void ctx_thread_b(void *arg)
{
	(void)arg;
	if (!cs_wait(&cs.a_armed)) {
		printk("B: A never armed (no context switch?)\n");
		cs.b_done = true;
		return;
	}
	/* B starts from its own value, not A's open window. */
	cs.b_start_pkrs = pks_read_pkrs();
	/*
	 * A is switched out (preempted by the timer, or yielding): its saved
	 * value must be its own, armed value.  Were the exception exit to
	 * reschedule before restoring PKRS (seed 010's order swapped), A would
	 * have been switched out still holding the timer handler's value.
	 */
	cs.a_saved_pkrs = READ_ONCE(cs.a->pkrs);
	/* "run test with the same pkey" */
	cs.b_pass = run_single_key(PKS_KEY_TEST, 1);
	cs.b_end_pkrs = pks_read_pkrs();
	cs.b_done = true;
}

static bool arm_ctx_switch_mode(bool use_yield)
{
	bool ok = true;

	if (cs.a) {
		printk("Context already armed\n");
		cs.cancel = true;
		kthread_join(cs.a);
	}
	memset(&cs, 0, sizeof(cs));
	cs.use_yield = use_yield;
	cs.a = kthread_run(ctx_thread_a, NULL, "pks_ctx_a");
	cs.b = kthread_run(ctx_thread_b, NULL, "pks_ctx_b");
	while (cs.a_stage < 2)
		yield();
	kthread_join(cs.b);
	cs.b = NULL;

	printk("ctx switch (%s): A armed PKRS 0x%08x, switched out %lu "
	       "time(s); B started 0x%08x ended 0x%08x\n",
	       use_yield ? "yield" : "preemption", cs.a_armed_pkrs,
	       cs.a_switches, cs.b_start_pkrs, cs.b_end_pkrs);
	CHECK(ok, cs.a_single_pass, "A: run_single failed\n");
	CHECK(ok, cs.b_pass, "B: run_single failed\n");
	CHECK(ok, pkrs_key(cs.a_armed_pkrs, PKS_KEY_TEST) == 0,
	      "A not armed\n");
	CHECK(ok, cs.b_start_pkrs == pks_init_value,
	      "B inherited A's PKRS 0x%08x\n", cs.b_start_pkrs);
	CHECK(ok, cs.b_end_pkrs == pks_init_value, "B ended at 0x%08x\n",
	      cs.b_end_pkrs);
	CHECK(ok, cs.a_switches > 0, "A was never switched out\n");
	CHECK(ok, cs.a_saved_pkrs == cs.a_armed_pkrs, "A was switched out "
	      "holding 0x%08x, not its own 0x%08x (rescheduled before the "
	      "exception exit restored PKRS?)\n", cs.a_saved_pkrs,
	      cs.a_armed_pkrs);
	return ok;
}

static bool check_ctx_switch(void)
{
	bool ok = true;

	if (!cs.a) {
		printk("No Context switch configured\n");
		return false;
	}
	cs.check_req = true;
	kthread_join(cs.a);
	cs.a = NULL;
	CHECK(ok, cs.a_check_pass, "A's PKRS was not restored\n");
	return ok;
}

static bool arm_ctx_switch(void)
{
	return arm_ctx_switch_mode(false);
}

static bool ctx_switch_yield(void)
{
	bool armed = arm_ctx_switch_mode(true);

	/* Check even when arming failed: it joins thread A. */
	return check_ctx_switch() && armed;
}

/* ---- 4: exceptions ---- */

static struct {
	u32 outer_handler, outer_saved, outer_modified, outer_after;
	u32 inner_handler, inner_saved;
	int outer_depth, inner_depth;
	void *addr;
	int handler_read_rc;
	unsigned win;
} es;

static void exc_hook_inner(struct pt_regs *regs)
{
	es.inner_handler = pks_read_pkrs();
	es.inner_saved = pks_saved_pkrs(regs);
	es.inner_depth = this_cpu()->irq_depth;
	/* A change in the nested handler must not leak outwards. */
	pks_mk_readwrite(PKS_KEY_TEST);
}

static void exc_hook_outer(struct pt_regs *regs)
{
	es.outer_handler = pks_read_pkrs();
	es.outer_saved = pks_saved_pkrs(regs);
	es.outer_depth = this_cpu()->irq_depth;
	pks_set_nowrite(PKS_KEY_TEST);
	es.outer_modified = pks_read_pkrs();
	int3_hook = exc_hook_inner;
	__asm__ __volatile__("int3" ::: "memory");
	int3_hook = exc_hook_outer;
	es.outer_after = pks_read_pkrs();
}

static bool run_exception(void)
{
	u32 thread_val, after, handler_w;
	unsigned long end;
	bool ok = true;

	pks_mk_readwrite(PKS_KEY_TEST);
	thread_val = pks_read_pkrs();
	handler_w = pmg_pkval_update(pks_init_value, PKS_KEY_TEST,
				     PKEY_DISABLE_WRITE);
	memset(&es, 0, sizeof(es));
	int3_hook = exc_hook_outer;
	__asm__ __volatile__("int3" ::: "memory");
	int3_hook = NULL;
	after = pks_read_pkrs();

	printk("int3: thread 0x%08x, handler 0x%08x (saved 0x%08x), "
	       "handler set 0x%08x, nested 0x%08x (saved 0x%08x), back "
	       "0x%08x / 0x%08x\n", thread_val, es.outer_handler,
	       es.outer_saved, es.outer_modified, es.inner_handler,
	       es.inner_saved, es.outer_after, after);
	CHECK(ok, thread_val != pks_init_value, "test setup\n");
	CHECK(ok, es.outer_handler == pks_init_value,
	      "handler ran with 0x%08x\n", es.outer_handler);
	CHECK(ok, es.outer_saved == thread_val, "aux held 0x%08x\n",
	      es.outer_saved);
	CHECK(ok, es.outer_depth == 1, "depth %d\n", es.outer_depth);
	CHECK(ok, es.outer_modified == handler_w, "handler change 0x%08x\n",
	      es.outer_modified);
	CHECK(ok, es.inner_handler == pks_init_value,
	      "nested handler ran with 0x%08x\n", es.inner_handler);
	CHECK(ok, es.inner_saved == handler_w, "nested aux held 0x%08x\n",
	      es.inner_saved);
	CHECK(ok, es.inner_depth == 2, "nested depth %d\n", es.inner_depth);
	CHECK(ok, es.outer_after == handler_w,
	      "outer handler got 0x%08x back\n", es.outer_after);
	CHECK(ok, after == thread_val, "thread got 0x%08x back\n", after);
	CHECK(ok, current->pkrs == thread_val, "thread pkrs 0x%08x\n",
	      current->pkrs);

	/* The timer interrupt too: it fires while the thread's value is
	 * not the init value. */
	timer_probe.armed = true;
	end = jiffies + 200;
	while (timer_probe.armed && (long)(jiffies - end) < 0)
		cpu_relax();
	after = pks_read_pkrs();
	printk("timer: handler 0x%08x (saved 0x%08x, depth %d), thread "
	       "0x%08x\n", timer_probe.handler_pkrs, timer_probe.saved_pkrs,
	       timer_probe.depth, after);
	CHECK(ok, !timer_probe.armed, "no timer tick\n");
	CHECK(ok, timer_probe.handler_pkrs == pks_init_value,
	      "timer ran with 0x%08x\n", timer_probe.handler_pkrs);
	CHECK(ok, timer_probe.saved_pkrs == thread_val,
	      "timer aux held 0x%08x\n", timer_probe.saved_pkrs);
	CHECK(ok, after == thread_val, "thread got 0x%08x back\n", after);

	pks_mk_noaccess(PKS_KEY_TEST);
	CHECK(ok, pks_read_pkrs() == pks_init_value, "end 0x%08x\n",
	      pks_read_pkrs());
	return ok;
}

/* ---- 5: exception update from a key callback ---- */

static void exc_hook_update(struct pt_regs *regs)
{
	es.outer_handler = pks_read_pkrs();
	pks_update_exception(regs, PKS_KEY_TEST, PKEY_DISABLE_WRITE);
	es.outer_after = pks_read_pkrs();
}

static bool run_exception_update(void)
{
	struct pks_test_ctx *ctx = alloc_ctx(PKS_KEY_TEST);
	volatile u8 *ptr = alloc_test_page(PKS_KEY_TEST);
	u32 rw = pmg_pkval_update(pks_init_value, PKS_KEY_TEST,
				  PKEY_READ_WRITE);
	bool ok = true;
	u32 pkrs;
	u8 v;

	current->pks_test_ctx = ctx;

	/* Directly: the edit lands in the interrupted context only. */
	memset(&es, 0, sizeof(es));
	int3_hook = exc_hook_update;
	__asm__ __volatile__("int3" ::: "memory");
	int3_hook = NULL;
	pkrs = pks_read_pkrs();
	CHECK(ok, es.outer_handler == pks_init_value &&
	      es.outer_after == pks_init_value,
	      "handler's own PKRS changed: 0x%08x\n", es.outer_after);
	CHECK(ok, pkrs == pmg_pkval_update(pks_init_value, PKS_KEY_TEST,
					   PKEY_DISABLE_WRITE),
	      "int3 update gave 0x%08x\n", pkrs);
	pks_mk_noaccess(ctx->pkey);

	/*
	 * From the key callback, granting more than the access needs: a read
	 * fault is granted read/write, so the write after it must not fault.
	 * (Were pks_update_exception() a no-op, the fault path would grant
	 * only what the read needs and the write would fault.)
	 */
	ctx->read_grant = PKEY_READ_WRITE;
	ctx->armed = true;
	v = ptr[0];			/* faults; callback grants RW */
	ptr[0] = 0x42;			/* must not fault again */
	ptr[1] = 0x43;
	ctx->armed = false;
	pkrs = pks_read_pkrs();
	printk("update: %d fault(s), callback ran with 0x%08x, fault "
	       "context had 0x%08x, now 0x%08x\n", ctx->fault_cnt,
	       ctx->handler_pkrs, ctx->saved_pkrs, pkrs);
	CHECK(ok, ctx->fault_cnt == 1, "%d faults\n", ctx->fault_cnt);
	CHECK(ok, ctx->handler_pkrs == pks_init_value, "callback PKRS\n");
	CHECK(ok, pkrs_key(ctx->saved_pkrs, ctx->pkey) == PKEY_DISABLE_ACCESS,
	      "faulting context had 0x%08x\n", ctx->saved_pkrs);
	CHECK(ok, pkrs == rw, "update did not stick: 0x%08x\n", pkrs);
	CHECK(ok, ptr[0] == 0x42 && ptr[1] == 0x43, "data\n");

	/* A read granted write-disabled: reads go on, a write faults. */
	pks_mk_noaccess(ctx->pkey);
	ctx->read_grant = PKEY_DISABLE_WRITE;
	ctx->fault_cnt = 0;
	ctx->armed = true;
	v = ptr[1];
	v = ptr[0];
	CHECK(ok, ctx->fault_cnt == 1, "read: %d faults\n", ctx->fault_cnt);
	CHECK(ok, pkrs_key(pks_read_pkrs(), ctx->pkey) == PKEY_DISABLE_WRITE,
	      "read grant 0x%08x\n", pks_read_pkrs());
	ptr[2] = 0x44;
	ctx->armed = false;
	CHECK(ok, ctx->fault_cnt == 2, "write: %d faults\n", ctx->fault_cnt);
	CHECK(ok, v == 0x42 && ptr[2] == 0x44, "data\n");

	pks_mk_noaccess(ctx->pkey);
	current->pks_test_ctx = NULL;
	free_test_page((void *)ptr);
	free_ctx(ctx);
	return ok;
}

/* ---- 6: all keys ---- */

static bool run_all_keys(void)
{
	u32 before = pks_read_pkrs();
	bool ok = true;
	int key;

	for (key = 1; key < PMG_NR_KEYS; key++) {
		pks_key_callback old = pks_get_key_callback(key);
		bool claimed = false;
		bool kok;

		/* Unused keys get a temporary consumer entry. */
		if (!pks_core.key[key].used) {
			CHECK(ok, !pmg_core_key_claim(&pks_core, key,
						      "pks_test",
						      PMG_RIGHTS_AD),
			      "claim %d\n", key);
			claimed = true;
		}
		pks_set_key_callback(key, pks_test_callback);
		kok = run_single_key(key, key % 3);
		pks_set_key_callback(key, old);
		if (claimed)
			pmg_core_key_release(&pks_core, key);
		/* Leave the key at its default. */
		pks_update_protection(key, pkrs_key(pks_init_value, key));
		if (!kok)
			printk("pkey %d failed\n", key);
		ok &= kok;
	}
	CHECK(ok, pks_read_pkrs() == before, "PKRS 0x%08x after\n",
	      pks_read_pkrs());

	/*
	 * A key whose default allows access, closed with pks_mk_noaccess():
	 * the access faults.  PKRS is only ever what this kernel wrote, so
	 * the fault path never "syncs" it back to the default (no_sync).
	 */
	{
		struct pks_test_ctx *ctx;
		int k = PKS_KEY_NR_CONSUMERS;
		volatile u8 *p;

		CHECK(ok, !pmg_core_key_claim(&pks_core, k, "pks_test_rw",
					      PMG_RIGHTS_RW), "claim %d\n", k);
		ctx = alloc_ctx(k);
		p = alloc_test_page(k);
		pks_set_key_callback(k, pks_test_callback);
		current->pks_test_ctx = ctx;
		pks_mk_noaccess(k);
		ctx->armed = true;
		(void)p[0];		/* must fault: the callback counts */
		ctx->armed = false;
		CHECK(ok, ctx->fault_cnt == 1, "noaccess on a read/write-"
		      "default key: %d faults (synced to the default?)\n",
		      ctx->fault_cnt);
		current->pks_test_ctx = NULL;
		pks_set_key_callback(k, NULL);
		pks_update_protection(k, pkrs_key(pks_init_value, k));
		free_test_page((void *)p);
		free_ctx(ctx);
		pmg_core_key_release(&pks_core, k);
	}
	CHECK(ok, pks_read_pkrs() == before, "PKRS 0x%08x after\n",
	      pks_read_pkrs());

	/* Key 0 and keys past 15 are refused, the register untouched. */
	printk("expect two warnings for invalid keys:\n");
	pks_mk_readwrite(0);
	pks_mk_noaccess(PMG_NR_KEYS);
	CHECK(ok, pks_read_pkrs() == before, "invalid key changed PKRS\n");
	CHECK(ok, pks_set_key_callback(0, pks_test_callback) == -EINVAL,
	      "callback on key 0\n");
	return ok;
}

/* ---- 9 / 19: crash tests, armed twice ---- */

/* Set by a test that did not test anything: the runner reports a skip. */
static const char *skip_reason;

static int crash_armed;

static void crash_it(void)
{
	struct pks_test_ctx *ctx = alloc_ctx(PKS_KEY_TEST);
	void *ptr = alloc_test_page(ctx->pkey);

	pr_warn("     ***** BEGIN: Unhandled fault test *****\n");
	/* This purposely faults */
	memcpy(ptr, ctx->data, 8);
	/* Should never get here if so the test failed */
	free_test_page(ptr);
	free_ctx(ctx);
}

static void crash_it_pmem(void)
{
	volatile u64 *p = (void *)(pmem0.phys + pmem0.size - PAGE_SIZE);

	pr_warn("     ***** BEGIN: stray pmem write, pks_fault_mode=%s *****\n",
		pmg_mode_name(pks_fault_mode));
	*p = 0xdeadbeefdeadbeefULL;	/* oops when strict */
	pr_warn("stray write went through (pks_fault_mode=%s)\n",
		pmg_mode_name(pks_fault_mode));
}

static bool arm_or_run_crash_test(int nr)
{
	/*
	 * WARNING: the crash tests crash.  Arm and print a warning; the same
	 * number a second time runs it.
	 */
	if (crash_armed != nr) {
		pr_warn("CAUTION: The crash test will cause an oops.\n");
		pr_warn("         Specify %d a second time to run\n", nr);
		pr_warn("         run any other test to clear\n");
		crash_armed = nr;
		/* Arming tests nothing: a skip, not a pass. */
		skip_reason = "armed only: the same number again crashes";
		return true;
	}
	crash_armed = 0;
	if (nr == RUN_CRASH_TEST)
		crash_it();
	else
		crash_it_pmem();
	return false;
}

static bool run_crash_test(void)
{
	return arm_or_run_crash_test(RUN_CRASH_TEST);
}

static bool run_pmem_crash_test(void)
{
	return arm_or_run_crash_test(RUN_PMEM_CRASH_TEST);
}

/* ---- PMEM ---- */

#define PMEM_TEST_PFN(n)	((pmem0.phys >> PAGE_SHIFT) + 16 + (n))

static unsigned saved_mode;

static void mode_push(unsigned mode)
{
	saved_mode = pks_fault_mode;
	pks_fault_mode = mode;
}

static void mode_pop(void)
{
	pks_fault_mode = saved_mode;
}

static bool try_write(void *addr, u64 val)
{
	return copy_to_kernel_nofault(addr, &val, sizeof(val)) == 0;
}

static bool try_read(const void *addr)
{
	u64 v;

	return copy_from_kernel_nofault(&v, addr, sizeof(v)) == 0;
}

/* 10: a stray write into pmem faults and the data stays intact. */
static bool pmem_stray_write(void)
{
	struct page *page = pfn_to_page(PMEM_TEST_PFN(0));
	size_t off = page_to_pfn(page) * PAGE_SIZE - pmem0.phys;
	char pattern[64], back[64];
	unsigned long strict0;
	bool ok = true;
	void *addr = page_address(page);
	int rc;

	mode_push(PMG_MODE_STRICT);
	memset(pattern, 0x5a, sizeof(pattern));
	CHECK(ok, !pmem_rw(&pmem0, off, pattern, sizeof(pattern), true),
	      "pmem_rw\n");
	strict0 = pks_stats.strict;

	rc = copy_to_kernel_nofault(addr, "STRAY!!!", 8);
	CHECK(ok, rc == -EFAULT, "stray write to pmem returned %d: "
	      "nothing stopped it\n", rc);
	CHECK(ok, pks_stats.strict == strict0 + 1,
	      "the fault did not go through the policy\n");
	CHECK(ok, !try_read(addr), "stray read was not stopped\n");

	CHECK(ok, !pmem_rw(&pmem0, off, back, sizeof(back), false),
	      "pmem_rw\n");
	CHECK(ok, !memcmp(back, pattern, sizeof(back)),
	      "pmem data corrupted: %02x %02x %02x\n", (u8)back[0],
	      (u8)back[1], (u8)back[2]);
	CHECK(ok, pks_read_pkrs() == pks_init_value, "PKRS 0x%08x\n",
	      pks_read_pkrs());
	mode_pop();
	return ok;
}

static volatile int child_rc;

static void child_try_write(void *addr)
{
	child_rc = try_write(addr, 0x1111) ? 0 : -EFAULT;
}

/* 11: kmap_local_page() windows: open, nest, per thread, close. */
static bool pmem_kmap_local(void)
{
	struct page *p1 = pfn_to_page(PMEM_TEST_PFN(1));
	struct page *p2 = pfn_to_page(PMEM_TEST_PFN(2));
	struct page *ram = virt_to_page((const void *)&child_rc);
	bool ok = true;
	void *a, *b;

	mode_push(PMG_MODE_STRICT);
	CHECK(ok, devmap_protected(p1), "pmem0 page not protected\n");
	CHECK(ok, !devmap_protected(ram), "RAM page protected\n");
	CHECK(ok, !devmap_protected(pfn_to_page(PMEM1_START >> PAGE_SHIFT)),
	      "pmem1 page protected\n");
	CHECK(ok, pgmap_window_count() == 0, "count %u\n",
	      pgmap_window_count());
	CHECK(ok, !try_write(page_address(p1), 1), "unmapped write worked\n");

	a = kmap_local_page(p1);
	CHECK(ok, pgmap_window_count() == 1, "count %u\n",
	      pgmap_window_count());
	CHECK(ok, try_write(a, 0x1234), "kmap_local_page write faulted\n");
	b = kmap_local_page(p2);
	CHECK(ok, pgmap_window_count() == 2, "nested count %u\n",
	      pgmap_window_count());
	CHECK(ok, try_write(b, 0x5678), "nested write faulted\n");
	kunmap_local(b);
	CHECK(ok, pgmap_window_count() == 1, "count %u\n",
	      pgmap_window_count());
	CHECK(ok, try_write(a, 0x1235), "outer window closed too early\n");

	/* The window is this thread's alone. */
	kthread_join(kthread_run(child_try_write, a, "pks_kmap_other"));
	CHECK(ok, child_rc == -EFAULT, "another thread wrote through the "
	      "window\n");

	kunmap_local(a);
	CHECK(ok, pgmap_window_count() == 0, "count %u\n",
	      pgmap_window_count());
	CHECK(ok, !try_write(a, 1), "write after kunmap_local worked\n");
	CHECK(ok, pks_read_pkrs() == pks_init_value, "PKRS 0x%08x\n",
	      pks_read_pkrs());

	/* Ordinary RAM: no window, no count. */
	kmap_local_page(ram);
	CHECK(ok, pgmap_window_count() == 0, "RAM kmap counted\n");
	kunmap_local(page_address(ram));

	/* kmap_atomic(): the same window, preemption off until the unmap. */
	{
		int pc = this_cpu()->preempt_count;

		a = kmap_atomic(p1);
		CHECK(ok, this_cpu()->preempt_count == pc + 1,
		      "kmap_atomic left preemption on\n");
		CHECK(ok, pgmap_window_count() == 1, "atomic count %u\n",
		      pgmap_window_count());
		CHECK(ok, try_write(a, 0x4321), "kmap_atomic write faulted\n");
		kunmap_atomic(a);
		CHECK(ok, this_cpu()->preempt_count == pc,
		      "kunmap_atomic left preemption off\n");
		CHECK(ok, pgmap_window_count() == 0, "count %u\n",
		      pgmap_window_count());
		CHECK(ok, !try_write(a, 1),
		      "write after kunmap_atomic worked\n");
	}
	mode_pop();
	return ok;
}

/* 12: kmap() of a protected page is flagged and opens nothing. */
static bool pmem_kmap_flagged(void)
{
	struct page *p = pfn_to_page(PMEM_TEST_PFN(3));
	struct page *p1 = pfn_to_page(PMEM1_START >> PAGE_SHIFT);
	unsigned long w0 = kmap_protected_warnings;
	unsigned long d0 = dump_stack_last.count;
	char sym[KSYM_LEN];
	bool in_trace = false;
	bool ok = true;
	void *a;
	int i;

	mode_push(PMG_MODE_STRICT);
	printk("expect a kmap() warning with a call trace:\n");
	a = kmap(p);
	CHECK(ok, kmap_protected_warnings == w0 + 1, "not flagged\n");
	/* "a warning with a trace from that call stack" (seed 001): the
	 * trace goes through this test, not only kmap()'s caller line. */
	CHECK(ok, dump_stack_last.count == d0 + 1, "no call trace\n");
	for (i = 0; i < dump_stack_last.frames && i < DUMP_STACK_KEEP; i++)
		if (!strncmp(ksym(dump_stack_last.ret[i], sym, sizeof(sym)),
			     "pmem_kmap_flagged+", 18))
			in_trace = true;
	CHECK(ok, dump_stack_last.frames >= 3 && in_trace,
	      "trace of %d frames, test %sin it\n", dump_stack_last.frames,
	      in_trace ? "" : "not ");
	CHECK(ok, pgmap_window_count() == 0, "kmap() opened a window\n");
	CHECK(ok, !try_write(a, 1), "write through kmap() worked\n");
	kunmap(p);

	a = kmap(virt_to_page(&w0));
	CHECK(ok, kmap_protected_warnings == w0 + 1, "RAM page flagged\n");
	CHECK(ok, dump_stack_last.count == d0 + 1, "RAM page traced\n");
	kunmap(virt_to_page(&w0));
	a = kmap(p1);
	CHECK(ok, kmap_protected_warnings == w0 + 1, "pmem1 page flagged\n");
	CHECK(ok, try_write(a, 1), "pmem1 write failed\n");
	kunmap(p1);
	mode_pop();
	return ok;
}

/*
 * 13's flush part, in a thread of its own under relaxed mode (a stray
 * access is allowed and counted, not an oops; the grant dies with the
 * thread): guarded flushes fault never, an unguarded one faults once.
 */
struct flush_probe {
	unsigned long faults_guarded, faults_unguarded;
	int rc_writeback, rc_memzero;
};

static void flush_thread(void *arg)
{
	struct flush_probe *fp = arg;
	struct dax_device *dax = &pmem0.dax;
	unsigned long f0 = pks_stats.faults;
	void *kaddr = NULL;

	fp->rc_writeback = dax_writeback(dax, 40, 2);
	fp->rc_memzero = dax_memzero(dax, 41, 64, 128);
	fp->faults_guarded = pks_stats.faults - f0;
	/* The positive control: the flush really touches protected pmem. */
	dax_direct_access(dax, 42, 1, &kaddr, NULL);
	f0 = pks_stats.faults;
	dax_flush(dax, kaddr, 256);
	fp->faults_unguarded = pks_stats.faults - f0;
}

/* 13: dax_direct_access() and its guards. */
static bool pmem_dax_guards(void)
{
	struct dax_device *dax = &pmem0.dax, *dax1 = &pmem1.dax;
	unsigned long pfn = 0;
	char buf[16], back[16];
	void *kaddr = NULL;
	bool ok = true;
	long n;

	mode_push(PMG_MODE_STRICT);
	CHECK(ok, dax_map_protected(dax), "pmem0 not map_protected\n");
	CHECK(ok, !dax_map_protected(dax1), "pmem1 map_protected\n");

	n = dax_direct_access(dax, 32, 2, &kaddr, &pfn);
	CHECK(ok, n == 2, "direct_access %ld\n", n);
	CHECK(ok, kaddr == (char *)pmem0.virt + 32 * PAGE_SIZE &&
	      pfn == (pmem0.phys >> PAGE_SHIFT) + 32, "kaddr %p pfn 0x%lx\n",
	      kaddr, pfn);
	CHECK(ok, !try_write(kaddr, 7), "unguarded dax write worked\n");

	dax_mk_readwrite(dax);
	CHECK(ok, try_write(kaddr, 0xda), "guarded dax write faulted\n");
	dax_mk_readwrite(dax);		/* nests */
	CHECK(ok, pgmap_window_count() == 2, "count %u\n",
	      pgmap_window_count());
	dax_mk_noaccess(dax);
	CHECK(ok, try_write((char *)kaddr + PAGE_SIZE, 0xdb),
	      "inner guard closed the outer one\n");
	dax_mk_noaccess(dax);
	CHECK(ok, !try_write(kaddr, 7), "write after dax_mk_noaccess worked\n");
	CHECK(ok, pgmap_window_count() == 0, "count %u\n",
	      pgmap_window_count());

	/* dax_memzero() guards itself; the driver's own path reads back. */
	CHECK(ok, !dax_memzero(dax, 32, 8, 8), "dax_memzero\n");
	CHECK(ok, !pmem_rw(&pmem0, 32 * PAGE_SIZE, back, 16, false),
	      "pmem_rw\n");
	memset(buf, 0, sizeof(buf));
	buf[0] = (char)0xda;
	CHECK(ok, !memcmp(back, buf, 16), "data %02x %02x\n", (u8)back[0],
	      (u8)back[8]);

	/* Ranges and dead devices. */
	n = dax_direct_access(dax, (pmem0.size >> PAGE_SHIFT) - 1, 8, &kaddr,
			      NULL);
	CHECK(ok, n == 1, "clipped to %ld\n", n);
	n = dax_direct_access(dax, pmem0.size >> PAGE_SHIFT, 1, &kaddr, NULL);
	CHECK(ok, n == -EIO, "past the end: %ld\n", n);
	dax->alive = false;
	n = dax_direct_access(dax, 0, 1, &kaddr, NULL);
	CHECK(ok, n == -ENXIO && !dax_map_protected(dax), "dead device\n");
	dax_mk_readwrite(dax);
	CHECK(ok, pgmap_window_count() == 0, "guard on a dead device\n");
	dax->alive = true;

	/* dax_flush() (dax_writeback(), dax_memzero()) inside the guards. */
	{
		struct flush_probe fp = { 0, 0, 0, 0 };
		unsigned mode = pks_fault_mode;	/* inside mode_push() */

		pks_fault_mode = PMG_MODE_RELAXED;
		pks_core.key[PKS_KEY_PGMAP_PROTECTION].warned = 0;
		printk("expect one relaxed-mode warning (unguarded "
		       "dax_flush):\n");
		kthread_join(kthread_run(flush_thread, &fp, "pks_flush"));
		pks_fault_mode = mode;
		CHECK(ok, !fp.rc_writeback && !fp.rc_memzero,
		      "writeback %d memzero %d\n", fp.rc_writeback,
		      fp.rc_memzero);
		CHECK(ok, fp.faults_guarded == 0, "guarded dax_flush faulted "
		      "%lu time(s)\n", fp.faults_guarded);
		CHECK(ok, fp.faults_unguarded == 1, "unguarded dax_flush: "
		      "%lu faults (it must touch the lines)\n",
		      fp.faults_unguarded);
	}

	/* Unprotected device: guards are no-ops, access just works. */
	n = dax_direct_access(dax1, 0, 1, &kaddr, NULL);
	CHECK(ok, n == 1 && try_write(kaddr, 0x1), "pmem1 access\n");
	dax_mk_readwrite(dax1);
	CHECK(ok, pgmap_window_count() == 0, "pmem1 guard counted\n");
	dax_mk_noaccess(dax1);
	CHECK(ok, pks_read_pkrs() == pks_init_value, "PKRS 0x%08x\n",
	      pks_read_pkrs());
	mode_pop();
	return ok;
}

/* 14: relaxed mode: the first stray access is reported, later ones are
 * allowed silently, and the access goes through (V8's WARN_ONCE). */
struct stray_arg {
	volatile u64 *p;
	u64 val;
	u32 pkrs_after;
};

static void stray_writer(void *arg)
{
	struct stray_arg *s = arg;

	*s->p = s->val;			/* stray: no window */
	s->pkrs_after = pks_read_pkrs();
}

static bool pmem_relaxed(void)
{
	volatile u64 *p = page_address(pfn_to_page(PMEM_TEST_PFN(4)));
	struct stray_arg s1 = { p, 0x1111111111111111ULL, 0 };
	struct stray_arg s2 = { p + 1, 0x2222222222222222ULL, 0 };
	unsigned long r0 = pks_stats.relaxed_reports;
	unsigned long q0 = pks_stats.relaxed_silent;
	u32 granted = pmg_pkval_update(pks_init_value,
				       PKS_KEY_PGMAP_PROTECTION, 0);
	u64 v[2] = { 0, 0 };
	bool ok = true;

	mode_push(PMG_MODE_RELAXED);
	/* The once is per boot; start this test from a fresh boot's state. */
	pks_core.key[PKS_KEY_PGMAP_PROTECTION].warned = 0;
	printk("expect one relaxed-mode warning:\n");
	kthread_join(kthread_run(stray_writer, &s1, "pks_stray1"));
	kthread_join(kthread_run(stray_writer, &s2, "pks_stray2"));
	CHECK(ok, !pmem_rw(&pmem0, (uintptr_t)p - pmem0.phys, v, sizeof(v),
			   false), "pmem_rw\n");

	CHECK(ok, pks_stats.relaxed_reports == r0 + 1, "%lu reports\n",
	      pks_stats.relaxed_reports - r0);
	CHECK(ok, pks_stats.relaxed_silent == q0 + 1, "%lu silent\n",
	      pks_stats.relaxed_silent - q0);
	CHECK(ok, v[0] == s1.val && v[1] == s2.val,
	      "relaxed did not allow the writes\n");
	CHECK(ok, s1.pkrs_after == granted && s2.pkrs_after == granted,
	      "faulting threads got 0x%08x / 0x%08x\n", s1.pkrs_after,
	      s2.pkrs_after);
	CHECK(ok, pks_read_pkrs() == pks_init_value,
	      "relaxed grant leaked to this thread: 0x%08x\n",
	      pks_read_pkrs());
	mode_pop();
	return ok;
}

/* 15: an exception runs with the init value: it cannot use the window of
 * the thread it interrupted. */
static void exc_hook_pmem(struct pt_regs *regs)
{
	(void)regs;
	es.handler_read_rc = try_read(es.addr) ? 0 : -EFAULT;
	es.outer_handler = pks_read_pkrs();
	es.win = pgmap_window_count();
}

static bool pmem_exception(void)
{
	struct page *p = pfn_to_page(PMEM_TEST_PFN(5));
	bool ok = true;
	void *a;

	mode_push(PMG_MODE_STRICT);
	a = kmap_local_page(p);
	memset(&es, 0, sizeof(es));
	es.addr = a;
	int3_hook = exc_hook_pmem;
	__asm__ __volatile__("int3" ::: "memory");
	int3_hook = NULL;
	CHECK(ok, es.handler_read_rc == -EFAULT,
	      "handler read pmem through the thread's window\n");
	CHECK(ok, es.outer_handler == pks_init_value, "handler PKRS 0x%08x\n",
	      es.outer_handler);
	/* The thread's count still says open: only the register decides. */
	CHECK(ok, es.win == 1, "count in the handler %u\n", es.win);
	CHECK(ok, try_write(a, 5), "window lost after the exception\n");
	kunmap_local(a);
	mode_pop();
	return ok;
}

/*
 * 17: the boot's own fault mode (run in the main boot, which has no
 * pks_fault_mode= argument: the seeds' default, relaxed).  Nothing here
 * sets the mode.  A stray read is reported once and "disable[s] the
 * protection" for the faulting context: the key becomes read-write there,
 * so a write after the read does not fault again.
 */
struct relaxed_read {
	volatile u64 *p;
	int read_rc, write_rc;
	unsigned long faults_read, faults_write;
	u32 pkrs_after;
};

static void relaxed_reader(void *arg)
{
	struct relaxed_read *r = arg;
	unsigned long f0 = pks_stats.faults;
	u64 v = 0x7777777777777777ULL;

	r->read_rc = try_read((const void *)r->p) ? 0 : -EFAULT;
	r->faults_read = pks_stats.faults - f0;
	f0 = pks_stats.faults;
	r->write_rc = copy_to_kernel_nofault((void *)r->p, &v, sizeof(v));
	r->faults_write = pks_stats.faults - f0;
	r->pkrs_after = pks_read_pkrs();
}

static bool pmem_relaxed_default(void)
{
	volatile u64 *p = page_address(pfn_to_page(PMEM_TEST_PFN(6)));
	struct relaxed_read r = { p, 0, 0, 0, 0, 0 };
	unsigned long r0 = pks_stats.relaxed_reports;
	u32 rw = pmg_pkval_update(pks_init_value, PKS_KEY_PGMAP_PROTECTION,
				  PKEY_READ_WRITE);
	bool ok = true;
	u64 back = 0;

	printk("boot fault mode: %s\n", pmg_mode_name(pks_fault_mode));
	CHECK(ok, pks_fault_mode == PMG_MODE_RELAXED,
	      "default pks_fault_mode is %s, the seeds' is relaxed\n",
	      pmg_mode_name(pks_fault_mode));
	pks_core.key[PKS_KEY_PGMAP_PROTECTION].warned = 0;
	printk("expect one relaxed-mode warning (a read):\n");
	kthread_join(kthread_run(relaxed_reader, &r, "pks_stray_read"));
	CHECK(ok, r.read_rc == 0 && r.faults_read == 1,
	      "stray read: rc %d, %lu faults (want allowed after one)\n",
	      r.read_rc, r.faults_read);
	CHECK(ok, pks_stats.relaxed_reports == r0 + 1, "%lu reports\n",
	      pks_stats.relaxed_reports - r0);
	CHECK(ok, r.write_rc == 0 && r.faults_write == 0,
	      "write after the stray read: rc %d, %lu faults (relaxed "
	      "granted read-only?)\n", r.write_rc, r.faults_write);
	CHECK(ok, r.pkrs_after == rw, "reader ended with 0x%08x, want "
	      "0x%08x\n", r.pkrs_after, rw);
	CHECK(ok, !pmem_rw(&pmem0, (uintptr_t)p - pmem0.phys, &back,
			   sizeof(back), false) &&
	      back == 0x7777777777777777ULL, "write did not land\n");
	return ok;
}

/*
 * 18: V9's callback contract: true means "handled", and the only grant is
 * what the callback set with pks_update_exception().  A callback that
 * returns true without granting sees the access fault again; here it
 * does so once, then returns false and strict mode fails the nofault
 * copy.  Were the fault path to grant on its own, there would be one
 * fault and the write would land.
 */
static bool callback_no_grant(void)
{
	struct pks_test_ctx *ctx = alloc_ctx(PKS_KEY_TEST);
	u8 *ptr = alloc_test_page(PKS_KEY_TEST);
	unsigned long h0 = pks_stats.callbacks;
	bool ok = true;
	u64 v = 0x1234;
	int rc;

	current->pks_test_ctx = ctx;
	ctx->handle_no_grant = 1;
	ctx->armed = true;
	rc = copy_to_kernel_nofault(ptr, &v, sizeof(v));
	ctx->armed = false;
	printk("callback: %d fault(s), rc %d\n", ctx->fault_cnt, rc);
	CHECK(ok, ctx->fault_cnt == 2, "%d faults: the callback's true "
	      "without a grant was granted anyway?\n", ctx->fault_cnt);
	CHECK(ok, rc == -EFAULT, "the write went through (rc %d)\n", rc);
	CHECK(ok, pks_stats.callbacks == h0 + 1, "%lu handled\n",
	      pks_stats.callbacks - h0);
	CHECK(ok, pks_read_pkrs() == pks_init_value, "PKRS 0x%08x\n",
	      pks_read_pkrs());

	/* The same callback granting: one fault, the write lands. */
	ctx->handle_no_grant = 0;
	ctx->fault_cnt = 0;
	ctx->armed = true;
	rc = copy_to_kernel_nofault(ptr, &v, sizeof(v));
	ctx->armed = false;
	CHECK(ok, rc == 0 && ctx->fault_cnt == 1, "granting callback: rc "
	      "%d, %d faults\n", rc, ctx->fault_cnt);
	pks_mk_noaccess(PKS_KEY_TEST);
	current->pks_test_ctx = NULL;
	free_test_page(ptr);
	free_ctx(ctx);
	return ok;
}

/* ---- The runner ---- */

struct pks_test {
	int nr;
	const char *name;
	bool (*fn)(void);
};

static const struct pks_test pks_tests[] = {
	{ CHECK_DEFAULTS, "check defaults", check_defaults },
	{ RUN_SINGLE, "run single", run_single },
	{ ARM_CTX_SWITCH, "arm context switch (preempted)", arm_ctx_switch },
	{ CHECK_CTX_SWITCH, "check context switch", check_ctx_switch },
	{ RUN_EXCEPTION, "exception", run_exception },
	{ RUN_EXCEPTION_UPDATE, "exception update", run_exception_update },
	{ RUN_ALL_KEYS, "all keys", run_all_keys },
	{ RUN_CRASH_TEST, "crash test", run_crash_test },
	{ PMEM_STRAY_WRITE, "pmem stray write faults, data intact",
	  pmem_stray_write },
	{ PMEM_KMAP_LOCAL, "pmem kmap_local_page window", pmem_kmap_local },
	{ PMEM_KMAP_FLAGGED, "pmem kmap() flagged", pmem_kmap_flagged },
	{ PMEM_DAX_GUARDS, "pmem dax guards", pmem_dax_guards },
	{ PMEM_RELAXED, "pmem relaxed warns once", pmem_relaxed },
	{ PMEM_EXCEPTION, "pmem exception has no window", pmem_exception },
	{ RUN_CTX_SWITCH_YIELD, "context switch (yield)", ctx_switch_yield },
	{ PMEM_RELAXED_DEFAULT, "pmem relaxed by default, reads too",
	  pmem_relaxed_default },
	{ CALLBACK_NO_GRANT, "callback true without a grant gets none",
	  callback_no_grant },
	{ RUN_PMEM_CRASH_TEST, "pmem crash test", run_pmem_crash_test },
};

static const int default_list[] = {
	CHECK_DEFAULTS, RUN_SINGLE, ARM_CTX_SWITCH, CHECK_CTX_SWITCH,
	RUN_EXCEPTION, RUN_EXCEPTION_UPDATE, RUN_ALL_KEYS, RUN_CRASH_TEST,
	PMEM_STRAY_WRITE, PMEM_KMAP_LOCAL, PMEM_KMAP_FLAGGED, PMEM_DAX_GUARDS,
	PMEM_RELAXED, PMEM_EXCEPTION, RUN_CTX_SWITCH_YIELD,
	PMEM_RELAXED_DEFAULT, CALLBACK_NO_GRANT,
};

#define MAX_LIST 64

/* "9,9" or "0,1,2": numbers separated by commas; -1 marks a bad entry. */
static int parse_list(const char *s, int *out)
{
	int n = 0;

	while (*s && n < MAX_LIST) {
		int v = 0, digits = 0;

		while (*s >= '0' && *s <= '9') {
			v = v * 10 + (*s++ - '0');
			digits++;
		}
		out[n++] = digits && (*s == ',' || !*s) ? v : -1;
		while (*s && *s != ',')
			s++;
		if (*s == ',')
			s++;
	}
	return n;
}

static const struct pks_test *find_test(int nr)
{
	unsigned i;

	for (i = 0; i < ARRAY_SIZE(pks_tests); i++)
		if (pks_tests[i].nr == nr)
			return &pks_tests[i];
	return NULL;
}

/* Run @list (NULL: the default list); returns the number that failed. */
int pks_test_main(const char *list);

int pks_test_main(const char *list)
{
	int nrs[MAX_LIST], n, i, passed = 0, failed = 0, skipped = 0;

	if (list) {
		n = parse_list(list, nrs);
	} else {
		n = (int)ARRAY_SIZE(default_list);
		memcpy(nrs, default_list, sizeof(default_list));
	}
	pks_set_key_callback(PKS_KEY_TEST, pks_test_callback);

	tap_printf("1..%d\n", n);
	for (i = 0; i < n; i++) {
		const struct pks_test *t = find_test(nrs[i]);
		bool pass;

		if (!t) {
			/* Unknown tests are flagged as failures. */
			failed++;
			if (nrs[i] < 0)
				tap_printf("not ok %d pks_test ?: not a test "
					   "number\n", i + 1);
			else
				tap_printf("not ok %d pks_test %d: unknown "
					   "test\n", i + 1, nrs[i]);
			crash_armed = 0;
			continue;
		}
		skip_reason = NULL;
		pass = t->fn();
		/* Clear arming on any other test run. */
		if (t->nr != RUN_CRASH_TEST && t->nr != RUN_PMEM_CRASH_TEST)
			crash_armed = 0;
		if (pass && pks_read_pkrs() != pks_init_value) {
			printk("test left PKRS at 0x%08x\n", pks_read_pkrs());
			pass = false;
		}
		if (pass && skip_reason) {
			skipped++;
			tap_printf("ok %d pks_test %d: %s # SKIP %s\n", i + 1,
				   t->nr, t->name, skip_reason);
			continue;
		}
		if (pass)
			passed++;
		else
			failed++;
		tap_printf("%sok %d pks_test %d: %s\n", pass ? "" : "not ",
			   i + 1, t->nr, t->name);
	}
	if (cs.a) {
		cs.cancel = true;
		kthread_join(cs.a);
	}
	printk("pks_test: %d passed, %d failed, %d skipped; pks: %lu key "
	       "faults, %lu handled by callbacks, %lu relaxed, %lu strict\n",
	       passed, failed, skipped, pks_stats.faults, pks_stats.callbacks,
	       pks_stats.relaxed_reports + pks_stats.relaxed_silent,
	       pks_stats.strict);
	return failed;
}
