/* SPDX-License-Identifier: MIT */
/*
 * The x86 protection-key register: PKRU (user pages, PKU; PKRS, the
 * supervisor register of the Linux series, has the same layout).  16 keys,
 * two bits per key: bit 0 access-disable (AD), bit 1 write-disable (WD).
 * The library's one register model: the PKU backend loads these values
 * with WRPKRU, the mprotect backend emulates a PKRU in the same layout for
 * its faults (fault.c), and the policy (policy.c) decides on values of it.
 *
 * The instructions themselves, RDPKRU and WRPKRU, are _pmg_rdpkru() and
 * _pmg_wrpkru() in include/pmguard.h: the inline window edges there need
 * them, so the installed header holds their one definition.  CPUID is
 * cpuid.[ch] beside this file.
 *
 * Mapping to Intel's PKS/PMEM patch set for Linux (V8): PMG_PKR_*_KEY()
 * are PKR_*_KEY(), pmg_pkval_update() is pkey_update_pkval().
 */
#ifndef PMG_ARCH_X86_PKRU_H
#define PMG_ARCH_X86_PKRU_H

#include <stdbool.h>
#include <stdint.h>

#define PMG_NR_KEYS		16
#define PMG_PKR_BITS_PER_KEY	2

/* The hardware's two bits (V8's PKR_AD_BIT / PKR_WD_BIT). */
#define PMG_PKR_AD_BIT		0x1u	/* access disable */
#define PMG_PKR_WD_BIT		0x2u	/* write disable */

#define PMG_PKR_FIELD_MASK	((1u << PMG_PKR_BITS_PER_KEY) - 1u)
#define PMG_PKR_SHIFT(key)	((unsigned)(key) * PMG_PKR_BITS_PER_KEY)
#define PMG_PKR_MASK(key)	(PMG_PKR_FIELD_MASK << PMG_PKR_SHIFT(key))
/* @key's field set to @rights (enum pmg_rights), the other keys 0. */
#define PMG_PKR_KEY(key, rights) ((uint32_t)(rights) << PMG_PKR_SHIFT(key))
#define PMG_PKR_RW_KEY(key)	PMG_PKR_KEY(key, PMG_RIGHTS_RW)
#define PMG_PKR_AD_KEY(key)	PMG_PKR_KEY(key, PMG_RIGHTS_AD)
#define PMG_PKR_WD_KEY(key)	PMG_PKR_KEY(key, PMG_RIGHTS_WD)

/* The three rights of one key, as field values: AD = access disable
 * (no access), WD = write disable (read only). */
enum pmg_rights {
	PMG_RIGHTS_RW = 0x0u,			/* read and write */
	PMG_RIGHTS_AD = PMG_PKR_AD_BIT,		/* no access */
	PMG_RIGHTS_WD = PMG_PKR_WD_BIT,		/* read only */
};

/* Key 0 is every untagged page's key: it stays read/write. */
#define PMG_KEY_DEFAULT 0

/* Any raw field (already shifted down) as one of the three rights: AD
 * wins over WD (AD|WD reads as no access); bits above the field ignored. */
static inline unsigned pmg_field_rights(unsigned field)
{
	if (field & PMG_PKR_AD_BIT)
		return PMG_RIGHTS_AD;
	if (field & PMG_PKR_WD_BIT)
		return PMG_RIGHTS_WD;
	return PMG_RIGHTS_RW;
}

/* pkey_update_pkval(): @pkval with @key's bits replaced by @rights (only
 * the field's bits of @rights are used). */
static inline uint32_t pmg_pkval_update(uint32_t pkval, unsigned key,
					unsigned rights)
{
	return (pkval & ~PMG_PKR_MASK(key)) |
	       ((rights & PMG_PKR_FIELD_MASK) << PMG_PKR_SHIFT(key));
}

/* @key's rights in @pkval, as one of enum pmg_rights. */
static inline unsigned pmg_pkval_rights(uint32_t pkval, unsigned key)
{
	return pmg_field_rights((pkval >> PMG_PKR_SHIFT(key)) &
				PMG_PKR_FIELD_MASK);
}

#endif /* PMG_ARCH_X86_PKRU_H */
