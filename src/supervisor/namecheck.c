/* SPDX-License-Identifier: Apache-2.0
 *
 * lz-namecheck (namecheck.h): the decision on a connection's first bytes,
 * the destination's re-check, the relay loop, and its start in a child of
 * the supervisor whose listening socket is made in the router's namespace.
 */
#include "supervisor/namecheck.h"
#include "supervisor/sidecar_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/fork.h"
#include "common/util.h"
#include "protocol/hello.h"
#include "supervisor/forward.h"
#include "supervisor/tlsgate.h"

/* <linux/netfilter_ipv4.h> clashes with <netinet/in.h>: the one constant. */
#ifndef SO_ORIGINAL_DST
#define SO_ORIGINAL_DST 80
#endif

/* ---- the decision ------------------------------------------------------ */

static lz_namecheck_verdict refuse(int *why, int w)
{
    *why = w;
    return LZ_NAMECHECK_REFUSE;
}

/* What a connection's first bytes are, on a prefix-allowed address: TLS
 * and HTTP carry a name and are checked; nothing else passes. */
typedef enum nc_kind { NC_UNKNOWN, NC_TLS, NC_HTTP } nc_kind;

/* A handshake record on port 443 is TLS; everything else is held to
 * HTTP's strict grammar. Recognising what may pass unchecked went wrong
 * twice: "not HTTP-looking, so relayed" let request lines real servers
 * accept through (a vertical tab after the method, a target without '/':
 * attack round a25c, F1), and "SSH's identification line, so relayed" let
 * "SSH-2.0-x / HTTP/1.1", a valid method to servers that take any, through
 * with every later request (a25d, F1). So nothing passes unchecked: SSH to
 * ports 80 and 443 of a prefix-allowed address does not work once
 * deny_hosts exist (port 22 does). TLS only on 443: a ClientHello on port
 * 80 goes to what is almost always an HTTP server (a25d, F2). */
static nc_kind sniff(uint16_t port, const unsigned char *buf, size_t len)
{
    if (len == 0)
        return NC_UNKNOWN;
    return port == 443 && buf[0] == 0x16 ? NC_TLS : NC_HTTP;
}

/* White space as a lenient HTTP server splits a request line on (Python's
 * str.split over ISO 8859-1 bytes). */
static bool lenient_space(unsigned char c)
{
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0;
}

/* Whether a ClientHello's bytes also read as an HTTP/1.x request to a
 * lenient server: a first line (to the first LF) whose last word begins
 * "HTTP/", or a line (after LF or CR) beginning "Host:" in any letter
 * case. A ClientHello's
 * random and padding are the sender's to choose: such a polyglot, relayed
 * to a plain HTTP server behind the address, ran its request for any name
 * before the server's answer showed it was no TLS (a25d, F2). A real
 * ClientHello has neither but by a chance of about 2^-40 (its ALPN
 * "http/1.1" is in lower case and follows a length byte). */
static bool hello_reads_as_request(const unsigned char *buf, size_t len)
{
    const unsigned char *lf = memchr(buf, '\n', len);
    size_t line = lf ? (size_t) (lf - buf) : len, end = line;
    while (end > 0 && lenient_space(buf[end - 1]))
        end--;
    size_t word = end;
    while (word > 0 && !lenient_space(buf[word - 1]))
        word--;
    bool more_words = false;
    for (size_t i = 0; i < word; i++)
        more_words = more_words || !lenient_space(buf[i]);
    if (more_words && end - word >= 5 && memcmp(buf + word, "HTTP/", 5) == 0)
        return true;
    /* A header line begins after LF or a bare CR: Python's header parser
     * (email.feedparser) takes either for a line break. */
    for (size_t i = 0; i + 1 < len; i++) {
        if (buf[i] != '\n' && buf[i] != '\r')
            continue;
        size_t j = i + 1;
        if (len - j < 4 || strncasecmp((const char *) buf + j, "host", 4) != 0)
            continue;
        j += 4;
        while (j < len && (buf[j] == ' ' || buf[j] == '\t'))
            j++;
        if (j < len && buf[j] == ':')
            return true;
    }
    return false;
}

/* The name a TLS ClientHello or an HTTP request carries, decided: on a
 * learned address only an allowed name passes; on a prefix-allowed one
 * (deny_hosts) a denied name is refused, no name passes (a server's own
 * address, as in https://198.51.100.7/), and whatever hides or blurs the
 * name is refused — an encrypted ClientHello, a name that is no host name,
 * a message that is not whole within the bounds — since what the server
 * would make of it is unknown (attack round a25b, F2). */
