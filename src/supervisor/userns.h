/* SPDX-License-Identifier: Apache-2.0
 *
 * The Domain's user namespace: the invoking user mapped to root, and the
 * user's subordinate uid/gid range mapped to 1..65536, written by the setuid
 * newuidmap/newgidmap helpers (runsc needs the subordinate range: the
 * sandbox runs as a subordinate uid, docs/runtime.md "Subordinate ids").
 * Only the Runtime Supervisor lives in it; nothing in it has any capability
 * over the host.
 */
#ifndef LAZARET_SUPERVISOR_USERNS_H
#define LAZARET_SUPERVISOR_USERNS_H

#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

/* Subordinate ids a Domain maps, to 1..65536 inside: the uid/gid space of a
 * normal Linux image (0..65535, nobody = 65534). */
#define LZ_SUBID_COUNT 65536u
/* useradd's default SUB_UID_MIN: where a suggested new range starts. */
#define LZ_SUBID_SUGGEST_FIRST 100000ull

typedef enum lz_subid_kind { LZ_SUBID_UID, LZ_SUBID_GID } lz_subid_kind;

typedef struct lz_subid_range {
    uint32_t start;            /* first subordinate id mapped */
    uint32_t count;            /* ids mapped: always LZ_SUBID_COUNT */
    unsigned long range_count; /* size of the delegated range it starts */
} lz_subid_range;

/* The one source of subordinate ids for `lazaret run` and `lazaret doctor`
 * (docs/runtime.md "Subordinate ids"): the user's ranges as shadow's
 * libsubid reads them (/etc/subuid or /etc/subgid, or the 'subid:' source of
 * /etc/nsswitch.conf, the same code newuidmap/newgidmap use), owner matched
 * by login name or decimal uid. The first range that has at least
 * LZ_SUBID_COUNT ids, does not start at 0, stays below the largest 32-bit id
 * and does not contain the user's own uid (gid) is used. On failure the
 * hint is the usermod command that adds a range colliding with no user's. */
LZ_MUST_CHECK
int lz_subid_lookup(lz_subid_kind kind, uid_t uid, gid_t gid, lz_subid_range *ret,
                    lz_error **err);

/* Fork a child that unshares a new user namespace, waits while the parent
 * writes its uid/gid maps with newuidmap/newgidmap, becomes root in it and
 * calls fn(arg); the child exits with fn's return value. The child has
 * PR_SET_PDEATHSIG(SIGKILL): it never outlives the caller. Returns the
 * child's pid. */
LZ_MUST_CHECK
int lz_userns_spawn(int (*fn)(void *arg), void *arg, pid_t *ret_pid, lz_error **err);

#endif
