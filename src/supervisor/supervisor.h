/* SPDX-License-Identifier: Apache-2.0
 *
 * The Runtime Supervisor: the one long-lived process that holds the
 * Domain's user namespace and runs every runsc command (docs/platform.md
 * "runsc as an unprivileged user": runsc commands for a container must all
 * come from the user-namespace instance that created it).
 *
 * Process shape:
 *
 *   coordinator ── fork ── outer (new user namespace, mapped by newuidmap;
 *                            unshares a mount and a pid namespace)
 *                             └── fork ── supervisor = pid 1 of the new pid
 *                                          namespace; runsc, its sandbox and
 *                                          gofer processes are descendants
 *
 * Both have PR_SET_PDEATHSIG(SIGKILL). When the supervisor (pid 1) dies the
 * kernel kills every process of its pid namespace, and its mounts go with
 * its mount namespace: killing it, or the coordinator, can leak neither a
 * runsc process nor a mount (FR-7).
 *
 * It performs only the operations of the supervisor channel
 * (protocol/messages.h), admitted through the protocol table
 * (protocol/table.h): start the generation's sandbox, exec a session
 * command in it, stop it. Every host path it uses comes from the resolved
 * configuration it inherited at fork, never from a message.
 */
#ifndef LAZARET_SUPERVISOR_SUPERVISOR_H
#define LAZARET_SUPERVISOR_SUPERVISOR_H

#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "config/resolve.h"
#include "oci/image.h"
#include "oci/spec.h"
#include "protocol/table.h"

typedef struct lz_supervisor_config {
    const lz_resolved_config *cfg;
    const lz_prepared_image *image;
    int64_t generation;
    const char *generation_dir;                 /* <runtime domain>/gen-<n>, exists, 0700 */
    const char *container_id;                   /* runsc container id */
    const char *runsc;                          /* absolute path of runsc */
    const char *guest_bin_dir;                  /* host dir with lazaret-exec */
    const char *guest_lib_dir;                  /* host dir with lazaret-statx-fix.so */
    const char *log_path;                       /* runsc log file, or NULL */
    const lz_workspace_mount *workspace_mounts; /* Git Sentry mounts inside /workspace */
    size_t n_workspace_mounts;
    int denial_logs_fd; /* <Domain Root>/logs (O_PATH) for the denial log, or -1 */
} lz_supervisor_config;

typedef struct lz_supervisor_handle {
    pid_t outer_pid; /* child of the caller, in the user namespace */
    pid_t init_pid;  /* host pid of the supervisor (pid 1 of its pid namespace) */
    int sock;        /* the supervisor channel */
} lz_supervisor_handle;

/* Start the supervisor. On success the caller owns h->sock. */
LZ_MUST_CHECK
int lz_supervisor_spawn(const lz_supervisor_config *sc, lz_supervisor_handle *h, lz_error **err);

/* The supervisor channel's handlers, one per message the coordinator may
 * send (protocol/table.h); exported for the protocol tests. */
extern const lz_proto_handler_row lz_supervisor_handlers[];
extern const size_t lz_supervisor_handlers_len;

#endif
