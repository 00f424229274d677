#!/bin/sh
# SPDX-License-Identifier: MIT
#
# guest.sh - the tests of `make linux-check`, inside the QEMU guest that
# boots the patched kernel (scripts/linux-check puts this at
# /bin/linux-guest.sh and runs it as a child of /init).
#
# Usage: linux-guest.sh BOOT
#   main     run_pks tests, test_pks, protection_keys, pmguard's VM test
#            binaries, /dev/pmem0 protection and key, ext4 -o dax file
#            I/O, devdax, stray write in relaxed mode
#   crash9   run_pks crash test 9 (an oops printing PKRS is expected)
#   strict   pks_fault_mode switched to strict at run time, then a stray
#            write: an oops naming the key and PKRS, data unchanged
#   control  protection off (the boot says how): the stray-write test,
#            which must FAIL here (the write lands silently)
#
# Output: TAP result lines "ok - what" / "not ok - what" (unnumbered; the
# host numbers them), everything else as "# " lines, and last
# "guest: N passed, N failed".  Lines "@@EXPECT-OOPS <what>@@" tell the
# host that an oops is about to be provoked on purpose.
#
# Environment (set by scripts/linux-check, PMGUARD_ is what vmrun passes):
#   PMGUARD_LINUX_PKS_TESTS  the run_pks test numbers of the main boot
#   PMGUARD_LINUX_VM_TESTS   1: run pmguard's VM test binaries (/bin/test-*)

boot=${1:-main}
npass=0
nfail=0
DBG=/sys/kernel/debug
RUN_PKS=$DBG/x86/run_pks
FAULT_MODE=/sys/module/memremap/parameters/pks_fault_mode
# The pmem helper's debugfs hooks (linux/README, "Test interfaces").
PMEM_DBG=$DBG/pmem_pks

ok() { npass=$((npass + 1)); echo "ok - $*"; }
notok() { nfail=$((nfail + 1)); echo "not ok - $*"; }
check() { # check WHAT CMD...: ok if CMD succeeds
	what=$1
	shift
	if "$@"; then ok "$what"; else notok "$what"; fi
}
diag() { echo "# $*"; }
# show FILE: a command's output as diagnostics (never counted as results)
show() { sed 's/^/#   /' "$1"; }
# dmesg without timestamps, from line $1 on (1-based)
kmsg() { dmesg | sed 's/^\[[ 0-9.]*\] //' | tail -n +"${1:-1}"; }
kmsg_lines() { dmesg | wc -l; }
# Lines of the kernel log that a PKS/PMEM protection event writes.
PKS_EVENT='pks|pkrs|pkey|protection key|stray|pgmap_protection|WARNING:|BUG:|Oops'

finish() {
	echo "guest: $npass passed, $nfail failed"
	[ "$nfail" -eq 0 ]
	exit
}

mount -t debugfs debugfs $DBG 2>/dev/null
diag "kernel $(uname -r), $(nproc) cpus, boot '$boot', cmdline: $(cat /proc/cmdline)"
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -x -e pku -e ospke -e pks | tr '\n' ' ')
diag "cpu flags: ${flags:-none of pku ospke pks}"

# ---- pieces ----

run_pks_test() { # run_pks_test N: echo N > run_pks, read back PASS
	n=$1
	if [ ! -e $RUN_PKS ]; then
		notok "run_pks $n: $RUN_PKS does not exist (no PKS test code in this kernel)"
		return
	fi
	if ! echo "$n" >$RUN_PKS 2>/tmp/rp.err; then
		diag "echo $n > run_pks: $(cat /tmp/rp.err)"
	fi
	res=$(cat $RUN_PKS 2>&1)
	case $res in
	PASS*) ok "run_pks $n reads back PASS" ;;
	*) notok "run_pks $n reads back '$res', not PASS" ;;
	esac
}

