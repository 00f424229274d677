// SPDX-License-Identifier: MIT
/*
 * A page the program itself made read-only (or PROT_NONE, or unmapped)
 * inside a protected range, under audit and contain: the program's own
 * SIGSEGV handler gets the fault exactly as the CPU gives it without
 * pmguard.  Two pages of one domain, [P0][P1], the program's mprotect()
 * of P1 (seen through the shared library's interposed mprotect(),
 * src/interpose.c, remembered in src/caps.c):
 *  - a single store into P1: SEGV_ACCERR at the store's address; a
 *    store from P0 across into P1: the fault the CPU gives on two pages
 *    without pmguard (measured), nothing written;
 *  - rep stosb / rep movsb from P0 into P1: the instruction stops at
 *    P1's first byte (rdi, rsi, rcx as the CPU leaves them there, rip
 *    at the instruction), SEGV_ACCERR at P1; P0's bytes before it are
 *    written in audit mode, kept in contain mode (the mode's promise);
 *  - P1 PROT_NONE: the same, and a read of it faults for the program;
 *  - P0 read-only, std; rep stosq from P1 down into it: stops at P0's
 *    last element;
 *  - P1 unmapped behind the library's back (a raw munmap(2), as the
 *    static library never sees one): a store across into it faults as
 *    without pmguard (SEGV_MAPERR), rep stosb stops there.
 * P1's bytes never change.  The program's handler records the fault and
 * leaves by siglongjmp().  Linked with the shared library (the
 * interposers); runs on both backends (mprotect here, PKU in the guest).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <pmguard.h>

#include "tap.h"

#define PAGE 4096
#define TAIL 0x100	/* P0's bytes a rep run writes before P1 */

static struct pmg_domain *dom;
static char *P0, *P1, *U;
static uint8_t pristine[2 * PAGE];

/* what the program's handler saw */
static sigjmp_buf jb;
static volatile sig_atomic_t got;
static volatile int g_code;
static void *volatile g_addr;
static volatile uint64_t g_di, g_si, g_cx;
static volatile uint16_t g_op;	/* the first two bytes at rip */

static void prog_segv(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	const uint8_t *ip = (const uint8_t *)uc->uc_mcontext.gregs[REG_RIP];

	(void)sig;
	got++;
	g_code = si->si_code;
	g_addr = si->si_addr;
	g_di = (uint64_t)uc->uc_mcontext.gregs[REG_RDI];
	g_si = (uint64_t)uc->uc_mcontext.gregs[REG_RSI];
	g_cx = (uint64_t)uc->uc_mcontext.gregs[REG_RCX];
	g_op = (uint16_t)(ip[0] | ip[1] << 8);
	siglongjmp(jb, 1);
}

static void arm(void)
{
	got = 0;
	g_code = 0;
	g_addr = NULL;
	g_di = g_si = g_cx = 0;
	g_op = 0;
}

/* P0 and P1 back to their reference bytes (through a window; P1 made
 * writable by the program for it, then given back @cur_prot), so that a
 * check that fails leaves the next ones their own verdicts. */
static int cur_prot = PROT_READ | PROT_WRITE;
static bool p1_gone;

static void refill(void)
{
	if (!p1_gone && mprotect(P1, PAGE, PROT_READ | PROT_WRITE))
		tap_diag("refill: mprotect(P1, rw): %s", strerror(errno));
	pmg_open(dom, PMG_WRITE);
	memcpy(P0, pristine, p1_gone ? PAGE : 2 * PAGE);
	pmg_close(dom, PMG_WRITE);
	if (!p1_gone && mprotect(P1, PAGE, cur_prot))
		tap_diag("refill: mprotect(P1): %s", strerror(errno));
}

/* Bytes of P1 as the program may read them now (PROT_NONE: made
 * readable for the look, then put back). */
static bool p1_intact(int prot)
{
	bool same;

	if (prot == PROT_NONE && mprotect(P1, PAGE, PROT_READ))
		return false;
	same = !memcmp(P1, pristine + PAGE, PAGE);
	if (prot == PROT_NONE && mprotect(P1, PAGE, PROT_NONE))
		return false;
	return same;
}

/* P0's tail [PAGE - TAIL, PAGE): each byte @v (written) or pristine. */
static bool tail_is(int v)
{
	unsigned i;

	for (i = PAGE - TAIL; i < PAGE; i++)
		if ((uint8_t)P0[i] != (v < 0 ? pristine[i] : (uint8_t)v))
			return false;
	return !memcmp(P0, pristine, PAGE - TAIL);
}

