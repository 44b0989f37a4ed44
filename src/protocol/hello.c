/* SPDX-License-Identifier: Apache-2.0
 *
 * The name on a connection: the TLS ClientHello's server_name and the HTTP
 * request's Host (contract: hello.h; decisions: docs/dns-decoder.md "The
 * name on the connection").
 *
 * Both decoders read a stream's first bytes as they arrive and answer
 * LZ_HELLO_NEED_MORE only while what came so far can still become a valid
 * message: every field present is checked as soon as it is there, so a
 * client cannot hold the name check open with bytes that are already
 * wrong. A final answer (name, no name, encrypted) is given only once the
 * whole ClientHello or header block is in, so that a later byte cannot
 * turn an accepted message into a refused one. Nothing is allocated; the
 * handshake is gathered into a buffer on the stack of LZ_HELLO_MAX bytes.
 *
 * TLS: records of content type 22 (legacy version 3.x, length 1..2^14)
 * concatenated until the ClientHello (handshake type 1, at most
 * LZ_HELLO_MAX bytes with its 4-byte header) is complete; what follows it
 * (ChangeCipherSpec, early data) is not read. Inside: legacy_version 3.x,
 * random, session id (<= 32), cipher suites (even, >= 2), compression
 * methods (>= 1), then either nothing (a TLS 1.2 hello without
 * extensions) or an extensions block that ends exactly where the
 * ClientHello ends. server_name: a non-empty list of host_name entries
 * (type 0; any other name type is refused), 1..255 bytes, no NUL; a second
 * host_name, a second server_name or a second encrypted_client_hello
 * extension is refused. encrypted_client_hello (0xfe0d) gives
 * LZ_HELLO_ENCRYPTED even when an outer server_name is present: the outer
 * name is the ECH provider's public name, not the one the client talks to.
 *
 * The TLS gate (lz-namecheck, after a ClientHello passed):
 * lz_tls_client_hello_next is the same decoder, which also says where the
 * ClientHello's last record ends and refuses one whose last record goes
 * on; after a retry, ChangeCipherSpec (exactly 14 03 xx 00 01 01) and
 * application_data records (1..2^14 + 256 bytes, early data) may come
 * first. lz_tls_server_hello_kind reads the server's answer the same way:
 * ChangeCipherSpec records, then handshake records (as above) whose first
 * message must be a ServerHello (type 2, legacy_version 3.x, random,
 * session id <= 32, cipher suite, compression method, then nothing or an
 * extensions block of well-formed extensions ending with the message); a
 * HelloRetryRequest (RFC 8446's random) must have extensions and end with
 * its record. A first record that is an alert must be exactly one 2-byte
 * alert.
 *
 * HTTP: "METHOD SP origin-form SP HTTP/1.0|1.1 CRLF" (origin-form: starts
 * with '/'; absolute-form, authority-form and asterisk-form are refused),
 * header lines "name: value CRLF" (name a token right before ':', value
 * visible bytes, SP, HTAB, obs-text), an empty line ends the block, which
 * must end within LZ_HELLO_MAX bytes. CRLF only (a bare LF is refused),
 * obs-fold refused, exactly one Host (case-insensitive name); its value,
 * without surrounding whitespace, is "host" or "host:port" with 1..5 port
 * digits; an IPv6 literal ("[...]"), an empty host, a host with '@', '/',
 * '\\', '[', ']', '?', '#' or whitespace is refused.
 *
 * HTTP framing (lz_http_request_frame, lz-namecheck's one request per
 * port-80 connection): the same parse, plus the headers that say where the
 * body ends, checked as they arrive: one Content-Length, 1*DIGIT with
 * optional whitespace around it, at most LZ_HTTP_BODY_MAX (checked per
 * digit, so the value never overflows); a second one (equal or not, any
 * case) and any Transfer-Encoding are refused at their colon.
 */
#include "protocol/hello.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define TLS_RECORD_HEADER 5
#define TLS_RECORD_MAX 16384
#define TLS_CONTENT_CCS 20
#define TLS_CONTENT_ALERT 21
#define TLS_CONTENT_HANDSHAKE 22
#define TLS_CONTENT_APPLICATION_DATA 23
#define TLS_HANDSHAKE_CLIENT_HELLO 1
#define TLS_HANDSHAKE_SERVER_HELLO 2
#define TLS_EXT_SERVER_NAME 0x0000
#define TLS_EXT_ECH 0xfe0d
#define TLS_SNI_HOST_NAME 0

