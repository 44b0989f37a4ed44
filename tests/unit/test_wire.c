/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests for src/protocol/wire.c and src/protocol/messages.c: the
 * bounded writer and reader, every message's encode -> decode round trip and
 * the decoders' refusals, and lz_wire_send()/lz_wire_recv() over a real
 * SOCK_SEQPACKET socketpair, with descriptors. Every rule has an accepting
 * and a refusing case; a refused decode must free what it decoded (ASan's
 * LeakSanitizer checks) and leave the message zeroed.
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/util.h"
#include "protocol/messages.h"
#include "protocol/wire.h"
#include "unit_fds.h"

/* ---- helpers ------------------------------------------------------------ */

/* The message structs own their strings (char *) once decoded; the
 * encoders only read them, so tests may point them at literals. */
#define W(s) ((char *) (s))

static bool fd_is_open(int fd)
{
    return fcntl(fd, F_GETFD) >= 0 || errno != EBADF;
}

/* The n lowest descriptor numbers that are free now: where the kernel puts
 * the next received descriptors. */
static void lowest_free_fds(int *out, size_t n)
{
    int fd = 0;
    for (size_t i = 0; i < n; fd++)
        if (!fd_is_open(fd))
            out[i++] = fd;
}

static void expect_error(lz_error **err, int errnum, const char *needle)
{
    assert_non_null(*err);
    assert_non_null((*err)->message);
    if ((*err)->errnum != errnum || (needle && !strstr((*err)->message, needle)))
        print_error("unexpected error: errnum %d (%s), message \"%s\"\n", (*err)->errnum,
                    strerror((*err)->errnum), (*err)->message);
    assert_int_equal((*err)->errnum, errnum);
    if (needle)
        assert_non_null(strstr((*err)->message, needle));
    lz_error_free(lz_error_take(err));
}

static void expect_ok(lz_error **err)
{
    if (*err)
        print_error("unexpected error: %s\n", (*err)->message);
    assert_null(*err);
}

static lz_rbuf reader_of(const lz_wbuf *b)
{
    assert_false(b->overflow);
    lz_rbuf r;
    assert_true(lz_rbuf_init(&r, b->data, b->len));
    return r;
}

/* A reader over the first len bytes of b (a truncated message). */
static lz_rbuf reader_prefix(const lz_wbuf *b, size_t len)
{
    lz_rbuf r;
    assert_true(lz_rbuf_init(&r, b->data, len));
    return r;
}

/* Append one raw byte (a trailing byte after the last field). */
static void append_byte(lz_wbuf *b, uint8_t v)
{
    assert_true(b->len < LZ_WIRE_MAX);
    b->data[b->len++] = v;
}

