// SPDX-License-Identifier: MIT
/*
 * dax-unbind - unbind a pmem namespace while a thread is inside a DAX
 * access, then check that the thread has no access to protected memory
 * left, in the Linux test guest (linux/tests/dax.sh).  Static; TAP on
 * stdout.  Needs userfaultfd, the pks_pmem hook (linux/README) and relaxed
 * pks_fault_mode.
 *
 * Usage: dax-unbind FILE NAMESPACE TARGET
 *   FILE       a file of at least 4 KiB on ext4 -o dax on the namespace
 *   NAMESPACE  e.g. namespace0.0 (written to nd_pmem's unbind)
 *   TARGET     a pks_pmem target on another device with the PMEM key,
 *              e.g. phys:0x... of a device-dax page
 *
 * Thread R reads FILE into a buffer registered with userfaultfd: the read
 * enters the DAX access window (dax_mk_readwrite()) and blocks in the
 * fault on the buffer.  Thread U then unbinds the namespace: kill_dax()
 * marks the dax device dead and waits for R.  The fault is resolved, R's
 * copy completes and R closes its window (dax_mk_noaccess()) on a device
 * that is no longer alive.  R then writes one byte of TARGET through the
 * direct map without enabling access (pks_pmem "stray"): that write must
 * fault (pks_relaxed_faults + 1).  A dax_mk_noaccess() that skips a dead
 * device leaves R's access enabled: the write lands without a fault.
 *
 * The return to user mode closes a window left open and counts it in
 * memremap.pks_access_leaks ("memremap_pages: Close PMEM access left open
 * at context boundaries"), before R's stray write, which is a system call
 * of its own.  So the stray write alone no longer sees a skipped close:
 * the leak count, read before and after R's read, must not move.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tap.h"

#define PKS_PMEM "/sys/kernel/debug/x86/pks_pmem"
#define RELAXED "/sys/module/memremap/parameters/pks_relaxed_faults"
#define LEAKS "/sys/module/memremap/parameters/pks_access_leaks"
#define PG 4096

static const char *file, *ns, *target;
static char *buf;
static int fd;
static volatile int r_done, u_done;
static volatile pid_t u_tid;
static ssize_t r_read;
static long rf_before = -1, rf_after = -1;
static long lk_before = -1, lk_after = -1;
static char stray_res[256];

static long read_long(const char *path)
{
	char s[64] = "";
	int f = open(path, O_RDONLY);
	ssize_t n;

	if (f < 0)
		return -1;
	n = read(f, s, sizeof(s) - 1);
	close(f);
	return n > 0 ? strtol(s, NULL, 0) : -1;
}

static void *reader(void *arg)
{
	char cmd[128];
	int h;
	ssize_t n;

	(void)arg;
	lk_before = read_long(LEAKS);
	r_read = pread(fd, buf, PG, 0);
	lk_after = read_long(LEAKS);
	r_done = 1;
	/* the stray write, from this thread */
	rf_before = read_long(RELAXED);
	snprintf(cmd, sizeof(cmd), "stray %s 0 0x5a\n", target);
	h = open(PKS_PMEM, O_RDWR);
	if (h >= 0) {
		if (write(h, cmd, strlen(cmd)) < 0)
			snprintf(stray_res, sizeof(stray_res), "write: %s", strerror(errno));
		lseek(h, 0, SEEK_SET);
		n = read(h, stray_res, sizeof(stray_res) - 1);
		if (n > 0)
			stray_res[n - (stray_res[n - 1] == '\n')] = 0;
		close(h);
	} else {
		snprintf(stray_res, sizeof(stray_res), "open %s: %s", PKS_PMEM, strerror(errno));
	}
	rf_after = read_long(RELAXED);
	return NULL;
}

