#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# test-install.sh - `make install` and `make uninstall` as a packager and a
# user see them (run by `make install-check`; TAP on stdout).
#
#   1. make install DESTDIR=$tmp/dest prefix=/usr: every file where it
#      belongs, with its mode; the soname and dev links; the soname in the
#      library; the header as in the tree; the man pages and their
#      section-3 alias links.
#   2. pkg-config on the installed libpmguard.pc, relocated into the DESTDIR
#      both ways (--define-prefix, PKG_CONFIG_SYSROOT_DIR).
#   3. tests/install/prog.c built with nothing but those flags and run:
#      shared (LD_LIBRARY_PATH into the DESTDIR), fully static (-static,
#      pkg-config --static), and libpmguard.a with a shared libc.  Each
#      creates a domain, protects a page, sees a stray write caught, opens
#      and closes windows, prints the backend; the static ones prove the
#      --wrap=pthread_create from Libs.private took effect.
#   4. The installed CLI runs; `pmguard run` finds the installed
#      libpmguard-run.so (pkglibdir, relative to bindir) and no other: in
#      the DESTDIR as installed, and with the library moved away (it must
#      fail, not fall back to the build tree); man finds and renders the
#      installed pages.
#   5. version-check refuses a mismatched VERSION and SOVER.
#   6. make uninstall leaves no file and no symlink under the DESTDIR
#      (install creates directories and uninstall leaves them: they may be
#      shared; the empty ones are listed, then removed with $tmp).
#
# Environment: MAKE (default make), O (build dir, default build), CC.
# Last line: "install: N passed, N failed" (", N skipped" when some were).
# Exit status 0 iff nothing failed.  Needs pkg-config and mandoc (or
# man-db), binutils (readelf) and a static libc for the -static build.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
MAKE=${MAKE:-make}
O=${O:-build}
CC=${CC:-cc}
export LC_ALL=C

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pmguard-install.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/dest
log=$tmp/log

n=0 npass=0 nfail=0 nskip=0
echo "TAP version 13"
# ok STATUS NAME: STATUS 0 passes; otherwise $log is shown as diagnostics.
ok() {
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		npass=$((npass + 1))
		echo "ok $n - $2"
	else
		nfail=$((nfail + 1))
		echo "not ok $n - $2"
		[ -s "$log" ] && sed 's/^/# /' "$log" | tail -n 40
	fi
	: >"$log"
}
skip() {
	n=$((n + 1)) nskip=$((nskip + 1))
	echo "ok $n - $1 # SKIP $2"
}
say() { echo "$*" >>"$log"; }
finish() {
	echo "1..$n"
	if [ $nskip -gt 0 ]; then
		echo "install: $npass passed, $nfail failed, $nskip skipped"
	else
		echo "install: $npass passed, $nfail failed"
	fi
	[ $nfail -eq 0 ]
	exit $?
}

VERSION=$(sed -n 's/^VERSION[[:space:]]*:=[[:space:]]*//p' Makefile)
SOVER=$(sed -n 's/^SOVER[[:space:]]*:=[[:space:]]*//p' Makefile)
echo "# version $VERSION, soname libpmguard.so.$SOVER, DESTDIR $dest"

# ---- 1. install
$MAKE --no-print-directory install DESTDIR="$dest" prefix=/usr O="$O" \
	CC="$CC" >"$log" 2>&1
rc=$?
ok $rc "make install DESTDIR=... prefix=/usr"
[ $rc = 0 ] || finish

