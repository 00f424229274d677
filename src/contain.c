// SPDX-License-Identifier: MIT
/*
 * Contain mode's decoder: which bytes does the faulting instruction write?
 *
 * Zydis 4 decodes the instruction at RIP (its bytes read without a load
 * that could fault: fetch()); every memory operand it writes
 * (explicit or hidden, conditional writes included) gets its effective
 * address from the interrupted registers: segment base (fs/gs only, as in
 * 64-bit mode) + base + index * scale + displacement, truncated to the
 * address size; RIP-relative operands are relative to the next
 * instruction; push/call (hidden writes through rsp) write below rsp.
 * Sizes are the operand's: for a masked vector store (AVX-512 {k}) the
 * whole vector width, though the mask may leave some elements unwritten;
 * saving and restoring those unwritten bytes changes nothing (fault.c
 * does not touch the unprotected ones it cannot read, and writes back
 * only the bytes the instruction changed).  rep
 * movs/stos write one element per iteration, and the trap flag stops after
 * each iteration, so one element is the range; d->rep and d->elem let the
 * fault path handle a run of iterations at once instead.  bts/btr/btc with
 * a register bit offset use bit-string addressing: the operand-sized chunk
 * at ea + size * floor(offset / bits), the offset signed.
 *
 * A base register may be moved (d->wr[].base >= 0) only when that changes
 * nothing but the address: it is not also the index, and no other operand
 * (register or address, explicit or hidden) reads or writes it, except the
 * pointer a string instruction advances.  mov [rax+rax], add [rdi], rdi,
 * cmpxchg [rax], rcx (rax the hidden comparand), xchg [rax], rax: base -1.
 *
 * pop [rsp+x] takes its address after rsp is incremented.
 *
 * What cannot be contained (d->why): scatter stores (one range per vector
 * element, not known without the mask), xsave/fxsave and friends (size
 * from the feature mask), movdir64b/enqcmd (64-byte posted writes),
 * clzero (the cache line around rax), writes over PMG_CT_MAXLEN bytes,
 * and anything Zydis cannot decode.  Implicit stack writes (d->wr[].stack)
 * fall back to strict in fault.c when they hit protected memory.
 *
 * Everything here is async-signal-safe: no allocation, no locks, the
 * system calls are arch_prctl for an fs/gs base and process_vm_readv or
 * pread (/proc/self/mem) for the instruction's bytes.
 */
#define _GNU_SOURCE
#include <Zydis/Zydis.h>
#include <asm/prctl.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "contain.h"

static int greg_of(ZydisRegister r)
{
	/* not a general-purpose register class to Zydis: no enclosing */
	if (r == ZYDIS_REGISTER_RIP)
		return REG_RIP;
	switch (ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64,
						 r)) {
	case ZYDIS_REGISTER_RAX: return REG_RAX;
	case ZYDIS_REGISTER_RCX: return REG_RCX;
	case ZYDIS_REGISTER_RDX: return REG_RDX;
	case ZYDIS_REGISTER_RBX: return REG_RBX;
	case ZYDIS_REGISTER_RSP: return REG_RSP;
	case ZYDIS_REGISTER_RBP: return REG_RBP;
	case ZYDIS_REGISTER_RSI: return REG_RSI;
	case ZYDIS_REGISTER_RDI: return REG_RDI;
	case ZYDIS_REGISTER_R8: return REG_R8;
	case ZYDIS_REGISTER_R9: return REG_R9;
	case ZYDIS_REGISTER_R10: return REG_R10;
	case ZYDIS_REGISTER_R11: return REG_R11;
	case ZYDIS_REGISTER_R12: return REG_R12;
	case ZYDIS_REGISTER_R13: return REG_R13;
	case ZYDIS_REGISTER_R14: return REG_R14;
	case ZYDIS_REGISTER_R15: return REG_R15;
	case ZYDIS_REGISTER_RIP: return REG_RIP;
	default: return -1;
	}
}

