// SPDX-License-Identifier: MIT
/*
 * test-core: unit tests of the freestanding core (core/pmg_core.h,
 * core/core.c): register math, rights, the consumer table, window counts,
 * the fault-policy decision, mode and rights names, and the string
 * helpers.  Pure computation: the same results on every backend, with or
 * without PKU, so nothing here is skipped.
 */
#include <stdint.h>
#include <string.h>

#include "tap.h"
#include "../core/pmg_core.h"

#define PLAN 66

/*
 * The seeds' static consumers (the kernel's table, the Linux series'
 * include/linux/pks-keys.h): key 1
 * TEST, key 2 PMEM, both access-disabled, as is every unused key; key 0
 * read/write.  The core only does the math.
 */
#define SEEDS_KEY_TEST	1
#define SEEDS_KEY_PMEM	2
#define SEEDS_INIT_VALUE 0x55555554u

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
	return (bits & PMG_ARCH_PKR_AD_BIT) ? PMG_RIGHTS_AD : bits;
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
	CHECK(ok, pmg_window_rights(PMG_RIGHTS_RW, PMG_ACC_READ) ==
		  PMG_RIGHTS_RW);
	CHECK(ok, pmg_window_rights(PMG_RIGHTS_RW, PMG_ACC_WRITE) ==
		  PMG_RIGHTS_RW);
	CHECK(ok, pmg_window_rights(PMG_RIGHTS_WD, PMG_ACC_READ) ==
		  PMG_RIGHTS_WD);
	CHECK(ok, pmg_window_rights(PMG_RIGHTS_WD, PMG_ACC_WRITE) ==
		  PMG_RIGHTS_RW);
	CHECK(ok, pmg_window_rights(PMG_RIGHTS_AD, PMG_ACC_READ) ==
		  PMG_RIGHTS_WD);
	CHECK(ok, pmg_window_rights(PMG_RIGHTS_AD, PMG_ACC_WRITE) ==
		  PMG_RIGHTS_RW);
	tap_ok(ok, "window_rights: write gives RW, read gives WD (RW stays "
	       "RW)");
}

/* ---- the consumer table ---- */

