/* SPDX-License-Identifier: Apache-2.0
 *
 * DomainIdV1 and ConfigurationFingerprintV1 (schema "Domain and configuration
 * digests"). The expected values were computed by an independent Python
 * implementation of the framing (hashlib + struct) and are cross-checked here
 * against a preimage that this test assembles byte by byte.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "common/util.h"
#include "config/digest.h"
#include "config/resolve.h"

static void hex(const uint8_t d[32], char out[65])
{
    lz_digest_hex(d, out);
}

static void test_domain_id_vector(void **state)
{
    (void) state;
    uint8_t d[32];
    char h[65];
    assert_int_equal(lz_domain_id_v1("claude", "/home/a/p", d, NULL), 0);
    hex(d, h);
    assert_string_equal(h, "00fbb57cd336413768facfd88219536775794373fff6978f092fd29dac167e89");
}

/* The framed fields must not be concatenated unframed: ("ab","/c") and
 * ("a","b/c") are different Domains. */
static void test_domain_id_framing_distinguishes(void **state)
{
    (void) state;
    uint8_t a[32], b[32];
    assert_int_equal(lz_domain_id_v1("ab", "/c", a, NULL), 0);
    assert_int_equal(lz_domain_id_v1("a", "b/c", b, NULL), 0);
    assert_memory_not_equal(a, b, 32);
}

/* ---- a hand-built resolved configuration ----------------------------- */

static char *s(const char *x)
{
    return lz_xstrdup(x);
}

static lz_resolved_config *sample(void)
{
    lz_resolved_config *c = lz_xcalloc(1, sizeof(*c));
    c->config_file = c->workspace = c->storage_root = c->runtime_root = c->profile_dir =
        c->storage_domain_root = c->runtime_domain_root = (lz_path_plan) LZ_PATH_PLAN_INIT;
    c->profile = s("claude");
    c->storage_root.label = s("/home/a/.local/share/lazaret");
    c->runtime_root.label = s("/run/user/1000/lazaret");
    c->image = s("docker.io/library/debian:trixie");
    c->isolate_gitignored = true;
    c->n_persistent_dirs = 2;
    c->persistent_dirs = lz_xcalloc(2, sizeof(char *));
    c->persistent_dirs[0] = s("/root");
    c->persistent_dirs[1] = s("/usr");
    c->n_env = 1;
    c->env = lz_xcalloc(1, sizeof(lz_resolved_env));
    c->env[0].sandbox_name = s("API_KEY");
    c->env[0].host_name = s("ANTHROPIC_API_KEY");
    c->env[0].value = s("secret value that must not matter");
    c->n_volumes = 2;
    c->volumes = lz_xcalloc(2, sizeof(lz_resolved_volume));
    c->volumes[0].source = (lz_path_plan) LZ_PATH_PLAN_INIT;
    c->volumes[0].source.label = s("/home/a/.local/share/lazaret/profiles/claude/state");
    c->volumes[0].container = s("/root/.claude");
    c->volumes[0].kind = LZ_VOLUME_DIRECTORY;
    c->volumes[0].access = LZ_ACCESS_READ_WRITE;
    c->volumes[0].create = true;
    c->volumes[1].source = (lz_path_plan) LZ_PATH_PLAN_INIT;
    c->volumes[1].source.label = s("/home/a/data.txt");
    c->volumes[1].container = s("/usr/share/data.txt");
    c->volumes[1].kind = LZ_VOLUME_FILE;
    c->volumes[1].access = LZ_ACCESS_READ_ONLY;
    c->volumes[1].create = false;
    lz_ipv4_prefix p;
    assert_true(lz_ipv4_prefix_parse("203.0.113.10/32", &p));
    lz_ipv4_list_add(&c->allow, &p);
    assert_true(lz_ipv4_prefix_parse("192.0.2.0/24", &p));
    lz_ipv4_list_add(&c->allow, &p);
    for (size_t i = 0; i < 3; i++)
        lz_ipv4_list_add(&c->deny, &lz_rfc1918_prefixes[i]);
    c->escalation_enabled = true;
    c->n_rules = 1;
    c->rules = lz_xcalloc(1, sizeof(lz_resolved_rule));
    c->rules[0].executable = (lz_path_plan) LZ_PATH_PLAN_INIT;
    c->rules[0].executable.label = s("/usr/bin/git");
    c->rules[0].n_args = 2;
    c->rules[0].args = lz_xcalloc(2, sizeof(char *));
    c->rules[0].args[0] = s("log");
    c->rules[0].args[1] = s("--oneline");
    c->rules[0].allow_extra_args = true;
    return c;
}

