/* SPDX-License-Identifier: MIT */
/*
 * kvm-vm.h - the VM of the device-dax KVM tests (kvmclock-dax.c,
 * nested-svm-dax.c): one memory slot that is an mmap() of a device-dax
 * device, one vCPU, and a run loop to the guest's hlt.  TAP results
 * through tap.h.
 */
#ifndef PMG_LINUX_TESTS_KVM_VM_H
#define PMG_LINUX_TESTS_KVM_VM_H

#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include "tap.h"

struct dax_vm {
	int kvm, vcpu;
	struct kvm_run *run;
	uint8_t *mem;	/* the device-dax mapping: guest-physical 0 */
};

/*
 * Open /dev/kvm, map @memsz bytes of device-dax @dev MAP_SHARED, zero
 * them, copy @code to guest-physical @at, and make a VM with that memory
 * and one vCPU.  Each step is a TAP result; 0, or -1 after a failed one.
 */
static int dax_vm_create(struct dax_vm *v, const char *dev, size_t memsz, const void *code,
			 size_t codesz, uint64_t at)
{
	struct kvm_userspace_memory_region region;
	int vm, dfd, slot, runsz;

	v->kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (!result(v->kvm >= 0, "open /dev/kvm (%s)", v->kvm >= 0 ? "ok" : strerror(errno)))
		return -1;
	dfd = open(dev, O_RDWR | O_CLOEXEC);
	v->mem = dfd < 0 ? MAP_FAILED :
		mmap(NULL, memsz, PROT_READ | PROT_WRITE, MAP_SHARED, dfd, 0);
	if (!result(v->mem != MAP_FAILED, "%s mapped MAP_SHARED, %zu KiB (%s)", dev, memsz / 1024,
		    v->mem != MAP_FAILED ? "ok" : strerror(errno)))
		return -1;
	memset(v->mem, 0, memsz);
	memcpy(v->mem + at, code, codesz);

	vm = ioctl(v->kvm, KVM_CREATE_VM, 0);
	region = (struct kvm_userspace_memory_region){
		.slot = 0, .guest_phys_addr = 0, .memory_size = memsz,
		.userspace_addr = (uintptr_t)v->mem,
	};
	slot = vm < 0 ? -1 : ioctl(vm, KVM_SET_USER_MEMORY_REGION, &region);
	v->vcpu = slot ? -1 : ioctl(vm, KVM_CREATE_VCPU, 0);
	runsz = v->vcpu < 0 ? -1 : ioctl(v->kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	v->run = runsz <= 0 ? MAP_FAILED :
		mmap(NULL, (size_t)runsz, PROT_READ | PROT_WRITE, MAP_SHARED, v->vcpu, 0);
	if (!result(v->run != MAP_FAILED,
		    "a VM with the device-dax mapping as its memory and one vCPU (vm %d, slot %d, vcpu %d: %s)",
		    vm, slot, v->vcpu, v->run != MAP_FAILED ? "ok" : strerror(errno)))
		return -1;
	return 0;
}

/* Run the vCPU until it halts (true), fails or exits 10 times (false). */
static int dax_vm_run(struct dax_vm *v)
{
	int i;

	for (i = 0; i < 10; i++) {
		if (ioctl(v->vcpu, KVM_RUN, 0)) {
			printf("# KVM_RUN: %s\n", strerror(errno));
			return 0;
		}
		printf("# exit reason %u\n", v->run->exit_reason);
		switch (v->run->exit_reason) {
		case KVM_EXIT_HLT:
			return 1;
		case KVM_EXIT_SHUTDOWN:
		case KVM_EXIT_FAIL_ENTRY:
		case KVM_EXIT_INTERNAL_ERROR:
			return 0;
		}
	}
	return 0;
}

#endif
