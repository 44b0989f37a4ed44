/* SPDX-License-Identifier: Apache-2.0
 *
 * A DNS client for inside the sandbox (tests/integration/test_dns.py),
 * built static by the test: busybox's nslookup speaks neither TCP nor
 * floods.
 *
 *   dns_probe q SERVER NAME TYPE [tcp]
 *       one query (TYPE a number); prints
 *       "rcode=R an=N addrs=A,B ttl=T ms=M" (ttl of the last A record), or
 *       "error WHAT ms=M"
 *   dns_probe flood SERVER COUNT PREFIX
 *       COUNT queries for PREFIX-i (UDP, 64 outstanding at most, 2 s for
 *       the stragglers); prints "sent S answered A nxdomain X servfail F
 *       ms=M"
 *   dns_probe lat SERVER NAME COUNT
 *       COUNT queries for NAME (type A, UDP) one after the other; prints
 *       "LAT US RCODE AN" per query (US: microseconds from send to answer)
 *       (bench/network/dns.py)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

static size_t build(uint8_t *b, uint16_t id, const char *name, uint16_t type)
{
    uint8_t h[12] = { id >> 8, id & 0xff, 0x01, 0, 0, 1, 0, 0, 0, 0, 0, 0 };
    memcpy(b, h, 12);
    size_t at = 12;
    const char *p = name;
    while (*p) {
        const char *dot = strchr(p, '.');
        size_t l = dot ? (size_t) (dot - p) : strlen(p);
        b[at++] = (uint8_t) l;
        memcpy(b + at, p, l);
        at += l;
        p += l + (dot ? 1 : 0);
    }
    b[at++] = 0;
    b[at++] = type >> 8;
    b[at++] = type & 0xff;
    b[at++] = 0;
    b[at++] = 1;
    return at;
}

static size_t skip_name(const uint8_t *b, size_t len, size_t at)
{
    while (at < len) {
        if ((b[at] & 0xc0) == 0xc0)
            return at + 2;
        if (b[at] == 0)
            return at + 1;
        at += 1 + b[at];
    }
    return len;
}

static void report(const uint8_t *r, size_t n, long ms)
{
    if (n < 12) {
        printf("error short ms=%ld\n", ms);
        return;
    }
    unsigned an = (unsigned) (r[6] << 8 | r[7]);
    size_t at = skip_name(r, n, 12) + 4;
    char addrs[1024] = "";
    unsigned long ttl = 0;
    for (unsigned i = 0; i < an && at + 10 <= n; i++) {
        at = skip_name(r, n, at);
        if (at + 10 > n)
            break;
        unsigned type = (unsigned) (r[at] << 8 | r[at + 1]);
        unsigned long t =
            (unsigned long) r[at + 4] << 24 | r[at + 5] << 16 | r[at + 6] << 8 | r[at + 7];
        unsigned rdlen = (unsigned) (r[at + 8] << 8 | r[at + 9]);
        at += 10;
        if (type == 1 && rdlen == 4 && at + 4 <= n) {
            char a[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, r + at, a, sizeof(a));
            if (addrs[0])
                strncat(addrs, ",", sizeof(addrs) - strlen(addrs) - 1);
            strncat(addrs, a, sizeof(addrs) - strlen(addrs) - 1);
            ttl = t;
        }
        at += rdlen;
    }
    printf("rcode=%u an=%u addrs=%s ttl=%lu tc=%d ms=%ld\n", r[3] & 0xf, an, addrs, ttl,
           (r[2] & 2) != 0, ms);
}

static int query(const char *server, const char *name, uint16_t type, int tcp)
{
    struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(53) };
    inet_pton(AF_INET, server, &to.sin_addr);
    uint8_t q[600], r[65536];
    size_t ql = build(q + 2, 0x4c5a, name, type);
    long t0 = now_ms();
    int fd = socket(AF_INET, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
    struct timeval tv = { 3, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *) &to, sizeof(to)) < 0) {
        printf("error connect:%s ms=%ld\n", strerror(errno), now_ms() - t0);
        return 0;
    }
    ssize_t n;
    if (tcp) {
        q[0] = ql >> 8;
        q[1] = ql & 0xff;
        if (send(fd, q, ql + 2, 0) < 0) {
            printf("error send:%s ms=%ld\n", strerror(errno), now_ms() - t0);
            return 0;
        }
        size_t got = 0;
        while (got < 2 || got < 2 + (size_t) (r[0] << 8 | r[1])) {
            n = recv(fd, r + got, sizeof(r) - got, 0);
            if (n <= 0) {
                printf("error recv:%s ms=%ld\n", n ? strerror(errno) : "eof", now_ms() - t0);
                return 0;
            }
            got += (size_t) n;
        }
        report(r + 2, got - 2, now_ms() - t0);
        return 0;
    }
    if (send(fd, q + 2, ql, 0) < 0) {
        printf("error send:%s ms=%ld\n", strerror(errno), now_ms() - t0);
        return 0;
    }
    /* Woken by the answer or by an ICMP error (gVisor reports the error
     * to a waiting poll, then to recv). */
    struct pollfd p = { fd, POLLIN, 0 };
    if (poll(&p, 1, 3000) != 1) {
        printf("error timeout ms=%ld\n", now_ms() - t0);
        return 0;
    }
    n = recv(fd, r, sizeof(r), MSG_DONTWAIT);
    if (n < 0) {
        printf("error recv:%s ms=%ld\n", strerror(errno), now_ms() - t0);
        return 0;
    }
    report(r, (size_t) n, now_ms() - t0);
    return 0;
}

