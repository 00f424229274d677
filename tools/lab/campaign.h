/* SPDX-License-Identifier: MIT */
/*
 * The stray-write campaign behind `pmguard inject` and `pmguard demo`: the
 * store of tools/lab/store.h written by several threads, four kinds of bugs
 * injected from code that holds no window, each trial run in a forked
 * child and the pool verified by the parent on reopen.  See docs/demo.md
 * for what is injected and how each number is counted.
 */
#ifndef PMG_CAMPAIGN_H
#define PMG_CAMPAIGN_H

#include <stdbool.h>
#include <stdint.h>

#define CAMPAIGN_MAX_THREADS	64
#define CAMPAIGN_MAX_WRITES	10000000ull
#define CAMPAIGN_MAX_TRIALS	100000u
/*
 * Stray writes per trial by default.  A trial's pool grows with its
 * writes, and on the mprotect backend every window edge mprotect()s the
 * whole pool, so one trial costs O(writes^2); trials of a bounded size
 * keep a campaign linear in its writes.
 */
#define CAMPAIGN_TRIAL_WRITES	10000u

/* Modes: off (no protection at all) and the library's three fault modes. */
enum campaign_mode {
	CM_OFF = 0,
	CM_STRICT,
	CM_RELAXED,
	CM_AUDIT,
	CM_CONTAIN,		/* reported and undone (PMG_FAULT_CONTAIN) */
	CM_MODES
};

/* The injected bugs. */
enum bug_kind {
	BUG_WILD = 0,		/* wild pointer into a record */
	BUG_OVERFLOW,		/* memset past the end of the buffer below
				   the pool */
	BUG_STALE,		/* pointer cached before the pool was closed
				   and reopened */
	BUG_XTHREAD,		/* another thread's write while one thread
				   holds its window */
	BUG_KINDS
};

struct campaign_opts {
	uint64_t writes;	/* stray writes to plan, over all trials */
	unsigned threads;	/* writer threads (1..64) */
	int mode;		/* enum campaign_mode */
	uint64_t seed;
	unsigned trials;	/* forked children, each with a fresh pool */
	const char *dir;	/* pool directory; NULL: a temporary one,
				   removed afterwards */
	const char *report_path;/* library reports appended here; NULL:
				   none (pmg_set_report_fd(-1)) */
	/* Called in the parent now and then with the fraction done. */
	void (*progress)(double done, void *arg);
	void *progress_arg;
};

struct bug_count {
	uint64_t injected, caught, reported, missed, missed_by_design,
		 skipped;
};

struct campaign_result {
	const char *backend;	/* "pku" or "mprotect" */
	int mode;
	uint64_t planned;	/* stray writes planned */
	uint64_t injected;	/* ... actually made (strict: up to the
				   first caught one of each trial) */
	uint64_t caught;	/* injections the library handled a fault
				   for (reported or not) */
	uint64_t reported;	/* ... of which a fault was reported */
	uint64_t missed;	/* injected - caught - missed_by_design */
	uint64_t missed_by_design; /* not caught by a stated limit of the
				   backend (mprotect: another thread held a
				   window) */
	uint64_t skipped;	/* planned but not made: see docs/demo.md */
	uint64_t faults;	/* stray faults handled (an overflow may
				   fault once per store) */
	uint64_t records;	/* committed records verified */
	uint64_t corrupted_records; /* committed records not as written */
	uint64_t corrupted_by_design; /* ... touched only by missed_by_design
				   strays */
	uint64_t silent_corruptions; /* ... touched by no reported stray and
				   not by design: nobody was told */
	uint64_t reported_records; /* records a reported stray aimed at */
	uint64_t reported_intact; /* ... that still read back intact */
	uint64_t unexplained;	/* corrupted records no stray aimed at */
	uint64_t crc_failures, bad_keys, lost_records;
	uint64_t false_positives; /* faults outside any injection */
	uint64_t wrong_address;	/* faults whose address was not the
				   injection's target */
	uint64_t trials, trials_aborted, trials_failed;
	uint64_t reopens, reopens_moved;
	struct bug_count bug[BUG_KINDS];
	uintptr_t site[BUG_KINDS]; /* first faulting instruction per bug */
	double elapsed_s;
	char error[256];	/* set when a trial could not run */
};

const char *campaign_mode_name(int mode);
/* enum campaign_mode for "off|strict|relaxed|audit|contain", or -1. */
int campaign_mode_parse(const char *s);
const char *bug_name(int kind);		/* short name, e.g. "wild" */
const char *bug_title(int kind);	/* a few words */
const char *bug_site(int kind);		/* the function making the write */
/* What the backend in use cannot catch ("" on PKU). */
const char *campaign_by_design_reason(void);

/*
 * Run the campaign; fills @r.  Returns 0 when every trial ran (whatever
 * the numbers say), -1 when one could not (@r->error says why).
 */
int campaign_run(const struct campaign_opts *o, struct campaign_result *r);

/*
 * Trials for @writes stray writes in @mode when none are asked for: one
 * per CAMPAIGN_TRIAL_WRITES writes; strict: at least 200 (each child
 * stops at its first stray write), but never more than @writes.
 */
unsigned campaign_default_trials(int mode, uint64_t writes);

#endif /* PMG_CAMPAIGN_H */
