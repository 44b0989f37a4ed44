/* SPDX-License-Identifier: Apache-2.0
 *
 * Git Sentry: git-ignored isolation (isolate_gitignored): the paths the host's Git
 * lists as ignored get the Domain's own copies, bound over them, and stay
 * isolated across generations (the record, records.c); the session-start
 * notice naming a few of them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "fs/confined.h"
#include "gitsentry/internal.h"

/* Names of a Git directory's own entries. */
static bool git_dir_name(const char *name)
{
    static const char *const names[] = { "HEAD",      "objects",    "refs",    "config",
                                         "hooks",     "info",       "logs",    "commondir",
                                         "worktrees", "modules",    "remotes", "branches",
                                         "index",     "packed-refs" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(names); i++)
        if (strcmp(name, names[i]) == 0)
            return true;
    return false;
}

static bool is_literal_pattern(const char *s)
{
    if (!*s || s[0] == '#' || s[0] == '!')
        return false;
    for (const char *p = s; *p; p++)
        if (strchr("*?[]\\ ", *p))
            return false;
    return true;
}

/* The Domain's copy of one ignored path: created empty when missing. The
 * copy lies in a directory the sandbox wrote in earlier sessions: a symlink,
 * a special file or a type change there refuses the start (never followed,
 * never bound). */
static int make_ignored_copy(builder *b, int ign, const char *rel, bool dir, lz_error **err)
{
    _cleanup_free_ char *label =
        lz_xasprintf("%s/ignored/%s", b->cfg->storage_domain_root.label, rel);
    const char *slash = strrchr(rel, '/');
    const char *name = slash ? slash + 1 : rel;
    _cleanup_free_ char *parent = slash ? lz_xstrndup(rel, (size_t) (slash - rel)) : NULL;
    _cleanup_close_ int pfd = parent
                                  ? lz_mkdirs_confined(ign, parent, label, err)
                                  : lz_open_confined(ign, ".", O_PATH | O_DIRECTORY, 0, label, err);
    if (pfd < 0)
        goto refuse;
    if (dir) {
        if (mkdirat(pfd, name, 0755) < 0 && errno != EEXIST)
            return lz_error_set(err, errno, "cannot create %s", label);
    } else {
        int cf = openat(pfd, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
        if (cf >= 0)
            close(cf);
    }
    struct stat st;
    if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return lz_error_set(err, errno, "cannot create %s", label);
    if (dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode))
        return 0;
    lz_error_set(err, 0, "the Domain's copy of the git-ignored path %s is %s", label,
                 S_ISLNK(st.st_mode)                          ? "a symlink"
                 : S_ISDIR(st.st_mode) || S_ISREG(st.st_mode) ? "of another type than in the "
                                                                "workspace"
                                                              : "a special file");
refuse:
    lz_error_free(lz_error_take(err));
    lz_error_set(err, 0,
                 "the Domain's copy of the git-ignored path %s is not a plain %s (a symlink, "
                 "special file or mount planted by an earlier session of the sandbox?)",
                 label, dir ? "directory" : "file");
    return lz_error_hint(err,
                         "Lazaret will not bind it into the sandbox: inspect and remove %s "
                         "(or the Domain's whole ignored/ directory), then run again",
                         label);
}

/* The session-start line (lz_git_sentry_ignored_notice): the count and up
 * to three distinct names, shallowest first (so `.env` and `dist/` before
 * `pkg/a/__pycache__/`), each at most 40 bytes: bounded whatever the
 * workspace holds. ignored[] holds paths with "/" after directories. */
#define NOTICE_NAMES 3
#define NOTICE_NAME_MAX 40

