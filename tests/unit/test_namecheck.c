/* SPDX-License-Identifier: Apache-2.0
 *
 * The name check (src/supervisor/namecheck.h): the decision on crafted
 * first bytes, the destination's re-check, and the relay itself, confined
 * as lz-namecheck is, in a network namespace of the test's own where an
 * nftables `redirect` plays the router's part: clients that connect to
 * 203.0.113.9 (from source ports 20000-20999) are redirected to the name
 * check, and the name check's own connections to that address reach the
 * test's servers on the namespace's loopback (dnat).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <linux/rtnetlink.h>

#include "supervisor/forward.h"
#include "supervisor/namecheck.h"
#include "supervisor/sidecar_internal.h"

/* ---- crafted first bytes ----------------------------------------------- */

typedef struct bytes {
    unsigned char b[4096];
    size_t n;
} bytes;

static void put8(bytes *o, unsigned v)
{
    o->b[o->n++] = (unsigned char) v;
}

static void put16(bytes *o, size_t v)
{
    put8(o, (unsigned) (v >> 8) & 0xff);
    put8(o, (unsigned) v & 0xff);
}

static void put(bytes *o, const void *p, size_t n)
{
    memcpy(o->b + o->n, p, n);
    o->n += n;
}

static bytes text(const char *t)
{
    bytes o = { .n = 0 };
    put(&o, t, strlen(t));
    return o;
}

/* A ClientHello as a TLS 1.3 client sends it: server_name when sni is not
 * NULL, an (outer) encrypted_client_hello extension when ech, a key share
 * padded to pad bytes (post-quantum shares make hellos span several
 * segments), cut into handshake records of at most rec_max bytes each. */
static bytes client_hello(const char *sni, bool ech, size_t pad, size_t rec_max)
{
    bytes h = { .n = 0 };
    put8(&h, 1); /* client_hello */
    put8(&h, 0);
    put16(&h, 0); /* length, below */
    put16(&h, 0x0303);
    for (int i = 0; i < 32; i++)
        put8(&h, 0x5a);
    put8(&h, 0); /* legacy_session_id */
    put16(&h, 2);
    put16(&h, 0x1301);
    put8(&h, 1);
    put8(&h, 0);
    size_t ext_at = h.n;
    put16(&h, 0);
    if (sni) {
        size_t l = strlen(sni);
        put16(&h, 0x0000);
        put16(&h, l + 5);
        put16(&h, l + 3);
        put8(&h, 0); /* host_name */
        put16(&h, l);
        put(&h, sni, l);
    }
    put16(&h, 0x002b); /* supported_versions: TLS 1.3 */
    put16(&h, 3);
    put8(&h, 2);
    put16(&h, 0x0304);
    if (ech) {
        put16(&h, 0xfe0d); /* encrypted_client_hello, outer */
        put16(&h, 1 + 4 + 1 + 2 + 32 + 2 + 16);
        put8(&h, 0);
        put16(&h, 0x0001);
        put16(&h, 0x0001);
        put8(&h, 0x42);
        put16(&h, 32);
        for (int i = 0; i < 32; i++)
            put8(&h, 0x33);
        put16(&h, 16);
        for (int i = 0; i < 16; i++)
            put8(&h, 0x44);
    }
    if (pad) {
        put16(&h, 0x0033); /* key_share: one opaque share of pad bytes */
        put16(&h, pad + 6);
        put16(&h, pad + 4);
        put16(&h, 0x11ec);
        put16(&h, pad);
        for (size_t i = 0; i < pad; i++)
            put8(&h, 0x77);
    }
    size_t ext_len = h.n - ext_at - 2;
    h.b[ext_at] = (unsigned char) (ext_len >> 8);
    h.b[ext_at + 1] = (unsigned char) ext_len;
    size_t body = h.n - 4;
    h.b[1] = (unsigned char) (body >> 16);
    h.b[2] = (unsigned char) (body >> 8);
    h.b[3] = (unsigned char) body;
    bytes out = { .n = 0 };
    for (size_t off = 0; off < h.n;) {
        size_t take = h.n - off < rec_max ? h.n - off : rec_max;
        put8(&out, 22); /* handshake */
        put16(&out, 0x0301);
        put16(&out, take);
        put(&out, h.b + off, take);
        off += take;
    }
    return out;
}

/* A TLS 1.3 ServerHello (retry: a HelloRetryRequest, RFC 8446's random)
 * in one record. */
static bytes server_hello(bool retry)
{
    static const unsigned char hrr_random[32] = {
        0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c,
        0x02, 0x1e, 0x65, 0xb8, 0x91, 0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb,
        0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
    };
    bytes o = { .n = 0 };
    put8(&o, 22);
    put16(&o, 0x0303);
    put16(&o, 4 + 46);
    put8(&o, 2); /* server_hello */
    put8(&o, 0);
    put16(&o, 46);
    put16(&o, 0x0303);
    if (retry)
        put(&o, hrr_random, 32);
    else
        for (int i = 0; i < 32; i++)
            put8(&o, 0x6b);
    put8(&o, 0); /* legacy_session_id_echo */
    put16(&o, 0x1301);
    put8(&o, 0);
    put16(&o, 6);
    put16(&o, 0x002b); /* supported_versions: TLS 1.3 */
    put16(&o, 2);
    put16(&o, 0x0304);
    return o;
}

