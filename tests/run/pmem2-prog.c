// SPDX-License-Identifier: MIT
/*
 * pmem2-prog: a small libpmem2 program for the `pmguard run` tests (no
 * pmguard header).  pmem2-prog FILE N [--plain]: map the existing FILE
 * (4 MiB; pmem-prog creates it), write records 1..N with the map's
 * memcpy_fn (pmem-prog's layout, so that `pmem-prog verify` checks them)
 * and the count at offset 0 with memset_fn + memcpy_fn (--plain: with a
 * plain store, which `pmguard run` must catch).  --flags X: the records
 * with memcpy_fn, memmove_fn and memset_fn in turn, flags X (which may
 * hold bits libpmem2 does not know: it ignores them).  --unmap-half:
 * then munmap() the map's second half and make a plain store into record
 * 1, its address printed first ("stray at P"); survived: "the stray store
 * landed", exit 1.  Exit 0 / 2.
 */
#include <fcntl.h>
#include <libpmem2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define REC 64

int main(int argc, char **argv)
{
	struct pmem2_config *cfg;
	struct pmem2_source *src;
	struct pmem2_map *map;
	pmem2_memcpy_fn cpy;
	pmem2_memset_fn set;
	pmem2_memmove_fn mov;
	unsigned long n, i;
	unsigned fl = 0;
	int a, plain = 0, unmap_half = 0;
	char *p, r[REC];
	int fd;

	if (argc < 3)
		return 2;
	n = strtoul(argv[2], NULL, 0);
	for (a = 3; a < argc; a++) {
		if (!strcmp(argv[a], "--plain"))
			plain = 1;
		else if (!strcmp(argv[a], "--unmap-half"))
			unmap_half = 1;
		else if (!strcmp(argv[a], "--flags") && a + 1 < argc)
			fl = (unsigned)strtoul(argv[++a], NULL, 0);
		else
			return 2;
	}
	fd = open(argv[1], O_RDWR);
	if (fd < 0 || pmem2_source_from_fd(&src, fd) ||
	    pmem2_config_new(&cfg) ||
	    pmem2_config_set_required_store_granularity(cfg,
						PMEM2_GRANULARITY_PAGE) ||
	    pmem2_map_new(&map, cfg, src)) {
		pmem2_perror("pmem2-prog");
		return 2;
	}
	p = pmem2_map_get_address(map);
	if (n > pmem2_map_get_size(map) / REC - 1)
		return 2;
	cpy = pmem2_get_memcpy_fn(map);
	set = pmem2_get_memset_fn(map);
	mov = pmem2_get_memmove_fn(map);
	for (i = 1; i <= n; i++) {
		memset(r, (int)(i & 0xff), REC);
		snprintf(r, 16, "rec%08lu", i % 100000000ul);
		if (i % 3 == 0) {
			cpy(p + REC * i, r, REC, fl);
		} else if (i % 3 == 1) {
			mov(p + REC * i, r, REC, fl);
		} else {
			set(p + REC * i, (int)(i & 0xff), REC, fl);
			cpy(p + REC * i, r, 16, fl);
		}
	}
	set(p, 0, sizeof(n), 0);
	if (plain)
		*(volatile unsigned long *)p = n;	/* plain store */
	else
		cpy(p, &n, sizeof(n), 0);
	if (unmap_half) {
		size_t half = pmem2_map_get_size(map) / 2;

		if (munmap(p + half, half))
			return 2;
		printf("pmem2-prog: stray at %p\n", (void *)(p + REC + 20));
		fflush(stdout);
		p[REC + 20] = 'X';
		printf("pmem2-prog: the stray store landed\n");
		return 1;
	}
	pmem2_map_delete(&map);
	pmem2_config_delete(&cfg);
	pmem2_source_delete(&src);
	close(fd);
	printf("pmem2-prog: wrote %lu records\n", n);
	return 0;
}
