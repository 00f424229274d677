# SPDX-License-Identifier: MIT
#
# dax.sh - guest tests of DAX through device-mapper and of remote access to
# DAX mappings (the review's findings 2 and 3: docs/linux.md, "What differs
# from V8, and why").  Sourced by guest.sh (it lands
# at /bin/linux-dax.sh) and uses its helpers (ok, notok, check, diag, show,
# kmsg, kmsg_mark, no_pks_events, pmem_cmd, field, RELAXED_FAULTS).
#
#   dax_tests MODE     MODE relaxed (main boot) or strict (strict boot,
#                      before its provoked oops: an unguarded access here
#                      oopses, and the host fails the boot for it)
#
# 1. /proc/PID/mem and ptrace over a DAX mapping (dax-remote): on ext4
#    -o dax on /dev/pmem0, and on device-dax when the main boot made one.
#    Patch "mm/memory: Use kmap_local_page() in __access_remote_vm()".
# 2. dm-linear over the first 32 MiB of /dev/pmem0, ext4 -o dax on it:
#    the dm device reports DAX, the mount says dax, pmem-fs (file I/O,
#    MAP_SHARED writes, STATX_ATTR_DAX on every file) passes, the data
#    survives umount + mount.  Patch 0044 ("dm: Mark the dax device
#    protected when a target's device is"; the dax core opens the key
#    for any dax device, dm's own device among them).
# 3. dm-writecache with its cache on a dm-linear volume over /dev/pmem0
#    (an LVM cache volume on pmem) and a loop device over a tmpfs file as
#    origin: write a pattern, read it back, reload the table (a new
#    writecache reads its metadata back from the pmem), read it back,
#    flush, remove, and the origin holds the pattern.  Same patch: the
#    write cache must see the dm volume as protected and make its own
#    mapping.
# After them: no PKS warning or fault in dmesg, pks_relaxed_faults
# unchanged (relaxed mode counts every unguarded access).
#
# The guest has no udev: dmsetup runs with DM_DISABLE_UDEV=1 and makes the
# /dev/mapper nodes itself.

DAX_MNT=/mnt/kdax
# /dev/pmem0 layout (512-byte sectors): the ext4 image of guest.sh's
# ext4_dax at 0-32 MiB, the write cache's volume at 32-40 MiB; guest.sh's
# stray-write page is at 46.9 MiB.
DAX_LIN_SECTORS=65536
DAX_WCC_START=65536
DAX_WCC_SECTORS=16384

dmset() { DM_DISABLE_UDEV=1 dmsetup "$@"; }

# dax_faults WHAT: no unguarded access since the last call (relaxed mode
# counts each in pks_relaxed_faults; strict mode oopses instead, which the
# host sees, and the access fails)
dax_faults() {
	rfn=$(cat "$RELAXED_FAULTS" 2>/dev/null)
	check "$1: no access faulted (pks_relaxed_faults '$rfp' -> '$rfn')" \
		test -n "$rfn" -a "$rfn" = "$rfp"
	rfp=$rfn
}

# dax_run WHAT CMD...: run a TAP program, its lines as diagnostics, one result
dax_run() {
	what=$1
	shift
	"$@" >/tmp/dx.out 2>&1
	rc=$?
	sed 's/^/#   /' /tmp/dx.out
	check "$what ($(tail -n 1 /tmp/dx.out), exit $rc)" test "$rc" = 0
}

dax_remote_tests() {
	mkdir -p $DAX_MNT
	if dd if=/ext4.img of=/dev/pmem0 bs=1M 2>/tmp/dx.err &&
		mount -t ext4 -o dax /dev/pmem0 $DAX_MNT 2>>/tmp/dx.err; then
		dax_run "/proc/PID/mem and ptrace over an ext4 -o dax mapping" \
			dax-remote $DAX_MNT/remote 65536
		rm -f $DAX_MNT/remote
		umount $DAX_MNT
	else
		show /tmp/dx.err
		notok "mount -t ext4 -o dax /dev/pmem0 for the remote-access test"
	fi
	dev=$(ls /dev/dax* 2>/dev/null | head -n 1)
	if [ -n "$dev" ]; then
		align=$(cat /sys/bus/dax/devices/"${dev#/dev/}"/align 2>/dev/null)
		size=$((${align:-4096} * 4))
		[ "$size" -ge 65536 ] || size=65536
		dax_run "/proc/PID/mem and ptrace over a device-dax mapping ($dev)" \
			dax-remote "$dev" "$size"
	fi
}

