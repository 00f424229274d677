# SPDX-License-Identifier: MIT
#
# make mutation-check: apply each mutant in tests/mutation/mutants to a
# scratch copy of the tree, rebuild what its suite needs, run the suite and
# require it to fail (scripts/mutation-check).  Ends with
# "mutation: N passed, N failed"; a pass is a caught mutant.

.PHONY: mutation-check

mutation-check:
	scripts/mutation-check
