/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests of src/config/hosts.c: the host pattern grammar of
 * configuration v2 (an accept/refuse table with every bound at its edge and
 * each refusal's own reason), the canonical form of names met on the wire,
 * matching, and lz_host_decide's precedence (exact over wildcard, the
 * longer wildcard parent over the shorter, deny on a tie, unlisted).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config/hosts.h"

/* A name of exactly n characters made of 63-character labels ("aaa…a.")
 * ending in ".test": every label within bounds, so only the length can be
 * what a refusal is about. */
static char *name_of_length(size_t n)
{
    char *s = malloc(n + 1);
    assert_non_null(s);
    const char *tail = ".test";
    size_t body = n - strlen(tail), at = 0, in_label = 0;
    while (at < body) {
        /* A dot after 63 characters, but never first, last or doubled. */
        if (in_label == 63 && at + 1 < body) {
            s[at++] = '.';
            in_label = 0;
        } else {
            s[at++] = 'a';
            in_label++;
        }
    }
    memcpy(s + at, tail, strlen(tail) + 1);
    assert_int_equal(strlen(s), n);
    return s;
}

static char *label_of_length(size_t n, const char *parent)
{
    char *s = malloc(n + strlen(parent) + 2);
    assert_non_null(s);
    memset(s, 'b', n);
    s[n] = '.';
    strcpy(s + n + 1, parent);
    return s;
}

static void accept_pattern(const char *s, const char *name, bool wildcard)
{
    lz_host_pattern p = { 0 };
    const char *why = NULL;
    if (!lz_host_pattern_parse(s, &p, &why))
        fail_msg("'%s' refused: %s", s, why);
    assert_string_equal(p.name, name);
    assert_int_equal(p.wildcard, wildcard);
    char buf[LZ_HOST_NAME_MAX + 3];
    lz_host_pattern_format(&p, buf);
    assert_string_equal(buf, s); /* the configured text round-trips */
    lz_host_pattern_clear(&p);
}

/* Refused, and the reason contains `about` (each case has its own). */
static void refuse_pattern(const char *s, const char *about)
{
    lz_host_pattern p = { 0 };
    const char *why = NULL;
    if (lz_host_pattern_parse(s, &p, &why)) {
        lz_host_pattern_clear(&p);
        fail_msg("'%s' accepted", s);
    }
    assert_non_null(why);
    if (!strstr(why, about))
        fail_msg("'%s': reason '%s' lacks '%s'", s, why, about);
    assert_null(p.name);
}

static void test_pattern_accepts(void **state)
{
    (void) state;
    accept_pattern("api.anthropic.com", "api.anthropic.com", false);
    accept_pattern("registry.npmjs.org", "registry.npmjs.org", false);
    accept_pattern("a.b", "a.b", false);
    accept_pattern("*.example.com", "example.com", true);
    accept_pattern("*.a.b.c.d", "a.b.c.d", true);
    accept_pattern("xn--bcher-kva.example", "xn--bcher-kva.example", false);
    accept_pattern("0-9.a-b.test", "0-9.a-b.test", false);
    accept_pattern("123.example.com", "123.example.com", false); /* digits in a label, not last */
    accept_pattern("1.2.3.example", "1.2.3.example", false);
}

static void test_pattern_bounds(void **state)
{
    (void) state;
    /* Label: 63 accepted, 64 refused; in the first label and in a parent. */
    char *s = label_of_length(63, "example.com");
    accept_pattern(s, s, false);
    free(s);
    s = label_of_length(64, "example.com");
    refuse_pattern(s, "longer than 63");
    free(s);
    char *parent = label_of_length(63, "com");
    s = malloc(strlen(parent) + 3);
    sprintf(s, "*.%s", parent);
    accept_pattern(s, parent, true);
    free(s);
    free(parent);
    parent = label_of_length(64, "com");
    s = malloc(strlen(parent) + 3);
    sprintf(s, "*.%s", parent);
    refuse_pattern(s, "longer than 63");
    free(s);
    free(parent);

    /* Whole name: 253 accepted, 254 refused. */
    s = name_of_length(253);
    accept_pattern(s, s, false);
    free(s);
    s = name_of_length(254);
    refuse_pattern(s, "longer than 253");
    free(s);
    /* A wildcard counts as written: "*." + 251 = 253 ok, + 252 refused. */
    char *p251 = name_of_length(251), *p252 = name_of_length(252);
    s = malloc(260);
    sprintf(s, "*.%s", p251);
    accept_pattern(s, p251, true);
    sprintf(s, "*.%s", p252);
    refuse_pattern(s, "longer than 253");
    free(s);
    free(p251);
    free(p252);
}