static char *ignored_notice(const lz_git_plan *p)
{
    if (p->n_ignored == 0)
        return NULL;
    const char *pick[NOTICE_NAMES] = { 0 };
    bool pick_dir[NOTICE_NAMES] = { 0 };
    size_t n_pick = 0, n_names = 0;
    /* Shallowest first: a bounded number of passes over the list, one per
     * depth, stopping once enough names are found (the names counted past
     * the last pick only decide whether to print "…"). */
    size_t max_depth = 0;
    for (size_t i = 0; i < p->n_ignored; i++) {
        size_t d = lz_gs_path_depth(p->ignored[i]);
        if (d > max_depth)
            max_depth = d;
    }
    for (size_t depth = 0; depth <= max_depth && n_names <= NOTICE_NAMES; depth++) {
        for (size_t i = 0; i < p->n_ignored && n_names <= NOTICE_NAMES; i++) {
            const char *rel = p->ignored[i];
            if (lz_gs_path_depth(rel) != depth)
                continue;
            const char *base = rel + strlen(rel);
            if (base > rel && base[-1] == '/')
                base--;
            while (base > rel && base[-1] != '/')
                base--;
            bool seen = false;
            for (size_t k = 0; k < n_pick && !seen; k++)
                seen = strcmp(pick[k], base) == 0;
            if (seen)
                continue;
            n_names++;
            if (n_pick < NOTICE_NAMES) {
                pick_dir[n_pick] = p->ignored_dir && p->ignored_dir[i];
                pick[n_pick++] = base;
            }
        }
    }
    size_t cap = 256 + NOTICE_NAMES * (NOTICE_NAME_MAX + 8);
    char *line = lz_xcalloc(cap, 1);
    size_t len =
        (size_t) snprintf(line, cap,
                          "%zu git-ignored path%s %s the sandbox's own "
                          "cop%s (",
                          p->n_ignored, p->n_ignored == 1 ? "" : "s",
                          p->n_ignored == 1 ? "is" : "are", p->n_ignored == 1 ? "y" : "ies");
    for (size_t k = 0; k < n_pick; k++) {
        size_t bl = strlen(pick[k]);
        bool cut = bl > NOTICE_NAME_MAX;
        len += (size_t) snprintf(line + len, cap - len, "%s%.*s%s%s", k ? ", " : "",
                                 (int) (cut ? NOTICE_NAME_MAX : bl), pick[k], cut ? "…" : "",
                                 pick_dir[k] ? "/" : "");
    }
    snprintf(line + len, cap - len, "%s); see docs/git.md \"Git-ignored files\"",
             n_names > n_pick ? ", …" : "");
    return line;
}

/* ---- git-ignored paths ----------------------------------------------------- */

/* Sort the plan's ignored paths, their directory flags alongside. */
static void sort_ignored(lz_git_plan *p)
{
    typedef struct {
        char *rel;
        bool dir;
    } pair;
    pair *v = lz_xcalloc(p->n_ignored, sizeof(pair));
    for (size_t i = 0; i < p->n_ignored; i++)
        v[i] = (pair){ p->ignored[i], p->ignored_dir[i] };
    qsort(v, p->n_ignored, sizeof(pair), lz_gs_cmp_str); /* rel first: compares as char * */
    for (size_t i = 0; i < p->n_ignored; i++) {
        p->ignored[i] = v[i].rel;
        p->ignored_dir[i] = v[i].dir;
    }
    free(v);
}

void lz_gs_ignored_run_clear(ignored_run *r)
{
    lz_close(&r->droot);
    lz_close(&r->ign);
    lz_gs_names_clear(&r->record);
    lz_gs_names_clear(&r->placeholders);
}

/* Isolate one path (relative to the workspace; "/" after a directory
 * allowed): the Domain's copy, bound over it, its parents bind points. */
