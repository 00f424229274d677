# SPDX-License-Identifier: MIT
#
# runtime-lib.sh - sourced by the runtime tests (tests/run/test-slapd.sh,
# test-postfix.sh, test-py.sh, test-rust.sh, test-perl.sh, test-gdb.sh;
# test-servers.sh for the server helpers at the end): TAP helpers, a
# temporary directory removed on exit, the missing-program SKIP (a
# failure with CI=true), the wild-write cases every LMDB program gets,
# the run/plain bench line, and waiting on servers.
#
# The sourcing script sets O (the build directory) first; PMG and WILD
# may be given as environment variables (the guest passes its paths).
PMG=${PMG:-$O/pmguard}
WILD=${WILD:-$O/tests/run/libwild.so}
case $WILD in /*) ;; *) WILD=$(pwd)/$WILD ;; esac
case $PMG in /*) ;; *) PMG=$(pwd)/$PMG ;; esac

n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n $1"; }
nok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n $1"; }
skip() { n=$((n + 1)); echo "ok $n $1 # SKIP $2"; }
check() { # check NAME COND...
	name=$1; shift
	if "$@"; then ok "$name"; else nok "$name"; fi
}
diag() { sed 's/^/# /' "$@" 2>/dev/null | grep -v '^# pmguard: module ' | head -40; }
finish() {
	echo "1..$n"
	echo "# $((n - failed)) passed, $failed failed"
	[ $failed = 0 ]
}

# rt_start NAME WHY PROGRAM...: the TAP header, the temporary directory
# $T; without one of PROGRAM: SKIP (exit 77), with CI=true a failure.
# WHY names the packages that bring them.
rt_start() {
	rt_name=$1 rt_why=$2
	shift 2
	echo "TAP version 13"
	missing=
	for b in "$PMG" "$WILD" "$@"; do
		[ -x "$b" ] || [ -r "$b" ] || missing="$missing $b"
	done
	if [ -n "$missing" ]; then
		why="not installed:$missing ($rt_why)"
		if [ "${CI:-}" = true ]; then
			echo "not ok 1 $rt_name under pmguard run # $why"
			echo "1..1"
			exit 1
		fi
		echo "1..0 # SKIP $why"
		exit 77
	fi
	T=$(mktemp -d "${TMPDIR:-/tmp}/pmg-$rt_name.XXXXXX") || exit 1
	trap 'rt_cleanup; rm -rf "$T"' EXIT
	trap 'exit 1' INT TERM HUP
	backend=$($PMG info 2>/dev/null | sed -n 's/^backend: *\([a-z]*\).*/\1/p')
	echo "# backend: ${backend:-unknown}"
}
rt_cleanup() { :; }

# rt_need WHY CMD...: CMD must succeed (a module the program needs is
# there); otherwise SKIP (exit 77) saying WHY and CMD's last message,
# with CI=true a failure
rt_need() {
	why=$1; shift
	"$@" >/dev/null 2>"$T/need.err" && return 0
	why="$why: $(tail -1 "$T/need.err")"
	[ "${CI:-}" = true ] && { nok "$rt_name: $why"; finish; exit 1; }
	echo "1..0 # SKIP $why"
	exit 77
}

# rt_cross LABEL: lmdb-prog ($LMDBPROG) reads the $RECS records the
# program wrote in the contain case (the same records, the same layout)
rt_cross() {
	[ -x "$LMDBPROG" ] || return 0
	$LMDBPROG verify "$T/$1-contain" $RECS >"$T/out" 2>&1
	check "lmdb-prog reads the records $1 wrote under pmguard run (contain)" [ $? = 0 ]
}
w_prep() { :; }

# count PATTERN FILE: matching lines (0 without the file)
count() { grep -c "$1" "$2" 2>/dev/null || true; }

# now: seconds since boot, to the hundredth (/proc/uptime: busybox's date,
# in the guest, has no %N)
now() { read -r up _ </proc/uptime && echo "$up"; }

