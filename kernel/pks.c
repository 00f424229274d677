// SPDX-License-Identifier: MIT
/*
 * PKS: enable, the per-context register, exception save/restore, fault
 * callbacks and the fault decision.
 *
 * Seeds: V8 patches "Enable PKS on cpus which support it", "Introduce
 * pks_write_pkrs()", "Preserve the PKS MSR on context switch", "Introduce
 * pks_mk_readwrite()/pks_mk_noaccess()", "Preserve PKRS MSR across
 * exceptions", "Print PKS MSR on fault", "Introduce pks_update_exception()"
 * and V9's per-key fault callbacks.  The register math, the consumer table
 * and the fault policy are the shared core's (core/core.c).
 */
#include "../core/pmg_core.h"
#include "kernel.h"
#include "pgtable.h"
#include "pks.h"
#include "ptrace.h"
#include "sched.h"
#include "x86.h"

struct pmg_core pks_core;
u32 pks_init_value = PKS_INIT_VALUE;
unsigned pks_fault_mode = PMG_MODE_RELAXED;	/* the seeds' default */
struct pks_stats pks_stats;

static bool pks_enabled;
static pks_key_callback pks_key_callbacks[PMG_NR_KEYS];

bool pks_available(void)
{
	return pks_enabled;
}

/*
 * Fill the consumer table the way the seeds fill enum pks_pkey_consumers
 * and PKS_INIT_VALUE, then check the two agree.  The negative control
 * claims the PMEM key read/write instead, so nothing protects pmem and the
 * stray-write test must fail.
 */
void pks_core_setup(void)
{
	u32 cpuid_a, cpuid_b, cpuid_c, cpuid_d;
	unsigned pmem_dflt = pmg_negative_control ? PMG_RIGHTS_RW
						  : PMG_RIGHTS_AD;

	cpuid_count(0, 0, &cpuid_a, &cpuid_b, &cpuid_c, &cpuid_d);
	if (cpuid_a >= 7) {
		cpuid_count(7, 0, &cpuid_a, &cpuid_b, &cpuid_c, &cpuid_d);
		pks_enabled = !!(cpuid_c & CPUID7_ECX_PKS);
	}

	pmg_core_init(&pks_core);
	BUG_ON(pmg_core_key_claim(&pks_core, PKS_KEY_TEST, "pks_test",
				  PMG_RIGHTS_AD));
	BUG_ON(pmg_core_key_claim(&pks_core, PKS_KEY_PGMAP_PROTECTION, "pmem",
				  pmem_dflt));
	pks_init_value = pmg_core_init_value(&pks_core);
	if (!pmg_negative_control && pks_init_value != PKS_INIT_VALUE)
		panic("consumer table gives 0x%08x, PKS_INIT_VALUE is 0x%08x",
		      pks_init_value, PKS_INIT_VALUE);
}

/* Write the MSR, skipping the write when this CPU already holds @val. */
static inline void pks_write_pkrs(u32 val)
{
	struct cpu *c = this_cpu();

	if (c->pkrs_cache == val)
		return;
	c->pkrs_cache = val;
	wrmsr(MSR_IA32_PKRS, val);
}

u32 pks_read_pkrs(void)
{
	return (u32)rdmsr(MSR_IA32_PKRS);
}

/*
 * Per CPU, BSP and APs alike.  Called only after CPUID said PKS exists:
 * setting CR4.PKS on a CPU model without it hangs QEMU's vCPU.
 */
void pks_setup(void)
{
	struct cpu *c = this_cpu();

	if (!pks_enabled)
		return;
	wrmsr(MSR_IA32_PKRS, pks_init_value);
	c->pkrs_cache = pks_init_value;
	write_cr4(read_cr4() | X86_CR4_PKS);
	if (c->curr)
		c->curr->pkrs = pks_init_value;
	c->boot_pkrs = pks_read_pkrs();
}

static bool pks_key_valid(int pkey)
{
	/* Key 0 must stay read/write: every untagged page uses it. */
	return pkey > PKS_KEY_DEFAULT && pkey < PMG_NR_KEYS;
}

/*
 * The seeds' pks_update_protection(): read-modify-write of the running
 * context's value with preemption off, so the value cannot be switched
 * out (and back in on top of a newer one) between the read and the write.
 */
