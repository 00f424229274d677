/* SPDX-License-Identifier: MIT */
/*
 * Thin wrappers around the x86-64 instructions the kernel needs.
 */
#ifndef PMG_X86_H
#define PMG_X86_H

#include "kernel.h"

#define MSR_EFER		0xc0000080
#define MSR_GS_BASE		0xc0000101
#define MSR_IA32_PKRS		0x000006e1	/* the seeds' name */

#define X86_CR0_WP		(1UL << 16)
/* CR4 bit 24: enable Protection Keys for Supervisor pages */
#define X86_CR4_PKS_BIT		24
#define X86_CR4_PKS		(1UL << X86_CR4_PKS_BIT)

#define X86_EFLAGS_IF		(1UL << 9)

/* CPUID.(EAX=7,ECX=0):ECX bit 31 reports PKS. */
#define CPUID7_ECX_PKS		(1U << 31)

static inline void cpuid_count(u32 leaf, u32 sub, u32 *a, u32 *b, u32 *c,
			       u32 *d)
{
	__asm__ __volatile__("cpuid"
			     : "=a"(*a), "=b"(*b), "=c"(*c), "=d"(*d)
			     : "a"(leaf), "c"(sub));
}

static inline u64 rdmsr(u32 msr)
{
	u32 lo, hi;

	__asm__ __volatile__("rdmsr" : "=a"(lo), "=d"(hi) : "c"(msr));
	return ((u64)hi << 32) | lo;
}

static inline void wrmsr(u32 msr, u64 val)
{
	__asm__ __volatile__("wrmsr"
			     :: "c"(msr), "a"((u32)val), "d"((u32)(val >> 32))
			     : "memory");
}

static inline unsigned long read_cr0(void)
{
	unsigned long v;

	__asm__ __volatile__("mov %%cr0, %0" : "=r"(v));
	return v;
}

static inline unsigned long read_cr2(void)
{
	unsigned long v;

	__asm__ __volatile__("mov %%cr2, %0" : "=r"(v));
	return v;
}

static inline unsigned long read_cr3(void)
{
	unsigned long v;

	__asm__ __volatile__("mov %%cr3, %0" : "=r"(v));
	return v;
}

static inline void write_cr3(unsigned long v)
{
	__asm__ __volatile__("mov %0, %%cr3" :: "r"(v) : "memory");
}

static inline unsigned long read_cr4(void)
{
	unsigned long v;

	__asm__ __volatile__("mov %%cr4, %0" : "=r"(v));
	return v;
}

static inline void write_cr4(unsigned long v)
{
	__asm__ __volatile__("mov %0, %%cr4" :: "r"(v) : "memory");
}

static inline void invlpg(unsigned long addr)
{
	__asm__ __volatile__("invlpg (%0)" :: "r"(addr) : "memory");
}

static inline void outb(u16 port, u8 v)
{
	__asm__ __volatile__("outb %0, %1" :: "a"(v), "Nd"(port));
}

static inline void outw(u16 port, u16 v)
{
	__asm__ __volatile__("outw %0, %1" :: "a"(v), "Nd"(port));
}

static inline void outl(u16 port, u32 v)
{
	__asm__ __volatile__("outl %0, %1" :: "a"(v), "Nd"(port));
}

static inline u8 inb(u16 port)
{
	u8 v;

	__asm__ __volatile__("inb %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}

static inline void cpu_relax(void)
{
	__asm__ __volatile__("pause" ::: "memory");
}

static inline void local_irq_enable(void)
{
	__asm__ __volatile__("sti" ::: "memory");
}

static inline void local_irq_disable(void)
{
	__asm__ __volatile__("cli" ::: "memory");
}

static inline unsigned long local_irq_save(void)
{
	unsigned long flags;

	__asm__ __volatile__("pushfq; popq %0; cli" : "=r"(flags) :: "memory");
	return flags;
}

static inline void local_irq_restore(unsigned long flags)
{
	if (flags & X86_EFLAGS_IF)
		local_irq_enable();
}

static inline bool irqs_disabled(void)
{
	unsigned long flags;

	__asm__ __volatile__("pushfq; popq %0" : "=r"(flags));
	return !(flags & X86_EFLAGS_IF);
}

static inline void halt(void)
{
	__asm__ __volatile__("hlt" ::: "memory");
}

/* The simplest spinlock that is enough for a handful of CPUs. */
typedef struct {
	volatile int locked;
} spinlock_t;

static inline void spin_lock(spinlock_t *l)
{
	while (__atomic_exchange_n(&l->locked, 1, __ATOMIC_ACQUIRE))
		while (READ_ONCE(l->locked))
			cpu_relax();
}

static inline void spin_unlock(spinlock_t *l)
{
	__atomic_store_n(&l->locked, 0, __ATOMIC_RELEASE);
}

#endif /* PMG_X86_H */
