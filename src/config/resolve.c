/* SPDX-License-Identifier: Apache-2.0
 *
 * Resolution of the selected profile (spec 3.2), in this order:
 *   1. process inputs (HOME, XDG_*), the configuration source, strict decode;
 *   2. the workspace (canonical, retained) and the Domain ID;
 *   3. canonical labels of every root, volume source and executable, and the
 *      label ancestry checks — before anything is created;
 *   4. creation/opening of the Lazaret-owned roots and volume directories,
 *      source type checks, identity checks, and a reopen of every plan;
 *   5. auto-approval executables, the effective network policy;
 *   6. environment references, last;
 *   7. the configuration fingerprint.
 */
#include "config/resolve.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/nodump.h"
#include "common/text.h"
#include "common/util.h"
#include "config/digest.h"
#include "config/grammar.h"
#include "config/source.h"
#include "fs/executable.h"

void lz_digest_hex(const uint8_t d[LZ_DIGEST_LEN], char buf[static 65])
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < LZ_DIGEST_LEN; i++) {
        buf[2 * i] = hex[d[i] >> 4];
        buf[2 * i + 1] = hex[d[i] & 0xf];
    }
    buf[64] = '\0';
}

static char *join(const char *dir, const char *rel)
{
    return lz_xasprintf("%s/%s", strcmp(dir, "/") == 0 ? "" : dir, rel);
}

/* ---- process inputs --------------------------------------------------- */

typedef struct inputs {
    char *home;        /* normalized absolute */
    char *runtime_dir; /* normalized absolute XDG_RUNTIME_DIR */
    char *data_home;   /* normalized absolute XDG_DATA_HOME, or NULL */
} inputs;

static void inputs_clear(inputs *in)
{
    free(in->home);
    free(in->runtime_dir);
    free(in->data_home);
}

static int read_inputs(inputs *in, lz_error **err)
{
    const char *what;
    const char *home = getenv("HOME");
    if (!home || !*home) {
        lz_error_set(err, 0, "HOME is not set");
        return lz_error_hint(err, "run lazaret from a normal login session, or export "
                                  "HOME=/home/$USER");
    }
    if (!(in->home = lz_env_path_normalize(home, &what))) {
        lz_error_set(err, 0, "HOME is not a usable path: %s", what);
        return lz_error_hint(err, "set HOME to your home directory's absolute path");
    }
    const char *rt = getenv("XDG_RUNTIME_DIR");
    if (!rt || !*rt) {
        lz_error_set(err, 0,
                     "XDG_RUNTIME_DIR is not set; Lazaret keeps its sockets and locks "
                     "there");
        return lz_error_hint(err, "log in through a session manager that sets it, or: export "
                                  "XDG_RUNTIME_DIR=/run/user/$(id -u) (a directory you own, mode "
                                  "0700)");
    }
    if (!(in->runtime_dir = lz_env_path_normalize(rt, &what))) {
        lz_error_set(err, 0, "XDG_RUNTIME_DIR is not a usable path: %s", what);
        return lz_error_hint(err, "export XDG_RUNTIME_DIR=/run/user/$(id -u)");
    }
    /* An unset, empty or relative XDG_DATA_HOME is treated as unset. */
    const char *dh = getenv("XDG_DATA_HOME");
    if (dh && dh[0] == '/' && !(in->data_home = lz_env_path_normalize(dh, &what))) {
        lz_error_set(err, 0, "XDG_DATA_HOME is not a usable path: %s", what);
        return lz_error_hint(err, "set XDG_DATA_HOME to a normalized absolute path or unset it");
    }
    return 0;
}

/* ---- freeing ---------------------------------------------------------- */

void lz_resolved_config_free(lz_resolved_config *cfg)
{
    if (!cfg)
        return;
    free(cfg->profile);
    lz_plan_clear(&cfg->config_file);
    lz_plan_clear(&cfg->workspace);
    lz_plan_clear(&cfg->storage_root);
    lz_plan_clear(&cfg->runtime_root);
    lz_plan_clear(&cfg->profile_dir);
    lz_plan_clear(&cfg->storage_domain_root);
    lz_plan_clear(&cfg->runtime_domain_root);
    free(cfg->image);
    for (size_t i = 0; i < cfg->n_persistent_dirs; i++)
        free(cfg->persistent_dirs[i]);
    free(cfg->persistent_dirs);
    for (size_t i = 0; i < cfg->n_env; i++) {
        free(cfg->env[i].sandbox_name);
        free(cfg->env[i].host_name);
        lz_secret_free(cfg->env[i].value); /* a secret: wiped before it is freed */
    }
    free(cfg->env);
    for (size_t i = 0; i < cfg->n_environment; i++) {
        free(cfg->environment[i].name);
        free(cfg->environment[i].value);
    }
    free(cfg->environment);
    for (size_t i = 0; i < cfg->n_command; i++)
        free(cfg->command[i]);
    free(cfg->command);
    for (size_t i = 0; i < cfg->n_volumes; i++) {
        lz_plan_clear(&cfg->volumes[i].source);
        free(cfg->volumes[i].container);
    }
    free(cfg->volumes);
    lz_ipv4_list_clear(&cfg->allow);
    lz_ipv4_list_clear(&cfg->deny);
    lz_host_list_clear(&cfg->allow_hosts);
    lz_host_list_clear(&cfg->deny_hosts);
    for (size_t i = 0; i < cfg->n_rules; i++) {
        lz_plan_clear(&cfg->rules[i].executable);
        for (size_t k = 0; k < cfg->rules[i].n_args; k++)
            free(cfg->rules[i].args[k]);
        free(cfg->rules[i].args);
    }
    free(cfg->rules);
    free(cfg);
}