static lz_namecheck_verdict decide_name(const lz_host_list *allow, const lz_host_list *deny,
                                        bool prefix_allowed, bool tls, const unsigned char *buf,
                                        size_t len, bool complete,
                                        char name[static LZ_HOST_NAME_MAX + 1], int *why)
{
    name[0] = '\0';
    *why = 0;
    char raw[LZ_HELLO_NAME_MAX];
    size_t raw_len = 0;
    lz_hello_result r = tls ? lz_tls_client_hello_name(buf, len, raw, &raw_len)
                            : lz_http_request_host(buf, len, raw, &raw_len);
    if (tls && r != LZ_HELLO_NEED_MORE && r != LZ_HELLO_INVALID && hello_reads_as_request(buf, len))
        return refuse(why, SC_NAME_WHY_INVALID);
    switch (r) {
    case LZ_HELLO_NEED_MORE:
        return complete || len >= LZ_HELLO_MAX ? refuse(why, SC_NAME_WHY_INVALID)
                                               : LZ_NAMECHECK_MORE;
    case LZ_HELLO_NO_NAME:
        return prefix_allowed ? LZ_NAMECHECK_PASS : refuse(why, SC_NAME_WHY_NO_NAME);
    case LZ_HELLO_ENCRYPTED:
        return refuse(why, SC_NAME_WHY_ENCRYPTED);
    case LZ_HELLO_INVALID:
        return refuse(why, SC_NAME_WHY_INVALID);
    case LZ_HELLO_NAME:
        break;
    default:
        return refuse(why, SC_NAME_WHY_INVALID);
    }
    if (!lz_host_name_canonical(raw, raw_len, name)) {
        name[0] = '\0'; /* not a host name: nothing of it goes to the log */
        return refuse(why, SC_NAME_WHY_INVALID);
    }
    lz_host_verdict v = lz_host_decide(allow, deny, name, NULL);
    if (v == LZ_HOST_ALLOWED || (prefix_allowed && v != LZ_HOST_DENIED))
        return LZ_NAMECHECK_PASS;
    return refuse(why, SC_NAME_WHY_NOT_ALLOWED);
}

/* Whether a connection is HTTP, checked request by request: by its port
 * on a learned address, by its bytes on a prefix-allowed one. */
static bool is_http(bool prefix_allowed, uint16_t port, const unsigned char *buf, size_t len)
{
    return prefix_allowed ? sniff(port, buf, len) == NC_HTTP : port == 80;
}

/* Whether a connection is TLS, whose handshake goes through the TLS gate:
 * as is_http. */
static bool is_tls(bool prefix_allowed, uint16_t port, const unsigned char *buf, size_t len)
{
    return prefix_allowed ? sniff(port, buf, len) == NC_TLS : port == 443;
}

lz_namecheck_verdict lz_namecheck_decide(const lz_host_list *allow, const lz_host_list *deny,
                                         bool prefix_allowed, uint16_t port,
                                         const unsigned char *buf, size_t len, bool complete,
                                         char name[static LZ_HOST_NAME_MAX + 1], int *why)
{
    name[0] = '\0';
    *why = 0;
    if (!prefix_allowed) {
        if (port != 443 && port != 80)
            return refuse(why, SC_NAME_WHY_INVALID); /* the router redirects no other port */
        return decide_name(allow, deny, false, port == 443, buf, len, complete, name, why);
    }
    switch (sniff(port, buf, len)) {
    case NC_TLS:
        return decide_name(allow, deny, true, true, buf, len, complete, name, why);
    case NC_HTTP:
        return decide_name(allow, deny, true, false, buf, len, complete, name, why);
    case NC_UNKNOWN:
    default:
        /* Silence until the end is refused too: relayed unchecked, its
         * first bytes after the deadline could be a request (a protocol
         * whose server speaks first does not work here; docs/network.md). */
        return complete || len >= LZ_HELLO_MAX ? refuse(why, SC_NAME_WHY_INVALID)
                                               : LZ_NAMECHECK_MORE;
    }
}

/* ---- the destination --------------------------------------------------- */

