/* SPDX-License-Identifier: Apache-2.0
 *
 * Strict structural decoding of configuration v1 and v2 (v2's own keys are
 * schema_hosts.c's). Every table rejects unknown
 * fields; every value has exactly one accepted type; enumerations accept only
 * their spelled values. The first violation refuses the whole document with
 * "LABEL:LINE:COL: KEY.PATH: <what was expected>" and a hint.
 */
#include "config/schema.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "config/grammar.h"
#include "config/schema_internal.h"
#include "config/toml.h"
#include "fs/confined.h"

/* ---- network ---------------------------------------------------------- */

static int get_prefix_list(lz_schema_ctx *c, const lz_toml_node *n, const char *keypath,
                           lz_ipv4_prefix_list *ret, lz_prefix_decls *decls)
{
    if (lz_schema_expect_type(c, n, LZ_TOML_ARRAY, keypath, "an array of IPv4 prefixes") < 0)
        return -1;
    for (size_t i = 0; i < n->u.array.count; i++) {
        const lz_toml_node *item = n->u.array.items[i];
        _cleanup_free_ char *kp = lz_xasprintf("%s[%zu]", keypath, i);
        if (lz_schema_expect_type(c, item, LZ_TOML_STRING, kp,
                                  "an IPv4 prefix string such as \"192.0.2.0/24\"") < 0)
            return -1;
        lz_ipv4_prefix p;
        if (!lz_ipv4_prefix_parse(item->u.string.bytes, &p)) {
            lz_source_pos pos = lz_schema_pos(item);
            return lz_schema_fail(
                c, &pos, kp,
                "write an IPv4 address and prefix length as a.b.c.d/n (decimal, no "
                "leading zeros, n from 0 to 32); IPv6 is not supported in v1",
                "'%s' is not an IPv4 prefix", item->u.string.bytes);
        }
        /* Only allow lists carry decls. An allow inside a range no sandbox
         * ever reaches is a mistake, refused here rather than silently
         * ineffective (or, for Lazaret's own links, a route that would
         * replace the link's own). A prefix that contains such a range is
         * fine: the router keeps the range unreachable. Deny lists may name
         * them: they say what holds anyway. */
        const lz_ipv4_reserved *nr = decls ? lz_ipv4_never_routed_holding(&p) : NULL;
        if (nr) {
            lz_source_pos pos = lz_schema_pos(item);
            char buf[LZ_IPV4_PREFIX_BUFSZ], range[LZ_IPV4_PREFIX_BUFSZ];
            lz_ipv4_prefix_format(&p, buf);
            lz_ipv4_prefix_format(&nr->prefix, range);
            return lz_schema_fail(
                c, &pos, kp,
                "remove it from the list: a sandbox never reaches this range, whatever "
                "the policy says, and services on this machine cannot be allowed to a "
                "sandbox (docs/network.md, \"Never reachable\")",
                "%s is inside %s, %s: no sandbox can reach it%s", buf, range, nr->what,
                strncmp(keypath, "network.", 8) == 0 ? " (network.default_allow "
                                                       "applies to every profile)"
                                                     : "");
        }
        lz_ipv4_list_add(ret, &p);
        if (decls) {
            decls->items = lz_xrealloc(decls->items, decls->count + 1, sizeof(*decls->items));
            decls->items[decls->count++] = (lz_prefix_decl){ p, i, lz_schema_pos(item) };
        }
    }
    return 0;
}

/* ---- profile parts ---------------------------------------------------- */

static int decode_persistent_dirs(lz_schema_ctx *c, const lz_toml_node *n, const char *keypath,
                                  lz_profile_decl *pr)
{
    if (lz_schema_expect_type(c, n, LZ_TOML_ARRAY, keypath, "an array of sandbox paths") < 0)
        return -1;
    size_t count = n->u.array.count;
    pr->persistent_dirs = lz_xcalloc(count, sizeof(char *));
    pr->persistent_pos = lz_xcalloc(count, sizeof(lz_source_pos));
    for (size_t i = 0; i < count; i++) {
        const lz_toml_node *item = n->u.array.items[i];
        _cleanup_free_ char *kp = lz_xasprintf("%s[%zu]", keypath, i);
        if (lz_schema_expect_type(c, item, LZ_TOML_STRING, kp, "a sandbox path string") < 0)
            return -1;
        const char *what;
        lz_source_pos pos = lz_schema_pos(item);
        if (!lz_sandbox_path_valid(item->u.string.bytes, &what))
            return lz_schema_fail(
                c, &pos, kp, "write a normalized absolute path such as \"/usr\" or \"/root\"",
                "'%s' is not a valid sandbox path: %s", item->u.string.bytes, what);
        for (size_t j = 0; j < pr->n_persistent_dirs; j++) {
            const char *other = pr->persistent_dirs[j];
            if (lz_path_overlaps(other, item->u.string.bytes))
                return lz_schema_fail(
                    c, &pos, kp,
                    "persistent paths must be distinct and neither may contain the "
                    "other; keep only the outer one",
                    "'%s' %s '%s' (%s[%zu])", item->u.string.bytes,
                    strcmp(other, item->u.string.bytes) == 0 ? "repeats" : "overlaps", other,
                    keypath, j);
        }
        pr->persistent_dirs[pr->n_persistent_dirs] = lz_xstrdup(item->u.string.bytes);
        pr->persistent_pos[pr->n_persistent_dirs] = pos;
        pr->n_persistent_dirs++;
    }
    return 0;
}

