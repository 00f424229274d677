/* SPDX-License-Identifier: MIT */
/*
 * Protection Keys for Supervisor pages: the seeds' kernel API on top of the
 * shared core (core/pmg_core.h).
 *
 * Static consumers and the default register value come from the core: the
 * seeds' enum pks_pkey_consumers / PKS_INIT_VALUE are enum pmg_consumer /
 * PMG_INIT_VALUE, and the register math is pmg_pkval_update().
 */
#ifndef PMG_PKS_H
#define PMG_PKS_H

#include "../core/pmg_core.h"
#include "kernel.h"

struct pt_regs;

/* The seeds' names for the consumer table (include/linux/pks-keys.h). */
#define PKS_KEY_DEFAULT			PMG_KEY_DEFAULT
#define PKS_KEY_TEST			PMG_KEY_TEST
#define PKS_KEY_PGMAP_PROTECTION	PMG_KEY_PMEM
#define PKS_KEY_NR_CONSUMERS		PMG_KEY_NR_CONSUMERS
#define PKS_INIT_VALUE			PMG_INIT_VALUE
#define PKR_RW_KEY(k)			PMG_PKR_RW_KEY(k)
#define PKR_AD_KEY(k)			PMG_PKR_AD_KEY(k)
#define PKR_WD_KEY(k)			PMG_PKR_WD_KEY(k)
#define PKR_PKEY_SHIFT(k)		PMG_PKR_SHIFT(k)
#define PKEY_ACCESS_MASK		0x3u

/* Protection values, as the uapi defines them (and as the register does). */
#define PKEY_READ_WRITE		0x0u
#define PKEY_DISABLE_ACCESS	0x1u
#define PKEY_DISABLE_WRITE	0x2u

/*
 * The consumer table of this kernel and the register value every CPU,
 * every new thread and every exception starts with.  pks_init_value equals
 * PKS_INIT_VALUE unless the negative control (PMEM key read/write) is on.
 */
extern struct pmg_core pks_core;
extern u32 pks_init_value;

/* pks_fault_mode= (the seeds' memremap.pks_fault_mode); PMEM key only. */
extern unsigned pks_fault_mode;

void pks_core_setup(void);	/* once: consumer table, init value */
void pks_setup(void);		/* each CPU: CR4.PKS, PKRS = init value */
bool pks_available(void);

u32 pks_read_pkrs(void);	/* the MSR itself, for checks */

/* Change @pkey's rights for the running context (thread or exception). */
void pks_update_protection(int pkey, u32 protection);
void pks_mk_readwrite(int pkey);		/* V8 names */
void pks_mk_noaccess(int pkey);
void pks_set_readwrite(int pkey);		/* V10 names */
void pks_set_noaccess(int pkey);
void pks_set_nowrite(int pkey);			/* Kees Cook's review */

/* Entry hooks (the seeds' arch_{save,restore}_aux_pt_regs for PKS). */
void pks_save_pt_regs(struct pt_regs *regs);
void pks_restore_pt_regs(struct pt_regs *regs);
u32 pks_saved_pkrs(struct pt_regs *regs);

/* Give the interrupted context of @regs @protection on @pkey (takes effect
 * when the exception returns). */
void pks_update_exception(struct pt_regs *regs, u8 pkey, u8 protection);

/* Context switch: load @next_pkrs for the incoming thread. */
void pks_switch_to(u32 next_pkrs);

/*
 * Per-key fault callbacks (V9 "mm/pkeys: Introduce PKS fault callbacks"):
 * called for a protection-key fault on the key before the fault mode
 * applies.  Return true when handled (normally after granting the access
 * with pks_update_exception()).
 */
typedef bool (*pks_key_callback)(struct pt_regs *regs, unsigned long address,
				 bool write);
int pks_set_key_callback(int pkey, pks_key_callback cb);
pks_key_callback pks_get_key_callback(int pkey);

/* #PF with X86_PF_PK: true when the access may be retried. */
bool pks_handle_key_fault(struct pt_regs *regs, unsigned long hw_error_code,
			  unsigned long address);
void pks_show_regs(struct pt_regs *regs);
int pks_set_fault_mode(const char *val);

struct pks_stats {
	unsigned long faults;		/* protection-key faults seen */
	unsigned long callbacks;	/* handled by a key callback */
	unsigned long syncs;		/* stale register fixed, retried */
	unsigned long relaxed_reports;	/* relaxed mode: warned */
	unsigned long relaxed_silent;	/* relaxed mode: allowed quietly */
	unsigned long strict;		/* strict: fixed up or oopsed */
};
extern struct pks_stats pks_stats;

#endif /* PMG_PKS_H */
