/* SPDX-License-Identifier: Apache-2.0
 *
 * The workspace mount plan's execution: pins the Git Sentry's plan
 * (gitsentry/git_sentry.h) as kernel mounts in the staged workspace clone,
 * the git-ignored copies' mounts included, each source opened confined
 * from its base.
 */
#include "supervisor/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "supervisor/stage.h"

/* The source of one Git Sentry mount, opened confined from its base, with
 * the type the plan recorded. The bases are the workspace (a protection or
 * bind point), the Domain's ignored/ copies — written by the sandbox in
 * earlier sessions: untrusted, so a symlink, special file or mount there
 * refuses the start — and an empty directory of the generation. */
static int open_ws_mount_source(sup *s, int ws, int ignored, int empty, const lz_workspace_mount *m,
                                lz_error **err)
{
    const lz_resolved_config *cfg = s->sc->cfg;
    if (m->base == LZ_MOUNT_FROM_EMPTY)
        return fcntl(empty, F_DUPFD_CLOEXEC, 3);
    _cleanup_free_ char *label =
        m->base == LZ_MOUNT_FROM_IGNORED
            ? lz_xasprintf("%s/ignored/%s", cfg->storage_domain_root.label, m->rel)
            : lz_xasprintf("%s/%s", cfg->workspace.label, m->rel);
    int fd = lz_open_confined(m->base == LZ_MOUNT_FROM_IGNORED ? ignored : ws, m->rel,
                              O_PATH | O_NOFOLLOW, 0, label, err);
    struct stat sb;
    if (fd >= 0 && fstat(fd, &sb) < 0) {
        close(fd);
        return lz_error_set(err, errno, "cannot stat %s", label);
    }
    if (fd >= 0 && (m->dir ? S_ISDIR(sb.st_mode) : S_ISREG(sb.st_mode)))
        return fd;
    if (fd >= 0) {
        close(fd);
        lz_error_set(err, 0, "%s is no longer a %s", label, m->dir ? "directory" : "regular file");
    }
    if (m->base == LZ_MOUNT_FROM_IGNORED)
        return lz_error_hint(err,
                             "this copy of a git-ignored path belongs to the sandbox, which "
                             "may have planted a symlink, special file or mount there in "
                             "an earlier session; inspect and remove %s, then run again",
                             label);
    return lz_error_hint(err, "the workspace changed while the sandbox was being set up; run "
                              "again");
}

/* A mount point inside the staged workspace tree: beneath its root, no
 * symlink or magic link on the way, but crossing the mounts attached there
 * before (a bind point's clone is a mount of its own; what lies in it is
 * reached through it, as the sandbox will reach it). */
static int open_in_tree(int root, const char *rel)
{
    struct open_how how = { .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
                            .resolve =
                                RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
    for (int i = 0;; i++) {
        long r = syscall(SYS_openat2, root, rel, &how, sizeof(how));
        if (r >= 0 || errno != EAGAIN || i >= 32)
            return (int) r;
    }
}

/* Record the mount just attached at rel for the mount guard
 * (mountguard.c): reopened, so that the walk crosses onto it. */
static void guard(sup *s, int ws_root, const char *rel, const char *label)
{
    _cleanup_close_ int fd = open_in_tree(ws_root, rel);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) < 0) {
        s->guard_unrecordable = true;
        return;
    }
    /* A protected file is kept open: once a host rename detaches its
     * mount, this is still the file as it was, to compare with what the
     * sandbox could reach in the window (mountguard.c). */
    int old_fd = -1;
    if (S_ISREG(sb.st_mode)) {
        struct open_how how = { .flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC,
                                .resolve =
                                    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        old_fd = (int) syscall(SYS_openat2, ws_root, rel, &how, sizeof(how));
        if (old_fd < 0) {
            s->guard_unrecordable = true;
            return;
        }
    }
    sup_guard_record(s, fd, rel, label, old_fd);
}

/* Compose /workspace in the staged clone of the workspace (its root: ws_root):
 * .git and every Git Sentry mount (read-only protections, bind points, the
 * Domain's copies of git-ignored paths, the quarantine's cover) become kernel
 * mounts inside it, attached from descriptors in plan order (every parent
 * before what lies in it), and runsc gets the whole tree as the one
 * /workspace bind. Per-path runsc binds do not scale: runsc 2022 hands each
 * bind's gofer connection to the sandbox as a descriptor below 256 and fails
 * ("unable to remap stdios, FD 256 is already in use") at about 250 binds
 * (docs/git.md "How the copies are mounted"). Kernel mount points are what
 * keeps the layout: the gofer's rename or rmdir of one (and of a bind point,
 * an ancestor) fails with EBUSY in its mount namespace, a copy of this one. */