/* A string of n copies of c (fresh allocation). */
static char *repeat(char c, size_t n)
{
    char *s = lz_xmalloc(n + 1);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

static bool zero_bytes(const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return false;
    return true;
}

/* ---- wbuf / rbuf -------------------------------------------------------- */

static void test_wbuf_layout_big_endian(void **state)
{
    (void) state;
    static lz_wbuf b;
    lz_wbuf_init(&b, 0x1234);
    lz_wbuf_u32(&b, 0xdeadbeef);
    lz_wbuf_str(&b, "ab");
    static const uint8_t want[] = { 0x12, 0x34, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 2, 'a', 'b' };
    assert_false(b.overflow);
    assert_int_equal(b.len, sizeof(want));
    assert_memory_equal(b.data, want, sizeof(want));
}

static void test_wbuf_rbuf_round_trip(void **state)
{
    (void) state;
    static lz_wbuf b;
    static const uint8_t raw[] = { 'x', 0, 0xff, 'y' };
    lz_wbuf_init(&b, 0xfffe);
    lz_wbuf_u32(&b, 0);
    lz_wbuf_u32(&b, 1);
    lz_wbuf_u32(&b, UINT32_MAX);
    lz_wbuf_bytes(&b, raw, sizeof(raw));
    lz_wbuf_str(&b, "hello");
    lz_wbuf_str(&b, "");
    lz_wbuf_bytes(&b, NULL, 0);

    lz_rbuf r = reader_of(&b);
    assert_int_equal(r.type, 0xfffe);
    assert_int_equal(lz_rbuf_u32(&r), 0);
    assert_int_equal(lz_rbuf_u32(&r), 1);
    assert_int_equal(lz_rbuf_u32(&r), UINT32_MAX);
    const uint8_t *p = NULL;
    size_t n = 99;
    assert_true(lz_rbuf_bytes(&r, &p, &n, sizeof(raw)));
    assert_int_equal(n, sizeof(raw));
    assert_memory_equal(p, raw, sizeof(raw));
    /* not copied: points into the message */
    assert_true(p > b.data && p < b.data + b.len);
    _cleanup_free_ char *s = lz_rbuf_str(&r, 5);
    assert_non_null(s);
    assert_string_equal(s, "hello");
    _cleanup_free_ char *e = lz_rbuf_str(&r, 0);
    assert_non_null(e);
    assert_string_equal(e, "");
    assert_true(lz_rbuf_bytes(&r, &p, &n, 0));
    assert_int_equal(n, 0);
    assert_false(r.bad);
    assert_true(lz_rbuf_done(&r));
}

static void test_rbuf_init_needs_a_type(void **state)
{
    (void) state;
    static const uint8_t msg[] = { 0x00, 0x0b };
    lz_rbuf r;
    assert_true(lz_rbuf_init(&r, msg, 2));
    assert_int_equal(r.type, LZ_MSG_REFUSED);
    assert_true(lz_rbuf_done(&r));

    assert_false(lz_rbuf_init(&r, msg, 1));
    assert_true(r.bad);
    assert_false(lz_rbuf_done(&r));
    assert_int_equal(lz_rbuf_u32(&r), 0);
    assert_false(lz_rbuf_init(&r, msg, 0));
    assert_true(r.bad);
    assert_null(lz_rbuf_str(&r, 10));
}

static void test_rbuf_truncated_u32(void **state)
{
    (void) state;
    static const uint8_t msg[] = { 0, 1, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0x01, 0x02 };
    lz_rbuf r;
    /* accepted: exactly four bytes */
    assert_true(lz_rbuf_init(&r, msg, 6));
    assert_int_equal(lz_rbuf_u32(&r), 0xaabbccdd);
    assert_true(lz_rbuf_done(&r));

    /* refused: three bytes left */
    assert_true(lz_rbuf_init(&r, msg, 5));
    assert_int_equal(lz_rbuf_u32(&r), 0);
    assert_true(r.bad);
    assert_false(lz_rbuf_done(&r));

    /* refused: the second of two u32 is short, and bad stays set */
    assert_true(lz_rbuf_init(&r, msg, sizeof(msg)));
    assert_int_equal(lz_rbuf_u32(&r), 0xaabbccdd);
    assert_int_equal(lz_rbuf_u32(&r), 0);
    assert_true(r.bad);
    assert_false(lz_rbuf_done(&r));
    assert_null(lz_rbuf_str(&r, 100));
}

static void test_rbuf_length_past_end(void **state)
{
    (void) state;
    /* length 3 with 3 bytes: accepted */
    static const uint8_t ok[] = { 0, 1, 0, 0, 0, 3, 'a', 'b', 'c' };
    lz_rbuf r;
    assert_true(lz_rbuf_init(&r, ok, sizeof(ok)));
    _cleanup_free_ char *s = lz_rbuf_str(&r, 16);
    assert_string_equal(s, "abc");
    assert_true(lz_rbuf_done(&r));

    /* length 4 with 3 bytes: refused */
    static const uint8_t short4[] = { 0, 1, 0, 0, 0, 4, 'a', 'b', 'c' };
    assert_true(lz_rbuf_init(&r, short4, sizeof(short4)));
    assert_null(lz_rbuf_str(&r, 16));
    assert_true(r.bad);
    assert_false(lz_rbuf_done(&r));

    /* a length near 2^32 (pos + n would wrap a 32-bit sum): refused */
    static const uint8_t huge[] = { 0, 1, 0xff, 0xff, 0xff, 0xff, 'a', 'b', 'c' };
    const uint8_t *p = NULL;
    size_t n = 0;
    assert_true(lz_rbuf_init(&r, huge, sizeof(huge)));
    assert_false(lz_rbuf_bytes(&r, &p, &n, SIZE_MAX));
    assert_null(p);
    assert_true(r.bad);
    assert_false(lz_rbuf_done(&r));
}

static void test_rbuf_bytes_max(void **state)
{
    (void) state;
    static const uint8_t msg[] = { 0, 1, 0, 0, 0, 3, 1, 2, 3 };
    const uint8_t *p = NULL;
    size_t n = 0;
    lz_rbuf r;
    assert_true(lz_rbuf_init(&r, msg, sizeof(msg)));
    assert_true(lz_rbuf_bytes(&r, &p, &n, 3));
    assert_int_equal(n, 3);
    assert_true(lz_rbuf_done(&r));

    p = NULL;
    n = 77;
    assert_true(lz_rbuf_init(&r, msg, sizeof(msg)));
    assert_false(lz_rbuf_bytes(&r, &p, &n, 2));
    assert_null(p); /* ret_* untouched */
    assert_int_equal(n, 77);
    assert_false(lz_rbuf_done(&r));
}

static void test_rbuf_str_embedded_nul(void **state)
{
    (void) state;
    static const uint8_t nul_mid[] = { 0, 1, 0, 0, 0, 3, 'a', 0, 'c' };
    static const uint8_t nul_end[] = { 0, 1, 0, 0, 0, 3, 'a', 'b', 0 };
    static const uint8_t nul_only[] = { 0, 1, 0, 0, 0, 1, 0 };
    const uint8_t *const cases[] = { nul_mid, nul_end, nul_only };
    const size_t lens[] = { sizeof(nul_mid), sizeof(nul_end), sizeof(nul_only) };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(cases); i++) {
        lz_rbuf r;
        assert_true(lz_rbuf_init(&r, cases[i], lens[i]));
        assert_null(lz_rbuf_str(&r, 16));
        assert_true(r.bad);
        assert_false(lz_rbuf_done(&r));
        /* the same bytes are fine as raw bytes */
        const uint8_t *p;
        size_t n;
        assert_true(lz_rbuf_init(&r, cases[i], lens[i]));
        assert_true(lz_rbuf_bytes(&r, &p, &n, 16));
        assert_true(lz_rbuf_done(&r));
    }
}

static void test_rbuf_str_longer_than_max(void **state)
{
    (void) state;
    static lz_wbuf b;
    lz_wbuf_init(&b, 1);
    lz_wbuf_str(&b, "abcdef");
    lz_rbuf r = reader_of(&b);
    _cleanup_free_ char *s = lz_rbuf_str(&r, 6);
    assert_string_equal(s, "abcdef");
    assert_true(lz_rbuf_done(&r));

    r = reader_of(&b);
    assert_null(lz_rbuf_str(&r, 5));
    assert_true(r.bad);
    assert_false(lz_rbuf_done(&r));
}