pmem_setup() { # pmem_setup: /dev/pmem0 present, protection on
	if [ ! -b /dev/pmem0 ]; then
		notok "/dev/pmem0 exists (memmap= pmem)"
		ls /sys/bus/nd/devices 2>&1 | sed 's/^/#   /'
		return 1
	fi
	ok "/dev/pmem0 exists ($(cat /sys/block/pmem0/size) sectors)"
	check "/dev/pmem0 says it supports DAX" test "$(cat /sys/block/pmem0/queue/dax 2>/dev/null)" = 1
	return 0
}

pmem_key() { # the pmem helper's hook: the pages carry the PMEM key
	if [ ! -e $PMEM_DBG/pmem_key ]; then
		notok "pmem0 pages carry the PMEM key: no hook $PMEM_DBG/pmem_key in this kernel"
		return
	fi
	cat $PMEM_DBG/pmem_key >/tmp/key.out 2>&1
	show /tmp/key.out
	if grep -q '^PASS' /tmp/key.out; then
		ok "pmem0 pages carry the PMEM key ($(head -n 1 /tmp/key.out))"
	else
		notok "pmem0 pages carry the PMEM key"
	fi
}

ext4_dax() {
	mark=$(($(kmsg_lines) + 1))
	if ! dd if=/ext4.img of=/dev/pmem0 bs=1M 2>/tmp/dd.err; then
		show /tmp/dd.err
		notok "ext4 image written to /dev/pmem0"
		return
	fi
	mkdir -p /mnt/pmem
	if ! mount -t ext4 -o dax /dev/pmem0 /mnt/pmem 2>/tmp/mnt.err; then
		show /tmp/mnt.err
		kmsg "$mark" | sed 's/^/#   /'
		notok "mount -t ext4 -o dax /dev/pmem0"
		return
	fi
	ok "mount -t ext4 -o dax /dev/pmem0"
	opts=$(grep ' /mnt/pmem ' /proc/mounts)
	diag "$opts"
	case $opts in
	*dax*) ok "/proc/mounts shows dax on /mnt/pmem" ;;
	*) notok "/proc/mounts shows dax on /mnt/pmem" ;;
	esac
	if kmsg "$mark" | grep -qi 'dax.*unsupported\|disabling dax\|DAX unsupported'; then
		notok "the kernel did not refuse DAX for this mount"
		kmsg "$mark" | sed 's/^/#   /'
	else
		ok "the kernel did not refuse DAX for this mount"
	fi
	pmem-fs /mnt/pmem >/tmp/fs.out 2>&1
	rc=$?
	sed -e 's/^ok/#   ok/' -e 's/^not ok/#   not ok/' -e 's/^\([^#]\)/#   \1/' /tmp/fs.out
	sum=$(tail -n 1 /tmp/fs.out)
	if [ $rc -eq 0 ]; then
		ok "ext4 dax file I/O (pmem-fs: $sum)"
	else
		notok "ext4 dax file I/O (pmem-fs: $sum, exit $rc)"
	fi
	sync
	umount /mnt/pmem && mount -t ext4 -o dax /dev/pmem0 /mnt/pmem
	pmem-fs --verify /mnt/pmem >/tmp/fs.out 2>&1
	rc=$?
	sed 's/^/#   /' /tmp/fs.out
	check "after umount + mount -o dax: the data verified" test $rc = 0
	umount /mnt/pmem
	kmsg "$mark" | grep -Ei "$PKS_EVENT" >/tmp/ev.out
	n=$(wc -l </tmp/ev.out)
	if [ "$n" -eq 0 ]; then
		ok "ext4 dax workload: 0 PKS warnings, 0 relaxed-mode faults in dmesg"
	else
		notok "ext4 dax workload: $n PKS warning/fault lines in dmesg"
		head -n 40 /tmp/ev.out | sed 's/^/#   /'
	fi
}

