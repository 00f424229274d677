/* SPDX-License-Identifier: MIT */
/*
 * Exception and interrupt entry, the context-switch primitive and the
 * nofault copy.
 *
 * Every vector has a 16-byte stub that completes the hardware frame to a
 * struct pt_regs (orig_ax = error code or -1), passes the vector in %esi
 * and, as the seeds' entry_64.S does, brackets the call into C with
 * PUSH_PTREGS_AUXILIARY / POP_PTREGS_AUXILIARY: the hidden space just below
 * pt_regs where C saves the interrupted PKRS.  A nested exception builds a
 * new frame lower on the same stack, with its own auxiliary space.
 */
#include "ptrace.h"

.macro PUSH_PTREGS_AUXILIARY
	/* add space for pt_regs_auxiliary */
	subq	$PTREGS_AUX_SIZE, %rsp
.endm

.macro POP_PTREGS_AUXILIARY
	/* remove space for pt_regs_auxiliary */
	addq	$PTREGS_AUX_SIZE, %rsp
.endm

	.text
	.align 16
	.globl exc_stubs
exc_stubs:
	.set vec, 0
	.rept 256
	.align 16
	/* Vectors where the CPU pushes an error code itself. */
	.if vec == 8 || vec == 10 || vec == 11 || vec == 12 || vec == 13 || \
	    vec == 14 || vec == 17 || vec == 21 || vec == 29 || vec == 30
	.else
	pushq	$-1			/* pt_regs->orig_ax */
	.endif
	pushq	%rdi			/* pt_regs->di */
	movl	$vec, %edi
	jmp	common_entry
	.set vec, vec + 1
	.endr

common_entry:
	pushq	%rsi			/* pt_regs->si */
	pushq	%rdx
	pushq	%rcx
	pushq	%rax
	pushq	%r8
	pushq	%r9
	pushq	%r10
	pushq	%r11
	pushq	%rbx
	pushq	%rbp
	pushq	%r12
	pushq	%r13
	pushq	%r14
	pushq	%r15			/* pt_regs->r15 */
	cld
	movl	%edi, %esi		/* vector */
	movq	%rsp, %rdi		/* pt_regs pointer */
	PUSH_PTREGS_AUXILIARY
	call	exc_dispatch
	POP_PTREGS_AUXILIARY
	popq	%r15
	popq	%r14
	popq	%r13
	popq	%r12
	popq	%rbp
	popq	%rbx
	popq	%r11
	popq	%r10
	popq	%r9
	popq	%r8
	popq	%rax
	popq	%rcx
	popq	%rdx
	popq	%rsi
	popq	%rdi
	addq	$8, %rsp		/* orig_ax */
	iretq

/*
 * void __switch_to_asm(unsigned long *prev_sp, unsigned long next_sp)
 * Callee-saved registers go on the outgoing stack; PKRS is handled in C
 * before this (sched.c), like Linux's __switch_to().
 */
	.globl __switch_to_asm
__switch_to_asm:
	pushq	%rbp
	pushq	%rbx
	pushq	%r12
	pushq	%r13
	pushq	%r14
	pushq	%r15
	movq	%rsp, (%rdi)
	movq	%rsi, %rsp
	popq	%r15
	popq	%r14
	popq	%r13
	popq	%r12
	popq	%rbx
	popq	%rbp
	ret

/* First return of a new thread: %rbx holds its struct task. */
	.globl thread_entry_asm
thread_entry_asm:
	movq	%rbx, %rdi
	xorl	%ebp, %ebp
	call	thread_start
	ud2

/*
 * int copy_nofault(void *dst, const void *src, size_t size)
 * 0, or -EFAULT when an access faults and nobody grants it: the #PF
 * handler finds the faulting rep movsb in __ex_table and resumes at 2:.
 */
	.globl copy_to_kernel_nofault, copy_from_kernel_nofault
copy_to_kernel_nofault:
copy_from_kernel_nofault:
	movq	%rdx, %rcx
1:	rep movsb
	xorl	%eax, %eax
	ret
2:	movl	$-14, %eax
	ret
	.pushsection __ex_table, "a"
	.balign 8
	.quad	1b, 2b
	.popsection

/* AP entry from the trampoline, in long mode with the kernel's CR3. */
	.globl ap_entry64
ap_entry64:
	xorl	%ebp, %ebp
	call	ap_main
3:	cli
	hlt
	jmp	3b
