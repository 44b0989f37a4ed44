/* SPDX-License-Identifier: Apache-2.0
 *
 * The Runtime Supervisor's process (supervisor.h): forked into the
 * Domain's user namespace, it takes a mount and a pid namespace of its
 * own, sets the Domain's resource bounds and runsc's flags, prepares the
 * sandbox (lifecycle.c) and serves the coordinator (requests.c). The
 * other files of the supervisor are listed in internal.h.
 */
#include "supervisor/supervisor.h"
#include "supervisor/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fork.h"
#include "common/nodump.h"
#include "common/timing.h"
#include "supervisor/limits.h"

typedef struct spawn_ctx {
    const lz_supervisor_config *sc;
    int sock;
    int pid_pipe;
    uint64_t memory_bound, task_bound; /* read here, in the caller's pid namespace */
} spawn_ctx;

/* What this runsc does (runsc_info.h): from the Storage Root's cache when
 * it was learned for this very binary (and kernel), else asked now: its
 * release date (shown only) and the flags it accepts, here; whether its
 * netstack needs /proc/sys/net covered and how statx behaves, by this
 * start's sandbox (lifecycle.c), all kept for the next start. A runsc
 * that lacks a flag Lazaret passes is refused here, by name, rather than
 * failing later with runsc's own usage text. */
static int load_runsc_facts(sup *s, lz_error **err)
{
    lz_error *e = NULL;
    s->facts_dir_fd = -1;
    if (lz_runsc_facts_key(s->sc->runsc, s->facts_key, sizeof(s->facts_key)) == 0)
        s->facts_dir_fd = lz_plan_open(&s->sc->cfg->storage_root, O_PATH | O_DIRECTORY, true, &e);
    lz_error_free(e);
    if (s->facts_dir_fd >= 0 &&
        lz_runsc_facts_load(s->facts_dir_fd, s->facts_key, &s->facts) == 0) {
        s->facts_were_cached = true;
        return 0;
    }
    lz_spawn_output out = { 0 };
    char *const version[] = { (char *) "runsc", (char *) "--version", NULL };
    if (lz_spawn_capture(s->sc->runsc, version, NULL, &out, NULL) == 0 && out.data)
        s->facts.release_date = lz_runsc_release_date(out.data);
    lz_spawn_output_free(&out);
    /* runsc prints its flags on stderr. */
    char *const flags[] = { (char *) "runsc", (char *) "flags", NULL };
    const lz_spawn_options fopt = { .capture_max = LZ_RUNSC_FLAGS_MAX, .merge_stderr = true };
    lz_spawn_output fl = { 0 };
    int st = lz_spawn_capture(s->sc->runsc, flags, &fopt, &fl, NULL);
    int r = 0;
    if (st != 0 || !fl.data || fl.truncated) {
        lz_error_set(err, 0, "cannot ask %s which flags it accepts ('runsc flags' %s)",
                     s->sc->runsc, st < 0 ? "could not run" : "failed");
        r = lz_error_hint(err,
                          "run 'lazaret doctor'; reinstall runsc or set %s to another "
                          "(docs/errors.md \"runsc\")",
                          LZ_RUNSC_ENV);
    }
    if (r == 0)
        s->facts.has_directfs = lz_runsc_flags_has(fl.data, "directfs");
    for (size_t i = 0; r == 0 && lz_runsc_needed_flags[i]; i++)
        if (!lz_runsc_flags_has(fl.data, lz_runsc_needed_flags[i])) {
            lz_error_set(err, 0, "%s does not accept --%s, which Lazaret needs", s->sc->runsc,
                         lz_runsc_needed_flags[i]);
            r = lz_error_hint(err,
                              "use a runsc Lazaret supports (docs/runtime.md \"Which "
                              "runsc\"): unset %s or point it at another",
                              LZ_RUNSC_ENV);
        }
    lz_spawn_output_free(&fl);
    return r;
}