static void *unbinder(void *arg)
{
	int h = open("/sys/bus/nd/drivers/nd_pmem/unbind", O_WRONLY);

	(void)arg;
	u_tid = (pid_t)syscall(SYS_gettid);
	if (h < 0 || write(h, ns, strlen(ns)) < 0)
		printf("# unbind %s: %s\n", ns, strerror(errno));
	if (h >= 0)
		close(h);
	u_done = 1;
	return NULL;
}

int main(int argc, char **argv)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg;
	struct uffdio_copy copy;
	struct uffd_msg msg;
	struct pollfd pfd;
	pthread_t r, u;
	char path[64], stack[2048] = "";
	static char zero[PG];
	int uffd, h, blocked = 0;
	ssize_t n;

	if (argc != 4) {
		fprintf(stderr, "usage: dax-unbind FILE NAMESPACE TARGET\n");
		return 2;
	}
	file = argv[1];
	ns = argv[2];
	target = argv[3];
	fd = open(file, O_RDONLY);
	uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	if (fd < 0 || uffd < 0 || ioctl(uffd, UFFDIO_API, &api)) {
		printf("not ok 1 - open %s (%d) and a userfaultfd (%d): %s\n1..1\n", file, fd, uffd,
		       strerror(errno));
		return 1;
	}
	buf = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	reg.range.start = (unsigned long)buf;
	reg.range.len = PG;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	if (buf == MAP_FAILED || ioctl(uffd, UFFDIO_REGISTER, &reg)) {
		printf("not ok 1 - userfaultfd register: %s\n1..1\n", strerror(errno));
		return 1;
	}
	pthread_create(&r, NULL, reader, NULL);
	pfd.fd = uffd;
	pfd.events = POLLIN;
	n = poll(&pfd, 1, 30000) == 1 ? read(uffd, &msg, sizeof(msg)) : -1;
	result(n == sizeof(msg) && msg.event == UFFD_EVENT_PAGEFAULT && !r_done,
	       "the DAX read of %s blocks in a fault on its user buffer (inside the DAX access)", file);
	if (n != sizeof(msg))
		return 1;
	pthread_create(&u, NULL, unbinder, NULL);
	/* let kill_dax() mark the device dead and wait for the reader */
	sleep(3);
	if (u_tid) {
		snprintf(path, sizeof(path), "/proc/self/task/%d/stack", (int)u_tid);
		h = open(path, O_RDONLY);
		if (h >= 0) {
			n = read(h, stack, sizeof(stack) - 1);
			stack[n > 0 ? n : 0] = 0;
			close(h);
		}
	}
	blocked = !u_done && (strstr(stack, "kill_dax") || strstr(stack, "synchronize_srcu"));
	printf("# unbind thread's kernel stack:\n");
	for (char *l = strtok(stack, "\n"); l; l = strtok(NULL, "\n"))
		printf("#   %s\n", l);
	result(blocked, "the unbind of %s waits in kill_dax() for the reader (unbind %s)", ns,
	       u_done ? "already finished" : "still running");
	copy.dst = (unsigned long)buf;
	copy.src = (unsigned long)zero;
	copy.len = PG;
	copy.mode = 0;
	copy.copy = 0;
	if (ioctl(uffd, UFFDIO_COPY, &copy))
		printf("# UFFDIO_COPY: %s\n", strerror(errno));
	pthread_join(r, NULL);
	pthread_join(u, NULL);
	result(r_read == PG, "the read completes after the fault is resolved (%zd bytes)", r_read);
	result(lk_before >= 0 && lk_after == lk_before,
	       "the reader's read closed its own window: none left open at its return to user mode (pks_access_leaks %ld -> %ld)",
	       lk_before, lk_after);
	printf("# reader's stray write: %s\n", stray_res);
	result(rf_before >= 0 && rf_after == rf_before + 1,
	       "afterwards the reader has no access left: its stray write faults (pks_relaxed_faults %ld -> %ld)",
	       rf_before, rf_after);
	return tap_done("dax-unbind");
}