/* Contained writes, or with @ours the faults handled as pmguard's. */
static uint64_t stat_of(bool ours)
{
	struct pmg_stats st;

	pmg_stats_get(&st, sizeof(st));
	return ours ? st.faults + st.strays : st.contained;
}

static const char *mode_name(int mode)
{
	return mode == PMG_FAULT_AUDIT ? "audit" : "contain";
}

/* A one-byte store at @a, a one-byte load when @load; the program's
 * handler leaves to here. */
static void access_at(char *a, bool load)
{
	arm();
	if (sigsetjmp(jb, 1))
		return;
	if (load)
		(void)*(volatile char *)a;
	else
		__asm__ volatile("movb $0x5a, (%0)" : : "r"(a) : "memory");
}

/* An 8-byte store at @a (across a page boundary); the program's handler
 * leaves to here. */
static void store8_at(char *a)
{
	arm();
	if (sigsetjmp(jb, 1))
		return;
	__asm__ volatile("movq %1, (%0)"
			 : : "r"(a), "r"(0x1122334455667788ull) : "memory");
}

/*
 * An 8-byte store from P0 across into P1: the CPU writes none of it and
 * faults at P1's part.  Where it reports that fault is the CPU's (the
 * first byte of P1, on the machines seen): measured here on two pages
 * of the program's own, without pmguard, and compared.
 */
static void t_straddle(int mode, int prot, const char *pname)
{
	char *ref = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void *want = NULL;
	int ok = 1, want_code = 0;
	uint64_t n0, f0;

	if (ref == MAP_FAILED ||
	    (p1_gone ? munmap(ref + PAGE, PAGE)
		     : mprotect(ref + PAGE, PAGE, prot))) {
		tap_skip("store across into the program's page",
			 "no reference mapping");
		return;
	}
	store8_at(ref + PAGE - 4);
	if (got == 1 && g_addr) {
		want = P1 + ((char *)g_addr - (ref + PAGE));
		want_code = g_code;
	}
	munmap(ref, 2 * PAGE);
	n0 = stat_of(false);
	f0 = stat_of(true);
	store8_at(P1 - 4);
	/* no write happened: none contained (audit reports the stray
	 * access to P0 it let through, as any; contain, knowing the CPU
	 * faults on the program's page, counts no fault of its own) */
	CHECK(ok, stat_of(false) == n0);
	CHECK(ok, mode == PMG_FAULT_AUDIT || p1_gone || stat_of(true) == f0);
	CHECK(ok, want != NULL);
	CHECK(ok, got == 1);
	CHECK(ok, g_code == want_code);
	CHECK(ok, g_addr == want);
	CHECK(ok, p1_gone || p1_intact(prot));
	CHECK(ok, !memcmp(P0, pristine, PAGE));
	if (!ok)
		tap_diag("signals %d si_code %d si_addr %p (want %d at %p)",
			 (int)got, g_code, g_addr, want_code, want);
	tap_ok(ok, "%s, P1 %s by the program: an 8-byte store from P0 "
	       "across into P1 faults for the program as without pmguard "
	       "(si_code %d), nothing written", mode_name(mode), pname,
	       want_code);
	refill();
}

static void t_store(int mode, int prot, const char *pname)
{
	char *a = P1 + 0x10;
	uint64_t n0 = stat_of(false), f0 = stat_of(true);
	int ok = 1;

	access_at(a, false);
	/* not pmguard's at all: no fault of its own, nothing contained */
	CHECK(ok, stat_of(false) == n0 && stat_of(true) == f0);
	CHECK(ok, got == 1);
	CHECK(ok, g_code == SEGV_ACCERR);
	CHECK(ok, g_addr == a);
	CHECK(ok, p1_intact(prot));
	CHECK(ok, !memcmp(P0, pristine, PAGE));
	if (!ok)
		tap_diag("signals %d si_code %d si_addr %p (want %p)", (int)got,
			 g_code, g_addr, (void *)a);
	tap_ok(ok, "%s, P1 %s by the program: a store into it is the "
	       "program's SIGSEGV (SEGV_ACCERR at the address), nothing "
	       "written", mode_name(mode), pname);
	refill();
}

