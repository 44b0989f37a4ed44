/* SPDX-License-Identifier: Apache-2.0
 *
 * The --publish forwarder (src/supervisor/forward.h), on loopback: the
 * relay runs in a forked child with a listening socket, towards a target
 * server of the test's; its confinement in another child; one relayed
 * connection with a gate on the client's bytes (lz_relay_gate: how
 * lz-namecheck checks HTTP request by request), with the ungated control.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "supervisor/forward.h"

static int listen_lo(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(bind(fd, (struct sockaddr *) &a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 128), 0);
    socklen_t l = sizeof(a);
    getsockname(fd, (struct sockaddr *) &a, &l);
    *port = ntohs(a.sin_port);
    return fd;
}

static int connect_lo(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(connect(fd, (struct sockaddr *) &a, sizeof(a)), 0);
    struct timeval tv = { 5, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

/* A forwarder from a new listening socket to 127.0.0.1:target. */
static pid_t start_forwarder(uint16_t target, uint16_t *ret_port)
{
    int l = listen_lo(ret_port);
    int fl = fcntl(l, F_GETFL);
    fcntl(l, F_SETFL, fl | O_NONBLOCK); /* as the coordinator makes it */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        struct sockaddr_in t = { .sin_family = AF_INET,
                                 .sin_port = htons(target),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        _exit(lz_forward_run(l, &t));
    }
    close(l);
    return pid;
}

static void stop_forwarder(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static ssize_t read_all(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0)
            return -errno;
        if (r == 0)
            return (ssize_t) n;
        n += (size_t) r;
        if (n == cap)
            return (ssize_t) n;
    }
}

/* Bytes both ways; the target's half-close reaches the client, whose own
 * direction still works afterwards; the client's half-close reaches the
 * target. */
static void test_relay_and_half_close(void **state)
{
    (void) state;
    uint16_t tport, fport;
    int target = listen_lo(&tport);
    pid_t fw = start_forwarder(tport, &fport);
    int c = connect_lo(fport);
    int s = accept4(target, NULL, NULL, SOCK_CLOEXEC);
    assert_true(s >= 0);
    assert_int_equal(write(c, "ping\n", 5), 5);
    char buf[64];
    assert_int_equal(read(s, buf, sizeof(buf)), 5);
    assert_memory_equal(buf, "ping\n", 5);
    assert_int_equal(write(s, "pong\n", 5), 5);
    shutdown(s, SHUT_WR);
    assert_int_equal(read_all(c, buf, sizeof(buf)), 5); /* then end of stream */
    assert_memory_equal(buf, "pong\n", 5);
    assert_int_equal(write(c, "more\n", 5), 5); /* still open towards the target */
    assert_int_equal(read(s, buf, sizeof(buf)), 5);
    shutdown(c, SHUT_WR);
    assert_int_equal(read(s, buf, sizeof(buf)), 0);
    close(s);
    close(c);
    stop_forwarder(fw);
    close(target);
}

/* Nothing listens on the target: the client is reset, not left waiting. */
static void test_refused_target_resets_the_client(void **state)
{
    (void) state;
    uint16_t tport, fport;
    int target = listen_lo(&tport);
    close(target); /* the port is free now: a connect there is refused */
    pid_t fw = start_forwarder(tport, &fport);
    int c = connect_lo(fport);
    char buf[8];
    ssize_t r = read(c, buf, sizeof(buf));
    assert_true(r == 0 || (r < 0 && errno == ECONNRESET));
    close(c);
    stop_forwarder(fw);
}

/* At most LZ_FORWARD_MAX_CONNS connections reach the target at once; a
 * freed slot lets the next in. */
