/* SPDX-License-Identifier: Apache-2.0 */
#include "supervisor/stage.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

int lz_stage_init(lz_stage *st, int gen_fd, const char *gen_label, lz_error **err)
{
    *st = (lz_stage) LZ_STAGE_INIT;
    if (mkdirat(gen_fd, "stage", 0700) < 0 && errno != EEXIST)
        return lz_error_set(err, errno, "cannot create %s/stage", gen_label);
    st->dir_fd = openat(gen_fd, "stage", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (st->dir_fd < 0)
        return lz_error_set(err, errno, "cannot open %s/stage", gen_label);
    st->label = lz_xasprintf("%s/stage", gen_label);
    return 0;
}

/* A detached copy of exactly obj_fd's mount (no submounts), nosuid,nodev
 * (and read-only when asked). Returns the tree's descriptor or -1. */
static int clone_restricted(int obj_fd, bool readonly, const char *what, struct stat *ret_sb,
                            lz_error **err)
{
    if (fstat(obj_fd, ret_sb) < 0)
        return lz_error_set(err, errno, "cannot stat %s", what);
    if (!S_ISDIR(ret_sb->st_mode) && !S_ISREG(ret_sb->st_mode))
        return lz_error_set(err, 0, "%s is neither a directory nor a regular file", what);
    int tree = (int) open_tree(obj_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
    if (tree < 0) {
        lz_error_set(err, errno, "cannot pin %s for the sandbox", what);
        if (errno == EINVAL)
            return lz_error_hint(err, "another file system is mounted inside it; Lazaret binds "
                                      "one file system at a time: unmount it, or move the "
                                      "mount out of the way");
        return -1;
    }
    struct mount_attr attr = { .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                           (readonly ? MOUNT_ATTR_RDONLY : 0) };
    if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
        lz_error_set(err, errno, "cannot restrict the mount of %s", what);
        close(tree);
        return -1;
    }
    return tree;
}

int lz_stage_fd(lz_stage *st, int obj_fd, bool readonly, const char *what, char **ret_path,
                lz_error **err)
{
    struct stat sb;
    _cleanup_close_ int tree = clone_restricted(obj_fd, readonly, what, &sb, err);
    if (tree < 0)
        return -1;

    char name[32];
    snprintf(name, sizeof(name), "%u", st->next++);
    if (S_ISDIR(sb.st_mode)) {
        if (mkdirat(st->dir_fd, name, 0700) < 0)
            return lz_error_set(err, errno, "cannot create %s/%s", st->label, name);
    } else {
        int fd =
            openat(st->dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
            return lz_error_set(err, errno, "cannot create %s/%s", st->label, name);
        close(fd);
    }
    if (move_mount(tree, "", st->dir_fd, name, MOVE_MOUNT_F_EMPTY_PATH) < 0)
        return lz_error_set(err, errno, "cannot attach the mount of %s at %s/%s", what, st->label,
                            name);
    *ret_path = lz_xasprintf("%s/%s", st->label, name);
    return 0;
}

int lz_stage_overlay(lz_stage *st, int lower_fd, int upper_fd, int work_fd, const char *what,
                     char **ret_path, lz_error **err)
{
    char name[32];
    snprintf(name, sizeof(name), "%u", st->next++);
    if (mkdirat(st->dir_fd, name, 0700) < 0)
        return lz_error_set(err, errno, "cannot create %s/%s", st->label, name);
    _cleanup_close_ int target =
        openat(st->dir_fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (target < 0)
        return lz_error_set(err, errno, "cannot open %s/%s", st->label, name);
    /* An upper file system without user xattrs (tmpfs before Linux 6.6)
     * only loses what this overlay never needs: the gofer only adds mount
     * points, it removes nothing. */
    if (lz_mount_overlay_fds(lower_fd, upper_fd, work_fd, target) < 0)
        return lz_error_set(err, errno, "cannot mount the overlay of %s", what);
    *ret_path = lz_xasprintf("%s/%s", st->label, name);
    return 0;
}

int lz_mount_overlay_fds(int lower_fd, int upper_fd, int work_fd, int target_fd)
{
    /* userxattr: the overlay's own records as user.overlay.* (a user
     * namespace may not write trusted.*). */
    char opts[256], path[64];
    snprintf(opts, sizeof(opts),
             "lowerdir=/proc/self/fd/%d,upperdir=/proc/self/fd/%d,workdir=/proc/self/fd/%d,"
             "userxattr",
             lower_fd, upper_fd, work_fd);
    snprintf(path, sizeof(path), "/proc/self/fd/%d", target_fd);
    return mount("overlay", path, "overlay", MS_NOSUID | MS_NODEV, opts);
}

int lz_stage_fd_over(int obj_fd, int dest_fd, bool readonly, const char *what, lz_error **err)
{
    struct stat sb, db;
    _cleanup_close_ int tree = clone_restricted(obj_fd, readonly, what, &sb, err);
    if (tree < 0)
        return -1;
    if (fstat(dest_fd, &db) < 0)
        return lz_error_set(err, errno, "cannot stat the mount point of %s", what);
    if ((sb.st_mode & S_IFMT) != (db.st_mode & S_IFMT))
        return lz_error_set(err, 0, "the mount point of %s is not a %s", what,
                            S_ISDIR(sb.st_mode) ? "directory" : "regular file");
    if (move_mount(tree, "", dest_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
        return lz_error_set(err, errno, "cannot mount %s in the sandbox's workspace tree", what);
    return 0;
}

void lz_stage_clear(lz_stage *st)
{
    if (st->dir_fd >= 0)
        close(st->dir_fd);
    free(st->label);
    *st = (lz_stage) LZ_STAGE_INIT;
}
