/* SPDX-License-Identifier: Apache-2.0
 *
 * TLS 1.3 on the session channel (docs/session-channel.md): the CLI and the
 * coordinator keep their one SOCK_SEQPACKET socket and run TLS inside its
 * datagrams, through memory BIOs, so that the event loop, descriptor passing
 * and the protocol table stay as they are.
 *
 *   - A datagram carries whole TLS records and nothing else: during the
 *     handshake, one flight; afterwards, the records of exactly one
 *     protocol message (one seal). A datagram that ends inside a record, or
 *     that holds more plaintext than one message may have, is refused.
 *   - Descriptors (SCM_RIGHTS) travel on the datagram whose records carry
 *     the message that announces them (RUN); the protocol table then
 *     admits the message with the descriptors of its own datagram, so a
 *     descriptor is always bound to an authenticated message. Descriptors
 *     on a datagram that holds no message are refused.
 *
 * The handshake needs the SSL_CTXs of trust/anchor.h (TLS 1.3 only, mutual
 * authentication, this generation's CA only, the peer's role checked).
 *
 * Errors follow docs/errors.md: -1 and *err filled (the TLS reason included).
 */
#ifndef LAZARET_TRUST_CHANNEL_H
#define LAZARET_TRUST_CHANNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

#include "common/error.h"
#include "protocol/table.h"
#include "protocol/wire.h"

/* The largest datagram: one message of LZ_WIRE_MAX bytes is at most 4 TLS
 * records of 16 KiB, each 22 bytes longer (header, content type, tag);
 * a handshake flight (two certificates, a few hundred bytes each) is far
 * smaller. */
#define LZ_TLS_DATAGRAM_MAX (LZ_WIRE_MAX + 1024)

typedef struct lz_tls_channel lz_tls_channel;

/* A channel for one connection, server or client end, from ctx (which
 * lz_tls_server_ctx / lz_tls_client_ctx made). */
LZ_MUST_CHECK
lz_tls_channel *lz_tls_channel_new(SSL_CTX *ctx, bool server, lz_error **err);
/* NULL is fine. The TLS traffic keys go with the SSL object. */
void lz_tls_channel_free(lz_tls_channel *ch);

/* Drive the handshake with the datagram just received (in, in_len; NULL
 * and 0 for the client's first step). What the handshake has to send now
 * is in out[0..*out_len) (*out_len 0: nothing), also on failure, where it
 * is the alert telling the peer why. Returns 1 when the handshake is
 * complete (the client may still have its last flight in out), 0 when it
 * needs the peer's next datagram, -1 when it failed. */
LZ_MUST_CHECK
int lz_tls_channel_handshake(lz_tls_channel *ch, const uint8_t *in, size_t in_len,
                             uint8_t out[LZ_TLS_DATAGRAM_MAX], size_t *out_len, lz_error **err);

bool lz_tls_channel_established(const lz_tls_channel *ch);

/* Seal one message (at most LZ_WIRE_MAX bytes) into one datagram. */
LZ_MUST_CHECK
int lz_tls_channel_seal(lz_tls_channel *ch, const uint8_t *msg, size_t len,
                        uint8_t out[LZ_TLS_DATAGRAM_MAX], size_t *out_len, lz_error **err);

/* Open one datagram into out (at most LZ_WIRE_MAX bytes of plaintext).
 * *out_len 0 means the datagram held records without application data (an
 * empty application record). -1 for anything else a datagram must not be:
 * a handshake message after the handshake (a KeyUpdate),
 * a record that fails authentication, a datagram ending inside a record,
 * more plaintext than one message, an alert (the peer refused us: its
 * reason is in the message), the peer's close_notify. After a refused
 * datagram every later one is refused too (the connection is over). */
LZ_MUST_CHECK
int lz_tls_channel_open(lz_tls_channel *ch, const uint8_t *in, size_t in_len,
                        uint8_t out[LZ_WIRE_MAX], size_t *out_len, lz_error **err);

/* The peer's verified certificate once established (owned by the channel),
 * or NULL. */
X509 *lz_tls_channel_peer(const lz_tls_channel *ch);

/* ---- on a socket ------------------------------------------------------- */

/* Seal b and send it on sock with its descriptors (blocking). */
LZ_MUST_CHECK
int lz_tls_proto_send(lz_tls_channel *ch, int sock, const lz_wbuf *b, const int *fds, size_t n_fds,
                      lz_error **err);
/* The same where a failure needs no handling at the call (lz_wire_post). */
void lz_tls_proto_post(lz_tls_channel *ch, int sock, const lz_wbuf *b);

/* Receive one datagram from sock, open it and admit its message with the
 * datagram's descriptors (lz_proto_admit_msg). Returns lz_proto_recv's
 * values; a datagram without a message (and without descriptors) is -1
 * with errno EAGAIN, like a spurious wake-up; every failure of the TLS
 * layer is EPROTO. */
LZ_MUST_CHECK
int lz_tls_proto_recv(lz_tls_channel *ch, int sock, lz_proto_dir dir, unsigned state,
                      lz_proto_msg *m, lz_error **err);

#endif