static int isolate_one(builder *b, ignored_run *run, const char *path, bool recorded,
                       lz_error **err)
{
    _cleanup_free_ char *entry = lz_xstrdup(path);
    size_t n = strlen(entry);
    if (n && entry[n - 1] == '/')
        entry[--n] = '\0';
    if (!n || !lz_path_is_normalized_rel(entry))
        return 0;
    if (lz_gs_in_ignored_copy(b->p, entry))
        return 0; /* already inside the Domain's copy of a directory above */
    if (b->p->n_ignored >= MAX_IGNORED || b->p->n_mounts >= MAX_WORKSPACE_MOUNTS) {
        lz_error_set(err, 0,
                     "the workspace %s has more git-ignored paths than Lazaret isolates "
                     "(%d paths, %d mounts with their parent directories)",
                     b->ws, MAX_IGNORED, MAX_WORKSPACE_MOUNTS);
        return lz_error_hint(err, "ignore whole directories rather than the files in them "
                                  "(`build/` rather than `build/*.o`), remove generated "
                                  "directories you no longer need (git clean -ndX lists "
                                  "them), or set isolate_gitignored = false in the profile "
                                  "(ignored files are then shared with the sandbox)");
    }
    struct stat st;
    if (lz_lstat_confined(b->ws_fd, entry, &st) < 0 || S_ISLNK(st.st_mode) ||
        (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)))
        return 0; /* symlinks and special files are left as they are */
    /* Already a mount of the plan: a protection, or the bind point above
     * one (a hooks directory or include file of the configuration inside
     * this ignored directory). The first mount of a path is the one made,
     * so a copy here would not be bound — and recording the path as
     * ignored would take the host's directory out of the audit (attack
     * round i12a, T1). It stays the host's: shared with the sandbox,
     * protected where the plan protects it, audited like any other path. */
    if (lz_gs_has_mount(b->p, entry)) {
        if (recorded) {
            /* Isolated by an earlier generation, now named by the Git
             * configuration: it cannot be both, and sharing it now would
             * show the sandbox what it hid before. */
            lz_error_set(err, 0,
                         "%s/%s was kept hidden from the sandbox as a git-ignored path, "
                         "and the Git configuration now names it or something in it "
                         "(a hooks directory, an include file)",
                         b->ws, entry);
            return lz_error_hint(err,
                                 "move the hooks directory or include file out of it, or "
                                 "lazaret state reset (the sandbox then shares the host's "
                                 "%s)",
                                 entry);
        }
        b->p->n_ignored_shared++;
        return 0;
    }
    bool dir = S_ISDIR(st.st_mode);
    if (make_ignored_copy(b, run->ign, entry, dir, err) < 0)
        return -1;
    lz_gs_add_mount(b, entry, LZ_MOUNT_FROM_IGNORED, false, dir);
    /* Its parents become bind points: gVisor lets the sandbox rename a
     * directory with a mount inside, which would leave a new, writable
     * directory under the ignored path's name. */
    _cleanup_free_ char *anc = lz_xstrdup(entry);
    for (char *c = anc; (c = strchr(c, '/')); c++) {
        *c = '\0';
        lz_gs_add_mount(b, anc, LZ_MOUNT_FROM_WORKSPACE, false, true);
        *c = '/';
    }
    /* Kept without a directory's "/" (the audit compares paths), whether
     * it is one alongside. */
    size_t n_ign = b->p->n_ignored;
    if (n_ign == 0 || (n_ign & (n_ign - 1)) == 0) { /* capacity: the next power of two */
        b->p->ignored = lz_xrealloc(b->p->ignored, n_ign ? 2 * n_ign : 1, sizeof(char *));
        b->p->ignored_dir = lz_xrealloc(b->p->ignored_dir, n_ign ? 2 * n_ign : 1, sizeof(bool));
    }
    b->p->ignored[n_ign] = lz_xstrdup(entry);
    b->p->ignored_dir[n_ign] = dir;
    b->p->n_ignored++;
    return 0;
}

/* The paths the host's Git lists as ignored in the work tree wt ("" the
 * workspace's own; gd its Git directory), isolated. */
int lz_gs_isolate_listed(builder *b, ignored_run *run, const char *gd, const char *wt,
                         bool required, lz_error **err)
{
    lz_spawn_output out = { 0 };
    char *const args[] = { (char *) "ls-files",
                           (char *) "-z",
                           (char *) "--others",
                           (char *) "--ignored",
                           (char *) "--exclude-standard",
                           (char *) "--directory",
                           NULL };
    int status = lz_gs_host_git_in(b, gd, wt, args, &out, err);
    if (status < 0)
        return -1;
    if (status != 0 && !required) {
        /* A nested work tree the host's Git cannot use (a stale worktree's
         * `.git` file, a submodule's Git directory the sandbox broke): it
         * has no ignored files of its own to list. What earlier
         * generations isolated there stays isolated (the record); nothing
         * else of it was ever hidden (attack round i12e, H1/H2: every start
         * was refused). */
        lz_spawn_output_free(&out);
        b->p->n_trees_unlisted++;
        return 0;
    }
    if (status != 0) {
        lz_spawn_output_free(&out);
        lz_error_set(err, 0, "git ls-files failed (status %d) in %s%s%s", status, b->ws,
                     *wt ? "/" : "", wt);
        return lz_error_hint(err,
                             "check that the host's git status works in %s%s%s; the "
                             "Git Sentry lists the git-ignored paths with it",
                             b->ws, *wt ? "/" : "", wt);
    }
    int r = 0;
    for (size_t i = 0; r == 0 && i < out.len;) {
        char *entry = out.data + i;
        size_t n = strnlen(entry, out.len - i);
        i += n + 1;
        if (n == 0)
            continue;
        _cleanup_free_ char *rel = *wt ? lz_xasprintf("%s/%s", wt, entry) : lz_xstrdup(entry);
        r = isolate_one(b, run, rel, false, err);
    }
    lz_spawn_output_free(&out);
    return r;
}