/* The value of a general register (its width's bits), or -1 for none. */
static int reg_value(const ucontext_t *uc, ZydisRegister r, uint64_t *v)
{
	int g;
	unsigned bits;

	if (r == ZYDIS_REGISTER_NONE) {
		*v = 0;
		return 0;
	}
	g = greg_of(r);
	if (g < 0)
		return -1;
	*v = (uint64_t)uc->uc_mcontext.gregs[g];
	bits = ZydisRegisterGetWidth(ZYDIS_MACHINE_MODE_LONG_64, r);
	if (bits && bits < 64)
		*v &= (1ull << bits) - 1;
	return 0;
}

/*
 * May the base register of written operand @i be moved to redirect the
 * write?  Only if nothing else uses it: not the index, no other operand
 * (registers, other operands' addresses), except the pointer register a
 * string instruction advances (then PMG_CT_BASE_STEP).
 */
static void redirectable(const ZydisDecodedInstruction *in,
			 const ZydisDecodedOperand *op, unsigned i,
			 struct _pmg_wr *w)
{
	int b = greg_of(op[i].mem.base);
	int kind = PMG_CT_BASE_KEEP;
	unsigned k;

	if (b < 0 || greg_of(op[i].mem.index) == b)
		return;
	for (k = 0; k < in->operand_count; k++) {
		const ZydisDecodedOperand *q = &op[k];

		if (k == i)
			continue;
		if (q->type == ZYDIS_OPERAND_TYPE_MEMORY) {
			if (greg_of(q->mem.base) == b ||
			    greg_of(q->mem.index) == b)
				return;
		} else if (q->type == ZYDIS_OPERAND_TYPE_REGISTER &&
			   greg_of(q->reg.value) == b) {
			if (in->meta.category != ZYDIS_CATEGORY_STRINGOP ||
			    q->visibility != ZYDIS_OPERAND_VISIBILITY_HIDDEN)
				return;
			kind = PMG_CT_BASE_STEP;
		}
	}
	w->base = b;
	w->base_kind = kind;
}

static bool uncontainable(ZydisMnemonic m)
{
	switch (m) {
	case ZYDIS_MNEMONIC_XSAVE: case ZYDIS_MNEMONIC_XSAVE64:
	case ZYDIS_MNEMONIC_XSAVEC: case ZYDIS_MNEMONIC_XSAVEC64:
	case ZYDIS_MNEMONIC_XSAVEOPT: case ZYDIS_MNEMONIC_XSAVEOPT64:
	case ZYDIS_MNEMONIC_XSAVES: case ZYDIS_MNEMONIC_XSAVES64:
	case ZYDIS_MNEMONIC_FXSAVE: case ZYDIS_MNEMONIC_FXSAVE64:
	case ZYDIS_MNEMONIC_FNSAVE: case ZYDIS_MNEMONIC_FNSTENV:
	case ZYDIS_MNEMONIC_MOVDIR64B: case ZYDIS_MNEMONIC_ENQCMD:
	case ZYDIS_MNEMONIC_ENQCMDS:
	case ZYDIS_MNEMONIC_CLZERO: /* the cache line around rax */
		return true;
	default:
		return false;
	}
}

/*
 * The instruction's bytes at @ip into @buf (up to 15), never by a load
 * that could fault in the handler: process_vm_readv() on our own process
 * (a short count where the bytes after the instruction are not mapped);
 * where it fails or is short, /proc/self/mem, which also reads
 * execute-only code
 * (PROT_EXEC alone: on a PKU machine the kernel gives it a protection
 * key the handler has access-disabled, and no VM_READ).  Where both are
 * refused (seccomp), the bytes the CPU must have fetched: those up to the
 * page's end, the next page's only when the instruction crosses into it
 * (@direct).  The count read.
 */