static void test_rbuf_trailing_bytes(void **state)
{
    (void) state;
    static lz_wbuf b;
    lz_wbuf_init(&b, 1);
    lz_wbuf_u32(&b, 7);
    lz_rbuf r = reader_of(&b);
    assert_int_equal(lz_rbuf_u32(&r), 7);
    assert_true(lz_rbuf_done(&r));

    append_byte(&b, 0);
    r = reader_of(&b);
    assert_int_equal(lz_rbuf_u32(&r), 7);
    assert_false(r.bad);
    assert_false(lz_rbuf_done(&r));
}

static void test_wbuf_overflow(void **state)
{
    (void) state;
    static lz_wbuf b;
    /* exactly full: type + length + (LZ_WIRE_MAX - 6) bytes */
    size_t fill = LZ_WIRE_MAX - 6;
    _cleanup_free_ char *big = repeat('x', LZ_WIRE_MAX);
    lz_wbuf_init(&b, 1);
    lz_wbuf_bytes(&b, big, fill);
    assert_false(b.overflow);
    assert_int_equal(b.len, LZ_WIRE_MAX);

    /* one byte more overflows, and the overflow is sticky */
    lz_wbuf_init(&b, 1);
    lz_wbuf_bytes(&b, big, fill + 1);
    assert_true(b.overflow);
    size_t len = b.len;
    lz_wbuf_u32(&b, 1);
    lz_wbuf_str(&b, "");
    assert_true(b.overflow);
    assert_true(b.len <= LZ_WIRE_MAX);
    assert_int_equal(b.len, len);

    /* a new message starts clean */
    lz_wbuf_init(&b, 2);
    assert_false(b.overflow);
    assert_int_equal(b.len, 2);
}

/* ---- HELLO -------------------------------------------------------------- */

static void test_hello_round_trip(void **state)
{
    (void) state;
    static lz_wbuf b;
    _cleanup_free_ char *id = repeat('a', 64);
    _cleanup_free_ char *fp = repeat('f', 64);
    lz_msg_hello in = { .version = LZ_SESSION_PROTOCOL_VERSION,
                        .domain_id = id,
                        .fingerprint = fp };
    lz_msg_hello_encode(&b, &in);
    lz_rbuf r = reader_of(&b);
    assert_int_equal(r.type, LZ_MSG_HELLO);
    lz_msg_hello out;
    assert_true(lz_msg_hello_decode(&r, &out));
    assert_int_equal(out.version, LZ_SESSION_PROTOCOL_VERSION);
    assert_string_equal(out.domain_id, id);
    assert_string_equal(out.fingerprint, fp);
    lz_msg_hello_clear(&out);
    assert_null(out.domain_id);
    assert_null(out.fingerprint);
}

static void test_hello_refuses_malformed(void **state)
{
    (void) state;
    static lz_wbuf b;
    lz_msg_hello out;
    /* a Domain ID longer than 64 bytes */
    _cleanup_free_ char *long_id = repeat('a', 65);
    lz_msg_hello in = { .version = 1, .domain_id = long_id, .fingerprint = W("f") };
    lz_msg_hello_encode(&b, &in);
    lz_rbuf r = reader_of(&b);
    assert_false(lz_msg_hello_decode(&r, &out));
    assert_true(zero_bytes(&out, sizeof(out)));

    /* every truncation (a missing field) */
    in.domain_id = W("d");
    in.fingerprint = W("fp");
    lz_msg_hello_encode(&b, &in);
    for (size_t len = 2; len < b.len; len++) {
        r = reader_prefix(&b, len);
        assert_false(lz_msg_hello_decode(&r, &out));
        assert_true(zero_bytes(&out, sizeof(out)));
    }
    /* a trailing byte */
    append_byte(&b, 0);
    r = reader_of(&b);
    assert_false(lz_msg_hello_decode(&r, &out));
    assert_true(zero_bytes(&out, sizeof(out)));
}

/* ---- RUN ---------------------------------------------------------------- */

static void test_run_round_trip(void **state)
{
    (void) state;
    static lz_wbuf b;
    char *argv[] = { W("ls"), W("-l"), W("a b"), W(""), NULL };
    lz_msg_run in = { .interactive = true,
                      .rows = 65535,
                      .cols = 120,
                      .term = W("xterm-256color"),
                      .cwd = W("src/sub"),
                      .argv = argv,
                      .argc = 4 };
    lz_msg_run_encode(&b, &in);
    lz_rbuf r = reader_of(&b);
    assert_int_equal(r.type, LZ_MSG_RUN);
    lz_msg_run out;
    assert_true(lz_msg_run_decode(&r, &out));
    assert_true(out.interactive);
    assert_int_equal(out.rows, 65535);
    assert_int_equal(out.cols, 120);
    assert_string_equal(out.term, "xterm-256color");
    assert_string_equal(out.cwd, "src/sub");
    assert_int_equal(out.argc, 4);
    for (size_t i = 0; i < 4; i++)
        assert_string_equal(out.argv[i], argv[i]);
    assert_null(out.argv[4]);
    lz_msg_run_clear(&out);
    assert_null(out.argv);

    /* the login shell: no argv, no term, no cwd */
    lz_msg_run login = { 0 };
    lz_msg_run_encode(&b, &login);
    r = reader_of(&b);
    assert_true(lz_msg_run_decode(&r, &out));
    assert_false(out.interactive);
    assert_int_equal(out.argc, 0);
    assert_non_null(out.argv);
    assert_null(out.argv[0]);
    assert_string_equal(out.term, "");
    assert_string_equal(out.cwd, "");
    lz_msg_run_clear(&out);
}

