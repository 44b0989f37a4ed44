/* SPDX-License-Identifier: Apache-2.0
 *
 * lz-dns's and lz-namecheck's reports to the keeper (sidecar_internal.h
 * "peer.c"): sent without blocking, and what cannot be sent is counted,
 * never lost from the totals (attack round a25, S5).
 */
#include "supervisor/sidecar_internal.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

static bool send_now(int keeper_fd, const sc_dns_msg *m)
{
    ssize_t n;
    do
        n = send(keeper_fd, m, sizeof(*m), MSG_DONTWAIT | MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n == (ssize_t) sizeof(*m);
}

void sc_peer_report(int keeper_fd, sc_dns_msg *m, uint32_t *unsent)
{
    if (keeper_fd < 0)
        return;
    m->unsent = *unsent;
    if (send_now(keeper_fd, m))
        *unsent = 0;
    else if (*unsent < UINT32_MAX)
        ++*unsent;
}

bool sc_peer_flush(int keeper_fd, uint32_t *unsent)
{
    if (keeper_fd < 0 || *unsent == 0)
        return true;
    sc_dns_msg m;
    memset(&m, 0, sizeof(m));
    m.type = SC_PEER_UNSENT;
    m.unsent = *unsent;
    if (!send_now(keeper_fd, &m))
        return false;
    *unsent = 0;
    return true;
}
