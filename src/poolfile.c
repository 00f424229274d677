// SPDX-License-Identifier: MIT
/*
 * The pools' files and devices: a pool file opened read-write and locked
 * (one process at a time), a device-dax device probed in sysfs, and a new
 * pool file created whole (allocated, then put in place atomically, never
 * half-written under its name; the temporary files of creates that died
 * removed).  Only files: mapping and protecting them is pool.c's.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "pool.h"
#include "procfs.h"

/* Device dax: size and alignment from sysfs, or -ENODEV. */
static int devdax_probe(const char *path, const struct stat *st, size_t *size,
			size_t *align)
{
	unsigned ma = major(st->st_rdev), mi = minor(st->st_rdev);
	char sys[128], link[PATH_MAX], buf[64];
	ssize_t n;
	const char *tail;

	snprintf(sys, sizeof(sys), "/sys/dev/char/%u:%u/subsystem", ma, mi);
	n = readlink(sys, link, sizeof(link) - 1);
	if (n < 0)
		return _pmg_err(-ENODEV,
				"%s: character device %u:%u is not "
				"device dax (no %s)",
				path, ma, mi, sys);
	link[n] = '\0';
	tail = strrchr(link, '/');
	tail = tail ? tail + 1 : link;
	if (strcmp(tail, "dax"))
		return _pmg_err(-ENODEV,
				"%s: character device %u:%u is not "
				"device dax (subsystem %s)",
				path, ma, mi, tail);
	snprintf(sys, sizeof(sys), "/sys/dev/char/%u:%u/size", ma, mi);
	if (_pmg_read_line(sys, buf, sizeof(buf)))
		return _pmg_err(-ENODEV, "%s: cannot read %s", path, sys);
	*size = strtoull(buf, NULL, 0);
	snprintf(sys, sizeof(sys), "/sys/dev/char/%u:%u/device/align", ma, mi);
	if (_pmg_read_line(sys, buf, sizeof(buf))) {
		snprintf(sys, sizeof(sys),
			 "/sys/dev/char/%u:%u/device/dax_region/align", ma, mi);
		if (_pmg_read_line(sys, buf, sizeof(buf)))
			snprintf(buf, sizeof(buf), "%lu", HUGE_ALIGN);
	}
	*align = strtoull(buf, NULL, 0);
	if (!*align || (*align & (*align - 1)))
		return _pmg_err(-ENODEV, "%s: bad device alignment '%s'", path,
				buf);
	return 0;
}

int _pmg_pool_check_align(const char *path, size_t offset, size_t size,
			  size_t align)
{
	if (offset % align)
		return _pmg_err(-EINVAL,
				"%s: offset %zu is not a multiple of "
				"the device-dax alignment %zu",
				path, offset, align);
	if (size % align)
		return _pmg_err(-EINVAL,
				"%s: size %zu is not a multiple of "
				"the device-dax alignment %zu",
				path, size, align);
	return 0;
}

int _pmg_pool_stat_err(const char *path, int e, const char *what)
{
	return _pmg_err(-e, "%s: %s: %s", path, what, strerror(e));
}

/*
 * The holder of a lock on the file open as @fd, from /proc/locks (flock
 * and OFD locks name the process that took them): its pid, or 0.
 */
static long lock_holder(int fd)
{
	FILE *f = fopen("/proc/locks", "re");
	char line[256];
	struct stat st;
	long pid = 0;

	if (!f)
		return 0;
	if (fstat(fd, &st)) {
		fclose(f);
		return 0;
	}
	while (fgets(line, sizeof(line), f)) {
		unsigned maj, min;
		unsigned long ino;
		long who;
		char *c = strchr(line, ':');

		/* "1: FLOCK  ADVISORY  WRITE 1234 08:02:5678 0 EOF" */
		if (!c || sscanf(c + 1, " %*s %*s %*s %ld %x:%x:%lu", &who,
				 &maj, &min, &ino) != 4)
			continue;
		if (ino == st.st_ino && makedev(maj, min) == st.st_dev &&
		    who > 0) {
			pid = who;
			break;
		}
	}
	fclose(f);
	return pid;
}

