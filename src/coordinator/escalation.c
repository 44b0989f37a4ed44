/* SPDX-License-Identifier: Apache-2.0
 *
 * Host escalation's request state machine: the decision, the prompt's
 * routing, the run and the outcome (escalation.h; docs/escalation.md). The
 * mailbox that brings requests in is escalation_inbox.c's; what a request
 * leaves in the outbox and the records, escalation_outbox.c's; how a host
 * command is started, escalation_host.c's (escalation_internal.h).
 *
 * A request's life: accepted (its outbox directory is created: the client
 * sees it was taken) → decided (Denied at once; a rule; or a prompt in the
 * owning session, queued one visible per terminal) → waiting for a run slot
 * → running (its own session and process group, output streamed as signed
 * chunk files) → ended: exactly one RESULT, one log line, one Domain Store
 * outcome. The structure is kept afterwards only until the client has taken
 * the result (its last ACK, or its silence), so that its outbox directory
 * can go.
 */
#include "coordinator/escalation_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/magic.h>

#include "common/io.h"
#include "common/spawn.h"
#include "common/syscalls.h"
#include "common/text.h"
#include "common/util.h"
#include "coordinator/approval.h"
#include "coordinator/freezer.h"
#include "coordinator/git_audit.h"
#include "coordinator/keeper.h"
#include "coordinator/log.h"
#include "coordinator/prompt.h"
#include "coordinator/relay.h"
#include "coordinator/session_send.h"
#include "fs/confined.h"
#include "fs/executable.h"
#include "fs/remove.h"
#include "protocol/mailbox.h"
#include "trust/signature.h"

static void show_next_prompt(coord *c, session *s);
static void try_run_waiting(coord *c);

static void hex(char *out, const uint8_t *in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", in[i]);
}

/* ---- binding requests to sessions ----------------------------------- */

char *escalation_session_env(coord *c, session *s)
{
    (void) c;
    uint8_t cap[16];
    if (lz_random_bytes(cap, sizeof(cap)) < 0)
        return NULL;
    hex(s->capability, cap, sizeof(cap));
    return lz_xasprintf("%s=%s", LZ_MBX_CAPABILITY_ENV, s->capability);
}

/* ---- the requests' list ------------------------------------------------- */

escalation *esc_find(coord *c, const char *id)
{
    for (escalation *e = c->esc->head; e; e = e->next)
        if (strcmp(e->req.request_id, id) == 0)
            return e;
    return NULL;
}

void esc_free(escalation *e)
{
    esc_state *st = e->c->esc;
    if (e->unbound)
        st->unbound--;
    for (escalation **p = &st->head; *p; p = &(*p)->next)
        if (*p == e) {
            *p = e->next;
            break;
        }
    lz_loop_remove(e->timer);
    lz_loop_remove(e->life);
    lz_loop_remove(e->child_src);
    for (int i = 0; i < 2; i++) {
        lz_loop_remove(e->out_src[i]);
        if (e->out[i] >= 0)
            close(e->out[i]);
    }
    if (e->child.pid > 0)
        lz_child_release(&e->child);
    if (e->has_dir) {
        lz_best_effort(lz_remove_tree_at(st->outbox_fd, e->req.request_id, "outbox", NULL));
    }
    lz_plan_clear(&e->own_plan);
    lz_mbx_request_clear(&e->req);
    free(e->decision);
    free(e);
}

/* ---- ending ------------------------------------------------------------- */

static void on_publish(lz_loop *loop, lz_loop_source *src, void *data)
{
    (void) loop, (void) src;
    coord *c = data;
    c->esc->publish = NULL;
    if (c->state != G_TEARDOWN)
        request_status(c);
}

/* status.json lists pending requests; rewriting it is a file creation and
 * a rename, so a burst of requests rewrites it once per 100 ms, not twice
 * per request. */
void esc_publish(coord *c)
{
    if (c->esc && !c->esc->publish && c->state != G_TEARDOWN)
        c->esc->publish = lz_loop_add_timer(c->loop, 100, on_publish, c);
}

