/* SPDX-License-Identifier: Apache-2.0
 *
 * Client Sessions: one per connected `lazaret run`. The state machine is
 *
 *   accept (peer uid checked, SR-10) -> S_ENROLL --ENROLL--> S_TLS
 *   --TLS 1.3 handshake, client certificate = the one enrolled--> S_HELLO
 *   --HELLO--> S_RUN --RUN-->
 *   S_QUEUED (sandbox starting) -> S_RUNNING (STARTED sent) --exit--> EXIT
 *
 * and which CLI message may arrive in which state is protocol/table.h's
 * (the session's state maps to LZ_PS_SESSION_*). A message the table does
 * not admit, or one its handler finds malformed, ends that session's
 * connection only: REFUSED (protocol error, with the reason) and close;
 * a running session's command is hung up as if its client had left. The
 * Domain and every other session go on.
 *
 * A session's slot lives until its command has ended and EXIT was sent
 * (or until it was refused): a command whose client left keeps its slot,
 * gets SIGHUP, and SIGKILL after ORPHAN_GRACE_MS.
 */
#ifndef LAZARET_COORDINATOR_SESSION_H
#define LAZARET_COORDINATOR_SESSION_H

#include <stdint.h>
#include <sys/types.h>

#include "coordinator/domain.h"
#include "coordinator/session_send.h"
#include "protocol/table.h"

/* Initialise every slot as free. */
void sessions_init(coord *c);

/* The listening socket is readable: accept one connection. */
void session_accept(coord *c);

/* Take an accepted, authenticated connection as a new session in S_HELLO
 * (the socket is the session's from now on). NULL when every slot is
 * taken (the caller still owns fd then). session_accept's second half,
 * and the fuzzers' way in. */
session *session_attach(coord *c, int fd, pid_t cli_pid);

/* The sandbox runs: start the session's command (S_QUEUED or S_RUN with a
 * RUN just accepted). */
void session_exec(coord *c, session *s);

/* The session's command ended with wait status `status`. */
void session_command_exited(coord *c, session *s, int status);

/* Send EXIT once the command ended and its output has been forwarded. */
void session_finish_if_done(coord *c, session *s);

/* The client is gone or closed: hang up its command, as closing a terminal
 * window would. */
void session_orphan(coord *c, session *s);

/* Run what the files below the session level asked of the sessions
 * (domain.h: session_request_drop, session_request_finish). Called by
 * the main loop between rounds; stops early once a teardown is asked for
 * (a session's end audits, and the audit may fail closed). */
void sessions_settle(coord *c);

/* Free the slot (closing what it holds) / the same after a REFUSED. */
void session_close(coord *c, session *s);
void refuse_and_close(coord *c, session *s, uint32_t code, const char *msg, const char *hint);
/* The client's socket can take more: send what is queued. */
void session_flush(coord *c, session *s);

/* The running session with number no, or NULL. */
session *session_by_no(coord *c, uint32_t no);

/* The receiver state of s in the protocol table's terms. */
unsigned session_proto_state(const session *s);

/* The CLI messages' handlers, for the protocol tests. */
extern const lz_proto_handler_row session_handlers[];
extern const size_t session_handlers_len;

#endif
