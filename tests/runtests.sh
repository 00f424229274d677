#!/bin/sh
# SPDX-License-Identifier: MIT
#
# runtests.sh - run TAP test programs and add up their results.
#
# Usage: runtests.sh [-t TIMEOUT] [-n SUITE_NAME] TEST...
#
#   -t TIMEOUT     seconds each TEST may run (default 300, 0 = no limit;
#                  also $RUNTESTS_TIMEOUT)
#   -n SUITE_NAME  name used in the summary line (default "tests")
#   TEST           a path or a command word. A TEST that contains blanks is
#                  split at blanks into a command and its arguments (no
#                  quoting, no globbing): "pmguard selftest" runs pmguard
#                  with the argument selftest.
#
# Each TEST runs in its own session with a time limit (its whole process
# group is killed on expiry and when it exits), stdin from /dev/null,
# stderr merged into stdout, its output passed through as it comes.
# Its TAP lines are counted:
#   "ok N name"            passed      "ok N name # SKIP why"  skipped
#   "not ok N name"        failed      "not ok N name # TODO"  skipped
# Then its exit status:
#   0     fine if its "1..N" plan matches its results: no plan at all, or
#         fewer or more results than planned, is 1 failure (a crash after
#         the last printed line must not pass); "1..0 # SKIP why" with no
#         results is 1 skipped
#   77    whole program skipped: if it printed no result lines, 1 skipped
#         and the reason (a "1..0 # SKIP why" plan, else its last output
#         line) is printed; otherwise its result lines count as they are
#   other (timeout, signal, error) with no "not ok" line printed: 1 failure
#         named "<TEST> exited with status N"
# Last line, alone: "<SUITE_NAME>: N passed, N failed, N skipped".
# Exit status: 0 iff nothing failed; 2 on a usage error.
#
# Test programs should line-buffer stdout (it is a pipe here): output
# still in a stdio buffer is lost when a program crashes or is killed.

usage() {
	sed -n '3,/^$/{/^$/d;s/^# \{0,1\}//;p}' "$0"
}

case ${1:-} in -h | --help) usage; exit 0 ;; esac

timeout_s=${RUNTESTS_TIMEOUT:-300}
suite=tests
while getopts t:n:h opt; do
	case $opt in
	t) timeout_s=$OPTARG ;;
	n) suite=$OPTARG ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
case $timeout_s in '' | *[!0-9]*) echo "runtests.sh: bad timeout: $timeout_s" >&2; exit 2 ;; esac

tmpd=$(mktemp -d "${TMPDIR:-/tmp}/runtests.XXXXXX") || exit 2
# On exit, also stop the test that is running (it is in its own session).
# shellcheck disable=SC2317
cleanup() {
	exec 2>/dev/null # no job status noise from here on
	if g=$(cat "$tmpd/pgid" 2>/dev/null) && [ -n "$g" ]; then
		kill -TERM "-$g" && sleep 1 && kill -KILL "-$g"
	fi
	# let the background pipeline (it stops the watchdog) see its test go
	wait
	rm -rf "$tmpd"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Each TEST runs in its own session (setsid), so that on a timeout, and
# after it exits, the whole process group goes: a left-over child would
# otherwise hold the output pipe open. A watchdog in its own session sends
# TERM to the group after TIMEOUT seconds and KILL 10 s later. Without
# setsid(1), timeout(1) does the job: coreutils (124 on expiry) or busybox
# (143: it execs the program and sends it SIGTERM; 137 after -k).
have_setsid=
command -v setsid >/dev/null 2>&1 && have_setsid=1
to_cmd=
if [ -z "$have_setsid" ] && [ "$timeout_s" -gt 0 ] &&
	command -v timeout >/dev/null 2>&1; then
	if timeout -k 1 5 true >/dev/null 2>&1; then
		to_cmd="timeout -k 10 $timeout_s"
	else
		to_cmd="timeout $timeout_s"
	fi
fi

# run_cmd CMD [ARGS...]: run a test as described above; its status.
run_cmd() {
	if [ -z "$have_setsid" ]; then
		start=$(date +%s)
		# shellcheck disable=SC2086  # $to_cmd is a command with words
		$to_cmd "$@" </dev/null 2>&1
		rc=$?
		end=$(date +%s)
		if [ -n "$to_cmd" ] && [ $((end - start)) -ge "$timeout_s" ]; then
			case $rc in 124 | 137 | 143) : >"$tmpd/timedout" ;; esac
		fi
		return "$rc"
	fi
	setsid "$@" </dev/null 2>&1 &
	pid=$!
	echo "$pid" >"$tmpd/pgid"
	wpid=
	if [ "$timeout_s" -gt 0 ]; then
		# shellcheck disable=SC2016  # expanded by the inner sh
		setsid sh -c 'sleep "$1"; : >"$2"; kill -TERM "-$3"; sleep 10; kill -KILL "-$3"' \
			sh "$timeout_s" "$tmpd/timedout" "$pid" </dev/null >/dev/null 2>&1 &
		wpid=$!
	fi
	wait "$pid"
	rc=$?
	[ -z "$wpid" ] || kill -KILL "-$wpid" 2>/dev/null
	kill -KILL "-$pid" 2>/dev/null
	rm -f "$tmpd/pgid"
	return "$rc"
}

