/* SPDX-License-Identifier: Apache-2.0
 *
 * The sandbox's processes and the supervisor's other children: the
 * sandbox process and the gofer pinned by pidfd, the sandbox's death told
 * apart from a command's status, the reaper that hears of every child's
 * end (the supervisor is pid 1 of its pid namespace), and the failure
 * report to the coordinator.
 */
#include "supervisor/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/text.h"

void sup_send_failed(sup *s, lz_error *e)
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

/* Read the sandbox's pid from runsc create's --pid-file (in the private
 * generation directory) and hold a pidfd on it. Without one (an unreadable
 * file), a death of the sandbox is still seen when its channel ends, only
 * not told apart from the command's own status 128. */
void sup_watch_sandbox(sup *s)
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
int sup_pin_sandbox_processes(sup *s, lz_error **err)
{
    if (s->sandbox_pidfd < 0)
        return lz_error_set(err, 0,
                            "cannot pin the sandbox process (runsc-sandbox): its pid "
                            "file was unreadable or it is gone");
    _cleanup_free_ char *name =
        lz_xasprintf("runsc/%s_sandbox:%s.state", s->sc->container_id, s->sc->container_id);
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
        return lz_error_set(err, 0,
                            "runsc's state file %s/%s does not name the gofer and the "
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
    fprintf(stderr,
            "lz-supervisor: the sandbox process (runsc-sandbox, pid %d) died under the "
            "generation\n",
            (int) s->sandbox_pid);
    lz_error *e = NULL;
    lz_error_set(&e, 0,
                 "the Domain's sandbox ended unexpectedly: its gVisor kernel process "
                 "(runsc-sandbox) died while commands ran");
    lz_error_hint(&e, "run the command again to start a new sandbox; the runsc log %s may say why",
                  s->sc->log_path ? s->sc->log_path : "(none)");
    sup_send_failed(s, e);
    lz_error_free(e);
}

/* End the forwarders of a session (every one when all is true); the
 * reaper frees their slots. */
void sup_pubs_end(sup *s, uint32_t session_no, bool all)
{
    for (size_t i = 0; i < MAX_PUBS; i++)
        if (s->pubs[i].pid > 0 && (all || s->pubs[i].session_no == session_no))
            kill(s->pubs[i].pid, SIGKILL); /* not reaped yet: still ours */
}

void sup_child_exited(sup *s, pid_t pid, int status)
{
    /* The network's address watcher: without it new host addresses would
     * not be denied, so the sandbox's egress ends (fail closed). */
    if (lz_network_child_exited(&s->net, pid) || lz_network_dns_exited(&s->net, pid, status))
        return;
    for (size_t i = 0; i < MAX_PUBS; i++)
        if (s->pubs[i].pid == pid) {
            if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
                fprintf(stderr,
                        "lz-supervisor: the forwarder of session #%u's --publish "
                        "ended (status %d)\n",
                        s->pubs[i].session_no, status);
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
        sup_pubs_end(s, s->execs[i].session_no, false);
        /* Statuses the sandbox's death also produces: runsc exec's own
         * failure (128, its WaitPID lost the sandbox), a command SIGKILLed
         * (137: gVisor kills every process when the sandbox's init dies,
         * attack round i12b F2), runsc exec itself killed. Not the
         * command's status when the sandbox is gone. */
        bool runsc_failed = WIFEXITED(status) && WEXITSTATUS(status) == 128;
        bool killed =
            (WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGKILL) || WIFSIGNALED(status);
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

void sup_reap(sup *s)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
        sup_child_exited(s, pid, status);
}