static void test_pattern_refusals(void **state)
{
    (void) state;
    refuse_pattern("", "empty name");
    refuse_pattern("Api.Example.com", "uppercase");
    refuse_pattern("api.example.COM", "uppercase");
    refuse_pattern("api.example.com.", "trailing dot");
    refuse_pattern("*.example.com.", "trailing dot");
    refuse_pattern("bücher.example", "A-label");
    refuse_pattern("bücher.example", "xn--");
    refuse_pattern("\xe2\x80\x8b"
                   "api.example.com",
                   "A-label"); /* a zero-width space */
    refuse_pattern("1.2.3.4", "IPv4 address");
    refuse_pattern("10.1", "IPv4 address");
    refuse_pattern("0x7f.0.0.1", "IPv4 address");
    refuse_pattern("*.1.2.3", "IPv4 address");
    refuse_pattern("localhost", "single label");
    refuse_pattern("com", "single label");
    refuse_pattern("*.com", "at least two labels");
    refuse_pattern("*", "wildcard alone");
    refuse_pattern("*.", "wildcard alone");
    refuse_pattern("a.*.b", "whole first label");
    refuse_pattern("*x.example.com", "whole first label");
    refuse_pattern("x*.example.com", "whole first label");
    refuse_pattern("**.example.com", "whole first label");
    refuse_pattern("*.*.example.com", "whole first label");
    refuse_pattern("example.*", "whole first label");
    refuse_pattern("_dmarc.example.com", "'_' is not");
    refuse_pattern("api example.com", "a character other than");
    refuse_pattern("api.example.com:443", "a character other than");
    refuse_pattern("https://api.example.com", "a character other than");
    refuse_pattern("a..b.com", "empty label");
    refuse_pattern(".example.com", "empty label");
    refuse_pattern(".", "empty label");
    refuse_pattern("-api.example.com", "starts or ends with '-'");
    refuse_pattern("api-.example.com", "starts or ends with '-'");
    refuse_pattern("*.-x.com", "starts or ends with '-'");
}

static bool canon(const char *in, char out[static LZ_HOST_NAME_MAX + 1])
{
    return lz_host_name_canonical(in, strlen(in), out);
}

static void test_wire_canonical(void **state)
{
    (void) state;
    char out[LZ_HOST_NAME_MAX + 1];
    assert_true(canon("API.Example.COM", out));
    assert_string_equal(out, "api.example.com");
    assert_true(canon("api.example.com.", out)); /* one trailing dot dropped */
    assert_string_equal(out, "api.example.com");
    assert_true(canon("Api.Example.Com.", out));
    assert_string_equal(out, "api.example.com");
    assert_false(canon("api.example.com..", out)); /* only one */
    assert_false(canon(".", out));                 /* the root is no host */
    assert_false(canon("", out));
    assert_false(canon("_acme-challenge.example.com", out));
    assert_false(canon("a..b", out));
    assert_false(canon("-a.b", out));
    assert_false(canon("a b.c", out));
    assert_false(canon("b\xc3\xbc"
                       "cher.example",
                       out));
    assert_false(canon("*.example.com", out)); /* a wildcard is no name */
    /* A single label is a name (no rule can cover it: unlisted). */
    assert_true(canon("LocalHost", out));
    assert_string_equal(out, "localhost");

    /* Not NUL-terminated: only len bytes are read. */
    const char buf[] = { 'a', '.', 'b', 'X', 'Y' };
    assert_true(lz_host_name_canonical(buf, 3, out));
    assert_string_equal(out, "a.b");
    /* An embedded NUL is a character outside the grammar. */
    const char nul[] = { 'a', '\0', '.', 'b' };
    assert_false(lz_host_name_canonical(nul, sizeof(nul), out));

    /* Bounds: 253 (and 253 plus the trailing dot) ok, 254 refused; 63-char
     * labels ok, 64 refused. */
    char *s = name_of_length(253);
    assert_true(canon(s, out));
    assert_string_equal(out, s);
    char *dotted = malloc(256);
    sprintf(dotted, "%s.", s);
    assert_true(canon(dotted, out));
    assert_string_equal(out, s);
    free(dotted);
    free(s);
    s = name_of_length(254);
    assert_false(canon(s, out));
    free(s);
    s = label_of_length(63, "example.com");
    assert_true(canon(s, out));
    free(s);
    s = label_of_length(64, "example.com");
    assert_false(canon(s, out));
    free(s);
}

