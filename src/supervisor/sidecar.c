/* SPDX-License-Identifier: Apache-2.0
 *
 * The Network Sidecar (sidecar.h): its setup in order (namespaces, links,
 * slirp4netns, routes, nftables, the watcher), the --publish forwarders,
 * and its end. The other files are listed in sidecar_internal.h.
 */
#include "supervisor/sidecar.h"
#include "supervisor/sidecar_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fork.h"
#include "common/syscalls.h"
#include "common/util.h"
#include "supervisor/forward.h"

static char *describe_policy(const lz_resolved_config *cfg, size_t host_local)
{
    size_t cap = 256 + 24 * (cfg->allow.count + cfg->deny.count);
    char *s = lz_xmalloc(cap);
    size_t o =
        (size_t) snprintf(s, cap, "IPv4 default deny; IPv6 disabled; resolver %s (%s); allow",
                          LZ_NET_RESOLVER, cfg->dns_mode == LZ_DNS_STRICT ? "strict" : "forward");
    for (size_t i = 0; i < cfg->allow.count && o < cap; i++) {
        char b[LZ_IPV4_PREFIX_BUFSZ];
        lz_ipv4_prefix_format(&cfg->allow.items[i], b);
        o += (size_t) snprintf(s + o, cap - o, " %s", b);
    }
    if (o < cap)
        o += (size_t) snprintf(s + o, cap - o, "; deny");
    for (size_t i = 0; i < cfg->deny.count && o < cap; i++) {
        char b[LZ_IPV4_PREFIX_BUFSZ];
        lz_ipv4_prefix_format(&cfg->deny.items[i], b);
        o += (size_t) snprintf(s + o, cap - o, " %s", b);
    }
    if (o < cap)
        snprintf(s + o, cap - o,
                 "; never: loopback, this host (%zu local prefixes, watched), "
                 "link-local, multicast, reserved",
                 host_local);
    return s;
}

