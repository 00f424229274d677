// SPDX-License-Identifier: MIT
/*
 * test-policy: unit tests of the policy (src/policy.[ch]) and the register
 * layout it decides on (src/arch/x86/pkru.h): register math, rights, the
 * key table, window rights, the fault decision in every mode (contain
 * included) and the mode names; and the library's AS-safe string helpers
 * (report.c).  Pure computation: the same results on every backend, with
 * or without PKU, so nothing here is skipped.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "tap.h"
#include "../src/internal.h"	/* policy.h, the string helpers */

#define PLAN 64

/*
 * V8's static consumers (Intel's PKS/PMEM patch set for Linux; the
 * kernel's table, the Linux series' include/linux/pks-keys.h): key 1
 * TEST, key 2 PMEM, both access-disabled, as is every unused key; key 0
 * read/write.  The core only does the math.
 */
#define V8_KEY_TEST	1
#define V8_KEY_PMEM	2
#define V8_PKS_INIT_VALUE 0x55555554u

/* Register values the math is tried on. */
static const uint32_t pkvals[] = {
	0x00000000u, 0xffffffffu, 0x55555554u, 0xaaaaaaaau,
	0x12345678u, 0x9abcdef0u, 0x0000000fu, 0xf0000000u,
};
#define NPKVALS (sizeof(pkvals) / sizeof(pkvals[0]))

/* What pmg_pkval_rights() must say for two raw register bits. */
static unsigned expect_rights(unsigned bits)
{
	bits &= 3;
	return (bits & PMG_PKR_AD_BIT) ? PMG_RIGHTS_AD : bits;
}

/* The whole register @t describes: every key at its default rights,
 * free keys included (V8's PKS_INIT_VALUE for V8's table). */
static uint32_t table_value(const struct _pmg_keytab *t)
{
	uint32_t v = 0;
	unsigned k;

	for (k = 0; k < PMG_NR_KEYS; k++)
		v = pmg_pkval_update(v, k, t->key[k].dflt);
	return v;
}

/* ---- register math ---- */

static void test_pkval(void)
{
	int sets_bits = 1, others_kept = 1, reads_back = 1, adwd_as_ad = 1;
	int masks_high = 1, macros = 1;
	unsigned i, k, r;

	/* every start value x key x rights, as one flat loop */
	for (i = 0; i < NPKVALS * PMG_NR_KEYS * 4; i++) {
		uint32_t in = pkvals[i / (PMG_NR_KEYS * 4)], v, m;

		k = (i / 4) % PMG_NR_KEYS;
		r = i % 4;
		v = pmg_pkval_update(in, k, r);
		m = 0x3u << (2 * k);
		CHECK(sets_bits, ((v >> (2 * k)) & 3) == r);
		CHECK(others_kept, (v & ~m) == (in & ~m));
		CHECK(reads_back, pmg_pkval_rights(v, k) == expect_rights(r));
		if (r == 3)
			CHECK(adwd_as_ad, pmg_pkval_rights(v, k) ==
					  PMG_RIGHTS_AD);
		/* rights above 3 keep only their two bits */
		CHECK(masks_high, pmg_pkval_update(in, k, r | 0xfcu) == v);
		if (r == 0) {
			CHECK(macros, PMG_PKR_MASK(k) == m);
			CHECK(macros, PMG_PKR_AD_KEY(k) == 0x1u << (2 * k));
			CHECK(macros, PMG_PKR_WD_KEY(k) == 0x2u << (2 * k));
			CHECK(macros, PMG_PKR_RW_KEY(k) == 0);
		}
	}
	tap_ok(sets_bits, "pkval_update sets the key's two bits, every key "
	       "x rights x start value");
	tap_ok(others_kept, "pkval_update leaves every other key's bits alone");
	tap_ok(reads_back, "pkval_rights reads back what pkval_update wrote");
	tap_ok(adwd_as_ad, "pkval_rights reads AD|WD as AD");
	tap_ok(masks_high, "pkval_update uses only the low two bits of rights");
	tap_ok(macros, "PMG_PKR_MASK/AD_KEY/WD_KEY/RW_KEY per key");
}

