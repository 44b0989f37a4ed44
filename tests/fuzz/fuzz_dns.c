/* SPDX-License-Identifier: Apache-2.0
 *
 * libFuzzer target for the Network Sidecar's DNS codecs
 * (src/protocol/dns.c): the sandbox's queries and the upstream resolvers'
 * responses are untrusted. An input is
 *     u16 QLEN (big-endian) | QLEN bytes: a query | the rest: a response
 * (inputs shorter than 2 bytes, or whose QLEN runs past the end, are given
 * whole to the query decoder). The query is decoded; when it decodes, the
 * rest is decoded as the upstream's response to it (the seeds are real
 * query/response pairs, so mutations explore the response's records with
 * the question matching). The whole input is also decoded as a query.
 *
 * Invariants checked (a violation aborts, which libFuzzer records as a
 * crash):
 *  - a refused decode leaves its struct zeroed;
 *  - every name returned (the query's, each CNAME target) is
 *    NUL-terminated inside its array, at most 253 characters, made of
 *    labels of 1..63 bytes in 0x21..0x7e with no '.', '\\' in them (so its
 *    text form reads as exactly one name); CNAME targets are lowercase;
 *  - counts within bounds (chain <= 8, addresses <= 32), a TTL never has
 *    its top bit, and is 0 when nothing was returned;
 *  - encode(decode(x)) decodes to the same fields: the query re-encoded
 *    for upstream decodes to the same name, type and class (with RD, EDNS
 *    1232); the answer re-encoded by the responder (no cap, then the
 *    client's 512 bytes) decodes against the query to the same rcode,
 *    chain, addresses and TTL, or, when TC had to be set, to
 *    LZ_DNS_E_TRUNCATED, and its records are a prefix of the full ones.
 *
 * Run: build-dir/tests/fuzz/fuzz_dns -dict=tests/fuzz/fuzz_dns.dict
 *          -max_total_time=180 NEW_CORPUS_DIR tests/fuzz/corpus/fuzz_dns
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/dns.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_NAME "fuzz_dns"
#include "fuzz_check.h"

static uint8_t wire[LZ_DNS_MSG_MAX];
static lz_dns_answer ans, again;

/* Checked here independently of dns.c. */
static void check_name(const char *name, size_t cap, bool lowercase)
{
    const char *nul = memchr(name, '\0', cap);
    CHECK(nul != NULL);
    size_t n = (size_t) (nul - name);
    CHECK(n <= LZ_DNS_NAME_TEXT_MAX);
    if (n == 0)
        return; /* the root */
    size_t label = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || name[i] == '.') {
            CHECK(label >= 1 && label <= 63);
            label = 0;
            continue;
        }
        unsigned char c = (unsigned char) name[i];
        CHECK(c > 0x20 && c < 0x7f && c != '\\');
        if (lowercase)
            CHECK(!(c >= 'A' && c <= 'Z'));
        label++;
    }
}

static void check_answer(const lz_dns_answer *a)
{
    CHECK(a->n_chain <= LZ_DNS_MAX_CHAIN);
    CHECK(a->n_addrs <= LZ_DNS_MAX_ADDRS);
    CHECK(a->rcode <= 15);
    CHECK((a->ttl & 0x80000000u) == 0);
    if (a->n_chain == 0 && a->n_addrs == 0)
        CHECK(a->ttl == 0);
    for (size_t i = 0; i < a->n_chain; i++)
        check_name(a->chain[i], sizeof(a->chain[i]), true);
}

static bool same_records(const lz_dns_answer *a, const lz_dns_answer *b)
{
    if (a->n_chain != b->n_chain || a->n_addrs != b->n_addrs)
        return false;
    for (size_t i = 0; i < a->n_chain; i++)
        if (strcmp(a->chain[i], b->chain[i]) != 0)
            return false;
    return memcmp(a->addrs, b->addrs, a->n_addrs * 4) == 0;
}

/* The records of b are the first ones of a (what TC dropped was at the
 * end). */
