/* SPDX-License-Identifier: Apache-2.0
 *
 * DNS messages for the Network Sidecar's responder (contract: dns.h;
 * decisions and the comparison with c-ares, ldns and libunbound:
 * docs/dns-decoder.md).
 *
 * Bounds and decisions, in one place:
 *  - a message is at most LZ_DNS_MSG_MAX bytes; every read is checked
 *    against the end of the message first;
 *  - a name: labels of 1..63 octets (label types 0x40 and 0x80 refused),
 *    at most 255 octets in wire form counting the length octets and the
 *    root, at most LZ_DNS_MAX_POINTERS compression pointers, each pointing
 *    strictly before the first byte of the name read so far (not only
 *    before itself: "label, pointer back to the label" loops too) and
 *    never into the 12-byte header. Targets that strictly decrease cannot
 *    loop, so no visited set is needed;
 *  - the text form escapes nothing: a label holding '.', '\\', a space or
 *    a byte outside 0x21..0x7e makes the name invalid (LZ_DNS_E_NAME) when
 *    the name is one we return or compare, so that no text form can read
 *    as a different name. Owner names of records we skip are checked
 *    against the wire rules only;
 *  - a query: QR = 0, opcode QUERY, exactly one question, no answer or
 *    authority records, at most one additional record and it must be OPT
 *    with the root as owner (anything else is LZ_DNS_E_TOO_MANY), no byte
 *    after it (LZ_DNS_E_TRAILING);
 *  - a response: same id, QR = 1, opcode QUERY (else LZ_DNS_E_MISMATCH),
 *    then TC (LZ_DNS_E_TRUNCATED, after the question was checked when
 *    there is one), exactly one question equal to the query's (name
 *    case-insensitively, type, class). Every record of every section is
 *    walked (names checked, RDATA inside the message); the counts are
 *    checked against the bytes left (11 bytes at least per record). Bytes
 *    after the last record are tolerated: nothing of them is used. Only
 *    the answer section is believed, and only the CNAME chain from the
 *    question's name and the A records (class IN, RDATA of 4 bytes) owned
 *    by its last name; a CNAME on the chain whose RDATA is not exactly one
 *    name, or an A record of that owner whose RDATA is not 4 bytes,
 *    refuses the message (LZ_DNS_E_NAME, LZ_DNS_E_SHORT). A second CNAME
 *    for a name already followed is ignored. TTLs with the top bit set
 *    count as 0 (RFC 2181 8).
 */
#include "protocol/dns.h"

#include <stdio.h>
#include <string.h>

#define HEADER_LEN 12
#define NAME_WIRE_MAX 255
#define LABEL_MAX 63
#define RR_FIXED 10 /* type, class, ttl, rdlength */
#define RR_MIN (1 + RR_FIXED)
#define FLAG_QR 0x8000u
#define FLAG_AA 0x0400u
#define FLAG_TC 0x0200u
#define FLAG_RD 0x0100u
#define FLAG_RA 0x0080u
#define OPCODE(flags) (((flags) >> 11) & 0xfu)

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t) ((p[0] << 8) | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
    return ((uint32_t) p[0] << 24) | ((uint32_t) p[1] << 16) | ((uint32_t) p[2] << 8) | p[3];
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t) (v >> 8);
    p[1] = (uint8_t) v;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t) (v >> 24);
    p[1] = (uint8_t) (v >> 16);
    p[2] = (uint8_t) (v >> 8);
    p[3] = (uint8_t) v;
}

static char ascii_lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char) (c - 'A' + 'a') : c;
}

static bool name_equal(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (ascii_lower(*a) != ascii_lower(*b))
            return false;
    return *a == *b;
}

static bool text_byte_ok(uint8_t c)
{
    return c > 0x20 && c < 0x7f && c != '.' && c != '\\';
}

/* Decode the name at off. *end gets the offset just after the name where
 * it stands (after its first pointer, or its terminating root label).
 * text (LZ_DNS_NAME_TEXT_MAX + 2 bytes) gets the presentation form, no
 * trailing dot, "" for the root; *printable says whether every label byte
 * may stand in it (when false, text holds '?' for the others and must not
 * be used as the name). */
