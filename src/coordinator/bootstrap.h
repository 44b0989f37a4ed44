/* SPDX-License-Identifier: Apache-2.0
 *
 * The CLI side of a Domain: connect to its coordinator, or become the one
 * process allowed to start it.
 *
 *   1. connect to <runtime domain>/coordinator.sock; done if it answers;
 *   2. otherwise take bootstrap.lock (blocking: bootstrappers queue) and
 *      try again;
 *   3. otherwise take the Domain lock with a non-blocking flock. Held by
 *      someone else means a coordinator is starting or tearing down: drop
 *      bootstrap.lock, wait a little, start over;
 *   4. we hold the Domain lock: recover whatever a dead previous generation
 *      left (recovery.h), prepare the image (progress on our terminal), bind
 *      the socket, fork the coordinator (which inherits the lock), and start
 *      over at 1 — now the socket answers.
 *
 * Two CLIs starting at the same instant end up in one coordinator: only one
 * can hold the Domain lock, and the other finds the socket bound before the
 * lock holder released bootstrap.lock.
 */
#ifndef LAZARET_COORDINATOR_BOOTSTRAP_H
#define LAZARET_COORDINATOR_BOOTSTRAP_H

#include "common/error.h"
#include "config/resolve.h"
#include "ns/userns.h"
#include "oci/image.h"

/* Returns a connected session socket (SOCK_SEQPACKET, O_CLOEXEC). */
LZ_MUST_CHECK
int lz_domain_connect(const lz_resolved_config *cfg, lz_progress_fn progress, void *userdata,
                      lz_error **err);

/* Connect to the coordinator of the Domain runtime directory dirfd when one
 * serves it (its socket, peer uid checked); never starts one. */
LZ_MUST_CHECK
int lz_domain_connect_running(int dirfd, lz_error **err);

/* Recover the Domain's previous generations (caller holds the Domain lock):
 * kill only processes whose recorded identity still matches, remove the
 * runtime files, mark everything released. Never touches what it cannot
 * prove is its own. */
LZ_MUST_CHECK
int lz_domain_recover(const lz_resolved_config *cfg, int runtime_dir_fd, lz_error **err);

/* The sandbox user a Domain's files were made for (<Domain Root>/
 * LZ_SANDBOX_USER_RECORD, docs/runtime.md "The agent's user"): 1 and
 * *ret when recorded, 0 when there is no record, -1 with errno (EINVAL:
 * damaged) otherwise. */
int lz_sandbox_user_read(int domain_root_fd, lz_idmap *ret);

#endif
