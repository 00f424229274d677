#!/bin/sh
# SPDX-License-Identifier: MIT
#
# test-servers.sh [BUILD_DIR] - two real, unmodified servers under
# `pmguard run` on loopback (docs/run.md): Knot DNS (knotd,
# authoritative for a generated zone of > 10,000 records; its LMDB
# journal, timers, catalog and configuration databases) and Knot Resolver
# (kresd, forwarding to knotd; its LMDB record cache), both Debian 12's.
# TAP.
#
# - a reference run without pmguard: the answers to a sample of queries
#   (knotd directly; kresd cold, then from its cache);
# - each mode (strict, relaxed, audit, contain): both servers under
#   `pmguard run`, knotd with --lmdb-writemap (it opens its databases
#   without MDB_WRITEMAP, except the journal with journal-db-mode:
#   asynchronous); kresd asks for MDB_WRITEMAP itself.  Every answer as
#   in the reference, each environment named in the report, a zone update
#   through knotc (a journal write), dnsperf load on kresd (cold names:
#   cache writes), the sample again, a clean stop: no report of a stray
#   write, exit 0;
# - strict: SIGHUP to pmguard reloads knotd's configuration;
# - a wild write into kresd's cache (tests/run/libwild.so, WILD_TRIGGER:
#   a file the test creates once kresd has answered and is idle): strict
#   aborts kresd with a report, the written bytes are not in the cache
#   file, and kresd restarted on that cache with knotd stopped answers the
#   sample from it as before; contain undoes the write, kresd runs on and
#   answers the sample from its cache (knotd stopped); without pmguard
#   the bytes land in the cache file (the negative control).
#
# All traffic on 127.0.0.1, on two free high ports; every process the
# test starts is stopped on exit.  Needs knotd, knotc, kresd, kdig and
# dnsperf (scripts/install-deps); without them: SKIP (exit 77), and with
# CI=true a failure.  Paths: PMG, WILD, KNOTD, KNOTC, KRESD, KDIG, DNSPERF.
set -u
O=${1:-build}
PMG=${PMG:-$O/pmguard}
WILD=${WILD:-$O/tests/run/libwild.so}
KNOTD=${KNOTD:-/usr/sbin/knotd}
KNOTC=${KNOTC:-/usr/sbin/knotc}
KRESD=${KRESD:-/usr/sbin/kresd}
KDIG=${KDIG:-/usr/bin/kdig}
DNSPERF=${DNSPERF:-/usr/bin/dnsperf}
case $WILD in /*) ;; *) WILD=$(pwd)/$WILD ;; esac
case $PMG in /*) ;; *) PMG=$(pwd)/$PMG ;; esac
# free_port, wait_gone, wait_log, wild_bytes
. "$(dirname "$0")/runtime-lib.sh"

echo "TAP version 13"
missing=
for b in "$KNOTD" "$KNOTC" "$KRESD" "$KDIG" "$DNSPERF"; do
	[ -x "$b" ] || missing="$missing $b"
done
if [ -n "$missing" ]; then
	why="not installed:$missing (scripts/install-deps: knot, knot-resolver, knot-dnsutils, dnsperf)"
	if [ "${CI:-}" = true ]; then
		echo "not ok 1 two servers under pmguard run # $why"
		echo "1..1"
		exit 1
	fi
	echo "1..0 # SKIP $why"
	exit 77
fi

n=0 failed=0
kres_env=
T=$(mktemp -d "${TMPDIR:-/tmp}/pmg-servers.XXXXXX") || exit 1
export TMPDIR="$T"
pids=

# Stop what is still running (TERM, then KILL), then remove the files.
stop_all() {
	for p in $pids; do kill -TERM "$p" 2>/dev/null; done
	i=0
	while [ $i -lt 50 ]; do
		alive=
		for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
		[ -z "$alive" ] && break
		sleep 0.1
		i=$((i + 1))
	done
	for p in $pids; do kill -KILL "$p" 2>/dev/null; done
	pids=
	# a daemon that detached (knotd -d): its pid file
	for f in "$T"/knot-*/run/knot.pid; do
		[ -s "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null
	done
}
trap 'stop_all; rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP

ok() { n=$((n + 1)); echo "ok $n $1"; }
nok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n $1"; }
check() { # check NAME COND...
	name=$1; shift
	if "$@"; then ok "$name"; else nok "$name"; fi
}
diag() { sed 's/^/# /' "$@" | head -40; }

backend=$($PMG info 2>/dev/null | sed -n 's/^backend: *\([a-z]*\).*/\1/p')
echo "# backend: ${backend:-unknown}"
$KNOTD -V 2>&1 | head -1 | sed 's/^/# /'
$KRESD -V 2>&1 | head -1 | sed 's/^/# /'

KPORT=$(free_port $((20000 + $$ % 20000)))
RPORT=$(free_port $((KPORT + 1)))
echo "# knotd on 127.0.0.1@$KPORT, kresd on 127.0.0.1@$RPORT"

# ---- the zones: pmg.test (10,000 A, 1,000 AAAA, 200 TXT, 50 MX,
# 100 CNAME), a catalog zone cat.test listing member.test ----
mkdir -p "$T/zones"
awk 'BEGIN {
	print "$ORIGIN pmg.test."; print "$TTL 3600"
	print "@ SOA ns hostmaster 1 3600 900 604800 300"
	print "@ NS ns"; print "ns A 127.0.0.1"
	for (i = 0; i < 10000; i++)
		printf "h%d A 10.%d.%d.%d\n", i, int(i / 65536),
			int(i / 256) % 256, i % 256
	for (i = 0; i < 1000; i++) printf "h%d AAAA 2001:db8::%x\n", i, i
	for (i = 0; i < 200; i++) printf "t%d TXT \"record %d of pmguard\"\n", i, i
	for (i = 0; i < 50; i++) printf "m%d MX 10 h%d\n", i, i
	for (i = 0; i < 100; i++) printf "c%d CNAME h%d\n", i, i * 7
}' >"$T/zones/pmg.test.zone"
cat >"$T/zones/cat.test.zone" <<'EOF'
$ORIGIN cat.test.
@ 0 SOA invalid. invalid. 1 3600 600 2147483646 0
@ 0 NS invalid.
version 0 TXT "2"
m1.zones 0 PTR member.test.
EOF
cat >"$T/zones/member.test.zone" <<'EOF'
$ORIGIN member.test.
$TTL 3600
@ SOA ns hostmaster 1 3600 900 604800 300
@ NS ns
ns A 127.0.0.1
www A 192.0.2.1
EOF
records=$(grep -c ' \(A\|AAAA\|TXT\|MX\|CNAME\) ' "$T/zones/pmg.test.zone")
echo "# pmg.test: $records records"

# The sample: 300 queries, positive, CNAME, NODATA and NXDOMAIN answers.
awk 'BEGIN {
	for (i = 0; i < 200; i++) printf "h%d.pmg.test A\n", (i * 4999) % 10000
	for (i = 0; i < 30; i++) printf "h%d.pmg.test AAAA\n", i * 31
	for (i = 0; i < 20; i++) printf "t%d.pmg.test TXT\n", i * 9
	for (i = 0; i < 10; i++) printf "m%d.pmg.test MX\n", i * 4
	for (i = 0; i < 15; i++) printf "c%d.pmg.test A\n", i * 6
	for (i = 0; i < 10; i++) printf "h%d.pmg.test TXT\n", i + 5000
	for (i = 0; i < 13; i++) printf "nx%d.pmg.test A\n", i
	print "www.member.test A"; print "pmg.test SOA"
}' >"$T/sample"
# dnsperf's load: 3,000 names not in the sample (cold: cache writes)
awk 'BEGIN { for (i = 0; i < 3000; i++)
	printf "h%d.pmg.test A\n", (i * 7 + 3) % 10000 + 0 }' |
	grep -v -x -F -f "$T/sample" >"$T/load"

