#!/bin/sh
# SPDX-License-Identifier: MIT
#
# test-rust.sh [BUILD_DIR] - a Rust program on Debian's lmdb crate
# (librust-lmdb-dev: lmdb 0.8 over lmdb-sys, which links the system's
# liblmdb through pkg-config) under `pmguard run` (docs/run.md).
# tests/run/lmdb-rust is built OFFLINE from Debian's packaged crates
# (/usr/share/cargo/registry as a directory source) into
# BUILD_DIR/tests/run/lmdb-rust (never the source tree) by
# tests/run/build-rust.sh, with the cargo in PATH (rustup's or Debian's;
# CARGO names another, RUSTC its rustc).  Rust's std
# installs its SIGSEGV/SIGBUS handlers (stack overflow) only where the
# handler is SIG_DFL: it leaves the preload's in place.  The wild-write
# cases of tests/run/runtime-lib.sh and the run/plain bench line.  TAP.
# Without cargo or the crates: SKIP (exit 77), a failure with CI=true.
# RUSTPROG: a lmdb-rust binary built already (the guest's).
set -u
O=${1:-build}
. "$(dirname "$0")/runtime-lib.sh"
REG=${CARGO_REGISTRY_DIR:-/usr/share/cargo/registry}
CARGO=${CARGO:-$(command -v cargo || echo /usr/bin/cargo)}
LMDBPROG=${LMDBPROG:-$O/tests/run/lmdb-prog}
if [ -n "${RUSTPROG:-}" ]; then
	rt_start rust "RUSTPROG" "$RUSTPROG"
else
	rt_start rust "scripts/install-deps: cargo, librust-lmdb-dev" \
		"$CARGO" "$REG/lmdb-0.8.0/Cargo.toml"
	RUSTPROG=$(CARGO=$CARGO CARGO_REGISTRY_DIR=$REG \
		"$(dirname "$0")/build-rust.sh" "$O" 2>"$T/build")
	rc=$?
	check "lmdb-rust builds offline from $REG ($("$CARGO" --version 2>/dev/null))" \
		sh -c "[ $rc = 0 ] && [ -x '$RUSTPROG' ]"
	if [ $rc != 0 ]; then
		diag "$T/build" | tail -15
		finish
		exit 1
	fi
	check "lmdb-rust links the system's liblmdb (interposable)" \
		sh -c "ldd '$RUSTPROG' | grep -q 'liblmdb.so.0 => /'"
fi
RECS=10000
w() { echo "$RUSTPROG write $1 ${2:-50} ${3:-200}"; }
v() { "$RUSTPROG" verify "$1" $RECS; }

# AFTER 51: the lmdb crate commits a transaction of its own in
# open_db() before the program's 50
rt_lmdb_cases rust 51
rt_cross rust
rt_bench rust 3 200 1000
finish
