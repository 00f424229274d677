/* SPDX-License-Identifier: MIT */
/*
 * ENTER_LONG_MODE, for the 32-bit entry code of the boot CPU (head.S) and
 * of the application processors (trampoline.S): one sequence, so the two
 * cannot drift apart (CR0.WP in particular).  Assembler only.
 */
#ifndef PMG_KERNEL_LONGMODE_H
#define PMG_KERNEL_LONGMODE_H

/*
 * In 32-bit protected mode with paging off: PAE, CR3 = pml4 (any 32-bit
 * source operand, e.g. $boot_pml4 or a memory word), EFER.LME, then PG,
 * WP and PE: the CPU is in long mode (compatibility mode) until the far
 * jump to a 64-bit code segment that the caller makes.  WP matters for
 * PKS: supervisor writes honour a key's write-disable bit only with
 * CR0.WP set.  Clobbers EAX, ECX, EDX.
 */
.macro ENTER_LONG_MODE pml4:req
	movl	%cr4, %eax
	orl	$(1 << 5), %eax		/* PAE */
	movl	%eax, %cr4
	movl	\pml4, %eax
	movl	%eax, %cr3
	movl	$0xc0000080, %ecx	/* EFER.LME */
	rdmsr
	orl	$(1 << 8), %eax
	wrmsr
	movl	%cr0, %eax
	orl	$0x80010001, %eax	/* PG | WP | PE */
	movl	%eax, %cr0
.endm

#endif
