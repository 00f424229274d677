/* SPDX-License-Identifier: MIT */
/*
 * The campaign's two sides (tools/lab/campaign.h, docs/demo.md): the parent
 * (tools/lab/campaign.c) plans each trial and verifies the pool afterwards;
 * the child (tools/lab/campaign_child.c) runs the trial.  What they share: the
 * trial's description, set before the fork, and the plan and outcome of
 * every injection, in memory shared with the child so that a child a
 * strict abort killed still tells.
 */
#ifndef PMG_CAMPAIGN_CHILD_H
#define PMG_CAMPAIGN_CHILD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "campaign.h"
#include "store.h"

#define L0		4	/* records per log before the threads start */

enum { INJ_PLANNED = 0, INJ_STARTED, INJ_DONE, INJ_SKIPPED };

/* One planned stray write and what became of it. */
struct inj {
	/* the plan (parent) */
	uint8_t kind, thread, phase, holder;
	uint32_t pos;		/* made before put #pos of the phase */
	uint64_t r1, r2;	/* target choice, value mask */
	/* the outcome (child; the observer runs on the injecting thread) */
	uint8_t state;
	uint32_t faults;	/* stray faults charged to it */
	uint32_t reported;	/* ... of which reported */
	uint32_t wrong_addr;	/* ... whose address was off target */
	uint64_t off;		/* target: pool offset and length */
	uint32_t len;
	uintptr_t ip;		/* first faulting instruction */
};

/* Per-trial results the child leaves for the parent. */
struct trial_shm {
	uint64_t progress;	/* puts done + injections made */
	uint64_t false_positives;
	uint64_t done[CAMPAIGN_MAX_THREADS]; /* puts finished per log */
	uint32_t reopens, moved;
	char msg[256];		/* why the child failed */
};

struct wslot {			/* cross-thread handshake, per writer */
	int req;		/* 1: hold a window for another thread */
	int holding;		/* 1: holding it */
	int done;		/* 1: the other thread's stray is done */
	int bell;		/* futex: bumped to wake this writer */
} __attribute__((aligned(64)));

struct trial {
	/* set by the parent before the fork */
	int mode;
	bool protect;		/* pool under a domain (not "off") */
	bool gate_on;		/* mprotect: order strays against windows */
	bool serialize;		/* strict: one stray at a time */
	unsigned T, phases;
	uint32_t puts_pp;	/* puts per thread per phase */
	uint32_t cap, nkeys;
	uint64_t seed;
	const char *path;
	int report_fd;		/* the --reports file, or -1 */
	struct store_kv **kv;	/* [T][cap]: what each writer puts */
	struct inj *inj;	/* [ninj], shared */
	uint32_t ninj;
	struct trial_shm *shm;	/* shared */
	/* child only */
	struct store st;
	uint32_t **sched;	/* per thread: injection indexes in order */
	uint32_t *nsched, *next;
	char ***cached;		/* [T][cap]: record pointers as taken */
	uint64_t committed[CAMPAIGN_MAX_THREADS];
	uint64_t at_start[CAMPAIGN_MAX_THREADS]; /* committed at phase start */
	struct wslot ws[CAMPAIGN_MAX_THREADS];
	pthread_mutex_t slock;	/* one cross-thread (strict: any) stray */
	int slock_waiters;
	pthread_rwlock_t gate;	/* mprotect: windows (rd) vs strays (wr) */
	int active;		/* writers not finished with the phase */
	unsigned phase;
	char *nb;		/* the buffer just below the pool, or NULL */
};


/* The child: run trial @t start to end, then _exit(). */
void campaign_child_run(struct trial *t) __attribute__((noreturn));

#endif /* PMG_CAMPAIGN_CHILD_H */
