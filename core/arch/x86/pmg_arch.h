/* SPDX-License-Identifier: MIT */
/*
 * x86 protection-key register layout, the only architecture-specific part
 * of the core: PKRU (user pages, PKU) and PKRS (supervisor pages, PKS) have
 * the same layout.  16 keys, two bits per key: bit 0 access-disable (AD),
 * bit 1 write-disable (WD).
 *
 * A port supplies this header for its architecture (select it with
 * -DPMG_ARCH_HEADER='"..."'; this one is the default): the number of keys,
 * the width of one key's field, the field value for each of the three
 * rights the core knows (read-write, read-only, no access), and how to
 * read any raw field back as one of them.  Nothing in core.c knows the
 * bits.  An arm64 POE port, for example, would say 8 keys, 4 bits per key
 * (POR_EL1/POR_EL0 fields), read-write = R|W, read-only = R, no access =
 * 0, and decode a field by its R and W bits.
 *
 * Freestanding: may use only <stdint.h> and <stdbool.h>.
 */
#ifndef PMG_ARCH_X86_H
#define PMG_ARCH_X86_H

#define PMG_ARCH_NAME		"x86 PKU/PKS"
#define PMG_ARCH_NR_KEYS	16
#define PMG_ARCH_BITS_PER_KEY	2

/* The hardware's two bits (the seeds' PKR_AD_BIT / PKR_WD_BIT). */
#define PMG_ARCH_PKR_AD_BIT	0x1u	/* access disable */
#define PMG_ARCH_PKR_WD_BIT	0x2u	/* write disable */

/* The field value of each of the core's three rights. */
#define PMG_ARCH_RIGHTS_RW	0x0u
#define PMG_ARCH_RIGHTS_RO	PMG_ARCH_PKR_WD_BIT
#define PMG_ARCH_RIGHTS_NONE	PMG_ARCH_PKR_AD_BIT

/* Any raw field (already shifted down and masked) as one of the three:
 * AD wins over WD (AD|WD reads as no access). */
static inline unsigned pmg_arch_field_rights(unsigned field)
{
	if (field & PMG_ARCH_PKR_AD_BIT)
		return PMG_ARCH_RIGHTS_NONE;
	if (field & PMG_ARCH_PKR_WD_BIT)
		return PMG_ARCH_RIGHTS_RO;
	return PMG_ARCH_RIGHTS_RW;
}

#endif /* PMG_ARCH_X86_H */
