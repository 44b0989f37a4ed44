/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests for src/trust/anchor.c, the Trust Anchor's X.509/TLS part.
 * Every handshake runs over a real socketpair(AF_UNIX, SOCK_STREAM), both
 * ends non-blocking and driven in one thread (the coordinator's event loop
 * will drive its end the same way).
 *
 *  - control: the anchor's server context and a client credential it issued
 *    complete a TLS 1.3 handshake, and application data moves both ways;
 *    each peer sees the other's role and subject id;
 *  - refused, each with its control (the same attacker context, given the
 *    right credential, gets through): a client without a certificate; a
 *    client certificate of another anchor (another generation, and one with
 *    the very same identity strings, so the same CA name); a server
 *    certificate of another anchor; a client presenting the server's
 *    credential and a server presenting a client's (refused by the EKU
 *    purpose check), and certificates whose EKU fits but whose role does
 *    not (refused by the role check alone); TLS 1.2 forced on the client
 *    (control: a server that allows 1.2 completes it);
 *  - two anchors never share a CA key, serial or fingerprint; the CA's
 *    extensions and validity are as specified;
 *  - destroy then create works; malformed identities and session ids are
 *    refused; a credential of the wrong role is refused by the constructors;
 *  - the CA certificate is accepted from DER only with the manifest's hash;
 *  - a credential issued for a public key the client generated;
 *  - with a secure heap, the private keys live in it and are released at
 *    destroy.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "common/error.h"
#include "protocol/messages.h"
#include "trust/anchor.h"

/* ---- helpers ------------------------------------------------------------ */

#define DOMAIN_ID "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
#define NONCE_A "0123456789abcdef0123456789abcdef"
#define NONCE_B "fedcba9876543210fedcba9876543210"
#define SESSION "aaaaaaaabbbbbbbbccccccccdddddddd"

static lz_trust_anchor *anchor(const char *gen, const char *nonce)
{
    lz_generation_identity id = { "claude", DOMAIN_ID, gen, nonce };
    lz_error *e = NULL;
    lz_trust_anchor *a = lz_trust_anchor_create(&id, &e);
    if (!a)
        fail_msg("lz_trust_anchor_create: %s", e->message);
    return a;
}

static lz_tls_credential *client_cred(lz_trust_anchor *a, const char *session)
{
    lz_error *e = NULL;
    lz_tls_credential *c = lz_trust_anchor_issue_client(a, session, &e);
    if (!c)
        fail_msg("lz_trust_anchor_issue_client: %s", e->message);
    return c;
}

static SSL_CTX *server_ctx(X509 *ca, const lz_tls_credential *cred)
{
    lz_error *e = NULL;
    SSL_CTX *c = lz_tls_server_ctx(ca, cred, &e);
    if (!c)
        fail_msg("lz_tls_server_ctx: %s", e->message);
    return c;
}

static SSL_CTX *client_ctx(X509 *ca, const lz_tls_credential *cred)
{
    lz_error *e = NULL;
    SSL_CTX *c = lz_tls_client_ctx(ca, cred, &e);
    if (!c)
        fail_msg("lz_tls_client_ctx: %s", e->message);
    return c;
}

/* An attacker's (or a careless peer's) context: trusts `trust`, presents
 * key/cert if given, verifies the peer's chain but checks no role. */
static SSL_CTX *raw_ctx(bool server, X509 *trust, EVP_PKEY *key, X509 *cert, int minv, int maxv)
{
    SSL_CTX *c = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    assert_non_null(c);
    assert_int_equal(SSL_CTX_set_min_proto_version(c, minv), 1);
    assert_int_equal(SSL_CTX_set_max_proto_version(c, maxv), 1);
    if (cert) {
        assert_int_equal(SSL_CTX_use_certificate(c, cert), 1);
        assert_int_equal(SSL_CTX_use_PrivateKey(c, key), 1);
    }
    assert_int_equal(X509_STORE_add_cert(SSL_CTX_get_cert_store(c), trust), 1);
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER | (server ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0), NULL);
    return c;
}

typedef struct side {
    SSL *ssl;
    bool done, failed;
    int reason;  /* ERR_GET_REASON of the first queued error at failure */
    long verify; /* SSL_get_verify_result at failure */
    char *msg;   /* lz_tls_error's message at failure */
} side;

typedef struct conn {
    int fd[2];
    side s, c; /* server, client */
} conn;

