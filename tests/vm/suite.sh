#!/bin/sh
# SPDX-License-Identifier: MIT
#
# suite.sh - driver of the VM test suite; runs inside the PKU guest as
# /bin/vm-suite.sh (guest/vm-suite puts it there).
#
# Usage: vm-suite.sh [TEST...]
#
# Prints the guest's kernel, CPU count, PKU flags and `pmguard info` (as
# "# " diagnostic lines), then runs through runtests.sh -n vm: every
# executable /bin/test-* (sorted), if /bin/pmguard exists "pmguard
# selftest" as one entry, test-lazywin and test-edgerace once more on
# the mprotect backend (4 huge pages reserved for test-lazywin's hugetlb
# case), and the virtual-domain runs (PMGUARD_KEYS=0/1/4 test-vdomains,
# PMGUARD_KEYS=0 test-shared, test-ownprot, test-ownsig, test-modes and
# test-contain).  TEST arguments replace that list (same syntax as
# runtests.sh: "pmguard selftest 1 2" is one entry).
# Per-test timeout: $PMGUARD_TEST_TIMEOUT seconds (default 300).
# Exit status: runtests.sh's (0 iff nothing failed).

case ${1:-} in
-h | --help)
	sed -n '3,/^$/{/^$/d;s/^# \{0,1\}//;p}' "$0"
	exit 0
	;;
esac

runtests=$(command -v runtests.sh 2>/dev/null)
[ -n "$runtests" ] || runtests=$(dirname "$0")/runtests.sh

echo "# vm: kernel $(uname -r), $(nproc) cpus"
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | tr ' ' '\n' | grep -x -e pku -e ospke | tr '\n' ' ')
echo "# vm: cpu flags: ${flags:-no pku/ospke}"

if command -v pmguard >/dev/null 2>&1; then
	echo "# vm: pmguard info:"
	pmguard info >/tmp/.pmguard-info 2>&1
	rc=$?
	sed 's/^/#   /' /tmp/.pmguard-info
	rm -f /tmp/.pmguard-info
	[ "$rc" -eq 0 ] || echo "# vm: pmguard info exited with status $rc"
else
	echo "# vm: pmguard not found in PATH"
fi

# 2 MiB pages for test-lazywin's device-dax stand-in (hugetlb)
echo 4 >/proc/sys/vm/nr_hugepages 2>/dev/null
echo "# vm: vm.nr_hugepages=$(cat /proc/sys/vm/nr_hugepages 2>/dev/null)"

if [ $# -eq 0 ]; then
	for f in /bin/test-*; do
		[ -f "$f" ] && [ -x "$f" ] && set -- "$@" "$f"
	done
	if command -v pmguard >/dev/null 2>&1; then
		set -- "$@" "pmguard selftest"
	fi
	# lazy write windows are the mprotect backend's (test-lazywin and
	# test-edgerace say SKIP on PKU): once more with it, where 2 MiB
	# pages can be had for test-lazywin's device-dax stand-in (hugetlb)
	for t in test-lazywin test-edgerace; do
		[ -x /bin/$t ] &&
			set -- "$@" "env PMGUARD_BACKEND=mprotect /bin/$t"
	done
	# virtual domains: with few keys eviction races the
	# inline windows; with none every domain is page-protected on PKU
	# (the interposers and every fault mode on such domains)
	for k in 0 1 4; do
		[ -x /bin/test-vdomains ] &&
			set -- "$@" "env PMGUARD_KEYS=$k /bin/test-vdomains"
	done
	for t in test-shared test-ownprot test-ownsig; do
		[ -x /bin/$t ] && set -- "$@" "env PMGUARD_KEYS=0 /bin/$t"
	done
	for t in test-modes test-contain; do
		[ -x /bin/$t ] && set -- "$@" "env PMGUARD_KEYS=0 /bin/$t"
	done
	[ $# -gt 0 ] || echo "# vm: no /bin/test-* and no pmguard: nothing to run"
fi

exec sh "$runtests" -n vm -t "${PMGUARD_TEST_TIMEOUT:-300}" "$@"