static int compose_tree(sup *s, int ws, int ws_root, lz_error **err)
{
    const lz_resolved_config *cfg = s->sc->cfg;
    sup_guard_clear(s);
    struct stat gst;
    if (fstatat(ws, ".git", &gst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(gst.st_mode)) {
        /* .git as its own mount point: the sandbox cannot rename or replace
         * it (docs/platform.md "Git in a bind-mounted workspace", attack 1). */
        _cleanup_free_ char *label = sup_join(cfg->workspace.label, ".git");
        _cleanup_close_ int src = lz_open_confined(ws, ".git", O_PATH | O_DIRECTORY, 0, label, err);
        _cleanup_close_ int dest = src >= 0 ? open_in_tree(ws_root, ".git") : -1;
        if (src < 0)
            return -1;
        if (dest < 0)
            return lz_error_set(err, errno, "cannot open the mount point of %s", label);
        if (lz_stage_fd_over(src, dest, false, label, err) < 0)
            return -1;
        guard(s, ws_root, ".git", label);
    }
    if (s->sc->n_workspace_mounts == 0)
        return 0;
    _cleanup_close_ int empty = -1, ignored = -1;
    if (mkdirat(s->gen_fd, "empty-ro", 0555) < 0 && errno != EEXIST)
        return lz_error_set(err, errno, "cannot create %s/empty-ro", s->sc->generation_dir);
    empty = openat(s->gen_fd, "empty-ro", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (empty < 0)
        return lz_error_set(err, errno, "cannot open %s/empty-ro", s->sc->generation_dir);
    for (size_t i = 0; i < s->sc->n_workspace_mounts; i++) {
        const lz_workspace_mount *m = &s->sc->workspace_mounts[i];
        if (m->base == LZ_MOUNT_FROM_IGNORED && ignored < 0) {
            _cleanup_close_ int droot =
                lz_plan_open(&cfg->storage_domain_root, O_PATH | O_DIRECTORY, true, err);
            if (droot < 0)
                return -1;
            ignored = lz_open_confined(droot, "ignored", O_PATH | O_DIRECTORY, 0,
                                       "the Domain's ignored/", err);
            if (ignored < 0)
                return -1;
        }
        /* The destination: /workspace/<rel> as the sandbox will see it,
         * the same kind of object, reached without a symlink, or the mount
         * would land elsewhere. */
        _cleanup_free_ char *dlabel = sup_join(cfg->workspace.label, m->rel);
        _cleanup_close_ int dest = open_in_tree(ws_root, m->rel);
        struct stat dsb;
        if (dest < 0) {
            lz_error_set(err, errno, "cannot open %s in the sandbox's workspace tree", dlabel);
            return lz_error_hint(err, "the workspace changed while the sandbox was being set up; "
                                      "run again");
        }
        if (fstat(dest, &dsb) < 0 || (m->dir ? !S_ISDIR(dsb.st_mode) : !S_ISREG(dsb.st_mode)))
            return lz_error_set(err, 0, "%s is no longer a %s; run again", dlabel,
                                m->dir ? "directory" : "regular file");
        _cleanup_close_ int src = open_ws_mount_source(s, ws, ignored, empty, m, err);
        if (src < 0)
            return -1;
        _cleanup_free_ char *what = m->base == LZ_MOUNT_FROM_IGNORED
                                        ? lz_xasprintf("the Domain's copy of %s", m->rel)
                                        : lz_xstrdup(dlabel);
        if (lz_stage_fd_over(src, dest, m->readonly, what, err) < 0)
            return -1;
        /* The Domain's copies of git-ignored paths are not guarded: the
         * host removing node_modules/ protects nothing and should not stop
         * the sandbox (what it then makes there is audited like anything
         * else in the workspace). */
        if (m->base != LZ_MOUNT_FROM_IGNORED)
            guard(s, ws_root, m->rel, dlabel);
    }
    return 0;
}

int sup_compose_workspace(sup *s, int ws, int ws_root, lz_error **err)
{
    if (compose_tree(s, ws, ws_root, err) < 0)
        return -1;
    /* The mount table is opened for the guard now: its poll() reports
     * every change since this open, so a rename between here and the
     * sandbox's start is seen too (mountguard.c). */
    return sup_guard_open(s, ws_root, err);
}
