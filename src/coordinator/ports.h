/* SPDX-License-Identifier: Apache-2.0
 *
 * A session's --publish: the host's listening sockets, bound when its RUN
 * arrives (so that a host port in use refuses the session at once) and
 * handed to the Runtime Supervisor with its exec, whose forwarder relays
 * their connections into the sandbox while the command runs
 * (docs/network.md "Publishing a port").
 */
#ifndef LAZARET_COORDINATOR_PORTS_H
#define LAZARET_COORDINATOR_PORTS_H

#include <stddef.h>

#include "common/error.h"
#include "coordinator/domain.h"

/* Listen on every host address of s's --publish (s->pub_fds). -1 with the
 * refusal's message and fix line in msg and hint; nothing stays bound. */
int publish_bind(session *s, char *msg, size_t msg_len, char *hint, size_t hint_len);

/* Send the listening sockets to the supervisor (SUP_PUBLISH) and close the
 * coordinator's copies. -1 with *err. */
int publish_send(coord *c, session *s, lz_error **err);

/* Close what is still bound (a session refused or ended before its exec). */
void publish_close(session *s);

#endif
