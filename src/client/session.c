/* SPDX-License-Identifier: Apache-2.0
 *
 * The coordinator's messages to a client session, admitted by the protocol
 * table (protocol/table.h) in the session's state and handled here; the
 * prompt's rows are prompt.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/internal.h"
#include "client/screen.h"
#include "common/util.h"
#include "common/io.h"
#include "config/digest.h"
#include "config/resolve.h"
#include "protocol/table.h"

/* Once the session has started, this CLI never bootstraps a coordinator
 * again (a refusal to retry only comes before STARTED), so the resolved env
 * values, which only a coordinator we fork would need, are wiped now rather
 * than held for the session's whole life; so are their copies in our own
 * environment. docs/runtime.md, "Secrets in memory and core dumps". */
static void forget_env_values(lz_client *cl)
{
    if (!cl->cfg || !cl->env_forgotten || *cl->env_forgotten)
        return;
    lz_resolved_config_forget_env_values(cl->cfg);
    lz_resolved_config_scrub_environ(cl->cfg);
    *cl->env_forgotten = true;
}

static int on_progress(void *ctx, lz_proto_msg *m)
{
    lz_client *cl = ctx;
    char *t = lz_msg_text_decode(&m->r);
    if (!t)
        return -1;
    /* After the start, a notice during the session (Git Sentry); never
     * while a prompt is on the terminal (attack round i11, A8). */
    bool raw = cl->ui->raw(cl);
    if (cl->prompting)
        lz_client_hold_notice(cl, t);
    else if (cl->interactive ? raw : cl->started)
        /* On the session's terminal, after ending any string or sequence
         * the sandbox left open (LZ_TERM_STRINGS_END, round a26 F1). */
        lz_print_remote(cl->ui->notices(),
                        raw ? LZ_TERM_STRINGS_END "\r\nlazaret: " : "lazaret: ", t,
                        raw ? "\r\n" : "\n");
    else
        cl->ui->progress(LZ_PROGRESS_NOTE, t, NULL);
    free(t);
    return 0;
}

static int on_enrolled(void *ctx, lz_proto_msg *m)
{
    lz_client *cl = ctx;
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
    lz_client *cl = ctx;
    char *id = lz_msg_started_decode(&m->r);
    if (!id)
        return -1;
    free(id);
    cl->started = true;
    forget_env_values(cl);
    if (cl->interactive) {
        cl->ui->started(cl); /* raw mode; the size may have changed while starting */
        unsigned rows = 0, cols = 0;
        cl->ui->prompt_size(cl, &rows, &cols);
        if (!cl->screen) {
            cl->screen = lz_screen_new(rows ? rows : 24, cols ? cols : 80);
            /* Where the session starts on the screen (screen.h). */
            cl->awaiting_cursor = lz_write_all(cl->ui->output_fd, LZ_SCREEN_ASK_CURSOR,
                                               sizeof(LZ_SCREEN_ASK_CURSOR) - 1) >= 0;
        }
    }
    return 0;
}

static int on_output(void *ctx, lz_proto_msg *m)
{
    lz_client *cl = ctx;
    const uint8_t *d;
    size_t len;
    if (!lz_msg_data_decode(&m->r, &d, &len))
        return -1;
    /* Output while a prompt is up (the coordinator holds it back, but a
     * message already on its way is not recalled) goes to the screen's
     * state only: it appears with the repaint after the prompt. */
    if (!(cl->prompting && cl->screen) && lz_write_all(cl->ui->output_fd, d, len) < 0 &&
        cl->interactive && (errno == EIO || errno == EPIPE || errno == ENXIO))
        cl->terminal_gone = true;
    if (cl->screen)
        lz_screen_queue(cl->screen, d, len); /* emulated by lz_client_screen_work */
    return 0;
}

/* The screen's copy of the output (on_output queues it) is emulated here,
 * a slice at a time between the relay's polls; while more output waits on
 * the socket it is left to pile up, so that lines scrolled off are skipped
 * over all of it (screen.h). Returns whether the emulator is behind. */