static void test_connection_limit(void **state)
{
    (void) state;
    uint16_t tport, fport;
    int target = listen_lo(&tport);
    pid_t fw = start_forwarder(tport, &fport);
    enum { N = LZ_FORWARD_MAX_CONNS + 8 };
    int c[N], s[N];
    for (int i = 0; i < N; i++)
        c[i] = connect_lo(fport);
    int got = 0;
    for (;;) {
        struct pollfd p = { .fd = target, .events = POLLIN };
        if (poll(&p, 1, 1000) != 1)
            break;
        s[got++] = accept4(target, NULL, NULL, SOCK_CLOEXEC);
        assert_true(got <= N);
    }
    assert_int_equal(got, LZ_FORWARD_MAX_CONNS);
    /* One ends from both sides: its slot frees, one more gets through. */
    close(c[0]);
    close(s[0]);
    struct pollfd p = { .fd = target, .events = POLLIN };
    assert_int_equal(poll(&p, 1, 5000), 1);
    int extra = accept4(target, NULL, NULL, SOCK_CLOEXEC);
    assert_true(extra >= 0);
    close(extra);
    for (int i = 1; i < N; i++)
        close(c[i]);
    for (int i = 1; i < got; i++)
        close(s[i]);
    stop_forwarder(fw);
    close(target);
}

/* ---- a gate on the client's bytes (lz_relay_gate, lz-namecheck's HTTP) -- */

#define NO_GATE UINT64_MAX

/* One relayed connection in a child, as lz-namecheck runs it: "abc" was
 * already read from the client (first), the gate opens for limit bytes in
 * all (NO_GATE: lz_relay_gate is not called, as for --publish). Once the
 * gate shuts, the child is the owner: it reads the client's next bytes
 * and admits those that begin with 'Y' (their length in all), ends the
 * connection with a reset on bytes that begin with anything else (exit
 * 2), and passes the client's end on. Exit 0 on any other end. */
