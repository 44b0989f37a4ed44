/* SPDX-License-Identifier: Apache-2.0
 *
 * The Git Sentry's own shared parts: its bounds, the types its files pass
 * one another (the plan builder, a walk of the tree, name lists), and the
 * functions one file of src/gitsentry/ offers another (prefix lz_gs_).
 * Included only inside src/gitsentry/; everyone else uses git_sentry.h.
 *
 * The files, each using only those listed below it (no circle of calls;
 * docs/coordinator.md "The Git Sentry"; scripts/layout-check.py checks it):
 *   plan.c            lz_git_sentry_plan: the mount plan, the quarantine,
 *                     recovery of a generation that ended without its audit
 *   events.c          the event audit, lz_git_sentry_watch/_audit
 *   walk.c            the tree audit: one walk for the plan and the audit
 *                     (an event audit lends it its queue: walk.peek)
 *   sequencer.c       stopped rebases: what a todo list would run
 *   watches.c         the inotify watches as a tree
 *   sight.c           looking where the developer cannot (the eye), and the
 *                     quarantine move
 *   ignored.c         git-ignored isolation: the Domain's copies
 *   records.c         what the Domain Root records: unsafe entries, the
 *                     baseline, the ignored and placeholder lists
 *   config_sources.c  the host's Git asked where its configuration comes from
 *   protect.c         what the host's Git reads, bound read-only
 *   table.c           the plan's tables: mounts, markers, lists, freeing
 *   eye.c             the eye itself, a helper in a user namespace
 */
#ifndef LAZARET_GITSENTRY_INTERNAL_H
#define LAZARET_GITSENTRY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/spawn.h"
#include "gitsentry/eye.h"
#include "gitsentry/git_sentry.h"
#include "store/domain_root.h"

/* Bounds of the isolation (docs/git.md "How the copies are mounted"): every
 * ignored path is a kernel mount in the composed workspace tree, and so is
 * every ancestor directory of one; fs.mount-max (100,000 by default) bounds
 * the mounts of each mount namespace, and the tree is copied into runsc's. */
/* New placeholder directories for `name/` patterns, per start. */
#define MAX_PLACEHOLDERS 64
#define MAX_IGNORED 20000
#define MAX_WORKSPACE_MOUNTS 50000
#define MAX_MODULE_DEPTH 8
#define MAX_TREE_DEPTH 256
#define MAX_TREE_DIRS 50000 /* of fs.inotify.max_user_watches, shared by the user's Domains */
#define MAX_REPORT 4096
#define QUARANTINE_NAME "lazaret-quarantine"
#define UNSAFE_FILE "git-sentry-unsafe"
#define BASELINE_FILE "git-sentry-baseline"

/* The Domain's record of what it isolated, <Domain Root>/ignored.list, and
 * of the placeholder directories Lazaret made, <Domain Root>/placeholders
 * (NUL-separated relative paths, "/" after a directory). The Domain Root is
 * Lazaret's, never bound into a sandbox. The ignore rules are files the
 * sandbox writes (.gitignore anywhere, .git/info/exclude): a path isolated
 * once stays isolated until `lazaret state reset`, so that dropping `.env`
 * from .gitignore does not hand the host's `.env` to the next generation
 * (attack round i12c, U1/U2). */
#define IGNORED_RECORD LZ_DROOT_IGNORED_RECORD
#define PLACEHOLDER_RECORD LZ_DROOT_PLACEHOLDER_RECORD
#define RECORD_MAX ((size_t) 8 << 20)

/* Names in a Git directory that decide what Git runs or reads as
 * configuration, and that must not come into existence during a session:
 * existing ones are read-only binds or bind points (a mount at that path),
 * new ones are quarantined. config and hooks are here for Git directories
 * that lack them. remotes/ and branches/ are the legacy remote definitions
 * Git still reads. (walk.c) */
#define LZ_GS_N_GIT_DIR_ENTRIES 8
extern const char *const lz_gs_git_dir_entries[LZ_GS_N_GIT_DIR_ENTRIES];

/* The directories of a stopped rebase, cherry-pick or am (sequencer.c). */
#define LZ_GS_N_SEQUENCER_DIRS 3
extern const char *const lz_gs_sequencer_dirs[LZ_GS_N_SEQUENCER_DIRS];

/* IN_ATTRIB: a directory the sandbox makes readable (or searchable) again
 * reveals what it holds without any entry being created. */
#define WATCH_MASK                                                                                 \
    (IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_MOVE_SELF | IN_DELETE_SELF | IN_ATTRIB |         \
     IN_ONLYDIR)

/* What a watched directory is (lz_git_dirwatch.kind: bits). */
enum { ROLE_TREE = 1, ROLE_GITDIR = 2, ROLE_MODULES = 4, ROLE_SEQUENCER = 8, ROLE_GITINNER = 16 };

