#!/bin/sh
# SPDX-License-Identifier: MIT
#
# test-slapd.sh [BUILD_DIR] - OpenLDAP's slapd (Debian 12's 2.5, back-mdb
# with `envflags writemap`) under `pmguard run` on loopback (docs/run.md).
# back_mdb.so carries its own LMDB but exports its mdb_* functions and
# calls them through its PLT, and slapd loads it into the global scope:
# the preload's wrappers are called and find the module's functions
# after them.  TAP.
#
# - a reference without pmguard: slapd started as a daemon in the
#   foreground (-d none), dropping privileges to openldap (-u/-g) where
#   the test runs as root and that user exists; ldapadd of 2,002 entries
#   (2,000 inetOrgPerson under ou=people), ldapsearch of them all;
# - strict and contain, the correct program: the same, every entry as in
#   the reference, the environment named as protected, no stray write,
#   a clean stop (SIGTERM to pmguard: exit 0);
# - a wild write into its map (tests/run/libwild.so, WILD_TRIGGER: a file
#   the test creates once the entries are in and slapd is idle): strict
#   aborts slapd with a report naming the injector, the written bytes are
#   not in data.mdb, and slapd restarted on it answers as before; contain
#   undoes it, slapd runs on and answers as before (the bytes are not in
#   the file); audit reports it and slapd runs on (the bytes land);
#   without pmguard the bytes land (the negative control).
#   slapd sets signal(SIGTRAP, slap_sig_shutdown) in main(): contain and
#   audit single-step the written instruction on the mprotect backend,
#   which needs the program's own SIGTRAP action kept apart from
#   pmguard's (src/sigown.c); without it slapd shuts down at the trap.
# - the run/plain ratio of a workload (a bench line): ldapmodify of the
#   2,000 entries' description (a write transaction each) and a search of
#   them all, five rounds on each server, the best of each.
# Needs slapd and ldap-utils (scripts/install-deps); without them: SKIP
# (exit 77), with CI=true a failure.  Paths: SLAPD, LDAPADD, LDAPSEARCH,
# LDAPMODIFY.  SLAPD_NENT (default 2000) people and SLAPD_ROUNDS
# (default 5) bench rounds: the PKU guest (QEMU TCG, guest/vm-run-check)
# asks for fewer.
set -u
O=${1:-build}
. "$(dirname "$0")/runtime-lib.sh"
SLAPD=${SLAPD:-/usr/sbin/slapd}
LDAPADD=${LDAPADD:-/usr/bin/ldapadd}
LDAPSEARCH=${LDAPSEARCH:-/usr/bin/ldapsearch}
LDAPMODIFY=${LDAPMODIFY:-/usr/bin/ldapmodify}
SLAPD_NENT=${SLAPD_NENT:-2000}
SLAPD_ROUNDS=${SLAPD_ROUNDS:-5}
rt_start slapd "scripts/install-deps: slapd, ldap-utils" "$SLAPD" \
	"$LDAPADD" "$LDAPSEARCH" "$LDAPMODIFY"
$SLAPD -VV 2>&1 | head -1 | sed 's/^/# /'
pids=
rt_cleanup() {
	for p in $pids; do kill -TERM "$p" 2>/dev/null; done
	sleep 0.5
	for p in $pids; do kill -KILL "$p" 2>/dev/null; done
}
# the dropped user reaches its files through $T
UG=
if [ "$(id -u)" = 0 ] && id openldap >/dev/null 2>&1; then
	UG="-u openldap -g openldap"
	chmod 755 "$T"
fi
echo "# slapd ${UG:-as $(id -un) (not root, or no openldap user: no -u/-g)}"

PORT=$(free_port $((30000 + $$ % 20000)))
URL=ldap://127.0.0.1:$PORT/
BASE=dc=pmg,dc=test
echo "# slapd on $URL"