static lz_dns_error name_decode(const uint8_t *buf, size_t len, size_t off, size_t *end, char *text,
                                bool *printable)
{
    size_t wire = 0, out = 0, pointers = 0;
    size_t lowest = off; /* where the bytes read so far begin */
    bool jumped = false;
    *printable = true;
    for (;;) {
        if (off >= len)
            return LZ_DNS_E_SHORT;
        uint8_t b = buf[off];
        if ((b & 0xc0) == 0xc0) {
            if (off + 1 >= len)
                return LZ_DNS_E_SHORT;
            size_t target = ((size_t) (b & 0x3f) << 8) | buf[off + 1];
            /* strictly backwards, before every byte of this name read so
             * far, and past the header: no loops, no forward references,
             * no header bytes read as a name */
            if (target >= lowest || target < HEADER_LEN || ++pointers > LZ_DNS_MAX_POINTERS)
                return LZ_DNS_E_NAME;
            if (!jumped)
                *end = off + 2;
            jumped = true;
            off = lowest = target;
            continue;
        }
        if (b & 0xc0) /* 0x40 (extended) and 0x80 (reserved) label types */
            return LZ_DNS_E_NAME;
        wire += 1u + b;
        if (wire > NAME_WIRE_MAX)
            return LZ_DNS_E_NAME;
        if (b == 0) {
            if (!jumped)
                *end = off + 1;
            text[out] = '\0';
            return LZ_DNS_OK;
        }
        if (off + 1 + b > len)
            return LZ_DNS_E_SHORT;
        if (out)
            text[out++] = '.';
        for (size_t i = 0; i < b; i++) {
            uint8_t c = buf[off + 1 + i];
            if (!text_byte_ok(c))
                *printable = false;
            /* wire <= 255 keeps out <= 253: each label adds its length plus
             * one separator, and the root's octet is not written */
            text[out++] = text_byte_ok(c) ? (char) c : '?';
        }
        off += 1u + b;
    }
}

static lz_dns_error name_decode_text(const uint8_t *buf, size_t len, size_t off, size_t *end,
                                     char *text)
{
    bool printable;
    lz_dns_error e = name_decode(buf, len, off, end, text, &printable);
    if (e == LZ_DNS_OK && !printable)
        return LZ_DNS_E_NAME;
    return e;
}

/* Write text (no trailing dot, "" for the root) in wire form, uncompressed.
 * Returns the bytes written, 0 when it is not a name (an empty label, a
 * label over 63 octets, over 255 octets) or does not fit in cap. */
static size_t name_encode(const char *text, uint8_t *buf, size_t cap)
{
    size_t n = strlen(text), at = 0;
    if (n == 0) {
        if (cap < 1)
            return 0;
        buf[0] = 0;
        return 1;
    }
    if (n + 2 > NAME_WIRE_MAX || n + 2 > cap)
        return 0;
    const char *label = text;
    for (;;) {
        const char *dot = strchr(label, '.');
        size_t l = dot ? (size_t) (dot - label) : strlen(label);
        if (l == 0 || l > LABEL_MAX)
            return 0;
        buf[at++] = (uint8_t) l;
        memcpy(buf + at, label, l);
        at += l;
        if (!dot)
            break;
        label = dot + 1;
    }
    buf[at++] = 0;
    return at;
}

typedef struct rr {
    size_t owner; /* offset of the owner name */
    uint16_t type, klass;
    uint32_t ttl;
    size_t rdata, rdlen; /* offset and length of RDATA */
    size_t next;         /* offset of the next record */
} rr;