static pid_t start_relay(uint16_t target, uint64_t limit, uint16_t *ret_port)
{
    int l = listen_lo(ret_port);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid != 0) {
        close(l);
        return pid;
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int a = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    int b = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in t = { .sin_family = AF_INET,
                             .sin_port = htons(target),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int r = connect(b, (struct sockaddr *) &t, sizeof(t));
    if (a < 0 || b < 0 || (r < 0 && errno != EINPROGRESS))
        _exit(1);
    lz_relay relay;
    if (lz_relay_init(&relay, a, b, r < 0, lz_relay_now_ms(), "abc", 3) < 0)
        _exit(1);
    if (limit != NO_GATE && lz_relay_gate(&relay, limit) < 0)
        _exit(1);
    for (;;) {
        int64_t wait = -1;
        short ea, eb;
        lz_relay_events(&relay, lz_relay_now_ms(), &ea, &eb, &wait);
        bool owner = lz_relay_gate_shut(&relay);
        if (owner)
            ea |= POLLIN;
        struct pollfd p[2] = { { .fd = ea ? relay.a : -1, .events = ea },
                               { .fd = eb ? relay.b : -1, .events = eb } };
        poll(p, 2, wait < 0 ? -1 : (int) wait);
        int64_t now = lz_relay_now_ms();
        if (!lz_relay_step(&relay, p[0].revents, p[1].revents, now))
            _exit(0);
        if (!owner || !lz_relay_gate_shut(&relay) || !(p[0].revents & (POLLIN | POLLHUP)))
            continue;
        char next[64];
        ssize_t n = recv(relay.a, next, sizeof(next), 0);
        if (n == 0)
            lz_relay_a_ended(&relay, now);
        else if (n > 0 && next[0] == 'Y' &&
                 lz_relay_admit(&relay, next, (size_t) n, (size_t) n) < 0)
            _exit(1);
        else if (n > 0 && next[0] != 'Y') {
            lz_relay_end(&relay, true);
            _exit(2);
        }
    }
}

static int relay_status(pid_t pid)
{
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* Read what comes until the peer's end or reset: the bytes in buf, the
 * return: 0 for an end of stream, -ECONNRESET for a reset. */
static ssize_t read_until_end(int fd, char *buf, size_t cap, size_t *got)
{
    *got = 0;
    for (;;) {
        ssize_t r = read(fd, buf + *got, cap - *got);
        if (r <= 0)
            return r < 0 ? -errno : 0;
        *got += (size_t) r;
        assert_true(*got < cap);
    }
}

static void read_exactly(int fd, char *buf, size_t want)
{
    size_t got = 0;
    while (got < want) {
        ssize_t r = read(fd, buf + got, want - got);
        assert_true(r > 0);
        got += (size_t) r;
    }
}

/* The client's bytes up to the gate reach the server, whose answer reaches
 * the client; the client's next bytes are the owner's: admitted ones go on
 * (the connection stays), refused ones never reach the server and reset
 * both sides. Control: without a gate the same bytes reach the server. */
static void test_gate_holds_the_next_request(void **state)
{
    (void) state;
    for (int gated = 1; gated >= 0; gated--) {
        uint16_t tport, rport;
        int target = listen_lo(&tport);
        pid_t rl = start_relay(tport, gated ? 8 : NO_GATE, &rport);
        int c = connect_lo(rport);
        int s = accept4(target, NULL, NULL, SOCK_CLOEXEC);
        assert_true(s >= 0);
        struct timeval tv = { 5, 0 };
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        assert_int_equal(write(c, "defgh", 5), 5);
        char buf[64];
        read_exactly(s, buf, 8);
        assert_memory_equal(buf, "abcdefgh", 8);
        assert_int_equal(write(s, "answer", 6), 6);
        read_exactly(c, buf, 6);
        assert_memory_equal(buf, "answer", 6);
        assert_int_equal(write(c, "Y1", 2), 2); /* the next request, admitted */
        read_exactly(s, buf, 2);
        assert_memory_equal(buf, "Y1", 2);
        assert_int_equal(write(c, "X", 1), 1); /* the next one, refused when gated */
        size_t got = 0;
        if (gated) {
            assert_int_equal(read_until_end(s, buf, sizeof(buf), &got), -ECONNRESET);
            assert_int_equal(got, 0);
            assert_int_equal(read_until_end(c, buf, sizeof(buf), &got), -ECONNRESET);
            assert_int_equal(relay_status(rl), 2);
        } else {
            read_exactly(s, buf, 1);
            assert_int_equal(buf[0], 'X');
            close(c);
            close(s);
            assert_int_equal(relay_status(rl), 0);
        }
        if (gated) {
            close(c);
            close(s);
        }
        close(target);
    }
}

/* Bytes beyond the gate in the same write as bytes within it: the relay
 * takes only those within, the rest is the owner's (here refused: the
 * server got exactly the gate's bytes, then a reset). The client's
 * half-close once the gate shut is an ordinary end: passed on, and the
 * server's answer still comes back. */
static void test_gate_edges(void **state)
{
    (void) state;
    uint16_t tport, rport;
    int target = listen_lo(&tport);
    pid_t rl = start_relay(tport, 5, &rport);
    int c = connect_lo(rport);
    int s = accept4(target, NULL, NULL, SOCK_CLOEXEC);
    struct timeval tv = { 5, 0 };
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    assert_int_equal(write(c,
                           "de"
                           "XYZ",
                           5),
                     5);
    char buf[64];
    size_t got = 0;
    assert_int_equal(read_until_end(s, buf, sizeof(buf), &got), -ECONNRESET);
    assert_int_equal(got, 5); /* "abc", queued before, and "de": nothing of "XYZ" */
    assert_memory_equal(buf, "abcde", 5);
    assert_int_equal(relay_status(rl), 2);
    close(c);
    close(s);

    rl = start_relay(tport, 5, &rport);
    c = connect_lo(rport);
    s = accept4(target, NULL, NULL, SOCK_CLOEXEC);
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    assert_int_equal(write(c, "de", 2), 2);
    read_exactly(s, buf, 5);
    shutdown(c, SHUT_WR);
    assert_int_equal(read_until_end(s, buf, sizeof(buf), &got), 0);
    assert_int_equal(got, 0);
    assert_int_equal(write(s, "answer", 6), 6);
    shutdown(s, SHUT_WR);
    assert_int_equal(read_until_end(c, buf, sizeof(buf), &got), 0);
    assert_int_equal(got, 6);
    assert_int_equal(relay_status(rl), 0);
    close(c);
    close(s);
    close(target);

    /* a gate smaller than what was already read is refused */
    lz_relay r;
    assert_int_equal(lz_relay_init(&r, -1, -1, false, 0, "abc", 3), 0);
    assert_int_equal(lz_relay_gate(&r, 2), -1);
    assert_false(r.ab_gated);
    assert_int_equal(lz_relay_gate(&r, 3), 0);
    assert_true(lz_relay_gate_shut(&r));
    /* admitted bytes open it again for their extent */
    assert_int_equal(lz_relay_admit(&r, "Yz", 2, 10), 0);
    assert_false(lz_relay_gate_shut(&r));
    assert_int_equal(r.ab_left, 8);
    assert_int_equal(lz_relay_admit(&r, "Y", 1, 0), -1); /* total below len */
    lz_relay_end(&r, false);
}

/* A target that writes without end to a client that does not read: the
 * forwarder stops reading it (flow control), so what the target managed to
 * write is bounded by the kernel buffers plus LZ_FORWARD_BUF. Control: the
 * same target writes far more to a client that reads. */
static size_t flood_for(int s, int ms)
{
    fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK);
    static char junk[65536];
    size_t total = 0;
    for (int t = 0; t < ms / 10; t++) {
        struct pollfd p = { .fd = s, .events = POLLOUT };
        if (poll(&p, 1, 10) != 1)
            continue;
        ssize_t w;
        while ((w = write(s, junk, sizeof(junk))) > 0)
            total += (size_t) w;
    }
    return total;
}

static void test_flow_control(void **state)
{
    (void) state;
    uint16_t tport, fport;
    int target = listen_lo(&tport);
    pid_t fw = start_forwarder(tport, &fport);
    int c = connect_lo(fport);
    int s = accept4(target, NULL, NULL, SOCK_CLOEXEC);
    int sz = 65536;
    setsockopt(s, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
    setsockopt(c, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
    size_t stalled = flood_for(s, 1000);
    /* Kernel buffers on two connections (a few MiB on loopback) plus the
     * forwarder's own: without flow control the forwarder would take as
     * much as a reading client does (the control below). */
    assert_true(stalled < (size_t) 16 << 20);
    pid_t reader = fork();
    if (reader == 0) {
        char buf[65536];
        for (;;)
            if (read(c, buf, sizeof(buf)) <= 0)
                _exit(0);
    }
    size_t flowing = flood_for(s, 3000);
    kill(reader, SIGKILL);
    waitpid(reader, NULL, 0);
    printf("# stalled: %zu bytes, flowing: %zu bytes\n", stalled, flowing);
    assert_true(flowing > 2 * stalled && flowing > (size_t) 8 << 20);
    close(s);
    close(c);
    stop_forwarder(fw);
    close(target);
}

/* After lz_forward_confine: no file can be opened, no process signalled,
 * nothing bound, no capability left, no new privileges; TCP sockets still
 * connect. Control: before it, the same calls succeed. */
static void test_confinement(void **state)
{
    (void) state;
    uint16_t tport;
    int target = listen_lo(&tport);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int code = 0;
        int f = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (f < 0)
            _exit(10); /* control */
        close(f);
        if (lz_forward_confine() < 0)
            _exit(11);
        if (open("/dev/null", O_RDONLY | O_CLOEXEC) >= 0 || errno != EPERM)
            code |= 1;
        if (kill(getppid(), 0) == 0 || errno != EPERM)
            code |= 2;
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = { .sin_family = AF_INET,
                                 .sin_port = htons(tport),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        if (s < 0 || connect(s, (struct sockaddr *) &a, sizeof(a)) < 0)
            code |= 4;
        struct sockaddr_in any = { .sin_family = AF_INET };
        int b = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (b >= 0 && bind(b, (struct sockaddr *) &any, sizeof(any)) == 0)
            code |= 8;
        struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
        struct __user_cap_data_struct d[2];
        if (syscall(SYS_capget, &h, d) == 0 || errno != EPERM)
            code |= 16; /* capget is not in the list either */
        if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1)
            code |= 32; /* prctl is refused: -1 */
        _exit(code);
    }
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    close(target);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relay_and_half_close),
        cmocka_unit_test(test_refused_target_resets_the_client),
        cmocka_unit_test(test_connection_limit),
        cmocka_unit_test(test_flow_control),
        cmocka_unit_test(test_gate_holds_the_next_request),
        cmocka_unit_test(test_gate_edges),
        cmocka_unit_test(test_confinement),
    };
    return cmocka_run_group_tests_name("test_forward", tests, NULL, NULL);
}
