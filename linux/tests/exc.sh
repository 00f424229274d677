# SPDX-License-Identifier: MIT
# shellcheck shell=sh disable=SC2154  # res, PKS_PMEM, ...: set by guest.sh
#
# exc.sh - the exception and task tests of the PKS series, sourced by
# guest.sh (/bin/linux-guest.sh) inside the QEMU guest; uses its helpers
# (ok, notok, check, diag, kmsg, pmem_cmd, field, PKS_FAULT, ...).
#
#   exc_tests MODE    MODE relaxed (main boot) or strict (strict boot,
#                     pks_fault_mode already strict)
#
# 1. daxread (linux/tests/daxread.c): read(2) of an ext4 -o dax file into
#    a MAP_SHARED mapping of a sparse DAX file and into a MAP_PRIVATE
#    mapping of a DAX file: the page faults taken inside the copy, with
#    the pmem window of the read open, zero blocks / copy a page through
#    the pmem path.  Relaxed: the data arrives, 0 counted PKS faults;
#    strict: no oops.  (Review finding 1: the access count was neither
#    saved nor reset per exception.)
# 2. pks_pmem "nmi", "irq", "fork" (linux/README): an NMI and a timer
#    interrupt taken inside a window, and a task forked inside one, start
#    at PKS_INIT_VALUE with a count of 0; the exceptions saved the
#    interrupted thread's value; their own window (pgmap_mk_readwrite() in
#    the NMI and the new task, kmap_local_page() in the interrupt) enables
#    access and reads the byte; the interrupted window is intact after.
# 3. Strict mode only (the probes are unguarded reads that must fault):
#    "nmi|irq|fork ... 1": the other context first reads the page without
#    a window of its own and faults, one "stray read" line; kmap_nest:
#    kmap_local_page() windows nest (count 1, 2, 1, 0, the outer window
#    readable after the inner one closed) and a kernel thread reading the
#    page while they are open faults; dax: dax_mk_readwrite() /
#    dax_mk_noaccess() nest the same way on /dev/pmem0's DAX device and
#    the page is readable only inside them.
# 4. pks_pmem "dbg": a kernel data breakpoint hit inside a window (a #DB
#    trap, entered through irqentry_nmi_enter()): its handler runs with
#    PKRS at PKS_INIT_VALUE and a count of 0, and after the #DB the
#    window's PKRS and count are back and the page reads through it.
# 5. dax-msync (linux/tests/dax-msync.c): msync(2) of 64 dirty pages of a
#    MAP_SHARED mapping of an ext4 -o dax file opens a window per page
#    for dax_flush() (memremap.pks_windows rises by at least 64: CLWB is
#    a no-op under TCG, so a missing window could not fault here).

EXC_PAGE=${STRAY_PAGE:-12000}

exc_daxread() {
	mode=$1
	if [ ! -x /bin/daxread ]; then
		notok "daxread ($mode): /bin/daxread not built (make linux-tests)"
		return
	fi
	mkdir -p /mnt/exc
	if ! dd if=/ext4.img of=/dev/pmem0 bs=1M 2>/tmp/exc.err ||
		! mount -t ext4 -o dax /dev/pmem0 /mnt/exc 2>>/tmp/exc.err; then
		show /tmp/exc.err
		notok "daxread ($mode): ext4 image on /dev/pmem0 mounted -o dax"
		return
	fi
	mark=$(kmsg_mark)
	rf0=$(cat "$RELAXED_FAULTS" 2>/dev/null)
	timeout 120 daxread /mnt/exc >/tmp/daxread.out 2>&1
	rc=$?
	rf1=$(cat "$RELAXED_FAULTS" 2>/dev/null)
	show /tmp/daxread.out
	kmsg "$mark" | grep -E "$PKS_FAULT" >/tmp/exc.ev
	n=$(wc -l </tmp/exc.ev)
	head -n 20 /tmp/exc.ev | sed 's/^/#   /'
	check "daxread ($mode): read(2) into mappings of DAX files, data verified ($(tail -n 1 /tmp/daxread.out), exit $rc)" \
		test "$rc" = 0
	check "daxread ($mode): the faults inside the copy took no PKS fault: 0 memremap/WARNING/oops lines (got $n)" \
		test "$n" = 0
	check "daxread ($mode): pks_relaxed_faults unchanged ('$rf0' -> '$rf1')" \
		test -n "$rf0" -a "$rf0" = "$rf1"
	exc_msync "$mode"
	umount /mnt/exc 2>/dev/null
}