static void test_rights(void)
{
	/* rights 0..3 x {read, write} */
	static const int allow[4][2] = {
		{ 1, 1 },	/* RW */
		{ 0, 0 },	/* AD */
		{ 1, 0 },	/* WD */
		{ 0, 0 },	/* AD|WD */
	};
	int ok = 1;
	unsigned r, a;

	for (r = 0; r < 4; r++)
		for (a = 0; a < 2; a++)
			if (pmg_rights_allow(r, a) != allow[r][a]) {
				tap_diag("rights_allow(%u, %u) = %d", r, a,
					 pmg_rights_allow(r, a));
				ok = 0;
			}
	tap_ok(ok, "rights_allow truth table (RW, AD, WD, AD|WD x read, "
	       "write)");

	ok = 1;
	CHECK(ok, pmg_window_rights(PMG_RIGHTS_RW, PMG_READ) ==
		  PMG_RIGHTS_RW);
	CHECK(ok, pmg_window_rights(PMG_RIGHTS_RW, PMG_WRITE) ==
		  PMG_RIGHTS_RW);
	CHECK(ok, pmg_window_rights(PMG_RIGHTS_WD, PMG_READ) ==
		  PMG_RIGHTS_WD);
	CHECK(ok, pmg_window_rights(PMG_RIGHTS_WD, PMG_WRITE) ==
		  PMG_RIGHTS_RW);
	CHECK(ok, pmg_window_rights(PMG_RIGHTS_AD, PMG_READ) ==
		  PMG_RIGHTS_WD);
	CHECK(ok, pmg_window_rights(PMG_RIGHTS_AD, PMG_WRITE) ==
		  PMG_RIGHTS_RW);
	tap_ok(ok, "window_rights: write gives RW, read gives WD (RW stays "
	       "RW)");
}

/* ---- the consumer table ---- */

