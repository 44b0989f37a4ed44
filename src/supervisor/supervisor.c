/* SPDX-License-Identifier: Apache-2.0 */
#include "supervisor/supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/nsfs.h>
#include <linux/openat2.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/magic.h>

#include "common/nodump.h"
#include "common/spawn.h"
#include "common/timing.h"
#include "common/text.h"
#include "common/util.h"
#include "fs/cache_record.h"
#include "oci/spec.h"
#include "protocol/io.h"
#include "protocol/mailbox.h"
#include "protocol/messages.h"
#include "supervisor/limits.h"
#include "supervisor/sidecar.h"
#include "supervisor/runsc_info.h"
#include "supervisor/stage.h"
#include "supervisor/state_anchor.h"
#include "supervisor/userns.h"
#include "protocol/table.h"

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
    int gen_fd;                 /* O_PATH of the generation directory */
    char **runsc_globals;       /* runsc global flags, NULL-terminated */
    size_t n_globals;
    bool created;               /* runsc create (or run) was called: delete at stop */
    bool started;
    lz_error *prepare_err;      /* do_prepare's failure, answered to SUP_START */
    bool stopped;               /* SUP_STOP done: the loop ends */
    bool statx_fix;             /* preload the statx shim into sessions */
    lz_runsc_facts facts;       /* what this runsc does (runsc_info.h), cached */
    bool facts_were_cached;     /* found in the Storage Root: nothing to probe */
    int facts_dir_fd;           /* the Storage Root, where they are kept; -1: not kept */
    char facts_key[64 + 2 * LZ_CACHE_IDENTITY_MAX];
    bool resolv_written;        /* /etc/resolv.conf is in the root overlay already */
    lz_network net;             /* the Network Sidecar */
    bool cover_proc_sys_net;    /* this runsc needs cover_proc_sys_net() */
    lz_state_anchor anchor;     /* the persistent overlays */
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
    bool sandbox_lost;          /* it died under the generation: reported once */
    pub_slot pubs[MAX_PUBS];
    /* The escalation inbox's tmpfs (its root, mount_inbox): handed to the
     * coordinator with SUP_MAILBOX, then closed. -1 when not mounted. */
    int mailbox_fd;
    /* A session whose --publish could not be set up: its SUP_EXEC fails
     * (exit 125, the reason is in the log) instead of running without. */
    uint32_t pub_failed_session;
    bool pub_failed;
} sup;

/* ---- small helpers ----------------------------------------------------- */

static void send_failed(sup *s, lz_error *e)
{
    lz_wbuf b;
    lz_msg_refused m = { LZ_REFUSE_START_FAILED, e ? e->message : (char *) "unknown failure",
                         e ? e->hint : NULL };
    char *full = NULL;
    if (e && e->errnum) {
        full = lz_xasprintf("%s: %s", e->message, strerror(e->errnum));
        m.message = full;
    }
    lz_msg_refused_encode(&b, LZ_SUP_FAILED, &m);
    lz_wire_post(s->sock, &b);
    free(full);
}

static char *join(const char *a, const char *b)
{
    return lz_xasprintf("%s/%s", a, b);
}

/* ctty: make fd 0 (a terminal) the controlling terminal of the runsc
 * process, in a new session: the kernel then sends it SIGWINCH when the
 * coordinator resizes the PTY, and runsc passes the new size into the
 * sandbox. */
static int runsc_run_tty(sup *s, char *const *args, int in, int out, int errfd, int extra_fd,
                         bool ctty, lz_error **err);

static int runsc_run(sup *s, char *const *args, int in, int out, int errfd, int extra_fd,
                     lz_error **err)
{
    return runsc_run_tty(s, args, in, out, errfd, extra_fd, false, err);
}

static int runsc_run_tty(sup *s, char *const *args, int in, int out, int errfd, int extra_fd,
                         bool ctty, lz_error **err)
{
    size_t n = 0;
    while (args[n])
        n++;
    _cleanup_free_ char **argv = lz_xcalloc(1 + s->n_globals + n + 1, sizeof(char *));
    size_t k = 0;
    argv[k++] = (char *) "runsc";
    for (size_t i = 0; i < s->n_globals; i++)
        argv[k++] = s->runsc_globals[i];
    for (size_t i = 0; i < n; i++)
        argv[k++] = args[i];
    argv[k] = NULL;

    lz_spawn_fd fds[4];
    size_t nfds = 0;
    const int std[3] = { in, out, errfd };
    for (int i = 0; i < 3; i++)
        if (std[i] >= 0)
            fds[nfds++] = (lz_spawn_fd) { std[i], i };
    if (extra_fd >= 0)
        fds[nfds++] = (lz_spawn_fd) { extra_fd, 3 };
    char *const envp[] = { (char *) "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
    /* PR_SET_PDEATHSIG(SIGKILL), the launcher's default, changes nothing
     * here: the supervisor is pid 1 of the pid namespace runsc runs in, and
     * its end kills the namespace. */
    const lz_spawn_async opt = { .envp = envp, .fds = fds, .n_fds = nfds, .ctty = ctty };
    lz_child child;
    if (lz_spawn_start(s->sc->runsc, argv, &opt, &child, err) < 0)
        return -1;
    return (int) lz_child_release(&child);
}

static void child_exited(sup *s, pid_t pid, int status);

/* Wait for `pid`. As pid 1 of its pid namespace the supervisor inherits every
 * orphan (runsc's sandbox and gofer processes among them) and must reap them
 * all the time: runsc delete waits until those processes are gone, and an
 * unreaped zombie still "exists". */
static int wait_status(sup *s, pid_t pid)
{
    for (;;) {
        int status = 0;
        pid_t r = waitpid(-1, &status, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == pid)
            return status;
        child_exited(s, r, status);
    }
}

/* Last non-empty line of a small file, for error messages. */
static char *last_line_of(int dirfd, const char *name)
{
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return NULL;
    char buf[8192];
    off_t size = lseek(fd, 0, SEEK_END);
    off_t off = size > (off_t) sizeof(buf) - 1 ? size - (off_t) sizeof(buf) + 1 : 0;
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, off);
    close(fd);
    if (n <= 0)
        return NULL;
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    char *nl = strrchr(buf, '\n');
    return lz_xstrdup(nl ? nl + 1 : buf);
}

/* Run one runsc subcommand to completion with stderr into <gen>/name. */
static int runsc_simple(sup *s, char *const *args, const char *errname, lz_error **err)
{
    int efd = openat(s->gen_fd, errname, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
                     0600);
    if (efd < 0) {
        /* gen_fd is O_PATH: openat works relative to it for lookup. */
        return lz_error_set(err, errno, "cannot create %s/%s", s->sc->generation_dir, errname);
    }
    int pid = runsc_run(s, args, -1, -1, efd, -1, err);
    close(efd);
    if (pid < 0)
        return -1;
    int status = wait_status(s, pid);
    if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        _cleanup_free_ char *line = last_line_of(s->gen_fd, errname);
        lz_error_set(err, 0, "runsc %s failed: %s", args[0],
                     line ? line : "(no message; see the runsc log)");
        return lz_error_hint(err, "see %s/%s and the runsc log %s", s->sc->generation_dir,
                             errname, s->sc->log_path ? s->sc->log_path : "(none)");
    }
    return 0;
}

/* ---- the sandbox process ------------------------------------------------ */

/* Read the sandbox's pid from runsc create's --pid-file (in the private
 * generation directory) and hold a pidfd on it. Without one (an unreadable
 * file), a death of the sandbox is still seen when its channel ends, only
 * not told apart from the command's own status 128. */
static void watch_sandbox(sup *s)
{
    s->sandbox_pid = 0;
    s->sandbox_pidfd = -1;
    int fd = openat(s->gen_fd, "sandbox.pid", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    char buf[32] = { 0 };
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0)
        close(fd);
    char *end = NULL;
    long pid = n > 0 ? strtol(buf, &end, 10) : 0;
    if (pid <= 1 || pid > INT32_MAX || !end || (*end != '\0' && *end != '\n')) {
        fprintf(stderr, "lz-supervisor: cannot read the sandbox's pid from sandbox.pid\n");
        return;
    }
    s->sandbox_pid = (pid_t) pid;
    s->sandbox_pidfd = (int) syscall(SYS_pidfd_open, s->sandbox_pid, 0);
    if (s->sandbox_pidfd >= 0)
        lz_best_effort(fcntl(s->sandbox_pidfd, F_SETFD, FD_CLOEXEC));
}

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* Pin the processes that carry out the sandbox's file operations on the
 * host — the sandbox process (the gVisor kernel) and the gofer — for the
 * Git Sentry's freezer (docs/git.md "An audit the sandbox cannot
 * outpace"). runsc records the gofer's pid in the container's state file,
 * <runsc root>/<id>_sandbox:<id>.state, key "goferPid" (runsc's
 * container.Container; the same file and key in the 2022 and 2024
 * releases), beside the sandbox's ("sandbox": {"pid"}), which must be the
 * one runsc create's --pid-file named. The gofer must be this supervisor's
 * child (runsc create, its parent, has exited; we are the pid namespace's
 * init): asked of the pidfd with waitid(WNOWAIT), so a recycled pid is
 * never taken for it. Fails closed: without both, no sandbox runs. */
