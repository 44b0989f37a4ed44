/* SPDX-License-Identifier: Apache-2.0
 *
 * lazaret run PROFILE [--workspace DIR] [-- COMMAND [ARG...]]
 *
 * Loads the configuration, finds or starts the Domain's coordinator
 * (coordinator/bootstrap.h), and runs COMMAND (default: the image's login
 * shell) in the shared sandbox. The exit status is the command's (128+N for
 * signal N; 125 Lazaret failed, 126 not executable, 127 not found).
 *
 * Non-interactive (stdin or stdout is not a terminal): stdin, stdout and
 * stderr stream through pipes handed to the sandboxed process.
 *
 * Interactive (both are terminals): the coordinator owns a PTY for the
 * session; this process puts its terminal in raw mode and relays bytes both
 * ways (INPUT/OUTPUT), the window size at start and on every SIGWINCH
 * (RESIZE). Ctrl-C, Ctrl-Z, Ctrl-\ are bytes that the guest's line
 * discipline interprets. SIGHUP/SIGTERM end the session (CLOSE). The
 * terminal's original mode is restored on every exit path (DX-5): normal
 * exit, refusal, coordinator or supervisor death, signals.
 *
 * This file is the command: its options, what it asks the coordinator to
 * run (HELLO, RUN) and the attempts (a generation tearing down is joined
 * again). The session channel's client side is the client library
 * (src/client/: enrolment and TLS, the coordinator's messages, the
 * prompt); the terminal and its presentation are terminal.c, the stdio
 * relays relay.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/relay.h"
#include "cli/terminal.h"
#include "client/client.h"
#include "common/options.h"
#include "common/timing.h"
#include "common/text.h"
#include "common/util.h"
#include "config/resolve.h"
#include "coordinator/bootstrap.h"
#include "fs/confined.h"
#include "protocol/messages.h"
#include "protocol/wire.h"

const char lz_usage_run[] =
    "Usage: lazaret [--config FILE] run PROFILE [--workspace DIR] [--publish HOSTPORT:PORT]...\n"
    "                                   [-- COMMAND [ARG...]]\n"
    "\n"
    "Launch PROFILE's sandbox for the workspace, or join it when it is already\n"
    "running, and run COMMAND in it (default: the profile's `command`, else the\n"
    "image's login shell; `--` with nothing after it: the login shell). The\n"
    "workspace is the top of the Git working tree you are in (never your home\n"
    "directory), else the current directory; it is /workspace inside, and the\n"
    "command starts in the matching subdirectory when you run lazaret from one.\n"
    "\n"
    "Options:\n"
    "  --workspace DIR  the project directory (default: as above)\n"
    "  -e, --env NAME=VALUE, -e NAME\n"
    "                   set NAME in this command's environment (NAME alone: its\n"
    "                   value here); repeatable; wins over the profile's values.\n"
    "                   Prefer -e NAME for secrets: a command line is visible to\n"
    "                   other processes\n"
    "  --publish [ADDR:]HOSTPORT:PORT\n"
    "                   while this command runs, connections to ADDR:HOSTPORT on\n"
    "                   this machine (ADDR in 127.0.0.0/8, default 127.0.0.1) reach\n"
    "                   TCP port PORT of the sandbox (its server must listen on\n"
    "                   0.0.0.0); repeatable, at most 8\n"
    "\n"
    "Exit status: the command's; 128+N when it died of signal N; 125 when Lazaret\n"
    "failed, 126 when the command is not executable, 127 when it was not found.\n";

/* ---- --publish (docs/network.md "Publishing a port") ------------------- */

/* Parsed once from the command line; every attempt's RUN carries them (the
 * coordinator listens on them, so a retry after a teardown binds again). */
static lz_msg_publish run_publish[LZ_MSG_MAX_PUBLISH];
static size_t run_n_publish;

static void run_publish_into(lz_msg_run *run)
{
    memcpy(run->publish, run_publish, sizeof(run_publish));
    run->n_publish = run_n_publish;
}

static int run_publish_add(const char *spec)
{
    lz_msg_publish p;
    char why[256];
    if (!lz_msg_publish_parse(spec, &p, why, sizeof(why)))
        return lz_cli_usage_error("run",
                                  "--publish: %s (use [127.x.y.z:]HOSTPORT:PORT, e.g. "
                                  "--publish 8080:80)",
                                  why);
    if (run_n_publish == LZ_MSG_MAX_PUBLISH)
        return lz_cli_usage_error("run", "--publish: at most %d ports per session",
                                  LZ_MSG_MAX_PUBLISH);
    for (size_t k = 0; k < run_n_publish; k++)
        if (run_publish[k].addr == p.addr && run_publish[k].host_port == p.host_port)
            return lz_cli_usage_error("run", "--publish: host port %u is given twice", p.host_port);
    run_publish[run_n_publish++] = p;
    return 0;
}

