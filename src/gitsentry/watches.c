/* SPDX-License-Identifier: Apache-2.0
 *
 * Git Sentry: the audit's inotify watches as a tree: wd -> watch, (parent, name) ->
 * child, so that a directory rename is one change however much lies below
 * it (docs/git.md "An audit the sandbox cannot outpace").
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include "common/util.h"
#include "gitsentry/internal.h"

/* wd -> index of watches[], open addressing with linear probing (the
 * audit looks a watch up for every event: a scan of 50,000 would make a
 * storm of events quadratic). */
struct lz_git_wdslot {
    int wd;
    size_t idx1; /* index + 1; 0: empty */
};

static size_t wd_hash(int wd, size_t cap)
{
    return ((uint32_t) wd * 2654435761u) & (cap - 1);
}

static void wd_index_put(lz_git_plan *p, int wd, size_t idx)
{
    if ((p->n_watches + 1) * 2 > p->wd_cap) {
        size_t cap = p->wd_cap ? p->wd_cap * 2 : 1024;
        while ((p->n_watches + 1) * 2 > cap)
            cap *= 2;
        struct lz_git_wdslot *slots = lz_xcalloc(cap, sizeof(*slots));
        for (size_t i = 0; i < p->wd_cap; i++) {
            if (!p->wd_slots[i].idx1)
                continue;
            size_t h = wd_hash(p->wd_slots[i].wd, cap);
            while (slots[h].idx1)
                h = (h + 1) & (cap - 1);
            slots[h] = p->wd_slots[i];
        }
        free(p->wd_slots);
        p->wd_slots = slots;
        p->wd_cap = cap;
    }
    size_t h = wd_hash(wd, p->wd_cap);
    while (p->wd_slots[h].idx1 && p->wd_slots[h].wd != wd)
        h = (h + 1) & (p->wd_cap - 1);
    p->wd_slots[h] = (struct lz_git_wdslot){ .wd = wd, .idx1 = idx + 1 };
}

static struct lz_git_wdslot *wd_slot(const lz_git_plan *p, int wd)
{
    if (!p->wd_cap)
        return NULL;
    for (size_t h = wd_hash(wd, p->wd_cap); p->wd_slots[h].idx1; h = (h + 1) & (p->wd_cap - 1))
        if (p->wd_slots[h].wd == wd)
            return &p->wd_slots[h];
    return NULL;
}

/* Remove wd (backward-shift deletion keeps every probe chain whole). */
static void wd_index_del(lz_git_plan *p, int wd)
{
    struct lz_git_wdslot *slot = wd_slot(p, wd);
    if (!slot)
        return;
    size_t mask = p->wd_cap - 1, i = (size_t) (slot - p->wd_slots), j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!p->wd_slots[j].idx1)
            break;
        size_t k = wd_hash(p->wd_slots[j].wd, p->wd_cap);
        /* Can slot j's entry move to the hole at i (is i on its probe
         * path, cyclically in [k, j))? */
        bool movable = i <= j ? (k <= i || k > j) : (k <= i && k > j);
        if (movable) {
            p->wd_slots[i] = p->wd_slots[j];
            i = j;
        }
    }
    p->wd_slots[i] = (struct lz_git_wdslot){ 0 };
}

lz_git_dirwatch *lz_gs_watch_by_wd(lz_git_plan *p, int wd)
{
    struct lz_git_wdslot *slot = wd_slot(p, wd);
    return slot ? &p->watches[slot->idx1 - 1] : NULL;
}

/* (parent wd, name) -> wd: the tree's edges, to find the watch a rename
 * event names (open addressing, backward-shift deletion). */
static size_t child_hash(const lz_git_plan *p, int parent, const char *name)
{
    return (lz_gs_hash_str(name) * 31u + (size_t) (uint32_t) parent * 2654435761u) &
           (p->child_cap - 1);
}

static bool child_is(const lz_git_plan *p, int wd, int parent, const char *name);

int lz_gs_child_get(lz_git_plan *p, int parent, const char *name)
{
    if (!p->child_cap)
        return -1;
    for (size_t h = child_hash(p, parent, name); p->child_slots[h];
         h = (h + 1) & (p->child_cap - 1))
        if (child_is(p, p->child_slots[h], parent, name))
            return p->child_slots[h];
    return -1;
}

static void child_grow(lz_git_plan *p)
{
    int *old = p->child_slots;
    size_t old_cap = p->child_cap;
    p->child_cap = old_cap ? old_cap * 2 : 1024;
    p->child_slots = lz_xcalloc(p->child_cap, sizeof(int));
    p->n_children = 0;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i])
            lz_gs_child_put(p, old[i]);
    free(old);
}

static bool child_is(const lz_git_plan *p, int wd, int parent, const char *name)
{
    const lz_git_dirwatch *dw = lz_gs_watch_by_wd((lz_git_plan *) p, wd);
    return dw && dw->parent_wd == parent && strcmp(dw->name, name) == 0;
}