static void step(side *p, const char *who)
{
    if (p->done || p->failed)
        return;
    ERR_clear_error();
    int r = SSL_do_handshake(p->ssl);
    if (r == 1) {
        p->done = true;
        return;
    }
    int e = SSL_get_error(p->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return;
    p->failed = true;
    p->reason = ERR_GET_REASON(ERR_peek_error());
    p->verify = SSL_get_verify_result(p->ssl);
    lz_error *err = NULL;
    assert_int_equal(lz_tls_error(&err, p->ssl, "the %s's TLS handshake failed", who), -1);
    p->msg = strdup(err->message);
    lz_error_free(err);
}

/* Connect a server and a client context over a fresh socketpair and drive
 * both handshakes until each has finished or failed. */
static void handshake(conn *k, SSL_CTX *sctx, SSL_CTX *cctx)
{
    memset(k, 0, sizeof(*k));
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, k->fd), 0);
    k->s.ssl = SSL_new(sctx);
    k->c.ssl = SSL_new(cctx);
    assert_non_null(k->s.ssl);
    assert_non_null(k->c.ssl);
    assert_int_equal(SSL_set_fd(k->s.ssl, k->fd[0]), 1);
    assert_int_equal(SSL_set_fd(k->c.ssl, k->fd[1]), 1);
    SSL_set_accept_state(k->s.ssl);
    SSL_set_connect_state(k->c.ssl);
}

static void drive(conn *k)
{
    for (int i = 0; i < 200; i++) {
        step(&k->c, "client");
        step(&k->s, "server");
        if ((k->s.done || k->s.failed) && (k->c.done || k->c.failed))
            return;
    }
    fail_msg("the handshake stalled");
}

static void conn_close(conn *k)
{
    SSL_free(k->s.ssl);
    SSL_free(k->c.ssl);
    free(k->s.msg);
    free(k->c.msg);
    close(k->fd[0]);
    close(k->fd[1]);
    ERR_clear_error();
}

/* Send msg from one end and read it at the other; false if either fails. */
static bool xfer(SSL *from, SSL *to, const char *msg)
{
    size_t n = strlen(msg);
    int w = -1;
    for (int i = 0; i < 100 && w <= 0; i++) {
        w = SSL_write(from, msg, (int) n);
        if (w <= 0) {
            int e = SSL_get_error(from, w);
            if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
                return false;
        }
    }
    if (w != (int) n)
        return false;
    char buf[64];
    for (int i = 0; i < 100; i++) {
        int r = SSL_read(to, buf, sizeof(buf));
        if (r > 0)
            return (size_t) r == n && memcmp(buf, msg, n) == 0;
        int e = SSL_get_error(to, r);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
            return false;
    }
    return false;
}

/* After a refusal: the refused side's data never arrives (the server never
 * reads what the client sends, the client reads the alert, not data). */
static void assert_no_traffic(conn *k)
{
    assert_false(xfer(k->c.ssl, k->s.ssl, "ping"));
    assert_false(xfer(k->s.ssl, k->c.ssl, "pong"));
}

static void assert_works(SSL_CTX *sctx, SSL_CTX *cctx)
{
    conn k;
    handshake(&k, sctx, cctx);
    drive(&k);
    if (k.s.failed || k.c.failed)
        fail_msg("control handshake failed: server: %s; client: %s", k.s.msg ? k.s.msg : "-",
                 k.c.msg ? k.c.msg : "-");
    assert_true(xfer(k.c.ssl, k.s.ssl, "ping"));
    assert_true(xfer(k.s.ssl, k.c.ssl, "pong"));
    conn_close(&k);
}

static char *name_entry(X509 *x, int nid)
{
    X509_NAME *n = X509_get_subject_name(x);
    int i = X509_NAME_get_index_by_NID(n, nid, -1);
    assert_true(i >= 0);
    const ASN1_STRING *s = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(n, i));
    return strndup((const char *) ASN1_STRING_get0_data(s), (size_t) ASN1_STRING_length(s));
}

static void assert_name_entry(X509 *x, int nid, const char *want)
{
    char *got = name_entry(x, nid);
    assert_string_equal(got, want);
    free(got);
}

/* ---- tests -------------------------------------------------------------- */

