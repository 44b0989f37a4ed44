/* SPDX-License-Identifier: Apache-2.0
 *
 * lazaret state list and lazaret state inspect: what a Domain has on disk,
 * read only (the store opened read-only, a running coordinator not
 * disturbed).
 */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/state.h"
#include "common/text.h"
#include "common/util.h"
#include "config/resolve.h"
#include "coordinator/bootstrap.h"
#include "oci/layout.h"
#include "store/domain_root.h"
#include "ns/userns.h"

static json_t *domain_entry(int droot, const char *id, json_t *running)
{
    lz_domain_summary s = { 0 };
    lz_error *err = NULL;
    json_t *o = json_object();
    json_object_set_new(o, "domain_id", json_string(id));
    if (lz_store_read_summary(droot, &s, &err) == 0) {
        json_object_set_new(o, "profile", json_string(s.profile));
        json_object_set_new(o, "workspace", json_string(s.workspace));
        json_object_set_new(o, "generations", json_integer(s.generations));
        json_object_set_new(o, "sessions_ever", json_integer(s.sessions));
        char when[32] = "";
        time_t t = (time_t) s.last_used;
        struct tm tm;
        if (s.last_used > 0 && gmtime_r(&t, &tm))
            strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
        json_object_set_new(o, "last_used", when[0] ? json_string(when) : json_null());
    } else {
        json_object_set_new(o, "error", json_string(err->message));
    }
    lz_error_free(err);
    lz_domain_summary_clear(&s);
    state_walk st = state_persistent_size(droot), ig = state_size_of(droot, "ignored");
    json_object_set_new(o, "state_bytes", json_integer((json_int_t) st.bytes));
    json_object_set_new(o, "ignored_bytes", json_integer((json_int_t) ig.bytes));
    json_object_set_new(o, "sizes_partial", json_boolean(st.partial || ig.partial));
    json_t *r = state_running_by_id(running, id);
    json_object_set_new(o, "running", json_boolean(r != NULL));
    if (r) {
        json_object_set_new(o, "generation", json_incref(json_object_get(r, "generation")));
        json_object_set_new(
            o, "sessions",
            json_integer((json_int_t) json_array_size(json_object_get(r, "sessions"))));
    }
    return o;
}

static void print_entry(json_t *o)
{
    const char *err = json_string_value(json_object_get(o, "error"));
    printf("Domain %.16s…", json_string_value(json_object_get(o, "domain_id")));
    if (err) {
        printf("  (its store cannot be read: %s)\n", err);
        return;
    }
    printf("  profile '%s'", json_string_value(json_object_get(o, "profile")));
    if (json_is_true(json_object_get(o, "running")))
        printf("  running: generation %lld, %lld session(s)\n",
               (long long) json_integer_value(json_object_get(o, "generation")),
               (long long) json_integer_value(json_object_get(o, "sessions")));
    else
        printf("  not running\n");
    /* The workspace path is the user's own, but may hold any byte. */
    _cleanup_free_ char *ws = lz_text_printable(json_string_value(json_object_get(o, "workspace")));
    printf("  workspace:  %s\n", ws);
    const char *when = json_string_value(json_object_get(o, "last_used"));
    printf("  last used:  %s\n", when ? when : "never");
    char a[32], b[32];
    state_human((unsigned long long) json_integer_value(json_object_get(o, "state_bytes")), a,
                sizeof(a));
    state_human((unsigned long long) json_integer_value(json_object_get(o, "ignored_bytes")), b,
                sizeof(b));
    printf("  on disk:    %s persistent, %s git-ignored copies%s\n", a, b,
           json_is_true(json_object_get(o, "sizes_partial")) ? " (at least: some parts "
                                                               "unreadable)"
                                                             : "");
}

