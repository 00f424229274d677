// SPDX-License-Identifier: MIT
/*
 * pmguard arch-neutral core.  Freestanding: no libc, no allocation, no
 * locks.  Shared verbatim by libpmguard and the supervisor-mode kernel.
 */
#include "pmg_core.h"

void pmg_core_init(struct pmg_core *c)
{
	unsigned k;

	for (k = 0; k < PMG_NR_KEYS; k++) {
		struct pmg_core_key *e = &c->key[k];

		e->used = false;
		e->dflt = PMG_RIGHTS_AD;
		e->warned = 0;
		e->cb = NULL;
			e->name[0] = '\0';
	}
	/* Key 0 keeps full access: untagged pages keep paging permissions. */
	c->key[PMG_KEY_DEFAULT].used = true;
	c->key[PMG_KEY_DEFAULT].dflt = PMG_RIGHTS_RW;
	pmg_strlcpy(c->key[PMG_KEY_DEFAULT].name, "default", PMG_KEY_NAME_MAX);
}

int pmg_core_key_claim(struct pmg_core *c, unsigned key, const char *name,
		       unsigned dflt)
{
	struct pmg_core_key *e;

	if (key == PMG_KEY_DEFAULT || key >= PMG_NR_KEYS)
		return -PMG_E_INVAL;
	if (dflt != PMG_RIGHTS_AD && dflt != PMG_RIGHTS_WD &&
	    dflt != PMG_RIGHTS_RW)
		return -PMG_E_INVAL;
	e = &c->key[key];
	if (e->used)
		return -PMG_E_BUSY;
	e->used = true;
	e->dflt = (uint8_t)dflt;
	e->warned = 0;
	e->cb = NULL;
	pmg_strlcpy(e->name, name ? name : "", PMG_KEY_NAME_MAX);
	return 0;
}

int pmg_core_key_release(struct pmg_core *c, unsigned key)
{
	struct pmg_core_key *e;

	if (key == PMG_KEY_DEFAULT || key >= PMG_NR_KEYS)
		return -PMG_E_INVAL;
	e = &c->key[key];
	if (!e->used)
		return -PMG_E_NOENT;
	e->used = false;
	e->dflt = PMG_RIGHTS_AD;
	e->cb = NULL;
	e->name[0] = '\0';
	return 0;
}

int pmg_core_set_callback(struct pmg_core *c, unsigned key,
			  pmg_core_fault_cb cb)
{
	if (key == PMG_KEY_DEFAULT || key >= PMG_NR_KEYS)
		return -PMG_E_INVAL;
	if (!c->key[key].used)
		return -PMG_E_NOENT;
	__atomic_store_n(&c->key[key].cb, cb, __ATOMIC_RELEASE);
	return 0;
}

/* @pkval with every claimed key (but key 0) set to its default rights. */
uint32_t pmg_core_apply_defaults(const struct pmg_core *c, uint32_t pkval)
{
	unsigned k;

	for (k = 1; k < PMG_NR_KEYS; k++)
		if (c->key[k].used)
			pkval = pmg_pkval_update(pkval, k, c->key[k].dflt);
	return pkval;
}

/* The whole-register initial value: key 0 RW, claimed keys at their
 * default, unused keys access-disabled (the seeds' PKS_INIT_VALUE). */
uint32_t pmg_core_init_value(const struct pmg_core *c)
{
	uint32_t v = 0;
	unsigned k;

	for (k = 0; k < PMG_NR_KEYS; k++)
		v = pmg_pkval_update(v, k, c->key[k].dflt);
	return v;
}

int pmg_core_count_used(const struct pmg_core *c)
{
	int n = 0;
	unsigned k;

	for (k = 1; k < PMG_NR_KEYS; k++)
		n += c->key[k].used;
	return n;
}

/* The rights @key has in a context with window counts @ws. */
unsigned pmg_ws_rights(const struct pmg_ws *ws, unsigned key, unsigned dflt)
{
	if (ws->w[key])
		return pmg_window_rights(dflt, PMG_ACC_WRITE);
	if (ws->r[key])
		return pmg_window_rights(dflt, PMG_ACC_READ);
	return dflt;
}

int pmg_ws_open(struct pmg_ws *ws, unsigned key, unsigned acc)
{
	uint16_t *n;

	if (key == PMG_KEY_DEFAULT || key >= PMG_NR_KEYS)
		return -PMG_E_INVAL;
	n = acc == PMG_ACC_WRITE ? &ws->w[key] : &ws->r[key];
	if (*n == UINT16_MAX)
		return -PMG_E_OVERFLOW;
	(*n)++;
	return 0;
}

