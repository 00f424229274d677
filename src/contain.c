// SPDX-License-Identifier: MIT
/*
 * Contain mode, whole: a stray write is undone instead of ending the
 * process.  Two parts:
 *  - the decoder: which bytes does the faulting instruction write?
 *    (_pmg_contain_decode());
 *  - the undo: from the SIGSEGV handler (fault.c), the written protected
 *    bytes saved and the instruction run once with access, or against a
 *    per-thread scratch copy (its base register moved: redirect), then,
 *    from the SIGTRAP after that single step, the bytes put back and the
 *    write reported (_pmg_contain_begin(), _pmg_contain_end()); a run of
 *    rep stos/movs iterations at one fault, for contain and for audit
 *    (_pmg_rep_audit()).  The step's record is steps.c's; the handlers
 *    are fault.c's, above this file: nothing here calls into them.
 *
 * The decoder: Zydis 4 decodes the instruction at RIP (its bytes read without a load
 * that could fault: fetch()); every memory operand it writes
 * (explicit or hidden, conditional writes included) gets its effective
 * address from the interrupted registers: segment base (fs/gs only, as in
 * 64-bit mode) + base + index * scale + displacement, truncated to the
 * address size; RIP-relative operands are relative to the next
 * instruction; push/call (hidden writes through rsp) write below rsp.
 * Sizes are the operand's: for a masked vector store (AVX-512 {k}) the
 * whole vector width, though the mask may leave some elements unwritten;
 * saving and restoring those unwritten bytes changes nothing (the undo
 * does not touch the unprotected ones it cannot read, and writes back
 * only the bytes the instruction changed).  rep
 * movs/stos write one element per iteration, and the trap flag stops after
 * each iteration, so one element is the range; d->rep and d->elem let the
 * undo handle a run of iterations at once instead.  bts/btr/btc with
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
 * fall back to strict in the undo when they hit protected memory.
 *
 * Everything here is async-signal-safe: no allocation, no locks, the
 * system calls are arch_prctl for an fs/gs base and process_vm_readv or
 * pread (/proc/self/mem) for the instruction's bytes; the undo's are
 * mprotect(2), process_vm_readv/writev and pread/pwrite on
 * /proc/self/mem, and write(2) for its reports.
 */
#define _GNU_SOURCE
#include <Zydis/Zydis.h>
#include <asm/prctl.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "contain.h"
#include "hooks.h"
#include "internal.h"
#include "steps.h"

static int greg_of(ZydisRegister r)
{
	/* not a general-purpose register class to Zydis: no enclosing */
	if (r == ZYDIS_REGISTER_RIP)
		return PMG_X86_RIP;
	switch (ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64,
						 r)) {
	case ZYDIS_REGISTER_RAX:
		return PMG_X86_RAX;
	case ZYDIS_REGISTER_RCX:
		return PMG_X86_RCX;
	case ZYDIS_REGISTER_RDX:
		return PMG_X86_RDX;
	case ZYDIS_REGISTER_RBX:
		return PMG_X86_RBX;
	case ZYDIS_REGISTER_RSP:
		return PMG_X86_RSP;
	case ZYDIS_REGISTER_RBP:
		return PMG_X86_RBP;
	case ZYDIS_REGISTER_RSI:
		return PMG_X86_RSI;
	case ZYDIS_REGISTER_RDI:
		return PMG_X86_RDI;
	case ZYDIS_REGISTER_R8:
		return PMG_X86_R8;
	case ZYDIS_REGISTER_R9:
		return PMG_X86_R9;
	case ZYDIS_REGISTER_R10:
		return PMG_X86_R10;
	case ZYDIS_REGISTER_R11:
		return PMG_X86_R11;
	case ZYDIS_REGISTER_R12:
		return PMG_X86_R12;
	case ZYDIS_REGISTER_R13:
		return PMG_X86_R13;
	case ZYDIS_REGISTER_R14:
		return PMG_X86_R14;
	case ZYDIS_REGISTER_R15:
		return PMG_X86_R15;
	case ZYDIS_REGISTER_RIP:
		return PMG_X86_RIP;
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
	*v = pmg_uc_greg(uc, g);
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

/*
 * Fetch and decode the instruction at @ip into @in, @op; its length and
 * its text into @d.  0, or -1 with d->why.
 */
static int decode_insn(uintptr_t ip, ZydisDecodedInstruction *in,
		       ZydisDecodedOperand *op, struct _pmg_decoded *d)
{
	ZydisDecoder dec;
	ZydisFormatter fmt;
	uint8_t code[ZYDIS_MAX_INSTRUCTION_LENGTH];
	bool direct;
	size_t ncode = fetch(ip, code, &direct);
	ZyanStatus st;

	if (!ZYAN_SUCCESS(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64,
					   ZYDIS_STACK_WIDTH_64))) {
		d->why = "the instruction could not be decoded";
		return -1;
	}
	st = ZydisDecoderDecodeFull(&dec, code, ncode, in, op);
	if (st == ZYDIS_STATUS_NO_MORE_DATA && direct &&
	    ncode < ZYDIS_MAX_INSTRUCTION_LENGTH) {
		/* fetch()'s fallback: the instruction crosses the page end,
		 * so the CPU fetched the next page too */
		memcpy(code, (const void *)ip, ZYDIS_MAX_INSTRUCTION_LENGTH);
		ncode = ZYDIS_MAX_INSTRUCTION_LENGTH;
		st = ZydisDecoderDecodeFull(&dec, code, ncode, in, op);
	}
	if (!ZYAN_SUCCESS(st)) {
		d->why = "the instruction could not be decoded";
		return -1;
	}
	d->len = in->length;
	if (ZYAN_SUCCESS(ZydisFormatterInit(&fmt,
					    ZYDIS_FORMATTER_STYLE_INTEL))) {
		ZydisFormatterSetProperty(&fmt,
				ZYDIS_FORMATTER_PROP_HEX_UPPERCASE, 0);
		ZydisFormatterSetProperty(&fmt,
				ZYDIS_FORMATTER_PROP_FORCE_SIZE, 1);
		if (!ZYAN_SUCCESS(ZydisFormatterFormatInstruction(
			    &fmt, in, op, in->operand_count_visible, d->text,
			    sizeof(d->text), ip, NULL)))
			memcpy(d->text, "(unformatted)",
			       sizeof("(unformatted)"));
	}
	return 0;
}

/*
 * The refusals of one written memory operand (the @nwr-th): why it cannot
 * be contained, or NULL.  Scatter stores (vector SIB) write one range per
 * vector element; a masked vector store is taken whole, its size the
 * vector's.
 */
static const char *operand_refused(const ZydisDecodedOperand *o, unsigned nwr)
{
	size_t len = o->size / 8;

	if (o->mem.type == ZYDIS_MEMOP_TYPE_VSIB)
		return "scatter store: one write per vector element";
	if (o->mem.type != ZYDIS_MEMOP_TYPE_MEM)
		return "unknown memory operand type";
	if (len == 0 || len > PMG_CT_MAXLEN)
		return "written size unknown or over 64 bytes";
	if (nwr == PMG_CT_MAXWR)
		return "more than two written memory operands";
	return NULL;
}

/*
 * The operand's address from the interrupted registers: base + index *
 * scale + displacement (RIP-relative: from the next instruction) in @a,
 * the fs/gs segment base in @seg.  0, or -1 with d->why.
 */
