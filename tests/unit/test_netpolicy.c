/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests for src/export/netpolicy.c: Lazaret's longest-prefix egress
 * decision flattened into NetworkPolicy ipBlocks must allow exactly the
 * same addresses. A property test compares the two on every prefix's
 * boundary addresses (first and last, and one either side) and on random
 * addresses, for hand-made and random policies; the control shows that the
 * naive translation (each allow as a block excepting every deny inside
 * it) disagrees.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config/network.h"
#include "export/netpolicy.h"

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint32_t next_u32(void)
{
    /* xorshift64*: deterministic, so a failure is reproducible */
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (uint32_t) ((rng * 0x2545f4914f6cdd1du) >> 32);
}

static void addr_of(uint32_t v, uint8_t a[4])
{
    a[0] = (uint8_t) (v >> 24), a[1] = (uint8_t) (v >> 16), a[2] = (uint8_t) (v >> 8);
    a[3] = (uint8_t) v;
}

static uint32_t value_of(const uint8_t a[4])
{
    return (uint32_t) a[0] << 24 | (uint32_t) a[1] << 16 | (uint32_t) a[2] << 8 | a[3];
}

static lz_ipv4_prefix prefix(const char *s)
{
    lz_ipv4_prefix p;
    assert_true(lz_ipv4_prefix_parse(s, &p));
    return p;
}

/* The effective sets as resolve.c makes them: RFC 1918 always denied, no
 * exact prefix in both (an allow equal to a deny is dropped here). */
static void effective(lz_ipv4_prefix_list *allow, lz_ipv4_prefix_list *deny)
{
    for (size_t i = 0; i < 3; i++)
        lz_ipv4_list_add(deny, &lz_rfc1918_prefixes[i]);
    lz_ipv4_prefix_list kept = { 0 };
    for (size_t i = 0; i < allow->count; i++)
        if (!lz_ipv4_list_contains(deny, &allow->items[i]) &&
            !lz_ipv4_never_routed_holding(&allow->items[i]))
            lz_ipv4_list_add(&kept, &allow->items[i]);
    lz_ipv4_list_clear(allow);
    *allow = kept;
}

/* How many addresses the two disagree on, over every prefix's boundaries
 * +-1 and n_random random addresses. */
static size_t disagreements(const lz_ipv4_prefix_list *allow, const lz_ipv4_prefix_list *deny,
                            const lz_ip_blocks *b, size_t n_random)
{
    size_t bad = 0;
    const lz_ipv4_prefix_list *lists[] = { allow, deny };
    for (size_t l = 0; l < 2; l++) {
        for (size_t i = 0; i < lists[l]->count; i++) {
            const lz_ipv4_prefix *p = &lists[l]->items[i];
            uint32_t first = value_of(p->addr);
            uint32_t last = first | (p->len >= 32 ? 0u : 0xffffffffu >> p->len);
            uint32_t probe[] = { first - 1, first, first + 1, last - 1, last, last + 1 };
            for (size_t k = 0; k < 6; k++) {
                uint8_t a[4];
                addr_of(probe[k], a);
                if (lz_netpolicy_lazaret_allows(allow, deny, a) != lz_ip_blocks_allow(b, a))
                    bad++;
            }
        }
    }
    for (size_t i = 0; i < n_random; i++) {
        uint8_t a[4];
        addr_of(next_u32(), a);
        if (lz_netpolicy_lazaret_allows(allow, deny, a) != lz_ip_blocks_allow(b, a))
            bad++;
    }
    return bad;
}

static void test_hand_made_policies(void **state)
{
    (void) state;
    const char *cases[][8] = {
        /* allow..., NULL, deny..., NULL */
        { "0.0.0.0/0", NULL, NULL },
        { "198.18.0.0/15", NULL, "198.18.7.0/24", NULL },
        { "0.0.0.0/0", "10.1.0.0/16", NULL, "10.1.2.0/24", NULL },
        { "0.0.0.0/0", "10.1.2.128/25", NULL, "10.1.0.0/16", NULL },
        { "203.0.113.0/24", "203.0.113.8/29", NULL, "203.0.113.0/28", NULL },
        { "8.8.8.8/32", NULL, NULL },
        { NULL, "0.0.0.0/0", NULL },
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        lz_ipv4_prefix_list allow = { 0 }, deny = { 0 };
        size_t i = 0;
        for (; cases[c][i]; i++) {
            lz_ipv4_prefix p = prefix(cases[c][i]);
            lz_ipv4_list_add(&allow, &p);
        }
        for (i++; cases[c][i]; i++) {
            lz_ipv4_prefix p = prefix(cases[c][i]);
            lz_ipv4_list_add(&deny, &p);
        }
        effective(&allow, &deny);
        lz_ip_blocks b;
        lz_netpolicy_flatten(&allow, &deny, &b);
        assert_int_equal(disagreements(&allow, &deny, &b, 20000), 0);
        for (size_t k = 0; k < b.count; k++)
            for (size_t e = 0; e < b.items[k].n_except; e++)
                assert_true(b.items[k].except[e].len > b.items[k].cidr.len &&
                            lz_ipv4_prefix_within(&b.items[k].except[e], &b.items[k].cidr));
        lz_ip_blocks_clear(&b);
        lz_ipv4_list_clear(&allow);
        lz_ipv4_list_clear(&deny);
    }
}

