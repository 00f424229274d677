// SPDX-License-Identifier: MIT
/*
 * pmg_init() retried and the message a successful init leaves.  Each check
 * runs in a fresh child, before the library is initialised there.
 *
 * Retry: a seccomp filter makes sigaction(SIGSEGV) fail, so pmg_init()
 * fails after its pthread_atfork() step; it is called three times.  A
 * later fork() must not hang: a second set of atfork handlers would take
 * the pool lock twice (a deadlock before the fix; the child's alarm
 * catches it).
 */
#define _GNU_SOURCE
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "tap.h"
#include "pmguard.h"
#include "valgrind-probe.h"

/* sigaction(SIGSEGV, ...) fails with EPERM from now on in this process. */
static int deny_segv_handler(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_rt_sigaction, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SIGSEGV, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {
		.len = sizeof(f) / sizeof(f[0]),
		.filter = f,
	};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

/* exit codes: 0 fine, 1 init did not fail as set up, 2 fork failed,
 * 3 grandchild, 77 no seccomp here */
static int retry_child(void *arg)
{
	pid_t pid;
	int i, st;

	(void)arg;
	if (deny_segv_handler())
		return 77;
	alarm(20);	/* a deadlocked fork() ends here, by SIGALRM */
	for (i = 0; i < 3; i++) {
		if (pmg_init() != -EPERM ||
		    !strstr(pmg_errormsg(), "SIGSEGV handler"))
			return 1;
	}
	pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0)
		_exit(0);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0)
		return 3;
	return 0;
}

/*
 * A successful call leaves the message alone.  The auto backend's PKU
 * probe fails here without PKU, and init falls back to mprotect: that
 * probe's message must not survive the pmg_domain_new() that succeeded.
 * Where PKU exists every key is taken before init: PKU stays the backend
 * and the domain is virtual: the failed search for a key must
 * not leave its message either, nor a window's on that domain.
 */
static int message_child(void *arg)
{
	struct pmg_domain *d = NULL;
	char before[512];

	(void)arg;
	unsetenv("PMGUARD_BACKEND");
	while (syscall(SYS_pkey_alloc, 0, 0) >= 0)
		;
	(void)pmg_set_fault_mode(-4242);	/* a message of our own */
	snprintf(before, sizeof(before), "%s", pmg_errormsg());
	if (!before[0])
		return 1;
	if (pmg_domain_new(&d, "init-msg", 0))
		return 2;
	if (pmg_backend() != PMG_BACKEND_MPROTECT &&
	    !(pmg_backend() == PMG_BACKEND_PKU && pmg_domain_key(d) == -ENOKEY))
		return 3;
	if (pmg_open(d, PMG_WRITE) || pmg_close(d, PMG_WRITE))
		return 5;
	if (strcmp(pmg_errormsg(), before)) {
		printf("# message after a successful pmg_domain_new(): '%s'\n",
		       pmg_errormsg());
		return 4;
	}
	return 0;
}

int main(void)
{
	int st;

	tap_init(2);
	if (pmg_under_valgrind())
		tap_skip("pmg_init() retried after a failure: a later fork() "
			 "does not hang", "under valgrind: seccomp filters "
			 "and valgrind's own sigaction calls do not mix");
	else {
		st = tap_child(retry_child, NULL);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
			tap_skip("pmg_init() retried after a failure: a later "
				 "fork() does not hang", "no seccomp filters "
				 "here (prctl failed)");
		else
			tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			       "pmg_init() failing after its atfork step, "
			       "three times: a later fork() does not hang "
			       "(status %#x%s)", st, WIFSIGNALED(st) &&
			       WTERMSIG(st) == SIGALRM ? ": fork deadlocked"
			       : "");
	}
	st = tap_child(message_child, NULL);
	tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "a successful "
	       "pmg_domain_new() (with pmg_init() falling back from PKU to "
	       "mprotect, or, every key taken, a virtual domain on PKU) and a "
	       "window on it leave pmg_errormsg() as it was (status %#x)",
	       st);
	return tap_done();
}
