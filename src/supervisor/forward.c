/* SPDX-License-Identifier: Apache-2.0 */
#include "supervisor/forward.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---- confinement ------------------------------------------------------- */

#if defined(__x86_64__)
#define FW_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define FW_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

/* What the relay (and malloc, and the sanitizers' allocator) calls. */
static const int fw_allowed[] = {
    SYS_read,
    SYS_write,
    SYS_close,
    SYS_ppoll,
    SYS_accept4,
    SYS_socket,
    SYS_connect,
    SYS_shutdown,
    SYS_getsockopt,
    SYS_setsockopt,
    SYS_recvfrom,
    SYS_sendto,
    SYS_clock_gettime,
    SYS_brk,
    SYS_mmap,
    SYS_munmap,
    SYS_mremap,
    SYS_madvise,
    SYS_rt_sigreturn,
    SYS_restart_syscall,
    SYS_exit,
    SYS_exit_group,
    SYS_futex,
    /* The sanitizers' runtime, at exit and in reports: harmless. */
    SYS_sigaltstack,
    SYS_getpid,
    SYS_gettid,
    SYS_sched_yield,
#ifdef SYS_poll
    SYS_poll,
#endif
};

int lz_forward_confine(void)
{
    return lz_relay_confine(2 * LZ_FORWARD_MAX_CONNS + 16);
}

int lz_drop_privileges(unsigned max_fds)
{
    struct rlimit nofile = { max_fds, max_fds };
    if (setrlimit(RLIMIT_NOFILE, &nofile) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -1;
    /* Every capability of the user namespace (the process is its root):
     * first the bounding set, then every set of this process. */
    for (int cap = 0; cap <= 63; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
            return -1;
    struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof(data));
    if (syscall(SYS_capset, &hdr, data) < 0)
        return -1;
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return -1;
    return 0;
}

int lz_relay_confine(unsigned max_fds)
{
    if (lz_drop_privileges(max_fds) < 0)
        return -1;
#ifdef FW_AUDIT_ARCH
    enum { N = sizeof(fw_allowed) / sizeof(fw_allowed[0]) };
    struct sock_filter f[4 + 2 * N + 1];
    size_t k = 0;
    /* A call of another architecture (x32, i386 through int 0x80) is
     * refused outright: its numbers mean other calls. */
    f[k++] = (struct sock_filter) BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                           offsetof(struct seccomp_data, arch));
    f[k++] = (struct sock_filter) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, FW_AUDIT_ARCH, 1, 0);
    f[k++] = (struct sock_filter) BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
    f[k++] =
        (struct sock_filter) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    for (size_t i = 0; i < N; i++) {
        f[k++] = (struct sock_filter) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t) fw_allowed[i],
                                               0, 1);
        f[k++] = (struct sock_filter) BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    }
    /* Anything else fails with EPERM (not a kill: a sanitizer runtime's
     * occasional extra call must not end the relay; denied is denied). */
    f[k++] = (struct sock_filter) BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
    struct sock_fprog prog = { (unsigned short) k, f };
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
        return -1;
#endif
    return 0;
}

/* ---- one relayed connection ------------------------------------------- */

int64_t lz_relay_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t) t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int lz_relay_poll(struct pollfd *p, size_t n, int64_t wait)
{
    struct timespec ts = { wait / 1000, (wait % 1000) * 1000000 };
    if (ppoll(p, n, wait < 0 ? NULL : &ts, NULL) < 0)
        return errno == EINTR ? 0 : -1;
    return p[0].revents & (POLLERR | POLLNVAL) ? -1 : 1;
}

int lz_relay_init(lz_relay *r, int a, int b, bool connecting, int64_t now, const void *first,
                  size_t first_len)
{
    *r = (lz_relay){ .a = -1, .b = -1 };
    if (first_len > LZ_FORWARD_BUF)
        return -1;
    char *b1 = malloc(LZ_FORWARD_BUF), *b2 = malloc(LZ_FORWARD_BUF);
    if (!b1 || !b2) {
        free(b1);
        free(b2);
        return -1;
    }
    if (first_len)
        memcpy(b1, first, first_len);
    *r = (lz_relay){ .a = a,
                     .b = b,
                     .connecting = connecting,
                     .deadline = now + LZ_FORWARD_CONNECT_MS,
                     .ab = { .buf = b1, .len = first_len },
                     .ba = { .buf = b2 } };
    return 0;
}

int lz_relay_queue_to_a(lz_relay *r, const void *bytes, size_t len)
{
    if (len > LZ_FORWARD_BUF - r->ba.off - r->ba.len)
        return -1;
    if (len)
        memcpy(r->ba.buf + r->ba.off + r->ba.len, bytes, len);
    r->ba.len += len;
    return 0;
}

