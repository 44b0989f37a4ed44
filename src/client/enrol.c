/* SPDX-License-Identifier: Apache-2.0
 *
 * The enrolment and the TLS handshake of the session channel
 * (docs/session-channel.md). In the clear: ENROLL with a fresh Ed25519 key
 * of this CLI's own (its private half never leaves this process), and
 * ENROLLED with the session id and the certificate the coordinator issued
 * for it. The coordinator is trusted only through the CA of the Domain's
 * publication (LZ_TRUST_PUBLICATION_FILE, in the 0700 runtime directory):
 * the certificate issued must be that CA's, and so must the server
 * certificate of the handshake (lz_tls_client_ctx).
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "client/internal.h"
#include "protocol/wire.h"
#include "trust/anchor.h"
#include "trust/publication.h"

int lz_client_secure(lz_client *cl, const char *domain_hex, int dirfd, const char *dir_label)
{
    cl->result = LZ_ATTEMPT_DONE;
    cl->enrolling = true;
    /* Enrolment has no terminal: its failures are reported as a plain
     * client's, without the raw terminal's CR LF. */
    bool interactive = cl->interactive;
    cl->interactive = false;
    lz_error *err = NULL;
    EVP_PKEY *key = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    uint8_t pub[LZ_MSG_ENROLL_KEY_LEN];
    size_t pub_len = sizeof(pub);
    lz_trust_publication publ = { 0 };
    lz_tls_credential *cred = NULL;
    SSL_CTX *ctx = NULL;
    int r = -1;
    if (!key || EVP_PKEY_get_raw_public_key(key, pub, &pub_len) != 1 || pub_len != sizeof(pub)) {
        lz_tls_error(&err, NULL, "cannot make this session's Ed25519 key");
        goto fail;
    }
    lz_wbuf b;
    lz_msg_enroll_encode(&b, LZ_SESSION_PROTOCOL_VERSION, pub);
    if (lz_wire_send(cl->sock, &b, NULL, 0, &err) < 0) {
        /* The coordinator closed at once (tearing down): like a refusal to
         * retry, decided by what it left to read. */
        lz_error_free(lz_error_take(&err));
    }
    while (!cl->enrolled && !cl->ended)
        lz_client_receive(cl);
    if (!cl->enrolled)
        goto out; /* reported by lz_client_receive, or a silent retry */
    if (lz_trust_publication_read(dirfd, dir_label, &publ, &err) < 0)
        goto fail;
    if (strcmp(publ.domain_id, domain_hex) != 0 ||
        publ.protocol_version != LZ_SESSION_PROTOCOL_VERSION) {
        lz_error_set(&err, EPROTO,
                     "the Trust Anchor publication in %s is for another Domain or "
                     "protocol version",
                     dir_label);
        lz_error_hint(&err, "use the same Lazaret version for every terminal of a Domain");
        goto fail;
    }
    cred = lz_tls_client_credential(publ.ca, cl->enrolled_id, key, cl->cert, cl->cert_len, &err);
    if (!cred || !(ctx = lz_tls_client_ctx(publ.ca, cred, &err)) ||
        !(cl->tls = lz_tls_channel_new(ctx, false, &err)))
        goto fail;
    static uint8_t in[LZ_TLS_DATAGRAM_MAX], out[LZ_TLS_DATAGRAM_MAX];
    size_t in_len = 0, out_len = 0;
    for (;;) {
        int h = lz_tls_channel_handshake(cl->tls, in_len ? in : NULL, in_len, out, &out_len, &err);
        if (out_len && lz_wire_send_bytes(cl->sock, out, out_len, NULL, 0, h < 0 ? NULL : &err) < 0)
            goto fail;
        if (h < 0)
            goto fail;
        if (h == 1)
            break;
        int fds[LZ_WIRE_MAX_FDS];
        size_t nfds = 0;
        ssize_t n = lz_wire_recv_bytes(cl->sock, in, sizeof(in), fds, LZ_WIRE_MAX_FDS, &nfds, &err);
        for (size_t i = 0; i < nfds; i++)
            close(fds[i]);
        if (n < 0)
            goto fail;
        if (n == 0 && cl->retry_silently) {
            /* Closed right after ENROLLED without a word: the generation
             * began its teardown meanwhile (it refuses nothing it cannot
             * seal). Like a refusal to retry: join the next one. */
            cl->result = LZ_ATTEMPT_RETRY;
            lz_tls_channel_free(cl->tls);
            cl->tls = NULL;
            goto out;
        }
        if (n == 0 || nfds) {
            lz_error_set(&err, EPROTO, "the Session Coordinator %s during the TLS handshake",
                         n == 0 ? "closed the connection" : "sent descriptors");
            goto fail;
        }
        in_len = (size_t) n;
    }
    r = 0;
    /* The session proper starts: its first message is still to be heard. */
    cl->enrolling = false;
    cl->heard = cl->ended = false;
    cl->result = LZ_ATTEMPT_DONE;
    goto out;
fail:
    lz_error_prefix(&err, "cannot secure the session channel to the Domain's coordinator");
    if (err && !err->hint)
        lz_error_hint(&err, "run the command again; %s may say more", cl->log_label);
    lz_error_report(err, cl->ui->notices());
    lz_error_free(err);
    lz_tls_channel_free(cl->tls);
    cl->tls = NULL;
    cl->result = LZ_ATTEMPT_DONE;
out:
    cl->interactive = interactive;
    explicit_bzero(cl->cert, sizeof(cl->cert));
    SSL_CTX_free(ctx);
    lz_tls_credential_free(cred);
    EVP_PKEY_free(key);
    lz_trust_publication_clear(&publ);
    return r;
}
