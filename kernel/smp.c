// SPDX-License-Identifier: MIT
/*
 * Application processors: started with INIT-SIPI-SIPI so that PKS is set
 * up "on each CPU" as the seeds do, and reachable through an IPI for
 * on_each_cpu() (the defaults check runs there).  They run no threads.
 *
 * The CPU count comes from QEMU's fw_cfg (FW_CFG_NB_CPUS); APIC IDs are
 * QEMU's default 0..n-1.
 */
#include "kernel.h"
#include "pgtable.h"
#include "pks.h"
#include "sched.h"
#include "x86.h"

#define TRAMP_BASE		0x8000
#define LAPIC_BASE		0xfee00000UL
#define LAPIC_ID		0x20
#define LAPIC_EOI		0xb0
#define LAPIC_SVR		0xf0
#define LAPIC_ICR_LO		0x300
#define LAPIC_ICR_HI		0x310
#define ICR_BUSY		(1U << 12)
#define VEC_IPI_CALL		0xf0

#define FW_CFG_PORT_SEL		0x510
#define FW_CFG_PORT_DATA	0x511
#define FW_CFG_SIGNATURE	0x00
#define FW_CFG_NB_CPUS		0x05

struct cpu cpus[NR_CPUS];
int nr_cpus_online = 1;

extern char trampoline_start[], trampoline_end[];
extern char tramp_cr3[], tramp_stack[], tramp_cpu[];

static struct {
	smp_call_func_t func;
	void *info;
	volatile int pending[NR_CPUS];
} call;

static inline u32 lapic_read(unsigned reg)
{
	return *(volatile u32 *)(LAPIC_BASE + reg);
}

static inline void lapic_write(unsigned reg, u32 v)
{
	*(volatile u32 *)(LAPIC_BASE + reg) = v;
}

static void lapic_send(u32 apic_id, u32 icr)
{
	lapic_write(LAPIC_ICR_HI, apic_id << 24);
	lapic_write(LAPIC_ICR_LO, icr);
	while (lapic_read(LAPIC_ICR_LO) & ICR_BUSY)
		cpu_relax();
}

static void fw_cfg_read(u16 key, void *buf, size_t len)
{
	u8 *p = buf;
	size_t i;

	outw(FW_CFG_PORT_SEL, key);
	for (i = 0; i < len; i++)
		p[i] = inb(FW_CFG_PORT_DATA);
}

static unsigned fw_cfg_nb_cpus(void)
{
	char sig[4];
	u16 n = 1;

	fw_cfg_read(FW_CFG_SIGNATURE, sig, sizeof(sig));
	if (memcmp(sig, "QEMU", 4))
		return 1;
	fw_cfg_read(FW_CFG_NB_CPUS, &n, sizeof(n));
	return n ? n : 1;
}

static void wait_ticks(unsigned long n)
{
	unsigned long end = jiffies + n;

	while ((long)(jiffies - end) < 0)
		cpu_relax();
}

/* First C on an AP: tables, PKS, then idle answering IPIs. */
void ap_main(struct cpu *c)
{
	wrmsr(MSR_GS_BASE, (u64)c);
	cpu_init_tables(c);
	sched_init_cpu(c, "idle");
	lapic_write(LAPIC_SVR, 0x100 | 0xff);	/* enable, spurious 0xff */
	c->apic_id = lapic_read(LAPIC_ID) >> 24;
	pks_setup();
	WRITE_ONCE(c->online, true);
	for (;;)
		__asm__ __volatile__("sti; hlt; cli" ::: "memory");
}

void smp_boot_aps(void)
{
	unsigned n = fw_cfg_nb_cpus(), i;
	size_t len = (size_t)(trampoline_end - trampoline_start);
	char *tramp = (char *)TRAMP_BASE;

	if (n > NR_CPUS)
		n = NR_CPUS;
	if (n < 2)
		return;
	map_page(LAPIC_BASE, LAPIC_BASE, PAGE_KERNEL_NOCACHE);
	memcpy(tramp, trampoline_start, len);

	for (i = 1; i < n; i++) {
		struct cpu *c = &cpus[i];
		char *stack = vmalloc_pages(THREAD_PAGES, PAGE_KERNEL);

		c->self = c;
		c->id = (int)i;
		*(u64 *)(tramp + (tramp_cr3 - trampoline_start)) = kernel_cr3;
		*(u64 *)(tramp + (tramp_stack - trampoline_start)) =
			(u64)(stack + THREAD_PAGES * PAGE_SIZE);
		*(u64 *)(tramp + (tramp_cpu - trampoline_start)) = (u64)c;

		lapic_send(i, 0x00004500);			/* INIT */
		wait_ticks(2);
		/* SIPI */
		lapic_send(i, 0x00004600 | (TRAMP_BASE >> 12));
		wait_ticks(1);
		if (!READ_ONCE(c->online))
			lapic_send(i, 0x00004600 | (TRAMP_BASE >> 12));
		{
			unsigned long end = jiffies + 500;

			while (!READ_ONCE(c->online) &&
			       (long)(jiffies - end) < 0)
				cpu_relax();
		}
		if (!c->online) {
			printk("smp: cpu%u did not start\n", i);
			break;
		}
		nr_cpus_online++;
	}
}

/* IPI handler on an AP (called from exc_dispatch, init PKRS). */
void smp_call_ipi(void)
{
	struct cpu *c = this_cpu();

	if (call.pending[c->id]) {
		call.func(call.info);
		WRITE_ONCE(call.pending[c->id], 0);
	}
	lapic_write(LAPIC_EOI, 0);
}

/*
 * Run @func on every online CPU: here directly (interrupts off, as an IPI
 * handler would run), on the others from the IPI handler.  Returns the
 * number of CPUs that did not answer.
 */
int on_each_cpu(smp_call_func_t func, void *info)
{
	unsigned long flags = local_irq_save();
	int i, missing = 0;

	func(info);
	local_irq_restore(flags);
	for (i = 1; i < nr_cpus_online; i++) {
		unsigned long end;

		call.func = func;
		call.info = info;
		WRITE_ONCE(call.pending[i], 1);
		lapic_send(cpus[i].apic_id, VEC_IPI_CALL);
		end = jiffies + 500;
		while (READ_ONCE(call.pending[i]) &&
		       (long)(jiffies - end) < 0)
			cpu_relax();
		if (call.pending[i]) {
			WRITE_ONCE(call.pending[i], 0);
			missing++;
		}
	}
	return missing;
}
