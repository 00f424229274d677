// SPDX-License-Identifier: MIT
/*
 * pmem-prog: a small libpmem program for the `pmguard run` tests.  It
 * includes no pmguard header and links no pmguard library.
 *
 *   pmem-prog write FILE N [--plain]   create FILE (4 MiB), write records
 *        1..N with pmem_memcpy_persist(), then the record count at offset
 *        0 (--plain: with a plain store and pmem_persist(), the kind of
 *        write `pmguard learn` is for)
 *   pmem-prog verify FILE K            records 1..K must be intact
 * Record i (64 bytes at offset 64 * i): "rec%08d" and i in every byte
 * after it.  Exit 0 fine, 1 a record is wrong (printed), 2 usage/IO.
 */
#include <libpmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIZE (4u << 20)
#define REC 64

static void record(char *r, unsigned long i)
{
	memset(r, (int)(i & 0xff), REC);
	snprintf(r, 16, "rec%08lu", i % 100000000ul);
}

int main(int argc, char **argv)
{
	size_t ml;
	int is_pmem;
	char *p, r[REC];
	unsigned long n, i;

	if (argc < 4)
		return 2;
	n = strtoul(argv[3], NULL, 0);
	if (n > SIZE / REC - 1)
		return 2;
	if (!strcmp(argv[1], "write")) {
		p = pmem_map_file(argv[2], SIZE, PMEM_FILE_CREATE, 0600, &ml,
				  &is_pmem);
		if (!p) {
			perror(argv[2]);
			return 2;
		}
		for (i = 1; i <= n; i++) {
			record(r, i);
			pmem_memcpy_persist(p + REC * i, r, REC);
		}
		if (argc > 4 && !strcmp(argv[4], "--plain")) {
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
