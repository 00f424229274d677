#!/bin/sh
# SPDX-License-Identifier: MIT
#
# guest.sh - the tests of `make linux-check`, inside the QEMU guest that
# boots the patched kernel (linux/scripts/linux-check puts this at
# /bin/linux-guest.sh and runs it as a child of /init).
#
# Usage: linux-guest.sh BOOT
#   main     stray write in relaxed mode, kmap_local_page()/kmap_atomic()
#            reads and kmap() flagged on a protected page (with a stray
#            read as the reads' control), run_pks tests, test_pks,
#            protection_keys, pmguard's VM test binaries, /dev/pmem0
#            protection and key, ext4 -o dax file I/O, devdax
#   crash9   run_pks crash test 9 (an oops printing PKRS is expected)
#   strict   pks_fault_mode refuses a bad value, is switched to strict
#            at run time; the kmap tests again; then a stray write: an
#            oops naming the key and PKRS, data unchanged
#   control  protection off (clearcpuid=pks, linux/README): the relaxed
#            stray-write test and the kmap() test, which must FAIL here
#            (the write lands silently, kmap() is not flagged); counted
#            as a pass only then
#   extra    the debug kernel's tests of features the main config lacks
#            (linux/tests/dax.sh, dax_extra_tests): a KVM VM whose memory
#            is device-dax (kvmclock; nested SVM's VMRUN), swiotlb and
#            sg_miter over pmem pages (the boot has swiotlb=force), a
#            namespace unbound inside a DAX read (userfaultfd); relaxed
#            mode; after the debug boot's main tests and workloads, as
#            they leave the devices
#
# Output: TAP result lines "ok - what" / "not ok - what" (unnumbered; the
# host numbers them), everything else as "# " lines, and last
# "guest: N passed, N failed".  Lines "@@EXPECT-OOPS <what>@@" tell the
# host that an oops is about to be provoked on purpose.
#
# Environment (set by linux/scripts/linux-check, PMGUARD_ is what vmrun passes):
#   PMGUARD_LINUX_PKS_TESTS  the run_pks test numbers of the main boot
#   PMGUARD_LINUX_VM_TESTS   1: run pmguard's VM test binaries (/bin/test-*)

boot=${1:-main}
npass=0
nfail=0
DBG=/sys/kernel/debug
RUN_PKS=$DBG/x86/run_pks
FAULT_MODE=/sys/module/memremap/parameters/pks_fault_mode
# The pmem test hook (linux/README, "Test interfaces (pmem)").
PKS_PMEM=$DBG/x86/pks_pmem
RELAXED_FAULTS=/sys/module/memremap/parameters/pks_relaxed_faults
# A page of /dev/pmem0 past the ext4 image (32 MiB = pages 0-8191).
STRAY_PAGE=12000

# INNER=1: results go to the inner counters and print as diagnostics (a
# negative control runs a test whose failure is the expected outcome).
INNER=0
ipass=0
ifail=0
# result ok|"not ok" WHAT: one result line, counted outer or inner
result() {
	r=$1
	shift
	if [ "$INNER" = 1 ]; then
		if [ "$r" = ok ]; then ipass=$((ipass + 1)); else ifail=$((ifail + 1)); fi
		echo "#   inner: $r - $*"
	else
		if [ "$r" = ok ]; then npass=$((npass + 1)); else nfail=$((nfail + 1)); fi
		echo "$r - $*"
	fi
}
ok() { result ok "$@"; }
notok() { result "not ok" "$@"; }
check() { # check WHAT CMD...: ok if CMD succeeds
	what=$1
	shift
	if "$@"; then ok "$what"; else notok "$what"; fi
}
diag() { echo "# $*"; }
# show FILE: a command's output as diagnostics (never counted as results)
show() { sed 's/^/#   /' "$1"; }
# kmsg_mark, kmsg: the kernel log after a marker (/bin/kmsg.sh)
. /bin/kmsg.sh
# The marker again through printk: tty output (the echo above) can still
# be queued in the serial driver when the provoked oops, printed at once,
# overtakes it on the console (seen: "[ok - run_pks 9,  2.50] BUG: ...").
expect_oops_mark() { echo "<2>@@EXPECT-OOPS $1@@" >/dev/kmsg 2>/dev/null || :; }
# Lines of the kernel log that a PKS/PMEM protection event writes.
PKS_EVENT='pks|pkrs|pkey|protection key|stray|pgmap_protection|WARNING:|BUG:|Oops'
# A stack frame line of a kernel trace ("  ? func+0x12/0x34")
FRAME='^ *(\? )?[A-Za-z0-9_.]+\+0x[0-9a-f]+/0x[0-9a-f]+( \[[a-z0-9_]+\])? *$'

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