static const unsigned char CCS[6] = { 20, 3, 3, 0, 1, 1 };

static bytes http_request(const char *host)
{
    bytes o = { .n = 0 };
    o.n = (size_t) snprintf((char *) o.b, sizeof(o.b),
                            "GET / HTTP/1.1\r\nHost: %s\r\nUser-Agent: t\r\n\r\n", host);
    return o;
}

/* ---- the configuration ------------------------------------------------- */

static lz_resolved_config cfg;

static void add_pattern(lz_host_list *l, const char *s)
{
    lz_host_pattern p;
    const char *why = NULL;
    assert_true(lz_host_pattern_parse(s, &p, &why));
    lz_host_list_add(l, &p);
    lz_host_pattern_clear(&p);
}

static void cfg_init(void)
{
    memset(&cfg, 0, sizeof(cfg));
    add_pattern(&cfg.allow_hosts, "api.allowed.test");
    add_pattern(&cfg.allow_hosts, "*.wild.test");
    add_pattern(&cfg.deny_hosts, "bad.wild.test");
}

/* ---- the decision ------------------------------------------------------ */

static lz_namecheck_verdict decide(uint16_t port, const bytes *b, bool complete, char *name,
                                   int *why)
{
    return lz_namecheck_decide(&cfg.allow_hosts, &cfg.deny_hosts, false, port, b->b, b->n, complete,
                               name, why);
}

static void test_decide_tls(void **state)
{
    (void) state;
    char name[LZ_HOST_NAME_MAX + 1];
    int why;
    bytes ok = client_hello("api.allowed.test", false, 0, 16384);
    assert_int_equal(decide(443, &ok, false, name, &why), LZ_NAMECHECK_PASS);
    assert_string_equal(name, "api.allowed.test");
    /* Canonical form: case and one trailing dot do not matter. */
    bytes upper = client_hello("API.Allowed.Test.", false, 0, 16384);
    assert_int_equal(decide(443, &upper, false, name, &why), LZ_NAMECHECK_PASS);
    assert_string_equal(name, "api.allowed.test");
    bytes wild = client_hello("x.wild.test", false, 0, 16384);
    assert_int_equal(decide(443, &wild, false, name, &why), LZ_NAMECHECK_PASS);

    bytes other = client_hello("evil.test", false, 0, 16384);
    assert_int_equal(decide(443, &other, false, name, &why), LZ_NAMECHECK_REFUSE);
    assert_int_equal(why, SC_NAME_WHY_NOT_ALLOWED);
    assert_string_equal(name, "evil.test");
    /* The parent of a wildcard, and a denied name below an allowed one. */
    bytes parent = client_hello("wild.test", false, 0, 16384);
    assert_int_equal(decide(443, &parent, false, name, &why), LZ_NAMECHECK_REFUSE);
    bytes denied = client_hello("bad.wild.test", false, 0, 16384);
    assert_int_equal(decide(443, &denied, false, name, &why), LZ_NAMECHECK_REFUSE);
    assert_int_equal(why, SC_NAME_WHY_NOT_ALLOWED);

    bytes none = client_hello(NULL, false, 0, 16384);
    assert_int_equal(decide(443, &none, false, name, &why), LZ_NAMECHECK_REFUSE);
    assert_int_equal(why, SC_NAME_WHY_NO_NAME);
    /* ECH: the outer name is allowed, the real one is hidden. */
    bytes ech = client_hello("api.allowed.test", true, 0, 16384);
    assert_int_equal(decide(443, &ech, false, name, &why), LZ_NAMECHECK_REFUSE);
    assert_int_equal(why, SC_NAME_WHY_ENCRYPTED);
    /* Not a host name of the grammar: nothing of it reaches the log. */
    bytes under = client_hello("a_b.allowed.test", false, 0, 16384);
    assert_int_equal(decide(443, &under, false, name, &why), LZ_NAMECHECK_REFUSE);
    assert_int_equal(why, SC_NAME_WHY_INVALID);
    assert_string_equal(name, "");
}