/* A key of `env` or `environment`: a variable's name. */
static int check_variable_name(lz_schema_ctx *c, const lz_toml_entry *e, const char *kp)
{
    lz_source_pos kpos = { e->line, e->column };
    if (!lz_env_name_valid(e->key))
        return lz_schema_fail(c, &kpos, kp, "environment names match [A-Za-z_][A-Za-z0-9_]*",
                              "'%s' is not a valid environment variable name", e->key);
    return 0;
}

static int decode_env(lz_schema_ctx *c, const lz_toml_node *n, const char *keypath,
                      lz_profile_decl *pr)
{
    if (lz_schema_expect_type(c, n, LZ_TOML_TABLE, keypath, "a table of NAME = \"env:HOST_NAME\"") <
        0)
        return -1;
    size_t count = n->u.table.count;
    pr->env = lz_xcalloc(count, sizeof(lz_env_decl));
    for (size_t i = 0; i < count; i++) {
        const lz_toml_entry *e = &n->u.table.entries[i];
        _cleanup_free_ char *kp = lz_schema_child_path(keypath, e->key);
        if (check_variable_name(c, e, kp) < 0 ||
            lz_schema_expect_type(c, e->value, LZ_TOML_STRING, kp, "a string \"env:HOST_NAME\"") <
                0)
            return -1;
        const char *v = e->value->u.string.bytes;
        lz_source_pos vpos = lz_schema_pos(e->value);
        if (strncmp(v, "env:", 4) != 0 || !lz_env_name_valid(v + 4))
            return lz_schema_fail(
                c, &vpos, kp,
                "a value is a reference to a host variable, written \"env:NAME\" with "
                "NAME matching [A-Za-z_][A-Za-z0-9_]*; literal values are not allowed so "
                "that secrets never live in the configuration file",
                "expected \"env:NAME\", found a value that is not an environment reference");
        lz_env_decl *d = &pr->env[pr->n_env++];
        d->sandbox_name = lz_xstrdup(e->key);
        d->host_name = lz_xstrdup(v + 4);
        d->pos = vpos;
    }
    return 0;
}

/* `environment = { NAME = "value" }`: values written in the file, so never
 * secrets (those are `env` references); a name may not be in both. */
static int decode_environment(lz_schema_ctx *c, const lz_toml_node *n, const char *keypath,
                              lz_profile_decl *pr)
{
    if (lz_schema_expect_type(c, n, LZ_TOML_TABLE, keypath, "a table of NAME = \"value\"") < 0)
        return -1;
    size_t count = n->u.table.count;
    pr->environment = lz_xcalloc(count, sizeof(lz_setenv_decl));
    for (size_t i = 0; i < count; i++) {
        const lz_toml_entry *e = &n->u.table.entries[i];
        _cleanup_free_ char *kp = lz_schema_child_path(keypath, e->key);
        lz_source_pos kpos = { e->line, e->column };
        if (check_variable_name(c, e, kp) < 0)
            return -1;
        if (strncmp(e->key, "LAZARET_", 8) == 0)
            return lz_schema_fail(c, &kpos, kp, "choose a name that does not start with LAZARET_",
                                  "names starting with LAZARET_ are Lazaret's own in the sandbox");
        for (size_t j = 0; j < pr->n_env; j++)
            if (strcmp(pr->env[j].sandbox_name, e->key) == 0)
                return lz_schema_fail(c, &kpos, kp,
                                      "keep the name in one of the two tables: `env` for secrets "
                                      "(references), `environment` for plain values",
                                      "'%s' is also set by env", e->key);
        if (lz_schema_expect_type(c, e->value, LZ_TOML_STRING, kp, "a string") < 0)
            return -1;
        const lz_toml_node *v = e->value;
        lz_source_pos vpos = lz_schema_pos(v);
        if (v->u.string.len > LZ_CONFIG_VALUE_MAX) /* NUL: the TOML shim refuses it */
            return lz_schema_fail(c, &vpos, kp, "shorten the value",
                                  "the value is longer than %d bytes", LZ_CONFIG_VALUE_MAX);
        lz_setenv_decl *d = &pr->environment[pr->n_environment++];
        d->name = lz_xstrdup(e->key);
        d->value = lz_xstrdup(v->u.string.bytes);
        d->pos = vpos;
    }
    return 0;
}

/* `command = ["claude", "--continue"]`: what `run PROFILE` runs without
 * `-- COMMAND`. A list of words, never a shell line. */
