// SPDX-License-Identifier: MIT
/*
 * libpmguard-run.so: what its adapters share (run.h).  The report lines
 * (run_say()), the launcher's scratch files (PMGUARD_RUN_STATUS and
 * PMGUARD_RUN_LEARN: run_spec_*(), run_protected_one()), the wrapped
 * libraries' real functions (run_next(), behind REAL()), and a data
 * set's domain and its protection, said when it fails.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../internal.h"
#include "../safefile.h"
#include "../sites.h"
#include "run.h"

pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER;
bool run_rep_file; /* a report file: module lines go there */
bool run_rep_named; /* a report file or syslog: each LMDB
				 * environment and pmem mapping named */
char run_status_path[PATH_MAX]; /* PMGUARD_RUN_STATUS */
static bool status_done; /* this process (or its parent) said so */

/* A line on the report fd, as long as it is the file it was (report.c). */
void run_say(const char *fmt, ...)
{
	static const char pre[] = "pmguard-run: ";
	char buf[1024];
	va_list ap;
	int fd = _pmg_report_fd(), n;

	if (fd < 0)
		return;
	memcpy(buf, pre, sizeof(pre) - 1);
	va_start(ap, fmt);
	n = vsnprintf(buf + sizeof(pre) - 1, sizeof(buf) - sizeof(pre) + 1, fmt,
		      ap);
	va_end(ap);
	if (n < 0)
		return;
	n += (int)sizeof(pre) - 1;
	if ((size_t)n >= sizeof(buf))
		n = sizeof(buf) - 1;
	/* a file, a terminal, or a syslog socket (a message per line) */
	_pmg_report_write(fd, buf, (size_t)n);
}

/*
 * PATH:DEV:INO, the launcher's scratch file (a memfd as /proc/PID/fd/N,
 * or a temporary file): false if malformed.
 */
bool run_spec_parse(const char *spec, char *path, size_t n,
		    unsigned long long *dev, unsigned long long *ino)
{
	const char *c2 = strrchr(spec, ':'), *c1;
	int end = 0;

	if (!c2 || c2 == spec)
		return false;
	for (c1 = c2 - 1; c1 > spec && *c1 != ':'; c1--)
		;
	if (c1 == spec || (size_t)(c1 - spec) >= n)
		return false;
	if (sscanf(c1 + 1, "%llu:%llu%n", dev, ino, &end) != 2 || c1[1 + end])
		return false;
	memcpy(path, spec, (size_t)(c1 - spec));
	path[c1 - spec] = 0;
	return path[0] == '/';
}

/*
 * The scratch file @spec opened for appending, if it is still that file
 * (never a file of a process that reused the launcher's pid, never one
 * put at a temporary file's name), else -1.  The memfd's name,
 * /proc/PID/fd/N, is a link by nature: it is opened O_PATH first (no
 * open of a device, no wait on a FIFO), checked, and only that file
 * opened for writing, through this process's own /proc/self/fd; a
 * temporary file is opened where it is, never through a symbolic link
 * (safefile.c).
 */
