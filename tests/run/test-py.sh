#!/bin/sh
# SPDX-License-Identifier: MIT
#
# test-py.sh [BUILD_DIR] - Python with -X faulthandler and py-lmdb
# (Debian's python3-lmdb, on the system's liblmdb) under `pmguard run`
# (docs/run.md).  faulthandler installs its SIGSEGV, SIGBUS, SIGILL,
# SIGFPE and SIGABRT handlers at start-up, after the preload installed
# its own: the protection must survive that.  tests/run/lmdb-script.py
# writes 10,000 records in 50 write transactions with writemap=True; the
# wild-write cases of tests/run/runtime-lib.sh and the run/plain bench
# line.  TAP.  Without python3-lmdb: SKIP (exit 77), a failure with
# CI=true.  PY: the interpreter (Debian's, where py-lmdb is).
set -u
O=${1:-build}
. "$(dirname "$0")/runtime-lib.sh"
PY=${PY:-/usr/bin/python3}
SCRIPT=${SCRIPT:-$(cd "$(dirname "$0")" && pwd)/lmdb-script.py}
LMDBPROG=${LMDBPROG:-$O/tests/run/lmdb-prog}
rt_start py "scripts/install-deps: python3-lmdb" "$PY" "$SCRIPT"
rt_need "no lmdb module for $PY (python3-lmdb)" $PY -c 'import lmdb'
RECS=10000
w() { echo "$PY -X faulthandler $SCRIPT write $1 ${2:-50} ${3:-200}"; }
v() { $PY "$SCRIPT" verify "$1" $RECS; }

# faulthandler's handler is in place in the program under pmguard run
$PMG run -- $PY -X faulthandler -c 'import faulthandler, sys
sys.exit(0 if faulthandler.is_enabled() else 1)' >"$T/out" 2>&1
check "python3 -X faulthandler under pmguard run: faulthandler enabled" [ $? = 0 ]
# a real crash of the program's own is still faulthandler's to report
# (faulthandler._sigsegv(): CPython's own test of it, a NULL read)
$PMG run -- $PY -X faulthandler -c 'import faulthandler; faulthandler._sigsegv()' \
	>"$T/out" 2>&1
rc=$?
check "python3 -X faulthandler under pmguard run: a crash of its own still gets faulthandler's traceback, SIGSEGV (rc $rc)" \
	sh -c "[ $rc = 139 ] && grep -q 'Fatal Python error: Segmentation fault' '$T/out'"

# AFTER 51: py-lmdb's lmdb.open() commits a transaction of its own
# before the script's 50
rt_lmdb_cases py-faulthandler 51
rt_cross py-faulthandler
rt_bench py-faulthandler 3 200 1000
finish
