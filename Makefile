# SPDX-License-Identifier: MIT
#
# pmguard: plain GNU make, no configure step.
#   make            library (static + shared), CLI, tests, VM binaries
#   make check      host suite, VM suite (PKU in QEMU), kernel suite,
#                   Linux 6.1 + the PKS/PMEM series in QEMU (mk/linux.mk)
#   make demo       the main job
# Variables: CC, CFLAGS, O (build dir), WERROR=0 to allow warnings.

VERSION := 0.1.0
SOVER   := 0
O       ?= build
CC      ?= cc
WERROR  ?= 1

WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	   -Wunused-parameter
ifeq ($(WERROR),1)
WARN    += -Werror
endif
CFLAGS  ?= -O2 -g
BASE    := -std=gnu11 -Iinclude $(WARN) -fno-strict-aliasing
LIBFLAGS := $(BASE) -fvisibility=hidden
# Zydis (libzydis-dev) decodes faulting instructions for contain mode.
LDLIBS  := -lZydis -lpthread -ldl
WRAP    := -Wl,--wrap=pthread_create

LIB_SRC := core/core.c $(wildcard src/*.c)
LIB_HDR := include/pmguard.h core/pmg_core.h $(wildcard src/*.h)
ST_OBJ  := $(patsubst %.c,$(O)/static/%.o,$(LIB_SRC))
SH_OBJ  := $(patsubst %.c,$(O)/pic/%.o,$(LIB_SRC))
STATIC  := $(O)/libpmguard.a
SHARED  := $(O)/libpmguard.so.$(VERSION)

CLI_SRC := $(wildcard tools/*.c)
CLI_HDR := $(wildcard tools/*.h)
# Headers the tests include: their own, the two they share with the CLI
# (tools/probe.h, tools/check.h) and the library's, public and internal.
TEST_HDR := $(wildcard tests/*.h) tools/probe.h tools/check.h $(LIB_HDR)
TEST_INC := -Itests -Itools
TEST_SRC := $(wildcard tests/test-*.c)
TESTS   := $(patsubst tests/%.c,$(O)/tests/%,$(TEST_SRC))
VM_BIN  := $(O)/vm/bin/pmguard $(patsubst tests/%.c,$(O)/vm/bin/%,$(TEST_SRC))

.PHONY: all lib cli tests vm-bins check host-check vm-check demo clean \
	format format-check bench
all: lib cli tests vm-bins examples

lib: $(STATIC) $(SHARED)

$(O)/static/%.o: %.c $(LIB_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(LIBFLAGS) $(CFLAGS) -c $< -o $@

$(O)/pic/%.o: %.c $(LIB_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(LIBFLAGS) $(CFLAGS) -fPIC -DPMG_SHARED -c $< -o $@

$(STATIC): $(ST_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(SHARED): $(SH_OBJ) src/libpmguard.map
	$(CC) -shared -Wl,-soname,libpmguard.so.$(SOVER) \
		-Wl,--version-script=src/libpmguard.map -Wl,-z,defs \
		-Wl,-z,nodelete \
		$(CFLAGS) -o $@ $(SH_OBJ) $(LDLIBS)
	ln -sf libpmguard.so.$(VERSION) $(O)/libpmguard.so.$(SOVER)
	ln -sf libpmguard.so.$(SOVER) $(O)/libpmguard.so

cli: $(O)/pmguard

# $(O)/gen/pmg_paths.h: where `make install` puts libpmguard-run.so
# (mk/install.mk).
$(O)/pmguard: $(CLI_SRC) $(CLI_HDR) $(STATIC) $(O)/gen/pmg_paths.h
	$(CC) $(BASE) $(CFLAGS) -Itools -I$(O)/gen -o $@ $(CLI_SRC) \
		$(STATIC) $(WRAP) $(LDLIBS) -lm

tests: $(TESTS) $(O)/tests/test-shared

# The shared library as users link it: no --wrap, pthread_create interposed.
$(O)/tests/test-shared: tests/shared/test-shared.c $(TEST_HDR) $(SHARED)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) $(TEST_INC) -o $@ $< -L$(O) -lpmguard \
		-Wl,-rpath,$(abspath $(O)) -lpthread -ldl

# test-dlopen loads the shared library itself: links neither library.
$(O)/tests/test-dlopen: tests/test-dlopen.c $(TEST_HDR) $(SHARED)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) $(TEST_INC) -o $@ $< -ldl -lpthread

$(O)/vm/bin/test-dlopen: $(O)/tests/test-dlopen
	@mkdir -p $(dir $@)
	cp $< $@

$(O)/tests/%: tests/%.c $(TEST_HDR) $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) $(TEST_INC) -o $@ $< $(STATIC) $(WRAP) $(LDLIBS)

# Binaries for the PKU guest: dynamically linked (Debian ships Zydis as a
# shared library only); scripts/vm-suite puts the loader and their
# libraries (ldd) into the initramfs.  test-shared runs there too.
VM_BIN  += $(O)/vm/bin/test-shared $(O)/vm/bin/test-contain-campaign
vm-bins: $(VM_BIN)

$(O)/vm/bin/test-contain-campaign: tests/vm/test-contain-campaign
	@mkdir -p $(dir $@)
	cp $< $@

$(O)/vm/bin/pmguard: $(CLI_SRC) $(CLI_HDR) $(STATIC) $(O)/gen/pmg_paths.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) -Itools -I$(O)/gen -o $@ $(CLI_SRC) $(STATIC) \
		$(WRAP) $(LDLIBS) -lm

$(O)/vm/bin/test-shared: $(O)/tests/test-shared
	@mkdir -p $(dir $@)
	cp $< $@

$(O)/vm/bin/%: tests/%.c $(TEST_HDR) $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) $(TEST_INC) -o $@ $< $(STATIC) $(WRAP) $(LDLIBS)

# ---- tests -----------------------------------------------------------
# Suites whose totals add up in the closing line of `make check`.
CHECK_SUITES := host-check vm-check dax-check kernel-check install-check \
		examples-check examples-vm-check linux-check

check: all version-check man-check
	@scripts/check-all $(CHECK_SUITES)

# The contain-mode campaign (tests/vm/test-contain-campaign): 100000 stray
# writes in the guest, fewer here.
HOST_CAMPAIGN := env PMGUARD_TEST_CONTAIN_WRITES=20000 \
		 tests/vm/test-contain-campaign

# The host suite runs the mprotect backend (lazy write windows, the
# default), the pure core and the bad-input tests; PKU tests say SKIP here
# and run in the VM.  The window, mode, thread, contain and persistence
# tests run a second time with the eager windows
# (PMGUARD_MPROTECT_WINDOWS=eager), a supported setting of their own.
EAGER_TESTS := test-windows test-modes test-threads test-api test-contain \
	       test-persist
host-check: all
	PMGUARD_BACKEND=mprotect PMGUARD_CLI=$(O)/pmguard O=$(O) \
		tests/runtests.sh -n host \
		$(TESTS) $(O)/tests/test-shared "$(O)/pmguard selftest" \
		"$(HOST_CAMPAIGN)" \
		$(foreach t,$(EAGER_TESTS),"env PMGUARD_MPROTECT_WINDOWS=eager $(O)/tests/$(t)")

vm-check: vm-bins
	O=$(O) scripts/vm-suite

demo: all
	$(O)/pmguard demo

bench: all
	$(O)/pmguard bench window

# Formatting (.clang-format, docs/contributing.md): only the lines that
# differ from $(FORMAT_BASE) (default HEAD: what you have not committed;
# FORMAT_BASE=main for a whole branch), through clang-format-diff, and
# new untracked C files whole; never the whole tree.  format-check prints
# what format would change and fails if anything.
CLANG_FORMAT      ?= clang-format
CLANG_FORMAT_DIFF ?= clang-format-diff
FORMAT_BASE       ?= HEAD
FORMAT_DIRS       := src tools include core tests examples fuzz kernel
FORMAT_NEW         = $(filter %.c %.h,$(shell git ls-files --others \
			--exclude-standard -- $(FORMAT_DIRS) 2>/dev/null))
format_diff        = git diff -U0 --no-color $(FORMAT_BASE) -- \
			$(addsuffix /*.c,$(FORMAT_DIRS)) \
			$(addsuffix /*.h,$(FORMAT_DIRS)) | \
			$(CLANG_FORMAT_DIFF) -p1 -binary $(CLANG_FORMAT)

format:
	@$(format_diff) -i
	@$(if $(FORMAT_NEW),$(CLANG_FORMAT) -i $(FORMAT_NEW))
	@echo "format: lines changed since $(FORMAT_BASE)$(if \
		$(FORMAT_NEW), and $(FORMAT_NEW)) formatted"

format-check:
	@out=$$($(format_diff); $(if $(FORMAT_NEW),for f in $(FORMAT_NEW); \
		do $(CLANG_FORMAT) "$$f" | diff -u "$$f" - ; done)); \
	if [ -n "$$out" ]; then \
		printf '%s\n' "$$out"; \
		echo "format-check: the diff above would be applied"; exit 1; \
	fi; echo "format-check: clean"

clean: kernel-clean
	rm -rf $(O)

# Fragments: install (mk/install.mk), sanitizers, fuzzing, examples.
-include $(sort $(wildcard mk/*.mk))

-include kernel/kernel.mk
ifeq ($(wildcard kernel/kernel.mk),)
.PHONY: kernel-check kernel-clean
kernel-check:
	@echo "kernel: not built yet"; false
kernel-clean:
endif