static lz_dns_error rr_walk(const uint8_t *buf, size_t len, size_t off, rr *r)
{
    char text[LZ_DNS_NAME_TEXT_MAX + 2];
    bool printable;
    size_t end = 0;
    lz_dns_error e = name_decode(buf, len, off, &end, text, &printable);
    if (e != LZ_DNS_OK)
        return e;
    if (end + RR_FIXED > len)
        return LZ_DNS_E_SHORT;
    r->owner = off;
    r->type = get16(buf + end);
    r->klass = get16(buf + end + 2);
    r->ttl = get32(buf + end + 4);
    r->rdlen = get16(buf + end + 8);
    r->rdata = end + RR_FIXED;
    if (r->rdlen > len - r->rdata)
        return LZ_DNS_E_SHORT;
    r->next = r->rdata + r->rdlen;
    return LZ_DNS_OK;
}

/* Does the owner name of r read as name (ASCII case-insensitively)? */
static bool rr_owned_by(const uint8_t *buf, size_t len, const rr *r, const char *name)
{
    char text[LZ_DNS_NAME_TEXT_MAX + 2];
    bool printable;
    size_t end = 0;
    if (name_decode(buf, len, r->owner, &end, text, &printable) != LZ_DNS_OK || !printable)
        return false;
    return name_equal(text, name);
}

static uint32_t ttl_value(uint32_t ttl)
{
    return (ttl & 0x80000000u) ? 0 : ttl;
}

/* ---- queries ------------------------------------------------------------ */

static lz_dns_error query_decode(const uint8_t *buf, size_t len, lz_dns_query *q)
{
    if (len < HEADER_LEN)
        return LZ_DNS_E_SHORT;
    if (len > LZ_DNS_MSG_MAX)
        return LZ_DNS_E_TOO_MANY;
    uint16_t flags = get16(buf + 2);
    if ((flags & FLAG_QR) || OPCODE(flags) != 0)
        return LZ_DNS_E_NOT_QUERY;
    if (get16(buf + 4) != 1)
        return LZ_DNS_E_QDCOUNT;
    uint16_t ancount = get16(buf + 6), nscount = get16(buf + 8), arcount = get16(buf + 10);
    if (ancount || nscount || arcount > 1)
        return LZ_DNS_E_TOO_MANY;
    q->id = get16(buf);
    q->rd = (flags & FLAG_RD) != 0;
    size_t off = 0;
    lz_dns_error e = name_decode_text(buf, len, HEADER_LEN, &off, q->name);
    if (e != LZ_DNS_OK)
        return e;
    if (off + 4 > len)
        return LZ_DNS_E_SHORT;
    q->qtype = get16(buf + off);
    q->qclass = get16(buf + off + 2);
    off += 4;
    if (arcount) {
        rr r;
        e = rr_walk(buf, len, off, &r);
        if (e != LZ_DNS_OK)
            return e;
        /* the OPT pseudo-record: owner is the root (one zero octet) */
        if (r.type != LZ_DNS_TYPE_OPT || buf[r.owner] != 0)
            return LZ_DNS_E_TOO_MANY;
        q->edns = true;
        q->edns_udp_size = r.klass;
        off = r.next;
    }
    if (off != len)
        return LZ_DNS_E_TRAILING;
    return LZ_DNS_OK;
}

lz_dns_error lz_dns_query_decode(const uint8_t *buf, size_t len, lz_dns_query *q)
{
    memset(q, 0, sizeof(*q));
    lz_dns_error e = query_decode(buf, len, q);
    if (e != LZ_DNS_OK)
        memset(q, 0, sizeof(*q));
    return e;
}

/* The OPT record the responder writes: root owner, our UDP size, extended
 * rcode 0, version 0, no flags, no options. */
#define OPT_LEN 11
static void opt_write(uint8_t *p)
{
    p[0] = 0;
    put16(p + 1, LZ_DNS_TYPE_OPT);
    put16(p + 3, LZ_DNS_EDNS_MAX);
    put32(p + 5, 0);
    put16(p + 9, 0);
}

