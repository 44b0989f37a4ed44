/* SPDX-License-Identifier: Apache-2.0
 *
 * The Trust Anchor's X.509/TLS part (docs/escalation.md "Trust Anchor"),
 * host only (OpenSSL 3 libcrypto + libssl).
 *
 * One anchor per Domain generation, created by the Session Coordinator,
 * everything freshly generated in memory and nothing read from or written to
 * disk:
 *   - an ephemeral Ed25519 CA: a self-signed certificate naming the
 *     generation (basicConstraints CA:TRUE critical, keyUsage keyCertSign,
 *     a random 128-bit serial, valid from now - 60 s to now + 7 days);
 *   - the coordinator's TLS server credential (role SessionCoordinator,
 *     extendedKeyUsage serverAuth);
 *   - on demand, one client credential per Client Session (role ClientCLI,
 *     extendedKeyUsage clientAuth, the session id as its subject id).
 *
 * Certificate subjects (all written by this module, all checked by it):
 *   O = "Lazaret", OU = the role ("TrustAnchor", "SessionCoordinator",
 *   "ClientCLI"), CN = "Lazaret generation <generation id>" for the CA, the
 *   subject id for a credential ("SessionCoordinator" or the session id),
 *   dnQualifier = the generation nonce.
 *
 * The SSL_CTX constructors give TLS 1.3 only, mutual authentication, this
 * generation's CA as the only trust anchor (no system store, no intermediate
 * allowed), and a peer certificate is accepted only with the role the other
 * end must have (SessionCoordinator for a client, ClientCLI for the server):
 * a certificate of another generation's CA, a client without a certificate,
 * or a peer of the wrong role fails the handshake.
 *
 * Errors follow docs/errors.md: -1 / NULL and *err filled, the OpenSSL error
 * queue's text appended to the message (and the queue cleared).
 */
#ifndef LAZARET_TRUST_ANCHOR_H
#define LAZARET_TRUST_ANCHOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "common/error.h"

#define LZ_TRUST_DOMAIN_ID_LEN 64     /* hex digits of a Domain id (SHA-256) */
#define LZ_TRUST_NONCE_LEN 32         /* hex digits of the generation nonce */
#define LZ_TRUST_SESSION_ID_LEN 32    /* hex digits of a session id */
#define LZ_TRUST_GENERATION_ID_MAX 19 /* decimal digits of a generation id (int64) */
#define LZ_TRUST_SHA256_LEN 32
/* A certificate is valid from this long before its creation ... */
#define LZ_TRUST_BACKDATE_S 60
/* ... until this long after it: longer than any generation is expected to
 * run without restarting (a generation that outlives it needs a new one). */
#define LZ_TRUST_LIFETIME_S (7L * 24 * 3600)

/* TlsRole (spec record fragments): a closed set. */
typedef enum lz_tls_role {
    LZ_TLS_ROLE_COORDINATOR = 1, /* SessionCoordinator: the TLS server */
    LZ_TLS_ROLE_CLIENT = 2,      /* ClientCLI: the TLS client of one session */
} lz_tls_role;

/* "SessionCoordinator" / "ClientCLI" (also the certificates' OU), or NULL. */
const char *lz_tls_role_name(lz_tls_role role);

/* GenerationIdentity plus the generation nonce; strings borrowed. */
typedef struct lz_generation_identity {
    const char *agent_profile; /* a valid profile name (1..64 characters) */
    const char *domain_id;     /* 64 lowercase hex digits */
    const char *generation_id; /* decimal, 1..19 digits, no leading zero */
    const char *nonce;         /* 32 lowercase hex digits (LZ_SIG_NONCE_LEN) */
} lz_generation_identity;

/* TrustManifest's content; the strings are owned by the anchor. */
typedef struct lz_trust_manifest {
    uint32_t protocol_version; /* LZ_SESSION_PROTOCOL_VERSION */
    const char *agent_profile;
    const char *domain_id;
    const char *generation_id;
    uint8_t tls_ca_sha256[LZ_TRUST_SHA256_LEN]; /* of the CA certificate's DER */
} lz_trust_manifest;

/* A TlsCredential: a private key and its certificate, signed by a
 * generation's CA. Owns one reference to each. */
typedef struct lz_tls_credential {
    lz_tls_role role;
    char subject_id[LZ_TRUST_SESSION_ID_LEN + 1]; /* "SessionCoordinator" or a session id */
    EVP_PKEY *key;
    X509 *cert;
} lz_tls_credential;

/* Free a credential (its key through OpenSSL, which clears private key bytes
 * before freeing them). NULL is fine. */
void lz_tls_credential_free(lz_tls_credential *cred);

typedef struct lz_trust_anchor lz_trust_anchor;

/* Generate a new anchor: the CA and the coordinator's server credential.
 * The identity is validated and copied. */
