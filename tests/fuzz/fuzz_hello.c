/* SPDX-License-Identifier: Apache-2.0
 *
 * libFuzzer target for the name on a connection (src/protocol/hello.c):
 * the first bytes a sandboxed client sends on a TCP connection to port 443
 * or 80. Every input goes to both decoders, as a heap copy of exactly its
 * length (a read past it is an AddressSanitizer report), whole and cut at
 * a few points (as the name check sees it arrive over several reads).
 *
 * Invariants checked (a violation aborts, which libFuzzer records as a
 * crash):
 *  - *name_len is 0 unless LZ_HELLO_NAME, and 1..LZ_HELLO_NAME_MAX with
 *    it; the decoder writes nothing past name_len (the rest of name keeps
 *    its fill);
 *  - a name holds no NUL; an HTTP name is one of the input's runs of
 *    bytes, ends where a ':' or whitespace or the line end follows, and
 *    has no whitespace, '@', '/', '\\', '[', ']', '?', '#' or ':';
 *  - later bytes never change an answer: for a prefix p of the input,
 *    NEED_MORE(full) implies NEED_MORE(p); INVALID(p) implies
 *    INVALID(full); a final answer for p (name, no name, encrypted) is the
 *    full input's answer, with the same name;
 *  - lz_http_request_frame (one request per port-80 connection): a header
 *    length only with OK, ending in CRLF CRLF within the input and within
 *    LZ_HELLO_MAX, a body length at most LZ_HTTP_BODY_MAX; it agrees with
 *    the host decoder (OK only where that gives a name or no name,
 *    NEED_MORE only where that says NEED_MORE, INVALID wherever that
 *    does) and later bytes never change its answer either;
 *  - lz-namecheck's TLS gate decoders: lz_tls_client_hello_next (with and
 *    without the ChangeCipherSpec of a retry) agrees with
 *    lz_tls_client_hello_name where it gives a final answer, gives an end
 *    within the input only then, and later bytes change neither answer
 *    nor end; lz_tls_server_hello_kind likewise (an end only for a
 *    HelloRetryRequest or an alert).
 *
 * Run: build-dir/tests/fuzz/fuzz_hello -dict=tests/fuzz/fuzz_hello.dict
 *          -max_total_time=180 NEW_CORPUS_DIR tests/fuzz/corpus/fuzz_hello
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/hello.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_NAME "fuzz_hello"
#include "fuzz_check.h"

#define FILL 0xa5

typedef lz_hello_result (*decoder)(const unsigned char *, size_t, char[static LZ_HELLO_NAME_MAX],
                                   size_t *);

typedef struct outcome {
    lz_hello_result r;
    char name[LZ_HELLO_NAME_MAX];
    size_t len;
} outcome;

static outcome run(decoder d, const uint8_t *buf, size_t len)
{
    outcome o;
    memset(o.name, FILL, sizeof(o.name));
    o.len = 999;
    o.r = d(buf, len, o.name, &o.len);
    CHECK(o.r >= LZ_HELLO_NEED_MORE && o.r <= LZ_HELLO_INVALID);
    CHECK(lz_hello_result_text(o.r) != NULL);
    if (o.r != LZ_HELLO_NAME) {
        CHECK(o.len == 0);
        for (size_t i = 0; i < sizeof(o.name); i++)
            CHECK((uint8_t) o.name[i] == FILL);
        return o;
    }
    CHECK(o.len >= 1 && o.len <= LZ_HELLO_NAME_MAX);
    CHECK(memchr(o.name, '\0', o.len) == NULL);
    for (size_t i = o.len; i < sizeof(o.name); i++)
        CHECK((uint8_t) o.name[i] == FILL);
    return o;
}

static void check_http_name(const outcome *o, const uint8_t *buf, size_t len)
{
    if (o->r != LZ_HELLO_NAME)
        return;
    for (size_t i = 0; i < o->len; i++) {
        unsigned char c = (unsigned char) o->name[i];
        CHECK(c > 0x20 && c < 0x7f && !strchr("@/\\[]?#:", c));
    }
    bool found = false;
    for (size_t at = 0; at + o->len < len && !found; at++)
        found = memcmp(buf + at, o->name, o->len) == 0 &&
                (buf[at + o->len] == ':' || buf[at + o->len] == ' ' || buf[at + o->len] == '\t' ||
                 buf[at + o->len] == '\r');
    CHECK(found);
}

/* The answer for a prefix agrees with the whole input's. */
static void check_prefix(const outcome *full, const outcome *part)
{
    if (full->r == LZ_HELLO_NEED_MORE)
        CHECK(part->r == LZ_HELLO_NEED_MORE);
    if (part->r == LZ_HELLO_INVALID)
        CHECK(full->r == LZ_HELLO_INVALID);
    if (part->r == LZ_HELLO_NAME || part->r == LZ_HELLO_NO_NAME || part->r == LZ_HELLO_ENCRYPTED) {
        CHECK(full->r == part->r);
        CHECK(full->len == part->len && memcmp(full->name, part->name, part->len) == 0);
    }
}

