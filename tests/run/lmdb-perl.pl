#!/usr/bin/perl
# SPDX-License-Identifier: MIT
#
# lmdb-perl.pl: an unmodified Perl program for the `pmguard run` tests, on
# Debian's LMDB_File (liblmdb-file-perl, the system's liblmdb).
#
#   lmdb-perl.pl write DIR TXNS PER   TXNS write transactions of PER records
#   lmdb-perl.pl verify DIR N         exactly N records, each intact
#
# The environment is opened with MDB_WRITEMAP.  Records as tests/run/
# lmdb-prog.c writes them (key k%08u, value v%08u x 4), so either program
# verifies the other's.  Exit 0 fine, 1 wrong data, 2 usage or LMDB error.
use strict;
use warnings;
use LMDB_File qw(:flags :cursor_op);

sub kv {
	my $i = $_[0] % 100000000;
	return (sprintf("k%08u", $i), sprintf("v%08u", $i) x 4);
}

my ($cmd, $dir, @n) = @ARGV;
exit 2 unless defined $dir && (($cmd eq 'write' && @n == 2) ||
			       ($cmd eq 'verify' && @n == 1));
my $env = LMDB::Env->new($dir, { mapsize => 1 << 30, flags => MDB_WRITEMAP })
	or do { print "lmdb-perl: $LMDB_File::last_err\n"; exit 2 };
if ($cmd eq 'write') {
	my ($txns, $per) = @n;
	for my $t (0 .. $txns - 1) {
		my $txn = $env->BeginTxn();
		my $db = $txn->OpenDB();
		$db->put(kv($_)) for $t * $per .. ($t + 1) * $per - 1;
		$txn->commit();
	}
	printf "lmdb-perl: wrote %d records\n", $txns * $per;
	exit 0;
}
my $txn = $env->BeginTxn(MDB_RDONLY);
my $db = $txn->OpenDB();
# a missing key: get() returns undef with $LMDB_File::die_on_err off
$LMDB_File::die_on_err = 0;
for my $i (0 .. $n[0] - 1) {
	my ($k, $v) = kv($i);
	my $got;
	$db->get($k, $got);
	if (!defined $got || $got ne $v) {
		print "lmdb-perl: record $i missing or corrupted\n";
		exit 1;
	}
}
my $entries = $db->stat->{entries};
if ($entries != $n[0]) {
	print "lmdb-perl: $entries entries, expected $n[0]\n";
	exit 1;
}
print "lmdb-perl: $n[0] records intact\n";
exit 0;