/* ---- -e / --env --------------------------------------------------------- */

#define RUN_MAX_USER_ENV 64

/* "NAME=value" strings of this run (owned; wiped at exit: may be secrets). */
static char *run_user_env[RUN_MAX_USER_ENV];
static size_t run_n_user_env;

static void run_user_env_clear(void)
{
    for (size_t i = 0; i < run_n_user_env; i++) {
        explicit_bzero(run_user_env[i], strlen(run_user_env[i]));
        free(run_user_env[i]);
    }
    run_n_user_env = 0;
}

static int run_user_env_add(const char *spec)
{
    char *entry;
    if (strchr(spec, '=')) {
        entry = lz_xstrdup(spec);
    } else {
        const char *v = getenv(spec);
        if (!v)
            return lz_cli_usage_error("run",
                                      "-e %s: %s is not set in your environment (export it, or "
                                      "write -e %s=VALUE)",
                                      spec, spec, spec);
        entry = lz_xasprintf("%s=%s", spec, v);
    }
    size_t name_len = strcspn(entry, "=");
    if (!lz_msg_user_env_ok(entry) || strlen(entry) > LZ_MSG_MAX_STR) {
        int r = lz_cli_usage_error("run",
                                   "-e %.*s: not a usable variable (NAME matches "
                                   "[A-Za-z_][A-Za-z0-9_]* and does not start with LAZARET_; "
                                   "NAME=VALUE is at most %d bytes)",
                                   (int) (name_len < 64 ? name_len : 64), entry, LZ_MSG_MAX_STR);
        explicit_bzero(entry, strlen(entry));
        free(entry);
        return r;
    }
    if (run_n_user_env == RUN_MAX_USER_ENV) {
        explicit_bzero(entry, strlen(entry));
        free(entry);
        return lz_cli_usage_error("run", "-e: at most %d variables", RUN_MAX_USER_ENV);
    }
    /* The same name again: the later one counts, as in a shell. */
    for (size_t k = 0; k < run_n_user_env; k++)
        if (strncmp(run_user_env[k], entry, name_len + 1) == 0) {
            explicit_bzero(run_user_env[k], strlen(run_user_env[k]));
            free(run_user_env[k]);
            run_user_env[k] = entry;
            return 0;
        }
    run_user_env[run_n_user_env++] = entry;
    return 0;
}

/* The current directory relative to the workspace, or "" when outside. */
static char *relative_cwd(const char *workspace)
{
    char *cwd = getcwd(NULL, 0);
    if (!cwd)
        return lz_xstrdup("");
    char *canon = realpath(cwd, NULL);
    free(cwd);
    if (!canon)
        return lz_xstrdup("");
    size_t n = strlen(workspace);
    char *rel;
    if (strncmp(canon, workspace, n) == 0 && canon[n] == '/')
        rel = lz_xstrdup(canon + n + 1);
    else
        rel = lz_xstrdup("");
    free(canon);
    return rel;
}

/* The client's locale, passed through to interactive sessions. */
static char **locale_env(size_t *ret_n)
{
    size_t n = 0;
    for (char **e = environ; *e; e++)
        n++;
    char **v = lz_xcalloc(n + 1, sizeof(char *));
    size_t k = 0;
    for (char **e = environ; *e; e++)
        if (lz_msg_locale_var_ok(*e) && strlen(*e) < 256)
            v[k++] = *e;
    *ret_n = k;
    return v;
}

/* What every attempt of one run shares. */
typedef struct run_request {
    lz_resolved_config *cfg;
    char **argv; /* the command, argc words */
    size_t argc;
    bool interactive;
    /* Set once a session started and the profile's env values were wiped:
     * no coordinator may be started after that (client/session.c). */
    bool env_forgotten;
    bool retry_silently; /* false on run's last attempt: then every failure is reported */
} run_request;

/* The RUN message both kinds of session send (the interactive one adds its
 * window size): the command, where it starts, TERM, the locale, the
 * ports to publish. Borrows every string. */
static lz_msg_run run_message(const run_request *rq, char *cwd, char **env, size_t envc)
{
    const char *term = getenv("TERM");
    lz_msg_run run = { .term = (char *) (term ? term : ""),
                       .cwd = cwd,
                       .argv = rq->argv,
                       .argc = rq->argc,
                       .env = env,
                       .envc = envc,
                       .user_env = run_user_env,
                       .user_envc = run_n_user_env };
    run_publish_into(&run);
    return run;
}

