/* SPDX-License-Identifier: Apache-2.0
 *
 * Git Sentry (SR-4, read broadly): Git works inside the sandbox on the
 * workspace repository, but the sandbox can never change what the host's Git
 * executes or is configured by. And, with isolate_gitignored, the files Git
 * ignores are the sandbox's own. docs/git.md explains the model.
 *
 * Two mechanisms:
 *
 *  1. Mount layout, computed on the host before the sandbox starts, from the
 *     host's own view of the repository (Git run with core.fsmonitor and
 *     core.hooksPath neutralised): read-only binds over every existing place
 *     Git reads configuration or executable hooks from — .git/config,
 *     .git/hooks, config.worktree, commondir, worktrees/, each submodule
 *     git dir's config and hooks, every configuration file an include pulls
 *     in from inside the workspace, a core.hooksPath inside the workspace, a
 *     .git *file* — and Domain-scoped directories over ignored paths.
 *
 *  2. An audit of the entries that must not come into existence (a new
 *     commondir, config.worktree, worktrees/, modules/<new>, …): read-only
 *     binds cannot cover a file that does not exist yet. The coordinator runs
 *     the audit when the Git directory changes (inotify), at every session
 *     start and end, and at teardown; a forbidden new entry is moved aside
 *     into .git/lazaret-quarantine/ at once, and the sessions are told.
 */
#ifndef LAZARET_COORDINATOR_GIT_SENTRY_H
#define LAZARET_COORDINATOR_GIT_SENTRY_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "config/resolve.h"
#include "oci/spec.h"

typedef enum lz_git_kind {
    LZ_GIT_NONE,      /* not a Git repository */
    LZ_GIT_REPO,      /* <workspace>/.git is a directory */
    LZ_GIT_GITFILE,   /* <workspace>/.git is a file: linked worktree or submodule checkout */
    LZ_GIT_BARE,      /* the workspace is a bare repository */
} lz_git_kind;

/* One forbidden-to-appear path, relative to the workspace. */
typedef struct lz_git_watch {
    char *rel;        /* e.g. ".git/commondir" */
    bool dir_members; /* watch for new members of this directory instead */
    char **known;     /* for dir_members: the members that existed at start */
    unsigned long long *known_ino; /* ... and their inode numbers */
    size_t n_known;
} lz_git_watch;

typedef struct lz_git_plan {
    lz_git_kind kind;
    lz_spec_mount *mounts;   /* read-only protections and ignored-path binds, in mount order */
    char **owned;            /* strings the mounts point to (freed with the plan) */
    size_t n_mounts, n_owned;
    lz_git_watch *watches;
    size_t n_watches;
    char *git_dir;           /* host path of the Git directory to watch, or NULL */
    size_t n_ignored;        /* how many ignored paths are isolated */
    char **gitlinks;         /* gitlink paths (submodules, embedded repositories) at start */
    size_t n_gitlinks;
} lz_git_plan;

/* Compute the plan for the resolved configuration's workspace. Creates the
 * Domain Root's ignored/ tree (and empty placeholders on the host for
 * ignored paths that do not exist yet) and a missing .git/hooks. */
int lz_git_sentry_plan(const lz_resolved_config *cfg, lz_git_plan *ret, lz_error **err);

/* Move every forbidden entry that appeared since the plan was made into
 * <git dir>/lazaret-quarantine/. Returns the number moved (0 when all is
 * well) and, when > 0, a human description in *ret_report. */
int lz_git_sentry_audit(const lz_resolved_config *cfg, const lz_git_plan *plan, char **ret_report,
                        lz_error **err);

void lz_git_plan_clear(lz_git_plan *plan);

#endif
