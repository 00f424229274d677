/* SPDX-License-Identifier: MIT */
/*
 * Is this test running under valgrind?  Valgrind cannot run pmguard's
 * fault path: audit mode single-steps the faulting instruction (TF in the
 * signal frame's flags) and the handlers edit the signal frame (PKRU in the
 * XSAVE area), neither of which valgrind's synthetic frames honour.  Tests
 * that fault on purpose skip under valgrind, saying so (docs/testing.md).
 *
 * RUNNING_ON_VALGRIND (valgrind.h, shipped with Debian's valgrind package)
 * when the header is there; otherwise the LD_PRELOAD valgrind sets for its
 * preload objects.  PMGUARD_TEST_VALGRIND=1 forces the answer yes.
 */
#ifndef PMG_VALGRIND_PROBE_H
#define PMG_VALGRIND_PROBE_H

#include <stdlib.h>
#include <string.h>

#if defined(__has_include) && !defined(PMG_WITHOUT_VALGRIND)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define PMG_HAVE_VALGRIND_H 1
#endif
#endif

/* The reason a test or binary gives when it skips under valgrind. */
#define PMG_VALGRIND_WHY "under valgrind: it cannot run pmguard's fault " \
	"path (audit mode's single step, signal-frame edits; docs/testing.md)"

static inline int pmg_under_valgrind(void)
{
	const char *e = getenv("PMGUARD_TEST_VALGRIND");
	const char *pre = getenv("LD_PRELOAD");

	if (e && !strcmp(e, "1"))
		return 1;
#ifdef PMG_HAVE_VALGRIND_H
	if (RUNNING_ON_VALGRIND)
		return 1;
#endif
	return pre && strstr(pre, "vgpreload") != NULL;
}

#endif /* PMG_VALGRIND_PROBE_H */
