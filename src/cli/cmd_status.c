/* SPDX-License-Identifier: Apache-2.0
 *
 * lazaret status [--json]
 *
 * The running Domains of this user: for each Domain runtime directory whose
 * lock is held by a coordinator, the status that coordinator publishes
 * (status.json: profile, workspace, generation, state, sessions, and the
 * DerivedNetworkPolicy in force), and the Domain's denials (the count and
 * the last DENIALS_SHOWN records of its denial log, store/denials.h: read
 * from its storage Domain Root through descriptors; their text is the
 * sandbox's, escaped by the reader). Reads only; never takes a lock.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/error.h"
#include "common/options.h"
#include "common/text.h"
#include "common/util.h"
#include "config/resolve.h"
#include "config/source.h"
#include "store/denials.h"
#include "store/domain_root.h"

#define DENIALS_SHOWN 3

const char lz_usage_status[] =
    "Usage: lazaret status [--json]\n"
    "\n"
    "Show the running Domains of your user: profile, workspace, generation,\n"
    "state, sessions, pending host escalation requests, the network policy in force,\n"
    "and the denials of its Network Sidecar (how many, and the last 3; all of them:\n"
    "'lazaret log').\n"
    "\n"
    "Options:\n"
    "  --json  print one JSON array\n";

static void print_text(json_t *d)
{
    printf("Domain %s\n", json_string_value(json_object_get(d, "domain_id")));
    printf("  profile:     %s\n", json_string_value(json_object_get(d, "profile")));
    printf("  workspace:   %s\n", json_string_value(json_object_get(d, "workspace")));
    printf("  generation:  %lld (%s), coordinator pid %lld\n",
           (long long) json_integer_value(json_object_get(d, "generation")),
           json_string_value(json_object_get(d, "state")),
           (long long) json_integer_value(json_object_get(d, "coordinator_pid")));
    const char *log = json_string_value(json_object_get(d, "log"));
    if (log)
        printf("  log:         %s\n", log);
    json_t *sessions = json_object_get(d, "sessions");
    printf("  sessions:    %zu\n", json_array_size(sessions));
    size_t i;
    json_t *s;
    json_array_foreach(sessions, i, s)
        printf("    %s  %s, client pid %lld\n", json_string_value(json_object_get(s, "session_id")),
               json_is_true(json_object_get(s, "interactive")) ? "terminal" : "streams",
               (long long) json_integer_value(json_object_get(s, "client_pid")));
    /* Pending host escalation requests: argv is the sandbox's, so every
     * element is escaped before it reaches the terminal. */
    json_t *escs = json_object_get(d, "escalations");
    if (json_array_size(escs) > 0) {
        printf("  escalations: %zu pending\n", json_array_size(escs));
        json_t *e;
        json_array_foreach(escs, i, e)
        {
            printf("    %.8s…  session %.8s…  %s:",
                   json_string_value(json_object_get(e, "request_id")),
                   json_string_value(json_object_get(e, "session_id")),
                   json_string_value(json_object_get(e, "state")));
            size_t k;
            json_t *a;
            json_array_foreach(json_object_get(e, "argv"), k, a)
            {
                _cleanup_free_ char *safe =
                    lz_text_printable(json_string_value(a) ? json_string_value(a) : "");
                printf(" '%s'", safe);
            }
            printf("\n");
        }
    }
    json_t *pol = json_object_get(d, "network_policy");
    printf("  network:     IPv4 default deny, IPv6 disabled, resolver %s\n",
           json_string_value(
               json_object_get(json_array_get(json_object_get(pol, "resolvers"), 0), "address")));
    json_t *r;
    json_array_foreach(json_object_get(pol, "prefix_rules"), i, r)
        printf("    %-5s %s\n", json_string_value(json_object_get(r, "action")),
               json_string_value(json_object_get(r, "network")));
    /* The lines were escaped when read (lz_denial_line_text). */
    json_t *den = json_object_get(d, "denials");
    if (json_is_string(json_object_get(den, "error"))) {
        printf("  denials:     cannot be read: %s\n",
               json_string_value(json_object_get(den, "error")));
    } else if (den) {
        json_int_t n = json_integer_value(json_object_get(den, "total"));
        const char *ws = json_string_value(json_object_get(d, "workspace"));
        _cleanup_free_ char *qws = lz_text_shell_quote(ws ? ws : "");
        _cleanup_free_ char *how =
            lz_xasprintf(" (all of them: lazaret log --profile %s --workspace %s)",
                         json_string_value(json_object_get(d, "profile"))
                             ? json_string_value(json_object_get(d, "profile"))
                             : "PROFILE",
                         qws);
        _cleanup_free_ char *safe = lz_text_printable(how);
        printf("  denials:     %lld%s\n", (long long) n, n ? safe : "");
        json_array_foreach(json_object_get(den, "last"), i, r)
            printf("    %s\n", json_string_value(r));
    }
}

