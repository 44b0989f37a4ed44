/* SPDX-License-Identifier: Apache-2.0 */
#include "supervisor/sidecar.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/ethtool.h>
#include <linux/if_link.h>
#include <linux/sockios.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/fork.h"
#include "common/spawn.h"
#include "common/util.h"
#include "supervisor/forward.h"

#define ROUTER_IF "lzr0"
#define SANDBOX_IF "lzs0"
#define ROUTER_ADDR "169.254.77.1"
#define SANDBOX_ADDR "169.254.77.2"
#define LINK_PREFIX 30
/* The MTU of the whole path: slirp4netns's tap and the sandbox's veth alike.
 * One MTU end to end, so that the router never fragments (gVisor 2022's
 * netstack reassembled slirp's 64 KiB segments, fragmented for a
 * 1500-byte veth, so badly that downloads stalled after a few hundred KiB;
 * seen with tcpdump on the router), and a large one: per packet, gVisor's
 * AF_PACKET endpoint and slirp cost the same whatever the size (measured
 * here: 100 MiB downloaded in 22.3 s with 1500 everywhere, 0.58 s with
 * 65520; uploads 3.5 s and 2.5 s). */
#define LINK_MTU 65520
#define LINK_MTU_ARG "--mtu=65520"
#define SLIRP_CIDR "100.96.0.0/24"
#define SLIRP_GW "100.96.0.2"
#define SLIRP_DNS "100.96.0.3"
#define SLIRP_IF "tap0"
/* Denied destinations are routed to a link of their own (one end of a veth
 * pair whose other end stays in the router), so that their packets reach
 * the forward chain and are rejected there at once: a route without an
 * interface (unreachable, prohibit) is answered by the kernel only after
 * about a second (docs/platform.md "Network"), and the dummy driver is not always there. */
#define DENY_IF "lzdeny0"
#define DENY_PEER "lzdeny1"

/* ---- netlink (libmnl) -------------------------------------------------- */

typedef struct nl {
    struct mnl_socket *sock;
    unsigned portid;
    unsigned seq;
    char buf[8192];
} nl;

static int nl_open(nl *n)
{
    n->sock = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
    if (!n->sock || mnl_socket_bind(n->sock, 0, MNL_SOCKET_AUTOPID) < 0)
        return -1;
    n->portid = mnl_socket_get_portid(n->sock);
    n->seq = (unsigned) time(NULL);
    return 0;
}

static void nl_close(nl *n)
{
    if (n->sock)
        mnl_socket_close(n->sock);
    n->sock = NULL;
}

static struct nlmsghdr *nl_msg(nl *n, uint16_t type, uint16_t flags)
{
    struct nlmsghdr *h = mnl_nlmsg_put_header(n->buf);
    h->nlmsg_type = type;
    h->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
    h->nlmsg_seq = ++n->seq;
    return h;
}

/* Send and wait for the acknowledgement; -1 with errno on a kernel error. */
static int nl_talk(nl *n, struct nlmsghdr *h)
{
    if (mnl_socket_sendto(n->sock, h, h->nlmsg_len) < 0)
        return -1;
    char rbuf[8192];
    ssize_t r = mnl_socket_recvfrom(n->sock, rbuf, sizeof(rbuf));
    if (r < 0)
        return -1;
    r = mnl_cb_run(rbuf, (size_t) r, h->nlmsg_seq, n->portid, NULL, NULL);
    return r < 0 ? -1 : 0;
}

static int link_up(nl *n, unsigned ifindex)
{
    struct nlmsghdr *h = nl_msg(n, RTM_NEWLINK, 0);
    struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(h, sizeof(*ifi));
    ifi->ifi_family = AF_UNSPEC;
    ifi->ifi_index = (int) ifindex;
    ifi->ifi_change = IFF_UP;
    ifi->ifi_flags = IFF_UP;
    return nl_talk(n, h);
}

/* A veth pair name/peer (peer moved into peer_netns_fd unless -1), both
 * ends with the given MTU (0: the kernel's default). */