int lz_relay_gate(lz_relay *r, uint64_t total)
{
    if (r->ab.len > total)
        return -1;
    r->ab_gated = true;
    r->ab_left = total - r->ab.len;
    return 0;
}

bool lz_relay_gate_shut(const lz_relay *r)
{
    return r->ab_gated && r->ab_left == 0 && !r->ab.eof;
}

int lz_relay_admit(lz_relay *r, const void *bytes, size_t len, uint64_t total)
{
    if (total < len || len > LZ_FORWARD_BUF - r->ab.len)
        return -1;
    if (r->ab.off) {
        memmove(r->ab.buf, r->ab.buf + r->ab.off, r->ab.len);
        r->ab.off = 0;
    }
    memcpy(r->ab.buf + r->ab.len, bytes, len);
    r->ab.len += len;
    r->ab_left = total - len;
    return 0;
}

void lz_relay_a_ended(lz_relay *r, int64_t now)
{
    r->ab.eof = true;
    r->deadline = now + LZ_FORWARD_LINGER_MS;
    /* Nothing waits for b: the half-close goes now (the loop may not wake
     * for b otherwise). With bytes waiting, or b still connecting, the
     * pump passes it on after them. */
    if (!r->ab.len && !r->connecting && !r->ab.shut &&
        (shutdown(r->b, SHUT_WR) == 0 || errno == ENOTCONN))
        r->ab.shut = true;
}

