#!/bin/sh
# SPDX-License-Identifier: MIT
#
# test-rust.sh [BUILD_DIR] - a Rust program on Debian's lmdb crate
# (librust-lmdb-dev: lmdb 0.8 over lmdb-sys, which links the system's
# liblmdb through pkg-config) under `pmguard run` (docs/run.md).
# tests/run/lmdb-rust is built OFFLINE from Debian's packaged crates
# (/usr/share/cargo/registry as a directory source) into
# BUILD_DIR/tests/run/lmdb-rust (never the source tree), with the cargo
# in PATH (rustup's or Debian's; CARGO names another, RUSTC its rustc).  Rust's std
# installs its SIGSEGV/SIGBUS handlers (stack overflow) only where the
# handler is SIG_DFL: it leaves the preload's in place.  The wild-write
# cases of tests/run/runtime-lib.sh and the run/plain bench line.  TAP.
# Without cargo or the crates: SKIP (exit 77), a failure with CI=true.
# RUSTPROG: a lmdb-rust binary built already (the guest's).
set -u
O=${1:-build}
. "$(dirname "$0")/runtime-lib.sh"
SRC=$(cd "$(dirname "$0")" && pwd)/lmdb-rust
REG=${CARGO_REGISTRY_DIR:-/usr/share/cargo/registry}
CARGO=${CARGO:-$(command -v cargo || echo /usr/bin/cargo)}
LMDBPROG=${LMDBPROG:-$O/tests/run/lmdb-prog}
if [ -n "${RUSTPROG:-}" ]; then
	rt_start rust "RUSTPROG" "$RUSTPROG"
else
	rt_start rust "scripts/install-deps: cargo, librust-lmdb-dev" \
		"$CARGO" "$REG/lmdb-0.8.0/Cargo.toml"
	case $O in /*) B=$O ;; *) B=$(pwd)/$O ;; esac
	B=$B/tests/run/lmdb-rust
	mkdir -p "$B/.cargo" "$B/src"
	cat >"$B/.cargo/config.toml" <<EOC
[source.crates-io]
replace-with = "debian"
[source.debian]
directory = "$REG"
EOC
	# a lock file of another cargo (rustup's, Debian's) may be in a
	# format this one cannot read: resolved again, offline
	rm -f "$B/Cargo.lock"
	cp "$SRC/Cargo.toml" "$B/"
	cp "$SRC/src/main.rs" "$B/src/"
	(cd "$B" && CARGO_HOME=$B/.cargo CARGO_TARGET_DIR=$B/target \
		nice -n 10 "$CARGO" build --offline --release) >"$T/build" 2>&1
	rc=$?
	RUSTPROG=$B/target/release/lmdb-rust
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
w() { echo "$RUSTPROG write $1 50 200"; }
v() { "$RUSTPROG" verify "$1" $RECS; }

# AFTER 51: the lmdb crate commits a transaction of its own in
# open_db() before the program's 50
rt_lmdb_cases rust 51
if [ -x "$LMDBPROG" ]; then
	$LMDBPROG verify "$T/rust-contain" $RECS >"$T/out" 2>&1
	check "lmdb-prog reads the records Rust wrote under pmguard run (contain)" [ $? = 0 ]
fi
rt_bench rust 3
finish
