// SPDX-License-Identifier: MIT
/*
 * Protected device page maps and kmap (V8 "memremap_pages: ..." and "kmap:
 * Ensure kmap works for devmap pages").
 *
 * memremap_pages() maps a range into the direct map with
 * PAGE_KERNEL_PKEY(PKS_KEY_PGMAP_PROTECTION) when PGMAP_PROTECTION is
 * asked for, so every access outside a window faults.  Windows are
 * per-thread and nest: the count is the core's per-context window count
 * (struct pmg_ws in struct task), and the key's rights follow it.
 */
#include "../core/pmg_core.h"
#include "kernel.h"
#include "memremap.h"
#include "pks.h"
#include "sched.h"

struct page mem_map[MAX_PFN];
unsigned long kmap_protected_warnings;

bool pgmap_protection_available(void)
{
	return pks_available();
}

int memremap_pages(struct dev_pagemap *pgmap)
{
	bool protect = pgmap->flags & PGMAP_PROTECTION;
	pgprot_t prot = protect ? PAGE_KERNEL_PKEY(PKS_KEY_PGMAP_PROTECTION)
				: PAGE_KERNEL;
	phys_addr_t pa;

	if (protect && !pgmap_protection_available())
		return -EINVAL;
	if (pgmap->start & ~PAGE_MASK || pgmap->end > PHYS_END ||
	    pgmap->start >= pgmap->end)
		return -EINVAL;
	for (pa = pgmap->start; pa < pgmap->end; pa += PAGE_SIZE) {
		struct page *page = pfn_to_page(pa >> PAGE_SHIFT);

		map_page(pa, pa, prot);
		page->flags |= PG_devmap;
		page->pgmap = pgmap;
	}
	return 0;
}

/* Set the PMEM key for the running context from its window count. */
static void pgmap_apply(struct task *t)
{
	unsigned key = PKS_KEY_PGMAP_PROTECTION;
	unsigned dflt = pks_core.key[key].dflt;

	pks_update_protection((int)key, pmg_ws_rights(&t->ws, key, dflt));
}

void pgmap_mk_readwrite(struct dev_pagemap *pgmap)
{
	struct task *t = current;

	if (!pgmap || !(pgmap->flags & PGMAP_PROTECTION))
		return;
	if (WARN(pmg_ws_open(&t->ws, PKS_KEY_PGMAP_PROTECTION, PMG_ACC_WRITE),
		 "pgmap: window count overflow\n"))
		return;
	pgmap_apply(t);
}

void pgmap_mk_noaccess(struct dev_pagemap *pgmap)
{
	struct task *t = current;

	if (!pgmap || !(pgmap->flags & PGMAP_PROTECTION))
		return;
	if (WARN(pmg_ws_close(&t->ws, PKS_KEY_PGMAP_PROTECTION, PMG_ACC_WRITE),
		 "pgmap: unbalanced pgmap_mk_noaccess()\n"))
		return;
	pgmap_apply(t);
}

/* Open pmem write windows of the running thread. */
unsigned pgmap_window_count(void)
{
	return current->ws.w[PKS_KEY_PGMAP_PROTECTION];
}

/* Short-term, thread-local: open access for the mapping's lifetime. */
void *kmap_local_page(struct page *page)
{
	if (devmap_protected(page))
		pgmap_mk_readwrite(page->pgmap);
	return page_address(page);
}

void kunmap_local(const void *addr)
{
	struct page *page = virt_to_page(addr);

	if (devmap_protected(page))
		pgmap_mk_noaccess(page->pgmap);
}

/*
 * kmap_atomic(): kmap_local_page() with preemption disabled until
 * kunmap_atomic(), as in Linux (the seeds' fs/dax.c copy_cow_page_dax()
 * uses it).  The window is the same thread-local one: PKRS is per context,
 * and an atomic section never switches out.
 */
void *kmap_atomic(struct page *page)
{
	preempt_disable();
	return kmap_local_page(page);
}

void kunmap_atomic(const void *addr)
{
	kunmap_local(addr);
	preempt_enable();
}

/*
 * Long-term kmap() cannot open a thread-local window for an unknown time,
 * so a protected page is flagged with "a warning with a trace from that
 * call stack" (seed 001; the seeds' pgmap_protection_flag_invalid()) and
 * left protected: accesses through it fault.
 */
void *kmap(struct page *page)
{
	if (devmap_protected(page)) {
		kmap_protected_warnings++;
		WARN(1, "kmap() of protected pmem page pfn 0x%lx: "
		     "use kmap_local_page()\n", page_to_pfn(page));
		dump_stack();
	}
	return page_address(page);
}

void kunmap(struct page *page)
{
	(void)page;
}
