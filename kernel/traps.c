// SPDX-License-Identifier: MIT
/*
 * Descriptor tables, the C side of exception entry, the page-fault handler
 * and the oops path.
 *
 * exc_dispatch() is the seeds' irqentry_enter() / irqentry_exit() pair in
 * one place: arch_save_aux_pt_regs() (pks_save_pt_regs) before any handler
 * runs and arch_restore_aux_pt_regs() (pks_restore_pt_regs) before the
 * conditional reschedule on the way out (V8 "entry: Add architecture
 * auxiliary pt_regs save/restore calls").
 */
#include "kernel.h"
#include "pgtable.h"
#include "pks.h"
#include "ptrace.h"
#include "sched.h"
#include "x86.h"

#define X86_PF_PROT	(1UL << 0)
#define X86_PF_WRITE	(1UL << 1)
#define X86_PF_USER	(1UL << 2)
#define X86_PF_RSVD	(1UL << 3)
#define X86_PF_INSTR	(1UL << 4)
#define X86_PF_PK	(1UL << 5)

#define VEC_INT3	3
#define VEC_DF		8
#define VEC_PF		14
#define VEC_TIMER	32
#define VEC_PIC_SPURIOUS 39
#define VEC_IPI_CALL	0xf0
#define VEC_APIC_SPURIOUS 0xff

struct idt_entry {
	u16 off0;
	u16 sel;
	u8 ist;
	u8 type;
	u16 off1;
	u32 off2;
	u32 zero;
} __attribute__((packed));

static struct idt_entry idt[256] __aligned(16);
extern char exc_stubs[];

struct exception_table_entry {
	unsigned long insn;
	unsigned long fixup;
};
extern const struct exception_table_entry __start___ex_table[];
extern const struct exception_table_entry __stop___ex_table[];

/* Test hook: the handler for int3 (pks_test's exception tests). */
void (*int3_hook)(struct pt_regs *regs);

static const char *const exc_names[32] = {
	"divide error", "debug", "NMI", "int3", "overflow", "bounds",
	"invalid opcode", "device not available", "double fault",
	"coprocessor segment overrun", "invalid TSS", "segment not present",
	"stack segment", "general protection fault", "page fault", "reserved",
	"x87 FPU error", "alignment check", "machine check", "SIMD error",
	"virtualization", "control protection",
};

void trap_init(void)
{
	unsigned v;

	for (v = 0; v < 256; v++) {
		unsigned long a = (unsigned long)exc_stubs + 16 * v;
		struct idt_entry *e = &idt[v];

		e->off0 = (u16)a;
		e->sel = 0x08;
		/* A double fault (e.g. stack overflow) gets its own stack. */
		e->ist = v == VEC_DF ? 1 : 0;
		e->type = 0x8e;		/* present, interrupt gate */
		e->off1 = (u16)(a >> 16);
		e->off2 = (u32)(a >> 32);
		e->zero = 0;
	}
}

struct desc_ptr {
	u16 limit;
	u64 base;
} __attribute__((packed));

/* Per CPU: GDT with a TSS (for the #DF stack), IDT, reload segments. */
void cpu_init_tables(struct cpu *c)
{
	unsigned long tss = (unsigned long)&c->tss;
	u64 limit = sizeof(c->tss) - 1;
	struct desc_ptr gdtp = { sizeof(c->gdt) - 1, (u64)c->gdt };
	struct desc_ptr idtp = { sizeof(idt) - 1, (u64)idt };

	c->gdt[0] = 0;
	c->gdt[1] = 0x00209a0000000000ULL;	/* 0x08: kernel code */
	c->gdt[2] = 0x0000920000000000ULL;	/* 0x10: kernel data */
	c->gdt[3] = (limit & 0xffff) | ((tss & 0xffffff) << 16) |
		    (0x89ULL << 40) | (((tss >> 24) & 0xff) << 56);
	c->gdt[4] = tss >> 32;
	c->tss.ist[0] = (u64)(c->df_stack + IST_STACK_SIZE);
	c->tss.iomap_base = sizeof(c->tss);

	__asm__ __volatile__(
		"lgdt %0\n\t"
		"pushq $0x08\n\t"
		"leaq 1f(%%rip), %%rax\n\t"
		"pushq %%rax\n\t"
		"lretq\n"
		"1:\n\t"
		"movw $0x10, %%ax\n\t"
		"movw %%ax, %%ds\n\t"
		"movw %%ax, %%es\n\t"
		"movw %%ax, %%ss\n\t"
		"movw $0x18, %%ax\n\t"
		"ltr %%ax\n\t"
		"lidt %1"
		:: "m"(gdtp), "m"(idtp) : "rax", "memory");
	/* Loading %gs would clear GS_BASE: set it after the segments. */
	wrmsr(MSR_GS_BASE, (u64)c);
}

