/* SPDX-License-Identifier: Apache-2.0
 *
 * Git Sentry: the mount plan (lz_git_sentry_plan): what the host's Git reads in every
 * Git directory of the workspace protected read-only, every ancestor of
 * those a bind point, the quarantine, and the plan's lists of what existed
 * at start (repository markers, modules/ members) for the audit.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/timing.h"
#include "common/util.h"
#include "fs/confined.h"
#include "fs/relpath.h"
#include "gitsentry/internal.h"

/* The plan's mounts are looked up by path for every ancestor of every
 * ignored path (thousands): a hash index (FNV-1a, open addressing), not a
 * scan of the list. */
size_t lz_gs_hash_str(const char *s)
{
    size_t h = (size_t) 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char) *s) * (size_t) 1099511628211ULL;
    return h;
}

static size_t *mount_slot(const lz_git_plan *p, const char *rel)
{
    size_t mask = p->mount_index_cap - 1;
    for (size_t i = lz_gs_hash_str(rel) & mask;; i = (i + 1) & mask) {
        size_t v = p->mount_index[i];
        if (v == 0 || strcmp(p->mounts[v - 1].rel, rel) == 0)
            return &p->mount_index[i];
    }
}

bool lz_gs_has_mount(const lz_git_plan *p, const char *rel)
{
    return p->mount_index_cap && *mount_slot(p, rel) != 0;
}

/* (Re)build the index: after the list was sorted or read back. */
void lz_gs_index_mounts(lz_git_plan *p)
{
    free(p->mount_index);
    p->mount_index_cap = 64;
    while (p->mount_index_cap < 2 * p->n_mounts)
        p->mount_index_cap *= 2;
    p->mount_index = lz_xcalloc(p->mount_index_cap, sizeof(size_t));
    for (size_t i = 0; i < p->n_mounts; i++)
        *mount_slot(p, p->mounts[i].rel) = i + 1;
}

void lz_gs_add_mount(builder *b, const char *rel, lz_mount_base base, bool readonly, bool dir)
{
    lz_git_plan *p = b->p;
    if (lz_gs_has_mount(p, rel))
        return;
    size_t n = p->n_mounts;
    if (n == 0 || (n & (n - 1)) == 0) /* capacity: the next power of two */
        p->mounts = lz_xrealloc(p->mounts, n ? 2 * n : 1, sizeof(lz_workspace_mount));
    p->mounts[p->n_mounts++] = (lz_workspace_mount) { lz_xstrdup(rel), base, readonly, dir };
    if (2 * p->n_mounts > p->mount_index_cap) { /* at most half full */
        lz_gs_index_mounts(p);
    } else {
        *mount_slot(p, rel) = p->n_mounts;
    }
}

/* Is rel, or a directory above it, bound from the Domain's ignored copies? */
bool lz_gs_in_ignored_copy(const lz_git_plan *p, const char *rel)
{
    _cleanup_free_ char *copy = lz_xstrdup(rel);
    for (char *end = copy + strlen(copy);;) {
        *end = '\0';
        if (lz_gs_has_mount(p, copy) && p->mounts[*mount_slot(p, copy) - 1].base == LZ_MOUNT_FROM_IGNORED)
            return true;
        char *slash = strrchr(copy, '/');
        if (!slash)
            return false;
        end = slash;
    }
}

void lz_gs_add_marker(lz_git_marker **v, size_t *n, const char *rel, const struct stat *st)
{
    *v = lz_xrealloc(*v, *n + 1, sizeof(lz_git_marker));
    (*v)[(*n)++] = (lz_git_marker) { lz_xstrdup(rel), st->st_dev, st->st_ino };
}

bool lz_gs_known(const lz_git_marker *v, size_t n, const char *rel, const struct stat *st)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].ino == st->st_ino && v[i].dev == st->st_dev && strcmp(v[i].rel, rel) == 0)
            return true;
    return false;
}

/* Protect an existing path read-only. gVisor lets the sandbox rename a
 * directory that has bind mounts inside it, which would let it move a
 * protected file away with its parent and put its own in the old place; so
 * every ancestor directory below the workspace (and below .git, already a
 * mount point) becomes a read-write bind point too: a mount point cannot be
 * renamed. A symlink on the way or at the end refuses the start: the sandbox
 * could change what it points to. */