static int decode_command(lz_schema_ctx *c, const lz_toml_node *n, const char *keypath,
                          lz_profile_decl *pr)
{
    if (lz_schema_expect_type(c, n, LZ_TOML_ARRAY, keypath, "an array of strings") < 0)
        return -1;
    size_t count = n->u.array.count;
    lz_source_pos pos = lz_schema_pos(n);
    if (count == 0 || count > LZ_CONFIG_COMMAND_MAX)
        return lz_schema_fail(c, &pos, keypath,
                              "name the program and its arguments, e.g. command = [\"claude\"], "
                              "or remove the key for the image's login shell",
                              "expected 1 to %d words, found %zu", LZ_CONFIG_COMMAND_MAX, count);
    pr->command = lz_xcalloc(count + 1, sizeof(char *));
    for (size_t i = 0; i < count; i++) {
        _cleanup_free_ char *kp = lz_xasprintf("%s[%zu]", keypath, i);
        const lz_toml_node *w = n->u.array.items[i];
        if (lz_schema_expect_type(c, w, LZ_TOML_STRING, kp, "a string") < 0)
            return -1;
        lz_source_pos wpos = lz_schema_pos(w);
        if (w->u.string.len > LZ_CONFIG_VALUE_MAX || (i == 0 && w->u.string.len == 0))
            return lz_schema_fail(c, &wpos, kp,
                                  "a word is at most 4096 bytes; the first names the program",
                                  "not a usable command word");
        pr->command[pr->n_command++] = lz_xstrdup(w->u.string.bytes);
    }
    return 0;
}

static const char *const volume_fields[] = {
    "host", "container", "kind", "access", "create", NULL
};

static int decode_volume(lz_schema_ctx *c, const lz_toml_node *n, const char *keypath,
                         lz_volume_decl *v)
{
    if (lz_schema_expect_type(c, n, LZ_TOML_TABLE, keypath, "a volume table") < 0)
        return -1;
    if (lz_schema_check_fields(c, n, keypath, volume_fields,
                               "host, container, kind, access, create") < 0)
        return -1;
    lz_source_pos tpos = lz_schema_pos(n);
    v->pos = tpos;
    v->access = LZ_ACCESS_READ_WRITE;
    v->create = false;

    const lz_toml_node *host = lz_toml_get(n, "host");
    const lz_toml_node *container = lz_toml_get(n, "container");
    const lz_toml_node *kind = lz_toml_get(n, "kind");
    const lz_toml_node *access = lz_toml_get(n, "access");
    const lz_toml_node *create = lz_toml_get(n, "create");

    _cleanup_free_ char *kp_host = lz_schema_child_path(keypath, "host");
    _cleanup_free_ char *kp_container = lz_schema_child_path(keypath, "container");
    _cleanup_free_ char *kp_kind = lz_schema_child_path(keypath, "kind");
    _cleanup_free_ char *kp_access = lz_schema_child_path(keypath, "access");
    _cleanup_free_ char *kp_create = lz_schema_child_path(keypath, "create");

    if (!host)
        return lz_schema_fail(c, &tpos, kp_host,
                              "add host = \"{profile_dir}/NAME\" or an absolute path",
                              "required field is missing");
    if (!container)
        return lz_schema_fail(c, &tpos, kp_container, "add container = \"/sandbox/path\"",
                              "required field is missing");
    if (!kind)
        return lz_schema_fail(c, &tpos, kp_kind, "add kind = \"directory\" or kind = \"file\"",
                              "required field is missing");

    if (lz_schema_get_string(c, host, kp_host, &v->host) < 0)
        return -1;
    v->host_pos = lz_schema_pos(host);
    lz_host_path_anchor anchor;
    const char *suffix, *what;
    if (!lz_host_path_parse(v->host, true, &anchor, &suffix, &what))
        return lz_schema_fail(
            c, &v->host_pos, kp_host,
            "write an absolute path, or one beginning with exactly '~/' or "
            "'{profile_dir}/', without empty, '.' or '..' components or a trailing '/'",
            "'%s' is not a valid host path: %s", v->host, what);

    if (lz_schema_get_string(c, container, kp_container, &v->container) < 0)
        return -1;
    lz_source_pos cpos = lz_schema_pos(container);
    v->container_pos = cpos;
    if (!lz_sandbox_path_valid(v->container, &what))
        return lz_schema_fail(c, &cpos, kp_container,
                              "write a normalized absolute path inside a persistent directory",
                              "'%s' is not a valid sandbox path: %s", v->container, what);

    if (lz_schema_expect_type(c, kind, LZ_TOML_STRING, kp_kind, "\"file\" or \"directory\"") < 0)
        return -1;
    lz_source_pos kpos = lz_schema_pos(kind);
    if (strcmp(kind->u.string.bytes, "file") == 0)
        v->kind = LZ_VOLUME_FILE;
    else if (strcmp(kind->u.string.bytes, "directory") == 0)
        v->kind = LZ_VOLUME_DIRECTORY;
    else
        return lz_schema_fail(c, &kpos, kp_kind, "use kind = \"file\" or kind = \"directory\"",
                              "expected \"file\" or \"directory\", found \"%s\"",
                              kind->u.string.bytes);

    if (access) {
        if (lz_schema_expect_type(c, access, LZ_TOML_STRING, kp_access,
                                  "\"read-only\" or \"read-write\"") < 0)
            return -1;
        lz_source_pos apos = lz_schema_pos(access);
        if (strcmp(access->u.string.bytes, "read-only") == 0)
            v->access = LZ_ACCESS_READ_ONLY;
        else if (strcmp(access->u.string.bytes, "read-write") == 0)
            v->access = LZ_ACCESS_READ_WRITE;
        else
            return lz_schema_fail(
                c, &apos, kp_access, "use access = \"read-only\" or \"read-write\"",
                "expected \"read-only\" or \"read-write\", found \"%s\"", access->u.string.bytes);
    }
    if (create) {
        if (lz_schema_get_bool(c, create, kp_create, &v->create) < 0)
            return -1;
        lz_source_pos crpos = lz_schema_pos(create);
        if (v->create && v->kind != LZ_VOLUME_DIRECTORY)
            return lz_schema_fail(
                c, &crpos, kp_create,
                "a file source is never created; create it yourself or set create = false",
                "create = true is valid only for kind = \"directory\"");
        if (v->create && anchor != LZ_HOST_PROFILE_DIR)
            return lz_schema_fail(
                c, &crpos, kp_create,
                "put the directory under \"{profile_dir}/...\" or create it yourself and "
                "set create = false",
                "create = true is valid only for a host path beneath '{profile_dir}/'");
    }
    return 0;
}

