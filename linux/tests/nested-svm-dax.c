// SPDX-License-Identifier: MIT
/*
 * nested-svm-dax - a KVM virtual machine whose memory is an mmap() of a
 * device-dax device runs VMRUN (nested SVM), in the Linux test guest
 * (linux/tests/dax.sh, the debug kernel's "extra" tests: KVM runs on QEMU
 * TCG's emulated AMD SVM, kvm_amd's nested=1 is the default).  Static; TAP
 * on stdout.
 *
 * Usage: nested-svm-dax DEV   (a device-dax device of 4 KiB alignment, at
 *                              least 64 KiB; its first 64 KiB are
 *                              overwritten)
 *
 * The vCPU starts in 32-bit protected mode with paging (CR0 PE|PG, CR4 PSE,
 * CR3 -> a page directory whose one 4 MiB PDE maps the VM's memory 1:1,
 * flat segments) and EFER.SVME, with the CPUID KVM supports (SVM included).
 * Its code writes MSR_VM_HSAVE_PA, runs VMRUN with a zeroed VMCB at
 * VMCB12, and halts.  KVM's nested_svm_vmrun() maps the VMCB with
 * kvm_vcpu_map(); the zeroed VMCB fails KVM's consistency checks, and KVM
 * writes the VMRUN failure, exit_code = SVM_EXIT_ERR (-1) and exit_code_hi
 * = -1, into it through that mapping: a host-kernel write into device-dax
 * memory, which carries the PMEM protection key.  The program checks that
 * the VM halted after VMRUN and that both words were written.  Before
 * patch "KVM: Map protected device pages of kvm_vcpu_map() with vmap()"
 * kvm_vcpu_map() used kmap(), i.e. the protected direct map: a kmap()
 * warning and a fault for the reads and the write (relaxed mode counts
 * them, strict mode oopses the vCPU thread); the caller (dax.sh) checks
 * pks_relaxed_faults and dmesg.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kvm-vm.h"

#define MEM (64 * 1024)
#define CODE 0x1000
#define PGDIR 0x3000
#define HSAVE 0x4000
#define VMCB12 0x5000
#define MSR_VM_HSAVE_PA 0xc0010117
/* struct vmcb_control_area: exit_code, exit_code_hi (arch/x86/include/asm/svm.h) */
#define VMCB_EXIT_CODE 0x70
#define VMCB_EXIT_CODE_HI 0x74
#define SVM_EXIT_ERR 0xffffffffu
#define EFER_SVME (1u << 12)
#define CR0_PE 1u
#define CR0_PG (1u << 31)
#define CR4_PSE (1u << 4)

/* a flat 4 GiB segment: code (type 11, execute/read, accessed) or data (3) */
static void flat(struct kvm_segment *s, uint16_t sel, uint8_t type)
{
	*s = (struct kvm_segment){
		.base = 0, .limit = 0xffffffff, .selector = sel, .type = type,
		.present = 1, .dpl = 0, .db = 1, .s = 1, .l = 0, .g = 1,
	};
}

/* the CPUID that KVM supports (SVM with nested=1) for the vCPU */
static int set_cpuid(int kvm, int vcpu)
{
	struct kvm_cpuid2 *c = NULL;
	int n, r = -1;

	for (n = 64; n <= 1024; n *= 2) {
		free(c);
		c = calloc(1, sizeof(*c) + n * sizeof(c->entries[0]));
		if (!c)
			return -1;
		c->nent = n;
		r = ioctl(kvm, KVM_GET_SUPPORTED_CPUID, c);
		if (r == 0 || errno != E2BIG)
			break;
	}
	if (r == 0) {
		for (n = 0; n < (int)c->nent; n++)
			if (c->entries[n].function == 0x80000001)
				printf("# CPUID 0x80000001 ecx 0x%x (SVM: %u)\n", c->entries[n].ecx,
				       (c->entries[n].ecx >> 2) & 1);
		r = ioctl(vcpu, KVM_SET_CPUID2, c);
	}
	free(c);
	return r;
}

int main(int argc, char **argv)
{
	/*
	 * 32-bit code: mov ecx, MSR_VM_HSAVE_PA; mov eax, HSAVE; xor edx, edx;
	 * wrmsr; mov eax, VMCB12; vmrun; hlt
	 */
	static const uint8_t code[] = {
		0xb9, 0x17, 0x01, 0x01, 0xc0,
		0xb8, HSAVE & 0xff, HSAVE >> 8, 0x00, 0x00,
		0x31, 0xd2,
		0x0f, 0x30,
		0xb8, VMCB12 & 0xff, VMCB12 >> 8, 0x00, 0x00,
		0x0f, 0x01, 0xd8,
		0xf4,
	};
	struct kvm_sregs sregs;
	struct kvm_regs regs;
	uint32_t code_lo, code_hi;
	struct dax_vm v;
	int i, halted;

	if (argc != 2) {
		fprintf(stderr, "usage: nested-svm-dax DEV\n");
		return 2;
	}
	if (dax_vm_create(&v, argv[1], MEM, code, sizeof(code), CODE))
		return tap_done("nested-svm-dax");
	/* PDE 0: present, writable, 4 MiB page at 0 */
	*(uint32_t *)(v.mem + PGDIR) = 0x83;

	i = set_cpuid(v.kvm, v.vcpu);
	if (!result(i == 0, "the vCPU gets KVM's supported CPUID (%s)", i ? strerror(errno) : "ok"))
		return tap_done("nested-svm-dax");
	i = ioctl(v.vcpu, KVM_GET_SREGS, &sregs);
	if (i == 0) {
		flat(&sregs.cs, 0x08, 11);
		flat(&sregs.ds, 0x10, 3);
		sregs.es = sregs.fs = sregs.gs = sregs.ss = sregs.ds;
		sregs.cr0 = CR0_PE | CR0_PG;
		sregs.cr4 = CR4_PSE;
		sregs.cr3 = PGDIR;
		sregs.efer = EFER_SVME;
		i = ioctl(v.vcpu, KVM_SET_SREGS, &sregs);
	}
	memset(&regs, 0, sizeof(regs));
	regs.rip = CODE;
	regs.rflags = 2;
	if (!result(i == 0 && ioctl(v.vcpu, KVM_SET_REGS, &regs) == 0,
		    "the vCPU starts in 32-bit paged protected mode with EFER.SVME at 0x%x (%s)",
		    CODE, i ? strerror(errno) : "ok"))
		return tap_done("nested-svm-dax");
	halted = dax_vm_run(&v);
	if (ioctl(v.vcpu, KVM_GET_REGS, &regs) == 0)
		printf("# rip 0x%llx rax 0x%llx\n", (unsigned long long)regs.rip,
		       (unsigned long long)regs.rax);
	result(halted && regs.rip == CODE + sizeof(code),
	       "the VM ran wrmsr MSR_VM_HSAVE_PA, vmrun and halted after it (rip 0x%llx)",
	       (unsigned long long)regs.rip);
	memcpy(&code_lo, v.mem + VMCB12 + VMCB_EXIT_CODE, 4);
	memcpy(&code_hi, v.mem + VMCB12 + VMCB_EXIT_CODE_HI, 4);
	result(code_lo == SVM_EXIT_ERR && code_hi == SVM_EXIT_ERR,
	       "KVM wrote the failed VMRUN's exit_code SVM_EXIT_ERR into the VMCB in device-dax memory (exit_code 0x%x, exit_code_hi 0x%x)",
	       code_lo, code_hi);
	return tap_done("nested-svm-dax");
}
