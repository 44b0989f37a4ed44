/* SPDX-License-Identifier: Apache-2.0
 *
 * A Lazaret egress policy as Kubernetes NetworkPolicy ipBlocks (issue 14;
 * docs/kubernetes.md "The network policy").
 *
 * Lazaret decides an IPv4 destination by longest-prefix match over the
 * profile's effective allow and deny sets, after the never-routed ranges
 * (network.h), with "deny" when no prefix holds it. A NetworkPolicy has no
 * deny and no order: its egress is the union of its ipBlocks, each a cidr
 * minus `except` prefixes inside it. The two agree exactly when every allow
 * prefix A becomes one block {cidr: A, except: the largest policy prefixes
 * strictly inside A} (allow or deny, never-routed ranges included): an
 * address of A outside every except has A as its longest match, so it is
 * allowed; one inside an except is decided by that prefix, or one inside
 * it, whose own block (if it is an allow) holds it. An allow inside a
 * never-routed range is refused when the configuration is loaded, so none
 * needs a block.
 */
#ifndef LAZARET_EXPORT_NETPOLICY_H
#define LAZARET_EXPORT_NETPOLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/network.h"

typedef struct lz_ip_block {
    lz_ipv4_prefix cidr;
    lz_ipv4_prefix *except; /* sorted (lz_ipv4_prefix_cmp), each strictly inside cidr */
    size_t n_except;
} lz_ip_block;

typedef struct lz_ip_blocks {
    lz_ip_block *items; /* one per allow prefix, in the allow list's order */
    size_t count;
} lz_ip_blocks;

/* The blocks for the effective sets (normalized, sorted, no prefix in
 * both, as resolve.h keeps them). A never-routed range strictly inside an
 * allow prefix is one of its excepts; an allow prefix equal to or inside
 * one gets no block. */
void lz_netpolicy_flatten(const lz_ipv4_prefix_list *allow, const lz_ipv4_prefix_list *deny,
                          lz_ip_blocks *ret);
void lz_ip_blocks_clear(lz_ip_blocks *b);

/* Lazaret's own decision for addr (network order): never-routed ranges
 * first, then the longest prefix of allow and deny, deny when none. */
bool lz_netpolicy_lazaret_allows(const lz_ipv4_prefix_list *allow, const lz_ipv4_prefix_list *deny,
                                 const uint8_t addr[4]);

/* The union semantics of NetworkPolicy ipBlocks for addr. */
bool lz_ip_blocks_allow(const lz_ip_blocks *b, const uint8_t addr[4]);

#endif
