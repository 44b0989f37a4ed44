/* SPDX-License-Identifier: Apache-2.0
 *
 * Host rules of configuration v2 (issue 25; docs/configuration.md "Host
 * rules", docs/network.md "Egress by host name"): DNS names the policy
 * allows or denies, and the one function that decides a name.
 *
 * A pattern is either an exact name ("api.example.test") or a wildcard
 * ("*.example.test") that matches every name strictly below its parent and
 * never the parent itself. Names are compared in their canonical form:
 * lowercase A-labels, no trailing dot (see lz_host_name_canonical for the
 * exact grammar and bounds). Pure code: no I/O, no allocation but the
 * lists', so the DNS responder, the name check and the configuration
 * loader share it.
 */
#ifndef LAZARET_CONFIG_HOSTS_H
#define LAZARET_CONFIG_HOSTS_H

#include <stdbool.h>
#include <stddef.h>

/* The longest canonical name (RFC 1035: 255 octets on the wire, i.e. 253
 * characters in presentation form without the trailing dot). */
#define LZ_HOST_NAME_MAX 253

typedef struct lz_host_pattern {
    char *name;    /* canonical; for "*.x" the parent "x" */
    bool wildcard; /* "*.x": strictly below x */
} lz_host_pattern;

/* Sorted (by name, then exact before wildcard), no duplicates. */
typedef struct lz_host_list {
    lz_host_pattern *items;
    size_t count;
} lz_host_list;

/* A configured pattern, as written in allow_hosts/deny_hosts. Returns
 * false with *why set to a static phrase that says what is wrong
 * ("uppercase letters: write names in lowercase", "a wildcard is only
 * allowed as the whole first label: \"*.example.com\"", ...). */
bool lz_host_pattern_parse(const char *s, lz_host_pattern *ret, const char **why);

/* A name met on the wire (DNS question, TLS SNI, HTTP Host without its
 * port) into canonical form in out: ASCII letters lowered, one trailing dot
 * removed. False when it is not a host name of the grammar (then out is
 * unspecified). in need not be NUL-terminated. */
bool lz_host_name_canonical(const char *in, size_t len, char out[static LZ_HOST_NAME_MAX + 1]);

/* Whether p matches the canonical name. */
bool lz_host_pattern_matches(const lz_host_pattern *p, const char *name);

/* The text of a pattern as configured ("*.x" or "x"), into buf. */
void lz_host_pattern_format(const lz_host_pattern *p, char buf[static LZ_HOST_NAME_MAX + 3]);

typedef enum lz_host_verdict {
    LZ_HOST_UNLISTED = 0, /* no rule matches */
    LZ_HOST_ALLOWED,
    LZ_HOST_DENIED,
} lz_host_verdict;

/* The verdict for a canonical name: the most specific matching pattern of
 * either list decides (an exact name over any wildcard, a wildcard with a
 * longer parent over one with a shorter); deny wins a tie (which a loaded
 * configuration cannot contain: the same pattern in both lists is refused).
 * *rule (may be NULL) gets the deciding pattern, NULL when unlisted. */
lz_host_verdict lz_host_decide(const lz_host_list *allow, const lz_host_list *deny,
                               const char *name, const lz_host_pattern **rule);

/* Add a copy of p unless present (keeps the order); clear frees. */
void lz_host_list_add(lz_host_list *list, const lz_host_pattern *p);
bool lz_host_list_contains(const lz_host_list *list, const lz_host_pattern *p);
void lz_host_list_clear(lz_host_list *list);
void lz_host_pattern_clear(lz_host_pattern *p);

#endif
