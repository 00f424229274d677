// SPDX-License-Identifier: MIT
/*
 * test-poolrace: pools opened and closed by many threads at once, on a
 * disk filesystem (ext4, xfs: no DAX, so MAP_SYNC is refused), while
 * other threads mmap, fill, check and munmap anonymous memory.  Pool
 * mapping must never place a file over memory it does not own: every pool
 * thread must see only its own file's bytes, every anonymous thread only
 * its own, and every file must hold its own bytes afterwards.  (A failed
 * MAP_SYNC|MAP_FIXED mmap once unmapped the reservation and the fallback
 * MAP_FIXED replaced whatever another thread had put there.)
 *
 * The run happens in a forked child (a clobbered mapping can crash it);
 * its counts live in a shared page.  PMG_RACE_SECONDS (default 3) and
 * PMG_DISK_DIR (a directory on a disk filesystem) override the defaults.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>

#include "pmguard.h"
#include "tap.h"

#define NPOOL 4
#define NANON 4
#define PSIZE (256UL << 10)
#define ASIZE (256UL << 10)
#define TMPFS_MAGIC 0x01021994
#define RAMFS_MAGIC 0x858458f6

static char dir[PATH_MAX / 2];
static int stop;

static struct counts {
	unsigned long opens, open_errs, pool_bad, maps, anon_bad, file_bad;
	int done;
} *cnt;

#define ADD(f, n) __atomic_add_fetch(&cnt->f, (n), __ATOMIC_RELAXED)

static unsigned char pool_byte(int i)
{
	return (unsigned char)(0x10 + i);
}

static void pool_path(char *buf, int i)
{
	snprintf(buf, PATH_MAX, "%s/pool-%d", dir, i);
}

static unsigned long count_not(const unsigned char *p, size_t n,
			       unsigned char c)
{
	unsigned long bad = 0;
	size_t i;

	for (i = 0; i < n; i++)
		bad += p[i] != c;
	return bad;
}

static void *pool_thread(void *arg)
{
	int i = (int)(intptr_t)arg;
	char path[PATH_MAX];

	pool_path(path, i);
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		struct pmg_pool *p;
		int rc = pmg_pool_open(&p, path, NULL);

		if (rc) {
			ADD(open_errs, 1);
			if (cnt->open_errs < 4)
				printf("# open %s: %d %s\n", path, rc,
				       pmg_errormsg());
			continue;
		}
		ADD(opens, 1);
		if (count_not(pmg_pool_address(p), PSIZE, pool_byte(i)))
			ADD(pool_bad, 1);
		pmg_pool_close(&p);
	}
	return NULL;
}

static void *anon_thread(void *arg)
{
	unsigned char c = (unsigned char)(0x80 + (int)(intptr_t)arg);

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		unsigned char *m = mmap(NULL, ASIZE, PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (m == MAP_FAILED)
			continue;
		ADD(maps, 1);
		memset(m, c, ASIZE);
		sched_yield();
		if (count_not(m, ASIZE, c))
			ADD(anon_bad, 1);
		munmap(m, ASIZE);
	}
	return NULL;
}

static int race(void *arg)
{
	pthread_t t[NPOOL + NANON];
	int secs = *(int *)arg, i;
	struct timespec ts = { secs, 0 };

	/*
	 * Initialised before the threads start: pmg_init() racing
	 * pthread_create() is another matter (thread.c reads _pmg_fast
	 * plainly; TSan reports it), not this test's.
	 */
	if (pmg_init())
		return 3;
	for (i = 0; i < NPOOL; i++)
		pthread_create(&t[i], NULL, pool_thread, (void *)(intptr_t)i);
	for (i = 0; i < NANON; i++)
		pthread_create(&t[NPOOL + i], NULL, anon_thread,
			       (void *)(intptr_t)i);
	nanosleep(&ts, NULL);
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (i = 0; i < NPOOL + NANON; i++)
		pthread_join(t[i], NULL);
	cnt->done = 1;
	return 0;
}

static int file_ok(int i)
{
	static unsigned char buf[PSIZE];
	char path[PATH_MAX];
	int fd;
	ssize_t n;

	pool_path(path, i);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	n = read(fd, buf, PSIZE);
	close(fd);
	return n == (ssize_t)PSIZE && !count_not(buf, PSIZE, pool_byte(i));
}

/* A writable directory on a filesystem that is neither tmpfs nor ramfs. */
static int pick_dir(void)
{
	const char *cand[] = { getenv("PMG_DISK_DIR"), getenv("TMPDIR"),
			       "/tmp", "/var/tmp", "." };
	unsigned i;

	for (i = 0; i < sizeof(cand) / sizeof(cand[0]); i++) {
		struct statfs sf;

		if (!cand[i] || statfs(cand[i], &sf) ||
		    sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC)
			continue;
		snprintf(dir, sizeof(dir), "%s/pmg-race-XXXXXX", cand[i]);
		if (mkdtemp(dir)) {
			tap_diag("files in %s (filesystem magic %#lx)", dir,
				 (unsigned long)sf.f_type);
			return 0;
		}
	}
	return -1;
}

int main(void)
{
	const char *s = getenv("PMG_RACE_SECONDS");
	int secs = s ? atoi(s) : 3, i, st, ok = 1;
	unsigned char *buf;
	char path[PATH_MAX];

	if (secs <= 0)
		secs = 3;
	cnt = tap_shared_page();
	if (!cnt || pick_dir())
		tap_skip_all("no directory on a disk filesystem (set "
			     "PMG_DISK_DIR)");
	tap_init(2);
	buf = malloc(PSIZE);
	for (i = 0; i < NPOOL; i++) {
		int fd;

		pool_path(path, i);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		memset(buf, pool_byte(i), PSIZE);
		if (fd < 0 || write(fd, buf, PSIZE) != (ssize_t)PSIZE)
			tap_skip_all("cannot write the pool files");
		close(fd);
	}
	free(buf);
	st = tap_child(race, &secs);
	tap_diag("%d pool threads, %d anonymous-memory threads, %d s: %lu "
		 "opens (%lu failed), %lu anonymous maps; pools seeing "
		 "foreign bytes %lu, anonymous maps seeing foreign bytes %lu",
		 NPOOL, NANON, secs, cnt->opens, cnt->open_errs, cnt->maps,
		 cnt->pool_bad, cnt->anon_bad);
	if (!WIFEXITED(st) || WEXITSTATUS(st) || !cnt->done) {
		tap_diag("the child ended with status %#x (signal %d)", st,
			 WIFSIGNALED(st) ? WTERMSIG(st) : 0);
		ok = 0;
	}
	CHECK(ok, cnt->opens > 0);
	CHECK(ok, cnt->open_errs == 0);
	CHECK(ok, cnt->pool_bad == 0);
	CHECK(ok, cnt->anon_bad == 0);
	tap_ok(ok, "%d threads open/close their own pools beside %d threads "
	       "mapping anonymous memory: each sees only its own bytes",
	       NPOOL, NANON);
	ok = 1;
	for (i = 0; i < NPOOL; i++)
		if (!file_ok(i)) {
			tap_diag("pool-%d holds foreign bytes", i);
			ok = 0;
		}
	tap_ok(ok, "every pool file holds only its own bytes afterwards");
	for (i = 0; i < NPOOL; i++) {
		pool_path(path, i);
		unlink(path);
	}
	rmdir(dir);
	printf("%d passed, %d failed\n", tap_n - tap_failed, tap_failed);
	return tap_done();
}
