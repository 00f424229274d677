// SPDX-License-Identifier: MIT
/*
 * Windows opened in a fresh context on PKU.
 *
 * A signal handler starts with the kernel's default PKRU, not with the
 * rights of the code it interrupted (the seeds give each exception a fresh
 * PKS state the same way).  If that code held a window, this thread's
 * counts say "open" while the handler's register says "closed".  The
 * inline edge notices the mismatch and comes here: the handler gets its own
 * window, and the close that matches it puts the handler's previous rights
 * back instead of keeping the interrupted context's.  Contexts nest LIFO
 * (a handler finishes before the code it interrupted resumes), so a small
 * per-thread stack is enough.  AS-safe.
 */
#define _GNU_SOURCE
#include "internal.h"

#define PMG_CTX_MAX 16

static __thread struct {
	uint8_t key;
	uint8_t acc;
	uint16_t level;		/* the count this context's open reached */
	uint32_t bits;		/* the key's register bits before it */
} ctx[PMG_CTX_MAX];

PMG_API int _pmg_ctx_open(struct pmg_domain *d, int acc, uint32_t reg)
{
	struct _pmg_ws *t = &_pmg_tls;
	unsigned k = (unsigned)d->_key, depth = t->w[0];
	uint16_t *n = acc ? &t->w[k] : &t->r[k];
	unsigned rights = pmg_window_rights(_pmg.core.key[k].dflt,
					    (unsigned)acc);
	uint32_t nv;

	if (depth >= PMG_CTX_MAX)
		return _pmg_err_s(-EOVERFLOW, "windows opened in more than "
				  "16 nested signal handlers");
	ctx[depth].key = (uint8_t)k;
	ctx[depth].acc = (uint8_t)acc;
	ctx[depth].level = (uint16_t)(*n + 1);
	ctx[depth].bits = reg & d->_mask;
	t->w[0] = (uint16_t)(depth + 1);
	++*n;
	nv = pmg_pkval_update(reg, k, rights);
	if (nv != reg)
		_pmg_wrpkru(nv);
	return 0;
}

PMG_API bool _pmg_ctx_close(struct pmg_domain *d, int acc)
{
	struct _pmg_ws *t = &_pmg_tls;
	unsigned k = (unsigned)d->_key, depth = t->w[0];
	uint16_t *n = acc ? &t->w[k] : &t->r[k];
	uint32_t v, nv;

	if (!depth || ctx[depth - 1].key != k ||
	    ctx[depth - 1].acc != (uint8_t)acc || ctx[depth - 1].level != *n)
		return false;
	--*n;
	t->w[0] = (uint16_t)(depth - 1);
	v = _pmg_rdpkru();
	nv = (v & ~d->_mask) | ctx[depth - 1].bits;
	if (nv != v)
		_pmg_wrpkru(nv);
	return true;
}
