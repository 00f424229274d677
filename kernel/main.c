// SPDX-License-Identifier: MIT
/*
 * kernel_main: bring the boot CPU up, enable PKS, start the other CPUs,
 * attach the pmem devices and run the pks_test list.
 *
 * Command line (QEMU -append, through Multiboot):
 *   pks_test=N[,N...]       tests to run, in order (default: the full list)
 *   pks_fault_mode=relaxed|strict   PMEM stray-access policy (relaxed)
 *   pmg_negative_control    PMEM key read/write in the init value: the
 *                           stray-write test must then fail
 */
#include "dax.h"
#include "kernel.h"
#include "pgtable.h"
#include "pks.h"
#include "sched.h"
#include "x86.h"

#define MULTIBOOT_BOOTLOADER_MAGIC	0x2badb002
#define MB_INFO_MEMORY			(1U << 0)
#define MB_INFO_CMDLINE			(1U << 2)

struct multiboot_info {
	u32 flags;
	u32 mem_lower;
	u32 mem_upper;
	u32 boot_device;
	u32 cmdline;
};

extern char __kernel_end[];
int pks_test_main(const char *list);

bool pmg_negative_control;

#define MAX_ARGS 32
static char cmdline[512];
static char *argv[MAX_ARGS];
static int argc;

static void cmdline_parse(const char *src)
{
	char *p = cmdline;

	pmg_strlcpy(cmdline, src, sizeof(cmdline));
	while (*p && argc < MAX_ARGS) {
		while (*p == ' ')
			*p++ = '\0';
		if (!*p)
			break;
		argv[argc++] = p;
		while (*p && *p != ' ')
			p++;
	}
}

/* "" for a bare flag, the value for key=value, NULL when absent. */
const char *cmdline_get(const char *key)
{
	size_t n = strlen(key);
	int i;

	for (i = 0; i < argc; i++) {
		if (strncmp(argv[i], key, n))
			continue;
		if (argv[i][n] == '=')
			return argv[i] + n + 1;
		if (!argv[i][n])
			return "";
	}
	return NULL;
}

void kernel_main(u32 magic, u32 info_phys);

void kernel_main(u32 magic, u32 info_phys)
{
	const struct multiboot_info *mbi = (void *)(unsigned long)info_phys;
	struct cpu *c = &cpus[0];
	const char *mode;

	/* %gs first: this_cpu() is used by everything below. */
	c->self = c;
	wrmsr(MSR_GS_BASE, (u64)c);
	console_init();
	tap_printf("TAP version 13\n");
	printk("pmguard-kernel: PKS stray-write protection, supervisor port\n");

	if (magic != MULTIBOOT_BOOTLOADER_MAGIC)
		panic("not started by a Multiboot loader (0x%x)", magic);
	/* Copy the command line before mm_init() hands out the pages
	 * after the kernel, where the loader put it. */
	if (mbi->flags & MB_INFO_CMDLINE)
		cmdline_parse((const char *)(unsigned long)mbi->cmdline);
	if ((mbi->flags & MB_INFO_MEMORY) &&
	    (u64)(mbi->mem_upper + 1024) * 1024 < PHYS_END)
		panic("need %lu MiB of RAM, have %u KiB", PHYS_END >> 20,
		      mbi->mem_upper + 1024);
	pmg_negative_control = cmdline_get("pmg_negative_control") != NULL;

	trap_init();
	cpu_init_tables(c);
	mm_init((unsigned long)__kernel_end);

	pks_core_setup();
	if (!pks_available()) {
		/* Never set CR4.PKS without CPUID's word for it. */
		tap_printf("1..0 # SKIP no PKS (CPUID.(7,0):ECX[31] clear)\n");
		kernel_exit(KEXIT_SKIP);
	}
	mode = cmdline_get("pks_fault_mode");
	if (mode && pks_set_fault_mode(mode))
		printk("pks: bad pks_fault_mode '%s', keeping %s\n", mode,
		       pmg_mode_name(pks_fault_mode));
	sched_init();
	pks_setup();
	printk("pks: CR4.PKS on, PKRS 0x%08x (PKS_INIT_VALUE 0x%08x)%s, "
	       "pks_fault_mode=%s\n", pks_read_pkrs(), PKS_INIT_VALUE,
	       pmg_negative_control ? " NEGATIVE CONTROL: pmem key read/write"
				    : "", pmg_mode_name(pks_fault_mode));

	timer_init();
	local_irq_enable();
	smp_boot_aps();
	printk("smp: %d CPU(s) online\n", nr_cpus_online);
	if (pmem_init())
		panic("pmem: cannot attach");
	printk("pmem: pmem0 %lu MiB at 0x%lx (protected, pkey %d), "
	       "pmem1 %lu MiB at 0x%lx\n", pmem0.size >> 20, pmem0.phys,
	       PKS_KEY_PGMAP_PROTECTION, pmem1.size >> 20, pmem1.phys);

	kernel_exit(pks_test_main(cmdline_get("pks_test")) ? KEXIT_FAIL
							   : KEXIT_PASS);
}