/* HELLO and RUN over the secured channel, then the relay until the
 * session ends. */
static lz_attempt_result run_session(const run_request *rq, lz_client *cl)
{
    lz_resolved_config *cfg = rq->cfg;
    lz_error *err = NULL;
    char id[65], fp[65];
    lz_digest_hex(cfg->domain_id, id);
    lz_digest_hex(cfg->fingerprint, fp);
    _cleanup_free_ char *cwd = relative_cwd(cfg->workspace.label);
    lz_wbuf b;
    lz_msg_hello h = { LZ_SESSION_PROTOCOL_VERSION, id, fp };
    size_t envc = 0;
    _cleanup_free_ char **env = locale_env(&envc);
    if (rq->interactive) {
        lz_msg_hello_encode(&b, &h);
        struct winsize ws = { .ws_row = 24, .ws_col = 80 };
        ioctl(STDIN_FILENO, TIOCGWINSZ, &ws);
        lz_msg_run run = run_message(rq, cwd, env, envc);
        run.interactive = true;
        run.rows = ws.ws_row;
        run.cols = ws.ws_col;
        if (lz_tls_proto_send(cl->tls, cl->sock, &b, NULL, 0, &err) == 0) {
            lz_msg_run_encode(&b, &run);
            lz_best_effort(lz_tls_proto_send(cl->tls, cl->sock, &b, NULL, 0, &err));
        }
        lz_error_free(lz_error_take(&err)); /* a refusal explains itself */
        return lz_cli_relay_terminal(cl);
    }
    int in[2], out[2], errp[2];
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
        lz_error_set(&err, errno, "cannot create the pipes for the session's stdio");
        lz_error_hint(&err, "the process or system descriptor limit may be reached (ulimit -n)");
        lz_error_report(err, stderr);
        lz_error_free(err);
        *cl->status = LZ_EXIT_RUN_LAZARET_FAILED;
        return LZ_ATTEMPT_DONE;
    }
    lz_msg_hello_encode(&b, &h);
    int sent = lz_tls_proto_send(cl->tls, cl->sock, &b, NULL, 0, &err);
    lz_msg_run run = run_message(rq, cwd, env, envc);
    lz_msg_run_encode(&b, &run);
    int fds[3] = { in[0], out[1], errp[1] };
    if (sent == 0)
        sent = lz_tls_proto_send(cl->tls, cl->sock, &b, fds, 3, &err);
    close(in[0]);
    close(out[1]);
    close(errp[1]);
    lz_error_free(lz_error_take(&err)); /* a refusal explains itself below */
    return lz_cli_relay_pipes(cl, in[1], out[0], errp[0]);
}

/* One connection: ENROLL and TLS, HELLO, RUN, relay, EXIT. *status gets
 * the exit status. */
static lz_attempt_result attempt(run_request *rq, int *status)
{
    lz_resolved_config *cfg = rq->cfg;
    lz_error *err = NULL;
    *status = LZ_EXIT_RUN_LAZARET_FAILED;
    int sock = lz_domain_connect(cfg, lz_cli_progress, NULL, &err);
    if (sock < 0) {
        lz_error_report(err, stderr);
        lz_error_free(err);
        return LZ_ATTEMPT_DONE;
    }
    lz_timing_mark("cli: connected");
    _cleanup_free_ char *log_label = lz_domain_log_label(cfg);
    lz_client cl = { .ui = &lz_cli_terminal_ui,
                     .cfg = cfg,
                     .env_forgotten = &rq->env_forgotten,
                     .log_label = log_label,
                     .sock = sock,
                     .interactive = rq->interactive,
                     .retry_silently = rq->retry_silently,
                     .status = status,
                     .result = LZ_ATTEMPT_DONE };
    _cleanup_close_ int dirfd =
        lz_plan_open(&cfg->runtime_domain_root, O_PATH | O_DIRECTORY, true, &err);
    if (dirfd < 0) {
        lz_error_report(err, stderr);
        lz_error_free(err);
        close(sock);
        return LZ_ATTEMPT_DONE;
    }
    char id[65];
    lz_digest_hex(cfg->domain_id, id);
    if (lz_client_secure(&cl, id, dirfd, cfg->runtime_domain_root.label) < 0) {
        close(sock);
        lz_client_clear(&cl);
        return cl.result;
    }
    lz_timing_mark("cli: channel secured");
    lz_attempt_result r = run_session(rq, &cl);
    close(sock);
    lz_tls_channel_free(cl.tls);
    return r;
}