static void test_decide_prefixes_and_bounds(void **state)
{
    (void) state;
    char name[LZ_HOST_NAME_MAX + 1];
    int why;
    /* A hello over several records, seen a piece at a time: more until the
     * name is there; cut off for good, invalid. */
    bytes frag = client_hello("api.allowed.test", false, 3000, 700);
    bytes part = frag;
    part.n = 20;
    assert_int_equal(decide(443, &part, false, name, &why), LZ_NAMECHECK_MORE);
    assert_int_equal(decide(443, &part, true, name, &why), LZ_NAMECHECK_REFUSE);
    assert_int_equal(why, SC_NAME_WHY_INVALID);
    assert_int_equal(decide(443, &frag, false, name, &why), LZ_NAMECHECK_PASS);

    bytes junk = { .n = 0 };
    put(&junk, "SSH-2.0-OpenSSH_9.6\r\n", 21);
    assert_int_equal(decide(443, &junk, false, name, &why), LZ_NAMECHECK_REFUSE);
    assert_int_equal(why, SC_NAME_WHY_INVALID);
    /* Only 80 and 443 are redirected: anything else is refused. */
    bytes ok = client_hello("api.allowed.test", false, 0, 16384);
    assert_int_equal(decide(8443, &ok, false, name, &why), LZ_NAMECHECK_REFUSE);
    assert_int_equal(why, SC_NAME_WHY_INVALID);
    /* TLS bytes to port 80 and HTTP to 443 are what they are: invalid. */
    assert_int_equal(decide(80, &ok, false, name, &why), LZ_NAMECHECK_REFUSE);
    bytes req = http_request("api.allowed.test");
    assert_int_equal(decide(443, &req, false, name, &why), LZ_NAMECHECK_REFUSE);

    /* A ClientHello whose random also reads as an HTTP request (attack
     * round a25d, F2): refused, on a learned and a prefix-allowed address;
     * control: the same hello with its random untouched passes. */
    bytes poly = client_hello("api.allowed.test", false, 0, 16384);
    assert_int_equal(decide(443, &poly, false, name, &why), LZ_NAMECHECK_PASS);
    static const char request[32] = " / HTTP/1.1\nHost:evil.test\n\n";
    memcpy(poly.b + 11, request, sizeof(request)); /* record 5, handshake 4, version 2 */
    assert_int_equal(decide(443, &poly, false, name, &why), LZ_NAMECHECK_REFUSE);
    assert_int_equal(why, SC_NAME_WHY_INVALID);
    assert_int_equal(lz_namecheck_decide(&cfg.allow_hosts, &cfg.deny_hosts, true, 443, poly.b,
                                         poly.n, false, name, &why),
                     LZ_NAMECHECK_REFUSE);
    bytes host_only = client_hello("api.allowed.test", false, 0, 16384);
    static const char header[32] = "\x01\nHOST :evil.test\n\n";
    memcpy(host_only.b + 11, header, sizeof(header));
    assert_int_equal(decide(443, &host_only, false, name, &why), LZ_NAMECHECK_REFUSE);
    bytes cr_host = client_hello("api.allowed.test", false, 0, 16384);
    static const char cr_header[32] = "\x01\rhost:evil.test\r\r";
    memcpy(cr_host.b + 11, cr_header, sizeof(cr_header));
    assert_int_equal(decide(443, &cr_host, false, name, &why), LZ_NAMECHECK_REFUSE);
}

/* A prefix-allowed destination (deny_hosts with an allow prefix): only a
 * name deny_hosts denies is refused; the strict decision (control) refuses
 * every one of the others. */
static lz_namecheck_verdict pdecide(uint16_t port, const bytes *b, bool complete, char *name,
                                    int *why)
{
    return lz_namecheck_decide(&cfg.allow_hosts, &cfg.deny_hosts, true, port, b->b, b->n, complete,
                               name, why);
}

