#!/bin/sh
# SPDX-License-Identifier: MIT
#
# build-rust.sh [BUILD_DIR] - build tests/run/lmdb-rust OFFLINE from
# Debian's packaged crates (CARGO_REGISTRY_DIR, default
# /usr/share/cargo/registry, as a directory source replacing crates.io)
# in BUILD_DIR/tests/run/lmdb-rust, never in the source tree; print the
# binary's path.  CARGO: the cargo (default: the one in PATH).  Used by
# tests/run/test-rust.sh and guest/vm-run-check.  Exit 0 built, 1 not
# (cargo's messages on stderr).
set -u
O=${1:-build}
SRC=$(cd "$(dirname "$0")" && pwd)/lmdb-rust
REG=${CARGO_REGISTRY_DIR:-/usr/share/cargo/registry}
CARGO=${CARGO:-$(command -v cargo || echo /usr/bin/cargo)}
case $O in /*) B=$O ;; *) B=$(pwd)/$O ;; esac
B=$B/tests/run/lmdb-rust
mkdir -p "$B/.cargo" "$B/src" || exit 1
cat >"$B/.cargo/config.toml" <<EOC
[source.crates-io]
replace-with = "debian"
[source.debian]
directory = "$REG"
EOC
# a lock file of another cargo (rustup's, Debian's) may be in a format
# this one cannot read: resolved again, offline
rm -f "$B/Cargo.lock"
cp "$SRC/Cargo.toml" "$B/" && cp "$SRC/src/main.rs" "$B/src/" || exit 1
(cd "$B" && CARGO_HOME=$B/.cargo CARGO_TARGET_DIR=$B/target \
	nice -n 10 "$CARGO" build --offline --release) >&2 || exit 1
[ -x "$B/target/release/lmdb-rust" ] || exit 1
echo "$B/target/release/lmdb-rust"