int lz_network_setup(const lz_resolved_config *cfg, const char *gen_dir, int gen_fd,
                     int denial_logs_fd, lz_network *ret, lz_error **err)
{
    lz_network net = { .dns_keeper_fd = -1, .namecheck_keeper_fd = -1 };
    _cleanup_free_ char *slirp = NULL, *nft = NULL, *rules_path = NULL, *rules = NULL;
    _cleanup_free_ lz_ipv4_range *prefix_allowed = NULL;
    struct mnl_socket *events = NULL, *dumps = NULL;
    lz_ipv4_prefix_list host_local = { 0 };
    if (lz_spawn_find_program("slirp4netns", LZ_SPAWN_SYSTEM_PATH, &slirp, err) < 0)
        return lz_error_hint(err, "install it: sudo apt-get install slirp4netns");
    if (lz_spawn_find_program("nft", LZ_SPAWN_SYSTEM_PATH, &nft, err) < 0)
        return lz_error_hint(err, "install it: sudo apt-get install nftables");

    if (mkdirat(gen_fd, "netns", 0700) < 0 && errno != EEXIST)
        return lz_error_set(err, errno, "cannot create %s/netns", gen_dir);
    for (int i = 0; i < 2; i++) {
        int fd = openat(gen_fd, i ? "netns/router" : "netns/sandbox",
                        O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
            return lz_error_set(err, errno, "cannot create a namespace pin in %s/netns", gen_dir);
        close(fd);
    }
    net.sandbox_netns = lz_xasprintf("%s/netns/sandbox", gen_dir);
    net.router_netns = lz_xasprintf("%s/netns/router", gen_dir);

    /* The host's own addresses, in this (slirp4netns's) namespace: subscribe
     * to changes first, then scan, so that nothing added in between is
     * missed (the watcher reads the queued events). */
    events = sc_nl_socket(RTMGRP_IPV4_IFADDR | RTMGRP_IPV4_ROUTE);
    dumps = sc_nl_socket(0);
    if (!events || !dumps || sc_host_local_scan(dumps, &host_local) < 0) {
        lz_error_set(err, errno,
                     "network sidecar: cannot read this machine's addresses "
                     "(rtnetlink)");
        goto fail;
    }

    router_args ra = { net.sandbox_netns };
    policy_args pa = { cfg, cfg->allow_hosts.count > 0 };
    if (sc_in_netns(net.sandbox_netns, true, NULL, NULL, err) < 0 ||
        sc_in_netns(net.router_netns, true, NULL, NULL, err) < 0 ||
        sc_in_netns(net.router_netns, false, sc_router_links, &ra, err) < 0 ||
        sc_in_netns(net.sandbox_netns, false, sc_sandbox_links, NULL, err) < 0)
        goto fail;

    /* slirp4netns: the only egress. Host loopback disabled, its own
     * sandbox and seccomp filter; ready when it writes to the ready fd. */
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) < 0) {
        lz_error_set(err, errno, "cannot create a pipe");
        goto fail;
    }
    {
        /* The ready pipe's write end as fd 3, stdio on /dev/null; the MTU
         * of the sandbox's veth (LINK_MTU). */
        char *const argv[] = { (char *) "slirp4netns",
                               (char *) "--configure",
                               (char *) LINK_MTU_ARG,
                               (char *) "--disable-host-loopback",
                               (char *) "--cidr=" SLIRP_CIDR,
                               (char *) "--enable-sandbox",
                               (char *) "--enable-seccomp",
                               (char *) "--ready-fd=3",
                               (char *) "--netns-type=path",
                               net.router_netns,
                               (char *) SLIRP_IF,
                               NULL };
        char *const envp[] = { (char *) "PATH=" LZ_SPAWN_SYSTEM_PATH, NULL };
        const lz_spawn_fd handed[] = { { ready[1], 3 } };
        const lz_spawn_async opt = { .envp = envp, .fds = handed, .n_fds = 1 };
        int r = lz_spawn_start(slirp, argv, &opt, &net.slirp, err);
        close(ready[1]);
        if (r < 0) {
            close(ready[0]);
            lz_error_prefix(err, "network sidecar");
            goto fail;
        }
    }
    /* Host rules: names the DNS responder may learn addresses for. */
    /* deny_hosts: the names it denies are checked on the connection to
     * prefix-allowed addresses too (docs/network.md "The name on the
     * connection"). */
    size_t n_prefix_allowed = 0;
    if (cfg->deny_hosts.count)
        prefix_allowed = lz_ipv4_policy_allowed_ranges(&cfg->allow, &cfg->deny, &n_prefix_allowed);
    const sc_ruleset_opts ruleset_opts = { .host_rules = cfg->allow_hosts.count > 0,
                                           .prefix_allowed = prefix_allowed,
                                           .n_prefix_allowed = n_prefix_allowed };
    /* The ruleset holds no secret: a file in the generation directory. */
    rules_path = lz_xasprintf("%s/netns/nftables.conf", gen_dir);
    {
        size_t rules_len = 0;
        rules = sc_build_ruleset(&host_local, &ruleset_opts, &rules_len);
        int fd = openat(gen_fd, "netns/nftables.conf",
                        O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0 || write(fd, rules, rules_len) != (ssize_t) rules_len) {
            if (fd >= 0)
                close(fd);
            lz_error_set(err, errno, "cannot write %s", rules_path);
            close(ready[0]);
            goto fail;
        }
        close(fd);
    }
    /* The ruleset names interfaces, not indexes: it is loaded while
     * slirp4netns starts (a cold start about 8 ms shorter). The routes
     * replace the ones slirp4netns --configure makes: after it is ready.
     * Both are in force before the sandbox exists. */
    nft_args na = { nft, rules_path };
    if (sc_in_netns(net.router_netns, false, sc_router_nft, &na, err) < 0) {
        close(ready[0]);
        goto fail;
    }
    {
        struct pollfd p = { .fd = ready[0], .events = POLLIN };
        char c;
        int pr = poll(&p, 1, 15000);
        bool ok = pr == 1 && read(ready[0], &c, 1) == 1;
        close(ready[0]);
        if (!ok) {
            lz_error_set(err, 0, "network sidecar: slirp4netns did not become ready");
            lz_error_hint(err, "check /dev/net/tun access (lazaret doctor)");
            goto fail;
        }
    }
    if (sc_in_netns(net.router_netns, false, sc_router_policy, &pa, err) < 0)
        goto fail;
    /* The keeper's ends of the socketpairs to lz-dns and lz-namecheck stay
     * in lz-netwatch only; the other ends wait in net for the processes
     * that are started after it. */
    int dns_pair[2], namecheck_pair[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, dns_pair) < 0) {
        lz_error_set(err, errno, "network sidecar: cannot create a socket pair");
        goto fail;
    }
    net.dns_keeper_fd = dns_pair[1];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, namecheck_pair) < 0) {
        close(dns_pair[0]);
        lz_error_set(err, errno, "network sidecar: cannot create a socket pair");
        goto fail;
    }
    net.namecheck_keeper_fd = namecheck_pair[1];
    {
        const sc_watch_args wa = { .events = events,
                                   .dumps = dumps,
                                   .router_netns = net.router_netns,
                                   .nft = nft,
                                   .known = &host_local,
                                   .slirp = net.slirp.pid,
                                   .cfg = cfg,
                                   .dns_fd = dns_pair[0],
                                   .namecheck_fd = namecheck_pair[0],
                                   .denial_logs_fd = denial_logs_fd };
        int r = sc_watch_start(&wa, &net.watch_pid, err);
        close(dns_pair[0]);
        close(namecheck_pair[0]);
        if (r < 0) {
            lz_error_prefix(err, "network sidecar");
            goto fail;
        }
    }
    /* The sandbox's only resolver (SR-5: before the sandbox exists). */
    {
        int r = sc_dns_start(cfg, net.router_netns, net.dns_keeper_fd, &net.dns_pid, err);
        close(net.dns_keeper_fd);
        net.dns_keeper_fd = -1;
        if (r < 0)
            goto fail;
    }
    /* Before the sandbox exists, like the routes: a learned address is never
     * reachable on ports 80 and 443 without the check behind the redirect.
     * With no allowed name nothing is learned and nothing redirected. */
    {
        int r = cfg->allow_hosts.count || n_prefix_allowed
                    ? sc_namecheck_start(cfg, net.router_netns, net.namecheck_keeper_fd,
                                         &net.namecheck_pid, err)
                    : 0;
        close(net.namecheck_keeper_fd);
        net.namecheck_keeper_fd = -1;
        if (r < 0)
            goto fail;
    }
    mnl_socket_close(events);
    mnl_socket_close(dumps);
    net.host_local_count = host_local.count;
    lz_ipv4_list_clear(&host_local);
    net.policy_text = describe_policy(cfg, net.host_local_count);
    *ret = net;
    return 0;
