/* SPDX-License-Identifier: Apache-2.0
 *
 * lazaret state list [--json]   (spec 3.9, State Inspection; issue 12)
 *
 * Every Domain of this user that has state on disk, running or not: for
 * each <data_root>/domains/<id>/ its store's profile and workspace, when it
 * was last used, how much its persistent directories (state/) and its
 * git-ignored copies (ignored/) take, and, when its coordinator runs, the
 * running generation and sessions (that coordinator's status.json).
 *
 * Reads only. The store is opened read-only (a running coordinator is not
 * disturbed); the sizes come from a walk that never follows a symlink and
 * is bounded, since what is under state/ and ignored/ was written by a
 * sandbox (docs/security.md: untrusted on every later use).
 *
 * inspect, verify and reset are not built yet and say so.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/error.h"
#include "common/util.h"
#include "config/resolve.h"
#include "store/domain_store.h"

const char lz_usage_state[] =
    "Usage: lazaret [--config FILE] state list [--json]\n"
    "\n"
    "list  every Domain of your user with state on disk, running or not: profile,\n"
    "      workspace, last use, the size of its persistent directories and of its\n"
    "      git-ignored copies, and its running generation and sessions.\n"
    "\n"
    "inspect, verify and reset are not available yet in this version.\n"
    "\n"
    "Options:\n"
    "  --json  print one JSON array\n";

/* A walk of what a sandbox wrote: at most this deep and this many entries
 * (beyond, the size is a lower bound and says so). */
#define WALK_MAX_DEPTH 256
#define WALK_MAX_ENTRIES 2000000

typedef struct walk {
    unsigned long long bytes;   /* allocated bytes (st_blocks * 512) */
    unsigned long long entries;
    bool partial;               /* unreadable parts, or a bound reached */
} walk;

static void walk_dir(int fd, unsigned depth, walk *w)
{
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        w->partial = true;
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (++w->entries > WALK_MAX_ENTRIES) {
            w->partial = true;
            break;
        }
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            w->partial = true;
            continue;
        }
        w->bytes += (unsigned long long) st.st_blocks * 512ULL;
        if (!S_ISDIR(st.st_mode))
            continue;
        if (depth >= WALK_MAX_DEPTH) {
            w->partial = true;
            continue;
        }
        int sub = openat(dirfd(d), e->d_name,
                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (sub < 0) {
            w->partial = true;
            continue;
        }
        walk_dir(sub, depth + 1, w);
    }
    closedir(d);
}

/* The size of dirfd's child `name` (a directory), or a zero walk. */
static walk size_of(int parent, const char *name)
{
    walk w = { 0 };
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0)
        walk_dir(fd, 0, &w);
    else if (errno != ENOENT)
        w.partial = true;
    return w;
}

static void human(unsigned long long b, char *out, size_t n)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    double v = (double) b;
    size_t u = 0;
    while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(out, n, "%llu B", b);
    else
        snprintf(out, n, "%.1f %s", v, units[u]);
}

static json_t *running_by_id(json_t *running, const char *id)
{
    size_t i;
    json_t *d;
    json_array_foreach(running, i, d) {
        const char *rid = json_string_value(json_object_get(d, "domain_id"));
        if (rid && strcmp(rid, id) == 0)
            return d;
    }
    return NULL;
}

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
    walk st = size_of(droot, "state"), ig = size_of(droot, "ignored");
    json_object_set_new(o, "state_bytes", json_integer((json_int_t) st.bytes));
    json_object_set_new(o, "ignored_bytes", json_integer((json_int_t) ig.bytes));
    json_object_set_new(o, "sizes_partial", json_boolean(st.partial || ig.partial));
    json_t *r = running_by_id(running, id);
    json_object_set_new(o, "running", json_boolean(r != NULL));
    if (r) {
        json_object_set_new(o, "generation", json_incref(json_object_get(r, "generation")));
        json_object_set_new(o, "sessions",
                            json_integer((json_int_t) json_array_size(json_object_get(r,
                                                                                 "sessions"))));
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
    human((unsigned long long) json_integer_value(json_object_get(o, "state_bytes")), a,
          sizeof(a));
    human((unsigned long long) json_integer_value(json_object_get(o, "ignored_bytes")), b,
          sizeof(b));
    printf("  on disk:    %s persistent, %s git-ignored copies%s\n", a, b,
           json_is_true(json_object_get(o, "sizes_partial")) ? " (at least: some parts "
                                                                "unreadable)"
                                                              : "");
}

static int state_list(bool as_json, const lz_global_options *g)
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
            if (strlen(e->d_name) != 64 || strspn(e->d_name, "0123456789abcdef") != 64)
                continue;
            int droot = openat(dirfd(d), e->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW |
                                                        O_CLOEXEC);
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
        json_array_foreach(all, i, o)
            print_entry(o);
    }
    json_decref(all);
    json_decref(running);
    return LZ_EXIT_OK;
}

int lz_cmd_state(int argc, char **argv, const lz_global_options *g)
{
    if (argc < 2)
        return lz_cli_usage_error("state", "which one: list (inspect, verify and reset are not "
                                           "available yet)");
    const char *sub = argv[1];
    if (strcmp(sub, "list") == 0) {
        bool as_json = false;
        for (int i = 2; i < argc; i++) {
            if (strcmp(argv[i], "--json") == 0)
                as_json = true;
            else
                return lz_cli_usage_error("state", "unexpected argument '%s'", argv[i]);
        }
        return state_list(as_json, g);
    }
    if (strcmp(sub, "inspect") == 0 || strcmp(sub, "verify") == 0 || strcmp(sub, "reset") == 0) {
        lz_error *err = NULL;
        lz_error_set(&err, 0, "'lazaret state %s' is not available yet in this version", sub);
        lz_error_hint(&err, "'lazaret state list' shows every Domain and its size; its state "
                            "lives in <data_root>/domains/<id>/ (docs/runtime.md)");
        lz_error_report(err, stderr);
        lz_error_free(err);
        return LZ_EXIT_FAILURE;
    }
    return lz_cli_usage_error("state", "unknown subcommand '%s'", sub);
}