static int pin_sandbox_processes(sup *s, lz_error **err)
{
    if (s->sandbox_pidfd < 0)
        return lz_error_set(err, 0, "cannot pin the sandbox process (runsc-sandbox): its pid "
                                    "file was unreadable or it is gone");
    _cleanup_free_ char *name = lz_xasprintf("runsc/%s_sandbox:%s.state", s->sc->container_id,
                                             s->sc->container_id);
    int fd = openat(s->gen_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return lz_error_set(err, errno, "cannot read runsc's state file %s/%s",
                            s->sc->generation_dir, name);
    json_error_t jerr;
    json_t *st = json_loadfd(fd, JSON_REJECT_DUPLICATES, &jerr);
    close(fd);
    json_t *gofer = st ? json_object_get(st, "goferPid") : NULL;
    json_t *sandbox = st ? json_object_get(st, "sandbox") : NULL;
    json_t *spid = sandbox ? json_object_get(sandbox, "pid") : NULL;
    json_int_t gpid = json_is_integer(gofer) ? json_integer_value(gofer) : 0;
    json_int_t sbpid = json_is_integer(spid) ? json_integer_value(spid) : 0;
    json_decref(st);
    if (gpid <= 1 || gpid > INT32_MAX || sbpid != s->sandbox_pid)
        return lz_error_set(err, 0, "runsc's state file %s/%s does not name the gofer and the "
                                    "sandbox process as expected (goferPid %lld, sandbox pid "
                                    "%lld, pid file %d)",
                            s->sc->generation_dir, name, (long long) gpid, (long long) sbpid,
                            (int) s->sandbox_pid);
    int pidfd = (int) syscall(SYS_pidfd_open, (pid_t) gpid, 0);
    if (pidfd < 0)
        return lz_error_set(err, errno, "cannot pin runsc's gofer process (pid %lld)",
                            (long long) gpid);
    lz_best_effort(fcntl(pidfd, F_SETFD, FD_CLOEXEC));
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    if (waitid(P_PIDFD, (id_t) pidfd, &si, WEXITED | WNOHANG | WNOWAIT) < 0) {
        int e = errno;
        close(pidfd);
        return lz_error_set(err, e, "runsc's gofer (pid %lld) is not the supervisor's child",
                            (long long) gpid);
    }
    s->gofer_pidfd = pidfd;
    return 0;
}

/* How long an exec that ended with runsc's failure status waits for the
 * sandbox's death to become visible. runsc exec fails that way when the
 * sandbox's control socket closes, which happens in the sandbox's own exit
 * path just before it becomes a zombie (docs/runtime.md "When the sandbox
 * dies"); a command that itself exits 128 has its exit reported this much
 * later. */
#define SANDBOX_DEATH_GRACE_MS 1000

/* runsc writes its fatal errors to its log too (Errorf: log.Warningf
 * "FATAL ERROR: ..."): copy the last ones into the Domain's log, whose
 * lines outlive the generation directory and its runsc.log. */
static void log_runsc_fatal(sup *s, uint32_t session_no)
{
    if (!s->sc->log_path)
        return;
    int fd = open(s->sc->log_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return;
    static char buf[16384];
    off_t size = lseek(fd, 0, SEEK_END);
    off_t off = size > (off_t) sizeof(buf) - 1 ? size - (off_t) sizeof(buf) + 1 : 0;
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, off);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    for (char *line = buf, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        const char *f = strstr(line, "FATAL ERROR: ");
        if (!f)
            continue;
        char *safe = lz_text_printable(f + 13);
        fprintf(stderr, "lz-supervisor: session #%u: runsc: %s\n", session_no, safe);
        free(safe);
    }
}

/* True when the sandbox process has died (waiting up to wait_ms for its
 * pidfd). */
static bool sandbox_dead(sup *s, int wait_ms)
{
    if (s->sandbox_lost)
        return true;
    if (s->sandbox_pidfd < 0)
        return false;
    struct pollfd p = { .fd = s->sandbox_pidfd, .events = POLLIN };
    int r;
    while ((r = poll(&p, 1, wait_ms)) < 0 && errno == EINTR)
        ;
    return r > 0;
}

/* The sandbox died under the generation: say so once, to the log and to
 * the coordinator, which ends every session with Lazaret's message (exit
 * 125) instead of runsc exec's status and tears the Domain down. */
static void sandbox_lost(sup *s)
{
    if (s->sandbox_lost)
        return;
    s->sandbox_lost = true;
    fprintf(stderr, "lz-supervisor: the sandbox process (runsc-sandbox, pid %d) died under the "
                    "generation\n", (int) s->sandbox_pid);
    lz_error *e = NULL;
    lz_error_set(&e, 0, "the Domain's sandbox ended unexpectedly: its gVisor kernel process "
                        "(runsc-sandbox) died while commands ran");
    lz_error_hint(&e, "run the command again to start a new sandbox; the runsc log %s may say why",
                  s->sc->log_path ? s->sc->log_path : "(none)");
    send_failed(s, e);
    lz_error_free(e);
}

/* ---- start ------------------------------------------------------------- */

/* The environment of sandbox processes: the image's, then HOME, then the
 * profile's resolved env values (which win), then per-session extras. */
static char **session_env(sup *s, char *const *extra, size_t n_extra)
{
    const lz_resolved_config *cfg = s->sc->cfg;
    size_t n_img = 0;
    while (s->sc->image->env && s->sc->image->env[n_img])
        n_img++;
    size_t cap = n_img + cfg->n_env + n_extra + 4;
    char **env = lz_xcalloc(cap, sizeof(char *));
    size_t n = 0;
    bool have_path = false, have_home = false;
    for (size_t i = 0; i < n_img; i++) {
        env[n++] = lz_xstrdup(s->sc->image->env[i]);
        have_path |= strncmp(s->sc->image->env[i], "PATH=", 5) == 0;
        have_home |= strncmp(s->sc->image->env[i], "HOME=", 5) == 0;
    }
    if (!have_path)
        env[n++] = lz_xstrdup("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    if (!have_home)
        env[n++] = lz_xstrdup("HOME=/root");
    for (size_t i = 0; i < n_extra; i++)
        env[n++] = lz_xstrdup(extra[i]);
    for (size_t i = 0; i < cfg->n_env; i++)
        env[n++] = lz_xasprintf("%s=%s", cfg->env[i].sandbox_name, cfg->env[i].value);
    /* lazaret-escalate on every command's PATH, after the image's own
     * directories (whatever PATH ended up, the profile's included). */
    for (size_t i = 0; i < n; i++)
        if (strncmp(env[i], "PATH=", 5) == 0) {
            char *p = lz_xasprintf("%s%s" LZ_GUEST_BIN_DIR, env[i], env[i][5] ? ":" : "");
            free(env[i]);
            env[i] = p;
        }
    if (s->statx_fix)
        env[n++] = lz_xstrdup("LD_PRELOAD=" LZ_GUEST_STATX_FIX);
    env[n] = NULL;
    return env;
}

/* jansson frees its strings without wiping them: overwrite the process
 * spec's environment (which holds the profile's secrets) in place first. */
static void wipe_json_env(json_t *proc)
{
    json_t *env = json_object_get(proc, "env");
    size_t i;
    json_t *v;
    json_array_foreach(env, i, v) {
        if (json_is_string(v))
            explicit_bzero((char *) json_string_value(v), json_string_length(v));
    }
}

static void free_strv(char **v)
{
    if (!v)
        return;
    for (char **p = v; *p; p++) {
        explicit_bzero(*p, strlen(*p)); /* may hold secrets */
        free(*p);
    }
    free(v);
}

/* The sandbox's host objects, each pinned by descriptor (stage.h): the
 * strings below are staging points in the generation directory. */
typedef struct staged_layout {
    char *rootfs, *workspace, *guest_bin, *guest_lib;
    char *inbox, *outbox, *credentials; /* the Escalation Mailbox */
    lz_spec_mount *mounts;    /* persistent overlays and volumes */
    size_t n_mounts;
    char **owned;
    size_t n_owned;
} staged_layout;

static void staged_layout_clear(staged_layout *l)
{
    for (size_t i = 0; i < l->n_owned; i++)
        free(l->owned[i]);
    free(l->owned);
    free(l->mounts);
    *l = (staged_layout) { 0 };
}

static char *keep(staged_layout *l, char *s)
{
    l->owned = lz_xrealloc(l->owned, l->n_owned + 1, sizeof(char *));
    l->owned[l->n_owned++] = s;
    return s;
}

/* Stage fd (closed here) and return the staging point, kept by l. */
static char *stage(lz_stage *st, staged_layout *l, int fd, bool readonly, const char *what,
                   lz_error **err)
{
    char *path = NULL;
    int r = fd < 0 ? -1 : lz_stage_fd(st, fd, readonly, what, &path, err);
    if (fd >= 0)
        close(fd);
    return r < 0 ? NULL : keep(l, path);
}

/* The source of one Git Sentry mount, opened confined from its base, with
 * the type the plan recorded. The bases are the workspace (a protection or
 * bind point), the Domain's ignored/ copies — written by the sandbox in
 * earlier sessions: untrusted, so a symlink, special file or mount there
 * refuses the start — and an empty directory of the generation. */
static int open_ws_mount_source(sup *s, int ws, int ignored, int empty,
                                const lz_workspace_mount *m, lz_error **err)
{
    const lz_resolved_config *cfg = s->sc->cfg;
    if (m->base == LZ_MOUNT_FROM_EMPTY)
        return fcntl(empty, F_DUPFD_CLOEXEC, 3);
    _cleanup_free_ char *label = m->base == LZ_MOUNT_FROM_IGNORED
                                     ? lz_xasprintf("%s/ignored/%s",
                                                    cfg->storage_domain_root.label, m->rel)
                                     : lz_xasprintf("%s/%s", cfg->workspace.label, m->rel);
    int fd = lz_open_confined(m->base == LZ_MOUNT_FROM_IGNORED ? ignored : ws, m->rel,
                              O_PATH | O_NOFOLLOW, 0, label, err);
    struct stat sb;
    if (fd >= 0 && fstat(fd, &sb) < 0) {
        close(fd);
        return lz_error_set(err, errno, "cannot stat %s", label);
    }
    if (fd >= 0 && (m->dir ? S_ISDIR(sb.st_mode) : S_ISREG(sb.st_mode)))
        return fd;
    if (fd >= 0) {
        close(fd);
        lz_error_set(err, 0, "%s is no longer a %s", label, m->dir ? "directory" : "regular file");
    }
    if (m->base == LZ_MOUNT_FROM_IGNORED)
        return lz_error_hint(err, "this copy of a git-ignored path belongs to the sandbox, which "
                                  "may have planted a symlink, special file or mount there in "
                                  "an earlier session; inspect and remove %s, then run again",
                             label);
    return lz_error_hint(err, "the workspace changed while the sandbox was being set up; run "
                              "again");
}

/* A mount point inside the staged workspace tree: beneath its root, no
 * symlink or magic link on the way, but crossing the mounts attached there
 * before (a bind point's clone is a mount of its own; what lies in it is
 * reached through it, as the sandbox will reach it). */
static int open_in_tree(int root, const char *rel)
{
    struct open_how how = { .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
                            .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                                       RESOLVE_NO_MAGICLINKS };
    for (int i = 0;; i++) {
        long r = syscall(SYS_openat2, root, rel, &how, sizeof(how));
        if (r >= 0 || errno != EAGAIN || i >= 32)
            return (int) r;
    }
}

/* Compose /workspace in the staged clone of the workspace (its root: ws_root):
 * .git and every Git Sentry mount (read-only protections, bind points, the
 * Domain's copies of git-ignored paths, the quarantine's cover) become kernel
 * mounts inside it, attached from descriptors in plan order (every parent
 * before what lies in it), and runsc gets the whole tree as the one
 * /workspace bind. Per-path runsc binds do not scale: runsc 2022 hands each
 * bind's gofer connection to the sandbox as a descriptor below 256 and fails
 * ("unable to remap stdios, FD 256 is already in use") at about 250 binds
 * (docs/git.md "How the copies are mounted"). Kernel mount points are what
 * keeps the layout: the gofer's rename or rmdir of one (and of a bind point,
 * an ancestor) fails with EBUSY in its mount namespace, a copy of this one. */
static int compose_workspace(sup *s, int ws, int ws_root, lz_error **err)
{
    const lz_resolved_config *cfg = s->sc->cfg;
    struct stat gst;
    if (fstatat(ws, ".git", &gst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(gst.st_mode)) {
        /* .git as its own mount point: the sandbox cannot rename or replace
         * it (docs/platform.md "Git in a bind-mounted workspace", attack 1). */
        _cleanup_free_ char *label = join(cfg->workspace.label, ".git");
        _cleanup_close_ int src = lz_open_confined(ws, ".git", O_PATH | O_DIRECTORY, 0, label, err);
        _cleanup_close_ int dest = src >= 0 ? open_in_tree(ws_root, ".git") : -1;
        if (src < 0)
            return -1;
        if (dest < 0)
            return lz_error_set(err, errno, "cannot open the mount point of %s", label);
        if (lz_stage_fd_over(src, dest, false, label, err) < 0)
            return -1;
    }
    if (s->sc->n_workspace_mounts == 0)
        return 0;
    _cleanup_close_ int empty = -1, ignored = -1;
    if (mkdirat(s->gen_fd, "empty-ro", 0555) < 0 && errno != EEXIST)
        return lz_error_set(err, errno, "cannot create %s/empty-ro", s->sc->generation_dir);
    empty = openat(s->gen_fd, "empty-ro", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (empty < 0)
        return lz_error_set(err, errno, "cannot open %s/empty-ro", s->sc->generation_dir);
    for (size_t i = 0; i < s->sc->n_workspace_mounts; i++) {
        const lz_workspace_mount *m = &s->sc->workspace_mounts[i];
        if (m->base == LZ_MOUNT_FROM_IGNORED && ignored < 0) {
            _cleanup_close_ int droot = lz_plan_open(&cfg->storage_domain_root,
                                                     O_PATH | O_DIRECTORY, true, err);
            if (droot < 0)
                return -1;
            ignored = lz_open_confined(droot, "ignored", O_PATH | O_DIRECTORY, 0,
                                       "the Domain's ignored/", err);
            if (ignored < 0)
                return -1;
        }
        /* The destination: /workspace/<rel> as the sandbox will see it,
         * the same kind of object, reached without a symlink, or the mount
         * would land elsewhere. */
        _cleanup_free_ char *dlabel = join(cfg->workspace.label, m->rel);
        _cleanup_close_ int dest = open_in_tree(ws_root, m->rel);
        struct stat dsb;
        if (dest < 0) {
            lz_error_set(err, errno, "cannot open %s in the sandbox's workspace tree", dlabel);
            return lz_error_hint(err, "the workspace changed while the sandbox was being set up; "
                                      "run again");
        }
        if (fstat(dest, &dsb) < 0 || (m->dir ? !S_ISDIR(dsb.st_mode) : !S_ISREG(dsb.st_mode)))
            return lz_error_set(err, 0, "%s is no longer a %s; run again", dlabel,
                                m->dir ? "directory" : "regular file");
        _cleanup_close_ int src = open_ws_mount_source(s, ws, ignored, empty, m, err);
        if (src < 0)
            return -1;
        _cleanup_free_ char *what = m->base == LZ_MOUNT_FROM_IGNORED
                                        ? lz_xasprintf("the Domain's copy of %s", m->rel)
                                        : lz_xstrdup(dlabel);
        if (lz_stage_fd_over(src, dest, m->readonly, what, err) < 0)
            return -1;
    }
    return 0;
}

/* The resolver the Network Sidecar provides, as the sandbox's
 * /etc/resolv.conf, written into this generation's root overlay before
 * runsc runs (no exec into the running sandbox for it: issue 13, a cold
 * start 30 ms shorter). The overlay's upper layer (root-upper) is
 * Lazaret's and new with every generation; the sandbox never writes it
 * (its writes go to runsc's memory overlay above). The image's tree below
 * is not trusted: /etc is opened without following any symlink, and an
 * image's resolv.conf symlink (systemd images) is replaced, not followed.
 * Returns false, writing nothing, when this way does not apply: /etc is
 * not a plain directory, a persistent directory or volume covers the file
 * (the sandbox must see the file through it); the caller then writes it
 * from inside the sandbox, as before. */
static bool write_resolv_conf(sup *s, int root)
{
    const lz_resolved_config *cfg = s->sc->cfg;
    for (size_t i = 0; i < cfg->n_persistent_dirs; i++)
        if (lz_path_overlaps(cfg->persistent_dirs[i], "/etc/resolv.conf"))
            return false;
    for (size_t i = 0; i < cfg->n_volumes; i++)
        if (lz_path_overlaps(cfg->volumes[i].container, "/etc/resolv.conf"))
            return false;
    lz_error *e = NULL;
    _cleanup_close_ int etc = lz_open_confined(root, "etc", O_PATH | O_DIRECTORY, 0, "/etc", &e);
    if (etc < 0 && e && e->errnum == ENOENT && mkdirat(root, "etc", 0755) == 0) {
        lz_error_free(lz_error_take(&e));
        etc = lz_open_confined(root, "etc", O_PATH | O_DIRECTORY, 0, "/etc", &e);
    }
    lz_error_free(e);
    if (etc < 0)
        return false;
    if (unlinkat(etc, "resolv.conf", 0) < 0 && errno != ENOENT)
        return false; /* a directory, say */
    _cleanup_close_ int fd = openat(etc, "resolv.conf",
                                    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    static const char line[] = "nameserver " LZ_NET_RESOLVER "\n";
    return fd >= 0 && lz_write_all(fd, line, sizeof(line) - 1) == (ssize_t) (sizeof(line) - 1);
}

/* The image's tree, shared by every Domain of the image, through an
 * overlay of this generation: runsc 2022's gofer creates missing mount
 * points (/workspace, /run/lazaret/..., persistent directories, volumes)
 * in the root it is given, and on the shared tree they would appear in
 * every other Domain of the image - as root's directories where a
 * non-root agent's persistent ~/.cache should be its own (attack round
 * i12f, E2). They land in the generation's root-upper/ instead and go
 * with it. The sandbox itself writes to runsc's in-memory overlay only
 * (--overlay2=root:memory). */
static char *stage_rootfs(sup *s, lz_stage *st, staged_layout *l, lz_error **err)
{
    size_t missing = 0;
    _cleanup_close_ int lower = lz_walk_nofollow(s->sc->image->rootfs_label, &missing, err);
    if (lower >= 0 && missing)
        lz_error_set(err, ENOENT, "the prepared image %s is missing", s->sc->image->rootfs_label);
    if (lower < 0 || missing)
        return NULL;
    if (lz_mkdir_at(s->gen_fd, "root-upper", 0755, err) < 0 ||
        lz_mkdir_at(s->gen_fd, "root-work", 0700, err) < 0)
        return NULL;
    _cleanup_close_ int upper = lz_open_dir_at(s->gen_fd, "root-upper", err);
    _cleanup_close_ int work = upper >= 0 ? lz_open_dir_at(s->gen_fd, "root-work", err) : -1;
    char *path = NULL;
    if (work < 0 ||
        lz_stage_overlay(st, lower, upper, work, s->sc->image->rootfs_label, &path, err) < 0)
        return NULL;
    keep(l, path);
    /* The staging point was just made in st->dir_fd by this process. */
    _cleanup_close_ int root = openat(st->dir_fd, strrchr(path, '/') + 1,
                                      O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    s->resolv_written = root >= 0 && write_resolv_conf(s, root);
    return path;
}

/* The escalation inbox: a tmpfs of its own, bounded in bytes and in
 * inodes (mailbox.h, LZ_MBX_INBOX_MAX_*), made here in the supervisor's
 * mount namespace (the root of a user namespace may mount a tmpfs) on the
 * generation's empty mailbox/spool. The kernel refuses whatever the sandbox
 * writes beyond the bound (ENOSPC), however it writes - big, sparse or many
 * files, directories, links, slow writes nobody read yet - and the memory
 * behind it is at most that; a directory of $XDG_RUNTIME_DIR (a tmpfs in
 * RAM) held as much as the sandbox cared to write. The sandbox gets inbox/
 * of it; junk/ beside it is the coordinator's. The coordinator, whose mount
 * namespace does not have this mount, gets its root's descriptor
 * (SUP_MAILBOX). fsopen/fsmount: the root's descriptor comes from the mount
 * itself, not from resolving a path after mounting. */
static int mount_inbox(sup *s, lz_error **err)
{
    const char *gen = s->sc->generation_dir;
    _cleanup_close_ int point = lz_open_confined(s->gen_fd, LZ_MBX_HOST_SPOOL,
                                                 O_PATH | O_DIRECTORY, 0, LZ_MBX_HOST_SPOOL, err);
    if (point < 0)
        return -1;
    char size[32], inodes[32];
    snprintf(size, sizeof(size), "%u", LZ_MBX_INBOX_MAX_BYTES);
    snprintf(inodes, sizeof(inodes), "%u", LZ_MBX_INBOX_MAX_ENTRIES);
    _cleanup_close_ int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
    _cleanup_close_ int mnt = -1;
    if (fs < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "size", size, 0) < 0 ||
        fsconfig(fs, FSCONFIG_SET_STRING, "nr_inodes", inodes, 0) < 0 ||
        fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0700", 0) < 0 ||
        fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
        (mnt = fsmount(fs, FSMOUNT_CLOEXEC,
                       MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)) < 0 ||
        move_mount(mnt, "", point, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0) {
        lz_error_set(err, errno, "cannot mount the escalation inbox's tmpfs on %s/%s", gen,
                     LZ_MBX_HOST_SPOOL);
        return lz_error_hint(err, "run 'lazaret doctor': the Runtime Supervisor must be able to "
                                  "mount a tmpfs in its user namespace");
    }
    int root = openat(mnt, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct statfs sf;
    if (root < 0 || fstatfs(root, &sf) < 0 || sf.f_type != TMPFS_MAGIC ||
        mkdirat(root, LZ_MBX_SPOOL_INBOX, 0700) < 0 || mkdirat(root, LZ_MBX_SPOOL_JUNK, 0700) < 0 ||
        /* Every user of the sandbox may ask (an image may run its command
         * as a non-root user): sticky and world-writable, like /tmp. */
        fchmodat(root, LZ_MBX_SPOOL_INBOX, 01777, 0) < 0) {
        lz_error_set(err, errno, "cannot prepare the escalation inbox in %s/%s", gen,
                     LZ_MBX_HOST_SPOOL);
        if (root >= 0)
            close(root);
        return -1;
    }
    /* The coordinator, the developer outside, reads and empties all of it
     * (and removes what any sandbox user put in the sticky inbox): the
     * three directories are the developer's — uid 0 here in an ordinary
     * Domain, the agent's uid in a keep-id one, where this namespace's
     * root is a subordinate id the coordinator has no rights as. The
     * developer's id in this namespace is its owner's (NS_GET_OWNER_UID,
     * as seen from inside). */
    uid_t dev = (uid_t) -1;
    int ns = open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC);
    bool have = ns >= 0 && ioctl(ns, NS_GET_OWNER_UID, &dev) == 0 && dev != (uid_t) 65534;
    if (ns >= 0)
        close(ns);
    if (!have || fchown(root, dev, (gid_t) -1) < 0 ||
        fchownat(root, LZ_MBX_SPOOL_INBOX, dev, (gid_t) -1, AT_SYMLINK_NOFOLLOW) < 0 ||
        fchownat(root, LZ_MBX_SPOOL_JUNK, dev, (gid_t) -1, AT_SYMLINK_NOFOLLOW) < 0) {
        lz_error_set(err, have ? errno : 0, "cannot give the escalation inbox in %s/%s to the "
                                            "developer", gen, LZ_MBX_HOST_SPOOL);
        close(root);
        return -1;
    }
    s->mailbox_fd = root;
    return 0;
}

static int stage_layout(sup *s, lz_stage *st, staged_layout *l, lz_error **err)
{
    const lz_resolved_config *cfg = s->sc->cfg;
    int fd;
    if (!(l->rootfs = stage_rootfs(s, st, l, err)))
        return -1;

    _cleanup_close_ int ws = lz_plan_open(&cfg->workspace, O_PATH | O_DIRECTORY, true, err);
    if (ws < 0 || !(l->workspace = stage(st, l, fcntl(ws, F_DUPFD_CLOEXEC, 3), false,
                                          cfg->workspace.label, err)))
        return -1;
    {
        /* The staging point was just made in st->dir_fd by this process. */
        _cleanup_close_ int ws_root = openat(st->dir_fd, strrchr(l->workspace, '/') + 1,
                                             O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (ws_root < 0)
            return lz_error_set(err, errno, "cannot open %s", l->workspace);
        if (compose_workspace(s, ws, ws_root, err) < 0)
            return -1;
    }

    _cleanup_close_ int guest = openat(s->gen_fd, "guest", O_PATH | O_DIRECTORY | O_NOFOLLOW |
                                                               O_CLOEXEC);
    if (guest < 0)
        return lz_error_set(err, errno, "cannot open %s/guest", s->sc->generation_dir);
    fd = lz_open_confined(guest, "bin", O_PATH | O_DIRECTORY, 0, "guest/bin", err);
    if (!(l->guest_bin = stage(st, l, fd, true, "the guest launcher", err)))
        return -1;
    if (s->sc->guest_lib_dir) {
        fd = lz_open_confined(guest, "lib", O_PATH | O_DIRECTORY, 0, "guest/lib", err);
        if (!(l->guest_lib = stage(st, l, fd, true, "the statx shim", err)))
            return -1;
    }
    /* The Escalation Mailbox (made by the coordinator in the generation
     * directory): the inbox is the sandbox's to write, the outbox and the
     * client's credentials are read-only in the kernel. */
    if (s->mailbox_fd < 0 && mount_inbox(s, err) < 0)
        return -1;
    fd = lz_open_confined(s->mailbox_fd, LZ_MBX_SPOOL_INBOX, O_PATH | O_DIRECTORY, 0,
                          "the escalation inbox", err);
    if (!(l->inbox = stage(st, l, fd, false, "the escalation inbox", err)))
        return -1;
    fd = lz_open_confined(s->gen_fd, "mailbox/outbox", O_PATH | O_DIRECTORY, 0,
                          "mailbox/outbox", err);
    if (!(l->outbox = stage(st, l, fd, true, "the escalation outbox", err)))
        return -1;
    fd = lz_open_confined(s->gen_fd, "credentials", O_PATH | O_DIRECTORY, 0, "credentials", err);
    if (!(l->credentials = stage(st, l, fd, true, "the escalation credentials", err)))
        return -1;

    size_t n = s->anchor.n_mounts + cfg->n_volumes;
    l->mounts = lz_xcalloc(n ? n : 1, sizeof(lz_spec_mount));
    /* Persistent directories are overlays this process mounted from
     * descriptors (state_anchor.c); they are passed as they are. */
    for (size_t i = 0; i < s->anchor.n_mounts; i++)
        l->mounts[l->n_mounts++] = (lz_spec_mount) { s->anchor.mounts[i],
                                                     cfg->persistent_dirs[i], false };
    for (size_t i = 0; i < cfg->n_volumes; i++) {
        bool ro = cfg->volumes[i].access == LZ_ACCESS_READ_ONLY;
        fd = lz_plan_open(&cfg->volumes[i].source, O_PATH, true, err);
        char *src = stage(st, l, fd, ro, cfg->volumes[i].source.label, err);
        if (!src)
            return -1;
        l->mounts[l->n_mounts++] = (lz_spec_mount) { src, cfg->volumes[i].container, ro };
    }

    return 0;
}

static int write_config(sup *s, lz_error **err)
{
    const lz_resolved_config *cfg = s->sc->cfg;
    lz_stage st = LZ_STAGE_INIT;
    staged_layout l = { 0 };
    if (lz_stage_init(&st, s->gen_fd, s->sc->generation_dir, err) < 0 ||
        stage_layout(s, &st, &l, err) < 0) {
        staged_layout_clear(&l);
        lz_stage_clear(&st);
        return -1;
    }
    lz_stage_clear(&st);
    _cleanup_free_ char *hostname = lz_xasprintf("lazaret-%s", cfg->profile);
    lz_sandbox_spec spec = {
        .rootfs = l.rootfs,
        .hostname = hostname,
        .workspace = l.workspace,
        .mounts = l.mounts,
        .n_mounts = l.n_mounts,
        .guest_bin_dir = l.guest_bin,
        .guest_lib_dir = l.guest_lib,
        .mailbox_inbox = l.inbox,
        .mailbox_outbox = l.outbox,
        .credentials_dir = l.credentials,
        .netns_path = s->net.sandbox_netns,
        .env = NULL,
    };
    /* The init process gets the image environment only: no secrets in a
     * file on disk. */
    char **init_env = lz_xcalloc(2, sizeof(char *));
    init_env[0] = lz_xstrdup("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    spec.env = init_env;
    json_t *j = lz_spec_container(&spec);
    staged_layout_clear(&l);
    free_strv(init_env);

    if (lz_mkdir_at(s->gen_fd, "bundle", 0700, err) < 0) {
        json_decref(j);
        return -1;
    }
    _cleanup_close_ int bundle = lz_open_dir_at(s->gen_fd, "bundle", err);
    int fd = bundle >= 0 ? openat(bundle, "config.json",
                                  O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600)
                         : -1;
    int r = fd >= 0 ? json_dumpfd(j, fd, JSON_INDENT(1)) : -1;
    json_decref(j);
    if (fd < 0 || r < 0) {
        if (fd >= 0)
            close(fd);
        return lz_error_set(err, errno, "cannot write %s/bundle/config.json",
                            s->sc->generation_dir);
    }
    close(fd);
    return 0;
}

/* runsc releases before 2023 refuse --network=sandbox ("cannot run with
 * network enabled in root network namespace") whenever
 * /proc/sys/net/core/rmem_default is accessible from a thread that joined
 * the sandbox's network namespace (its isRootNS() check, in
 * release-20221219.0); current kernels show that file in every network
 * namespace. A tmpfs over /proc/sys/net in this process's own mount
 * namespace, where runsc runs, hides it - after the Network Sidecar's
 * sysctl writes, which it would hide too (docs/platform.md "runsc's
 * netstack in a rootless namespace"). Nothing of the host changes: the
 * mount namespace is the supervisor's and ends with it. */
static int cover_proc_sys_net(lz_error **err)
{
    if (mount("tmpfs", "/proc/sys/net", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "size=4k,mode=0555") < 0) {
        lz_error_set(err, errno, "cannot prepare runsc's network stack: mounting a tmpfs over "
                     "/proc/sys/net in the supervisor's mount namespace failed");
        return lz_error_hint(err, "run 'lazaret doctor'; a runsc from 2023 on does not need it");
    }
    return 0;
}

/* Everything before the sandbox's init runs: the Network Sidecar, the
 * persistent overlays, the runtime spec and, unless SUP_START is already
 * waiting, `runsc create`. Done as soon as the supervisor runs, before it
 * reads SUP_START, so that it overlaps the coordinator's own start work:
 * the Git Sentry's watches, which must be in place before anything of the
 * sandbox runs (the coordinator sends SUP_START after them; nothing of
 * the container runs before `runsc start`). A failure is kept and
 * answered to SUP_START. */
static void do_prepare(sup *s)
{
    lz_error **err = &s->prepare_err;
    if (lz_mkdir_at(s->gen_fd, "runsc", 0700, err) < 0)
        return;
    /* SR-5: the network policy is in force before the sandbox exists. */
    if (lz_network_setup(s->sc->cfg, s->sc->generation_dir, s->gen_fd, &s->net, err) < 0)
        return;
    lz_timing_mark("supervisor: network sidecar ready");
    if (lz_state_anchor_mount(s->sc->cfg, s->sc->image->rootfs_label, &s->sc->image->user,
                              s->gen_fd, s->sc->generation_dir, &s->anchor, err) < 0 ||
        write_config(s, err) < 0)
        return;
    if (s->cover_proc_sys_net && cover_proc_sys_net(err) < 0)
        return;
    lz_timing_mark("supervisor: state mounted, spec written");
    /* SUP_START already here: nothing left to overlap, and `runsc run
     * --detach` (create and start in one Go process) is ~13 ms shorter. */
    struct pollfd p = { .fd = s->sock, .events = POLLIN };
    if (poll(&p, 1, 0) == 1)
        return;
    _cleanup_free_ char *bundle = join(s->sc->generation_dir, "bundle");
    _cleanup_free_ char *pidfile = join(s->sc->generation_dir, "sandbox.pid");
    char *const create[] = { (char *) "create", (char *) "--bundle", bundle,
                             (char *) "--pid-file", pidfile, (char *) s->sc->container_id, NULL };
    /* Marked before the call: a create that failed half-way is deleted
     * by do_stop too. */
    s->created = true;
    if (runsc_simple(s, create, "runsc-create.err", err) < 0)
        return;
    lz_timing_mark("supervisor: runsc create");
}

static int do_start(sup *s, lz_error **err)
{
    if (s->prepare_err) {
        *err = lz_error_take(&s->prepare_err);
        return -1;
    }
    if (s->created) {
        char *const start[] = { (char *) "start", (char *) s->sc->container_id, NULL };
        if (runsc_simple(s, start, "runsc-start.err", err) < 0)
            return -1;
        lz_timing_mark("supervisor: runsc start");
    } else {
        _cleanup_free_ char *bundle = join(s->sc->generation_dir, "bundle");
        _cleanup_free_ char *pidfile = join(s->sc->generation_dir, "sandbox.pid");
        char *const run[] = { (char *) "run", (char *) "--detach", (char *) "--bundle", bundle,
                              (char *) "--pid-file", pidfile, (char *) s->sc->container_id,
                              NULL };
        s->created = true;
        if (runsc_simple(s, run, "runsc-run.err", err) < 0)
            return -1;
        lz_timing_mark("supervisor: runsc run --detach");
    }
    s->started = true;
    watch_sandbox(s);
    if (pin_sandbox_processes(s, err) < 0)
        return -1;

    /* Detect, don't assume: does statx(AT_NO_AUTOMOUNT) work here? Asked
     * once per runsc binary (load_runsc_facts); the probe's statx is of
     * "/", this fresh sandbox's own root, which no earlier sandbox could
     * have shaped. */
    if (!s->facts_were_cached) {
        char *const probe[] = { (char *) "exec", (char *) s->sc->container_id,
                                (char *) LZ_GUEST_EXEC, (char *) "--probe-statx", NULL };
        int pid = runsc_run(s, probe, -1, -1, -1, -1, err);
        if (pid < 0)
            return -1;
        int status = wait_status(s, pid);
        bool answered = status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) <= 1;
        s->facts.statx_ok = answered && WEXITSTATUS(status) == 0;
        /* Kept only as a real answer (0 works, 1 fails), never a failed
         * runsc exec; and only with the release date known. */
        if (answered && s->facts.release_date && s->facts_dir_fd >= 0)
            lz_runsc_facts_store(s->facts_dir_fd, s->facts_key, &s->facts);
        lz_timing_mark("supervisor: statx probe");
    }
    s->statx_fix = !s->facts.statx_ok && s->sc->guest_lib_dir != NULL;

    /* The resolver the sidecar provides, when the root overlay could not
     * be given it (write_resolv_conf). */
    if (!s->resolv_written) {
        char *const resolv[] = { (char *) "exec", (char *) s->sc->container_id,
                                 (char *) LZ_GUEST_EXEC, (char *) "--resolv-conf",
                                 (char *) LZ_NET_RESOLVER, NULL };
        int pid = runsc_run(s, resolv, -1, -1, -1, -1, err);
        if (pid < 0)
            return -1;
        wait_status(s, pid);
        lz_timing_mark("supervisor: resolv.conf written from inside");
    }
    lz_timing_flush(stderr, NULL);
    return 0;
}

/* ---- exec and stop ----------------------------------------------------- */

/* A non-interactive session's stderr, with runsc's own words taken out.
 * runsc exec hands its fds 0-2 to the command and writes its own failures
 * ("waiting on pid 4: ... urpc method ... failed: EOF" when the sandbox
 * dies) to the same fd 2 (runsc/cmd/util/util.go, Errorf). So the command's
 * stderr is a socket instead: the kernel tags every chunk written to a unix
 * socket with its writer's pid (SO_PASSCRED) and never merges two writers'
 * chunks in one read, so what the sandbox process (the gVisor kernel, which
 * performs the command's writes) wrote goes to the user's stderr and what
 * any other process wrote - runsc exec - goes to the log (docs/runtime.md
 * "When the sandbox dies"). The relay is a child of the supervisor holding
 * only the socket, the user's stderr and the log; it ends at EOF (every
 * writer gone) or with the supervisor's pid namespace. Returns the
 * sandbox's end, or -1 when no relay can be made (the caller then passes
 * the user's stderr as it is). */
static void stderr_relay(int sock, int out, pid_t sandbox, uint32_t session_no)
{
    static char buf[65536];
    union {
        char space[CMSG_SPACE(sizeof(struct ucred))];
        struct cmsghdr align;
    } ctl;
    for (;;) {
        struct iovec iov = { buf, sizeof(buf) - 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.space,
                             .msg_controllen = sizeof(ctl.space) };
        ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        pid_t from = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
                c->cmsg_len == CMSG_LEN(sizeof(struct ucred))) {
                struct ucred uc;
                memcpy(&uc, CMSG_DATA(c), sizeof(uc));
                from = uc.pid;
            }
        if (from == sandbox) {
            /* A user's stderr that went away (EPIPE): the rest is dropped,
             * as a closed pipe would. */
            for (ssize_t off = 0; off < n;) {
                ssize_t w = write(out, buf + off, (size_t) (n - off));
                if (w < 0 && errno == EINTR)
                    continue;
                if (w <= 0)
                    break;
                off += w;
            }
        } else {
            buf[n] = '\0';
            char *line = lz_text_printable(buf);
            fprintf(stderr, "lz-supervisor: session #%u: runsc (pid %d) wrote: %s\n", session_no,
                    (int) from, line);
            free(line);
        }
    }
}

static int stderr_relay_start(sup *s, int user_err, uint32_t session_no)
{
    if (s->sandbox_pid <= 0 || user_err < 3)
        return -1;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return -1;
    int one = 1;
    /* Nothing flows back into the sandbox: its end only writes. */
    if (setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0 ||
        shutdown(sv[0], SHUT_WR) < 0 || shutdown(sv[1], SHUT_RD) < 0) {
        close(sv[0]);
        close(sv[1]);
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        return -1;
    }
    if (pid == 0) {
        /* Keep the socket, the user's stderr and the log (fd 2) only. */
        int a = sv[0] < user_err ? sv[0] : user_err, b = sv[0] < user_err ? user_err : sv[0];
        close_range(3, (unsigned) a - 1, 0);
        close_range((unsigned) a + 1, (unsigned) b - 1, 0);
        close_range((unsigned) b + 1, ~0U, 0);
        signal(SIGPIPE, SIG_IGN);
        prctl(PR_SET_NAME, "lz-stderr-relay", 0, 0, 0);
        stderr_relay(sv[0], user_err, s->sandbox_pid, session_no);
        _exit(0);
    }
    close(sv[0]);
    return sv[1];
}

static int do_exec(sup *s, const lz_msg_exec *m, const int *fds, lz_error **err)
{
    size_t slot = MAX_EXECS;
    for (size_t i = 0; i < MAX_EXECS; i++)
        if (s->execs[i].pid == 0) {
            slot = i;
            break;
        }
    if (slot == MAX_EXECS)
        return lz_error_set(err, EAGAIN, "too many sessions in this Domain");
    char **env = session_env(s, m->env, m->envc);
    json_t *proc = lz_spec_process(m->argv, m->argc, m->cwd, env, m->interactive,
                                   &s->sc->image->user);
    free_strv(env);
    /* The process spec holds resolved env values: it goes to runsc through
     * an anonymous memory file, never through the file system. */
    _cleanup_close_ int mfd = memfd_create("lazaret-process", MFD_CLOEXEC);
    int r = mfd >= 0 ? json_dumpfd(proc, mfd, 0) : -1;
    wipe_json_env(proc);
    json_decref(proc);
    if (r < 0)
        return lz_error_set(err, errno, "cannot write the process specification");
    /* The command's pid inside the sandbox, for SIGKILL (runsc exec
     * forwards catchable signals itself, but SIGKILL would only kill it). */
    _cleanup_free_ char *pidfile = lz_xasprintf("%s/exec-%u.pid", s->sc->generation_dir,
                                                 m->session_no);
    char *const args[] = { (char *) "exec", (char *) "--internal-pid-file", pidfile,
                           (char *) "--process", (char *) "/proc/self/fd/3",
                           (char *) s->sc->container_id, NULL };
    _cleanup_close_ int relay = m->interactive ? -1 : stderr_relay_start(s, fds[2], m->session_no);
    int pid = runsc_run_tty(s, args, fds[0], fds[1], relay >= 0 ? relay : fds[2], mfd,
                            m->interactive, err);
    lz_timing_mark("supervisor: runsc exec spawned");
    lz_timing_flush(stderr, NULL);
    if (pid < 0)
        return -1;
    s->execs[slot].pid = pid;
    s->execs[slot].session_no = m->session_no;
    return 0;
}

static void do_signal(sup *s, uint32_t session_no, uint32_t sig)
{
    for (size_t i = 0; i < MAX_EXECS; i++) {
        if (s->execs[i].pid == 0 || s->execs[i].session_no != session_no)
            continue;
        /* The guest command, by its pid inside the sandbox: `runsc kill
         * --pid`, started and not waited for (the supervisor never blocks
         * on one session; the reaper collects it). Every signal goes this
         * way: runsc 20221219's `runsc exec` does not forward SIGHUP to a
         * non-interactive command, it dies of it, and the command ran on
         * unseen in the sandbox with its session already reported ended
         * (tests/integration/test_protocol.py, the running-session case). */
        const char *sname = sig == SIGHUP ? "HUP" : sig == SIGTERM ? "TERM"
                          : sig == SIGINT ? "INT" : sig == SIGQUIT ? "QUIT" : "KILL";
        char name[64];
        snprintf(name, sizeof(name), "exec-%u.pid", session_no);
        _cleanup_free_ char *line = last_line_of(s->gen_fd, name);
        char *end = NULL;
        long guest = line ? strtol(line, &end, 10) : 0;
        bool sent = false;
        if (guest > 0 && end && *end == '\0') {
            char spid[32];
            snprintf(spid, sizeof(spid), "%ld", guest);
            char *const args[] = { (char *) "kill", (char *) "--pid", spid,
                                   (char *) s->sc->container_id, (char *) sname, NULL };
            sent = runsc_run(s, args, -1, -1, -1, -1, NULL) > 0;
        }
        /* SIGKILL: the session's runsc exec too, so the session ends now
         * whatever the guest does; a guest process that survived is the
         * sandbox's until teardown. Another signal reaches runsc exec only
         * when the guest pid is not known (yet). */
        if (sig == SIGKILL || !sent)
            kill(s->execs[i].pid, (int) sig); /* pid > 0: checked by the loop above */
        return;
    }
}

/* End the forwarders of a session (every one when all is true); the
 * reaper frees their slots. */
static void pubs_end(sup *s, uint32_t session_no, bool all)
{
    for (size_t i = 0; i < MAX_PUBS; i++)
        if (s->pubs[i].pid > 0 && (all || s->pubs[i].session_no == session_no))
            kill(s->pubs[i].pid, SIGKILL); /* not reaped yet: still ours */
}

static void do_stop(sup *s)
{
    pubs_end(s, 0, true);
    /* From here the sandbox's death is the stop's doing, not news. */
    s->sandbox_pid = 0;
    /* Killed first, by pidfd: the coordinator may have frozen them
     * (coordinator/freezer.h), and runsc kill would wait on a stopped
     * sandbox's control server. SIGKILL ends a stopped process too; runsc
     * kill and delete then clean up after a dead sandbox. */
    if (s->sandbox_pidfd >= 0)
        lz_best_effort((int) syscall(SYS_pidfd_send_signal, s->sandbox_pidfd, SIGKILL, NULL, 0));
    if (s->gofer_pidfd >= 0)
        lz_best_effort((int) syscall(SYS_pidfd_send_signal, s->gofer_pidfd, SIGKILL, NULL, 0));
    lz_close(&s->sandbox_pidfd);
    lz_close(&s->gofer_pidfd);
    if (s->created) {
        if (s->started) {
            char *const kill_[] = { (char *) "kill", (char *) s->sc->container_id,
                                    (char *) "KILL", NULL };
            runsc_simple(s, kill_, "runsc-kill.err", NULL);
        }
        char *const del[] = { (char *) "delete", (char *) "--force",
                              (char *) s->sc->container_id, NULL };
        runsc_simple(s, del, "runsc-delete.err", NULL);
        s->started = s->created = false;
    }
    lz_state_anchor_unmount(&s->anchor);
    lz_network_clear(&s->net);
}

static void child_exited(sup *s, pid_t pid, int status)
{
    /* The network's address watcher: without it new host addresses would
     * not be denied, so the sandbox's egress ends (fail closed). */
    if (lz_network_child_exited(&s->net, pid))
        return;
    for (size_t i = 0; i < MAX_PUBS; i++)
        if (s->pubs[i].pid == pid) {
            if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
                fprintf(stderr, "lz-supervisor: the forwarder of session #%u's --publish "
                                "ended (status %d)\n", s->pubs[i].session_no, status);
            s->pubs[i].pid = 0;
            return;
        }
    if (s->sandbox_pid > 0 && pid == s->sandbox_pid) {
        sandbox_lost(s);
        return;
    }
    for (size_t i = 0; i < MAX_EXECS; i++) {
        if (s->execs[i].pid != pid)
            continue;
        /* Its published ports close with it. */
        pubs_end(s, s->execs[i].session_no, false);
        /* Statuses the sandbox's death also produces: runsc exec's own
         * failure (128, its WaitPID lost the sandbox), a command SIGKILLed
         * (137: gVisor kills every process when the sandbox's init dies,
         * attack round i12b F2), runsc exec itself killed. Not the
         * command's status when the sandbox is gone. */
        bool runsc_failed = WIFEXITED(status) && WEXITSTATUS(status) == 128;
        bool killed = (WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGKILL) ||
                      WIFSIGNALED(status);
        if ((runsc_failed || killed) && sandbox_dead(s, SANDBOX_DEATH_GRACE_MS)) {
            sandbox_lost(s); /* every session hears of it from the coordinator */
        } else {
            uint32_t report = (uint32_t) status;
            if (WIFSIGNALED(status) && WTERMSIG(status) == SIGPIPE) {
                /* Never sent by Lazaret: runsc exec's write of its own
                 * error to a stderr the command had shut (attack round
                 * i12b F1). */
                log_runsc_fatal(s, s->execs[i].session_no);
                report = LZ_SUP_EXEC_RUNSC_FAILED;
            }
            lz_wbuf b;
            lz_msg_pair_encode(&b, LZ_SUP_EXEC_EXITED, s->execs[i].session_no, report);
            lz_wire_post(s->sock, &b);
        }
        s->execs[i].pid = 0;
        char name[64];
        snprintf(name, sizeof(name), "exec-%u.pid", s->execs[i].session_no);
        unlinkat(s->gen_fd, name, 0);
    }
}

static void reap(sup *s)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
        child_exited(s, pid, status);
}

/* ---- the supervisor channel (protocol/table.h) ------------------------- */

/* Handlers return -1 for a malformed message: a protocol violation from
 * the coordinator, which ends the channel (the sandbox is stopped). */
static int on_start(void *ctx, lz_proto_msg *m)
{
    sup *s = ctx;
    if (!lz_msg_empty_decode(&m->r))
        return -1;
    lz_error *err = NULL;
    lz_wbuf b;
    int r = do_start(s, &err);
    if (r == 0) {
        /* The inbox first: the coordinator reads it from when sessions
         * start (SUP_STARTED), and refuses a start without it. */
        lz_msg_empty_encode(&b, LZ_SUP_MAILBOX);
        r = s->mailbox_fd < 0 ? lz_error_set(&err, EBADF, "the escalation inbox is not mounted")
                              : lz_wire_send(s->sock, &b, &s->mailbox_fd, 1, &err);
        if (s->mailbox_fd >= 0)
            close(s->mailbox_fd);
        s->mailbox_fd = -1;
    }
    if (r < 0) {
        send_failed(s, err);
        lz_error_free(err);
    } else {
        /* With the pidfds of the sandbox process and the gofer, for the
         * coordinator's freezer (the pid namespace's numbers mean nothing
         * there; a pidfd does). */
        int fds[2] = { fcntl(s->sandbox_pidfd, F_DUPFD_CLOEXEC, 3),
                       fcntl(s->gofer_pidfd, F_DUPFD_CLOEXEC, 3) };
        lz_msg_sup_started_encode(&b, s->statx_fix);
        if (fds[0] < 0 || fds[1] < 0) {
            lz_error *e = NULL;
            lz_error_set(&e, errno, "cannot hand the sandbox's pidfds to the coordinator");
            send_failed(s, e);
            lz_error_free(e);
        } else {
            lz_best_effort(lz_wire_send(s->sock, &b, fds, 2, NULL));
        }
        for (int i = 0; i < 2; i++)
            if (fds[i] >= 0)
                close(fds[i]);
    }
    return 0;
}

static int on_exec(void *ctx, lz_proto_msg *m)
{
    sup *s = ctx;
    lz_msg_exec e;
    if (!lz_msg_exec_decode(&m->r, &e))
        return -1;
    lz_error *err = NULL;
    bool pub_failed = s->pub_failed && s->pub_failed_session == e.session_no;
    if (pub_failed)
        s->pub_failed = false;
    if (pub_failed || do_exec(s, &e, m->fds, &err) < 0) {
        pubs_end(s, e.session_no, false);
        if (err)
            fprintf(stderr, "lz-supervisor: session #%u: cannot start its command: %s%s%s\n",
                    e.session_no, err->message, err->errnum ? ": " : "",
                    err->errnum ? strerror(err->errnum) : "");
        lz_wbuf b;
        lz_msg_pair_encode(&b, LZ_SUP_EXEC_EXITED, e.session_no, LZ_SUP_EXEC_START_FAILED);
        lz_wire_post(s->sock, &b);
        lz_error_free(err);
    }
    lz_msg_exec_clear(&e);
    return 0;
}

/* A --publish socket for the session whose SUP_EXEC follows. */
static int on_publish(void *ctx, lz_proto_msg *m)
{
    sup *s = ctx;
    uint32_t no, port;
    if (!lz_msg_pair_decode(&m->r, &no, &port) || port < 1 || port > 65535 || m->nfds != 1)
        return -1;
    lz_error *err = NULL;
    size_t slot = MAX_PUBS;
    for (size_t i = 0; i < MAX_PUBS && slot == MAX_PUBS; i++)
        if (s->pubs[i].pid == 0)
            slot = i;
    pid_t pid = slot == MAX_PUBS
                    ? lz_error_set(&err, EAGAIN, "publish: too many published ports")
                    : lz_network_publish(&s->net, m->fds[0], (uint16_t) port, &err);
    if (pid < 0) {
        fprintf(stderr, "lz-supervisor: session #%u: %s\n", no, err->message);
        lz_error_free(err);
        s->pub_failed = true;
        s->pub_failed_session = no;
        return 0;
    }
    s->pubs[slot] = (pub_slot) { pid, no };
    return 0; /* lz_proto_msg_clear closes the supervisor's copy */
}

static int on_signal_msg(void *ctx, lz_proto_msg *m)
{
    uint32_t no, sig;
    if (!lz_msg_pair_decode(&m->r, &no, &sig) ||
        (sig != SIGHUP && sig != SIGTERM && sig != SIGINT && sig != SIGQUIT && sig != SIGKILL))
        return -1;
    do_signal(ctx, no, sig);
    return 0;
}

static int on_stop(void *ctx, lz_proto_msg *m)
{
    sup *s = ctx;
    if (!lz_msg_empty_decode(&m->r))
        return -1;
    do_stop(s);
    lz_wbuf b;
    lz_msg_empty_encode(&b, LZ_SUP_STOPPED);
    lz_wire_post(s->sock, &b);
    s->stopped = true;
    return 0;
}

const lz_proto_handler_row lz_supervisor_handlers[] = {
    { LZ_SUP_START, on_start },
    { LZ_SUP_EXEC, on_exec },
    { LZ_SUP_SIGNAL, on_signal_msg },
    { LZ_SUP_PUBLISH, on_publish },
    { LZ_SUP_STOP, on_stop },
};
const size_t lz_supervisor_handlers_len =
    sizeof(lz_supervisor_handlers) / sizeof(lz_supervisor_handlers[0]);

/* Serve the channel until SUP_STOP (returns 0), the coordinator's end, a
 * violation or a signal (stops the sandbox, returns 1). Violations are
 * logged to stderr, which is the Domain's coordinator.log. */
static int supervisor_loop(sup *s)
{
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    if (sfd < 0)
        return 1;

    static lz_proto_msg m;
    for (;;) {
        struct pollfd p[2] = { { .fd = s->sock, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
                if (si.ssi_signo == SIGCHLD)
                    reap(s);
                else
                    break; /* asked to end: stop the sandbox */
            }
        }
        if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        lz_error *err = NULL;
        unsigned state = s->started ? LZ_PS_SUPERVISOR_RUNNING : LZ_PS_SUPERVISOR_IDLE;
        int r = lz_proto_recv(s->sock, LZ_DIR_COORDINATOR_TO_SUPERVISOR, state, &m, &err);
        if (r <= 0) {
            /* The coordinator is gone, or broke the protocol: stop. */
            if (r < 0 && err->errnum == EPROTO)
                fprintf(stderr, "lz-supervisor: protocol violation: %s; stopping the sandbox\n",
                        err->message);
            lz_error_free(err);
            break;
        }
        uint16_t type = m.r.type;
        int h = lz_proto_dispatch(lz_supervisor_handlers, lz_supervisor_handlers_len, s, &m);
        lz_proto_msg_clear(&m);
        if (h < 0) {
            fprintf(stderr, "lz-supervisor: protocol violation: malformed %s; stopping the "
                            "sandbox\n", lz_proto_name(type));
            break;
        }
        if (s->stopped)
            return 0;
    }
    do_stop(s);
    return 1;
}

/* ---- process shape ----------------------------------------------------- */

typedef struct spawn_ctx {
    const lz_supervisor_config *sc;
    int sock;
    int pid_pipe;
    uint64_t memory_bound, task_bound; /* read here, in the caller's pid namespace */
} spawn_ctx;

/* What this runsc does (runsc_info.h): from the Storage Root's cache when
 * it was learned for this very binary, else its release date now and the
 * statx behaviour in do_start, both kept for the next start. */
static void load_runsc_facts(sup *s)
{
    lz_error *e = NULL;
    s->facts_dir_fd = -1;
    if (lz_runsc_facts_key(s->sc->runsc, s->facts_key, sizeof(s->facts_key)) == 0)
        s->facts_dir_fd = lz_plan_open(&s->sc->cfg->storage_root, O_PATH | O_DIRECTORY, true, &e);
    lz_error_free(e);
    if (s->facts_dir_fd >= 0 && lz_runsc_facts_load(s->facts_dir_fd, s->facts_key, &s->facts) == 0) {
        s->facts_were_cached = true;
        return;
    }
    lz_spawn_output out = { 0 };
    char *const argv[] = { (char *) "runsc", (char *) "--version", NULL };
    if (lz_spawn_capture(s->sc->runsc, argv, NULL, &out, NULL) == 0 && out.data)
        s->facts.release_date = lz_runsc_release_date(out.data);
    lz_spawn_output_free(&out);
}

static int supervisor_main(spawn_ctx *c)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    prctl(PR_SET_NAME, "lz-supervisor");
    lz_timing_forget(); /* the coordinator's to write */
    lz_nodump_reassert(); /* this process keeps the profile's env values */
    sup s = { .sc = c->sc, .sock = c->sock, .gen_fd = -1, .sandbox_pidfd = -1, .gofer_pidfd = -1,
              .facts_dir_fd = -1, .mailbox_fd = -1 };
    /* A /proc of our own pid namespace: runsc re-executes /proc/self/exe
     * from its sandbox child, which fails (EACCES) through the /proc of the
     * parent pid namespace. */
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
        lz_error *e = NULL;
        lz_error_set(&e, errno, "cannot mount /proc for the supervisor's pid namespace");
        send_failed(&s, e);
        lz_error_free(e);
        return 1;
    }
    lz_timing_mark("supervisor: own /proc mounted");
    /* The Domain's resource bounds (docs/limits.md), before any runsc runs:
     * every runsc process, the sandbox and its ptrace stubs inherit them and
     * cannot raise them again. RLIMIT_NPROC bounds the host tasks of this
     * Domain whatever uids the sandbox's root switches to inside. */
    {
        lz_error *e = NULL;
        if (lz_limits_apply(c->memory_bound, c->task_bound, &e) < 0) {
            send_failed(&s, e);
            lz_error_free(e);
            return 1;
        }
    }
    s.gen_fd = open(c->sc->generation_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (s.gen_fd < 0) {
        lz_error *e = NULL;
        lz_error_set(&e, errno, "cannot open %s", c->sc->generation_dir);
        send_failed(&s, e);
        lz_error_free(e);
        return 1;
    }
    /* The plans were made in the coordinator's mount namespace; every mount
     * has a new id in ours. This process owns its copy of the resolved
     * configuration (fork), so it rebases that copy in place. */
    {
        lz_resolved_config *cfg = (lz_resolved_config *) c->sc->cfg;
        lz_error *e = NULL;
        int r = lz_plan_rebase(&cfg->workspace, &e);
        if (r == 0)
            r = lz_plan_rebase(&cfg->storage_domain_root, &e);
        if (r == 0)
            r = lz_plan_rebase(&cfg->storage_root, &e);
        for (size_t i = 0; r == 0 && i < cfg->n_volumes; i++)
            r = lz_plan_rebase(&cfg->volumes[i].source, &e);
        if (r < 0) {
            send_failed(&s, e);
            lz_error_free(e);
            return 1;
        }
    }
    /* runsc global flags. */
    char *root = join(c->sc->generation_dir, "runsc");
    s.runsc_globals = lz_xcalloc(12, sizeof(char *));
    s.runsc_globals[s.n_globals++] = lz_xasprintf("--root=%s", root);
    free(root);
    /* Rootless runsc cannot configure cgroups unless the user's cgroup is
     * delegated and writable (docs/platform.md "runsc as an unprivileged user"): detect, don't assume. */
    if (access("/sys/fs/cgroup", W_OK) != 0)
        s.runsc_globals[s.n_globals++] = lz_xstrdup("--ignore-cgroups");
    /* runsc's own network stack (gVisor's netstack), always: runsc 2022's
     * host networking breaks blocking socket I/O and a recvmsg with an
     * address buffer panics the whole sandbox (docs/network.md "runsc's
     * network stack"). Releases before 2023 refuse it in any but a "non-root"
     * network namespace, which they recognise by a check this supervisor
     * satisfies (cover_proc_sys_net). */
    load_runsc_facts(&s);
    s.runsc_globals[s.n_globals++] = lz_xstrdup("--network=sandbox");
    s.cover_proc_sys_net = s.facts.release_date < LZ_RUNSC_NETSTACK_OK_FROM;
    /* The image is shared read-only by every Domain: the sandbox writes to
     * an in-sandbox overlay of the root only, discarded with the sandbox.
     * Bind mounts (workspace, persistent dirs, volumes) are not wrapped. */
    s.runsc_globals[s.n_globals++] = lz_xstrdup("--overlay2=root:memory");
    if (c->sc->log_path)
        s.runsc_globals[s.n_globals++] = lz_xasprintf("--log=%s", c->sc->log_path);
    s.runsc_globals[s.n_globals] = NULL;
    lz_timing_mark("supervisor: runsc version read, flags set");
    do_prepare(&s);
    return supervisor_loop(&s);
}

/* The descriptors the supervisor inherits on purpose: stdio (the Domain's
 * log), its channel, the pid pipe and the plans' retained directories. The
 * rest of the coordinator's descriptors (its listening socket, sessions,
 * Git Sentry watches) must not live on here: a supervisor outliving a
 * killed coordinator by a few milliseconds would otherwise still hold the
 * listening socket, and a CLI connecting then would be queued on a socket
 * nobody accepts, then reset. */
static int drop_inherited_fds(const spawn_ctx *c)
{
    const lz_resolved_config *cfg = c->sc->cfg;
    size_t n_cfg = lz_resolved_config_fds(cfg, NULL, 0);
    int *keep = lz_xcalloc(6 + n_cfg, sizeof(int));
    size_t n = 0;
    keep[n++] = STDIN_FILENO;
    keep[n++] = STDOUT_FILENO;
    keep[n++] = STDERR_FILENO;
    keep[n++] = c->sock;
    keep[n++] = c->pid_pipe;
    keep[n++] = c->sc->image->bundle.ancestor_fd;
    n += lz_resolved_config_fds(cfg, keep + n, n_cfg);
    int r = lz_close_fds_except(keep, n);
    free(keep);
    return r;
}

static int outer_main(void *arg)
{
    spawn_ctx *c = arg;
    /* We run after lz_userns_spawn's setresuid/setresgid: a credential
     * change resets dumpability to fs.suid_dumpable (2 would dump us as
     * root), so it is said again here, before anything else. */
    if (lz_nodump_reassert() < 0)
        return 119;
    if (drop_inherited_fds(c) < 0)
        return 118;
    /* A session (and process group) of its own: no signal meant for the
     * supervisor's group can reach the coordinator, and none for the
     * coordinator's reaches the supervisor. */
    setsid();
    /* Own mount namespace (overlays live and die with it) and own pid
     * namespace (its init's death kills every runsc process). */
    if (unshare(CLONE_NEWNS | CLONE_NEWPID) < 0)
        return 120;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return 121;
    pid_t pid = fork();
    if (pid < 0)
        return 122;
    if (pid == 0) {
        close(c->pid_pipe);
        _exit(supervisor_main(c));
    }
    close(c->sock);
    int32_t p = pid;
    if (write(c->pid_pipe, &p, sizeof(p)) != sizeof(p))
        return 123;
    close(c->pid_pipe);
    prctl(PR_SET_NAME, "lz-supervisor-ns");
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 124;
}

int lz_supervisor_spawn(const lz_supervisor_config *sc, lz_supervisor_handle *h, lz_error **err)
{
    int sv[2], pp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return lz_error_set(err, errno, "cannot create the supervisor channel");
    if (pipe2(pp, O_CLOEXEC) < 0) {
        close(sv[0]);
        close(sv[1]);
        return lz_error_set(err, errno, "cannot create a pipe");
    }
    spawn_ctx c = { sc, sv[1], pp[1], lz_limit_memory_effective(), lz_limit_tasks_effective() };
    pid_t outer;
    int r = lz_userns_spawn(&sc->image->user, outer_main, &c, &outer, err);
    close(sv[1]);
    close(pp[1]);
    if (r < 0) {
        close(sv[0]);
        close(pp[0]);
        return lz_error_prefix(err, "cannot start the Runtime Supervisor");
    }
    int32_t init = 0;
    ssize_t n;
    do
        n = read(pp[0], &init, sizeof(init));
    while (n < 0 && errno == EINTR);
    close(pp[0]);
    if (n != sizeof(init)) {
        close(sv[0]);
        kill(outer, SIGKILL);
        waitpid(outer, NULL, 0);
        lz_error_set(err, 0, "the Runtime Supervisor failed to set up its namespaces");
        return lz_error_hint(err, "run 'lazaret doctor' to check user namespaces, newuidmap and "
                                  "subordinate id ranges");
    }
    h->outer_pid = outer;
    h->init_pid = init;
    h->sock = sv[0];
    return 0;
}
