/* SPDX-License-Identifier: Apache-2.0
 *
 * The watcher of the host's addresses (lz-netwatch): adds addresses that
 * appear after the start to the router's host_local set, and ends the
 * sandbox's egress when it cannot (docs/network.md "Never reachable").
 */
#include "supervisor/sidecar_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <sched.h>
#include <signal.h>
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

/* The watcher's main loop. `events` is subscribed to IPv4 address and route
 * changes, `dumps` is for re-reading everything; both sockets were opened in
 * the supervisor's namespace and stay there after setns (a socket belongs
 * to the namespace it was created in). Events queued since the start-up
 * scan are read first, so nothing between the scan and now is missed; an
 * overflowed queue (ENOBUFS) makes it scan again. */
static _Noreturn void watch_main(struct mnl_socket *events, struct mnl_socket *dumps,
                                 const char *router_netns, const char *nft,
                                 lz_ipv4_prefix_list known, pid_t slirp)
{
    int fd = open(router_netns, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) < 0)
        watch_fail_closed(nft, slirp);
    close(fd);
    static char buf[NL_DUMP_BUFSZ];
    for (;;) {
        lz_ipv4_prefix_list got = { 0 }, fresh = { 0 };
        ssize_t n = recv(mnl_socket_get_fd(events), buf, sizeof(buf), 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == ENOBUFS) {
            if (sc_host_local_scan(dumps, &got) < 0)
                watch_fail_closed(nft, slirp);
        } else if (n <= 0 || mnl_cb_run(buf, (size_t) n, 0, 0, sc_host_local_msg, &got) < 0) {
            watch_fail_closed(nft, slirp);
        }
        for (size_t i = 0; i < got.count; i++)
            if (!lz_ipv4_list_covers(&known, &got.items[i]))
                lz_ipv4_list_add(&fresh, &got.items[i]);
        if (fresh.count && sc_nft_add_host_local(nft, fresh.items, fresh.count) < 0)
            watch_fail_closed(nft, slirp);
        for (size_t i = 0; i < fresh.count; i++)
            lz_ipv4_list_add(&known, &fresh.items[i]);
        lz_ipv4_list_clear(&got);
        lz_ipv4_list_clear(&fresh);
    }
}

typedef struct watch_job {
    struct mnl_socket *events, *dumps;
    const char *router_netns, *nft;
    const lz_ipv4_prefix_list *known;
    pid_t slirp;
} watch_job;

static int watch_child(void *arg, int channel, lz_error **err)
{
    (void) err;
    const watch_job *j = arg;
    if (lz_fork_ready(channel) < 0)
        return 1;
    /* Keep only the two sockets; stdio to /dev/null. */
    int ev = mnl_socket_get_fd(j->events), du = mnl_socket_get_fd(j->dumps);
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int i = 0; i < 3; i++)
        dup2(devnull, i);
    /* A fork without exec: O_CLOEXEC does not help, close the rest. */
    const int keep[] = { 0, 1, 2, ev, du };
    if (lz_close_fds_except(keep, LZ_ARRAY_SIZE(keep)) < 0)
        watch_fail_closed(j->nft, j->slirp);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    lz_ipv4_prefix_list copy = { 0 };
    for (size_t i = 0; i < j->known->count; i++)
        lz_ipv4_list_add(&copy, &j->known->items[i]);
    watch_main(j->events, j->dumps, j->router_netns, j->nft, copy, j->slirp);
}

int sc_watch_start(struct mnl_socket *events, struct mnl_socket *dumps, const char *router_netns,
                   const char *nft, const lz_ipv4_prefix_list *known, pid_t slirp, pid_t *ret_pid,
                   lz_error **err)
{
    watch_job j = { events, dumps, router_netns, nft, known, slirp };
    /* Its own name: not taken for the supervisor (ps, tests, lazaret
     * doctor). The supervisor is often pid 1 of its own pid namespace: the
     * child's check of its parent holds there too. */
    lz_fork_options opt = { .what = "the address watcher",
                            .pdeathsig = SIGKILL,
                            .name = "lz-netwatch" };
    lz_child child;
    if (lz_fork_call(watch_child, &j, &opt, &child, err) < 0)
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
