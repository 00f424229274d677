# SPDX-License-Identifier: MIT
#
# tests/test-edgerace: the library's raw mprotect wrapped
# (tests/test-edgerace.c says why), so that a window edge can be made to
# land just before the fault path's mprotect(2).  Test-only: the shipped
# libraries have no such hook.

$(O)/tests/test-edgerace: WRAP += -Wl,--wrap=_pmg_mprotect
