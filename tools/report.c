// SPDX-License-Identifier: MIT
/*
 * pmguard report FILE: a report file of `pmguard run --report` with each
 * code address turned into function and file:line (elfutils libdw, loaded
 * at run time so that pmguard itself needs no libdw to link or run), or
 * symbol+offset without debug info, or module+offset without libdw.
 *
 * Addresses come in two shapes: "(MODULE+0xOFF)" after a fault's ip, and
 * backtrace lines "MODULE(...)[0xADDR]", which are placed with the
 * "pmguard: module BIAS LO-HI PATH" lines the preload wrote.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmds.h"

/* PMG_WITHOUT_LIBDW: build as if libdw-dev were missing (make
 * WITHOUT=libdw; scripts/build-check builds that configuration). */
#if !defined(PMG_WITHOUT_LIBDW) && __has_include(<elfutils/libdwfl.h>)
#include <elfutils/libdwfl.h>
#define HAVE_DWFL 1
#endif

struct rmod {
	uintptr_t bias, lo, hi;
	char *path;
#ifdef HAVE_DWFL
	Dwfl *dwfl;
	bool tried;
#endif
};

static struct rmod *mods;
static size_t nmods;

#ifdef HAVE_DWFL
static struct {
	void *h;
	__typeof__(&dwfl_begin) begin;
	__typeof__(&dwfl_report_elf) report_elf;
	__typeof__(&dwfl_report_end) report_end;
	__typeof__(&dwfl_addrmodule) addrmodule;
	__typeof__(&dwfl_module_addrinfo) addrinfo;
	__typeof__(&dwfl_module_getsrc) getsrc;
	__typeof__(&dwfl_lineinfo) lineinfo;
	__typeof__(&dwfl_build_id_find_elf) find_elf;
	__typeof__(&dwfl_standard_find_debuginfo) find_debuginfo;
	__typeof__(&dwfl_offline_section_address) section_address;
} dw;
static Dwfl_Callbacks cbs;

static bool dw_load(void)
{
	static int state;	/* 0 not tried, 1 ok, -1 missing */

	if (state)
		return state > 0;
	state = -1;
	dw.h = dlopen("libdw.so.1", RTLD_NOW);
	if (!dw.h)
		return false;
#define SYM(f, n) if (!(dw.f = (__typeof__(dw.f))dlsym(dw.h, n))) return false
	SYM(begin, "dwfl_begin");
	SYM(report_elf, "dwfl_report_elf");
	SYM(report_end, "dwfl_report_end");
	SYM(addrmodule, "dwfl_addrmodule");
	SYM(addrinfo, "dwfl_module_addrinfo");
	SYM(getsrc, "dwfl_module_getsrc");
	SYM(lineinfo, "dwfl_lineinfo");
	SYM(find_elf, "dwfl_build_id_find_elf");
	SYM(find_debuginfo, "dwfl_standard_find_debuginfo");
	SYM(section_address, "dwfl_offline_section_address");
#undef SYM
	cbs.find_elf = dw.find_elf;
	cbs.find_debuginfo = dw.find_debuginfo;
	cbs.section_address = dw.section_address;
	state = 1;
	return true;
}

