/* SPDX-License-Identifier: Apache-2.0
 *
 * The generation's records in the Domain Store (store/domain_store.h) that
 * the coordinator writes as things happen: participants held and released,
 * generation states, sessions, the derived network policy.
 *
 * These records describe; they do not guard. A failed write is logged with
 * what it was about and the generation goes on: recovery works from what
 * was recorded (an unrecorded release is released again, harmlessly). The
 * writes that guard a creation — the intent records before the generation
 * directory, the supervisor and the sandbox exist — are checked at their
 * call sites, and their failure stops that creation.
 */
#ifndef LAZARET_COORDINATOR_RECORD_H
#define LAZARET_COORDINATOR_RECORD_H

#include "common/procid.h"
#include "coordinator/domain.h"
#include "store/domain_store.h"

void record_held(coord *c, lz_role role, const lz_process_identity *process);
void record_released(coord *c, lz_role role);
void record_state(coord *c, const char *state);
void record_network_policy(coord *c, const char *policy_json);
void record_session_begin(coord *c, const session *s);
void record_session_end(coord *c, const char *session_id, const char *outcome, int code);

#endif
