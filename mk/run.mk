# SPDX-License-Identifier: MIT
#
# `pmguard run` / `pmguard learn`: the interposition library and its tests
# (docs/run.md).  Included by the top-level Makefile (it includes every
# mk/*.mk).
#
# needs: liblmdb-dev libpmem-dev libpmem2-dev lmdb-utils python3-lmdb
#        libdw-dev
#
# Targets:
#   run-lib     $(O)/libpmguard-run.so (also part of `make all`)
#   run-check   the unmodified-program suite (tests/run/, TAP), last line
#               `run: N passed, N failed, N skipped`; part of `make check`
#   run-vm-check  the suite in the PKU guest (scripts/vm-run-check: the
#               loader, the programs' libraries and Python with py-lmdb in
#               the initramfs), last line `run-vm: N passed, ...`; part of
#               `make check`
#   run-bench   the overhead benchmark (tests/run/bench.sh): >= 1,000,000
#               records through lmdb-prog and py-lmdb, unprotected vs
#               `pmguard run` (Debian's mdb_load carries its own LMDB and
#               cannot be interposed)

RUN_LIB  := $(O)/libpmguard-run.so
RUN_TEST_LIBS := $(O)/tests/run/libwild.so
RUN_TEST_BINS := $(O)/tests/run/pmem-prog $(O)/tests/run/lmdb-prog \
		 $(O)/tests/run/pmem2-prog

.PHONY: run-lib run-check run-bench run-vm-check
all: run-lib
run-lib: $(RUN_LIB) $(RUN_TEST_LIBS) $(RUN_TEST_BINS)
CHECK_SUITES += run-check run-vm-check

$(O)/pic/src/run/preload.o: src/run/preload.c $(LIB_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(LIBFLAGS) $(CFLAGS) -fPIC -DPMG_SHARED -c $< -o $@

$(RUN_LIB): $(O)/pic/src/run/preload.o $(SH_OBJ) src/run/preload.map
	$(CC) -shared -Wl,--version-script=src/run/preload.map -Wl,-z,defs \
		$(CFLAGS) -o $@ $(O)/pic/src/run/preload.o $(SH_OBJ) $(LDLIBS)

# Test helpers: no pmguard header, no pmguard library.
$(O)/tests/run/libwild.so: tests/run/wild.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) $(CFLAGS) -fPIC -shared -o $@ $< -ldl -lpthread

$(O)/tests/run/pmem-prog: tests/run/pmem-prog.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) $(CFLAGS) -o $@ $< -lpmem

$(O)/tests/run/pmem2-prog: tests/run/pmem2-prog.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) $(CFLAGS) -o $@ $< -lpmem2

$(O)/tests/run/lmdb-prog: tests/run/lmdb-prog.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) $(CFLAGS) -o $@ $< -llmdb

# Each backend this machine has: mprotect always, PKU where the CPU has it
# (auto picks it; without PKU the second entry runs mprotect again).
run-check: all
	O=$(O) tests/runtests.sh -t 300 -n run \
		"env PMGUARD_BACKEND=mprotect tests/run/test-run.sh $(O)" \
		"env PMGUARD_BACKEND=auto tests/run/test-run.sh $(O)"

# The same suite in the PKU guest, on dynamically linked programs.
run-vm-check: all
	@scripts/vm-run-check $(O)

run-bench: all
	O=$(O) tests/run/bench.sh
