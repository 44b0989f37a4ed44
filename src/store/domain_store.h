/* SPDX-License-Identifier: Apache-2.0
 *
 * The Domain Store: one SQLite database (STRICT tables, WAL,
 * synchronous=FULL) in the Domain Root. It records every generation, every
 * participant (process or external resource) and every session, so that a
 * later CLI can recover a generation whose coordinator died (FR-7):
 *
 *   participant.state: Intent -> LeaseHeld -> Released
 *     Intent     written BEFORE the resource is created
 *     LeaseHeld  the resource exists; its owner identity is recorded
 *     Released   written AFTER the resource is destroyed
 *
 * Only the holder of the Domain lock opens the store for writing.
 * All functions follow the error contract of common/error.h.
 */
#ifndef LAZARET_STORE_DOMAIN_STORE_H
#define LAZARET_STORE_DOMAIN_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "common/procid.h"

#define LZ_DOMAIN_STORE_SCHEMA_ID "lazaret-domain-store-v1"
#define LZ_DOMAIN_STORE_SCHEMA_VERSION 1

typedef struct lz_domain_store lz_domain_store;

/* Participant roles of one generation (a closed set). */
typedef enum lz_role {
    LZ_ROLE_COORDINATOR,     /* the Session Coordinator process */
    LZ_ROLE_SUPERVISOR,      /* the Runtime Supervisor (pid namespace init) */
    LZ_ROLE_RUNTIME_FILES,   /* the generation's runtime directory */
    LZ_ROLE_EPHEMERAL_LAYER, /* the root filesystem's writable layer */
    LZ_ROLE_SANDBOX,         /* the runsc container */
    LZ_ROLE__COUNT,
} lz_role;

const char *lz_role_name(lz_role role);

typedef enum lz_participant_state {
    LZ_PARTICIPANT_INTENT,
    LZ_PARTICIPANT_LEASE_HELD,
    LZ_PARTICIPANT_RELEASED,
} lz_participant_state;

typedef struct lz_participant {
    int64_t generation_id;
    lz_role role;
    lz_participant_state state;
    bool has_process;
    lz_process_identity process; /* when has_process */
    char *resource;              /* path or id of the resource, or NULL */
} lz_participant;

/* Open (creating if needed) <domain_root>/store.db through the retained
 * descriptor of the Domain Root. */
LZ_MUST_CHECK
int lz_domain_store_open(int domain_root_fd, const char *domain_id_hex, const char *profile,
                         const char *workspace, lz_domain_store **ret, lz_error **err);
void lz_domain_store_close(lz_domain_store *store);

/* Start a new generation in state 'starting'. */
/* What `lazaret state list` shows of a Domain that may not be running:
 * read from its store with a read-only connection (the running
 * coordinator's writes are not disturbed; WAL readers do not block). */
typedef struct lz_domain_summary {
    char profile[65];
    char *workspace;     /* canonical workspace path, newly allocated */
    int64_t generations; /* generations ever begun */
    int64_t last_generation;
    int64_t last_used; /* Unix time of the last generation's start or end */
    int64_t sessions;  /* sessions ever begun */
} lz_domain_summary;

LZ_MUST_CHECK
int lz_store_read_summary(int domain_root_fd, lz_domain_summary *ret, lz_error **err);
void lz_domain_summary_clear(lz_domain_summary *s);

/* Start a new generation in state 'starting', after pruning the store
 * (lz_store_prune with LZ_STORE_KEEP_GENERATIONS): the store stays bounded
 * however many generations a Domain has. */
LZ_MUST_CHECK
int lz_store_generation_begin(lz_domain_store *s, const char *fingerprint_hex,
                              int64_t *ret_generation, lz_error **err);

/* How many of the newest generations the store keeps (docs/runtime.md
 * "Store pruning"). */
#define LZ_STORE_KEEP_GENERATIONS 100

/* Delete every generation older than the `keep` newest ones, with its
 * participant, session, escalation and network_policy rows, in one
 * transaction. Never a generation that is not over (state 'ended' or
 * 'recovered') nor one with a participant not Released (recovery still
 * needs its record). *ret_pruned (may be NULL): generations deleted. */
LZ_MUST_CHECK
int lz_store_prune(lz_domain_store *s, int keep, int64_t *ret_pruned, lz_error **err);