# The sample's answers from PORT: status and sorted answer records (no
# TTL, no message id), one query per block.
ask() {
	# shellcheck disable=SC2046
	$KDIG @127.0.0.1 -p "$1" +noall +header +answer +nottl +noclass \
		+time=2 +retry=1 $(cat "$T/sample") 2>&1 |
	awk '/->>HEADER<<-/ { q++; sub(/; id: [0-9]+/, "");
				print q, $0; next }
	     /^;; Flags/ { print q, $0; next }
	     NF && !/^;;/ { print q, $0 }' | sort -k1,1n -k2
}
same() { # same NAME GOT WANT
	if cmp -s "$2" "$3"; then
		ok "$1"
	else
		nok "$1"
		diff "$3" "$2" | head -20 | sed 's/^/# /'
	fi
}

# knotd's configuration for run TAG: its own database directory
knot_conf() {
	mkdir -p "$T/knot-$1/db" "$T/knot-$1/run"
	cat >"$T/knot-$1/knot.conf" <<EOF
server:
    listen: 127.0.0.1@$KPORT
    rundir: $T/knot-$1/run
log:
  - target: stderr
    any: info
database:
    storage: $T/knot-$1/db
template:
  - id: default
    storage: $T/zones
    file: "%s.zone"
    zonefile-sync: -1
  - id: member
    storage: $T/zones
    file: "%s.zone"
    zonefile-sync: -1
zone:
  - domain: cat.test.
    catalog-role: interpret
    catalog-template: member
  - domain: pmg.test.
EOF
}
kres_conf() {
	mkdir -p "$T/kres-$1/cache" "$T/kres-$1/run"
	cat >"$T/kres-$1/config.lua" <<EOF
net.listen('127.0.0.1', $RPORT, { kind = 'dns' })
cache.open(64 * MB, 'lmdb://$T/kres-$1/cache')
trust_anchors.remove('.')
policy.add(policy.all(policy.FORWARD('127.0.0.1@$KPORT')))
EOF
}

# wait_up PORT NAME: until PORT answers NAME (10 s)
wait_up() {
	i=0
	while [ $i -lt 100 ]; do
		$KDIG @127.0.0.1 -p "$1" +time=1 +retry=0 +short "$2" SOA \
			2>/dev/null | grep -q . && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}
