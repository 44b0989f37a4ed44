/* SPDX-License-Identifier: Apache-2.0
 *
 * Git audit glue: when the coordinator asks the Git Sentry (git_sentry.h)
 * to audit — a watched change in the workspace, a session's start and end,
 * teardown — and what it does with the outcome: a quarantine is logged and
 * told to every connected session; an audit that cannot neutralise what
 * the sandbox made fails closed (the sandbox is stopped, every session is
 * told why, the Domain Root records the unsafe path and the next start is
 * refused while it exists).
 */
#ifndef LAZARET_COORDINATOR_GIT_AUDIT_H
#define LAZARET_COORDINATOR_GIT_AUDIT_H

#include <stdbool.h>

#include "coordinator/domain.h"

/* Register the Sentry's watches (c->git.inotify_fd) with the event loop:
 * every watched change is audited as it arrives. -1 (logged) when the
 * freezer's watchdog cannot watch them: the Domain must not run then. */
int git_audit_attach(coord *c);

/* Audit now. when: what prompted it (logged and told). full: walk the
 * whole tree; otherwise handle the pending inotify events. When the audit
 * fails closed, the sandbox is frozen at once, the sessions are told, and
 * the teardown is requested (c->stop_requested): the caller must then
 * start nothing (no session command, no host command) and return. */
void git_audit(coord *c, const char *when, bool full);

/* Teardown's first step: freeze the sandbox (it stays frozen until the
 * supervisor kills it) and audit what is queued, so nothing it makes while
 * the Domain ends waits for the final audit. */
void git_audit_teardown_freeze(coord *c);

/* Log the freezer's counts (at teardown). */
void git_audit_freeze_stats(coord *c);

/* The last audit, after the sandbox stopped: no sandbox process is left to
 * race it. Records the baseline for crash recovery, or the unsafe marker. */
void git_audit_final(coord *c);

#endif
