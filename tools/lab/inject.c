// SPDX-License-Identifier: MIT
/*
 * pmguard inject: the stray-write campaign behind the demo, reproducible
 * by seed (tools/lab/campaign.c, docs/demo.md).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "campaign.h"
#include "cmds.h"
#include "json.h"
#include "pmguard.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: pmguard inject [--writes N] [--threads T]\n"
"                      [--mode off|strict|relaxed|audit|contain]\n"
"                      [--seed S]\n"
"                      [--trials K] [--json] [--dir DIR] [--reports FILE]\n"
"\n"
"A persistent key-value store on a pool, written by T threads through\n"
"windows and the persistence calls, takes N stray writes from code that\n"
"holds no window (wild pointers, an overflow from the buffer below the\n"
"pool, stale pointers after a close and reopen, another thread's write\n"
"during a window); every record is verified afterwards.  Each trial runs\n"
"in a child with a fresh pool (strict ends a child at its first stray\n"
"write); the N writes are spread over the K trials.\n"
"\n"
"  --writes N    stray writes to inject, 1..%llu (default 10000)\n"
"  --threads T   writer threads, 1..%d (default 4)\n"
"  --mode M      off (no protection), strict, relaxed, audit (default),\n"
"                contain (stray writes reported and undone)\n"
"  --seed S      campaign seed, decimal or 0x hex (default 1)\n"
"  --trials K    children, 1..%u, at most N (default: one per %u\n"
"                writes; strict: at least 200, or N if smaller)\n"
"  --json        one JSON object on stdout\n"
"  --dir DIR     where the pool files go (default: a temporary directory\n"
"                under $TMPDIR, /dev/shm or /tmp, removed afterwards)\n"
"  --reports F   append the library's fault reports to F (default: none)\n"
"\n"
"Progress goes to stderr: a bar on a terminal, else a line every %d s\n"
"(PMGUARD_PROGRESS=S sets S, 0 a line per step, off none).\n"
"Exit status: 0 the campaign ran, 1 it could not, 2 bad options.\n",
		CAMPAIGN_MAX_WRITES, CAMPAIGN_MAX_THREADS, CAMPAIGN_MAX_TRIALS,
		CAMPAIGN_TRIAL_WRITES, CLI_PROGRESS_S);
}

static void print_json(const struct campaign_opts *o,
		       const struct campaign_result *r)
{
	struct json j;
	int k;

	json_begin(&j, stdout, true);
	json_str(&j, "backend", r->backend);
	json_str(&j, "mode", campaign_mode_name(r->mode));
	json_u64(&j, "seed", o->seed);
	json_u64(&j, "writes", o->writes);
	json_u64(&j, "threads", o->threads);
	json_u64(&j, "trials", o->trials);
	json_u64(&j, "injected", r->injected);
	json_u64(&j, "caught", r->caught);
	json_u64(&j, "missed", r->missed);
	json_u64(&j, "missed_by_design", r->missed_by_design);
	json_str(&j, "missed_by_design_reason",
		 r->mode == CM_OFF ? "" : campaign_by_design_reason());
	json_u64(&j, "corrupted_records", r->corrupted_records);
	json_u64(&j, "corrupted_by_design", r->corrupted_by_design);
	json_u64(&j, "silent_corruptions", r->silent_corruptions);
	json_u64(&j, "false_positives", r->false_positives);
	json_num(&j, "elapsed_s", r->elapsed_s, 3);
	json_u64(&j, "reported", r->reported);
	json_u64(&j, "skipped", r->skipped);
	json_u64(&j, "faults", r->faults);
	json_u64(&j, "records", r->records);
	json_u64(&j, "reported_records", r->reported_records);
	json_u64(&j, "reported_intact", r->reported_intact);
	json_u64(&j, "unexplained_corruptions", r->unexplained);
	json_u64(&j, "crc_failures", r->crc_failures);
	json_u64(&j, "bad_keys", r->bad_keys);
	json_u64(&j, "lost_records", r->lost_records);
	json_u64(&j, "wrong_address", r->wrong_address);
	json_u64(&j, "trials_aborted", r->trials_aborted);
	json_u64(&j, "trials_failed", r->trials_failed);
	json_u64(&j, "reopens", r->reopens);
	json_u64(&j, "reopens_moved", r->reopens_moved);
	json_obj(&j, "by_bug");
	for (k = 0; k < BUG_KINDS; k++) {
		const struct bug_count *b = &r->bug[k];

		json_obj(&j, bug_name(k));
		j.pretty = false;	/* one line per bug */
		json_u64(&j, "injected", b->injected);
		json_u64(&j, "caught", b->caught);
		json_u64(&j, "reported", b->reported);
		json_u64(&j, "missed", b->missed);
		json_u64(&j, "missed_by_design", b->missed_by_design);
		json_u64(&j, "skipped", b->skipped);
		json_end(&j);
		j.pretty = true;
	}
	json_end(&j);
	if (r->error[0])
		json_str(&j, "error", r->error);
	json_finish(&j);
}

