/* SPDX-License-Identifier: Apache-2.0 */
#include "fs/remove.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/util.h"

/* Deeper than this, a directory is not descended into: it is moved up to
 * the top of the tree being removed and taken from there (a tree the
 * sandbox built can be arbitrarily deep; the recursion and its descriptors
 * stay bounded, and the tree still goes). */
#define MAX_DEPTH 128

typedef struct remove_ctx {
    int top;         /* the directory whose contents are being removed */
    unsigned moved;  /* subtrees moved up to it in this pass */
    unsigned serial; /* for their names */
} remove_ctx;

/* Open a subdirectory without following a symlink or crossing a mount point
 * (bind mounts of the same file system included: RESOLVE_NO_XDEV compares
 * mounts, not devices). A directory we own with mode 0500 is made writable
 * first so that its entries can be removed. */
static int open_subdir(int dfd, const char *name)
{
    struct open_how how = {
        .flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_XDEV | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    int fd = (int) syscall(SYS_openat2, dfd, name, &how, sizeof(how));
    if (fd < 0 && errno == EACCES && fchmodat(dfd, name, 0700, AT_SYMLINK_NOFOLLOW) == 0)
        fd = (int) syscall(SYS_openat2, dfd, name, &how, sizeof(how));
    if (fd >= 0)
        (void) !fchmod(fd, 0700); /* best effort: unlinks below report failures */
    return fd;
}

/* Move dfd/name up to the top directory under a fresh name. */
static int move_up(remove_ctx *ctx, int dfd, const char *name)
{
    for (int tries = 0; tries < 1000; tries++) {
        char fresh[64];
        snprintf(fresh, sizeof(fresh), ".lz-deep-%u-%d", ctx->serial++, (int) getpid());
        if (syscall(SYS_renameat2, dfd, name, ctx->top, fresh, RENAME_NOREPLACE) == 0) {
            ctx->moved++;
            return 0;
        }
        if (errno != EEXIST)
            return -1;
    }
    errno = EEXIST;
    return -1;
}

static int remove_contents(remove_ctx *ctx, int dfd, int depth, const char *label, lz_error **err)
{
    int dup = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
    if (dup < 0)
        return lz_error_set(err, errno, "cannot remove %s", label);
    DIR *d = fdopendir(dup);
    if (!d) {
        close(dup);
        return lz_error_set(err, errno, "cannot remove %s", label);
    }
    /* The copy shares dfd's position: a later pass over the same directory
     * starts from its beginning again. */
    rewinddir(d);
    int r = 0;
    struct dirent *e;
    while (r == 0 && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        struct stat st;
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT)
                continue;
            r = lz_error_set(err, errno, "cannot remove %s/%s", label, e->d_name);
            break;
        }
        if (S_ISDIR(st.st_mode) && depth >= MAX_DEPTH) {
            if (move_up(ctx, dfd, e->d_name) < 0)
                r = lz_error_set(err, errno, "cannot remove %s/%s (a deep tree)", label, e->d_name);
        } else if (S_ISDIR(st.st_mode)) {
            int sub = open_subdir(dfd, e->d_name);
            if (sub < 0) {
                r = lz_error_set(err, errno,
                                 errno == EXDEV ? "refusing to remove %s/%s: it is a mount point"
                                                : "cannot remove %s/%s",
                                 label, e->d_name);
                break;
            }
            r = remove_contents(ctx, sub, depth + 1, label, err);
            close(sub);
            if (r == 0 && unlinkat(dfd, e->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                r = lz_error_set(err, errno, "cannot remove %s/%s", label, e->d_name);
        } else if (unlinkat(dfd, e->d_name, 0) < 0 && errno != ENOENT) {
            r = lz_error_set(err, errno, "cannot remove %s/%s", label, e->d_name);
        }
    }
    closedir(d);
    return r;
}

int lz_remove_tree_at(int dirfd, const char *name, const char *label, lz_error **err)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : lz_error_set(err, errno, "cannot remove %s/%s", label, name);
    if (!S_ISDIR(st.st_mode)) {
        if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
            return lz_error_set(err, errno, "cannot remove %s/%s", label, name);
        return 0;
    }
    int sub = open_subdir(dirfd, name);
    if (sub < 0)
        return lz_error_set(err, errno,
                            errno == EXDEV ? "refusing to remove %s/%s: it is a mount point"
                                           : "cannot remove %s/%s",
                            label, name);
    _cleanup_free_ char *sublabel = lz_xasprintf("%s/%s", label, name);
    /* Passes until nothing had to be moved up: each pass removes what lies
     * within MAX_DEPTH and lifts what lies deeper. */
    remove_ctx ctx = { .top = sub };
    int r = 0;
    do {
        ctx.moved = 0;
        r = remove_contents(&ctx, sub, 0, sublabel, err);
    } while (r == 0 && ctx.moved > 0);
    close(sub);
    if (r == 0 && unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return lz_error_set(err, errno, "cannot remove %s/%s", label, name);
    return r;
}
