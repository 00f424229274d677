// SPDX-License-Identifier: MIT
/*
 * x86-64 PKU backend: keys from pkey_alloc(2), pages tagged with
 * pkey_mprotect(2), rights in the thread's PKRU (RDPKRU/WRPKRU, inline in
 * pmguard.h), the interrupted PKRU in the signal frame's XSAVE area.
 * Syscalls are raw so that an old libc without the wrappers still works.
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "arch/x86/ucontext.h"
#include "internal.h"

#ifndef SYS_pkey_mprotect
#define SYS_pkey_mprotect 329
#define SYS_pkey_alloc 330
#define SYS_pkey_free 331
#endif

#define FP_XSTATE_MAGIC1 0x46505853u
#define XFEATURE_PKRU 9

static int pku_probe(void)
{
	struct _pmg_cpu cpu;
	long k;

	_pmg_cpu_get(&cpu);
	if (!cpu.leaf7)
		return _pmg_err_s(-ENOTSUP, "the CPU has no CPUID leaf 7");
	if (!cpu.pku)
		return _pmg_err_s(-ENOTSUP,
				  "the CPU has no PKU (CPUID.7.ECX bit 3)");
	if (!cpu.ospke)
		return _pmg_err_s(-ENOTSUP, "the kernel has not enabled "
				  "PKU (CPUID.7.ECX OSPKE bit 4 clear)");
	/*
	 * Probe with access disabled: pkey_alloc() sets the caller's rights
	 * and pkey_free() does not reset them, so a probe with rights 0 would
	 * leave this thread (and every thread it creates) with read-write
	 * access to the key the first domain gets.
	 */
	k = syscall(SYS_pkey_alloc, 0, PMG_RIGHTS_AD);
	/* ENOSPC: keys work, other code holds them all: every domain is
	 * virtual (page protection) until one is freed (keys.c) */
	if (k < 0 && errno == ENOSPC)
		return 0;
	if (k < 0)
		return _pmg_err(-ENOTSUP, "pkey_alloc() failed: %s",
				strerror(errno));
	syscall(SYS_pkey_free, k);
	return 0;
}

static int pku_key_alloc(unsigned rights)
{
	long k = syscall(SYS_pkey_alloc, 0, rights & 3);

	return k < 0 ? -errno : (int)k;
}

static int pku_key_free(int key)
{
	return syscall(SYS_pkey_free, key) ? -errno : 0;
}

static int pku_tag(void *addr, size_t len, int key, unsigned rights)
{
	/* a key carries the rights; without one (a virtual domain) the
	 * pages do, key 0 */
	return syscall(SYS_pkey_mprotect, addr, len,
		       key ? PROT_READ | PROT_WRITE : _pmg_prot_of(rights), key)
		       ? -errno
		       : 0;
}

/* Read-write, key 0: as the program's own mprotect() left the pages, if
 * it changed them meanwhile (caps.c remembers it). */
static int pku_untag(void *addr, size_t len)
{
	return _pmg_cap_pkey_mprotect((uintptr_t)addr, (uintptr_t)addr + len,
				      PROT_READ | PROT_WRITE, 0);
}

static int pku_set_rights(int key, unsigned rights)
{
	uint32_t v = _pmg_rdpkru();
	uint32_t nv = pmg_pkval_update(v, (unsigned)key, rights);

	if (nv != v)
		_pmg_wrpkru(nv);
	return 0;
}

/* A domain without a key on PKU is a virtual one: no key to name. */
static int pku_paged_key(int dom)
{
	(void)dom;
	return -ENOKEY;
}

/* Unconditional: the handler's register is not the thread's. */
static uint32_t pku_handler_rights(void)
{
	uint32_t v = _pmg_rdpkru();

	_pmg_wrpkru(_pmg_keytab_defaults(&_pmg.keytab, v));
	return v;
}

/* Conditional: a new thread's register is most often the defaults
 * already (the kernel's init value, the keys allocated write-disabled). */
static void pku_rights_reset(void)
{
	uint32_t v = _pmg_rdpkru(), nv;

	nv = _pmg_keytab_defaults(&_pmg.keytab, v);
	if (nv != v)
		_pmg_wrpkru(nv);
}

static uint32_t pku_rights_open(uint32_t mask)
{
	uint32_t v = _pmg_rdpkru();

	_pmg_wrpkru(v & ~mask);
	return v;
}

void _pmg_pku_restore(uint32_t saved)
{
	_pmg_wrpkru(saved);
}

uint32_t _pmg_pku_all_readable(void)
{
	uint32_t v = _pmg_rdpkru();

	_pmg_wrpkru((v & 3u) | 0xaaaaaaa8u);
	return v;
}

/*
 * The PKRU that sigreturn will load: XSAVE component 9 of the frame's
 * extended state, at the offset CPUID.(0xD,9).EBX gave.  The frame is
 * trusted only if the kernel marked it (FP_XSTATE_MAGIC1) and saved PKRU;
 * a component in init state (XSTATE_BV bit clear) reads as 0 and is made
 * explicit before anyone edits it.
 */
static uint32_t *pku_saved_reg(ucontext_t *uc)
{
	unsigned char *fx = pmg_uc_xsave(uc);
	uint32_t magic1, xstate_size;
	uint64_t xfeatures, bv;
	struct _pmg_cpu cpu;
	unsigned off;

	_pmg_cpu_get(&cpu);
	off = cpu.xsave_pkru_off;
	if (!fx || !off)
		return NULL;
	memcpy(&magic1, fx + 464, 4);
	memcpy(&xfeatures, fx + 464 + 8, 8);
	memcpy(&xstate_size, fx + 464 + 16, 4);
	if (magic1 != FP_XSTATE_MAGIC1 ||
	    !(xfeatures & (1ull << XFEATURE_PKRU)) ||
	    off + 4 > xstate_size)
		return NULL;
	memcpy(&bv, fx + 512, 8);
	if (!(bv & (1ull << XFEATURE_PKRU))) {
		memset(fx + off, 0, 4);
		bv |= 1ull << XFEATURE_PKRU;
		memcpy(fx + 512, &bv, 8);
	}
	return (uint32_t *)(void *)(fx + off);
}

/* How many keys pkey_alloc() would still give this process (pmg_get_info()):
 * all of them allocated, then freed. */
int _pmg_pku_free_keys(void)
{
	int keys[PMG_NR_KEYS], n = 0, k;

	while (n < PMG_NR_KEYS) {
		/* AD: pkey_free() leaves the caller's rights as they are */
		k = (int)syscall(SYS_pkey_alloc, 0, PMG_RIGHTS_AD);
		if (k < 0)
			break;
		keys[n++] = k;
	}
	for (k = 0; k < n; k++)
		syscall(SYS_pkey_free, keys[k]);
	return n;
}

const struct _pmg_prim _pmg_prim_pku = {
	.id = PMG_BACKEND_PKU,
	.thread_local = true,
	.page_keys = true,
	.probe = pku_probe,
	.key_alloc = pku_key_alloc,
	.key_free = pku_key_free,
	.tag = pku_tag,
	.untag = pku_untag,
	.set_rights = pku_set_rights,
	.saved_reg = pku_saved_reg,
	.paged_key = pku_paged_key,
	.handler_rights = pku_handler_rights,
	.rights_open = pku_rights_open,
	.rights_restore = _pmg_pku_restore,
	.rights_reset = pku_rights_reset,
};
