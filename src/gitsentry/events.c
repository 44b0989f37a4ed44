/* SPDX-License-Identifier: Apache-2.0
 *
 * Git Sentry: the event audit: inotify events read in rounds, directory renames
 * followed in the watch tree, Git names first, the sandbox held
 * (lz_git_hold) while an event cannot be placed; lz_git_sentry_watch and
 * lz_git_sentry_audit.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "fs/confined.h"
#include "fs/relpath.h"
#include "gitsentry/internal.h"

/* Entry names that can turn a directory of the tree into a Git directory. */
static const char *const bare_entries[] = { "HEAD", "objects", "refs", "commondir" };

/* ---- the event audit ---------------------------------------------------- */

/* One round takes at most this much of the event queue (the kernel's queue
 * holds fs.inotify.max_queued_events, 16,384 by default, each at most
 * sizeof(struct inotify_event) + NAME_MAX + 1 bytes); the rest waits for
 * the next round. */
#define EVENT_ROUND_MAX ((size_t) 8 << 20)
/* Rounds with the sandbox frozen in which an event still could not be
 * placed before the whole tree is walked instead. */
#define FROZEN_RETRY_ROUNDS 2

typedef struct ev_rec {
    int wd;
    uint32_t mask, cookie;
    char *name;         /* "" when the event has none */
    bool known_move;    /* a followed rename of a watched subtree: checked, not walked */
    bool done;          /* handled in the round's first pass */
    bool moves_applied; /* follow_moves saw it already (read by peek_urgent) */
} ev_rec;

typedef struct ev_list {
    ev_rec *v;
    size_t n, cap;
} ev_list;

static void ev_add(ev_list *l, int wd, uint32_t mask, uint32_t cookie, const char *name)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = lz_xrealloc(l->v, l->cap, sizeof(ev_rec));
    }
    l->v[l->n++] = (ev_rec){ .wd = wd, .mask = mask, .cookie = cookie, .name = lz_xstrdup(name) };
}

/* Append a copy of e (its flags too). */
static void ev_copy(ev_list *l, const ev_rec *e)
{
    ev_add(l, e->wd, e->mask, e->cookie, e->name);
    l->v[l->n - 1].known_move = e->known_move;
    l->v[l->n - 1].moves_applied = e->moves_applied;
}

static void ev_clear(ev_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].name);
    l->n = 0;
}

/* Read what the queue holds now. Returns how many events were read. */
static size_t ev_read(lz_git_plan *p, ev_list *out, bool *overflow)
{
    _Alignas(struct inotify_event) char buf[16384];
    size_t bytes = 0, before = out->n;
    for (;;) {
        ssize_t n = read(p->inotify_fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (char *ptr = buf; ptr < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *) ptr;
            ptr += sizeof(*ev) + ev->len;
            if (ev->mask & IN_Q_OVERFLOW)
                *overflow = true;
            else
                ev_add(out, ev->wd, ev->mask, ev->cookie, ev->len ? ev->name : "");
        }
        bytes += (size_t) n;
        if (bytes >= EVENT_ROUND_MAX)
            break;
    }
    return out->n - before;
}

/* Follow the directory renames among the events from `start` on, in order:
 * a rename inside the watched tree re-parents one watch (the tree below it
 * follows, whatever its size), so that every event can be placed by its
 * directory's path now. What was watched before the rename was audited (or
 * its events are among these), so the subtree is not walked again unless
 * it changed role; a directory renamed in from outside the watches is new
 * and walked. */
/* The MOVED_FROM halves of directory renames whose MOVED_TO has not been
 * read yet: the kernel queues both halves in the same rename, but a read
 * can fall between them. Kept across the rounds of one event audit; what
 * is still unmatched when the queue is empty left the watched tree. */
typedef struct move_pending {
    uint32_t cookie;
    int wd; /* the moved directory's watch, -1: not watched */
    bool matched;
} move_pending;

typedef struct move_list {
    move_pending *v;
    size_t n;
} move_list;

