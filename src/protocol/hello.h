/* SPDX-License-Identifier: Apache-2.0
 *
 * The name a client says it is talking to, read from the first bytes of a
 * TCP connection without decrypting anything (issue 25, item 3;
 * docs/network.md "The name on the connection"): the server_name of a TLS
 * ClientHello, and the Host header of an HTTP/1.x request. Bounded,
 * allocation-free decoders of untrusted bytes, fuzzed
 * (tests/fuzz/fuzz_hello.c). libc only. The exact rules (what is refused
 * and why): hello.c's first comment and docs/dns-decoder.md.
 */
#ifndef LAZARET_PROTOCOL_HELLO_H
#define LAZARET_PROTOCOL_HELLO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most a decoder looks at: a ClientHello (with post-quantum key
 * shares it spans several TCP segments and TLS records) or a request's
 * header block larger than this is refused. */
#define LZ_HELLO_MAX 16384
/* The longest name either decoder returns (a DNS name's wire limit). */
#define LZ_HELLO_NAME_MAX 255

typedef enum lz_hello_result {
    LZ_HELLO_NEED_MORE = 0, /* a prefix of a valid message: read more (up to LZ_HELLO_MAX) */
    LZ_HELLO_NAME,          /* name found (raw bytes, not canonical: see config/hosts.h) */
    LZ_HELLO_NO_NAME,       /* a complete message without server_name / Host */
    LZ_HELLO_ENCRYPTED,     /* TLS: an encrypted_client_hello extension (the real name is hidden) */
    LZ_HELLO_INVALID,       /* not a ClientHello / HTTP request, or breaks a bound */
} lz_hello_result;

/* buf[0..len) is what the client sent so far. The TLS handshake may be
 * fragmented over several records (each of content type 22); the
 * ClientHello must be the first handshake message. On LZ_HELLO_NAME, the
 * host_name entry of server_name is copied into name (not NUL-terminated
 * by the decoder's contract: *name_len says how long; a name longer than
 * LZ_HELLO_NAME_MAX, or a second host_name entry, is LZ_HELLO_INVALID). */
lz_hello_result lz_tls_client_hello_name(const unsigned char *buf, size_t len,
                                         char name[static LZ_HELLO_NAME_MAX], size_t *name_len);

/* The same decoder, for lz-namecheck's TLS gate (docs/network.md "The name
 * on the connection"): with after_retry (the client's answer to a
 * HelloRetryRequest), ChangeCipherSpec records (14 03 xx 00 01 01) and
 * application_data records (early data sent before the retry, which the
 * server skips; each at most 2^14 + 256 bytes) may come first. On a final result, *end is where the
 * records that carry the ClientHello end in buf: the bytes after it are the client's next ones. A
 * ClientHello that does not end with its record (the record goes on with other handshake bytes) is
 * LZ_HELLO_INVALID: what follows it must be held apart from it. */
lz_hello_result lz_tls_client_hello_next(const unsigned char *buf, size_t len, bool after_retry,
                                         char name[static LZ_HELLO_NAME_MAX], size_t *name_len,
                                         size_t *end);

/* What the server answered a ClientHello with: buf[0..len) is the server's
 * bytes so far (after a HelloRetryRequest: those after its records).
 * ChangeCipherSpec records may come first; then handshake records (split
 * anywhere, the message over several) whose first message must be a
 * ServerHello (legacy_version 3.x, random, session id <= 32, cipher suite,
 * compression method, then nothing or an extensions block ending exactly
 * with the message), at most LZ_HELLO_MAX bytes; or one plaintext alert
 * record (the server refused). A ServerHello whose random is RFC 8446's
 * HelloRetryRequest value is LZ_TLS_SERVER_RETRY; it must end with its
 * record, and *end says where that record ends. LZ_TLS_SERVER_ALERT:
 * *end is the alert record's end. */
typedef enum lz_tls_server_kind {
    LZ_TLS_SERVER_NEED_MORE = 0, /* a prefix of a valid answer: read more */
    LZ_TLS_SERVER_HELLO,         /* a ServerHello: the server chose its site */
    LZ_TLS_SERVER_RETRY,         /* a HelloRetryRequest: a second ClientHello comes */
    LZ_TLS_SERVER_ALERT,         /* an alert before any ServerHello */
    LZ_TLS_SERVER_INVALID,       /* anything else, or over the bound */
} lz_tls_server_kind;

lz_tls_server_kind lz_tls_server_hello_kind(const unsigned char *buf, size_t len, size_t *end);

/* HTTP/1.0 or 1.1: request line, then headers up to the empty line. Exactly
 * one Host header (two are LZ_HELLO_INVALID); name gets its value without
 * surrounding whitespace and without a ":port" suffix, as for TLS. A
 * request line with an absolute URI ("GET http://x/ HTTP/1.1") is
 * LZ_HELLO_INVALID (its authority would compete with Host). */
lz_hello_result lz_http_request_host(const unsigned char *buf, size_t len,
                                     char name[static LZ_HELLO_NAME_MAX], size_t *name_len);

/* The largest request body lz_http_request_frame accepts (2^40 bytes): a
 * bound, so that header_len + body_len never overflows. */
#define LZ_HTTP_BODY_MAX ((uint64_t) 1 << 40)

/* The extent of the first HTTP/1.x request in buf[0..len): on
 * LZ_HTTP_FRAME_OK, *header_len is the header block's length (request line
 * to the empty line, included) and *body_len the body's, from exactly one
 * Content-Length (1*DIGIT with optional surrounding whitespace, at most
 * LZ_HTTP_BODY_MAX); no Content-Length: no body. Refused
 * (LZ_HTTP_FRAME_INVALID): a second Content-Length (even an equal one), any
 * other value, any Transfer-Encoding header (a chunked body's end cannot
 * be found without decoding it: such requests are not relayed), and
 * everything lz_http_request_host refuses. LZ_HTTP_FRAME_NEED_MORE while the
 * header block is incomplete. The same parse as lz_http_request_host, so
 * both agree on where the header block ends. lz-namecheck lets exactly
 * these bytes through on a port-80 connection (docs/network.md "Reused
 * connections"). */
typedef enum lz_http_frame_result {
    LZ_HTTP_FRAME_NEED_MORE = 0, /* the header block is not all here yet */
    LZ_HTTP_FRAME_OK,            /* *header_len and *body_len are set */
    LZ_HTTP_FRAME_INVALID,
} lz_http_frame_result;

lz_http_frame_result lz_http_request_frame(const unsigned char *buf, size_t len, size_t *header_len,
                                           uint64_t *body_len);

const char *lz_hello_result_text(lz_hello_result r);

#endif