int state_list_all(bool as_json, const lz_global_options *g)
{
    lz_error *err = NULL;
    _cleanup_free_ char *storage = lz_storage_root_choose(g->config_path, &err);
    if (!storage) {
        lz_error_report(err, stderr);
        lz_error_free(err);
        return LZ_EXIT_FAILURE;
    }
    _cleanup_free_ char *rroot = NULL;
    json_t *running = lz_cli_running_domains(&rroot);
    if (!running)
        return LZ_EXIT_FAILURE;
    json_t *all = json_array();
    _cleanup_free_ char *domains = lz_xasprintf("%s/domains", storage);
    DIR *d = opendir(domains);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!lz_domain_id_valid(e->d_name))
                continue;
            int droot = openat(dirfd(d), e->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (droot < 0)
                continue;
            json_array_append_new(all, domain_entry(droot, e->d_name, running));
            close(droot);
        }
        closedir(d);
    } else if (errno != ENOENT) {
        lz_error_set(&err, errno, "cannot read %s", domains);
        lz_error_report(err, stderr);
        lz_error_free(err);
        json_decref(all);
        json_decref(running);
        return LZ_EXIT_FAILURE;
    }
    if (as_json) {
        json_dumpf(all, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
        fputc('\n', stdout);
    } else if (json_array_size(all) == 0) {
        printf("No Domain has state in %s.\n", domains);
    } else {
        size_t i;
        json_t *o;
        json_array_foreach(all, i, o) print_entry(o);
    }
    json_decref(all);
    json_decref(running);
    return LZ_EXIT_OK;
}

/* ---- inspect ------------------------------------------------------------- */

