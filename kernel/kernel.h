/* SPDX-License-Identifier: MIT */
/*
 * pmguard supervisor-mode kernel: common types, helpers, the per-CPU block
 * and the console API.  Everything here is freestanding; the kernel links
 * against nothing but itself and core/core.c.
 */
#ifndef PMG_KERNEL_H
#define PMG_KERNEL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int64_t s64;
typedef u64 phys_addr_t;

#define ARRAY_SIZE(a)		(sizeof(a) / sizeof((a)[0]))
#define BUILD_BUG_ON(c)		_Static_assert(!(c), #c)
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#define barrier()		__asm__ __volatile__("" ::: "memory")
#define READ_ONCE(x)		(*(const volatile __typeof__(x) *)&(x))
#define WRITE_ONCE(x, v)	(*(volatile __typeof__(x) *)&(x) = (v))
#define __aligned(n)		__attribute__((aligned(n)))
#define __noreturn		__attribute__((noreturn))
#define __printf(a, b)		__attribute__((format(printf, a, b)))
#define unlikely(x)		__builtin_expect(!!(x), 0)
#define min(a, b)		((a) < (b) ? (a) : (b))
#define max(a, b)		((a) > (b) ? (a) : (b))

#define EFAULT	14
#define EINVAL	22
#define ENXIO	6
#define EIO	5
#define ENOMEM	12

#define PAGE_SHIFT	12
#define PAGE_SIZE	(1UL << PAGE_SHIFT)
#define PAGE_MASK	(~(PAGE_SIZE - 1))

/* lib.c: the compiler may emit calls to the first four on its own. */
void *memset(void *s, int c, size_t n);
void *memcpy(void *d, const void *s, size_t n);
void *memmove(void *d, const void *s, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t strlen(const char *s);
int strncmp(const char *a, const char *b, size_t n);

/* console.c: printk() lines are TAP diagnostics ("# " prefixed), so the
 * raw serial log is a valid TAP stream; tap_printf() writes raw lines. */
void console_init(void);
int vsnprintf(char *buf, size_t size, const char *fmt, va_list ap);
int snprintf(char *buf, size_t size, const char *fmt, ...) __printf(3, 4);
void printk(const char *fmt, ...) __printf(1, 2);
void tap_printf(const char *fmt, ...) __printf(1, 2);
void console_bust_locks(void);

#define pr_info(...)	printk(__VA_ARGS__)
#define pr_warn(...)	printk(__VA_ARGS__)
#define pr_err(...)	printk(__VA_ARGS__)

/* ksyms.c: "func+0xoff" for a text address, else the number. */
#define KSYM_LEN 64
const char *ksym(unsigned long addr, char *buf, size_t size);

/* Exit status through isa-debug-exit (QEMU exits with (v << 1) | 1). */
enum kexit {
	KEXIT_PASS = 0,		/* qemu status 1 */
	KEXIT_FAIL = 1,		/* qemu status 3: a test failed */
	KEXIT_OOPS = 2,		/* qemu status 5: oops / panic */
	KEXIT_SKIP = 38,	/* qemu status 77: no PKS on this CPU */
};
void __noreturn kernel_exit(enum kexit code);
void __noreturn panic(const char *fmt, ...) __printf(1, 2);

/* dump_stack(): print the caller's call trace.  The last one's frames are
 * kept in dump_stack_last (the tests check kmap()'s trace). */
#define DUMP_STACK_KEEP 8
struct dump_stack_info {
	unsigned long count;		/* dump_stack() calls */
	int frames;			/* frames the last one printed */
	unsigned long ret[DUMP_STACK_KEEP];	/* its return addresses */
};
extern struct dump_stack_info dump_stack_last;
void dump_stack(void);

void warn_slowpath(const char *file, int line, void *caller,
		   const char *fmt, ...) __printf(4, 5);
#define WARN(cond, ...) ({						\
	bool __c = !!(cond);						\
	if (unlikely(__c))						\
		warn_slowpath(__FILE__, __LINE__,			\
			      __builtin_return_address(0), __VA_ARGS__); \
	__c;								\
})
#define BUG_ON(cond) do {						\
	if (unlikely(cond))						\
		panic("BUG at %s:%d: %s", __FILE__, __LINE__, #cond);	\
} while (0)

/* ---- Per-CPU block, reached through %gs (set once per CPU) ---- */

struct task;
struct pt_regs;

struct tss64 {
	u32 reserved0;
	u64 rsp[3];
	u64 reserved1;
	u64 ist[7];
	u64 reserved2;
	u16 reserved3;
	u16 iomap_base;
} __attribute__((packed));

#define NR_CPUS		4
#define IST_STACK_SIZE	4096

struct cpu {
	struct cpu *self;		/* %gs:0, see this_cpu() */
	int id;
	u32 apic_id;
	struct task *curr;
	int irq_depth;		/* exception / interrupt nesting */
	int preempt_count;
	bool need_resched;
	u32 pkrs_cache;		/* last value written to PKRS */
	u32 boot_pkrs;		/* PKRS read back after setup */
	/* The #PF being decided, for the key callbacks. */
	struct pt_regs *fault_regs;
	volatile bool online;
	u64 gdt[7] __aligned(16);
	struct tss64 tss __aligned(16);
	u8 df_stack[IST_STACK_SIZE] __aligned(16);
};

extern struct cpu cpus[NR_CPUS];
extern int nr_cpus_online;

static inline struct cpu *this_cpu(void)
{
	struct cpu *c;

	__asm__ __volatile__("movq %%gs:0, %0" : "=r"(c));
	return c;
}

#define current (this_cpu()->curr)

/* Kernel command line (main.c). */
extern bool pmg_negative_control;
const char *cmdline_get(const char *key);

/* Exception fixups (traps.c, entry.S). */
bool fixup_exception(struct pt_regs *regs);
int copy_to_kernel_nofault(void *dst, const void *src, size_t size);
int copy_from_kernel_nofault(void *dst, const void *src, size_t size);

/* smp.c */
void smp_boot_aps(void);
void ap_main(struct cpu *c);
typedef void (*smp_call_func_t)(void *info);
int on_each_cpu(smp_call_func_t func, void *info);
void smp_call_ipi(void);

/* cpu setup shared by BSP and APs (traps.c) */
void cpu_init_tables(struct cpu *c);
void trap_init(void);

#endif /* PMG_KERNEL_H */
