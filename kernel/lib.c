// SPDX-License-Identifier: MIT
/*
 * The few string routines the kernel needs.  Written with rep-string
 * instructions so the compiler cannot turn a loop here back into a call
 * to the very function being defined.
 */
#include "kernel.h"

void *memset(void *s, int c, size_t n)
{
	void *d = s;

	__asm__ __volatile__("rep stosb"
			     : "+D"(d), "+c"(n) : "a"(c) : "memory");
	return s;
}

void *memcpy(void *d, const void *s, size_t n)
{
	void *dd = d;

	__asm__ __volatile__("rep movsb"
			     : "+D"(dd), "+S"(s), "+c"(n) :: "memory");
	return d;
}

void *memmove(void *d, const void *s, size_t n)
{
	char *dp = d;
	const char *sp = s;

	if (dp <= sp || dp >= sp + n)
		return memcpy(d, s, n);
	/* Overlap with the destination above: copy backwards. */
	dp += n - 1;
	sp += n - 1;
	__asm__ __volatile__("std; rep movsb; cld"
			     : "+D"(dp), "+S"(sp), "+c"(n) :: "memory");
	return d;
}

int memcmp(const void *a, const void *b, size_t n)
{
	const unsigned char *x = a, *y = b;
	size_t i;

	for (i = 0; i < n; i++)
		if (x[i] != y[i])
			return x[i] < y[i] ? -1 : 1;
	return 0;
}

size_t strlen(const char *s)
{
	size_t n = 0;

	while (s[n])
		n++;
	return n;
}

int strncmp(const char *a, const char *b, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char x = (unsigned char)a[i];
		unsigned char y = (unsigned char)b[i];

		if (x != y)
			return x < y ? -1 : 1;
		if (!x)
			return 0;
	}
	return 0;
}
