#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# check-man.sh - the man pages are lint clean and cover the public API.
# Run from anywhere (`make man-check`); needs mandoc and groff.
#
#   1. `mandoc -T lint -W warning` and `groff -ww -z -man` print nothing.
#   2. Every function and function-like macro that include/pmguard.h
#      declares (names not starting with _pmg/_PMG) is named on the NAME
#      line of a section-3 page (its own page, or a sibling's: install
#      links the alias to it), and that page's SYNOPSIS has the header's
#      prototype, token for token (whitespace aside).
#   3. Every name on a NAME line is public API (no stale names); no name is
#      on two pages; an alias is not also a page file; each page names
#      itself.
#   4. Each page has an SPDX line and the sections NAME, SYNOPSIS,
#      DESCRIPTION, SEE ALSO; section-3 pages also RETURN VALUE and
#      ATTRIBUTES (async-signal-safety per function).
#   5. Cross references to our pages (pmg_*(3), PMG_*(3), pmguard(1|7))
#      resolve.
#   6. Every long option (--name) in tools/*.c appears in pmguard(1).
# Prints each problem, then "man-check: ..." and exits 1 if there were any.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
hdr=include/pmguard.h
bad=0
fail() { echo "man-check: $*" >&2; bad=1; }

shopt -s nullglob
pages=(man/*.[0-9])
man3=(man/*.3)
[ ${#pages[@]} -gt 0 ] || { fail "no man pages in man/"; exit 1; }

# ---- 1. lint
for tool in mandoc groff; do
	command -v $tool >/dev/null ||
		fail "$tool not found (apt-get install -y $tool)"
done
if command -v mandoc >/dev/null; then
	out=$(mandoc -T lint -W warning "${pages[@]}" 2>&1)
	[ -z "$out" ] || fail "mandoc -T lint -W warning:"$'\n'"$out"
fi
if command -v groff >/dev/null; then
	for p in "${pages[@]}"; do
		out=$(groff -ww -z -man "$p" 2>&1)
		[ -z "$out" ] || fail "groff -ww -z -man $p:"$'\n'"$out"
	done
fi

# ---- 2. the header's public functions and function-like macros
# Prints "name<TAB>declaration" with the declaration's whitespace removed.
# Comments are stripped; the C++ guard is skipped; only statements at brace
# depth 0 count (declarations and inline function heads, not the calls in
# inline bodies).  POSIX awk (mawk is fine).
api=$(awk '
	BEGIN { inc = 0 }
	{
		line = $0; out = ""
		while (length(line)) {
			if (inc) {
				i = index(line, "*/")
				if (!i) { line = ""; break }
				line = substr(line, i + 2); inc = 0
			} else {
				i = index(line, "/*")
				if (!i) { out = out line; line = ""; break }
				out = out substr(line, 1, i - 1)
				line = substr(line, i + 2); inc = 1
			}
		}
		print out
	}' "$hdr" | awk '
	function flush(stmt,   s, n) {
		s = " " stmt
		gsub(/[ \t]+/, " ", s)
		if (match(s, /[^A-Za-z0-9_]pmg_[a-z0-9_]*[ ]*\(/)) {
			n = substr(s, RSTART + 1, RLENGTH - 1)
			sub(/[ ]*\($/, "", n)
			gsub(/ /, "", s)
			print n "\t" s
		}
	}
	/^#[ \t]*ifdef[ \t]+__cplusplus/ { skip = 1; next }
	skip && /^#[ \t]*endif/ { skip = 0; next }
	skip { next }
	/^#[ \t]*define[ \t]+PMG_[A-Z0-9_]*\(/ {
		s = $0
		sub(/^#[ \t]*define[ \t]+/, "", s)
		sub(/\).*/, ")", s)
		n = s; sub(/\(.*/, "", n)
		gsub(/[ \t]+/, "", s)
		print n "\t" s
		cont = ($0 ~ /\\$/); next
	}
	cont { cont = ($0 ~ /\\$/); next }
	/^#/ { cont = ($0 ~ /\\$/); next }
	{
		for (i = 1; i <= length($0); i++) {
			c = substr($0, i, 1)
			if (c == "{") {
				if (depth == 0) flush(stmt)
				depth++; stmt = ""
			} else if (c == "}") {
				depth--; stmt = ""
			} else if (c == ";") {
				if (depth == 0) flush(stmt)
				stmt = ""
			} else if (depth == 0) {
				stmt = stmt c
			}
		}
		stmt = stmt " "
	}')
[ -n "$api" ] || fail "found no public functions in $hdr"

# NAME lines: "name<TAB>page" for every name on every section-3 page.
names=""
for p in "${man3[@]}"; do
	line=$(sed -n '/^\.SH NAME/{n;p;q;}' "$p")
	case $line in
	*'\-'*) ;;
	*) fail "$p: the line after .SH NAME must be 'name, name \\- summary'"
	   continue ;;
	esac
	list=${line%%\\-*}
	self=0
	for n in ${list//,/ }; do
		names+="$n	$p"$'\n'
		[ "$n.3" = "${p##*/}" ] && self=1
	done
	[ $self = 1 ] || fail "$p: its NAME line does not name ${p##*/}"
done

# One string per page: its SYNOPSIS, roff stripped, whitespace removed.
synopsis() {
	sed -n '/^\.SH SYNOPSIS/,/^\.SH /p' "$1" | sed -e '/^\.SH/d' \
		-e 's/^\.[A-Z][A-Z]*[ \t]*//' -e 's/\\f[BIRP]//g' \
		-e 's/\\(dq/"/g' -e 's/\\-/-/g' -e 's/\\e/\\/g' \
		-e 's/"//g' | tr -d ' \t\n'
}

missing=()
while IFS=$'\t' read -r fn decl; do
	[ -n "$fn" ] || continue
	page=$(printf '%s' "$names" | awk -F'\t' -v n="$fn" '$1 == n { print $2; exit }')
	if [ -z "$page" ]; then
		missing+=("$fn")
		continue
	fi
	syn=$(synopsis "$page")
	d=${decl//\"/}
	case $syn in
	*"$d"*) ;;
	*) fail "$page: SYNOPSIS lacks the header's prototype of $fn: $decl" ;;
	esac
