#!/bin/sh
# SPDX-License-Identifier: MIT
#
# suite.sh - the dax suite inside the PKU guest (guest/dax-check puts it
# at /bin/dax-suite.sh and boots with two pmem regions, /dev/pmem0 and
# /dev/pmem1, via guest/vmrun --pmem).
#
# Usage: dax-suite.sh IMAGE.gz
#
# Sets up:
#   fs-DAX   IMAGE.gz (an ext4 image made on the host with mkfs.ext4) is
#            written to /dev/pmem0 and mounted -o dax on /mnt/dax;
#   devdax   the second region's namespace is switched to device-dax mode
#            through sysfs (what `ndctl create-namespace -m devdax` does:
#            unbind the namespace, give the region's dax seed a uuid, its
#            struct pages' place (mode pmem), the 2 MiB alignment and the
#            namespace, bind it to dax_pmem), which
#            gives /dev/daxN.0;
# then runs through runtests.sh -n dax (by absolute path: test-pool execs
# its argv[0]): dax-test, test-pool, test-pool-quarantine and test-persist
# (PKU, and the last two again on the mprotect backend: the pools' MAP_SYNC
# aliases, a reopen over the quarantine with MAP_SYNC)
# and test-crash on fs-DAX (test-pool's device-dax test opens /dev/daxN.0
# too), dax-test on device dax,
# `pmguard demo` and an `inject` campaign on fs-DAX and `pmguard bench
# persist --dir /mnt/dax` (PKU and mprotect); on device dax dax-test,
# test-persist three times (PMG_DEVDAX: its pool tests open the device;
# PKU, mprotect, and mprotect without the alias: page windows, which
# device dax cannot split off, so domain windows) and test-crash
# (PMG_CRASH_DEV: the crash pool is the device's first 4 MiB).  No PMGUARD_IS_PMEM_FORCE anywhere.
# A setup step that fails is one failed test (never a skip).
# Last line: "dax: N passed, N failed, N skipped".

img=${1:-/dax/ext4.img.gz}
unset PMGUARD_IS_PMEM_FORCE
fail=0
setup_fail() {
	echo "not ok - dax setup: $*"
	fail=$((fail + 1))
}

echo "# dax: kernel $(uname -r), $(nproc) cpus"
grep -i 'persistent memory' /proc/iomem | sed 's/^/# dax: iomem /'
# shellcheck disable=SC2012
ls /sys/bus/nd/devices 2>/dev/null | tr '\n' ' ' | sed 's/^/# dax: nd devices: /'
echo

# ---- fs-DAX: ext4 on /dev/pmem0, -o dax
mkdir -p /mnt/dax
if [ ! -b /dev/pmem0 ]; then
	setup_fail "no /dev/pmem0 (vmrun --pmem, nd_e820/nd_pmem)"
elif ! gunzip -c "$img" | dd of=/dev/pmem0 bs=1M 2>/dev/null; then
	setup_fail "writing $img to /dev/pmem0"
elif ! mount -t ext4 -o dax /dev/pmem0 /mnt/dax; then
	setup_fail "mount -t ext4 -o dax /dev/pmem0 /mnt/dax"
else
	chmod 1777 /mnt/dax
	grep ' /mnt/dax ' /proc/mounts | sed 's/^/# dax: mounted: /'
	grep ' /mnt/dax ' /proc/mounts | grep -q 'dax' ||
		setup_fail "/mnt/dax is not mounted with dax"
fi

# ---- device dax: the second region's namespace in devdax mode
devdax=
nd=/sys/bus/nd/devices
ns=$(ls -d $nd/namespace1.0 2>/dev/null)
if [ -z "$ns" ]; then
	setup_fail "no namespace1.0 (second pmem region)"