/* End the host command and everything it started: its keeper (below)
 * kills the command's process group and every descendant, then exits. */
static void kill_group(escalation *e)
{
    if (e->child.pid > 0)
        lz_best_effort(syscall(SYS_pidfd_send_signal, e->child.pidfd, SIGTERM, NULL, 0) == 0 ? 0
                                                                                             : -1);
}

/* The request is no prompt any more (decided, or ending): its session's
 * count drops, and a visible prompt leaves its terminal (the output held
 * back meanwhile flows again). */
static void leave_prompt(escalation *e)
{
    session *s = e->s;
    if (s && e->prompt_counted)
        s->esc_prompts--;
    e->prompt_counted = false;
    if (s && e->phase == E_PROMPTING) {
        s->prompt_visible = false;
        relay_update_events(s);
    }
}

void esc_finish(escalation *e, lz_mbx_outcome outcome, int status, const char *message)
{
    coord *c = e->c;
    if (e->phase == E_DONE)
        return;
    bool was_visible = e->phase == E_PROMPTING;
    bool was_running = e->phase == E_RUNNING;
    if (was_running)
        kill_group(e);
    if (e->froze) {
        e->froze = false;
        lz_freezer_release(c->freezer);
        /* No client could speak while the sandbox was frozen: silence
         * counts from now (on_life). */
        for (escalation *x = c->esc->head; x; x = x->next)
            x->last_heard_ms = lz_loop_now_ms();
    }
    session *s = e->s;
    leave_prompt(e);
    if (s && e->open_counted)
        s->esc_open--;
    e->open_counted = false;
    e->phase = E_DONE;
    lz_loop_remove(e->timer);
    e->timer = NULL;
    for (int i = 0; i < 2; i++) {
        lz_loop_remove(e->out_src[i]);
        e->out_src[i] = NULL;
        if (e->out[i] >= 0)
            close(e->out[i]);
        e->out[i] = -1;
    }
    esc_write_result(e, outcome, status, message);
    esc_record_begin(e, NULL);
    lz_error *err = NULL;
    if (lz_store_escalation_end(c->a->store, c->generation, e->req.request_id,
                                esc_outcome_name(outcome), e->decision, status, message,
                                &err) < 0) {
        log_error(c, "cannot record an escalation outcome", err);
        lz_error_free(err);
    }
    char *safe = lz_text_printable(message);
    clog_(c, "escalation %s: %s%s%s (status %d; %s)", e->req.request_id, esc_outcome_name(outcome),
          *safe ? ": " : "", safe, status, e->decision ? e->decision : "not decided");
    free(safe);
    if (s && was_visible && s->state == S_RUNNING) {
        if (s->sock >= 0) {
            lz_wbuf b;
            lz_msg_prompt_encode(&b, LZ_MSG_PROMPT_CLOSED, e->prompt_no, message);
            session_send(c, s, &b);
        }
        show_next_prompt(c, s);
    }
    if (was_running) {
        c->esc->running--;
        try_run_waiting(c);
    }
    esc_publish(c);
}

/* ---- running ------------------------------------------------------------ */

static void on_output(lz_loop *loop, lz_loop_source *src, int fd, short revents, void *data);

void esc_update_flow(escalation *e)
{
    bool full = e->seq - e->acked >= LZ_MBX_MAX_UNACKED;
    for (int i = 0; i < 2; i++)
        if (e->out_src[i])
            lz_loop_set_paused(e->out_src[i], full);
}

static void complete_if_done(escalation *e)
{
    if (e->phase == E_RUNNING && e->main_exited && e->out[0] < 0 && e->out[1] < 0)
        esc_finish(e, LZ_MBX_COMPLETED, e->status, "");
}

static void pipe_closed(escalation *e, int i)
{
    lz_loop_remove(e->out_src[i]);
    e->out_src[i] = NULL;
    close(e->out[i]);
    e->out[i] = -1;
    complete_if_done(e);
}