static int supervisor_main(spawn_ctx *c)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    prctl(PR_SET_NAME, "lz-supervisor");
    lz_timing_forget();   /* the coordinator's to write */
    lz_nodump_reassert(); /* this process keeps the profile's env values */
    sup s = { .sc = c->sc,
              .sock = c->sock,
              .gen_fd = -1,
              .sandbox_pidfd = -1,
              .gofer_pidfd = -1,
              .facts_dir_fd = -1,
              .mailbox_fd = -1,
              .mountinfo_fd = -1,
              .guard_inotify_fd = -1 };
    /* A /proc of our own pid namespace: runsc re-executes /proc/self/exe
     * from its sandbox child, which fails (EACCES) through the /proc of the
     * parent pid namespace. */
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
        lz_error *e = NULL;
        lz_error_set(&e, errno, "cannot mount /proc for the supervisor's pid namespace");
        sup_send_failed(&s, e);
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
            sup_send_failed(&s, e);
            lz_error_free(e);
            return 1;
        }
    }
    s.gen_fd = open(c->sc->generation_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (s.gen_fd < 0) {
        lz_error *e = NULL;
        lz_error_set(&e, errno, "cannot open %s", c->sc->generation_dir);
        sup_send_failed(&s, e);
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
            sup_send_failed(&s, e);
            lz_error_free(e);
            return 1;
        }
    }
    /* runsc global flags. */
    char *root = sup_join(c->sc->generation_dir, "runsc");
    s.runsc_globals = lz_xcalloc(12, sizeof(char *));
    s.runsc_globals[s.n_globals++] = lz_xasprintf("--root=%s", root);
    free(root);
    /* Rootless runsc cannot configure cgroups unless the user's cgroup is
     * delegated and writable (docs/platform.md "runsc as an unprivileged user"): detect, don't
     * assume. */
    if (access("/sys/fs/cgroup", W_OK) != 0)
        s.runsc_globals[s.n_globals++] = lz_xstrdup("--ignore-cgroups");
    /* runsc's own network stack (gVisor's netstack), always: runsc 2022's
     * host networking breaks blocking socket I/O and a recvmsg with an
     * address buffer panics the whole sandbox (docs/network.md "runsc's
     * network stack"). Releases up to 2024-07-29 refuse it in any but a
     * "non-root" network namespace, which they recognise by a check that
     * current kernels fail and this supervisor can satisfy
     * (cover_proc_sys_net): whether this runsc needs that is what its
     * first start found (lifecycle.c), never its date. */
    lz_error *facts_err = NULL;
    if (load_runsc_facts(&s, &facts_err) < 0)
        s.prepare_err = facts_err; /* answered to SUP_START */
    s.runsc_globals[s.n_globals++] = lz_xstrdup("--network=sandbox");
    s.cover_proc_sys_net = s.facts_were_cached && s.facts.netstack_cover;
    /* The image is shared read-only by every Domain: the sandbox writes to
     * an in-sandbox overlay of the root only, discarded with the sandbox.
     * Bind mounts (workspace, persistent dirs, volumes) are not wrapped. */
    s.runsc_globals[s.n_globals++] = lz_xstrdup("--overlay2=root:memory");
    /* Every file the sandbox reaches goes through the gofer, as on the
     * releases Lazaret's mount protections were built and attacked on
     * (docs/platform.md "Other differences of 2024-07-29"): with directfs
     * (2023 on, default true) the sentry opens host files itself, and on
     * 2024-07-29 the sandbox got .git/config, which the Git Sentry binds
     * read-only, replaced on the host (test_git.py). */
    if (s.facts.has_directfs)
        s.runsc_globals[s.n_globals++] = lz_xstrdup("--directfs=false");
    if (c->sc->log_path)
        s.runsc_globals[s.n_globals++] = lz_xasprintf("--log=%s", c->sc->log_path);
    s.runsc_globals[s.n_globals] = NULL;
    lz_timing_mark("supervisor: runsc version read, flags set");
    if (!s.prepare_err)
        sup_prepare(&s);
    return sup_request_loop(&s);
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
    int *keep = lz_xcalloc(7 + n_cfg, sizeof(int));
    size_t n = 0;
    keep[n++] = STDIN_FILENO;
    keep[n++] = STDOUT_FILENO;
    keep[n++] = STDERR_FILENO;
    keep[n++] = c->sock;
    keep[n++] = c->pid_pipe;
    keep[n++] = c->sc->image->bundle.ancestor_fd;
    keep[n++] = c->sc->denial_logs_fd; /* the Network Sidecar's keeper writes there */
    n += lz_resolved_config_fds(cfg, keep + n, n_cfg);
    int r = lz_close_fds_except(keep, n);
    free(keep);
    return r;
}

static int supervisor_child(void *arg, int channel, lz_error **err)
{
    (void) err;
    spawn_ctx *c = arg;
    if (lz_fork_ready(channel) < 0)
        return 122;
    close(channel); /* the supervisor reports through its own channel from here on */
    close(c->pid_pipe);
    return supervisor_main(c);
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
    /* The first process forked now is pid 1 of the new pid namespace. */
    lz_fork_options opt = { .what = "the Runtime Supervisor" };
    lz_child child;
    if (lz_fork_call(supervisor_child, c, &opt, &child, NULL) < 0)
        return 122;
    pid_t pid = lz_child_release(&child);
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