static lz_host_pattern pat(const char *s)
{
    lz_host_pattern p = { 0 };
    const char *why;
    if (!lz_host_pattern_parse(s, &p, &why))
        fail_msg("'%s' refused: %s", s, why);
    return p;
}

static void test_matches(void **state)
{
    (void) state;
    lz_host_pattern w = pat("*.example.com"), e = pat("example.com");
    assert_true(lz_host_pattern_matches(&w, "a.example.com"));
    assert_true(lz_host_pattern_matches(&w, "a.b.example.com"));
    assert_false(lz_host_pattern_matches(&w, "example.com")); /* never the parent */
    assert_false(lz_host_pattern_matches(&w, "badexample.com"));
    assert_false(lz_host_pattern_matches(&w, ".example.com"));
    assert_false(lz_host_pattern_matches(&w, "example.com.evil"));
    assert_true(lz_host_pattern_matches(&e, "example.com"));
    assert_false(lz_host_pattern_matches(&e, "a.example.com"));
    assert_false(lz_host_pattern_matches(&e, "example.co"));
    lz_host_pattern_clear(&w);
    lz_host_pattern_clear(&e);
}

static void list_of(lz_host_list *l, const char *const *items)
{
    for (; *items; items++) {
        lz_host_pattern p = pat(*items);
        lz_host_list_add(l, &p);
        lz_host_pattern_clear(&p);
    }
}

static void expect(const lz_host_list *allow, const lz_host_list *deny, const char *name,
                   lz_host_verdict want, const char *rule)
{
    const lz_host_pattern *by = (const lz_host_pattern *) (uintptr_t) 1;
    lz_host_verdict v = lz_host_decide(allow, deny, name, &by);
    if (v != want)
        fail_msg("%s: verdict %d, want %d", name, v, want);
    if (!rule) {
        assert_null(by);
        return;
    }
    assert_non_null(by);
    char buf[LZ_HOST_NAME_MAX + 3];
    lz_host_pattern_format(by, buf);
    if (strcmp(buf, rule) != 0)
        fail_msg("%s: decided by %s, want %s", name, buf, rule);
    assert_int_equal(lz_host_decide(allow, deny, name, NULL), want);
}