static void test_decide_prefix_allowed(void **state)
{
    (void) state;
    char name[LZ_HOST_NAME_MAX + 1];
    int why;
    bytes denied = client_hello("Bad.Wild.Test.", false, 0, 16384);
    assert_int_equal(pdecide(443, &denied, false, name, &why), LZ_NAMECHECK_REFUSE);
    assert_int_equal(why, SC_NAME_WHY_NOT_ALLOWED);
    assert_string_equal(name, "bad.wild.test");
    bytes denied_http = http_request("bad.wild.test:80");
    assert_int_equal(pdecide(80, &denied_http, false, name, &why), LZ_NAMECHECK_REFUSE);
    assert_string_equal(name, "bad.wild.test");
    /* Still read to the name: a prefix of a hello is not decided early. */
    bytes frag = client_hello("bad.wild.test", false, 3000, 700);
    bytes part = frag;
    part.n = 20;
    assert_int_equal(pdecide(443, &part, false, name, &why), LZ_NAMECHECK_MORE);
    assert_int_equal(pdecide(443, &frag, false, name, &why), LZ_NAMECHECK_REFUSE);

    /* Pass here, refused by the strict decision (the control): a name that
     * is not denied, no name (an address's own site), an address as Host. */
    bytes other = client_hello("evil.test", false, 0, 16384);
    bytes nosni = client_hello(NULL, false, 0, 16384);
    bytes junk = text("SSH-2.0-OpenSSH_9.6p1 Debian-2\r\n");
    bytes nohost = text("GET / HTTP/1.0\r\n\r\n");
    bytes literal = http_request("198.51.100.7");
    bytes allowed = client_hello("api.allowed.test", false, 0, 16384);
    const struct {
        uint16_t port;
        const bytes *b;
    } pass[] = {
        { 443, &other }, { 443, &nosni }, { 80, &nohost }, { 443, &literal }, { 443, &allowed }
    };
    for (size_t i = 0; i < sizeof(pass) / sizeof(pass[0]); i++) {
        assert_int_equal(pdecide(pass[i].port, pass[i].b, false, name, &why), LZ_NAMECHECK_PASS);
        assert_int_equal(why, 0);
        lz_namecheck_verdict strict = decide(pass[i].port, pass[i].b, false, name, &why);
        assert_int_equal(strict, i + 1 < sizeof(pass) / sizeof(pass[0]) ? LZ_NAMECHECK_REFUSE
                                                                        : LZ_NAMECHECK_PASS);
    }

    /* Refused here too (attack round a25b, F2): what hides or blurs the
     * name — an encrypted hello, a hello or request not whole within the
     * bounds or the time, a name that is no host name, two Host headers, an
     * absolute URI, the lenient forms some servers take (leading white
     * space, a lowercase method), silence — and TLS on port 80 / HTTP on
     * port 443 are read as what they are. */
    bytes ech = client_hello("api.allowed.test", true, 0, 16384);
    bytes twohosts = text("GET / HTTP/1.1\r\nHost: bad.wild.test\r\nHost: x.test\r\n\r\n");
    bytes absolute = text("GET http://bad.wild.test/ HTTP/1.1\r\nHost: x.test\r\n\r\n");
    bytes lenient = text(" get / HTTP/1.1\r\nHost: x.test\r\n\r\n");
    bytes lower = text("get / HTTP/1.1\r\nHost: bad.wild.test\r\n\r\n");
    bytes blurred = http_request("x@bad.wild.test");
    bytes crlf_denied = text("\r\nGET / HTTP/1.1\r\nHost: bad.wild.test\r\n\r\n");
    /* Request forms real servers accept and a looser recognition relayed
     * unchecked (attack round a25c, F1): refused whatever their Host. */
    bytes no_slash = text("GET c01 HTTP/1.1\r\nHost: x.test\r\n\r\n");
    bytes vtab = text("GET\x0b/ HTTP/1.1\r\nHost: x.test\r\n\r\n");
    bytes scheme = text("GET x://bad.wild.test/ HTTP/1.1\r\nHost: x.test\r\n\r\n");
    bytes long_method = text("ABCDEFGHIJABCDEFGHIJABCDEFGHIJABCDEFGHIJ / HTTP/1.1\r\nHost: "
                             "bad.wild.test\r\n\r\n");
    bytes not_ssh = text("SSH-1.99-OpenSSH\r\n");
    /* SSH (a25d F1: "SSH-2.0-x / HTTP/1.1" is a request to servers that
     * take any method) and TLS on port 80 (a25d F2) are refused too. */
    bytes tls_on_80 = client_hello("api.allowed.test", false, 0, 16384);
    bytes silence = { .n = 0 };
    bytes cut = http_request("x.test");
    cut.n -= 2; /* the empty line never comes */
    const struct {
        uint16_t port;
        const bytes *b;
        bool complete;
    } refuse[] = {
        { 443, &ech, false },         { 80, &twohosts, false },  { 80, &absolute, false },
        { 80, &lenient, false },      { 443, &lower, false },    { 80, &blurred, false },
        { 80, &crlf_denied, false },  { 443, &silence, true },   { 80, &cut, true },
        { 443, &part, true },         { 80, &denied, false },    { 443, &denied_http, false },
        { 80, &no_slash, false },     { 80, &vtab, false },      { 80, &scheme, false },
        { 443, &long_method, false }, { 443, &not_ssh, false },  { 443, &junk, false },
        { 80, &junk, false },         { 80, &tls_on_80, false },
    };
    for (size_t i = 0; i < sizeof(refuse) / sizeof(refuse[0]); i++) {
        lz_namecheck_verdict v =
            pdecide(refuse[i].port, refuse[i].b, refuse[i].complete, name, &why);
        if (v != LZ_NAMECHECK_REFUSE)
            print_message("# case %zu: verdict %d\n", i, (int) v);
        assert_int_equal(v, LZ_NAMECHECK_REFUSE);
        assert_true(why != 0);
    }
    /* Silence or the start of a method: not decided before the end. */
    assert_int_equal(pdecide(443, &silence, false, name, &why), LZ_NAMECHECK_MORE);
    bytes ge = text("GE");
    assert_int_equal(pdecide(80, &ge, false, name, &why), LZ_NAMECHECK_MORE);
    bytes ss = text("SS");
    assert_int_equal(pdecide(443, &ss, false, name, &why), LZ_NAMECHECK_MORE);
}

static void test_decide_http(void **state)
{
    (void) state;
    char name[LZ_HOST_NAME_MAX + 1];
    int why;
    bytes ok = http_request("api.allowed.test");
    assert_int_equal(decide(80, &ok, false, name, &why), LZ_NAMECHECK_PASS);
    assert_string_equal(name, "api.allowed.test");
    bytes port = http_request("api.allowed.test:80");
    assert_int_equal(decide(80, &port, false, name, &why), LZ_NAMECHECK_PASS);
    bytes other = http_request("evil.test");
    assert_int_equal(decide(80, &other, false, name, &why), LZ_NAMECHECK_REFUSE);
    assert_int_equal(why, SC_NAME_WHY_NOT_ALLOWED);
    bytes none = { .n = 0 };
    put(&none, "GET / HTTP/1.0\r\n\r\n", 18);
    assert_int_equal(decide(80, &none, false, name, &why), LZ_NAMECHECK_REFUSE);
    assert_int_equal(why, SC_NAME_WHY_NO_NAME);
    bytes half = ok;
    half.n = 20;
    assert_int_equal(decide(80, &half, false, name, &why), LZ_NAMECHECK_MORE);
}