lib=$dest/usr/lib
# file PATH MODE: a regular file with that mode
file_is() {
	if [ -f "$1" ] && [ ! -L "$1" ] &&
	   [ "$(stat -c %a "$1")" = "$2" ]; then
		return 0
	fi
	say "$1: $(ls -ld "$1" 2>&1)"
	return 1
}
link_is() {
	if [ -L "$1" ] && [ "$(readlink "$1")" = "$2" ] && [ -e "$1" ]; then
		return 0
	fi
	say "$1: $(ls -ld "$1" 2>&1), want a link to $2"
	return 1
}
file_is "$lib/libpmguard.a" 644; ok $? "libpmguard.a installed, 0644"
file_is "$lib/libpmguard.so.$VERSION" 755
ok $? "libpmguard.so.$VERSION installed, 0755"
link_is "$lib/libpmguard.so.$SOVER" "libpmguard.so.$VERSION"
ok $? "soname link libpmguard.so.$SOVER -> libpmguard.so.$VERSION"
link_is "$lib/libpmguard.so" "libpmguard.so.$SOVER"
ok $? "dev link libpmguard.so -> libpmguard.so.$SOVER"
soname=$(readelf -d "$lib/libpmguard.so.$VERSION" 2>>"$log" |
	 sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
say "SONAME: $soname"
[ "$soname" = "libpmguard.so.$SOVER" ]
ok $? "the library's SONAME is libpmguard.so.$SOVER"
file_is "$dest/usr/include/pmguard.h" 644 &&
	cmp include/pmguard.h "$dest/usr/include/pmguard.h" >>"$log" 2>&1
ok $? "pmguard.h installed, 0644, as in the tree"
file_is "$lib/pkgconfig/libpmguard.pc" 644
ok $? "libpmguard.pc installed in \$libdir/pkgconfig, 0644"
file_is "$dest/usr/bin/pmguard" 755; ok $? "pmguard installed in \$bindir, 0755"
file_is "$lib/pmguard/libpmguard-run.so" 755
ok $? "libpmguard-run.so installed in \$pkglibdir (\$libdir/pmguard), 0755"

mandir=$dest/usr/share/man
bad=0 npages=0
for p in man/*.[0-9]; do
	s=${p##*.}
	npages=$((npages + 1))
	file_is "$mandir/man$s/${p##*/}" 644 &&
		cmp "$p" "$mandir/man$s/${p##*/}" >>"$log" 2>&1 || bad=1
done
ok $bad "$npages man pages installed in man1, man3, man7"

bad=0 nlinks=0
for p in man/*.3; do
	page=${p##*/}
	# shellcheck disable=SC2013 # the NAME line's words
	for name in $(sed -n '/^\.SH NAME/{n;s/[[:space:]]*\\-.*//;s/,/ /g;p;q;}' "$p"); do
		[ "$name.3" = "$page" ] && continue
		nlinks=$((nlinks + 1))
		link_is "$mandir/man3/$name.3" "$page" || bad=1
	done
done
ok $bad "$nlinks section-3 aliases installed as links to their pages"

# Installing again over an installed tree works (links replaced).
$MAKE --no-print-directory install DESTDIR="$dest" prefix=/usr O="$O" \
	CC="$CC" >"$log" 2>&1
ok $? "make install again over the installed tree"

# ---- 2. pkg-config
export PKG_CONFIG_PATH=$lib/pkgconfig
export PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1
if ! command -v pkg-config >/dev/null; then
	say "pkg-config not found: apt-get install -y pkg-config"
	ok 1 "pkg-config is installed"
	finish
fi
v=$(pkg-config --modversion libpmguard 2>>"$log")
say "modversion: $v"
[ "$v" = "$VERSION" ]
ok $? "pkg-config --modversion libpmguard is $VERSION"

dyn=$(pkg-config --define-prefix --cflags --libs libpmguard 2>>"$log")
say "pkg-config --define-prefix --cflags --libs: $dyn"
# has "FLAGS" FLAG...: every FLAG is a word of FLAGS
has() {
	local f=" $1 " w
	shift
	for w; do
		case $f in *" $w "*) ;; *) return 1 ;; esac
	done
}
has "$dyn" "-I$dest/usr/include" "-L$lib" -lpmguard &&
	! has "$dyn" -Wl,--wrap=pthread_create
r=$?
ok $r "pkg-config --define-prefix: -I and -L into the DESTDIR, -lpmguard"

sta=$(PKG_CONFIG_SYSROOT_DIR=$dest pkg-config --dont-define-prefix \
	--static --cflags --libs libpmguard 2>>"$log")