void lz_resolved_config_forget_env_values(lz_resolved_config *cfg)
{
    for (size_t i = 0; cfg && i < cfg->n_env; i++) {
        lz_secret_free(cfg->env[i].value);
        cfg->env[i].value = NULL;
    }
}

/* Host variables Lazaret itself reads after loading (resolve, image
 * preparation, the Git Sentry's git, the client's TERM and locale): never
 * secrets, and wiping them would break those readers. */
static bool lazaret_reads_var(const char *name)
{
    static const char *const own[] = { "HOME",          "PATH",           "TERM",
                                       "LANG",          "LANGUAGE",       "XDG_CONFIG_HOME",
                                       "XDG_DATA_HOME", "XDG_RUNTIME_DIR" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(own); i++)
        if (strcmp(name, own[i]) == 0)
            return true;
    return strncmp(name, "LC_", 3) == 0;
}

void lz_resolved_config_scrub_environ(const lz_resolved_config *cfg)
{
    for (size_t i = 0; cfg && i < cfg->n_env; i++)
        if (!lazaret_reads_var(cfg->env[i].host_name))
            lz_environ_scrub(cfg->env[i].host_name);
}

/* ---- helpers ---------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *) a, *(char *const *) b);
}

static int cmp_setenv(const void *a, const void *b)
{
    return strcmp(((const lz_setenv_decl *) a)->name, ((const lz_setenv_decl *) b)->name);
}

static int cmp_env(const void *a, const void *b)
{
    return strcmp(((const lz_resolved_env *) a)->sandbox_name,
                  ((const lz_resolved_env *) b)->sandbox_name);
}

static int cmp_volume(const void *a, const void *b)
{
    return strcmp(((const lz_resolved_volume *) a)->container,
                  ((const lz_resolved_volume *) b)->container);
}

/* Expand a validated host path declaration against its anchor. */
static char *expand_host_path(const char *decl, bool allow_profile_dir, const char *home,
                              const char *profile_dir)
{
    lz_host_path_anchor anchor;
    const char *suffix, *what;
    if (!lz_host_path_parse(decl, allow_profile_dir, &anchor, &suffix, &what))
        return NULL; /* the schema decoder already refused these */
    switch (anchor) {
    case LZ_HOST_HOME:
        return join(home, suffix);
    case LZ_HOST_PROFILE_DIR:
        return profile_dir ? join(profile_dir, suffix) : NULL; /* not allowed without one */
    case LZ_HOST_ABSOLUTE:
        return lz_xstrdup(suffix);
    default:
        return NULL;
    }
}

/* A retained object with its description, for the identity checks. */
typedef struct named_plan {
    const char *what;
    const lz_path_plan *p;
} named_plan;

/* A named tree for the overlap checks. */
typedef struct tree {
    const char *what; /* "the workspace", "the Storage Root", ... */
    const char *label;
} tree;

static int refuse_overlap(lz_error **err, const tree *a, const tree *b, const char *hint)
{
    const char *rel = strcmp(a->label, b->label) == 0                    ? "is the same path as"
                      : lz_path_is_strict_descendant(a->label, b->label) ? "is inside"
                                                                         : "contains";
    lz_error_set(err, 0, "%s (%s) %s %s (%s)", a->what, a->label, rel, b->what, b->label);
    return lz_error_hint(err, "%s", hint);
}

/* ---- workspace -------------------------------------------------------- */

/* The top level of the Git working tree around dir (canonical): the nearest
 * directory, dir itself or an ancestor, that holds a `.git` entry (a
 * directory, or a file as in a linked worktree or a submodule) — where
 * `git rev-parse --show-toplevel` would stop, found without running git
 * (host git never runs on what a sandbox may have written, docs/git.md).
 * Never home or above it: a home directory under version control (a
 * dotfiles repository) is not taken for a project, and neither is what
 * contains it. NULL when there is none. docs/configuration.md "Which
 * directory is the workspace". */
static char *git_toplevel(const char *dir, const char *home)
{
    _cleanup_free_ char *p = lz_xstrdup(dir);
    _cleanup_free_ char *home_canonical = realpath(home, NULL); /* dir is canonical */
    const char *h = home_canonical ? home_canonical : home;
    for (;;) {
        if (strcmp(p, h) == 0 || lz_path_is_strict_descendant(h, p))
            return NULL;
        _cleanup_free_ char *dotgit = join(p, ".git");
        struct stat st;
        if (stat(dotgit, &st) == 0 && (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)))
            return lz_xstrdup(p);
        char *slash = strrchr(p, '/');
        if (!slash || slash == p)
            return NULL; /* reached "/": the root is never a workspace */
        *slash = '\0';
    }
}

