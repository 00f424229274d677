/* SPDX-License-Identifier: MIT */
/* Async-signal-safe formatting (fmt.c): a leaf, no library state.
 * Never installed. */
#ifndef PMG_FMT_H
#define PMG_FMT_H

#include <stddef.h>
#include <stdint.h>

/* AS-safe output: format into a buffer, write(2) once (report.c:
 * _pmg_buf_flush()). */
struct _pmg_buf {
	char b[512];
	size_t n;
};
void _pmg_buf_str(struct _pmg_buf *b, const char *s);
void _pmg_buf_hex(struct _pmg_buf *b, uint64_t v);	/* 0x-prefixed hex */
void _pmg_buf_dec(struct _pmg_buf *b, int64_t v);
void _pmg_buf_bytes(struct _pmg_buf *b, const uint8_t *p, unsigned n);
/* strlcpy(): @src into @dst (@size bytes, NUL-terminated if @size),
 * truncated; returns strlen(@src).  AS-safe. */
size_t _pmg_strlcpy(char *dst, const char *src, size_t size);
/* @v as text in @base (16, else 10), no prefix, into @buf (@size bytes,
 * NUL-terminated if @size; the leading digits if it is short); returns
 * the length written.  AS-safe. */
size_t _pmg_utoa(uint64_t v, unsigned base, char *buf, size_t size);

#endif /* PMG_FMT_H */