static int veth_create(nl *n, const char *name, const char *peer, int peer_netns_fd,
                       uint32_t mtu)
{
    struct nlmsghdr *h = nl_msg(n, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
    struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(h, sizeof(*ifi));
    ifi->ifi_family = AF_UNSPEC;
    mnl_attr_put_strz(h, IFLA_IFNAME, name);
    if (mtu)
        mnl_attr_put_u32(h, IFLA_MTU, mtu);
    struct nlattr *linkinfo = mnl_attr_nest_start(h, IFLA_LINKINFO);
    mnl_attr_put_strz(h, IFLA_INFO_KIND, "veth");
    struct nlattr *data = mnl_attr_nest_start(h, IFLA_INFO_DATA);
    struct nlattr *peer_attr = mnl_attr_nest_start(h, VETH_INFO_PEER);
    struct ifinfomsg *pifi = mnl_nlmsg_put_extra_header(h, sizeof(*pifi));
    pifi->ifi_family = AF_UNSPEC;
    mnl_attr_put_strz(h, IFLA_IFNAME, peer);
    if (mtu)
        mnl_attr_put_u32(h, IFLA_MTU, mtu);
    if (peer_netns_fd >= 0)
        mnl_attr_put_u32(h, IFLA_NET_NS_FD, (uint32_t) peer_netns_fd);
    mnl_attr_nest_end(h, peer_attr);
    mnl_attr_nest_end(h, data);
    mnl_attr_nest_end(h, linkinfo);
    return nl_talk(n, h);
}

static int addr_add(nl *n, unsigned ifindex, const char *addr, uint8_t len)
{
    struct in_addr a;
    if (inet_pton(AF_INET, addr, &a) != 1) {
        errno = EINVAL;
        return -1;
    }
    struct nlmsghdr *h = nl_msg(n, RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE);
    struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(h, sizeof(*ifa));
    ifa->ifa_family = AF_INET;
    ifa->ifa_prefixlen = len;
    ifa->ifa_scope = RT_SCOPE_UNIVERSE;
    ifa->ifa_index = ifindex;
    mnl_attr_put(h, IFA_LOCAL, sizeof(a), &a);
    mnl_attr_put(h, IFA_ADDRESS, sizeof(a), &a);
    return nl_talk(n, h);
}

/* A unicast route via gateway gw (or directly out of oif when gw is
 * NULL: scope link). */
static int route_set(nl *n, uint16_t cmd, uint8_t type, const uint8_t dst[4], uint8_t len,
                     const char *gw, unsigned oif)
{
    struct nlmsghdr *h = nl_msg(n, cmd, cmd == RTM_NEWROUTE ? NLM_F_CREATE | NLM_F_REPLACE : 0);
    struct rtmsg *rt = mnl_nlmsg_put_extra_header(h, sizeof(*rt));
    rt->rtm_family = AF_INET;
    rt->rtm_dst_len = len;
    rt->rtm_table = RT_TABLE_MAIN;
    rt->rtm_protocol = RTPROT_STATIC;
    rt->rtm_scope = cmd == RTM_DELROUTE ? RT_SCOPE_NOWHERE
                    : (!gw && oif)        ? RT_SCOPE_LINK
                                          : RT_SCOPE_UNIVERSE;
    rt->rtm_type = type;
    if (len)
        mnl_attr_put(h, RTA_DST, 4, dst);
    if (gw) {
        struct in_addr g;
        inet_pton(AF_INET, gw, &g);
        mnl_attr_put(h, RTA_GATEWAY, sizeof(g), &g);
    }
    if (oif)
        mnl_attr_put_u32(h, RTA_OIF, oif);
    return nl_talk(n, h);
}

/* ---- the host's own addresses ------------------------------------------ */

/* slirp4netns makes its connections from the supervisor's network namespace
 * (the host's), where the kernel delivers to a local listener anything
 * addressed to a local address: not only 127.0.0.0/8 (which
 * --disable-host-loopback covers for slirp's host alias) but every address
 * of every interface (eth0, docker0, ...), their broadcast addresses and any
 * local route (AnyIP). The router denies all of them: they are collected
 * from the local routes (every table) and the addresses of that namespace
 * at start, and a watcher adds any that appear later (lz_network_watch). */

static void host_local_add(lz_ipv4_prefix_list *l, const void *addr, uint8_t len)
{
    uint8_t a[4];
    memcpy(a, addr, 4);
    lz_ipv4_prefix p = lz_ipv4_prefix_make(a, len);
    lz_ipv4_list_add(l, &p);
}

/* One rtnetlink message (a dump entry or an event): the host-local prefixes
 * it names go into the list. RTM_DEL* is ignored on purpose: a prefix once
 * local stays denied (fail closed; a host address that moves elsewhere is
 * rarely a destination an agent needs). */
static int host_local_msg(const struct nlmsghdr *h, void *data)
{
    lz_ipv4_prefix_list *out = data;
    const struct nlattr *attr;
    if (h->nlmsg_type == RTM_NEWADDR && h->nlmsg_len >= mnl_nlmsg_size(sizeof(struct ifaddrmsg))) {
        const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(h);
        if (ifa->ifa_family != AF_INET)
            return MNL_CB_OK;
        /* IFA_ADDRESS is the peer on point-to-point links: not ours. */
        mnl_attr_for_each(attr, h, sizeof(*ifa)) {
            uint16_t t = mnl_attr_get_type(attr);
            if ((t == IFA_LOCAL || t == IFA_BROADCAST) && mnl_attr_get_payload_len(attr) == 4)
                host_local_add(out, mnl_attr_get_payload(attr), 32);
        }
    } else if (h->nlmsg_type == RTM_NEWROUTE &&
               h->nlmsg_len >= mnl_nlmsg_size(sizeof(struct rtmsg))) {
        const struct rtmsg *rt = mnl_nlmsg_get_payload(h);
        if (rt->rtm_family != AF_INET || (rt->rtm_type != RTN_LOCAL &&
                                          rt->rtm_type != RTN_BROADCAST &&
                                          rt->rtm_type != RTN_ANYCAST))
            return MNL_CB_OK;
        uint8_t dst[4] = { 0, 0, 0, 0 };
        mnl_attr_for_each(attr, h, sizeof(*rt)) {
            if (mnl_attr_get_type(attr) == RTA_DST && mnl_attr_get_payload_len(attr) == 4)
                memcpy(dst, mnl_attr_get_payload(attr), 4);
        }
        host_local_add(out, dst, rt->rtm_dst_len);
    }
    return MNL_CB_OK;
}

#define NL_DUMP_BUFSZ 32768

/* Dump every IPv4 address (RTM_GETADDR) or route of every table
 * (RTM_GETROUTE) of the socket's namespace through host_local_msg. */
static int nl_dump(struct mnl_socket *sock, uint16_t type, lz_ipv4_prefix_list *out)
{
    static char buf[NL_DUMP_BUFSZ];
    static unsigned seq;
    struct nlmsghdr *h = mnl_nlmsg_put_header(buf);
    h->nlmsg_type = type;
    h->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    h->nlmsg_seq = seq ? ++seq : (seq = (unsigned) time(NULL));
    if (type == RTM_GETADDR) {
        struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(h, sizeof(*ifa));
        ifa->ifa_family = AF_INET;
    } else {
        struct rtmsg *rt = mnl_nlmsg_put_extra_header(h, sizeof(*rt));
        rt->rtm_family = AF_INET; /* rtm_table 0: every table */
    }
    unsigned s = h->nlmsg_seq, portid = mnl_socket_get_portid(sock);
    if (mnl_socket_sendto(sock, h, h->nlmsg_len) < 0)
        return -1;
    for (;;) {
        ssize_t n = mnl_socket_recvfrom(sock, buf, sizeof(buf));
        if (n < 0)
            return -1;
        int r = mnl_cb_run(buf, (size_t) n, s, portid, host_local_msg, out);
        if (r < 0)
            return -1;
        if (r == MNL_CB_STOP)
            return 0;
    }
}

/* Every host-local prefix of the socket's namespace. A dump that a
 * concurrent change interrupted (EINTR) is repeated. */
static int host_local_scan(struct mnl_socket *sock, lz_ipv4_prefix_list *out)
{
    for (int tries = 0; tries < 5; tries++) {
        if (nl_dump(sock, RTM_GETADDR, out) == 0 && nl_dump(sock, RTM_GETROUTE, out) == 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
    return -1;
}

/* ---- helpers ----------------------------------------------------------- */

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

/* Run fn in a child that joined the network namespace pinned at `netns`
 * (or a new one pinned there when create is true). fn reports failure as
 * "step: strerror" in why. */
typedef int (*ns_fn)(void *arg, char *why, size_t why_len);

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
            snprintf(why, sizeof(why), "cannot create a network namespace: %s",
                     strerror(errno));
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

static int in_netns(const char *netns, bool create, ns_fn fn, void *arg, lz_error **err)
{
    netns_job j = { .netns = netns, .create = create, .fn = fn, .arg = arg };
    lz_fork_options opt = { .what = "a process in the network namespaces",
                            .pdeathsig = SIGKILL };
    int status = lz_fork_call(netns_child, &j, &opt, NULL, err);
    if (status < 0)
        return lz_error_prefix(err, "network sidecar");
    if (status != 0)
        return lz_error_set(err, 0, "network sidecar: setup failed");
    return 0;
}

#define FAIL(step)                                                                      \
    do {                                                                                \
        snprintf(why, why_len, "%s: %s", step, strerror(errno));                        \
        nl_close(&n);                                                                   \
        return -1;                                                                      \
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

typedef struct router_args {
    const char *sandbox_netns;
} router_args;

static int router_links(void *arg, char *why, size_t why_len)
{
    router_args *a = arg;
    nl n = { 0 };
    disable_ipv6();
    if (nl_open(&n) < 0)
        FAIL("netlink");
    int sfd = open(a->sandbox_netns, O_RDONLY | O_CLOEXEC);
    if (sfd < 0)
        FAIL("open the sandbox namespace");
    if (veth_create(&n, ROUTER_IF, SANDBOX_IF, sfd, LINK_MTU) < 0)
        FAIL("create the veth pair");
    close(sfd);
    unsigned lo = if_nametoindex("lo"), r = if_nametoindex(ROUTER_IF);
    if (!lo || !r)
        FAIL("find interfaces");
    if (link_up(&n, lo) < 0 || addr_add(&n, r, ROUTER_ADDR, LINK_PREFIX) < 0 || link_up(&n, r) < 0)
        FAIL("configure " ROUTER_IF);
    if (no_offloads(ROUTER_IF) < 0)
        FAIL("turn the offloads of " ROUTER_IF " off");
    if (veth_create(&n, DENY_IF, DENY_PEER, -1, 0) < 0)
        FAIL("create " DENY_IF);
    unsigned d = if_nametoindex(DENY_IF), dp = if_nametoindex(DENY_PEER);
    if (!d || !dp || link_up(&n, d) < 0 || link_up(&n, dp) < 0)
        FAIL("bring up " DENY_IF);
    write_sysctl("/proc/sys/net/ipv6/conf/" DENY_PEER "/disable_ipv6", "1");
    write_sysctl("/proc/sys/net/ipv6/conf/" DENY_IF "/disable_ipv6", "1");
    if (write_sysctl("/proc/sys/net/ipv4/ip_forward", "1") < 0)
        FAIL("enable forwarding");
    write_sysctl("/proc/sys/net/ipv6/conf/" ROUTER_IF "/disable_ipv6", "1");
    nl_close(&n);
    return 0;
}

static int sandbox_links(void *arg, char *why, size_t why_len)
{
    (void) arg;
    nl n = { 0 };
    disable_ipv6();
    write_sysctl("/proc/sys/net/ipv6/conf/" SANDBOX_IF "/disable_ipv6", "1");
    if (nl_open(&n) < 0)
        FAIL("netlink");
    unsigned lo = if_nametoindex("lo"), s = if_nametoindex(SANDBOX_IF);
    if (!lo || !s)
        FAIL("find interfaces");
    if (link_up(&n, lo) < 0 || addr_add(&n, s, SANDBOX_ADDR, LINK_PREFIX) < 0 || link_up(&n, s) < 0)
        FAIL("configure " SANDBOX_IF);
    if (no_offloads(SANDBOX_IF) < 0)
        FAIL("turn the offloads of " SANDBOX_IF " off");
    uint8_t any[4] = { 0, 0, 0, 0 };
    if (route_set(&n, RTM_NEWROUTE, RTN_UNICAST, any, 0, ROUTER_ADDR, s) < 0)
        FAIL("add the default route");
    nl_close(&n);
    return 0;
}

typedef struct policy_args {
    const lz_resolved_config *cfg;
} policy_args;

/* The routing table is the policy: longest prefix match between the
 * effective allow prefixes (via slirp) and deny prefixes (to the deny link);
 * the default route goes to the deny link too. */
static int router_policy(void *arg, char *why, size_t why_len)
{
    policy_args *a = arg;
    nl n = { 0 };
    if (nl_open(&n) < 0)
        FAIL("netlink");
    unsigned tap = if_nametoindex(SLIRP_IF), deny = if_nametoindex(DENY_IF);
    if (!tap || !deny)
        FAIL("find " SLIRP_IF " and " DENY_IF);
    uint8_t any[4] = { 0, 0, 0, 0 };
    /* slirp4netns --configure installed a default route via its gateway:
     * the default is deny. */
    route_set(&n, RTM_DELROUTE, RTN_UNICAST, any, 0, NULL, 0);
    if (route_set(&n, RTM_NEWROUTE, RTN_UNICAST, any, 0, NULL, deny) < 0)
        FAIL("add the default deny route");
    /* A prefix inside a never-routed range gets no route: nftables rejects
     * the range whatever the routes say, and a route there could replace
     * the router's own link routes (169.254.77.0/30, 100.96.0.0/24). The
     * configuration refuses such allows; denies there are redundant. */
    for (size_t i = 0; i < a->cfg->deny.count; i++)
        if (!lz_ipv4_never_routed_holding(&a->cfg->deny.items[i]) &&
            route_set(&n, RTM_NEWROUTE, RTN_UNICAST, a->cfg->deny.items[i].addr,
                      a->cfg->deny.items[i].len, NULL, deny) < 0)
            FAIL("add a deny route");
    for (size_t i = 0; i < a->cfg->allow.count; i++)
        if (!lz_ipv4_never_routed_holding(&a->cfg->allow.items[i]) &&
            route_set(&n, RTM_NEWROUTE, RTN_UNICAST, a->cfg->allow.items[i].addr,
                      a->cfg->allow.items[i].len, SLIRP_GW, tap) < 0)
            FAIL("add an allow route");
    nl_close(&n);
    return 0;
}

/* nftables: forward only what the routing table sends out through slirp
 * (plus the resolver), reject everything else at once, masquerade, and
 * accept nothing addressed to the router itself. Before anything goes out
 * through slirp: the never-routed ranges (lz_ipv4_never_routed: loopback,
 * 0.0.0.0/8, Lazaret's own links, multicast, reserved) and the host_local
 * set (the host's own addresses, lz_network_watch adds new ones) are
 * rejected, also inside an allowed prefix such as 0.0.0.0/0. A UDP
 * datagram is rejected as port unreachable, not administratively
 * prohibited: gVisor's netstack turns only the former into an error on the
 * sender's socket (ECONNREFUSED), so a denied DNS query fails at once
 * instead of after the client's timeout (docs/network.md "runsc's network
 * stack"). */
static const char ruleset_head[] =
    "table ip lazaret {\n"
    "  chain prerouting {\n"
    "    type nat hook prerouting priority dstnat; policy accept;\n"
    "    iifname \"" ROUTER_IF "\" ip daddr " ROUTER_ADDR " udp dport 53 dnat to " SLIRP_DNS "\n"
    "    iifname \"" ROUTER_IF "\" ip daddr " ROUTER_ADDR " tcp dport 53 dnat to " SLIRP_DNS "\n"
    "  }\n";

static const char ruleset_tail[] =
    "  chain forward {\n"
    "    type filter hook forward priority filter; policy drop;\n"
    "    iifname \"" SLIRP_IF "\" oifname \"" ROUTER_IF "\" ct state established,related accept\n"
    "    iifname \"" ROUTER_IF "\" ip daddr " SLIRP_DNS " meta l4proto { tcp, udp } th dport 53 accept\n"
    "    iifname \"" ROUTER_IF "\" ip daddr @never_routed meta l4proto tcp reject with tcp reset\n"
    "    iifname \"" ROUTER_IF "\" ip daddr @never_routed meta l4proto udp reject with icmp type port-unreachable\n"
    "    iifname \"" ROUTER_IF "\" ip daddr @never_routed reject with icmp type admin-prohibited\n"
    "    iifname \"" ROUTER_IF "\" ip daddr @host_local meta l4proto tcp reject with tcp reset\n"
    "    iifname \"" ROUTER_IF "\" ip daddr @host_local meta l4proto udp reject with icmp type port-unreachable\n"
    "    iifname \"" ROUTER_IF "\" ip daddr @host_local reject with icmp type admin-prohibited\n"
    "    iifname \"" ROUTER_IF "\" oifname \"" SLIRP_IF "\" accept\n"
    "    iifname \"" ROUTER_IF "\" meta l4proto tcp reject with tcp reset\n"
    "    iifname \"" ROUTER_IF "\" meta l4proto udp reject with icmp type port-unreachable\n"
    "    iifname \"" ROUTER_IF "\" reject with icmp type admin-prohibited\n"
    "  }\n"
    "  chain input {\n"
    "    type filter hook input priority filter; policy drop;\n"
    "    iifname \"lo\" accept\n"
    "    iifname \"" SLIRP_IF "\" ct state established,related accept\n"
    /* --publish: the sandbox answers connections the router's forwarder
     * made (the reply direction of a connection the router originated);
     * a connection the sandbox begins is new, in the original direction,
     * and rejected below. */
    "    iifname \"" ROUTER_IF "\" ip saddr " SANDBOX_ADDR " ct direction reply accept\n"
    "    iifname \"" ROUTER_IF "\" meta l4proto tcp reject with tcp reset\n"
    "    iifname \"" ROUTER_IF "\" meta l4proto udp reject with icmp type port-unreachable\n"
    "    iifname \"" ROUTER_IF "\" reject with icmp type admin-prohibited\n"
    "  }\n"
    /* What the router itself sends: only to the sandbox's address (the
     * forwarder's connections, and the resets and ICMP errors of the
     * forward chain's rejects, which leave through this hook). Nothing
     * of the router's own reaches slirp4netns, whatever a subverted
     * forwarder asks for; forwarded traffic does not pass here. */
    "  chain output {\n"
    "    type filter hook output priority filter; policy drop;\n"
    "    oifname \"lo\" accept\n"
    "    oifname \"" ROUTER_IF "\" ip daddr " SANDBOX_ADDR " accept\n"
    "  }\n"
    "  chain postrouting {\n"
    "    type nat hook postrouting priority srcnat; policy accept;\n"
    "    oifname \"" SLIRP_IF "\" masquerade\n"
    "  }\n"
    "}\n";

/* An interval set; auto-merge lets overlapping elements (127.0.0.0/8 and
 * 127.0.0.1) and later additions of covered ones be accepted. */
static size_t put_set(char *s, size_t cap, const char *name, const lz_ipv4_prefix *(*item)(
                          const void *, size_t), const void *items, size_t count)
{
    size_t o = (size_t) snprintf(s, cap, "  set %s {\n    type ipv4_addr; flags interval; "
                                         "auto-merge;\n", name);
    for (size_t i = 0; i < count && o < cap; i++) {
        char b[LZ_IPV4_PREFIX_BUFSZ];
        lz_ipv4_prefix_format(item(items, i), b);
        o += (size_t) snprintf(s + o, cap - o, "%s%s", i ? ", " : "    elements = { ", b);
    }
    if (o < cap)
        o += (size_t) snprintf(s + o, cap - o, "%s  }\n", count ? " }\n" : "");
    return o;
}

static const lz_ipv4_prefix *never_routed_item(const void *items, size_t i)
{
    return &((const lz_ipv4_reserved *) items)[i].prefix;
}

static const lz_ipv4_prefix *list_item(const void *items, size_t i)
{
    return &((const lz_ipv4_prefix *) items)[i];
}

static char *build_ruleset(const lz_ipv4_prefix_list *host_local, size_t *len)
{
    size_t cap = sizeof(ruleset_head) + sizeof(ruleset_tail) + 256 +
                 (LZ_IPV4_PREFIX_BUFSZ + 2) * (LZ_IPV4_NEVER_ROUTED_COUNT + host_local->count);
    char *s = lz_xmalloc(cap);
    /* The capacity is computed to fit; the clamps only keep a miscount from
     * writing past the buffer (nft then refuses the cut ruleset). */
#define CLAMP(o) ((o) < cap ? (o) : cap - 1)
    size_t o = CLAMP((size_t) snprintf(s, cap, "%s", ruleset_head));
    o = CLAMP(o + put_set(s + o, cap - o, "never_routed", never_routed_item,
                          lz_ipv4_never_routed, LZ_IPV4_NEVER_ROUTED_COUNT));
    o = CLAMP(o + put_set(s + o, cap - o, "host_local", list_item, host_local->items,
                          host_local->count));
    o = CLAMP(o + (size_t) snprintf(s + o, cap - o, "%s", ruleset_tail));
#undef CLAMP
    *len = o;
    return s;
}

typedef struct nft_args {
    const char *nft;
    const char *ruleset_path;
} nft_args;

static int router_nft(void *arg, char *why, size_t why_len)
{
    nft_args *a = arg;
    char *const argv[] = { (char *) "nft", (char *) "-f", (char *) a->ruleset_path, NULL };
    lz_spawn_options opt = { .merge_stderr = true };
    lz_spawn_output out = { 0 };
    lz_error *e = NULL;
    int status = lz_spawn_capture(a->nft, argv, &opt, &out, &e);
    if (status != 0) {
        while (out.len && out.data[out.len - 1] == '\n')
            out.data[--out.len] = '\0';
        snprintf(why, why_len, "nftables: %s",
                 status < 0 && e ? e->message : out.data ? out.data : "failed");
        lz_error_free(e);
        lz_spawn_output_free(&out);
        return -1;
    }
    lz_spawn_output_free(&out);
    return 0;
}

/* ---- the watcher -------------------------------------------------------- */

/* Add prefixes to the router's host_local set (the caller is in the router's
 * namespace). */
static int nft_add_host_local(const char *nft, const lz_ipv4_prefix *items, size_t count)
{
    size_t cap = 64 + (LZ_IPV4_PREFIX_BUFSZ + 2) * count;
    _cleanup_free_ char *cmd = lz_xmalloc(cap);
    size_t o = (size_t) snprintf(cmd, cap, "add element ip lazaret host_local {");
    for (size_t i = 0; i < count && o < cap; i++) {
        char b[LZ_IPV4_PREFIX_BUFSZ];
        lz_ipv4_prefix_format(&items[i], b);
        o += (size_t) snprintf(cmd + o, cap - o, "%s %s", i ? "," : "", b);
    }
    if (o >= cap - 2)
        return -1;
    snprintf(cmd + o, cap - o, " }");
    char *const argv[] = { (char *) "nft", cmd, NULL };
    lz_spawn_options opt = { .merge_stderr = true };
    lz_spawn_output out = { 0 };
    int status = lz_spawn_capture(nft, argv, &opt, &out, NULL);
    lz_spawn_output_free(&out);
    return status == 0 ? 0 : -1;
}

/* Something went wrong: host addresses added from now on might not be
 * denied, so the sandbox loses its egress (every destination joins the set,
 * and slirp4netns is ended). */
static _Noreturn void watch_fail_closed(const char *nft, pid_t slirp)
{
    lz_ipv4_prefix all = { { 0, 0, 0, 0 }, 0 };
    nft_add_host_local(nft, &all, 1);
    kill(slirp, SIGKILL);
    _exit(1);
}

/* The watcher's main loop. `events` is subscribed to IPv4 address and route
 * changes, `dumps` is for re-reading everything; both sockets were opened in
 * the supervisor's namespace and stay there after setns (a socket belongs
 * to the namespace it was created in). Events queued since the start-up
 * scan are read first, so nothing between the scan and now is missed; an
 * overflowed queue (ENOBUFS) makes it scan again. */
static _Noreturn void watch_main(struct mnl_socket *events, struct mnl_socket *dumps,
                                 const char *router_netns, const char *nft,
                                 lz_ipv4_prefix_list known, pid_t slirp)
{
    int fd = open(router_netns, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) < 0)
        watch_fail_closed(nft, slirp);
    close(fd);
    static char buf[NL_DUMP_BUFSZ];
    for (;;) {
        lz_ipv4_prefix_list got = { 0 }, fresh = { 0 };
        ssize_t n = recv(mnl_socket_get_fd(events), buf, sizeof(buf), 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == ENOBUFS) {
            if (host_local_scan(dumps, &got) < 0)
                watch_fail_closed(nft, slirp);
        } else if (n <= 0 || mnl_cb_run(buf, (size_t) n, 0, 0, host_local_msg, &got) < 0) {
            watch_fail_closed(nft, slirp);
        }
        for (size_t i = 0; i < got.count; i++)
            if (!lz_ipv4_list_covers(&known, &got.items[i]))
                lz_ipv4_list_add(&fresh, &got.items[i]);
        if (fresh.count && nft_add_host_local(nft, fresh.items, fresh.count) < 0)
            watch_fail_closed(nft, slirp);
        for (size_t i = 0; i < fresh.count; i++)
            lz_ipv4_list_add(&known, &fresh.items[i]);
        lz_ipv4_list_clear(&got);
        lz_ipv4_list_clear(&fresh);
    }
}

typedef struct watch_job {
    struct mnl_socket *events, *dumps;
    const char *router_netns, *nft;
    const lz_ipv4_prefix_list *known;
    pid_t slirp;
} watch_job;

static int watch_child(void *arg, int channel, lz_error **err)
{
    (void) err;
    const watch_job *j = arg;
    if (lz_fork_ready(channel) < 0)
        return 1;
    /* Keep only the two sockets; stdio to /dev/null. */
    int ev = mnl_socket_get_fd(j->events), du = mnl_socket_get_fd(j->dumps);
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int i = 0; i < 3; i++)
        dup2(devnull, i);
    /* A fork without exec: O_CLOEXEC does not help, close the rest. */
    const int keep[] = { 0, 1, 2, ev, du };
    if (lz_close_fds_except(keep, LZ_ARRAY_SIZE(keep)) < 0)
        watch_fail_closed(j->nft, j->slirp);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    lz_ipv4_prefix_list copy = { 0 };
    for (size_t i = 0; i < j->known->count; i++)
        lz_ipv4_list_add(&copy, &j->known->items[i]);
    watch_main(j->events, j->dumps, j->router_netns, j->nft, copy, j->slirp);
}

static int watch_start(struct mnl_socket *events, struct mnl_socket *dumps,
                       const char *router_netns, const char *nft,
                       const lz_ipv4_prefix_list *known, pid_t slirp, pid_t *ret_pid,
                       lz_error **err)
{
    watch_job j = { events, dumps, router_netns, nft, known, slirp };
    /* Its own name: not taken for the supervisor (ps, tests, lazaret
     * doctor). The supervisor is often pid 1 of its own pid namespace: the
     * child's check of its parent holds there too. */
    lz_fork_options opt = { .what = "the address watcher", .pdeathsig = SIGKILL,
                            .name = "lz-netwatch" };
    lz_child child;
    if (lz_fork_call(watch_child, &j, &opt, &child, err) < 0)
        return -1;
    *ret_pid = lz_child_release(&child); /* the supervisor's reaper collects it by pid */
    return 0;
}

bool lz_network_child_exited(lz_network *net, pid_t pid)
{
    if (pid <= 0 || pid != net->watch_pid)
        return false;
    net->watch_pid = 0;
    lz_best_effort(lz_child_kill(&net->slirp, SIGKILL, NULL)); /* by pidfd: never a recycled pid */
    return true;
}

static struct mnl_socket *nl_socket(unsigned groups)
{
    struct mnl_socket *s = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
    if (s && mnl_socket_bind(s, groups, MNL_SOCKET_AUTOPID) < 0) {
        mnl_socket_close(s);
        s = NULL;
    }
    if (s && groups) {
        /* Room for bursts of events (best effort: capped by rmem_max);
         * an overflow is noticed (ENOBUFS) and answered by a new scan. */
        int size = 1 << 20;
        setsockopt(mnl_socket_get_fd(s), SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
    }
    return s;
}

/* ---- setup ------------------------------------------------------------- */

static char *describe_policy(const lz_resolved_config *cfg, size_t host_local)
{
    size_t cap = 256 + 24 * (cfg->allow.count + cfg->deny.count);
    char *s = lz_xmalloc(cap);
    size_t o = (size_t) snprintf(s, cap, "IPv4 default deny; IPv6 disabled; resolver %s; allow",
                                 LZ_NET_RESOLVER);
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
        snprintf(s + o, cap - o, "; never: loopback, this host (%zu local prefixes, watched), "
                                 "link-local, multicast, reserved", host_local);
    return s;
}

int lz_network_setup(const lz_resolved_config *cfg, const char *gen_dir, int gen_fd,
                     lz_network *ret, lz_error **err)
{
    lz_network net = { 0 };
    _cleanup_free_ char *slirp = NULL, *nft = NULL, *rules_path = NULL, *rules = NULL;
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
    events = nl_socket(RTMGRP_IPV4_IFADDR | RTMGRP_IPV4_ROUTE);
    dumps = nl_socket(0);
    if (!events || !dumps || host_local_scan(dumps, &host_local) < 0) {
        lz_error_set(err, errno, "network sidecar: cannot read this machine's addresses "
                                 "(rtnetlink)");
        goto fail;
    }

    router_args ra = { net.sandbox_netns };
    policy_args pa = { cfg };
    if (in_netns(net.sandbox_netns, true, NULL, NULL, err) < 0 ||
        in_netns(net.router_netns, true, NULL, NULL, err) < 0 ||
        in_netns(net.router_netns, false, router_links, &ra, err) < 0 ||
        in_netns(net.sandbox_netns, false, sandbox_links, NULL, err) < 0)
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
        char *const argv[] = { (char *) "slirp4netns", (char *) "--configure",
                               (char *) LINK_MTU_ARG, (char *) "--disable-host-loopback",
                               (char *) "--cidr=" SLIRP_CIDR, (char *) "--enable-sandbox",
                               (char *) "--enable-seccomp", (char *) "--ready-fd=3",
                               (char *) "--netns-type=path", net.router_netns,
                               (char *) SLIRP_IF, NULL };
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
    /* The ruleset holds no secret: a file in the generation directory. */
    rules_path = lz_xasprintf("%s/netns/nftables.conf", gen_dir);
    {
        size_t rules_len = 0;
        rules = build_ruleset(&host_local, &rules_len);
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
    if (in_netns(net.router_netns, false, router_nft, &na, err) < 0) {
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
    if (in_netns(net.router_netns, false, router_policy, &pa, err) < 0)
        goto fail;
    if (watch_start(events, dumps, net.router_netns, nft, &host_local, net.slirp.pid,
                    &net.watch_pid, err) < 0) {
        lz_error_prefix(err, "network sidecar");
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
        dom != AF_INET || (l = sizeof(type), getsockopt(listen_fd, SOL_SOCKET, SO_TYPE, &type,
                                                        &l)) < 0 || type != SOCK_STREAM) {
        lz_error_set(err, EINVAL, "publish: the descriptor for sandbox port %u is not a "
                                  "listening TCP socket", port);
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
    lz_fork_options opt = { .what = "the forwarder", .pdeathsig = SIGKILL,
                            .name = "lz-publish" };
    lz_child child;
    int r = lz_fork_call(publish_child, &j, &opt, &child, err);
    close(ns);
    if (r < 0) {
        lz_error_prefix(err, "publish");
        return -1;
    }
    return lz_child_release(&child); /* the supervisor's reaper collects it by pid */
}

void lz_network_clear(lz_network *net)
{
    if (net->watch_pid > 0) {
        kill(net->watch_pid, SIGKILL);
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
