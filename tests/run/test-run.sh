#!/bin/sh
# SPDX-License-Identifier: MIT
#
# test-run.sh [BUILD_DIR] - `pmguard run`, `learn` and `report` on
# unmodified programs: py-lmdb (Debian python3-lmdb, writemap=True),
# lmdb-utils, a small C LMDB program and a small libpmem program, with
# and without the wild-write injector (tests/run/wild.c).  TAP.
#
# Paths (override for the guest): PMG (pmguard), WILD (libwild.so),
# LMDBPROG, PMEMPROG, LMDBOWNSIG, STOPPROG (stopinit-prog), SCRIPT (lmdb-script.py),
# SIGNALS (signals.py), PY
# (python3 with the lmdb module; tests that need it skip without it),
# MDB_DIR (where mdb_* are).
# The backend is the environment's (the host: PMGUARD_BACKEND=mprotect,
# where windows are process-wide: a wild write from another thread while
# a write transaction is open is not caught there, by design; the
# injector writes between transactions).
set -u
O=${1:-build}
PMG=${PMG:-$O/pmguard}
WILD=${WILD:-$O/tests/run/libwild.so}
LMDBPROG=${LMDBPROG:-$O/tests/run/lmdb-prog}
PMEMPROG=${PMEMPROG:-$O/tests/run/pmem-prog}
LMDBEARLY=${LMDBEARLY:-$O/tests/run/lmdb-early}
LMDBMULTI=${LMDBMULTI:-$O/tests/run/lmdb-multi}
LMDBLOCKS=${LMDBLOCKS:-$O/tests/run/lmdb-locks}
LMDBOWNSIG=${LMDBOWNSIG:-$O/tests/run/lmdb-ownsig}
SCRIPT=${SCRIPT:-$(dirname "$0")/lmdb-script.py}
SIGNALS=${SIGNALS:-$(dirname "$0")/signals.py}
STOPPROG=${STOPPROG:-$O/tests/run/stopinit-prog}
PY=${PY:-/usr/bin/python3}
MDB_DIR=${MDB_DIR:-/usr/bin}
case $WILD in /*) ;; *) WILD=$(pwd)/$WILD ;; esac

n=0 failed=0
T=$(mktemp -d "${TMPDIR:-/tmp}/pmg-run-test.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
echo "TAP version 13"

ok() { n=$((n + 1)); echo "ok $n $1"; }
nok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n $1"; }
skip() { n=$((n + 1)); echo "ok $n $1 # SKIP $2"; }
check() { # check NAME COND...: COND is a shell command
	name=$1; shift
	if "$@"; then ok "$name"; else nok "$name"; fi
}
diag() { sed 's/^/# /' "$@"; }
count() { grep -c -- "$1" "$2" 2>/dev/null; }

backend=$($PMG info 2>/dev/null | sed -n 's/^backend: *\([a-z]*\).*/\1/p')
echo "# backend: ${backend:-unknown}"
have_py=0
if [ -x "$PY" ] && "$PY" -c 'import lmdb' 2>/dev/null; then have_py=1; fi

# 1: a static program is refused with a reason (busybox-static's busybox,
# which install-deps installs and the guest runs; pmguard's own guest
# binaries are dynamic since they link Zydis)
static_prog=${STATIC_PROG:-/bin/busybox}
if [ ! -x "$static_prog" ]; then
	skip "static program refused" "no static binary to try ($static_prog)"
else
	$PMG run -- "$static_prog" true >"$T/out" 2>&1
	rc=$?
	check "static program refused (exit 2, says so)" \
		sh -c "[ $rc = 2 ] && grep -q 'statically linked' '$T/out'"
	[ $rc = 2 ] || diag "$T/out"
fi

# ---- LMDB through the C program (dynamically linked liblmdb) ----
mkdir "$T/c1"
$PMG run --report "$T/c1.rep" -- $LMDBPROG write "$T/c1" 50 200 \
	>"$T/out" 2>&1; rc=$?
check "lmdb-prog strict: 50 write txns, no false positive" \
	sh -c "[ $rc = 0 ] && ! grep -q 'stray' '$T/c1.rep'"
$LMDBPROG verify "$T/c1" 10000 >"$T/out" 2>&1
check "lmdb-prog: 10000 records intact" [ $? = 0 ]

# mdb_txn_abort(NULL), a no-op LMDB allows (knotd calls it), inside a
# write transaction: it once closed that transaction's window (a NULL
# matched a free slot of the preload's table), and the puts then faulted
mkdir "$T/c0"
$PMG run --report "$T/c0.rep" -- $LMDBPROG write "$T/c0" 20 100 --abort-null \
	>"$T/out" 2>&1; rc=$?
check "lmdb-prog strict: mdb_txn_abort(NULL) in a write txn is a no-op" \
	sh -c "[ $rc = 0 ] && ! grep -q 'stray\\|unbalanced' '$T/c0.rep'"
[ $rc = 0 ] || diag "$T/out" "$T/c0.rep"

mkdir "$T/c2"
LD_PRELOAD=$WILD WILD_AFTER=50 $PMG run --report "$T/c2.rep" -- \
	$LMDBPROG write "$T/c2" 50 200 >"$T/out" 2>&1; rc=$?
check "lmdb-prog + wild write, strict: aborted (SIGABRT) at the wild write" \
	sh -c "[ $rc = 134 ] && grep -q 'strict (aborting): stray write' \
	'$T/c2.rep' && grep -q 'libwild.so+0x' '$T/c2.rep'"
[ $rc = 134 ] || diag "$T/out" "$T/c2.rep"
$LMDBPROG verify "$T/c2" 10000 >"$T/out" 2>&1
check "lmdb-prog + wild, strict: all 10000 committed records intact" [ $? = 0 ]

mkdir "$T/c3"
LD_PRELOAD=$WILD WILD_AFTER=50 $LMDBPROG write "$T/c3" 50 200 \
	>"$T/out" 2>&1
$LMDBPROG verify "$T/c3" 10000 >"$T/out" 2>&1
check "lmdb-prog + wild, unprotected: the database is corrupted" [ $? != 0 ]

# pmguard report: function and file:line with libdw (a dynamically
# linked pmguard), module+offset without (the guest's static pmguard)
$PMG report "$T/c2.rep" >"$T/sym" 2>&1
if $PMG report "$T/c2.rep" 2>/dev/null | grep -q 'no debug info\| at .*:[0-9]'; then
	check "pmguard report: the wild write as function and file:line" \
		grep -q -- '-> wild_thread+0x[0-9a-f]* at .*wild.c:[0-9]' "$T/sym"
else
	check "pmguard report (no libdw here): the wild write as module+offset" \
		grep -q -- '-> .*libwild.so+0x[0-9a-f]*$' "$T/sym"
fi
grep -q -- '-> .*wild' "$T/sym" || diag "$T/sym"

# ---- no lock of the adapter on a read-only transaction's path
# (1 and 2 threads), none per write transaction once the environment is
# known (PKU: at most 1 in 200; mprotect: the library's window lock, 2 per
# transaction, by design); counted by lmdb-locks' own pthread_mutex_lock ----
if [ ! -x "$LMDBLOCKS" ]; then
	skip "lmdb-locks: no lock on the read-only path" "no $LMDBLOCKS"
else
	mkdir "$T/lk"
	maxw=401
	[ "$backend" = pku ] && maxw=1
	$PMG run -- $LMDBLOCKS "$T/lk" $maxw >"$T/out" 2>&1
	rc=$?
	check "lmdb-locks: read-only transactions take no lock of pmguard run's (1 and 2 threads), write transactions at most $maxw in 200" \
		sh -c "[ $rc = 0 ] && [ \$(grep -c '^ok ' '$T/out') = 4 ]"
	diag "$T/out"
fi

# ---- one domain per LMDB environment: a write transaction on
# one environment leaves the others protected, in every fault mode; 20
# environments, more than the hardware keys: virtual domains on PKU ----
mkdir "$T/mu0"
$PMG run --report "$T/mu0.rep" -- $LMDBMULTI "$T/mu0" 20 >"$T/out" 2>&1
rc=$?
check "lmdb-multi: 20 environments, a write txn in each: no stray, 20 domains 'lmdb:PATH'" \
	sh -c "[ $rc = 0 ] && grep -q '^ok 20 environments' '$T/out' && \
	! grep -q stray '$T/mu0.rep' && \
	[ \$(grep -c \"in domain 'lmdb:.*mu0/e[0-9][0-9]'\" '$T/mu0.rep') = 20 ]"
[ $rc = 0 ] || diag "$T/out" "$T/mu0.rep"
for mode in strict relaxed audit contain; do
	rm -rf "$T/mu1" "$T/mu1.rep"; mkdir "$T/mu1"
	$LMDBMULTI "$T/mu1" 20 >/dev/null 2>&1
	$PMG run --mode $mode --report "$T/mu1.rep" -- $LMDBMULTI "$T/mu1" \
		20 --stray 5 >"$T/out" 2>&1; rc=$?
	# (relaxed and audit let the byte land: the program sees it, 1)
	want_rc=1
	[ $mode = strict ] && want_rc=134
	[ $mode = contain ] && want_rc=0
	# reported: the write, into environment 06's domain, from the thread
	# that holds environment 05's window
	check "lmdb-multi --mode $mode: a stray write into env 06 inside a write txn on env 05 caught in domain 'lmdb:...e06'" \
		sh -c "[ $rc = $want_rc ] && grep -q \"stray write .*in domain 'lmdb:.*mu1/e06'\" '$T/mu1.rep'"
	[ $rc = $want_rc ] || diag "$T/out" "$T/mu1.rep"
	$LMDBMULTI "$T/mu1" 20 --verify >"$T/vout" 2>&1; vrc=$?
	case $mode in
	strict)
		# (the rounds after env 05's never ran)
		check "lmdb-multi --mode $mode: every environment's data intact after the abort" \
			sh -c "! grep -q 'record k ' '$T/vout'" ;;
	contain)
		check "lmdb-multi --mode $mode: every environment intact after" \
			sh -c "[ $vrc = 0 ] && grep -q '^ok 20' '$T/vout'" ;;
	*)
		check "lmdb-multi --mode $mode: the stray byte landed in env 06 only (the mode lets it through)" \
			sh -c "[ $vrc = 1 ] && [ \$(grep -c 'record' '$T/vout') = 1 ] && grep -q '^env 06: record k is .Xnv 06' '$T/vout'" ;;
	esac
	[ $vrc = 0 ] || [ $mode != contain ] || diag "$T/vout"
