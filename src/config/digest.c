/* SPDX-License-Identifier: Apache-2.0
 *
 * Canonical framing for DomainIdV1, ConfigurationFingerprintV1 and V2.
 * bytes(x) = u32be(len) || x; a Boolean is one byte; a list is u32be(count)
 * followed by bytes(item) per item, items sorted by unsigned bytewise order of
 * their complete encodings (rule arguments keep their declared order).
 */
#include "config/digest.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "config/resolve.h"

static const char domain_sep[] = "lazaret-domain-id-v1";                         /* + NUL */
static const char fingerprint_sep[] = "lazaret-configuration-fingerprint-v1";    /* + NUL */
static const char fingerprint_v2_sep[] = "lazaret-configuration-fingerprint-v2"; /* + NUL */

static void frame_reserve(lz_frame *f, size_t extra)
{
    if (f->len + extra <= f->cap)
        return;
    size_t cap = f->cap ? f->cap : 64;
    while (cap < f->len + extra)
        cap *= 2;
    f->data = lz_xrealloc(f->data, cap, 1);
    f->cap = cap;
}

void lz_frame_raw(lz_frame *f, const void *p, size_t n)
{
    if (!n)
        return;
    frame_reserve(f, n);
    memcpy(f->data + f->len, p, n);
    f->len += n;
}

void lz_frame_u32be(lz_frame *f, uint64_t v)
{
    if (v > UINT32_MAX) {
        f->overflow = 1;
        v = 0;
    }
    uint8_t b[4] = { (uint8_t) (v >> 24), (uint8_t) (v >> 16), (uint8_t) (v >> 8), (uint8_t) v };
    lz_frame_raw(f, b, 4);
}

void lz_frame_bytes(lz_frame *f, const void *p, size_t n)
{
    lz_frame_u32be(f, n);
    lz_frame_raw(f, p, n);
}

void lz_frame_bool(lz_frame *f, int b)
{
    uint8_t v = b ? 1 : 0;
    lz_frame_raw(f, &v, 1);
}

static int frame_cmp(const void *a, const void *b)
{
    const lz_frame *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = n ? memcmp(x->data, y->data, n) : 0;
    if (c)
        return c;
    return (x->len > y->len) - (x->len < y->len);
}

static void frame_list(lz_frame *f, lz_frame *items, size_t n, bool sort)
{
    if (sort && n > 1)
        qsort(items, n, sizeof(*items), frame_cmp);
    lz_frame_u32be(f, n);
    for (size_t i = 0; i < n; i++) {
        if (items[i].overflow)
            f->overflow = 1;
        lz_frame_bytes(f, items[i].data, items[i].len);
        lz_frame_free(&items[i]);
    }
}

void lz_frame_sorted_list(lz_frame *f, lz_frame *items, size_t n)
{
    frame_list(f, items, n, true);
}

void lz_frame_ordered_list(lz_frame *f, lz_frame *items, size_t n)
{
    frame_list(f, items, n, false);
}

void lz_frame_free(lz_frame *f)
{
    free(f->data);
    f->data = NULL;
    f->len = f->cap = 0;
}

static int sha256(const lz_frame *f, uint8_t out[32], const char *what, lz_error **err)
{
    if (f->overflow)
        return lz_error_set(err, 0, "cannot compute the %s: a length does not fit 32 bits", what);
    unsigned int n = 0;
    if (EVP_Digest(f->data, f->len, out, &n, EVP_sha256(), NULL) != 1 || n != 32)
        return lz_error_set(err, 0, "cannot compute the %s: SHA-256 failed in OpenSSL", what);
    return 0;
}

int lz_domain_id_v1(const char *profile, const char *canonical_workspace, uint8_t out[32],
                    lz_error **err)
{
    lz_frame f = { 0 };
    lz_frame_raw(&f, domain_sep, sizeof(domain_sep)); /* includes the NUL */
    lz_frame_bytes(&f, profile, strlen(profile));
    lz_frame_bytes(&f, canonical_workspace, strlen(canonical_workspace));
    int r = sha256(&f, out, "Domain ID", err);
    lz_frame_free(&f);
    return r;
}

static void frame_prefixes(lz_frame *f, const lz_ipv4_prefix_list *l)
{
    lz_frame *items = lz_xcalloc(l->count, sizeof(lz_frame));
    for (size_t i = 0; i < l->count; i++) {
        lz_frame_raw(&items[i], l->items[i].addr, 4);
        lz_frame_raw(&items[i], &l->items[i].len, 1);
    }
    lz_frame_sorted_list(f, items, l->count);
    free(items);
}