int lz_gs_protect_if_exists(builder *b, const char *rel, lz_error **err)
{
    /* Inside the Domain's copy of a git-ignored directory the sandbox sees
     * its own files, never the host's: the host's file there, which the
     * host's Git reads, is out of its reach already. A protection would be
     * mounted into the copy, where its mount point need not exist (attack
     * round i12c, O1: every start refused). */
    if (lz_gs_in_ignored_copy(b->p, rel))
        return 0;
    struct stat st;
    if (lz_lstat_confined(b->ws_fd, rel, &st) < 0) {
        if (errno == ENOENT)
            return 0;
        lz_error_set(err, errno, "Git Sentry: cannot protect %s/%s", b->ws, rel);
        if (errno == ELOOP || errno == ENOTDIR)
            return lz_error_hint(err, "a directory on its path is a symlink, which the sandbox "
                                      "could point elsewhere; make it a real directory");
        return -1;
    }
    if (S_ISLNK(st.st_mode)) {
        lz_error_set(err, 0, "Git Sentry: %s/%s is a symlink, and the host's Git reads it", b->ws,
                     rel);
        return lz_error_hint(err, "the sandbox could change what it points to: replace the "
                                  "symlink by the file or directory itself (for hooks, use "
                                  "'git config core.hooksPath DIR' instead)");
    }
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
        lz_error_set(err, 0, "Git Sentry: %s/%s is a special file", b->ws, rel);
        return lz_error_hint(err, "remove it; Git reads configuration only from regular files");
    }
    _cleanup_free_ char *copy = lz_xstrdup(rel);
    for (char *p = copy; (p = strchr(p, '/')); p++) {
        *p = '\0';
        if (strcmp(copy, ".git") != 0)
            lz_gs_add_mount(b, copy, LZ_MOUNT_FROM_WORKSPACE, false, true);
        *p = '/';
    }
    lz_gs_add_mount(b, rel, LZ_MOUNT_FROM_WORKSPACE, true, S_ISDIR(st.st_mode));
    return 0;
}

bool lz_gs_listed(char **v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], s) == 0)
            return true;
    return false;
}

/* The places inside one Git directory `gd` (relative to the workspace; "."
 * for a bare workspace) that decide what Git executes or how it is
 * configured. */