static int resolve_workspace(const char *requested, const char *home, lz_path_plan *ret,
                             bool *ret_from_git, lz_error **err)
{
    _cleanup_free_ char *abs = NULL, *canonical = NULL, *cwd = NULL;
    *ret_from_git = false;
    if (requested && requested[0] == '/') {
        abs = lz_xstrdup(requested);
    } else {
        cwd = getcwd(NULL, 0);
        if (!cwd) {
            lz_error_set(err, errno, "cannot determine the current directory");
            return lz_error_hint(err, "cd into your project directory and run the command again");
        }
        abs = requested ? join(cwd, requested) : lz_xstrdup(cwd);
    }
    /* realpath() also normalizes "." and ".." in a user-typed --workspace. */
    canonical = realpath(abs, NULL);
    if (!canonical) {
        lz_error_set(err, errno, "cannot open the workspace %s", abs);
        return lz_error_hint(err, "pass an existing project directory with --workspace DIR");
    }
    /* Without --workspace, inside a Git working tree the workspace is its
     * top level: the same Domain (with its .git, tools and state) from
     * any of its subdirectories; the command starts in the matching one. */
    if (!requested) {
        char *top = git_toplevel(canonical, home);
        if (top) {
            *ret_from_git = strcmp(top, canonical) != 0;
            free(canonical);
            canonical = top;
        }
    }
    if (strcmp(canonical, "/") == 0) {
        lz_error_set(err, 0, "the workspace cannot be the root directory");
        return lz_error_hint(err, "run lazaret inside a project directory");
    }
    if (lz_plan_existing(canonical, ret, err) < 0)
        return lz_error_prefix(err, "cannot open the workspace %s", canonical);
    if (!S_ISDIR(ret->target.mode)) {
        lz_plan_clear(ret);
        lz_error_set(err, ENOTDIR, "the workspace %s is not a directory", canonical);
        return lz_error_hint(err, "pass a project directory with --workspace DIR");
    }
    /* A directory every user may write (/tmp, /var/tmp, a shared drop
     * box) is nobody's project: other users could plant files in what the
     * sandbox reads and the developer's host tools then run on (a
     * .git/config, a Makefile). */
    if (ret->target.mode & S_IWOTH) {
        mode_t mode = ret->target.mode & 07777;
        lz_plan_clear(ret);
        lz_error_set(err, 0, "the workspace %s is writable by every user (mode %04o)", canonical,
                     (unsigned) mode);
        return lz_error_hint(err, "use a project directory of your own, e.g. mkdir -p "
                                  "~/projects/NAME && cd ~/projects/NAME (or pass one with "
                                  "--workspace DIR)");
    }
    return 0;
}

char *lz_workspace_choose(const char *requested, lz_error **err)
{
    inputs in = { 0 };
    char *label = NULL;
    lz_path_plan plan = LZ_PATH_PLAN_INIT;
    bool from_git;
    if (read_inputs(&in, err) == 0 &&
        resolve_workspace(requested, in.home, &plan, &from_git, err) == 0)
        label = lz_xstrdup(plan.label);
    lz_plan_clear(&plan);
    inputs_clear(&in);
    return label;
}

/* ---- volumes ---------------------------------------------------------- */

static int resolve_volume_label(const lz_volume_decl *d, const char *home, const char *profile_dir,
                                const char *cfg_label, const char *keypath, char **ret,
                                size_t *ret_missing, lz_error **err)
{
    _cleanup_free_ char *abs = expand_host_path(d->host, true, home, profile_dir);
    if (!abs)
        return lz_error_set(err, 0, "%s: %s: invalid host path", cfg_label, keypath);
    /* The anchors are canonical already; the declared components must not be
     * symlinks (a symlink cannot satisfy a source). */
    size_t missing = 0;
    _cleanup_close_ int fd = lz_walk_nofollow(abs, &missing, err);
    if (fd < 0) {
        lz_error_prefix(err, "%s:%u:%u: %s: the volume source %s cannot be used", cfg_label,
                        d->host_pos.line, d->host_pos.column, keypath, abs);
        return lz_error_hint(err, "a volume source must be a real directory or file, not a "
                                  "symlink; point host at the symlink's target");
    }
    *ret_missing = missing;
    *ret = TAKE_PTR(abs);
    return 0;
}

/* The Storage Root by the configuration's storage.data_root, else
 * $XDG_DATA_HOME/lazaret, else ~/.local/share/lazaret (canonical). */
static char *storage_root_of(const lz_config_doc *doc, const inputs *in, lz_error **err)
{
    _cleanup_free_ char *abs = NULL;
    if (doc->data_root)
        abs = expand_host_path(doc->data_root, false, in->home, NULL);
    else if (in->data_home)
        abs = join(in->data_home, "lazaret");
    else
        abs = join(in->home, ".local/share/lazaret");
    if (!abs) {
        lz_error_set(err, 0, "storage.data_root: invalid host path");
        return NULL;
    }
    return lz_canonicalize(abs, err);
}

char *lz_storage_root_choose(const char *config_path, lz_error **err)
{
    inputs in = { 0 };
    lz_config_source src = { .plan = LZ_PATH_PLAN_INIT };
    lz_config_doc *doc = NULL;
    char *root = NULL;
    _cleanup_free_ char *path = NULL;
    if (read_inputs(&in, err) == 0 && (path = lz_config_source_select(config_path, in.home, err)) &&
        lz_config_source_read(path, &src, err) == 0 &&
        lz_config_doc_parse(src.bytes, src.len, src.plan.label, &doc, err) == 0)
        root = storage_root_of(doc, &in, err);
    lz_config_doc_free(doc);
    lz_config_source_clear(&src);
    inputs_clear(&in);
    return root;
}

/* ---- main ------------------------------------------------------------- */

/* The v2 part of the effective configuration (docs/configuration.md "Host
 * rules"): host lists = [network]'s ∪ the profile's (contradictions were
 * refused while decoding), the DNS mode (the profile's key, else
 * [network]'s, else strict exactly when some allow_hosts pattern exists),
 * the resolvers. A v1 document has none of the keys: empty lists, FORWARD,
 * no resolvers. */
