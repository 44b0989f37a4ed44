/* SPDX-License-Identifier: Apache-2.0 */
#include "coordinator/escalation.h"
#include "coordinator/status.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/policy.h"
#include "supervisor/sidecar.h"

const char *generation_state_name(gen_state st)
{
    switch (st) {
    case G_STARTING: return "starting";
    case G_RUNNING: return "running";
    case G_FAILED: return "failed";
    case G_TEARDOWN: return "tearing_down";
    default: return "unknown";
    }
}

void publish_status(coord *c)
{
    json_t *sessions = json_array();
    for (size_t i = 0; i < MAX_SESSIONS; i++) {
        session *s = &c->sessions[i];
        if (s->state == S_RUNNING || s->state == S_QUEUED)
            json_array_append_new(sessions, json_pack("{s:s, s:b, s:i, s:s}", "session_id", s->id,
                                                      "interactive", s->run.interactive,
                                                      "client_pid", (int) s->cli_pid, "state",
                                                      s->state == S_RUNNING ? "running" : "queued"));
    }
    char *log = lz_domain_log_label(c->a->cfg);
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:i, s:s, s:s, s:o, s:o, s:o}",
                          "domain_id",
                          c->id_hex, "profile", c->a->cfg->profile, "workspace",
                          c->a->cfg->workspace.label, "configuration_fingerprint", c->fp_hex,
                          "generation", (json_int_t) c->generation, "state",
                          generation_state_name(c->state), "coordinator_pid", (int) getpid(),
                          "container_id", c->container_id, "log", log, "sessions", sessions,
                          "network_policy", lz_derived_network_policy(c->a->cfg, LZ_NET_RESOLVER),
                          "escalations", escalation_status(c));
    free(log);
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_ENSURE_ASCII);
    json_decref(o);
    if (!text)
        return;
    int fd = openat(c->a->runtime_dir_fd, "status.json.tmp",
                    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
        size_t n = strlen(text);
        bool ok = write(fd, text, n) == (ssize_t) n;
        close(fd);
        if (ok)
            renameat(c->a->runtime_dir_fd, "status.json.tmp", c->a->runtime_dir_fd,
                     "status.json");
    }
    free(text);
}

void unpublish_status(coord *c)
{
    unlinkat(c->a->runtime_dir_fd, "status.json", 0);
}