int lz_gs_protect_git_dir(builder *b, const char *gd, int depth, lz_error **err)
{
    if (lz_gs_listed(b->p->git_dirs, b->p->n_git_dirs, gd))
        return 0;
    b->p->git_dirs = lz_xrealloc(b->p->git_dirs, b->p->n_git_dirs + 1, sizeof(char *));
    b->p->git_dirs[b->p->n_git_dirs++] = lz_xstrdup(gd);

    /* A missing hooks/ would let the sandbox create one: make it exist so
     * that it can be bound read-only (git init creates it too). */
    _cleanup_free_ char *hooks = lz_rel_join(gd, "hooks");
    {
        const char *name;
        _cleanup_close_ int pfd = lz_open_parent_confined(b->ws_fd, hooks, &name, err);
        if (pfd < 0)
            return -1;
        if (mkdirat(pfd, name, 0755) < 0 && errno != EEXIST)
            return lz_error_set(err, errno, "cannot create %s/%s", b->ws, hooks);
    }
    static const char *const fixed[] = { "config",    "hooks",   "commondir", "config.worktree",
                                         "worktrees", "remotes", "branches",  "info/attributes" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(fixed); i++) {
        _cleanup_free_ char *rel = lz_rel_join(gd, fixed[i]);
        if (lz_gs_protect_if_exists(b, rel, err) < 0)
            return -1;
    }

    /* A rebase or cherry-pick the developer stopped before the start is
     * theirs (known by inode); one the sandbox makes is not. */
    for (size_t i = 0; i < LZ_ARRAY_SIZE(lz_gs_sequencer_dirs); i++) {
        _cleanup_free_ char *rel = lz_rel_join(gd, lz_gs_sequencer_dirs[i]);
        struct stat st;
        if (lz_lstat_confined(b->ws_fd, rel, &st) == 0)
            lz_gs_add_marker(&b->p->markers, &b->p->n_markers, rel, &st);
    }

    /* Submodule git dirs: modules/<name>[/modules/<name>…]. */
    _cleanup_free_ char *mods = lz_rel_join(gd, "modules");
    int fd = lz_open_dir_confined(b->ws_fd, mods, O_RDONLY, NULL);
    if (fd < 0)
        return 0;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return lz_error_set(err, errno, "cannot read %s/%s", b->ws, mods);
    }
    /* modules/ is a bind point: it cannot be renamed or replaced. */
    lz_gs_add_mount(b, mods, LZ_MOUNT_FROM_WORKSPACE, false, true);
    struct dirent *e;
    int r = 0;
    while (r == 0 && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        _cleanup_free_ char *sub = lz_xasprintf("%s/%s", mods, e->d_name);
        _cleanup_free_ char *cfg = lz_xasprintf("%s/config", sub);
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        lz_gs_add_marker(&b->p->members, &b->p->n_members, sub, &st);
        if (!S_ISDIR(st.st_mode)) {
            r = lz_gs_protect_if_exists(b, sub, err); /* refuses a symlink */
            continue;
        }
        struct stat cst;
        if (depth < MAX_MODULE_DEPTH && lz_lstat_confined(b->ws_fd, cfg, &cst) == 0 &&
            S_ISREG(cst.st_mode))
            r = lz_gs_protect_git_dir(b, sub, depth + 1, err);
        else
            /* A grouping directory (modules/a/b) or too deep: wholesale. */
            r = lz_gs_protect_if_exists(b, sub, err);
    }
    closedir(d);
    return r;
}

/* Is the Git directory `gd` valid the way Git's is_git_directory() decides
 * (HEAD a ref or an object name, objects/ and refs/, or a commondir)? An
 * invalid one makes the host's Git look elsewhere: in the workspace itself. */
bool lz_gs_valid_git_dir(int ws_fd, const char *gd, char **ret_why)
{
    _cleanup_free_ char *head = lz_rel_join(gd, "HEAD");
    struct stat st;
    if (lz_lstat_confined(ws_fd, head, &st) < 0) {
        *ret_why = lz_xasprintf("%s is missing", head);
        return false;
    }
    if (S_ISLNK(st.st_mode)) {
        *ret_why = lz_xasprintf("%s is a symlink", head);
        return false;
    }
    int fd = lz_open_confined(ws_fd, head, O_RDONLY | O_NONBLOCK, 0, head, NULL);
    char buf[256] = { 0 };
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0)
        close(fd);
    bool ok = false;
    if (n > 0) {
        buf[n] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        if (strncmp(buf, "ref: refs/", 10) == 0 && !strstr(buf, "..")) {
            ok = true;
        } else {
            size_t len = strlen(buf);
            ok = (len == 40 || len == 64) && strspn(buf, "0123456789abcdef") == len;
        }
    }
    if (!ok) {
        *ret_why = lz_xasprintf("%s is neither a ref nor an object name", head);
        return false;
    }
    _cleanup_free_ char *common = lz_rel_join(gd, "commondir");
    if (lz_lstat_confined(ws_fd, common, &st) == 0)
        return true;
    static const char *const dirs[] = { "objects", "refs" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(dirs); i++) {
        _cleanup_free_ char *rel = lz_rel_join(gd, dirs[i]);
        if (lz_lstat_confined(ws_fd, rel, &st) < 0 || !S_ISDIR(st.st_mode)) {
            *ret_why = lz_xasprintf("%s is not a directory", rel);
            return false;
        }
    }
    return true;
}

/* The quarantine: a directory Git never reads, created before the sandbox
 * starts and hidden inside it by an empty read-only mount, so the sandbox
 * can neither see what was moved there nor put anything in its place. */