static void fuzz_one(decoder d, const uint8_t *buf, size_t size, bool http)
{
    outcome full = run(d, buf, size);
    if (http)
        check_http_name(&full, buf, size);
    if (size == 0)
        return;
    /* a few cuts: the last byte missing, the middle, and one chosen by
     * the input's first byte */
    size_t cuts[3] = { size - 1, size / 2, (size_t) buf[0] * 61 % size };
    for (size_t i = 0; i < 3; i++) {
        outcome part = run(d, buf, cuts[i]);
        check_prefix(&full, &part);
    }
}

typedef struct framing {
    lz_http_frame_result r;
    size_t header_len;
    uint64_t body_len;
} framing;

static framing frame_run(const uint8_t *buf, size_t len)
{
    framing f = { .header_len = 999, .body_len = 999 };
    f.r = lz_http_request_frame(buf, len, &f.header_len, &f.body_len);
    CHECK(f.r == LZ_HTTP_FRAME_NEED_MORE || f.r == LZ_HTTP_FRAME_OK ||
          f.r == LZ_HTTP_FRAME_INVALID);
    if (f.r != LZ_HTTP_FRAME_OK) {
        CHECK(f.header_len == 0 && f.body_len == 0);
        return f;
    }
    CHECK(f.header_len >= 4 && f.header_len <= len && f.header_len <= LZ_HELLO_MAX);
    CHECK(memcmp(buf + f.header_len - 4, "\r\n\r\n", 4) == 0);
    CHECK(f.body_len <= LZ_HTTP_BODY_MAX);
    /* the host decoder, on the same bytes */
    outcome h = run(lz_http_request_host, buf, len);
    CHECK(h.r == LZ_HELLO_NAME || h.r == LZ_HELLO_NO_NAME);
    return f;
}

static void fuzz_frame(const uint8_t *buf, size_t size)
{
    framing full = frame_run(buf, size);
    outcome h = run(lz_http_request_host, buf, size);
    if (full.r == LZ_HTTP_FRAME_NEED_MORE)
        CHECK(h.r == LZ_HELLO_NEED_MORE);
    if (h.r == LZ_HELLO_INVALID)
        CHECK(full.r == LZ_HTTP_FRAME_INVALID);
    if (size == 0)
        return;
    size_t cuts[3] = { size - 1, size / 2, (size_t) buf[0] * 61 % size };
    for (size_t i = 0; i < 3; i++) {
        framing part = frame_run(buf, cuts[i]);
        if (full.r == LZ_HTTP_FRAME_NEED_MORE)
            CHECK(part.r == LZ_HTTP_FRAME_NEED_MORE);
        if (part.r == LZ_HTTP_FRAME_INVALID)
            CHECK(full.r == LZ_HTTP_FRAME_INVALID);
        if (part.r == LZ_HTTP_FRAME_OK)
            CHECK(full.r == LZ_HTTP_FRAME_OK && full.header_len == part.header_len &&
                  full.body_len == part.body_len);
    }
}

/* lz_tls_client_hello_next: the same answers as the plain decoder where it
 * is final (after_retry false), an end within the input only with a final
 * answer, and later bytes change neither. */
