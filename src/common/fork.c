/* SPDX-License-Identifier: Apache-2.0 */
#include "common/fork.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/syscalls.h"

/* What travels on the channel, child to caller: READY alone, or ERROR
 * followed by "errnum", message and hint, each ended by a NUL (a message
 * may hold any other byte). Caller to child: GO. */
#define MSG_READY 'R'
#define MSG_ERROR 'E'
#define MSG_GO 'G'
/* A child's error is a message and a hint, never long: what does not fit is
 * cut, never a reason to fail. */
#define REPORT_MAX 4096

/* ---- in the child ------------------------------------------------------------------- */

/* The channel as it was at the fork: a child that dropped its descriptors
 * may have a new file at the same number, which must not get our text. */
static bool still_the_channel(int channel, const struct stat *was)
{
    struct stat now;
    return fstat(channel, &now) == 0 && S_ISSOCK(now.st_mode) && now.st_dev == was->st_dev &&
           now.st_ino == was->st_ino;
}

static void send_error(int channel, const lz_error *e)
{
    char msg[REPORT_MAX];
    const char *message = e && e->message ? e->message : "";
    const char *hint = e && e->hint ? e->hint : "";
    int n = snprintf(msg, sizeof(msg), "%c%d", MSG_ERROR, e ? e->errnum : 0);
    size_t len = n > 0 ? (size_t) n + 1 : 0; /* with the NUL after errnum */
    size_t ml = strnlen(message, sizeof(msg) - len - 2);
    memcpy(msg + len, message, ml);
    len += ml;
    msg[len++] = '\0';
    size_t hl = strnlen(hint, sizeof(msg) - len - 1);
    memcpy(msg + len, hint, hl);
    len += hl;
    msg[len++] = '\0';
    for (size_t off = 0; off < len;) {
        ssize_t w = send(channel, msg + off, len - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* the caller is gone or stopped listening: nobody to tell */
        off += (size_t) w;
    }
}

static _Noreturn void child_run(lz_fork_fn fn, void *arg, const lz_fork_options *opt, int channel,
                                pid_t caller)
{
    /* A child that outlived its caller would run on for nobody: with a
     * death signal, one whose caller ended before prctl took effect ends
     * here. */
    if (opt->pdeathsig && (prctl(PR_SET_PDEATHSIG, opt->pdeathsig) < 0 || getppid() != caller))
        _exit(1);
    if (opt->name)
        prctl(PR_SET_NAME, opt->name, 0, 0, 0);
    struct stat was;
    if (fstat(channel, &was) < 0)
        _exit(1);
    lz_error *e = NULL;
    int r = fn(arg, channel, &e);
    if (r >= 0)
        _exit(r & 0xff);
    if (still_the_channel(channel, &was))
        send_error(channel, e);
    _exit(1);
}

int lz_fork_ready(int channel)
{
    char c = MSG_READY;
    ssize_t n;
    while ((n = send(channel, &c, 1, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    if (n != 1)
        return -1;
    while ((n = read(channel, &c, 1)) < 0 && errno == EINTR)
        ;
    return n == 1 && c == MSG_GO ? 0 : -1;
}

/* ---- in the caller ------------------------------------------------------------------ */

/* The child's report, as read so far. */
typedef struct report {
    char buf[REPORT_MAX + 1];
    size_t len;
    bool eof;
} report;

/* Read what the channel holds now (blocking = false) or the next piece of
 * it. At most REPORT_MAX bytes are kept; the rest is read and dropped. */
static void report_read(report *r, int channel, bool blocking)
{
    while (!r->eof) {
        char scratch[512];
        bool room = r->len < REPORT_MAX;
        char *to = room ? r->buf + r->len : scratch;
        size_t cap = room ? REPORT_MAX - r->len : sizeof(scratch);
        ssize_t n = recv(channel, to, cap, blocking ? 0 : MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return; /* EAGAIN: all there is for now */
        if (n == 0) {
            r->eof = true;
            return;
        }
        if (room)
            r->len += (size_t) n;
        if (blocking)
            return;
    }
}

/* The child's error, as it set it; a report that is not one (a child that
 * broke the protocol, which is ours) fails with what is known. */
static int report_error(report *r, const char *what, int status, lz_error **err)
{
    r->buf[r->len] = '\0';
    if (r->len == 0 || r->buf[0] != MSG_ERROR)
        return lz_error_set(err, 0, "%s failed (status %d)", what, status);
    const char *errnum = r->buf + 1;
    size_t el = strlen(errnum);
    const char *message = errnum + el + 1 <= r->buf + r->len ? errnum + el + 1 : "";
    const char *hint =
        message + strlen(message) + 1 <= r->buf + r->len ? message + strlen(message) + 1 : "";
    if (!*message)
        return lz_error_set(err, 0, "%s failed (status %d)", what, status);
    lz_error_set(err, atoi(errnum), "%s", message);
    if (*hint)
        lz_error_hint(err, "%s", hint);
    return -1;
}

/* Kill and reap a child that must not go on. */
static void child_abandon(lz_child *child)
{
    lz_best_effort(lz_child_kill(child, SIGKILL, NULL));
    lz_best_effort(lz_child_wait(child, -1, NULL));
}

int lz_fork_call(lz_fork_fn fn, void *arg, const lz_fork_options *opt, lz_child *ret,
                 lz_error **err)
{
    static const lz_fork_options none = { 0 };
    if (!opt)
        opt = &none;
    const char *what = opt->what ? opt->what : "a helper process";
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return lz_error_set(err, errno, "cannot start %s: cannot create its channel", what);
    pid_t caller = getpid();
    /* fork(), not clone3(CLONE_PIDFD) as the exec spawner does: this child
     * goes on running our code, and only fork() runs the C library's (and
     * the sanitizers') fork handlers that make its allocator and thread
     * state usable in a child of a threaded caller. The pidfd is opened at
     * once; nothing reaps the child before that (lz_fork_call's callers do
     * not set SIGCHLD to SIG_IGN, and they wait only for their own
     * children). */
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(sv[0]);
        close(sv[1]);
        return lz_error_set(err, e, "cannot start %s", what);
    }
    if (pid == 0) {
        close(sv[0]);
        child_run(fn, arg, opt, sv[1], caller);
    }
    close(sv[1]);
    int channel = sv[0];
    lz_child child = { .pid = pid, .pidfd = (int) syscall(SYS_pidfd_open, pid, 0) };
    if (child.pidfd < 0) {
        int e = errno;
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        close(channel);
        return lz_error_set(err, e, "cannot start %s: cannot open a pidfd for it", what);
    }

    report rep = { .len = 0 }, *r = &rep;
    bool ready = false;
    int result = -1;
    for (;;) {
        struct pollfd p[2] = { { .fd = child.pidfd, .events = POLLIN },
                               { .fd = channel, .events = POLLIN } };
        int n = poll(p, r->eof ? 1 : 2, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            lz_error_set(err, errno, "cannot wait for %s", what);
            child_abandon(&child);
            goto out;
        }
        if (p[0].revents)
            break; /* it ended: its report is whole in the channel */
        report_read(r, channel, true);
        if (!ready && r->len && r->buf[0] == MSG_READY) {
            ready = true;
            memmove(r->buf, r->buf + 1, --r->len);
            if (opt->on_ready && opt->on_ready(pid, opt->ready_arg, err) < 0) {
                child_abandon(&child);
                goto out;
            }
            char go = MSG_GO;
            if (send(channel, &go, 1, MSG_NOSIGNAL) != 1) {
                lz_error_set(err, errno, "cannot start %s", what);
                child_abandon(&child);
                goto out;
            }
            if (ret) {
                *ret = child;
                result = 0;
                goto out;
            }
        }
    }
    report_read(r, channel, false);
    lz_error *wait_err = NULL;
    int status = lz_child_wait(&child, -1, &wait_err);
    if (status < 0) {
        lz_error_set(err, wait_err->errnum, "cannot wait for %s", what);
        lz_error_free(wait_err);
    } else if (r->len) {
        report_error(r, what, status, err);
    } else if (ret) {
        lz_error_set(err, 0, "%s ended before it was ready (status %d)", what, status);
    } else {
        result = status;
    }
out:
    close(channel);
    return result;
}
