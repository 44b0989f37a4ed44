/* SPDX-License-Identifier: Apache-2.0
 *
 * The DNS responder's start (lz-dns, docs/network.md "DNS: the sidecar is
 * the only resolver"): which upstream resolvers it asks, its two listening
 * sockets on ROUTER_ADDR:53 made in the router's namespace, and the
 * process, which lives in the supervisor's (the host's) network namespace
 * so that its upstream queries leave from there, holds no capability and
 * runs under a seccomp allowlist. Its loop is dns_loop.c.
 *
 * The sockets are made by a short-lived child that joined the router's
 * namespace and hands them back (sc_sockets_in_netns): a socket stays in
 * the namespace it was created in. The process itself cannot setns back:
 * the supervisor's network namespace belongs to the initial user
 * namespace, over which the supervisor has no capability.
 */
#include "supervisor/sidecar_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/fork.h"
#include "common/util.h"
#include "supervisor/forward.h"

#define RESOLV_CONF "/etc/resolv.conf"
#define RESOLV_CONF_MAX 65536 /* read at most this much of it */

/* ---- upstream resolvers ------------------------------------------------ */

size_t sc_dns_parse_resolv_conf(const char *text, size_t len, uint8_t out[][4])
{
    size_t n = 0, i = 0;
    while (i < len && n < LZ_RESOLVERS_MAX) {
        size_t end = i;
        while (end < len && text[end] != '\n')
            end++;
        /* One line: "nameserver" blanks ADDRESS [anything]. */
        size_t p = i;
        while (p < end && (text[p] == ' ' || text[p] == '\t'))
            p++;
        static const char kw[] = "nameserver";
        if (end - p > sizeof(kw) && memcmp(text + p, kw, sizeof(kw) - 1) == 0 &&
            (text[p + sizeof(kw) - 1] == ' ' || text[p + sizeof(kw) - 1] == '\t')) {
            p += sizeof(kw) - 1;
            while (p < end && (text[p] == ' ' || text[p] == '\t'))
                p++;
            size_t a = p;
            while (p < end && text[p] != ' ' && text[p] != '\t' && text[p] != '\r' &&
                   text[p] != '#' && text[p] != ';')
                p++;
            char addr[INET_ADDRSTRLEN];
            struct in_addr in;
            if (p - a < sizeof(addr)) {
                memcpy(addr, text + a, p - a);
                addr[p - a] = '\0';
                /* IPv6 nameservers are skipped: lz-dns asks over IPv4. */
                if (inet_pton(AF_INET, addr, &in) == 1 && in.s_addr != 0)
                    memcpy(out[n++], &in, 4);
            }
        }
        i = end + 1;
    }
    return n;
}

static int host_resolvers(sc_dns_setup *s, lz_error **err)
{
    int fd = open(RESOLV_CONF, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        lz_error_set(err, errno,
                     "network sidecar: cannot read %s for the sandbox's upstream resolvers",
                     RESOLV_CONF);
        return lz_error_hint(err, "set [network] resolvers = [\"A.B.C.D\"] in the configuration");
    }
    static char text[RESOLV_CONF_MAX];
    size_t len = 0;
    while (len < sizeof(text)) {
        ssize_t r = read(fd, text + len, sizeof(text) - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t) r;
    }
    close(fd);
    s->n_resolvers = sc_dns_parse_resolv_conf(text, len, s->resolvers);
    if (!s->n_resolvers) {
        lz_error_set(err, 0,
                     "network sidecar: %s names no IPv4 nameserver for the sandbox's DNS "
                     "to ask",
                     RESOLV_CONF);
        return lz_error_hint(err, "set [network] resolvers = [\"A.B.C.D\"] in the configuration");
    }
    return 0;
}

/* ---- the listening sockets, made in the router's namespace ------------- */

static int bound_socket(int type, const struct sockaddr_in *at)
{
    int fd = socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(fd, (const struct sockaddr *) at, sizeof(*at)) < 0 ||
        (type == SOCK_STREAM && listen(fd, SC_DNS_MAX_TCP) < 0)) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* sc_socket_maker, in the router's namespace: UDP and TCP on
 * ROUTER_ADDR:53. */