/* The type of the route the namespace of route_fd has for addr, or -1.
 * RTM_GETROUTE answers synchronously: the reply is queued before sendto
 * returns. */
static int route_type(int route_fd, const struct in_addr *addr)
{
    static uint32_t seq;
    struct {
        struct nlmsghdr h;
        struct rtmsg r;
        struct rtattr a;
        struct in_addr dst;
    } q = { 0 };
    q.h.nlmsg_len = sizeof(q);
    q.h.nlmsg_type = RTM_GETROUTE;
    q.h.nlmsg_flags = NLM_F_REQUEST;
    q.h.nlmsg_seq = ++seq;
    q.r.rtm_family = AF_INET;
    q.r.rtm_dst_len = 32;
    q.a.rta_len = RTA_LENGTH(sizeof(q.dst));
    q.a.rta_type = RTA_DST;
    q.dst = *addr;
    struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
    if (sendto(route_fd, &q, sizeof(q), 0, (struct sockaddr *) &kernel, sizeof(kernel)) < 0)
        return -1;
    /* Aligned for the netlink headers read out of it. */
    static uint32_t buf[2048];
    for (;;) {
        ssize_t n = recv(route_fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0)
            return -1;
        for (struct nlmsghdr *h = (struct nlmsghdr *) buf; NLMSG_OK(h, (size_t) n);
             h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_seq != seq)
                continue; /* the answer to an earlier question that gave up */
            if (h->nlmsg_type != RTM_NEWROUTE || h->nlmsg_len < NLMSG_LENGTH(sizeof(struct rtmsg)))
                return -1; /* NLMSG_ERROR: no route at all */
            return ((struct rtmsg *) NLMSG_DATA(h))->rtm_type;
        }
    }
}

bool lz_namecheck_destination_ok(const lz_resolved_config *cfg, int route_fd,
                                 const struct sockaddr_in *dst, bool *prefix_allowed)
{
    *prefix_allowed = false;
    if (dst->sin_family != AF_INET)
        return false;
    uint8_t a[4];
    memcpy(a, &dst->sin_addr, 4);
    lz_prefix_verdict v = lz_ipv4_policy_decide(&cfg->allow, &cfg->deny, a, NULL, NULL);
    /* ALLOWED only with deny_hosts: the router redirects no other. */
    if (v == LZ_PREFIX_ALLOWED && cfg->deny_hosts.count)
        *prefix_allowed = true;
    else if (v != LZ_PREFIX_DEFAULT)
        return false;
    /* This host's own addresses are never reachable (docs/network.md "Never
     * reachable"): the router's host_local set cannot see this connection
     * (it is made here, not forwarded), so the kernel's own answer is asked
     * for each one — including addresses added since the start. */
    return route_type(route_fd, &dst->sin_addr) == RTN_UNICAST;
}

/* ---- the relay --------------------------------------------------------- */

typedef struct nc_conn {
    int fd; /* the sandbox's connection; -1: the slot is free */
    struct sockaddr_in dst;
    int64_t deadline;
    unsigned char *hello;
    size_t len;
    bool relaying; /* from here on, relay owns fd */
    bool gating;   /* from here on, gate owns fd (until it hands over to relay) */
    lz_tls_gate gate;
    bool prefix_allowed; /* dst is prefix-allowed: only a denied name is refused */
    bool http;           /* checked request by request; hello[0..len) holds the next
                          * request's first bytes while the relay's gate is shut */
    lz_relay relay;
    char name[LZ_HOST_NAME_MAX + 1]; /* the admitted name, for a later refusal's record */
} nc_conn;

/* Refusals the keeper could not take yet (peer.c): this process has one
 * keeper socket. */
static uint32_t reports_unsent;

static void report(int keeper_fd, const struct sockaddr_in *dst, const char *name, int why)
{
    sc_dns_msg m;
    memset(&m, 0, sizeof(m));
    m.type = SC_NAME_DENIED;
    m.why = (uint8_t) why;
    m.n_addrs = 1;
    m.port = ntohs(dst->sin_port);
    memcpy(m.addrs[0], &dst->sin_addr, 4);
    snprintf(m.name, sizeof(m.name), "%s", name);
    /* Never blocks: a keeper that does not keep up gets a count later,
     * the relay goes on. */
    sc_peer_report(keeper_fd, &m, &reports_unsent);
}

/* Reset the sandbox's connection (SO_LINGER 0: a RST, not a clean end: the
 * client fails at once instead of taking an empty answer for one). */