/* A RUN written field by field, so that invalid values can be encoded. */
static void raw_run(lz_wbuf *b, uint32_t flags, uint32_t rows, uint32_t cols, uint32_t argc)
{
    lz_wbuf_init(b, LZ_MSG_RUN);
    lz_wbuf_u32(b, flags);
    lz_wbuf_u32(b, rows);
    lz_wbuf_u32(b, cols);
    lz_wbuf_str(b, "xterm");
    lz_wbuf_str(b, "");
    lz_wbuf_u32(b, argc);
    for (uint32_t i = 0; i < argc; i++)
        lz_wbuf_str(b, "x");
    lz_wbuf_u32(b, 0); /* no locale variables */
    lz_wbuf_u32(b, 0); /* no --publish */
    lz_wbuf_u32(b, 0); /* no run -e values */
}

static bool run_decodes(const lz_wbuf *b);

/* RUN carries only locale variables from the client's environment. */
static void test_run_env_is_locale_only(void **state)
{
    (void) state;
    static const char *const ok[] = { "LANG=C.UTF-8", "LC_ALL=de_DE.UTF-8", "LANGUAGE=de:en",
                                      "LC_CTYPE=" };
    static const char *const bad[] = { "PATH=/bin", "LD_PRELOAD=/x.so", "LANG",
                                       "LC_=x",     "LC_all=x",         "TERM=xterm" };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        assert_true(lz_msg_locale_var_ok(ok[i]));
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (lz_msg_locale_var_ok(bad[i]))
            fail_msg("'%s' accepted", bad[i]);
    static lz_wbuf b;
    char *env_ok[] = { (char *) "LANG=C.UTF-8", NULL };
    lz_msg_run m = { .term = (char *) "", .cwd = (char *) "", .env = env_ok, .envc = 1 };
    lz_msg_run_encode(&b, &m);
    assert_true(run_decodes(&b));
    char *env_bad[] = { (char *) "LD_PRELOAD=/x.so", NULL };
    m.env = env_bad;
    lz_msg_run_encode(&b, &m);
    assert_false(run_decodes(&b));
}

static bool run_decodes(const lz_wbuf *b)
{
    lz_rbuf r = reader_of(b);
    lz_msg_run out;
    bool ok = lz_msg_run_decode(&r, &out);
    if (!ok)
        assert_true(zero_bytes(&out, sizeof(out)));
    lz_msg_run_clear(&out);
    return ok;
}

static void test_run_refuses_malformed(void **state)
{
    (void) state;
    static lz_wbuf b;
    /* flags: 0 and 1 accepted, anything above refused */
    raw_run(&b, 0, 24, 80, 1);
    assert_true(run_decodes(&b));
    raw_run(&b, 1, 24, 80, 1);
    assert_true(run_decodes(&b));
    raw_run(&b, 2, 24, 80, 1);
    assert_false(run_decodes(&b));
    raw_run(&b, 3, 24, 80, 1);
    assert_false(run_decodes(&b));
    /* rows and cols: at most 65535 */
    raw_run(&b, 1, 65535, 65535, 0);
    assert_true(run_decodes(&b));
    raw_run(&b, 1, 65536, 80, 0);
    assert_false(run_decodes(&b));
    raw_run(&b, 1, 24, 65536, 0);
    assert_false(run_decodes(&b));
    raw_run(&b, 1, UINT32_MAX, 80, 0);
    assert_false(run_decodes(&b));
    /* arguments: at most LZ_MSG_MAX_ARGS */
    raw_run(&b, 0, 0, 0, LZ_MSG_MAX_ARGS);
    assert_true(run_decodes(&b));
    raw_run(&b, 0, 0, 0, LZ_MSG_MAX_ARGS + 1);
    assert_false(b.overflow);
    assert_false(run_decodes(&b));
    /* a count far beyond the message (no allocation of that size) */
    raw_run(&b, 0, 0, 0, 0);
    b.len -= 16; /* argument, locale, publish and -e counts */
    lz_wbuf_u32(&b, UINT32_MAX);
    lz_wbuf_u32(&b, 0);
    lz_wbuf_u32(&b, 0);
    lz_wbuf_u32(&b, 0);
    assert_false(run_decodes(&b));
    /* an argument count larger than the arguments present */
    raw_run(&b, 0, 0, 0, 3);
    b.len -= 13;
    assert_false(run_decodes(&b));
    /* a TERM longer than 256 bytes */
    _cleanup_free_ char *term = repeat('t', 257);
    lz_msg_run in = { .term = term };
    lz_msg_run_encode(&b, &in);
    assert_false(run_decodes(&b));
    term[256] = '\0';
    lz_msg_run_encode(&b, &in);
    assert_true(run_decodes(&b));
    /* an argument with a NUL byte (its last byte precedes the 4-byte counts
     * of locale variables, published ports and -e values) */
    raw_run(&b, 0, 0, 0, 1);
    b.data[b.len - 13] = '\0';
    assert_false(run_decodes(&b));
    /* every truncation (missing fields), and a trailing byte */
    char *argv[] = { W("a"), W("bc"), NULL };
    lz_msg_run full = {
        .rows = 1, .cols = 2, .term = W("t"), .cwd = W("c"), .argv = argv, .argc = 2
    };
    lz_msg_run_encode(&b, &full);
    size_t len = b.len;
    for (b.len = 2; b.len < len; b.len++)
        assert_false(run_decodes(&b));
    assert_true(run_decodes(&b));
    append_byte(&b, 0);
    assert_false(run_decodes(&b));
}

/* ---- REFUSED / SUP_FAILED ----------------------------------------------- */

