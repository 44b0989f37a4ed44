/* SPDX-License-Identifier: Apache-2.0
 *
 * What the Network Sidecar's files share (sidecar.h is the contract);
 * nothing else includes it. Bottom up, a file calls only files listed
 * before it:
 *
 *   netlink.c   netlink (libmnl): links, addresses, routes; the host's own
 *               addresses
 *   netns.c     the sandbox's and the router's namespaces: made, entered
 *               (in a child), their links and the routing table that is
 *               the policy
 *   nftables.c  the router's ruleset and additions to its host_local set
 *   keeper.c    the set keeper: the learned-address set, the NFLOG of
 *               rejected packets, the denial log's records (it runs in
 *               lz-netwatch; the messages of lz-dns and lz-namecheck to it
 *               are at the end of this file)
 *   netwatch.c  lz-netwatch: the watcher of host addresses that appear
 *               later, and the keeper's loop
 *   dns_loop.c  the DNS responder's event loop (lz-dns)
 *   dns.c       the DNS responder's start: its upstream resolvers, its
 *               sockets made in the router's namespace, its confinement
 *   namecheck.c the name check on the connection (lz-namecheck,
 *               namecheck.h); calls only forward.c's relay
 *   sidecar.c   setup in order, slirp4netns, --publish forwarders, clear
 */
#ifndef LAZARET_SUPERVISOR_SIDECAR_INTERNAL_H
#define LAZARET_SUPERVISOR_SIDECAR_INTERNAL_H

#include <libmnl/libmnl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "config/network.h"
#include "config/resolve.h"
#include "protocol/dns.h"
#include "store/denials.h"
#include "supervisor/sidecar.h"

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

typedef struct nl {
    struct mnl_socket *sock;
    unsigned portid;
    unsigned seq;
    char buf[8192];
} nl;

/* Run fn in a child that joined the network namespace pinned at `netns`
 * (or a new one pinned there when create is true). fn reports failure as
 * "step: strerror" in why. */
typedef int (*ns_fn)(void *arg, char *why, size_t why_len);

typedef struct router_args {
    const char *sandbox_netns;
} router_args;

typedef struct policy_args {
    const lz_resolved_config *cfg;
    bool host_rules; /* route LEARNED_MARK through LEARNED_TABLE */
} policy_args;

typedef struct nft_args {
    const char *nft;
    const char *ruleset_path;
} nft_args;

/* ---- netlink.c --------------------------------------------------------- */

int sc_nl_open(nl *n);
void sc_nl_close(nl *n);
int sc_link_up(nl *n, unsigned ifindex);
/* A veth pair name/peer; the peer moved into the namespace peer_netns_fd
 * (-1: stays) with mtu (0: the default). */
int sc_veth_create(nl *n, const char *name, const char *peer, int peer_netns_fd, uint32_t mtu);
int sc_addr_add(nl *n, unsigned ifindex, const char *addr, uint8_t len);
int sc_route_set(nl *n, uint16_t cmd, uint8_t type, const uint8_t dst[4], uint8_t len,
                 const char *gw, unsigned oif);
int sc_route_set_in(nl *n, uint32_t table, uint16_t cmd, uint8_t type, const uint8_t dst[4],
                    uint8_t len, const char *gw, unsigned oif);
int sc_rule_fwmark(nl *n, uint32_t mark, uint32_t table, uint32_t priority);
/* mnl callback: the host-local prefixes of one address or route message
 * into data (an lz_ipv4_prefix_list). */
int sc_host_local_msg(const struct nlmsghdr *h, void *data);
int sc_host_local_scan(struct mnl_socket *sock, lz_ipv4_prefix_list *out);
/* A receive buffer for dumps and events of the host's addresses. */
#define NL_DUMP_BUFSZ 32768
/* A NETLINK_ROUTE socket bound to groups (0: none). */
struct mnl_socket *sc_nl_socket(unsigned groups);

/* ---- netns.c ----------------------------------------------------------- */

int sc_in_netns(const char *netns, bool create, ns_fn fn, void *arg, lz_error **err);
/* Sockets made in the namespace pinned at netns, by a child that joined it,
 * and handed back (SCM_RIGHTS; at most 4): a socket keeps the namespace it
 * was created in, while the caller stays in its own, which it could not
 * enter again (the supervisor's network namespace belongs to the initial
 * user namespace, over which it has no capability). make fills fds[0..n)
 * or says why it failed. */