total_p=0
total_f=0
total_s=0

# count_tap FILE -> "passed failed skipped planned skip_all_reason..."
count_tap() {
	awk '
	/^ok([ \t]|$)/ {
		if (tolower($0) ~ /#[ \t]*skip/) s++; else p++
		next
	}
	/^not ok([ \t]|$)/ {
		if (tolower($0) ~ /#[ \t]*(todo|skip)/) s++; else f++
		next
	}
	/^1\.\.[0-9]+/ {
		plan = $0; sub(/^1\.\./, "", plan); sub(/[^0-9].*$/, "", plan)
		if (tolower($0) ~ /#[ \t]*skip/) {
			why = $0; sub(/^[^#]*#[ \t]*[Ss][Kk][Ii][Pp][ \t:]*/, "", why)
		}
	}
	END { printf "%d %d %d %d %s\n", p, f, s, plan == "" ? -1 : plan, why }
	' "$1"
}

last_line() {
	awk 'NF { l = $0 } END { print l }' "$1"
}

run_one() {
	t=$1
	set -f
	# shellcheck disable=SC2086  # word splitting is the point
	set -- $t
	set +f
	if [ $# -eq 0 ]; then
		return
	fi
	echo "# ---- $t"
	if ! command -v "$1" >/dev/null 2>&1; then
		echo "# $t: command not found: $1"
		echo "not ok - $t exited with status 127"
		total_f=$((total_f + 1))
		echo "# $t: 0 passed, 1 failed, 0 skipped"
		return
	fi
	rm -f "$tmpd/rc" "$tmpd/timedout"
	# In the background: 'wait' lets a trapped INT/TERM through at once.
	{
		run_cmd "$@"
		echo $? >"$tmpd/rc"
	} 2>&1 | tee "$tmpd/out" &
	wait $!
	rc=$(cat "$tmpd/rc" 2>/dev/null)
	[ -n "$rc" ] || rc=125

	# shellcheck disable=SC2046
	set -- $(count_tap "$tmpd/out")
	p=$1 f=$2 s=$3 plan=$4
	shift 4
	why=$*
	results=$((p + f + s))

	case $rc in
	0)
		if [ "$plan" -lt 0 ]; then
			echo "not ok - $t printed no TAP plan (1..N) for its $results results"
			f=$((f + 1))
		elif [ "$results" -eq 0 ] && [ "$plan" -eq 0 ]; then
			if [ -n "$why" ]; then
				echo "# SKIP $t: $why"
				s=1
			else
				echo "not ok - $t planned no tests and gave no reason (1..0 # SKIP why)"
				f=1
			fi
		elif [ "$plan" -ne "$results" ]; then
			echo "not ok - $t planned $plan tests but reported $results"
			f=$((f + 1))
		fi
		;;
	77)
		if [ "$results" -eq 0 ]; then
			[ -n "$why" ] || why=$(last_line "$tmpd/out")
			[ -n "$why" ] || why="no reason given"
			echo "# SKIP $t: $why"
			s=1
		else
			echo "# $t exited with status 77 (skip) after $results results"
		fi
		;;
	*)
		note=
		[ -f "$tmpd/timedout" ] && note=" (timed out after $timeout_s s)"
		if [ -z "$note" ] && [ "$rc" -gt 128 ] && [ "$rc" -lt 160 ]; then
			sig=$(kill -l $((rc - 128)) 2>/dev/null)
			[ -n "$sig" ] && note=" (killed by SIG${sig#SIG})"
		fi
		if [ "$f" -eq 0 ]; then
			echo "not ok - $t exited with status $rc$note"
			f=1
		else
			echo "# $t exited with status $rc$note"
		fi
		;;
	esac
	echo "# $t: $p passed, $f failed, $s skipped"
	total_p=$((total_p + p))
	total_f=$((total_f + f))
	total_s=$((total_s + s))
}

[ $# -gt 0 ] || echo "# runtests.sh: no tests given"
for t in "$@"; do
	run_one "$t"
done

echo "$suite: $total_p passed, $total_f failed, $total_s skipped"
if [ "$total_f" -eq 0 ]; then
	exit 0
fi
exit 1