static void test_refused_round_trip(void **state)
{
    (void) state;
    static lz_wbuf b;
    _cleanup_free_ char *longest = repeat('m', LZ_MSG_MAX_TEXT);
    lz_msg_refused in = { .code = LZ_REFUSE_MISMATCH,
                          .message = longest,
                          .hint = W("end the other sessions") };
    lz_msg_refused_encode(&b, LZ_MSG_REFUSED, &in);
    lz_rbuf r = reader_of(&b);
    assert_int_equal(r.type, LZ_MSG_REFUSED);
    lz_msg_refused out;
    assert_true(lz_msg_refused_decode(&r, &out));
    assert_int_equal(out.code, LZ_REFUSE_MISMATCH);
    assert_string_equal(out.message, longest);
    assert_string_equal(out.hint, "end the other sessions");
    lz_msg_refused_clear(&out);

    /* SUP_FAILED, no hint */
    lz_msg_refused nohint = { .code = LZ_REFUSE_START_FAILED, .message = W("runsc failed") };
    lz_msg_refused_encode(&b, LZ_SUP_FAILED, &nohint);
    r = reader_of(&b);
    assert_int_equal(r.type, LZ_SUP_FAILED);
    assert_true(lz_msg_refused_decode(&r, &out));
    assert_int_equal(out.code, LZ_REFUSE_START_FAILED);
    assert_string_equal(out.message, "runsc failed");
    assert_string_equal(out.hint, "");
    lz_msg_refused_clear(&out);
}

static void test_refused_refuses_malformed(void **state)
{
    (void) state;
    static lz_wbuf b;
    lz_msg_refused out;
    _cleanup_free_ char *too_long = repeat('m', LZ_MSG_MAX_TEXT + 1);
    lz_msg_refused in = { .code = 1, .message = W("m"), .hint = too_long };
    lz_msg_refused_encode(&b, LZ_MSG_REFUSED, &in);
    lz_rbuf r = reader_of(&b);
    assert_false(lz_msg_refused_decode(&r, &out));
    assert_true(zero_bytes(&out, sizeof(out)));

    in.hint = W("h");
    lz_msg_refused_encode(&b, LZ_MSG_REFUSED, &in);
    for (size_t len = 2; len < b.len; len++) {
        r = reader_prefix(&b, len);
        assert_false(lz_msg_refused_decode(&r, &out));
        assert_true(zero_bytes(&out, sizeof(out)));
    }
    append_byte(&b, 'x');
    r = reader_of(&b);
    assert_false(lz_msg_refused_decode(&r, &out));
    assert_true(zero_bytes(&out, sizeof(out)));
}

/* ---- SUP_EXEC ----------------------------------------------------------- */

static void test_exec_round_trip(void **state)
{
    (void) state;
    static lz_wbuf b;
    char *argv[] = { W("/bin/sh"), W("-c"), W("echo hi"), NULL };
    char *env[] = { W("TERM=xterm"), W("LANG=C.UTF-8"), W("EMPTY="), NULL };
    lz_msg_exec in = { .session_no = 42,
                       .interactive = true,
                       .cwd = W("/workspace/sub"),
                       .argv = argv,
                       .argc = 3,
                       .env = env,
                       .envc = 3 };
    lz_msg_exec_encode(&b, &in);
    lz_rbuf r = reader_of(&b);
    assert_int_equal(r.type, LZ_SUP_EXEC);
    lz_msg_exec out;
    assert_true(lz_msg_exec_decode(&r, &out));
    assert_int_equal(out.session_no, 42);
    assert_true(out.interactive);
    assert_string_equal(out.cwd, "/workspace/sub");
    assert_int_equal(out.argc, 3);
    for (size_t i = 0; i < 3; i++)
        assert_string_equal(out.argv[i], argv[i]);
    assert_null(out.argv[3]);
    assert_int_equal(out.envc, 3);
    for (size_t i = 0; i < 3; i++)
        assert_string_equal(out.env[i], env[i]);
    assert_null(out.env[3]);
    lz_msg_exec_clear(&out);
    assert_null(out.env);

    /* the login shell, no extra environment */
    lz_msg_exec login = { .session_no = 1, .cwd = W("/") };
    lz_msg_exec_encode(&b, &login);
    r = reader_of(&b);
    assert_true(lz_msg_exec_decode(&r, &out));
    assert_false(out.interactive);
    assert_int_equal(out.argc, 0);
    assert_int_equal(out.envc, 0);
    assert_null(out.argv[0]);
    assert_null(out.env[0]);
    lz_msg_exec_clear(&out);
}

static void raw_exec(lz_wbuf *b, uint32_t flags, uint32_t argc, uint32_t envc)
{
    lz_wbuf_init(b, LZ_SUP_EXEC);
    lz_wbuf_u32(b, 7);
    lz_wbuf_u32(b, flags);
    lz_wbuf_str(b, "/w");
    lz_wbuf_u32(b, argc);
    for (uint32_t i = 0; i < argc; i++)
        lz_wbuf_str(b, "a");
    lz_wbuf_u32(b, envc);
    for (uint32_t i = 0; i < envc; i++)
        lz_wbuf_str(b, "A=1");
}

static bool exec_decodes(const lz_wbuf *b)
{
    lz_rbuf r = reader_of(b);
    lz_msg_exec out;
    bool ok = lz_msg_exec_decode(&r, &out);
    if (!ok)
        assert_true(zero_bytes(&out, sizeof(out)));
    lz_msg_exec_clear(&out);
    return ok;
}

