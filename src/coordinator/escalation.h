/* SPDX-License-Identifier: Apache-2.0
 *
 * Host escalation, the coordinator's half of `lazaret-escalate` (FR-5,
 * SR-7..SR-9, OR-2, OR-3; docs/escalation.md):
 *
 *  - the Escalation Mailbox of the generation: an inbox the sandbox writes
 *    (watched with inotify through one lz_loop_add_fd()), an outbox it can
 *    only read, and the credentials the client signs with;
 *  - every record in the inbox is untrusted input: opened confined, a
 *    regular file of bounded size, its signature checked (trust/
 *    signature.h), parsed by the strict decoders of protocol/mailbox.h;
 *  - a request is bound to the Client Session whose command asked (the
 *    per-runsc-exec SessionRequestCapability), decided by an exact rule
 *    (approval.h) or by the developer in that session's terminal only
 *    (PROMPT / DECISION rows of the session channel, prompt.h), and run
 *    from a pinned, rechecked executable descriptor (fs/executable.h)
 *    through the common launcher (common/spawn.h), without a shell;
 *  - every request ends in exactly one outcome, written to the outbox, the
 *    Domain's log and the Domain Store.
 */
#ifndef LAZARET_COORDINATOR_ESCALATION_H
#define LAZARET_COORDINATOR_ESCALATION_H

#include <jansson.h>

#include "common/error.h"
#include "coordinator/domain.h"
#include "protocol/table.h"

/* Prompts one session may have waiting (one is visible at a time). */
#define ESC_MAX_PROMPTS_PER_SESSION 8
/* Requests of one session not ended yet (prompts, running, waiting to run). */
#define ESC_MAX_OPEN_PER_SESSION 64
/* Host commands running at once in a Domain; more wait for a slot. */
#define ESC_MAX_RUNNING 32
/* Requests one generation accepts in all (every id is remembered, and
 * each leaves a bounded Domain Store row: about 10 KB at most). */
#define ESC_MAX_PER_GENERATION 10000
/* Requests alive that no session holds (an unknown capability): each ends
 * Failed at once and waits only for its client to read that. */
#define ESC_MAX_UNBOUND 256
/* How long a prompt waits for the developer (LAZARET_ESCALATION_TIMEOUT
 * in seconds overrides it, for tests and slow reviewers). */
#define ESC_PROMPT_TIMEOUT_MS_DEFAULT (5 * 60 * 1000)
/* Output one request may produce before its command is killed. */
#define ESC_OUTPUT_MAX ((uint64_t) 64 << 20)
/* After the command's main process ended (its process group is killed
 * then), how long its pipes may stay open (a holder outside the group). */
#define ESC_DRAIN_MS 2000

/* Create the mailbox's outbox, the inbox's mount point (mailbox/spool)
 * and the credentials in the generation directory (open at gen_fd). */
LZ_MUST_CHECK
int escalation_prepare(coord *c, int gen_fd, lz_error **err);

/* The supervisor's SUP_MAILBOX: root (taken, closed here) is the root of
 * the inbox's tmpfs, which only the supervisor's mount namespace has.
 * Checked to be a tmpfs within the bound (mailbox.h LZ_MBX_INBOX_MAX_*);
 * then the inbox is watched. A second one, or an unbounded one, fails. */
LZ_MUST_CHECK
int escalation_attach_inbox(coord *c, int root, lz_error **err);

/* False while a prepared mailbox has no inbox yet (SUP_STARTED must not
 * come before SUP_MAILBOX). */
bool escalation_inbox_attached(const coord *c);

/* Ctrl-C typed in (or SIGINT forwarded from) session s's terminal: a host
 * Git of s's that runs with the sandbox frozen is cancelled here, since its
 * client inside cannot act on the signal until the thaw. */
void escalation_session_interrupt(coord *c, session *s);

/* A fresh SessionRequestCapability for s (before its runsc exec); the
 * environment entry for its command, newly allocated. */
char *escalation_session_env(coord *c, session *s);

/* The session ends (or its client is gone): its requests end Cancelled. */
void escalation_session_ended(coord *c, session *s);

/* The teardown's first step: every running host command is sent SIGTERM
 * now, not after the sandbox's freeze (which can wait up to
 * LZ_FREEZE_STOP_WAIT_MS). escalation_teardown ends the requests. */
void escalation_kill_commands(coord *c);

/* Teardown: every request ends Cancelled, every host command's process
 * group is killed, the keys are wiped. */
void escalation_teardown(coord *c);

/* The requests not ended yet, for status.json. New reference. */
json_t *escalation_status(coord *c);

/* The session channel's DECISION handler (protocol table row). */
int escalation_on_decision(void *ctx, lz_proto_msg *pm);

#endif
