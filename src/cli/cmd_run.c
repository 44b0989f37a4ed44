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
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/io.h"
#include "common/timing.h"
#include "common/text.h"
#include "common/util.h"
#include "config/resolve.h"
#include "coordinator/bootstrap.h"
#include "fs/confined.h"
#include "oci/layout.h"
#include "protocol/messages.h"
#include "protocol/table.h"
#include "trust/anchor.h"
#include "trust/channel.h"
#include "trust/publication.h"

const char lz_usage_run[] =
    "Usage: lazaret [--config FILE] run PROFILE [--workspace DIR] [--publish HOSTPORT:PORT]...\n"
    "                                   [-- COMMAND [ARG...]]\n"
    "\n"
    "Launch PROFILE's sandbox for the workspace, or join it when it is already\n"
    "running, and run COMMAND in it (default: the image's login shell). The\n"
    "workspace is the top of the Git working tree you are in (never your home\n"
    "directory), else the current directory; it is /workspace inside, and the\n"
    "command starts in the matching subdirectory when you run lazaret from one.\n"
    "\n"
    "Options:\n"
    "  --workspace DIR  the project directory (default: as above)\n"
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
        return lz_cli_usage_error("run", "--publish: %s (use [127.x.y.z:]HOSTPORT:PORT, e.g. "
                                         "--publish 8080:80)", why);
    if (run_n_publish == LZ_MSG_MAX_PUBLISH)
        return lz_cli_usage_error("run", "--publish: at most %d ports per session",
                                  LZ_MSG_MAX_PUBLISH);
    for (size_t k = 0; k < run_n_publish; k++)
        if (run_publish[k].addr == p.addr && run_publish[k].host_port == p.host_port)
            return lz_cli_usage_error("run", "--publish: host port %u is given twice",
                                      p.host_port);
    run_publish[run_n_publish++] = p;
    return 0;
}

/* ---- the developer's terminal ------------------------------------------- */

static struct termios saved_termios;
static bool termios_saved, termios_raw;

static void terminal_restore(void)
{
    if (termios_raw) {
        tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_termios);
        termios_raw = false;
    }
}

static void terminal_raw(void)
{
    if (!termios_saved) {
        if (tcgetattr(STDIN_FILENO, &saved_termios) < 0)
            return;
        termios_saved = true;
        atexit(terminal_restore);
    }
    struct termios raw = saved_termios;
    cfmakeraw(&raw);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(STDIN_FILENO, TCSADRAIN, &raw) == 0)
        termios_raw = true;
}

/* Text from the coordinator can carry names the sandbox chose (a
 * quarantined path, an ignored file): printed with terminal controls
 * escaped, so no session's terminal can be driven from the sandbox. */
static void print_remote(const char *prefix, const char *text, const char *suffix)
{
    char *safe = lz_text_printable(text);
    fprintf(stderr, "%s%s%s", prefix, safe, suffix);
    free(safe);
}

/* Image preparation's phases reach stderr with or without a terminal (a
 * first start can take minutes, and a CI log should say why); notes only
 * on a terminal, where they do not mix into a script's captured stderr. */
static void progress(lz_progress_kind kind, const char *line, void *userdata)
{
    (void) userdata;
    if (kind == LZ_PROGRESS_PHASE || isatty(STDERR_FILENO))
        print_remote("lazaret: ", line, "\n");
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

typedef enum attempt_result { ATTEMPT_DONE, ATTEMPT_RETRY } attempt_result;

/* Once the session has started, this CLI never bootstraps a coordinator
 * again (a refusal to retry only comes before STARTED), so the resolved env
 * values, which only a coordinator we fork would need, are wiped now rather
 * than held for the session's whole life; so are their copies in our own
 * environment. docs/runtime.md, "Secrets in memory and core dumps". */
static bool env_values_forgotten;
/* False on run's last attempt: then every failure is reported. */
static bool retry_silently = true;

static void session_started(lz_resolved_config *cfg)
{
    if (env_values_forgotten)
        return;
    lz_resolved_config_forget_env_values(cfg);
    lz_resolved_config_scrub_environ(cfg);
    env_values_forgotten = true;
}

/* The session channel's TLS (docs/session-channel.md): set up by
 * secure_session() before HELLO, for this attempt's connection; every
 * message from HELLO on goes through it. One session per process. */
static lz_tls_channel *session_tls;

static void session_post(int sock, const lz_wbuf *b)
{
    lz_tls_proto_post(session_tls, sock, b);
}

static void send_resize(int sock)
{
    struct winsize ws;
    if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0)
        return;
    lz_wbuf b;
    lz_msg_pair_encode(&b, LZ_MSG_RESIZE, ws.ws_row, ws.ws_col);
    session_post(sock, &b);
}

/* RELAY_WIPE: the session's bytes (its output, the developer's input) can
 * hold a secret — a command that prints its environment prints the profile's
 * env values, a password typed or piped in — and this process lives as long
 * as the session. Each relay buffer is wiped (explicit_bzero) as soon as its
 * bytes are forwarded, so after session_started() this CLI holds no copy of
 * a value, not even in its last chunk of output. docs/runtime.md, "Secrets in
 * memory and core dumps". */

/* The coordinator's messages to this session, admitted by the protocol
 * table (protocol/table.h) in the session's state and handled below. */