done <<<"$api"
[ ${#missing[@]} -eq 0 ] ||
	fail "no man page for: ${missing[*]} (add it to a page's NAME line)"

# ---- 3. names on pages
pubnames=$(printf '%s\n' "$api" | cut -f1 | sort -u)
dups=$(printf '%s' "$names" | cut -f1 | sort | uniq -d)
[ -z "$dups" ] || fail "named on more than one page: $(tr '\n' ' ' <<<"$dups")"
while IFS=$'\t' read -r n p; do
	[ -n "$n" ] || continue
	grep -qx -- "$n" <<<"$pubnames" ||
		fail "$p names $n, which $hdr does not declare"
	[ "$n.3" != "${p##*/}" ] && [ -e "man/$n.3" ] &&
		fail "$p names $n, but man/$n.3 is a page of its own"
done <<<"$names"

# ---- 4. sections
for p in "${pages[@]}"; do
	grep -q '^\.\\" SPDX-License-Identifier: MIT$' "$p" ||
		fail "$p: no SPDX line"
	want=(NAME SYNOPSIS DESCRIPTION 'SEE ALSO')
	case $p in *.3) want+=('RETURN VALUE' ATTRIBUTES) ;; esac
	for s in "${want[@]}"; do
		grep -q "^\\.SH \"\\{0,1\\}$s\"\\{0,1\\}\$" "$p" ||
			fail "$p: no $s section"
	done
done

# ---- 5. cross references
known=$(printf '%s' "$names" | cut -f1; for p in "${pages[@]}"; do
	b=${p##*/}; echo "${b%.*}"; done)
grep -ho '^\.BR [a-zA-Z_][a-zA-Z0-9_]* ([137])' "${pages[@]}" | sort -u |
while read -r _ ref sec; do
	case $ref in pmg_*|PMG_*|pmguard) ;; *) continue ;; esac
	sec=${sec//[()]/}
	case $ref in
	pmguard) [ -e "man/pmguard.$sec" ] || echo "$ref($sec)" ;;
	*) grep -qx -- "$ref" <<<"$known" && [ "$sec" = 3 ] ||
		echo "$ref($sec)" ;;
	esac
done >"${TMPDIR:-/tmp}/check-man.$$"
if [ -s "${TMPDIR:-/tmp}/check-man.$$" ]; then
	fail "references to pages that do not exist: $(tr '\n' ' ' <"${TMPDIR:-/tmp}/check-man.$$")"
fi
rm -f "${TMPDIR:-/tmp}/check-man.$$"

# ---- 6. every long option the CLI's sources mention is in pmguard(1)
if [ -e man/pmguard.1 ]; then
	# shellcheck disable=SC2013 # one option per word
	for opt in $(grep -oh -- '--[a-z][a-z0-9-]*' tools/*.c | sort -u); do
		esc=${opt//-/\\-}
		grep -qF -- "$esc" man/pmguard.1 ||
			fail "man/pmguard.1 does not mention $opt (tools/*.c do)"
	done
fi

nfn=$(printf '%s\n' "$api" | grep -c .)
if [ $bad = 0 ]; then
	echo "man-check: ${#pages[@]} pages lint clean; $nfn public functions and macros of $hdr documented"
fi
exit $bad
