/* SPDX-License-Identifier: Apache-2.0
 *
 * Git Sentry (SR-4, read broadly): Git works inside the sandbox on the
 * workspace repository, but the sandbox can never change what the host's Git
 * executes or is configured by. And, with isolate_gitignored, the files Git
 * ignores are the sandbox's own. docs/git.md states the invariant, the model
 * and what remains out of scope.
 *
 * Every filesystem operation here resolves relative to a retained workspace
 * (or Domain Root) descriptor with openat2(RESOLVE_BENEATH|NO_SYMLINKS|
 * NO_MAGICLINKS|NO_XDEV): a symlink in any component is never followed, so
 * neither the plan nor the audit can be led outside the workspace.
 *
 * Two mechanisms:
 *
 *  1. Mount layout (structural), computed on the host before the sandbox
 *     starts: read-only binds over every existing place Git reads
 *     configuration or hooks from — in the workspace's Git directory and in
 *     every other repository found anywhere in the workspace tree (nested
 *     repositories, submodule checkouts, bare repositories) — every ancestor
 *     of those as a bind point (so nothing can be renamed away), the
 *     quarantine shadowed by an empty read-only directory, and the Domain's
 *     own copies over git-ignored paths. The supervisor pins each source by
 *     descriptor (src/supervisor/stage.h); read-only ones are read-only in
 *     the kernel too.
 *
 *  2. Audit (watch and react) of what must not come into existence, because
 *     a read-only bind cannot cover a name that does not exist yet: a new
 *     `.git` anywhere in the tree, a directory that turns into a bare
 *     repository, a new commondir/config.worktree/worktrees/modules/remotes/
 *     branches in a Git directory. inotify watches every directory of the
 *     tree; a forbidden entry is moved at once into the quarantine, which the
 *     sandbox cannot see. An entry that cannot be neutralised makes the audit
 *     fail (-1): the caller stops the sandbox and records the Domain as
 *     unsafe (lz_git_sentry_mark_unsafe) so that the next start is refused
 *     until the entry is gone.
 */
#ifndef LAZARET_GITSENTRY_GIT_SENTRY_H
#define LAZARET_GITSENTRY_GIT_SENTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/error.h"
#include "config/resolve.h"
#include "oci/spec.h"

typedef enum lz_git_kind {
    LZ_GIT_NONE,    /* not a Git repository */
    LZ_GIT_REPO,    /* <workspace>/.git is a directory */
    LZ_GIT_GITFILE, /* <workspace>/.git is a file: linked worktree or submodule checkout */
    LZ_GIT_BARE,    /* the workspace is a bare repository */
} lz_git_kind;

/* A repository marker that existed when the plan was made (the developer's
 * own): a `.git` entry or a bare repository's HEAD, known by path AND inode,
 * so that an impostor under the same name is new. */
typedef struct lz_git_marker {
    char *rel;
    dev_t dev;
    ino_t ino;
} lz_git_marker;

/* A watched directory: inotify watch descriptor -> what it is: a directory
 * of the workspace tree, the top level of a Git directory, a modules/
 * directory (no new members), or several of these (bits, ROLE_* in internal.h). */
/* The watches form a tree: each knows its parent's watch and its own name,
 * so that a directory rename is one change however much lies below it
 * (docs/git.md "An audit the sandbox cannot outpace"); a path is put
 * together from the chain when an event needs it. */
typedef struct lz_git_dirwatch {
    int wd;
    unsigned kind;
    int parent_wd; /* the parent directory's watch; -1: `name` is the whole path */
    char *name;    /* the last component ("" for the workspace itself) */
    dev_t dev;
    ino_t ino;
} lz_git_dirwatch;

/* How the event audit stops the sandbox while it catches up (the
 * coordinator's freezer: lz_freezer_armed, _hold, _release). */
typedef struct lz_git_hold {
    bool (*armed)(void *ctx);   /* can it stop the sandbox (has it processes)? */
    bool (*hold)(void *ctx);    /* stop it and wait until every thread is stopped */
    void (*release)(void *ctx); /* let go of the hold; the last one lets the sandbox go on */
} lz_git_hold;

