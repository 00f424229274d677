# SPDX-License-Identifier: MIT
#
# Example programs (examples/): built against the static library as a user
# would link it (libpmguard.a + -Wl,--wrap=pthread_create).  Included by
# the top-level Makefile (it includes every mk/*.mk).
#
# needs: liblmdb-dev g++ python3
#   (liblmdb-dev: examples/lmdb-writemap.c, tests/examples/lmdb-daemon.c;
#   g++ (build-essential): examples/cxx-scope.cc; python3:
#   tests/examples/test-systemd.py.)
#
# Targets:
#   examples        build $(O)/examples/*
#   examples-check  run them through tests/runtests.sh (TAP, each under a
#                   timeout), and tests/examples/test-systemd.py: the
#                   systemd drop-ins of examples/systemd/ started as
#                   systemd would, on a staged `make install`, with
#                   tests/examples/lmdb-daemon as the service; last line
#                   `examples: N passed, N failed, N skipped`
#   examples-vm-check  the same, in the PKU guest
#                   (guest/vmrun, about 15 s): the PKU side of
#                   lmdb-writemap (a wild write during an open transaction
#                   window faults); last line `examples-vm: ...`
#
# Variables: CXX (g++).

CXX ?= g++

EX_C    := $(wildcard examples/*.c)
EX_CC   := $(wildcard examples/*.cc)
EX_NAMES := $(patsubst examples/%.c,%,$(EX_C)) $(patsubst examples/%.cc,%,$(EX_CC))
# `make` builds the examples too; without liblmdb-dev it leaves the LMDB one
# out and says so (examples-check then fails under CI=true).
HAVE_LMDB := $(call have_hdr,lmdb,lmdb.h)
ifneq ($(HAVE_LMDB),1)
EX_NAMES := $(filter-out lmdb-writemap,$(EX_NAMES))
$(info examples: no <lmdb.h> (liblmdb-dev): examples/lmdb-writemap.c left out)
endif
EX_BINS := $(addprefix $(O)/examples/,$(EX_NAMES))
EX_VM_BINS := $(addprefix $(O)/vm/examples/,$(EX_NAMES))

# Libraries an example needs besides ours.
EX_LIBS_lmdb-writemap := -llmdb

.PHONY: examples examples-check examples-vm-check

# The systemd examples' stand-in daemon: no pmguard header or library.
EX_SYSTEMD := $(if $(filter 1,$(HAVE_LMDB)),$(O)/tests/examples/lmdb-daemon)

examples: $(EX_BINS) $(EX_SYSTEMD)

$(O)/tests/examples/lmdb-daemon: tests/examples/lmdb-daemon.c
	@mkdir -p $(dir $@)
	$(CC) $(DEPS_BIN) -std=gnu11 $(WARN) $(CFLAGS) -o $@ $< -llmdb

$(O)/examples/%: examples/%.c $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(DEPS_BIN) $(BASE) $(CFLAGS) -o $@ $< $(STATIC) $(WRAP) \
		$(EX_LIBS_$*) $(LDLIBS)

$(O)/examples/%: examples/%.cc $(STATIC)
	@mkdir -p $(dir $@)
	$(CXX) $(DEPS_BIN) -std=c++11 -Iinclude -Wall -Wextra -Werror $(CFLAGS) -o $@ $< \
		$(STATIC) $(WRAP) $(EX_LIBS_$*) $(LDLIBS)

examples-check: examples $(EX_SYSTEMD) install-bins $(O)/tests/run/libwild.so
	@if [ "$(HAVE_LMDB)" != 1 ] && [ "$${CI:-}" = true ]; then \
		echo "examples: lmdb-writemap, lmdb-daemon not built (no liblmdb-dev)"; \
		echo "examples: 0 passed, 1 failed"; exit 1; fi
	@tests/runtests.sh -t 120 -n examples $(EX_BINS) \
		$(if $(EX_SYSTEMD),"tests/examples/test-systemd.py $(O)")

# For the guest: the host's binaries (the same command built them twice,
# byte-identical), hard-linked as $(O)/vm/bin's (Makefile);
# guest/vm-libs puts the loader and their libraries into the initramfs.
$(O)/vm/examples/%: $(O)/examples/%
	@mkdir -p $(dir $@)
	ln -f $< $@

examples-vm-check: $(EX_VM_BINS)
	@if ! why=$$(guest/vmrun --check 2>&1); then \
		echo "examples-vm: SKIP: $$why"; \
		echo "examples-vm: 0 passed, 0 failed, 1 skipped"; \
		[ "$${CI:-}" != true ]; \
	else \
		guest/vmrun --timeout 300 --bindir $(O)/vm/examples \
			$$(guest/vm-libs $(EX_VM_BINS)) \
			--add tests/runtests.sh:/bin/runtests.sh -- \
			/bin/runtests.sh -t 120 -n examples-vm \
			$(addprefix /bin/,$(EX_NAMES)); \
	fi
