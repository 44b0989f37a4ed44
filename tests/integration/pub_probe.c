/* SPDX-License-Identifier: Apache-2.0
 *
 * Test helper for test_publish.py and test_security_pub.py, built static by
 * the tests and run inside the sandbox. Every socket wait is a poll(2):
 * runsc 2022's host networking fails blocking reads that must wait
 * (docs/network.md), so no call here blocks in the kernel.
 *
 *   pub_probe serve PORT MARK   listen on 0.0.0.0:PORT; each connection's first
 *                               line L is answered "MARK L" and a half-close;
 *                               prints "GOT L" per request (the host reads it
 *                               from the session's stdout)
 *   pub_probe flood PORT        accept and write without end, never read
 *   pub_probe hold PORT         accept, never read or write; prints "HELD n"
 *   pub_probe connect ADDR PORT TOKEN
 *                               connect (3 s), send TOKEN, wait 2 s for an
 *                               answer; prints "CONNECT ADDR:PORT OK <answer>"
 *                               or "CONNECT ADDR:PORT ERR <errno>"
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAXC 512

static int listen_on(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port) };
    if (fd < 0 || bind(fd, (struct sockaddr *) &a, sizeof(a)) < 0 || listen(fd, 128) < 0) {
        printf("LISTEN ERR %d\n", errno);
        exit(1);
    }
    printf("LISTENING %d\n", port);
    fflush(stdout);
    return fd;
}

typedef struct conn {
    int fd;
    char line[256];
    size_t len;
    int state; /* 0 reading the request, 1 answered */
} conn;

static int serve(int port, const char *mark)
{
    int l = listen_on(port);
    static conn c[MAXC];
    for (int i = 0; i < MAXC; i++)
        c[i].fd = -1;
    for (;;) {
        struct pollfd p[MAXC + 1];
        p[0] = (struct pollfd){ .fd = l, .events = POLLIN };
        for (int i = 0; i < MAXC; i++)
            p[i + 1] = (struct pollfd){ .fd = c[i].fd, .events = POLLIN };
        if (poll(p, MAXC + 1, -1) < 0)
            continue;
        if (p[0].revents & POLLIN) {
            int fd = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            for (int i = 0; fd >= 0 && i < MAXC; i++)
                if (c[i].fd < 0) {
                    c[i] = (conn){ .fd = fd };
                    fd = -1;
                }
            if (fd >= 0)
                close(fd);
        }
        for (int i = 0; i < MAXC; i++) {
            if (c[i].fd < 0 || !p[i + 1].revents)
                continue;
            char buf[4096];
            ssize_t n = read(c[i].fd, buf, sizeof(buf));
            if (n < 0 && errno == EAGAIN)
                continue;
            if (n <= 0) {
                close(c[i].fd);
                c[i].fd = -1;
                continue;
            }
            if (c[i].state)
                continue;
            for (ssize_t k = 0; k < n && c[i].len < sizeof(c[i].line) - 1; k++) {
                if (buf[k] == '\n') {
                    c[i].line[c[i].len] = '\0';
                    printf("GOT %s\n", c[i].line);
                    fflush(stdout);
                    char out[512];
                    int m = snprintf(out, sizeof(out), "%s %s\n", mark, c[i].line);
                    if (write(c[i].fd, out, (size_t) m) < 0) {
                        /* the peer is gone: the next read says so */
                    }
                    shutdown(c[i].fd, SHUT_WR);
                    c[i].state = 1;
                    break;
                }
                c[i].line[c[i].len++] = buf[k];
            }
        }
    }
}

static int flood(int port)
{
    int l = listen_on(port);
    static int fds[MAXC];
    int n = 0;
    static char junk[65536];
    memset(junk, 'x', sizeof(junk));
    for (;;) {
        struct pollfd p[MAXC + 1];
        p[0] = (struct pollfd){ .fd = l, .events = POLLIN };
        for (int i = 0; i < n; i++)
            p[i + 1] = (struct pollfd){ .fd = fds[i], .events = POLLOUT };
        if (poll(p, (nfds_t) n + 1, -1) < 0)
            continue;
        if ((p[0].revents & POLLIN) && n < MAXC) {
            int fd = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd >= 0)
                fds[n++] = fd;
        }
        for (int i = 0; i < n; i++)
            if (p[i + 1].revents & POLLOUT)
                (void) !write(fds[i], junk, sizeof(junk));
    }
}

static int hold(int port)
{
    int l = listen_on(port);
    int n = 0;
    for (;;) {
        struct pollfd p = { .fd = l, .events = POLLIN };
        if (poll(&p, 1, -1) < 0)
            continue;
        int fd = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            printf("HELD %d\n", ++n);
            fflush(stdout);
        }
    }
}

static int do_connect(const char *addr, int port, const char *token)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port) };
    inet_pton(AF_INET, addr, &a.sin_addr);
    int r = connect(fd, (struct sockaddr *) &a, sizeof(a));
    int e = errno;
    if (r < 0 && e == EINPROGRESS) {
        struct pollfd p = { .fd = fd, .events = POLLOUT };
        r = poll(&p, 1, 3000);
        socklen_t sl = sizeof(e);
        if (r == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl) == 0 && e == 0)
            r = 0;
        else
            r = -1, e = r == 0 ? ETIMEDOUT : e;
    }
    if (r < 0) {
        printf("CONNECT %s:%d ERR %d\n", addr, port, e);
        return 0;
    }
    char out[300];
    int m = snprintf(out, sizeof(out), "%s\n", token);
    (void) !write(fd, out, (size_t) m);
    char got[512] = "";
    size_t len = 0;
    for (;;) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, 2000) != 1)
            break;
        ssize_t n = read(fd, got + len, sizeof(got) - 1 - len);
        if (n <= 0)
            break;
        len += (size_t) n;
        if (len == sizeof(got) - 1)
            break;
    }
    got[len] = '\0';
    for (size_t i = 0; i < len; i++)
        if (got[i] == '\n')
            got[i] = ' ';
    printf("CONNECT %s:%d OK %s\n", addr, port, got);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 4 && strcmp(argv[1], "serve") == 0)
        return serve(atoi(argv[2]), argv[3]);
    if (argc == 3 && strcmp(argv[1], "flood") == 0)
        return flood(atoi(argv[2]));
    if (argc == 3 && strcmp(argv[1], "hold") == 0)
        return hold(atoi(argv[2]));
    if (argc == 5 && strcmp(argv[1], "connect") == 0)
        return do_connect(argv[2], atoi(argv[3]), argv[4]);
    fprintf(stderr, "usage: pub_probe serve|flood|hold PORT [MARK] | connect ADDR PORT TOKEN\n");
    return 2;
}
