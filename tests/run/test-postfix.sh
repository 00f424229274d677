#!/bin/sh
# SPDX-License-Identifier: MIT
#
# test-postfix.sh [BUILD_DIR] - Postfix's postmap with lmdb tables
# (Debian's postfix-lmdb: postfix-lmdb.so, dlopen()ed, on the system's
# liblmdb) under `pmguard run --lmdb-writemap` (docs/run.md).  Postfix
# opens its tables without MDB_WRITEMAP (LMDB then maps them read-only:
# nothing to protect); --lmdb-writemap adds it.  postmap rebuilds a
# table of 5,000 entries (one write transaction, committed at close)
# over a copy of a reference table; postmap -s and postmap -q read it
# back.  The wild-write cases of tests/run/runtime-lib.sh (without
# pmguard the injector's write faults: the map is read-only) and the
# run/plain bench line.  TAP.  Without postmap or the lmdb map type:
# SKIP (exit 77), a failure with CI=true.  POSTMAP: the binary.
set -u
O=${1:-build}
. "$(dirname "$0")/runtime-lib.sh"
POSTMAP=${POSTMAP:-/usr/sbin/postmap}
rt_start postfix "scripts/install-deps: postfix, postfix-lmdb" "$POSTMAP"
# a configuration directory of its own: an empty main.cf (the system's
# postfix may be unconfigured)
mkdir -p "$T/conf"
: >"$T/conf/main.cf"
PM="$POSTMAP -c $T/conf"
awk 'BEGIN { for (i = 0; i < 5000; i++)
	printf "key%05d.pmg.test value-%d-of-the-pmguard-table\n", i, i }' \
	>"$T/table"
sed 's/ /\t/' "$T/table" | sort >"$T/want"
mkdir -p "$T/ref"
cp "$T/table" "$T/ref/"
if ! $PM lmdb:"$T/ref/table" >"$T/out" 2>&1; then
	why="postmap cannot make an lmdb table (postfix-lmdb): $(head -1 "$T/out")"
	[ "${CI:-}" = true ] && { nok "postfix: $why"; finish; exit 1; }
	echo "1..0 # SKIP $why"
	exit 77
fi
RECS=5000
# (BIG set: the bench's table of 200,000 entries, made anew)
w_prep() {
	if [ -n "${BIG:-}" ]; then
		cp "$T/big" "$1/table"
	else
		cp "$T/table" "$T/ref/table.lmdb" "$1/"
	fi
}
w() { echo "$PM lmdb:$1/table"; }
v() { $PM -s lmdb:"$1/table" | sort | cmp -s - "$T/want"; }
v "$T/ref"
check "reference: postmap lmdb:, postmap -s lists the 5000 entries" [ $? = 0 ]

# AFTER 1: postmap's one write transaction; its injector's target is
# the new root page
NEG_SEGV="LMDB maps the table read-only without MDB_WRITEMAP" \
	rt_lmdb_cases postfix 1 --lmdb-writemap
check "postfix: the report says --lmdb-writemap added MDB_WRITEMAP" \
	grep -q 'protected.*MDB_WRITEMAP added by --lmdb-writemap' "$T/postfix-clean.rep"

# postmap -q under pmguard run: it opens the table read-only, which the
# report says (nothing to protect)
got=$($PMG run --lmdb-writemap --report "$T/q.rep" -- $PM -q \
	key04999.pmg.test lmdb:"$T/postfix-contain/table" 2>"$T/q.err")
check "postmap -q under pmguard run: the value the contain run wrote ($got), the table named as read-only" \
	sh -c "[ '$got' = value-4999-of-the-pmguard-table ] && grep -q 'postmap (pid [0-9]*): LMDB environment .*: not protected: opened read-only' '$T/q.rep'"
# (postmap's one transaction, of 200,000 entries: 5,000 take a few ms)
awk 'BEGIN { for (i = 0; i < 200000; i++)
	printf "key%06d.pmg.test value-%d-of-the-pmguard-table\n", i, i }' \
	>"$T/big"
BIG=1 rt_bench postfix 3 1 200000 --lmdb-writemap
finish