/*
 * One process at a time: an exclusive flock() on the pool's file, held
 * while the pool is open (it goes with the file descriptor: a fork child
 * shares it until it closes its copy or execs, O_CLOEXEC).  A filesystem
 * without flock() (ENOLCK, EINVAL) opens unlocked.
 */
static int lock_pool(int fd, const char *path)
{
	long pid;

	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return 0;
	if (errno != EWOULDBLOCK)
		return 0;
	pid = lock_holder(fd);
	if (pid)
		return _pmg_err(-EBUSY,
				"%s: the pool is open in process %ld "
				"(it holds the pool's lock; a pool is open "
				"in one process at a time)",
				path, pid);
	return _pmg_err(-EBUSY,
			"%s: the pool is open elsewhere (another "
			"process holds the pool's lock; a pool is open in "
			"one process at a time)",
			path);
}

/* Open @path read-write; fill @p->fd, size/offset/devdax from @c. */
int _pmg_pool_open_fd(struct pmg_pool *p, const char *path,
		      const struct pmg_pool_config *c)
{
	struct stat st;
	size_t total;
	int rc;

	if (stat(path, &st))
		return _pmg_pool_stat_err(path, errno, "cannot open the pool");
	if (S_ISDIR(st.st_mode))
		return _pmg_err(-EISDIR,
				"%s: is a directory, not a pool "
				"file",
				path);
	if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode))
		return _pmg_err(-ENODEV,
				"%s: not a regular file or a "
				"device-dax device",
				path);
	p->fd = open(path, O_RDWR | O_CLOEXEC);
	if (p->fd < 0) {
		int e = errno;

		return _pmg_err(-e,
				"%s: cannot open read-write (pools are "
				"mapped writable): %s",
				path, strerror(e));
	}
	if (fstat(p->fd, &st))
		return _pmg_pool_stat_err(path, errno, "fstat");
	rc = lock_pool(p->fd, path);
	if (rc)
		return rc;
	p->offset = c->offset;
	if (S_ISCHR(st.st_mode)) {
		rc = devdax_probe(path, &st, &total, &p->align);
		if (rc)
			return rc;
		p->devdax = true;
	} else if (S_ISREG(st.st_mode)) {
		total = (size_t)st.st_size;
		if (!total)
			return _pmg_err(-EINVAL, "%s: the file is empty", path);
	} else {
		return _pmg_err(-ENODEV,
				"%s: not a regular file or a "
				"device-dax device",
				path);
	}
	if (p->offset >= total)
		return _pmg_err(-ERANGE,
				"%s: offset %zu is past the end (%zu "
				"bytes)",
				path, p->offset, total);
	p->size = c->size ? c->size : total - p->offset;
	if (c->size > total - p->offset)
		return _pmg_err(-ERANGE,
				"%s: the %s is %zu bytes, smaller "
				"than the %zu asked at offset %zu",
				path, p->devdax ? "device" : "file", total,
				c->size, p->offset);
	if (p->devdax)
		return _pmg_pool_check_align(path, p->offset, p->size,
					     p->align);
	return 0;
}

#ifndef AT_HANDLE_FID
#define AT_HANDLE_FID 0x200 /* Linux 6.5: encode only (overlayfs) */
#endif

int _pmg_pool_no_file_id;

/*
 * The file's identity over its life: its file handle, the filesystem's
 * own answer to "is this still the file I knew" (what NFS uses to say
 * ESTALE).  Device and inode number are not: ext4 gives a file created
 * after an unlink the freed inode's number at once, and so would a
 * closed, deleted pool's quarantined address go to another pool's file.
 * The handle carries the inode's generation, which differs (ext4, xfs,
 * tmpfs: a random one per new inode).  Birth time would not do: it is
 * taken from the coarse clock, the same for two files made within a tick.
 * AT_HANDLE_FID first (overlayfs gives a handle only so); a kernel before
 * 6.5 refuses the flag (EINVAL) and is asked without it.  No handle
 * (EOPNOTSUPP: the filesystem has none; a seccomp filter; one longer than
 * PMG_FILE_ID_MAX): none known, and a closed pool on it is never matched.
 */