/* d["denials"]: the total and the last records of the Domain's denial log
 * in its storage Domain Root (<storage>/domains/<id>/logs), or the error. */
static void add_denials(json_t *d, int domains_fd)
{
    const char *id = json_string_value(json_object_get(d, "domain_id"));
    /* No Storage Root to read (the configuration cannot be read now):
     * nothing is said about denials rather than something wrong. */
    if (!id || !lz_domain_id_valid(id) || domains_fd < 0)
        return;
    json_t *o = json_object();
    lz_error *err = NULL;
    lz_denial_summary sum = { 0 };
    _cleanup_close_ int droot =
        openat(domains_fd, id, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    _cleanup_close_ int logs = -1;
    if (droot < 0) {
        lz_error_set(&err, errno, "cannot open its Domain Root in the Storage Root");
    } else {
        logs = openat(droot, LZ_DROOT_LOGS, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (logs < 0 && errno != ENOENT)
            lz_error_set(&err, errno, "cannot open its logs directory");
        else if (logs >= 0 && lz_denial_summary_read(logs, DENIALS_SHOWN, &sum, &err) < 0)
            lz_error_prefix(&err, "its denial log");
    }
    if (err) {
        _cleanup_free_ char *msg = lz_xasprintf("%s%s%s", err->message, err->errnum ? ": " : "",
                                                err->errnum ? strerror(err->errnum) : "");
        json_object_set_new(o, "error", json_string(msg));
        lz_error_free(err);
    } else {
        json_object_set_new(o, "total", json_integer((json_int_t) sum.total));
        json_t *last = json_array();
        for (size_t i = 0; i < sum.n_last; i++)
            json_array_append_new(last, json_string(sum.last[i]));
        json_object_set_new(o, "last", last);
    }
    lz_denial_summary_clear(&sum);
    json_object_set_new(d, "denials", o);
}

/* The Storage Root's domains directory, or -1 when there is none to read
 * (status still shows what the coordinators publish). */
static int open_domains(const lz_global_options *g)
{
    lz_error *err = NULL;
    _cleanup_free_ char *storage = lz_storage_root_choose(g->config_path, &err);
    lz_error_free(err);
    if (!storage)
        return -1;
    _cleanup_free_ char *domains = lz_xasprintf("%s/domains", storage);
    return open(domains, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

json_t *lz_cli_running_domains(char **ret_root)
{
    const char *rt = getenv("XDG_RUNTIME_DIR");
    const char *what = NULL;
    _cleanup_free_ char *norm = rt && *rt ? lz_env_path_normalize(rt, &what) : NULL;
    if (!norm) {
        lz_error *err = NULL;
        lz_error_set(&err, 0, "XDG_RUNTIME_DIR is not set or not an absolute path");
        lz_error_hint(&err, "export XDG_RUNTIME_DIR=/run/user/$(id -u)");
        lz_error_report(err, stderr);
        lz_error_free(err);
        return NULL;
    }
    char *domains = lz_xasprintf("%s/lazaret/domains", norm);
    json_t *all = json_array();
    DIR *d = opendir(domains);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.' || strlen(e->d_name) != 64)
                continue;
            int dfd = openat(dirfd(d), e->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (dfd < 0)
                continue;
            json_t *st = lz_domain_running_status(dfd);
            if (st)
                json_array_append_new(all, st);
            close(dfd);
        }
        closedir(d);
    }
    *ret_root = domains;
    return all;
}

int lz_cmd_status(int argc, char **argv, const lz_global_options *g)
{
    static const lz_option options[] = { { "json", 0, NULL, 0 } };
    bool as_json = false;
    int r = lz_cli_parse_flags("status", options, LZ_ARRAY_SIZE(options), argc, argv, 1, &as_json);
    if (r != LZ_EXIT_OK)
        return r;
    _cleanup_free_ char *root = NULL;
    json_t *all = lz_cli_running_domains(&root);
    if (!all)
        return LZ_EXIT_FAILURE;
    if (json_array_size(all) > 0) {
        _cleanup_close_ int domains = open_domains(g);
        size_t i;
        json_t *v;
        json_array_foreach(all, i, v) add_denials(v, domains);
    }
    if (as_json) {
        json_dumpf(all, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
        fputc('\n', stdout);
    } else if (json_array_size(all) == 0) {
        printf("No Domain is running.\n");
    } else {
        size_t i;
        json_t *v;
        json_array_foreach(all, i, v) print_text(v);
    }
    json_decref(all);
    return LZ_EXIT_OK;
}
