// SPDX-License-Identifier: MIT
/*
 * count-ops - the kernel operations whose counts linux/scripts/linux-count
 * takes with the TCG counting plugin (tools/tcg/count.c), on the series'
 * kernel and on the unpatched one: each operation REPS times, each time
 * in its own marked region (tools/tcg/marker.h), so that the host can take
 * the median per operation and a timer tick that lands in one region
 * does not move it.
 *
 * Usage: count-ops DIR [TARGET PAGE] [REPS]
 *
 *   DIR     a directory on a DAX mount (ext4 -o dax): its 1 MiB file
 *           must report STATX_ATTR_DAX, or count-ops fails
 *   TARGET PAGE  a pmem block device and a page of it, for the
 *           operations of the series' test interface
 *           (<debugfs>/x86/pks_pmem, patch "mm/pkeys: Add a PMEM stray
 *           write test interface"); without the file (the unpatched
 *           kernel) they are reported as skipped
 *   REPS    regions per operation (default 101; 21 for the pks_pmem
 *           ones, whose commands wait a millisecond or more)
 *
 * The operations (ITERS: operations per region):
 *   syscall_getppid  getppid(2): a syscall entry and exit (1)
 *   dax_read_4k      pread(2) of 4 KiB of a DAX file: one DAX copy (1)
 *   dax_write_4k     pwrite(2) of 4 KiB over written blocks (1)
 *   dax_fault_read   the first read of a page of a MAP_SHARED mapping
 *                    of the DAX file: a DAX page fault (1)
 *   dax_fault_write  the same, a write (1)
 *   ctx_switch       one round trip of two threads over two pipes: two
 *                    context switches between tasks with the default
 *                    PKRS (2)
 *   exc_pf_anon      the first write of an anonymous page: a user #PF
 *                    that opens no window (1)
 *   exc_int3         int3 with a SIGTRAP handler: #BP, the signal
 *                    and rt_sigreturn, no window (1)
 *   pks_read         "read TARGET PAGE": one guarded read, one window (1)
 *   pks_irq          "irq TARGET PAGE": a window, and a hard
 *                    interrupt (a pinned hrtimer) taken inside it whose
 *                    handler opens a window of its own (1)
 *   pks_nmi          "nmi TARGET PAGE": the same with an NMI (1)
 *
 * Output: "region ID NAME ITERS" after each region (the plugin writes one
 * JSON line per region, in the same order), "skip NAME REASON" for an
 * operation that cannot run here, "# ..." notes.  Exit status 0 iff every
 * operation ran or was skipped for the reason above.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../tools/tcg/marker.h"

#ifndef STATX_ATTR_DAX
#define STATX_ATTR_DAX 0x00200000
#endif

#define PAGE 4096
#define FILE_PAGES 256
#define PKS_PMEM "/sys/kernel/debug/x86/pks_pmem"

static int failed;

/* One region around BODY, then its line.  ID: an integer constant (the
 * marker's displacement), one per operation; the host joins the k-th
 * region line with the plugin's k-th JSON line and checks the id. */
#define REGION(id, name, iters, body)                                   \
	do {                                                            \
		PMG_COUNT_BEGIN(id);                                    \
		body;                                                   \
		PMG_COUNT_END(id);                                      \
		printf("region %d %s %d\n", id, name, iters);           \
	} while (0)

static void fail(const char *what)
{
	printf("# count-ops: %s: %s\n", what, strerror(errno));
	failed = 1;
}

static int ping[2], pong[2];

static void *ponger(void *arg)
{
	char c;

	(void)arg;
	while (read(ping[0], &c, 1) == 1 && c)
		if (write(pong[1], &c, 1) != 1)
			break;
	return NULL;
}

static void on_trap(int sig)
{
	(void)sig;
}

/* One command to the pks_pmem hook: 0, or -1 with errno */
static int pks_cmd(int fd, const char *cmd)
{
	return write(fd, cmd, strlen(cmd)) == (ssize_t)strlen(cmd) ? 0 : -1;
}

/* The first read (@write 0) or write of each of @reps pages of a shared
 * mapping of the DAX file: one DAX page fault each */
static void dax_faults(int fd, int reps, int write)
{
	size_t len = (size_t)FILE_PAGES * PAGE;
	unsigned char *map;
	int i;

	map = mmap(NULL, len, PROT_READ | (write ? PROT_WRITE : 0), MAP_SHARED,
		   fd, 0);
	if (map == MAP_FAILED) {
		fail(write ? "mmap of the DAX file (write)" : "mmap of the DAX file (read)");
		return;
	}
	for (i = 0; i < reps; i++) {
		volatile unsigned char *p = map + (size_t)i * PAGE;

		if (write)
			REGION(5, "dax_fault_write", 1, *p = 0xa5);
		else
			REGION(4, "dax_fault_read", 1, (void)*p);
	}
	munmap(map, len);
}

