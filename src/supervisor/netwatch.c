/* SPDX-License-Identifier: Apache-2.0
 *
 * lz-netwatch: the watcher of the host's addresses, which adds addresses
 * that appear after the start to the router's host_local set and ends the
 * sandbox's egress when it cannot (docs/network.md "Never reachable"); and
 * the set keeper's loop (keeper.c): one process, so that one death ends
 * egress for both (its pid is the supervisor's lz_network.watch_pid).
 */
#include "supervisor/sidecar_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/fork.h"
#include "common/util.h"

/* Something went wrong: host addresses added from now on might not be
 * denied, so the sandbox loses its egress (every destination joins the set,
 * and slirp4netns is ended). */
static _Noreturn void watch_fail_closed(const char *nft, pid_t slirp)
{
    lz_ipv4_prefix all = { { 0, 0, 0, 0 }, 0 };
    sc_nft_add_host_local(nft, &all, 1);
    kill(slirp, SIGKILL);
    _exit(1);
}

/* A host-address event (or an overflow of their queue, ENOBUFS: then a
 * new scan) on `events`; the new host-local prefixes go into the router's
 * host_local set and into known. */
static void host_addresses(struct mnl_socket *events, struct mnl_socket *dumps, const char *nft,
                           lz_ipv4_prefix_list *known, pid_t slirp)
{
    static char buf[NL_DUMP_BUFSZ];
    lz_ipv4_prefix_list got = { 0 }, fresh = { 0 };
    ssize_t n = recv(mnl_socket_get_fd(events), buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n < 0 && errno == ENOBUFS) {
        if (sc_host_local_scan(dumps, &got) < 0)
            watch_fail_closed(nft, slirp);
    } else if (n <= 0 || mnl_cb_run(buf, (size_t) n, 0, 0, sc_host_local_msg, &got) < 0) {
        watch_fail_closed(nft, slirp);
    }
    for (size_t i = 0; i < got.count; i++)
        if (!lz_ipv4_list_covers(known, &got.items[i]))
            lz_ipv4_list_add(&fresh, &got.items[i]);
    if (fresh.count && sc_nft_add_host_local(nft, fresh.items, fresh.count) < 0)
        watch_fail_closed(nft, slirp);
    for (size_t i = 0; i < fresh.count; i++)
        lz_ipv4_list_add(known, &fresh.items[i]);
    lz_ipv4_list_clear(&got);
    lz_ipv4_list_clear(&fresh);
}

/* One message from lz-dns or lz-namecheck. False when the peer is gone
 * (the keeper goes on without it: what it would say is then never
 * said, and nothing is learned). A LEARN is answered only by the DNS
 * peer. */