static int flood(const char *server, long count, const char *prefix)
{
    struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(53) };
    inet_pton(AF_INET, server, &to.sin_addr);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (connect(fd, (struct sockaddr *) &to, sizeof(to)) < 0)
        return 1;
    long t0 = now_ms(), sent = 0, answered = 0, nx = 0, sf = 0, last = now_ms();
    while (answered < count) {
        while (sent < count && sent - answered < 64) {
            char name[300];
            uint8_t q[600];
            snprintf(name, sizeof(name), "%s-%ld", prefix, sent);
            size_t ql = build(q, (uint16_t) sent, name, 1);
            if (send(fd, q, ql, 0) < 0)
                break;
            sent++;
        }
        struct pollfd p = { fd, POLLIN, 0 };
        if (poll(&p, 1, 2000) <= 0)
            break; /* the rest were lost */
        uint8_t r[1500];
        ssize_t n = recv(fd, r, sizeof(r), 0);
        if (n >= 4) {
            answered++;
            nx += (r[3] & 0xf) == 3;
            sf += (r[3] & 0xf) == 2;
            last = now_ms();
        }
    }
    printf("sent %ld answered %ld nxdomain %ld servfail %ld ms=%ld\n", sent, answered, nx, sf,
           last - t0);
    return 0;
}

/* count TCP connects to ADDR, each to its own port from FIRST on (so no two
 * denials are identical and none is folded): how many were refused. */
static int connflood(const char *addr, long count, long first)
{
    struct sockaddr_in to = { .sin_family = AF_INET };
    inet_pton(AF_INET, addr, &to.sin_addr);
    long t0 = now_ms(), refused = 0, other = 0;
    for (long i = 0; i < count; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0)
            return 1;
        to.sin_port = htons((uint16_t) (first + i % 60000));
        if (connect(fd, (struct sockaddr *) &to, sizeof(to)) < 0 && errno == ECONNREFUSED)
            refused++;
        else
            other++;
        close(fd);
    }
    printf("connects %ld refused %ld other %ld ms=%ld\n", count, refused, other, now_ms() - t0);
    return 0;
}

static int latency(const char *server, const char *name, long count)
{
    struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(53) };
    inet_pton(AF_INET, server, &to.sin_addr);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct timeval tv = { 5, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *) &to, sizeof(to)) < 0)
        return 1;
    for (long i = 0; i < count; i++) {
        uint8_t q[600], r[1500];
        size_t ql = build(q, (uint16_t) (i + 1), name, 1);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (send(fd, q, ql, 0) < 0)
            return 1;
        ssize_t n;
        do
            n = recv(fd, r, sizeof(r), 0);
        while (n >= 2 && (r[0] << 8 | r[1]) != (int) (i + 1)); /* a late answer to a lost one */
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (n < 12) {
            printf("LOST\n");
            continue;
        }
        long us = (t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000L;
        printf("LAT %ld %u %u\n", us, r[3] & 0xf, (unsigned) (r[6] << 8 | r[7]));
    }
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 5 && strcmp(argv[1], "q") == 0)
        return query(argv[2], argv[3], (uint16_t) atoi(argv[4]), argc > 5);
    if (argc == 5 && strcmp(argv[1], "lat") == 0)
        return latency(argv[2], argv[3], atol(argv[4]));
    if (argc == 5 && strcmp(argv[1], "flood") == 0)
        return flood(argv[2], atol(argv[3]), argv[4]);
    if (argc == 5 && strcmp(argv[1], "connflood") == 0)
        return connflood(argv[2], atol(argv[3]), atol(argv[4]));
    fprintf(stderr, "usage: dns_probe q SERVER NAME TYPE [tcp] | flood SERVER COUNT PREFIX | "
                    "lat SERVER NAME COUNT | connflood ADDR COUNT FIRSTPORT\n");
    return 2;
}