/* A parsing step: go on, or stop with this result. */
typedef enum step { STEP_GO, STEP_MORE, STEP_BAD } step;

static lz_hello_result step_result(step s)
{
    return s == STEP_MORE ? LZ_HELLO_NEED_MORE : LZ_HELLO_INVALID;
}

/* ---- TLS ---------------------------------------------------------------- */

/* A cursor over the gathered handshake: bytes [0, avail) are here, the
 * ClientHello ends at end (avail may be less while it is arriving). */
typedef struct cursor {
    const uint8_t *p;
    size_t pos, avail;
} cursor;

/* Take n bytes that must lie before limit (the end of the enclosing
 * length-delimited block): past limit the message is wrong, past avail it
 * is not all here yet. */
static step take(cursor *c, size_t n, size_t limit, size_t *at)
{
    if (n > limit - c->pos)
        return STEP_BAD;
    if (n > c->avail - c->pos)
        return STEP_MORE;
    *at = c->pos;
    c->pos += n;
    return STEP_GO;
}

static step take8(cursor *c, size_t limit, size_t *v)
{
    size_t at = 0;
    step s = take(c, 1, limit, &at);
    if (s == STEP_GO)
        *v = c->p[at];
    return s;
}

static step take16(cursor *c, size_t limit, size_t *v)
{
    size_t at = 0;
    step s = take(c, 2, limit, &at);
    if (s == STEP_GO)
        *v = ((size_t) c->p[at] << 8) | c->p[at + 1];
    return s;
}

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        step s_ = (expr);                                                                          \
        if (s_ != STEP_GO)                                                                         \
            return s_;                                                                             \
    } while (0)

typedef struct hello_found {
    bool sni_seen, ech;
    size_t name_at, name_len; /* name_len 0: no host_name */
} hello_found;

static step server_name_parse(cursor *c, size_t ext_end, hello_found *f)
{
    size_t list_len = 0;
    TRY(take16(c, ext_end, &list_len));
    if (list_len == 0 || list_len != ext_end - c->pos)
        return STEP_BAD;
    while (c->pos < ext_end) {
        size_t type = 0, len = 0, at = 0;
        TRY(take8(c, ext_end, &type));
        if (type != TLS_SNI_HOST_NAME)
            return STEP_BAD;
        TRY(take16(c, ext_end, &len));
        if (len == 0 || len > LZ_HELLO_NAME_MAX || f->name_len)
            return STEP_BAD;
        TRY(take(c, len, ext_end, &at));
        if (memchr(c->p + at, '\0', len))
            return STEP_BAD;
        f->name_at = at;
        f->name_len = len;
    }
    return STEP_GO;
}

/* The start both hellos share: legacy_version (3.x), random (its offset
 * in *random_at) and legacy_session_id(_echo), at most 32 bytes. */
static step hello_head(cursor *c, size_t end, size_t *random_at)
{
    size_t at = 0, n = 0;
    TRY(take(c, 2, end, &at)); /* legacy_version */
    if (c->p[at] != 3)
        return STEP_BAD;
    TRY(take(c, 32, end, random_at));
    TRY(take8(c, end, &n));
    if (n > 32)
        return STEP_BAD;
    return take(c, n, end, &at);
}

/* The ClientHello's body, from legacy_version to the end at end. */
static step client_hello_parse(cursor *c, size_t end, hello_found *f)
{
    size_t at = 0, n = 0;
    TRY(hello_head(c, end, &at));
    TRY(take16(c, end, &n)); /* cipher_suites */
    if (n < 2 || n % 2)
        return STEP_BAD;
    TRY(take(c, n, end, &at));
    TRY(take8(c, end, &n)); /* legacy_compression_methods */
    if (n < 1)
        return STEP_BAD;
    TRY(take(c, n, end, &at));
    if (c->pos == end) /* no extensions at all (TLS 1.2 allows it) */
        return STEP_GO;
    size_t ext_total = 0;
    TRY(take16(c, end, &ext_total));
    if (ext_total != end - c->pos)
        return STEP_BAD;
    while (c->pos < end) {
        size_t type = 0, len = 0;
        TRY(take16(c, end, &type));
        TRY(take16(c, end, &len));
        if (len > end - c->pos)
            return STEP_BAD;
        size_t ext_end = c->pos + len;
        if (type == TLS_EXT_SERVER_NAME) {
            if (f->sni_seen)
                return STEP_BAD;
            f->sni_seen = true;
            TRY(server_name_parse(c, ext_end, f));
        } else if (type == TLS_EXT_ECH) {
            if (f->ech)
                return STEP_BAD;
            f->ech = true;
            TRY(take(c, len, ext_end, &at));
        } else {
            TRY(take(c, len, ext_end, &at));
        }
    }
    return STEP_GO;
}