typedef struct client {
    lz_resolved_config *cfg;
    const char *log_label; /* the Domain's coordinator.log, full path, for messages */
    int sock;
    bool interactive;
    bool started;      /* STARTED arrived */
    bool exited;       /* EXIT arrived: *status holds the command's status */
    bool ended;        /* EXIT or REFUSED arrived, or the connection ended */
    int *status;
    attempt_result result;
    bool heard;        /* some message of the coordinator arrived */
    /* Enrolment (in the clear, before TLS): ENROLLED's session id and
     * client certificate. */
    bool enrolling, enrolled;
    char enrolled_id[33];
    uint8_t cert[LZ_MSG_MAX_CERT];
    size_t cert_len;
    /* An escalation prompt is up (FR-5): the terminal's keystrokes answer
     * it and go nowhere else; the coordinator holds the session's output
     * back meanwhile. */
    bool prompting;
    /* The terminal went away without a SIGHUP reaching us (we are not its
     * session leader nor in its foreground group): a read of 0 or EIO from
     * the raw terminal, or EIO writing to it. */
    bool terminal_gone;
    uint32_t prompt_no;
    char answer[8];
    size_t answer_len;
    struct timespec prompt_shown; /* keys before PROMPT_GRACE_MS after it are not answers */
    bool grace_keys;              /* some were ignored */
    bool withdrawn;               /* the last prompt was withdrawn, not answered */
    uint32_t withdrawn_no;
    /* Notices that arrived while the prompt was up (their text can be the
     * sandbox's choosing: Git Sentry names): shown after it. */
    char *held;
    size_t held_len;
    size_t held_dropped;
} client;

#define HELD_NOTICES_MAX ((size_t) 16384)

/* The sandbox chooses when its prompt appears: possibly just as the
 * developer types "y" and Enter for the agent's own question (attack round
 * i11b, B7: that approved the prompt). Keys that arrive within this long
 * after the prompt was drawn answer nothing. */
#define PROMPT_GRACE_MS 1000

/* A non-interactive command still running this long after a signal was
 * forwarded to it is killed (docs/runtime.md "Signals"). */
#define FORWARD_KILL_AFTER_MS 10000

static int64_t ms_since(const struct timespec *t)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t) (now.tv_sec - t->tv_sec) * 1000 + (now.tv_nsec - t->tv_nsec) / 1000000;
}

static void hold_notice(client *cl, const char *text)
{
    size_t n = strlen(text);
    if (cl->held_len + n + 1 > HELD_NOTICES_MAX) {
        cl->held_dropped++;
        return;
    }
    cl->held = realloc(cl->held, cl->held_len + n + 2);
    if (!cl->held) {
        cl->held_len = 0;
        return;
    }
    memcpy(cl->held + cl->held_len, text, n);
    cl->held[cl->held_len + n] = '\n';
    cl->held_len += n + 1;
    cl->held[cl->held_len] = '\0';
}

/* The prompt is gone: the notices it held back, then normal service. */
static void release_notices(client *cl)
{
    const char *p = cl->held;
    while (p && *p) {
        const char *nl = strchr(p, '\n');
        char *line = lz_xstrndup(p, (size_t) (nl - p));
        print_remote("lazaret: ", line, "\r\n");
        free(line);
        p = nl + 1;
    }
    if (cl->held_dropped)
        fprintf(stderr, "lazaret: %zu more notices arrived during the prompt (see %s)\r\n",
                cl->held_dropped, cl->log_label);
    free(cl->held);
    cl->held = NULL;
    cl->held_len = cl->held_dropped = 0;
}

/* The prompt's text as it goes to the raw terminal: each line escaped
 * once more (lz_text_printable is idempotent, and the coordinator's items
 * are ASCII already), newlines as CR LF, and lines longer than the
 * terminal broken by the CLI itself, every continuation starting with
 * "  | ": the terminal never wraps, so a long argument cannot put text
 * that looks like a label at the start of a line (attack round i11c, C1).
 * Returns the lines it takes; with out NULL only counts them. */
static size_t prompt_lines(const char *text, unsigned cols, FILE *out)
{
    static const char cont[] = "  | ";
    size_t width = cols > sizeof(cont) ? cols - 1 : sizeof(cont), lines = 0;
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t) (nl - p) : strlen(p);
        char *line = lz_xstrndup(p, n);
        char *safe = lz_text_printable(line);
        size_t len = strlen(safe), at = 0;
        do {
            size_t room = at == 0 ? width : width - (sizeof(cont) - 1);
            size_t take = len - at < room ? len - at : room;
            if (out) {
                if (at > 0)
                    fputs(cont, out);
                fwrite(safe + at, 1, take, out);
                fputs("\r\n", out);
            }
            at += take;
            lines++;
        } while (at < len);
        free(safe);
        free(line);
        p += n + (nl ? 1 : 0);
    }
    return lines;
}

/* The prompt's last line: what to type. */
#define PROMPT_QUESTION "Type y and Enter to approve; anything else denies. Approve? [y/N] "
/* What prompt_keys prints for keys typed too early. */
#define PROMPT_GRACE_NOTE \
    "(keys typed as the prompt appeared were ignored; read it, then answer) Approve? [y/N] "
/* Narrower than this, a prompt is not shown (each argument would take
 * most of the screen): denied. */
#define PROMPT_MIN_COLS 40

/* Where the prompt is drawn: the terminal the session's output goes to
 * (an interactive session has a terminal on stdout), whatever stderr is
 * (attack round i11d, D6: with stderr redirected to a file the prompt was
 * never seen, and a y typed for the agent approved it). */
#define PROMPT_OUT stdout

