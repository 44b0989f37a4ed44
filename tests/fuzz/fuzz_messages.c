/* SPDX-License-Identifier: Apache-2.0
 *
 * libFuzzer target for the control-channel decoders (src/protocol): every
 * input is one received SOCK_SEQPACKET record, handed to lz_rbuf_init() and
 * to every message decoder in turn (HELLO, RUN, REFUSED, SUP_EXEC, text,
 * pair, ENROLL, ENROLLED), whatever its type field says: a peer chooses the
 * type too. The same bytes also go to lz_trust_publication_decode (the
 * Domain's coordinator.trust file, src/trust/publication.h), whose
 * accepted input must re-encode (its CA certificate's DER included) to the
 * whole input, type field and all.
 *
 * Invariants checked (a violation aborts, which libFuzzer records as a
 * crash):
 *  - a refused decode leaves its message zeroed (nothing half-owned);
 *  - an accepted decode has bounded, NUL-free strings and NULL-terminated
 *    vectors of the stated length, and encoding the result again yields
 *    the input byte for byte (after the type), i.e. the decoder accepted
 *    nothing the encoder could not have written.
 * Everything decoded is freed on every path, so LeakSanitizer reports leaks.
 *
 * Run: build-dir/tests/fuzz/fuzz_messages -max_len=65536 NEW_CORPUS_DIR
 *          tests/fuzz/corpus/fuzz_messages
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/x509.h>

#include "protocol/messages.h"
#include "protocol/wire.h"
#include "trust/publication.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_NAME "fuzz_messages"
#include "fuzz_check.h"

static lz_wbuf out; /* 64 KiB: not on the stack */

static void check_str(const char *s, size_t max)
{
    CHECK(s != NULL);
    CHECK(strlen(s) <= max);
}

static void check_strv(char *const *v, size_t n, size_t max)
{
    CHECK(v != NULL);
    CHECK(n <= LZ_MSG_MAX_ARGS);
    for (size_t i = 0; i < n; i++)
        check_str(v[i], max);
    CHECK(v[n] == NULL);
}

/* The re-encoded message equals the input after its type field. */
static void check_reencoded(const uint8_t *data, size_t size)
{
    CHECK(!out.overflow);
    CHECK(out.len == size);
    CHECK(memcmp(out.data + 2, data + 2, size - 2) == 0);
}

static bool reader(lz_rbuf *r, const uint8_t *data, size_t size)
{
    bool ok = lz_rbuf_init(r, data, size);
    CHECK(ok == (size >= 2));
    CHECK(ok == !r->bad);
    if (ok)
        CHECK(r->pos == 2 && r->type == (uint16_t) ((data[0] << 8) | data[1]));
    return ok;
}

static void fuzz_hello(const uint8_t *data, size_t size)
{
    lz_rbuf r;
    if (!reader(&r, data, size))
        return;
    lz_msg_hello m;
    if (!lz_msg_hello_decode(&r, &m)) {
        CHECK(zeroed(&m, sizeof(m)));
        return;
    }
    check_str(m.domain_id, 64);
    check_str(m.fingerprint, 64);
    lz_msg_hello_encode(&out, &m);
    check_reencoded(data, size);
    lz_msg_hello_clear(&m);
}

static void fuzz_run(const uint8_t *data, size_t size)
{
    lz_rbuf r;
    if (!reader(&r, data, size))
        return;
    lz_msg_run m;
    if (!lz_msg_run_decode(&r, &m)) {
        CHECK(zeroed(&m, sizeof(m)));
        return;
    }
    CHECK(m.rows <= 65535 && m.cols <= 65535);
    check_str(m.term, 256);
    check_str(m.cwd, LZ_MSG_MAX_STR);
    check_strv(m.argv, m.argc, LZ_MSG_MAX_STR);
    lz_msg_run_encode(&out, &m);
    check_reencoded(data, size);
    lz_msg_run_clear(&m);
}

static void fuzz_refused(const uint8_t *data, size_t size)
{
    lz_rbuf r;
    if (!reader(&r, data, size))
        return;
    lz_msg_refused m;
    if (!lz_msg_refused_decode(&r, &m)) {
        CHECK(zeroed(&m, sizeof(m)));
        return;
    }
    check_str(m.message, LZ_MSG_MAX_TEXT);
    check_str(m.hint, LZ_MSG_MAX_TEXT);
    lz_msg_refused_encode(&out, r.type, &m);
    check_reencoded(data, size);
    CHECK(memcmp(out.data, data, 2) == 0);
    lz_msg_refused_clear(&m);
}