void lz_relay_end(lz_relay *r, bool abort)
{
    if (abort) {
        /* An abortive close (RST) on the side that is still open when the
         * other failed, so the peer sees an error, not a clean end. */
        struct linger l = { 1, 0 };
        if (r->a >= 0)
            setsockopt(r->a, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
        if (r->b >= 0)
            setsockopt(r->b, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    }
    if (r->a >= 0)
        close(r->a);
    if (r->b >= 0)
        close(r->b);
    free(r->ab.buf);
    free(r->ba.buf);
    *r = (lz_relay){ .a = -1, .b = -1 };
}

/* Move what can be moved in one direction. -1: the connection failed;
 * *moved is set when bytes were read or written. left (NULL: no gate):
 * at most that many bytes are read, and it is lowered by what was. */
static int dir_pump(lz_relay_dir *d, int from, int to, bool readable, uint64_t *left, bool *moved)
{
    if (readable && !d->eof && d->len < LZ_FORWARD_BUF && (!left || *left)) {
        /* Compact first so the free room is one piece. */
        if (d->off) {
            memmove(d->buf, d->buf + d->off, d->len);
            d->off = 0;
        }
        size_t room = LZ_FORWARD_BUF - d->len;
        if (left && *left < room)
            room = (size_t) *left;
        ssize_t n = recv(from, d->buf + d->len, room, 0);
        if (n > 0) {
            if (left)
                *left -= (uint64_t) n;
            d->len += (size_t) n;
            *moved = true;
        } else if (n == 0)
            d->eof = true;
        else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return -1;
    }
    /* Whatever waits is tried (a non-blocking send that cannot go now says
     * EAGAIN), so bytes just read leave in the same round. */
    if (d->len) {
        ssize_t n = send(to, d->buf + d->off, d->len, MSG_NOSIGNAL);
        if (n > 0) {
            *moved = true;
            d->off += (size_t) n;
            d->len -= (size_t) n;
            if (!d->len)
                d->off = 0;
        } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            return -1;
        }
    }
    if (d->eof && !d->len && !d->shut) {
        /* The half-close passes on; the other direction goes on. */
        if (shutdown(to, SHUT_WR) < 0 && errno != ENOTCONN)
            return -1;
        d->shut = true;
    }
    return 0;
}

static void lower_wait(int64_t *wait, int64_t deadline, int64_t now)
{
    int64_t left = deadline > now ? deadline - now : 0;
    if (*wait < 0 || left < *wait)
        *wait = left;
}

void lz_relay_events(const lz_relay *r, int64_t now, short *ea, short *eb, int64_t *wait)
{
    *ea = *eb = 0;
    if (r->connecting) {
        *eb = POLLOUT;
        lower_wait(wait, r->deadline, now);
        return;
    }
    if (r->ab.eof)
        lower_wait(wait, r->deadline, now);
    /* Read a side only while its direction has room (flow control); write
     * it only while something waits for it. */
    if (!r->ab.eof && r->ab.len < LZ_FORWARD_BUF && !lz_relay_gate_shut(r))
        *ea |= POLLIN;
    if (r->ba.len)
        *ea |= POLLOUT;
    if (!r->ba.eof && r->ba.len < LZ_FORWARD_BUF)
        *eb |= POLLIN;
    if (r->ab.len)
        *eb |= POLLOUT;
}

bool lz_relay_step(lz_relay *r, short ra, short rb, int64_t now)
{
    if (r->connecting) {
        if (rb) {
            int soerr = 0;
            socklen_t sl = sizeof(soerr);
            if (getsockopt(r->b, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
                lz_relay_end(r, true); /* nothing listens there: side a is reset */
                return false;
            }
            r->connecting = false;
            /* Bytes queued for b before the connect (lz_relay_init's first)
             * leave now rather than one poll round later. */
            rb = POLLOUT;
        } else {
            if (now >= r->deadline) {
                lz_relay_end(r, true);
                return false;
            }
            return true;
        }
    }
    /* An error (a reset) on either side cuts the connection. */
    if ((ra | rb) & (POLLERR | POLLNVAL)) {
        lz_relay_end(r, true);
        return false;
    }
    bool a_in = ra & (POLLIN | POLLHUP), b_in = rb & (POLLIN | POLLHUP);
    bool a_ended = r->ab.eof, moved = false;
    if (dir_pump(&r->ab, r->a, r->b, a_in, r->ab_gated ? &r->ab_left : NULL, &moved) < 0 ||
        dir_pump(&r->ba, r->b, r->a, b_in, NULL, &moved) < 0) {
        lz_relay_end(r, true);
        return false;
    }
    /* Side a ended: the linger clock starts, and restarts whenever bytes
     * move. */
    if (r->ab.eof && (!a_ended || moved))
        r->deadline = now + LZ_FORWARD_LINGER_MS;
    else if (r->ab.eof && now >= r->deadline) {
        lz_relay_end(r, true);
        return false;
    }
    /* Both directions ended and were passed on: done. */
    if (r->ab.shut && r->ba.shut) {
        lz_relay_end(r, false);
        return false;
    }
    return true;
}

/* ---- the --publish forwarder ------------------------------------------ */

static void conn_accept(lz_relay *c, int listen_fd, const struct sockaddr_in *target)
{
    int h = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (h < 0)
        return;
    int g = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int r = g >= 0 ? connect(g, (const struct sockaddr *) target, sizeof(*target)) : -1;
    if (g < 0 || (r < 0 && errno != EINPROGRESS) ||
        lz_relay_init(c, h, g, r < 0, lz_relay_now_ms(), NULL, 0) < 0) {
        struct linger l = { 1, 0 };
        setsockopt(h, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
        close(h);
        if (g >= 0)
            close(g);
    }
}

int lz_forward_run(int listen_fd, const struct sockaddr_in *target)
{
    /* Side a: the host client (accepted); side b: the sandbox (connected). */
    static lz_relay conns[LZ_FORWARD_MAX_CONNS];
    for (size_t i = 0; i < LZ_FORWARD_MAX_CONNS; i++)
        conns[i].a = conns[i].b = -1;
    static struct pollfd p[1 + 2 * LZ_FORWARD_MAX_CONNS];
    for (;;) {
        size_t n = 0, used = 0;
        int64_t now = lz_relay_now_ms(), wait = -1;
        p[n++] = (struct pollfd){ .fd = listen_fd, .events = POLLIN };
        for (size_t i = 0; i < LZ_FORWARD_MAX_CONNS; i++) {
            lz_relay *c = &conns[i];
            if (c->a < 0)
                continue;
            used++;
            short ea, eb;
            lz_relay_events(c, now, &ea, &eb, &wait);
            /* A side with nothing to do is not polled at all: a hung-up
             * socket reports POLLHUP whatever it is asked, and would spin
             * the loop while the other side (the sandbox) refuses to read. */
            p[n++] = (struct pollfd){ .fd = ea ? c->a : -1, .events = ea };
            p[n++] = (struct pollfd){ .fd = eb ? c->b : -1, .events = eb };
        }
        /* Full: further connections wait in the listen backlog. */
        if (used == LZ_FORWARD_MAX_CONNS)
            p[0].fd = -1;
        int r = lz_relay_poll(p, n, wait);
        if (r < 0)
            return 1;
        if (r == 0)
            continue;
        now = lz_relay_now_ms();
        size_t k = 1;
        for (size_t i = 0; i < LZ_FORWARD_MAX_CONNS; i++) {
            lz_relay *c = &conns[i];
            if (c->a < 0)
                continue;
            lz_relay_step(c, p[k].revents, p[k + 1].revents, now);
            k += 2;
        }
        if (p[0].fd >= 0 && (p[0].revents & POLLIN)) {
            for (size_t i = 0; i < LZ_FORWARD_MAX_CONNS; i++)
                if (conns[i].a < 0) {
                    conn_accept(&conns[i], listen_fd, target);
                    break;
                }
        }
    }
}