static int decode_volumes(lz_schema_ctx *c, const lz_toml_node *n, const char *keypath,
                          lz_profile_decl *pr)
{
    if (lz_schema_expect_type(c, n, LZ_TOML_ARRAY, keypath, "an array of volume tables") < 0)
        return -1;
    size_t count = n->u.array.count;
    pr->volumes = lz_xcalloc(count, sizeof(lz_volume_decl));
    for (size_t i = 0; i < count; i++) {
        _cleanup_free_ char *kp = lz_xasprintf("%s[%zu]", keypath, i);
        lz_volume_decl *v = &pr->volumes[pr->n_volumes++];
        if (decode_volume(c, n->u.array.items[i], kp, v) < 0)
            return -1;
        _cleanup_free_ char *kpc = lz_schema_child_path(kp, "container");
        /* Container paths: pairwise distinct, non-ancestral. */
        for (size_t j = 0; j + 1 < pr->n_volumes; j++)
            if (lz_path_overlaps(pr->volumes[j].container, v->container))
                return lz_schema_fail(
                    c, &v->container_pos, kpc,
                    "volume destinations must be distinct and may not contain one another",
                    "'%s' overlaps the destination '%s' of %s[%zu]", v->container,
                    pr->volumes[j].container, keypath, j);
    }
    return 0;
}

static const char *const rule_fields[] = { "executable", "args", "allow_extra_args", NULL };

static int decode_rule(lz_schema_ctx *c, const lz_toml_node *n, const char *keypath,
                       lz_rule_decl *r)
{
    if (lz_schema_expect_type(c, n, LZ_TOML_TABLE, keypath, "an auto-approval rule table") < 0)
        return -1;
    if (lz_schema_check_fields(c, n, keypath, rule_fields, "executable, args, allow_extra_args") <
        0)
        return -1;
    r->pos = lz_schema_pos(n);
    const lz_toml_node *exe = lz_toml_get(n, "executable");
    const lz_toml_node *args = lz_toml_get(n, "args");
    const lz_toml_node *extra = lz_toml_get(n, "allow_extra_args");
    _cleanup_free_ char *kp_exe = lz_schema_child_path(keypath, "executable");
    _cleanup_free_ char *kp_args = lz_schema_child_path(keypath, "args");
    _cleanup_free_ char *kp_extra = lz_schema_child_path(keypath, "allow_extra_args");

    if (!exe)
        return lz_schema_fail(c, &r->pos, kp_exe, "add executable = \"/absolute/path/to/program\"",
                              "required field is missing");
    if (lz_schema_get_string(c, exe, kp_exe, &r->executable) < 0)
        return -1;
    r->executable_pos = lz_schema_pos(exe);
    lz_host_path_anchor anchor;
    const char *suffix, *what;
    if (!lz_host_path_parse(r->executable, false, &anchor, &suffix, &what))
        return lz_schema_fail(c, &r->executable_pos, kp_exe,
                              "write the program's absolute path (no PATH lookup is ever done)",
                              "'%s' is not a valid host path: %s", r->executable, what);
    if (args) {
        if (lz_schema_expect_type(c, args, LZ_TOML_ARRAY, kp_args, "an array of argument strings") <
            0)
            return -1;
        r->args = lz_xcalloc(args->u.array.count, sizeof(char *));
        for (size_t i = 0; i < args->u.array.count; i++) {
            _cleanup_free_ char *kp = lz_xasprintf("%s[%zu]", kp_args, i);
            if (lz_schema_get_string(c, args->u.array.items[i], kp, &r->args[r->n_args]) < 0)
                return -1;
            r->n_args++;
        }
    }
    if (extra && lz_schema_get_bool(c, extra, kp_extra, &r->allow_extra_args) < 0)
        return -1;
    if (r->allow_extra_args && r->n_args == 0) {
        lz_source_pos p = lz_schema_pos(extra);
        return lz_schema_fail(c, &p, kp_extra,
                              "list at least one fixed leading argument in args, or set "
                              "allow_extra_args = false",
                              "allow_extra_args = true requires at least one configured argument");
    }
    return 0;
}

static bool rules_equal_declared(const lz_rule_decl *a, const lz_rule_decl *b)
{
    if (strcmp(a->executable, b->executable) != 0 || a->n_args != b->n_args ||
        a->allow_extra_args != b->allow_extra_args)
        return false;
    for (size_t i = 0; i < a->n_args; i++)
        if (strcmp(a->args[i], b->args[i]) != 0)
            return false;
    return true;
}

static const char *const escalation_fields[] = { "enabled", "auto_approve", NULL };