static void on_output(lz_loop *loop, lz_loop_source *src, int fd, short revents, void *data)
{
    (void) loop, (void) revents;
    escalation *e = data;
    int i = src == e->out_src[0] ? 0 : 1;
    uint8_t buf[LZ_MBX_MAX_CHUNK];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        pipe_closed(e, i);
        return;
    }
    e->out_total += (uint64_t) n;
    if (e->out_total > ESC_OUTPUT_MAX) {
        esc_finish(e, LZ_MBX_FAILED, -1, "the command wrote more than 64 MiB of output: killed");
        return;
    }
    lz_mbx_chunk ch = { .seq = e->seq,
                        .stream = i == 0 ? LZ_MBX_STDOUT : LZ_MBX_STDERR,
                        .data = buf,
                        .len = (size_t) n };
    memcpy(ch.request_id, e->req.request_id, sizeof(ch.request_id));
    lz_wbuf b;
    lz_mbx_chunk_encode(&b, &ch);
    char name[32];
    snprintf(name, sizeof(name), "chunk-%u", e->seq);
    if (esc_outbox_write(e, name, &b) < 0) {
        esc_finish(e, LZ_MBX_FAILED, -1, "cannot write the command's output to the mailbox");
        return;
    }
    e->seq++;
    esc_update_flow(e);
}

static void on_drain_over(lz_loop *loop, lz_loop_source *src, void *data)
{
    (void) loop, (void) src;
    escalation *e = data;
    e->timer = NULL;
    /* Something outside the process group holds the pipes open: the
     * command itself has ended, its output so far is what it gave. */
    for (int i = 0; i < 2; i++)
        if (e->out[i] >= 0)
            pipe_closed(e, i);
}

static void on_child(lz_loop *loop, lz_loop_source *src, int fd, short revents, void *data)
{
    (void) loop, (void) src, (void) fd, (void) revents;
    escalation *e = data;
    /* The keeper ended: it killed the command's group and every
     * descendant before it did, so nothing of the command runs on. */
    lz_error *err = NULL;
    int status = lz_child_wait(&e->child, 0, &err);
    lz_error_free(err);
    lz_loop_remove(e->child_src);
    e->child_src = NULL;
    if (e->phase != E_RUNNING)
        return; /* ended meanwhile (cancelled): reaped now, freed by on_life */
    e->main_exited = true;
    e->status = status < 0 ? 255 : status;
    if (e->out[0] >= 0 || e->out[1] >= 0)
        e->timer = lz_loop_add_timer(e->c->loop, ESC_DRAIN_MS, on_drain_over, e);
    complete_if_done(e);
}

void escalation_session_interrupt(coord *c, session *s)
{
    if (!c->esc)
        return;
    for (escalation *e = c->esc->head; e; e = e->next)
        if (e->s == s && e->froze && e->phase == E_RUNNING)
            esc_finish(e, LZ_MBX_CANCELLED, -1,
                       "cancelled by Ctrl-C in its terminal (the sandbox, and the client with it, "
                       "was paused while host Git ran)");
}

