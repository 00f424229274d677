/* SPDX-License-Identifier: MIT */
/*
 * pmguard arch-neutral core: protection-key register math, the consumer
 * (domain) table with default rights, per-context window nesting and the
 * fault-policy decision.  The register layout is the architecture's
 * (arch/<arch>/pmg_arch.h).
 *
 * Freestanding C11: it includes only <stdint.h>, <stdbool.h> and <stddef.h>
 * and calls nothing.  It builds into libpmguard (user space, x86 PKU or the
 * mprotect fallback); it was also the core of the supervisor-mode model
 * kernel, retired (git tag model-kernel-last) now that the Linux series
 * (linux/) is the kernel implementation.  The port supplies the register
 * access, the page tagging and the place where an interrupted context's
 * register value is saved; see src/prim.h.
 *
 * Mapping to the seeds (Linux PKS V8): PMG_PKR_*_KEY() are PKR_*_KEY(),
 * pmg_pkval_update() is pkey_update_pkval(), struct pmg_core is the table
 * behind enum pks_pkey_consumers (whose entries are the kernel's, in the
 * series' include/linux/pks-keys.h), pmg_core_fault_decide() is the pks_fault_mode /
 * pks_key_callback / pks_update_exception() logic of
 * handle_pks_key_callback().
 */
#ifndef PMG_CORE_H
#define PMG_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- The permission register (PKRU for user pages, PKRS for supervisor)
 *
 * The layout is the architecture's (core/arch/<arch>/pmg_arch.h): number of
 * keys, field width, and the field value of each right.  Everything below
 * is written in those terms, so a port with other keys and bits changes
 * only its arch header.
 */
#ifndef PMG_ARCH_HEADER
#define PMG_ARCH_HEADER "arch/x86/pmg_arch.h"
#endif
#include PMG_ARCH_HEADER

#define PMG_NR_KEYS		PMG_ARCH_NR_KEYS
#define PMG_PKR_BITS_PER_KEY	PMG_ARCH_BITS_PER_KEY
#define PMG_PKR_FIELD_MASK	((1u << PMG_PKR_BITS_PER_KEY) - 1u)
#define PMG_PKR_SHIFT(key)	((unsigned)(key) * PMG_PKR_BITS_PER_KEY)
#define PMG_PKR_MASK(key)	(PMG_PKR_FIELD_MASK << PMG_PKR_SHIFT(key))
/* @key's field set to @rights (enum pmg_rights), the other keys 0. */
#define PMG_PKR_KEY(key, rights) ((uint32_t)(rights) << PMG_PKR_SHIFT(key))
#define PMG_PKR_RW_KEY(key)	PMG_PKR_KEY(key, PMG_RIGHTS_RW)
#define PMG_PKR_AD_KEY(key)	PMG_PKR_KEY(key, PMG_RIGHTS_AD)
#define PMG_PKR_WD_KEY(key)	PMG_PKR_KEY(key, PMG_RIGHTS_WD)

/* The three rights of one key, as the architecture encodes them (x86: the
 * two hardware bits, so AD = access disable, WD = write disable). */
enum pmg_rights {
	PMG_RIGHTS_RW = PMG_ARCH_RIGHTS_RW,	/* read and write */
	PMG_RIGHTS_AD = PMG_ARCH_RIGHTS_NONE,	/* no access */
	PMG_RIGHTS_WD = PMG_ARCH_RIGHTS_RO,	/* read only */
};

/* What a window or a fault asks for. */
enum pmg_access {
	PMG_ACC_READ = 0,
	PMG_ACC_WRITE = 1,
};

/* pkey_update_pkval(): @pkval with @key's bits replaced by @rights. */
static inline uint32_t pmg_pkval_update(uint32_t pkval, unsigned key,
					unsigned rights)
{
	return (pkval & ~PMG_PKR_MASK(key)) |
	       ((rights & PMG_PKR_FIELD_MASK) << PMG_PKR_SHIFT(key));
}

/* @key's rights in @pkval, as one of enum pmg_rights (on x86 AD|WD
 * together reads as AD). */
static inline unsigned pmg_pkval_rights(uint32_t pkval, unsigned key)
{
	return pmg_arch_field_rights((pkval >> PMG_PKR_SHIFT(key)) &
				     PMG_PKR_FIELD_MASK);
}

/* Whether @rights (any field value) let @acc through. */
static inline bool pmg_rights_allow(unsigned rights, unsigned acc)
{
	switch (pmg_arch_field_rights(rights & PMG_PKR_FIELD_MASK)) {
	case PMG_RIGHTS_RW:
		return true;
	case PMG_RIGHTS_WD:
		return acc == PMG_ACC_READ;
	default:
		return false;
	}
}

/* The rights an open window of kind @acc gives a key whose default is @dflt. */
static inline unsigned pmg_window_rights(unsigned dflt, unsigned acc)
{
	if (acc == PMG_ACC_WRITE || dflt == PMG_RIGHTS_RW)
		return PMG_RIGHTS_RW;
	return PMG_RIGHTS_WD;
}

/* Key 0 is every untagged page's key: it must stay read/write.  Which
 * other key serves whom is the port's: the kernel's static consumers
 * (the seeds' enum pks_pkey_consumers, PKS_INIT_VALUE) are the series'
 * include/linux/pks-keys.h, user space gets its keys from pkey_alloc(). */