static bool peer_message(sc_keeper *k, int fd, bool dns, const lz_ipv4_prefix_list *known)
{
    sc_dns_msg m;
    ssize_t n = recv(fd, &m, sizeof(m), MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return true;
    if (n <= 0)
        return false;
    if ((size_t) n != sizeof(m))
        return true; /* not a message of the protocol: ignored */
    if (dns && m.type == SC_DNS_LEARN) {
        sc_dns_msg out;
        sc_keeper_learn(k, known, &m, &out);
        /* Never blocks: an lz-dns that does not read its answers loses
         * them (it answers SERVFAIL), the watcher goes on. */
        ssize_t w = send(fd, &out, sizeof(out), MSG_NOSIGNAL | MSG_DONTWAIT);
        return w == (ssize_t) sizeof(out) || (w < 0 && (errno == EAGAIN || errno == EINTR));
    }
    if ((dns && m.type == SC_DNS_DENIED) || (!dns && m.type == SC_NAME_DENIED))
        sc_keeper_denied(k, &m);
    return true;
}

/* The watcher's and keeper's loop. `events` is subscribed to IPv4 address
 * and route changes, `dumps` is for re-reading everything; both sockets
 * were opened in the supervisor's namespace and stay there after setns (a
 * socket belongs to the namespace it was created in). Events queued since
 * the start-up scan are read first, so nothing between the scan and now is
 * missed. */
/* The teardown's SIGTERM (lz_network_clear): what lz-dns and lz-namecheck
 * (already ended) left in their sockets, the packets still queued and the
 * last count of the rejected ones go into the log before it is closed; the
 * teardown waits for that, briefly, then kills. */
static _Noreturn void keeper_last_words(sc_keeper *k, int dns, int namecheck)
{
    sc_dns_msg m;
    for (int i = 0; dns >= 0 && i < 4096 && recv(dns, &m, sizeof(m), MSG_DONTWAIT) > 0; i++)
        if (m.type != SC_DNS_LEARN) /* nobody waits for an answer any more */
            sc_keeper_denied(k, &m);
    for (int i = 0; namecheck >= 0 && i < 4096 && recv(namecheck, &m, sizeof(m), MSG_DONTWAIT) > 0;
         i++)
        sc_keeper_denied(k, &m);
    lz_best_effort(sc_keeper_count(k));
    lz_denial_log_close(k->log);
    _exit(0);
}

static _Noreturn void watch_main(const sc_watch_args *a, sc_keeper *k, lz_ipv4_prefix_list known,
                                 int sigterm_fd)
{
    int dns = a->dns_fd, namecheck = a->namecheck_fd;
    time_t last_tick = 0;
    for (;;) {
        struct pollfd p[5] = {
            { .fd = mnl_socket_get_fd(a->events), .events = POLLIN },
            { .fd = sc_keeper_nflog_fd(k), .events = POLLIN },
            { .fd = dns, .events = POLLIN },
            { .fd = namecheck, .events = POLLIN },
            { .fd = sigterm_fd, .events = POLLIN },
        };
        int r = poll(p, LZ_ARRAY_SIZE(p), 1000);
        if (r < 0 && errno != EINTR)
            watch_fail_closed(a->nft, a->slirp);
        if (r > 0 && p[4].revents)
            keeper_last_words(k, dns, namecheck);
        /* About once a second: the rejected packets the log did not bring,
         * and the denial log's count of what it dropped. A counter that
         * cannot be read costs exactness, not the network. */
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (k->log && now.tv_sec != last_tick) {
            last_tick = now.tv_sec;
            lz_best_effort(sc_keeper_count(k));
            lz_denial_log_tick(k->log);
        }
        if (r <= 0)
            continue;
        if (p[0].revents)
            host_addresses(a->events, a->dumps, a->nft, &known, a->slirp);
        if (p[1].revents && sc_keeper_nflog_read(k) < 0)
            watch_fail_closed(a->nft, a->slirp);
        if (p[2].revents && !peer_message(k, dns, true, &known)) {
            close(dns);
            dns = -1;
        }
        if (p[3].revents && !peer_message(k, namecheck, false, &known)) {
            close(namecheck);
            namecheck = -1;
        }
    }
}

static int watch_child(void *arg, int channel, lz_error **err)
{
    const sc_watch_args *a = arg;
    /* Keep the sockets and the logs directory; stdio to /dev/null. */
    int ev = mnl_socket_get_fd(a->events), du = mnl_socket_get_fd(a->dumps);
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int i = 0; i < 3; i++)
        dup2(devnull, i);
    /* A fork without exec: O_CLOEXEC does not help, close the rest. */
    const int keep[] = { 0, 1, 2, channel, ev, du, a->dns_fd, a->namecheck_fd, a->denial_logs_fd };
    if (lz_close_fds_except(keep, LZ_ARRAY_SIZE(keep)) < 0)
        return lz_error_set(err, errno, "cannot close inherited descriptors");
    /* SIGTERM only through a descriptor (keeper_last_words); every other
     * signal as by default. */
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_SETMASK, &term, NULL);
    int sigterm_fd = signalfd(-1, &term, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sigterm_fd < 0)
        return lz_error_set(err, errno, "cannot make the keeper's signal descriptor");
    /* The log is the keeper's: a failure to open it loses the records, not
     * the network. */
    lz_denial_log *log = NULL;
    if (a->denial_logs_fd >= 0) {
        lz_error *e = NULL;
        if (lz_denial_log_open(a->denial_logs_fd, 0, &log, &e) < 0)
            lz_error_free(e);
        close(a->denial_logs_fd);
    }
    /* The nfnetlink sockets are made in the router's namespace: a failure
     * here is the caller's, before the sandbox exists. */
    int fd = open(a->router_netns, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) < 0)
        return lz_error_set(err, errno, "cannot enter the router's namespace %s", a->router_netns);
    close(fd);
    static sc_keeper k;
    char why[256];
    if (sc_keeper_open(&k, a->cfg, log, why, sizeof(why)) < 0)
        return lz_error_set(err, 0, "the set keeper: %s", why);
    if (lz_fork_ready(channel) < 0)
        _exit(1);
    close(channel);
    lz_ipv4_prefix_list copy = { 0 };
    for (size_t i = 0; i < a->known->count; i++)
        lz_ipv4_list_add(&copy, &a->known->items[i]);
    watch_main(a, &k, copy, sigterm_fd);
}

int sc_watch_start(const sc_watch_args *a, pid_t *ret_pid, lz_error **err)
{
    /* Its own name: not taken for the supervisor (ps, tests, lazaret
     * doctor). The supervisor is often pid 1 of its own pid namespace: the
     * child's check of its parent holds there too. */
    lz_fork_options opt = { .what = "the address watcher and set keeper",
                            .pdeathsig = SIGKILL,
                            .name = "lz-netwatch" };
    lz_child child;
    if (lz_fork_call(watch_child, (void *) a, &opt, &child, err) < 0)
        return -1;
    *ret_pid = lz_child_release(&child); /* the supervisor's reaper collects it by pid */
    return 0;
}

bool lz_network_child_exited(lz_network *net, pid_t pid)
{
    /* A name check that ended fails closed by itself (nothing listens
     * behind the redirect: connections are reset); its pid is forgotten so
     * that the teardown never signals a recycled one. */
    if (pid > 0 && pid == net->namecheck_pid) {
        net->namecheck_pid = 0;
        return true;
    }
    if (pid <= 0 || pid != net->watch_pid)
        return false;
    net->watch_pid = 0;
    lz_best_effort(lz_child_kill(&net->slirp, SIGKILL, NULL)); /* by pidfd: never a recycled pid */
    return true;
}
