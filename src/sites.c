// SPDX-License-Identifier: MIT
/*
 * Module table and allowed write sites.
 *
 * Report lines name the module and offset of a faulting instruction next to
 * its raw address, so that a person (or `pmguard report`) can find it in a
 * binary whatever the load address was.  dladdr() and dl_iterate_phdr()
 * take the loader's lock and are not async-signal-safe, so the table is
 * built outside the handler: once when the library is loaded (a
 * constructor) and again whenever `pmguard run`'s adapters see a library
 * loaded later (_pmg_modules_refresh()).  The handler reads it under a
 * sequence count and gives up after a few tries rather than spin: a report
 * then carries the raw address only.
 *
 * Allowed sites (`pmguard run --allow FILE`, written by `pmguard learn`)
 * are module path + offset pairs; each refresh turns them into absolute
 * addresses in a lock-free open-addressing set the fault path reads.  A
 * site of a module that was unloaded stays in the set (addresses are only
 * added): a new module at the same address could inherit it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "sites.h"

#define PMG_MODS 256
#define PMG_MOD_PATH 240
#define PMG_ALLOW_BITS 12
#define PMG_ALLOW (1u << PMG_ALLOW_BITS)	/* allowed addresses */

struct mod {
	uintptr_t lo, hi;	/* PT_LOAD extent */
	uintptr_t bias;		/* load bias: offset = ip - bias */
	char path[PMG_MOD_PATH];
};

static pthread_mutex_t mods_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mod mods[PMG_MODS];
static unsigned nmods;
static unsigned mods_seq;	/* odd while the table is rewritten */

/* Allowed sites as read from the file (resolved at each refresh). */
struct site {
	char *path;
	uintptr_t off;
};
static struct site *want;
static size_t nwant;

static uintptr_t allow_ip[PMG_ALLOW];
static uint64_t allow_hits;

/* ---- building the table (not AS-safe) ---- */

struct scan {
	struct mod *m;
	unsigned n;
};

static int scan_one(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct scan *s = arg;
	struct mod *m;
	const char *name = info->dlpi_name;
	char buf[PATH_MAX];
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	int i;

	(void)size;
	if (s->n >= PMG_MODS)
		return 1;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD)
			continue;
		if (info->dlpi_addr + ph->p_vaddr < lo)
			lo = info->dlpi_addr + ph->p_vaddr;
		if (info->dlpi_addr + ph->p_vaddr + ph->p_memsz > hi)
			hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
	}
	if (lo >= hi)
		return 0;
	m = &s->m[s->n++];
	m->lo = lo;
	m->hi = hi;
	m->bias = info->dlpi_addr;
	if (!name || !*name) {
		/* the main program (or the vdso, which has a name) */
		ssize_t r = readlink("/proc/self/exe", buf, sizeof(buf) - 1);

		buf[r > 0 ? r : 0] = 0;
		name = buf;
	} else if (realpath(name, buf)) {
		name = buf;
	}
	/* a longer path is cut (it then matches no sites file line) */
	for (i = 0; name[i] && i + 1 < (int)sizeof(m->path); i++)
		m->path[i] = name[i];
	m->path[i] = 0;
	return 0;
}

static void allow_add(uintptr_t ip)
{
	bool fresh;

	(void)_pmg_ip_slot(allow_ip, sizeof(allow_ip[0]), PMG_ALLOW_BITS, ip,
			   true, &fresh);
}

static bool known(const struct mod *old, unsigned nold, const struct mod *m)
{
	unsigned i;

	for (i = 0; i < nold; i++)
		if (old[i].bias == m->bias && !strcmp(old[i].path, m->path))
			return true;
	return false;
}

void _pmg_modules_refresh(int fd)
{
	static struct mod fresh[PMG_MODS], old[PMG_MODS];
	struct scan s = { fresh, 0 };
	unsigned i, nold;
	size_t k;

	pthread_mutex_lock(&mods_lock);
	dl_iterate_phdr(scan_one, &s);
	nold = nmods;
	memcpy(old, mods, sizeof(mods[0]) * nold);
	__atomic_add_fetch(&mods_seq, 1, __ATOMIC_ACQ_REL);
	memcpy(mods, fresh, sizeof(mods[0]) * s.n);
	__atomic_store_n(&nmods, s.n, __ATOMIC_RELAXED);
	__atomic_add_fetch(&mods_seq, 1, __ATOMIC_ACQ_REL);
	for (i = 0; fd >= 0 && i < s.n; i++) {
		if (known(old, nold, &fresh[i]) && nold)
			continue;
		dprintf(fd, "pmguard: module %#lx %#lx-%#lx %s\n",
			(unsigned long)fresh[i].bias,
			(unsigned long)fresh[i].lo, (unsigned long)fresh[i].hi,
			fresh[i].path);
	}
	for (k = 0; k < nwant; k++)
		for (i = 0; i < s.n; i++)
			if (!strcmp(fresh[i].path, want[k].path))
				allow_add(fresh[i].bias + want[k].off);
	pthread_mutex_unlock(&mods_lock);
}

__attribute__((constructor)) static void sites_ctor(void)
{
	_pmg_modules_refresh(-1);
}

/* ---- reading it (AS-safe) ---- */

