/* SPDX-License-Identifier: Apache-2.0
 *
 * libFuzzer target for the Escalation Mailbox's record decoders
 * (src/protocol/mailbox.c): every input is one record file as the
 * coordinator reads it from a sandbox-writable inbox (or the client from
 * its outbox), given to every decoder in turn (REQUEST, CANCEL, ACK,
 * CHUNK, RESULT) whatever its type field says, and to lz_mbx_record_type.
 *
 * Invariants checked (a violation aborts, which libFuzzer records as a
 * crash):
 *  - a refused decode leaves its record zeroed (nothing half-owned);
 *  - at most one decoder accepts an input, and it is the one whose type
 *    lz_mbx_record_type() reports; nothing over LZ_MBX_MAX_RECORD bytes is
 *    accepted;
 *  - an accepted record holds its bounds (ids of 32 lowercase hex digits,
 *    argv 1..256 elements NULL-terminated, each NUL-free UTF-8 within
 *    4096 bytes and 32768 together, argv[0] absolute, cwd absolute and
 *    normalized, why and message UTF-8 within 1024, stream 1|2, chunk
 *    within 16384 bytes pointing into the input, outcome 1..5, status only
 *    for COMPLETED), lz_mbx_request_problem() finds nothing, and encoding
 *    it again gives the input byte for byte: the decoder accepted nothing
 *    its encoder could not have written.
 * Everything decoded is freed on every path, so LeakSanitizer reports leaks.
 *
 * Run: build-dir/tests/fuzz/fuzz_mailbox -max_total_time=180 NEW_CORPUS_DIR
 *          tests/fuzz/corpus/fuzz_mailbox
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/util.h"
#include "protocol/mailbox.h"
#include "protocol/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_NAME "fuzz_mailbox"
#include "fuzz_check.h"

static lz_wbuf out; /* 64 KiB: not on the stack */

/* Checked here independently of mailbox.c's own helpers, so that a bug in
 * those is not mirrored by the oracle. */
static bool id_ok(const char *id)
{
    if (strlen(id) != LZ_MBX_ID_LEN)
        return false;
    return strspn(id, "0123456789abcdef") == LZ_MBX_ID_LEN;
}

static void check_text(const char *s, size_t max)
{
    CHECK(s != NULL);
    size_t n = strlen(s);
    CHECK(n <= max);
    CHECK(lz_utf8_valid(s, n));
}

static bool cwd_ok(const char *p)
{
    if (p[0] != '/')
        return false;
    if (strcmp(p, "/") == 0)
        return true;
    size_t n = strlen(p);
    if (p[n - 1] == '/' || strstr(p, "//"))
        return false;
    /* "/." and "/.." as whole components */
    for (const char *c = p; (c = strstr(c, "/.")) != NULL; c++) {
        const char *e = c + 2;
        if (*e == '.')
            e++;
        if (*e == '/' || *e == '\0')
            return false;
    }
    return true;
}

static void check_reencoded(const uint8_t *data, size_t size)
{
    CHECK(!out.overflow);
    CHECK(out.len == size);
    CHECK(memcmp(out.data, data, size) == 0);
}

/* Returns whether the input was accepted as a REQUEST. */
static bool fuzz_request(const uint8_t *data, size_t size)
{
    lz_mbx_request m;
    memset(&m, 0x5a, sizeof(m));
    if (!lz_mbx_request_decode(data, size, &m)) {
        CHECK(zeroed(&m, sizeof(m)));
        return false;
    }
    CHECK(id_ok(m.capability));
    CHECK(id_ok(m.request_id));
    CHECK(m.cwd && strlen(m.cwd) <= LZ_MBX_MAX_CWD && cwd_ok(m.cwd));
    check_text(m.cwd, LZ_MBX_MAX_CWD);
    CHECK(m.argv != NULL);
    CHECK(m.argc >= 1 && m.argc <= LZ_MBX_MAX_ARGS);
    size_t total = 0;
    for (size_t i = 0; i < m.argc; i++) {
        check_text(m.argv[i], LZ_MBX_MAX_ARG);
        total += strlen(m.argv[i]);
    }
    CHECK(total <= LZ_MBX_MAX_ARGV_BYTES);
    CHECK(m.argv[m.argc] == NULL);
    CHECK(m.argv[0][0] == '/');
    check_text(m.why, LZ_MBX_MAX_WHY);
    CHECK(lz_mbx_request_problem(&m) == NULL);
    lz_mbx_request_encode(&out, &m);
    check_reencoded(data, size);
    lz_mbx_request_clear(&m);
    CHECK(zeroed(&m, sizeof(m)));
    return true;
}

