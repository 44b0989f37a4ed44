/* SPDX-License-Identifier: Apache-2.0
 *
 * lz-namecheck's TLS gate (tlsgate.h): the rounds of a TLS handshake's
 * start, until the server's ServerHello.
 */
#include "supervisor/tlsgate.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "supervisor/namecheck.h"
#include "supervisor/sidecar_internal.h"

/* The client's buffer: the first ClientHello's bytes (at most
 * LZ_HELLO_MAX), then at most LZ_HELLO_MAX held after them. */
#define GATE_CBUF (2 * LZ_HELLO_MAX)

int lz_tls_gate_init(lz_tls_gate *g, int a, int b, bool connecting, int64_t now,
                     const unsigned char *hello, size_t len, size_t end, lz_hello_result first,
                     const char *first_name, size_t first_name_len)
{
    *g = (lz_tls_gate){ .a = -1, .b = -1 };
    if (len > LZ_HELLO_MAX || end > len || first_name_len > LZ_HELLO_NAME_MAX)
        return -1;
    unsigned char *c = malloc(GATE_CBUF), *s = malloc(LZ_HELLO_MAX), *t = malloc(LZ_HELLO_MAX);
    if (!c || !s || !t) {
        free(c);
        free(s);
        free(t);
        return -1;
    }
    memcpy(c, hello, len);
    *g = (lz_tls_gate){ .a = a,
                        .b = b,
                        .connecting = connecting,
                        .deadline = now + LZ_FORWARD_CONNECT_MS,
                        .cbuf = c,
                        .passed = end,
                        .len = len,
                        .sbuf = s,
                        .tbuf = t,
                        .first = first,
                        .first_name_len = first_name_len };
    memcpy(g->first_name, first_name, first_name_len);
    return 0;
}

static void gate_free(lz_tls_gate *g)
{
    free(g->cbuf);
    free(g->sbuf);
    free(g->tbuf);
    *g = (lz_tls_gate){ .a = -1, .b = -1 };
}

/* Close both sides (abort: with a reset, so that the client fails at once
 * instead of taking an empty answer for one). */
