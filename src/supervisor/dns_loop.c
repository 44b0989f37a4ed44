/* SPDX-License-Identifier: Apache-2.0
 *
 * The DNS responder's event loop (lz-dns, docs/network.md "DNS: the
 * sidecar is the only resolver"): one process, one ppoll loop, no thread.
 * Every byte from the sandbox and from the upstream resolvers goes through
 * the bounded decoders of protocol/dns.h; every name through the one
 * verdict of config/hosts.h. What may be in flight is bounded:
 * DNS_MAX_PENDING queries (one more is answered SERVFAIL at once),
 * DNS_MAX_TCP connections from the sandbox (more wait in the backlog), one
 * message of at most 65535 bytes read and at most two answers buffered per
 * connection.
 */
#include "supervisor/sidecar_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "config/hosts.h"

#define DNS_UPSTREAM_MS 2000 /* per resolver, per attempt (UDP, then TCP on TC) */
#define DNS_KEEPER_MS 1000   /* LEARN answered within, or SERVFAIL */
#define DNS_TCP_IDLE_MS 10000
#define DNS_TCP_MSG (2 + LZ_DNS_MSG_MAX)
#define DNS_UDP_BATCH 64 /* datagrams read per wake-up: the loop stays fair */

typedef struct dns_origin {
    bool tcp;
    struct sockaddr_in client; /* UDP: where the answer goes */
    size_t conn;               /* TCP: the connection's slot ... */
    uint32_t gen;              /* ... while it is this connection */
} dns_origin;

enum { ST_FREE = 0, ST_UPSTREAM, ST_KEEPER };

typedef struct dns_pending {
    int state;
    dns_origin from;
    size_t cap; /* the client's size limit for the answer */
    lz_dns_query q;
    char canon[LZ_HOST_NAME_MAX + 1];
    bool learn; /* an allowed name's A query: answered from the decoded
                 * records, after the keeper's LEARNED; else relayed */
    size_t resolver;
    bool over_tcp;
    int fd;
    int64_t deadline;
    uint16_t up_id;
    uint8_t qbuf[LZ_DNS_UDP_MAX];
    size_t qlen;
    /* Upstream TCP: connecting, then the query written, then the answer
     * read into tbuf (length prefix included). */
    bool connecting;
    uint8_t *tbuf;
    size_t tlen;
    lz_dns_answer ans;
    uint32_t serial;
    uint32_t timeout_s;
} dns_pending;

typedef struct dns_conn {
    int fd; /* -1: free */
    uint32_t gen;
    bool eof;
    unsigned pending;
    int64_t idle_deadline;
    size_t inlen, outlen;
    uint8_t in[DNS_TCP_MSG];
    uint8_t out[2 * DNS_TCP_MSG];
} dns_conn;

typedef struct dns_ctx {
    const sc_dns_setup *setup;
    int udp, listen_fd, keeper;
    uint32_t serial;
    uint32_t unsent; /* refusals the keeper could not take yet (peer.c) */
    int64_t now;
    dns_pending pend[SC_DNS_MAX_PENDING];
    dns_conn conns[SC_DNS_MAX_TCP];
    uint8_t buf[LZ_DNS_MSG_MAX];
    uint8_t out[LZ_DNS_MSG_MAX];
} dns_ctx;

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t) t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* ---- the keeper -------------------------------------------------------- */

/* A name fit for the denial log: the canonical one, or (not a host name)
 * the question as sent with every byte outside [a-z0-9._-] shown as '?'. */