/* The rep run's verdict: stopped at P1 as the CPU stops. */
static void rep_verdict(int mode, int prot, const char *pname,
			const char *what, int code, uint64_t si_want,
			uint16_t op, int written)
{
	int ok = 1;

	CHECK(ok, got == 1);
	CHECK(ok, g_code == code);
	CHECK(ok, g_addr == P1);
	CHECK(ok, g_di == (uint64_t)(uintptr_t)P1);
	CHECK(ok, g_cx == TAIL);
	CHECK(ok, !si_want || g_si == si_want);
	CHECK(ok, g_op == op);
	CHECK(ok, code == SEGV_MAPERR || p1_intact(prot));
	CHECK(ok, tail_is(mode == PMG_FAULT_AUDIT ? written : -1));
	if (!ok)
		tap_diag("signals %d si_code %d si_addr %p (want %p) rdi %#llx "
			 "rcx %llu rsi %#llx op %#x; P0 tail[0] %#x", (int)got,
			 g_code, g_addr, (void *)P1, (unsigned long long)g_di,
			 (unsigned long long)g_cx, (unsigned long long)g_si,
			 g_op, (uint8_t)P0[PAGE - TAIL]);
	tap_ok(ok, "%s, P1 %s by the program: %s from P0 into P1 stops at "
	       "P1 (rdi/rsi/rcx there, si_code %d), P0's %d bytes before it "
	       "%s, P1 unchanged", mode_name(mode), pname, what, code, TAIL,
	       mode == PMG_FAULT_AUDIT ? "written" : "kept");
}

static void t_rep_stos(int mode, int prot, const char *pname, int code)
{
	char *volatile di = P1 - TAIL;
	volatile uint64_t c = 2 * TAIL;

	arm();
	if (!sigsetjmp(jb, 1)) {
		char *d = di;
		uint64_t n = c;

		__asm__ volatile("cld\n\trep stosb"
				 : "+D"(d), "+c"(n) : "a"(0xa5) : "memory");
	}
	rep_verdict(mode, prot, pname, "rep stosb", code, 0, 0xaaf3, 0xa5);
	refill();
}

/* std; rep stosq of 0xa5 bytes from @d down, @n elements; cld after. */
static void stos_back(char *d, uint64_t n)
{
	arm();
	if (sigsetjmp(jb, 1)) {
		__asm__ volatile("cld");
		return;
	}
	__asm__ volatile("std\n\trep stosq\n\tcld"
			 : "+D"(d), "+c"(n)
			 : "a"(0xa5a5a5a5a5a5a5a5ull)
			 : "memory");
}

static void t_rep_movs(int mode, int prot, const char *pname)
{
	char *src = U;

	memset(U, 0x3c, 2 * TAIL);
	arm();
	if (!sigsetjmp(jb, 1)) {
		char *d = P1 - TAIL;
		const char *s = src;
		uint64_t n = 2 * TAIL;

		__asm__ volatile("cld\n\trep movsb"
				 : "+D"(d), "+S"(s), "+c"(n) : : "memory");
	}
	rep_verdict(mode, prot, pname, "rep movsb", SEGV_ACCERR,
		    (uint64_t)(uintptr_t)(src + TAIL), 0xa4f3, 0x3c);
	refill();
}

/* P1 PROT_NONE: a read of it (P0's domain readable) is the program's. */
static void t_read_none(int mode)
{
	char *a = P1 + 0x20;
	int ok = 1;

	access_at(a, true);
	CHECK(ok, got == 1 && g_code == SEGV_ACCERR && g_addr == (void *)a);
	tap_ok(ok, "%s, P1 PROT_NONE by the program: a read of it is the "
	       "program's SIGSEGV (SEGV_ACCERR at the address)",
	       mode_name(mode));
}

static void with_prot(int prot, const char *pname)
{
	static const int modes[] = { PMG_FAULT_AUDIT, PMG_FAULT_CONTAIN };
	unsigned m;

	cur_prot = prot;
	if (mprotect(P1, PAGE, prot))
		tap_diag("mprotect(P1, %s): %s", pname, strerror(errno));
	for (m = 0; m < 2; m++) {
		pmg_set_fault_mode(modes[m]);
		t_store(modes[m], prot, pname);
		t_straddle(modes[m], prot, pname);
		t_rep_stos(modes[m], prot, pname, SEGV_ACCERR);
		t_rep_movs(modes[m], prot, pname);
		if (prot == PROT_NONE)
			t_read_none(modes[m]);
	}
	pmg_set_fault_mode(PMG_FAULT_STRICT);
	cur_prot = PROT_READ | PROT_WRITE;
	if (mprotect(P1, PAGE, PROT_READ | PROT_WRITE))
		tap_diag("mprotect(P1, rw): %s", strerror(errno));
}