void pks_update_protection(int pkey, u32 protection)
{
	struct task *t;

	if (!pks_enabled)
		return;
	if (WARN(!pks_key_valid(pkey), "pks: invalid pkey %d\n", pkey))
		return;
	preempt_disable();
	t = current;
	t->pkrs = pmg_pkval_update(t->pkrs, (unsigned)pkey, protection);
	pks_write_pkrs(t->pkrs);
	preempt_enable();
}

void pks_mk_readwrite(int pkey)
{
	pks_update_protection(pkey, PKEY_READ_WRITE);
}

void pks_mk_noaccess(int pkey)
{
	pks_update_protection(pkey, PKEY_DISABLE_ACCESS);
}

void pks_set_readwrite(int pkey)
{
	pks_update_protection(pkey, PKEY_READ_WRITE);
}

void pks_set_noaccess(int pkey)
{
	pks_update_protection(pkey, PKEY_DISABLE_ACCESS);
}

void pks_set_nowrite(int pkey)
{
	pks_update_protection(pkey, PKEY_DISABLE_WRITE);
}

/*
 * Exception entry: park the interrupted context's value in the auxiliary
 * pt_regs and run the handler with the init value, so no handler inherits
 * a window it did not open.  Each nesting level has its own aux space.
 */
void pks_save_pt_regs(struct pt_regs *regs)
{
	struct task *t = current;

	if (!pks_enabled || !t)
		return;
	to_extended_pt_regs(regs)->aux.pks_thread_pkrs = t->pkrs;
	t->pkrs = pks_init_value;
	pks_write_pkrs(pks_init_value);
}

/* Exception exit: back to the (possibly updated) interrupted value. */
void pks_restore_pt_regs(struct pt_regs *regs)
{
	struct task *t = current;

	if (!pks_enabled || !t)
		return;
	t->pkrs = to_extended_pt_regs(regs)->aux.pks_thread_pkrs;
	pks_write_pkrs(t->pkrs);
}

u32 pks_saved_pkrs(struct pt_regs *regs)
{
	return to_extended_pt_regs(regs)->aux.pks_thread_pkrs;
}

void pks_update_exception(struct pt_regs *regs, u8 pkey, u8 protection)
{
	struct pt_regs_auxiliary *aux;

	if (!pks_enabled)
		return;
	aux = &to_extended_pt_regs(regs)->aux;
	aux->pks_thread_pkrs = pmg_pkval_update(aux->pks_thread_pkrs, pkey,
						protection);
}

/* Called with interrupts off by the scheduler; the outgoing value is
 * already in prev->pkrs (every writer above keeps it there). */
void pks_switch_to(u32 next_pkrs)
{
	if (pks_enabled)
		pks_write_pkrs(next_pkrs);
}

/* ---- Fault callbacks and the fault decision ---- */

/* The core's callback shape carries no pt_regs: hand the kernel's
 * callback the frame of the fault being decided on this CPU. */
static bool pks_core_callback(const struct pmg_fault *f)
{
	pks_key_callback cb = pks_key_callbacks[f->key];

	return cb && cb(this_cpu()->fault_regs, f->addr,
			f->acc == PMG_ACC_WRITE);
}

int pks_set_key_callback(int pkey, pks_key_callback cb)
{
	if (!pks_key_valid(pkey))
		return -EINVAL;
	pks_key_callbacks[pkey] = cb;
	return pmg_core_set_callback(&pks_core, (unsigned)pkey,
				     cb ? pks_core_callback : NULL);
}

pks_key_callback pks_get_key_callback(int pkey)
{
	return pks_key_valid(pkey) ? pks_key_callbacks[pkey] : NULL;
}

static void pks_report(const char *what, const struct pmg_fault *f,
		       const struct task *t)
{
	const struct pmg_core_key *e = &pks_core.key[f->key];
	char sym[KSYM_LEN];

	printk("WARNING: CPU: %d PID: %d Comm: %s at %s\n", this_cpu()->id,
	       t ? t->id : -1, t ? t->name : "?",
	       ksym(f->ip, sym, sizeof(sym)));
	printk("pks: stray %s of 0x%lx, pkey %u (%s): %s\n",
	       f->acc == PMG_ACC_WRITE ? "write" : "read",
	       (unsigned long)f->addr, f->key, e->name, what);
	printk("PKRS: 0x%08x -> 0x%08x (pkey %u %s, pks_fault_mode=%s)\n",
	       f->saved_pkval, f->new_pkval, f->key,
	       pmg_rights_name(pmg_pkval_rights(f->new_pkval, f->key)),
	       pmg_mode_name(f->mode));
}