# rt_lmdb_cases LABEL AFTER [RUN-OPTION...]: the cases of an LMDB
# program the sourcing script describes with three functions: w DIR
# [TXNS PER] prints the command (words without blanks: the paths are
# under $T) that writes $RECS records (or TXNS transactions of PER) into
# the environment in DIR, w_prep DIR prepares
# DIR for it (may do nothing), v DIR verifies them (exit 0 when intact).  AFTER: the commit after which the injector writes (the
# program's last one: its own write transactions, and any it commits
# to open its database).  Each case in $T/LABEL-CASE:
#   clean    strict, no injector: exit 0, the environment named in the
#            report as protected, no stray write; the records verify
#   strict   injector: aborted (134) with a report naming the injector's
#            write; the records verify
#   contain  injector: the write undone and reported, exit 0, verify
#   audit    injector: reported, the program runs on (exit 0); the
#            write lets through
#   plain    injector, no pmguard: the write lands (v fails: wrong data
#            or an LMDB error), unless
#            $NEG_SEGV says why it faults without pmguard
rt_lmdb_cases() {
	label=$1 after=$2
	shift 2
	d=$T/$label-clean
	mkdir -p "$d"
	w_prep "$d"
	# shellcheck disable=SC2046
	$PMG run --report "$d.rep" "$@" -- $(w "$d") >"$d.out" 2>&1
	rc=$?
	check "$label, strict, correct program: exit 0, environment protected, no stray write" \
		sh -c "[ $rc = 0 ] && grep -q 'LMDB environment ${d}[^ ]*: protected' '$d.rep' && ! grep -q stray '$d.rep'"
	[ $rc = 0 ] || diag "$d.out" "$d.rep"
	v "$d" >"$d.vout" 2>&1
	check "$label, strict, correct program: $RECS records verify" [ $? = 0 ]

	for mode in strict contain audit; do
		d=$T/$label-$mode
		mkdir -p "$d"
		w_prep "$d"
		# shellcheck disable=SC2046
		LD_PRELOAD=$WILD WILD_AFTER=$after $PMG run --mode $mode \
			--report "$d.rep" "$@" -- $(w "$d") >"$d.out" 2>&1
		rc=$?
		case $mode in
		strict)
			check "$label + wild write, strict: aborted (rc $rc), the injector's write reported" \
				sh -c "[ $rc = 134 ] && grep -q 'strict (aborting): stray write .*libwild.so+0x' '$d.rep'" ;;
		contain)
			check "$label + wild write, contain: undone, reported, the program goes on (rc $rc)" \
				sh -c "[ $rc = 0 ] && grep -q 'contain: stray write by .*: undone' '$d.rep' && grep -q 'wild: 1 writes done' '$d.out'" ;;
		audit)
			check "$label + wild write, audit: reported, the program goes on (rc $rc)" \
				sh -c "[ $rc = 0 ] && grep -q 'audit: stray write .*libwild.so+0x' '$d.rep' && grep -q 'wild: 1 writes done' '$d.out'" ;;
		esac
		grep -q 'wild: writing' "$d.out" || echo "# $label $mode: the injector did not write"
		[ "$rc" = "$(case $mode in strict) echo 134;; *) echo 0;; esac)" ] ||
			diag "$d.out" "$d.rep"
		if [ $mode != audit ]; then
			v "$d" >"$d.vout" 2>&1
			check "$label + wild write, $mode: $RECS records intact" [ $? = 0 ]
			diag "$d.vout" | tail -2
		fi
	done

	d=$T/$label-plain
	mkdir -p "$d"
	w_prep "$d"
	# shellcheck disable=SC2046,SC2091
	LD_PRELOAD=$WILD WILD_AFTER=$after $(w "$d") >"$d.out" 2>&1
	rc=$?
	if [ -n "${NEG_SEGV:-}" ]; then
		check "negative control: $label + wild write without pmguard: SIGSEGV (rc $rc): $NEG_SEGV" \
			[ $rc = 139 ]
	else
		v "$d" >"$d.vout" 2>&1
		vrc=$?
		check "negative control: $label + wild write without pmguard: the write lands (rc $rc, verify $vrc)" \
			sh -c "[ $rc = 0 ] && [ $vrc != 0 ]"
		diag "$d.vout" | tail -1
	fi
}