devdax_test() { # region1 (the second memmap= range) switched to devdax via sysfs
	nd=/sys/bus/nd/devices
	ns=$(cd $nd && ls -d namespace1.* 2>/dev/null | head -n 1)
	dax=$(cat $nd/region1/dax_seed 2>/dev/null)
	if [ -z "$ns" ] || [ -z "$dax" ]; then
		notok "devdax: region1 has a namespace and a dax seed (ns '$ns', seed '$dax')"
		ls $nd | sed 's/^/#   /'
		return
	fi
	diag "devdax: $ns -> $dax"
	mark=$(($(kmsg_lines) + 1))
	{
		echo "$ns" >/sys/bus/nd/drivers/nd_pmem/unbind 2>/dev/null
		echo 2c0f5b8a-6d1e-4f3a-9b7c-0e1d2c3b4a59 >$nd/$dax/uuid &&
		echo 4096 >$nd/$dax/align &&
		echo pmem >$nd/$dax/mode &&
		echo "$ns" >$nd/$dax/namespace &&
		echo "$dax" >/sys/bus/nd/drivers_probe
	} 2>/tmp/dax.err
	sleep 1
	dev=$(ls /dev/dax* 2>/dev/null | head -n 1)
	if [ -z "$dev" ]; then
		notok "devdax: $ns switched to devdax through sysfs, /dev/daxX.Y appears"
		show /tmp/dax.err
		kmsg "$mark" | sed 's/^/#   /'
		return
	fi
	ok "devdax: $ns switched to devdax through sysfs ($dev)"
	name=${dev#/dev/}
	size=$(cat /sys/bus/dax/devices/"$name"/size 2>/dev/null)
	align=$(cat /sys/bus/dax/devices/"$name"/align 2>/dev/null)
	[ -n "$align" ] || align=4096
	devdax "$dev" "${size:-0}" "$align" >/tmp/dd.out 2>&1
	rc=$?
	sed 's/^/#   /' /tmp/dd.out
	check "devdax: $dev mapped from user space, written, read back ($(tail -n 1 /tmp/dd.out))" test $rc = 0
	kmsg "$mark" | grep -Ei "$PKS_EVENT" >/tmp/ev.out
	n=$(wc -l </tmp/ev.out)
	if [ "$n" -eq 0 ]; then
		ok "devdax workload: 0 PKS warnings in dmesg"
	else
		notok "devdax workload: $n PKS warning/fault lines in dmesg"
		head -n 40 /tmp/ev.out | sed 's/^/#   /'
	fi
}

vm_tests() {
	for t in /bin/test-*; do
		[ -x "$t" ] || continue
		set -- "$@" "$t"
	done
	[ -x /bin/pmguard ] && set -- "$@" "pmguard selftest"
	if [ $# -eq 0 ]; then
		notok "pmguard VM test binaries: none in /bin"
		return
	fi
	for t in "$@"; do
		sh /bin/runtests.sh -n vm -t 300 $t >/tmp/vm.out 2>&1
		rc=$?
		sum=$(tail -n 1 /tmp/vm.out)
		if [ $rc -ne 0 ]; then
			sed 's/^/#   /' /tmp/vm.out
			notok "pmguard VM test $t on this kernel ($sum)"
		else
			ok "pmguard VM test $t on this kernel ($sum)"
		fi
	done
}

protection_keys_test() {
	if [ ! -x /bin/protection_keys ]; then
		notok "protection_keys.c: not built"
		return
	fi
	timeout 300 /bin/protection_keys >/tmp/pk.out 2>&1
	rc=$?
	passed=$(grep -c 'PASSED' /tmp/pk.out)
	if [ $rc -ne 0 ] || [ "$passed" -eq 0 ]; then
		tail -n 40 /tmp/pk.out | sed 's/^/#   /'
		notok "protection_keys (user PKU selftest): exit $rc, $passed PASSED lines"
	else
		grep 'PASSED' /tmp/pk.out | sed 's/^/#   /'
		ok "protection_keys (user PKU selftest): exit 0, $passed PASSED lines"
	fi
}

test_pks_test() {
	if [ ! -x /bin/test_pks ]; then
		notok "test_pks: not built (the series has no tools/testing/selftests/x86/test_pks.c)"
		return
	fi
	timeout 120 /bin/test_pks >/tmp/tp.out 2>&1
	rc=$?
	show /tmp/tp.out
	check "test_pks (context switch test from user space): exit $rc" test $rc = 0
}

# stray_write MODE: the pmem helper's stray-write hook; prints its result.
# Returns 0 if the write was blocked or warned about as MODE wants.
STRAY=$PMEM_DBG/stray_write
stray_write() {
	if [ ! -e $STRAY ]; then
		notok "stray write ($1): no hook $STRAY in this kernel"
		return 1
	fi
	return 0
}

relaxed_stray() {
	stray_write relaxed || return
	mode=$(cat $FAULT_MODE 2>/dev/null)
	check "memremap.pks_fault_mode is relaxed by default ('$mode')" test "$mode" = relaxed
	mark=$(($(kmsg_lines) + 1))
	echo 1 >$STRAY 2>/tmp/st.err
	res=$(cat $STRAY 2>&1)
	diag "stray write hook says: $res"
	kmsg "$mark" >/tmp/ev.out
	nw=$(grep -c 'WARNING:' /tmp/ev.out)
	head -n 30 /tmp/ev.out | sed 's/^/#   /'
	check "relaxed: a stray write gives exactly one warning (got $nw)" test "$nw" = 1
	case $res in
	*LANDED* | *landed*) ok "relaxed: the stray write went through" ;;
	*) notok "relaxed: the stray write went through" ;;
	esac
}

