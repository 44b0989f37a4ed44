/* SPDX-License-Identifier: Apache-2.0 */
#include "config/network.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

const lz_ipv4_prefix lz_rfc1918_prefixes[3] = {
    { { 10, 0, 0, 0 }, 8 },
    { { 172, 16, 0, 0 }, 12 },
    { { 192, 168, 0, 0 }, 16 },
};

/* Keep in step with the router (src/supervisor/sidecar.c): 169.254.77.0/30
 * is the sandbox link and 100.96.0.0/24 slirp4netns's network. */
const lz_ipv4_reserved lz_ipv4_never_routed[LZ_IPV4_NEVER_ROUTED_COUNT] = {
    { { { 0, 0, 0, 0 }, 8 }, "'this network' (0.0.0.0 is this host itself)" },
    { { { 127, 0, 0, 0 }, 8 }, "loopback (the sandbox's own, never the host's)" },
    { { { 100, 96, 0, 0 }, 24 },
      "Lazaret's slirp4netns network (the router, the resolver and the host alias)" },
    { { { 169, 254, 0, 0 }, 16 },
      "link-local space, which holds Lazaret's sandbox link "
      "169.254.77.0/30" },
    { { { 224, 0, 0, 0 }, 4 }, "multicast (only unicast is forwarded)" },
    { { { 240, 0, 0, 0 }, 4 }, "reserved space and the limited broadcast 255.255.255.255" },
};

lz_ipv4_prefix lz_ipv4_prefix_make(const uint8_t addr[4], uint8_t len)
{
    lz_ipv4_prefix p;
    p.len = len > 32 ? 32 : len;
    for (int i = 0; i < 4; i++) {
        int bits = (int) p.len - 8 * i;
        uint8_t mask = bits >= 8 ? 0xff : bits <= 0 ? 0 : (uint8_t) (0xff << (8 - bits));
        p.addr[i] = addr[i] & mask;
    }
    return p;
}

bool lz_ipv4_prefix_within(const lz_ipv4_prefix *inner, const lz_ipv4_prefix *outer)
{
    if (inner->len < outer->len)
        return false;
    lz_ipv4_prefix cut = lz_ipv4_prefix_make(inner->addr, outer->len);
    return memcmp(cut.addr, outer->addr, 4) == 0;
}

bool lz_ipv4_list_covers(const lz_ipv4_prefix_list *list, const lz_ipv4_prefix *p)
{
    for (size_t i = 0; i < list->count; i++)
        if (lz_ipv4_prefix_within(p, &list->items[i]))
            return true;
    return false;
}

const lz_ipv4_reserved *lz_ipv4_never_routed_holding(const lz_ipv4_prefix *p)
{
    for (size_t i = 0; i < LZ_IPV4_NEVER_ROUTED_COUNT; i++)
        if (lz_ipv4_prefix_within(p, &lz_ipv4_never_routed[i].prefix))
            return &lz_ipv4_never_routed[i];
    return NULL;
}

/* A decimal number 0..max with no sign, no leading zero (except "0"), at most
 * three digits. Advances *s. */
static bool parse_dec(const char **s, unsigned max, unsigned *ret)
{
    const char *p = *s;
    unsigned v = 0;
    size_t n = 0;
    while (p[n] >= '0' && p[n] <= '9') {
        if (n == 3)
            return false;
        v = v * 10 + (unsigned) (p[n] - '0');
        n++;
    }
    if (n == 0 || (n > 1 && p[0] == '0') || v > max)
        return false;
    *s = p + n;
    *ret = v;
    return true;
}

bool lz_ipv4_prefix_parse(const char *s, lz_ipv4_prefix *ret)
{
    lz_ipv4_prefix p;
    unsigned v;
    for (int i = 0; i < 4; i++) {
        if (!parse_dec(&s, 255, &v))
            return false;
        p.addr[i] = (uint8_t) v;
        if (*s++ != (i < 3 ? '.' : '/'))
            return false;
    }
    if (!parse_dec(&s, 32, &v) || *s != '\0')
        return false;
    p.len = (uint8_t) v;
    /* Clear host bits. */
    for (int i = 0; i < 4; i++) {
        int bits = (int) p.len - 8 * i;
        uint8_t mask = bits >= 8 ? 0xff : bits <= 0 ? 0 : (uint8_t) (0xff << (8 - bits));
        p.addr[i] &= mask;
    }
    *ret = p;
    return true;
}

bool lz_ipv4_addr_parse(const char *s, uint8_t ret[4])
{
    uint8_t a[4];
    unsigned v;
    for (int i = 0; i < 4; i++) {
        if (!parse_dec(&s, 255, &v))
            return false;
        a[i] = (uint8_t) v;
        if (*s++ != (i < 3 ? '.' : '\0'))
            return false;
    }
    memcpy(ret, a, 4);
    return true;
}

void lz_ipv4_prefix_format(const lz_ipv4_prefix *p, char buf[static LZ_IPV4_PREFIX_BUFSZ])
{
    snprintf(buf, LZ_IPV4_PREFIX_BUFSZ, "%u.%u.%u.%u/%u", p->addr[0], p->addr[1], p->addr[2],
             p->addr[3], p->len);
}

int lz_ipv4_prefix_cmp(const lz_ipv4_prefix *a, const lz_ipv4_prefix *b)
{
    int c = memcmp(a->addr, b->addr, 4);
    if (c)
        return c;
    return (int) a->len - (int) b->len;
}