static void conn_reset(nc_conn *c)
{
    struct linger l = { 1, 0 };
    setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    close(c->fd);
    free(c->hello);
    *c = (nc_conn){ .fd = -1 };
}

static void conn_refuse(nc_conn *c, int keeper_fd, const char *name, int why)
{
    report(keeper_fd, &c->dst, name, why);
    conn_reset(c);
}

/* Take one waiting connection into c; false when none was waiting. */
static bool conn_accept(nc_conn *c, int listen_fd, int keeper_fd, int route_fd,
                        const lz_resolved_config *cfg, int64_t now)
{
    int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return false;
    *c = (nc_conn){ .fd = fd, .deadline = now + LZ_NAMECHECK_HELLO_MS };
    socklen_t l = sizeof(c->dst);
    /* Where the sandbox meant to go, before the router's redirect. A
     * connection that was not redirected has no such address (or has this
     * listener's own, which the policy never admits). */
    if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &c->dst, &l) < 0 || l != sizeof(c->dst)) {
        conn_reset(c);
        return true;
    }
    /* The address is checked before a byte is read: one the policy does not
     * leave to the host rules, or this host's own, is refused whatever the
     * name. */
    if (!lz_namecheck_destination_ok(cfg, route_fd, &c->dst, &c->prefix_allowed)) {
        conn_refuse(c, keeper_fd, "", SC_NAME_WHY_ADDRESS);
        return true;
    }
    c->hello = malloc(LZ_HELLO_MAX);
    if (!c->hello)
        conn_reset(c);
    return true;
}

/* The extent of the HTTP request at the start of c->hello: *extent its
 * header block and body in all, *take how much of it is here already. False:
 * a request whose end cannot be found (a Transfer-Encoding, two
 * Content-Lengths: lz_http_request_frame). */
static bool request_extent(const nc_conn *c, size_t *take, uint64_t *extent)
{
    size_t header_len = 0;
    uint64_t body_len = 0;
    if (lz_http_request_frame(c->hello, c->len, &header_len, &body_len) != LZ_HTTP_FRAME_OK)
        return false;
    *extent = header_len + body_len;
    *take = *extent < c->len ? (size_t) *extent : c->len;
    return true;
}

/* A complete TLS ClientHello (one lz_tls_client_hello_next may still
 * refuse: its record goes on). */
static bool tls_hello_complete(const unsigned char *buf, size_t len)
{
    char raw[LZ_HELLO_NAME_MAX];
    size_t raw_len = 0;
    lz_hello_result r = lz_tls_client_hello_name(buf, len, raw, &raw_len);
    return r == LZ_HELLO_NAME || r == LZ_HELLO_NO_NAME || r == LZ_HELLO_ENCRYPTED;
}

