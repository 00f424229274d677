// SPDX-License-Identifier: MIT
/* pmguard info [--json]: what pmguard would use here, and why. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "cmds.h"
#include "pmguard.h"

static const char *yesno(bool b)
{
	return b ? "yes" : "no";
}

static const char *tf(bool b)
{
	return b ? "true" : "false";
}

int cmd_info(int argc, char **argv)
{
	bool json = cli_has_flag(argc, argv, "--json");
	struct pmg_info in;
	const char *mode;
	int rc, i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help")) {
			printf("usage: pmguard info [--json]\n");
			return 0;
		}
		if (strcmp(argv[i], "--json"))
			return cli_error("info: unknown option '%s'", argv[i]);
	}
	rc = pmg_get_info(&in);
	if (rc) {
		cli_error("info: %s", pmg_errormsg());
		return 1;
	}
	mode = in.fault_mode == PMG_FAULT_STRICT ? "strict"
	       : in.fault_mode == PMG_FAULT_AUDIT ? "audit" : "relaxed";
	if (json) {
		printf("{\"version\": \"%s\", \"backend\": \"%s\", "
		       "\"thread_local_windows\": %s, "
		       "\"cpu\": {\"pku\": %s, \"ospke\": %s, \"pks\": %s, "
		       "\"clwb\": %s, \"clflushopt\": %s}, "
		       "\"kernel_pkeys\": %s, \"keys_total\": %d, "
		       "\"keys_used\": %d, \"keys_free\": %d, "
		       "\"fault_mode\": \"%s\", \"xsave_pkru_offset\": %u}\n",
		       pmg_version(), pmg_backend_name(in.backend),
		       tf(in.backend == PMG_BACKEND_PKU), tf(in.cpu_pku),
		       tf(in.cpu_ospke), tf(in.cpu_pks), tf(in.cpu_clwb),
		       tf(in.cpu_clflushopt), tf(in.kernel_pkeys),
		       in.keys_total, in.keys_used, in.keys_free, mode,
		       in.xsave_pkru_offset);
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
	printf("fault mode: %s\n", mode);
	if (in.xsave_pkru_offset)
		printf("xsave pkru offset: %u\n", in.xsave_pkru_offset);
	return 0;
}
