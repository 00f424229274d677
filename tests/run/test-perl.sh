#!/bin/sh
# SPDX-License-Identifier: MIT
#
# test-perl.sh [BUILD_DIR] - Perl's LMDB_File (Debian's
# liblmdb-file-perl, on the system's liblmdb) under `pmguard run`
# (docs/run.md): tests/run/lmdb-perl.pl writes 10,000 records in 50
# write transactions with MDB_WRITEMAP; the wild-write cases of
# tests/run/runtime-lib.sh (strict stops it, data intact; contain undoes
# the write, the program goes on, data intact; audit reports it; without
# pmguard the write lands) and the run/plain bench line.  TAP.  Without
# perl or LMDB_File: SKIP (exit 77), a failure with CI=true.
set -u
O=${1:-build}
. "$(dirname "$0")/runtime-lib.sh"
PERL=${PERL:-/usr/bin/perl}
PL=${PL:-$(cd "$(dirname "$0")" && pwd)/lmdb-perl.pl}
LMDBPROG=${LMDBPROG:-$O/tests/run/lmdb-prog}
rt_start perl "scripts/install-deps: liblmdb-file-perl" "$PERL" "$PL"
if ! $PERL -MLMDB_File -e 1 2>"$T/err"; then
	why="no LMDB_File for $PERL (liblmdb-file-perl): $(head -1 "$T/err")"
	[ "${CI:-}" = true ] && { nok "perl: $why"; finish; exit 1; }
	echo "1..0 # SKIP $why"
	exit 77
fi
RECS=10000
w() { echo "$PERL $PL write $1 50 200"; }
v() { $PERL "$PL" verify "$1" $RECS; }

rt_lmdb_cases perl 50
# the other programs read what Perl wrote: the same records, same layout
if [ -x "$LMDBPROG" ]; then
	$LMDBPROG verify "$T/perl-contain" $RECS >"$T/out" 2>&1
	check "lmdb-prog reads the records Perl wrote under pmguard run (contain)" [ $? = 0 ]
fi
rt_bench perl 3
finish
