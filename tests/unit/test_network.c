/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests of src/config/network.c: the v1 IPv4 prefix language (strict
 * parsing, host-bit clearing, formatting, ordering, sorted deduplicated
 * lists, the RFC 1918 set), bare addresses, and the prefix verdict
 * (lz_ipv4_policy_decide; test_netpolicy.c also checks it against the
 * Kubernetes flattening on random policies), and the allowed ranges the
 * router's prefix_allowed set is built from (lz_ipv4_policy_allowed_ranges,
 * checked against lz_ipv4_policy_decide on random policies).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config/network.h"

static lz_ipv4_prefix P(uint8_t a, uint8_t b, uint8_t c, uint8_t d, uint8_t len)
{
    lz_ipv4_prefix p = { { a, b, c, d }, len };
    return p;
}

static void assert_prefix(const lz_ipv4_prefix *got, lz_ipv4_prefix want)
{
    if (memcmp(got->addr, want.addr, 4) != 0 || got->len != want.len)
        fail_msg("got %u.%u.%u.%u/%u, want %u.%u.%u.%u/%u", got->addr[0], got->addr[1],
                 got->addr[2], got->addr[3], got->len, want.addr[0], want.addr[1], want.addr[2],
                 want.addr[3], want.len);
}

/* ---- parsing ---------------------------------------------------------- */

static void test_parse_accepts(void **state)
{
    (void) state;
    static const struct {
        const char *in;
        lz_ipv4_prefix want;
    } ok[] = {
        { "192.0.2.0/24", { { 192, 0, 2, 0 }, 24 } },
        { "0.0.0.0/0", { { 0, 0, 0, 0 }, 0 } },
        { "255.255.255.255/32", { { 255, 255, 255, 255 }, 32 } },
        { "1.2.3.4/32", { { 1, 2, 3, 4 }, 32 } },
        { "10.0.0.0/8", { { 10, 0, 0, 0 }, 8 } },
        { "100.64.0.0/10", { { 100, 64, 0, 0 }, 10 } },
        { "0.0.0.0/32", { { 0, 0, 0, 0 }, 32 } },
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        lz_ipv4_prefix p;
        memset(&p, 0xaa, sizeof(p));
        if (!lz_ipv4_prefix_parse(ok[i].in, &p))
            fail_msg("'%s' should parse", ok[i].in);
        assert_prefix(&p, ok[i].want);
    }
}

static void test_parse_refuses(void **state)
{
    (void) state;
    static const char *const bad[] = {
        "",
        "1.2.3.4",  /* no prefix length */
        "1.2.3.4/", /* empty prefix length */
        "1.2.3.4/33",
        "1.2.3.4/100",
        "1.2.3.4/320",
        "01.2.3.4/8", /* leading zeros */
        "1.02.3.4/8",
        "1.2.3.004/8",
        "1.2.3.4/08",
        "1.2.3.4/00",
        "00.0.0.0/0",
        "256.0.0.0/8",
        "1.2.3.256/32",
        "1000.0.0.0/8",
        "-1.2.3.4/8",
        "1.2.3.4/-1",
        "+1.2.3.4/8",
        "1.2.3.4/+8",
        " 1.2.3.4/8",
        "1.2.3.4/8 ",
        "1.2.3.4 /8",
        "1.2.3.4/ 8",
        "1. 2.3.4/8",
        "::/0",
        "::1/128",
        "2001:db8::/32",
        "::ffff:1.2.3.4/128",
        "1.2.3.4/8x",
        "1.2.3.4/8/8",
        "1.2.3.4/8\n",
        "1.2.3.4.5/8",
        "1.2.3/8",
        "1.2/8",
        "1/8",
        "1..3.4/8",
        "1.2.3.4./8",
        ".1.2.3.4/8",
        "0x1.2.3.4/8",
        "1.2.3.4/0x8",
        "a.b.c.d/8",
        "1.2.3.4\\8",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        lz_ipv4_prefix p = P(9, 9, 9, 9, 9);
        if (lz_ipv4_prefix_parse(bad[i], &p))
            fail_msg("'%s' should be refused", bad[i]);
        /* The output is untouched on failure. */
        assert_prefix(&p, P(9, 9, 9, 9, 9));
    }
}