static void test_handshake_and_data(void **state)
{
    (void) state;
    lz_trust_anchor *a = anchor("7", NONCE_A);
    lz_tls_credential *cc = client_cred(a, SESSION);
    SSL_CTX *sctx = server_ctx(lz_trust_anchor_ca_cert(a), lz_trust_anchor_server(a));
    SSL_CTX *cctx = client_ctx(lz_trust_anchor_ca_cert(a), cc);

    conn k;
    handshake(&k, sctx, cctx);
    drive(&k);
    assert_true(k.s.done);
    assert_true(k.c.done);
    assert_int_equal(SSL_version(k.s.ssl), TLS1_3_VERSION);
    assert_int_equal(SSL_version(k.c.ssl), TLS1_3_VERSION);
    assert_int_equal(SSL_get_verify_result(k.s.ssl), X509_V_OK);
    assert_int_equal(SSL_get_verify_result(k.c.ssl), X509_V_OK);
    /* each side sees who the other is */
    X509 *pc = SSL_get0_peer_certificate(k.s.ssl);
    X509 *ps = SSL_get0_peer_certificate(k.c.ssl);
    assert_non_null(pc);
    assert_non_null(ps);
    assert_name_entry(pc, NID_organizationalUnitName, "ClientCLI");
    assert_name_entry(pc, NID_commonName, SESSION);
    assert_name_entry(pc, NID_dnQualifier, NONCE_A);
    assert_name_entry(ps, NID_organizationalUnitName, "SessionCoordinator");
    /* application data both ways, twice */
    assert_true(xfer(k.c.ssl, k.s.ssl, "ping"));
    assert_true(xfer(k.s.ssl, k.c.ssl, "pong"));
    assert_true(xfer(k.c.ssl, k.s.ssl, "ping again"));
    assert_true(xfer(k.s.ssl, k.c.ssl, "pong again"));
    /* no resumption material was handed out */
    assert_false(SSL_session_reused(k.c.ssl));
    conn_close(&k);

    SSL_CTX_free(sctx);
    SSL_CTX_free(cctx);
    lz_tls_credential_free(cc);
    lz_trust_anchor_destroy(a);
}

static void test_client_without_certificate(void **state)
{
    (void) state;
    lz_trust_anchor *a = anchor("7", NONCE_A);
    X509 *ca = lz_trust_anchor_ca_cert(a);
    lz_tls_credential *cc = client_cred(a, SESSION);
    SSL_CTX *sctx = server_ctx(ca, lz_trust_anchor_server(a));

    /* control: the attacker's context with a certificate gets through */
    SSL_CTX *with = raw_ctx(false, ca, cc->key, cc->cert, TLS1_3_VERSION, TLS1_3_VERSION);
    assert_works(sctx, with);

    SSL_CTX *without = raw_ctx(false, ca, NULL, NULL, TLS1_3_VERSION, TLS1_3_VERSION);
    conn k;
    handshake(&k, sctx, without);
    drive(&k);
    assert_true(k.s.failed);
    assert_int_equal(k.s.reason, SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE);
    assert_non_null(strstr(k.s.msg, "the server's TLS handshake failed: OpenSSL: "));
    assert_non_null(strstr(k.s.msg, "peer did not return a certificate"));
    assert_no_traffic(&k);
    conn_close(&k);

    SSL_CTX_free(with);
    SSL_CTX_free(without);
    SSL_CTX_free(sctx);
    lz_tls_credential_free(cc);
    lz_trust_anchor_destroy(a);
}

/* A client credential of `other` presented to a's coordinator. */
static void refused_client_of(lz_trust_anchor *a, lz_trust_anchor *other)
{
    X509 *ca = lz_trust_anchor_ca_cert(a);
    lz_tls_credential *foreign = client_cred(other, SESSION);
    SSL_CTX *sctx = server_ctx(ca, lz_trust_anchor_server(a));
    /* the client trusts a's CA, so only the server's check can refuse */
    SSL_CTX *cctx = client_ctx(ca, foreign);
    conn k;
    handshake(&k, sctx, cctx);
    drive(&k);
    assert_true(k.s.failed);
    assert_false(k.s.done);
    assert_true(k.s.verify == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY ||
                k.s.verify == X509_V_ERR_CERT_SIGNATURE_FAILURE);
    assert_non_null(strstr(k.s.msg, "the peer's certificate was refused: "));
    assert_no_traffic(&k);
    conn_close(&k);
    SSL_CTX_free(sctx);
    SSL_CTX_free(cctx);
    lz_tls_credential_free(foreign);
}

static void test_client_of_another_generation(void **state)
{
    (void) state;
    lz_trust_anchor *a = anchor("7", NONCE_A);
    lz_trust_anchor *next = anchor("8", NONCE_B);
    /* the same identity strings: the same CA subject name, another key */
    lz_trust_anchor *twin = anchor("7", NONCE_A);
    assert_int_equal(X509_NAME_cmp(X509_get_subject_name(lz_trust_anchor_ca_cert(a)),
                                   X509_get_subject_name(lz_trust_anchor_ca_cert(twin))),
                     0);

    /* control: a's own client credential through the same path */
    lz_tls_credential *own = client_cred(a, SESSION);
    SSL_CTX *sctx = server_ctx(lz_trust_anchor_ca_cert(a), lz_trust_anchor_server(a));
    SSL_CTX *cctx = client_ctx(lz_trust_anchor_ca_cert(a), own);
    assert_works(sctx, cctx);
    SSL_CTX_free(sctx);
    SSL_CTX_free(cctx);
    lz_tls_credential_free(own);

    refused_client_of(a, next);
    refused_client_of(a, twin);

    lz_trust_anchor_destroy(twin);
    lz_trust_anchor_destroy(next);
    lz_trust_anchor_destroy(a);
}

