/* SPDX-License-Identifier: Apache-2.0
 *
 * Git Sentry: what the host's Git reads, protected — a path bound read-only
 * with every ancestor a bind point, the fixed places of one Git directory
 * (config, hooks, …, submodule Git directories below modules/), and the
 * check of a Git directory's validity as Git itself decides it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "fs/atomic.h"
#include "fs/confined.h"
#include "fs/relpath.h"
#include "gitsentry/internal.h"

/* Limits of the hard-link check below: entries looked at under one
 * protected directory, and the size of a file it copies. */
#define LINK_CHECK_MAX_ENTRIES 20000
#define LINK_CHECK_MAX_COPY (64u << 20)

/* A protected file with more than one name: the sandbox may have made the
 * other name while the file was not protected yet (`ln tools/fmt.sh
 * .cache`, before the developer named tools/fmt.sh in an alias), and would
 * write the same inode through it past the read-only bind (attack round
 * a28b, H). The protected name gets a copy of its own (same content and
 * mode, renamed over it); the other names keep the old inode, which the
 * host's Git no longer reads. pfd/name: the file, through its parent. */
static int give_own_inode(builder *b, int pfd, const char *name, const char *rel,
                          const struct stat *st, lz_error **err)
{
    if ((size_t) st->st_size > LINK_CHECK_MAX_COPY) {
        lz_error_set(err, 0,
                     "Git Sentry: %s/%s has other names (hard links) and is too large "
                     "to copy",
                     b->ws, rel);
        return lz_error_hint(err, "the sandbox could write it through another name: replace it "
                                  "by a copy (cp -p FILE FILE.new && mv FILE.new FILE), then "
                                  "run again");
    }
    _cleanup_close_ int fd = openat(pfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat now;
    if (fd < 0 || fstat(fd, &now) < 0)
        return lz_error_set(err, errno, "Git Sentry: cannot open %s/%s", b->ws, rel);
    if (now.st_ino != st->st_ino || now.st_dev != st->st_dev || !S_ISREG(now.st_mode))
        return lz_error_set(err, 0, "Git Sentry: %s/%s changed while it was looked at", b->ws, rel);
    size_t len = (size_t) now.st_size, got = 0;
    _cleanup_free_ char *data = lz_xmalloc(len ? len : 1);
    while (got < len) {
        ssize_t n = pread(fd, data + got, len - got, (off_t) got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return lz_error_set(err, n < 0 ? errno : EIO, "Git Sentry: cannot read %s/%s", b->ws,
                                rel);
        got += (size_t) n;
    }
    return lz_write_atomic(pfd, name, data, len, now.st_mode & 07777, 0, rel, err);
}

/* rel (a regular file or a directory, st its lstat) and, for a directory,
 * every regular file below it: one name each (give_own_inode). */
static int own_inodes(builder *b, const char *rel, const struct stat *st, size_t *budget,
                      lz_error **err)
{
    if (S_ISREG(st->st_mode)) {
        if (st->st_nlink <= 1)
            return 0;
        const char *name;
        _cleanup_close_ int pfd = lz_open_parent_confined(b->ws_fd, rel, &name, err);
        return pfd < 0 ? -1 : give_own_inode(b, pfd, name, rel, st, err);
    }
    if (!S_ISDIR(st->st_mode))
        return 0;
    _cleanup_close_ int dfd = lz_open_confined(b->ws_fd, rel, O_RDONLY | O_DIRECTORY, 0, rel, err);
    if (dfd < 0)
        return -1;
    DIR *d = fdopendir(dfd);
    if (!d)
        return lz_error_set(err, errno, "Git Sentry: cannot read %s/%s", b->ws, rel);
    dfd = -1; /* the DIR owns it */
    int r = 0;
    for (struct dirent *e; r == 0 && (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (*budget == 0) {
            lz_error_set(err, 0, "Git Sentry: %s/%s holds more than %d entries", b->ws, rel,
                         LINK_CHECK_MAX_ENTRIES);
            r = lz_error_hint(err, "the host's Git reads it and Lazaret checks each file in it "
                                   "before protecting it: keep it small, then run again");
            break;
        }
        (*budget)--;
        struct stat cst;
        if (fstatat(dirfd(d), e->d_name, &cst, AT_SYMLINK_NOFOLLOW) < 0)
            continue; /* gone meanwhile */
        if (!S_ISREG(cst.st_mode) && !S_ISDIR(cst.st_mode))
            continue;
        /* A Git directory's object store, refs and reflogs are data Git
         * neither runs nor takes configuration from (and a local clone's
         * objects are hard links by design): not looked into. */
        if (S_ISDIR(cst.st_mode) &&
            (strcmp(e->d_name, "objects") == 0 || strcmp(e->d_name, "refs") == 0 ||
             strcmp(e->d_name, "logs") == 0))
            continue;
        _cleanup_free_ char *child = lz_rel_join(rel, e->d_name);
        r = own_inodes(b, child, &cst, budget, err);
    }
    closedir(d);
    return r;
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
    size_t budget = LINK_CHECK_MAX_ENTRIES;
    if (own_inodes(b, rel, &st, &budget, err) < 0)
        return -1;
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

/* Is the file at rel exactly LZ_GIT_LOCK_HOLD (read through dir, name)? */
static bool is_lock_hold(int dir, const char *name)
{
    _cleanup_close_ int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
        (size_t) st.st_size != sizeof(LZ_GIT_LOCK_HOLD) - 1)
        return false;
    char buf[sizeof(LZ_GIT_LOCK_HOLD)];
    ssize_t n = pread(fd, buf, sizeof(buf), 0);
    return n == (ssize_t) sizeof(LZ_GIT_LOCK_HOLD) - 1 &&
           memcmp(buf, LZ_GIT_LOCK_HOLD, (size_t) n) == 0;
}

/* Hold the lock name of the configuration file rel (an existing regular
 * file, protected read-only): LZ_GIT_LOCK_HOLD at rel.lock, bound
 * read-only too (git_sentry.h). One already there is reused (another
 * Domain on this workspace holds it, or a Domain that was killed left it);
 * any other file there is a host Git's lock (one running, or one that
 * crashed) and refuses the start. */
int lz_gs_hold_lock_name(builder *b, const char *rel, lz_error **err)
{
    _cleanup_free_ char *lock = lz_xasprintf("%s.lock", rel);
    for (size_t i = 0; i < b->p->n_lock_holds; i++)
        if (strcmp(b->p->lock_holds[i], lock) == 0)
            return 0; /* named twice (an include listed by two scopes) */
    const char *name;
    _cleanup_close_ int pfd = lz_open_parent_confined(b->ws_fd, lock, &name, err);
    if (pfd < 0)
        return -1;
    int fd = openat(pfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
    bool made = fd >= 0;
    if (fd >= 0) {
        bool ok = write(fd, LZ_GIT_LOCK_HOLD, sizeof(LZ_GIT_LOCK_HOLD) - 1) ==
                  (ssize_t) sizeof(LZ_GIT_LOCK_HOLD) - 1;
        int e = errno;
        close(fd);
        if (!ok) {
            (void) unlinkat(pfd, name, 0);
            return lz_error_set(err, e, "cannot write %s/%s", b->ws, lock);
        }
    } else if (errno != EEXIST) {
        return lz_error_set(err, errno, "cannot create %s/%s", b->ws, lock);
    } else if (!is_lock_hold(pfd, name)) {
        lz_error_set(err, 0,
                     "Git Sentry: %s/%s exists: a git command on the host is changing %s, or "
                     "one was interrupted",
                     b->ws, lock, rel);
        return lz_error_hint(err, "when no git command runs in %s, remove %s/%s and run again",
                             b->ws, b->ws, lock);
    }
    b->p->lock_holds = lz_xrealloc(b->p->lock_holds, b->p->n_lock_holds + 1, sizeof(char *));
    b->p->lock_made = lz_xrealloc(b->p->lock_made, b->p->n_lock_holds + 1, sizeof(bool));
    b->p->lock_made[b->p->n_lock_holds] = made;
    b->p->lock_holds[b->p->n_lock_holds++] = lz_xstrdup(lock);
    lz_gs_add_mount(b, lock, LZ_MOUNT_FROM_WORKSPACE, true, false);
    return 0;
}

/* The holds of `plan` in the workspace ws_fd (all, or only those the plan
 * made) removed where they are still exactly the hold. */
static int release_locks(const lz_git_plan *plan, int ws_fd, bool only_made, size_t *ret_removed,
                         lz_error **err)
{
    *ret_removed = 0;
    if (ws_fd < 0)
        return 0;
    int r = 0;
    for (size_t i = 0; i < plan->n_lock_holds; i++) {
        if (only_made && !plan->lock_made[i])
            continue; /* another Domain's, or a killed one's */
        const char *name;
        lz_error *e = NULL;
        _cleanup_close_ int pfd = lz_open_parent_confined(ws_fd, plan->lock_holds[i], &name, &e);
        if (pfd < 0) {
            lz_error_free(e);
            continue; /* its directory went: nothing to hold any more */
        }
        /* Only what is still exactly the hold: anything else there is not
         * Lazaret's to remove (a host Git's own lock, after a stop). */
        if (!is_lock_hold(pfd, name))
            continue;
        if (unlinkat(pfd, name, 0) == 0)
            (*ret_removed)++;
        else if (errno != ENOENT && r == 0)
            r = lz_error_set(err, errno, "cannot remove %s", plan->lock_holds[i]);
    }
    return r;
}

int lz_git_sentry_release_locks(const lz_git_plan *plan, size_t *ret_removed, lz_error **err)
{
    return release_locks(plan, plan->ws_fd, false, ret_removed, err);
}

void lz_gs_release_made_locks(const lz_git_plan *plan, int ws_fd)
{
    size_t removed;
    lz_error *err = NULL;
    if (release_locks(plan, ws_fd, true, &removed, &err) < 0)
        lz_error_free(err); /* best effort: the refusal's message is the one to show */
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
    /* The files `git config` rewrites through a lock file in this (the
     * sandbox's writable) directory: their lock names held. */
    static const char *const rewritten[] = { "config", "config.worktree" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(rewritten); i++) {
        _cleanup_free_ char *rel = lz_rel_join(gd, rewritten[i]);
        struct stat st;
        if (!lz_gs_in_ignored_copy(b->p, rel) && lz_lstat_confined(b->ws_fd, rel, &st) == 0 &&
            S_ISREG(st.st_mode) && lz_gs_hold_lock_name(b, rel, err) < 0)
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