# The exception and task tests (exc_tests): linux/tests/exc.sh
. /bin/exc.sh || exc_tests() { notok "exception tests ($1): /bin/exc.sh missing"; }

# run_pks_test N: echo N > run_pks, read back PASS.  Tests 2 (arm context
# switch) and 3 (check it) must go through one open file (linux/README):
# 2 opens fd 3 and leaves it open, 3 writes through it and closes it.
run_pks_test() {
	n=$1
	if [ ! -e $RUN_PKS ]; then
		notok "run_pks $n: $RUN_PKS does not exist (no PKS test code in this kernel)"
		return
	fi
	case $n in
	2)
		exec 3>$RUN_PKS
		echo 2 >&3 2>/tmp/rp.err
		;;
	3)
		echo 3 >&3 2>/tmp/rp.err || echo 3 >$RUN_PKS 2>/tmp/rp.err
		exec 3>&-
		;;
	*) echo "$n" >$RUN_PKS 2>/tmp/rp.err ;;
	esac
	[ -s /tmp/rp.err ] && diag "echo $n > run_pks: $(cat /tmp/rp.err)"
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

# pmem_cmd CMD...: one command to the pks_pmem hook; its result line in $res
pmem_cmd() {
	res=
	if [ ! -e $PKS_PMEM ]; then
		res="error: no $PKS_PMEM in this kernel"
		return 1
	fi
	echo "$*" >$PKS_PMEM 2>/tmp/pp.err
	res=$(cat $PKS_PMEM 2>&1)
	case $res in error:*) return 1 ;; esac
	return 0
}
# field NAME: the value of NAME=VALUE in $res
field() { echo " $res " | sed -n "s/.* $1=\([^ ]*\) .*/\1/p"; }
# other BYTE: a value for a stray write that differs from BYTE
other() { case $1 in 0x5a | 0x5A) echo 0xa5 ;; *) echo 0x5a ;; esac; }

# key_check WHAT TARGET N: the page's direct-map PTE carries the PMEM key
key_check() {
	pmem_cmd key "$2" "$3"
	diag "$res"
	k=$(field pkey)
	pk=$(field pmem_key)
	if [ -n "$k" ] && [ "$k" = "$pk" ] && [ "$k" != 0 ] &&
		[ "$(field protected)" = 1 ] && [ "$(field available)" = 1 ]; then
		ok "$1: page $3 carries the PMEM key (pkey=$k, protected=1)"
	else
		notok "$1: page $3 carries the PMEM key ($res)"
	fi
}

pmem_key() {
	key_check /dev/pmem0 /dev/pmem0 0
	key_check /dev/pmem0 /dev/pmem0 8191
	key_check /dev/pmem0 /dev/pmem0 16383
}

