/* SPDX-License-Identifier: Apache-2.0
 *
 * Sending to a session's client: never waiting (docs/coordinator.md
 * "Sending: the coordinator never waits on a client"). A client that
 * cannot be sent to is dropped here; what that means for its session is
 * decided above (session_request_drop: sessions_settle in session.c).
 */
#include "coordinator/session_send.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "coordinator/log.h"

void send_refused(int sock, uint32_t code, const char *msg, const char *hint)
{
    lz_wbuf b;
    lz_msg_refused m = { code, (char *) msg, (char *) hint };
    lz_msg_refused_encode(&b, LZ_MSG_REFUSED, &m);
    /* The connection ends right after: a client whose socket is full does
     * not get the reason, rather than the coordinator waiting for it. */
    lz_best_effort(lz_wire_try_send(sock, &b, NULL));
}

/* The datagram of b for this session: b itself in the clear during the
 * enrolment, sealed once TLS is established (docs/session-channel.md).
 * NULL when the session can be sent nothing now (its TLS handshake runs)
 * or sealing failed. */
static const uint8_t *session_datagram(session *s, const lz_wbuf *b, size_t *ret_len)
{
    static uint8_t sealed[LZ_TLS_DATAGRAM_MAX];
    if (s->state == S_ENROLL) {
        *ret_len = b->len;
        return b->overflow ? NULL : b->data;
    }
    if (!lz_tls_channel_established(s->tls) || b->overflow)
        return NULL;
    lz_error *err = NULL;
    if (lz_tls_channel_seal(s->tls, b->data, b->len, sealed, ret_len, &err) < 0) {
        log_error(s->c, "session message", err);
        lz_error_free(err);
        return NULL;
    }
    return sealed;
}

void session_send_refused(coord *c, session *s, uint32_t code, const char *msg, const char *hint)
{
    /* Queued datagrams would have to go first (TLS records are numbered):
     * a client that has not read them does not get the reason either. */
    if (s->sock < 0 || s->q_head)
        return;
    /* Every refusal the developer sees has a fix line (docs/errors.md):
     * without a specific one, the log's full path. */
    _cleanup_free_ char *fallback = NULL;
    if (!hint || !*hint) {
        _cleanup_free_ char *log = lz_domain_log_label(c->a->cfg);
        hint = fallback = lz_xasprintf("run the command again; %s says more", log);
    }
    lz_wbuf b;
    lz_msg_refused m = { code, (char *) msg, (char *) hint };
    lz_msg_refused_encode(&b, LZ_MSG_REFUSED, &m);
    size_t len;
    const uint8_t *data = session_datagram(s, &b, &len);
    if (data)
        lz_best_effort(lz_wire_try_send_bytes(s->sock, data, len, NULL));
}

void session_queue_free(session *s)
{
    for (queued_msg *q = s->q_head, *n; q; q = n) {
        n = q->next;
        explicit_bzero(q->data, q->len); /* session output: docs/runtime.md "Secrets" */
        free(q);
    }
    s->q_head = s->q_tail = NULL;
    s->q_bytes = 0;
}

void session_drop_socket(session *s)
{
    lz_loop_remove(s->sock_src);
    s->sock_src = NULL;
    if (s->sock >= 0)
        close(s->sock);
    s->sock = -1;
}

/* The client takes too little of what it is sent, or its connection
 * failed: let it go. Its socket and queue go now (nothing more is sent to
 * it); the session itself is settled after this round (sessions_settle:
 * a running command is hung up as if the client had left, any other
 * session ends), so the slot stays valid for the caller. */
void session_drop_client(coord *c, session *s, const char *why)
{
    clog_(c, "session #%u: %s; dropping its client", s->no, why);
    session_drop_socket(s);
    session_queue_free(s);
    session_request_drop(s);
}

void session_send(coord *c, session *s, const lz_wbuf *b)
{
    if (s->sock < 0)
        return;
    size_t len;
    const uint8_t *data = session_datagram(s, b, &len);
    if (!data) {
        if (s->state != S_TLS)
            session_drop_client(c, s, "a message to it could not be sealed");
        return; /* during the handshake: tell_sessions skips it, nothing else sends */
    }
    if (!s->q_head) {
        lz_error *err = NULL;
        int r = lz_wire_try_send_bytes(s->sock, data, len, &err);
        if (r == 0)
            return;
        if (r == 1 && !s->backlog_told) {
            /* Once per session: a slow terminal (ssh) does this all the
             * time, and the line is there to explain a stalled session. */
            s->backlog_told = true;
            clog_(c,
                  "session #%u: its client is not reading as fast as its output comes; "
                  "the output waits for it (said once per session)",
                  s->no);
        }
        if (r < 0) {
            log_error(c, "session message", err);
            lz_error_free(err);
            session_drop_client(c, s, "its connection failed");
            return;
        }
    }
    if (s->q_bytes + len > SESSION_QUEUE_MAX_BYTES) {
        session_drop_client(c, s, "its client has not read 1 MiB of messages");
        return;
    }
    queued_msg *q = lz_xmalloc(sizeof(*q) + len);
    q->next = NULL;
    q->len = len;
    memcpy(q->data, data, len);
    if (s->q_tail)
        s->q_tail->next = q;
    else
        s->q_head = q;
    s->q_tail = q;
    s->q_bytes += len;
}

void tell_sessions(coord *c, const char *line)
{
    lz_wbuf b;
    lz_msg_text_encode(&b, LZ_MSG_PROGRESS, line);
    /* Not to a session still enrolling: nothing but its handshake may reach
     * it before TLS is established. */
    for (size_t i = 0; i < MAX_SESSIONS; i++)
        if (c->sessions[i].state >= S_HELLO && c->sessions[i].sock >= 0)
            session_send(c, &c->sessions[i], &b);
}