static int operand_ea(const ucontext_t *uc, const ZydisDecodedInstruction *in,
		      const ZydisDecodedOperand *o, uint64_t *a, uint64_t *seg,
		      struct _pmg_decoded *d)
{
	uint64_t base, index;

	*seg = 0;
	if (reg_value(uc, o->mem.base, &base) ||
	    reg_value(uc, o->mem.index, &index)) {
		d->why = "address register not a general register";
		return -1;
	}
	if (o->mem.base == ZYDIS_REGISTER_RIP)
		base += in->length;
	if (o->mem.segment == ZYDIS_REGISTER_FS ||
	    o->mem.segment == ZYDIS_REGISTER_GS) {
		unsigned long sb = 0;

		if (syscall(SYS_arch_prctl,
			    o->mem.segment == ZYDIS_REGISTER_FS ? ARCH_GET_FS
								: ARCH_GET_GS,
			    &sb)) {
			d->why = "fs/gs base unreadable";
			return -1;
		}
		*seg = sb;
	}
	*a = base + index * (o->mem.scale ? o->mem.scale : 1) +
	     (uint64_t)o->mem.disp.value;
	return 0;
}

/*
 * Stack instructions: push, call, pushf, enter write their hidden rsp
 * operand below the stack pointer; pop [rsp+x] takes its address after
 * rsp is incremented by the operand size.  @a adjusted.
 */
static uint64_t stack_ea(const ZydisDecodedInstruction *in,
			 const ZydisDecodedOperand *o, uint64_t a, size_t len)
{
	if (o->visibility == ZYDIS_OPERAND_VISIBILITY_HIDDEN &&
	    (o->mem.base == ZYDIS_REGISTER_RSP ||
	     o->mem.base == ZYDIS_REGISTER_ESP) &&
	    (in->mnemonic == ZYDIS_MNEMONIC_PUSH ||
	     in->mnemonic == ZYDIS_MNEMONIC_PUSHFQ ||
	     in->mnemonic == ZYDIS_MNEMONIC_PUSHF ||
	     in->mnemonic == ZYDIS_MNEMONIC_CALL ||
	     in->mnemonic == ZYDIS_MNEMONIC_ENTER))
		a -= len;
	if (in->mnemonic == ZYDIS_MNEMONIC_POP &&
	    o->visibility == ZYDIS_OPERAND_VISIBILITY_EXPLICIT &&
	    greg_of(o->mem.base) == PMG_X86_RSP)
		a += len;
	return a;
}

/*
 * bts/btr/btc with a register bit offset (operand @i, 0): bit-string
 * addressing, the register's signed offset selects a chunk of the
 * operand's size; @a moved to it.  0, or -1 with d->why.
 */
static int bitstring_ea(const ucontext_t *uc, const ZydisDecodedInstruction *in,
			const ZydisDecodedOperand *op, unsigned i, size_t len,
			uint64_t *a, struct _pmg_decoded *d)
{
	const ZydisDecodedOperand *o = &op[i];
	uint64_t off;
	unsigned bits = o->size;
	unsigned shift = bits == 16 ? 4 : bits == 32 ? 5 : 6;
	int64_t chunk;

	if (!((in->mnemonic == ZYDIS_MNEMONIC_BTS ||
	       in->mnemonic == ZYDIS_MNEMONIC_BTR ||
	       in->mnemonic == ZYDIS_MNEMONIC_BTC) &&
	      i == 0 && in->operand_count_visible > 1 &&
	      op[1].type == ZYDIS_OPERAND_TYPE_REGISTER))
		return 0;
	if (reg_value(uc, op[1].reg.value, &off) ||
	    (bits != 16 && bits != 32 && bits != 64)) {
		d->why = "bit offset register unreadable";
		return -1;
	}
	if (bits < 64 && (off & (1ull << (bits - 1))))
		off |= ~0ull << bits; /* sign-extend */
	chunk = (int64_t)off >> shift;
	*a += (uint64_t)chunk * len;
	return 0;
}

/*
 * rep stos / rep movs (64-bit addressing, the first operand): what the
 * whole instruction does, for a run of iterations at once (d->rep,
 * d->elem).
 */
static void string_rep(const ZydisDecodedInstruction *in,
		       const ZydisDecodedOperand *op, unsigned i, size_t len,
		       struct _pmg_decoded *d)
{
	if (!(in->meta.category == ZYDIS_CATEGORY_STRINGOP &&
	      (in->attributes & ZYDIS_ATTRIB_HAS_REP) &&
	      in->address_width == 64 && i == 0))
		return;
	if (in->mnemonic == ZYDIS_MNEMONIC_STOSB ||
	    in->mnemonic == ZYDIS_MNEMONIC_STOSW ||
	    in->mnemonic == ZYDIS_MNEMONIC_STOSD ||
	    in->mnemonic == ZYDIS_MNEMONIC_STOSQ)
		d->rep = PMG_CT_REP_STOS;
	else if ((in->mnemonic == ZYDIS_MNEMONIC_MOVSB ||
		  in->mnemonic == ZYDIS_MNEMONIC_MOVSW ||
		  in->mnemonic == ZYDIS_MNEMONIC_MOVSD ||
		  in->mnemonic == ZYDIS_MNEMONIC_MOVSQ) &&
		 in->operand_count > 1 &&
		 op[1].type == ZYDIS_OPERAND_TYPE_MEMORY &&
		 op[1].mem.segment != ZYDIS_REGISTER_FS &&
		 op[1].mem.segment != ZYDIS_REGISTER_GS)
		d->rep = PMG_CT_REP_MOVS;
	d->elem = (unsigned)len;
}

/*
 * Written memory operand @i: its range appended to d->wr (address,
 * length, the stack flag, whether its base may be moved).  0, or -1 with
 * d->why.
 */
static int decode_operand(const ucontext_t *uc,
			  const ZydisDecodedInstruction *in,
			  const ZydisDecodedOperand *op, unsigned i,
			  struct _pmg_decoded *d)
{
	const ZydisDecodedOperand *o = &op[i];
	struct _pmg_wr *w = &d->wr[d->nwr];
	uint64_t seg, a;
	size_t len = o->size / 8;

	d->why = operand_refused(o, d->nwr);
	if (d->why)
		return -1;
	if (operand_ea(uc, in, o, &a, &seg, d))
		return -1;
	a = stack_ea(in, o, a, len);
	if (bitstring_ea(uc, in, op, i, len, &a, d))
		return -1;
	if (in->address_width == 32)
		a &= 0xffffffffull;
	w->addr = (uintptr_t)(a + seg);
	w->len = len;
	w->base = -1;
	w->base_kind = PMG_CT_BASE_KEEP;
	/* push, call, enter, pushf: hidden, through rsp */
	w->stack = o->visibility == ZYDIS_OPERAND_VISIBILITY_HIDDEN &&
		   greg_of(o->mem.base) == PMG_X86_RSP;
	if (in->address_width == 64 && o->mem.base != ZYDIS_REGISTER_NONE &&
	    o->mem.base != ZYDIS_REGISTER_RSP &&
	    o->mem.base != ZYDIS_REGISTER_RIP &&
	    ZydisRegisterGetWidth(ZYDIS_MACHINE_MODE_LONG_64, o->mem.base) ==
		    64)
		redirectable(in, op, i, w);
	string_rep(in, op, i, len, d);
	d->nwr++;
	return 0;
}