/* Begin: the Domain's ignored/, the records, the placeholders. */
int lz_gs_isolate_begin(builder *b, const lz_resolved_config *cfg, ignored_run *run, lz_error **err)
{
    run->droot = lz_plan_open(&cfg->storage_domain_root, O_PATH | O_DIRECTORY, true, err);
    if (run->droot < 0)
        return -1;
    if (mkdirat(run->droot, "ignored", 0700) < 0 && errno != EEXIST)
        return lz_error_set(err, errno, "cannot create %s/ignored", cfg->storage_domain_root.label);
    run->ign = lz_open_confined(run->droot, "ignored", O_PATH | O_DIRECTORY, 0,
                                "ignored/ of the Domain Root", err);
    if (run->ign < 0)
        return -1;
    if (lz_gs_record_read(run->droot, IGNORED_RECORD, MAX_IGNORED, cfg->storage_domain_root.label,
                          &run->record, err) < 0 ||
        lz_gs_record_read(run->droot, PLACEHOLDER_RECORD, MAX_PLACEHOLDERS,
                          cfg->storage_domain_root.label, &run->placeholders, err) < 0)
        return -1;

    /* Directory patterns of the top-level .gitignore and info/exclude name
     * paths that do not exist yet (node_modules/, target/): give them an
     * empty placeholder on the host so they can be isolated too. Both files
     * are the sandbox's to write: at most MAX_PLACEHOLDERS such directories
     * in the Domain's life (attack rounds i12a P1 and i12c P3: 300,000 `dN/`
     * lines made as many host directories, then 64 more at every start). */
    size_t before = run->placeholders.n;
    /* The placeholders an earlier generation made, again where the end of
     * that generation removed them (lz_git_sentry_remove_placeholders): the
     * recorded ignored path needs its mount point back, or it would not be
     * isolated now. The record is Lazaret's own (the Domain Root), its
     * names checked like the patterns' all the same. */
    for (size_t i = 0; i < run->placeholders.n; i++) {
        const char *rel = run->placeholders.v[i];
        if (*rel && !strchr(rel, '/') && strcmp(rel, ".git") != 0 && strcmp(rel, "..") != 0 &&
            strcmp(rel, ".") != 0 && !git_dir_name(rel))
            lz_best_effort(mkdirat(b->ws_fd, rel, 0755));
    }
    static const char *const pattern_files[] = { ".gitignore", ".git/info/exclude" };
    for (size_t f = 0; f < LZ_ARRAY_SIZE(pattern_files) && run->placeholders.n < MAX_PLACEHOLDERS;
         f++) {
        int fd = lz_open_confined(b->ws_fd, pattern_files[f], O_RDONLY | O_NONBLOCK, 0,
                                  pattern_files[f], NULL);
        FILE *fp = fd >= 0 ? fdopen(fd, "re") : NULL;
        if (!fp) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        char line[512];
        while (run->placeholders.n < MAX_PLACEHOLDERS && fgets(line, sizeof(line), fp)) {
            line[strcspn(line, "\r\n")] = '\0';
            size_t n = strlen(line);
            if (n < 2 || line[n - 1] != '/' || !is_literal_pattern(line))
                continue;
            line[n - 1] = '\0';
            const char *rel = line[0] == '/' ? line + 1 : line;
            if (!*rel || strchr(rel, '/') || strcmp(rel, ".git") == 0 || strcmp(rel, "..") == 0 ||
                strcmp(rel, ".") == 0 || git_dir_name(rel))
                continue; /* never a name that would help the workspace look like a Git dir */
            if (!lz_gs_names_has(&run->placeholders, rel) && mkdirat(b->ws_fd, rel, 0755) == 0)
                lz_gs_names_add(&run->placeholders, rel);
        }
        fclose(fp);
    }
    if (run->placeholders.n != before &&
        lz_gs_record_write(run->droot, PLACEHOLDER_RECORD, &run->placeholders,
                           cfg->storage_domain_root.label, err) < 0)
        return -1;

    /* Git opens these with a blocking open: a FIFO there would hang it. */
    static const char *const must_be_files[] = { ".gitignore", ".git/info/exclude" };
    for (size_t f = 0; f < LZ_ARRAY_SIZE(must_be_files); f++) {
        struct stat st;
        if (lz_lstat_confined(b->ws_fd, must_be_files[f], &st) == 0 && !S_ISREG(st.st_mode) &&
            !S_ISLNK(st.st_mode)) {
            lz_error_set(err, 0, "%s/%s is not a regular file", b->ws, must_be_files[f]);
            return lz_error_hint(err, "Git would block reading it; replace it by a regular file "
                                      "(or remove it)");
        }
    }
    return 0;
}

/* Finish: what earlier generations isolated is isolated again, the record
 * is the union, and the plan's list is sorted and pinned for the audit
 * (called again after the nested work trees added theirs). */
