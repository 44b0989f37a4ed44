/* SPDX-License-Identifier: Apache-2.0
 *
 * Descriptor-based path authority (spec 3.2, "ConfinedPathPlan").
 *
 * Paths are labels. Authority comes from descriptors: a walk from "/" that
 * refuses symlinks component by component, then openat2() beneath a retained
 * directory with RESOLVE_BENEATH|NO_SYMLINKS|NO_MAGICLINKS|NO_XDEV, then a
 * comparison of filesystem identities. See confined.h for the contracts.
 */
#include "fs/confined.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/text.h"
#include "common/util.h"

_Static_assert(LZ_RESOLVE_CONFINED_FLAGS == (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                                             RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV),
               "LZ_RESOLVE_CONFINED_FLAGS must match <linux/openat2.h>");

/* The kernel may answer EAGAIN to RESOLVE_BENEATH when a concurrent rename
 * could have let ".." escape; it asks the caller to retry. Bounded, so an
 * attacker racing renames forever gets a refusal rather than a hang. */
#define OPENAT2_EAGAIN_RETRIES 32

static int sys_openat2(int dirfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve)
{
    struct open_how how = {
        .flags = flags | O_CLOEXEC,
        .mode = mode,
        .resolve = resolve,
    };
    for (int i = 0;; i++) {
        long r = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
        if (r >= 0)
            return (int) r;
        if (errno != EAGAIN || i >= OPENAT2_EAGAIN_RETRIES)
            return -1;
    }
}

/* Hand a locally collected error to the caller (or drop it). Returns -1. */
static int propagate(lz_error **err, lz_error *e)
{
    if (err && !*err)
        *err = e;
    else
        lz_error_free(e);
    return -1;
}

/* ---- path strings ------------------------------------------------------ */

/* Components of p (not starting with '/') separated by single slashes, none
 * empty, "." or "..", and no trailing slash. */
static bool components_normalized(const char *p)
{
    if (*p == '\0')
        return false;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t) (slash - p) : strlen(p);
        if (len == 0)
            return false;
        if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        if (!slash)
            return true;
        p = slash + 1;
    }
}

bool lz_path_is_normalized_abs(const char *path)
{
    if (!path || path[0] != '/')
        return false;
    return path[1] == '\0' || components_normalized(path + 1);
}

bool lz_path_is_normalized_rel(const char *path)
{
    return path && path[0] != '/' && components_normalized(path);
}

/* Is anc equal to, or a component-wise ancestor of, p? */
static bool ancestor_or_self(const char *anc, const char *p)
{
    if (strcmp(anc, "/") == 0)
        return p[0] == '/';
    size_t n = strlen(anc);
    return strncmp(anc, p, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

bool lz_path_overlaps(const char *a, const char *b)
{
    return ancestor_or_self(a, b) || ancestor_or_self(b, a);
}

bool lz_path_is_strict_descendant(const char *child, const char *parent)
{
    return strcmp(child, parent) != 0 && ancestor_or_self(parent, child);
}

/* ---- identities -------------------------------------------------------- */

/* Kernels before 5.8 have no STATX_MNT_ID; /proc/self/fdinfo has carried
 * "mnt_id:" since 3.15. */
static int mnt_id_from_fdinfo(int fd, uint64_t *ret)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char line[256];
    int r = -1;
    while (fgets(line, sizeof(line), f)) {
        uint64_t v;
        if (sscanf(line, "mnt_id: %" SCNu64, &v) == 1) {
            *ret = v;
            r = 0;
            break;
        }
    }
    fclose(f);
    if (r < 0)
        errno = ENODATA;
    return r;
}

int lz_identity_of(int fd, lz_identity *ret, lz_error **err)
{
    struct statx sx;
    if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_MNT_ID, &sx) <
        0)
        return lz_error_set(err, errno, "cannot read the identity of descriptor %d", fd);
    const unsigned need = STATX_TYPE | STATX_MODE | STATX_INO | STATX_UID | STATX_GID |
                          STATX_NLINK | STATX_SIZE | STATX_CTIME;
    if ((sx.stx_mask & need) != need)
        return lz_error_set(err, ENODATA, "incomplete identity for descriptor %d", fd);
    uint64_t mnt_id = sx.stx_mnt_id;
    if (!(sx.stx_mask & STATX_MNT_ID) && mnt_id_from_fdinfo(fd, &mnt_id) < 0)
        return lz_error_set(err, errno, "cannot read the mount id of descriptor %d", fd);

    *ret = (lz_identity){
        .dev = makedev(sx.stx_dev_major, sx.stx_dev_minor),
        .ino = (ino_t) sx.stx_ino,
        .mnt_id = mnt_id,
        .mode = sx.stx_mode,
        .uid = sx.stx_uid,
        .gid = sx.stx_gid,
        .nlink = sx.stx_nlink,
        .size = (off_t) sx.stx_size,
        .ctime = { .tv_sec = sx.stx_ctime.tv_sec, .tv_nsec = sx.stx_ctime.tv_nsec },
    };
    return 0;
}