dax_dm_linear() {
	if ! dmset create kdax-lin --table "0 $DAX_LIN_SECTORS linear /dev/pmem0 0" 2>/tmp/dx.err; then
		show /tmp/dx.err
		notok "dm-linear over /dev/pmem0 created"
		return
	fi
	# the dm-N name of the device (dmsetup makes /dev/mapper nodes, not links)
	dm=$(grep -lx kdax-lin /sys/block/dm-*/dm/name 2>/dev/null | cut -d/ -f4)
	ok "dm-linear over /dev/pmem0 created ($dm)"
	check "dm-linear over /dev/pmem0 supports DAX (/sys/block/$dm/queue/dax)" \
		test "$(cat /sys/block/"$dm"/queue/dax 2>/dev/null)" = 1
	if ! dd if=/ext4.img of=/dev/mapper/kdax-lin bs=1M 2>/tmp/dx.err; then
		show /tmp/dx.err
		notok "dm-linear: the ext4 image written"
	fi
	mkdir -p $DAX_MNT
	mark2=$(kmsg_mark)
	if ! mount -t ext4 -o dax /dev/mapper/kdax-lin $DAX_MNT 2>/tmp/dx.err; then
		show /tmp/dx.err
		kmsg "$mark2" | sed 's/^/#   /'
		notok "dm-linear: mount -t ext4 -o dax"
		dmset remove kdax-lin
		return
	fi
	opts=$(grep " $DAX_MNT " /proc/mounts)
	diag "$opts"
	case $opts in
	*dax*) ok "dm-linear: ext4 mounted with dax ($opts)" ;;
	*) notok "dm-linear: ext4 mounted with dax ($opts)" ;;
	esac
	if kmsg "$mark2" | grep -qi 'dax.*unsupported\|disabling dax\|DAX unsupported'; then
		notok "dm-linear: the kernel did not refuse DAX for the mount"
		kmsg "$mark2" | sed 's/^/#   /'
	else
		ok "dm-linear: the kernel did not refuse DAX for the mount"
	fi
	# pmem-fs checks STATX_ATTR_DAX on every file it makes: really DAX
	dax_run "dm-linear: ext4 dax file I/O (pmem-fs)" pmem-fs $DAX_MNT
	sync
	umount $DAX_MNT && mount -t ext4 -o dax /dev/mapper/kdax-lin $DAX_MNT
	dax_run "dm-linear: after umount + mount -o dax the data verified" \
		pmem-fs --verify $DAX_MNT
	umount $DAX_MNT
	dmset remove kdax-lin
}

# dax_wc_read DEV WHAT: the first 4 MiB of DEV equal the pattern
dax_wc_read() {
	sum=$(dd if="$1" bs=65536 count=64 2>/dev/null | md5sum | cut -d' ' -f1)
	check "dm-writecache: $2 (md5 $sum)" test "$sum" = "$pat_sum"
}

