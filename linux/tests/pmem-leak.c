// SPDX-License-Identifier: MIT
/*
 * pmem-leak - PMEM access left open at a context boundary (the series'
 * "memremap_pages: Close PMEM access left open at context boundaries").
 * Runs in the QEMU guest as root, once per boot (the kernel reports each
 * boundary once per boot):
 *
 *   pmem-leak relaxed|strict TARGET PAGE
 *
 * TARGET PAGE: a protected page for the pks_pmem hook (linux/README), e.g.
 * /dev/pmem0 12000.  Through one open file of
 * /sys/kernel/debug/x86/pks_pmem, so every command runs in this thread:
 *
 * 1. leak: a pgmap_mk_readwrite() window left open by this thread.  The
 *    next command (state) finds it closed (count 0, PMEM key closed in
 *    PKRS): the return to user mode in between closed it; pks_access_leaks
 *    counts one more and the kernel log has one "PMEM access left open at
 *    return to user mode" line naming this task, its pid and count 1.
 * 2. leak_work: a work item ends with a window open: one more leak, a
 *    line "at end of work item" naming the work function.
 * 3. leak_kthread: a kernel thread exits with a window open: one more
 *    leak, a line "at task exit" naming the thread (pks_pmem_leak).
 * 4. relaxed only: an unguarded read (stray_read) faults and is allowed
 *    (pks_relaxed_faults + 1), which opens the PMEM key for this thread;
 *    the next command finds the key closed again, a second stray_read
 *    faults again (+1 more), and neither counted as a leak.
 *
 * Without the check at those boundaries, 1 finds count 1 with the key
 * open, nothing is counted or logged, and 4's second read takes no fault.
 * TAP output (tap.h); exit 0 if every check passed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"

#define PKS_PMEM	"/sys/kernel/debug/x86/pks_pmem"
#define PARAMS		"/sys/module/memremap/parameters/"

static int hook = -1;
static int kmsg = -1;
static char res[512];
static const char *target;
static unsigned long page;

/* one command to the hook; its result line (no newline) in res */
static int cmd(const char *name)
{
	char buf[160];
	ssize_t n;
	int len;

	len = snprintf(buf, sizeof(buf), "%s %s %lu", name, target, page);
	res[0] = '\0';
	if (write(hook, buf, len) != len) {
		snprintf(res, sizeof(res), "error: write '%s': %s", buf,
			 strerror(errno));
		return -1;
	}
	n = pread(hook, res, sizeof(res) - 1, 0);
	if (n < 0) {
		snprintf(res, sizeof(res), "error: read: %s", strerror(errno));
		return -1;
	}
	res[n] = '\0';
	res[strcspn(res, "\n")] = '\0';
	printf("# %s -> %s\n", buf, res);
	return strncmp(res, "error:", 6) ? 0 : -1;
}

/* NAME=VALUE of the result line, -1 if missing */
static long field(const char *name)
{
	char key[40];
	const char *p;

	snprintf(key, sizeof(key), " %s=", name);
	p = strstr(res, key);
	return p ? strtol(p + strlen(key), NULL, 0) : -1;
}

static long param(const char *name)
{
	char path[128], buf[32];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), PARAMS "%s", name);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return strtol(buf, NULL, 10);
}

/* Skip what the kernel log holds so far */
static void kmsg_mark(void)
{
	lseek(kmsg, 0, SEEK_END);
}

/*
 * The kernel log since kmsg_mark(): the text of the first record that
 * contains every one of the NULL-terminated strings, in line (empty if
 * none); the number of records containing the first string.
 */
static int kmsg_find(char *line, size_t size, const char *const *want)
{
	char rec[1024];
	int found = 0;
	ssize_t n;

	line[0] = '\0';
	for (;;) {
		const char *text;
		int i, all = 1;

		n = read(kmsg, rec, sizeof(rec) - 1);
		if (n < 0 && errno == EPIPE)
			continue;	/* overwritten records: go on */
		if (n <= 0)
			break;
		rec[n] = '\0';
		text = strchr(rec, ';');
		text = text ? text + 1 : rec;
		if (!strstr(text, want[0]))
			continue;
		found++;
		for (i = 1; want[i]; i++)
			all = all && strstr(text, want[i]);
		if (all && !line[0]) {
			size_t len = strcspn(text, "\n");

			if (len >= size)
				len = size - 1;
			memcpy(line, text, len);
			line[len] = '\0';
		}
	}
	return found;
}

