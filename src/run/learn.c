// SPDX-License-Identifier: MIT
/*
 * libpmguard-run.so's learn mode (`pmguard learn`, PMGUARD_RUN_LEARN):
 * at exit, the audit sites of the run, as PATH+0xOFF COUNT SYMBOL,
 * appended to the launcher's file (through the process's copy of its
 * descriptor, common.c: after a privilege drop or a chroot too); the
 * launcher turns them into an allow file for PMGUARD_RUN_ALLOW.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../internal.h"
#include "../sites.h"
#include "run.h"

/* @path as one word: every byte that isspace() holds a blank in the C
 * locale (blank, \t, \n, \v, \f, \r), every byte that is not printable
 * ASCII (controls, DEL, non-ASCII) and the backslash as \ooo
 * (/proc/mounts' form; sites.c and the merge in tools/run.c undo it), so
 * that a program at "/opt/x y/prog" is one site, not a cut path and a
 * count that does not parse.  Decided on the byte, never by the
 * program's locale. */
static void put_path(FILE *out, const char *path)
{
	for (; *path; path++) {
		unsigned char c = (unsigned char)*path;

		if (c <= ' ' || c >= 0x7f || c == '\\')
			fprintf(out, "\\%03o", c);
		else
			putc(c, out);
	}
}

void run_learn_write(void)
{
	int mfd = memfd_create("pmguard-sites", MFD_CLOEXEC);
	FILE *in, *out;
	char line[512];
	bool refreshed = false;

	if (mfd < 0)
		return;
	int ofd = run_learn_fd();

	pmg_audit_dump(mfd);
	lseek(mfd, 0, SEEK_SET);
	in = fdopen(mfd, "r");
	out = ofd >= 0 ? fdopen(ofd, "a") : NULL;
	if (!in || !out) {
		if (ofd >= 0 || !in)
			run_say("learn: cannot write the sites: %s\n",
				strerror(errno));
		if (in)
			fclose(in);
		else
			close(mfd);
		if (out)
			fclose(out);
		else if (ofd >= 0)
			close(ofd);
		return;
	}
	/* one write(2) per line, appended: the processes of a run that
	 * end together never interleave inside a line (a full buffer would
	 * be written at any byte) */
	setvbuf(out, NULL, _IOLBF, PATH_MAX + 512);
	/* "pmguard: audit site 0xIP: N stray access(es), domain 'D'" */
	while (fgets(line, sizeof(line), in)) {
		unsigned long ip;
		unsigned long long n;
		char path[PATH_MAX];
		uintptr_t off;
		Dl_info di;

		if (sscanf(line, "pmguard: audit site %lx: %llu", &ip, &n) != 2)
			continue;
		/* the table as it is first, looked at again only for a site
		 * it does not place (a library loaded since): in a chroot
		 * without /proc a new look names the program "" */
		if ((!_pmg_module_of(ip, path, sizeof(path), &off) ||
		     !path[0]) && !refreshed) {
			_pmg_modules_refresh(-1);
			refreshed = true;
		}
		if (!_pmg_module_of(ip, path, sizeof(path), &off) ||
		    !path[0]) {
			fprintf(out, "# %#lx %llu (in no module)\n", ip, n);
			continue;
		}
		put_path(out, path);
		if (dladdr((void *)ip, &di) && di.dli_sname)
			fprintf(out, "+%#lx %llu %s+%#lx\n",
				(unsigned long)off, n, di.dli_sname,
				ip - (unsigned long)di.dli_saddr);
		else
			fprintf(out, "+%#lx %llu ?\n", (unsigned long)off,
				n);
	}
	fclose(in);
	fclose(out);
}