static void test_parse_clears_host_bits(void **state)
{
    (void) state;
    static const struct {
        const char *in;
        lz_ipv4_prefix want;
    } cases[] = {
        { "10.1.2.3/8", { { 10, 0, 0, 0 }, 8 } },
        { "255.255.255.255/0", { { 0, 0, 0, 0 }, 0 } },
        { "1.2.3.4/0", { { 0, 0, 0, 0 }, 0 } },
        { "1.2.3.4/32", { { 1, 2, 3, 4 }, 32 } },
        { "172.31.255.255/12", { { 172, 16, 0, 0 }, 12 } },
        { "192.168.7.9/16", { { 192, 168, 0, 0 }, 16 } },
        { "192.0.2.255/25", { { 192, 0, 2, 128 }, 25 } },
        { "255.255.255.255/31", { { 255, 255, 255, 254 }, 31 } },
        { "255.255.255.255/1", { { 128, 0, 0, 0 }, 1 } },
        { "255.255.255.255/9", { { 255, 128, 0, 0 }, 9 } },
        { "255.255.255.255/24", { { 255, 255, 255, 0 }, 24 } },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        lz_ipv4_prefix p;
        if (!lz_ipv4_prefix_parse(cases[i].in, &p))
            fail_msg("'%s' should parse", cases[i].in);
        assert_prefix(&p, cases[i].want);
    }
}

/* ---- format ----------------------------------------------------------- */

static void test_format(void **state)
{
    (void) state;
    char buf[32]; /* >= LZ_IPV4_PREFIX_BUFSZ */
    lz_ipv4_prefix p = P(255, 255, 255, 255, 32);
    lz_ipv4_prefix_format(&p, buf);
    assert_string_equal(buf, "255.255.255.255/32");
    p = P(0, 0, 0, 0, 0);
    lz_ipv4_prefix_format(&p, buf);
    assert_string_equal(buf, "0.0.0.0/0");
    p = P(10, 0, 0, 0, 8);
    lz_ipv4_prefix_format(&p, buf);
    assert_string_equal(buf, "10.0.0.0/8");

    /* Round trip: parse(format(parse(s))) is the normalized form. */
    lz_ipv4_prefix q;
    assert_true(lz_ipv4_prefix_parse("10.1.2.3/8", &q));
    lz_ipv4_prefix_format(&q, buf);
    assert_string_equal(buf, "10.0.0.0/8");
    lz_ipv4_prefix r;
    assert_true(lz_ipv4_prefix_parse(buf, &r));
    assert_int_equal(lz_ipv4_prefix_cmp(&q, &r), 0);
}

/* ---- ordering --------------------------------------------------------- */

static int sign(int v)
{
    return v < 0 ? -1 : v > 0;
}

static void test_cmp(void **state)
{
    (void) state;
    lz_ipv4_prefix a, b;

    a = P(10, 0, 0, 0, 8);
    b = P(10, 0, 0, 0, 8);
    assert_int_equal(lz_ipv4_prefix_cmp(&a, &b), 0);

    /* Address bytes first, unsigned and in network order. */
    a = P(9, 255, 255, 255, 32);
    b = P(10, 0, 0, 0, 8);
    assert_int_equal(sign(lz_ipv4_prefix_cmp(&a, &b)), -1);
    assert_int_equal(sign(lz_ipv4_prefix_cmp(&b, &a)), 1);

    a = P(127, 0, 0, 0, 8);
    b = P(128, 0, 0, 0, 1); /* unsigned: 128 > 127 */
    assert_int_equal(sign(lz_ipv4_prefix_cmp(&a, &b)), -1);

    a = P(1, 2, 3, 4, 32);
    b = P(1, 2, 3, 5, 0); /* last address byte beats a larger length */
    assert_int_equal(sign(lz_ipv4_prefix_cmp(&a, &b)), -1);

    /* Same address: the length decides. */
    a = P(10, 0, 0, 0, 8);
    b = P(10, 0, 0, 0, 16);
    assert_int_equal(sign(lz_ipv4_prefix_cmp(&a, &b)), -1);
    assert_int_equal(sign(lz_ipv4_prefix_cmp(&b, &a)), 1);

    a = P(0, 0, 0, 0, 0);
    b = P(0, 0, 0, 0, 32);
    assert_int_equal(sign(lz_ipv4_prefix_cmp(&a, &b)), -1);
}

