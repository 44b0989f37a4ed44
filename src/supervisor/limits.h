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
 *  - Processes, inside: RLIMIT_NPROC in the OCI process (oci/spec.c), which
 *    gVisor enforces itself per sandbox uid for tasks without CAP_SYS_ADMIN
 *    or CAP_SYS_RESOURCE (the sandbox has neither). Per uid only: the
 *    sandbox's root can setuid to many uids.
 *  - Host tasks, whatever the guest uids: with the ptrace platform every
 *    guest process costs host tasks (a stub process, and one stub thread per
 *    sentry thread that ran it). The supervisor lowers its own soft and
 *    hard RLIMIT_NPROC to the Domain task bound before any runsc runs. Every
 *    host process of the Domain (supervisor, runsc, gofer, sandbox, stubs,
 *    slirp4netns) runs as uid 0 of the supervisor's user namespace, and the
 *    kernel (since 5.14, ucounts) counts RLIMIT_NPROC per user *and user
 *    namespace*, threads included: so the bound is the number of host tasks
 *    of this one Domain, and no guest uid changes a host uid.
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

/* The Domain host task bound when nothing lowers it: an eighth
 * (LZ_LIMIT_TASKS_FRACTION) of the smaller of kernel.pid_max and
 * kernel.threads-max, both host-wide, so that one Domain alone leaves the
 * host most of its PID space; never below LZ_LIMIT_TASKS_MIN. */
#define LZ_LIMIT_TASKS_FRACTION 8
#define LZ_LIMIT_TASKS_MIN 1024
#define LZ_LIMIT_TASKS_FALLBACK 4096 /* neither sysctl readable */
uint64_t lz_limit_tasks_default(void);

/* The task bound in force for a Domain started by this process: the lower
 * of the default and the RLIMIT_NPROC soft limit Lazaret was started with
 * (`ulimit -u`). */
uint64_t lz_limit_tasks_effective(void);

/* Lower this process's RLIMIT_FSIZE (soft and hard) to `memory` and its
 * RLIMIT_NPROC (soft and hard) to `tasks`, the effective bounds above.
 * Those are computed before the supervisor enters its own pid namespace:
 * since Linux 6.14 kernel.pid_max is per pid namespace, and a new one reads
 * 4194304 while its pids still come from every ancestor's space. Returns 0,
 * or -1 with `err` set. */
LZ_MUST_CHECK
int lz_limits_apply(uint64_t memory, uint64_t tasks, lz_error **err);

#endif
