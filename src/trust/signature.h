/* SPDX-License-Identifier: Apache-2.0
 *
 * Mailbox record signatures (the Trust Anchor's protocol credentials,
 * docs/escalation.md "Signed records"): Ed25519 through OpenSSL's libcrypto,
 * linked into the host binaries and statically into the guest's
 * lazaret-escalate.
 *
 * A signed record file is   payload || signature (LZ_SIG_LEN bytes)
 * and the signature covers  LZ_SIG_CONTEXT || generation nonce || payload,
 * so a record signed for one generation (or for any other purpose) does not
 * verify in another: each generation has its own keys *and* its own nonce.
 *
 * Keys are raw 32-byte Ed25519 seeds / public keys (RFC 8032), the form the
 * credential files inside the sandbox hold.
 */
#ifndef LAZARET_TRUST_SIGNATURE_H
#define LAZARET_TRUST_SIGNATURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LZ_SIG_LEN 64
#define LZ_SIG_KEY_LEN 32
#define LZ_SIG_NONCE_LEN 32 /* the generation nonce, as 32 lowercase hex digits */
#define LZ_SIG_CONTEXT "lazaret-mailbox-record-v1"

/* n bytes from the kernel's random source (getrandom, waiting for it to be
 * seeded at boot). 0 or -1 (errno). */
int lz_random_bytes(void *p, size_t n);

/* A fresh key pair from the kernel's random source. 0 or -1 (errno). */
int lz_sig_keygen(uint8_t seed[LZ_SIG_KEY_LEN], uint8_t pub[LZ_SIG_KEY_LEN]);

/* The public key of a seed. 0 or -1. */
int lz_sig_public(const uint8_t seed[LZ_SIG_KEY_LEN], uint8_t pub[LZ_SIG_KEY_LEN]);

/* Sign payload for the generation nonce (LZ_SIG_NONCE_LEN bytes). 0 or -1. */
int lz_sig_sign(const uint8_t seed[LZ_SIG_KEY_LEN], const char nonce[LZ_SIG_NONCE_LEN],
                const uint8_t *payload, size_t len, uint8_t sig[LZ_SIG_LEN]);

/* True only for a valid signature of payload by pub for that nonce. */
bool lz_sig_verify(const uint8_t pub[LZ_SIG_KEY_LEN], const char nonce[LZ_SIG_NONCE_LEN],
                   const uint8_t *payload, size_t len, const uint8_t sig[LZ_SIG_LEN]);

#endif