/* What earlier generations isolated, isolated again — before anything the
 * rules list now: an entry now listed below a recorded directory is then
 * inside its copy, never a bind point that would take the directory out
 * of isolation (attack round i12d, D1: `secrets/` narrowed to
 * `secrets/[a-m]*` shared the rest of it). */
int lz_gs_isolate_recorded(builder *b, ignored_run *run, lz_error **err)
{
    for (size_t i = 0; i < run->record.n; i++)
        if (isolate_one(b, run, run->record.v[i], true, err) < 0)
            return -1;
    return 0;
}

int lz_gs_isolate_finish(builder *b, const lz_resolved_config *cfg, ignored_run *run,
                         lz_error **err)
{
    int r = 0;
    name_list all = { 0 };
    for (size_t i = 0; i < run->record.n; i++)
        lz_gs_names_add(&all, run->record.v[i]);
    for (size_t i = 0; i < b->p->n_ignored; i++) {
        _cleanup_free_ char *with = b->p->ignored_dir[i] ? lz_xasprintf("%s/", b->p->ignored[i])
                                                         : lz_xstrdup(b->p->ignored[i]);
        lz_gs_names_add(&all, with);
    }
    /* The union: sorted, each once (up to 20,000 paths each side). */
    if (all.n > 1)
        qsort(all.v, all.n, sizeof(char *), lz_gs_cmp_str);
    size_t u = 0;
    for (size_t i = 0; i < all.n; i++) {
        if (u && strcmp(all.v[u - 1], all.v[i]) == 0)
            free(all.v[i]);
        else
            all.v[u++] = all.v[i];
    }
    all.n = u;
    size_t bytes = 0;
    for (size_t i = 0; i < all.n; i++)
        bytes += strlen(all.v[i]) + 1;
    if (all.n > MAX_IGNORED || bytes > RECORD_MAX) {
        lz_gs_names_clear(&all);
        lz_error_set(err, 0,
                     "the workspace %s has had more git-ignored paths than Lazaret keeps "
                     "hidden (%d paths or %zu MiB of names, counting earlier sessions')",
                     b->ws, MAX_IGNORED, RECORD_MAX >> 20);
        return lz_error_hint(err, "ignore whole directories rather than the files in them and "
                                  "remove generated files; then lazaret state reset — which also "
                                  "forgets which paths were hidden: first check that the ignore "
                                  "rules still list your secrets (git status --ignored)");
    }
    r = lz_gs_record_write(run->droot, IGNORED_RECORD, &all, cfg->storage_domain_root.label, err);
    lz_gs_names_clear(&all);
    if (r < 0)
        return -1;
    free(b->p->ignored_notice);
    b->p->ignored_notice = ignored_notice(b->p);
    if (b->p->n_ignored > 1)
        sort_ignored(b->p);
    free(b->p->ignored_ids);
    b->p->ignored_ids = lz_xcalloc(b->p->n_ignored ? b->p->n_ignored : 1, sizeof(lz_git_marker));
    for (size_t i = 0; i < b->p->n_ignored; i++) {
        struct stat st;
        if (lz_lstat_confined(b->ws_fd, b->p->ignored[i], &st) == 0)
            b->p->ignored_ids[i] = (lz_git_marker){ NULL, st.st_dev, st.st_ino };
    }
    return 0;
}

int lz_git_sentry_remove_placeholders(const lz_git_plan *plan, size_t *ret_removed, lz_error **err)
{
    *ret_removed = 0;
    if (!plan->cfg || plan->ws_fd < 0)
        return 0;
    _cleanup_close_ int droot =
        lz_plan_open(&plan->cfg->storage_domain_root, O_PATH | O_DIRECTORY, true, err);
    if (droot < 0)
        return -1;
    name_list made = { 0 };
    if (lz_gs_record_read(droot, PLACEHOLDER_RECORD, MAX_PLACEHOLDERS,
                          plan->cfg->storage_domain_root.label, &made, err) < 0)
        return -1;
    for (size_t i = 0; i < made.n; i++) {
        const char *rel = made.v[i];
        if (!*rel || strchr(rel, '/') || strcmp(rel, ".git") == 0 || strcmp(rel, "..") == 0 ||
            strcmp(rel, ".") == 0 || git_dir_name(rel))
            continue;
        /* One name in the workspace's own directory, through its
         * descriptor: rmdir follows no symlink (a symlink there fails with
         * ENOTDIR) and removes only an empty directory, atomically: whatever
         * the developer put into it keeps it (ENOTEMPTY). */
        if (unlinkat(plan->ws_fd, rel, AT_REMOVEDIR) == 0)
            (*ret_removed)++;
    }
    lz_gs_names_clear(&made);
    return 0;
}