static int decode_escalation(lz_schema_ctx *c, const lz_toml_node *n, const char *keypath,
                             lz_profile_decl *pr)
{
    if (lz_schema_expect_type(c, n, LZ_TOML_TABLE, keypath, "a table") < 0)
        return -1;
    if (lz_schema_check_fields(c, n, keypath, escalation_fields, "enabled, auto_approve") < 0)
        return -1;
    const lz_toml_node *enabled = lz_toml_get(n, "enabled");
    const lz_toml_node *rules = lz_toml_get(n, "auto_approve");
    _cleanup_free_ char *kp_enabled = lz_schema_child_path(keypath, "enabled");
    _cleanup_free_ char *kp_rules = lz_schema_child_path(keypath, "auto_approve");
    if (enabled && lz_schema_get_bool(c, enabled, kp_enabled, &pr->escalation_enabled) < 0)
        return -1;
    if (!rules)
        return 0;
    if (lz_schema_expect_type(c, rules, LZ_TOML_ARRAY, kp_rules,
                              "an array of auto-approval rule tables") < 0)
        return -1;
    if (!pr->escalation_enabled && rules->u.array.count > 0) {
        lz_source_pos p = lz_schema_pos(rules);
        return lz_schema_fail(c, &p, kp_rules,
                              "set enabled = true in this escalation table, or remove the rules",
                              "auto-approval rules are valid only while escalation is enabled");
    }
    pr->rules = lz_xcalloc(rules->u.array.count, sizeof(lz_rule_decl));
    for (size_t i = 0; i < rules->u.array.count; i++) {
        _cleanup_free_ char *kp = lz_xasprintf("%s[%zu]", kp_rules, i);
        lz_rule_decl *r = &pr->rules[pr->n_rules++];
        if (decode_rule(c, rules->u.array.items[i], kp, r) < 0)
            return -1;
        for (size_t j = 0; j + 1 < pr->n_rules; j++)
            if (rules_equal_declared(&pr->rules[j], r))
                return lz_schema_fail(c, &r->pos, kp, "remove one of the two identical rules",
                                      "duplicates %s[%zu]", kp_rules, j);
    }
    return 0;
}

static const char *const profile_fields[] = {
    "image",        "isolate_gitignored", "persistent_dirs",
    "allow_egress", "deny_egress",        "env",
    "volumes",      "escalation",         NULL,
};
static const char *const profile_fields_v2[] = {
    "image",
    "isolate_gitignored",
    "persistent_dirs",
    "allow_egress",
    "deny_egress",
    "env",
    "environment",
    "command",
    "volumes",
    "escalation",
    "allow_hosts",
    "deny_hosts",
    "dns",
    NULL,
};

/* An image reference: nonempty, printable ASCII without spaces. The
 * reference grammar itself belongs to skopeo; this only refuses values that
 * no transport accepts and that would confuse a terminal. */
static bool image_ref_plausible(const char *s)
{
    if (!*s)
        return false;
    for (const unsigned char *p = (const unsigned char *) s; *p; p++)
        if (*p <= 0x20 || *p >= 0x7f)
            return false;
    return true;
}

