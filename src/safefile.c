// SPDX-License-Identifier: MIT
/*
 * Opening a file on a program's behalf (safefile.h).  pmguard may run as
 * root in a process whose report file lies in a directory the program's
 * own user can write (a daemon's log directory): the name there may be
 * replaced at any moment by a symbolic link to a file that user cannot
 * write, a hard link to one, a FIFO that blocks the open or the write,
 * or another user's file.  So the last component is never followed
 * (O_NOFOLLOW), an open never waits (O_NONBLOCK: a FIFO without a reader
 * fails with ENXIO), and the descriptor is checked by what it is (fstat)
 * before anything is written to it.  A path opened again is opened
 * relative to its directory, checked to be the directory it was.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "safefile.h"

int _pmg_dir_open(const char *path, struct _pmg_dirid *id, const char **base)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/'), *b = slash ? slash + 1 : path;
	struct stat st;
	size_t n = slash ? (size_t)(slash - path) : 0;
	int dfd;

	if (!*b || !strcmp(b, ".") || !strcmp(b, ".."))
		return -EISDIR;
	if (n >= sizeof(dir))
		return -ENAMETOOLONG;
	if (!slash) {
		dir[0] = '.';
		dir[1] = 0;
	} else if (n == 0) {
		dir[0] = '/';
		dir[1] = 0;
	} else {
		memcpy(dir, path, n);
		dir[n] = 0;
	}
	dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	if (fstat(dfd, &st)) {
		int e = errno;

		close(dfd);
		return -e;
	}
	if (!id->ok) {
		id->dev = st.st_dev;
		id->ino = st.st_ino;
		id->uid = st.st_uid;
		id->ok = true;
	} else if (st.st_dev != id->dev || st.st_ino != id->ino) {
		close(dfd);
		return -ESTALE;
	}
	*base = b;
	return dfd;
}

static bool is_tty(int fd)
{
	struct termios t;

	return ioctl(fd, TCGETS, &t) == 0;
}

int _pmg_open_checked(int dfd, const char *name, int flags, mode_t mode,
		      uid_t dir_uid, unsigned how, const struct stat *want)
{
	struct stat st;
	int fd, e = 0;

	fd = openat(dfd, name,
		    flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY,
		    mode);
	if (fd < 0)
		/* a FIFO without a reader (O_WRONLY | O_NONBLOCK), a device
		 * without its hardware: not a file to report to */
		return errno == ENXIO ? -ENODEV : -errno;
	if (fstat(fd, &st))
		e = -errno;
	else if (want &&
		 (st.st_dev != want->st_dev || st.st_ino != want->st_ino))
		e = -ESTALE;
	else if (S_ISCHR(st.st_mode) && (how & PMG_SF_TTY) && is_tty(fd))
		e = 0; /* a terminal: named by the user, nobody plants one */
	else if (!S_ISREG(st.st_mode))
		e = -ENODEV;
	else if (!want && st.st_nlink > 1)
		e = -EMLINK;
	else if (!want && st.st_uid != geteuid() && st.st_uid != dir_uid)
		e = -EPERM;
	if (e) {
		close(fd);
		return e;
	}
	if (!(flags & O_NONBLOCK))
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

int _pmg_fd_digest(int fd, uint64_t *sum)
{
	uint64_t h = 0xcbf29ce484222325ull;
	unsigned char buf[4096];
	off_t off = 0;
	ssize_t r, i;

	while ((r = pread(fd, buf, sizeof(buf), off)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		for (i = 0; i < r; i++)
			h = (h ^ buf[i]) * 0x100000001b3ull;
		off += r;
	}
	*sum = h;
	return 0;
}

const char *_pmg_open_why(int err, unsigned how)
{
	switch (-err) {
	case ELOOP:
		return "a symbolic link (never followed)";
	case ENODEV:
	case ENXIO:
		return how & PMG_SF_TTY ? "not a regular file or a terminal"
					: "not a regular file";
	case EMLINK:
		return "a hard link (more than one name): refused";
	case EPERM:
		return "owned by another user than this process's and the "
		       "directory's owner: refused";
	case ESTALE:
		return "not the file first opened there (replaced)";
	case EISDIR:
		return "not a file name";
	}
	return NULL;
}
