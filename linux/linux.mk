# SPDX-License-Identifier: MIT
#
# The PKS/PMEM series for Linux 6.12 and 6.1 (linux/6.12/, linux/6.1/):
# build it, boot it in QEMU TCG, test it.  Included by the top-level
# Makefile (after every mk/*.mk).  docs/linux.md has the details.
#
# needs: linux-source-6.12 linux-source-6.1 flex bison bc libelf-dev
#        ccache xz-utils e2fsprogs qemu-system-x86 busybox-static cpio
#        fio xfsprogs
#
# LINUX=6.12 (default) or LINUX=6.1: which kernel, for every target
# below: the series linux/$(LINUX)/series on linux-source-$(LINUX), its
# results in $(O)/linux-$(LINUX) and $(O)/linux-$(LINUX)-debug.  The
# guest tests (linux/tests/) are the same for both.
#
# Targets:
#   linux          linux/scripts/linux-build: linux-source-$(LINUX) + the
#                  series + linux/pmguard.config (+ linux/$(LINUX)/
#                  pmguard.config) -> $(O)/linux-$(LINUX)/{bzImage,
#                  protection_keys,test_pks,...}; cached outside the clone
#                  (PMGUARD_LINUX_CACHE, default /var/cache/pmguard-linux)
#   linux-debug    the same with linux/debug.config on top (PREEMPT,
#                  lockdep, DEBUG_PREEMPT, DEBUG_ATOMIC_SLEEP, DEBUG_LIST)
#                  -> $(O)/linux-$(LINUX)-debug/, cached the same way
#   linux-check    linux/scripts/linux-check: builds both, then five boots of
#                  the kernel (main, crash9, strict, control, workloads:
#                  fio on ext4/XFS dax, fsdax and 2 MiB devdax) and one of
#                  the debug kernel (debug); last line
#                  `linux-VER: N passed, N failed`
#   linux-6.1-check  in make check beside linux-check: 6.1 built and
#                  booted main, crash9, strict, control
#   linux-compile-check  linux/scripts/linux-build --config compile: the
#                  series on a never-booted config with every option a
#                  hunk sits under (KVM_INTEL, XEN_PV, AMD_MEM_ENCRYPT,
#                  ...; linux/compile.config) and DEBUG_ENTRY, so objtool
#                  validates vmlinux.o's noinstr code; fails on any
#                  objtool warning -> $(O)/linux-$(LINUX)-compile/, cached
#                  the same way; last line `linux-compile-VER: N passed,
#                  N failed`; in make check
#   linux-bisect-check  build after every patch of the series (not in CI;
#                  slow: one kernel build per patch; BISECT_CONFIG=compile
#                  builds each with the compile config instead)
#   linux-mutation-check  linux/scripts/linux-mutation-check: every one-line
#                  mutant of linux/$(LINUX)/mutants built and booted until a test
#                  fails; all must be caught (not in CI: 3-5 min a mutant)
#   linux-audit-check, linux-6.1-audit-check  linux/scripts/linux-audit:
#                  the sites of linux/$(LINUX)/audit (linux/6.1/audit)
#                  and the windows left open on some path, with their
#                  negative controls; in make check; last line
#                  `linux-audit-VER: N passed, N failed, N skipped`
#   linux-count-check  linux/scripts/linux-count: the series' kernel and
#                  the unpatched one (linux-build --plain, cached the same
#                  way) booted once each with the TCG counting plugin;
#                  WRMSR to IA32_PKRS and kernel instructions per DAX
#                  read/write, DAX fault, context switch and exception
#                  against tools/tcg/budgets-linux; in make check
#   linux-tests    the static guest programs of linux/tests/*.c

LINUX          ?= 6.12
LINUX_DIR      := $(O)/linux-$(LINUX)