/* ---- types -------------------------------------------------------------- */

/* The plan being built (lz_git_sentry_plan). */
typedef struct builder {
    lz_git_plan *p;
    const lz_resolved_config *cfg;
    const char *ws; /* canonical workspace (label) */
    int ws_fd;
    /* Work trees the walk found with a `.git` file (linked worktrees,
     * separate Git directories): their ignored files are listed too. */
    char **gitfile_trees;
    size_t n_gitfile_trees;
} builder;

/* A list of names (records.c). */
typedef struct name_list {
    char **v;
    size_t n;
} name_list;

/* One isolation of the git-ignored paths (ignored.c). */
typedef struct ignored_run {
    int droot, ign;
    name_list record; /* what earlier generations isolated */
    name_list placeholders;
} ignored_run;

/* A walk of the tree (walk.c): the plan's, or the audit's. */
typedef struct walk {
    lz_git_plan *p;
    builder *b; /* plan mode: protections go here; NULL in audit mode */
    bool watch; /* add inotify watches to every directory visited */
    char *report;
    size_t report_len;
    int moved;
    /* An entry whose subtree is under watch already (a followed rename):
     * checked as an entry, not walked again. */
    const char *known_subtree;
    /* Event mode (not a whole-tree walk): a directory that is under watch
     * already was audited, and its events come; it is not walked again. */
    bool events;
    /* While a walk runs in event mode: events read meanwhile (peek_urgent)
     * go here, to be handled in order after it; no_descend while the
     * urgent ones are judged in the middle of the walk. */
    struct ev_list *peeked;
    struct move_list *moves; /* renames half-seen (follow_moves) */
    /* Set by the event audit (events.c), which lends the walk its queue:
     * called every PEEK_EVERY entries to judge urgent events at once. A
     * callback, so that walk.c does not call up into events.c. */
    int (*peek)(struct walk *w);
    bool no_descend, in_peek, peek_overflow;
    unsigned since_peek;
    lz_error **err;
} walk;

/* ---- table.c ------------------------------------------------------- */
/* The plan's tables: uses nothing above it. */
size_t lz_gs_hash_str(const char *s);
bool lz_gs_has_mount(const lz_git_plan *p, const char *rel);
void lz_gs_index_mounts(lz_git_plan *p);
void lz_gs_add_mount(builder *b, const char *rel, lz_mount_base base, bool readonly, bool dir);
bool lz_gs_in_ignored_copy(const lz_git_plan *p, const char *rel);
void lz_gs_add_marker(lz_git_marker **v, size_t *n, const char *rel, const struct stat *st);
bool lz_gs_known(const lz_git_marker *v, size_t n, const char *rel, const struct stat *st);
bool lz_gs_listed(char **v, size_t n, const char *s);
int lz_gs_cmp_str(const void *a, const void *b);
size_t lz_gs_path_depth(const char *rel);

/* ---- protect.c ----------------------------------------------------- */

LZ_MUST_CHECK
int lz_gs_protect_if_exists(builder *b, const char *rel, lz_error **err);
LZ_MUST_CHECK
int lz_gs_protect_git_dir(builder *b, const char *gd, int depth, lz_error **err);
/* The lock name of the configuration file rel (an existing regular file
 * protected read-only) held while the Domain runs (git_sentry.h
 * LZ_GIT_LOCK_HOLD). */
int lz_gs_hold_lock_name(builder *b, const char *rel, lz_error **err);

/* config_words.c: the words of configuration values. */
/* A path value made absolute the way Git does (`~/`, `~user/`, relative to
 * base); NULL when it cannot be. */
char *lz_gs_expand_git_path(const char *v, const char *base);
/* abs relative to the workspace (lexically normalised), NULL outside it. */
char *lz_gs_ws_rel(const builder *b, const char *abs);
/* Does the key (its first n bytes) name a directory Git runs programs from
 * (core.hooksPath, init.templateDir)? */
bool lz_gs_is_program_dir_key(const char *key, size_t n);
/* Such a directory given by the value v (relative to top): made when
 * missing (unless computed by the shell) and protected. */
int lz_gs_protect_program_dir(builder *b, const char *key, const char *v, const char *top,
                              lz_error **err);
/* Every word of the value of key that names a file of the workspace
 * protected (a symlink named as a program refuses the start). */
int lz_gs_protect_value_words(builder *b, const char *key, const char *value, const char *top,
                              lz_error **err);

/* A plan that failed: the lock names it made are removed again (the
 * host's `git config` would fail on them until the next Domain's end). */
void lz_gs_release_made_locks(const lz_git_plan *plan, int ws_fd);
bool lz_gs_valid_git_dir(int ws_fd, const char *gd, char **ret_why);

/* ---- config_sources.c ---------------------------------------------- */

