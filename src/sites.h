/* SPDX-License-Identifier: MIT */
/*
 * sites.c: the module table (module path + offset for report lines) and
 * the allowed write sites of `pmguard run --allow` (docs/run.md).  The
 * tables are built outside signal handlers; the handler only reads them.
 */
#ifndef PMG_SITES_H
#define PMG_SITES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct _pmg_buf;

/* Rebuild the module table (dl_iterate_phdr) and re-resolve the allowed
 * sites against it; write "pmguard: module" lines for modules not seen
 * before to @fd (-1: none).  Not AS-safe. */
void _pmg_modules_refresh(int fd);
/* Append " (PATH+0xOFF)" for @ip if a module holds it.  AS-safe. */
void _pmg_site_fmt(struct _pmg_buf *b, uintptr_t ip);
/* Module path and offset of @ip into @path/@off; false if none.  AS-safe. */
bool _pmg_module_of(uintptr_t ip, char *path, size_t n, uintptr_t *off);
/* Is @ip an allowed site?  Counts the hit.  AS-safe. */
bool _pmg_site_allowed(uintptr_t ip);
/* Read a sites file ("PATH+0xOFF [COUNT [SYMBOL]]" lines; # comments).
 * Returns the number of sites, or a negative errno with pmg_errormsg()
 * naming the file and line.  Not AS-safe. */
int _pmg_sites_load(const char *file);
/* Faults let through at allowed sites so far.  AS-safe. */
uint64_t _pmg_sites_hits(void);

#endif /* PMG_SITES_H */