/* ---- a network namespace of the test's own ------------------------------ */

#define TEST_ADDR "203.0.113.9"
#define NC_PORT 4443
#define SERVER_TLS_PORT 5443
#define SERVER_HTTP_PORT 5080

static bool write_proc(const char *path, const char *s)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool ok = write(fd, s, strlen(s)) == (ssize_t) strlen(s);
    close(fd);
    return ok;
}

static bool enter_net_namespace(void)
{
    if (geteuid() == 0)
        return unshare(CLONE_NEWNET) == 0;
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
        return false;
    char map[64];
    snprintf(map, sizeof(map), "0 %u 1\n", (unsigned) uid);
    if (!write_proc("/proc/self/uid_map", map))
        return false;
    (void) write_proc("/proc/self/setgroups", "deny\n");
    snprintf(map, sizeof(map), "0 %u 1\n", (unsigned) gid);
    return write_proc("/proc/self/gid_map", map);
}

static const char ruleset[] =
    "table ip lztest {\n"
    "  chain out {\n"
    "    type nat hook output priority -100; policy accept;\n"
    /* The sandbox's connections: to the name check (the router's redirect). */
    "    ip daddr " TEST_ADDR " tcp sport 20000-20999 redirect to :4443\n"
    /* The name check's own: to the test's servers. */
    "    ip daddr " TEST_ADDR " tcp dport 443 dnat to 127.0.0.1:5443\n"
    "    ip daddr " TEST_ADDR " tcp dport 80 dnat to 127.0.0.1:5080\n"
    "  }\n"
    "}\n";

/* lo up, a unicast route to 203.0.113.0/24 (as the host has to the
 * internet), 198.18.7.1 local, and the ruleset. */
static bool namespace_setup(void)
{
    nl n;
    if (sc_nl_open(&n) < 0)
        return false;
    const uint8_t net[4] = { 203, 0, 113, 0 };
    bool ok = sc_link_up(&n, 1) == 0 &&
              sc_route_set(&n, RTM_NEWROUTE, RTN_UNICAST, net, 24, NULL, 1) == 0 &&
              sc_addr_add(&n, 1, "198.18.7.1", 32) == 0;
    sc_nl_close(&n);
    if (!ok)
        return false;
    int in[2];
    if (pipe2(in, O_CLOEXEC) < 0)
        return false;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        execl("/usr/sbin/nft", "nft", "-f", "-", (char *) NULL);
        _exit(127);
    }
    close(in[0]);
    ok = write(in[1], ruleset, strlen(ruleset)) == (ssize_t) strlen(ruleset);
    close(in[1]);
    int st = 0;
    waitpid(pid, &st, 0);
    return ok && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static int route_socket(void)
{
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    assert_true(fd >= 0);
    return fd;
}

static struct sockaddr_in sin_of(const char *addr, uint16_t port)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
    assert_int_equal(inet_pton(AF_INET, addr, &a.sin_addr), 1);
    return a;
}

static void test_destination(void **state)
{
    (void) state;
    int rt = route_socket();
    bool pa = true;
    struct sockaddr_in a = sin_of(TEST_ADDR, 443);
    assert_true(lz_namecheck_destination_ok(&cfg, rt, &a, &pa));
    /* This host's own address, loopback, no route at all. */
    a = sin_of("198.18.7.1", 443);
    assert_false(lz_namecheck_destination_ok(&cfg, rt, &a, &pa));
    a = sin_of("127.0.0.1", 443);
    assert_false(lz_namecheck_destination_ok(&cfg, rt, &a, &pa));
    a = sin_of("198.51.100.1", 443);
    assert_false(lz_namecheck_destination_ok(&cfg, rt, &a, &pa));
    /* A prefix rule decides the address: not the host rules' to open. */
    lz_resolved_config c = cfg;
    memset(&c.deny, 0, sizeof(c.deny));
    const uint8_t p[4] = { 203, 0, 113, 0 };
    lz_ipv4_prefix pre = lz_ipv4_prefix_make(p, 24);
    lz_ipv4_list_add(&c.deny, &pre);
    a = sin_of(TEST_ADDR, 443);
    assert_false(lz_namecheck_destination_ok(&c, rt, &a, &pa));
    assert_false(pa);
    lz_ipv4_list_clear(&c.deny);
    memset(&c.allow, 0, sizeof(c.allow));
    lz_ipv4_list_add(&c.allow, &pre);
    /* An allow prefix: only with deny_hosts (the router redirects it then),
     * marked prefix-allowed; without, refused (control). */
    assert_true(lz_namecheck_destination_ok(&c, rt, &a, &pa));
    assert_true(pa);
    lz_host_list no_deny = { 0 };
    c.deny_hosts = no_deny;
    assert_false(lz_namecheck_destination_ok(&c, rt, &a, &pa));
    assert_false(pa);
    c.deny_hosts = cfg.deny_hosts;
    /* Still never this host's own address inside the allowed prefix. */
    const uint8_t h[4] = { 198, 18, 7, 0 };
    lz_ipv4_prefix own = lz_ipv4_prefix_make(h, 24);
    lz_ipv4_list_add(&c.allow, &own);
    a = sin_of("198.18.7.1", 443);
    assert_false(lz_namecheck_destination_ok(&c, rt, &a, &pa));
    lz_ipv4_list_clear(&c.allow);
    close(rt);
}

