/* SPDX-License-Identifier: Apache-2.0
 *
 * Ownership give-back (docs/runtime.md "Ownership give-back"): what a
 * sandbox left in the workspace and in read-write volumes owned by one of
 * the developer's subordinate uids or gids is given back to the developer
 * (uid and gid), so that nothing there is beyond the developer's chown,
 * chmod or rm. Run once no sandbox process is left (at teardown, at
 * recovery, and by `lazaret state fix-ownership`), from inside a user
 * namespace where the developer is root over the subordinate ids
 * (lz_userns_call_shifted).
 *
 * Everything below the top was written by the sandbox: the walk goes by
 * descriptors only (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV, O_NOFOLLOW), changes the object
 * it opened and checked (fchownat AT_EMPTY_PATH on that descriptor, a
 * symlink as the link itself), never enters another mount, and is bounded
 * in depth. Setuid and setgid bits of a non-directory are cleared before
 * it changes hands. Only the subordinate ids change: the developer's own
 * files and files of every other id (root's, another user's) stay as
 * they are.
 */
#ifndef LAZARET_SUPERVISOR_GIVEBACK_H
#define LAZARET_SUPERVISOR_GIVEBACK_H

#include <stdint.h>

#include "common/error.h"
#include "config/resolve.h"

/* Directories deeper than this below a top are not entered (their own
 * ownership is still given back); LZ_GIVEBACK_MAX_DEPTH bounds the
 * descriptors the walk holds (two per level). */
#define LZ_GIVEBACK_MAX_DEPTH 1024

typedef struct lz_giveback_stats {
    uint64_t entries;    /* objects looked at, the top included */
    uint64_t given;      /* given back to the developer */
    uint64_t stripped;   /* of those, setuid/setgid bits cleared first */
    uint64_t left;       /* subordinate-owned, could not be given back */
    uint64_t mounts;     /* mount points below the top, not entered */
    uint64_t deep;       /* directories below LZ_GIVEBACK_MAX_DEPTH, not entered */
    uint64_t unreadable; /* directories of other ids that could not be read */
    int left_errno;      /* why the first one was left */
    char left_path[256]; /* the first one left, relative to the top */
} lz_giveback_stats;

/* One tree: fd is an O_PATH (or readable) descriptor of a directory or a
 * file, opened confined by the caller; label names it in the report. */
typedef struct lz_giveback_tree {
    int fd;
    const char *label;
    lz_giveback_stats stats;
} lz_giveback_tree;

/* Give back every tree in one user-namespace helper. Fills each tree's
 * stats. -1 with *err when the helper could not run at all (no
 * subordinate ids, newuidmap failed); entries that could not be given
 * back are not an error here: they are in the stats. */
LZ_MUST_CHECK
int lz_giveback_trees(lz_giveback_tree *trees, size_t n, lz_error **err);

/* One report line for a tree after lz_giveback_trees (label, counts, the
 * first entry left and why; escaped), or NULL when there is nothing to say. */
char *lz_giveback_tree_line(const lz_giveback_tree *t);

/* The Domain's trees: the workspace and every read-write volume of cfg,
 * opened through their plans. Returns 0 with *ret_report (newly allocated,
 * one line per tree that had anything to say, names escaped; NULL when
 * there was nothing: no subordinate-owned entry, no mount point, nothing
 * left) and *ret_incomplete (an entry left with a subordinate id, a
 * directory below the depth bound, or a volume that could not be opened);
 * -1 with *err when nothing could be done. */
LZ_MUST_CHECK
int lz_giveback_domain(const lz_resolved_config *cfg, char **ret_report, bool *ret_incomplete,
                       lz_error **err);

#endif
