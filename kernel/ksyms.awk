# SPDX-License-Identifier: MIT
#
# `nm -n` of the first link -> an assembly table of the text symbols, for
# symbolizing oops traces and WARN callers (Linux's kallsyms, much reduced).
# The table lives in .ksyms, placed after .rodata: its size cannot move
# .text, so the second link keeps every address listed here (kernel.mk
# checks that).
BEGIN {
	n = 0
}

$2 ~ /^[tT]$/ && $3 !~ /^\./ {
	addr[n] = $1
	name[n] = $3
	n++
}
END {
	print "\t.section .ksyms, \"a\""
	print "\t.balign 8"
	print "\t.globl ksyms_num, ksyms_addr, ksyms_name"
	print "ksyms_num:\n\t.quad " n
	print "ksyms_addr:"
	for (i = 0; i < n; i++)
		print "\t.quad 0x" addr[i]
	print "ksyms_name:"
	for (i = 0; i < n; i++)
		print "\t.quad .Lksym" i
	for (i = 0; i < n; i++)
		print ".Lksym" i ":\n\t.asciz \"" name[i] "\""
}
