// SPDX-License-Identifier: MIT
/*
 * The single step's SIGTRAP as the kernel may really send it.  Audit and
 * contain run a faulting store once with access and the trap flag set;
 * the SIGTRAP after it re-arms.  The kernel reports a step as TRAP_TRACE
 * (DR6.BS), but on a loaded virtual machine (Firecracker on KVM, this
 * project's CI) the same trap arrives with DR6 empty, reported as an
 * icebp: TRAP_BRKPT.  The library took that for somebody else's trap and
 * passed it on: the default action killed the program (seen in CI:
 * test-api and test-persist "killed by SIGTRAP"; 8 of 100 audit runs
 * under CPU oversubscription).
 *
 * A tracer makes it happen every time: the child runs audit-mode stray
 * writes under ptrace, and the parent rewrites the si_code of every
 * TRAP_TRACE it sees to TRAP_BRKPT before delivering it.  Runs on both
 * backends.  And the other side: a genuine icebp of the program, outside
 * any step, still reaches the program's own SIGTRAP handler.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include <pmguard.h>

#include "tap.h"
#include "valgrind-probe.h"

#define PAGE 4096
#define STRAYS 3

static __attribute__((noinline)) void stray_store(volatile char *p, char v)
{
	*p = v;
}

/*
 * The traced child: STRAYS audited stray writes into a protected page;
 * each lands (audit lets it through) and the page is re-armed after each
 * (the next one is audited too).  Exit 0 when all of that held.
 */
static int audit_child(void)
{
	struct pmg_domain *d = NULL;
	struct pmg_stats st0, st1;
	char *page;
	int i, bad = 0;

	if (pmg_init() || pmg_domain_new(&d, "steptrap", 0))
		_exit(10);
	page = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED || pmg_protect(d, page, PAGE))
		_exit(11);
	pmg_set_report_fd(-1);
	pmg_set_fault_mode(PMG_FAULT_AUDIT);
	if (ptrace(PTRACE_TRACEME, 0, NULL, NULL))
		_exit(12);
	raise(SIGSTOP);
	pmg_stats_get(&st0, sizeof(st0));
	for (i = 0; i < STRAYS; i++) {
		stray_store(page + 64 * i, (char)(0x40 + i));
		if (page[64 * i] != (char)(0x40 + i))
			bad++;
	}
	pmg_stats_get(&st1, sizeof(st1));
	if (st1.audited - st0.audited != STRAYS)
		bad += 100;
	/* _exit: no atexit work (LeakSanitizer would ptrace us) */
	_exit(bad ? 20 + (bad > 99 ? 1 : 0) : 0);
}

/*
 * Trace @pid to its end, delivering every signal it stops for, with each
 * SIGTRAP's TRAP_TRACE rewritten to TRAP_BRKPT (counted in @rewritten).
 * Returns its wait status, or -1.
 */
static int trace(pid_t pid, int *rewritten, int *traps)
{
	siginfo_t si;
	int st, sig;

	for (;;) {
		if (waitpid(pid, &st, 0) != pid)
			return -1;
		if (!WIFSTOPPED(st))
			return st;
		sig = WSTOPSIG(st);
		if (sig == SIGSTOP) {
			sig = 0;
		} else if (sig == SIGTRAP &&
			   !ptrace(PTRACE_GETSIGINFO, pid, NULL, &si)) {
			(*traps)++;
			if (si.si_code == TRAP_TRACE) {
				si.si_code = TRAP_BRKPT;
				if (!ptrace(PTRACE_SETSIGINFO, pid, NULL, &si))
					(*rewritten)++;
			}
		}
		if (ptrace(PTRACE_CONT, pid, NULL, (void *)(long)sig))
			return -1;
	}
}

static void test_brkpt_step(void)
{
	int st, rewritten = 0, traps = 0;
	pid_t pid;

	pid = fork();
	if (pid < 0) {
		tap_ok(0, "fork: %s", strerror(errno));
		return;
	}
	if (pid == 0)
		audit_child();
	st = trace(pid, &rewritten, &traps);
	if (st == -1 && errno == EPERM) {
		tap_skip("a step's trap reported as TRAP_BRKPT",
			 "ptrace is not allowed here");
		return;
	}
	tap_diag("%d SIGTRAP(s) seen by the tracer, %d rewritten to "
		 "TRAP_BRKPT; child %s %d",
		 traps, rewritten, WIFEXITED(st) ? "exit" : "signal",
		 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	tap_ok(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
		       rewritten == STRAYS,
	       "audit: %d stray writes whose single-step traps arrive as "
	       "TRAP_BRKPT (DR6 empty, as on a loaded VM) each land once and "
	       "re-arm; the program is not killed by its own step's SIGTRAP",
	       STRAYS);
}

/* The program's own SIGTRAP handler, installed before the library. */
static volatile sig_atomic_t own_traps, own_code;

static void own_trap(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	own_traps++;
	own_code = si->si_code;
}

/* Does icebp raise SIGTRAP here?  QEMU TCG raises SIGILL for it. */
static int icebp_child(void *arg)
{
	(void)arg;
	signal(SIGTRAP, SIG_IGN);
	__asm__ __volatile__(".byte 0xf1" ::: "memory");
	return 0;
}

static void test_own_icebp(void)
{
	struct sigaction sa;
	struct pmg_domain *d = NULL;
	int st = tap_child(icebp_child, NULL);

	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGILL) {
		tap_skip("a TRAP_BRKPT of the program's own reaches its "
			 "handler",
			 "icebp raises SIGILL on this CPU (QEMU TCG), not a "
			 "TRAP_BRKPT SIGTRAP");
		return;
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = own_trap;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGTRAP, &sa, NULL);
	if (pmg_init() || pmg_domain_new(&d, "steptrap-own", 0)) {
		tap_ok(0, "set-up: %s", pmg_errormsg());
		return;
	}
	pmg_set_fault_mode(PMG_FAULT_AUDIT);
	__asm__ __volatile__(".byte 0xf1" ::: "memory"); /* icebp */
	pmg_set_fault_mode(PMG_FAULT_RELAXED);
	tap_ok(own_traps == 1 && own_code == TRAP_BRKPT,
	       "a TRAP_BRKPT of the program's own (icebp) outside any step "
	       "reaches the program's SIGTRAP handler (%d trap(s), si_code %d)",
	       (int)own_traps, (int)own_code);
	pmg_domain_delete(&d);
}

int main(void)
{
	if (pmg_under_valgrind())
		tap_skip_all(PMG_VALGRIND_WHY);
#ifndef __x86_64__
	tap_skip_all("the single step (trap flag) is x86-64 only");
#endif
	tap_init(2);
	test_brkpt_step();
	test_own_icebp();
	return tap_done();
}