/* ---- the relay --------------------------------------------------------- */

static int listen_on(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = sin_of("127.0.0.1", port);
    assert_int_equal(bind(fd, (struct sockaddr *) &a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 128), 0);
    return fd;
}

static pid_t namecheck_pid;
static int keeper[2] = { -1, -1 };
static int tls_server = -1, http_server = -1;
static uint16_t next_sport = 20000;

/* lz-namecheck as sidecar.c starts it, but for the namespace: listening,
 * confined (the seccomp allowlist must hold for everything it does). */
static void start_namecheck(void)
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, keeper), 0);
    int l = listen_on(NC_PORT);
    fcntl(l, F_SETFL, fcntl(l, F_GETFL) | O_NONBLOCK);
    int rt = route_socket();
    namecheck_pid = fork();
    assert_true(namecheck_pid >= 0);
    if (namecheck_pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (lz_relay_confine(2 * LZ_NAMECHECK_MAX_CONNS + 16) < 0)
            _exit(2);
        _exit(lz_namecheck_run(l, keeper[1], rt, &cfg));
    }
    close(l);
    close(rt);
    close(keeper[1]);
    tls_server = listen_on(SERVER_TLS_PORT);
    http_server = listen_on(SERVER_HTTP_PORT);
}

/* A connection from the sandbox: from a source port the redirect takes. */
static int sandbox_connect(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct sockaddr_in src = sin_of("0.0.0.0", next_sport++);
    assert_int_equal(bind(fd, (struct sockaddr *) &src, sizeof(src)), 0);
    struct sockaddr_in dst = sin_of(TEST_ADDR, port);
    assert_int_equal(connect(fd, (struct sockaddr *) &dst, sizeof(dst)), 0);
    struct timeval tv = { 15, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

static int accept_within(int l, int ms)
{
    struct pollfd p = { .fd = l, .events = POLLIN };
    if (poll(&p, 1, ms) != 1)
        return -1;
    int s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    struct timeval tv = { 5, 0 };
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return s;
}

static size_t read_exactly(int fd, unsigned char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r <= 0)
            break;
        got += (size_t) r;
    }
    return got;
}

/* The client was reset: its read fails with ECONNRESET. */
static void assert_reset(int fd)
{
    char c;
    ssize_t r = read(fd, &c, 1);
    assert_int_equal(r, -1);
    assert_int_equal(errno, ECONNRESET);
}

static void assert_denial(int why, const char *name, uint16_t port)
{
    struct pollfd p = { .fd = keeper[0], .events = POLLIN };
    assert_int_equal(poll(&p, 1, 5000), 1);
    sc_dns_msg m;
    assert_int_equal(recv(keeper[0], &m, sizeof(m), 0), (ssize_t) sizeof(m));
    assert_int_equal(m.type, SC_NAME_DENIED);
    assert_int_equal(m.why, why);
    assert_string_equal(m.name, name);
    assert_int_equal(m.port, port);
    assert_int_equal(m.n_addrs, 1);
    char a[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, m.addrs[0], a, sizeof(a));
    if (why != SC_NAME_WHY_ADDRESS)
        assert_string_equal(a, TEST_ADDR);
}

/* The allowed name passes end to end: the server gets exactly the bytes
 * the client sent (a hello over several records and TCP segments), the
 * answer comes back, half-closes pass both ways. The control of every
 * refusal below: the same client, the same address, only the name differs. */
static void pass_tls(const char *sni, size_t pad, size_t rec_max)
{
    bytes h = client_hello(sni, false, pad, rec_max);
    int c = sandbox_connect(443);
    /* In three pieces, each after a pause: several segments. */
    size_t third = h.n / 3;
    for (int i = 0; i < 3; i++) {
        size_t from = third * (size_t) i, to = i == 2 ? h.n : third * (size_t) (i + 1);
        assert_int_equal(write(c, h.b + from, to - from), (ssize_t) (to - from));
        usleep(20000);
    }
    int s = accept_within(tls_server, 5000);
    assert_true(s >= 0);
    unsigned char got[sizeof(h.b)];
    assert_int_equal(read_exactly(s, got, h.n), h.n);
    assert_memory_equal(got, h.b, h.n);
    bytes sh = server_hello(false);
    assert_int_equal(write(s, sh.b, sh.n), (ssize_t) sh.n);
    assert_int_equal(read_exactly(c, got, sh.n), sh.n);
    assert_memory_equal(got, sh.b, sh.n);
    shutdown(c, SHUT_WR);
    assert_int_equal(read(s, got, 1), 0);
    assert_int_equal(write(s, "late", 4), 4);
    shutdown(s, SHUT_WR);
    assert_int_equal(read_exactly(c, got, 8), 4);
    close(s);
    close(c);
}

