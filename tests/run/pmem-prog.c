// SPDX-License-Identifier: MIT
/*
 * pmem-prog: a small libpmem program for the `pmguard run` tests.  It
 * includes no pmguard header and links no pmguard library.
 *
 *   pmem-prog write FILE N [OPTIONS]   create FILE (4 MiB), write records
 *        1..N with pmem_memcpy_persist(), then the record count at offset
 *        0.  Options:
 *        --plain        the count with a plain store and pmem_persist(),
 *                       the kind of write `pmguard learn` is for
 *        --flags X      the records with pmem_memcpy(), pmem_memmove()
 *                       and pmem_memset() (in turn) and flags X, which may
 *                       hold bits libpmem does not know (it ignores them)
 *        --close-fds    first close every descriptor from 3 up
 *        --close-stderr first close descriptor 2
 *        --data DATA    then open DATA (append): it gets the lowest free
 *                       descriptor, as a program's own file would
 *   pmem-prog verify FILE K            records 1..K must be intact
 *   pmem-prog unmap FILE PART          create FILE (4 MiB), a mark
 *        "mark%u" at the start of each 512 KiB eighth (u: the eighth)
 *        with pmem_memcpy_persist(), then pmem_unmap() PART of the
 *        mapping: first (half), second (half), middle (the middle half,
 *        eighths 2-5), zero (length 0: the call fails with EINVAL,
 *        nothing unmapped; its result printed) or halves (the first
 *        half, then the second: then exit 0); then a plain store (no window) 1000 bytes into a
 *        still-mapped eighth, its address printed first ("stray at P").
 *        Survived: "the stray store landed", exit 1.
 *   pmem-prog marks FILE               every mark intact (exit 0)
 * Record i (64 bytes at offset 64 * i): "rec%08d" and i in every byte
 * after it.  Exit 0 fine, 1 a record is wrong (printed), 2 usage/IO.
 */
#include <errno.h>
#include <fcntl.h>
#include <libpmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SIZE (4u << 20)
#define REC 64

static void record(char *r, unsigned long i)
{
	memset(r, (int)(i & 0xff), REC);
	snprintf(r, 16, "rec%08lu", i % 100000000ul);
}

/* Record @i at @dst with flags @fl: memcpy, memmove, memset in turn. */
static void put(char *dst, const char *r, unsigned long i, unsigned fl)
{
	switch (i % 3) {
	case 0:
		pmem_memcpy(dst, r, REC, fl);
		break;
	case 1:
		pmem_memmove(dst, r, REC, fl);
		break;
	default:
		pmem_memset(dst, (int)(i & 0xff), REC, fl);
		pmem_memcpy(dst, r, 16, fl);
	}
	if (fl & (PMEM_F_MEM_NODRAIN | PMEM_F_MEM_NOFLUSH))
		pmem_persist(dst, REC);
}

#define EIGHTH (SIZE / 8)

static int unmap_part(const char *file, const char *part)
{
	size_t ml;
	int is_pmem;
	unsigned u, off, n, at;
	int rc;
	char m[16], *p = pmem_map_file(file, SIZE, PMEM_FILE_CREATE, 0600, &ml,
				       &is_pmem);

	if (!p || ml != SIZE) {
		perror(file);
		return 2;
	}
	for (u = 0; u < 8; u++) {
		memset(m, 0, sizeof(m));
		snprintf(m, sizeof(m), "mark%u", u);
		pmem_memcpy_persist(p + u * EIGHTH, m, sizeof(m));
	}
	if (!strcmp(part, "first")) {
		off = 0, n = 4, at = 6;
	} else if (!strcmp(part, "second")) {
		off = 4, n = 4, at = 1;
	} else if (!strcmp(part, "middle")) {
		off = 2, n = 4, at = 7;
	} else if (!strcmp(part, "zero")) {
		off = 0, n = 0, at = 3; /* EINVAL: nothing unmapped */
	} else if (!strcmp(part, "halves")) {
		pmem_unmap(p, SIZE / 2);
		pmem_unmap(p + SIZE / 2, SIZE / 2);
		printf("pmem-prog: both halves unmapped\n");
		return 0;
	} else {
		return 2;
	}
	errno = 0;
	rc = pmem_unmap(p + off * EIGHTH, n * EIGHTH);
	if (!n)
		printf("pmem-prog: pmem_unmap(p, 0) = %d errno %d\n", rc,
		       errno);
	printf("pmem-prog: stray at %p\n", (void *)(p + at * EIGHTH + 1000));
	fflush(stdout);
	p[at * EIGHTH + 1000] = 'X';
	printf("pmem-prog: the stray store landed\n");
	return 1;
}

