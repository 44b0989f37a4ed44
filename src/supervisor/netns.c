/* SPDX-License-Identifier: Apache-2.0
 *
 * The Network Sidecar's namespaces: the sandbox's and the router's,
 * created and pinned, entered by a child (lz_fork_call); their links,
 * addresses, offloads and sysctls, and the router's routing table, which
 * is the policy.
 */
#include "supervisor/sidecar_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/fork.h"
#include "common/util.h"

static int write_sysctl(const char *path, const char *value)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t w = write(fd, value, strlen(value));
    close(fd);
    return w == (ssize_t) strlen(value) ? 0 : -1;
}

static void disable_ipv6(void)
{
    write_sysctl("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1");
    write_sysctl("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1");
    write_sysctl("/proc/sys/net/ipv6/conf/lo/disable_ipv6", "1");
}

typedef struct netns_job {
    const char *netns;
    bool create;
    ns_fn fn;
    void *arg;
} netns_job;

static int netns_child(void *arg, int channel, lz_error **err)
{
    (void) channel;
    const netns_job *j = arg;
    char why[256] = "";
    int r = 0;
    if (j->create) {
        /* A new network namespace, pinned by a bind mount of its nsfs
         * file onto `netns` (in the supervisor's mount namespace). */
        if (unshare(CLONE_NEWNET) < 0 ||
            mount("/proc/self/ns/net", j->netns, NULL, MS_BIND, NULL) < 0) {
            snprintf(why, sizeof(why), "cannot create a network namespace: %s", strerror(errno));
            r = -1;
        }
    } else {
        int fd = open(j->netns, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
            snprintf(why, sizeof(why), "cannot enter the network namespace %s: %s", j->netns,
                     strerror(errno));
            r = -1;
        }
    }
    if (r == 0 && j->fn)
        r = j->fn(j->arg, why, sizeof(why));
    if (r < 0)
        return why[0] ? lz_error_set(err, 0, "%s", why) : 1;
    return 0;
}

int sc_in_netns(const char *netns, bool create, ns_fn fn, void *arg, lz_error **err)
{
    netns_job j = { .netns = netns, .create = create, .fn = fn, .arg = arg };
    lz_fork_options opt = { .what = "a process in the network namespaces", .pdeathsig = SIGKILL };
    int status = lz_fork_call(netns_child, &j, &opt, NULL, err);
    if (status < 0)
        return lz_error_prefix(err, "network sidecar");
    if (status != 0)
        return lz_error_set(err, 0, "network sidecar: setup failed");
    return 0;
}

#define FAIL(step)                                                                                 \
    do {                                                                                           \
        snprintf(why, why_len, "%s: %s", step, strerror(errno));                                   \
        sc_nl_close(&n);                                                                           \
        return -1;                                                                                 \
    } while (0)

/* Segmentation and receive offloads off on one end of the sandbox's veth.
 * gVisor's netstack reads the sandbox's interface frame by frame, with
 * buffers sized for its MTU: a TCP segment the kernel merged (GRO) or left
 * unsegmented (TSO/GSO of the router's own connections, the --publish
 * forwarder's) would arrive larger than that and be lost. With the
 * offloads off the kernel segments before the veth. (The download stall
 * first blamed on this was fragmentation: see LINK_MTU.) */
static int no_offloads(const char *ifname)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    static const uint32_t cmds[] = { ETHTOOL_SGRO, ETHTOOL_STSO, ETHTOOL_SGSO };
    int r = 0;
    for (size_t i = 0; i < LZ_ARRAY_SIZE(cmds); i++) {
        struct ethtool_value v = { .cmd = cmds[i], .data = 0 };
        struct ifreq ifr = { 0 };
        snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
        ifr.ifr_data = (char *) &v;
        if (ioctl(fd, SIOCETHTOOL, &ifr) < 0 && errno != EOPNOTSUPP)
            r = -1;
    }
    close(fd);
    return r;
}

