// SPDX-License-Identifier: MIT
/*
 * dax-remote - read and write a DAX mapping the way a debugger does, through
 * the kernel's __access_remote_vm(): /proc/PID/mem and PTRACE_PEEKDATA /
 * PTRACE_POKEDATA, in the Linux test guest (linux/tests/dax.sh).  Static;
 * TAP on stdout.
 *
 * Usage: dax-remote PATH SIZE
 *   PATH  a file on a DAX file system (created or truncated to SIZE) or a
 *         device-DAX character device (SIZE a multiple of its alignment)
 *   SIZE  bytes to map (at least 4 pages)
 *
 * Fills the mapping with a pattern through the mapping itself, then:
 * pread() of /proc/self/mem at four pages of it must return the pattern;
 * pwrite() of /proc/self/mem must change what the mapping reads; a child
 * that shares the mapping (MAP_SHARED, forked) stops under ptrace, and the
 * parent's PTRACE_PEEKDATA must read the pattern and PTRACE_POKEDATA must
 * change what the parent's mapping reads.  On a kernel that maps the page
 * with kmap() there (6.1 before "mm/memory: Use kmap_local_page() in
 * __access_remote_vm()") these accesses fault on protected pmem: relaxed
 * mode logs them, strict mode oopses and this program is killed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"


static uint64_t pat(uint64_t i, uint64_t seed)
{
	return i * 0x9e3779b97f4a7c15ull ^ seed;
}

int main(int argc, char **argv)
{
	const size_t pg = 4096;
	uint64_t *map, got, want;
	size_t size, n, i, k;
	struct stat st;
	int fd, mem, status;
	pid_t pid;
	char *end;

	if (argc != 3) {
		fprintf(stderr, "usage: dax-remote PATH SIZE\n");
		return 2;
	}
	size = strtoull(argv[2], &end, 0);
	if (*end || size < 4 * pg || size % pg) {
		fprintf(stderr, "dax-remote: bad SIZE %s\n", argv[2]);
		return 2;
	}
	fd = open(argv[1], O_RDWR | O_CREAT, 0600);
	if (fd < 0 || fstat(fd, &st)) {
		printf("not ok 1 - open %s: %s\n1..1\n", argv[1], strerror(errno));
		return 1;
	}
	if (S_ISREG(st.st_mode) && ftruncate(fd, (off_t)size)) {
		printf("not ok 1 - ftruncate %s: %s\n1..1\n", argv[1], strerror(errno));
		return 1;
	}
	map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		printf("not ok 1 - mmap %s: %s\n1..1\n", argv[1], strerror(errno));
		return 1;
	}
	n = size / sizeof(*map);
	for (i = 0; i < n; i++)
		map[i] = pat(i, 1);
	if (msync(map, size, MS_SYNC))
		printf("# msync: %s\n", strerror(errno));

	/* /proc/self/mem: read four pages, then write one word of each */
	mem = open("/proc/self/mem", O_RDWR);
	result(mem >= 0, "open /proc/self/mem (%s)", mem >= 0 ? "ok" : strerror(errno));
	if (mem >= 0) {
		size_t bad = 0, wbad = 0;

		for (k = 0; k < 4; k++) {
			size_t pgi = k * (size / pg - 1) / 3, w = pgi * pg / sizeof(*map) + 5;
			uint64_t buf[8];
			ssize_t r;

			r = pread(mem, buf, sizeof(buf), (off_t)(uintptr_t)&map[w]);
			if (r != sizeof(buf)) {
				printf("# pread /proc/self/mem page %zu: %zd (%s)\n", pgi, r,
				       r < 0 ? strerror(errno) : "short");
				bad++;
				continue;
			}
			for (i = 0; i < 8; i++)
				if (buf[i] != pat(w + i, 1))
					bad++;
			want = pat(w, 2);
			r = pwrite(mem, &want, sizeof(want), (off_t)(uintptr_t)&map[w]);
			if (r != sizeof(want) || map[w] != want) {
				printf("# pwrite /proc/self/mem page %zu: %zd, mapping reads 0x%llx, want 0x%llx\n",
				       pgi, r, (unsigned long long)map[w], (unsigned long long)want);
				wbad++;
			}
		}
		result(!bad, "/proc/self/mem read of 4 pages of the DAX mapping returns its data (%zu bad words)", bad);
		result(!wbad, "/proc/self/mem write to 4 pages of the DAX mapping lands in it (%zu bad)", wbad);
		close(mem);
	}

	/* ptrace: a child sharing the mapping stops; PEEKDATA and POKEDATA */
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		raise(SIGSTOP);
		_exit(0);
	}
	result(pid > 0, "fork a child to trace (%s)", pid > 0 ? "ok" : strerror(errno));
	if (pid > 0) {
		size_t bad = 0, wbad = 0;

		if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status)) {
			result(0, "the child stopped under ptrace (status 0x%x)", status);
		} else {
			for (k = 0; k < 4; k++) {
				size_t pgi = k * (size / pg - 1) / 3, w = pgi * pg / sizeof(*map) + 9;

				errno = 0;
				got = (uint64_t)ptrace(PTRACE_PEEKDATA, pid, &map[w], NULL);
				if (errno || got != pat(w, 1)) {
					printf("# PEEKDATA page %zu: 0x%llx (%s), want 0x%llx\n", pgi,
					       (unsigned long long)got, errno ? strerror(errno) : "ok",
					       (unsigned long long)pat(w, 1));
					bad++;
				}
				want = pat(w, 3);
				if (ptrace(PTRACE_POKEDATA, pid, &map[w], (void *)(uintptr_t)want) ||
				    map[w] != want) {
					printf("# POKEDATA page %zu: mapping reads 0x%llx, want 0x%llx (%s)\n",
					       pgi, (unsigned long long)map[w], (unsigned long long)want,
					       strerror(errno));
					wbad++;
				}
			}
			result(!bad, "PTRACE_PEEKDATA of 4 pages of the DAX mapping returns its data (%zu bad)", bad);
			result(!wbad, "PTRACE_POKEDATA to 4 pages of the DAX mapping lands in it (%zu bad)", wbad);
		}
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}

	/* everything else unchanged */
	{
		size_t bad = 0;

		for (i = 0; i < n; i++) {
			size_t w = i % (pg / sizeof(*map));

			if ((w == 5 || w == 9) && map[i] != pat(i, 1))
				continue;	/* one of the words written above */
			if (map[i] != pat(i, 1))
				bad++;
		}
		result(!bad, "the rest of the mapping is intact (%zu bad words)", bad);
	}
	munmap(map, size);
	close(fd);
	return tap_done("dax-remote");
}
