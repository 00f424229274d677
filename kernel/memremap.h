/* SPDX-License-Identifier: MIT */
/*
 * Device page maps with stray-write protection (the seeds' PGMAP_PROTECTION,
 * devmap_protected(), pgmap_mk_{readwrite,noaccess}()) and the kmap calls
 * that open access for protected pages (V8 "kmap: Ensure kmap works for
 * devmap pages").
 */
#ifndef PMG_MEMREMAP_H
#define PMG_MEMREMAP_H

#include "kernel.h"
#include "pgtable.h"

#define PGMAP_PROTECTION	(1U << 0)

struct dev_pagemap {
	phys_addr_t start;
	phys_addr_t end;	/* exclusive */
	unsigned flags;
	const char *name;
};

/* One per physical page up to PHYS_END. */
struct page {
	unsigned long flags;
	struct dev_pagemap *pgmap;
};

#define PG_devmap	(1UL << 0)
#define MAX_PFN		(PHYS_END >> PAGE_SHIFT)

extern struct page mem_map[MAX_PFN];

static inline struct page *pfn_to_page(unsigned long pfn)
{
	return pfn < MAX_PFN ? &mem_map[pfn] : NULL;
}

static inline unsigned long page_to_pfn(const struct page *page)
{
	return (unsigned long)(page - mem_map);
}

/* The direct map is the identity below PHYS_END. */
static inline void *page_address(const struct page *page)
{
	return (void *)(page_to_pfn(page) << PAGE_SHIFT);
}

static inline struct page *virt_to_page(const void *addr)
{
	return pfn_to_page((unsigned long)addr >> PAGE_SHIFT);
}

bool pgmap_protection_available(void);
int memremap_pages(struct dev_pagemap *pgmap);

static inline bool devmap_protected(const struct page *page)
{
	return page && (page->flags & PG_devmap) && page->pgmap &&
	       (page->pgmap->flags & PGMAP_PROTECTION);
}

void pgmap_mk_readwrite(struct dev_pagemap *pgmap);
void pgmap_mk_noaccess(struct dev_pagemap *pgmap);
unsigned pgmap_window_count(void);

void *kmap_local_page(struct page *page);
void kunmap_local(const void *addr);
void *kmap_atomic(struct page *page);
void kunmap_atomic(const void *addr);
void *kmap(struct page *page);
void kunmap(struct page *page);

extern unsigned long kmap_protected_warnings;

#endif /* PMG_MEMREMAP_H */