/*
 * The decoder: the instruction decoded (decode_insn()), the refusals of
 * the whole instruction (uncontainable()), then each written memory
 * operand by its class (decode_operand(): refusals, plain, stack,
 * bit-string, rep string).
 */
int _pmg_contain_decode(const ucontext_t *uc, struct _pmg_decoded *d)
{
	ZydisDecodedInstruction in;
	ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];
	unsigned i;

	d->nwr = 0;
	d->len = 0;
	d->rep = PMG_CT_REP_NONE;
	d->elem = 0;
	d->why = NULL;
	memcpy(d->text, "(undecoded)", sizeof("(undecoded)"));
	if (decode_insn(pmg_uc_ip(uc), &in, op, d))
		return -1;
	if (uncontainable(in.mnemonic)) {
		d->why = "its written range is not determinable here "
			 "(xsave/fxsave/movdir64b/enqcmd/clzero)";
		return -1;
	}
	for (i = 0; i < in.operand_count; i++)
		if (op[i].type == ZYDIS_OPERAND_TYPE_MEMORY &&
		    (op[i].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) &&
		    decode_operand(uc, &in, op, i, d))
			return -1;
	return 0;
}

/* /proc/self/mem, for contain mode's copies (the undo: the saved bytes
 * read and put back through it; _pmg_contain_decode()'s reads). */
/*
 * The descriptor is checked before each use: it
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

/* ---------------------------------------------------------- the undo */

/* The thread's step record (held: steps.c) and its redirect buffer. */
#define pending (*_pmg_cur_step)
#define scratch (_pmg_cur_step->scratch)

/* Why a push or call into protected memory is not contained (N5). */
static const char stack_why[] =
	"an implicit stack write (push, call, enter) into protected memory "
	"cannot be undone: the program would read back (pop, ret) the old "
	"bytes";

static void contain_strict(const struct pmg_fault *f, const ucontext_t *uc,
			   pid_t tid, const struct _pmg_decoded *d,
			   const char *why)
{
	struct _pmg_buf b = { .n = 0 };
	struct _pmg_range r;
	int fd = _pmg_report_fd();
	/* no backtrace through a stack in protected memory: the unwinder
	 * would run off it (a fault in this handler is fatal) */
	bool stack_ok = _pmg_reg_find(pmg_uc_sp(uc), &r) != 0;

	_PMG_STAT_INC(contain_strict);
	_pmg_buf_str(&b, "pmguard: contain: cannot contain '");
	_pmg_buf_str(&b, d->text);
	_pmg_buf_str(&b, "' at ip ");
	_pmg_buf_hex(&b, f->ip);
	_pmg_buf_str(&b, ": ");
	_pmg_buf_str(&b, why);
	_pmg_buf_str(&b, "; falling back to strict\n");
	_pmg_buf_flush(&b, fd);
	_pmg_report_fault(f, tid, "strict (aborting)", stack_ok);
	_pmg_fault_notify(f, tid, PMG_FAULT_STRICT_ABORT);
	_pmg_fault_die();
}

/*
 * mprotect: the saved bytes are read and put back through /proc/self/mem,
 * which ignores page protection for private mappings, so a window closed
 * by another thread (the page made read-only again) between grant and
 * restore cannot make the copy fault.  Where that fails (a shared mapping
 * is not force-writable), plain copies: the pages were made writable, and
 * if a window close re-protected one meanwhile, the fault on the copy
 * grants it again (contain_begin()).  open(2), pread(2), pwrite(2):
 * AS-safe.
 */
static void copy_out(void *dst, uintptr_t src, unsigned len, bool pku)
{
	int fd = pku ? -1 : _pmg_self_mem_fd();

	if (fd < 0 || pread(fd, dst, len, (off_t)src) != (ssize_t)len)
		memcpy(dst, (const void *)src, len);
}

static void copy_in(uintptr_t dst, const void *src, unsigned len, bool pku)
{
	int fd = pku ? -1 : _pmg_self_mem_fd();

	if (fd < 0 || pwrite(fd, src, len, (off_t)dst) != (ssize_t)len)
		memcpy((void *)dst, src, len);
}

/* Open the keys of the saved ranges for the handler's own copies (PKU:
 * @mask is 0 on mprotect and for page protection). */
static uint32_t open_keys(uint32_t mask)
{
	return mask ? _pmg.prim->rights_open(mask) : 0;
}

static void close_keys(uint32_t mask, uint32_t cur)
{
	if (mask)
		_pmg.prim->rights_restore(cur);
}

/*
 * Is range @r kept the way this fault is judged: by a key (@pku: the
 * faulting address's domain holds one on PKU) or by page protection?
 * A write across both kinds at once is not contained (strict), a rep run
 * stops at the change.  AS-safe.
 */
static bool same_kind(const struct _pmg_range *r, bool pku)
{
	return (_pmg_dom_hw(r->dom) != 0) == pku;
}

/* Does the thread (rights in @pkval on PKU) lack write access to the
 * domain of @r (of this fault's kind)? */
static bool write_denied(const struct _pmg_range *r, uint32_t pkval, bool pku)
{
	unsigned x = pku ? pmg_pkval_rights(pkval,
					    (unsigned)_pmg_dom_hw(r->dom))
			 : _pmg_process_rights(&_pmg.dom[r->dom]);

	return x != PMG_RIGHTS_RW;
}

/* ---- rep stos / rep movs: a run of iterations at once ---- */

#define PMG_PAGE_MASK (~(uintptr_t)(PMG_PAGE_SIZE - 1))

/* May this thread not write @page of range @r now (@pkval: PKU rights)? */
static bool page_denied(const struct _pmg_range *r, uintptr_t page,
			uint32_t pkval, bool pku)
{
	if (pku)
		return write_denied(r, pkval, true);
	/* a lazy write window on the domain: the page's first write in
	 * it, granted here (mpwin.c) */
	return !(_pmg_pw_prot(r->dom, page) & PROT_WRITE) &&
	       !_pmg_lazy_grant(r->dom, page);
}

/*
 * process_vm_readv/writev on our own process: 1 usable, -1 not (ENOSYS: a
 * kernel without CONFIG_CROSS_MEMORY_ATTACH; EPERM: a seccomp filter, as
 * container runtimes' default profiles have).  Probed at install.  Where
 * they are missing, vm_copy() copies nothing, so every rep string run
 * takes the per-element path: exact, one fault (and trap) per element.
 * Not static: test-contain sets it to -1 to force the per-element path
 * (the test's own hook; the library ships none).
 */
int _pmg_vm_copy_ok;

void _pmg_vm_copy_probe(void)
{
	uint64_t a = 0x5a, b = 0;
	struct iovec l = { &b, sizeof(b) }, r = { &a, sizeof(a) };
	int saved = errno;

	_pmg_vm_copy_ok = process_vm_readv(getpid(), &l, 1, &r, 1, 0) ==
						  (ssize_t)sizeof(b) &&
					  b == a
				  ? 1
				  : -1;
	errno = saved;
}

bool _pmg_rep_bulk_usable(void)
{
	return _pmg_vm_copy_ok > 0;
}

/*
 * Copy @len bytes between @local (a buffer of ours) and @remote: to
 * @remote when @write, else from it, through process_vm_writev/readv on
 * our own process: page protection is honoured
 * (a page that is not mapped, or not writable/readable, gives a short
 * count, never a signal inside the handler), protection keys are not
 * (a remote access).  The bytes copied.  AS-safe.
 */