static void log_name(const lz_dns_query *q, const char *canon, char out[LZ_HOST_NAME_MAX + 1])
{
    const char *src = canon && canon[0] ? canon : q->name;
    size_t i = 0;
    for (; i < LZ_HOST_NAME_MAX && src[i]; i++) {
        char c = src[i];
        if (c >= 'A' && c <= 'Z')
            c = (char) (c - 'A' + 'a');
        bool ok =
            (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
        out[i] = ok ? c : '?';
    }
    out[i] = '\0';
}

/* A refusal for the denial log. Never blocks: a keeper that cannot take it
 * now (its queue full during a flood) gets it as a count later, and the
 * answer goes at once (peer.c). */
static void tell_denied(dns_ctx *c, const lz_dns_query *q, const char *name, uint8_t why)
{
    sc_dns_msg m;
    memset(&m, 0, sizeof(m));
    m.type = SC_DNS_DENIED;
    m.why = why;
    m.qtype = q->qtype;
    log_name(q, name, m.name);
    sc_peer_report(c->keeper, &m, &c->unsent);
}

/* ---- answers to the sandbox -------------------------------------------- */

static void conn_close(dns_conn *k)
{
    close(k->fd);
    k->fd = -1;
    k->gen++;
    k->eof = false;
    k->pending = 0;
    k->inlen = k->outlen = 0;
}

static void conn_flush(dns_conn *k)
{
    while (k->outlen) {
        ssize_t n = send(k->fd, k->out, k->outlen, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                conn_close(k);
            return;
        }
        memmove(k->out, k->out + n, k->outlen - (size_t) n);
        k->outlen -= (size_t) n;
    }
}

static void reply(dns_ctx *c, const dns_origin *o, const uint8_t *msg, size_t len)
{
    if (!o->tcp) {
        if (!len)
            return;
        lz_best_effort(sendto(c->udp, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL,
                              (const struct sockaddr *) &o->client, sizeof(o->client)) < 0
                           ? -1
                           : 0);
        return;
    }
    dns_conn *k = &c->conns[o->conn];
    if (k->fd < 0 || k->gen != o->gen)
        return; /* the connection went meanwhile */
    if (k->pending)
        k->pending--;
    if (!len)
        return;
    /* A client that does not read its answers loses its connection, not
     * our memory. */
    if (sizeof(k->out) - k->outlen < len + 2) {
        conn_close(k);
        return;
    }
    k->out[k->outlen] = (uint8_t) (len >> 8);
    k->out[k->outlen + 1] = (uint8_t) len;
    memcpy(k->out + k->outlen + 2, msg, len);
    k->outlen += len + 2;
    k->idle_deadline = c->now + DNS_TCP_IDLE_MS;
    conn_flush(k);
}

static void answer(dns_ctx *c, const dns_origin *o, const lz_dns_query *q, size_t cap,
                   uint8_t rcode, const lz_dns_answer *ans, uint32_t ttl)
{
    reply(c, o, c->out, lz_dns_answer_encode(q, rcode, ans, ttl, c->out, cap));
}

static void pend_free(dns_pending *p)
{
    if (p->fd >= 0)
        close(p->fd);
    free(p->tbuf);
    p->tbuf = NULL;
    p->fd = -1;
    p->state = ST_FREE;
}

static void finish(dns_ctx *c, dns_pending *p, uint8_t rcode, const lz_dns_answer *ans,
                   uint32_t ttl)
{
    answer(c, &p->from, &p->q, p->cap, rcode, ans, ttl);
    pend_free(p);
}

/* ---- upstream ----------------------------------------------------------- */

static void up_start(dns_ctx *c, dns_pending *p);

/* This resolver failed (timeout, refused, an answer that does not decode or
 * says SERVFAIL): the next one; after the last, SERVFAIL. */
static void up_next(dns_ctx *c, dns_pending *p)
{
    if (p->fd >= 0)
        close(p->fd);
    p->fd = -1;
    free(p->tbuf);
    p->tbuf = NULL;
    p->over_tcp = false;
    if (++p->resolver >= c->setup->n_resolvers) {
        finish(c, p, LZ_DNS_RCODE_SERVFAIL, NULL, 0);
        return;
    }
    up_start(c, p);
}

static bool up_connect(dns_ctx *c, dns_pending *p, int type)
{
    struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(c->setup->upstream_port) };
    memcpy(&to.sin_addr, c->setup->resolvers[p->resolver], 4);
    p->fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (p->fd < 0)
        return false;
    int r = connect(p->fd, (const struct sockaddr *) &to, sizeof(to));
    p->connecting = r < 0 && errno == EINPROGRESS;
    p->deadline = c->now + DNS_UPSTREAM_MS;
    return r == 0 || p->connecting;
}

/* A fresh socket (the kernel picks a random source port) and a fresh random
 * id for every query and every resolver: an off-path spoofer must guess
 * both, and a response is only taken from the connected resolver. */