/* Index watch wd under its (parent, name) (rooted watches are not). */
void lz_gs_child_put(lz_git_plan *p, int wd)
{
    lz_git_dirwatch *dw = lz_gs_watch_by_wd(p, wd);
    if (!dw || dw->parent_wd < 0)
        return;
    if ((p->n_children + 1) * 2 > p->child_cap)
        child_grow(p);
    size_t h = child_hash(p, dw->parent_wd, dw->name);
    while (p->child_slots[h] && p->child_slots[h] != wd)
        h = (h + 1) & (p->child_cap - 1);
    if (!p->child_slots[h])
        p->n_children++;
    p->child_slots[h] = wd;
}

void lz_gs_child_del(lz_git_plan *p, int wd)
{
    lz_git_dirwatch *dw = lz_gs_watch_by_wd(p, wd);
    if (!dw || dw->parent_wd < 0 || !p->child_cap)
        return;
    size_t mask = p->child_cap - 1, i = child_hash(p, dw->parent_wd, dw->name);
    while (p->child_slots[i] && p->child_slots[i] != wd)
        i = (i + 1) & mask;
    if (!p->child_slots[i])
        return;
    for (size_t j = i;;) {
        j = (j + 1) & mask;
        if (!p->child_slots[j])
            break;
        lz_git_dirwatch *o = lz_gs_watch_by_wd(p, p->child_slots[j]);
        size_t k = o ? child_hash(p, o->parent_wd, o->name) : j;
        bool movable = i <= j ? (k <= i || k > j) : (k <= i && k > j);
        if (movable) {
            p->child_slots[i] = p->child_slots[j];
            i = j;
        }
    }
    p->child_slots[i] = 0;
    p->n_children--;
}

/* The workspace-relative path of a watched directory now, put together
 * from its chain of parents; NULL when the chain is broken (a parent's
 * watch went away) or absurdly long. */
char *lz_gs_watch_rel(lz_git_plan *p, const lz_git_dirwatch *dw)
{
    const char *parts[MAX_TREE_DEPTH * 2 + 2];
    size_t n = 0, len = 0;
    for (const lz_git_dirwatch *x = dw; x;
         x = x->parent_wd < 0 ? NULL : lz_gs_watch_by_wd(p, x->parent_wd)) {
        if (n == LZ_ARRAY_SIZE(parts))
            return NULL;
        parts[n++] = x->name;
        len += strlen(x->name) + 1;
        if (x->parent_wd >= 0 && !lz_gs_watch_by_wd(p, x->parent_wd))
            return NULL;
    }
    char *out = lz_xcalloc(len + 1, 1), *o = out;
    for (size_t i = n; i-- > 0;) {
        /* parts[0..n) were set by the loop above (a zeroed array would cost
         * 16 KiB of stores per event). */
        // cppcheck-suppress uninitvar
        if (!parts[i][0])
            continue;
        if (o != out)
            *o++ = '/';
        size_t l = strlen(parts[i]);
        memcpy(o, parts[i], l);
        o += l;
    }
    *o = '\0';
    return out;
}

/* The watch of the directory at `rel` (workspace-relative), found down the
 * tree from the workspace's watch; NULL when some directory on the way is
 * not watched. */
lz_git_dirwatch *lz_gs_watch_by_rel(lz_git_plan *p, const char *rel)
{
    int wd = p->root_wd;
    if (wd <= 0 || !lz_gs_watch_by_wd(p, wd))
        return NULL;
    if (!rel[0])
        return lz_gs_watch_by_wd(p, wd);
    _cleanup_free_ char *copy = lz_xstrdup(rel);
    for (char *save = NULL, *part = strtok_r(copy, "/", &save); part;
         part = strtok_r(NULL, "/", &save)) {
        wd = lz_gs_child_get(p, wd, part);
        if (wd < 0)
            return NULL;
    }
    return lz_gs_watch_by_wd(p, wd);
}

/* Place watch dw at rel: under its parent's watch when there is one. */
static void place_watch(lz_git_plan *p, lz_git_dirwatch *dw, const char *rel)
{
    int wd = dw->wd;
    lz_gs_child_del(p, wd);
    dw = lz_gs_watch_by_wd(p, wd);
    free(dw->name);
    const char *slash = strrchr(rel, '/');
    lz_git_dirwatch *parent = NULL;
    if (rel[0]) {
        _cleanup_free_ char *prel =
            slash ? lz_xstrndup(rel, (size_t) (slash - rel)) : lz_xstrdup("");
        parent = lz_gs_watch_by_rel(p, prel);
        dw = lz_gs_watch_by_wd(p, wd);
    }
    if (parent && parent->wd != wd) {
        dw->parent_wd = parent->wd;
        dw->name = lz_xstrdup(slash ? slash + 1 : rel);
        lz_gs_child_put(p, wd);
    } else {
        dw->parent_wd = -1;
        dw->name = lz_xstrdup(rel);
    }
}

