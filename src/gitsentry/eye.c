/* SPDX-License-Identifier: Apache-2.0
 *
 * The Git Sentry's eye (eye.h): a request-reply helper over a
 * SOCK_SEQPACKET pair, descriptors passed with SCM_RIGHTS both ways.
 */
#include "gitsentry/eye.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "ns/userns.h"

/* How long the audit waits for one answer: every operation is a single
 * system call on a local file system; an eye that does not answer in this
 * time is broken, and the audit fails closed. */
#define EYE_ANSWER_SECONDS 5

enum { EYE_OPEN = 1, EYE_WATCH = 2, EYE_RENAME = 3 };

typedef struct eye_request {
    uint32_t op;
    int32_t flags;           /* EYE_OPEN */
    uint32_t mask;           /* EYE_WATCH */
    char path[PATH_MAX];     /* EYE_OPEN: relative path; EYE_RENAME: old name */
    char name[NAME_MAX + 1]; /* EYE_RENAME: new name */
} eye_request;

typedef struct eye_reply {
    int32_t result; /* >= 0, or -1 */
    int32_t errnum; /* with -1 */
} eye_reply;

struct lz_sentry_eye {
    int sock; /* -1 once broken */
    pid_t pid;
    unsigned long requests;
};

/* ---- in the eye: the operation table ------------------------------------------------ */

/* Everything below runs in a child forked from the (multithreaded)
 * coordinator: system calls and stack memory only, no allocation. */

static bool single_component(const char *s)
{
    return s[0] && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static long eye_open(eye_request *q, const int *fds, int *ret_fd)
{
    const int allowed = O_DIRECTORY | O_PATH | O_NOFOLLOW | O_NONBLOCK;
    if ((q->flags & O_ACCMODE) != O_RDONLY || (q->flags & ~(allowed | O_ACCMODE)) || !q->path[0] ||
        q->path[0] == '/') {
        errno = EINVAL;
        return -1;
    }
    /* The kernel's own rule for a trailing symlink opened O_PATH|O_NOFOLLOW
     * (the link itself): the audit lstats and reads links by it. */
    /* openat2 refuses O_PATH with any flag but O_CLOEXEC, O_DIRECTORY and
     * O_NOFOLLOW. */
    int extra = q->flags & O_PATH ? 0 : O_NOCTTY;
    if ((q->flags & O_PATH) && (q->flags & O_NONBLOCK)) {
        errno = EINVAL;
        return -1;
    }
    struct open_how how = { .flags = (uint64_t) (q->flags | extra) | O_CLOEXEC,
                            .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                                       RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };
    long fd;
    int tries = 0;
    do
        fd = syscall(SYS_openat2, fds[0], q->path, &how, sizeof(how));
    while (fd < 0 && errno == EAGAIN && ++tries < 32);
    if (fd < 0)
        return -1;
    *ret_fd = (int) fd;
    return 0;
}

static long eye_watch(eye_request *q, const int *fds, int *ret_fd)
{
    (void) ret_fd;
    /* "/proc/self/fd/N" names exactly the directory passed, whatever its
     * path is now; formatted by hand (no stdio in the child). */
    char path[32] = "/proc/self/fd/";
    char digits[16];
    int n = 0;
    for (unsigned v = (unsigned) fds[1]; n == 0 || v; v /= 10)
        digits[n++] = (char) ('0' + v % 10);
    size_t at = strlen(path);
    while (n)
        path[at++] = digits[--n];
    path[at] = '\0';
    return inotify_add_watch(fds[0], path, q->mask | IN_ONLYDIR);
}

static long eye_rename(eye_request *q, const int *fds, int *ret_fd)
{
    (void) ret_fd;
    if (!single_component(q->path) || !single_component(q->name)) {
        errno = EINVAL;
        return -1;
    }
    return renameat2(fds[0], q->path, fds[1], q->name, RENAME_NOREPLACE);
}

static const struct eye_op {
    long (*run)(eye_request *q, const int *fds, int *ret_fd);
    unsigned n_fds;
} eye_ops[] = {
    [EYE_OPEN] = { eye_open, 1 },
    [EYE_WATCH] = { eye_watch, 2 },
    [EYE_RENAME] = { eye_rename, 2 },
};

static int eye_main(void *arg)
{
    int sock = *(int *) arg;
    /* Nothing of the coordinator's: its client sockets, pidfds and
     * channels must close when it closes them. */
    if (sock > 3)
        syscall(SYS_close_range, 3u, (unsigned) sock - 1, 0u);
    syscall(SYS_close_range, (unsigned) sock + 1, ~0u, 0u);
    for (;;) {
        eye_request q;
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(2 * sizeof(int))];
        } cm;
        struct iovec iov = { .iov_base = &q, .iov_len = sizeof(q) };
        struct msghdr mh = { .msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = cm.buf,
                             .msg_controllen = sizeof(cm.buf) };
        ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
        if (n == 0)
            return 0; /* the coordinator closed: done */
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return 1;
        }
        int fds[2] = { -1, -1 };
        unsigned n_fds = 0;
        bool extra = false;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                continue;
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < k; i++) {
                int fd;
                memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
                if (n_fds < 2)
                    fds[n_fds++] = fd;
                else
                    close(fd), extra = true;
            }
        }
        eye_reply rep = { .result = -1, .errnum = EINVAL };
        int out_fd = -1;
        if ((size_t) n == sizeof(q) && !(mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) && !extra &&
            q.op < LZ_ARRAY_SIZE(eye_ops) && eye_ops[q.op].run && n_fds == eye_ops[q.op].n_fds) {
            q.path[sizeof(q.path) - 1] = '\0';
            q.name[sizeof(q.name) - 1] = '\0';
            long r = eye_ops[q.op].run(&q, fds, &out_fd);
            rep.result = r < 0 ? -1 : (int32_t) r;
            rep.errnum = r < 0 ? errno : 0;
        }
        for (unsigned i = 0; i < n_fds; i++)
            close(fds[i]);
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(sizeof(int))];
        } out;
        struct iovec riov = { .iov_base = &rep, .iov_len = sizeof(rep) };
        struct msghdr rmh = { .msg_iov = &riov, .msg_iovlen = 1 };
        if (out_fd >= 0) {
            memset(&out, 0, sizeof(out));
            rmh.msg_control = out.buf;
            rmh.msg_controllen = sizeof(out.buf);
            struct cmsghdr *c = CMSG_FIRSTHDR(&rmh);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(c), &out_fd, sizeof(int));
        }
        ssize_t s;
        do
            s = sendmsg(sock, &rmh, MSG_NOSIGNAL);
        while (s < 0 && errno == EINTR);
        if (out_fd >= 0)
            close(out_fd);
        if (s < 0)
            return 1;
    }
}

