#!/bin/sh
# SPDX-License-Identifier: MIT
#
# bench-servers.sh [BUILD_DIR] - what `pmguard run` costs Knot Resolver
# (kresd, Debian's; its record cache is an LMDB environment with
# MDB_WRITEMAP): queries per second with dnsperf, plain kresd and kresd
# under `pmguard run` (strict), both forwarding to one knotd on
# 127.0.0.1, alternated in one run (plain, pmguard, plain, ...):
#   warm  every name already in the cache (read-mostly: one read-only
#         transaction per query, no window)
#   cold  names neither kresd has seen (each answer written into the
#         cache: a write transaction, so a window, per query)
# Not a timed test (make run-servers-bench).  ROUNDS (default 5), SECS
# per warm round (default 5), NAMES per cold round (default 2000),
# PMGUARD_BACKEND as for any run.  Prints each round and the median
# ratio (pmguard run / plain qps) per kind, with the backend.
set -eu
O=${1:-build}
PMG=${PMG:-$O/pmguard}
case $PMG in /*) ;; *) PMG=$(pwd)/$PMG ;; esac
ROUNDS=${ROUNDS:-5}
SECS=${SECS:-5}
NAMES=${NAMES:-2000}
for b in /usr/sbin/knotd /usr/sbin/kresd /usr/bin/kdig /usr/bin/dnsperf; do
	[ -x "$b" ] || { echo "bench-servers: $b missing (scripts/install-deps)"; exit 2; }
done
T=$(mktemp -d "${TMPDIR:-/tmp}/pmg-bench-srv.XXXXXX")
pids=
# (|| :, set -e: a server already gone must not make the exit status)
trap 'for p in $pids; do kill -TERM $p 2>/dev/null || :; done; sleep 1;
      for p in $pids; do kill -KILL $p 2>/dev/null || :; done; rm -rf "$T"' EXIT
backend=$($PMG info 2>/dev/null | sed -n 's/^backend: *\([a-z]*\).*/\1/p')

port() { # a free port from $1 up
	p=$1
	while cat /proc/net/udp /proc/net/tcp | grep -q "$(printf ':%04X ' "$p")"; do
		p=$((p + 1))
	done
	echo "$p"
}
KP=$(port $((30000 + $$ % 10000)))
P0=$(port $((KP + 1)))
P1=$(port $((P0 + 1)))

# the zone: 40,000 names, enough for every round's cold names
mkdir -p "$T/zones" "$T/knot/db" "$T/knot/run"
awk 'BEGIN { print "$ORIGIN b.test."; print "$TTL 86400"
	print "@ SOA ns hostmaster 1 3600 900 604800 300"
	print "@ NS ns"; print "ns A 127.0.0.1"
	for (i = 0; i < 40000; i++)
		printf "h%d A 10.%d.%d.%d\n", i, int(i / 65536),
			int(i / 256) % 256, i % 256 }' >"$T/zones/b.test.zone"
cat >"$T/knot/knot.conf" <<EOF
server:
    listen: 127.0.0.1@$KP
    rundir: $T/knot/run
database:
    storage: $T/knot/db
template:
  - id: default
    storage: $T/zones
    file: "%s.zone"
zone:
  - domain: b.test.
EOF
/usr/sbin/knotd -c "$T/knot/knot.conf" >"$T/knot.log" 2>&1 &
pids="$pids $!"

kres() { # kres NAME PORT [pmguard run options]: kresd in $T/NAME
	d=$T/$1 p=$2
	shift 2
	mkdir -p "$d/cache"
	cat >"$d/config.lua" <<EOF
net.listen('127.0.0.1', $p, { kind = 'dns' })
cache.open(256 * MB, 'lmdb://$d/cache')
trust_anchors.remove('.')
policy.add(policy.all(policy.FORWARD('127.0.0.1@$KP')))
EOF
	if [ $# -gt 0 ]; then
		(cd "$d" && exec $PMG run "$@" -- /usr/sbin/kresd -n \
			-c "$d/config.lua" .) >"$d.log" 2>&1 &
	else
		(cd "$d" && exec /usr/sbin/kresd -n -c "$d/config.lua" .) \
			>"$d.log" 2>&1 &
	fi
	pids="$pids $!"
}
kres plain "$P0"
kres pmg "$P1" --report "$T/pmg.rep"
for p in $KP $P0 $P1; do
	i=0
	until /usr/bin/kdig @127.0.0.1 -p $p +short +time=1 +retry=0 \
		b.test SOA 2>/dev/null | grep -q .; do
		i=$((i + 1)); [ $i -lt 100 ] || { echo "bench-servers: port $p not up"; exit 1; }
		sleep 0.1
	done
done

# warm names: 5,000 of them, asked once by each kresd before the rounds
awk 'BEGIN { for (i = 0; i < 5000; i++) printf "h%d.b.test A\n", i }' >"$T/warm"
qps() { # qps PORT FILE [dnsperf options]: queries per second
	p=$1 f=$2
	shift 2
	/usr/bin/dnsperf -s 127.0.0.1 -p "$p" -d "$f" -c 1 -T 1 "$@" 2>&1 |
		sed -n 's/^ *Queries per second: *\([0-9.]*\).*/\1/p'
}
qps "$P0" "$T/warm" -n 1 >/dev/null
qps "$P1" "$T/warm" -n 1 >/dev/null

echo "bench-servers: kresd $(/usr/sbin/kresd -V | head -1 | sed 's/.* //'), backend $backend, $(nproc) CPUs, $ROUNDS rounds"
echo "kind  round  plain_qps  pmguard_qps  ratio"
r=1
: >"$T/warm.r"
: >"$T/cold.r"
while [ $r -le "$ROUNDS" ]; do
	a=$(qps "$P0" "$T/warm" -l "$SECS" -n 1000)
	b=$(qps "$P1" "$T/warm" -l "$SECS" -n 1000)
	x=$(echo "$b $a" | awk '{ printf "%.3f", $1 / $2 }')
	echo "$x" >>"$T/warm.r"
	printf 'warm  %5d  %9.0f  %11.0f  %s\n' "$r" "$a" "$b" "$x"
	# cold: names no kresd has asked yet (the same for both)
	awk -v r="$r" -v n="$NAMES" 'BEGIN { for (i = 0; i < n; i++)
		printf "h%d.b.test A\n", 5000 + r * n + i }' >"$T/cold"
	a=$(qps "$P0" "$T/cold" -n 1)
	b=$(qps "$P1" "$T/cold" -n 1)
	x=$(echo "$b $a" | awk '{ printf "%.3f", $1 / $2 }')
	echo "$x" >>"$T/cold.r"
	printf 'cold  %5d  %9.0f  %11.0f  %s\n' "$r" "$a" "$b" "$x"
	r=$((r + 1))
done
med() { sort -n "$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "median ratio (pmguard run / plain), backend $backend: warm $(med "$T/warm.r"), cold $(med "$T/cold.r")"
if grep -q 'stray\|unbalanced' "$T/pmg.rep"; then
	echo "bench-servers: the pmguard run reported:"
	grep 'stray\|unbalanced' "$T/pmg.rep" | head -5
	exit 1
fi