# exc_msync MODE: dax-msync on the ext4 -o dax file system of exc_daxread
exc_msync() {
	if [ ! -x /bin/dax-msync ]; then
		notok "dax-msync ($1): /bin/dax-msync not built (make linux-tests)"
		return
	fi
	mark=$(kmsg_mark)
	rf0=$(cat "$RELAXED_FAULTS" 2>/dev/null)
	diag "/dev/pmem0's DAX write cache: '$(cat /sys/block/pmem0/dax/write_cache 2>&1)' (dax_flush() writes back only when it is on)"
	timeout 120 dax-msync /mnt/exc >/tmp/msync.out 2>&1
	rc=$?
	rf1=$(cat "$RELAXED_FAULTS" 2>/dev/null)
	show /tmp/msync.out
	n=$(kmsg "$mark" | grep -Ec "$PKS_FAULT")
	check "dax-msync ($1): msync() of a dirty DAX mapping opens a window per page for dax_flush(), data verified ($(tail -n 1 /tmp/msync.out), exit $rc)" \
		test "$rc" = 0
	check "dax-msync ($1): no PKS fault: 0 memremap/WARNING/oops lines (got $n), pks_relaxed_faults unchanged ('$rf0' -> '$rf1')" \
		test "$n" = 0 -a -n "$rf0" -a "$rf0" = "$rf1"
}

# exc_dbg MODE: a kernel #DB (data breakpoint) inside a window
exc_dbg() {
	w="#DB in a window ($1)"
	pmem_cmd read /dev/pmem0 "$EXC_PAGE"
	want=$(field byte)
	mark=$(kmsg_mark)
	rf0=$(cat "$RELAXED_FAULTS" 2>/dev/null)
	if ! pmem_cmd dbg /dev/pmem0 "$EXC_PAGE"; then
		notok "$w: pks_pmem dbg ($res)"
		return
	fi
	rf1=$(cat "$RELAXED_FAULTS" 2>/dev/null)
	diag "pks_pmem: $res"
	check "$w: the breakpoint hit (hits=$(field hits))" \
		test "$(field hits)" -ge 1 2>/dev/null
	check "$w: its handler runs with PKRS at PKS_INIT_VALUE, no access, count 0 (bp_pkrs=$(field bp_pkrs) init=$(field init) bp_rw=$(field bp_rw) bp_count=$(field bp_count))" \
		test "$(field bp_pkrs)" = "$(field init)" -a "$(field bp_rw)" = 0 -a "$(field bp_count)" = 0
	check "$w: after it the window's PKRS and count are back (after_pkrs=$(field after_pkrs) window=$(field window) after_count=$(field after_count) win_count=$(field win_count))" \
		test "$(field after_pkrs)" = "$(field window)" -a "$(field after_count)" = "$(field win_count)" -a "$(field win_count)" = 1
	check "$w: the page reads through the window after the #DB (read=$(field read) byte=$(field byte), guarded read '$want')" \
		test "$(field read)" = 1 -a "$(field byte)" = "$want"
	n=$(kmsg "$mark" | grep -Ec "$PKS_FAULT")
	check "$w: no PKS fault: 0 memremap/WARNING/oops lines (got $n), pks_relaxed_faults unchanged ('$rf0' -> '$rf1')" \
		test "$n" = 0 -a -n "$rf0" -a "$rf0" = "$rf1"
}

# exc_stray_lines WHAT MARK N: exactly N PKS lines in the log since MARK,
# each a strict-mode "stray read" report (the probes' expected faults)
exc_stray_lines() {
	kmsg "$2" | grep -E "$PKS_FAULT" >/tmp/exc.ev
	n=$(wc -l </tmp/exc.ev)
	s=$(grep -c 'memremap: stray read of PKS protected device memory.*pks_fault_mode=strict' /tmp/exc.ev)
	head -n 10 /tmp/exc.ev | sed 's/^/#   /'
	check "$1: $3 strict 'stray read' report(s) and no other PKS line (got $s of $n)" \
		test "$n" = "$3" -a "$s" = "$3"
}

