# SPDX-License-Identifier: MIT
#
# The dax suite: pools on emulated persistent memory in the PKU guest.
# Included by the top-level Makefile (it includes every mk/*.mk).
#
# needs: e2fsprogs (mkfs.ext4 builds the fs-DAX image on the host), and
#   what the VM suite needs (qemu-system-x86, linux-image-amd64 with its
#   modules, busybox-static, cpio)
#
# Targets:
#   dax-bins   $(O)/dax/dax-test (dynamic, as the VM binaries), and those
#   dax-check  guest/dax-check: boots the guest with two pmem regions
#              (guest/vmrun --pmem), ext4 -o dax on /dev/pmem0 and the
#              second region's namespace switched to device dax; runs
#              tests/dax/suite.sh there; last line `dax: N passed, N
#              failed, N skipped`.  With CI=true it never skips.

.PHONY: dax-bins dax-check

dax-bins: $(O)/dax/dax-test vm-bins

$(O)/dax/dax-test: tests/dax/dax-test.c $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(DEPS_BIN) $(BASE) $(CFLAGS) $(TEST_INC) -o $@ $< $(STATIC) $(WRAP) \
		$(LDLIBS)

dax-check: dax-bins
	O=$(O) guest/dax-check