/*
 * Downward (DF set), 8-byte elements: std; rep stosq from P1 down into P0,
 * which the program made read-only.  The CPU writes P1's first TAIL bytes
 * and faults at the element wholly in P0 below them, rdi there, rcx the
 * elements left.
 */
static void t_rep_back(void)
{
	static const int modes[] = { PMG_FAULT_AUDIT, PMG_FAULT_CONTAIN };
	uint64_t last = (uint64_t)(uintptr_t)(P0 + PAGE - 8);
	unsigned m, i;

	for (m = 0; m < 2; m++) {
		int ok = 1;
		bool rest = true;

		if (mprotect(P0, PAGE, PROT_READ))
			tap_diag("mprotect(P0, r): %s", strerror(errno));
		pmg_set_fault_mode(modes[m]);
		stos_back(P1 + TAIL - 8, 2 * TAIL / 8);
		pmg_set_fault_mode(PMG_FAULT_STRICT);
		CHECK(ok, got == 1);
		CHECK(ok, g_code == SEGV_ACCERR);
		CHECK(ok, g_addr == (void *)(uintptr_t)last);
		CHECK(ok, g_di == last);
		CHECK(ok, g_cx == TAIL / 8);
		CHECK(ok, g_op == 0x48f3); /* f3 48 ab */
		CHECK(ok, !memcmp(P0, pristine, PAGE));
		for (i = 0; i < TAIL; i++)
			if ((uint8_t)P1[i] != (modes[m] == PMG_FAULT_AUDIT
						       ? 0xa5
						       : pristine[PAGE + i]))
				rest = false;
		CHECK(ok, rest);
		CHECK(ok, !memcmp(P1 + TAIL, pristine + PAGE + TAIL,
				  PAGE - TAIL));
		if (!ok)
			tap_diag("signals %d si_code %d si_addr %p rdi %#llx "
				 "rcx %llu op %#x", (int)got, g_code, g_addr,
				 (unsigned long long)g_di,
				 (unsigned long long)g_cx, g_op);
		tap_ok(ok, "%s, P0 read-only by the program: std; rep stosq "
		       "from P1 down into P0 stops at P0's last element (rdi, "
		       "rcx there), P1's %d bytes above it %s, P0 unchanged",
		       mode_name(modes[m]), TAIL,
		       modes[m] == PMG_FAULT_AUDIT ? "written" : "kept");
		if (mprotect(P0, PAGE, PROT_READ | PROT_WRITE))
			tap_diag("mprotect(P0, rw): %s", strerror(errno));
		refill();
	}
}

/* P1 unmapped by the program behind the library's back: a store across
 * into it and rep stosb fault there, SEGV_MAPERR. */
static void t_unmapped(void)
{
	static const int modes[] = { PMG_FAULT_AUDIT, PMG_FAULT_CONTAIN };
	unsigned m;

	/* a raw munmap(2): the interposer would drop the whole range (not
	 * pmguard's then); unseen, as the static library does not see it,
	 * the range stays registered with a hole */
	if (syscall(SYS_munmap, P1, PAGE))
		tap_diag("munmap(P1): %s", strerror(errno));
	p1_gone = true;
	for (m = 0; m < 2; m++) {
		pmg_set_fault_mode(modes[m]);
		t_straddle(modes[m], PROT_NONE, "unmapped");
		t_rep_stos(modes[m], PROT_NONE, "unmapped", SEGV_MAPERR);
	}
	pmg_set_fault_mode(PMG_FAULT_STRICT);
}

int main(void)
{
	struct sigaction sa;
	char *m;
	unsigned i;
	int ok;

	tap_init(25);
	/* the program's handler, before pmguard's (which chains to it) */
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = prog_segv;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	m = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 1;
	P0 = m;
	P1 = m + PAGE;
	U = m + 2 * PAGE;
	for (i = 0; i < 2 * PAGE; i++)
		pristine[i] = (uint8_t)(i * 7 + 1);
	memcpy(P0, pristine, 2 * PAGE);
	ok = pmg_domain_new(&dom, "own", 0) == 0 &&
	     pmg_protect(dom, P0, 2 * PAGE) == 0;
	tap_ok(ok, "two pages of one domain through libpmguard.so (%s)",
	       pmg_backend_name(pmg_backend()));
	if (!ok)
		return tap_done();
	with_prot(PROT_READ, "read-only");
	with_prot(PROT_NONE, "PROT_NONE");
	t_rep_back();
	t_unmapped();
	return tap_done();
}