say "PKG_CONFIG_SYSROOT_DIR=... pkg-config --static --cflags --libs: $sta"
has "$sta" "-I$dest/usr/include" "-L$lib" -lpmguard \
	-Wl,--wrap=pthread_create -lpthread -ldl
r=$?
ok $r "pkg-config --static (sysroot): adds -Wl,--wrap=pthread_create -lpthread -ldl"

# ---- 3. build and run programs against the installed library
# run_prog NAME BINARY [ENV...]: runs it, checks "result: ok" and exit 0
run_prog() {
	local bin=$1 out
	shift
	out=$(env "$@" "$bin" 2>&1)
	local rc=$?
	echo "$out" >>"$log"
	echo "$out" | sed -n 's/^\(backend\|library\|pthread_create\|thread reset\): /# &/p'
	[ $rc = 0 ] && echo "$out" | grep -qx 'result: ok'
}
needed() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\].*/\1/p'; }

# shared
# shellcheck disable=SC2086
$CC -O2 -Wall -Werror -o "$tmp/prog-shared" tests/install/prog.c $dyn \
	-pthread -ldl >>"$log" 2>&1
ok $? "shared: cc prog.c \$(pkg-config --cflags --libs libpmguard)"
needed "$tmp/prog-shared" | grep -qx "libpmguard.so.$SOVER"
ok $? "shared: the program needs libpmguard.so.$SOVER"
run_prog "$tmp/prog-shared" LD_LIBRARY_PATH="$lib" &&
	grep -q "^library: $lib/libpmguard.so.$SOVER\$" "$log" &&
	grep -q "^pthread_create: $lib/libpmguard.so.$SOVER\$" "$log"
ok $? "shared: runs on the installed libpmguard.so (pthread_create interposed)"

# fully static: needs a static Zydis (contain mode's decoder), which
# Debian does not ship (libzydis-dev has the shared library only)
zydis_a=$($CC -print-file-name=libZydis.a)
if [ "$zydis_a" = libZydis.a ]; then
	why="no static libZydis.a (Debian ships Zydis shared only)"
	skip "static: cc -static prog.c \$(pkg-config --static ...)" "$why"
	skip "static: the program needs no shared library" "$why"
	skip "static: runs; pthread_create wrapped by --wrap" "$why"
else
# shellcheck disable=SC2086
$CC -O2 -Wall -Werror -static -DPROG_STATIC -o "$tmp/prog-static" \
	tests/install/prog.c $sta >>"$log" 2>&1
ok $? "static: cc -static prog.c \$(pkg-config --static --cflags --libs libpmguard)"
[ -z "$(needed "$tmp/prog-static")" ]
ok $? "static: the program needs no shared library"
run_prog "$tmp/prog-static"
ok $? "static: runs; pthread_create wrapped by --wrap from Libs.private"
fi

# libpmguard.a, shared libc: what most static users of the library do
mix=$(echo " $sta " | sed 's/ -lpmguard / -Wl,-Bstatic -lpmguard -Wl,-Bdynamic /')
# shellcheck disable=SC2086
$CC -O2 -Wall -Werror -DPROG_STATIC -o "$tmp/prog-mixed" \
	tests/install/prog.c $mix >>"$log" 2>&1
ok $? "libpmguard.a with a shared libc: links"
! needed "$tmp/prog-mixed" | grep -q libpmguard && [ -n "$(needed "$tmp/prog-mixed")" ]
ok $? "libpmguard.a with a shared libc: libpmguard linked in, libc shared"
run_prog "$tmp/prog-mixed"
ok $? "libpmguard.a with a shared libc: runs, pthread_create wrapped"

# ---- 4. the CLI and the man pages, installed
out=$("$dest/usr/bin/pmguard" --version 2>&1)
say "$out"
[ "$out" = "pmguard $VERSION" ]
ok $? "installed pmguard --version says $VERSION"
"$dest/usr/bin/pmguard" info >>"$log" 2>&1
ok $? "installed pmguard info runs"

# pmguard run from the DESTDIR: the library it preloads is the installed
# one (the program's own map says so), PMGUARD_RUN_LIB unset
runlib=$lib/pmguard/libpmguard-run.so
maps=$(env -u PMGUARD_RUN_LIB "$dest/usr/bin/pmguard" run -- \
	cat /proc/self/maps 2>>"$log")
