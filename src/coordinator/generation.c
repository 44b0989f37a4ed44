/* SPDX-License-Identifier: Apache-2.0 */
#include "coordinator/escalation.h"
#include "coordinator/generation.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/procid.h"
#include "common/timing.h"
#include "common/util.h"
#include "config/policy.h"
#include "coordinator/freezer.h"
#include "coordinator/git_audit.h"
#include "coordinator/log.h"
#include "coordinator/record.h"
#include "coordinator/session.h"
#include "coordinator/status.h"
#include "fs/remove.h"
#include "ns/userns.h"
#include "supervisor/giveback.h"
#include "supervisor/sidecar.h"
#include "trust/publication.h"
#include "trust/signature.h"

/* ---- the generation directory ------------------------------------------ */

static int copy_file(const char *src, int dirfd, const char *name, mode_t mode, lz_error **err)
{
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return lz_error_set(err, errno, "cannot open %s", src);
    struct stat st;
    int out = -1;
    if (fstat(in, &st) == 0)
        out = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    int r = 0;
    if (out < 0) {
        r = lz_error_set(err, errno, "cannot copy %s", src);
    } else {
        off_t left = st.st_size;
        while (left > 0) {
            ssize_t k = sendfile(out, in, NULL, (size_t) left);
            if (k <= 0) {
                r = lz_error_set(err, errno, "cannot copy %s", src);
                break;
            }
            left -= k;
        }
        close(out);
    }
    close(in);
    return r;
}

/* The generation's runtime directory: runsc state, the bundle, and a
 * private copy of the guest binaries that is bind-mounted read-only. */
