/* SPDX-License-Identifier: Apache-2.0
 *
 * What the Runtime Supervisor's files share: its state (sup) and what one
 * file offers the others. Nothing outside them includes it. Bottom up, a
 * file calls only files listed before it:
 *
 *   sandbox.c    the sandbox's processes, the reaper, the failure report
 *   runsc.c      running runsc
 *   workspace.c  the workspace mount plan's execution (Git Sentry mounts)
 *   mountguard.c stops the sandbox when a host rename detaches one of them
 *   exec.c       sessions: runsc exec, the stderr relay, signals
 *   bundle.c     the staged bundle and config.json
 *   lifecycle.c  prepare, start, stop
 *   requests.c   the supervisor channel's handlers and loop
 *   supervisor.c the process: namespaces, bounds, lz_supervisor_spawn
 */
#ifndef LAZARET_SUPERVISOR_INTERNAL_H
#define LAZARET_SUPERVISOR_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/util.h"
#include "fs/cache_record.h"
#include "protocol/messages.h"
#include "supervisor/runsc_info.h"
#include "supervisor/sidecar.h"
#include "supervisor/state_anchor.h"
#include "supervisor/supervisor.h"

/* ---- state of the running supervisor ----------------------------------- */

#define MAX_EXECS 256

typedef struct exec_slot {
    pid_t pid;
    uint32_t session_no;
} exec_slot;

/* A forwarder of `--publish` (docs/network.md "Publishing a port"): it
 * lives while its session's command runs. pid 0: free; a slot is freed only
 * when the forwarder is reaped, so a kill never reaches a recycled pid. */
#define MAX_PUBS 1024
typedef struct pub_slot {
    pid_t pid;
    uint32_t session_no;
} pub_slot;

typedef struct sup {
    const lz_supervisor_config *sc;
    int sock;
    int gen_fd;           /* O_PATH of the generation directory */
    char **runsc_globals; /* runsc global flags, NULL-terminated */
    size_t n_globals;
    bool created; /* runsc create (or run) was called: delete at stop */
    bool started;
    lz_error *prepare_err;  /* sup_prepare's failure, answered to SUP_START */
    bool stopped;           /* SUP_STOP done: the loop ends */
    bool statx_fix;         /* preload the statx shim into sessions */
    lz_runsc_facts facts;   /* what this runsc does (runsc_info.h), cached */
    bool facts_were_cached; /* found in the Storage Root: nothing to probe */
    int facts_dir_fd;       /* the Storage Root, where they are kept; -1: not kept */
    char facts_key[LZ_RUNSC_FACTS_KEY_MAX];
    bool resolv_written;     /* /etc/resolv.conf is in the root overlay already */
    lz_network net;          /* the Network Sidecar */
    bool cover_proc_sys_net; /* this runsc needs sup_cover_proc_sys_net() */
    lz_state_anchor anchor;  /* the persistent overlays */
    exec_slot execs[MAX_EXECS];
    /* The sandbox process (runsc-sandbox: the gVisor kernel), as runsc
     * create's --pid-file names it; a pidfd on it, so that its death is
     * seen however the reaper's order falls. 0 / -1 when not running. */
    pid_t sandbox_pid;
    int sandbox_pidfd;
    /* The gofer (runsc-gofer), which makes the sandbox's changes to host
     * filesystems: pinned like the sandbox process, so that the
     * coordinator's freezer (coordinator/freezer.h) can stop both. */
    int gofer_pidfd;
    bool sandbox_lost; /* it died under the generation: reported once */
    /* The mount guard (mountguard.c): the Git Sentry mounts of the
     * workspace tree by mount ID, and this namespace's mount table, polled
     * while the sandbox runs (-1 when not armed). */
    struct sup_guard {
        uint64_t mnt_id;
        char *label;
        char *rel;        /* below the workspace */
        int old_fd;       /* a protected regular file, read-only: what it held */
        const char *name; /* its last component (in rel) */
        int wd;           /* the inotify watch of its parent directory */
    } * guards;
    size_t n_guards;
    bool guard_unrecordable; /* a mount's ID was not learnt: do not start */
    int mountinfo_fd;
    int guard_inotify_fd; /* the guarded names' parent directories */
    pub_slot pubs[MAX_PUBS];
    /* The escalation inbox's tmpfs (its root, mount_inbox): handed to the
     * coordinator with SUP_MAILBOX, then closed. -1 when not mounted. */
    int mailbox_fd;
    /* A session whose --publish could not be set up: its SUP_EXEC fails
     * (exit 125, the reason is in the log) instead of running without. */
    uint32_t pub_failed_session;
    bool pub_failed;
} sup;

