/* SPDX-License-Identifier: Apache-2.0
 *
 * The Trust Anchor's X.509/TLS part (anchor.h).
 *
 * Key hygiene: private keys exist only inside OpenSSL EVP_PKEY objects,
 * generated there (EVP_PKEY_Q_keygen); this file never copies private key
 * bytes out, so it has no buffer of its own to clear. OpenSSL 3's Ed25519
 * provider keeps the 32-byte private key in OPENSSL_secure_zalloc memory and
 * frees it with OPENSSL_secure_clear_free (zeroed first); it is the secure
 * heap (mlock'd, MADV_DONTDUMP) only when the process called
 * CRYPTO_secure_malloc_init(), which is a process-wide choice left to the
 * coordinator's main (tests/unit/test_trust_anchor.c checks that the keys
 * land in a secure heap when there is one, and leave it at destroy). Signing
 * derives the expanded key on the stack and OpenSSL cleanses it (3.0
 * sources, ossl_ed25519_sign).
 */
#include "trust/anchor.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "common/text.h"
#include "common/util.h"
#include "config/grammar.h"
#include "protocol/messages.h"

struct lz_trust_anchor {
    EVP_PKEY *ca_key;
    X509 *ca;
    lz_tls_credential *server;
    char *agent_profile;
    char *domain_id;
    char *generation_id;
    char nonce[LZ_TRUST_NONCE_LEN + 1];
    lz_trust_manifest manifest;
};

#define ORG "Lazaret"
#define CA_OU "TrustAnchor"

const char *lz_tls_role_name(lz_tls_role role)
{
    switch (role) {
    case LZ_TLS_ROLE_COORDINATOR:
        return "SessionCoordinator";
    case LZ_TLS_ROLE_CLIENT:
        return "ClientCLI";
    default:
        return NULL;
    }
}

/* ---- errors ------------------------------------------------------------ */

/* The OpenSSL error queue as "reason (detail); reason ..." (at most a few
 * entries: the first is the cause), and the queue cleared. NULL if empty. */
static char *queue_text(void)
{
    char *out = NULL;
    const char *data;
    int flags;
    unsigned long e;
    int n = 0;
    while ((e = ERR_get_error_all(NULL, NULL, NULL, &data, &flags)) != 0) {
        if (n++ >= 4)
            continue; /* drain the rest */
        char buf[256];
        ERR_error_string_n(e, buf, sizeof(buf));
        bool detail = (flags & ERR_TXT_STRING) && data && *data;
        char *next = lz_xasprintf("%s%s%s%s%s%s", out ? out : "", out ? "; " : "", buf,
                                  detail ? " (" : "", detail ? data : "", detail ? ")" : "");
        free(out);
        out = next;
    }
    return out;
}

