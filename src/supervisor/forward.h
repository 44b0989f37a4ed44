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
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* The same confinement for another relay of this kind (lz-namecheck), with
 * its own descriptor bound. */
int lz_relay_confine(unsigned max_fds);

/* The first half of every confinement of the sidecar's children
 * (lz-publish, lz-namecheck, lz-dns): at most max_fds descriptors, no new
 * privileges, and every capability of the user namespace dropped from
 * every set. Each then installs its own seccomp filter. -1 with errno. */
int lz_drop_privileges(unsigned max_fds);

/* Relay until the listening socket fails. Returns the exit status for the
 * forwarder process (1: the listener failed). Single-threaded; SIGPIPE is
 * never raised (MSG_NOSIGNAL). */
int lz_forward_run(int listen_fd, const struct sockaddr_in *target);

/* ---- one relayed connection (the forwarder's and lz-namecheck's) --------
 *
 * Two non-blocking TCP sockets: a, the side that began (the accepted
 * client), and b, the side the relay connected to. The bounds above apply
 * to each: LZ_FORWARD_BUF per direction (flow control), LZ_FORWARD_CONNECT_MS
 * for b's connect, LZ_FORWARD_LINGER_MS without progress once a ended, a
 * half-close passed on, a reset on one side passed to the other. The
 * caller owns the poll loop: it asks lz_relay_events what to poll for,
 * and hands the results to lz_relay_step. */
typedef struct lz_relay_dir {
    char *buf;
    size_t off, len;
    bool eof;  /* the reading side said end of stream */
    bool shut; /* passed on: shutdown(writing side, SHUT_WR) */
} lz_relay_dir;

typedef struct lz_relay {
    int a, b; /* -1: the slot is free */
    bool connecting;
    int64_t deadline; /* connecting: the connect deadline; after a's end:
                       * when the connection is cut unless bytes move */
    lz_relay_dir ab, ba;
    bool ab_gated;    /* lz_relay_gate: a's bytes are read only within a budget */
    uint64_t ab_left; /* how many more the relay may read from a */
} lz_relay;

int64_t lz_relay_now_ms(void);
/* One wait of a relay loop whose p[0] is its listening socket: ppoll for
 * at most wait ms (-1: no limit). 1: read the events; 0: interrupted,
 * poll again; -1: the loop must end (ppoll failed, or the listening
 * socket did). */
int lz_relay_poll(struct pollfd *p, size_t n, int64_t wait);

/* Take a and b (closed by lz_relay_end from then on); b's connect is still
 * in progress when connecting. first[0..first_len) (at most LZ_FORWARD_BUF)
 * is queued towards b, as if read from a. -1 (nothing taken) when out of
 * memory. */
int lz_relay_init(lz_relay *r, int a, int b, bool connecting, int64_t now, const void *first,
                  size_t first_len);

/* A gate on what a sends (default: none, as for --publish): the relay
 * reads at most total bytes from a, first[] included, then stops reading a
 * (it is not even polled for input) while b's bytes keep reaching a. The
 * owner then reads a itself, decides on what comes, and either lets it
 * through with lz_relay_admit or ends the connection; a's end of stream,
 * read by the owner, is passed on with lz_relay_a_ended. lz-namecheck gates
 * HTTP connections request by request (docs/network.md "Reused
 * connections"). -1 (nothing changed) when first[] already exceeds it. */
int lz_relay_gate(lz_relay *r, uint64_t total);
/* The gate's budget is spent: the next bytes of a are the owner's. */
bool lz_relay_gate_shut(const lz_relay *r);
/* Queue bytes[0..len) the owner read from a towards b, and open the gate
 * for total bytes in all (the queued ones included: total >= len).
 * -1 (nothing done) when the buffer towards b has no room for them yet:
 * try again once b took what waits. */
int lz_relay_admit(lz_relay *r, const void *bytes, size_t len, uint64_t total);
/* a's end of stream, read by the owner while the gate was shut: passed on
 * to b as a half-close, as the relay does with its own reads. */
void lz_relay_a_ended(lz_relay *r, int64_t now);
/* Queue bytes[0..len) towards a, after what waits for it (lz-namecheck's
 * TLS gate: the server's bytes it read before the relay took over). -1
 * (nothing queued) when they do not fit in LZ_FORWARD_BUF. */
int lz_relay_queue_to_a(lz_relay *r, const void *bytes, size_t len);

/* What to poll for on a and b (0: do not poll that side: a hung-up socket
 * reports POLLHUP whatever it is asked); lowers *wait (-1: none yet) to
 * the connection's deadline. */
void lz_relay_events(const lz_relay *r, int64_t now, short *ea, short *eb, int64_t *wait);

/* After the poll: move bytes, pass on ends and resets, enforce the
 * deadlines. False when the connection ended (both sockets closed, the slot
 * free). */
bool lz_relay_step(lz_relay *r, short ra, short rb, int64_t now);

/* Close both sides (abort: with a reset) and free the slot. */
void lz_relay_end(lz_relay *r, bool abort);

#endif