static void esc_run(escalation *e)
{
    coord *c = e->c;
    lz_error *err = NULL;
    if (c->stop_requested)
        return; /* no host command starts once the Domain is ending: Cancelled at teardown */
    /* Its session is ending: escalation_session_ended, in whose pass
     * try_run_waiting got here, cancels this request next. */
    if (e->s && e->s->esc_closing)
        return;
    /* Immediately before running: the executable again, through its plan,
     * rechecked; and the same object the decision was about. */
    const char *where = esc_sandbox_writable(c->a->cfg, e->plan->label);
    if (where) {
        char *msg = lz_xasprintf("%s lies in %s, which the sandbox can change: Lazaret does "
                                 "not run programs from there",
                                 e->plan->label, where);
        esc_finish(e, LZ_MBX_FAILED, -1, msg);
        free(msg);
        return;
    }
    lz_identity now;
    _cleanup_close_ int exe = lz_executable_pin(e->plan, &now, &err);
    if (exe < 0) {
        char *msg = lz_xasprintf("cannot run %s: %s", e->plan->label, err->message);
        lz_error_free(err);
        esc_finish(e, LZ_MBX_FAILED, -1, msg);
        free(msg);
        return;
    }
    if (e->have_approved &&
        (!lz_identity_same_object(&now, &e->approved) || now.size != e->approved.size ||
         now.ctime.tv_sec != e->approved.ctime.tv_sec ||
         now.ctime.tv_nsec != e->approved.ctime.tv_nsec)) {
        char *msg = lz_xasprintf("%s changed after it was approved: nothing ran", e->plan->label);
        esc_finish(e, LZ_MBX_FAILED, -1, msg);
        free(msg);
        return;
    }
    /* The sandbox chooses the moment a host command starts: whatever it
     * changed in the workspace until now is audited first (the Git
     * Sentry's pending events, synchronously), so that an approved host
     * git never reads a configuration the sandbox made before it asked
     * (attack round i11, A1: the inbox's work had been ordered before the
     * Sentry's in one loop round). An audit that cannot neutralise
     * something freezes the sandbox and asks for the teardown, which runs
     * before any other event: nothing is run then. */
    /* And a host Git runs with the sandbox frozen from here until it has
     * ended (coordinator/freezer.h): with the audit current and nothing of
     * the sandbox's running, Git — recursing into submodules, running
     * filters, reading any repository's configuration — can meet nothing
     * the sandbox makes meanwhile (attack round i23: a submodule's gitdir
     * file re-created during a rename storm). Other programs run with the
     * sandbox running, so that their output streams and the client can
     * cancel them; the audit keeps within its lag bound of the sandbox
     * then (docs/escalation.md "What the sandbox can change while a host
     * command runs"). Released in esc_finish, after the process group was
     * killed. */
    if (!e->froze && esc_runs_git(e)) {
        lz_freezer_hold(c->freezer);
        e->froze = true;
    }
    git_audit(c, "a host command starts", false);
    if (c->stop_requested)
        return; /* the Domain is ending (the audit failed closed, say): Cancelled at teardown */
    /* Not from inside a Git directory (attack round i11b, B2: a bare
     * repository the sandbox built in .git/objects/…, its HEAD written just
     * after the audit, was used by an auto-approved host git). */
    if (strstr(e->req.cwd, "/.git/") ||
        (strlen(e->req.cwd) >= 5 && strcmp(e->req.cwd + strlen(e->req.cwd) - 5, "/.git") == 0)) {
        esc_finish(e, LZ_MBX_FAILED, -1,
                   "the working directory lies inside a Git directory: Lazaret does not run host "
                   "commands there");
        return;
    }
    _cleanup_close_ int cwd = esc_open_cwd(c, e->req.cwd, &e->cwd_id, NULL, &err);
    if (cwd < 0) {
        char *msg = lz_xasprintf("%s: nothing ran", err->message);
        lz_error_free(err);
        esc_finish(e, LZ_MBX_FAILED, -1, msg);
        free(msg);
        return;
    }
    int out[2];
    if (esc_host_start(c, e, exe, cwd, out, &err) < 0) {
        char *msg = lz_xasprintf("%s", err->message);
        lz_error_free(err);
        esc_finish(e, LZ_MBX_FAILED, -1, msg);
        free(msg);
        return;
    }
    e->phase = E_RUNNING;
    c->esc->running++;
    e->out[0] = out[0];
    e->out[1] = out[1];
    for (int i = 0; i < 2; i++) {
        fcntl(e->out[i], F_SETFL, O_NONBLOCK);
        e->out_src[i] = lz_loop_add_fd(c->loop, e->out[i], POLLIN, on_output, e);
    }
    e->child_src = lz_loop_add_fd(c->loop, e->child.pidfd, POLLIN, on_child, e);
    if (!e->recorded) {
        esc_record_begin(e, e->decision);
    } else if (lz_store_escalation_decided(c->a->store, c->generation, e->req.request_id,
                                           e->decision, &err) < 0) {
        log_error(c, "cannot record an escalation decision", err);
        lz_error_free(err);
    }
    clog_(c, "escalation %s: running %s (pid %d; %s)", e->req.request_id, e->plan->label,
          (int) e->child.pid, e->decision);
}