done
# the stray write from the last environment's transaction into env 00,
# the least recently used one: on PKU it has lost its key by then (a
# virtual domain, page protection: SEGV_ACCERR)
for mode in strict contain; do
	rm -rf "$T/mu2" "$T/mu2.rep"; mkdir "$T/mu2"
	$LMDBMULTI "$T/mu2" 20 >/dev/null 2>&1
	$PMG run --mode $mode --report "$T/mu2.rep" -- $LMDBMULTI "$T/mu2" \
		20 --stray 19 >"$T/out" 2>&1; rc=$?
	want_rc=0
	[ $mode = strict ] && want_rc=134
	check "lmdb-multi --mode $mode: a stray write into env 00 (the least recently used) inside env 19's txn caught in domain 'lmdb:...e00'" \
		sh -c "[ $rc = $want_rc ] && grep -q \"stray write .*in domain 'lmdb:.*mu2/e00'\" '$T/mu2.rep'"
	[ $rc = $want_rc ] || diag "$T/out" "$T/mu2.rep"
	$LMDBMULTI "$T/mu2" 20 --verify >"$T/vout" 2>&1
	check "lmdb-multi --mode $mode, stray into env 00: its record intact" \
		sh -c "! grep -q 'env 00: record k' '$T/vout'"
done

# ---- a reader thread older than the environments, all signals blocked:
# on PKU it died on its first read before the run library reserved
# write-disabled keys in its constructor, and on its first read of the
# 4th environment while it reserved three; now it reserves every key a
# write-disabled domain may get, the environments past them virtual ----
$PMG run -- $LMDBEARLY "$T/early" >"$T/out" 2>&1; rc=$?
check "lmdb-early: a reader started before mdb_env_open, signals blocked, reads" \
	sh -c "[ $rc = 0 ] && grep -q '^ok 1 ' '$T/out'"
[ $rc = 0 ] || diag "$T/out"
for ne in 4 16; do
	$PMG run -- $LMDBEARLY "$T/early$ne" $ne >"$T/out" 2>&1; rc=$?
	check "lmdb-early $ne: a reader started before $ne environments, signals blocked, reads every one (a write txn on each first)" \
		sh -c "[ $rc = 0 ] && grep -q '^ok 1 .* $ne of $ne environments' '$T/out'"
	[ $rc = 0 ] || diag "$T/out"
done
# its stray write still kills (a fault it cannot take: SIGSEGV, 139),
# the byte never lands: into env 15 (keyed on PKU at the end) and env 00
# (virtual by then: its key went to a later environment's window)
for s in 15 0; do
	$PMG run -- $LMDBEARLY "$T/es$s" 16 --stray $s >"$T/out" 2>&1; rc=$?
	$LMDBEARLY "$T/es$s" 16 --verify >"$T/vout" 2>&1; vrc=$?
	check "lmdb-early 16 --stray $s: the reader's stray write into env $s kills the process (SIGSEGV), every record intact" \
		sh -c "[ $rc = 139 ] && grep -q '^ok 1 ' '$T/out' && \
		! grep -q '^not ok' '$T/out' && [ $vrc = 0 ]"
	[ $rc = 139 ] && [ $vrc = 0 ] || diag "$T/out" "$T/vout"
done

# ---- the program's own handlers, installed in main() after the
# preload's (slapd: signal(SIGTRAP, ...); crash reporters: SIGSEGV) ----
if [ ! -x "$LMDBOWNSIG" ]; then
	skip "lmdb-ownsig: signal(SIGTRAP, h) after start, contain" "no $LMDBOWNSIG"
	skip "lmdb-ownsig: its own SIGSEGV handler after start, strict" "no $LMDBOWNSIG"
else
	$PMG run --mode contain --report "$T/os1.rep" -- $LMDBOWNSIG "$T/os1" trap \
		>"$T/out" 2>&1; rc=$?
	check "lmdb-ownsig: signal(SIGTRAP, h) after start, contain: the stray write undone, h never called, the program goes on" \
		sh -c "[ $rc = 0 ] && grep -q '^lmdb-ownsig: ok' '$T/out' && \
		grep -q 'contain: stray write by' '$T/os1.rep'"
	[ $rc = 0 ] || diag "$T/out" "$T/os1.rep"
	$PMG run --mode strict --report "$T/os2.rep" -- $LMDBOWNSIG "$T/os2" segv \
		>"$T/out" 2>&1; rc=$?
	at=$(sed -n 's/^lmdb-ownsig: stray at \(0x[0-9a-f]*\)$/\1/p' "$T/out")
	check "lmdb-ownsig: its own SIGSEGV handler after start, strict: pmguard's report and abort, never that handler" \
		sh -c "[ $rc = 134 ] && [ -n '$at' ] && \
		! grep -q 'own handler' '$T/out' && \
		grep -q \"strict (aborting): stray write to $at \" '$T/os2.rep'"
	[ $rc = 134 ] || diag "$T/out" "$T/os2.rep"
fi

# --lmdb-writemap is read when the program starts: a program that clears
# its environment (as daemons do) before mdb_env_open() still gets
# MDB_WRITEMAP added, and its map protected
mkdir "$T/cw"
$PMG run --lmdb-writemap --report "$T/cw.rep" -- $LMDBPROG write "$T/cw" 10 \
	100 --clearenv >"$T/out" 2>&1; rc=$?
check "--lmdb-writemap: a program that clears its environment before mdb_env_open is protected" \
	sh -c "[ $rc = 0 ] && grep -q 'protected, map .*added by --lmdb-writemap' '$T/cw.rep'"
[ $rc = 0 ] && grep -q 'added by --lmdb-writemap' "$T/cw.rep" ||
	diag "$T/out" "$T/cw.rep"

# ---- lmdb-utils on an environment lmdb-prog wrote ----
if [ ! -x "$MDB_DIR/mdb_dump" ]; then
	for t in "mdb_dump" "mdb_load" "mdb_stat, mdb_copy" "lmdb-utils note"; do
		skip "$t" "no $MDB_DIR/mdb_dump (lmdb-utils)"
	done
else
	$PMG run --report "$T/u.rep" -- $MDB_DIR/mdb_dump "$T/c1" \
		>"$T/dump" 2>"$T/out"; rc=$?
	check "mdb_dump under pmguard run: exit 0, 10000 records" \
		sh -c "[ $rc = 0 ] && [ \$(grep -c '^ 6b' '$T/dump') = 10000 ]"
	mkdir "$T/u1"
	$PMG run --lmdb-writemap --report "$T/u.rep" -- $MDB_DIR/mdb_load \
		-f "$T/dump" "$T/u1" >"$T/out" 2>&1; rc=$?
	$LMDBPROG verify "$T/u1" 10000 >>"$T/out" 2>&1
	check "mdb_load under pmguard run, then lmdb-prog verifies 10000" \
		sh -c "[ $rc = 0 ] && [ $? = 0 ]"
	mkdir "$T/u2"
	$PMG run -- $MDB_DIR/mdb_stat "$T/u1" >"$T/out" 2>&1 &&
		$PMG run -- $MDB_DIR/mdb_copy "$T/u1" "$T/u2" >>"$T/out" 2>&1 &&
		$LMDBPROG verify "$T/u2" 10000 >>"$T/out" 2>&1
	check "mdb_stat, mdb_copy under pmguard run; the copy verifies" \
		[ $? = 0 ]
	# Debian's lmdb-utils carry LMDB inside (no liblmdb.so): say so
	check "lmdb-utils: the report says nothing could be protected" \
		grep -q 'nothing was protected' "$T/u.rep"
fi

# ---- a wild write while a write transaction is open on another thread ----
mkdir "$T/c4"
LD_PRELOAD=$WILD WILD_AFTER=50 WILD_DURING=1 $PMG run --report "$T/c4.rep" \
	-- $LMDBPROG write "$T/c4" 50 200 >"$T/out" 2>&1; rc=$?
if [ "$backend" = pku ]; then
	check "PKU: wild write from another thread during a write txn: caught" \
		sh -c "[ $rc = 134 ] && grep -q 'strict (aborting)' '$T/c4.rep'"
	$LMDBPROG verify "$T/c4" any >"$T/out" 2>&1
	check "PKU: ... and the committed records are intact" [ $? = 0 ]
else
	skip "wild write during another thread's write txn" \
		"backend $backend: windows are process-wide, not caught by design"
	skip "... records intact" "backend $backend"
fi

# ---- LMDB through py-lmdb (Debian python3-lmdb, system liblmdb) ----
if [ $have_py = 0 ]; then
	for t in "py strict clean" "py strict wild" "py strict intact" \
		 "py audit wild" "py relaxed wild" "py contain wild" \
		 "py contain intact" "py unprotected corrupt" \
		 "py map growth"; do
		skip "$t" "no $PY with the lmdb module (python3-lmdb)"
	done
