/* SPDX-License-Identifier: Apache-2.0 */
#include "coordinator/bootstrap.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/nodump.h"
#include "common/spawn.h"
#include "common/timing.h"
#include "common/util.h"
#include "fs/atomic.h"
#include "coordinator/coordinator.h"
#include "lazaret-version.h"
#include "fs/remove.h"
#include "gitsentry/git_sentry.h"
#include "store/domain_store.h"
#include "supervisor/giveback.h"
#include "supervisor/runsc_info.h"
#include "ns/userns.h"

/* sun_path through the retained directory descriptor: short whatever the
 * runtime directory's length, and the descriptor stays the authority. */
static void socket_address(int dirfd, struct sockaddr_un *sa)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%s", dirfd,
             LZ_COORDINATOR_SOCKET);
}

static int try_connect(int dirfd, lz_error **err)
{
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0)
        return lz_error_set(err, errno, "cannot create a socket");
    struct sockaddr_un sa;
    socket_address(dirfd, &sa);
    if (connect(s, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
        int e = errno;
        close(s);
        errno = e;
        return -2; /* not there: no error set */
    }
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != getuid()) {
        close(s);
        return lz_error_set(err, EPERM, "the Domain socket is not served by your own user");
    }
    return s;
}

int lz_domain_connect_running(int dirfd, lz_error **err)
{
    int s = try_connect(dirfd, err);
    if (s == -2)
        return lz_error_set(err, errno, "the Domain's coordinator does not answer");
    return s;
}

/* Directory of our own executable, where the guest binaries live beside
 * lazaret (installed or in the build tree). */
static int find_guest_files(char **ret_exec, char **ret_fix, lz_error **err)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return lz_error_set(err, errno, "cannot find the lazaret executable");
    self[n] = '\0';
    char *dir = dirname(self);
    const char *exec_dirs[] = { dir, LAZARET_LIBEXECDIR };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(exec_dirs); i++) {
        char *p = lz_xasprintf("%s/lazaret-exec", exec_dirs[i]);
        if (access(p, X_OK) == 0) {
            *ret_exec = p;
            break;
        }
        free(p);
    }
    if (!*ret_exec) {
        lz_error_set(err, ENOENT, "cannot find lazaret-exec beside %s or in %s", dir,
                     LAZARET_LIBEXECDIR);
        return lz_error_hint(err, "reinstall Lazaret (make install) or run it from its build "
                                  "directory");
    }
    const char *lib_dirs[] = { dir, LAZARET_PKGLIBDIR };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(lib_dirs); i++) {
        char *p = lz_xasprintf("%s/lazaret-statx-fix.so", lib_dirs[i]);
        if (access(p, R_OK) == 0) {
            *ret_fix = p;
            break;
        }
        free(p);
    }
    return 0;
}

/* The sandbox user a Domain's files were made for (docs/runtime.md "The
 * agent's user"): <Domain Root>/sandbox-user, "uid U gid G". Files the
 * sandbox made under one map belong, under another, to other sandbox
 * users (the keep-id map swaps 0 and the agent's ids), so a Domain whose
 * image now runs as another user is refused until `lazaret state reset`.
 * A Domain from before the record had state made as root. The Domain
 * Root is never in the sandbox: the record is the developer's. */
