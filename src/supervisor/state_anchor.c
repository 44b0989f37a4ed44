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
#include "store/domain_root.h"
#include "supervisor/stage.h"

/* Lazaret's own directories of the layout (state/, state/<dir>/, work/)
 * belong to the developer on the host, whichever map the sandbox runs
 * with: the developer is sandbox id 0 in the default map and the agent's
 * ids in a keep-id one (docs/runtime.md "The agent's user"). */
static int own_dir(int fd, const lz_idmap *user, const char *what, lz_error **err)
{
    uid_t u = user ? user->uid : 0;
    gid_t g = user ? user->gid : 0;
    if (fchownat(fd, "", u, g, AT_EMPTY_PATH) < 0)
        return lz_error_set(err, errno, "cannot give %s back to you", what);
    return 0;
}

static int open_in_image(int rootfs, const char *rel)
{
    struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                            .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };
    return (int) syscall(SYS_openat2, rootfs, rel[0] ? rel : ".", &how, sizeof(how));
}

/* The owner a persistent directory the image lacks gets: that of its
 * nearest ancestor the image has, as `mkdir -p` by that owner would make
 * it - a persistent ~/.cache of a non-root agent is the agent's, /opt/tool
 * root's. Computed, never made: the image tree is shared by every Domain
 * of the image (attack round i12f, E2; runsc's own mount points go to the
 * generation's overlay of the root, supervisor/bundle.c stage_rootfs). */
static void nearest_owner(int rootfs, const char *p, uid_t *ret_uid, gid_t *ret_gid)
{
    _cleanup_free_ char *prefix = lz_xstrdup(p + 1);
    for (;;) {
        char *slash = strrchr(prefix, '/');
        if (slash)
            *slash = '\0';
        else
            prefix[0] = '\0';
        _cleanup_close_ int fd = open_in_image(rootfs, prefix);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0) {
            *ret_uid = st.st_uid;
            *ret_gid = st.st_gid;
            return;
        }
        if (!prefix[0])
            return; /* not even the image's root: the caller's default stays */
    }
}

int lz_state_anchor_mount(const lz_resolved_config *cfg, const char *rootfs_label,
                          const lz_idmap *user, int gen_fd, const char *generation_dir,
                          lz_state_anchor *anchor, lz_error **err)
{
    if (cfg->n_persistent_dirs == 0)
        return 0;
    _cleanup_close_ int droot =
        lz_plan_open(&cfg->storage_domain_root, O_PATH | O_DIRECTORY, true, err);
    if (droot < 0)
        return -1;
    if (lz_mkdir_at(droot, LZ_DROOT_STATE, 0700, err) < 0 ||
        lz_mkdir_at(gen_fd, "persist", 0700, err) < 0 ||
        lz_mkdir_at(gen_fd, "empty", 0755, err) < 0)
        return -1;
    _cleanup_close_ int state = lz_open_dir_at(droot, LZ_DROOT_STATE, err);
    _cleanup_close_ int persist = state >= 0 ? lz_open_dir_at(gen_fd, "persist", err) : -EBADF;
    _cleanup_close_ int rootfs = -EBADF;
    if (state < 0 || persist < 0 || own_dir(state, user, "the Domain's state/", err) < 0)
        return -1;
    rootfs = open(rootfs_label, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (rootfs < 0)
        return lz_error_set(err, errno, "cannot open the prepared image %s", rootfs_label);

    anchor->mounts = lz_xcalloc(cfg->n_persistent_dirs, sizeof(char *));
    anchor->n_mounts = 0;
    for (size_t i = 0; i < cfg->n_persistent_dirs; i++) {
        const char *p = cfg->persistent_dirs[i];
        _cleanup_free_ char *esc = lz_state_name_escape(p);
        /* The lower: the image's directory, resolved inside the image
         * (RESOLVE_IN_ROOT: an image symlink cannot point outside it), or
         * an empty directory when the image has none. */
        _cleanup_close_ int lower = open_in_image(rootfs, p + 1);
        bool in_image = lower >= 0;
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
        struct stat ust;
        bool fresh = dir >= 0 &&
                     fstatat(dir, LZ_DROOT_STATE_UPPER, &ust, AT_SYMLINK_NOFOLLOW) < 0 &&
                     errno == ENOENT;
        if (dir < 0 || lz_mkdir_at(dir, LZ_DROOT_STATE_UPPER, lst.st_mode & 07777, err) < 0 ||
            lz_mkdir_at(dir, LZ_DROOT_STATE_WORK, 0700, err) < 0)
            return -1;
        _cleanup_close_ int upper = lz_open_dir_at(dir, LZ_DROOT_STATE_UPPER, err);
        _cleanup_close_ int work =
            upper >= 0 ? lz_open_dir_at(dir, LZ_DROOT_STATE_WORK, err) : -EBADF;
        if (upper < 0 || work < 0 ||
            own_dir(dir, user, "a persistent directory's state", err) < 0 ||
            own_dir(work, user, "a persistent directory's work directory", err) < 0)
            return -1;
        /* The overlay's root takes the upper's owner: a new upper gets the
         * image directory's (a non-root user's home stays its own), or for
         * one the image lacks its nearest ancestor's (docs/runtime.md "The
         * agent's user"). Later changes are the sandbox's own (a chown
         * inside lands on the upper). */
        uid_t ouid = user ? user->uid : 0;
        gid_t ogid = user ? user->gid : 0;
        if (in_image) {
            ouid = lst.st_uid;
            ogid = lst.st_gid;
        } else {
            nearest_owner(rootfs, p, &ouid, &ogid);
        }
        if (fresh && fchownat(upper, "", ouid, ogid, AT_EMPTY_PATH) < 0)
            return lz_error_set(err, errno,
                                "persistent directory %s: cannot give its state to "
                                "uid %u",
                                p, (unsigned) ouid);
        char idx[32];
        snprintf(idx, sizeof(idx), "%zu", i);
        if (lz_mkdir_at(persist, idx, 0755, err) < 0)
            return -1;
        _cleanup_close_ int mp = lz_open_dir_at(persist, idx, err);
        if (mp < 0)
            return -1;
        if (lz_mount_overlay_fds(lower, upper, work, mp) < 0)
            return lz_error_set(err, errno, "persistent directory %s: cannot mount its overlay", p);
        anchor->mounts[anchor->n_mounts++] = lz_xasprintf("%s/persist/%s", generation_dir, idx);
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
