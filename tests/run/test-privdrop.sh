#!/bin/sh
# SPDX-License-Identifier: MIT
#
# test-privdrop.sh [BUILD_DIR] - `pmguard run` and `pmguard learn` on a
# daemon started as root that runs as its own user (tests/run/lmdb-daemon.c
# --drop: setgroups, setgid, setuid to nobody, then the LMDB environment
# opened and a stray write made), in a chroot, after closing every
# descriptor, and through a program it runs after the drop: the status,
# learn and report channels (src/run/common.c) still reach pmguard.  Root
# only (SKIP otherwise; a failure with CI=true).  TAP.
# Paths: PMG, DAEMON (lmdb-daemon), LMDBPROG, RUNLIB (libpmguard-run.so).
set -u
O=${1:-build}
PMG=${PMG:-$O/pmguard}
DAEMON=${DAEMON:-$O/tests/run/lmdb-daemon}
LMDBPROG=${LMDBPROG:-$O/tests/run/lmdb-prog}
RUNLIB=${RUNLIB:-$O/libpmguard-run.so}
for v in PMG DAEMON LMDBPROG RUNLIB; do
	eval "p=\$$v"
	case $p in /*) ;; *) eval "$v=\$(pwd)/\$p" ;; esac
done

echo "TAP version 13"
if [ "$(id -u)" != 0 ]; then
	echo "1..0 # SKIP not root: the daemon must start as root to drop privileges"
	[ "${CI:-}" = true ] && exit 1
	exit 77
fi

n=0 failed=0
T=$(mktemp -d "${TMPDIR:-/tmp}/pmg-priv.XXXXXX") || exit 1
trap '[ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
ok() { n=$((n + 1)); echo "ok $n $1"; }
skip() { n=$((n + 1)); echo "ok $n $1 # SKIP $2"; }
nok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n $1"; }
check() {
	name=$1; shift
	if "$@"; then ok "$name"; else nok "$name"; fi
}
diag() { sed 's/^/# /' "$@" 2>/dev/null | grep -v 'module 0x' | head -30; }
count() { grep -c -- "$1" "$2" 2>/dev/null; }

# Everything the dropped user must reach, under a directory all may
# search: a build tree under root's 0700 home cannot be loaded after the
# drop, whatever pmguard does (an installed one, /usr/lib/pmguard/, can).
chmod 755 "$T"
mkdir "$T/lib" "$T/bin"
cp "$RUNLIB" "$T/lib/libpmguard-run.so"
cp "$DAEMON" "$T/bin/lmdb-daemon"
chmod 755 "$T/lib" "$T/bin" "$T/lib/libpmguard-run.so" "$T/bin/lmdb-daemon"
LIB=$T/lib/libpmguard-run.so
D=$T/bin/lmdb-daemon

# fresh DIR: an empty environment directory the daemon's user owns; the
# log, writable by it (a program it runs opens the log by path)
fresh() {
	rm -rf "$1" "$T/v.log" "$T/v.rep" "$T/v.sites"
	mkdir -p "$1" && chown 65534:65534 "$1"
	: >"$T/v.log" && chmod 666 "$T/v.log"
}
# sites FILE: the N of pmguard learn's "N site(s)" line in FILE
sites() { sed -n 's/.*pmguard learn: \([0-9]*\) site(s).*/\1/p' "$1" | tail -1; }
nothing() { [ "$(count 'nothing was protected' "$1")" != 0 ]; }

