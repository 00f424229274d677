// SPDX-License-Identifier: MIT
/*
 * count.so - a QEMU TCG plugin (system emulation, x86-64 guest) that
 * counts exactly what a marked region of guest code executes: all
 * instructions, WRPKRU, RDPKRU, WRMSR (and among them those to
 * IA32_PKRS) and SYSCALL, in user and in kernel mode separately.  Counts are deterministic for the same binary and
 * input, where times under TCG mean nothing (docs/performance.md,
 * "Counts, not times").
 *
 *   qemu-system-x86_64 ... -plugin count.so,out=FILE
 *
 * (guest/vmrun --plugin passes it.)  One JSON line per region, appended
 * to FILE (without out=, through qemu_plugin_outs(): QEMU's log, -d plugin
 * -D LOGFILE):
 *
 *   {"region":R,"vcpu":V,"user":{"insns":N,"wrpkru":N,"rdpkru":N,
 *    "wrmsr":N,"syscall":N,"wrmsr_pkrs":N},"kernel":{...}}
 *
 * Markers.  QEMU 7.2's plugin API (version 1) shows a plugin the bytes
 * and the address of each instruction, not the registers, so a marker must
 * be recognisable from its bytes alone: the 8-byte NOP
 * "nopl 0xDISP(%rax,%rax,1)", 0f 1f 84 00 + disp32, with the displacement's
 * high 16 bits 0x5047 ("PG"), bit 15 set for the end of a region, clear
 * for its beginning, and bits 0-14 the region id (tools/tcg/marker.h).
 * Compilers pad with that NOP only with displacement 0, so no other code
 * carries it; on hardware and without the plugin it does nothing.  The
 * markers themselves are not counted.  Regions nest per vCPU (up to
 * MAX_DEPTH); an end with no open region of its id is reported as an
 * error line, as is a region still open at exit.
 *
 * User or kernel mode: the version 1 API has no register read, so the
 * mode is the instruction's virtual address: x86-64 kernel addresses are
 * at or above 0xffff800000000000 (the upper canonical half), user ones
 * below.  WRMSR is counted whichever MSR it writes ("wrmsr").  Which MSR
 * is in ECX, which this API cannot read; so "wrmsr_pkrs" counts a WRMSR
 * that the same translation block prepared with "mov $0x6e1,%ecx" (b9
 * e1 06 00 00, IA32_PKRS) with no other "mov $imm32,%ecx" in between:
 * what the compiler emits for wrmsrl(MSR_IA32_PKRS, v), the kernel's
 * two PKRS writes (pks_write_pkrs(), pks_setup()) included.  A WRMSR
 * whose ECX came from a register or an earlier block counts in "wrmsr"
 * only, so wrmsr - wrmsr_pkrs bounds the writes to other MSRs (the
 * TSC deadline timer's, 0x6e0, among them).  Exceptions and interrupts cannot be
 * counted: 7.2 has no callback for them (later QEMUs add discontinuity
 * callbacks); what a handler executes shows in the kernel counts.
 *
 * Per vCPU.  With one vCPU (info->system.max_vcpus == 1: guest/vmrun
 * --smp 1) the counters are inline additions emitted into the translated
 * code (no call per instruction: cheap); with more, version 1's inline
 * additions are not per vCPU, so every instruction calls back with its
 * vCPU index instead (exact, slower).
 * An instruction that faults and is restarted counts once per attempt.
 *
 * Built without QEMU's header (Debian 12 does not ship it): the
 * declarations below follow QEMU 7.2's include/qemu/qemu-plugin.h,
 * QEMU_PLUGIN_VERSION 1, for the calls used here only.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- QEMU 7.2 include/qemu/qemu-plugin.h (API version 1), in part ---- */
#define QEMU_PLUGIN_EXPORT __attribute__((visibility("default")))

typedef uint64_t qemu_plugin_id_t;

typedef struct qemu_info_t {
	const char *target_name;
	struct {
		int min;
		int cur;
	} version;
	bool system_emulation;
	union {
		struct {
			int smp_vcpus;
			int max_vcpus;
		} system;
	};
} qemu_info_t;

struct qemu_plugin_tb;
struct qemu_plugin_insn;

enum qemu_plugin_cb_flags {
	QEMU_PLUGIN_CB_NO_REGS,
	QEMU_PLUGIN_CB_R_REGS,
	QEMU_PLUGIN_CB_RW_REGS,
};

enum qemu_plugin_op {
	QEMU_PLUGIN_INLINE_ADD_U64,
};

typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index,
					    void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id,
					       struct qemu_plugin_tb *tb);

QEMU_PLUGIN_EXPORT extern int qemu_plugin_version;
QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id,
					   const qemu_info_t *info, int argc,
					   char **argv);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
					   qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
					    qemu_plugin_vcpu_udata_cb_t cb,
					    enum qemu_plugin_cb_flags flags,
					    void *userdata);
