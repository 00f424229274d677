/* SPDX-License-Identifier: MIT */
/*
 * Page windows of the persistence calls (src/mpwin.c): on mprotect a
 * persistence call opens write access on the pages it touches only.
 *
 *   t_cross     another thread's stray write to a different page of the
 *               domain during persistence calls faults (audit mode: each
 *               one reported); with domain-wide windows most landed
 *   t_explicit  a pmg_open() window already open: the call's close keeps
 *               it open; a domain window opened and closed around a call in
 *               progress never takes the call's pages away
 *   t_samepage  two threads' calls on one page (per-page counts): no fault,
 *               data right, the page closed afterwards
 *   t_fork      a fork child of a process with calls in progress: the
 *               pages are closed in the child (its store faults)
 * PKU runs the same tests (its windows are per thread anyway).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pmguard.h"
#include "tap.h"

#define SIZE (4u << 20)
#define PG 4096u

static struct pmg_domain *dom;
static char *mem;
static char src[2 << 20];
static atomic_int stop;
static atomic_long faults, faults_other;
static char *watch_lo, *watch_hi;	/* faults in here count as faults */

static void observer(const struct pmg_fault_info *fi, void *arg)
{
	char *a = fi->addr;

	(void)arg;
	if (a >= watch_lo && a < watch_hi)
		atomic_fetch_add(&faults, 1);
	else
		atomic_fetch_add(&faults_other, 1);
}

/* Persistence calls on [1 MiB, 3 MiB) until told to stop. */
static void *copier(void *arg)
{
	long n = 0;

	(void)arg;
	while (!atomic_load(&stop)) {
		pmg_memcpy_persist(mem + (1 << 20), src, 2 << 20);
		pmg_memcpy_persist(mem + (1 << 20) + 4096 * (n % 64), src, 64);
		n++;
	}
	return NULL;
}

static void t_cross(void)
{
	pthread_t t;
	int i, ok = 1, n = 300;
	volatile char *p = mem + 8 * PG;	/* not a page the copier touches */

	pmg_set_fault_mode(PMG_FAULT_AUDIT);
	atomic_store(&faults, 0);
	atomic_store(&faults_other, 0);
	watch_lo = mem;
	watch_hi = mem + (1 << 20);
	atomic_store(&stop, 0);
	pthread_create(&t, NULL, copier, NULL);
	usleep(20000);
	for (i = 0; i < n; i++) {
		p[i % PG] = (char)i;
		usleep(200);
	}
	atomic_store(&stop, 1);
	pthread_join(t, NULL);
	CHECK(ok, atomic_load(&faults) == n);
	CHECK(ok, atomic_load(&faults_other) == 0);
	tap_diag("%d stray writes to another page during persistence calls: "
		 "%ld faulted, %ld faults elsewhere", n, atomic_load(&faults),
		 atomic_load(&faults_other));
	tap_ok(ok, "another thread's stray write to a different page during "
	       "persistence calls faults each time (backend %s)",
	       pmg_backend_name(pmg_backend()));
	pmg_set_fault_mode(PMG_FAULT_STRICT);
}

static void t_explicit(void)
{
	pthread_t t;
	int i, ok = 1;

	pmg_set_fault_mode(PMG_FAULT_AUDIT);
	atomic_store(&faults, 0);
	atomic_store(&faults_other, 0);
	watch_lo = mem;
	watch_hi = mem + SIZE;
	/* a window of ours open: a call inside it, then a store after the
	 * call but inside the window is fine; after the window it faults */
	pmg_open(dom, PMG_WRITE);
	pmg_memcpy_persist(mem + 20 * PG, src, 100);
	mem[20 * PG + 200] = 1;
	mem[30 * PG] = 1;
	pmg_close(dom, PMG_WRITE);
	CHECK(ok, atomic_load(&faults) == 0);
	mem[20 * PG + 300] = 1;
	CHECK(ok, atomic_load(&faults) == 1);
	/* domain windows open and close around calls in progress */
	atomic_store(&faults, 0);
	atomic_store(&stop, 0);
	pthread_create(&t, NULL, copier, NULL);
	for (i = 0; i < 300; i++) {
		pmg_open(dom, PMG_WRITE);
		usleep(50);
		pmg_close(dom, PMG_WRITE);
		usleep(50);
	}
	atomic_store(&stop, 1);
	pthread_join(t, NULL);
	CHECK(ok, atomic_load(&faults) == 0 &&
		  atomic_load(&faults_other) == 0);
	CHECK(ok, memcmp(mem + (1 << 20), src, 2 << 20) == 0);
	mem[(1 << 20) + 5] = 1;		/* the call's pages are closed again */
	CHECK(ok, atomic_load(&faults) == 1);
	tap_ok(ok, "explicit windows: a call inside one keeps it open; 300 "
	       "domain windows around calls in progress take no page away "
	       "(%ld faults); pages closed afterwards",
	       atomic_load(&faults) - 1);
	pmg_set_fault_mode(PMG_FAULT_STRICT);
}

