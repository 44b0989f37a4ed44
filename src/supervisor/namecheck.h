/* SPDX-License-Identifier: Apache-2.0
 *
 * lz-namecheck (issue 25, item 3; docs/network.md "The name on the
 * connection"): a name is checked on the connection, not only when it is
 * resolved. The router redirects TCP to ports 80 and 443 of addresses
 * learned for allowed names (nftables set `learned`) to this relay on
 * ROUTER_ADDR:NAMECHECK_PORT. Per connection it reads the first bytes (at
 * most LZ_HELLO_MAX, within LZ_NAMECHECK_HELLO_MS), takes the name the
 * client says it talks to (TLS server_name, HTTP Host), and relays to the
 * original destination only when the host rules allow that name; any other
 * connection is reset and reported to the keeper (SC_NAME_DENIED). With
 * deny_hosts, TCP to ports 80 and 443 of the addresses the prefix policy
 * allows (set `prefix_allowed`) comes here too: there only a denied name
 * is refused. On port 443 a passed ClientHello goes through the TLS gate
 * (tlsgate.h) before the free relay: nothing more of the client's reaches
 * the server before its ServerHello, and the ClientHello after a
 * HelloRetryRequest must name the same server.
 *
 * The process lives in the supervisor's network namespace (its outgoing
 * connections leave from there, as slirp4netns's do); only its listening
 * socket was made in the router's. No capability, seccomp allowlist
 * (lz_relay_confine), at most LZ_NAMECHECK_MAX_CONNS connections at once,
 * each with the relay bounds of supervisor/forward.h.
 */
#ifndef LAZARET_SUPERVISOR_NAMECHECK_H
#define LAZARET_SUPERVISOR_NAMECHECK_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/hosts.h"
#include "config/resolve.h"

/* Connections at once (reading a hello, connecting or relaying); more wait
 * in the listen backlog. With two 64 KiB buffers each: at most 32 MiB. */
#define LZ_NAMECHECK_MAX_CONNS 256
/* A client that has not said its name within this is cut (reset). */
#define LZ_NAMECHECK_HELLO_MS 10000

typedef enum lz_namecheck_verdict {
    LZ_NAMECHECK_MORE = 0, /* a prefix of a valid hello: read more */
    LZ_NAMECHECK_PASS,     /* the name is allowed: connect and relay */
    LZ_NAMECHECK_REFUSE,   /* reset; *why says why (SC_NAME_WHY_*) */
} lz_namecheck_verdict;

/* The decision on the first bytes buf[0..len) of a connection to port
 * (443: a TLS ClientHello, 80: an HTTP/1.x request; any other port is
 * refused). complete: no more bytes will come (end of stream, the bound
 * reached, the time up): a prefix is then refused as invalid. name gets the
 * canonical name when there is one ("" otherwise), also on a refusal for
 * the denial log. prefix_allowed: the destination is one the prefix policy
 * allows (lz_namecheck_destination_ok): only a name deny_hosts denies is
 * refused (SC_NAME_WHY_NOT_ALLOWED; the keeper's record names the
 * deny_hosts pattern), anything else passes once decided — no name, an
 * encrypted hello, bytes that are not TLS / HTTP. Pure: no I/O. */
lz_namecheck_verdict lz_namecheck_decide(const lz_host_list *allow, const lz_host_list *deny,
                                         bool prefix_allowed, uint16_t port,
                                         const unsigned char *buf, size_t len, bool complete,
                                         char name[static LZ_HOST_NAME_MAX + 1], int *why);

/* Whether the name check may connect to dst (network byte order address):
 * the prefix policy leaves it to the default (LZ_PREFIX_DEFAULT: neither an
 * allow nor a deny prefix, never a never-routed range; the only addresses
 * the keeper puts into `learned`) — or, when cfg has deny_hosts, allows it
 * (LZ_PREFIX_ALLOWED: the router's prefix_allowed set; *prefix_allowed is
 * then set, for lz_namecheck_decide) — and route_fd (a NETLINK_ROUTE socket of
 * the namespace the connection would leave from) routes it as unicast
 * (never to this host: a local, broadcast or unreachable route refuses). */
bool lz_namecheck_destination_ok(const lz_resolved_config *cfg, int route_fd,
                                 const struct sockaddr_in *dst, bool *prefix_allowed);

/* The relay: accepts on listen_fd (non-blocking, listening), checks, and
 * relays until the listener fails (returns 1). Denials go to keeper_fd (a
 * SOCK_SEQPACKET socket, one sc_dns_msg per packet, never blocking: a
 * keeper that does not read loses records, never the relay). */
int lz_namecheck_run(int listen_fd, int keeper_fd, int route_fd, const lz_resolved_config *cfg);

#endif