bool lz_identity_same_object(const lz_identity *a, const lz_identity *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->mnt_id == b->mnt_id;
}

/* ---- opens ------------------------------------------------------------- */

int lz_open_confined(int dirfd, const char *relpath, int flags, mode_t mode, const char *label,
                     lz_error **err)
{
    if (!label)
        label = relpath ? relpath : "(null)";
    if (!relpath || relpath[0] == '\0' || relpath[0] == '/')
        return lz_error_set(err, EINVAL, "refusing %s: a confined open needs a relative path",
                            label);
    if (dirfd < 0)
        return lz_error_set(err, EBADF, "cannot open %s: no confining directory", label);

    bool creates = (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
    _cleanup_close_ int fd = sys_openat2(dirfd, relpath, (uint64_t) (unsigned) flags,
                                         creates ? mode : 0, LZ_RESOLVE_CONFINED_FLAGS);
    if (fd < 0) {
        switch (errno) {
        case ELOOP:
            return lz_error_set(err, ELOOP, "refusing %s: a symlink or magic link is on its path",
                                label);
        case EXDEV:
            return lz_error_set(err, EXDEV,
                                "refusing %s: it lies outside its confining directory or "
                                "across a mount",
                                label);
        case ENOSYS:
            lz_error_set(err, ENOSYS, "cannot open %s: openat2() is not available", label);
            return lz_error_hint(err, "Lazaret needs Linux 5.6 or later");
        default:
            return lz_error_set(err, errno, "cannot open %s", label);
        }
    }

    /* With O_PATH|O_NOFOLLOW the kernel returns a trailing symlink itself
     * even under RESOLVE_NO_SYMLINKS. Nothing Lazaret trusts is a symlink. */
    if ((flags & O_PATH) && (flags & O_NOFOLLOW)) {
        struct stat st;
        if (fstat(fd, &st) < 0)
            return lz_error_set(err, errno, "cannot stat %s", label);
        if (S_ISLNK(st.st_mode))
            return lz_error_set(err, ELOOP, "refusing %s: it is a symlink", label);
    }
    return TAKE_FD(fd);
}

int lz_walk_nofollow(const char *abs_path, size_t *ret_missing, lz_error **err)
{
    if (!lz_path_is_normalized_abs(abs_path))
        return lz_error_set(err, EINVAL, "refusing path %s: not an absolute normalized path",
                            abs_path ? abs_path : "(null)");

    _cleanup_close_ int cur = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (cur < 0)
        return lz_error_set(err, errno, "cannot open /");

    const char *p = abs_path + 1;
    while (*p) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t) (slash - p) : strlen(p);
        int end = (int) ((p - abs_path) + (ptrdiff_t) len); /* prefix abs_path[0..end) */
        _cleanup_free_ char *name = lz_xstrndup(p, len);

        /* No RESOLVE_NO_XDEV here: ambient ancestors legitimately sit on
         * different mounts. A single component cannot contain "..". */
        _cleanup_close_ int fd = sys_openat2(cur, name, O_PATH | O_NOFOLLOW, 0,
                                             RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
        if (fd < 0) {
            int e = errno;
            if (e == ENOENT && ret_missing) {
                *ret_missing = (size_t) (p - abs_path);
                return TAKE_FD(cur);
            }
            if (e == ELOOP)
                return lz_error_set(err, ELOOP, "refusing %.*s: it is a symlink (in %s)", end,
                                    abs_path, abs_path);
            if (e == ENOSYS) {
                lz_error_set(err, e, "cannot open %.*s: openat2() is not available", end, abs_path);
                return lz_error_hint(err, "Lazaret needs Linux 5.6 or later");
            }
            return lz_error_set(err, e, "cannot open %.*s", end, abs_path);
        }

        struct stat st;
        if (fstat(fd, &st) < 0)
            return lz_error_set(err, errno, "cannot stat %.*s", end, abs_path);
        if (S_ISLNK(st.st_mode))
            return lz_error_set(err, ELOOP, "refusing %.*s: it is a symlink (in %s)", end, abs_path,
                                abs_path);
        if (slash && !S_ISDIR(st.st_mode))
            return lz_error_set(err, ENOTDIR, "refusing %s: %.*s is not a directory", abs_path, end,
                                abs_path);

        lz_close(&cur);
        cur = TAKE_FD(fd);
        p = slash ? slash + 1 : p + len;
    }
    if (ret_missing)
        *ret_missing = 0;
    return TAKE_FD(cur);
}