static void gate_end(lz_tls_gate *g, bool abort)
{
    struct linger l = { 1, 0 };
    if (abort) {
        setsockopt(g->a, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
        setsockopt(g->b, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    }
    close(g->a);
    close(g->b);
    gate_free(g);
}

static void lower_wait(int64_t *wait, int64_t deadline, int64_t now)
{
    int64_t left = deadline > now ? deadline - now : 0;
    if (*wait < 0 || left < *wait)
        *wait = left;
}

static bool client_room(const lz_tls_gate *g)
{
    return g->len - g->passed < LZ_HELLO_MAX && g->len < GATE_CBUF;
}

void lz_tls_gate_events(const lz_tls_gate *g, int64_t now, short *ea, short *eb, int64_t *wait)
{
    *ea = *eb = 0;
    lower_wait(wait, g->deadline, now);
    if (g->connecting) {
        *eb = POLLOUT;
        return;
    }
    if (client_room(g))
        *ea |= POLLIN;
    if (g->tlen > g->toff)
        *ea |= POLLOUT;
    if (g->slen < LZ_HELLO_MAX)
        *eb |= POLLIN;
    if (g->passed > g->sent)
        *eb |= POLLOUT;
}

/* Read what fd has into buf[*len, cap). False when it ended or failed. */
static bool gate_read(int fd, unsigned char *buf, size_t *len, size_t cap)
{
    if (*len >= cap)
        return true;
    ssize_t n = recv(fd, buf + *len, cap - *len, 0);
    if (n > 0)
        *len += (size_t) n;
    return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
}

/* Send buf[*off, end) on fd. False when it failed. */
static bool gate_write(int fd, const unsigned char *buf, size_t *off, size_t end)
{
    if (*off >= end)
        return true;
    ssize_t n = send(fd, buf + *off, end - *off, MSG_NOSIGNAL);
    if (n > 0)
        *off += (size_t) n;
    return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
}

static lz_tls_gate_state refuse(lz_tls_gate *g, int *why, int w)
{
    *why = w;
    gate_end(g, true);
    return LZ_TLS_GATE_REFUSED;
}

/* The client's held bytes after a HelloRetryRequest: its next ClientHello,
 * which must name what the first one named. */
static lz_tls_gate_state second_hello(lz_tls_gate *g, int64_t now,
                                      char name[static LZ_HOST_NAME_MAX + 1], int *why)
{
    char raw[LZ_HELLO_NAME_MAX];
    size_t raw_len = 0, end = 0;
    lz_hello_result r = lz_tls_client_hello_next(g->cbuf + g->passed, g->len - g->passed, true, raw,
                                                 &raw_len, &end);
    if (r == LZ_HELLO_NEED_MORE)
        return now >= g->deadline ? refuse(g, why, SC_NAME_WHY_INVALID) : LZ_TLS_GATE_GOING;
    if (r == LZ_HELLO_INVALID)
        return refuse(g, why, SC_NAME_WHY_INVALID);
    if (r != g->first || raw_len != g->first_name_len || memcmp(raw, g->first_name, raw_len)) {
        /* The record names what the client tried (when it is a host name). */
        if (r != LZ_HELLO_NAME || !lz_host_name_canonical(raw, raw_len, name))
            name[0] = '\0';
        return refuse(g, why, SC_NAME_WHY_RETRY_NAME);
    }
    g->passed += end;
    g->awaiting_hello = false;
    g->deadline = now + LZ_NAMECHECK_HELLO_MS;
    return LZ_TLS_GATE_GOING;
}

/* The server's answer in sbuf. */
static lz_tls_gate_state server_answer(lz_tls_gate *g, int64_t now, lz_relay *relay, int *why)
{
    size_t end = 0;
    switch (lz_tls_server_hello_kind(g->sbuf, g->slen, &end)) {
    case LZ_TLS_SERVER_NEED_MORE:
        if (now >= g->deadline) {
            gate_end(g, true); /* a slow server: not the client's doing */
            return LZ_TLS_GATE_ENDED;
        }
        return LZ_TLS_GATE_GOING;
    case LZ_TLS_SERVER_HELLO:
        break;
    case LZ_TLS_SERVER_RETRY:
        if (g->retried || g->tlen > g->toff)
            return refuse(g, why, SC_NAME_WHY_SERVER_HELLO); /* a second one */
        /* Passed on; what followed it (a ChangeCipherSpec) is the next
         * round's. */
        memcpy(g->tbuf, g->sbuf, end);
        g->toff = 0;
        g->tlen = end;
        memmove(g->sbuf, g->sbuf + end, g->slen - end);
        g->slen -= end;
        g->retried = g->awaiting_hello = true;
        g->deadline = now + LZ_NAMECHECK_HELLO_MS;
        return LZ_TLS_GATE_GOING;
    case LZ_TLS_SERVER_ALERT:
        /* The server refused the hello: its alert goes to the client (one
         * small send on a socket that has nothing queued; behind a
         * HelloRetryRequest not all sent yet, nothing), then both end. */
        if (g->tlen == g->toff)
            send(g->a, g->sbuf, end, MSG_NOSIGNAL | MSG_DONTWAIT);
        gate_end(g, g->tlen != g->toff);
        return LZ_TLS_GATE_ENDED;
    case LZ_TLS_SERVER_INVALID:
    default:
        return refuse(g, why, SC_NAME_WHY_SERVER_HELLO);
    }
    /* The server chose its site: the relay takes over. The client's held
     * bytes go to the server; what the server sent (the rest of the
     * HelloRetryRequest's round first) to the client. */
    if (lz_relay_init(relay, g->a, g->b, false, now, g->cbuf + g->sent, g->len - g->sent) < 0 ||
        lz_relay_queue_to_a(relay, g->tbuf + g->toff, g->tlen - g->toff) < 0 ||
        lz_relay_queue_to_a(relay, g->sbuf, g->slen) < 0) {
        if (relay->a >= 0)
            lz_relay_end(relay, true);
        else
            gate_end(g, true);
        gate_free(g);
        return LZ_TLS_GATE_ENDED;
    }
    gate_free(g);
    return LZ_TLS_GATE_RELAY;
}

lz_tls_gate_state lz_tls_gate_step(lz_tls_gate *g, short ra, short rb, int64_t now, lz_relay *r,
                                   char name[static LZ_HOST_NAME_MAX + 1], int *why)
{
    name[0] = '\0';
    *why = 0;
    if (g->connecting) {
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        if ((rb && (getsockopt(g->b, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr)) ||
            (!rb && now >= g->deadline)) {
            gate_end(g, true); /* nothing listens there: the client is reset */
            return LZ_TLS_GATE_ENDED;
        }
        if (!rb)
            return LZ_TLS_GATE_GOING;
        g->connecting = false;
        g->deadline = now + LZ_NAMECHECK_HELLO_MS;
        rb = POLLOUT; /* the ClientHello leaves now */
    }
    /* An error, or either side ending before the server chose its site:
     * both are cut (no TLS client or server ends there). */
    if (((ra | rb) & (POLLERR | POLLNVAL)) ||
        ((ra & (POLLIN | POLLHUP)) && client_room(g) &&
         !gate_read(g->a, g->cbuf, &g->len, GATE_CBUF)) ||
        ((rb & (POLLIN | POLLHUP)) && !gate_read(g->b, g->sbuf, &g->slen, LZ_HELLO_MAX)) ||
        !gate_write(g->b, g->cbuf, &g->sent, g->passed) ||
        !gate_write(g->a, g->tbuf, &g->toff, g->tlen)) {
        gate_end(g, true);
        return LZ_TLS_GATE_ENDED;
    }
    /* The client's bytes sent are dropped, so that the held ones have
     * room. */
    if (g->sent == g->passed && g->sent) {
        memmove(g->cbuf, g->cbuf + g->sent, g->len - g->sent);
        g->len -= g->sent;
        g->passed = g->sent = 0;
    }
    if (g->awaiting_hello) {
        /* The server's next answer is parsed only once this ClientHello
         * passed (a server does not answer before it). */
        lz_tls_gate_state st = second_hello(g, now, name, why);
        if (st != LZ_TLS_GATE_GOING || g->awaiting_hello)
            return st;
    }
    return server_answer(g, now, r, why);
}