bool fixup_exception(struct pt_regs *regs)
{
	const struct exception_table_entry *e;

	for (e = __start___ex_table; e < __stop___ex_table; e++) {
		if (e->insn == regs->ip) {
			regs->ip = e->fixup;
			return true;
		}
	}
	return false;
}

/* Print the frame-pointer chain from @bp; returns the frames printed,
 * their return addresses in @ret (up to @nret of them). */
static int show_trace_ret(unsigned long bp, unsigned long *ret, int nret)
{
	int depth;

	printk("Call Trace:\n");
	for (depth = 0; bp && depth < 16; depth++) {
		unsigned long frame[2];
		char sym[KSYM_LEN];

		if (copy_from_kernel_nofault(frame, (void *)bp, sizeof(frame)))
			break;
		if (!frame[1])
			break;
		printk(" %s\n", ksym(frame[1], sym, sizeof(sym)));
		if (depth < nret)
			ret[depth] = frame[1];
		bp = frame[0];
	}
	return depth;
}

static void show_trace(unsigned long bp)
{
	show_trace_ret(bp, NULL, 0);
}

struct dump_stack_info dump_stack_last;

/* Linux's dump_stack(): the call trace of the caller, kept for checks. */
void __attribute__((noinline)) dump_stack(void)
{
	struct dump_stack_info *d = &dump_stack_last;

	d->count++;
	d->frames = show_trace_ret((unsigned long)__builtin_frame_address(0),
				   d->ret, DUMP_STACK_KEEP);
}

static void show_regs(struct pt_regs *regs)
{
	struct cpu *c = this_cpu();
	struct task *t = c->curr;
	char sym[KSYM_LEN];

	printk("CPU: %d PID: %d Comm: %s\n", c->id, t ? t->id : -1,
	       t ? t->name : "?");
	printk("RIP: %04lx:%s\n", regs->cs, ksym(regs->ip, sym, sizeof(sym)));
	printk("RSP: %016lx EFLAGS: %08lx\n", regs->sp, regs->flags);
	printk("RAX: %016lx RBX: %016lx RCX: %016lx\n", regs->ax, regs->bx,
	       regs->cx);
	printk("RDX: %016lx RSI: %016lx RDI: %016lx\n", regs->dx, regs->si,
	       regs->di);
	printk("RBP: %016lx R08: %016lx R09: %016lx\n", regs->bp, regs->r8,
	       regs->r9);
	printk("R10: %016lx R11: %016lx R12: %016lx\n", regs->r10, regs->r11,
	       regs->r12);
	printk("R13: %016lx R14: %016lx R15: %016lx\n", regs->r13, regs->r14,
	       regs->r15);
	printk("CR0: %016lx CR2: %016lx CR3: %016lx CR4: %016lx\n",
	       read_cr0(), read_cr2(), read_cr3(), read_cr4());
	pks_show_regs(regs);
	show_trace(regs->bp);
}

static void __noreturn die(const char *str, struct pt_regs *regs,
			   unsigned long err)
{
	static int die_counter;

	local_irq_disable();
	console_bust_locks();
	printk("Oops: %s: %04lx [#%d] SMP\n", str, err, ++die_counter);
	show_regs(regs);
	printk("Kernel panic - not syncing: Fatal exception\n");
	kernel_exit(KEXIT_OOPS);
}