/* Close one window; an unbalanced close is refused, never underflows. */
int pmg_ws_close(struct pmg_ws *ws, unsigned key, unsigned acc)
{
	uint16_t *n;

	if (key == PMG_KEY_DEFAULT || key >= PMG_NR_KEYS)
		return -PMG_E_INVAL;
	n = acc == PMG_ACC_WRITE ? &ws->w[key] : &ws->r[key];
	if (*n == 0)
		return -PMG_E_PERM;
	(*n)--;
	return 0;
}

/*
 * Decide what to do about a protection-key fault on f->key by a context
 * whose saved register is f->saved_pkval.  Sets f->action and, where the
 * action loads a register value, f->new_pkval.
 *
 *  1. A key we do not own: not ours.
 *  2. The saved register is stricter than the key's default, and the
 *     default allows the access: the context predates the key or runs with
 *     a reset register (a user-space thread created before the key, a
 *     signal handler).  Sync it to the default and retry; this is no stray
 *     access.  Skipped when f->no_sync says the port's register is never
 *     stale: the kernel (PKRS is only ever what it wrote, so an explicit
 *     pks_mk_noaccess() on a key whose default allows access is honoured)
 *     and the mprotect backend (page protection is the process-wide truth).
 *     Window counts play no part: a context that opened a window set its
 *     register itself, so a register stricter than the default never means
 *     "a window is open".
 *  3. Otherwise the access is stray.  The key's callback may handle it
 *     (PMG_ACT_GRANT); else the mode decides: strict stops, relaxed reports
 *     once per key and grants, audit reports and grants this one access
 *     (the port re-arms after it).  Grants are what the access needs
 *     (pmg_window_rights()), keeping the other keys' bits.
 */
void pmg_core_fault_decide(struct pmg_core *c, struct pmg_fault *f)
{
	/* the entry decides whether the key is ours (used, not 0) */
	if (f->key >= PMG_NR_KEYS) {
		f->new_pkval = f->saved_pkval;
		f->action = PMG_ACT_NOT_OURS;
		return;
	}
	pmg_core_fault_decide_entry(&c->key[f->key], f);
}

void pmg_core_fault_decide_entry(struct pmg_core_key *e, struct pmg_fault *f)
{
	unsigned saved, grant;
	pmg_core_fault_cb cb;

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
	case PMG_MODE_RELAXED:
		f->new_pkval = pmg_pkval_update(f->saved_pkval, f->key, grant);
		f->action = __atomic_exchange_n(&e->warned, 1, __ATOMIC_RELAXED)
				    ? PMG_ACT_RELAX_SILENT
				    : PMG_ACT_RELAX_REPORT;
		return;
	case PMG_MODE_AUDIT:
		f->new_pkval = pmg_pkval_update(f->saved_pkval, f->key, grant);
		f->action = PMG_ACT_AUDIT;
		return;
	default:
		f->action = PMG_ACT_STRICT;
		return;
	}
}

const char *pmg_mode_name(unsigned mode)
{
	switch (mode) {
	case PMG_MODE_STRICT:
		return "strict";
	case PMG_MODE_RELAXED:
		return "relaxed";
	case PMG_MODE_AUDIT:
		return "audit";
	}
	return "unknown";
}

/* "strict" / "relaxed" / "audit" to enum pmg_core_mode, or -PMG_E_INVAL. */
int pmg_mode_parse(const char *s)
{
	if (!s)
		return -PMG_E_INVAL;
	if (pmg_streq(s, "strict"))
		return PMG_MODE_STRICT;
	if (pmg_streq(s, "relaxed"))
		return PMG_MODE_RELAXED;
	if (pmg_streq(s, "audit"))
		return PMG_MODE_AUDIT;
	return -PMG_E_INVAL;
}

const char *pmg_rights_name(unsigned rights)
{
	switch (pmg_arch_field_rights(rights & PMG_PKR_FIELD_MASK)) {
	case PMG_RIGHTS_RW:
		return "read-write";
	case PMG_RIGHTS_WD:
		return "write-disabled";
	default:
		return "access-disabled";
	}
}

size_t pmg_strlcpy(char *dst, const char *src, size_t size)
{
	size_t n = 0;

	while (src[n]) {
		if (size && n + 1 < size)
			dst[n] = src[n];
		n++;
	}
	if (size)
		dst[n < size ? n : size - 1] = '\0';
	return n;
}

int pmg_streq(const char *a, const char *b)
{
	while (*a && *a == *b) {
		a++;
		b++;
	}
	return *a == *b;
}

size_t pmg_utoa(uint64_t v, unsigned base, char *buf, size_t size)
{
	char tmp[24];
	size_t n = 0, i;

	if (base != 16)
		base = 10;
	do {
		unsigned d = (unsigned)(v % base);

		tmp[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
		v /= base;
	} while (v && n < sizeof(tmp));
	if (!size)
		return n;
	for (i = 0; i < n && i + 1 < size; i++)
		buf[i] = tmp[n - 1 - i];
	buf[i] = '\0';
	return i;
}