static void try_run_waiting(coord *c)
{
    esc_state *st = c->esc;
    for (escalation *e = st->head; e && st->running < ESC_MAX_RUNNING; e = e->next)
        if (e->phase == E_WAIT_RUN)
            esc_run(e);
}

static void approve(escalation *e, const char *decision)
{
    free(e->decision);
    e->decision = lz_xstrdup(decision);
    leave_prompt(e);
    e->phase = E_WAIT_RUN;
    if (e->c->esc->running < ESC_MAX_RUNNING)
        esc_run(e);
}

/* ---- the prompt --------------------------------------------------------- */

static void on_prompt_timeout(lz_loop *loop, lz_loop_source *src, void *data)
{
    (void) loop, (void) src;
    escalation *e = data;
    e->timer = NULL;
    free(e->decision);
    e->decision = lz_xstrdup("nobody decided in time");
    esc_finish(e, LZ_MBX_TIMED_OUT, -1, "nobody answered the prompt in time");
}

static char *prompt_text(escalation *e)
{
    coord *c = e->c;
    const char *ws = c->a->cfg->workspace.label;
    /* The host directory, said: the workspace's own place, or its root
     * for a directory outside it (open_cwd; bound to the decision). */
    char *host_cwd = strncmp(e->req.cwd, "/workspace/", 11) == 0
                         ? lz_xasprintf("%s/%s", ws, e->req.cwd + 11)
                     : strcmp(e->req.cwd, "/workspace") == 0
                         ? lz_xstrdup(ws)
                         : lz_xasprintf("%s (the workspace: %s is not in it)", ws, e->req.cwd);
    lz_prompt_fields f = { .number = e->prompt_no,
                           .profile = c->a->cfg->profile,
                           .session_id = e->session_id,
                           .cwd = e->req.cwd,
                           .argv = e->req.argv,
                           .argc = e->req.argc,
                           .why = e->req.why,
                           .resolved =
                               strcmp(e->plan->label, e->req.argv[0]) != 0 ? e->plan->label : NULL,
                           .host_cwd = host_cwd };
    char *text = lz_prompt_text(&f);
    free(host_cwd);
    return text;
}

static void show_next_prompt(coord *c, session *s)
{
    /* No prompt once the Domain is ending (an audit failed closed): the
     * teardown ends every request. */
    if (s->prompt_visible || s->sock < 0 || s->esc_closing || c->stop_requested)
        return;
    for (escalation *e = c->esc->head; e; e = e->next) {
        if (e->s != s || e->phase != E_PROMPT_QUEUED)
            continue;
        e->prompt_no = ++c->esc->next_prompt_no;
        char *text = prompt_text(e);
        e->phase = E_PROMPTING;
        s->prompt_visible = true;
        relay_update_events(s); /* the session's output waits meanwhile */
        lz_wbuf b;
        lz_msg_prompt_encode(&b, LZ_MSG_PROMPT, e->prompt_no, text);
        free(text);
        clog_(c, "escalation %s: asking the developer in session %s", e->req.request_id, s->id);
        session_send(c, s, &b);
        return;
    }
}

int escalation_on_decision(void *ctx, lz_proto_msg *pm)
{
    session *s = ctx;
    coord *c = s->c;
    uint32_t no, yes;
    if (!lz_msg_pair_decode(&pm->r, &no, &yes) || yes > 1)
        return -1;
    if (!c->esc)
        return 0;
    for (escalation *e = c->esc->head; e; e = e->next) {
        if (e->s != s || e->phase != E_PROMPTING || e->prompt_no != no)
            continue;
        /* Only the prompt this session shows: a late answer to a prompt
         * that timed out or was withdrawn finds nothing. */
        lz_loop_remove(e->timer);
        e->timer = NULL;
        if (yes) {
            char *d = lz_xasprintf("approved by the developer in session %s", s->id);
            approve(e, d);
            free(d);
        } else {
            free(e->decision);
            e->decision = lz_xasprintf("denied by the developer in session %s", s->id);
            leave_prompt(e);
            e->phase = E_NEW; /* answered: no PROMPT_CLOSED for it */
            esc_finish(e, LZ_MBX_DENIED, -1, "the developer denied it");
        }
        show_next_prompt(c, s);
        return 0;
    }
    return 0;
}

