/* SPDX-License-Identifier: Apache-2.0
 *
 * The State Anchor: the Domain-scoped persistent writable layer merged over
 * the profile's persistent directories (persistent_dirs) of the image, so
 * that what the agent installs there survives the sandbox (glossary: State
 * Anchor; FR-2: every session of a Domain shares it).
 *
 * One overlay per persistent directory, mounted in the supervisor's mount
 * namespace (it dies with it):
 *
 *   lower  the image's directory, resolved inside the image root
 *          (RESOLVE_IN_ROOT: an image symlink cannot point outside it), or
 *          an empty directory when the image has none;
 *   upper  <Domain Root>/state/<escaped path>/upper  (kept across generations;
 *          the layout and the escaping: store/domain_root.h)
 *   work   <Domain Root>/state/<escaped path>/work
 *   mount  <generation dir>/persist/<i>, bound into the sandbox at the
 *          directory's path by the runsc spec.
 *
 * Every layer is given to the kernel as /proc/self/fd/N of a descriptor
 * opened one component at a time without following symlinks: the uppers
 * are sandbox-written and untrusted on every later use (docs/runtime.md,
 * "State"). The overlay is nosuid,nodev.
 */
#ifndef LAZARET_SUPERVISOR_STATE_ANCHOR_H
#define LAZARET_SUPERVISOR_STATE_ANCHOR_H

#include <stddef.h>

#include "common/error.h"
#include "config/resolve.h"
#include "ns/userns.h"

typedef struct lz_state_anchor {
    char **mounts; /* host mount point of each overlay, in persistent_dirs order */
    size_t n_mounts;
} lz_state_anchor;

/* Mount the overlays of cfg->persistent_dirs (none: nothing to do).
 * rootfs_label: the prepared image's root; user: the user the sandbox
 * runs as (NULL: root), owner of a directory the image lacks;
 * gen_fd/generation_dir: the generation directory. On failure the
 * overlays mounted so far stay recorded in *anchor, for
 * lz_state_anchor_unmount. */
LZ_MUST_CHECK
int lz_state_anchor_mount(const lz_resolved_config *cfg, const char *rootfs_label,
                          const lz_idmap *user, int gen_fd, const char *generation_dir,
                          lz_state_anchor *anchor, lz_error **err);

/* Detach every overlay and forget them. */
void lz_state_anchor_unmount(lz_state_anchor *anchor);

#endif