/* ---- lists ------------------------------------------------------------ */

static void test_list_add_sorted_dedup(void **state)
{
    (void) state;
    lz_ipv4_prefix_list list = { 0 };
    static const char *const in[] = {
        "192.168.0.0/16", "10.0.0.0/8",     "10.1.2.3/8", "10.0.0.0/16",        "0.0.0.0/0",
        "1.2.3.4/0",      "192.168.1.1/16", "10.0.0.0/8", "255.255.255.255/32", "172.16.0.0/12",
    };
    for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
        lz_ipv4_prefix p;
        assert_true(lz_ipv4_prefix_parse(in[i], &p));
        lz_ipv4_list_add(&list, &p);
    }
    static const char *const want[] = {
        "0.0.0.0/0",     "10.0.0.0/8",     "10.0.0.0/16",
        "172.16.0.0/12", "192.168.0.0/16", "255.255.255.255/32",
    };
    assert_int_equal(list.count, sizeof(want) / sizeof(want[0]));
    for (size_t i = 0; i < list.count; i++) {
        char buf[32]; /* >= LZ_IPV4_PREFIX_BUFSZ */
        lz_ipv4_prefix_format(&list.items[i], buf);
        assert_string_equal(buf, want[i]);
        if (i > 0)
            assert_true(lz_ipv4_prefix_cmp(&list.items[i - 1], &list.items[i]) < 0);
    }

    lz_ipv4_prefix p = P(10, 0, 0, 0, 16);
    assert_true(lz_ipv4_list_contains(&list, &p));
    p = P(10, 0, 0, 0, 24);
    assert_false(lz_ipv4_list_contains(&list, &p));
    p = P(172, 16, 0, 0, 16);
    assert_false(lz_ipv4_list_contains(&list, &p));

    lz_ipv4_list_clear(&list);
    assert_int_equal(list.count, 0);
    assert_null(list.items);
    p = P(10, 0, 0, 0, 8);
    assert_false(lz_ipv4_list_contains(&list, &p));
    /* Clearing an empty list is fine. */
    lz_ipv4_list_clear(&list);
}

static void test_rfc1918(void **state)
{
    (void) state;
    static const char *const want[] = { "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16" };
    for (size_t i = 0; i < 3; i++) {
        char buf[32]; /* >= LZ_IPV4_PREFIX_BUFSZ */
        lz_ipv4_prefix_format(&lz_rfc1918_prefixes[i], buf);
        assert_string_equal(buf, want[i]);
    }
}

/* ---- containment and the never-routed ranges ------------------------- */

static void test_within_and_covers(void **state)
{
    (void) state;
    lz_ipv4_prefix a = P(10, 1, 2, 0, 24), b = P(10, 0, 0, 0, 8), all = P(0, 0, 0, 0, 0);
    assert_true(lz_ipv4_prefix_within(&a, &b));
    assert_false(lz_ipv4_prefix_within(&b, &a));
    assert_true(lz_ipv4_prefix_within(&a, &a));
    assert_true(lz_ipv4_prefix_within(&b, &all));
    assert_false(lz_ipv4_prefix_within(&all, &b));
    lz_ipv4_prefix c = P(11, 0, 0, 0, 24), d = P(10, 0, 0, 0, 7);
    assert_false(lz_ipv4_prefix_within(&c, &b));
    assert_true(lz_ipv4_prefix_within(&c, &d)); /* 10.0.0.0/7 holds 11.x */

    uint8_t raw[4] = { 198, 18, 7, 200 };
    lz_ipv4_prefix m = lz_ipv4_prefix_make(raw, 25);
    assert_prefix(&m, P(198, 18, 7, 128, 25));
    m = lz_ipv4_prefix_make(raw, 40); /* clamped to /32 */
    assert_prefix(&m, P(198, 18, 7, 200, 32));

    lz_ipv4_prefix_list l = { 0 };
    lz_ipv4_list_add(&l, &b);
    assert_true(lz_ipv4_list_covers(&l, &a));
    assert_false(lz_ipv4_list_covers(&l, &c));
    assert_false(lz_ipv4_list_covers(&l, &all));
    lz_ipv4_list_clear(&l);
    assert_false(lz_ipv4_list_covers(&l, &a));
}