int main(int argc, char **argv)
{
	const char *dir, *target = NULL;
	char path[4096], buf[PAGE] __attribute__((aligned(64)));
	char cmd[256];
	struct statx stx;
	int reps = 101, preps = 21, fd, i;
	unsigned char *anon;
	pthread_t thr;
	long page = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2) {
		fprintf(stderr, "usage: count-ops DIR [TARGET PAGE] [REPS]\n");
		return 2;
	}
	dir = argv[1];
	if (argc >= 4) {
		target = argv[2];
		page = strtol(argv[3], NULL, 0);
	}
	if (argc >= 5) {
		reps = atoi(argv[4]);
		if (reps < 1) {
			fprintf(stderr, "count-ops: REPS %s: a positive number\n",
				argv[4]);
			return 2;
		}
		preps = reps < 21 ? reps : 21;
	}
	if (reps > FILE_PAGES)
		reps = FILE_PAGES; /* the fault operations use one page each */

	/* -- the DAX file: written through, so that the reads, overwrites and
	 * faults below find allocated, written blocks */
	snprintf(path, sizeof(path), "%s/count-ops.dat", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0) {
		fail(path);
		return 1;
	}
	memset(buf, 0x5a, sizeof(buf));
	for (i = 0; i < FILE_PAGES; i++)
		if (pwrite(fd, buf, PAGE, (off_t)i * PAGE) != PAGE) {
			fail("pwrite (setup)");
			return 1;
		}
	if (fsync(fd) != 0) {
		fail("fsync");
		return 1;
	}
	if (statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &stx) != 0) {
		fail("statx");
		return 1;
	}
	if (!(stx.stx_attributes_mask & STATX_ATTR_DAX) ||
	    !(stx.stx_attributes & STATX_ATTR_DAX)) {
		printf("# count-ops: %s is not a DAX file (STATX_ATTR_DAX clear): "
		       "the DAX counts would be the page cache's\n", path);
		return 1;
	}
	printf("# count-ops: %s is DAX; %d regions per operation\n", path,
	       reps);

	/* warm: the first call of each path is not what is measured */
	(void)getppid();
	if (pread(fd, buf, PAGE, 0) != PAGE || pwrite(fd, buf, PAGE, 0) != PAGE)
		fail("pread/pwrite (warm)");

	for (i = 0; i < reps; i++)
		REGION(1, "syscall_getppid", 1, syscall(SYS_getppid));
	for (i = 0; i < reps; i++)
		REGION(2, "dax_read_4k", 1,
		       if (pread(fd, buf, PAGE, (off_t)i * PAGE) != PAGE)
			       fail("pread"));
	for (i = 0; i < reps; i++)
		REGION(3, "dax_write_4k", 1,
		       if (pwrite(fd, buf, PAGE, (off_t)i * PAGE) != PAGE)
			       fail("pwrite"));

	dax_faults(fd, reps, 0);
	dax_faults(fd, reps, 1);

	/* -- two context switches per round trip: this thread blocks in
	 * read(pong), the ponger runs, answers and blocks in read(ping) */
	if (pipe(ping) || pipe(pong) || pthread_create(&thr, NULL, ponger, NULL)) {
		fail("pipes and the ponger thread");
	} else {
		char c = 1;

		for (i = 0; i < reps + 1; i++) {
			if (i == 0) { /* warm: the ponger's first run */
				if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1)
					fail("ping-pong");
				continue;
			}
			REGION(6, "ctx_switch", 2,
			       if (write(ping[1], &c, 1) != 1 ||
				   read(pong[0], &c, 1) != 1) fail("ping-pong"));
		}
		c = 0;
		if (write(ping[1], &c, 1) != 1)
			fail("ping-pong end");
		pthread_join(thr, NULL);
	}

	/* -- exceptions that open no window */
	anon = mmap(NULL, (size_t)reps * PAGE, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (anon == MAP_FAILED) {
		fail("mmap (anonymous)");
	} else {
		for (i = 0; i < reps; i++)
			REGION(7, "exc_pf_anon", 1,
			       *(volatile unsigned char *)(anon + (size_t)i * PAGE) = 1);
		munmap(anon, (size_t)reps * PAGE);
	}
	if (signal(SIGTRAP, on_trap) == SIG_ERR) {
		fail("signal(SIGTRAP)");
	} else {
		__asm__ volatile("int3"); /* warm */
		for (i = 0; i < reps; i++)
			REGION(8, "exc_int3", 1, __asm__ volatile("int3"));
	}

	/* -- windows of the series' test interface */
	if (!target) {
		printf("skip pks_read no TARGET PAGE given\n");
		printf("skip pks_irq no TARGET PAGE given\n");
		printf("skip pks_nmi no TARGET PAGE given\n");
	} else if (access(PKS_PMEM, W_OK) != 0) {
		printf("skip pks_read no %s in this kernel\n", PKS_PMEM);
		printf("skip pks_irq no %s in this kernel\n", PKS_PMEM);
		printf("skip pks_nmi no %s in this kernel\n", PKS_PMEM);
	} else {
		static const char *const ops[] = { "read", "irq", "nmi" };
		int pfd = open(PKS_PMEM, O_WRONLY), k;

		if (pfd < 0) {
			fail(PKS_PMEM);
			return 1;
		}
		for (k = 0; k < 3; k++) {
			char name[32];

			snprintf(cmd, sizeof(cmd), "%s %s %ld", ops[k], target, page);
			snprintf(name, sizeof(name), "pks_%s", ops[k]);
			if (pks_cmd(pfd, cmd) != 0) { /* warm, and the command works */
				fail(cmd);
				continue;
			}
			for (i = 0; i < preps; i++)
				REGION(9, name, 1, if (pks_cmd(pfd, cmd) != 0) fail(cmd));
		}
		close(pfd);
	}
	close(fd);
	unlink(path);
	printf("# count-ops: %s\n", failed ? "FAILED" : "done");
	return failed;
}