typedef struct lz_git_plan {
    lz_git_kind kind;
    lz_workspace_mount *mounts; /* in mount order: every parent before what lies in it */
    size_t n_mounts;
    size_t *mount_index; /* hash of mounts[].rel -> index + 1 (0: empty), mount_index_cap slots */
    size_t mount_index_cap;
    char *ignored_notice; /* the session-start line on the isolated paths, NULL when none */
    size_t n_ignored;     /* how many ignored paths are isolated */
    /* Ignored paths left the host's because the plan protects them or
     * something inside them (a hooks directory, an include file). */
    size_t n_ignored_shared;
    size_t n_trees_unlisted; /* nested work trees whose Git could not list their ignored files */
    char **ignored;          /* their relative paths (sorted), skipped by the tree audit */
    bool *ignored_dir;       /* ... whether each is a directory (same order; NULL when read back) */
    lz_git_marker *ignored_ids; /* ... while they are these objects (same order; rel unused) */

    lz_git_marker *markers; /* repository markers present at start */
    size_t n_markers;
    char **git_dirs; /* every Git directory protected (relative; "." for a bare workspace) */
    size_t n_git_dirs;
    lz_git_marker *members; /* members of modules/ directories at start (rel = full path) */
    size_t n_members;

    char *quarantine_rel; /* where forbidden entries go, relative to the workspace */
    /* The lock names held (config.lock beside each Git directory's config:
     * LZ_GIT_LOCK_HOLD), relative; removed when the Domain ends. */
    char **lock_holds;
    size_t n_lock_holds;
    bool *lock_made; /* per hold: this plan created it (a failed plan removes those) */

    /* Audit state (lz_git_sentry_watch onwards). */
    int ws_fd;         /* O_PATH of the workspace, -1 before the plan */
    int quarantine_fd; /* O_PATH of the quarantine directory */
    int inotify_fd;    /* -1 until lz_git_sentry_watch */
    lz_git_dirwatch *watches;
    size_t n_watches, watches_cap;  /* grown by doubling: 50,000 one by one was quadratic */
    struct lz_git_wdslot *wd_slots; /* wd -> index in watches (open addressing) */
    size_t wd_cap;
    int *child_slots; /* (parent wd, name) -> wd (open addressing; 0: empty) */
    int root_wd;      /* the workspace's own watch (0 / -1: none) */
    size_t child_cap, n_children;
    /* Stops the sandbox while the audit needs a consistent tree (a walk
     * after an event overflow, an event it could not place): the
     * coordinator's freezer (coordinator/freezer.h), reached through
     * lz_git_hold so that the Sentry does not depend on the coordinator;
     * NULL: none. hold_ctx is what the functions are given. */
    const struct lz_git_hold *hold;
    void *hold_ctx;
    /* Looks where the developer cannot (eye.h); started at the first
     * directory closed to the developer. */
    struct lz_sentry_eye *eye;
    char *eye_error; /* why the eye could not be started (then none is tried again) */
    /* The Domain's ids on the host (the developer's and the subordinate
     * ranges): who the sandbox can act as. Looked up at first need. */
    bool ids_known;
    bool ids_failed;
    uint32_t subuid_start, subgid_start;
    unsigned long full_walks;     /* whole-tree walks during the session */
    unsigned long moves_followed; /* directory renames followed without a walk */
    size_t n_tree_dirs;           /* directories of the tree under watch */
    unsigned long quarantined;    /* entries moved this generation */
    char *failed_rel;             /* after a failed audit: what could not be neutralised */
    bool final;                   /* the last audit: the sandbox is gone (sequencer state) */
    /* The tree outgrew the watch bound (MAX_TREE_DIRS): a resource limit,
     * not something left un-neutralised (failed_rel stays NULL for it).
     * The coordinator stops the sandbox; the final audit, with no sandbox
     * left, walks everything without watches (attack round i23e, H). */
    bool over_limit;
    char *start_report; /* what the plan neutralised that an earlier generation left */
    const lz_resolved_config *cfg;
} lz_git_plan;

#define LZ_GIT_PLAN_INIT                                                                           \
    {                                                                                              \
        .ws_fd = -1, .quarantine_fd = -1, .inotify_fd = -1                                         \
    }

/* Compute the plan for the resolved configuration's workspace. Refuses when
 * the Domain was marked unsafe and the entries named then still exist, when
 * the workspace's .git is a symlink or not a valid Git directory, when a
 * `.git` anywhere in the tree is a symlink, when a protected path lies
 * below a symlink, when the host's Git cannot read a repository that
 * encloses the workspace, and when the workspace lies inside a Git
 * directory. Creates (on the host) the quarantine directory, a missing
 * hooks/ of each Git directory, empty files for includes that do not exist,
 * the Domain Root's ignored/ tree, and empty placeholders for literal
 * directory patterns of .gitignore. */