bool lz_client_screen_work(lz_client *cl, bool output_waiting)
{
    if (!cl->screen)
        return false;
    if (output_waiting && lz_screen_backlog(cl->screen) < LZ_CLIENT_SCREEN_BATCH)
        return lz_screen_behind(cl->screen);
    return lz_screen_work(cl->screen, LZ_CLIENT_SCREEN_SLICE_NS);
}

static int on_exit_msg(void *ctx, lz_proto_msg *m)
{
    lz_client *cl = ctx;
    uint32_t outcome, code;
    if (!lz_msg_pair_decode(&m->r, &outcome, &code))
        return -1;
    *cl->status = (int) (code & 0xff);
    cl->exited = cl->ended = true;
    lz_client_end_notice(cl, true); /* what the program printed last is shown */
    /* A program that exits restores the terminal itself, or meant not to
     * (as after ssh, nothing is undone); one killed by a signal could not. */
    if (outcome == LZ_EXIT_OUTCOME_TERMINATED)
        lz_client_reset_screen(cl);
    lz_client_drop_screen(cl);
    if (cl->interactive)
        cl->ui->restore(cl);
    return 0;
}

/* A refusal for another configuration fingerprint: which parts of this
 * configuration differ from the running Domain's, as its status.json
 * publishes them (lz_configuration_parts), e.g. "image, volumes"; NULL
 * when that cannot be told (an older coordinator, no status). Newly
 * allocated. */