int lz_sandbox_user_read(int domain_root_fd, lz_idmap *ret)
{
    int fd = openat(domain_root_fd, LZ_SANDBOX_USER_RECORD, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    char buf[64];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    int e = errno;
    close(fd);
    if (n < 0) {
        errno = e;
        return -1;
    }
    buf[n] = '\0';
    unsigned u = 0, g = 0;
    int used = 0;
    if (n == 0 || sscanf(buf, "uid %u gid %u\n%n", &u, &g, &used) != 2 || used != n) {
        errno = EINVAL;
        return -1;
    }
    *ret = (lz_idmap){ u, g };
    return 1;
}

static int check_sandbox_user(const lz_resolved_config *cfg, const lz_idmap *user, lz_error **err)
{
    _cleanup_close_ int root =
        lz_plan_open(&cfg->storage_domain_root, O_PATH | O_DIRECTORY, true, err);
    if (root < 0)
        return -1;
    struct stat st;
    bool has_files = fstatat(root, "state", &st, AT_SYMLINK_NOFOLLOW) == 0 ||
                     fstatat(root, "ignored", &st, AT_SYMLINK_NOFOLLOW) == 0;
    lz_idmap was = { 0, 0 };
    int known = lz_sandbox_user_read(root, &was);
    if (known < 0 && errno == EINVAL) {
        lz_error_set(err, 0, "the Domain's record of its sandbox user %s/%s is damaged",
                     cfg->storage_domain_root.label, LZ_SANDBOX_USER_RECORD);
        return lz_error_hint(err, "'lazaret state reset' starts the Domain's files anew");
    }
    if (known < 0)
        return lz_error_set(err, errno, "cannot read %s/%s", cfg->storage_domain_root.label,
                            LZ_SANDBOX_USER_RECORD);
    /* Unrecorded, was is root's: the files of a Domain from before the record. */
    bool same = was.uid == user->uid && was.gid == user->gid;
    if (known && same)
        return 0;
    if (!same && has_files) {
        lz_error_set(err, 0,
                     "the Domain's persistent files were made with the sandbox "
                     "running as uid %u (gid %u); its image now runs as uid %u (gid %u)",
                     (unsigned) was.uid, (unsigned) was.gid, (unsigned) user->uid,
                     (unsigned) user->gid);
        return lz_error_hint(err, "'lazaret state reset' starts them anew (the files of "
                                  "one user would be another's); or use the previous image");
    }
    char text[64];
    int len =
        snprintf(text, sizeof(text), "uid %u gid %u\n", (unsigned) user->uid, (unsigned) user->gid);
    _cleanup_free_ char *what =
        lz_xasprintf("%s/%s", cfg->storage_domain_root.label, LZ_SANDBOX_USER_RECORD);
    return lz_write_atomic(root, LZ_SANDBOX_USER_RECORD, text, (size_t) len, 0600, 0, what, err);
}

static int start_coordinator(const lz_resolved_config *cfg, int dirfd, int lock_fd,
                             int bootstrap_fd, lz_progress_fn progress, void *userdata,
                             lz_error **err)
{
    _cleanup_free_ char *runsc = NULL, *guest_exec = NULL, *guest_fix = NULL;
    lz_prepared_image image = { .bundle = LZ_PATH_PLAN_INIT };
    lz_domain_store *store = NULL;
    int listen_fd = -1, r = -1;

    /* $LAZARET_RUNSC or the system's (docs/runtime.md "Which runsc"):
     * decided here, from the developer's own environment, which no
     * sandbox can reach; the coordinator and supervisor get the path. */
    bool runsc_from_env;
    if (lz_runsc_locate(&runsc, &runsc_from_env, err) < 0)
        goto out;
    if (find_guest_files(&guest_exec, &guest_fix, err) < 0)
        goto out;
    /* Fail here, on the user's terminal, rather than in the coordinator. */
    {
        lz_subid_range range;
        if (lz_subid_lookup(LZ_SUBID_UID, getuid(), getgid(), &range, err) < 0 ||
            lz_subid_lookup(LZ_SUBID_GID, getuid(), getgid(), &range, err) < 0)
            goto out;
    }
    if (lz_domain_recover(cfg, dirfd, err) < 0)
        goto out;
    lz_timing_mark("cli: recovery checked");
    if (progress) {
        /* Which directory the sandbox gets is worth a line whenever a
         * Domain starts (on a terminal: progress prints only there). */
        char *line = lz_xasprintf("starting profile '%s' for the workspace %s%s", cfg->profile,
                                  cfg->workspace.label,
                                  cfg->workspace_from_git ? " (the top of the Git working tree "
                                                            "you are in)"
                                                          : "");
        progress(LZ_PROGRESS_NOTE, line, userdata);
        free(line);
    }
    {
        /* The Domain's record of its image is written under the catalog
         * lock (oci/catalog.h): from then on no prune removes it. */
        _cleanup_close_ int droot =
            lz_plan_open(&cfg->storage_domain_root, O_PATH | O_DIRECTORY, true, err);
        if (droot < 0)
            goto out;
        lz_image_use_record use = { .domain_root_fd = droot,
                                    .domain_root_label = cfg->storage_domain_root.label };
        if (lz_image_prepare(&cfg->storage_root, cfg->image, &use, progress, userdata, &image,
                             err) < 0 ||
            check_sandbox_user(cfg, &image.user, err) < 0)
            goto out;
    }
    lz_timing_mark("cli: image prepared");
    /* Bind before forking so that the next connect() succeeds at once. */
    listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (listen_fd < 0) {
        lz_error_set(err, errno, "cannot create the Domain socket");
        goto out;
    }
    unlinkat(dirfd, LZ_COORDINATOR_SOCKET, 0); /* stale: we hold the lock */
    struct sockaddr_un sa;
    socket_address(dirfd, &sa);
    mode_t old = umask(0077);
    int b = bind(listen_fd, (struct sockaddr *) &sa, sizeof(sa));
    umask(old);
    if (b < 0 || listen(listen_fd, 64) < 0) {
        lz_error_set(err, errno, "cannot listen on %s/%s", cfg->runtime_domain_root.label,
                     LZ_COORDINATOR_SOCKET);
        goto out;
    }

    /* Double fork: the coordinator is nobody's child but init's, in its own
     * session, with no terminal; it outlives this CLI. The one fork without
     * exec that is not lz_fork_call (common/fork.h): that helper gives its
     * caller a child to hold (a pidfd) or to wait for, and here the point
     * is the opposite, a process the CLI lets go of at once; the
     * coordinator's start is reported through the CLI's connect retry
     * (lz_domain_connect), not through a channel. */
    lz_timing_mark("cli: coordinator forked");
    lz_timing_flush(stderr, "lazaret: "); /* not the coordinator's to repeat */
    pid_t pid = fork();
    if (pid < 0) {
        lz_error_set(err, errno, "cannot start the Session Coordinator");
        goto out;
    }
    if (pid == 0) {
        setsid();
        if (fork() != 0)
            _exit(0);
        /* Inherited from the CLI (main.c); said again for this long-lived
         * process. Our copy of the CLI's environment still holds the host
         * variables the profile's env references: their values are in cfg,
         * so the environment's copies go. */
        lz_nodump_reassert();
        lz_resolved_config_scrub_environ(cfg);
        int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 1);
            dup2(devnull, 2);
        }
        signal(SIGINT, SIG_DFL);
        signal(SIGQUIT, SIG_DFL);
        /* Not ours to keep: the bootstrap lock belongs to the CLI. */
        close(bootstrap_fd);
        /* Nor anything else the CLI was given without O_CLOEXEC (a build
         * tool's pipe, say): the coordinator outlives this CLI and would
         * hold it for the Domain's lifetime. Kept: stdio (/dev/null), the
         * Domain lock, the listening socket, the runtime directory and the
         * configuration's and image's retained directories. */
        {
            size_t n_cfg = lz_resolved_config_fds(cfg, NULL, 0);
            int *keep = lz_xcalloc(7 + n_cfg, sizeof(int));
            size_t n = 0;
            keep[n++] = 0;
            keep[n++] = 1;
            keep[n++] = 2;
            keep[n++] = lock_fd;
            keep[n++] = listen_fd;
            keep[n++] = dirfd;
            keep[n++] = image.bundle.ancestor_fd;
            n += lz_resolved_config_fds(cfg, keep + n, n_cfg);
            if (lz_close_fds_except(keep, n) < 0)
                _exit(1);
            free(keep);
        }
        /* The Domain Store is opened here, in the process that uses it: an
         * SQLite connection must never cross a fork (the parent closing its
         * copy would checkpoint and delete the WAL under the child). */
        {
            char hex[65];
            lz_digest_hex(cfg->domain_id, hex);
            lz_error *e = NULL;
            int root = lz_plan_open(&cfg->storage_domain_root, O_PATH | O_DIRECTORY, true, &e);
            if (root < 0 ||
                lz_domain_store_open(root, hex, cfg->profile, cfg->workspace.label, &store, &e) < 0)
                _exit(1); /* the CLI finds no coordinator and reports on retry */
            close(root);
            lz_error_free(e);
        }
        lz_coordinator_args a = {
            .cfg = cfg,
            .image = &image,
            .store = store,
            .lock_fd = lock_fd,
            .listen_fd = listen_fd,
            .runtime_dir_fd = dirfd,
            .runsc = runsc,
            .guest_exec = guest_exec,
            .guest_statx_fix = guest_fix,
        };
        lz_coordinator_main(&a);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    r = 0;
out:
    if (listen_fd >= 0)
        close(listen_fd);
    lz_prepared_image_clear(&image);
    return r;
}