static void follow_moves(lz_git_plan *p, ev_list *l, size_t start, move_list *pend)
{
    for (size_t i = start; i < l->n; i++) {
        ev_rec *e = &l->v[i];
        if (e->moves_applied || !(e->mask & IN_ISDIR) || !e->name[0])
            continue;
        e->moves_applied = true;
        lz_git_dirwatch *parent = lz_gs_watch_by_wd(p, e->wd);
        if (!parent)
            continue;
        if (e->mask & IN_MOVED_FROM) {
            pend->v = lz_xrealloc(pend->v, pend->n + 1, sizeof(*pend->v));
            pend->v[pend->n++] = (move_pending){ .cookie = e->cookie,
                                                 .wd = lz_gs_child_get(p, parent->wd, e->name) };
            continue;
        }
        if (!(e->mask & IN_MOVED_TO))
            continue;
        for (size_t k = pend->n; k-- > 0;) {
            if (pend->v[k].matched || pend->v[k].cookie != e->cookie)
                continue;
            pend->v[k].matched = true;
            lz_git_dirwatch *moved = pend->v[k].wd > 0 ? lz_gs_watch_by_wd(p, pend->v[k].wd) : NULL;
            if (!moved || lz_gs_watch_below(p, parent, moved->wd))
                break; /* not watched (walked as new), or a loop (cannot be) */
            lz_gs_child_del(p, moved->wd);
            free(moved->name);
            moved->name = lz_xstrdup(e->name);
            moved->parent_wd = parent->wd;
            lz_gs_child_put(p, moved->wd);
            e->known_move = (moved->kind & ROLE_TREE) && !(moved->kind & ~ROLE_TREE) &&
                            (parent->kind & ROLE_TREE);
            if (e->known_move)
                p->moves_followed++;
            break;
        }
    }
    /* Matched halves are done with. */
    size_t k = 0;
    for (size_t i = 0; i < pend->n; i++)
        if (!pend->v[i].matched)
            pend->v[k++] = pend->v[i];
    pend->n = k;
}

/* The queue is empty: renames still half-seen took their directory out of
 * the watched tree (into the quarantine, say). */
static void moves_left_the_tree(lz_git_plan *p, move_list *pend)
{
    for (size_t i = 0; i < pend->n; i++)
        if (!pend->v[i].matched && pend->v[i].wd > 0)
            lz_gs_unwatch_below(p, pend->v[i].wd);
    free(pend->v);
    *pend = (move_list){ 0 };
}

/* Open the tree directory rel, confined; where the developer's own
 * directories on the way were shut (mode 000, say: the sandbox may take
 * permissions away from what it made), give them back u+rwx first. */
static int open_dir_healing(lz_git_plan *p, const char *rel)
{
    lz_error *e = NULL;
    int fd = lz_open_dir_confined(p->ws_fd, rel, O_RDONLY, &e);
    int en = fd < 0 ? (e ? e->errnum : errno) : 0;
    lz_error_free(e);
    if (fd >= 0 || en != EACCES)
        return fd;
    int cur = lz_open_dir_confined(p->ws_fd, "", O_RDONLY, NULL);
    if (cur >= 0)
        lz_gs_make_ours_writable(cur, NULL);
    _cleanup_free_ char *copy = lz_xstrdup(rel);
    for (char *save = NULL, *part = strtok_r(copy, "/", &save); part && cur >= 0;
         part = strtok_r(NULL, "/", &save)) {
        lz_gs_make_ours_writable(cur, part);
        int next = lz_open_confined(cur, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, part, NULL);
        close(cur);
        cur = next;
    }
    if (cur >= 0 || !lz_gs_refused(errno))
        return cur;
    /* A directory on the way belongs to another sandbox user, closed. */
    return lz_gs_sight_open(p, p->ws_fd, rel[0] ? rel : ".", O_RDONLY | O_DIRECTORY);
}

/* Does the event name something Git may obey (a name of lz_gs_git_dir_entries
 * or bare_entries, `.git`), or happen in a Git directory? */
static bool urgent_event(lz_git_plan *p, const ev_rec *ev)
{
    if (!ev->name[0] || (ev->mask & (IN_IGNORED | IN_MOVED_FROM)))
        return false;
    if (strcmp(ev->name, ".git") == 0)
        return true;
    for (size_t k = 0; k < LZ_ARRAY_SIZE(bare_entries); k++)
        if (strcmp(ev->name, bare_entries[k]) == 0)
            return true;
    for (size_t k = 0; k < LZ_ARRAY_SIZE(lz_gs_git_dir_entries); k++)
        if (strcmp(ev->name, lz_gs_git_dir_entries[k]) == 0)
            return true;
    const lz_git_dirwatch *dw = lz_gs_watch_by_wd(p, ev->wd);
    return dw && (dw->kind & (ROLE_GITDIR | ROLE_MODULES));
}