/* ---- canonical labels -------------------------------------------------- */

typedef struct {
    const char *s;
    size_t len;
} component;

char *lz_canonicalize(const char *abs_path, lz_error **err)
{
    if (!abs_path || abs_path[0] != '/') {
        lz_error_set(err, EINVAL, "refusing path %s: not absolute", abs_path ? abs_path : "(null)");
        return NULL;
    }

    size_t n = 0, cap = 8;
    _cleanup_free_ component *comps = lz_xcalloc(cap, sizeof(*comps));
    for (const char *p = abs_path; *p;) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        const char *e = strchrnul(p, '/');
        size_t len = (size_t) (e - p);
        if (!(len == 1 && p[0] == '.')) {
            if (n == cap) {
                cap *= 2;
                comps = lz_xrealloc(comps, cap, sizeof(*comps));
            }
            comps[n++] = (component){ p, len };
        }
        p = e;
    }

    /* Longest existing prefix, from the full path downwards. realpath("/")
     * cannot fail with ENOENT, so k stops at 0 at the latest. */
    _cleanup_free_ char *real = NULL;
    size_t k = n;
    for (;; k--) {
        _cleanup_free_ char *prefix = NULL;
        size_t plen = 1;
        for (size_t i = 0; i < k; i++)
            plen += comps[i].len + 1;
        prefix = lz_xmalloc(plen + 1);
        char *o = prefix;
        *o++ = '/';
        for (size_t i = 0; i < k; i++) {
            memcpy(o, comps[i].s, comps[i].len);
            o += comps[i].len;
            if (i + 1 < k)
                *o++ = '/';
        }
        *o = '\0';

        real = realpath(prefix, NULL);
        if (real)
            break;
        if (errno != ENOENT || k == 0) {
            lz_error_set(err, errno, "cannot canonicalize %s", abs_path);
            return NULL;
        }
    }
    if (k == n)
        return TAKE_PTR(real);

    /* comps[k] does not resolve. If it exists anyway, it is a dangling
     * symlink: a label past it would name something else later. */
    {
        /* The loop above returned unless realpath gave a prefix. */
        // cppcheck-suppress nullPointer
        _cleanup_free_ char *probe = lz_xasprintf("%s/%.*s", strcmp(real, "/") == 0 ? "" : real,
                                                  (int) comps[k].len, comps[k].s);
        struct stat st;
        if (fstatat(AT_FDCWD, probe, &st, AT_SYMLINK_NOFOLLOW) == 0) {
            lz_error_set(err, ELOOP, "cannot canonicalize %s: %s is a dangling symlink", abs_path,
                         probe);
            return NULL;
        }
    }

    size_t rlen = strlen(real);
    size_t total = rlen;
    for (size_t i = k; i < n; i++) {
        if (comps[i].len == 2 && comps[i].s[0] == '.' && comps[i].s[1] == '.') {
            lz_error_set(err, EINVAL,
                         "cannot canonicalize %s: \"..\" follows a component that does not "
                         "exist",
                         abs_path);
            return NULL;
        }
        total += comps[i].len + 1;
    }
    char *out = lz_xmalloc(total + 1);
    char *o = out;
    if (strcmp(real, "/") != 0) {
        memcpy(o, real, rlen);
        o += rlen;
    }
    for (size_t i = k; i < n; i++) {
        *o++ = '/';
        memcpy(o, comps[i].s, comps[i].len);
        o += comps[i].len;
    }
    *o = '\0';
    return out;
}