fail:
    if (events)
        mnl_socket_close(events);
    if (dumps)
        mnl_socket_close(dumps);
    lz_ipv4_list_clear(&host_local);
    lz_network_clear(&net);
    return -1;
}

typedef struct publish_job {
    int listen_fd, ns;
    uint16_t port;
} publish_job;

static int publish_child(void *arg, int channel, lz_error **err)
{
    (void) err;
    const publish_job *j = arg;
    if (lz_fork_ready(channel) < 0)
        return 1;
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int i = 0; i < 3; i++)
        dup2(devnull, i);
    /* A fork without exec: O_CLOEXEC does not help, close the rest
     * (the supervisor channel, runsc's descriptors, other sessions'). */
    const int keep[] = { 0, 1, 2, j->listen_fd, j->ns };
    if (lz_close_fds_except(keep, LZ_ARRAY_SIZE(keep)) < 0)
        return 1;
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* The listening socket stays in the host's namespace (a socket keeps
     * the one it was created in); the connections to the sandbox are
     * made from the router's, over the veth link. With runsc's own
     * network stack the sandbox's address is still 169.254.77.2 on
     * that link (docs/network.md "Publishing a port"). */
    if (setns(j->ns, CLONE_NEWNET) < 0)
        return 1;
    close(j->ns);
    struct sockaddr_in target = { .sin_family = AF_INET, .sin_port = htons(j->port) };
    if (inet_pton(AF_INET, SANDBOX_ADDR, &target.sin_addr) != 1 || lz_forward_confine() < 0)
        return 1;
    return lz_forward_run(j->listen_fd, &target);
}