LZ_MUST_CHECK
int lz_git_sentry_plan(const lz_resolved_config *cfg, lz_git_plan *ret, lz_error **err);

/* Start watching: an inotify watch on every directory of the tree and on
 * every Git directory; plan->inotify_fd becomes readable on changes. Runs a
 * full audit first. Returns what lz_git_sentry_audit returns. */
LZ_MUST_CHECK
int lz_git_sentry_watch(lz_git_plan *plan, char **ret_report, lz_error **err);

/* Neutralise every forbidden entry that appeared since the plan was made:
 * move it into the quarantine. full: walk the whole tree; otherwise handle
 * the pending inotify events (which may still walk subtrees, or the whole
 * tree after a rename or an event overflow).
 * Returns the number moved (0 when all is well) with a human description in
 * *ret_report when > 0; -1 when something could not be neutralised (or the
 * tree could not be audited), with *err naming it. */
LZ_MUST_CHECK
int lz_git_sentry_audit(lz_git_plan *plan, bool full, char **ret_report, lz_error **err);

/* The last audit of the generation succeeded with no sandbox process left:
 * forget the baseline recorded for crash recovery. While that record exists
 * (the coordinator died before its last audit), the next plan first audits
 * the workspace against it, so nothing made in the last moments of a
 * crashed generation is taken for the developer's own. */
void lz_git_sentry_done(lz_git_plan *plan);

/* The Domain ends: remove from the workspace every placeholder directory
 * the Domain made on the host for a literal .gitignore pattern
 * (node_modules/), where it is still an empty directory, so that the
 * developer's project looks as before the run; the next start makes them
 * again (docs/git.md "Git-ignored files"). Only when no other Domain uses
 * the workspace (the caller's check): there a placeholder is a mount point
 * of that Domain's sandbox. *ret_removed: how many went. */
LZ_MUST_CHECK
int lz_git_sentry_remove_placeholders(const lz_git_plan *plan, size_t *ret_removed, lz_error **err);

/* What a held lock name holds (docs/git.md "The host's git config while a
 * Domain runs"): the host's Git creates `config.lock` (O_EXCL) and renames
 * it over `config`; while the Domain runs that name is this file, bound
 * read-only in the sandbox, so the host's `git config` fails at once
 * ("could not lock config file ...: File exists") and no lock file the
 * sandbox could write into (attack round a27, F6) ever becomes the host's
 * configuration. */
#define LZ_GIT_LOCK_HOLD                                                                           \
    "Lazaret: a sandbox runs on this repository. While it runs, this file keeps\n"                 \
    "the host's git from changing the configuration next to it (the sandbox could\n"               \
    "write into git's lock file). Stop it first (lazaret stop), then change the\n"                 \
    "configuration. Lazaret removes this file when the sandbox ends; when no\n"                    \
    "sandbox runs on this repository any more (lazaret status lists none, e.g.\n"                  \
    "after a crash), you may remove it yourself.\n"

/* The Domain ends: remove every lock name it held (LZ_GIT_LOCK_HOLD), where
 * the file there is still exactly that; only when no other Domain uses
 * the workspace (the caller's check, as for the placeholders).
 * *ret_removed: how many went. */
LZ_MUST_CHECK
int lz_git_sentry_release_locks(const lz_git_plan *plan, size_t *ret_removed, lz_error **err);

/* Record in the Domain Root that the audit failed on `what`: the next plan
 * refuses to start while any of the named paths exists. */
LZ_MUST_CHECK
int lz_git_sentry_mark_unsafe(const lz_resolved_config *cfg, const char *what, lz_error **err);

/* Is there a record of an audit that failed (lz_git_sentry_mark_unsafe),
 * or one that cannot be read? The ownership give-back stays away from such a
 * Domain's workspace: giving back a directory the audit could not neutralise
 * would open it to the developer's Git (attack round i23d). */
bool lz_git_sentry_unsafe_recorded(const lz_resolved_config *cfg);

/* The line a session prints at its start on a terminal: how many git-ignored
 * paths are the sandbox's own copies and a few of their names (bounded:
 * three names of at most 40 bytes), with the pointer to the docs. NULL when
 * none are isolated. The plan keeps it. */
const char *lz_git_sentry_ignored_notice(const lz_git_plan *plan);

void lz_git_plan_clear(lz_git_plan *plan);

#endif
