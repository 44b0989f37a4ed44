/* SPDX-License-Identifier: Apache-2.0
 *
 * Descriptor-based path authority (spec 3.2, "ConfinedPathPlan").
 *
 * A path string is a label, never an authority. Every object Lazaret trusts
 * is reached through a retained ancestor directory descriptor and a
 * normalized relative suffix, opened with openat2() and
 *   RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV
 * and then revalidated (type, identity). Every fd is O_CLOEXEC from birth.
 */
#ifndef LAZARET_FS_CONFINED_H
#define LAZARET_FS_CONFINED_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "common/error.h"

/* The resolution flags the spec asks for on every confined open. */
#define LZ_RESOLVE_CONFINED_FLAGS                                                                  \
    0x0fULL /* BENEATH|NO_SYMLINKS|NO_MAGICLINKS|NO_XDEV,                                          \
               checked against <linux/openat2.h> in confined.c */

/* Filesystem identity of an open object. */
typedef struct lz_identity {
    dev_t dev;
    ino_t ino;
    uint64_t mnt_id; /* statx STATX_MNT_ID */
    mode_t mode;     /* type and permission bits */
    uid_t uid;
    gid_t gid;
    nlink_t nlink;
    off_t size;
    struct timespec ctime;
} lz_identity;

/* Read the identity of fd (any kind, O_PATH included). */
LZ_MUST_CHECK
int lz_identity_of(int fd, lz_identity *ret, lz_error **err);

/* Same object (dev, ino) and same mount? */
bool lz_identity_same_object(const lz_identity *a, const lz_identity *b);

/* openat2(dirfd, relpath, flags|O_CLOEXEC, mode) with the confined resolve
 * flags. relpath must be relative (may be "." to reopen dirfd itself); an
 * absolute or empty relpath is refused (EINVAL) before any syscall. mode is
 * used only with O_CREAT/O_TMPFILE. A ".." that would leave dirfd, or a mount
 * crossing, fails with EXDEV; a symlink or magic link anywhere fails with
 * ELOOP — including a trailing symlink opened with O_PATH|O_NOFOLLOW, which
 * the kernel would hand out and this function refuses.
 * Returns the fd, or -1 with *err naming `label` (the human path). */
LZ_MUST_CHECK
int lz_open_confined(int dirfd, const char *relpath, int flags, mode_t mode, const char *label,
                     lz_error **err);

/* lz_open_confined of the directory `rel` below dirfd ("" or "." is dirfd
 * itself), O_DIRECTORY added; the label is rel. */
LZ_MUST_CHECK
int lz_open_dir_confined(int dirfd, const char *rel, int flags, lz_error **err);

/* O_PATH of the parent directory of `rel` below dirfd (dirfd itself for a
 * single component), opened confined; *ret_name receives the last
 * component (a pointer into rel). */
LZ_MUST_CHECK
int lz_open_parent_confined(int dirfd, const char *rel, const char **ret_name, lz_error **err);

/* lstat of `rel` below dirfd, every component before the last resolved
 * confined (the last one is not followed). Returns 0, or -1 with errno
 * (ENOENT; ELOOP when a parent is a symlink; EXDEV across a mount). */
int lz_lstat_confined(int dirfd, const char *rel, struct stat *st);

/* Create every missing directory of `rel` below dirfd (mode 0755 before the
 * umask), one component at a time, each opened confined before the next: a
 * symlink planted anywhere on the way is refused, never followed. Returns
 * an O_PATH descriptor of the result, or -1 with *err naming `label`. */
LZ_MUST_CHECK
int lz_mkdirs_confined(int dirfd, const char *rel, const char *label, lz_error **err);

/* Is path absolute and normalized: "/" or "/c1/.../cn" with no empty, ".",
 * or ".." component and no trailing slash? */
bool lz_path_is_normalized_abs(const char *path);
/* Is path a normalized relative path "c1/.../cn" (n >= 1, same rules)? */
bool lz_path_is_normalized_rel(const char *path);

/* Walk an absolute, normalized path from "/" one component at a time with
 * O_PATH|O_NOFOLLOW, refusing any symlink or magic link on the way (ELOOP,
 * message names the offending prefix; mount crossings between ambient
 * ancestors are allowed: they are how a normal system is laid out). Every
 * intermediate component must be a directory (ENOTDIR). A path that is not
 * normalized is refused (EINVAL). Returns an O_PATH fd of the final
 * component (never a symlink).
 * If ret_missing is non-NULL and a component does not exist, returns the fd
 * of the deepest existing ancestor and stores in *ret_missing the index (in
 * bytes, into path) where the first missing component starts; when the whole
 * path exists *ret_missing is set to 0. */
LZ_MUST_CHECK
int lz_walk_nofollow(const char *abs_path, size_t *ret_missing, lz_error **err);

/* Canonicalize an absolute path: resolve symlinks (once) in the longest
 * existing prefix with realpath(3), then append the not-yet-existing rest,
 * normalized (empty and "." components dropped). Refused: a relative path
 * (EINVAL), ".." in the missing rest (EINVAL), a dangling symlink at the
 * boundary (ELOOP), any realpath error other than ENOENT.
 * Returns a newly allocated path. */
char *lz_canonicalize(const char *abs_path, lz_error **err);

/* Read the canonical absolute pathname of an open fd (via /proc/self/fd).
 * Refuses (EINVAL) a target that is not an absolute path (pipes, sockets,
 * anonymous inodes). The kernel appends " (deleted)" for an unlinked object;
 * this is returned as is. Label only: never reopen it as an authority. */