struct same {
	int off;
	long bad;
};

static void *same_page(void *arg)
{
	struct same *s = arg;
	char buf[64];
	long i;

	for (i = 0; i < 20000; i++) {
		memset(buf, (int)(i & 0xff), sizeof(buf));
		pmg_memcpy_persist(mem + 40 * PG + s->off, buf, sizeof(buf));
		if (memcmp(mem + 40 * PG + s->off, buf, sizeof(buf)))
			s->bad++;
	}
	return NULL;
}

static void t_samepage(void)
{
	struct same a = { 0, 0 }, b = { 1024, 0 };
	pthread_t ta, tb;
	int ok = 1;

	pmg_set_fault_mode(PMG_FAULT_AUDIT);
	atomic_store(&faults, 0);
	atomic_store(&faults_other, 0);
	watch_lo = mem;
	watch_hi = mem + SIZE;
	pthread_create(&ta, NULL, same_page, &a);
	pthread_create(&tb, NULL, same_page, &b);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	CHECK(ok, atomic_load(&faults) == 0 &&
		  atomic_load(&faults_other) == 0);
	CHECK(ok, a.bad == 0 && b.bad == 0);
	mem[40 * PG + 3000] = 1;
	CHECK(ok, atomic_load(&faults) == 1);
	tap_ok(ok, "two threads' calls on one page (2 x 20000): no fault "
	       "(%ld), data right, the page closed afterwards",
	       atomic_load(&faults) - 1);
	pmg_set_fault_mode(PMG_FAULT_STRICT);
}

static void t_fork(void)
{
	pthread_t t;
	int i, ok = 1, aborted = 0, n = 20;

	atomic_store(&stop, 0);
	pthread_create(&t, NULL, copier, NULL);
	usleep(10000);
	for (i = 0; i < n; i++) {
		pid_t pid;
		int st;

		fflush(NULL);
		pid = fork();
		if (pid == 0) {
			pmg_set_fault_observer(NULL, NULL);
			pmg_set_fault_mode(PMG_FAULT_STRICT);
			mem[(1 << 20) + 100] = 7;	/* the copier's page */
			_exit(0);
		}
		waitpid(pid, &st, 0);
		if (WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT)
			aborted++;
		usleep(1000);
	}
	atomic_store(&stop, 1);
	pthread_join(t, NULL);
	CHECK(ok, aborted == n);
	tap_ok(ok, "fork during persistence calls: the child's store to the "
	       "call's page faults (%d/%d children aborted)", aborted, n);
}

int main(void)
{
	size_t i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	tap_init(4);
	mem = mmap(NULL, SIZE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		tap_skip_all("mmap");
	memset(mem, 0, SIZE);
	for (i = 0; i < sizeof(src); i++)
		src[i] = (char)(i * 7 + 1);
	if (pmg_domain_new(&dom, "pagewin", 0) || pmg_protect(dom, mem, SIZE))
		tap_skip_all("no domain");
	pmg_set_fault_observer(observer, NULL);
	tap_diag("backend %s", pmg_backend_name(pmg_backend()));
	t_cross();
	t_explicit();
	t_samepage();
	t_fork();
	return tap_done();
}
