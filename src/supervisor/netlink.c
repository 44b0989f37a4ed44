/* SPDX-License-Identifier: Apache-2.0
 *
 * Netlink for the Network Sidecar (libmnl): links, veth pairs, addresses
 * and routes, and the host's own addresses (every address local in the
 * supervisor's namespace, which slirp4netns connects from).
 */
#include "supervisor/sidecar_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/fib_rules.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int sc_nl_open(nl *n)
{
    n->sock = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
    if (!n->sock || mnl_socket_bind(n->sock, 0, MNL_SOCKET_AUTOPID) < 0)
        return -1;
    n->portid = mnl_socket_get_portid(n->sock);
    n->seq = (unsigned) time(NULL);
    return 0;
}

void sc_nl_close(nl *n)
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

int sc_link_up(nl *n, unsigned ifindex)
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
int sc_veth_create(nl *n, const char *name, const char *peer, int peer_netns_fd, uint32_t mtu)
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

int sc_addr_add(nl *n, unsigned ifindex, const char *addr, uint8_t len)
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
 * NULL: scope link), in routing table `table`. */
int sc_route_set_in(nl *n, uint32_t table, uint16_t cmd, uint8_t type, const uint8_t dst[4],
                    uint8_t len, const char *gw, unsigned oif)
{
    struct nlmsghdr *h = nl_msg(n, cmd, cmd == RTM_NEWROUTE ? NLM_F_CREATE | NLM_F_REPLACE : 0);
    struct rtmsg *rt = mnl_nlmsg_put_extra_header(h, sizeof(*rt));
    rt->rtm_family = AF_INET;
    rt->rtm_dst_len = len;
    rt->rtm_table = table < 256 ? (uint8_t) table : RT_TABLE_UNSPEC;
    rt->rtm_protocol = RTPROT_STATIC;
    rt->rtm_scope = cmd == RTM_DELROUTE ? RT_SCOPE_NOWHERE
                    : (!gw && oif)      ? RT_SCOPE_LINK
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
    mnl_attr_put_u32(h, RTA_TABLE, table);
    return nl_talk(n, h);
}

int sc_route_set(nl *n, uint16_t cmd, uint8_t type, const uint8_t dst[4], uint8_t len,
                 const char *gw, unsigned oif)
{
    return sc_route_set_in(n, RT_TABLE_MAIN, cmd, type, dst, len, gw, oif);
}

/* An IPv4 policy rule: packets whose mark is `mark` look up `table`, at
 * `priority` (after the local table's rule 0, so that addresses of the
 * router itself are still delivered to it). */
int sc_rule_fwmark(nl *n, uint32_t mark, uint32_t table, uint32_t priority)
{
    struct nlmsghdr *h = nl_msg(n, RTM_NEWRULE, NLM_F_CREATE | NLM_F_EXCL);
    struct fib_rule_hdr *fr = mnl_nlmsg_put_extra_header(h, sizeof(*fr));
    fr->family = AF_INET;
    fr->action = FR_ACT_TO_TBL;
    fr->table = table < 256 ? (uint8_t) table : RT_TABLE_UNSPEC;
    mnl_attr_put_u32(h, FRA_FWMARK, mark);
    mnl_attr_put_u32(h, FRA_FWMASK, 0xffffffffu);
    mnl_attr_put_u32(h, FRA_TABLE, table);
    mnl_attr_put_u32(h, FRA_PRIORITY, priority);
    return nl_talk(n, h);
}

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
int sc_host_local_msg(const struct nlmsghdr *h, void *data)
{
    lz_ipv4_prefix_list *out = data;
    const struct nlattr *attr;
    if (h->nlmsg_type == RTM_NEWADDR && h->nlmsg_len >= mnl_nlmsg_size(sizeof(struct ifaddrmsg))) {
        const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(h);
        if (ifa->ifa_family != AF_INET)
            return MNL_CB_OK;
        /* IFA_ADDRESS is the peer on point-to-point links: not ours. */
        mnl_attr_for_each(attr, h, sizeof(*ifa))
        {
            uint16_t t = mnl_attr_get_type(attr);
            if ((t == IFA_LOCAL || t == IFA_BROADCAST) && mnl_attr_get_payload_len(attr) == 4)
                host_local_add(out, mnl_attr_get_payload(attr), 32);
        }
    } else if (h->nlmsg_type == RTM_NEWROUTE &&
               h->nlmsg_len >= mnl_nlmsg_size(sizeof(struct rtmsg))) {
        const struct rtmsg *rt = mnl_nlmsg_get_payload(h);
        if (rt->rtm_family != AF_INET ||
            (rt->rtm_type != RTN_LOCAL && rt->rtm_type != RTN_BROADCAST &&
             rt->rtm_type != RTN_ANYCAST))
            return MNL_CB_OK;
        uint8_t dst[4] = { 0, 0, 0, 0 };
        mnl_attr_for_each(attr, h, sizeof(*rt))
        {
            if (mnl_attr_get_type(attr) == RTA_DST && mnl_attr_get_payload_len(attr) == 4)
                memcpy(dst, mnl_attr_get_payload(attr), 4);
        }
        host_local_add(out, dst, rt->rtm_dst_len);
    }
    return MNL_CB_OK;
}

/* Dump every IPv4 address (RTM_GETADDR) or route of every table
 * (RTM_GETROUTE) of the socket's namespace through sc_host_local_msg. */
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
        int r = mnl_cb_run(buf, (size_t) n, s, portid, sc_host_local_msg, out);
        if (r < 0)
            return -1;
        if (r == MNL_CB_STOP)
            return 0;
    }
}

/* Every host-local prefix of the socket's namespace. A dump that a
 * concurrent change interrupted (EINTR) is repeated. */
int sc_host_local_scan(struct mnl_socket *sock, lz_ipv4_prefix_list *out)
{
    for (int tries = 0; tries < 5; tries++) {
        if (nl_dump(sock, RTM_GETADDR, out) == 0 && nl_dump(sock, RTM_GETROUTE, out) == 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
    return -1;
}

struct mnl_socket *sc_nl_socket(unsigned groups)
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
