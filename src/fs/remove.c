/* SPDX-License-Identifier: Apache-2.0 */
#include "fs/remove.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/util.h"

#define MAX_DEPTH 256

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
    int fd = (int)syscall(SYS_openat2, dfd, name, &how, sizeof(how));
    if (fd < 0 && errno == EACCES && fchmodat(dfd, name, 0700, AT_SYMLINK_NOFOLLOW) == 0)
        fd = (int)syscall(SYS_openat2, dfd, name, &how, sizeof(how));
    if (fd >= 0)
        (void)!fchmod(fd, 0700); /* best effort: unlinks below report failures */
    return fd;
}

static int remove_contents(int dfd, int depth, const char *label, lz_error **err)
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
            int sub = open_subdir(dfd, e->d_name);
            if (sub < 0) {
                r = lz_error_set(err, errno,
                                 errno == EXDEV ? "refusing to remove %s/%s: it is a mount point"
                                                : "cannot remove %s/%s",
                                 label, e->d_name);
                break;
            }
            r = remove_contents(sub, depth + 1, label, err);
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
    int r = remove_contents(sub, 0, sublabel, err);
    close(sub);
    if (r == 0 && unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return lz_error_set(err, errno, "cannot remove %s/%s", label, name);
    return r;
}
