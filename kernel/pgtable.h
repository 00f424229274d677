/* SPDX-License-Identifier: MIT */
/*
 * Page tables: 4-level, 4 KiB leaves everywhere (the direct map and the
 * emulated pmem range included), and the seeds' pkey macros (V8 "mm/pkeys:
 * Define PKS page table macros"): the protection key of a supervisor page
 * lives in PTE bits 59..62.
 */
#ifndef PMG_PGTABLE_H
#define PMG_PGTABLE_H

#include "kernel.h"

typedef u64 pteval_t;
typedef struct { pteval_t pgprot; } pgprot_t;

#define _PAGE_BIT_PRESENT	0
#define _PAGE_BIT_RW		1
#define _PAGE_BIT_PWT		3
#define _PAGE_BIT_PCD		4
#define _PAGE_BIT_ACCESSED	5
#define _PAGE_BIT_DIRTY		6
#define _PAGE_BIT_PSE		7
#define _PAGE_BIT_PKEY_BIT0	59
#define _PAGE_BIT_PKEY_BIT1	60
#define _PAGE_BIT_PKEY_BIT2	61
#define _PAGE_BIT_PKEY_BIT3	62

#define _PAGE_PRESENT	((pteval_t)1 << _PAGE_BIT_PRESENT)
#define _PAGE_RW	((pteval_t)1 << _PAGE_BIT_RW)
#define _PAGE_PWT	((pteval_t)1 << _PAGE_BIT_PWT)
#define _PAGE_PCD	((pteval_t)1 << _PAGE_BIT_PCD)
#define _PAGE_ACCESSED	((pteval_t)1 << _PAGE_BIT_ACCESSED)
#define _PAGE_DIRTY	((pteval_t)1 << _PAGE_BIT_DIRTY)
#define _PAGE_PSE	((pteval_t)1 << _PAGE_BIT_PSE)
#define _PAGE_PKEY_MASK	((pteval_t)0xf << _PAGE_BIT_PKEY_BIT0)

/* The seeds' _PAGE_PKEY() and PAGE_KERNEL_PKEY(). */
#define _PAGE_PKEY(pkey)	(((pteval_t)(pkey) & 0xf) << \
				 _PAGE_BIT_PKEY_BIT0)
#define __PAGE_KERNEL	(_PAGE_PRESENT | _PAGE_RW | _PAGE_ACCESSED | \
			 _PAGE_DIRTY)
#define PAGE_KERNEL		((pgprot_t){ __PAGE_KERNEL })
#define PAGE_KERNEL_PKEY(pkey)	\
	((pgprot_t){ __PAGE_KERNEL | _PAGE_PKEY(pkey) })
#define PAGE_KERNEL_NOCACHE	((pgprot_t){ __PAGE_KERNEL | _PAGE_PCD | \
					     _PAGE_PWT })

/* The pkey of a leaf entry. */
static inline unsigned pte_pkey(pteval_t pte)
{
	return (unsigned)((pte & _PAGE_PKEY_MASK) >> _PAGE_BIT_PKEY_BIT0);
}

#define PTE_ADDR_MASK	0x000ffffffffff000ULL

/*
 * Memory map (virtual = physical below 4 GiB; see docs/kernel.md):
 *   0 .. 4 KiB         unmapped (NULL guard)
 *   4 KiB .. 32 MiB    direct map of RAM, key 0 (kernel image at 1 MiB)
 *   32 MiB .. 40 MiB   emulated pmem0, protected pgmap, key PMEM
 *   40 MiB .. 41 MiB   emulated pmem1, unprotected pgmap, key 0
 *   0xfee00000         local APIC (uncached)
 *   VMALLOC_START ..   stacks with guard pages and pkey test pages
 */
#define DIRECT_MAP_END	(32UL << 20)
#define PMEM0_START	(32UL << 20)
#define PMEM0_SIZE	(8UL << 20)
#define PMEM1_START	(40UL << 20)
#define PMEM1_SIZE	(1UL << 20)
#define PHYS_END	(41UL << 20)
#define VMALLOC_START	0xffffc90000000000UL
#define VMALLOC_END	0xffffc90040000000UL

void mm_init(unsigned long kernel_end);
int map_page(unsigned long virt, phys_addr_t phys, pgprot_t prot);
void unmap_page(unsigned long virt);
pteval_t *lookup_pte(unsigned long virt);
phys_addr_t alloc_page_phys(void);
void free_page_phys(phys_addr_t phys);
void *vmalloc_pages(unsigned nr, pgprot_t prot);
void vfree_pages(void *addr, unsigned nr);
extern unsigned long kernel_cr3;

#endif /* PMG_PGTABLE_H */