else
	mkdir "$T/p1"
	$PMG run --report "$T/p1.rep" -- $PY "$SCRIPT" write "$T/p1" 50 200 \
		>"$T/out" 2>&1; rc=$?
	check "py-lmdb strict: 50 write txns, no false positive" \
		sh -c "[ $rc = 0 ] && ! grep -q stray '$T/p1.rep'"
	[ $rc = 0 ] || diag "$T/out" "$T/p1.rep"

	mkdir "$T/p2"
	LD_PRELOAD=$WILD WILD_AFTER=51 $PMG run --report "$T/p2.rep" -- \
		$PY "$SCRIPT" write "$T/p2" 50 200 >"$T/out" 2>&1; rc=$?
	check "py-lmdb + wild write, strict: aborted at the wild write" \
		sh -c "[ $rc = 134 ] && grep -q 'strict (aborting): stray write' \
		'$T/p2.rep'"
	$PY "$SCRIPT" verify "$T/p2" 10000 >"$T/out" 2>&1
	check "py-lmdb + wild, strict: all 10000 records intact on reopen" \
		[ $? = 0 ]

	# 8 wild writes into py-lmdb's map under --mode $1, in $T/$2:
	# sets rc and c (the report lines matching $3)
	wild8() {
		mkdir "$T/$2"
		LD_PRELOAD=$WILD WILD_AFTER=51 WILD_WRITES=8 $PMG run \
			--mode "$1" --report "$T/$2.rep" -- \
			$PY "$SCRIPT" write "$T/$2" 50 200 >"$T/out" 2>&1
		rc=$?
		c=$(count "$3" "$T/$2.rep")
	}

	wild8 audit p3 'audit: stray write'
	check "py-lmdb + 8 wild writes, audit: runs on, 8 reports ($c)" \
		sh -c "[ $rc = 0 ] && [ '$c' = 8 ]"

	wild8 relaxed p4 'relaxed.*stray write'
	check "py-lmdb + 8 wild writes, relaxed: runs on, reported once ($c)" \
		sh -c "[ $rc = 0 ] && [ '$c' = 1 ]"

	wild8 contain p7 'contain: stray write by'
	check "py-lmdb + 8 wild writes, contain: runs on, 8 contained ($c)" \
		sh -c "[ $rc = 0 ] && [ '$c' = 8 ]"
	[ $rc = 0 ] || diag "$T/out" "$T/p7.rep"
	$PY "$SCRIPT" verify "$T/p7" 10000 >"$T/out" 2>&1
	check "py-lmdb + 8 wild writes, contain: all 10000 records intact" \
		[ $? = 0 ]

	mkdir "$T/p5"
	LD_PRELOAD=$WILD WILD_AFTER=51 $PY "$SCRIPT" write "$T/p5" 50 200 \
		>"$T/out" 2>&1
	$PY "$SCRIPT" verify "$T/p5" 10000 >"$T/out" 2>&1
	check "py-lmdb + wild, unprotected: the database is corrupted" \
		[ $? != 0 ]

	mkdir "$T/p6"
	LD_PRELOAD=$WILD WILD_AFTER=21 $PMG run --report "$T/p6.rep" -- \
		$PY "$SCRIPT" write "$T/p6" 20 100 --grow >"$T/out" 2>&1; rc=$?
	check "py-lmdb map grown by set_mapsize: new map protected (wild caught)" \
		sh -c "[ $rc = 134 ] && grep -q 'strict (aborting)' '$T/p6.rep'"
	[ $rc = 134 ] || diag "$T/out" "$T/p6.rep"

fi

# ---- libpmem ----
$PMG run --report "$T/m1.rep" -- $PMEMPROG write "$T/m1" 100 \
	>"$T/out" 2>&1; rc=$?
check "pmem-prog strict: 100 pmem_memcpy_persist, no false positive" \
	sh -c "[ $rc = 0 ] && ! grep -q stray '$T/m1.rep'"
LD_PRELOAD=$WILD WILD_AFTER=50 WILD_WRITES=4 $PMG run \
	--report "$T/m2.rep" -- $PMEMPROG write "$T/m2" 100 >"$T/out" 2>&1
rc=$?
check "pmem-prog + wild, strict: aborted at the wild write" \
	sh -c "[ $rc = 134 ] && grep -q \"strict (aborting): stray write.*'pmem:.*m2'\" '$T/m2.rep'"
$PMEMPROG verify "$T/m2" 50 >"$T/out" 2>&1
check "pmem-prog + wild, strict: the 50 records written intact" [ $? = 0 ]
LD_PRELOAD=$WILD WILD_AFTER=50 WILD_WRITES=4 $PMG run --mode audit \
	--report "$T/m3.rep" -- $PMEMPROG write "$T/m3" 100 >"$T/out" 2>&1
rc=$?
c=$(count 'audit: stray write' "$T/m3.rep")
check "pmem-prog + 4 wild writes, audit: runs on, 4 reports ($c)" \
	sh -c "[ $rc = 0 ] && [ '$c' = 4 ]"
LD_PRELOAD=$WILD WILD_AFTER=50 WILD_WRITES=4 $PMG run --mode contain \
	--report "$T/m5.rep" -- $PMEMPROG write "$T/m5" 100 >"$T/out" 2>&1
rc=$?
c=$(count 'contain: stray write by' "$T/m5.rep")
check "pmem-prog + 4 wild writes, contain: runs on, 4 contained ($c)" \
	sh -c "[ $rc = 0 ] && [ '$c' = 4 ]"
$PMEMPROG verify "$T/m5" 100 >"$T/out" 2>&1
check "pmem-prog + 4 wild writes, contain: all 100 records intact" [ $? = 0 ]
LD_PRELOAD=$WILD WILD_AFTER=50 WILD_WRITES=4 $PMEMPROG write "$T/m4" 100 \
	>"$T/out" 2>&1
$PMEMPROG verify "$T/m4" 100 >"$T/out" 2>&1
check "pmem-prog + wild, unprotected: corrupted" [ $? != 0 ]

# ---- libpmem2 (pmem2-prog maps the file pmem-prog created) ----
PMEM2PROG=${PMEM2PROG:-$O/tests/run/pmem2-prog}
$PMEMPROG write "$T/n1" 1 >/dev/null 2>&1
$PMG run --report "$T/n1.rep" -- $PMEM2PROG "$T/n1" 100 >"$T/out" 2>&1
rc=$?
$PMEMPROG verify "$T/n1" 100 >>"$T/out" 2>&1
check "pmem2-prog strict: memcpy_fn/memset_fn, no false positive, intact" \
	sh -c "[ $rc = 0 ] && [ $? = 0 ] && ! grep -q stray '$T/n1.rep'"
[ $rc = 0 ] || diag "$T/out" "$T/n1.rep"
$PMG run --report "$T/n2.rep" -- $PMEM2PROG "$T/n1" 100 --plain \
	>"$T/out" 2>&1; rc=$?
check "pmem2-prog --plain, strict: a plain store into the map aborts" \
	sh -c "[ $rc = 134 ] && grep -q \"stray write.*'pmem2:0x[0-9a-f]*'.*pmem2-prog+0x\" '$T/n2.rep'"

# ---- the learn loop: the program's own plain store ----
$PMG run --report "$T/l0.rep" -- $PMEMPROG write "$T/l0" 100 --plain \
	>"$T/out" 2>&1; rc=$?
check "pmem-prog --plain, strict: its own plain store is stray" \
	sh -c "[ $rc = 134 ] && grep -q 'pmem-prog+0x' '$T/l0.rep'"
rm -f "$T/l0"
$PMG learn -o "$T/sites" -- $PMEMPROG write "$T/l0" 100 --plain \
	>"$T/out" 2>&1; rc=$?
check "learn: exit 0, exactly one site, in pmem-prog, count 1" \
	sh -c "[ $rc = 0 ] && [ \$(grep -vc '^#' '$T/sites') = 1 ] && \
	grep -q 'pmem-prog+0x[0-9a-f]* 1 ' '$T/sites'"
diag "$T/sites"
rm -f "$T/l0"
$PMG run --allow "$T/sites" --report "$T/l1.rep" -- $PMEMPROG write \
	"$T/l0" 100 --plain >"$T/out" 2>&1; rc=$?
$PMEMPROG verify "$T/l0" 100 >>"$T/out" 2>&1
check "run --allow SITES, strict: the learned store passes, data intact" \
	sh -c "[ $rc = 0 ] && [ $? = 0 ] && ! grep -q stray '$T/l1.rep' && \
	grep -q '1 write(s) let through' '$T/l1.rep'"
LD_PRELOAD=$WILD WILD_AFTER=50 $PMG run --allow "$T/sites" \
	--report "$T/l2.rep" -- $PMEMPROG write "$T/l2" 100 --plain \
	>"$T/out" 2>&1; rc=$?
check "run --allow SITES + wild write: the wild write still aborts" \
	sh -c "[ $rc = 134 ] && grep -q 'libwild.so+0x' '$T/l2.rep'"

# ---- reliability ----
# N10: pmem_memcpy/memmove/memset and the pmem2 functions with a flag bit
# libpmem does not know (it ignores it): the records are written
rm -f "$T/f1"
$PMG run --report "$T/f1.rep" -- $PMEMPROG write "$T/f1" 100 --flags 0x100 \
	>"$T/out" 2>&1; rc=$?
$PMEMPROG verify "$T/f1" 100 >>"$T/out" 2>&1
check "N10: pmem_mem{cpy,move,set} with an unknown flag bit: 100 records written" \
	sh -c "[ $rc = 0 ] && [ $? = 0 ]"
$PMEMPROG write "$T/f2" 1 >/dev/null 2>&1
$PMG run --report "$T/f2.rep" -- $PMEM2PROG "$T/f2" 100 --flags 0x100 \
	>"$T/out" 2>&1; rc=$?
$PMEMPROG verify "$T/f2" 100 >>"$T/out" 2>&1
check "N10: pmem2 memcpy/memmove/memset_fn with an unknown flag bit: written" \
	sh -c "[ $rc = 0 ] && [ $? = 0 ]"

