/* SPDX-License-Identifier: Apache-2.0 */
#include "coordinator/git_audit.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "coordinator/freezer.h"
#include "coordinator/log.h"
#include "coordinator/session_send.h"
#include "gitsentry/eye.h"
#include "store/domain_root.h"

/* Quarantine notices: the first ones all, then one per gap. */
#define NOTICE_BURST 20
#define NOTICE_GAP_MS 10000

/* The audit could not neutralise what the sandbox made (or could not audit
 * at all): fail closed. The sandbox is frozen here, at once; the sessions
 * are told why; the teardown is requested, and the loop runs it as soon
 * as the callback that audited returns: no other event is served first
 * (request_teardown_at_once ends the round), and the callers start
 * nothing once c->stop_requested is set (no session command, no host
 * command). So no host Git can act on what the audit could not
 * neutralise: it would need a host command to start (docs/coordinator.md
 * "Layers", docs/git.md "Fail closed"). */
static void sentry_failed(coord *c, const char *when, lz_error *err)
{
    if (c->git.over_limit && !c->git.failed_rel) {
        /* More directories than can be watched (a node_modules/ not yet
         * ignored, say): nothing was left un-neutralised, but the audit
         * cannot stay current. The sandbox stops at once; the final audit
         * walks the whole tree without watches once it is gone and records
         * an unsafe workspace only if something there cannot be set aside
         * (attack round i23e: this once marked the Domain unsafe). */
        lz_best_effort(lz_freezer_hold(c->freezer)); /* none: the teardown kills it */
        c->sentry_holds = true;
        log_error(c, "Git Sentry: the watch bound was reached", err);
        const char *what = err && err->message ? err->message : "the workspace is too large";
        if (strncmp(what, "Git Sentry: ", 12) == 0)
            what += 12;
        char *line = lz_xasprintf("Git Sentry: %s, more than Lazaret can watch, so the sandbox "
                                  "is stopped now (what it made is audited as it ends). Ignore "
                                  "generated directories in .gitignore (node_modules/, build "
                                  "outputs), or choose a smaller workspace, and run again.",
                                  what);
        tell_sessions(c, line);
        free(line);
        lz_error_free(err);
        request_teardown_at_once(c, 1);
        return;
    }
    c->sentry_failed = true;
    log_error(c, "Git Sentry audit failed", err);
    /* Recorded before the freeze's wait (up to LZ_FREEZE_STOP_WAIT_MS): a
     * coordinator killed meanwhile must not lose the unsafe record. */
    lz_error *e2 = NULL;
    if (lz_git_sentry_mark_unsafe(c->a->cfg, c->git.failed_rel, &e2) < 0)
        log_error(c, "cannot record the unsafe workspace", e2);
    lz_error_free(e2);
    /* Stopped now; the teardown kills it frozen (before, its first step
     * froze it: the freeze must not wait for the request to run). */
    lz_best_effort(lz_freezer_hold(c->freezer));
    c->sentry_holds = true;
    char *line =
        lz_xasprintf("Git Sentry (%s): %s%s%s. The host's Git could obey what the "
                     "sandbox made, so the sandbox is stopped now; Lazaret will not "
                     "start this Domain again while %s exists. Do not run git in %s "
                     "before you have inspected it.",
                     when, err ? err->message : "the audit failed", err && err->errnum ? ": " : "",
                     err && err->errnum ? strerror(err->errnum) : "",
                     c->git.failed_rel ? c->git.failed_rel : "it", c->a->cfg->workspace.label);
    tell_sessions(c, line);
    free(line);
    lz_error_free(err);
    request_teardown_at_once(c, 1);
}

/* One audit; false when it failed closed (the teardown is requested). */
static bool audit_once(coord *c, const char *when, bool full)
{
    char *report = NULL;
    lz_error *err = NULL;
    int n = lz_git_sentry_audit(&c->git, full, &report, &err);
    if (n < 0) {
        sentry_failed(c, when, err);
        return false;
    }
    if (n == 0)
        return true;
    clog_(c, "Git Sentry (%s): %s", when, report);
    /* The sessions hear each quarantine, but a sandbox re-making the same
     * thing in a loop must not flood their terminals: after the first
     * NOTICE_BURST, one line per NOTICE_GAP_MS says how many more there
     * were (the log has each). */
    int64_t now = lz_loop_now_ms();
    c->sentry_notices++;
    if (c->sentry_notices <= NOTICE_BURST || now - c->sentry_notice_ms >= NOTICE_GAP_MS) {
        char *line = c->sentry_untold
                         ? lz_xasprintf("Git Sentry: the sandbox created what could make the "
                                        "host's Git run its commands; quarantined: %s (and %lu "
                                        "more since the last notice: logs/coordinator.log)",
                                        report, c->sentry_untold)
                         : lz_xasprintf("Git Sentry: the sandbox created what could make the "
                                        "host's Git run its commands; quarantined: %s",
                                        report);
        c->sentry_untold = 0;
        c->sentry_notice_ms = now;
        tell_sessions(c, line);
        free(line);
    } else {
        c->sentry_untold++;
    }
    free(report);
    return true;
}

