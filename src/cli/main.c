/* SPDX-License-Identifier: Apache-2.0
 *
 * lazaret: entry point and subcommand dispatch.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/error.h"
#include "common/nodump.h"
#include "common/options.h"
#include "common/timing.h"
#include "common/util.h"
#include "lazaret-version.h"

static const lz_command commands[] = {
    { "run", "launch or join the profile's sandbox for this workspace", lz_usage_run, lz_cmd_run,
      LZ_EXIT_RUN_LAZARET_FAILED },
    { "status", "show running Domains, generations and sessions", lz_usage_status, lz_cmd_status,
      LZ_EXIT_FAILURE },
    { "state", "list, inspect, verify or reset persistent sandbox state", lz_usage_state,
      lz_cmd_state, LZ_EXIT_FAILURE },
    { "config", "validate the configuration and show the resolved profile", lz_usage_config,
      lz_cmd_config, LZ_EXIT_FAILURE },
    { "stop", "end the workspace's running Domain cleanly", lz_usage_stop, lz_cmd_stop,
      LZ_EXIT_FAILURE },
    { "doctor", "check every prerequisite and print the fix for each failure", lz_usage_doctor,
      lz_cmd_doctor, LZ_EXIT_FAILURE },
    { "export", "write the profile for another engine: export kubernetes PROFILE", lz_usage_export,
      lz_cmd_export, LZ_EXIT_FAILURE },
    { "log", "show the Domain's log: the DNS queries and connections it denied", lz_usage_log,
      lz_cmd_log, LZ_EXIT_FAILURE },
    { "init", "add a starter profile for a coding agent: init claude|codex|gemini|opencode",
      lz_usage_init, lz_cmd_init, LZ_EXIT_FAILURE },
    { "image", "list prepared images, or prune the ones no Domain uses", lz_usage_image,
      lz_cmd_image, LZ_EXIT_FAILURE },
};

static void print_main_usage(FILE *out)
{
    fprintf(out, "Usage: lazaret [--config FILE] COMMAND [ARG...]\n"
                 "\n"
                 "Run an AI coding agent in a rootless gVisor sandbox on this project.\n"
                 "\n"
                 "Commands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "  %-8s %s\n", "help", "show this help, or a command's: lazaret help COMMAND");
    fprintf(out, "  %-8s %s\n", "version", "show the version");
    fprintf(out, "\n"
                 "Options:\n"
                 "  --config FILE  use this configuration file instead of\n"
                 "                 $XDG_CONFIG_HOME/lazaret/config.toml\n"
                 "  --help         show this help\n"
                 "  --version      show the version\n"
                 "\n"
                 "Run 'lazaret COMMAND --help' for a command's options.\n");
}

lz_resolved_config *lz_cli_load_profile(const lz_global_options *g, const char *profile,
                                        const char *workspace, lz_load_env env)
{
    lz_error *err = NULL;
    lz_resolved_config *cfg = NULL;
    lz_load_request req = {
        .config_path = g->config_path,
        .profile = profile,
        .workspace = workspace,
        .layout = lz_sandbox_layout_production(),
        .env = env,
    };
    if (lz_config_load(&req, &cfg, &err) < 0) {
        lz_error_report(err, stderr);
        lz_error_free(err);
        return NULL;
    }
    return cfg;
}

bool lz_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return false;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return true;
    }
    return false;
}

bool lz_cli_confirm(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs(" [y/N] ", stderr);
    fflush(stderr);
    char line[16];
    if (!fgets(line, sizeof(line), stdin))
        return false;
    return strcmp(line, "y\n") == 0 || strcmp(line, "yes\n") == 0 || strcmp(line, "Y\n") == 0;
}

int lz_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "lazaret%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'lazaret%s%s --help'.\n", cmd ? " " : "", cmd ? cmd : "");
    return LZ_EXIT_USAGE;
}

int lz_cli_parse_flags(const char *cmd, const lz_option *table, size_t n, int argc, char **argv,
                       int first, bool *flags)
{
    lz_opt_parser p;
    lz_opt_init(&p, table, n, argc, argv, first);
    for (int o; (o = lz_opt_next(&p)) != LZ_OPT_DONE;) {
        if (o == LZ_OPT_ERROR)
            return lz_cli_usage_error(cmd, "%s", p.error);
        if (o == LZ_OPT_ARGUMENT)
            return lz_cli_usage_error(cmd, "unexpected argument '%s'", p.arg);
        flags[o] = true;
    }
    return LZ_EXIT_OK;
}

int main(int argc, char **argv)
{
    lz_timing_origin();
    /* First of all, before any secret is read (the configuration resolves
     * the profile's env: values from our environment): no core dump of this
     * process or of anything it forks (the Session Coordinator, the Runtime
     * Supervisor) may carry them to disk, and RLIMIT_CORE carries over into
     * the programs they execute (runsc). docs/runtime.md, "Secrets in
     * memory and core dumps". */
    {
        lz_error *err = NULL;
        if (lz_nodump_enter(&err) < 0) {
            lz_error_report(err, stderr);
            lz_error_free(err);
            return LZ_EXIT_FAILURE;
        }
    }
    lz_global_options g = { 0 };
    enum { OPT_HELP, OPT_VERSION, OPT_CONFIG };
    static const lz_option options[] = {
        { "help", 'h', NULL, OPT_HELP },
        { "version", 0, NULL, OPT_VERSION },
        { "config", 0, "FILE", OPT_CONFIG },
    };
    lz_opt_parser p;
    lz_opt_init(&p, options, LZ_ARRAY_SIZE(options), argc, argv, 1);
    /* The global options end at the first word that is not one: the command. */
    int i = argc;
    for (int o; (o = lz_opt_next(&p)) != LZ_OPT_DONE;) {
        if (o == LZ_OPT_ERROR)
            return lz_cli_usage_error(NULL, "%s", p.error);
        if (o == LZ_OPT_ARGUMENT) {
            i = p.next - 1;
            break;
        }
        if (o == OPT_HELP) {
            print_main_usage(stdout);
            return LZ_EXIT_OK;
        }
        if (o == OPT_VERSION) {
            printf("lazaret %s\n", LAZARET_VERSION);
            return LZ_EXIT_OK;
        }
        g.config_path = p.value;
    }
    if (i >= argc) {
        print_main_usage(stderr);
        return LZ_EXIT_USAGE;
    }
    if (strcmp(argv[i], "version") == 0) {
        if (i + 1 < argc)
            return lz_cli_usage_error("version", "takes no arguments");
        printf("lazaret %s\n", LAZARET_VERSION);
        return LZ_EXIT_OK;
    }
    bool help = strcmp(argv[i], "help") == 0;
    if (help) {
        if (i + 1 >= argc) {
            print_main_usage(stdout);
            return LZ_EXIT_OK;
        }
        if (i + 2 < argc)
            return lz_cli_usage_error("help", "takes at most one COMMAND");
        i++;
    }

    const lz_command *cmd = NULL;
    for (size_t k = 0; k < sizeof(commands) / sizeof(commands[0]); k++)
        if (strcmp(argv[i], commands[k].name) == 0)
            cmd = &commands[k];
    if (!cmd)
        return lz_cli_usage_error(NULL, "unknown command '%s'", argv[i]);
    if (help) {
        fputs(cmd->usage, stdout);
        return LZ_EXIT_OK;
    }

    if (lz_cli_wants_help(argc - i, argv + i)) {
        fputs(cmd->usage, stdout);
        return LZ_EXIT_OK;
    }

    /* SR-1: agent processes never receive host root authority. Lazaret itself
     * refuses to run as root so that nothing it starts inherits root. */
    if (geteuid() == 0 || getuid() == 0) {
        lz_error *err = NULL;
        lz_error_set(&err, 0, "refusing to run as root (uid 0)");
        lz_error_hint(&err, "run lazaret as your normal, unprivileged user; it needs no root "
                            "rights");
        lz_error_report(err, stderr);
        lz_error_free(err);
        return cmd->failure_status;
    }

    return cmd->run(argc - i, argv + i, &g);
}