static int make_sockets(void *arg, int *fds, char *why, size_t why_len)
{
    (void) arg;
    struct sockaddr_in at = { .sin_family = AF_INET, .sin_port = htons(53) };
    if (inet_pton(AF_INET, ROUTER_ADDR, &at.sin_addr) != 1)
        return -1;
    fds[0] = bound_socket(SOCK_DGRAM, &at);
    fds[1] = fds[0] >= 0 ? bound_socket(SOCK_STREAM, &at) : -1;
    if (fds[1] < 0) {
        snprintf(why, why_len, "cannot listen on %s:53 in the router's namespace: %s", ROUTER_ADDR,
                 strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- confinement ------------------------------------------------------- */

#if defined(__x86_64__)
#define DNS_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define DNS_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

/* What the loop (and malloc, and the sanitizers' runtime) calls. socket is
 * allowed for AF_INET only (checked below); no open, exec, bind, sendmsg
 * of descriptors, ptrace, kill. */
static const int dns_allowed[] = {
    SYS_read,         SYS_write,           SYS_close,         SYS_ppoll,
    SYS_accept4,      SYS_connect,         SYS_getsockopt,    SYS_recvfrom,
    SYS_sendto,       SYS_getrandom,       SYS_clock_gettime, SYS_brk,
    SYS_mmap,         SYS_munmap,          SYS_mremap,        SYS_madvise,
    SYS_rt_sigreturn, SYS_restart_syscall, SYS_exit,          SYS_exit_group,
    SYS_futex,        SYS_sigaltstack,     SYS_getpid,        SYS_gettid,
    SYS_sched_yield,
#ifdef SYS_poll
    SYS_poll,
#endif
};

int sc_dns_confine(void)
{
    if (lz_drop_privileges(3 + 8 + SC_DNS_MAX_TCP + SC_DNS_MAX_PENDING) < 0)
        return -1;
#ifdef DNS_AUDIT_ARCH
    enum { N = LZ_ARRAY_SIZE(dns_allowed) };
    struct sock_filter f[4 + 2 * N + 5 + 1];
    size_t k = 0;
    f[k++] = (struct sock_filter) BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                           offsetof(struct seccomp_data, arch));
    f[k++] = (struct sock_filter) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, DNS_AUDIT_ARCH, 1, 0);
    f[k++] = (struct sock_filter) BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
    f[k++] =
        (struct sock_filter) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    for (size_t i = 0; i < N; i++) {
        f[k++] = (struct sock_filter) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t) dns_allowed[i],
                                               0, 1);
        f[k++] = (struct sock_filter) BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    }
    /* socket(AF_INET, ...) only: no netlink, no AF_UNIX, no packet sockets. */
    f[k++] = (struct sock_filter) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 0, 3);
    f[k++] = (struct sock_filter) BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                           offsetof(struct seccomp_data, args[0]));
    f[k++] = (struct sock_filter) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET, 0, 1);
    f[k++] = (struct sock_filter) BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    f[k++] = (struct sock_filter) BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
    f[k++] = (struct sock_filter) BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
    struct sock_fprog prog = { (unsigned short) k, f };
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
        return -1;
#endif
    return 0;
}

/* ---- the process ------------------------------------------------------- */

static int dns_child(void *arg, int channel, lz_error **err)
{
    const sc_dns_setup *s = arg;
    if (lz_fork_ready(channel) < 0)
        return 1;
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int i = 0; i < 3; i++)
        dup2(devnull, i);
    /* A fork without exec: O_CLOEXEC does not help, close the rest. */
    const int keep[] = { 0, 1, 2, s->udp_fd, s->tcp_fd, s->keeper_fd };
    if (lz_close_fds_except(keep, LZ_ARRAY_SIZE(keep)) < 0)
        _exit(1);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (sc_dns_confine() < 0)
        _exit(1);
    (void) err;
    _exit(sc_dns_run(s));
}

int sc_dns_start(const lz_resolved_config *cfg, const char *router_netns, int keeper_fd,
                 pid_t *ret_pid, lz_error **err)
{
    sc_dns_setup s = {
        .cfg = cfg, .upstream_port = 53, .udp_fd = -1, .tcp_fd = -1, .keeper_fd = keeper_fd
    };
    if (cfg->n_resolvers) {
        memcpy(s.resolvers, cfg->resolvers, sizeof(s.resolvers));
        s.n_resolvers = cfg->n_resolvers;
    } else {
        /* No nameserver on the host (an offline laptop's resolv.conf, or
         * none at all) must not stop the sandbox from starting, as it did
         * not before lz-dns: every name that would be asked upstream is
         * answered SERVFAIL at once, and the log says why. */
        lz_error *why = NULL;
        if (host_resolvers(&s, &why) < 0) {
            fprintf(stderr,
                    "lz-supervisor: %s; names the sandbox asks are answered SERVFAIL (%s)\n",
                    why->message, why->hint ? why->hint : "");
            lz_error_free(why);
            s.n_resolvers = 0;
        }
    }
    int fds[2];
    if (sc_sockets_in_netns(router_netns, make_sockets, NULL, fds, 2, err) < 0)
        return -1;
    s.udp_fd = fds[0];
    s.tcp_fd = fds[1];
    /* Its own name (ps, tests); killed with the supervisor. */
    lz_fork_options opt = { .what = "the DNS responder", .pdeathsig = SIGKILL, .name = "lz-dns" };
    lz_child child;
    int r = lz_fork_call(dns_child, &s, &opt, &child, err);
    close(s.udp_fd);
    close(s.tcp_fd);
    if (r < 0)
        return lz_error_prefix(err, "network sidecar");
    *ret_pid = lz_child_release(&child); /* the supervisor's reaper collects it by pid */
    return 0;
}