# N6: the program closes every inherited descriptor and opens its own
# file, which gets the number the report file had: the reports must not
# land in it (and still reach the report file)
rm -f "$T/g1" "$T/g1.dat"
$PMG run --mode audit --report "$T/g1.rep" -- $PMEMPROG write "$T/g1" 100 \
	--plain --close-fds --data "$T/g1.dat" >"$T/out" 2>&1; rc=$?
check "N6: program closes fds 3.., opens a file: no pmguard line in it" \
	sh -c "[ $rc = 0 ] && [ ! -s '$T/g1.dat' ]"
[ -s "$T/g1.dat" ] && diag "$T/g1.dat"
check "N6: ... and the audit report still reaches the report file" \
	grep -q 'audit: stray write' "$T/g1.rep"
# the same for stderr: the program closes fd 2 and opens a file there
rm -f "$T/g2" "$T/g2.dat"
$PMG run --mode audit -- $PMEMPROG write "$T/g2" 100 --plain \
	--close-stderr --data "$T/g2.dat" >"$T/out" 2>&1; rc=$?
check "N6: program closes stderr, opens a file at fd 2: no pmguard line in it" \
	sh -c "[ $rc = 0 ] && [ ! -s '$T/g2.dat' ]"
[ -s "$T/g2.dat" ] && diag "$T/g2.dat"
# a child of Python's subprocess (close_fds=True is the default)
if [ -x "$PY" ]; then
	rm -f "$T/g3" "$T/g3.dat"
	$PMG run --mode audit --report "$T/g3.rep" -- $PY -c \
		'import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)' \
		$PMEMPROG write "$T/g3" 100 --plain --data "$T/g3.dat" \
		>"$T/out" 2>&1; rc=$?
	check "N6: a Python subprocess child opens a file: no pmguard line in it" \
		sh -c "[ $rc = 0 ] && [ ! -s '$T/g3.dat' ]"
	[ -s "$T/g3.dat" ] && diag "$T/g3.dat"
	check "N6: ... and the child's report reaches the report file" \
		grep -q 'audit: stray write' "$T/g3.rep"
else
	skip "N6: Python subprocess child" "no $PY"
	skip "N6: ... child's report" "no $PY"
fi

# N8: the library under a path with a space or ':' (LD_PRELOAD splits
# it, ld.so ignores it): refused, never an unprotected run; and any
# library that does not confirm it loaded (here the injector) fails
RUNLIB=${PMGUARD_RUN_LIB:-$O/libpmguard-run.so}
for d in "lib dir" "lib:dir"; do
	mkdir -p "$T/$d"
	cp "$RUNLIB" "$T/$d/"
	rm -f "$T/h1"
	LD_PRELOAD=$WILD WILD_AFTER=50 WILD_WRITES=4 $PMG run \
		--lib "$T/$d/libpmguard-run.so" -- $PMEMPROG write "$T/h1" 100 \
		>"$T/out" 2>&1; rc=$?
	check "N8: library in '$d': refused, exit != 0, says why" \
		sh -c "[ $rc != 0 ] && [ $rc != 134 ] && grep -q 'pmguard' '$T/out'"
	[ $rc != 0 ] || diag "$T/out"
done
rm -f "$T/h2"
$PMG run --lib "$WILD" -- $PMEMPROG write "$T/h2" 10 >"$T/out" 2>&1; rc=$?
check "N8: a preload that never confirms (not pmguard's): exit != 0, says so" \
	sh -c "[ $rc != 0 ] && grep -q 'did not load' '$T/out'"
[ $rc != 0 ] || diag "$T/out"

# N9: a bad PMGUARD_* value under pmguard run: an error, never a run
for v in PMGUARD_REPORT_FD=abc PMGUARD_BACKEND=bogus PMGUARD_NO_CLWB=2 \
	 PMGUARD_REPORT_FD=77 PMGUARD_RUN_CONFIRM_S=0; do
	rm -f "$T/h3"
	env "$v" $PMG run -- $PMEMPROG write "$T/h3" 10 >"$T/out" 2>&1; rc=$?
	check "N9: $v: exit != 0, the message names it" \
		sh -c "[ $rc != 0 ] && grep -q '${v%%=*}=.${v#*=}' '$T/out' && [ ! -e '$T/h3' ]"
	[ $rc != 0 ] || diag "$T/out"
done
# ... and the preload itself, preloaded without the launcher
rm -f "$T/h4"
LD_PRELOAD=$RUNLIB PMGUARD_BACKEND=bogus \
	$PMEMPROG write "$T/h4" 10 >"$T/out" 2>&1; rc=$?
check "N9: the preload with PMGUARD_BACKEND=bogus: exit 127 before main" \
	sh -c "[ $rc = 127 ] && grep -q 'PMGUARD_BACKEND=.bogus' '$T/out' && [ ! -e '$T/h4' ]"
[ $rc = 127 ] || diag "$T/out"

# N13: a report naming a FIFO as a module: pmguard report does not block
mkfifo "$T/fifo"
printf 'pmguard: module 0x0 0x1000-0x2000 %s\npmguard: strict (aborting): stray write to 0x1 in domain '"'"'x'"'"' (key 1) by thread 1 at ip 0x1010 (%s+0x10), PKRU 0x0\n' \
	"$T/fifo" "$T/fifo" >"$T/fifo.rep"
timeout 20 $PMG report "$T/fifo.rep" >"$T/out" 2>&1; rc=$?
check "N13: pmguard report with a FIFO as a module: finishes (rc $rc)" \
	sh -c "[ $rc = 0 ] && grep -q 'fifo+0x10' '$T/out'"
# a directory is an error, for report and for run --allow
$PMG report "$T" >"$T/out" 2>&1; rc=$?
check "pmguard report DIR: exit != 0 with a message" \
	sh -c "[ $rc != 0 ] && grep -q 'directory' '$T/out'"
$PMG run --allow "$T" -- $PMEMPROG write "$T/h5" 10 >"$T/out" 2>&1; rc=$?
check "pmguard run --allow DIR: exit != 0 with a message, not run" \
	sh -c "[ $rc != 0 ] && grep -q 'directory' '$T/out' && [ ! -e '$T/h5' ]"

# N14: learn -o into a directory that does not exist: refused before
# the program runs
rm -f "$T/h6"
$PMG learn -o "$T/nodir/sites" -- $PMEMPROG write "$T/h6" 10 \
	>"$T/out" 2>&1; rc=$?
check "N14: learn -o UNWRITABLE: refused before running the program" \
	sh -c "[ $rc != 0 ] && [ ! -e '$T/h6' ] && grep -q 'nodir' '$T/out'"

# N15: processes without LMDB or libpmem do not each say "nothing was
# protected": once, by pmguard run, for the whole run (Python spawns the
# children: the guest's sh and true are busybox, static)
if [ -x "$PY" ]; then
	$PMG run -- $PY -c 'import subprocess, sys
for i in range(2): subprocess.run([sys.executable, "-c", "pass"])' \
		>"$T/out" 2>&1
	c=$(count 'nothing was protected' "$T/out")
	check "N15: three processes, none with LMDB/libpmem: said once ($c)" \
		[ "$c" = 1 ]
	rm -f "$T/h7"
	$PMG run -- $PY -c 'import subprocess, sys
subprocess.run([sys.executable, "-c", "pass"])
subprocess.run(sys.argv[1:])' $PMEMPROG write "$T/h7" 10 >"$T/out" 2>&1
	c=$(count 'nothing was protected' "$T/out")
	check "N15: one process of the run protected something: not said ($c)" \
		[ "$c" = 0 ]
else
	skip "N15: said once" "no $PY"
	skip "N15: not said" "no $PY"
fi

# ---- pmguard run as PROG's parent ----
# signals and job control as without pmguard (tests/run/signals.py)
if [ -x "$PY" ]; then
	for s in forward-alrm forward-rtmin self-stop tstp parent \
		 parent-same-group group stop-cont-prog stopped-start \
		 slow-start int-at-start; do
		timeout 120 $PY "$SIGNALS" $s "$PMG" "$PY" "$STOPPROG" \
			>"$T/out" 2>&1; rc=$?
		check "signals: $s as without pmguard (tests/run/signals.py)" \
			[ $rc = 0 ]
		[ $rc = 0 ] || diag "$T/out"
	done
else
	for s in forward-alrm forward-rtmin self-stop tstp parent \
		 parent-same-group group stop-cont-prog stopped-start \
		 slow-start int-at-start; do
		skip "signals: $s" "no $PY"
	done
fi

# PMGUARD_RUN_* left in the caller's environment (a nested run, a shell
# that exported them) are pmguard run's own: its options decide, never
# an inherited allow list, report path, learn file or MDB_WRITEMAP
rm -f "$T/e1"
PMGUARD_RUN_ALLOW=$T/sites $PMG run --report "$T/e1.rep" -- $PMEMPROG \
	write "$T/e1" 100 --plain >"$T/out" 2>&1; rc=$?
check "env: an inherited PMGUARD_RUN_ALLOW allows nothing (strict aborts)" \
	sh -c "[ $rc = 134 ] && grep -q 'strict (aborting)' '$T/e1.rep'"
[ $rc = 134 ] || diag "$T/out" "$T/e1.rep"
rm -f "$T/e2"
PMGUARD_RUN_REPORT=$T/e2.rep PMGUARD_RUN_LEARN=$T/e2.learn $PMG run \
	--mode audit -- $PMEMPROG write "$T/e2" 100 --plain >"$T/out" 2>&1
rc=$?
check "env: inherited PMGUARD_RUN_REPORT/LEARN ignored (report on stderr)" \
	sh -c "[ $rc = 0 ] && grep -q 'audit: stray write' '$T/out' && \
	[ ! -e '$T/e2.rep' ] && [ ! -e '$T/e2.learn' ]"
