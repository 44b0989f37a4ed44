/* SPDX-License-Identifier: Apache-2.0 */
#include "coordinator/session.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/text.h"
#include "common/timing.h"
#include "common/util.h"
#include "coordinator/escalation.h"
#include "coordinator/git_audit.h"
#include "coordinator/log.h"
#include "coordinator/ports.h"
#include "coordinator/record.h"
#include "coordinator/relay.h"
#include "trust/signature.h"

static void reset_slot(session *s, coord *c)
{
    /* Typed input is wiped, but in_pending (64 KiB in each of MAX_SESSIONS
     * slots) only as far as it was ever filled: memset over all of it made
     * every page of the session table dirty, 8 MB of the coordinator that
     * every process it forks then shared (issue 13, item 5; docs/
     * performance.md "Scale"). The table is calloc'd: untouched pages stay
     * unallocated. */
    explicit_bzero(s->in_pending, s->in_pending_hwm);
    const size_t head = offsetof(session, in_pending), tail = head + sizeof(s->in_pending);
    memset(s, 0, head);
    memset((char *) s + tail, 0, sizeof(*s) - tail);
    s->c = c;
    s->sock = -1;
    s->master = -1;
    s->fds[0] = s->fds[1] = s->fds[2] = -1;
    for (size_t i = 0; i < LZ_MSG_MAX_PUBLISH; i++)
        s->pub_fds[i] = -1;
    s->state = S_FREE;
}

void sessions_init(coord *c)
{
    for (size_t i = 0; i < MAX_SESSIONS; i++)
        reset_slot(&c->sessions[i], c);
}

unsigned session_proto_state(const session *s)
{
    switch (s->state) {
    case S_ENROLL:
        return LZ_PS_SESSION_ENROLL;
    case S_HELLO:
        return LZ_PS_SESSION_HELLO;
    case S_RUN:
        return LZ_PS_SESSION_RUN;
    case S_QUEUED:
        return LZ_PS_SESSION_QUEUED;
    case S_RUNNING:
        return s->run.interactive ? LZ_PS_SESSION_RUNNING_TTY : LZ_PS_SESSION_RUNNING_PIPES;
    case S_TLS: /* handshake datagrams are not messages: session_handshake */
    case S_FREE:
    default:
        return 31; /* in no row's states */
    }
}

static void send_signal(coord *c, session *s, int sig);

void session_close(coord *c, session *s)
{
    if (s->state == S_FREE)
        return;
    escalation_session_ended(c, s);
    /* A command must never run on without a slot that watches it. */
    if (s->state == S_RUNNING && !s->exited && !s->killed)
        send_signal(c, s, SIGKILL);
    session_drop_socket(s);
    for (int i = 0; i < 3; i++)
        if (s->fds[i] >= 0)
            close(s->fds[i]);
    publish_close(s);
    relay_close(s);
    lz_tls_channel_free(s->tls); /* this connection's traffic keys */
    s->tls = NULL;
    lz_loop_remove(s->orphan_timer);
    lz_loop_remove(s->drain_timer);
    lz_loop_remove(s->handshake_timer);
    lz_loop_remove(s->close_timer);
    session_queue_free(s);
    lz_msg_run_clear(&s->run);
    if (s->id[0])
        record_session_end(c, s->id, s->state == S_RUNNING ? "ended" : "refused", -1);
    reset_slot(s, c);
    c->n_active--;
    if (c->state != G_TEARDOWN)
        request_status(c);
}

void refuse_and_close(coord *c, session *s, uint32_t code, const char *msg, const char *hint)
{
    session_send_refused(c, s, code, msg, hint);
    session_close(c, s);
}

/* ---- sending: never wait on a client (session_send.c) ------------------ */

static void close_later(lz_loop *loop, lz_loop_source *src, void *data)
{
    (void) loop, (void) src;
    session *s = data;
    s->close_timer = NULL; /* one-shot: the loop drops it */
    session_close(s->c, s);
}

