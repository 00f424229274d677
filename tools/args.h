/* SPDX-License-Identifier: MIT */
/*
 * The one argument parser of every pmguard verb (tools/args.c).
 *
 * A verb describes its options in a table and calls cli_args():
 *
 *   -h, --help       always: the verb's usage on stdout, exit 0, wherever
 *                    it stands on the line (the other arguments are not
 *                    looked at)
 *   --name           a flag (CLI_FLAG): sets a bool; "--name=..." is an
 *                    error
 *   --name VALUE     or --name=VALUE, for the other kinds:
 *     CLI_COUNT      decimal digits only (no sign, blank, 0x or octal:
 *                    "010" is ten), in [lo, hi]
 *     CLI_SEED       like CLI_COUNT, or 0x/0X and hex digits
 *     CLI_STRING     any non-empty string
 *     CLI_CHOICE     one of a NULL-terminated list, exactly; the index
 *   anything else    a positional argument, if the verb takes them (an
 *                    argument starting with '-' is an option, never a
 *                    positional: "-0" is an unknown option)
 *
 * Every error is one line on stderr naming the verb, the option and the
 * bad value: "pmguard: VERB: --rounds: bad value '1x' (a decimal number,
 * 1..101)", "pmguard: VERB: --rounds needs a value", "pmguard: VERB:
 * unknown option '-0' (see pmguard VERB --help)".
 */
#ifndef PMG_ARGS_H
#define PMG_ARGS_H

#include <stdbool.h>
#include <stdio.h>

enum cli_kind { CLI_FLAG, CLI_COUNT, CLI_SEED, CLI_STRING, CLI_CHOICE };

struct cli_opt {
	const char *name;		/* "--writes" */
	enum cli_kind kind;
	unsigned long long lo, hi;	/* CLI_COUNT, CLI_SEED */
	const char *const *choices;	/* CLI_CHOICE */
	/* where the value goes: bool (FLAG), unsigned long long (COUNT,
	 * SEED), const char * (STRING), int (CHOICE) */
	void *out;
	bool *seen;			/* set when given (may be NULL) */
};

struct cli_verb {
	const char *name;		/* "bench persist": for messages */
	const struct cli_opt *opts;	/* ends with a NULL name */
	void (*usage)(FILE *f);
	/* positional arguments: NULL if the verb takes none */
	int (*positional)(const char *arg, void *arg_ctx);
	void *ctx;
};

/*
 * Parse argv[1..argc) (argv[0] is the verb).  Returns CLI_GO_ON, or the
 * exit status to return at once: 0 after the usage was printed on stdout
 * for -h or --help, 2 after a message on stderr.
 */
#define CLI_GO_ON (-1)
int cli_args(const struct cli_verb *v, int argc, char **argv);

/*
 * @s as a CLI_COUNT in [lo, hi] (CLI_SEED when @hex): 0, or 2 after the
 * message "pmguard: VERB: WHAT: bad value 'S' (...)" on stderr.  For
 * positional numbers (selftest) and option values alike.
 */
int cli_number(const char *verb, const char *what, const char *s, bool hex,
	       unsigned long long lo, unsigned long long hi,
	       unsigned long long *out);

#endif /* PMG_ARGS_H */