typedef struct round_flags {
    bool need_full;    /* walk the whole tree (with the sandbox frozen) */
    bool need_gitdirs; /* audit the Git directories again (a sequencer changed) */
} round_flags;

/* One event. An event whose directory is not where its watch says (a
 * rename not read yet) goes to `retry`. */
static int handle_event(walk *w, const ev_rec *ev, round_flags *f, ev_list *retry)
{
    lz_git_plan *p = w->p;
    lz_git_dirwatch *dw = lz_gs_watch_by_wd(p, ev->wd);
    if (!dw)
        return 0;
    if (ev->mask & IN_IGNORED) {
        lz_gs_drop_watch(p, (size_t) (dw - p->watches));
        return 0;
    }
    /* A watched directory moved or went away: its parent's events (or
     * IN_IGNORED) say where; renames were followed already. */
    if (ev->mask & (IN_MOVE_SELF | IN_DELETE_SELF | IN_MOVED_FROM))
        return 0;
    bool own_attrib = (ev->mask & IN_ATTRIB) && !ev->name[0];
    if (!own_attrib) {
        if ((ev->mask & IN_ATTRIB) && !(ev->mask & IN_ISDIR))
            return 0; /* a file's mode: nothing Git discovers by */
        if (!(ev->mask & (IN_CREATE | IN_MOVED_TO | IN_ATTRIB | IN_CLOSE_WRITE | IN_MODIFY)) ||
            !ev->name[0])
            return 0;
    }
    /* Reach the directory by its path, confined, and require the same
     * inode: otherwise a rename we have not read yet moved it. */
    _cleanup_free_ char *dir_rel = lz_gs_watch_rel(p, dw);
    _cleanup_close_ int dfd = dir_rel ? open_dir_healing(p, dir_rel) : -1;
    struct stat st;
    if (dfd < 0 || fstat(dfd, &st) < 0 || st.st_ino != dw->ino || st.st_dev != dw->dev) {
        ev_add(retry, ev->wd, ev->mask, ev->cookie, ev->name);
        return 0;
    }
    /* A copy: visiting may add watches (and move the array). */
    unsigned kind = dw->kind;
    dw = NULL;
    int depth = dir_rel[0] ? (int) lz_gs_path_depth(dir_rel) + 1 : 0;
    if (own_attrib) {
        /* The directory's own mode changed. It is under watch, so every
         * event in it was queued whatever its mode: what is needed is that
         * the developer can look in (ours: given back u+rwx; another
         * sandbox user's was watched and audited through the eye while it
         * was closed, so opening it reveals nothing unseen). Git
         * directories' internals are audited again. */
        if (st.st_uid == getuid() && (st.st_mode & S_IRWXU) != S_IRWXU)
            lz_gs_make_ours_writable(dfd, NULL);
        if (kind & (ROLE_GITDIR | ROLE_GITINNER))
            f->need_gitdirs = true;
        return 0;
    }
    int r = 0;
    if (kind & ROLE_TREE) {
        _cleanup_free_ char *moved = ev->known_move ? lz_rel_join(dir_rel, ev->name) : NULL;
        w->known_subtree = moved;
        r = lz_gs_visit_entry(w, dfd, dir_rel, ev->name, depth);
        w->known_subtree = NULL;
        for (size_t k = 0; r == 0 && k < LZ_ARRAY_SIZE(bare_entries); k++)
            if (strcmp(ev->name, bare_entries[k]) == 0)
                r = lz_gs_check_bare(w, dfd, dir_rel);
    }
    if (r == 0 && (kind & (ROLE_GITDIR | ROLE_GITINNER))) {
        r = lz_gs_visit_inner_entry(w, dfd, dir_rel, ev->name, depth);
        if (r == 0 && (kind & ROLE_GITINNER) && !(kind & ROLE_GITDIR))
            r = lz_gs_check_inner_bare(w, dfd, dir_rel);
    }
    if (r == 0 && (kind & ROLE_GITDIR)) {
        for (size_t k = 0; r == 0 && k < LZ_ARRAY_SIZE(lz_gs_git_dir_entries); k++) {
            if (strcmp(ev->name, lz_gs_git_dir_entries[k]) != 0)
                continue;
            _cleanup_free_ char *rel = lz_rel_join(dir_rel, ev->name);
            if (!lz_gs_has_mount(p, rel) && lz_gs_sight_lstat(p, dfd, ev->name, &st) == 0)
                r = lz_gs_quarantine(w, dfd, dir_rel, ev->name) < 0 ? -1 : 0;
        }
    }
    for (size_t k = 0; (kind & ROLE_GITDIR) && k < LZ_ARRAY_SIZE(lz_gs_sequencer_dirs); k++)
        if (strcmp(ev->name, lz_gs_sequencer_dirs[k]) == 0)
            f->need_gitdirs = true; /* a rebase began: watch its todo list */
    if (kind & ROLE_SEQUENCER)
        f->need_gitdirs = true; /* its todo list changed */
    if (r == 0 && (kind & ROLE_MODULES)) {
        _cleanup_free_ char *member = lz_rel_join(dir_rel, ev->name);
        if (lz_gs_sight_lstat(p, dfd, ev->name, &st) == 0 &&
            !lz_gs_known(p->members, p->n_members, member, &st))
            r = lz_gs_quarantine(w, dfd, dir_rel, ev->name) < 0 ? -1 : 0;
    }
    return r;
}