/*
 * A leak made by CMD: the command reports the leaking context's count 1,
 * the counter goes up by one, and the log has one line for BOUNDARY that
 * names WHO and count 1.
 */
static void leak(const char *name, const char *boundary, const char *who)
{
	const char *want[] = { boundary, who, "pgmap_prot_count=1 ", NULL };
	long l0, l1;
	char line[512];
	int n;

	l0 = param("pks_access_leaks");
	kmsg_mark();
	if (cmd(name) == 0)
		result(field("count") == 1, "%s: the leaking context held a window (count 1: %s)",
		       name, res);
	else
		result(0, "%s: the hook ran it (%s)", name, res);
	/* the leak of "leak" itself is found on the way back from that write */
	if (cmd("state") == 0)
		result(field("count") == 0 && field("pmem_open") == 0,
		       "%s: this thread has no PMEM access afterwards (%s)",
		       name, res);
	else
		result(0, "%s: state (%s)", name, res);
	l1 = param("pks_access_leaks");
	result(l0 >= 0 && l1 == l0 + 1, "%s: pks_access_leaks counts it (%ld -> %ld)",
	       name, l0, l1);
	n = kmsg_find(line, sizeof(line), want);
	result(n == 1 && line[0], "%s: one kernel log line for it at %s naming %s and count 1 (%d lines; '%s')",
	       name, boundary + strlen("PMEM access left open at "), who, n,
	       line);
}

int main(int argc, char **argv)
{
	char me[64];
	int relaxed;

	if (argc != 4 || (strcmp(argv[1], "relaxed") && strcmp(argv[1], "strict"))) {
		fprintf(stderr, "usage: pmem-leak relaxed|strict TARGET PAGE\n");
		return 2;
	}
	relaxed = !strcmp(argv[1], "relaxed");
	target = argv[2];
	page = strtoul(argv[3], NULL, 0);

	hook = open(PKS_PMEM, O_RDWR);
	kmsg = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	if (!result(hook >= 0, "open %s (%s)", PKS_PMEM, hook < 0 ? strerror(errno) : "ok") ||
	    !result(kmsg >= 0, "open /dev/kmsg (%s)", kmsg < 0 ? strerror(errno) : "ok"))
		return tap_done("pmem-leak");
	result(param("pks_access_leaks") >= 0, "memremap.pks_access_leaks exists (%ld)",
	       param("pks_access_leaks"));

	snprintf(me, sizeof(me), ": pmem-leak[%d] ", getpid());
	leak("leak", "PMEM access left open at return to user mode", me);
	leak("leak_work", "PMEM access left open at end of work item",
	     "workfn=pks_pmem_leak_work");
	leak("leak_kthread", "PMEM access left open at task exit",
	     ": pks_pmem_leak[");

	if (relaxed) {
		const char *want[] = { "PMEM access left open", NULL };
		long r0, r1, r2, l0, l1;
		char line[512];
		int open1 = -1, n;

		l0 = param("pks_access_leaks");
		r0 = param("pks_relaxed_faults");
		kmsg_mark();
		cmd("stray_read");
		r1 = param("pks_relaxed_faults");
		if (cmd("state") == 0)
			open1 = field("pmem_open");
		cmd("stray_read");
		r2 = param("pks_relaxed_faults");
		l1 = param("pks_access_leaks");
		n = kmsg_find(line, sizeof(line), want);
		result(r0 >= 0 && r1 == r0 + 1, "relaxed grant: a stray read faults and is allowed (pks_relaxed_faults %ld -> %ld)",
		       r0, r1);
		result(open1 == 0, "relaxed grant: gone after the return to user mode (pmem_open=%d)",
		       open1);
		result(r1 >= 0 && r2 == r1 + 1, "relaxed grant: the next stray read faults again (pks_relaxed_faults %ld -> %ld)",
		       r1, r2);
		result(l1 == l0 && n == 0, "relaxed grant: not a leak (pks_access_leaks %ld -> %ld, %d log lines)",
		       l0, l1, n);
	}
	return tap_done("pmem-leak");
}