# exc_ctx CMD MODE [PROBE]: one of the pks_pmem context commands (nmi,
# irq, fork); PROBE 1 (strict mode): the context first reads the page
# without a window
exc_ctx() {
	cmd=$1
	mode=$2
	probe=${3:-0}
	mark=$(kmsg_mark)
	rf0=$(cat "$RELAXED_FAULTS" 2>/dev/null)
	if ! pmem_cmd "$cmd" /dev/pmem0 "$EXC_PAGE" "$probe"; then
		notok "$cmd ($mode): pks_pmem '$cmd' ran ($res)"
		return
	fi
	rf1=$(cat "$RELAXED_FAULTS" 2>/dev/null)
	diag "$res"
	case $cmd in
	nmi) what="an NMI inside a window" ;;
	irq) what="a timer interrupt inside a window" ;;
	fork) what="a task forked inside a window" ;;
	esac
	init=$(field init)
	check "$cmd ($mode): $what ran (ran=$(field ran))" test "$(field ran)" = 1
	check "$cmd ($mode): it starts at PKS_INIT_VALUE (MSR $(field entry_pkrs), thread $(field entry_thread), init $init)" \
		test "$(field entry_pkrs)" = "$init" -a "$(field entry_thread)" = "$init"
	check "$cmd ($mode): it starts with an access count of 0 (got $(field entry_count); the window's is $(field win_count))" \
		test "$(field entry_count)" = 0
	if [ "$cmd" != fork ]; then
		check "$cmd ($mode): the value saved for the interrupted thread is its window's ($(field saved), window $(field window))" \
			test "$(field saved)" = "$(field window)"
	fi
	if [ "$cmd" = irq ]; then how="kmap_local_page()"; else how="pgmap_mk_readwrite()"; fi
	check "$cmd ($mode): its own $how enables access (rw=$(field rw)) and reads the byte ($(field byte), thread read $(field thread_byte), read=$(field read))" \
		test "$(field rw)" = 1 -a "$(field read)" = 1 -a "$(field byte)" = "$(field thread_byte)"
	check "$cmd ($mode): its window closes again (MSR $(field exit_pkrs), count $(field exit_count))" \
		test "$(field exit_pkrs)" = "$init" -a "$(field exit_count)" = 0
	check "$cmd ($mode): the thread's window is intact after it (MSR $(field after_pkrs) rw=$(field after_rw), count $(field after_count) of $(field win_count))" \
		test "$(field after_rw)" = 1 -a "$(field after_count)" = "$(field win_count)"
	if [ "$probe" = 1 ]; then
		check "$cmd ($mode): its read through the interrupted thread's window, before a window of its own, faults (probe_read=$(field probe_read))" \
			test "$(field probe_read)" = 0
		exc_stray_lines "$cmd ($mode, probe)" "$mark" 1
		check "$cmd ($mode, probe): pks_relaxed_faults unchanged ('$rf0' -> '$rf1')" \
			test -n "$rf0" -a "$rf0" = "$rf1"
		return
	fi
	kmsg "$mark" | grep -E "$PKS_FAULT" >/tmp/exc.ev
	n=$(wc -l </tmp/exc.ev)
	head -n 10 /tmp/exc.ev | sed 's/^/#   /'
	check "$cmd ($mode): no PKS fault (0 memremap/WARNING/oops lines, got $n; pks_relaxed_faults '$rf0' -> '$rf1')" \
		test "$n" = 0 -a -n "$rf0" -a "$rf0" = "$rf1"
}

# exc_nest WHAT CMD LINES: "CMD /dev/pmem0 EXC_PAGE" (strict mode), whose
# windows or guards must count 0, 1, 2, 1, 0 with the page faulting before
# and after them, LINES strict "stray read" reports; returns 1 if CMD
# could not run (the caller's own checks are skipped)
exc_nest() {
	mark=$(kmsg_mark)
	if ! pmem_cmd "$2" /dev/pmem0 "$EXC_PAGE"; then
		notok "$1: pks_pmem '$2' ran ($res)"
		return 1
	fi
	diag "$res"
	check "$1: the access count goes 0, 1, 2, 1, 0 (got $(field count))" \
		test "$(field count)" = 0,1,2,1,0
	check "$1: the page faults before them and after them (before=$(field before) after=$(field after))" \
		test "$(field before)" = 0 -a "$(field after)" = 0
	exc_stray_lines "$1" "$mark" "$3"
}

# exc_kmap_nest: nested kmap_local_page() windows, another thread beside
# them (strict mode)
exc_kmap_nest() {
	w="kmap_nest (strict)"
	exc_nest "$w" kmap_nest 3 || return
	check "$w: the page reads inside the nested window (nested=$(field nested)) and inside the outer one after the inner one closed (outer=$(field outer))" \
		test "$(field nested)" = 1 -a "$(field outer)" = 1
	check "$w: a kernel thread reading the page while the windows are open faults (other=$(field other))" \
		test "$(field other)" = 0
}

# exc_dax: the DAX guards of /dev/pmem0 nest (strict mode)
exc_dax() {
	w="dax guards (strict)"
	exc_nest "$w" dax 2 || return
	check "$w: /dev/pmem0's DAX device maps protected memory (map_protected=$(field map_protected))" \
		test "$(field map_protected)" = 1
	check "$w: the page reads inside dax_mk_readwrite()/dax_mk_noaccess() (open=$(field open) nested=$(field nested) outer=$(field outer))" \
		test "$(field open)" = 1 -a "$(field nested)" = 1 -a "$(field outer)" = 1
}

exc_tests() {
	if [ ! -e "$PKS_PMEM" ]; then
		notok "exception tests ($1): no hook $PKS_PMEM in this kernel"
		return
	fi
	for c in nmi irq fork; do
		exc_ctx "$c" "$1"
	done
	exc_dbg "$1"
	if [ "$1" = strict ]; then
		for c in nmi irq fork; do
			exc_ctx "$c" "$1" 1
		done
		exc_kmap_nest
		exc_dax
	fi
	exc_daxread "$1"
}