# no_pks_events MARK WHAT: the kernel log after kmsg_mark's MARK has no
# line of a PKS warning or fault (relaxed-mode faults log one each)
no_pks_events() {
	# Linux 6.1.192's own i_mmap lock assertion in hugetlb_split() (on
	# protection_keys' pkey_mprotect() of hugetlb pages, debug kernel; not
	# the series: linux/scripts/linux-check says so too) is left out, whole.
	# Stack frames ("? do_mprotect_pkey+0x299/0x347") are left out too: a
	# real event has its header line (memremap:, WARNING:, Oops), and the
	# frames of that hugetlb warning may reach dmesg after MARK was taken
	# (printk runs behind) without their header.
	kmsg "$1" | awk '/WARNING: .*i_mmap_assert_write_locked/ { skip = 1 }
		skip && /---\[ end trace/ { skip = 0; next } !skip' |
		grep -Ev "$FRAME" | grep -Ei "$PKS_EVENT" | grep -v "pks_pmem: " >/tmp/ev.out
	n=$(wc -l </tmp/ev.out)
	if [ "$n" -eq 0 ]; then
		ok "$2: 0 PKS warnings, 0 relaxed-mode faults in dmesg"
	else
		notok "$2: $n PKS warning/fault lines in dmesg"
		head -n 40 /tmp/ev.out | sed 's/^/#   /'
	fi
}

ext4_dax() {
	mark=$(kmsg_mark)
	rf0=$(cat $RELAXED_FAULTS 2>/dev/null)
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
	no_pks_events "$mark" "ext4 dax workload"
	rf1=$(cat $RELAXED_FAULTS 2>/dev/null)
	check "ext4 dax workload: pks_relaxed_faults unchanged ('$rf0' -> '$rf1')" \
		test -n "$rf0" -a "$rf0" = "$rf1"
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
	mark=$(kmsg_mark)
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
	base=$(cat /sys/bus/dax/devices/"$name"/resource 2>/dev/null)
	key_check "$dev" "phys:$base" 0
	size=$(cat /sys/bus/dax/devices/"$name"/size 2>/dev/null)
	align=$(cat /sys/bus/dax/devices/"$name"/align 2>/dev/null)
	[ -n "$align" ] || align=4096
	devdax "$dev" "${size:-0}" "$align" >/tmp/dd.out 2>&1
	rc=$?
	sed 's/^/#   /' /tmp/dd.out
	check "devdax: $dev mapped from user space, written, read back ($(tail -n 1 /tmp/dd.out))" test $rc = 0
	no_pks_events "$mark" "devdax workload"
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
		sh /bin/runtests.sh -n vm -t 300 "$t" >/tmp/vm.out 2>&1
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

# run_prog PROG SECONDS [WHY]: /bin/PROG (a static test program that
# linux/scripts/linux-build built from the kernel tree) under timeout; output in
# /tmp/PROG.out, exit status in $rc.  Not built: a "not ok" (WHY added)
# and status 1.
run_prog() {
	if [ ! -x "/bin/$1" ]; then
		notok "$1: not built${3:+ ($3)}"
		return 1
	fi
	timeout "$2" "/bin/$1" >"/tmp/$1.out" 2>&1
	rc=$?
}

protection_keys_test() {
	run_prog protection_keys 300 || return
	passed=$(grep -c 'PASSED' /tmp/protection_keys.out)
	if [ $rc -ne 0 ] || [ "$passed" -eq 0 ]; then
		tail -n 40 /tmp/protection_keys.out | sed 's/^/#   /'
		notok "protection_keys (user PKU selftest): exit $rc, $passed PASSED lines"
	else
		grep 'PASSED' /tmp/protection_keys.out | sed 's/^/#   /'
		ok "protection_keys (user PKU selftest): exit 0, $passed PASSED lines"
	fi
}

test_pks_test() {
	run_prog test_pks 120 "the series has no tools/testing/selftests/x86/test_pks.c" ||
		return
	show /tmp/test_pks.out
	check "test_pks (context switch test from user space): exit $rc" test $rc = 0
}

# stray MODE: write a byte to page STRAY_PAGE of /dev/pmem0 without
# enabling access.  Sets $before, $wrote, $now (the guarded read-back).
stray() {
	pmem_cmd read /dev/pmem0 $STRAY_PAGE
	before=$(field byte)
	wrote=$(other "$before")
	diag "page $STRAY_PAGE of /dev/pmem0 holds $before; stray write of $wrote ($1)"
	pmem_cmd stray /dev/pmem0 $STRAY_PAGE $wrote
	diag "pks_pmem: $res"
	pmem_cmd read /dev/pmem0 $STRAY_PAGE
	now=$(field byte)
}

# relaxed_stray: the stray-write test of relaxed mode: caught (one
# warning, one counted relaxed fault), and the write lands.
relaxed_stray() {
	if [ ! -e $PKS_PMEM ]; then
		notok "stray write (relaxed): no hook $PKS_PMEM in this kernel"
		return
	fi
	mode=$(cat $FAULT_MODE 2>/dev/null)
	check "memremap.pks_fault_mode is relaxed by default ('$mode')" test "$mode" = relaxed
	mark=$(kmsg_mark)
	rf0=$(cat $RELAXED_FAULTS 2>/dev/null)
	stray relaxed
	rf1=$(cat $RELAXED_FAULTS 2>/dev/null)
	kmsg "$mark" >/tmp/ev.out
	nw=$(grep -c 'WARNING:' /tmp/ev.out)
	nl=$(grep -c 'stray write of PKS protected device memory.*relaxed: allowed' /tmp/ev.out)
	grep -E 'WARNING:|memremap:|pks_pmem:' /tmp/ev.out | head -n 10 | sed 's/^/#   /'
	check "relaxed: the stray write gives exactly one warning (got $nw)" test "$nw" = 1
	check "relaxed: the log names the stray write, allowed (got $nl lines)" test "$nl" = 1
	check "relaxed: pks_relaxed_faults counts it ('$rf0' -> '$rf1')" \
		test -n "$rf0" -a "$rf1" = "$((rf0 + 1))"
	check "relaxed: the write went through ($before -> $now, wrote $wrote)" \
		test -n "$now" -a "$now" = "$wrote"
}

# cpu_hotplug: CPU 1 taken offline and brought back.  Its bring-up
# (pks_setup(), patches 0009 and 0014) must set PKRS and the per-CPU
# cache of the last value written (pks_write_pkrs() skips a write equal
# to it) together: the CPU comes back from an INIT with PKRS reset to 0
# (every key open), while the cache still holds the value written before
# it went offline.  So on CPU 1, first of all, a stray write must fault
# (relaxed: counted and logged, the write lands), then a guarded read
# (a pgmap_mk_readwrite() window) and kmap_local_page() must read the
# byte with no fault.  Relaxed mode.
cpu_hotplug() {
	on=/sys/devices/system/cpu/cpu1/online
	if [ ! -w $on ]; then
		notok "cpu hotplug: $on is writable (the guests boot -smp 2 with HOTPLUG_CPU)"
		return
	fi
	echo 0 >$on 2>/tmp/hp.err
	st0=$(cat $on 2>&1)
	echo 1 >$on 2>>/tmp/hp.err
	st1=$(cat $on 2>&1)
	show /tmp/hp.err
	check "cpu hotplug: cpu1 went offline ('$st0') and came back online ('$st1')" \
		test "$st0" = 0 -a "$st1" = 1
	cpu_probe "cpu hotplug" 1
}

# pinned_stray WHAT CPU VALUE: on CPU, a stray write of VALUE to
# STRAY_PAGE of /dev/pmem0 must fault (relaxed: counted, logged once, the
# write lands).  The hook runs a command in the write(2) to it, so taskset
# pins the command.
pinned_stray() {
	mark=$(kmsg_mark)
	rf0=$(cat $RELAXED_FAULTS 2>/dev/null)
	taskset -c "$2" sh -c "echo stray /dev/pmem0 $STRAY_PAGE $3 >$PKS_PMEM"
	rc=$?
	rf1=$(cat $RELAXED_FAULTS 2>/dev/null)
	nl=$(kmsg "$mark" | grep -c 'stray write of PKS protected device memory.*relaxed: allowed')
	check "$1: a stray write on cpu$2 faults (taskset exit $rc, pks_relaxed_faults '$rf0' -> '$rf1', $nl log line(s))" \
		test "$rc" = 0 -a -n "$rf0" -a "$rf1" = "$((rf0 + 1))" -a "$nl" = 1
}

# pinned_reads WHAT CPU BYTE: on CPU, a guarded read (a
# pgmap_mk_readwrite() window) and kmap_local_page() must read BYTE from
# STRAY_PAGE of /dev/pmem0 with no fault.
pinned_reads() {
	for cmd in read kmap_local; do
		mark=$(kmsg_mark)
		rf0=$(cat $RELAXED_FAULTS 2>/dev/null)
		taskset -c "$2" sh -c "echo $cmd /dev/pmem0 $STRAY_PAGE >$PKS_PMEM"
		res=$(cat $PKS_PMEM 2>&1)
		rf1=$(cat $RELAXED_FAULTS 2>/dev/null)
		n=$(kmsg "$mark" | grep -Ec "$PKS_FAULT")
		check "$1: $cmd on cpu$2 reads the byte through its window with no fault ('$res', pks_relaxed_faults '$rf0' -> '$rf1', $n memremap/WARNING/oops lines)" \
			test "$(field byte)" = "$3" -a -n "$rf0" -a "$rf0" = "$rf1" -a "$n" = 0
	done
}

# cpu_probe WHAT CPU: pinned_stray, the write landed, pinned_reads.
cpu_probe() {
	pmem_cmd read /dev/pmem0 $STRAY_PAGE
	before=$(field byte)
	wrote=$(other "$before")
	pinned_stray "$1" "$2" "$wrote"
	pmem_cmd read /dev/pmem0 $STRAY_PAGE
	now=$(field byte)
	check "$1: the stray write on cpu$2 landed (relaxed: $before -> $now, wrote $wrote)" \
		test -n "$now" -a "$now" = "$wrote"
	pinned_reads "$1" "$2" "$wrote"
}

# suspend_resume: suspend to RAM (ACPI S3, the debug kernel: CONFIG_SUSPEND)
# and back, woken by the CMOS RTC's alarm.  QEMU resets the CPUs on the
# wake-up, so the boot CPU resumes with PKRS 0 (every key open) and CR4
# from the firmware; __restore_processor_state() restores CR4 (PKS on) and
# must load PKRS through pks_setup() (patch 0009), whatever the per-CPU
# cache of the last value written says: that cache is in RAM, which kept
# it, and pks_write_pkrs() skips a write equal to it, so a pks_setup()
# that trusted it would leave every key open on the CPU until its next
# window.  CPU 1 comes back through CPU hotplug, from the same reset.  So
# the first PKS access on each CPU after the resume is a stray write,
# which must fault (cpu0, then cpu1: nothing else opens a window on
# either before, and the byte is read, unpinned, only after both); then
# the guarded reads on each.  Relaxed mode.
suspend_resume() {
	wa=/sys/class/rtc/rtc0/wakealarm
	if ! grep -qw mem /sys/power/state 2>/dev/null || [ ! -w $wa ]; then
		notok "suspend: /sys/power/state offers mem ('$(cat /sys/power/state 2>&1)') and $wa is writable (CONFIG_SUSPEND, RTC_DRV_CMOS)"
		return
	fi
	echo deep >/sys/power/mem_sleep 2>/tmp/s3.err
	check "suspend: mem_sleep is deep, ACPI S3 ('$(cat /sys/power/mem_sleep 2>&1)')" \
		grep -q '\[deep\]' /sys/power/mem_sleep
	pmem_cmd read /dev/pmem0 $STRAY_PAGE
	before=$(field byte)
	w0=$(other "$before")
	w1=$(other "$w0")
	ok0=$(cat /sys/power/suspend_stats/success 2>/dev/null)
	smark=$(kmsg_mark)
	echo 0 >$wa
	# 20 s: the suspend took under 3 s under TCG, on a quiet host; an
	# alarm that fires before the sleep either aborts it or, once the
	# machine is in S3, never wakes it (the boot's timeout ends it)
	echo +20 >$wa
	echo mem >/sys/power/state 2>>/tmp/s3.err
	rc=$?
	pinned_stray "after S3" 0 "$w0"
	pinned_stray "after S3" 1 "$w1"
	ok1=$(cat /sys/power/suspend_stats/success 2>/dev/null)
	show /tmp/s3.err
	kmsg "$smark" >/tmp/s3.log
	grep -E 'PM: |ACPI: PM:|CPU1|smpboot' /tmp/s3.log | sed 's/^/#   /' | head -n 20
	woke=$(grep -c 'Waking up from system sleep state S3' /tmp/s3.log)
	check "suspend: to S3 and back (echo mem exit $rc, suspend_stats success '$ok0' -> '$ok1', $woke 'Waking up from system sleep state S3')" \
		test "$rc" = 0 -a -n "$ok0" -a "$ok1" = "$((ok0 + 1))" -a "$woke" = 1
	check "suspend: cpu1 is back online ('$(cat /sys/devices/system/cpu/cpu1/online 2>&1)')" \
		test "$(cat /sys/devices/system/cpu/cpu1/online 2>/dev/null)" = 1
	pmem_cmd read /dev/pmem0 $STRAY_PAGE
	now=$(field byte)
	check "after S3: both stray writes landed (relaxed: $before -> $w0 -> $now, wrote $w1 last)" \
		test -n "$now" -a "$now" = "$w1"
	pinned_reads "after S3" 0 "$w1"
	pinned_reads "after S3" 1 "$w1"
}

# ---- kmap of a protected pmem page (patch 0042, kmap: Ensure kmap
# works for devmap pages).  They use STRAY_PAGE, whose first byte the
# stray-write test has set: a known, non-zero value.

# Kernel log lines that a fault on, or a flagged use of, protected device
# memory writes (memremap: ...), and any warning or oops.
PKS_FAULT='memremap:|WARNING:|BUG:|Oops'

# probe CMD: run "CMD /dev/pmem0 STRAY_PAGE" on the pks_pmem hook.  Sets
# $before (the byte, read guarded, before), $mark (kmsg_mark's token
# before it), $got (CMD's result line) and $rf0 -> $rf1 (pks_relaxed_faults
# before and after).
probe() {
	pmem_cmd read /dev/pmem0 $STRAY_PAGE
	before=$(field byte)
	mark=$(kmsg_mark)
	rf0=$(cat $RELAXED_FAULTS 2>/dev/null)
	pmem_cmd "$1" /dev/pmem0 $STRAY_PAGE
	got=$res
	rf1=$(cat $RELAXED_FAULTS 2>/dev/null)
}

# kmap_read CMD: read the byte through CMD of the pks_pmem hook
# (kmap_local: kmap_local_page(), kmap_atomic: kmap_atomic(); the control
# stray_read reads it with no guard at all) on a protected page: the byte
# is the one a guarded read sees, and nothing faulted: no memremap,
# WARNING or oops line in dmesg, pks_relaxed_faults unchanged.
kmap_read() {
	cmd=$1
	probe "$cmd"
	want=$before
	kmsg "$mark" | grep -E "$PKS_FAULT" >/tmp/km.out
	n=$(wc -l </tmp/km.out)
	head -n 10 /tmp/km.out | sed 's/^/#   /'
	case $got in
	"$cmd /dev/pmem0 page=$STRAY_PAGE byte=$want") ok "$cmd: reads the protected byte ($want, as a guarded read does)" ;;
	*) notok "$cmd: reads the protected byte (guarded read: '$want', $cmd: '$got')" ;;
	esac
	check "$cmd: no fault: 0 memremap/WARNING/oops lines in dmesg (got $n)" test "$n" = 0
	check "$cmd: no fault: pks_relaxed_faults unchanged ('$rf0' -> '$rf1')" \
		test -n "$rf0" -a "$rf0" = "$rf1"
}

