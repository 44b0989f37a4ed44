/* SPDX-License-Identifier: Apache-2.0
 *
 * The supervisor channel (protocol/table.h): the handler rows of every
 * message the coordinator sends, and the loop that serves them and the
 * reaper's signals until SUP_STOP.
 */
#include "supervisor/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

/* Handlers return -1 for a malformed message: a protocol violation from
 * the coordinator, which ends the channel (the sandbox is stopped). */
static int on_start(void *ctx, lz_proto_msg *m)
{
    sup *s = ctx;
    if (!lz_msg_empty_decode(&m->r))
        return -1;
    lz_error *err = NULL;
    lz_wbuf b;
    int r = sup_start(s, &err);
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
        sup_send_failed(s, err);
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
            sup_send_failed(s, e);
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
    if (pub_failed || sup_exec(s, &e, m->fds, &err) < 0) {
        sup_pubs_end(s, e.session_no, false);
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
    pid_t pid = slot == MAX_PUBS ? lz_error_set(&err, EAGAIN, "publish: too many published ports")
                                 : lz_network_publish(&s->net, m->fds[0], (uint16_t) port, &err);
    if (pid < 0) {
        fprintf(stderr, "lz-supervisor: session #%u: %s\n", no, err->message);
        lz_error_free(err);
        s->pub_failed = true;
        s->pub_failed_session = no;
        return 0;
    }
    s->pubs[slot] = (pub_slot){ pid, no };
    return 0; /* lz_proto_msg_clear closes the supervisor's copy */
}

static int on_signal_msg(void *ctx, lz_proto_msg *m)
{
    uint32_t no, sig;
    if (!lz_msg_pair_decode(&m->r, &no, &sig) ||
        (sig != SIGHUP && sig != SIGTERM && sig != SIGINT && sig != SIGQUIT && sig != SIGKILL))
        return -1;
    sup_signal(ctx, no, sig);
    return 0;
}

static int on_stop(void *ctx, lz_proto_msg *m)
{
    sup *s = ctx;
    if (!lz_msg_empty_decode(&m->r))
        return -1;
    sup_stop(s);
    lz_wbuf b;
    lz_msg_empty_encode(&b, LZ_SUP_STOPPED);
    lz_wire_post(s->sock, &b);
    s->stopped = true;
    return 0;
}

const lz_proto_handler_row lz_supervisor_handlers[] = {
    { LZ_SUP_START, on_start },     { LZ_SUP_EXEC, on_exec }, { LZ_SUP_SIGNAL, on_signal_msg },
    { LZ_SUP_PUBLISH, on_publish }, { LZ_SUP_STOP, on_stop },
};
const size_t lz_supervisor_handlers_len =
    sizeof(lz_supervisor_handlers) / sizeof(lz_supervisor_handlers[0]);

/* Serve the channel until SUP_STOP (returns 0), the coordinator's end, a
 * violation or a signal (stops the sandbox, returns 1). Violations are
 * logged to stderr, which is the Domain's coordinator.log. */
int sup_request_loop(sup *s)
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
        /* The mount table raises POLLPRI|POLLERR on every change of this
         * mount namespace (mountguard.c); -1 is ignored by poll. */
        struct pollfd p[4] = { { .fd = s->sock, .events = POLLIN },
                               { .fd = sfd, .events = POLLIN },
                               { .fd = s->mountinfo_fd, .events = POLLPRI },
                               { .fd = s->guard_inotify_fd, .events = POLLIN } };
        if (poll(p, 4, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        /* First: a lost protection stops the sandbox before any request
         * is served. */
        if (p[2].revents & (POLLPRI | POLLERR))
            sup_guard_changed(s);
        if (p[3].revents & POLLIN)
            sup_guard_renamed(s);
        if (p[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
                if (si.ssi_signo == SIGCHLD)
                    sup_reap(s);
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
            fprintf(stderr,
                    "lz-supervisor: protocol violation: malformed %s; stopping the "
                    "sandbox\n",
                    lz_proto_name(type));
            break;
        }
        if (s->stopped)
            return 0;
    }
    sup_stop(s);
    return 1;
}
