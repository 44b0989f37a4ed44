/* SPDX-License-Identifier: Apache-2.0
 *
 * OCI runtime configuration for the Agent Sandbox (config.json for
 * `runsc create`) and the process specification of each session
 * (`runsc exec --process`). Built with jansson; nothing else writes them.
 *
 * Layout (SandboxLayoutV1 owns these destinations):
 *   /               the prepared image, read-only lower; runsc keeps the
 *                   ephemeral writable layer (--overlay2=root:...)
 *   /workspace      the canonical workspace, read-write bind
 *   /workspace/.git its own bind point when it is a directory (Git Sentry)
 *   <persistent>    one bind per persistent dir: an overlay whose upper
 *                   lives in the Domain Root (State Anchor)
 *   <volume>        one bind per volume, read-only or read-write
 *   /run/lazaret    tmpfs; bin/ and lib/ are read-only binds of the guest
 *                   launcher and the statx shim
 *   /usr/local/bin/lazaret-escalate  read-only bind of the escalation client
 *                   (LZ_GUEST_ESCALATE_ON_PATH), last, over everything
 *   /proc /dev /sys the runtime's own
 */
#ifndef LAZARET_OCI_SPEC_H
#define LAZARET_OCI_SPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "ns/userns.h"

#define LZ_GUEST_DIR "/run/lazaret"
#define LZ_GUEST_BIN_DIR "/run/lazaret/bin"
#define LZ_GUEST_LIB_DIR "/run/lazaret/lib"
#define LZ_GUEST_EXEC "/run/lazaret/bin/lazaret-exec"
#define LZ_GUEST_STATX_FIX "/run/lazaret/lib/lazaret-statx-fix.so"
/* The escalation client again, on the PATH every login shell sets: Debian's,
 * Ubuntu's and Alpine's /etc/profile reset PATH (dropping /run/lazaret/bin)
 * and all keep /usr/local/bin, for root and other users. A read-only bind of
 * a file the sandbox cannot replace or unmount (no CAP_SYS_ADMIN inside). */
#define LZ_GUEST_ESCALATE_ON_PATH "/usr/local/bin/lazaret-escalate"

/* RLIMIT_NPROC of every sandbox process (docs/limits.md): gVisor counts the
 * tasks of each sandbox uid and refuses fork/clone past it with EAGAIN for
 * tasks without CAP_SYS_ADMIN/CAP_SYS_RESOURCE, which the sandbox lacks.
 * Per uid only; the host-side bound over all uids is the supervisor's
 * RLIMIT_NPROC (supervisor/limits.h). 512 keeps one uid's fork bomb (about
 * 6 host tasks per guest process with the ptrace platform on 2 cores:
 * ~3300) under the default host bound of 4096 on a pid_max=32768 host, so
 * it ends in EAGAIN inside the sandbox, not at the host bound (which ends
 * the sandbox). */
#define LZ_SPEC_NPROC 512

typedef struct lz_spec_mount {
    const char *source;      /* host path */
    const char *destination; /* sandbox path */
    bool readonly;
} lz_spec_mount;

/* Where the source of a mount inside /workspace lies (the Git Sentry's
 * layout, gitsentry/git_sentry.h). The supervisor opens the source
 * confined from its base, requires the recorded type, and binds it from the
 * descriptor (supervisor/stage.h). */
typedef enum lz_mount_base {
    LZ_MOUNT_FROM_WORKSPACE, /* the workspace path itself (a protection, a bind point) */
    LZ_MOUNT_FROM_IGNORED,   /* the same relative path below <Domain Root>/ignored/ */
    LZ_MOUNT_FROM_EMPTY,     /* an empty read-only directory (hides the quarantine) */
} lz_mount_base;

/* One mount at /workspace/<rel>. */
typedef struct lz_workspace_mount {
    char *rel; /* normalized, relative to the workspace */
    lz_mount_base base;
    bool readonly;
    bool dir; /* a directory (else a regular file) */
} lz_workspace_mount;

typedef struct lz_sandbox_spec {
    const char *rootfs; /* host path of the prepared root filesystem */
    const char *hostname;
    const char *workspace;       /* host path of the composed workspace tree (one bind) */
    const lz_spec_mount *mounts; /* persistent overlays and volumes, in mount order */
    size_t n_mounts;
    const char *guest_bin_dir;    /* host directory holding lazaret-exec */
    const char *guest_lib_dir;    /* host directory holding lazaret-statx-fix.so */
    const char *escalate_on_path; /* host path of lazaret-escalate to bind at
                                     LZ_GUEST_ESCALATE_ON_PATH, or NULL */
    const char *mailbox_inbox;    /* Escalation Mailbox: read-write */
    const char *mailbox_outbox;   /* read-only */
    const char *credentials_dir;  /* the escalation client's credentials, read-only */
    char *const *env;             /* environment of the init process */
    const char *netns_path;       /* the sandbox's network namespace (Network Sidecar) */
} lz_sandbox_spec;

/* The container's config.json. Returns a new reference. */
json_t *lz_spec_container(const lz_sandbox_spec *spec);

/* The process JSON of one session: argv (NULL/empty: the login shell) run
 * through the guest launcher, in cwd, with env, as user (NULL: root); a
 * non-root user has no capabilities but the bounding set. */
json_t *lz_spec_process(char *const *argv, size_t argc, const char *cwd, char *const *env,
                        bool terminal, const lz_idmap *user);

#endif