static size_t vm_copy(void *local, uintptr_t remote, size_t len, bool write)
{
	struct iovec l = { local, len }, r = { (void *)remote, len };
	ssize_t n;

	if (_pmg_vm_copy_ok <= 0)
		return 0;
	n = write ? process_vm_writev(getpid(), &l, 1, &r, 1, 0)
		  : process_vm_readv(getpid(), &l, 1, &r, 1, 0);
	return n > 0 ? (size_t)n : 0;
}

/*
 * Is @page backed (mapped, within its file)?  Contain skips a run of
 * protected pages without touching them; the CPU would take SIGBUS at a
 * page past the end of its file, SIGSEGV at a hole: such a page ends the
 * run.  /proc/self/mem reads any mapped page (PROT_NONE, keys ignored) and
 * fails exactly there; without it, process_vm_readv (a PROT_NONE page
 * then also ends the run: per element, still right).  AS-safe.
 */
static bool page_backed(uintptr_t page)
{
	int fd = _pmg_self_mem_fd();
	uint8_t b;

	if (fd >= 0)
		return pread(fd, &b, 1, (off_t)page) == 1;
	return vm_copy(&b, page, 1, false) == 1;
}

/*
 * A site's first contained write gets a backtrace, unless the stack
 * pointer is in protected memory: the handler does not unwind through a
 * protected stack.  AS-safe.
 */
static void first_trace(struct _pmg_buf *b, int fd, bool stack_protected)
{
	if (!stack_protected) {
		_pmg_backtrace_handler(b, fd);
		return;
	}
	_pmg_buf_str(b, "pmguard: contain: no backtrace: the stack pointer "
			"is in protected memory\n");
	_pmg_buf_flush(b, fd);
}

/*
 * The report of a contained run (one line per run, as contain_end).
 */
static void bulk_report(const struct pmg_fault *f, pid_t tid,
			const struct _pmg_decoded *d, uintptr_t lo,
			uintptr_t hi, uint64_t run, bool stack_protected)
{
	struct _pmg_buf b = { .n = 0 };
	uint64_t count = _pmg_audit_site_hit(f->ip, f->dom);
	int fd = _pmg_report_fd();

	if (fd < 0)
		return;
	_pmg_buf_str(&b, "pmguard: contain: stray write by '");
	_pmg_buf_str(&b, d->text);
	_pmg_buf_str(&b, "' at ip ");
	_pmg_buf_hex(&b, f->ip);
	_pmg_buf_str(&b, " (site count ");
	_pmg_buf_dec(&b, (int64_t)count);
	_pmg_buf_str(&b, ") in domain '");
	_pmg_buf_str(&b, _pmg_dom_name(f->dom));
	_pmg_buf_str(&b, "' by thread ");
	_pmg_buf_dec(&b, tid);
	_pmg_buf_str(&b, ": undone\n");
	_pmg_buf_flush(&b, fd);
	_pmg_buf_str(&b, "pmguard: contain:   range [");
	_pmg_buf_hex(&b, lo);
	_pmg_buf_str(&b, ", ");
	_pmg_buf_hex(&b, hi);
	_pmg_buf_str(&b, ") ");
	_pmg_buf_dec(&b, (int64_t)(hi - lo));
	_pmg_buf_str(&b, " byte(s): ");
	_pmg_buf_dec(&b, (int64_t)run);
	_pmg_buf_str(&b, " iteration(s) not written (kept old)\n");
	_pmg_buf_flush(&b, fd);
	if (count == 1)
		first_trace(&b, fd, stack_protected);
}

/* What a page of a rep run must be: protected against this thread's
 * writes (and, for contain, backed: RUN_WRITE_BACKED) or reads. */
enum run_need { RUN_WRITE, RUN_WRITE_BACKED, RUN_READ };

static bool page_denied(const struct _pmg_range *r, uintptr_t page,
			uint32_t pkval, bool pku);
static bool page_read_denied(const struct _pmg_range *r, uintptr_t page,
			     uint32_t pkval, bool pku);

static bool run_page(uintptr_t addr, struct _pmg_range *r, enum run_need need,
		     uint32_t pkval, bool pku)
{
	uintptr_t page = addr & PMG_PAGE_MASK;

	if (_pmg_reg_find(addr, r) || !same_kind(r, pku))
		return false;
	/* a page the program itself made unwritable (unreadable): the CPU
	 * stops there without pmguard, and so does the run; the CPU then
	 * faults there, for the program (own_write()) */
	if (!_pmg_cap_allows(page, need == RUN_READ ? PMG_READ : PMG_WRITE))
		return false;
	if (need == RUN_READ)
		return page_read_denied(r, page, pkval, pku);
	return page_denied(r, page, pkval, pku) &&
	       (need == RUN_WRITE || page_backed(page));
}

/*
 * The run of a rep string instruction's @n elements of @s bytes from
 * @start (the element it is at; @back: DF set, downward) that lies in
 * protected pages as @need says: its element count, its bytes
 * [*@lo, *@hi).  0 when there is none or the addresses wrap.  AS-safe.
 */
static uint64_t rep_run(uintptr_t start, uint64_t n, uint64_t s, bool back,
			enum run_need need, uint32_t pkval, bool pku,
			uintptr_t *lo, uintptr_t *hi)
{
	uintptr_t pos, limit, top = start + s;
	struct _pmg_range r;
	uint64_t run;

	if (!back) {
		limit = start + n * s;
		if (limit < start)
			return 0;
		for (pos = start; pos < limit;) {
			uintptr_t next = (pos | (PMG_PAGE_SIZE - 1)) + 1;

			if (!run_page(pos, &r, need, pkval, pku))
				break;
			if (next > r.end)
				next = r.end;
			pos = next < limit ? next : limit;
		}
		run = (pos - start) / s;
		*lo = start;
		*hi = start + run * s;
		return run;
	}
	if (top < start || top < n * s)
		return 0;
	limit = top - n * s;
	for (pos = top; pos > limit;) {
		uintptr_t next = (pos - 1) & PMG_PAGE_MASK;

		if (!run_page(pos - 1, &r, need, pkval, pku))
			break;
		if (next < r.base)
			next = r.base;
		pos = next > limit ? next : limit;
	}
	run = (top - pos) / s;
	*hi = top;
	*lo = top - run * s;
	return run;
}

/*
 * A write fault of rep stos / rep movs (@d).  Under the trap flag each
 * iteration would cost a fault and a trap (a stray memset: ~30 us per
 * byte); instead the run of iterations whose elements lie in protected
 * pages this thread may not write, from the faulting one on, is handled
 * here in one go:
 *  - contain (@audit false): nothing is written (the writes are undone
 *    before they happen);
 *  - audit: the run is written from here (process_vm_writev: a page a
 *    racing window close re-protects ends the run early, no signal).
 * Then the registers are what the CPU leaves after those iterations:
 * rdi (and rsi) advanced in the direction of DF, rcx counted down, rip
 * past the instruction when rcx reaches 0 (rep stos/movs change no
 * flag).  The CPU does the rest of the instruction natively and faults
 * again at the next protected run.  False (nothing done: the caller takes
 * the per-element path) when it does not apply: not a rep stos/movs, a
 * program that single-steps itself, the faulting element not at rdi or
 * straddling into memory it may write, a movs source that is not
 * readable or overlaps the run (the CPU's own fault or byte order is
 * then what the per-element path gives).  AS-safe.
 */
