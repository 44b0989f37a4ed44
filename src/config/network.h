/* SPDX-License-Identifier: Apache-2.0
 *
 * The v1 network language: IPv4 prefixes only. Every prefix is parsed
 * strictly ("a.b.c.d/n", decimal, no leading zeros, 0 <= n <= 32), has its
 * host bits cleared, and lists are deduplicated and kept sorted by their
 * 5-byte encoding (address bytes in network order, then length).
 */
#ifndef LAZARET_CONFIG_NETWORK_H
#define LAZARET_CONFIG_NETWORK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct lz_ipv4_prefix {
    uint8_t addr[4]; /* network order, host bits cleared */
    uint8_t len;     /* 0..32 */
} lz_ipv4_prefix;

typedef struct lz_ipv4_prefix_list {
    lz_ipv4_prefix *items;
    size_t count;
} lz_ipv4_prefix_list;

/* Parse "a.b.c.d/n" strictly. Returns true and fills *ret (host bits
 * cleared) on success. The prefix length is required. */
bool lz_ipv4_prefix_parse(const char *s, lz_ipv4_prefix *ret);

/* Parse a bare address "a.b.c.d" as strictly as a prefix's (decimal, no
 * leading zeros, no length). */
bool lz_ipv4_addr_parse(const char *s, uint8_t ret[4]);

/* Room for "255.255.255.255/255" and the NUL (the length never exceeds 32,
 * but the buffer is sized for the type so compilers can prove it fits). */
#define LZ_IPV4_PREFIX_BUFSZ 20

/* Format as "a.b.c.d/n" into buf. */
void lz_ipv4_prefix_format(const lz_ipv4_prefix *p, char buf[static LZ_IPV4_PREFIX_BUFSZ]);

/* Compare by 5-byte encoding (unsigned bytewise). */
int lz_ipv4_prefix_cmp(const lz_ipv4_prefix *a, const lz_ipv4_prefix *b);

/* Add p to the list unless already present; keeps the list sorted. */
void lz_ipv4_list_add(lz_ipv4_prefix_list *list, const lz_ipv4_prefix *p);
bool lz_ipv4_list_contains(const lz_ipv4_prefix_list *list, const lz_ipv4_prefix *p);
void lz_ipv4_list_clear(lz_ipv4_prefix_list *list);

/* The three RFC 1918 prefixes, always part of the effective deny set. */
extern const lz_ipv4_prefix lz_rfc1918_prefixes[3];

/* The prefix of length len that holds addr (host bits cleared). */
lz_ipv4_prefix lz_ipv4_prefix_make(const uint8_t addr[4], uint8_t len);

/* True when every address of inner is in outer. */
bool lz_ipv4_prefix_within(const lz_ipv4_prefix *inner, const lz_ipv4_prefix *outer);

/* True when some item of the list holds every address of p. */
bool lz_ipv4_list_covers(const lz_ipv4_prefix_list *list, const lz_ipv4_prefix *p);

/* Ranges a sandbox never reaches, whatever the policy says (docs/network.md,
 * "Never reachable"): what is there is loopback, this host, Lazaret's own
 * plumbing, or no unicast destination at all. An allow prefix inside one is
 * refused when the configuration is loaded; a prefix that contains one is
 * accepted and the range stays unreachable (the router rejects it). */
typedef struct lz_ipv4_reserved {
    lz_ipv4_prefix prefix;
    const char *what; /* a noun phrase: "loopback", ... */
} lz_ipv4_reserved;

#define LZ_IPV4_NEVER_ROUTED_COUNT 6
extern const lz_ipv4_reserved lz_ipv4_never_routed[LZ_IPV4_NEVER_ROUTED_COUNT];

/* The never-routed range that holds every address of p, or NULL. */
const lz_ipv4_reserved *lz_ipv4_never_routed_holding(const lz_ipv4_prefix *p);

/* How the prefix policy alone decides one address (docs/network.md "The
 * model", and "Egress by host name" for how host rules combine with it):
 * the longest matching prefix of allow and deny (the effective lists; the
 * RFC 1918 ranges are in deny) decides, a never-routed range overrides
 * everything. *rule (may be NULL) gets the deciding prefix, or NULL for
 * LZ_PREFIX_DEFAULT and LZ_PREFIX_NEVER_ROUTED (*reserved, may be NULL,
 * gets the range then). */
typedef enum lz_prefix_verdict {
    LZ_PREFIX_DEFAULT = 0, /* no prefix matches: the default deny */
    LZ_PREFIX_ALLOWED,
    LZ_PREFIX_DENIED,
    LZ_PREFIX_NEVER_ROUTED,
} lz_prefix_verdict;

lz_prefix_verdict lz_ipv4_policy_decide(const lz_ipv4_prefix_list *allow,
                                        const lz_ipv4_prefix_list *deny, const uint8_t addr[4],
                                        const lz_ipv4_prefix **rule,
                                        const lz_ipv4_reserved **reserved);

/* An inclusive range of addresses, host byte order. */
typedef struct lz_ipv4_range {
    uint32_t first, last;
} lz_ipv4_range;

/* Every address lz_ipv4_policy_decide says LZ_PREFIX_ALLOWED for, as
 * sorted, disjoint ranges with a gap between each two (a deny or a
 * never-routed range inside an allow is carved out: longest prefix wins).
 * Returns a malloc'd array of *count ranges (never NULL). */
lz_ipv4_range *lz_ipv4_policy_allowed_ranges(const lz_ipv4_prefix_list *allow,
                                             const lz_ipv4_prefix_list *deny, size_t *count);

#endif
