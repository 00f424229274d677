/* SPDX-License-Identifier: MIT */
/*
 * Boot: Multiboot v1 header, 32-bit entry, switch to long mode.
 *
 * QEMU's -kernel loads the ELF (converted to elf32-i386 after linking, as
 * its Multiboot loader refuses 64-bit ELF) and enters _start32 in 32-bit
 * protected mode with paging off, EAX = Multiboot magic, EBX = info.  We
 * bring our own GDT and a throw-away identity map of the first GiB in 2 MiB
 * pages; C (mm_init) replaces it with the real 4 KiB tables.
 */

#include "longmode.h"

#define MB_MAGIC	0x1badb002
#define MB_FLAGS	0x00000003	/* page-align modules, memory info */

#define COM1		0x3f8
#define DEBUG_EXIT	0xf4

	.section .multiboot, "a"
	.align 4
	.long MB_MAGIC
	.long MB_FLAGS
	.long -(MB_MAGIC + MB_FLAGS)

	.section .text.boot, "ax"
	.code32
	.globl _start32
_start32:
	cli
	cld
	/* rep stosb below clobbers EAX/ECX/EDI: keep magic and info safe. */
	movl	%eax, %ebp
	movl	%ebx, %esi

	/* Zero .bss: it holds the boot stack and the boot page tables. */
	movl	$__bss_start, %edi
	movl	$__bss_end, %ecx
	subl	%edi, %ecx
	xorl	%eax, %eax
	rep stosb

	movl	$boot_stack_top, %esp

	/* Long mode is required; say so on COM1 and exit if it is missing. */
	movl	$0x80000000, %eax
	cpuid
	cmpl	$0x80000001, %eax
	jb	no_long_mode
	movl	$0x80000001, %eax
	cpuid
	btl	$29, %edx
	jnc	no_long_mode

	/* PML4[0] -> PDPT[0] -> PD: 512 x 2 MiB identity pages. */
	movl	$boot_pdpt, %eax
	orl	$0x3, %eax
	movl	%eax, boot_pml4
	movl	$boot_pd, %eax
	orl	$0x3, %eax
	movl	%eax, boot_pdpt
	xorl	%ecx, %ecx
1:	movl	%ecx, %eax
	shll	$21, %eax
	orl	$0x83, %eax		/* present, writable, 2 MiB */
	movl	%eax, boot_pd(, %ecx, 8)
	incl	%ecx
	cmpl	$512, %ecx
	jne	1b

	ENTER_LONG_MODE $boot_pml4
	lgdt	boot_gdt_ptr
	ljmp	$0x08, $start64

no_long_mode:
	movl	$no_lm_msg, %esi
2:	lodsb
	testb	%al, %al
	jz	3f
	movw	$COM1, %dx
	outb	%al, %dx
	jmp	2b
3:	movw	$DEBUG_EXIT, %dx
	movl	$1, %eax
	outl	%eax, %dx
4:	hlt
	jmp	4b

	.code64
start64:
	movw	$0x10, %ax
	movw	%ax, %ds
	movw	%ax, %es
	movw	%ax, %ss
	xorw	%ax, %ax
	movw	%ax, %fs
	movw	%ax, %gs
	movq	$boot_stack_top, %rsp
	/* kernel_main(magic, info): magic was kept in EBP, info in ESI. */
	movl	%ebp, %edi
	movl	%esi, %esi		/* zero-extend */
	xorl	%ebp, %ebp		/* ends the frame-pointer chain */
	call	kernel_main
5:	cli
	hlt
	jmp	5b

	.section .rodata
no_lm_msg:
	.asciz	"TAP version 13\r\n1..0 # SKIP no long mode\r\n"

	.align 16
boot_gdt:
	.quad	0
	.quad	0x00209a0000000000	/* 0x08: 64-bit code */
	.quad	0x0000920000000000	/* 0x10: data */
boot_gdt_end:
boot_gdt_ptr:
	.word	boot_gdt_end - boot_gdt - 1
	.long	boot_gdt

	.section .bss
	.align 4096
boot_pml4:
	.skip	4096
boot_pdpt:
	.skip	4096
boot_pd:
	.skip	4096
	.globl boot_stack
boot_stack:
	.skip	16384
	.globl boot_stack_top
boot_stack_top:
