# SPDX-License-Identifier: MIT
#
# `pmguard run` / `pmguard learn`: the interposition library and its tests
# (docs/run.md).  Included by the top-level Makefile (it includes every
# mk/*.mk).
#
# needs: liblmdb-dev libpmem-dev libpmem2-dev lmdb-utils python3-lmdb
#        libdw-dev; knot knot-resolver knot-dnsutils dnsperf slapd
#        ldap-utils postfix postfix-lmdb liblmdb-file-perl librust-lmdb-dev
#        cargo gdb strace (servers and runtimes)
#
# Targets:
#   run-lib     $(O)/libpmguard-run.so (also part of `make all`)
#   run-check   the unmodified-program suite (tests/run/, TAP), last line
#               `run: N passed, N failed, N skipped`; part of `make check`
#   run-vm-check  the suite in the PKU guest (guest/vm-run-check: the
#               loader, the programs' libraries and Python with py-lmdb in
#               the initramfs), with test-py.sh, test-rust.sh and
#               test-gdb.sh (Python -X faulthandler, the Rust program,
#               gdb and strace), and the README's `guest/vmrun -- pmguard
#               selftest` exactly as written (a boot of its own, counted
#               in the summary); last line `run-vm: N passed, ...`; part of
#               `make check`
#   run-servers-check  real servers and runtimes, Debian's, under
#               `pmguard run`, each with a wild write into its LMDB map in
#               each mode and a run/plain bench line: Knot DNS (knotd) and
#               Knot Resolver (kresd) on loopback (tests/run/
#               test-servers.sh, about 25 s), OpenLDAP's slapd
#               (test-slapd.sh), Postfix's postmap (test-postfix.sh),
#               Python -X faulthandler with py-lmdb (test-py.sh), a Rust
#               program on the lmdb crate, built offline under
#               $(O)/tests/run/lmdb-rust (test-rust.sh), Perl's LMDB_File
#               (test-perl.sh), and lmdb-prog under gdb and strace
#               (test-gdb.sh); last line `run-servers: N passed, ...`;
#               part of `make check`; each SKIPs without its programs
#               (install-deps), a failure with CI=true
#   run-servers-bench  kresd's qps with a warm and a cold cache, plain vs
#               `pmguard run`, alternated (tests/run/bench-servers.sh)
#   run-bench   the overhead benchmark (tests/run/bench.sh): >= 1,000,000
#               records through lmdb-prog and py-lmdb, unprotected vs
#               `pmguard run` (Debian's mdb_load carries its own LMDB and
#               cannot be interposed)

RUN_LIB  := $(O)/libpmguard-run.so
RUN_TEST_LIBS := $(O)/tests/run/libwild.so $(O)/tests/run/libstopinit.so \
	$(O)/tests/run/stopinit-prog
# The test programs need the libraries' headers; `make` (and `make demo`
# after install-deps --build-only) builds without them and says so.  The
# preload itself needs none of them: it declares what it wraps
# (src/run/libs.h); where all three exist, $(O)/tests/run/libs-abi.o
# checks those declarations against them (tests/run/libs-abi.c).
RUN_TEST_BINS :=
ifeq ($(call have_hdr,libpmem,libpmem.h),1)
RUN_TEST_BINS += $(O)/tests/run/pmem-prog
endif
ifeq ($(call have_hdr,lmdb,lmdb.h),1)
RUN_TEST_BINS += $(O)/tests/run/lmdb-prog
RUN_EXTRA_BINS := $(O)/tests/run/lmdb-early $(O)/tests/run/lmdb-daemon \
	$(O)/tests/run/lmdb-multi $(O)/tests/run/lmdb-locks \
	$(O)/tests/run/lmdb-ownsig
endif
ifeq ($(call have_hdr,libpmem2,libpmem2.h),1)
RUN_TEST_BINS += $(O)/tests/run/pmem2-prog
endif
RUN_MISSING := $(if $(filter 3,$(words $(RUN_TEST_BINS))),,1)
ifneq ($(RUN_MISSING),1)
RUN_TEST_BINS += $(O)/tests/run/libs-abi.o
endif
ifeq ($(RUN_MISSING),1)
$(info run: lmdb.h, libpmem.h or libpmem2.h missing: the run tests' programs are not built (scripts/install-deps))
endif

.PHONY: run-lib run-check run-bench run-vm-check run-servers-check \
	run-servers-bench
all: run-lib
run-lib: $(RUN_LIB) $(RUN_TEST_LIBS) $(RUN_TEST_BINS) $(RUN_EXTRA_BINS)
CHECK_SUITES += run-check run-vm-check run-servers-check

# src/run/*.c, one file per job (src/run/run.h); built as the library's
# own objects are ($(O)/pic/%.o)
RUN_OBJ := $(patsubst %.c,$(O)/pic/%.o,$(wildcard src/run/*.c))

$(RUN_LIB): $(RUN_OBJ) $(SH_OBJ) src/run/preload.map
	$(CC) -shared -Wl,--version-script=src/run/preload.map -Wl,-z,defs \
		$(CFLAGS) -o $@ $(RUN_OBJ) $(SH_OBJ) $(LDLIBS)

$(O)/tests/run/libs-abi.o: tests/run/libs-abi.c
	@mkdir -p $(dir $@)
	$(CC) $(DEPFLAGS) $(BASE) $(CFLAGS) -c $< -o $@

# Test helpers: no pmguard header, no pmguard library.
$(O)/tests/run/libwild.so: tests/run/wild.c
	@mkdir -p $(dir $@)
	$(CC) $(DEPS_BIN) -std=gnu11 $(WARN) $(CFLAGS) -fPIC -shared -o $@ $< -ldl -lpthread

$(O)/tests/run/libstopinit.so: tests/run/stopinit.c
	@mkdir -p $(dir $@)
	$(CC) $(DEPS_BIN) -std=gnu11 $(WARN) $(CFLAGS) -DSTOPINIT_LIB -fPIC -shared -o $@ $<

$(O)/tests/run/stopinit-prog: tests/run/stopinit.c $(O)/tests/run/libstopinit.so
	@mkdir -p $(dir $@)
	$(CC) $(DEPS_BIN) -std=gnu11 $(WARN) $(CFLAGS) -o $@ $< -L$(O)/tests/run \
		-lstopinit -Wl,-rpath,'$$ORIGIN'

$(O)/tests/run/pmem-prog: tests/run/pmem-prog.c
	@mkdir -p $(dir $@)
	$(CC) $(DEPS_BIN) -std=gnu11 $(WARN) $(CFLAGS) -o $@ $< -lpmem

$(O)/tests/run/pmem2-prog: tests/run/pmem2-prog.c
	@mkdir -p $(dir $@)
	$(CC) $(DEPS_BIN) -std=gnu11 $(WARN) $(CFLAGS) -o $@ $< -lpmem2

$(O)/tests/run/lmdb-prog: tests/run/lmdb-prog.c
	@mkdir -p $(dir $@)
	$(CC) $(DEPS_BIN) -std=gnu11 $(WARN) $(CFLAGS) -o $@ $< -llmdb -lpthread

$(O)/tests/run/lmdb-daemon: tests/run/lmdb-daemon.c
	@mkdir -p $(dir $@)
	$(CC) $(DEPS_BIN) -std=gnu11 $(WARN) $(CFLAGS) -o $@ $< -llmdb

$(O)/tests/run/lmdb-multi: tests/run/lmdb-multi.c
	@mkdir -p $(dir $@)
	$(CC) $(DEPS_BIN) -std=gnu11 $(WARN) $(CFLAGS) -o $@ $< -llmdb

# -rdynamic: its pthread_mutex_lock() counts the preload's calls
# (tests/run/lmdb-locks.c)
$(O)/tests/run/lmdb-locks: tests/run/lmdb-locks.c
	@mkdir -p $(dir $@)
	$(CC) $(DEPS_BIN) -std=gnu11 $(WARN) $(CFLAGS) -rdynamic -o $@ $< \
		-llmdb -lpthread -ldl

$(O)/tests/run/lmdb-early: tests/run/lmdb-early.c
	@mkdir -p $(dir $@)
	$(CC) $(DEPS_BIN) -std=gnu11 $(WARN) $(CFLAGS) -o $@ $< -llmdb -lpthread

$(O)/tests/run/lmdb-ownsig: tests/run/lmdb-ownsig.c
	@mkdir -p $(dir $@)
	$(CC) $(DEPS_BIN) -std=gnu11 $(WARN) $(CFLAGS) -o $@ $< -llmdb

# Each backend this machine has: mprotect always, PKU where the CPU has it
# (auto picks it; without PKU the second entry runs mprotect again).
run-check: all
	@if [ "$(RUN_MISSING)" = 1 ]; then \
		echo "run: SKIP: lmdb.h, libpmem.h or libpmem2.h missing"; \
		echo "run: 0 passed, 0 failed, 1 skipped"; \
		[ "$${CI:-}" != true ]; \
	else \
		O=$(O) tests/runtests.sh -t 300 -n run \
		"env PMGUARD_BACKEND=mprotect tests/run/test-run.sh $(O)" \
		"env PMGUARD_BACKEND=auto tests/run/test-run.sh $(O)" \
		"tests/run/test-daemon.sh $(O)" \
		"tests/run/test-privdrop.sh $(O)"; \
	fi

# Real servers and runtimes (Debian's) under `pmguard run`
# (tests/run/test-servers.sh, test-slapd.sh, ...): each SKIPs without
# its programs, a failure with CI=true.
RUN_RUNTIME_TESTS := servers slapd postfix py rust perl gdb
run-servers-check: all
	@O=$(O) tests/runtests.sh -t 240 -n run-servers \
		$(foreach t,$(RUN_RUNTIME_TESTS),"tests/run/test-$(t).sh $(O)")

# The same suite in the PKU guest, on dynamically linked programs.
run-vm-check: all vm-bins
	@if [ "$(RUN_MISSING)" = 1 ]; then \
		echo "run-vm: SKIP: lmdb.h, libpmem.h or libpmem2.h missing"; \
		echo "run-vm: 0 passed, 0 failed, 1 skipped"; \
		[ "$${CI:-}" != true ]; \
	else guest/vm-run-check $(O); fi

run-bench: all
	O=$(O) tests/run/bench.sh

# kresd's queries per second, plain and under `pmguard run`, alternated
# (tests/run/bench-servers.sh; ROUNDS, SECS, NAMES).
run-servers-bench: all
	tests/run/bench-servers.sh $(O)