static int decode_profile(lz_schema_ctx *c, const char *name, const lz_source_pos *name_pos,
                          const lz_toml_node *n, const char *keypath, lz_profile_decl *pr)
{
    pr->name = lz_xstrdup(name);
    pr->isolate_gitignored = true;
    pr->pos = *name_pos;
    if (!lz_profile_name_valid(name))
        return lz_schema_fail(c, name_pos, keypath,
                              "profile names are 1 to 64 ASCII characters: a letter or digit, then "
                              "letters, digits, '.', '_' or '-'",
                              "'%s' is not a valid profile name", name);
    if (lz_schema_expect_type(c, n, LZ_TOML_TABLE, keypath, "a profile table") < 0)
        return -1;
    if ((c->schema_version == 2
             ? lz_schema_check_fields(c, n, keypath, profile_fields_v2,
                                      "image, isolate_gitignored, persistent_dirs, allow_egress, "
                                      "deny_egress, allow_hosts, deny_hosts, dns, env, "
                                      "environment, command, volumes, escalation")
             : lz_schema_check_fields(c, n, keypath, profile_fields,
                                      "image, isolate_gitignored, persistent_dirs, allow_egress, "
                                      "deny_egress, env, volumes, escalation")) < 0)
        return -1;

    const lz_toml_node *v;
    _cleanup_free_ char *kp_image = lz_schema_child_path(keypath, "image");
    if (!(v = lz_toml_get(n, "image"))) {
        lz_source_pos p = lz_schema_pos(n);
        return lz_schema_fail(
            c, p.line ? &p : name_pos, kp_image,
            "add image = \"docker.io/library/debian:bookworm\" (or an oci:/path:tag "
            "reference)",
            "required field is missing");
    }
    if (lz_schema_get_string(c, v, kp_image, &pr->image) < 0)
        return -1;
    if (!image_ref_plausible(pr->image)) {
        lz_source_pos p = lz_schema_pos(v);
        return lz_schema_fail(
            c, &p, kp_image,
            "write an OCI image reference such as \"docker.io/library/debian:bookworm\"",
            "expected a nonempty OCI image reference without spaces or control characters");
    }

    _cleanup_free_ char *kp;
    kp = lz_schema_child_path(keypath, "isolate_gitignored");
    if ((v = lz_toml_get(n, "isolate_gitignored")) &&
        lz_schema_get_bool(c, v, kp, &pr->isolate_gitignored) < 0)
        return -1;
    free(kp);
    kp = lz_schema_child_path(keypath, "persistent_dirs");
    if ((v = lz_toml_get(n, "persistent_dirs")) && decode_persistent_dirs(c, v, kp, pr) < 0)
        return -1;
    free(kp);
    kp = lz_schema_child_path(keypath, "allow_egress");
    if ((v = lz_toml_get(n, "allow_egress")) &&
        get_prefix_list(c, v, kp, &pr->allow_egress, &pr->allow_egress_decl) < 0)
        return -1;
    free(kp);
    kp = lz_schema_child_path(keypath, "deny_egress");
    if ((v = lz_toml_get(n, "deny_egress")) &&
        get_prefix_list(c, v, kp, &pr->deny_egress, NULL) < 0)
        return -1;
    free(kp);
    kp = lz_schema_child_path(keypath, "allow_hosts");
    if ((v = lz_toml_get(n, "allow_hosts")) && lz_schema_host_list(c, v, kp, &pr->allow_hosts) < 0)
        return -1;
    free(kp);
    kp = lz_schema_child_path(keypath, "deny_hosts");
    if ((v = lz_toml_get(n, "deny_hosts")) && lz_schema_host_list(c, v, kp, &pr->deny_hosts) < 0)
        return -1;
    free(kp);
    kp = lz_schema_child_path(keypath, "dns");
    if ((v = lz_toml_get(n, "dns")) && lz_schema_dns_mode(c, v, kp, &pr->dns, &pr->dns_pos) < 0)
        return -1;
    free(kp);
    kp = lz_schema_child_path(keypath, "env");
    if ((v = lz_toml_get(n, "env")) && decode_env(c, v, kp, pr) < 0)
        return -1;
    free(kp);
    kp = lz_schema_child_path(keypath, "environment");
    if ((v = lz_toml_get(n, "environment")) && decode_environment(c, v, kp, pr) < 0)
        return -1;
    free(kp);
    kp = lz_schema_child_path(keypath, "command");
    if ((v = lz_toml_get(n, "command")) && decode_command(c, v, kp, pr) < 0)
        return -1;
    free(kp);
    kp = lz_schema_child_path(keypath, "volumes");
    if ((v = lz_toml_get(n, "volumes")) && decode_volumes(c, v, kp, pr) < 0)
        return -1;

    /* Each volume destination is a strict descendant of exactly one
     * persistent path (persistent paths are non-ancestral, so "at least one"
     * is "exactly one"). */
    for (size_t i = 0; i < pr->n_volumes; i++) {
        const lz_volume_decl *vol = &pr->volumes[i];
        size_t parents = 0;
        for (size_t j = 0; j < pr->n_persistent_dirs; j++) {
            if (strcmp(vol->container, pr->persistent_dirs[j]) == 0) {
                _cleanup_free_ char *kpc = lz_xasprintf("%s[%zu].container", kp, i);
                return lz_schema_fail(
                    c, &vol->container_pos, kpc,
                    "mount the volume strictly inside the persistent directory, e.g. "
                    "\"<dir>/name\"",
                    "'%s' equals the persistent directory '%s'", vol->container,
                    pr->persistent_dirs[j]);
            }
            if (lz_path_is_strict_descendant(vol->container, pr->persistent_dirs[j]))
                parents++;
        }
        if (parents != 1) {
            _cleanup_free_ char *kpc = lz_xasprintf("%s[%zu].container", kp, i);
            return lz_schema_fail(
                c, &vol->container_pos, kpc,
                "add the enclosing directory to persistent_dirs, or move the volume "
                "inside one of them",
                "'%s' is not inside any persistent directory", vol->container);
        }
    }
    free(kp);
    kp = lz_schema_child_path(keypath, "escalation");
    if ((v = lz_toml_get(n, "escalation")) && decode_escalation(c, v, kp, pr) < 0)
        return -1;
    return 0;
}

/* The effective allow/deny sets of a profile may not share an exact prefix
 * (SR-6: equal-specificity conflicts are denied). Checked for every profile:
 * it needs neither the filesystem nor the environment. */