static void up_start(dns_ctx *c, dns_pending *p)
{
    uint16_t id;
    if (getrandom(&id, sizeof(id), 0) != (ssize_t) sizeof(id)) {
        finish(c, p, LZ_DNS_RCODE_SERVFAIL, NULL, 0);
        return;
    }
    p->up_id = id;
    /* Upstream gets the canonical (lowercase) name, never the case the
     * sandbox chose: mixed case ("0x20") would carry a bit per letter to
     * the resolver (attack round a25, S6). The answer still echoes the
     * question as the client sent it. */
    lz_dns_query up = p->q;
    if (p->canon[0])
        snprintf(up.name, sizeof(up.name), "%s", p->canon);
    p->qlen = lz_dns_query_encode(&up, id, p->qbuf, sizeof(p->qbuf));
    p->state = ST_UPSTREAM;
    if (!p->qlen) {
        finish(c, p, LZ_DNS_RCODE_SERVFAIL, NULL, 0);
        return;
    }
    if (!up_connect(c, p, SOCK_DGRAM) || send(p->fd, p->qbuf, p->qlen, MSG_NOSIGNAL) < 0)
        up_next(c, p);
}

/* The upstream answer was truncated: the same question to the same resolver
 * over TCP. */
static void up_start_tcp(dns_ctx *c, dns_pending *p)
{
    close(p->fd);
    p->fd = -1;
    p->over_tcp = true;
    p->tbuf = malloc(DNS_TCP_MSG);
    p->tlen = 0;
    if (!p->tbuf || !up_connect(c, p, SOCK_STREAM)) {
        up_next(c, p);
        return;
    }
    if (!p->connecting) {
        uint8_t m[2 + sizeof(p->qbuf)] = { (uint8_t) (p->qlen >> 8), (uint8_t) p->qlen };
        memcpy(m + 2, p->qbuf, p->qlen);
        if (send(p->fd, m, p->qlen + 2, MSG_NOSIGNAL) != (ssize_t) (p->qlen + 2))
            up_next(c, p);
    }
}

static bool chain_denied(dns_ctx *c, const lz_dns_answer *a, const char **which)
{
    for (size_t i = 0; i < a->n_chain; i++) {
        char canon[LZ_HOST_NAME_MAX + 1];
        if (lz_host_name_canonical(a->chain[i], strlen(a->chain[i]), canon) &&
            lz_host_decide(&c->setup->cfg->allow_hosts, &c->setup->cfg->deny_hosts, canon, NULL) ==
                LZ_HOST_DENIED) {
            *which = a->chain[i];
            return true;
        }
    }
    return false;
}

/* A forward-mode answer: the upstream's own bytes, once they decoded as
 * the answer to this very question, with the client's id; cut to the
 * header and question with TC set when the client's limit is smaller. */
static void relay(dns_ctx *c, dns_pending *p, const uint8_t *msg, size_t len)
{
    if (len > p->cap) {
        size_t n = lz_dns_answer_encode(&p->q, LZ_DNS_RCODE_NOERROR, NULL, 0, c->out, p->cap);
        if (n >= 4)
            c->out[2] |= 0x02; /* TC: ask again over TCP */
        reply(c, &p->from, c->out, n);
        pend_free(p);
        return;
    }
    memcpy(c->out, msg, len);
    c->out[0] = (uint8_t) (p->q.id >> 8);
    c->out[1] = (uint8_t) p->q.id;
    reply(c, &p->from, c->out, len);
    pend_free(p);
}

static uint32_t clamp_ttl(uint32_t ttl)
{
    return ttl < SC_LEARN_TTL_MIN   ? SC_LEARN_TTL_MIN
           : ttl > SC_LEARN_TTL_MAX ? SC_LEARN_TTL_MAX
                                    : ttl;
}

/* The addresses go to the keeper; the answer waits for its LEARNED. */
static void ask_keeper(dns_ctx *c, dns_pending *p)
{
    sc_dns_msg m;
    memset(&m, 0, sizeof(m));
    m.type = SC_DNS_LEARN;
    m.qtype = p->q.qtype;
    m.serial = p->serial = ++c->serial;
    m.timeout_s = p->timeout_s = clamp_ttl(p->ans.ttl);
    m.n_addrs = (uint8_t) p->ans.n_addrs;
    memcpy(m.addrs, p->ans.addrs, p->ans.n_addrs * 4);
    memcpy(m.name, p->canon, sizeof(m.name));
    if (p->fd >= 0)
        close(p->fd);
    p->fd = -1;
    p->state = ST_KEEPER;
    p->deadline = c->now + DNS_KEEPER_MS;
    if (c->keeper < 0 ||
        send(c->keeper, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t) sizeof(m))
        finish(c, p, LZ_DNS_RCODE_SERVFAIL, NULL, 0);
}