static int on_prompt(void *ctx, lz_proto_msg *m)
{
    client *cl = ctx;
    uint32_t no;
    char *text;
    if (!lz_msg_prompt_decode(&m->r, LZ_MSG_PROMPT, &no, &text))
        return -1;
    /* Input typed before the prompt appeared is not an answer: what the
     * terminal holds unread is discarded. Bytes already read were the
     * program's and went to it. */
    tcflush(STDIN_FILENO, TCIFLUSH);
    struct winsize ws = { 0 };
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) < 0 || ws.ws_row == 0 || ws.ws_col == 0)
        ws = (struct winsize) { .ws_row = 24, .ws_col = 80 };
    /* All of it must be on the screen at once: every line the prompt and
     * whatever it may print below it take at this width, the withdrawal
     * notice, the question and the early-keys note included (C1; D4: a
     * narrow terminal; D5: lines that were not counted scrolled the notice
     * off). What scrolled off cannot be what the developer approves. */
    char *notice = cl->withdrawn
                       ? lz_xasprintf("lazaret: request #%u was withdrawn before you answered. "
                                      "THIS IS A DIFFERENT REQUEST (#%u).\n",
                                      cl->withdrawn_no, no)
                       : lz_xstrdup("");
    size_t need = prompt_lines(text, ws.ws_col, NULL) + prompt_lines(notice, ws.ws_col, NULL) +
                  prompt_lines(PROMPT_QUESTION "\n", ws.ws_col, NULL) +
                  prompt_lines(PROMPT_GRACE_NOTE "\n", ws.ws_col, NULL) + 1;
    if (ws.ws_col < PROMPT_MIN_COLS || need > ws.ws_row) {
        fprintf(PROMPT_OUT, "\r\nlazaret: a host escalation request (#%u) needs %zu lines of at "
                            "least %d columns to be shown whole; this terminal has %u of %u: "
                            "denied. Make the window larger to be asked such requests.\r\n",
                no, need, PROMPT_MIN_COLS, (unsigned) ws.ws_row, (unsigned) ws.ws_col);
        fflush(PROMPT_OUT);
        lz_wbuf b;
        lz_msg_pair_encode(&b, LZ_MSG_DECISION, no, 0);
        session_post(cl->sock, &b);
        free(notice);
        free(text);
        return 0;
    }
    cl->prompting = true;
    cl->prompt_no = no;
    cl->answer_len = 0;
    cl->withdrawn = false;
    /* Whatever state the sandbox's output left the terminal in, the prompt
     * is drawn on a clean, normal screen (attack round i11, A6: a scroll
     * region had hidden the real executable under a fake one): leave the
     * alternate screen, soft reset (DECSTR: margins, origin mode, insert
     * mode, character sets, attributes), explicit resets for terminals
     * without DECSTR (scroll region, G0 ASCII and shift-in, origin mode,
     * autowrap, visible cursor, attributes), then clear the screen and
     * start at its top left: nothing drawn before can pass for a part of
     * the prompt (the scrollback stays the developer's). */
    fputs("\x1b[?1049l\x1b[!p\x1b[r\x1b(B\x0f\x1b[?6l\x1b[?7h\x1b[?25h\x1b[0m"
          "\x1b[H\x1b[2J\x1b[H",
          PROMPT_OUT);
    /* The sandbox can withdraw a request and ask another at once: say so,
     * above the new one (attack round i11c, C2). */
    prompt_lines(notice, ws.ws_col, PROMPT_OUT);
    prompt_lines(text, ws.ws_col, PROMPT_OUT);
    fputs(PROMPT_QUESTION, PROMPT_OUT);
    fflush(PROMPT_OUT);
    free(notice);
    free(text);
    clock_gettime(CLOCK_MONOTONIC, &cl->prompt_shown);
    cl->grace_keys = false;
    return 0;
}

static int on_prompt_closed(void *ctx, lz_proto_msg *m)
{
    client *cl = ctx;
    uint32_t no;
    char *why;
    if (!lz_msg_prompt_decode(&m->r, LZ_MSG_PROMPT_CLOSED, &no, &why))
        return -1;
    if (cl->prompting && no == cl->prompt_no) {
        cl->prompting = false;
        cl->withdrawn = true;
        cl->withdrawn_no = no;
        fputs("\r\n", PROMPT_OUT);
        fflush(PROMPT_OUT);
        print_remote("lazaret: the request was withdrawn: ", why, "\r\n");
        release_notices(cl);
    }
    free(why);
    return 0;
}

/* Keystrokes while the prompt is up: y then Enter approves; Enter after
 * anything else, Ctrl-C or Ctrl-D denies. Only printable ASCII is echoed. */
static void prompt_keys(client *cl, const uint8_t *data, size_t n)
{
    if (ms_since(&cl->prompt_shown) < PROMPT_GRACE_MS) {
        /* Typed before anyone could have read the prompt. */
        if (!cl->grace_keys)
            fputs("\r\n" PROMPT_GRACE_NOTE, PROMPT_OUT);
        fflush(PROMPT_OUT);
        cl->grace_keys = true;
        return;
    }
    for (size_t i = 0; i < n && cl->prompting; i++) {
        uint8_t k = data[i];
        bool decide = k == '\r' || k == '\n' || k == 3 || k == 4;
        if (!decide) {
            if ((k == 0x7f || k == 8) && cl->answer_len > 0) {
                cl->answer_len--;
                fputs("\b \b", PROMPT_OUT);
            } else if (k >= 0x20 && k < 0x7f && cl->answer_len < sizeof(cl->answer) - 1) {
                cl->answer[cl->answer_len++] = (char) k;
                fputc(k, PROMPT_OUT);
            }
            fflush(PROMPT_OUT);
            continue;
        }
        cl->answer[cl->answer_len] = '\0';
        bool approve = (k == '\r' || k == '\n') &&
                       (strcmp(cl->answer, "y") == 0 || strcmp(cl->answer, "Y") == 0 ||
                        strcmp(cl->answer, "yes") == 0);
        lz_wbuf b;
        lz_msg_pair_encode(&b, LZ_MSG_DECISION, cl->prompt_no, approve ? 1 : 0);
        session_post(cl->sock, &b);
        fputs(approve ? "\r\nlazaret: approved\r\n" : "\r\nlazaret: denied\r\n", PROMPT_OUT);
        fflush(PROMPT_OUT);
        cl->prompting = false;
        cl->answer_len = 0;
        release_notices(cl);
    }
}

static int on_progress(void *ctx, lz_proto_msg *m)
{
    client *cl = ctx;
    char *t = lz_msg_text_decode(&m->r);
    if (!t)
        return -1;
    /* After the start, a notice during the session (Git Sentry); never
     * while a prompt is on the terminal (attack round i11, A8). */
    if (cl->prompting)
        hold_notice(cl, t);
    else if (cl->interactive ? termios_raw : cl->started)
        print_remote(termios_raw ? "\r\nlazaret: " : "lazaret: ", t, termios_raw ? "\r\n" : "\n");
    else
        progress(LZ_PROGRESS_NOTE, t, NULL);
    free(t);
    return 0;
}