dax_dm_writecache() {
	head -c 4194304 /dev/urandom >/tmp/kdax-pat
	pat_sum=$(md5sum </tmp/kdax-pat | cut -d' ' -f1)
	dd if=/dev/zero of=/tmp/kdax-origin bs=1M count=16 2>/dev/null
	lo=$(losetup -f 2>/dev/null)
	if [ -z "$lo" ] || ! losetup "$lo" /tmp/kdax-origin 2>/tmp/dx.err; then
		show /tmp/dx.err 2>/dev/null
		notok "dm-writecache: a loop device over /tmp/kdax-origin ('$lo')"
		return
	fi
	osec=32768
	if ! dmset create kdax-wcc --table "0 $DAX_WCC_SECTORS linear /dev/pmem0 $DAX_WCC_START" 2>/tmp/dx.err; then
		show /tmp/dx.err
		notok "dm-writecache: the cache volume (dm-linear over /dev/pmem0)"
		losetup -d "$lo"
		return
	fi
	# a zero superblock: the write cache initialises the cache
	dd if=/dev/zero of=/dev/mapper/kdax-wcc bs=4096 count=1 2>/dev/null
	wct="0 $osec writecache p $lo /dev/mapper/kdax-wcc 4096 0"
	mark2=$(kmsg_mark)
	if ! dmset create kdax-wc --table "$wct" 2>/tmp/dx.err; then
		show /tmp/dx.err
		kmsg "$mark2" | sed 's/^/#   /'
		notok "dm-writecache: created over $lo with the pmem cache volume"
	else
		ok "dm-writecache: created over $lo with the pmem cache volume ($wct)"
		dmset status kdax-wc | sed 's/^/#   status: /'
		if dd if=/tmp/kdax-pat of=/dev/mapper/kdax-wc bs=65536 conv=fsync 2>/tmp/dx.err; then
			ok "dm-writecache: 4 MiB pattern written"
		else
			show /tmp/dx.err
			notok "dm-writecache: 4 MiB pattern written"
		fi
		dax_wc_read /dev/mapper/kdax-wc "the pattern reads back"
		dmset status kdax-wc | sed 's/^/#   status: /'
		# a new writecache instance reads its metadata from the pmem
		if dmset reload kdax-wc --table "$wct" 2>/tmp/dx.err &&
			dmset resume kdax-wc 2>>/tmp/dx.err; then
			ok "dm-writecache: table reloaded"
		else
			show /tmp/dx.err
			notok "dm-writecache: table reloaded"
		fi
		dax_wc_read /dev/mapper/kdax-wc "the pattern reads back after the reload"
		dmset message kdax-wc 0 flush 2>/tmp/dx.err || show /tmp/dx.err
		dmset status kdax-wc | sed 's/^/#   status after flush: /'
		dmset remove kdax-wc 2>/tmp/dx.err || show /tmp/dx.err
		dax_wc_read "$lo" "after flush and remove the origin holds the pattern"
	fi
	dmset remove kdax-wcc 2>/dev/null
	losetup -d "$lo"
	rm -f /tmp/kdax-origin /tmp/kdax-pat
}

dax_tests() {
	if [ ! -b /dev/pmem0 ]; then
		notok "dm and DAX tests ($1): no /dev/pmem0"
		return
	fi
	mark=$(kmsg_mark)
	rf0=$(cat "$RELAXED_FAULTS" 2>/dev/null)
	diag "dm and DAX tests, $1 mode"
	rfp=$rf0
	dax_remote_tests
	dax_faults "/proc/PID/mem and ptrace over DAX mappings"
	if ! command -v dmsetup >/dev/null || [ ! -e /dev/mapper/control ]; then
		notok "dm tests: dmsetup ($(command -v dmsetup)) and /dev/mapper/control ($(ls /dev/mapper 2>&1)) present"
	else
		dax_dm_linear
		dax_faults "dm-linear with ext4 -o dax"
		dax_dm_writecache
		dax_faults "dm-writecache with a pmem cache volume"
	fi
	no_pks_events "$mark" "dm and DAX tests ($1)"
	rf1=$(cat "$RELAXED_FAULTS" 2>/dev/null)
	check "dm and DAX tests ($1): pks_relaxed_faults unchanged ('$rf0' -> '$rf1')" \
		test -n "$rf0" -a "$rf0" = "$rf1"
}

# ---- The debug kernel's extra tests (guest.sh extra): features only the
# debug config has (linux/debug.config: KVM, userfaultfd).  Run after the
# debug boot's main tests and strict workloads, in relaxed mode; last,
# because the unbind test takes /dev/pmem0 away.