static char *fingerprint_hex(const lz_resolved_config *c)
{
    uint8_t d[32];
    static char h[65];
    assert_int_equal(lz_configuration_fingerprint_v1(c, d, NULL), 0);
    hex(d, h);
    return h;
}

static const char sample_fingerprint[] =
    "b46c3d77d9d66104f3a1cbdb3ea49731db01ae4eba108ee6cbb845b246e15887";

static void test_fingerprint_vector(void **state)
{
    (void) state;
    lz_resolved_config *c = sample();
    assert_string_equal(fingerprint_hex(c), sample_fingerprint);
    lz_resolved_config_free(c);
}

/* Byte-by-byte preimage, written out in the order the schema gives, with the
 * list items pre-sorted by hand. */
static void put(uint8_t *buf, size_t *n, const void *p, size_t len)
{
    memcpy(buf + *n, p, len);
    *n += len;
}

static void put_u32(uint8_t *buf, size_t *n, uint32_t v)
{
    uint8_t b[4] = { (uint8_t) (v >> 24), (uint8_t) (v >> 16), (uint8_t) (v >> 8), (uint8_t) v };
    put(buf, n, b, 4);
}

static void put_bytes(uint8_t *buf, size_t *n, const char *str)
{
    put_u32(buf, n, (uint32_t) strlen(str));
    put(buf, n, str, strlen(str));
}

static void put_byte(uint8_t *buf, size_t *n, uint8_t v)
{
    put(buf, n, &v, 1);
}

/* The fields of v1 after its separator, for sample(). */
static void put_v1_fields(uint8_t *pre, size_t *np)
{
    size_t n = *np;
    put_bytes(pre, &n, "claude");
    put_bytes(pre, &n, "/home/a/.local/share/lazaret");
    put_bytes(pre, &n, "/run/user/1000/lazaret");
    put_bytes(pre, &n, "docker.io/library/debian:trixie");
    put_byte(pre, &n, 1);
    /* persistent dirs: bytes("/root") < bytes("/usr") (length 5 vs 4 in the
     * first u32: 00000004 sorts first!) */
    put_u32(pre, &n, 2);
    put_u32(pre, &n, 8);
    put_bytes(pre, &n, "/usr");
    put_u32(pre, &n, 9);
    put_bytes(pre, &n, "/root");
    /* environment references */
    put_u32(pre, &n, 1);
    put_u32(pre, &n, 4 + 7 + 4 + 17);
    put_bytes(pre, &n, "API_KEY");
    put_bytes(pre, &n, "ANTHROPIC_API_KEY");
    /* volumes: encodings start with u32 length of the source: 16 < 51 */
    put_u32(pre, &n, 2);
    put_u32(pre, &n, 4 + 16 + 4 + 19 + 3);
    put_bytes(pre, &n, "/home/a/data.txt");
    put_bytes(pre, &n, "/usr/share/data.txt");
    put_byte(pre, &n, 0);
    put_byte(pre, &n, 0);
    put_byte(pre, &n, 0);
    put_u32(pre, &n, 4 + 50 + 4 + 13 + 3);
    put_bytes(pre, &n, "/home/a/.local/share/lazaret/profiles/claude/state");
    put_bytes(pre, &n, "/root/.claude");
    put_byte(pre, &n, 1);
    put_byte(pre, &n, 1);
    put_byte(pre, &n, 1);
    /* allow: 192.0.2.0/24 < 203.0.113.10/32 */
    put_u32(pre, &n, 2);
    put_u32(pre, &n, 5);
    put(pre, &n, "\xc0\x00\x02\x00\x18", 5);
    put_u32(pre, &n, 5);
    put(pre, &n, "\xcb\x00\x71\x0a\x20", 5);
    /* deny */
    put_u32(pre, &n, 3);
    put_u32(pre, &n, 5);
    put(pre, &n, "\x0a\x00\x00\x00\x08", 5);
    put_u32(pre, &n, 5);
    put(pre, &n, "\xac\x10\x00\x00\x0c", 5);
    put_u32(pre, &n, 5);
    put(pre, &n, "\xc0\xa8\x00\x00\x10", 5);
    put_byte(pre, &n, 1);
    /* rules: one, args in declared order */
    put_u32(pre, &n, 1);
    put_u32(pre, &n, 4 + 12 + 4 + (4 + 4 + 3) + (4 + 4 + 9) + 1);
    put_bytes(pre, &n, "/usr/bin/git");
    put_u32(pre, &n, 2);
    put_u32(pre, &n, 4 + 3); /* bytes(item) where item = bytes("log") */
    put_bytes(pre, &n, "log");
    put_u32(pre, &n, 4 + 9);
    put_bytes(pre, &n, "--oneline");
    put_byte(pre, &n, 1);
    *np = n;
}

