/* SPDX-License-Identifier: Apache-2.0
 *
 * The decoding helpers every part of the configuration schema shares
 * (schema.c for v1, schema_hosts.c for the v2 host keys): one diagnostic
 * format, "LABEL:LINE:COL: KEY.PATH: what was expected", and a hint.
 * Internal to src/config.
 */
#ifndef LAZARET_CONFIG_SCHEMA_INTERNAL_H
#define LAZARET_CONFIG_SCHEMA_INTERNAL_H

#include <stdbool.h>

#include "common/error.h"
#include "config/schema.h"
#include "config/toml.h"

typedef struct lz_schema_ctx {
    const char *label;
    lz_error **err;
    unsigned schema_version; /* 1 or 2, once the schema key is read */
} lz_schema_ctx;

/* Sets *c->err and returns -1. */
int lz_schema_fail(lz_schema_ctx *c, const lz_source_pos *pos, const char *keypath,
                   const char *hint, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
lz_source_pos lz_schema_pos(const lz_toml_node *n);
char *lz_schema_child_path(const char *parent, const char *key);
/* Every key of table t must be in allowed (NULL-terminated). */
int lz_schema_check_fields(lz_schema_ctx *c, const lz_toml_node *t, const char *keypath,
                           const char *const *allowed, const char *allowed_text);
int lz_schema_expect_type(lz_schema_ctx *c, const lz_toml_node *n, lz_toml_type t,
                          const char *keypath, const char *expected);
int lz_schema_get_string(lz_schema_ctx *c, const lz_toml_node *n, const char *keypath, char **ret);
int lz_schema_get_bool(lz_schema_ctx *c, const lz_toml_node *n, const char *keypath, bool *ret);

/* The v2 keys (schema_hosts.c). Each returns 0, or -1 with *c->err. */
int lz_schema_host_list(lz_schema_ctx *c, const lz_toml_node *n, const char *keypath,
                        lz_host_decls *ret);
int lz_schema_dns_mode(lz_schema_ctx *c, const lz_toml_node *n, const char *keypath,
                       lz_dns_decl *ret, lz_source_pos *pos);
int lz_schema_resolvers(lz_schema_ctx *c, const lz_toml_node *n, const char *keypath,
                        lz_config_doc *doc);
/* The same pattern allowed and denied for profile pr, after merging the
 * profile's lists with [network]'s. */
int lz_schema_host_conflicts(lz_schema_ctx *c, const lz_config_doc *doc, const lz_profile_decl *pr,
                             const char *keypath);
/* Whether key is one of the keys schema v2 adds (for the v1 hint;
 * schema_decode.c). */
bool lz_schema_key_is_v2(const char *key);

#endif
