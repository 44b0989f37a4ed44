/* SPDX-License-Identifier: Apache-2.0
 *
 * Resource limits of a Domain (docs/limits.md, issue 9 item 7) where no
 * cgroup can be had: rootless Lazaret on a cgroup v1 host runs runsc with
 * --ignore-cgroups, so the bounds are rlimits.
 *
 *  - Memory: every byte of guest memory — process memory, page cache and the
 *    in-memory root file system of --overlay2=root:memory — lives in the
 *    sentry's one memory file, a memfd it grows with ftruncate. RLIMIT_FSIZE
 *    bounds that size (inode_newsize_ok), so the supervisor lowers its own
 *    soft and hard RLIMIT_FSIZE to the Domain memory bound before any runsc
 *    runs; runsc, its sandbox and its gofer inherit it, and nothing in a
 *    user namespace can raise a hard limit again.
 *  - Processes: RLIMIT_NPROC in the OCI process (oci/spec.c), which gVisor
 *    enforces itself per sandbox uid for tasks without CAP_SYS_ADMIN or
 *    CAP_SYS_RESOURCE (the sandbox has neither).
 */
#ifndef LAZARET_SUPERVISOR_LIMITS_H
#define LAZARET_SUPERVISOR_LIMITS_H

#include <stdint.h>

#include "common/error.h"

/* The Domain memory bound when nothing lowers it: half of the host's
 * physical memory, so that one Domain alone cannot exhaust the host. */
uint64_t lz_limit_memory_default(void);

/* The bound in force for a Domain started by this process: the lower of
 * the default and the RLIMIT_FSIZE soft limit Lazaret was started with
 * (`ulimit -f` is the per-Domain knob). */
uint64_t lz_limit_memory_effective(void);

/* Lower this process's RLIMIT_FSIZE (soft and hard) to
 * lz_limit_memory_effective(). Returns 0, or -1 with `err` set. */
int lz_limits_apply(uint64_t *ret_memory, lz_error **err);

#endif
