# SPDX-License-Identifier: MIT
#
# The PKS/PMEM series for Linux 6.1 (linux/): build it, boot it in QEMU
# TCG, test it.  Included by the top-level Makefile (every mk/*.mk).
# docs/linux.md has the details.
#
# needs: linux-source-6.1 flex bison bc libelf-dev ccache xz-utils
#        e2fsprogs qemu-system-x86 busybox-static cpio fio xfsprogs
#
# Targets:
#   linux          scripts/linux-build: linux-source-6.1 + linux/series +
#                  linux/pmguard.config -> $(O)/linux/{bzImage,
#                  protection_keys,test_pks,...}; cached outside the clone
#                  (PMGUARD_LINUX_CACHE, default /var/cache/pmguard-linux)
#   linux-debug    the same with linux/debug.config on top (PREEMPT,
#                  lockdep, DEBUG_PREEMPT, DEBUG_ATOMIC_SLEEP, DEBUG_LIST)
#                  -> $(O)/linux-debug/, cached the same way
#   linux-check    scripts/linux-check: builds both, then five boots of
#                  the kernel (main, crash9, strict, control, workloads:
#                  fio on ext4/XFS dax, fsdax and 2 MiB devdax) and one of
#                  the debug kernel (debug); last line
#                  `linux: N passed, N failed`
#   linux-bisect-check  build after every patch of the series (not in CI;
#                  slow: one kernel build per patch)
#   linux-mutation-check  scripts/linux-mutation-check: every one-line
#                  mutant of linux/mutants built and booted until a test
#                  fails; all must be caught (not in CI: 3-5 min a mutant)
#   linux-tests    the static guest programs of linux/tests/*.c

LINUX_TEST_SRC := $(wildcard linux/tests/*.c)
LINUX_TESTS    := $(patsubst linux/tests/%.c,$(O)/linux-tests/%,$(LINUX_TEST_SRC))

.PHONY: linux linux-debug linux-check linux-bisect-check linux-mutation-check linux-tests
linux:
	scripts/linux-build --out $(O)/linux

linux-debug:
	scripts/linux-build --config debug --out $(O)/linux-debug

linux-tests: $(LINUX_TESTS)

$(O)/linux-tests/%: linux/tests/%.c linux/tests/tap.h
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -std=gnu11 -Wall -Wextra -Werror -static -o $@ $< -pthread

# Builds first (scripts/linux-check --build: a cache hit takes seconds);
# without root to install linux-source-6.1 it skips, except with CI=true.
linux-check: linux-tests vm-bins
	O=$(O) scripts/linux-check --build

linux-bisect-check:
	scripts/linux-bisect-check --out $(O)/linux-bisect

linux-mutation-check: linux-tests
	O=$(O) scripts/linux-mutation-check