/* The sessions hear once per generation that the sandbox was paused for
 * the audit; the log counts every pause (at teardown). */
static void throttled(coord *c)
{
    if (c->throttle_told)
        return;
    c->throttle_told = true;
    clog_(c, "Git Sentry: the audit fell behind the sandbox; the sandbox was paused until it "
             "caught up (docs/git.md \"An audit the sandbox cannot outpace\")");
    tell_sessions(c,
                  "Git Sentry: the sandbox changed the workspace faster than Lazaret could "
                  "check it, so it is paused for a moment whenever that happens (see docs/git.md "
                  "\"An audit the sandbox cannot outpace\"); nothing was lost");
}

/* The Git Sentry stops the sandbox through the freezer (git_sentry.h
 * lz_git_hold). */
static bool hold_armed(void *f)
{
    return lz_freezer_armed(f);
}

static bool hold_take(void *f)
{
    return lz_freezer_hold(f);
}

static void hold_release(void *f)
{
    lz_freezer_release(f);
}

static const lz_git_hold sentry_hold = { hold_armed, hold_take, hold_release };

void git_audit(coord *c, const char *when, bool full)
{
    /* Once the teardown is asked for, its frozen and final audits are the
     * ones left (and a failed audit is not repeated). */
    if (c->git.ws_fd < 0 || c->sentry_failed || c->stop_requested)
        return;
    c->git.hold = &sentry_hold;
    c->git.hold_ctx = c->freezer;
    lz_freezer_audit_begin(c->freezer);
    if (!audit_once(c, when, full))
        return;
    /* The watchdog froze the sandbox while the audit was behind: once every
     * sandbox thread has stopped, what it did before stopping is in the
     * queue — drain that too, then let the sandbox go on. */
    if (lz_freezer_audit_drained(c->freezer)) {
        lz_freezer_wait_stopped(c->freezer);
        if (!audit_once(c, when, false))
            return;
        lz_freezer_audit_drained(c->freezer);
        lz_freezer_watchdog_done(c->freezer);
        throttled(c);
    }
}

static void on_watch_event(lz_loop *loop, lz_loop_source *src, int fd, short revents, void *data)
{
    (void) loop, (void) src, (void) fd;
    if (revents & POLLIN)
        git_audit(data, "change in the workspace", false);
}

int git_audit_attach(coord *c)
{
    if (c->git.inotify_fd < 0)
        return 0;
    c->git.hold = &sentry_hold;
    c->git.hold_ctx = c->freezer;
    c->git_src = lz_loop_add_fd(c->loop, c->git.inotify_fd, POLLIN, on_watch_event, c);
    lz_error *err = NULL;
    if (lz_freezer_watch(c->freezer, c->git.inotify_fd, &err) < 0) {
        /* Without the watchdog the audit could be outpaced: fail closed. */
        log_error(c, "the Git Sentry cannot run without its watchdog", err);
        lz_error_free(err);
        return -1;
    }
    return 0;
}

void git_audit_teardown_freeze(coord *c)
{
    if (!lz_freezer_armed(c->freezer))
        return;
    /* Held once only: a second hold would wait for the stop once more. */
    if (!c->sentry_holds)
        lz_freezer_hold(c->freezer);
    if (c->git.ws_fd < 0 || c->sentry_failed)
        return;
    /* Current once more with the sandbox stopped; the final audit follows
     * when the sandbox is gone. A failure is recorded there. */
    char *report = NULL;
    lz_error *err = NULL;
    int n = lz_git_sentry_audit(&c->git, false, &report, &err);
    if (n > 0)
        clog_(c, "Git Sentry (teardown, sandbox frozen): %s", report);
    else if (n < 0)
        log_error(c, "Git Sentry audit at teardown (sandbox frozen) failed", err);
    lz_error_free(err);
    free(report);
}

void git_audit_freeze_stats(coord *c)
{
    lz_freeze_stats st;
    lz_freezer_stats(c->freezer, &st);
    clog_(c,
          "Git Sentry: %lu freezes (%lu by the watchdog), longest %lld us, in all %lld us, "
          "longest wait for the sandbox to stop %lld us; %lu renames followed, %lu whole-tree "
          "walks, %lu looks into directories closed to you (its eye)",
          st.freezes, st.watchdog_freezes, st.max_frozen_us, st.total_frozen_us, st.max_stop_us,
          c->git.moves_followed, c->git.full_walks, lz_sentry_eye_requests(c->git.eye));
}