case $boot in
main)
	for n in ${PMGUARD_LINUX_PKS_TESTS:-}; do
		run_pks_test "$n"
	done
	[ -n "${PMGUARD_LINUX_PKS_TESTS:-}" ] ||
		notok "run_pks: no test numbers known (linux/README lists none yet)"
	test_pks_test
	protection_keys_test
	if pmem_setup; then
		pmem_key
		ext4_dax
	fi
	devdax_test
	relaxed_stray
	[ "${PMGUARD_LINUX_VM_TESTS:-1}" = 1 ] && vm_tests
	;;
crash9)
	if [ ! -e $RUN_PKS ]; then
		notok "run_pks 9: $RUN_PKS does not exist (no PKS test code in this kernel)"
		finish
	fi
	echo "@@EXPECT-OOPS run_pks 9@@"
	(echo 9 >$RUN_PKS)
	diag "after the crash test the shell lives on (status $?)"
	kmsg | grep -E 'PKRS|Oops|BUG' | sed 's/^/#   /'
	;;
strict)
	stray_write strict || finish
	echo strict >$FAULT_MODE 2>/tmp/fm.err
	mode=$(cat $FAULT_MODE 2>/dev/null)
	check "pks_fault_mode switched to strict at run time ('$mode')" test "$mode" = strict
	echo "@@EXPECT-OOPS stray write, strict@@"
	(echo 1 >$STRAY)
	res=$(cat $STRAY 2>&1)
	diag "stray write hook says: $res"
	case $res in
	*UNCHANGED* | *unchanged*) ok "strict: the data is unchanged after the stray write" ;;
	*) notok "strict: the data is unchanged after the stray write" ;;
	esac
	;;
control)
	# Protection off: the stray write lands silently, so the hook's
	# verdict is FAIL; the host counts that as the control passing.
	stray_write control || finish
	mark=$(($(kmsg_lines) + 1))
	echo 1 >$STRAY 2>/tmp/st.err
	res=$(cat $STRAY 2>&1)
	diag "stray write hook says: $res"
	nw=$(kmsg "$mark" | grep -c 'WARNING:')
	case $res in
	*LANDED* | *landed*) landed=1 ;;
	*) landed=0 ;;
	esac
	if [ $landed = 1 ] && [ "$nw" = 0 ]; then
		echo "not ok - CONTROL: stray write with protection off was not caught (landed silently, $nw warnings)"
		nfail=$((nfail + 1))
	else
		ok "CONTROL: stray write with protection off was caught ($res, $nw warnings)"
	fi
	;;
*)
	notok "unknown boot '$boot'"
	;;
esac
finish