static bool rep_bulk(const struct pmg_fault *f, ucontext_t *uc,
		     const struct _pmg_decoded *d, bool pku, pid_t tid,
		     bool audit)
{
	greg_t *g = pmg_uc_regs(uc);
	uint64_t n = (uint64_t)g[PMG_X86_RCX], run, done, s = d->elem;
	uintptr_t di = (uintptr_t)g[PMG_X86_RDI];
	uintptr_t si = (uintptr_t)g[PMG_X86_RSI];
	bool back = pmg_uc_df(uc);
	uintptr_t lo, hi, slo = 0, pg;
	/* the redirect scratch buffer is free (no step pending): no 4 KiB
	 * on a signal stack that may be SIGSTKSZ */
	uint8_t *buf = scratch;
	const size_t bufsz = sizeof(scratch);

	if (d->rep == PMG_CT_REP_NONE || !s || !n || pmg_uc_tf(uc) ||
	    f->acc != PMG_WRITE || f->addr < di || f->addr - di >= s)
		return false;
	if (n > ((uintptr_t)1 << 47) / s)
		n = ((uintptr_t)1 << 47) / s; /* past user space anyway */
	run = rep_run(di, n, s, back, audit ? RUN_WRITE : RUN_WRITE_BACKED,
		      f->saved_pkval, pku, &lo, &hi);
	if (!run)
		return false;
	if (d->rep == PMG_CT_REP_MOVS) {
		uintptr_t shi;

		slo = back ? si + s - run * s : si;
		shi = slo + run * s;
		if ((back && si + s < run * s) || shi < slo ||
		    (slo < hi && lo < shi))
			return false; /* wraps or overlaps the run */
		/* readable, as the CPU would need (not pkeys: the CPU reads
		 * protected sources in contain/audit mode anyway) */
		for (pg = slo & PMG_PAGE_MASK; pg < shi; pg += PMG_PAGE_SIZE)
			if (!vm_copy(buf, pg < slo ? slo : pg, 1, false))
				return false;
	}
	done = run;
	if (audit) {
		uint64_t stosv = (uint64_t)g[PMG_X86_RAX];
		uintptr_t a;
		size_t k;

		if (!pku)
			for (pg = lo & PMG_PAGE_MASK; pg < hi;
			     pg += PMG_PAGE_SIZE)
				_pmg_fault_protect_page(pg,
							PROT_READ | PROT_WRITE);
		for (k = 0; k < bufsz; k += s)
			memcpy(buf + k, &stosv, s);
		/* in the instruction's order, so a short copy leaves the
		 * iterations before it done */
		for (done = 0; done < run;) {
			uint64_t m = bufsz / s, got;

			if (m > run - done)
				m = run - done;
			a = back ? hi - (done + m) * s : lo + done * s;
			if (d->rep == PMG_CT_REP_MOVS) {
				uintptr_t sa = back ? slo + (run - done - m) * s
						    : slo + done * s;

				got = vm_copy(buf, sa, m * s, false) / s;
				if (got < m)
					m = back ? 0 : got;
			}
			got = vm_copy(buf, a, m * s, true) / s;
			if (got < m && back)
				got = 0; /* its low part: not in order */
			done += got;
			if (got < m || !m)
				break;
		}
		if (!pku)
			for (pg = lo & PMG_PAGE_MASK; pg < hi;
			     pg += PMG_PAGE_SIZE) {
				struct _pmg_range r;

				if (!_pmg_reg_find(pg < lo ? lo : pg, &r))
					_pmg_fault_reprotect_page(r.dom, pg);
			}
		if (!done)
			return false;
	} else {
		struct _pmg_range r;

		_PMG_STAT_INC(contained);
		_pmg_fault_notify(f, tid, PMG_FAULT_CONTAINED);
		bulk_report(f, tid, d, lo, hi, run,
			    !_pmg_reg_find(pmg_uc_sp(uc), &r));
	}
	g[PMG_X86_RDI] += back ? -(greg_t)(done * s) : (greg_t)(done * s);
	if (d->rep == PMG_CT_REP_MOVS)
		g[PMG_X86_RSI] += back ? -(greg_t)(done * s)
				       : (greg_t)(done * s);
	g[PMG_X86_RCX] -= (greg_t)done;
	if (!g[PMG_X86_RCX])
		g[PMG_X86_RIP] += d->len;
	return true;
}

/* May this thread not read @page of range @r now? */
static bool page_read_denied(const struct _pmg_range *r, uintptr_t page,
			     uint32_t pkval, bool pku)
{
	if (pku)
		return pmg_pkval_rights(pkval, (unsigned)_pmg_dom_hw(r->dom)) ==
		       PMG_RIGHTS_AD;
	return !(_pmg_pw_prot(r->dom, page) & PROT_READ);
}

/*
 * A read fault of rep movs (@d) on its source in a domain the thread may
 * not read (a stray read, let through in audit and contain mode): as
 * rep_bulk(), the run of iterations whose source elements lie in such
 * pages is copied from here (process_vm_readv, which does not check
 * protection keys; mprotect: the pages made readable for the copy), when
 * every destination page of the run is outside protected memory (where
 * process_vm_writev honours the page protection, so an unwritable page
 * ends the run early: the CPU then faults there itself).  rdi, rsi, rcx
 * and rip as the CPU leaves them.  False: not applicable, per element.
 * AS-safe.
 */
static bool rep_read_bulk(const struct pmg_fault *f, ucontext_t *uc,
			  const struct _pmg_decoded *d, bool pku)
{
	greg_t *g = pmg_uc_regs(uc);
	uint64_t n = (uint64_t)g[PMG_X86_RCX], run, done, s = d->elem;
	uintptr_t di = (uintptr_t)g[PMG_X86_RDI];
	uintptr_t si = (uintptr_t)g[PMG_X86_RSI];
	bool back = pmg_uc_df(uc);
	uintptr_t lo, hi, dlo, dhi, pg;
	uint8_t *buf = scratch;
	const size_t bufsz = sizeof(scratch);

	if (d->rep != PMG_CT_REP_MOVS || !s || !n || pmg_uc_tf(uc) ||
	    f->acc != PMG_READ || f->addr < si || f->addr - si >= s)
		return false;
	if (n > ((uintptr_t)1 << 47) / s)
		n = ((uintptr_t)1 << 47) / s;
	run = rep_run(si, n, s, back, RUN_READ, f->saved_pkval, pku, &lo, &hi);
	if (!run || (back && di + s < run * s))
		return false;
	dlo = back ? di + s - run * s : di;
	hi = lo + run * s;
	dhi = dlo + run * s;
	if (dhi < dlo || (dlo < hi && lo < dhi))
		return false; /* wraps or overlaps */
	for (pg = dlo & PMG_PAGE_MASK; pg < dhi; pg += PMG_PAGE_SIZE) {
		struct _pmg_range r;

		if (!_pmg_reg_find(pg < dlo ? dlo : pg, &r))
			return false; /* into protected memory: per element */
	}
	/* readable for the copy, never below what a window opened since
	 * the fault (a write window opened whole: read-write) */
	if (!pku)
		for (pg = lo & PMG_PAGE_MASK; pg < hi; pg += PMG_PAGE_SIZE) {
			struct _pmg_range r;

			if (!_pmg_reg_find(pg < lo ? lo : pg, &r))
				_pmg_fault_set_page(r.dom, pg, PROT_READ);
			else
				_pmg_fault_protect_page(pg, PROT_READ);
		}
	/* chunks in the instruction's order; a short copy stops the run */
	for (done = 0; done < run;) {
		uint64_t m = bufsz / s, got;
		uint64_t off;

		if (m > run - done)
			m = run - done;
		off = back ? (run - done - m) * s : done * s;
		got = vm_copy(buf, lo + off, m * s, false) / s;
		if (got == m)
			got = vm_copy(buf, dlo + off, m * s, true) / s;
		if (got < m) {
			if (!back)
				done += got;
			break;
		}
		done += m;
	}
	if (!pku)
		for (pg = lo & PMG_PAGE_MASK; pg < hi; pg += PMG_PAGE_SIZE) {
			struct _pmg_range r;

			if (!_pmg_reg_find(pg < lo ? lo : pg, &r))
				_pmg_fault_reprotect_page(r.dom, pg);
		}
	if (!done)
		return false;
	g[PMG_X86_RDI] += back ? -(greg_t)(done * s) : (greg_t)(done * s);
	g[PMG_X86_RSI] += back ? -(greg_t)(done * s) : (greg_t)(done * s);
	g[PMG_X86_RCX] -= (greg_t)done;
	if (!g[PMG_X86_RCX])
		g[PMG_X86_RIP] += d->len;
	return true;
}