static bool prefix_records(const lz_dns_answer *a, const lz_dns_answer *b)
{
    if (b->n_chain > a->n_chain || b->n_addrs > a->n_addrs)
        return false;
    if (b->n_addrs && b->n_chain != a->n_chain)
        return false;
    for (size_t i = 0; i < b->n_chain; i++)
        if (strcmp(a->chain[i], b->chain[i]) != 0)
            return false;
    return memcmp(a->addrs, b->addrs, b->n_addrs * 4) == 0;
}

static bool query_decodes(const uint8_t *buf, size_t len, lz_dns_query *q)
{
    memset(q, 0x5a, sizeof(*q));
    lz_dns_error e = lz_dns_query_decode(buf, len, q);
    CHECK(lz_dns_error_text(e) != NULL);
    if (e != LZ_DNS_OK) {
        CHECK(zeroed(q, sizeof(*q)));
        return false;
    }
    check_name(q->name, sizeof(q->name), false);
    CHECK(q->edns || q->edns_udp_size == 0);
    CHECK(lz_dns_type_name(q->qtype) != NULL);
    /* re-encoded for upstream, it decodes to the same question */
    lz_dns_query back;
    size_t n = lz_dns_query_encode(q, (uint16_t) (q->id ^ 0x5555), wire, sizeof(wire));
    CHECK(n > 0);
    CHECK(lz_dns_query_decode(wire, n, &back) == LZ_DNS_OK);
    CHECK(back.id == (uint16_t) (q->id ^ 0x5555));
    CHECK(back.rd && back.edns && back.edns_udp_size == LZ_DNS_EDNS_MAX);
    CHECK(strcmp(back.name, q->name) == 0);
    CHECK(back.qtype == q->qtype && back.qclass == q->qclass);
    return true;
}

/* The responder's answer from a, re-decoded against q. */
static void check_reencoded(const lz_dns_query *q, const lz_dns_answer *a)
{
    size_t n = lz_dns_answer_encode(q, a->rcode, a, a->ttl, wire, sizeof(wire));
    CHECK(n > 0);
    memset(&again, 0x5a, sizeof(again));
    CHECK(lz_dns_response_decode(wire, n, q, &again) == LZ_DNS_OK);
    CHECK(again.rcode == a->rcode);
    if (a->rcode == LZ_DNS_RCODE_NOERROR) {
        CHECK(same_records(a, &again));
        CHECK(again.ttl == a->ttl);
    } else {
        CHECK(again.n_chain == 0 && again.n_addrs == 0);
    }
    /* within a client's 512 bytes: whole, or TC with the first records */
    n = lz_dns_answer_encode(q, a->rcode, a, a->ttl, wire, LZ_DNS_UDP_MAX);
    CHECK(n > 0 && n <= LZ_DNS_UDP_MAX);
    bool tc = (wire[2] & 0x02) != 0;
    lz_dns_error e = lz_dns_response_decode(wire, n, q, &again);
    if (!tc) {
        CHECK(e == LZ_DNS_OK);
        CHECK(a->rcode != LZ_DNS_RCODE_NOERROR || same_records(a, &again));
        return;
    }
    CHECK(e == LZ_DNS_E_TRUNCATED);
    wire[2] &= (uint8_t) ~0x02;
    CHECK(lz_dns_response_decode(wire, n, q, &again) == LZ_DNS_OK);
    CHECK(prefix_records(a, &again));
    CHECK(!same_records(a, &again));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > LZ_DNS_MSG_MAX + 2)
        return -1;
    lz_dns_query q;
    query_decodes(data, size, &q);
    if (size < 2)
        return 0;
    size_t qlen = (size_t) (data[0] << 8 | data[1]);
    if (qlen > size - 2 || !query_decodes(data + 2, qlen, &q))
        return 0;
    const uint8_t *resp = data + 2 + qlen;
    size_t resp_len = size - 2 - qlen;
    memset(&ans, 0x5a, sizeof(ans));
    lz_dns_error e = lz_dns_response_decode(resp, resp_len, &q, &ans);
    CHECK(lz_dns_error_text(e) != NULL);
    if (e != LZ_DNS_OK) {
        CHECK(zeroed(&ans, sizeof(ans)));
        return 0;
    }
    check_answer(&ans);
    check_reencoded(&q, &ans);
    return 0;
}
