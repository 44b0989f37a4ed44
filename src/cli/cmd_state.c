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
 * inspect, verify and reset act on one Domain (by ID prefix, or the
 * workspace's and profile's): inspect and verify read only, like list;
 * reset removes state/ and ignored/ through descriptors (fs/remove.h)
 * while holding the Domain lock (docs/runtime.md "State inspection and
 * reset"); fix-ownership gives back to the developer what a sandbox left
 * in the workspace and read-write volumes owned by a subordinate id, as
 * every teardown now does (supervisor/giveback.h; docs/runtime.md
 * "Ownership give-back"), for what older versions left.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/error.h"
#include "common/io.h"
#include "common/text.h"
#include "common/util.h"
#include "config/digest.h"
#include "config/resolve.h"
#include "config/source.h"
#include "coordinator/bootstrap.h"
#include "coordinator/coordinator.h"
#include "fs/confined.h"
#include "fs/remove.h"
#include "ns/userns.h"
#include "store/domain_store.h"
#include "supervisor/giveback.h"

const char lz_usage_state[] =
    "Usage: lazaret [--config FILE] state list [--json]\n"
    "       lazaret [--config FILE] state inspect [DOMAIN] [--profile P] [--workspace DIR] [--json]\n"
    "       lazaret [--config FILE] state verify  [DOMAIN] [--profile P] [--workspace DIR] [--json]\n"
    "       lazaret [--config FILE] state reset   [DOMAIN] [--profile P] [--workspace DIR] [--stop]\n"
    "                                             [--yes] [--json]\n"
    "       lazaret [--config FILE] state fix-ownership [DOMAIN] [--profile P] [--workspace DIR]\n"
    "                                             [--stop] [--json]\n"
    "\n"
    "list     every Domain of your user with state on disk, running or not: profile,\n"
    "         workspace, last use, the size of its persistent directories and of its\n"
    "         git-ignored copies, and its running generation and sessions.\n"
    "inspect  one Domain: its persistent directories and git-ignored copies with their\n"
    "         sizes, the profile's volumes, its recent generations and host escalations.\n"
    "verify   one Domain's structure: the store (schema, SQLite integrity check), the\n"
    "         persistent directories' upper and work directories, ownership and modes,\n"
    "         no symlink where a directory belongs, no mount inside. Exits 1 on a problem.\n"
    "reset    remove one Domain's persistent directories and git-ignored copies; keeps\n"
    "         its store (history) and logs, never touches the workspace. Refused while\n"
    "         the Domain runs unless --stop; asks on a terminal, else needs --yes.\n"
    "fix-ownership  give back to you (uid and gid) what a sandbox left in the Domain's\n"
    "         workspace and read-write volumes owned by one of your subordinate ids, so\n"
    "         that you can change or remove it; setuid/setgid bits of those files are\n"
    "         cleared. Every teardown does this; this is for what older versions left.\n"
    "         Never follows a symlink or enters another mount. Refused while the Domain\n"
    "         runs unless --stop. Exits 1 when something could not be given back.\n"
    "\n"
    "inspect and verify only read: a running Domain is not disturbed.\n"
    "\n"
    "The Domain (inspect, verify, reset, fix-ownership): DOMAIN is a prefix of its ID (as 'state list'\n"
    "shows); otherwise the workspace's (chosen as for 'run'), of --profile P when the\n"
    "workspace has several.\n"
    "\n"
    "Options:\n"
    "  --profile P        the Domain of this profile\n"
    "  --workspace DIR    the Domain of this workspace (default: as for 'run')\n"
    "  --stop             reset, fix-ownership: stop the running Domain cleanly first\n"
    "  --yes              reset: do not ask (needed when stdin is not a terminal)\n"
    "  --json             print JSON\n";

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

/* The size of the persistent directories: the upper directory of each
 * state/<dir>/, what the sandbox wrote. Their overlay work directories are
 * overlayfs's own (work/work is mode 0, unreadable by design) and hold
 * nothing between generations. */
static walk state_size(int droot)
{
    walk total = { 0 };
    int fd = openat(droot, "state", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        total.partial = errno != ENOENT;
        return total;
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        total.partial = true;
        return total;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        int dir = openat(dirfd(d), e->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        walk w = dir >= 0 ? size_of(dir, "upper") : (walk){ .partial = true };
        if (dir >= 0)
            close(dir);
        total.bytes += w.bytes;
        total.entries += w.entries;
        total.partial |= w.partial;
    }
    closedir(d);
    return total;
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
    walk st = state_size(droot), ig = size_of(droot, "ignored");
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

/* ---- choosing one Domain (inspect, verify, reset) ------------------------ */

typedef struct state_opts {
    const char *profile;    /* --profile */
    const char *workspace;  /* --workspace */
    const char *id_prefix;  /* the positional argument */
    bool as_json, stop, yes;
} state_opts;

/* The Domain a subcommand acts on. */
typedef struct target {
    char id[65];
    int droot;               /* O_RDONLY|O_DIRECTORY, no symlink followed */
    char *droot_label;       /* <storage>/domains/<id> */
    lz_domain_summary sum;   /* from its store, when readable */
    char *store_error;       /* why not, otherwise NULL */
    json_t *status;          /* its coordinator's status.json when it runs */
    bool running;            /* its Domain lock is held */
} target;

static void target_clear(target *t)
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

static bool is_domain_name(const char *n)
{
    return strlen(n) == 64 && strspn(n, "0123456789abcdef") == 64;
}

/* One line naming a candidate Domain for an error: id, profile, workspace. */
static char *candidate_line(int domains_fd, const char *id)
{
    _cleanup_close_ int fd = openat(domains_fd, id, O_PATH | O_DIRECTORY | O_NOFOLLOW |
                                                        O_CLOEXEC);
    lz_domain_summary s = { 0 };
    lz_error *err = NULL;
    char *line;
    if (fd >= 0 && lz_store_read_summary(fd, &s, &err) == 0) {
        _cleanup_free_ char *ws = lz_text_printable(s.workspace);
        line = lz_xasprintf("%s  profile '%s'  workspace %s", id, s.profile, ws);
    } else {
        line = lz_xasprintf("%s  (its store cannot be read)", id);
    }
    lz_error_free(err);
    lz_domain_summary_clear(&s);
    return line;
}

static int refuse_candidates(lz_error **err, int domains_fd, char **ids, size_t n,
                             const char *what, const char *fix)
{
    size_t cap = 256;
    for (size_t i = 0; i < n; i++)
        cap += 300 + strlen(ids[i]);
    char *msg = lz_xmalloc(cap);
    int o = snprintf(msg, cap, "%s matches %zu Domains:", what, n);
    for (size_t i = 0; i < n && o >= 0 && (size_t) o < cap; i++) {
        _cleanup_free_ char *line = candidate_line(domains_fd, ids[i]);
        o += snprintf(msg + o, cap - (size_t) o, "\n    %.250s", line);
    }
    lz_error_set(err, 0, "%s", msg);
    free(msg);
    return lz_error_hint(err, "%s", fix);
}

/* Fill t with the Domain opts name; -1 with *err when none or several. */
static int select_target(const lz_global_options *g, const state_opts *o, target *t,
                         lz_error **err)
{
    _cleanup_free_ char *storage = lz_storage_root_choose(g->config_path, err);
    if (!storage)
        return -1;
    _cleanup_free_ char *domains = lz_xasprintf("%s/domains", storage);
    _cleanup_close_ int dfd = open(domains, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0 && errno != ENOENT)
        return lz_error_set(err, errno, "cannot read %s", domains);
    char **ids = NULL;
    size_t n = 0;
    _cleanup_free_ char *ws = NULL;
    char want[65] = "";
    if (!o->id_prefix) {
        ws = lz_workspace_choose(o->workspace, err);
        if (!ws)
            return -1;
        if (o->profile) {
            uint8_t d[LZ_DIGEST_LEN];
            if (lz_domain_id_v1(o->profile, ws, d, err) < 0)
                return -1;
            lz_digest_hex(d, want);
        }
    }
    DIR *d = dfd >= 0 ? fdopendir(fcntl(dfd, F_DUPFD_CLOEXEC, 3)) : NULL;
    if (dfd >= 0 && !d)
        return lz_error_set(err, errno, "cannot read %s", domains);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!is_domain_name(e->d_name))
            continue;
        bool match;
        if (o->id_prefix) {
            match = strncmp(e->d_name, o->id_prefix, strlen(o->id_prefix)) == 0;
        } else if (o->profile) {
            match = strcmp(e->d_name, want) == 0;
        } else {
            /* By workspace: what its store records (any profile). */
            _cleanup_close_ int fd = openat(dfd, e->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW |
                                                                O_CLOEXEC);
            lz_domain_summary s = { 0 };
            lz_error *e2 = NULL;
            match = fd >= 0 && lz_store_read_summary(fd, &s, &e2) == 0 &&
                    strcmp(s.workspace, ws) == 0;
            lz_error_free(e2);
            lz_domain_summary_clear(&s);
        }
        if (match) {
            ids = lz_xrealloc(ids, n + 1, sizeof(*ids));
            ids[n++] = lz_xstrdup(e->d_name);
        }
    }
    if (d)
        closedir(d);
    int r = -1;
    _cleanup_free_ char *pws = ws ? lz_text_printable(ws) : NULL;
    if (n == 0) {
        if (o->id_prefix)
            lz_error_set(err, 0, "no Domain has an ID starting with '%s' in %s", o->id_prefix,
                         domains);
        else if (o->profile)
            lz_error_set(err, 0, "profile '%s' has no Domain state for the workspace %s",
                         o->profile, pws);
        else
            lz_error_set(err, 0, "no Domain has state for the workspace %s", pws);
        lz_error_hint(err, "'lazaret state list' shows every Domain with its ID, profile and "
                           "workspace; name one by an ID prefix or with --profile/--workspace");
    } else if (n > 1) {
        _cleanup_free_ char *what =
            o->id_prefix ? lz_xasprintf("the Domain ID prefix '%s'", o->id_prefix)
                         : lz_xasprintf("the workspace %s", pws);
        refuse_candidates(err, dfd, ids, n, what,
                          o->id_prefix ? "give more characters of the Domain ID"
                                       : "choose one with --profile PROFILE (or an ID prefix)");
    } else {
        snprintf(t->id, sizeof(t->id), "%s", ids[0]);
        t->droot_label = lz_xasprintf("%s/%s", domains, t->id);
        t->droot = openat(dfd, t->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (t->droot < 0) {
            lz_error_set(err, errno, "cannot open the Domain Root %s", t->droot_label);
            lz_error_hint(err, "it must be a directory of yours, not a symlink; 'lazaret state "
                               "verify %.12s' says what is wrong", t->id);
        } else {
            lz_error *e2 = NULL;
            if (lz_store_read_summary(t->droot, &t->sum, &e2) < 0)
                t->store_error = lz_xstrdup(e2->message);
            lz_error_free(e2);
            r = 0;
        }
    }
    for (size_t i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
    if (r < 0)
        return -1;
    /* Running? Its lock (the truth) and its status.json (what it says). */
    _cleanup_free_ char *rroot = NULL;
    json_t *running = lz_cli_running_domains(&rroot);
    if (!running)
        return lz_error_set(err, 0, "cannot read the running Domains");
    json_t *st = running_by_id(running, t->id);
    t->status = st ? json_incref(st) : NULL;
    json_decref(running);
    _cleanup_free_ char *rlabel = lz_xasprintf("%s/%s", rroot, t->id);
    _cleanup_close_ int rfd = open(rlabel, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    t->running = rfd >= 0 && lz_cli_domain_lock_held(rfd);
    return 0;
}

/* Parse the options of inspect/verify/reset/fix-ownership (--stop for the
 * last two, --yes for reset); a usage error returns 2. */
static int parse_opts(int argc, char **argv, bool stop_ok, bool yes_ok, state_opts *o)
{
    const char *sub = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = NULL;
        const char *val = NULL;
        if (strcmp(a, "--profile") == 0 || strcmp(a, "--workspace") == 0) {
            if (i + 1 >= argc)
                return lz_cli_usage_error("state", "%s %s needs a value", sub, a);
            slot = a[2] == 'p' ? &o->profile : &o->workspace;
            val = argv[++i];
        } else if (strncmp(a, "--profile=", 10) == 0) {
            slot = &o->profile;
            val = a + 10;
        } else if (strncmp(a, "--workspace=", 12) == 0) {
            slot = &o->workspace;
            val = a + 12;
        } else if (strcmp(a, "--json") == 0) {
            o->as_json = true;
        } else if (stop_ok && strcmp(a, "--stop") == 0) {
            o->stop = true;
        } else if (yes_ok && strcmp(a, "--yes") == 0) {
            o->yes = true;
        } else if (a[0] == '-') {
            return lz_cli_usage_error("state", "%s: unknown option '%s'", sub, a);
        } else if (!o->id_prefix) {
            o->id_prefix = a;
        } else {
            return lz_cli_usage_error("state", "%s: unexpected argument '%s'", sub, a);
        }
        if (slot) {
            if (!*val)
                return lz_cli_usage_error("state", "%s: an empty value for %s", sub, a);
            *slot = val;
        }
    }
    if (o->id_prefix) {
        size_t n = strlen(o->id_prefix);
        if (n > 64 || strspn(o->id_prefix, "0123456789abcdef") != n)
            return lz_cli_usage_error("state", "%s: '%s' is not a Domain ID prefix (lowercase "
                                               "hex, as 'lazaret state list' shows; a profile "
                                               "is named with --profile)",
                                      sub, o->id_prefix);
        if (o->profile || o->workspace)
            return lz_cli_usage_error("state", "%s: a Domain ID prefix cannot be combined with "
                                               "--profile or --workspace",
                                      sub);
    }
    return 0;
}

static void set_time(json_t *o, const char *key, json_t *secs)
{
    char when[32] = "";
    time_t t = (time_t) json_integer_value(secs);
    struct tm tm;
    if (json_is_integer(secs) && t > 0 && gmtime_r(&t, &tm))
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_object_set_new(o, key, when[0] ? json_string(when) : json_null());
}

static json_t *target_header(const target *t)
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
        json_object_set_new(o, "generation", json_incref(json_object_get(t->status,
                                                                         "generation")));
        json_object_set_new(o, "sessions",
                            json_integer((json_int_t) json_array_size(
                                json_object_get(t->status, "sessions"))));
    }
    return o;
}

static void print_header(const target *t)
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

/* ---- inspect ------------------------------------------------------------- */

/* "usr%2Flocal" -> "/usr/local" (state_anchor.c's escape_path, reversed);
 * NULL for a name Lazaret never writes. */
static char *unescape_state_name(const char *n)
{
    size_t len = strlen(n);
    char *out = lz_xmalloc(len + 2);
    size_t o = 0;
    out[o++] = '/';
    for (size_t i = 0; i < len; i++) {
        if (n[i] == '%' && i + 2 < len + 1 && n[i + 1] && n[i + 2]) {
            char hex[3] = { n[i + 1], n[i + 2], 0 };
            char *end;
            long v = strtol(hex, &end, 16);
            if (*end || (v != '/' && v != '%')) {
                free(out);
                return NULL;
            }
            out[o++] = (char) v;
            i += 2;
        } else if (n[i] == '/' || n[i] == '%') {
            free(out);
            return NULL;
        } else {
            out[o++] = n[i];
        }
    }
    out[o] = '\0';
    return out;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Entries of the directory parent/name, sorted (at most max, *total all);
 * NULL when it cannot be read (absent included). */
static char **list_dir(int parent, const char *name, size_t max, size_t *ret_n, size_t *total)
{
    *ret_n = 0;
    *total = 0;
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    char **names = lz_xcalloc(max + 1, sizeof(char *));
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (++*total <= max)
            names[(*ret_n)++] = lz_xstrdup(e->d_name);
    }
    closedir(d);
    qsort(names, *ret_n, sizeof(char *), cmp_str);
    return names;
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

#define LIST_MAX 100000

static json_t *inspect_persistent(int droot)
{
    json_t *arr = json_array();
    size_t n, total;
    char **names = list_dir(droot, "state", LIST_MAX, &n, &total);
    _cleanup_close_ int state = openat(droot, "state", O_PATH | O_DIRECTORY | O_NOFOLLOW |
                                                            O_CLOEXEC);
    for (size_t i = 0; names && state >= 0 && i < n; i++) {
        json_t *o = json_object();
        _cleanup_free_ char *path = unescape_state_name(names[i]);
        json_object_set_new(o, "path", path ? json_string(path) : json_null());
        _cleanup_free_ char *rel = lz_xasprintf("state/%s", names[i]);
        json_t *relj = json_string(rel);
        json_object_set_new(o, "dir", relj ? relj : json_null());
        _cleanup_close_ int dir = openat(state, names[i], O_PATH | O_DIRECTORY | O_NOFOLLOW |
                                                              O_CLOEXEC);
        walk w = dir >= 0 ? size_of(dir, "upper") : (walk){ .partial = true };
        json_object_set_new(o, "bytes", json_integer((json_int_t) w.bytes));
        json_object_set_new(o, "entries", json_integer((json_int_t) w.entries));
        json_object_set_new(o, "partial", json_boolean(w.partial));
        json_array_append_new(arr, o);
    }
    free_names(names, n);
    return arr;
}

static json_t *inspect_ignored(int droot)
{
    json_t *o = json_object();
    size_t n, total;
    char **names = list_dir(droot, "ignored", LIST_MAX, &n, &total);
    walk w = size_of(droot, "ignored");
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
    free_names(names, n);
    return o;
}

/* The profile's volumes, when the profile still resolves for the workspace;
 * otherwise null and why (the Domain's state does not depend on it). */
static void inspect_volumes(const lz_global_options *g, const target *t, json_t *out)
{
    if (t->store_error) {
        json_object_set_new(out, "volumes", json_null());
        json_object_set_new(out, "volumes_error", json_string("its store cannot be read"));
        return;
    }
    lz_resolved_config *cfg = NULL;
    lz_error *err = NULL;
    lz_load_request req = { .config_path = g->config_path, .profile = t->sum.profile,
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
            arr, json_pack("{s:s, s:s, s:s, s:s}", "container", v->container, "source",
                           v->source.label, "access",
                           v->access == LZ_ACCESS_READ_ONLY ? "read-only" : "read-write",
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
    json_array_foreach(pers, i, p) {
        human((unsigned long long) json_integer_value(json_object_get(p, "bytes")), a,
              sizeof(a));
        const char *path = json_string_value(json_object_get(p, "path"));
        _cleanup_free_ char *dir = lz_text_printable(json_string_value(json_object_get(p, "dir")));
        printf("  persistent:  %s  %s, %lld entries%s  (%s/upper)\n", path ? path : "(unknown)",
               a, (long long) json_integer_value(json_object_get(p, "entries")),
               json_is_true(json_object_get(p, "partial")) ? " (at least)" : "", dir);
    }
    json_t *ig = json_object_get(o, "ignored");
    human((unsigned long long) json_integer_value(json_object_get(ig, "bytes")), a, sizeof(a));
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
        json_array_foreach(vols, i, v) {
            _cleanup_free_ char *src = lz_text_printable(json_string_value(json_object_get(v,
                                                                                  "source")));
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
        json_array_foreach(gens, i, gn) {
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
        json_array_foreach(escs, i, e) {
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
            json_array_foreach(json_object_get(e, "argv"), k, arg) {
                if (k >= 8) {
                    printf(" …");
                    break;
                }
                _cleanup_free_ char *safe = lz_text_printable(json_string_value(arg) ?
                                                              json_string_value(arg) : "");
                printf(" '%.60s'", safe);
            }
            printf("\n");
        }
    }
}

/* select_target, reporting its error: 0, or -1 with t cleared. */
static int select_or_report(const lz_global_options *g, const state_opts *opts, target *t)
{
    lz_error *err = NULL;
    if (select_target(g, opts, t, &err) == 0)
        return 0;
    lz_error_report(err, stderr);
    lz_error_free(err);
    target_clear(t);
    return -1;
}

static int state_inspect(const lz_global_options *g, const state_opts *opts)
{
    target t = { .droot = -1 };
    lz_error *err = NULL;
    if (select_or_report(g, opts, &t) < 0)
        return LZ_EXIT_FAILURE;
    json_t *o = target_header(&t);
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
        json_array_foreach(gens, i, gn) {
            set_time(gn, "started", json_object_get(gn, "started_at"));
            set_time(gn, "ended", json_object_get(gn, "ended_at"));
        }
        json_t *escs = json_object_get(hist, "escalations"), *e;
        json_array_foreach(escs, i, e) {
            set_time(e, "received", json_object_get(e, "received_at"));
            set_time(e, "ended", json_object_get(e, "ended_at"));
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
        print_header(&t);
        print_inspect(o);
        const char *he = json_string_value(json_object_get(o, "history_error"));
        if (he)
            printf("  history:     cannot be read: %s\n", he);
    }
    json_decref(o);
    target_clear(&t);
    return LZ_EXIT_OK;
}

/* ---- verify -------------------------------------------------------------- */

typedef struct checks {
    json_t *list;
    int problems;
    uint64_t mnt_id;      /* the Domain Root's mount */
    dev_t dev;
    bool have_mnt_id;
} checks;

static void check_add(checks *c, const char *name, const char *object, const char *problem,
                      const char *fix)
{
    json_t *o = json_object();
    json_object_set_new(o, "check", json_string(name));
    _cleanup_free_ char *obj = lz_text_printable(object);
    json_object_set_new(o, "object", json_string(obj));
    json_object_set_new(o, "ok", json_boolean(problem == NULL));
    if (problem) {
        _cleanup_free_ char *p = lz_text_printable(problem);
        json_object_set_new(o, "problem", json_string(p));
        json_object_set_new(o, "fix", json_string(fix));
        c->problems++;
    }
    json_array_append_new(c->list, o);
}

/* Is fd (or dirfd/name, not followed) on the Domain Root's mount? */
static bool same_mount(const checks *c, int dirfd, const char *name)
{
    struct statx sx;
    if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | (name[0] ? 0 : AT_EMPTY_PATH),
              STATX_MNT_ID | STATX_TYPE, &sx) < 0)
        return true; /* gone or unreadable: reported by the type checks */
    if (makedev(sx.stx_dev_major, sx.stx_dev_minor) != c->dev)
        return false;
    return !c->have_mnt_id || !(sx.stx_mask & STATX_MNT_ID) || sx.stx_mnt_id == c->mnt_id;
}

enum expect_flags {
    EXPECT_OURS = 1,       /* owned by the user, no group/other write */
    EXPECT_OPTIONAL = 2,   /* absence is no problem */
};

/* A directory Lazaret expects at dirfd/name (label: as the user sees it). */
static void check_dir(checks *c, int dirfd, const char *name, const char *label, int flags,
                      const char *missing_fix)
{
    struct stat st;
    char problem[512];
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno == ENOENT && (flags & EXPECT_OPTIONAL)) {
            check_add(c, "layout", label, NULL, NULL);
            return;
        }
        snprintf(problem, sizeof(problem), "%s: %s", errno == ENOENT ? "missing" : "cannot be read",
                 strerror(errno));
        check_add(c, "layout", label, problem, missing_fix);
        return;
    }
    if (S_ISLNK(st.st_mode)) {
        check_add(c, "layout", label, "a symlink where Lazaret expects a directory (planted?)",
                  "remove the symlink (never follow it: rm, not rm -r on the link target); "
                  "'lazaret state reset' removes it safely");
        return;
    }
    if (!S_ISDIR(st.st_mode)) {
        check_add(c, "layout", label, "not a directory",
                  "remove it; 'lazaret state reset' removes it safely");
        return;
    }
    if (!same_mount(c, dirfd, name)) {
        check_add(c, "mounts", label, "a mount point (another file system mounted in the "
                                      "Domain's layers)",
                  "unmount it (umount), then run 'lazaret state verify' again; Lazaret mounts "
                  "nothing there outside a running generation's own mount namespace");
        return;
    }
    if (flags & EXPECT_OURS) {
        if (st.st_uid != getuid()) {
            snprintf(problem, sizeof(problem), "owned by uid %u, not by you (uid %u)",
                     (unsigned) st.st_uid, (unsigned) getuid());
            check_add(c, "ownership", label, problem,
                      "it must be yours: remove it with 'lazaret state reset' or chown it back");
            return;
        }
        if (st.st_mode & 022) {
            snprintf(problem, sizeof(problem), "mode %04o: writable by group or others",
                     (unsigned) (st.st_mode & 07777));
            _cleanup_free_ char *fix = lz_xasprintf("chmod go-w '%s'", label);
            check_add(c, "modes", label, problem, fix);
            return;
        }
    }
    check_add(c, "layout", label, NULL, NULL);
}

/* Every mount point below dirfd (a tree the sandbox wrote), bounded like
 * the size walk; reports at most 5. */
static void find_mounts(checks *c, int fd, const char *label, unsigned depth,
                        unsigned long long *seen, int *reported)
{
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) && *reported < 5) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (++*seen > WALK_MAX_ENTRIES)
            break;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
            continue;
        _cleanup_free_ char *sub = lz_xasprintf("%s/%s", label, e->d_name);
        if (!same_mount(c, dirfd(d), e->d_name)) {
            check_add(c, "mounts", sub, "a mount point (another file system mounted in the "
                                        "Domain's layers)",
                      "unmount it (umount), then run 'lazaret state verify' again");
            ++*reported;
            continue;
        }
        if (depth >= WALK_MAX_DEPTH)
            continue;
        int s = openat(dirfd(d), e->d_name,
                       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (s >= 0)
            find_mounts(c, s, sub, depth + 1, seen, reported);
    }
    closedir(d);
}