[ $rc = 0 ] || diag "$T/out"

# programs ld.so runs without the preload (secure-execution mode, another
# architecture) are refused before they run, never run unprotected until
# the confirmation times out
if [ "$(id -u)" = 0 ]; then
	mkdir -p "$T/suid" && chmod 1777 "$T/suid" && chmod 711 "$T"
	for m in 4755 2755; do
		cp "$PMEMPROG" "$T/suid/prog$m"
		chown 65534:65534 "$T/suid/prog$m" && chmod $m "$T/suid/prog$m"
		rm -f "$T/suid/x"
		$PMG run -- "$T/suid/prog$m" write "$T/suid/x" 10 \
			>"$T/out" 2>&1; rc=$?
		check "set-user/group-ID PROG (mode $m, another owner): refused before it ran" \
			sh -c "[ $rc = 2 ] && [ ! -e '$T/suid/x' ] && \
			grep -q 'set-.*-ID' '$T/out'"
		[ $rc = 2 ] || diag "$T/out"
	done
else
	skip "set-user-ID PROG refused" "not root (chown)"
	skip "set-group-ID PROG refused" "not root (chown)"
fi
# a 32-bit PROG: its ld.so cannot load the 64-bit library
if [ -e /lib/ld-linux.so.2 ] && printf '.globl _start\n_start: mov $4,%%eax\nmov $1,%%ebx\nlea m,%%ecx\nmov $4,%%edx\nint $0x80\nmov $1,%%eax\nxor %%ebx,%%ebx\nint $0x80\n.data\nm: .ascii "ran\\n"\n' >"$T/m32.S" &&
   cc -m32 -nostdlib -no-pie -o "$T/m32" "$T/m32.S" \
	-Wl,-dynamic-linker,/lib/ld-linux.so.2 -Wl,--no-as-needed \
	/usr/lib32/libc.so.6 >/dev/null 2>&1 && "$T/m32" | grep -q ran; then
	$PMG run -- "$T/m32" >"$T/out" 2>&1; rc=$?
	check "32-bit PROG: refused before it ran (exit 2, says why)" \
		sh -c "[ $rc = 2 ] && ! grep -q '^ran' '$T/out' && \
		grep -q '32-bit' '$T/out'"
	[ $rc = 2 ] || diag "$T/out"
else
	skip "32-bit PROG refused" "cannot build or run a 32-bit program here"
fi

# the run's bookkeeping leaves no file behind, even when pmguard is
# killed with SIGKILL (here by PROG itself), and does not depend on the
# directory (a relative TMPDIR, a PROG that changes directory)
if [ -x "$PY" ]; then
	mkdir -p "$T/tmpd"
	TMPDIR=$T/tmpd $PMG run -- $PY -c 'import os; os.kill(os.getppid(), 9)' \
		>"$T/out" 2>&1
	TMPDIR=$T/tmpd $PMG learn -o "$T/k.sites" -- $PY -c \
		'import os; os.kill(os.getppid(), 9)' >>"$T/out" 2>&1
	check "pmguard run/learn SIGKILLed: no file left in TMPDIR ($(ls "$T/tmpd" | wc -l))" \
		sh -c "[ -z \"\$(ls '$T/tmpd')\" ]"
	mkdir -p "$T/rel/a/b/c/d/e/f/g/h/i/j"
	rm -f "$T/s1"
	rel=$($PY -c 'import os, sys; print(os.path.relpath(sys.argv[1]))' \
		"$T/rel")
	absprog=$($PY -c 'import os, sys; print(os.path.abspath(sys.argv[1]))' \
		"$PMEMPROG")
	TMPDIR=$rel $PMG run -- $PY -c 'import os, subprocess, sys
os.chdir(sys.argv[1]); sys.exit(subprocess.run(sys.argv[2:]).returncode)' \
		"$T/rel/a/b/c/d/e/f/g/h/i/j" "$absprog" write "$T/s1" 10 \
		>"$T/out" 2>&1; rc=$?
	c=$(count 'nothing was protected' "$T/out")
	check "relative TMPDIR, PROG changes directory: protected, not said ($c)" \
		sh -c "[ $rc = 0 ] && [ '$c' = 0 ]"
	[ "$c" = 0 ] || diag "$T/out"
else
	skip "SIGKILLed pmguard: no temporary file" "no $PY"
	skip "relative TMPDIR" "no $PY"
fi

# a process of the run that drops privileges cannot open the report file
# (root's, 0644): it runs protected and reports on stderr, said, rather
# than being killed (exit 127) for a report file
# (the run library from a copy in $T/suid, which the dropped user can
# reach: a build tree under root's 0700 home cannot be preloaded after
# the drop, whatever pmguard does; an installed one, /usr/lib/pmguard/,
# can)
if [ "$(id -u)" = 0 ] && [ -x "$PY" ] && [ -d "$T/suid" ]; then
	rm -f "$T/suid/d1"
	cp "$RUNLIB" "$T/suid/libpmguard-run.so"
	chmod 755 "$T/suid/libpmguard-run.so"
	$PMG run --lib "$T/suid/libpmguard-run.so" --report "$T/d.rep" -- \
		$PY -c 'import os, subprocess, sys
os.setgid(65534); os.setuid(65534)
r = subprocess.run(sys.argv[1:]).returncode
sys.exit(128 - r if r < 0 else r)' "$PMEMPROG" write \
		"$T/suid/d1" 100 --plain >"$T/out" 2>&1; rc=$?
	check "a child that dropped privileges: runs, strict still aborts, reports on stderr" \
		sh -c "[ $rc = 134 ] && grep -q 'strict (aborting): stray write' '$T/out' && \
		grep -q 'd.rep.*stderr' '$T/out'"
	[ $rc = 134 ] || diag "$T/out"
else
	skip "a child that dropped privileges" "not root, or no $PY"
fi

# pmguard started with SIGCHLD ignored (inherited across exec from a
# parent that ignores it): the children would be reaped by the kernel and
# waitpid() fail, pmguard said exit 0 for a PROG that aborted
if [ -x "$PY" ]; then
	rm -f "$T/c9"
	$PY -c 'import os, signal, sys
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
os.execvp(sys.argv[1], sys.argv[1:])' $PMG run -- $PMEMPROG write \
		"$T/c9" 10 --plain >"$T/out" 2>&1; rc=$?
	check "SIGCHLD ignored by the caller: strict abort still exits 134 ($rc)" \
		[ $rc = 134 ]
	$PY -c 'import os, signal, sys
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
os.execvp(sys.argv[1], sys.argv[1:])' $PMG run -- $PY -c \
		'import signal, sys
sys.exit(3 if signal.getsignal(signal.SIGCHLD) == signal.SIG_IGN else 4)' \
		>"$T/out" 2>&1; rc=$?
	check "SIGCHLD ignored by the caller: PROG's exit 3, and PROG still ignores it ($rc)" \
		[ $rc = 3 ]
else
	skip "SIGCHLD ignored: strict abort" "no $PY"
	skip "SIGCHLD ignored: exit status" "no $PY"
fi

# The start of the Python programs below that drive libpmem through
# ctypes: map argv[1] (1 MiB) with pmem_map_file() and make one stray
# write at its first byte.
PY_PMEM_ONE='import ctypes, os, sys
ctypes.CDLL("libpmem.so.1", mode=ctypes.RTLD_GLOBAL)
pm = ctypes.CDLL(None)
pm.pmem_map_file.restype = ctypes.c_void_p
pm.pmem_map_file.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int,
                             ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p]
a = pm.pmem_map_file(sys.argv[1].encode(), 1 << 20, 1, 0o600, None, None)
ctypes.memmove(a, b"x", 1)
'

# the report file deleted while the run goes on: later reports go to a
# new file at that path, not into the deleted one (Python drives libpmem
# through ctypes: map, stray write, delete the report, stray write)
if [ -x "$PY" ] && $PY -c 'import ctypes; ctypes.CDLL("libpmem.so.1")' \
	2>/dev/null; then
	rm -f "$T/del.pm" "$T/del.rep"
	$PMG run --mode audit --report "$T/del.rep" -- $PY -c "$PY_PMEM_ONE"'os.unlink(sys.argv[2])
ctypes.memmove(a + 4096, b"y", 1)' "$T/del.pm" "$T/del.rep" \
		>"$T/out" 2>&1; rc=$?
	c=$(count 'audit: stray write' "$T/del.rep")
	check "report file deleted while running: the next report in a new file ($c)" \
		sh -c "[ $rc = 0 ] && [ '$c' = 1 ]"
	[ "$c" = 1 ] || diag "$T/out"
	# ... and replaced by a FIFO: neither the reopen (in the fault
	# handler) nor a new process's open of the path may block on it
	rm -f "$T/fifo.pm" "$T/fifo2.rep" "$T/fifo.x"
	timeout 30 $PMG run --mode audit --report "$T/fifo2.rep" -- $PY -c "import subprocess
$PY_PMEM_ONE"'os.unlink(sys.argv[2]); os.mkfifo(sys.argv[2])
ctypes.memmove(a + 4096, b"y", 1)
sys.exit(subprocess.run(sys.argv[3:]).returncode)' "$T/fifo.pm" \
		"$T/fifo2.rep" "$PMEMPROG" write "$T/fifo.x" 10 >"$T/out" 2>&1
	rc=$?
	check "report file replaced by a FIFO: nothing blocks on it (rc $rc)" \
		sh -c "[ $rc = 0 ] && [ -s '$T/fifo.x' ]"
	[ $rc = 0 ] || diag "$T/out"
else
	skip "report file deleted while running" "no $PY with ctypes and libpmem"
	skip "report file replaced by a FIFO" "no $PY with ctypes and libpmem"
fi

