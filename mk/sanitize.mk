# SPDX-License-Identifier: MIT
#
# Sanitizer builds of the library and the host suite, and a C++ build of
# the public header.  Included by the top-level Makefile (it includes every
# mk/*.mk); scripts/ci-sanitizers runs all three for CI.
#
# needs: build-essential clang
#   (gcc 12 brings libasan8, libubsan1, liblsan0 and libtsan2; g++ and
#   libstdc++-12-dev serve g++ and clang++.)
#
# Targets:
#   asan-check  library, CLI and every tests/test-*.c built with
#               -fsanitize=address,undefined into $(ASAN_O), host suite run
#               under it (fault tests included: see ASAN_ENV)
#   tsan-check  the same with -fsanitize=thread into $(TSAN_O); the host
#               suite's binaries under TSan (see TSAN_ENV)
#   cxx-check   include/pmguard.h compiled as C++ (g++ and clang++,
#               -std=c++11 and c++17, -Wall -Wextra -Werror -pedantic):
#               examples/cxx-scope.cc built, linked with $(STATIC), run
#   sanitize-clean  remove $(ASAN_O) $(TSAN_O) (also done by `make clean`)
#
# Variables: ASAN_O (build-asan), TSAN_O (build-tsan), SAN_CC (gcc),
# CXX_COMPILERS (g++ clang++), CXX_STDS (c++11 c++17).
#
# Why gcc for the sanitizer builds: the shared library is linked with
# -Wl,-z,defs; gcc links the sanitizer runtime into a sanitized shared
# object, clang leaves its symbols undefined.

ASAN_O  ?= build-asan
TSAN_O  ?= build-tsan
SAN_CC  ?= gcc
CXX_COMPILERS ?= g++ clang++
CXX_STDS ?= c++11 c++17

ASAN_CFLAGS := -O1 -g -fno-omit-frame-pointer \
	-fsanitize=address,undefined -fno-sanitize-recover=all
# -Wno-tsan: gcc 12 warns (an error with -Werror) that TSan does not model
# atomic_thread_fence(), which the registry's and the pool table's seqlocks
# use; TSan sees those fences as no-ops.  (The seqlock readers' plain loads
# do race with a writer by C11 rules, and TSan says so when pmg_lookup()
# runs concurrently with pmg_protect()/pmg_unprotect(); the host suite does
# not do that on the mprotect backend.)
TSAN_CFLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=thread -Wno-tsan

SAN_TESTS = $(patsubst tests/%.c,%,$(TEST_SRC))

# Leaks kept on purpose (LeakSanitizer would report them):
#  - domain handles are never freed, so that a stale handle is refused
#    instead of acting on a newer domain (src/internal.h, struct _pmg_dom);
#  - registry arrays outgrown are retired, never freed: a lock-free reader
#    may still hold one (src/registry.c);
#  - a replaced fault observer or domain callback pair is retired, never
#    freed: a handler in flight may still read it (src/hooks.c,
#    hook_publish()).
# Each entry names the allocating function; nothing else is suppressed.
define LSAN_SUPP
leak:pmg_domain_new
leak:_pmg_reg_insert
leak:pmg_set_fault_observer
leak:pmg_domain_set_callback
endef
export LSAN_SUPP

# handle_segv=0: the sanitizer installs no SIGSEGV handler of its own, so
#   pmguard's handler sees every fault, and a fault that is not pmguard's
#   gets the default action as in a plain build (test-modes checks both).
#   handle_sigbus=0 likewise: pmguard ends a step on SIGBUS, and the tests
#   check that a store past the end of a file dies of SIGBUS.
#   allow_user_segv_handler=1 lets the library's sigaction() through.
# detect_leaks=1 with the suppressions above; halt_on_error: first error
#   fails the test.
ASAN_OPTS = handle_segv=0:handle_sigbus=0:allow_user_segv_handler=1:detect_leaks=1:halt_on_error=1:abort_on_error=0:check_initialization_order=1:strict_string_checks=1:detect_stack_use_after_return=1
ASAN_ENV = PMGUARD_BACKEND=mprotect ASAN_OPTIONS=$(ASAN_OPTS) \
	LSAN_OPTIONS=suppressions=$(abspath $(ASAN_O))/lsan.supp:print_suppressions=0 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# handle_segv=0 as above: with TSan's own handler, a SIGSEGV that pmguard