static void test_never_routed(void **state)
{
    (void) state;
    static const char *const want[] = { "0.0.0.0/8",      "127.0.0.0/8", "100.96.0.0/24",
                                        "169.254.0.0/16", "224.0.0.0/4", "240.0.0.0/4" };
    assert_int_equal(LZ_IPV4_NEVER_ROUTED_COUNT, sizeof(want) / sizeof(want[0]));
    for (size_t i = 0; i < LZ_IPV4_NEVER_ROUTED_COUNT; i++) {
        char buf[32]; /* >= LZ_IPV4_PREFIX_BUFSZ */
        lz_ipv4_prefix_format(&lz_ipv4_never_routed[i].prefix, buf);
        assert_string_equal(buf, want[i]);
        assert_non_null(lz_ipv4_never_routed[i].what);
    }
    static const struct {
        const char *in;
        const char *range; /* NULL: not inside any */
    } cases[] = {
        { "127.0.0.1/32", "127.0.0.0/8" },
        { "127.255.0.0/16", "127.0.0.0/8" },
        { "0.0.0.0/32", "0.0.0.0/8" },
        { "0.255.255.255/32", "0.0.0.0/8" },
        { "169.254.77.0/30", "169.254.0.0/16" },
        { "169.254.77.2/32", "169.254.0.0/16" },
        { "100.96.0.2/32", "100.96.0.0/24" },
        { "100.96.0.0/25", "100.96.0.0/24" },
        { "224.0.0.1/32", "224.0.0.0/4" },
        { "239.255.255.255/32", "224.0.0.0/4" },
        { "255.255.255.255/32", "240.0.0.0/4" },
        { "240.0.0.0/4", "240.0.0.0/4" },
        /* containing or beside a range: not inside one */
        { "0.0.0.0/0", NULL },
        { "0.0.0.0/7", NULL },
        { "100.96.0.0/23", NULL },
        { "100.96.1.0/24", NULL },
        { "169.254.0.0/15", NULL },
        { "1.0.0.0/8", NULL },
        { "126.255.255.255/32", NULL },
        { "128.0.0.0/8", NULL },
        { "223.255.255.255/32", NULL },
        { "224.0.0.0/3", NULL },
        { "198.18.0.1/32", NULL },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        lz_ipv4_prefix p;
        assert_true(lz_ipv4_prefix_parse(cases[i].in, &p));
        const lz_ipv4_reserved *r = lz_ipv4_never_routed_holding(&p);
        if (!cases[i].range) {
            if (r)
                fail_msg("%s: unexpectedly inside a never-routed range", cases[i].in);
            continue;
        }
        if (!r)
            fail_msg("%s: should be inside %s", cases[i].in, cases[i].range);
        char buf[32]; /* >= LZ_IPV4_PREFIX_BUFSZ */
        lz_ipv4_prefix_format(&r->prefix, buf);
        assert_string_equal(buf, cases[i].range);
    }
}

/* ---- bare addresses ---------------------------------------------------- */

static void test_addr_parse(void **state)
{
    (void) state;
    uint8_t a[4] = { 9, 9, 9, 9 };
    assert_true(lz_ipv4_addr_parse("203.0.113.53", a));
    assert_memory_equal(a, ((uint8_t[]){ 203, 0, 113, 53 }), 4);
    assert_true(lz_ipv4_addr_parse("0.0.0.0", a));
    assert_true(lz_ipv4_addr_parse("255.255.255.255", a));
    assert_memory_equal(a, ((uint8_t[]){ 255, 255, 255, 255 }), 4);
    static const char *const bad[] = {
        "",         "1.2.3",    "1.2.3.4.5",  "1.2.3.4/32", "01.2.3.4", "1.2.3.256",
        "1.2.3.4 ", " 1.2.3.4", "1.2.3.4:53", "0x1.2.3.4",  "1..3.4",   "::1",
        "1.2.3.-4", "1.2.3.+4", "1.2.3.4.",   "1234.2.3.4", "a.b.c.d",  NULL,
    };
    for (const char *const *b = bad; *b; b++) {
        uint8_t keep[4] = { 7, 7, 7, 7 };
        if (lz_ipv4_addr_parse(*b, keep))
            fail_msg("'%s' accepted", *b);
        assert_memory_equal(keep, ((uint8_t[]){ 7, 7, 7, 7 }), 4); /* untouched */
    }
}

