#!/bin/sh
# SPDX-License-Identifier: MIT
#
# test-daemon.sh [BUILD_DIR] - `pmguard run` with what daemons do
# (tests/run/lmdb-daemon.c): fork and detach (the run's PROG exits at
# once, the daemon runs on, protected), setsid, closing every inherited
# descriptor, reload on SIGHUP, exec of a helper, and reports to syslog
# (--report syslog:SOCKET, a datagram listener of the test's standing in
# for /dev/log; it is restarted, as a syslog daemon may be).  TAP.
# Paths: PMG, DAEMON (lmdb-daemon), LMDBPROG, PY (python3: the listener;
# the syslog tests skip without it).
set -u
O=${1:-build}
PMG=${PMG:-$O/pmguard}
DAEMON=${DAEMON:-$O/tests/run/lmdb-daemon}
LMDBPROG=${LMDBPROG:-$O/tests/run/lmdb-prog}
PY=${PY:-/usr/bin/python3}
for v in PMG DAEMON LMDBPROG; do
	eval "p=\$$v"
	case $p in /*) ;; *) eval "$v=\$(pwd)/\$p" ;; esac
done

n=0 failed=0
T=$(mktemp -d "${TMPDIR:-/tmp}/pmg-daemon.XXXXXX") || exit 1
kills=
trap 'for p in $kills; do kill -KILL $p 2>/dev/null; done; rm -rf "$T"' EXIT
echo "TAP version 13"
ok() { n=$((n + 1)); echo "ok $n $1"; }
nok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n $1"; }
skip() { n=$((n + 1)); echo "ok $n $1 # SKIP $2"; }
check() {
	name=$1; shift
	if "$@"; then ok "$name"; else nok "$name"; fi
}
diag() { sed 's/^/# /' "$@" | grep -v 'module 0x' | head -30; }
# wait_for FILE PATTERN [TENTHS]: until FILE has a line matching PATTERN
wait_for() {
	i=0
	while ! grep -q "$2" "$1" 2>/dev/null && [ $i -lt "${3:-100}" ]; do
		sleep 0.1
		i=$((i + 1))
	done
	grep -q "$2" "$1" 2>/dev/null
}
# gone PID: until PID (not our child) ended (10 s)
gone() {
	i=0
	while kill -0 "$1" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	! kill -0 "$1" 2>/dev/null
}
dpid() { sed -n 's/^ready \([0-9]*\)$/\1/p' "$1" | tail -1; }

# ---- 1. fork and detach, close every descriptor; strict ----
mkdir "$T/d1"
# --go: the daemon opens its environment only after pmguard run returned,
# so the end-of-run line has nothing protected to count, however the
# scheduler orders the daemon against PROG's exit
timeout 20 $PMG run --report "$T/d1.rep" -- $DAEMON "$T/d1" "$T/d1.log" \
	--detach --close-fds --go "$T/d1.go" >"$T/out" 2>&1; rc=$?
: >"$T/d1.go"
wait_for "$T/d1.log" '^ready'
p=$(dpid "$T/d1.log")
kills="$kills $p"
check "detach: pmguard run returns PROG's exit 0, the daemon (pid $p) runs on" \
	sh -c "[ $rc = 0 ] && [ -n '$p' ] && kill -0 '$p'"
check "detach: the daemon's environment is protected, named in the report by its pid" \
	grep -q "lmdb-daemon (pid $p): LMDB environment $T/d1: protected" "$T/d1.rep"
check "detach: the end-of-run line says a daemon is not counted" \
	grep -q 'nothing was protected.*daemon, is not counted' "$T/d1.rep"
sleep 0.3
kill -USR1 "$p" 2>/dev/null
gone "$p"
check "detach, fds closed: a stray write by the daemon aborts it (strict), reported" \
	sh -c "! kill -0 '$p' 2>/dev/null && grep -q 'strict (aborting): stray write' '$T/d1.rep'"
$LMDBPROG verify "$T/d1" any >"$T/out" 2>&1
check "detach: the daemon's records intact ($(cat "$T/out"))" [ $? = 0 ]

# the other order: the daemon protected before PROG ended (PROG, a
# python3 of the test's, waits for the daemon's "ready", logged after
# mdb_env_open() returned).  No false "nothing was protected".
if [ -x "$PY" ]; then
	mkdir "$T/d4"
	timeout 20 $PMG run --report "$T/d4.rep" -- $PY -c 'import subprocess, sys, time
subprocess.run(sys.argv[1:], check=True)
for i in range(200):
    try:
        with open(sys.argv[3]) as f:
            if any(l.startswith("ready") for l in f): break
    except FileNotFoundError:
        pass
    time.sleep(0.05)' "$DAEMON" "$T/d4" "$T/d4.log" --detach --close-fds \
		>"$T/out" 2>&1; rc=$?
	p=$(dpid "$T/d4.log")
	kills="$kills $p"
	check "detach, protected before PROG ended: said, no 'nothing was protected' (rc $rc)" \
		sh -c "[ $rc = 0 ] && [ -n '$p' ] && \
			grep -q 'lmdb-daemon (pid $p): LMDB environment $T/d4: protected' '$T/d4.rep' && \
			! grep -q 'nothing was protected' '$T/d4.rep'"
	[ -n "$p" ] && kill -TERM "$p" 2>/dev/null && gone "$p"
else
	skip "detach, protected before PROG ended" "no $PY"
fi

# the negative control: the same daemon unprotected corrupts its records
mkdir "$T/d0"
$DAEMON "$T/d0" "$T/d0.log" --detach --close-fds
wait_for "$T/d0.log" '^ready'
p=$(dpid "$T/d0.log")
kills="$kills $p"
sleep 0.3
kill -USR1 "$p"
wait_for "$T/d0.log" '^wild'
kill -TERM "$p"
gone "$p"
$LMDBPROG verify "$T/d0" any >"$T/out" 2>&1
check "negative control: unprotected, the stray write corrupts a record" [ $? != 0 ]

# ---- 2. setsid, SIGHUP reload, a helper exec'd, SIGTERM; contain ----
mkdir "$T/d2" "$T/h2"
$PMG run --mode contain --report "$T/d2.rep" -- $DAEMON "$T/d2" "$T/d2.log" \
	--setsid --helper "$LMDBPROG" write "$T/h2" 5 10 >"$T/out2" 2>&1 &
pg=$!
kills="$kills $pg"
wait_for "$T/d2.log" '^ready'
p=$(dpid "$T/d2.log")
check "setsid: the daemon (pid $p) in a session of its own" \
	sh -c "[ \"\$(ps -o sid= -p $p | tr -d ' ')\" = '$p' ]"
kill -HUP "$pg"
wait_for "$T/d2.log" '^reloaded 1'
c=$(grep -c "lmdb-daemon (pid $p): LMDB environment $T/d2: protected" "$T/d2.rep")
check "SIGHUP to pmguard run: the daemon reloads, its environment protected again ($c)" \
	sh -c "grep -q '^reloaded 1' '$T/d2.log' && [ '$c' = 2 ]"
kill -USR2 "$pg"
wait_for "$T/d2.log" '^helper rc'
check "a helper exec'd by the daemon: protected too, named by its pid" \
	sh -c "grep -q '^helper rc 0' '$T/d2.log' && grep -q 'lmdb-prog (pid [0-9]*): LMDB environment $T/h2: protected' '$T/d2.rep'"
kill -USR1 "$pg"
wait_for "$T/d2.log" '^wild'
sleep 0.3
check "contain: the daemon's stray write undone and reported, it runs on" \
	sh -c "grep -q 'contain: stray write by' '$T/d2.rep' && kill -0 $p"
kill -TERM "$pg"
wait "$pg"; rc=$?
check "SIGTERM to pmguard run: the daemon ends, exit 0 ($rc)" \
	sh -c "[ $rc = 0 ] && grep -q '^bye' '$T/d2.log'"
$LMDBPROG verify "$T/d2" any >"$T/out" 2>&1
check "contain: the daemon's records intact after the reload ($(cat "$T/out"))" [ $? = 0 ]
grep -q 'stray write\|unbalanced' "$T/d2.rep" &&
	! grep -q 'contain: stray write by' "$T/d2.rep" && diag "$T/d2.rep"

# ---- 3. reports to syslog ----
if [ -x "$PY" ]; then
	listen() { # listen SOCKET OUT: a syslog stand-in, a line per message
		rm -f "$1"
		$PY -c 'import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
o = open(sys.argv[2], "ab", buffering=0)
print("listening", flush=True)
while True:
    o.write(s.recv(65536) + b"\n")' "$1" "$2" >"$2.ready" 2>&1 &
		lpid=$!
		kills="$kills $lpid"
		wait_for "$2.ready" listening 50
	}
	S=$T/log.sock
	listen "$S" "$T/sys1"
	mkdir "$T/d3"
	timeout 20 $PMG run --mode contain --report "syslog:$S" -- $DAEMON \
		"$T/d3" "$T/d3.log" --detach --close-fds --go "$T/d3.go" \
		>"$T/out" 2>&1; rc=$?
	: >"$T/d3.go"
	wait_for "$T/d3.log" '^ready'
	p=$(dpid "$T/d3.log")
	kills="$kills $p"
	wait_for "$T/sys1" "LMDB environment $T/d3: protected" 30
	check "syslog: the daemon's environment named, one message, <13>pmguard[$p]" \
		grep -q "^<13>pmguard\[$p\]: pmguard-run: lmdb-daemon (pid $p): LMDB environment $T/d3: protected" "$T/sys1"
	check "syslog: the end-of-run line from pmguard run itself (<12>)" \
		grep -q '^<12>pmguard\[[0-9]*\]: pmguard run: nothing was protected.*daemon' "$T/sys1"
	kill -USR1 "$p"
	wait_for "$T/sys1" 'contain: stray write by' 30
	check "syslog, fds closed by the daemon: its stray write reported (<11>), a message per line" \
		sh -c "grep -q '^<11>pmguard\[$p\]: pmguard: contain: stray write by' '$T/sys1' && \
		! grep -v '^<1[123]>pmguard\[[0-9]*\]: ' '$T/sys1' | grep -q ."
	# the syslog daemon restarted: a new socket at the path
	kill -KILL "$lpid"
	listen "$S" "$T/sys2"
	sleep 0.2
	kill -USR1 "$p"
	wait_for "$T/sys2" 'contain: stray write by' 30
	check "syslog restarted: the next report reaches the new socket" \
		grep -q "^<11>pmguard\[$p\]: pmguard: contain: stray write by" "$T/sys2"
	kill -TERM "$p"
	gone "$p"
	$LMDBPROG verify "$T/d3" any >"$T/out" 2>&1
	check "syslog, contain: the daemon's records intact" [ $? = 0 ]
	[ -s "$T/sys1" ] || diag "$T/out"
else
	for t in "syslog: named" "syslog: end line" "syslog: report" \
		 "syslog: restarted" "syslog: intact"; do
		skip "$t" "no $PY for the listener"
	done
fi
rm -f "$T/x"
$PMG run --report "syslog:$T/nosock" -- $LMDBPROG write "$T/x" 1 1 \
	>"$T/out" 2>&1; rc=$?
check "--report syslog:MISSING: refused before the program runs (exit 2, said)" \
	sh -c "[ $rc = 2 ] && [ ! -e '$T/x' ] && grep -q 'nosock' '$T/out'"
$PMG run --report syslog:rel.sock -- $LMDBPROG write "$T/x" 1 1 \
	>"$T/out" 2>&1; rc=$?
check "--report syslog:RELATIVE: refused (exit 2)" \
	sh -c "[ $rc = 2 ] && [ ! -e '$T/x' ] && grep -q 'absolute' '$T/out'"

echo "1..$n"
echo "# $((n - failed)) passed, $failed failed"
[ $failed = 0 ]
