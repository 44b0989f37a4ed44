/* SPDX-License-Identifier: Apache-2.0
 *
 * lazaret log [--profile P] [--workspace DIR] [--denied] [--json] [--follow]
 *
 * The Domain's log as records, one line each. Today its only records are
 * the denials the Network Sidecar wrote (store/denials.h, docs/network.md
 * "Every denial is visible"), so --denied selects what the command shows
 * anyway; a line begins with the time and the record's kind ("denied"), so
 * other kinds can join without changing the lines of this one.
 *
 * The Domain is chosen as 'lazaret state' chooses one (its storage Domain
 * Root: the log outlives the running Domain). The files are written outside
 * the sandbox but their text is the sandbox's choice: every line reaches
 * the terminal through lz_denial_line_text / lz_denial_line_json.
 * --follow polls the current file (four times a second) and follows it
 * across a rotation; it never changes the terminal's modes, so an
 * interrupt leaves nothing to restore.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/error.h"
#include "common/options.h"
#include "common/text.h"
#include "common/util.h"
#include "config/digest.h"
#include "config/resolve.h"
#include "store/denials.h"
#include "store/domain_root.h"

const char lz_usage_log[] =
    "Usage: lazaret [--config FILE] log [--profile PROFILE] [--workspace DIR] [--denied]\n"
    "                                   [--json] [--follow]\n"
    "\n"
    "Show the log of the workspace's Domain (chosen as for 'lazaret state'; it is\n"
    "kept after the Domain stops): one line per record, oldest first, with its time\n"
    "and kind. Today the log holds one kind, the denials of the Network Sidecar:\n"
    "each DNS query it refused and each connection it rejected, the rule that\n"
    "decided, and the configuration line that would allow it (\"allow with: ...\").\n"
    "Without --denied the same records are shown; other kinds will join them.\n"
    "\n"
    "Options:\n"
    "  --profile PROFILE  the Domain of this profile (needed when the workspace has\n"
    "                     Domains of several profiles)\n"
    "  --workspace DIR    the project directory (default: as for 'run')\n"
    "  --denied           only the denials\n"
    "  --json             print each record as the JSON object stored (one a line)\n"
    "  -f, --follow       keep printing new records until interrupted (Ctrl-C)\n";

#define FOLLOW_POLL_NS 250000000L
#define FOLLOW_LINE_MAX (64 * 1024)

typedef struct log_out {
    bool json;
    size_t printed;
} log_out;

static int print_line(void *ctx, const char *line, size_t len)
{
    log_out *o = ctx;
    _cleanup_free_ char *s =
        o->json ? lz_denial_line_json(line, len) : lz_denial_line_text(line, len);
    if (s) {
        puts(s);
        o->printed++;
    }
    return 0;
}

/* The Domain the options name: its storage Domain Root (the log outlives
 * the running Domain) and, when it exists, its logs directory. */
typedef struct log_target {
    int droot;
    int logs;    /* -1: nothing was ever recorded */
    char *label; /* the logs directory's path, for messages */
} log_target;

static void log_target_clear(log_target *t)
{
    if (t->droot >= 0)
        close(t->droot);
    if (t->logs >= 0)
        close(t->logs);
    free(t->label);
}

/* -1 after reporting. A Domain that never ran has no Domain Root: say so,
 * and how to start it. */