static void __noreturn page_fault_oops(struct pt_regs *regs,
				       unsigned long error_code,
				       unsigned long address)
{
	pteval_t *pte = lookup_pte(address);

	console_bust_locks();
	printk("BUG: unable to handle page fault for address: %016lx\n",
	       address);
	printk("#PF: supervisor %s access in kernel mode\n",
	       (error_code & X86_PF_INSTR) ? "instruction fetch" :
	       (error_code & X86_PF_WRITE) ? "write" : "read");
	printk("#PF: error_code(0x%04lx) - %s\n", error_code,
	       !(error_code & X86_PF_PROT) ? "not-present page" :
	       (error_code & X86_PF_PK) ? "protection keys violation" :
	       (error_code & X86_PF_RSVD) ? "reserved bit violation" :
	       "permissions violation");
	if (pte)
		printk("PTE: %016lx pkey %u\n", *pte, pte_pkey(*pte));
	die("page fault", regs, error_code);
}

static void exc_page_fault(struct pt_regs *regs, unsigned long error_code)
{
	unsigned long address = read_cr2();

	if ((error_code & X86_PF_PK) &&
	    pks_handle_key_fault(regs, error_code, address))
		return;
	if (fixup_exception(regs)) {
		/* A nofault access denied by a key: still worth a report. */
		if (error_code & X86_PF_PK) {
			pteval_t *pte = lookup_pte(address);
			char sym[KSYM_LEN];

			printk("pks: stray %s of 0x%lx denied, pkey %u, at "
			       "%s (fixed up); PKRS: 0x%08x\n",
			       (error_code & X86_PF_WRITE) ? "write" : "read",
			       address, pte ? pte_pkey(*pte) : 0,
			       ksym(regs->ip, sym, sizeof(sym)),
			       pks_saved_pkrs(regs));
		}
		return;
	}
	page_fault_oops(regs, error_code, address);
}

static void exc_int3(struct pt_regs *regs)
{
	if (int3_hook) {
		int3_hook(regs);
		return;
	}
	die("int3", regs, 0);
}

void exc_dispatch(struct pt_regs *regs, unsigned long vector)
{
	struct cpu *c = this_cpu();

	/* irqentry_enter() */
	c->irq_depth++;
	pks_save_pt_regs(regs);

	switch (vector) {
	case VEC_PF:
		exc_page_fault(regs, regs->orig_ax);
		break;
	case VEC_INT3:
		exc_int3(regs);
		break;
	case VEC_TIMER:
		timer_interrupt(regs);
		break;
	case VEC_IPI_CALL:
		smp_call_ipi();
		break;
	case VEC_PIC_SPURIOUS:
	case VEC_APIC_SPURIOUS:
		break;
	default:
		die(vector < 32 && exc_names[vector] ? exc_names[vector]
						     : "unexpected interrupt",
		    regs, regs->orig_ax);
	}

	/* irqentry_exit(): restore first, then maybe reschedule. */
	pks_restore_pt_regs(regs);
	c->irq_depth--;
	if (vector == VEC_TIMER && !c->irq_depth && !c->preempt_count &&
	    (regs->flags & X86_EFLAGS_IF) && c->need_resched)
		preempt_schedule_irq();
}

void __noreturn kernel_exit(enum kexit code)
{
	local_irq_disable();
	outl(0xf4, (u32)code);
	for (;;)
		halt();
}

void __noreturn panic(const char *fmt, ...)
{
	char buf[256];
	va_list ap;

	local_irq_disable();
	console_bust_locks();
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	printk("Kernel panic - not syncing: %s\n", buf);
	show_trace((unsigned long)__builtin_frame_address(0));
	kernel_exit(KEXIT_OOPS);
}

void warn_slowpath(const char *file, int line, void *caller,
		   const char *fmt, ...)
{
	char buf[256], sym[KSYM_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	printk("WARNING: CPU: %d at %s:%d, caller %s\n", this_cpu()->id, file,
	       line, ksym((unsigned long)caller, sym, sizeof(sym)));
	printk("%s", buf);
}
