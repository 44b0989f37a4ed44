/* SPDX-License-Identifier: Apache-2.0
 *
 * The sandbox's lifecycle: prepare (the Network Sidecar, the persistent
 * overlays, the bundle, `runsc create`) as soon as the supervisor runs,
 * start at SUP_START (`runsc start`, the pinned processes, the statx
 * probe), stop (kill by pidfd, `runsc kill` and `delete`, unmounts).
 */
#include "supervisor/internal.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/timing.h"

/* runsc releases up to release-20240729.0 refuse --network=sandbox
 * ("cannot run with network enabled in root network namespace") whenever
 * /proc/sys/net/core/rmem_default is accessible from a thread that joined
 * the sandbox's network namespace (isRootNS() in runsc/sandbox/network.go,
 * called by `runsc start`); Linux 6.5 and later show that file in every
 * network namespace (release-20240807.0 checks dev_weight instead). Which
 * runsc needs it is found by its first start (start_learning_netstack). A tmpfs over /proc/sys/net
 * in this process's own mount namespace, where runsc runs, hides it - after the Network Sidecar's
 * sysctl writes, which it would hide too (docs/platform.md "runsc's
 * netstack in a rootless namespace"). Nothing of the host changes: the
 * mount namespace is the supervisor's and ends with it. */
int sup_cover_proc_sys_net(lz_error **err)
{
    if (mount("tmpfs", "/proc/sys/net", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "size=4k,mode=0555") < 0) {
        lz_error_set(err, errno,
                     "cannot prepare runsc's network stack: mounting a tmpfs over "
                     "/proc/sys/net in the supervisor's mount namespace failed");
        return lz_error_hint(err, "run 'lazaret doctor' (docs/errors.md \"runsc\"); a runsc "
                                  "from 2024-08-07 on does not need it (LAZARET_RUNSC)");
    }
    return 0;
}

/* `runsc create` of the generation's bundle. Marked created before the
 * call: a create that failed half-way is deleted by sup_stop too. */
static int runsc_create(sup *s, lz_error **err)
{
    _cleanup_free_ char *bundle = sup_join(s->sc->generation_dir, "bundle");
    _cleanup_free_ char *pidfile = sup_join(s->sc->generation_dir, "sandbox.pid");
    char *const create[] = {
        (char *) "create", (char *) "--bundle",          bundle, (char *) "--pid-file",
        pidfile,           (char *) s->sc->container_id, NULL
    };
    s->created = true;
    return sup_runsc_simple(s, create, "runsc-create.err", err);
}

/* Everything before the sandbox's init runs: the Network Sidecar, the
 * persistent overlays, the runtime spec and, unless SUP_START is already
 * waiting, `runsc create`. Done as soon as the supervisor runs, before it
 * reads SUP_START, so that it overlaps the coordinator's own start work:
 * the Git Sentry's watches, which must be in place before anything of the
 * sandbox runs (the coordinator sends SUP_START after them; nothing of
 * the container runs before `runsc start`). A failure is kept and
 * answered to SUP_START. */
void sup_prepare(sup *s)
{
    lz_error **err = &s->prepare_err;
    if (lz_mkdir_at(s->gen_fd, "runsc", 0700, err) < 0)
        return;
    /* SR-5: the network policy is in force before the sandbox exists. */
    if (lz_network_setup(s->sc->cfg, s->sc->generation_dir, s->gen_fd, s->sc->denial_logs_fd,
                         &s->net, err) < 0)
        return;
    lz_timing_mark("supervisor: network sidecar ready");
    if (lz_state_anchor_mount(s->sc->cfg, s->sc->image->rootfs_label, &s->sc->image->user,
                              s->gen_fd, s->sc->generation_dir, &s->anchor, err) < 0 ||
        sup_write_config(s, err) < 0)
        return;
    if (s->cover_proc_sys_net && sup_cover_proc_sys_net(err) < 0)
        return;
    lz_timing_mark("supervisor: state mounted, spec written");
    /* SUP_START already here: nothing left to overlap, and `runsc run
     * --detach` (create and start in one Go process) is ~13 ms shorter.
     * Not while this runsc's netstack is being learned: that needs a
     * `runsc start` of its own to try again (start_learning_netstack). */
    struct pollfd p = { .fd = s->sock, .events = POLLIN };
    if (s->facts_were_cached && poll(&p, 1, 0) == 1)
        return;
    if (runsc_create(s, err) < 0)
        return;
    lz_timing_mark("supervisor: runsc create");
}

/* The first start with this runsc (and kernel): does its netstack accept
 * the sandbox's own network namespace as it is? `runsc start` sets up the
 * network before anything of the container runs, and a start refused
 * there leaves the container "created" (runsc/container Start returns
 * before it changes the status), so it can be asked twice: as it is - the
 * answer Lazaret prefers, since runsc's own root-namespace check then
 * stays in force - and, refused, once more with /proc/sys/net covered.
 * Refused both ways is an error that shows both answers; a guess is never
 * made. */
