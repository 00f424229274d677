# SPDX-License-Identifier: MIT
#
# make abi-check: the exported symbols (with their version nodes) and the
# public structs' layouts against the baseline in abi/, and no test hook in
# the shipped libraries (scripts/abi-check; docs/api.md "ABI").  After an
# intended change: scripts/abi-check --update, and say why in the commit.

.PHONY: abi-check

abi-check: lib
	@O=$(O) scripts/abi-check
