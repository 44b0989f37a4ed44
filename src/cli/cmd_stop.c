/* SPDX-License-Identifier: Apache-2.0
 *
 * lazaret stop [--profile P] [--workspace DIR]   (issue 12)
 *
 * Ends a running Domain cleanly over its authenticated session channel
 * (enrolment and TLS as for 'run', then STOP instead of HELLO): the
 * coordinator tells every session why and tears down. Never a signal to a
 * pid read from a file. Waits (30 s at most) until the Domain lock is free,
 * so that what follows (lazaret state reset --stop) finds no generation.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/error.h"
#include "common/util.h"
#include "config/resolve.h"
#include "coordinator/bootstrap.h"
#include "protocol/messages.h"
#include "protocol/table.h"
#include "trust/channel.h"

const char lz_usage_stop[] =
    "Usage: lazaret [--config FILE] stop [--profile PROFILE] [--workspace DIR]\n"
    "\n"
    "End the running Domain of the workspace (chosen as for 'run') cleanly: every\n"
    "session is told that the Domain was stopped, its command ends, and the\n"
    "sandbox is torn down. Without --profile, every running Domain of the\n"
    "workspace. Nothing running is not an error.\n"
    "\n"
    "Options:\n"
    "  --profile PROFILE  only this profile's Domain\n"
    "  --workspace DIR    the project directory (default: as for 'run')\n";

/* Wait until nothing holds the Domain lock of dirfd: its coordinator has
 * exited (teardown done). */
static bool wait_lock_released(int dirfd, int timeout_ms)
{
    for (int waited = 0; waited < timeout_ms; waited += 50) {
        if (!lz_cli_domain_lock_held(dirfd))
            return true;
        struct timespec d = { 0, 50 * 1000 * 1000 };
        nanosleep(&d, NULL);
    }
    return !lz_cli_domain_lock_held(dirfd);
}

/* Stop one running Domain: over its session channel (enrolment, TLS, then
 * STOP instead of HELLO), never by a signal to a pid read from a file. */
static int stop_domain(int dirfd, const char *label, const char *log, const char *id,
                       const char *profile, const char *workspace)
{
    lz_error *err = NULL;
    int sock = lz_domain_connect_running(dirfd, &err);
    if (sock < 0) {
        lz_error_prefix(&err, "cannot reach Domain %.16s… (profile '%s')", id, profile);
        lz_error_report(err, stderr);
        lz_error_free(err);
        return -1;
    }
    lz_tls_channel *tls = NULL;
    bool ending = false;
    if (lz_cli_secure_channel(sock, id, dirfd, label, log, &tls, &ending) < 0) {
        close(sock);
        /* A refusal in the clear: it was ending already. */
        return ending && wait_lock_released(dirfd, 30000) ? 0 : -1;
    }
    lz_wbuf b;
    lz_msg_text_encode(&b, LZ_MSG_STOP, id);
    lz_best_effort(lz_tls_proto_send(tls, sock, &b, NULL, 0, NULL));
    /* Its answer is the teardown's: a REFUSED (stopped), then EOF. */
    for (;;) {
        struct pollfd p = { .fd = sock, .events = POLLIN };
        if (poll(&p, 1, 30000) <= 0)
            break;
        static lz_proto_msg m;
        int r = lz_tls_proto_recv(tls, sock, LZ_DIR_COORDINATOR_TO_CLI,
                                  LZ_PS_CLIENT_WAITING, &m, &err);
        lz_proto_msg_clear(&m);
        lz_error_free(lz_error_take(&err));
        if (r == 0 || (r < 0 && !(err == NULL && errno == EAGAIN)))
            break;
    }
    close(sock);
    lz_tls_channel_free(tls);
    if (!wait_lock_released(dirfd, 30000)) {
        lz_error_set(&err, ETIMEDOUT, "Domain %.16s… (profile '%s') did not finish its teardown "
                                      "within 30 s",
                     id, profile);
        lz_error_hint(&err, "see 'lazaret status' and %s", log);
        lz_error_report(err, stderr);
        lz_error_free(err);
        return -1;
    }
    printf("stopped profile '%s' for the workspace %s\n", profile, workspace);
    return 0;
}

int lz_cmd_stop(int argc, char **argv, const lz_global_options *g)
{
    (void) g;
    const char *profile = NULL, *workspace = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((strcmp(a, "--profile") == 0 || strcmp(a, "--workspace") == 0) && i + 1 < argc) {
            if (a[2] == 'p')
                profile = argv[++i];
            else
                workspace = argv[++i];
        } else {
            return lz_cli_usage_error("stop", "unexpected argument '%s'", a);
        }
    }
    lz_error *err = NULL;
    _cleanup_free_ char *ws = lz_workspace_choose(workspace, &err);
    if (!ws) {
        lz_error_report(err, stderr);
        lz_error_free(err);
        return LZ_EXIT_FAILURE;
    }
    _cleanup_free_ char *root = NULL;
    json_t *all = lz_cli_running_domains(&root);
    if (!all)
        return LZ_EXIT_FAILURE;
    int found = 0, failed = 0;
    size_t i;
    json_t *d;
    json_array_foreach(all, i, d) {
        const char *id = json_string_value(json_object_get(d, "domain_id"));
        const char *p = json_string_value(json_object_get(d, "profile"));
        const char *w = json_string_value(json_object_get(d, "workspace"));
        if (!id || !p || !w || strcmp(w, ws) != 0 || (profile && strcmp(p, profile) != 0) ||
            strlen(id) != 64 || strspn(id, "0123456789abcdef") != 64)
            continue;
        found++;
        _cleanup_free_ char *label = lz_xasprintf("%s/%s", root, id);
        _cleanup_close_ int dirfd = open(label, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        /* The log's path as the coordinator published it: only for messages. */
        const char *log = json_string_value(json_object_get(d, "log"));
        if (dirfd < 0 || stop_domain(dirfd, label, log ? log : "the Domain's coordinator.log",
                                     id, p, w) < 0)
            failed++;
    }
    json_decref(all);
    if (!found)
        printf("no Domain%s%s%s is running for the workspace %s\n", profile ? " of profile '" : "",
               profile ? profile : "", profile ? "'" : "", ws);
    return failed ? LZ_EXIT_FAILURE : LZ_EXIT_OK;
}
