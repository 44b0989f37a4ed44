/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests for src/export/kubernetes.c: the registry reference grammar
 * (accepting and refusing cases; every string over a small alphabet of the
 * grammar's own characters is decided, so a loop that does not advance
 * hangs this test instead of a user's export), and the report lines of
 * configuration v2's host rules (not mappable, refused by --strict until
 * accepted; nothing for a profile without them).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/util.h"
#include "config/resolve.h"
#include "export/kubernetes.h"

static void test_references(void **state)
{
    (void) state;
    static const char *const good[] = {
        "debian",
        "debian:bookworm",
        "library/debian",
        "docker.io/library/debian:12.5-slim",
        "localhost/a",
        "localhost:5000/a/b:1.0",
        "Registry.Example:443/team/x__y--z.w:v1",
        "a/b@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "a:_t",
        "r.example:65535/a",
    };
    static const char *const bad[] = {
        "",
        "a b",
        "A/B",
        "registry.example/Team/a",
        "a:",
        "a@sha256:abc",
        "reg..example/a",
        "r.example:65536/a",
        "r.example:/a",
        "a/-b",
        "a/b..c",
        "a/b.",
        "a//b",
        "/a",
        "a/",
        "a:-t",
        "-r.example/a",
        "r.example/",
        "a@md5:00",
        "a:t@",
        "\x01",
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        if (!lz_k8s_registry_reference(good[i]))
            fail_msg("refused: '%s'", good[i]);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (lz_k8s_registry_reference(bad[i]))
            fail_msg("accepted: '%s'", bad[i]);
}

static void test_every_string_is_decided(void **state)
{
    (void) state;
    static const char alphabet[] = "aZ0._-/:@ ";
    char s[9];
    srand(14);
    for (int n = 0; n < 200000; n++) {
        size_t len = (size_t) (rand() % 8) + 1;
        for (size_t i = 0; i < len; i++)
            s[i] = alphabet[rand() % (int) (sizeof(alphabet) - 1)];
        s[len] = '\0';
        (void) lz_k8s_registry_reference(s);
    }
}

static void add_host(lz_host_list *l, const char *text)
{
    lz_host_pattern p = { 0 };
    const char *why;
    assert_true(lz_host_pattern_parse(text, &p, &why));
    lz_host_list_add(l, &p);
    lz_host_pattern_clear(&p);
}

static lz_resolved_config *profile_with(bool allow, bool deny, lz_dns_mode mode)
{
    lz_resolved_config *c = lz_xcalloc(1, sizeof(*c));
    c->config_file = c->workspace = c->storage_root = c->runtime_root = c->profile_dir =
        c->storage_domain_root = c->runtime_domain_root = (lz_path_plan) LZ_PATH_PLAN_INIT;
    c->profile = lz_xstrdup("p");
    c->workspace.label = lz_xstrdup("/home/a/ws");
    c->image =
        lz_xstrdup("registry.example/"
                   "a@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
    c->schema_version = 2;
    if (allow)
        add_host(&c->allow_hosts, "api.example.com");
    if (deny)
        add_host(&c->deny_hosts, "*.telemetry.example.net");
    c->dns_mode = mode;
    return c;
}

static const lz_map_entry *entry(const lz_k8s_export *e, const char *field)
{
    for (size_t i = 0; i < e->n_entries; i++)
        if (strcmp(e->entries[i].field, field) == 0)
            return &e->entries[i];
    return NULL;
}

static void test_host_rules_not_mappable(void **state)
{
    (void) state;
    lz_k8s_options o = { 0 };
    o.run_as = true;
    o.run_as_user = o.run_as_group = 1000;

    /* Control: no host rules, forward: none of the lines; the weakenings
     * left are git and limits.processes. */
    lz_resolved_config *c = profile_with(false, false, LZ_DNS_FORWARD);
    lz_k8s_export e = { 0 };
    assert_int_equal(lz_k8s_export_build(c, &o, &e, NULL), 0);
    assert_null(entry(&e, "allow_hosts"));
    assert_null(entry(&e, "deny_hosts"));
    assert_null(entry(&e, "dns"));
    size_t base = lz_k8s_export_strict_failures(&e);
    lz_k8s_export_clear(&e);
    lz_resolved_config_free(c);

    c = profile_with(true, true, LZ_DNS_STRICT);
    assert_int_equal(lz_k8s_export_build(c, &o, &e, NULL), 0);
    static const char *const fields[] = { "allow_hosts", "deny_hosts", "dns" };
    for (size_t i = 0; i < 3; i++) {
        const lz_map_entry *m = entry(&e, fields[i]);
        if (!m) {
            fail_msg("no report line %s", fields[i]);
            return;
        }
        assert_int_equal(m->status, LZ_MAP_NOT_MAPPABLE);
        assert_true(m->security_relevant);
    }
    /* No name reaches the objects: nothing is written for host rules. */
    char *yaml = json_dumps(e.documents, 0);
    assert_non_null(strstr(yaml, "NetworkPolicy"));
    assert_null(strstr(yaml, "api.example.com"));
    assert_null(strstr(yaml, "telemetry"));
    free(yaml);
    assert_int_equal(lz_k8s_export_strict_failures(&e), base + 3);
    for (size_t i = 0; i < 3; i++)
        assert_true(lz_k8s_export_accept(&e, fields[i]));
    assert_int_equal(lz_k8s_export_strict_failures(&e), base);
    lz_k8s_export_clear(&e);

    /* Without the cluster's DNS, strict is approximated and no weakening. */
    o.no_cluster_dns = true;
    assert_int_equal(lz_k8s_export_build(c, &o, &e, NULL), 0);
    const lz_map_entry *dns = entry(&e, "dns");
    if (!dns) {
        fail_msg("no report line dns");
        return;
    }
    assert_int_equal(dns->status, LZ_MAP_APPROXIMATED);
    assert_false(dns->security_relevant);
    lz_k8s_export_clear(&e);
    lz_resolved_config_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_references),
        cmocka_unit_test(test_every_string_is_decided),
        cmocka_unit_test(test_host_rules_not_mappable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
