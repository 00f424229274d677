/* SPDX-License-Identifier: MIT */
/*
 * The protection policy, pure (policy.c): the rights a window gives, the
 * table of hardware keys with their default rights, and the decision on a
 * fault, contain mode included.  No system calls, no globals: every
 * function works on what it is handed, so tests/test-policy.c checks it
 * whole, on any machine.  The register values are PKRU's layout
 * (arch/x86/pkru.h); the modes, access kinds and window counts are the
 * public header's.
 *
 * Mapping to Intel's PKS/PMEM patch set for Linux (V8): struct _pmg_keytab
 * is the table behind enum pks_pkey_consumers (the series'
 * include/linux/pks-keys.h), _pmg_fault_decide() is the pks_fault_mode / pks_key_callback /
 * pks_update_exception() logic of handle_pks_key_callback().
 */
#ifndef PMG_POLICY_H
#define PMG_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include "pmguard.h"
#include "arch/x86/pkru.h"

_Static_assert(sizeof(((struct _pmg_ws *)0)->w) / sizeof(uint16_t) ==
		       PMG_NR_KEYS,
	       "the public window counts hold one count per register key");

/* Whether @rights (any field value) let access @acc (PMG_READ or
 * PMG_WRITE) through. */
static inline bool pmg_rights_allow(unsigned rights, unsigned acc)
{
	switch (pmg_field_rights(rights)) {
	case PMG_RIGHTS_RW:
		return true;
	case PMG_RIGHTS_WD:
		return acc == PMG_READ;
	default:
		return false;
	}
}

/* The rights an open window of kind @acc gives a key whose default is
 * @dflt: a write window read-write, a read window read-only (a
 * read-write default stays read-write). */
static inline unsigned pmg_window_rights(unsigned dflt, unsigned acc)
{
	if (acc == PMG_WRITE || dflt == PMG_RIGHTS_RW)
		return PMG_RIGHTS_RW;
	return PMG_RIGHTS_WD;
}

/* The rights @key has in a context whose window counts are @ws. */
unsigned _pmg_ws_rights(const struct _pmg_ws *ws, unsigned key,
			unsigned dflt);

/* What the fault path must do about a fault; see _pmg_fault_decide(). */
enum pmg_action {
	PMG_ACT_NOT_OURS = 0,	/* hand it on unchanged */
	PMG_ACT_SYNC,		/* stale register: load new_pkval, retry */
	PMG_ACT_GRANT,		/* the callback granted: load new_pkval */
	PMG_ACT_RELAX_REPORT,	/* report, load new_pkval (first on key) */
	PMG_ACT_RELAX_SILENT,	/* load new_pkval (already reported) */
	PMG_ACT_AUDIT,		/* report, allow this one access, re-arm */
	PMG_ACT_CONTAIN,	/* contain: run the instruction once with
				   new_pkval, undo what it wrote; one that
				   writes nothing protected is audited */
	PMG_ACT_STRICT,		/* report, then stop */
};

struct pmg_fault;

/*
 * A consumer's fault callback (V8's pks_key_callback): called for
 * a stray access before the mode applies; true when it handled the fault
 * (PMG_ACT_GRANT: new_pkval holds the rights the access needs), false to
 * let the mode decide.  Runs in the fault path (the signal handler).
 */
typedef bool (*_pmg_policy_cb)(const struct pmg_fault *f);

/* One fault, as the fault path hands it to the policy. */
struct pmg_fault {
	uintptr_t addr;		/* faulting address */
	uintptr_t ip;		/* faulting instruction */
	unsigned key;		/* the register field of the page */
	unsigned acc;		/* PMG_READ or PMG_WRITE */
	uint32_t saved_pkval;	/* interrupted context's register */
	uint32_t new_pkval;	/* out: value to load for ACT_* that say so */
	unsigned mode;		/* enum pmg_fault_mode in force */
	int action;		/* out: enum pmg_action */
	int code;		/* si_code */
	bool no_sync;		/* the saved register is never stale (page
				   protection, emulated): skip the sync */
	int dom;		/* the domain's number (may hold no key) */
};

#define PMG_KEY_NAME_MAX 32

/* A consumer (a domain): what the policy needs to know of it. */
struct _pmg_consumer {
	bool used;
	uint8_t dflt;			/* enum pmg_rights outside windows */
	uint32_t warned;		/* relaxed: reported already */
	_pmg_policy_cb cb;
	char name[PMG_KEY_NAME_MAX];
};

/* The hardware keys: each key's consumer and default rights, for the
 * register resets (new threads, signal handlers). */
struct _pmg_keytab {
	struct _pmg_consumer key[PMG_NR_KEYS];
};

/* Key 0 in use and read-write, every other key free and access-disabled. */
void _pmg_keytab_init(struct _pmg_keytab *t);
/* Claim @key (1..15) for @name at default rights @dflt: 0, -EINVAL (key 0,
 * out of range, not one of the three rights), -EBUSY (claimed). */
int _pmg_keytab_claim(struct _pmg_keytab *t, unsigned key, const char *name,
		      unsigned dflt);
/* 0, -EINVAL (key 0, out of range), -ENOENT (not claimed). */
int _pmg_keytab_release(struct _pmg_keytab *t, unsigned key);
/* @pkval with every claimed key but 0 at its default rights, the other
 * keys (the program's own) as they were. */
uint32_t _pmg_keytab_defaults(const struct _pmg_keytab *t, uint32_t pkval);

/* Decide about @f on consumer @e (f->key names the register field);
 * sets f->action and f->new_pkval.  See policy.c. */
void _pmg_fault_decide(struct _pmg_consumer *e, struct pmg_fault *f);

/* "strict", "relaxed", "audit", "contain" to enum pmg_fault_mode, or
 * -EINVAL (NULL, anything else). */
int _pmg_mode_parse(const char *s);

#endif /* PMG_POLICY_H */