/* The plain `environment` values: list(bytes(name) ‖ bytes(value)). */
static void frame_environment(lz_frame *f, const lz_resolved_config *cfg)
{
    lz_frame *items = lz_xcalloc(cfg->n_environment, sizeof(lz_frame));
    for (size_t i = 0; i < cfg->n_environment; i++) {
        const lz_setenv_decl *e = &cfg->environment[i];
        lz_frame_bytes(&items[i], e->name, strlen(e->name));
        lz_frame_bytes(&items[i], e->value, strlen(e->value));
    }
    lz_frame_sorted_list(f, items, cfg->n_environment);
    free(items);
}

/* The fields the fingerprint and the parts share, each framed one way. */

static void frame_persistent_dirs(lz_frame *f, const lz_resolved_config *cfg)
{
    lz_frame *items = lz_xcalloc(cfg->n_persistent_dirs, sizeof(lz_frame));
    for (size_t i = 0; i < cfg->n_persistent_dirs; i++)
        lz_frame_bytes(&items[i], cfg->persistent_dirs[i], strlen(cfg->persistent_dirs[i]));
    lz_frame_sorted_list(f, items, cfg->n_persistent_dirs);
    free(items);
}

/* env: names only (values are never hashed). */
static void frame_env_references(lz_frame *f, const lz_resolved_config *cfg)
{
    lz_frame *items = lz_xcalloc(cfg->n_env, sizeof(lz_frame));
    for (size_t i = 0; i < cfg->n_env; i++) {
        lz_frame_bytes(&items[i], cfg->env[i].sandbox_name, strlen(cfg->env[i].sandbox_name));
        lz_frame_bytes(&items[i], cfg->env[i].host_name, strlen(cfg->env[i].host_name));
    }
    lz_frame_sorted_list(f, items, cfg->n_env);
    free(items);
}

static void frame_volumes(lz_frame *f, const lz_resolved_config *cfg)
{
    lz_frame *items = lz_xcalloc(cfg->n_volumes, sizeof(lz_frame));
    for (size_t i = 0; i < cfg->n_volumes; i++) {
        const lz_resolved_volume *v = &cfg->volumes[i];
        lz_frame_bytes(&items[i], v->source.label, strlen(v->source.label));
        lz_frame_bytes(&items[i], v->container, strlen(v->container));
        lz_frame_bool(&items[i], v->kind == LZ_VOLUME_DIRECTORY);
        lz_frame_bool(&items[i], v->access == LZ_ACCESS_READ_WRITE);
        lz_frame_bool(&items[i], v->create);
    }
    lz_frame_sorted_list(f, items, cfg->n_volumes);
    free(items);
}

/* escalation.enabled, then the rules. */
static void frame_rules(lz_frame *f, const lz_resolved_config *cfg)
{
    lz_frame_bool(f, cfg->escalation_enabled);
    lz_frame *items = lz_xcalloc(cfg->n_rules, sizeof(lz_frame));
    for (size_t i = 0; i < cfg->n_rules; i++) {
        const lz_resolved_rule *r = &cfg->rules[i];
        lz_frame_bytes(&items[i], r->executable.label, strlen(r->executable.label));
        lz_frame *args = lz_xcalloc(r->n_args, sizeof(lz_frame));
        /* An argument item is bytes(arg); the list frames each item again. */
        for (size_t k = 0; k < r->n_args; k++)
            lz_frame_bytes(&args[k], r->args[k], strlen(r->args[k]));
        lz_frame_ordered_list(&items[i], args, r->n_args);
        free(args);
        lz_frame_bool(&items[i], r->allow_extra_args);
    }
    lz_frame_sorted_list(f, items, cfg->n_rules);
    free(items);
}

/* Resolvers are asked in the declared order: the list keeps it. */
static void frame_resolvers(lz_frame *f, const lz_resolved_config *cfg)
{
    lz_frame *items = lz_xcalloc(cfg->n_resolvers, sizeof(lz_frame));
    for (size_t i = 0; i < cfg->n_resolvers; i++)
        lz_frame_bytes(&items[i], cfg->resolvers[i], 4);
    lz_frame_ordered_list(f, items, cfg->n_resolvers);
    free(items);
}

/* Every field of ConfigurationFingerprintV1 after its separator. */
static void frame_v1_fields(lz_frame *f, const lz_resolved_config *cfg)
{
    lz_frame_bytes(f, cfg->profile, strlen(cfg->profile));
    lz_frame_bytes(f, cfg->storage_root.label, strlen(cfg->storage_root.label));
    lz_frame_bytes(f, cfg->runtime_root.label, strlen(cfg->runtime_root.label));
    lz_frame_bytes(f, cfg->image, strlen(cfg->image));
    lz_frame_bool(f, cfg->isolate_gitignored);
    frame_persistent_dirs(f, cfg);
    frame_env_references(f, cfg);
    frame_volumes(f, cfg);
    frame_prefixes(f, &cfg->allow);
    frame_prefixes(f, &cfg->deny);
    frame_rules(f, cfg);
}