static int check_network_conflicts(lz_schema_ctx *c, const lz_config_doc *doc,
                                   const lz_profile_decl *pr, const char *keypath)
{
    lz_ipv4_prefix_list deny = { 0 };
    for (size_t i = 0; i < doc->default_deny.count; i++)
        lz_ipv4_list_add(&deny, &doc->default_deny.items[i]);
    for (size_t i = 0; i < pr->deny_egress.count; i++)
        lz_ipv4_list_add(&deny, &pr->deny_egress.items[i]);
    for (size_t i = 0; i < LZ_ARRAY_SIZE(lz_rfc1918_prefixes); i++)
        lz_ipv4_list_add(&deny, &lz_rfc1918_prefixes[i]);

    int r = 0;
    const lz_prefix_decls *allows[2] = { &doc->default_allow_decl, &pr->allow_egress_decl };
    for (int k = 0; k < 2 && r == 0; k++) {
        for (size_t i = 0; i < allows[k]->count; i++) {
            const lz_prefix_decl *d = &allows[k]->items[i];
            if (!lz_ipv4_list_contains(&deny, &d->prefix))
                continue;
            char buf[LZ_IPV4_PREFIX_BUFSZ];
            lz_ipv4_prefix_format(&d->prefix, buf);
            bool rfc1918 = false;
            for (size_t j = 0; j < LZ_ARRAY_SIZE(lz_rfc1918_prefixes); j++)
                if (lz_ipv4_prefix_cmp(&lz_rfc1918_prefixes[j], &d->prefix) == 0)
                    rfc1918 = true;
            _cleanup_free_ char *kp = k == 0
                                          ? lz_xasprintf("network.default_allow[%zu]", d->index)
                                          : lz_xasprintf("%s.allow_egress[%zu]", keypath, d->index);
            r = lz_schema_fail(
                c, &d->pos, kp,
                rfc1918 ? "RFC 1918 prefixes are always denied; allow a longer prefix "
                          "inside it (e.g. a /24) if the sandbox must reach it"
                        : "remove the prefix from one of the two lists, or use a different "
                          "prefix length (longest prefix wins)",
                "%s is both allowed and denied for profile '%s'%s", buf, pr->name,
                rfc1918 ? " (RFC 1918 prefixes are always in the deny set)" : "");
            break;
        }
    }
    lz_ipv4_list_clear(&deny);
    return r;
}

static const char *const root_fields[] = { "schema", "storage", "network", "profiles", NULL };
static const char *const storage_fields[] = { "data_root", NULL };
static const char *const network_fields[] = { "default_allow", "default_deny", NULL };
static const char *const network_fields_v2[] = {
    "default_allow", "default_deny", "default_allow_hosts", "default_deny_hosts", "default_dns",
    "resolvers",     NULL,
};

static int decode_document(lz_schema_ctx *c, const lz_toml_node *root, lz_config_doc *doc)
{
    lz_source_pos top = { 0, 0 };
    if (lz_schema_check_fields(c, root, "", root_fields, "schema, storage, network, profiles") < 0)
        return -1;

    const lz_toml_node *schema = lz_toml_get(root, "schema");
    if (!schema)
        return lz_schema_fail(c, &top, "schema",
                              "add schema = \"" LZ_CONFIG_SCHEMA_ID "\" at the top",
                              "required field is missing");
    if (lz_schema_expect_type(c, schema, LZ_TOML_STRING, "schema", "a string") < 0)
        return -1;
    if (strcmp(schema->u.string.bytes, LZ_CONFIG_SCHEMA_ID) == 0)
        c->schema_version = 1;
    else if (strcmp(schema->u.string.bytes, LZ_CONFIG_SCHEMA_ID_V2) == 0)
        c->schema_version = 2;
    else {
        lz_source_pos p = lz_schema_pos(schema);
        return lz_schema_fail(c, &p, "schema",
                              "this Lazaret reads schema = \"" LZ_CONFIG_SCHEMA_ID
                              "\" or \"" LZ_CONFIG_SCHEMA_ID_V2 "\"",
                              "unsupported configuration schema");
    }
    doc->schema_version = c->schema_version;

    const lz_toml_node *storage = lz_toml_get(root, "storage");
    if (storage) {
        if (lz_schema_expect_type(c, storage, LZ_TOML_TABLE, "storage", "a table") < 0 ||
            lz_schema_check_fields(c, storage, "storage", storage_fields, "data_root") < 0)
            return -1;
        const lz_toml_node *dr = lz_toml_get(storage, "data_root");
        if (dr) {
            if (lz_schema_get_string(c, dr, "storage.data_root", &doc->data_root) < 0)
                return -1;
            doc->data_root_pos = lz_schema_pos(dr);
            lz_host_path_anchor anchor;
            const char *suffix, *what;
            if (!lz_host_path_parse(doc->data_root, false, &anchor, &suffix, &what))
                return lz_schema_fail(c, &doc->data_root_pos, "storage.data_root",
                                      "write an absolute path or one beginning with exactly '~/'",
                                      "'%s' is not a valid host path: %s", doc->data_root, what);
        }
    }

    const lz_toml_node *network = lz_toml_get(root, "network");
    if (network) {
        if (lz_schema_expect_type(c, network, LZ_TOML_TABLE, "network", "a table") < 0 ||
            (c->schema_version == 2
                 ? lz_schema_check_fields(c, network, "network", network_fields_v2,
                                          "default_allow, default_deny, default_allow_hosts, "
                                          "default_deny_hosts, default_dns, resolvers")
                 : lz_schema_check_fields(c, network, "network", network_fields,
                                          "default_allow, default_deny")) < 0)
            return -1;
        const lz_toml_node *v;
        if ((v = lz_toml_get(network, "default_allow")) &&
            get_prefix_list(c, v, "network.default_allow", &doc->default_allow,
                            &doc->default_allow_decl) < 0)
            return -1;
        if ((v = lz_toml_get(network, "default_deny")) &&
            get_prefix_list(c, v, "network.default_deny", &doc->default_deny, NULL) < 0)
            return -1;
        if ((v = lz_toml_get(network, "default_allow_hosts")) &&
            lz_schema_host_list(c, v, "network.default_allow_hosts", &doc->default_allow_hosts) < 0)
            return -1;
        if ((v = lz_toml_get(network, "default_deny_hosts")) &&
            lz_schema_host_list(c, v, "network.default_deny_hosts", &doc->default_deny_hosts) < 0)
            return -1;
        lz_source_pos dns_pos;
        if ((v = lz_toml_get(network, "default_dns")) &&
            lz_schema_dns_mode(c, v, "network.default_dns", &doc->default_dns, &dns_pos) < 0)
            return -1;
        if ((v = lz_toml_get(network, "resolvers")) &&
            lz_schema_resolvers(c, v, "network.resolvers", doc) < 0)
            return -1;
    }

    const lz_toml_node *profiles = lz_toml_get(root, "profiles");
    if (!profiles)
        return lz_schema_fail(c, &top, "profiles",
                              "add at least one [profiles.NAME] table with an image",
                              "required table is missing");
    if (lz_schema_expect_type(c, profiles, LZ_TOML_TABLE, "profiles", "a table of profiles") < 0)
        return -1;
    if (profiles->u.table.count == 0) {
        lz_source_pos p = lz_schema_pos(profiles);
        return lz_schema_fail(c, &p, "profiles",
                              "add at least one [profiles.NAME] table with an image",
                              "at least one profile is required");
    }
    doc->profiles = lz_xcalloc(profiles->u.table.count, sizeof(lz_profile_decl));
    for (size_t i = 0; i < profiles->u.table.count; i++) {
        const lz_toml_entry *e = &profiles->u.table.entries[i];
        lz_source_pos npos = { e->line, e->column };
        _cleanup_free_ char *kp = lz_profile_name_valid(e->key)
                                      ? lz_xasprintf("profiles.%s", e->key)
                                      : lz_xasprintf("profiles.\"%s\"", e->key);
        lz_profile_decl *pr = &doc->profiles[doc->n_profiles++];
        if (decode_profile(c, e->key, &npos, e->value, kp, pr) < 0)
            return -1;
        if (check_network_conflicts(c, doc, pr, kp) < 0 ||
            lz_schema_host_conflicts(c, doc, pr, kp) < 0)
            return -1;
    }
    return 0;
}