void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *insn,
						enum qemu_plugin_op op,
						void *ptr, uint64_t imm);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *
qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id,
				    qemu_plugin_udata_cb_t cb, void *userdata);
void qemu_plugin_outs(const char *string);
/* ---- end of the declarations from qemu-plugin.h ---- */

#include "marker.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = 1;

/* K_WRMSR_PKRS: a WRMSR to IA32_PKRS, counted in K_WRMSR too */
enum { K_INSNS, K_WRPKRU, K_RDPKRU, K_WRMSR, K_SYSCALL, K_WRMSR_PKRS, NKIND };
enum { M_USER, M_KERNEL, NMODE };

static const char *const kind_name[NKIND] = {
	"insns", "wrpkru", "rdpkru", "wrmsr", "syscall", "wrmsr_pkrs",
};
#define MSR_IA32_PKRS 0x6e1u
static const char *const mode_name[NMODE] = { "user", "kernel" };

#define MAX_VCPUS 64
#define MAX_DEPTH 8
#define KERNEL_START 0xffff800000000000ULL

typedef uint64_t counts_t[NMODE][NKIND];

struct vcpu {
	counts_t c;
	int depth;
	struct {
		unsigned id;
		counts_t at;
	} open[MAX_DEPTH];
};

static struct vcpu vcpus[MAX_VCPUS];
static bool inline_mode;
static FILE *out;

static void emit(const char *line)
{
	if (out) {
		fputs(line, out);
		fflush(out);
	} else {
		qemu_plugin_outs(line);
	}
}

/* The instruction's kind from its bytes: legacy and REX prefixes skipped.
 * -1 for the marker NOP (*@marker set). */
static int classify(const uint8_t *p, size_t n, uint32_t *marker)
{
	size_t i = 0;

	if (n == 8 && p[0] == 0x0f && p[1] == 0x1f && p[2] == 0x84 &&
	    p[3] == 0x00) {
		uint32_t disp = (uint32_t)p[4] | (uint32_t)p[5] << 8 |
				(uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;

		if ((disp >> 16) == PMG_MARK_MAGIC) {
			*marker = disp;
			return -1;
		}
	}
	while (i < n && (p[i] == 0x66 || p[i] == 0x67 || p[i] == 0xf2 ||
			 p[i] == 0xf3 || p[i] == 0xf0 || p[i] == 0x2e ||
			 p[i] == 0x36 || p[i] == 0x3e || p[i] == 0x26 ||
			 p[i] == 0x64 || p[i] == 0x65 || (p[i] & 0xf0) == 0x40))
		i++;
	if (i + 1 < n && p[i] == 0x0f) {
		if (p[i + 1] == 0x05)
			return K_SYSCALL;
		if (p[i + 1] == 0x30)
			return K_WRMSR;
		if (i + 2 < n && p[i + 1] == 0x01 && p[i + 2] == 0xef)
			return K_WRPKRU;
		if (i + 2 < n && p[i + 1] == 0x01 && p[i + 2] == 0xee)
			return K_RDPKRU;
	}
	return K_INSNS;
}

/* "mov $imm32,%ecx" (b9 + imm32, no prefix): *@imm set. */
static bool mov_ecx_imm(const uint8_t *p, size_t n, uint32_t *imm)
{
	if (n != 5 || p[0] != 0xb9)
		return false;
	*imm = (uint32_t)p[1] | (uint32_t)p[2] << 8 | (uint32_t)p[3] << 16 |
	       (uint32_t)p[4] << 24;
	return true;
}

static struct vcpu *vcpu_of(unsigned int idx)
{
	/* one vCPU's counters are the inline ones */
	return &vcpus[inline_mode || idx >= MAX_VCPUS ? 0 : idx];
}

static void marker_exec(unsigned int idx, void *udata)
{
	uint32_t m = (uint32_t)(uintptr_t)udata;
	unsigned id = m & PMG_MARK_ID_MASK;
	struct vcpu *v = vcpu_of(idx);
	char line[512];
	int len, i, k, d;

	if (!(m & PMG_MARK_END)) {
		if (v->depth == MAX_DEPTH) {
			snprintf(line, sizeof(line),
				 "{\"region\":%u,\"vcpu\":%u,\"error\":"
				 "\"nested deeper than %d\"}\n",
				 id, idx, MAX_DEPTH);
			emit(line);
			return;
		}
		v->open[v->depth].id = id;
		memcpy(v->open[v->depth].at, v->c, sizeof(counts_t));
		v->depth++;
		return;
	}
	for (d = v->depth - 1; d >= 0 && v->open[d].id != id; d--)
		;
	if (d < 0) {
		snprintf(line, sizeof(line),
			 "{\"region\":%u,\"vcpu\":%u,\"error\":"
			 "\"end without begin on this vCPU\"}\n",
			 id, idx);
		emit(line);
		return;
	}
	len = snprintf(line, sizeof(line), "{\"region\":%u,\"vcpu\":%u", id,
		       idx);
	for (i = 0; i < NMODE; i++) {
		len += snprintf(line + len, sizeof(line) - (size_t)len,
				",\"%s\":{", mode_name[i]);
		for (k = 0; k < NKIND; k++)
			len += snprintf(line + len, sizeof(line) - (size_t)len,
					"%s\"%s\":%" PRIu64, k ? "," : "",
					kind_name[k],
					v->c[i][k] - v->open[d].at[i][k]);
		len += snprintf(line + len, sizeof(line) - (size_t)len, "}");
	}
	snprintf(line + len, sizeof(line) - (size_t)len, "}\n");
	emit(line);
	v->depth = d; /* closes any region opened inside it, unclosed */
}

/* Callback mode: udata is mode * NKIND + kind. */
static void insn_exec(unsigned int idx, void *udata)
{
	unsigned mk = (unsigned)(uintptr_t)udata;
	struct vcpu *v = vcpu_of(idx);

	v->c[mk / NKIND][K_INSNS]++;
	if (mk % NKIND != K_INSNS)
		v->c[mk / NKIND][mk % NKIND]++;
	if (mk % NKIND == K_WRMSR_PKRS)
		v->c[mk / NKIND][K_WRMSR]++;
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb), i;
	/* the last "mov $imm32,%ecx" of this block so far */
	bool ecx_known = false;
	uint32_t ecx = 0;

	(void)id;
	for (i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		int mode = qemu_plugin_insn_vaddr(insn) >= KERNEL_START
				   ? M_KERNEL
				   : M_USER;
		uint32_t marker = 0;
		int kind = classify(qemu_plugin_insn_data(insn),
				    qemu_plugin_insn_size(insn), &marker);
		uint32_t imm;

		if (mov_ecx_imm(qemu_plugin_insn_data(insn),
				qemu_plugin_insn_size(insn), &imm)) {
			ecx_known = true;
			ecx = imm;
		}
		if (kind == K_WRMSR && ecx_known && ecx == MSR_IA32_PKRS)
			kind = K_WRMSR_PKRS;

		if (kind < 0) {
			qemu_plugin_register_vcpu_insn_exec_cb(
				insn, marker_exec, QEMU_PLUGIN_CB_NO_REGS,
				(void *)(uintptr_t)marker);
			continue;
		}
		if (!inline_mode) {
			qemu_plugin_register_vcpu_insn_exec_cb(
				insn, insn_exec, QEMU_PLUGIN_CB_NO_REGS,
				(void *)(uintptr_t)(mode * NKIND + kind));
			continue;
		}
		qemu_plugin_register_vcpu_insn_exec_inline(
			insn, QEMU_PLUGIN_INLINE_ADD_U64,
			&vcpus[0].c[mode][K_INSNS], 1);
		if (kind != K_INSNS)
			qemu_plugin_register_vcpu_insn_exec_inline(
				insn, QEMU_PLUGIN_INLINE_ADD_U64,
				&vcpus[0].c[mode][kind], 1);
		if (kind == K_WRMSR_PKRS)
			qemu_plugin_register_vcpu_insn_exec_inline(
				insn, QEMU_PLUGIN_INLINE_ADD_U64,
				&vcpus[0].c[mode][K_WRMSR], 1);
	}
}