/* ---- the prefix verdict ----------------------------------------------- */

static lz_ipv4_prefix pfx(const char *s)
{
    lz_ipv4_prefix p;
    if (!lz_ipv4_prefix_parse(s, &p))
        fail_msg("bad prefix %s", s);
    return p;
}

static void decide_expect(const lz_ipv4_prefix_list *allow, const lz_ipv4_prefix_list *deny,
                          const char *addr, lz_prefix_verdict want, const char *rule)
{
    uint8_t a[4];
    assert_true(lz_ipv4_addr_parse(addr, a));
    const lz_ipv4_prefix *by = (const lz_ipv4_prefix *) (uintptr_t) 1;
    const lz_ipv4_reserved *nr = (const lz_ipv4_reserved *) (uintptr_t) 1;
    lz_prefix_verdict v = lz_ipv4_policy_decide(allow, deny, a, &by, &nr);
    if (v != want)
        fail_msg("%s: verdict %d, want %d", addr, v, want);
    assert_int_equal(lz_ipv4_policy_decide(allow, deny, a, NULL, NULL), want);
    if (want == LZ_PREFIX_NEVER_ROUTED) {
        assert_null(by);
        assert_non_null(nr);
        char buf[32];
        lz_ipv4_prefix_format(&nr->prefix, buf);
        assert_string_equal(buf, rule);
        return;
    }
    assert_null(nr);
    if (!rule) {
        assert_null(by);
        return;
    }
    assert_non_null(by);
    char buf[32];
    lz_ipv4_prefix_format(by, buf);
    if (strcmp(buf, rule) != 0)
        fail_msg("%s: decided by %s, want %s", addr, buf, rule);
}

static void test_policy_decide(void **state)
{
    (void) state;
    lz_ipv4_prefix_list allow = { 0 }, deny = { 0 };
    const char *allows[] = { "0.0.0.0/0", "10.1.0.0/16", "198.18.7.0/24", "127.0.0.0/8" };
    const char *denies[] = { "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "10.1.2.0/24",
                             "198.18.0.0/15" };
    for (size_t i = 0; i < 4; i++) {
        lz_ipv4_prefix p = pfx(allows[i]);
        lz_ipv4_list_add(&allow, &p);
    }
    for (size_t i = 0; i < 5; i++) {
        lz_ipv4_prefix p = pfx(denies[i]);
        lz_ipv4_list_add(&deny, &p);
    }
    decide_expect(&allow, &deny, "203.0.113.9", LZ_PREFIX_ALLOWED, "0.0.0.0/0");
    decide_expect(&allow, &deny, "10.9.9.9", LZ_PREFIX_DENIED, "10.0.0.0/8");
    decide_expect(&allow, &deny, "10.1.9.9", LZ_PREFIX_ALLOWED, "10.1.0.0/16");
    decide_expect(&allow, &deny, "10.1.2.3", LZ_PREFIX_DENIED, "10.1.2.0/24");
    decide_expect(&allow, &deny, "198.18.7.1", LZ_PREFIX_ALLOWED, "198.18.7.0/24");
    decide_expect(&allow, &deny, "198.19.0.1", LZ_PREFIX_DENIED, "198.18.0.0/15");
    /* Never-routed ranges override even an allow that names them. */
    decide_expect(&allow, &deny, "127.0.0.1", LZ_PREFIX_NEVER_ROUTED, "127.0.0.0/8");
    decide_expect(&allow, &deny, "169.254.77.1", LZ_PREFIX_NEVER_ROUTED, "169.254.0.0/16");
    decide_expect(&allow, &deny, "100.96.0.3", LZ_PREFIX_NEVER_ROUTED, "100.96.0.0/24");
    decide_expect(&allow, &deny, "0.0.0.0", LZ_PREFIX_NEVER_ROUTED, "0.0.0.0/8");
    decide_expect(&allow, &deny, "255.255.255.255", LZ_PREFIX_NEVER_ROUTED, "240.0.0.0/4");
    decide_expect(&allow, &deny, "224.0.0.251", LZ_PREFIX_NEVER_ROUTED, "224.0.0.0/4");

    /* Without allow-everything: the default deny (no rule). */
    lz_ipv4_prefix everything = pfx("0.0.0.0/0");
    lz_ipv4_prefix_list narrow = { 0 };
    for (size_t i = 0; i < allow.count; i++)
        if (lz_ipv4_prefix_cmp(&allow.items[i], &everything) != 0)
            lz_ipv4_list_add(&narrow, &allow.items[i]);
    decide_expect(&narrow, &deny, "203.0.113.9", LZ_PREFIX_DEFAULT, NULL);
    decide_expect(&narrow, &deny, "10.1.9.9", LZ_PREFIX_ALLOWED, "10.1.0.0/16");
    decide_expect(NULL, NULL, "203.0.113.9", LZ_PREFIX_DEFAULT, NULL);
    decide_expect(NULL, &deny, "192.168.1.1", LZ_PREFIX_DENIED, "192.168.0.0/16");

    /* The same prefix in both (refused at load): deny wins the tie. */
    lz_ipv4_prefix t = pfx("203.0.113.0/24");
    lz_ipv4_prefix_list ta = { 0 }, td = { 0 };
    lz_ipv4_list_add(&ta, &t);
    lz_ipv4_list_add(&td, &t);
    decide_expect(&ta, &td, "203.0.113.1", LZ_PREFIX_DENIED, "203.0.113.0/24");
    decide_expect(&ta, NULL, "203.0.113.1", LZ_PREFIX_ALLOWED, "203.0.113.0/24"); /* control */

    lz_ipv4_list_clear(&allow);
    lz_ipv4_list_clear(&deny);
    lz_ipv4_list_clear(&narrow);
    lz_ipv4_list_clear(&ta);
    lz_ipv4_list_clear(&td);
}