# kmap_flagged NWARN: kmap()/kunmap() of the protected page.  Expects
# NWARN warnings "memremap: invalid use of a PKS protected devmap page"
# (1 the first time in a boot, 0 after), each with a
# stack trace that leads to the caller of kmap() (pks_pmem_run or
# pks_pmem_write: kmap() is inline), no fault, the data intact.
kmap_flagged() {
	nwant=$1
	probe kmap
	kmsg "$mark" | grep -v 'pks_pmem: ' >/tmp/km.out
	pmem_cmd read /dev/pmem0 $STRAY_PAGE
	now=$(field byte)
	nmsg=$(grep -c 'memremap: invalid use of a PKS protected devmap page' /tmp/km.out)
	nw=$(grep -c 'WARNING:.*pgmap_protection_flag_invalid' /tmp/km.out)
	# The warning's block, from WARNING: to the end marker: a trace has
	# "Call Trace:", a frame of the kmap() caller and one of the write()
	# path that called it (the unwinder may mark frames "? ").
	sed -n '/WARNING:.*pgmap_protection_flag_invalid/,/end trace/p' /tmp/km.out >/tmp/kt.out
	ntr=0
	for re in 'Call Trace:' ' pks_pmem_(run|write)\+0x' ' vfs_write\+0x' 'end trace'; do
		grep -Eq "$re" /tmp/kt.out && ntr=$((ntr + 1))
	done
	grep 'memremap:' /tmp/km.out | sed 's/^/#   /'
	sed -n '/WARNING:/p;/RIP:/p;/Call Trace:/,/end trace/p' /tmp/kt.out | head -n 20 | sed 's/^/#   /'
	case $got in
	"kmap /dev/pmem0 page=$STRAY_PAGE protected=1") ok "kmap: the page is devmap_protected ('$got')" ;;
	*) notok "kmap: the page is devmap_protected ('$got')" ;;
	esac
	check "kmap: $nwant 'invalid use of a PKS protected devmap page' warning(s) (got $nmsg, $nw WARNING: lines)" \
		test "$nmsg" = "$nwant" -a "$nw" = "$nwant"
	if [ "$nwant" -gt 0 ]; then
		# at least: Call Trace, one pks_pmem_ frame, end trace
		check "kmap: the warning has a stack trace to the kmap() caller (Call Trace:, pks_pmem_write/run, vfs_write, end trace: $ntr of 4 found)" \
			test "$ntr" = 4 -a "$(grep -c 'Call Trace:' /tmp/km.out)" = "$nwant"
	fi
	check "kmap: no fault (pks_relaxed_faults '$rf0' -> '$rf1')" test -n "$rf0" -a "$rf0" = "$rf1"
	check "kmap: the data is intact ($before -> $now)" test -n "$now" -a "$now" = "$before"
}

# kmap_tests MODE: kmap_local_page() and kmap_atomic() reads, kmap()
# flagged once per boot.
kmap_tests() {
	if [ ! -e $PKS_PMEM ]; then
		notok "kmap tests: no hook $PKS_PMEM in this kernel"
		return
	fi
	key_check "kmap ($1)" /dev/pmem0 $STRAY_PAGE
	kmap_read kmap_local
	kmap_read kmap_atomic
	if [ "$1" = relaxed ]; then
		# Control: the same read without kmap faults, and the checks
		# above see it; otherwise they prove nothing.
		INNER=1
		ipass=0
		ifail=0
		kmap_read stray_read
		INNER=0
		rfc=$rf1
		if [ "$ifail" -eq 2 ] && [ -n "$rf0" ] && [ "$rf1" = "$((rf0 + 1))" ]; then
			ok "CONTROL: the same read with no kmap (stray_read) faults and fails those checks ($ifail inner failures, pks_relaxed_faults $rf0 -> $rfc)"
		else
			notok "CONTROL: the same read with no kmap (stray_read) should fault and fail 2 checks ($ipass passed, $ifail failed, pks_relaxed_faults '$rf0' -> '$rfc')"
		fi
	fi
	# once per boot in either mode: kmap() is reachable from user space
	kmap_flagged 1
	kmap_flagged 0
}

# leak_tests MODE: PMEM access left open at a return to user mode, the
# end of a work item and a task exit is closed, counted and reported once,
# and a relaxed-mode grant ends at the return to user mode
# (linux/tests/pmem-leak.c; the kernel reports each boundary once per boot,
# so once per boot)
leak_tests() {
	if [ ! -x /bin/pmem-leak ]; then
		notok "leak tests ($1): /bin/pmem-leak not built (make linux-tests)"
		return
	fi
	pmem-leak "$1" /dev/pmem0 $STRAY_PAGE >/tmp/leak.out 2>&1
	rc=$?
	show /tmp/leak.out
	check "leak tests ($1): $(tail -n 1 /tmp/leak.out) (exit $rc)" test "$rc" = 0
}

# The dm and DAX tests (linux/tests/dax.sh): dax_tests MODE
[ -f /bin/linux-dax.sh ] && . /bin/linux-dax.sh
command -v dax_tests >/dev/null || dax_tests() { notok "dm and DAX tests: no /bin/linux-dax.sh"; }

case $boot in
main)
	# First: relaxed mode warns once per boot, so the stray-write test
	# must be the first relaxed fault of the boot.
	relaxed_stray
	pmem=0
	pmem_setup && pmem=1
	[ $pmem = 1 ] && kmap_tests relaxed
	for n in ${PMGUARD_LINUX_PKS_TESTS:-}; do
		run_pks_test "$n"
	done
	[ -n "${PMGUARD_LINUX_PKS_TESTS:-}" ] ||
		notok "run_pks: no test numbers known (linux/README lists none yet)"
	test_pks_test
	protection_keys_test
	if [ $pmem = 1 ]; then
		pmem_key
		ext4_dax
	fi
	devdax_test
	[ $pmem = 1 ] && exc_tests relaxed
	[ $pmem = 1 ] && cpu_hotplug
	[ $pmem = 1 ] && dax_tests relaxed
	[ $pmem = 1 ] && leak_tests relaxed
	[ "${PMGUARD_LINUX_VM_TESTS:-1}" = 1 ] && vm_tests
	;;
