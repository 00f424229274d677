// SPDX-License-Identifier: MIT
/*
 * kvmclock-dax - a minimal KVM virtual machine whose memory is an mmap() of
 * a device-dax device, in the Linux test guest (linux/tests/guest.sh, the
 * debug kernel's "extra" tests: KVM runs nested on QEMU TCG's emulated
 * AMD SVM).  Static; TAP on stdout.
 *
 * Usage: kvmclock-dax DEV   (a device-dax device of 4 KiB alignment, at
 *                            least 64 KiB; its first 64 KiB are overwritten)
 *
 * The VM's code (16-bit real mode at 0x1000) enables kvmclock: it writes
 * MSR_KVM_SYSTEM_TIME_NEW with the guest-physical address 0x2000 (bit 0:
 * enabled) and halts.  KVM then writes the pvclock structure there from
 * the host kernel, through its gfn_to_pfn_cache: a kernel mapping of a
 * device-dax page, which carries the PMEM protection key.  The program
 * checks that the VM halted and that the structure was written (an even,
 * non-zero version and a non-zero multiplier).  Before patch "KVM: Map
 * protected devmap pages of a gfn_to_pfn_cache with vmap()" the cache used
 * kmap(), i.e. the protected direct map: a kmap() warning and a fault on
 * every clock update (relaxed mode counts them, strict mode oopses the
 * vCPU thread); the caller checks pks_relaxed_faults and dmesg.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kvm-vm.h"

#define MEM (64 * 1024)
#define CODE 0x1000
#define CLOCK 0x2000
#define MSR_KVM_SYSTEM_TIME_NEW 0x4b564d01

/* struct pvclock_vcpu_time_info (arch/x86/include/asm/pvclock-abi.h) */
struct pvclock {
	uint32_t version, pad0;
	uint64_t tsc_timestamp, system_time;
	uint32_t tsc_to_system_mul;
	int8_t tsc_shift;
	uint8_t flags, pad[2];
};


int main(int argc, char **argv)
{
	/* mov ecx, MSR; mov eax, CLOCK | 1; xor edx, edx; wrmsr; hlt */
	static const uint8_t code[] = {
		0x66, 0xb9, 0x01, 0x4d, 0x56, 0x4b,
		0x66, 0xb8, (CLOCK | 1) & 0xff, CLOCK >> 8, 0x00, 0x00,
		0x66, 0x31, 0xd2,
		0x0f, 0x30,
		0xf4,
	};
	struct kvm_sregs sregs;
	struct kvm_regs regs;
	struct pvclock *pv;
	struct dax_vm v;
	int i, halted;

	if (argc != 2) {
		fprintf(stderr, "usage: kvmclock-dax DEV\n");
		return 2;
	}
	if (dax_vm_create(&v, argv[1], MEM, code, sizeof(code), CODE))
		return tap_done("kvmclock-dax");
	if (ioctl(v.vcpu, KVM_GET_SREGS, &sregs) == 0) {
		sregs.cs.base = 0;
		sregs.cs.selector = 0;
		i = ioctl(v.vcpu, KVM_SET_SREGS, &sregs);
	} else {
		i = -1;
	}
	memset(&regs, 0, sizeof(regs));
	regs.rip = CODE;
	regs.rflags = 2;
	if (!result(i == 0 && ioctl(v.vcpu, KVM_SET_REGS, &regs) == 0,
		    "the vCPU starts in real mode at 0x%x", CODE))
		return tap_done("kvmclock-dax");
	halted = dax_vm_run(&v);
	result(halted, "the VM ran its wrmsr of MSR_KVM_SYSTEM_TIME_NEW (0x%x) and halted",
	       MSR_KVM_SYSTEM_TIME_NEW);
	pv = (struct pvclock *)(v.mem + CLOCK);
	printf("# pvclock at 0x%x: version %u tsc_to_system_mul %u tsc_shift %d system_time %llu flags 0x%x\n",
	       CLOCK, pv->version, pv->tsc_to_system_mul, pv->tsc_shift,
	       (unsigned long long)pv->system_time, pv->flags);
	result(pv->version && !(pv->version & 1) && pv->tsc_to_system_mul,
	       "KVM wrote the VM's kvmclock into device-dax memory (version %u, tsc_to_system_mul %u)",
	       pv->version, pv->tsc_to_system_mul);
	return tap_done("kvmclock-dax");
}