LZ_MUST_CHECK
lz_trust_anchor *lz_trust_anchor_create(const lz_generation_identity *id, lz_error **err);

/* Free the anchor: its CA key, the server credential, its strings. SSL_CTXs
 * built from it hold their own references to key and certificates (OpenSSL
 * reference counts): free them first, or the server key lives until the
 * last SSL_CTX using it is freed. NULL is fine. */
void lz_trust_anchor_destroy(lz_trust_anchor *a);

/* The TrustManifest's content (owned by the anchor). */
const lz_trust_manifest *lz_trust_anchor_manifest(const lz_trust_anchor *a);

/* The CA certificate and the coordinator's credential (owned by the anchor). */
X509 *lz_trust_anchor_ca_cert(const lz_trust_anchor *a);
const lz_tls_credential *lz_trust_anchor_server(const lz_trust_anchor *a);

/* Issue a client credential for the Client Session session_id (32 lowercase
 * hex digits), with a fresh Ed25519 key. Newly allocated. */
LZ_MUST_CHECK
lz_tls_credential *lz_trust_anchor_issue_client(lz_trust_anchor *a, const char *session_id,
                                                lz_error **err);

/* The same for a public key the client generated itself (so its private key
 * never leaves the client process): pub is a raw 32-byte Ed25519 public key.
 * The returned credential's key holds the public key only. */
LZ_MUST_CHECK
lz_tls_credential *lz_trust_anchor_issue_client_pub(lz_trust_anchor *a, const char *session_id,
                                                    const uint8_t pub[32], lz_error **err);

/* For tests only: a certificate whose subject role and extendedKeyUsage
 * disagree (subject `role`, EKU of `eku_role`), signed by this CA, to prove
 * that the role check refuses a peer on its own, without the EKU check. */
LZ_MUST_CHECK
lz_tls_credential *lz_trust_anchor_issue_mismatched(lz_trust_anchor *a, lz_tls_role role,
                                                    lz_tls_role eku_role, const char *subject_id,
                                                    lz_error **err);

/* The SSL_CTX of the coordinator (server: cred must have the role
 * SessionCoordinator) and of a CLI (client: cred must have the role
 * ClientCLI), trusting only the CA certificate ca. Newly allocated (the
 * caller frees it with SSL_CTX_free). */
LZ_MUST_CHECK
SSL_CTX *lz_tls_server_ctx(X509 *ca, const lz_tls_credential *cred, lz_error **err);
LZ_MUST_CHECK
SSL_CTX *lz_tls_client_ctx(X509 *ca, const lz_tls_credential *cred, lz_error **err);

/* Parse a CA certificate from DER (as a CLI receives it) and accept it only
 * when its SHA-256 equals the TrustManifest's tls_ca_sha256. Newly
 * allocated. */
LZ_MUST_CHECK
X509 *lz_tls_ca_from_der(const uint8_t *der, size_t len, const uint8_t sha256[LZ_TRUST_SHA256_LEN],
                         lz_error **err);

/* ---- what the session channel needs (trust/channel.h) ------------------ */

/* The certificate's DER into out (at most cap bytes); *ret_len its length. */
LZ_MUST_CHECK
int lz_tls_cert_to_der(X509 *cert, uint8_t *out, size_t cap, size_t *ret_len, lz_error **err);

/* The subject id (CN) of a certificate this module issued: exactly one CN
 * of 1..LZ_TRUST_SESSION_ID_LEN bytes. false otherwise. */
bool lz_tls_cert_subject_id(X509 *cert, char out[LZ_TRUST_SESSION_ID_LEN + 1]);

/* Is cert's public key the raw Ed25519 key pub? */
bool lz_tls_cert_has_key(X509 *cert, const uint8_t pub[32]);

/* A certificate from DER that is exactly DER (no BER, no byte left over),
 * or NULL. Newly allocated. */
X509 *lz_x509_from_exact_der(const uint8_t *der, size_t len);

/* The CLI's credential: the client certificate the coordinator issued at
 * enrolment (DER, no byte left over), accepted only when it is signed by
 * ca, carries the role ClientCLI and the subject id session_id, and holds
 * the public half of key (the CLI's own, which never left it). Takes a
 * reference on key. Newly allocated. */
LZ_MUST_CHECK
lz_tls_credential *lz_tls_client_credential(X509 *ca, const char *session_id, EVP_PKEY *key,
                                            const uint8_t *der, size_t len, lz_error **err);

/* Fill *err with "<message>: <OpenSSL error queue text>" and clear the
 * queue; for the callers that drive SSL_accept/SSL_connect themselves. When
 * ssl is not NULL and its peer failed verification, the verification result
 * (X509_verify_cert_error_string, or the role mismatch) is named too.
 * Always returns -1. */
int lz_tls_error(lz_error **err, const SSL *ssl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
