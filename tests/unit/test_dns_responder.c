/* SPDX-License-Identifier: Apache-2.0
 *
 * The DNS responder's loop (lz-dns, src/supervisor/dns_loop.c) on
 * loopback: it runs in a forked child with its sockets on 127.0.0.1; the
 * test is at once the sandbox (the client), the upstream resolver (UDP and
 * TCP on one port, answering from a table and logging every question) and
 * the keeper (the other end of the SOCK_SEQPACKET pair). The whole path
 * through runsc is tests/integration/test_dns.py.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "config/hosts.h"
#include "protocol/dns.h"
#include "supervisor/sidecar_internal.h"

/* ---- the upstream resolver's table and log ----------------------------- */

typedef struct up_entry {
    const char *name; /* lowercase */
    const char *cname;
    const char *addrs[3];
    uint32_t ttl;
    bool truncate_udp; /* TC over UDP: the answer only over TCP */
} up_entry;

static const up_entry up_table[] = {
    { "api.example.test", NULL, { "198.18.7.7", "198.18.7.8" }, 5, false },
    { "big.example.test", NULL, { "198.18.7.9" }, 7200, true },
    { "cdn.example.test", "edge.tracker.test", { "198.18.7.10" }, 60, false },
    { "alias.example.test", "other.example.test", { "198.18.7.11" }, 60, false },
    { "free.other.test", NULL, { "203.0.113.9" }, 60, false },
};

static struct {
    int udp, tcp, keeper, client_udp;
    uint16_t port, dns_port;
    pid_t pid;
    lz_resolved_config cfg;
    bool up_silent;  /* the upstream never answers */
    int keeper_mode; /* 0: admit all, 1: admit the first only, 2: none, 3: silent */
    char up_log[256][320];
    size_t n_up_log;
    sc_dns_msg denied[64];
    size_t n_denied;
    sc_dns_msg learned[64];
    size_t n_learned;
} T;

static int udp_lo(uint16_t port, uint16_t *ret)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(bind(fd, (struct sockaddr *) &a, sizeof(a)), 0);
    socklen_t l = sizeof(a);
    getsockname(fd, (struct sockaddr *) &a, &l);
    if (ret)
        *ret = ntohs(a.sin_port);
    return fd;
}

static int tcp_lo(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(bind(fd, (struct sockaddr *) &a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 16), 0);
    return fd;
}

static void add_pattern(lz_host_list *l, const char *text)
{
    lz_host_pattern p;
    const char *why = NULL;
    assert_true(lz_host_pattern_parse(text, &p, &why));
    lz_host_list_add(l, &p);
    lz_host_pattern_clear(&p);
}

/* lz-dns with the profile: allow api/big/cdn/alias.example.test, deny
 * *.tracker.test and other.example.test. */