/* What `lazaret state inspect` shows from a store, read like
 * lz_store_read_summary (read-only connection): a JSON object with
 * "generations" (newest first, at most max_generations: id, state,
 * started_at, ended_at, fingerprint), "generations_kept" (rows in the
 * store) and "escalations" (newest first, at most max_escalations:
 * generation, request_id, argv (the sandbox's: untrusted text), decision,
 * state, exit_status, received_at, ended_at). Times are Unix seconds.
 * *ret is a new reference. */
struct json_t;
LZ_MUST_CHECK
int lz_store_read_history(int domain_root_fd, int max_generations, int max_escalations,
                          struct json_t **ret, lz_error **err);

/* What `lazaret state verify` checks of a store, on a read-only
 * connection: the schema it says it has and SQLite's integrity_check. */
typedef struct lz_store_health {
    char schema_id[64]; /* "" when the metadata row is missing */
    int schema_version;
    bool schema_ok;      /* this Lazaret's schema id and version */
    bool integrity_ok;   /* PRAGMA integrity_check said "ok" */
    char integrity[256]; /* its first line otherwise */
} lz_store_health;

/* -1 with *err when the file cannot be opened or read as an SQLite
 * database at all (not a database, unreadable). */
LZ_MUST_CHECK
int lz_store_check_health(int domain_root_fd, lz_store_health *ret, lz_error **err);
/* Set a generation's state: "starting", "running", "tearing_down", "ended",
 * "recovered". */
LZ_MUST_CHECK
int lz_store_generation_set_state(lz_domain_store *s, int64_t generation, const char *state,
                                  lz_error **err);

LZ_MUST_CHECK
int lz_store_participant_intent(lz_domain_store *s, int64_t generation, lz_role role,
                                const char *resource, lz_error **err);
LZ_MUST_CHECK
int lz_store_participant_held(lz_domain_store *s, int64_t generation, lz_role role,
                              const lz_process_identity *process, lz_error **err);
LZ_MUST_CHECK
int lz_store_participant_released(lz_domain_store *s, int64_t generation, lz_role role,
                                  lz_error **err);

/* Every participant not yet Released, of every generation (an ended one
 * included: what its teardown could not release, recovery finishes), oldest
 * first. *ret is an array of *ret_count entries; free with
 * lz_participants_free(). */
LZ_MUST_CHECK
int lz_store_unreleased(lz_domain_store *s, lz_participant **ret, size_t *ret_count,
                        lz_error **err);
void lz_participants_free(lz_participant *p, size_t n);

/* Mark every generation that is not 'ended' as 'recovered'. */
LZ_MUST_CHECK
int lz_store_generations_mark_recovered(lz_domain_store *s, lz_error **err);

/* The generation's DerivedNetworkPolicy (JSON). */
LZ_MUST_CHECK
int lz_store_network_policy(lz_domain_store *s, int64_t generation, const char *policy_json,
                            lz_error **err);

/* Sessions. */
LZ_MUST_CHECK
int lz_store_session_begin(lz_domain_store *s, int64_t generation, const char *session_id,
                           pid_t cli_pid, bool interactive, lz_error **err);
LZ_MUST_CHECK
int lz_store_session_end(lz_domain_store *s, int64_t generation, const char *session_id,
                         const char *outcome, int code, lz_error **err);

/* Escalation requests (OR-2): begun Pending when accepted (or at once
 * Running with its decision, for a rule: one commit fewer on the
 * auto-approved path; decided_at is -1 until decided), Running once
 * approved (decision: the rule or the developer), and ended exactly once
 * with one of Completed, Denied, TimedOut, Cancelled, Failed (a second end
 * changes no row and is refused). status: the command's, -1 when none. */
LZ_MUST_CHECK
int lz_store_escalation_begin(lz_domain_store *s, int64_t generation, const char *request_id,
                              const char *session_id, const char *argv_json, const char *cwd,
                              const char *why, const char *decision, lz_error **err);
LZ_MUST_CHECK
int lz_store_escalation_decided(lz_domain_store *s, int64_t generation, const char *request_id,
                                const char *decision, lz_error **err);
LZ_MUST_CHECK
int lz_store_escalation_end(lz_domain_store *s, int64_t generation, const char *request_id,
                            const char *outcome, const char *decision, int status,
                            const char *message, lz_error **err);

#endif