static int on_enrolled(void *ctx, lz_proto_msg *m)
{
    client *cl = ctx;
    const uint8_t *der;
    size_t len;
    if (!lz_msg_enrolled_decode(&m->r, cl->enrolled_id, &der, &len))
        return -1;
    memcpy(cl->cert, der, len);
    cl->cert_len = len;
    cl->enrolled = true;
    return 0;
}

static int on_started(void *ctx, lz_proto_msg *m)
{
    client *cl = ctx;
    char *id = lz_msg_started_decode(&m->r);
    if (!id)
        return -1;
    free(id);
    cl->started = true;
    session_started(cl->cfg);
    if (cl->interactive) {
        terminal_raw();
        send_resize(cl->sock); /* the size may have changed while starting */
    }
    return 0;
}

static int on_output(void *ctx, lz_proto_msg *m)
{
    client *cl = ctx;
    const uint8_t *d;
    size_t len;
    if (!lz_msg_data_decode(&m->r, &d, &len))
        return -1;
    if (lz_write_all(STDOUT_FILENO, d, len) < 0 && cl->interactive &&
        (errno == EIO || errno == EPIPE || errno == ENXIO))
        cl->terminal_gone = true;
    return 0;
}

static int on_exit_msg(void *ctx, lz_proto_msg *m)
{
    client *cl = ctx;
    uint32_t outcome, code;
    if (!lz_msg_pair_decode(&m->r, &outcome, &code))
        return -1;
    *cl->status = (int) (code & 0xff);
    cl->exited = cl->ended = true;
    if (cl->interactive)
        terminal_restore();
    return 0;
}

static int on_refused(void *ctx, lz_proto_msg *m)
{
    client *cl = ctx;
    lz_msg_refused r;
    if (!lz_msg_refused_decode(&m->r, &r))
        return -1;
    terminal_restore();
    /* Only a session that has not started joins the next generation: a
     * started one's command is gone with this one, and is told so. */
    if (r.code == LZ_REFUSE_TEARING_DOWN && !cl->started) {
        cl->result = ATTEMPT_RETRY;
    } else {
        print_remote("lazaret: error: ", r.message, "\n");
        print_remote("  fix: ", r.hint && *r.hint ? r.hint : LZ_ERROR_GENERAL_FIX, "\n");
    }
    lz_msg_refused_clear(&r);
    cl->ended = true;
    return 0;
}

static const lz_proto_handler_row client_handlers[] = {
    { LZ_MSG_ENROLLED, on_enrolled }, { LZ_MSG_PROGRESS, on_progress },
    { LZ_MSG_STARTED, on_started },
    { LZ_MSG_OUTPUT, on_output },     { LZ_MSG_EXIT, on_exit_msg },
    { LZ_MSG_REFUSED, on_refused },   { LZ_MSG_PROMPT, on_prompt },
    { LZ_MSG_PROMPT_CLOSED, on_prompt_closed },
};

/* One message: in the clear only while enrolling; sealed from then on. */
static int client_recv(client *cl, unsigned state, lz_proto_msg *m, lz_error **err)
{
    return cl->enrolling
               ? lz_proto_recv(cl->sock, LZ_DIR_COORDINATOR_TO_CLI, state, m, err)
               : lz_tls_proto_recv(session_tls, cl->sock, LZ_DIR_COORDINATOR_TO_CLI, state, m,
                                   err);
}

/* The socket is readable: receive and handle one message. Sets cl->ended
 * when the session is over for this connection (with a message on stderr
 * when that was not an EXIT or a REFUSED). */
static void client_receive(client *cl)
{
    static lz_proto_msg m;
    unsigned state = cl->enrolling  ? LZ_PS_CLIENT_ENROLLING
                     : !cl->started   ? LZ_PS_CLIENT_WAITING
                     : cl->interactive ? LZ_PS_CLIENT_RUNNING_TTY
                                       : LZ_PS_CLIENT_RUNNING_PIPES;
    lz_error *err = NULL;
    int r = client_recv(cl, state, &m, &err);
    /* ECONNRESET: the coordinator closed with our RUN unread; its REFUSED
     * is still queued. */
    if (r < 0 && err->errnum == ECONNRESET) {
        lz_error_free(lz_error_take(&err));
        r = client_recv(cl, state, &m, &err);
    }
    /* A datagram without a message (an empty TLS record): nothing happened. */
    if (r < 0 && err->errnum == EAGAIN) {
        lz_error_free(err);
        return;
    }
    uint16_t type = r > 0 ? m.r.type : 0;
    bool malformed = r > 0 &&
                     lz_proto_dispatch(client_handlers, LZ_ARRAY_SIZE(client_handlers), cl, &m) < 0;
    if (r > 0)
        explicit_bzero(m.buf, m.len); /* the session's output: RELAY_WIPE */
    if (r > 0 && !malformed) {
        cl->heard = true;
        lz_proto_msg_clear(&m);
        return;
    }
    lz_proto_msg_clear(&m);
    cl->ended = true;
    /* The connection ended before the coordinator said anything: it was
     * tearing down and closed its listening socket with this connection
     * still in the queue. Like a TEARING_DOWN refusal: wait and join the
     * next generation (bounded by run's attempts). */
    if (!malformed && !cl->heard && !cl->started && retry_silently) {
        cl->result = ATTEMPT_RETRY;
        lz_error_free(err);
        return;
    }
    terminal_restore();
    lz_error *e = NULL;
    if (malformed || (r < 0 && err->errnum == EPROTO)) {
        lz_error_set(&e, 0, "the Session Coordinator sent what this Lazaret does not accept (%s%s)",
                     malformed ? "malformed " : "", malformed ? lz_proto_name(type) : err->message);
        lz_error_hint(&e, "use the same Lazaret version for every terminal of a Domain; %s may "
                          "say more", cl->log_label);
    } else {
        lz_error_set(&e, r < 0 ? err->errnum : 0,
                     "the Session Coordinator ended the session unexpectedly");
        lz_error_hint(&e, "run the command again; %s says why", cl->log_label);
    }
    if (cl->interactive)
        fputs("\r\n", stderr);
    lz_error_report(e, stderr);
    lz_error_free(e);
    lz_error_free(err);
}