static void at_exit(qemu_plugin_id_t id, void *udata)
{
	char line[160];
	int i, d;

	(void)id;
	(void)udata;
	for (i = 0; i < MAX_VCPUS; i++)
		for (d = 0; d < vcpus[i].depth; d++) {
			snprintf(line, sizeof(line),
				 "{\"region\":%u,\"vcpu\":%d,\"error\":"
				 "\"still open at exit\"}\n",
				 vcpus[i].open[d].id, i);
			emit(line);
		}
	if (out)
		fclose(out);
	out = NULL;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id,
					   const qemu_info_t *info, int argc,
					   char **argv)
{
	int i;

	if (!info->system_emulation || strcmp(info->target_name, "x86_64")) {
		fprintf(stderr,
			"count.so: x86_64 system emulation only "
			"(target %s)\n",
			info->target_name);
		return -1;
	}
	if (info->system.max_vcpus > MAX_VCPUS) {
		fprintf(stderr, "count.so: at most %d vCPUs (maxcpus=%d)\n",
			MAX_VCPUS, info->system.max_vcpus);
		return -1;
	}
	for (i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "out=", 4) && argv[i][4]) {
			if (out)
				fclose(out);
			out = fopen(argv[i] + 4, "a");
			if (!out) {
				fprintf(stderr,
					"count.so: out=%s: cannot "
					"open for appending\n",
					argv[i] + 4);
				return -1;
			}
		} else {
			fprintf(stderr,
				"count.so: unknown argument '%s' "
				"(out=FILE)\n",
				argv[i]);
			return -1;
		}
	}
	inline_mode = info->system.max_vcpus == 1;
	qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