int lz_config_doc_parse(const char *buf, size_t len, const char *label, lz_config_doc **ret,
                        lz_error **err)
{
    lz_schema_ctx c = { label, err, 0 };
    if (len > LZ_CONFIG_MAX_BYTES)
        return lz_error_set(err, 0, "%s: the configuration is larger than %d bytes", label,
                            LZ_CONFIG_MAX_BYTES);

    lz_toml_node *root = NULL;
    lz_toml_diag diag = { 0 };
    if (lz_toml_parse(buf, len, &root, &diag) < 0) {
        lz_source_pos p = { diag.line, diag.column };
        return lz_schema_fail(
            &c, &p, "(document)",
            "fix the TOML syntax at the position shown (TOML 1.0; duplicate keys and "
            "tables are not allowed)",
            "invalid TOML: %s", diag.message);
    }
    lz_config_doc *doc = lz_xcalloc(1, sizeof(*doc));
    doc->label = lz_xstrdup(label);
    int r = decode_document(&c, root, doc);
    lz_toml_free(root);
    if (r < 0) {
        lz_config_doc_free(doc);
        return -1;
    }
    *ret = doc;
    return 0;
}

static void free_strv(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void lz_config_doc_free(lz_config_doc *doc)
{
    if (!doc)
        return;
    for (size_t i = 0; i < doc->n_profiles; i++) {
        lz_profile_decl *p = &doc->profiles[i];
        free(p->name);
        free(p->image);
        free_strv(p->persistent_dirs, p->n_persistent_dirs);
        free(p->persistent_pos);
        lz_ipv4_list_clear(&p->allow_egress);
        lz_ipv4_list_clear(&p->deny_egress);
        free(p->allow_egress_decl.items);
        lz_host_decls_clear(&p->allow_hosts);
        lz_host_decls_clear(&p->deny_hosts);
        for (size_t k = 0; k < p->n_env; k++) {
            free(p->env[k].sandbox_name);
            free(p->env[k].host_name);
        }
        free(p->env);
        for (size_t k = 0; k < p->n_environment; k++) {
            free(p->environment[k].name);
            free(p->environment[k].value);
        }
        free(p->environment);
        free_strv(p->command, p->n_command);
        for (size_t k = 0; k < p->n_volumes; k++) {
            free(p->volumes[k].host);
            free(p->volumes[k].container);
        }
        free(p->volumes);
        for (size_t k = 0; k < p->n_rules; k++) {
            free(p->rules[k].executable);
            free_strv(p->rules[k].args, p->rules[k].n_args);
        }
        free(p->rules);
    }
    free(doc->profiles);
    free(doc->label);
    free(doc->data_root);
    lz_ipv4_list_clear(&doc->default_allow);
    lz_ipv4_list_clear(&doc->default_deny);
    free(doc->default_allow_decl.items);
    lz_host_decls_clear(&doc->default_allow_hosts);
    lz_host_decls_clear(&doc->default_deny_hosts);
    free(doc);
}

const lz_profile_decl *lz_config_doc_profile(const lz_config_doc *doc, const char *name)
{
    for (size_t i = 0; i < doc->n_profiles; i++)
        if (strcmp(doc->profiles[i].name, name) == 0)
            return &doc->profiles[i];
    return NULL;
}