/* ---- the allowed ranges ------------------------------------------------ */

static uint32_t u32(const uint8_t a[4])
{
    return (uint32_t) a[0] << 24 | (uint32_t) a[1] << 16 | (uint32_t) a[2] << 8 | a[3];
}

static void a4(uint32_t v, uint8_t a[4])
{
    a[0] = (uint8_t) (v >> 24);
    a[1] = (uint8_t) (v >> 16);
    a[2] = (uint8_t) (v >> 8);
    a[3] = (uint8_t) v;
}

static bool in_ranges(const lz_ipv4_range *r, size_t n, uint32_t v)
{
    for (size_t i = 0; i < n; i++)
        if (v >= r[i].first && v <= r[i].last)
            return true;
    return false;
}

/* The ranges are sorted, disjoint and never adjacent, and hold exactly the
 * addresses lz_ipv4_policy_decide allows: checked at every range's edges
 * (and one outside), at every policy prefix's edges, and at samples. */
static void check_ranges(const lz_ipv4_prefix_list *allow, const lz_ipv4_prefix_list *deny,
                         unsigned *seed)
{
    size_t n = 99;
    lz_ipv4_range *r = lz_ipv4_policy_allowed_ranges(allow, deny, &n);
    assert_non_null(r);
    uint32_t probes[4096];
    size_t np = 0;
    for (size_t i = 0; i < n; i++) {
        assert_true(r[i].first <= r[i].last);
        if (i)
            assert_true((uint64_t) r[i - 1].last + 1 < r[i].first);
        probes[np++] = r[i].first;
        probes[np++] = r[i].last;
        probes[np++] = r[i].first - 1;
        probes[np++] = r[i].last + 1;
    }
    const lz_ipv4_prefix_list *lists[2] = { allow, deny };
    for (int l = 0; l < 2; l++)
        for (size_t i = 0; i < lists[l]->count && np + 4 <= 4096; i++) {
            uint32_t f = u32(lists[l]->items[i].addr);
            uint32_t last = f + (uint32_t) (((uint64_t) 1 << (32 - lists[l]->items[i].len)) - 1);
            probes[np++] = f;
            probes[np++] = last;
            probes[np++] = f - 1;
            probes[np++] = last + 1;
        }
    while (np < 4096)
        probes[np++] = (uint32_t) rand_r(seed) << 16 ^ (uint32_t) rand_r(seed);
    for (size_t i = 0; i < np; i++) {
        uint8_t a[4];
        a4(probes[i], a);
        bool want = lz_ipv4_policy_decide(allow, deny, a, NULL, NULL) == LZ_PREFIX_ALLOWED;
        if (in_ranges(r, n, probes[i]) != want)
            fail_msg("%u.%u.%u.%u: in the ranges %d, allowed %d", a[0], a[1], a[2], a[3], !want,
                     want);
    }
    free(r);
}