static char *changed_parts(const lz_resolved_config *cfg)
{
    lz_config_part mine[LZ_CONFIG_PARTS];
    if (!cfg || lz_configuration_parts(cfg, mine, NULL) < 0)
        return NULL;
    _cleanup_close_ int dir =
        lz_plan_open(&cfg->runtime_domain_root, O_PATH | O_DIRECTORY, true, NULL);
    if (dir < 0)
        return NULL;
    _cleanup_close_ int fd = openat(dir, "status.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    json_t *st = fd >= 0 ? json_loadfd(fd, JSON_REJECT_DUPLICATES, NULL) : NULL;
    json_t *theirs = json_object_get(st, "configuration_parts");
    char *list = NULL;
    for (size_t i = 0; json_is_object(theirs) && i < LZ_CONFIG_PARTS; i++) {
        char hex[65];
        lz_digest_hex(mine[i].digest, hex);
        const char *t = json_string_value(json_object_get(theirs, mine[i].name));
        if (t && strcmp(t, hex) == 0)
            continue;
        char *longer = lz_xasprintf("%s%s%s", list ? list : "", list ? ", " : "", mine[i].name);
        free(list);
        list = longer;
    }
    json_decref(st);
    return list;
}

static int on_refused(void *ctx, lz_proto_msg *m)
{
    lz_client *cl = ctx;
    lz_msg_refused r;
    if (!lz_msg_refused_decode(&m->r, &r))
        return -1;
    lz_client_reset_screen(cl);
    cl->ui->restore(cl);
    /* Only a session that has not started joins the next generation: a
     * started one's command is gone with this one, and is told so. */
    if (r.code == LZ_REFUSE_TEARING_DOWN && !cl->started) {
        cl->result = LZ_ATTEMPT_RETRY;
    } else if (r.code == LZ_REFUSE_MISMATCH) {
        /* What changed, when this side can tell (issue 26). */
        _cleanup_free_ char *parts = changed_parts(cl->cfg);
        _cleanup_free_ char *what =
            parts ? lz_xasprintf("; what changed: %s", parts) : lz_xstrdup("");
        lz_print_remote(cl->ui->notices(), "lazaret: error: ", r.message, what);
        lz_print_remote(cl->ui->notices(),
                        "\n  fix: ", r.hint && *r.hint ? r.hint : LZ_ERROR_GENERAL_FIX, "\n");
    } else {
        lz_print_remote(cl->ui->notices(), "lazaret: error: ", r.message, "\n");
        lz_print_remote(cl->ui->notices(),
                        "  fix: ", r.hint && *r.hint ? r.hint : LZ_ERROR_GENERAL_FIX, "\n");
    }
    lz_msg_refused_clear(&r);
    cl->ended = true;
    return 0;
}

void lz_client_reset_screen(lz_client *cl)
{
    if (!cl->screen)
        return;
    lz_screen_buf b = { 0 };
    lz_screen_reset(cl->screen, &b);
    /* The prompt and notices go through stdio: what they buffered first. */
    fflush(cl->ui->prompt_out());
    fflush(cl->ui->notices());
    (void) lz_write_all(cl->ui->output_fd, b.data, b.len); /* a terminal gone needs no reset */
    lz_screen_buf_free(&b);
    lz_client_drop_screen(cl);
}

void lz_client_drop_screen(lz_client *cl)
{
    lz_screen_free(cl->screen);
    cl->screen = NULL;
}

const lz_proto_handler_row lz_client_handlers[] = {
    { LZ_MSG_ENROLLED, on_enrolled },       { LZ_MSG_PROGRESS, on_progress },
    { LZ_MSG_STARTED, on_started },         { LZ_MSG_OUTPUT, on_output },
    { LZ_MSG_EXIT, on_exit_msg },           { LZ_MSG_REFUSED, on_refused },
    { LZ_MSG_PROMPT, lz_client_on_prompt }, { LZ_MSG_PROMPT_CLOSED, lz_client_on_prompt_closed },
};
const size_t lz_client_n_handlers = LZ_ARRAY_SIZE(lz_client_handlers);

/* One message: in the clear only while enrolling; sealed from then on. */
static int client_recv(lz_client *cl, unsigned state, lz_proto_msg *m, lz_error **err)
{
    return cl->enrolling
               ? lz_proto_recv(cl->sock, LZ_DIR_COORDINATOR_TO_CLI, state, m, err)
               : lz_tls_proto_recv(cl->tls, cl->sock, LZ_DIR_COORDINATOR_TO_CLI, state, m, err);
}

void lz_client_receive(lz_client *cl)
{
    static lz_proto_msg m;
    unsigned state = cl->enrolling     ? LZ_PS_CLIENT_ENROLLING
                     : !cl->started    ? LZ_PS_CLIENT_WAITING
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
    bool malformed =
        r > 0 && lz_proto_dispatch(lz_client_handlers, lz_client_n_handlers, cl, &m) < 0;
    if (r > 0)
        explicit_bzero(m.buf, m.len); /* the session's output: RELAY_WIPE (src/cli/relay.c) */
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
    if (!malformed && !cl->heard && !cl->started && cl->retry_silently) {
        cl->result = LZ_ATTEMPT_RETRY;
        lz_error_free(err);
        return;
    }
    bool fresh_line = cl->screen != NULL;
    lz_client_reset_screen(cl);
    cl->ui->restore(cl);
    lz_error *e = NULL;
    if (malformed || (r < 0 && err->errnum == EPROTO)) {
        lz_error_set(&e, 0, "the Session Coordinator sent what this Lazaret does not accept (%s%s)",
                     malformed ? "malformed " : "", malformed ? lz_proto_name(type) : err->message);
        lz_error_hint(&e,
                      "use the same Lazaret version for every terminal of a Domain; %s may "
                      "say more",
                      cl->log_label);
    } else {
        lz_error_set(&e, r < 0 ? err->errnum : 0,
                     "the Session Coordinator ended the session unexpectedly");
        lz_error_hint(&e, "run the command again; %s says why", cl->log_label);
    }
    if (cl->interactive && !fresh_line)
        fputs("\r\n", cl->ui->notices());
    lz_error_report(e, cl->ui->notices());
    lz_error_free(e);
    lz_error_free(err);
}
