/* SPDX-License-Identifier: Apache-2.0
 *
 * The Domain a 'lazaret state' subcommand acts on: chosen by ID prefix,
 * or the workspace's (of --profile P), through store/domain_root.h; what
 * its store and its coordinator say about it; the header every
 * subcommand prints first.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/state.h"
#include "common/text.h"
#include "common/util.h"
#include "config/digest.h"
#include "config/resolve.h"
#include "store/domain_root.h"

json_t *state_running_by_id(json_t *running, const char *id)
{
    size_t i;
    json_t *d;
    json_array_foreach(running, i, d)
    {
        const char *rid = json_string_value(json_object_get(d, "domain_id"));
        if (rid && strcmp(rid, id) == 0)
            return d;
    }
    return NULL;
}

void state_target_clear(state_target *t)
{
    if (t->droot >= 0)
        close(t->droot);
    free(t->droot_label);
    free(t->store_error);
    lz_domain_summary_clear(&t->sum);
    json_decref(t->status);
    memset(t, 0, sizeof(*t));
    t->droot = -1;
}

int state_select_target(const lz_global_options *g, const state_opts *o, state_target *t,
                        lz_error **err)
{
    _cleanup_free_ char *storage = lz_storage_root_choose(g->config_path, err);
    if (!storage)
        return -1;
    _cleanup_free_ char *domains = lz_xasprintf("%s/domains", storage);
    _cleanup_close_ int dfd = open(domains, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0 && errno != ENOENT)
        return lz_error_set(err, errno, "cannot read %s", domains);
    _cleanup_free_ char *ws = NULL;
    char want[65] = "";
    lz_domain_choice choice = { .id_prefix = o->id_prefix, .profile = o->profile };
    if (!o->id_prefix) {
        ws = lz_workspace_choose(o->workspace, err);
        if (!ws)
            return -1;
        choice.workspace = ws;
        if (o->profile) {
            uint8_t d[LZ_DIGEST_LEN];
            if (lz_domain_id_v1(o->profile, ws, d, err) < 0)
                return -1;
            lz_digest_hex(d, want);
            choice.id = want;
        }
    }
    if (lz_domain_root_choose(dfd, domains, &choice, t->id, err) < 0)
        return -1;
    t->droot_label = lz_xasprintf("%s/%s", domains, t->id);
    t->droot = openat(dfd, t->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (t->droot < 0) {
        lz_error_set(err, errno, "cannot open the Domain Root %s", t->droot_label);
        return lz_error_hint(err,
                             "it must be a directory of yours, not a symlink; 'lazaret "
                             "state verify %.12s' says what is wrong",
                             t->id);
    }
    lz_error *e2 = NULL;
    if (lz_store_read_summary(t->droot, &t->sum, &e2) < 0)
        t->store_error = lz_xstrdup(e2->message);
    lz_error_free(e2);
    /* Running? Its lock (the truth) and its status.json (what it says). */
    _cleanup_free_ char *rroot = NULL;
    json_t *running = lz_cli_running_domains(&rroot);
    if (!running)
        return lz_error_set(err, 0, "cannot read the running Domains");
    json_t *st = state_running_by_id(running, t->id);
    t->status = st ? json_incref(st) : NULL;
    json_decref(running);
    _cleanup_free_ char *rlabel = lz_xasprintf("%s/%s", rroot, t->id);
    _cleanup_close_ int rfd = open(rlabel, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    t->running = rfd >= 0 && lz_domain_lock_held(rfd);
    return 0;
}

void state_set_time(json_t *o, const char *key, json_t *secs)
{
    char when[32] = "";
    time_t t = (time_t) json_integer_value(secs);
    struct tm tm;
    if (json_is_integer(secs) && t > 0 && gmtime_r(&t, &tm))
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_object_set_new(o, key, when[0] ? json_string(when) : json_null());
}

json_t *state_target_header(const state_target *t)
{
    json_t *o = json_object();
    json_object_set_new(o, "domain_id", json_string(t->id));
    json_object_set_new(o, "domain_root", json_string(t->droot_label));
    json_object_set_new(o, "profile", t->store_error ? json_null() : json_string(t->sum.profile));
    json_object_set_new(o, "workspace",
                        t->store_error ? json_null() : json_string(t->sum.workspace));
    if (t->store_error)
        json_object_set_new(o, "store_error", json_string(t->store_error));
    json_object_set_new(o, "running", json_boolean(t->running));
    if (t->status) {
        json_object_set_new(o, "generation", json_incref(json_object_get(t->status, "generation")));
        json_object_set_new(
            o, "sessions",
            json_integer((json_int_t) json_array_size(json_object_get(t->status, "sessions"))));
    }
    return o;
}

void state_print_header(const state_target *t)
{
    printf("Domain %s\n", t->id);
    if (t->store_error) {
        printf("  store:       cannot be read: %s\n", t->store_error);
    } else {
        _cleanup_free_ char *ws = lz_text_printable(t->sum.workspace);
        printf("  profile:     %s\n  workspace:   %s\n", t->sum.profile, ws);
    }
    printf("  root:        %s\n", t->droot_label);
    if (t->running && t->status)
        printf("  running:     yes, generation %lld, %zu session(s) (read without "
               "disturbing it)\n",
               (long long) json_integer_value(json_object_get(t->status, "generation")),
               json_array_size(json_object_get(t->status, "sessions")));
    else if (t->running)
        printf("  running:     its coordinator holds the Domain lock (starting or tearing "
               "down)\n");
    else
        printf("  running:     no\n");
}

/* select_target, reporting its error: 0, or -1 with t cleared. */
int state_select_or_report(const lz_global_options *g, const state_opts *opts, state_target *t)
{
    lz_error *err = NULL;
    if (state_select_target(g, opts, t, &err) == 0)
        return 0;
    lz_error_report(err, stderr);
    lz_error_free(err);
    state_target_clear(t);
    return -1;
}