LINUX_TEST_SRC := $(wildcard linux/tests/*.c)
LINUX_TESTS    := $(patsubst linux/tests/%.c,$(O)/linux-tests/%,$(LINUX_TEST_SRC))

.PHONY: linux linux-debug linux-check linux-6.1-check linux-compile-check linux-bisect-check linux-mutation-check linux-tests \
	linux-audit-check linux-6.1-audit-check linux-count-check
linux:
	linux/scripts/linux-build --linux $(LINUX) --out $(LINUX_DIR)

linux-debug:
	linux/scripts/linux-build --linux $(LINUX) --config debug --out $(LINUX_DIR)-debug

linux-tests: $(LINUX_TESTS)

$(O)/linux-tests/%: linux/tests/%.c linux/tests/tap.h linux/tests/kvm-vm.h
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -std=gnu11 -Wall -Wextra -Werror -static -o $@ $< -pthread

# Builds first (linux/scripts/linux-check --build: a cache hit takes seconds);
# without root to install linux-source-$(LINUX) it skips, except with
# CI=true.
linux-check: linux-tests vm-bins
	O=$(O) linux/scripts/linux-check --linux $(LINUX) --build

# make check's second kernel: 6.1 built and booted main, crash9, strict
# and control, the main boot without pmguard's VM binaries (they run on
# 6.12's main boot and on Debian's own 6.1 in vm-check).  The rest of 6.1
# (its workloads and debug boots, one more kernel build, the VM binaries:
# about 5 more minutes of boots) is make linux-check LINUX=6.1; CI's time
# is the reason.
LINUX_61_BOOTS := main crash9 strict control
linux-6.1-check: linux-tests
	O=$(O) linux/scripts/linux-check --linux 6.1 --build --no-vm-tests \
		$(addprefix --boot ,$(LINUX_61_BOOTS))

# The audit of the series (linux/scripts/linux-audit): every kmap(),
# page_address(), phys_to_virt() ... a protected page can reach has a
# verdict in linux/$(LINUX)/audit; two negative controls.  About a
# minute (the source tarball is decompressed once); no kernel build.
CHECK_SUITES += linux-audit-check linux-6.1-audit-check
linux-audit-check:
	linux/scripts/linux-audit --linux $(LINUX) --controls

# The same for 6.1 (linux/6.1/audit), beside linux-audit-check.
linux-6.1-audit-check:
	linux/scripts/linux-audit --linux 6.1 --controls

# The compile-only kernel: compiled, never booted; in make check.  Its
# cold build takes about an hour on a 2-core machine (its own work tree
# and lock: it never holds up the booted kernels); warm, with the
# shared ccache, a changed patch costs a relink and objtool's pass over
# vmlinux.o, 2-3 min (docs/linux.md, "The compile-only kernel").  A
# missing prerequisite (exit 77 of linux-build: linux-source not
# installed, no root) is a skip, except with CI=true.
CHECK_SUITES += linux-compile-check
linux-compile-check:
	@linux/scripts/linux-build --linux $(LINUX) --config compile \
		--out $(LINUX_DIR)-compile; rc=$$?; \
	n=linux-compile-$(LINUX); \
	case $$rc in \
	0) echo "$$n: 1 passed, 0 failed" ;; \
	77) if [ "$${CI:-}" = true ]; then \
		echo "$$n: FAIL: cannot run in CI (above)"; \
		echo "$$n: 0 passed, 1 failed"; exit 1; fi; \
	    echo "$$n: SKIP: linux-build cannot run here (above)"; \
	    echo "$$n: 0 passed, 0 failed, 1 skipped" ;; \
	*) echo "$$n: 0 passed, 1 failed"; exit 1 ;; \
	esac

# BISECT_CONFIG=compile: every patch built with linux/compile.config (a
# cold build of that config first, then 1-3 min a patch).
BISECT_CONFIG ?= main
linux-bisect-check:
	linux/scripts/linux-bisect-check --linux $(LINUX) --config $(BISECT_CONFIG) \
		--out $(LINUX_DIR)-bisect$(if $(filter-out main,$(BISECT_CONFIG)),-$(BISECT_CONFIG))

linux-mutation-check: linux-tests
	O=$(O) linux/scripts/linux-mutation-check --linux $(LINUX)

# The kernel counts (docs/performance.md, "The kernel series: counts"):
# both kernels from the cache (a cold unpatched build is 10-25 min, once),
# two boots of a minute or two.
linux-count-check: $(COUNT_SO) $(O)/linux-tests/count-ops
	O=$(O) linux/scripts/linux-count --linux $(LINUX) --build

CHECK_SUITES += linux-count-check
