/* SPDX-License-Identifier: Apache-2.0
 *
 * Git Sentry: the plan's tables — its mounts (with a hash index by path),
 * the markers of what existed at start, small list helpers, and freeing a
 * plan. The bottom of src/gitsentry/: every other file may use these; they
 * use nothing of the layer (HACKING.md "The Git Sentry's files").
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
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
    if (lz_gs_has_mount(p, rel)) {
        /* A bind point of the workspace asked for read-only later (a
         * hooks directory's parent that husky's stubs run from, attack
         * round a27b, G3) becomes read-only: the first caller's read-write
         * must not win over a later protection. */
        lz_workspace_mount *m = &p->mounts[*mount_slot(p, rel) - 1];
        if (readonly && base == LZ_MOUNT_FROM_WORKSPACE && m->base == LZ_MOUNT_FROM_WORKSPACE)
            m->readonly = true;
        return;
    }
    size_t n = p->n_mounts;
    if (n == 0 || (n & (n - 1)) == 0) /* capacity: the next power of two */
        p->mounts = lz_xrealloc(p->mounts, n ? 2 * n : 1, sizeof(lz_workspace_mount));
    p->mounts[p->n_mounts++] = (lz_workspace_mount){ lz_xstrdup(rel), base, readonly, dir };
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
        if (lz_gs_has_mount(p, copy) &&
            p->mounts[*mount_slot(p, copy) - 1].base == LZ_MOUNT_FROM_IGNORED)
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
    (*v)[(*n)++] = (lz_git_marker){ lz_xstrdup(rel), st->st_dev, st->st_ino };
}

bool lz_gs_known(const lz_git_marker *v, size_t n, const char *rel, const struct stat *st)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].ino == st->st_ino && v[i].dev == st->st_dev && strcmp(v[i].rel, rel) == 0)
            return true;
    return false;
}

bool lz_gs_listed(char **v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], s) == 0)
            return true;
    return false;
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
    for (size_t i = 0; i < plan->n_lock_holds; i++)
        free(plan->lock_holds[i]);
    free(plan->lock_holds);
    free(plan->lock_made);
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

size_t lz_gs_path_depth(const char *rel)
{
    size_t d = 0;
    for (const char *c = rel; (c = strchr(c, '/')) && c[1]; c++)
        d++;
    return d;
}

int lz_gs_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *) a, *(char *const *) b);
}
