/* SPDX-License-Identifier: Apache-2.0
 *
 * TLS inside SOCK_SEQPACKET datagrams (channel.h). The SSL object reads
 * from one memory BIO and writes to another; nothing here touches a socket
 * except the lz_tls_proto_* functions at the end.
 */
#include "trust/channel.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>

#include "common/util.h"
#include "trust/anchor.h"

struct lz_tls_channel {
    SSL *ssl;
    BIO *in, *out; /* owned by ssl */
    bool established;
    /* A datagram was refused on input: the SSL object may hold the start of
     * a record it would complete with the next datagram's bytes, so nothing
     * more is read on this channel (sealing is unaffected). */
    bool input_failed;
    /* The peer sent a handshake message after the handshake (msg_cb). */
    bool post_handshake;
};

/* The ciphertext of one datagram, for lz_tls_proto_*: not secret (the
 * plaintext is the caller's), and shared, since the processes using it (the
 * CLI, the coordinator) are single-threaded and done with each datagram
 * before the next. */
static uint8_t datagram[LZ_TLS_DATAGRAM_MAX];

/* OpenSSL reports every protocol message it reads or writes here. After
 * the handshake the session channel has no use for any handshake message:
 * OpenSSL answers a KeyUpdate(update_requested) by writing into the output
 * BIO, which only a seal drains — a flood of them grew the coordinator
 * without bound (attack round i11f) — and session tickets are off. So one
 * received after the handshake fails the datagram (lz_tls_channel_open). */
static void msg_cb(int write_p, int version, int content_type, const void *buf, size_t len,
                   SSL *ssl, void *arg)
{
    (void) version, (void) buf, (void) len, (void) ssl;
    lz_tls_channel *ch = arg;
    if (!write_p && content_type == SSL3_RT_HANDSHAKE && ch->established)
        ch->post_handshake = true;
}

lz_tls_channel *lz_tls_channel_new(SSL_CTX *ctx, bool server, lz_error **err)
{
    lz_tls_channel *ch = lz_xcalloc(1, sizeof(*ch));
    ch->ssl = SSL_new(ctx);
    ch->in = BIO_new(BIO_s_mem());
    ch->out = BIO_new(BIO_s_mem());
    if (!ch->ssl || !ch->in || !ch->out) {
        BIO_free(ch->in);
        BIO_free(ch->out);
        SSL_free(ch->ssl);
        free(ch);
        lz_tls_error(err, NULL, "cannot set up TLS on the session channel");
        return NULL;
    }
    /* An empty memory BIO reads as "retry later", not as end of file. */
    BIO_set_mem_eof_return(ch->in, -1);
    BIO_set_mem_eof_return(ch->out, -1);
    SSL_set_bio(ch->ssl, ch->in, ch->out);
    SSL_set_msg_callback(ch->ssl, msg_cb);
    SSL_set_msg_callback_arg(ch->ssl, ch);
    if (server)
        SSL_set_accept_state(ch->ssl);
    else
        SSL_set_connect_state(ch->ssl);
    return ch;
}

void lz_tls_channel_free(lz_tls_channel *ch)
{
    if (!ch)
        return;
    SSL_free(ch->ssl);
    free(ch);
}

bool lz_tls_channel_established(const lz_tls_channel *ch)
{
    return ch && ch->established;
}

X509 *lz_tls_channel_peer(const lz_tls_channel *ch)
{
    if (!ch || !ch->established)
        return NULL;
    return SSL_get0_peer_certificate(ch->ssl);
}

/* Whatever the SSL object wrote since: into out, as one datagram. */
static int take_output(lz_tls_channel *ch, uint8_t *out, size_t *out_len, lz_error **err)
{
    size_t pending = BIO_ctrl_pending(ch->out);
    *out_len = 0;
    if (pending > LZ_TLS_DATAGRAM_MAX) {
        (void) BIO_reset(ch->out);
        return lz_error_set(err, EMSGSIZE, "TLS produced %zu bytes for one datagram (at most %d)",
                            pending, LZ_TLS_DATAGRAM_MAX);
    }
    if (pending == 0)
        return 0;
    int n = BIO_read(ch->out, out, (int) pending);
    if (n != (int) pending)
        return lz_tls_error(err, NULL, "cannot take TLS output");
    *out_len = pending;
    return 0;
}

static int pass_error(lz_error **err, lz_error *e)
{
    if (err && !*err)
        *err = e;
    else
        lz_error_free(e);
    return -1;
}