int lz_gs_host_git_in(builder *b, const char *gd, const char *wt, char *const *args,
                      lz_spawn_output *out, lz_error **err);
LZ_MUST_CHECK
int lz_gs_protect_config_sources(builder *b, const char *gd, const char *wt, lz_error **err);
/* The repositories whose work tree encloses the workspace: what their
 * configuration names inside it. */
LZ_MUST_CHECK
int lz_gs_protect_enclosing(builder *b, lz_error **err);

/* ---- records.c ----------------------------------------------------- */

void lz_gs_names_add(name_list *l, const char *s);
void lz_gs_names_clear(name_list *l);
bool lz_gs_names_has(const name_list *l, const char *s);
LZ_MUST_CHECK
int lz_gs_record_read(int droot, const char *name, size_t max, const char *label, name_list *ret,
                      lz_error **err);
LZ_MUST_CHECK
int lz_gs_record_write(int droot, const char *name, const name_list *l, const char *label,
                       lz_error **err);
LZ_MUST_CHECK
int lz_gs_check_unsafe(builder *b, lz_error **err);
LZ_MUST_CHECK
int lz_gs_read_baseline(const lz_resolved_config *cfg, lz_git_plan *t, lz_error **err);
LZ_MUST_CHECK
int lz_gs_save_baseline(lz_git_plan *p, lz_error **err);

/* ---- ignored.c ----------------------------------------------------- */

LZ_MUST_CHECK
int lz_gs_isolate_begin(builder *b, const lz_resolved_config *cfg, ignored_run *run,
                        lz_error **err);
LZ_MUST_CHECK
int lz_gs_isolate_recorded(builder *b, ignored_run *run, lz_error **err);
LZ_MUST_CHECK
int lz_gs_isolate_listed(builder *b, ignored_run *run, const char *gd, const char *wt,
                         bool required, lz_error **err);
LZ_MUST_CHECK
int lz_gs_isolate_finish(builder *b, const lz_resolved_config *cfg, ignored_run *run,
                         lz_error **err);
void lz_gs_ignored_run_clear(ignored_run *r);

/* ---- sight.c ------------------------------------------------------- */

lz_sentry_eye *lz_gs_eye_of(lz_git_plan *p);
bool lz_gs_refused(int en);
bool lz_gs_sandbox_may_enter(lz_git_plan *p, const struct stat *st);
int lz_gs_make_ours_writable(int dfd, const char *name);
int lz_gs_sight_open(lz_git_plan *p, int dfd, const char *rel, int flags);
int lz_gs_sight_lstat(lz_git_plan *p, int dfd, const char *name, struct stat *st);
ssize_t lz_gs_sight_readlink(lz_git_plan *p, int dfd, const char *name, char *buf, size_t size);
void lz_gs_report_append(walk *w, const char *line);
void lz_gs_fail_at(walk *w, const char *rel);
int lz_gs_quarantine(walk *w, int dfd, const char *dir_rel, const char *name);

/* ---- watches.c ----------------------------------------------------- */

lz_git_dirwatch *lz_gs_watch_by_wd(lz_git_plan *p, int wd);
int lz_gs_child_get(lz_git_plan *p, int parent, const char *name);
void lz_gs_child_put(lz_git_plan *p, int wd);
void lz_gs_child_del(lz_git_plan *p, int wd);
char *lz_gs_watch_rel(lz_git_plan *p, const lz_git_dirwatch *dw);
lz_git_dirwatch *lz_gs_watch_by_rel(lz_git_plan *p, const char *rel);
void lz_gs_drop_watch(lz_git_plan *p, size_t i);
int lz_gs_add_watch(walk *w, int dfd, const char *rel, unsigned role);
bool lz_gs_watch_below(lz_git_plan *p, const lz_git_dirwatch *dw, int top);
void lz_gs_unwatch_below(lz_git_plan *p, int top);

/* ---- sequencer.c --------------------------------------------------- */

int lz_gs_audit_sequencer(walk *w, int gdfd, const char *gd);

/* ---- walk.c -------------------------------------------------------- */

int lz_gs_check_bare(walk *w, int dfd, const char *rel);
int lz_gs_visit_entry(walk *w, int dfd, const char *rel, const char *name, int depth);
int lz_gs_walk_dir(walk *w, int dfd, const char *rel, int depth);
int lz_gs_visit_inner_entry(walk *w, int dfd, const char *rel, const char *name, int depth);
int lz_gs_check_inner_bare(walk *w, int dfd, const char *rel);
int lz_gs_audit_git_dirs(walk *w);
int lz_gs_walk_finish(walk *w, int r, char **ret_report);
int lz_gs_full_audit(lz_git_plan *p, bool watch, char **ret_report, lz_error **err);

/* events.c (lz_git_sentry_watch/_audit) and plan.c (lz_git_sentry_plan)
 * offer only the public functions of git_sentry.h. */

#endif
