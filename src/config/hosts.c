/* SPDX-License-Identifier: Apache-2.0
 *
 * Host rules (hosts.h): the pattern grammar of configuration v2, the
 * canonical form of names met on the wire, and the one verdict.
 *
 * The grammar is deliberately narrower than DNS: lowercase LDH A-labels
 * only. Anything else in a configuration is refused with its own fix rather
 * than converted (no IDNA mapping, no case folding, no trailing-dot
 * stripping), so what the user wrote is exactly what is compared.
 */
#include "config/hosts.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#define LABEL_MAX 63

static bool is_ldh(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* The LDH structure of a lowercase name s[0..n): labels of 1..63 LDH
 * characters, not starting or ending with '-', separated by single dots, no
 * leading or trailing dot. *labels gets the label count. NULL when valid,
 * else the phrase for the first violation. */
static const char *ldh_structure(const char *s, size_t n, size_t *labels)
{
    size_t count = 0, start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '.') {
            if (!is_ldh((unsigned char) s[i]))
                return "a character other than a-z, 0-9, '-' and '.': a host name has only "
                       "these (and '_' is not a host name character)";
            continue;
        }
        size_t len = i - start;
        if (len == 0)
            return "an empty label (a leading dot or two dots in a row)";
        if (len > LABEL_MAX)
            return "a label longer than 63 characters";
        if (s[start] == '-' || s[i - 1] == '-')
            return "a label that starts or ends with '-'";
        count++;
        start = i + 1;
    }
    *labels = count;
    return NULL;
}