/* The records a client may send between a HelloRetryRequest and its
 * second ClientHello, at buf[0..len): ChangeCipherSpec (RFC 8446 D.4's
 * compatibility record, exactly 14 03 xx 00 01 01) and, with early_data,
 * application_data records (the 0-RTT data sent after the first
 * ClientHello, which the server skips after a retry: 4.2.10). *off gets
 * the length of the complete ones; STEP_MORE when buf ends inside one.
 * The server's answer may start with ChangeCipherSpec records only. */
static step records_skip(const uint8_t *buf, size_t len, bool early_data, size_t *off)
{
    static const uint8_t ccs[] = { TLS_CONTENT_CCS, 3, 0, 0, 1, 1 };
    *off = 0;
    while (*off < len) {
        const uint8_t *p = buf + *off;
        size_t n = len - *off;
        if (p[0] == TLS_CONTENT_APPLICATION_DATA && early_data) {
            if (n >= 2 && p[1] != 3)
                return STEP_BAD;
            if (n < TLS_RECORD_HEADER)
                return STEP_MORE;
            size_t rec = ((size_t) p[3] << 8) | p[4];
            if (rec == 0 || rec > TLS_RECORD_MAX + 256) /* a TLSCiphertext's bound */
                return STEP_BAD;
            if (n < TLS_RECORD_HEADER + rec)
                return STEP_MORE;
            *off += TLS_RECORD_HEADER + rec;
            continue;
        }
        if (p[0] != TLS_CONTENT_CCS)
            return STEP_GO;
        n = n < sizeof(ccs) ? n : sizeof(ccs);
        for (size_t i = 0; i < n; i++)
            if (i != 2 && p[i] != ccs[i])
                return STEP_BAD;
        if (n < sizeof(ccs))
            return STEP_MORE;
        *off += sizeof(ccs);
    }
    return STEP_GO;
}

/* Gather the handshake bytes of the records in buf into hs, until the
 * first handshake message (which must be of type want) is complete; *need
 * gets its length with its header once known (0 before). On STEP_GO,
 * *end is where the record holding its last byte ends in buf, and *exact
 * says whether the message ends with that record (nothing else of the
 * handshake shares it, and all of it is here). */
static step records_gather(const uint8_t *buf, size_t len, uint8_t want, uint8_t *hs, size_t *have,
                           size_t *need, size_t *end, bool *exact)
{
    size_t off = 0, total = 0; /* total: the handshake bytes seen, copied or not */
    *have = 0;
    *need = 0;
    *exact = false;
    while (*need == 0 || *have < *need) {
        if (off == len)
            return STEP_MORE;
        if (buf[off] != TLS_CONTENT_HANDSHAKE)
            return STEP_BAD;
        if (len - off >= 2 && buf[off + 1] != 3)
            return STEP_BAD;
        if (len - off < TLS_RECORD_HEADER)
            return STEP_MORE;
        size_t rec = ((size_t) buf[off + 3] << 8) | buf[off + 4];
        if (rec == 0 || rec > TLS_RECORD_MAX)
            return STEP_BAD;
        size_t frag = len - off - TLS_RECORD_HEADER;
        if (frag > rec)
            frag = rec;
        size_t copy = frag < LZ_HELLO_MAX - *have ? frag : LZ_HELLO_MAX - *have;
        memcpy(hs + *have, buf + off + TLS_RECORD_HEADER, copy);
        *have += copy;
        total += frag;
        if (*have >= 1 && hs[0] != want)
            return STEP_BAD;
        if (*need == 0 && *have >= 4) {
            *need = 4 + (((size_t) hs[1] << 16) | ((size_t) hs[2] << 8) | hs[3]);
            if (*need > LZ_HELLO_MAX)
                return STEP_BAD;
        }
        *end = off + TLS_RECORD_HEADER + rec;
        if (frag < rec)
            return (*need && *have >= *need) ? STEP_GO : STEP_MORE;
        off = *end;
    }
    *exact = total == *need;
    return STEP_GO;
}

