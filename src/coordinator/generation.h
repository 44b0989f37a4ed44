/* SPDX-License-Identifier: Apache-2.0
 *
 * The generation's lifecycle: its runtime directory (runsc state, bundle,
 * a private copy of the guest binaries), the Git Sentry's plan and watches,
 * the Runtime Supervisor (started here; its messages arrive through
 * protocol/table.h in the generation's state), start failure, and teardown
 * — which runs when the last session has left, on a signal, or when the
 * Git Sentry fails closed, and always ends the process.
 *
 * Every resource is recorded in the Domain Store (intent before it is
 * created, held once it exists, released after it is destroyed), so that
 * a coordinator that dies mid-way leaves what recovery needs (FR-7).
 */
#ifndef LAZARET_COORDINATOR_GENERATION_H
#define LAZARET_COORDINATOR_GENERATION_H

#include <stdint.h>

#include "coordinator/domain.h"
#include "protocol/table.h"

/* Begin the generation in the Domain Store and record this coordinator.
 * Returns 0, or -1 with *err (the coordinator cannot run then). */
int generation_begin(coord *c, lz_error **err);

/* Prepare and start: directory, Git Sentry, supervisor, SUP_START. A
 * failure is not returned: it puts the generation in G_FAILED, whose
 * reason every session is refused with. */
void generation_start(coord *c);

/* Fail the start: G_FAILED, and every session not yet running is refused. */
void start_failed(coord *c, const char *msg, const char *hint);

/* Tear down and _exit(status). Only the main loop calls it, between
 * rounds (coordinator.c): everything else asks for it with
 * request_teardown (domain.h). */
void teardown_and_exit(coord *c, int status) __attribute__((noreturn));

/* The supervisor runs (c->sup filled by lz_supervisor_spawn): watch its
 * channel; every message is admitted by the protocol table in the
 * generation's state and handled by supervisor_event_handlers. Also the
 * fuzzers' way in. */
void generation_attach_supervisor(coord *c);

/* SIGCHLD: reap the supervisor's outer process when it has ended. */
void generation_reap(coord *c);

/* The receiver state of the supervisor channel in the table's terms. */
unsigned generation_proto_state(const coord *c);

/* The supervisor messages' handlers, for the protocol tests. */
extern const lz_proto_handler_row supervisor_event_handlers[];
extern const size_t supervisor_event_handlers_len;

#endif
