/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests for src/protocol/hello.c, the name on a connection (the
 * client's first bytes are untrusted):
 *
 *  - real ClientHellos captured from `openssl s_client` (OpenSSL 3.0, TLS
 *    1.3 with -servername, TLS 1.2, -noservername) in
 *    tests/unit/data/hello/ (scripts: the file's comment in that
 *    directory's README);
 *  - a post-quantum-sized ClientHello (the capture grown by a 1216-byte
 *    key share entry for X25519MLKEM768, 0x11ec, as browsers send since
 *    2024) split over two TLS records at every possible point, and fed in
 *    several reads;
 *  - every prefix of every accepted message is NEED_MORE, then the whole
 *    gives the result; bytes after the ClientHello (ChangeCipherSpec,
 *    early data) do not matter;
 *  - encrypted_client_hello gives ENCRYPTED even with an outer SNI (the
 *    control: the same extension under another type number gives the
 *    name); missing SNI; two host_name entries; two server_name
 *    extensions; a name of 255 bytes (accepted) and 256 (refused); a NUL
 *    in the name; wrong record/handshake types; lengths that disagree,
 *    refused as soon as the disagreeing byte is there (never NEED_MORE);
 *    a ClientHello over LZ_HELLO_MAX;
 *  - HTTP: a request as curl sends it, with and without Host, Host with a
 *    port, in other case, with OWS; duplicated Host (also in another case),
 *    absolute-form, authority-form, asterisk-form, obs-fold, whitespace
 *    before ':', bare LF, IPv6 literal, bad ports, userinfo; a header
 *    block over the bound refused and the one just within it accepted;
 *  - HTTP framing (lz_http_request_frame, lz-namecheck's one request per
 *    port-80 connection): every prefix of a header block NEED_MORE, the
 *    extent unchanged by what follows (a body, a second request); one
 *    Content-Length (case, OWS, 0, exactly 2^40); refused at the first
 *    wrong byte: Transfer-Encoding, a second Content-Length (equal or
 *    not), a list, a sign, hex, inner space, an empty value, 2^40 + 1, a
 *    64-bit overflow; a header block over LZ_HELLO_MAX;
 *  - every seed of the fuzzer's corpus is a complete message.
 */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "protocol/hello.h"

/* ---- ClientHello fixtures and a rebuilder -------------------------------- */

#define STREAM_MAX (2 * LZ_HELLO_MAX)

static size_t load(const char *file, uint8_t *buf, size_t cap)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/hello/%s", LZ_TEST_DATA_DIR, file);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        fail_msg("cannot open the fixture %s", path);
    ssize_t n = read(fd, buf, cap);
    close(fd);
    assert_true(n > 0);
    return (size_t) n;
}

/* A ClientHello taken apart: the body before the extensions block, and
 * the extensions one after the other. */
typedef struct hello_parts {
    uint8_t pre[512];
    size_t pre_n;
    uint8_t ext[LZ_HELLO_MAX + 4096];
    size_t ext_n;
} hello_parts;

static hello_parts H;

static size_t be16(const uint8_t *p)
{
    return (size_t) (p[0] << 8 | p[1]);
}

/* From one TLS record holding one ClientHello (the fixtures). Written
 * independently of hello.c's parser. */
static void parts_from_record(const uint8_t *rec, size_t n, hello_parts *h)
{
    assert_true(n > 9 && rec[0] == 22 && rec[5] == 1);
    const uint8_t *b = rec + 9;
    size_t at = 2 + 32;
    at += 1 + b[at];        /* session id */
    at += 2 + be16(b + at); /* cipher suites */
    at += 1 + b[at];        /* compression */
    memcpy(h->pre, b, at);
    h->pre_n = at;
    size_t ext_total = be16(b + at);
    assert_int_equal(9 + at + 2 + ext_total, n);
    memcpy(h->ext, b + at + 2, ext_total);
    h->ext_n = ext_total;
}

static void ext_add(hello_parts *h, uint16_t type, const void *data, size_t n)
{
    assert_true(h->ext_n + 4 + n <= sizeof(h->ext));
    h->ext[h->ext_n] = (uint8_t) (type >> 8);
    h->ext[h->ext_n + 1] = (uint8_t) type;
    h->ext[h->ext_n + 2] = (uint8_t) (n >> 8);
    h->ext[h->ext_n + 3] = (uint8_t) n;
    memcpy(h->ext + h->ext_n + 4, data, n);
    h->ext_n += 4 + n;
}

/* Remove every extension of this type; returns how many there were. */
static int ext_remove(hello_parts *h, uint16_t type)
{
    int removed = 0;
    size_t at = 0;
    while (at < h->ext_n) {
        size_t len = 4 + be16(h->ext + at + 2);
        if (be16(h->ext + at) == type) {
            memmove(h->ext + at, h->ext + at + len, h->ext_n - at - len);
            h->ext_n -= len;
            removed++;
        } else {
            at += len;
        }
    }
    return removed;
}

/* A server_name extension's data with these host_name entries. */
static size_t sni_data(uint8_t *out, const char *const *names, size_t n_names)
{
    size_t at = 2;
    for (size_t i = 0; i < n_names; i++) {
        size_t l = strlen(names[i]);
        out[at] = 0;
        out[at + 1] = (uint8_t) (l >> 8);
        out[at + 2] = (uint8_t) l;
        memcpy(out + at + 3, names[i], l);
        at += 3 + l;
    }
    out[0] = (uint8_t) ((at - 2) >> 8);
    out[1] = (uint8_t) (at - 2);
    return at;
}

static void sni_set(hello_parts *h, const char *const *names, size_t n_names)
{
    static uint8_t data[4096];
    ext_remove(h, 0);
    ext_add(h, 0, data, sni_data(data, names, n_names));
}

/* The handshake message (header + body) */
static size_t handshake_build(const hello_parts *h, uint8_t *out)
{
    size_t body = h->pre_n + 2 + h->ext_n;
    out[0] = 1;
    out[1] = (uint8_t) (body >> 16);
    out[2] = (uint8_t) (body >> 8);
    out[3] = (uint8_t) body;
    memcpy(out + 4, h->pre, h->pre_n);
    out[4 + h->pre_n] = (uint8_t) (h->ext_n >> 8);
    out[5 + h->pre_n] = (uint8_t) h->ext_n;
    memcpy(out + 6 + h->pre_n, h->ext, h->ext_n);
    return 4 + body;
}

/* Wrap hs[0..n) into TLS records, a new record at each split offset. */
static size_t records_build(const uint8_t *hs, size_t n, const size_t *splits, size_t n_splits,
                            uint8_t *out)
{
    size_t at = 0, from = 0;
    for (size_t i = 0; i <= n_splits; i++) {
        size_t to = i < n_splits ? splits[i] : n;
        size_t l = to - from;
        out[at] = 22;
        out[at + 1] = 3;
        out[at + 2] = 1;
        out[at + 3] = (uint8_t) (l >> 8);
        out[at + 4] = (uint8_t) l;
        memcpy(out + at + 5, hs + from, l);
        at += 5 + l;
        from = to;
    }
    return at;
}

static uint8_t HS[LZ_HELLO_MAX + 8192], STREAM[STREAM_MAX + 8192];

static size_t stream_of_at(const hello_parts *h, uint8_t *out)
{
    size_t n = handshake_build(h, HS);
    return records_build(HS, n, NULL, 0, out);
}

static size_t stream_of(const hello_parts *h)
{
    size_t n = handshake_build(h, HS);
    return records_build(HS, n, NULL, 0, STREAM);
}

static lz_hello_result tls(const uint8_t *buf, size_t len, char *name, size_t *name_len)
{
    memset(name, 0xa5, LZ_HELLO_NAME_MAX);
    *name_len = 12345;
    lz_hello_result r = lz_tls_client_hello_name(buf, len, name, name_len);
    if (r != LZ_HELLO_NAME)
        assert_int_equal(*name_len, 0);
    else
        assert_true(*name_len >= 1 && *name_len <= LZ_HELLO_NAME_MAX);
    return r;
}

static void expect_name(const uint8_t *buf, size_t len, const char *want)
{
    char name[LZ_HELLO_NAME_MAX];
    size_t n = 0;
    assert_int_equal(tls(buf, len, name, &n), LZ_HELLO_NAME);
    assert_int_equal(n, strlen(want));
    assert_memory_equal(name, want, n);
}

/* Every prefix is NEED_MORE, the whole gives want. */
static void expect_prefixes(const uint8_t *buf, size_t len, lz_hello_result want)
{
    char name[LZ_HELLO_NAME_MAX];
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        if (tls(buf, i, name, &n) != LZ_HELLO_NEED_MORE)
            fail_msg("prefix of %zu bytes (of %zu): %s", i, len,
                     lz_hello_result_text(tls(buf, i, name, &n)));
    assert_int_equal(tls(buf, len, name, &n), want);
}

static uint8_t FIX[4096];

static size_t fixture_parts(const char *file)
{
    size_t n = load(file, FIX, sizeof(FIX));
    parts_from_record(FIX, n, &H);
    return n;
}

/* ---- TLS tests ---------------------------------------------------------- */

static void test_tls_captured(void **state)
{
    (void) state;
    char name[LZ_HELLO_NAME_MAX];
    size_t n = load("openssl-tls13-sni.bin", FIX, sizeof(FIX));
    expect_name(FIX, n, "api.example.test");
    expect_prefixes(FIX, n, LZ_HELLO_NAME);
    n = load("openssl-tls12-sni.bin", FIX, sizeof(FIX));
    expect_name(FIX, n, "Mirror.Example.TEST"); /* raw: not lowered here */
    expect_prefixes(FIX, n, LZ_HELLO_NAME);
    n = load("openssl-no-sni.bin", FIX, sizeof(FIX));
    size_t nl = 0;
    assert_int_equal(tls(FIX, n, name, &nl), LZ_HELLO_NO_NAME);
    expect_prefixes(FIX, n, LZ_HELLO_NO_NAME);

    /* the capture is what we think it is: rebuilt, it is byte-identical */
    n = fixture_parts("openssl-tls13-sni.bin");
    assert_int_equal(stream_of(&H), n);
    assert_memory_equal(STREAM, FIX, n);

    /* what follows the ClientHello is not read: a ChangeCipherSpec record,
     * early data, garbage */
    static const uint8_t after[] = { 20, 3, 3, 0, 1, 1, 23, 3, 3, 0, 2, 'h', 'i', 0xff };
    memcpy(STREAM + n, after, sizeof(after));
    expect_name(STREAM, n + sizeof(after), "api.example.test");
}

/* The capture with a X25519MLKEM768 key share entry (1216 bytes) before
 * the X25519 one: the size of a post-quantum ClientHello. */
static size_t pq_hello(void)
{
    fixture_parts("openssl-tls13-sni.bin");
    /* key_share (51): client_shares<0..2^16-1> of {group, key_exchange} */
    size_t at = 0;
    while (at < H.ext_n && be16(H.ext + at) != 51)
        at += 4 + be16(H.ext + at + 2);
    assert_true(at < H.ext_n);
    static uint8_t ks[8192];
    size_t old = be16(H.ext + at + 2);
    size_t shares = be16(H.ext + at + 4);
    assert_int_equal(shares + 2, old);
    size_t pq = 2 + 2 + 1216;
    ks[0] = (uint8_t) ((shares + pq) >> 8);
    ks[1] = (uint8_t) (shares + pq);
    ks[2] = 0x11;
    ks[3] = 0xec;
    ks[4] = (uint8_t) (1216 >> 8);
    ks[5] = (uint8_t) 1216;
    for (size_t i = 0; i < 1216; i++)
        ks[6 + i] = (uint8_t) (i * 131 + 7);
    memcpy(ks + 2 + pq, H.ext + at + 6, shares);
    ext_remove(&H, 51);
    ext_add(&H, 51, ks, 2 + pq + shares);
    return handshake_build(&H, HS);
}

static void test_tls_post_quantum_split(void **state)
{
    (void) state;
    size_t hs_n = pq_hello();
    assert_true(hs_n > 1500);
    /* two records, split at every point */
    for (size_t split = 1; split < hs_n; split++) {
        size_t n = records_build(HS, hs_n, &split, 1, STREAM);
        expect_name(STREAM, n, "api.example.test");
    }
    /* split where a TCP segment would end (1448 bytes of payload), and
     * every prefix of that stream */
    size_t split = 1448 - 5;
    size_t n = records_build(HS, hs_n, &split, 1, STREAM);
    expect_prefixes(STREAM, n, LZ_HELLO_NAME);
    /* several records of a few bytes each */
    size_t splits[400], k = 0;
    for (size_t at = 7; at < hs_n && k < 400; at += 7)
        splits[k++] = at;
    n = records_build(HS, hs_n, splits, k, STREAM);
    expect_name(STREAM, n, "api.example.test");
    /* fed in reads of 100 bytes, as the name check reads its socket */
    char name[LZ_HELLO_NAME_MAX];
    size_t nl = 0, got = 0;
    n = records_build(HS, hs_n, &split, 1, STREAM);
    while (got < n) {
        got = got + 100 < n ? got + 100 : n;
        lz_hello_result r = tls(STREAM, got, name, &nl);
        assert_int_equal(r, got < n ? LZ_HELLO_NEED_MORE : LZ_HELLO_NAME);
    }
    /* a record of another type between the two halves */
    n = records_build(HS, hs_n, &split, 1, STREAM);
    memmove(STREAM + 5 + split + 6, STREAM + 5 + split, n - 5 - split);
    memcpy(STREAM + 5 + split, "\x14\x03\x03\x00\x01\x01", 6);
    assert_int_equal(tls(STREAM, n + 6, name, &nl), LZ_HELLO_INVALID);
}

static void test_tls_ech(void **state)
{
    (void) state;
    char name[LZ_HELLO_NAME_MAX];
    size_t nl = 0;
    /* an ECH outer extension as Chrome sends it: type 0 (outer), KDF/AEAD,
     * config id, enc (32), payload */
    static uint8_t ech[1 + 4 + 1 + 2 + 32 + 2 + 200];
    size_t en = sizeof(ech);
    memset(ech, 0x5c, en);
    ech[0] = 0;
    ech[6] = 0;
    ech[7] = 32;
    ech[40] = 0;
    ech[41] = 200;
    fixture_parts("openssl-tls13-sni.bin");
    ext_add(&H, 0xfe0d, ech, en);
    size_t n = stream_of(&H);
    assert_int_equal(tls(STREAM, n, name, &nl), LZ_HELLO_ENCRYPTED);
    expect_prefixes(STREAM, n, LZ_HELLO_ENCRYPTED);
    /* without an outer SNI too */
    assert_int_equal(ext_remove(&H, 0), 1);
    n = stream_of(&H);
    assert_int_equal(tls(STREAM, n, name, &nl), LZ_HELLO_ENCRYPTED);
    /* the control: the same bytes under another extension type */
    fixture_parts("openssl-tls13-sni.bin");
    ext_add(&H, 0xfe0c, ech, en);
    n = stream_of(&H);
    expect_name(STREAM, n, "api.example.test");
    /* two ECH extensions */
    fixture_parts("openssl-tls13-sni.bin");
    ext_add(&H, 0xfe0d, ech, en);
    ext_add(&H, 0xfe0d, ech, en);
    n = stream_of(&H);
    assert_int_equal(tls(STREAM, n, name, &nl), LZ_HELLO_INVALID);
}

static void test_tls_server_name_rules(void **state)
{
    (void) state;
    char name[LZ_HELLO_NAME_MAX];
    size_t nl = 0, n;
    static const char *one[] = { "a.example" };
    static const char *two[] = { "a.example", "b.example" };
    /* missing SNI */
    fixture_parts("openssl-tls13-sni.bin");
    assert_int_equal(ext_remove(&H, 0), 1);
    n = stream_of(&H);
    assert_int_equal(tls(STREAM, n, name, &nl), LZ_HELLO_NO_NAME);
    /* one host_name (the control), then two */
    sni_set(&H, one, 1);
    n = stream_of(&H);
    expect_name(STREAM, n, "a.example");
    sni_set(&H, two, 2);
    n = stream_of(&H);
    assert_int_equal(tls(STREAM, n, name, &nl), LZ_HELLO_INVALID);
    /* two server_name extensions of one entry each */
    sni_set(&H, one, 1);
    uint8_t data[64];
    ext_add(&H, 0, data, sni_data(data, two + 1, 1));
    n = stream_of(&H);
    assert_int_equal(tls(STREAM, n, name, &nl), LZ_HELLO_INVALID);
    /* 255 bytes accepted, 256 refused */
    char long_name[300];
    for (size_t len = 255; len <= 256; len++) {
        memset(long_name, 'n', len);
        long_name[len] = 0;
        const char *ln[] = { long_name };
        sni_set(&H, ln, 1);
        n = stream_of(&H);
        if (len == 255)
            expect_name(STREAM, n, long_name);
        else
            assert_int_equal(tls(STREAM, n, name, &nl), LZ_HELLO_INVALID);
    }
    /* a NUL inside the name ("a.example\0.evil" read as a C string is
     * another name) */
    sni_set(&H, one, 1);
    n = stream_of(&H);
    expect_name(STREAM, n, "a.example");
    size_t at = 0;
    while (memcmp(STREAM + at, "a.example", 9) != 0)
        at++;
    STREAM[at + 1] = 0;
    assert_int_equal(tls(STREAM, n, name, &nl), LZ_HELLO_INVALID);
    /* a name type other than host_name */
    STREAM[at + 1] = '.';
    STREAM[at - 3] = 1;
    assert_int_equal(tls(STREAM, n, name, &nl), LZ_HELLO_INVALID);
    /* an empty server_name list, an empty host_name */
    fixture_parts("openssl-tls13-sni.bin");
    ext_remove(&H, 0);
    ext_add(&H, 0, "\0\0", 2);
    n = stream_of(&H);
    assert_int_equal(tls(STREAM, n, name, &nl), LZ_HELLO_INVALID);
    ext_remove(&H, 0);
    ext_add(&H, 0, "\0\3\0\0\0", 5);
    n = stream_of(&H);
    assert_int_equal(tls(STREAM, n, name, &nl), LZ_HELLO_INVALID);
}

/* A wrong length is refused as soon as it is there: never NEED_MORE for a
 * prefix that cannot become valid. */
static void test_tls_refusals(void **state)
{
    (void) state;
    char name[LZ_HELLO_NAME_MAX];
    size_t nl = 0;
    size_t n = load("openssl-tls13-sni.bin", FIX, sizeof(FIX));
    memcpy(STREAM, FIX, n);
    /* not a handshake record: application data, alert, SSLv2, HTTP */
    static const uint8_t first[] = { 23, 21, 0x80, 'G' };
    for (size_t i = 0; i < sizeof(first); i++) {
        STREAM[0] = first[i];
        assert_int_equal(tls(STREAM, 1, name, &nl), LZ_HELLO_INVALID);
        assert_int_equal(tls(STREAM, n, name, &nl), LZ_HELLO_INVALID);
    }
    memcpy(STREAM, FIX, n);
    STREAM[1] = 2; /* record version 2.x */
    assert_int_equal(tls(STREAM, 2, name, &nl), LZ_HELLO_INVALID);
    memcpy(STREAM, FIX, n);
    STREAM[5] = 2; /* ServerHello */
    assert_int_equal(tls(STREAM, 6, name, &nl), LZ_HELLO_INVALID);
    memcpy(STREAM, FIX, n);
    STREAM[3] = 0; /* record of length 0 */
    STREAM[4] = 0;
    assert_int_equal(tls(STREAM, 5, name, &nl), LZ_HELLO_INVALID);
    STREAM[3] = 0x40; /* 16385 */
    STREAM[4] = 0x01;
    assert_int_equal(tls(STREAM, 5, name, &nl), LZ_HELLO_INVALID);
    /* a ClientHello longer than LZ_HELLO_MAX, known from its header */
    memcpy(STREAM, FIX, n);
    STREAM[6] = 0;
    STREAM[7] = 0x40;
    STREAM[8] = 0x00; /* 16384 + 4 */
    assert_int_equal(tls(STREAM, 9, name, &nl), LZ_HELLO_INVALID);
    STREAM[7] = 0x3f; /* 16380 + 4 = LZ_HELLO_MAX: may still come */
    STREAM[8] = 0xfc;
    assert_int_equal(tls(STREAM, 9, name, &nl), LZ_HELLO_NEED_MORE);
    /* ... but not once LZ_HELLO_MAX bytes came without completing it */
    memset(STREAM, 0, LZ_HELLO_MAX);
    memcpy(STREAM, FIX, 5 + 4 + 2 + 32);
    STREAM[3] = 0x40;
    STREAM[4] = 0x00; /* a record of 16384 */
    STREAM[6] = 0;
    STREAM[7] = 0x3f;
    STREAM[8] = 0xfc;
    STREAM[43] = 0;    /* no session id */
    STREAM[44] = 0x3f; /* cipher suites: 16340 bytes, more than will come */
    STREAM[45] = 0xd4;
    assert_int_equal(tls(STREAM, LZ_HELLO_MAX - 1, name, &nl), LZ_HELLO_NEED_MORE);
    assert_int_equal(tls(STREAM, LZ_HELLO_MAX, name, &nl), LZ_HELLO_INVALID);
    /* legacy_version 2.0 */
    memcpy(STREAM, FIX, n);
    STREAM[9] = 2;
    assert_int_equal(tls(STREAM, 11, name, &nl), LZ_HELLO_INVALID);
    /* session id of 33 bytes, refused at its length byte */
    memcpy(STREAM, FIX, n);
    STREAM[9 + 34] = 33;
    assert_int_equal(tls(STREAM, 9 + 35, name, &nl), LZ_HELLO_INVALID);
    /* an odd cipher suites length, refused at once */
    memcpy(STREAM, FIX, n);
    size_t cs = 9 + 34 + 1 + FIX[9 + 34];
    STREAM[cs + 1] |= 1;
    assert_int_equal(tls(STREAM, cs + 2, name, &nl), LZ_HELLO_INVALID);
    /* extensions total disagreeing with the handshake length, in both
     * directions */
    fixture_parts("openssl-tls13-sni.bin");
    size_t et = 9 + H.pre_n;
    for (int delta = -1; delta <= 1; delta += 2) {
        memcpy(STREAM, FIX, n);
        size_t v = be16(STREAM + et) + (size_t) delta;
        STREAM[et] = (uint8_t) (v >> 8);
        STREAM[et + 1] = (uint8_t) v;
        assert_int_equal(tls(STREAM, et + 2, name, &nl), LZ_HELLO_INVALID);
        assert_int_equal(tls(STREAM, n, name, &nl), LZ_HELLO_INVALID);
    }
    /* an extension whose length runs past the block */
    memcpy(STREAM, FIX, n);
    STREAM[et + 2 + 2] = 0x7f;
    assert_int_equal(tls(STREAM, et + 2 + 4, name, &nl), LZ_HELLO_INVALID);
    /* the server_name list length one off: refused before the rest came */
    memcpy(STREAM, FIX, n);
    size_t at = 0;
    while (memcmp(STREAM + at, "api.example.test", 16) != 0)
        at++;
    STREAM[at - 4] ^= 1; /* list length low byte */
    assert_int_equal(tls(STREAM, at - 3, name, &nl), LZ_HELLO_INVALID);
    /* the control: intact, the same prefix is NEED_MORE */
    memcpy(STREAM, FIX, n);
    assert_int_equal(tls(STREAM, at - 3, name, &nl), LZ_HELLO_NEED_MORE);
    /* bytes between the compression methods and the end that are not an
     * extensions block */
    fixture_parts("openssl-tls13-sni.bin");
    H.ext_n = 0;
    size_t hs_n = handshake_build(&H, HS);
    HS[hs_n] = 0; /* one stray byte after an empty extensions block */
    size_t body = hs_n - 4 + 1;
    HS[1] = (uint8_t) (body >> 16);
    HS[2] = (uint8_t) (body >> 8);
    HS[3] = (uint8_t) body;
    n = records_build(HS, hs_n + 1, NULL, 0, STREAM);
    assert_int_equal(tls(STREAM, n, name, &nl), LZ_HELLO_INVALID);
    /* a TLS 1.2 ClientHello without any extensions: complete, no name */
    body = H.pre_n;
    HS[1] = (uint8_t) (body >> 16);
    HS[2] = (uint8_t) (body >> 8);
    HS[3] = (uint8_t) body;
    n = records_build(HS, 4 + body, NULL, 0, STREAM);
    expect_prefixes(STREAM, n, LZ_HELLO_NO_NAME);
}

/* ---- HTTP --------------------------------------------------------------- */

static lz_hello_result http(const char *req, size_t len, char *name, size_t *name_len)
{
    memset(name, 0xa5, LZ_HELLO_NAME_MAX);
    *name_len = 12345;
    lz_hello_result r = lz_http_request_host((const unsigned char *) req, len, name, name_len);
    if (r != LZ_HELLO_NAME)
        assert_int_equal(*name_len, 0);
    return r;
}

static void expect_host(const char *req, const char *want)
{
    char name[LZ_HELLO_NAME_MAX];
    size_t n = 0, len = strlen(req);
    for (size_t i = 0; i < len; i++)
        if (http(req, i, name, &n) != LZ_HELLO_NEED_MORE)
            fail_msg("prefix of %zu bytes of \"%s\": %s", i, req,
                     lz_hello_result_text(http(req, i, name, &n)));
    lz_hello_result r = http(req, len, name, &n);
    if (!want) {
        assert_int_equal(r, LZ_HELLO_NO_NAME);
        return;
    }
    assert_int_equal(r, LZ_HELLO_NAME);
    assert_int_equal(n, strlen(want));
    assert_memory_equal(name, want, n);
}

/* Refused, and from the first byte that makes it wrong on: every prefix
 * up to that byte (at offset bad_at) is NEED_MORE, every longer one
 * INVALID. */
static void expect_invalid(const char *req, size_t bad_at)
{
    char name[LZ_HELLO_NAME_MAX];
    size_t n = 0, len = strlen(req);
    for (size_t i = 0; i <= len; i++) {
        lz_hello_result r = http(req, i, name, &n);
        lz_hello_result want = i <= bad_at ? LZ_HELLO_NEED_MORE : LZ_HELLO_INVALID;
        if (r != want)
            fail_msg("\"%s\" cut at %zu: %s, expected %s", req, i, lz_hello_result_text(r),
                     lz_hello_result_text(want));
    }
}

static void test_http_host(void **state)
{
    (void) state;
    /* curl 7.88's request */
    expect_host("GET / HTTP/1.1\r\nHost: api.example.test\r\nUser-Agent: curl/7.88.1\r\n"
                "Accept: */*\r\n\r\n",
                "api.example.test");
    expect_host("GET /x?y=1 HTTP/1.1\r\nhOsT:   Mirror.Example.TEST:8080  \r\n\r\n",
                "Mirror.Example.TEST");
    expect_host("POST /up HTTP/1.1\r\nContent-Length: 3\r\nHost:a.test\r\n\r\n", "a.test");
    /* the body after the block is not read */
    char name[LZ_HELLO_NAME_MAX];
    size_t n = 0;
    const char *body = "POST / HTTP/1.1\r\nHost: a.test\r\n\r\nHost: b.test\r\n\r\n";
    assert_int_equal(http(body, strlen(body), name, &n), LZ_HELLO_NAME);
    assert_memory_equal(name, "a.test", n);
    /* HTTP/1.0 without Host */
    expect_host("GET / HTTP/1.0\r\nAccept: */*\r\n\r\n", NULL);
    expect_host("GET / HTTP/1.0\r\n\r\n", NULL);
    /* a header named like Host but longer */
    expect_host("GET / HTTP/1.1\r\nHosts: a.test\r\nX-Host: b.test\r\n\r\n", NULL);
}

static void test_http_refusals(void **state)
{
    (void) state;
    /* duplicated Host, in the same and another case: refused as soon as
     * the second name's colon is there */
    expect_invalid("GET / HTTP/1.1\r\nHost: a.test\r\nHost: a.test\r\n\r\n", 34);
    expect_invalid("GET / HTTP/1.1\r\nHost: a.test\r\nHOST: b.test\r\n\r\n", 34);
    /* absolute-form, authority-form, asterisk-form */
    expect_invalid("GET http://evil.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", 4);
    expect_invalid("CONNECT evil.test:443 HTTP/1.1\r\nHost: a.test\r\n\r\n", 8);
    expect_invalid("OPTIONS * HTTP/1.1\r\nHost: a.test\r\n\r\n", 8);
    /* obs-fold: a line that continues the Host value */
    expect_invalid("GET / HTTP/1.1\r\nHost: a.test\r\n evil.test\r\n\r\n", 30);
    /* whitespace before the colon */
    expect_invalid("GET / HTTP/1.1\r\nHost : a.test\r\n\r\n", 20);
    /* a bare LF, a CR in the middle of a line */
    expect_invalid("GET / HTTP/1.1\nHost: a.test\r\n\r\n", 14);
    expect_invalid("GET / HTTP/1.1\r\nHost: a\rb.test\r\n\r\n", 24);
    /* an IPv6 literal; bad ports; userinfo; an empty value */
    expect_invalid("GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", 22);
    expect_invalid("GET / HTTP/1.1\r\nHost: a.test:\r\n\r\n", 30);
    expect_invalid("GET / HTTP/1.1\r\nHost: a.test:123456\r\n\r\n", 34);
    expect_invalid("GET / HTTP/1.1\r\nHost: a.test:8a\r\n\r\n", 30);
    expect_invalid("GET / HTTP/1.1\r\nHost: user@a.test\r\n\r\n", 26);
    /* URI delimiters inside the host (found by fuzz_hello) */
    expect_invalid("GET / HTTP/1.1\r\nHost: a[b.test\r\n\r\n", 23);
    expect_invalid("GET / HTTP/1.1\r\nHost: a.test#x\r\n\r\n", 28);
    expect_invalid("GET / HTTP/1.1\r\nHost: a.test?\r\n\r\n", 28);
    expect_invalid("GET / HTTP/1.1\r\nHost: a.test evil.test\r\n\r\n", 29);
    expect_invalid("GET / HTTP/1.1\r\nHost: \r\n\r\n", 23);
    /* versions: HTTP/2's preface, HTTP/1.2, HTTP/0.9 (no version) */
    expect_invalid("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 4);
    expect_invalid("GET / HTTP/1.2\r\nHost: a.test\r\n\r\n", 13);
    expect_invalid("GET /\r\n\r\n", 6);
    expect_invalid("GET / HTTP/1.1 x\r\nHost: a.test\r\n\r\n", 14);
    /* a method that is not a token; a ClientHello's first bytes */
    expect_invalid("G(T / HTTP/1.1\r\n\r\n", 1);
    expect_invalid("\x16\x03\x01\x01\x3d", 0);
    /* a control byte in a value */
    expect_invalid("GET / HTTP/1.1\r\nAccept: a\x01\r\nHost: a.test\r\n\r\n", 25);
}

static char BIG[LZ_HELLO_MAX + 64];

static void test_http_bound(void **state)
{
    (void) state;
    char name[LZ_HELLO_NAME_MAX];
    size_t n = 0;
    static const char head[] = "GET / HTTP/1.1\r\nHost: a.test\r\nX-Pad: ";
    static const char tail[] = "\r\n\r\n";
    /* a header block of exactly LZ_HELLO_MAX bytes: accepted */
    size_t pad = LZ_HELLO_MAX - strlen(head) - strlen(tail);
    memcpy(BIG, head, strlen(head));
    memset(BIG + strlen(head), 'p', pad);
    memcpy(BIG + strlen(head) + pad, tail, strlen(tail));
    assert_int_equal(http(BIG, LZ_HELLO_MAX, name, &n), LZ_HELLO_NAME);
    assert_memory_equal(name, "a.test", n);
    assert_int_equal(http(BIG, LZ_HELLO_MAX - 1, name, &n), LZ_HELLO_NEED_MORE);
    /* one byte more: refused, however much more comes */
    pad++;
    memset(BIG + strlen(head), 'p', pad);
    memcpy(BIG + strlen(head) + pad, tail, strlen(tail));
    assert_int_equal(http(BIG, LZ_HELLO_MAX, name, &n), LZ_HELLO_INVALID);
    assert_int_equal(http(BIG, LZ_HELLO_MAX + 1, name, &n), LZ_HELLO_INVALID);
    /* a Host of 255 bytes accepted, 256 refused */
    for (size_t len = 255; len <= 256; len++) {
        int k = snprintf(BIG, sizeof(BIG), "GET / HTTP/1.1\r\nHost: ");
        memset(BIG + k, 'h', len);
        strcpy(BIG + k + len, ":443\r\n\r\n");
        lz_hello_result r = http(BIG, strlen(BIG), name, &n);
        assert_int_equal(r, len == 255 ? LZ_HELLO_NAME : LZ_HELLO_INVALID);
    }
}

/* ---- HTTP framing (lz_http_request_frame) ------------------------------- */

static lz_http_frame_result frame(const char *req, size_t len, size_t *header_len,
                                  uint64_t *body_len)
{
    *header_len = 777;
    *body_len = 777;
    lz_http_frame_result r =
        lz_http_request_frame((const unsigned char *) req, len, header_len, body_len);
    if (r != LZ_HTTP_FRAME_OK) {
        assert_int_equal(*header_len, 0);
        assert_int_equal(*body_len, 0);
    }
    return r;
}

/* Every proper prefix of the header block is NEED_MORE; the whole block,
 * and the block followed by anything (the body, a second request), give
 * the same extent. */
static void expect_frame(const char *head, uint64_t want_body)
{
    size_t h = 0, len = strlen(head);
    uint64_t b = 0;
    for (size_t i = 0; i < len; i++)
        if (frame(head, i, &h, &b) != LZ_HTTP_FRAME_NEED_MORE)
            fail_msg("prefix of %zu bytes of \"%s\" is not NEED_MORE", i, head);
    assert_int_equal(frame(head, len, &h, &b), LZ_HTTP_FRAME_OK);
    assert_int_equal(h, len);
    assert_int_equal(b, want_body);
    char more[1024];
    snprintf(more, sizeof(more), "%sGET / HTTP/1.1\r\nHost: other.test\r\n\r\n", head);
    assert_int_equal(frame(more, strlen(more), &h, &b), LZ_HTTP_FRAME_OK);
    assert_int_equal(h, len);
    assert_int_equal(b, want_body);
}

/* INVALID from byte bad_at on, NEED_MORE before (as expect_invalid). */
static void expect_frame_invalid(const char *req, size_t bad_at)
{
    size_t h = 0, len = strlen(req);
    uint64_t b = 0;
    for (size_t i = 0; i <= len; i++) {
        lz_http_frame_result want = i <= bad_at ? LZ_HTTP_FRAME_NEED_MORE : LZ_HTTP_FRAME_INVALID;
        if (frame(req, i, &h, &b) != want)
            fail_msg("\"%s\" cut at %zu: %d, expected %d", req, i, frame(req, i, &h, &b), want);
    }
}

static void test_http_frame(void **state)
{
    (void) state;
    /* no body headers: no body (curl's GET) */
    expect_frame("GET / HTTP/1.1\r\nHost: api.example.test\r\nUser-Agent: curl/7.88.1\r\n"
                 "Accept: */*\r\n\r\n",
                 0);
    expect_frame("GET / HTTP/1.0\r\n\r\n", 0);
    /* one Content-Length, in any case, with OWS; 0; the bound exactly */
    expect_frame("POST /up HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\n\r\n", 5);
    expect_frame("POST /up HTTP/1.1\r\ncontent-LENGTH:\t 123 \t\r\nHost: a.test\r\n\r\n", 123);
    expect_frame("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 0);
    expect_frame("PUT / HTTP/1.1\r\nContent-Length: 0001099511627776\r\n\r\n", (uint64_t) 1 << 40);
    /* headers named like the body's but longer are other headers */
    expect_frame("GET / HTTP/1.1\r\nContent-Lengths: x\r\nX-Transfer-Encoding: chunked\r\n\r\n", 0);
    /* the body is not read: bytes after the header block do not change it */
    size_t h = 0;
    uint64_t b = 0;
    const char *posted = "POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc";
    assert_int_equal(frame(posted, strlen(posted), &h, &b), LZ_HTTP_FRAME_OK);
    assert_int_equal(h, strlen(posted) - 3);
    assert_int_equal(b, 3);
    /* the host decoder still reads such requests: the extra rules are the
     * framing decoder's only */
    char name[LZ_HELLO_NAME_MAX];
    size_t n = 0;
    const char *chunked = "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_int_equal(http(chunked, strlen(chunked), name, &n), LZ_HELLO_NAME);
}

static void test_http_frame_refusals(void **state)
{
    (void) state;
    /* Transfer-Encoding, whatever its value or case: refused at its colon */
    expect_frame_invalid("POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n",
                         48);
    expect_frame_invalid("POST / HTTP/1.1\r\ntransfer-encoding: identity\r\n\r\n", 34);
    expect_frame_invalid(
        "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 53);
    /* two Content-Length, equal or not, in another case: refused at the
     * second's colon */
    expect_frame_invalid("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", 50);
    expect_frame_invalid("POST / HTTP/1.1\r\nContent-Length: 3\r\ncontent-length: 4\r\n\r\n", 50);
    /* values other than 1*DIGIT: a list, a sign, hex, inner space, empty */
    expect_frame_invalid("POST / HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\n", 34);
    expect_frame_invalid("POST / HTTP/1.1\r\nContent-Length: +3\r\n\r\n", 33);
    expect_frame_invalid("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 33);
    expect_frame_invalid("POST / HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n", 34);
    expect_frame_invalid("POST / HTTP/1.1\r\nContent-Length: 1 2\r\n\r\n", 35);
    expect_frame_invalid("POST / HTTP/1.1\r\nContent-Length:  \r\n\r\n", 35);
    /* over the bound: 2^40 + 1, and a number that would overflow 64 bits */
    expect_frame_invalid("POST / HTTP/1.1\r\nContent-Length: 1099511627777\r\n\r\n", 45);
    expect_frame_invalid("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", 45);
    /* what the host decoder refuses, the framing decoder refuses too */
    expect_frame_invalid("GET / HTTP/1.1\r\nHost: a.test\r\nHost: a.test\r\n\r\n", 34);
    expect_frame_invalid("GET / HTTP/1.1\nHost: a.test\r\n\r\n", 14);
    /* a header block over LZ_HELLO_MAX */
    static const char head[] = "GET / HTTP/1.1\r\nX-Pad: ";
    size_t pad = LZ_HELLO_MAX - strlen(head) - 4;
    memcpy(BIG, head, strlen(head));
    memset(BIG + strlen(head), 'p', pad);
    memcpy(BIG + strlen(head) + pad, "\r\n\r\n", 4);
    size_t h = 0;
    uint64_t b = 0;
    assert_int_equal(frame(BIG, LZ_HELLO_MAX, &h, &b), LZ_HTTP_FRAME_OK);
    assert_int_equal(h, LZ_HELLO_MAX);
    memset(BIG + strlen(head), 'p', pad + 1);
    memcpy(BIG + strlen(head) + pad + 1, "\r\n\r\n", 4);
    assert_int_equal(frame(BIG, LZ_HELLO_MAX - 1, &h, &b), LZ_HTTP_FRAME_NEED_MORE);
    assert_int_equal(frame(BIG, LZ_HELLO_MAX, &h, &b), LZ_HTTP_FRAME_INVALID);
    assert_int_equal(frame(BIG, LZ_HELLO_MAX + 4, &h, &b), LZ_HTTP_FRAME_INVALID);
}

/* ---- the server's answer and the ClientHello after a retry --------------- */

static uint8_t SRV[LZ_HELLO_MAX + 8192];

static lz_tls_server_kind server(const uint8_t *buf, size_t len, size_t *end)
{
    *end = 12345;
    lz_tls_server_kind k = lz_tls_server_hello_kind(buf, len, end);
    if (k == LZ_TLS_SERVER_RETRY || k == LZ_TLS_SERVER_ALERT)
        assert_true(*end > 0 && *end <= len);
    else
        assert_int_equal(*end, 0);
    return k;
}

/* Prefixes NEED_MORE up to the message's last byte (at), then want for
 * every longer one, with the same end. */
static void expect_server_prefixes(const uint8_t *buf, size_t len, size_t at,
                                   lz_tls_server_kind want, size_t want_end)
{
    size_t end = 0;
    for (size_t i = 0; i < len; i++) {
        lz_tls_server_kind k = server(buf, i, &end);
        if (i < at && k != LZ_TLS_SERVER_NEED_MORE)
            fail_msg("prefix of %zu bytes (of %zu, complete at %zu): %d", i, len, at, (int) k);
        if (i >= at && (k != want || end != want_end))
            fail_msg("prefix of %zu bytes (complete at %zu): %d end %zu", i, at, (int) k, end);
    }
    assert_int_equal(server(buf, len, &end), want);
    assert_int_equal(end, want_end);
}

/* The handshake message at the start of a captured flight's first record. */
static size_t first_message(const uint8_t *flight, uint8_t *hs)
{
    size_t n = 4 + (((size_t) flight[6] << 16) | ((size_t) flight[7] << 8) | flight[8]);
    memcpy(hs, flight + 5, n);
    return n;
}

static void test_tls_server_hello_captured(void **state)
{
    (void) state;
    /* A P-256-only OpenSSL server's answer to a client that offered an
     * X25519 key share: a HelloRetryRequest (93 bytes), then a
     * ChangeCipherSpec. */
    size_t n = load("openssl-hrr.bin", SRV, sizeof(SRV));
    assert_int_equal(n, 99);
    expect_server_prefixes(SRV, n, 93, LZ_TLS_SERVER_RETRY, 93);
    /* The ServerHello after the retry, behind that ChangeCipherSpec (the
     * gate's next round starts with it). */
    memcpy(STREAM, SRV + 93, 6);
    size_t m = load("openssl-server-hello-after-retry.bin", STREAM + 6, sizeof(STREAM) - 6);
    size_t sh = 6 + 5 + (((size_t) STREAM[6 + 3] << 8) | STREAM[6 + 4]);
    expect_server_prefixes(STREAM, 6 + m, sh, LZ_TLS_SERVER_HELLO, 0);
    /* Control: the same bytes with the HelloRetryRequest's random changed
     * by one bit are a ServerHello. */
    SRV[5 + 4 + 2 + 31] ^= 1;
    size_t end = 0;
    assert_int_equal(server(SRV, n, &end), LZ_TLS_SERVER_HELLO);
    /* TLS 1.3 without a retry; TLS 1.2 (ServerHello, Certificate... in one
     * record: the ServerHello is complete before the record is). */
    n = load("openssl-server-hello-tls13.bin", SRV, sizeof(SRV));
    expect_server_prefixes(SRV, n, 5 + (((size_t) SRV[3] << 8) | SRV[4]), LZ_TLS_SERVER_HELLO, 0);
    n = load("openssl-server-hello-tls12.bin", SRV, sizeof(SRV));
    uint8_t hs[512];
    expect_server_prefixes(SRV, n, 5 + first_message(SRV, hs), LZ_TLS_SERVER_HELLO, 0);
}

static void test_tls_server_hello_split(void **state)
{
    (void) state;
    uint8_t hs[512];
    load("openssl-hrr.bin", SRV, sizeof(SRV));
    size_t n = first_message(SRV, hs);
    assert_int_equal(n, 88);
    /* The HelloRetryRequest over two records, split at every point, and
     * over three; what follows (a ChangeCipherSpec) is the next round's. */
    for (size_t cut = 1; cut < n; cut++) {
        size_t cuts[2] = { cut, cut + (n - cut) / 2 };
        for (size_t k = 1; k <= 2; k++) {
            if (k == 2 && (cuts[1] == cut || cuts[1] >= n))
                continue;
            size_t len = records_build(hs, n, cuts, k, STREAM);
            memcpy(STREAM + len, "\x14\x03\x03\x00\x01\x01", 6);
            expect_server_prefixes(STREAM, len + 6, len, LZ_TLS_SERVER_RETRY, len);
        }
    }
    /* A ServerHello over two records. */
    n = load("openssl-server-hello-tls13.bin", SRV, sizeof(SRV));
    n = first_message(SRV, hs);
    for (size_t cut = 1; cut < n; cut++) {
        size_t len = records_build(hs, n, &cut, 1, STREAM);
        expect_server_prefixes(STREAM, len, len, LZ_TLS_SERVER_HELLO, 0);
    }
}

static void test_tls_server_hello_refusals(void **state)
{
    (void) state;
    uint8_t hs[512];
    size_t end = 0;
    load("openssl-hrr.bin", SRV, sizeof(SRV));
    size_t n = first_message(SRV, hs);
    /* A HelloRetryRequest that shares its record with other handshake
     * bytes (control: alone in it, it passes). */
    size_t len = records_build(hs, n, NULL, 0, STREAM);
    assert_int_equal(server(STREAM, len, &end), LZ_TLS_SERVER_RETRY);
    memcpy(hs + n, "\x0b\x00\x00\x00", 4);
    len = records_build(hs, n + 4, NULL, 0, STREAM);
    assert_int_equal(server(STREAM, len, &end), LZ_TLS_SERVER_INVALID);
    assert_int_equal(server(STREAM, len - 2, &end), LZ_TLS_SERVER_INVALID); /* not all here */
    /* The HelloRetryRequest's random without extensions (TLS 1.2 layout). */
    size_t body = 2 + 32 + 1 + hs[4 + 34] + 2 + 1;
    hs[1] = 0;
    hs[2] = (uint8_t) (body >> 8);
    hs[3] = (uint8_t) body;
    len = records_build(hs, 4 + body, NULL, 0, STREAM);
    assert_int_equal(server(STREAM, len, &end), LZ_TLS_SERVER_INVALID);
    /* Alerts: the server refused (a fatal handshake_failure). */
    static const uint8_t alert[] = { 21, 3, 3, 0, 2, 2, 40 };
    for (size_t i = 0; i < sizeof(alert); i++)
        assert_int_equal(server(alert, i, &end), LZ_TLS_SERVER_NEED_MORE);
    assert_int_equal(server(alert, sizeof(alert), &end), LZ_TLS_SERVER_ALERT);
    assert_int_equal(end, sizeof(alert));
    static const uint8_t long_alert[] = { 21, 3, 3, 0, 3, 2, 40, 0 };
    assert_int_equal(server(long_alert, sizeof(long_alert), &end), LZ_TLS_SERVER_INVALID);
    /* Other bytes where the ServerHello must be. */
    static const struct {
        const char *bytes;
        size_t len;
    } bad[] = {
        { "HTTP/1.1 200 OK\r\n", 17 },
        { "\x17\x03\x03\x00\x10", 5 },                 /* application data */
        { "\x16\x02\x03\x00\x10", 5 },                 /* version 2.x */
        { "\x16\x03\x03\x00\x00", 5 },                 /* empty record */
        { "\x16\x03\x03\x40\x01", 5 },                 /* over 2^14 */
        { "\x16\x03\x03\x00\x04\x01\x00\x00\x00", 9 }, /* a ClientHello */
        { "\x16\x03\x03\x00\x04\x0b\x00\x00\x00", 9 }, /* a Certificate first */
        { "\x14\x03\x03\x00\x01\x02", 6 },             /* ChangeCipherSpec of another value */
        { "\x14\x03\x03\x00\x02\x01\x01", 7 },         /* of another length */
        { "\x16\x03\x03\x00\x08\x02\x00\x40\x01", 9 }, /* a ServerHello over the bound */
        { "\x16\x03\x03\x00\x08\x02\x00\x00\x04\x02\x03", 11 }, /* version 2.x inside */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (server((const uint8_t *) bad[i].bytes, bad[i].len, &end) != LZ_TLS_SERVER_INVALID)
            fail_msg("bad answer %zu accepted", i);
    /* A session id of 33 bytes; an extensions block longer than the
     * message. */
    n = load("openssl-server-hello-tls13.bin", SRV, sizeof(SRV));
    n = first_message(SRV, hs);
    hs[4 + 34] = 33;
    len = records_build(hs, n, NULL, 0, STREAM);
    assert_int_equal(server(STREAM, len, &end), LZ_TLS_SERVER_INVALID);
    n = first_message(SRV, hs);
    assert_int_equal(hs[4 + 2 + 32 + 1 + 32 + 2 + 1], 0);
    hs[4 + 2 + 32 + 1 + 32 + 2 + 1] = 1; /* the extensions block's length, high byte */
    len = records_build(hs, n, NULL, 0, STREAM);
    assert_int_equal(server(STREAM, len, &end), LZ_TLS_SERVER_INVALID);
    /* Within the bound: a ServerHello still arriving at LZ_HELLO_MAX bytes
     * is refused, not waited for. */
    memset(STREAM, 0, LZ_HELLO_MAX);
    memcpy(STREAM, "\x16\x03\x03\x40\x00\x02\x00\x3f\xfc\x03\x03", 11);
    memcpy(STREAM + 47, "\x3f\xd4\xff\x01\x3f\xd0", 6); /* one extension to the end */
    assert_int_equal(server(STREAM, LZ_HELLO_MAX - 1, &end), LZ_TLS_SERVER_NEED_MORE);
    assert_int_equal(server(STREAM, LZ_HELLO_MAX, &end), LZ_TLS_SERVER_INVALID);
}

static lz_hello_result next_hello(const uint8_t *buf, size_t len, bool after_retry, size_t *end,
                                  char name[static LZ_HELLO_NAME_MAX], size_t *nl)
{
    *end = 12345;
    lz_hello_result r = lz_tls_client_hello_next(buf, len, after_retry, name, nl, end);
    if (r == LZ_HELLO_NAME)
        assert_true(*nl >= 1 && *nl <= LZ_HELLO_NAME_MAX);
    else
        assert_int_equal(*nl, 0);
    if (r != LZ_HELLO_NEED_MORE && r != LZ_HELLO_INVALID)
        assert_true(*end > 0 && *end <= len);
    else
        assert_int_equal(*end, 0);
    return r;
}

static void test_tls_client_hello_next(void **state)
{
    (void) state;
    char name[LZ_HELLO_NAME_MAX];
    size_t nl = 0, end = 0;
    /* The first ClientHello, and what follows it (early data) apart. */
    size_t n = load("openssl-tls13-sni.bin", FIX, sizeof(FIX));
    memcpy(STREAM, FIX, n);
    memcpy(STREAM + n, "\x17\x03\x03\x00\x01\x00", 6);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(next_hello(STREAM, i, false, &end, name, &nl), LZ_HELLO_NEED_MORE);
    assert_int_equal(next_hello(STREAM, n + 6, false, &end, name, &nl), LZ_HELLO_NAME);
    assert_int_equal(end, n);
    assert_memory_equal(name, "api.example.test", nl);
    /* The client's answer to a HelloRetryRequest: ChangeCipherSpec, then
     * the second ClientHello; read only with after_retry. */
    n = load("openssl-client-retry.bin", FIX, sizeof(FIX));
    assert_int_equal(n, 523);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(next_hello(FIX, i, true, &end, name, &nl), LZ_HELLO_NEED_MORE);
    assert_int_equal(next_hello(FIX, n, true, &end, name, &nl), LZ_HELLO_NAME);
    assert_int_equal(end, n);
    assert_int_equal(nl, strlen("api.example.test"));
    assert_memory_equal(name, "api.example.test", nl);
    assert_int_equal(next_hello(FIX, n, false, &end, name, &nl), LZ_HELLO_INVALID);
    assert_int_equal(next_hello(FIX + 6, n - 6, true, &end, name, &nl), LZ_HELLO_NAME);
    /* Another name in the second ClientHello: the decoder gives it (the
     * gate compares). */
    parts_from_record(FIX + 6, n - 6, &H);
    const char *other[] = { "other.example.test" };
    sni_set(&H, other, 1);
    memcpy(STREAM, FIX, 6);
    size_t len = 6 + stream_of_at(&H, STREAM + 6);
    assert_int_equal(next_hello(STREAM, len, true, &end, name, &nl), LZ_HELLO_NAME);
    assert_memory_equal(name, "other.example.test", nl);
    assert_int_equal(end, len);
    /* A ClientHello whose record goes on with other handshake bytes:
     * refused here (what follows could not be held apart); control: the
     * plain decoder reads it. */
    n = load("openssl-tls13-sni.bin", FIX, sizeof(FIX));
    parts_from_record(FIX, n, &H);
    size_t hn = handshake_build(&H, HS);
    memcpy(HS + hn, "\x01\x00\x00\x00", 4);
    len = records_build(HS, hn + 4, NULL, 0, STREAM);
    assert_int_equal(next_hello(STREAM, len, false, &end, name, &nl), LZ_HELLO_INVALID);
    assert_int_equal(tls(STREAM, len, name, &nl), LZ_HELLO_NAME);
    /* Early data (an application_data record) before the answer to the
     * retry: skipped like the ChangeCipherSpec; not without after_retry;
     * an empty one refused. */
    n = load("openssl-client-retry.bin", FIX, sizeof(FIX));
    memcpy(STREAM,
           "\x17\x03\x03\x00\x05"
           "early",
           10);
    memcpy(STREAM + 10, FIX, n);
    for (size_t i = 0; i < n + 10; i++)
        assert_int_equal(next_hello(STREAM, i, true, &end, name, &nl), LZ_HELLO_NEED_MORE);
    assert_int_equal(next_hello(STREAM, n + 10, true, &end, name, &nl), LZ_HELLO_NAME);
    assert_int_equal(end, n + 10);
    assert_int_equal(next_hello(STREAM, n + 10, false, &end, name, &nl), LZ_HELLO_INVALID);
    memcpy(STREAM, "\x17\x03\x03\x00\x00", 5);
    assert_int_equal(next_hello(STREAM, 5, true, &end, name, &nl), LZ_HELLO_INVALID);
    /* The server's answer may not start with one. */
    assert_int_equal(server(STREAM, 5, &end), LZ_TLS_SERVER_INVALID);
    /* A bad ChangeCipherSpec first. */
    memcpy(STREAM, "\x14\x03\x03\x00\x01\x02", 6);
    assert_int_equal(next_hello(STREAM, 6, true, &end, name, &nl), LZ_HELLO_INVALID);
}

/* Every seed of tests/fuzz/corpus/fuzz_hello is a complete message one of
 * the decoders reads (the fuzzer starts from valid messages). */
static void test_fuzz_seeds_are_valid(void **state)
{
    (void) state;
    const char *dir = LZ_TEST_DATA_DIR "/../../fuzz/corpus/fuzz_hello";
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    int seeds = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        ssize_t n = read(fd, STREAM, sizeof(STREAM));
        close(fd);
        assert_true(n > 0);
        char name[LZ_HELLO_NAME_MAX];
        size_t nl = 0;
        lz_hello_result t = tls(STREAM, (size_t) n, name, &nl);
        lz_hello_result h = http((const char *) STREAM, (size_t) n, name, &nl);
        bool tls_ok = t == LZ_HELLO_NAME || t == LZ_HELLO_NO_NAME || t == LZ_HELLO_ENCRYPTED;
        bool http_ok = h == LZ_HELLO_NAME || h == LZ_HELLO_NO_NAME;
        /* Or a server's answer, or a client's answer to a retry. */
        size_t end = 0;
        lz_tls_server_kind k = lz_tls_server_hello_kind(STREAM, (size_t) n, &end);
        if (k == LZ_TLS_SERVER_HELLO || k == LZ_TLS_SERVER_RETRY)
            tls_ok = !tls_ok;
        if (STREAM[0] == 20 &&
            lz_tls_client_hello_next(STREAM, (size_t) n, true, name, &nl, &end) == LZ_HELLO_NAME)
            tls_ok = !tls_ok;
        if (tls_ok == http_ok)
            fail_msg("seed %s: TLS %s, HTTP %s", e->d_name, lz_hello_result_text(t),
                     lz_hello_result_text(h));
        seeds++;
    }
    closedir(d);
    assert_true(seeds >= 8);
}

static void test_result_text(void **state)
{
    (void) state;
    for (int i = LZ_HELLO_NEED_MORE; i <= LZ_HELLO_INVALID; i++) {
        assert_true(strlen(lz_hello_result_text((lz_hello_result) i)) > 3);
        for (int j = LZ_HELLO_NEED_MORE; j < i; j++)
            assert_string_not_equal(lz_hello_result_text((lz_hello_result) i),
                                    lz_hello_result_text((lz_hello_result) j));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tls_captured),
        cmocka_unit_test(test_tls_post_quantum_split),
        cmocka_unit_test(test_tls_ech),
        cmocka_unit_test(test_tls_server_name_rules),
        cmocka_unit_test(test_tls_refusals),
        cmocka_unit_test(test_http_host),
        cmocka_unit_test(test_http_refusals),
        cmocka_unit_test(test_http_bound),
        cmocka_unit_test(test_http_frame),
        cmocka_unit_test(test_http_frame_refusals),
        cmocka_unit_test(test_tls_server_hello_captured),
        cmocka_unit_test(test_tls_server_hello_split),
        cmocka_unit_test(test_tls_server_hello_refusals),
        cmocka_unit_test(test_tls_client_hello_next),
        cmocka_unit_test(test_fuzz_seeds_are_valid),
        cmocka_unit_test(test_result_text),
    };
    return cmocka_run_group_tests_name("test_hello", tests, NULL, NULL);
}
