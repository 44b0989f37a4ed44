/* SPDX-License-Identifier: Apache-2.0
 *
 * The keys configuration v2 adds to v1 (docs/configuration.md "Host
 * rules"): allow_hosts/deny_hosts and their [network] defaults, the DNS
 * mode, and the upstream resolvers. The grammar of a pattern is hosts.c's;
 * this file turns its refusals into "LABEL:LINE:COL: KEY: what" with a fix
 * written for the value at hand.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "config/schema_internal.h"

void lz_host_decls_clear(lz_host_decls *d)
{
    lz_host_list_clear(&d->list);
    for (size_t i = 0; i < d->count; i++)
        lz_host_pattern_clear(&d->items[i].pattern);
    free(d->items);
    d->items = NULL;
    d->count = 0;
}

/* The fix for a refused pattern, written for the value itself where one
 * can be derived (the lowercased or dot-less spelling, the prefix). */
static char *pattern_fix(const char *s, const char *keypath)
{
    size_t n = strlen(s);
    bool upper = false;
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char) s[i] >= 0x80)
            return lz_xstrdup("write the A-label (punycode) of the name, e.g. "
                              "\"xn--bcher-kva.example\" for \"bücher.example\" (any IDNA tool "
                              "such as idn2 converts it); Lazaret does no IDNA conversion");
        if (s[i] >= 'A' && s[i] <= 'Z')
            upper = true;
    }
    if (upper || (n > 1 && s[n - 1] == '.')) {
        /* The spelling the grammar wants, when lowering and dropping the
         * dot are all it takes. */
        _cleanup_free_ char *fixed = lz_xstrndup(s, n > 1 && s[n - 1] == '.' ? n - 1 : n);
        for (char *p = fixed; *p; p++)
            if (*p >= 'A' && *p <= 'Z')
                *p = (char) (*p - 'A' + 'a');
        lz_host_pattern probe = { 0 };
        const char *why;
        if (lz_host_pattern_parse(fixed, &probe, &why)) {
            lz_host_pattern_clear(&probe);
            return lz_xasprintf("write \"%s\"%s", fixed,
                                upper ? " (lowercase)" : " (no trailing dot)");
        }
    }
    uint8_t addr[4];
    if (lz_ipv4_addr_parse(s, addr)) {
        bool deny = strstr(keypath, "deny") != NULL;
        return lz_xasprintf("addresses are prefix rules: write %s = [\"%s/32\"] instead",
                            deny ? "deny_egress" : "allow_egress", s);
    }
    return lz_xstrdup("write a lowercase name of at least two labels such as "
                      "\"api.example.com\", or \"*.example.com\" for every name below "
                      "example.com (but not example.com itself)");
}

int lz_schema_host_list(lz_schema_ctx *c, const lz_toml_node *n, const char *keypath,
                        lz_host_decls *ret)
{
    if (lz_schema_expect_type(c, n, LZ_TOML_ARRAY, keypath,
                              "an array of host names such as [\"api.example.com\"]") < 0)
        return -1;
    ret->items = lz_xcalloc(n->u.array.count, sizeof(*ret->items));
    for (size_t i = 0; i < n->u.array.count; i++) {
        const lz_toml_node *item = n->u.array.items[i];
        _cleanup_free_ char *kp = lz_xasprintf("%s[%zu]", keypath, i);
        if (lz_schema_expect_type(c, item, LZ_TOML_STRING, kp,
                                  "a host name string such as \"api.example.com\"") < 0)
            return -1;
        lz_source_pos pos = lz_schema_pos(item);
        const char *s = item->u.string.bytes;
        const char *why = NULL;
        lz_host_pattern p = { 0 };
        if (!lz_host_pattern_parse(s, &p, &why)) {
            _cleanup_free_ char *fix = pattern_fix(s, keypath);
            return lz_schema_fail(c, &pos, kp, fix, "'%s' is not a host pattern: %s", s, why);
        }
        lz_host_list_add(&ret->list, &p);
        ret->items[ret->count++] = (lz_host_decl){ p, i, pos };
    }
    return 0;
}

int lz_schema_dns_mode(lz_schema_ctx *c, const lz_toml_node *n, const char *keypath,
                       lz_dns_decl *ret, lz_source_pos *pos)
{
    if (lz_schema_expect_type(c, n, LZ_TOML_STRING, keypath, "\"strict\" or \"forward\"") < 0)
        return -1;
    *pos = lz_schema_pos(n);
    if (strcmp(n->u.string.bytes, "strict") == 0)
        *ret = LZ_DNS_DECL_STRICT;
    else if (strcmp(n->u.string.bytes, "forward") == 0)
        *ret = LZ_DNS_DECL_FORWARD;
    else
        return lz_schema_fail(c, pos, keypath,
                              "write \"strict\" (names no allow_hosts pattern covers are "
                              "answered NXDOMAIN and never leave the machine) or \"forward\" "
                              "(they are asked upstream)",
                              "expected \"strict\" or \"forward\", found '%s'", n->u.string.bytes);
    return 0;
}

/* Addresses that are never one resolver: "this network", multicast, and the
 * reserved space that holds the limited broadcast. */
static const char *resolver_unusable(const uint8_t a[4])
{
    if (a[0] == 0)
        return "in 0.0.0.0/8, 'this network', not a host";
    if (a[0] >= 224 && a[0] <= 239)
        return "a multicast address";
    if (a[0] >= 240)
        return a[0] == 255 && a[1] == 255 && a[2] == 255 && a[3] == 255
                   ? "the limited broadcast address"
                   : "in 240.0.0.0/4, reserved space";
    return NULL;
}

int lz_schema_resolvers(lz_schema_ctx *c, const lz_toml_node *n, const char *keypath,
                        lz_config_doc *doc)
{
    if (lz_schema_expect_type(c, n, LZ_TOML_ARRAY, keypath,
                              "an array of IPv4 addresses such as [\"192.0.2.53\"]") < 0)
        return -1;
    if (n->u.array.count == 0) {
        lz_source_pos pos = lz_schema_pos(n);
        return lz_schema_fail(c, &pos, keypath,
                              "remove the key to use the host's resolv.conf nameservers, or "
                              "name up to three addresses",
                              "an empty list of resolvers");
    }
    for (size_t i = 0; i < n->u.array.count; i++) {
        const lz_toml_node *item = n->u.array.items[i];
        _cleanup_free_ char *kp = lz_xasprintf("%s[%zu]", keypath, i);
        lz_source_pos pos = lz_schema_pos(item);
        if (i == LZ_CONFIG_RESOLVERS_MAX)
            return lz_schema_fail(c, &pos, kp,
                                  "keep at most three resolvers (the sidecar, like the C "
                                  "library's resolver, asks at most three)",
                                  "more than %d resolvers", LZ_CONFIG_RESOLVERS_MAX);
        if (lz_schema_expect_type(c, item, LZ_TOML_STRING, kp,
                                  "an IPv4 address string such as \"192.0.2.53\"") < 0)
            return -1;
        const char *s = item->u.string.bytes;
        uint8_t a[4];
        if (!lz_ipv4_addr_parse(s, a))
            return lz_schema_fail(c, &pos, kp,
                                  "write an IPv4 address as a.b.c.d (decimal, no leading zeros, "
                                  "no prefix length, no port: resolvers listen on port 53); "
                                  "IPv6 is not supported",
                                  "'%s' is not an IPv4 address", s);
        const char *bad = resolver_unusable(a);
        if (bad)
            return lz_schema_fail(c, &pos, kp, "write the unicast address of a DNS resolver",
                                  "%s cannot be a resolver: it is %s", s, bad);
        for (size_t j = 0; j < doc->n_resolvers; j++)
            if (memcmp(doc->resolvers[j], a, 4) == 0)
                return lz_schema_fail(c, &pos, kp, "remove one of the two", "%s repeats %s[%zu]", s,
                                      keypath, j);
        memcpy(doc->resolvers[doc->n_resolvers++], a, 4);
    }
    return 0;
}

/* The declaration of p in d, or NULL. */
static const lz_host_decl *decl_of(const lz_host_decls *d, const lz_host_pattern *p)
{
    for (size_t i = 0; i < d->count; i++)
        if (strcmp(d->items[i].pattern.name, p->name) == 0 &&
            d->items[i].pattern.wildcard == p->wildcard)
            return &d->items[i];
    return NULL;
}

int lz_schema_host_conflicts(lz_schema_ctx *c, const lz_config_doc *doc, const lz_profile_decl *pr,
                             const char *keypath)
{
    const lz_host_decls *allows[2] = { &doc->default_allow_hosts, &pr->allow_hosts };
    const lz_host_decls *denies[2] = { &doc->default_deny_hosts, &pr->deny_hosts };
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < allows[k]->count; i++) {
            const lz_host_decl *a = &allows[k]->items[i];
            const lz_host_decl *d = NULL;
            int dk = 0;
            for (; dk < 2 && !d; dk++)
                d = decl_of(denies[dk], &a->pattern);
            if (!d)
                continue;
            dk--;
            char text[LZ_HOST_NAME_MAX + 3];
            lz_host_pattern_format(&a->pattern, text);
            _cleanup_free_ char *kp =
                k == 0 ? lz_xasprintf("network.default_allow_hosts[%zu]", a->index)
                       : lz_xasprintf("%s.allow_hosts[%zu]", keypath, a->index);
            _cleanup_free_ char *dkp =
                dk == 0 ? lz_xasprintf("network.default_deny_hosts[%zu]", d->index)
                        : lz_xasprintf("%s.deny_hosts[%zu]", keypath, d->index);
            return lz_schema_fail(c, &a->pos, kp,
                                  "remove it from one of the two lists; to make an exception "
                                  "inside a wildcard, write a more specific pattern (the most "
                                  "specific pattern decides)",
                                  "'%s' is both allowed and denied for profile '%s' (denied by "
                                  "%s at line %u, column %u)",
                                  text, pr->name, dkp, d->pos.line, d->pos.column);
        }
    }
    return 0;
}
