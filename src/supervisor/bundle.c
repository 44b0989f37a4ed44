/* SPDX-License-Identifier: Apache-2.0
 *
 * The OCI bundle: the sandbox's host objects staged and pinned by
 * descriptor (stage.h): the root overlay, the workspace (workspace.c), the
 * guest binaries, the escalation mailbox's inbox tmpfs, persistent
 * overlays and volumes; then bundle/config.json.
 */
#include "supervisor/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/nsfs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <linux/magic.h>

#include "common/io.h"
#include "protocol/mailbox.h"
#include "supervisor/stage.h"

/* The sandbox's host objects, each pinned by descriptor (stage.h): the
 * strings below are staging points in the generation directory. */
typedef struct staged_layout {
    char *rootfs, *workspace, *guest_bin, *guest_lib;
    char *escalate_on_path;             /* NULL: not bound (escalate_on_path_free) */
    char *inbox, *outbox, *credentials; /* the Escalation Mailbox */
    lz_spec_mount *mounts;              /* persistent overlays and volumes */
    size_t n_mounts;
    char **owned;
    size_t n_owned;
} staged_layout;

static void staged_layout_clear(staged_layout *l)
{
    for (size_t i = 0; i < l->n_owned; i++)
        free(l->owned[i]);
    free(l->owned);
    free(l->mounts);
    *l = (staged_layout){ 0 };
}

static char *keep(staged_layout *l, char *s)
{
    l->owned = lz_xrealloc(l->owned, l->n_owned + 1, sizeof(char *));
    l->owned[l->n_owned++] = s;
    return s;
}

/* Stage fd (closed here) and return the staging point, kept by l. */
static char *stage(lz_stage *st, staged_layout *l, int fd, bool readonly, const char *what,
                   lz_error **err)
{
    char *path = NULL;
    int r = fd < 0 ? -1 : lz_stage_fd(st, fd, readonly, what, &path, err);
    if (fd >= 0)
        close(fd);
    return r < 0 ? NULL : keep(l, path);
}

/* The resolver the Network Sidecar provides, as the sandbox's
 * /etc/resolv.conf, written into this generation's root overlay before
 * runsc runs (no exec into the running sandbox for it: issue 13, a cold
 * start 30 ms shorter). The overlay's upper layer (root-upper) is
 * Lazaret's and new with every generation; the sandbox never writes it
 * (its writes go to runsc's memory overlay above). The image's tree below
 * is not trusted: /etc is opened without following any symlink, and an
 * image's resolv.conf symlink (systemd images) is replaced, not followed.
 * Returns false, writing nothing, when this way does not apply: /etc is
 * not a plain directory, a persistent directory or volume covers the file
 * (the sandbox must see the file through it); the caller then writes it
 * from inside the sandbox, as before. */
