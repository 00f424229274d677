#!/bin/sh
# SPDX-License-Identifier: MIT
#
# test-gdb.sh [BUILD_DIR] - `pmguard run` over a debugger and a tracer
# (docs/run.md): tests/run/lmdb-prog (10,000 records in 50 write
# transactions) under `gdb -batch` and under `strace -f`, as a user runs
# them: `pmguard run -- gdb --args PROG...`, `pmguard run -- strace -f
# PROG...` (the inferior inherits the preload).  Protection still works:
#   gdb   with `handle SIGSEGV nostop noprint pass` (pmguard's faults are
#         the program's to handle), SIGBUS and SIGABRT the same; the
#         single-step trap of contain and audit (SIGTRAP on the mprotect
#         backend) stops gdb: a loop passes each such stop back to the
#         program (`signal SIGTRAP`) until it exits.  `handle SIGTRAP
#         pass` does not work: gdb then passes its own breakpoint traps
#         (the dynamic linker's) too and the program dies of SIGTRAP;
#   strace  passes every signal on as it is.
# Cases: the correct program (exit 0, protected, no stray write); a
# wild write (tests/run/libwild.so after the 50th commit) in strict
# (aborted, reported, records intact), contain (undone, exit 0, records
# intact) and audit (reported, runs on); under strace the fault is in
# its log (SIGSEGV at the injector's address: SEGV_ACCERR on the
# mprotect backend, SEGV_PKUERR on PKU).  TAP.
# Without gdb or strace: that half SKIPs (with CI=true a failure).
set -u
O=${1:-build}
. "$(dirname "$0")/runtime-lib.sh"
GDB=${GDB:-/usr/bin/gdb}
STRACE=${STRACE:-/usr/bin/strace}
LMDBPROG=${LMDBPROG:-$O/tests/run/lmdb-prog}
case $LMDBPROG in /*) ;; *) LMDBPROG=$(pwd)/$LMDBPROG ;; esac
rt_start gdb "make: liblmdb-dev" "$LMDBPROG"
RECS=10000

cat >"$T/gdb.cmds" <<'EOC'
handle SIGSEGV nostop noprint pass
handle SIGBUS nostop noprint pass
handle SIGABRT nostop noprint pass
run
while $_isvoid($_exitcode) && $_isvoid($_exitsignal)
  if $_siginfo.si_signo == 5
    signal SIGTRAP
  else
    kill
  end
end
EOC

# tool_cases NAME CMD...: the cases with the program under CMD
tool_cases() {
	tool=$1; shift
	d=$T/$tool-clean
	mkdir "$d"
	$PMG run --report "$d.rep" -- "$@" $LMDBPROG write "$d" 50 200 \
		>"$d.out" 2>&1
	rc=$?
	$LMDBPROG verify "$d" $RECS >"$d.vout" 2>&1
	vrc=$?
	check "$tool, strict, correct program: exits 0, protected, no stray write, $RECS records verify" \
		sh -c "[ $rc = 0 ] && [ $vrc = 0 ] && grep -q 'lmdb-prog: wrote $RECS records' '$d.out' && grep -q 'LMDB environment $d: protected' '$d.rep' && ! grep -q stray '$d.rep'"
	[ $rc = 0 ] || diag "$d.out" "$d.rep"
	for mode in strict contain audit; do
		d=$T/$tool-$mode
		mkdir "$d"
		LD_PRELOAD=$WILD WILD_AFTER=50 timeout 120 $PMG run --mode $mode \
			--report "$d.rep" -- "$@" $LMDBPROG write "$d" 50 200 \
			>"$d.out" 2>&1
		rc=$?
		$LMDBPROG verify "$d" $RECS >"$d.vout" 2>&1
		vrc=$?
		case $mode in
		strict)
			check "$tool + wild write, strict: aborted, reported, $RECS records intact (verify $vrc)" \
				sh -c "[ $vrc = 0 ] && grep -q 'strict (aborting): stray write .*libwild.so+0x' '$d.rep' && ! grep -q 'wild: 1 writes done' '$d.out'" ;;
		contain)
			check "$tool + wild write, contain: undone, the program goes on to the end, $RECS records intact (verify $vrc)" \
				sh -c "[ $vrc = 0 ] && grep -q 'contain: stray write by .*: undone' '$d.rep' && grep -q 'lmdb-prog: wrote $RECS records' '$d.out'" ;;
		audit)
			check "$tool + wild write, audit: reported, the program goes on to the end" \
				sh -c "grep -q 'audit: stray write .*libwild.so+0x' '$d.rep' && grep -q 'lmdb-prog: wrote $RECS records' '$d.out'" ;;
		esac
		[ $vrc = 0 ] || [ $mode = audit ] || diag "$d.out" "$d.rep"
	done
}

if [ -x "$GDB" ]; then
	$GDB --version | head -1 | sed 's/^/# /'
	tool_cases gdb $GDB -q -batch -x "$T/gdb.cmds" --args
	check "gdb, strict: gdb saw the program end by SIGABRT (the report's abort)" \
		grep -q 'Program terminated with signal SIGABRT' "$T/gdb-strict.out"
elif [ "${CI:-}" = true ]; then
	nok "gdb: not installed: $GDB"
else
	skip "gdb cases" "not installed: $GDB (apt-get install gdb)"
fi

if [ -x "$STRACE" ]; then
	$STRACE -V | head -1 | sed 's/^/# /'
	tool_cases strace $STRACE -f -o "$T/strace.log"
	# the injector's target, from the report of the last run (audit,
	# strace's log is its): the fault in strace's log
	# (a protection key's fault on PKU, the page's on mprotect)
	a=$(sed -n 's/.*audit: stray write to \(0x[0-9a-f]*\) .*/\1/p' "$T/strace-audit.rep" | head -1)
	code=SEGV_ACCERR
	[ "$backend" = pku ] && code=SEGV_PKUERR
	check "strace, audit: its log shows the fault (SIGSEGV, $code) at the injector's address ($a)" \
		sh -c "[ -n '$a' ] && grep -q 'SIGSEGV {si_signo=SIGSEGV, si_code=$code, si_addr=${a}[,}]' '$T/strace.log'"
	[ -n "$a" ] && grep "si_addr=$a" "$T/strace.log" | head -2 | sed 's/^/# /' 
elif [ "${CI:-}" = true ]; then
	nok "strace: not installed: $STRACE"
else
	skip "strace cases" "not installed: $STRACE (apt-get install strace)"
fi
finish