pid_t lz_network_publish(const lz_network *net, int listen_fd, uint16_t port, lz_error **err)
{
    /* Only a listening IPv4 TCP socket: anything else is refused before a
     * process is started for it. */
    int v = 0, dom = 0, type = 0;
    socklen_t l = sizeof(v);
    if (getsockopt(listen_fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &l) < 0 || !v ||
        (l = sizeof(dom), getsockopt(listen_fd, SOL_SOCKET, SO_DOMAIN, &dom, &l)) < 0 ||
        dom != AF_INET ||
        (l = sizeof(type), getsockopt(listen_fd, SOL_SOCKET, SO_TYPE, &type, &l)) < 0 ||
        type != SOCK_STREAM) {
        lz_error_set(err, EINVAL,
                     "publish: the descriptor for sandbox port %u is not a "
                     "listening TCP socket",
                     port);
        return -1;
    }
    if (!net->router_netns || port == 0) {
        lz_error_set(err, EINVAL, "publish: no network for sandbox port %u", port);
        return -1;
    }
    int ns = open(net->router_netns, O_RDONLY | O_CLOEXEC);
    if (ns < 0) {
        lz_error_set(err, errno, "publish: cannot open %s", net->router_netns);
        return -1;
    }
    publish_job j = { .listen_fd = listen_fd, .ns = ns, .port = port };
    lz_fork_options opt = { .what = "the forwarder", .pdeathsig = SIGKILL, .name = "lz-publish" };
    lz_child child;
    int r = lz_fork_call(publish_child, &j, &opt, &child, err);
    close(ns);
    if (r < 0) {
        lz_error_prefix(err, "publish");
        return -1;
    }
    return lz_child_release(&child); /* the supervisor's reaper collects it by pid */
}

bool lz_network_dns_exited(lz_network *net, pid_t pid, int status)
{
    if (pid <= 0 || pid != net->dns_pid)
        return false;
    net->dns_pid = 0;
    fprintf(stderr,
            "lz-supervisor: the DNS responder lz-dns ended (%s %d): the sandbox has no DNS "
            "until the Domain is stopped and started again\n",
            WIFSIGNALED(status) ? "signal" : "status",
            WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    return true;
}

void lz_network_clear(lz_network *net)
{
    if (net->namecheck_pid > 0) {
        kill(net->namecheck_pid, SIGKILL);
        waitpid(net->namecheck_pid, NULL, 0);
    }
    if (net->dns_keeper_fd > 0)
        close(net->dns_keeper_fd);
    if (net->namecheck_keeper_fd > 0)
        close(net->namecheck_keeper_fd);
    if (net->dns_pid > 0) {
        kill(net->dns_pid, SIGKILL);
        waitpid(net->dns_pid, NULL, 0);
    }
    if (net->watch_pid > 0) {
        /* The keeper's last words first (netwatch.c keeper_last_words: the
         * log's last records and counts), killed if they take too long. */
        int pidfd = (int) syscall(SYS_pidfd_open, net->watch_pid, 0);
        kill(net->watch_pid, SIGTERM);
        struct pollfd p = { .fd = pidfd, .events = POLLIN };
        if (pidfd < 0 || poll(&p, 1, LZ_KEEPER_LAST_WORDS_MS) != 1)
            kill(net->watch_pid, SIGKILL);
        if (pidfd >= 0)
            close(pidfd);
        waitpid(net->watch_pid, NULL, 0);
    }
    if (net->slirp.pid > 0) {
        /* The supervisor's reaper may have collected a slirp4netns that
         * died: the pidfd then refuses the signal and the wait (ECHILD)
         * instead of reaching a recycled pid. */
        /* Teardown: gone already is fine. */
        lz_best_effort(lz_child_kill(&net->slirp, SIGKILL, NULL));
        lz_best_effort(lz_child_wait(&net->slirp, -1, NULL));
    }
    if (net->sandbox_netns)
        umount2(net->sandbox_netns, MNT_DETACH);
    if (net->router_netns)
        umount2(net->router_netns, MNT_DETACH);
    free(net->sandbox_netns);
    free(net->router_netns);
    free(net->policy_text);
    memset(net, 0, sizeof(*net));
}