static bool write_resolv_conf(sup *s, int root)
{
    const lz_resolved_config *cfg = s->sc->cfg;
    for (size_t i = 0; i < cfg->n_persistent_dirs; i++)
        if (lz_path_overlaps(cfg->persistent_dirs[i], "/etc/resolv.conf"))
            return false;
    for (size_t i = 0; i < cfg->n_volumes; i++)
        if (lz_path_overlaps(cfg->volumes[i].container, "/etc/resolv.conf"))
            return false;
    lz_error *e = NULL;
    _cleanup_close_ int etc = lz_open_confined(root, "etc", O_PATH | O_DIRECTORY, 0, "/etc", &e);
    if (etc < 0 && e && e->errnum == ENOENT && mkdirat(root, "etc", 0755) == 0) {
        lz_error_free(lz_error_take(&e));
        etc = lz_open_confined(root, "etc", O_PATH | O_DIRECTORY, 0, "/etc", &e);
    }
    lz_error_free(e);
    if (etc < 0)
        return false;
    if (unlinkat(etc, "resolv.conf", 0) < 0 && errno != ENOENT)
        return false; /* a directory, say */
    _cleanup_close_ int fd =
        openat(etc, "resolv.conf", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    static const char line[] = "nameserver " LZ_NET_RESOLVER "\n";
    return fd >= 0 && lz_write_all(fd, line, sizeof(line) - 1) == (ssize_t) (sizeof(line) - 1);
}

/* The image's tree, shared by every Domain of the image, through an
 * overlay of this generation: runsc 2022's gofer creates missing mount
 * points (/workspace, /run/lazaret/..., persistent directories, volumes)
 * in the root it is given, and on the shared tree they would appear in
 * every other Domain of the image - as root's directories where a
 * non-root agent's persistent ~/.cache should be its own (attack round
 * i12f, E2). They land in the generation's root-upper/ instead and go
 * with it. The sandbox itself writes to runsc's in-memory overlay only
 * (--overlay2=root:memory). */
static char *stage_rootfs(sup *s, lz_stage *st, staged_layout *l, lz_error **err)
{
    size_t missing = 0;
    _cleanup_close_ int lower = lz_walk_nofollow(s->sc->image->rootfs_label, &missing, err);
    if (lower >= 0 && missing)
        lz_error_set(err, ENOENT, "the prepared image %s is missing", s->sc->image->rootfs_label);
    if (lower < 0 || missing)
        return NULL;
    if (lz_mkdir_at(s->gen_fd, "root-upper", 0755, err) < 0 ||
        lz_mkdir_at(s->gen_fd, "root-work", 0700, err) < 0)
        return NULL;
    _cleanup_close_ int upper = lz_open_dir_at(s->gen_fd, "root-upper", err);
    _cleanup_close_ int work = upper >= 0 ? lz_open_dir_at(s->gen_fd, "root-work", err) : -1;
    char *path = NULL;
    if (work < 0 ||
        lz_stage_overlay(st, lower, upper, work, s->sc->image->rootfs_label, &path, err) < 0)
        return NULL;
    keep(l, path);
    /* The staging point was just made in st->dir_fd by this process. */
    _cleanup_close_ int root =
        openat(st->dir_fd, strrchr(path, '/') + 1, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    s->resolv_written = root >= 0 && write_resolv_conf(s, root);
    return path;
}

/* The escalation inbox: a tmpfs of its own, bounded in bytes and in
 * inodes (mailbox.h, LZ_MBX_INBOX_MAX_*), made here in the supervisor's
 * mount namespace (the root of a user namespace may mount a tmpfs) on the
 * generation's empty mailbox/spool. The kernel refuses whatever the sandbox
 * writes beyond the bound (ENOSPC), however it writes - big, sparse or many
 * files, directories, links, slow writes nobody read yet - and the memory
 * behind it is at most that; a directory of $XDG_RUNTIME_DIR (a tmpfs in
 * RAM) held as much as the sandbox cared to write. The sandbox gets inbox/
 * of it; junk/ beside it is the coordinator's. The coordinator, whose mount
 * namespace does not have this mount, gets its root's descriptor
 * (SUP_MAILBOX). fsopen/fsmount: the root's descriptor comes from the mount
 * itself, not from resolving a path after mounting. */
static int mount_inbox(sup *s, lz_error **err)
{
    const char *gen = s->sc->generation_dir;
    _cleanup_close_ int point = lz_open_confined(s->gen_fd, LZ_MBX_HOST_SPOOL, O_PATH | O_DIRECTORY,
                                                 0, LZ_MBX_HOST_SPOOL, err);
    if (point < 0)
        return -1;
    char size[32], inodes[32];
    snprintf(size, sizeof(size), "%u", LZ_MBX_INBOX_MAX_BYTES);
    snprintf(inodes, sizeof(inodes), "%u", LZ_MBX_INBOX_MAX_ENTRIES);
    _cleanup_close_ int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
    _cleanup_close_ int mnt = -1;
    if (fs < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "size", size, 0) < 0 ||
        fsconfig(fs, FSCONFIG_SET_STRING, "nr_inodes", inodes, 0) < 0 ||
        fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0700", 0) < 0 ||
        fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
        (mnt = fsmount(fs, FSMOUNT_CLOEXEC,
                       MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)) < 0 ||
        move_mount(mnt, "", point, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0) {
        lz_error_set(err, errno, "cannot mount the escalation inbox's tmpfs on %s/%s", gen,
                     LZ_MBX_HOST_SPOOL);
        return lz_error_hint(err, "run 'lazaret doctor': the Runtime Supervisor must be able to "
                                  "mount a tmpfs in its user namespace");
    }
    int root = openat(mnt, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct statfs sf;
    if (root < 0 || fstatfs(root, &sf) < 0 || sf.f_type != TMPFS_MAGIC ||
        mkdirat(root, LZ_MBX_SPOOL_INBOX, 0700) < 0 || mkdirat(root, LZ_MBX_SPOOL_JUNK, 0700) < 0 ||
        /* Every user of the sandbox may ask (an image may run its command
         * as a non-root user): sticky and world-writable, like /tmp. */
        fchmodat(root, LZ_MBX_SPOOL_INBOX, 01777, 0) < 0) {
        lz_error_set(err, errno, "cannot prepare the escalation inbox in %s/%s", gen,
                     LZ_MBX_HOST_SPOOL);
        if (root >= 0)
            close(root);
        return -1;
    }
    /* The coordinator, the developer outside, reads and empties all of it
     * (and removes what any sandbox user put in the sticky inbox): the
     * three directories are the developer's — uid 0 here in an ordinary
     * Domain, the agent's uid in a keep-id one, where this namespace's
     * root is a subordinate id the coordinator has no rights as. The
     * developer's id in this namespace is its owner's (NS_GET_OWNER_UID,
     * as seen from inside). */
    uid_t dev = (uid_t) -1;
    int ns = open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC);
    bool have = ns >= 0 && ioctl(ns, NS_GET_OWNER_UID, &dev) == 0 && dev != (uid_t) 65534;
    if (ns >= 0)
        close(ns);
    if (!have || fchown(root, dev, (gid_t) -1) < 0 ||
        fchownat(root, LZ_MBX_SPOOL_INBOX, dev, (gid_t) -1, AT_SYMLINK_NOFOLLOW) < 0 ||
        fchownat(root, LZ_MBX_SPOOL_JUNK, dev, (gid_t) -1, AT_SYMLINK_NOFOLLOW) < 0) {
        lz_error_set(err, have ? errno : 0,
                     "cannot give the escalation inbox in %s/%s to the "
                     "developer",
                     gen, LZ_MBX_HOST_SPOOL);
        close(root);
        return -1;
    }
    s->mailbox_fd = root;
    return 0;
}

/* lazaret-escalate is bound at LZ_GUEST_ESCALATE_ON_PATH unless a volume
 * is that path or one of its directories: runsc would create the mount
 * point in the volume, a host directory of the developer's (a persistent
 * directory is Lazaret's own state, where the empty mount point is
 * harmless). /run/lazaret/bin stays on every session's PATH. */
static bool escalate_on_path_free(const lz_resolved_config *cfg)
{
    for (size_t i = 0; i < cfg->n_volumes; i++) {
        const char *c = cfg->volumes[i].container;
        size_t n = strlen(c);
        if (strncmp(LZ_GUEST_ESCALATE_ON_PATH, c, n) == 0 &&
            (LZ_GUEST_ESCALATE_ON_PATH[n] == '/' || LZ_GUEST_ESCALATE_ON_PATH[n] == '\0'))
            return false;
    }
    return true;
}

static int stage_layout(sup *s, lz_stage *st, staged_layout *l, lz_error **err)
{
    const lz_resolved_config *cfg = s->sc->cfg;
    int fd;
    if (!(l->rootfs = stage_rootfs(s, st, l, err)))
        return -1;

    _cleanup_close_ int ws = lz_plan_open(&cfg->workspace, O_PATH | O_DIRECTORY, true, err);
    if (ws < 0 || !(l->workspace = stage(st, l, fcntl(ws, F_DUPFD_CLOEXEC, 3), false,
                                         cfg->workspace.label, err)))
        return -1;
    {
        /* The staging point was just made in st->dir_fd by this process. */
        _cleanup_close_ int ws_root = openat(st->dir_fd, strrchr(l->workspace, '/') + 1,
                                             O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (ws_root < 0)
            return lz_error_set(err, errno, "cannot open %s", l->workspace);
        if (sup_compose_workspace(s, ws, ws_root, err) < 0)
            return -1;
    }

    _cleanup_close_ int guest =
        openat(s->gen_fd, "guest", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (guest < 0)
        return lz_error_set(err, errno, "cannot open %s/guest", s->sc->generation_dir);
    fd = lz_open_confined(guest, "bin", O_PATH | O_DIRECTORY, 0, "guest/bin", err);
    if (!(l->guest_bin = stage(st, l, fd, true, "the guest launcher", err)))
        return -1;
    if (escalate_on_path_free(cfg)) {
        fd = lz_open_confined(guest, "bin/lazaret-escalate", O_PATH, 0,
                              "guest/bin/lazaret-escalate", err);
        if (!(l->escalate_on_path = stage(st, l, fd, true, "the escalation client", err)))
            return -1;
    }
    if (s->sc->guest_lib_dir) {
        fd = lz_open_confined(guest, "lib", O_PATH | O_DIRECTORY, 0, "guest/lib", err);
        if (!(l->guest_lib = stage(st, l, fd, true, "the statx shim", err)))
            return -1;
    }
    /* The Escalation Mailbox (made by the coordinator in the generation
     * directory): the inbox is the sandbox's to write, the outbox and the
     * client's credentials are read-only in the kernel. */
    if (s->mailbox_fd < 0 && mount_inbox(s, err) < 0)
        return -1;
    fd = lz_open_confined(s->mailbox_fd, LZ_MBX_SPOOL_INBOX, O_PATH | O_DIRECTORY, 0,
                          "the escalation inbox", err);
    if (!(l->inbox = stage(st, l, fd, false, "the escalation inbox", err)))
        return -1;
    fd = lz_open_confined(s->gen_fd, "mailbox/outbox", O_PATH | O_DIRECTORY, 0, "mailbox/outbox",
                          err);
    if (!(l->outbox = stage(st, l, fd, true, "the escalation outbox", err)))
        return -1;
    fd = lz_open_confined(s->gen_fd, "credentials", O_PATH | O_DIRECTORY, 0, "credentials", err);
    if (!(l->credentials = stage(st, l, fd, true, "the escalation credentials", err)))
        return -1;

    size_t n = s->anchor.n_mounts + cfg->n_volumes;
    l->mounts = lz_xcalloc(n ? n : 1, sizeof(lz_spec_mount));
    /* Persistent directories are overlays this process mounted from
     * descriptors (state_anchor.c); they are passed as they are. */
    for (size_t i = 0; i < s->anchor.n_mounts; i++)
        l->mounts[l->n_mounts++] =
            (lz_spec_mount){ s->anchor.mounts[i], cfg->persistent_dirs[i], false };
    for (size_t i = 0; i < cfg->n_volumes; i++) {
        bool ro = cfg->volumes[i].access == LZ_ACCESS_READ_ONLY;
        fd = lz_plan_open(&cfg->volumes[i].source, O_PATH, true, err);
        char *src = stage(st, l, fd, ro, cfg->volumes[i].source.label, err);
        if (!src)
            return -1;
        l->mounts[l->n_mounts++] = (lz_spec_mount){ src, cfg->volumes[i].container, ro };
    }

    return 0;
}

int sup_write_config(sup *s, lz_error **err)
{
    const lz_resolved_config *cfg = s->sc->cfg;
    lz_stage st = LZ_STAGE_INIT;
    staged_layout l = { 0 };
    if (lz_stage_init(&st, s->gen_fd, s->sc->generation_dir, err) < 0 ||
        stage_layout(s, &st, &l, err) < 0) {
        staged_layout_clear(&l);
        lz_stage_clear(&st);
        return -1;
    }
    lz_stage_clear(&st);
    _cleanup_free_ char *hostname = lz_xasprintf("lazaret-%s", cfg->profile);
    lz_sandbox_spec spec = {
        .rootfs = l.rootfs,
        .hostname = hostname,
        .workspace = l.workspace,
        .mounts = l.mounts,
        .n_mounts = l.n_mounts,
        .guest_bin_dir = l.guest_bin,
        .guest_lib_dir = l.guest_lib,
        .escalate_on_path = l.escalate_on_path,
        .mailbox_inbox = l.inbox,
        .mailbox_outbox = l.outbox,
        .credentials_dir = l.credentials,
        .netns_path = s->net.sandbox_netns,
        .env = NULL,
    };
    /* The init process gets the image environment only: no secrets in a
     * file on disk. */
    char **init_env = lz_xcalloc(2, sizeof(char *));
    init_env[0] = lz_xstrdup("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    spec.env = init_env;
    json_t *j = lz_spec_container(&spec);
    staged_layout_clear(&l);
    sup_free_strv(init_env);

    if (lz_mkdir_at(s->gen_fd, "bundle", 0700, err) < 0) {
        json_decref(j);
        return -1;
    }
    _cleanup_close_ int bundle = lz_open_dir_at(s->gen_fd, "bundle", err);
    int fd = bundle >= 0 ? openat(bundle, "config.json",
                                  O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600)
                         : -1;
    int r = fd >= 0 ? json_dumpfd(j, fd, JSON_INDENT(1)) : -1;
    json_decref(j);
    if (fd < 0 || r < 0) {
        if (fd >= 0)
            close(fd);
        return lz_error_set(err, errno, "cannot write %s/bundle/config.json",
                            s->sc->generation_dir);
    }
    close(fd);
    return 0;
}