/*
 * Audit, and contain's stray reads: a rep stos/movs run at once, no trap
 * (contain's writes go through contain_begin()).  True when done.
 */
bool _pmg_rep_audit(const struct pmg_fault *f, ucontext_t *uc, bool pku,
		    pid_t tid, int mode)
{
	struct _pmg_decoded d;

	if (f->acc == PMG_WRITE && mode != PMG_FAULT_AUDIT)
		return false;
	if (_pmg_contain_decode(uc, &d) || d.rep == PMG_CT_REP_NONE)
		return false;
	if (f->acc == PMG_WRITE)
		return rep_bulk(f, uc, &d, pku, tid, true);
	return rep_read_bulk(f, uc, &d, pku);
}

/* Is byte @a one of the first @nsave saved (protected) pieces? */
static bool in_saves(uintptr_t a, unsigned nsave)
{
	unsigned j;

	for (j = 0; j < nsave; j++)
		if (a >= pending.save[j].addr &&
		    a < pending.save[j].addr + pending.save[j].len)
			return true;
	return false;
}

/*
 * The redirect's snapshot of [@ea, +@len) into pending.snap: the saved
 * (protected) pieces as copy_out() reads them, the other bytes through
 * process_vm_readv() (page protection honoured: no fault here).  False
 * when some byte outside the saved pieces cannot be read: a masked store
 * (vmaskmov, AVX-512 {k}) whose masked-off elements lie in an unmapped or
 * PROT_NONE page, which the CPU does not touch and does not fault on.
 * Then no redirect: the save-and-step path runs the instruction on the
 * real memory, where the CPU decides.
 */
static bool redirect_snap(uintptr_t ea, unsigned len, unsigned nsave, bool pku)
{
	uint32_t all = pku ? ~(uint32_t)PMG_PKR_MASK(0) : 0;
	unsigned k, e;
	uint32_t cur;

	for (k = 0; k < len; k = e) {
		bool saved = in_saves(ea + k, nsave);

		for (e = k + 1; e < len && in_saves(ea + e, nsave) == saved;)
			e++;
		if (saved) {
			cur = open_keys(all);
			copy_out(&pending.snap[k], ea + k, e - k, pku);
			close_keys(all, cur);
		} else if (vm_copy(&pending.snap[k], ea + k, e - k, false) !=
			   e - k) {
			return false;
		}
	}
	return true;
}

/*
 * The first byte the decoded instruction @d writes in a protected page the
 * program itself made unwritable (its own mprotect(), caps.c), or 0.  The
 * CPU without pmguard faults there (SEGV_ACCERR) and writes nothing of
 * the instruction: contain must not swallow that fault nor undo a write
 * the CPU never makes.  The faulting page itself is checked before
 * contain (fault.c); this finds the other pages of a store across a page
 * boundary.  AS-safe.
 */
static uintptr_t own_write(const struct _pmg_decoded *d)
{
	uintptr_t best = 0;
	unsigned i;

	for (i = 0; i < d->nwr; i++) {
		uintptr_t a = d->wr[i].addr, end = a + d->wr[i].len;

		while (a < end) {
			struct _pmg_range r;

			if (!_pmg_reg_find(a, &r) &&
			    !_pmg_cap_allows(a, PMG_WRITE)) {
				if (!best || a < best)
					best = a;
				break;
			}
			a = (a | (PMG_PAGE_SIZE - 1)) + 1;
		}
	}
	return best;
}

/*
 * mprotect: another thread closed a window on a page between our grant
 * and the step, or the restore (page rights are process-wide;
 * /proc/self/mem cannot write a read-only shared mapping): grant again and
 * retry; the bytes are saved already.  true: done, retried.
 */
static bool begin_regrant(struct pmg_fault *f)
{
	uintptr_t pg = f->addr & ~(PMG_PAGE_SIZE - 1);
	unsigned i;

	for (i = 0; i < pending.npages; i++)
		if (pending.page[i] == pg)
			break;
	if (i == pending.npages)
		return false;
	for (i = 0; i < pending.npages; i++)
		_pmg_fault_protect_page(pending.page[i],
					PROT_READ | PROT_WRITE);
	f->new_pkval = f->saved_pkval;
	_PMG_STAT_INC(contain_regrant);
	return true;
}

/*
 * What the written ranges hold of protected memory: the pieces to save
 * (pending.save[0..nsave)), the keys (PKU) or the pages (mprotect) to open
 * for the step.
 */
struct ct_plan {
	unsigned nsave, npages;
	uint32_t grant; /* PKU: the keys opened for the step */
	uintptr_t pages[PMG_PENDING_PAGES]; /* mprotect: the pages opened */
	int pkeys[PMG_PENDING_PAGES]; /* their domains */
	bool hit; /* the faulting address is in a written range */
};

/*
 * One piece [a, next) of written range @i, in protected range @r: saved
 * if this thread may not write it (a lazy write window's block is granted
 * instead).  A push or call into it, or a piece too many, falls back to
 * strict.
 */
static void plan_piece(const struct pmg_fault *f, const ucontext_t *uc,
		       pid_t tid, const struct _pmg_decoded *d, unsigned i,
		       const struct _pmg_range *r, uintptr_t a, uintptr_t next,
		       bool pku, struct ct_plan *pl)
{
	struct _pmg_save *sv;

	/* a lazy write window's block: granted */
	if (!write_denied(r, f->saved_pkval, pku) ||
	    (!pku && _pmg_lazy_grant(r->dom, a)))
		return;
	if (d->wr[i].stack)
		contain_strict(f, uc, tid, d, stack_why);
	if (pl->nsave == PMG_SAVES)
		contain_strict(f, uc, tid, d,
			       "the write spans too many protected ranges");
	sv = &pending.save[pl->nsave++];
	sv->addr = a;
	sv->len = (unsigned)(next - a);
	sv->dom = r->dom;
	if (pku)
		pl->grant |= PMG_PKR_MASK(_pmg_dom_hw(r->dom));
	if (!pku && pl->npages < PMG_PENDING_PAGES) {
		pl->pages[pl->npages] = a & ~(PMG_PAGE_SIZE - 1);
		pl->pkeys[pl->npages++] = r->dom;
	}
}

