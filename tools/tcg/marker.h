/* SPDX-License-Identifier: MIT */
/*
 * marker.h - region markers for the TCG counting plugin (tools/tcg/count.c).
 *
 * PMG_COUNT_BEGIN(id) and PMG_COUNT_END(id) each emit one 8-byte NOP,
 * "nopl DISP(%rax,%rax,1)" (0f 1f 84 00 + disp32), whose displacement the
 * plugin recognises from the bytes alone (QEMU 7.2's plugin API shows no
 * registers): high 16 bits PMG_MARK_MAGIC ("PG"), bit 15 PMG_MARK_END on
 * the end marker, bits 0-14 the region id.  A NOP everywhere else: on
 * hardware, and under QEMU without the plugin.  The asm is volatile with a
 * memory clobber, so the compiler moves no memory access across it.
 * Also included by the plugin for the constants (host code).
 */
#ifndef PMG_TCG_MARKER_H
#define PMG_TCG_MARKER_H

#define PMG_MARK_MAGIC 0x5047u
#define PMG_MARK_END 0x8000u
#define PMG_MARK_ID_MASK 0x7fffu

/* @disp: an integer constant expression, emitted as the displacement. */
#define _PMG_MARK(disp)                                                 \
	__asm__ volatile(                                               \
		".byte 0x0f, 0x1f, 0x84, 0x00\n\t.long %c0" ::"i"(disp) \
		: "memory")

#define PMG_COUNT_BEGIN(id) \
	_PMG_MARK((PMG_MARK_MAGIC << 16) | ((id)&PMG_MARK_ID_MASK))
#define PMG_COUNT_END(id)                                 \
	_PMG_MARK((PMG_MARK_MAGIC << 16) | PMG_MARK_END | \
		  ((id)&PMG_MARK_ID_MASK))

#endif