static void test_table(void)
{
	struct _pmg_keytab c;
	uint32_t v;
	int ok, k;

	v = PMG_PKR_RW_KEY(0);
	for (k = 1; k < PMG_NR_KEYS; k++)
		v |= PMG_PKR_AD_KEY(k);
	tap_ok(v == V8_PKS_INIT_VALUE,
	       "key 0 RW, keys 1..15 AD is V8's PKS_INIT_VALUE "
	       "0x55555554 (got %#x)", (unsigned)v);

	memset(&c, 0xa5, sizeof(c));
	_pmg_keytab_init(&c);
	ok = 1;
	CHECK(ok, table_value(&c) == 0x55555554u);
	CHECK(ok, c.key[0].used && c.key[0].dflt == PMG_RIGHTS_RW);
	for (k = 1; k < PMG_NR_KEYS; k++)
		CHECK(ok, !c.key[k].used && c.key[k].cb == NULL &&
			  c.key[k].dflt == PMG_RIGHTS_AD &&
			  c.key[k].warned == 0 && c.key[k].name[0] == '\0');
	tap_ok(ok, "core_init: key 0 RW and in use, keys 1..15 free and AD");

	CHECK(ok, _pmg_keytab_claim(&c, V8_KEY_TEST, "pks_test",
				     PMG_RIGHTS_AD) == 0);
	CHECK(ok, _pmg_keytab_claim(&c, V8_KEY_PMEM, "pmem",
				     PMG_RIGHTS_AD) == 0);
	v = table_value(&c);
	tap_ok(ok && v == V8_PKS_INIT_VALUE, "init_value with TEST and PMEM "
	       "claimed AD equals V8_PKS_INIT_VALUE (got %#x)", (unsigned)v);

	ok = 1;
	CHECK(ok, _pmg_keytab_release(&c, V8_KEY_PMEM) == 0);
	CHECK(ok, _pmg_keytab_claim(&c, V8_KEY_PMEM, "pmem",
				     PMG_RIGHTS_WD) == 0);
	v = table_value(&c);
	CHECK(ok, v == (V8_PKS_INIT_VALUE & ~PMG_PKR_MASK(V8_KEY_PMEM)) +
		       PMG_PKR_WD_KEY(V8_KEY_PMEM));
	tap_ok(ok, "init_value with PMEM claimed WD changes key 2 only "
	       "(%#x)", (unsigned)v);

	ok = 1;
	CHECK(ok, _pmg_keytab_claim(&c, 0, "zero", PMG_RIGHTS_WD) ==
		  -EINVAL);
	CHECK(ok, c.key[0].dflt == PMG_RIGHTS_RW);
	tap_ok(ok, "key_claim of key 0 is -EINVAL and key 0 stays RW");
	tap_ok(_pmg_keytab_claim(&c, 16, "k16", PMG_RIGHTS_WD) ==
	       -EINVAL && _pmg_keytab_claim(&c, 1000, "k", 0) ==
	       -EINVAL, "key_claim of key 16 (and 1000) is -EINVAL");

	ok = 1;
	CHECK(ok, _pmg_keytab_claim(&c, 5, "five", PMG_RIGHTS_RW) == 0);
	CHECK(ok, _pmg_keytab_claim(&c, 5, "again", PMG_RIGHTS_AD) ==
		  -EBUSY);
	CHECK(ok, -EBUSY == -16 && !strcmp(c.key[5].name, "five") &&
		  c.key[5].dflt == PMG_RIGHTS_RW);
	tap_ok(ok, "double key_claim is -EBUSY (-16) and keeps the first "
	       "claim");

	ok = 1;
	CHECK(ok, _pmg_keytab_claim(&c, 6, "six", 3) == -EINVAL);
	CHECK(ok, _pmg_keytab_claim(&c, 6, "six", 4) == -EINVAL);
	CHECK(ok, _pmg_keytab_claim(&c, 6, "six", ~0u) == -EINVAL);
	CHECK(ok, !c.key[6].used);
	tap_ok(ok, "key_claim with rights 3, 4, ~0 is -EINVAL and claims "
	       "nothing");

	ok = 1;
	CHECK(ok, _pmg_keytab_release(&c, 7) == -ENOENT);
	CHECK(ok, -ENOENT == -2);
	CHECK(ok, _pmg_keytab_release(&c, 0) == -EINVAL);
	CHECK(ok, _pmg_keytab_release(&c, 16) == -EINVAL);
	CHECK(ok, c.key[0].used);
	tap_ok(ok, "key_release: unclaimed -ENOENT, key 0 and 16 -EINVAL");

	ok = 1;
	CHECK(ok, _pmg_keytab_release(&c, 5) == 0);
	CHECK(ok, _pmg_keytab_release(&c, 5) == -ENOENT);
	CHECK(ok, !c.key[5].used && c.key[5].dflt == PMG_RIGHTS_AD &&
		  c.key[5].name[0] == '\0');
	CHECK(ok, _pmg_keytab_claim(&c, 5, NULL, PMG_RIGHTS_WD) == 0);
	CHECK(ok, c.key[5].name[0] == '\0');
	tap_ok(ok, "release twice is -ENOENT; released key is AD and "
	       "claimable again (NULL name reads as \"\")");

	ok = 1;
	CHECK(ok, _pmg_keytab_claim(&c, 9,
		  "0123456789abcdef0123456789abcdefXYZ", PMG_RIGHTS_WD) == 0);
	CHECK(ok, strlen(c.key[9].name) == PMG_KEY_NAME_MAX - 1);
	CHECK(ok, !strcmp(c.key[9].name, "0123456789abcdef0123456789abcde"));
	tap_ok(ok, "key_claim truncates a long name to 31 characters");

	/* claimed now: 1 AD, 2 WD, 5 WD, 9 WD */
	ok = 1;
	for (k = 1; k < PMG_NR_KEYS; k++)
		CHECK(ok, c.key[k].used == (k == 1 || k == 2 || k == 5 ||
					    k == 9));
	tap_ok(ok, "after the claims and releases, keys 1, 2, 5, 9 are in "
	       "use, no other");

	ok = 1;
	c.key[9].cb = (_pmg_policy_cb)1;
	c.key[9].warned = 1;
	CHECK(ok, _pmg_keytab_release(&c, 9) == 0 && c.key[9].cb == NULL);
	CHECK(ok, _pmg_keytab_claim(&c, 9, "nine", PMG_RIGHTS_WD) == 0);
	CHECK(ok, c.key[9].cb == NULL && c.key[9].warned == 0);
	tap_ok(ok, "a released key drops its callback; a new claim starts "
	       "unreported, without a callback");

	/* apply_defaults: only claimed keys 1..15 change */
	ok = 1;
	for (k = 0; k < (int)NPKVALS; k++) {
		uint32_t in = pkvals[k], out = _pmg_keytab_defaults(&c, in);
		uint32_t claimed = PMG_PKR_MASK(1) | PMG_PKR_MASK(2) |
				   PMG_PKR_MASK(5) | PMG_PKR_MASK(9);

		CHECK(ok, (out & ~claimed) == (in & ~claimed));
		CHECK(ok, pmg_pkval_rights(out, 1) == PMG_RIGHTS_AD);
		CHECK(ok, ((out >> 4) & 3) == PMG_RIGHTS_WD);	/* key 2 */
		CHECK(ok, ((out >> 10) & 3) == PMG_RIGHTS_WD);	/* key 5 */
		CHECK(ok, ((out >> 18) & 3) == PMG_RIGHTS_WD);	/* key 9 */
	}
	tap_ok(ok, "apply_defaults sets claimed keys, leaves unclaimed keys "
	       "and key 0 alone");
}

/* ---- window counts ---- */