/* @off in @path, laid out at bias 0: "func at file:line" or "sym+0x.." */
static bool dw_sym(struct rmod *m, uintptr_t off, bool ret, char *out,
		   size_t n)
{
	Dwfl_Module *dm;
	GElf_Off so = 0;
	GElf_Sym sym;
	const char *name, *file;
	Dwfl_Line *l;
	struct stat st;
	int line = 0, fd;

	if (!dw_load())
		return false;
	if (!m->tried) {
		m->tried = true;
		m->dwfl = dw.begin(&cbs);
		/* only a regular file (a FIFO named as a module would block
		 * the open): opened here, non-blocking, and handed over */
		fd = open(m->path,
			  O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
		if (fd >= 0 && (fstat(fd, &st) || !S_ISREG(st.st_mode))) {
			close(fd);
			fd = -1;
		}
		if (fd < 0)
			m->dwfl = NULL;
		if (m->dwfl &&
		    !dw.report_elf(m->dwfl, m->path, m->path, fd, 0, false))
			m->dwfl = NULL;
		if (m->dwfl)
			dw.report_end(m->dwfl, NULL, NULL);
	}
	if (!m->dwfl || !(dm = dw.addrmodule(m->dwfl, off)))
		return false;
	name = dw.addrinfo(dm, off, &so, &sym, NULL, NULL, NULL);
	/* a return address: the call is the instruction before it */
	l = dw.getsrc(dm, ret ? off - 1 : off);
	file = l ? dw.lineinfo(l, NULL, &line, NULL, NULL, NULL) : NULL;
	if (file)
		snprintf(out, n, "%s+%#" PRIx64 " at %s:%d", name ? name : "?",
			 (uint64_t)so, file, line);
	else if (name)
		snprintf(out, n, "%s+%#" PRIx64 " (no debug info)", name,
			 (uint64_t)so);
	else
		return false;
	return true;
}
#else
/* Built without libdw's header: addresses stay module+offset. */
static bool dw_sym(struct rmod *m, uintptr_t off, bool ret, char *out,
		   size_t n)
{
	(void)m;
	(void)off;
	(void)ret;
	(void)out;
	(void)n;
	return false;
}
#endif

static struct rmod *mod_named(const char *path)
{
	size_t i;

	for (i = 0; i < nmods; i++)
		if (!strcmp(mods[i].path, path))
			return &mods[i];
	return NULL;
}

static struct rmod *mod_add(const char *path, uintptr_t bias, uintptr_t lo,
			    uintptr_t hi)
{
	struct rmod *m = mod_named(path), *t;

	if (m && m->bias == bias)
		return m;
	t = realloc(mods, (nmods + 1) * sizeof(*mods));
	if (!t)
		return NULL;
	mods = t;
	m = &mods[nmods++];
	memset(m, 0, sizeof(*m));
	m->path = strdup(path);
	m->bias = bias;
	m->lo = lo;
	m->hi = hi;
	return m;
}

static void explain(struct rmod *m, const char *path, uintptr_t off,
		    bool ret)
{
	char buf[PATH_MAX + 128] = "";

	if (!m)
		m = mod_add(path, 0, 0, 0);
	if (m && dw_sym(m, off, ret, buf, sizeof(buf))) {
		printf("    -> %s (%s+%#" PRIxPTR ")\n", buf, path, off);
		return;
	}
	printf("    -> %s+%#" PRIxPTR "\n", path, off);
}

bool report_symbol(const char *path, unsigned long off, char *out, size_t n)
{
	struct rmod *m = mod_named(path);

	if (!m)
		m = mod_add(path, 0, 0, 0);
	return m && dw_sym(m, off, false, out, n);
}

int cmd_report(int argc, char **argv)
{
	char line[PATH_MAX + 512];
	struct stat fst;
	FILE *f;

	if (argc != 2 || argv[1][0] == '-') {
		bool help = argc == 2 && (!strcmp(argv[1], "--help") ||
					  !strcmp(argv[1], "-h"));

		fprintf(help ? stdout : stderr,
"usage: pmguard report FILE\n"
"\n"
"Print a report file of `pmguard run --report FILE` with every code\n"
"address explained: function and file:line where the module has debug\n"
"info (elfutils libdw, loaded at run time), symbol+offset where it has a\n"
"symbol table, module+offset otherwise.\n");
		return help ? 0 : 2;
	}
	f = fopen(argv[1], "re");
	if (!f)
		return cli_error("report: %s: %m", argv[1]);
	if (!fstat(fileno(f), &fst) && S_ISDIR(fst.st_mode)) {
		fclose(f);
		return cli_error("report: %s: is a directory, not a report "
				 "file",
				 argv[1]);
	}
	while (fgets(line, sizeof(line), f)) {
		unsigned long bias, lo, hi;
		char path[PATH_MAX], *p, *q;
		size_t i;

		if (sscanf(line, "pmguard: module %lx %lx-%lx %4095s", &bias,
			   &lo, &hi, path) == 4) {
			mod_add(path, bias, lo, hi);
			continue;
		}
		fputs(line, stdout);
		/* "at ip 0x... (PATH+0xOFF)" */
		if ((p = strstr(line, " at ip ")) && (p = strstr(p, " (/")) &&
		    (q = strstr(p, "+0x"))) {
			uintptr_t off = strtoull(q + 1, NULL, 16);

			snprintf(path, sizeof(path), "%.*s", (int)(q - p - 2),
				 p + 2);
			explain(mod_named(path), path, off, false);
			continue;
		}
		/* backtrace: "PATH(...)[0xADDR]" */
		if (line[0] == '/' && (p = strrchr(line, '[')) &&
		    !strncmp(p, "[0x", 3)) {
			uintptr_t a = strtoull(p + 1, NULL, 16);

			for (i = 0; i < nmods; i++)
				if (mods[i].hi && a >= mods[i].lo &&
				    a < mods[i].hi) {
					explain(&mods[i], mods[i].path,
						a - mods[i].bias, true);
					break;
				}
			if (i == nmods && (q = strstr(line, "(+0x"))) {
				/* "PATH(+0xOFF)": the offset is given */
				snprintf(path, sizeof(path), "%.*s",
					 (int)(q - line), line);
				explain(mod_named(path), path,
					strtoull(q + 2, NULL, 16), true);
			}
		}
	}
	fclose(f);
	return 0;
}
