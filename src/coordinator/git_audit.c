/* SPDX-License-Identifier: Apache-2.0 */
#include "coordinator/git_audit.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "coordinator/generation.h"
#include "coordinator/log.h"
#include "coordinator/session.h"

/* The audit could not neutralise what the sandbox made (or could not audit
 * at all): fail closed. */
static void sentry_failed(coord *c, const char *when, lz_error *err) __attribute__((noreturn));
static void sentry_failed(coord *c, const char *when, lz_error *err)
{
    c->sentry_failed = true;
    log_error(c, "Git Sentry audit failed", err);
    lz_error *e2 = NULL;
    if (lz_git_sentry_mark_unsafe(c->a->cfg, c->git.failed_rel, &e2) < 0)
        log_error(c, "cannot record the unsafe workspace", e2);
    lz_error_free(e2);
    char *line = lz_xasprintf("Git Sentry (%s): %s%s%s. The host's Git could obey what the "
                              "sandbox made, so the sandbox is stopped now; Lazaret will not "
                              "start this Domain again while %s exists. Do not run git in %s "
                              "before you have inspected it.",
                              when, err ? err->message : "the audit failed",
                              err && err->errnum ? ": " : "",
                              err && err->errnum ? strerror(err->errnum) : "",
                              c->git.failed_rel ? c->git.failed_rel : "it",
                              c->a->cfg->workspace.label);
    tell_sessions(c, line);
    free(line);
    teardown_and_exit(c, 1);
}

void git_audit(coord *c, const char *when, bool full)
{
    if (c->git.ws_fd < 0 || c->sentry_failed)
        return;
    char *report = NULL;
    lz_error *err = NULL;
    int n = lz_git_sentry_audit(&c->git, full, &report, &err);
    if (n < 0)
        sentry_failed(c, when, err);
    if (n == 0)
        return;
    clog_(c, "Git Sentry (%s): %s", when, report);
    char *line = lz_xasprintf("Git Sentry: the sandbox created what could make the host's Git run "
                              "its commands; quarantined: %s",
                              report);
    tell_sessions(c, line);
    free(line);
    free(report);
}

static void on_watch_event(lz_loop *loop, lz_loop_source *src, int fd, short revents, void *data)
{
    (void) loop, (void) src, (void) fd;
    if (revents & POLLIN)
        git_audit(data, "change in the workspace", false);
}

void git_audit_attach(coord *c)
{
    if (c->git.inotify_fd >= 0)
        c->git_src = lz_loop_add_fd(c->loop, c->git.inotify_fd, POLLIN, on_watch_event, c);
}

void git_audit_final(coord *c)
{
    if (c->git.ws_fd < 0 || c->sentry_failed)
        return;
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
    lz_error_free(e);
    free(report);
}
