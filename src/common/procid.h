/* SPDX-License-Identifier: Apache-2.0
 *
 * Host process identity (schema "HostProcessIdentity"): a pid alone is not
 * an identity — pids are reused. Lazaret records (boot id, pid, start time
 * in clock ticks since boot) and, before it signals a recorded process,
 * opens a pidfd and proves that the pid still names the same process.
 * It never adopts or signals a process it cannot prove is its own.
 */
#ifndef LAZARET_COMMON_PROCID_H
#define LAZARET_COMMON_PROCID_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

typedef struct lz_process_identity {
    char boot_id[37]; /* /proc/sys/kernel/random/boot_id */
    pid_t pid;
    uint64_t start_time_ticks; /* field 22 of /proc/<pid>/stat */
    /* PidfsProcessAuthorityV1: on kernels with pidfs (6.9+) a pidfd's inode
     * number is unique for the life of the boot; 0 when unavailable. */
    uint64_t pidfs_dev;
    uint64_t pidfs_ino;
} lz_process_identity;

/* The identity of process `pid` now. */
LZ_MUST_CHECK
int lz_process_identity_of(pid_t pid, lz_process_identity *ret, lz_error **err);

/* This boot's id. */
LZ_MUST_CHECK
int lz_boot_id(char out[37], lz_error **err);

typedef enum lz_process_match {
    LZ_PROCESS_GONE,      /* no such process, or another boot */
    LZ_PROCESS_SAME,      /* the recorded process is alive; *ret_pidfd holds it */
    LZ_PROCESS_DIFFERENT, /* the pid now names another process */
} lz_process_match;

/* Open a pidfd for the recorded process and verify (after opening, so that
 * the pid cannot be recycled in between) that it is still the same process.
 * On LZ_PROCESS_SAME stores the pidfd (O_CLOEXEC) in *ret_pidfd. */
LZ_MUST_CHECK
int lz_process_verify(const lz_process_identity *id, lz_process_match *ret_match, int *ret_pidfd,
                      lz_error **err);

/* SIGKILL the recorded process if and only if it is provably the same, and
 * wait (up to timeout_ms) until it is gone. Returns 0 when it is gone or was
 * never there, 1 when the pid belongs to a stranger (left alone), -1 on
 * error. */
LZ_MUST_CHECK
int lz_process_kill_verified(const lz_process_identity *id, int timeout_ms, lz_error **err);

#endif