static int make_generation_dir(coord *c, char **ret_bin, char **ret_lib, lz_error **err)
{
    int rt = c->a->runtime_dir_fd;
    if (lz_store_participant_intent(c->a->store, c->generation, LZ_ROLE_RUNTIME_FILES, c->gen_name,
                                    err) < 0)
        return -1;
    /* A stale directory of the same name (a crashed generation that recovery
     * did not reach): if it cannot go, mkdirat below says so. */
    lz_best_effort(
        lz_remove_tree_mapped(rt, c->gen_name, c->a->cfg->runtime_domain_root.label, NULL));
    if (mkdirat(rt, c->gen_name, 0700) < 0)
        return lz_error_set(err, errno, "cannot create %s", c->gen_label);
    _cleanup_close_ int g = openat(rt, c->gen_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (g < 0)
        return lz_error_set(err, errno, "cannot open %s", c->gen_label);
    if (mkdirat(g, "guest", 0755) < 0 || mkdirat(g, "guest/bin", 0755) < 0 ||
        mkdirat(g, "guest/lib", 0755) < 0)
        return lz_error_set(err, errno, "cannot create %s/guest", c->gen_label);
    _cleanup_close_ int bin = openat(g, "guest/bin", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    _cleanup_close_ int lib = openat(g, "guest/lib", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (bin < 0 || lib < 0)
        return lz_error_set(err, errno, "cannot open %s/guest", c->gen_label);
    if (copy_file(c->a->guest_exec, bin, "lazaret-exec", 0555, err) < 0)
        return -1;
    /* The escalation client, beside lazaret-exec wherever that was found;
     * /run/lazaret/bin is on every session's PATH. */
    _cleanup_free_ char *client = lz_xstrdup(c->a->guest_exec);
    char *slash = strrchr(client, '/');
    _cleanup_free_ char *client_path =
        lz_xasprintf("%.*s/lazaret-escalate", (int) (slash ? slash - client : 0), client);
    if (copy_file(client_path, bin, "lazaret-escalate", 0555, err) < 0)
        return -1;
    if (escalation_prepare(c, g, err) < 0)
        return -1;
    if (c->a->guest_statx_fix &&
        copy_file(c->a->guest_statx_fix, lib, "lazaret-statx-fix.so", 0444, err) < 0)
        return -1;
    if (lz_store_participant_held(c->a->store, c->generation, LZ_ROLE_RUNTIME_FILES, NULL, err) < 0)
        return -1;
    *ret_bin = lz_xasprintf("%s/guest/bin", c->gen_label);
    *ret_lib = c->a->guest_statx_fix ? lz_xasprintf("%s/guest/lib", c->gen_label) : NULL;
    return 0;
}

/* ---- beginning and start ----------------------------------------------- */

/* This generation's nonce and Trust Anchor, the TLS server context of the
 * session channel, and the publication CLIs check the coordinator against
 * (docs/session-channel.md). Nothing of it outlives the generation. */
static int trust_begin(coord *c, lz_error **err)
{
    uint8_t nonce[LZ_TRUST_NONCE_LEN / 2];
    if (lz_random_bytes(nonce, sizeof(nonce)) < 0)
        return lz_error_set(err, errno ? errno : EIO, "cannot make the generation's nonce");
    for (size_t i = 0; i < sizeof(nonce); i++)
        snprintf(c->nonce + 2 * i, 3, "%02x", nonce[i]);
    char gen[24];
    snprintf(gen, sizeof(gen), "%lld", (long long) c->generation);
    lz_generation_identity id = { .agent_profile = c->a->cfg->profile,
                                  .domain_id = c->id_hex,
                                  .generation_id = gen,
                                  .nonce = c->nonce };
    c->trust = lz_trust_anchor_create(&id, err);
    if (!c->trust)
        return lz_error_prefix(err, "cannot create the generation's Trust Anchor");
    c->tls_ctx =
        lz_tls_server_ctx(lz_trust_anchor_ca_cert(c->trust), lz_trust_anchor_server(c->trust), err);
    if (!c->tls_ctx)
        return lz_error_prefix(err, "cannot create the session channel's TLS context");
    return lz_trust_publish(c->trust, c->a->runtime_dir_fd, c->a->cfg->runtime_domain_root.label,
                            err);
}

int generation_begin(coord *c, lz_error **err)
{
    lz_coordinator_args *a = c->a;
    if (lz_store_generation_begin(a->store, c->fp_hex, &c->generation, err) < 0)
        return lz_error_prefix(err, "cannot begin a generation");
    lz_process_identity me;
    if (lz_store_participant_intent(a->store, c->generation, LZ_ROLE_COORDINATOR, NULL, err) < 0 ||
        lz_process_identity_of(getpid(), &me, err) < 0 ||
        lz_store_participant_held(a->store, c->generation, LZ_ROLE_COORDINATOR, &me, err) < 0)
        return lz_error_prefix(err, "cannot record the coordinator");
    snprintf(c->gen_name, sizeof(c->gen_name), "gen-%lld", (long long) c->generation);
    c->gen_label = lz_xasprintf("%s/%s", a->cfg->runtime_domain_root.label, c->gen_name);
    snprintf(c->container_id, sizeof(c->container_id), "lazaret-%.16s-%lld", c->id_hex,
             (long long) c->generation);
    if (trust_begin(c, err) < 0)
        return -1;
    json_t *pol = lz_derived_network_policy(a->cfg, LZ_NET_RESOLVER);
    char *text = json_dumps(pol, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(pol);
    if (text)
        record_network_policy(c, text);
    free(text);
    return 0;
}

void start_failed(coord *c, const char *msg, const char *hint)
{
    c->state = G_FAILED;
    free(c->failure.message);
    free(c->failure.hint);
    c->failure.code = LZ_REFUSE_START_FAILED;
    c->failure.message = lz_xstrdup(msg);
    c->failure.hint = hint && *hint ? lz_xstrdup(hint) : NULL;
    clog_(c, "start failed: %s", msg);
    for (size_t i = 0; i < MAX_SESSIONS; i++) {
        session *s = &c->sessions[i];
        if (s->state == S_QUEUED || s->state == S_RUN || s->state == S_HELLO)
            refuse_and_close(c, s, LZ_REFUSE_START_FAILED, msg, hint);
    }
}

/* The supervisor channel ended (the supervisor died, or broke the
 * protocol and was stopped): every session ends with a Lazaret failure. */
static void supervisor_lost(coord *c, const char *why)
{
    clog_(c, "the Runtime Supervisor is gone: %s", why);
    lz_loop_remove(c->sup_src);
    c->sup_src = NULL;
    c->sup_alive = false;
    if (c->sup.init_pid > 0)
        kill(c->sup.init_pid, SIGKILL); /* no sandbox outlives its channel */
    if (c->state == G_STARTING) {
        _cleanup_free_ char *log = lz_domain_log_label(c->a->cfg);
        _cleanup_free_ char *hint = lz_xasprintf("run 'lazaret doctor'; %s says why", log);
        start_failed(c, "the Runtime Supervisor ended while starting the sandbox", hint);
    }
    for (size_t i = 0; i < MAX_SESSIONS; i++) {
        session *s = &c->sessions[i];
        if (s->state == S_RUNNING)
            session_send_refused(c, s, LZ_REFUSE_EXEC_FAILED,
                                 "the Runtime Supervisor ended unexpectedly; the sandbox is gone",
                                 NULL);
        if (s->state != S_FREE)
            session_close(c, s);
    }
    c->state = c->state == G_TEARDOWN ? G_TEARDOWN : G_FAILED;
}

unsigned generation_proto_state(const coord *c)
{
    switch (c->state) {
    case G_STARTING:
        return LZ_PS_GENERATION_STARTING;
    case G_RUNNING:
        return LZ_PS_GENERATION_RUNNING;
    case G_FAILED:
        return LZ_PS_GENERATION_FAILED;
    case G_TEARDOWN:
        return LZ_PS_GENERATION_TEARDOWN;
    default:
        return 31;
    }
}

/* The escalation inbox's bounded tmpfs (escalation.c), before SUP_STARTED. */
static int on_sup_mailbox(void *ctx, lz_proto_msg *m)
{
    coord *c = ctx;
    if (!lz_msg_empty_decode(&m->r))
        return -1;
    int root = m->fds[0];
    m->fds[0] = -1; /* taken: escalation_attach_inbox closes it */
    lz_error *err = NULL;
    if (escalation_attach_inbox(c, root, &err) < 0) {
        log_error(c, "cannot attach the escalation inbox", err);
        start_failed(c, err->message, err->hint);
        lz_error_free(err);
    }
    return 0;
}

static int on_sup_started(void *ctx, lz_proto_msg *m)
{
    coord *c = ctx;
    bool statx_fix;
    if (!lz_msg_sup_started_decode(&m->r, &statx_fix))
        return -1;
    if (c->state == G_TEARDOWN) {
        /* Late, while stop_supervisor waits: the freezer takes the pidfds
         * (the teardown kills through them); the generation does not
         * become running. */
        lz_error *err = NULL;
        if (lz_freezer_adopt(c->freezer, m->fds, m->nfds, &err) < 0)
            log_error(c, "cannot keep the sandbox's pidfds", err);
        lz_error_free(err);
        m->nfds = 0;
        return 0;
    }
    if (!escalation_inbox_attached(c)) {
        /* Never a sandbox whose inbox nobody reads, or one not bounded. */
        start_failed(c,
                     "the Runtime Supervisor started the sandbox without handing over its "
                     "escalation inbox",
                     "this is a bug of Lazaret: report it with 'lazaret "
                     "version'");
        return 0;
    }
    /* The sandbox process and the gofer, for the freezer: from here the
     * Git Sentry can stop the sandbox when the audit falls behind. */
    lz_error *err = NULL;
    int r = lz_freezer_adopt(c->freezer, m->fds, m->nfds, &err);
    m->nfds = 0; /* the freezer's now, also on failure */
    if (r < 0) {
        log_error(c, "cannot keep the sandbox's pidfds", err);
        lz_error_free(err);
        return -1;
    }
    c->state = G_RUNNING;
    lz_timing_mark("coordinator: sandbox running");
    clog_timing(c);
    record_held(c, LZ_ROLE_SANDBOX, NULL);
    record_state(c, "running");
    clog_(c, "sandbox %s running%s", c->container_id,
          statx_fix ? " (statx AT_NO_AUTOMOUNT shim preloaded: old runsc)" : "");
    request_status(c);
    for (size_t i = 0; i < MAX_SESSIONS && !c->stop_requested; i++)
        if (c->sessions[i].state == S_QUEUED)
            session_exec(c, &c->sessions[i]);
    return 0;
}

static int on_sup_failed(void *ctx, lz_proto_msg *m)
{
    coord *c = ctx;
    lz_msg_refused f;
    if (!lz_msg_refused_decode(&m->r, &f))
        return -1;
    if (c->state == G_STARTING) {
        start_failed(c, f.message, f.hint);
    } else if (c->state == G_RUNNING) {
        /* The sandbox died under the generation: every session ends with
         * this, not with runsc exec's status, and the Domain tears down. */
        clog_(c, "the sandbox is gone: %s", f.message);
        free(c->failure.message);
        free(c->failure.hint);
        c->failure.message = lz_xstrdup(f.message);
        c->failure.hint = f.hint && *f.hint ? lz_xstrdup(f.hint) : NULL;
        c->teardown_why = c->failure.message;
        c->teardown_hint = c->failure.hint;
        request_teardown(c, 0);
    }
    lz_msg_refused_clear(&f);
    return 0;
}

static int on_exec_exited(void *ctx, lz_proto_msg *m)
{
    coord *c = ctx;
    uint32_t no, status;
    if (!lz_msg_pair_decode(&m->r, &no, &status))
        return -1;
    session *s = session_by_no(c, no);
    if (!s) /* a session refused in the meantime has no slot any more */
        return 0;
    if (status == LZ_SUP_EXEC_START_FAILED || status == LZ_SUP_EXEC_RUNSC_FAILED) {
        clog_(c, "session #%u: %s", s->no,
              status == LZ_SUP_EXEC_START_FAILED ? "its command could not be started"
                                                 : "runsc exec ended without its status");
        escalation_session_ended(c, s);
        refuse_and_close(c, s, LZ_REFUSE_EXEC_FAILED,
                         status == LZ_SUP_EXEC_START_FAILED
                             ? "the sandbox could not start the command"
                             : "the sandbox's runtime (runsc exec) ended before it reported "
                               "the command's status",
                         NULL);
        return 0;
    }
    if (status > 0xffff)
        return -1; /* no wait status: a protocol violation */
    session_command_exited(c, s, (int) status);
    return 0;
}

static int on_sup_stopped(void *ctx, lz_proto_msg *m)
{
    coord *c = ctx;
    if (!lz_msg_empty_decode(&m->r))
        return -1;
    c->sup_stopped = true;
    return 0;
}

const lz_proto_handler_row supervisor_event_handlers[] = {
    { LZ_SUP_MAILBOX, on_sup_mailbox }, { LZ_SUP_STARTED, on_sup_started },
    { LZ_SUP_FAILED, on_sup_failed },   { LZ_SUP_EXEC_EXITED, on_exec_exited },
    { LZ_SUP_STOPPED, on_sup_stopped },
};
const size_t supervisor_event_handlers_len =
    sizeof(supervisor_event_handlers) / sizeof(supervisor_event_handlers[0]);

/* One message from the supervisor. Returns false when the channel ended. */
static bool supervisor_message(coord *c)
{
    static lz_proto_msg m;
    lz_error *err = NULL;
    int r = lz_proto_recv(c->sup.sock, LZ_DIR_SUPERVISOR_TO_COORDINATOR, generation_proto_state(c),
                          &m, &err);
    if (r <= 0) {
        char *why = r == 0                  ? lz_xstrdup("its channel closed")
                    : err->errnum == EPROTO ? lz_xasprintf("protocol violation: %s", err->message)
                                            : lz_xstrdup(err->message);
        supervisor_lost(c, why);
        free(why);
        lz_error_free(err);
        return false;
    }
    uint16_t type = m.r.type;
    bool ok =
        lz_proto_dispatch(supervisor_event_handlers, supervisor_event_handlers_len, c, &m) == 0;
    lz_proto_msg_clear(&m);
    if (!ok) {
        char *why = lz_xasprintf("protocol violation: malformed %s", lz_proto_name(type));
        supervisor_lost(c, why);
        free(why);
    }
    return ok;
}

static void on_sup_sock(lz_loop *loop, lz_loop_source *src, int fd, short revents, void *data)
{
    (void) loop, (void) src, (void) fd;
    if (revents & (POLLIN | POLLHUP | POLLERR))
        supervisor_message(data);
}

void generation_attach_supervisor(coord *c)
{
    c->sup_alive = true;
    c->sup_src = lz_loop_add_fd(c->loop, c->sup.sock, POLLIN, on_sup_sock, c);
}

void generation_reap(coord *c)
{
    if (c->sup.outer_pid > 0 && waitpid(c->sup.outer_pid, NULL, WNOHANG) == c->sup.outer_pid) {
        c->sup.outer_pid = 0;
        record_released(c, LZ_ROLE_SUPERVISOR);
    }
}

void generation_start(coord *c)
{
    lz_coordinator_args *a = c->a;
    lz_error *err = NULL;
    char *bin = NULL, *lib = NULL, *log_path = NULL;
    if (make_generation_dir(c, &bin, &lib, &err) < 0) {
        log_error(c, "cannot prepare the generation directory", err);
        start_failed(c, err ? err->message : "cannot prepare the generation directory",
                     err ? err->hint : NULL);
        goto out;
    }
    lz_timing_mark("coordinator: generation directory made");
    log_path = lz_xasprintf("%s/runsc.log", c->gen_label);
    if (lz_git_sentry_plan(a->cfg, &c->git, &err) < 0) {
        log_error(c, "Git Sentry", err);
        start_failed(c, err->message, err->hint);
        goto out;
    }
    if (c->git.start_report)
        clog_(c, "Git Sentry (start): %s", c->git.start_report);
    lz_timing_mark("coordinator: Git Sentry planned");
    lz_supervisor_config sc = {
        .cfg = a->cfg,
        .image = a->image,
        .generation = c->generation,
        .generation_dir = c->gen_label,
        .container_id = c->container_id,
        .runsc = a->runsc,
        .guest_bin_dir = bin,
        .guest_lib_dir = lib,
        .log_path = log_path,
        .workspace_mounts = c->git.mounts,
        .n_workspace_mounts = c->git.n_mounts,
        .denial_logs_fd = c->logs_fd,
    };
    /* Intent first: a supervisor or sandbox the Domain Store does not know
     * of could not be found by recovery, so neither is created then. */
    if (lz_store_participant_intent(a->store, c->generation, LZ_ROLE_SUPERVISOR, NULL, &err) < 0 ||
        lz_store_participant_intent(a->store, c->generation, LZ_ROLE_SANDBOX, c->container_id,
                                    &err) < 0) {
        log_error(c, "cannot record the supervisor and sandbox", err);
        lz_resolved_config_forget_env_values((lz_resolved_config *) a->cfg);
        start_failed(c, err->message,
                     "check the disk holding the Storage Root (space, "
                     "permissions), then run the command again");
        goto out;
    }
    int spawned = lz_supervisor_spawn(&sc, &c->sup, &err);
    /* The supervisor (forked) has its own copy of the resolved env values
     * and is the only process that uses them; this generation never starts
     * another one, so ours are wiped now. */
    lz_resolved_config_forget_env_values((lz_resolved_config *) a->cfg);
    if (spawned < 0) {
        log_error(c, "cannot start the supervisor", err);
        start_failed(c, err->message, err->hint);
        goto out;
    }
    generation_attach_supervisor(c);
    lz_timing_mark("coordinator: supervisor spawned");
    lz_process_identity sid;
    if (lz_process_identity_of(c->sup.init_pid, &sid, NULL) == 0)
        record_held(c, LZ_ROLE_SUPERVISOR, &sid);
    clog_(c, "supervisor pid %d (namespace init %d)", (int) c->sup.outer_pid,
          (int) c->sup.init_pid);
    /* Watches are in place before anything of the sandbox runs: nothing it
     * makes goes unseen. The supervisor meanwhile prepares the network,
     * the spec and `runsc create` (supervisor/lifecycle.c sup_prepare), and starts the
     * sandbox only when told to, below. */
    {
        char *report = NULL;
        int n = lz_git_sentry_watch(&c->git, &report, &err);
        if (n < 0) {
            log_error(c, "Git Sentry", err);
            start_failed(c, err->message, err->hint);
            goto out;
        }
        if (n > 0)
            clog_(c, "Git Sentry (start): %s", report);
        free(report);
    }
    if (git_audit_attach(c) < 0) {
        /* Without the watchdog the audit could be outpaced: fail closed,
         * before the sandbox is started. */
        request_teardown_at_once(c, 1);
        goto out;
    }
    lz_timing_mark("coordinator: Git Sentry watching");
    clog_(c, "Git Sentry: %zu mounts (%zu ignored paths isolated), %zu watched directories",
          c->git.n_mounts, c->git.n_ignored, c->git.n_watches);
    if (c->git.n_trees_unlisted)
        clog_(c,
              "Git Sentry: %zu nested work trees could not be asked for their ignored files "
              "(their Git fails: a stale worktree, a broken submodule)",
              c->git.n_trees_unlisted);
    if (c->git.n_ignored_shared)
        clog_(c,
              "Git Sentry: %zu ignored paths stay the host's: the configuration's hooks "
              "directory or an include file lies in them (protected, audited)",
              c->git.n_ignored_shared);
    clog_timing(c);
    lz_wbuf b;
    lz_msg_empty_encode(&b, LZ_SUP_START);
    if (lz_wire_send(c->sup.sock, &b, NULL, 0, &err) < 0)
        start_failed(c, "cannot talk to the Runtime Supervisor", NULL);
out:
    lz_error_free(err);
    free(bin);
    free(lib);
    free(log_path);
}

/* ---- teardown ---------------------------------------------------------- */

/* Ask the supervisor to stop the sandbox and wait (bounded) for it. */
static void stop_supervisor(coord *c)
{
    lz_wbuf b;
    lz_msg_empty_encode(&b, LZ_SUP_STOP);
    if (lz_wire_send(c->sup.sock, &b, NULL, 0, NULL) < 0)
        return; /* gone already: the kill below ends what is left */
    struct pollfd p = { .fd = c->sup.sock, .events = POLLIN };
    int64_t deadline = lz_loop_now_ms() + STOP_TIMEOUT_MS;
    while (c->sup_alive && !c->sup_stopped) {
        int64_t left = deadline - lz_loop_now_ms();
        if (left <= 0 || poll(&p, 1, (int) left) <= 0)
            break;
        if (!supervisor_message(c))
            break;
    }
}

/* No sandbox process is left: what it left in the workspace and the
 * read-write volumes owned by a subordinate id goes back to the developer
 * (docs/runtime.md "Ownership give-back"). Still under the Domain lock, so
 * no next generation races it. A failure is logged; the teardown goes on. */
static void give_back_ownership(coord *c)
{
    /* Not after a failed audit: what it could not neutralise may lie in a
     * directory closed to the developer, and giving that back would open
     * it to the developer's Git (attack round i23d). The next start names
     * the path; 'lazaret state fix-ownership' gives back once inspected. */
    if (c->sentry_failed || lz_git_sentry_unsafe_recorded(c->a->cfg)) {
        clog_(c, "ownership give-back skipped: the Git Sentry could not neutralise %s",
              c->git.failed_rel ? c->git.failed_rel : "what the sandbox made");
        return;
    }
    int64_t t0 = lz_loop_now_ms();
    char *report = NULL;
    bool incomplete = false;
    lz_error *err = NULL;
    if (lz_giveback_domain(c->a->cfg, &report, &incomplete, &err) < 0) {
        log_error(c, "ownership give-back failed", err);
        lz_error_free(err);
        return;
    }
    clog_(c, "ownership give-back (%lld ms)%s%s%s", (long long) (lz_loop_now_ms() - t0),
          report ? ": " : ": nothing owned by a subordinate id", report ? report : "",
          incomplete ? " - 'lazaret state fix-ownership' says what is left and how to remove it"
                     : "");
    free(report);
}

void teardown_and_exit(coord *c, int status)
{
    /* First: from here on no host command starts and no audit runs
     * outside the teardown's own (the n_active == 0 and loop-failure paths
     * come here without a request). */
    c->stop_requested = true;
    lz_domain_store *st = c->a->store;
    c->state = G_TEARDOWN;
    clog_(c, "teardown of generation %lld", (long long) c->generation);
    /* No host command acts on a workspace the audit may not have made
     * safe while the sandbox is being frozen below. */
    escalation_kill_commands(c);
    /* Nothing of the sandbox's runs from here on (it is killed frozen). */
    git_audit_teardown_freeze(c);
    /* New CLIs must not find us any more: they wait for the lock instead
     * and start the next generation. */
    unlinkat(c->a->runtime_dir_fd, LZ_COORDINATOR_SOCKET, 0);
    lz_trust_unpublish(c->a->runtime_dir_fd);
    unpublish_status(c);
    close(c->a->listen_fd);
    for (size_t i = 0; i < MAX_SESSIONS; i++)
        if (c->sessions[i].state != S_FREE)
            refuse_and_close(c, &c->sessions[i],
                             c->teardown_why ? LZ_REFUSE_STOPPED : LZ_REFUSE_TEARING_DOWN,
                             c->teardown_why ? c->teardown_why : "the Domain is shutting down",
                             c->teardown_hint);
    /* Every request ends Cancelled and its host command's process group is
     * killed before anything else goes (OR-3). */
    escalation_teardown(c);
    /* No session is left to use them: the keys go (the CA's and the
     * server's; each client's went with its session). */
    SSL_CTX_free(c->tls_ctx);
    c->tls_ctx = NULL;
    lz_trust_anchor_destroy(c->trust);
    c->trust = NULL;
    record_state(c, "tearing_down");

    if (c->sup_alive)
        stop_supervisor(c);
    /* The supervisor killed the frozen sandbox first (lifecycle.c sup_stop); only a
     * process it could not reach is left to thaw. */
    git_audit_freeze_stats(c);
    /* Killed before the freezer goes: its free thaws what it holds, and a
     * supervisor that timed out or could not be told may have left the
     * sandbox alive. */
    lz_freezer_kill(c->freezer);
    lz_freezer_free(c->freezer);
    c->freezer = NULL;
    c->git.hold = NULL;
    c->git.hold_ctx = NULL;
    if (c->sup.outer_pid > 0) {
        /* Whatever state it is in, the supervisor's pid namespace ends now:
         * killing its init kills every runsc process in it. */
        kill(c->sup.init_pid, SIGKILL);
        kill(c->sup.outer_pid, SIGKILL);
        waitpid(c->sup.outer_pid, NULL, 0);
        record_released(c, LZ_ROLE_SANDBOX);
        record_released(c, LZ_ROLE_SUPERVISOR);
    }
    if (c->sup.sock >= 0)
        close(c->sup.sock);
    /* The last audit runs when no sandbox process is left to race it. */
    lz_loop_remove(c->git_src);
    git_audit_final(c);
    lz_git_plan_clear(&c->git);
    give_back_ownership(c);
    lz_error *err = NULL;
    /* A keep-id sandbox's runsc state belongs to a subordinate uid: the
     * mapped removal (docs/runtime.md "The agent's user"). */
    if (lz_remove_tree_mapped(c->a->runtime_dir_fd, c->gen_name,
                              c->a->cfg->runtime_domain_root.label, &err) == 0)
        record_released(c, LZ_ROLE_RUNTIME_FILES);
    else
        log_error(c, "cannot remove the generation directory", err);
    lz_error_free(err);
    record_state(c, "ended");
    record_released(c, LZ_ROLE_COORDINATOR);
    clog_(c, "generation %lld ended", (long long) c->generation);
    lz_domain_store_close(st);
    if (c->log)
        fclose(c->log);
    /* Exiting releases the Domain lock. */
    _exit(status);
}
