# SPDX-License-Identifier: MIT
# shellcheck shell=sh
#
# kmsg.sh - the kernel log helpers of the guest tests, sourced by guest.sh
# (/bin/linux-guest.sh) and workloads.sh (/bin/linux-workloads.sh)
# inside the QEMU guest: a test takes a mark with kmsg_mark and reads
# the kernel log lines written after it with kmsg.
#
# kmsg_mark: a marker line in the kernel log; prints its token, which
# kmsg takes.  A count of dmesg's lines would not do as a mark: once the
# log buffer is full (128 KiB here; the debug boot fills it), the count
# stops growing and the lines a test provokes fall before it.
kmsg_mark() {
	t=$(cat /proc/sys/kernel/random/uuid 2>/dev/null) || t=$$-$RANDOM
	echo "<7>pmg-kmsg-mark $t" >/dev/kmsg 2>/dev/null ||
		echo "# kmsg_mark: cannot write /dev/kmsg: kmsg $t prints the whole log" >&2
	echo "$t"
}
# kmsg [TOKEN]: dmesg without timestamps, the lines after kmsg_mark's
# TOKEN; all of it without one, or when the marker has left the buffer
# (so a check for "no such line" fails rather than passes on nothing)
kmsg() {
	dmesg | sed 's/^\[[ 0-9.]*\] //' |
		awk -v m="pmg-kmsg-mark ${1:-}" '{ l[NR] = $0 } $0 == m { s = NR }
			END { for (i = s + 1; i <= NR; i++) print l[i] }'
}
