// SPDX-License-Identifier: MIT
/* pmguard info [--json]: what pmguard would use here, and why. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "cmds.h"
#include "json.h"
#include "pmguard.h"

static const char *yesno(bool b)
{
	return b ? "yes" : "no";
}

static void usage(FILE *f)
{
	fprintf(f, "usage: pmguard info [--json]\n"
		   "  what pmguard would use here, and why (--json: one "
		   "JSON object)\n");
}

int cmd_info(int argc, char **argv)
{
	bool json = false;
	const struct cli_opt opts[] = {
		{ .name = "--json", .kind = CLI_FLAG, .out = &json },
		{ .name = NULL },
	};
	const struct cli_verb verb = { "info", opts, usage, NULL, NULL };
	struct pmg_key_stats ks;
	struct pmg_info in;
	const char *mode;
	int rc;

	rc = cli_args(&verb, argc, argv);
	if (rc != CLI_GO_ON)
		return rc;
	rc = pmg_get_info(&in, sizeof(in));
	if (rc) {
		cli_error("info: %s", pmg_errormsg());
		return 1;
	}
	if (pmg_key_stats_get(&ks, sizeof(ks)))
		memset(&ks, 0, sizeof(ks));
	mode = in.fault_mode == PMG_FAULT_STRICT ? "strict"
	       : in.fault_mode == PMG_FAULT_AUDIT ? "audit"
	       : in.fault_mode == PMG_FAULT_CONTAIN ? "contain" : "relaxed";
	if (json) {
		struct json j;

		json_begin(&j, stdout, false);
		json_str(&j, "version", pmg_version());
		json_str(&j, "backend", pmg_backend_name(in.backend));
		json_bool(&j, "thread_local_windows",
			  in.backend == PMG_BACKEND_PKU);
		json_obj(&j, "cpu");
		json_bool(&j, "pku", in.cpu_pku);
		json_bool(&j, "ospke", in.cpu_ospke);
		json_bool(&j, "pks", in.cpu_pks);
		json_bool(&j, "clwb", in.cpu_clwb);
		json_bool(&j, "clflushopt", in.cpu_clflushopt);
		json_end(&j);
		json_bool(&j, "kernel_pkeys", in.kernel_pkeys);
		json_int(&j, "keys_total", in.keys_total);
		json_int(&j, "keys_used", in.keys_used);
		json_int(&j, "keys_free", in.keys_free);
		json_int(&j, "keys_max", ks.keys_max);
		json_bool(&j, "eviction", ks.evict);
		json_int(&j, "domains_max", PMG_DOMAINS_MAX - 1);
		json_str(&j, "fault_mode", mode);
		json_u64(&j, "xsave_pkru_offset", in.xsave_pkru_offset);
		json_finish(&j);
		return 0;
	}
	printf("pmguard %s\n", pmg_version());
	printf("backend: %s\n", pmg_backend_name(in.backend));
	printf("windows: %s\n", in.backend == PMG_BACKEND_PKU
	       ? "thread-local (PKRU)"
	       : "process-wide (mprotect): a write from another thread "
		 "during a window is not caught");
	printf("cpu: pku %s, ospke %s, pks %s, clwb %s, clflushopt %s\n",
	       yesno(in.cpu_pku), yesno(in.cpu_ospke), yesno(in.cpu_pks),
	       yesno(in.cpu_clwb), yesno(in.cpu_clflushopt));
	printf("kernel pkeys: %s\n", yesno(in.kernel_pkeys));
	printf("keys: %d total, %d used by pmguard, %d free\n",
	       in.keys_total, in.keys_used, in.keys_free);
	if (in.backend == PMG_BACKEND_PKU)
		printf("domains: up to %d; pmguard holds at most %d keys "
		       "(PMGUARD_KEYS), the other domains are virtual (page "
		       "protection until a window gets them a key: %s)\n",
		       PMG_DOMAINS_MAX - 1, ks.keys_max,
		       ks.evict ? "eviction by membarrier(2)"
				: "no membarrier(2): no eviction");
	else
		printf("domains: up to %d, each page-protected\n",
		       PMG_DOMAINS_MAX - 1);
	printf("fault mode: %s\n", mode);
	if (in.xsave_pkru_offset)
		printf("xsave pkru offset: %u\n", in.xsave_pkru_offset);
	return 0;
}
