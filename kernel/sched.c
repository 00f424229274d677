// SPDX-License-Identifier: MIT
/*
 * Kernel threads, a round-robin scheduler and the timer that preempts.
 *
 * Threads run on the boot CPU only (the APs idle and answer IPIs).  The
 * timer (PIT channel 0 through the 8259, HZ ticks per second) asks for a
 * reschedule on every tick; the exception exit path preempts when it
 * returns to thread context with preemption enabled.
 *
 * PKRS on a context switch (V8 "Preserve the PKS MSR on context switch"):
 * the outgoing thread's value is already saved in prev->pkrs, which every
 * PKRS writer keeps current; the incoming thread's value is loaded from
 * next->pkrs before the stacks are switched.  New threads start at the
 * init value, whatever their creator had open.
 */
#include "kernel.h"
#include "pgtable.h"
#include "pks.h"
#include "ptrace.h"
#include "sched.h"
#include "x86.h"

#define MAX_TASKS	32
#define PIT_HZ		1193182

volatile unsigned long jiffies;
struct timer_probe timer_probe;

static struct task tasks[MAX_TASKS];
static struct task *runqueue[MAX_TASKS];
static int nr_running;
static int next_pid = 1;

extern void __switch_to_asm(unsigned long *prev_sp, unsigned long next_sp);
extern char thread_entry_asm[];

/* The boot thread of @c; on the BSP it runs kernel_main and the tests. */
static struct task idle_tasks[NR_CPUS];

struct task *sched_init_cpu(struct cpu *c, const char *name)
{
	struct task *t = &idle_tasks[c->id];

	t->id = c->id ? 0 : next_pid++;
	t->name = name;
	t->pkrs = pks_init_value;
	c->curr = t;
	return t;
}

void sched_init(void)
{
	runqueue[nr_running++] = sched_init_cpu(this_cpu(), "init");
}

/* Called from thread_entry_asm on a new thread's first run. */
void thread_start(struct task *t);
void thread_start(struct task *t)
{
	local_irq_enable();
	t->fn(t->arg);
	local_irq_disable();
	t->done = true;
	schedule();
	panic("dead thread %s scheduled", t->name);
}

struct task *kthread_run(void (*fn)(void *), void *arg, const char *name)
{
	unsigned long flags, *sp;
	struct task *t = NULL;
	int i;

	flags = local_irq_save();
	for (i = 0; i < MAX_TASKS; i++) {
		if (!tasks[i].name) {
			t = &tasks[i];
			t->name = name;
			break;
		}
	}
	local_irq_restore(flags);
	if (!t)
		panic("too many threads");

	t->id = next_pid++;
	t->fn = fn;
	t->arg = arg;
	t->done = false;
	t->nr_switch_in = 0;
	t->pks_test_ctx = NULL;
	memset(&t->ws, 0, sizeof(t->ws));
	/* The seeds' INIT_THREAD / new tasks: most restrictive defaults. */
	t->pkrs = pks_init_value;
	t->stack = vmalloc_pages(THREAD_PAGES, PAGE_KERNEL);

	/* Frame popped by __switch_to_asm: r15 r14 r13 r12 rbx rbp, ret. */
	sp = (unsigned long *)((char *)t->stack + THREAD_PAGES * PAGE_SIZE);
	sp -= 9;
	memset(sp, 0, 9 * sizeof(*sp));
	sp[4] = (unsigned long)t;			/* rbx */
	sp[6] = (unsigned long)thread_entry_asm;	/* return address */
	t->sp = (unsigned long)sp;

	flags = local_irq_save();
	runqueue[nr_running++] = t;
	local_irq_restore(flags);
	return t;
}

void kthread_join(struct task *t)
{
	while (!READ_ONCE(t->done))
		yield();
	vfree_pages(t->stack, THREAD_PAGES);
	t->stack = NULL;
	WRITE_ONCE(t->name, NULL);
}

static void context_switch(struct task *prev, struct task *next)
{
	struct cpu *c = this_cpu();

	next->nr_switch_in++;
	c->curr = next;
	pks_switch_to(next->pkrs);
	__switch_to_asm(&prev->sp, next->sp);
}

/* Pick the next runnable thread after current; interrupts off. */
void schedule(void)
{
	struct cpu *c = this_cpu();
	struct task *prev = c->curr, *next;
	int i, pos = 0;

	c->need_resched = false;
	for (i = 0; i < nr_running; i++)
		if (runqueue[i] == prev)
			pos = i;
	if (prev->done) {
		/* Drop it; it never runs again. */
		for (i = pos; i + 1 < nr_running; i++)
			runqueue[i] = runqueue[i + 1];
		nr_running--;
		pos--;
	}
	next = runqueue[(pos + 1) % nr_running];
	if (next != prev)
		context_switch(prev, next);
}

void yield(void)
{
	unsigned long flags = local_irq_save();

	schedule();
	local_irq_restore(flags);
}

void preempt_schedule_irq(void)
{
	schedule();
}

void preempt_enable(void)
{
	struct cpu *c = this_cpu();

	barrier();
	if (--c->preempt_count == 0 && c->need_resched && !c->irq_depth &&
	    !irqs_disabled())
		yield();
}

void timer_interrupt(struct pt_regs *regs)
{
	struct cpu *c = this_cpu();

	jiffies++;
	if (timer_probe.armed) {
		timer_probe.handler_pkrs = pks_read_pkrs();
		timer_probe.saved_pkrs = pks_saved_pkrs(regs);
		timer_probe.depth = c->irq_depth;
		timer_probe.armed = false;
	}
	outb(0x20, 0x20);	/* EOI to the master 8259 */
	c->need_resched = true;
}

void timer_init(void)
{
	unsigned div = PIT_HZ / HZ;

	/* 8259s: IRQ 0-7 -> vectors 32-39, 8-15 -> 40-47; only IRQ 0. */
	outb(0x20, 0x11);
	outb(0xa0, 0x11);
	outb(0x21, 0x20);
	outb(0xa1, 0x28);
	outb(0x21, 0x04);
	outb(0xa1, 0x02);
	outb(0x21, 0x01);
	outb(0xa1, 0x01);
	outb(0x21, 0xfe);
	outb(0xa1, 0xff);

	outb(0x43, 0x34);	/* channel 0, lo/hi, rate generator */
	outb(0x40, (u8)div);
	outb(0x40, (u8)(div >> 8));
}