# variant NAME DIR SHOWN ARGS...: the daemon at DIR (a path in its root:
# SHOWN, the name the report gives it) with ARGS, under pmguard learn,
# then pmguard run (strict) with a report file; each run through $RUNNER
# (a command word, or empty)
RUNNER=
variant() {
	name=$1 dir=$2 shown=$3
	shift 3
	fresh "$dir"
	$RUNNER "$PMG" learn --lib "$LIB" -o "$T/v.sites" -- "$D" "$shown" \
		"$T/v.log" "$@" >"$T/out" 2>&1; rc=$?
	s=$(sites "$T/out")
	if [ $rc = 0 ] && [ "${s:-0}" -gt 0 ] && ! nothing "$T/out" &&
		grep -q "^$D+0x[0-9a-f]* [1-9]" "$T/v.sites"; then
		ok "$name: pmguard learn records the stray store ($s site(s))"
	else
		nok "$name: pmguard learn records the stray store (rc $rc, '${s:-}' site(s))"
		diag "$T/out" "$T/v.log" "$T/v.sites"
	fi
	fresh "$dir"
	$RUNNER "$PMG" run --lib "$LIB" --report "$T/v.rep" -- "$D" "$shown" \
		"$T/v.log" "$@" >"$T/out" 2>&1; rc=$?
	if [ $rc = 134 ] && ! nothing "$T/out" && ! nothing "$T/v.rep" &&
		grep -q "lmdb-daemon (pid [0-9]*): LMDB environment $shown: protected" "$T/v.rep" &&
		grep -q "strict (aborting): stray write to 0x[0-9a-f]* in domain 'lmdb:" "$T/v.rep"; then
		ok "$name: pmguard run: protected, not 'nothing was protected'; the stray write aborts (134), in the report file"
	else
		nok "$name: pmguard run: protected, the stray write in the report file (rc $rc)"
		diag "$T/out" "$T/v.rep" "$T/v.log"
	fi
	"$LMDBPROG" verify "$dir" any >"$T/out" 2>&1
	check "$name: the records intact ($(cat "$T/out"))" [ $? = 0 ]
}

# ---- the daemon drops to nobody, then opens its environment ----
variant "drop" "$T/v" "$T/v" --drop --once
# ---- in a chroot (the launcher's files are not in it, nor is /proc:
# the environment is opened before, as servers open their data, the
# stray write made after) ----
mkdir -p "$T/root"
variant "chroot, drop" "$T/v" "$T/v" --open-early --chroot "$T/root" \
	--drop --once
# ---- a chroot with /proc in it (bound in a mount namespace of the
# run's own), the environment opened in it after the drop ----
withproc() {
	unshare -m sh -c 'mount --bind /proc "$0/proc" && exec "$@"' \
		"$T/root" "$@"
}
mkdir -p "$T/root/proc" "$T/root/db"
if withproc true 2>/dev/null; then
	RUNNER=withproc
	variant "chroot with /proc, drop, then open" "$T/root/db" "/db" \
		--chroot "$T/root" --drop --once
	RUNNER=
else
	for w in "pmguard learn records the stray store" \
		"pmguard run: protected" "the records intact"; do
		skip "chroot with /proc, drop, then open: $w" \
			"cannot bind /proc in a mount namespace here (unshare -m)"
	done
fi
# ---- every descriptor from 3 up closed first, as daemons do ----
variant "fds closed, drop" "$T/v" "$T/v" --close-fds --drop --once
# ---- a program the daemon runs after the drop (fork, exec) ----
variant "drop, exec" "$T/v" "$T/v" --drop --exec-once
variant "fds closed, drop, exec" "$T/v" "$T/v" --close-fds --drop --exec-once

# ---- descriptors closed after the drop: the files cannot be opened
# again, the program the daemon runs has no descriptor; it tells pmguard
# run through its socket (an abstract address), and pmguard learn says
# that its sites are missing ----
fresh "$T/v"
"$PMG" run --lib "$LIB" --report "$T/v.rep" -- "$D" "$T/v" "$T/v.log" \
	--drop --close-late --exec-once >"$T/out" 2>&1; rc=$?
check "fds closed after the drop, exec: pmguard run told through the socket (not nothing, not unknown)" \
	sh -c "[ $rc = 134 ] && grep -q 'strict (aborting): stray write' '$T/out' && \
	! grep -q 'nothing was protected\|unknown whether\|cannot tell pmguard' '$T/out' '$T/v.rep'"
[ $rc = 134 ] || diag "$T/out" "$T/v.rep"
fresh "$T/v"
"$PMG" learn --lib "$LIB" -o "$T/v.sites" -- "$D" "$T/v" "$T/v.log" \
	--drop --close-late --exec-once >"$T/out" 2>&1; rc=$?
check "fds closed after the drop, exec: pmguard learn warns that the list may lack sites" \
	sh -c "[ $rc = 0 ] && grep -q 'pmguard learn: warning: $T/v.sites may lack sites: lmdb-daemon (pid [0-9]*): ' '$T/out' && \
	! grep -q 'nothing was protected' '$T/out'"
[ $rc = 0 ] || diag "$T/out"

