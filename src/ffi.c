// SPDX-License-Identifier: MIT
/*
 * Out-of-line copies of the header's inline window edges (pmg_open(),
 * pmg_close(), pmg_write_begin(), pmg_write_end()) for languages that
 * cannot call inline C: Python ctypes, Rust or Go without C wrappers, any
 * FFI that resolves a symbol by name.  The header defines each edge once,
 * as PMGUARD_INLINE; C and C++ callers get it static inline, and this file
 * defines PMGUARD_INLINE to an exported definition before including the
 * header, so the copies here are the header's code compiled out of line:
 * same semantics, same async-signal-safety (AS-safe on PKU for a keyed
 * domain, as the header says per function).  Exported under their own
 * version node, PMGUARD_0.3 (src/libpmguard.map); scripts/abi-check fails
 * when a PMGUARD_INLINE function of the header has no exported copy.
 *
 * Nothing else may be included before the header: internal.h includes
 * it too, and the first inclusion fixes PMGUARD_INLINE.
 *
 * The definitions come from the header with no separate prototype: the
 * header is the one declaration and the one definition of each, so there
 * is nothing a prototype could disagree with.
 */

#pragma GCC diagnostic ignored "-Wmissing-prototypes"

#define PMGUARD_INLINE __attribute__((visibility("default")))
#include "pmguard.h"
