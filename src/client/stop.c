/* SPDX-License-Identifier: Apache-2.0
 *
 * Stopping a running Domain over its authenticated session channel
 * (enrolment and TLS as for a session, then STOP instead of HELLO): the
 * coordinator tells every session why and tears down. Never a signal to a
 * pid read from a file.
 */
#include <errno.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include "client/internal.h"
#include "common/util.h"
#include "store/domain_root.h"

/* Wait until nothing holds the Domain lock of dirfd: its coordinator has
 * exited (teardown done). */
static bool wait_lock_released(int dirfd, int timeout_ms)
{
    for (int waited = 0; waited < timeout_ms; waited += 50) {
        if (!lz_domain_lock_held(dirfd))
            return true;
        struct timespec d = { 0, 50 * 1000 * 1000 };
        nanosleep(&d, NULL);
    }
    return !lz_domain_lock_held(dirfd);
}

int lz_client_stop_domain(const lz_client_ui *ui, int dirfd, const char *label, const char *log,
                          const char *id, const char *profile)
{
    lz_error *err = NULL;
    int sock = lz_domain_connect_running(dirfd, &err);
    if (sock < 0) {
        lz_error_prefix(&err, "cannot reach Domain %.16s… (profile '%s')", id, profile);
        lz_error_report(err, ui->notices());
        lz_error_free(err);
        return -1;
    }
    int status = 0;
    lz_client cl = {
        .ui = ui, .log_label = log, .sock = sock, .status = &status, .retry_silently = true
    };
    if (lz_client_secure(&cl, id, dirfd, label) < 0) {
        close(sock);
        lz_client_clear(&cl);
        /* A refusal in the clear: it was ending already, by itself. */
        return cl.result == LZ_ATTEMPT_RETRY && wait_lock_released(dirfd, 30000) ? 1 : -1;
    }
    lz_wbuf b;
    lz_msg_text_encode(&b, LZ_MSG_STOP, id);
    lz_best_effort(lz_tls_proto_send(cl.tls, sock, &b, NULL, 0, NULL));
    /* Its answer is the teardown's: a REFUSED (stopped), then EOF. */
    for (;;) {
        struct pollfd p = { .fd = sock, .events = POLLIN };
        if (poll(&p, 1, 30000) <= 0)
            break;
        static lz_proto_msg m;
        int r = lz_tls_proto_recv(cl.tls, sock, LZ_DIR_COORDINATOR_TO_CLI, LZ_PS_CLIENT_WAITING, &m,
                                  &err);
        lz_proto_msg_clear(&m);
        lz_error_free(lz_error_take(&err));
        if (r == 0 || (r < 0 && !(err == NULL && errno == EAGAIN)))
            break;
    }
    close(sock);
    lz_tls_channel_free(cl.tls);
    lz_client_clear(&cl);
    if (!wait_lock_released(dirfd, 30000)) {
        lz_error_set(&err, ETIMEDOUT,
                     "Domain %.16s… (profile '%s') did not finish its teardown "
                     "within 30 s",
                     id, profile);
        lz_error_hint(&err, "see 'lazaret status' and %s", log);
        lz_error_report(err, ui->notices());
        lz_error_free(err);
        return -1;
    }
    return 0;
}
