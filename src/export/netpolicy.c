/* SPDX-License-Identifier: Apache-2.0 */
#include "export/netpolicy.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"

static bool strictly_inside(const lz_ipv4_prefix *inner, const lz_ipv4_prefix *outer)
{
    return inner->len > outer->len && lz_ipv4_prefix_within(inner, outer);
}

static bool holds(const lz_ipv4_prefix *p, const uint8_t addr[4])
{
    lz_ipv4_prefix a = lz_ipv4_prefix_make(addr, p->len);
    return lz_ipv4_prefix_cmp(&a, p) == 0;
}

static bool never_routed_holds(const lz_ipv4_prefix *p)
{
    return lz_ipv4_never_routed_holding(p) != NULL;
}

/* The candidates for A's excepts: every policy prefix and never-routed
 * range strictly inside A. */
static size_t candidates(const lz_ipv4_prefix_list *allow, const lz_ipv4_prefix_list *deny,
                         const lz_ipv4_prefix *a, lz_ipv4_prefix *out)
{
    size_t n = 0;
    for (size_t i = 0; i < allow->count; i++)
        if (strictly_inside(&allow->items[i], a))
            out[n++] = allow->items[i];
    for (size_t i = 0; i < deny->count; i++)
        if (strictly_inside(&deny->items[i], a))
            out[n++] = deny->items[i];
    for (size_t i = 0; i < LZ_IPV4_NEVER_ROUTED_COUNT; i++)
        if (strictly_inside(&lz_ipv4_never_routed[i].prefix, a))
            out[n++] = lz_ipv4_never_routed[i].prefix;
    return n;
}

static int cmp_prefix(const void *a, const void *b)
{
    return lz_ipv4_prefix_cmp(a, b);
}

void lz_netpolicy_flatten(const lz_ipv4_prefix_list *allow, const lz_ipv4_prefix_list *deny,
                          lz_ip_blocks *ret)
{
    *ret = (lz_ip_blocks){ lz_xcalloc(allow->count ? allow->count : 1, sizeof(lz_ip_block)), 0 };
    size_t room = allow->count + deny->count + LZ_IPV4_NEVER_ROUTED_COUNT;
    lz_ipv4_prefix *cand = lz_xcalloc(room ? room : 1, sizeof(*cand));
    for (size_t i = 0; i < allow->count; i++) {
        const lz_ipv4_prefix *a = &allow->items[i];
        if (never_routed_holds(a))
            continue; /* refused at load; never reachable anyway */
        size_t n = candidates(allow, deny, a, cand);
        lz_ip_block *b = &ret->items[ret->count++];
        b->cidr = *a;
        b->except = lz_xcalloc(n ? n : 1, sizeof(lz_ipv4_prefix));
        /* Only the largest: one inside another candidate is covered by it. */
        for (size_t j = 0; j < n; j++) {
            bool covered = false;
            for (size_t k = 0; k < n && !covered; k++)
                covered = k != j && strictly_inside(&cand[j], &cand[k]);
            /* Two equal candidates (a policy prefix that is also a
             * never-routed range) are kept once. */
            for (size_t k = 0; k < j && !covered; k++)
                covered = lz_ipv4_prefix_cmp(&cand[j], &cand[k]) == 0;
            if (!covered)
                b->except[b->n_except++] = cand[j];
        }
        qsort(b->except, b->n_except, sizeof(lz_ipv4_prefix), cmp_prefix);
    }
    free(cand);
}

void lz_ip_blocks_clear(lz_ip_blocks *b)
{
    for (size_t i = 0; i < b->count; i++)
        free(b->items[i].except);
    free(b->items);
    *b = (lz_ip_blocks){ 0 };
}

bool lz_netpolicy_lazaret_allows(const lz_ipv4_prefix_list *allow, const lz_ipv4_prefix_list *deny,
                                 const uint8_t addr[4])
{
    /* The one decision the router and the keeper use. */
    return lz_ipv4_policy_decide(allow, deny, addr, NULL, NULL) == LZ_PREFIX_ALLOWED;
}

bool lz_ip_blocks_allow(const lz_ip_blocks *b, const uint8_t addr[4])
{
    for (size_t i = 0; i < b->count; i++) {
        if (!holds(&b->items[i].cidr, addr))
            continue;
        bool excepted = false;
        for (size_t j = 0; j < b->items[i].n_except && !excepted; j++)
            excepted = holds(&b->items[i].except[j], addr);
        if (!excepted)
            return true;
    }
    return false;
}
