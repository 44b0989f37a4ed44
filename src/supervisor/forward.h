/* SPDX-License-Identifier: Apache-2.0
 *
 * The port forwarder of `lazaret run --publish` (docs/network.md
 * "Publishing a port"): relays every connection accepted on a listening
 * socket that was bound on the host (127.0.0.1:HOSTPORT, by the
 * coordinator) to one fixed TCP address, the sandbox's, and the bytes back.
 *
 * It only ever connects to that one address, given when it starts; nothing
 * the sandbox sends is interpreted (bytes are relayed, never parsed). What
 * a hostile sandbox can do to it is bounded: at most
 * LZ_FORWARD_MAX_CONNS connections at once (further host connections wait
 * in the listen backlog), LZ_FORWARD_BUF bytes buffered per direction and
 * connection (a side that does not read stops the other side being read:
 * flow control, never growth), a connect that does not complete within
 * LZ_FORWARD_CONNECT_MS is dropped, and a half-close is passed on
 * (shutdown); once the host side has ended, LZ_FORWARD_LINGER_MS without
 * progress ends the connection (a sandbox cannot keep the slots of host
 * clients that left). While a host client keeps its connection open, the
 * slot is that client's, however idle.
 */
#ifndef LAZARET_SUPERVISOR_FORWARD_H
#define LAZARET_SUPERVISOR_FORWARD_H

#include <netinet/in.h>

#define LZ_FORWARD_MAX_CONNS 64
#define LZ_FORWARD_BUF 65536
#define LZ_FORWARD_CONNECT_MS 10000
/* After the host side said end of stream, a connection on which nothing
 * moves for this long is cut: host clients that left cannot leave slots
 * held by a sandbox that never closes. */
#define LZ_FORWARD_LINGER_MS 15000

/* Confine the calling process (the forwarder, after it joined the router's
 * network namespace): no new privileges, no capability in any set, at most
 * 2 * LZ_FORWARD_MAX_CONNS + 16 descriptors, and a seccomp filter that
 * allows only the system calls the relay makes (no open, exec, ptrace,
 * kill, bind, listen, sendmsg of descriptors...): a forwarder a sandbox
 * subverted could still only make TCP connections, and the router's
 * nftables output chain lets those reach the sandbox's address only. */
int lz_forward_confine(void);

/* Relay until the listening socket fails. Returns the exit status for the
 * forwarder process (1: the listener failed). Single-threaded; SIGPIPE is
 * never raised (MSG_NOSIGNAL). */
int lz_forward_run(int listen_fd, const struct sockaddr_in *target);

#endif
