// SPDX-License-Identifier: MIT
/*
 * The stray-write campaign (tools/lab/campaign.h, docs/demo.md): the parent.
 *
 * For each trial, plan the stray writes from the seed, create a fresh
 * pool file, fork a child that runs the trial (tools/lab/campaign_child.c),
 * wait for it (drawing progress), then reopen the pool, verify every
 * record and add up what happened.  The plan and what each injection did
 * live in memory shared with the child (tools/lab/campaign_child.h), so a
 * child that a strict abort killed still tells.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "campaign_child.h"
#include "cleanup.h"
#include "store.h"
#include "util.h"

/* ------------------------------------------------------------ names */

static const char *const mode_names[CM_MODES] = {
	"off", "strict", "relaxed", "audit", "contain"
};

const char *campaign_mode_name(int mode)
{
	return mode >= 0 && mode < CM_MODES ? mode_names[mode] : "?";
}

int campaign_mode_parse(const char *s)
{
	int i;

	for (i = 0; s && i < CM_MODES; i++)
		if (!strcmp(s, mode_names[i]))
			return i;
	return -1;
}

const char *bug_name(int kind)
{
	static const char *const n[BUG_KINDS] = {
		"wild", "overflow", "stale", "xthread"
	};

	return kind >= 0 && kind < BUG_KINDS ? n[kind] : "?";
}

const char *bug_title(int kind)
{
	static const char *const n[BUG_KINDS] = {
		"wild pointer",
		"off-by-N overflow from the buffer below the pool",
		"stale pointer after close + reopen",
		"another thread's write during a window",
	};

	return kind >= 0 && kind < BUG_KINDS ? n[kind] : "?";
}

const char *bug_site(int kind)
{
	static const char *const n[BUG_KINDS] = {
		"bug_wild_pointer()",
		"memset() from bug_overflow()",
		"bug_stale_pointer()",
		"bug_other_thread()",
	};

	return kind >= 0 && kind < BUG_KINDS ? n[kind] : "?";
}

const char *campaign_by_design_reason(void)
{
	if (pmg_init() || pmg_backend() != PMG_BACKEND_MPROTECT)
		return "";
	return "mprotect backend: windows opened with pmg_open()/"
	       "pmg_write_begin() are process-wide, so a write from another "
	       "thread while any thread holds one on the domain is not "
	       "caught (a persistence call on a pool opens no window: it "
	       "writes through the pool's alias, so another thread's write "
	       "during one is caught)";
}

unsigned campaign_default_trials(int mode, uint64_t writes)
{
	uint64_t n = (writes + CAMPAIGN_TRIAL_WRITES - 1) /
		     CAMPAIGN_TRIAL_WRITES;

	if (mode == CM_STRICT && n < 200)
		n = 200;
	if (n > writes)
		n = writes;
	if (n > CAMPAIGN_MAX_TRIALS)
		n = CAMPAIGN_MAX_TRIALS;
	return n ? (unsigned)n : 1;
}

/* -------------------------------------------------------------- rng */