size_t lz_dns_query_encode(const lz_dns_query *q, uint16_t id, uint8_t *buf, size_t cap)
{
    if (cap < HEADER_LEN)
        return 0;
    put16(buf, id);
    put16(buf + 2, FLAG_RD);
    put16(buf + 4, 1);
    put16(buf + 6, 0);
    put16(buf + 8, 0);
    put16(buf + 10, 1);
    size_t n = name_encode(q->name, buf + HEADER_LEN, cap - HEADER_LEN);
    if (n == 0)
        return 0;
    size_t at = HEADER_LEN + n;
    if (cap - at < 4 + OPT_LEN)
        return 0;
    put16(buf + at, q->qtype);
    put16(buf + at + 2, q->qclass);
    at += 4;
    opt_write(buf + at);
    return at + OPT_LEN;
}

/* ---- responses ---------------------------------------------------------- */

/* Walk n records from *off, each checked; *off ends after the last. */
static lz_dns_error section_walk(const uint8_t *buf, size_t len, size_t *off, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        rr r;
        lz_dns_error e = rr_walk(buf, len, *off, &r);
        if (e != LZ_DNS_OK)
            return e;
        *off = r.next;
    }
    return LZ_DNS_OK;
}

/* One pass over the answer section at [start, after n records): follow
 * CNAMEs owned by the chain's current end (in the order they come, so a
 * chain written in order takes one pass). *progress says whether a link
 * was added. */
static lz_dns_error chain_pass(const uint8_t *buf, size_t len, size_t start, size_t n,
                               const lz_dns_query *q, lz_dns_answer *out, bool *progress)
{
    size_t off = start;
    *progress = false;
    for (size_t i = 0; i < n; i++) {
        rr r;
        lz_dns_error e = rr_walk(buf, len, off, &r);
        if (e != LZ_DNS_OK)
            return e;
        off = r.next;
        if (r.type != LZ_DNS_TYPE_CNAME || r.klass != LZ_DNS_CLASS_IN)
            continue;
        const char *current = out->n_chain ? out->chain[out->n_chain - 1] : q->name;
        if (!rr_owned_by(buf, len, &r, current))
            continue;
        if (out->n_chain == LZ_DNS_MAX_CHAIN)
            return LZ_DNS_E_TOO_MANY;
        char *target = out->chain[out->n_chain];
        size_t end = 0;
        e = name_decode_text(buf, len, r.rdata, &end, target);
        if (e != LZ_DNS_OK)
            return e == LZ_DNS_E_SHORT ? LZ_DNS_E_NAME : e;
        if (end != r.next) /* RDATA is exactly the one name */
            return LZ_DNS_E_NAME;
        for (char *c = target; *c; c++)
            *c = ascii_lower(*c);
        out->n_chain++;
        uint32_t ttl = ttl_value(r.ttl);
        if (ttl < out->ttl)
            out->ttl = ttl;
        *progress = true;
    }
    return LZ_DNS_OK;
}

static lz_dns_error addrs_pass(const uint8_t *buf, size_t len, size_t start, size_t n,
                               const lz_dns_query *q, lz_dns_answer *out)
{
    const char *owner = out->n_chain ? out->chain[out->n_chain - 1] : q->name;
    size_t off = start;
    for (size_t i = 0; i < n; i++) {
        rr r;
        lz_dns_error e = rr_walk(buf, len, off, &r);
        if (e != LZ_DNS_OK)
            return e;
        off = r.next;
        if (r.type != LZ_DNS_TYPE_A || r.klass != LZ_DNS_CLASS_IN ||
            !rr_owned_by(buf, len, &r, owner))
            continue;
        if (r.rdlen != 4)
            return LZ_DNS_E_SHORT;
        if (out->n_addrs == LZ_DNS_MAX_ADDRS)
            return LZ_DNS_E_TOO_MANY;
        memcpy(out->addrs[out->n_addrs++], buf + r.rdata, 4);
        uint32_t ttl = ttl_value(r.ttl);
        if (ttl < out->ttl)
            out->ttl = ttl;
    }
    return LZ_DNS_OK;
}

