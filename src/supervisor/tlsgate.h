/* SPDX-License-Identifier: Apache-2.0
 *
 * lz-namecheck's TLS gate (docs/network.md "The name on the connection"):
 * between a ClientHello the name check passed and the free relay. The
 * server chooses its site from the ClientHello it answers with a
 * ServerHello; after a HelloRetryRequest (RFC 8446 4.1.4) that is the
 * second one, on the same connection. So nothing the client sends after a
 * passed ClientHello reaches the server before the server's answer was
 * read and parsed (lz_tls_server_hello_kind): a ServerHello opens the
 * relay (the server's bytes read so far go to the client first, the
 * client's held ones to the server); a HelloRetryRequest goes to the
 * client, whose next ClientHello must then carry exactly the first one's
 * server_name (and be as encrypted or not as it), and is held in turn
 * until the next ServerHello. A second HelloRetryRequest, or anything else
 * where a ServerHello must be, resets both sides.
 *
 * Bounds: the client's bytes held at most LZ_HELLO_MAX (then they are not
 * read: flow control), the server's answer at most LZ_HELLO_MAX, the
 * second ClientHello and every server answer within
 * LZ_NAMECHECK_HELLO_MS, the upstream connect within
 * LZ_FORWARD_CONNECT_MS.
 */
#ifndef LAZARET_SUPERVISOR_TLSGATE_H
#define LAZARET_SUPERVISOR_TLSGATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/hosts.h"
#include "protocol/hello.h"
#include "supervisor/forward.h"

typedef struct lz_tls_gate {
    int a, b; /* the client (accepted), the server (connected) */
    bool connecting;
    int64_t deadline;
    /* The client's bytes: [0, sent) went to b, [sent, passed) may go,
     * [passed, len) are held. */
    unsigned char *cbuf;
    size_t sent, passed, len;
    /* The server's bytes of this round (not yet parsed, or not yet sent):
     * [0, slen); and the HelloRetryRequest on its way to a: tbuf[toff,
     * tlen). */
    unsigned char *sbuf, *tbuf;
    size_t slen, toff, tlen;
    bool retried;          /* a HelloRetryRequest was passed on */
    bool awaiting_hello;   /* the second ClientHello is awaited (else: the server's answer) */
    lz_hello_result first; /* what the first ClientHello carried */
    char first_name[LZ_HELLO_NAME_MAX];
    size_t first_name_len;
} lz_tls_gate;

typedef enum lz_tls_gate_state {
    LZ_TLS_GATE_GOING = 0, /* poll again */
    LZ_TLS_GATE_RELAY,     /* the relay was set up (both sockets are its now) */
    LZ_TLS_GATE_REFUSED,   /* both sides reset; *why (SC_NAME_WHY_*) and name say why */
    LZ_TLS_GATE_ENDED,     /* both sides closed, nothing to report (a side ended or failed,
                            * a server refused with an alert, a deadline passed) */
} lz_tls_gate_state;

/* Take a and b (b's connect in progress when connecting) and the client's
 * bytes hello[0..len), whose first ClientHello lz_tls_client_hello_next
 * read as first (LZ_HELLO_NAME, NO_NAME or ENCRYPTED) ending at end. -1
 * (nothing taken) when out of memory. */
int lz_tls_gate_init(lz_tls_gate *g, int a, int b, bool connecting, int64_t now,
                     const unsigned char *hello, size_t len, size_t end, lz_hello_result first,
                     const char *first_name, size_t first_name_len);

void lz_tls_gate_events(const lz_tls_gate *g, int64_t now, short *ea, short *eb, int64_t *wait);

/* After the poll. On LZ_TLS_GATE_RELAY, r relays from now on; on REFUSED,
 * name (a canonical host name or "") is the one to record. */
lz_tls_gate_state lz_tls_gate_step(lz_tls_gate *g, short ra, short rb, int64_t now, lz_relay *r,
                                   char name[static LZ_HOST_NAME_MAX + 1], int *why);

#endif