int lz_configuration_fingerprint_v1(const lz_resolved_config *cfg, uint8_t out[32], lz_error **err)
{
    lz_frame f = { 0 };
    lz_frame_raw(&f, fingerprint_sep, sizeof(fingerprint_sep));
    frame_v1_fields(&f, cfg);
    int ret = sha256(&f, out, "configuration fingerprint", err);
    lz_frame_free(&f);
    return ret;
}

/* A host list as the sorted list of its patterns as configured ("x" or
 * "*.x"), each bytes(text). */
static void frame_hosts(lz_frame *f, const lz_host_list *l)
{
    lz_frame *items = lz_xcalloc(l->count, sizeof(lz_frame));
    for (size_t i = 0; i < l->count; i++) {
        char text[LZ_HOST_NAME_MAX + 3];
        lz_host_pattern_format(&l->items[i], text);
        lz_frame_bytes(&items[i], text, strlen(text));
    }
    lz_frame_sorted_list(f, items, l->count);
    free(items);
}

int lz_configuration_fingerprint_v2(const lz_resolved_config *cfg, uint8_t out[32], lz_error **err)
{
    lz_frame f = { 0 };
    lz_frame_raw(&f, fingerprint_v2_sep, sizeof(fingerprint_v2_sep));
    frame_v1_fields(&f, cfg);
    frame_hosts(&f, &cfg->allow_hosts);
    frame_hosts(&f, &cfg->deny_hosts);
    const char *mode = cfg->dns_mode == LZ_DNS_STRICT ? "strict" : "forward";
    lz_frame_bytes(&f, mode, strlen(mode));
    frame_resolvers(&f, cfg);
    /* Issue 26: plain environment values, framed only when there are any,
     * so every earlier v2 file keeps its fingerprint (a tagged frame: no
     * configuration without the key frames these bytes). */
    if (cfg->n_environment) {
        static const char tag[] = "environment";
        lz_frame_bytes(&f, tag, sizeof(tag) - 1);
        frame_environment(&f, cfg);
    }
    int ret = sha256(&f, out, "configuration fingerprint", err);
    lz_frame_free(&f);
    return ret;
}

/* ---- parts (issue 26) ---------------------------------------------------- */

int lz_configuration_parts(const lz_resolved_config *cfg, lz_config_part out[LZ_CONFIG_PARTS],
                           lz_error **err)
{
    static const char *const names[LZ_CONFIG_PARTS] = {
        "image",         "isolate_gitignored",       "persistent_dirs", "env/environment",
        "volumes",       "allow_egress/deny_egress", "escalation",      "allow_hosts/deny_hosts",
        "dns/resolvers", "data_root/schema",
    };
    for (size_t k = 0; k < LZ_CONFIG_PARTS; k++) {
        lz_frame f = { 0 };
        lz_frame_bytes(&f, names[k], strlen(names[k]));
        switch (k) {
        case 0:
            lz_frame_bytes(&f, cfg->image, strlen(cfg->image));
            break;
        case 1:
            lz_frame_bool(&f, cfg->isolate_gitignored);
            break;
        case 2:
            frame_persistent_dirs(&f, cfg);
            break;
        case 3: /* env: names only; environment: the plain values, as the
                 * fingerprint frames them */
            frame_env_references(&f, cfg);
            frame_environment(&f, cfg);
            break;
        case 4:
            frame_volumes(&f, cfg);
            break;
        case 5:
            frame_prefixes(&f, &cfg->allow);
            frame_prefixes(&f, &cfg->deny);
            break;
        case 6:
            frame_rules(&f, cfg);
            break;
        case 7:
            frame_hosts(&f, &cfg->allow_hosts);
            frame_hosts(&f, &cfg->deny_hosts);
            break;
        case 8:
            lz_frame_bool(&f, cfg->dns_mode == LZ_DNS_STRICT);
            frame_resolvers(&f, cfg);
            break;
        default:
            lz_frame_bytes(&f, cfg->storage_root.label, strlen(cfg->storage_root.label));
            lz_frame_bytes(&f, cfg->runtime_root.label, strlen(cfg->runtime_root.label));
            lz_frame_u32be(&f, cfg->schema_version);
            break;
        }
        out[k].name = names[k];
        int r = sha256(&f, out[k].digest, "configuration part digest", err);
        lz_frame_free(&f);
        if (r < 0)
            return -1;
    }
    return 0;
}
