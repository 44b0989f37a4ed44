/* SPDX-License-Identifier: Apache-2.0
 *
 * Pinned mounts: every host object the sandbox gets (the image, the
 * workspace, its .git, the Git Sentry's protections, the Domain's copies of
 * git-ignored paths, volumes, the guest binaries) reaches runsc as a bind
 * mount made FROM A DESCRIPTOR, never as a path string runsc would resolve.
 *
 * The caller opens the object confined (openat2 RESOLVE_BENEATH|NO_SYMLINKS|
 * NO_MAGICLINKS|NO_XDEV from a retained root descriptor) and revalidates its
 * type; lz_stage_fd() then clones exactly that mount point object
 * (open_tree(OPEN_TREE_CLONE) of the descriptor, without its submounts),
 * makes the clone nosuid,nodev (and read-only in the kernel when asked:
 * even a compromised gofer cannot write a read-only protection), and
 * attaches it at <generation dir>/stage/<n> in the supervisor's private
 * mount namespace. runsc is handed that path: it lies in the Runtime Root,
 * which only the developer can write, and names a mount of the pinned
 * object whatever happens to the original path afterwards.
 */
#ifndef LAZARET_SUPERVISOR_STAGE_H
#define LAZARET_SUPERVISOR_STAGE_H

#include <stdbool.h>

#include "common/error.h"

typedef struct lz_stage {
    int dir_fd;    /* O_PATH of <generation dir>/stage */
    char *label;   /* its path */
    unsigned next; /* next mount point number */
} lz_stage;

#define LZ_STAGE_INIT                                                                              \
    {                                                                                              \
        .dir_fd = -1                                                                               \
    }

/* Create <gen_label>/stage (gen_fd is the generation directory). */
LZ_MUST_CHECK
int lz_stage_init(lz_stage *st, int gen_fd, const char *gen_label, lz_error **err);

/* Bind the object obj_fd refers to (a directory or a regular file; any
 * open mode, O_PATH included) at a new staging point; *ret_path receives its
 * path (free it). `what` names the object in messages. Refuses other file
 * types, and an object with other mounts below it (EINVAL from the kernel:
 * the sandbox gets one filesystem per bind, never a submount). */
LZ_MUST_CHECK
int lz_stage_fd(lz_stage *st, int obj_fd, bool readonly, const char *what, char **ret_path,
                lz_error **err);

/* Mount, at a new staging point, an overlay of the directory lower_fd
 * (read through, never written) with upper_fd/work_fd (directories of the
 * generation) as its upper and work directories; nosuid,nodev. *ret_path
 * receives its path (free it). */
LZ_MUST_CHECK
int lz_stage_overlay(lz_stage *st, int lower_fd, int upper_fd, int work_fd, const char *what,
                     char **ret_path, lz_error **err);

/* Mount an overlay (userxattr, nosuid, nodev) of the directories
 * lower_fd/upper_fd/work_fd on the directory target_fd, all named by
 * descriptor. -1 with errno on failure. */
int lz_mount_overlay_fds(int lower_fd, int upper_fd, int work_fd, int target_fd);

/* Mount a clone of the object obj_fd refers to (as lz_stage_fd: exactly that
 * mount, nosuid,nodev, read-only in the kernel when asked) over dest_fd, an
 * O_PATH descriptor of a directory or regular file of the same type inside
 * a tree staged earlier. This is how the workspace tree is composed: the
 * Git Sentry's mounts become kernel mounts inside the staged workspace,
 * which runsc receives as ONE bind (docs/git.md "How the copies are
 * mounted": runsc 2022 cannot take more than about 250 binds). */
LZ_MUST_CHECK
int lz_stage_fd_over(int obj_fd, int dest_fd, bool readonly, const char *what, lz_error **err);

void lz_stage_clear(lz_stage *st);

#endif