char *lz_fd_path(int fd, lz_error **err)
{
    char proc[64];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    for (size_t size = 256;; size *= 2) {
        _cleanup_free_ char *buf = lz_xmalloc(size);
        ssize_t n = readlink(proc, buf, size);
        if (n < 0) {
            lz_error_set(err, errno, "cannot read the path of descriptor %d", fd);
            return NULL;
        }
        if ((size_t) n < size) {
            buf[n] = '\0';
            if (buf[0] != '/') {
                lz_error_set(err, EINVAL, "descriptor %d does not refer to a path (%s)", fd, buf);
                return NULL;
            }
            return TAKE_PTR(buf);
        }
        if (size > 16 * PATH_MAX) {
            lz_error_set(err, ENAMETOOLONG, "cannot read the path of descriptor %d", fd);
            return NULL;
        }
    }
}

/* ---- plans ------------------------------------------------------------- */

void lz_plan_clear(lz_path_plan *plan)
{
    if (!plan)
        return;
    lz_closep(&plan->ancestor_fd);
    free(plan->suffix);
    free(plan->label);
    *plan = (lz_path_plan) LZ_PATH_PLAN_INIT;
}

/* The label of the plan's ancestor: the label without "/<suffix>", or the
 * label itself for a "." suffix. */
static char *ancestor_label(const lz_path_plan *plan, lz_error **err)
{
    if (strcmp(plan->suffix, ".") == 0)
        return lz_xstrdup(plan->label);
    size_t ll = strlen(plan->label), sl = strlen(plan->suffix);
    if (ll >= sl + 1 && plan->label[ll - sl - 1] == '/' &&
        strcmp(plan->label + ll - sl, plan->suffix) == 0) {
        size_t al = ll - sl - 1;
        return al == 0 ? lz_xstrdup("/") : lz_xstrndup(plan->label, al);
    }
    lz_error_set(err, EINVAL, "inconsistent path plan for %s", plan->label);
    return NULL;
}

