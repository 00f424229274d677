// SPDX-License-Identifier: MIT
/*
 * The demo's persistent key-value store (tools/lab/store.h): per-writer
 * append logs of checksummed 64-byte records on one pmguard pool.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

_Static_assert(sizeof(struct store_rec) == STORE_REC_SIZE,
	       "a record is one 64-byte cache line");
_Static_assert(sizeof(struct store_sb) <= 64, "header fits its line");

static uint32_t crc_tab[256];

void store_init(void)
{
	uint32_t i, j, c;

	for (i = 0; i < 256; i++) {
		c = i;
		for (j = 0; j < 8; j++)
			c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
		crc_tab[i] = c;
	}
}

uint32_t store_crc(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint32_t c = ~0u;

	while (n--)
		c = crc_tab[(c ^ *b++) & 0xff] ^ (c >> 8);
	return ~c;
}

static uint64_t mix64(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

size_t store_pool_size(unsigned nlogs, uint32_t cap)
{
	size_t tails = 64 * (1 + (size_t)nlogs);

	return store_sb_off(nlogs, cap) +
	       ((tails + STORE_PAGE - 1) & ~(size_t)(STORE_PAGE - 1));
}

void store_rec_make(struct store_rec *r, uint64_t seed, uint32_t key,
		    uint32_t version, unsigned log)
{
	uint64_t h = mix64(seed ^ ((uint64_t)key << 32 | version));
	size_t i;

	memset(r, 0, sizeof(*r));
	r->magic = STORE_REC_MAGIC;
	r->key = key;
	r->version = version;
	r->log = (uint16_t)log;
	for (i = 0; i < STORE_VAL_SIZE; i++) {
		if (i % 8 == 0)
			h = mix64(h);
		r->val[i] = (uint8_t)(h >> (8 * (i % 8)));
	}
	r->crc = store_crc(r, offsetof(struct store_rec, crc));
}

bool store_rec_ok(const struct store_rec *r)
{
	return r->magic == STORE_REC_MAGIC &&
	       r->crc == store_crc(r, offsetof(struct store_rec, crc));
}

void store_keys(uint64_t seed, unsigned log, unsigned nlogs, uint32_t nkeys,
		uint32_t n, struct store_kv *out)
{
	uint32_t own = nkeys / nlogs + (log < nkeys % nlogs), i, j;
	uint32_t *ver = calloc(own ? own : 1, sizeof(*ver));
	uint64_t rng = mix64(seed ^ 0x6b657973ull ^ ((uint64_t)log << 48));

	for (i = 0; i < n; i++) {
		rng = mix64(rng);
		j = own ? (uint32_t)(rng % own) : 0;
		out[i].key = log + j * nlogs;
		out[i].version = ver ? ++ver[j] : 1;
	}
	free(ver);
}

int store_create_file(const char *path, size_t size)
{
	struct pmg_pool_config *cfg = NULL;
	struct pmg_pool *p = NULL;
	int rc;

	rc = pmg_pool_config_new(&cfg);
	if (!rc)
		rc = pmg_pool_config_set_size(cfg, size);
	if (!rc)
		rc = pmg_pool_config_set_flags(cfg, PMG_POOL_UNPROTECTED |
						    PMG_POOL_OVERWRITE);
	if (!rc)
		rc = pmg_pool_create(&p, path, cfg);
	pmg_pool_config_delete(&cfg);
	if (!rc)
		rc = pmg_pool_close(&p);
	return rc;
}

int store_open(struct store *s, const char *path, unsigned nlogs,
	       uint32_t cap, bool protect)
{
	struct pmg_pool_config *cfg = NULL;
	int rc;

	memset(s, 0, sizeof(*s));
	rc = pmg_pool_config_new(&cfg);
	if (!rc && !protect)
		rc = pmg_pool_config_set_flags(cfg, PMG_POOL_UNPROTECTED);
	if (!rc)
		rc = pmg_pool_open(&s->pool, path, cfg);
	pmg_pool_config_delete(&cfg);
	if (rc)
		return rc;
	s->base = pmg_pool_address(s->pool);
	s->size = pmg_pool_size(s->pool);
	s->nlogs = nlogs;
	s->cap = cap;
	if (s->size < store_pool_size(nlogs, cap)) {
		pmg_pool_close(&s->pool);
		return -ERANGE;
	}
	return 0;
}

int store_format(struct store *s, uint64_t seed, uint32_t nkeys)
{
	struct store_sb sb = {
		.magic = STORE_SB_MAGIC,
		.seed = seed,
		.nlogs = s->nlogs,
		.cap = s->cap,
		.nkeys = nkeys,
	};

	sb.crc = store_crc(&sb, offsetof(struct store_sb, crc));
	if (!pmg_memcpy_persist(s->base + store_sb_off(s->nlogs, s->cap), &sb,
				sizeof(sb)))
		return -errno;
	return 0;
}

int store_close(struct store *s)
{
	s->base = NULL;
	return pmg_pool_close(&s->pool);
}

int store_window_open(struct store *s)
{
	return pmg_dax_mk_readwrite(s->pool);
}

int store_window_close(struct store *s)
{
	return pmg_dax_mk_noaccess(s->pool);
}

int store_append(struct store *s, unsigned log, uint32_t slot,
		 const struct store_rec *r)
{
	uint64_t *tail = store_tail_ptr(s, log);
	int rc;

	if (!pmg_memcpy_persist(store_slot(s, log, slot), r, sizeof(*r)))
		return -errno;
	rc = store_window_open(s);
	if (rc)
		return rc;
	__atomic_store_n(tail, (uint64_t)slot + 1, __ATOMIC_RELEASE);
	rc = store_window_close(s);
	if (rc)
		return rc;
	return pmg_persist(tail, sizeof(*tail));
}

int store_verify(const struct store *s, uint64_t seed, uint32_t nkeys,
		 struct store_kv *const *kv, const uint64_t *done,
		 uint8_t *bad, struct store_check *out)
{
	const struct store_sb *sb =
		(const void *)(s->base + store_sb_off(s->nlogs, s->cap));
	struct store_rec want;
	uint32_t *latest;		/* key -> 1 + global slot of latest */
	unsigned l;
	uint64_t i;

	memset(out, 0, sizeof(*out));
	out->sb_ok = sb->magic == STORE_SB_MAGIC && sb->seed == seed &&
		     sb->nlogs == s->nlogs && sb->cap == s->cap &&
		     sb->nkeys == nkeys &&
		     sb->crc == store_crc(sb, offsetof(struct store_sb, crc));
	if (!out->sb_ok)
		return -EINVAL;
	latest = calloc(nkeys ? nkeys : 1, sizeof(*latest));
	if (!latest)
		return -ENOMEM;
	for (l = 0; l < s->nlogs; l++) {
		uint64_t tail = __atomic_load_n(store_tail_ptr(s, l),
						 __ATOMIC_ACQUIRE);

		if (tail > s->cap)
			tail = s->cap;
		if (done && done[l] > tail)
			out->lost += done[l] - tail;
		out->records += tail;
		for (i = 0; i < tail; i++) {
			const struct store_rec *r = store_slot(s, l,
							       (uint32_t)i);
			bool ok;

			store_rec_make(&want, seed, kv[l][i].key,
				       kv[l][i].version, l);
			ok = !memcmp(r, &want, sizeof(want));
			if (!store_rec_ok(r))
				out->crc_failures++;
			if (!ok)
				out->corrupted++;
			if (bad)
				bad[(size_t)l * s->cap + i] = !ok;
			if (kv[l][i].key < nkeys)
				latest[kv[l][i].key] =
					(uint32_t)((size_t)l * s->cap + i + 1);
		}
	}
	/* Every key's value: its latest committed record must read back. */
	for (i = 0; i < nkeys; i++) {
		uint32_t g = latest[i];
		const struct store_rec *r;

		if (!g--)
			continue;
		r = (const void *)(s->base + (size_t)g * STORE_REC_SIZE);
		store_rec_make(&want, seed, (uint32_t)i,
			       kv[g / s->cap][g % s->cap].version,
			       (unsigned)(g / s->cap));
		if (!store_rec_ok(r) || memcmp(r, &want, sizeof(want)))
			out->bad_keys++;
	}
	free(latest);
	return 0;
}