static int make_quarantine(builder *b, lz_error **err)
{
    lz_git_plan *p = b->p;
    p->quarantine_rel = lz_xstrdup(p->kind == LZ_GIT_REPO   ? ".git/" QUARANTINE_NAME
                                   : p->kind == LZ_GIT_BARE ? QUARANTINE_NAME
                                                            : "." QUARANTINE_NAME);
    const char *name;
    _cleanup_close_ int pfd = lz_open_parent_confined(b->ws_fd, p->quarantine_rel, &name, err);
    if (pfd < 0)
        return -1;
    bool created = mkdirat(pfd, name, 0700) == 0;
    struct stat st;
    if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != getuid()) {
        lz_error_set(err, 0, "the Git Sentry quarantine %s/%s is not a directory of yours", b->ws,
                     p->quarantine_rel);
        return lz_error_hint(err, "an earlier session may have planted it: inspect and remove "
                                  "%s/%s, then run again",
                             b->ws, p->quarantine_rel);
    }
    p->quarantine_fd = lz_open_confined(pfd, name, O_PATH | O_DIRECTORY, 0, p->quarantine_rel, err);
    if (p->quarantine_fd < 0)
        return -1;
    if (created && p->kind != LZ_GIT_REPO && p->kind != LZ_GIT_BARE) {
        /* Outside a Git directory: keep it out of `git status`. */
        _cleanup_close_ int dir = lz_open_confined(pfd, name, O_RDONLY | O_DIRECTORY, 0, name,
                                                   NULL);
        int gi = dir >= 0 ? openat(dir, ".gitignore", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
                                                          O_CLOEXEC, 0600)
                          : -1;
        if (gi >= 0) {
            if (write(gi, "*\n", 2) != 2) {
                /* best effort: only cosmetics in `git status` */
            }
            close(gi);
        }
    }
    lz_gs_add_mount(b, p->quarantine_rel, LZ_MOUNT_FROM_EMPTY, true, true);
    return 0;
}

/* Mounts in an order where every parent comes before what lies inside it
 * (stable: fewer path components first). */
static int cmp_depth(const void *a, const void *b)
{
    const lz_workspace_mount *x = a, *y = b;
    size_t dx = 0, dy = 0;
    for (const char *c = x->rel; *c; c++)
        dx += *c == '/';
    for (const char *c = y->rel; *c; c++)
        dy += *c == '/';
    if (dx != dy)
        return dx < dy ? -1 : 1;
    return x < y ? -1 : x > y;
}


/* The work tree of the Git directory gd (relative, not the workspace's
 * own), relative to the workspace: "x" for x/.git, a submodule's from its
 * core.worktree as the host's Git resolves it; NULL for a bare one or one
 * whose work tree is not inside the workspace below gd's own. */
static char *nested_work_tree(builder *b, const char *gd)
{
    size_t len = strlen(gd);
    if (len > 5 && strcmp(gd + len - 5, "/.git") == 0)
        return lz_xstrndup(gd, len - 5);
    lz_spawn_output out = { 0 };
    char *const args[] = { (char *) "rev-parse", (char *) "--show-toplevel", NULL };
    if (lz_gs_host_git_in(b, gd, NULL, args, &out, NULL) != 0) {
        lz_spawn_output_free(&out);
        return NULL;
    }
    out.data[strcspn(out.data, "\n")] = '\0';
    char *rel = lz_lexical_rel(b->ws, out.data);
    lz_spawn_output_free(&out);
    if (rel && (!*rel || !lz_path_is_normalized_rel(rel))) {
        free(rel);
        rel = NULL;
    }
    return rel;
}