/* The ClientHello at the start of buf (after_retry: after any
 * ChangeCipherSpec records); *end and *exact as records_gather's. */
static lz_hello_result client_hello_decode(const unsigned char *buf, size_t len, bool after_retry,
                                           char name[static LZ_HELLO_NAME_MAX], size_t *name_len,
                                           size_t *end, bool *exact)
{
    uint8_t hs[LZ_HELLO_MAX];
    size_t have = 0, need = 0, skip = 0;
    *name_len = 0;
    *end = 0;
    *exact = false;
    step s = after_retry ? records_skip(buf, len, true, &skip) : STEP_GO;
    if (s == STEP_GO)
        s = records_gather(buf + skip, len - skip, TLS_HANDSHAKE_CLIENT_HELLO, hs, &have, &need,
                           end, exact);
    *end += skip;
    if (s == STEP_BAD)
        return LZ_HELLO_INVALID;
    hello_found f = { 0 };
    if (need) {
        cursor c = { .p = hs, .pos = 4, .avail = have < need ? have : need };
        s = client_hello_parse(&c, need, &f);
    }
    if (s != STEP_GO) {
        /* a prefix that cannot grow any more is refused */
        if (s == STEP_MORE && len >= LZ_HELLO_MAX)
            return LZ_HELLO_INVALID;
        return step_result(s);
    }
    if (f.ech)
        return LZ_HELLO_ENCRYPTED;
    if (!f.name_len)
        return LZ_HELLO_NO_NAME;
    memcpy(name, hs + f.name_at, f.name_len);
    *name_len = f.name_len;
    return LZ_HELLO_NAME;
}

lz_hello_result lz_tls_client_hello_name(const unsigned char *buf, size_t len,
                                         char name[static LZ_HELLO_NAME_MAX], size_t *name_len)
{
    size_t end;
    bool exact;
    return client_hello_decode(buf, len, false, name, name_len, &end, &exact);
}

lz_hello_result lz_tls_client_hello_next(const unsigned char *buf, size_t len, bool after_retry,
                                         char name[static LZ_HELLO_NAME_MAX], size_t *name_len,
                                         size_t *end)
{
    char found[LZ_HELLO_NAME_MAX];
    bool exact;
    lz_hello_result r = client_hello_decode(buf, len, after_retry, found, name_len, end, &exact);
    if (r != LZ_HELLO_NEED_MORE && r != LZ_HELLO_INVALID && !exact)
        r = LZ_HELLO_INVALID; /* the record goes on past the ClientHello */
    if (r == LZ_HELLO_NEED_MORE || r == LZ_HELLO_INVALID)
        *name_len = *end = 0;
    /* Only a name this answer gives is written. */
    memcpy(name, found, *name_len);
    return r;
}

/* The ServerHello's body (legacy_version to end): its random says whether
 * it is a HelloRetryRequest. */
static step server_hello_parse(cursor *c, size_t end, bool *retry)
{
    /* RFC 8446 4.1.3: SHA-256("HelloRetryRequest") */
    static const uint8_t hrr_random[32] = {
        0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c,
        0x02, 0x1e, 0x65, 0xb8, 0x91, 0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb,
        0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
    };
    size_t at = 0, random_at = 0;
    TRY(hello_head(c, end, &random_at));
    *retry = memcmp(c->p + random_at, hrr_random, 32) == 0;
    TRY(take(c, 2, end, &at)); /* cipher_suite */
    TRY(take(c, 1, end, &at)); /* legacy_compression_method */
    if (c->pos == end)         /* no extensions (TLS 1.2 allows it) */
        return *retry ? STEP_BAD : STEP_GO;
    size_t ext_total = 0;
    TRY(take16(c, end, &ext_total));
    if (ext_total != end - c->pos)
        return STEP_BAD;
    while (c->pos < end) {
        size_t type = 0, len = 0;
        TRY(take16(c, end, &type));
        TRY(take16(c, end, &len));
        TRY(take(c, len, end, &at));
    }
    return STEP_GO;
}

