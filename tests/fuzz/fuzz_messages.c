/* SPDX-License-Identifier: Apache-2.0
 *
 * libFuzzer target for the control-channel decoders (src/protocol): every
 * input is one received SOCK_SEQPACKET record, handed to lz_rbuf_init() and
 * to every message decoder in turn (HELLO, RUN, REFUSED, SUP_EXEC, text,
 * pair), whatever its type field says: a peer chooses the type too.
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

#include "protocol/messages.h"
#include "protocol/wire.h"

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
    return 0;
}