int lz_plan_existing(const char *canonical, lz_path_plan *ret, lz_error **err)
{
    if (!lz_path_is_normalized_abs(canonical) || strcmp(canonical, "/") == 0)
        return lz_error_set(err, EINVAL,
                            "refusing path %s: a plan needs a normalized absolute path "
                            "below /",
                            canonical ? canonical : "(null)");

    const char *slash = strrchr(canonical, '/');
    _cleanup_free_ char *parent =
        slash == canonical ? lz_xstrdup("/") : lz_xstrndup(canonical, (size_t) (slash - canonical));
    const char *name = slash + 1;

    _cleanup_close_ int pfd = lz_walk_nofollow(parent, NULL, err);
    if (pfd < 0)
        return -1;
    lz_identity pid;
    if (lz_identity_of(pfd, &pid, err) < 0)
        return -1;
    if (!S_ISDIR(pid.mode))
        return lz_error_set(err, ENOTDIR, "refusing %s: %s is not a directory", canonical, parent);

    lz_error *e = NULL;
    _cleanup_close_ int tfd = lz_open_confined(pfd, name, O_PATH | O_NOFOLLOW, 0, canonical, &e);
    if (tfd >= 0) {
        lz_identity tid;
        if (lz_identity_of(tfd, &tid, err) < 0)
            return -1;
        *ret = (lz_path_plan){
            .ancestor_fd = TAKE_FD(pfd),
            .ancestor = pid,
            .suffix = lz_xstrdup(name),
            .label = lz_xstrdup(canonical),
            .target = tid,
        };
        return 0;
    }
    if (e->errnum != EXDEV)
        return propagate(err, e);

    /* The target is the root of another mount (RESOLVE_NO_XDEV stopped the
     * last step). A directory mount root can serve as its own ancestor. */
    _cleanup_close_ int mfd = lz_walk_nofollow(canonical, NULL, err);
    if (mfd < 0) {
        lz_error_free(e);
        return -1;
    }
    lz_identity mid;
    if (lz_identity_of(mfd, &mid, err) < 0) {
        lz_error_free(e);
        return -1;
    }
    if (!S_ISDIR(mid.mode) || mid.mnt_id == pid.mnt_id)
        return propagate(err, e);
    lz_error_free(e);
    *ret = (lz_path_plan){
        .ancestor_fd = TAKE_FD(mfd),
        .ancestor = mid,
        .suffix = lz_xstrdup("."),
        .label = lz_xstrdup(canonical),
        .target = mid,
    };
    return 0;
}

int lz_plan_open(const lz_path_plan *plan, int flags, bool expect_same, lz_error **err)
{
    if (!plan || plan->ancestor_fd < 0 || !plan->suffix || !plan->label)
        return lz_error_set(err, EBADF, "cannot open through an empty path plan");
    if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE)
        return lz_error_set(err, EINVAL, "refusing to create %s through a path plan", plan->label);

    /* 1. The retained descriptor is the recorded directory. */
    lz_identity now;
    if (lz_identity_of(plan->ancestor_fd, &now, err) < 0)
        return lz_error_prefix(err, "cannot revalidate %s", plan->label);
    if (!lz_identity_same_object(&now, &plan->ancestor) || !S_ISDIR(now.mode))
        return lz_error_set(err, ESTALE, "refusing %s: its retained ancestor changed identity",
                            plan->label);

    /* 2. The ancestor's label still reaches that directory: it was not
     *    renamed away, replaced, or turned into a symlink since planning. */
    _cleanup_free_ char *alabel = ancestor_label(plan, err);
    if (!alabel)
        return -1;
    {
        lz_error *e = NULL;
        _cleanup_close_ int wfd = lz_walk_nofollow(alabel, NULL, &e);
        if (wfd < 0) {
            propagate(err, e);
            return lz_error_prefix(err, "refusing %s: its ancestor %s no longer resolves",
                                   plan->label, alabel);
        }
        lz_identity walked;
        if (lz_identity_of(wfd, &walked, err) < 0)
            return -1;
        if (!lz_identity_same_object(&walked, &plan->ancestor))
            return lz_error_set(err, ESTALE, "refusing %s: its ancestor %s was replaced",
                                plan->label, alabel);
    }

    /* 3. The target, confined beneath the retained ancestor. */
    _cleanup_close_ int fd =
        lz_open_confined(plan->ancestor_fd, plan->suffix, flags, 0, plan->label, err);
    if (fd < 0)
        return -1;
    lz_identity tid;
    if (lz_identity_of(fd, &tid, err) < 0)
        return -1;
    if (plan->target.mode != 0 && (tid.mode & S_IFMT) != (plan->target.mode & S_IFMT))
        return lz_error_set(err, ESTALE, "refusing %s: its file type changed", plan->label);
    if (expect_same && !lz_identity_same_object(&tid, &plan->target))
        return lz_error_set(err, ESTALE, "refusing %s: it was replaced after it was resolved",
                            plan->label);
    return TAKE_FD(fd);
}

