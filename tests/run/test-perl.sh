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
rt_need "no LMDB_File for $PERL (liblmdb-file-perl)" $PERL -MLMDB_File -e 1
RECS=10000
w() { echo "$PERL $PL write $1 ${2:-50} ${3:-200}"; }
v() { $PERL "$PL" verify "$1" $RECS; }

rt_lmdb_cases perl 50
rt_cross perl
rt_bench perl 3 200 1000
finish
