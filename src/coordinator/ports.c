/* SPDX-License-Identifier: Apache-2.0
 *
 * A session's published ports (docs/network.md "Publishing a port"):
 * bound here on RUN, handed to the supervisor with the session's exec.
 */
#include "coordinator/ports.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/io.h"

void publish_close(session *s)
{
    for (size_t i = 0; i < LZ_MSG_MAX_PUBLISH; i++) {
        if (s->pub_fds[i] >= 0)
            close(s->pub_fds[i]);
        s->pub_fds[i] = -1;
    }
}

/* Listen on every host address of the session's --publish, in this
 * process's network namespace (the host's: the coordinator runs where the
 * developer started the Domain). The kernel arbitrates: a host port some
 * program — or another session's --publish — listens on refuses the bind
 * (no SO_REUSEPORT), and the session is refused with that port. */
int publish_bind(session *s, char *msg, size_t msg_len, char *hint, size_t hint_len)
{
    for (size_t i = 0; i < s->run.n_publish; i++) {
        const lz_msg_publish *p = &s->run.publish[i];
        char host[32];
        lz_msg_publish_host(p, host, sizeof(host));
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        /* SO_REUSEADDR only lets a port whose earlier connections linger in
         * TIME_WAIT be listened on again; Linux still refuses a second
         * listener. */
        int one = 1;
        struct sockaddr_in a = { .sin_family = AF_INET,
                                 .sin_port = htons(p->host_port),
                                 .sin_addr.s_addr = htonl(p->addr) };
        if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
            bind(fd, (struct sockaddr *) &a, sizeof(a)) < 0 || listen(fd, 64) < 0) {
            int e = errno;
            if (fd >= 0)
                close(fd);
            publish_close(s);
            if (e == EADDRINUSE) {
                snprintf(msg, msg_len,
                         "cannot publish sandbox port %u on %s: the host port is "
                         "in use (by another program or another session's "
                         "--publish)",
                         p->port, host);
                snprintf(hint, hint_len,
                         "choose another host port (--publish OTHER:%u), or end "
                         "what listens there (ss -ltnp 'sport = :%u')",
                         p->port, p->host_port);
            } else if (e == EACCES) {
                snprintf(msg, msg_len,
                         "cannot publish sandbox port %u on %s: ports below %s "
                         "need privileges Lazaret does not have",
                         p->port, host, "net.ipv4.ip_unprivileged_port_start (1024 by default)");
                snprintf(hint, hint_len,
                         "choose a host port of 1024 or more "
                         "(--publish 8080:%u)",
                         p->port);
            } else {
                snprintf(msg, msg_len, "cannot publish sandbox port %u on %s: %s", p->port, host,
                         strerror(e));
                snprintf(hint, hint_len,
                         "check that %s is an address of this machine's "
                         "loopback (ip addr show lo)",
                         host);
            }
            return -1;
        }
        s->pub_fds[i] = fd;
    }
    return 0;
}

/* Hand the session's listening sockets to the supervisor, which relays
 * their connections to the sandbox while this session's command runs, and
 * close the coordinator's copies: from now on the supervisor's forwarder
 * holds the port, and it ends with the command. */
int publish_send(coord *c, session *s, lz_error **err)
{
    for (size_t i = 0; i < s->run.n_publish; i++) {
        lz_wbuf b;
        lz_msg_pair_encode(&b, LZ_SUP_PUBLISH, s->no, s->run.publish[i].port);
        if (lz_wire_send(c->sup.sock, &b, &s->pub_fds[i], 1, err) < 0)
            return -1;
        close(s->pub_fds[i]);
        s->pub_fds[i] = -1;
    }
    return 0;
}