static outcome next_run(const uint8_t *buf, size_t len, bool after_retry, size_t *end)
{
    outcome o;
    memset(o.name, FILL, sizeof(o.name));
    o.len = 999;
    *end = 999;
    o.r = lz_tls_client_hello_next(buf, len, after_retry, o.name, &o.len, end);
    CHECK(o.r >= LZ_HELLO_NEED_MORE && o.r <= LZ_HELLO_INVALID);
    bool final = o.r == LZ_HELLO_NAME || o.r == LZ_HELLO_NO_NAME || o.r == LZ_HELLO_ENCRYPTED;
    CHECK(final ? *end >= 5 && *end <= len : *end == 0);
    CHECK(o.r == LZ_HELLO_NAME ? o.len >= 1 && o.len <= LZ_HELLO_NAME_MAX : o.len == 0);
    for (size_t i = o.len; i < sizeof(o.name); i++)
        CHECK((uint8_t) o.name[i] == FILL);
    if (final && !after_retry) {
        outcome plain = run(lz_tls_client_hello_name, buf, len);
        CHECK(plain.r == o.r && plain.len == o.len && memcmp(plain.name, o.name, o.len) == 0);
    }
    return o;
}

static void fuzz_next(const uint8_t *buf, size_t size, bool after_retry)
{
    size_t end_full = 0, end_part = 0;
    outcome full = next_run(buf, size, after_retry, &end_full);
    if (size == 0)
        return;
    size_t cuts[3] = { size - 1, size / 2, (size_t) buf[0] * 61 % size };
    for (size_t i = 0; i < 3; i++) {
        outcome part = next_run(buf, cuts[i], after_retry, &end_part);
        check_prefix(&full, &part);
        if (part.r != LZ_HELLO_NEED_MORE && part.r != LZ_HELLO_INVALID)
            CHECK(end_part == end_full);
    }
}

/* lz_tls_server_hello_kind: an end only with RETRY / ALERT, within the
 * input; later bytes change neither the kind nor the end (NEED_MORE of the
 * whole implies NEED_MORE of a prefix, INVALID of a prefix INVALID of the
 * whole). */
static lz_tls_server_kind server_run(const uint8_t *buf, size_t len, size_t *end)
{
    *end = 999;
    lz_tls_server_kind k = lz_tls_server_hello_kind(buf, len, end);
    CHECK(k >= LZ_TLS_SERVER_NEED_MORE && k <= LZ_TLS_SERVER_INVALID);
    if (k == LZ_TLS_SERVER_RETRY || k == LZ_TLS_SERVER_ALERT)
        CHECK(*end >= 7 && *end <= len);
    else
        CHECK(*end == 0);
    return k;
}

static void fuzz_server(const uint8_t *buf, size_t size)
{
    size_t end_full = 0, end_part = 0;
    lz_tls_server_kind full = server_run(buf, size, &end_full);
    if (size == 0)
        return;
    size_t cuts[3] = { size - 1, size / 2, (size_t) buf[0] * 61 % size };
    for (size_t i = 0; i < 3; i++) {
        lz_tls_server_kind part = server_run(buf, cuts[i], &end_part);
        if (full == LZ_TLS_SERVER_NEED_MORE)
            CHECK(part == LZ_TLS_SERVER_NEED_MORE);
        if (part == LZ_TLS_SERVER_INVALID)
            CHECK(full == LZ_TLS_SERVER_INVALID);
        if (part != LZ_TLS_SERVER_NEED_MORE && part != LZ_TLS_SERVER_INVALID)
            CHECK(full == part && end_full == end_part);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A little past the bound, so that the bound itself is exercised. */
    if (size > LZ_HELLO_MAX + 64)
        return -1;
    uint8_t *copy = malloc(size ? size : 1);
    CHECK(copy != NULL);
    memcpy(copy, data, size);
    fuzz_one(lz_tls_client_hello_name, copy, size, false);
    fuzz_one(lz_http_request_host, copy, size, true);
    fuzz_frame(copy, size);
    fuzz_next(copy, size, false);
    fuzz_next(copy, size, true);
    fuzz_server(copy, size);
    free(copy);
    return 0;
}
