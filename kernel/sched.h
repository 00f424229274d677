/* SPDX-License-Identifier: MIT */
/*
 * Kernel threads and a round-robin scheduler, preempted by the timer.
 */
#ifndef PMG_SCHED_H
#define PMG_SCHED_H

#include "../core/pmg_core.h"
#include "kernel.h"
#include "x86.h"

#define HZ		1000
#define THREAD_PAGES	4

struct pks_test_ctx;

struct task {
	unsigned long sp;	/* saved %rsp while switched out */
	/*
	 * The seeds' thread.pkrs: PKRS of the context running on this thread
	 * (an exception swaps it for the init value and back).  Every writer
	 * goes through pks.c, so it is the saved value whenever the thread is
	 * switched out, and the context switch loads it for the next thread.
	 */
	u32 pkrs;
	/* Open pmem windows (kmap_local_page, dax guards), per key. */
	struct pmg_ws ws;
	int id;
	const char *name;
	void (*fn)(void *arg);
	void *arg;
	void *stack;
	volatile bool done;
	unsigned long nr_switch_in;	/* times scheduled in */
	struct pks_test_ctx *pks_test_ctx;
	struct task *next;		/* run queue */
};

extern volatile unsigned long jiffies;

void sched_init(void);
struct task *sched_init_cpu(struct cpu *c, const char *name);
void timer_init(void);
struct task *kthread_run(void (*fn)(void *), void *arg, const char *name);
void kthread_join(struct task *t);
void yield(void);
void schedule(void);
void timer_interrupt(struct pt_regs *regs);
void preempt_schedule_irq(void);

static inline void preempt_disable(void)
{
	this_cpu()->preempt_count++;
	barrier();
}

void preempt_enable(void);

/* Timer probe for the exception test: what the tick handler saw. */
struct timer_probe {
	volatile bool armed;
	volatile u32 handler_pkrs;
	volatile u32 saved_pkrs;
	volatile int depth;
};
extern struct timer_probe timer_probe;

#endif /* PMG_SCHED_H */
