/* SPDX-License-Identifier: Apache-2.0
 *
 * The PTY relay of interactive sessions. The coordinator allocates a host
 * pseudo-terminal pair per interactive session (OpenSSH: PTYs on the
 * privileged side): the slave becomes the stdio of the session's runsc
 * exec, the master stays here and is relayed to the CLI as OUTPUT, and the
 * CLI's INPUT and RESIZE go to it.
 *
 * Flow control, both ways: an OUTPUT the client's socket cannot take now is
 * queued (session_send) and the master is not read until the queue is
 * empty; typed
 * bytes the PTY cannot take now are kept (in_pending) and the socket is not
 * read until they are written. relay_update_events() turns that into the
 * loop sources' events.
 */
#ifndef LAZARET_COORDINATOR_RELAY_H
#define LAZARET_COORDINATOR_RELAY_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "coordinator/domain.h"

/* Allocate the pair: s->master (registered with the loop) and *ret_slave
 * for the runsc exec (the caller closes it once sent). The host side is
 * raw; the window size is the one the RUN message gave. */
int relay_open_pty(session *s, int *ret_slave, lz_error **err);

/* Set the events of s's socket and master sources from its buffers. */
void relay_update_events(session *s);

/* Typed bytes (INPUT): false when they do not fit the pending buffer (a
 * client that ignores flow control). */
bool relay_input(session *s, const uint8_t *p, size_t n);
void relay_resize(session *s, uint32_t rows, uint32_t cols);

/* Stop relaying: close the master and drop the pending output. */
void relay_close(session *s);

#endif
