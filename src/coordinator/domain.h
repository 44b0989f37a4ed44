/* SPDX-License-Identifier: Apache-2.0
 *
 * The coordinator's state of one running Domain generation, shared by the
 * files of src/coordinator/ (internal: nothing outside this directory
 * includes it). Who changes what:
 *
 *   coordinator.c  startup and the event loop (lz_coordinator_main); the
 *                  only caller of teardown_and_exit and publish_status
 *   generation.c   the generation: its directory, the Runtime Supervisor
 *                  and its messages, start failure, teardown
 *   status.c       status.json
 *   session.c      sessions: accept, the per-session state machine, the
 *                  CLI messages' handlers (protocol/table.h), and
 *                  sessions_settle (what lower files asked of a session)
 *   ports.c        a session's published ports (--publish)
 *   escalation_inbox.c   the mailbox: preparing it, reading the inbox,
 *                  the records' handlers, the clients' heartbeats
 *   escalation.c   host escalation: the request state machine (decision,
 *                  prompt, run, outcome)
 *   escalation_outbox.c  results and output chunks in the outbox, the
 *                  requests' log lines and Domain Store rows
 *   escalation_host.c    starting a host command: where it may run from,
 *                  its environment, its keeper
 *   keeper.c       the process every escalated host command runs under
 *   git_audit.c    the glue between events and the Git Sentry
 *                  (src/gitsentry/ does the auditing)
 *   relay.c        the PTY relay of interactive sessions
 *   session_send.c sending to a session's client without ever waiting
 *
 * Who calls whom (docs/coordinator.md "Layers"): a file calls only files
 * listed below it here. Below them all: record.c (the Domain Store's
 * rows), log.c (the Domain's logs/coordinator.log), freezer.c, prompt.c,
 * approval.c. Above them all: bootstrap.c, the CLI's way to start a
 * coordinator. What a lower file needs done above it -- end a session,
 * tear down the generation, publish status.json -- it asks for with the
 * request functions below, and the main loop runs the request once the
 * calling callback has returned.
 *
 * Single-threaded: every function runs from the event loop's callbacks
 * (the freezer's watchdog thread touches nothing here: freezer.h).
 */
#ifndef LAZARET_COORDINATOR_DOMAIN_H
#define LAZARET_COORDINATOR_DOMAIN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "common/loop.h"
#include "coordinator/coordinator.h"
#include "gitsentry/git_sentry.h"
#include "protocol/messages.h"
#include "supervisor/supervisor.h"
#include "trust/anchor.h"
#include "trust/channel.h"

#define MAX_SESSIONS 128
/* A generation nobody joins (its bootstrapping CLI died) ends after this. */
#define EMPTY_START_TIMEOUT_MS 30000
#define STOP_TIMEOUT_MS 30000
/* A command whose client left gets SIGHUP (as a closed terminal would
 * send), then SIGKILL after this long. */
#define ORPHAN_GRACE_MS 3000
/* After an interactive command ends, output still in the PTY is forwarded
 * for at most this long (a background process may keep the slave open). */
#define DRAIN_MS 1000
/* What a session's client may leave unread before it is dropped: the
 * coordinator never waits on one client (docs/coordinator.md, "Sending"). */
#define SESSION_QUEUE_MAX_BYTES ((size_t) 1 << 20)
/* A connection must have sent HELLO and RUN within this long. */
#define HANDSHAKE_TIMEOUT_MS 15000
/* How long an EXIT the client has not taken yet keeps the slot. */
#define EXIT_LINGER_MS 5000

typedef enum session_state {
    S_FREE = 0,
    S_ENROLL,  /* connected, in the clear; ENROLL expected */
    S_TLS,     /* ENROLLED sent; the TLS handshake runs (trust/channel.h) */
    S_HELLO,   /* TLS established; HELLO expected */
    S_RUN,     /* HELLO accepted; RUN expected */
    S_QUEUED,  /* RUN received; waiting for the sandbox */
    S_RUNNING, /* command running */
} session_state;

typedef struct coord coord;

/* A message a session's client could not take yet (its socket is full). */
typedef struct queued_msg {
    struct queued_msg *next;
    size_t len;
    uint8_t data[];
} queued_msg;