int lz_plan_rebase(lz_path_plan *plan, lz_error **err)
{
    if (!plan || plan->ancestor_fd < 0 || !plan->suffix || !plan->label)
        return lz_error_set(err, EBADF, "cannot rebase an empty path plan");
    _cleanup_free_ char *alabel = ancestor_label(plan, err);
    if (!alabel)
        return -1;
    _cleanup_close_ int wfd = lz_walk_nofollow(alabel, NULL, err);
    if (wfd < 0)
        return lz_error_prefix(err, "refusing %s: its ancestor %s no longer resolves", plan->label,
                               alabel);
    lz_identity walked;
    if (lz_identity_of(wfd, &walked, err) < 0)
        return -1;
    if (walked.dev != plan->ancestor.dev || walked.ino != plan->ancestor.ino ||
        !S_ISDIR(walked.mode))
        return lz_error_set(err, ESTALE, "refusing %s: its ancestor %s was replaced", plan->label,
                            alabel);
    _cleanup_close_ int tfd = lz_open_confined(wfd, plan->suffix, O_PATH, 0, plan->label, err);
    if (tfd < 0)
        return -1;
    lz_identity tid;
    if (lz_identity_of(tfd, &tid, err) < 0)
        return -1;
    if (tid.dev != plan->target.dev || tid.ino != plan->target.ino)
        return lz_error_set(err, ESTALE, "refusing %s: it was replaced after it was resolved",
                            plan->label);
    close(plan->ancestor_fd);
    plan->ancestor_fd = TAKE_FD(wfd);
    plan->ancestor.mnt_id = walked.mnt_id;
    plan->target.mnt_id = tid.mnt_id;
    return 0;
}

/* ---- Lazaret-owned directories ----------------------------------------- */

static int check_owned(const lz_identity *id, const char *label, lz_error **err)
{
    if (!S_ISDIR(id->mode)) {
        lz_error_set(err, ENOTDIR, "refusing Lazaret directory %s: not a directory", label);
        return lz_error_hint(err, "remove it or choose another location");
    }
    uid_t uid = getuid();
    if (id->uid != uid) {
        lz_error_set(err, EPERM,
                     "refusing Lazaret directory %s: owned by uid %u, not by the invoking "
                     "user (uid %u)",
                     label, (unsigned) id->uid, (unsigned) uid);
        return lz_error_hint(err,
                             "the directory is owned by uid %u; remove it or choose another "
                             "location",
                             (unsigned) id->uid);
    }
    if ((id->mode & 07777) != 0700) {
        lz_error_set(err, EPERM, "refusing Lazaret directory %s: mode %04o, expected 0700", label,
                     (unsigned) (id->mode & 07777));
        _cleanup_free_ char *q = lz_text_shell_quote(label);
        return lz_error_hint(err, "chmod 0700 %s", q);
    }
    return 0;
}

/* Set a just-created directory to exactly 0700. fchmod() needs a real
 * descriptor; if the umask also removed u+r so that none can be opened,
 * chmod through the O_PATH descriptor's proc link, which names exactly the
 * object we hold. */
static int fix_created_mode(int opath_fd, const char *label, lz_error **err)
{
    _cleanup_close_ int fd =
        lz_open_confined(opath_fd, ".", O_RDONLY | O_DIRECTORY, 0, label, NULL);
    if (fd >= 0) {
        if (fchmod(fd, 0700) < 0)
            return lz_error_set(err, errno, "cannot set mode 0700 on %s", label);
        return 0;
    }
    char proc[64];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", opath_fd);
    if (chmod(proc, 0700) < 0)
        return lz_error_set(err, errno, "cannot set mode 0700 on %s", label);
    return 0;
}

/* Open (creating it with 0700 if missing) the directory `name` directly
 * beneath parent_fd and check that it is Lazaret-owned. Returns an O_PATH fd
 * and its identity. */