static void test_fingerprint_preimage_by_hand(void **state)
{
    (void) state;
    uint8_t pre[2048];
    size_t n = 0;
    put(pre, &n, "lazaret-configuration-fingerprint-v1", 36);
    put_byte(pre, &n, 0);
    put_v1_fields(pre, &n);

    uint8_t d[32];
    unsigned int dl = 0;
    assert_int_equal(EVP_Digest(pre, n, d, &dl, EVP_sha256(), NULL), 1);
    char h[65];
    hex(d, h);
    assert_string_equal(h, sample_fingerprint);
}

/* Collections are order-independent. */
static void test_fingerprint_order_independent(void **state)
{
    (void) state;
    lz_resolved_config *c = sample();
    char *tmp = c->persistent_dirs[0];
    c->persistent_dirs[0] = c->persistent_dirs[1];
    c->persistent_dirs[1] = tmp;
    lz_resolved_volume v = c->volumes[0];
    c->volumes[0] = c->volumes[1];
    c->volumes[1] = v;
    assert_string_equal(fingerprint_hex(c), sample_fingerprint);
    lz_resolved_config_free(c);
}

/* Arguments keep their declared order. */
static void test_fingerprint_args_ordered(void **state)
{
    (void) state;
    lz_resolved_config *c = sample();
    char *tmp = c->rules[0].args[0];
    c->rules[0].args[0] = c->rules[0].args[1];
    c->rules[0].args[1] = tmp;
    assert_string_not_equal(fingerprint_hex(c), sample_fingerprint);
    lz_resolved_config_free(c);
}

/* Environment values are not part of the fingerprint. */
static void test_fingerprint_ignores_env_values(void **state)
{
    (void) state;
    lz_resolved_config *c = sample();
    free(c->env[0].value);
    c->env[0].value = s("another secret");
    assert_string_equal(fingerprint_hex(c), sample_fingerprint);
    lz_resolved_config_free(c);
}

/* Every fingerprinted field changes the digest. */
typedef void (*mutation)(lz_resolved_config *c);

static void m_profile(lz_resolved_config *c)
{
    free(c->profile);
    c->profile = s("claude2");
}
static void m_storage(lz_resolved_config *c)
{
    free(c->storage_root.label);
    c->storage_root.label = s("/srv/lz");
}
static void m_runtime(lz_resolved_config *c)
{
    free(c->runtime_root.label);
    c->runtime_root.label = s("/run/user/1001/lazaret");
}
static void m_image(lz_resolved_config *c)
{
    free(c->image);
    c->image = s("debian:bookworm");
}
static void m_isolate(lz_resolved_config *c)
{
    c->isolate_gitignored = false;
}
static void m_persistent(lz_resolved_config *c)
{
    free(c->persistent_dirs[1]);
    c->persistent_dirs[1] = s("/opt");
}
static void m_env_name(lz_resolved_config *c)
{
    free(c->env[0].sandbox_name);
    c->env[0].sandbox_name = s("KEY");
}
static void m_env_host(lz_resolved_config *c)
{
    free(c->env[0].host_name);
    c->env[0].host_name = s("OTHER");
}
static void m_vol_source(lz_resolved_config *c)
{
    free(c->volumes[1].source.label);
    c->volumes[1].source.label = s("/home/a/data2.txt");
}
static void m_vol_dest(lz_resolved_config *c)
{
    free(c->volumes[1].container);
    c->volumes[1].container = s("/usr/share/d.txt");
}
static void m_vol_kind(lz_resolved_config *c)
{
    c->volumes[1].kind = LZ_VOLUME_DIRECTORY;
}
static void m_vol_access(lz_resolved_config *c)
{
    c->volumes[1].access = LZ_ACCESS_READ_WRITE;
}
static void m_vol_create(lz_resolved_config *c)
{
    c->volumes[0].create = false;
}
static void m_allow(lz_resolved_config *c)
{
    c->allow.items[0].len = 25;
}
static void m_deny(lz_resolved_config *c)
{
    lz_ipv4_prefix p;
    assert_true(lz_ipv4_prefix_parse("198.51.100.0/24", &p));
    lz_ipv4_list_add(&c->deny, &p);
}
static void m_escalation(lz_resolved_config *c)
{
    c->escalation_enabled = false;
}
static void m_rule_exe(lz_resolved_config *c)
{
    free(c->rules[0].executable.label);
    c->rules[0].executable.label = s("/usr/bin/env");
}
static void m_rule_arg(lz_resolved_config *c)
{
    free(c->rules[0].args[1]);
    c->rules[0].args[1] = s("-1");
}
static void m_rule_extra(lz_resolved_config *c)
{
    c->rules[0].allow_extra_args = false;
}

