/* SPDX-License-Identifier: Apache-2.0
 *
 * Decoding helpers shared by the configuration schema's parts
 * (schema_internal.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "config/schema_internal.h"

static const char *const v2_keys[] = {
    "allow_hosts",        "deny_hosts",  "dns",       "default_allow_hosts",
    "default_deny_hosts", "default_dns", "resolvers", NULL,
};

bool lz_schema_key_is_v2(const char *key)
{
    for (const char *const *k = v2_keys; *k; k++)
        if (strcmp(*k, key) == 0)
            return true;
    return false;
}

int lz_schema_fail(lz_schema_ctx *c, const lz_source_pos *pos, const char *keypath,
                   const char *hint, const char *fmt, ...)
{
    _cleanup_free_ char *what = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&what, fmt, ap) < 0)
        what = NULL;
    va_end(ap);
    if (pos && pos->line && pos->column)
        lz_error_set(c->err, 0, "%s:%u:%u: %s: %s", c->label, pos->line, pos->column, keypath,
                     what ? what : "invalid value");
    else if (pos && pos->line)
        lz_error_set(c->err, 0, "%s:%u: %s: %s", c->label, pos->line, keypath,
                     what ? what : "invalid value");
    else
        lz_error_set(c->err, 0, "%s: %s: %s", c->label, keypath, what ? what : "invalid value");
    if (hint)
        lz_error_hint(c->err, "%s", hint);
    return -1;
}

lz_source_pos lz_schema_pos(const lz_toml_node *n)
{
    lz_source_pos p = { n ? n->line : 0, n ? n->column : 0 };
    return p;
}

char *lz_schema_child_path(const char *parent, const char *key)
{
    if (!parent || !*parent)
        return lz_xstrdup(key);
    return lz_xasprintf("%s.%s", parent, key);
}

int lz_schema_check_fields(lz_schema_ctx *c, const lz_toml_node *t, const char *keypath,
                           const char *const *allowed, const char *allowed_text)
{
    for (size_t i = 0; i < t->u.table.count; i++) {
        const lz_toml_entry *e = &t->u.table.entries[i];
        bool ok = false;
        for (const char *const *a = allowed; *a; a++)
            if (strcmp(e->key, *a) == 0)
                ok = true;
        if (!ok) {
            lz_source_pos p = { e->line, e->column };
            _cleanup_free_ char *kp = lz_schema_child_path(keypath, e->key);
            /* A v2 key in a v1 file is unknown there, as before v2 existed;
             * the hint says how to get it. */
            _cleanup_free_ char *hint =
                c->schema_version == 1 && lz_schema_key_is_v2(e->key)
                    ? lz_xasprintf("'%s' needs schema = \"" LZ_CONFIG_SCHEMA_ID_V2
                                   "\" (a v1 file keeps the fields: %s)",
                                   e->key, allowed_text)
                    : lz_xasprintf("remove '%s'; the fields allowed here are: %s", e->key,
                                   allowed_text);
            return lz_schema_fail(c, &p, kp, hint, "unknown field '%s'", e->key);
        }
    }
    return 0;
}

int lz_schema_expect_type(lz_schema_ctx *c, const lz_toml_node *n, lz_toml_type t,
                          const char *keypath, const char *expected)
{
    if (n->type == t)
        return 0;
    lz_source_pos p = lz_schema_pos(n);
    const char *found = lz_toml_type_name(n->type);
    _cleanup_free_ char *hint = lz_xasprintf("write %s here", expected);
    return lz_schema_fail(c, &p, keypath, hint, "expected %s, found %s %s", expected,
                          strchr("aeiou", found[0]) ? "an" : "a", found);
}

int lz_schema_get_string(lz_schema_ctx *c, const lz_toml_node *n, const char *keypath, char **ret)
{
    if (lz_schema_expect_type(c, n, LZ_TOML_STRING, keypath, "a string") < 0)
        return -1;
    *ret = lz_xstrdup(n->u.string.bytes);
    return 0;
}

int lz_schema_get_bool(lz_schema_ctx *c, const lz_toml_node *n, const char *keypath, bool *ret)
{
    if (lz_schema_expect_type(c, n, LZ_TOML_BOOLEAN, keypath, "a boolean (true or false)") < 0)
        return -1;
    *ret = n->u.boolean;
    return 0;
}