static uint64_t splitmix(uint64_t *s)
{
	uint64_t x = (*s += 0x9E3779B97F4A7C15ull);

	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

/* ------------------------------------------------------------ parent */

static void *shared_alloc(size_t n)
{
	void *p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Sizes of trial @i. */
static void trial_shape(const struct campaign_opts *o, unsigned i,
			struct trial *t)
{
	uint64_t strays = o->writes / o->trials + (i < o->writes % o->trials);
	uint64_t puts = strays > 16ull * o->threads ? strays
						     : 16ull * o->threads;

	t->T = o->threads;
	t->ninj = (uint32_t)strays;
	t->phases = o->mode == CM_STRICT ? 2 : strays >= 64 ? 4 : 2;
	t->puts_pp = (uint32_t)((puts + (uint64_t)t->T * t->phases - 1) /
				((uint64_t)t->T * t->phases));
	t->cap = L0 + t->puts_pp * t->phases;
	t->nkeys = t->T * (t->puts_pp * t->phases / 8 > 4
				   ? t->puts_pp * t->phases / 8 : 4);
}

static void plan(struct trial *t, uint64_t seed)
{
	uint64_t rng = seed ^ 0x706c616eull;
	uint32_t j;

	for (j = 0; j < t->ninj; j++) {
		struct inj *x = &t->inj[j];
		unsigned kind = (unsigned)(splitmix(&rng) % BUG_KINDS);

		memset(x, 0, sizeof(*x));
		if (kind == BUG_XTHREAD && t->T < 2)
			kind = BUG_WILD;
		x->kind = (uint8_t)kind;
		x->thread = (uint8_t)(splitmix(&rng) % t->T);
		x->phase = (uint8_t)(kind == BUG_STALE
			? 1 + splitmix(&rng) % (t->phases - 1)
			: splitmix(&rng) % t->phases);
		x->pos = (uint32_t)(splitmix(&rng) % (t->puts_pp + 1));
		x->holder = (uint8_t)((x->thread + 1 +
				       splitmix(&rng) % (t->T > 1 ? t->T - 1
								  : 1)) %
				      t->T);
		x->r1 = splitmix(&rng);
		x->r2 = splitmix(&rng);
	}
}

/* Wait for @pid, calling the progress hook now and then. */
static int wait_child(pid_t pid, const struct campaign_opts *o,
		      const struct trial *t, unsigned trial, uint64_t total)
{
	struct timespec ts = { 0, 1000000 };
	int st;
	pid_t r;

	for (;;) {
		r = cli_wait(pid, &st, o->progress != NULL);
		if (r == pid)
			return st;
		if (r < 0)
			return -1;
		if (r == 0) {
			double in = total ? (double)__atomic_load_n(
					&t->shm->progress, __ATOMIC_RELAXED) /
					(double)total : 0;

			o->progress(((double)trial + (in > 1 ? 1 : in)) /
					    o->trials,
				    o->progress_arg);
			nanosleep(&ts, NULL);
			if (ts.tv_nsec < 64000000)
				ts.tv_nsec *= 2;
		}
	}
}

/*
 * What aimed at a record: a stray that landed and was reported, one that
 * landed as a stated limit of the backend, one that landed otherwise
 * (nobody told), or a caught stray that never landed (strict).
 */
enum { T_REP = 1, T_BD = 2, T_OTHER = 4, T_STOP = 8 };

/* Add up trial @t (verified into @bad) into @r. */
static void account(const struct trial *t, const uint8_t *bad,
		    uint8_t *touch, struct campaign_result *r, bool mp)
{
	size_t nrec = (size_t)t->T * t->cap, i;
	uint32_t j;

	memset(touch, 0, nrec);
	for (j = 0; j < t->ninj; j++) {
		const struct inj *x = &t->inj[j];
		struct bug_count *b = &r->bug[x->kind];
		bool caught, rep, by_design;
		uint64_t first, last, k;
		uint8_t flag;

		if (x->state == INJ_PLANNED)
			continue;	/* strict: the trial ended first */
		if (x->state == INJ_SKIPPED) {
			r->skipped++;
			b->skipped++;
			continue;
		}
		r->injected++;
		b->injected++;
		caught = x->faults > 0;
		rep = x->reported > 0;
		by_design = !caught && mp && t->protect &&
			    x->kind == BUG_XTHREAD;
		r->faults += x->faults;
		r->wrong_address += x->wrong_addr;
		if (caught) {
			r->caught++;
			b->caught++;
			if (!r->site[x->kind])
				r->site[x->kind] = x->ip;
		} else if (by_design) {
			r->missed_by_design++;
			b->missed_by_design++;
		} else {
			r->missed++;
			b->missed++;
		}
		if (rep) {
			r->reported++;
			b->reported++;
		}
		/*
		 * Contain undoes a caught write: it explains no corruption,
		 * so a record it alone touched that is bad counts silent.
		 */
		flag = caught && t->mode == CM_STRICT ? T_STOP
		       : caught && t->mode == CM_CONTAIN ? 0
		       : rep ? T_REP : by_design ? T_BD : T_OTHER;
		first = x->off / STORE_REC_SIZE;
		last = (x->off + x->len - 1) / STORE_REC_SIZE;
		for (k = first; k <= last && k < nrec; k++)
			touch[k] |= flag;
	}
	for (i = 0; i < nrec; i++) {
		if (touch[i] & (T_REP | T_STOP))
			r->reported_records++;
		if (!bad[i]) {
			if (touch[i] & (T_REP | T_STOP))
				r->reported_intact++;
			continue;
		}
		r->corrupted_records++;
		if (touch[i] & T_REP)
			continue;
		if (touch[i] & T_BD) {
			r->corrupted_by_design++;
			continue;
		}
		r->silent_corruptions++;
		if (!(touch[i] & (T_REP | T_BD | T_OTHER)))
			r->unexplained++;
	}
}

/* Unlink @name in the directory @dir. */
static int unlink_in_dir(const char *dir, const char *name)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return unlink(p);
}

static int record_error(struct campaign_result *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Record the first error in @r->error and return -1.  The first error is
 * the one that tells: later ones are its effects.
 */
static int record_error(struct campaign_result *r, const char *fmt, ...)
{
	va_list ap;

	if (r->error[0])
		return -1;
	va_start(ap, fmt);
	vsnprintf(r->error, sizeof(r->error), fmt, ap);
	va_end(ap);
	return -1;
}

/* Run trial @i in a child and account for it.  0, or -1 (r->error). */
static int run_trial(const struct campaign_opts *o, unsigned i,
		     const char *dir, struct trial *t, struct inj *inj_shm,
		     struct trial_shm *shm, struct campaign_result *r)
{
	uint64_t seed = o->seed + 0x9E3779B97F4A7C15ull * i;
	char path[512];
	struct store st;
	struct store_check chk;
	uint8_t *bad = NULL, *touch = NULL;
	unsigned l;
	int rc = -1, status;
	pid_t pid;

	trial_shape(o, i, t);
	t->seed = seed;
	t->inj = inj_shm;
	t->shm = shm;
	memset(shm, 0, sizeof(*shm));
	plan(t, seed);
	snprintf(path, sizeof(path), "%s/kv-%s.pool", dir,
		 campaign_mode_name(o->mode));
	t->path = path;
	t->kv = calloc(t->T, sizeof(*t->kv));
	bad = calloc((size_t)t->T * t->cap, 1);
	touch = calloc((size_t)t->T * t->cap, 1);
	if (!t->kv || !bad || !touch) {
		record_error(r, "out of memory");
		goto out;
	}
	for (l = 0; l < t->T; l++) {
		t->kv[l] = malloc((size_t)t->cap * sizeof(**t->kv));
		if (!t->kv[l]) {
			record_error(r, "out of memory");
			goto out;
		}
		store_keys(seed, l, t->T, t->nkeys, t->cap, t->kv[l]);
	}
	if (cli_scratch(path, false)) {
		record_error(r, "%s: path too long", path);
		goto out;
	}
	if (store_create_file(path, store_pool_size(t->T, t->cap))) {
		record_error(r, "creating the pool %s: %s", path,
			     pmg_errormsg());
		goto out_file;
	}
	pid = cli_fork();
	if (pid < 0) {
		record_error(r, "fork: %s", strerror(errno));
		goto out_file;
	}
	if (pid == 0)
		campaign_child_run(t);
	status = wait_child(pid, o, t, i, (uint64_t)t->ninj +
			    (uint64_t)t->T * (L0 + (uint64_t)t->puts_pp *
					      t->phases));
	r->trials++;
	r->false_positives += shm->false_positives;
	r->reopens += shm->reopens;
	r->reopens_moved += shm->moved;
	if (status == -1 || !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
		if (status != -1 && WIFSIGNALED(status) &&
		    WTERMSIG(status) == SIGABRT && o->mode == CM_STRICT) {
			r->trials_aborted++;	/* stopped at a stray */
		} else {
			r->trials_failed++;
			if (shm->msg[0])
				record_error(r, "trial %u: %s", i, shm->msg);
			else if (status != -1 && WIFSIGNALED(status))
				record_error(r, "trial %u: the child died by "
					     "signal %d (%s)", i,
					     WTERMSIG(status),
					     strsignal(WTERMSIG(status)));
			else
				record_error(r, "trial %u: the child exited "
					     "with status %d", i,
					     status == -1 ? -1
					     : WEXITSTATUS(status));
		}
	}
	/* verify on reopen, whatever became of the child */
	if (store_open(&st, path, t->T, t->cap, false)) {
		record_error(r, "reopening %s to verify it: %s", path,
			     pmg_errormsg());
		goto out_file;
	}
	if (store_verify(&st, seed, t->nkeys, t->kv, shm->done, bad, &chk)) {
		record_error(r, "trial %u: the superblock of %s is unusable",
			     i, path);
		r->trials_failed++;
	}
	store_close(&st);
	r->records += chk.records;
	r->crc_failures += chk.crc_failures;
	r->bad_keys += chk.bad_keys;
	r->lost_records += chk.lost;
	account(t, bad, touch, r, !strcmp(r->backend, "mprotect"));
	rc = r->trials_failed ? -1 : 0;
out_file:
	unlink(path);
	cli_scratch_done(path);
out:
	if (t->kv)
		for (l = 0; l < t->T; l++)
			free(t->kv[l]);
	free(t->kv);
	t->kv = NULL;
	free(bad);
	free(touch);
	return rc;
}

int campaign_run(const struct campaign_opts *o, struct campaign_result *r)
{
	char dir[300];
	bool own_dir = !o->dir;
	struct trial *t = NULL;
	struct inj *inj = NULL;
	struct trial_shm *shm = NULL;
	int report_fd = -1;
	uint64_t most = 0;
	double t0 = cli_now();
	unsigned i;
	int rc = -1;

	memset(r, 0, sizeof(*r));
	dir[0] = '\0';
	r->mode = o->mode;
	r->planned = o->writes;
	r->backend = "none";
	store_init();
	if (pmg_init())
		return record_error(r, "pmg_init: %s", pmg_errormsg());
	r->backend = pmg_backend_name(pmg_backend());
	if (o->threads < 1 || o->threads > CAMPAIGN_MAX_THREADS ||
	    o->trials < 1 || o->writes < o->trials || o->mode < 0 ||
	    o->mode >= CM_MODES)
		return record_error(r, "bad campaign options");
	/* the reports file first: a bad path is the error to report */
	if (o->report_path) {
		report_fd = open(o->report_path, O_WRONLY | O_CREAT |
				 O_APPEND | O_CLOEXEC, 0644);
		if (report_fd < 0)
			return record_error(r, "--reports %s: %s",
					    o->report_path, strerror(errno));
	}
	if (own_dir) {
		if (cli_tmpdir(dir, sizeof(dir), "pmguard")) {
			record_error(r, "making a directory in %s: %s",
				     cli_tmp_base(), strerror(errno));
			goto out;
		}
	} else {
		snprintf(dir, sizeof(dir), "%s", o->dir);
	}
	t = calloc(1, sizeof(*t));
	most = o->writes / o->trials + 1;
	inj = shared_alloc(most * sizeof(*inj));
	shm = shared_alloc(sizeof(*shm));
	if (!t || !inj || !shm) {
		record_error(r, "out of memory");
		goto out;
	}
	t->mode = o->mode;
	t->protect = o->mode != CM_OFF;
	t->gate_on = t->protect && pmg_backend() == PMG_BACKEND_MPROTECT;
	t->serialize = o->mode == CM_STRICT;
	t->report_fd = report_fd;
	rc = 0;
	for (i = 0; i < o->trials && rc == 0; i++)
		rc = run_trial(o, i, dir, t, inj, shm, r);
	if (o->progress && rc == 0)
		o->progress(1.0, o->progress_arg);
out:
	r->elapsed_s = cli_now() - t0;
	if (own_dir && dir[0]) {
		char name[64];

		snprintf(name, sizeof(name), "kv-%s.pool",
			 campaign_mode_name(o->mode));
		unlink_in_dir(dir, name);
		rmdir(dir);
		cli_scratch_done(dir);
	}
	if (report_fd >= 0)
		close(report_fd);
	free(t);
	if (inj)
		munmap(inj, most * sizeof(*inj));
	if (shm)
		munmap(shm, sizeof(*shm));
	return rc;
}