bool lz_host_name_canonical(const char *in, size_t len, char out[static LZ_HOST_NAME_MAX + 1])
{
    if (len > 0 && in[len - 1] == '.')
        len--;
    if (len == 0 || len > LZ_HOST_NAME_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char) in[i];
        out[i] = (char) (c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    out[len] = '\0';
    size_t labels;
    return ldh_structure(out, len, &labels) == NULL;
}

/* The last label is all digits: no top-level domain is numeric, and every
 * such name (1.2.3.4, but also 10.1 or 0x7f.0.0.1, which inet_aton takes as
 * addresses) is an address in disguise. */
static bool numeric_last_label(const char *s, size_t n)
{
    size_t i = n;
    while (i > 0 && s[i - 1] != '.')
        i--;
    if (i == n)
        return false;
    for (size_t k = i; k < n; k++)
        if (!is_digit((unsigned char) s[k]))
            return false;
    return true;
}

bool lz_host_pattern_parse(const char *s, lz_host_pattern *ret, const char **why)
{
    size_t n = strlen(s);
    if (n == 0) {
        *why = "an empty name: write a host name such as \"api.example.com\"";
        return false;
    }
    for (size_t i = 0; i < n; i++)
        if ((unsigned char) s[i] >= 0x80) {
            *why = "non-ASCII characters: write the A-label (punycode), e.g. "
                   "\"xn--bcher-kva.example\" "
                   "for \"bücher.example\"; Lazaret does no IDNA conversion";
            return false;
        }
    for (size_t i = 0; i < n; i++)
        if (s[i] >= 'A' && s[i] <= 'Z') {
            *why = "uppercase letters: write names in lowercase (DNS names are compared "
                   "lowercased)";
            return false;
        }
    if (strcmp(s, "*") == 0 || strcmp(s, "*.") == 0) {
        *why = "a wildcard alone would match every name: write a parent, e.g. \"*.example.com\"";
        return false;
    }
    if (s[n - 1] == '.' && n > 1) {
        *why = "a trailing dot: write the name without it (\"example.com\", not "
               "\"example.com.\")";
        return false;
    }
    bool wildcard = false;
    const char *name = s;
    if (strncmp(s, "*.", 2) == 0) {
        wildcard = true;
        name = s + 2;
    }
    if (strchr(name, '*')) {
        *why = "a wildcard is only allowed as the whole first label: \"*.example.com\"";
        return false;
    }
    size_t nn = strlen(name);
    if (n > LZ_HOST_NAME_MAX) {
        *why = wildcard ? "longer than 253 characters (the names it matches are longer still, and "
                          "no DNS name is longer than 253)"
                        : "longer than 253 characters, the longest DNS name";
        return false;
    }
    size_t labels = 0;
    const char *bad = ldh_structure(name, nn, &labels);
    if (bad) {
        *why = bad;
        return false;
    }
    if (numeric_last_label(name, nn)) {
        *why = "an IPv4 address (or a name whose last label is a number), not a host name: "
               "write addresses as prefixes in allow_egress/deny_egress, e.g. \"192.0.2.1/32\"";
        return false;
    }
    if (labels < 2) {
        *why = wildcard ? "a wildcard over a top-level domain: the parent of \"*.\" must have at "
                          "least two labels, e.g. \"*.example.com\""
                        : "a single label (such as \"localhost\" or \"com\"): write a name of at "
                          "least two labels; rules for a whole top-level domain are not allowed";
        return false;
    }
    ret->name = lz_xstrndup(name, nn);
    ret->wildcard = wildcard;
    return true;
}

bool lz_host_pattern_matches(const lz_host_pattern *p, const char *name)
{
    if (!p->wildcard)
        return strcmp(p->name, name) == 0;
    size_t pn = strlen(p->name), n = strlen(name);
    /* Strictly below: at least one label, then a dot, then the parent. */
    return n >= pn + 2 && name[n - pn - 1] == '.' && strcmp(name + n - pn, p->name) == 0;
}

void lz_host_pattern_format(const lz_host_pattern *p, char buf[static LZ_HOST_NAME_MAX + 3])
{
    size_t n = strnlen(p->name, LZ_HOST_NAME_MAX);
    size_t at = 0;
    if (p->wildcard) {
        buf[at++] = '*';
        buf[at++] = '.';
    }
    memcpy(buf + at, p->name, n);
    buf[at + n] = '\0';
}

/* How specific a matching pattern is: an exact name beats every wildcard,
 * and of two wildcards that match one name the longer parent is the one
 * nearer to it (one parent is then a suffix of the other). */
static size_t specificity(const lz_host_pattern *p)
{
    return p->wildcard ? strlen(p->name) : SIZE_MAX;
}

static const lz_host_pattern *best_match(const lz_host_list *list, const char *name)
{
    const lz_host_pattern *best = NULL;
    if (!list)
        return NULL;
    for (size_t i = 0; i < list->count; i++) {
        const lz_host_pattern *p = &list->items[i];
        if (lz_host_pattern_matches(p, name) && (!best || specificity(p) > specificity(best)))
            best = p;
    }
    return best;
}

lz_host_verdict lz_host_decide(const lz_host_list *allow, const lz_host_list *deny,
                               const char *name, const lz_host_pattern **rule)
{
    const lz_host_pattern *a = best_match(allow, name);
    const lz_host_pattern *d = best_match(deny, name);
    lz_host_verdict v = LZ_HOST_UNLISTED;
    const lz_host_pattern *by = NULL;
    if (d && (!a || specificity(d) >= specificity(a))) {
        v = LZ_HOST_DENIED;
        by = d;
    } else if (a) {
        v = LZ_HOST_ALLOWED;
        by = a;
    }
    if (rule)
        *rule = by;
    return v;
}

static int pattern_cmp(const lz_host_pattern *a, const lz_host_pattern *b)
{
    int c = strcmp(a->name, b->name);
    if (c)
        return c;
    return (int) a->wildcard - (int) b->wildcard;
}

bool lz_host_list_contains(const lz_host_list *list, const lz_host_pattern *p)
{
    for (size_t i = 0; i < list->count; i++)
        if (pattern_cmp(&list->items[i], p) == 0)
            return true;
    return false;
}

void lz_host_list_add(lz_host_list *list, const lz_host_pattern *p)
{
    size_t at = 0;
    while (at < list->count) {
        int c = pattern_cmp(&list->items[at], p);
        if (c == 0)
            return;
        if (c > 0)
            break;
        at++;
    }
    list->items = lz_xrealloc(list->items, list->count + 1, sizeof(*list->items));
    memmove(&list->items[at + 1], &list->items[at], (list->count - at) * sizeof(*list->items));
    list->items[at] = (lz_host_pattern){ lz_xstrdup(p->name), p->wildcard };
    list->count++;
}

void lz_host_pattern_clear(lz_host_pattern *p)
{
    free(p->name);
    p->name = NULL;
    p->wildcard = false;
}

void lz_host_list_clear(lz_host_list *list)
{
    for (size_t i = 0; i < list->count; i++)
        lz_host_pattern_clear(&list->items[i]);
    free(list->items);
    list->items = NULL;
    list->count = 0;
}
