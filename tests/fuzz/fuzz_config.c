/* SPDX-License-Identifier: Apache-2.0
 *
 * libFuzzer target for the configuration decoder, the one decoder of
 * untrusted-shaped bytes in the config layer. Each input is fed to
 *
 *  1. lz_config_doc_parse(), the schema entry point (which includes TOML
 *     parsing), checking the error contract and a few invariants of a
 *     decoded document; and
 *  2. lz_toml_parse() directly, checking the invariants of the C tree that
 *     toml.h promises (sorted NUL-free keys, NUL-free UTF-8 strings with
 *     the stated length, known positions) or of the diagnostic.
 *
 * Both results are freed on every path, so LeakSanitizer reports leaks. An
 * invariant violation aborts, which libFuzzer records as a crash.
 *
 * Run: build-dir/tests/fuzz/fuzz_config -dict=tests/fuzz/fuzz_config.dict
 *          -max_len=8192 NEW_CORPUS_DIR tests/fuzz/corpus/fuzz_config
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/text.h"
#include "common/util.h"
#include "config/schema.h"
#include "config/toml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_NAME "fuzz_config"
#include "fuzz_check.h"

static FILE *sink(void)
{
    static FILE *devnull;
    if (!devnull)
        devnull = fopen("/dev/null", "w");
    return devnull;
}

static bool cstring_ok(const char *s)
{
    return s && lz_utf8_valid(s, strlen(s));
}

static void check_node(const lz_toml_node *n)
{
    CHECK(n != NULL);
    CHECK(n->line >= 1 && n->column >= 1);
    switch (n->type) {
    case LZ_TOML_TABLE:
        CHECK(n->u.table.count == 0 || n->u.table.entries != NULL);
        for (size_t i = 0; i < n->u.table.count; i++) {
            const lz_toml_entry *e = &n->u.table.entries[i];
            CHECK(cstring_ok(e->key));
            CHECK(e->line >= 1 && e->column >= 1);
            if (i > 0)
                CHECK(strcmp(n->u.table.entries[i - 1].key, e->key) < 0);
            CHECK(lz_toml_get(n, e->key) == e->value);
            check_node(e->value);
        }
        break;
    case LZ_TOML_ARRAY:
        CHECK(n->u.array.count == 0 || n->u.array.items != NULL);
        for (size_t i = 0; i < n->u.array.count; i++)
            check_node(n->u.array.items[i]);
        break;
    case LZ_TOML_STRING:
        CHECK(n->u.string.bytes != NULL);
        CHECK(memchr(n->u.string.bytes, '\0', n->u.string.len) == NULL);
        CHECK(n->u.string.bytes[n->u.string.len] == '\0');
        CHECK(lz_utf8_valid(n->u.string.bytes, n->u.string.len));
        break;
    case LZ_TOML_INTEGER:
    case LZ_TOML_FLOAT:
    case LZ_TOML_BOOLEAN:
    case LZ_TOML_DATE:
    case LZ_TOML_TIME:
    case LZ_TOML_DATETIME:
    default:
        break;
    }
    CHECK(lz_toml_type_name(n->type) != NULL);
}

/* Entry 2: the TOML reader alone. Returns whether it accepted the input. */
static bool fuzz_toml(const char *buf, size_t len)
{
    lz_toml_node sentinel;
    lz_toml_node *root = &sentinel;
    lz_toml_diag diag;
    memset(&diag, 0xA5, sizeof(diag));
    if (lz_toml_parse(buf, len, &root, &diag) < 0) {
        CHECK(root == &sentinel);
        CHECK(memchr(diag.message, '\0', sizeof(diag.message)) != NULL);
        CHECK(diag.message[0] != '\0');
        return false;
    }
    CHECK(root != &sentinel && root != NULL);
    CHECK(root->type == LZ_TOML_TABLE);
    /* a document that was accepted is valid UTF-8 as a whole */
    CHECK(lz_utf8_valid(buf, len));
    check_node(root);
    lz_toml_free(root);
    return true;
}

/* A decoded host list: every pattern round-trips through its text, is a
 * canonical wire name itself (what the DNS responder compares against),
 * and the list is sorted without duplicates. */