# rt_bench LABEL REPS TXNS PER [RUN-OPTION...]: w into a fresh
# directory (TXNS transactions of PER records), plain and under `pmguard
# run`, alternated REPS times; the best of each and their ratio as a
# "# bench:" line (not an assertion: the machine is shared).
# RT_BENCH_REPS, where set, replaces REPS (the PKU guest: 1, TCG's
# figures say nothing of PKU's cost and each repetition takes seconds).
rt_bench() {
	label=$1 reps=${RT_BENCH_REPS:-$2} btx=$3 bper=$4
	shift 4
	best_p='' best_r='' bad=
	i=0
	while [ $i -lt "$reps" ]; do
		for how in p r; do
			d=$T/bench-$label-$how-$i
			mkdir -p "$d"
			w_prep "$d"
			t0=$(now)
			# shellcheck disable=SC2046,SC2091
			if [ $how = p ]; then
				$(w "$d" "$btx" "$bper") >/dev/null 2>&1
			else
				$PMG run "$@" -- $(w "$d" "$btx" "$bper") >/dev/null 2>&1
			fi
			rc=$?
			[ $rc = 0 ] || bad="$bad $how:$rc"
			t=$(echo "$t0 $(now)" | awk '{ printf "%.4f", $2 - $1 }')
			rm -rf "$d"
			if [ $how = p ]; then
				best_p=$(echo "$t ${best_p:-$t}" | awk '{ print ($1 < $2) ? $1 : $2 }')
			else
				best_r=$(echo "$t ${best_r:-$t}" | awk '{ print ($1 < $2) ? $1 : $2 }')
			fi
		done
		i=$((i + 1))
	done
	if [ -n "$bad" ]; then
		echo "# bench: $label: no figure, a run failed (p plain, r pmguard run: exit status):$bad"
		return
	fi
	echo "# bench: $label ($btx write transactions of $bper records): plain $best_p s, pmguard run $best_r s, run/plain $(echo "$best_r $best_p" | awk '{ printf "%.2f", $1 / $2 }') (best of $reps, backend ${backend:-unknown})"
}

# free_port FROM: a port free for TCP and UDP on 127.0.0.1 (from
# /proc/net), FROM up; 0 if none
free_port() {
	p=$1
	while [ "$p" -lt 65000 ]; do
		h=$(printf ':%04X ' "$p")
		if ! cat /proc/net/udp /proc/net/tcp /proc/net/udp6 \
			/proc/net/tcp6 2>/dev/null | grep -q "$h"; then
			echo "$p"
			return
		fi
		p=$((p + 1))
	done
	echo 0
}

# wait_gone PID: until PID ended (15 s); its status in $rc, PID out of
# $pids (the processes the test stops on exit)
wait_gone() {
	i=0
	while kill -0 "$1" 2>/dev/null && [ $i -lt 150 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	if kill -0 "$1" 2>/dev/null; then
		rc=timeout
		return 1
	fi
	wait "$1"
	rc=$?
	pids=$(echo " $pids " | sed "s/ $1 / /")
}
wait_log() { # wait_log FILE PATTERN: 10 s
	i=0
	while ! grep -q "$2" "$1" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	grep -q "$2" "$1" 2>/dev/null
}
# wild_bytes LOG DATA: the 8 bytes (hex) at the target of the injector
# whose messages are in LOG, in the environment's DATA file ("none"
# before it wrote)
wild_bytes() {
	pg=$(sed -n 's/^wild: LMDB root page \([0-9]*\) (page size \([0-9]*\)).*/\1 \2/p' \
		"$1" | tail -1)
	[ -n "$pg" ] || { echo none; return; }
	set -- "$2" $pg
	od -An -tx1 -j $(($2 * $3 + $3 / 2)) -N 8 "$1" | tr -d ' \n'
}