/* In the middle of a walk in event mode: read what has come since, follow
 * its renames, and judge at once what names a Git object — as an entry,
 * never walking (no_descend) — so that a long walk (a directory tree that
 * was shut and opens, one renamed in from outside the watches) never makes
 * a `.git` wait for it. Everything read stays queued in w->peeked and is
 * handled again, in order, after the walk. */
static int peek_urgent(walk *w)
{
    lz_git_plan *p = w->p;
    w->since_peek = 0;
    ev_list *l = w->peeked;
    size_t start = l->n;
    ev_read(p, l, &w->peek_overflow);
    follow_moves(p, l, start, w->moves);
    w->in_peek = true;
    w->no_descend = true;
    const char *known = w->known_subtree;
    w->known_subtree = NULL;
    ev_list ignored = { 0 };
    round_flags f = { 0 };
    int r = 0;
    for (size_t i = start; r == 0 && i < l->n; i++)
        if (urgent_event(p, &l->v[i]))
            r = handle_event(w, &l->v[i], &f, &ignored);
    ev_clear(&ignored);
    free(ignored.v);
    w->known_subtree = known;
    w->no_descend = false;
    w->in_peek = false;
    return r;
}

/* Handle the pending inotify events, in rounds: read what is queued,
 * follow the renames among it, then place and judge every event. An event
 * that cannot be placed (the sandbox renamed its directory again after the
 * read) is retried after the next read; until it is placed, the sandbox is
 * frozen (lz_git_hold: the coordinator's freezer), so the next read holds every rename there will
 * be. Only an event-queue overflow, or an event still unplaceable with the sandbox frozen, costs a
 * walk of the whole tree — frozen too. */
