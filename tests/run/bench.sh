#!/bin/sh
# SPDX-License-Identifier: MIT
#
# bench.sh - overhead of `pmguard run` on unmodified LMDB programs, side by
# side in one run: RECORDS (default 1,000,000) records through py-lmdb
# (writemap=True) and through the C program lmdb-prog, unprotected and
# under `pmguard run` (strict), for two transaction sizes.  One window per
# write transaction, not per write.  A benchmark, not a test: it prints
# the times and the ratio and always exits 0 unless a run fails.
# Variables: O (build), RECORDS, PY (/usr/bin/python3), REPS (3: best of),
# BENCH_DIR (/dev/shm).
set -u
O=${O:-build}
RECORDS=${RECORDS:-1000000}
PY=${PY:-/usr/bin/python3}
REPS=${REPS:-3}
PMG=${PMG:-$O/pmguard}
LMDBPROG=${LMDBPROG:-$O/tests/run/lmdb-prog}
SCRIPT=${SCRIPT:-$(dirname "$0")/lmdb-script.py}
# tmpfs by default: on a disk each commit's sync dominates, not pmguard
T=$(mktemp -d "${BENCH_DIR:-/dev/shm}/pmg-run-bench.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT

# seconds, fractional: date +%N where it works (not busybox's), else the
# uptime (1/100 s)
case $(date +%N) in
*[!0-9]* | '') now() { cut -d' ' -f1 /proc/uptime; } ;;
*) now() { date +%s.%N; } ;;
esac
# best of REPS wall times of "$@" writing a fresh env in $T/db
best() {
	b=
	for _ in $(seq "$REPS"); do
		rm -rf "$T/db" && mkdir "$T/db"
		t0=$(now)
		"$@" >/dev/null 2>"$T/err" || { cat "$T/err"; exit 1; }
		t=$(echo "$(now) - $t0" | bc)
		if [ -z "$b" ] || [ "$(echo "$t < $b" | bc)" = 1 ]; then b=$t; fi
	done
	echo "$b"
}

echo "# pmguard run overhead: $RECORDS records, backend" \
     "${PMGUARD_BACKEND:-auto} ($($PMG info 2>/dev/null | \
     sed -n 's/^backend: *//p' | head -1)), best of $REPS"
printf '%-10s %8s %10s %10s %8s\n' program per_txn plain_s run_s ratio
for prog in c py; do
	if [ $prog = py ] && ! "$PY" -c 'import lmdb' 2>/dev/null; then
		echo "# py-lmdb: SKIP (no python3-lmdb)"
		continue
	fi
	for per in 1000 100; do
		txns=$((RECORDS / per))
		if [ $prog = c ]; then
			set -- "$LMDBPROG" write "$T/db" "$txns" "$per"
		else
			set -- "$PY" "$SCRIPT" write "$T/db" "$txns" "$per"
		fi
		a=$(best "$@")
		b=$(best "$PMG" run -- "$@")
		printf '%-10s %8s %10.3f %10.3f %8.3f\n' "$prog" "$per" "$a" "$b" \
			"$(echo "$b / $a" | bc -l)"
	done
done
