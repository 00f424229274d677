# SPDX-License-Identifier: MIT
#
# `make help`: the targets a contributor uses, by tier, with their typical
# time on a 2-core machine (docs/testing.md has the suites in full), and
# `make quick-check`, the fast tier: no root, no QEMU, about 2 minutes.
# scripts/build-check (test "make help") requires every *-check target of
# the makefiles to be listed here, so a new suite cannot go unnamed.
#
# Included by the top-level Makefile (every mk/*.mk).

.PHONY: help quick-check

# The fast tier: what to run after touching src/, tools/, tests/ or man/.
QUICK_SUITES := abi-check host-check

quick-check: all version-check man-check
	@scripts/check-all $(QUICK_SUITES)

define PMG_HELP
pmguard: make targets (typical time on 2 cores; docs/testing.md)

Build
  all (default)        library, CLI, tests, guest binaries, examples   15 s
  demo                 the main job: pmguard demo                      1 min
  bench                every benchmark, a table of ratios              2 min
  install, uninstall   prefix=, DESTDIR=, libdir= ...                  5 s
  deb                  Debian packages in build/deb/ (lintian)         2 min
  format, format-check clang-format on the lines you changed           2 s
  linux, linux-debug   the PKS/PMEM series kernel (LINUX=6.12|6.1)     cached 5 s,
                                                                       cold 10-25 min
  clean                remove the build directory

Tier 1, fast (no root, no QEMU): run after every change
  quick-check          build, version-check, man-check, abi-check,
                       host-check, one closing line                    2 min
    abi-check          exported symbols and struct layouts vs abi/     10 s
    host-check         every host test, mprotect backend               1-1.5 min
    man-check          man pages lint clean, every function documented 5 s

Tier 2, the rest of make check but the kernels (most boot the QEMU TCG guest, -cpu max: PKU and PKS)
  vm-check             the host tests on the PKU backend               5 min
  dax-check            pools on ext4 -o dax and device dax (pmem)      2-3 min
  run-check            pmguard run on LMDB and libpmem programs        2 min
  run-vm-check         the same, and the runtimes, in the PKU guest    6 min
  run-servers-check    knotd, kresd, slapd, postmap, Python, Rust,     1 min
                       Perl, gdb, strace under pmguard run
  ffi-vm-check         the window edges from Python ctypes, PKU guest  30 s
  count-check          exact WRPKRU/syscall/instruction counts per
                       operation (TCG plugin) against tools/tcg/budgets 1 min
  bench-count          the same counts as a table, no budgets          1 min
  examples-check, examples-vm-check  the examples, host and guest      20 s
  install-check        make install into a root, used from there       10 s
  build-check          the build's dependencies, every configuration
                       (WITHOUT=libdw lmdb libpmem libpmem2 valgrind)  4 min
  version-check        one version everywhere                          1 s

Tier 3, the kernels (root to install linux-source; builds are cached)
  linux-check          Linux 6.12 + series: six boots, fio, XFS, dm    5 min warm
  linux-6.1-check      Linux 6.1 + its series: four boots              1 min warm
  linux-audit-check    every unguarded kmap(), every open window judged 1 min
  linux-6.1-audit-check  the same for Linux 6.1                        40 s
  linux-count-check    PKRS writes, kernel instructions per operation:
                       series vs unpatched kernel (TCG plugin) against
                       tools/tcg/budgets-linux                         3 min warm
  linux-compile-check  6.12 + series, every hunk's option on, objtool
                       noinstr validation, never booted                3 min warm,
                                                                       cold 1 h
  linux-bisect-check   build after every patch (not in CI)             hours
  linux-mutation-check every kernel mutant caught (not in CI)          2-3 h

Everything
  check                every suite above but bisect and mutation:
                       the README's test command                       30 min warm
  asan-check, tsan-check, cxx-check   sanitizer builds, C++ header     3 min
  fuzz                 60 s of libFuzzer per target                    3 min
  mutation-check       every library mutant caught                     7 min
  deb-check            the packages built, linted, used                1 min
  CI: bash .ci/run     all of it, and the README's two commands in a
                       clean Debian 12 root (scripts/clean-root-check) 40 min

Variables: O=DIR (build directory), CC=, CFLAGS=, WERROR=0,
  WITHOUT="libdw ..." (build as if an optional dependency were missing),
  LINUX=6.12|6.1, PMGUARD_BACKEND=mprotect|pku (tests).
endef
export PMG_HELP

help:
	@printf '%s\n' "$$PMG_HELP"