static void test_ws(void)
{
	struct _pmg_ws ws;
	int ok, i;

	memset(&ws, 0, sizeof(ws));
	tap_ok(sizeof(ws) == 64, "struct _pmg_ws is one 64-byte line");

	/* The counts are the inline window edges' (include/pmguard.h);
	 * here they are set as the edges leave them. */
	ok = 1;
	ws.w[3] = 2;
	CHECK(ok, _pmg_ws_rights(&ws, 3, PMG_RIGHTS_WD) == PMG_RIGHTS_RW);
	ws.w[3] = 1;
	CHECK(ok, _pmg_ws_rights(&ws, 3, PMG_RIGHTS_WD) == PMG_RIGHTS_RW);
	ws.w[3] = 0;
	CHECK(ok, _pmg_ws_rights(&ws, 3, PMG_RIGHTS_WD) == PMG_RIGHTS_WD);
	tap_ok(ok, "nested write windows (2, 1, 0 open): RW until the outer "
	       "close, then the default");

	ok = 1;
	for (i = 1; i < PMG_NR_KEYS; i++) {
		unsigned k;

		memset(&ws, 0, sizeof(ws));
		ws.w[i] = 1;
		for (k = 1; k < PMG_NR_KEYS; k++)
			CHECK(ok, _pmg_ws_rights(&ws, k, PMG_RIGHTS_AD) ==
				  ((int)k == i ? PMG_RIGHTS_RW
					       : PMG_RIGHTS_AD));
	}
	tap_ok(ok, "a window on one key gives rights on that key only, every "
	       "key 1..15");

	ok = 1;
	memset(&ws, 0, sizeof(ws));
	ws.w[4] = UINT16_MAX;
	ws.r[5] = UINT16_MAX;
	CHECK(ok, _pmg_ws_rights(&ws, 4, PMG_RIGHTS_AD) == PMG_RIGHTS_RW);
	CHECK(ok, _pmg_ws_rights(&ws, 5, PMG_RIGHTS_AD) == PMG_RIGHTS_WD);
	tap_ok(ok, "65535 nested windows (the counts' maximum) still give "
	       "the window's rights");
	memset(&ws, 0, sizeof(ws));

	ok = 1;
	CHECK(ok, _pmg_ws_rights(&ws, 7, PMG_RIGHTS_AD) == PMG_RIGHTS_AD);
	CHECK(ok, _pmg_ws_rights(&ws, 7, PMG_RIGHTS_WD) == PMG_RIGHTS_WD);
	CHECK(ok, _pmg_ws_rights(&ws, 7, PMG_RIGHTS_RW) == PMG_RIGHTS_RW);
	tap_ok(ok, "ws_rights with no window is the default");

	ok = 1;
	ws.r[7]++;	/* a read window */
	CHECK(ok, _pmg_ws_rights(&ws, 7, PMG_RIGHTS_AD) == PMG_RIGHTS_WD);
	CHECK(ok, _pmg_ws_rights(&ws, 7, PMG_RIGHTS_WD) == PMG_RIGHTS_WD);
	CHECK(ok, _pmg_ws_rights(&ws, 7, PMG_RIGHTS_RW) == PMG_RIGHTS_RW);
	CHECK(ok, _pmg_ws_rights(&ws, 8, PMG_RIGHTS_AD) == PMG_RIGHTS_AD);
	tap_ok(ok, "ws_rights with a read window: WD (RW stays RW), other "
	       "keys unaffected");

	ok = 1;
	ws.w[7]++;	/* a write window inside it */
	CHECK(ok, _pmg_ws_rights(&ws, 7, PMG_RIGHTS_AD) == PMG_RIGHTS_RW);
	ws.w[7]--;
	CHECK(ok, _pmg_ws_rights(&ws, 7, PMG_RIGHTS_AD) == PMG_RIGHTS_WD);
	ws.r[7]--;
	CHECK(ok, _pmg_ws_rights(&ws, 7, PMG_RIGHTS_AD) == PMG_RIGHTS_AD);
	tap_ok(ok, "ws_rights: write nested in read is RW, then back to WD, "
	       "then AD");

	{
		struct _pmg_keytab c;
		uint32_t v;
		int k;

		_pmg_keytab_init(&c);
		_pmg_keytab_claim(&c, 3, "a", PMG_RIGHTS_AD);
		_pmg_keytab_claim(&c, 4, "b", PMG_RIGHTS_WD);
		ws.r[3]++;
		ws.w[4]++;
		ws.w[6]++;	/* unclaimed */
		v = 0xffffffffu;
		for (k = 1; k < PMG_NR_KEYS; k++)
			if (c.key[k].used)
				v = pmg_pkval_update(v, (unsigned)k,
					_pmg_ws_rights(&ws, (unsigned)k,
						      c.key[k].dflt));
		tap_ok(v == ((0xffffffffu & ~(PMG_PKR_MASK(3) |
			      PMG_PKR_MASK(4))) | PMG_PKR_WD_KEY(3)),
		       "ws_rights over the table: claimed keys get window "
		       "rights, unclaimed keys untouched (%#x)", (unsigned)v);
	}
}

/* ---- the fault decision ---- */

struct cb_log {
	int calls;
	bool answer;
	uintptr_t addr, ip;
	unsigned key, acc;
};

/* What the last callback saw; the ports keep their own state the same way. */
static struct cb_log cl;

static bool test_cb(const struct pmg_fault *f)
{
	cl.calls++;
	cl.addr = f->addr;
	cl.ip = f->ip;
	cl.key = f->key;
	cl.acc = f->acc;
	return cl.answer;
}