bool _pmg_module_of(uintptr_t ip, char *path, size_t n, uintptr_t *off)
{
	int tries;

	for (tries = 0; tries < 4; tries++) {
		unsigned s1 = __atomic_load_n(&mods_seq, __ATOMIC_ACQUIRE);
		unsigned i, nm = __atomic_load_n(&nmods, __ATOMIC_RELAXED);
		bool found = false;

		if (s1 & 1)
			continue;
		for (i = 0; i < nm && i < PMG_MODS; i++) {
			size_t j;

			if (ip < mods[i].lo || ip >= mods[i].hi)
				continue;
			for (j = 0; j + 1 < n && mods[i].path[j]; j++)
				path[j] = mods[i].path[j];
			if (n)
				path[j] = 0;
			*off = ip - mods[i].bias;
			found = true;
			break;
		}
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&mods_seq, __ATOMIC_RELAXED) == s1)
			return found;
	}
	return false;
}

void _pmg_site_fmt(struct _pmg_buf *b, uintptr_t ip)
{
	char path[PMG_MOD_PATH];
	uintptr_t off;

	if (!_pmg_module_of(ip, path, sizeof(path), &off))
		return;
	_pmg_buf_str(b, " (");
	_pmg_buf_str(b, path);
	_pmg_buf_str(b, "+");
	_pmg_buf_hex(b, off);
	_pmg_buf_str(b, ")");
}

int _pmg_ip_slot(uintptr_t *keys, size_t stride, unsigned bits,
		 uintptr_t ip, bool claim, bool *claimed)
{
	unsigned i, n = 1u << bits;
	unsigned h = (unsigned)((ip * 0x9E3779B97F4A7C15ull) >> (64 - bits));

	if (!ip)
		return -1;
	for (i = 0; i < n; i++) {
		unsigned s = (h + i) & (n - 1);
		uintptr_t *k = (uintptr_t *)((char *)keys + (size_t)s * stride);
		uintptr_t cur = __atomic_load_n(k, __ATOMIC_ACQUIRE);

		if (cur == 0) {
			if (!claim)
				return -1;
			if (__atomic_compare_exchange_n(k, &cur, ip, false,
							__ATOMIC_ACQ_REL,
							__ATOMIC_ACQUIRE)) {
				*claimed = true;
				return (int)s;
			}
			/* another thread took it: cur is its address */
		}
		if (cur == ip) {
			if (claim)
				*claimed = false;
			return (int)s;
		}
	}
	return -1;
}

bool _pmg_site_allowed(uintptr_t ip)
{
	if (_pmg_ip_slot(allow_ip, sizeof(allow_ip[0]), PMG_ALLOW_BITS, ip,
			 false, NULL) < 0)
		return false;
	__atomic_add_fetch(&allow_hits, 1, __ATOMIC_RELAXED);
	return true;
}

uint64_t _pmg_sites_hits(void)
{
	return __atomic_load_n(&allow_hits, __ATOMIC_RELAXED);
}

/* ---- the sites file ---- */

/* @s with the escapes `pmguard learn` writes (\ooo for every blank of
 * the C locale's isspace(), every byte that is not printable ASCII and
 * the backslash: /proc/mounts' form, so that a path stays one word)
 * undone in place; a backslash not followed by three octal digits stays
 * as it is. */
static void unescape(char *s)
{
	char *d = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
				      (s[3] - '0'));
			s += 3;
		} else {
			*d++ = *s;
		}
	}
	*d = 0;
}

int _pmg_sites_load(int fd, const char *file)
{
	FILE *f = fdopen(fd, "r");
	char line[PATH_MAX + 128];
	unsigned lineno = 0;
	int n = 0;

	if (!f) {
		int e = errno;

		close(fd);
		return _pmg_err(-e, "sites file %s: %s", file, strerror(e));
	}
	while (fgets(line, sizeof(line), f)) {
		char *p = line, *plus, *end;
		unsigned long long off;
		struct site *nw;

		lineno++;
		/* a word ends at any blank isspace() knows (learn escapes
		 * them all in a path), as the merge's sscanf("%s") reads it */
		p[strcspn(p, " \t\n\v\f\r")] = 0;
		if (!*p || *p == '#')
			continue;
		plus = strrchr(p, '+');
		if (!plus || plus == p || strncmp(plus + 1, "0x", 2)) {
			fclose(f);
			return _pmg_err(-EINVAL, "sites file %s line %u: '%s' "
					"is not PATH+0xOFFSET", file, lineno,
					p);
		}
		errno = 0;
		off = strtoull(plus + 1, &end, 16);
		if (errno || *end) {
			fclose(f);
			return _pmg_err(-EINVAL, "sites file %s line %u: bad "
					"offset '%s'", file, lineno, plus + 1);
		}
		*plus = 0;
		unescape(p);
		nw = realloc(want, (nwant + 1) * sizeof(*want));
		if (!nw) {
			fclose(f);
			return _pmg_err(-ENOMEM, "sites file %s: out of memory",
					file);
		}
		want = nw;
		want[nwant].path = strdup(p);
		want[nwant].off = (uintptr_t)off;
		if (!want[nwant].path) {
			fclose(f);
			return _pmg_err(-ENOMEM, "sites file %s: out of memory",
					file);
		}
		nwant++;
		n++;
	}
	fclose(f);
	return n;
}