# start_knot TAG [pmguard run options...]: knotd, plain without options
start_knot() {
	tag=$1; shift
	knot_conf "$tag"
	if [ $# -gt 0 ]; then
		$PMG run "$@" -- $KNOTD -c "$T/knot-$tag/knot.conf" \
			>"$T/knot-$tag.log" 2>&1 &
	else
		$KNOTD -c "$T/knot-$tag/knot.conf" >"$T/knot-$tag.log" 2>&1 &
	fi
	knot_pid=$!
	pids="$pids $knot_pid"
	wait_up "$KPORT" pmg.test && wait_up "$KPORT" member.test
}
stop_knot() {
	$KNOTC -s "$T/knot-$1/run/knot.sock" stop >/dev/null 2>&1 ||
		kill -TERM "$knot_pid"
	wait_gone "$knot_pid"
}
# start_kres TAG [pmguard run options...]
start_kres() {
	tag=$1; shift
	[ -d "$T/kres-$tag" ] || kres_conf "$tag"
	# kres_env: NAME=VALUE words for its environment (the injector)
	# shellcheck disable=SC2086
	if [ $# -gt 0 ]; then
		(cd "$T/kres-$tag/run" && exec env $kres_env $PMG run "$@" -- \
			$KRESD -n -c "$T/kres-$tag/config.lua" .) \
			>>"$T/kres-$tag.log" 2>&1 &
	else
		(cd "$T/kres-$tag/run" && exec env $kres_env $KRESD -n \
			-c "$T/kres-$tag/config.lua" .) >>"$T/kres-$tag.log" 2>&1 &
	fi
	kres_pid=$!
	pids="$pids $kres_pid"
	wait_up "$RPORT" pmg.test
}
stop_kres() {
	kill -TERM "$kres_pid" 2>/dev/null
	wait_gone "$kres_pid"
}

# ---- the reference, without pmguard ----
start_knot ref || { nok "knotd starts (plain)"; diag "$T/knot-ref.log"; }
start_kres ref || { nok "kresd starts (plain)"; diag "$T/kres-ref.log"; }
ask "$KPORT" >"$T/want0"
ask "$RPORT" >"$T/want1"
ask "$RPORT" >"$T/want2"
nans=$(grep -c '^[0-9]* [a-z]' "$T/want1")
nq=$(grep -c 'HEADER' "$T/want1")
nerr=$(grep -c 'HEADER.*status: [^N]' "$T/want1")
check "reference: $nq queries answered by kresd via knotd ($nans records, no SERVFAIL)" \
	sh -c "[ $nq = $(wc -l <"$T/sample") ] && [ $nerr = 0 ] && [ $nans -gt 250 ]"
stop_kres
stop_knot ref

# ---- each mode: both servers under pmguard run ----
for mode in strict relaxed audit contain; do
	kr=$T/kres-$mode.rep
	knr=$T/knot-$mode.rep
	if ! start_knot "$mode" --mode "$mode" --lmdb-writemap --report "$knr"; then
		nok "$mode: knotd under pmguard run starts"
		diag "$T/knot-$mode.log" "$knr"
		continue
	fi
	if ! start_kres "$mode" --mode "$mode" --report "$kr"; then
		nok "$mode: kresd under pmguard run starts"
		diag "$T/kres-$mode.log" "$kr"
		stop_knot "$mode"
		continue
	fi
	ask "$KPORT" >"$T/got0"
	same "$mode: knotd's answers as without pmguard" "$T/got0" "$T/want0"
	ask "$RPORT" >"$T/got1"
	same "$mode: kresd's answers (cold cache) as without pmguard" \
		"$T/got1" "$T/want1"
	ask "$RPORT" >"$T/got2"
	same "$mode: kresd's answers (from its cache) as without pmguard" \
		"$T/got2" "$T/want2"

	# a zone update (knotd's journal) seen through kresd
	K="$KNOTC -s $T/knot-$mode/run/knot.sock"
	$K zone-begin pmg.test >"$T/out" 2>&1 &&
		$K zone-set pmg.test "new-$mode" 3600 A 192.0.2.77 >>"$T/out" 2>&1 &&
		$K zone-commit pmg.test >>"$T/out" 2>&1
	got=$($KDIG @127.0.0.1 -p "$RPORT" +short "new-$mode.pmg.test" A)
	check "$mode: a zone update through knotc (journal), answered by kresd" \
		[ "$got" = 192.0.2.77 ]
	[ "$got" = 192.0.2.77 ] || diag "$T/out"

	if [ "$mode" = strict ]; then
		# SIGHUP to pmguard: passed on, knotd reloads its configuration
		kill -HUP "$knot_pid"
		i=0
		while ! grep -q 'configuration reloaded' "$T/knot-$mode.log" &&
			[ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
		check "strict: SIGHUP to pmguard run: knotd reloads its configuration" \
			grep -q 'configuration reloaded' "$T/knot-$mode.log"
		wait_up "$KPORT" pmg.test
	fi

	# load: dnsperf, bounded in count (each name once) and time (5 s)
	$DNSPERF -s 127.0.0.1 -p "$RPORT" -d "$T/load" -n 1 -l 5 -c 2 \
		-q 50 >"$T/perf-$mode" 2>&1
	done_q=$(sed -n 's/^ *Queries completed: *\([0-9]*\).*/\1/p' "$T/perf-$mode")
	lost_q=$(sed -n 's/^ *Queries lost: *\([0-9]*\).*/\1/p' "$T/perf-$mode")
	echo "# $mode: dnsperf: ${done_q:-?} completed, ${lost_q:-?} lost," \
		"$(sed -n 's/^ *Queries per second: *//p' "$T/perf-$mode") qps"
	ask "$RPORT" >"$T/got3"
	same "$mode: after dnsperf's ${done_q:-?} queries: the sample as without pmguard" \
		"$T/got3" "$T/want2"

	stop_kres
	kres_rc=$rc
	stop_knot "$mode"
	knot_rc=$rc
	check "$mode: both stop cleanly (kresd $kres_rc, knotd $knot_rc)" \
		sh -c "[ '$kres_rc' = 0 ] && [ '$knot_rc' = 0 ] && [ '${done_q:-0}' -gt 1000 ]"
	check "$mode: no stray write or unbalanced window reported" \
		sh -c "! grep -q 'stray\\|unbalanced\\|cannot' '$kr' '$knr'"
	grep -h 'stray\|unbalanced\|cannot' "$kr" "$knr" | head -5 | sed 's/^/# /'
	check "$mode: the report names kresd's cache, protected (MDB_WRITEMAP its own)" \
		grep -q "kresd (pid [0-9]*): LMDB environment $T/kres-$mode/cache: protected.*asked by the program" "$kr"
	envs=0
	for e in journal timers catalog; do
		grep -q "knotd (pid [0-9]*): LMDB environment $T/knot-$mode/db/$e: protected.*added by --lmdb-writemap" "$knr" &&
			envs=$((envs + 1))
	done
	grep -q "knotd (pid [0-9]*): LMDB environment [^ ]*/knot-confdb[^ ]*: protected" "$knr" &&
		envs=$((envs + 1))
	check "$mode: the report names knotd's journal, timers, catalog and configuration databases, protected ($envs of 4)" \
		[ $envs = 4 ]
	grep -h 'LMDB environment' "$kr" "$knr" | sort -u | sed 's/^/# /'
done

# ---- knotd -d: it daemonizes (fork, setsid); pmguard run returns ----
knot_conf daemon
timeout 20 $PMG run --lmdb-writemap --report "$T/knot-daemon.rep" -- \
	$KNOTD -d -c "$T/knot-daemon/knot.conf" >"$T/knot-daemon.log" 2>&1
rc=$?
if wait_up "$KPORT" pmg.test && wait_up "$KPORT" member.test; then
	dp=$(cat "$T/knot-daemon/run/knot.pid" 2>/dev/null)
	ask "$KPORT" >"$T/got0"
	same "knotd -d under pmguard run: returns $rc, the daemon's answers as without pmguard" \
		"$T/got0" "$T/want0"
	c=$(grep -c "knotd (pid ${dp:-none}): LMDB environment .*: protected" "$T/knot-daemon.rep")
	check "knotd -d: the daemon's (pid $dp) environments protected, named ($c)" \
		sh -c "[ $rc = 0 ] && [ '$c' -ge 2 ]"
	$KNOTC -s "$T/knot-daemon/run/knot.sock" stop >/dev/null 2>&1
	i=0
	while kill -0 "$dp" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	check "knotd -d: stops through knotc, no stray write reported" \
		sh -c "! kill -0 '$dp' 2>/dev/null && ! grep -q 'stray\\|unbalanced' '$T/knot-daemon.rep'"
else
	nok "knotd -d under pmguard run answers (rc $rc)"
	diag "$T/knot-daemon.log" "$T/knot-daemon.rep"
fi

# ---- a wild write into kresd's cache ----
# wild_kres TAG [pmguard run options...]: kresd with the injector, its
# cache warmed by the sample (answers as the reference), then the write
# triggered; sets woff (the offset of the write in data.mdb)
wild_kres() {
	tag=$1; shift
	kres_conf "$tag"
	kres_env="LD_PRELOAD=$WILD WILD_TRIGGER=$T/trigger-$tag"
	start_kres "$tag" "$@" || { kres_env=; diag "$T/kres-$tag.log"; return 1; }
	kres_env=
	ask "$RPORT" >"$T/got1"
	ask "$RPORT" >"$T/got2"
	cmp -s "$T/got2" "$T/want2" || { diff "$T/want2" "$T/got2" | diag; return 1; }
	: >"$T/trigger-$tag"
}
EE=eeeeeeeeeeeeeeee

start_knot wild --lmdb-writemap --report "$T/knot-wild.rep" ||
	nok "knotd for the wild writes starts"

# strict: kresd aborts at the write, with a report
if wild_kres ws --report "$T/kres-ws.rep"; then
	wait_gone "$kres_pid"
	check "wild write into kresd's cache, strict: kresd aborted (rc $rc), reported" \
		sh -c "[ '$rc' = 134 ] && grep -q 'strict (aborting): stray write.*libwild.so+0x' '$T/kres-ws.rep'"
	[ "$rc" = 134 ] || diag "$T/kres-ws.log" "$T/kres-ws.rep"
	b=$(wild_bytes "$T/kres-ws.log" "$T/kres-ws/cache/data.mdb")
	check "strict: the wild bytes are not in the cache file ($b)" \
		sh -c "[ '$b' != none ] && [ '$b' != $EE ]"
else
	nok "wild write, strict: kresd with the injector answers as without pmguard"
fi
# kresd restarted on that cache, knotd stopped: the sample from the cache
stop_knot wild
if start_kres ws --report "$T/kres-ws2.rep"; then
	ask "$RPORT" >"$T/got4"
	same "strict: kresd restarted on the cache, knotd stopped: the sample from the cache as before" \
		"$T/got4" "$T/want2"
	stop_kres
else
	nok "strict: kresd restarts on the cache"
	diag "$T/kres-ws.log"
fi

start_knot wild2 --lmdb-writemap --report "$T/knot-wild.rep" ||
	nok "knotd for the wild writes starts again"
# unprotected: the bytes land in the cache file (the negative control)
if wild_kres wu; then
	wait_log "$T/kres-wu.log" 'wild: 1 writes done'
	b=$(wild_bytes "$T/kres-wu.log" "$T/kres-wu/cache/data.mdb")
	check "negative control: without pmguard the wild bytes land in the cache file ($b)" \
		[ "$b" = $EE ]
	stop_kres
else
	nok "negative control: kresd with the injector answers"
fi

# contain: undone, kresd runs on and answers from its cache
if wild_kres wc --mode contain --report "$T/kres-wc.rep"; then
	wait_log "$T/kres-wc.log" 'wild: 1 writes done'
	b=$(wild_bytes "$T/kres-wc.log" "$T/kres-wc/cache/data.mdb")
	check "wild write, contain: contained and reported, kresd runs on" \
		sh -c "grep -q 'contain: stray write by' '$T/kres-wc.rep' && kill -0 $kres_pid"
	check "contain: the wild bytes are not in the cache file ($b)" \
		sh -c "[ '$b' != none ] && [ '$b' != $EE ]"
	stop_knot wild2
	ask "$RPORT" >"$T/got5"
	same "contain: knotd stopped, kresd answers the sample from its cache as before" \
		"$T/got5" "$T/want2"
	stop_kres
	check "contain: kresd stops cleanly (rc $rc)" [ "$rc" = 0 ]
else
	nok "wild write, contain: kresd with the injector answers"
	stop_knot wild2
fi

echo "1..$n"
echo "# $((n - failed)) passed, $failed failed"
[ $failed = 0 ]
