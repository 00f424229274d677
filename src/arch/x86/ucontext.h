/* SPDX-License-Identifier: MIT */
/*
 * The interrupted x86-64 context of a signal frame: the one place the
 * library reads or edits the saved registers (uc_mcontext.gregs), the
 * page-fault error code and the extended state.  The handlers (fault.c),
 * contain's decoder and undo (contain.c), the quarantine report
 * (quarantine.c) and the PKU backend's saved PKRU (prim_pku.c) see
 * registers through these names only.
 *
 * Everything here is a static inline load or store into the frame: no
 * call, no allocation, async-signal-safe as the handlers need.  Editing
 * the frame changes what sigreturn loads into the interrupted context.
 *
 * The #PF error-code bits and the EFLAGS bits carry the Linux kernel's
 * names (arch/x86/include/asm/trap_pf.h, uapi/asm/processor-flags.h).
 */
#ifndef PMG_ARCH_X86_UCONTEXT_H
#define PMG_ARCH_X86_UCONTEXT_H

#include <stdbool.h>
#include <stdint.h>
#include <ucontext.h>

/* EFLAGS.TF: the single step's trap after one instruction. */
#define X86_EFLAGS_TF 0x100
/* EFLAGS.DF: string instructions walk down (std). */
#define X86_EFLAGS_DF 0x400

/* The page-fault error code (the frame's REG_ERR for a #PF). */
#define X86_PF_PROT (1u << 0) /* 0: page not present; 1: protection */
#define X86_PF_WRITE (1u << 1) /* 0: read; 1: write */
#define X86_PF_USER (1u << 2) /* user-mode access */
#define X86_PF_INSTR (1u << 4) /* an instruction fetch */
#define X86_PF_PK (1u << 5) /* protection keys refused it */

#ifdef __x86_64__

/*
 * The general registers, as indexes of the frame's register array (an
 * int: a step record keeps one, contain.h's base).  Anything else, -1,
 * names no register.
 */
enum pmg_x86_greg {
	PMG_X86_RAX = REG_RAX,
	PMG_X86_RCX = REG_RCX,
	PMG_X86_RDX = REG_RDX,
	PMG_X86_RBX = REG_RBX,
	PMG_X86_RSP = REG_RSP,
	PMG_X86_RBP = REG_RBP,
	PMG_X86_RSI = REG_RSI,
	PMG_X86_RDI = REG_RDI,
	PMG_X86_R8 = REG_R8,
	PMG_X86_R9 = REG_R9,
	PMG_X86_R10 = REG_R10,
	PMG_X86_R11 = REG_R11,
	PMG_X86_R12 = REG_R12,
	PMG_X86_R13 = REG_R13,
	PMG_X86_R14 = REG_R14,
	PMG_X86_R15 = REG_R15,
	PMG_X86_RIP = REG_RIP,
};

/* General register @g (enum pmg_x86_greg) of the frame, all 64 bits. */
static inline uint64_t pmg_uc_greg(const ucontext_t *uc, int g)
{
	return (uint64_t)uc->uc_mcontext.gregs[g];
}

/* The frame's general registers, indexed by enum pmg_x86_greg: what
 * sigreturn loads into them. */
static inline greg_t *pmg_uc_regs(ucontext_t *uc)
{
	return uc->uc_mcontext.gregs;
}

/* The interrupted instruction (RIP). */
static inline uintptr_t pmg_uc_ip(const ucontext_t *uc)
{
	return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
}

/* The interrupted stack pointer (RSP). */
static inline uintptr_t pmg_uc_sp(const ucontext_t *uc)
{
	return (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
}

/* The interrupted EFLAGS. */
static inline uint64_t pmg_uc_flags(const ucontext_t *uc)
{
	return (uint64_t)uc->uc_mcontext.gregs[REG_EFL];
}

/* Does the interrupted context run with the trap flag (single steps)? */
static inline bool pmg_uc_tf(const ucontext_t *uc)
{
	return uc->uc_mcontext.gregs[REG_EFL] & X86_EFLAGS_TF;
}

/* The trap flag on at sigreturn: a SIGTRAP after one instruction. */
static inline void pmg_uc_set_tf(ucontext_t *uc)
{
	uc->uc_mcontext.gregs[REG_EFL] |= X86_EFLAGS_TF;
}

/* The trap flag off at sigreturn. */
static inline void pmg_uc_clear_tf(ucontext_t *uc)
{
	uc->uc_mcontext.gregs[REG_EFL] &= ~(greg_t)X86_EFLAGS_TF;
}

/* Do the interrupted context's string instructions walk down (DF)? */
static inline bool pmg_uc_df(const ucontext_t *uc)
{
	return uc->uc_mcontext.gregs[REG_EFL] & X86_EFLAGS_DF;
}

/* The fault's error code (X86_PF_* for a page fault). */
static inline uint64_t pmg_uc_pf_err(const ucontext_t *uc)
{
	return (uint64_t)uc->uc_mcontext.gregs[REG_ERR];
}

/* Was the faulting access a write (X86_PF_WRITE)? */
static inline bool pmg_uc_pf_write(const ucontext_t *uc)
{
	return (pmg_uc_pf_err(uc) & X86_PF_WRITE) != 0;
}

/* The exception vector that raised the signal (14: #PF, 1: #DB). */
static inline uint64_t pmg_uc_trapno(const ucontext_t *uc)
{
	return (uint64_t)uc->uc_mcontext.gregs[REG_TRAPNO];
}

/* The frame's FXSAVE/XSAVE area (NULL: the kernel saved none). */
static inline unsigned char *pmg_uc_xsave(ucontext_t *uc)
{
	return (unsigned char *)uc->uc_mcontext.fpregs;
}

#endif /* __x86_64__ */
#endif