int sc_router_links(void *arg, char *why, size_t why_len)
{
    router_args *a = arg;
    nl n = { 0 };
    disable_ipv6();
    if (sc_nl_open(&n) < 0)
        FAIL("netlink");
    int sfd = open(a->sandbox_netns, O_RDONLY | O_CLOEXEC);
    if (sfd < 0)
        FAIL("open the sandbox namespace");
    if (sc_veth_create(&n, ROUTER_IF, SANDBOX_IF, sfd, LINK_MTU) < 0)
        FAIL("create the veth pair");
    close(sfd);
    unsigned lo = if_nametoindex("lo"), r = if_nametoindex(ROUTER_IF);
    if (!lo || !r)
        FAIL("find interfaces");
    if (sc_link_up(&n, lo) < 0 || sc_addr_add(&n, r, ROUTER_ADDR, LINK_PREFIX) < 0 ||
        sc_link_up(&n, r) < 0)
        FAIL("configure " ROUTER_IF);
    if (no_offloads(ROUTER_IF) < 0)
        FAIL("turn the offloads of " ROUTER_IF " off");
    if (sc_veth_create(&n, DENY_IF, DENY_PEER, -1, 0) < 0)
        FAIL("create " DENY_IF);
    unsigned d = if_nametoindex(DENY_IF), dp = if_nametoindex(DENY_PEER);
    if (!d || !dp || sc_link_up(&n, d) < 0 || sc_link_up(&n, dp) < 0)
        FAIL("bring up " DENY_IF);
    write_sysctl("/proc/sys/net/ipv6/conf/" DENY_PEER "/disable_ipv6", "1");
    write_sysctl("/proc/sys/net/ipv6/conf/" DENY_IF "/disable_ipv6", "1");
    if (write_sysctl("/proc/sys/net/ipv4/ip_forward", "1") < 0)
        FAIL("enable forwarding");
    write_sysctl("/proc/sys/net/ipv6/conf/" ROUTER_IF "/disable_ipv6", "1");
    sc_nl_close(&n);
    return 0;
}

int sc_sandbox_links(void *arg, char *why, size_t why_len)
{
    (void) arg;
    nl n = { 0 };
    disable_ipv6();
    write_sysctl("/proc/sys/net/ipv6/conf/" SANDBOX_IF "/disable_ipv6", "1");
    if (sc_nl_open(&n) < 0)
        FAIL("netlink");
    unsigned lo = if_nametoindex("lo"), s = if_nametoindex(SANDBOX_IF);
    if (!lo || !s)
        FAIL("find interfaces");
    if (sc_link_up(&n, lo) < 0 || sc_addr_add(&n, s, SANDBOX_ADDR, LINK_PREFIX) < 0 ||
        sc_link_up(&n, s) < 0)
        FAIL("configure " SANDBOX_IF);
    if (no_offloads(SANDBOX_IF) < 0)
        FAIL("turn the offloads of " SANDBOX_IF " off");
    uint8_t any[4] = { 0, 0, 0, 0 };
    if (sc_route_set(&n, RTM_NEWROUTE, RTN_UNICAST, any, 0, ROUTER_ADDR, s) < 0)
        FAIL("add the default route");
    sc_nl_close(&n);
    return 0;
}

/* The routing table is the policy: longest prefix match between the
 * effective allow prefixes (via slirp) and deny prefixes (to the deny link);
 * the default route goes to the deny link too. */
