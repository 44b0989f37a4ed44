/* SPDX-License-Identifier: Apache-2.0
 *
 * The Domain's user namespace: the invoking user mapped to root, and the
 * user's subordinate uid/gid range mapped to 1..65536, written by the setuid
 * newuidmap/newgidmap helpers (runsc needs the subordinate range: the
 * sandbox runs as a subordinate uid, docs/runtime.md "Subordinate ids").
 * When the image names a non-root user A, the map is "keep-id": 0 and A
 * swap places, so that A is the invoking user (docs/runtime.md "The agent's
 * user"). Only the Runtime Supervisor (and short-lived helpers: a keep-id
 * image unpack, a removal) lives in one; nothing in it has any capability
 * over the host.
 */
#ifndef LAZARET_NS_USERNS_H
#define LAZARET_NS_USERNS_H

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
int lz_subid_lookup(lz_subid_kind kind, uid_t uid, gid_t gid, lz_subid_range *ret, lz_error **err);

/* The sandbox user that is the invoking user on the host: uid/gid 0 (the
 * default map) or the image's non-root user (keep-id). Ids above
 * LZ_SUBID_COUNT are refused: the map has 0..LZ_SUBID_COUNT. */
typedef struct lz_idmap {
    uint32_t uid, gid;
} lz_idmap;

LZ_MUST_CHECK
int lz_idmap_check(const lz_idmap *map, lz_error **err);

/* Fork a child that unshares a new user namespace, waits while the parent
 * writes its uid/gid maps with newuidmap/newgidmap, becomes root in it and
 * calls fn(arg); the child exits with fn's return value. The child has
 * PR_SET_PDEATHSIG(SIGKILL): it never outlives the caller. Returns the
 * child's pid. */
LZ_MUST_CHECK
int lz_userns_spawn(const lz_idmap *map, int (*fn)(void *arg), void *arg, pid_t *ret_pid,
                    lz_error **err);

/* Run fn(arg, err) in a child made by lz_userns_spawn (map NULL: the
 * default) and wait for it; fn's error (message and hint) comes back as
 * the caller's. */
LZ_MUST_CHECK
int lz_userns_call(const lz_idmap *map, int (*fn)(void *arg, lz_error **err), void *arg,
                   lz_error **err);

/* Inside the namespace of lz_userns_call_shifted, the subordinate ids
 * are LZ_USERNS_SHIFTED_BASE..+65535 instead of 1..65536. */
#define LZ_USERNS_SHIFTED_BASE 1000000u

/* lz_userns_call(NULL, ...) with the invoking user at 0 and the subordinate
 * range at LZ_USERNS_SHIFTED_BASE..: there an owner the map does not hold
 * shows as the kernel's overflow id (65534), which is then never one of the
 * subordinate ids, as it is in the Domain's own map. For code that must
 * tell the subordinate ids from every other id by what stat says
 * (the ownership give-back, supervisor/giveback.h). Refused when the
 * overflow ids were set inside that range. */
LZ_MUST_CHECK
int lz_userns_call_shifted(int (*fn)(void *arg, lz_error **err), void *arg, lz_error **err);

/* lz_remove_tree_at(dirfd, name), and when that fails for want of
 * permission (what a sandbox user other than the invoking user created
 * belongs to a subordinate id on the host), again from inside a user
 * namespace mapping the subordinate ids, where the user is root over
 * them. Both passes walk descriptors: no symlink followed, no mount
 * crossed; ids outside the map stay and fail the removal. */
LZ_MUST_CHECK
int lz_remove_tree_mapped(int dirfd, const char *name, const char *label, lz_error **err);

#endif