/*
 * A protection-key #PF.  The core decides (core/core.c,
 * pmg_core_fault_decide()): a key callback may handle the fault, then the
 * mode applies.  The mode is the seeds' pks_fault_mode and, as there,
 * governs the PMEM key only; every other key is strict, so a stray access
 * with no callback oopses.  PKRS is only ever what this kernel wrote, so
 * the core's sync step is off (no_sync): an explicit pks_mk_noaccess() on
 * a key whose default allows access is enforced.
 *
 * The decision reads only the interrupted context's saved PKRS, never the
 * thread's window counts: kmap_local_page() and the dax guards set PKRS
 * when they open a window, and an exception handler runs with the init
 * value whatever windows the thread it interrupted holds (test 15).
 */
bool pks_handle_key_fault(struct pt_regs *regs, unsigned long hw_error_code,
			  unsigned long address)
{
	struct cpu *c = this_cpu();
	u32 *saved = &to_extended_pt_regs(regs)->aux.pks_thread_pkrs;
	pteval_t *pte = lookup_pte(address);
	struct task *t = current;
	struct pt_regs *outer;
	struct pmg_fault f;

	pks_stats.faults++;
	f.addr = address;
	f.ip = regs->ip;
	f.key = pte ? pte_pkey(*pte) : PKS_KEY_DEFAULT;
	f.acc = (hw_error_code & 2) ? PMG_ACC_WRITE : PMG_ACC_READ;
	f.saved_pkval = *saved;
	f.code = (int)hw_error_code;
	f.no_sync = true;	/* PKRS is only ever what we wrote */
	f.mode = f.key == PKS_KEY_PGMAP_PROTECTION ? pks_fault_mode
						   : PMG_MODE_STRICT;

	/* The core's callback shape has no pt_regs: the kernel callback
	 * finds this fault's frame here (nested faults stack it). */
	outer = c->fault_regs;
	c->fault_regs = regs;
	pmg_core_fault_decide(&pks_core, &f);
	c->fault_regs = outer;

	switch (f.action) {
	case PMG_ACT_GRANT:
		/* The seeds' callback semantics: true means handled, and the
		 * only grant is what the callback set with
		 * pks_update_exception() (already in *saved).  A callback
		 * that grants nothing sees the access fault again. */
		pks_stats.callbacks++;
		return true;
	case PMG_ACT_RELAX_REPORT:
	case PMG_ACT_RELAX_SILENT:
		/* Relaxed "disable[s] the protection and allow[s] access"
		 * (seed 001): the key becomes read-write for the faulting
		 * context, whatever the access; a stray read is not granted
		 * read-only (the core's grant, used by user space). */
		f.new_pkval = pmg_pkval_update(f.saved_pkval, f.key,
					       PKEY_READ_WRITE);
		if (f.action == PMG_ACT_RELAX_REPORT) {
			pks_stats.relaxed_reports++;
			pks_report("protection disabled for this context", &f,
				   t);
		} else {
			pks_stats.relaxed_silent++;
		}
		*saved = f.new_pkval;
		return true;
	default:
		/* PMG_ACT_STRICT (the kernel never asks for a sync, and
		 * offers no audit mode) */
		pks_stats.strict++;
		return false;
	}
}

/* The seeds' "Print PKS MSR on fault": the interrupted context's value. */
void pks_show_regs(struct pt_regs *regs)
{
	if (!pks_enabled)
		return;
	printk("PKRS: 0x%08x (handler 0x%08x, init 0x%08x)\n",
	       pks_saved_pkrs(regs), pks_read_pkrs(), pks_init_value);
}

/* pks_fault_mode=relaxed|strict.  The core also knows "audit"; this port
 * does not offer it (it needs a single-step re-arm). */
int pks_set_fault_mode(const char *val)
{
	int mode = pmg_mode_parse(val);

	if (mode != PMG_MODE_RELAXED && mode != PMG_MODE_STRICT)
		return -EINVAL;
	pks_fault_mode = (unsigned)mode;
	return 0;
}