/*
 * Written range @i, a page at a time, each page cut at the end of its
 * protected range: its protected pieces planned (plan_piece()).  Ranges
 * of both kinds (a key, page protection) fall back to strict.
 */
static void plan_range(const struct pmg_fault *f, const ucontext_t *uc,
		       pid_t tid, const struct _pmg_decoded *d, unsigned i,
		       bool pku, struct ct_plan *pl)
{
	uintptr_t a = d->wr[i].addr, end = a + d->wr[i].len;

	if (f->addr >= a && f->addr < end)
		pl->hit = true;
	while (a < end) {
		struct _pmg_range r;
		uintptr_t next = (a | (PMG_PAGE_SIZE - 1)) + 1;

		if (next > end)
			next = end;
		/*
		 * A protected page not backed (unmapped behind the library's
		 * back, or past its file's end), other than the faulting
		 * one: nothing there to save or read.  Left out, as memory
		 * that is not ours: the step (never the redirect:
		 * redirect_snap() cannot read it) runs on the real memory and
		 * the CPU faults there itself, for the program (SIGSEGV or
		 * SIGBUS), having written nothing.
		 */
		if (!_pmg_reg_find(a, &r) && ((a ^ f->addr) < PMG_PAGE_SIZE ||
					      page_backed(a & PMG_PAGE_MASK))) {
			if (next > r.end)
				next = r.end;
			if (!same_kind(&r, pku))
				contain_strict(f, uc, tid, d,
					       "the write spans a domain kept "
					       "by a key and one kept by page "
					       "protection (a virtual domain)");
			plan_piece(f, uc, tid, d, i, &r, a, next, pku, pl);
		}
		a = next;
	}
}

/*
 * mprotect, nothing to save: another thread opened a window on these
 * pages since the fault (rights are process-wide): the write is now
 * allowed, as any write while a window is open there.  Put the pages at
 * the current rights and retry.
 */
static void begin_reopened(struct pmg_fault *f, const struct _pmg_decoded *d)
{
	unsigned i;

	for (i = 0; i < d->nwr; i++) {
		uintptr_t a = d->wr[i].addr & ~(PMG_PAGE_SIZE - 1);
		struct _pmg_range r;

		for (; a < d->wr[i].addr + d->wr[i].len; a += PMG_PAGE_SIZE)
			if (!_pmg_reg_find(a, &r))
				_pmg_fault_reprotect_page(r.dom, a);
	}
	_PMG_STAT_INC(contain_regrant);
	f->new_pkval = f->saved_pkval;
}

/* The step's record: a contained step of @f, @nsave pieces saved. */
static void begin_record(const struct pmg_fault *f, const ucontext_t *uc,
			 pid_t tid, const struct _pmg_decoded *d,
			 unsigned nsave, uint32_t rd_mask)
{
	struct _pmg_range r;

	pending.active = true;
	pending.ip = f->ip;
	pending.contain = true;
	pending.redirect = false;
	pending.had_tf = pmg_uc_tf(uc);
	pending.nsave = nsave;
	pending.f = *f;
	pending.tid = tid;
	pending.dec = *d;
	pending.count = _pmg_audit_site_hit(f->ip, f->dom);
	/* unwinding through a stack in protected memory: no */
	pending.stack_protected = !_pmg_reg_find(pmg_uc_sp(uc), &r);
	pending.npages = 0;
	pending.mask = 0;
	pending.bits = 0;
	pending.rd_mask = rd_mask;
}

/*
 * Redirect: the one written operand's base register is moved so that the
 * instruction writes a copy of the range in a per-thread scratch buffer
 * instead; memory is never granted (no other thread can see or race
 * anything) and the bytes outside protected memory the instruction
 * changed are copied out after the step (redirect_end()).  The range is
 * in pending.snap already (redirect_snap()).
 */
static void begin_redirect(struct pmg_fault *f, ucontext_t *uc,
			   const struct _pmg_wr *w, unsigned nsave, bool pku)
{
	uintptr_t ea = w->addr;
	unsigned len = (unsigned)w->len, i;
	uint8_t *s = scratch + PMG_CT_MAXLEN + (ea & (PMG_CT_MAXLEN - 1));
	/* PKU: the handler runs with the default register; the bytes
	 * outside the saved pieces may be in a domain this thread has a
	 * window on: open every key for the copies */
	uint32_t all = pku ? ~(uint32_t)PMG_PKR_MASK(0) : 0;

	memcpy(s, pending.snap, len);
	for (i = 0; i < nsave; i++)
		memcpy(pending.save[i].old, s + (pending.save[i].addr - ea),
		       pending.save[i].len);
	pending.redirect = true;
	pending.rd_mask = all; /* contain_end's copies, again */
	pending.mask = 0;
	pending.ea = ea;
	pending.len = len;
	pending.delta = (uintptr_t)s - ea;
	pending.base = w->base;
	pending.base_kind = w->base_kind;
	pending.base_orig = pmg_uc_regs(uc)[pending.base];
	pmg_uc_regs(uc)[pending.base] += (greg_t)pending.delta;
	f->new_pkval = f->saved_pkval;
	_PMG_STAT_INC(contain_redirected);
	pmg_uc_set_tf(uc);
}

/*
 * Save and restore: the protected pieces are opened for the step (PKU:
 * this thread's keys, in the frame's register; mprotect: the pages, for
 * every thread) and their bytes saved, to be put back after it.
 */
static void begin_grant(struct pmg_fault *f, ucontext_t *uc,
			const struct ct_plan *pl, bool pku)
{
	uint32_t cur;
	unsigned i;

	if (pku) {
		/* this thread only: the frame's register */
		pending.mask = pl->grant;
		pending.bits = f->saved_pkval & pl->grant;
		f->new_pkval = f->saved_pkval & ~pl->grant;
	} else {
		/* process-wide: the pages are writable during the step */
		for (i = 0; i < pl->npages; i++) {
			pending.page[pending.npages] = pl->pages[i];
			pending.dom[pending.npages++] = pl->pkeys[i];
			_pmg_fault_protect_page(pl->pages[i],
						PROT_READ | PROT_WRITE);
		}
		f->new_pkval = f->saved_pkval;
	}
	cur = open_keys(pending.rd_mask);
	for (i = 0; i < pl->nsave; i++)
		copy_out(pending.save[i].old, pending.save[i].addr,
			 pending.save[i].len, pku);
	close_keys(pending.rd_mask, cur);
	pmg_uc_set_tf(uc);
}

/*
 * A stray access in contain mode.  PMG_CT_DONE when it is a write to be
 * contained (everything set up: saved bytes, rights, trap flag);
 * PMG_CT_READ when the instruction writes no protected byte (a stray
 * read: audit handles it); PMG_CT_OWN when the CPU would fault on the
 * program's own protection (own_write()).  Aborts (strict) when the
 * written range is unknown.
 */