static int start_learning_netstack(sup *s, lz_error **err)
{
    char *const start[] = { (char *) "start", (char *) s->sc->container_id, NULL };
    lz_error *bare = NULL, *covered = NULL;
    if (sup_runsc_simple(s, start, "runsc-start.err", &bare) == 0) {
        s->facts.netstack_cover = false;
        return 0;
    }
    lz_timing_mark("supervisor: runsc start refused without the /proc/sys/net cover");
    if (sup_cover_proc_sys_net(err) < 0) {
        lz_error_free(bare);
        return -1;
    }
    s->cover_proc_sys_net = true;
    if (sup_runsc_simple(s, start, "runsc-start-covered.err", &covered) == 0) {
        lz_error_free(bare);
        s->facts.netstack_cover = true;
        return 0;
    }
    lz_error_set(err, 0,
                 "%s could not start the sandbox, neither as it is (%s) nor with /proc/sys/net "
                 "covered (%s)",
                 s->sc->runsc, bare->message, covered->message);
    lz_error_hint(err,
                  "see %s/runsc-start.err, runsc-start-covered.err and the runsc log %s; "
                  "'lazaret doctor' checks this runsc; another can be chosen with %s "
                  "(docs/errors.md \"runsc\")",
                  s->sc->generation_dir, s->sc->log_path ? s->sc->log_path : "(none)",
                  LZ_RUNSC_ENV);
    lz_error_free(bare);
    lz_error_free(covered);
    return -1;
}

int sup_start(sup *s, lz_error **err)
{
    if (s->prepare_err) {
        *err = lz_error_take(&s->prepare_err);
        return -1;
    }
    if (!s->facts_were_cached) {
        /* The create sup_prepare made unless SUP_START came first (then
         * it left it to here). */
        if (!s->created && runsc_create(s, err) < 0)
            return -1;
        if (start_learning_netstack(s, err) < 0)
            return -1;
        lz_timing_mark("supervisor: runsc start (netstack learned)");
    } else if (s->created) {
        char *const start[] = { (char *) "start", (char *) s->sc->container_id, NULL };
        if (sup_runsc_simple(s, start, "runsc-start.err", err) < 0)
            return -1;
        lz_timing_mark("supervisor: runsc start");
    } else {
        _cleanup_free_ char *bundle = sup_join(s->sc->generation_dir, "bundle");
        _cleanup_free_ char *pidfile = sup_join(s->sc->generation_dir, "sandbox.pid");
        char *const run[] = { (char *) "run",
                              (char *) "--detach",
                              (char *) "--bundle",
                              bundle,
                              (char *) "--pid-file",
                              pidfile,
                              (char *) s->sc->container_id,
                              NULL };
        s->created = true;
        if (sup_runsc_simple(s, run, "runsc-run.err", err) < 0)
            return -1;
        lz_timing_mark("supervisor: runsc run --detach");
    }
    s->started = true;
    sup_watch_sandbox(s);
    if (sup_pin_sandbox_processes(s, err) < 0)
        return -1;
    /* Armed once the sandbox runs; checked once here, so a protection lost
     * since the composition refuses the start (mountguard.c). */
    if (sup_guard_arm(s, err) < 0)
        return -1;

    /* Detect, don't assume: does statx(AT_NO_AUTOMOUNT) work here? Asked
     * once per runsc binary (load_runsc_facts); the probe's statx is of
     * "/", this fresh sandbox's own root, which no earlier sandbox could
     * have shaped. */
    if (!s->facts_were_cached) {
        char *const probe[] = { (char *) "exec", (char *) s->sc->container_id,
                                (char *) LZ_GUEST_EXEC, (char *) "--probe-statx", NULL };
        int pid = sup_runsc_run(s, probe, -1, -1, -1, -1, err);
        if (pid < 0)
            return -1;
        int status = sup_wait_status(s, pid);
        bool answered = status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) <= 1;
        s->facts.statx_ok = answered && WEXITSTATUS(status) == 0;
        /* Kept only as a real answer (0 works, 1 fails), never a failed
         * runsc exec. An unknown release date is kept too: it decides
         * nothing. */
        if (answered && s->facts_dir_fd >= 0)
            lz_runsc_facts_store(s->facts_dir_fd, s->facts_key, &s->facts);
        lz_timing_mark("supervisor: statx probe");
    }
    s->statx_fix = !s->facts.statx_ok && s->sc->guest_lib_dir != NULL;

    /* The resolver the sidecar provides, when the root overlay could not
     * be given it (write_resolv_conf). */
    if (!s->resolv_written) {
        char *const resolv[] = { (char *) "exec",          (char *) s->sc->container_id,
                                 (char *) LZ_GUEST_EXEC,   (char *) "--resolv-conf",
                                 (char *) LZ_NET_RESOLVER, NULL };
        int pid = sup_runsc_run(s, resolv, -1, -1, -1, -1, err);
        if (pid < 0)
            return -1;
        sup_wait_status(s, pid);
        lz_timing_mark("supervisor: resolv.conf written from inside");
    }
    lz_timing_flush(stderr, NULL);
    return 0;
}

void sup_stop(sup *s)
{
    sup_pubs_end(s, 0, true);
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
    sup_guard_clear(s); /* the sandbox is gone: nothing left to guard */
    if (s->created) {
        if (s->started) {
            char *const kill_[] = { (char *) "kill", (char *) s->sc->container_id, (char *) "KILL",
                                    NULL };
            sup_runsc_simple(s, kill_, "runsc-kill.err", NULL);
        }
        char *const del[] = { (char *) "delete", (char *) "--force", (char *) s->sc->container_id,
                              NULL };
        sup_runsc_simple(s, del, "runsc-delete.err", NULL);
        s->started = s->created = false;
    }
    lz_state_anchor_unmount(&s->anchor);
    lz_network_clear(&s->net);
}
