/* SPDX-License-Identifier: Apache-2.0
 *
 * Sending to a session's client without ever waiting (docs/coordinator.md
 * "Sending: the coordinator never waits on a client"). The lowest layer of
 * the coordinator's session code: it calls nothing above it, and a client
 * it cannot send to is dropped with a request (domain.h
 * session_request_drop) that the session level settles after the round.
 */
#ifndef LAZARET_COORDINATOR_SESSION_SEND_H
#define LAZARET_COORDINATOR_SESSION_SEND_H

#include <stdint.h>

#include "coordinator/domain.h"
#include "common/io.h"

/* REFUSED on a bare socket (no session yet: in the clear). */
void send_refused(int sock, uint32_t code, const char *msg, const char *hint);
/* REFUSED to a session's client, in the clear or sealed as its channel is,
 * without waiting (the connection is about to end). */
void session_send_refused(coord *c, session *s, uint32_t code, const char *msg, const char *hint);

/* Send b to the session's client without ever waiting: what its socket
 * cannot take now is queued (in order); a client with more than
 * SESSION_QUEUE_MAX_BYTES unread, or whose connection failed, is dropped
 * (session_drop_client). */
void session_send(coord *c, session *s, const lz_wbuf *b);
/* A notice (PROGRESS) to every connected session. */
void tell_sessions(coord *c, const char *line);

/* Let the client go: close its socket, free its queue, and ask the
 * session level to settle the session (a running command is hung up, any
 * other session ends) after this round; the slot stays valid meanwhile. */
void session_drop_client(coord *c, session *s, const char *why);

/* Close the session's socket and stop watching it / free what is queued
 * for its client (wiped: it is session output). */
void session_drop_socket(session *s);
void session_queue_free(session *s);

#endif
