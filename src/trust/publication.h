/* SPDX-License-Identifier: Apache-2.0
 *
 * The coordinator's publication of its generation's Trust Anchor
 * (ProtocolPublicationIdentity, spec record fragments): one file,
 * LZ_TRUST_PUBLICATION_FILE, in the Domain's 0700 runtime directory beside
 * the socket. A CLI trusts the coordinator that answers on the socket only
 * when its TLS certificate is issued by the CA this file names, so a socket
 * of another generation (or a stale file) fails the enrolment or the
 * handshake instead of being talked to (docs/session-channel.md).
 *
 *   file := u16 LZ_TRUST_PUBLICATION_TYPE || u32 protocol version ||
 *           str agent profile || str Domain id || str generation id ||
 *           bytes CA certificate DER
 *
 * (wire.h encoding; every field bounded, nothing left over). Written
 * 0600 under a temporary name and renamed in; withdrawn (unlinked) first
 * thing at teardown, before the keys go.
 */
#ifndef LAZARET_TRUST_PUBLICATION_H
#define LAZARET_TRUST_PUBLICATION_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/x509.h>

#include "common/error.h"
#include "trust/anchor.h"

#define LZ_TRUST_PUBLICATION_FILE "coordinator.trust"
#define LZ_TRUST_PUBLICATION_TYPE 0x5450 /* "TP" */
#define LZ_TRUST_PUBLICATION_MAX 16384

typedef struct lz_trust_publication {
    uint32_t protocol_version;
    char agent_profile[65];
    char domain_id[LZ_TRUST_DOMAIN_ID_LEN + 1];
    char generation_id[LZ_TRUST_GENERATION_ID_MAX + 1];
    X509 *ca; /* owned */
} lz_trust_publication;

/* Write a's publication into dirfd (atomically replacing an earlier one). */
LZ_MUST_CHECK
int lz_trust_publish(const lz_trust_anchor *a, int dirfd, const char *dir_label, lz_error **err);

/* Withdraw it (a missing file is fine). */
void lz_trust_unpublish(int dirfd);

/* Decode a publication's bytes (strict: the encoder's output only).
 * *ret is filled (ret->ca newly allocated) only on success. */
LZ_MUST_CHECK
int lz_trust_publication_decode(const uint8_t *data, size_t len, lz_trust_publication *ret,
                                lz_error **err);

/* Read and decode the publication in dirfd: a regular file owned by us,
 * opened without following a symlink. */
LZ_MUST_CHECK
int lz_trust_publication_read(int dirfd, const char *dir_label, lz_trust_publication *ret,
                              lz_error **err);

void lz_trust_publication_clear(lz_trust_publication *p);

#endif