static int open_owned_dir(int parent_fd, const char *name, const char *label, lz_identity *ret_id,
                          lz_error **err)
{
    bool created = false;
    lz_error *e = NULL;
    _cleanup_close_ int fd = lz_open_confined(parent_fd, name, O_PATH | O_NOFOLLOW, 0, label, &e);
    if (fd < 0) {
        if (e->errnum != ENOENT)
            return propagate(err, e);
        lz_error_free(e);
        if (mkdirat(parent_fd, name, 0700) == 0)
            created = true;
        else if (errno != EEXIST) /* lost a race: validate what is there */
            return lz_error_set(err, errno, "cannot create directory %s", label);
        /* Reopen what the name now designates; a symlink or mount planted
         * between mkdirat() and here is refused by the confined open. */
        fd = lz_open_confined(parent_fd, name, O_PATH | O_NOFOLLOW, 0, label, err);
        if (fd < 0)
            return -1;
    }

    lz_identity id;
    if (lz_identity_of(fd, &id, err) < 0)
        return -1;
    /* mkdirat(0700) can only come out narrower (umask, default ACL) or with
     * S_ISGID inherited from a setgid parent: set what we created to exactly
     * 0700. Directories we did not create are judged, never repaired. */
    if (created && S_ISDIR(id.mode) && id.uid == getuid() && (id.mode & 07777) != 0700) {
        if (fix_created_mode(fd, label, err) < 0)
            return -1;
        if (lz_identity_of(fd, &id, err) < 0)
            return -1;
    }
    if (check_owned(&id, label, err) < 0)
        return -1;
    *ret_id = id;
    return TAKE_FD(fd);
}

/* Ensure every component of rel (normalized relative) below the directory
 * parent_fd (identity parent_id) is Lazaret-owned; label_base + "/" + rel is
 * the label. Fills *ret with a plan (ancestor = parent of the last one). */
static int ensure_owned_chain(int parent_fd, const lz_identity *parent_id, const char *label_base,
                              const char *rel, lz_path_plan *ret, lz_error **err)
{
    _cleanup_close_ int parent = fcntl(parent_fd, F_DUPFD_CLOEXEC, 3);
    if (parent < 0)
        return lz_error_set(err, errno, "cannot duplicate the descriptor of %s", label_base);
    lz_identity pid = *parent_id;
    size_t base_len = strcmp(label_base, "/") == 0 ? 0 : strlen(label_base);

    for (const char *p = rel;;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t) (slash - p) : strlen(p);
        _cleanup_free_ char *name = lz_xstrndup(p, len);
        _cleanup_free_ char *label = lz_xasprintf("%.*s/%.*s", (int) base_len, label_base,
                                                  (int) ((p - rel) + (ptrdiff_t) len), rel);
        lz_identity cid;
        _cleanup_close_ int cfd = open_owned_dir(parent, name, label, &cid, err);
        if (cfd < 0)
            return -1;
        if (!slash) {
            *ret = (lz_path_plan){
                .ancestor_fd = TAKE_FD(parent),
                .ancestor = pid,
                .suffix = TAKE_PTR(name),
                .label = TAKE_PTR(label),
                .target = cid,
            };
            return 0;
        }
        lz_close(&parent);
        parent = TAKE_FD(cfd);
        pid = cid;
        p = slash + 1;
    }
}

int lz_ensure_owned_root(const char *canonical, lz_path_plan *ret, lz_error **err)
{
    if (!lz_path_is_normalized_abs(canonical) || strcmp(canonical, "/") == 0)
        return lz_error_set(err, EINVAL,
                            "refusing Lazaret directory %s: not a normalized absolute path "
                            "below /",
                            canonical ? canonical : "(null)");

    size_t missing = 0;
    _cleanup_close_ int fd = lz_walk_nofollow(canonical, &missing, err);
    if (fd < 0)
        return -1;

    if (missing == 0) {
        /* The root exists: plan it (a fresh confined open) and check the
         * object the plan recorded, not the one the walk saw. */
        lz_close(&fd);
        _cleanup_(lz_plan_clear) lz_path_plan plan = LZ_PATH_PLAN_INIT;
        if (lz_plan_existing(canonical, &plan, err) < 0)
            return -1;
        if (check_owned(&plan.target, canonical, err) < 0)
            return -1;
        *ret = plan;
        plan = (lz_path_plan) LZ_PATH_PLAN_INIT;
        return 0;
    }

    /* fd is the closest existing ambient ancestor, a directory whose mode and
     * owner are not ours to judge; everything below it is created by us. */
    lz_identity aid;
    if (lz_identity_of(fd, &aid, err) < 0)
        return -1;
    _cleanup_free_ char *base =
        missing == 1 ? lz_xstrdup("/") : lz_xstrndup(canonical, missing - 1);
    return ensure_owned_chain(fd, &aid, base, canonical + missing, ret, err);
}