static void test_server_of_another_generation(void **state)
{
    (void) state;
    lz_trust_anchor *a = anchor("7", NONCE_A);
    lz_trust_anchor *twin = anchor("7", NONCE_A);
    lz_trust_anchor *old = anchor("6", NONCE_B);
    lz_tls_credential *cc = client_cred(a, SESSION);
    SSL_CTX *cctx = client_ctx(lz_trust_anchor_ca_cert(a), cc);

    /* control: a's own coordinator */
    SSL_CTX *own = server_ctx(lz_trust_anchor_ca_cert(a), lz_trust_anchor_server(a));
    assert_works(own, cctx);
    SSL_CTX_free(own);

    lz_trust_anchor *others[] = { twin, old };
    for (size_t i = 0; i < 2; i++) {
        /* the impostor trusts a's CA, so only the client's check can refuse */
        SSL_CTX *sctx = server_ctx(lz_trust_anchor_ca_cert(a), lz_trust_anchor_server(others[i]));
        conn k;
        handshake(&k, sctx, cctx);
        drive(&k);
        assert_true(k.c.failed);
        assert_false(k.c.done);
        assert_true(k.c.verify == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY ||
                    k.c.verify == X509_V_ERR_CERT_SIGNATURE_FAILURE);
        assert_false(k.s.done); /* the impostor never sees the client's Finished */
        assert_no_traffic(&k);
        conn_close(&k);
        SSL_CTX_free(sctx);
    }

    SSL_CTX_free(cctx);
    lz_tls_credential_free(cc);
    lz_trust_anchor_destroy(old);
    lz_trust_anchor_destroy(twin);
    lz_trust_anchor_destroy(a);
}

static void test_client_with_wrong_role(void **state)
{
    (void) state;
    lz_trust_anchor *a = anchor("7", NONCE_A);
    X509 *ca = lz_trust_anchor_ca_cert(a);
    const lz_tls_credential *srv = lz_trust_anchor_server(a);
    SSL_CTX *sctx = server_ctx(ca, srv);
    lz_error *e = NULL;

    /* control: a right client credential through the same raw context */
    lz_tls_credential *cc = client_cred(a, SESSION);
    SSL_CTX *good = raw_ctx(false, ca, cc->key, cc->cert, TLS1_3_VERSION, TLS1_3_VERSION);
    assert_works(sctx, good);

    /* our constructor will not even build a client with the server's role */
    assert_null(lz_tls_client_ctx(ca, srv, &e));
    assert_non_null(strstr(e->message, "needs the CA certificate and a ClientCLI credential"));
    lz_error_free(e);
    e = NULL;

    /* the server's own credential (serverAuth, role SessionCoordinator) */
    SSL_CTX *stolen = raw_ctx(false, ca, srv->key, srv->cert, TLS1_3_VERSION, TLS1_3_VERSION);
    conn k;
    handshake(&k, sctx, stolen);
    drive(&k);
    assert_true(k.s.failed);
    assert_int_equal(k.s.verify, X509_V_ERR_INVALID_PURPOSE);
    assert_no_traffic(&k);
    conn_close(&k);

    /* clientAuth, so the purpose check passes, but role SessionCoordinator:
     * only the role check refuses it */
    lz_tls_credential *odd = lz_trust_anchor_issue_mismatched(a, LZ_TLS_ROLE_COORDINATOR,
                                                              LZ_TLS_ROLE_CLIENT, SESSION, &e);
    assert_non_null(odd);
    SSL_CTX *oddc = raw_ctx(false, ca, odd->key, odd->cert, TLS1_3_VERSION, TLS1_3_VERSION);
    handshake(&k, sctx, oddc);
    drive(&k);
    assert_true(k.s.failed);
    assert_int_equal(k.s.verify, X509_V_ERR_APPLICATION_VERIFICATION);
    assert_non_null(strstr(k.s.msg, "the peer's certificate does not carry the role ClientCLI"));
    assert_no_traffic(&k);
    conn_close(&k);

    SSL_CTX_free(oddc);
    lz_tls_credential_free(odd);
    SSL_CTX_free(stolen);
    SSL_CTX_free(good);
    lz_tls_credential_free(cc);
    SSL_CTX_free(sctx);
    lz_trust_anchor_destroy(a);
}

