# SPDX-License-Identifier: MIT
#
# Debian packages (debian/): libpmguard0, libpmguard-dev, pmguard.
# Included by the top-level Makefile (it includes every mk/*.mk).
#
# needs: debhelper lintian (dpkg-dev comes with debhelper), and the
#   Build-Depends of debian/control (scripts/install-deps installs them)
#
# Targets:
#   deb-check  scripts/deb-check: build the packages in a copy of the tree
#              (dpkg-buildpackage -us -uc -b), lintian them, unpack them
#              into an empty root and run pmguard info, pmguard run and a
#              program built on the -dev package from there only; TAP, last
#              line `deb: N passed, N failed, N skipped`.  A CI stage of
#              its own (.ci/run), not part of `make check`.
#   deb        the same, and keep the packages, the .changes and lintian's
#              output in $(O)/deb/

.PHONY: deb deb-check

deb-check:
	@scripts/deb-check

deb:
	@rm -rf $(O)/deb
	@scripts/deb-check --keep $(O)/deb
	@ls $(O)/deb/*.deb