static struct pmg_fault mkfault(unsigned key, unsigned acc, uint32_t saved,
				unsigned mode)
{
	struct pmg_fault f;

	memset(&f, 0, sizeof(f));
	f.addr = 0x7000123450ull;
	f.ip = 0x401234;
	f.key = key;
	f.acc = acc;
	f.saved_pkval = saved;
	f.new_pkval = 0xdeadbeef;	/* must be overwritten */
	f.mode = mode;
	f.action = -1;
	return f;
}

static int decide(struct _pmg_keytab *c, struct pmg_fault *f)
{
	/* the consumer of the key, as the fault path passes a domain's; a
	 * field beyond the register gets a claimed key's consumer, so that
	 * only the range check can refuse it */
	_pmg_fault_decide(&c->key[f->key < PMG_NR_KEYS ? f->key : 3], f);
	return f->action;
}

/* new_pkval is saved_pkval with only @key's bits changed, to @rights. */
static int only_key(const struct pmg_fault *f, unsigned key, unsigned rights)
{
	return f->new_pkval == pmg_pkval_update(f->saved_pkval, key, rights);
}

static void test_decide(void)
{
	struct _pmg_keytab c;
	struct pmg_fault f;
	uint32_t init;
	int ok, i;

	_pmg_keytab_init(&c);
	_pmg_keytab_claim(&c, 3, "wd", PMG_RIGHTS_WD);
	_pmg_keytab_claim(&c, 4, "ad", PMG_RIGHTS_AD);
	_pmg_keytab_claim(&c, 5, "wd2", PMG_RIGHTS_WD);
	init = table_value(&c);

	ok = 1;
	f = mkfault(7, PMG_WRITE, init, PMG_FAULT_STRICT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_NOT_OURS);
	CHECK(ok, f.new_pkval == f.saved_pkval);
	f = mkfault(0, PMG_WRITE, init, PMG_FAULT_STRICT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_NOT_OURS);
	f = mkfault(16, PMG_READ, init, PMG_FAULT_AUDIT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_NOT_OURS);
	tap_ok(ok, "fault on an unclaimed key, key 0 or key 16: NOT_OURS, "
	       "register unchanged");

	/* A register that predates the key: AD where the default is WD. */
	ok = 1;
	f = mkfault(3, PMG_READ, 0x55555554u, PMG_FAULT_STRICT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_SYNC);
	CHECK(ok, only_key(&f, 3, PMG_RIGHTS_WD));
	CHECK(ok, f.new_pkval == 0x55555554u - PMG_PKR_AD_KEY(3) +
		  PMG_PKR_WD_KEY(3));
	tap_ok(ok, "stale register (AD, default WD) + read: SYNC to WD for "
	       "that key only (%#x)", (unsigned)f.new_pkval);

	/* A port whose register is never stale opts out of the sync. */
	ok = 1;
	f = mkfault(3, PMG_READ, 0x55555554u, PMG_FAULT_STRICT);
	f.no_sync = true;
	CHECK(ok, decide(&c, &f) == PMG_ACT_STRICT);
	CHECK(ok, f.new_pkval == 0x55555554u);
	tap_ok(ok, "no_sync: the same fault is a stray access (strict), "
	       "register unchanged");

	/* The register already allows it: retrying would fault forever. */
	ok = 1;
	f = mkfault(3, PMG_READ, init, PMG_FAULT_STRICT);
	CHECK(ok, decide(&c, &f) != PMG_ACT_SYNC);
	f = mkfault(3, PMG_WRITE, pmg_pkval_update(init, 3, PMG_RIGHTS_RW),
		    PMG_FAULT_STRICT);
	CHECK(ok, decide(&c, &f) != PMG_ACT_SYNC);
	tap_ok(ok, "a fault the saved register already allows is never a "
	       "SYNC (no retry loop)");

	ok = 1;
	f = mkfault(3, PMG_WRITE, 0x55555554u, PMG_FAULT_STRICT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_STRICT);
	CHECK(ok, f.new_pkval == f.saved_pkval);
	tap_ok(ok, "stale register + write on a WD default is stray, not a "
	       "sync (strict: STRICT)");

	ok = 1;
	f = mkfault(3, PMG_WRITE, init, PMG_FAULT_STRICT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_STRICT);
	CHECK(ok, f.new_pkval == f.saved_pkval);
	f = mkfault(3, PMG_WRITE, init, 7);
	CHECK(ok, decide(&c, &f) == PMG_ACT_STRICT);
	tap_ok(ok, "write on WD default, strict (and unknown mode 7): "
	       "STRICT, nothing granted");

	ok = 1;
	f = mkfault(3, PMG_WRITE, init, PMG_FAULT_RELAXED);
	CHECK(ok, decide(&c, &f) == PMG_ACT_RELAX_REPORT);
	CHECK(ok, only_key(&f, 3, PMG_RIGHTS_RW));
	tap_ok(ok, "relaxed, first stray write on the key: RELAX_REPORT, "
	       "RW for that key only");

	ok = 1;
	for (i = 0; i < 3; i++) {
		f = mkfault(3, PMG_WRITE, init, PMG_FAULT_RELAXED);
		CHECK(ok, decide(&c, &f) == PMG_ACT_RELAX_SILENT);
		CHECK(ok, only_key(&f, 3, PMG_RIGHTS_RW));
	}
	tap_ok(ok, "relaxed, later stray writes on the key: RELAX_SILENT "
	       "(warned once)");

	ok = 1;
	f = mkfault(5, PMG_WRITE, init, PMG_FAULT_RELAXED);
	CHECK(ok, decide(&c, &f) == PMG_ACT_RELAX_REPORT);
	f = mkfault(5, PMG_WRITE, init, PMG_FAULT_RELAXED);
	CHECK(ok, decide(&c, &f) == PMG_ACT_RELAX_SILENT);
	tap_ok(ok, "relaxed warns once per key: a second key reports on its "
	       "own first fault");

	ok = 1;
	for (i = 0; i < 3; i++) {
		f = mkfault(3, PMG_WRITE, init, PMG_FAULT_AUDIT);
		CHECK(ok, decide(&c, &f) == PMG_ACT_AUDIT);
		CHECK(ok, only_key(&f, 3, PMG_RIGHTS_RW));
	}
	tap_ok(ok, "audit: AUDIT every time, new register RW for that key "
	       "only");

	ok = 1;
	f = mkfault(4, PMG_READ, init, PMG_FAULT_AUDIT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_AUDIT);
	CHECK(ok, only_key(&f, 4, PMG_RIGHTS_WD));
	f = mkfault(4, PMG_READ, init, PMG_FAULT_STRICT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_STRICT);
	tap_ok(ok, "stray read of an AD key: audit grants WD only (not RW); "
	       "strict stops");

	/* Contain: a mode of its own, not audit under another name. */
	ok = 1;
	for (i = 0; i < 3; i++) {
		f = mkfault(3, PMG_WRITE, init, PMG_FAULT_CONTAIN);
		CHECK(ok, decide(&c, &f) == PMG_ACT_CONTAIN);
		CHECK(ok, only_key(&f, 3, PMG_RIGHTS_RW));
	}
	tap_ok(ok, "contain: CONTAIN for every stray write, RW for that key "
	       "only for the one instruction");

	ok = 1;
	f = mkfault(4, PMG_READ, init, PMG_FAULT_CONTAIN);
	CHECK(ok, decide(&c, &f) == PMG_ACT_CONTAIN);
	CHECK(ok, only_key(&f, 4, PMG_RIGHTS_WD));
	f = mkfault(3, PMG_READ, 0x55555554u, PMG_FAULT_CONTAIN);
	CHECK(ok, decide(&c, &f) == PMG_ACT_SYNC);
	f = mkfault(3, PMG_WRITE, 0x55555554u, PMG_FAULT_CONTAIN);
	f.no_sync = true;
	CHECK(ok, decide(&c, &f) == PMG_ACT_CONTAIN);
	CHECK(ok, only_key(&f, 3, PMG_RIGHTS_RW));
	tap_ok(ok, "contain: a stray read of an AD key gets WD (the fault "
	       "path decodes it); a stale register is synced first; "
	       "no_sync contains");

	/* Callbacks */
	ok = 1;
	memset(&cl, 0, sizeof(cl));
	cl.answer = true;
	c.key[3].cb = test_cb;
	f = mkfault(3, PMG_WRITE, init, PMG_FAULT_STRICT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_GRANT);
	CHECK(ok, only_key(&f, 3, PMG_RIGHTS_RW));
	CHECK(ok, cl.calls == 1);
	f = mkfault(3, PMG_WRITE, init, PMG_FAULT_CONTAIN);
	CHECK(ok, decide(&c, &f) == PMG_ACT_GRANT);
	CHECK(ok, only_key(&f, 3, PMG_RIGHTS_RW) && cl.calls == 2);
	tap_ok(ok, "callback returning true: GRANT with RW for that key, "
	       "even in strict and contain mode");
	tap_ok(cl.addr == 0x7000123450ull && cl.ip == 0x401234 &&
	       cl.key == 3 && cl.acc == PMG_WRITE,
	       "callback received the fault's addr, ip, key and access");

	ok = 1;
	cl.answer = false;
	cl.calls = 0;
	f = mkfault(3, PMG_WRITE, init, PMG_FAULT_STRICT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_STRICT);
	f = mkfault(3, PMG_WRITE, init, PMG_FAULT_AUDIT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_AUDIT);
	f = mkfault(3, PMG_WRITE, init, PMG_FAULT_CONTAIN);
	CHECK(ok, decide(&c, &f) == PMG_ACT_CONTAIN);
	CHECK(ok, cl.calls == 3);
	tap_ok(ok, "callback returning false: the mode decides (STRICT, "
	       "AUDIT, CONTAIN)");

	ok = 1;
	cl.calls = 0;
	f = mkfault(3, PMG_READ, 0x55555554u, PMG_FAULT_STRICT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_SYNC);
	CHECK(ok, cl.calls == 0);
	c.key[3].cb = NULL;
	f = mkfault(3, PMG_WRITE, init, PMG_FAULT_STRICT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_STRICT);
	CHECK(ok, cl.calls == 0);
	tap_ok(ok, "a sync does not call the callback; a cleared callback is "
	       "not called");

	/* A key whose default allows access, closed explicitly (the
	 * V8's pks_mk_noaccess()); only no_sync keeps it closed. */
	ok = 1;
	_pmg_keytab_claim(&c, 6, "rw", PMG_RIGHTS_RW);
	f = mkfault(6, PMG_READ, pmg_pkval_update(init, 6, PMG_RIGHTS_AD),
		    PMG_FAULT_STRICT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_SYNC);
	CHECK(ok, only_key(&f, 6, PMG_RIGHTS_RW));
	f = mkfault(6, PMG_READ, pmg_pkval_update(init, 6, PMG_RIGHTS_AD),
		    PMG_FAULT_STRICT);
	f.no_sync = true;
	CHECK(ok, decide(&c, &f) == PMG_ACT_STRICT);
	tap_ok(ok, "RW-default key closed explicitly: SYNC back to RW, but "
	       "with no_sync a stray access (the kernel's noaccess holds)");

	ok = 1;
	f = mkfault(4, PMG_READ, init, PMG_FAULT_RELAXED);
	f.no_sync = true;
	CHECK(ok, decide(&c, &f) == PMG_ACT_RELAX_REPORT ||
		  f.action == PMG_ACT_RELAX_SILENT);
	CHECK(ok, only_key(&f, 4, PMG_RIGHTS_WD));
	tap_ok(ok, "relaxed stray read of an AD key grants what the read "
	       "needs: WD (RO), not RW");

	ok = 1;
	CHECK(ok, pmg_rights_allow(PMG_RIGHTS_RW, PMG_WRITE));
	CHECK(ok, pmg_rights_allow(PMG_RIGHTS_WD, PMG_READ));
	CHECK(ok, !pmg_rights_allow(PMG_RIGHTS_WD, PMG_WRITE));
	CHECK(ok, !pmg_rights_allow(PMG_RIGHTS_AD, PMG_READ));
	CHECK(ok, !pmg_rights_allow(PMG_PKR_AD_BIT | PMG_PKR_WD_BIT,
				    PMG_READ));
	CHECK(ok, pmg_pkval_rights(0x3u << PMG_PKR_SHIFT(4), 4) ==
		  PMG_RIGHTS_AD);
	tap_ok(ok, "rights_allow / pkval_rights through the arch layout: "
	       "AD|WD reads as no access");

	ok = 1;
	_pmg_keytab_release(&c, 3);
	f = mkfault(3, PMG_WRITE, init, PMG_FAULT_AUDIT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_NOT_OURS);
	_pmg_keytab_claim(&c, 3, "wd", PMG_RIGHTS_WD);
	f = mkfault(3, PMG_WRITE, init, PMG_FAULT_RELAXED);
	CHECK(ok, decide(&c, &f) == PMG_ACT_RELAX_REPORT);
	tap_ok(ok, "released key: NOT_OURS; reclaimed key reports again in "
	       "relaxed mode");
}