r=$?
say "pmguard run exit $r; libraries mapped:"
echo "$maps" | awk '$6 ~ /libpmguard/ {print $6}' | sort -u >>"$log"
[ $r = 0 ] && [ "$(echo "$maps" | awk '$6 ~ /libpmguard-run/ {print $6}' |
	sort -u)" = "$runlib" ]
ok $? "installed pmguard run preloads the installed libpmguard-run.so"
mv "$runlib" "$tmp/runlib.away"
env -u PMGUARD_RUN_LIB "$dest/usr/bin/pmguard" run -- true >>"$log" 2>&1
r=$?
say "without the installed library: exit $r"
[ $r != 0 ] && grep -q 'libpmguard-run.so not found' "$log"
ok $? "installed pmguard run without it fails (no fallback to the build tree)"
mv "$tmp/runlib.away" "$runlib"

if command -v man >/dev/null; then
	out=$(MANPAGER=cat MANWIDTH=80 man -l "$mandir/man3/pmg_close.3" 2>&1)
	echo "$out" | head -n 8 >>"$log"
	echo "$out" | grep -q 'PMG_OPEN(3)' &&
		echo "$out" | grep -q 'pmg_write_begin'
	ok $? "man -l renders pmg_close.3 (a link to pmg_open.3)"
	p=$(MANPATH='' man -M "$mandir" -w PMG_WRITE_SCOPE 2>>"$log")
	say "man -w PMG_WRITE_SCOPE: $p"
	# man-db names the page a link leads to
	[ "$p" = "$mandir/man3/PMG_WRITE_SCOPE.3" ] ||
		[ "$p" = "$mandir/man3/pmg_open.3" ]
	ok $? "man -M finds PMG_WRITE_SCOPE(3) in the installed tree"
else
	skip "man -l renders pmg_close.3" "man not installed"
	skip "man -M finds PMG_WRITE_SCOPE(3)" "man not installed"
fi
if command -v mandoc >/dev/null; then
	mandoc -T utf8 -W warning "$mandir/man7/pmguard.7" "$mandir/man1/pmguard.1" \
		>"$tmp/render" 2>>"$log" &&
		grep -q 'PMGUARD(7)' "$tmp/render"
	ok $? "mandoc renders pmguard(7) and pmguard(1) without warnings"
else
	say "mandoc not found: apt-get install -y mandoc"
	ok 1 "mandoc renders pmguard(7) and pmguard(1)"
fi

# ---- 5. version-check refuses mismatches (in a scratch build dir)
$MAKE --no-print-directory version-check O="$tmp/vc" >>"$log" 2>&1
ok $? "make version-check passes on the tree"
if $MAKE --no-print-directory version-check O="$tmp/vc" VERSION=9.9.9 \
	>>"$log" 2>&1; then r=1; else r=0; fi
ok $r "make version-check fails for VERSION=9.9.9"
if $MAKE --no-print-directory version-check O="$tmp/vc" SOVER=7 \
	>>"$log" 2>&1; then r=1; else r=0; fi
ok $r "make version-check fails for SOVER=7"

# ---- 6. uninstall
$MAKE --no-print-directory uninstall DESTDIR="$dest" prefix=/usr O="$O" \
	>"$log" 2>&1
ok $? "make uninstall DESTDIR=... prefix=/usr"
left=$(cd "$dest" && find . \( -type f -o -type l \) | sort)
[ -z "$left" ] || say "left behind:"$'\n'"$left"
[ -z "$left" ]
ok $? "no file or symlink is left under the DESTDIR"
dirs=$(cd "$dest" && find . -mindepth 1 -type d | sort | tr '\n' ' ')
echo "# empty directories left (install made them; uninstall leaves directories): $dirs"
$MAKE --no-print-directory uninstall DESTDIR="$dest" prefix=/usr O="$O" \
	>"$log" 2>&1
ok $? "make uninstall again (nothing to remove) succeeds"

finish
