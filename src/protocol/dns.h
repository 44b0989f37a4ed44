/* SPDX-License-Identifier: Apache-2.0
 *
 * DNS messages, as far as the Network Sidecar's responder needs them
 * (issue 25; docs/network.md "Egress by host name"): a bounded decoder of
 * the sandbox's queries and of the upstream resolvers' responses (both
 * untrusted), and an encoder of the answers the responder gives. The
 * responder never relays upstream bytes in strict mode: it decodes what it
 * needs and encodes a fresh answer from that.
 *
 * Bounds: a message is at most LZ_DNS_MSG_MAX bytes (TCP's limit); a name
 * at most 255 octets in wire form and 127 labels; a compression pointer
 * must point strictly backwards (no loops, no forward references) and at
 * most LZ_DNS_MAX_POINTERS are followed per name; every count field is
 * checked against the bytes that remain. Decoders never read outside
 * [buf, buf + len), never allocate, and are fuzzed (tests/fuzz/fuzz_dns.c).
 * libc only (linked into the protocol library). Every decision in detail
 * (what is believed, the text form, truncation): dns.c's first comment and
 * docs/dns-decoder.md.
 */
#ifndef LAZARET_PROTOCOL_DNS_H
#define LAZARET_PROTOCOL_DNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LZ_DNS_MSG_MAX 65535
#define LZ_DNS_UDP_MAX 512       /* answers to a query without EDNS */
#define LZ_DNS_EDNS_MAX 1232     /* what the responder advertises and honours */
#define LZ_DNS_NAME_TEXT_MAX 253 /* presentation form, no trailing dot */
#define LZ_DNS_MAX_POINTERS 16
#define LZ_DNS_MAX_CHAIN 8 /* CNAMEs followed from the question's name */
#define LZ_DNS_MAX_ADDRS 32

enum {
    LZ_DNS_TYPE_A = 1,
    LZ_DNS_TYPE_NS = 2,
    LZ_DNS_TYPE_CNAME = 5,
    LZ_DNS_TYPE_SOA = 6,
    LZ_DNS_TYPE_PTR = 12,
    LZ_DNS_TYPE_MX = 15,
    LZ_DNS_TYPE_TXT = 16,
    LZ_DNS_TYPE_AAAA = 28,
    LZ_DNS_TYPE_SRV = 33,
    LZ_DNS_TYPE_OPT = 41,
    LZ_DNS_TYPE_SVCB = 64,
    LZ_DNS_TYPE_HTTPS = 65,
    LZ_DNS_TYPE_ANY = 255,
};
enum { LZ_DNS_CLASS_IN = 1 };
enum {
    LZ_DNS_RCODE_NOERROR = 0,
    LZ_DNS_RCODE_FORMERR = 1,
    LZ_DNS_RCODE_SERVFAIL = 2,
    LZ_DNS_RCODE_NXDOMAIN = 3,
    LZ_DNS_RCODE_NOTIMP = 4,
    LZ_DNS_RCODE_REFUSED = 5,
};

/* Why a decoder refused a message (for the denial log and tests). */
typedef enum lz_dns_error {
    LZ_DNS_OK = 0,
    LZ_DNS_E_SHORT,     /* ends inside a field */
    LZ_DNS_E_NAME,      /* a name breaks the wire rules (length, pointer, loop) */
    LZ_DNS_E_NOT_QUERY, /* a query decoder got a response, or opcode != QUERY */
    LZ_DNS_E_QDCOUNT,   /* not exactly one question */
    LZ_DNS_E_MISMATCH,  /* a response's id or question is not the query's */
    LZ_DNS_E_TRAILING,  /* bytes after the last record of a query */
    LZ_DNS_E_TOO_MANY,  /* more records than the bounds above */
    LZ_DNS_E_TRUNCATED, /* TC set: ask again over TCP */
} lz_dns_error;

typedef struct lz_dns_query {
    uint16_t id;
    bool rd; /* recursion desired, echoed */
    char name[LZ_DNS_NAME_TEXT_MAX +
              2]; /* presentation form as sent (case kept), no trailing dot; "" for the root */
    uint16_t qtype, qclass;
    bool edns;              /* an OPT record came with it */
    uint16_t edns_udp_size; /* its advertised size (0 without EDNS) */
} lz_dns_query;

/* Decode a query: header (QR = 0, opcode QUERY), exactly one question, and
 * at most one additional OPT record; no answer or authority records. The
 * name is checked against the wire rules only (the host grammar is
 * lz_host_name_canonical's). */
lz_dns_error lz_dns_query_decode(const uint8_t *buf, size_t len, lz_dns_query *q);

/* What an upstream response says about the query's name: the CNAME chain
 * that starts at the question's name (each link's target, in order) and the
 * A records owned by the chain's last name. Records that are not on that
 * chain (other owners, other classes, other types) are ignored, never
 * believed: an upstream cannot plant addresses for other names. */
typedef struct lz_dns_answer {
    uint8_t rcode;
    bool authoritative;
    size_t n_chain;
    char chain[LZ_DNS_MAX_CHAIN]
              [LZ_DNS_NAME_TEXT_MAX + 2]; /* CNAME targets, lowercase, no trailing dot */
    size_t n_addrs;
    uint8_t addrs[LZ_DNS_MAX_ADDRS][4];
    uint32_t ttl; /* the smallest TTL of the chain's CNAMEs and of the A records */
} lz_dns_answer;

/* Decode an upstream response to q: QR = 1, same id, the same question
 * (name compared case-insensitively, type, class). A TC response gives
 * LZ_DNS_E_TRUNCATED (retry over TCP). A chain longer than
 * LZ_DNS_MAX_CHAIN, or more A records than LZ_DNS_MAX_ADDRS, is
 * LZ_DNS_E_TOO_MANY. */
lz_dns_error lz_dns_response_decode(const uint8_t *buf, size_t len, const lz_dns_query *q,
                                    lz_dns_answer *out);

/* Encode the query to send upstream for q (with id, RD set, one question,
 * an OPT record advertising LZ_DNS_EDNS_MAX). Returns its length, 0 when
 * cap is too small. */
size_t lz_dns_query_encode(const lz_dns_query *q, uint16_t id, uint8_t *buf, size_t cap);

/* Encode the responder's answer to q: rcode, and (NOERROR with ans != NULL)
 * the chain's CNAME records and ans's A records with TTL ttl; RA set, the
 * question echoed as received (its case kept), an OPT record when q had
 * one. Fits the answer into cap (the client's limit: 512, its EDNS size
 * up to LZ_DNS_EDNS_MAX, or 65535 over TCP), dropping A records and
 * setting TC when they do not fit. Returns its length, 0 when not even the
 * header and question fit. */
size_t lz_dns_answer_encode(const lz_dns_query *q, uint8_t rcode, const lz_dns_answer *ans,
                            uint32_t ttl, uint8_t *buf, size_t cap);

const char *
lz_dns_type_name(uint16_t qtype); /* "A", "TXT", ..., or "TYPE%u" (static buffer: not reentrant) */
const char *lz_dns_error_text(lz_dns_error e);

#endif