static void test_exec_refuses_malformed(void **state)
{
    (void) state;
    static lz_wbuf b;
    raw_exec(&b, 1, 1, 1);
    assert_true(exec_decodes(&b));
    raw_exec(&b, 2, 1, 1);
    assert_false(exec_decodes(&b));
    raw_exec(&b, 0x80000001u, 1, 1);
    assert_false(exec_decodes(&b));

    raw_exec(&b, 0, LZ_MSG_MAX_ARGS, LZ_MSG_MAX_ARGS);
    assert_true(exec_decodes(&b));
    raw_exec(&b, 0, LZ_MSG_MAX_ARGS + 1, 0);
    assert_false(exec_decodes(&b));
    raw_exec(&b, 0, 0, LZ_MSG_MAX_ARGS + 1);
    assert_false(exec_decodes(&b));

    /* a cwd longer than LZ_MSG_MAX_STR */
    _cleanup_free_ char *cwd = repeat('c', LZ_MSG_MAX_STR + 1);
    lz_msg_exec in = { .cwd = cwd };
    lz_msg_exec_encode(&b, &in);
    assert_false(exec_decodes(&b));
    cwd[LZ_MSG_MAX_STR] = '\0';
    lz_msg_exec_encode(&b, &in);
    assert_true(exec_decodes(&b));

    /* an environment entry with a NUL byte */
    raw_exec(&b, 0, 0, 1);
    b.data[b.len - 2] = '\0';
    assert_false(exec_decodes(&b));

    /* every truncation, and a trailing byte */
    raw_exec(&b, 1, 2, 2);
    size_t len = b.len;
    for (b.len = 2; b.len < len; b.len++)
        assert_false(exec_decodes(&b));
    assert_true(exec_decodes(&b));
    append_byte(&b, 0);
    assert_false(exec_decodes(&b));
}

/* ---- text and pair ------------------------------------------------------ */

static void test_text_round_trip(void **state)
{
    (void) state;
    static lz_wbuf b;
    lz_msg_text_encode(&b, LZ_MSG_PROGRESS, "preparing the image");
    lz_rbuf r = reader_of(&b);
    assert_int_equal(r.type, LZ_MSG_PROGRESS);
    _cleanup_free_ char *t = lz_msg_text_decode(&r);
    assert_string_equal(t, "preparing the image");

    _cleanup_free_ char *longest = repeat('s', LZ_MSG_MAX_TEXT);
    lz_msg_text_encode(&b, LZ_MSG_STARTED, longest);
    r = reader_of(&b);
    _cleanup_free_ char *t2 = lz_msg_text_decode(&r);
    assert_string_equal(t2, longest);

    lz_msg_text_encode(&b, LZ_MSG_STARTED, "");
    r = reader_of(&b);
    _cleanup_free_ char *t3 = lz_msg_text_decode(&r);
    assert_string_equal(t3, "");
}

static void test_text_refuses_malformed(void **state)
{
    (void) state;
    static lz_wbuf b;
    _cleanup_free_ char *too_long = repeat('s', LZ_MSG_MAX_TEXT + 1);
    lz_msg_text_encode(&b, LZ_MSG_PROGRESS, too_long);
    lz_rbuf r = reader_of(&b);
    assert_null(lz_msg_text_decode(&r));

    lz_msg_text_encode(&b, LZ_MSG_PROGRESS, "abc");
    for (size_t len = 2; len < b.len; len++) {
        r = reader_prefix(&b, len);
        assert_null(lz_msg_text_decode(&r));
    }
    append_byte(&b, 'd');
    r = reader_of(&b);
    assert_null(lz_msg_text_decode(&r));
    /* a NUL inside */
    lz_msg_text_encode(&b, LZ_MSG_PROGRESS, "abc");
    b.data[b.len - 2] = '\0';
    r = reader_of(&b);
    assert_null(lz_msg_text_decode(&r));
}

static void test_pair_round_trip(void **state)
{
    (void) state;
    static lz_wbuf b;
    uint32_t a = 1, c = 1;
    lz_msg_pair_encode(&b, LZ_MSG_EXIT, LZ_EXIT_OUTCOME_TERMINATED, 9);
    lz_rbuf r = reader_of(&b);
    assert_int_equal(r.type, LZ_MSG_EXIT);
    assert_true(lz_msg_pair_decode(&r, &a, &c));
    assert_int_equal(a, LZ_EXIT_OUTCOME_TERMINATED);
    assert_int_equal(c, 9);

    lz_msg_pair_encode(&b, LZ_SUP_EXEC_EXITED, UINT32_MAX, 0);
    r = reader_of(&b);
    assert_true(lz_msg_pair_decode(&r, &a, &c));
    assert_int_equal(a, UINT32_MAX);
    assert_int_equal(c, 0);
}

static void test_pair_refuses_malformed(void **state)
{
    (void) state;
    static lz_wbuf b;
    uint32_t a, c;
    lz_msg_pair_encode(&b, LZ_SUP_SIGNAL, 3, 15);
    for (size_t len = 2; len < b.len; len++) {
        lz_rbuf r = reader_prefix(&b, len);
        assert_false(lz_msg_pair_decode(&r, &a, &c));
    }
    append_byte(&b, 0);
    lz_rbuf r = reader_of(&b);
    assert_false(lz_msg_pair_decode(&r, &a, &c));
}

/* ---- lz_wire_send / lz_wire_recv ---------------------------------------- */

typedef struct {
    int sv[2];
    int open_fds; /* descriptors open before the test: none may leak */
} sock_fixture;

static int sock_setup(void **state)
{
    sock_fixture *f = lz_xcalloc(1, sizeof(*f));
    f->open_fds = count_open_fds();
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, f->sv) < 0) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int sock_teardown(void **state)
{
    sock_fixture *f = *state;
    for (int i = 0; i < 2; i++)
        if (f->sv[i] >= 0)
            close(f->sv[i]);
    int leaked = count_open_fds() - f->open_fds;
    free(f);
    if (leaked != 0) {
        print_error("%d descriptor(s) leaked\n", leaked);
        return -1;
    }
    return 0;
}