int _pmg_contain_begin(struct pmg_fault *f, ucontext_t *uc, uint32_t *reg,
		       pid_t tid, uintptr_t *own)
{
	struct _pmg_decoded d;
	bool pku = reg != NULL;
	struct ct_plan pl;
	unsigned i;

	pl.nsave = 0;
	pl.npages = 0;
	pl.grant = 0;
	pl.hit = false;
	if (pending.active && pending.contain && !pku && begin_regrant(f))
		return PMG_CT_DONE;
	if (_pmg_contain_decode(uc, &d))
		contain_strict(f, uc, tid, &d, d.why);
	if ((*own = own_write(&d)))
		return PMG_CT_OWN;
	if (!pending.active && rep_bulk(f, uc, &d, pku, tid, false)) {
		f->new_pkval = f->saved_pkval;
		return PMG_CT_DONE;
	}
	for (i = 0; i < d.nwr; i++)
		plan_range(f, uc, tid, &d, i, pku, &pl);
	if (!pl.nsave && !pku && f->acc == PMG_WRITE) {
		begin_reopened(f, &d);
		return PMG_CT_DONE;
	}
	if (!pl.nsave) {
		if (f->acc == PMG_WRITE)
			contain_strict(f, uc, tid, &d,
				       "the decoded instruction "
				       "writes no protected byte, yet a write "
				       "faulted");
		return PMG_CT_READ; /* a read: audit lets it through */
	}
	if (!pl.hit && f->acc == PMG_WRITE)
		contain_strict(f, uc, tid, &d,
			       "the faulting address is outside "
			       "the decoded written range");
	if (pending.active)
		contain_strict(f, uc, tid, &d,
			       "a second write fault inside a "
			       "contained step");
	begin_record(f, uc, tid, &d, pl.nsave, pku ? pl.grant : 0);
	if (d.nwr == 1 && d.wr[0].base >= 0 &&
	    redirect_snap(d.wr[0].addr, (unsigned)d.wr[0].len, pl.nsave, pku)) {
		begin_redirect(f, uc, &d.wr[0], pl.nsave, pku);
		return PMG_CT_DONE;
	}
	begin_grant(f, uc, &pl, pku);
	return PMG_CT_DONE;
}

/*
 * After a redirected step: fix the base register, copy out the bytes
 * outside protected memory that the instruction changed, keep the
 * protected ones as they were.  Bytes it left as they were are not
 * written: a masked store's masked-off elements may lie in a read-only
 * page, where the CPU does not write (nor fault).  The copy is
 * process_vm_writev() (page protection honoured, no fault in here): a
 * changed byte in a page the program cannot write is a store the CPU
 * would have faulted on: false, the caller falls back to strict.
 */
static bool redirect_end(ucontext_t *uc, uint8_t now[][PMG_CT_MAXLEN])
{
	greg_t *g = &pmg_uc_regs(uc)[pending.base];
	uint8_t *s = (uint8_t *)(pending.ea + pending.delta);
	unsigned k, i, e;
	bool ok = true;

	/* the decoder redirects only a base nothing else uses (contain.c) */
	if (pending.base_kind == PMG_CT_BASE_STEP)
		*g -= (greg_t)pending.delta;
	else
		*g = pending.base_orig;
	for (k = 0; k < pending.len; k++) {
		for (i = 0; i < pending.nsave; i++)
			if (pending.ea + k >= pending.save[i].addr &&
			    pending.ea + k <
				    pending.save[i].addr + pending.save[i].len)
				break;
		if (i < pending.nsave)
			now[i][pending.ea + k - pending.save[i].addr] = s[k];
	}
	for (k = 0; k < pending.len; k = e) {
		e = k + 1;
		if (in_saves(pending.ea + k, pending.nsave) ||
		    s[k] == pending.snap[k])
			continue;
		while (e < pending.len &&
		       !in_saves(pending.ea + e, pending.nsave) &&
		       s[e] != pending.snap[e])
			e++;
		if (vm_copy(&s[k], pending.ea + k, e - k, true) != e - k)
			ok = false;
	}
	return ok;
}

/* After the step: put the saved bytes back, report old -> new. */
void _pmg_contain_end(ucontext_t *uc, bool ran)
{
	uint8_t now[PMG_SAVES][PMG_CT_MAXLEN];
	struct _pmg_buf b = { .n = 0 };
	bool pku = pending.rd_mask != 0;
	uint32_t cur;
	unsigned i;
	int fd;

	if (!ran) {
		/*
		 * The instruction faulted (or was not reached): it wrote
		 * nothing, the CPU left its registers as they were.  The
		 * moved base register back; the saved bytes are not put
		 * back (they are what memory holds, or another thread's
		 * newer bytes), and no write happened to report.
		 */
		if (pending.redirect)
			pmg_uc_regs(uc)[pending.base] =
				pending.base_kind == PMG_CT_BASE_STEP
					? pmg_uc_regs(uc)[pending.base] -
						  (greg_t)pending.delta
					: pending.base_orig;
		return;
	}
	cur = open_keys(pending.rd_mask);
	fd = _pmg_report_fd();

	if (pending.redirect && !redirect_end(uc, now)) {
		close_keys(pending.rd_mask, cur);
		contain_strict(&pending.f, uc, pending.tid, &pending.dec,
			       "the store's bytes outside protected memory "
			       "lie in a page the program cannot write: the "
			       "CPU would have faulted");
	}
	for (i = 0; !pending.redirect && i < pending.nsave; i++) {
		struct _pmg_save *sv = &pending.save[i];

		copy_out(now[i], sv->addr, sv->len, pku);
		copy_in(sv->addr, sv->old, sv->len, pku);
	}
	close_keys(pending.rd_mask, cur);
	_PMG_STAT_INC(contained);
	_pmg_fault_notify(&pending.f, pending.tid, PMG_FAULT_CONTAINED);
	if (fd < 0)
		return;
	_pmg_buf_str(&b, "pmguard: contain: stray write by '");
	_pmg_buf_str(&b, pending.dec.text);
	_pmg_buf_str(&b, "' at ip ");
	_pmg_buf_hex(&b, pending.f.ip);
	_pmg_buf_str(&b, " (site count ");
	_pmg_buf_dec(&b, (int64_t)pending.count);
	_pmg_buf_str(&b, ") in domain '");
	_pmg_buf_str(&b, _pmg_dom_name(pending.f.dom));
	_pmg_buf_str(&b, "' by thread ");
	_pmg_buf_dec(&b, pending.tid);
	_pmg_buf_str(&b, ": undone\n");
	_pmg_buf_flush(&b, fd);
	for (i = 0; i < pending.nsave; i++) {
		struct _pmg_save *sv = &pending.save[i];

		_pmg_buf_str(&b, "pmguard: contain:   range [");
		_pmg_buf_hex(&b, sv->addr);
		_pmg_buf_str(&b, ", ");
		_pmg_buf_hex(&b, sv->addr + sv->len);
		_pmg_buf_str(&b, ") ");
		_pmg_buf_dec(&b, sv->len);
		_pmg_buf_str(&b, " byte(s) old ");
		_pmg_buf_bytes(&b, sv->old, sv->len);
		_pmg_buf_str(&b, " -> new ");
		_pmg_buf_bytes(&b, now[i], sv->len);
		_pmg_buf_str(&b, " (kept old)\n");
		_pmg_buf_flush(&b, fd);
	}
	if (pending.count == 1)
		first_trace(&b, fd, pending.stack_protected);
}