static lz_dns_error response_decode(const uint8_t *buf, size_t len, const lz_dns_query *q,
                                    lz_dns_answer *out)
{
    if (len < HEADER_LEN)
        return LZ_DNS_E_SHORT;
    if (len > LZ_DNS_MSG_MAX)
        return LZ_DNS_E_TOO_MANY;
    uint16_t flags = get16(buf + 2);
    if (get16(buf) != q->id || !(flags & FLAG_QR) || OPCODE(flags) != 0)
        return LZ_DNS_E_MISMATCH;
    uint16_t qdcount = get16(buf + 4);
    size_t counts[3] = { get16(buf + 6), get16(buf + 8), get16(buf + 10) };
    if (qdcount > 1)
        return LZ_DNS_E_QDCOUNT;
    if (qdcount == 0)
        return (flags & FLAG_TC) ? LZ_DNS_E_TRUNCATED : LZ_DNS_E_QDCOUNT;
    char name[LZ_DNS_NAME_TEXT_MAX + 2];
    size_t off = 0;
    lz_dns_error e = name_decode_text(buf, len, HEADER_LEN, &off, name);
    if (e != LZ_DNS_OK)
        return e;
    if (off + 4 > len)
        return LZ_DNS_E_SHORT;
    if (!name_equal(name, q->name) || get16(buf + off) != q->qtype ||
        get16(buf + off + 2) != q->qclass)
        return LZ_DNS_E_MISMATCH;
    if (flags & FLAG_TC)
        return LZ_DNS_E_TRUNCATED;
    off += 4;
    if ((counts[0] + counts[1] + counts[2]) > (len - off) / RR_MIN)
        return LZ_DNS_E_SHORT;
    size_t answers = off;
    e = section_walk(buf, len, &off, counts[0] + counts[1] + counts[2]);
    if (e != LZ_DNS_OK)
        return e;
    out->rcode = (uint8_t) (flags & 0xfu);
    out->authoritative = (flags & FLAG_AA) != 0;
    out->ttl = UINT32_MAX;
    bool progress = true;
    while (progress) {
        e = chain_pass(buf, len, answers, counts[0], q, out, &progress);
        if (e != LZ_DNS_OK)
            return e;
    }
    e = addrs_pass(buf, len, answers, counts[0], q, out);
    if (e != LZ_DNS_OK)
        return e;
    if (out->n_chain == 0 && out->n_addrs == 0)
        out->ttl = 0;
    return LZ_DNS_OK;
}

lz_dns_error lz_dns_response_decode(const uint8_t *buf, size_t len, const lz_dns_query *q,
                                    lz_dns_answer *out)
{
    memset(out, 0, sizeof(*out));
    lz_dns_error e = response_decode(buf, len, q, out);
    if (e != LZ_DNS_OK)
        memset(out, 0, sizeof(*out));
    return e;
}

/* ---- the responder's answers -------------------------------------------- */

/* A record whose owner is a compression pointer to owner_at. */
static size_t rr_write(uint8_t *p, size_t owner_at, uint16_t type, uint32_t ttl, uint16_t rdlen)
{
    put16(p, (uint16_t) (0xc000u | owner_at));
    put16(p + 2, type);
    put16(p + 4, LZ_DNS_CLASS_IN);
    put32(p + 6, ttl);
    put16(p + 10, rdlen);
    return 12;
}

