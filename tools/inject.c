// SPDX-License-Identifier: MIT
/*
 * pmguard inject: the stray-write campaign behind the demo, reproducible
 * by seed (tools/campaign.c, docs/demo.md).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "campaign.h"
#include "cmds.h"
#include "pmguard.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: pmguard inject [--writes N] [--threads T]\n"
"                      [--mode off|strict|relaxed|audit] [--seed S]\n"
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
"  --mode M      off (no protection), strict, relaxed, audit (default)\n"
"  --seed S      campaign seed, decimal or 0x hex (default 1)\n"
"  --trials K    children, 1..%u, at most N (default 1; strict: 200,\n"
"                or N if smaller)\n"
"  --json        one JSON object on stdout\n"
"  --dir DIR     where the pool files go (default: a temporary directory\n"
"                under $TMPDIR, /dev/shm or /tmp, removed afterwards)\n"
"  --reports F   append the library's fault reports to F (default: none)\n"
"\n"
"Exit status: 0 the campaign ran, 1 it could not, 2 bad options.\n",
		CAMPAIGN_MAX_WRITES, CAMPAIGN_MAX_THREADS, CAMPAIGN_MAX_TRIALS);
}

static int num(const char *opt, const char *s, unsigned long long lo,
	       unsigned long long hi, unsigned long long *out)
{
	return campaign_parse_num("inject", opt, s, lo, hi, out);
}

static void print_json(const struct campaign_opts *o,
		       const struct campaign_result *r)
{
	int k;

	printf("{\n");
	printf("  \"backend\": \"%s\",\n", r->backend);
	printf("  \"mode\": \"%s\",\n", campaign_mode_name(r->mode));
	printf("  \"seed\": %llu,\n", (unsigned long long)o->seed);
	printf("  \"writes\": %llu,\n", (unsigned long long)o->writes);
	printf("  \"threads\": %u,\n", o->threads);
	printf("  \"trials\": %u,\n", o->trials);
	printf("  \"injected\": %llu,\n", (unsigned long long)r->injected);
	printf("  \"caught\": %llu,\n", (unsigned long long)r->caught);
	printf("  \"missed\": %llu,\n", (unsigned long long)r->missed);
	printf("  \"missed_by_design\": %llu,\n",
	       (unsigned long long)r->missed_by_design);
	printf("  \"missed_by_design_reason\": \"%s\",\n",
	       r->mode == CM_OFF ? "" : campaign_by_design_reason());
	printf("  \"corrupted_records\": %llu,\n",
	       (unsigned long long)r->corrupted_records);
	printf("  \"corrupted_by_design\": %llu,\n",
	       (unsigned long long)r->corrupted_by_design);
	printf("  \"silent_corruptions\": %llu,\n",
	       (unsigned long long)r->silent_corruptions);
	printf("  \"false_positives\": %llu,\n",
	       (unsigned long long)r->false_positives);
	printf("  \"elapsed_s\": %.3f,\n", r->elapsed_s);
	printf("  \"reported\": %llu,\n", (unsigned long long)r->reported);
	printf("  \"skipped\": %llu,\n", (unsigned long long)r->skipped);
	printf("  \"faults\": %llu,\n", (unsigned long long)r->faults);
	printf("  \"records\": %llu,\n", (unsigned long long)r->records);
	printf("  \"reported_records\": %llu,\n",
	       (unsigned long long)r->reported_records);
	printf("  \"reported_intact\": %llu,\n",
	       (unsigned long long)r->reported_intact);
	printf("  \"unexplained_corruptions\": %llu,\n",
	       (unsigned long long)r->unexplained);
	printf("  \"crc_failures\": %llu,\n",
	       (unsigned long long)r->crc_failures);
	printf("  \"bad_keys\": %llu,\n", (unsigned long long)r->bad_keys);
	printf("  \"lost_records\": %llu,\n",
	       (unsigned long long)r->lost_records);
	printf("  \"wrong_address\": %llu,\n",
	       (unsigned long long)r->wrong_address);
	printf("  \"trials_aborted\": %llu,\n",
	       (unsigned long long)r->trials_aborted);
	printf("  \"trials_failed\": %llu,\n",
	       (unsigned long long)r->trials_failed);
	printf("  \"reopens\": %llu,\n", (unsigned long long)r->reopens);
	printf("  \"reopens_moved\": %llu,\n",
	       (unsigned long long)r->reopens_moved);
	printf("  \"by_bug\": {\n");
	for (k = 0; k < BUG_KINDS; k++) {
		const struct bug_count *b = &r->bug[k];

		printf("    \"%s\": {\"injected\": %llu, \"caught\": %llu, "
		       "\"reported\": %llu, \"missed\": %llu, "
		       "\"missed_by_design\": %llu, \"skipped\": %llu}%s\n",
		       bug_name(k), (unsigned long long)b->injected,
		       (unsigned long long)b->caught,
		       (unsigned long long)b->reported,
		       (unsigned long long)b->missed,
		       (unsigned long long)b->missed_by_design,
		       (unsigned long long)b->skipped,
		       k + 1 < BUG_KINDS ? "," : "");
	}
	printf("  }%s\n", r->error[0] ? "," : "");
	if (r->error[0]) {
		const char *c;

		printf("  \"error\": \"");
		for (c = r->error; *c; c++)
			if (*c == '"' || *c == '\\')
				printf("\\%c", *c);
			else if ((unsigned char)*c >= 0x20)
				putchar(*c);
		printf("\"\n");
	}
	printf("}\n");
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
		.writes = 10000, .threads = 4, .mode = CM_AUDIT, .seed = 1,
	};
	struct campaign_result *r;
	struct campaign_bar bar;
	unsigned long long v;
	bool json = false, trials_set = false;
	int i, rc;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *val = NULL, *eq;
		char name[32];

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		}
		if (!strcmp(a, "--json")) {
			json = true;
			continue;
		}
		if (strncmp(a, "--", 2))
			return cli_error("inject: unexpected argument '%s' (see "
					 "pmguard inject --help)", a);
		eq = strchr(a, '=');
		snprintf(name, sizeof(name), "%.*s",
			 (int)(eq ? eq - a : (long)strlen(a)), a);
		if (strcmp(name, "--writes") && strcmp(name, "--threads") &&
		    strcmp(name, "--mode") && strcmp(name, "--seed") &&
		    strcmp(name, "--trials") && strcmp(name, "--dir") &&
		    strcmp(name, "--reports"))
			return cli_error("inject: unknown option '%s' (see "
					 "pmguard inject --help)", a);
		if (eq)
			val = eq + 1;
		else if (i + 1 < argc)
			val = argv[++i];
		else
			return cli_error("inject: %s needs a value", name);
		if (!strcmp(name, "--writes")) {
			if (num(name, val, 1, CAMPAIGN_MAX_WRITES, &v))
				return 2;
			o.writes = v;
		} else if (!strcmp(name, "--threads")) {
			if (num(name, val, 1, CAMPAIGN_MAX_THREADS, &v))
				return 2;
			o.threads = (unsigned)v;
		} else if (!strcmp(name, "--trials")) {
			if (num(name, val, 1, CAMPAIGN_MAX_TRIALS, &v))
				return 2;
			o.trials = (unsigned)v;
			trials_set = true;
		} else if (!strcmp(name, "--seed")) {
			if (num(name, val, 0, ~0ull, &v))
				return 2;
			o.seed = v;
		} else if (!strcmp(name, "--mode")) {
			o.mode = campaign_mode_parse(val);
			if (o.mode < 0)
				return cli_error("inject: --mode: bad value "
						 "'%s' (off, strict, relaxed "
						 "or audit)", val);
		} else if (!*val) {
			return cli_error("inject: %s needs a value", name);
		} else if (!strcmp(name, "--dir")) {
			o.dir = val;
		} else {
			o.report_path = val;
		}
	}
	if (!trials_set)
		o.trials = o.mode != CM_STRICT ? 1
			   : o.writes < 200 ? (unsigned)o.writes : 200;
	if (o.trials > o.writes)
		return cli_error("inject: --trials %u is more than --writes "
				 "%llu: each trial needs a stray write",
				 o.trials, (unsigned long long)o.writes);
	campaign_bar_init(&bar, campaign_mode_name(o.mode));
	o.progress = campaign_bar_draw;
	o.progress_arg = &bar;
	r = calloc(1, sizeof(*r));
	if (!r)
		return cli_error("inject: out of memory") - 1;
	rc = campaign_run(&o, r);
	campaign_bar_clear(&bar);
	if (json)
		print_json(&o, r);
	else if (!rc)
		print_text(&o, r);
	if (rc)
		cli_error("inject: %s", r->error);
	free(r);
	return rc ? 1 : 0;
}