void session_flush(coord *c, session *s)
{
    while (s->q_head && s->sock >= 0) {
        queued_msg *q = s->q_head;
        ssize_t r = send(s->sock, q->data, q->len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (r < 0) {
            session_drop_client(c, s, "its connection failed");
            return;
        }
        s->q_head = q->next;
        if (!s->q_head)
            s->q_tail = NULL;
        s->q_bytes -= q->len;
        explicit_bzero(q->data, q->len);
        free(q);
    }
    if (s->exit_sent && !s->q_head) {
        session_close(c, s); /* EXIT delivered */
        return;
    }
    session_finish_if_done(c, s);
}

/* A normalized relative path (no "", ".", ".." components) or "". */
static bool rel_path_ok(const char *p)
{
    if (!*p)
        return true;
    if (p[0] == '/')
        return false;
    for (const char *q = p;;) {
        const char *sl = strchr(q, '/');
        size_t n = sl ? (size_t) (sl - q) : strlen(q);
        if (n == 0 || (n == 1 && q[0] == '.') || (n == 2 && q[0] == '.' && q[1] == '.'))
            return false;
        if (!sl)
            return true;
        q = sl + 1;
    }
}

void session_exec(coord *c, session *s)
{
    git_audit(c, "session start", false);
    if (c->stop_requested)
        return; /* the Domain is ending (the audit failed closed, say): the teardown refuses it */
    if (s->sock < 0)
        return; /* its client was dropped meanwhile: settled after this round */
    if (c->git.start_report && s->sock >= 0) {
        /* What this generation's start set aside: every session hears it. */
        char *line = lz_xasprintf("Git Sentry: at this Domain's start, set aside what an earlier "
                                  "session had left: %s",
                                  c->git.start_report);
        lz_wbuf b;
        lz_msg_text_encode(&b, LZ_MSG_PROGRESS, line);
        session_send(c, s, &b);
        free(line);
        if (s->sock < 0) { /* dropped: settled after this round */
            return;
        }
    }
    const char *ignored = lz_git_sentry_ignored_notice(&c->git);
    if (ignored) {
        /* Which files are not the host's inside (docs/git.md "Git-ignored
         * files"): before STARTED, so the CLI treats it as a note and prints
         * it only when its stderr is a terminal (src/cli/terminal.c
         * lz_cli_progress()). */
        lz_wbuf b;
        lz_msg_text_encode(&b, LZ_MSG_PROGRESS, ignored);
        session_send(c, s, &b);
        if (s->sock < 0) /* dropped: settled after this round */
            return;
    }
    if (c->git.kind == LZ_GIT_REPO || c->git.kind == LZ_GIT_BARE) {
        /* Git's own refusal inside is bare ("could not lock config file
         * .git/config: File exists": its lock name is held, docs/git.md): say once, on the
         * developer's terminal like the line above, why and what works
         * instead (docs/git.md "Configuring Git in the sandbox", issue 26). */
        lz_wbuf b;
        lz_msg_text_encode(
            &b, LZ_MSG_PROGRESS,
            c->git.kind == LZ_GIT_REPO
                ? "Git Sentry: .git/config is read-only in the sandbox (git config there fails "
                  "with \"could not lock config file\"); use git config --global (kept across "
                  "restarts when persistent_dirs holds the sandbox's home, e.g. /root) or git -c "
                  "NAME=VALUE; see docs/git.md \"Configuring Git in the sandbox\""
                : "Git Sentry: the repository's config is read-only in the sandbox (git config "
                  "there fails with \"could not lock config file\"); use git config --global "
                  "(kept across restarts when persistent_dirs holds the sandbox's home, e.g. "
                  "/root) or git -c NAME=VALUE; see docs/git.md \"Configuring Git in the "
                  "sandbox\"");
        session_send(c, s, &b);
        if (s->sock < 0) /* dropped: settled after this round */
            return;
    }
    char *cwd =
        s->run.cwd[0] ? lz_xasprintf("/workspace/%s", s->run.cwd) : lz_xstrdup("/workspace");
    size_t cap = 3 + s->run.envc + s->run.user_envc;
    char **env = lz_xcalloc(cap, sizeof(char *));
    size_t n = 0;
    if (s->run.term[0])
        env[n++] = lz_xasprintf("TERM=%s", s->run.term);
    else if (s->run.interactive)
        env[n++] = lz_xstrdup("TERM=xterm");
    for (size_t i = 0; i < s->run.envc; i++)
        env[n++] = lz_xstrdup(s->run.env[i]);
    /* run -e, after the locale (it wins) and before the capability, which
     * no -e name can set (lz_msg_user_env_ok). */
    for (size_t i = 0; i < s->run.user_envc; i++)
        env[n++] = lz_xstrdup(s->run.user_env[i]);
    /* This runsc exec's SessionRequestCapability: what binds an escalation
     * request to this session (SR-9). */
    char *cap_env = escalation_session_env(c, s);
    if (cap_env)
        env[n++] = cap_env;
    env[n] = NULL;
    lz_error *err = NULL;
    int slave = -1;
    if (s->run.interactive && relay_open_pty(s, &slave, &err) < 0) {
        log_error(c, "cannot allocate a PTY", err);
        refuse_and_close(c, s, LZ_REFUSE_EXEC_FAILED, err->message,
                         "check /dev/ptmx and the pseudo-terminal limit (kernel.pty.max)");
        lz_error_free(err);
        goto out;
    }
    lz_msg_exec m = { .session_no = s->no,
                      .interactive = s->run.interactive,
                      .cwd = cwd,
                      .argv = s->run.argv,
                      .argc = s->run.argc,
                      .env = env,
                      .envc = n };
    lz_wbuf b;
    lz_msg_exec_encode(&b, &m);
    int stdio[3] = { slave, slave, slave };
    if (publish_send(c, s, &err) < 0 ||
        lz_wire_send(c->sup.sock, &b, s->run.interactive ? stdio : s->fds, 3, &err) < 0) {
        log_error(c, "cannot send a session to the supervisor", err);
        lz_error_free(err);
        refuse_and_close(c, s, LZ_REFUSE_EXEC_FAILED, "the Runtime Supervisor is not responding",
                         NULL);
    } else {
        for (int i = 0; i < 3; i++) {
            if (s->fds[i] >= 0)
                close(s->fds[i]);
            s->fds[i] = -1;
        }
        s->state = S_RUNNING;
        lz_timing_mark("coordinator: session's exec sent");
        clog_timing(c);
        lz_msg_started_encode(&b, s->id);
        session_send(c, s, &b);
        clog_(c, "session %s (#%u) started%s", s->id, s->no,
              s->run.interactive ? " with a terminal" : "");
        request_status(c);
    }
out:
    if (slave >= 0)
        close(slave);
    for (size_t i = 0; i < n; i++) {
        explicit_bzero(env[i], strlen(env[i])); /* run -e values may be secrets */
        free(env[i]);
    }
    free(env);
    free(cwd);
}

static void send_signal(coord *c, session *s, int sig)
{
    lz_wbuf b;
    lz_msg_pair_encode(&b, LZ_SUP_SIGNAL, s->no, (uint32_t) sig);
    if (c->sup_alive)
        lz_wire_post(c->sup.sock, &b);
}

static void orphan_grace_over(lz_loop *loop, lz_loop_source *src, void *data)
{
    (void) loop, (void) src;
    session *s = data;
    s->orphan_timer = NULL; /* one-shot: the loop drops it */
    if (s->state != S_RUNNING || s->killed)
        return;
    send_signal(s->c, s, SIGKILL);
    s->killed = true;
}

void session_orphan(coord *c, session *s)
{
    session_drop_socket(s);
    session_queue_free(s);
    if (s->state == S_RUNNING && s->exited) {
        /* Nobody is left to take the EXIT: the slot ends now. */
        session_finish_if_done(c, s);
        return;
    }
    if (s->state != S_RUNNING || s->orphan_timer || s->killed)
        return;
    s->orphan_timer = lz_loop_add_timer(c->loop, ORPHAN_GRACE_MS, orphan_grace_over, s);
    send_signal(c, s, SIGHUP);
}

static void linger_over(lz_loop *loop, lz_loop_source *src, void *data)
{
    (void) loop, (void) src;
    session *s = data;
    s->close_timer = NULL;
    clog_(s->c,
          "session #%u: its client did not take the command's last output within %d s; "
          "ending the session",
          s->no, EXIT_LINGER_MS / 1000);
    session_orphan(s->c, s); /* no client left: finishes the slot */
}

static void drain_over(lz_loop *loop, lz_loop_source *src, void *data)
{
    (void) loop, (void) src;
    session *s = data;
    s->drain_timer = NULL;
    relay_close(s); /* whatever still holds the slave, the session ends */
    session_finish_if_done(s->c, s);
}

void session_finish_if_done(coord *c, session *s)
{
    /* An empty id: the session's end is recorded already (once only). */
    if (s->state != S_RUNNING || !s->exited || s->master >= 0 || s->exit_sent || !s->id[0])
        return;
    if (s->q_head) {
        /* The command ended with output its client has not taken: it gets
         * EXIT_LINGER_MS to take it, then the slot ends anyway. */
        if (!s->close_timer)
            s->close_timer = lz_loop_add_timer(c->loop, EXIT_LINGER_MS, linger_over, s);
        return;
    }
    /* The session-end audit before EXIT: what it tells the sessions (a
     * quarantine, "Do not run git in ...") must reach this client too, and
     * the CLI reads nothing after EXIT. */
    record_session_end(c, s->id, s->exit_outcome ? "terminated" : "exited", (int) s->exit_code);
    s->id[0] = '\0';
    git_audit(c, "session end", false);
    if (s->sock >= 0) {
        lz_wbuf b;
        lz_msg_pair_encode(&b, LZ_MSG_EXIT, s->exit_outcome, s->exit_code);
        /* A client dropped by this send has no queue: the session ends
         * below, as one whose client is gone. */
        session_send(c, s, &b);
        if (s->q_head) {
            lz_loop_remove(s->close_timer);
            /* The client has not taken it yet: keep the slot a while. */
            s->exit_sent = true;
            s->close_timer = lz_loop_add_timer(c->loop, EXIT_LINGER_MS, close_later, s);
            return;
        }
    }
    /* Even when the Domain is ending (this audit failed closed, say): the
     * client has its EXIT, and a REFUSED from the teardown after it would
     * be wrong. Closing starts nothing once a teardown is asked for. */
    session_close(c, s);
}

static bool settle_pending(const coord *c)
{
    for (size_t i = 0; i < MAX_SESSIONS; i++) {
        const session *s = &c->sessions[i];
        if (s->state != S_FREE && (s->client_lost || s->pty_ended))
            return true;
    }
    return false;
}

void sessions_settle(coord *c)
{
    /* Settling one session can drop the client of another one the pass
     * has already gone by (a quarantine report to every session, a PROMPT
     * that does not fit its queue): the passes repeat until no request is
     * left, or an idle session would wait for an event that never comes.
     * Each pass ends at least one request and a dropped client cannot be
     * dropped again, so this ends. */
    do {
        for (size_t i = 0; i < MAX_SESSIONS; i++) {
            session *s = &c->sessions[i];
            if (s->state == S_FREE)
                continue;
            if (s->client_lost) {
                s->client_lost = false;
                if (s->state == S_RUNNING)
                    session_orphan(c, s);
                else
                    session_close(c, s);
            }
            if (s->state != S_FREE && s->pty_ended) {
                s->pty_ended = false;
                session_finish_if_done(c, s);
            }
        }
    } while (settle_pending(c));
}

void session_command_exited(coord *c, session *s, int status)
{
    /* runsc exec exits with the command's status, 128+N for a signal. */
    uint32_t outcome = LZ_EXIT_OUTCOME_EXITED, code;
    if (WIFEXITED(status)) {
        code = (uint32_t) WEXITSTATUS(status);
    } else {
        outcome = LZ_EXIT_OUTCOME_TERMINATED;
        code = 128 + (uint32_t) WTERMSIG(status);
    }
    clog_(c, "session #%u ended: %s %u", s->no, outcome ? "signal" : "status", code);
    /* Its requests end with it (a prompt denies, a running one is
     * cancelled), and a prompt on its terminal goes, so that the output it
     * held back drains before EXIT (attack round i11b: it was lost). */
    escalation_session_ended(c, s);
    s->exited = true;
    s->exit_outcome = outcome;
    s->exit_code = code;
    /* Output still in the PTY is forwarded for at most DRAIN_MS. */
    if (s->master >= 0 && !s->drain_timer)
        s->drain_timer = lz_loop_add_timer(c->loop, DRAIN_MS, drain_over, s);
    session_finish_if_done(c, s);
}

/* ---- the CLI's messages (protocol/table.h admitted them) --------------- */

static int on_hello(void *ctx, lz_proto_msg *pm)
{
    session *s = ctx;
    coord *c = s->c;
    lz_msg_hello h;
    if (!lz_msg_hello_decode(&pm->r, &h) || h.version != LZ_SESSION_PROTOCOL_VERSION) {
        if (h.domain_id)
            lz_msg_hello_clear(&h);
        clog_(c, "session #%u: protocol error (HELLO)", s->no);
        refuse_and_close(c, s, LZ_REFUSE_PROTOCOL, "protocol error (HELLO)",
                         "use the same Lazaret version for every terminal of a Domain");
        return 0;
    }
    bool same_domain = strcmp(h.domain_id, c->id_hex) == 0;
    bool same_fp = strcmp(h.fingerprint, c->fp_hex) == 0;
    /* The start of the CLI's fingerprint, for the refusal below: shown only
     * when it is hex, as its encoder writes it. */
    char theirs[24] = "another";
    if (strspn(h.fingerprint, "0123456789abcdef") == 64)
        snprintf(theirs, sizeof(theirs), "%.16s…", h.fingerprint);
    lz_msg_hello_clear(&h);
    if (!same_domain) {
        refuse_and_close(c, s, LZ_REFUSE_PROTOCOL, "this coordinator serves another Domain", NULL);
        return 0;
    }
    if (!same_fp) {
        /* Same profile and workspace (the Domain ID), another fingerprint:
         * the configuration file changed since this Domain started (issue
         * 26). The fix is the exact command that stops this Domain, not a
         * process id. */
        _cleanup_free_ char *ws_quoted = lz_text_shell_quote(c->a->cfg->workspace.label);
        char *msg = lz_xasprintf(
            "the configuration changed since this Domain started: profile '%s' for the "
            "workspace %s runs with configuration fingerprint %.16s…, yours is %s (Domain "
            "%.16s…)",
            c->a->cfg->profile, c->a->cfg->workspace.label, c->fp_hex, theirs, c->id_hex);
        char *hint = lz_xasprintf("stop the running Domain (its sessions end) with: lazaret stop "
                                  "--profile %s --workspace %s; then run the command again (or "
                                  "exit its sessions first and it stops by itself)",
                                  c->a->cfg->profile, ws_quoted);
        refuse_and_close(c, s, LZ_REFUSE_MISMATCH, msg, hint);
        free(msg);
        free(hint);
        return 0;
    }
    if (c->state == G_TEARDOWN) {
        refuse_and_close(c, s, LZ_REFUSE_TEARING_DOWN, "the Domain is shutting down", NULL);
        return 0;
    }
    s->state = S_RUN;
    return 0;
}

/* `lazaret stop`: the developer ends the Domain. Every session is told why
 * (teardown's refusal carries c->teardown_why), then the Domain tears down
 * as after its last session; the stopping CLI waits for the lock to go. */
static int on_stop(void *ctx, lz_proto_msg *pm)
{
    session *s = ctx;
    coord *c = s->c;
    char *id = lz_msg_text_decode(&pm->r);
    if (!id)
        return -1;
    bool same = strcmp(id, c->id_hex) == 0;
    free(id);
    if (!same) {
        refuse_and_close(c, s, LZ_REFUSE_PROTOCOL, "this coordinator serves another Domain", NULL);
        return 0;
    }
    clog_(c, "session #%u: 'lazaret stop' (client pid %d): ending the Domain", s->no,
          (int) s->cli_pid);
    c->teardown_why = "the Domain was stopped with 'lazaret stop'";
    c->teardown_hint = "run the command again to start the Domain anew";
    /* The main loop tears down once this round is over: never from inside
     * a session's handler, with the sessions being iterated. */
    request_teardown(c, 0);
    return 0;
}

static int on_run(void *ctx, lz_proto_msg *pm)
{
    session *s = ctx;
    coord *c = s->c;
    if (!lz_msg_run_decode(&pm->r, &s->run))
        return -1;
    /* Interactive: no descriptors; otherwise exactly stdin, stdout, stderr. */
    if (!rel_path_ok(s->run.cwd) || pm->nfds != (s->run.interactive ? 0u : 3u)) {
        lz_msg_run_clear(&s->run);
        return -1;
    }
    for (size_t i = 0; i < 3; i++) {
        s->fds[i] = i < pm->nfds ? pm->fds[i] : -1;
        if (i < pm->nfds)
            pm->fds[i] = -1; /* taken */
    }
    char pmsg[512], phint[256];
    if (publish_bind(s, pmsg, sizeof(pmsg), phint, sizeof(phint)) < 0) {
        clog_(c, "session refused: %s", pmsg);
        refuse_and_close(c, s, LZ_REFUSE_EXEC_FAILED, pmsg, phint);
        return 0;
    }
    lz_timing_mark("coordinator: session's RUN received");
    /* The session id is the one its client certificate names. */
    memcpy(s->id, s->enrolled_id, sizeof(s->id));
    lz_loop_remove(s->handshake_timer);
    s->handshake_timer = NULL;
    record_session_begin(c, s);
    if (c->state == G_RUNNING) {
        session_exec(c, s);
    } else if (c->state == G_FAILED) {
        refuse_and_close(c, s, LZ_REFUSE_START_FAILED, c->failure.message, c->failure.hint);
    } else {
        s->state = S_QUEUED;
    }
    return 0;
}

static int on_input(void *ctx, lz_proto_msg *pm)
{
    session *s = ctx;
    const uint8_t *p;
    size_t n;
    if (!lz_msg_data_decode(&pm->r, &p, &n))
        return -1;
    if (memchr(p, 0x03, n))
        escalation_session_interrupt(s->c, s);
    if (!relay_input(s, p, n))
        return -1;
    return 0;
}

static int on_resize(void *ctx, lz_proto_msg *pm)
{
    session *s = ctx;
    uint32_t rows, cols;
    if (!lz_msg_pair_decode(&pm->r, &rows, &cols) || rows > 65535 || cols > 65535)
        return -1;
    relay_resize(s, rows, cols);
    return 0;
}

/* A signal the non-interactive CLI got (Ctrl-C, kill): for the command, as
 * `docker run` forwards it (docs/runtime.md "Signals"). */
static int on_signal_msg(void *ctx, lz_proto_msg *pm)
{
    session *s = ctx;
    uint32_t sig;
    if (!lz_msg_signal_decode(&pm->r, &sig))
        return -1;
    if (s->exited || s->killed)
        return 0;
    clog_(s->c, "session #%u: its client forwards signal %u", s->no, (unsigned) sig);
    if (sig == SIGINT || sig == SIGTERM)
        escalation_session_interrupt(s->c, s);
    send_signal(s->c, s, (int) sig);
    if (sig == SIGKILL)
        s->killed = true;
    return 0;
}

static int on_close(void *ctx, lz_proto_msg *pm)
{
    session *s = ctx;
    if (!lz_msg_empty_decode(&pm->r))
        return -1;
    clog_(s->c, "session #%u: closed by its client", s->no);
    if (s->state == S_RUNNING)
        session_orphan(s->c, s);
    else
        session_close(s->c, s);
    return 0;
}

/* ENROLL, in the clear: issue this connection's client certificate for the
 * CLI's own key, under a fresh session id, and start TLS. */
static int on_enroll(void *ctx, lz_proto_msg *pm)
{
    session *s = ctx;
    coord *c = s->c;
    uint32_t version;
    uint8_t key[LZ_MSG_ENROLL_KEY_LEN];
    if (!lz_msg_enroll_decode(&pm->r, &version, key))
        return -1;
    if (version != LZ_SESSION_PROTOCOL_VERSION) {
        clog_(c, "session #%u: protocol version %u (ENROLL)", s->no, (unsigned) version);
        refuse_and_close(c, s, LZ_REFUSE_PROTOCOL, "protocol error (ENROLL: another version)",
                         "use the same Lazaret version for every terminal of a Domain");
        return 0;
    }
    if (c->state == G_TEARDOWN) {
        refuse_and_close(c, s, LZ_REFUSE_TEARING_DOWN, "the Domain is shutting down", NULL);
        return 0;
    }
    uint8_t rnd[16];
    if (lz_random_bytes(rnd, sizeof(rnd)) < 0) {
        refuse_and_close(c, s, LZ_REFUSE_EXEC_FAILED, "cannot make a session id", NULL);
        return 0;
    }
    for (int i = 0; i < 16; i++)
        snprintf(s->enrolled_id + 2 * i, 3, "%02x", rnd[i]);
    lz_error *err = NULL;
    uint8_t der[LZ_MSG_MAX_CERT];
    size_t der_len = 0;
    lz_tls_credential *cred = lz_trust_anchor_issue_client_pub(c->trust, s->enrolled_id, key, &err);
    int r = cred ? lz_tls_cert_to_der(cred->cert, der, sizeof(der), &der_len, &err) : -1;
    lz_tls_credential_free(cred);
    if (r == 0) {
        s->tls = lz_tls_channel_new(c->tls_ctx, true, &err);
        r = s->tls ? 0 : -1;
    }
    if (r < 0) {
        log_error(c, "cannot enrol a session", err);
        lz_error_free(err);
        refuse_and_close(c, s, LZ_REFUSE_EXEC_FAILED,
                         "the Session Coordinator cannot issue this session's credential", NULL);
        return 0;
    }
    memcpy(s->enrolled_key, key, sizeof(key));
    lz_wbuf b;
    lz_msg_enrolled_encode(&b, s->enrolled_id, der, der_len);
    session_send(c, s, &b); /* in the clear: S_ENROLL */
    if (s->sock >= 0)
        s->state = S_TLS;
    return 0;
}

const lz_proto_handler_row session_handlers[] = {
    { LZ_MSG_ENROLL, on_enroll },
    { LZ_MSG_HELLO, on_hello },
    { LZ_MSG_STOP, on_stop },
    { LZ_MSG_RUN, on_run },
    { LZ_MSG_INPUT, on_input },
    { LZ_MSG_RESIZE, on_resize },
    { LZ_MSG_CLOSE, on_close },
    { LZ_MSG_SIGNAL, on_signal_msg },
    { LZ_MSG_DECISION, escalation_on_decision },
};
const size_t session_handlers_len = sizeof(session_handlers) / sizeof(session_handlers[0]);

/* End this session's connection for a protocol violation; nothing else. */
static void session_violation(coord *c, session *s, const char *reason)
{
    clog_(c, "session #%u: protocol violation: %s; ending its connection", s->no, reason);
    char *msg = lz_xasprintf("protocol error: %s", reason);
    session_send_refused(c, s, LZ_REFUSE_PROTOCOL, msg,
                         "use the same Lazaret version for every terminal of a Domain");
    free(msg);
    if (s->state == S_RUNNING)
        session_orphan(c, s);
    else
        session_close(c, s);
}

/* A datagram of the TLS handshake (S_TLS). Nothing but TLS records may
 * come now: descriptors end the connection. Once established, the client
 * certificate must be the one issued on this connection at ENROLL (its
 * session id and the key enrolled), not another connection's. */
static void session_handshake(coord *c, session *s)
{
    static uint8_t in[LZ_TLS_DATAGRAM_MAX], out[LZ_TLS_DATAGRAM_MAX];
    int fds[LZ_WIRE_MAX_FDS];
    size_t nfds = 0, out_len = 0;
    lz_error *err = NULL;
    ssize_t n = lz_wire_recv_bytes(s->sock, in, sizeof(in), fds, LZ_WIRE_MAX_FDS, &nfds, &err);
    if (n < 0 && (err->errnum == EAGAIN || err->errnum == EWOULDBLOCK)) {
        lz_error_free(err);
        return;
    }
    for (size_t i = 0; i < nfds; i++)
        close(fds[i]);
    if (n <= 0 || nfds) {
        clog_(c, "session #%u: %s during the TLS handshake; ending its connection", s->no,
              n == 0 ? "client disconnected"
              : nfds ? "descriptors"
                     : err->message);
        lz_error_free(err);
        session_close(c, s);
        return;
    }
    int r = lz_tls_channel_handshake(s->tls, in, (size_t) n, out, &out_len, &err);
    if (out_len) /* a flight, or the alert telling the client why */
        lz_best_effort(lz_wire_try_send_bytes(s->sock, out, out_len, NULL));
    if (r < 0) {
        clog_(c, "session #%u: %s; ending its connection", s->no, err->message);
        lz_error_free(err);
        session_close(c, s);
        return;
    }
    if (r == 0)
        return;
    X509 *peer = lz_tls_channel_peer(s->tls);
    char id[LZ_TRUST_SESSION_ID_LEN + 1];
    if (!lz_tls_cert_subject_id(peer, id) || strcmp(id, s->enrolled_id) != 0 ||
        !lz_tls_cert_has_key(peer, s->enrolled_key)) {
        clog_(c,
              "session #%u: its TLS client certificate is not the one enrolled on this "
              "connection; ending its connection",
              s->no);
        session_close(c, s);
        return;
    }
    s->state = S_HELLO;
}

static void session_message(coord *c, session *s)
{
    static lz_proto_msg m;
    lz_error *err = NULL;
    if (s->state == S_TLS) {
        session_handshake(c, s);
        return;
    }
    unsigned state = session_proto_state(s);
    int r = s->state == S_ENROLL
                ? lz_proto_recv(s->sock, LZ_DIR_CLI_TO_COORDINATOR, state, &m, &err)
                : lz_tls_proto_recv(s->tls, s->sock, LZ_DIR_CLI_TO_COORDINATOR, state, &m, &err);
    if (r < 0 && (err->errnum == EAGAIN || err->errnum == EWOULDBLOCK)) {
        lz_error_free(err); /* a spurious wake-up of the non-blocking socket */
        return;
    }
    if (r < 0 && err->errnum == EPROTO) {
        session_violation(c, s, err->message);
        lz_error_free(err);
        return;
    }
    if (r <= 0) {
        /* The CLI is gone. A running command keeps its slot until the
         * supervisor reports its exit (its stdio pipes are closed now). */
        lz_error_free(err);
        clog_(c, "session #%u: client disconnected", s->no);
        if (s->state == S_RUNNING)
            session_orphan(c, s);
        else
            session_close(c, s);
        return;
    }
    uint16_t type = m.r.type;
    if (lz_proto_dispatch(session_handlers, session_handlers_len, s, &m) < 0) {
        char *why = lz_xasprintf("malformed %s", lz_proto_name(type));
        session_violation(c, s, why);
        free(why);
    }
    lz_proto_msg_clear(&m);
}

static void on_session_sock(lz_loop *loop, lz_loop_source *src, int fd, short revents, void *data)
{
    (void) loop, (void) src, (void) fd;
    session *s = data;
    coord *c = s->c;
    if ((revents & POLLOUT) && s->q_head)
        session_flush(c, s);
    /* The flush may have sent EXIT and audited, and the audit failed
     * closed: nothing of the client's is served any more. */
    if (c->stop_requested)
        return;
    if (s->state != S_FREE && s->sock >= 0 && (revents & (POLLIN | POLLHUP | POLLERR)))
        session_message(c, s);
}

void session_accept(coord *c)
{
    /* Non-blocking: a client that stops reading cannot stall the
     * coordinator (session_send queues, then drops it). */
    int fd = accept4(c->a->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
        return;
    struct ucred cred;
    socklen_t len = sizeof(cred);
    /* SR-10: only the invoking user may talk to the coordinator (the
     * directory is 0700 too; this is the second lock on the door). */
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != getuid()) {
        clog_(c, "refused a connection from uid %d", (int) cred.uid);
        close(fd);
        return;
    }
    if (c->state == G_TEARDOWN) {
        send_refused(fd, LZ_REFUSE_TEARING_DOWN, "the Domain is shutting down", NULL);
        close(fd);
        return;
    }
    if (!session_attach(c, fd, cred.pid)) {
        /* Say who holds the slots: connections that never got as far as a
         * command (attack round i11e: 127 half-done handshakes) look like
         * sessions otherwise. */
        size_t starting = 0;
        for (size_t i = 0; i < MAX_SESSIONS; i++)
            starting += c->sessions[i].state != S_RUNNING && c->sessions[i].state != S_FREE;
        char *msg = lz_xasprintf("too many sessions in this Domain: all %d slots are taken, %zu "
                                 "of them by connections that have not started a command",
                                 MAX_SESSIONS, starting);
        send_refused(fd, LZ_REFUSE_EXEC_FAILED, msg,
                     starting ? "end some sessions, or wait: a connection that does not start "
                                "a command within 30 s loses its slot"
                              : "end some sessions first");
        free(msg);
        close(fd);
    }
}

/* HELLO and RUN did not arrive in time: a slot is not held by a
 * connection that does nothing. */
static void handshake_over(lz_loop *loop, lz_loop_source *src, void *data)
{
    (void) loop, (void) src;
    session *s = data;
    s->handshake_timer = NULL;
    if (s->state != S_ENROLL && s->state != S_TLS && s->state != S_HELLO && s->state != S_RUN)
        return;
    clog_(s->c,
          "session #%u: no ENROLL, TLS handshake, HELLO and RUN within %d s; ending its "
          "connection",
          s->no, HANDSHAKE_TIMEOUT_MS / 1000);
    refuse_and_close(s->c, s, LZ_REFUSE_PROTOCOL, "protocol error: no HELLO and RUN in time",
                     "use the same Lazaret version for every terminal of a Domain");
}

session *session_attach(coord *c, int fd, pid_t cli_pid)
{
    for (size_t i = 0; i < MAX_SESSIONS; i++) {
        session *s = &c->sessions[i];
        if (s->state != S_FREE)
            continue;
        reset_slot(s, c);
        s->state = S_ENROLL;
        s->sock = fd;
        s->sock_src = lz_loop_add_fd(c->loop, fd, POLLIN, on_session_sock, s);
        s->no = ++c->next_no;
        s->cli_pid = cli_pid;
        s->handshake_timer = lz_loop_add_timer(c->loop, HANDSHAKE_TIMEOUT_MS, handshake_over, s);
        c->n_active++;
        c->n_ever++;
        return s;
    }
    return NULL;
}

session *session_by_no(coord *c, uint32_t no)
{
    for (size_t i = 0; i < MAX_SESSIONS; i++)
        if (c->sessions[i].state == S_RUNNING && c->sessions[i].no == no)
            return &c->sessions[i];
    return NULL;
}