# dax_dev4k: the device-dax device of 4 KiB alignment (guest.sh's
# devdax_test made it from region 1)
dax_dev4k() {
	for d in /sys/bus/dax/devices/dax*; do
		[ "$(cat "$d/align" 2>/dev/null)" = 4096 ] && { basename "$d"; return; }
	done
}

# 4. KVM's gfn_to_pfn_cache over device-dax memory (finding 3; patch "KVM:
#    Map protected devmap pages of a gfn_to_pfn_cache with vmap()"): a VM
#    whose memory is an mmap() of the device-dax device enables kvmclock,
#    KVM writes it from the host kernel.  No fault counted, no PKS line.
dax_kvm_test() {
	name=$(dax_dev4k)
	if [ -z "$name" ]; then
		notok "KVM: a 4 KiB-aligned device-dax device for the VM's memory ($(ls /sys/bus/dax/devices 2>&1))"
		return
	fi
	check "KVM: /dev/kvm exists (kvm_amd on QEMU's emulated SVM: $(grep -c -w svm /proc/cpuinfo) CPUs with svm)" \
		test -c /dev/kvm
	mark=$(kmsg_mark)
	rfp=$(cat "$RELAXED_FAULTS" 2>/dev/null)
	dax_run "KVM: a VM in device-dax memory (/dev/$name) runs and its kvmclock is written" \
		kvmclock-dax "/dev/$name"
	dax_faults "KVM: kvmclock updates into device-dax memory"
	no_pks_events "$mark" "KVM: kvmclock updates into device-dax memory"
}

# 4b. KVM's kvm_vcpu_map() over device-dax memory (patch "KVM: Map
#    protected device pages of kvm_vcpu_map() with vmap()"): a VM whose
#    memory is an mmap() of the device-dax device runs VMRUN with a zeroed
#    VMCB; KVM maps the VMCB with kvm_vcpu_map() and writes the failed
#    VMRUN's exit code into it.  No fault counted, no PKS line.
dax_nested_svm_test() {
	name=$(dax_dev4k)
	if [ -z "$name" ]; then
		notok "nested SVM: a 4 KiB-aligned device-dax device for the VM's memory ($(ls /sys/bus/dax/devices 2>&1))"
		return
	fi
	check "nested SVM: kvm_amd's nested is on ($(cat /sys/module/kvm_amd/parameters/nested 2>&1))" \
		grep -qx '[1Y]' /sys/module/kvm_amd/parameters/nested
	mark=$(kmsg_mark)
	rfp=$(cat "$RELAXED_FAULTS" 2>/dev/null)
	dax_run "nested SVM: a VM in device-dax memory (/dev/$name) runs VMRUN and KVM writes its VMCB" \
		nested-svm-dax "/dev/$name"
	dax_faults "nested SVM: KVM's kvm_vcpu_map() of a VMCB in device-dax memory"
	no_pks_events "$mark" "nested SVM: KVM's kvm_vcpu_map() of a VMCB in device-dax memory"
}

# hiwater_above0 HW: swiotlb's io_tlb_used_hiwater, read as HW, is above 0,
# or there is no such counter (HW "none": 6.1)
hiwater_above0() {
	case $1 in none) return 0 ;; '' | *[!0-9]*) return 1 ;; esac
	[ "$1" -gt 0 ]
}