crash9)
	if [ ! -e $RUN_PKS ]; then
		notok "run_pks 9: $RUN_PKS does not exist (no PKS test code in this kernel)"
		finish
	fi
	echo 9 >$RUN_PKS
	res=$(cat $RUN_PKS 2>&1)
	check "run_pks 9, first write: armed, reads back PASS ('$res')" test "$res" = PASS
	echo "@@EXPECT-OOPS run_pks 9@@"
	expect_oops_mark "run_pks 9"
	(echo 9 >$RUN_PKS)
	diag "after the crash test the shell lives on (status $?)"
	kmsg | grep -E 'PKRS|Oops|BUG' | sed 's/^/#   /'
	;;
strict)
	if [ ! -e $PKS_PMEM ]; then
		notok "strict stray write: no hook $PKS_PMEM in this kernel"
		finish
	fi
	if echo bogus >$FAULT_MODE 2>/tmp/fm.err; then rc=0; else rc=1; fi
	mode=$(cat $FAULT_MODE 2>/dev/null)
	check "pks_fault_mode refuses 'bogus' ($(cat /tmp/fm.err)) and stays '$mode'" \
		test $rc = 1 -a "$mode" = relaxed
	echo strict >$FAULT_MODE 2>/tmp/fm.err
	mode=$(cat $FAULT_MODE 2>/dev/null)
	check "pks_fault_mode switched to strict at run time ('$mode')" test "$mode" = strict
	# In strict mode an unguarded access oopses: kmap_local_page() and
	# kmap_atomic() must open access; kmap() warns once.
	kmap_tests strict
	exc_tests strict
	dax_tests strict
	leak_tests strict
	pmem_cmd read /dev/pmem0 $STRAY_PAGE
	before=$(field byte)
	wrote=$(other "$before")
	diag "page $STRAY_PAGE holds $before; stray write of $wrote, strict"
	echo "@@EXPECT-OOPS stray write, strict@@"
	expect_oops_mark "stray write, strict"
	(echo "stray /dev/pmem0 $STRAY_PAGE $wrote" >$PKS_PMEM)
	diag "the writing shell exited with status $? (killed by the oops)"
	pmem_cmd read /dev/pmem0 $STRAY_PAGE
	now=$(field byte)
	check "strict: the data is unchanged after the stray write ($before -> $now)" \
		test -n "$now" -a "$now" = "$before"
	;;
control)
	# Protection off: the same stray-write test as the main boot, run as
	# an inner test.  It must FAIL here (the write lands silently: no
	# warning, no counted fault); only then does the control pass.
	if [ ! -e $PKS_PMEM ]; then
		notok "CONTROL: no hook $PKS_PMEM in this kernel"
		finish
	fi
	pmem_cmd key /dev/pmem0 0
	diag "protection off: $res"
	INNER=1
	relaxed_stray
	INNER=0
	diag "inner stray-write test: $ipass passed, $ifail failed"
	if [ "$ifail" -gt 0 ] && [ -n "$now" ] && [ "$now" = "$wrote" ]; then
		ok "CONTROL: with protection off the stray-write test fails as it must (the write landed silently, $ifail inner failures)"
	else
		notok "CONTROL: with protection off the stray-write test should fail, but it passed (or the write did not land: $before -> $now)"
	fi
	# kmap() of the (unprotected) page: the kmap test must fail, with no
	# warning to find.
	INNER=1
	ipass=0
	ifail=0
	kmap_flagged 1
	INNER=0
	diag "inner kmap test: $ipass passed, $ifail failed"
	if [ "$ifail" -gt 0 ] && [ "$nmsg" = 0 ] && [ "$now" = "$before" ]; then
		ok "CONTROL: with protection off the kmap() test fails as it must (no warning, $ifail inner failures)"
	else
		notok "CONTROL: with protection off the kmap() test should fail, but it passed ($nmsg warnings)"
	fi
	;;
extra)
	echo relaxed >$FAULT_MODE
	check "pks_fault_mode is relaxed ('$(cat $FAULT_MODE 2>/dev/null)')" \
		test "$(cat $FAULT_MODE 2>/dev/null)" = relaxed
	dax_extra_tests
	pmem_setup && suspend_resume
	;;
*)
	notok "unknown boot '$boot'"
	;;
esac
finish
