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
        return lz_error_hint(err,
                             "an earlier session may have planted it: inspect and remove "
                             "%s/%s, then run again",
                             b->ws, p->quarantine_rel);
    }
    p->quarantine_fd = lz_open_confined(pfd, name, O_PATH | O_DIRECTORY, 0, p->quarantine_rel, err);
    if (p->quarantine_fd < 0)
        return -1;
    if (created && p->kind != LZ_GIT_REPO && p->kind != LZ_GIT_BARE) {
        /* Outside a Git directory: keep it out of `git status`. */
        _cleanup_close_ int dir =
            lz_open_confined(pfd, name, O_RDONLY | O_DIRECTORY, 0, name, NULL);
        int gi = dir >= 0 ? openat(dir, ".gitignore",
                                   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)
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

/* The previous generation ended without its last audit (its coordinator was
 * killed): audit the workspace against that generation's baseline before
 * anything else. */
static int recover_previous(builder *b, lz_error **err)
{
    lz_git_plan t = LZ_GIT_PLAN_INIT;
    int r = lz_gs_read_baseline(b->cfg, &t, err);
    if (r <= 0) { /* none; or it could not be opened, said as it is */
        lz_git_plan_clear(&t);
        return r;
    }
    if (r == 1) {
        t.ws_fd = fcntl(b->ws_fd, F_DUPFD_CLOEXEC, 3);
        t.cfg = b->cfg;
        t.final = true; /* that generation's sandbox is gone */
        t.quarantine_fd = lz_open_confined(b->ws_fd, t.quarantine_rel, O_PATH | O_DIRECTORY, 0,
                                           t.quarantine_rel, err);
        r = t.quarantine_fd < 0 ? -1 : lz_gs_full_audit(&t, false, &b->p->start_report, err);
    } else {
        r = -1;
    }
    if (r < 0 && !(err && *err))
        lz_error_set(err, 0, "the Git Sentry baseline %s/%s is damaged",
                     b->cfg->storage_domain_root.label, BASELINE_FILE);
    if (r < 0) {
        lz_error_prefix(err, "the previous generation of this Domain ended without its last Git "
                             "Sentry audit, and the audit now failed");
        lz_error_hint(err,
                      "do not run git in %s until you have checked it for repositories the "
                      "sandbox made; then delete %s/%s and run again",
                      b->ws, b->cfg->storage_domain_root.label, BASELINE_FILE);
    } else {
        t.cfg = b->cfg;
        lz_git_sentry_done(&t); /* the baseline is audited: gone */
    }
    lz_git_plan_clear(&t);
    return r < 0 ? -1 : 0;
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
    if (lz_gs_check_unsafe(&b, err) < 0 || recover_previous(&b, err) < 0)
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
        if (lz_gs_protect_git_dir(&b, ".git", 0, err) < 0 ||
            lz_gs_protect_config_sources(&b, ".git", "", err) < 0)
            goto out;
        lz_timing_mark("coordinator: Git Sentry: .git protected");
        if (cfg->isolate_gitignored) {
            isolating = true;
            if (lz_gs_isolate_begin(&b, cfg, &ign, err) < 0 ||
                lz_gs_isolate_recorded(&b, &ign, err) < 0 ||
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
        /* Its configuration (the main repository's, and the worktree's
         * own) may name a hooks directory, an include or a program inside
         * the workspace — a relative core.hooksPath (husky) names one here
         * (attack round a27b, G5): asked through the protected `.git`. */
        if (lz_gs_protect_config_sources(&b, NULL, "", err) < 0)
            goto out;
        /* A linked worktree or a --separate-git-dir checkout as the
         * workspace has ignored files like any other (attack round i12e,
         * W1: none were isolated): Git follows the protected `.git` file. */
        if (cfg->isolate_gitignored) {
            isolating = true;
            if (lz_gs_isolate_begin(&b, cfg, &ign, err) < 0 ||
                lz_gs_isolate_recorded(&b, &ign, err) < 0 ||
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
    /* The repositories around the workspace: a workspace below a
     * repository's top (a package of a monorepo), or itself a nested
     * repository or a submodule checkout; their configuration may name
     * places inside it (attack round a27b, G2). */
    if (lz_gs_protect_enclosing(&b, err) < 0)
        goto out;
    lz_timing_mark("coordinator: Git Sentry: enclosing repositories asked");
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
        /* A submodule's Git directory (.git/modules/sub) has its work tree
         * elsewhere (sub/): relative paths of its configuration are
         * relative to that (attack round a27b, G5c). */
        _cleanup_free_ char *wt = nested_work_tree(&b, gd);
        if (lz_gs_protect_config_sources(&b, gd, wt, err) < 0)
            goto out;
    }
    /* Work trees behind a `.git` file (a linked worktree, a submodule
     * checkout): Git run there resolves a relative core.hooksPath and the
     * programs its configuration names against that tree's top, not the
     * main work tree's (attack round a27b, G5b). */
    for (size_t t = 0; t < b.n_gitfile_trees; t++)
        if (lz_gs_protect_config_sources(&b, NULL, b.gitfile_trees[t], err) < 0)
            goto out;
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
    if (r < 0) /* refused: host Git's `git config` works again at once */
        lz_gs_release_made_locks(&p, p.ws_fd);
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