static size_t fetch(uintptr_t ip, uint8_t *buf, bool *direct)
{
	struct iovec l = { buf, ZYDIS_MAX_INSTRUCTION_LENGTH };
	struct iovec r = { (void *)ip, ZYDIS_MAX_INSTRUCTION_LENGTH };
	ssize_t n = process_vm_readv(getpid(), &l, 1, &r, 1, 0);
	size_t to_end = 4096 - (ip & 4095);
	int fd;

	/* short: the rest may be execute-only (no VM_READ) code */
	if (n < ZYDIS_MAX_INSTRUCTION_LENGTH &&
	    (fd = _pmg_self_mem_fd()) >= 0) {
		uint8_t more[ZYDIS_MAX_INSTRUCTION_LENGTH];
		ssize_t m = pread(fd, more, sizeof(more), (off_t)ip);

		if (m > n) {
			memcpy(buf, more, (size_t)m);
			n = m;
		}
	}
	*direct = n <= 0;
	if (n > 0)
		return (size_t)n;
	if (to_end > ZYDIS_MAX_INSTRUCTION_LENGTH)
		to_end = ZYDIS_MAX_INSTRUCTION_LENGTH;
	memcpy(buf, (const void *)ip, to_end);
	return to_end;
}

int _pmg_contain_decode(const ucontext_t *uc, struct _pmg_decoded *d)
{
	ZydisDecoder dec;
	ZydisFormatter fmt;
	ZydisDecodedInstruction in;
	ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];
	uintptr_t ip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	uint8_t code[ZYDIS_MAX_INSTRUCTION_LENGTH];
	bool direct;
	size_t ncode = fetch(ip, code, &direct);
	ZyanStatus st;
	unsigned i;

	d->nwr = 0;
	d->len = 0;
	d->rep = PMG_CT_REP_NONE;
	d->elem = 0;
	d->why = NULL;
	memcpy(d->text, "(undecoded)", sizeof("(undecoded)"));
	if (!ZYAN_SUCCESS(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64,
					   ZYDIS_STACK_WIDTH_64))) {
		d->why = "the instruction could not be decoded";
		return -1;
	}
	st = ZydisDecoderDecodeFull(&dec, code, ncode, &in, op);
	if (st == ZYDIS_STATUS_NO_MORE_DATA && direct &&
	    ncode < ZYDIS_MAX_INSTRUCTION_LENGTH) {
		/* fetch()'s fallback: the instruction crosses the page end,
		 * so the CPU fetched the next page too */
		memcpy(code, (const void *)ip, ZYDIS_MAX_INSTRUCTION_LENGTH);
		ncode = ZYDIS_MAX_INSTRUCTION_LENGTH;
		st = ZydisDecoderDecodeFull(&dec, code, ncode, &in, op);
	}
	if (!ZYAN_SUCCESS(st)) {
		d->why = "the instruction could not be decoded";
		return -1;
	}
	d->len = in.length;
	if (ZYAN_SUCCESS(ZydisFormatterInit(&fmt,
					    ZYDIS_FORMATTER_STYLE_INTEL))) {
		ZydisFormatterSetProperty(&fmt,
				ZYDIS_FORMATTER_PROP_HEX_UPPERCASE, 0);
		ZydisFormatterSetProperty(&fmt,
				ZYDIS_FORMATTER_PROP_FORCE_SIZE, 1);
		if (!ZYAN_SUCCESS(ZydisFormatterFormatInstruction(&fmt, &in,
				op, in.operand_count_visible, d->text,
				sizeof(d->text), ip, NULL)))
			memcpy(d->text, "(unformatted)",
			       sizeof("(unformatted)"));
	}
	if (uncontainable(in.mnemonic)) {
		d->why = "its written range is not determinable here "
			 "(xsave/fxsave/movdir64b/enqcmd/clzero)";
		return -1;
	}
	for (i = 0; i < in.operand_count; i++) {
		const ZydisDecodedOperand *o = &op[i];
		uint64_t base, index, seg = 0, a;
		size_t len;

		if (o->type != ZYDIS_OPERAND_TYPE_MEMORY ||
		    !(o->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE))
			continue;
		if (o->mem.type == ZYDIS_MEMOP_TYPE_VSIB) {
			d->why = "scatter store: one write per vector element";
			return -1;
		}
		if (o->mem.type != ZYDIS_MEMOP_TYPE_MEM) {
			d->why = "unknown memory operand type";
			return -1;
		}
		len = o->size / 8;
		if (len == 0 || len > PMG_CT_MAXLEN) {
			d->why = "written size unknown or over 64 bytes";
			return -1;
		}
		if (d->nwr == PMG_CT_MAXWR) {
			d->why = "more than two written memory operands";
			return -1;
		}
		if (reg_value(uc, o->mem.base, &base) ||
		    reg_value(uc, o->mem.index, &index)) {
			d->why = "address register not a general register";
			return -1;
		}
		if (o->mem.base == ZYDIS_REGISTER_RIP)
			base += in.length;
		if (o->mem.segment == ZYDIS_REGISTER_FS ||
		    o->mem.segment == ZYDIS_REGISTER_GS) {
			unsigned long sb = 0;

			if (syscall(SYS_arch_prctl,
				    o->mem.segment == ZYDIS_REGISTER_FS
					    ? ARCH_GET_FS : ARCH_GET_GS,
				    &sb)) {
				d->why = "fs/gs base unreadable";
				return -1;
			}
			seg = sb;
		}
		a = base + index * (o->mem.scale ? o->mem.scale : 1) +
		    (uint64_t)o->mem.disp.value;
		/* push, call, pushf, enter: the hidden rsp operand is
		 * written below the stack pointer */
		if (o->visibility == ZYDIS_OPERAND_VISIBILITY_HIDDEN &&
		    (o->mem.base == ZYDIS_REGISTER_RSP ||
		     o->mem.base == ZYDIS_REGISTER_ESP) &&
		    (in.mnemonic == ZYDIS_MNEMONIC_PUSH ||
		     in.mnemonic == ZYDIS_MNEMONIC_PUSHFQ ||
		     in.mnemonic == ZYDIS_MNEMONIC_PUSHF ||
		     in.mnemonic == ZYDIS_MNEMONIC_CALL ||
		     in.mnemonic == ZYDIS_MNEMONIC_ENTER))
			a -= len;
		/* pop [rsp+x]: the address is taken after rsp is
		 * incremented by the operand size */
		if (in.mnemonic == ZYDIS_MNEMONIC_POP &&
		    o->visibility == ZYDIS_OPERAND_VISIBILITY_EXPLICIT &&
		    greg_of(o->mem.base) == REG_RSP)
			a += len;
		if ((in.mnemonic == ZYDIS_MNEMONIC_BTS ||
		     in.mnemonic == ZYDIS_MNEMONIC_BTR ||
		     in.mnemonic == ZYDIS_MNEMONIC_BTC) &&
		    i == 0 && in.operand_count_visible > 1 &&
		    op[1].type == ZYDIS_OPERAND_TYPE_REGISTER) {
			/* bit-string addressing: the register's signed
			 * offset selects a chunk of the operand's size */
			uint64_t off;
			unsigned bits = o->size;
			unsigned shift = bits == 16 ? 4 : bits == 32 ? 5 : 6;
			int64_t chunk;

			if (reg_value(uc, op[1].reg.value, &off) ||
			    (bits != 16 && bits != 32 && bits != 64)) {
				d->why = "bit offset register unreadable";
				return -1;
			}
			if (bits < 64 && (off & (1ull << (bits - 1))))
				off |= ~0ull << bits; /* sign-extend */
			chunk = (int64_t)off >> shift;
			a += (uint64_t)chunk * len;
		}
		if (in.address_width == 32)
			a &= 0xffffffffull;
		d->wr[d->nwr].addr = (uintptr_t)(a + seg);
		d->wr[d->nwr].len = len;
		d->wr[d->nwr].base = -1;
		d->wr[d->nwr].base_kind = PMG_CT_BASE_KEEP;
		/* push, call, enter, pushf: hidden, through rsp */
		d->wr[d->nwr].stack =
			o->visibility == ZYDIS_OPERAND_VISIBILITY_HIDDEN &&
			greg_of(o->mem.base) == REG_RSP;
		if (in.address_width == 64 &&
		    o->mem.base != ZYDIS_REGISTER_NONE &&
		    o->mem.base != ZYDIS_REGISTER_RSP &&
		    o->mem.base != ZYDIS_REGISTER_RIP &&
		    ZydisRegisterGetWidth(ZYDIS_MACHINE_MODE_LONG_64,
					  o->mem.base) == 64)
			redirectable(&in, op, i, &d->wr[d->nwr]);
		if (in.meta.category == ZYDIS_CATEGORY_STRINGOP &&
		    (in.attributes & ZYDIS_ATTRIB_HAS_REP) &&
		    in.address_width == 64 && i == 0) {
			if (in.mnemonic == ZYDIS_MNEMONIC_STOSB ||
			    in.mnemonic == ZYDIS_MNEMONIC_STOSW ||
			    in.mnemonic == ZYDIS_MNEMONIC_STOSD ||
			    in.mnemonic == ZYDIS_MNEMONIC_STOSQ)
				d->rep = PMG_CT_REP_STOS;
			else if ((in.mnemonic == ZYDIS_MNEMONIC_MOVSB ||
				  in.mnemonic == ZYDIS_MNEMONIC_MOVSW ||
				  in.mnemonic == ZYDIS_MNEMONIC_MOVSD ||
				  in.mnemonic == ZYDIS_MNEMONIC_MOVSQ) &&
				 in.operand_count > 1 &&
				 op[1].type == ZYDIS_OPERAND_TYPE_MEMORY &&
				 op[1].mem.segment != ZYDIS_REGISTER_FS &&
				 op[1].mem.segment != ZYDIS_REGISTER_GS)
				d->rep = PMG_CT_REP_MOVS;
			d->elem = (unsigned)len;
		}
		d->nwr++;
	}
	return 0;
}