/* Interactive relay: raw terminal <-> INPUT/OUTPUT messages. */
static attempt_result relay_interactive(lz_resolved_config *cfg, int sock, int *status)
{
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGWINCH);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGQUIT);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    bool stdin_open = true;
    *status = LZ_EXIT_RUN_LAZARET_FAILED;
    _cleanup_free_ char *log_label = lz_domain_log_label(cfg);
    client cl = { .cfg = cfg, .log_label = log_label, .sock = sock, .interactive = true,
                  .status = status, .result = ATTEMPT_DONE };

    for (;;) {
        struct pollfd p[3] = {
            { .fd = sock, .events = POLLIN },
            { .fd = cl.started && stdin_open ? STDIN_FILENO : -1, .events = POLLIN },
            { .fd = sfd, .events = POLLIN },
        };
        if (poll(p, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[2].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
                if (si.ssi_signo == SIGWINCH) {
                    if (cl.started)
                        send_resize(sock);
                } else {
                    /* The terminal went away or we were asked to stop: end
                     * the session; the coordinator hangs up the command. */
                    lz_wbuf b;
                    lz_msg_empty_encode(&b, LZ_MSG_CLOSE);
                    session_post(sock, &b);
                    terminal_restore();
                    *status = 128 + (int) si.ssi_signo;
                    break;
                }
            }
        }
        if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            uint8_t data[LZ_MSG_MAX_DATA];
            ssize_t n = read(STDIN_FILENO, data, sizeof(data));
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
                /* nothing yet */
            } else if (n <= 0) {
                /* In raw mode ^D is a byte: 0 or an error is a hang-up. */
                stdin_open = false;
                cl.terminal_gone = true;
            } else if (cl.prompting) {
                prompt_keys(&cl, data, (size_t) n);
                explicit_bzero(data, (size_t) n);
            } else {
                lz_wbuf b;
                lz_msg_data_encode(&b, LZ_MSG_INPUT, data, (size_t) n);
                session_post(sock, &b);
                /* Keystrokes (a password typed into the session): RELAY_WIPE. */
                explicit_bzero(b.data, b.len);
                explicit_bzero(data, (size_t) n);
            }
        }
        if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && (client_receive(&cl), cl.ended))
            break;
        if (cl.terminal_gone) {
            /* As for SIGHUP: end the session, the coordinator hangs up
             * the command (docs/runtime.md "A command whose terminal went
             * away"). */
            lz_wbuf b;
            lz_msg_empty_encode(&b, LZ_MSG_CLOSE);
            session_post(sock, &b);
            *status = 128 + SIGHUP;
            break;
        }
    }
    terminal_restore();
    free(cl.held);
    if (sfd >= 0)
        close(sfd);
    sigprocmask(SIG_UNBLOCK, &mask, NULL);
    return cl.result;
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

/* The enrolment and the TLS handshake of the session channel
 * (docs/session-channel.md). In the clear: ENROLL with a fresh Ed25519 key
 * of this CLI's own (its private half never leaves this process), and
 * ENROLLED with the session id and the certificate the coordinator issued
 * for it. The coordinator is trusted only through the CA of the Domain's
 * publication (LZ_TRUST_PUBLICATION_FILE, in the 0700 runtime directory):
 * the certificate issued must be that CA's, and so must the server
 * certificate of the handshake (lz_tls_client_ctx). Returns 0 with
 * session_tls set, or -1 with *result (a refusal or failure was reported,
 * or a silent retry) and *status. */