/* ---- a new request ------------------------------------------------------ */

void esc_decide(escalation *e)
{
    coord *c = e->c;
    session *s = e->s;
    const lz_resolved_config *cfg = c->a->cfg;
    if (s->esc_open >= ESC_MAX_OPEN_PER_SESSION) {
        esc_finish(e, LZ_MBX_FAILED, -1,
                   "too many requests: this session already has 64 open; wait for them to end");
        return;
    }
    s->esc_open++;
    e->open_counted = true;
    if (!cfg->escalation_enabled) {
        e->decision = lz_xasprintf("escalation is disabled for profile '%s'", cfg->profile);
        esc_finish(e, LZ_MBX_DENIED, -1, e->decision);
        return;
    }
    /* Where it would run, now: the run must be there (esc_open_cwd). */
    lz_error *cerr = NULL;
    int cfd = esc_open_cwd(c, e->req.cwd, NULL, &e->cwd_id, &cerr);
    if (cfd < 0) {
        char *msg = lz_xasprintf("%s: nothing ran", cerr->message);
        lz_error_free(cerr);
        esc_finish(e, LZ_MBX_FAILED, -1, msg);
        free(msg);
        return;
    }
    close(cfd);
    const lz_resolved_rule *rule = lz_rules_match(cfg, e->req.argv, e->req.argc);
    if (rule) {
        e->plan = &rule->executable;
        size_t idx = (size_t) (rule - cfg->rules) + 1;
        char *d = lz_xasprintf("auto-approved by rule %zu (%s)", idx, rule->executable.label);
        approve(e, d);
        free(d);
        return;
    }
    /* The developer decides: about a file pinned now. The prompt names the
     * file the request's path reaches; the run needs that same object. */
    lz_error *err = NULL;
    char *canonical = lz_canonicalize(e->req.argv[0], &err);
    if (!canonical || lz_plan_existing(canonical, &e->own_plan, &err) < 0) {
        char *msg = lz_xasprintf("cannot run %s: %s", e->req.argv[0], err->message);
        lz_error_free(err);
        free(canonical);
        esc_finish(e, LZ_MBX_FAILED, -1, msg);
        free(msg);
        return;
    }
    free(canonical);
    e->plan = &e->own_plan;
    const char *where = esc_sandbox_writable(cfg, e->plan->label);
    if (where) {
        char *msg = lz_xasprintf("%s lies in %s, which the sandbox can change: Lazaret does "
                                 "not run programs from there (install a copy elsewhere, "
                                 "e.g. ~/bin, and ask for that)",
                                 e->plan->label, where);
        esc_finish(e, LZ_MBX_FAILED, -1, msg);
        free(msg);
        return;
    }
    int fd = lz_executable_pin(e->plan, &e->approved, &err);
    if (fd < 0) {
        char *msg = lz_xasprintf("cannot run %s: %s", e->req.argv[0], err->message);
        lz_error_free(err);
        esc_finish(e, LZ_MBX_FAILED, -1, msg);
        free(msg);
        return;
    }
    close(fd);
    e->have_approved = true;
    if (!s->run.interactive || s->sock < 0) {
        e->decision = lz_xstrdup("no terminal to ask the developer in");
        esc_finish(e, LZ_MBX_DENIED, -1,
                   "the session has no terminal to ask the developer in (only an auto_approve "
                   "rule can approve requests of a session without one)");
        return;
    }
    if (s->esc_prompts >= ESC_MAX_PROMPTS_PER_SESSION) {
        esc_finish(e, LZ_MBX_FAILED, -1,
                   "too many requests: this session already has 8 waiting for the developer");
        return;
    }
    char *text = prompt_text(e);
    bool too_long = strlen(text) > LZ_MSG_MAX_PROMPT;
    free(text);
    if (too_long) {
        esc_finish(e, LZ_MBX_FAILED, -1,
                   "the request is too long to be shown in full on a terminal");
        return;
    }
    esc_record_begin(e, NULL);
    s->esc_prompts++;
    e->prompt_counted = true;
    e->phase = E_PROMPT_QUEUED;
    e->timer = lz_loop_add_timer(c->loop, c->esc->prompt_timeout_ms, on_prompt_timeout, e);
    show_next_prompt(c, s);
}