static void up_response(dns_ctx *c, dns_pending *p, const uint8_t *msg, size_t len)
{
    lz_dns_query up = p->q;
    up.id = p->up_id;
    lz_dns_answer *a = &p->ans;
    lz_dns_error e = lz_dns_response_decode(msg, len, &up, a);
    if (e == LZ_DNS_E_TRUNCATED && !p->over_tcp) {
        up_start_tcp(c, p);
        return;
    }
    /* Over UDP a datagram that is not the answer (an old id, a spoofer
     * that guessed the port) is dropped; the real answer may still come. */
    if (e == LZ_DNS_E_MISMATCH && !p->over_tcp)
        return;
    if (e != LZ_DNS_OK || a->rcode == LZ_DNS_RCODE_SERVFAIL || a->rcode == LZ_DNS_RCODE_REFUSED ||
        a->rcode == LZ_DNS_RCODE_FORMERR || a->rcode == LZ_DNS_RCODE_NOTIMP) {
        up_next(c, p);
        return;
    }
    /* A name of the chain that deny_hosts decides: refused, whatever the
     * name asked for. */
    const char *denied;
    if (chain_denied(c, a, &denied)) {
        char canon[LZ_HOST_NAME_MAX + 1];
        snprintf(canon, sizeof(canon), "%s", denied);
        tell_denied(c, &p->q, canon, SC_DNS_WHY_DENIED_HOST);
        finish(c, p, LZ_DNS_RCODE_NXDOMAIN, NULL, 0);
        return;
    }
    if (!p->learn) {
        relay(c, p, msg, len);
        return;
    }
    if (a->rcode != LZ_DNS_RCODE_NOERROR) {
        finish(c, p, LZ_DNS_RCODE_NXDOMAIN, NULL, 0);
        return;
    }
    if (!a->n_addrs) {
        finish(c, p, LZ_DNS_RCODE_NOERROR, a,
               a->ttl < SC_LEARN_TTL_MAX ? a->ttl : SC_LEARN_TTL_MAX);
        return;
    }
    ask_keeper(c, p);
}

/* The keeper's LEARNED: the answer carries only the admitted addresses. */
static void keeper_answer(dns_ctx *c, const sc_dns_msg *m)
{
    if (m->type != SC_DNS_LEARNED)
        return;
    for (size_t i = 0; i < SC_DNS_MAX_PENDING; i++) {
        dns_pending *p = &c->pend[i];
        if (p->state != ST_KEEPER || p->serial != m->serial)
            continue;
        lz_dns_answer *a = &p->ans;
        size_t k = 0;
        for (size_t j = 0; j < a->n_addrs && j < 32; j++)
            if (m->admitted & (UINT32_C(1) << j))
                memmove(a->addrs[k++], a->addrs[j], 4);
        a->n_addrs = k;
        if (!k) {
            tell_denied(c, &p->q, p->canon, SC_DNS_WHY_ADDRESSES);
            finish(c, p, LZ_DNS_RCODE_NOERROR, NULL, 0);
            return;
        }
        finish(c, p, LZ_DNS_RCODE_NOERROR, a, a->ttl < p->timeout_s ? a->ttl : p->timeout_s);
        return;
    }
}

/* ---- the sandbox's questions ------------------------------------------- */

static size_t client_cap(const dns_origin *o, const lz_dns_query *q)
{
    if (o->tcp)
        return LZ_DNS_MSG_MAX;
    if (!q->edns || q->edns_udp_size <= LZ_DNS_UDP_MAX)
        return LZ_DNS_UDP_MAX;
    return q->edns_udp_size < LZ_DNS_EDNS_MAX ? q->edns_udp_size : LZ_DNS_EDNS_MAX;
}

static bool routine_type(uint16_t t)
{
    return t == LZ_DNS_TYPE_AAAA || t == LZ_DNS_TYPE_HTTPS || t == LZ_DNS_TYPE_SVCB;
}