/* A TLS failure is a protocol violation of the peer's: EPROTO. */
static void mark_protocol(lz_error **err)
{
    if (err && *err)
        (*err)->errnum = EPROTO;
}

/* Does the datagram consist of whole TLS records? Every record (plaintext
 * or protected) is a 5-byte header whose last two bytes are the length of
 * what follows. This is checked here, before OpenSSL sees the bytes,
 * because OpenSSL takes a cut record from the memory BIO into its own
 * buffer and reports nothing: a datagram cut after a record's header, or
 * one whose length field was enlarged, opened as "no message" and left the
 * record to be completed by the next datagram (found by
 * tests/unit/test_session_channel.c on OpenSSL 3.0). */
static bool whole_records(const uint8_t *in, size_t in_len)
{
    size_t pos = 0;
    while (pos <= in_len && in_len - pos >= 5)
        pos += 5 + (((size_t) in[pos + 3] << 8) | in[pos + 4]);
    return pos == in_len;
}

/* Feed one received datagram to the SSL object. */
static int feed(lz_tls_channel *ch, const uint8_t *in, size_t in_len, lz_error **err)
{
    if (in_len > LZ_TLS_DATAGRAM_MAX)
        return lz_error_set(err, EPROTO, "a TLS datagram of %zu bytes (at most %d)", in_len,
                            LZ_TLS_DATAGRAM_MAX);
    if (!whole_records(in, in_len)) {
        ch->input_failed = true;
        return lz_error_set(err, EPROTO, "a TLS datagram ends inside a record");
    }
    if (in_len && BIO_write(ch->in, in, (int) in_len) != (int) in_len)
        return lz_tls_error(err, NULL, "cannot take a TLS datagram");
    return 0;
}

/* After the SSL object took a datagram (of whole records, feed()): bytes
 * left in the input BIO (the handshake ended before the datagram did), or
 * bytes the SSL object holds unprocessed in its own read buffer, are more
 * than the datagram may carry at this point. */
static int check_whole_records(lz_tls_channel *ch, lz_error **err)
{
    if (BIO_ctrl_pending(ch->in) == 0 && !SSL_has_pending(ch->ssl))
        return 0;
    (void) BIO_reset(ch->in);
    ch->input_failed = true;
    return lz_error_set(err, EPROTO, "a TLS datagram holds more records than it may here");
}

static int check_input(lz_tls_channel *ch, lz_error **err)
{
    if (!ch->input_failed)
        return 0;
    return lz_error_set(err, EPROTO, "the session channel already refused a TLS datagram");
}

int lz_tls_channel_handshake(lz_tls_channel *ch, const uint8_t *in, size_t in_len,
                             uint8_t out[LZ_TLS_DATAGRAM_MAX], size_t *out_len, lz_error **err)
{
    *out_len = 0;
    if (ch->established)
        return lz_error_set(err, EINVAL, "the TLS handshake is already complete");
    if (check_input(ch, err) < 0 || feed(ch, in, in_len, err) < 0)
        return -1;
    ERR_clear_error();
    int r = SSL_do_handshake(ch->ssl);
    int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(ch->ssl, r);
    /* The alert that tells the peer why goes out on failure too. */
    lz_error *out_err = NULL;
    int took = take_output(ch, out, out_len, &out_err);
    if (r == 1) {
        if (took < 0)
            return pass_error(err, out_err);
        if (check_whole_records(ch, err) < 0)
            return -1;
        ch->established = true;
        return 1;
    }
    if (e == SSL_ERROR_WANT_READ) {
        if (took < 0)
            return pass_error(err, out_err);
        if (check_whole_records(ch, err) < 0)
            return -1;
        return 0;
    }
    lz_error_free(out_err);
    lz_tls_error(err, ch->ssl, "the TLS handshake of the session channel failed");
    mark_protocol(err);
    return -1;
}

int lz_tls_channel_seal(lz_tls_channel *ch, const uint8_t *msg, size_t len,
                        uint8_t out[LZ_TLS_DATAGRAM_MAX], size_t *out_len, lz_error **err)
{
    *out_len = 0;
    if (!ch->established)
        return lz_error_set(err, EINVAL, "TLS is not established on the session channel");
    if (len == 0 || len > LZ_WIRE_MAX)
        return lz_error_set(err, EMSGSIZE, "cannot seal a message of %zu bytes", len);
    ERR_clear_error();
    size_t written = 0;
    if (SSL_write_ex(ch->ssl, msg, len, &written) != 1 || written != len)
        return lz_tls_error(err, ch->ssl, "cannot encrypt a session message");
    return take_output(ch, out, out_len, err);
}