/* Forget the watch at index i (its wd is gone or removed). */
void lz_gs_drop_watch(lz_git_plan *p, size_t i)
{
    lz_git_dirwatch *dw = &p->watches[i];
    if (dw->kind & (ROLE_TREE | ROLE_GITINNER))
        p->n_tree_dirs--;
    if (dw->wd == p->root_wd)
        p->root_wd = -1;
    lz_gs_child_del(p, dw->wd);
    dw = &p->watches[i];
    wd_index_del(p, dw->wd);
    free(dw->name);
    size_t last = --p->n_watches;
    if (i != last) {
        p->watches[i] = p->watches[last];
        wd_index_put(p, p->watches[i].wd, i);
    }
}

/* inotify watch on the directory dfd (by its descriptor: /proc/self/fd/N
 * names exactly that directory, whatever happens to its path). */
int lz_gs_add_watch(walk *w, int dfd, const char *rel, unsigned role)
{
    lz_git_plan *p = w->p;
    if (!w->watch || p->inotify_fd < 0)
        return 0;
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", dfd);
    /* Todo lists are rewritten in place (the sequence editor): their
     * directory's watch also reports writes. */
    /* IN_MASK_ADD: a directory with two roles keeps the events of both.
     * IN_MODIFY, not IN_CLOSE_WRITE, for todo lists rewritten in place:
     * gVisor's gofer keeps a file the sandbox wrote open on the host. */
    uint32_t mask =
        WATCH_MASK | IN_MASK_ADD | (role & ROLE_SEQUENCER ? IN_MODIFY | IN_CLOSE_WRITE : 0);
    int wd = inotify_add_watch(p->inotify_fd, path, mask);
    lz_sentry_eye *eye = wd < 0 && lz_gs_refused(errno) ? lz_gs_eye_of(p) : NULL;
    if (eye) /* a directory closed to the developer: placed by the eye */
        wd = lz_sentry_eye_watch(eye, p->inotify_fd, dfd, mask);
    if (wd < 0) {
        lz_gs_fail_at(w, rel[0] ? rel : ".");
        lz_error_set(w->err, errno, "Git Sentry: cannot watch %s", rel[0] ? rel : "the workspace");
        if (errno == ENOSPC)
            return lz_error_hint(w->err, "raise the inotify limit (sudo sysctl "
                                         "fs.inotify.max_user_watches=1048576)");
        return -1;
    }
    struct stat st;
    if (fstat(dfd, &st) < 0)
        return lz_error_set(w->err, errno, "Git Sentry: cannot stat %s", rel);
    lz_git_dirwatch *dw = lz_gs_watch_by_wd(p, wd);
    bool fresh = !dw;
    if (!dw) {
        if (p->n_watches == p->watches_cap) {
            p->watches_cap = p->watches_cap ? 2 * p->watches_cap : 64;
            p->watches = lz_xrealloc(p->watches, p->watches_cap, sizeof(lz_git_dirwatch));
        }
        wd_index_put(p, wd, p->n_watches);
        dw = &p->watches[p->n_watches++];
        *dw = (lz_git_dirwatch){ .wd = wd, .parent_wd = -1 };
    }
    if ((role & (ROLE_TREE | ROLE_GITINNER)) && !(dw->kind & (ROLE_TREE | ROLE_GITINNER)))
        p->n_tree_dirs++;
    dw->kind |= role;
    dw->dev = st.st_dev;
    dw->ino = st.st_ino;
    if (!rel[0] && (role & ROLE_TREE))
        p->root_wd = wd;
    _cleanup_free_ char *now = fresh ? NULL : lz_gs_watch_rel(p, dw);
    if (fresh || !now || strcmp(now, rel) != 0)
        place_watch(p, dw, rel);
    return 0;
}

/* Is watch dw at or below the watch `top` (by its chain of parents)? */
bool lz_gs_watch_below(lz_git_plan *p, const lz_git_dirwatch *dw, int top)
{
    for (size_t n = 0; dw && n <= MAX_TREE_DEPTH * 2 + 2; n++) {
        if (dw->wd == top)
            return true;
        dw = dw->parent_wd < 0 ? NULL : lz_gs_watch_by_wd(p, dw->parent_wd);
    }
    return false;
}

/* A watched directory left the tree (into the quarantine, or a place the
 * audit does not watch): its watch, and those below, go. */
void lz_gs_unwatch_below(lz_git_plan *p, int top)
{
    int *gone = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < p->n_watches; i++)
        if (lz_gs_watch_below(p, &p->watches[i], top)) {
            if (n == cap)
                gone = lz_xrealloc(gone, cap = cap ? 2 * cap : 16, sizeof(int));
            gone[n++] = p->watches[i].wd;
        }
    /* The deepest first, so that each one's chain is whole when dropped. */
    for (size_t k = n; k-- > 0;) {
        lz_git_dirwatch *dw = lz_gs_watch_by_wd(p, gone[k]);
        if (!dw)
            continue;
        inotify_rm_watch(p->inotify_fd, dw->wd);
        lz_gs_drop_watch(p, (size_t) (dw - p->watches));
    }
    free(gone);
}
