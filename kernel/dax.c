// SPDX-License-Identifier: MIT
/*
 * A pmem driver over the emulated ranges and the dax_direct_access() layer
 * with the seeds' guards (V8 "dax: Stray access protection for
 * dax_direct_access()", "nvdimm/pmem: Enable stray access protection").
 *
 * pmem0 is mapped through a protected pgmap (PMEM key), pmem1 through an
 * ordinary one: the same driver, so the guards are visibly no-ops there.
 */
#include "dax.h"
#include "kernel.h"
#include "pgtable.h"
#include "pks.h"

#define CACHE_LINE	64UL

struct pmem_device pmem0 = {
	.phys = PMEM0_START,
	.size = PMEM0_SIZE,
	.pgmap = { .name = "pmem0", .flags = PGMAP_PROTECTION },
	.dax = { .name = "pmem0" },
};

struct pmem_device pmem1 = {
	.phys = PMEM1_START,
	.size = PMEM1_SIZE,
	.pgmap = { .name = "pmem1" },
	.dax = { .name = "pmem1" },
};

static long pmem_dax_direct_access(struct dax_device *dax_dev, pgoff_t pgoff,
				   long nr_pages, void **kaddr,
				   unsigned long *pfn)
{
	struct pmem_device *pmem = dax_dev->private;
	unsigned long avail = pmem->size >> PAGE_SHIFT;

	if (pgoff >= avail)
		return -EIO;
	if (kaddr)
		*kaddr = (char *)pmem->virt + (pgoff << PAGE_SHIFT);
	if (pfn)
		*pfn = (pmem->phys >> PAGE_SHIFT) + pgoff;
	return min((long)(avail - pgoff), nr_pages);
}

static bool pmem_map_protected(struct dax_device *dax_dev)
{
	struct pmem_device *pmem = dax_dev->private;

	return pmem->pgmap.flags & PGMAP_PROTECTION;
}

static void pmem_mk_readwrite(struct dax_device *dax_dev)
{
	struct pmem_device *pmem = dax_dev->private;

	pgmap_mk_readwrite(&pmem->pgmap);
}

static void pmem_mk_noaccess(struct dax_device *dax_dev)
{
	struct pmem_device *pmem = dax_dev->private;

	pgmap_mk_noaccess(&pmem->pgmap);
}

static const struct dax_operations pmem_dax_ops = {
	.direct_access = pmem_dax_direct_access,
	.map_protected = pmem_map_protected,
	.mk_readwrite = pmem_mk_readwrite,
	.mk_noaccess = pmem_mk_noaccess,
};

static int pmem_attach(struct pmem_device *pmem)
{
	int rc;

	pmem->pgmap.start = pmem->phys;
	pmem->pgmap.end = pmem->phys + pmem->size;
	/* Ask for protection only where PKS can give it (the seeds'
	 * pgmap_protection_available() check in the pmem driver). */
	if (!pgmap_protection_available())
		pmem->pgmap.flags &= ~PGMAP_PROTECTION;
	rc = memremap_pages(&pmem->pgmap);
	if (rc)
		return rc;
	pmem->virt = (void *)pmem->phys;
	pmem->dax.ops = &pmem_dax_ops;
	pmem->dax.private = pmem;
	pmem->dax.alive = true;
	return 0;
}

int pmem_init(void)
{
	int rc = pmem_attach(&pmem0);

	return rc ? rc : pmem_attach(&pmem1);
}

/* The driver's own I/O path, guarded like pmem_do_{read,write}(). */
int pmem_rw(struct pmem_device *pmem, size_t off, void *buf, size_t len,
	    bool write)
{
	char *p = (char *)pmem->virt + off;

	if (off > pmem->size || len > pmem->size - off)
		return -EIO;
	pgmap_mk_readwrite(&pmem->pgmap);
	if (write)
		memcpy(p, buf, len);
	else
		memcpy(buf, p, len);
	pgmap_mk_noaccess(&pmem->pgmap);
	return 0;
}

long dax_direct_access(struct dax_device *dax_dev, pgoff_t pgoff,
		       long nr_pages, void **kaddr, unsigned long *pfn)
{
	if (!dax_dev || !dax_dev->alive)
		return -ENXIO;
	if (nr_pages < 0)
		return -EINVAL;
	return dax_dev->ops->direct_access(dax_dev, pgoff, nr_pages, kaddr,
					   pfn);
}

bool dax_map_protected(struct dax_device *dax_dev)
{
	if (!dax_dev || !dax_dev->alive)
		return false;
	if (dax_dev->ops->map_protected)
		return dax_dev->ops->map_protected(dax_dev);
	return false;
}

/*
 * Any access through the kaddr from dax_direct_access() must sit between
 * dax_mk_readwrite() and dax_mk_noaccess(), in one thread of execution.
 */
void dax_mk_readwrite(struct dax_device *dax_dev)
{
	if (!dax_dev || !dax_dev->alive)
		return;
	if (dax_dev->ops->mk_readwrite)
		dax_dev->ops->mk_readwrite(dax_dev);
}

void dax_mk_noaccess(struct dax_device *dax_dev)
{
	if (!dax_dev || !dax_dev->alive)
		return;
	if (dax_dev->ops->mk_noaccess)
		dax_dev->ops->mk_noaccess(dax_dev);
}

/*
 * dax_flush(): write the CPU caches back to the media (arch_wb_cache_pmem(),
 * one flush per cache line).  A cache-line flush is checked like a byte
 * load (it faults where a read of the line would), so it needs the same
 * guard as any access: the seed found a dax_flush() that ran unguarded
 * ("Testing revealed a dax_flush() which was not properly protected").
 * QEMU TCG does not check CLFLUSH against the page or the key, so the
 * model reads each line before flushing it: an unguarded flush of
 * protected pmem faults here as it would on a PKS machine.
 */
void dax_flush(struct dax_device *dax_dev, void *addr, size_t size)
{
	unsigned long p = (unsigned long)addr & ~(CACHE_LINE - 1);
	unsigned long end = (unsigned long)addr + size;

	if (!dax_dev || !dax_dev->alive)
		return;
	for (; p < end; p += CACHE_LINE) {
		(void)*(volatile const u8 *)p;
		__asm__ __volatile__("clflush %0" : "+m"(*(volatile u8 *)p));
	}
}

/* fs/dax.c's dax_writeback_one() after the seed: the flush of a dirty
 * range sits between the guards. */
int dax_writeback(struct dax_device *dax_dev, pgoff_t pgoff, long nr_pages)
{
	void *kaddr;
	long rc;

	rc = dax_direct_access(dax_dev, pgoff, nr_pages, &kaddr, NULL);
	if (rc < 0)
		return (int)rc;
	dax_mk_readwrite(dax_dev);
	dax_flush(dax_dev, kaddr, (size_t)rc * PAGE_SIZE);
	dax_mk_noaccess(dax_dev);
	return 0;
}

/* fs/dax.c's dax_memzero(), with the guards the seed added. */
int dax_memzero(struct dax_device *dax_dev, pgoff_t pgoff, unsigned offset,
		size_t size)
{
	void *kaddr;
	long rc;

	if (offset + size > PAGE_SIZE)
		return -EINVAL;
	rc = dax_direct_access(dax_dev, pgoff, 1, &kaddr, NULL);
	if (rc < 0)
		return (int)rc;
	dax_mk_readwrite(dax_dev);
	memset((char *)kaddr + offset, 0, size);
	dax_flush(dax_dev, (char *)kaddr + offset, size);
	dax_mk_noaccess(dax_dev);
	return 0;
}