static void test_wire_no_fds(void **state)
{
    sock_fixture *f = *state;
    lz_error *err = NULL;
    static lz_wbuf b;
    static uint8_t buf[LZ_WIRE_MAX];
    lz_msg_text_encode(&b, LZ_MSG_PROGRESS, "hello");
    assert_int_equal(lz_wire_send(f->sv[0], &b, NULL, 0, &err), 0);
    expect_ok(&err);
    size_t n_fds = 99;
    ssize_t n = lz_wire_recv(f->sv[1], buf, NULL, 0, &n_fds, &err);
    expect_ok(&err);
    assert_int_equal(n, (ssize_t) b.len);
    assert_int_equal(n_fds, 0);
    assert_memory_equal(buf, b.data, b.len);
    lz_rbuf r;
    assert_true(lz_rbuf_init(&r, buf, (size_t) n));
    _cleanup_free_ char *t = lz_msg_text_decode(&r);
    assert_string_equal(t, "hello");
}

static void test_wire_three_fds(void **state)
{
    sock_fixture *f = *state;
    lz_error *err = NULL;
    static lz_wbuf b;
    static uint8_t buf[LZ_WIRE_MAX];
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    assert_true(devnull >= 0);
    int sent[3] = { p[0], p[1], devnull };

    char *argv[] = { W("true"), NULL };
    lz_msg_run run = { .argv = argv, .argc = 1 };
    lz_msg_run_encode(&b, &run);
    assert_int_equal(lz_wire_send(f->sv[0], &b, sent, 3, &err), 0);
    expect_ok(&err);

    int got[LZ_WIRE_MAX_FDS] = { -1, -1, -1, -1 };
    size_t n_fds = 0;
    ssize_t n = lz_wire_recv(f->sv[1], buf, got, LZ_WIRE_MAX_FDS, &n_fds, &err);
    expect_ok(&err);
    assert_int_equal(n, (ssize_t) b.len);
    assert_memory_equal(buf, b.data, b.len);
    assert_int_equal(n_fds, 3);
    for (size_t i = 0; i < 3; i++) {
        int fl = fcntl(got[i], F_GETFD);
        assert_true(fl >= 0);
        assert_true(fl & FD_CLOEXEC);
        for (size_t k = 0; k < 3; k++)
            assert_int_not_equal(got[i], sent[k]);
        struct stat a, c;
        assert_int_equal(fstat(got[i], &a), 0);
        assert_int_equal(fstat(sent[i], &c), 0);
        assert_int_equal(a.st_dev, c.st_dev);
        assert_int_equal(a.st_ino, c.st_ino);
    }
    /* the received write end feeds the original read end */
    assert_int_equal(write(got[1], "z", 1), 1);
    char ch = 0;
    assert_int_equal(read(p[0], &ch, 1), 1);
    assert_int_equal(ch, 'z');
    for (size_t i = 0; i < 3; i++) {
        close(got[i]);
        close(sent[i]);
    }
}

/* Send k descriptors (copies of /dev/null) with one byte of payload, by
 * sendmsg() directly so that k may exceed LZ_WIRE_MAX_FDS. */
static void raw_send_fds(int sock, size_t k)
{
    int fds[16];
    assert_true(k <= LZ_ARRAY_SIZE(fds));
    for (size_t i = 0; i < k; i++) {
        fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        assert_true(fds[i] >= 0);
    }
    uint8_t payload[6] = { 0, LZ_MSG_EXIT, 0, 0 };
    struct iovec iov = { .iov_base = payload, .iov_len = sizeof(payload) };
    union {
        char buf[CMSG_SPACE(sizeof(int) * 16)];
        struct cmsghdr align;
    } ctrl;
    memset(&ctrl, 0, sizeof(ctrl));
    struct msghdr msg = { .msg_iov = &iov,
                          .msg_iovlen = 1,
                          .msg_control = ctrl.buf,
                          .msg_controllen = CMSG_SPACE(sizeof(int) * k) };
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * k);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * k);
    assert_int_equal(sendmsg(sock, &msg, 0), (ssize_t) sizeof(payload));
    for (size_t i = 0; i < k; i++)
        close(fds[i]);
}

/* Receive with room for max_fds and expect a refusal that leaves no
 * received descriptor open. */
static void expect_refused_recv(int sock, int *fds, size_t max_fds, size_t sent)
{
    static uint8_t buf[LZ_WIRE_MAX];
    lz_error *err = NULL;
    int before = count_open_fds();
    int would[16];
    lowest_free_fds(would, sent);
    size_t n_fds = 99;
    assert_int_equal(lz_wire_recv(sock, buf, fds, max_fds, &n_fds, &err), -1);
    expect_error(&err, EPROTO, "descriptors");
    assert_int_equal(n_fds, 99); /* untouched on failure */
    assert_int_equal(count_open_fds(), before);
    for (size_t i = 0; i < sent; i++)
        assert_false(fd_is_open(would[i]));
}

