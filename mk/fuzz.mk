# SPDX-License-Identifier: MIT
#
# libFuzzer targets (fuzz/fuzz-*.c) with ASan and UBSan.  Included by the
# top-level Makefile (it includes every mk/*.mk); scripts/ci-fuzz runs
# `make fuzz FUZZ_SECONDS=60` for CI.
#
# needs: clang libclang-rt-14-dev
#   (libclang-rt-14-dev holds libFuzzer and clang's sanitizer runtimes; on
#   Debian 12 clang only recommends it, so name it.)
#
# Targets:
#   fuzz-build  the library with clang, -fsanitize=fuzzer-no-link,address,
#               undefined, into $(FUZZ_O); one binary per fuzz/fuzz-*.c
#   fuzz        each target for FUZZ_SECONDS (-max_total_time), seeded from
#               fuzz/corpus/<target>/ (new inputs go to $(FUZZ_O)/corpus/,
#               the seeds are not touched); prints libFuzzer's final
#               statistics (executions, coverage) per target and fails on
#               any crash, leak, timeout or model mismatch (a reproducer is
#               left in $(FUZZ_O)/artifacts/<target>/)
#   fuzz-clean  remove $(FUZZ_O) (also done by `make clean`)
#
# Variables: FUZZ_O (build-fuzz), FUZZ_CC (clang), FUZZ_SECONDS (60),
# FUZZ_TARGETS (all), FUZZ_ARGS (more libFuzzer flags).
#
# Reproduce a crash: ASAN_OPTIONS=handle_segv=0 \
#   build-fuzz/fuzz-NAME build-fuzz/artifacts/NAME/crash-*

FUZZ_O       ?= build-fuzz
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_ARGS    ?=
FUZZ_TARGETS ?= $(patsubst fuzz/fuzz-%.c,%,$(wildcard fuzz/fuzz-*.c))

FUZZ_SAN  := -fsanitize=address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer
FUZZ_LIB  := $(FUZZ_O)/libpmguard.a
FUZZ_BINS := $(addprefix $(FUZZ_O)/fuzz-,$(FUZZ_TARGETS))

# Kept on purpose, as in mk/sanitize.mk: domain handles, outgrown registry
# arrays and replaced observer/callback pairs are never freed.
define FUZZ_LSAN_SUPP
leak:pmg_domain_new
leak:_pmg_reg_insert
leak:pmg_set_fault_observer
leak:pmg_domain_set_callback
endef
export FUZZ_LSAN_SUPP

# handle_segv=0 etc.: as in mk/sanitize.mk, pmguard's SIGSEGV handler must
# see its faults (fuzz-registry and fuzz-pool provoke them on purpose);
# libFuzzer's own handler still catches every other crash.
FUZZ_ENV = ASAN_OPTIONS=handle_segv=0:allow_user_segv_handler=1:detect_leaks=1 \
	LSAN_OPTIONS=suppressions=$(abspath $(FUZZ_O))/lsan.supp:print_suppressions=0 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# max_len per target: options are short strings, registry steps are 4
# bytes (96 at most), pool inputs a 15-byte header and some contents.
FUZZ_MAXLEN_options  := 256
FUZZ_MAXLEN_registry := 384
FUZZ_MAXLEN_pool     := 4096

# Per-input leak checks: an input that leaks (by design: a deleted domain's
# handle) makes libFuzzer rescan the heap, about 0.2 s.  fuzz-registry and
# fuzz-pool delete domains in most inputs, so they leave leak checking to
# LeakSanitizer at exit, which covers the whole run.
FUZZ_FLAGS_registry := -detect_leaks=0
FUZZ_FLAGS_pool     := -detect_leaks=0

.PHONY: fuzz-build fuzz fuzz-clean

# Each target's command line, with its dictionary when it has one.
fuzz_cmd = $(FUZZ_O)/fuzz-$(1) -max_total_time=$(FUZZ_SECONDS) \
	-print_final_stats=1 -timeout=10 -rss_limit_mb=4096 \
	-max_len=$(or $(FUZZ_MAXLEN_$(1)),4096) \
	$(if $(wildcard fuzz/$(1).dict),-dict=fuzz/$(1).dict) \
	-artifact_prefix=$(FUZZ_O)/artifacts/$(1)/ $(FUZZ_FLAGS_$(1)) $(FUZZ_ARGS) \
	$(FUZZ_O)/corpus/$(1) fuzz/corpus/$(1)

fuzz-build: $(FUZZ_BINS)
	@printf '%s\n' "$$FUZZ_LSAN_SUPP" >$(FUZZ_O)/lsan.supp

# The library, instrumented for coverage, by the top-level rules (in the
# sub-make, O is $(FUZZ_O) and the top-level rule makes it).
ifneq ($(O),$(FUZZ_O))
$(FUZZ_LIB): $(LIB_SRC) $(LIB_HDR)
	+@$(MAKE) --no-print-directory O=$(FUZZ_O) CC=$(FUZZ_CC) \
		CFLAGS="-O1 -g -fsanitize=fuzzer-no-link $(FUZZ_SAN)" \
		$(FUZZ_O)/libpmguard.a
endif

# Internal headers (src/options.h) for the option target: the static
# library keeps internal symbols visible.
$(FUZZ_O)/fuzz-%: fuzz/fuzz-%.c $(FUZZ_LIB)
	$(FUZZ_CC) $(DEPS_BIN) $(BASE) -Isrc -O1 -g -fsanitize=fuzzer $(FUZZ_SAN) \
		-o $@ $< $(FUZZ_LIB) $(WRAP) $(LDLIBS)

fuzz: fuzz-build
	@set -u; failed=0; \
	for t in $(FUZZ_TARGETS); do \
		mkdir -p $(FUZZ_O)/corpus/$$t $(FUZZ_O)/artifacts/$$t; \
		rm -f $(FUZZ_O)/artifacts/$$t/*; \
		log=$(FUZZ_O)/fuzz-$$t.log; \
		echo "fuzz-$$t: $(FUZZ_SECONDS) s"; \
		start=$$(date +%s); \
		$(FUZZ_ENV) $(MAKE) --no-print-directory -s fuzz-run-$$t \
			>$$log 2>&1; \
		rc=$$?; \
		execs=$$(sed -n 's/^stat::number_of_executed_units: *//p' $$log); \
		cov=$$(grep -Eo 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[a-zA-Z]*' $$log | tail -n 1); \
		arts=$$(ls $(FUZZ_O)/artifacts/$$t | wc -l); \
		echo "fuzz-$$t: $${execs:-?} executions, $${cov:-no coverage line}, $$(( $$(date +%s) - start )) s, exit $$rc, $$arts artifact(s)"; \
		if [ $$rc -ne 0 ] || [ $$arts -ne 0 ] || [ -z "$$execs" ]; then \
			failed=$$((failed + 1)); \
			echo "fuzz-$$t: FAILED; the end of $$log:"; \
			grep -v '^#[0-9]' $$log | tail -n 40 | sed 's/^/  /'; \
			ls $(FUZZ_O)/artifacts/$$t/* 2>/dev/null | sed 's/^/  reproducer: /'; \
		fi; \
	done; \
	echo "fuzz: $$(( $(words $(FUZZ_TARGETS)) - failed )) passed, $$failed failed"; \
	[ $$failed -eq 0 ]

fuzz-run-%: $(FUZZ_O)/fuzz-%
	$(call fuzz_cmd,$*)

fuzz-clean:
	rm -rf $(FUZZ_O)

clean: fuzz-clean