# 4b. O_DIRECT between a bouncing block device and a DAX mapping (patch
#    "swiotlb: Bounce protected device pages through kmap_local_page()"):
#    the debug boot's /dev/vda is a virtio-blk disk that QEMU offers with
#    ACCESS_PLATFORM (guest/vmrun --disk), so its requests go through the
#    DMA API, and swiotlb=force bounces each: the write's copy from the
#    pinned pmem pages in the caller, the read's copy into them in the
#    completion interrupt (linux/tests/dax-odirect.c).  The bounce
#    buffer's high-water mark, reset before, shows that they bounced.  No
#    fault counted, no PKS line.
dax_odirect_test() {
	name=$(dax_dev4k)
	if [ -z "$name" ] || [ ! -b /dev/vda ]; then
		notok "O_DIRECT: a 4 KiB-aligned device-dax device ('$name') and the virtio-blk disk /dev/vda ($(ls /sys/block 2>&1 | tr '\n' ' '))"
		return
	fi
	# io_tlb_used_hiwater is 6.6's: 6.1 has only swiotlb=force to show
	hwf=$DBG/swiotlb/io_tlb_used_hiwater
	[ -e $hwf ] && echo 0 >$hwf 2>/dev/null
	hw0=$(cat $hwf 2>/dev/null || echo none)
	mark=$(kmsg_mark)
	rfp=$(cat "$RELAXED_FAULTS" 2>/dev/null)
	dax_run "O_DIRECT: /dev/vda written from and read into a device-dax mapping (/dev/$name), swiotlb=force" \
		dax-odirect "/dev/$name" /dev/vda
	hw1=$(cat $hwf 2>/dev/null || echo none)
	hwok=0
	case $hw0 in
	none) [ "$hw1" = none ] && grep -qw 'swiotlb=force' /proc/cmdline && hwok=1 ;;
	0) [ "$hw1" != none ] && hiwater_above0 "$hw1" && hwok=1 ;;
	esac
	check "O_DIRECT: the requests bounced (swiotlb io_tlb_used_hiwater '$hw0' after the reset, '$hw1' after; 'none': no such counter, swiotlb=force alone)" \
		test $hwok = 1
	dax_faults "O_DIRECT: the bounce of device-dax pages"
	no_pks_events "$mark" "O_DIRECT: the bounce of device-dax pages"
}