size_t lz_dns_answer_encode(const lz_dns_query *q, uint8_t rcode, const lz_dns_answer *ans,
                            uint32_t ttl, uint8_t *buf, size_t cap)
{
    if (cap > LZ_DNS_MSG_MAX)
        cap = LZ_DNS_MSG_MAX;
    if (cap < HEADER_LEN)
        return 0;
    size_t qname = name_encode(q->name, buf + HEADER_LEN, cap - HEADER_LEN);
    if (qname == 0 || cap - HEADER_LEN - qname < 4)
        return 0;
    size_t at = HEADER_LEN + qname;
    put16(buf + at, q->qtype);
    put16(buf + at + 2, q->qclass);
    at += 4;
    /* room kept for the OPT record, when it fits at all */
    bool opt = q->edns && cap - at >= OPT_LEN;
    size_t room = cap - (opt ? OPT_LEN : 0);
    bool truncated = false;
    uint16_t ancount = 0;
    if (rcode == LZ_DNS_RCODE_NOERROR && ans) {
        size_t owner_at = HEADER_LEN; /* the question's name */
        size_t n_chain = ans->n_chain < LZ_DNS_MAX_CHAIN ? ans->n_chain : LZ_DNS_MAX_CHAIN;
        size_t n_addrs = ans->n_addrs < LZ_DNS_MAX_ADDRS ? ans->n_addrs : LZ_DNS_MAX_ADDRS;
        for (size_t i = 0; i < n_chain && !truncated; i++) {
            size_t target = 0;
            if (room - at > 12)
                target = name_encode(ans->chain[i], buf + at + 12, room - at - 12);
            if (target == 0) {
                truncated = true;
                break;
            }
            rr_write(buf + at, owner_at, LZ_DNS_TYPE_CNAME, ttl, (uint16_t) target);
            owner_at = at + 12;
            at += 12 + target;
            ancount++;
        }
        for (size_t i = 0; i < n_addrs && !truncated; i++) {
            if (room - at < 16) {
                truncated = true;
                break;
            }
            at += rr_write(buf + at, owner_at, LZ_DNS_TYPE_A, ttl, 4);
            memcpy(buf + at, ans->addrs[i], 4);
            at += 4;
            ancount++;
        }
    }
    put16(buf, q->id);
    uint16_t flags =
        FLAG_QR | FLAG_RA | (q->rd ? FLAG_RD : 0) | (truncated ? FLAG_TC : 0) | (rcode & 0xfu);
    put16(buf + 2, flags);
    put16(buf + 4, 1);
    put16(buf + 6, ancount);
    put16(buf + 8, 0);
    put16(buf + 10, opt ? 1 : 0);
    if (opt) {
        opt_write(buf + at);
        at += OPT_LEN;
    }
    return at;
}

/* ---- names for logs ----------------------------------------------------- */

const char *lz_dns_type_name(uint16_t qtype)
{
    switch (qtype) {
    case LZ_DNS_TYPE_A:
        return "A";
    case LZ_DNS_TYPE_NS:
        return "NS";
    case LZ_DNS_TYPE_CNAME:
        return "CNAME";
    case LZ_DNS_TYPE_SOA:
        return "SOA";
    case LZ_DNS_TYPE_PTR:
        return "PTR";
    case LZ_DNS_TYPE_MX:
        return "MX";
    case LZ_DNS_TYPE_TXT:
        return "TXT";
    case LZ_DNS_TYPE_AAAA:
        return "AAAA";
    case LZ_DNS_TYPE_SRV:
        return "SRV";
    case LZ_DNS_TYPE_OPT:
        return "OPT";
    case LZ_DNS_TYPE_SVCB:
        return "SVCB";
    case LZ_DNS_TYPE_HTTPS:
        return "HTTPS";
    case LZ_DNS_TYPE_ANY:
        return "ANY";
    default: {
        static char other[16];
        snprintf(other, sizeof(other), "TYPE%u", (unsigned) qtype);
        return other;
    }
    }
}

const char *lz_dns_error_text(lz_dns_error e)
{
    switch (e) {
    case LZ_DNS_OK:
        return "ok";
    case LZ_DNS_E_SHORT:
        return "message ends inside a field";
    case LZ_DNS_E_NAME:
        return "a name breaks the wire rules (length, label, compression pointer)";
    case LZ_DNS_E_NOT_QUERY:
        return "not a standard query";
    case LZ_DNS_E_QDCOUNT:
        return "not exactly one question";
    case LZ_DNS_E_MISMATCH:
        return "response does not answer the query (id, question or flags)";
    case LZ_DNS_E_TRAILING:
        return "bytes after the last record";
    case LZ_DNS_E_TOO_MANY:
        return "more records than allowed";
    case LZ_DNS_E_TRUNCATED:
        return "response truncated (TC): ask again over TCP";
    default:
        break;
    }
    return "unknown DNS decoding error";
}