int run_spec_open(const char *spec)
{
	unsigned long long dev, ino;
	char path[PATH_MAX];
	struct stat want, st;
	int fd, pfd;

	if (!run_spec_parse(spec, path, sizeof(path), &dev, &ino))
		return -1;
	memset(&want, 0, sizeof(want));
	want.st_dev = (dev_t)dev;
	want.st_ino = (ino_t)ino;
	if (strncmp(path, "/proc/", 6)) {
		fd = _pmg_open_checked(AT_FDCWD, path, O_WRONLY | O_APPEND, 0,
				       0, 0, &want);
		return fd < 0 ? -1 : fd;
	}
	pfd = open(path, O_PATH | O_CLOEXEC);
	if (pfd < 0)
		return -1;
	if (fstat(pfd, &st) || !S_ISREG(st.st_mode) ||
	    st.st_dev != want.st_dev || st.st_ino != want.st_ino) {
		close(pfd);
		return -1;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", pfd);
	fd = open(path,
		  O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	close(pfd);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    st.st_dev != want.st_dev || st.st_ino != want.st_ino) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Something was protected: tell the launcher once (PMGUARD_RUN_STATUS). */
void run_protected_one(void)
{
	int fd;

	if (status_done || !run_status_path[0])
		return;
	status_done = true;
	fd = run_spec_open(run_status_path);
	if (fd < 0)
		return;
	if (write(fd, "p", 1) < 0) {
		/* the launcher says "nothing was protected": wrong, harmless */
	}
	close(fd);
}

/*
 * The real function.  RTLD_NEXT searches the global scope; a library
 * loaded as a dependency of a dlopen()ed module (py-lmdb's extension pulls
 * in liblmdb that way) is only in that module's local scope, so it is
 * then looked up by its soname, already loaded (RTLD_NOLOAD).
 */
void *run_next(const char *name)
{
	static const char *const libs[] = { "liblmdb.so.0", "libpmem.so.1",
					    "libpmem2.so.1" };
	void *p = dlsym(RTLD_NEXT, name);
	size_t i;

	for (i = 0; !p && i < sizeof(libs) / sizeof(libs[0]); i++) {
		void *h = dlopen(libs[i], RTLD_NOW | RTLD_NOLOAD);

		if (h) {
			p = dlsym(h, name);
			dlclose(h);
		}
	}
	if (!p) {
		run_say("%s not found after the preload\n", name);
		abort();
	}
	return p;
}

/*
 * A domain for one data set: "KIND:PATH" in the 31 characters a name may
 * have (a long path keeps its end: "lmdb:...b/c/data"), blanks and other
 * non-printable characters as '_', and "#N" at the end when another live
 * domain has the name.  NULL (said) if it cannot be made.
 */
struct pmg_domain *run_data_domain(const char *kind, const char *path)
{
	char base[PMG_KEY_NAME_MAX], name[PMG_KEY_NAME_MAX];
	struct pmg_domain *d = NULL;
	size_t k = strlen(kind), n = strlen(path), room, i;
	int rc = -EEXIST, tries;

	char tmp[PATH_MAX + 16];

	room = sizeof(base) - 1 - k - 1;
	if (n > room)
		snprintf(tmp, sizeof(tmp), "%s:...%s", kind,
			 path + n - (room - 3));
	else
		snprintf(tmp, sizeof(tmp), "%s:%s", kind, path);
	_pmg_strlcpy(base, tmp, sizeof(base));
	for (i = 0; base[i]; i++)
		if (!isgraph((unsigned char)base[i]))
			base[i] = '_';
	for (tries = 0; tries < 1000 && rc == -EEXIST; tries++) {
		if (tries) {
			char suf[8];
			size_t sl = (size_t)snprintf(suf, sizeof(suf), "#%d",
						     tries);
			size_t bl = strlen(base);

			if (bl + sl >= sizeof(name))
				bl = sizeof(name) - 1 - sl;
			memcpy(name, base, bl);
			memcpy(name + bl, suf, sl + 1);
		} else {
			memcpy(name, base, sizeof(name));
		}
		rc = pmg_domain_new(&d, name, 0);
	}
	if (rc) {
		run_say("cannot create domain '%s': %s: nothing protected\n",
			base, pmg_errormsg());
		return NULL;
	}
	return d;
}

void run_data_domain_delete(struct pmg_domain **d)
{
	char name[PMG_KEY_NAME_MAX];

	if (!*d)
		return;
	_pmg_strlcpy(name, pmg_domain_name(*d), sizeof(name));
	if (pmg_domain_delete(d))
		run_say("cannot delete domain '%s': %s\n", name,
			pmg_errormsg());
	*d = NULL;
}

int run_protect(struct pmg_domain *d, void *addr, size_t len, const char *what)
{
	int rc = pmg_protect(d, addr, len);

	if (rc)
		run_say("cannot protect %s at %p (+%zu): %s\n", what, addr, len,
			pmg_errormsg());
	return rc;
}

void run_unprotect(void *addr, size_t len, const char *what)
{
	int rc = pmg_unprotect(addr, len);

	if (rc)
		run_say("cannot unprotect %s at %p (+%zu): %s\n", what, addr,
			len, pmg_errormsg());
}

/* A library loaded since the last look: new module lines, sites. */
void run_modules(void)
{
	_pmg_modules_refresh(run_rep_file ? _pmg_report_fd() : -1);
}