char *lz_fd_path(int fd, lz_error **err);

/* Label ancestry: true when a == b, or one is an ancestor directory of the
 * other, compared component by component (so "/a/b" does not contain "/a/bc";
 * "/" is an ancestor of every absolute path). Pure string logic: both inputs
 * must be normalized absolute paths. */
bool lz_path_overlaps(const char *a, const char *b);
/* True when child is a strict descendant of parent (component-wise). */
bool lz_path_is_strict_descendant(const char *child, const char *parent);

/* A ConfinedPathPlan: a retained ancestor directory and a relative suffix. */
typedef struct lz_path_plan {
    int ancestor_fd;      /* O_PATH|O_DIRECTORY|O_CLOEXEC; -EBADF when empty */
    lz_identity ancestor; /* identity recorded when the plan was made */
    char *suffix;         /* normalized relative path below the ancestor */
    char *label;          /* canonical absolute path: diagnostics and digests only */
    lz_identity target;   /* identity of the target when the plan was made */
} lz_path_plan;

#define LZ_PATH_PLAN_INIT                                                                          \
    {                                                                                              \
        .ancestor_fd = -EBADF                                                                      \
    }

/* Build a plan for an existing object at canonical absolute path `canonical`
 * (normalized, not "/"): the ancestor is its parent directory (reached with
 * lz_walk_nofollow), the suffix its last component. The target is opened once
 * through the plan (O_PATH, confined: a symlink target is refused) and its
 * identity recorded in ret->target.
 * Exception: when the target is a directory that is the root of another mount
 * than its parent's (a bind-mounted workspace, a tmpfs runtime dir), the
 * confined open from the parent cannot cross into it; the plan then retains
 * the target directory itself as the ancestor with suffix ".". A
 * non-directory mount point is refused (EXDEV). */
LZ_MUST_CHECK
int lz_plan_existing(const char *canonical, lz_path_plan *ret, lz_error **err);

/* Reopen the plan's target with the confined flags (O_CLOEXEC added), check
 * that the ancestor still has its recorded identity, and that the target is
 * the same object as recorded in plan->target (when expect_same is true).
 * Returns the new fd.
 * Ancestor revalidation is twofold: the retained fd must still have the
 * recorded dev/ino/mnt_id, and the ancestor's label (the label minus the
 * suffix) is walked again with lz_walk_nofollow and must reach that same
 * object: an ancestor renamed away, replaced, or turned into a symlink is
 * refused even though the retained fd still works. The target must keep its
 * recorded file type even when expect_same is false. Identity changes fail
 * with ESTALE. O_CREAT and O_TMPFILE are refused (EINVAL): a plan names an
 * existing object; create through lz_open_confined on the ancestor. */
LZ_MUST_CHECK
int lz_plan_open(const lz_path_plan *plan, int flags, bool expect_same, lz_error **err);

/* After entering a new mount namespace every mount has a new id, and the
 * descriptors retained before still point into the old namespace. Re-walk
 * the plan in the current namespace, require the same ancestor and target
 * objects (device and inode), and adopt the new descriptor and mount ids. */
LZ_MUST_CHECK
int lz_plan_rebase(lz_path_plan *plan, lz_error **err);

/* Release the plan's descriptor and strings; leaves an empty plan. */
void lz_plan_clear(lz_path_plan *plan);

/* Lazaret-owned roots (spec 3.2). Ensure that the directory `canonical`
 * exists and is Lazaret-owned: when it exists it must be a directory owned by
 * the invoking user (getuid()) with mode exactly 0700; otherwise every missing
 * component below the closest existing ambient ancestor is created one at a
 * time with mode 0700, without following symlinks or crossing mounts,
 * reopened, and checked the same way (a mode narrowed by the umask is set to
 * exactly 0700 on components this call created; existing ones are never
 * chmod-ed). Refusals: ENOTDIR (not a directory), EPERM (owner or mode), ELOOP
 * (symlink), EXDEV (mount). The hint is generic ("chmod 0700 '/x'", "remove
 * it or choose another location"); a caller that knows which setting chose
 * the path may replace it with lz_error_hint(). Components created before a
 * failure are left in place. On success fills *ret with a plan to the root:
 * ancestor = the root's parent, suffix = its last component. */
LZ_MUST_CHECK
int lz_ensure_owned_root(const char *canonical, lz_path_plan *ret, lz_error **err);

/* Ensure `rel` (a normalized relative path of one or more components) exists
 * beneath the Lazaret-owned directory `root` as Lazaret-owned directories
 * (existing components are checked, missing ones created), and fill *ret with
 * a plan to the result (ancestor = the result's parent, label =
 * root->label + "/" + rel). The root is first revalidated with lz_plan_open
 * (expect_same) and must still be Lazaret-owned. */
LZ_MUST_CHECK
int lz_ensure_owned_child(const lz_path_plan *root, const char *rel, lz_path_plan *ret,
                          lz_error **err);

/* One component below dirfd (name has no '/'): create directory `name`
 * with mode unless it exists (an existing symlink or file is not checked
 * here: open it with lz_open_dir_at, which refuses both). */
LZ_MUST_CHECK
int lz_mkdir_at(int dirfd, const char *name, mode_t mode, lz_error **err);

/* O_PATH of the directory `name` (one component) below dirfd, following no
 * symlink. Returns the fd or -1 with *err. */
LZ_MUST_CHECK
int lz_open_dir_at(int dirfd, const char *name, lz_error **err);

#endif