/* ---- names ---- */

static void test_names(void)
{
	static const char *const bad[] = {
		"", "STRICT", "strict ", " strict", "stric", "strictx",
		"Relaxed", "audit\n", "Contain", "contai", "containx",
	};
	static const char *const names[] = {
		"strict", "relaxed", "audit", "contain",
	};
	static const int modes[] = {
		PMG_FAULT_STRICT, PMG_FAULT_RELAXED, PMG_FAULT_AUDIT,
		PMG_FAULT_CONTAIN,
	};
	int ok = 1;
	unsigned i;

	for (i = 0; i < 4; i++)
		CHECK(ok, _pmg_mode_parse(names[i]) == modes[i]);
	tap_ok(ok, "mode_parse: strict, relaxed, audit, contain are "
	       "PMG_FAULT_STRICT, _RELAXED, _AUDIT, _CONTAIN");

	ok = 1;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (_pmg_mode_parse(bad[i]) != -EINVAL) {
			tap_diag("mode_parse(\"%s\") = %d", bad[i],
				 _pmg_mode_parse(bad[i]));
			ok = 0;
		}
	tap_ok(ok, "mode_parse rejects \"\", \"STRICT\", \"strict \" and "
	       "near misses with -EINVAL");
	tap_ok(_pmg_mode_parse(NULL) == -EINVAL,
	       "mode_parse(NULL) is -EINVAL");
	tap_ok(_pmg_mode_parse("unknown") == -EINVAL &&
	       _pmg_mode_parse("off") == -EINVAL,
	       "mode_parse does not accept \"unknown\" or \"off\"");
}