int lz_ensure_owned_child(const lz_path_plan *root, const char *rel, lz_path_plan *ret,
                          lz_error **err)
{
    if (!root || root->ancestor_fd < 0 || !root->label)
        return lz_error_set(err, EBADF, "cannot create below an empty path plan");
    if (!lz_path_is_normalized_rel(rel))
        return lz_error_set(err, EINVAL,
                            "refusing directory %s below %s: not a normalized relative path",
                            rel ? rel : "(null)", root->label);

    _cleanup_close_ int rfd = lz_plan_open(root, O_PATH | O_DIRECTORY, true, err);
    if (rfd < 0)
        return -1;
    lz_identity rid;
    if (lz_identity_of(rfd, &rid, err) < 0)
        return -1;
    if (check_owned(&rid, root->label, err) < 0)
        return -1;
    return ensure_owned_chain(rfd, &rid, root->label, rel, ret, err);
}

int lz_mkdir_at(int dirfd, const char *name, mode_t mode, lz_error **err)
{
    if (mkdirat(dirfd, name, mode) < 0 && errno != EEXIST)
        return lz_error_set(err, errno, "cannot create directory %s", name);
    return 0;
}

int lz_open_dir_at(int dirfd, const char *name, lz_error **err)
{
    int fd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return lz_error_set(err, errno, "cannot open directory %s", name);
    return fd;
}

int lz_open_dir_confined(int dirfd, const char *rel, int flags, lz_error **err)
{
    return lz_open_confined(dirfd, rel[0] ? rel : ".", flags | O_DIRECTORY, 0, rel[0] ? rel : ".",
                            err);
}

int lz_open_parent_confined(int dirfd, const char *rel, const char **ret_name, lz_error **err)
{
    const char *slash = strrchr(rel, '/');
    *ret_name = slash ? slash + 1 : rel;
    if (!slash)
        return lz_open_confined(dirfd, ".", O_PATH | O_DIRECTORY, 0, ".", err);
    _cleanup_free_ char *parent = lz_xstrndup(rel, (size_t) (slash - rel));
    return lz_open_confined(dirfd, parent, O_PATH | O_DIRECTORY, 0, parent, err);
}

int lz_lstat_confined(int dirfd, const char *rel, struct stat *st)
{
    const char *name;
    int pfd = lz_open_parent_confined(dirfd, rel, &name, NULL);
    if (pfd < 0)
        return -1;
    int r = fstatat(pfd, name, st, AT_SYMLINK_NOFOLLOW);
    int saved = errno;
    close(pfd);
    errno = saved;
    return r;
}

int lz_mkdirs_confined(int dirfd, const char *rel, const char *label, lz_error **err)
{
    _cleanup_close_ int cur = lz_open_confined(dirfd, ".", O_PATH | O_DIRECTORY, 0, label, err);
    if (cur < 0)
        return -1;
    _cleanup_free_ char *copy = lz_xstrdup(rel);
    for (char *part = copy, *next; part && *part; part = next) {
        next = strchr(part, '/');
        if (next)
            *next++ = '\0';
        if (mkdirat(cur, part, 0755) < 0 && errno != EEXIST)
            return lz_error_set(err, errno, "cannot create %s", label);
        int fd = lz_open_confined(cur, part, O_PATH | O_DIRECTORY, 0, label, err);
        if (fd < 0)
            return -1;
        close(cur);
        cur = fd;
    }
    int r = cur;
    cur = -1;
    return r;
}