bool lz_ipv4_list_contains(const lz_ipv4_prefix_list *list, const lz_ipv4_prefix *p)
{
    for (size_t i = 0; i < list->count; i++)
        if (lz_ipv4_prefix_cmp(&list->items[i], p) == 0)
            return true;
    return false;
}

void lz_ipv4_list_add(lz_ipv4_prefix_list *list, const lz_ipv4_prefix *p)
{
    size_t i = 0;
    while (i < list->count && lz_ipv4_prefix_cmp(&list->items[i], p) < 0)
        i++;
    if (i < list->count && lz_ipv4_prefix_cmp(&list->items[i], p) == 0)
        return;
    list->items = lz_xrealloc(list->items, list->count + 1, sizeof(*list->items));
    memmove(&list->items[i + 1], &list->items[i], (list->count - i) * sizeof(*list->items));
    list->items[i] = *p;
    list->count++;
}

void lz_ipv4_list_clear(lz_ipv4_prefix_list *list)
{
    free(list->items);
    list->items = NULL;
    list->count = 0;
}

/* The longest matching prefix of the list, or NULL. */
static const lz_ipv4_prefix *longest_match(const lz_ipv4_prefix_list *list, const uint8_t addr[4])
{
    const lz_ipv4_prefix *best = NULL;
    if (!list)
        return NULL;
    lz_ipv4_prefix host = lz_ipv4_prefix_make(addr, 32);
    for (size_t i = 0; i < list->count; i++) {
        const lz_ipv4_prefix *p = &list->items[i];
        if (lz_ipv4_prefix_within(&host, p) && (!best || p->len > best->len))
            best = p;
    }
    return best;
}

lz_prefix_verdict lz_ipv4_policy_decide(const lz_ipv4_prefix_list *allow,
                                        const lz_ipv4_prefix_list *deny, const uint8_t addr[4],
                                        const lz_ipv4_prefix **rule,
                                        const lz_ipv4_reserved **reserved)
{
    if (rule)
        *rule = NULL;
    if (reserved)
        *reserved = NULL;
    lz_ipv4_prefix host = lz_ipv4_prefix_make(addr, 32);
    const lz_ipv4_reserved *nr = lz_ipv4_never_routed_holding(&host);
    if (nr) {
        if (reserved)
            *reserved = nr;
        return LZ_PREFIX_NEVER_ROUTED;
    }
    const lz_ipv4_prefix *a = longest_match(allow, addr);
    const lz_ipv4_prefix *d = longest_match(deny, addr);
    /* Equal lengths cannot both match unless they are the same prefix, which
     * a loaded configuration refuses; deny wins that tie regardless. */
    if (d && (!a || d->len >= a->len)) {
        if (rule)
            *rule = d;
        return LZ_PREFIX_DENIED;
    }
    if (a) {
        if (rule)
            *rule = a;
        return LZ_PREFIX_ALLOWED;
    }
    return LZ_PREFIX_DEFAULT;
}

static uint32_t prefix_first(const lz_ipv4_prefix *p)
{
    return (uint32_t) p->addr[0] << 24 | (uint32_t) p->addr[1] << 16 | (uint32_t) p->addr[2] << 8 |
           p->addr[3];
}

/* The first address and one past the last, as boundaries. */
static size_t put_bounds(uint64_t *b, size_t n, const lz_ipv4_prefix *p)
{
    uint64_t first = prefix_first(p);
    b[n++] = first;
    b[n++] = first + ((uint64_t) 1 << (32 - p->len));
    return n;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return x < y ? -1 : x > y;
}

lz_ipv4_range *lz_ipv4_policy_allowed_ranges(const lz_ipv4_prefix_list *allow,
                                             const lz_ipv4_prefix_list *deny, size_t *count)
{
    /* Between two neighbouring boundaries of all the prefixes that take
     * part in the decision, every address gets the same verdict: deciding
     * the first one decides the segment. */
    size_t cap = 2 * (allow->count + deny->count + LZ_IPV4_NEVER_ROUTED_COUNT) + 2, n = 0;
    uint64_t *b = lz_xcalloc(cap, sizeof(*b));
    b[n++] = 0;
    b[n++] = (uint64_t) 1 << 32;
    for (size_t i = 0; i < allow->count; i++)
        n = put_bounds(b, n, &allow->items[i]);
    for (size_t i = 0; i < deny->count; i++)
        n = put_bounds(b, n, &deny->items[i]);
    for (size_t i = 0; i < LZ_IPV4_NEVER_ROUTED_COUNT; i++)
        n = put_bounds(b, n, &lz_ipv4_never_routed[i].prefix);
    qsort(b, n, sizeof(*b), cmp_u64);
    lz_ipv4_range *r = lz_xcalloc(n, sizeof(*r));
    size_t k = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        if (b[i] == b[i + 1])
            continue;
        uint32_t first = (uint32_t) b[i], last = (uint32_t) (b[i + 1] - 1);
        const uint8_t a[4] = { (uint8_t) (first >> 24), (uint8_t) (first >> 16),
                               (uint8_t) (first >> 8), (uint8_t) first };
        if (lz_ipv4_policy_decide(allow, deny, a, NULL, NULL) != LZ_PREFIX_ALLOWED)
            continue;
        if (k && (uint64_t) r[k - 1].last + 1 == first)
            r[k - 1].last = last; /* adjacent: one range */
        else
            r[k++] = (lz_ipv4_range){ first, last };
    }
    free(b);
    *count = k;
    return r;
}