typedef struct session {
    coord *c;
    session_state state;
    int sock; /* -1 once the CLI is gone */
    lz_loop_source *sock_src;
    uint32_t no;
    char id[33]; /* set at RUN (the enrolled id); cleared once recorded ended */
    pid_t cli_pid;
    /* The session channel's TLS (docs/session-channel.md): the session id
     * and the CLI's public key enrolled on this connection, which the
     * client certificate of the handshake must name and hold. */
    char enrolled_id[33];
    uint8_t enrolled_key[32];
    lz_tls_channel *tls;
    lz_msg_run run;
    int fds[3];
    /* --publish: the listening sockets, bound on RUN (so a host port in use
     * refuses the session at once), handed to the supervisor with the
     * session's SUP_EXEC (docs/network.md "Publishing a port"). */
    int pub_fds[LZ_MSG_MAX_PUBLISH];
    lz_loop_source *orphan_timer; /* SIGKILL when the grace after SIGHUP ends */
    bool killed;                  /* SIGKILL already requested */
    /* Interactive sessions: the coordinator owns the PTY master; the slave
     * is the guest side of the session's runsc exec. */
    int master; /* -1 when none or drained */
    lz_loop_source *master_src;
    queued_msg *q_head, *q_tail; /* messages waiting for the client, in order */
    size_t q_bytes;
    bool backlog_told;               /* the log said once that this client fell behind */
    lz_loop_source *handshake_timer; /* until RUN is accepted */
    lz_loop_source *close_timer;     /* ends the slot when its EXIT_LINGER_MS are over */
    bool exit_sent;                  /* EXIT queued: close once it is sent (or on linger) */
    char in_pending[LZ_MSG_MAX_DATA];
    size_t in_pending_len; /* typed bytes the PTY could not take yet */
    size_t in_pending_hwm; /* how far in_pending was ever filled (reset_slot) */
    bool exited;           /* the command ended; EXIT follows the drain */
    uint32_t exit_outcome, exit_code;
    lz_loop_source *drain_timer;
    /* Host escalation (escalation.h): the SessionRequestCapability of its
     * runsc exec, its open requests and prompts, and whether a prompt is on
     * its terminal (its output waits meanwhile). */
    char capability[33];
    unsigned esc_open, esc_prompts;
    bool prompt_visible;
    bool esc_closing;
    /* Requests from below the session level, run by sessions_settle()
     * once the loop's round is over (session_request_*, below). */
    bool client_lost; /* sending dropped its client: hang up or close */
    bool pty_ended;   /* the relay saw the PTY end: EXIT may be due */
} session;

typedef enum gen_state { G_STARTING, G_RUNNING, G_FAILED, G_TEARDOWN } gen_state;

struct coord {
    lz_coordinator_args *a;
    lz_loop *loop;
    FILE *log;
    int logs_fd; /* O_PATH of <Domain Root>/logs, for rotation (log.c) */
    char id_hex[65], fp_hex[65];
    int64_t generation;
    char gen_name[32];
    char *gen_label;
    char container_id[64];
    lz_supervisor_handle sup;
    bool sup_alive;
    bool sup_stopped; /* SUP_STOPPED arrived (teardown) */
    lz_loop_source *sup_src;
    gen_state state;
    session sessions[MAX_SESSIONS];
    size_t n_active; /* sessions not FREE */
    size_t n_ever;   /* sessions accepted so far */
    uint32_t next_no;
    lz_msg_refused failure; /* why the start failed */
    bool empty_start_over;  /* nobody joined within EMPTY_START_TIMEOUT_MS */
    lz_git_plan git;        /* Git Sentry: mounts, watches and audit state */
    lz_loop_source *git_src;
    bool sentry_failed; /* the audit could not neutralise something: stopping */
    /* The Git Sentry's failure froze the sandbox already (sentry_failed,
     * or the watch bound): the teardown does not hold it, and wait, again. */
    bool sentry_holds;
    /* Stops the sandbox while the audit catches up and while host commands
     * run (freezer.h); its watchdog thread is the coordinator's only other
     * thread. */
    struct lz_freezer *freezer;
    bool throttle_told;           /* the sessions were told the sandbox was paused */
    unsigned long sentry_notices; /* quarantine reports this generation (git_audit.c) */
    unsigned long sentry_untold;  /* ... not told yet (rate limit) */
    int64_t sentry_notice_ms;     /* when the last was told */
    struct esc_state *esc;        /* host escalation (escalation.c); NULL before/after */
    /* This generation's Trust Anchor and the TLS server context built on
     * it (docs/session-channel.md); the nonce is the generation's, shared
     * with the mailbox's record signatures. */
    char nonce[LZ_TRUST_NONCE_LEN + 1];
    lz_trust_anchor *trust;
    SSL_CTX *tls_ctx;
    const char *teardown_why;  /* what sessions are told at teardown; NULL: shutting down */
    const char *teardown_hint; /* and what to do (NULL: the log's path) */
    /* The teardown, asked for (request_teardown*): the main loop runs it
     * with this exit status between rounds. */
    bool stop_requested;
    int stop_status;
    bool status_stale; /* status.json is due (request_status) */
};

/* ---- requests to the loop's level ------------------------------------ */

/* Tear down and exit with status (0 unless a failure asks for 1), once
 * this round of the loop is over (`lazaret stop`, the sandbox died): the
 * events already ready are served first, as a round always is. */
static inline void request_teardown(coord *c, int status)
{
    c->stop_requested = true;
    if (status > c->stop_status)
        c->stop_status = status;
}

/* The same, before any other event is served: the round ends with the
 * callback that asks (lz_loop_end_round). For a signal, and for the Git
 * Sentry failing closed. The code after the request only unwinds: it
 * must start nothing (check c->stop_requested). */
static inline void request_teardown_at_once(coord *c, int status)
{
    request_teardown(c, status);
    lz_loop_end_round(c->loop);
}

/* status.json has changed: it is rewritten after this round. */
static inline void request_status(coord *c)
{
    c->status_stale = true;
}

/* The session's client was dropped (it could not be sent to): a running
 * command is hung up as if the client had left, any other session ends. */
static inline void session_request_drop(session *s)
{
    s->client_lost = true;
}

/* The session's PTY ended: its EXIT is sent once the command has ended. */
static inline void session_request_finish(session *s)
{
    s->pty_ended = true;
}

#endif
