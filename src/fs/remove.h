/* SPDX-License-Identifier: Apache-2.0
 *
 * Removing a Lazaret-owned tree (a generation's runtime directory, an
 * abandoned temporary directory) through descriptors only: never follows a
 * symlink, never crosses a mount, never leaves the directory it was given.
 */
#ifndef LAZARET_FS_REMOVE_H
#define LAZARET_FS_REMOVE_H

#include "common/error.h"

/* Remove `name` (a single component) beneath the directory dirfd,
 * recursively. A missing entry is success. `label` names dirfd in errors. */
LZ_MUST_CHECK
int lz_remove_tree_at(int dirfd, const char *name, const char *label, lz_error **err);

#endif