static void test_wire_refuses_excess_fds(void **state)
{
    sock_fixture *f = *state;
    lz_error *err = NULL;
    static lz_wbuf b;
    int got[LZ_WIRE_MAX_FDS] = { -1, -1, -1, -1 };

    /* three descriptors where two are expected */
    raw_send_fds(f->sv[0], 3);
    expect_refused_recv(f->sv[1], got, 2, 3);
    /* one where none is expected (and no array) */
    raw_send_fds(f->sv[0], 1);
    expect_refused_recv(f->sv[1], NULL, 0, 1);
    /* more than LZ_WIRE_MAX_FDS: the control data is truncated */
    raw_send_fds(f->sv[0], 7);
    expect_refused_recv(f->sv[1], got, LZ_WIRE_MAX_FDS, 7);

    /* and the sender refuses more than LZ_WIRE_MAX_FDS */
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_true(devnull >= 0);
    int five[5] = { devnull, devnull, devnull, devnull, devnull };
    lz_msg_pair_encode(&b, LZ_MSG_EXIT, 0, 0);
    assert_int_equal(lz_wire_send(f->sv[0], &b, five, 5, &err), -1);
    expect_error(&err, EINVAL, "descriptors");
    /* exactly LZ_WIRE_MAX_FDS is accepted */
    assert_int_equal(lz_wire_send(f->sv[0], &b, five, 4, &err), 0);
    expect_ok(&err);
    static uint8_t buf[LZ_WIRE_MAX];
    size_t n_fds = 0;
    assert_int_equal(lz_wire_recv(f->sv[1], buf, got, 4, &n_fds, &err), (ssize_t) b.len);
    expect_ok(&err);
    assert_int_equal(n_fds, 4);
    for (size_t i = 0; i < 4; i++)
        close(got[i]);
    close(devnull);
}

static void test_wire_eof(void **state)
{
    sock_fixture *f = *state;
    lz_error *err = NULL;
    static uint8_t buf[LZ_WIRE_MAX];
    close(f->sv[0]);
    f->sv[0] = -1;
    size_t n_fds = 99;
    assert_int_equal(lz_wire_recv(f->sv[1], buf, NULL, 0, &n_fds, &err), 0);
    expect_ok(&err);

    /* sending to a peer that is gone: EPIPE, and no SIGPIPE */
    static lz_wbuf b;
    lz_msg_pair_encode(&b, LZ_MSG_EXIT, 0, 0);
    assert_int_equal(lz_wire_send(f->sv[1], &b, NULL, 0, &err), -1);
    expect_error(&err, EPIPE, NULL);
}

static void test_wire_refuses_oversize(void **state)
{
    sock_fixture *f = *state;
    lz_error *err = NULL;
    static lz_wbuf b;
    static uint8_t buf[LZ_WIRE_MAX + 16];
    _cleanup_free_ char *big = repeat('x', LZ_WIRE_MAX);
    lz_msg_text_encode(&b, LZ_MSG_PROGRESS, big);
    assert_true(b.overflow);
    assert_int_equal(lz_wire_send(f->sv[0], &b, NULL, 0, &err), -1);
    expect_error(&err, EMSGSIZE, "too large");
    /* nothing was sent */
    assert_int_equal(recv(f->sv[1], buf, sizeof(buf), MSG_DONTWAIT), -1);
    assert_int_equal(errno, EAGAIN);

    /* the largest message passes whole */
    lz_wbuf_init(&b, LZ_MSG_PROGRESS);
    lz_wbuf_bytes(&b, big, LZ_WIRE_MAX - 6);
    assert_false(b.overflow);
    assert_int_equal(lz_wire_send(f->sv[0], &b, NULL, 0, &err), 0);
    expect_ok(&err);
    assert_int_equal(lz_wire_recv(f->sv[1], buf, NULL, 0, NULL, &err), LZ_WIRE_MAX);
    expect_ok(&err);

    /* a record longer than LZ_WIRE_MAX from a peer that does not use
     * lz_wire_send: refused as truncated */
    memset(buf, 0, sizeof(buf));
    assert_int_equal(send(f->sv[0], buf, LZ_WIRE_MAX + 1, 0), LZ_WIRE_MAX + 1);
    assert_int_equal(lz_wire_recv(f->sv[1], buf, NULL, 0, NULL, &err), -1);
    expect_error(&err, EPROTO, "truncated");
}

#define S(fn) cmocka_unit_test_setup_teardown(fn, sock_setup, sock_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wbuf_layout_big_endian),
        cmocka_unit_test(test_wbuf_rbuf_round_trip),
        cmocka_unit_test(test_rbuf_init_needs_a_type),
        cmocka_unit_test(test_rbuf_truncated_u32),
        cmocka_unit_test(test_rbuf_length_past_end),
        cmocka_unit_test(test_rbuf_bytes_max),
        cmocka_unit_test(test_rbuf_str_embedded_nul),
        cmocka_unit_test(test_rbuf_str_longer_than_max),
        cmocka_unit_test(test_rbuf_trailing_bytes),
        cmocka_unit_test(test_wbuf_overflow),
        cmocka_unit_test(test_hello_round_trip),
        cmocka_unit_test(test_hello_refuses_malformed),
        cmocka_unit_test(test_run_round_trip),
        cmocka_unit_test(test_run_refuses_malformed),
        cmocka_unit_test(test_run_env_is_locale_only),
        cmocka_unit_test(test_refused_round_trip),
        cmocka_unit_test(test_refused_refuses_malformed),
        cmocka_unit_test(test_exec_round_trip),
        cmocka_unit_test(test_exec_refuses_malformed),
        cmocka_unit_test(test_text_round_trip),
        cmocka_unit_test(test_text_refuses_malformed),
        cmocka_unit_test(test_pair_round_trip),
        cmocka_unit_test(test_pair_refuses_malformed),
        S(test_wire_no_fds),
        S(test_wire_three_fds),
        S(test_wire_refuses_excess_fds),
        S(test_wire_eof),
        S(test_wire_refuses_oversize),
    };
    return cmocka_run_group_tests_name("test_wire", tests, NULL, NULL);
}