typedef int (*sc_socket_maker)(void *arg, int *fds, char *why, size_t why_len);
int sc_sockets_in_netns(const char *netns, sc_socket_maker make, void *arg, int *fds, size_t n,
                        lz_error **err);
/* ns_fn steps: in the router's namespace (router_args), in the sandbox's,
 * and the router's routes (policy_args). */
int sc_router_links(void *arg, char *why, size_t why_len);
int sc_sandbox_links(void *arg, char *why, size_t why_len);
int sc_router_policy(void *arg, char *why, size_t why_len);

/* ---- nftables.c -------------------------------------------------------- */

typedef struct sc_ruleset_opts {
    /* The profile has host rules: the learned set, its mark, the redirect
     * to the name check and the input accept for it, QUIC to learned
     * addresses rejected. */
    bool host_rules;
    /* The profile has deny_hosts: TCP to ports 80 and 443 of these ranges
     * (the addresses the prefix policy allows, lz_ipv4_policy_allowed_ranges)
     * is redirected to the name check too, which refuses a denied name
     * there. None: no such set, no such redirect. */
    const lz_ipv4_range *prefix_allowed;
    size_t n_prefix_allowed;
} sc_ruleset_opts;

char *sc_build_ruleset(const lz_ipv4_prefix_list *host_local, const sc_ruleset_opts *opts,
                       size_t *len);
/* ns_fn step (nft_args): load the ruleset file into the router. */
int sc_router_nft(void *arg, char *why, size_t why_len);
int sc_nft_add_host_local(const char *nft, const lz_ipv4_prefix *items, size_t count);

/* ---- namecheck.c ------------------------------------------------------- */

/* Fork lz-namecheck (namecheck.h): it listens on ROUTER_ADDR:NAMECHECK_PORT
 * in the router's namespace, lives in the caller's, and reports each
 * refused connection to keeper_fd (SC_NAME_DENIED; -1: not reported).
 * Returns once it listens and is confined. */
int sc_namecheck_start(const lz_resolved_config *cfg, const char *router_netns, int keeper_fd,
                       pid_t *ret_pid, lz_error **err);

/* ---- the DNS responder (lz-dns) and the set keeper ---------------------
 *
 * lz-dns parses untrusted bytes (the sandbox's queries, upstream answers)
 * and holds no capability; the keeper holds the router's nftables socket.
 * They talk over a SOCK_SEQPACKET socketpair, one fixed-size message per
 * packet, lz-dns asking and the keeper answering every LEARN:
 *
 *   SC_DNS_LEARN   the addresses upstream gave for an allowed name. The
 *                  keeper checks each again (the prefix policy must say
 *                  LZ_PREFIX_DEFAULT or LZ_PREFIX_ALLOWED, never
 *                  host_local), puts those that pass into the router's
 *                  `learned` set with the timeout, and answers
 *                  SC_DNS_LEARNED with a bit per address it admitted.
 *                  lz-dns releases the answer to the sandbox only after
 *                  that, and only with the admitted addresses.
 *   SC_DNS_DENIED  a query lz-dns refused (no answer expected), for the
 *                  denial log: the keeper writes the record, with the rule
 *                  and the line that would allow it.
 *
 * A learned address stays reachable for its timeout: the answer's TTL
 * bounded to [SC_LEARN_TTL_MIN, SC_LEARN_TTL_MAX] seconds; the TTL the
 * sandbox is told is never longer than that. Established connections
 * outlive the element (conntrack). */
#define SC_LEARN_TTL_MIN 30
#define SC_LEARN_TTL_MAX 3600

enum {
    SC_DNS_LEARN = 1,
    SC_DNS_LEARNED = 2,
    SC_DNS_DENIED = 3,
    SC_NAME_DENIED = 4,
    SC_PEER_UNSENT = 5, /* only the `unsent` count (sc_peer_flush) */
};

/* SC_NAME_DENIED: lz-namecheck refused a connection to addrs[0]:port
 * (name: the SNI or Host it carried, "" when none; why: SC_NAME_WHY_*). */
enum {
    SC_NAME_WHY_NOT_ALLOWED = 1, /* the name is not allowed by the host rules */
    SC_NAME_WHY_NO_NAME,         /* no SNI / no Host header */
    SC_NAME_WHY_ENCRYPTED,       /* an encrypted ClientHello */
    SC_NAME_WHY_INVALID,         /* not TLS / HTTP, or over a bound, or too slow */
    SC_NAME_WHY_ADDRESS,         /* the destination is not one the host rules may open (the
                                  * prefix policy decides it, or it is this host's own) */
    SC_NAME_WHY_RETRY_NAME,      /* TLS: the ClientHello after a HelloRetryRequest named another
                                  * server (or none, or an encrypted one): tlsgate.h */
    SC_NAME_WHY_SERVER_HELLO,    /* TLS: the server's answer was not one ServerHello (a second
                                  * HelloRetryRequest, or not TLS) */
};

