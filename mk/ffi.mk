# SPDX-License-Identifier: MIT
#
# make ffi-vm-check: tests/test-ffi.py (the window edges exported out of
# line by src/ffi.c, called from Python ctypes) on the PKU backend in the
# guest, with the host's Python put there (guest/vm-ffi-check).  On the
# mprotect backend the same test runs in `make host-check`.
# needs: python3 zip (and what guest/vmrun needs)

.PHONY: ffi-vm-check
CHECK_SUITES += ffi-vm-check

ffi-vm-check: lib
	@guest/vm-ffi-check $(O)
