/* SPDX-License-Identifier: Apache-2.0
 *
 * One parser for the options of every command, so that every command
 * follows the same rules (issue 24: seven hand-written loops disagreed on
 * --opt=value and on what a missing value was called):
 *
 *   --name VALUE and --name=VALUE; -x VALUE for an option with a short name;
 *   an empty value is refused, and so is a missing one, by the option's name;
 *   --name=VALUE for an option that takes no value is refused;
 *   "--" ends the options; "-" alone is an argument, not an option;
 *   any other word starting with "-" that the table lacks is an unknown option.
 *
 * The value of "--name VALUE" is the next word whatever it is ("--workspace
 * -x" names the directory "-x"), as every command did before. No
 * abbreviations: an option is named in full. Pure: it reads argv only and
 * writes the reason of a refusal into the parser, for the caller to print.
 */
#ifndef LAZARET_COMMON_OPTIONS_H
#define LAZARET_COMMON_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct lz_option {
    const char *name;  /* the long name, without "--" */
    char short_name;   /* -x, or 0 */
    const char *value; /* what its value is, for messages ("DIR"); NULL: it takes none */
    int id;            /* returned by lz_opt_next, >= 0 */
} lz_option;

enum {
    LZ_OPT_DONE = -1,     /* no argument left (or "--" with stop_at_dashdash) */
    LZ_OPT_ARGUMENT = -2, /* a word that is not an option: p->arg */
    LZ_OPT_ERROR = -3,    /* a usage error: p->error says which */
};

typedef struct lz_opt_parser {
    const lz_option *table;
    size_t n_table;
    int argc;
    char **argv;
    int next;                /* the index of the next word to read */
    bool stop_at_dashdash;   /* "--" ends the parse (the rest is another program's) */
    bool dashdash_seen;      /* "--" was read */
    const lz_option *option; /* the option just returned */
    const char *value;       /* its value, NULL for an option without one */
    const char *arg;         /* the word just returned (ARGUMENT) or refused (ERROR) */
    char error[256];
} lz_opt_parser;

/* Parse argv[first..argc) against table[0..n_table). */
void lz_opt_init(lz_opt_parser *p, const lz_option *table, size_t n_table, int argc, char **argv,
                 int first);

/* The next option's id (p->value set when it takes one), LZ_OPT_ARGUMENT,
 * LZ_OPT_DONE or LZ_OPT_ERROR. After LZ_OPT_DONE p->next is the first word
 * not read (after "--" when it stopped there). */
int lz_opt_next(lz_opt_parser *p);

#endif
