// SPDX-License-Identifier: MIT
/*
 * pmguard demo: the main job.  One persistent key-value store, the same
 * stray writes (same seed) under each mode: off, strict, relaxed, audit;
 * then a table of what each mode caught, reported and let corrupt.  The
 * campaign is tools/lab/campaign.c; docs/demo.md explains every number.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "campaign.h"
#include "cleanup.h"
#include "cmds.h"
#include "pmguard.h"

#define DEMO_WRITES	2000
#define DEMO_THREADS	4
#define DEMO_TRIALS	20	/* strict: each child stops at a stray */

static const int order[CM_MODES] = { CM_OFF, CM_STRICT, CM_RELAXED,
				     CM_AUDIT, CM_CONTAIN };

static void usage(FILE *f)
{
	fprintf(f,
"usage: pmguard demo [--writes N] [--threads T] [--seed S]\n"
"\n"
"Runs the stray-write campaign of `pmguard inject` (N stray writes,\n"
"default %d, T writer threads, default %d, seed S, default 1) once per\n"
"mode: off, strict (%d runs, each stopped at its first stray write),\n"
"relaxed, audit, contain, on a pool in a temporary directory that is removed\n"
"afterwards; prints what each mode caught, reported and let corrupt.\n"
"Exit status: 0 when every mode did what it promises, 1 otherwise.\n",
		DEMO_WRITES, DEMO_THREADS, DEMO_TRIALS);
}

static unsigned long long u(uint64_t v)
{
	return (unsigned long long)v;
}

/* The first line of @path that contains @needle, into @buf. */
static bool find_line(const char *path, const char *needle, char *buf,
		      size_t size)
{
	FILE *f = fopen(path, "r");
	bool found = false;

	if (!f)
		return false;
	while (fgets(buf, (int)size, f)) {
		if (strstr(buf, needle)) {
			buf[strcspn(buf, "\n")] = '\0';
			found = true;
			break;
		}
	}
	fclose(f);
	return found;
}

static void print_table(const struct campaign_result *res)
{
	int i;

	printf("\n        ----------- stray writes -----------   "
	       "-- corrupted records --\n");
	printf("mode     made caught report missed by-design   "
	       "total by-design silent  false+  time\n");
	for (i = 0; i < CM_MODES; i++) {
		const struct campaign_result *r = &res[order[i]];

		printf("%-7s %5llu %6llu %6llu %6llu %9llu   %5llu %9llu "
		       "%6llu  %6llu %4.1fs\n",
		       campaign_mode_name(order[i]), u(r->injected),
		       u(r->caught), u(r->reported), u(r->missed),
		       u(r->missed_by_design), u(r->corrupted_records),
		       u(r->corrupted_by_design), u(r->silent_corruptions),
		       u(r->false_positives), r->elapsed_s);
	}
	printf("\n  made       stray writes made (strict: each run stops at "
	       "its first caught one)\n"
	       "  caught     the library handled a fault for it; report: "
	       "and reported it\n"
	       "  by-design  not caught because of a stated limit of the "
	       "backend (below)\n"
	       "  silent     corrupted records that no report pointed at "
	       "(not by design)\n"
	       "  false+     legitimate writes (windows, persistence calls) "
	       "that faulted\n");
}

