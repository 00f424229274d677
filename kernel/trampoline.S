/* SPDX-License-Identifier: MIT */
/*
 * Application-processor start-up code.  smp.c copies it to TRAMP_BASE (a
 * SIPI vector must name a page below 1 MiB), fills in tramp_cr3 /
 * tramp_stack / tramp_cpu, and sends INIT-SIPI-SIPI.  The AP walks real
 * mode -> protected mode -> long mode with the kernel's page tables and
 * jumps to ap_entry64.  ENTER_LONG_MODE (longmode.h) sets CR0.WP here too:
 * PKS write-disable needs it.
 */
#include "longmode.h"

#define TRAMP_BASE	0x8000
#define T(sym)		((sym) - trampoline_start + TRAMP_BASE)

	.section .rodata
	.code16
	.globl trampoline_start, trampoline_end
	.globl tramp_cr3, tramp_stack, tramp_cpu
trampoline_start:
	cli
	cld
	xorw	%ax, %ax
	movw	%ax, %ds
	lgdtl	T(tramp_gdt_ptr)
	movl	%cr0, %eax
	orl	$1, %eax
	movl	%eax, %cr0
	ljmpl	$0x08, $T(tramp32)

	.code32
tramp32:
	movw	$0x10, %ax
	movw	%ax, %ds
	movw	%ax, %es
	movw	%ax, %ss
	ENTER_LONG_MODE T(tramp_cr3)
	ljmpl	$0x18, $T(tramp64)

	.code64
tramp64:
	movq	T(tramp_stack), %rsp
	movq	T(tramp_cpu), %rdi
	movabsq	$ap_entry64, %rax
	jmp	*%rax

	.align 8
tramp_gdt:
	.quad	0
	.quad	0x00cf9a000000ffff	/* 0x08: 32-bit code */
	.quad	0x00cf92000000ffff	/* 0x10: data */
	.quad	0x00209a0000000000	/* 0x18: 64-bit code */
tramp_gdt_ptr:
	.word	tramp_gdt_ptr - tramp_gdt - 1
	.long	T(tramp_gdt)
	.align 8
tramp_cr3:
	.quad	0
tramp_stack:
	.quad	0
tramp_cpu:
	.quad	0
trampoline_end:
