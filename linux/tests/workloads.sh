#!/bin/sh
# SPDX-License-Identifier: MIT
#
# workloads.sh - third-party workloads on the patched kernel, inside the
# QEMU guest of `make linux-check` (linux/scripts/linux-check puts this at
# /bin/linux-workloads.sh, with Debian's fio and its libraries).
#
# Usage: linux-workloads.sh MODE...
#   MODE  relaxed or strict: memremap.pks_fault_mode for one pass of every
#         workload below (a pass per MODE, in order; the devices are set
#         up once).  Relaxed: each workload must count 0 faults in
#         pks_relaxed_faults; strict: no fault may oops.
#
# Devices (the kernel command line of linux/scripts/linux-check's workload
# boots: memmap=64M!1G, memmap=64M!1536M, memmap=64M!1728M,
# memmap=64M!1856M):
#   /dev/pmem0 (1 GiB)      raw namespace: ext4 -o dax (/ext4.img)
#   region at 1728 MiB      switched through sysfs to an fsdax ("pfn")
#                           namespace, memmap on the device: XFS -o
#                           dax=always (/xfs.img)
#   region at 1856 MiB      switched to device-dax, 2 MiB alignment
#
# Each pass, on ext4 and on XFS (fio --verify=crc32c --verify_fatal=1,
# 4 MiB per job): psync buffered write+verify, --direct=1 write+verify,
# mmap randwrite+verify, psync randrw+verify; on the device-dax: fio's
# dev-dax engine write+verify and the devdax program; last, on ext4 and
# XFS, read+verify into a buffer that is a MAP_SHARED mapping of a sparse
# file of the same DAX file system (--iomem=mmapshared:), and into a
# MAP_PRIVATE mapping of a written one (--iomem=mmap:): the user buffer
# faults inside the kernel's DAX copy (the review's finding 1,
# docs/linux.md; last, so that an oops there, which ends a boot with
# oops=panic, leaves the others run).  On XFS with reflink (Linux 6.12) also the copy-on-write
# paths of fs/dax.c (dax-reflink).  After each workload: 0 PKS or warning lines in dmesg,
# pks_relaxed_faults unchanged.
#
# Output as guest.sh: "ok - what" / "not ok - what", "# " diagnostics,
# "guest: fio verified N KiB in N jobs, N errors" and last
# "guest: N passed, N failed".

npass=0
nfail=0
DBG=/sys/kernel/debug
FAULT_MODE=/sys/module/memremap/parameters/pks_fault_mode
RELAXED_FAULTS=/sys/module/memremap/parameters/pks_relaxed_faults
PKS_PMEM=$DBG/x86/pks_pmem
ND=/sys/bus/nd/devices
# Kernel log lines of a PKS event, a warning or a lockdep/atomic report.
KBAD='pks_|PKRS|pkey|[Pp]rotection key|stray|pgmap_protection|memremap:|WARNING:|BUG:|Oops|possible circular|inconsistent lock|suspicious RCU|sleeping function called|smp_processor_id\(\) in preemptible'
FRAME='^ *(\? )?[A-Za-z0-9_.]+\+0x[0-9a-f]+/0x[0-9a-f]+( \[[a-z0-9_]+\])? *$'
FIO_SIZE=4M
verified_kib=0
fio_jobs=0
fio_errors=0

ok() { npass=$((npass + 1)); echo "ok - $*"; }
notok() { nfail=$((nfail + 1)); echo "not ok - $*"; }
diag() { echo "# $*"; }
show() { sed 's/^/#   /' "$1"; }
# kmsg_mark, kmsg: the kernel log after a marker (/bin/kmsg.sh)
. /bin/kmsg.sh
finish() {
	echo "guest: fio verified $verified_kib KiB in $fio_jobs jobs, $fio_errors errors"
	echo "guest: $npass passed, $nfail failed"
	[ "$nfail" -eq 0 ]
	exit
}

# region_at HEX: the nd region whose resource starts at HEX
region_at() {
	for r in "$ND"/region*; do
		[ "$(cat "$r/resource" 2>/dev/null)" = "$1" ] && { basename "$r"; return 0; }
	done
	return 1
}

# to_seed REGION KIND ALIGN UUID: switch REGION's raw namespace to its
# KIND seed (pfn: fsdax, dax: devdax) through sysfs, as ndctl would; the
# new device's name in $seed
to_seed() {
	region=$1
	ns=$(cd "$ND" && ls -d "namespace${region#region}".* 2>/dev/null | head -n 1)
	seed=$(cat "$ND/$region/${2}_seed" 2>/dev/null)
	if [ -z "$ns" ] || [ -z "$seed" ]; then
		diag "$region: namespace '$ns', $2 seed '$seed'"
		return 1
	fi
	echo "$ns" >/sys/bus/nd/drivers/nd_pmem/unbind 2>/dev/null
	echo "$4" >"$ND/$seed/uuid" &&
		echo "$3" >"$ND/$seed/align" &&
		echo pmem >"$ND/$seed/mode" &&
		echo "$ns" >"$ND/$seed/namespace" &&
		echo "$seed" >/sys/bus/nd/drivers_probe
}

# key_ok WHAT TARGET N: the page's direct-map PTE carries the PMEM key
key_ok() {
	echo "key $2 $3" >$PKS_PMEM 2>/dev/null
	res=$(cat $PKS_PMEM 2>&1)
	diag "$res"
	k=$(echo " $res " | sed -n 's/.* pkey=\([0-9]*\) .*/\1/p')
	pk=$(echo " $res " | sed -n 's/.* pmem_key=\([0-9]*\) .*/\1/p')
	case " $res " in
	*" protected=1 "*)
		case " $res " in
		*" available=1 "*)
			if [ -n "$k" ] && [ "$k" = "$pk" ] && [ "$k" != 0 ]; then
				ok "$1: page $3 carries the PMEM key (pkey=$k, protected=1)"
				return
			fi
			;;
		esac
		;;
	esac
	notok "$1: page $3 carries the PMEM key ($res)"
}

# ---- setup ----
mount -t debugfs debugfs $DBG 2>/dev/null
diag "kernel $(uname -r), $(nproc) cpus, workloads: $*, cmdline: $(cat /proc/cmdline)"
if ! command -v fio >/dev/null; then
	notok "fio is in the guest (linux/scripts/linux-check ships Debian's fio)"
	finish
fi
diag "$(fio --version 2>&1)"
mkdir -p /mnt/ext4 /mnt/xfs

EXT4=
if dd if=/ext4.img of=/dev/pmem0 bs=1M 2>/tmp/wl.err &&
	mount -t ext4 -o dax /dev/pmem0 /mnt/ext4 2>>/tmp/wl.err; then
	ok "ext4 -o dax on /dev/pmem0 ($(grep ' /mnt/ext4 ' /proc/mounts | cut -d' ' -f4))"
	EXT4=/mnt/ext4
else
	show /tmp/wl.err
	notok "ext4 -o dax on /dev/pmem0"
fi

# fsdax namespace (pfn, memmap on the device) with XFS -o dax=always
XFS=
reg=$(region_at 0x6c000000)
mark=$(kmsg_mark)
if [ -n "$reg" ] && to_seed "$reg" pfn 2097152 6a2f7c1e-3b4d-4e5f-8a9b-0c1d2e3f4a5b 2>/tmp/wl.err; then
	n=0
	while [ $n -lt 50 ]; do
		blk=$(ls "$ND/$seed/block" 2>/dev/null | head -n 1)
		[ -n "$blk" ] && [ -b "/dev/$blk" ] && break
		sleep 0.1
		n=$((n + 1))
	done
fi
if [ -n "${blk:-}" ] && [ -b "/dev/$blk" ]; then
	ok "fsdax: $reg switched to a pfn namespace ($seed, /dev/$blk, $(cat "$ND/$seed/size" 2>/dev/null) bytes)"
	key_ok "fsdax /dev/$blk" "/dev/$blk" 0
	key_ok "fsdax /dev/$blk" "/dev/$blk" 8000
	if dd if=/xfs.img of="/dev/$blk" bs=1M 2>/tmp/wl.err &&
		mount -t xfs -o dax=always "/dev/$blk" /mnt/xfs 2>>/tmp/wl.err; then
		opts=$(grep ' /mnt/xfs ' /proc/mounts | cut -d' ' -f4)
		case $opts in
		*dax*) ok "XFS -o dax=always on the fsdax namespace /dev/$blk ($opts)"; XFS=/mnt/xfs ;;
		*) notok "XFS -o dax=always on /dev/$blk: /proc/mounts shows no dax ($opts)" ;;
		esac
	else
		show /tmp/wl.err
		kmsg "$mark" | tail -n 20 | sed 's/^/#   /'
		notok "XFS -o dax=always on the fsdax namespace /dev/$blk"
	fi
else
	show /tmp/wl.err
	kmsg "$mark" | tail -n 20 | sed 's/^/#   /'
	notok "fsdax: the region at 1728 MiB ('$reg') switched to a pfn namespace with a block device"
fi

