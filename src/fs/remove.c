/* SPDX-License-Identifier: Apache-2.0 */
#include "fs/remove.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

#define MAX_DEPTH 256

static int remove_contents(int dfd, dev_t dev, int depth, const char *label, lz_error **err)
{
    if (depth > MAX_DEPTH)
        return lz_error_set(err, ELOOP, "cannot remove %s: the tree is too deep", label);
    int dup = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
    if (dup < 0)
        return lz_error_set(err, errno, "cannot remove %s", label);
    DIR *d = fdopendir(dup);
    if (!d) {
        close(dup);
        return lz_error_set(err, errno, "cannot remove %s", label);
    }
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
        if (S_ISDIR(st.st_mode)) {
            if (st.st_dev != dev) {
                r = lz_error_set(err, EXDEV, "refusing to remove %s/%s: it is a mount point",
                                 label, e->d_name);
                break;
            }
            int sub = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0 && errno == EACCES) {
                /* A 0500 directory we own: make it writable first. */
                if (fchmodat(dfd, e->d_name, 0700, 0) == 0)
                    sub = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            }
            if (sub < 0) {
                r = lz_error_set(err, errno, "cannot remove %s/%s", label, e->d_name);
                break;
            }
            (void) !fchmod(sub, 0700); /* best effort: unlinks below report failures */
            r = remove_contents(sub, dev, depth + 1, label, err);
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
    struct stat parent;
    if (fstat(dirfd, &parent) < 0)
        return lz_error_set(err, errno, "cannot remove %s/%s", label, name);
    if (st.st_dev != parent.st_dev)
        return lz_error_set(err, EXDEV, "refusing to remove %s/%s: it is a mount point", label,
                            name);
    int sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0)
        return lz_error_set(err, errno, "cannot remove %s/%s", label, name);
    _cleanup_free_ char *sublabel = lz_xasprintf("%s/%s", label, name);
    int r = remove_contents(sub, st.st_dev, 0, sublabel, err);
    close(sub);
    if (r == 0 && unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return lz_error_set(err, errno, "cannot remove %s/%s", label, name);
    return r;
}
