/* SPDX-License-Identifier: Apache-2.0 */
#include "supervisor/state_anchor.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/util.h"
#include "fs/confined.h"

/* "/usr/local" -> "usr%2Flocal": one flat, unambiguous, readable name per
 * persistent directory in the Domain Root's state/. */
static char *escape_path(const char *p)
{
    size_t n = strlen(p);
    char *out = lz_xmalloc(3 * n + 1);
    size_t o = 0;
    for (size_t i = (p[0] == '/'); i < n; i++) {
        if (p[i] == '/' || p[i] == '%') {
            o += (size_t) sprintf(out + o, "%%%02X", (unsigned char) p[i]);
        } else {
            out[o++] = p[i];
        }
    }
    out[o] = '\0';
    return out;
}

int lz_state_anchor_mount(const lz_resolved_config *cfg, const char *rootfs_label, int gen_fd,
                          const char *generation_dir, lz_state_anchor *anchor, lz_error **err)
{
    if (cfg->n_persistent_dirs == 0)
        return 0;
    _cleanup_close_ int droot = lz_plan_open(&cfg->storage_domain_root, O_PATH | O_DIRECTORY,
                                             true, err);
    if (droot < 0)
        return -1;
    if (lz_mkdir_at(droot, "state", 0700, err) < 0 || lz_mkdir_at(gen_fd, "persist", 0700, err) < 0 ||
        lz_mkdir_at(gen_fd, "empty", 0755, err) < 0)
        return -1;
    _cleanup_close_ int state = lz_open_dir_at(droot, "state", err);
    _cleanup_close_ int persist = state >= 0 ? lz_open_dir_at(gen_fd, "persist", err) : -EBADF;
    _cleanup_close_ int rootfs = -EBADF;
    if (state < 0 || persist < 0)
        return -1;
    rootfs = open(rootfs_label, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (rootfs < 0)
        return lz_error_set(err, errno, "cannot open the prepared image %s",
                            rootfs_label);

    anchor->mounts = lz_xcalloc(cfg->n_persistent_dirs, sizeof(char *));
    anchor->n_mounts = 0;
    for (size_t i = 0; i < cfg->n_persistent_dirs; i++) {
        const char *p = cfg->persistent_dirs[i];
        _cleanup_free_ char *esc = escape_path(p);
        /* The lower: the image's directory, resolved inside the image
         * (RESOLVE_IN_ROOT: an image symlink cannot point outside it), or an
         * empty directory when the image has none. */
        struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS |
                                           RESOLVE_NO_XDEV };
        _cleanup_close_ int lower = (int) syscall(SYS_openat2, rootfs, p + 1, &how, sizeof(how));
        if (lower < 0 && errno == ENOENT)
            lower = lz_open_dir_at(gen_fd, "empty", err);
        if (lower < 0)
            return lz_error_set(err, errno, "persistent directory %s: cannot open it in the image",
                                p);
        struct stat lst;
        if (fstat(lower, &lst) < 0)
            return lz_error_set(err, errno, "persistent directory %s", p);

        if (lz_mkdir_at(state, esc, 0700, err) < 0)
            return -1;
        _cleanup_close_ int dir = lz_open_dir_at(state, esc, err);
        if (dir < 0 || lz_mkdir_at(dir, "upper", lst.st_mode & 07777, err) < 0 ||
            lz_mkdir_at(dir, "work", 0700, err) < 0)
            return -1;
        _cleanup_close_ int upper = lz_open_dir_at(dir, "upper", err);
        _cleanup_close_ int work = upper >= 0 ? lz_open_dir_at(dir, "work", err) : -EBADF;
        if (upper < 0 || work < 0)
            return -1;
        char idx[32];
        snprintf(idx, sizeof(idx), "%zu", i);
        if (lz_mkdir_at(persist, idx, 0755, err) < 0)
            return -1;
        _cleanup_close_ int mp = lz_open_dir_at(persist, idx, err);
        if (mp < 0)
            return -1;
        char opts[256], target[64];
        snprintf(opts, sizeof(opts),
                 "lowerdir=/proc/self/fd/%d,upperdir=/proc/self/fd/%d,workdir=/proc/self/fd/%d,"
                 "userxattr",
                 lower, upper, work);
        snprintf(target, sizeof(target), "/proc/self/fd/%d", mp);
        if (mount("overlay", target, "overlay", MS_NOSUID | MS_NODEV, opts) < 0)
            return lz_error_set(err, errno, "persistent directory %s: cannot mount its overlay", p);
        anchor->mounts[anchor->n_mounts++] = lz_xasprintf("%s/persist/%s", generation_dir,
                                                          idx);
    }
    return 0;
}

void lz_state_anchor_unmount(lz_state_anchor *anchor)
{
    for (size_t i = 0; i < anchor->n_mounts; i++) {
        umount2(anchor->mounts[i], MNT_DETACH);
        free(anchor->mounts[i]);
    }
    free(anchor->mounts);
    anchor->mounts = NULL;
    anchor->n_mounts = 0;
}
