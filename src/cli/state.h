/* SPDX-License-Identifier: Apache-2.0
 *
 * What the files of 'lazaret state' share (cmd_state.c says which file
 * does what); 'lazaret image' (cmd_image.c) uses its bounded walk and
 * times too; nothing else includes it.
 */
#ifndef LAZARET_CLI_STATE_H
#define LAZARET_CLI_STATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "cli/cli.h"
#include "common/error.h"
#include "store/domain_store.h"

/* A walk of what a sandbox wrote: at most this deep and this many entries
 * (beyond, the size is a lower bound and says so). */
#define WALK_MAX_DEPTH 256
#define WALK_MAX_ENTRIES 2000000
/* At most this many names of a directory are listed. */
#define LIST_MAX 100000

typedef struct state_walk {
    unsigned long long bytes; /* allocated bytes (st_blocks * 512) */
    unsigned long long entries;
    bool partial; /* unreadable parts, or a bound reached */
} state_walk;

/* The options of inspect, verify, reset and fix-ownership. */
typedef struct state_opts {
    const char *profile;   /* --profile */
    const char *workspace; /* --workspace */
    const char *id_prefix; /* the positional argument */
    bool as_json, stop, yes;
} state_opts;

/* The Domain a subcommand acts on. */
typedef struct state_target {
    char id[65];
    int droot;             /* O_RDONLY|O_DIRECTORY, no symlink followed */
    char *droot_label;     /* <storage>/domains/<id> */
    lz_domain_summary sum; /* from its store, when readable */
    char *store_error;     /* why not, otherwise NULL */
    json_t *status;        /* its coordinator's status.json when it runs */
    bool running;          /* its Domain lock is held */
} state_target;

/* state_walk.c */
/* The size of parent's child `name` (a directory), or a zero walk. */
state_walk state_size_of(int parent, const char *name);
/* The size of the persistent directories: the upper directory of each
 * state/<dir>/, what the sandbox wrote. */
state_walk state_persistent_size(int droot);
/* b bytes for people: "12 B", "3.4 MiB". */
void state_human(unsigned long long b, char *out, size_t n);
/* Entries of the directory parent/name, sorted (at most max, *total all);
 * NULL when it cannot be read (absent included). */
char **state_list_dir(int parent, const char *name, size_t max, size_t *ret_n, size_t *total);
void state_free_names(char **names, size_t n);

/* state_target.c */
/* The entry of the Domain id in the running Domains' status.json array. */
json_t *state_running_by_id(json_t *running, const char *id);
void state_target_clear(state_target *t);
/* Fill t with the Domain opts name; -1 with *err when none or several. */
int state_select_target(const lz_global_options *g, const state_opts *o, state_target *t,
                        lz_error **err);
/* state_select_target, reporting its error: 0, or -1 with t cleared. */
int state_select_or_report(const lz_global_options *g, const state_opts *opts, state_target *t);
/* o[key]: the time of secs (seconds since the epoch) in ISO 8601, or null. */
void state_set_time(json_t *o, const char *key, json_t *secs);
/* What every subcommand says first about the Domain: as JSON, as text. */
json_t *state_target_header(const state_target *t);
void state_print_header(const state_target *t);

/* The subcommands: each returns the exit status. */
int state_list_all(bool as_json, const lz_global_options *g);
int state_inspect(const lz_global_options *g, const state_opts *opts);
int state_verify(const lz_global_options *g, const state_opts *opts);
int state_reset(const lz_global_options *g, const state_opts *opts);
int state_fix_ownership(const lz_global_options *g, const state_opts *opts);

#endif