/* ---- string helpers ---- */

/*
 * _pmg_utoa(@v, @base) into a buffer of @size bytes (@size < 32, the rest
 * of the buffer 'X'): it must write @want, return strlen(@want) and leave
 * the byte after the buffer alone.
 */
static int utoa_gives(uint64_t v, unsigned base, size_t size,
		      const char *want)
{
	char buf[32];
	size_t n;

	memset(buf, 'X', sizeof(buf));
	n = _pmg_utoa(v, base, buf, size);
	if (n == strlen(want) && !strcmp(buf, want) && buf[size] == 'X')
		return 1;
	tap_diag("utoa(%llu, %u, size %zu) = %zu, \"%.*s\": want \"%s\"",
		 (unsigned long long)v, base, size, n, (int)size, buf, want);
	return 0;
}
static void test_strings(void)
{
	char buf[32];
	size_t n;
	int ok;

	ok = 1;
	memset(buf, 'X', sizeof(buf));
	n = _pmg_strlcpy(buf, "hello", sizeof(buf));
	CHECK(ok, n == 5 && !strcmp(buf, "hello") && buf[6] == 'X');
	tap_ok(ok, "strlcpy that fits copies and returns the length");

	ok = 1;
	memset(buf, 'X', sizeof(buf));
	n = _pmg_strlcpy(buf, "hello", 3);
	CHECK(ok, n == 5 && !strcmp(buf, "he") && buf[3] == 'X');
	memset(buf, 'X', sizeof(buf));
	n = _pmg_strlcpy(buf, "hello", 5);
	CHECK(ok, n == 5 && !strcmp(buf, "hell") && buf[5] == 'X');
	memset(buf, 'X', sizeof(buf));
	n = _pmg_strlcpy(buf, "hello", 6);
	CHECK(ok, n == 5 && !strcmp(buf, "hello") && buf[6] == 'X');
	tap_ok(ok, "strlcpy truncates, terminates, returns the source "
	       "length, writes nothing past size");

	ok = 1;
	memset(buf, 'X', sizeof(buf));
	n = _pmg_strlcpy(buf, "hello", 1);
	CHECK(ok, n == 5 && buf[0] == '\0' && buf[1] == 'X');
	memset(buf, 'X', sizeof(buf));
	n = _pmg_strlcpy(buf, "hello", 0);
	CHECK(ok, n == 5 && buf[0] == 'X');
	n = _pmg_strlcpy(buf, "", sizeof(buf));
	CHECK(ok, n == 0 && buf[0] == '\0');
	tap_ok(ok, "strlcpy with size 1 writes only NUL, size 0 writes "
	       "nothing, empty source");

	ok = 1;
	CHECK(ok, utoa_gives(0, 10, 24, "0"));
	CHECK(ok, utoa_gives(0, 16, 24, "0"));
	tap_ok(ok, "utoa(0) is \"0\" in base 10 and 16");

	ok = 1;
	CHECK(ok, utoa_gives(1234567890, 10, 24, "1234567890"));
	CHECK(ok, utoa_gives(0xdeadbeef, 16, 24, "deadbeef"));
	CHECK(ok, utoa_gives(0x55555554, 16, 24, "55555554"));
	tap_ok(ok, "utoa base 10 and base 16 (lower case, no prefix)");

	ok = 1;
	CHECK(ok, utoa_gives(UINT64_MAX, 10, 24, "18446744073709551615"));
	CHECK(ok, utoa_gives(UINT64_MAX, 16, 24, "ffffffffffffffff"));
	tap_ok(ok, "utoa(UINT64_MAX) in base 10 (20 digits) and 16");

	ok = 1;
	CHECK(ok, utoa_gives(255, 8, 24, "255"));
	tap_ok(ok, "utoa with a base other than 16 uses base 10");

	ok = 1;
	CHECK(ok, utoa_gives(12345, 10, 4, "123"));
	CHECK(ok, utoa_gives(12345, 10, 6, "12345"));
	CHECK(ok, utoa_gives(0xabc, 16, 2, "a"));
	CHECK(ok, utoa_gives(UINT64_MAX, 10, 20, "1844674407370955161"));
	tap_ok(ok, "utoa into a small buffer keeps the leading digits, "
	       "terminates, returns strlen");

	ok = 1;
	CHECK(ok, utoa_gives(7, 10, 1, ""));
	memset(buf, 'X', sizeof(buf));
	(void)_pmg_utoa(12345, 10, buf, 0);
	CHECK(ok, buf[0] == 'X');
	tap_ok(ok, "utoa with size 1 writes only NUL; size 0 writes nothing");
}

int main(void)
{
	tap_init(PLAN);
	test_pkval();
	test_rights();
	test_table();
	test_ws();
	test_decide();
	test_names();
	test_strings();
	return tap_done();
}