static void on_query(dns_ctx *c, const dns_origin *o, const uint8_t *msg, size_t len)
{
    lz_dns_query q;
    if (lz_dns_query_decode(msg, len, &q) != LZ_DNS_OK)
        return; /* not a question: no answer (a TCP caller closes) */
    size_t cap = client_cap(o, &q);
    const lz_resolved_config *cfg = c->setup->cfg;
    bool strict = cfg->dns_mode == LZ_DNS_STRICT;
    char canon[LZ_HOST_NAME_MAX + 1] = "";
    bool named = lz_host_name_canonical(q.name, strlen(q.name), canon);
    lz_host_verdict v =
        named ? lz_host_decide(&cfg->allow_hosts, &cfg->deny_hosts, canon, NULL) : LZ_HOST_UNLISTED;
    uint8_t why = 0;
    if (!named && strict)
        why = SC_DNS_WHY_NOT_A_NAME;
    else if (v == LZ_HOST_DENIED)
        why = SC_DNS_WHY_DENIED_HOST;
    else if (v == LZ_HOST_UNLISTED && strict)
        why = SC_DNS_WHY_UNLISTED;
    if (why) {
        /* NXDOMAIN is the refusal: definitive, nobody retries it. */
        if (o->tcp)
            c->conns[o->conn].pending++;
        answer(c, o, &q, cap, LZ_DNS_RCODE_NXDOMAIN, NULL, 0);
        tell_denied(c, &q, named ? canon : NULL, why);
        return;
    }
    bool learn = v == LZ_HOST_ALLOWED;
    if (learn && (q.qtype != LZ_DNS_TYPE_A || q.qclass != LZ_DNS_CLASS_IN)) {
        /* An allowed name, another type: empty, never asked upstream. */
        if (o->tcp)
            c->conns[o->conn].pending++;
        answer(c, o, &q, cap, LZ_DNS_RCODE_NOERROR, NULL, 0);
        if (!routine_type(q.qtype))
            tell_denied(c, &q, canon, SC_DNS_WHY_TYPE);
        return;
    }
    dns_pending *p = NULL;
    for (size_t i = 0; i < SC_DNS_MAX_PENDING && !p; i++)
        if (c->pend[i].state == ST_FREE)
            p = &c->pend[i];
    if (o->tcp)
        c->conns[o->conn].pending++;
    /* No slot left, or no resolver to ask (none configured and none in the
     * host's resolv.conf: an offline machine): SERVFAIL at once. */
    if (!p || !c->setup->n_resolvers) {
        answer(c, o, &q, cap, LZ_DNS_RCODE_SERVFAIL, NULL, 0);
        return;
    }
    memset(p, 0, offsetof(dns_pending, ans));
    p->fd = -1;
    p->from = *o;
    p->cap = cap;
    p->q = q;
    memcpy(p->canon, canon, sizeof(canon));
    p->learn = learn;
    p->resolver = 0;
    up_start(c, p);
}

/* ---- the loop ---------------------------------------------------------- */

static void read_udp(dns_ctx *c)
{
    for (int i = 0; i < DNS_UDP_BATCH; i++) {
        dns_origin o = { .tcp = false };
        socklen_t sl = sizeof(o.client);
        ssize_t n = recvfrom(c->udp, c->buf, sizeof(c->buf), MSG_DONTWAIT,
                             (struct sockaddr *) &o.client, &sl);
        if (n < 0)
            return;
        on_query(c, &o, c->buf, (size_t) n);
    }
}