int sc_router_policy(void *arg, char *why, size_t why_len)
{
    policy_args *a = arg;
    nl n = { 0 };
    if (sc_nl_open(&n) < 0)
        FAIL("netlink");
    unsigned tap = if_nametoindex(SLIRP_IF), deny = if_nametoindex(DENY_IF);
    if (!tap || !deny)
        FAIL("find " SLIRP_IF " and " DENY_IF);
    uint8_t any[4] = { 0, 0, 0, 0 };
    /* slirp4netns --configure installed a default route via its gateway:
     * the default is deny. */
    sc_route_set(&n, RTM_DELROUTE, RTN_UNICAST, any, 0, NULL, 0);
    if (sc_route_set(&n, RTM_NEWROUTE, RTN_UNICAST, any, 0, NULL, deny) < 0)
        FAIL("add the default deny route");
    /* A prefix inside a never-routed range gets no route: nftables rejects
     * the range whatever the routes say, and a route there could replace
     * the router's own link routes (169.254.77.0/30, 100.96.0.0/24). The
     * configuration refuses such allows; denies there are redundant. */
    for (size_t i = 0; i < a->cfg->deny.count; i++)
        if (!lz_ipv4_never_routed_holding(&a->cfg->deny.items[i]) &&
            sc_route_set(&n, RTM_NEWROUTE, RTN_UNICAST, a->cfg->deny.items[i].addr,
                         a->cfg->deny.items[i].len, NULL, deny) < 0)
            FAIL("add a deny route");
    for (size_t i = 0; i < a->cfg->allow.count; i++)
        if (!lz_ipv4_never_routed_holding(&a->cfg->allow.items[i]) &&
            sc_route_set(&n, RTM_NEWROUTE, RTN_UNICAST, a->cfg->allow.items[i].addr,
                         a->cfg->allow.items[i].len, SLIRP_GW, tap) < 0)
            FAIL("add an allow route");
    /* Addresses learned for allowed names (the learned set marks their
     * packets): out through slirp, whatever the main table says. */
    if (a->host_rules &&
        (sc_route_set_in(&n, LEARNED_TABLE, RTM_NEWROUTE, RTN_UNICAST, any, 0, SLIRP_GW, tap) < 0 ||
         sc_rule_fwmark(&n, LEARNED_MARK, LEARNED_TABLE, LEARNED_RULE_PRIORITY) < 0))
        FAIL("route the learned addresses");
    sc_nl_close(&n);
    return 0;
}

/* ---- sockets made in another namespace --------------------------------- */

#define SOCKETS_MAX 4

typedef struct sockets_job {
    sc_socket_maker make;
    void *arg;
    size_t n;
    int channel; /* the child's end of the socketpair they go back over */
} sockets_job;

/* ns_fn: in the namespace; make the sockets, hand them over. */
static int sockets_child(void *arg, char *why, size_t why_len)
{
    const sockets_job *j = arg;
    int fds[SOCKETS_MAX];
    if (j->make(j->arg, fds, why, why_len) < 0)
        return -1;
    union {
        char buf[CMSG_SPACE(sizeof(int) * SOCKETS_MAX)];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof(u));
    char byte = 'S';
    struct iovec iov = { &byte, 1 };
    struct msghdr m = { .msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = u.buf,
                        .msg_controllen = CMSG_SPACE(sizeof(int) * j->n) };
    struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
    if (!cm) { /* cannot be: the control buffer has room for one header */
        snprintf(why, why_len, "cannot hand over the sockets: no room for them");
        return -1;
    }
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * j->n);
    memcpy(CMSG_DATA(cm), fds, sizeof(int) * j->n);
    if (sendmsg(j->channel, &m, MSG_NOSIGNAL) != 1) {
        snprintf(why, why_len, "cannot hand over the sockets: %s", strerror(errno));
        return -1;
    }
    return 0;
}

int sc_sockets_in_netns(const char *netns, sc_socket_maker make, void *arg, int *fds, size_t n,
                        lz_error **err)
{
    if (n == 0 || n > SOCKETS_MAX)
        return lz_error_set(err, EINVAL, "network sidecar: %zu sockets asked for", n);
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
        return lz_error_set(err, errno, "network sidecar: cannot create a socketpair");
    sockets_job j = { .make = make, .arg = arg, .n = n, .channel = sp[1] };
    int r = sc_in_netns(netns, false, sockets_child, &j, err);
    close(sp[1]);
    if (r < 0) {
        close(sp[0]);
        return -1;
    }
    union {
        char buf[CMSG_SPACE(sizeof(int) * SOCKETS_MAX)];
        struct cmsghdr align;
    } u;
    char byte;
    struct iovec iov = { &byte, 1 };
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)
    };
    ssize_t got = recvmsg(sp[0], &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    close(sp[0]);
    struct cmsghdr *cm = got == 1 ? CMSG_FIRSTHDR(&m) : NULL;
    if (!cm || cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
        cm->cmsg_len != CMSG_LEN(sizeof(int) * n) || (m.msg_flags & MSG_CTRUNC))
        return lz_error_set(err, EPROTO, "network sidecar: the sockets made in %s did not arrive",
                            netns);
    memcpy(fds, CMSG_DATA(cm), sizeof(int) * n);
    return 0;
}