#define PMG_KEY_DEFAULT 0

/* ---- Errors: Linux errno values, negated by the callers' convention ---- */
#define PMG_E_PERM	1
#define PMG_E_NOENT	2
#define PMG_E_BUSY	16
#define PMG_E_INVAL	22
#define PMG_E_NOSPC	28
#define PMG_E_OVERFLOW	75

/* ---- Fault policy ---- */

enum pmg_core_mode {
	PMG_MODE_STRICT = 0,	/* report, then stop (oops / abort) */
	PMG_MODE_RELAXED = 1,	/* report once per key, then allow */
	PMG_MODE_AUDIT = 2,	/* report every stray access, allow that one */
};

/* What the port must do about a fault; see pmg_core_fault_decide(). */
enum pmg_core_action {
	PMG_ACT_NOT_OURS = 0,	/* hand it on unchanged */
	PMG_ACT_SYNC,		/* stale register: load new_pkval, retry */
	PMG_ACT_GRANT,		/* a key callback granted: load new_pkval */
	PMG_ACT_RELAX_REPORT,	/* report, load new_pkval (first on key) */
	PMG_ACT_RELAX_SILENT,	/* load new_pkval (already reported) */
	PMG_ACT_AUDIT,		/* report, allow this one access, re-arm */
	PMG_ACT_STRICT,		/* report, then stop */
};

struct pmg_fault;

/*
 * Per-key fault callback (the seeds' pks_key_callback).  Called for a stray
 * access on its key before the fault mode applies; returns true when it
 * handled the fault (PMG_ACT_GRANT), false to let the mode decide.  What
 * "handled" grants is the port's: user space loads new_pkval (the rights
 * the access needs); the kernel, as in the seeds, loads only what the
 * callback itself set with pks_update_exception().  Runs in the fault
 * path: signal handler or #PF handler.  It takes no argument: each port
 * keeps its per-key state in a table of its own (src/fault.c).
 */
typedef bool (*pmg_core_fault_cb)(const struct pmg_fault *f);

/* One fault, as a port hands it to the core. */
struct pmg_fault {
	uintptr_t addr;		/* faulting address */
	uintptr_t ip;		/* faulting instruction */
	unsigned key;		/* protection key of the page */
	unsigned acc;		/* enum pmg_access */
	uint32_t saved_pkval;	/* interrupted context's register */
	uint32_t new_pkval;	/* out: value to load for ACT_* that say so */
	unsigned mode;		/* enum pmg_core_mode in force */
	int action;		/* out: enum pmg_core_action */
	int code;		/* port's own: si_code, #PF error code */
	bool no_sync;		/* the port's saved register is never stale:
				   skip the sync step (the kernel's PKRS, the
				   mprotect backend's page protection) */
	int dom;		/* port's own: the consumer behind the key
				   (user space: the domain's number, which
				   may hold no key at all) */
};

#define PMG_KEY_NAME_MAX 32

struct pmg_core_key {
	bool used;
	uint8_t dflt;			/* enum pmg_rights outside windows */
	uint32_t warned;		/* relaxed: reported already */
	pmg_core_fault_cb cb;
	char name[PMG_KEY_NAME_MAX];
};

/* The consumer table: one per address space (user) or system (kernel). */
struct pmg_core {
	struct pmg_core_key key[PMG_NR_KEYS];
};

/* Per-context window nesting counts: one cache line. */
struct pmg_ws {
	uint16_t w[PMG_NR_KEYS];	/* open write windows per key */
	uint16_t r[PMG_NR_KEYS];	/* open read windows per key */
};

void pmg_core_init(struct pmg_core *c);
int pmg_core_key_claim(struct pmg_core *c, unsigned key, const char *name,
		       unsigned dflt);
int pmg_core_key_release(struct pmg_core *c, unsigned key);
int pmg_core_set_callback(struct pmg_core *c, unsigned key,
			  pmg_core_fault_cb cb);
uint32_t pmg_core_apply_defaults(const struct pmg_core *c, uint32_t pkval);
uint32_t pmg_core_init_value(const struct pmg_core *c);
int pmg_core_count_used(const struct pmg_core *c);

unsigned pmg_ws_rights(const struct pmg_ws *ws, unsigned key, unsigned dflt);
int pmg_ws_open(struct pmg_ws *ws, unsigned key, unsigned acc);
int pmg_ws_close(struct pmg_ws *ws, unsigned key, unsigned acc);

void pmg_core_fault_decide(struct pmg_core *c, struct pmg_fault *f);
/* The same for the consumer @e, whatever table holds it (user space:
 * more domains than keys); f->key names the register field. */
void pmg_core_fault_decide_entry(struct pmg_core_key *e, struct pmg_fault *f);

const char *pmg_mode_name(unsigned mode);
int pmg_mode_parse(const char *s);
const char *pmg_rights_name(unsigned rights);

/* Freestanding helpers the ports may share. */
size_t pmg_strlcpy(char *dst, const char *src, size_t size);
int pmg_streq(const char *a, const char *b);
/* Unsigned to text in @base (10 or 16), no prefix; returns length. */
size_t pmg_utoa(uint64_t v, unsigned base, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* PMG_CORE_H */
