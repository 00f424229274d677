# SPDX-License-Identifier: MIT
#
# Exact counts per operation from a QEMU TCG plugin (docs/performance.md,
# "Counts, not times").  Included by the top-level Makefile (it includes
# every mk/*.mk).
#
# Targets:
#   $(O)/tcg/count.so  the counting plugin (tools/tcg/count.c; part of
#               `make all`): instructions, WRPKRU, RDPKRU, WRMSR, SYSCALL
#               in user and kernel mode between two marker NOPs
#               (tools/tcg/marker.h)
#   $(O)/tcg/lmdb-count  LMDB transactions in marked regions (where
#               lmdb.h is found; part of `make all`)
#   bench-count  boots the PKU guest once with the plugin and prints the
#               table: per operation, `pmguard bench count` on PKU and on
#               the mprotect backend, lazy and eager, and lmdb-count plain
#               and under `pmguard run` (guest/count-check --table-only)
#   count-check  the same, then every row of the budget table
#               tools/tcg/budgets, and a negative control (TAP); last line
#               `count: N passed, N failed, N skipped`; part of `make
#               check`; SKIP without QEMU, a failure with CI=true

COUNT_SO := $(O)/tcg/count.so

.PHONY: bench-count count-check
all: $(COUNT_SO)

# A plugin is loaded by QEMU: position-independent, only its two
# qemu_plugin_* symbols exported; QEMU's own symbols resolve at load time.
$(COUNT_SO): tools/tcg/count.c tools/tcg/marker.h
	@mkdir -p $(dir $@)
	$(CC) $(DEPS_BIN) -std=gnu11 $(WARN) $(CFLAGS) -fPIC -shared \
		-fvisibility=hidden -Itools/tcg -o $@ $<

# LMDB transactions plain and under `pmguard run` (tools/tcg/lmdb-count.c),
# where lmdb.h is found; count-check says SKIP for them otherwise.
ifeq ($(call have_hdr,lmdb,lmdb.h),1)
COUNT_LMDB := $(O)/tcg/lmdb-count
all: $(COUNT_LMDB)

$(COUNT_LMDB): tools/tcg/lmdb-count.c tools/tcg/marker.h
	@mkdir -p $(dir $@)
	$(CC) $(DEPS_BIN) -std=gnu11 $(WARN) $(CFLAGS) -Itools/tcg -o $@ $< \
		-llmdb
endif

bench-count: $(COUNT_SO) $(COUNT_LMDB) vm-bins run-lib
	@guest/count-check --table-only $(O)

count-check: $(COUNT_SO) $(COUNT_LMDB) vm-bins run-lib
	@guest/count-check $(O)

CHECK_SUITES += count-check
