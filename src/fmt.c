// SPDX-License-Identifier: MIT
/*
 * Async-signal-safe formatting: text into a caller's buffer (a stack
 * struct _pmg_buf, or a plain char array), no locks, no allocation, no
 * library state.  The fault handlers and the reports format with these and
 * write the result with one write(2) (report.c: _pmg_buf_flush()).  A leaf:
 * it uses nothing else of the library (docs/design.md, "Object
 * dependencies").
 */
#include "fmt.h"

size_t _pmg_strlcpy(char *dst, const char *src, size_t size)
{
	size_t n = 0;

	while (src[n]) {
		if (size && n + 1 < size)
			dst[n] = src[n];
		n++;
	}
	if (size)
		dst[n < size ? n : size - 1] = '\0';
	return n;
}

size_t _pmg_utoa(uint64_t v, unsigned base, char *buf, size_t size)
{
	char tmp[24];
	size_t n = 0, i;

	if (base != 16)
		base = 10;
	do {
		unsigned d = (unsigned)(v % base);

		tmp[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
		v /= base;
	} while (v && n < sizeof(tmp));
	if (!size)
		return n;
	for (i = 0; i < n && i + 1 < size; i++)
		buf[i] = tmp[n - 1 - i];
	buf[i] = '\0';
	return i;
}

void _pmg_buf_str(struct _pmg_buf *b, const char *s)
{
	while (*s && b->n < sizeof(b->b))
		b->b[b->n++] = *s++;
}

void _pmg_buf_hex(struct _pmg_buf *b, uint64_t v)
{
	char t[24];

	_pmg_utoa(v, 16, t, sizeof(t));
	_pmg_buf_str(b, "0x");
	_pmg_buf_str(b, t);
}

void _pmg_buf_dec(struct _pmg_buf *b, int64_t v)
{
	char t[24];

	if (v < 0) {
		_pmg_buf_str(b, "-");
		v = -v;
	}
	_pmg_utoa((uint64_t)v, 10, t, sizeof(t));
	_pmg_buf_str(b, t);
}

void _pmg_buf_bytes(struct _pmg_buf *b, const uint8_t *p, unsigned n)
{
	static const char hx[] = "0123456789abcdef";
	unsigned i;

	for (i = 0; i < n && b->n + 3 < sizeof(b->b); i++) {
		b->b[b->n++] = hx[p[i] >> 4];
		b->b[b->n++] = hx[p[i] & 15];
	}
}
