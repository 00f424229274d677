/* SPDX-License-Identifier: MIT */
/*
 * Register frame of an exception and the seeds' auxiliary pt_regs space
 * (V8 "x86/entry: Add auxiliary pt_regs space").
 *
 * The entry code (entry.S) builds struct pt_regs exactly as Linux does,
 * then reserves PTREGS_AUX_SIZE more bytes below it (PUSH_PTREGS_AUXILIARY)
 * before calling C.  C reaches that hidden space with to_extended_pt_regs():
 * it is where the PKRS of the interrupted context is kept while the
 * exception runs.  Each nested exception pushes its own frame, so each gets
 * its own auxiliary space and nesting depth is unlimited.
 *
 * This header is shared with the assembly: only PTREGS_AUX_SIZE and the
 * frame offsets are visible there.
 */
#ifndef PMG_PTRACE_H
#define PMG_PTRACE_H

/*
 * sizeof(struct pt_regs_extended) - sizeof(struct pt_regs).  Linux derives
 * it with asm-offsets; here a _Static_assert below keeps the two in step.
 */
#define PTREGS_AUX_SIZE		8

#ifndef __ASSEMBLER__

#include "kernel.h"

struct pt_regs {
	unsigned long r15;
	unsigned long r14;
	unsigned long r13;
	unsigned long r12;
	unsigned long bp;
	unsigned long bx;
	unsigned long r11;
	unsigned long r10;
	unsigned long r9;
	unsigned long r8;
	unsigned long ax;
	unsigned long cx;
	unsigned long dx;
	unsigned long si;
	unsigned long di;
	unsigned long orig_ax;	/* error code (or -1) */
	unsigned long ip;
	unsigned long cs;
	unsigned long flags;
	unsigned long sp;
	unsigned long ss;
};

/* The seeds' struct pt_regs_auxiliary with its one PKS member. */
struct pt_regs_auxiliary {
	u32 pks_thread_pkrs;	/* PKRS of the interrupted context */
};

struct pt_regs_extended {
	struct pt_regs_auxiliary aux;
	struct pt_regs pt_regs __aligned(8);
};

static inline struct pt_regs_extended *to_extended_pt_regs(struct pt_regs *regs)
{
	return container_of(regs, struct pt_regs_extended, pt_regs);
}

BUILD_BUG_ON(sizeof(struct pt_regs_extended) - sizeof(struct pt_regs) !=
	     PTREGS_AUX_SIZE);
/* The entry code calls C with %rsp 16-byte aligned only if this holds. */
BUILD_BUG_ON(sizeof(struct pt_regs_extended) % 16 != 0);

#endif /* !__ASSEMBLER__ */

#endif /* PMG_PTRACE_H */