static int event_audit(lz_git_plan *p, char **ret_report, lz_error **err)
{
    ev_list batch = { 0 }, retry = { 0 }, again = { 0 }, peeked = { 0 };
    move_list moves = { 0 };
    walk w = { .p = p,
               .watch = true,
               .err = err,
               .events = true,
               .peeked = &peeked,
               .peek = peek_urgent,
               .moves = &moves };
    bool frozen = false, overflow = false, want_full = false;
    bool can_freeze = p->hold && p->hold->armed(p->hold_ctx);
    int stuck_rounds = 0, rounds = 0, r = 0;
    for (;;) {
        /* Without a freeze the sandbox may keep the queue full forever:
         * give the loop back (the descriptor stays readable, and the
         * watchdog freezes the sandbox if this goes on). */
        if (!frozen && ++rounds > 64)
            break;
        ev_clear(&batch);
        /* What a walk of the last round read meanwhile comes first: it is
         * older than what the queue holds now. */
        for (size_t i = 0; i < peeked.n; i++)
            ev_copy(&batch, &peeked.v[i]);
        size_t n = peeked.n;
        ev_clear(&peeked);
        overflow = overflow || w.peek_overflow;
        w.peek_overflow = false;
        n += ev_read(p, &batch, &overflow);
        follow_moves(p, &batch, 0, &moves);
        round_flags f = { .need_full = overflow || want_full };
        ev_clear(&again);
        /* First what names a Git object (a `.git`, a HEAD, a config...):
         * behind a flood of new directories, each walked, it would wait
         * for all of them (docs/git.md "An audit the sandbox cannot
         * outpace"). Then everything, in order. */
        for (int pass = 0; pass < 2; pass++) {
            ev_list *lists[2] = { &retry, &batch };
            for (int li = 0; li < 2; li++)
                for (size_t i = 0; r == 0 && !f.need_full && i < lists[li]->n; i++) {
                    ev_rec *ev = &lists[li]->v[i];
                    if (ev->done || (pass == 0 && !urgent_event(p, ev)))
                        continue;
                    ev->done = true;
                    r = handle_event(&w, ev, &f, &again);
                }
        }
        ev_list t = retry;
        retry = again;
        again = t;
        if (r < 0)
            break;
        if (!f.need_full && retry.n > 0 && (frozen || !can_freeze) &&
            ++stuck_rounds > FROZEN_RETRY_ROUNDS)
            f.need_full = true;
        want_full = f.need_full;
        if ((f.need_full || retry.n > 0) && !frozen && can_freeze) {
            /* Stop the sandbox, then read once more: everything it did is
             * in the queue now. */
            p->hold->hold(p->hold_ctx);
            frozen = true;
            continue;
        }
        if (f.need_full) {
            want_full = false;
            /* Whatever is still queued happened before the freeze (or
             * there is no freezer): the walk covers it. */
            ev_clear(&batch);
            ev_clear(&peeked);
            free(moves.v);
            moves = (move_list){ 0 };
            overflow = false;
            while (ev_read(p, &batch, &overflow) > 0)
                ev_clear(&batch);
            ev_clear(&retry);
            char *more = NULL;
            /* (Our own renames into the quarantine are moves too.) */
            int m = lz_gs_full_audit(p, true, &more, err);
            p->full_walks++;
            if (m < 0) {
                r = -1;
                break;
            }
            if (more)
                lz_gs_report_append(&w, more);
            free(more);
            w.moved += m;
            overflow = false;
            continue; /* the walk's own quarantine moves are events too */
        }
        if (f.need_gitdirs && (r = lz_gs_audit_git_dirs(&w)) < 0)
            break;
        if (n == 0 && retry.n == 0)
            break;
    }
    moves_left_the_tree(p, &moves);
    ev_clear(&batch);
    ev_clear(&retry);
    ev_clear(&again);
    ev_clear(&peeked);
    free(batch.v);
    free(retry.v);
    free(again.v);
    free(peeked.v);
    if (frozen)
        p->hold->release(p->hold_ctx);
    return lz_gs_walk_finish(&w, r, ret_report);
}

/* ---- the entry points -------------------------------------------------- */

int lz_git_sentry_watch(lz_git_plan *p, char **ret_report, lz_error **err)
{
    if (p->inotify_fd < 0) {
        p->inotify_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        if (p->inotify_fd < 0) {
            lz_error_set(err, errno, "Git Sentry: cannot watch the workspace (inotify)");
            return lz_error_hint(err, "raise fs.inotify.max_user_instances (sudo sysctl "
                                      "fs.inotify.max_user_instances=1024)");
        }
    }
    int n = lz_gs_full_audit(p, true, ret_report, err);
    if (n >= 0 && p->cfg && lz_gs_save_baseline(p, err) < 0)
        return -1;
    return n;
}

int lz_git_sentry_audit(lz_git_plan *p, bool full, char **ret_report, lz_error **err)
{
    if (ret_report)
        *ret_report = NULL;
    if (p->ws_fd < 0 || p->quarantine_fd < 0)
        return 0;
    /* The final audit (no sandbox left) places no watch: none is needed,
     * and a tree past the watch bound is audited whole. */
    if (full || p->inotify_fd < 0)
        return lz_gs_full_audit(p, p->inotify_fd >= 0 && !p->final, ret_report, err);
    return event_audit(p, ret_report, err);
}