static void fuzz_exec(const uint8_t *data, size_t size)
{
    lz_rbuf r;
    if (!reader(&r, data, size))
        return;
    lz_msg_exec m;
    if (!lz_msg_exec_decode(&r, &m)) {
        CHECK(zeroed(&m, sizeof(m)));
        return;
    }
    check_str(m.cwd, LZ_MSG_MAX_STR);
    check_strv(m.argv, m.argc, LZ_MSG_MAX_STR);
    check_strv(m.env, m.envc, LZ_MSG_MAX_STR);
    lz_msg_exec_encode(&out, &m);
    check_reencoded(data, size);
    lz_msg_exec_clear(&m);
}

static void fuzz_text(const uint8_t *data, size_t size)
{
    lz_rbuf r;
    if (!reader(&r, data, size))
        return;
    char *t = lz_msg_text_decode(&r);
    if (!t)
        return;
    check_str(t, LZ_MSG_MAX_TEXT);
    lz_msg_text_encode(&out, r.type, t);
    check_reencoded(data, size);
    free(t);
}

static void fuzz_pair(const uint8_t *data, size_t size)
{
    lz_rbuf r;
    if (!reader(&r, data, size))
        return;
    uint32_t a, c;
    if (!lz_msg_pair_decode(&r, &a, &c)) {
        CHECK(size != 10);
        return;
    }
    CHECK(size == 10);
    lz_msg_pair_encode(&out, r.type, a, c);
    check_reencoded(data, size);
}

static void fuzz_enroll(const uint8_t *data, size_t size)
{
    lz_rbuf r;
    if (!reader(&r, data, size))
        return;
    uint32_t v = 0;
    uint8_t key[LZ_MSG_ENROLL_KEY_LEN];
    if (!lz_msg_enroll_decode(&r, &v, key))
        return;
    CHECK(size == 2 + 4 + 4 + LZ_MSG_ENROLL_KEY_LEN);
    lz_msg_enroll_encode(&out, v, key);
    check_reencoded(data, size);
}

static void fuzz_enrolled(const uint8_t *data, size_t size)
{
    lz_rbuf r;
    if (!reader(&r, data, size))
        return;
    char id[33];
    const uint8_t *der = NULL;
    size_t der_len = 0;
    if (!lz_msg_enrolled_decode(&r, id, &der, &der_len))
        return;
    CHECK(strlen(id) == 32);
    for (size_t i = 0; i < 32; i++)
        CHECK((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f'));
    /* the certificate points into the record, none of it past the end */
    CHECK(der_len >= 1 && der_len <= LZ_MSG_MAX_CERT);
    CHECK(der >= data && der + der_len == data + size);
    lz_msg_enrolled_encode(&out, id, der, der_len);
    check_reencoded(data, size);
}

static void fuzz_publication(const uint8_t *data, size_t size)
{
    lz_trust_publication p;
    memset(&p, 0, sizeof(p));
    lz_error *err = NULL;
    if (lz_trust_publication_decode(data, size, &p, &err) < 0) {
        CHECK(err != NULL && err->message != NULL);
        CHECK(zeroed(&p, sizeof(p))); /* *ret is filled only on success */
        lz_error_free(err);
        return;
    }
    CHECK(err == NULL && p.ca != NULL);
    check_str(p.agent_profile, 64);
    check_str(p.domain_id, 64);
    check_str(p.generation_id, 19);
    CHECK(p.agent_profile[0] && p.domain_id[0] && p.generation_id[0]);
    /* Re-encode as lz_trust_publish does: the CA's DER as OpenSSL writes it
     * must be the bytes the file held (d2i accepted nothing but DER). */
    unsigned char *der = NULL;
    int der_len = i2d_X509(p.ca, &der);
    CHECK(der_len > 0);
    lz_wbuf_init(&out, LZ_TRUST_PUBLICATION_TYPE);
    lz_wbuf_u32(&out, p.protocol_version);
    lz_wbuf_str(&out, p.agent_profile);
    lz_wbuf_str(&out, p.domain_id);
    lz_wbuf_str(&out, p.generation_id);
    lz_wbuf_bytes(&out, der, (size_t) der_len);
    OPENSSL_free(der);
    CHECK(!out.overflow && out.len == size && memcmp(out.data, data, size) == 0);
    lz_trust_publication_clear(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a record is never larger than LZ_WIRE_MAX (lz_wire_recv) */
    if (size > LZ_WIRE_MAX)
        return -1;
    fuzz_hello(data, size);
    fuzz_run(data, size);
    fuzz_refused(data, size);
    fuzz_exec(data, size);
    fuzz_text(data, size);
    fuzz_pair(data, size);
    fuzz_enroll(data, size);
    fuzz_enrolled(data, size);
    fuzz_publication(data, size);
    return 0;
}