int lz_tls_channel_open(lz_tls_channel *ch, const uint8_t *in, size_t in_len,
                        uint8_t out[LZ_WIRE_MAX], size_t *out_len, lz_error **err)
{
    *out_len = 0;
    if (!ch->established)
        return lz_error_set(err, EINVAL, "TLS is not established on the session channel");
    if (check_input(ch, err) < 0 || feed(ch, in, in_len, err) < 0)
        return -1;
    size_t n = 0;
    for (;;) {
        ERR_clear_error();
        size_t got = 0;
        uint8_t extra;
        /* Past one message's worth, one byte more is the proof of too much. */
        int r = n < LZ_WIRE_MAX ? SSL_read_ex(ch->ssl, out + n, LZ_WIRE_MAX - n, &got)
                                : SSL_read_ex(ch->ssl, &extra, 1, &got);
        /* Reading must neither take a handshake message nor make OpenSSL
         * write anything (its answer would pile up until the next seal);
         * on a failed read what it wrote is the alert, reported below. */
        int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(ch->ssl, r);
        bool read_ok = e == SSL_ERROR_NONE || e == SSL_ERROR_WANT_READ;
        if (ch->post_handshake || (read_ok && BIO_ctrl_pending(ch->out) != 0)) {
            (void) BIO_reset(ch->in);
            (void) BIO_reset(ch->out);
            ch->input_failed = true;
            return lz_error_set(err, EPROTO,
                                "a TLS handshake message (a KeyUpdate, say) after "
                                "the handshake: the session channel takes none");
        }
        if (r == 1) {
            if (n == LZ_WIRE_MAX) {
                (void) BIO_reset(ch->in);
                ch->input_failed = true; /* the rest would open as the next message */
                return lz_error_set(err, EPROTO,
                                    "a TLS datagram holds more than one message "
                                    "may (%d bytes)",
                                    LZ_WIRE_MAX);
            }
            n += got;
            continue;
        }
        if (e == SSL_ERROR_WANT_READ)
            break;
        ch->input_failed = true;
        if (e == SSL_ERROR_ZERO_RETURN)
            return lz_error_set(err, EPROTO, "the peer closed TLS on the session channel");
        lz_tls_error(err, ch->ssl, "a session message failed TLS");
        mark_protocol(err);
        return -1;
    }
    if (check_whole_records(ch, err) < 0)
        return -1;
    *out_len = n;
    return 0;
}

/* ---- on a socket ------------------------------------------------------- */

int lz_tls_proto_send(lz_tls_channel *ch, int sock, const lz_wbuf *b, const int *fds, size_t n_fds,
                      lz_error **err)
{
    if (b->overflow)
        return lz_error_set(err, EMSGSIZE, "cannot send a control message: it is too large");
    size_t n;
    if (lz_tls_channel_seal(ch, b->data, b->len, datagram, &n, err) < 0)
        return -1;
    return lz_wire_send_bytes(sock, datagram, n, fds, n_fds, err);
}

void lz_tls_proto_post(lz_tls_channel *ch, int sock, const lz_wbuf *b)
{
    lz_best_effort(lz_tls_proto_send(ch, sock, b, NULL, 0, NULL));
}

int lz_tls_proto_recv(lz_tls_channel *ch, int sock, lz_proto_dir dir, unsigned state,
                      lz_proto_msg *m, lz_error **err)
{
    m->nfds = 0;
    m->entry = NULL;
    ssize_t n = lz_wire_recv_bytes(sock, datagram, sizeof(datagram), m->fds, LZ_WIRE_MAX_FDS,
                                   &m->nfds, err);
    if (n <= 0) {
        m->nfds = 0; /* lz_wire_recv_bytes closed what it refused */
        return (int) n;
    }
    size_t len;
    if (lz_tls_channel_open(ch, datagram, (size_t) n, m->buf, &len, err) < 0) {
        lz_proto_msg_clear(m);
        return -1;
    }
    if (len == 0) {
        if (m->nfds) {
            lz_proto_msg_clear(m);
            return lz_error_set(err, EPROTO, "descriptors on a datagram without a message");
        }
        return lz_error_set(err, EAGAIN, "a datagram without a message");
    }
    m->len = len;
    return lz_proto_admit_msg(dir, state, m, err);
}
