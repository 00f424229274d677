/* SPDX-License-Identifier: MIT */
/*
 * DAX direct access with the seeds' stray-access guards (V8 "dax: Stray
 * access protection for dax_direct_access()") and a pmem driver over the
 * emulated ranges ("nvdimm/pmem: Enable stray access protection").
 */
#ifndef PMG_DAX_H
#define PMG_DAX_H

#include "kernel.h"
#include "memremap.h"

typedef unsigned long pgoff_t;

struct dax_device;

struct dax_operations {
	long (*direct_access)(struct dax_device *dax_dev, pgoff_t pgoff,
			      long nr_pages, void **kaddr, unsigned long *pfn);
	/* Optional: only providers that protect their memory fill these. */
	bool (*map_protected)(struct dax_device *dax_dev);
	void (*mk_readwrite)(struct dax_device *dax_dev);
	void (*mk_noaccess)(struct dax_device *dax_dev);
};

struct dax_device {
	const char *name;
	const struct dax_operations *ops;
	void *private;
	bool alive;
};

long dax_direct_access(struct dax_device *dax_dev, pgoff_t pgoff,
		       long nr_pages, void **kaddr, unsigned long *pfn);
bool dax_map_protected(struct dax_device *dax_dev);
void dax_mk_readwrite(struct dax_device *dax_dev);
void dax_mk_noaccess(struct dax_device *dax_dev);
void dax_flush(struct dax_device *dax_dev, void *addr, size_t size);
int dax_writeback(struct dax_device *dax_dev, pgoff_t pgoff, long nr_pages);
int dax_memzero(struct dax_device *dax_dev, pgoff_t pgoff, unsigned offset,
		size_t size);

struct pmem_device {
	phys_addr_t phys;
	size_t size;
	void *virt;
	struct dev_pagemap pgmap;
	struct dax_device dax;
};

extern struct pmem_device pmem0;	/* protected */
extern struct pmem_device pmem1;	/* unprotected */

int pmem_init(void);
int pmem_rw(struct pmem_device *pmem, size_t off, void *buf, size_t len,
	    bool write);

#endif /* PMG_DAX_H */