else
	region=$(basename "$(readlink -f "$ns/..")")
	seed=$(cat "$nd/$region/dax_seed" 2>/dev/null)
	echo "# dax: $region: namespace1.0, dax seed ${seed:-none}"
	if [ -z "$seed" ]; then
		setup_fail "$region has no dax seed"
	elif ! echo namespace1.0 >/sys/bus/nd/drivers/nd_pmem/unbind ||
		! cat /proc/sys/kernel/random/uuid >"$nd/$seed/uuid" ||
		! echo pmem >"$nd/$seed/mode" ||
		! echo 2097152 >"$nd/$seed/align" ||
		! echo namespace1.0 >"$nd/$seed/namespace" ||
		! echo "$seed" >/sys/bus/nd/drivers/dax_pmem/bind; then
		setup_fail "switching namespace1.0 to devdax through $nd/$seed"
	else
		n=0
		while [ $n -lt 50 ]; do
			for d in /dev/dax*; do
				[ -c "$d" ] && devdax=$d
			done
			[ -n "$devdax" ] && break
			sleep 0.1
			n=$((n + 1))
		done
		if [ -z "$devdax" ]; then
			setup_fail "no /dev/dax* after binding $seed"
		else
			dd_=/sys/bus/dax/devices/${devdax#/dev/}
			echo "# dax: device dax $devdax, align $(cat "$dd_/align" 2>/dev/null), size $(cat "$dd_/size" 2>/dev/null)"
		fi
	fi
fi

# ---- the tests: a wrapper per entry (runtests.sh takes no variables)
mkdir -p /tmp/dax-bin
w() {	# w NAME COMMAND...: /tmp/dax-bin/NAME runs COMMAND
	n=$1
	shift
	printf '#!/bin/sh\nunset PMGUARD_IS_PMEM_FORCE\n%s\n' "$*" >"/tmp/dax-bin/$n"
	chmod +x "/tmp/dax-bin/$n"
	list="$list /tmp/dax-bin/$n"
}
# w1 NAME COMMAND...: the same for a command that prints no TAP of its own
# (the CLI's demo, inject, bench): one result, its exit status
w1() {
	n=$1
	shift
	w "$n" "echo 1..1
( $* )
rc=\$?
if [ \$rc = 0 ]; then echo 'ok 1 - $n'; else echo \"not ok 1 - $n (exit \$rc)\"; fi
exit \$rc"
}
list=
fsdax_ok=0
grep -q ' /mnt/dax ' /proc/mounts && fsdax_ok=1
if [ "$fsdax_ok" = 1 ]; then
	w fsdax-dax-test 'exec /bin/dax-test fsdax /mnt/dax'
	w fsdax-test-pool 'PMG_DISK_DIR=/mnt/dax exec /bin/test-pool'
	w fsdax-test-persist 'PMG_DISK_DIR=/mnt/dax exec /bin/test-persist'
	# use after close with MAP_SYNC: the quarantine, a reopen over it
	w fsdax-test-pool-quarantine 'PMG_DISK_DIR=/mnt/dax exec /bin/test-pool-quarantine'
	w fsdax-test-pool-quarantine-mprotect 'PMG_DISK_DIR=/mnt/dax PMGUARD_BACKEND=mprotect exec /bin/test-pool-quarantine'
	w fsdax-test-persist-mprotect 'PMG_DISK_DIR=/mnt/dax PMGUARD_BACKEND=mprotect exec /bin/test-persist'
	# overruns past MAP_SYNC pools, the aliases' gaps (mprotect)
	w fsdax-test-pool-overrun 'PMG_DISK_DIR=/mnt/dax exec /bin/test-pool-overrun'
	w fsdax-test-pool-overrun-mprotect 'PMG_DISK_DIR=/mnt/dax PMGUARD_BACKEND=mprotect exec /bin/test-pool-overrun'
	# shellcheck disable=SC2016  # expanded by the wrapper
	w fsdax-test-crash 'TMPDIR=/mnt/dax PMG_CRASH_ITERS=${PMG_CRASH_ITERS:-60} exec /bin/test-crash'
	w1 fsdax-demo 'mkdir -p /mnt/dax/demo && TMPDIR=/mnt/dax/demo /bin/pmguard demo --writes 400'
	w1 fsdax-inject 'mkdir -p /mnt/dax/inject && /bin/pmguard inject --dir /mnt/dax/inject --writes 2000 --threads 2 --mode audit --trials 2'
	w1 fsdax-bench-persist '/bin/pmguard bench persist --dir /mnt/dax --rounds 5'
	w1 fsdax-bench-persist-mprotect 'PMGUARD_BACKEND=mprotect /bin/pmguard bench persist --dir /mnt/dax --rounds 5'
fi
if [ -n "$devdax" ]; then
	w devdax-dax-test "exec /bin/dax-test devdax $devdax"
	w devdax-test-persist "PMG_DEVDAX=$devdax exec /bin/test-persist"
	w devdax-test-persist-mprotect "PMG_DEVDAX=$devdax PMGUARD_BACKEND=mprotect exec /bin/test-persist"
	w devdax-test-persist-pagewin "PMG_DEVDAX=$devdax PMGUARD_BACKEND=mprotect PMGUARD_POOL_ALIAS=0 exec /bin/test-persist"
	# shellcheck disable=SC2016  # expanded by the wrapper
	w devdax-test-crash "PMG_CRASH_DEV=$devdax PMG_CRASH_ITERS=\${PMG_CRASH_ITERS:-60} exec /bin/test-crash"
fi

runtests=$(command -v runtests.sh 2>/dev/null)
[ -n "$runtests" ] || runtests=$(dirname "$0")/runtests.sh
out=/tmp/dax-runtests.out
# shellcheck disable=SC2086
{
	sh "$runtests" -n dax -t "${PMGUARD_TEST_TIMEOUT:-600}" $list
	echo $? >/tmp/dax-runtests.rc
} | tee $out
rc=$(cat /tmp/dax-runtests.rc)
if [ "$fail" -gt 0 ]; then
	line=$(tail -n 1 $out)
	p=$(echo "$line" | sed -E 's/^dax: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped$/\1/')
	f=$(echo "$line" | sed -E 's/^dax: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped$/\2/')
	s=$(echo "$line" | sed -E 's/^dax: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped$/\3/')
	echo "# dax: $fail setup step(s) failed"
	echo "dax: ${p:-0} passed, $((${f:-0} + fail)) failed, ${s:-0} skipped"
	exit 1
fi
exit "$rc"