/* Is one workspace the other, or inside it (both normalized absolute
 * paths)? A Domain on a repository nested in this workspace, or on one
 * this workspace is nested in, has mounts on the same host names (attack
 * round a27b, G4: the end of one stopped the other). */
static bool workspaces_overlap(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), n = la < lb ? la : lb;
    if (strncmp(a, b, n) != 0)
        return false;
    const char *longer = la < lb ? b : a;
    return la == lb || longer[n] == '/' || (n == 1 && a[0] == '/');
}

/* Does another running Domain (another profile) use this workspace, or
 * one overlapping it? Its sandbox has its own copies mounted on the
 * placeholders and the held lock names: removing one on the host would
 * detach that mount under it. A running Domain whose status
 * cannot be read (still starting, say) counts as one: then the
 * placeholders stay, as before issue 26. */
static bool workspace_used_by_another_domain(coord *c)
{
    int rt = lz_plan_open(&c->a->cfg->runtime_root, O_PATH | O_DIRECTORY, true, NULL);
    if (rt < 0)
        return true;
    int dd = openat(rt, "domains", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close(rt);
    DIR *d = dd >= 0 ? fdopendir(dd) : NULL;
    if (!d) {
        if (dd >= 0)
            close(dd);
        return true;
    }
    bool used = false;
    for (struct dirent *e; !used && (e = readdir(d));) {
        if (strlen(e->d_name) != 64 || strcmp(e->d_name, c->id_hex) == 0 ||
            !lz_domain_id_valid(e->d_name))
            continue;
        int dfd = openat(dirfd(d), e->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
            continue;
        if (lz_domain_lock_held(dfd)) {
            /* Running without a readable status: counted as using it. */
            json_t *st = lz_domain_running_status(dfd);
            const char *ws = json_string_value(json_object_get(st, "workspace"));
            used = !ws || workspaces_overlap(ws, c->a->cfg->workspace.label);
            json_decref(st);
        }
        close(dfd);
    }
    closedir(d);
    return used;
}

/* The Domain ends: the placeholders it made on the host go, so the
 * developer's project looks as before the run (issue 26); and so do the
 * configuration lock names it held (git_sentry.h LZ_GIT_LOCK_HOLD), so
 * that the host's `git config` works again: whatever the last audit
 * found, no sandbox process is left to write into a lock file. Not while
 * another Domain uses the workspace: there each is a mount point of that
 * Domain's sandbox (its removal would stop it). */
static void remove_placeholders(coord *c, bool audited)
{
    if (workspace_used_by_another_domain(c)) {
        clog_(c, "Git Sentry: another running Domain uses this workspace: its placeholder "
                 "directories and configuration lock names stay");
        return;
    }
    size_t removed = 0;
    lz_error *err = NULL;
    if (!audited) {
        /* placeholders stay with what the failed audit could not check */
    } else if (lz_git_sentry_remove_placeholders(&c->git, &removed, &err) < 0) {
        log_error(c, "cannot remove the placeholder directories of git-ignored paths", err);
    } else if (removed) {
        clog_(c, "Git Sentry: removed %zu empty placeholder director%s from the workspace", removed,
              removed == 1 ? "y" : "ies");
    }
    lz_error_free(err);
    err = NULL;
    if (lz_git_sentry_release_locks(&c->git, &removed, &err) < 0)
        log_error(c, "cannot remove a configuration lock name the Domain held", err);
    else if (removed)
        clog_(c, "Git Sentry: released %zu configuration lock name%s", removed,
              removed == 1 ? "" : "s");
    lz_error_free(err);
}

void git_audit_final(coord *c)
{
    if (c->git.ws_fd < 0)
        return;
    if (c->sentry_failed) {
        remove_placeholders(c, false);
        return;
    }
    char *report = NULL;
    lz_error *e = NULL;
    c->git.final = true;
    int n = lz_git_sentry_audit(&c->git, true, &report, &e);
    if (n < 0) {
        log_error(c, "Git Sentry audit at teardown failed", e);
        lz_error *e2 = NULL;
        if (lz_git_sentry_mark_unsafe(c->a->cfg, c->git.failed_rel, &e2) < 0)
            log_error(c, "cannot record the unsafe workspace", e2);
        lz_error_free(e2);
    } else if (n > 0) {
        clog_(c, "Git Sentry (teardown): %s", report);
    }
    if (n >= 0)
        lz_git_sentry_done(&c->git);
    remove_placeholders(c, n >= 0);
    lz_error_free(e);
    free(report);
}