int lz_cmd_run(int argc, char **argv, const lz_global_options *g)
{
    enum { OPT_WORKSPACE, OPT_PUBLISH, OPT_ENV };
    static const lz_option options[] = {
        { "workspace", 0, "DIR", OPT_WORKSPACE },
        { "publish", 0, "[ADDR:]HOSTPORT:PORT", OPT_PUBLISH },
        { "env", 'e', "NAME[=VALUE]", OPT_ENV },
    };
    atexit(run_user_env_clear);
    const char *profile = NULL, *workspace = NULL;
    lz_opt_parser p;
    lz_opt_init(&p, options, LZ_ARRAY_SIZE(options), argc, argv, 1);
    p.stop_at_dashdash = true; /* what follows is the sandboxed command's */
    for (int o; (o = lz_opt_next(&p)) != LZ_OPT_DONE;) {
        if (o == LZ_OPT_ERROR)
            return lz_cli_usage_error("run", "%s", p.error);
        if (o == OPT_WORKSPACE) {
            workspace = p.value;
        } else if (o == OPT_PUBLISH) {
            int r = run_publish_add(p.value);
            if (r != 0)
                return r;
        } else if (o == OPT_ENV) {
            int r = run_user_env_add(p.value);
            if (r != 0)
                return r;
        } else if (!profile) {
            profile = p.arg;
        } else {
            return lz_cli_usage_error("run",
                                      "unexpected argument '%s' (put the command after "
                                      "'--')",
                                      p.arg);
        }
    }
    if (!profile)
        return lz_cli_usage_error("run", "missing PROFILE");
    char **cmd = argv + p.next;
    size_t cmdc = (size_t) (argc - p.next);
    /* `run P --` asks for the login shell even when P names a command. */
    bool dashdash = p.next > 0 && strcmp(argv[p.next - 1], "--") == 0;
    if (cmdc > LZ_MSG_MAX_ARGS)
        return lz_cli_usage_error("run", "too many arguments (at most %d)", LZ_MSG_MAX_ARGS);
    /* The session protocol's bounds (protocol/messages.h), said here with
     * the argument that passes them rather than as the coordinator's
     * "malformed RUN". */
    size_t total = 0;
    for (size_t k = 0; k < cmdc; k++) {
        size_t len = strlen(cmd[k]);
        if (len > LZ_MSG_MAX_STR)
            return lz_cli_usage_error("run",
                                      "argument %zu of the command is %zu bytes long; "
                                      "at most %d bytes are passed to the sandbox (put "
                                      "longer input into a file in the workspace)",
                                      k + 1, len, LZ_MSG_MAX_STR);
        total += 4 + len;
    }
    for (size_t k = 0; k < run_n_user_env; k++)
        total += 4 + strlen(run_user_env[k]);
    if (total > LZ_WIRE_MAX - 2 * LZ_MSG_MAX_STR)
        return lz_cli_usage_error("run",
                                  "the command's arguments are %zu bytes together; at "
                                  "most about %d bytes are passed to the sandbox (put "
                                  "longer input into a file in the workspace)",
                                  total, LZ_WIRE_MAX - 2 * LZ_MSG_MAX_STR);

    signal(SIGPIPE, SIG_IGN);
    lz_error *err = NULL;
    lz_resolved_config *cfg = lz_cli_load_profile(g, profile, workspace);
    if (!cfg)
        return LZ_EXIT_RUN_LAZARET_FAILED;
    lz_timing_mark("cli: configuration loaded");
    /* The profile's default command (bounded by the schema like argv). */
    if (cmdc == 0 && !dashdash && cfg->command) {
        cmd = cfg->command;
        cmdc = cfg->n_command;
    }
    /* A terminal on both ends makes an interactive session. */
    bool interactive = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    int status = LZ_EXIT_RUN_LAZARET_FAILED;
    run_request rq = { .cfg = cfg, .argv = cmd, .argc = cmdc, .interactive = interactive };
    for (int tries = 0; tries < 200; tries++) {
        rq.retry_silently = tries < 199;
        if (attempt(&rq, &status) == LZ_ATTEMPT_DONE)
            break;
        if (rq.env_forgotten) {
            /* Not reachable with today's coordinator; never start one
             * without the profile's environment. */
            lz_error_set(&err, 0,
                         "the Session Coordinator asked to retry after the session "
                         "started");
            lz_error_hint(&err, "run the command again");
            lz_error_report(err, stderr);
            lz_error_free(lz_error_take(&err));
            status = LZ_EXIT_RUN_LAZARET_FAILED;
            break;
        }
        struct timespec d = { 0, 50 * 1000 * 1000 };
        nanosleep(&d, NULL);
    }
    lz_resolved_config_free(cfg);
    lz_timing_mark("cli: done");
    lz_timing_flush(stderr, "lazaret: ");
    return status;
}