/* Refused: the client is reset, the server never sees a connection, the
 * keeper gets the denial. */
static void refused(uint16_t port, const bytes *first, int why, const char *name)
{
    int c = sandbox_connect(port);
    assert_int_equal(write(c, first->b, first->n), (ssize_t) first->n);
    assert_reset(c);
    close(c);
    assert_denial(why, name, port);
    assert_int_equal(accept_within(port == 443 ? tls_server : http_server, 200), -1);
}

/* Nothing arrives at fd within ms. */
static void assert_quiet(int fd, int ms)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    assert_int_equal(poll(&p, 1, ms), 0);
}

/* A connection through the name check whose first ClientHello named
 * sni, with extra (sent in the same write) after it; *server is the
 * server's side, which got exactly the ClientHello. */
static int tls_start(const char *sni, const void *extra, size_t extra_n, int *server)
{
    bytes ch = client_hello(sni, false, 0, 16384);
    put(&ch, extra, extra_n);
    int c = sandbox_connect(443);
    assert_int_equal(write(c, ch.b, ch.n), (ssize_t) ch.n);
    *server = accept_within(tls_server, 5000);
    assert_true(*server >= 0);
    unsigned char got[sizeof(ch.b)];
    assert_int_equal(read_exactly(*server, got, ch.n - extra_n), ch.n - extra_n);
    assert_memory_equal(got, ch.b, ch.n - extra_n);
    return c;
}

/* TLS 1.3's HelloRetryRequest (attack round a25b, F1): nothing after the
 * ClientHello reaches the server before its ServerHello; after a retry
 * the next ClientHello must name the same server. */
static void tls_retry(void)
{
    unsigned char got[8192];
    static const unsigned char early[] = "\x17\x03\x03\x00\x05"
                                         "early";
    bytes hrr = server_hello(true), sh = server_hello(false);
    bytes same = { .n = 0 }, other = { .n = 0 };
    put(&same, CCS, sizeof(CCS));
    bytes ch = client_hello("api.allowed.test", false, 0, 16384);
    put(&same, ch.b, ch.n);
    put(&other, CCS, sizeof(CCS));
    ch = client_hello("evil.test", false, 0, 16384);
    put(&other, ch.b, ch.n);

    /* An honest client with early data: held until the answer, then sent
     * as it came (the early data, the ChangeCipherSpec, the second hello);
     * the server's ChangeCipherSpec after the retry reaches the client
     * with the ServerHello; from then on bytes flow freely. */
    int s;
    int c = tls_start("api.allowed.test", early, sizeof(early) - 1, &s);
    assert_quiet(s, 300);
    bytes flight = hrr;
    put(&flight, CCS, sizeof(CCS));
    assert_int_equal(write(s, flight.b, flight.n), (ssize_t) flight.n);
    assert_int_equal(read_exactly(c, got, hrr.n), hrr.n);
    assert_memory_equal(got, hrr.b, hrr.n);
    assert_int_equal(write(c, same.b, same.n), (ssize_t) same.n);
    assert_int_equal(read_exactly(s, got, sizeof(early) - 1 + same.n), sizeof(early) - 1 + same.n);
    assert_memory_equal(got, early, sizeof(early) - 1);
    assert_memory_equal(got + sizeof(early) - 1, same.b, same.n);
    assert_quiet(c, 100);
    assert_int_equal(write(s, sh.b, sh.n), (ssize_t) sh.n);
    assert_int_equal(read_exactly(c, got, sizeof(CCS) + sh.n), sizeof(CCS) + sh.n);
    assert_memory_equal(got, CCS, sizeof(CCS));
    assert_memory_equal(got + sizeof(CCS), sh.b, sh.n);
    assert_int_equal(write(c, "free", 4), 4);
    assert_int_equal(read_exactly(s, got, 4), 4);
    assert_memory_equal(got, "free", 4);
    close(s);
    close(c);

    /* The attack: another name after the retry. Both sides reset, the
     * server never got a byte of it; the record names the second name. */
    c = tls_start("api.allowed.test", "", 0, &s);
    assert_int_equal(write(s, hrr.b, hrr.n), (ssize_t) hrr.n);
    assert_int_equal(read_exactly(c, got, hrr.n), hrr.n);
    assert_int_equal(write(c, other.b, other.n), (ssize_t) other.n);
    assert_reset(c);
    assert_reset(s);
    assert_denial(SC_NAME_WHY_RETRY_NAME, "evil.test", 443);
    close(s);
    close(c);

    /* A second HelloRetryRequest: refused (the client would answer it with
     * a third hello). */
    c = tls_start("api.allowed.test", "", 0, &s);
    assert_int_equal(write(s, hrr.b, hrr.n), (ssize_t) hrr.n);
    assert_int_equal(read_exactly(c, got, hrr.n), hrr.n);
    assert_int_equal(write(c, same.b, same.n), (ssize_t) same.n);
    assert_int_equal(read_exactly(s, got, same.n), same.n);
    assert_int_equal(write(s, hrr.b, hrr.n), (ssize_t) hrr.n);
    assert_reset(c);
    assert_reset(s);
    assert_denial(SC_NAME_WHY_SERVER_HELLO, "api.allowed.test", 443);
    close(s);
    close(c);

    /* Not TLS where the ServerHello must be: refused, the client got
     * nothing of it. */
    c = tls_start("api.allowed.test", "", 0, &s);
    assert_int_equal(write(s, "server hello", 12), 12);
    assert_reset(c);
    assert_reset(s);
    assert_denial(SC_NAME_WHY_SERVER_HELLO, "api.allowed.test", 443);
    close(s);
    close(c);
}