static void print_findings(const struct campaign_result *res,
			   const char *dir, bool pku)
{
	const struct campaign_result *off = &res[CM_OFF], *st = &res[CM_STRICT];
	const struct campaign_result *rl = &res[CM_RELAXED], *au = &res[CM_AUDIT];
	const struct campaign_result *ct = &res[CM_CONTAIN];
	char path[600], needle[64], line[512];
	int k;

	printf("\nWhat it shows:\n");
	printf("  off      %llu of %llu records corrupted and nobody was "
	       "told: %llu silent corruptions.\n", u(off->corrupted_records),
	       u(off->records), u(off->silent_corruptions));
	printf("  strict   %llu runs, %llu stopped (abort) at their first "
	       "caught stray write;\n           every pool verified on "
	       "reopen: %llu corrupted records", u(st->trials),
	       u(st->trials_aborted),
	       u(st->corrupted_records - st->corrupted_by_design));
	if (st->corrupted_by_design)
		printf(",\n           besides %llu by writes this backend "
		       "cannot catch (by design)", u(st->corrupted_by_design));
	printf(".\n");
	printf("  relaxed  the PKS patch set's safety valve: %llu report%s (once per "
	       "domain; the pool's\n           domain is made anew at each "
	       "reopen), then strays passed:\n           %llu without a "
	       "fault, %llu faulted silently; %llu records corrupted "
	       "silently.\n", u(rl->reported), rl->reported == 1 ? "" : "s",
	       u(rl->missed), u(rl->caught - rl->reported),
	       u(rl->silent_corruptions));
	printf("  audit    every caught stray write reported with its site: "
	       "%llu reports;\n           the %llu corrupted records are "
	       "exactly the %llu reported ones,\n           %llu silent",
	       u(au->reported), u(au->corrupted_records -
				    au->corrupted_by_design),
	       u(au->reported_records), u(au->silent_corruptions));
	if (au->corrupted_by_design)
		printf("; %llu more corrupted by design (not caught)",
		       u(au->corrupted_by_design));
	printf(".\n");
	printf("  contain  every caught stray write reported and undone: "
	       "%llu caught of %llu made,\n           %llu corrupted "
	       "records", u(ct->caught), u(ct->injected),
	       u(ct->corrupted_records - ct->corrupted_by_design));
	if (ct->corrupted_by_design)
		printf("; %llu more corrupted by design (not caught)",
		       u(ct->corrupted_by_design));
	printf("; the run completed.\n");

	snprintf(path, sizeof(path), "%s/reports-audit.log", dir);
	printf("\nAudit reports, one per bug site (all %llu are in the "
	       "report file):\n", u(au->reported));
	for (k = 0; k < BUG_KINDS; k++) {
		printf("  %-9s %s, in %s\n", bug_name(k), bug_title(k),
		       bug_site(k));
		snprintf(needle, sizeof(needle), "at ip 0x%llx",
			 (unsigned long long)au->site[k]);
		if (au->site[k] && find_line(path, needle, line, sizeof(line)))
			printf("            %s\n", line);
		else if (au->bug[k].missed_by_design)
			printf("            (none: %llu made, all missed by "
			       "design)\n", u(au->bug[k].missed_by_design));
		else
			printf("            (no report)\n");
	}
	snprintf(path, sizeof(path), "%s/reports-strict.log", dir);
	if (find_line(path, "strict (aborting)", line, sizeof(line)))
		printf("  strict, first run:\n            %s\n", line);

	printf("\nBackend: %s.  ", pku ? "pku" : "mprotect");
	if (pku)
		printf("Windows are thread-local: a write from another thread "
		       "while one\nthread holds its window faults like any "
		       "other stray write.\n");
	else
		printf("This CPU has no PKU; the fallback emulates domains "
		       "with page\npermissions, so windows are process-wide. "
		       "It cannot catch a write from another\nthread while "
		       "any thread holds a window on the pool (the xthread "
		       "bug): such writes\nare counted as missed by design, "
		       "never as caught.  A persistence call on a pool\n"
		       "opens no window (it writes through the pool's "
		       "alias), so a write during\none is caught.  "
		       "Run the demo in the PKU guest\n"
		       "(guest/vmrun -- pmguard demo) to see them caught.\n");
}

/* The promises each mode makes; prints what failed.  True if all held. */
static bool promises_held(const struct campaign_result *res)
{
	const struct campaign_result *r;
	bool ok = true;

#define PROMISE(cond, what)						\
	do {								\
		if (!(cond)) {						\
			fprintf(stderr, "pmguard demo: FAILED: %s\n", what); \
			ok = false;					\
		}							\
	} while (0)
	r = &res[CM_OFF];
	PROMISE(r->caught == 0 && r->corrupted_records > 0,
		"off: expected corruption and no fault");
	r = &res[CM_STRICT];
	PROMISE(r->corrupted_records == r->corrupted_by_design,
		"strict: a pool did not verify clean");
	PROMISE(r->caught == r->injected - r->missed_by_design,
		"strict: a stray write was missed");
	r = &res[CM_AUDIT];
	PROMISE(r->caught == r->injected - r->missed_by_design,
		"audit: a stray write was missed");
	PROMISE(r->silent_corruptions == 0, "audit: silent corruption");
	PROMISE(r->reported_intact == 0 &&
		r->corrupted_records - r->corrupted_by_design ==
			r->reported_records,
		"audit: corrupted records are not the reported ones");
	r = &res[CM_CONTAIN];
	PROMISE(r->caught == r->injected - r->missed_by_design,
		"contain: a stray write was missed");
	PROMISE(r->corrupted_records == r->corrupted_by_design,
		"contain: a caught stray write corrupted a record");
	PROMISE(r->silent_corruptions == 0, "contain: silent corruption");
	for (int i = 0; i < CM_MODES; i++) {
		r = &res[i];
		PROMISE(r->false_positives == 0 && r->wrong_address == 0 &&
			r->unexplained == 0 && r->lost_records == 0,
			"a legitimate write faulted, a report named the wrong "
			"address, or records were lost");
	}
#undef PROMISE
	return ok;
}