static void print_text(const struct campaign_opts *o,
		       const struct campaign_result *r)
{
	const char *why = campaign_by_design_reason();
	int k;

	printf("pmguard inject: mode %s, backend %s, seed %llu, %u thread%s, "
	       "%u trial%s\n", campaign_mode_name(r->mode), r->backend,
	       (unsigned long long)o->seed, o->threads,
	       o->threads == 1 ? "" : "s", o->trials,
	       o->trials == 1 ? "" : "s");
	printf("  stray writes: %llu planned, %llu made, %llu skipped\n",
	       (unsigned long long)r->planned,
	       (unsigned long long)r->injected,
	       (unsigned long long)r->skipped);
	printf("  caught %llu (reported %llu), missed %llu, missed by "
	       "design %llu\n", (unsigned long long)r->caught,
	       (unsigned long long)r->reported,
	       (unsigned long long)r->missed,
	       (unsigned long long)r->missed_by_design);
	if (r->missed_by_design && *why)
		printf("    (%s)\n", why);
	printf("  records verified on reopen: %llu; corrupted %llu (by "
	       "design %llu, silent %llu)\n",
	       (unsigned long long)r->records,
	       (unsigned long long)r->corrupted_records,
	       (unsigned long long)r->corrupted_by_design,
	       (unsigned long long)r->silent_corruptions);
	printf("  false positives %llu; %.2f s\n",
	       (unsigned long long)r->false_positives, r->elapsed_s);
	for (k = 0; k < BUG_KINDS; k++)
		printf("  %-9s %llu made, %llu caught, %llu by design, %llu "
		       "skipped\n", bug_name(k),
		       (unsigned long long)r->bug[k].injected,
		       (unsigned long long)r->bug[k].caught,
		       (unsigned long long)r->bug[k].missed_by_design,
		       (unsigned long long)r->bug[k].skipped);
}

int cmd_inject(int argc, char **argv)
{
	struct campaign_opts o = {
		.threads = 4, .mode = CM_AUDIT, .seed = 1,
	};
	struct campaign_result *r;
	struct cli_bar bar;
	unsigned long long writes = 10000, threads = 4, trials = 0, seed = 1;
	bool json = false, trials_set = false;
	int mode = CM_AUDIT, rc;
	const char *const modes[] = { "off", "strict", "relaxed", "audit",
				      "contain", NULL };
	const struct cli_opt opts[] = {
		{ "--writes", CLI_COUNT, 1, CAMPAIGN_MAX_WRITES, NULL,
		  &writes, NULL },
		{ "--threads", CLI_COUNT, 1, CAMPAIGN_MAX_THREADS, NULL,
		  &threads, NULL },
		{ "--mode", CLI_CHOICE, 0, 0, modes, &mode, NULL },
		{ "--seed", CLI_SEED, 0, ~0ull, NULL, &seed, NULL },
		{ "--trials", CLI_COUNT, 1, CAMPAIGN_MAX_TRIALS, NULL,
		  &trials, &trials_set },
		{ "--json", CLI_FLAG, 0, 0, NULL, &json, NULL },
		{ "--dir", CLI_STRING, 0, 0, NULL, &o.dir, NULL },
		{ "--reports", CLI_STRING, 0, 0, NULL, &o.report_path, NULL },
		{ NULL, CLI_FLAG, 0, 0, NULL, NULL, NULL },
	};
	const struct cli_verb verb = { "inject", opts, usage, NULL, NULL };

	rc = cli_args(&verb, argc, argv);
	if (rc != CLI_GO_ON)
		return rc;
	o.writes = writes;
	o.threads = (unsigned)threads;
	o.mode = mode;
	o.seed = seed;
	o.trials = trials_set ? (unsigned)trials
			      : campaign_default_trials(o.mode, o.writes);
	if (o.trials > o.writes)
		return cli_error("inject: --trials %u is more than --writes "
				 "%llu: each trial needs a stray write",
				 o.trials, (unsigned long long)o.writes);
	cli_bar_init(&bar, "inject", campaign_mode_name(o.mode));
	o.progress = cli_bar_draw;
	o.progress_arg = &bar;
	r = calloc(1, sizeof(*r));
	if (!r)
		return cli_error("inject: out of memory") - 1;
	rc = campaign_run(&o, r);
	cli_bar_clear(&bar);
	if (json)
		print_json(&o, r);
	else if (!rc)
		print_text(&o, r);
	if (rc)
		cli_error("inject: %s", r->error);
	free(r);
	return rc ? 1 : 0;
}