/* Addresses admitted only through a host rule: the router's nftables set
 * `learned` (flags timeout) marks their packets with LEARNED_MARK, and an
 * ip rule sends marked packets to LEARNED_TABLE, whose default route is
 * slirp4netns. TCP to ports 80 and 443 of them is redirected to the name
 * check (lz-namecheck) on ROUTER_ADDR:NAMECHECK_PORT. */
#define LEARNED_SET "learned"
#define LEARNED_MARK 0x4c7a
#define LEARNED_TABLE 77
#define NAMECHECK_PORT 4443
#define LEARNED_RULE_PRIORITY 100
/* NFLOG group of the forward chain's rejects (read by the keeper). */
#define DENY_NFLOG_GROUP 77
/* The router's named counter of every packet from the sandbox it rejects
 * (the keeper's exact totals). */
#define REJECTED_COUNTER "rejected"
/* How long the teardown waits for the keeper's last records (SIGTERM, then
 * SIGKILL). */
#define LZ_KEEPER_LAST_WORDS_MS 1000

/* Why lz-dns refused a query (SC_DNS_DENIED). */
enum {
    SC_DNS_WHY_UNLISTED = 1, /* strict mode: no allow_hosts pattern covers the name */
    SC_DNS_WHY_DENIED_HOST,  /* a deny_hosts pattern decides the name (or a name of its CNAME chain)
                              */
    SC_DNS_WHY_NOT_A_NAME,   /* the question is not a host name of the grammar */
    SC_DNS_WHY_TYPE,         /* a type the responder does not ask upstream (answered empty) */
    SC_DNS_WHY_ADDRESSES,    /* every address of the answer is one no rule lets the name reach */
};

typedef struct sc_dns_msg {
    uint8_t type; /* SC_DNS_* */
    uint8_t why;  /* SC_DNS_WHY_* (DENIED) */
    uint8_t n_addrs;
    uint8_t pad;
    uint16_t qtype;
    uint16_t port;      /* NAME_DENIED: the destination port */
    uint32_t serial;    /* LEARN: chosen by lz-dns, echoed in LEARNED */
    uint32_t timeout_s; /* LEARN: already bounded */
    uint32_t admitted;  /* LEARNED: bit i set = addrs[i] admitted */
    uint32_t unsent;    /* DENIED, NAME_DENIED, PEER_UNSENT: denials the sender could not
                           report before this message (its queue was full) */
    uint8_t addrs[LZ_DNS_MAX_ADDRS][4];
    char name[LZ_HOST_NAME_MAX + 1]; /* canonical, NUL-terminated */
} sc_dns_msg;

/* ---- peer.c: lz-dns's and lz-namecheck's reports to the keeper --------
 *
 * A report never blocks the sender (a sandbox flooding denials must not
 * slow its own answers): one that cannot go now is counted in *unsent,
 * and the count rides on the next report that goes, or on an
 * SC_PEER_UNSENT that sc_peer_flush sends when the loop is idle. The
 * keeper adds it to the log's count of denials not itemised, so the
 * totals stay exact (docs/network.md "Every denial is visible"). */
void sc_peer_report(int keeper_fd, sc_dns_msg *m, uint32_t *unsent);
/* Send the count alone if there is one; true when nothing is left to send. */
bool sc_peer_flush(int keeper_fd, uint32_t *unsent);

/* ---- keeper.c ---------------------------------------------------------- */

/* Recent answers' addresses and their names, for the denial log. */
#define SC_KEEPER_NAMES 256
/* Bytes of a rejected packet the kernel copies to the keeper: an IPv4
 * header with options and the ports. */
#define SC_KEEPER_COPY_RANGE 64

typedef struct sc_keeper_name {
    bool used;
    uint8_t addr[4];
    char name[LZ_HOST_NAME_MAX + 1];
} sc_keeper_name;

typedef struct sc_keeper {
    const lz_resolved_config *cfg;
    lz_denial_log *log; /* NULL: denials are not recorded */
    struct mnl_socket *nft, *nflog;
    uint32_t seq;
    sc_keeper_name names[SC_KEEPER_NAMES];
    size_t names_next;
    /* Exact totals of rejected packets: the kernel counts every one in the
     * router's `rejected` counter, the keeper counts those its log
     * brought; the difference is counted as not itemised. */
    uint64_t packets_itemised, packets_uncounted_reported;
} sc_keeper;