/* ---- sessions and teardown ---------------------------------------------- */

void escalation_session_ended(coord *c, session *s)
{
    if (!c->esc)
        return;
    s->esc_closing = true; /* no further prompt for it */
    for (escalation *e = c->esc->head; e; e = e->next) {
        if (e->s != s)
            continue;
        if (e->phase == E_PROMPT_QUEUED || e->phase == E_PROMPTING) {
            /* Nobody can answer any more: a prompt whose terminal is gone
             * denies (FR-5), as a session without one does. */
            if (!e->decision)
                e->decision = lz_xstrdup("its session's terminal is gone");
            esc_finish(e, LZ_MBX_DENIED, -1, "the session's terminal is gone");
        } else if (e->phase != E_DONE) {
            if (!e->decision)
                e->decision = lz_xstrdup("its session ended");
            esc_finish(e, LZ_MBX_CANCELLED, -1, "its session ended");
        }
        e->s = NULL;
    }
    s->capability[0] = '\0';
    s->esc_open = s->esc_prompts = 0;
}

void escalation_kill_commands(coord *c)
{
    if (!c->esc)
        return;
    for (escalation *e = c->esc->head; e; e = e->next)
        kill_group(e);
}

void escalation_teardown(coord *c)
{
    esc_state *st = c->esc;
    if (!st)
        return;
    for (escalation *e = st->head; e; e = e->next)
        if (e->phase != E_DONE) {
            if (!e->decision)
                e->decision = lz_xstrdup("the Domain stopped");
            esc_finish(e, LZ_MBX_CANCELLED, -1, "the Domain is stopping");
        }
    while (st->head) {
        escalation *e = st->head;
        kill_group(e);
        if (e->child.pid > 0) {
            lz_error *err = NULL;
            lz_best_effort(lz_child_wait(&e->child, 1000, &err));
            lz_error_free(err);
        }
        esc_free(e);
    }
    lz_loop_remove(st->inbox_src);
    lz_loop_remove(st->rescan);
    lz_loop_remove(st->sweep);
    lz_loop_remove(st->publish);
    if (st->inotify_fd >= 0)
        close(st->inotify_fd);
    if (st->inbox_fd >= 0)
        close(st->inbox_fd);
    if (st->outbox_fd >= 0)
        close(st->outbox_fd);
    if (st->junk_fd >= 0)
        close(st->junk_fd);
    for (size_t i = 0; i < st->n_seen; i++)
        free(st->seen[i]);
    free(st->seen);
    free(st->home);
    explicit_bzero(st->coord_seed, sizeof(st->coord_seed));
    free(st);
    c->esc = NULL;
}

json_t *escalation_status(coord *c)
{
    json_t *a = json_array();
    if (!c->esc)
        return a;
    for (escalation *e = c->esc->head; e; e = e->next) {
        if (e->phase == E_DONE)
            continue;
        static const char *const names[] = { "accepted",  "waiting for the developer",
                                             "prompting", "waiting to run",
                                             "running",   "done" };
        json_t *argv = json_array();
        for (size_t i = 0; i < e->req.argc; i++)
            json_array_append_new(argv, json_stringn(e->req.argv[i], strlen(e->req.argv[i])));
        json_array_append_new(a, json_pack("{s:s, s:s, s:o, s:s}", "request_id", e->req.request_id,
                                           "session_id", e->session_id, "argv", argv, "state",
                                           names[e->phase]));
    }
    return a;
}