static json_t *inspect_persistent(int droot)
{
    json_t *arr = json_array();
    size_t n, total;
    char **names = state_list_dir(droot, "state", LIST_MAX, &n, &total);
    _cleanup_close_ int state =
        openat(droot, "state", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    for (size_t i = 0; names && state >= 0 && i < n; i++) {
        json_t *o = json_object();
        _cleanup_free_ char *path = lz_state_name_unescape(names[i]);
        json_object_set_new(o, "path", path ? json_string(path) : json_null());
        _cleanup_free_ char *rel = lz_xasprintf("state/%s", names[i]);
        json_t *relj = json_string(rel);
        json_object_set_new(o, "dir", relj ? relj : json_null());
        _cleanup_close_ int dir =
            openat(state, names[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        state_walk w = dir >= 0 ? state_size_of(dir, "upper") : (state_walk){ .partial = true };
        json_object_set_new(o, "bytes", json_integer((json_int_t) w.bytes));
        json_object_set_new(o, "entries", json_integer((json_int_t) w.entries));
        json_object_set_new(o, "partial", json_boolean(w.partial));
        json_array_append_new(arr, o);
    }
    state_free_names(names, n);
    return arr;
}

static json_t *inspect_ignored(int droot)
{
    json_t *o = json_object();
    size_t n, total;
    char **names = state_list_dir(droot, "ignored", LIST_MAX, &n, &total);
    state_walk w = state_size_of(droot, "ignored");
    json_object_set_new(o, "count", json_integer((json_int_t) total));
    json_object_set_new(o, "bytes", json_integer((json_int_t) w.bytes));
    json_object_set_new(o, "partial", json_boolean(w.partial));
    json_t *few = json_array();
    for (size_t i = 0; i < n && i < 5; i++) {
        /* A name the sandbox may have chosen: printable only. */
        _cleanup_free_ char *p = lz_text_printable(names[i]);
        json_array_append_new(few, json_string(p));
    }
    json_object_set_new(o, "names", few);
    state_free_names(names, n);
    return o;
}

/* The profile's volumes, when the profile still resolves for the workspace;
 * otherwise null and why (the Domain's state does not depend on it). */
static void inspect_volumes(const lz_global_options *g, const state_target *t, json_t *out)
{
    if (t->store_error) {
        json_object_set_new(out, "volumes", json_null());
        json_object_set_new(out, "volumes_error", json_string("its store cannot be read"));
        return;
    }
    lz_resolved_config *cfg = NULL;
    lz_error *err = NULL;
    lz_load_request req = { .config_path = g->config_path,
                            .profile = t->sum.profile,
                            .workspace = t->sum.workspace,
                            .layout = lz_sandbox_layout_production() };
    if (lz_config_load(&req, &cfg, &err) < 0) {
        json_object_set_new(out, "volumes", json_null());
        _cleanup_free_ char *m = lz_text_printable(err->message);
        json_object_set_new(out, "volumes_error", json_string(m));
        lz_error_free(err);
        return;
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < cfg->n_volumes; i++) {
        const lz_resolved_volume *v = &cfg->volumes[i];
        json_array_append_new(
            arr,
            json_pack("{s:s, s:s, s:s, s:s}", "container", v->container, "source", v->source.label,
                      "access", v->access == LZ_ACCESS_READ_ONLY ? "read-only" : "read-write",
                      "kind", v->kind == LZ_VOLUME_FILE ? "file" : "directory"));
    }
    json_object_set_new(out, "volumes", arr);
    lz_resolved_config_free(cfg);
}

static void print_inspect(json_t *o)
{
    char a[32];
    json_t *su = json_object_get(o, "sandbox_user");
    if (json_is_object(su)) {
        json_int_t uid = json_integer_value(json_object_get(su, "uid"));
        printf("  runs as:     uid %lld gid %lld%s\n", (long long) uid,
               (long long) json_integer_value(json_object_get(su, "gid")),
               uid ? " (the image's user; your files are its own inside)" : " (root)");
    }
    json_t *pers = json_object_get(o, "persistent");
    if (json_array_size(pers) == 0)
        printf("  persistent:  none on disk\n");
    size_t i;
    json_t *p;
    json_array_foreach(pers, i, p)
    {
        state_human((unsigned long long) json_integer_value(json_object_get(p, "bytes")), a,
                    sizeof(a));
        const char *path = json_string_value(json_object_get(p, "path"));
        _cleanup_free_ char *dir = lz_text_printable(json_string_value(json_object_get(p, "dir")));
        printf("  persistent:  %s  %s, %lld entries%s  (%s/upper)\n", path ? path : "(unknown)", a,
               (long long) json_integer_value(json_object_get(p, "entries")),
               json_is_true(json_object_get(p, "partial")) ? " (at least)" : "", dir);
    }
    json_t *ig = json_object_get(o, "ignored");
    state_human((unsigned long long) json_integer_value(json_object_get(ig, "bytes")), a,
                sizeof(a));
    printf("  ignored:     %lld git-ignored cop%s, %s",
           (long long) json_integer_value(json_object_get(ig, "count")),
           json_integer_value(json_object_get(ig, "count")) == 1 ? "y" : "ies", a);
    json_t *nm;
    json_array_foreach(json_object_get(ig, "names"), i, nm)
        printf("%s%s", i == 0 ? ": " : ", ", json_string_value(nm));
    if ((size_t) json_integer_value(json_object_get(ig, "count")) >
        json_array_size(json_object_get(ig, "names")))
        printf(", …");
    printf("\n");
    json_t *vols = json_object_get(o, "volumes");
    if (!vols) {
        /* not asked */
    } else if (json_is_null(vols)) {
        printf("  volumes:     unknown (the profile does not resolve: %s)\n",
               json_string_value(json_object_get(o, "volumes_error")));
    } else if (json_array_size(vols) == 0) {
        printf("  volumes:     none\n");
    } else {
        json_t *v;
        json_array_foreach(vols, i, v)
        {
            _cleanup_free_ char *src =
                lz_text_printable(json_string_value(json_object_get(v, "source")));
            printf("  volume:      %s <- %s (%s %s)\n",
                   json_string_value(json_object_get(v, "container")), src,
                   json_string_value(json_object_get(v, "access")),
                   json_string_value(json_object_get(v, "kind")));
        }
    }
    json_t *gens = json_object_get(o, "generations");
    if (gens) {
        printf("  generations: %lld kept in the store, newest first:\n",
               (long long) json_integer_value(json_object_get(o, "generations_kept")));
        json_t *gn;
        json_array_foreach(gens, i, gn)
        {
            const char *s = json_string_value(json_object_get(gn, "started"));
            const char *e = json_string_value(json_object_get(gn, "ended"));
            const char *fp = json_string_value(json_object_get(gn, "fingerprint"));
            printf("    %-5lld %-12s %s – %s  configuration %.12s…\n",
                   (long long) json_integer_value(json_object_get(gn, "id")),
                   json_string_value(json_object_get(gn, "state")), s ? s : "?", e ? e : "…",
                   fp ? fp : "?");
        }
    }
    json_t *escs = json_object_get(o, "escalations");
    if (json_array_size(escs) == 0) {
        printf("  escalations: none recorded\n");
    } else {
        printf("  escalations: the newest %zu, newest first:\n", json_array_size(escs));
        json_t *e;
        json_array_foreach(escs, i, e)
        {
            const char *when = json_string_value(json_object_get(e, "received"));
            printf("    %s  generation %lld  %s", when ? when : "?",
                   (long long) json_integer_value(json_object_get(e, "generation")),
                   json_string_value(json_object_get(e, "state")));
            json_t *st = json_object_get(e, "exit_status");
            if (json_is_integer(st) && json_integer_value(st) >= 0)
                printf(" (status %lld)", (long long) json_integer_value(st));
            const char *dec = json_string_value(json_object_get(e, "decision"));
            _cleanup_free_ char *pd = dec ? lz_text_printable(dec) : NULL;
            printf("  decision: %s  argv:", pd ? pd : "none");
            /* argv is the sandbox's: every element escaped. */
            size_t k;
            json_t *arg;
            json_array_foreach(json_object_get(e, "argv"), k, arg)
            {
                if (k >= 8) {
                    printf(" …");
                    break;
                }
                _cleanup_free_ char *safe =
                    lz_text_printable(json_string_value(arg) ? json_string_value(arg) : "");
                printf(" '%.60s'", safe);
            }
            printf("\n");
        }
    }
}

int state_inspect(const lz_global_options *g, const state_opts *opts)
{
    state_target t = { .droot = -1 };
    lz_error *err = NULL;
    if (state_select_or_report(g, opts, &t) < 0)
        return LZ_EXIT_FAILURE;
    json_t *o = state_target_header(&t);
    json_object_set_new(o, "persistent", inspect_persistent(t.droot));
    json_object_set_new(o, "ignored", inspect_ignored(t.droot));
    lz_idmap user;
    int known = lz_sandbox_user_read(t.droot, &user);
    json_object_set_new(o, "sandbox_user",
                        known == 1 ? json_pack("{s:I, s:I}", "uid", (json_int_t) user.uid, "gid",
                                               (json_int_t) user.gid)
                                   : json_null());
    inspect_volumes(g, &t, o);
    json_t *hist = NULL;
    if (!t.store_error && lz_store_read_history(t.droot, 20, 10, &hist, &err) == 0) {
        json_t *gens = json_object_get(hist, "generations"), *gn;
        size_t i;
        json_array_foreach(gens, i, gn)
        {
            state_set_time(gn, "started", json_object_get(gn, "started_at"));
            state_set_time(gn, "ended", json_object_get(gn, "ended_at"));
        }
        json_t *escs = json_object_get(hist, "escalations"), *e;
        json_array_foreach(escs, i, e)
        {
            state_set_time(e, "received", json_object_get(e, "received_at"));
            state_set_time(e, "ended", json_object_get(e, "ended_at"));
            /* Stored as the JSON text of the argv array. */
            const char *raw = json_string_value(json_object_get(e, "argv"));
            json_t *argv = raw ? json_loads(raw, JSON_REJECT_DUPLICATES, NULL) : NULL;
            json_object_set_new(e, "argv", json_is_array(argv) ? argv : json_array());
            if (argv && !json_is_array(argv))
                json_decref(argv);
        }
        json_object_update(o, hist);
        json_decref(hist);
    } else if (err) {
        json_object_set_new(o, "history_error", json_string(err->message));
        lz_error_free(lz_error_take(&err));
    }
    if (opts->as_json) {
        json_dumpf(o, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
        fputc('\n', stdout);
    } else {
        state_print_header(&t);
        print_inspect(o);
        const char *he = json_string_value(json_object_get(o, "history_error"));
        if (he)
            printf("  history:     cannot be read: %s\n", he);
    }
    json_decref(o);
    state_target_clear(&t);
    return LZ_EXIT_OK;
}