static void read_conn(dns_ctx *c, size_t idx)
{
    dns_conn *k = &c->conns[idx];
    ssize_t n = recv(k->fd, k->in + k->inlen, sizeof(k->in) - k->inlen, MSG_DONTWAIT);
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            conn_close(k);
        return;
    }
    if (n == 0) {
        k->eof = true;
        return;
    }
    k->inlen += (size_t) n;
    k->idle_deadline = c->now + DNS_TCP_IDLE_MS;
    uint32_t gen = k->gen;
    size_t off = 0;
    while (k->fd >= 0 && k->gen == gen && k->inlen - off >= 2) {
        size_t mlen = (size_t) k->in[off] << 8 | k->in[off + 1];
        if (mlen == 0) {
            conn_close(k);
            return;
        }
        if (k->inlen - off < 2 + mlen)
            break;
        dns_origin o = { .tcp = true, .conn = idx, .gen = gen };
        lz_dns_query probe;
        if (lz_dns_query_decode(k->in + off + 2, mlen, &probe) != LZ_DNS_OK) {
            conn_close(k); /* not DNS: the connection ends */
            return;
        }
        /* The message is copied out: answering may close the connection. */
        memcpy(c->buf, k->in + off + 2, mlen);
        off += 2 + mlen;
        on_query(c, &o, c->buf, mlen);
    }
    if (k->fd >= 0 && k->gen == gen && off) {
        memmove(k->in, k->in + off, k->inlen - off);
        k->inlen -= off;
    }
}

static void accept_conn(dns_ctx *c)
{
    for (size_t i = 0; i < SC_DNS_MAX_TCP; i++) {
        dns_conn *k = &c->conns[i];
        if (k->fd >= 0)
            continue;
        int fd = accept4(c->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        k->fd = fd;
        k->inlen = k->outlen = 0;
        k->pending = 0;
        k->eof = false;
        k->idle_deadline = c->now + DNS_TCP_IDLE_MS;
        return;
    }
}

/* The upstream socket of p is ready. */
static void up_ready(dns_ctx *c, dns_pending *p, short rev)
{
    if (!p->over_tcp) {
        ssize_t n = recv(p->fd, c->buf, sizeof(c->buf), MSG_DONTWAIT);
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                up_next(c, p); /* ECONNREFUSED: nothing listens there */
            return;
        }
        up_response(c, p, c->buf, (size_t) n);
        return;
    }
    if (p->connecting) {
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
            up_next(c, p);
            return;
        }
        p->connecting = false;
        uint8_t m[2 + sizeof(p->qbuf)] = { (uint8_t) (p->qlen >> 8), (uint8_t) p->qlen };
        memcpy(m + 2, p->qbuf, p->qlen);
        if (send(p->fd, m, p->qlen + 2, MSG_NOSIGNAL) != (ssize_t) (p->qlen + 2))
            up_next(c, p);
        return;
    }
    if (!(rev & (POLLIN | POLLHUP | POLLERR)))
        return;
    ssize_t n = recv(p->fd, p->tbuf + p->tlen, DNS_TCP_MSG - p->tlen, MSG_DONTWAIT);
    if (n <= 0) {
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return;
        up_next(c, p);
        return;
    }
    p->tlen += (size_t) n;
    if (p->tlen < 2)
        return;
    size_t want = (size_t) p->tbuf[0] << 8 | p->tbuf[1];
    if (p->tlen < 2 + want)
        return;
    /* up_response may free tbuf: decode from a copy. */
    memcpy(c->buf, p->tbuf + 2, want);
    up_response(c, p, c->buf, want);
}

static void sweep(dns_ctx *c)
{
    for (size_t i = 0; i < SC_DNS_MAX_PENDING; i++) {
        dns_pending *p = &c->pend[i];
        if (p->state == ST_FREE || c->now < p->deadline)
            continue;
        if (p->state == ST_KEEPER)
            finish(c, p, LZ_DNS_RCODE_SERVFAIL, NULL, 0); /* the keeper is late */
        else
            up_next(c, p);
    }
    for (size_t i = 0; i < SC_DNS_MAX_TCP; i++) {
        dns_conn *k = &c->conns[i];
        if (k->fd < 0 || k->pending)
            continue;
        if ((k->eof && !k->outlen) || c->now >= k->idle_deadline)
            conn_close(k);
    }
}

static void wait_for(int64_t *wait, int64_t deadline, int64_t now)
{
    int64_t left = deadline > now ? deadline - now : 0;
    if (*wait < 0 || left < *wait)
        *wait = left;
}