static void verify_store(checks *c, const target *t)
{
    _cleanup_free_ char *label = lz_xasprintf("%s/store.db", t->droot_label);
    _cleanup_free_ char *fix_damaged = lz_xasprintf(
        "end every session of this Domain and move %s (with its -wal and -shm files) aside; "
        "the next run creates a new store (its history is lost, the persistent state kept)",
        label);
    static const char *const files[] = { "store.db", "store.db-wal", "store.db-shm" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(files); i++) {
        _cleanup_free_ char *fl = lz_xasprintf("%s/%s", t->droot_label, files[i]);
        struct stat st;
        char problem[256];
        if (fstatat(t->droot, files[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (i > 0 && errno == ENOENT)
                continue;
            snprintf(problem, sizeof(problem), "cannot be read: %s", strerror(errno));
            check_add(c, "store", fl, problem, fix_damaged);
            return;
        }
        if (!S_ISREG(st.st_mode)) {
            check_add(c, "store", fl, S_ISLNK(st.st_mode) ? "a symlink, not the store file"
                                                          : "not a regular file",
                      fix_damaged);
            return;
        }
        if (st.st_uid != getuid()) {
            snprintf(problem, sizeof(problem), "owned by uid %u, not by you",
                     (unsigned) st.st_uid);
            check_add(c, "ownership", fl, problem, fix_damaged);
            return;
        }
        if (st.st_mode & 022) {
            snprintf(problem, sizeof(problem), "mode %04o: writable by group or others",
                     (unsigned) (st.st_mode & 07777));
            _cleanup_free_ char *fix = lz_xasprintf("chmod go-w '%s'", fl);
            check_add(c, "modes", fl, problem, fix);
        }
    }
    lz_store_health h;
    lz_error *err = NULL;
    if (lz_store_check_health(t->droot, &h, &err) < 0) {
        check_add(c, "store", label, err->message, fix_damaged);
        lz_error_free(err);
        return;
    }
    if (!h.integrity_ok) {
        _cleanup_free_ char *p = lz_xasprintf("SQLite integrity_check: %s", h.integrity);
        check_add(c, "store", label, p, fix_damaged);
    } else if (!h.schema_ok) {
        _cleanup_free_ char *p = lz_xasprintf("schema '%s' version %d; this Lazaret reads '%s' "
                                              "version %d",
                                              h.schema_id[0] ? h.schema_id : "(none)",
                                              h.schema_version, LZ_DOMAIN_STORE_SCHEMA_ID,
                                              LZ_DOMAIN_STORE_SCHEMA_VERSION);
        check_add(c, "store", label, p, "use the Lazaret version that created it, or move the "
                                        "store aside (its history is lost)");
    } else {
        _cleanup_free_ char *ok = lz_xasprintf("%s (schema %s version %d, integrity ok)", label,
                                               h.schema_id, h.schema_version);
        check_add(c, "store", ok, NULL, NULL);
    }
}

static int state_verify(const lz_global_options *g, const state_opts *opts)
{
    target t = { .droot = -1 };
    if (select_or_report(g, opts, &t) < 0)
        return LZ_EXIT_FAILURE;
    checks c = { .list = json_array() };
    struct statx sx;
    if (statx(t.droot, "", AT_EMPTY_PATH, STATX_MNT_ID, &sx) == 0) {
        c.dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
        c.have_mnt_id = (sx.stx_mask & STATX_MNT_ID) != 0;
        c.mnt_id = sx.stx_mnt_id;
    }
    /* The Domain Root itself (opened without following a symlink). */
    struct stat st;
    if (fstat(t.droot, &st) == 0 && st.st_uid != getuid()) {
        check_add(&c, "ownership", t.droot_label, "not owned by you",
                  "a Domain Root must be yours; remove it if you did not make it");
    } else if (fstat(t.droot, &st) == 0 && (st.st_mode & 022)) {
        _cleanup_free_ char *fix = lz_xasprintf("chmod 0700 '%s'", t.droot_label);
        check_add(&c, "modes", t.droot_label, "writable by group or others", fix);
    } else {
        check_add(&c, "layout", t.droot_label, NULL, NULL);
    }
    verify_store(&c, &t);
    _cleanup_free_ char *lstate = lz_xasprintf("%s/state", t.droot_label);
    _cleanup_free_ char *lign = lz_xasprintf("%s/ignored", t.droot_label);
    _cleanup_free_ char *llogs = lz_xasprintf("%s/logs", t.droot_label);
    const char *reset_fix = "'lazaret state reset' removes the Domain's persistent state; the "
                            "next run creates it again";
    check_dir(&c, t.droot, "state", lstate, EXPECT_OURS | EXPECT_OPTIONAL, reset_fix);
    check_dir(&c, t.droot, "ignored", lign, EXPECT_OURS | EXPECT_OPTIONAL, reset_fix);
    check_dir(&c, t.droot, "logs", llogs, EXPECT_OURS | EXPECT_OPTIONAL,
              "the next run creates it again");
    /* Each persistent directory: state/<P>/ is Lazaret's; its upper's mode and
     * owner are the image directory's (and the sandbox's to change: a chmod
     * of the persistent directory's root is copied up), so only its kind
     * and mount are checked; work/ is the kernel's scratch, Lazaret's. */
    size_t n, total;
    char **names = list_dir(t.droot, "state", LIST_MAX, &n, &total);
    _cleanup_close_ int sfd = openat(t.droot, "state", O_PATH | O_DIRECTORY | O_NOFOLLOW |
                                                           O_CLOEXEC);
    for (size_t i = 0; names && sfd >= 0 && i < n; i++) {
        _cleanup_free_ char *l = lz_xasprintf("%s/%s", lstate, names[i]);
        check_dir(&c, sfd, names[i], l, EXPECT_OURS, reset_fix);
        _cleanup_close_ int pfd = openat(sfd, names[i], O_PATH | O_DIRECTORY | O_NOFOLLOW |
                                                            O_CLOEXEC);
        if (pfd < 0)
            continue;
        _cleanup_free_ char *lu = lz_xasprintf("%s/upper", l);
        _cleanup_free_ char *lw = lz_xasprintf("%s/work", l);
        check_dir(&c, pfd, "upper", lu, 0, reset_fix);
        check_dir(&c, pfd, "work", lw, EXPECT_OURS, reset_fix);
    }
    free_names(names, n);
    /* The ignored copies' top level: a directory or a file Lazaret made,
     * never a symlink or special file. */
    names = list_dir(t.droot, "ignored", LIST_MAX, &n, &total);
    _cleanup_close_ int ifd = openat(t.droot, "ignored", O_PATH | O_DIRECTORY | O_NOFOLLOW |
                                                             O_CLOEXEC);
    for (size_t i = 0; names && ifd >= 0 && i < n; i++) {
        struct stat is;
        if (fstatat(ifd, names[i], &is, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(is.st_mode) ||
            S_ISREG(is.st_mode))
            continue;
        _cleanup_free_ char *l = lz_xasprintf("%s/%s", lign, names[i]);
        check_add(&c, "layout", l, S_ISLNK(is.st_mode) ? "a symlink among the git-ignored "
                                                         "copies (planted?)"
                                                       : "a special file among the git-ignored "
                                                         "copies",
                  "remove it (the link itself, never its target); 'lazaret state reset' "
                  "removes the copies safely");
    }
    free_names(names, n);
    /* Mounts anywhere in what the sandbox wrote. */
    unsigned long long seen = 0;
    int reported = 0;
    static const char *const trees[] = { "state", "ignored" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(trees); i++) {
        if (!same_mount(&c, t.droot, trees[i]))
            continue; /* reported above */
        int fd = openat(t.droot, trees[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK |
                                               O_CLOEXEC);
        if (fd >= 0)
            find_mounts(&c, fd, i == 0 ? lstate : lign, 0, &seen, &reported);
    }
    if (reported == 0) {
        _cleanup_free_ char *l = lz_xasprintf("%s/{state,ignored}", t.droot_label);
        check_add(&c, "mounts", l, NULL, NULL);
    }

    json_t *o = target_header(&t);
    json_object_set_new(o, "ok", json_boolean(c.problems == 0));
    json_object_set_new(o, "problems", json_integer(c.problems));
    json_object_set_new(o, "checks", c.list);
    if (opts->as_json) {
        json_dumpf(o, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
        fputc('\n', stdout);
    } else {
        print_header(&t);
        size_t i;
        json_t *k;
        json_array_foreach(c.list, i, k) {
            bool good = json_is_true(json_object_get(k, "ok"));
            /* Objects below the Domain Root by their name in it. */
            const char *obj = json_string_value(json_object_get(k, "object"));
            size_t rl = strlen(t.droot_label);
            if (strncmp(obj, t.droot_label, rl) == 0 && obj[rl] == '/')
                obj += rl + 1;
            printf("  %-8s %-10s %s", good ? "ok" : "PROBLEM",
                   json_string_value(json_object_get(k, "check")), obj);
            if (!good)
                printf(": %s\n           fix: %s",
                       json_string_value(json_object_get(k, "problem")),
                       json_string_value(json_object_get(k, "fix")));
            printf("\n");
        }
        if (c.problems)
            printf("%d problem(s) found.\n", c.problems);
        else
            printf("No problem found.\n");
    }
    int status = c.problems ? LZ_EXIT_FAILURE : LZ_EXIT_OK;
    json_decref(o);
    target_clear(&t);
    return status;
}

/* ---- reset --------------------------------------------------------------- */

/* The Domain lock, in $XDG_RUNTIME_DIR/lazaret/domains/<id>/lock (created
 * like the bootstrap creates it), taken exclusively: while it is held no
 * coordinator can start (the bootstrap takes it before anything else) and
 * none runs (a coordinator holds it for its whole life). Waits at most
 * wait_ms for a coordinator that is ending. Returns the locked fd. */
static int take_domain_lock(const char *id, int wait_ms, lz_error **err)
{
    const char *rt = getenv("XDG_RUNTIME_DIR");
    const char *what = NULL;
    _cleanup_free_ char *norm = rt && *rt ? lz_env_path_normalize(rt, &what) : NULL;
    if (!norm) {
        lz_error_set(err, 0, "XDG_RUNTIME_DIR is not set or not an absolute path");
        return lz_error_hint(err, "export XDG_RUNTIME_DIR=/run/user/$(id -u)");
    }
    _cleanup_close_ int base = open(norm, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (base < 0)
        return lz_error_set(err, errno, "cannot open XDG_RUNTIME_DIR %s", norm);
    static const char *const chain[] = { "lazaret", "domains" };
    int cur = base;
    base = -EBADF;
    for (size_t i = 0; i <= LZ_ARRAY_SIZE(chain); i++) {
        const char *name = i < LZ_ARRAY_SIZE(chain) ? chain[i] : id;
        int next = lz_mkdir_at(cur, name, 0700, err) < 0 ? -1 : lz_open_dir_at(cur, name, err);
        close(cur);
        if (next < 0)
            return lz_error_prefix(err, "cannot open the Domain's runtime directory");
        cur = next;
    }
    _cleanup_close_ int dir = cur;
    int fd = openat(dir, LZ_DOMAIN_LOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return lz_error_set(err, errno, "cannot open the Domain lock %s/lazaret/domains/%s/%s",
                            norm, id, LZ_DOMAIN_LOCK);
    for (int waited = 0;; waited += 50) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            return fd;
        if (errno != EWOULDBLOCK || waited >= wait_ms)
            break;
        struct timespec d = { 0, 50 * 1000 * 1000 };
        nanosleep(&d, NULL);
    }
    int e = errno;
    close(fd);
    if (e != EWOULDBLOCK)
        return lz_error_set(err, e, "cannot lock the Domain %.16s…", id);
    lz_error_set(err, 0, "Domain %.16s… is running (its coordinator holds the Domain lock)", id);
    return lz_error_hint(err, "end its sessions, or add --stop to stop it first");
}

/* Remove droot/name: what a sandbox user other than the developer created
 * belongs to a subordinate uid on the host and is removed from inside a
 * user namespace (lz_remove_tree_mapped). */
static int remove_layer(int droot, const char *name, const char *label, lz_error **err)
{
    if (lz_remove_tree_mapped(droot, name, label, err) == 0)
        return 0;
    return lz_error_hint(err, "nothing else was changed; see 'lazaret state verify' (a mount "
                              "point or a file outside your subordinate ids stops the removal)");
}

static int confirm(const target *t, const char *what)
{
    fprintf(stderr, "%sReset Domain %.16s…? [y/N] ", what, t->id);
    fflush(stderr);
    char line[16];
    if (!fgets(line, sizeof(line), stdin))
        return 0;
    return strcmp(line, "y\n") == 0 || strcmp(line, "yes\n") == 0 || strcmp(line, "Y\n") == 0;
}

static int state_reset(const lz_global_options *g, const state_opts *opts)
{
    target t = { .droot = -1 };
    lz_error *err = NULL;
    int status = LZ_EXIT_FAILURE;
    int lock = -1;
    bool stopped = false;
    char *pws = NULL, *what = NULL;
    walk ws = { 0 }, wi = { 0 };
    char a[32], b[32];
    if (select_target(g, opts, &t, &err) < 0)
        goto out;
    struct stat st;
    if (fstat(t.droot, &st) < 0 || st.st_uid != getuid()) {
        lz_error_set(&err, 0, "the Domain Root %s is not yours", t.droot_label);
        lz_error_hint(&err, "'lazaret state verify %.12s' says what is wrong", t.id);
        goto out;
    }
    if (t.running && !opts->stop) {
        lz_error_set(&err, 0, "Domain %.16s… (profile '%s') is running: its persistent state "
                              "is in use",
                     t.id, t.store_error ? "?" : t.sum.profile);
        lz_error_hint(&err, "end its sessions, or add --stop to stop it cleanly first "
                            "(lazaret state reset --stop %.12s)", t.id);
        goto out;
    }
    if (t.running && t.store_error) {
        lz_error_set(&err, 0, "Domain %.16s… is running and its store cannot be read, so it "
                              "cannot be stopped from here", t.id);
        lz_error_hint(&err, "run 'lazaret stop' in its workspace, then reset again");
        goto out;
    }
    ws = state_size(t.droot);
    wi = size_of(t.droot, "ignored");
    human(ws.bytes, a, sizeof(a));
    human(wi.bytes, b, sizeof(b));
    pws = t.store_error ? lz_xstrdup("?") : lz_text_printable(t.sum.workspace);
    what = lz_xasprintf(
        "This removes from Domain %s (profile '%s', workspace %s):\n"
        "  %s/state/    the persistent directories (%s)\n"
        "  %s/ignored/  the Domain's copies of git-ignored paths (%s)\n"
        "It keeps the Domain Store (its history of generations, sessions and host escalations) "
        "and logs/. The workspace is not touched.\n%s",
        t.id, t.store_error ? "?" : t.sum.profile, pws, t.droot_label, a, t.droot_label, b,
        t.running ? "The Domain is running: it is stopped first, ending its sessions.\n" : "");
    if (!opts->yes) {
        if (!isatty(STDIN_FILENO)) {
            lz_error_set(&err, 0, "refusing to reset Domain %.16s… without confirmation: "
                                  "standard input is not a terminal",
                         t.id);
            lz_error_hint(&err, "add --yes to confirm (lazaret state reset --yes %.12s)", t.id);
            goto out;
        }
        if (!confirm(&t, what)) {
            fprintf(stderr, "Nothing was removed.\n");
            goto out;
        }
    }
    if (t.running) {
        /* The existing stop path: over the session channel, waiting (30 s at
         * most) until the teardown released the Domain lock. */
        char *argv[] = { (char *) "stop", (char *) "--profile", t.sum.profile,
                         (char *) "--workspace", t.sum.workspace, NULL };
        if (lz_cmd_stop(5, argv, g) != LZ_EXIT_OK) {
            lz_error_set(&err, 0, "cannot stop Domain %.16s…; nothing was removed", t.id);
            lz_error_hint(&err, "see 'lazaret status' and %s/logs/coordinator.log",
                          t.droot_label);
            goto out;
        }
        stopped = true;
    }
    /* Held until everything is removed: no generation can start meanwhile
     * (a `lazaret run` waits for the lock), none can be live. */
    lock = take_domain_lock(t.id, stopped ? 10000 : 0, &err);
    if (lock < 0)
        goto out;
    static const char *const layers[] = { "state", "ignored" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(layers); i++)
        if (remove_layer(t.droot, layers[i], t.droot_label, &err) < 0) {
            lz_error_prefix(&err, "reset of Domain %.16s… incomplete", t.id);
            goto out;
        }
    /* The records of what the Domain isolated and of the placeholder
     * directories it made (src/gitsentry/ignored.c): a path once isolated stays so,
     * and the placeholder budget stays spent, until this reset; and of the
     * sandbox user its files were made for (bootstrap.c). */
    static const char *const records[] = { "ignored.list", "placeholders",
                                           LZ_SANDBOX_USER_RECORD };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(records); i++)
        if (unlinkat(t.droot, records[i], 0) < 0 && errno != ENOENT) {
            lz_error_set(&err, errno, "cannot remove %s/%s", t.droot_label, records[i]);
            goto out;
        }
    if (opts->as_json) {
        json_t *o = json_pack("{s:s, s:b, s:[s,s], s:[s,s]}", "domain_id", t.id, "stopped",
                              stopped, "removed", "state", "ignored", "kept", "store.db",
                              "logs");
        json_dumpf(o, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
        fputc('\n', stdout);
        json_decref(o);
    } else {
        printf("reset Domain %.16s…: removed state/ (%s) and ignored/ (%s); kept store.db and "
               "logs/\n",
               t.id, a, b);
    }
    status = LZ_EXIT_OK;
out:
    if (err) {
        lz_error_report(err, stderr);
        lz_error_free(err);
    }
    if (lock >= 0)
        close(lock);
    free(pws);
    free(what);
    target_clear(&t);
    return status;
}

/* ---- fix-ownership ---------------------------------------------------------- */

/* Stop a running Domain through 'lazaret stop''s path (as reset does). */
static int stop_target(const lz_global_options *g, const target *t, lz_error **err)
{
    char *argv[] = { (char *) "stop", (char *) "--profile", (char *) t->sum.profile,
                     (char *) "--workspace", (char *) t->sum.workspace, NULL };
    if (lz_cmd_stop(5, argv, g) == LZ_EXIT_OK)
        return 0;
    lz_error_set(err, 0, "cannot stop Domain %.16s…; nothing was changed", t->id);
    return lz_error_hint(err, "see 'lazaret status' and %s/logs/coordinator.log",
                         t->droot_label);
}

/* The workspace alone, by the path the store records: for a profile that
 * no longer loads. */
static int fix_workspace_only(const char *workspace, char **ret_report, lz_error **err)
{
    lz_path_plan plan = LZ_PATH_PLAN_INIT;
    if (lz_plan_existing(workspace, &plan, err) < 0)
        return lz_error_prefix(err, "cannot open the workspace");
    lz_giveback_tree tree = { .label = plan.label };
    tree.fd = lz_plan_open(&plan, O_PATH | O_DIRECTORY, true, err);
    int r = -1;
    if (tree.fd >= 0 && lz_giveback_trees(&tree, 1, err) == 0) {
        *ret_report = lz_giveback_tree_line(&tree);
        r = 0;
    }
    if (tree.fd >= 0)
        close(tree.fd);
    lz_plan_clear(&plan);
    return r;
}

static int state_fix_ownership(const lz_global_options *g, const state_opts *opts)
{
    target t = { .droot = -1 };
    lz_error *err = NULL, *cfg_err = NULL;
    int status = LZ_EXIT_FAILURE;
    int lock = -1;
    bool stopped = false, incomplete = false;
    lz_resolved_config *cfg = NULL;
    char *report = NULL;
    if (select_target(g, opts, &t, &err) < 0)
        goto out;
    if (t.store_error) {
        lz_error_set(&err, 0, "the store of Domain %.16s… cannot be read (%s): its workspace "
                              "is not known",
                     t.id, t.store_error);
        lz_error_hint(&err, "'lazaret state verify %.12s' says what is wrong", t.id);
        goto out;
    }
    if (t.running && !opts->stop) {
        lz_error_set(&err, 0, "Domain %.16s… (profile '%s') is running: its sandbox can still "
                              "change what would be given back",
                     t.id, t.sum.profile);
        lz_error_hint(&err, "end its sessions (its teardown gives ownership back itself), or "
                            "add --stop (lazaret state fix-ownership --stop %.12s)", t.id);
        goto out;
    }
    if (t.running) {
        if (stop_target(g, &t, &err) < 0)
            goto out;
        stopped = true;
    }
    /* Held for the whole walk: no sandbox of this Domain runs meanwhile. */
    lock = take_domain_lock(t.id, stopped ? 10000 : 0, &err);
    if (lock < 0)
        goto out;
    /* The profile gives the volumes; the workspace is the store's. */
    lz_load_request req = { .config_path = g->config_path, .profile = t.sum.profile,
                            .workspace = t.sum.workspace,
                            .layout = lz_sandbox_layout_production() };
    if (lz_config_load(&req, &cfg, &cfg_err) == 0) {
        if (lz_giveback_domain(cfg, &report, &incomplete, &err) < 0)
            goto out;
    } else if (fix_workspace_only(t.sum.workspace, &report, &err) < 0) {
        goto out;
    }
    if (opts->as_json) {
        json_t *o = json_pack("{s:s, s:b, s:s, s:b}", "domain_id", t.id, "stopped", stopped,
                              "report", report ? report : "", "complete", !incomplete);
        json_dumpf(o, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
        fputc('\n', stdout);
        json_decref(o);
    } else if (report) {
        printf("%s\n", report);
    } else {
        _cleanup_free_ char *pws = lz_text_printable(t.sum.workspace);
        printf("nothing in %s or the profile's read-write volumes belongs to your "
               "subordinate ids\n", pws);
    }
    if (cfg_err) {
        /* The workspace is done; the volumes need the profile (a missing
         * env: variable is enough to stop it loading). */
        lz_error_set(&err, cfg_err->errnum, "the workspace was walked, but not the volumes of "
                                            "profile '%s': %s",
                     t.sum.profile, cfg_err->message);
        lz_error_hint(&err, "%s; then run this again to cover the volumes",
                      cfg_err->hint ? cfg_err->hint : "fix the configuration");
        goto out;
    }
    if (incomplete) {
        lz_error_set(&err, 0, "some entries of Domain %.16s…'s workspace or volumes could not "
                              "be given back (listed above)",
                     t.id);
        lz_error_hint(&err, "an entry left is owned by ids outside your subordinate range, lies "
                            "below the walk's %u levels, or sits in a volume that could not be "
                            "opened; remove such a tree as root over your subordinate ids: "
                            "unshare --map-auto --map-root-user rm -rf DIR",
                      LZ_GIVEBACK_MAX_DEPTH);
        goto out;
    }
    status = LZ_EXIT_OK;
out:
    if (err) {
        lz_error_report(err, stderr);
        lz_error_free(err);
    }
    lz_error_free(cfg_err);
    lz_resolved_config_free(cfg);
    if (lock >= 0)
        close(lock);
    free(report);
    target_clear(&t);
    return status;
}

int lz_cmd_state(int argc, char **argv, const lz_global_options *g)
{
    if (argc < 2)
        return lz_cli_usage_error("state", "which one: list, inspect, verify, reset or "
                                           "fix-ownership");
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
    bool fix = strcmp(sub, "fix-ownership") == 0;
    if (strcmp(sub, "inspect") == 0 || strcmp(sub, "verify") == 0 || strcmp(sub, "reset") == 0 ||
        fix) {
        state_opts o = { 0 };
        int r = parse_opts(argc, argv, sub[0] == 'r' || fix, sub[0] == 'r', &o);
        if (r != 0)
            return r;
        if (fix)
            return state_fix_ownership(g, &o);
        if (sub[0] == 'i')
            return state_inspect(g, &o);
        if (sub[0] == 'v')
            return state_verify(g, &o);
        return state_reset(g, &o);
    }
    return lz_cli_usage_error("state", "unknown subcommand '%s'", sub);
}