static void test_the_everything_block_excepts_only_the_largest(void **state)
{
    (void) state;
    lz_ipv4_prefix_list allow = { 0 }, deny = { 0 };
    lz_ipv4_prefix all = prefix("0.0.0.0/0"), inner = prefix("10.1.0.0/16"),
                   d = prefix("10.1.2.0/24");
    lz_ipv4_list_add(&allow, &all);
    lz_ipv4_list_add(&allow, &inner);
    lz_ipv4_list_add(&deny, &d);
    effective(&allow, &deny);
    lz_ip_blocks b;
    lz_netpolicy_flatten(&allow, &deny, &b);
    assert_int_equal(b.count, 2);
    /* 0.0.0.0/0: the three RFC 1918 prefixes and the six never-routed
     * ranges; not 10.1.0.0/16 (inside 10.0.0.0/8) nor 10.1.2.0/24. */
    assert_int_equal(b.items[0].n_except, 9);
    char buf[LZ_IPV4_PREFIX_BUFSZ];
    lz_ipv4_prefix_format(&b.items[0].except[0], buf);
    assert_string_equal(buf, "0.0.0.0/8");
    /* 10.1.0.0/16 excepts its deny. */
    assert_int_equal(b.items[1].n_except, 1);
    lz_ipv4_prefix_format(&b.items[1].except[0], buf);
    assert_string_equal(buf, "10.1.2.0/24");
    lz_ip_blocks_clear(&b);
    lz_ipv4_list_clear(&allow);
    lz_ipv4_list_clear(&deny);
}

static lz_ipv4_prefix random_prefix(void)
{
    /* Clustered, so that random prefixes nest: a few /8s, lengths 8-32. */
    static const uint8_t firsts[] = { 10, 100, 172, 192, 198, 203, 8, 1 };
    uint8_t a[4];
    addr_of(next_u32(), a);
    a[0] = firsts[next_u32() % sizeof(firsts)];
    if (next_u32() % 2)
        a[1] = (uint8_t) (next_u32() % 4);
    return lz_ipv4_prefix_make(a, (uint8_t) (8 + next_u32() % 25));
}

static void test_random_policies_agree_and_the_naive_translation_does_not(void **state)
{
    (void) state;
    size_t naive_bad = 0;
    for (int round = 0; round < 300; round++) {
        lz_ipv4_prefix_list allow = { 0 }, deny = { 0 };
        size_t na = 1 + next_u32() % 8, nd = next_u32() % 8;
        for (size_t i = 0; i < na; i++) {
            lz_ipv4_prefix p = random_prefix();
            lz_ipv4_list_add(&allow, &p);
        }
        for (size_t i = 0; i < nd; i++) {
            lz_ipv4_prefix p = random_prefix();
            if (!lz_ipv4_list_contains(&allow, &p))
                lz_ipv4_list_add(&deny, &p);
        }
        if (round % 10 == 0) {
            lz_ipv4_prefix all = prefix("0.0.0.0/0");
            lz_ipv4_list_add(&allow, &all);
        }
        effective(&allow, &deny);
        lz_ip_blocks b;
        lz_netpolicy_flatten(&allow, &deny, &b);
        assert_int_equal(disagreements(&allow, &deny, &b, 2000), 0);
        /* Control: every allow excepting only the denies inside it (no
         * nested allows, no never-routed ranges) gets some address wrong
         * whenever a deny lies between two nested allows. */
        lz_ip_blocks naive = { calloc(allow.count + 1, sizeof(lz_ip_block)), 0 };
        for (size_t i = 0; i < allow.count; i++) {
            lz_ip_block *nb = &naive.items[naive.count++];
            nb->cidr = allow.items[i];
            nb->except = calloc(deny.count + 1, sizeof(lz_ipv4_prefix));
            for (size_t j = 0; j < deny.count; j++)
                if (deny.items[j].len > allow.items[i].len &&
                    lz_ipv4_prefix_within(&deny.items[j], &allow.items[i]))
                    nb->except[nb->n_except++] = deny.items[j];
        }
        naive_bad += disagreements(&allow, &deny, &naive, 200);
        lz_ip_blocks_clear(&naive);
        lz_ip_blocks_clear(&b);
        lz_ipv4_list_clear(&allow);
        lz_ipv4_list_clear(&deny);
    }
    assert_true(naive_bad > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_made_policies),
        cmocka_unit_test(test_the_everything_block_excepts_only_the_largest),
        cmocka_unit_test(test_random_policies_agree_and_the_naive_translation_does_not),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
