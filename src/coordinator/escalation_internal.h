/* SPDX-License-Identifier: Apache-2.0
 *
 * What the escalation files share (internal to them: nothing else
 * includes it). The files, from the top (each calls only those below it):
 *
 *   escalation_inbox.c   the mailbox: prepared and handed over, the inbox
 *                        read (records checked, then on_request /
 *                        on_control), the clients' heartbeats
 *   escalation.c         the request state machine: decided, prompted,
 *                        run, finished, freed (and the public API of
 *                        escalation.h about sessions, teardown, status)
 *   escalation_outbox.c  signed records in the outbox (results, output
 *                        chunks), the requests' log lines and Domain Store
 *                        rows
 *   escalation_host.c    where a host command may run from and what it
 *                        gets: its working directory, its environment, its
 *                        keeper (keeper.h)
 */
#ifndef LAZARET_COORDINATOR_ESCALATION_INTERNAL_H
#define LAZARET_COORDINATOR_ESCALATION_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/spawn.h"
#include "config/resolve.h"
#include "coordinator/escalation.h"
#include "fs/executable.h"
#include "protocol/mailbox.h"
#include "trust/signature.h"

typedef enum esc_phase {
    E_NEW,           /* accepted, not decided yet */
    E_PROMPT_QUEUED, /* waits for its session's terminal */
    E_PROMPTING,     /* its prompt is on the terminal */
    E_WAIT_RUN,      /* approved; waits for a run slot */
    E_RUNNING,       /* the host command runs */
    E_DONE,          /* the outcome is written; the client may still read */
} esc_phase;

typedef struct escalation {
    struct escalation *next;
    coord *c;
    session *s; /* NULL once its session is gone */
    char session_id[33];
    lz_mbx_request req;
    esc_phase phase;
    bool open_counted;   /* counted in s->esc_open */
    bool prompt_counted; /* counted in s->esc_prompts */
    bool recorded;       /* its Domain Store row exists */
    char *decision;      /* the rule or the developer, for the records */
    /* The executable: the rule's plan, or one made for this request. */
    const lz_path_plan *plan;
    lz_path_plan own_plan;
    lz_identity approved; /* the object the decision is bound to */
    lz_identity cwd_id;   /* the host working directory it was decided for */
    bool have_approved;
    uint32_t prompt_no;
    bool unbound; /* counted in unbound: no session holds it */
    bool has_dir; /* outbox/<id> exists (opened by name per write: a
                   * request holds no descriptor while it waits) */
    /* Running. */
    lz_child child;
    lz_loop_source *child_src;
    int out[2]; /* read ends of stdout, stderr; -1 at EOF */
    lz_loop_source *out_src[2];
    bool main_exited;
    int status;
    uint64_t out_total;
    uint32_t seq, acked;
    lz_loop_source *timer; /* prompt timeout, drain limit */
    lz_loop_source *life;  /* the client's heartbeat check, every second */
    int64_t last_heard_ms;
    bool froze; /* holds the sandbox frozen while its command runs */
} escalation;

typedef struct esc_state {
    /* O_RDONLY directories. The inbox and junk/ are on the inbox's bounded
     * tmpfs, which only the supervisor's mount namespace has: -1 until its
     * SUP_MAILBOX (escalation_attach_inbox). */
    int inbox_fd, outbox_fd;
    int inotify_fd;
    int junk_fd; /* junk/ beside the inbox: what left the inbox */
    unsigned junk_serial;
    bool junk_left;   /* junk/ may hold something: sweep it */
    bool full_logged; /* "the inbox is full" said for this filling */
    lz_loop_source *inbox_src;
    lz_loop_source *rescan;
    lz_loop_source *sweep;   /* junk_sweep again soon */
    lz_loop_source *publish; /* status.json due (esc_publish) */
    uint8_t coord_seed[LZ_SIG_KEY_LEN];
    uint8_t sandbox_pub[LZ_SIG_KEY_LEN];
    char nonce[LZ_SIG_NONCE_LEN + 1];
    escalation *head;
    unsigned running;
    uint32_t next_prompt_no;
    int64_t prompt_timeout_ms;
    char **seen; /* accepted request ids, sorted */
    size_t n_seen;
    char *home;                  /* the user's home, for the commands' HOME */
    unsigned long long refusals; /* records refused in this generation */
    unsigned unbound;            /* requests alive that no session holds */
} esc_state;

/* ---- escalation.c: the request state machine --------------------------- */

/* The request with this id, or NULL. */
escalation *esc_find(coord *c, const char *id);
/* A new request bound to its session (e->s): decide it (a rule, a
 * prompt, or an outcome at once). */
void esc_decide(escalation *e);
/* End the request with its one outcome: the result in the outbox, the
 * log line, the Domain Store row; its command's process group is killed,
 * its prompt leaves the terminal. Once only; the structure stays until
 * its client has taken the result (esc_free). */
void esc_finish(escalation *e, lz_mbx_outcome outcome, int status, const char *message);
/* Unlink e from the list and free it with its outbox directory. */
void esc_free(escalation *e);
/* status.json is due within 100 ms (a burst of requests: one rewrite). */
void esc_publish(coord *c);
/* Pause or resume reading the command's output by the unacknowledged
 * chunks (LZ_MBX_MAX_UNACKED). */
void esc_update_flow(escalation *e);

/* ---- escalation_outbox.c ----------------------------------------------- */

const char *esc_outcome_name(lz_mbx_outcome o);
/* Write one signed record as outbox/<id>/<name>, whole. -1 on failure. */
int esc_outbox_write(escalation *e, const char *name, const lz_wbuf *b);
/* The RESULT record (a failure is logged). */
void esc_write_result(escalation *e, lz_mbx_outcome outcome, int status, const char *message);
/* Remove outbox/<id>/<name> (an acknowledged chunk). */
int esc_chunk_remove(escalation *e, const char *name);
/* Log a refused inbox record, rate-limited. */
__attribute__((format(printf, 2, 3))) void esc_refusal(coord *c, const char *fmt, ...);
/* The request's Domain Store row and log line, once: Pending, or Running
 * with its decision when it starts at once (a rule). */
void esc_record_begin(escalation *e, const char *decision);

/* ---- escalation_host.c -------------------------------------------------- */

/* The host directory for the request's working directory (a directory of
 * the workspace, else its root); expect: the identity it had when the
 * request was decided (another object now fails). -1 with *err. */
int esc_open_cwd(coord *c, const char *cwd, const lz_identity *expect, lz_identity *ret_id,
                 lz_error **err);
/* Where the sandbox can write on the host, if label lies there: what it
 * is; else NULL. */
const char *esc_sandbox_writable(const lz_resolved_config *cfg, const char *label);
/* Does the request run Git (directly or through a wrapper)? */
bool esc_runs_git(const escalation *e);
/* Start the host command under its keeper: the pinned executable exe, in
 * cwd, with a fixed environment; out: the read ends of its stdout and
 * stderr. -1 with *err (nothing started). */
int esc_host_start(coord *c, escalation *e, int exe, int cwd, int out[2], lz_error **err);

#endif