/* Read what the client sent and decide once it said enough. */
static void conn_hello(nc_conn *c, bool readable, int keeper_fd, const lz_resolved_config *cfg,
                       int64_t now)
{
    bool complete = false;
    if (readable) {
        ssize_t n = recv(c->fd, c->hello + c->len, LZ_HELLO_MAX - c->len, 0);
        if (n > 0)
            c->len += (size_t) n;
        else if (n == 0)
            complete = true;
        else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            conn_reset(c);
            return;
        }
    }
    if (now >= c->deadline)
        complete = true;
    char name[LZ_HOST_NAME_MAX + 1];
    int why;
    uint16_t port = ntohs(c->dst.sin_port);
    switch (lz_namecheck_decide(&cfg->allow_hosts, &cfg->deny_hosts, c->prefix_allowed, port,
                                c->hello, c->len, complete, name, &why)) {
    case LZ_NAMECHECK_MORE:
        return;
    case LZ_NAMECHECK_REFUSE:
        conn_refuse(c, keeper_fd, name, why);
        return;
    case LZ_NAMECHECK_PASS:
        break;
    default:
        conn_reset(c);
        return;
    }
    /* HTTP is checked request by request (docs/network.md "Reused
     * connections"): the relay gets exactly the first request (its header
     * block and Content-Length body, lz_http_request_frame) and then stops
     * reading the client; what comes next is the next request, read and
     * decided here (next_requests) before a byte of it is relayed. Without
     * this, the Host of a kept-alive or pipelined second request reached
     * the server unread (attack findings S2, a25b F2). */
    c->http = is_http(c->prefix_allowed, ntohs(c->dst.sin_port), c->hello, c->len);
    size_t take = c->len;
    uint64_t extent = 0;
    if (c->http && !request_extent(c, &take, &extent)) {
        conn_refuse(c, keeper_fd, name, SC_NAME_WHY_INVALID); /* Transfer-Encoding... */
        return;
    }
    /* TLS — port 443 of a learned address, TLS by its bytes on a
     * prefix-allowed one — goes through the TLS gate (tlsgate.h): no byte
     * after the ClientHello reaches the server before the server's
     * ServerHello was read, and a ClientHello after a HelloRetryRequest
     * must name the same server (attack round a25b, F1). */
    char raw[LZ_HELLO_NAME_MAX];
    size_t raw_len = 0, end = 0;
    lz_hello_result first = LZ_HELLO_INVALID;
    bool tls = !c->http && is_tls(c->prefix_allowed, port, c->hello, c->len);
    if (tls)
        first = lz_tls_client_hello_next(c->hello, c->len, false, raw, &raw_len, &end);
    bool gate = first == LZ_HELLO_NAME || first == LZ_HELLO_NO_NAME || first == LZ_HELLO_ENCRYPTED;
    if (tls && !gate && tls_hello_complete(c->hello, c->len)) {
        conn_refuse(c, keeper_fd, name, SC_NAME_WHY_INVALID); /* other bytes share its record */
        return;
    }
    /* From the supervisor's namespace (this process's), as slirp4netns's
     * connections leave; the bytes read so far go first. */
    int up = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int r = up >= 0 ? connect(up, (const struct sockaddr *) &c->dst, sizeof(c->dst)) : -1;
    if (up < 0 || (r < 0 && errno != EINPROGRESS) ||
        (gate ? lz_tls_gate_init(&c->gate, c->fd, up, r < 0, now, c->hello, c->len, end, first, raw,
                                 raw_len)
              : lz_relay_init(&c->relay, c->fd, up, r < 0, now, c->hello, take)) < 0) {
        if (up >= 0)
            close(up);
        conn_reset(c);
        return;
    }
    memcpy(c->name, name, sizeof(c->name));
    if (gate || !c->http) {
        free(c->hello);
        c->hello = NULL;
        c->len = 0;
        c->gating = gate;
        c->relaying = !gate;
        return;
    }
    c->relaying = true;
    lz_relay_gate(&c->relay, extent); /* cannot fail: take <= extent */
    /* Bytes behind the first request (pipelined) wait for their turn. */
    memmove(c->hello, c->hello + take, c->len - take);
    c->len -= take;
    c->deadline = now + LZ_NAMECHECK_HELLO_MS;
}

/* A gated HTTP connection whose relay has sent on all it may: read the
 * client's next bytes and let each whole request through once its Host is
 * decided as the first one's was; refuse (reset both ways, record) one
 * that is not. A request must be whole within LZ_NAMECHECK_HELLO_MS of its
 * first byte; an idle kept-alive connection may wait as long as it likes.
 * False when the connection ended. */
static bool next_requests(nc_conn *c, bool readable, int keeper_fd, const lz_resolved_config *cfg,
                          int64_t now)
{
    bool eof = false;
    if (readable && c->len < LZ_HELLO_MAX) {
        ssize_t n = recv(c->fd, c->hello + c->len, LZ_HELLO_MAX - c->len, 0);
        if (n > 0) {
            if (c->len == 0)
                c->deadline = now + LZ_NAMECHECK_HELLO_MS;
            c->len += (size_t) n;
        } else if (n == 0) {
            eof = true;
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            lz_relay_end(&c->relay, true);
            return false;
        }
    }
    while (c->len && lz_relay_gate_shut(&c->relay)) {
        char name[LZ_HOST_NAME_MAX + 1];
        int why = 0;
        bool complete = eof || now >= c->deadline;
        lz_namecheck_verdict v = decide_name(&cfg->allow_hosts, &cfg->deny_hosts, c->prefix_allowed,
                                             false, c->hello, c->len, complete, name, &why);
        if (v == LZ_NAMECHECK_MORE)
            return true;
        size_t take = c->len;
        uint64_t extent = 0;
        if (v == LZ_NAMECHECK_PASS && !request_extent(c, &take, &extent)) {
            v = LZ_NAMECHECK_REFUSE;
            why = SC_NAME_WHY_INVALID;
        }
        if (v != LZ_NAMECHECK_PASS) {
            report(keeper_fd, &c->dst, name, why);
            lz_relay_end(&c->relay, true);
            return false;
        }
        if (lz_relay_admit(&c->relay, c->hello, take, extent) < 0)
            return true; /* no room yet: again once the server took what waits */
        memmove(c->hello, c->hello + take, c->len - take);
        c->len -= take;
        c->deadline = now + LZ_NAMECHECK_HELLO_MS;
    }
    if (eof && c->len == 0)
        lz_relay_a_ended(&c->relay, now);
    return true;
}