void _pmg_pool_file_id(int fd, struct _pmg_file_id *id)
{
	struct {
		struct file_handle fh;
		unsigned char h[PMG_FILE_ID_MAX];
	} b;
	int mnt, rc, e = errno;

	memset(id, 0, sizeof(*id));
	if (_pmg_pool_no_file_id)
		return;
	b.fh.handle_bytes = PMG_FILE_ID_MAX;
	rc = name_to_handle_at(fd, "", &b.fh, &mnt,
			       AT_EMPTY_PATH | AT_HANDLE_FID);
	if (rc && errno == EINVAL) {
		b.fh.handle_bytes = PMG_FILE_ID_MAX;
		rc = name_to_handle_at(fd, "", &b.fh, &mnt, AT_EMPTY_PATH);
	}
	if (!rc && b.fh.handle_bytes && b.fh.handle_bytes <= PMG_FILE_ID_MAX) {
		id->type = b.fh.handle_type;
		id->len = b.fh.handle_bytes;
		memcpy(id->h, b.fh.f_handle, id->len);
	}
	errno = e;
}

/* A fresh name next to @path: "<dir>/.<base>.pmg-<pid>-<n>". */
int _pmg_pool_temp_name(char *buf, size_t size, const char *path)
{
	static unsigned counter;
	const char *slash = strrchr(path, '/');
	int dlen = slash ? (int)(slash - path + 1) : 0;
	int n;

	n = snprintf(buf, size, "%.*s.%s.pmg-%d-%u", dlen, path,
		     slash ? slash + 1 : path, (int)getpid(),
		     __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
	return n > 0 && (size_t)n < size ? 0 : -ENAMETOOLONG;
}

static int allocate(int fd, off_t len)
{
	if (fallocate(fd, 0, 0, len) == 0)
		return 0;
	if (errno != EOPNOTSUPP && errno != ENOSYS)
		return -errno;
	return -posix_fallocate(fd, 0, len);
}

static void fsync_dir(const char *path)
{
	char dir[PATH_MAX];
	int fd;

	_pmg_dir_of(dir, sizeof(dir), path);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
}

/*
 * Temporary files of creates that died: ".<name>.pmg-<pid>-<n>" in @dir
 * whose creator no longer runs (kill(pid, 0): ESRCH) and whose lock
 * nobody holds (a live creator holds it from the start).  Removed on the
 * next create in the directory that needs a named temporary file.  Test
 * hook: _pmg_pool_stale_removed counts them.
 */
unsigned long _pmg_pool_stale_removed;

static bool stale_name(const char *n, long *pid)
{
	const char *t = strstr(n, ".pmg-");
	char *e;

	if (n[0] != '.' || !t)
		return false;
	while (strstr(t + 1, ".pmg-"))
		t = strstr(t + 1, ".pmg-");
	*pid = strtol(t + 5, &e, 10);
	if (*pid <= 0 || *e != '-' || !e[1])
		return false;
	strtoul(e + 1, &e, 10);
	return !*e;
}

static void remove_stale(const char *path)
{
	char d[PATH_MAX];
	struct dirent *e;
	DIR *dd;
	int dfd;

	_pmg_dir_of(d, sizeof(d), path);
	dd = opendir(d);
	if (!dd)
		return;
	dfd = dirfd(dd);
	while ((e = readdir(dd))) {
		long pid;
		int fd;

		if (!stale_name(e->d_name, &pid) || pid == getpid() ||
		    kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		fd = openat(dfd, e->d_name,
			    O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0 &&
		    unlinkat(dfd, e->d_name, 0) == 0)
			__atomic_add_fetch(&_pmg_pool_stale_removed, 1,
					   __ATOMIC_RELAXED);
		close(fd);
	}
	closedir(dd);
}

/* Test hook: 1 makes creates use a named temporary file, as on a
 * filesystem without O_TMPFILE. */
int _pmg_pool_no_tmpfile;

/*
 * Build the file, blocks allocated and locked: an unnamed O_TMPFILE file
 * in @path's directory where the filesystem has them (a killed create
 * then leaves nothing behind), else the temporary name @tmp (*named set).
 */
int _pmg_pool_create_file(struct pmg_pool *p, const char *path, const char *tmp,
			  const struct pmg_pool_config *c, bool *named)
{
	char d[PATH_MAX];
	off_t total;
	int rc, e;

	if (c->offset > (size_t)LONG_MAX - c->size)
		return _pmg_err(-EFBIG,
				"%s: offset %zu + size %zu does not "
				"fit in off_t",
				path, c->offset, c->size);
	total = (off_t)(c->offset + c->size);

	*named = false;
	p->fd = -1;
	if (!_pmg_pool_no_tmpfile && access("/proc/self/fd", X_OK) == 0) {
		_pmg_dir_of(d, sizeof(d), path);
		p->fd = open(d, O_TMPFILE | O_RDWR | O_CLOEXEC, c->mode);
		if (p->fd < 0 && errno != EOPNOTSUPP && errno != EISDIR &&
		    errno != EINVAL) {
			e = errno;
			return _pmg_err(-e,
					"%s: cannot create a file in its "
					"directory: %s",
					path, strerror(e));
		}
	}
	if (p->fd < 0) {
		remove_stale(path);
		p->fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
			     c->mode);
		if (p->fd < 0) {
			e = errno;
			return _pmg_err(-e,
					"%s: cannot create a file in its "
					"directory: %s",
					path, strerror(e));
		}
		*named = true;
	}
	(void)flock(p->fd, LOCK_EX | LOCK_NB); /* new: nobody else has it */
	rc = allocate(p->fd, total);
	if (rc)
		return _pmg_err(rc, "%s: allocating %lld bytes: %s", path,
				(long long)total, strerror(-rc));
	if (fsync(p->fd))
		return _pmg_err(-errno, "%s: fsync: %s", path, strerror(errno));
	p->offset = c->offset;
	p->size = c->size;
	return 0;
}

/* Give the unnamed file @fd the name @to; never replaces (EEXIST). */
static int link_fd(int fd, const char *to)
{
	char proc[64];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (linkat(AT_FDCWD, proc, AT_FDCWD, to, AT_SYMLINK_FOLLOW) == 0)
		return 0;
	if (errno == EEXIST)
		return -1;
	return linkat(fd, "", AT_FDCWD, to, AT_EMPTY_PATH);
}

/*
 * Move the new file into place: atomically, replacing only if @overwrite.
 * @named: it is at @tmp; else it is the unnamed file @fd, linked to @path
 * directly (never replacing) or, to replace, linked to @tmp and renamed.
 */
int _pmg_pool_publish(int fd, bool named, const char *tmp, const char *path,
		      bool overwrite)
{
	int e;

	if (!named) {
		if (!overwrite) {
			if (link_fd(fd, path) == 0)
				goto done;
			e = errno;
			goto fail;
		}
		remove_stale(path);
		if (link_fd(fd, tmp)) {
			e = errno;
			return _pmg_err(-e, "%s: naming the new file: %s", path,
					strerror(e));
		}
	}
	if (overwrite) {
		if (rename(tmp, path) == 0)
			goto done;
		e = errno;
		unlink(tmp);
		return _pmg_err(-e, "%s: replacing it: %s", path, strerror(e));
	}
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
		goto done;
	e = errno;
	if (e == EINVAL || e == ENOSYS) {
		/* no RENAME_NOREPLACE here: link() never replaces either */
		if (link(tmp, path) == 0) {
			unlink(tmp);
			goto done;
		}
		e = errno;
	}
fail:
	if (e == EEXIST)
		return _pmg_err(-e,
				"%s: exists (use PMG_POOL_OVERWRITE to "
				"replace it)",
				path);
	return _pmg_err(-e, "%s: putting the new file in place: %s", path,
			strerror(e));
done:
	fsync_dir(path);
	return 0;
}

/*
 * An existing pool to be replaced must not be open in another process:
 * its lock is taken (and held, in *@fd, until the replacement is done).
 */
int _pmg_pool_lock_existing(const char *path, int *fd)
{
	int rc;

	*fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (*fd < 0)
		return 0;
	rc = lock_pool(*fd, path);
	if (rc) {
		close(*fd);
		*fd = -1;
	}
	return rc;
}