static void test_relay(void **state)
{
    (void) state;
    start_namecheck();
    /* A client that never says a name, first: cut after the bound while the
     * rest runs. */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int slow = sandbox_connect(443);

    pass_tls("api.allowed.test", 0, 16384);
    /* A post-quantum-sized hello, over five records. */
    pass_tls("x.wild.test", 2400, 600);

    bytes evil = client_hello("evil.test", false, 0, 16384);
    refused(443, &evil, SC_NAME_WHY_NOT_ALLOWED, "evil.test");
    bytes none = client_hello(NULL, false, 0, 16384);
    refused(443, &none, SC_NAME_WHY_NO_NAME, "");
    bytes ech = client_hello("api.allowed.test", true, 0, 16384);
    refused(443, &ech, SC_NAME_WHY_ENCRYPTED, "");

    tls_retry();

    /* HTTP: allowed Host passes, another is refused. */
    bytes req = http_request("api.allowed.test");
    int c = sandbox_connect(80);
    assert_int_equal(write(c, req.b, req.n), (ssize_t) req.n);
    int s = accept_within(http_server, 5000);
    assert_true(s >= 0);
    unsigned char got[sizeof(req.b)];
    assert_int_equal(read_exactly(s, got, req.n), req.n);
    assert_memory_equal(got, req.b, req.n);
    /* Request by request (S2, a25b F2): the answer comes back; a second
     * request for the allowed name on the kept-alive connection reaches the
     * server (the control), a third for another name resets both sides
     * and never reaches it. Two requests in one write (pipelined): the
     * first may go, the second is decided on its own. */
    assert_int_equal(write(s, "answer", 6), 6);
    assert_int_equal(read_exactly(c, got, 6), 6);
    assert_int_equal(write(c, req.b, req.n), (ssize_t) req.n);
    assert_int_equal(read_exactly(s, got, req.n), req.n);
    assert_memory_equal(got, req.b, req.n);
    bytes again = http_request("evil.test");
    bytes both = req;
    memcpy(both.b + both.n, again.b, again.n);
    both.n += again.n;
    assert_int_equal(write(c, both.b, both.n), (ssize_t) both.n);
    /* The refusal resets both sides at once: of the batch, the server may
     * have got the admitted first request, never a byte of the second. */
    size_t n = read_exactly(s, got, sizeof(got));
    assert_true(n <= req.n);
    assert_memory_equal(got, req.b, n);
    assert_reset(c);
    assert_denial(SC_NAME_WHY_NOT_ALLOWED, "evil.test", 80);
    close(s);
    close(c);
    bytes bad = http_request("evil.test");
    refused(80, &bad, SC_NAME_WHY_NOT_ALLOWED, "evil.test");

    /* Straight to the name check's port, not redirected: its own address is
     * never a destination. */
    int direct = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in nc = sin_of("127.0.0.1", NC_PORT);
    assert_int_equal(connect(direct, (struct sockaddr *) &nc, sizeof(nc)), 0);
    assert_reset(direct);
    close(direct);
    assert_denial(SC_NAME_WHY_ADDRESS, "", NC_PORT);

    assert_reset(slow);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double waited = (double) (t1.tv_sec - t0.tv_sec) + (double) (t1.tv_nsec - t0.tv_nsec) / 1e9;
    print_message("# slow client cut after %.2f s\n", waited);
    assert_true(waited >= LZ_NAMECHECK_HELLO_MS / 1000.0 - 0.1);
    assert_true(waited < LZ_NAMECHECK_HELLO_MS / 1000.0 + 3);
    close(slow);
    assert_denial(SC_NAME_WHY_INVALID, "", 443);

    /* Still alive and confined after all of it. */
    assert_int_equal(waitpid(namecheck_pid, NULL, WNOHANG), 0);
    kill(namecheck_pid, SIGKILL);
    waitpid(namecheck_pid, NULL, 0);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    cfg_init();
    const struct CMUnitTest pure[] = {
        cmocka_unit_test(test_decide_tls),
        cmocka_unit_test(test_decide_prefixes_and_bounds),
        cmocka_unit_test(test_decide_http),
        cmocka_unit_test(test_decide_prefix_allowed),
    };
    int failed = cmocka_run_group_tests_name("namecheck_decide", pure, NULL, NULL);
    if (!enter_net_namespace() || !namespace_setup()) {
        printf("# SKIP namecheck_relay: no network namespace with nftables available\n");
        return failed;
    }
    const struct CMUnitTest relay[] = {
        cmocka_unit_test(test_destination),
        cmocka_unit_test(test_relay),
    };
    return failed + cmocka_run_group_tests_name("namecheck_relay", relay, NULL, NULL);
}
