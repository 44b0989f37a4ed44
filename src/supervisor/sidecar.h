/* SPDX-License-Identifier: Apache-2.0
 *
 * The Network Sidecar (SR-5, SR-6): the sandbox's network namespace has
 * only a veth link to a router namespace; the router's routing table IS the
 * policy; slirp4netns (with host loopback disabled) is the only way out.
 * Everything is created and programmed by the Runtime Supervisor before the
 * sandbox starts; the sandbox gets no capability over any of it.
 *
 *   sandbox netns                router netns                     host netns
 *   lo, lzs0 169.254.77.2/30 ── lzr0 169.254.77.1/30              slirp4netns
 *   default via 169.254.77.1     tap0 100.96.0.100/24 (slirp) ──── (sockets)
 *   IPv6 disabled                routes: allow → via 100.96.0.2, deny → prohibit,
 *                                default → unreachable; nftables: forward only
 *                                what a route sends to tap0, reject the rest at
 *                                once (TCP reset / ICMP admin-prohibited),
 *                                masquerade, nothing addressed to the router
 *                                itself but DNS: 169.254.77.1:53 is lz-dns's
 *                                (sockets made here, process in the host netns)
 *
 * Addresses: the veth link uses IPv4 link-local space (169.254.0.0/16) and
 * slirp's network 100.96.0.0/24 (shared address space): neither is ever
 * forwarded by the policy (the router forwards only what a route sends to
 * tap0, and a policy route to 100.96.0.0/24 or 169.254.0.0/16 would be a
 * route to the router's own links, which nftables refuses). RFC 1918 space
 * is never used, so the default deny of 10/8, 172.16/12, 192.168/16 cannot
 * collide with Lazaret's own plumbing.
 *
 * The host itself is never reachable: slirp4netns connects from the
 * supervisor's network namespace, so every address local there (all
 * interfaces, broadcast, local routes) is put into the router's nftables set
 * host_local at start and rejected; a watcher process (lz-netwatch) adds
 * addresses that appear later, and its end ends egress (docs/network.md,
 * "Never reachable").
 */
#ifndef LAZARET_SUPERVISOR_SIDECAR_H
#define LAZARET_SUPERVISOR_SIDECAR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/spawn.h"
#include "config/resolve.h"

#define LZ_NET_RESOLVER "169.254.77.1"

typedef struct lz_network {
    char *sandbox_netns; /* pinned path of the sandbox's network namespace */
    char *router_netns;  /* pinned path of the router's network namespace */
    /* slirp4netns, with a pidfd: signalled through it, so a slirp4netns
     * that died and was reaped by the supervisor's waitpid(-1) loop is never
     * confused with a process that got its pid later. */
    lz_child slirp;
    /* Watches the supervisor's (slirp4netns's) network namespace for new
     * local addresses and adds each to the router's host_local set. */
    pid_t watch_pid;
    /* The other ends of the set keeper's socketpairs (lz-netwatch holds
     * its ends): for lz-dns and lz-namecheck, handed to them when they
     * start, then closed here (-1). SOCK_SEQPACKET, sc_dns_msg. */
    int dns_keeper_fd, namecheck_keeper_fd;
    /* The DNS responder (lz-dns): the sandbox's only resolver. When it
     * ends the sandbox has no DNS (its sockets went with it). */
    pid_t dns_pid;
    /* The name check on connections to learned addresses (lz-namecheck);
     * 0 when the configuration has no allow_hosts (nothing is learned). */
    pid_t namecheck_pid;
    size_t host_local_count; /* host-local prefixes found at start */
    char *policy_text;       /* DerivedNetworkPolicy, human-readable, for the log/store */
} lz_network;

/* Create both namespaces under gen_dir (which must be in the caller's own
 * mount namespace), program the router from the effective policy, start
 * slirp4netns, and wait until it is ready. denial_logs_fd: the Domain's
 * logs directory, where the keeper writes the denial log (-1: none; not
 * kept, the keeper has its own copy). lz_network_clear() kills and reaps
 * slirp4netns (unless the caller's reaper got it first). */
LZ_MUST_CHECK
int lz_network_setup(const lz_resolved_config *cfg, const char *gen_dir, int gen_fd,
                     int denial_logs_fd, lz_network *ret, lz_error **err);

void lz_network_clear(lz_network *net);

/* `lazaret run --publish` (docs/network.md "Publishing a port"): fork a
 * forwarder (lz-publish) that joins the router's network namespace,
 * confines itself (supervisor/forward.h) and relays every connection
 * accepted on listen_fd — a listening TCP socket bound on the host, which
 * stays in the host's namespace — to the sandbox's address, port `port`.
 * The router's nftables let the router itself send only to the sandbox's
 * address, and accept from the sandbox only the replies of connections it
 * made. Returns the forwarder's pid (the caller reaps it and kills it when
 * the session ends), or -1. */
LZ_MUST_CHECK
pid_t lz_network_publish(const lz_network *net, int listen_fd, uint16_t port, lz_error **err);

/* The watcher ended (pid == net->watch_pid): host addresses added from now
 * on would not be denied, so egress ends: slirp4netns is killed (fail
 * closed). Returns true when pid was the watcher. */
bool lz_network_child_exited(lz_network *net, pid_t pid);

/* The DNS responder ended (pid == net->dns_pid): logged; the sandbox has no
 * DNS from now on (fail closed: nothing else answers on its resolver's
 * address), and everything else goes on. Returns true when pid was it. */
bool lz_network_dns_exited(lz_network *net, pid_t pid, int status);

#endif