awk -v n="$SLAPD_NENT" 'BEGIN {
	print "dn: dc=pmg,dc=test\nobjectClass: dcObject\nobjectClass: organization\no: pmg\ndc: pmg\n"
	print "dn: ou=people,dc=pmg,dc=test\nobjectClass: organizationalUnit\nou: people\n"
	for (i = 0; i < n; i++)
		printf "dn: uid=u%04d,ou=people,dc=pmg,dc=test\nobjectClass: inetOrgPerson\nuid: u%04d\ncn: User %d\nsn: Number%d\nmail: u%04d@pmg.test\ndescription: entry %d of the pmguard test\n\n", i, i, i, i, i, i
}' >"$T/data.ldif"
awk -v n="$SLAPD_NENT" 'BEGIN {
	for (i = 0; i < n; i++)
		printf "dn: uid=u%04d,ou=people,dc=pmg,dc=test\nchangetype: modify\nreplace: description\ndescription: entry %d of the pmguard test\n\n", i, i
}' >"$T/mod.ldif"

# slapd's configuration for run TAG: its own database directory
slapd_conf() {
	mkdir -p "$T/slapd-$1/db"
	cat >"$T/slapd-$1/slapd.conf" <<EOC
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
sizelimit unlimited
modulepath /usr/lib/ldap
moduleload back_mdb
pidfile $T/slapd-$1/slapd.pid
database mdb
suffix "$BASE"
rootdn "cn=admin,$BASE"
rootpw secret
directory $T/slapd-$1/db
maxsize 104857600
envflags writemap
dbnosync
index objectClass eq
index uid eq
EOC
	[ -z "$UG" ] || chown -R openldap:openldap "$T/slapd-$1"
}
# wait_up: until slapd answers on PORT (10 s)
wait_up() {
	i=0
	while [ $i -lt 100 ]; do
		$LDAPSEARCH -x -H "$URL" -s base -b '' '(objectClass=*)' \
			>/dev/null 2>&1 && return 0
		kill -0 "$slapd_pid" 2>/dev/null || return 1
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}
# start_slapd TAG [pmguard run options...]: plain without options;
# slapd_env: NAME=VALUE words for its environment (the injector)
start_slapd() {
	tag=$1; shift
	[ -d "$T/slapd-$tag" ] || slapd_conf "$tag"
	# shellcheck disable=SC2086
	if [ $# -gt 0 ]; then
		env $slapd_env $PMG run "$@" -- $SLAPD -d none $UG \
			-f "$T/slapd-$tag/slapd.conf" -h "$URL" \
			>>"$T/slapd-$tag.log" 2>&1 &
	else
		env $slapd_env $SLAPD -d none $UG -f "$T/slapd-$tag/slapd.conf" \
			-h "$URL" >>"$T/slapd-$tag.log" 2>&1 &
	fi
	slapd_pid=$!
	pids="$pids $slapd_pid"
	wait_up
}
stop_slapd() {
	kill -TERM "$slapd_pid" 2>/dev/null
	wait_gone "$slapd_pid"
}
add() { # add TAG: the entries, timed (seconds in $secs)
	t0=$(now)
	$LDAPADD -x -H "$URL" -D "cn=admin,$BASE" -w secret \
		-f "$T/data.ldif" >"$T/add-$1.out" 2>&1
	arc=$?
	secs=$(echo "$t0 $(now)" | awk '{ printf "%.4f", $2 - $1 }')
	return $arc
}
# bench: the best of SLAPD_ROUNDS rounds of ldapmodify (every entry) and a
# search, in seconds (in $secs); the entries stay as they were
bench() {
	best=
	i=0
	while [ $i -lt "$SLAPD_ROUNDS" ]; do
		i=$((i + 1))
		t0=$(now)
		$LDAPMODIFY -x -H "$URL" -D "cn=admin,$BASE" -w secret \
			-f "$T/mod.ldif" >/dev/null 2>&1 || return 1
		search >/dev/null
		t=$(echo "$t0 $(now)" | awk '{ printf "%.4f", $2 - $1 }')
		best=$(echo "$t ${best:-$t}" | awk '{ print ($1 < $2) ? $1 : $2 }')
	done
	secs=$best
}
# every entry, one attribute a line, sorted
search() {
	$LDAPSEARCH -x -LLL -o ldif-wrap=no -H "$URL" -b "$BASE" \
		'(objectClass=*)' 2>&1 | sort
}
same() { # same NAME GOT WANT
	if cmp -s "$2" "$3"; then
		ok "$1"
	else
		nok "$1"
		diff "$3" "$2" | head -10 | sed 's/^/# /'
	fi
}
slapd_env=

# ---- the reference, without pmguard ----
if ! start_slapd ref; then
	nok "slapd starts (plain)"
	diag "$T/slapd-ref.log"
	finish
	exit 1
fi
add ref
search >"$T/want"
bench && plain_secs=$secs
nent=$(grep -c '^dn: ' "$T/want")
nmail=$(grep -c '^mail: ' "$T/want")
check "reference: ldapadd of $nent entries, ldapsearch returns them ($nmail with mail)" \
	sh -c "[ $arc = 0 ] && [ $nent = $((SLAPD_NENT + 2)) ] && [ $nmail = $SLAPD_NENT ]"
stop_slapd
check "reference: slapd stops cleanly (rc $rc)" [ "$rc" = 0 ]

# ---- the correct program under pmguard run ----
for mode in strict contain; do
	r=$T/slapd-$mode.rep
	if ! start_slapd "$mode" --mode $mode --report "$r"; then
		nok "$mode: slapd under pmguard run starts"
		diag "$T/slapd-$mode.log" "$r"
		continue
	fi
	add "$mode"
	[ $mode = strict ] && bench && run_secs=$secs
	search >"$T/got"
	same "$mode: ldapadd of $((SLAPD_NENT + 2)) entries (rc $arc), ldapsearch: every entry as without pmguard" \
		"$T/got" "$T/want"
	stop_slapd
	check "$mode: slapd stops cleanly (rc $rc), no stray write reported" \
		sh -c "[ '$rc' = 0 ] && ! grep -q 'stray\\|unbalanced\\|cannot' '$r'"
	grep -h 'stray\|unbalanced\|cannot' "$r" | head -5 | sed 's/^/# /'
	# slapd opens its database after dropping to openldap: the
	# launcher's status channel still reaches it (docs/run.md, "The
	# launcher's channels")
	check "$mode: no false \"nothing was protected\" after slapd's drop to openldap" \
		sh -c "! grep -q 'nothing was protected\\|unknown whether' '$r'"
	check "$mode: the report names back-mdb's environment, protected (MDB_WRITEMAP its own)" \
		grep -q "slapd (pid [0-9]*): LMDB environment $T/slapd-$mode/db: protected.*asked by the program" "$r"
done

# ---- a wild write into slapd's map ----
# wild_slapd TAG [pmguard run options...]: slapd with the injector, the
# entries added and searched (as the reference), then the write
# triggered
wild_slapd() {
	tag=$1; shift
	slapd_conf "$tag"
	slapd_env="LD_PRELOAD=$WILD WILD_TRIGGER=$T/slapd-$tag/trigger"
	start_slapd "$tag" "$@" || { slapd_env=; diag "$T/slapd-$tag.log"; return 1; }
	slapd_env=
	add "$tag" || { diag "$T/add-$tag.out"; return 1; }
	search >"$T/got"
	cmp -s "$T/got" "$T/want" || { diff "$T/want" "$T/got" | diag; return 1; }
	: >"$T/slapd-$tag/trigger"
}
EE=eeeeeeeeeeeeeeee

# strict: slapd aborts at the write, with a report
if wild_slapd ws --report "$T/ws.rep"; then
	wait_gone "$slapd_pid"
	check "wild write into slapd's map, strict: slapd aborted (rc $rc), reported" \
		sh -c "[ '$rc' = 134 ] && grep -q 'strict (aborting): stray write.*libwild.so+0x' '$T/ws.rep'"
	[ "$rc" = 134 ] || diag "$T/slapd-ws.log" "$T/ws.rep"
	b=$(wild_bytes "$T/slapd-ws.log" "$T/slapd-ws/db/data.mdb")
	check "strict: the wild bytes are not in data.mdb ($b)" \
		sh -c "[ '$b' != none ] && [ '$b' != $EE ]"
	if start_slapd ws --report "$T/ws2.rep"; then
		search >"$T/got"
		same "strict: slapd restarted on that database: every entry as before" \
			"$T/got" "$T/want"
		stop_slapd
	else
		nok "strict: slapd restarts on the database"
		diag "$T/slapd-ws.log"
	fi
else
	nok "wild write, strict: slapd with the injector serves as without pmguard"
fi

# contain: undone, slapd runs on and serves the same entries
if wild_slapd wc --mode contain --report "$T/wc.rep"; then
	wait_log "$T/slapd-wc.log" 'wild: 1 writes done'
	check "wild write, contain: contained and reported, slapd runs on" \
		sh -c "grep -q 'contain: stray write by .*: undone' '$T/wc.rep' && kill -0 $slapd_pid"
	grep -q 'shutdown' "$T/slapd-wc.log" && diag "$T/slapd-wc.log" | tail -3
	b=$(wild_bytes "$T/slapd-wc.log" "$T/slapd-wc/db/data.mdb")
	check "contain: the wild bytes are not in data.mdb ($b)" \
		sh -c "[ '$b' != none ] && [ '$b' != $EE ]"
	search >"$T/got"
	same "contain: after the write, every entry as before" "$T/got" "$T/want"
	stop_slapd
	check "contain: slapd stops cleanly (rc $rc)" [ "$rc" = 0 ]
else
	nok "wild write, contain: slapd with the injector serves as without pmguard"
fi

# audit: reported, let through, slapd runs on
if wild_slapd wa --mode audit --report "$T/wa.rep"; then
	wait_log "$T/slapd-wa.log" 'wild: 1 writes done'
	check "wild write, audit: reported, slapd runs on and answers" \
		sh -c "grep -q 'audit: stray write.*libwild.so+0x' '$T/wa.rep' && kill -0 $slapd_pid && $LDAPSEARCH -x -H '$URL' -s base -b '' '(objectClass=*)' >/dev/null 2>&1"
	b=$(wild_bytes "$T/slapd-wa.log" "$T/slapd-wa/db/data.mdb")
	check "audit: the write is let through, the bytes land in data.mdb ($b)" \
		[ "$b" = $EE ]
	stop_slapd
else
	nok "wild write, audit: slapd with the injector serves as without pmguard"
fi

# unprotected: the bytes land in data.mdb (the negative control)
if wild_slapd wu; then
	wait_log "$T/slapd-wu.log" 'wild: 1 writes done'
	b=$(wild_bytes "$T/slapd-wu.log" "$T/slapd-wu/db/data.mdb")
	check "negative control: without pmguard the wild bytes land in data.mdb ($b)" \
		[ "$b" = $EE ]
	stop_slapd
else
	nok "negative control: slapd with the injector serves"
	diag "$T/slapd-wu.log"
fi

echo "# bench: slapd, ldapmodify of $SLAPD_NENT entries + a search of all: plain ${plain_secs:-?} s, pmguard run (strict) ${run_secs:-?} s, run/plain $(echo "${run_secs:-0} ${plain_secs:-0}" | awk '{ if ($2 > 0) printf "%.2f", $1 / $2; else print "?" }') (best of $SLAPD_ROUNDS, backend ${backend:-unknown})"
finish
