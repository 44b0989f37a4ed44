/* SPDX-License-Identifier: Apache-2.0
 *
 * The coordinator's entry point: set up, start the generation, and run the
 * event loop until the last session has left. Each concern lives in its own
 * file (domain.h lists them); this one only wires their event sources.
 */
#include "coordinator/coordinator.h"

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "common/nodump.h"
#include "common/timing.h"
#include "common/util.h"
#include "coordinator/domain.h"
#include "coordinator/freezer.h"
#include "coordinator/generation.h"
#include "coordinator/log.h"
#include "coordinator/relay.h"
#include "coordinator/session.h"
#include "coordinator/status.h"

static void on_signal(lz_loop *loop, lz_loop_source *src, int fd, short revents, void *data)
{
    (void) loop, (void) src, (void) revents;
    coord *c = data;
    struct signalfd_siginfo si;
    if (read(fd, &si, sizeof(si)) == sizeof(si) && si.ssi_signo != SIGCHLD) {
        clog_(c, "signal %d: ending the Domain", (int) si.ssi_signo);
        request_teardown_at_once(c, 0);
        return;
    }
    generation_reap(c);
}

static void on_listen(lz_loop *loop, lz_loop_source *src, int fd, short revents, void *data)
{
    (void) loop, (void) src, (void) fd;
    if (revents & POLLIN)
        session_accept(data);
}

static void on_empty_start_over(lz_loop *loop, lz_loop_source *src, void *data)
{
    (void) loop, (void) src;
    coord *c = data;
    c->empty_start_over = true;
}

void lz_coordinator_main(lz_coordinator_args *a)
{
    /* On the heap: every session carries a PTY input buffer. */
    coord *c = lz_xcalloc(1, sizeof(*c));
    c->a = a;
    c->loop = lz_loop_new();
    c->git = (lz_git_plan) LZ_GIT_PLAN_INIT;
    c->freezer = lz_freezer_new();
    c->sup.sock = -1;
    c->logs_fd = -1;
    sessions_init(c);
    prctl(PR_SET_NAME, "lz-coordinator");
    lz_nodump_reassert(); /* inherited already; this process holds the secrets */
    lz_digest_hex(a->cfg->domain_id, c->id_hex);
    lz_digest_hex(a->cfg->fingerprint, c->fp_hex);
    clog_open(c);
    lz_timing_mark("coordinator: log opened");

    /* The Trust Anchor's private keys (generation_begin) live in OpenSSL's
     * secure heap: mlock'd, out of core dumps, zeroed when freed
     * (docs/escalation.md "Key material"). Without one they are still
     * zeroed when freed, so a failure here is noted, not fatal. */
    int secure = CRYPTO_secure_malloc_init(64 * 1024, 32);
    if (secure == 0)
        clog_(c, "no OpenSSL secure heap: the Trust Anchor's keys are in ordinary memory");
    else if (secure == 2)
        clog_(c, "the OpenSSL secure heap could not be locked in memory (RLIMIT_MEMLOCK)");

    lz_error *err = NULL;
    if (generation_begin(c, &err) < 0) {
        log_error(c, "cannot start the coordinator", err);
        _exit(1);
    }
    lz_timing_mark("coordinator: generation recorded");
    publish_status(c);
    clog_(c, "generation %lld of Domain %s (profile %s, workspace %s) starting",
          (long long) c->generation, c->id_hex, a->cfg->profile, a->cfg->workspace.label);
    /* Which image ran, by digest: what a tag named may change upstream. */
    clog_(c, "generation %lld runs image sha256:%s%s", (long long) c->generation,
          a->image->digest_hex,
          a->image->offline ? " (offline: its registry was not reachable; the digest the "
                              "reference last named)"
                            : "");

    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGCHLD);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    lz_loop_add_fd(c->loop, sfd, POLLIN, on_signal, c);
    lz_loop_add_fd(c->loop, a->listen_fd, POLLIN, on_listen, c);

    /* Start the supervisor and ask it for the sandbox; sessions connect and
     * queue meanwhile. */
    generation_start(c);
    /* The empty-start limit counts from here: the synchronous start above
     * (the Git Sentry's plan, say) may take long, and the CLI waiting in
     * the listen queue must still be accepted and told the outcome. */
    lz_loop_add_timer(c->loop, EMPTY_START_TIMEOUT_MS, on_empty_start_over, c);

    /* The requests of the files below (domain.h) run here, between rounds:
     * what they ask of sessions, then a teardown, then status.json. */
    for (;;) {
        /* Even with a teardown asked for: a command that ended this round
         * gets its EXIT before the teardown's REFUSED (the audit and the
         * host commands settling could start are inert by then). */
        sessions_settle(c);
        if (c->stop_requested)
            teardown_and_exit(c, c->stop_status);
        if (c->status_stale) {
            c->status_stale = false;
            publish_status(c);
        }
        if (c->n_active == 0 && (c->n_ever > 0 || c->empty_start_over))
            teardown_and_exit(c, c->state == G_FAILED ? 1 : 0);
        for (size_t i = 0; i < MAX_SESSIONS; i++)
            if (c->sessions[i].state != S_FREE)
                relay_update_events(&c->sessions[i]);
        if (lz_loop_run_once(c->loop, -1) < 0)
            teardown_and_exit(c, 1);
    }
}