/* /proc/self/mem, for contain mode's copies (fault.c: the saved bytes
 * read and put back through it; _pmg_contain_decode()'s reads). */
/*
 * The descriptor is checked before each use (issue 21, third pass): it
 * is this process's (a forked child inherits the parent's, which reads
 * and writes the parent's memory: the child's stray write stayed and the
 * parent's bytes were "restored"), and still /proc/self/mem (fstat(2):
 * device and inode as opened; a program that closed it and opened a file
 * of its own under that number got pwrite(2)s at the faulting address as
 * offset).  Otherwise a new one is opened; the old number is left alone
 * (it may be the program's now).  One word, pid << 32 | fd + 2 (0: none
 * yet), so that a thread never pairs one pid with another's descriptor.
 */
static uint64_t self_mem;
static dev_t self_mem_dev;
static ino_t self_mem_ino;

int _pmg_self_mem_fd(void)
{
	uint32_t pid = (uint32_t)getpid();
	uint64_t w = __atomic_load_n(&self_mem, __ATOMIC_ACQUIRE), nw;
	struct stat st;
	int fd;

	if (w && (uint32_t)(w >> 32) == pid) {
		fd = (int)(uint32_t)w - 2;
		if (fd < 0 || (!fstat(fd, &st) && st.st_dev == self_mem_dev &&
			       st.st_ino == self_mem_ino))
			return fd;
	}
	fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	if (fd >= 0 && fstat(fd, &st)) {
		close(fd);
		fd = -1;
	}
	if (fd >= 0) {
		self_mem_dev = st.st_dev;
		self_mem_ino = st.st_ino;
	}
	nw = ((uint64_t)pid << 32) | (uint32_t)(fd + 2);
	if (__atomic_compare_exchange_n(&self_mem, &w, nw, false,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return fd;
	/* another thread published one meanwhile: use none this time */
	if (fd >= 0)
		close(fd);
	return -1;
}
