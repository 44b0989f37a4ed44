/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests for src/protocol/dns.c, the Network Sidecar's DNS codecs
 * (the sandbox's queries and the upstream's responses are untrusted):
 *
 *  - a query as glibc's getaddrinfo sends it with EDNS ("options edns0"),
 *    and without; every refusal of the query decoder (a response, another
 *    opcode, zero or two questions, answer records, a non-OPT additional
 *    record, a byte more, every prefix);
 *  - an upstream answer with a CNAME chain written with compression, in
 *    order and out of order; only the chain's last name's A records of
 *    class IN are returned: an A record for another name in the same
 *    response (cache-poisoning style), for a name earlier in the chain, of
 *    class CH, and glue in the additional section are ignored (each with a
 *    control: the same record for the right owner is returned);
 *  - NXDOMAIN, TC (and a TC with a wrong id is a mismatch), wrong id, QR
 *    clear, different question, a question in another case accepted;
 *  - names: compression loops (to itself, label then back), forward
 *    pointers, pointers into the header, 16 pointers accepted and 17
 *    refused, 255-octet names accepted and 256 refused, 63-octet labels
 *    accepted and 64 refused, label types 0x40/0x80, labels holding '.',
 *    a space, a backslash or a control byte refused ('_' accepted);
 *  - counts larger than the message; a chain of 8 accepted and of 9 (or a
 *    loop) refused; 32 addresses accepted and 33 refused; TTLs: the
 *    smallest along the chain, top bit set counts as 0;
 *  - the encoders round-trip through the decoders; answers over the cap
 *    drop A records (then CNAMEs) and set TC; too small a cap gives 0.
 * A refused decode must leave its struct zeroed (checked after filling it
 * with 0xa5).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "protocol/dns.h"

/* ---- a message builder -------------------------------------------------- */

typedef struct msg {
    uint8_t b[LZ_DNS_MSG_MAX + 16];
    size_t n;
} msg;

static msg M; /* large: not on the stack */

static void raw(msg *m, const void *p, size_t n)
{
    assert_true(m->n + n <= sizeof(m->b));
    memcpy(m->b + m->n, p, n);
    m->n += n;
}

static void u8(msg *m, uint8_t v)
{
    raw(m, &v, 1);
}

static void u16(msg *m, uint16_t v)
{
    uint8_t p[2] = { (uint8_t) (v >> 8), (uint8_t) v };
    raw(m, p, 2);
}

static void u32(msg *m, uint32_t v)
{
    u16(m, (uint16_t) (v >> 16));
    u16(m, (uint16_t) v);
}

static void header(msg *m, uint16_t id, uint16_t flags, uint16_t qd, uint16_t an, uint16_t ns,
                   uint16_t ar)
{
    m->n = 0;
    u16(m, id);
    u16(m, flags);
    u16(m, qd);
    u16(m, an);
    u16(m, ns);
    u16(m, ar);
}

/* Labels of text, without the terminating root: follow with root() or
 * ptr(). Returns the offset where they start. */
static size_t labels(msg *m, const char *text)
{
    size_t at = m->n;
    while (*text) {
        const char *dot = strchr(text, '.');
        size_t l = dot ? (size_t) (dot - text) : strlen(text);
        u8(m, (uint8_t) l);
        raw(m, text, l);
        text += l + (dot ? 1 : 0);
    }
    return at;
}

static void root(msg *m)
{
    u8(m, 0);
}

static void ptr(msg *m, size_t target)
{
    u16(m, (uint16_t) (0xc000u | target));
}

static size_t name(msg *m, const char *text)
{
    size_t at = labels(m, text);
    root(m);
    return at;
}

static void question(msg *m, const char *text, uint16_t type)
{
    name(m, text);
    u16(m, type);
    u16(m, LZ_DNS_CLASS_IN);
}

/* type, class, ttl, rdlength after an owner name written by the caller */
static void rr_fixed(msg *m, uint16_t type, uint16_t klass, uint32_t ttl, uint16_t rdlen)
{
    u16(m, type);
    u16(m, klass);
    u32(m, ttl);
    u16(m, rdlen);
}

static void a_rdata(msg *m, uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
    uint8_t ip[4] = { a, b, c, d };
    raw(m, ip, 4);
}

/* An A record whose owner is a pointer. */
static void a_rr(msg *m, size_t owner, uint32_t ttl, uint8_t last)
{
    ptr(m, owner);
    rr_fixed(m, LZ_DNS_TYPE_A, LZ_DNS_CLASS_IN, ttl, 4);
    a_rdata(m, 192, 0, 2, last);
}

/* A CNAME record whose owner is a pointer and whose target is written in
 * full; returns the target's offset. */
static size_t cname_rr(msg *m, size_t owner, uint32_t ttl, const char *target)
{
    ptr(m, owner);
    rr_fixed(m, LZ_DNS_TYPE_CNAME, LZ_DNS_CLASS_IN, ttl, (uint16_t) (strlen(target) + 2));
    return name(m, target);
}

#define QNAME_AT 12

static lz_dns_query query_for(const char *text, uint16_t id)
{
    lz_dns_query q;
    memset(&q, 0, sizeof(q));
    q.id = id;
    q.rd = true;
    assert_true(strlen(text) < sizeof(q.name));
    memcpy(q.name, text, strlen(text) + 1);
    q.qtype = LZ_DNS_TYPE_A;
    q.qclass = LZ_DNS_CLASS_IN;
    return q;
}

static bool zeroed(const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return false;
    return true;
}

static lz_dns_error decode_query(const msg *m, lz_dns_query *q)
{
    memset(q, 0xa5, sizeof(*q));
    lz_dns_error e = lz_dns_query_decode(m->b, m->n, q);
    if (e != LZ_DNS_OK)
        assert_true(zeroed(q, sizeof(*q)));
    else
        assert_non_null(memchr(q->name, '\0', sizeof(q->name)));
    return e;
}

static lz_dns_answer ANS;

static lz_dns_error decode_response(const msg *m, const lz_dns_query *q)
{
    memset(&ANS, 0xa5, sizeof(ANS));
    lz_dns_error e = lz_dns_response_decode(m->b, m->n, q, &ANS);
    if (e != LZ_DNS_OK)
        assert_true(zeroed(&ANS, sizeof(ANS)));
    return e;
}

/* ---- queries ------------------------------------------------------------ */

/* What glibc 2.36's getaddrinfo("Example.COM") sends with "options edns0"
 * in resolv.conf: RD, one question, an OPT record advertising 1200 bytes. */
static void getaddrinfo_query(msg *m, uint16_t type)
{
    header(m, 0x3a7c, 0x0100, 1, 0, 0, 1);
    name(m, "Example.COM");
    u16(m, type);
    u16(m, LZ_DNS_CLASS_IN);
    root(m);
    rr_fixed(m, LZ_DNS_TYPE_OPT, 1200, 0, 0);
}

