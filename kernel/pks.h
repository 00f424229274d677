/* SPDX-License-Identifier: MIT */
/*
 * Protection Keys for Supervisor pages: the seeds' kernel API on top of the
 * shared core (core/pmg_core.h).
 *
 * The static consumer table (the seeds' enum pks_pkey_consumers and
 * PKS_INIT_VALUE, include/linux/pks-keys.h) is this kernel's and lives
 * here; the core keeps the table's state (struct pmg_core) and does the
 * register math (pmg_pkval_update() is pkey_update_pkval()).
 */
#ifndef PMG_PKS_H
#define PMG_PKS_H

#include "../core/pmg_core.h"
#include "kernel.h"

struct pt_regs;

/*
 * Static consumers, as the seeds allocate them: add an entry with a unique
 * value 1..PMG_NR_KEYS-1 and its default in PKS_INIT_VALUE.  Key 0 must
 * stay read/write so untagged pages keep their ordinary paging
 * permissions; unused keys are access-disabled.  pks_core_setup() claims
 * the entries in the core's table and checks its value against this one.
 */
enum pks_pkey_consumers {
	PKS_KEY_DEFAULT = PMG_KEY_DEFAULT,	/* must be 0 for default PTEs */
	PKS_KEY_TEST = 1,			/* pks_test */
	PKS_KEY_PGMAP_PROTECTION = 2,		/* PGMAP_PROTECTION */
	PKS_KEY_NR_CONSUMERS,
};

#define PKS_INIT_VALUE (PMG_PKR_RW_KEY(PKS_KEY_DEFAULT) |		\
			PMG_PKR_AD_KEY(PKS_KEY_TEST) |			\
			PMG_PKR_AD_KEY(PKS_KEY_PGMAP_PROTECTION) |	\
			PMG_PKR_AD_KEY(3) | PMG_PKR_AD_KEY(4) |		\
			PMG_PKR_AD_KEY(5) | PMG_PKR_AD_KEY(6) |		\
			PMG_PKR_AD_KEY(7) | PMG_PKR_AD_KEY(8) |		\
			PMG_PKR_AD_KEY(9) | PMG_PKR_AD_KEY(10) |	\
			PMG_PKR_AD_KEY(11) | PMG_PKR_AD_KEY(12) |	\
			PMG_PKR_AD_KEY(13) | PMG_PKR_AD_KEY(14) |	\
			PMG_PKR_AD_KEY(15))
#define PKR_RW_KEY(k)			PMG_PKR_RW_KEY(k)
#define PKR_AD_KEY(k)			PMG_PKR_AD_KEY(k)
#define PKR_WD_KEY(k)			PMG_PKR_WD_KEY(k)
#define PKR_PKEY_SHIFT(k)		PMG_PKR_SHIFT(k)
#define PKEY_ACCESS_MASK		PMG_PKR_FIELD_MASK

/* Protection values, as the uapi defines them (and as the register does). */
#define PKEY_READ_WRITE		PMG_RIGHTS_RW
#define PKEY_DISABLE_ACCESS	PMG_RIGHTS_AD
#define PKEY_DISABLE_WRITE	PMG_RIGHTS_WD

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
 * applies.  Return true when handled.  The only grant is what the callback
 * sets with pks_update_exception(): true without it retries the access
 * with the same PKRS, which faults (and calls the callback) again.
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
	unsigned long relaxed_reports;	/* relaxed mode: warned */
	unsigned long relaxed_silent;	/* relaxed mode: allowed quietly */
	unsigned long strict;		/* strict: fixed up or oopsed */
};
extern struct pks_stats pks_stats;

#endif /* PMG_PKS_H */