/* a/b, allocated. */
static inline char *sup_join(const char *a, const char *b)
{
    return lz_xasprintf("%s/%s", a, b);
}

/* ---- sandbox.c --------------------------------------------------------- */

/* SUP_FAILED to the coordinator, with e's message, strerror and hint. */
void sup_send_failed(sup *s, lz_error *e);
void sup_watch_sandbox(sup *s);
int sup_pin_sandbox_processes(sup *s, lz_error **err);
/* Kill the --publish forwarders of session_no (all: of every session). */
void sup_pubs_end(sup *s, uint32_t session_no, bool all);
/* A child of the supervisor ended with status (waitpid's). */
void sup_child_exited(sup *s, pid_t pid, int status);
/* Reap every child that has ended. */
void sup_reap(sup *s);

/* ---- runsc.c ----------------------------------------------------------- */

/* Start runsc with args after the global flags; in, out, errfd (-1: none)
 * become its 0-2 and extra_fd its 3. Returns its pid, or -1 with *err.
 * ctty: make fd 0 (a terminal) the controlling terminal of the runsc
 * process, in a new session: the kernel then sends it SIGWINCH when the
 * coordinator resizes the PTY, and runsc passes the new size into the
 * sandbox. */
int sup_runsc_run_tty(sup *s, char *const *args, int in, int out, int errfd, int extra_fd,
                      bool ctty, lz_error **err);
int sup_runsc_run(sup *s, char *const *args, int in, int out, int errfd, int extra_fd,
                  lz_error **err);
int sup_wait_status(sup *s, pid_t pid);
char *sup_last_line_of(int dirfd, const char *name);
int sup_runsc_simple(sup *s, char *const *args, const char *errname, lz_error **err);

/* ---- workspace.c ------------------------------------------------------- */

int sup_compose_workspace(sup *s, int ws, int ws_root, lz_error **err);

/* ---- mountguard.c ------------------------------------------------------ */

/* Record the mount that mount_fd lies on (just attached over rel, named
 * label); old_fd (taken): the protected file, read-only, or -1. */
void sup_guard_record(sup *s, int mount_fd, const char *rel, const char *label, int old_fd);
/* Open the mount table to watch (after the composition). */
int sup_guard_open(sup *s, int ws_root, lz_error **err);
/* Once the sandbox runs: check every recorded mount is there. */
int sup_guard_arm(sup *s, lz_error **err);
/* The mount table changed: when a recorded mount is gone, kill the sandbox
 * and tell the coordinator (SUP_FAILED). */
void sup_guard_changed(sup *s);
/* The guarded names' directories reported events: a guarded name renamed,
 * removed or made anew is a loss too. */
void sup_guard_renamed(sup *s);
void sup_guard_clear(sup *s);

/* ---- exec.c ------------------------------------------------------------ */

/* Free a NULL-terminated vector of strings, wiping each (environments hold
 * the profile's secrets). */
void sup_free_strv(char **v);
int sup_exec(sup *s, const lz_msg_exec *m, const int *fds, lz_error **err);
void sup_signal(sup *s, uint32_t session_no, uint32_t sig);

/* ---- bundle.c ---------------------------------------------------------- */

int sup_write_config(sup *s, lz_error **err);

/* ---- lifecycle.c ------------------------------------------------------- */

int sup_cover_proc_sys_net(lz_error **err);
void sup_prepare(sup *s);
int sup_start(sup *s, lz_error **err);
void sup_stop(sup *s);

/* ---- requests.c -------------------------------------------------------- */

int sup_request_loop(sup *s);

#endif