static void test_fingerprint_every_field_counts(void **state)
{
    (void) state;
    const mutation ms[] = {
        m_profile,  m_storage,    m_runtime,  m_image,    m_isolate,    m_persistent, m_env_name,
        m_env_host, m_vol_source, m_vol_dest, m_vol_kind, m_vol_access, m_vol_create, m_allow,
        m_deny,     m_escalation, m_rule_exe, m_rule_arg, m_rule_extra,
    };
    for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
        lz_resolved_config *c = sample();
        ms[i](c);
        if (strcmp(fingerprint_hex(c), sample_fingerprint) == 0)
            fail_msg("mutation %zu did not change the fingerprint", i);
        lz_resolved_config_free(c);
    }
}

/* ---- ConfigurationFingerprintV2 (schema v2, issue 25) ------------------ */

static void add_host(lz_host_list *l, const char *text)
{
    lz_host_pattern p = { 0 };
    const char *why;
    assert_true(lz_host_pattern_parse(text, &p, &why));
    lz_host_list_add(l, &p);
    lz_host_pattern_clear(&p);
}

static lz_resolved_config *sample_v2(void)
{
    lz_resolved_config *c = sample();
    c->schema_version = 2;
    add_host(&c->allow_hosts, "api.anthropic.com");
    add_host(&c->allow_hosts, "*.example.com");
    add_host(&c->deny_hosts, "bad.example.com");
    c->dns_mode = LZ_DNS_STRICT;
    c->n_resolvers = 2;
    memcpy(c->resolvers[0], (uint8_t[]){ 203, 0, 113, 53 }, 4);
    memcpy(c->resolvers[1], (uint8_t[]){ 192, 0, 2, 53 }, 4);
    return c;
}

static char *fingerprint_v2_hex(const lz_resolved_config *c)
{
    uint8_t d[32];
    static char h[65];
    assert_int_equal(lz_configuration_fingerprint_v2(c, d, NULL), 0);
    hex(d, h);
    return h;
}

static const char sample_fingerprint_v2[] =
    "d41f9396f331d30a6c864a0f897a28cd9f2ae4b963af9ace6a303b2110f76422";

static void test_fingerprint_v2_vector(void **state)
{
    (void) state;
    lz_resolved_config *c = sample_v2();
    assert_string_equal(fingerprint_v2_hex(c), sample_fingerprint_v2);
    /* The v1 digest of the same configuration ignores the v2 fields: a v1
     * file (which cannot have them) keeps its v1 digest. */
    assert_string_equal(fingerprint_hex(c), sample_fingerprint);
    lz_resolved_config_free(c);
}

static void test_fingerprint_v2_preimage_by_hand(void **state)
{
    (void) state;
    uint8_t pre[2048];
    size_t n = 0;
    put(pre, &n, "lazaret-configuration-fingerprint-v2", 36);
    put_byte(pre, &n, 0);
    put_v1_fields(pre, &n);
    /* allow_hosts: bytes("*.example.com") (length 13) sorts before
     * bytes("api.anthropic.com") (17). */
    put_u32(pre, &n, 2);
    put_u32(pre, &n, 4 + 13);
    put_bytes(pre, &n, "*.example.com");
    put_u32(pre, &n, 4 + 17);
    put_bytes(pre, &n, "api.anthropic.com");
    /* deny_hosts */
    put_u32(pre, &n, 1);
    put_u32(pre, &n, 4 + 15);
    put_bytes(pre, &n, "bad.example.com");
    /* the DNS mode */
    put_bytes(pre, &n, "strict");
    /* resolvers in declared order, each bytes(4 address bytes) */
    put_u32(pre, &n, 2);
    put_u32(pre, &n, 8);
    put_u32(pre, &n, 4);
    put(pre, &n, "\xcb\x00\x71\x35", 4);
    put_u32(pre, &n, 8);
    put_u32(pre, &n, 4);
    put(pre, &n, "\xc0\x00\x02\x35", 4);

    uint8_t d[32];
    unsigned int dl = 0;
    assert_int_equal(EVP_Digest(pre, n, d, &dl, EVP_sha256(), NULL), 1);
    char h[65];
    hex(d, h);
    assert_string_equal(h, sample_fingerprint_v2);
}