static int secure_channel(int sock, const char *domain_hex, int dirfd, const char *dir_label,
                          const char *log_label, attempt_result *result, int *status)
{
    *status = LZ_EXIT_RUN_LAZARET_FAILED;
    *result = ATTEMPT_DONE;
    lz_error *err = NULL;
    client cl = { .sock = sock, .status = status, .result = ATTEMPT_DONE, .enrolling = true,
                  .log_label = log_label };
    EVP_PKEY *key = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    uint8_t pub[LZ_MSG_ENROLL_KEY_LEN];
    size_t pub_len = sizeof(pub);
    lz_trust_publication publ = { 0 };
    lz_tls_credential *cred = NULL;
    SSL_CTX *ctx = NULL;
    int r = -1;
    if (!key || EVP_PKEY_get_raw_public_key(key, pub, &pub_len) != 1 || pub_len != sizeof(pub)) {
        lz_tls_error(&err, NULL, "cannot make this session's Ed25519 key");
        goto fail;
    }
    lz_wbuf b;
    lz_msg_enroll_encode(&b, LZ_SESSION_PROTOCOL_VERSION, pub);
    if (lz_wire_send(sock, &b, NULL, 0, &err) < 0) {
        /* The coordinator closed at once (tearing down): like a refusal to
         * retry, decided by what it left to read. */
        lz_error_free(lz_error_take(&err));
    }
    while (!cl.enrolled && !cl.ended)
        client_receive(&cl);
    if (!cl.enrolled) {
        *result = cl.result;
        goto out; /* reported by client_receive, or a silent retry */
    }
    if (lz_trust_publication_read(dirfd, dir_label, &publ, &err) < 0)
        goto fail;
    if (strcmp(publ.domain_id, domain_hex) != 0 ||
        publ.protocol_version != LZ_SESSION_PROTOCOL_VERSION) {
        lz_error_set(&err, EPROTO, "the Trust Anchor publication in %s is for another Domain or "
                                   "protocol version",
                     dir_label);
        lz_error_hint(&err, "use the same Lazaret version for every terminal of a Domain");
        goto fail;
    }
    cred = lz_tls_client_credential(publ.ca, cl.enrolled_id, key, cl.cert, cl.cert_len, &err);
    if (!cred || !(ctx = lz_tls_client_ctx(publ.ca, cred, &err)) ||
        !(session_tls = lz_tls_channel_new(ctx, false, &err)))
        goto fail;
    static uint8_t in[LZ_TLS_DATAGRAM_MAX], out[LZ_TLS_DATAGRAM_MAX];
    size_t in_len = 0, out_len = 0;
    for (;;) {
        int h = lz_tls_channel_handshake(session_tls, in_len ? in : NULL, in_len, out, &out_len,
                                         &err);
        if (out_len && lz_wire_send_bytes(sock, out, out_len, NULL, 0, h < 0 ? NULL : &err) < 0)
            goto fail;
        if (h < 0)
            goto fail;
        if (h == 1)
            break;
        int fds[LZ_WIRE_MAX_FDS];
        size_t nfds = 0;
        ssize_t n = lz_wire_recv_bytes(sock, in, sizeof(in), fds, LZ_WIRE_MAX_FDS, &nfds, &err);
        for (size_t i = 0; i < nfds; i++)
            close(fds[i]);
        if (n < 0)
            goto fail;
        if (n == 0 && retry_silently) {
            /* Closed right after ENROLLED without a word: the generation
             * began its teardown meanwhile (it refuses nothing it cannot
             * seal). Like a refusal to retry: join the next one. */
            *result = ATTEMPT_RETRY;
            lz_tls_channel_free(session_tls);
            session_tls = NULL;
            goto out;
        }
        if (n == 0 || nfds) {
            lz_error_set(&err, EPROTO, "the Session Coordinator %s during the TLS handshake",
                         n == 0 ? "closed the connection" : "sent descriptors");
            goto fail;
        }
        in_len = (size_t) n;
    }
    r = 0;
    goto out;
fail:
    lz_error_prefix(&err, "cannot secure the session channel to the Domain's coordinator");
    if (err && !err->hint)
        lz_error_hint(&err, "run the command again; %s may say more", log_label);
    lz_error_report(err, stderr);
    lz_error_free(err);
    lz_tls_channel_free(session_tls);
    session_tls = NULL;
out:
    explicit_bzero(cl.cert, sizeof(cl.cert));
    SSL_CTX_free(ctx);
    lz_tls_credential_free(cred);
    EVP_PKEY_free(key);
    lz_trust_publication_clear(&publ);
    return r;
}

int lz_cli_secure_channel(int sock, const char *domain_hex, int dirfd, const char *dir_label,
                          const char *log_label, lz_tls_channel **ret_tls, bool *ret_ending)
{
    attempt_result res = ATTEMPT_DONE;
    int status;
    int r = secure_channel(sock, domain_hex, dirfd, dir_label, log_label, &res, &status);
    *ret_ending = r < 0 && res == ATTEMPT_RETRY;
    *ret_tls = r < 0 ? NULL : session_tls;
    session_tls = NULL;
    return r;
}

static int secure_session(lz_resolved_config *cfg, int sock, attempt_result *result, int *status)
{
    lz_error *err = NULL;
    _cleanup_close_ int dirfd = lz_plan_open(&cfg->runtime_domain_root, O_PATH | O_DIRECTORY,
                                             true, &err);
    if (dirfd < 0) {
        lz_error_report(err, stderr);
        lz_error_free(err);
        *status = LZ_EXIT_RUN_LAZARET_FAILED;
        *result = ATTEMPT_DONE;
        return -1;
    }
    char id[65];
    lz_digest_hex(cfg->domain_id, id);
    _cleanup_free_ char *log = lz_domain_log_label(cfg);
    return secure_channel(sock, id, dirfd, cfg->runtime_domain_root.label, log, result, status);
}

static attempt_result attempt_session(lz_resolved_config *cfg, int sock, char **argv,
                                      size_t argc, bool interactive, int *status);

/* One connection: ENROLL and TLS, HELLO, RUN, relay, EXIT. *status gets
 * the exit status. */
static attempt_result attempt(lz_resolved_config *cfg, char **argv, size_t argc,
                              bool interactive, int *status)
{
    lz_error *err = NULL;
    int sock = lz_domain_connect(cfg, progress, NULL, &err);
    if (sock < 0) {
        lz_error_report(err, stderr);
        lz_error_free(err);
        *status = LZ_EXIT_RUN_LAZARET_FAILED;
        return ATTEMPT_DONE;
    }
    lz_timing_mark("cli: connected");
    attempt_result secured;
    if (secure_session(cfg, sock, &secured, status) < 0) {
        close(sock);
        return secured;
    }
    lz_timing_mark("cli: channel secured");
    attempt_result r = attempt_session(cfg, sock, argv, argc, interactive, status);
    lz_tls_channel_free(session_tls);
    session_tls = NULL;
    return r;
}

