/* SPDX-License-Identifier: Apache-2.0
 *
 * Ed25519 signatures of mailbox records (signature.h). Ed25519 is used in
 * its pure form (no pre-hash): OpenSSL signs a message given whole, so the
 * signed bytes are assembled in one buffer first; records are at most
 * LZ_MBX_MAX_RECORD bytes.
 */
#include "trust/signature.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/evp.h>

/* context || nonce || payload, freshly allocated; NULL on ENOMEM. */
static uint8_t *signed_bytes(const char nonce[LZ_SIG_NONCE_LEN], const uint8_t *payload, size_t len,
                             size_t *ret_len)
{
    size_t ctx = sizeof(LZ_SIG_CONTEXT); /* the NUL separates context and nonce */
    if (len > SIZE_MAX - ctx - LZ_SIG_NONCE_LEN)
        return NULL;
    uint8_t *m = malloc(ctx + LZ_SIG_NONCE_LEN + len + 1);
    if (!m)
        return NULL;
    memcpy(m, LZ_SIG_CONTEXT, ctx);
    memcpy(m + ctx, nonce, LZ_SIG_NONCE_LEN);
    if (len)
        memcpy(m + ctx + LZ_SIG_NONCE_LEN, payload, len);
    *ret_len = ctx + LZ_SIG_NONCE_LEN + len;
    return m;
}

int lz_sig_public(const uint8_t seed[LZ_SIG_KEY_LEN], uint8_t pub[LZ_SIG_KEY_LEN])
{
    EVP_PKEY *k = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, LZ_SIG_KEY_LEN);
    size_t n = LZ_SIG_KEY_LEN;
    int r = k && EVP_PKEY_get_raw_public_key(k, pub, &n) == 1 && n == LZ_SIG_KEY_LEN ? 0 : -1;
    EVP_PKEY_free(k);
    if (r < 0)
        errno = EINVAL;
    return r;
}

int lz_random_bytes(void *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom((uint8_t *) p + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t) r;
    }
    return 0;
}

int lz_sig_keygen(uint8_t seed[LZ_SIG_KEY_LEN], uint8_t pub[LZ_SIG_KEY_LEN])
{
    if (lz_random_bytes(seed, LZ_SIG_KEY_LEN) < 0)
        return -1;
    return lz_sig_public(seed, pub);
}

int lz_sig_sign(const uint8_t seed[LZ_SIG_KEY_LEN], const char nonce[LZ_SIG_NONCE_LEN],
                const uint8_t *payload, size_t len, uint8_t sig[LZ_SIG_LEN])
{
    size_t mlen;
    uint8_t *m = signed_bytes(nonce, payload, len, &mlen);
    EVP_PKEY *k =
        m ? EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, LZ_SIG_KEY_LEN) : NULL;
    EVP_MD_CTX *ctx = k ? EVP_MD_CTX_new() : NULL;
    size_t slen = LZ_SIG_LEN;
    int r = ctx && EVP_DigestSignInit(ctx, NULL, NULL, NULL, k) == 1 &&
                    EVP_DigestSign(ctx, sig, &slen, m, mlen) == 1 && slen == LZ_SIG_LEN
                ? 0
                : -1;
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(k);
    free(m);
    if (r < 0)
        errno = EINVAL;
    return r;
}

bool lz_sig_verify(const uint8_t pub[LZ_SIG_KEY_LEN], const char nonce[LZ_SIG_NONCE_LEN],
                   const uint8_t *payload, size_t len, const uint8_t sig[LZ_SIG_LEN])
{
    size_t mlen;
    uint8_t *m = signed_bytes(nonce, payload, len, &mlen);
    EVP_PKEY *k =
        m ? EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub, LZ_SIG_KEY_LEN) : NULL;
    EVP_MD_CTX *ctx = k ? EVP_MD_CTX_new() : NULL;
    bool ok = ctx && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, k) == 1 &&
              EVP_DigestVerify(ctx, sig, LZ_SIG_LEN, m, mlen) == 1;
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(k);
    free(m);
    return ok;
}
