// SPDX-License-Identifier: MIT
/*
 * Physical pages, page tables and the vmalloc area.
 *
 * Every mapping is a 4 KiB PTE, so a page's protection key sits in its own
 * leaf entry (PTE bits 59..62); intermediate entries carry no key (the
 * hardware takes the key from the leaf only).  Virtual = physical for the
 * direct map; page-table pages are reached through it.
 */
#include "kernel.h"
#include "pgtable.h"
#include "x86.h"

unsigned long kernel_cr3;

static u64 *pml4;
static phys_addr_t alloc_next, alloc_end;
static phys_addr_t free_list;
static unsigned long vmalloc_next = VMALLOC_START;
static spinlock_t mm_lock;

phys_addr_t alloc_page_phys(void)
{
	unsigned long flags = local_irq_save();
	phys_addr_t pa;

	spin_lock(&mm_lock);
	if (free_list) {
		pa = free_list;
		free_list = *(phys_addr_t *)pa;
	} else if (alloc_next < alloc_end) {
		pa = alloc_next;
		alloc_next += PAGE_SIZE;
	} else {
		spin_unlock(&mm_lock);
		panic("out of memory");
	}
	spin_unlock(&mm_lock);
	local_irq_restore(flags);
	memset((void *)pa, 0, PAGE_SIZE);
	return pa;
}

void free_page_phys(phys_addr_t pa)
{
	unsigned long flags = local_irq_save();

	spin_lock(&mm_lock);
	*(phys_addr_t *)pa = free_list;
	free_list = pa;
	spin_unlock(&mm_lock);
	local_irq_restore(flags);
}

static pteval_t *walk(unsigned long virt, bool create)
{
	u64 *table = pml4;
	int shift;

	for (shift = 39; shift > 12; shift -= 9) {
		u64 *e = &table[(virt >> shift) & 511];

		if (!(*e & _PAGE_PRESENT)) {
			if (!create)
				return NULL;
			*e = alloc_page_phys() | _PAGE_PRESENT | _PAGE_RW;
		}
		table = (u64 *)(*e & PTE_ADDR_MASK);
	}
	return &table[(virt >> 12) & 511];
}

pteval_t *lookup_pte(unsigned long virt)
{
	pteval_t *pte = walk(virt, false);

	return pte && (*pte & _PAGE_PRESENT) ? pte : NULL;
}

int map_page(unsigned long virt, phys_addr_t phys, pgprot_t prot)
{
	pteval_t *pte = walk(virt, true);

	*pte = (phys & PTE_ADDR_MASK) | prot.pgprot;
	invlpg(virt);
	return 0;
}

void unmap_page(unsigned long virt)
{
	pteval_t *pte = walk(virt, false);

	if (pte) {
		*pte = 0;
		invlpg(virt);
	}
}

/*
 * @nr pages mapped with @prot, with an unmapped guard page below (a stack
 * overflow faults instead of running into a neighbour).  TLB shootdown is
 * not needed: only the boot CPU runs threads and touches these mappings.
 */
void *vmalloc_pages(unsigned nr, pgprot_t prot)
{
	unsigned long flags = local_irq_save();
	unsigned long va;
	unsigned i;

	spin_lock(&mm_lock);
	va = vmalloc_next + PAGE_SIZE;
	vmalloc_next += (nr + 1) * PAGE_SIZE;
	spin_unlock(&mm_lock);
	local_irq_restore(flags);
	if (vmalloc_next > VMALLOC_END)
		panic("vmalloc area exhausted");
	for (i = 0; i < nr; i++)
		map_page(va + i * PAGE_SIZE, alloc_page_phys(), prot);
	return (void *)va;
}

void vfree_pages(void *addr, unsigned nr)
{
	unsigned long va = (unsigned long)addr;
	unsigned i;

	for (i = 0; i < nr; i++) {
		pteval_t *pte = lookup_pte(va + i * PAGE_SIZE);

		if (!pte)
			continue;
		free_page_phys(*pte & PTE_ADDR_MASK);
		unmap_page(va + i * PAGE_SIZE);
	}
}

void mm_init(unsigned long kernel_end)
{
	phys_addr_t pa;

	alloc_next = (kernel_end + PAGE_SIZE - 1) & PAGE_MASK;
	alloc_end = DIRECT_MAP_END;
	/* Built while the boot 2 MiB identity map is live, then switched. */
	pml4 = (u64 *)alloc_page_phys();
	for (pa = PAGE_SIZE; pa < DIRECT_MAP_END; pa += PAGE_SIZE)
		map_page(pa, pa, PAGE_KERNEL);
	kernel_cr3 = (unsigned long)pml4;
	write_cr3(kernel_cr3);
}
