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

#include <stddef.h>

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

/* HTTP/1.0 or 1.1: request line, then headers up to the empty line. Exactly
 * one Host header (two are LZ_HELLO_INVALID); name gets its value without
 * surrounding whitespace and without a ":port" suffix, as for TLS. A
 * request line with an absolute URI ("GET http://x/ HTTP/1.1") is
 * LZ_HELLO_INVALID (its authority would compete with Host). */
lz_hello_result lz_http_request_host(const unsigned char *buf, size_t len,
                                     char name[static LZ_HELLO_NAME_MAX], size_t *name_len);

const char *lz_hello_result_text(lz_hello_result r);

#endif