/* ---- in the coordinator ------------------------------------------------------------- */

int lz_sentry_eye_start(lz_sentry_eye **ret, lz_error **err)
{
    *ret = NULL;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return lz_error_set(err, errno, "Git Sentry: cannot create a socket pair for its eye");
    struct timeval tv = { .tv_sec = EYE_ANSWER_SECONDS };
    if (setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
        setsockopt(sv[0], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0) {
        int e = errno;
        close(sv[0]), close(sv[1]);
        return lz_error_set(err, e, "Git Sentry: cannot set up the socket of its eye");
    }
    int child_sock = sv[1];
    pid_t pid;
    if (lz_userns_spawn(NULL, eye_main, &child_sock, &pid, err) < 0) {
        close(sv[0]), close(sv[1]);
        return lz_error_prefix(err, "Git Sentry: cannot start its eye (a helper that audits "
                                    "directories closed to you)");
    }
    close(sv[1]);
    lz_sentry_eye *eye = lz_xcalloc(1, sizeof(*eye));
    eye->sock = sv[0];
    eye->pid = pid;
    *ret = eye;
    return 0;
}

static void eye_break(lz_sentry_eye *eye)
{
    if (eye->sock >= 0)
        close(eye->sock);
    eye->sock = -1;
    if (eye->pid > 0) {
        kill(eye->pid, SIGKILL);
        while (waitpid(eye->pid, NULL, 0) < 0 && errno == EINTR)
            ;
        eye->pid = 0;
    }
}

/* One request; returns the reply's result (and a descriptor in *ret_fd
 * when the eye sent one), or -1 with errno. A transport failure breaks the
 * eye for good (a late answer must never pass for the next one's): EIO
 * from then on. */
static long eye_call(lz_sentry_eye *eye, eye_request *q, const int *fds, unsigned n_fds,
                     int *ret_fd)
{
    if (ret_fd)
        *ret_fd = -1;
    if (!eye || eye->sock < 0) {
        errno = EIO;
        return -1;
    }
    eye->requests++;
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(2 * sizeof(int))];
    } cm;
    memset(&cm, 0, sizeof(cm));
    struct iovec iov = { .iov_base = q, .iov_len = sizeof(*q) };
    struct msghdr mh = { .msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = cm.buf,
                         .msg_controllen = CMSG_SPACE(n_fds * sizeof(int)) };
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(n_fds * sizeof(int));
    memcpy(CMSG_DATA(c), fds, n_fds * sizeof(int));
    ssize_t s;
    do
        s = sendmsg(eye->sock, &mh, MSG_NOSIGNAL);
    while (s < 0 && errno == EINTR);
    if (s != (ssize_t) sizeof(*q)) {
        eye_break(eye);
        errno = EIO;
        return -1;
    }
    eye_reply rep = { 0 };
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } in;
    struct iovec riov = { .iov_base = &rep, .iov_len = sizeof(rep) };
    struct msghdr rmh = {
        .msg_iov = &riov, .msg_iovlen = 1, .msg_control = in.buf, .msg_controllen = sizeof(in.buf)
    };
    ssize_t n;
    do
        n = recvmsg(eye->sock, &rmh, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    int got = -1;
    for (struct cmsghdr *k = n > 0 ? CMSG_FIRSTHDR(&rmh) : NULL; k; k = CMSG_NXTHDR(&rmh, k))
        if (k->cmsg_level == SOL_SOCKET && k->cmsg_type == SCM_RIGHTS &&
            k->cmsg_len == CMSG_LEN(sizeof(int)) && got < 0)
            memcpy(&got, CMSG_DATA(k), sizeof(int));
    if (n != (ssize_t) sizeof(rep) || (rmh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
        if (got >= 0)
            close(got);
        eye_break(eye);
        errno = EIO;
        return -1;
    }
    if (rep.result < 0) {
        if (got >= 0)
            close(got);
        errno = rep.errnum > 0 ? rep.errnum : EIO;
        return -1;
    }
    if (ret_fd)
        *ret_fd = got;
    else if (got >= 0)
        close(got);
    return rep.result;
}

static bool fits(const char *s, size_t size)
{
    return s && strlen(s) < size;
}

int lz_sentry_eye_open(lz_sentry_eye *eye, int dirfd, const char *rel, int flags)
{
    eye_request q = { .op = EYE_OPEN, .flags = flags };
    if (!fits(rel, sizeof(q.path))) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(q.path, rel);
    int fd = -1;
    if (eye_call(eye, &q, &dirfd, 1, &fd) < 0)
        return -1;
    if (fd < 0) {
        errno = EIO;
        return -1;
    }
    return fd;
}

int lz_sentry_eye_watch(lz_sentry_eye *eye, int inotify_fd, int dirfd, uint32_t mask)
{
    eye_request q = { .op = EYE_WATCH, .mask = mask };
    int fds[2] = { inotify_fd, dirfd };
    return (int) eye_call(eye, &q, fds, 2, NULL);
}

int lz_sentry_eye_rename(lz_sentry_eye *eye, int olddirfd, const char *oldname, int newdirfd,
                         const char *newname)
{
    eye_request q = { .op = EYE_RENAME };
    if (!fits(oldname, sizeof(q.path)) || !fits(newname, sizeof(q.name))) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(q.path, oldname);
    strcpy(q.name, newname);
    int fds[2] = { olddirfd, newdirfd };
    return (int) eye_call(eye, &q, fds, 2, NULL);
}

unsigned long lz_sentry_eye_requests(const lz_sentry_eye *eye)
{
    return eye ? eye->requests : 0;
}

void lz_sentry_eye_stop(lz_sentry_eye *eye)
{
    if (!eye)
        return;
    if (eye->sock >= 0)
        close(eye->sock); /* the eye reads end-of-file and exits */
    eye->sock = -1;
    if (eye->pid > 0)
        while (waitpid(eye->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    free(eye);
}