lz_tls_server_kind lz_tls_server_hello_kind(const unsigned char *buf, size_t len, size_t *end)
{
    size_t skip = 0;
    *end = 0;
    step s = records_skip(buf, len, false, &skip);
    if (s != STEP_GO)
        return s == STEP_MORE ? LZ_TLS_SERVER_NEED_MORE : LZ_TLS_SERVER_INVALID;
    const uint8_t *p = buf + skip;
    size_t n = len - skip;
    if (n && p[0] == TLS_CONTENT_ALERT) {
        /* A plaintext alert: level, description; the server refused. */
        static const uint8_t head[] = { TLS_CONTENT_ALERT, 3, 0, 0, 2 };
        for (size_t i = 0; i < n && i < sizeof(head); i++)
            if (i != 2 && p[i] != head[i])
                return LZ_TLS_SERVER_INVALID;
        if (n < sizeof(head) + 2)
            return LZ_TLS_SERVER_NEED_MORE;
        *end = skip + sizeof(head) + 2;
        return LZ_TLS_SERVER_ALERT;
    }
    uint8_t hs[LZ_HELLO_MAX];
    size_t have = 0, need = 0, rec_end = 0;
    bool exact = false, retry = false;
    s = records_gather(p, n, TLS_HANDSHAKE_SERVER_HELLO, hs, &have, &need, &rec_end, &exact);
    if (s == STEP_GO || (s == STEP_MORE && need)) {
        cursor c = { .p = hs, .pos = 4, .avail = have < need ? have : need };
        step parsed = server_hello_parse(&c, need, &retry);
        s = parsed == STEP_BAD ? STEP_BAD : s == STEP_GO ? parsed : STEP_MORE;
    }
    if (s == STEP_MORE)
        return len >= LZ_HELLO_MAX ? LZ_TLS_SERVER_INVALID : LZ_TLS_SERVER_NEED_MORE;
    if (s == STEP_BAD)
        return LZ_TLS_SERVER_INVALID;
    if (!retry)
        return LZ_TLS_SERVER_HELLO;
    /* The client answers a HelloRetryRequest; nothing else of the server's
     * handshake may share its record. */
    if (!exact)
        return LZ_TLS_SERVER_INVALID;
    *end = skip + rec_end;
    return LZ_TLS_SERVER_RETRY;
}

/* ---- HTTP --------------------------------------------------------------- */

