/* SPDX-License-Identifier: Apache-2.0
 *
 * Relative path strings: joining, lexical normalisation below a root, and
 * the prefix test. Pure string logic, no file system access: a path string
 * is a label, never an authority (confined.h opens what they name).
 */
#ifndef LAZARET_FS_RELPATH_H
#define LAZARET_FS_RELPATH_H

#include <stdbool.h>

/* "a/b" + "c" = "a/b/c"; rel "" or "." is the top itself, so the result is
 * `name`. Newly allocated. */
char *lz_rel_join(const char *rel, const char *name);

/* Lexically normalise the part of the absolute `path` below the absolute
 * `root`: "." and empty components dropped, ".." taken back. Newly
 * allocated; NULL when path is not below root (root itself included) or a
 * ".." climbs out of it. No symlink is resolved. root "" treats every
 * absolute path as below it (the result is then the normalised path without
 * its leading '/', NULL for "/" itself). */
char *lz_lexical_rel(const char *root, const char *path);

/* Is `path` equal to `root`, or does it begin with `root` followed by '/'?
 * Plain string comparison: neither needs to be absolute or normalized (unlike
 * lz_path_is_strict_descendant, for which "/" is an ancestor of everything,
 * here root "/" holds only "/" and "//…"). */
bool lz_path_within(const char *path, const char *root);

#endif