static void check_hosts(const lz_host_decls *d, unsigned version)
{
    if (version == 1)
        CHECK(d->list.count == 0 && d->count == 0);
    CHECK(d->list.count <= d->count);
    for (size_t i = 0; i < d->list.count; i++) {
        const lz_host_pattern *p = &d->list.items[i];
        char text[LZ_HOST_NAME_MAX + 3], canon[LZ_HOST_NAME_MAX + 1];
        lz_host_pattern_format(p, text);
        CHECK(strlen(text) <= LZ_HOST_NAME_MAX);
        lz_host_pattern again = { 0 };
        const char *why = NULL;
        CHECK(lz_host_pattern_parse(text, &again, &why));
        CHECK(strcmp(again.name, p->name) == 0 && again.wildcard == p->wildcard);
        lz_host_pattern_clear(&again);
        CHECK(lz_host_name_canonical(p->name, strlen(p->name), canon));
        CHECK(strcmp(canon, p->name) == 0);
        CHECK(lz_host_list_contains(&d->list, p));
        if (i > 0) {
            int c = strcmp(d->list.items[i - 1].name, p->name);
            CHECK(c < 0 || (c == 0 && !d->list.items[i - 1].wildcard && p->wildcard));
        }
    }
}

/* No pattern is both allowed and denied once [network]'s lists are merged
 * with the profile's. */
static void check_no_contradiction(const lz_config_doc *doc, const lz_profile_decl *pr)
{
    const lz_host_list *allow[2] = { &doc->default_allow_hosts.list, &pr->allow_hosts.list };
    const lz_host_list *deny[2] = { &doc->default_deny_hosts.list, &pr->deny_hosts.list };
    for (int a = 0; a < 2; a++)
        for (size_t i = 0; i < allow[a]->count; i++)
            for (int d = 0; d < 2; d++)
                CHECK(!lz_host_list_contains(deny[d], &allow[a]->items[i]));
}

static void check_doc(const lz_config_doc *doc)
{
    CHECK(doc->schema_version == 1 || doc->schema_version == 2);
    CHECK(doc->n_resolvers <= LZ_CONFIG_RESOLVERS_MAX);
    if (doc->schema_version == 1)
        CHECK(doc->n_resolvers == 0 && doc->default_dns == LZ_DNS_DECL_UNSET);
    check_hosts(&doc->default_allow_hosts, doc->schema_version);
    check_hosts(&doc->default_deny_hosts, doc->schema_version);
    CHECK(doc->label && strcmp(doc->label, "fuzz.toml") == 0);
    CHECK(doc->n_profiles >= 1 && doc->profiles != NULL);
    for (size_t i = 0; i < doc->n_profiles; i++) {
        const lz_profile_decl *p = &doc->profiles[i];
        CHECK(cstring_ok(p->name));
        CHECK(cstring_ok(p->image) && p->image[0] != '\0');
        if (i > 0)
            CHECK(strcmp(doc->profiles[i - 1].name, p->name) < 0);
        CHECK(lz_config_doc_profile(doc, p->name) == p);
        check_hosts(&p->allow_hosts, doc->schema_version);
        check_hosts(&p->deny_hosts, doc->schema_version);
        check_no_contradiction(doc, p);
        if (doc->schema_version == 1)
            CHECK(p->dns == LZ_DNS_DECL_UNSET);
        for (size_t k = 0; k < p->n_persistent_dirs; k++)
            CHECK(cstring_ok(p->persistent_dirs[k]));
        for (size_t k = 0; k < p->n_env; k++)
            CHECK(cstring_ok(p->env[k].sandbox_name) && cstring_ok(p->env[k].host_name));
        for (size_t k = 0; k < p->n_volumes; k++)
            CHECK(cstring_ok(p->volumes[k].host) && cstring_ok(p->volumes[k].container));
        for (size_t k = 0; k < p->n_rules; k++) {
            CHECK(cstring_ok(p->rules[k].executable));
            for (size_t a = 0; a < p->rules[k].n_args; a++)
                CHECK(cstring_ok(p->rules[k].args[a]));
            /* auto-approval rules exist only while escalation is enabled */
            CHECK(p->escalation_enabled);
        }
    }
    if (doc->data_root)
        CHECK(cstring_ok(doc->data_root));
}

/* Entry 1: the schema decoder. Returns whether it accepted the input. */
static bool fuzz_doc(const char *buf, size_t len)
{
    lz_config_doc *doc = NULL;
    lz_error *err = NULL;
    if (lz_config_doc_parse(buf, len, "fuzz.toml", &doc, &err) < 0) {
        CHECK(doc == NULL);
        CHECK(err != NULL && err->message != NULL);
        if (sink())
            lz_error_report(err, sink());
        lz_error_free(err);
        return false;
    }
    CHECK(err == NULL);
    CHECK(doc != NULL);
    check_doc(doc);
    lz_config_doc_free(doc);
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* libFuzzer hands over an exactly sized copy: reads past size are caught */
    const char *buf = (const char *) data;
    bool doc_ok = fuzz_doc(buf, size);
    bool toml_ok = fuzz_toml(buf, size);
    /* the schema decoder accepts only documents the TOML reader accepts */
    if (doc_ok)
        CHECK(toml_ok);
    return 0;
}
