/* SPDX-License-Identifier: MIT */
/*
 * The one JSON writer of every verb's --json output (tools/json.c).
 *
 * Valid JSON (RFC 8259) for any input: strings are escaped (" \ and every
 * control byte; DEL as \u007f), bytes that are not UTF-8 (invalid,
 * overlong, surrogates, past U+10FFFF, truncated) become U+FFFD, and a
 * number that is not finite (NaN, an infinity) is written as null.
 *
 *	struct json j;
 *
 *	json_begin(&j, stdout, false);	// one line; true: indented
 *	json_str(&j, "backend", "pku");
 *	json_obj(&j, "cpu");
 *	json_bool(&j, "pku", true);
 *	json_end(&j);			// closes "cpu"
 *	json_arr(&j, "results");
 *	json_obj(&j, NULL);		// array members have no key
 *	...
 *	json_finish(&j);		// closes all, then a newline
 *
 * Keys are written as they are given (they are literals in the source).
 * One line: ", " and ": " between items, as Python's json.dumps.
 */
#ifndef PMG_JSON_H
#define PMG_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_DEPTH 8

struct json {
	FILE *f;
	bool pretty;
	int depth;
	bool first[JSON_DEPTH + 1];	/* nothing written yet at this depth */
	char close[JSON_DEPTH + 1];	/* '}' or ']' */
};

void json_begin(struct json *j, FILE *f, bool pretty);
void json_obj(struct json *j, const char *key);
void json_arr(struct json *j, const char *key);
void json_end(struct json *j);
void json_finish(struct json *j);

void json_str(struct json *j, const char *key, const char *s);
void json_u64(struct json *j, const char *key, uint64_t v);
void json_int(struct json *j, const char *key, long long v);
/* @v with @prec digits after the point; null if not finite */
void json_num(struct json *j, const char *key, double v, int prec);
void json_bool(struct json *j, const char *key, bool v);
void json_null(struct json *j, const char *key);

/* @s as a JSON string literal, quotes included, on @f. */
void json_write_string(FILE *f, const char *s);

#endif /* PMG_JSON_H */
