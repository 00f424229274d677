/* SPDX-License-Identifier: MIT */
/*
 * safefile.c: the files pmguard opens on a program's behalf (the report
 * file, the allow file, `pmguard learn`'s sites, the launcher's scratch
 * files), opened so that a name another user can change in the meantime
 * is never followed, written through or waited on (docs/design.md,
 * "Files pmguard opens: threat model").  A leaf: libc only; everything
 * here is AS-safe (open, openat, fstat, ioctl, close).
 */
#ifndef PMG_SAFEFILE_H
#define PMG_SAFEFILE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* The identity of the directory a file is (re)opened in, recorded the
 * first time (ok false), compared every later time. */
struct _pmg_dirid {
	bool ok;
	dev_t dev;
	ino_t ino;
	uid_t uid; /* its owner: a file it holds may be that user's */
};

/* _pmg_open_checked()'s @how */
#define PMG_SF_TTY 1u /* a terminal is taken too (a report file) */

/*
 * The directory of the absolute or relative path @path, opened O_PATH
 * (its last component is not looked at), close-on-exec, checked against
 * *@id (recorded there if !@id->ok); *@base points at @path's last
 * component.  The directory fd, or -errno: -ESTALE when it is not the
 * directory recorded, -EISDIR when @path ends in "/", "." or "..".
 */
int _pmg_dir_open(const char *path, struct _pmg_dirid *id, const char **base);

/*
 * @name in the directory @dfd (AT_FDCWD: @name is a path) opened with
 * @flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY (@mode for
 * O_CREAT), then checked on the descriptor: a regular file (or, with
 * PMG_SF_TTY, a terminal); with @want, the file of that device and inode;
 * without, a regular file with one link, owned by the effective uid or
 * by @dir_uid (the directory's owner, who may replace it anyway).
 * O_NONBLOCK is cleared afterwards unless @flags has it.  The fd, or
 * -errno; the codes of a refused file: -ELOOP a symbolic link, -ENODEV
 * not a regular file (a FIFO, with or without a reader, a socket, a
 * device), -EMLINK a hard link, -EPERM another user's file, -ESTALE not
 * the file @want names.
 */
int _pmg_open_checked(int dfd, const char *name, int flags, mode_t mode,
		      uid_t dir_uid, unsigned how, const struct stat *want);

/* FNV-1a (64 bits) of the whole file @fd (read with pread from offset 0)
 * into *@sum: the allow file's content, checked by each process against
 * what `pmguard run` read (an inode number is reused once freed).  0 or
 * -errno. */
int _pmg_fd_digest(int fd, uint64_t *sum);

/* Why _pmg_open_checked() or _pmg_dir_open() refused (@err negative),
 * as a static string; NULL for any other error (strerror() it). */
const char *_pmg_open_why(int err, unsigned how);

#endif /* PMG_SAFEFILE_H */