static void conn_gate(nc_conn *c, short ra, short rb, int keeper_fd, int64_t now)
{
    char name[LZ_HOST_NAME_MAX + 1];
    int why = 0;
    switch (lz_tls_gate_step(&c->gate, ra, rb, now, &c->relay, name, &why)) {
    case LZ_TLS_GATE_GOING:
        return;
    case LZ_TLS_GATE_RELAY:
        c->gating = false;
        c->relaying = true;
        return;
    case LZ_TLS_GATE_REFUSED:
        report(keeper_fd, &c->dst, name[0] ? name : c->name, why);
        break;
    case LZ_TLS_GATE_ENDED:
    default:
        break;
    }
    *c = (nc_conn){ .fd = -1 }; /* the gate closed both sides */
}

int lz_namecheck_run(int listen_fd, int keeper_fd, int route_fd, const lz_resolved_config *cfg)
{
    static nc_conn conns[LZ_NAMECHECK_MAX_CONNS];
    for (size_t i = 0; i < LZ_NAMECHECK_MAX_CONNS; i++)
        conns[i] = (nc_conn){ .fd = -1 };
    static struct pollfd p[1 + 2 * LZ_NAMECHECK_MAX_CONNS];
    for (;;) {
        size_t n = 0, used = 0;
        int64_t now = lz_relay_now_ms(), wait = -1;
        p[n++] = (struct pollfd){ .fd = listen_fd, .events = POLLIN };
        for (size_t i = 0; i < LZ_NAMECHECK_MAX_CONNS; i++) {
            nc_conn *c = &conns[i];
            if (c->fd < 0)
                continue;
            used++;
            short ea = 0, eb = 0;
            if (c->relaying) {
                lz_relay_events(&c->relay, now, &ea, &eb, &wait);
                /* The gate shut: the next request's bytes are read here. */
                if (c->http && lz_relay_gate_shut(&c->relay) && c->len < LZ_HELLO_MAX)
                    ea |= POLLIN;
                if (c->http && lz_relay_gate_shut(&c->relay) && c->len) {
                    int64_t left = c->deadline > now ? c->deadline - now : 0;
                    wait = wait < 0 || left < wait ? left : wait;
                }
            } else if (c->gating) {
                lz_tls_gate_events(&c->gate, now, &ea, &eb, &wait);
            } else {
                ea = POLLIN;
                int64_t left = c->deadline > now ? c->deadline - now : 0;
                wait = wait < 0 || left < wait ? left : wait;
            }
            p[n++] = (struct pollfd){ .fd = ea ? c->fd : -1, .events = ea };
            p[n++] = (struct pollfd){ .fd = !eb         ? -1
                                            : c->gating ? c->gate.b
                                                        : c->relay.b,
                                      .events = eb };
        }
        /* Full: further connections wait in the listen backlog. */
        if (used == LZ_NAMECHECK_MAX_CONNS)
            p[0].fd = -1;
        /* Refusals not yet reported: tried again within a second. */
        if (!sc_peer_flush(keeper_fd, &reports_unsent))
            wait = wait < 0 || wait > 1000 ? 1000 : wait;
        int r = lz_relay_poll(p, n, wait);
        if (r < 0)
            return 1;
        if (r == 0)
            continue;
        now = lz_relay_now_ms();
        size_t k = 1;
        for (size_t i = 0; i < LZ_NAMECHECK_MAX_CONNS; i++) {
            nc_conn *c = &conns[i];
            if (c->fd < 0)
                continue;
            short ra = p[k].revents, rb = p[k + 1].revents;
            k += 2;
            if (c->relaying) {
                bool alive = lz_relay_step(&c->relay, ra, rb, now);
                if (alive && c->http && lz_relay_gate_shut(&c->relay))
                    alive = next_requests(c, ra & (POLLIN | POLLHUP), keeper_fd, cfg, now);
                if (!alive) {
                    free(c->hello); /* the relay closed both sides */
                    *c = (nc_conn){ .fd = -1 };
                }
            } else if (c->gating) {
                conn_gate(c, ra, rb, keeper_fd, now);
            } else if (ra & (POLLERR | POLLNVAL)) {
                conn_reset(c);
            } else {
                conn_hello(c, ra & (POLLIN | POLLHUP), keeper_fd, cfg, now);
            }
        }
        /* Every connection waiting, while slots are free: one per wake-up
         * let a flood overflow the backlog, and a client whose handshake
         * the kernel then dropped waited for SYN retransmits (seconds)
         * instead of its reset (attack round a25c, O1). */
        for (size_t i = 0; p[0].fd >= 0 && (p[0].revents & POLLIN) && i < LZ_NAMECHECK_MAX_CONNS;
             i++)
            if (conns[i].fd < 0 &&
                !conn_accept(&conns[i], listen_fd, keeper_fd, route_fd, cfg, now))
                break;
    }
}

