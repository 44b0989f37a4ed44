/* SPDX-License-Identifier: Apache-2.0
 *
 * The lazaret command line: one file per subcommand behind the dispatch
 * table in main.c. Each command receives argv starting at its own name and
 * returns the process exit status.
 *
 * Exit statuses (README "Exit codes"):
 *   run:          the sandboxed command's status, 128+N for signal N,
 *                 125 Lazaret failed, 126 not executable, 127 not found
 *   other:        0 ok, 1 failure, 2 usage error
 */
#ifndef LAZARET_CLI_CLI_H
#define LAZARET_CLI_CLI_H

#include <stdbool.h>
#include <stddef.h>

#include "config/resolve.h"

enum {
    LZ_EXIT_OK = 0,
    LZ_EXIT_FAILURE = 1,
    LZ_EXIT_USAGE = 2,
    LZ_EXIT_RUN_LAZARET_FAILED = 125,
    LZ_EXIT_RUN_NOT_EXECUTABLE = 126,
    LZ_EXIT_RUN_NOT_FOUND = 127,
};

typedef struct lz_global_options {
    const char *config_path; /* --config FILE, or NULL for the XDG default */
} lz_global_options;

typedef struct lz_command {
    const char *name;
    const char *summary; /* one line for `lazaret --help` */
    const char *usage;   /* full text for `lazaret CMD --help` */
    int (*run)(int argc, char **argv, const lz_global_options *g);
    int failure_status; /* status for Lazaret's own failures */
} lz_command;

int lz_cmd_run(int argc, char **argv, const lz_global_options *g);
int lz_cmd_status(int argc, char **argv, const lz_global_options *g);
int lz_cmd_state(int argc, char **argv, const lz_global_options *g);
int lz_cmd_config(int argc, char **argv, const lz_global_options *g);
int lz_cmd_doctor(int argc, char **argv, const lz_global_options *g);
int lz_cmd_stop(int argc, char **argv, const lz_global_options *g);
int lz_cmd_export(int argc, char **argv, const lz_global_options *g);
int lz_cmd_log(int argc, char **argv, const lz_global_options *g);
int lz_cmd_init(int argc, char **argv, const lz_global_options *g);
int lz_cmd_image(int argc, char **argv, const lz_global_options *g);

extern const char lz_usage_run[];
extern const char lz_usage_status[];
extern const char lz_usage_state[];
extern const char lz_usage_config[];
extern const char lz_usage_doctor[];
extern const char lz_usage_stop[];
extern const char lz_usage_export[];
extern const char lz_usage_log[];
extern const char lz_usage_init[];
extern const char lz_usage_image[];

/* The status.json objects of this user's running Domains (a JSON array,
 * new reference), *ret_root set to the runtime domains directory (newly
 * allocated); NULL after reporting an unusable XDG_RUNTIME_DIR. */
struct json_t;
struct json_t *lz_cli_running_domains(char **ret_root);

/* Stop the running Domains of the workspace (NULL: chosen as for 'run'), of
 * profile only when given, saying so on stdout; 'lazaret stop' and
 * 'lazaret state reset --stop' (cmd_stop.c). Returns the exit status. */
int lz_cli_stop(const char *profile, const char *workspace);

/* True when argv[1..] asks for help ("--help" or "-h" anywhere before "--"). */
bool lz_cli_wants_help(int argc, char **argv);

/* Load and resolve PROFILE of the configuration for the workspace (NULL:
 * the current directory's), as every command that acts on a Domain does,
 * with the production sandbox layout; env values only with
 * LZ_LOAD_ENV_VALUES (`run`: only a command that starts a sandbox needs the
 * secrets). Returns the configuration, or NULL after reporting the error on
 * stderr. */
lz_resolved_config *lz_cli_load_profile(const lz_global_options *g, const char *profile,
                                        const char *workspace, lz_load_env env);

/* Parse the options of cmd in argv[first..argc): flags only (options
 * without a value) and no argument; flags[id] set for each flag given.
 * LZ_EXIT_OK, or LZ_EXIT_USAGE after saying why. */
struct lz_option;
int lz_cli_parse_flags(const char *cmd, const struct lz_option *table, size_t n, int argc,
                       char **argv, int first, bool *flags);

/* Ask QUESTION (formatted, " [y/N] " appended) on stderr and read one line
 * of stdin: true only for y, Y or yes (`state reset`, `image prune`
 * without --yes, on a terminal). */
bool lz_cli_confirm(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Print "lazaret CMD: MESSAGE" and "Try 'lazaret CMD --help'." to stderr;
 * returns LZ_EXIT_USAGE. */
int lz_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