#   hands back with SIG_DFL ends in TSan's "DEADLYSIGNAL" exit instead of
#   death by SIGSEGV (test-modes: "a SIGSEGV that is not ours gets the
#   default action" fails).
# second_deadlock_stack=1: both stacks of a lock-order report.
# race_top:^stray$: tests/test-api.c (test_swap) has two threads make
#   deliberate stray writes to the same byte, unsynchronised on purpose;
#   only races whose top frame is a function named stray are ignored.
# race_top:^race_stray$: tests/test-lazywin.c (test_race_whole), the
#   same: stray writers to the same bytes while windows open and close.
# report_signal_unsafe (on by default) checks that the fault handlers
#   call nothing async-signal-unsafe.
define TSAN_SUPP
race_top:^stray$$
race_top:^race_stray$$
endef
export TSAN_SUPP
TSAN_ENV = PMGUARD_BACKEND=mprotect \
	TSAN_OPTIONS=handle_segv=0:halt_on_error=1:second_deadlock_stack=1:report_signal_unsafe=1:suppressions=$(abspath $(TSAN_O))/tsan.supp

.PHONY: asan-build asan-check tsan-build tsan-check cxx-check sanitize-clean

asan-build:
	+@$(MAKE) --no-print-directory O=$(ASAN_O) CC=$(SAN_CC) \
		CFLAGS="$(ASAN_CFLAGS)" lib cli tests
	@printf '%s\n' "$$LSAN_SUPP" >$(ASAN_O)/lsan.supp

tsan-build:
	+@$(MAKE) --no-print-directory O=$(TSAN_O) CC=$(SAN_CC) \
		CFLAGS="$(TSAN_CFLAGS)" lib cli tests
	@printf '%s\n' "$$TSAN_SUPP" >$(TSAN_O)/tsan.supp

# test-shared: the sanitizer runtime must come first in the link order and
# interposes pthread_create itself (it then calls libpmguard.so's through
# RTLD_NEXT, so the interposition still works); test-shared checks which
# object pthread_create resolves to, so libpmguard.so is preloaded to put it
# in front again (verify_asan_link_order=0 lets ASan accept that).
asan-check: asan-build
	@echo "asan: $(SAN_CC) $(ASAN_CFLAGS)"
	@echo "asan: $(ASAN_ENV)"
	@$(ASAN_ENV) tests/runtests.sh -n asan \
		$(addprefix $(ASAN_O)/tests/,$(SAN_TESTS)) \
		"env LD_PRELOAD=$(abspath $(ASAN_O))/libpmguard.so.$(SOVER) ASAN_OPTIONS=$(ASAN_OPTS):verify_asan_link_order=0 $(ASAN_O)/tests/test-shared" \
		"$(ASAN_O)/pmguard selftest"

tsan-check: tsan-build
	@echo "tsan: $(SAN_CC) $(TSAN_CFLAGS)"
	@echo "tsan: $(TSAN_ENV)"
	@$(TSAN_ENV) tests/runtests.sh -n tsan \
		$(addprefix $(TSAN_O)/tests/,$(SAN_TESTS)) \
		"env LD_PRELOAD=$(abspath $(TSAN_O))/libpmguard.so.$(SOVER) $(TSAN_O)/tests/test-shared" \
		"$(TSAN_O)/pmguard selftest"

# The header as C++: every inline window function, PMG_WRITE_SCOPE (GNU
# cleanup attribute: g++ and clang++ support it in C++, and run it when an
# exception unwinds the scope), PMG_WITH_WRITE.  -pedantic is kept: the
# header's extensions are spelled __asm__, __attribute__, __thread and
# __builtin_*, which -pedantic accepts.
CXX_FLAGS := -Wall -Wextra -Werror -pedantic -Wshadow -O2 -g -Iinclude

cxx-check: $(STATIC)
	@mkdir -p $(O)/cxx; pass=0; fail=0; \
	for cxx in $(CXX_COMPILERS); do \
		for std in $(CXX_STDS); do \
			out=$(O)/cxx/cxx-scope-$$cxx-$$std; \
			echo "cxx: $$cxx -std=$$std $(CXX_FLAGS) examples/cxx-scope.cc"; \
			if ! $$cxx -std=$$std $(CXX_FLAGS) -o $$out \
				examples/cxx-scope.cc $(STATIC) $(WRAP) $(LDLIBS); then \
				echo "cxx: $$cxx -std=$$std: does not compile"; \
				fail=$$((fail + 1)); \
			elif ! PMGUARD_BACKEND=mprotect $$out >$$out.log 2>&1; then \
				sed 's/^/  /' $$out.log; \
				echo "cxx: $$cxx -std=$$std: the program failed"; \
				fail=$$((fail + 1)); \
			else \
				sed 's/^/  /' $$out.log; \
				pass=$$((pass + 1)); \
			fi; \
		done; \
	done; \
	echo "cxx: $$pass passed, $$fail failed"; \
	[ $$fail -eq 0 ]

sanitize-clean:
	rm -rf $(ASAN_O) $(TSAN_O)

clean: sanitize-clean
