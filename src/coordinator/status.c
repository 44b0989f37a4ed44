/* SPDX-License-Identifier: Apache-2.0 */
#include "coordinator/escalation.h"
#include "coordinator/status.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/digest.h"
#include "config/policy.h"
#include "fs/atomic.h"
#include "supervisor/sidecar.h"

const char *generation_state_name(gen_state st)
{
    switch (st) {
    case G_STARTING:
        return "starting";
    case G_RUNNING:
        return "running";
    case G_FAILED:
        return "failed";
    case G_TEARDOWN:
        return "tearing_down";
    default:
        return "unknown";
    }
}

void publish_status(coord *c)
{
    json_t *sessions = json_array();
    for (size_t i = 0; i < MAX_SESSIONS; i++) {
        session *s = &c->sessions[i];
        if (s->state == S_RUNNING || s->state == S_QUEUED)
            json_array_append_new(
                sessions, json_pack("{s:s, s:b, s:i, s:s}", "session_id", s->id, "interactive",
                                    s->run.interactive, "client_pid", (int) s->cli_pid, "state",
                                    s->state == S_RUNNING ? "running" : "queued"));
    }
    char *log = lz_domain_log_label(c->a->cfg);
    json_t *o = json_pack(
        "{s:s, s:s, s:s, s:s, s:I, s:s, s:i, s:s, s:s, s:o, s:o, s:o}", "domain_id", c->id_hex,
        "profile", c->a->cfg->profile, "workspace", c->a->cfg->workspace.label,
        "configuration_fingerprint", c->fp_hex, "generation", (json_int_t) c->generation, "state",
        generation_state_name(c->state), "coordinator_pid", (int) getpid(), "container_id",
        c->container_id, "log", log, "sessions", sessions, "network_policy",
        lz_derived_network_policy(c->a->cfg, LZ_NET_RESOLVER), "escalations", escalation_status(c));
    free(log);
    /* Each part's digest, so that a CLI refused for another fingerprint can
     * say what changed (lz_client_changed_parts, issue 26). */
    lz_config_part parts[LZ_CONFIG_PARTS];
    lz_error *perr = NULL;
    if (lz_configuration_parts(c->a->cfg, parts, &perr) == 0) {
        json_t *po = json_object();
        for (size_t i = 0; i < LZ_CONFIG_PARTS; i++) {
            char hex[65];
            lz_digest_hex(parts[i].digest, hex);
            json_object_set_new(po, parts[i].name, json_string(hex));
        }
        json_object_set_new(o, "configuration_parts", po);
    }
    lz_error_free(perr);
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_ENSURE_ASCII);
    json_decref(o);
    if (!text)
        return;
    /* Replaced whole (readers see the old file or the new one). No fsync:
     * the runtime directory is in RAM, and status.json describes a running
     * process only. Best effort: a failure keeps the previous one. */
    lz_error *err = NULL;
    if (lz_write_atomic(c->a->runtime_dir_fd, "status.json", text, strlen(text), 0600,
                        LZ_ATOMIC_NO_SYNC, "the status file", &err) < 0)
        lz_error_free(err);
    free(text);
}

void unpublish_status(coord *c)
{
    unlinkat(c->a->runtime_dir_fd, "status.json", 0);
}
