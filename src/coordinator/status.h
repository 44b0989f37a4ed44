/* SPDX-License-Identifier: Apache-2.0
 *
 * Status publication: <runtime domain>/status.json, replaced atomically
 * (fs/atomic.h: a fresh temporary name beside it, rename) on every change
 * of the generation's or a session's state: the main loop publishes it
 * when a file asked (domain.h request_status). It is what `lazaret status`
 * reads. It holds no secret: environment values never enter it, only the
 * Domain's identity, states, session ids and the derived network policy.
 */
#ifndef LAZARET_COORDINATOR_STATUS_H
#define LAZARET_COORDINATOR_STATUS_H

#include "coordinator/domain.h"

/* The generation state's name in status.json and the Domain Store. */
const char *generation_state_name(gen_state st);
/* Best effort: a failure leaves the previous status.json in place. */
void publish_status(coord *c);
/* Remove status.json (teardown: the Domain is no longer running). */
void unpublish_status(coord *c);

#endif