static void test_server_with_wrong_role(void **state)
{
    (void) state;
    lz_trust_anchor *a = anchor("7", NONCE_A);
    X509 *ca = lz_trust_anchor_ca_cert(a);
    const lz_tls_credential *srv = lz_trust_anchor_server(a);
    lz_tls_credential *cc = client_cred(a, SESSION);
    lz_tls_credential *other = client_cred(a, "00000000111111112222222233333333");
    SSL_CTX *cctx = client_ctx(ca, cc);
    lz_error *e = NULL;

    /* control: the raw server context with the coordinator's credential */
    SSL_CTX *good = raw_ctx(true, ca, srv->key, srv->cert, TLS1_3_VERSION, TLS1_3_VERSION);
    assert_works(good, cctx);

    assert_null(lz_tls_server_ctx(ca, other, &e));
    assert_non_null(strstr(e->message, "needs the CA certificate and a SessionCoordinator"));
    lz_error_free(e);
    e = NULL;

    /* another session's client credential posing as the coordinator */
    SSL_CTX *stolen = raw_ctx(true, ca, other->key, other->cert, TLS1_3_VERSION, TLS1_3_VERSION);
    conn k;
    handshake(&k, stolen, cctx);
    drive(&k);
    assert_true(k.c.failed);
    assert_int_equal(k.c.verify, X509_V_ERR_INVALID_PURPOSE);
    assert_false(k.s.done);
    conn_close(&k);

    /* serverAuth but role ClientCLI: only the role check refuses it */
    lz_tls_credential *odd = lz_trust_anchor_issue_mismatched(a, LZ_TLS_ROLE_CLIENT,
                                                              LZ_TLS_ROLE_COORDINATOR, SESSION, &e);
    assert_non_null(odd);
    SSL_CTX *odds = raw_ctx(true, ca, odd->key, odd->cert, TLS1_3_VERSION, TLS1_3_VERSION);
    handshake(&k, odds, cctx);
    drive(&k);
    assert_true(k.c.failed);
    assert_int_equal(k.c.verify, X509_V_ERR_APPLICATION_VERIFICATION);
    assert_non_null(strstr(k.c.msg, "does not carry the role SessionCoordinator"));
    assert_false(k.s.done);
    conn_close(&k);

    SSL_CTX_free(odds);
    lz_tls_credential_free(odd);
    SSL_CTX_free(stolen);
    SSL_CTX_free(good);
    SSL_CTX_free(cctx);
    lz_tls_credential_free(other);
    lz_tls_credential_free(cc);
    lz_trust_anchor_destroy(a);
}

static void test_tls12_refused(void **state)
{
    (void) state;
    lz_trust_anchor *a = anchor("7", NONCE_A);
    X509 *ca = lz_trust_anchor_ca_cert(a);
    const lz_tls_credential *srv = lz_trust_anchor_server(a);
    lz_tls_credential *cc = client_cred(a, SESSION);
    SSL_CTX *cctx = client_ctx(ca, cc);

    /* control: a server that allows TLS 1.2 completes a forced-1.2 client */
    SSL_CTX *lax = raw_ctx(true, ca, srv->key, srv->cert, TLS1_2_VERSION, TLS1_3_VERSION);
    conn k;
    handshake(&k, lax, cctx);
    assert_int_equal(SSL_set_min_proto_version(k.c.ssl, TLS1_2_VERSION), 1);
    assert_int_equal(SSL_set_max_proto_version(k.c.ssl, TLS1_2_VERSION), 1);
    drive(&k);
    if (!k.s.done || !k.c.done)
        fail_msg("TLS 1.2 control failed: server: %s; client: %s", k.s.msg ? k.s.msg : "-",
                 k.c.msg ? k.c.msg : "-");
    assert_int_equal(SSL_version(k.c.ssl), TLS1_2_VERSION);
    assert_true(xfer(k.c.ssl, k.s.ssl, "ping"));
    conn_close(&k);

    /* the anchor's server refuses it */
    SSL_CTX *sctx = server_ctx(ca, srv);
    handshake(&k, sctx, cctx);
    assert_int_equal(SSL_set_min_proto_version(k.c.ssl, TLS1_2_VERSION), 1);
    assert_int_equal(SSL_set_max_proto_version(k.c.ssl, TLS1_2_VERSION), 1);
    drive(&k);
    assert_true(k.s.failed);
    assert_true(k.c.failed);
    assert_int_equal(k.s.reason, SSL_R_UNSUPPORTED_PROTOCOL);
    conn_close(&k);

    SSL_CTX_free(sctx);
    SSL_CTX_free(lax);
    SSL_CTX_free(cctx);
    lz_tls_credential_free(cc);
    lz_trust_anchor_destroy(a);
}