# device-dax with 2 MiB alignment
DAX=
reg=$(region_at 0x74000000)
if [ -n "$reg" ] && to_seed "$reg" dax 2097152 9d8e7f6a-5b4c-4d3e-9f2a-1b0c9d8e7f6a 2>/tmp/wl.err; then
	sleep 1
	# the nd seed daxR.N and the device-dax instance under it, daxR.N too
	DAX=$(ls -d /sys/bus/dax/devices/"$seed" 2>/dev/null | head -n 1)
	DAX=${DAX##*/}
fi
if [ -n "$DAX" ] && [ -c "/dev/$DAX" ]; then
	ok "devdax: $reg switched to device-dax with align $(cat /sys/bus/dax/devices/$DAX/align) (/dev/$DAX)"
	key_ok "devdax /dev/$DAX" "phys:$(cat /sys/bus/dax/devices/$DAX/resource)" 0
else
	show /tmp/wl.err
	notok "devdax: the region at 1856 MiB ('$reg') switched to device-dax, 2 MiB aligned"
	DAX=
fi

# ---- workloads ----

# after WHAT MARK RF0: no PKS/warning line since MARK, no relaxed fault
after() {
	# stack frames alone are no event (see guest.sh's no_pks_events)
	kmsg "$2" | grep -Ev "$FRAME" | grep -E "$KBAD" | grep -v 'pks_pmem: ' >/tmp/ev.out
	rf1=$(cat $RELAXED_FAULTS 2>/dev/null)
	nev=$(wc -l </tmp/ev.out)
	if [ "$nev" -eq 0 ] && [ -n "$3" ] && [ "$3" = "$rf1" ]; then
		return 0
	fi
	diag "$1: $nev PKS/warning lines in dmesg, pks_relaxed_faults $3 -> $rf1"
	head -n 30 /tmp/ev.out | sed 's/^/#   /'
	return 1
}

# fio_job MODE WHAT FIO-ARGS...: one fio run (terse output), its result,
# the kernel log and the relaxed fault counter after it
fio_job() {
	mode=$1 what=$2
	shift 2
	mark=$(kmsg_mark)
	rf0=$(cat $RELAXED_FAULTS 2>/dev/null)
	echo "# workload: $mode: $what"
	timeout 180 fio --output-format=terse --terse-version=3 --verify_fatal=1 \
		--verify_state_save=0 --bs=4k --size=$FIO_SIZE "$@" >/tmp/fio.out 2>/tmp/fio.err
	rc=$?
	fio_jobs=$((fio_jobs + 1))
	line=$(grep '^3;' /tmp/fio.out | tail -n 1)
	err=$(echo "$line" | cut -d';' -f5)
	rkb=$(echo "$line" | cut -d';' -f6)
	wkb=$(echo "$line" | cut -d';' -f47)
	if [ $rc -eq 0 ] && [ "$err" = 0 ] && [ "${rkb:-0}" -gt 0 ]; then
		verified_kib=$((verified_kib + rkb))
		if after "$what" "$mark" "$rf0"; then
			ok "[$mode] $what: fio read+verified $rkb KiB (wrote ${wkb:-0} KiB), 0 errors, 0 faults, 0 warnings"
			return
		fi
		notok "[$mode] $what: fio verified $rkb KiB, but the kernel logged a fault or warning (pks_relaxed_faults $rf0 -> $rf1)"
		return
	fi
	fio_errors=$((fio_errors + 1))
	show /tmp/fio.err
	tail -n 5 /tmp/fio.out | cut -c1-300 | sed 's/^/#   /'
	after "$what" "$mark" "$rf0"
	notok "[$mode] $what: fio exit $rc, error '$err', read $rkb KiB"
}

# fs_workloads MODE FS DIR: fio on files of a DAX file system
fs_workloads() {
	m=$1 fs=$2 d=$3
	rm -rf "$d"/wl
	mkdir -p "$d"/wl
	fio_job "$m" "$fs: psync buffered write+verify" --name=psync \
		--filename="$d/wl/psync" --ioengine=psync --rw=write --verify=crc32c
	fio_job "$m" "$fs: psync --direct=1 write+verify" --name=direct \
		--filename="$d/wl/direct" --ioengine=psync --direct=1 --bs=64k \
		--rw=write --verify=crc32c
	fio_job "$m" "$fs: mmap randwrite+verify" --name=mmap \
		--filename="$d/wl/mmap" --ioengine=mmap --rw=randwrite --verify=crc32c
	fio_job "$m" "$fs: psync randrw+verify" --name=randrw \
		--filename="$d/wl/randrw" --ioengine=psync --rw=randrw --verify=crc32c
}

# iomem_workloads MODE FS DIR: fio reads into a buffer mapped from
# another file of the same DAX file system (run after every other
# workload: in strict mode a kernel without the fix oopses here, and
# oops=panic ends the boot)
iomem_workloads() {
	m=$1 fs=$2 d=$3
	# $d/wl/psync: fs_workloads' psync job wrote it with verify headers.
	# The user buffer is a DAX file mapping that is not populated yet:
	# read() copies into it from inside the kernel's DAX window, and the
	# #PF that copy takes allocates and zeroes (shared, sparse) or copies
	# (private, CoW) pmem blocks.
	truncate -s 1M "$d/wl/buf.sparse"
	fio_job "$m" "$fs: read+verify into a MAP_SHARED sparse DAX file (--iomem=mmapshared:)" \
		--name=mmapshared --filename="$d/wl/psync" --ioengine=psync --rw=read \
		--verify=crc32c --iomem=mmapshared:"$d/wl/buf.sparse"
	dd if=/dev/zero of="$d/wl/buf.priv" bs=64k count=16 2>/dev/null
	sync
	fio_job "$m" "$fs: read+verify into a MAP_PRIVATE DAX file (--iomem=mmap:)" \
		--name=mmapprivate --filename="$d/wl/psync" --ioengine=psync --rw=read \
		--verify=crc32c --iomem=mmap:"$d/wl/buf.priv"
	rm -rf "$d"/wl
}

# reflink_workloads MODE DIR: the copy-on-write paths of fs/dax.c on XFS
# with reflink (linux/tests/dax-reflink.c: CoW write, CoW fault, zeroing
# on a shared extent, unshare, dedupe compare).  Linux 6.1's DAX file
# systems have no reflink (its XFS image is made without): the program
# skips there, and nothing is counted.
reflink_workloads() {
	m=$1 d=$2
	command -v dax-reflink >/dev/null || return 0
	mark=$(kmsg_mark)
	rf0=$(cat $RELAXED_FAULTS 2>/dev/null)
	echo "# workload: $m: xfs: reflink copy-on-write (dax-reflink)"
	timeout 120 dax-reflink "$d" >/tmp/rl.out 2>&1
	rc=$?
	if [ $rc -eq 4 ]; then
		diag "[$m] xfs: $(grep -m1 SKIP /tmp/rl.out)"
		return 0
	fi
	if [ $rc -eq 0 ] && after "xfs reflink" "$mark" "$rf0"; then
		ok "[$m] xfs: reflink CoW write, CoW fault, zeroing, unshare, dedupe ($(tail -n 1 /tmp/rl.out)), 0 faults, 0 warnings"
	else
		show /tmp/rl.out
		notok "[$m] xfs: reflink copy-on-write (dax-reflink exit $rc)"
	fi
}

devdax_workloads() {
	m=$1
	fio_job "$m" "devdax /dev/$DAX (2 MiB aligned): fio dev-dax write+verify" \
		--name=devdax --filename="/dev/$DAX" --ioengine=dev-dax --rw=write \
		--bs=2m --size=8M --verify=crc32c
	mark=$(kmsg_mark)
	rf0=$(cat $RELAXED_FAULTS 2>/dev/null)
	echo "# workload: $m: devdax program"
	timeout 120 devdax "/dev/$DAX" "$(cat /sys/bus/dax/devices/$DAX/size)" \
		"$(cat /sys/bus/dax/devices/$DAX/align)" >/tmp/dd.out 2>&1
	rc=$?
	if [ $rc -eq 0 ] && after devdax "$mark" "$rf0"; then
		ok "[$m] devdax /dev/$DAX (2 MiB aligned) mapped from user space, written, read back ($(tail -n 1 /tmp/dd.out)), 0 faults"
	else
		show /tmp/dd.out
		notok "[$m] devdax /dev/$DAX (2 MiB aligned) mapped from user space (exit $rc)"
	fi
}

# devdax_tails MODE: the kernel on TAIL pages of the 2 MiB device-dax
# (compound pages: a tail's struct page holds no pgmap of its own, the
# guards find it through compound_head()).  dax-remote maps 8 MiB and
# reads and writes pages 0, 682, 1365 and 2047 of it through
# /proc/PID/mem and ptrace (__access_remote_vm() -> kmap_local_page()):
# all but the first are tails (680 KiB, 1364 KiB and 2044 KiB into a
# 2 MiB page).  The data must be right with no fault and no warning.  (A
# stray write to a tail must still fault: the debug boot's dax.sh checks
# that, since this boot allows no warning.)
devdax_tails() {
	m=$1
	mark=$(kmsg_mark)
	rf0=$(cat $RELAXED_FAULTS 2>/dev/null)
	timeout 120 dax-remote "/dev/$DAX" $((8 << 20)) >/tmp/dr.out 2>&1
	rc=$?
	if [ $rc -eq 0 ] && after dax-remote "$mark" "$rf0"; then
		ok "[$m] devdax /dev/$DAX tail pages read and written through /proc/PID/mem and ptrace ($(tail -n 1 /tmp/dr.out)), 0 faults"
	else
		show /tmp/dr.out
		notok "[$m] devdax /dev/$DAX tail pages read and written through /proc/PID/mem and ptrace (exit $rc)"
	fi
}

for mode in "$@"; do
	if echo "$mode" >$FAULT_MODE 2>/tmp/wl.err && [ "$(cat $FAULT_MODE)" = "$mode" ]; then
		ok "[$mode] pks_fault_mode set to $mode"
	else
		show /tmp/wl.err
		notok "[$mode] pks_fault_mode set to $mode ('$(cat $FAULT_MODE 2>&1)')"
		continue
	fi
	[ -n "$EXT4" ] && fs_workloads "$mode" ext4 "$EXT4"
	[ -n "$XFS" ] && fs_workloads "$mode" xfs "$XFS"
	[ -n "$XFS" ] && reflink_workloads "$mode" "$XFS"
	[ -n "$DAX" ] && devdax_workloads "$mode"
	[ -n "$DAX" ] && devdax_tails "$mode"
	[ -n "$EXT4" ] && iomem_workloads "$mode" ext4 "$EXT4"
	[ -n "$XFS" ] && iomem_workloads "$mode" xfs "$XFS"
done
echo "# workload: done"
[ -n "$EXT4" ] && umount /mnt/ext4
[ -n "$XFS" ] && umount /mnt/xfs
finish