# a library constructor of PROG, run before the preload's, closes the
# descriptors it inherited (the confirmation pipe among them): PROG is
# not killed as "did not load" (the library is mapped: it confirmed)
if [ -x "$STOPPROG" ]; then
	STOPINIT=closefds $PMG run -- $STOPPROG >"$T/out" 2>&1; rc=$?
	check "a constructor closes the confirmation pipe: PROG runs (rc $rc)" \
		sh -c "[ $rc = 0 ] && grep -q 'main 1' '$T/out'"
	[ $rc = 0 ] || diag "$T/out"
else
	skip "a constructor closes the confirmation pipe" "no $STOPPROG"
fi

# a daemon: PROG double-forks and ends at once; the daemon protects its
# mapping after that (once pmguard run returned and the test created
# dm.go, whatever the scheduler does).  The end-of-run line must not
# claim flatly that nothing was protected: it says a process left
# running is not counted
if [ -x "$PY" ]; then
	rm -f "$T/dm" "$T/dm.go"
	$PMG run --report "$T/dm.rep" -- $PY -c 'import os, sys, time
if os.fork(): os._exit(0)
os.setsid()
if os.fork(): os._exit(0)
go = os.path.abspath(sys.argv[1])
os.chdir("/")
for i in range(2000):
    if os.path.exists(go): break
    time.sleep(0.01)
os.execv(sys.argv[2], sys.argv[2:])' \
		"$T/dm.go" "$absprog" write "$T/dm" 10 >"$T/out" 2>&1; rc=$?
	: >"$T/dm.go"
	i=0
	while ! grep -q "pmem-prog (pid [0-9]*): pmem_map_file $T/dm: protected" \
		"$T/dm.rep" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	sleep 0.5
	check "daemon left running: the end-of-run line says it is not counted, the daemon protected" \
		sh -c "[ $rc = 0 ] && grep -q 'nothing was protected.*daemon, is not counted' '$T/dm.rep' && \
			grep -q 'pmem-prog (pid [0-9]*): pmem_map_file $T/dm: protected' '$T/dm.rep'"
	diag "$T/dm.rep" | grep -v 'module 0x' | cut -c1-200
else
	skip "daemon left running: end-of-run line" "no $PY"
fi

# learn -o naming a FIFO (or anything not a regular file): refused before
# the program runs, never a learn that hangs at the end opening it
mkfifo "$T/sites.fifo"
rm -f "$T/h8"
timeout 30 $PMG learn -o "$T/sites.fifo" -- $PMEMPROG write "$T/h8" 10 \
	>"$T/out" 2>&1; rc=$?
check "learn -o FIFO: refused before running the program (rc $rc)" \
	sh -c "[ $rc = 2 ] && [ ! -e '$T/h8' ] && grep -q 'sites.fifo' '$T/out'"
[ $rc = 2 ] || diag "$T/out"
# N11 under pmguard run: the program (here the injector) mprotect()s the
# page it then writes read-write; the preload interposes mprotect(), the
# page stays protected, the write is caught (before, on the mprotect
# backend, the write landed: the preload did not export the interposers)
mkdir "$T/q1"
LD_PRELOAD=$WILD WILD_AFTER=50 WILD_MPROTECT=1 $PMG run --report "$T/q1.rep" \
	-- $LMDBPROG write "$T/q1" 50 200 >"$T/out" 2>&1; rc=$?
check "N11: lmdb-prog, wild mprotect(RW) of the map then a write: aborted" \
	sh -c "[ $rc = 134 ] && grep -q 'mprotect(.*RW) done' '$T/out' && \
	grep -q 'strict (aborting): stray write' '$T/q1.rep'"
[ $rc = 134 ] || diag "$T/out" "$T/q1.rep"
$LMDBPROG verify "$T/q1" 10000 >"$T/out" 2>&1
check "N11: lmdb-prog, wild mprotect(RW): all 10000 records intact" [ $? = 0 ]
rm -f "$T/q2"
LD_PRELOAD=$WILD WILD_AFTER=50 WILD_WRITES=4 WILD_MPROTECT=1 $PMG run \
	--report "$T/q2.rep" -- $PMEMPROG write "$T/q2" 100 >"$T/out" 2>&1
rc=$?
check "N11: pmem-prog, wild mprotect(RW) of the mapping then a write: aborted" \
	sh -c "[ $rc = 134 ] && grep -q 'mprotect(.*RW) done' '$T/out' && \
	grep -q \"strict (aborting): stray write.*'pmem:.*q2'\" '$T/q2.rep'"
[ $rc = 134 ] || diag "$T/out" "$T/q2.rep"
$PMEMPROG verify "$T/q2" 50 >"$T/out" 2>&1
check "N11: pmem-prog, wild mprotect(RW): the 50 records written intact" \
	[ $? = 0 ]

# ---- the files pmguard opens on the program's behalf (docs/design.md,
# "Files pmguard opens: threat model"): a symbolic link, a hard link or a
# FIFO put at the path of a report, sites or allow file is never
# followed, written through or waited on.  $T/secret stands for a file
# the user of the run must not have written (root's 0600 file when the
# suite runs as root); its copy proves it unchanged ----
mkdir "$T/sec" "$T/lnk"
printf 'secret line\n' >"$T/sec/secret"
chmod 600 "$T/sec/secret"
cp "$T/sec/secret" "$T/secret.orig"
secret_same() { cmp -s "$T/sec/secret" "$T/secret.orig"; }
absprog=$(cd "$(dirname "$PMEMPROG")" && pwd)/$(basename "$PMEMPROG")
rm -f "$T/lnk/r1.rep" "$T/s1"
# a symbolic link at the report path before the run: refused (exit 2)
ln -s "$T/sec/secret" "$T/lnk/r1.rep"
$PMG run --report "$T/lnk/r1.rep" -- $PMEMPROG write "$T/s1" 10 \
	>"$T/out" 2>&1; rc=$?
check "report FILE a symlink: refused (rc $rc), the target unchanged" \
	sh -c "[ $rc = 2 ] && grep -q 'r1.rep.*symbolic link' '$T/out' && \
	[ ! -e '$T/s1' ] && cmp -s '$T/sec/secret' '$T/secret.orig'"
[ $rc = 2 ] || diag "$T/out"
cp "$T/secret.orig" "$T/sec/secret"
# ... or a hard link to the file (more than one link): refused too
rm -f "$T/lnk/r2.rep" "$T/s2"
if ln "$T/sec/secret" "$T/lnk/r2.rep" 2>/dev/null; then
	$PMG run --report "$T/lnk/r2.rep" -- $PMEMPROG write "$T/s2" 10 \
		>"$T/out" 2>&1; rc=$?
	check "report FILE a hard link: refused (rc $rc), the file unchanged" \
		sh -c "[ $rc = 2 ] && grep -q 'r2.rep.*link' '$T/out' && \
		cmp -s '$T/sec/secret' '$T/secret.orig'"
	[ $rc = 2 ] || diag "$T/out"
	rm -f "$T/lnk/r2.rep"
else
	skip "report FILE a hard link" "cannot hard-link here (fs.protected_hardlinks)"
fi
cp "$T/secret.orig" "$T/sec/secret"
# a symbolic link swapped in while PROG runs: the end-of-run line (PROG
# protects nothing) and a new process's open (pmem-prog's constructor).
# PROG is Python (dynamically linked: the guest's sh is static), which
# swaps the name itself, then execs ARGS if any: swap link|fifo|file
# PATH [TARGET|TEXT] [PROG ARGS...]
SWAP='import os, sys
op, path, a = sys.argv[1], sys.argv[2], sys.argv[3:]
try:
    os.unlink(path)
except FileNotFoundError:
    pass
if op == "link":
    os.symlink(a.pop(0), path)
elif op == "fifo":
    os.mkfifo(path)
else:
    with open(path, "w") as f:
        f.write(a.pop(0))
if a:
    os.execv(a[0], a)'
if [ -x "$PY" ]; then
	rm -f "$T/lnk/r3.rep"
	$PMG run --report "$T/lnk/r3.rep" -- $PY -c "$SWAP" link \
		"$T/lnk/r3.rep" "$T/sec/secret" >"$T/out" 2>&1; rc=$?
	check "symlink swapped in for the report: the end-of-run line not through it (rc $rc)" \
		sh -c "[ $rc = 0 ] && cmp -s '$T/sec/secret' '$T/secret.orig' && \
		grep -q 'r3.rep.*symbolic link' '$T/out' && \
		grep -q 'nothing was protected' '$T/out'"
	secret_same || diag "$T/out"
	cp "$T/secret.orig" "$T/sec/secret"
	rm -f "$T/lnk/r4.rep" "$T/s4"
	$PMG run --mode audit --report "$T/lnk/r4.rep" -- $PY -c "$SWAP" \
		link "$T/lnk/r4.rep" "$T/sec/secret" "$absprog" write "$T/s4" \
		10 --plain >"$T/out" 2>&1; rc=$?
	check "symlink swapped in for the report: a new process does not open it (rc $rc)" \
		sh -c "[ $rc = 0 ] && cmp -s '$T/sec/secret' '$T/secret.orig' && \
		grep -q 'r4.rep.*symbolic link' '$T/out' && \
		grep -q 'audit: stray write' '$T/out'"
	secret_same || diag "$T/out"
	cp "$T/secret.orig" "$T/sec/secret"
else
	skip "symlink swapped in for the report: the end-of-run line" "no $PY"
	skip "symlink swapped in for the report: a new process" "no $PY"
fi
# ... and in the fault path: the report file deleted and a symlink put
# there between two stray writes of one process (the library reopens the
# path): nothing reaches the target, and the process says once, on its
# stderr, that it stopped reporting to the file
if [ -x "$PY" ] && $PY -c 'import ctypes; ctypes.CDLL("libpmem.so.1")' \
	2>/dev/null; then
	rm -f "$T/s5" "$T/lnk/r5.rep"
	$PMG run --mode audit --report "$T/lnk/r5.rep" -- $PY -c "$PY_PMEM_ONE"'os.unlink(sys.argv[2]); os.symlink(sys.argv[3], sys.argv[2])
