/* SPDX-License-Identifier: Apache-2.0
 *
 * The checks an auto-approved executable passes, at configuration load and
 * again immediately before every approved execution (spec 3.2, schema
 * "auto-approval rule"): a regular file with exactly one hard link, owned
 * by root or the invoking user, no group or other write permission, and
 * executable by the invoking user. Requiring one link refuses hardlinked
 * package layouts (Nix-style) on purpose in v1.
 */
#ifndef LAZARET_FS_EXECUTABLE_H
#define LAZARET_FS_EXECUTABLE_H

#include "common/error.h"
#include "fs/confined.h"

/* Judge the object open at fd (any open mode, O_PATH included) whose
 * identity is *id (lz_identity_of(fd)). Returns NULL when it passes, else a
 * short reason ("has more than one hard link"); *ret_fix then receives a
 * newly allocated fix for the user naming `label`. */
const char *lz_executable_problem(int fd, const lz_identity *id, const char *label, char **ret_fix);

/* Reopen the executable of a rule for running it: through its plan (the
 * ancestor revalidated, no symlink followed), the same object as when the
 * configuration was loaded (ESTALE otherwise), and lz_executable_problem()
 * again on the object as it is now. Returns an O_PATH descriptor to execute
 * with execveat(fd, "", …, AT_EMPTY_PATH) and its identity in *ret_id, or
 * -1 with *err (nothing may run then). */
LZ_MUST_CHECK
int lz_executable_pin(const lz_path_plan *plan, lz_identity *ret_id, lz_error **err);

#endif