int lz_domain_connect(const lz_resolved_config *cfg, lz_progress_fn progress, void *userdata,
                      lz_error **err)
{
    _cleanup_close_ int dirfd =
        lz_plan_open(&cfg->runtime_domain_root, O_PATH | O_DIRECTORY, true, err);
    if (dirfd < 0)
        return -1;
    bool said_waiting = false;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int s = try_connect(dirfd, err);
        if (s >= 0 || s == -1)
            return s;

        _cleanup_close_ int boot = lz_domain_lock_open(dirfd, LZ_BOOTSTRAP_LOCK, err);
        if (boot < 0)
            return -1;
        if (flock(boot, LOCK_EX) < 0)
            return lz_error_set(err, errno, "cannot lock %s/%s", cfg->runtime_domain_root.label,
                                LZ_BOOTSTRAP_LOCK);
        s = try_connect(dirfd, err);
        if (s >= 0 || s == -1)
            return s;
        int lock = lz_domain_lock_open(dirfd, LZ_DOMAIN_LOCK, err);
        if (lock < 0)
            return -1;
        if (flock(lock, LOCK_EX | LOCK_NB) == 0) {
            int r = start_coordinator(cfg, dirfd, lock, boot, progress, userdata, err);
            close(lock); /* the coordinator holds its own copy */
            if (r < 0)
                return -1;
            continue;
        }
        close(lock);
        flock(boot, LOCK_UN);
        /* A coordinator holds the Domain but does not answer: it is starting
         * up or tearing down. */
        if (!said_waiting && progress) {
            progress(LZ_PROGRESS_NOTE, "waiting for the Domain's previous generation to finish",
                     userdata);
            said_waiting = true;
        }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec > 120) {
            lz_error_set(err, ETIMEDOUT,
                         "the Domain's coordinator holds its lock but does not "
                         "answer on %s/%s",
                         cfg->runtime_domain_root.label, LZ_COORDINATOR_SOCKET);
            return lz_error_hint(err,
                                 "see 'lazaret status'; if it is stuck, kill the process "
                                 "holding %s/%s (fuser -k it)",
                                 cfg->runtime_domain_root.label, LZ_DOMAIN_LOCK);
        }
        struct timespec d = { 0, 50 * 1000 * 1000 };
        nanosleep(&d, NULL);
    }
}