static void resolve_hosts(lz_resolved_config *cfg, const lz_config_doc *doc,
                          const lz_profile_decl *pr)
{
    cfg->schema_version = doc->schema_version;
    const lz_host_list *allow[2] = { &doc->default_allow_hosts.list, &pr->allow_hosts.list };
    const lz_host_list *deny[2] = { &doc->default_deny_hosts.list, &pr->deny_hosts.list };
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < allow[k]->count; i++)
            lz_host_list_add(&cfg->allow_hosts, &allow[k]->items[i]);
        for (size_t i = 0; i < deny[k]->count; i++)
            lz_host_list_add(&cfg->deny_hosts, &deny[k]->items[i]);
    }
    lz_dns_decl mode = pr->dns != LZ_DNS_DECL_UNSET ? pr->dns : doc->default_dns;
    cfg->dns_mode_explicit = mode != LZ_DNS_DECL_UNSET;
    if (cfg->dns_mode_explicit)
        cfg->dns_mode = mode == LZ_DNS_DECL_STRICT ? LZ_DNS_STRICT : LZ_DNS_FORWARD;
    else
        cfg->dns_mode = cfg->allow_hosts.count > 0 ? LZ_DNS_STRICT : LZ_DNS_FORWARD;
    _Static_assert(LZ_RESOLVERS_MAX == LZ_CONFIG_RESOLVERS_MAX, "one bound for resolvers");
    memcpy(cfg->resolvers, doc->resolvers, sizeof(cfg->resolvers));
    cfg->n_resolvers = doc->n_resolvers;
}