/* attempt()'s session, over the secured channel. */
static attempt_result attempt_session(lz_resolved_config *cfg, int sock, char **argv,
                                      size_t argc, bool interactive, int *status)
{
    lz_error *err = NULL;
    char id[65], fp[65];
    lz_digest_hex(cfg->domain_id, id);
    lz_digest_hex(cfg->fingerprint, fp);
    _cleanup_free_ char *cwd = relative_cwd(cfg->workspace.label);
    const char *term = getenv("TERM");
    if (interactive) {
        lz_wbuf b;
        lz_msg_hello h = { LZ_SESSION_PROTOCOL_VERSION, id, fp };
        lz_msg_hello_encode(&b, &h);
        struct winsize ws = { .ws_row = 24, .ws_col = 80 };
        ioctl(STDIN_FILENO, TIOCGWINSZ, &ws);
        size_t envc = 0;
        _cleanup_free_ char **env = locale_env(&envc);
        lz_msg_run run = { .interactive = true, .rows = ws.ws_row, .cols = ws.ws_col,
                           .term = (char *) (term ? term : ""), .cwd = cwd, .argv = argv,
                           .argc = argc, .env = env, .envc = envc };
        run_publish_into(&run);
        attempt_result r = ATTEMPT_DONE;
        if (lz_tls_proto_send(session_tls, sock, &b, NULL, 0, &err) == 0) {
            lz_msg_run_encode(&b, &run);
            lz_best_effort(lz_tls_proto_send(session_tls, sock, &b, NULL, 0, &err));
        }
        lz_error_free(lz_error_take(&err)); /* a refusal explains itself */
        r = relay_interactive(cfg, sock, status);
        close(sock);
        return r;
    }
    int in[2], out[2], errp[2];
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
        lz_error_set(&err, errno, "cannot create the pipes for the session's stdio");
        lz_error_hint(&err, "the process or system descriptor limit may be reached (ulimit -n)");
        lz_error_report(err, stderr);
        lz_error_free(err);
        close(sock);
        *status = LZ_EXIT_RUN_LAZARET_FAILED;
        return ATTEMPT_DONE;
    }
    lz_wbuf b;
    lz_msg_hello h = { LZ_SESSION_PROTOCOL_VERSION, id, fp };
    lz_msg_hello_encode(&b, &h);
    int sent = lz_tls_proto_send(session_tls, sock, &b, NULL, 0, &err);
    size_t envc = 0;
    _cleanup_free_ char **env = locale_env(&envc);
    lz_msg_run run = { .interactive = false, .term = (char *) (term ? term : ""), .cwd = cwd,
                       .argv = argv, .argc = argc, .env = env, .envc = envc };
    run_publish_into(&run);
    lz_msg_run_encode(&b, &run);
    int fds[3] = { in[0], out[1], errp[1] };
    if (sent == 0)
        sent = lz_tls_proto_send(session_tls, sock, &b, fds, 3, &err);
    close(in[0]);
    close(out[1]);
    close(errp[1]);
    lz_error_free(lz_error_take(&err)); /* a refusal explains itself below */

    int in_w = in[1];
    fcntl(in_w, F_SETFL, O_NONBLOCK);
    /* Signals to this CLI are the command's, as with `docker run`
     * (docs/runtime.md "Signals"): forwarded; a second SIGINT, or the
     * command still running FORWARD_KILL_AFTER_MS after a forwarded
     * signal, kills it. */
    sigset_t sigs, old_sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGHUP);
    sigaddset(&sigs, SIGQUIT);
    sigprocmask(SIG_BLOCK, &sigs, &old_sigs);
    int sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
    bool forwarded_int = false;
    struct timespec kill_at = { 0, 0 };
    bool stdin_open = true, out_open = true, err_open = true;
    char pending[65536];
    size_t pending_len = 0;
    struct timespec exit_at = { 0, 0 };
    *status = LZ_EXIT_RUN_LAZARET_FAILED;
    _cleanup_free_ char *log_label = lz_domain_log_label(cfg);
    client cl = { .cfg = cfg, .log_label = log_label, .sock = sock, .interactive = false,
                  .status = status, .result = ATTEMPT_DONE };

    for (;;) {
        if (cl.exited && !out_open && !err_open)
            break;
        if (cl.ended && !cl.exited)
            break;
        struct pollfd p[6];
        int np = 0;
        int i_stdin = -1, i_inw = -1, i_out = -1, i_err = -1, i_sock = -1, i_sig = -1;
        if (sfd >= 0) {
            i_sig = np;
            p[np++] = (struct pollfd) { .fd = sfd, .events = POLLIN };
        }
        if (stdin_open && pending_len == 0 && cl.started) {
            i_stdin = np;
            p[np++] = (struct pollfd) { .fd = STDIN_FILENO, .events = POLLIN };
        }
        if (in_w >= 0 && pending_len > 0) {
            i_inw = np;
            p[np++] = (struct pollfd) { .fd = in_w, .events = POLLOUT };
        }
        if (out_open) {
            i_out = np;
            p[np++] = (struct pollfd) { .fd = out[0], .events = POLLIN };
        }
        if (err_open) {
            i_err = np;
            p[np++] = (struct pollfd) { .fd = errp[0], .events = POLLIN };
        }
        if (!cl.ended) {
            i_sock = np;
            p[np++] = (struct pollfd) { .fd = sock, .events = POLLIN };
        }
        /* After EXIT, drain what the command wrote; a background process
         * that keeps the pipes open does not keep us waiting for long. */
        int timeout = -1;
        if (cl.exited) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            int64_t ms = (now.tv_sec - exit_at.tv_sec) * 1000 +
                         (now.tv_nsec - exit_at.tv_nsec) / 1000000;
            if (ms >= 500)
                break;
            timeout = (int) (500 - ms);
        } else if (kill_at.tv_sec) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            int64_t ms = (kill_at.tv_sec - now.tv_sec) * 1000 +
                         (kill_at.tv_nsec - now.tv_nsec) / 1000000;
            if (ms <= 0) {
                lz_msg_signal_encode(&b, SIGKILL);
                session_post(sock, &b);
                kill_at = (struct timespec) { 0, 0 };
                continue;
            }
            timeout = (int) ms;
        }
        int r = poll(p, (nfds_t) np, timeout);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (r == 0)
            continue;
        if (i_sig >= 0 && (p[i_sig].revents & POLLIN)) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
                int sig = (int) si.ssi_signo;
                if (!cl.started) {
                    /* No command yet: the session ends, as before. */
                    lz_msg_empty_encode(&b, LZ_MSG_CLOSE);
                    session_post(sock, &b);
                    *status = 128 + sig;
                    break;
                }
                if (!cl.exited) {
                    int fwd = sig == SIGINT && forwarded_int ? SIGKILL : sig;
                    forwarded_int = forwarded_int || sig == SIGINT;
                    lz_msg_signal_encode(&b, (uint32_t) fwd);
                    session_post(sock, &b);
                    if (fwd == SIGKILL) {
                        kill_at = (struct timespec) { 0, 0 };
                    } else if (!kill_at.tv_sec) {
                        clock_gettime(CLOCK_MONOTONIC, &kill_at);
                        kill_at.tv_sec += FORWARD_KILL_AFTER_MS / 1000;
                    }
                }
            }
        }
        if (i_stdin >= 0 && (p[i_stdin].revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t n = read(STDIN_FILENO, pending, sizeof(pending));
            if (n <= 0) {
                stdin_open = false;
                close(in_w);
                in_w = -1;
            } else {
                pending_len = (size_t) n;
            }
        }
        if (i_inw >= 0 && (p[i_inw].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t w = write(in_w, pending, pending_len);
            if (w < 0 && errno != EAGAIN && errno != EINTR) {
                /* The command stopped reading its stdin. */
                explicit_bzero(pending, pending_len);
                pending_len = 0;
                stdin_open = false;
                close(in_w);
                in_w = -1;
            } else if (w > 0) {
                memmove(pending, pending + w, pending_len - (size_t) w);
                pending_len -= (size_t) w;
                explicit_bzero(pending + pending_len, (size_t) w); /* the tail memmove left */
            }
        }
        for (int k = 0; k < 2; k++) {
            int idx = k == 0 ? i_out : i_err;
            if (idx < 0 || !(p[idx].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char data[65536];
            ssize_t n = read(p[idx].fd, data, sizeof(data));
            if (n <= 0) {
                if (k == 0)
                    out_open = false;
                else
                    err_open = false;
            } else {
                lz_write_all(k == 0 ? STDOUT_FILENO : STDERR_FILENO, data, (size_t) n);
                explicit_bzero(data, (size_t) n); /* session bytes: see RELAY_WIPE */
            }
        }
        if (i_sock >= 0 && (p[i_sock].revents & (POLLIN | POLLHUP | POLLERR))) {
            bool was_exited = cl.exited;
            client_receive(&cl);
            if (!was_exited && cl.exited)
                clock_gettime(CLOCK_MONOTONIC, &exit_at);
        }
    }
    explicit_bzero(pending, pending_len); /* stdin the command never read */
    if (sfd >= 0) {
        /* What arrived after the command ended is dropped, not turned into
         * this CLI's death by the unblocking below. */
        struct signalfd_siginfo si;
        while (read(sfd, &si, sizeof(si)) == sizeof(si))
            ;
        close(sfd);
    }
    sigprocmask(SIG_SETMASK, &old_sigs, NULL);
    if (in_w >= 0)
        close(in_w);
    close(out[0]);
    close(errp[0]);
    close(sock);
    return cl.result;
}

int lz_cmd_run(int argc, char **argv, const lz_global_options *g)
{
    const char *profile = NULL, *workspace = NULL;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        } else if (strcmp(a, "--workspace") == 0) {
            if (i + 1 >= argc)
                return lz_cli_usage_error("run", "option --workspace needs a DIR");
            workspace = argv[++i];
        } else if (strncmp(a, "--workspace=", 12) == 0) {
            workspace = a + 12;
        } else if (strcmp(a, "--publish") == 0 || strncmp(a, "--publish=", 10) == 0) {
            if (!a[9] && i + 1 >= argc)
                return lz_cli_usage_error("run", "option --publish needs HOSTPORT:PORT");
            int r = run_publish_add(a[9] ? a + 10 : argv[++i]);
            if (r != 0)
                return r;
        } else if (a[0] == '-' && a[1] != '\0') {
            return lz_cli_usage_error("run", "unknown option '%s'", a);
        } else if (!profile) {
            profile = a;
        } else {
            return lz_cli_usage_error("run", "unexpected argument '%s' (put the command after "
                                             "'--')", a);
        }
    }
    if (!profile)
        return lz_cli_usage_error("run", "missing PROFILE");
    if (workspace && !*workspace)
        return lz_cli_usage_error("run", "option --workspace needs a non-empty DIR");
    char **cmd = argv + i;
    size_t cmdc = (size_t) (argc - i);
    if (cmdc > LZ_MSG_MAX_ARGS)
        return lz_cli_usage_error("run", "too many arguments (at most %d)", LZ_MSG_MAX_ARGS);
    /* The session protocol's bounds (protocol/messages.h), said here with
     * the argument that passes them rather than as the coordinator's
     * "malformed RUN". */
    size_t total = 0;
    for (size_t k = 0; k < cmdc; k++) {
        size_t len = strlen(cmd[k]);
        if (len > LZ_MSG_MAX_STR)
            return lz_cli_usage_error("run", "argument %zu of the command is %zu bytes long; "
                                             "at most %d bytes are passed to the sandbox (put "
                                             "longer input into a file in the workspace)",
                                      k + 1, len, LZ_MSG_MAX_STR);
        total += 4 + len;
    }
    if (total > LZ_WIRE_MAX - 2 * LZ_MSG_MAX_STR)
        return lz_cli_usage_error("run", "the command's arguments are %zu bytes together; at "
                                         "most about %d bytes are passed to the sandbox (put "
                                         "longer input into a file in the workspace)",
                                  total, LZ_WIRE_MAX - 2 * LZ_MSG_MAX_STR);

    signal(SIGPIPE, SIG_IGN);
    lz_error *err = NULL;
    lz_resolved_config *cfg = lz_cli_load_profile(g, profile, workspace);
    if (!cfg)
        return LZ_EXIT_RUN_LAZARET_FAILED;
    lz_timing_mark("cli: configuration loaded");
    /* A terminal on both ends makes an interactive session. */
    bool interactive = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    int status = LZ_EXIT_RUN_LAZARET_FAILED;
    for (int tries = 0; tries < 200; tries++) {
        retry_silently = tries < 199;
        if (attempt(cfg, cmd, cmdc, interactive, &status) == ATTEMPT_DONE)
            break;
        if (env_values_forgotten) {
            /* Not reachable with today's coordinator; never start one
             * without the profile's environment. */
            lz_error_set(&err, 0, "the Session Coordinator asked to retry after the session "
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
