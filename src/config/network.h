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
    uint8_t addr[4];  /* network order, host bits cleared */
    uint8_t len;      /* 0..32 */
} lz_ipv4_prefix;

typedef struct lz_ipv4_prefix_list {
    lz_ipv4_prefix *items;
    size_t count;
} lz_ipv4_prefix_list;

/* Parse "a.b.c.d/n" strictly. Returns true and fills *ret (host bits
 * cleared) on success. The prefix length is required. */
bool lz_ipv4_prefix_parse(const char *s, lz_ipv4_prefix *ret);

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

#endif
