// SPDX-License-Identifier: MIT
/*
 * libstopinit.so and stopinit-prog (tests/run/signals.py "stopped-start"):
 * a program whose library constructor runs before the preload's (a
 * DT_NEEDED library is initialised before LD_PRELOAD ones) and, with
 * STOPINIT=stop, stops there (SIGTSTP), as ^Z at start-up would, or with
 * STOPINIT=sleep5 takes 5 s there (a slow machine, a long constructor),
 * or with STOPINIT=closefds closes every descriptor from 3 (a library
 * that closes what it inherited): before the preload has confirmed to
 * `pmguard run` that it loaded.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef STOPINIT_LIB
__attribute__((constructor)) static void stop_init(void)
{
	const char *e = getenv("STOPINIT");

	if (e && !strcmp(e, "stop"))
		raise(SIGTSTP);
	if (e && !strcmp(e, "sleep5"))
		sleep(5);
	if (e && !strcmp(e, "closefds")) {
		int fd;

		for (fd = 3; fd < 1024; fd++)
			close(fd);
	}
}

int stopinit_linked(void);
int stopinit_linked(void)
{
	return 1;
}
#else
int stopinit_linked(void);

int main(void)
{
	printf("stopinit-prog: main %d\n", stopinit_linked());
	return 0;
}
#endif
