# SPDX-License-Identifier: MIT
#
# The supervisor-mode kernel: a make fragment.  The top-level Makefile
# includes it; it also works alone:
#
#	make -f kernel/kernel.mk kernel-check
#
# Targets: kernel (build), kernel-check (build, boot, test), kernel-clean.
# Every variable here is KERNEL_* or _k_* so nothing collides with the
# includer's; the ?= ones may be overridden from the command line.

_k_standalone := $(if $(filter 1,$(words $(MAKEFILE_LIST))),y)
_k_saved_goal := $(.DEFAULT_GOAL)
_k_dir := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
# "" when run from the top directory, else "TOP/": keeps paths short.
_k_pre := $(filter-out ./,$(dir $(_k_dir)))

KERNEL_CC ?= gcc
KERNEL_LD ?= ld
KERNEL_OBJCOPY ?= objcopy
KERNEL_NM ?= nm
# Under the includer's build directory O when it has one.
KERNEL_BUILD ?= $(if $(O),$(O)/kernel,$(_k_pre)build/kernel)
KERNEL_QEMU ?= qemu-system-x86_64

# Linked at 1 MiB, so the small code model fits; no PIC, no red zone (the
# CPU pushes exception frames onto the interrupted stack), no SSE (the
# context switch does not save vector registers).
KERNEL_CFLAGS ?= -O2 -g
_k_cflags := $(KERNEL_CFLAGS) -std=gnu11 -Wall -Wextra -Werror \
	-ffreestanding -fno-builtin -nostdlib -fno-pic -fno-pie \
	-mcmodel=small -mno-red-zone -mgeneral-regs-only \
	-fno-stack-protector -fno-omit-frame-pointer \
	-fno-asynchronous-unwind-tables -fcf-protection=none \
	-MMD -MP

_k_csrc := main.c console.c lib.c mm.c traps.c pks.c sched.c smp.c \
	memremap.c dax.c pks_test.c ksyms.c
_k_asrc := head.S entry.S trampoline.S

_k_objs := $(addprefix $(KERNEL_BUILD)/,$(_k_asrc:.S=.o) $(_k_csrc:.c=.o)) \
	$(KERNEL_BUILD)/core/core.o

KERNEL_ELF64 := $(KERNEL_BUILD)/pmguard-kernel64.elf
KERNEL_IMAGE := $(KERNEL_BUILD)/pmguard-kernel.elf

.PHONY: kernel kernel-check kernel-clean

kernel: $(KERNEL_IMAGE)

# QEMU's Multiboot loader takes 32-bit ELF only: same bytes, elf32 wrapper.
$(KERNEL_IMAGE): $(KERNEL_ELF64)
	$(KERNEL_OBJCOPY) -O elf32-i386 $< $@

_k_ld = $(KERNEL_LD) -nostdlib -static -z max-page-size=0x1000 \
	-z noexecstack -T $(_k_dir)/kernel.ld
_k_textsyms = $(KERNEL_NM) -n $(1) | awk '$$2 ~ /^[tT]$$/' >$(2)

# Two links, as Linux does for kallsyms: the first with an empty symbol
# table, the second with the table of the first's text symbols.  The table
# sits after .rodata, so .text cannot move; checked, not assumed.
$(KERNEL_BUILD)/ksymtab0.S: $(_k_dir)/ksyms.awk
	@mkdir -p $(dir $@)
	awk -f $(_k_dir)/ksyms.awk </dev/null >$@

$(KERNEL_BUILD)/pass1.elf: $(_k_objs) $(KERNEL_BUILD)/ksymtab0.o \
		$(_k_dir)/kernel.ld
	$(_k_ld) -o $@ $(_k_objs) $(KERNEL_BUILD)/ksymtab0.o

$(KERNEL_BUILD)/ksymtab.S: $(KERNEL_BUILD)/pass1.elf $(_k_dir)/ksyms.awk
	$(KERNEL_NM) -n $< | awk -f $(_k_dir)/ksyms.awk >$@

$(KERNEL_BUILD)/ksymtab0.o: $(KERNEL_BUILD)/ksymtab0.S
	$(KERNEL_CC) $(_k_cflags) -c $< -o $@

$(KERNEL_BUILD)/ksymtab.o: $(KERNEL_BUILD)/ksymtab.S
	$(KERNEL_CC) $(_k_cflags) -c $< -o $@

$(KERNEL_ELF64): $(_k_objs) $(KERNEL_BUILD)/ksymtab.o $(_k_dir)/kernel.ld
	$(_k_ld) -o $@ $(_k_objs) $(KERNEL_BUILD)/ksymtab.o
	@$(call _k_textsyms,$(KERNEL_BUILD)/pass1.elf,$@.syms1)
	@$(call _k_textsyms,$@,$@.syms2)
	@cmp -s $@.syms1 $@.syms2 || { \
		echo "kernel: .text moved between the links" >&2; \
		rm -f $@; exit 1; }
	@rm -f $@.syms1 $@.syms2

$(KERNEL_BUILD)/%.o: $(_k_dir)/%.c
	@mkdir -p $(dir $@)
	$(KERNEL_CC) $(_k_cflags) -c $< -o $@

$(KERNEL_BUILD)/%.o: $(_k_dir)/%.S
	@mkdir -p $(dir $@)
	$(KERNEL_CC) $(_k_cflags) -c $< -o $@

# The shared core, compiled from its own path (not copied).
$(KERNEL_BUILD)/core/core.o: $(_k_pre)core/core.c
	@mkdir -p $(dir $@)
	$(KERNEL_CC) $(_k_cflags) -c $< -o $@

kernel-check: $(KERNEL_IMAGE)
	KERNEL_QEMU=$(KERNEL_QEMU) $(_k_pre)scripts/kernel-check $(KERNEL_IMAGE)

kernel-clean:
	rm -rf $(KERNEL_BUILD)

-include $(_k_objs:.o=.d)

# Included: do not let our first target become the includer's default.
ifeq ($(_k_standalone),)
.DEFAULT_GOAL := $(_k_saved_goal)
endif
