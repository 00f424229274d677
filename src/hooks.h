/* SPDX-License-Identifier: MIT */
/*
 * hooks.c: what steers the fault path from the program (callbacks,
 * observer, fault mode, report fd).  The handlers' side of it.
 */
#ifndef PMG_HOOKS_H
#define PMG_HOOKS_H

#include <sys/types.h>

#include "policy.h"

/* Tell the observer, if any, what became of fault @f in thread @tid
 * (@action: PMG_FAULT_*).  AS-safe. */
void _pmg_fault_notify(const struct pmg_fault *f, pid_t tid, int action);

#endif /* PMG_HOOKS_H */
