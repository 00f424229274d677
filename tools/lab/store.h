/* SPDX-License-Identifier: MIT */
/*
 * The demo's persistent store: a small key-value store on one pmguard pool,
 * written by several threads, with checksummed records.  See docs/demo.md.
 *
 * Layout (all offsets from the pool base):
 *
 *   [ log 0: cap records ][ log 1 ] ... [ log T-1 ]   64-byte records
 *   [ superblock page: header, then one tail per log, 64 bytes apart ]
 *
 * Each writer thread owns one log and the keys k with k % T == its log; a
 * put appends a record (key, version, value, CRC-32C) with
 * pmg_memcpy_persist(), then publishes it by storing the log's tail in a
 * write window (pmg_dax_mk_readwrite/noaccess) and pmg_persist().  A
 * record past the tail is not part of the store (a torn append).
 * Records are never rewritten, so every record ever committed must still
 * read back exactly as written: the verifier replays each writer's key
 * sequence from the seed and compares every committed record byte for
 * byte, checks its CRC, and checks every key's latest value.
 */
#ifndef PMG_STORE_H
#define PMG_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pmguard.h"

#define STORE_REC_SIZE	64
#define STORE_VAL_SIZE	44
#define STORE_REC_MAGIC	0x5245434bu	/* "KCER" */
#define STORE_SB_MAGIC	0x31564b474d50ull	/* "PMGKV1" */
#define STORE_PAGE	4096u

/* One record: 64 bytes, one cache line, never rewritten once committed. */
struct store_rec {
	uint32_t magic;
	uint32_t key;
	uint32_t version;	/* 1 for the first put of the key */
	uint16_t log;		/* the writer (log) that put it */
	uint16_t flags;
	uint8_t val[STORE_VAL_SIZE];
	uint32_t crc;		/* CRC-32C of the 60 bytes before it */
};

/* The superblock header (its page also holds the tails). */
struct store_sb {
	uint64_t magic;
	uint64_t seed;
	uint32_t nlogs;
	uint32_t cap;		/* records per log */
	uint32_t nkeys;
	uint32_t crc;		/* CRC-32C of the fields above */
};

/* What the writer of a log puts in its n-th record. */
struct store_kv {
	uint32_t key;
	uint32_t version;
};

struct store {
	struct pmg_pool *pool;
	char *base;
	size_t size;
	unsigned nlogs;
	uint32_t cap;
};

struct store_check {
	uint64_t records;	/* committed records (sum of the tails) */
	uint64_t corrupted;	/* committed records not as written */
	uint64_t crc_failures;	/* ... whose CRC does not match */
	uint64_t bad_keys;	/* keys whose latest value is wrong */
	uint64_t lost;		/* records the writers finished but the
				   tails do not show (expected 0) */
	bool sb_ok;		/* superblock intact */
};

/* Build the CRC table; call once before any other store_* call. */
void store_init(void);

/* CRC-32C (Castagnoli) of @n bytes. */
uint32_t store_crc(const void *p, size_t n);

/* Pool bytes for @nlogs logs of @cap records. */
size_t store_pool_size(unsigned nlogs, uint32_t cap);

/* Bytes of the record area (logs), from the base. */
static inline size_t store_logs_bytes(unsigned nlogs, uint32_t cap)
{
	return (size_t)nlogs * cap * STORE_REC_SIZE;
}

/* Offset of the superblock page. */
static inline size_t store_sb_off(unsigned nlogs, uint32_t cap)
{
	return (store_logs_bytes(nlogs, cap) + STORE_PAGE - 1) &
	       ~(size_t)(STORE_PAGE - 1);
}

/* The record a put of (@key, @version) by @log writes. */
void store_rec_make(struct store_rec *r, uint64_t seed, uint32_t key,
		    uint32_t version, unsigned log);

/* Magic and CRC of @r hold. */
bool store_rec_ok(const struct store_rec *r);

/*
 * The key sequence of writer @log: what its first @n puts write, into
 * @out[0..n).  Keys are those with key % nlogs == log, chosen by the seed.
 */
void store_keys(uint64_t seed, unsigned log, unsigned nlogs, uint32_t nkeys,
		uint32_t n, struct store_kv *out);

/* Create a zeroed pool file of @size bytes (unprotected while created). */
int store_create_file(const char *path, size_t size);

/*
 * Open the pool at @path.  @protect: under the pool's domain (the shared
 * "pmem" domain), else a plain mapping (PMG_POOL_UNPROTECTED).
 */
int store_open(struct store *s, const char *path, unsigned nlogs,
	       uint32_t cap, bool protect);

/* Write the superblock (through pmg_memcpy_persist()). */
int store_format(struct store *s, uint64_t seed, uint32_t nkeys);

int store_close(struct store *s);

static inline struct store_rec *store_slot(const struct store *s,
					   unsigned log, uint32_t slot)
{
	return (struct store_rec *)(s->base + ((size_t)log * s->cap + slot) *
				    STORE_REC_SIZE);
}

static inline uint64_t *store_tail_ptr(const struct store *s, unsigned log)
{
	return (uint64_t *)(s->base + store_sb_off(s->nlogs, s->cap) +
			    64 * (1 + (size_t)log));
}

/*
 * Append @r as record @slot of @log: pmg_memcpy_persist() of the record,
 * then the tail stored in a write window and persisted.  Returns 0 or a
 * negative errno (pmg_errormsg() says what failed).
 */
int store_append(struct store *s, unsigned log, uint32_t slot,
		 const struct store_rec *r);

/* A write window on the store's pool (no-op for an unprotected pool). */
int store_window_open(struct store *s);
int store_window_close(struct store *s);

/*
 * Verify the store against the writers' key sequences @kv[log][0..n): the
 * superblock, every committed record (byte for byte and its CRC), every
 * key's latest value.  @done[log]: puts the writer finished (for "lost"),
 * or NULL.  @bad (nlogs * cap bytes, or NULL) gets 1 for each corrupted
 * record.  Returns 0, or -EINVAL if the superblock is unusable.
 */
int store_verify(const struct store *s, uint64_t seed, uint32_t nkeys,
		 struct store_kv *const *kv, const uint64_t *done,
		 uint8_t *bad, struct store_check *out);

#endif /* PMG_STORE_H */
