// SPDX-License-Identifier: MIT
/* The JSON writer of every verb: see tools/json.h. */
#define _GNU_SOURCE
#include <math.h>

#include "json.h"

/* Length of the valid UTF-8 sequence at @s (1..4), or 0 if there is none. */
static int utf8_len(const unsigned char *s)
{
	unsigned c = s[0];
	int n, i;
	unsigned lo = 0x80, hi = 0xbf;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;	/* continuation byte, overlong lead, > U+10FFFF */
	/* the second byte's range excludes overlongs, surrogates and
	 * code points past U+10FFFF */
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;	/* also stops at the NUL */
	return n;
}

void json_write_string(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	int n;

	putc('"', f);
	while (*s) {
		switch (*s) {
		case '"':
			fputs("\\\"", f);
			break;
		case '\\':
			fputs("\\\\", f);
			break;
		case '\n':
			fputs("\\n", f);
			break;
		case '\r':
			fputs("\\r", f);
			break;
		case '\t':
			fputs("\\t", f);
			break;
		case '\b':
			fputs("\\b", f);
			break;
		case '\f':
			fputs("\\f", f);
			break;
		default:
			if (*s < 0x20 || *s == 0x7f) {
				fprintf(f, "\\u%04x", *s);
				break;
			}
			n = utf8_len(s);
			if (!n) {
				fputs("\\ufffd", f);	/* not UTF-8 */
				break;
			}
			fwrite(s, 1, (size_t)n, f);
			s += n;
			continue;
		}
		s++;
	}
	putc('"', f);
}

static void indent(struct json *j)
{
	int i;

	putc('\n', j->f);
	for (i = 0; i < j->depth; i++)
		fputs("  ", j->f);
}

/* Separator and key before an item at the current depth. */
static void item(struct json *j, const char *key)
{
	if (j->depth > 0) {
		if (!j->first[j->depth])
			putc(',', j->f);
		if (j->pretty)
			indent(j);
		else if (!j->first[j->depth])
			putc(' ', j->f);
		j->first[j->depth] = false;
	}
	if (key && j->depth > 0 && j->close[j->depth] == '}') {
		json_write_string(j->f, key);
		fputs(": ", j->f);
	}
}

static void open_(struct json *j, const char *key, char open, char close)
{
	item(j, key);
	putc(open, j->f);
	if (j->depth < JSON_DEPTH) {
		j->depth++;
		j->first[j->depth] = true;
		j->close[j->depth] = close;
	}
}

void json_begin(struct json *j, FILE *f, bool pretty)
{
	j->f = f;
	j->pretty = pretty;
	j->depth = 0;
	open_(j, NULL, '{', '}');
}

void json_obj(struct json *j, const char *key)
{
	open_(j, key, '{', '}');
}

void json_arr(struct json *j, const char *key)
{
	open_(j, key, '[', ']');
}

void json_end(struct json *j)
{
	bool empty;

	if (j->depth <= 0)
		return;
	empty = j->first[j->depth];
	j->depth--;
	if (j->pretty && !empty)
		indent(j);
	putc(j->close[j->depth + 1], j->f);
}

void json_finish(struct json *j)
{
	while (j->depth > 0)
		json_end(j);
	putc('\n', j->f);
	fflush(j->f);
}

void json_str(struct json *j, const char *key, const char *s)
{
	item(j, key);
	json_write_string(j->f, s ? s : "");
}

void json_u64(struct json *j, const char *key, uint64_t v)
{
	item(j, key);
	fprintf(j->f, "%llu", (unsigned long long)v);
}

void json_int(struct json *j, const char *key, long long v)
{
	item(j, key);
	fprintf(j->f, "%lld", v);
}

void json_num(struct json *j, const char *key, double v, int prec)
{
	item(j, key);
	if (isfinite(v))
		fprintf(j->f, "%.*f", prec, v);
	else
		fputs("null", j->f);
}

void json_bool(struct json *j, const char *key, bool v)
{
	item(j, key);
	fputs(v ? "true" : "false", j->f);
}

void json_null(struct json *j, const char *key)
{
	item(j, key);
	fputs("null", j->f);
}