static bool fuzz_control(const uint8_t *data, size_t size, uint16_t type)
{
    lz_mbx_control m;
    memset(&m, 0x5a, sizeof(m));
    if (!lz_mbx_control_decode(data, size, type, &m)) {
        CHECK(zeroed(&m, sizeof(m)));
        return false;
    }
    CHECK(id_ok(m.capability));
    CHECK(id_ok(m.request_id));
    CHECK(type == LZ_MBX_ACK || m.acked == 0);
    lz_mbx_control_encode(&out, type, &m);
    check_reencoded(data, size);
    return true;
}

static bool fuzz_chunk(const uint8_t *data, size_t size)
{
    lz_mbx_chunk m;
    memset(&m, 0x5a, sizeof(m));
    if (!lz_mbx_chunk_decode(data, size, &m)) {
        CHECK(zeroed(&m, sizeof(m)));
        return false;
    }
    CHECK(id_ok(m.request_id));
    CHECK(m.stream == LZ_MBX_STDOUT || m.stream == LZ_MBX_STDERR);
    CHECK(m.len <= LZ_MBX_MAX_CHUNK);
    /* the bytes are the input's last m.len bytes, not a copy */
    CHECK(m.data == data + size - m.len);
    lz_mbx_chunk_encode(&out, &m);
    check_reencoded(data, size);
    return true;
}

static bool fuzz_result(const uint8_t *data, size_t size)
{
    lz_mbx_result m;
    memset(&m, 0x5a, sizeof(m));
    if (!lz_mbx_result_decode(data, size, &m)) {
        CHECK(zeroed(&m, sizeof(m)));
        return false;
    }
    CHECK(id_ok(m.request_id));
    CHECK(m.outcome >= LZ_MBX_COMPLETED && m.outcome <= LZ_MBX_FAILED);
    if (m.outcome == LZ_MBX_COMPLETED)
        CHECK(m.status <= 255 + 128);
    else
        CHECK(m.status == 0);
    check_text(m.message, LZ_MBX_MAX_MESSAGE);
    lz_mbx_result_encode(&out, &m);
    check_reencoded(data, size);
    lz_mbx_result_clear(&m);
    CHECK(zeroed(&m, sizeof(m)));
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A little past the largest record, so that the size bound itself is
     * exercised; a reader never reads more than LZ_MBX_MAX_RECORD + 1. */
    if (size > LZ_MBX_MAX_RECORD + 16)
        return -1;
    uint16_t type = lz_mbx_record_type(data, size);
    CHECK(type == 0 || type == LZ_MBX_REQUEST || type == LZ_MBX_CANCEL || type == LZ_MBX_ACK ||
          type == LZ_MBX_CHUNK || type == LZ_MBX_RESULT);
    if (size > LZ_MBX_MAX_RECORD || size < 10)
        CHECK(type == 0);
    uint16_t accepted = 0;
    int n_accepted = 0;
    if (fuzz_request(data, size))
        accepted = LZ_MBX_REQUEST, n_accepted++;
    if (fuzz_control(data, size, LZ_MBX_CANCEL))
        accepted = LZ_MBX_CANCEL, n_accepted++;
    if (fuzz_control(data, size, LZ_MBX_ACK))
        accepted = LZ_MBX_ACK, n_accepted++;
    if (fuzz_chunk(data, size))
        accepted = LZ_MBX_CHUNK, n_accepted++;
    if (fuzz_result(data, size))
        accepted = LZ_MBX_RESULT, n_accepted++;
    /* the control decoder refuses every other type */
    lz_mbx_control c;
    CHECK(!lz_mbx_control_decode(data, size, LZ_MBX_REQUEST, &c) && zeroed(&c, sizeof(c)));
    CHECK(n_accepted <= 1);
    if (n_accepted)
        CHECK(accepted == type);
    return 0;
}