static void test_allowed_ranges(void **state)
{
    (void) state;
    lz_ipv4_prefix_list allow = { 0 }, deny = { 0 };
    size_t n = 99;
    /* Nothing allowed: no range. */
    lz_ipv4_range *r = lz_ipv4_policy_allowed_ranges(&allow, &deny, &n);
    assert_int_equal(n, 0);
    free(r);
    /* One allow prefix with a deny inside: two ranges around the hole. */
    lz_ipv4_prefix a = pfx("198.18.7.0/24"), d = pfx("198.18.7.16/28");
    lz_ipv4_list_add(&allow, &a);
    lz_ipv4_list_add(&deny, &d);
    r = lz_ipv4_policy_allowed_ranges(&allow, &deny, &n);
    assert_int_equal(n, 2);
    uint8_t x[4];
    a4(r[0].first, x);
    assert_memory_equal(x, ((uint8_t[]){ 198, 18, 7, 0 }), 4);
    a4(r[0].last, x);
    assert_memory_equal(x, ((uint8_t[]){ 198, 18, 7, 15 }), 4);
    a4(r[1].first, x);
    assert_memory_equal(x, ((uint8_t[]){ 198, 18, 7, 32 }), 4);
    a4(r[1].last, x);
    assert_memory_equal(x, ((uint8_t[]){ 198, 18, 7, 255 }), 4);
    free(r);
    /* Everything allowed: the never-routed ranges and RFC 1918 are cut out;
     * the last address (limited broadcast) is never allowed. */
    lz_ipv4_prefix all = pfx("0.0.0.0/0");
    lz_ipv4_list_add(&allow, &all);
    for (size_t i = 0; i < 3; i++)
        lz_ipv4_list_add(&deny, &lz_rfc1918_prefixes[i]);
    r = lz_ipv4_policy_allowed_ranges(&allow, &deny, &n);
    assert_true(n > 3);
    a4(r[0].first, x);
    assert_memory_equal(x, ((uint8_t[]){ 1, 0, 0, 0 }), 4);
    assert_true(r[n - 1].last < 0xe0000000u);
    free(r);
    unsigned seed = 25;
    check_ranges(&allow, &deny, &seed);
    lz_ipv4_list_clear(&allow);
    lz_ipv4_list_clear(&deny);

    /* Random policies: nested, overlapping, adjacent prefixes of every
     * length, around a few bases so that they meet. */
    const uint32_t bases[] = { 0x0a000000u, 0xc6120000u, 0x7f000000u, 0x00000000u, 0xdfffff00u };
    for (int round = 0; round < 300; round++) {
        size_t na = (size_t) rand_r(&seed) % 8, nd = (size_t) rand_r(&seed) % 8;
        for (size_t i = 0; i < na + nd; i++) {
            uint32_t v = bases[(size_t) rand_r(&seed) % 5] ^
                         ((uint32_t) rand_r(&seed) & (0xffffffffu >> (rand_r(&seed) % 32)));
            uint8_t ad[4];
            a4(v, ad);
            lz_ipv4_prefix p = lz_ipv4_prefix_make(ad, (uint8_t) (rand_r(&seed) % 33));
            lz_ipv4_list_add(i < na ? &allow : &deny, &p);
        }
        check_ranges(&allow, &deny, &seed);
        lz_ipv4_list_clear(&allow);
        lz_ipv4_list_clear(&deny);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_accepts),
        cmocka_unit_test(test_parse_refuses),
        cmocka_unit_test(test_parse_clears_host_bits),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_cmp),
        cmocka_unit_test(test_list_add_sorted_dedup),
        cmocka_unit_test(test_rfc1918),
        cmocka_unit_test(test_within_and_covers),
        cmocka_unit_test(test_never_routed),
        cmocka_unit_test(test_addr_parse),
        cmocka_unit_test(test_policy_decide),
        cmocka_unit_test(test_allowed_ranges),
    };
    return cmocka_run_group_tests_name("network", tests, NULL, NULL);
}