static void raw_pub(X509 *x, uint8_t out[32])
{
    size_t n = 32;
    assert_int_equal(EVP_PKEY_get_raw_public_key(X509_get0_pubkey(x), out, &n), 1);
    assert_int_equal(n, 32);
}

static void test_anchors_distinct_and_ca_shape(void **state)
{
    (void) state;
    lz_trust_anchor *a = anchor("7", NONCE_A);
    lz_trust_anchor *b = anchor("7", NONCE_A); /* even with the same identity */
    X509 *ca = lz_trust_anchor_ca_cert(a), *cb = lz_trust_anchor_ca_cert(b);
    uint8_t pa[32], pb[32];
    raw_pub(ca, pa);
    raw_pub(cb, pb);
    assert_memory_not_equal(pa, pb, 32);
    raw_pub(lz_trust_anchor_server(a)->cert, pa);
    raw_pub(lz_trust_anchor_server(b)->cert, pb);
    assert_memory_not_equal(pa, pb, 32);
    assert_int_not_equal(ASN1_INTEGER_cmp(X509_get0_serialNumber(ca), X509_get0_serialNumber(cb)),
                         0);
    assert_int_not_equal(ASN1_INTEGER_cmp(X509_get0_serialNumber(lz_trust_anchor_server(a)->cert),
                                          X509_get0_serialNumber(ca)),
                         0);
    assert_memory_not_equal(lz_trust_anchor_manifest(a)->tls_ca_sha256,
                            lz_trust_anchor_manifest(b)->tls_ca_sha256, LZ_TRUST_SHA256_LEN);

    /* serial: positive, at most 128 bits */
    BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(ca), NULL);
    assert_non_null(bn);
    assert_false(BN_is_negative(bn));
    assert_false(BN_is_zero(bn));
    assert_true(BN_num_bits(bn) <= 128);
    /* all 128 bits random: neither half is zero (false alarm: 2^-63) */
    uint8_t sb[16];
    assert_int_equal(BN_bn2binpad(bn, sb, sizeof(sb)), 16);
    assert_memory_not_equal(sb, (const uint8_t[8]){ 0 }, 8);
    assert_memory_not_equal(sb + 8, (const uint8_t[8]){ 0 }, 8);
    BN_free(bn);

    /* CA shape: self-signed, CA:TRUE critical, keyCertSign only */
    assert_int_equal(X509_check_ca(ca), 1);
    assert_int_equal(X509_check_issued(ca, ca), X509_V_OK);
    int crit = -1;
    BASIC_CONSTRAINTS *bc = X509_get_ext_d2i(ca, NID_basic_constraints, &crit, NULL);
    assert_non_null(bc);
    assert_true(bc->ca);
    assert_int_equal(crit, 1);
    BASIC_CONSTRAINTS_free(bc);
    assert_int_equal(X509_get_key_usage(ca), KU_KEY_CERT_SIGN);
    assert_name_entry(ca, NID_commonName, "Lazaret generation 7");
    assert_name_entry(ca, NID_dnQualifier, NONCE_A);
    assert_name_entry(ca, NID_organizationalUnitName, "TrustAnchor");
    assert_int_equal(EVP_PKEY_get_id(X509_get0_pubkey(ca)), EVP_PKEY_ED25519);

    /* leaves: not CAs, the EKU of their role */
    X509 *srv = lz_trust_anchor_server(a)->cert;
    assert_int_equal(X509_check_ca(srv), 0);
    assert_int_equal(X509_get_extended_key_usage(srv), XKU_SSL_SERVER);
    lz_tls_credential *cc = client_cred(a, SESSION);
    assert_int_equal(X509_get_extended_key_usage(cc->cert), XKU_SSL_CLIENT);
    assert_int_equal(X509_check_issued(ca, cc->cert), X509_V_OK);
    assert_int_not_equal(X509_check_issued(cb, cc->cert), X509_V_OK);
    lz_tls_credential_free(cc);

    /* validity: now - 60 s .. now + 7 days (a few seconds of slack) */
    int days, secs;
    ASN1_TIME *now = ASN1_TIME_set(NULL, time(NULL));
    assert_int_equal(ASN1_TIME_diff(&days, &secs, now, X509_get0_notBefore(ca)), 1);
    assert_int_equal(days, 0);
    assert_true(secs <= -55 && secs >= -65);
    assert_int_equal(ASN1_TIME_diff(&days, &secs, now, X509_get0_notAfter(ca)), 1);
    assert_true((days == 7 && secs <= 5) || (days == 6 && secs >= 86395));
    ASN1_TIME_free(now);

    lz_trust_anchor_destroy(b);
    lz_trust_anchor_destroy(a);
}

