/* SPDX-License-Identifier: Apache-2.0
 *
 * The Domain's user namespace: the invoking user mapped to root, and the
 * user's subordinate uid/gid range mapped to 1..N, written by the setuid
 * newuidmap/newgidmap helpers (runsc needs the subordinate range: the
 * sandbox runs as a subordinate uid, PLATFORM.md). Only the Runtime
 * Supervisor lives in it; nothing in it has any capability over the host.
 */
#ifndef LAZARET_SUPERVISOR_USERNS_H
#define LAZARET_SUPERVISOR_USERNS_H

#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

typedef struct lz_subid_range {
    uint32_t start;
    uint32_t count;
} lz_subid_range;

/* The first range of at least `min_count` ids for the invoking user (by
 * name or uid) in /etc/subuid or /etc/subgid. */
int lz_subid_lookup(const char *file, uid_t uid, uint32_t min_count, lz_subid_range *ret,
                    lz_error **err);

/* Fork a child that unshares a new user namespace, waits while the parent
 * writes its uid/gid maps with newuidmap/newgidmap, becomes root in it and
 * calls fn(arg); the child exits with fn's return value. The child has
 * PR_SET_PDEATHSIG(SIGKILL): it never outlives the caller. Returns the
 * child's pid. */
int lz_userns_spawn(int (*fn)(void *arg), void *arg, pid_t *ret_pid, lz_error **err);

#endif