/* In the router's namespace: the nftables socket and the NFLOG
 * subscription. */
int sc_keeper_open(sc_keeper *k, const lz_resolved_config *cfg, lz_denial_log *log, char *why,
                   size_t why_len);
void sc_keeper_close(sc_keeper *k);
int sc_keeper_nflog_fd(const sc_keeper *k);
/* Put n distinct addresses into the learned set with a fresh timeout, in
 * one transaction; -1 when the kernel refused (none is added). */
int sc_keeper_set_add(sc_keeper *k, uint8_t addrs[][4], size_t n, uint32_t timeout_s);
/* Answer an SC_DNS_LEARN (out: SC_DNS_LEARNED); known: the host-local
 * prefixes. */
void sc_keeper_learn(sc_keeper *k, const lz_ipv4_prefix_list *known, const sc_dns_msg *in,
                     sc_dns_msg *out);
/* Record an SC_DNS_DENIED or SC_NAME_DENIED, and count a peer's unsent
 * denials (any message type). */
void sc_keeper_denied(sc_keeper *k, const sc_dns_msg *m);
/* Read the router's `rejected` counter and count, as denials not
 * itemised, the rejected packets the kernel's log limit kept from the
 * keeper (call about once a second; reads the queued log first). -1 when
 * the counter cannot be read. */
int sc_keeper_count(sc_keeper *k);
/* Read the queued logged packets; -1 when the socket failed. */
int sc_keeper_nflog_read(sc_keeper *k);

/* ---- netwatch.c -------------------------------------------------------- */

typedef struct sc_watch_args {
    struct mnl_socket *events, *dumps; /* rtnetlink, in the host's namespace */
    const char *router_netns, *nft;
    const lz_ipv4_prefix_list *known; /* the host-local prefixes found at start */
    pid_t slirp;
    const lz_resolved_config *cfg;
    int dns_fd, namecheck_fd; /* the keeper's ends of the socketpairs to lz-dns, lz-namecheck */
    int denial_logs_fd;       /* the Domain's logs directory, or -1 */
} sc_watch_args;

int sc_watch_start(const sc_watch_args *a, pid_t *ret_pid, lz_error **err);
/* ---- dns_loop.c, dns.c: the DNS responder (lz-dns) -------------------- */

/* Bounds of what a sandbox can make lz-dns hold (docs/network.md "DNS: the
 * sidecar is the only resolver"). */
#define SC_DNS_MAX_PENDING 64 /* queries in flight; one more: SERVFAIL at once */
#define SC_DNS_MAX_TCP 16     /* connections from the sandbox at once */

typedef struct sc_dns_setup {
    const lz_resolved_config *cfg; /* host lists and DNS mode */
    uint8_t resolvers[LZ_RESOLVERS_MAX][4];
    size_t n_resolvers;
    uint16_t upstream_port; /* 53 (another only in unit tests) */
    int udp_fd, tcp_fd;     /* bound on ROUTER_ADDR:53 in the router's namespace */
    int keeper_fd;          /* SOCK_SEQPACKET to the keeper, -1: none (nothing learned) */
} sc_dns_setup;

/* The loop; returns the process's exit status when a listening socket
 * fails (it never returns otherwise). */
int sc_dns_run(const sc_dns_setup *setup);

/* Start lz-dns (the caller is the supervisor, before `runsc create`): read
 * the upstream resolvers (cfg's, else the IPv4 nameservers of this
 * machine's /etc/resolv.conf: none usable fails the start), make its
 * sockets in the router's namespace, fork it. keeper_fd is handed to it
 * (the caller closes its copy). */
int sc_dns_start(const lz_resolved_config *cfg, const char *router_netns, int keeper_fd,
                 pid_t *ret_pid, lz_error **err);

/* lz-dns's confinement (after its descriptors are the only ones left): no
 * capability in any set, no new privileges, at most 91 descriptors, and a
 * seccomp allowlist of what the loop calls (socket for AF_INET only; no
 * open, exec, bind, kill, descriptor passing). */
int sc_dns_confine(void);

/* The upstream resolvers of a resolv.conf text (bounded: the first
 * `len` bytes; IPv4 nameservers only, 0.0.0.0 skipped, at most
 * LZ_RESOLVERS_MAX). Returns how many. */
size_t sc_dns_parse_resolv_conf(const char *text, size_t len, uint8_t out[][4]);

#endif