# 4b'. md raid5 with skip_copy over three loop devices (patch "async_tx:
#    Open a window on protected pages for the synchronous computations"):
#    built through md's sysfs (no mdadm in the guest: metadata none,
#    left-symmetric, 64 KiB chunks, in sync from the start), skip_copy=1,
#    so that a full-page write leaves its bio pages in the stripe and
#    async_xor computes the parity from them, with no DMA engine, on the
#    CPU.  dax-odirect writes and reads /dev/md0 from a device-dax
#    mapping (its 64 KiB of whole pages are chunk 1, on the second disk).
#    Then the array is stopped and started again without that disk (a
#    new array, so no stripe cache remembers the chunk): chunk 1, rebuilt
#    from chunk 0 and the parity, must equal what the whole array read.
#    No fault counted, no PKS line.
# md_start NAME SKIP LOOP...: raid5 array NAME of the loop devices in slot
# order, slot SKIP left out (none: -1)
md_start() {
	md=/sys/block/$1/md
	echo "$1" >/sys/module/md_mod/parameters/new_array || return 1
	skip=$2
	shift 2
	echo none >$md/metadata_version &&
	echo raid5 >$md/level &&
	echo 3 >$md/raid_disks &&
	echo 65536 >$md/chunk_size &&
	echo 2 >$md/layout || return 1
	slot=0
	for lo in "$@"; do
		if [ $slot != "$skip" ]; then
			cat /sys/block/${lo#/dev/}/dev >$md/new_dev &&
			echo $slot >$md/dev-${lo#/dev/}/slot &&
			echo 0 >$md/dev-${lo#/dev/}/offset &&
			echo 8192 >$md/dev-${lo#/dev/}/size || return 1
		fi
		slot=$((slot + 1))
	done
	echo 8192 >$md/component_size &&
	echo none >$md/resync_start &&
	echo active >$md/array_state
}
md_stop() {
	echo inactive >/sys/block/$1/md/array_state
	echo clear >/sys/block/$1/md/array_state
}
dax_raid5_test() {
	name=$(dax_dev4k)
	if [ -z "$name" ] || [ ! -e /sys/module/md_mod/parameters/new_array ] ||
		! grep -qw raid5 /proc/mdstat 2>/dev/null; then
		notok "raid5: a 4 KiB-aligned device-dax device ('$name') and md with raid5 ($(head -n 1 /proc/mdstat 2>&1))"
		return
	fi
	los=
	: >/tmp/md.err
	for i in 0 1 2; do
		truncate -s 8M /tmp/md$i.img
		lo=$(losetup -f 2>/dev/null) && losetup "$lo" /tmp/md$i.img 2>>/tmp/md.err &&
			los="$los $lo"
	done
	# shellcheck disable=SC2086
	md_start md0 -1 $los 2>>/tmp/md.err && echo 1 >/sys/block/md0/md/skip_copy 2>>/tmp/md.err
	rc=$?
	show /tmp/md.err
	md=/sys/block/md0/md
	check "raid5: md0 of$los runs, 3 disks, in sync, skip_copy on (setup exit $rc, '$(cat $md/array_state 2>&1)', '$(cat $md/level 2>&1)', degraded '$(cat $md/degraded 2>&1)', skip_copy '$(cat $md/skip_copy 2>&1)')" \
		test "$rc" = 0 -a -b /dev/md0 -a "$(cat $md/skip_copy 2>/dev/null)" = 1 -a \
		"$(cat $md/degraded 2>/dev/null)" = 0
	if [ "$rc" = 0 ]; then
		mark=$(kmsg_mark)
		rfp=$(cat "$RELAXED_FAULTS" 2>/dev/null)
		dax_run "raid5: /dev/md0 written from and read into a device-dax mapping (/dev/$name), skip_copy" \
			dax-odirect "/dev/$name" /dev/md0
		dd if=/dev/md0 of=/tmp/md-whole bs=64K skip=1 count=1 iflag=direct 2>/tmp/md.err
		md_stop md0 2>>/tmp/md.err
		# shellcheck disable=SC2086
		md_start md1 1 $los 2>>/tmp/md.err
		rc=$?
		dd if=/dev/md1 of=/tmp/md-rebuilt bs=64K skip=1 count=1 iflag=direct 2>>/tmp/md.err
		show /tmp/md.err
		same=0
		[ -s /tmp/md-whole ] && cmp -s /tmp/md-whole /tmp/md-rebuilt && same=1
		check "raid5: chunk 1 rebuilt from the parity by md1, the array without its disk (start exit $rc, degraded '$(cat /sys/block/md1/md/degraded 2>&1)'), equals what the whole array read (same: $same)" \
			test "$rc" = 0 -a "$(cat /sys/block/md1/md/degraded 2>/dev/null)" = 1 -a $same = 1
		dax_faults "raid5: async_xor over device-dax pages"
		no_pks_events "$mark" "raid5: async_xor over device-dax pages"
		md_stop md1 2>/dev/null
	fi
	md_stop md0 2>/dev/null
	for lo in $los; do losetup -d "$lo" 2>/dev/null; done
	rm -f /tmp/md?.img /tmp/md-whole /tmp/md-rebuilt
}

# 4c. swiotlb and sg_miter over protected pages (patches "swiotlb: Bounce
#    protected device pages through kmap_local_page()" and "scatterlist:
#    Map protected device pages of sg_miter with kmap_local_page()"): the
#    guest has no block driver that bounces or copies by PIO, so the
#    pks_pmem hook's swiotlb and sg_miter commands reach them, on 128
#    bytes from 64 before the end of a page of /dev/pmem0 into the next
#    one.  swiotlb: the debug boot has swiotlb=force; the mapping must
#    have bounced (a DMA address in the bounce buffer, io_tlb_used_hiwater
#    above 0), the bounce buffer must hold the pages' bytes after the map,
#    and the pages the bytes the "device" wrote there after the unmap,
#    which runs in a hard interrupt, as a DMA completion.  sg_miter: two
#    mappings, the bytes read and written.  No fault counted, no PKS line.
# 44 MiB: past the write cache's volume (32-40 MiB), before guest.sh's
# stray-write page (46.9 MiB)
DAX_DMA_PAGE=11264
DAX_LEAKS=/sys/module/memremap/parameters/pks_access_leaks
dax_dma_test() {
	sw=$DBG/swiotlb
	check "swiotlb: the boot bounces every DMA mapping (swiotlb=force; io_tlb_nslabs '$(cat $sw/io_tlb_nslabs 2>&1)')" \
		grep -qw 'swiotlb=force' /proc/cmdline
	mark=$(kmsg_mark)
	rfp=$(cat "$RELAXED_FAULTS" 2>/dev/null)
	pmem_cmd swiotlb /dev/pmem0 $DAX_DMA_PAGE
	diag "pks_pmem: $res"
	# io_tlb_used_hiwater is 6.6's (6.1: bounced=, the DMA address, alone)
	hw=$(cat $sw/io_tlb_used_hiwater 2>/dev/null || echo none)
	hwok=0
	hiwater_above0 "$hw" && hwok=1
	check "swiotlb: a DMA mapping of /dev/pmem0 pages $DAX_DMA_PAGE-$((DAX_DMA_PAGE + 1)) bounced (bounced=$(field bounced), io_tlb_used_hiwater '$hw')" \
		test "$(field bounced)$hwok" = 11
	check "swiotlb: the map bounced the pages' bytes out and the unmap, in a hard interrupt, the device's back (to_device=$(field to_device) from_device=$(field from_device) in_irq=$(field in_irq))" \
		test "$(field to_device)$(field from_device)$(field in_irq)" = 111
	dax_faults "swiotlb: the bounce of protected pages"
	no_pks_events "$mark" "swiotlb: the bounce of protected pages"

	mark=$(kmsg_mark)
	lk0=$(cat $DAX_LEAKS 2>/dev/null)
	pmem_cmd sg_miter /dev/pmem0 $DAX_DMA_PAGE
	diag "pks_pmem: $res"
	check "sg_miter: an iterator without SG_MITER_ATOMIC read and wrote the two pages (pages=$(field pages) read=$(field read) written=$(field written))" \
		test "$(field pages)$(field read)$(field written)" = 211
	# a window sg_miter_stop() left open is closed (and counted) only at
	# the return to user mode, reported once per boot: see the count
	lk1=$(cat $DAX_LEAKS 2>/dev/null)
	check "sg_miter: sg_miter_stop() closed every window (access count after it: '$(field count)'; pks_access_leaks '$lk0' -> '$lk1')" \
		test "$(field count)" = 0 -a -n "$lk1" -a "$lk1" = "$lk0"
	dax_faults "sg_miter: kmap of protected pages"
	no_pks_events "$mark" "sg_miter: kmap of protected pages"
}

# 5. A namespace unbound while a thread is inside a DAX access (finding
#    4a; patch "dax: Stray access protection for dax_direct_access()"):
#    the thread's dax_mk_noaccess() on the dead device must still take its
#    access away.  dax-unbind's stray write from that thread, to a page of
#    the device-dax device, must be counted as a fault.
dax_unbind_test() {
	name=$(dax_dev4k)
	base=$(cat /sys/bus/dax/devices/"$name"/resource 2>/dev/null)
	ns=$(basename "$(readlink -f /sys/block/pmem0/device 2>/dev/null)")
	case $ns in
	namespace*) ;;
	*)
		notok "unbind: the namespace of /dev/pmem0 ('$ns') and a device-dax target ('$name' at '$base')"
		return
		;;
	esac
	mkdir -p $DAX_MNT
	if ! dd if=/ext4.img of=/dev/pmem0 bs=1M 2>/tmp/dx.err ||
		! mount -t ext4 -o dax /dev/pmem0 $DAX_MNT 2>>/tmp/dx.err ||
		! dd if=/dev/urandom of=$DAX_MNT/unbind bs=4096 count=4 conv=fsync 2>>/tmp/dx.err; then
		show /tmp/dx.err
		notok "unbind: ext4 -o dax on /dev/pmem0 with a 16 KiB file"
		return
	fi
	dax_run "unbind of $ns inside a DAX read: the reader's access ends with it" \
		dax-unbind $DAX_MNT/unbind "$ns" "phys:$base"
	umount $DAX_MNT 2>/dev/null || umount -l $DAX_MNT 2>/dev/null
	echo "$ns" >/sys/bus/nd/drivers/nd_pmem/bind 2>/dev/null
	diag "after the test: $ns bound again, /dev/pmem0 $( [ -b /dev/pmem0 ] && echo present || echo absent)"
}

# vmap_aliases: the vmap() aliases of KVM's shared helper
# (kvm_map_guest_page(), patch 0046: the gfn_to_pfn_cache and
# kvm_vcpu_map() map a protected guest page with a vmap() of its own) that
# /proc/vmallocinfo lists now: its "vmap" lines whose caller is in KVM
vmap_aliases() {
	grep -E ' (kvm|__kvm|gpc|hva)_[a-z_0-9]*\+0x.* vmap' /proc/vmallocinfo >/tmp/va.out 2>&1
	wc -l </tmp/va.out
}

# 4d. After the KVM tests, every such alias is gone: the VM's exit
#    unmaps its gfn_to_pfn_cache (kvmclock) and kvm_vcpu_unmap() (the
#    VMCB) each with kvm_unmap_guest_page(), whose vunmap() must undo the
#    vmap(), else every VM leaks a page of vmalloc space and an alias of
#    device memory past the VM's life.
dax_vmap_test() {
	n1=$(vmap_aliases)
	show /tmp/va.out
	check "KVM: no vmap() alias of kvm_map_guest_page() is left in /proc/vmallocinfo after the VMs exit (before '$VA0', after '$n1')" \
		test -r /proc/vmallocinfo -a "$VA0" = 0 -a "$n1" = 0
}

# 4e. A stray write to a TAIL page of the 2 MiB device-dax (the workloads
#    part of this boot made it; a compound page: the tail's struct page
#    has no pgmap of its own) must fault like one to a head page: counted
#    in relaxed mode, logged, the write lands; a guarded read sees it.
dax_tail_stray() {
	d=
	for x in /sys/bus/dax/devices/dax*; do
		[ "$(cat "$x/align" 2>/dev/null)" = 2097152 ] && { d=$x; break; }
	done
	if [ -z "$d" ]; then
		notok "tail page: a 2 MiB-aligned device-dax device ($(ls /sys/bus/dax/devices 2>&1))"
		return
	fi
	base=phys:$(cat "$d/resource")
	pmem_cmd read "$base" 1
	before=$(field byte)
	wrote=$(other "$before")
	mark=$(kmsg_mark)
	rf0=$(cat "$RELAXED_FAULTS" 2>/dev/null)
	pmem_cmd stray "$base" 1 $wrote
	rf1=$(cat "$RELAXED_FAULTS" 2>/dev/null)
	diag "pks_pmem: $res"
	nl=$(kmsg "$mark" | grep -c 'stray write of PKS protected device memory.*relaxed: allowed')
	check "tail page: a stray write to page 1 of a 2 MiB device-dax page ($(basename "$d")) faults (pks_relaxed_faults '$rf0' -> '$rf1', $nl log line(s))" \
		test -n "$rf0" -a "$rf1" = "$((rf0 + 1))" -a "$nl" = 1
	check "tail page: the write landed and a guarded read sees it ($before -> $(field now), wrote $wrote)" \
		test "$(field now)" = "$wrote"
	rfp=$rf1
}

dax_extra_tests() {
	diag "the debug kernel's extra tests (KVM, swiotlb and sg_miter, O_DIRECT, raid5, unbind), relaxed mode"
	VA0=$(vmap_aliases)
	dax_kvm_test
	dax_nested_svm_test
	dax_vmap_test
	dax_tail_stray
	dax_dma_test
	dax_odirect_test
	dax_raid5_test
	dax_unbind_test
}