int lz_git_sentry_plan(const lz_resolved_config *cfg, lz_git_plan *ret, lz_error **err)
{
    lz_git_plan p = LZ_GIT_PLAN_INIT;
    builder b = { .p = &p, .cfg = cfg, .ws = cfg->workspace.label, .ws_fd = -1 };
    ignored_run ign = { .droot = -1, .ign = -1 };
    bool isolating = false;
    int r = -1;
    p.ws_fd = lz_plan_open(&cfg->workspace, O_PATH | O_DIRECTORY, true, err);
    if (p.ws_fd < 0)
        return -1;
    b.ws_fd = p.ws_fd;
    p.cfg = cfg;
    if (lz_gs_check_unsafe(&b, err) < 0 || lz_gs_recover_previous(&b, err) < 0)
        goto out;
    struct stat st;
    if (fstatat(b.ws_fd, ".git", &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISDIR(st.st_mode)) {
            p.kind = LZ_GIT_REPO;
        } else if (S_ISREG(st.st_mode)) {
            p.kind = LZ_GIT_GITFILE;
        } else {
            lz_error_set(err, 0, "%s/.git is a symlink or special file", b.ws);
            lz_error_hint(err, "Lazaret cannot keep the sandbox from replacing a symlinked .git; "
                               "make .git a directory (or a gitdir file)");
            goto out;
        }
    } else if (fstatat(b.ws_fd, "HEAD", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
               fstatat(b.ws_fd, "config", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
               fstatat(b.ws_fd, "objects", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
        p.kind = LZ_GIT_BARE;
    }

    switch (p.kind) {
    case LZ_GIT_REPO: {
        _cleanup_free_ char *why = NULL;
        if (!lz_gs_valid_git_dir(b.ws_fd, ".git", &why)) {
            lz_error_set(err, 0, "%s/.git is not a valid Git directory: %s", b.ws, why);
            lz_error_hint(err, "the host's Git would look for another repository — possibly one "
                               "the sandbox made in the workspace; repair it (e.g. 'git "
                               "symbolic-ref HEAD refs/heads/main'), then run again");
            goto out;
        }
        if (lz_gs_protect_git_dir(&b, ".git", 0, err) < 0 || lz_gs_protect_config_sources(&b, ".git", "", err) < 0)
            goto out;
        lz_timing_mark("coordinator: Git Sentry: .git protected");
        if (cfg->isolate_gitignored) {
            isolating = true;
            if (lz_gs_isolate_begin(&b, cfg, &ign, err) < 0 || lz_gs_isolate_recorded(&b, &ign, err) < 0 ||
                lz_gs_isolate_listed(&b, &ign, ".git", "", true, err) < 0 ||
                lz_gs_isolate_finish(&b, cfg, &ign, err) < 0)
                goto out;
            lz_timing_mark("coordinator: Git Sentry: ignored paths listed");
        }
        break;
    }
    case LZ_GIT_GITFILE:
        /* The git dir lies outside the workspace (not visible inside); the
         * .git file itself must not be redirected by the sandbox. */
        lz_gs_add_mount(&b, ".git", LZ_MOUNT_FROM_WORKSPACE, true, false);
        /* A linked worktree or a --separate-git-dir checkout as the
         * workspace has ignored files like any other (attack round i12e,
         * W1: none were isolated): Git follows the protected `.git` file. */
        if (cfg->isolate_gitignored) {
            isolating = true;
            if (lz_gs_isolate_begin(&b, cfg, &ign, err) < 0 || lz_gs_isolate_recorded(&b, &ign, err) < 0 ||
                lz_gs_isolate_listed(&b, &ign, NULL, "", true, err) < 0 ||
                lz_gs_isolate_finish(&b, cfg, &ign, err) < 0)
                goto out;
        }
        break;
    case LZ_GIT_BARE:
        if (lz_gs_protect_git_dir(&b, ".", 0, err) < 0)
            goto out;
        break;
    case LZ_GIT_NONE:
    default:
        break;
    }
    if (make_quarantine(&b, err) < 0)
        goto out;
    /* Every other repository in the tree is the developer's: protect it
     * like the workspace's own. */
    {
        walk w = { .p = &p, .b = &b, .err = err };
        _cleanup_close_ int top = lz_open_dir_confined(b.ws_fd, "", O_RDONLY, err);
        if (top < 0 || lz_gs_walk_dir(&w, top, "", 0) < 0) {
            free(w.report);
            goto out;
        }
        lz_timing_mark("coordinator: Git Sentry: work tree walked");
        if (w.report) { /* what an earlier generation left, set aside now */
            char *all = lz_xasprintf("%s%s%s", p.start_report ? p.start_report : "",
                                     p.start_report ? "; " : "", w.report);
            free(p.start_report);
            free(w.report);
            p.start_report = all;
        }
    }
    /* The configuration of every other repository found (nested ones,
     * submodule git dirs, bare fixtures) may include files or name a hooks
     * directory inside the workspace too. */
    for (size_t g = 0, n = p.n_git_dirs; g < n; g++) {
        const char *gd = p.git_dirs[g];
        if (strcmp(gd, ".git") == 0 && p.kind == LZ_GIT_REPO)
            continue; /* done above */
        size_t len = strlen(gd);
        _cleanup_free_ char *wt = NULL;
        if (len > 5 && strcmp(gd + len - 5, "/.git") == 0)
            wt = lz_xstrndup(gd, len - 5);
        if (lz_gs_protect_config_sources(&b, gd, wt, err) < 0)
            goto out;
    }
    /* The ignored files of every other work tree found (nested repositories,
     * submodule checkouts): the top's Git does not list what lies in a
     * repository of its own (attack round i12c, N1: nested/.env and a
     * submodule's lib/.env were the host's). After the walk, which found
     * them, and after their configuration's protections, which win. */
    if (isolating) {
        for (size_t g = 0, n = p.n_git_dirs; g < n; g++) {
            const char *gd = p.git_dirs[g];
            if (strcmp(gd, ".git") == 0 || strcmp(gd, ".") == 0)
                continue;
            _cleanup_free_ char *wt = nested_work_tree(&b, gd);
            if (wt && lz_gs_isolate_listed(&b, &ign, gd, wt, false, err) < 0)
                goto out;
        }
        /* Work trees behind a `.git` file (round i12d, G1: a linked
         * worktree inside the workspace, a --separate-git-dir repository). */
        for (size_t t = 0; t < b.n_gitfile_trees; t++)
            if (lz_gs_isolate_listed(&b, &ign, NULL, b.gitfile_trees[t], false, err) < 0)
                goto out;
        if (lz_gs_isolate_finish(&b, cfg, &ign, err) < 0)
            goto out;
    }
    if (p.n_mounts > 1)
        qsort(p.mounts, p.n_mounts, sizeof(lz_workspace_mount), cmp_depth);
    lz_gs_index_mounts(&p);
    *ret = p;
    p = (lz_git_plan) LZ_GIT_PLAN_INIT;
    r = 0;
out:
    for (size_t t = 0; t < b.n_gitfile_trees; t++)
        free(b.gitfile_trees[t]);
    free(b.gitfile_trees);
    lz_gs_ignored_run_clear(&ign);
    lz_git_plan_clear(&p);
    return r;
}

const char *lz_git_sentry_ignored_notice(const lz_git_plan *plan)
{
    return plan->ignored_notice;
}

void lz_git_plan_clear(lz_git_plan *plan)
{
    for (size_t i = 0; i < plan->n_mounts; i++)
        free(plan->mounts[i].rel);
    free(plan->mounts);
    free(plan->mount_index);
    free(plan->ignored_notice);
    for (size_t i = 0; i < plan->n_ignored; i++)
        free(plan->ignored[i]);
    free(plan->ignored);
    free(plan->ignored_dir);
    free(plan->ignored_ids);
    for (size_t i = 0; i < plan->n_markers; i++)
        free(plan->markers[i].rel);
    free(plan->markers);
    for (size_t i = 0; i < plan->n_members; i++)
        free(plan->members[i].rel);
    free(plan->members);
    for (size_t i = 0; i < plan->n_git_dirs; i++)
        free(plan->git_dirs[i]);
    free(plan->git_dirs);
    for (size_t i = 0; i < plan->n_watches; i++)
        free(plan->watches[i].name);
    free(plan->watches);
    free(plan->wd_slots);
    free(plan->child_slots);
    free(plan->quarantine_rel);
    free(plan->failed_rel);
    free(plan->start_report);
    if (plan->ws_fd >= 0)
        close(plan->ws_fd);
    if (plan->quarantine_fd >= 0)
        close(plan->quarantine_fd);
    if (plan->inotify_fd >= 0)
        close(plan->inotify_fd);
    lz_sentry_eye_stop(plan->eye);
    free(plan->eye_error);
    *plan = (lz_git_plan) LZ_GIT_PLAN_INIT;
}