# ---- the daemon puts its log at the numbers of pmguard's descriptors
# (dup2) after the drop, then runs a program: nothing of pmguard's lands
# in the log, the program tells pmguard through the socket ----
fresh "$T/v"
"$PMG" run --lib "$LIB" --report "$T/v.rep" -- "$D" "$T/v" "$T/v.log" \
	--drop --dup2-over --exec-once >"$T/out" 2>&1; rc=$?
over=$(grep -c '^log at' "$T/v.log")
others=$(grep -cv -e '^dropped to ' -e '^log at ' -e '^ready ' -e '^wild$' \
	-e '^child rc ' "$T/v.log")
check "log dup2()ed over pmguard's 2 descriptors (status, report), exec: only the daemon's lines in the log ($others others); told through the socket" \
	sh -c "[ $rc = 134 ] && [ '$over' = 2 ] && [ '$others' = 0 ] && \
	grep -q 'strict (aborting): stray write' '$T/out' && \
	! grep -q 'nothing was protected\|unknown whether' '$T/out' '$T/v.rep'"
[ $rc = 134 ] && [ "$over" = 2 ] || diag "$T/out" "$T/v.log"

# ---- the same in a network namespace of its own (the socket out of
# reach): "unknown" with the reason, never "nothing" (the end-of-run line
# goes to the report file) ----
fresh "$T/v"
"$PMG" run --lib "$LIB" --report "$T/v.rep" -- "$D" "$T/v" "$T/v.log" \
	--netns --drop --close-late --exec-once >"$T/out" 2>&1; rc=$?
unknown() {
	[ $rc = 134 ] && ! nothing "$T/out" && ! nothing "$T/v.rep" &&
		grep -q 'pmguard run: unknown whether anything was protected: lmdb-daemon (pid [0-9]*): a child process was forked after the program closed' "$T/v.rep"
}
if [ $rc = 3 ]; then
	skip "fds closed after the drop, exec, own network namespace: unknown" \
		"unshare(CLONE_NEWNET) refused here"
	skip "fds closed after the drop, exec, own network namespace: the child says it" \
		"unshare(CLONE_NEWNET) refused here"
else
	check "fds closed after the drop, exec, own network namespace: pmguard run says unknown, with the reason, not nothing" \
		unknown
	unknown || diag "$T/out" "$T/v.rep"
	check "fds closed after the drop, exec, own network namespace: the child says on stderr that it cannot tell pmguard" \
		grep -q 'PMGUARD_RUN_STATUS: descriptor [0-9]* is closed or another file.*protected something, and pmguard cannot be told' "$T/out"
fi

# ---- malformed channel variables: the library refuses to run the
# program (exit 127), naming the variable and its value ----
bad() {
	env "$@" LD_PRELOAD="$LIB" /bin/true >"$T/out" 2>&1; r=$?
	[ $r = 127 ] && grep -q "pmguard-run: ${1%%=*}='${1#*=}' is not valid: expected $EXPECT" "$T/out"
}
EXPECT="NAME:SECRET"
check "PMGUARD_RUN_STATUS_SOCK without its secret: refused, named" \
	bad PMGUARD_RUN_STATUS_SOCK=pmguard-run.x
EXPECT="\[FD:\]/PATH:DEV:INO"
check "PMGUARD_RUN_STATUS with a bad descriptor number: refused, named" \
	bad PMGUARD_RUN_STATUS=3x:/proc/1/fd/3:1:2
EXPECT="FD:DEV:INO"
check "PMGUARD_RUN_REPORT_FD not FD:DEV:INO: refused, named" \
	bad PMGUARD_RUN_REPORT_FD=x:1:2 PMGUARD_RUN_REPORT="$T/b.rep"

# ---- root runs a library others cannot reach: warned ----
mkdir -m 700 "$T/priv"
cp "$RUNLIB" "$T/priv/libpmguard-run.so"
"$PMG" run --lib "$T/priv/libpmguard-run.so" -- /bin/true >"$T/out" 2>&1
check "root, library under a 0700 directory: pmguard run warns" \
	grep -q "warning: the interposition library $T/priv/libpmguard-run.so is under $T/priv, which other users cannot search (mode 0700)" "$T/out"
"$PMG" run --lib "$LIB" -- /bin/true >"$T/out" 2>&1
check "root, library all may reach: no warning" \
	sh -c "! grep -q 'warning: the interposition library' '$T/out'"

echo "1..$n"
echo "# $((n - failed)) passed, $failed failed"
[ $failed = 0 ]