static void test_decide_precedence(void **state)
{
    (void) state;
    lz_host_list allow = { 0 }, deny = { 0 };
    list_of(&allow, (const char *[]){ "*.example.com", "api.ads.example.com", "*.b.example.com",
                                      "example.org", NULL });
    list_of(&deny, (const char *[]){ "*.ads.example.com", "bad.example.com", "*.c.b.example.com",
                                     "*.example.org", NULL });

    /* Unlisted. */
    expect(&allow, &deny, "example.net", LZ_HOST_UNLISTED, NULL);
    expect(&allow, &deny, "example.com", LZ_HOST_UNLISTED, NULL); /* not the parent */
    /* A wildcard allows the names below. */
    expect(&allow, &deny, "www.example.com", LZ_HOST_ALLOWED, "*.example.com");
    /* An exact deny beats the wildcard allow. */
    expect(&allow, &deny, "bad.example.com", LZ_HOST_DENIED, "bad.example.com");
    expect(&allow, &deny, "x.bad.example.com", LZ_HOST_ALLOWED, "*.example.com");
    /* The longer parent decides: *.ads denies below ads... */
    expect(&allow, &deny, "t.ads.example.com", LZ_HOST_DENIED, "*.ads.example.com");
    /* ...but an exact allow beats it... */
    expect(&allow, &deny, "api.ads.example.com", LZ_HOST_ALLOWED, "api.ads.example.com");
    /* ...and ads itself is only below *.example.com. */
    expect(&allow, &deny, "ads.example.com", LZ_HOST_ALLOWED, "*.example.com");
    /* Three levels: allow *.b, deny *.c.b. */
    expect(&allow, &deny, "x.b.example.com", LZ_HOST_ALLOWED, "*.b.example.com");
    expect(&allow, &deny, "x.c.b.example.com", LZ_HOST_DENIED, "*.c.b.example.com");
    expect(&allow, &deny, "c.b.example.com", LZ_HOST_ALLOWED, "*.b.example.com");
    /* An exact allow beside a wildcard deny of the same parent. */
    expect(&allow, &deny, "example.org", LZ_HOST_ALLOWED, "example.org");
    expect(&allow, &deny, "a.example.org", LZ_HOST_DENIED, "*.example.org");

    /* Deny wins a tie (a loaded configuration cannot hold one). */
    lz_host_list a2 = { 0 }, d2 = { 0 };
    list_of(&a2, (const char *[]){ "*.tie.test", "x.tie.test", NULL });
    list_of(&d2, (const char *[]){ "*.tie.test", "x.tie.test", NULL });
    expect(&a2, &d2, "y.tie.test", LZ_HOST_DENIED, "*.tie.test");
    expect(&a2, &d2, "x.tie.test", LZ_HOST_DENIED, "x.tie.test");
    /* Control: without the deny list the same names are allowed. */
    expect(&a2, NULL, "y.tie.test", LZ_HOST_ALLOWED, "*.tie.test");
    expect(&a2, NULL, "x.tie.test", LZ_HOST_ALLOWED, "x.tie.test");
    expect(NULL, NULL, "x.tie.test", LZ_HOST_UNLISTED, NULL);

    lz_host_list_clear(&allow);
    lz_host_list_clear(&deny);
    lz_host_list_clear(&a2);
    lz_host_list_clear(&d2);
}

static void test_list_sorted_dedup(void **state)
{
    (void) state;
    lz_host_list l = { 0 };
    list_of(&l, (const char *[]){ "b.test", "*.a.test", "a.test", "b.test", "*.a.test", "c.test",
                                  NULL });
    assert_int_equal(l.count, 4);
    const char *want[] = { "a.test", "*.a.test", "b.test", "c.test" };
    for (size_t i = 0; i < 4; i++) {
        char buf[LZ_HOST_NAME_MAX + 3];
        lz_host_pattern_format(&l.items[i], buf);
        assert_string_equal(buf, want[i]);
    }
    lz_host_pattern q = pat("*.a.test"), r = pat("*.b.test");
    assert_true(lz_host_list_contains(&l, &q));
    assert_false(lz_host_list_contains(&l, &r));
    lz_host_pattern_clear(&q);
    lz_host_pattern_clear(&r);
    lz_host_list_clear(&l);
    assert_int_equal(l.count, 0);
    assert_null(l.items);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pattern_accepts),   cmocka_unit_test(test_pattern_bounds),
        cmocka_unit_test(test_pattern_refusals),  cmocka_unit_test(test_wire_canonical),
        cmocka_unit_test(test_matches),           cmocka_unit_test(test_decide_precedence),
        cmocka_unit_test(test_list_sorted_dedup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