/* ---- the process ------------------------------------------------------- */

typedef struct namecheck_job {
    const lz_resolved_config *cfg;
    int listen_fd, keeper_fd;
} namecheck_job;

/* sc_socket_maker, in the router's namespace: the listening socket the
 * router's redirect sends to. */
static int make_listener(void *arg, int *fds, char *why, size_t why_len)
{
    (void) arg;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(NAMECHECK_PORT) };
    int one = 1;
    if (fd < 0 || inet_pton(AF_INET, ROUTER_ADDR, &a.sin_addr) != 1 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(fd, (struct sockaddr *) &a, sizeof(a)) < 0 || listen(fd, SOMAXCONN) < 0) {
        snprintf(why, why_len, "cannot listen on %s:%d in the router's namespace: %s", ROUTER_ADDR,
                 NAMECHECK_PORT, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    fds[0] = fd;
    return 0;
}

static int namecheck_child(void *arg, int channel, lz_error **err)
{
    const namecheck_job *j = arg;
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int i = 0; i < 3; i++)
        dup2(devnull, i);
    /* In this process's namespace, the supervisor's: the host's routes. */
    int route_fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (route_fd < 0)
        return lz_error_set(err, errno, "cannot open a routing socket");
    /* A fork without exec: close the rest (the supervisor channel, runsc's
     * descriptors, other children's). */
    const int keep[] = { 0, 1, 2, channel, j->listen_fd, route_fd, j->keeper_fd };
    if (lz_close_fds_except(keep, LZ_ARRAY_SIZE(keep)) < 0)
        return lz_error_set(err, errno, "cannot close inherited descriptors");
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (lz_relay_confine(2 * LZ_NAMECHECK_MAX_CONNS + 16) < 0)
        return lz_error_set(err, errno, "cannot confine itself (capabilities, seccomp)");
    /* Ready only once confined: the sandbox never meets an unconfined name
     * check. */
    if (lz_fork_ready(channel) < 0)
        _exit(1);
    close(channel);
    _exit(lz_namecheck_run(j->listen_fd, j->keeper_fd, route_fd, j->cfg));
}

int sc_namecheck_start(const lz_resolved_config *cfg, const char *router_netns, int keeper_fd,
                       pid_t *ret_pid, lz_error **err)
{
    /* The listening socket is made in the router's namespace (a socket
     * keeps the one it was created in); the process lives in the caller's,
     * so that its connections leave from there. */
    int listen_fd;
    if (sc_sockets_in_netns(router_netns, make_listener, NULL, &listen_fd, 1, err) < 0)
        return -1; /* "network sidecar: cannot listen on ..." */
    namecheck_job j = { .cfg = cfg, .listen_fd = listen_fd, .keeper_fd = keeper_fd };
    lz_fork_options opt = { .what = "the name check",
                            .pdeathsig = SIGKILL,
                            .name = "lz-namecheck" };
    lz_child child;
    int r = lz_fork_call(namecheck_child, &j, &opt, &child, err);
    close(listen_fd);
    if (r < 0)
        return lz_error_prefix(err, "network sidecar");
    *ret_pid = lz_child_release(&child); /* the supervisor's reaper collects it by pid */
    return 0;
}