static void start_with(lz_dns_mode mode, size_t n_resolvers)
{
    memset(&T, 0, sizeof(T));
    T.cfg.dns_mode = mode;
    add_pattern(&T.cfg.allow_hosts, "*.example.test");
    add_pattern(&T.cfg.deny_hosts, "*.tracker.test");
    add_pattern(&T.cfg.deny_hosts, "other.example.test");
    T.udp = udp_lo(0, &T.port);
    T.tcp = tcp_lo(T.port);
    uint16_t dport;
    int dns_udp = udp_lo(0, &dport);
    int dns_tcp = tcp_lo(dport);
    T.dns_port = dport;
    int pair[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
    T.keeper = pair[0];
    T.pid = fork();
    assert_true(T.pid >= 0);
    if (T.pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(pair[0]);
        sc_dns_setup s = { .cfg = &T.cfg,
                           .resolvers = { { 127, 0, 0, 1 } },
                           .n_resolvers = n_resolvers,
                           .upstream_port = T.port,
                           .udp_fd = dns_udp,
                           .tcp_fd = dns_tcp,
                           .keeper_fd = pair[1] };
        _exit(sc_dns_run(&s));
    }
    close(pair[1]);
    close(dns_udp);
    close(dns_tcp);
    T.client_udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons(T.dns_port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(connect(T.client_udp, (struct sockaddr *) &a, sizeof(a)), 0);
}

static void start(lz_dns_mode mode)
{
    start_with(mode, 1);
}

static void stop(void)
{
    kill(T.pid, SIGKILL);
    waitpid(T.pid, NULL, 0);
    close(T.udp);
    close(T.tcp);
    close(T.keeper);
    close(T.client_udp);
    lz_host_list_clear(&T.cfg.allow_hosts);
    lz_host_list_clear(&T.cfg.deny_hosts);
}

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t) t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* The upstream's answer to one query (msg), into out. */
static size_t up_answer(const uint8_t *msg, size_t len, bool over_tcp, uint8_t *out, size_t cap)
{
    lz_dns_query q;
    assert_int_equal(lz_dns_query_decode(msg, len, &q), LZ_DNS_OK);
    assert_true(T.n_up_log < 256);
    snprintf(T.up_log[T.n_up_log++], sizeof(T.up_log[0]), "%s %s %s", over_tcp ? "tcp" : "udp",
             q.name, lz_dns_type_name(q.qtype));
    char lower[LZ_HOST_NAME_MAX + 1];
    assert_true(lz_host_name_canonical(q.name, strlen(q.name), lower));
    const up_entry *e = NULL;
    for (size_t i = 0; i < sizeof(up_table) / sizeof(up_table[0]); i++)
        if (strcmp(up_table[i].name, lower) == 0)
            e = &up_table[i];
    lz_dns_answer a;
    memset(&a, 0, sizeof(a));
    uint8_t rcode = e ? LZ_DNS_RCODE_NOERROR : LZ_DNS_RCODE_NXDOMAIN;
    if (e && q.qtype == LZ_DNS_TYPE_A) {
        if (e->cname) {
            snprintf(a.chain[0], sizeof(a.chain[0]), "%s", e->cname);
            a.n_chain = 1;
        }
        for (size_t i = 0; i < 3 && e->addrs[i]; i++)
            inet_pton(AF_INET, e->addrs[i], a.addrs[a.n_addrs++]);
    }
    size_t n = lz_dns_answer_encode(&q, rcode, &a, e ? e->ttl : 0, out, cap);
    if (e && e->truncate_udp && !over_tcp) {
        n = lz_dns_answer_encode(&q, rcode, NULL, 0, out, cap);
        out[2] |= 0x02;
    }
    return n;
}

/* Serve the upstream and the keeper until the client's UDP socket (or
 * `client`) has an answer, or ms pass. Returns the answer's length. */
static void keeper_read(void);

static size_t pump(int client, uint8_t *ans, size_t cap, int ms)
{
    int64_t end = now_ms() + ms;
    int conn = -1;
    for (;;) {
        int64_t left = end - now_ms();
        if (left <= 0)
            return 0;
        struct pollfd p[5] = { { client, POLLIN, 0 },
                               { T.udp, POLLIN, 0 },
                               { T.tcp, POLLIN, 0 },
                               { T.keeper, POLLIN, 0 },
                               { conn, POLLIN, 0 } };
        if (poll(p, 5, (int) left) <= 0)
            continue;
        if (p[0].revents & POLLIN) {
            ssize_t n = recv(client, ans, cap, 0);
            if (conn >= 0)
                close(conn);
            /* A denial is told to the keeper just after the answer. */
            struct pollfd k = { T.keeper, POLLIN, 0 };
            while (poll(&k, 1, 10) == 1)
                keeper_read();
            return n > 0 ? (size_t) n : 0;
        }
        uint8_t buf[4096], out[4096];
        if (p[1].revents & POLLIN) {
            struct sockaddr_in from;
            socklen_t fl = sizeof(from);
            ssize_t n = recvfrom(T.udp, buf, sizeof(buf), 0, (struct sockaddr *) &from, &fl);
            size_t m = up_answer(buf, (size_t) n, false, out, sizeof(out));
            if (!T.up_silent)
                sendto(T.udp, out, m, 0, (struct sockaddr *) &from, fl);
        }
        if (p[2].revents & POLLIN)
            conn = accept4(T.tcp, NULL, NULL, SOCK_CLOEXEC);
        if (conn >= 0 && (p[4].revents & POLLIN)) {
            ssize_t n = recv(conn, buf, sizeof(buf), 0);
            if (n > 2) {
                size_t m = up_answer(buf + 2, (size_t) n - 2, true, out + 2, sizeof(out) - 2);
                out[0] = (uint8_t) (m >> 8);
                out[1] = (uint8_t) m;
                send(conn, out, m + 2, MSG_NOSIGNAL);
            }
            close(conn);
            conn = -1;
        }
        if (p[3].revents & POLLIN)
            keeper_read();
    }
}

static void keeper_read(void)
{
    sc_dns_msg m;
    assert_int_equal(recv(T.keeper, &m, sizeof(m), 0), (ssize_t) sizeof(m));
    if (m.type == SC_DNS_DENIED) {
        T.denied[T.n_denied++ % 64] = m;
    } else if (m.type == SC_DNS_LEARN) {
        T.learned[T.n_learned++ % 64] = m;
        m.type = SC_DNS_LEARNED;
        m.admitted = T.keeper_mode == 0   ? (UINT32_C(1) << m.n_addrs) - 1
                     : T.keeper_mode == 1 ? 1
                                          : 0;
        if (T.keeper_mode != 3)
            send(T.keeper, &m, sizeof(m), 0);
    }
}

/* A client's query, written by hand: the name as given (a trailing dot
 * is the root label), no EDNS. */
static size_t query_msg(const char *name, uint16_t qtype, uint16_t id, uint8_t *buf, size_t cap)
{
    assert_true(cap >= 12 + strlen(name) + 6);
    uint8_t h[12] = { (uint8_t) (id >> 8), (uint8_t) id, 0x01, 0, 0, 1, 0, 0, 0, 0, 0, 0 };
    memcpy(buf, h, 12);
    size_t at = 12;
    const char *p = name;
    while (*p) {
        const char *dot = strchr(p, '.');
        size_t l = dot ? (size_t) (dot - p) : strlen(p);
        buf[at++] = (uint8_t) l;
        memcpy(buf + at, p, l);
        at += l;
        p += l + (dot ? 1 : 0);
    }
    buf[at++] = 0;
    buf[at++] = (uint8_t) (qtype >> 8);
    buf[at++] = (uint8_t) qtype;
    buf[at++] = 0;
    buf[at++] = LZ_DNS_CLASS_IN;
    return at;
}

typedef struct result {
    uint8_t rcode;
    size_t n_addrs;
    char addr0[INET_ADDRSTRLEN];
    uint32_t ttl;
    size_t n_chain;
    bool got;
} result;

static result decode(const char *name, uint16_t qtype, uint16_t id, const uint8_t *ans, size_t len)
{
    result r = { 0 };
    if (!len)
        return r;
    lz_dns_query q;
    memset(&q, 0, sizeof(q));
    snprintf(q.name, sizeof(q.name), "%s", name);
    size_t name_len = strlen(q.name);
    if (name_len && q.name[name_len - 1] == '.')
        q.name[name_len - 1] = '\0'; /* the echoed question, in text form */
    q.id = id;
    q.qtype = qtype;
    q.qclass = LZ_DNS_CLASS_IN;
    lz_dns_answer a;
    assert_int_equal(lz_dns_response_decode(ans, len, &q, &a), LZ_DNS_OK);
    r.got = true;
    r.rcode = a.rcode;
    r.n_addrs = a.n_addrs;
    r.n_chain = a.n_chain;
    r.ttl = a.ttl;
    if (a.n_addrs)
        inet_ntop(AF_INET, a.addrs[0], r.addr0, sizeof(r.addr0));
    return r;
}

static result ask(const char *name, uint16_t qtype, int ms)
{
    uint8_t q[512], ans[4096];
    uint16_t id = (uint16_t) (0x1000 + T.n_up_log * 7 + T.n_denied);
    size_t n = query_msg(name, qtype, id, q, sizeof(q));
    assert_true(n > 0);
    assert_int_equal(send(T.client_udp, q, n, 0), (ssize_t) n);
    return decode(name, qtype, id, ans, pump(T.client_udp, ans, sizeof(ans), ms));
}

static bool up_saw(const char *needle)
{
    for (size_t i = 0; i < T.n_up_log; i++)
        if (strstr(T.up_log[i], needle))
            return true;
    return false;
}

/* ---- strict mode -------------------------------------------------------- */

static void test_unlisted_never_leaves(void **state)
{
    (void) state;
    start(LZ_DNS_STRICT);
    int64_t t0 = now_ms();
    result r = ask("made-up.nowhere.test", LZ_DNS_TYPE_A, 1000);
    assert_true(r.got);
    assert_int_equal(r.rcode, LZ_DNS_RCODE_NXDOMAIN);
    assert_true(now_ms() - t0 < 500);
    assert_int_equal(T.n_up_log, 0);
    assert_int_equal(T.n_denied, 1);
    assert_int_equal(T.denied[0].why, SC_DNS_WHY_UNLISTED);
    assert_string_equal(T.denied[0].name, "made-up.nowhere.test");
    /* Not a host name ('_'): refused too. */
    r = ask("_srv._tcp.example.test", LZ_DNS_TYPE_A, 1000);
    assert_int_equal(r.rcode, LZ_DNS_RCODE_NXDOMAIN);
    assert_int_equal(T.denied[1].why, SC_DNS_WHY_NOT_A_NAME);
    /* Denied by deny_hosts. */
    r = ask("other.example.test", LZ_DNS_TYPE_A, 1000);
    assert_int_equal(r.rcode, LZ_DNS_RCODE_NXDOMAIN);
    assert_int_equal(T.denied[2].why, SC_DNS_WHY_DENIED_HOST);
    assert_int_equal(T.n_up_log, 0);
    /* Control: an allowed name does reach the upstream. */
    r = ask("api.example.test", LZ_DNS_TYPE_A, 3000);
    assert_int_equal(r.rcode, LZ_DNS_RCODE_NOERROR);
    assert_true(up_saw("api.example.test A"));
    stop();
}

static void test_allowed_learned_first(void **state)
{
    (void) state;
    start(LZ_DNS_STRICT);
    /* Case and a trailing dot: the canonical name is what is matched. */
    result r = ask("API.Example.TEST.", LZ_DNS_TYPE_A, 3000);
    assert_int_equal(r.rcode, LZ_DNS_RCODE_NOERROR);
    assert_int_equal(r.n_addrs, 2);
    assert_int_equal(T.n_learned, 1);
    assert_string_equal(T.learned[0].name, "api.example.test");
    assert_int_equal(T.learned[0].n_addrs, 2);
    /* TTL 5 upstream: learned for the lower bound, told 5. */
    assert_int_equal(T.learned[0].timeout_s, SC_LEARN_TTL_MIN);
    assert_int_equal(r.ttl, 5);
    /* A TTL over the upper bound is cut to it, in the set and in the
     * answer; the TC answer was asked again over TCP. */
    r = ask("big.example.test", LZ_DNS_TYPE_A, 3000);
    assert_int_equal(r.rcode, LZ_DNS_RCODE_NOERROR);
    assert_string_equal(r.addr0, "198.18.7.9");
    assert_int_equal(T.learned[1].timeout_s, SC_LEARN_TTL_MAX);
    assert_int_equal(r.ttl, SC_LEARN_TTL_MAX);
    assert_true(up_saw("udp big.example.test A"));
    assert_true(up_saw("tcp big.example.test A"));
    /* Only what the keeper admits is told. */
    T.keeper_mode = 1;
    r = ask("api.example.test", LZ_DNS_TYPE_A, 3000);
    assert_int_equal(r.n_addrs, 1);
    assert_string_equal(r.addr0, "198.18.7.7");
    T.keeper_mode = 2;
    size_t denied = T.n_denied;
    r = ask("api.example.test", LZ_DNS_TYPE_A, 3000);
    assert_int_equal(r.rcode, LZ_DNS_RCODE_NOERROR);
    assert_int_equal(r.n_addrs, 0);
    assert_int_equal(T.n_denied, denied + 1);
    assert_int_equal(T.denied[denied].why, SC_DNS_WHY_ADDRESSES);
    /* A keeper that does not answer: SERVFAIL after its second. */
    T.keeper_mode = 3;
    int64_t t0 = now_ms();
    r = ask("api.example.test", LZ_DNS_TYPE_A, 3000);
    assert_int_equal(r.rcode, LZ_DNS_RCODE_SERVFAIL);
    assert_true(now_ms() - t0 >= 900);
    stop();
}

static void test_chain_and_types(void **state)
{
    (void) state;
    start(LZ_DNS_STRICT);
    /* A chain through a denied name: refused, nothing learned. */
    result r = ask("cdn.example.test", LZ_DNS_TYPE_A, 3000);
    assert_int_equal(r.rcode, LZ_DNS_RCODE_NXDOMAIN);
    assert_int_equal(T.n_learned, 0);
    assert_int_equal(T.denied[0].why, SC_DNS_WHY_DENIED_HOST);
    assert_string_equal(T.denied[0].name, "edge.tracker.test");
    r = ask("alias.example.test", LZ_DNS_TYPE_A, 3000);
    assert_int_equal(r.rcode, LZ_DNS_RCODE_NXDOMAIN);
    /* AAAA: empty, not asked, not a denial. TXT: empty, not asked, a
     * denial. */
    size_t asked = T.n_up_log, denied = T.n_denied;
    r = ask("api.example.test", LZ_DNS_TYPE_AAAA, 1000);
    assert_int_equal(r.rcode, LZ_DNS_RCODE_NOERROR);
    assert_int_equal(r.n_addrs, 0);
    assert_int_equal(T.n_denied, denied);
    r = ask("api.example.test", LZ_DNS_TYPE_TXT, 1000);
    assert_int_equal(r.rcode, LZ_DNS_RCODE_NOERROR);
    assert_int_equal(T.n_denied, denied + 1);
    assert_int_equal(T.denied[denied].why, SC_DNS_WHY_TYPE);
    assert_int_equal(T.denied[denied].qtype, LZ_DNS_TYPE_TXT);
    assert_int_equal(T.n_up_log, asked);
    stop();
}

/* ---- forward mode ------------------------------------------------------- */

static void test_forward_mode(void **state)
{
    (void) state;
    start(LZ_DNS_FORWARD);
    /* Unlisted names and any type are asked upstream and relayed. */
    result r = ask("free.other.test", LZ_DNS_TYPE_A, 3000);
    assert_int_equal(r.rcode, LZ_DNS_RCODE_NOERROR);
    assert_string_equal(r.addr0, "203.0.113.9");
    assert_int_equal(T.n_learned, 0);
    r = ask("free.other.test", LZ_DNS_TYPE_TXT, 3000);
    assert_true(r.got);
    assert_true(up_saw("free.other.test TXT"));
    r = ask("nothing.other.test", LZ_DNS_TYPE_A, 3000);
    assert_int_equal(r.rcode, LZ_DNS_RCODE_NXDOMAIN);
    assert_true(up_saw("nothing.other.test A"));
    /* Denied names still never leave; allowed ones are learned. */
    size_t asked = T.n_up_log;
    r = ask("x.tracker.test", LZ_DNS_TYPE_A, 1000);
    assert_int_equal(r.rcode, LZ_DNS_RCODE_NXDOMAIN);
    assert_int_equal(T.n_up_log, asked);
    r = ask("api.example.test", LZ_DNS_TYPE_A, 3000);
    assert_int_equal(r.n_addrs, 2);
    assert_int_equal(T.n_learned, 1);
    stop();
}

/* ---- TCP, bounds, failures ---------------------------------------------- */

static void test_tcp_clients(void **state)
{
    (void) state;
    start(LZ_DNS_STRICT);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons(T.dns_port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(connect(fd, (struct sockaddr *) &a, sizeof(a)), 0);
    /* Two queries in one write: both answered on the connection. */
    uint8_t q[1024];
    size_t n1 = query_msg("api.example.test", LZ_DNS_TYPE_A, 0x1111, q + 2, 500);
    q[0] = (uint8_t) (n1 >> 8);
    q[1] = (uint8_t) n1;
    size_t n2 = query_msg("made-up.nowhere.test", LZ_DNS_TYPE_A, 0x2222, q + 4 + n1, 500);
    q[2 + n1] = (uint8_t) (n2 >> 8);
    q[3 + n1] = (uint8_t) n2;
    assert_int_equal(send(fd, q, n1 + n2 + 4, 0), (ssize_t) (n1 + n2 + 4));
    uint8_t buf[8192];
    size_t got = 0;
    int64_t end = now_ms() + 3000;
    while (now_ms() < end) {
        /* The refusal comes at once; the allowed answer after the
         * upstream and the keeper. */
        size_t n = pump(fd, buf + got, sizeof(buf) - got, 200);
        got += n;
        size_t at = 0, msgs = 0;
        while (at + 2 <= got && at + 2 + ((size_t) buf[at] << 8 | buf[at + 1]) <= got) {
            at += 2 + ((size_t) buf[at] << 8 | buf[at + 1]);
            msgs++;
        }
        if (msgs == 2)
            break;
    }
    size_t l1 = (size_t) buf[0] << 8 | buf[1];
    result r1 = decode("made-up.nowhere.test", LZ_DNS_TYPE_A, 0x2222, buf + 2, l1);
    assert_int_equal(r1.rcode, LZ_DNS_RCODE_NXDOMAIN);
    size_t l2 = (size_t) buf[2 + l1] << 8 | buf[3 + l1];
    assert_true(got >= 4 + l1 + l2);
    result r2 = decode("api.example.test", LZ_DNS_TYPE_A, 0x1111, buf + 4 + l1, l2);
    assert_int_equal(r2.rcode, LZ_DNS_RCODE_NOERROR);
    assert_int_equal(r2.n_addrs, 2);
    close(fd);
    stop();
}

static void test_bounds_and_failure(void **state)
{
    (void) state;
    start(LZ_DNS_STRICT);
    T.up_silent = true;
    /* 64 in flight; the 65th is answered SERVFAIL at once. */
    uint8_t q[512], ans[1024];
    for (int i = 0; i < SC_DNS_MAX_PENDING; i++) {
        size_t n = query_msg("api.example.test", LZ_DNS_TYPE_A, (uint16_t) i, q, sizeof(q));
        assert_int_equal(send(T.client_udp, q, n, 0), (ssize_t) n);
    }
    size_t n = query_msg("api.example.test", LZ_DNS_TYPE_A, 999, q, sizeof(q));
    assert_int_equal(send(T.client_udp, q, n, 0), (ssize_t) n);
    int64_t t0 = now_ms();
    result r = decode("api.example.test", LZ_DNS_TYPE_A, 999, ans,
                      pump(T.client_udp, ans, sizeof(ans), 1500));
    assert_int_equal(r.rcode, LZ_DNS_RCODE_SERVFAIL);
    assert_true(now_ms() - t0 < 1000);
    /* The 64: SERVFAIL once the resolver's 2 s are over (the only one). */
    size_t servfail = 0;
    int64_t end = now_ms() + 6000;
    while (servfail < SC_DNS_MAX_PENDING && now_ms() < end) {
        size_t l = pump(T.client_udp, ans, sizeof(ans), 500);
        if (l >= 4 && (ans[3] & 0xf) == LZ_DNS_RCODE_SERVFAIL)
            servfail++;
    }
    assert_int_equal(servfail, SC_DNS_MAX_PENDING);
    assert_true(now_ms() - t0 >= 1900);
    /* The slots are free again. */
    T.up_silent = false;
    r = ask("api.example.test", LZ_DNS_TYPE_A, 3000);
    assert_int_equal(r.rcode, LZ_DNS_RCODE_NOERROR);
    /* Garbage is dropped, the loop goes on. */
    assert_int_equal(send(T.client_udp, "\x01\x02\x03", 3, 0), 3);
    r = ask("api.example.test", LZ_DNS_TYPE_A, 3000);
    assert_int_equal(r.rcode, LZ_DNS_RCODE_NOERROR);
    stop();
}

/* The upstream is asked the canonical (lowercase) name, never the case the
 * sandbox chose (attack round a25, S6: 0x20 case carried a bit per letter);
 * the answer echoes the question as sent. */
static void test_upstream_gets_the_canonical_name(void **state)
{
    (void) state;
    start(LZ_DNS_STRICT);
    result r = ask("aPi.ExAmple.TEST", LZ_DNS_TYPE_A, 3000);
    assert_int_equal(r.rcode, LZ_DNS_RCODE_NOERROR);
    assert_true(up_saw("udp api.example.test A"));
    assert_false(up_saw("aPi"));
    stop();
}

/* No resolver at all (an offline machine whose resolv.conf names none): the
 * responder runs, an allowed name is answered SERVFAIL at once and nothing
 * is asked; the rules still answer the rest. Control: with the resolver,
 * the same name resolves. */
static void test_no_resolver(void **state)
{
    (void) state;
    start_with(LZ_DNS_STRICT, 0);
    int64_t t0 = now_ms();
    result r = ask("api.example.test", LZ_DNS_TYPE_A, 1500);
    assert_int_equal(r.rcode, LZ_DNS_RCODE_SERVFAIL);
    assert_true(now_ms() - t0 < 1000);
    assert_false(up_saw("api.example.test"));
    r = ask("nope.other.test", LZ_DNS_TYPE_A, 1500);
    assert_int_equal(r.rcode, LZ_DNS_RCODE_NXDOMAIN);
    stop();
    start(LZ_DNS_STRICT);
    r = ask("api.example.test", LZ_DNS_TYPE_A, 3000);
    assert_int_equal(r.rcode, LZ_DNS_RCODE_NOERROR);
    assert_true(up_saw("api.example.test"));
    stop();
}

static void test_parse_resolv_conf(void **state)
{
    (void) state;
    static const char text[] = "# comment\n"
                               "search example.test\n"
                               "nameserver 2001:db8::1\n"
                               "nameserver\t192.0.2.53 # first\n"
                               "nameserver 0.0.0.0\n"
                               "nameserver 999.1.1.1\n"
                               "  nameserver 127.0.0.53\n"
                               "nameservers 192.0.2.99\n"
                               "nameserver 192.0.2.54\n"
                               "nameserver 192.0.2.55\n";
    uint8_t out[LZ_RESOLVERS_MAX][4];
    size_t n = sc_dns_parse_resolv_conf(text, sizeof(text) - 1, out);
    assert_int_equal(n, 3);
    assert_memory_equal(out[0], "\xc0\x00\x02\x35", 4);
    assert_memory_equal(out[1], "\x7f\x00\x00\x35", 4);
    assert_memory_equal(out[2], "\xc0\x00\x02\x36", 4);
    assert_int_equal(sc_dns_parse_resolv_conf("nameserver 2001:db8::1\n", 23, out), 0);
    /* Bounded: a line cut at len is not read past it. */
    assert_int_equal(sc_dns_parse_resolv_conf("nameserver 192.0.2.53", 13, out), 0);
}

/* After sc_dns_confine: no file opened, no process signalled, nothing
 * bound, no AF_UNIX or netlink socket, no capability; UDP sockets still
 * connect and send (its upstream queries). Control: before it, the same
 * calls succeed. */
static void test_confinement(void **state)
{
    (void) state;
    uint16_t port;
    int target = udp_lo(0, &port);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int code = 0;
        int f = open("/dev/null", O_RDONLY | O_CLOEXEC);
        int u = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (f < 0 || u < 0)
            _exit(100); /* control */
        close(f);
        close(u);
        if (sc_dns_confine() < 0)
            _exit(101);
        if (open("/dev/null", O_RDONLY | O_CLOEXEC) >= 0 || errno != EPERM)
            code |= 1;
        if (kill(getppid(), 0) == 0 || errno != EPERM)
            code |= 2;
        if (socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0) >= 0 || errno != EPERM)
            code |= 4;
        if (socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0) >= 0 || errno != EPERM)
            code |= 8;
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = { .sin_family = AF_INET,
                                 .sin_port = htons(port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        if (s < 0 || connect(s, (struct sockaddr *) &a, sizeof(a)) < 0 || send(s, "x", 1, 0) != 1)
            code |= 16;
        struct sockaddr_in any = { .sin_family = AF_INET };
        int b = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (b >= 0 && bind(b, (struct sockaddr *) &any, sizeof(any)) == 0)
            code |= 32;
        struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
        struct __user_cap_data_struct d[2];
        if (syscall(SYS_capget, &h, d) == 0 || errno != EPERM)
            code |= 64;
        _exit(code);
    }
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    char byte;
    assert_int_equal(recv(target, &byte, 1, MSG_DONTWAIT), 1); /* its datagram came */
    close(target);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_resolv_conf),
        cmocka_unit_test(test_unlisted_never_leaves),
        cmocka_unit_test(test_allowed_learned_first),
        cmocka_unit_test(test_chain_and_types),
        cmocka_unit_test(test_forward_mode),
        cmocka_unit_test(test_tcp_clients),
        cmocka_unit_test(test_bounds_and_failure),
        cmocka_unit_test(test_confinement),
        cmocka_unit_test(test_no_resolver),
        cmocka_unit_test(test_upstream_gets_the_canonical_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