ctypes.memmove(a + 4096, b"y", 1)
ctypes.memmove(a + 8192, b"z", 1)' "$T/s5" "$T/lnk/r5.rep" "$T/sec/secret" \
		>"$T/out" 2>&1; rc=$?
	c=$(count 'stopped reporting' "$T/out")
	check "symlink swapped in for the report in the fault path: not followed, said once ($c)" \
		sh -c "[ $rc = 0 ] && cmp -s '$T/sec/secret' '$T/secret.orig' && \
		[ '$c' = 1 ] && grep -q 'r5.rep.*symbolic link' '$T/out'"
	secret_same || diag "$T/out"
	cp "$T/secret.orig" "$T/sec/secret"
else
	skip "symlink swapped in for the report in the fault path" \
		"no $PY with ctypes and libpmem"
fi
# a FIFO put at the report path while PROG runs: pmguard run must not
# block at the end writing its end-of-run line
if [ -x "$PY" ]; then
	rm -f "$T/lnk/r6.rep"
	timeout 20 $PMG run --report "$T/lnk/r6.rep" -- $PY -c "$SWAP" fifo \
		"$T/lnk/r6.rep" >"$T/out" 2>&1; rc=$?
	check "FIFO swapped in for the report: pmguard run ends (rc $rc) and says so" \
		sh -c "[ $rc = 0 ] && grep -q 'r6.rep.*not a regular file' '$T/out'"
	[ $rc = 0 ] || diag "$T/out"
else
	skip "FIFO swapped in for the report" "no $PY"
fi
# learn -o a symbolic link, before the run or put there while PROG runs:
# the target is never truncated or written
rm -f "$T/lnk/o1.sites" "$T/s7"
ln -s "$T/sec/secret" "$T/lnk/o1.sites"
$PMG learn -o "$T/lnk/o1.sites" -- $PMEMPROG write "$T/s7" 10 --plain \
	>"$T/out" 2>&1; rc=$?
check "learn -o SYMLINK: refused before the program runs (rc $rc), target untouched" \
	sh -c "[ $rc = 2 ] && [ ! -e '$T/s7' ] && \
	grep -q 'o1.sites.*symbolic link' '$T/out' && \
	cmp -s '$T/sec/secret' '$T/secret.orig'"
[ $rc = 2 ] || diag "$T/out"
cp "$T/secret.orig" "$T/sec/secret"
if [ -x "$PY" ]; then
	rm -f "$T/lnk/o2.sites" "$T/s8"
	$PMG learn -o "$T/lnk/o2.sites" -- $PY -c "$SWAP" link \
		"$T/lnk/o2.sites" "$T/sec/secret" "$absprog" write "$T/s8" 10 \
		--plain >"$T/out" 2>&1; rc=$?
	check "learn -o, a symlink put there while PROG runs: target untouched (rc $rc)" \
		sh -c "[ $rc = 2 ] && cmp -s '$T/sec/secret' '$T/secret.orig' && \
		grep -q 'o2.sites.*symbolic link' '$T/out' && \
		[ -z \"\$(ls -A '$T/lnk' | grep '^\\.o2')\" ]"
	secret_same || diag "$T/out"
	cp "$T/secret.orig" "$T/sec/secret"
else
	skip "learn -o, a symlink put there while PROG runs" "no $PY"
fi
# learn -o over an existing sites file: replaced whole (a new file
# renamed over it, with the old one's permission bits), never truncated
# in place
rm -f "$T/s9"
printf '# old\n' >"$T/lnk/o3.sites"
chmod 640 "$T/lnk/o3.sites"
ln "$T/lnk/o3.sites" "$T/lnk/o3.keep" 2>/dev/null
$PMG learn -o "$T/lnk/o3.sites" -- $PMEMPROG write "$T/s9" 10 --plain \
	>"$T/out" 2>&1; rc=$?
check "learn -o EXISTING: replaced by rename, the old inode untouched (rc $rc)" \
	sh -c "[ $rc = 0 ] && grep -q 'pmem-prog+0x' '$T/lnk/o3.sites' && \
	[ \"\$(stat -c %a '$T/lnk/o3.sites')\" = 640 ] && \
	{ [ ! -e '$T/lnk/o3.keep' ] || [ \"\$(cat '$T/lnk/o3.keep')\" = '# old' ]; }"
[ $rc = 0 ] || diag "$T/out"
# --allow a FIFO, or a symlink: refused before the program runs, never
# a process blocked reading it
rm -f "$T/lnk/a1" "$T/s10"
mkfifo "$T/lnk/a1"
timeout 20 $PMG run --allow "$T/lnk/a1" -- $PMEMPROG write "$T/s10" 10 \
	>"$T/out" 2>&1; rc=$?
check "--allow FIFO: refused (rc $rc), nothing blocks" \
	sh -c "[ $rc = 2 ] && grep -q 'a1.*not a regular file' '$T/out' && \
	[ ! -e '$T/s10' ]"
[ $rc = 2 ] || diag "$T/out"
rm -f "$T/lnk/a2" "$T/s11"
ln -s "$T/sites" "$T/lnk/a2"
$PMG run --allow "$T/lnk/a2" -- $PMEMPROG write "$T/s11" 10 \
	>"$T/out" 2>&1; rc=$?
check "--allow SYMLINK: refused (rc $rc)" \
	sh -c "[ $rc = 2 ] && grep -q 'a2.*symbolic link' '$T/out'"
[ $rc = 2 ] || diag "$T/out"
# the allow file replaced after pmguard run checked it: a process of the
# run refuses the new file (it is not the file checked), never reads it
if [ -x "$PY" ]; then
	rm -f "$T/lnk/a3" "$T/s12"
	cp "$T/sites" "$T/lnk/a3"
	$PMG run --allow "$T/lnk/a3" -- $PY -c "$SWAP" file "$T/lnk/a3" \
		"/x+0x1
" "$absprog" write "$T/s12" 10 >"$T/out" 2>&1; rc=$?
	check "allow file replaced during the run: the process refuses it (rc $rc)" \
		sh -c "[ $rc = 127 ] && grep -q 'a3.*not the file' '$T/out' && \
		[ ! -e '$T/s12' ]"
	[ $rc = 127 ] || diag "$T/out"
else
	skip "allow file replaced during the run" "no $PY"
fi

# PROG a FIFO with execute bits: pmguard run reads PROG's header to see
# whether ld.so would take the preload; that read must not wait on it
rm -f "$T/lnk/p1"
mkfifo -m 755 "$T/lnk/p1"
timeout 20 $PMG run -- "$T/lnk/p1" >"$T/out" 2>&1; rc=$?
check "PROG a FIFO: refused, never waited on (rc $rc)" \
	sh -c "[ $rc = 127 ] && grep -q 'p1' '$T/out'"
[ $rc = 127 ] || diag "$T/out"

# a program whose path holds a blank: learn records its site, and the
# allow file it writes lets the --allow run pass
mkdir "$T/x y"
cp "$PMEMPROG" "$T/x y/pmem prog"
rm -f "$T/b1"
$PMG learn -o "$T/b.sites" -- "$T/x y/pmem prog" write "$T/b1" 100 --plain \
	>"$T/out" 2>&1; rc=$?
check "learn, a program path with blanks: exit 0, one site recorded" \
	sh -c "[ $rc = 0 ] && [ \$(grep -vc '^#' '$T/b.sites') = 1 ] && \
	grep -q 'pmem\\\\040prog+0x[0-9a-f]* 1 ' '$T/b.sites'"
diag "$T/b.sites"
rm -f "$T/b1"
$PMG run --allow "$T/b.sites" --report "$T/b1.rep" -- "$T/x y/pmem prog" \
	write "$T/b1" 100 --plain >"$T/out" 2>&1; rc=$?
$PMEMPROG verify "$T/b1" 100 >>"$T/out" 2>&1; vrc=$?
check "run --allow, a program path with blanks: the learned store passes (rc $rc)" \
	sh -c "[ $rc = 0 ] && [ $vrc = 0 ] && ! grep -q stray '$T/b1.rep' && \
	grep -q '1 write(s) let through' '$T/b1.rep'"
[ $rc = 0 ] || diag "$T/out" "$T/b1.rep"

# ---- partial unmaps and kernel writes into a write window (docs/run.md,
# "Unmapping part of a mapping; read(2) into it") ----
# pmem_unmap() of part of a pmem_map_file() mapping: the rest stays
# protected (the registry splits the range); a plain store into it aborts,
# the report names its address, every mark is intact
for part in first second middle; do
	what="$part half"
	rm -f "$T/pu" "$T/pu.rep"
	$PMG run --report "$T/pu.rep" -- $PMEMPROG unmap "$T/pu" $part \
		>"$T/out" 2>&1; rc=$?
	at=$(sed -n 's/^pmem-prog: stray at \(0x[0-9a-f]*\)$/\1/p' "$T/out")
	check "pmem_unmap() of the $what of a mapping: a stray store into the rest aborts, reported at its address" \
		sh -c "[ $rc = 134 ] && [ -n '$at' ] && \
		grep -q \"strict (aborting): stray write to $at .*'pmem:.*/pu'\" '$T/pu.rep'"
	[ $rc = 134 ] || diag "$T/out" "$T/pu.rep"
	$PMEMPROG marks "$T/pu" >"$T/out" 2>&1; rc=$?
	check "pmem_unmap() of the $what: every mark intact after the abort" \
		[ $rc = 0 ]
	[ $rc = 0 ] || diag "$T/out"
