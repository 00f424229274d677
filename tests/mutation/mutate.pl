#!/usr/bin/env perl
# SPDX-License-Identifier: MIT
#
# mutate.pl - read the mutant list (tests/mutation/mutants) and list or
# apply its mutants.
#
#   mutate.pl LIST --list          one line per mutant: id TAB suite TAB
#                                  file TAB description
#   mutate.pl LIST --apply ID DIR  apply mutant ID to the tree under DIR
#
# A mutant is a block of lines, blocks separated by blank lines:
#
#   mutant U01
#   file   src/window.c
#   suite  host:test-a,test-b
#   desc   one line saying what the mutant breaks
#   old    text to find           (literal; \n newline, \t tab, \\ backslash)
#   new    text to put there
#
# "old"/"new" pairs may repeat; they apply in order, and each "old" must
# occur exactly once in the file as it is at that point.  Anything else is
# an error (exit 1) naming the mutant, the file and the count: a mutant
# that no longer applies must fail loudly, never silently test nothing.
# Lines starting with # are comments.
use strict;
use warnings;

sub unesc {
	my ($s) = @_;
	$s =~ s/\\(.)/$1 eq 'n' ? "\n" : $1 eq 't' ? "\t" : $1/ge;
	return $s;
}

sub parse {
	my ($path) = @_;
	open(my $fh, '<', $path) or die "mutate: $path: $!\n";
	my (@m, $cur);
	my $ln = 0;
	while (my $l = <$fh>) {
		$ln++;
		chomp $l;
		next if $l =~ /^#/;
		if ($l =~ /^\s*$/) {
			$cur = undef;
			next;
		}
		my ($k, $v) = $l =~ /^(\w+)(?:[ \t]+(.*))?$/
			or die "mutate: $path:$ln: cannot parse '$l'\n";
		$v //= '';
		if ($k eq 'mutant') {
			$cur = { id => $v, pairs => [], line => $ln };
			push @m, $cur;
			next;
		}
		die "mutate: $path:$ln: '$k' outside a mutant\n" unless $cur;
		if ($k eq 'old') {
			push @{$cur->{pairs}}, [unesc($v), undef];
		} elsif ($k eq 'new') {
			my $p = $cur->{pairs}[-1];
			die "mutate: $path:$ln: 'new' without 'old'\n"
				if !$p || defined $p->[1];
			$p->[1] = unesc($v);
		} elsif ($k =~ /^(file|suite|desc)$/) {
			$cur->{$k} = $v;
		} else {
			die "mutate: $path:$ln: unknown key '$k'\n";
		}
	}
	my %seen;
	for my $x (@m) {
		for my $k (qw(file suite desc)) {
			die "mutate: $path:$x->{line}: mutant $x->{id} has no $k\n"
				unless defined $x->{$k} && length $x->{$k};
		}
		die "mutate: $path:$x->{line}: mutant $x->{id}: no old/new\n"
			unless @{$x->{pairs}} && defined $x->{pairs}[-1][1];
		die "mutate: $path: duplicate mutant id $x->{id}\n"
			if $seen{$x->{id}}++;
	}
	return @m;
}

my ($list, $cmd, @args) = @ARGV;
die "usage: mutate.pl LIST --list | --apply ID DIR\n" unless $cmd;
my @m = parse($list);
if ($cmd eq '--list') {
	print join("\t", $_->{id}, $_->{suite}, $_->{file}, $_->{desc}), "\n"
		for @m;
	exit 0;
}
die "usage: mutate.pl LIST --apply ID DIR\n"
	unless $cmd eq '--apply' && @args == 2;
my ($id, $dir) = @args;
my ($x) = grep { $_->{id} eq $id } @m or die "mutate: no mutant $id\n";
my $f = "$dir/$x->{file}";
open(my $in, '<', $f) or do {
	print STDERR "mutant $id: $x->{file}: $!\n";
	exit 1;
};
local $/;
my $text = <$in>;
close $in;
my $i = 0;
for my $p (@{$x->{pairs}}) {
	my ($old, $new) = @$p;
	$i++;
	my $n = () = $text =~ /\Q$old\E/g;
	if ($n != 1) {
		(my $show = $old) =~ s/\n/\\n/g;
		print STDERR "mutant $id: pattern $i found $n times in " .
			"$x->{file} (must be exactly once): '$show'\n";
		exit 1;
	}
	my $at = index($text, $old);
	substr($text, $at, length($old)) = $new;
}
open(my $out, '>', $f) or die "mutate: $f: $!\n";
print $out $text;
close $out;
exit 0;
