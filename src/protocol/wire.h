/* SPDX-License-Identifier: Apache-2.0
 *
 * Wire encoding shared by every Lazaret control channel (CLI <->
 * coordinator, coordinator <-> supervisor): one message per SOCK_SEQPACKET
 * record, at most LZ_WIRE_MAX bytes, optionally carrying file descriptors
 * (SCM_RIGHTS).
 *
 *   message := u16 type (big endian) || field*
 *   field   := u32 (big endian) | bytes := u32 length || length bytes
 *
 * Readers are bounded: every get_* checks the remaining length and fails
 * (sets the reader's error flag) instead of reading past the end. A message
 * with bytes left over after its last field is malformed. Decoders of
 * messages from a less trusted peer are fuzzed (tests/fuzz).
 */
#ifndef LAZARET_PROTOCOL_WIRE_H
#define LAZARET_PROTOCOL_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define LZ_WIRE_MAX 65536
#define LZ_WIRE_MAX_FDS 4

typedef struct lz_wbuf {
    uint8_t data[LZ_WIRE_MAX];
    size_t len;
    bool overflow;
} lz_wbuf;

void lz_wbuf_init(lz_wbuf *b, uint16_t type);
void lz_wbuf_u32(lz_wbuf *b, uint32_t v);
void lz_wbuf_bytes(lz_wbuf *b, const void *p, size_t n);
void lz_wbuf_str(lz_wbuf *b, const char *s); /* bytes without the NUL */

typedef struct lz_rbuf {
    const uint8_t *data;
    size_t len, pos;
    uint16_t type;
    bool bad; /* a read went past the end or a field was invalid */
} lz_rbuf;

/* Start reading a received message; false when it is too short for a type. */
bool lz_rbuf_init(lz_rbuf *r, const void *data, size_t len);
uint32_t lz_rbuf_u32(lz_rbuf *r);
/* A string field: must be NUL-free and at most max bytes; returns a newly
 * allocated NUL-terminated copy, or NULL (and sets r->bad). */
char *lz_rbuf_str(lz_rbuf *r, size_t max);
/* Raw bytes: *ret points into the message (not copied). */
bool lz_rbuf_bytes(lz_rbuf *r, const uint8_t **ret, size_t *ret_len, size_t max);
/* true when every byte was consumed and nothing was bad. */
bool lz_rbuf_done(const lz_rbuf *r);

/* Send one message with up to LZ_WIRE_MAX_FDS descriptors. Retries EINTR.
 * Returns 0, or -1 with *err (EPIPE/ECONNRESET when the peer is gone). */
LZ_MUST_CHECK
int lz_wire_send(int sock, const lz_wbuf *b, const int *fds, size_t n_fds, lz_error **err);

/* The same for raw bytes (a TLS datagram, trust/channel.h): no size limit
 * here, the socket's own. */
LZ_MUST_CHECK
int lz_wire_send_bytes(int sock, const void *data, size_t len, const int *fds, size_t n_fds,
                       lz_error **err);
LZ_MUST_CHECK
int lz_wire_try_send_bytes(int sock, const void *data, size_t len, lz_error **err);

/* Send without descriptors where a failure needs no handling at the call:
 * the peer is gone, which is noticed (and handled) where its socket is
 * read. */
void lz_wire_post(int sock, const lz_wbuf *b);

/* Like lz_wire_send without descriptors, but never blocks: returns 0 when
 * sent, 1 when the socket's buffer is full (nothing was sent), -1 on error. */
LZ_MUST_CHECK
int lz_wire_try_send(int sock, const lz_wbuf *b, lz_error **err);

/* Receive one message into buf (LZ_WIRE_MAX bytes). Received descriptors
 * (O_CLOEXEC via MSG_CMSG_CLOEXEC) are stored in fds[0..*ret_n_fds);
 * unexpected extra descriptors are closed and the message refused.
 * Returns the message length, 0 on orderly shutdown, -1 on error
 * (truncated messages are errors). */
LZ_MUST_CHECK
ssize_t lz_wire_recv(int sock, void *buf, int *fds, size_t max_fds, size_t *ret_n_fds,
                     lz_error **err);

/* lz_wire_recv into a buffer of cap bytes (a TLS datagram). */
LZ_MUST_CHECK
ssize_t lz_wire_recv_bytes(int sock, void *buf, size_t cap, int *fds, size_t max_fds,
                           size_t *ret_n_fds, lz_error **err);

#endif
