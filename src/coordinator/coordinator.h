/* SPDX-License-Identifier: Apache-2.0
 *
 * The Session Coordinator: one process per running Domain generation, the
 * single owner of the Domain's runtime resources (OR-1), proven by the
 * non-blocking flock it holds on <runtime domain>/lock.
 *
 *  - serves the session channel on <runtime domain>/coordinator.sock
 *    (peer uid must be the invoking user's);
 *  - refuses a CLI whose configuration fingerprint differs from the running
 *    generation's;
 *  - starts the Runtime Supervisor and, through it, the sandbox; runs every
 *    session as a `runsc exec` into it (FR-2);
 *  - records every resource in the Domain Store before creating it and
 *    after destroying it (FR-7);
 *  - when the last session has left, tears everything down and exits
 *    (FR-6). A CLI arriving during teardown finds no socket, waits for the
 *    lock and starts the next generation.
 *
 * Bootstrap (bootstrap.h) is the CLI side: find or start the coordinator.
 */
#ifndef LAZARET_COORDINATOR_COORDINATOR_H
#define LAZARET_COORDINATOR_COORDINATOR_H

#include "config/resolve.h"
#include "oci/image.h"
#include "store/domain_root.h"
#include "store/domain_store.h"

#define LZ_COORDINATOR_SOCKET "coordinator.sock"
/* LZ_DOMAIN_LOCK, LZ_BOOTSTRAP_LOCK and LZ_SANDBOX_USER_RECORD:
 * store/domain_root.h, with the rest of the Domain Root's layout. */

typedef struct lz_coordinator_args {
    const lz_resolved_config *cfg;
    const lz_prepared_image *image;
    lz_domain_store *store;      /* open, owned by the coordinator */
    int lock_fd;                 /* the Domain lock, held */
    int listen_fd;               /* bound and listening */
    int runtime_dir_fd;          /* O_PATH of <runtime domain> */
    const char *runsc;           /* absolute path */
    const char *guest_exec;      /* host path of lazaret-exec */
    const char *guest_statx_fix; /* host path of lazaret-statx-fix.so, or NULL */
} lz_coordinator_args;

/* Run the coordinator in the current (already detached) process; never
 * returns. */
__attribute__((noreturn)) void lz_coordinator_main(lz_coordinator_args *a);

#endif