static void test_destroy_then_create(void **state)
{
    (void) state;
    for (int round = 0; round < 2; round++) {
        lz_trust_anchor *a = anchor(round ? "9" : "8", round ? NONCE_B : NONCE_A);
        const lz_trust_manifest *m = lz_trust_anchor_manifest(a);
        assert_int_equal(m->protocol_version, LZ_SESSION_PROTOCOL_VERSION);
        assert_string_equal(m->agent_profile, "claude");
        assert_string_equal(m->domain_id, DOMAIN_ID);
        assert_string_equal(m->generation_id, round ? "9" : "8");
        /* the manifest's hash is the CA certificate's DER's */
        unsigned char *der = NULL;
        int n = i2d_X509(lz_trust_anchor_ca_cert(a), &der);
        assert_true(n > 0);
        uint8_t md[32];
        unsigned int mdn = 0;
        assert_int_equal(EVP_Digest(der, (size_t) n, md, &mdn, EVP_sha256(), NULL), 1);
        assert_memory_equal(md, m->tls_ca_sha256, 32);
        OPENSSL_free(der);

        lz_tls_credential *cc = client_cred(a, SESSION);
        SSL_CTX *sctx = server_ctx(lz_trust_anchor_ca_cert(a), lz_trust_anchor_server(a));
        SSL_CTX *cctx = client_ctx(lz_trust_anchor_ca_cert(a), cc);
        assert_works(sctx, cctx);
        SSL_CTX_free(sctx);
        SSL_CTX_free(cctx);
        lz_tls_credential_free(cc);
        lz_trust_anchor_destroy(a);
    }
}

static void test_bad_identity(void **state)
{
    (void) state;
    const lz_generation_identity bad[] = {
        { "", DOMAIN_ID, "7", NONCE_A },
        { "my agent", DOMAIN_ID, "7", NONCE_A },
        { "claude", "00112233", "7", NONCE_A },
        { "claude", "00112233445566778899AABBCCDDEEFF00112233445566778899aabbccddeeff", "7",
          NONCE_A },
        { "claude", DOMAIN_ID, "", NONCE_A },
        { "claude", DOMAIN_ID, "07", NONCE_A },
        { "claude", DOMAIN_ID, "12345678901234567890", NONCE_A },
        { "claude", DOMAIN_ID, "7x", NONCE_A },
        { "claude", DOMAIN_ID, "7", "0123" },
        { "claude", DOMAIN_ID, "7", NULL },
        { NULL, DOMAIN_ID, "7", NONCE_A },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        lz_error *e = NULL;
        assert_null(lz_trust_anchor_create(&bad[i], &e));
        assert_non_null(e);
        assert_int_equal(e->errnum, EINVAL);
        assert_non_null(strstr(e->message, "cannot create the Trust Anchor: "));
        lz_error_free(e);
    }
    /* control: the largest valid generation id and profile */
    lz_generation_identity ok = {
        "a123456789012345678901234567890123456789012345678901234567890123", DOMAIN_ID,
        "9223372036854775807", NONCE_A
    };
    lz_error *e = NULL;
    lz_trust_anchor *a = lz_trust_anchor_create(&ok, &e);
    assert_non_null(a);

    const char *bad_sessions[] = { "", "AAAAAAAABBBBBBBBCCCCCCCCDDDDDDDD",
                                   "aaaaaaaabbbbbbbbccccccccddddddd", "../../etc/passwd", NULL };
    for (size_t i = 0; i < sizeof(bad_sessions) / sizeof(bad_sessions[0]); i++) {
        assert_null(lz_trust_anchor_issue_client(a, bad_sessions[i], &e));
        assert_non_null(strstr(e->message, "the session id is not 32 lowercase hex digits"));
        lz_error_free(e);
        e = NULL;
    }
    lz_trust_anchor_destroy(a);
}