static int vfail(lz_error **err, const SSL *ssl, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
static int vfail(lz_error **err, const SSL *ssl, const char *fmt, va_list ap)
{
    _cleanup_free_ char *what = lz_vprintable(fmt, ap);
    _cleanup_free_ char *verify = NULL;
    if (ssl) {
        long v = SSL_get_verify_result(ssl);
        if (v == X509_V_ERR_APPLICATION_VERIFICATION)
            verify = lz_xasprintf("the peer's certificate does not carry the role %s",
                                  lz_tls_role_name(SSL_is_server(ssl) ? LZ_TLS_ROLE_CLIENT
                                                                      : LZ_TLS_ROLE_COORDINATOR));
        else if (v != X509_V_OK)
            verify = lz_xasprintf("the peer's certificate was refused: %s",
                                  X509_verify_cert_error_string(v));
    }
    _cleanup_free_ char *q = queue_text();
    lz_error_set(err, 0, "%s%s%s%s%s", what, verify ? ": " : "", verify ? verify : "",
                 q ? ": OpenSSL: " : "", q ? q : "");
    return -1;
}

int lz_tls_error(lz_error **err, const SSL *ssl, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(err, ssl, fmt, ap);
    va_end(ap);
    return -1;
}

static int ossl_fail(lz_error **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int ossl_fail(lz_error **err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(err, NULL, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- identity ---------------------------------------------------------- */

static bool lower_hex(const char *s, size_t len)
{
    if (!s || strlen(s) != len)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

static bool generation_id_valid(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > LZ_TRUST_GENERATION_ID_MAX || s[0] == '0')
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

static int identity_check(const lz_generation_identity *id, lz_error **err)
{
    const char *bad = !id ? "no identity"
                      : !id->agent_profile || !lz_profile_name_valid(id->agent_profile)
                          ? "the agent profile"
                      : !lower_hex(id->domain_id, LZ_TRUST_DOMAIN_ID_LEN) ? "the Domain id"
                      : !generation_id_valid(id->generation_id)           ? "the generation id"
                      : !lower_hex(id->nonce, LZ_TRUST_NONCE_LEN)         ? "the generation nonce"
                                                                          : NULL;
    if (!bad)
        return 0;
    lz_error_set(err, EINVAL, "cannot create the Trust Anchor: %s is malformed", bad);
    return lz_error_hint(err, "this is a Lazaret bug: profile names are 1 to 64 characters, "
                              "the Domain id 64 and the nonce 32 lowercase hex digits, the "
                              "generation id a positive decimal number");
}

/* ---- certificates ------------------------------------------------------ */

/* O=Lazaret, OU=<ou>, CN=<cn>, dnQualifier=<nonce>. */
static X509_NAME *make_name(const char *ou, const char *cn, const char *nonce)
{
    X509_NAME *n = X509_NAME_new();
    if (n &&
        X509_NAME_add_entry_by_NID(n, NID_organizationName, MBSTRING_UTF8,
                                   (const unsigned char *) ORG, -1, -1, 0) == 1 &&
        X509_NAME_add_entry_by_NID(n, NID_organizationalUnitName, MBSTRING_UTF8,
                                   (const unsigned char *) ou, -1, -1, 0) == 1 &&
        X509_NAME_add_entry_by_NID(n, NID_commonName, MBSTRING_UTF8, (const unsigned char *) cn, -1,
                                   -1, 0) == 1 &&
        X509_NAME_add_entry_by_NID(n, NID_dnQualifier, MBSTRING_ASC, (const unsigned char *) nonce,
                                   -1, -1, 0) == 1)
        return n;
    X509_NAME_free(n);
    return NULL;
}

/* A random positive 128-bit serial (RFC 5280: at most 20 octets; zero is
 * not allowed). Two anchors sharing a serial would need a 2^-64 birthday. */
static bool set_random_serial(X509 *x)
{
    uint8_t r[16];
    do {
        if (RAND_bytes(r, sizeof(r)) != 1)
            return false;
    } while (!memcmp(r, (const uint8_t[16]){ 0 }, sizeof(r)));
    BIGNUM *bn = BN_bin2bn(r, sizeof(r), NULL);
    ASN1_INTEGER *ai = bn ? BN_to_ASN1_INTEGER(bn, NULL) : NULL;
    bool ok = ai && X509_set_serialNumber(x, ai) == 1;
    ASN1_INTEGER_free(ai);
    BN_free(bn);
    return ok;
}

static bool add_ext(X509 *x, X509V3_CTX *v, int nid, const char *value)
{
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, v, nid, value);
    bool ok = e && X509_add_ext(x, e, -1) == 1;
    X509_EXTENSION_free(e);
    return ok;
}

/* A certificate for key `key`, subject `subject`, signed by `signer` (NULL:
 * self-signed) with signer_key. `exts` are nid/value pairs, ended by 0. */
static X509 *make_cert(EVP_PKEY *key, X509_NAME *subject, X509 *signer, EVP_PKEY *signer_key,
                       const int *nids, const char *const *values)
{
    X509 *x = X509_new();
    if (!x || X509_set_version(x, X509_VERSION_3) != 1 || !set_random_serial(x) ||
        X509_set_subject_name(x, subject) != 1 ||
        X509_set_issuer_name(x, signer ? X509_get_subject_name(signer) : subject) != 1 ||
        !X509_gmtime_adj(X509_getm_notBefore(x), -LZ_TRUST_BACKDATE_S) ||
        !X509_gmtime_adj(X509_getm_notAfter(x), LZ_TRUST_LIFETIME_S) ||
        X509_set_pubkey(x, key) != 1)
        goto fail;
    X509V3_CTX v;
    X509V3_set_ctx(&v, signer ? signer : x, x, NULL, NULL, 0);
    for (size_t i = 0; nids[i]; i++)
        if (!add_ext(x, &v, nids[i], values[i]))
            goto fail;
    /* Ed25519 signs the message itself: no digest (NULL). */
    if (X509_sign(x, signer_key, NULL) <= 0)
        goto fail;
    return x;
fail:
    X509_free(x);
    return NULL;
}

static EVP_PKEY *new_key(void)
{
    return EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
}

/* A credential of subject role `role` with the extendedKeyUsage of
 * `eku_role` (the same role except in lz_trust_anchor_issue_mismatched).
 * Takes ownership of key. */
static lz_tls_credential *issue(lz_trust_anchor *a, lz_tls_role role, lz_tls_role eku_role,
                                const char *subject_id, EVP_PKEY *key, lz_error **err)
{
    const char *ou = lz_tls_role_name(role);
    if (!ou || !lz_tls_role_name(eku_role)) {
        EVP_PKEY_free(key);
        lz_error_set(err, EINVAL, "cannot issue a TLS credential: unknown role %d", (int) role);
        return NULL;
    }
    if (!key) {
        ossl_fail(err, "cannot generate an Ed25519 key for the %s credential of generation %s", ou,
                  a->generation_id);
        return NULL;
    }
    static const int nids[] = { NID_basic_constraints,
                                NID_key_usage,
                                NID_ext_key_usage,
                                NID_subject_key_identifier,
                                NID_authority_key_identifier,
                                0 };
    const char *values[] = { "critical,CA:FALSE",
                             "critical,digitalSignature",
                             eku_role == LZ_TLS_ROLE_COORDINATOR ? "serverAuth" : "clientAuth",
                             "hash",
                             "keyid:always",
                             NULL };
    X509_NAME *name = make_name(ou, subject_id, a->nonce);
    X509 *cert = name ? make_cert(key, name, a->ca, a->ca_key, nids, values) : NULL;
    X509_NAME_free(name);
    if (!cert) {
        EVP_PKEY_free(key);
        ossl_fail(err, "cannot issue the %s certificate %s of generation %s", ou, subject_id,
                  a->generation_id);
        return NULL;
    }
    lz_tls_credential *c = lz_xcalloc(1, sizeof(*c));
    c->role = role;
    snprintf(c->subject_id, sizeof(c->subject_id), "%s", subject_id);
    c->key = key;
    c->cert = cert;
    return c;
}

void lz_tls_credential_free(lz_tls_credential *cred)
{
    if (!cred)
        return;
    EVP_PKEY_free(cred->key); /* ossl_ecx_key_free: OPENSSL_secure_clear_free */
    X509_free(cred->cert);
    free(cred);
}

/* ---- what the session channel needs ------------------------------------ */

static bool cert_has_role(X509 *x, lz_tls_role role);

int lz_tls_cert_to_der(X509 *cert, uint8_t *out, size_t cap, size_t *ret_len, lz_error **err)
{
    int n = cert ? i2d_X509(cert, NULL) : -1;
    if (n <= 0 || (size_t) n > cap)
        return ossl_fail(err, "cannot encode a certificate (%d bytes, room for %zu)", n, cap);
    unsigned char *p = out;
    if (i2d_X509(cert, &p) != n)
        return ossl_fail(err, "cannot encode a certificate");
    *ret_len = (size_t) n;
    return 0;
}

bool lz_tls_cert_subject_id(X509 *cert, char out[LZ_TRUST_SESSION_ID_LEN + 1])
{
    X509_NAME *n = cert ? X509_get_subject_name(cert) : NULL;
    int i = n ? X509_NAME_get_index_by_NID(n, NID_commonName, -1) : -1;
    if (i < 0 || X509_NAME_get_index_by_NID(n, NID_commonName, i) >= 0)
        return false;
    const ASN1_STRING *v = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(n, i));
    int len = v ? ASN1_STRING_length(v) : 0;
    if (len <= 0 || len > LZ_TRUST_SESSION_ID_LEN ||
        memchr(ASN1_STRING_get0_data(v), '\0', (size_t) len))
        return false;
    memcpy(out, ASN1_STRING_get0_data(v), (size_t) len);
    out[len] = '\0';
    return true;
}

bool lz_tls_cert_has_key(X509 *cert, const uint8_t pub[32])
{
    EVP_PKEY *k = cert ? X509_get0_pubkey(cert) : NULL;
    uint8_t raw[32];
    size_t len = sizeof(raw);
    bool ok = k && EVP_PKEY_get_id(k) == EVP_PKEY_ED25519 &&
              EVP_PKEY_get_raw_public_key(k, raw, &len) == 1 && len == 32 &&
              CRYPTO_memcmp(raw, pub, 32) == 0;
    ERR_clear_error();
    return ok;
}

X509 *lz_x509_from_exact_der(const uint8_t *der, size_t len)
{
    const unsigned char *p = der;
    X509 *x = der && len && len <= 65536 ? d2i_X509(NULL, &p, (long) len) : NULL;
    /* d2i_X509 also takes some BER that is not DER (fuzz_messages found a
     * signature BIT STRING with non-zero padding bits): re-encoded, the
     * certificate must give exactly the bytes it came from. */
    unsigned char *canon = NULL;
    int canon_len = x && p == der + len ? i2d_X509(x, &canon) : -1;
    bool exact = canon_len > 0 && (size_t) canon_len == len && memcmp(canon, der, len) == 0;
    OPENSSL_free(canon);
    if (!exact) {
        X509_free(x);
        return NULL;
    }
    return x;
}

lz_tls_credential *lz_tls_client_credential(X509 *ca, const char *session_id, EVP_PKEY *key,
                                            const uint8_t *der, size_t len, lz_error **err)
{
    /* What is checked below is what the handshake will present. */
    X509 *x = lz_x509_from_exact_der(der, len);
    if (!x) {
        ossl_fail(err, "the Session Coordinator's client certificate cannot be parsed");
        return NULL;
    }
    char id[LZ_TRUST_SESSION_ID_LEN + 1];
    uint8_t raw[32];
    size_t raw_len = sizeof(raw);
    const char *why = NULL;
    if (X509_verify(x, X509_get0_pubkey(ca)) != 1)
        why = "it is not signed by the generation's CA the Domain publishes";
    else if (!cert_has_role(x, LZ_TLS_ROLE_CLIENT) ||
             X509_check_purpose(x, X509_PURPOSE_SSL_CLIENT, 0) != 1)
        why = "it does not carry the role ClientCLI"; /* subject OU and extendedKeyUsage */
    else if (!lz_tls_cert_subject_id(x, id) || strcmp(id, session_id) != 0)
        why = "it names another session";
    else if (EVP_PKEY_get_raw_public_key(key, raw, &raw_len) != 1 || raw_len != 32 ||
             !lz_tls_cert_has_key(x, raw))
        why = "it is not for this CLI's key";
    ERR_clear_error();
    if (why) {
        X509_free(x);
        lz_error_set(err, 0, "the Session Coordinator's client certificate is refused: %s", why);
        lz_error_hint(err, "the Domain's coordinator may have just restarted; run the command "
                           "again");
        return NULL;
    }
    lz_tls_credential *c = lz_xcalloc(1, sizeof(*c));
    c->role = LZ_TLS_ROLE_CLIENT;
    snprintf(c->subject_id, sizeof(c->subject_id), "%s", session_id);
    EVP_PKEY_up_ref(key);
    c->key = key;
    c->cert = x;
    return c;
}

/* ---- the anchor -------------------------------------------------------- */

lz_trust_anchor *lz_trust_anchor_create(const lz_generation_identity *id, lz_error **err)
{
    if (identity_check(id, err) < 0)
        return NULL;
    lz_trust_anchor *a = lz_xcalloc(1, sizeof(*a));
    a->agent_profile = lz_xstrdup(id->agent_profile);
    a->domain_id = lz_xstrdup(id->domain_id);
    a->generation_id = lz_xstrdup(id->generation_id);
    memcpy(a->nonce, id->nonce, LZ_TRUST_NONCE_LEN);

    /* The CA: CN names the generation, dnQualifier its nonce, so two
     * generations' CAs differ in name as well as in key (the key is what
     * decides: a CA of the same name but another key does not verify). */
    char cn[64];
    snprintf(cn, sizeof(cn), "Lazaret generation %s", a->generation_id);
    static const int nids[] = { NID_basic_constraints, NID_key_usage, NID_subject_key_identifier,
                                0 };
    static const char *const values[] = { "critical,CA:TRUE", "critical,keyCertSign", "hash",
                                          NULL };
    a->ca_key = new_key();
    X509_NAME *name = a->ca_key ? make_name(CA_OU, cn, a->nonce) : NULL;
    a->ca = name ? make_cert(a->ca_key, name, NULL, a->ca_key, nids, values) : NULL;
    X509_NAME_free(name);
    if (!a->ca) {
        ossl_fail(err, "cannot create the Trust Anchor CA of generation %s", a->generation_id);
        goto fail;
    }

    unsigned char *der = NULL;
    int der_len = i2d_X509(a->ca, &der);
    unsigned int md_len = 0;
    bool ok = der_len > 0 &&
              EVP_Digest(der, (size_t) der_len, a->manifest.tls_ca_sha256, &md_len, EVP_sha256(),
                         NULL) == 1 &&
              md_len == LZ_TRUST_SHA256_LEN;
    OPENSSL_free(der);
    if (!ok) {
        ossl_fail(err, "cannot hash the Trust Anchor CA certificate of generation %s",
                  a->generation_id);
        goto fail;
    }
    a->manifest.protocol_version = LZ_SESSION_PROTOCOL_VERSION;
    a->manifest.agent_profile = a->agent_profile;
    a->manifest.domain_id = a->domain_id;
    a->manifest.generation_id = a->generation_id;

    a->server = issue(a, LZ_TLS_ROLE_COORDINATOR, LZ_TLS_ROLE_COORDINATOR, "SessionCoordinator",
                      new_key(), err);
    if (!a->server)
        goto fail;
    return a;
fail:
    lz_trust_anchor_destroy(a);
    return NULL;
}

void lz_trust_anchor_destroy(lz_trust_anchor *a)
{
    if (!a)
        return;
    lz_tls_credential_free(a->server);
    X509_free(a->ca);
    EVP_PKEY_free(a->ca_key); /* cleared by OpenSSL before it is freed */
    free(a->agent_profile);
    free(a->domain_id);
    free(a->generation_id);
    /* The nonce is not secret (it is in every certificate) but it names the
     * generation: clear the whole object, pointers included. */
    OPENSSL_cleanse(a, sizeof(*a));
    free(a);
}

const lz_trust_manifest *lz_trust_anchor_manifest(const lz_trust_anchor *a)
{
    return &a->manifest;
}

X509 *lz_trust_anchor_ca_cert(const lz_trust_anchor *a)
{
    return a->ca;
}

const lz_tls_credential *lz_trust_anchor_server(const lz_trust_anchor *a)
{
    return a->server;
}

static int session_id_check(const char *session_id, lz_error **err)
{
    if (lower_hex(session_id, LZ_TRUST_SESSION_ID_LEN))
        return 0;
    return lz_error_set(err, EINVAL,
                        "cannot issue a client credential: the session id is not 32 lowercase "
                        "hex digits");
}

lz_tls_credential *lz_trust_anchor_issue_client(lz_trust_anchor *a, const char *session_id,
                                                lz_error **err)
{
    if (session_id_check(session_id, err) < 0)
        return NULL;
    return issue(a, LZ_TLS_ROLE_CLIENT, LZ_TLS_ROLE_CLIENT, session_id, new_key(), err);
}

lz_tls_credential *lz_trust_anchor_issue_client_pub(lz_trust_anchor *a, const char *session_id,
                                                    const uint8_t pub[32], lz_error **err)
{
    if (session_id_check(session_id, err) < 0)
        return NULL;
    EVP_PKEY *k = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub, 32);
    if (!k) {
        ossl_fail(err,
                  "cannot issue a client credential for session %s: the public key is "
                  "not an Ed25519 key",
                  session_id);
        return NULL;
    }
    return issue(a, LZ_TLS_ROLE_CLIENT, LZ_TLS_ROLE_CLIENT, session_id, k, err);
}

lz_tls_credential *lz_trust_anchor_issue_mismatched(lz_trust_anchor *a, lz_tls_role role,
                                                    lz_tls_role eku_role, const char *subject_id,
                                                    lz_error **err)
{
    if (!subject_id || strlen(subject_id) > LZ_TRUST_SESSION_ID_LEN) {
        lz_error_set(err, EINVAL, "cannot issue a TLS credential: bad subject id");
        return NULL;
    }
    return issue(a, role, eku_role, subject_id, new_key(), err);
}

/* ---- TLS contexts ------------------------------------------------------ */

/* True when the subject has exactly one OU and it is the role's name. */
static bool cert_has_role(X509 *x, lz_tls_role role)
{
    const char *want = lz_tls_role_name(role);
    X509_NAME *n = X509_get_subject_name(x);
    int i = n ? X509_NAME_get_index_by_NID(n, NID_organizationalUnitName, -1) : -1;
    if (!want || i < 0 || X509_NAME_get_index_by_NID(n, NID_organizationalUnitName, i) >= 0)
        return false;
    const ASN1_STRING *s = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(n, i));
    size_t len = strlen(want);
    return s && (size_t) ASN1_STRING_length(s) == len &&
           memcmp(ASN1_STRING_get0_data(s), want, len) == 0;
}

/* OpenSSL calls the verify callback with ok = 0 for every error found and
 * with ok = 1 for each certificate whose signature and validity checked
 * out, the peer's (depth 0) last. An error is kept (ok = 0 → 0); the role
 * is checked on the peer's certificate once its chain is verified. The
 * EKU (purpose) check already separates the roles; this one does not rely
 * on it and also refuses a certificate of the right EKU and another role. */
static int verify_role(int ok, X509_STORE_CTX *x, lz_tls_role want)
{
    if (!ok)
        return 0;
    if (X509_STORE_CTX_get_error_depth(x) != 0)
        return 1;
    X509 *c = X509_STORE_CTX_get_current_cert(x);
    if (c && cert_has_role(c, want))
        return 1;
    X509_STORE_CTX_set_error(x, X509_V_ERR_APPLICATION_VERIFICATION);
    return 0;
}

static int verify_peer_is_client(int ok, X509_STORE_CTX *x)
{
    return verify_role(ok, x, LZ_TLS_ROLE_CLIENT);
}

static int verify_peer_is_coordinator(int ok, X509_STORE_CTX *x)
{
    return verify_role(ok, x, LZ_TLS_ROLE_COORDINATOR);
}

/* Does key hold a private key? OpenSSL 3.0 has no direct query, and
 * SSL_CTX_check_private_key() compares public halves only, so a public-only
 * key would fail only at the handshake. A trial signature tells, without
 * exporting the private key anywhere. */
static bool can_sign(EVP_PKEY *key)
{
    static const unsigned char probe[] = "lazaret-trust-anchor-probe";
    unsigned char sig[64];
    size_t n = sizeof(sig);
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    bool ok = m && EVP_DigestSignInit(m, NULL, NULL, NULL, key) == 1 &&
              EVP_DigestSign(m, sig, &n, probe, sizeof(probe) - 1) == 1;
    EVP_MD_CTX_free(m);
    return ok;
}

static SSL_CTX *make_ctx(X509 *ca, const lz_tls_credential *cred, bool server, lz_error **err)
{
    lz_tls_role own = server ? LZ_TLS_ROLE_COORDINATOR : LZ_TLS_ROLE_CLIENT;
    const char *what = server ? "the coordinator's TLS context" : "the CLI's TLS context";
    if (!ca || !cred || !cred->key || !cred->cert || cred->role != own) {
        lz_error_set(err, EINVAL,
                     "cannot create %s: it needs the CA certificate and a %s "
                     "credential",
                     what, lz_tls_role_name(own));
        return NULL;
    }
    SSL_CTX *c = NULL;
    X509_STORE *store = NULL;
    if (!can_sign(cred->key)) {
        ossl_fail(err, "cannot create %s: the %s credential %s has no private key", what,
                  lz_tls_role_name(own), cred->subject_id);
        return NULL;
    }
    c = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    if (!c)
        goto fail;
    /* TLS 1.3 only: set after SSL_CTX_new, which applies the system
     * openssl.cnf (Debian: MinProtocol = TLSv1.2), so ours win. */
    if (SSL_CTX_set_min_proto_version(c, TLS1_3_VERSION) != 1 ||
        SSL_CTX_set_max_proto_version(c, TLS1_3_VERSION) != 1)
        goto fail;
    /* No resumption: every connection presents and verifies certificates
     * (a ticket would let a connection skip the role check). */
    SSL_CTX_set_options(c, SSL_OP_NO_TICKET);
    SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
    if (server && SSL_CTX_set_num_tickets(c, 0) != 1)
        goto fail;
    if (SSL_CTX_set1_sigalgs_list(c, "ed25519") != 1)
        goto fail;
    if (SSL_CTX_use_certificate(c, cred->cert) != 1 || SSL_CTX_use_PrivateKey(c, cred->key) != 1 ||
        SSL_CTX_check_private_key(c) != 1)
        goto fail;
    /* The generation's CA is the only trust anchor: a store of our own,
     * never SSL_CTX_set_default_verify_paths() (no system store, no
     * SSL_CERT_FILE/SSL_CERT_DIR). */
    store = X509_STORE_new();
    if (!store || X509_STORE_add_cert(store, ca) != 1 ||
        X509_STORE_set_flags(store, X509_V_FLAG_X509_STRICT) != 1)
        goto fail;
    SSL_CTX_set_cert_store(c, store); /* c owns it now */
    store = NULL;
    SSL_CTX_set_verify(c,
                       server ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT : SSL_VERIFY_PEER,
                       server ? verify_peer_is_client : verify_peer_is_coordinator);
    /* Depth 0: the peer's certificate must be issued by the CA itself. */
    SSL_CTX_set_verify_depth(c, 0);
    if (SSL_CTX_set_purpose(c, server ? X509_PURPOSE_SSL_CLIENT : X509_PURPOSE_SSL_SERVER) != 1)
        goto fail;
    return c;
fail:
    X509_STORE_free(store);
    SSL_CTX_free(c);
    ossl_fail(err, "cannot create %s", what);
    return NULL;
}

SSL_CTX *lz_tls_server_ctx(X509 *ca, const lz_tls_credential *cred, lz_error **err)
{
    return make_ctx(ca, cred, true, err);
}

SSL_CTX *lz_tls_client_ctx(X509 *ca, const lz_tls_credential *cred, lz_error **err)
{
    return make_ctx(ca, cred, false, err);
}

X509 *lz_tls_ca_from_der(const uint8_t *der, size_t len, const uint8_t sha256[LZ_TRUST_SHA256_LEN],
                         lz_error **err)
{
    uint8_t md[LZ_TRUST_SHA256_LEN];
    unsigned int md_len = 0;
    if (!der || len == 0 || len > 65536 ||
        EVP_Digest(der, len, md, &md_len, EVP_sha256(), NULL) != 1 || md_len != sizeof(md) ||
        CRYPTO_memcmp(md, sha256, sizeof(md)) != 0) {
        ERR_clear_error();
        lz_error_set(err, EACCES,
                     "the Trust Anchor CA certificate does not match the "
                     "generation's TrustManifest");
        lz_error_hint(err, "the coordinator's publication belongs to another generation; "
                           "run the command again");
        return NULL;
    }
    X509 *x = lz_x509_from_exact_der(der, len);
    if (!x) {
        ossl_fail(err, "cannot parse the Trust Anchor CA certificate");
        return NULL;
    }
    return x;
}