done
rm -f "$T/pu" "$T/pu.rep"
$PMG run --report "$T/pu.rep" -- $PMEMPROG unmap "$T/pu" halves \
	>"$T/out" 2>&1; rc=$?
check "pmem_unmap() of a mapping's first half, then its second: runs to the end, nothing reported" \
	sh -c "[ $rc = 0 ] && ! grep -q 'stray\\|away from pmguard\\|cannot\\|not protected' '$T/pu.rep'"
[ $rc = 0 ] || diag "$T/out" "$T/pu.rep"
# munmap() of part of a pmem2 mapping and of an LMDB map (the programs'
# own): the rest stays protected
PMEM2PROG=${PMEM2PROG:-$O/tests/run/pmem2-prog}
rm -f "$T/pu2" "$T/pu2.rep"
$PMEMPROG write "$T/pu2" 10 >/dev/null 2>&1
$PMG run --report "$T/pu2.rep" -- $PMEM2PROG "$T/pu2" 10 --unmap-half \
	>"$T/out" 2>&1; rc=$?
at=$(sed -n 's/^pmem2-prog: stray at \(0x[0-9a-f]*\)$/\1/p' "$T/out")
check "munmap() of a pmem2 mapping's second half: a stray store into the first aborts, reported at its address" \
	sh -c "[ $rc = 134 ] && [ -n '$at' ] && \
	grep -q \"strict (aborting): stray write to $at .*'pmem2:0x\" '$T/pu2.rep'"
[ $rc = 134 ] || diag "$T/out" "$T/pu2.rep"
$PMEMPROG verify "$T/pu2" 10 >"$T/out" 2>&1
check "munmap() of a pmem2 mapping's second half: its 10 records intact" \
	[ $? = 0 ]
if [ ! -x "$LMDBPROG" ]; then
	skip "lmdb-prog unmap: munmap() of half the LMDB map" "no $LMDBPROG"
else
	mkdir "$T/lu"
	$PMG run --report "$T/lu.rep" -- $LMDBPROG unmap "$T/lu" \
		>"$T/out" 2>&1; rc=$?
	at=$(sed -n 's/^lmdb-prog: stray at \(0x[0-9a-f]*\)$/\1/p' "$T/out")
	check "munmap() of the LMDB map's second half: a stray store into a record in the first aborts, reported at its address" \
		sh -c "[ $rc = 134 ] && [ -n '$at' ] && \
		grep -q \"strict (aborting): stray write to $at .*'lmdb:.*/lu'\" '$T/lu.rep'"
	[ $rc = 134 ] || diag "$T/out" "$T/lu.rep"
	$LMDBPROG verify "$T/lu" 10 >"$T/out" 2>&1
	check "munmap() of the LMDB map's second half: its 10 records intact" \
		[ $? = 0 ]
fi
# MDB_RESERVE filled by one read(2) inside the write transaction (lazy
# windows on the mprotect backend, keys on PKU): full length, data right
if [ ! -x "$LMDBPROG" ]; then
	skip "lmdb-prog reserve: read(2) into MDB_RESERVE" "no $LMDBPROG"
else
	mkdir "$T/rs"
	head -c 3145728 /dev/urandom >"$T/rs.in"
	$PMG run --report "$T/rs.rep" -- $LMDBPROG reserve "$T/rs" "$T/rs.in" \
		>"$T/out" 2>&1; rc=$?
	check "lmdb-prog: MDB_RESERVE of 3 MiB filled by one read(2): 3145728 bytes read, value intact" \
		sh -c "[ $rc = 0 ] && grep -q 'read 3145728 of 3145728 bytes' '$T/out' && \
		grep -q 'reserved value intact' '$T/out'"
	[ $rc = 0 ] || diag "$T/out" "$T/rs.rep"
fi

# ---- learn: program paths with any blank or non-ASCII byte; the mode of
# the allow list learn -o writes and run --allow accepts
# a PROG under a directory whose name holds \v, \f, \r or a non-ASCII
# byte: learn records its one site as one word, and run --allow with that
# list lets the write through (nothing stray)
for c in '\013' '\014' '\015' '\303\251'; do
	d="$T/lp/x$(printf "$c")y" lbl=$(printf '%s' "$c" | tr '\\' ' ')
	mkdir -p "$d" && cp "$PMEMPROG" "$d/prog"
	rm -f "$T/lp.b" "$T/lp.sites" "$T/lp.rep"
	$PMG learn -o "$T/lp.sites" -- "$d/prog" write "$T/lp.b" 100 --plain \
		>"$T/out" 2>&1; rc=$?
	check "learn: PROG's directory holds byte(s)$lbl (octal): 1 site recorded, its path escaped as \\ooo" \
		sh -c "[ $rc = 0 ] && grep -q '1 site(s) written' '$T/out' && \
		grep -q '^[^#].*/x\\\\[0-7][0-7][0-7].*y/prog+0x' '$T/lp.sites'"
	[ $rc = 0 ] || diag "$T/out"
	rm -f "$T/lp.b"
	$PMG run --allow "$T/lp.sites" --report "$T/lp.rep" -- "$d/prog" \
		write "$T/lp.b" 100 --plain >"$T/out" 2>&1; rc=$?
	check "run --allow with that list: PROG in that directory runs through, nothing stray" \
		sh -c "[ $rc = 0 ] && ! grep -q stray '$T/lp.rep'"
	[ $rc = 0 ] || diag "$T/out" "$T/lp.rep"
done
rm -rf "$T/lp" "$T/lp.b" "$T/lp.sites" "$T/lp.rep"
# an allow list writable by group or others is refused, whoever owns it
printf '# pmguard learn: 0 site(s)\n' >"$T/gw.sites"
for m in 0664 0646; do
	chmod $m "$T/gw.sites"
	rm -f "$T/gw.b"
	$PMG run --allow "$T/gw.sites" -- $PMEMPROG write "$T/gw.b" 10 --plain \
		>"$T/out" 2>&1; rc=$?
	check "run --allow of a list of mode $m (writable by another user): refused before PROG ran" \
		sh -c "[ $rc = 2 ] && [ ! -e '$T/gw.b' ] && \
		grep -q 'writable by .*mode $m.*refused' '$T/out'"
	[ $rc = 2 ] || diag "$T/out"
done
rm -f "$T/gw.sites" "$T/gw.b"
# root's learn -o over a list another user put, mode 0666, in a sticky
# directory: the new list is root's, not writable by that user, and
# run --allow takes it; a list of root's own keeps its bits less
# group's and others' write
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
	mkdir -p "$T/st" && chmod 1777 "$T/st" && chmod 711 "$T"
	setpriv --reuid=65534 --regid=65534 --clear-groups sh -c \
		"umask 0; printf '' >'$T/st/app.sites'; chmod 0666 '$T/st/app.sites'"
	$PMG learn -o "$T/st/app.sites" -- $PMEMPROG write "$T/st/p1" 100 \
		--plain >"$T/out" 2>&1; rc=$?
	mode=$(stat -c '%u %a' "$T/st/app.sites")
	check "root's learn -o over another user's 0666 list: root's, mode 644 (was '$mode')" \
		sh -c "[ $rc = 0 ] && [ '$mode' = '0 644' ]"
	[ $rc = 0 ] || diag "$T/out"
	setpriv --reuid=65534 --regid=65534 --clear-groups sh -c \
		"echo '# edited' >>'$T/st/app.sites'" 2>/dev/null
	check "that user cannot append to root's new list" \
		sh -c "! grep -q edited '$T/st/app.sites'"
	rm -f "$T/st/p1"
	$PMG run --allow "$T/st/app.sites" -- $PMEMPROG write "$T/st/p1" 100 \
		--plain >"$T/out" 2>&1; rc=$?
	check "root's run --allow with the new list: PROG runs through" \
		[ $rc = 0 ]
	[ $rc = 0 ] || diag "$T/out"
	chmod 0660 "$T/st/app.sites"
	$PMG learn -o "$T/st/app.sites" -- $PMEMPROG write "$T/st/p1" 100 \
		--plain >"$T/out" 2>&1; rc=$?
	mode=$(stat -c '%u %a' "$T/st/app.sites")
	check "root's learn -o over its own 0660 list: mode 640 (was '$mode')" \
		sh -c "[ $rc = 0 ] && [ '$mode' = '0 640' ]"
	rm -rf "$T/st"
else
	skip "root's learn -o over another user's 0666 list: mode 644" \
		"not root (setpriv to another user)"
	skip "that user cannot append to root's new list" "not root"
	skip "root's run --allow with the new list" "not root"
	skip "root's learn -o over its own 0660 list: mode 640" "not root"
fi
# ---- pmem_unmap() of length 0 (docs/run.md, "Unmapping part of a
# mapping; read(2) into it") ----
# the real call fails with EINVAL and unmaps nothing: the mapping stays
# protected, a stray store into it aborts, every mark intact
rm -f "$T/pz" "$T/pz.rep"
$PMG run --mode strict --report "$T/pz.rep" -- $PMEMPROG unmap "$T/pz" zero \
	>"$T/out" 2>&1; rc=$?
at=$(sed -n 's/^pmem-prog: stray at \(0x[0-9a-f]*\)$/\1/p' "$T/out")
check "pmem_unmap(p, 0): EINVAL, a stray store into the mapping still aborts, reported at its address" \
	sh -c "[ $rc = 134 ] && [ -n '$at' ] && \
	grep -q 'pmem_unmap(p, 0) = -1 errno 22' '$T/out' && \
	grep -q \"strict (aborting): stray write to $at \" '$T/pz.rep'"
[ $rc = 134 ] || diag "$T/out" "$T/pz.rep"
$PMEMPROG marks "$T/pz" >"$T/out" 2>&1
check "pmem_unmap(p, 0): every mark intact after the abort" [ $? = 0 ]

echo "1..$n"
echo "# $((n - failed)) passed, $failed failed"
[ $failed = 0 ]