static void test_query_getaddrinfo_edns(void **state)
{
    (void) state;
    lz_dns_query q;
    getaddrinfo_query(&M, LZ_DNS_TYPE_A);
    assert_int_equal(decode_query(&M, &q), LZ_DNS_OK);
    assert_int_equal(q.id, 0x3a7c);
    assert_true(q.rd);
    assert_string_equal(q.name, "Example.COM"); /* case kept */
    assert_int_equal(q.qtype, LZ_DNS_TYPE_A);
    assert_int_equal(q.qclass, LZ_DNS_CLASS_IN);
    assert_true(q.edns);
    assert_int_equal(q.edns_udp_size, 1200);

    /* an OPT record with an option (a cookie, as dig sends) */
    header(&M, 7, 0x0120, 1, 0, 0, 1);
    question(&M, "a.example", LZ_DNS_TYPE_AAAA);
    root(&M);
    rr_fixed(&M, LZ_DNS_TYPE_OPT, 4096, 0, 12);
    u16(&M, 10);
    u16(&M, 8);
    raw(&M, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
    assert_int_equal(decode_query(&M, &q), LZ_DNS_OK);
    assert_int_equal(q.qtype, LZ_DNS_TYPE_AAAA);
    assert_int_equal(q.edns_udp_size, 4096);
}

static void test_query_without_edns(void **state)
{
    (void) state;
    lz_dns_query q;
    header(&M, 1, 0x0000, 1, 0, 0, 0);
    question(&M, "_ldap._tcp.example.org", LZ_DNS_TYPE_SRV);
    assert_int_equal(decode_query(&M, &q), LZ_DNS_OK);
    assert_false(q.rd);
    assert_false(q.edns);
    assert_int_equal(q.edns_udp_size, 0);
    assert_string_equal(q.name, "_ldap._tcp.example.org");
    /* the root */
    header(&M, 1, 0x0100, 1, 0, 0, 0);
    question(&M, "", LZ_DNS_TYPE_NS);
    assert_int_equal(decode_query(&M, &q), LZ_DNS_OK);
    assert_string_equal(q.name, "");
}

static void test_query_refusals(void **state)
{
    (void) state;
    lz_dns_query q;
    /* a response given to the query decoder */
    header(&M, 1, 0x8180, 1, 0, 0, 0);
    question(&M, "example.com", LZ_DNS_TYPE_A);
    assert_int_equal(decode_query(&M, &q), LZ_DNS_E_NOT_QUERY);
    /* opcode NOTIFY (4), and STATUS (2) */
    header(&M, 1, 0x2000, 1, 0, 0, 0);
    question(&M, "example.com", LZ_DNS_TYPE_SOA);
    assert_int_equal(decode_query(&M, &q), LZ_DNS_E_NOT_QUERY);
    header(&M, 1, 0x1000, 1, 0, 0, 0);
    question(&M, "example.com", LZ_DNS_TYPE_A);
    assert_int_equal(decode_query(&M, &q), LZ_DNS_E_NOT_QUERY);
    /* zero and two questions */
    header(&M, 1, 0x0100, 0, 0, 0, 0);
    assert_int_equal(decode_query(&M, &q), LZ_DNS_E_QDCOUNT);
    header(&M, 1, 0x0100, 2, 0, 0, 0);
    question(&M, "a.example", LZ_DNS_TYPE_A);
    question(&M, "b.example", LZ_DNS_TYPE_A);
    assert_int_equal(decode_query(&M, &q), LZ_DNS_E_QDCOUNT);
    /* an answer or authority record in a query */
    header(&M, 1, 0x0100, 1, 1, 0, 0);
    question(&M, "a.example", LZ_DNS_TYPE_A);
    a_rr(&M, QNAME_AT, 60, 1);
    assert_int_equal(decode_query(&M, &q), LZ_DNS_E_TOO_MANY);
    header(&M, 1, 0x0100, 1, 0, 1, 0);
    question(&M, "a.example", LZ_DNS_TYPE_A);
    a_rr(&M, QNAME_AT, 60, 1);
    assert_int_equal(decode_query(&M, &q), LZ_DNS_E_TOO_MANY);
    /* an additional record that is not OPT; two OPTs */
    header(&M, 1, 0x0100, 1, 0, 0, 1);
    question(&M, "a.example", LZ_DNS_TYPE_A);
    a_rr(&M, QNAME_AT, 60, 1);
    assert_int_equal(decode_query(&M, &q), LZ_DNS_E_TOO_MANY);
    header(&M, 1, 0x0100, 1, 0, 0, 2);
    question(&M, "a.example", LZ_DNS_TYPE_A);
    root(&M);
    rr_fixed(&M, LZ_DNS_TYPE_OPT, 1232, 0, 0);
    root(&M);
    rr_fixed(&M, LZ_DNS_TYPE_OPT, 1232, 0, 0);
    assert_int_equal(decode_query(&M, &q), LZ_DNS_E_TOO_MANY);
    /* OPT with an owner other than the root */
    header(&M, 1, 0x0100, 1, 0, 0, 1);
    question(&M, "a.example", LZ_DNS_TYPE_A);
    ptr(&M, QNAME_AT);
    rr_fixed(&M, LZ_DNS_TYPE_OPT, 1232, 0, 0);
    assert_int_equal(decode_query(&M, &q), LZ_DNS_E_TOO_MANY);
    /* OPT whose RDATA runs past the end */
    header(&M, 1, 0x0100, 1, 0, 0, 1);
    question(&M, "a.example", LZ_DNS_TYPE_A);
    root(&M);
    rr_fixed(&M, LZ_DNS_TYPE_OPT, 1232, 0, 4);
    u16(&M, 10);
    assert_int_equal(decode_query(&M, &q), LZ_DNS_E_SHORT);

    /* a byte after the message; every prefix of a valid query */
    getaddrinfo_query(&M, LZ_DNS_TYPE_A);
    size_t full = M.n;
    u8(&M, 0);
    assert_int_equal(decode_query(&M, &q), LZ_DNS_E_TRAILING);
    for (M.n = 0; M.n < full; M.n++) {
        lz_dns_error e = decode_query(&M, &q);
        /* without its OPT record a prefix may still be a valid query
         * (arcount says 1, so never here) */
        assert_int_not_equal(e, LZ_DNS_OK);
    }
    M.n = full;
    assert_int_equal(decode_query(&M, &q), LZ_DNS_OK);
}

static void test_query_names(void **state)
{
    (void) state;
    lz_dns_query q;
    char text[300];
    /* a question name that is a pointer: into the header, or to itself */
    header(&M, 1, 0x0100, 1, 0, 0, 0);
    ptr(&M, 0);
    u16(&M, 1);
    u16(&M, 1);
    assert_int_equal(decode_query(&M, &q), LZ_DNS_E_NAME);
    header(&M, 1, 0x0100, 1, 0, 0, 0);
    ptr(&M, QNAME_AT);
    u16(&M, 1);
    u16(&M, 1);
    assert_int_equal(decode_query(&M, &q), LZ_DNS_E_NAME);
    /* labels of 63 octets accepted, 64 refused */
    memset(text, 'a', 63);
    strcpy(text + 63, ".example");
    header(&M, 1, 0x0100, 1, 0, 0, 0);
    question(&M, text, LZ_DNS_TYPE_A);
    assert_int_equal(decode_query(&M, &q), LZ_DNS_OK);
    assert_string_equal(q.name, text);
    memset(text, 'a', 64);
    strcpy(text + 64, ".example");
    header(&M, 1, 0x0100, 1, 0, 0, 0);
    question(&M, text, LZ_DNS_TYPE_A);
    assert_int_equal(decode_query(&M, &q), LZ_DNS_E_NAME);
    /* 255 octets in wire form (253 characters) accepted, 256 refused:
     * 3 labels of 63 and one of 61 = 4 + 63*3 + 61 + 1 = 255 */
    char l63[64], l61[62], l62[63];
    memset(l63, 'b', 63);
    l63[63] = 0;
    memset(l61, 'c', 61);
    l61[61] = 0;
    memset(l62, 'c', 62);
    l62[62] = 0;
    snprintf(text, sizeof(text), "%s.%s.%s.%s", l63, l63, l63, l61);
    assert_int_equal(strlen(text), LZ_DNS_NAME_TEXT_MAX);
    header(&M, 1, 0x0100, 1, 0, 0, 0);
    question(&M, text, LZ_DNS_TYPE_A);
    assert_int_equal(decode_query(&M, &q), LZ_DNS_OK);
    assert_string_equal(q.name, text);
    snprintf(text, sizeof(text), "%s.%s.%s.%s", l63, l63, l63, l62);
    header(&M, 1, 0x0100, 1, 0, 0, 0);
    question(&M, text, LZ_DNS_TYPE_A);
    assert_int_equal(decode_query(&M, &q), LZ_DNS_E_NAME);
    /* label types 0x40 (extended) and 0x80 (reserved) */
    static const uint8_t types[] = { 0x41, 0x80, 0xbf };
    for (size_t i = 0; i < sizeof(types); i++) {
        header(&M, 1, 0x0100, 1, 0, 0, 0);
        u8(&M, types[i]);
        raw(&M, "abcdefgh", 8);
        root(&M);
        u16(&M, 1);
        u16(&M, 1);
        assert_int_equal(decode_query(&M, &q), LZ_DNS_E_NAME);
    }
    /* label bytes that would make the text form read as another name
     * (or print a control byte): refused; '_' and '-' accepted */
    static const char *bad[] = { "a.b", "a b", "a\\b", "a\x01", "a\x7f", "a\xc3\xa9", "a\tb" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        header(&M, 1, 0x0100, 1, 0, 0, 0);
        u8(&M, (uint8_t) strlen(bad[i]));
        raw(&M, bad[i], strlen(bad[i]));
        name(&M, "example");
        u16(&M, 1);
        u16(&M, 1);
        assert_int_equal(decode_query(&M, &q), LZ_DNS_E_NAME);
    }
    header(&M, 1, 0x0100, 1, 0, 0, 0);
    question(&M, "_a-b.example", LZ_DNS_TYPE_A);
    assert_int_equal(decode_query(&M, &q), LZ_DNS_OK);
    /* a NUL inside a label */
    header(&M, 1, 0x0100, 1, 0, 0, 0);
    u8(&M, 3);
    raw(&M, "a\0b", 3);
    root(&M);
    u16(&M, 1);
    u16(&M, 1);
    assert_int_equal(decode_query(&M, &q), LZ_DNS_E_NAME);
    /* a name that runs past the end */
    header(&M, 1, 0x0100, 1, 0, 0, 0);
    u8(&M, 10);
    raw(&M, "abc", 3);
    assert_int_equal(decode_query(&M, &q), LZ_DNS_E_SHORT);
}

/* ---- responses ---------------------------------------------------------- */

/* The answer a recursive resolver gives for www.example.com (asked as
 * "www.Example.COM"): a CNAME to cdn.example.net, which is a CNAME to
 * edge.cdn.example.net (written as "edge" + a pointer), two A records,
 * plus records that must not be believed. Written the way BIND and
 * Unbound compress. */
static void chain_answer(msg *m, uint16_t id, bool in_order)
{
    header(m, id, 0x8180, 1, 0, 1, 1);
    question(m, "www.example.com", LZ_DNS_TYPE_A);
    size_t n_an = 0;
    size_t cdn, edge;
    if (in_order) {
        cdn = cname_rr(m, QNAME_AT, 300, "cdn.example.net");
        n_an++;
        ptr(m, cdn);
        rr_fixed(m, LZ_DNS_TYPE_CNAME, LZ_DNS_CLASS_IN, 60, 7);
        edge = labels(m, "edge");
        ptr(m, cdn);
        n_an++;
    } else {
        /* the second link first: its owner is written in full */
        size_t owner = name(m, "cdn.example.net");
        cdn = owner;
        rr_fixed(m, LZ_DNS_TYPE_CNAME, LZ_DNS_CLASS_IN, 60, 7);
        edge = labels(m, "edge");
        ptr(m, cdn);
        n_an++;
        ptr(m, QNAME_AT);
        rr_fixed(m, LZ_DNS_TYPE_CNAME, LZ_DNS_CLASS_IN, 300, 2);
        ptr(m, cdn);
        n_an++;
    }
    a_rr(m, edge, 120, 10);
    a_rr(m, edge, 90, 11);
    n_an += 2;
    /* poison: an A record for another name, for the question's name (not
     * the chain's end), of class CH, and an AAAA for the chain's end */
    name(m, "bank.example.org");
    rr_fixed(m, LZ_DNS_TYPE_A, LZ_DNS_CLASS_IN, 86400, 4);
    a_rdata(m, 203, 0, 113, 66);
    a_rr(m, QNAME_AT, 86400, 99);
    ptr(m, edge);
    rr_fixed(m, LZ_DNS_TYPE_A, 3 /* CH */, 86400, 4);
    a_rdata(m, 203, 0, 113, 67);
    ptr(m, edge);
    rr_fixed(m, LZ_DNS_TYPE_AAAA, LZ_DNS_CLASS_IN, 86400, 16);
    raw(m, "\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\1", 16);
    n_an += 4;
    m->b[7] = (uint8_t) n_an;
    /* authority: NS; additional: glue A for the chain's end */
    ptr(m, cdn + 4); /* "example.net" */
    rr_fixed(m, LZ_DNS_TYPE_NS, LZ_DNS_CLASS_IN, 3600, 6);
    labels(m, "ns1");
    ptr(m, cdn + 4);
    ptr(m, edge);
    rr_fixed(m, LZ_DNS_TYPE_A, LZ_DNS_CLASS_IN, 3600, 4);
    a_rdata(m, 198, 51, 100, 1);
}

static void test_response_chain(void **state)
{
    (void) state;
    lz_dns_query q = query_for("www.Example.COM", 0x1234);
    for (int order = 0; order < 2; order++) {
        chain_answer(&M, 0x1234, order == 0);
        assert_int_equal(decode_response(&M, &q), LZ_DNS_OK);
        assert_int_equal(ANS.rcode, LZ_DNS_RCODE_NOERROR);
        assert_false(ANS.authoritative);
        assert_int_equal(ANS.n_chain, 2);
        assert_string_equal(ANS.chain[0], "cdn.example.net");
        assert_string_equal(ANS.chain[1], "edge.cdn.example.net");
        assert_int_equal(ANS.n_addrs, 2);
        assert_memory_equal(ANS.addrs[0], "\xc0\x00\x02\x0a", 4);
        assert_memory_equal(ANS.addrs[1], "\xc0\x00\x02\x0b", 4);
        assert_int_equal(ANS.ttl, 60);
    }
}

/* The control for the poisoning cases: each ignored record is returned
 * once its owner is the name asked. */
static void test_response_other_owners_ignored(void **state)
{
    (void) state;
    /* asked for bank.example.org directly: its A record is believed */
    lz_dns_query q = query_for("bank.example.org", 9);
    header(&M, 9, 0x8180, 1, 2, 0, 0);
    question(&M, "bank.example.org", LZ_DNS_TYPE_A);
    a_rr(&M, QNAME_AT, 30, 66);
    /* and a record for another name in the same response is not */
    name(&M, "www.example.com");
    rr_fixed(&M, LZ_DNS_TYPE_A, LZ_DNS_CLASS_IN, 30, 4);
    a_rdata(&M, 10, 0, 0, 1);
    assert_int_equal(decode_response(&M, &q), LZ_DNS_OK);
    assert_int_equal(ANS.n_addrs, 1);
    assert_memory_equal(ANS.addrs[0], "\xc0\x00\x02\x42", 4);

    /* the name asked with no CNAME: the A record owned by it is believed,
     * the CH one and the one in the additional section are not */
    q = query_for("edge.cdn.example.net", 9);
    header(&M, 9, 0x8180, 1, 2, 0, 1);
    question(&M, "edge.cdn.example.net", LZ_DNS_TYPE_A);
    ptr(&M, QNAME_AT);
    rr_fixed(&M, LZ_DNS_TYPE_A, 3, 30, 4);
    a_rdata(&M, 10, 0, 0, 2);
    a_rr(&M, QNAME_AT, 30, 7);
    a_rr(&M, QNAME_AT, 30, 8);
    assert_int_equal(decode_response(&M, &q), LZ_DNS_OK);
    assert_int_equal(ANS.n_addrs, 1);
    assert_memory_equal(ANS.addrs[0], "\xc0\x00\x02\x07", 4);
    /* the same CH record as class IN: believed (the control) */
    M.b[QNAME_AT + 22 + 4 + 5] = LZ_DNS_CLASS_IN; /* the record's class */
    assert_int_equal(decode_response(&M, &q), LZ_DNS_OK);
    assert_int_equal(ANS.n_addrs, 2);
    assert_memory_equal(ANS.addrs[0], "\x0a\x00\x00\x02", 4);

    /* a CNAME for another owner does not start the chain */
    q = query_for("a.example", 3);
    header(&M, 3, 0x8180, 1, 2, 0, 0);
    question(&M, "a.example", LZ_DNS_TYPE_A);
    name(&M, "b.example");
    rr_fixed(&M, LZ_DNS_TYPE_CNAME, LZ_DNS_CLASS_IN, 30, 2);
    ptr(&M, QNAME_AT);
    a_rr(&M, QNAME_AT, 30, 1);
    assert_int_equal(decode_response(&M, &q), LZ_DNS_OK);
    assert_int_equal(ANS.n_chain, 0);
    assert_int_equal(ANS.n_addrs, 1);
}

static void test_response_nxdomain_and_ttl(void **state)
{
    (void) state;
    lz_dns_query q = query_for("nope.example.com", 77);
    header(&M, 77, 0x8583, 1, 0, 1, 0); /* AA, NXDOMAIN, the zone's SOA */
    question(&M, "nope.example.com", LZ_DNS_TYPE_A);
    ptr(&M, QNAME_AT + 5); /* example.com */
    rr_fixed(&M, LZ_DNS_TYPE_SOA, LZ_DNS_CLASS_IN, 900, 2 + 2 + 20);
    ptr(&M, QNAME_AT + 5);
    ptr(&M, QNAME_AT + 5);
    for (int i = 0; i < 5; i++)
        u32(&M, 3600);
    assert_int_equal(decode_response(&M, &q), LZ_DNS_OK);
    assert_int_equal(ANS.rcode, LZ_DNS_RCODE_NXDOMAIN);
    assert_true(ANS.authoritative);
    assert_int_equal(ANS.n_chain, 0);
    assert_int_equal(ANS.n_addrs, 0);
    assert_int_equal(ANS.ttl, 0);

    /* TTL: the smallest; a TTL with the top bit set counts as 0 */
    q = query_for("t.example", 5);
    header(&M, 5, 0x8180, 1, 2, 0, 0);
    question(&M, "t.example", LZ_DNS_TYPE_A);
    a_rr(&M, QNAME_AT, 0x7fffffffu, 1);
    a_rr(&M, QNAME_AT, 500, 2);
    assert_int_equal(decode_response(&M, &q), LZ_DNS_OK);
    assert_int_equal(ANS.ttl, 500);
    header(&M, 5, 0x8180, 1, 2, 0, 0);
    question(&M, "t.example", LZ_DNS_TYPE_A);
    a_rr(&M, QNAME_AT, 0x80000001u, 1);
    a_rr(&M, QNAME_AT, 500, 2);
    assert_int_equal(decode_response(&M, &q), LZ_DNS_OK);
    assert_int_equal(ANS.ttl, 0);
}

static void test_response_truncated(void **state)
{
    (void) state;
    lz_dns_query q = query_for("big.example", 0xbeef);
    header(&M, 0xbeef, 0x8380, 1, 0, 0, 0); /* TC */
    question(&M, "big.example", LZ_DNS_TYPE_A);
    assert_int_equal(decode_response(&M, &q), LZ_DNS_E_TRUNCATED);
    /* a TC with only a header */
    header(&M, 0xbeef, 0x8380, 0, 0, 0, 0);
    assert_int_equal(decode_response(&M, &q), LZ_DNS_E_TRUNCATED);
    /* a TC from someone who does not know the id makes no TCP retry */
    header(&M, 0xbeee, 0x8380, 1, 0, 0, 0);
    question(&M, "big.example", LZ_DNS_TYPE_A);
    assert_int_equal(decode_response(&M, &q), LZ_DNS_E_MISMATCH);
    /* nor a TC for another question */
    header(&M, 0xbeef, 0x8380, 1, 0, 0, 0);
    question(&M, "other.example", LZ_DNS_TYPE_A);
    assert_int_equal(decode_response(&M, &q), LZ_DNS_E_MISMATCH);
}

static void test_response_mismatch(void **state)
{
    (void) state;
    lz_dns_query q = query_for("www.Example.COM", 0x1234);
    chain_answer(&M, 0x1234, true);
    assert_int_equal(decode_response(&M, &q), LZ_DNS_OK); /* the control */
    chain_answer(&M, 0x1235, true);
    assert_int_equal(decode_response(&M, &q), LZ_DNS_E_MISMATCH);
    chain_answer(&M, 0x1234, true);
    M.b[2] &= 0x7f; /* QR clear */
    assert_int_equal(decode_response(&M, &q), LZ_DNS_E_MISMATCH);
    chain_answer(&M, 0x1234, true);
    M.b[2] |= 0x10; /* opcode 2 */
    assert_int_equal(decode_response(&M, &q), LZ_DNS_E_MISMATCH);
    /* another question: name, type, class */
    lz_dns_query other = query_for("www.example.co", 0x1234);
    assert_int_equal(decode_response(&M, &other), LZ_DNS_E_MISMATCH);
    chain_answer(&M, 0x1234, true);
    other = query_for("ww.example.com", 0x1234);
    assert_int_equal(decode_response(&M, &other), LZ_DNS_E_MISMATCH);
    other = query_for("www.example.com.evil", 0x1234);
    assert_int_equal(decode_response(&M, &other), LZ_DNS_E_MISMATCH);
    other = q;
    other.qtype = LZ_DNS_TYPE_AAAA;
    assert_int_equal(decode_response(&M, &other), LZ_DNS_E_MISMATCH);
    other = q;
    other.qclass = 3;
    assert_int_equal(decode_response(&M, &other), LZ_DNS_E_MISMATCH);
    /* the question in yet another case is the same question */
    other = query_for("WWW.EXAMPLE.COM", 0x1234);
    assert_int_equal(decode_response(&M, &other), LZ_DNS_OK);
    assert_int_equal(ANS.n_addrs, 2);
    /* zero or two questions */
    header(&M, 0x1234, 0x8180, 0, 0, 0, 0);
    assert_int_equal(decode_response(&M, &q), LZ_DNS_E_QDCOUNT);
    header(&M, 0x1234, 0x8180, 2, 0, 0, 0);
    question(&M, "www.example.com", LZ_DNS_TYPE_A);
    question(&M, "www.example.com", LZ_DNS_TYPE_A);
    assert_int_equal(decode_response(&M, &q), LZ_DNS_E_QDCOUNT);
}

static void test_response_counts(void **state)
{
    (void) state;
    lz_dns_query q = query_for("www.example.com", 0x1234);
    chain_answer(&M, 0x1234, true);
    size_t full = M.n;
    /* every count one larger than the records present */
    for (int field = 6; field <= 10; field += 2) {
        chain_answer(&M, 0x1234, true);
        M.b[field + 1]++;
        assert_int_equal(decode_response(&M, &q), LZ_DNS_E_SHORT);
        /* and as large as a count can be */
        M.b[field] = 0xff;
        M.b[field + 1] = 0xff;
        assert_int_equal(decode_response(&M, &q), LZ_DNS_E_SHORT);
    }
    /* every prefix of the response is refused */
    chain_answer(&M, 0x1234, true);
    for (M.n = 0; M.n < full; M.n++)
        assert_int_not_equal(decode_response(&M, &q), LZ_DNS_OK);
    /* an A record of the chain's end whose RDATA is not 4 bytes */
    q = query_for("a.example", 1);
    header(&M, 1, 0x8180, 1, 1, 0, 0);
    question(&M, "a.example", LZ_DNS_TYPE_A);
    ptr(&M, QNAME_AT);
    rr_fixed(&M, LZ_DNS_TYPE_A, LZ_DNS_CLASS_IN, 30, 5);
    raw(&M, "\1\2\3\4\5", 5);
    assert_int_equal(decode_response(&M, &q), LZ_DNS_E_SHORT);
    /* a CNAME whose RDATA holds more than its name */
    header(&M, 1, 0x8180, 1, 1, 0, 0);
    question(&M, "a.example", LZ_DNS_TYPE_A);
    ptr(&M, QNAME_AT);
    rr_fixed(&M, LZ_DNS_TYPE_CNAME, LZ_DNS_CLASS_IN, 30, 4);
    name(&M, "b");
    u8(&M, 0);
    assert_int_equal(decode_response(&M, &q), LZ_DNS_E_NAME);
    /* a CNAME whose target runs past its RDATA into the next record */
    header(&M, 1, 0x8180, 1, 1, 0, 0);
    question(&M, "a.example", LZ_DNS_TYPE_A);
    ptr(&M, QNAME_AT);
    rr_fixed(&M, LZ_DNS_TYPE_CNAME, LZ_DNS_CLASS_IN, 30, 2);
    name(&M, "bb");
    assert_int_not_equal(decode_response(&M, &q), LZ_DNS_OK);
}

/* A response to "a.example" whose answer is a chain of n links
 * c1.example, c2.example, ... and one A record for the last. */
static void chain_of(msg *m, size_t n, bool loop)
{
    header(m, 2, 0x8180, 1, (uint16_t) (n + 1), 0, 0);
    question(m, "a.example", LZ_DNS_TYPE_A);
    size_t owner = QNAME_AT;
    for (size_t i = 1; i <= n; i++) {
        char target[32];
        if (loop && i == n)
            snprintf(target, sizeof(target), "a.example");
        else
            snprintf(target, sizeof(target), "c%zu.example", i);
        owner = cname_rr(m, owner, 100, target);
    }
    a_rr(m, owner, 100, 1);
}

static void test_response_bounds(void **state)
{
    (void) state;
    lz_dns_query q = query_for("a.example", 2);
    chain_of(&M, LZ_DNS_MAX_CHAIN, false);
    assert_int_equal(decode_response(&M, &q), LZ_DNS_OK);
    assert_int_equal(ANS.n_chain, LZ_DNS_MAX_CHAIN);
    assert_string_equal(ANS.chain[LZ_DNS_MAX_CHAIN - 1], "c8.example");
    assert_int_equal(ANS.n_addrs, 1);
    chain_of(&M, LZ_DNS_MAX_CHAIN + 1, false);
    assert_int_equal(decode_response(&M, &q), LZ_DNS_E_TOO_MANY);
    /* a loop: a -> c1 -> c2 -> a -> ... */
    chain_of(&M, 3, true);
    assert_int_equal(decode_response(&M, &q), LZ_DNS_E_TOO_MANY);
    /* a name that is its own CNAME */
    chain_of(&M, 1, true);
    assert_int_equal(decode_response(&M, &q), LZ_DNS_E_TOO_MANY);

    /* 32 addresses accepted, 33 refused */
    for (int n = LZ_DNS_MAX_ADDRS; n <= LZ_DNS_MAX_ADDRS + 1; n++) {
        header(&M, 2, 0x8180, 1, (uint16_t) n, 0, 0);
        question(&M, "a.example", LZ_DNS_TYPE_A);
        for (int i = 0; i < n; i++)
            a_rr(&M, QNAME_AT, 60, (uint8_t) i);
        lz_dns_error e = decode_response(&M, &q);
        if (n == LZ_DNS_MAX_ADDRS) {
            assert_int_equal(e, LZ_DNS_OK);
            assert_int_equal(ANS.n_addrs, LZ_DNS_MAX_ADDRS);
            assert_memory_equal(ANS.addrs[31], "\xc0\x00\x02\x1f", 4);
        } else {
            assert_int_equal(e, LZ_DNS_E_TOO_MANY);
        }
    }
}

/* A response whose single A record's owner is "x" + ptr -> "x" + ptr ->
 * ... k pointers deep down to the question's name. */
static void pointer_depth(msg *m, size_t k)
{
    header(m, 4, 0x8180, 1, 1, 0, 0);
    question(m, "a.example", LZ_DNS_TYPE_A);
    /* the stepping stones ("x" + a pointer to the previous one) sit in
     * the RDATA of a TXT record owned by the question's name, which the
     * decoder walks over without reading */
    size_t rdata_len = k * 4;
    ptr(m, QNAME_AT);
    rr_fixed(m, LZ_DNS_TYPE_TXT, LZ_DNS_CLASS_IN, 60, (uint16_t) rdata_len);
    size_t prev = QNAME_AT;
    for (size_t i = 0; i + 1 < k; i++) {
        size_t here = m->n;
        u8(m, 1);
        u8(m, 'x');
        ptr(m, prev);
        prev = here;
    }
    /* pad the RDATA to its declared length */
    for (size_t i = 0; i < 4; i++)
        u8(m, 0);
    m->b[7] = 2;
    ptr(m, prev); /* owner: k pointers down to the question's name */
    rr_fixed(m, LZ_DNS_TYPE_A, LZ_DNS_CLASS_IN, 60, 4);
    a_rdata(m, 192, 0, 2, 1);
}

static void test_response_pointers(void **state)
{
    (void) state;
    lz_dns_query q = query_for("a.example", 4);
    /* 16 pointers followed (the control), 17 refused: every record's
     * owner is walked, also those that are not believed (the A record's
     * owner is x.x. ... .a.example, not the question) */
    pointer_depth(&M, LZ_DNS_MAX_POINTERS);
    assert_int_equal(decode_response(&M, &q), LZ_DNS_OK);
    assert_int_equal(ANS.n_addrs, 0);
    pointer_depth(&M, LZ_DNS_MAX_POINTERS + 1);
    assert_int_equal(decode_response(&M, &q), LZ_DNS_E_NAME);

    /* a pointer to itself */
    header(&M, 4, 0x8180, 1, 1, 0, 0);
    question(&M, "a.example", LZ_DNS_TYPE_A);
    ptr(&M, M.n);
    rr_fixed(&M, LZ_DNS_TYPE_A, LZ_DNS_CLASS_IN, 60, 4);
    a_rdata(&M, 1, 2, 3, 4);
    assert_int_equal(decode_response(&M, &q), LZ_DNS_E_NAME);
    /* a label, then a pointer back to that label: a loop through a
     * pointer that points before itself */
    header(&M, 4, 0x8180, 1, 1, 0, 0);
    question(&M, "a.example", LZ_DNS_TYPE_A);
    size_t at = labels(&M, "loop");
    ptr(&M, at);
    rr_fixed(&M, LZ_DNS_TYPE_A, LZ_DNS_CLASS_IN, 60, 4);
    a_rdata(&M, 1, 2, 3, 4);
    assert_int_equal(decode_response(&M, &q), LZ_DNS_E_NAME);
    /* a forward pointer (to a valid name later in the message) */
    header(&M, 4, 0x8180, 1, 1, 0, 0);
    question(&M, "a.example", LZ_DNS_TYPE_A);
    ptr(&M, M.n + 2 + 10 + 4);
    rr_fixed(&M, LZ_DNS_TYPE_A, LZ_DNS_CLASS_IN, 60, 4);
    a_rdata(&M, 1, 2, 3, 4);
    name(&M, "a.example");
    assert_int_equal(decode_response(&M, &q), LZ_DNS_E_NAME);
    /* a second hop that points forward: the owner is a pointer to a
     * pointer (in a TXT record's RDATA) to a name after both; the control
     * is the same second hop pointing back to the question */
    for (int forward = 1; forward >= 0; forward--) {
        header(&M, 4, 0x8180, 1, 2, 0, 0);
        question(&M, "a.example", LZ_DNS_TYPE_A);
        ptr(&M, QNAME_AT);
        rr_fixed(&M, LZ_DNS_TYPE_TXT, LZ_DNS_CLASS_IN, 60, 2);
        size_t hop = M.n;
        size_t later = hop + 2 + 2 + 10 + 4; /* just after the A record */
        ptr(&M, forward ? later : QNAME_AT);
        ptr(&M, hop);
        rr_fixed(&M, LZ_DNS_TYPE_A, LZ_DNS_CLASS_IN, 60, 4);
        a_rdata(&M, 1, 2, 3, 4);
        assert_int_equal(M.n, later);
        name(&M, "a.example"); /* trailing bytes, tolerated */
        if (forward) {
            assert_int_equal(decode_response(&M, &q), LZ_DNS_E_NAME);
        } else {
            assert_int_equal(decode_response(&M, &q), LZ_DNS_OK);
            assert_int_equal(ANS.n_addrs, 1);
        }
    }
    /* a loop through a later hop: "x" + pointer to the "x" label itself,
     * reached through a first pointer (refused at the second pointer, not
     * after 16 rounds) */
    header(&M, 4, 0x8180, 1, 2, 0, 0);
    question(&M, "a.example", LZ_DNS_TYPE_A);
    ptr(&M, QNAME_AT);
    rr_fixed(&M, LZ_DNS_TYPE_TXT, LZ_DNS_CLASS_IN, 60, 4);
    size_t x = labels(&M, "x");
    ptr(&M, x);
    ptr(&M, x);
    rr_fixed(&M, LZ_DNS_TYPE_A, LZ_DNS_CLASS_IN, 60, 4);
    a_rdata(&M, 1, 2, 3, 4);
    assert_int_equal(decode_response(&M, &q), LZ_DNS_E_NAME);
    /* a pointer into the header (bytes 4..: 00 01 00 01 ... read as
     * labels) */
    for (size_t target = 0; target < QNAME_AT; target++) {
        header(&M, 4, 0x8180, 1, 1, 0, 0);
        question(&M, "a.example", LZ_DNS_TYPE_A);
        ptr(&M, target);
        rr_fixed(&M, LZ_DNS_TYPE_A, LZ_DNS_CLASS_IN, 60, 4);
        a_rdata(&M, 1, 2, 3, 4);
        assert_int_equal(decode_response(&M, &q), LZ_DNS_E_NAME);
    }
    /* the control: the same record with a pointer to the question */
    header(&M, 4, 0x8180, 1, 1, 0, 0);
    question(&M, "a.example", LZ_DNS_TYPE_A);
    ptr(&M, QNAME_AT);
    rr_fixed(&M, LZ_DNS_TYPE_A, LZ_DNS_CLASS_IN, 60, 4);
    a_rdata(&M, 1, 2, 3, 4);
    assert_int_equal(decode_response(&M, &q), LZ_DNS_OK);
    assert_int_equal(ANS.n_addrs, 1);
    /* a name that reaches 256 octets only through a pointer */
    char l63[64];
    memset(l63, 'd', 63);
    l63[63] = 0;
    char big[256];
    snprintf(big, sizeof(big), "%s.%s.%s.%s", l63, l63, l63, "a.example");
    size_t big_wire = strlen(big) + 2; /* 203 octets */
    lz_dns_query bigq = query_for(big, 4);
    for (size_t total = 256; total >= 255; total--) {
        char label[64];
        size_t l = total - big_wire - 1;
        memset(label, 'f', l);
        label[l] = 0;
        header(&M, 4, 0x8180, 1, 1, 0, 0);
        question(&M, big, LZ_DNS_TYPE_A);
        labels(&M, label);
        ptr(&M, QNAME_AT);
        rr_fixed(&M, LZ_DNS_TYPE_A, LZ_DNS_CLASS_IN, 60, 4);
        a_rdata(&M, 1, 2, 3, 4);
        /* 256 octets refused; the control, 255, accepted */
        assert_int_equal(decode_response(&M, &bigq), total == 256 ? LZ_DNS_E_NAME : LZ_DNS_OK);
    }
}

/* ---- encoders ----------------------------------------------------------- */

static uint8_t OUT[LZ_DNS_MSG_MAX];

static void test_query_encode_round_trip(void **state)
{
    (void) state;
    lz_dns_query q = query_for("Api.Example.test", 1), back;
    q.qtype = LZ_DNS_TYPE_HTTPS;
    size_t n = lz_dns_query_encode(&q, 0xabcd, OUT, sizeof(OUT));
    assert_true(n > 0);
    memcpy(M.b, OUT, n);
    M.n = n;
    assert_int_equal(decode_query(&M, &back), LZ_DNS_OK);
    assert_int_equal(back.id, 0xabcd);
    assert_true(back.rd);
    assert_string_equal(back.name, "Api.Example.test");
    assert_int_equal(back.qtype, LZ_DNS_TYPE_HTTPS);
    assert_int_equal(back.qclass, LZ_DNS_CLASS_IN);
    assert_true(back.edns);
    assert_int_equal(back.edns_udp_size, LZ_DNS_EDNS_MAX);
    /* every cap below its length gives 0 */
    for (size_t cap = 0; cap < n; cap++)
        assert_int_equal(lz_dns_query_encode(&q, 1, OUT, cap), 0);
    /* a text that is no name */
    static const char *bad[] = { "a..b", ".a", "a.", "." };
    for (size_t i = 0; i < 4; i++) {
        q = query_for(bad[i], 1);
        assert_int_equal(lz_dns_query_encode(&q, 1, OUT, sizeof(OUT)), 0);
    }
    q = query_for("", 1);
    assert_int_equal(lz_dns_query_encode(&q, 1, OUT, sizeof(OUT)), 12 + 1 + 4 + 11);
}

static void test_answer_encode_round_trip(void **state)
{
    (void) state;
    lz_dns_query q = query_for("WWW.example.com", 0x4242);
    q.edns = true;
    q.edns_udp_size = 1232;
    lz_dns_answer ans;
    memset(&ans, 0, sizeof(ans));
    ans.n_chain = 2;
    strcpy(ans.chain[0], "cdn.example.net");
    strcpy(ans.chain[1], "edge.cdn.example.net");
    ans.n_addrs = 3;
    for (int i = 0; i < 3; i++)
        memcpy(ans.addrs[i], (uint8_t[4]){ 198, 51, 100, (uint8_t) i }, 4);
    size_t n = lz_dns_answer_encode(&q, LZ_DNS_RCODE_NOERROR, &ans, 45, OUT, 512);
    assert_true(n > 0 && n <= 512);
    memcpy(M.b, OUT, n);
    M.n = n;
    assert_int_equal(M.b[2] & 0x82, 0x80); /* QR, no TC */
    assert_int_equal(M.b[3] & 0x80, 0x80); /* RA */
    assert_int_equal(decode_response(&M, &q), LZ_DNS_OK);
    assert_int_equal(ANS.n_chain, 2);
    assert_string_equal(ANS.chain[0], "cdn.example.net");
    assert_string_equal(ANS.chain[1], "edge.cdn.example.net");
    assert_int_equal(ANS.n_addrs, 3);
    assert_memory_equal(ANS.addrs, ans.addrs, 3 * 4);
    assert_int_equal(ANS.ttl, 45);
    /* the question echoed with its case, the OPT record present */
    assert_memory_equal(M.b + 13, "WWW", 3);
    assert_int_equal(M.b[11], 1);

    /* NXDOMAIN: no records even when ans is given */
    n = lz_dns_answer_encode(&q, LZ_DNS_RCODE_NXDOMAIN, &ans, 45, OUT, 512);
    memcpy(M.b, OUT, n);
    M.n = n;
    assert_int_equal(decode_response(&M, &q), LZ_DNS_OK);
    assert_int_equal(ANS.rcode, LZ_DNS_RCODE_NXDOMAIN);
    assert_int_equal(ANS.n_chain + ANS.n_addrs, 0);
    /* NOERROR with no answer (AAAA, TXT, ...) */
    n = lz_dns_answer_encode(&q, LZ_DNS_RCODE_NOERROR, NULL, 0, OUT, 512);
    assert_int_equal(n, 12 + 17 + 4 + 11);
    /* no OPT for a query without EDNS */
    q.edns = false;
    n = lz_dns_answer_encode(&q, LZ_DNS_RCODE_NOERROR, NULL, 0, OUT, 512);
    assert_int_equal(n, 12 + 17 + 4);
    /* too small a cap for header and question */
    assert_int_equal(lz_dns_answer_encode(&q, 0, &ans, 1, OUT, 12 + 17 + 3), 0);
    assert_int_equal(lz_dns_answer_encode(&q, 0, NULL, 1, OUT, 12 + 17 + 4), 12 + 17 + 4);
}

static void test_answer_encode_truncates(void **state)
{
    (void) state;
    lz_dns_query q = query_for("many.example", 9);
    lz_dns_answer ans;
    memset(&ans, 0, sizeof(ans));
    ans.n_addrs = LZ_DNS_MAX_ADDRS;
    for (int i = 0; i < LZ_DNS_MAX_ADDRS; i++)
        memcpy(ans.addrs[i], (uint8_t[4]){ 192, 0, 2, (uint8_t) i }, 4);
    /* 12 + 18 (question) + 32 * 16 = 542 > 512: some A records dropped */
    size_t n = lz_dns_answer_encode(&q, 0, &ans, 60, OUT, LZ_DNS_UDP_MAX);
    assert_true(n <= LZ_DNS_UDP_MAX);
    assert_int_equal(OUT[2] & 0x02, 0x02);
    size_t an = (size_t) (OUT[6] << 8 | OUT[7]);
    assert_int_equal(an, (512 - 30) / 16);
    memcpy(M.b, OUT, n);
    M.n = n;
    assert_int_equal(decode_response(&M, &q), LZ_DNS_E_TRUNCATED);
    /* with the TC bit cleared the records present decode */
    M.b[2] &= (uint8_t) ~0x02;
    assert_int_equal(decode_response(&M, &q), LZ_DNS_OK);
    assert_int_equal(ANS.n_addrs, an);
    /* with room (EDNS size, TCP) everything fits and TC is clear */
    n = lz_dns_answer_encode(&q, 0, &ans, 60, OUT, LZ_DNS_EDNS_MAX);
    assert_int_equal(OUT[2] & 0x02, 0);
    memcpy(M.b, OUT, n);
    M.n = n;
    assert_int_equal(decode_response(&M, &q), LZ_DNS_OK);
    assert_int_equal(ANS.n_addrs, LZ_DNS_MAX_ADDRS);

    /* a chain of long names that does not fit in 512: TC, CNAMEs dropped
     * too, never a record cut in half */
    memset(&ans, 0, sizeof(ans));
    ans.n_chain = LZ_DNS_MAX_CHAIN;
    for (int i = 0; i < LZ_DNS_MAX_CHAIN; i++) {
        memset(ans.chain[i], 'a' + i, 63);
        snprintf(ans.chain[i] + 63, 20, ".long.example");
    }
    ans.n_addrs = 1;
    n = lz_dns_answer_encode(&q, 0, &ans, 60, OUT, LZ_DNS_UDP_MAX);
    assert_true(n <= LZ_DNS_UDP_MAX);
    assert_int_equal(OUT[2] & 0x02, 0x02);
    an = (size_t) (OUT[6] << 8 | OUT[7]);
    assert_true(an < LZ_DNS_MAX_CHAIN);
    memcpy(M.b, OUT, n);
    M.n = n;
    M.b[2] &= (uint8_t) ~0x02;
    assert_int_equal(decode_response(&M, &q), LZ_DNS_OK);
    assert_int_equal(ANS.n_chain, an);
    assert_int_equal(ANS.n_addrs, 0);
    n = lz_dns_answer_encode(&q, 0, &ans, 60, OUT, LZ_DNS_MSG_MAX);
    memcpy(M.b, OUT, n);
    M.n = n;
    assert_int_equal(decode_response(&M, &q), LZ_DNS_OK);
    assert_int_equal(ANS.n_chain, LZ_DNS_MAX_CHAIN);
    assert_int_equal(ANS.n_addrs, 1);
}

static void test_names_for_logs(void **state)
{
    (void) state;
    assert_string_equal(lz_dns_type_name(LZ_DNS_TYPE_A), "A");
    assert_string_equal(lz_dns_type_name(LZ_DNS_TYPE_AAAA), "AAAA");
    assert_string_equal(lz_dns_type_name(LZ_DNS_TYPE_TXT), "TXT");
    assert_string_equal(lz_dns_type_name(LZ_DNS_TYPE_HTTPS), "HTTPS");
    assert_string_equal(lz_dns_type_name(LZ_DNS_TYPE_ANY), "ANY");
    assert_string_equal(lz_dns_type_name(99), "TYPE99");
    assert_string_equal(lz_dns_type_name(65535), "TYPE65535");
    for (int i = LZ_DNS_OK; i <= LZ_DNS_E_TRUNCATED; i++) {
        const char *t = lz_dns_error_text((lz_dns_error) i);
        assert_true(strlen(t) > 1);
        for (int j = LZ_DNS_OK; j < i; j++)
            assert_string_not_equal(t, lz_dns_error_text((lz_dns_error) j));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_query_getaddrinfo_edns),
        cmocka_unit_test(test_query_without_edns),
        cmocka_unit_test(test_query_refusals),
        cmocka_unit_test(test_query_names),
        cmocka_unit_test(test_response_chain),
        cmocka_unit_test(test_response_other_owners_ignored),
        cmocka_unit_test(test_response_nxdomain_and_ttl),
        cmocka_unit_test(test_response_truncated),
        cmocka_unit_test(test_response_mismatch),
        cmocka_unit_test(test_response_counts),
        cmocka_unit_test(test_response_bounds),
        cmocka_unit_test(test_response_pointers),
        cmocka_unit_test(test_query_encode_round_trip),
        cmocka_unit_test(test_answer_encode_round_trip),
        cmocka_unit_test(test_answer_encode_truncates),
        cmocka_unit_test(test_names_for_logs),
    };
    return cmocka_run_group_tests_name("test_dns", tests, NULL, NULL);
}