static void test_table(void)
{
	struct pmg_core c;
	uint32_t v;
	int ok, k;

	v = PMG_PKR_RW_KEY(0);
	for (k = 1; k < PMG_NR_KEYS; k++)
		v |= PMG_PKR_AD_KEY(k);
	tap_ok(v == SEEDS_INIT_VALUE,
	       "key 0 RW, keys 1..15 AD is the seeds' PKS_INIT_VALUE "
	       "0x55555554 (got %#x)", (unsigned)v);

	memset(&c, 0xa5, sizeof(c));
	pmg_core_init(&c);
	ok = 1;
	CHECK(ok, pmg_core_init_value(&c) == 0x55555554u);
	CHECK(ok, c.key[0].used && c.key[0].dflt == PMG_RIGHTS_RW);
	CHECK(ok, pmg_core_count_used(&c) == 0);
	for (k = 1; k < PMG_NR_KEYS; k++)
		CHECK(ok, !c.key[k].used && c.key[k].cb == NULL);
	tap_ok(ok, "core_init: key 0 RW and in use, keys 1..15 free and AD");

	CHECK(ok, pmg_core_key_claim(&c, SEEDS_KEY_TEST, "pks_test",
				     PMG_RIGHTS_AD) == 0);
	CHECK(ok, pmg_core_key_claim(&c, SEEDS_KEY_PMEM, "pmem",
				     PMG_RIGHTS_AD) == 0);
	v = pmg_core_init_value(&c);
	tap_ok(ok && v == SEEDS_INIT_VALUE, "init_value with TEST and PMEM "
	       "claimed AD equals SEEDS_INIT_VALUE (got %#x)", (unsigned)v);

	ok = 1;
	CHECK(ok, pmg_core_key_release(&c, SEEDS_KEY_PMEM) == 0);
	CHECK(ok, pmg_core_key_claim(&c, SEEDS_KEY_PMEM, "pmem",
				     PMG_RIGHTS_WD) == 0);
	v = pmg_core_init_value(&c);
	CHECK(ok, v == (SEEDS_INIT_VALUE & ~PMG_PKR_MASK(SEEDS_KEY_PMEM)) +
		       PMG_PKR_WD_KEY(SEEDS_KEY_PMEM));
	tap_ok(ok, "init_value with PMEM claimed WD changes key 2 only "
	       "(%#x)", (unsigned)v);

	ok = 1;
	CHECK(ok, pmg_core_key_claim(&c, 0, "zero", PMG_RIGHTS_WD) ==
		  -PMG_E_INVAL);
	CHECK(ok, c.key[0].dflt == PMG_RIGHTS_RW);
	tap_ok(ok, "key_claim of key 0 is -EINVAL and key 0 stays RW");
	tap_ok(pmg_core_key_claim(&c, 16, "k16", PMG_RIGHTS_WD) ==
	       -PMG_E_INVAL && pmg_core_key_claim(&c, 1000, "k", 0) ==
	       -PMG_E_INVAL, "key_claim of key 16 (and 1000) is -EINVAL");

	ok = 1;
	CHECK(ok, pmg_core_key_claim(&c, 5, "five", PMG_RIGHTS_RW) == 0);
	CHECK(ok, pmg_core_key_claim(&c, 5, "again", PMG_RIGHTS_AD) ==
		  -PMG_E_BUSY);
	CHECK(ok, -PMG_E_BUSY == -16 && !strcmp(c.key[5].name, "five") &&
		  c.key[5].dflt == PMG_RIGHTS_RW);
	tap_ok(ok, "double key_claim is -EBUSY (-16) and keeps the first "
	       "claim");

	ok = 1;
	CHECK(ok, pmg_core_key_claim(&c, 6, "six", 3) == -PMG_E_INVAL);
	CHECK(ok, pmg_core_key_claim(&c, 6, "six", 4) == -PMG_E_INVAL);
	CHECK(ok, pmg_core_key_claim(&c, 6, "six", ~0u) == -PMG_E_INVAL);
	CHECK(ok, !c.key[6].used);
	tap_ok(ok, "key_claim with rights 3, 4, ~0 is -EINVAL and claims "
	       "nothing");

	ok = 1;
	CHECK(ok, pmg_core_key_release(&c, 7) == -PMG_E_NOENT);
	CHECK(ok, -PMG_E_NOENT == -2);
	CHECK(ok, pmg_core_key_release(&c, 0) == -PMG_E_INVAL);
	CHECK(ok, pmg_core_key_release(&c, 16) == -PMG_E_INVAL);
	CHECK(ok, c.key[0].used);
	tap_ok(ok, "key_release: unclaimed -ENOENT, key 0 and 16 -EINVAL");

	ok = 1;
	CHECK(ok, pmg_core_key_release(&c, 5) == 0);
	CHECK(ok, pmg_core_key_release(&c, 5) == -PMG_E_NOENT);
	CHECK(ok, !c.key[5].used && c.key[5].dflt == PMG_RIGHTS_AD &&
		  c.key[5].name[0] == '\0');
	CHECK(ok, pmg_core_key_claim(&c, 5, NULL, PMG_RIGHTS_WD) == 0);
	CHECK(ok, c.key[5].name[0] == '\0');
	tap_ok(ok, "release twice is -ENOENT; released key is AD and "
	       "claimable again (NULL name reads as \"\")");

	ok = 1;
	CHECK(ok, pmg_core_key_claim(&c, 9,
		  "0123456789abcdef0123456789abcdefXYZ", PMG_RIGHTS_WD) == 0);
	CHECK(ok, strlen(c.key[9].name) == PMG_KEY_NAME_MAX - 1);
	CHECK(ok, !strcmp(c.key[9].name, "0123456789abcdef0123456789abcde"));
	tap_ok(ok, "key_claim truncates a long name to 31 characters");

	/* claimed now: 1 AD, 2 WD, 5 WD, 9 WD */
	tap_ok(pmg_core_count_used(&c) == 4, "count_used counts claimed "
	       "keys 1..15 only (4, got %d)", pmg_core_count_used(&c));

	ok = 1;
	CHECK(ok, pmg_core_set_callback(&c, 0, NULL) == -PMG_E_INVAL);
	CHECK(ok, pmg_core_set_callback(&c, 16, NULL) == -PMG_E_INVAL);
	CHECK(ok, pmg_core_set_callback(&c, 11, NULL) == -PMG_E_NOENT);
	tap_ok(ok, "set_callback: key 0/16 -EINVAL, unclaimed -ENOENT");

	/* apply_defaults: only claimed keys 1..15 change */
	ok = 1;
	for (k = 0; k < (int)NPKVALS; k++) {
		uint32_t in = pkvals[k], out = pmg_core_apply_defaults(&c, in);
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
	struct pmg_ws ws;
	int ok, i, rc;

	memset(&ws, 0, sizeof(ws));
	tap_ok(sizeof(ws) == 64, "struct pmg_ws is one 64-byte line");

	ok = 1;
	CHECK(ok, pmg_ws_open(&ws, 3, PMG_ACC_WRITE) == 0);
	CHECK(ok, pmg_ws_open(&ws, 3, PMG_ACC_WRITE) == 0);
	CHECK(ok, ws.w[3] == 2 && ws.r[3] == 0);
	CHECK(ok, pmg_ws_rights(&ws, 3, PMG_RIGHTS_WD) == PMG_RIGHTS_RW);
	CHECK(ok, pmg_ws_close(&ws, 3, PMG_ACC_WRITE) == 0);
	CHECK(ok, pmg_ws_rights(&ws, 3, PMG_RIGHTS_WD) == PMG_RIGHTS_RW);
	CHECK(ok, pmg_ws_close(&ws, 3, PMG_ACC_WRITE) == 0);
	CHECK(ok, ws.w[3] == 0);
	CHECK(ok, pmg_ws_rights(&ws, 3, PMG_RIGHTS_WD) == PMG_RIGHTS_WD);
	tap_ok(ok, "ws_open/close nest: rights RW until the outer close");

	ok = 1;
	CHECK(ok, pmg_ws_close(&ws, 3, PMG_ACC_WRITE) == -PMG_E_PERM);
	CHECK(ok, pmg_ws_close(&ws, 3, PMG_ACC_READ) == -PMG_E_PERM);
	CHECK(ok, ws.w[3] == 0 && ws.r[3] == 0);
	CHECK(ok, pmg_ws_open(&ws, 3, PMG_ACC_WRITE) == 0 && ws.w[3] == 1);
	CHECK(ok, pmg_ws_close(&ws, 3, PMG_ACC_WRITE) == 0 && ws.w[3] == 0);
	tap_ok(ok, "unbalanced ws_close is -EPERM and does not underflow");

	ok = 1;
	CHECK(ok, pmg_ws_open(&ws, 0, PMG_ACC_WRITE) == -PMG_E_INVAL);
	CHECK(ok, pmg_ws_open(&ws, 16, PMG_ACC_WRITE) == -PMG_E_INVAL);
	CHECK(ok, pmg_ws_close(&ws, 0, PMG_ACC_READ) == -PMG_E_INVAL);
	CHECK(ok, pmg_ws_close(&ws, 16, PMG_ACC_READ) == -PMG_E_INVAL);
	CHECK(ok, ws.w[0] == 0 && ws.r[0] == 0);
	tap_ok(ok, "ws_open/close on key 0 or 16 is -EINVAL");

	ok = 1;
	for (i = 0, rc = 0; i < 65535 && !rc; i++)
		rc = pmg_ws_open(&ws, 4, PMG_ACC_WRITE);
	CHECK(ok, rc == 0 && ws.w[4] == 65535);
	CHECK(ok, pmg_ws_open(&ws, 4, PMG_ACC_WRITE) == -PMG_E_OVERFLOW);
	CHECK(ok, ws.w[4] == 65535 && ws.r[4] == 0);
	for (i = 0, rc = 0; i < 65535 && !rc; i++)
		rc = pmg_ws_open(&ws, 4, PMG_ACC_READ);
	CHECK(ok, pmg_ws_open(&ws, 4, PMG_ACC_READ) == -PMG_E_OVERFLOW);
	CHECK(ok, ws.r[4] == 65535);
	CHECK(ok, ws.w[3] == 0 && ws.w[5] == 0 && ws.r[5] == 0);
	tap_ok(ok, "65535 nested windows fit; the next is -EOVERFLOW (75), "
	       "count kept");
	memset(&ws, 0, sizeof(ws));

	ok = 1;
	CHECK(ok, pmg_ws_rights(&ws, 7, PMG_RIGHTS_AD) == PMG_RIGHTS_AD);
	CHECK(ok, pmg_ws_rights(&ws, 7, PMG_RIGHTS_WD) == PMG_RIGHTS_WD);
	CHECK(ok, pmg_ws_rights(&ws, 7, PMG_RIGHTS_RW) == PMG_RIGHTS_RW);
	tap_ok(ok, "ws_rights with no window is the default");

	ok = 1;
	pmg_ws_open(&ws, 7, PMG_ACC_READ);
	CHECK(ok, pmg_ws_rights(&ws, 7, PMG_RIGHTS_AD) == PMG_RIGHTS_WD);
	CHECK(ok, pmg_ws_rights(&ws, 7, PMG_RIGHTS_WD) == PMG_RIGHTS_WD);
	CHECK(ok, pmg_ws_rights(&ws, 7, PMG_RIGHTS_RW) == PMG_RIGHTS_RW);
	CHECK(ok, pmg_ws_rights(&ws, 8, PMG_RIGHTS_AD) == PMG_RIGHTS_AD);
	tap_ok(ok, "ws_rights with a read window: WD (RW stays RW), other "
	       "keys unaffected");

	ok = 1;
	pmg_ws_open(&ws, 7, PMG_ACC_WRITE);
	CHECK(ok, pmg_ws_rights(&ws, 7, PMG_RIGHTS_AD) == PMG_RIGHTS_RW);
	pmg_ws_close(&ws, 7, PMG_ACC_WRITE);
	CHECK(ok, pmg_ws_rights(&ws, 7, PMG_RIGHTS_AD) == PMG_RIGHTS_WD);
	pmg_ws_close(&ws, 7, PMG_ACC_READ);
	CHECK(ok, pmg_ws_rights(&ws, 7, PMG_RIGHTS_AD) == PMG_RIGHTS_AD);
	tap_ok(ok, "ws_rights: write nested in read is RW, then back to WD, "
	       "then AD");

	{
		struct pmg_core c;
		uint32_t v;
		int k;

		pmg_core_init(&c);
		pmg_core_key_claim(&c, 3, "a", PMG_RIGHTS_AD);
		pmg_core_key_claim(&c, 4, "b", PMG_RIGHTS_WD);
		pmg_ws_open(&ws, 3, PMG_ACC_READ);
		pmg_ws_open(&ws, 4, PMG_ACC_WRITE);
		pmg_ws_open(&ws, 6, PMG_ACC_WRITE);	/* unclaimed */
		v = 0xffffffffu;
		for (k = 1; k < PMG_NR_KEYS; k++)
			if (c.key[k].used)
				v = pmg_pkval_update(v, (unsigned)k,
					pmg_ws_rights(&ws, (unsigned)k,
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

static int decide(struct pmg_core *c, struct pmg_fault *f)
{
	pmg_core_fault_decide(c, f);
	return f->action;
}

/* new_pkval is saved_pkval with only @key's bits changed, to @rights. */
static int only_key(const struct pmg_fault *f, unsigned key, unsigned rights)
{
	return f->new_pkval == pmg_pkval_update(f->saved_pkval, key, rights);
}

static void test_decide(void)
{
	struct pmg_core c;
	struct pmg_fault f;
	uint32_t init;
	int ok, i;

	pmg_core_init(&c);
	pmg_core_key_claim(&c, 3, "wd", PMG_RIGHTS_WD);
	pmg_core_key_claim(&c, 4, "ad", PMG_RIGHTS_AD);
	pmg_core_key_claim(&c, 5, "wd2", PMG_RIGHTS_WD);
	init = pmg_core_init_value(&c);

	ok = 1;
	f = mkfault(7, PMG_ACC_WRITE, init, PMG_MODE_STRICT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_NOT_OURS);
	CHECK(ok, f.new_pkval == f.saved_pkval);
	f = mkfault(0, PMG_ACC_WRITE, init, PMG_MODE_STRICT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_NOT_OURS);
	f = mkfault(16, PMG_ACC_READ, init, PMG_MODE_AUDIT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_NOT_OURS);
	tap_ok(ok, "fault on an unclaimed key, key 0 or key 16: NOT_OURS, "
	       "register unchanged");

	/* A register that predates the key: AD where the default is WD. */
	ok = 1;
	f = mkfault(3, PMG_ACC_READ, 0x55555554u, PMG_MODE_STRICT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_SYNC);
	CHECK(ok, only_key(&f, 3, PMG_RIGHTS_WD));
	CHECK(ok, f.new_pkval == 0x55555554u - PMG_PKR_AD_KEY(3) +
		  PMG_PKR_WD_KEY(3));
	tap_ok(ok, "stale register (AD, default WD) + read: SYNC to WD for "
	       "that key only (%#x)", (unsigned)f.new_pkval);

	/* A port whose register is never stale opts out of the sync. */
	ok = 1;
	f = mkfault(3, PMG_ACC_READ, 0x55555554u, PMG_MODE_STRICT);
	f.no_sync = true;
	CHECK(ok, decide(&c, &f) == PMG_ACT_STRICT);
	CHECK(ok, f.new_pkval == 0x55555554u);
	tap_ok(ok, "no_sync: the same fault is a stray access (strict), "
	       "register unchanged");

	/* The register already allows it: retrying would fault forever. */
	ok = 1;
	f = mkfault(3, PMG_ACC_READ, init, PMG_MODE_STRICT);
	CHECK(ok, decide(&c, &f) != PMG_ACT_SYNC);
	f = mkfault(3, PMG_ACC_WRITE, pmg_pkval_update(init, 3, PMG_RIGHTS_RW),
		    PMG_MODE_STRICT);
	CHECK(ok, decide(&c, &f) != PMG_ACT_SYNC);
	tap_ok(ok, "a fault the saved register already allows is never a "
	       "SYNC (no retry loop)");

	ok = 1;
	f = mkfault(3, PMG_ACC_WRITE, 0x55555554u, PMG_MODE_STRICT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_STRICT);
	CHECK(ok, f.new_pkval == f.saved_pkval);
	tap_ok(ok, "stale register + write on a WD default is stray, not a "
	       "sync (strict: STRICT)");

	ok = 1;
	f = mkfault(3, PMG_ACC_WRITE, init, PMG_MODE_STRICT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_STRICT);
	CHECK(ok, f.new_pkval == f.saved_pkval);
	f = mkfault(3, PMG_ACC_WRITE, init, 7);
	CHECK(ok, decide(&c, &f) == PMG_ACT_STRICT);
	tap_ok(ok, "write on WD default, strict (and unknown mode 7): "
	       "STRICT, nothing granted");

	ok = 1;
	f = mkfault(3, PMG_ACC_WRITE, init, PMG_MODE_RELAXED);
	CHECK(ok, decide(&c, &f) == PMG_ACT_RELAX_REPORT);
	CHECK(ok, only_key(&f, 3, PMG_RIGHTS_RW));
	tap_ok(ok, "relaxed, first stray write on the key: RELAX_REPORT, "
	       "RW for that key only");

	ok = 1;
	for (i = 0; i < 3; i++) {
		f = mkfault(3, PMG_ACC_WRITE, init, PMG_MODE_RELAXED);
		CHECK(ok, decide(&c, &f) == PMG_ACT_RELAX_SILENT);
		CHECK(ok, only_key(&f, 3, PMG_RIGHTS_RW));
	}
	tap_ok(ok, "relaxed, later stray writes on the key: RELAX_SILENT "
	       "(warned once)");

	ok = 1;
	f = mkfault(5, PMG_ACC_WRITE, init, PMG_MODE_RELAXED);
	CHECK(ok, decide(&c, &f) == PMG_ACT_RELAX_REPORT);
	f = mkfault(5, PMG_ACC_WRITE, init, PMG_MODE_RELAXED);
	CHECK(ok, decide(&c, &f) == PMG_ACT_RELAX_SILENT);
	tap_ok(ok, "relaxed warns once per key: a second key reports on its "
	       "own first fault");

	ok = 1;
	for (i = 0; i < 3; i++) {
		f = mkfault(3, PMG_ACC_WRITE, init, PMG_MODE_AUDIT);
		CHECK(ok, decide(&c, &f) == PMG_ACT_AUDIT);
		CHECK(ok, only_key(&f, 3, PMG_RIGHTS_RW));
	}
	tap_ok(ok, "audit: AUDIT every time, new register RW for that key "
	       "only");

	ok = 1;
	f = mkfault(4, PMG_ACC_READ, init, PMG_MODE_AUDIT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_AUDIT);
	CHECK(ok, only_key(&f, 4, PMG_RIGHTS_WD));
	f = mkfault(4, PMG_ACC_READ, init, PMG_MODE_STRICT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_STRICT);
	tap_ok(ok, "stray read of an AD key: audit grants WD only (not RW); "
	       "strict stops");

	/* Callbacks */
	ok = 1;
	memset(&cl, 0, sizeof(cl));
	cl.answer = true;
	CHECK(ok, pmg_core_set_callback(&c, 3, test_cb) == 0);
	f = mkfault(3, PMG_ACC_WRITE, init, PMG_MODE_STRICT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_GRANT);
	CHECK(ok, only_key(&f, 3, PMG_RIGHTS_RW));
	CHECK(ok, cl.calls == 1);
	tap_ok(ok, "callback returning true: GRANT with RW for that key, "
	       "even in strict mode");
	tap_ok(cl.addr == 0x7000123450ull && cl.ip == 0x401234 &&
	       cl.key == 3 && cl.acc == PMG_ACC_WRITE,
	       "callback received the fault's addr, ip, key and access");

	ok = 1;
	cl.answer = false;
	cl.calls = 0;
	f = mkfault(3, PMG_ACC_WRITE, init, PMG_MODE_STRICT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_STRICT);
	f = mkfault(3, PMG_ACC_WRITE, init, PMG_MODE_AUDIT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_AUDIT);
	CHECK(ok, cl.calls == 2);
	tap_ok(ok, "callback returning false: the mode decides (STRICT, "
	       "AUDIT)");

	ok = 1;
	cl.calls = 0;
	f = mkfault(3, PMG_ACC_READ, 0x55555554u, PMG_MODE_STRICT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_SYNC);
	CHECK(ok, cl.calls == 0);
	CHECK(ok, pmg_core_set_callback(&c, 3, NULL) == 0);
	f = mkfault(3, PMG_ACC_WRITE, init, PMG_MODE_STRICT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_STRICT);
	CHECK(ok, cl.calls == 0);
	tap_ok(ok, "a sync does not call the callback; a cleared callback is "
	       "not called");

	/* The kernel's case: a key whose default allows access, closed
	 * explicitly (pks_mk_noaccess()); only no_sync keeps it closed. */
	ok = 1;
	pmg_core_key_claim(&c, 6, "rw", PMG_RIGHTS_RW);
	f = mkfault(6, PMG_ACC_READ, pmg_pkval_update(init, 6, PMG_RIGHTS_AD),
		    PMG_MODE_STRICT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_SYNC);
	CHECK(ok, only_key(&f, 6, PMG_RIGHTS_RW));
	f = mkfault(6, PMG_ACC_READ, pmg_pkval_update(init, 6, PMG_RIGHTS_AD),
		    PMG_MODE_STRICT);
	f.no_sync = true;
	CHECK(ok, decide(&c, &f) == PMG_ACT_STRICT);
	tap_ok(ok, "RW-default key closed explicitly: SYNC back to RW, but "
	       "with no_sync a stray access (the kernel's noaccess holds)");

	ok = 1;
	f = mkfault(4, PMG_ACC_READ, init, PMG_MODE_RELAXED);
	f.no_sync = true;
	CHECK(ok, decide(&c, &f) == PMG_ACT_RELAX_REPORT ||
		  f.action == PMG_ACT_RELAX_SILENT);
	CHECK(ok, only_key(&f, 4, PMG_RIGHTS_WD));
	tap_ok(ok, "relaxed stray read of an AD key grants what the read "
	       "needs: WD (RO), not RW");

	ok = 1;
	CHECK(ok, pmg_rights_allow(PMG_RIGHTS_RW, PMG_ACC_WRITE));
	CHECK(ok, pmg_rights_allow(PMG_RIGHTS_WD, PMG_ACC_READ));
	CHECK(ok, !pmg_rights_allow(PMG_RIGHTS_WD, PMG_ACC_WRITE));
	CHECK(ok, !pmg_rights_allow(PMG_RIGHTS_AD, PMG_ACC_READ));
	CHECK(ok, !pmg_rights_allow(PMG_ARCH_PKR_AD_BIT | PMG_ARCH_PKR_WD_BIT,
				    PMG_ACC_READ));
	CHECK(ok, pmg_pkval_rights(0x3u << PMG_PKR_SHIFT(4), 4) ==
		  PMG_RIGHTS_AD);
	tap_ok(ok, "rights_allow / pkval_rights through the arch layout: "
	       "AD|WD reads as no access");

	ok = 1;
	pmg_core_key_release(&c, 3);
	f = mkfault(3, PMG_ACC_WRITE, init, PMG_MODE_AUDIT);
	CHECK(ok, decide(&c, &f) == PMG_ACT_NOT_OURS);
	pmg_core_key_claim(&c, 3, "wd", PMG_RIGHTS_WD);
	f = mkfault(3, PMG_ACC_WRITE, init, PMG_MODE_RELAXED);
	CHECK(ok, decide(&c, &f) == PMG_ACT_RELAX_REPORT);
	tap_ok(ok, "released key: NOT_OURS; reclaimed key reports again in "
	       "relaxed mode");
}

/* ---- names ---- */

static void test_names(void)
{
	static const char *const bad[] = {
		"", "STRICT", "strict ", " strict", "stric", "strictx",
		"Relaxed", "audit\n",
	};
	int ok = 1;
	unsigned m, i;

	for (m = 0; m < 3; m++)
		CHECK(ok, pmg_mode_parse(pmg_mode_name(m)) == (int)m);
	CHECK(ok, !strcmp(pmg_mode_name(PMG_MODE_STRICT), "strict"));
	CHECK(ok, !strcmp(pmg_mode_name(PMG_MODE_RELAXED), "relaxed"));
	CHECK(ok, !strcmp(pmg_mode_name(PMG_MODE_AUDIT), "audit"));
	tap_ok(ok, "mode_name/mode_parse round trip for strict, relaxed, "
	       "audit");

	tap_ok(!strcmp(pmg_mode_name(3), "unknown") &&
	       !strcmp(pmg_mode_name(~0u), "unknown"),
	       "mode_name of an unknown mode is \"unknown\"");

	ok = 1;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (pmg_mode_parse(bad[i]) != -PMG_E_INVAL) {
			tap_diag("mode_parse(\"%s\") = %d", bad[i],
				 pmg_mode_parse(bad[i]));
			ok = 0;
		}
	tap_ok(ok, "mode_parse rejects \"\", \"STRICT\", \"strict \" and "
	       "near misses with -EINVAL");
	tap_ok(pmg_mode_parse(NULL) == -PMG_E_INVAL,
	       "mode_parse(NULL) is -EINVAL");
	tap_ok(pmg_mode_parse("unknown") == -PMG_E_INVAL,
	       "mode_parse does not accept mode_name's \"unknown\"");

	ok = 1;
	CHECK(ok, !strcmp(pmg_rights_name(PMG_RIGHTS_RW), "read-write"));
	CHECK(ok, !strcmp(pmg_rights_name(PMG_RIGHTS_WD), "write-disabled"));
	CHECK(ok, !strcmp(pmg_rights_name(PMG_RIGHTS_AD), "access-disabled"));
	CHECK(ok, !strcmp(pmg_rights_name(3), "access-disabled"));
	CHECK(ok, !strcmp(pmg_rights_name(6), "write-disabled"));
	tap_ok(ok, "rights_name: RW, WD, AD, AD|WD reads as AD, high bits "
	       "ignored");
}

/* ---- string helpers ---- */

/*
 * pmg_utoa(@v, @base) into a buffer of @size bytes (@size < 32, the rest
 * of the buffer 'X'): it must write @want, return strlen(@want) and leave
 * the byte after the buffer alone.
 */
static int utoa_gives(uint64_t v, unsigned base, size_t size,
		      const char *want)
{
	char buf[32];
	size_t n;

	memset(buf, 'X', sizeof(buf));
	n = pmg_utoa(v, base, buf, size);
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
	n = pmg_strlcpy(buf, "hello", sizeof(buf));
	CHECK(ok, n == 5 && !strcmp(buf, "hello") && buf[6] == 'X');
	tap_ok(ok, "strlcpy that fits copies and returns the length");

	ok = 1;
	memset(buf, 'X', sizeof(buf));
	n = pmg_strlcpy(buf, "hello", 3);
	CHECK(ok, n == 5 && !strcmp(buf, "he") && buf[3] == 'X');
	memset(buf, 'X', sizeof(buf));
	n = pmg_strlcpy(buf, "hello", 5);
	CHECK(ok, n == 5 && !strcmp(buf, "hell") && buf[5] == 'X');
	memset(buf, 'X', sizeof(buf));
	n = pmg_strlcpy(buf, "hello", 6);
	CHECK(ok, n == 5 && !strcmp(buf, "hello") && buf[6] == 'X');
	tap_ok(ok, "strlcpy truncates, terminates, returns the source "
	       "length, writes nothing past size");

	ok = 1;
	memset(buf, 'X', sizeof(buf));
	n = pmg_strlcpy(buf, "hello", 1);
	CHECK(ok, n == 5 && buf[0] == '\0' && buf[1] == 'X');
	memset(buf, 'X', sizeof(buf));
	n = pmg_strlcpy(buf, "hello", 0);
	CHECK(ok, n == 5 && buf[0] == 'X');
	n = pmg_strlcpy(buf, "", sizeof(buf));
	CHECK(ok, n == 0 && buf[0] == '\0');
	tap_ok(ok, "strlcpy with size 1 writes only NUL, size 0 writes "
	       "nothing, empty source");

	ok = 1;
	CHECK(ok, pmg_streq("abc", "abc") && pmg_streq("", ""));
	CHECK(ok, !pmg_streq("abc", "abd") && !pmg_streq("abc", "ab") &&
		  !pmg_streq("ab", "abc") && !pmg_streq("", "a"));
	tap_ok(ok, "streq: equal, differing, prefixes, empty");

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
	(void)pmg_utoa(12345, 10, buf, 0);
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