int cmd_demo(int argc, char **argv)
{
	struct campaign_result *res;
	struct campaign_opts o = {
		.writes = DEMO_WRITES, .threads = DEMO_THREADS, .seed = 1,
	};
	char dir[300], reports[CM_MODES][400] = { { 0 } };
	unsigned long long writes = DEMO_WRITES, threads = DEMO_THREADS;
	unsigned long long seed = 1;
	const struct cli_opt opts[] = {
		{ "--writes", CLI_COUNT, DEMO_TRIALS, CAMPAIGN_MAX_WRITES,
		  NULL, &writes, NULL },
		{ "--threads", CLI_COUNT, 1, CAMPAIGN_MAX_THREADS, NULL,
		  &threads, NULL },
		{ "--seed", CLI_SEED, 0, ~0ull, NULL, &seed, NULL },
		{ NULL, CLI_FLAG, 0, 0, NULL, NULL, NULL },
	};
	const struct cli_verb verb = { "demo", opts, usage, NULL, NULL };
	bool pku, ok = true;
	double t0 = cli_now();
	int i, rc;

	rc = cli_args(&verb, argc, argv);
	if (rc != CLI_GO_ON)
		return rc;
	rc = 0;
	o.writes = writes;
	o.threads = (unsigned)threads;
	o.seed = seed;
	if (pmg_init()) {
		cli_error("demo: %s", pmg_errormsg());
		return 1;
	}
	pku = pmg_backend() == PMG_BACKEND_PKU;
	if (cli_tmpdir(dir, sizeof(dir), "pmguard-demo")) {
		cli_error("demo: making a directory in %s: %s",
			  cli_tmp_base(), strerror(errno));
		return 1;
	}
	res = calloc(CM_MODES, sizeof(*res));
	if (!res) {
		rmdir(dir);
		cli_scratch_done(dir);
		return 1;
	}

	printf("pmguard demo: stray writes against a persistent key-value "
	       "store\n\n");
	printf("backend  %s%s\n", pku ? "pku" : "mprotect",
	       pku ? " (protection keys: windows are per thread)"
		   : " (no PKU here: page permissions, windows are "
		     "process-wide;\n         it cannot catch another "
		     "thread's write during a window)");
	printf("store    %u writer threads, each appending checksummed "
	       "64-byte records\n         to its own log, through windows "
	       "and pmg_memcpy_persist();\n         pool in %s (removed "
	       "afterwards)\n", o.threads, dir);
	printf("bugs     %llu stray writes per mode (seed %llu) from code "
	       "that holds no window:\n", u(o.writes), u(o.seed));
	for (i = 0; i < BUG_KINDS; i++)
		printf("           %-9s %s\n", bug_name(i), bug_title(i));
	printf("\n");
	fflush(stdout);

	for (i = 0; i < CM_MODES && ok; i++) {
		int m = order[i];
		struct cli_bar bar;

		snprintf(reports[m], sizeof(reports[m]), "%s/reports-%s.log",
			 dir, campaign_mode_name(m));
		o.mode = m;
		o.trials = m == CM_STRICT ? DEMO_TRIALS
			   : campaign_default_trials(m, o.writes);
		o.dir = dir;
		o.report_path = reports[m];
		cli_bar_init(&bar, "demo", campaign_mode_name(m));
		o.progress = cli_bar_draw;
		o.progress_arg = &bar;
		if (campaign_run(&o, &res[m])) {
			cli_bar_clear(&bar);
			cli_error("demo: %s: %s", campaign_mode_name(m),
				  res[m].error);
			ok = false;
			rc = 1;
			break;
		}
		cli_bar_clear(&bar);
		printf("  %-8s done in %.1f s\n", campaign_mode_name(m),
		       res[m].elapsed_s);
		fflush(stdout);
	}
	if (ok) {
		print_table(res);
		print_findings(res, dir, pku);
		if (!promises_held(res))
			rc = 1;
		printf("\ndemo: %s in %.1f s\n", rc ? "FAILED" : "all modes "
		       "did what they promise", cli_now() - t0);
	}
	for (i = 0; i < CM_MODES; i++)
		if (reports[i][0])
			unlink(reports[i]);
	rmdir(dir);
	cli_scratch_done(dir);
	free(res);
	return rc;
}
