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
/* Read a sites file ("PATH+0xOFF [COUNT [SYMBOL]]" lines; # comments;
 * blanks, tabs, newlines and backslashes in PATH as \040, \011, \012,
 * \134) from @fd, opened and checked by the caller (start.c), named
 * @file in messages; @fd is closed.  Returns the number of sites, or a
 * negative errno with pmg_errormsg() naming the file and line.  Not
 * AS-safe. */
int _pmg_sites_load(int fd, const char *file);
/* Faults let through at allowed sites so far.  AS-safe. */
uint64_t _pmg_sites_hits(void);

/*
 * Open addressing over a lock-free table of 2^@bits instruction addresses
 * (0: an empty entry), the first at @keys and each next @stride bytes on
 * (an array of them, or a member of an array of structs).  The probe
 * starts at @ip's Fibonacci hash and ends at the entry holding @ip (its
 * index) or at an empty one: with @claim that entry is taken for @ip by
 * compare-and-swap (*@claimed set: a new entry, the caller fills the rest
 * of it) and its index returned, without @claim -1.  -1 too when the
 * table is full or @ip is 0.  AS-safe (atomics only): the fault handler
 * counts audit sites (report.c) and looks up allowed sites with it.
 */
int _pmg_ip_slot(uintptr_t *keys, size_t stride, unsigned bits,
		 uintptr_t ip, bool claim, bool *claimed);

#endif /* PMG_SITES_H */