static void test_ca_from_der(void **state)
{
    (void) state;
    lz_trust_anchor *a = anchor("7", NONCE_A);
    lz_trust_anchor *b = anchor("7", NONCE_A);
    unsigned char *der = NULL;
    int n = i2d_X509(lz_trust_anchor_ca_cert(a), &der);
    assert_true(n > 0);
    lz_error *e = NULL;

    /* control: the manifest's hash accepts it, and it is the same cert */
    X509 *x = lz_tls_ca_from_der(der, (size_t) n, lz_trust_anchor_manifest(a)->tls_ca_sha256, &e);
    assert_non_null(x);
    assert_int_equal(X509_cmp(x, lz_trust_anchor_ca_cert(a)), 0);
    X509_free(x);

    /* another generation's manifest refuses it */
    assert_null(
        lz_tls_ca_from_der(der, (size_t) n, lz_trust_anchor_manifest(b)->tls_ca_sha256, &e));
    assert_non_null(strstr(e->message, "does not match the generation's TrustManifest"));
    lz_error_free(e);
    e = NULL;

    /* a trailing byte is refused even with a matching hash */
    unsigned char *more = malloc((size_t) n + 1);
    memcpy(more, der, (size_t) n);
    more[n] = 0;
    uint8_t md[32];
    unsigned int mdn = 0;
    assert_int_equal(EVP_Digest(more, (size_t) n + 1, md, &mdn, EVP_sha256(), NULL), 1);
    assert_null(lz_tls_ca_from_der(more, (size_t) n + 1, md, &e));
    assert_non_null(strstr(e->message, "cannot parse the Trust Anchor CA certificate"));
    lz_error_free(e);
    free(more);

    OPENSSL_free(der);
    lz_trust_anchor_destroy(b);
    lz_trust_anchor_destroy(a);
}

static void test_client_generated_key(void **state)
{
    (void) state;
    lz_trust_anchor *a = anchor("7", NONCE_A);
    X509 *ca = lz_trust_anchor_ca_cert(a);
    lz_error *e = NULL;

    /* the CLI's own key; only its public half goes to the coordinator */
    EVP_PKEY *mine = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    assert_non_null(mine);
    uint8_t pub[32];
    size_t pn = sizeof(pub);
    assert_int_equal(EVP_PKEY_get_raw_public_key(mine, pub, &pn), 1);
    lz_tls_credential *issued = lz_trust_anchor_issue_client_pub(a, SESSION, pub, &e);
    assert_non_null(issued);

    /* a public-only credential cannot make a client context */
    assert_null(lz_tls_client_ctx(ca, issued, &e));
    assert_non_null(strstr(e->message, "cannot create the CLI's TLS context: the ClientCLI "
                                       "credential " SESSION " has no private key"));
    lz_error_free(e);
    e = NULL;

    /* the CLI's key with the issued certificate works */
    lz_tls_credential mine_cred = { LZ_TLS_ROLE_CLIENT, SESSION, mine, issued->cert };
    SSL_CTX *sctx = server_ctx(ca, lz_trust_anchor_server(a));
    SSL_CTX *cctx = client_ctx(ca, &mine_cred);
    assert_works(sctx, cctx);
    SSL_CTX_free(cctx);

    /* another key with that certificate does not */
    EVP_PKEY *wrong = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    lz_tls_credential wrong_cred = { LZ_TLS_ROLE_CLIENT, SESSION, wrong, issued->cert };
    assert_null(lz_tls_client_ctx(ca, &wrong_cred, &e));
    assert_non_null(e);
    lz_error_free(e);

    SSL_CTX_free(sctx);
    EVP_PKEY_free(wrong);
    EVP_PKEY_free(mine);
    lz_tls_credential_free(issued);
    lz_trust_anchor_destroy(a);
}

/* Last: the secure heap is process-wide. */
static void test_keys_in_secure_heap(void **state)
{
    (void) state;
    if (CRYPTO_secure_malloc_init(1 << 16, 16) == 0)
        skip(); /* OpenSSL built without secure memory */
    size_t base = CRYPTO_secure_used();
    lz_trust_anchor *a = anchor("7", NONCE_A);
    size_t with_anchor = CRYPTO_secure_used();
    /* the CA and server private keys are in the secure heap */
    assert_true(with_anchor >= base + 2 * 32);
    lz_tls_credential *cc = client_cred(a, SESSION);
    assert_true(CRYPTO_secure_used() >= with_anchor + 32);
    lz_tls_credential_free(cc);
    assert_int_equal(CRYPTO_secure_used(), with_anchor);
    lz_trust_anchor_destroy(a);
    assert_int_equal(CRYPTO_secure_used(), base);
    assert_int_equal(CRYPTO_secure_malloc_done(), base == 0 ? 1 : 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handshake_and_data),
        cmocka_unit_test(test_client_without_certificate),
        cmocka_unit_test(test_client_of_another_generation),
        cmocka_unit_test(test_server_of_another_generation),
        cmocka_unit_test(test_client_with_wrong_role),
        cmocka_unit_test(test_server_with_wrong_role),
        cmocka_unit_test(test_tls12_refused),
        cmocka_unit_test(test_anchors_distinct_and_ca_shape),
        cmocka_unit_test(test_destroy_then_create),
        cmocka_unit_test(test_bad_identity),
        cmocka_unit_test(test_ca_from_der),
        cmocka_unit_test(test_client_generated_key),
        cmocka_unit_test(test_keys_in_secure_heap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
