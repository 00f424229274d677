// SPDX-License-Identifier: MIT
/*
 * The protection policy (policy.h): the key table, window rights and the
 * fault decision.  Pure: no system calls, no globals, no locks; the fault
 * path calls it from the signal handler, so it is AS-safe too.
 */
#include <errno.h>
#include <string.h>

#include "policy.h"

void _pmg_keytab_init(struct _pmg_keytab *t)
{
	unsigned k;

	for (k = 0; k < PMG_NR_KEYS; k++) {
		struct _pmg_consumer *e = &t->key[k];

		e->used = false;
		e->dflt = PMG_RIGHTS_AD;
		e->warned = 0;
		e->cb = NULL;
		e->name[0] = '\0';
	}
	/* Key 0 keeps full access: untagged pages keep paging permissions. */
	t->key[PMG_KEY_DEFAULT].used = true;
	t->key[PMG_KEY_DEFAULT].dflt = PMG_RIGHTS_RW;
	strcpy(t->key[PMG_KEY_DEFAULT].name, "default");
}

int _pmg_keytab_claim(struct _pmg_keytab *t, unsigned key, const char *name,
		      unsigned dflt)
{
	struct _pmg_consumer *e;

	if (key == PMG_KEY_DEFAULT || key >= PMG_NR_KEYS)
		return -EINVAL;
	if (dflt != PMG_RIGHTS_AD && dflt != PMG_RIGHTS_WD &&
	    dflt != PMG_RIGHTS_RW)
		return -EINVAL;
	e = &t->key[key];
	if (e->used)
		return -EBUSY;
	e->used = true;
	e->dflt = (uint8_t)dflt;
	e->warned = 0;
	e->cb = NULL;
	strncpy(e->name, name ? name : "", PMG_KEY_NAME_MAX - 1);
	e->name[PMG_KEY_NAME_MAX - 1] = '\0';
	return 0;
}

int _pmg_keytab_release(struct _pmg_keytab *t, unsigned key)
{
	struct _pmg_consumer *e;

	if (key == PMG_KEY_DEFAULT || key >= PMG_NR_KEYS)
		return -EINVAL;
	e = &t->key[key];
	if (!e->used)
		return -ENOENT;
	e->used = false;
	e->dflt = PMG_RIGHTS_AD;
	e->cb = NULL;
	e->name[0] = '\0';
	return 0;
}

uint32_t _pmg_keytab_defaults(const struct _pmg_keytab *t, uint32_t pkval)
{
	unsigned k;

	for (k = 1; k < PMG_NR_KEYS; k++)
		if (t->key[k].used)
			pkval = pmg_pkval_update(pkval, k, t->key[k].dflt);
	return pkval;
}

unsigned _pmg_ws_rights(const struct _pmg_ws *ws, unsigned key, unsigned dflt)
{
	if (ws->w[key])
		return pmg_window_rights(dflt, PMG_WRITE);
	if (ws->r[key])
		return pmg_window_rights(dflt, PMG_READ);
	return dflt;
}

/*
 * Decide what to do about a protection-key fault on field f->key of
 * consumer @e, by a context whose saved register is f->saved_pkval.  Sets
 * f->action and, where the action loads a register value, f->new_pkval.
 *
 *  1. A consumer not in use, or key 0 (or out of range): not ours.
 *  2. The saved register is stricter than the key's default, and the
 *     default allows the access: the context predates the key or runs with
 *     a reset register (a thread created before the key, a signal
 *     handler).  Sync it to the default and retry; this is no stray
 *     access.  Skipped when f->no_sync says the register is never stale
 *     (page protection is the process-wide truth).  Window counts play no
 *     part: a context that opened a window set its register itself, so a
 *     register stricter than the default never means "a window is open".
 *  3. Otherwise the access is stray.  The callback may handle it
 *     (PMG_ACT_GRANT); else the mode decides: strict stops, relaxed
 *     reports once per consumer and grants, audit reports and grants this
 *     one access (the fault path re-arms after it), contain grants this
 *     one access to an instruction whose writes the fault path undoes.
 *     Grants are what the access needs (pmg_window_rights()), keeping the
 *     other keys' bits.
 */
void _pmg_fault_decide(struct _pmg_consumer *e, struct pmg_fault *f)
{
	unsigned saved, grant;
	_pmg_policy_cb cb;

	f->new_pkval = f->saved_pkval;
	if (!e->used || f->key == PMG_KEY_DEFAULT || f->key >= PMG_NR_KEYS) {
		f->action = PMG_ACT_NOT_OURS;
		return;
	}
	saved = pmg_pkval_rights(f->saved_pkval, f->key);

	if (!f->no_sync && saved != e->dflt &&
	    pmg_rights_allow(e->dflt, f->acc)) {
		f->new_pkval = pmg_pkval_update(f->saved_pkval, f->key,
						e->dflt);
		f->action = PMG_ACT_SYNC;
		return;
	}

	/* Stray.  Grant what the access needs, keeping the rest. */
	grant = pmg_window_rights(e->dflt, f->acc);
	cb = __atomic_load_n(&e->cb, __ATOMIC_ACQUIRE);
	if (cb && cb(f)) {
		f->new_pkval = pmg_pkval_update(f->saved_pkval, f->key, grant);
		f->action = PMG_ACT_GRANT;
		return;
	}
	switch (f->mode) {
	case PMG_FAULT_RELAXED:
		f->new_pkval = pmg_pkval_update(f->saved_pkval, f->key, grant);
		f->action = __atomic_exchange_n(&e->warned, 1, __ATOMIC_RELAXED)
				    ? PMG_ACT_RELAX_SILENT
				    : PMG_ACT_RELAX_REPORT;
		return;
	case PMG_FAULT_AUDIT:
		f->new_pkval = pmg_pkval_update(f->saved_pkval, f->key, grant);
		f->action = PMG_ACT_AUDIT;
		return;
	case PMG_FAULT_CONTAIN:
		f->new_pkval = pmg_pkval_update(f->saved_pkval, f->key, grant);
		f->action = PMG_ACT_CONTAIN;
		return;
	default:
		f->action = PMG_ACT_STRICT;
		return;
	}
}

int _pmg_mode_parse(const char *s)
{
	static const char *const names[] = {
		[PMG_FAULT_STRICT] = "strict",
		[PMG_FAULT_RELAXED] = "relaxed",
		[PMG_FAULT_AUDIT] = "audit",
		[PMG_FAULT_CONTAIN] = "contain",
	};
	unsigned m;

	for (m = 0; s && m < sizeof(names) / sizeof(names[0]); m++)
		if (!strcmp(s, names[m]))
			return (int)m;
	return -EINVAL;
}