int sc_dns_run(const sc_dns_setup *setup)
{
    static dns_ctx ctx;
    dns_ctx *c = &ctx;
    c->setup = setup;
    c->udp = setup->udp_fd;
    c->listen_fd = setup->tcp_fd;
    c->keeper = setup->keeper_fd;
    for (size_t i = 0; i < SC_DNS_MAX_PENDING; i++)
        c->pend[i].fd = -1;
    for (size_t i = 0; i < SC_DNS_MAX_TCP; i++)
        c->conns[i].fd = -1;
    enum { FIXED = 3 };
    static struct pollfd pfd[FIXED + SC_DNS_MAX_TCP + SC_DNS_MAX_PENDING];
    for (;;) {
        c->now = now_ms();
        int64_t wait = -1;
        size_t used = 0;
        pfd[0] = (struct pollfd){ .fd = c->udp, .events = POLLIN };
        pfd[1] = (struct pollfd){ .fd = c->listen_fd, .events = POLLIN };
        pfd[2] = (struct pollfd){ .fd = c->keeper, .events = POLLIN };
        for (size_t i = 0; i < SC_DNS_MAX_TCP; i++) {
            dns_conn *k = &c->conns[i];
            short ev = 0;
            if (k->fd >= 0) {
                used++;
                /* Read only while a whole message has room. */
                if (!k->eof && k->inlen < sizeof(k->in))
                    ev |= POLLIN;
                if (k->outlen)
                    ev |= POLLOUT;
                wait_for(&wait, k->idle_deadline, c->now);
            }
            pfd[FIXED + i] = (struct pollfd){ .fd = ev ? k->fd : -1, .events = ev };
        }
        if (used == SC_DNS_MAX_TCP)
            pfd[1].fd = -1; /* full: new connections wait in the backlog */
        /* Refusals not yet reported: tried again within a second. */
        if (!sc_peer_flush(c->keeper, &c->unsent))
            wait_for(&wait, c->now + 1000, c->now);
        for (size_t i = 0; i < SC_DNS_MAX_PENDING; i++) {
            dns_pending *p = &c->pend[i];
            short ev = 0;
            if (p->state != ST_FREE)
                wait_for(&wait, p->deadline, c->now);
            if (p->state == ST_UPSTREAM && p->fd >= 0)
                ev = p->connecting ? POLLOUT : POLLIN;
            pfd[FIXED + SC_DNS_MAX_TCP + i] =
                (struct pollfd){ .fd = ev ? p->fd : -1, .events = ev };
        }
        struct timespec ts = { wait / 1000, (wait % 1000) * 1000000 };
        int r = ppoll(pfd, LZ_ARRAY_SIZE(pfd), wait < 0 ? NULL : &ts, NULL);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return 1;
        }
        if ((pfd[0].revents | pfd[1].revents) & (POLLERR | POLLNVAL))
            return 1;
        c->now = now_ms();
        if (pfd[2].revents & (POLLERR | POLLHUP | POLLNVAL)) {
            /* The keeper is gone (the supervisor then ends egress): no
             * address can be learned any more, so allowed names get
             * SERVFAIL; refusals still answer at once. */
            close(c->keeper);
            c->keeper = -1;
        } else if (pfd[2].revents & POLLIN) {
            sc_dns_msg m;
            while (recv(c->keeper, &m, sizeof(m), MSG_DONTWAIT) == (ssize_t) sizeof(m))
                keeper_answer(c, &m);
        }
        for (size_t i = 0; i < SC_DNS_MAX_PENDING; i++) {
            short rev = pfd[FIXED + SC_DNS_MAX_TCP + i].revents;
            if (rev && c->pend[i].state == ST_UPSTREAM && c->pend[i].fd >= 0 &&
                pfd[FIXED + SC_DNS_MAX_TCP + i].fd == c->pend[i].fd)
                up_ready(c, &c->pend[i], rev);
        }
        for (size_t i = 0; i < SC_DNS_MAX_TCP; i++) {
            short rev = pfd[FIXED + i].revents;
            dns_conn *k = &c->conns[i];
            if (!rev || k->fd < 0 || pfd[FIXED + i].fd != k->fd)
                continue;
            if (rev & (POLLERR | POLLNVAL)) {
                conn_close(k);
                continue;
            }
            if (rev & POLLOUT)
                conn_flush(k);
            if (k->fd >= 0 && (rev & (POLLIN | POLLHUP)))
                read_conn(c, i);
        }
        if (pfd[0].revents & POLLIN)
            read_udp(c);
        if (pfd[1].fd >= 0 && (pfd[1].revents & POLLIN))
            accept_conn(c);
        sweep(c);
    }
}