static int open_target(const lz_global_options *g, const char *profile, const char *workspace,
                       log_target *t)
{
    *t = (log_target){ .droot = -1, .logs = -1 };
    lz_error *err = NULL;
    _cleanup_free_ char *storage = lz_storage_root_choose(g->config_path, &err);
    _cleanup_free_ char *ws = storage ? lz_workspace_choose(workspace, &err) : NULL;
    _cleanup_free_ char *domains = storage ? lz_xasprintf("%s/domains", storage) : NULL;
    _cleanup_close_ int dfd =
        ws ? open(domains, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    char want[65] = "", id[65] = "";
    if (ws && dfd < 0 && errno != ENOENT)
        lz_error_set(&err, errno, "cannot read %s", domains);
    if (ws && !err && profile) {
        uint8_t d[LZ_DIGEST_LEN];
        if (lz_domain_id_v1(profile, ws, d, &err) == 0)
            lz_digest_hex(d, want);
    }
    bool none = false;
    if (ws && !err) {
        struct stat st;
        if (dfd < 0)
            none = true;
        else if (profile)
            none = fstatat(dfd, want, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT;
    }
    if (ws && !err && !none) {
        lz_domain_choice choice = { .profile = profile,
                                    .workspace = ws,
                                    .id = want[0] ? want : NULL };
        /* Several Domains: its message lists them and says to choose. */
        if (lz_domain_root_choose(dfd, domains, &choice, id, &err) == LZ_DOMAIN_NONE) {
            lz_error_free(lz_error_take(&err));
            none = true;
        }
    }
    if (none) {
        _cleanup_free_ char *pws = lz_text_printable(ws);
        if (profile)
            lz_error_set(&err, 0, "profile '%s' has no Domain for the workspace %s", profile, pws);
        else
            lz_error_set(&err, 0, "no Domain has run for the workspace %s", pws);
        lz_error_hint(&err,
                      "a Domain and its log begin with its first run: 'lazaret run %s' in "
                      "the workspace; 'lazaret state list' shows the Domains there are",
                      profile ? profile : "PROFILE");
    }
    if (!err) {
        t->droot = openat(dfd, id, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (t->droot < 0)
            lz_error_set(&err, errno, "cannot open the Domain Root %s/%s", domains, id);
        else
            t->logs =
                openat(t->droot, LZ_DROOT_LOGS, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        /* No logs directory yet: nothing was ever recorded (an empty log). */
        if (t->droot >= 0 && t->logs < 0 && errno != ENOENT)
            lz_error_set(&err, errno, "cannot open the logs directory %s/%s/%s", domains, id,
                         LZ_DROOT_LOGS);
        lz_error_hint(&err,
                      "it must be a directory of yours, not a symlink; 'lazaret state "
                      "verify %.12s' says what is wrong",
                      id);
    }
    if (err) {
        lz_error_report(err, stderr);
        lz_error_free(err);
        log_target_clear(t);
        return -1;
    }
    t->label = lz_xasprintf("%s/%s/%s", domains, id, LZ_DROOT_LOGS);
    return 0;
}

/* Follow one file by its descriptor from *offset: print the whole lines
 * that were added, keep a line still being written for the next call. */
typedef struct follow_file {
    int fd;
    off_t offset;
    dev_t dev;
    ino_t ino;
    char *partial;
    size_t n_partial;
} follow_file;

static void follow_close(follow_file *f)
{
    if (f->fd >= 0)
        close(f->fd);
    free(f->partial);
    *f = (follow_file){ .fd = -1 };
}

static bool follow_open(follow_file *f, int logs, const char *name)
{
    int fd = logs < 0
                 ? -1
                 : openat(logs, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        return false;
    }
    follow_close(f);
    f->fd = fd;
    f->dev = st.st_dev;
    f->ino = st.st_ino;
    return true;
}

static void follow_read(follow_file *f, log_out *o)
{
    struct stat st;
    if (f->fd < 0 || fstat(f->fd, &st) < 0)
        return;
    if (st.st_size < f->offset) { /* cut short by someone: start again */
        f->offset = 0;
        f->n_partial = 0;
    }
    char buf[16384];
    for (;;) {
        ssize_t n = pread(f->fd, buf, sizeof buf, f->offset);
        if (n <= 0)
            break;
        f->offset += n;
        for (ssize_t i = 0; i < n;) {
            char *nl = memchr(buf + i, '\n', (size_t) (n - i));
            size_t take = nl ? (size_t) (nl - (buf + i)) : (size_t) (n - i);
            /* A line longer than any record is not one: dropped whole. */
            if (f->n_partial + take <= FOLLOW_LINE_MAX) {
                f->partial = lz_xrealloc(f->partial, f->n_partial + take + 1, 1);
                memcpy(f->partial + f->n_partial, buf + i, take);
            }
            f->n_partial += take;
            i += (ssize_t) take;
            if (nl) {
                if (f->n_partial <= FOLLOW_LINE_MAX && f->n_partial > 0) {
                    f->partial[f->n_partial] = '\0';
                    print_line(o, f->partial, f->n_partial);
                }
                f->n_partial = 0;
                i++;
            }
        }
    }
    fflush(stdout);
}

static _Noreturn void follow(log_target *t, log_out *o)
{
    follow_file cur = { .fd = -1 }, old = { .fd = -1 };
    /* The current file first: a rotation between the two opens shows a
     * record twice rather than losing it. */
    bool have = follow_open(&cur, t->logs, LZ_DENIALS_FILE);
    if (follow_open(&old, t->logs, LZ_DENIALS_OLD_FILE))
        follow_read(&old, o);
    follow_close(&old);
    for (;;) {
        if (have)
            follow_read(&cur, o);
        struct timespec ts = { 0, FOLLOW_POLL_NS };
        nanosleep(&ts, NULL);
        if (t->logs < 0) /* the Domain's next start makes the directory */
            t->logs =
                openat(t->droot, LZ_DROOT_LOGS, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (t->logs < 0 || fstatat(t->logs, LZ_DENIALS_FILE, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (!have || st.st_dev != cur.dev || st.st_ino != cur.ino) {
            /* Rotated: the rest of the file we read, then the older file
             * if it is another one (rotated twice between two polls), then
             * the new current one. */
            if (have) {
                follow_read(&cur, o);
                if (follow_open(&old, t->logs, LZ_DENIALS_OLD_FILE) &&
                    (old.dev != cur.dev || old.ino != cur.ino))
                    follow_read(&old, o);
                follow_close(&old);
            }
            have = follow_open(&cur, t->logs, LZ_DENIALS_FILE);
        }
    }
}

int lz_cmd_log(int argc, char **argv, const lz_global_options *g)
{
    enum { OPT_PROFILE, OPT_WORKSPACE, OPT_DENIED, OPT_JSON, OPT_FOLLOW };
    static const lz_option options[] = {
        { "profile", 0, "PROFILE", OPT_PROFILE }, { "workspace", 0, "DIR", OPT_WORKSPACE },
        { "denied", 0, NULL, OPT_DENIED },        { "json", 0, NULL, OPT_JSON },
        { "follow", 'f', NULL, OPT_FOLLOW },
    };
    const char *profile = NULL, *workspace = NULL;
    bool as_json = false, follow_on = false;
    lz_opt_parser p;
    lz_opt_init(&p, options, LZ_ARRAY_SIZE(options), argc, argv, 1);
    for (int o; (o = lz_opt_next(&p)) != LZ_OPT_DONE;) {
        if (o == LZ_OPT_ERROR)
            return lz_cli_usage_error("log", "%s", p.error);
        if (o == LZ_OPT_ARGUMENT)
            return lz_cli_usage_error("log", "unexpected argument '%s'", p.arg);
        if (o == OPT_PROFILE)
            profile = p.value;
        else if (o == OPT_WORKSPACE)
            workspace = p.value;
        else if (o == OPT_JSON)
            as_json = true;
        else if (o == OPT_FOLLOW)
            follow_on = true;
        /* --denied: every record is a denial today. */
    }
    log_target t;
    if (open_target(g, profile, workspace, &t) < 0)
        return LZ_EXIT_FAILURE;
    log_out out = { .json = as_json };
    if (follow_on)
        follow(&t, &out);
    lz_error *err = NULL;
    if (t.logs >= 0 && lz_denial_lines_read(t.logs, print_line, &out, &err) < 0) {
        lz_error_prefix(&err, "%s", t.label);
        lz_error_report(err, stderr);
        lz_error_free(err);
        log_target_clear(&t);
        return LZ_EXIT_FAILURE;
    }
    if (out.printed == 0 && !as_json)
        printf("No denial recorded (log: %s/%s).\n", t.label, LZ_DENIALS_FILE);
    log_target_clear(&t);
    return LZ_EXIT_OK;
}