int lz_config_load(const lz_load_request *req, lz_resolved_config **ret, lz_error **err)
{
    inputs in = { 0 };
    lz_config_source src = { .plan = LZ_PATH_PLAN_INIT };
    lz_config_doc *doc = NULL;
    lz_resolved_config *cfg = NULL;
    _cleanup_free_ char *cfg_path = NULL, *storage_label = NULL, *runtime_label = NULL,
                        *profile_label = NULL, *sdomain_label = NULL, *rdomain_label = NULL;
    char **vol_labels = NULL;
    size_t *vol_missing = NULL;
    size_t n_vol = 0;
    int r = -1;

    if (!req->layout) {
        lz_error_set(err, 0, "internal error: configuration resolution needs a sandbox layout");
        goto out;
    }
    if (!req->profile || !lz_profile_name_valid(req->profile)) {
        lz_error_set(err, 0, "'%s' is not a valid profile name", req->profile ? req->profile : "");
        lz_error_hint(err, "profile names are 1 to 64 ASCII letters, digits, '.', '_' or '-', "
                           "starting with a letter or digit");
        goto out;
    }

    /* 1. Inputs, source, decoding. */
    if (read_inputs(&in, err) < 0)
        goto out;
    cfg_path = lz_config_source_select(req->config_path, in.home, err);
    if (!cfg_path)
        goto out;
    if (lz_config_source_read(cfg_path, &src, err) < 0)
        goto out;
    if (lz_config_doc_parse(src.bytes, src.len, src.plan.label, &doc, err) < 0)
        goto out;

    const lz_profile_decl *pr = lz_config_doc_profile(doc, req->profile);
    if (!pr) {
        size_t cap = 1;
        for (size_t i = 0; i < doc->n_profiles; i++)
            cap += strlen(doc->profiles[i].name) + 2;
        _cleanup_free_ char *names = lz_xcalloc(cap, 1);
        for (size_t i = 0; i < doc->n_profiles; i++) {
            if (i)
                strcat(names, ", ");
            strcat(names, doc->profiles[i].name);
        }
        lz_error_set(err, 0, "%s: profile '%s' is not defined", src.plan.label, req->profile);
        lz_error_hint(err, "choose one of the defined profiles: %s (names are case-sensitive)",
                      names);
        goto out;
    }

    cfg = lz_xcalloc(1, sizeof(*cfg));
    cfg->config_file = cfg->workspace = cfg->storage_root = cfg->runtime_root = cfg->profile_dir =
        cfg->storage_domain_root = cfg->runtime_domain_root = (lz_path_plan) LZ_PATH_PLAN_INIT;
    cfg->profile = lz_xstrdup(pr->name);
    cfg->config_file = src.plan;
    src.plan = (lz_path_plan) LZ_PATH_PLAN_INIT;

    /* 2. Workspace and Domain ID. */
    if (resolve_workspace(req->workspace, in.home, &cfg->workspace, &cfg->workspace_from_git, err) <
        0)
        goto out;
    if (lz_domain_id_v1(cfg->profile, cfg->workspace.label, cfg->domain_id, err) < 0)
        goto out;
    char id_hex[65];
    lz_digest_hex(cfg->domain_id, id_hex);

    /* 3. Canonical labels of the roots, then the ancestry checks. */
    {
        if (!(storage_label = storage_root_of(doc, &in, err)))
            goto out;
        _cleanup_free_ char *runtime_abs = join(in.runtime_dir, "lazaret");
        if (!(runtime_label = lz_canonicalize(runtime_abs, err)))
            goto out;
    }
    profile_label = lz_xasprintf("%s/profiles/%s", storage_label, cfg->profile);
    sdomain_label = lz_xasprintf("%s/domains/%s", storage_label, id_hex);
    rdomain_label = lz_xasprintf("%s/domains/%s", runtime_label, id_hex);

    {
        const tree trees[] = {
            { "the configuration file", cfg->config_file.label },
            { "the workspace", cfg->workspace.label },
            { "the Storage Root", storage_label },
            { "the Runtime Root", runtime_label },
        };
        for (size_t i = 0; i < LZ_ARRAY_SIZE(trees); i++)
            for (size_t j = i + 1; j < LZ_ARRAY_SIZE(trees); j++)
                if (lz_path_overlaps(trees[i].label, trees[j].label)) {
                    refuse_overlap(err, &trees[i], &trees[j],
                                   "keep the configuration file, the workspace, the Storage Root "
                                   "(storage.data_root) and $XDG_RUNTIME_DIR/lazaret apart: none "
                                   "may contain another (a configuration inside the workspace "
                                   "would be visible to the sandbox)");
                    goto out;
                }
    }

    /* Volume labels and their ancestry. */
    n_vol = pr->n_volumes;
    vol_labels = lz_xcalloc(n_vol, sizeof(char *));
    vol_missing = lz_xcalloc(n_vol, sizeof(size_t));
    for (size_t i = 0; i < n_vol; i++) {
        const lz_volume_decl *d = &pr->volumes[i];
        _cleanup_free_ char *kp = lz_xasprintf("profiles.%s.volumes[%zu].host", pr->name, i);
        if (resolve_volume_label(d, in.home, profile_label, cfg->config_file.label, kp,
                                 &vol_labels[i], &vol_missing[i], err) < 0)
            goto out;
        const tree me = { "a volume source", vol_labels[i] };
        const tree forbidden[] = {
            { "the configuration file", cfg->config_file.label },
            { "the workspace", cfg->workspace.label },
            { "the Runtime Root", runtime_label },
            { "the Domain Root", sdomain_label },
        };
        const char *hint = "a volume source may not overlap the configuration file, the "
                           "workspace, Lazaret's runtime or Domain trees, or another volume "
                           "source; choose a separate directory (e.g. under {profile_dir}/)";
        for (size_t k = 0; k < LZ_ARRAY_SIZE(forbidden); k++)
            if (lz_path_overlaps(vol_labels[i], forbidden[k].label)) {
                refuse_overlap(err, &me, &forbidden[k], hint);
                lz_error_prefix(err, "%s:%u:%u: %s", cfg->config_file.label, d->host_pos.line,
                                d->host_pos.column, kp);
                goto out;
            }
        /* Beneath the profile directory is the one place inside Lazaret's
         * data tree where a volume source may live. */
        if (!lz_path_is_strict_descendant(vol_labels[i], profile_label) &&
            lz_path_overlaps(vol_labels[i], storage_label)) {
            const tree st = { "the Storage Root", storage_label };
            refuse_overlap(err, &me, &st, hint);
            lz_error_prefix(err, "%s:%u:%u: %s", cfg->config_file.label, d->host_pos.line,
                            d->host_pos.column, kp);
            goto out;
        }
        for (size_t k = 0; k < i; k++)
            if (lz_path_overlaps(vol_labels[i], vol_labels[k])) {
                const tree other = { "another volume source", vol_labels[k] };
                refuse_overlap(err, &me, &other, hint);
                lz_error_prefix(err, "%s:%u:%u: %s", cfg->config_file.label, d->host_pos.line,
                                d->host_pos.column, kp);
                goto out;
            }
        if (vol_missing[i] && !d->create) {
            lz_error_set(err, ENOENT, "%s:%u:%u: %s: the volume source %s does not exist",
                         cfg->config_file.label, d->host_pos.line, d->host_pos.column, kp,
                         vol_labels[i]);
            lz_error_hint(err, d->kind == LZ_VOLUME_DIRECTORY
                                   ? "create the directory, or put it under {profile_dir}/ and "
                                     "set create = true"
                                   : "create the file; Lazaret never creates a file source");
            goto out;
        }
    }

    /* Destinations against the product-owned sandbox layout. */
    for (size_t i = 0; i < pr->n_persistent_dirs; i++) {
        const char *hit = lz_sandbox_layout_conflict(req->layout, pr->persistent_dirs[i]);
        if (hit) {
            lz_error_set(err, 0,
                         "%s:%u:%u: profiles.%s.persistent_dirs[%zu]: '%s' intersects "
                         "the Lazaret-owned sandbox path %s",
                         cfg->config_file.label, pr->persistent_pos[i].line,
                         pr->persistent_pos[i].column, pr->name, i, pr->persistent_dirs[i], hit);
            lz_error_hint(err, "choose a path that neither contains nor lies inside %s", hit);
            goto out;
        }
    }
    for (size_t i = 0; i < pr->n_volumes; i++) {
        const char *hit = lz_sandbox_layout_conflict(req->layout, pr->volumes[i].container);
        if (hit) {
            lz_error_set(err, 0,
                         "%s:%u:%u: profiles.%s.volumes[%zu].container: '%s' intersects "
                         "the Lazaret-owned sandbox path %s",
                         cfg->config_file.label, pr->volumes[i].pos.line, pr->volumes[i].pos.column,
                         pr->name, i, pr->volumes[i].container, hit);
            lz_error_hint(err, "choose a path that neither contains nor lies inside %s", hit);
            goto out;
        }
    }

    /* 4. Create or open the Lazaret-owned roots. */
    if (lz_ensure_owned_root(storage_label, &cfg->storage_root, err) < 0) {
        lz_error_prefix(err, "Storage Root");
        if (err && *err && !(*err)->hint)
            lz_error_hint(err,
                          "Lazaret keeps images and Domain state in %s: make its parent a "
                          "directory you own, or set storage.data_root in %s to one",
                          storage_label, cfg->config_file.label);
        goto out;
    }
    if (lz_ensure_owned_root(runtime_label, &cfg->runtime_root, err) < 0) {
        lz_error_prefix(err, "Runtime Root");
        if (err && *err && !(*err)->hint)
            lz_error_hint(err, "Lazaret keeps its sockets and locks in $XDG_RUNTIME_DIR/lazaret: "
                               "set XDG_RUNTIME_DIR to a directory you own, mode 0700 — normally "
                               "export XDG_RUNTIME_DIR=/run/user/$(id -u), which your login "
                               "session creates");
        goto out;
    }
    {
        _cleanup_free_ char *rel = lz_xasprintf("profiles/%s", cfg->profile);
        if (lz_ensure_owned_child(&cfg->storage_root, rel, &cfg->profile_dir, err) < 0) {
            lz_error_prefix(err, "profile directory");
            goto out;
        }
        free(rel);
        rel = lz_xasprintf("domains/%s", id_hex);
        if (lz_ensure_owned_child(&cfg->storage_root, rel, &cfg->storage_domain_root, err) < 0) {
            lz_error_prefix(err, "Domain Root");
            goto out;
        }
        if (lz_ensure_owned_child(&cfg->runtime_root, rel, &cfg->runtime_domain_root, err) < 0) {
            lz_error_prefix(err, "Domain runtime directory");
            goto out;
        }
    }

    /* Volume sources: create declared directories beneath {profile_dir},
     * then open each through a plan and check its type. */
    cfg->volumes = lz_xcalloc(n_vol, sizeof(lz_resolved_volume));
    for (size_t i = 0; i < n_vol; i++) {
        const lz_volume_decl *d = &pr->volumes[i];
        lz_resolved_volume *v = &cfg->volumes[cfg->n_volumes++];
        v->source = (lz_path_plan) LZ_PATH_PLAN_INIT;
        v->container = lz_xstrdup(d->container);
        v->kind = d->kind;
        v->access = d->access;
        v->create = d->create;
        int rr;
        if (vol_missing[i]) {
            /* create=true is only valid beneath {profile_dir} (schema). */
            const char *rel = vol_labels[i] + strlen(cfg->profile_dir.label) + 1;
            rr = lz_ensure_owned_child(&cfg->profile_dir, rel, &v->source, err);
        } else {
            rr = lz_plan_existing(vol_labels[i], &v->source, err);
        }
        if (rr < 0) {
            lz_error_prefix(err, "%s:%u:%u: profiles.%s.volumes[%zu].host", cfg->config_file.label,
                            d->host_pos.line, d->host_pos.column, pr->name, i);
            goto out;
        }
        mode_t t = v->source.target.mode & S_IFMT;
        bool ok = d->kind == LZ_VOLUME_DIRECTORY ? t == S_IFDIR : t == S_IFREG;
        if (!ok) {
            lz_error_set(err, 0, "%s:%u:%u: profiles.%s.volumes[%zu].host: %s is not a %s",
                         cfg->config_file.label, d->host_pos.line, d->host_pos.column, pr->name, i,
                         vol_labels[i],
                         d->kind == LZ_VOLUME_DIRECTORY ? "directory" : "regular file");
            lz_error_hint(err,
                          "set kind to match the source, or point host at a %s (sockets, "
                          "devices and FIFOs are never accepted)",
                          d->kind == LZ_VOLUME_DIRECTORY ? "directory" : "regular file");
            goto out;
        }
    }

    /* Identity checks: two labels that differ can still name one object
     * (bind mounts). Every retained object must be distinct. */
    {
        named_plan objs[64];
        size_t n = 0;
        objs[n++] = (named_plan){ "the configuration file", &cfg->config_file };
        objs[n++] = (named_plan){ "the workspace", &cfg->workspace };
        objs[n++] = (named_plan){ "the Storage Root", &cfg->storage_root };
        objs[n++] = (named_plan){ "the Runtime Root", &cfg->runtime_root };
        for (size_t i = 0; i < cfg->n_volumes && n < LZ_ARRAY_SIZE(objs); i++)
            objs[n++] = (named_plan){ "a volume source", &cfg->volumes[i].source };
        for (size_t i = 0; i < n; i++)
            for (size_t j = i + 1; j < n; j++)
                if (objs[i].p->target.dev == objs[j].p->target.dev &&
                    objs[i].p->target.ino == objs[j].p->target.ino) {
                    lz_error_set(err, 0, "%s (%s) and %s (%s) are the same file system object",
                                 objs[i].what, objs[i].p->label, objs[j].what, objs[j].p->label);
                    lz_error_hint(err, "they must be separate; check for bind mounts or hard "
                                       "links between them");
                    goto out;
                }
    }

    /* 5. Auto-approval executables (only when escalation is enabled; the
     * schema already refused rules otherwise). */
    cfg->escalation_enabled = pr->escalation_enabled;
    cfg->rules = lz_xcalloc(pr->n_rules, sizeof(lz_resolved_rule));
    for (size_t i = 0; i < pr->n_rules; i++) {
        const lz_rule_decl *d = &pr->rules[i];
        lz_resolved_rule *rr = &cfg->rules[cfg->n_rules++];
        rr->executable = (lz_path_plan) LZ_PATH_PLAN_INIT;
        rr->allow_extra_args = d->allow_extra_args;
        rr->args = lz_xcalloc(d->n_args, sizeof(char *));
        for (size_t k = 0; k < d->n_args; k++)
            rr->args[rr->n_args++] = lz_xstrdup(d->args[k]);
        _cleanup_free_ char *kp =
            lz_xasprintf("profiles.%s.escalation.auto_approve[%zu].executable", pr->name, i);
        _cleanup_free_ char *abs = expand_host_path(d->executable, false, in.home, NULL);
        _cleanup_free_ char *canonical = abs ? realpath(abs, NULL) : NULL;
        if (!canonical) {
            lz_error_set(err, errno, "%s:%u:%u: %s: cannot resolve %s", cfg->config_file.label,
                         d->executable_pos.line, d->executable_pos.column, kp, d->executable);
            lz_error_hint(err, "give the absolute path of an existing program");
            goto out;
        }
        const tree me = { "the auto-approved executable", canonical };
        tree forbidden[8 + 64];
        size_t nf = 0;
        forbidden[nf++] = (tree){ "the workspace", cfg->workspace.label };
        forbidden[nf++] = (tree){ "the profile directory", cfg->profile_dir.label };
        forbidden[nf++] = (tree){ "the Storage Root", cfg->storage_root.label };
        forbidden[nf++] = (tree){ "the Runtime Root", cfg->runtime_root.label };
        forbidden[nf++] = (tree){ "the configuration file", cfg->config_file.label };
        for (size_t k = 0; k < cfg->n_volumes && nf < LZ_ARRAY_SIZE(forbidden); k++)
            forbidden[nf++] = (tree){ "a volume source", cfg->volumes[k].source.label };
        for (size_t k = 0; k < nf; k++)
            if (lz_path_overlaps(canonical, forbidden[k].label)) {
                refuse_overlap(err, &me, &forbidden[k],
                               "an auto-approved program must live outside everything the "
                               "sandbox can write and outside Lazaret's own trees (e.g. in "
                               "/usr/bin or ~/bin)");
                lz_error_prefix(err, "%s:%u:%u: %s", cfg->config_file.label, d->executable_pos.line,
                                d->executable_pos.column, kp);
                goto out;
            }
        if (lz_plan_existing(canonical, &rr->executable, err) < 0) {
            lz_error_prefix(err, "%s:%u:%u: %s", cfg->config_file.label, d->executable_pos.line,
                            d->executable_pos.column, kp);
            goto out;
        }
        _cleanup_close_ int xfd = lz_plan_open(&rr->executable, O_PATH, true, err);
        if (xfd < 0) {
            lz_error_prefix(err, "%s", kp);
            goto out;
        }
        _cleanup_free_ char *fix = NULL;
        const char *problem = lz_executable_problem(xfd, &rr->executable.target, canonical, &fix);
        if (problem) {
            lz_error_set(err, 0, "%s:%u:%u: %s: %s %s", cfg->config_file.label,
                         d->executable_pos.line, d->executable_pos.column, kp, canonical, problem);
            lz_error_hint(err, "%s", fix);
            goto out;
        }
        /* Exact duplicates after canonicalization. */
        for (size_t k = 0; k + 1 < cfg->n_rules; k++) {
            const lz_resolved_rule *o = &cfg->rules[k];
            bool same = strcmp(o->executable.label, rr->executable.label) == 0 &&
                        o->n_args == rr->n_args && o->allow_extra_args == rr->allow_extra_args;
            for (size_t a = 0; same && a < rr->n_args; a++)
                same = strcmp(o->args[a], rr->args[a]) == 0;
            if (same) {
                lz_error_set(err, 0,
                             "%s:%u:%u: profiles.%s.escalation.auto_approve[%zu]: "
                             "duplicates auto_approve[%zu] (both resolve to %s)",
                             cfg->config_file.label, d->pos.line, d->pos.column, pr->name, i, k,
                             canonical);
                lz_error_hint(err, "remove one of the two identical rules");
                goto out;
            }
        }
    }

    /* Effective network policy: allow = global ∪ profile; deny = global ∪
     * profile ∪ RFC 1918 (exact conflicts were refused while decoding). */
    for (size_t i = 0; i < doc->default_allow.count; i++)
        lz_ipv4_list_add(&cfg->allow, &doc->default_allow.items[i]);
    for (size_t i = 0; i < pr->allow_egress.count; i++)
        lz_ipv4_list_add(&cfg->allow, &pr->allow_egress.items[i]);
    for (size_t i = 0; i < doc->default_deny.count; i++)
        lz_ipv4_list_add(&cfg->deny, &doc->default_deny.items[i]);
    for (size_t i = 0; i < pr->deny_egress.count; i++)
        lz_ipv4_list_add(&cfg->deny, &pr->deny_egress.items[i]);
    for (size_t i = 0; i < LZ_ARRAY_SIZE(lz_rfc1918_prefixes); i++)
        lz_ipv4_list_add(&cfg->deny, &lz_rfc1918_prefixes[i]);
    resolve_hosts(cfg, doc, pr);

    cfg->image = lz_xstrdup(pr->image);
    cfg->isolate_gitignored = pr->isolate_gitignored;
    cfg->persistent_dirs = lz_xcalloc(pr->n_persistent_dirs, sizeof(char *));
    for (size_t i = 0; i < pr->n_persistent_dirs; i++)
        cfg->persistent_dirs[cfg->n_persistent_dirs++] = lz_xstrdup(pr->persistent_dirs[i]);
    qsort(cfg->persistent_dirs, cfg->n_persistent_dirs, sizeof(char *), cmp_str);
    qsort(cfg->volumes, cfg->n_volumes, sizeof(*cfg->volumes), cmp_volume);

    /* Reopen every plan after the comparisons: any identity or mount change
     * refuses the complete load. */
    {
        const lz_path_plan *plans[8 + 64];
        size_t n = 0;
        plans[n++] = &cfg->config_file;
        plans[n++] = &cfg->workspace;
        plans[n++] = &cfg->storage_root;
        plans[n++] = &cfg->runtime_root;
        plans[n++] = &cfg->profile_dir;
        plans[n++] = &cfg->storage_domain_root;
        plans[n++] = &cfg->runtime_domain_root;
        for (size_t i = 0; i < cfg->n_volumes && n < LZ_ARRAY_SIZE(plans); i++)
            plans[n++] = &cfg->volumes[i].source;
        for (size_t i = 0; i < n; i++) {
            _cleanup_close_ int fd = lz_plan_open(plans[i], O_PATH, true, err);
            if (fd < 0) {
                lz_error_hint(err, "a path changed while the configuration was being loaded; "
                                   "run the command again");
                goto out;
            }
        }
        for (size_t i = 0; i < cfg->n_rules; i++) {
            _cleanup_close_ int fd = lz_plan_open(&cfg->rules[i].executable, O_PATH, true, err);
            if (fd < 0)
                goto out;
        }
    }

    /* Plain values and the default command: copied as written. */
    cfg->environment =
        lz_xcalloc(pr->n_environment ? pr->n_environment : 1, sizeof(lz_setenv_decl));
    for (size_t i = 0; i < pr->n_environment; i++)
        cfg->environment[cfg->n_environment++] =
            (lz_setenv_decl){ lz_xstrdup(pr->environment[i].name),
                              lz_xstrdup(pr->environment[i].value), pr->environment[i].pos };
    qsort(cfg->environment, cfg->n_environment, sizeof(*cfg->environment), cmp_setenv);
    if (pr->n_command) {
        cfg->command = lz_xcalloc(pr->n_command + 1, sizeof(char *));
        for (size_t i = 0; i < pr->n_command; i++)
            cfg->command[cfg->n_command++] = lz_xstrdup(pr->command[i]);
    }

    /* 6. Environment references, last. Values are never printed. */
    cfg->env = lz_xcalloc(pr->n_env, sizeof(lz_resolved_env));
    for (size_t i = 0; i < pr->n_env; i++) {
        const lz_env_decl *d = &pr->env[i];
        lz_resolved_env *e = &cfg->env[cfg->n_env++];
        e->sandbox_name = lz_xstrdup(d->sandbox_name);
        e->host_name = lz_xstrdup(d->host_name);
        const char *value = getenv(d->host_name);
        if (!value) {
            lz_error_set(err, 0,
                         "%s:%u:%u: profiles.%s.env.%s: the host environment variable "
                         "%s is not set",
                         cfg->config_file.label, d->pos.line, d->pos.column, pr->name,
                         d->sandbox_name, d->host_name);
            lz_error_hint(err,
                          "export %s in the shell that runs lazaret, or remove the "
                          "reference",
                          d->host_name);
            goto out;
        }
        if (!lz_utf8_valid(value, strlen(value))) {
            lz_error_set(err, 0,
                         "%s:%u:%u: profiles.%s.env.%s: the value of %s is not valid "
                         "UTF-8 (value not shown)",
                         cfg->config_file.label, d->pos.line, d->pos.column, pr->name,
                         d->sandbox_name, d->host_name);
            lz_error_hint(err, "set %s to a UTF-8 value", d->host_name);
            goto out;
        }
        e->value = lz_xstrdup(value);
    }
    qsort(cfg->env, cfg->n_env, sizeof(*cfg->env), cmp_env);

    /* 7. Fingerprint. */
    if ((cfg->schema_version == 2
             ? lz_configuration_fingerprint_v2(cfg, cfg->fingerprint, err)
             : lz_configuration_fingerprint_v1(cfg, cfg->fingerprint, err)) < 0)
        goto out;

    *ret = TAKE_PTR(cfg);
    r = 0;
out:
    for (size_t i = 0; i < n_vol; i++)
        free(vol_labels ? vol_labels[i] : NULL);
    free(vol_labels);
    free(vol_missing);
    lz_resolved_config_free(cfg);
    lz_config_doc_free(doc);
    lz_config_source_clear(&src);
    inputs_clear(&in);
    return r;
}

size_t lz_resolved_config_fds(const lz_resolved_config *cfg, int *out, size_t max)
{
    const lz_path_plan *plans[] = {
        &cfg->config_file, &cfg->workspace,           &cfg->storage_root,        &cfg->runtime_root,
        &cfg->profile_dir, &cfg->storage_domain_root, &cfg->runtime_domain_root,
    };
    size_t n = 0;
#define KEEP(fd)                                                                                   \
    do {                                                                                           \
        if (n < max)                                                                               \
            out[n] = (fd);                                                                         \
        n++;                                                                                       \
    } while (0)
    for (size_t i = 0; i < sizeof(plans) / sizeof(plans[0]); i++)
        KEEP(plans[i]->ancestor_fd);
    for (size_t i = 0; i < cfg->n_volumes; i++)
        KEEP(cfg->volumes[i].source.ancestor_fd);
    for (size_t i = 0; i < cfg->n_rules; i++)
        KEEP(cfg->rules[i].executable.ancestor_fd);
#undef KEEP
    return n;
}

char *lz_domain_log_label(const lz_resolved_config *cfg)
{
    return lz_xasprintf("%s/logs/coordinator.log", cfg->storage_domain_root.label);
}