static bool is_tchar(uint8_t c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool is_field_vchar(uint8_t c)
{
    return (c >= 0x21 && c <= 0x7e) || c >= 0x80 || c == ' ' || c == '\t';
}

static uint8_t lower(uint8_t c)
{
    return (c >= 'A' && c <= 'Z') ? (uint8_t) (c - 'A' + 'a') : c;
}

/* The request line in [p, p + n) (without its CRLF; complete when
 * complete is true, else a prefix of one). */
static step request_line_check(const uint8_t *p, size_t n, bool complete)
{
    size_t i = 0;
    while (i < n && is_tchar(p[i]))
        i++;
    if (i == n)
        return complete ? STEP_BAD : STEP_MORE;
    if (i == 0 || p[i] != ' ')
        return STEP_BAD;
    i++;
    /* origin-form only: an absolute URI's authority would compete with
     * Host, authority-form (CONNECT) and "*" name no path */
    if (i == n)
        return complete ? STEP_BAD : STEP_MORE;
    if (p[i] != '/')
        return STEP_BAD;
    while (i < n && p[i] >= 0x21 && p[i] <= 0x7e)
        i++;
    if (i == n)
        return complete ? STEP_BAD : STEP_MORE;
    if (p[i] != ' ')
        return STEP_BAD;
    i++;
    static const char version[] = "HTTP/1.";
    size_t rest = n - i;
    size_t cmp = rest < 7 ? rest : 7;
    if (memcmp(p + i, version, cmp) != 0)
        return STEP_BAD;
    if (rest < 8)
        return complete ? STEP_BAD : STEP_MORE;
    if (p[i + 7] != '0' && p[i + 7] != '1')
        return STEP_BAD;
    if (rest > 8)
        return STEP_BAD;
    return complete ? STEP_GO : STEP_MORE;
}

/* A Host value (surrounding whitespace already removed): "host" or
 * "host:port"; when complete is false, a prefix of one. *host_len gets the
 * host's length. */
static step host_value_check(const uint8_t *v, size_t n, bool complete, size_t *host_len)
{
    if (n == 0)
        return complete ? STEP_BAD : STEP_GO;
    if (v[0] == '[') /* an IPv6 literal: no name */
        return STEP_BAD;
    size_t h = 0;
    while (h < n && v[h] != ':') {
        /* URI delimiters cannot be part of a name: a host with them
         * would read differently to a proxy or a server */
        if (v[h] <= 0x20 || v[h] >= 0x7f || strchr("@/\\[]?#", v[h]))
            return STEP_BAD;
        h++;
    }
    if ((h == 0 && n > 0) || h > LZ_HELLO_NAME_MAX)
        return STEP_BAD;
    if (h < n) {
        size_t digits = n - h - 1;
        if ((complete && digits < 1) || digits > 5)
            return STEP_BAD;
        for (size_t i = h + 1; i < n; i++)
            if (v[i] < '0' || v[i] > '9')
                return STEP_BAD;
    }
    *host_len = h;
    return STEP_GO;
}

static bool is_ows(uint8_t c)
{
    return c == ' ' || c == '\t';
}

typedef struct http_found {
    size_t hosts;
    size_t host_at, host_len;
    bool frame;     /* lz_http_request_frame: the body's headers are checked */
    size_t lengths; /* Content-Length headers seen (complete) */
    uint64_t body_len;
} http_found;

static bool name_is(const uint8_t *l, size_t n, const char *want)
{
    if (n != strlen(want))
        return false;
    for (size_t i = 0; i < n; i++)
        if (lower(l[i]) != (uint8_t) want[i])
            return false;
    return true;
}

/* A Content-Length value [v, v + n) with its surrounding OWS (a prefix
 * when complete is false): 1*DIGIT, at most LZ_HTTP_BODY_MAX. A list
 * ("5, 5"), a sign or anything else is refused as soon as it is there. */
static step length_value_check(const uint8_t *v, size_t n, bool complete, uint64_t *len)
{
    size_t i = 0;
    while (i < n && is_ows(v[i]))
        i++;
    size_t digits = 0;
    uint64_t x = 0;
    for (; i < n && v[i] >= '0' && v[i] <= '9'; i++, digits++) {
        x = x * 10 + (uint64_t) (v[i] - '0');
        if (x > LZ_HTTP_BODY_MAX)
            return STEP_BAD; /* checked per digit: x never overflows */
    }
    for (; i < n; i++)
        if (!is_ows(v[i]) || digits == 0)
            return STEP_BAD;
    if (complete && digits == 0)
        return STEP_BAD;
    *len = x;
    return complete ? STEP_GO : STEP_MORE;
}

/* The headers that say how long the body is (lz_http_request_frame only):
 * exactly one Content-Length, no Transfer-Encoding (hello.h). */
static step body_header_check(const uint8_t *l, size_t name_len, size_t n, bool complete,
                              http_found *f)
{
    if (name_is(l, name_len, "transfer-encoding"))
        return STEP_BAD; /* a chunked body: refused, not framed */
    if (!name_is(l, name_len, "content-length"))
        return STEP_GO;
    if (f->lengths == 1)
        return STEP_BAD; /* a second Content-Length, even an equal one */
    uint64_t len = 0;
    TRY(length_value_check(l + name_len + 1, n - name_len - 1, complete, &len));
    f->lengths = 1;
    f->body_len = len;
    return STEP_GO;
}

/* One header line [p + at, p + at + n) without its CRLF (a prefix when
 * complete is false). */
static step header_line_check(const uint8_t *p, size_t at, size_t n, bool complete, http_found *f)
{
    const uint8_t *l = p + at;
    if (l[0] == ' ' || l[0] == '\t') /* obs-fold */
        return STEP_BAD;
    size_t i = 0;
    while (i < n && is_tchar(l[i]))
        i++;
    if (i == n)
        return complete ? STEP_BAD : STEP_MORE;
    if (i == 0 || l[i] != ':') /* includes whitespace before ':' */
        return STEP_BAD;
    bool is_host = i == 4 && lower(l[0]) == 'h' && lower(l[1]) == 'o' && lower(l[2]) == 's' &&
                   lower(l[3]) == 't';
    size_t v = i + 1;
    for (size_t j = v; j < n; j++)
        if (!is_field_vchar(l[j]))
            return STEP_BAD;
    if (f->frame)
        TRY(body_header_check(l, i, n, complete, f));
    if (!is_host)
        return complete ? STEP_GO : STEP_MORE;
    if (f->hosts == 1)
        return STEP_BAD; /* a second Host */
    size_t e = n;
    while (v < e && is_ows(l[v]))
        v++;
    if (complete) {
        while (e > v && is_ows(l[e - 1]))
            e--;
    } else {
        /* whitespace so far may still be the trailing OWS: only if
         * nothing else follows it */
        size_t w = v;
        while (w < e && !is_ows(l[w]))
            w++;
        for (size_t j = w; j < e; j++)
            if (!is_ows(l[j]))
                return STEP_BAD;
        e = w;
    }
    size_t host_len = 0;
    TRY(host_value_check(l + v, e - v, complete, &host_len));
    if (!complete)
        return STEP_MORE;
    f->hosts = 1;
    f->host_at = at + v;
    f->host_len = host_len;
    return STEP_GO;
}

/* *end gets the header block's length (with its empty line) on STEP_GO. */
static step http_parse(const uint8_t *p, size_t len, http_found *f, size_t *end)
{
    size_t line = 0;
    bool first = true;
    for (;;) {
        const uint8_t *lf = line < len ? memchr(p + line, '\n', len - line) : NULL;
        size_t n = (lf ? (size_t) (lf - p) : len) - line;
        bool complete = lf != NULL;
        /* the line's CR: only right before its LF */
        const uint8_t *cr = n ? memchr(p + line, '\r', n) : NULL;
        if (complete) {
            if (!cr || cr != lf - 1)
                return STEP_BAD; /* a bare LF, or a CR inside the line */
            n--;
        } else if (cr && cr != p + len - 1) {
            return STEP_BAD;
        } else if (cr) {
            n--;
        }
        if (first) {
            TRY(request_line_check(p + line, n, complete));
            first = false;
        } else if (n == 0 && complete) {
            *end = (size_t) (lf - p) + 1;
            return STEP_GO; /* the empty line: end of the header block */
        } else if (n == 0) {
            return STEP_MORE;
        } else {
            TRY(header_line_check(p, line, n, complete, f));
        }
        if (!complete)
            return STEP_MORE;
        line = (size_t) (lf - p) + 1;
    }
}

lz_hello_result lz_http_request_host(const unsigned char *buf, size_t len,
                                     char name[static LZ_HELLO_NAME_MAX], size_t *name_len)
{
    *name_len = 0;
    /* the header block must end within LZ_HELLO_MAX bytes */
    size_t look = len < LZ_HELLO_MAX ? len : LZ_HELLO_MAX;
    http_found f = { 0 };
    size_t end = 0; /* not needed here: the Host is */
    step s = http_parse(buf, look, &f, &end);
    if (s == STEP_MORE && len >= LZ_HELLO_MAX)
        return LZ_HELLO_INVALID;
    if (s != STEP_GO)
        return step_result(s);
    if (!f.hosts)
        return LZ_HELLO_NO_NAME;
    memcpy(name, buf + f.host_at, f.host_len);
    *name_len = f.host_len;
    return LZ_HELLO_NAME;
}

lz_http_frame_result lz_http_request_frame(const unsigned char *buf, size_t len, size_t *header_len,
                                           uint64_t *body_len)
{
    *header_len = 0;
    *body_len = 0;
    /* the same bound as lz_http_request_host's */
    size_t look = len < LZ_HELLO_MAX ? len : LZ_HELLO_MAX;
    http_found f = { .frame = true };
    size_t end = 0;
    step s = http_parse(buf, look, &f, &end);
    if (s == STEP_BAD || (s == STEP_MORE && len >= LZ_HELLO_MAX))
        return LZ_HTTP_FRAME_INVALID;
    if (s == STEP_MORE)
        return LZ_HTTP_FRAME_NEED_MORE;
    *header_len = end;
    *body_len = f.body_len;
    return LZ_HTTP_FRAME_OK;
}

const char *lz_hello_result_text(lz_hello_result r)
{
    switch (r) {
    case LZ_HELLO_NEED_MORE:
        return "incomplete (more bytes needed)";
    case LZ_HELLO_NAME:
        return "name found";
    case LZ_HELLO_NO_NAME:
        return "no name (no server_name in the TLS ClientHello, no Host header)";
    case LZ_HELLO_ENCRYPTED:
        return "encrypted ClientHello (ECH): the name is hidden";
    case LZ_HELLO_INVALID:
        return "not a TLS ClientHello or HTTP/1.x request, or over a bound";
    default:
        break;
    }
    return "unknown result";
}