static int marks(const char *file)
{
	size_t ml;
	int is_pmem, bad = 0;
	unsigned u;
	char m[16], *p = pmem_map_file(file, 0, 0, 0, &ml, &is_pmem);

	if (!p || ml != SIZE)
		return 2;
	for (u = 0; u < 8; u++) {
		memset(m, 0, sizeof(m));
		snprintf(m, sizeof(m), "mark%u", u);
		if (memcmp(p + u * EIGHTH, m, sizeof(m)) ||
		    p[u * EIGHTH + 1000]) {
			printf("pmem-prog: eighth %u changed\n", u);
			bad = 1;
		}
	}
	pmem_unmap(p, ml);
	if (!bad)
		printf("pmem-prog: every mark intact\n");
	return bad;
}

int main(int argc, char **argv)
{
	size_t ml;
	int is_pmem, a, plain = 0, flagged = 0;
	char *p, r[REC];
	unsigned long n, i;
	unsigned fl = 0;

	if (argc == 4 && !strcmp(argv[1], "unmap"))
		return unmap_part(argv[2], argv[3]);
	if (argc == 3 && !strcmp(argv[1], "marks"))
		return marks(argv[2]);
	if (argc < 4)
		return 2;
	n = strtoul(argv[3], NULL, 0);
	if (n > SIZE / REC - 1)
		return 2;
	for (a = 4; a < argc; a++) {
		if (!strcmp(argv[a], "--plain")) {
			plain = 1;
		} else if (!strcmp(argv[a], "--flags") && a + 1 < argc) {
			fl = (unsigned)strtoul(argv[++a], NULL, 0);
			flagged = 1;
		} else if (!strcmp(argv[a], "--close-fds")) {
			for (int fd = 3; fd < 1024; fd++)
				close(fd);
		} else if (!strcmp(argv[a], "--close-stderr")) {
			close(2);
		} else if (!strcmp(argv[a], "--data") && a + 1 < argc) {
			if (open(argv[++a], O_WRONLY | O_CREAT | O_APPEND,
				 0600) < 0) {
				perror(argv[a]);
				return 2;
			}
		} else {
			fprintf(stderr, "pmem-prog: bad option %s\n", argv[a]);
			return 2;
		}
	}
	if (!strcmp(argv[1], "write")) {
		p = pmem_map_file(argv[2], SIZE, PMEM_FILE_CREATE, 0600, &ml,
				  &is_pmem);
		if (!p) {
			perror(argv[2]);
			return 2;
		}
		for (i = 1; i <= n; i++) {
			record(r, i);
			if (flagged)
				put(p + REC * i, r, i, fl);
			else
				pmem_memcpy_persist(p + REC * i, r, REC);
		}
		if (plain) {
			*(volatile unsigned long *)p = n;	/* plain store */
			pmem_persist(p, sizeof(n));
		} else {
			pmem_memcpy_persist(p, &n, sizeof(n));
		}
		pmem_unmap(p, ml);
		printf("pmem-prog: wrote %lu records\n", n);
		return 0;
	}
	p = pmem_map_file(argv[2], 0, 0, 0, &ml, &is_pmem);
	if (!p) {
		perror(argv[2]);
		return 2;
	}
	for (i = 1; i <= n; i++) {
		record(r, i);
		if (memcmp(p + REC * i, r, REC)) {
			printf("pmem-prog: record %lu is corrupted\n", i);
			return 1;
		}
	}
	pmem_unmap(p, ml);
	printf("pmem-prog: %lu records intact\n", n);
	return 0;
}