int lz_domain_recover(const lz_resolved_config *cfg, int runtime_dir_fd, lz_error **err)
{
    char hex[65];
    lz_digest_hex(cfg->domain_id, hex);
    _cleanup_close_ int root =
        lz_plan_open(&cfg->storage_domain_root, O_PATH | O_DIRECTORY, true, err);
    if (root < 0)
        return -1;
    lz_domain_store *st = NULL;
    if (lz_domain_store_open(root, hex, cfg->profile, cfg->workspace.label, &st, err) < 0)
        return -1;
    lz_participant *ps = NULL;
    size_t n = 0;
    int r = lz_store_unreleased(st, &ps, &n, err);
    /* Processes first (the supervisor's pid-namespace init takes every
     * runsc process with it), then files. */
    for (size_t i = 0; r == 0 && i < n; i++) {
        if (!ps[i].has_process)
            continue;
        int k = lz_process_kill_verified(&ps[i].process, 5000, err);
        if (k < 0) {
            lz_error_prefix(err, "cannot recover the previous generation");
            r = -1;
        } else if (k == 1) {
            /* The pid now names another process: not ours, left alone. */
        }
    }
    for (size_t i = 0; r == 0 && i < n; i++) {
        if (ps[i].role != LZ_ROLE_RUNTIME_FILES || !ps[i].resource)
            continue;
        if (strncmp(ps[i].resource, "gen-", 4) != 0 || strchr(ps[i].resource, '/')) {
            continue; /* not a name we write: never remove it */
        }
        if (lz_remove_tree_mapped(runtime_dir_fd, ps[i].resource, cfg->runtime_domain_root.label,
                                  err) < 0) {
            lz_error_prefix(err, "cannot recover the previous generation");
            r = -1;
        }
    }
    /* A generation that ended without its teardown (its coordinator was
     * killed) never gave back what its sandbox left owned by a subordinate
     * id; its processes are gone now. Best effort, as at teardown: the
     * next teardown and 'lazaret state fix-ownership' cover what is left. */
    if (r == 0 && n > 0 && !lz_git_sentry_unsafe_recorded(cfg)) {
        char *report = NULL;
        bool incomplete = false;
        lz_error *e = NULL;
        if (lz_giveback_domain(cfg, &report, &incomplete, &e) < 0)
            lz_error_free(e);
        free(report);
    }
    for (size_t i = 0; r == 0 && i < n; i++)
        if (lz_store_participant_released(st, ps[i].generation_id, ps[i].role, err) < 0)
            r = -1;
    if (r == 0)
        r = lz_store_generations_mark_recovered(st, err);
    if (r == 0)
        unlinkat(runtime_dir_fd, LZ_COORDINATOR_SOCKET, 0);
    lz_participants_free(ps, n);
    lz_domain_store_close(st);
    return r;
}