static void m2_allow_host(lz_resolved_config *c)
{
    add_host(&c->allow_hosts, "registry.npmjs.org");
}
static void m2_wildcard(lz_resolved_config *c)
{
    /* "*.example.com" -> "example.com" */
    size_t changed = 0;
    for (size_t i = 0; i < c->allow_hosts.count; i++)
        if (c->allow_hosts.items[i].wildcard) {
            c->allow_hosts.items[i].wildcard = false;
            changed++;
        }
    assert_int_equal(changed, 1);
}
static void m2_deny_host(lz_resolved_config *c)
{
    lz_host_list_clear(&c->deny_hosts);
}
static void m2_dns(lz_resolved_config *c)
{
    c->dns_mode = LZ_DNS_FORWARD;
}
static void m2_resolver_order(lz_resolved_config *c)
{
    uint8_t t[4];
    memcpy(t, c->resolvers[0], 4);
    memcpy(c->resolvers[0], c->resolvers[1], 4);
    memcpy(c->resolvers[1], t, 4);
}
static void m2_resolver_count(lz_resolved_config *c)
{
    c->n_resolvers = 1;
}
static void m2_v1_field(lz_resolved_config *c)
{
    c->isolate_gitignored = false;
}
/* A host moved from one list to the other: the lists are framed apart. */
static void m2_host_moved(lz_resolved_config *c)
{
    lz_host_list_clear(&c->deny_hosts);
    add_host(&c->allow_hosts, "bad.example.com");
}

static void test_fingerprint_v2_every_field_counts(void **state)
{
    (void) state;
    const mutation ms[] = {
        m2_allow_host,     m2_wildcard,       m2_deny_host, m2_dns,
        m2_resolver_order, m2_resolver_count, m2_v1_field,  m2_host_moved,
    };
    for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
        lz_resolved_config *c = sample_v2();
        ms[i](c);
        if (strcmp(fingerprint_v2_hex(c), sample_fingerprint_v2) == 0)
            fail_msg("v2 mutation %zu did not change the fingerprint", i);
        lz_resolved_config_free(c);
    }
    /* Whether the mode was written or defaulted does not count: the same
     * effective mode is the same configuration. */
    lz_resolved_config *c = sample_v2();
    c->dns_mode_explicit = !c->dns_mode_explicit;
    assert_string_equal(fingerprint_v2_hex(c), sample_fingerprint_v2);
    lz_resolved_config_free(c);
    /* The v2 separator alone separates a v2 configuration without v2 keys
     * from the v1 one. */
    c = sample();
    assert_string_not_equal(fingerprint_v2_hex(c), sample_fingerprint);
    lz_resolved_config_free(c);
}

static void test_frame_primitives(void **state)
{
    (void) state;
    lz_frame f = { 0 };
    lz_frame_bytes(&f, "ab", 2);
    lz_frame_bool(&f, 7);
    assert_int_equal(f.len, 7);
    assert_memory_equal(f.data,
                        "\x00\x00\x00\x02"
                        "ab"
                        "\x01",
                        7);
    assert_int_equal(f.overflow, 0);
    lz_frame_u32be(&f, (uint64_t) UINT32_MAX + 1);
    assert_int_equal(f.overflow, 1);
    lz_frame_free(&f);

    /* Sorting compares complete encodings bytewise. */
    lz_frame items[3] = { { 0 }, { 0 }, { 0 } };
    lz_frame_raw(&items[0], "b", 1);
    lz_frame_raw(&items[1], "ab", 2);
    lz_frame_raw(&items[2], "a", 1);
    lz_frame out = { 0 };
    lz_frame_sorted_list(&out, items, 3);
    assert_memory_equal(out.data,
                        "\x00\x00\x00\x03"
                        "\x00\x00\x00\x01"
                        "a"
                        "\x00\x00\x00\x02"
                        "ab"
                        "\x00\x00\x00\x01"
                        "b",
                        4 + 5 + 6 + 5);
    lz_frame_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_domain_id_vector),
        cmocka_unit_test(test_domain_id_framing_distinguishes),
        cmocka_unit_test(test_fingerprint_vector),
        cmocka_unit_test(test_fingerprint_preimage_by_hand),
        cmocka_unit_test(test_fingerprint_order_independent),
        cmocka_unit_test(test_fingerprint_args_ordered),
        cmocka_unit_test(test_fingerprint_ignores_env_values),
        cmocka_unit_test(test_fingerprint_every_field_counts),
        cmocka_unit_test(test_frame_primitives),
        cmocka_unit_test(test_fingerprint_v2_vector),
        cmocka_unit_test(test_fingerprint_v2_preimage_by_hand),
        cmocka_unit_test(test_fingerprint_v2_every_field_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
