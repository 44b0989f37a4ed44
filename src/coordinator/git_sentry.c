/* SPDX-License-Identifier: Apache-2.0 */
#include "coordinator/git_sentry.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/spawn.h"
#include "common/timing.h"
#include "common/util.h"
#include "coordinator/freezer.h"
#include "coordinator/sentry_eye.h"
#include "fs/confined.h"
#include "protocol/io.h"
#include "supervisor/userns.h"

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
#define BASELINE_TMP "git-sentry-baseline.tmp"

/* Names in a Git directory that decide what Git runs or reads as
 * configuration, and that must not come into existence during a session:
 * existing ones are read-only binds or bind points (a mount at that path),
 * new ones are quarantined. config and hooks are here for Git directories
 * that lack them. remotes/ and branches/ are the legacy remote definitions
 * Git still reads. */
static const char *const git_dir_entries[] = { "config",    "hooks",   "commondir",
                                               "config.worktree", "worktrees", "modules",
                                               "remotes",   "branches" };

/* Entry names that can turn a directory of the tree into a Git directory. */
static const char *const bare_entries[] = { "HEAD", "objects", "refs", "commondir" };

/* IN_ATTRIB: a directory the sandbox makes readable (or searchable) again
 * reveals what it holds without any entry being created. */
#define WATCH_MASK (IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_MOVE_SELF | IN_DELETE_SELF | \
                    IN_ATTRIB | IN_ONLYDIR)

enum { ROLE_TREE = 1, ROLE_GITDIR = 2, ROLE_MODULES = 4, ROLE_SEQUENCER = 8, ROLE_GITINNER = 16 };

/* A rebase, cherry-pick or am that stopped keeps its plan in the Git
 * directory, and `git rebase --continue` on the host carries it out: an
 * `exec` line of a todo list the sandbox wrote is a command the host's Git
 * runs. What exists at start is the developer's; what the sandbox made is
 * moved aside when its todo list would run a command, and in any case at
 * the end of the generation (docs/git.md). */
static const char *const sequencer_dirs[] = { "rebase-merge", "rebase-apply", "sequencer" };


/* ---- confined helpers -------------------------------------------------- */

/* "a/b" + "c"; rel "" is the workspace itself. */
static char *join_rel(const char *rel, const char *name)
{
    return (!rel[0] || strcmp(rel, ".") == 0) ? lz_xstrdup(name)
                                              : lz_xasprintf("%s/%s", rel, name);
}

/* Open the directory `rel` below dfd ("" or "." is dfd itself), never
 * following a symlink, never leaving dfd, never crossing a mount. */
static int open_dir_confined(int dfd, const char *rel, int flags, lz_error **err)
{
    return lz_open_confined(dfd, rel[0] ? rel : ".", flags | O_DIRECTORY, 0, rel[0] ? rel : ".",
                            err);
}

/* Open the parent directory of `rel` confined and return the last component
 * in *ret_name (a pointer into rel). */
static int open_parent(int dfd, const char *rel, const char **ret_name, lz_error **err)
{
    const char *slash = strrchr(rel, '/');
    *ret_name = slash ? slash + 1 : rel;
    if (!slash)
        return lz_open_confined(dfd, ".", O_PATH | O_DIRECTORY, 0, ".", err);
    _cleanup_free_ char *parent = lz_xstrndup(rel, (size_t) (slash - rel));
    return lz_open_confined(dfd, parent, O_PATH | O_DIRECTORY, 0, parent, err);
}

/* lstat of `rel` below dfd, every component before the last resolved
 * confined. Returns 0, or -1 with errno (ENOENT; ELOOP when a parent is a
 * symlink; EXDEV across a mount). */
static int lstat_confined(int dfd, const char *rel, struct stat *st)
{
    const char *name;
    int pfd = open_parent(dfd, rel, &name, NULL);
    if (pfd < 0)
        return -1;
    int r = fstatat(pfd, name, st, AT_SYMLINK_NOFOLLOW);
    int saved = errno;
    close(pfd);
    errno = saved;
    return r;
}

/* Create every missing directory of rel below dfd, one component at a time,
 * each opened confined before the next (a symlink planted anywhere on the
 * way is refused, never followed). Returns an O_PATH fd of the result. */
static int mkdirs_confined(int dfd, const char *rel, const char *label, lz_error **err)
{
    _cleanup_close_ int cur = lz_open_confined(dfd, ".", O_PATH | O_DIRECTORY, 0, label, err);
    if (cur < 0)
        return -1;
    _cleanup_free_ char *copy = lz_xstrdup(rel);
    for (char *part = copy, *next; part && *part; part = next) {
        next = strchr(part, '/');
        if (next)
            *next++ = '\0';
        if (mkdirat(cur, part, 0755) < 0 && errno != EEXIST)
            return lz_error_set(err, errno, "cannot create %s", label);
        int fd = lz_open_confined(cur, part, O_PATH | O_DIRECTORY, 0, label, err);
        if (fd < 0)
            return -1;
        close(cur);
        cur = fd;
    }
    int r = cur;
    cur = -1;
    return r;
}

/* Lexically normalise the part of absolute `path` below `root` (both
 * absolute): NULL when path is not below root or ".." climbs out. */
static char *lexical_rel(const char *root, const char *path)
{
    size_t rl = strlen(root);
    if (strncmp(path, root, rl) != 0 || path[rl] != '/')
        return NULL;
    _cleanup_free_ char *copy = lz_xstrdup(path + rl + 1);
    char *out = lz_xcalloc(strlen(copy) + 2, 1);
    size_t n = 0;
    for (char *save = NULL, *part = strtok_r(copy, "/", &save); part;
         part = strtok_r(NULL, "/", &save)) {
        if (strcmp(part, ".") == 0)
            continue;
        if (strcmp(part, "..") == 0) {
            if (n == 0) {
                free(out);
                return NULL;
            }
            while (n > 0 && out[n - 1] != '/')
                n--;
            if (n > 0)
                n--;
            out[n] = '\0';
            continue;
        }
        if (n)
            out[n++] = '/';
        memcpy(out + n, part, strlen(part) + 1);
        n += strlen(part);
    }
    if (n == 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* ---- plan building ----------------------------------------------------- */

typedef struct builder {
    lz_git_plan *p;
    const lz_resolved_config *cfg;
    const char *ws;       /* canonical workspace (label) */
    int ws_fd;
    /* Work trees the walk found with a `.git` file (linked worktrees,
     * separate Git directories): their ignored files are listed too. */
    char **gitfile_trees;
    size_t n_gitfile_trees;
} builder;

/* The plan's mounts are looked up by path for every ancestor of every
 * ignored path (thousands): a hash index (FNV-1a, open addressing), not a
 * scan of the list. */
static size_t hash_str(const char *s)
{
    size_t h = (size_t) 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char) *s) * (size_t) 1099511628211ULL;
    return h;
}

static size_t *mount_slot(const lz_git_plan *p, const char *rel)
{
    size_t mask = p->mount_index_cap - 1;
    for (size_t i = hash_str(rel) & mask;; i = (i + 1) & mask) {
        size_t v = p->mount_index[i];
        if (v == 0 || strcmp(p->mounts[v - 1].rel, rel) == 0)
            return &p->mount_index[i];
    }
}

static bool has_mount(const lz_git_plan *p, const char *rel)
{
    return p->mount_index_cap && *mount_slot(p, rel) != 0;
}

/* (Re)build the index: after the list was sorted or read back. */
static void index_mounts(lz_git_plan *p)
{
    free(p->mount_index);
    p->mount_index_cap = 64;
    while (p->mount_index_cap < 2 * p->n_mounts)
        p->mount_index_cap *= 2;
    p->mount_index = lz_xcalloc(p->mount_index_cap, sizeof(size_t));
    for (size_t i = 0; i < p->n_mounts; i++)
        *mount_slot(p, p->mounts[i].rel) = i + 1;
}

static void add_mount(builder *b, const char *rel, lz_mount_base base, bool readonly, bool dir)
{
    lz_git_plan *p = b->p;
    if (has_mount(p, rel))
        return;
    size_t n = p->n_mounts;
    if (n == 0 || (n & (n - 1)) == 0) /* capacity: the next power of two */
        p->mounts = lz_xrealloc(p->mounts, n ? 2 * n : 1, sizeof(lz_workspace_mount));
    p->mounts[p->n_mounts++] = (lz_workspace_mount) { lz_xstrdup(rel), base, readonly, dir };
    if (2 * p->n_mounts > p->mount_index_cap) { /* at most half full */
        index_mounts(p);
    } else {
        *mount_slot(p, rel) = p->n_mounts;
    }
}

/* Is rel, or a directory above it, bound from the Domain's ignored copies? */
static bool in_ignored_copy(const lz_git_plan *p, const char *rel)
{
    _cleanup_free_ char *copy = lz_xstrdup(rel);
    for (char *end = copy + strlen(copy);;) {
        *end = '\0';
        if (has_mount(p, copy) && p->mounts[*mount_slot(p, copy) - 1].base == LZ_MOUNT_FROM_IGNORED)
            return true;
        char *slash = strrchr(copy, '/');
        if (!slash)
            return false;
        end = slash;
    }
}

static void add_marker(lz_git_marker **v, size_t *n, const char *rel, const struct stat *st)
{
    *v = lz_xrealloc(*v, *n + 1, sizeof(lz_git_marker));
    (*v)[(*n)++] = (lz_git_marker) { lz_xstrdup(rel), st->st_dev, st->st_ino };
}

static bool known(const lz_git_marker *v, size_t n, const char *rel, const struct stat *st)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].ino == st->st_ino && v[i].dev == st->st_dev && strcmp(v[i].rel, rel) == 0)
            return true;
    return false;
}

/* Protect an existing path read-only. gVisor lets the sandbox rename a
 * directory that has bind mounts inside it, which would let it move a
 * protected file away with its parent and put its own in the old place; so
 * every ancestor directory below the workspace (and below .git, already a
 * mount point) becomes a read-write bind point too: a mount point cannot be
 * renamed. A symlink on the way or at the end refuses the start: the sandbox
 * could change what it points to. */
static int protect_if_exists(builder *b, const char *rel, lz_error **err)
{
    /* Inside the Domain's copy of a git-ignored directory the sandbox sees
     * its own files, never the host's: the host's file there, which the
     * host's Git reads, is out of its reach already. A protection would be
     * mounted into the copy, where its mount point need not exist (attack
     * round i12c, O1: every start refused). */
    if (in_ignored_copy(b->p, rel))
        return 0;
    struct stat st;
    if (lstat_confined(b->ws_fd, rel, &st) < 0) {
        if (errno == ENOENT)
            return 0;
        lz_error_set(err, errno, "Git Sentry: cannot protect %s/%s", b->ws, rel);
        if (errno == ELOOP || errno == ENOTDIR)
            return lz_error_hint(err, "a directory on its path is a symlink, which the sandbox "
                                      "could point elsewhere; make it a real directory");
        return -1;
    }
    if (S_ISLNK(st.st_mode)) {
        lz_error_set(err, 0, "Git Sentry: %s/%s is a symlink, and the host's Git reads it", b->ws,
                     rel);
        return lz_error_hint(err, "the sandbox could change what it points to: replace the "
                                  "symlink by the file or directory itself (for hooks, use "
                                  "'git config core.hooksPath DIR' instead)");
    }
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
        lz_error_set(err, 0, "Git Sentry: %s/%s is a special file", b->ws, rel);
        return lz_error_hint(err, "remove it; Git reads configuration only from regular files");
    }
    _cleanup_free_ char *copy = lz_xstrdup(rel);
    for (char *p = copy; (p = strchr(p, '/')); p++) {
        *p = '\0';
        if (strcmp(copy, ".git") != 0)
            add_mount(b, copy, LZ_MOUNT_FROM_WORKSPACE, false, true);
        *p = '/';
    }
    add_mount(b, rel, LZ_MOUNT_FROM_WORKSPACE, true, S_ISDIR(st.st_mode));
    return 0;
}

static bool listed(char **v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], s) == 0)
            return true;
    return false;
}

/* The places inside one Git directory `gd` (relative to the workspace; "."
 * for a bare workspace) that decide what Git executes or how it is
 * configured. */
static int protect_git_dir(builder *b, const char *gd, int depth, lz_error **err)
{
    if (listed(b->p->git_dirs, b->p->n_git_dirs, gd))
        return 0;
    b->p->git_dirs = lz_xrealloc(b->p->git_dirs, b->p->n_git_dirs + 1, sizeof(char *));
    b->p->git_dirs[b->p->n_git_dirs++] = lz_xstrdup(gd);

    /* A missing hooks/ would let the sandbox create one: make it exist so
     * that it can be bound read-only (git init creates it too). */
    _cleanup_free_ char *hooks = join_rel(gd, "hooks");
    {
        const char *name;
        _cleanup_close_ int pfd = open_parent(b->ws_fd, hooks, &name, err);
        if (pfd < 0)
            return -1;
        if (mkdirat(pfd, name, 0755) < 0 && errno != EEXIST)
            return lz_error_set(err, errno, "cannot create %s/%s", b->ws, hooks);
    }
    static const char *const fixed[] = { "config",    "hooks",   "commondir", "config.worktree",
                                         "worktrees", "remotes", "branches",  "info/attributes" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(fixed); i++) {
        _cleanup_free_ char *rel = join_rel(gd, fixed[i]);
        if (protect_if_exists(b, rel, err) < 0)
            return -1;
    }

    /* A rebase or cherry-pick the developer stopped before the start is
     * theirs (known by inode); one the sandbox makes is not. */
    for (size_t i = 0; i < LZ_ARRAY_SIZE(sequencer_dirs); i++) {
        _cleanup_free_ char *rel = join_rel(gd, sequencer_dirs[i]);
        struct stat st;
        if (lstat_confined(b->ws_fd, rel, &st) == 0)
            add_marker(&b->p->markers, &b->p->n_markers, rel, &st);
    }

    /* Submodule git dirs: modules/<name>[/modules/<name>…]. */
    _cleanup_free_ char *mods = join_rel(gd, "modules");
    int fd = open_dir_confined(b->ws_fd, mods, O_RDONLY, NULL);
    if (fd < 0)
        return 0;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return lz_error_set(err, errno, "cannot read %s/%s", b->ws, mods);
    }
    /* modules/ is a bind point: it cannot be renamed or replaced. */
    add_mount(b, mods, LZ_MOUNT_FROM_WORKSPACE, false, true);
    struct dirent *e;
    int r = 0;
    while (r == 0 && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        _cleanup_free_ char *sub = lz_xasprintf("%s/%s", mods, e->d_name);
        _cleanup_free_ char *cfg = lz_xasprintf("%s/config", sub);
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        add_marker(&b->p->members, &b->p->n_members, sub, &st);
        if (!S_ISDIR(st.st_mode)) {
            r = protect_if_exists(b, sub, err); /* refuses a symlink */
            continue;
        }
        struct stat cst;
        if (depth < MAX_MODULE_DEPTH && lstat_confined(b->ws_fd, cfg, &cst) == 0 &&
            S_ISREG(cst.st_mode))
            r = protect_git_dir(b, sub, depth + 1, err);
        else
            /* A grouping directory (modules/a/b) or too deep: wholesale. */
            r = protect_if_exists(b, sub, err);
    }
    closedir(d);
    return r;
}

/* The host's Git on the Git directory gd with the work tree wt (both
 * relative to the workspace; wt NULL: none). */
static int host_git_in(builder *b, const char *gd, const char *wt, char *const *args,
                       lz_spawn_output *out, lz_error **err)
{
    static char *git = NULL;
    if (!git && lz_spawn_find_program("git", LZ_SPAWN_SYSTEM_PATH, &git, err) < 0)
        return lz_error_hint(err, "install git on the host (sudo apt-get install git), or set "
                                  "isolate_gitignored = false");
    size_t n = 0;
    while (args[n])
        n++;
    /* The host's Git must not be influenced by anything the sandbox wrote:
     * no fsmonitor, no hooks, no system configuration, and no repository
     * discovery: GIT_DIR and GIT_WORK_TREE name the Git directory that was
     * validated, so a repository the sandbox made elsewhere is never used. */
    char **argv = lz_xcalloc(n + 8, sizeof(char *));
    size_t k = 0;
    argv[k++] = (char *) "git";
    argv[k++] = (char *) "-c";
    argv[k++] = (char *) "core.fsmonitor=false";
    argv[k++] = (char *) "-c";
    argv[k++] = (char *) "core.hooksPath=/dev/null";
    argv[k++] = (char *) "-c";
    argv[k++] = (char *) "core.untrackedCache=false";
    for (size_t i = 0; i < n; i++)
        argv[k++] = args[i];
    argv[k] = NULL;
    _cleanup_free_ char *home = getenv("HOME") ? lz_xasprintf("HOME=%s", getenv("HOME")) : NULL;
    /* gd NULL: the work tree wt has a `.git` file (a linked worktree, a
     * separate Git directory) that the plan protects read-only; Git follows
     * it from wt, and discovery stops there (GIT_CEILING_DIRECTORIES). */
    _cleanup_free_ char *gitdir = !gd              ? NULL
                                  : strcmp(gd, ".") ? lz_xasprintf("GIT_DIR=%s/%s", b->ws, gd)
                                                    : lz_xasprintf("GIT_DIR=%s", b->ws);
    _cleanup_free_ char *worktree = !wt || !gd ? NULL
                                    : *wt      ? lz_xasprintf("GIT_WORK_TREE=%s/%s", b->ws, wt)
                                               : lz_xasprintf("GIT_WORK_TREE=%s", b->ws);
    _cleanup_free_ char *ceiling = NULL;
    if (!gd) {
        _cleanup_free_ char *full = wt && *wt ? lz_xasprintf("%s/%s", b->ws, wt)
                                              : lz_xstrdup(b->ws);
        char *slash = strrchr(full, '/');
        if (slash && slash != full)
            *slash = '\0';
        ceiling = lz_xasprintf("GIT_CEILING_DIRECTORIES=%s", full);
    }
    char *env[10] = { (char *) "PATH=" LZ_SPAWN_SYSTEM_PATH, (char *) "LC_ALL=C",
                      (char *) "GIT_CONFIG_NOSYSTEM=1", (char *) "GIT_TERMINAL_PROMPT=0",
                      (char *) "GIT_OPTIONAL_LOCKS=0" };
    size_t ne = 5;
    char *const extra[] = { gitdir, home, worktree, ceiling };
    for (size_t x = 0; x < LZ_ARRAY_SIZE(extra); x++)
        if (extra[x])
            env[ne++] = extra[x];
    env[ne] = NULL;
    /* In the work tree itself, never where the coordinator was started
     * (the developer's current directory: a subdirectory of the
     * workspace, since `run` from one joins the top's Domain). Git answers
     * relative to its working directory: from src/, `ls-files --others
     * --ignored` listed only what is below src/, so a Domain first started
     * there isolated nothing at the top (attack round i12b, F3). */
    _cleanup_close_ int wt_fd = wt && *wt ? lz_open_confined(b->ws_fd, wt, O_PATH | O_DIRECTORY, 0,
                                                            wt, NULL)
                                          : -1;
    lz_spawn_options opt = { .envp = env, .capture_max = 4 << 20, .timeout_ms = 60000,
                             .chdir_to_fd = true, .cwd_fd = wt_fd >= 0 ? wt_fd : b->ws_fd };
    int status = lz_spawn_capture(git, argv, &opt, out, err);
    free(argv);
    /* A cut answer is a wrong answer: the paths after the cut would be
     * neither isolated nor protected (attack round i12c, T2: a 4.6 MB
     * ignored list left .env shared). Fail closed. */
    if (status >= 0 && out->truncated) {
        lz_spawn_output_free(out);
        lz_error_set(err, 0, "the host's Git said more than %d MiB about the workspace %s (git %s)",
                     (int) (opt.capture_max >> 20), b->ws, args[0]);
        return lz_error_hint(err, "the workspace has too many or too long git-ignored paths: "
                                  "ignore whole directories rather than the files in them, "
                                  "remove what git clean -ndX lists, or set isolate_gitignored "
                                  "= false in the profile");
    }
    if (status < 0 && err && *err && (*err)->errnum == ETIMEDOUT)
        lz_error_hint(err, "Git blocked reading the workspace %s: a .gitignore, "
                           ".git/info/exclude or configuration file there may be a FIFO, lie "
                           "on a hung file system or be very large (the sandbox can write "
                           ".gitignore); replace it by a regular file of sensible size",
                      b->ws);
    return status;
}


/* A path value of Git's configuration made absolute the way Git does: `~/`
 * is the developer's home, a relative one is relative to `base`. NULL for
 * `~user/` (another user's home: not ours to protect). */
static char *expand_git_path(const char *v, const char *base)
{
    if (v[0] == '/')
        return lz_xstrdup(v);
    if (v[0] == '~') {
        const char *home = getenv("HOME");
        if (v[1] != '/' || !home || home[0] != '/')
            return NULL;
        return lz_xasprintf("%s%s", home, v + 1);
    }
    return lz_xasprintf("%s/%s", base, v);
}

/* A configuration file Git reads from `abs` (absolute, from Git's own
 * output): protect it when it lies inside the workspace. Lexically inside
 * means it must be reachable without a symlink (refused otherwise);
 * lexically outside but resolving inside (a host symlink into the
 * workspace) protects the resolved file. create: make a missing file empty
 * first (an empty configuration file is valid). */
static int protect_config_file(builder *b, const char *abs, bool create, lz_error **err)
{
    _cleanup_free_ char *rel = lexical_rel(b->ws, abs);
    if (!rel) {
        _cleanup_free_ char *canon = lz_canonicalize(abs, NULL);
        if (canon)
            rel = lexical_rel(b->ws, canon);
    }
    if (!rel || strcmp(rel, ".git") == 0)
        return 0;
    struct stat st;
    if (create && lstat_confined(b->ws_fd, rel, &st) < 0 && errno == ENOENT) {
        /* The file and every missing directory above it: the sandbox must
         * not be the one to make them. */
        const char *slash = strrchr(rel, '/');
        _cleanup_free_ char *parent = slash ? lz_xstrndup(rel, (size_t) (slash - rel)) : NULL;
        _cleanup_close_ int pfd = parent ? mkdirs_confined(b->ws_fd, parent, parent, err)
                                         : lz_open_confined(b->ws_fd, ".", O_PATH | O_DIRECTORY,
                                                            0, ".", err);
        if (pfd < 0)
            return -1;
        int fd = openat(pfd, slash ? slash + 1 : rel,
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0)
            close(fd);
    }
    return protect_if_exists(b, rel, err);
}

/* Configuration files that an include pulls in from inside the workspace,
 * and core.hooksPath when it points inside: both are sandbox-writable
 * places the host's Git would obey. */
static int protect_config_sources(builder *b, const char *gd, const char *wt, lz_error **err)
{
    lz_spawn_output out = { 0 };
    char *const args[] = { (char *) "config", (char *) "--includes", (char *) "--show-origin",
                           (char *) "--list", (char *) "-z", NULL };
    /* hooksPath and relative origins are relative to the work tree's top
     * (the Git directory where there is none). */
    const char *base = wt ? wt : strcmp(gd, ".") ? gd : "";
    _cleanup_free_ char *top = *base ? lz_xasprintf("%s/%s", b->ws, base) : lz_xstrdup(b->ws);
    int status = host_git_in(b, gd, wt, args, &out, err);
    if (status < 0)
        return -1;
    int r = 0;
    for (size_t i = 0; r == 0 && status == 0 && i < out.len;) {
        const char *origin = out.data + i;
        size_t ol = strnlen(origin, out.len - i);
        i += ol + 1;
        const char *kv = i < out.len ? out.data + i : "";
        size_t kl = i < out.len ? strnlen(kv, out.len - i) : 0;
        i += kl + 1;
        if (strncmp(origin, "file:", 5) == 0) {
            const char *path = origin + 5;
            _cleanup_free_ char *abs = path[0] == '/' ? lz_xstrdup(path)
                                                       : lz_xasprintf("%s/%s", top, path);
            r = protect_config_file(b, abs, false, err);
        }
        if (r == 0 && strncmp(kv, "core.hookspath\n", 15) == 0) {
            const char *v = kv + 15;
            _cleanup_free_ char *abs = expand_git_path(v, top);
            _cleanup_free_ char *rel = abs ? lexical_rel(b->ws, abs) : NULL;
            if (!rel && abs) { /* through a host symlink into the workspace */
                _cleanup_free_ char *canon = lz_canonicalize(abs, NULL);
                if (canon)
                    rel = lexical_rel(b->ws, canon);
            }
            if (rel) {
                struct stat st;
                if (lstat_confined(b->ws_fd, rel, &st) < 0 && errno == ENOENT) {
                    /* Every missing level: the sandbox must not make them. */
                    int fd = mkdirs_confined(b->ws_fd, rel, rel, err);
                    if (fd < 0)
                        r = -1;
                    else
                        close(fd);
                }
                if (r == 0)
                    r = protect_if_exists(b, rel, err);
            }
        }
    }
    lz_spawn_output_free(&out);
    if (r < 0)
        return -1;

    /* Includes of files that do not exist yet are not listed above, but the
     * host's Git would read them as soon as they appear: create them empty
     * and protect them. Relative include paths are relative to the
     * including file, .git/config. */
    /* Every scope (the developer's global configuration may include a file
     * inside the workspace too), and includes named by included files;
     * each relative to the file that names it, `~/` expanded. */
    char *const inc_args[] = { (char *) "config", (char *) "--includes", (char *) "--show-origin",
                               (char *) "-z", (char *) "--get-regexp",
                               (char *) "^(include|includeif\\..*)\\.path$", NULL };
    lz_spawn_output inc = { 0 };
    status = host_git_in(b, gd, wt, inc_args, &inc, err);
    if (status < 0)
        return -1;
    for (size_t i = 0; r == 0 && status == 0 && i < inc.len;) {
        const char *origin = inc.data + i;
        size_t ol = strnlen(origin, inc.len - i);
        i += ol + 1;
        const char *kv = i < inc.len ? inc.data + i : "";
        size_t kl = i < inc.len ? strnlen(kv, inc.len - i) : 0;
        i += kl + 1;
        const char *v = strchr(kv, '\n');
        if (!v || !*++v || strncmp(origin, "file:", 5) != 0)
            continue;
        const char *file = origin + 5;
        _cleanup_free_ char *file_abs = file[0] == '/' ? lz_xstrdup(file)
                                                        : lz_xasprintf("%s/%s", top, file);
        char *slash = strrchr(file_abs, '/');
        if (slash)
            *slash = '\0';
        _cleanup_free_ char *abs = expand_git_path(v, file_abs);
        if (abs)
            r = protect_config_file(b, abs, true, err);
    }
    lz_spawn_output_free(&inc);
    return r;
}

/* Names of a Git directory's own entries. */
static bool git_dir_name(const char *name)
{
    static const char *const names[] = { "HEAD",      "objects", "refs",     "config",
                                         "hooks",     "info",    "logs",     "commondir",
                                         "worktrees", "modules", "remotes",  "branches",
                                         "index",     "packed-refs" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(names); i++)
        if (strcmp(name, names[i]) == 0)
            return true;
    return false;
}

static bool is_literal_pattern(const char *s)
{
    if (!*s || s[0] == '#' || s[0] == '!')
        return false;
    for (const char *p = s; *p; p++)
        if (strchr("*?[]\\ ", *p))
            return false;
    return true;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The Domain's copy of one ignored path: created empty when missing. The
 * copy lies in a directory the sandbox wrote in earlier sessions: a symlink,
 * a special file or a type change there refuses the start (never followed,
 * never bound). */
static int make_ignored_copy(builder *b, int ign, const char *rel, bool dir, lz_error **err)
{
    _cleanup_free_ char *label = lz_xasprintf("%s/ignored/%s", b->cfg->storage_domain_root.label,
                                              rel);
    const char *slash = strrchr(rel, '/');
    const char *name = slash ? slash + 1 : rel;
    _cleanup_free_ char *parent = slash ? lz_xstrndup(rel, (size_t) (slash - rel)) : NULL;
    _cleanup_close_ int pfd = parent ? mkdirs_confined(ign, parent, label, err)
                                     : lz_open_confined(ign, ".", O_PATH | O_DIRECTORY, 0, label,
                                                        err);
    if (pfd < 0)
        goto refuse;
    if (dir) {
        if (mkdirat(pfd, name, 0755) < 0 && errno != EEXIST)
            return lz_error_set(err, errno, "cannot create %s", label);
    } else {
        int cf = openat(pfd, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
        if (cf >= 0)
            close(cf);
    }
    struct stat st;
    if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return lz_error_set(err, errno, "cannot create %s", label);
    if (dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode))
        return 0;
    lz_error_set(err, 0, "the Domain's copy of the git-ignored path %s is %s", label,
                 S_ISLNK(st.st_mode) ? "a symlink"
                 : S_ISDIR(st.st_mode) || S_ISREG(st.st_mode) ? "of another type than in the "
                                                                "workspace"
                                                              : "a special file");
refuse:
    lz_error_free(lz_error_take(err));
    lz_error_set(err, 0,
                 "the Domain's copy of the git-ignored path %s is not a plain %s (a symlink, "
                 "special file or mount planted by an earlier session of the sandbox?)",
                 label, dir ? "directory" : "file");
    return lz_error_hint(err, "Lazaret will not bind it into the sandbox: inspect and remove %s "
                              "(or the Domain's whole ignored/ directory), then run again",
                         label);
}

/* The session-start line (lz_git_sentry_ignored_notice): the count and up
 * to three distinct names, shallowest first (so `.env` and `dist/` before
 * `pkg/a/__pycache__/`), each at most 40 bytes: bounded whatever the
 * workspace holds. ignored[] holds paths with "/" after directories. */
#define NOTICE_NAMES 3
#define NOTICE_NAME_MAX 40

static size_t path_depth(const char *rel)
{
    size_t d = 0;
    for (const char *c = rel; (c = strchr(c, '/')) && c[1]; c++)
        d++;
    return d;
}

static char *ignored_notice(const lz_git_plan *p)
{
    if (p->n_ignored == 0)
        return NULL;
    const char *pick[NOTICE_NAMES];
    bool pick_dir[NOTICE_NAMES];
    size_t n_pick = 0, n_names = 0;
    /* Shallowest first: a bounded number of passes over the list, one per
     * depth, stopping once enough names are found (the names counted past
     * the last pick only decide whether to print "…"). */
    size_t max_depth = 0;
    for (size_t i = 0; i < p->n_ignored; i++) {
        size_t d = path_depth(p->ignored[i]);
        if (d > max_depth)
            max_depth = d;
    }
    for (size_t depth = 0; depth <= max_depth && n_names <= NOTICE_NAMES; depth++) {
        for (size_t i = 0; i < p->n_ignored && n_names <= NOTICE_NAMES; i++) {
            const char *rel = p->ignored[i];
            if (path_depth(rel) != depth)
                continue;
            const char *base = rel + strlen(rel);
            if (base > rel && base[-1] == '/')
                base--;
            while (base > rel && base[-1] != '/')
                base--;
            bool seen = false;
            for (size_t k = 0; k < n_pick && !seen; k++)
                seen = strcmp(pick[k], base) == 0;
            if (seen)
                continue;
            n_names++;
            if (n_pick < NOTICE_NAMES) {
                pick_dir[n_pick] = p->ignored_dir && p->ignored_dir[i];
                pick[n_pick++] = base;
            }
        }
    }
    size_t cap = 256 + NOTICE_NAMES * (NOTICE_NAME_MAX + 8);
    char *line = lz_xcalloc(cap, 1);
    size_t len = (size_t) snprintf(line, cap, "%zu git-ignored path%s %s the sandbox's own "
                                              "cop%s (", p->n_ignored,
                                   p->n_ignored == 1 ? "" : "s", p->n_ignored == 1 ? "is" : "are",
                                   p->n_ignored == 1 ? "y" : "ies");
    for (size_t k = 0; k < n_pick; k++) {
        size_t bl = strlen(pick[k]);
        bool cut = bl > NOTICE_NAME_MAX;
        len += (size_t) snprintf(line + len, cap - len, "%s%.*s%s%s", k ? ", " : "",
                                 (int) (cut ? NOTICE_NAME_MAX : bl), pick[k], cut ? "…" : "",
                                 pick_dir[k] ? "/" : "");
    }
    snprintf(line + len, cap - len, "%s); see docs/git.md \"Git-ignored files\"",
             n_names > n_pick ? ", …" : "");
    return line;
}

/* ---- git-ignored paths ----------------------------------------------------- */

/* Sort the plan's ignored paths, their directory flags alongside. */
static void sort_ignored(lz_git_plan *p)
{
    typedef struct { char *rel; bool dir; } pair;
    pair *v = lz_xcalloc(p->n_ignored, sizeof(pair));
    for (size_t i = 0; i < p->n_ignored; i++)
        v[i] = (pair) { p->ignored[i], p->ignored_dir[i] };
    qsort(v, p->n_ignored, sizeof(pair), cmp_str); /* rel first: compares as char * */
    for (size_t i = 0; i < p->n_ignored; i++) {
        p->ignored[i] = v[i].rel;
        p->ignored_dir[i] = v[i].dir;
    }
    free(v);
}

/* The Domain's record of what it isolated, <Domain Root>/ignored.list, and
 * of the placeholder directories Lazaret made, <Domain Root>/placeholders
 * (NUL-separated relative paths, "/" after a directory). The Domain Root is
 * Lazaret's, never bound into a sandbox. The ignore rules are files the
 * sandbox writes (.gitignore anywhere, .git/info/exclude): a path isolated
 * once stays isolated until `lazaret state reset`, so that dropping `.env`
 * from .gitignore does not hand the host's `.env` to the next generation
 * (attack round i12c, U1/U2). */
#define IGNORED_RECORD "ignored.list"
#define PLACEHOLDER_RECORD "placeholders"
#define RECORD_MAX ((size_t) 8 << 20)

typedef struct name_list {
    char **v;
    size_t n;
} name_list;

static void names_add(name_list *l, const char *s)
{
    if (l->n == 0 || (l->n & (l->n - 1)) == 0)
        l->v = lz_xrealloc(l->v, l->n ? 2 * l->n : 1, sizeof(char *));
    l->v[l->n++] = lz_xstrdup(s);
}

static void names_clear(name_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    *l = (name_list) { 0 };
}

static bool names_has(const name_list *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i], s) == 0)
            return true;
    return false;
}

/* Read a record (missing: empty). Only Lazaret writes it, but it decides
 * what stays hidden, so anything unexpected refuses the start rather than
 * forgetting entries (attack round i12d, R1: a record cut at 20,000 entries
 * forgot `secrets/`): not a regular file, over RECORD_MAX bytes or max
 * entries, an entry without its NUL, or one that is not a normalized
 * relative path. */
static int record_read(int droot, const char *name, size_t max, const char *label,
                       name_list *ret, lz_error **err)
{
    int fd = openat(droot, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return 0;
    struct stat st;
    bool ok = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
              (size_t) st.st_size <= RECORD_MAX;
    char *buf = ok ? lz_xmalloc((size_t) st.st_size + 1) : NULL;
    ssize_t n = ok ? read(fd, buf, (size_t) st.st_size) : -1;
    if (fd >= 0)
        close(fd);
    ok = ok && n == st.st_size && (n == 0 || buf[n - 1] == '\0');
    for (size_t i = 0; ok && i < (size_t) n;) {
        char *e = buf + i;
        size_t len = strlen(e);
        i += len + 1;
        bool dir = len > 1 && e[len - 1] == '/';
        if (dir)
            e[len - 1] = '\0';
        ok = lz_path_is_normalized_rel(e) && ret->n < max;
        if (dir)
            e[len - 1] = '/';
        if (ok)
            names_add(ret, e);
    }
    free(buf);
    if (ok)
        return 0;
    lz_error_set(err, 0, "%s/%s is damaged or longer than Lazaret writes it (at most %zu "
                         "entries)", label, name, max);
    return lz_error_hint(err, "it records which git-ignored paths this Domain keeps hidden; "
                              "lazaret state reset removes it with the copies, and then only "
                              "what the ignore rules say now stays hidden: check them first "
                              "(git status --ignored), then reset and run again");
}

/* Replace a record atomically (a failure keeps the old one). */
static int record_write(int droot, const char *name, const name_list *l, const char *label,
                        lz_error **err)
{
    _cleanup_free_ char *tmp = lz_xasprintf("%s.tmp", name);
    int fd = openat(droot, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return lz_error_set(err, errno, "cannot write %s/%s", label, tmp);
    bool ok = true;
    for (size_t i = 0; ok && i < l->n; i++)
        ok = lz_write_all(fd, l->v[i], strlen(l->v[i]) + 1) >= 0;
    if (close(fd) < 0 || !ok || renameat(droot, tmp, droot, name) < 0) {
        int e = errno;
        unlinkat(droot, tmp, 0);
        return lz_error_set(err, e, "cannot write %s/%s", label, name);
    }
    return 0;
}

typedef struct ignored_run {
    int droot, ign;
    name_list record;      /* what earlier generations isolated */
    name_list placeholders;
} ignored_run;

static void ignored_run_clear(ignored_run *r)
{
    lz_close(&r->droot);
    lz_close(&r->ign);
    names_clear(&r->record);
    names_clear(&r->placeholders);
}

/* Isolate one path (relative to the workspace; "/" after a directory
 * allowed): the Domain's copy, bound over it, its parents bind points. */
static int isolate_one(builder *b, ignored_run *run, const char *path, bool recorded,
                       lz_error **err)
{
    _cleanup_free_ char *entry = lz_xstrdup(path);
    size_t n = strlen(entry);
    if (n && entry[n - 1] == '/')
        entry[--n] = '\0';
    if (!n || !lz_path_is_normalized_rel(entry))
        return 0;
    if (in_ignored_copy(b->p, entry))
        return 0; /* already inside the Domain's copy of a directory above */
    if (b->p->n_ignored >= MAX_IGNORED || b->p->n_mounts >= MAX_WORKSPACE_MOUNTS) {
        lz_error_set(err, 0,
                     "the workspace %s has more git-ignored paths than Lazaret isolates "
                     "(%d paths, %d mounts with their parent directories)",
                     b->ws, MAX_IGNORED, MAX_WORKSPACE_MOUNTS);
        return lz_error_hint(err, "ignore whole directories rather than the files in them "
                                  "(`build/` rather than `build/*.o`), remove generated "
                                  "directories you no longer need (git clean -ndX lists "
                                  "them), or set isolate_gitignored = false in the profile "
                                  "(ignored files are then shared with the sandbox)");
    }
    struct stat st;
    if (lstat_confined(b->ws_fd, entry, &st) < 0 || S_ISLNK(st.st_mode) ||
        (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)))
        return 0; /* symlinks and special files are left as they are */
    /* Already a mount of the plan: a protection, or the bind point above
     * one (a hooks directory or include file of the configuration inside
     * this ignored directory). The first mount of a path is the one made,
     * so a copy here would not be bound — and recording the path as
     * ignored would take the host's directory out of the audit (attack
     * round i12a, T1). It stays the host's: shared with the sandbox,
     * protected where the plan protects it, audited like any other path. */
    if (has_mount(b->p, entry)) {
        if (recorded) {
            /* Isolated by an earlier generation, now named by the Git
             * configuration: it cannot be both, and sharing it now would
             * show the sandbox what it hid before. */
            lz_error_set(err, 0, "%s/%s was kept hidden from the sandbox as a git-ignored path, "
                                 "and the Git configuration now names it or something in it "
                                 "(a hooks directory, an include file)", b->ws, entry);
            return lz_error_hint(err, "move the hooks directory or include file out of it, or "
                                      "lazaret state reset (the sandbox then shares the host's "
                                      "%s)", entry);
        }
        b->p->n_ignored_shared++;
        return 0;
    }
    bool dir = S_ISDIR(st.st_mode);
    if (make_ignored_copy(b, run->ign, entry, dir, err) < 0)
        return -1;
    add_mount(b, entry, LZ_MOUNT_FROM_IGNORED, false, dir);
    /* Its parents become bind points: gVisor lets the sandbox rename a
     * directory with a mount inside, which would leave a new, writable
     * directory under the ignored path's name. */
    _cleanup_free_ char *anc = lz_xstrdup(entry);
    for (char *c = anc; (c = strchr(c, '/')); c++) {
        *c = '\0';
        add_mount(b, anc, LZ_MOUNT_FROM_WORKSPACE, false, true);
        *c = '/';
    }
    /* Kept without a directory's "/" (the audit compares paths), whether
     * it is one alongside. */
    size_t n_ign = b->p->n_ignored;
    if (n_ign == 0 || (n_ign & (n_ign - 1)) == 0) { /* capacity: the next power of two */
        b->p->ignored = lz_xrealloc(b->p->ignored, n_ign ? 2 * n_ign : 1, sizeof(char *));
        b->p->ignored_dir = lz_xrealloc(b->p->ignored_dir, n_ign ? 2 * n_ign : 1, sizeof(bool));
    }
    b->p->ignored[n_ign] = lz_xstrdup(entry);
    b->p->ignored_dir[n_ign] = dir;
    b->p->n_ignored++;
    return 0;
}

/* The paths the host's Git lists as ignored in the work tree wt ("" the
 * workspace's own; gd its Git directory), isolated. */
static int isolate_listed(builder *b, ignored_run *run, const char *gd, const char *wt,
                          bool required, lz_error **err)
{
    lz_spawn_output out = { 0 };
    char *const args[] = { (char *) "ls-files", (char *) "-z", (char *) "--others",
                           (char *) "--ignored", (char *) "--exclude-standard",
                           (char *) "--directory", NULL };
    int status = host_git_in(b, gd, wt, args, &out, err);
    if (status < 0)
        return -1;
    if (status != 0 && !required) {
        /* A nested work tree the host's Git cannot use (a stale worktree's
         * `.git` file, a submodule's Git directory the sandbox broke): it
         * has no ignored files of its own to list. What earlier
         * generations isolated there stays isolated (the record); nothing
         * else of it was ever hidden (attack round i12e, H1/H2: every start
         * was refused). */
        lz_spawn_output_free(&out);
        b->p->n_trees_unlisted++;
        return 0;
    }
    if (status != 0) {
        lz_spawn_output_free(&out);
        lz_error_set(err, 0, "git ls-files failed (status %d) in %s%s%s", status, b->ws,
                     *wt ? "/" : "", wt);
        return lz_error_hint(err, "check that the host's git status works in %s%s%s; the "
                                  "Git Sentry lists the git-ignored paths with it",
                             b->ws, *wt ? "/" : "", wt);
    }
    int r = 0;
    for (size_t i = 0; r == 0 && i < out.len;) {
        char *entry = out.data + i;
        size_t n = strnlen(entry, out.len - i);
        i += n + 1;
        if (n == 0)
            continue;
        _cleanup_free_ char *rel = *wt ? lz_xasprintf("%s/%s", wt, entry) : lz_xstrdup(entry);
        r = isolate_one(b, run, rel, false, err);
    }
    lz_spawn_output_free(&out);
    return r;
}

/* Begin: the Domain's ignored/, the records, the placeholders. */
static int isolate_begin(builder *b, const lz_resolved_config *cfg, ignored_run *run,
                         lz_error **err)
{
    run->droot = lz_plan_open(&cfg->storage_domain_root, O_PATH | O_DIRECTORY, true, err);
    if (run->droot < 0)
        return -1;
    if (mkdirat(run->droot, "ignored", 0700) < 0 && errno != EEXIST)
        return lz_error_set(err, errno, "cannot create %s/ignored", cfg->storage_domain_root.label);
    run->ign = lz_open_confined(run->droot, "ignored", O_PATH | O_DIRECTORY, 0,
                                "ignored/ of the Domain Root", err);
    if (run->ign < 0)
        return -1;
    if (record_read(run->droot, IGNORED_RECORD, MAX_IGNORED, cfg->storage_domain_root.label,
                    &run->record, err) < 0 ||
        record_read(run->droot, PLACEHOLDER_RECORD, MAX_PLACEHOLDERS,
                    cfg->storage_domain_root.label, &run->placeholders, err) < 0)
        return -1;

    /* Directory patterns of the top-level .gitignore and info/exclude name
     * paths that do not exist yet (node_modules/, target/): give them an
     * empty placeholder on the host so they can be isolated too. Both files
     * are the sandbox's to write: at most MAX_PLACEHOLDERS such directories
     * in the Domain's life (attack rounds i12a P1 and i12c P3: 300,000 `dN/`
     * lines made as many host directories, then 64 more at every start). */
    size_t before = run->placeholders.n;
    static const char *const pattern_files[] = { ".gitignore", ".git/info/exclude" };
    for (size_t f = 0; f < LZ_ARRAY_SIZE(pattern_files) &&
                       run->placeholders.n < MAX_PLACEHOLDERS; f++) {
        int fd = lz_open_confined(b->ws_fd, pattern_files[f], O_RDONLY | O_NONBLOCK, 0,
                                  pattern_files[f], NULL);
        FILE *fp = fd >= 0 ? fdopen(fd, "re") : NULL;
        if (!fp) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        char line[512];
        while (run->placeholders.n < MAX_PLACEHOLDERS && fgets(line, sizeof(line), fp)) {
            line[strcspn(line, "\r\n")] = '\0';
            size_t n = strlen(line);
            if (n < 2 || line[n - 1] != '/' || !is_literal_pattern(line))
                continue;
            line[n - 1] = '\0';
            const char *rel = line[0] == '/' ? line + 1 : line;
            if (!*rel || strchr(rel, '/') || strcmp(rel, ".git") == 0 || strcmp(rel, "..") == 0 ||
                strcmp(rel, ".") == 0 || git_dir_name(rel))
                continue; /* never a name that would help the workspace look like a Git dir */
            if (!names_has(&run->placeholders, rel) && mkdirat(b->ws_fd, rel, 0755) == 0)
                names_add(&run->placeholders, rel);
        }
        fclose(fp);
    }
    if (run->placeholders.n != before &&
        record_write(run->droot, PLACEHOLDER_RECORD, &run->placeholders,
                     cfg->storage_domain_root.label, err) < 0)
        return -1;

    /* Git opens these with a blocking open: a FIFO there would hang it. */
    static const char *const must_be_files[] = { ".gitignore", ".git/info/exclude" };
    for (size_t f = 0; f < LZ_ARRAY_SIZE(must_be_files); f++) {
        struct stat st;
        if (lstat_confined(b->ws_fd, must_be_files[f], &st) == 0 && !S_ISREG(st.st_mode) &&
            !S_ISLNK(st.st_mode)) {
            lz_error_set(err, 0, "%s/%s is not a regular file", b->ws, must_be_files[f]);
            return lz_error_hint(err, "Git would block reading it; replace it by a regular file "
                                      "(or remove it)");
        }
    }
    return 0;
}

/* Finish: what earlier generations isolated is isolated again, the record
 * is the union, and the plan's list is sorted and pinned for the audit
 * (called again after the nested work trees added theirs). */
/* What earlier generations isolated, isolated again — before anything the
 * rules list now: an entry now listed below a recorded directory is then
 * inside its copy, never a bind point that would take the directory out
 * of isolation (attack round i12d, D1: `secrets/` narrowed to
 * `secrets/[a-m]*` shared the rest of it). */
static int isolate_recorded(builder *b, ignored_run *run, lz_error **err)
{
    for (size_t i = 0; i < run->record.n; i++)
        if (isolate_one(b, run, run->record.v[i], true, err) < 0)
            return -1;
    return 0;
}

static int isolate_finish(builder *b, const lz_resolved_config *cfg, ignored_run *run,
                          lz_error **err)
{
    int r = 0;
    name_list all = { 0 };
    for (size_t i = 0; i < run->record.n; i++)
        names_add(&all, run->record.v[i]);
    for (size_t i = 0; i < b->p->n_ignored; i++) {
        _cleanup_free_ char *with = b->p->ignored_dir[i] ? lz_xasprintf("%s/", b->p->ignored[i])
                                                         : lz_xstrdup(b->p->ignored[i]);
        names_add(&all, with);
    }
    /* The union: sorted, each once (up to 20,000 paths each side). */
    if (all.n > 1)
        qsort(all.v, all.n, sizeof(char *), cmp_str);
    size_t u = 0;
    for (size_t i = 0; i < all.n; i++) {
        if (u && strcmp(all.v[u - 1], all.v[i]) == 0)
            free(all.v[i]);
        else
            all.v[u++] = all.v[i];
    }
    all.n = u;
    size_t bytes = 0;
    for (size_t i = 0; i < all.n; i++)
        bytes += strlen(all.v[i]) + 1;
    if (all.n > MAX_IGNORED || bytes > RECORD_MAX) {
        names_clear(&all);
        lz_error_set(err, 0, "the workspace %s has had more git-ignored paths than Lazaret keeps "
                             "hidden (%d paths or %zu MiB of names, counting earlier sessions')",
                     b->ws, MAX_IGNORED, RECORD_MAX >> 20);
        return lz_error_hint(err, "ignore whole directories rather than the files in them and "
                                  "remove generated files; then lazaret state reset — which also "
                                  "forgets which paths were hidden: first check that the ignore "
                                  "rules still list your secrets (git status --ignored)");
    }
    r = record_write(run->droot, IGNORED_RECORD, &all, cfg->storage_domain_root.label, err);
    names_clear(&all);
    if (r < 0)
        return -1;
    free(b->p->ignored_notice);
    b->p->ignored_notice = ignored_notice(b->p);
    if (b->p->n_ignored > 1)
        sort_ignored(b->p);
    free(b->p->ignored_ids);
    b->p->ignored_ids = lz_xcalloc(b->p->n_ignored ? b->p->n_ignored : 1, sizeof(lz_git_marker));
    for (size_t i = 0; i < b->p->n_ignored; i++) {
        struct stat st;
        if (lstat_confined(b->ws_fd, b->p->ignored[i], &st) == 0)
            b->p->ignored_ids[i] = (lz_git_marker) { NULL, st.st_dev, st.st_ino };
    }
    return 0;
}

/* Is the Git directory `gd` valid the way Git's is_git_directory() decides
 * (HEAD a ref or an object name, objects/ and refs/, or a commondir)? An
 * invalid one makes the host's Git look elsewhere: in the workspace itself. */
static bool valid_git_dir(int ws_fd, const char *gd, char **ret_why)
{
    _cleanup_free_ char *head = join_rel(gd, "HEAD");
    struct stat st;
    if (lstat_confined(ws_fd, head, &st) < 0) {
        *ret_why = lz_xasprintf("%s is missing", head);
        return false;
    }
    if (S_ISLNK(st.st_mode)) {
        *ret_why = lz_xasprintf("%s is a symlink", head);
        return false;
    }
    int fd = lz_open_confined(ws_fd, head, O_RDONLY | O_NONBLOCK, 0, head, NULL);
    char buf[256] = { 0 };
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0)
        close(fd);
    bool ok = false;
    if (n > 0) {
        buf[n] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        if (strncmp(buf, "ref: refs/", 10) == 0 && !strstr(buf, "..")) {
            ok = true;
        } else {
            size_t len = strlen(buf);
            ok = (len == 40 || len == 64) && strspn(buf, "0123456789abcdef") == len;
        }
    }
    if (!ok) {
        *ret_why = lz_xasprintf("%s is neither a ref nor an object name", head);
        return false;
    }
    _cleanup_free_ char *common = join_rel(gd, "commondir");
    if (lstat_confined(ws_fd, common, &st) == 0)
        return true;
    static const char *const dirs[] = { "objects", "refs" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(dirs); i++) {
        _cleanup_free_ char *rel = join_rel(gd, dirs[i]);
        if (lstat_confined(ws_fd, rel, &st) < 0 || !S_ISDIR(st.st_mode)) {
            *ret_why = lz_xasprintf("%s is not a directory", rel);
            return false;
        }
    }
    return true;
}

/* ---- the tree walk (plan and audit) ------------------------------------ */

typedef struct walk {
    lz_git_plan *p;
    builder *b;          /* plan mode: protections go here; NULL in audit mode */
    bool watch;          /* add inotify watches to every directory visited */
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
    bool no_descend, in_peek, peek_overflow;
    unsigned since_peek;
    lz_error **err;
} walk;

/* An ignored path is bound over by the Domain's copy: the sandbox never
 * writes the host's object there, and the audit skips it — but only while it
 * is still the object the plan bound (a parent renamed inside would leave a
 * new, writable one under the old name). */
static bool is_ignored(const lz_git_plan *p, const char *rel, const struct stat *st)
{
    if (p->n_ignored == 0)
        return false;
    char *key = (char *) rel;
    char **hit = bsearch(&key, p->ignored, p->n_ignored, sizeof(char *), cmp_str);
    if (!hit)
        return false;
    if (!st || !p->ignored_ids)
        return true;
    const lz_git_marker *id = &p->ignored_ids[hit - p->ignored];
    return id->dev == st->st_dev && id->ino == st->st_ino;
}

/* The names in directory dfd (without . and ..), read first so that the
 * entries can be checked — and perhaps renamed away — afterwards. NULL when
 * the directory cannot be read (errno set). Free with free_names(). */
static char **list_names(int dfd, size_t *ret_n)
{
    int rfd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rfd < 0 && (errno == EACCES || errno == EPERM)) {
        /* A directory closed to the developer that the eye opened (reading
         * an open directory asks no permission; reopening "." does: attack
         * round i23d). The duplicate shares the offset: from the start. */
        rfd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
        if (rfd >= 0 && lseek(rfd, 0, SEEK_SET) < 0) {
            int saved = errno;
            close(rfd);
            errno = saved == ESPIPE || saved == EBADF ? EACCES : saved;
            rfd = -1;
        }
    }
    DIR *d = rfd >= 0 ? fdopendir(rfd) : NULL;
    if (!d) {
        int saved = errno;
        if (rfd >= 0)
            close(rfd);
        errno = saved;
        return NULL;
    }
    char **names = lz_xcalloc(1, sizeof(char *));
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        names = lz_xrealloc(names, n + 2, sizeof(char *));
        names[n++] = lz_xstrdup(e->d_name);
        names[n] = NULL;
    }
    closedir(d);
    *ret_n = n;
    return names;
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
}

/* Append an already printable line to the report. */
static void report_append(walk *w, const char *line)
{
    if (w->report_len > MAX_REPORT)
        return;
    char *joined = lz_xasprintf("%s%s%s", w->report ? w->report : "", w->report ? "; " : "",
                                w->report_len + strlen(line) > MAX_REPORT ? "…" : line);
    free(w->report);
    w->report = joined;
    w->report_len = strlen(joined);
}

static void report_add(walk *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report_add(walk *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    /* Names here are the sandbox's choice: no terminal controls in a
     * notice that other sessions print (or in the log). */
    char *line = lz_vprintable(fmt, ap);
    va_end(ap);
    report_append(w, line);
    free(line);
}

/* The first thing an audit could not neutralise (what the record names). */
static void fail_at(walk *w, const char *rel)
{
    if (!w->p->failed_rel)
        w->p->failed_rel = lz_xstrdup(rel);
}

/* Give the developer's own directory dfd (name NULL) or dfd/name (a
 * directory, reached without following anything) back read, write and search
 * permission for its owner: the sandbox can take them away from what it made,
 * to hide it from the audit. Returns 0 when the directory is the developer's
 * and now u+rwx. */
static int make_ours_writable(int dfd, const char *name)
{
    _cleanup_close_ int fd = name ? lz_open_confined(dfd, name, O_PATH | O_NOFOLLOW | O_DIRECTORY,
                                                     0, name, NULL)
                                  : -EBADF;
    int target = name ? fd : dfd;
    struct stat st;
    if (target < 0 || fstat(target, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid())
        return -1;
    if ((st.st_mode & S_IRWXU) == S_IRWXU)
        return 0;
    /* chmod through the descriptor: an O_PATH one via its magic link,
     * which names exactly that inode. */
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", target);
    return chmod(path, (st.st_mode & 07777) | S_IRWXU);
}

/* ---- looking where the developer cannot (sentry_eye.h) -------------------------------- */

/* A directory of another sandbox user that it closed (mode 0700, say) is
 * closed to the developer and to this audit, which runs as the developer:
 * the eye opens it, watches it and moves what must go out of it, so that
 * nothing the sandbox builds is unseen until the moment it is opened
 * (attack round i23c; docs/git.md "Directories closed to the developer").
 * The developer's own directory is given back u+rwx instead (what the
 * sandbox took away from it). */

/* The eye, started at its first use. NULL (errno EACCES) when it cannot be
 * started: what the developer cannot look into then fails the audit. */
static lz_sentry_eye *eye_of(lz_git_plan *p)
{
    if (!p->eye && !p->eye_error) {
        lz_error *e = NULL;
        if (lz_sentry_eye_start(&p->eye, &e) < 0)
            p->eye_error = lz_xstrdup(e && e->message ? e->message : "it cannot start");
        lz_error_free(e);
    }
    if (!p->eye)
        errno = EACCES;
    return p->eye;
}

static bool refused(int en)
{
    return en == EACCES || en == EPERM;
}

/* Could a process of the sandbox enter the directory st? It acts as the
 * developer's and the subordinate ids (the Domain's map) and nothing else:
 * as owner or group only when the directory's owner or group is one of
 * them, as anyone else by the other bits. One it cannot enter (a host
 * root's 0700 directory from a container build, say) holds nothing the
 * sandbox made or can make: the audit leaves it alone, as the developer's
 * Git must. Unknown ids count as the sandbox's (fail closed). */
static bool sandbox_may_enter(lz_git_plan *p, const struct stat *st)
{
    if (st->st_mode & S_IXOTH)
        return true;
    if (!p->ids_known && !p->ids_failed) {
        lz_subid_range u, g;
        lz_error *e = NULL;
        if (lz_subid_lookup(LZ_SUBID_UID, getuid(), getgid(), &u, &e) == 0 &&
            lz_subid_lookup(LZ_SUBID_GID, getuid(), getgid(), &g, &e) == 0) {
            p->subuid_start = u.start;
            p->subgid_start = g.start;
            p->ids_known = true;
        } else {
            p->ids_failed = true;
        }
        lz_error_free(e);
    }
    if (!p->ids_known)
        return true;
    bool uid = st->st_uid == getuid() || (st->st_uid >= p->subuid_start &&
                                          st->st_uid - p->subuid_start < LZ_SUBID_COUNT);
    bool gid = st->st_gid == getgid() || (st->st_gid >= p->subgid_start &&
                                          st->st_gid - p->subgid_start < LZ_SUBID_COUNT);
    return uid || gid;
}

/* lz_open_confined(dfd, rel, flags) as the developer or, refused for want
 * of permission, by the eye. Returns the fd, or -1 with errno. */
static int sight_open(lz_git_plan *p, int dfd, const char *rel, int flags)
{
    lz_error *e = NULL;
    int fd = lz_open_confined(dfd, rel, flags, 0, rel, &e);
    int en = fd < 0 ? (e ? e->errnum : errno) : 0;
    lz_error_free(e);
    if (fd >= 0)
        return fd;
    errno = en;
    if (!refused(en))
        return -1;
    lz_sentry_eye *eye = eye_of(p);
    return eye ? lz_sentry_eye_open(eye, dfd, rel, flags) : -1;
}

/* lstat of dfd/name: as the developer, again after giving the developer's
 * own directory dfd back its search permission, or by the eye. */
static int sight_lstat(lz_git_plan *p, int dfd, const char *name, struct stat *st)
{
    if (fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) == 0)
        return 0;
    if (!refused(errno))
        return -1;
    if (make_ours_writable(dfd, NULL) == 0 && fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) == 0)
        return 0;
    lz_sentry_eye *eye = eye_of(p);
    int fd = eye ? lz_sentry_eye_open(eye, dfd, name, O_PATH | O_NOFOLLOW) : -1;
    if (fd < 0)
        return -1;
    int r = fstat(fd, st);
    int saved = errno;
    close(fd);
    errno = saved;
    return r;
}

/* readlinkat(dfd, name) as the developer or through the eye. */
static ssize_t sight_readlink(lz_git_plan *p, int dfd, const char *name, char *buf, size_t size)
{
    ssize_t n = readlinkat(dfd, name, buf, size);
    if (n >= 0 || !refused(errno))
        return n;
    lz_sentry_eye *eye = eye_of(p);
    int fd = eye ? lz_sentry_eye_open(eye, dfd, name, O_PATH | O_NOFOLLOW) : -1;
    if (fd < 0)
        return -1;
    n = readlinkat(fd, "", buf, size); /* the link itself: no permission asked */
    int saved = errno;
    close(fd);
    errno = saved;
    return n;
}

/* Move dir_rel/name (dfd is dir_rel) into the quarantine. */
static int quarantine(walk *w, int dfd, const char *dir_rel, const char *name)
{
    lz_git_plan *p = w->p;
    _cleanup_free_ char *rel = join_rel(dir_rel, name);
    char target[NAME_MAX + 1];
    snprintf(target, sizeof(target), "%lld-%d-%lu-%s-%s", (long long) time(NULL), (int) getpid(),
             ++p->quarantined, dir_rel[0] ? dir_rel : "top", name);
    for (char *c = target; *c; c++)
        if (*c == '/')
            *c = '_';
    int r = renameat(dfd, name, p->quarantine_fd, target);
    if (r < 0 && refused(errno)) {
        /* The sandbox took our write permission away (on the directory, or
         * on a directory entry, which a rename to another parent needs):
         * what we own we can give back; what another sandbox user owns the
         * eye moves. */
        make_ours_writable(dfd, NULL);
        make_ours_writable(dfd, name);
        r = renameat(dfd, name, p->quarantine_fd, target);
        lz_sentry_eye *eye = r < 0 && refused(errno) ? eye_of(p) : NULL;
        if (eye)
            r = lz_sentry_eye_rename(eye, dfd, name, p->quarantine_fd, target);
    }
    if (r < 0) {
        if (errno == ENOENT)
            return 0; /* gone already */
        fail_at(w, rel);
        lz_error_set(w->err, errno, "Git Sentry: cannot move %s into the quarantine %s", rel,
                     p->quarantine_rel);
        return -1;
    }
    report_add(w, "%s (moved to %s/%s)", rel, p->quarantine_rel, target);
    w->moved++;
    return 1;
}

/* wd -> index of watches[], open addressing with linear probing (the
 * audit looks a watch up for every event: a scan of 50,000 would make a
 * storm of events quadratic). */
struct lz_git_wdslot {
    int wd;
    size_t idx1; /* index + 1; 0: empty */
};

static size_t wd_hash(int wd, size_t cap)
{
    return ((uint32_t) wd * 2654435761u) & (cap - 1);
}

static void wd_index_put(lz_git_plan *p, int wd, size_t idx)
{
    if ((p->n_watches + 1) * 2 > p->wd_cap) {
        size_t cap = p->wd_cap ? p->wd_cap * 2 : 1024;
        while ((p->n_watches + 1) * 2 > cap)
            cap *= 2;
        struct lz_git_wdslot *slots = lz_xcalloc(cap, sizeof(*slots));
        for (size_t i = 0; i < p->wd_cap; i++) {
            if (!p->wd_slots[i].idx1)
                continue;
            size_t h = wd_hash(p->wd_slots[i].wd, cap);
            while (slots[h].idx1)
                h = (h + 1) & (cap - 1);
            slots[h] = p->wd_slots[i];
        }
        free(p->wd_slots);
        p->wd_slots = slots;
        p->wd_cap = cap;
    }
    size_t h = wd_hash(wd, p->wd_cap);
    while (p->wd_slots[h].idx1 && p->wd_slots[h].wd != wd)
        h = (h + 1) & (p->wd_cap - 1);
    p->wd_slots[h] = (struct lz_git_wdslot) { .wd = wd, .idx1 = idx + 1 };
}

static struct lz_git_wdslot *wd_slot(const lz_git_plan *p, int wd)
{
    if (!p->wd_cap)
        return NULL;
    for (size_t h = wd_hash(wd, p->wd_cap); p->wd_slots[h].idx1; h = (h + 1) & (p->wd_cap - 1))
        if (p->wd_slots[h].wd == wd)
            return &p->wd_slots[h];
    return NULL;
}

/* Remove wd (backward-shift deletion keeps every probe chain whole). */
static void wd_index_del(lz_git_plan *p, int wd)
{
    struct lz_git_wdslot *slot = wd_slot(p, wd);
    if (!slot)
        return;
    size_t mask = p->wd_cap - 1, i = (size_t) (slot - p->wd_slots), j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!p->wd_slots[j].idx1)
            break;
        size_t k = wd_hash(p->wd_slots[j].wd, p->wd_cap);
        /* Can slot j's entry move to the hole at i (is i on its probe
         * path, cyclically in [k, j))? */
        bool movable = i <= j ? (k <= i || k > j) : (k <= i && k > j);
        if (movable) {
            p->wd_slots[i] = p->wd_slots[j];
            i = j;
        }
    }
    p->wd_slots[i] = (struct lz_git_wdslot) { 0 };
}

static lz_git_dirwatch *watch_by_wd(lz_git_plan *p, int wd)
{
    struct lz_git_wdslot *slot = wd_slot(p, wd);
    return slot ? &p->watches[slot->idx1 - 1] : NULL;
}

/* (parent wd, name) -> wd: the tree's edges, to find the watch a rename
 * event names (open addressing, backward-shift deletion). */
static size_t child_hash(const lz_git_plan *p, int parent, const char *name)
{
    return (hash_str(name) * 31u + (size_t) (uint32_t) parent * 2654435761u) &
           (p->child_cap - 1);
}

static bool child_is(const lz_git_plan *p, int wd, int parent, const char *name);

static int child_get(lz_git_plan *p, int parent, const char *name)
{
    if (!p->child_cap)
        return -1;
    for (size_t h = child_hash(p, parent, name); p->child_slots[h];
         h = (h + 1) & (p->child_cap - 1))
        if (child_is(p, p->child_slots[h], parent, name))
            return p->child_slots[h];
    return -1;
}

static void child_put(lz_git_plan *p, int wd);

static void child_grow(lz_git_plan *p)
{
    int *old = p->child_slots;
    size_t old_cap = p->child_cap;
    p->child_cap = old_cap ? old_cap * 2 : 1024;
    p->child_slots = lz_xcalloc(p->child_cap, sizeof(int));
    p->n_children = 0;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i])
            child_put(p, old[i]);
    free(old);
}

static bool child_is(const lz_git_plan *p, int wd, int parent, const char *name)
{
    const lz_git_dirwatch *dw = watch_by_wd((lz_git_plan *) p, wd);
    return dw && dw->parent_wd == parent && strcmp(dw->name, name) == 0;
}

/* Index watch wd under its (parent, name) (rooted watches are not). */
static void child_put(lz_git_plan *p, int wd)
{
    lz_git_dirwatch *dw = watch_by_wd(p, wd);
    if (!dw || dw->parent_wd < 0)
        return;
    if ((p->n_children + 1) * 2 > p->child_cap)
        child_grow(p);
    size_t h = child_hash(p, dw->parent_wd, dw->name);
    while (p->child_slots[h] && p->child_slots[h] != wd)
        h = (h + 1) & (p->child_cap - 1);
    if (!p->child_slots[h])
        p->n_children++;
    p->child_slots[h] = wd;
}

static void child_del(lz_git_plan *p, int wd)
{
    lz_git_dirwatch *dw = watch_by_wd(p, wd);
    if (!dw || dw->parent_wd < 0 || !p->child_cap)
        return;
    size_t mask = p->child_cap - 1, i = child_hash(p, dw->parent_wd, dw->name);
    while (p->child_slots[i] && p->child_slots[i] != wd)
        i = (i + 1) & mask;
    if (!p->child_slots[i])
        return;
    for (size_t j = i;;) {
        j = (j + 1) & mask;
        if (!p->child_slots[j])
            break;
        lz_git_dirwatch *o = watch_by_wd(p, p->child_slots[j]);
        size_t k = o ? child_hash(p, o->parent_wd, o->name) : j;
        bool movable = i <= j ? (k <= i || k > j) : (k <= i && k > j);
        if (movable) {
            p->child_slots[i] = p->child_slots[j];
            i = j;
        }
    }
    p->child_slots[i] = 0;
    p->n_children--;
}

/* The workspace-relative path of a watched directory now, put together
 * from its chain of parents; NULL when the chain is broken (a parent's
 * watch went away) or absurdly long. */
static char *watch_rel(lz_git_plan *p, const lz_git_dirwatch *dw)
{
    const char *parts[MAX_TREE_DEPTH * 2 + 2];
    size_t n = 0, len = 0;
    for (const lz_git_dirwatch *x = dw; x; x = x->parent_wd < 0 ? NULL
                                                                : watch_by_wd(p, x->parent_wd)) {
        if (n == LZ_ARRAY_SIZE(parts))
            return NULL;
        parts[n++] = x->name;
        len += strlen(x->name) + 1;
        if (x->parent_wd >= 0 && !watch_by_wd(p, x->parent_wd))
            return NULL;
    }
    char *out = lz_xcalloc(len + 1, 1), *o = out;
    for (size_t i = n; i-- > 0;) {
        if (!parts[i][0])
            continue;
        if (o != out)
            *o++ = '/';
        size_t l = strlen(parts[i]);
        memcpy(o, parts[i], l);
        o += l;
    }
    *o = '\0';
    return out;
}

/* The watch of the directory at `rel` (workspace-relative), found down the
 * tree from the workspace's watch; NULL when some directory on the way is
 * not watched. */
static lz_git_dirwatch *watch_by_rel(lz_git_plan *p, const char *rel)
{
    int wd = p->root_wd;
    if (wd <= 0 || !watch_by_wd(p, wd))
        return NULL;
    if (!rel[0])
        return watch_by_wd(p, wd);
    _cleanup_free_ char *copy = lz_xstrdup(rel);
    for (char *save = NULL, *part = strtok_r(copy, "/", &save); part;
         part = strtok_r(NULL, "/", &save)) {
        wd = child_get(p, wd, part);
        if (wd < 0)
            return NULL;
    }
    return watch_by_wd(p, wd);
}

/* Place watch dw at rel: under its parent's watch when there is one. */
static void place_watch(lz_git_plan *p, lz_git_dirwatch *dw, const char *rel)
{
    int wd = dw->wd;
    child_del(p, wd);
    dw = watch_by_wd(p, wd);
    free(dw->name);
    const char *slash = strrchr(rel, '/');
    lz_git_dirwatch *parent = NULL;
    if (rel[0]) {
        _cleanup_free_ char *prel = slash ? lz_xstrndup(rel, (size_t) (slash - rel))
                                          : lz_xstrdup("");
        parent = watch_by_rel(p, prel);
        dw = watch_by_wd(p, wd);
    }
    if (parent && parent->wd != wd) {
        dw->parent_wd = parent->wd;
        dw->name = lz_xstrdup(slash ? slash + 1 : rel);
        child_put(p, wd);
    } else {
        dw->parent_wd = -1;
        dw->name = lz_xstrdup(rel);
    }
}

/* Forget the watch at index i (its wd is gone or removed). */
static void drop_watch(lz_git_plan *p, size_t i)
{
    lz_git_dirwatch *dw = &p->watches[i];
    if (dw->kind & (ROLE_TREE | ROLE_GITINNER))
        p->n_tree_dirs--;
    if (dw->wd == p->root_wd)
        p->root_wd = -1;
    child_del(p, dw->wd);
    dw = &p->watches[i];
    wd_index_del(p, dw->wd);
    free(dw->name);
    size_t last = --p->n_watches;
    if (i != last) {
        p->watches[i] = p->watches[last];
        wd_index_put(p, p->watches[i].wd, i);
    }
}

/* inotify watch on the directory dfd (by its descriptor: /proc/self/fd/N
 * names exactly that directory, whatever happens to its path). */
static int add_watch(walk *w, int dfd, const char *rel, unsigned role)
{
    lz_git_plan *p = w->p;
    if (!w->watch || p->inotify_fd < 0)
        return 0;
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", dfd);
    /* Todo lists are rewritten in place (the sequence editor): their
     * directory's watch also reports writes. */
    /* IN_MASK_ADD: a directory with two roles keeps the events of both.
     * IN_MODIFY, not IN_CLOSE_WRITE, for todo lists rewritten in place:
     * gVisor's gofer keeps a file the sandbox wrote open on the host. */
    uint32_t mask = WATCH_MASK | IN_MASK_ADD |
                    (role & ROLE_SEQUENCER ? IN_MODIFY | IN_CLOSE_WRITE : 0);
    int wd = inotify_add_watch(p->inotify_fd, path, mask);
    lz_sentry_eye *eye = wd < 0 && refused(errno) ? eye_of(p) : NULL;
    if (eye) /* a directory closed to the developer: placed by the eye */
        wd = lz_sentry_eye_watch(eye, p->inotify_fd, dfd, mask);
    if (wd < 0) {
        fail_at(w, rel[0] ? rel : ".");
        lz_error_set(w->err, errno, "Git Sentry: cannot watch %s",
                     rel[0] ? rel : "the workspace");
        if (errno == ENOSPC)
            return lz_error_hint(w->err, "raise the inotify limit (sudo sysctl "
                                         "fs.inotify.max_user_watches=1048576)");
        return -1;
    }
    struct stat st;
    if (fstat(dfd, &st) < 0)
        return lz_error_set(w->err, errno, "Git Sentry: cannot stat %s", rel);
    lz_git_dirwatch *dw = watch_by_wd(p, wd);
    bool fresh = !dw;
    if (!dw) {
        p->watches = lz_xrealloc(p->watches, p->n_watches + 1, sizeof(lz_git_dirwatch));
        wd_index_put(p, wd, p->n_watches);
        dw = &p->watches[p->n_watches++];
        *dw = (lz_git_dirwatch) { .wd = wd, .parent_wd = -1 };
    }
    if ((role & (ROLE_TREE | ROLE_GITINNER)) && !(dw->kind & (ROLE_TREE | ROLE_GITINNER)))
        p->n_tree_dirs++;
    dw->kind |= role;
    dw->dev = st.st_dev;
    dw->ino = st.st_ino;
    if (!rel[0] && (role & ROLE_TREE))
        p->root_wd = wd;
    _cleanup_free_ char *now = fresh ? NULL : watch_rel(p, dw);
    if (fresh || !now || strcmp(now, rel) != 0)
        place_watch(p, dw, rel);
    return 0;
}

static int walk_dir(walk *w, int dfd, const char *rel, int depth);
/* A walk in event mode looks at the queue every this many entries. */
#define PEEK_EVERY 128
static int peek_urgent(walk *w);

/* A directory of the tree that looks like a Git directory (HEAD beside
 * objects/ or a commondir): the host's Git would use it as a bare
 * repository when run inside it. */
static int check_bare(walk *w, int dfd, const char *rel)
{
    lz_git_plan *p = w->p;
    if (!rel[0] && p->kind == LZ_GIT_BARE)
        return 0; /* the workspace itself: protected as a Git directory */
    struct stat hst, st, dst;
    if (sight_lstat(p, dfd, "HEAD", &hst) < 0) {
        if (errno == ENOENT)
            return 0;
        fail_at(w, rel[0] ? rel : ".");
        return lz_error_set(w->err, errno, "Git Sentry: cannot audit %s", rel[0] ? rel : ".");
    }
    /* A HEAD beside anything else of a Git directory: a HEAD and a config
     * the sandbox wrote lack only objects/ and refs/ to be obeyed, and those
     * are ordinary names a build (or a placeholder) may create later. */
    static const char *const companions[] = { "objects", "refs", "commondir", "config" };
    bool companion = false;
    for (size_t i = 0; !companion && i < LZ_ARRAY_SIZE(companions); i++)
        companion = sight_lstat(p, dfd, companions[i], &st) == 0;
    if (!companion)
        return 0;
    if (fstat(dfd, &dst) < 0)
        return lz_error_set(w->err, errno, "Git Sentry: cannot stat %s", rel);
    const char *self = rel[0] ? rel : ".";
    /* Plan: a working bare repository below the top is the developer's own
     * (a test fixture, say). Anything else that has the shape — a partial
     * one, or one at the top of a repository, where Git would only look if
     * .git broke — is no repository of the developer's: set aside now. */
    _cleanup_free_ char *why = NULL;
    if (w->b && rel[0] && valid_git_dir(p->ws_fd, self, &why)) {
        add_marker(&p->markers, &p->n_markers, self, &dst);
        return protect_git_dir(w->b, self, 1, w->err);
    }
    if (known(p->markers, p->n_markers, self, &dst))
        return 0;
    return quarantine(w, dfd, rel, "HEAD") < 0 ? -1 : 0;
}

static bool path_within(const char *path, const char *root);
static void unwatch_below(lz_git_plan *p, int top);

/* Does the absolute path lie where the sandbox can write but the audit
 * does not look: Lazaret's storage (the Domain's persistent uppers,
 * ignored copies, volumes' state) and runtime trees, a read-write volume,
 * or /proc and /dev (what those name depends on who follows them)? Judged
 * on the lexical path and on the path as the host resolves it. */
static bool in_sandbox_state(const lz_resolved_config *cfg, const char *abs)
{
    if (path_within(abs, "/proc") || path_within(abs, "/dev"))
        return true;
    _cleanup_free_ char *lex_rest = lexical_rel("", abs);
    _cleanup_free_ char *lex = lex_rest ? lz_xasprintf("/%s", lex_rest) : lz_xstrdup("/");
    _cleanup_free_ char *real = realpath(abs, NULL);
    const char *forms[] = { lex, real };
    for (size_t f = 0; f < LZ_ARRAY_SIZE(forms); f++) {
        if (!forms[f])
            continue;
        if (path_within(forms[f], "/proc") || path_within(forms[f], "/dev") ||
            path_within(forms[f], cfg->storage_root.label) ||
            path_within(forms[f], cfg->runtime_root.label))
            return true;
        for (size_t i = 0; i < cfg->n_volumes; i++)
            if (cfg->volumes[i].access != LZ_ACCESS_READ_ONLY &&
                path_within(forms[f], cfg->volumes[i].source.label))
                return true;
    }
    return false;
}

/* A `.git` file (gitfile) in the tree directory dfd (= rel) found at
 * start: does it send Git into the sandbox's own state? Its `gitdir:`
 * target, resolved as Git does (relative to the file's directory), judged
 * by in_sandbox_state. A file Git would not follow (no `gitdir: ` line, too
 * long to be one) sends it nowhere: Git stops with an error. Decision
 * (docs/git.md "gitdir: files"): a target in the developer's own places
 * outside the workspace (a --separate-git-dir repository) stays the
 * developer's; inside the workspace, a target is judged by the audit like
 * any directory of the tree (half a Git directory there is set aside). */
static bool gitfile_into_sandbox_state(lz_git_plan *p, int dfd, const char *rel)
{
    if (!p->cfg)
        return false;
    _cleanup_close_ int fd = sight_open(p, dfd, ".git", O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return false;
    char buf[PATH_MAX + 16];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    if (n <= 8)
        return false;
    buf[n] = '\0';
    if (strncmp(buf, "gitdir: ", 8) != 0)
        return false;
    char *target = buf + 8;
    target[strcspn(target, "\r\n")] = '\0';
    if (!target[0])
        return false;
    _cleanup_free_ char *abs = target[0] == '/' ? lz_xstrdup(target)
                               : rel[0] ? lz_xasprintf("%s/%s/%s", p->cfg->workspace.label, rel,
                                                       target)
                                        : lz_xasprintf("%s/%s", p->cfg->workspace.label, target);
    return in_sandbox_state(p->cfg, abs);
}

/* A `.git` entry below the workspace's top level. */
static int check_dot_git(walk *w, int dfd, const char *rel, const struct stat *st)
{
    lz_git_plan *p = w->p;
    _cleanup_free_ char *child = join_rel(rel, ".git");
    /* A gitfile into the sandbox's own state is no repository of the
     * developer's, whoever seems to have made it (attack round i23: a
     * submodule's .git file naming a repository the sandbox built in its
     * persistent directory, whose config runs a filter): set aside at
     * every start, like a Git directory the sandbox made. */
    if (w->b && S_ISREG(st->st_mode) && rel[0] && gitfile_into_sandbox_state(p, dfd, rel))
        return quarantine(w, dfd, rel, ".git") < 0 ? -1 : 0;
    if (w->b) { /* plan: a repository of the developer's */
        if (S_ISLNK(st->st_mode)) {
            lz_error_set(w->err, 0, "Git Sentry: %s/%s is a symlink", w->b->ws, child);
            return lz_error_hint(w->err, "the sandbox could point it at a Git directory of its "
                                         "own: make it a directory or a gitdir file");
        }
        add_marker(&p->markers, &p->n_markers, child, st);
        if (S_ISDIR(st->st_mode))
            return protect_git_dir(w->b, child, 1, w->err);
        if (S_ISREG(st->st_mode) && rel[0]) {
            builder *b = w->b;
            b->gitfile_trees = lz_xrealloc(b->gitfile_trees, b->n_gitfile_trees + 1,
                                           sizeof(char *));
            b->gitfile_trees[b->n_gitfile_trees++] = lz_xstrdup(rel);
        }
        return protect_if_exists(w->b, child, w->err);
    }
    if (known(p->markers, p->n_markers, child, st))
        return 0;
    return quarantine(w, dfd, rel, ".git") < 0 ? -1 : 0;
}

static bool path_within(const char *path, const char *root)
{
    size_t n = strlen(root);
    return strncmp(path, root, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

/* Does the symlink dfd/name (in the tree directory rel) point where the
 * sandbox can write but the audit does not look — a read-write volume, the
 * Storage Root (ignored copies, persistent uppers), the internals of a Git
 * directory? A host git run "in the workspace" through it would obey a
 * repository there. Judged on the lexical target and on the target as the
 * host resolves it. */
static bool link_into_sandbox_storage(lz_git_plan *p, int dfd, const char *rel,
                                      const char *name)
{
    const lz_resolved_config *cfg = p->cfg;
    if (!cfg)
        return false;
    char target[PATH_MAX];
    ssize_t n = sight_readlink(p, dfd, name, target, sizeof(target) - 1);
    if (n <= 0)
        return false;
    target[n] = '\0';
    /* /proc/self/cwd/…, /dev/fd/…: what these name depends on the process
     * that follows them — on the host, the developer's shell. */
    if (path_within(target, "/proc") || path_within(target, "/dev"))
        return true;
    _cleanup_free_ char *abs = target[0] == '/' ? lz_xstrdup(target)
                               : rel[0]       ? lz_xasprintf("%s/%s/%s", cfg->workspace.label, rel,
                                                             target)
                                              : lz_xasprintf("%s/%s", cfg->workspace.label, target);
    if (in_sandbox_state(cfg, abs))
        return true;
    /* "/" + the lexically normalised rest */
    _cleanup_free_ char *lex_rest = lexical_rel("", abs);
    _cleanup_free_ char *lex = lex_rest ? lz_xasprintf("/%s", lex_rest) : lz_xstrdup("/");
    _cleanup_free_ char *real = realpath(abs, NULL);
    const char *forms[] = { lex, real };
    for (size_t f = 0; f < LZ_ARRAY_SIZE(forms); f++) {
        if (!forms[f])
            continue;
        /* Inside the workspace, into a Git directory's internals, which the
         * audit does not walk (a repository built in .git/objects/…). */
        _cleanup_free_ char *inside = lexical_rel(cfg->workspace.label, forms[f]);
        for (size_t g = 0; inside && g < p->n_git_dirs; g++)
            if (strcmp(p->git_dirs[g], ".") == 0 || path_within(inside, p->git_dirs[g]))
                return true;
    }
    return false;
}

/* A symlink the sandbox made that points outside the workspace to a place
 * the developer owns (on the host): another profile's volume, another
 * workspace — trees the sandbox (or another Domain's) may write and this
 * audit does not walk. Links to the system's files (not the developer's)
 * stay: inside the sandbox they name the image's own. */
static bool link_to_developers_own(lz_git_plan *p, int dfd, const char *rel,
                                   const char *name)
{
    char target[PATH_MAX];
    ssize_t n = sight_readlink(p, dfd, name, target, sizeof(target) - 1);
    if (n <= 0)
        return false;
    target[n] = '\0';
    _cleanup_free_ char *abs = target[0] == '/' ? lz_xstrdup(target)
                               : rel[0]         ? lz_xasprintf("%s/%s/%s", p->cfg->workspace.label,
                                                               rel, target)
                                                : lz_xasprintf("%s/%s", p->cfg->workspace.label,
                                                               target);
    _cleanup_free_ char *lex_rest = lexical_rel("", abs);
    _cleanup_free_ char *lex = lex_rest ? lz_xasprintf("/%s", lex_rest) : lz_xstrdup("/");
    _cleanup_free_ char *real = realpath(abs, NULL);
    const char *where = real ? real : lex;
    if (path_within(where, p->cfg->workspace.label))
        return false;
    /* Whose place is it? The developer's home, or any existing ancestor
     * the developer owns: a directory the sandbox chowned to another uid
     * inside a volume still lies in the developer's tree. */
    const char *home = getenv("HOME");
    if (home && home[0] == '/' && strcmp(home, "/") != 0 && path_within(where, home))
        return true;
    _cleanup_free_ char *probe = lz_xstrdup(where);
    for (;;) {
        struct stat st;
        if (lstat(probe, &st) == 0 && st.st_uid == getuid())
            return true;
        char *slash = strrchr(probe, '/');
        if (!slash || slash == probe)
            return false;
        *slash = '\0';
    }
}

static bool bare_internal(const char *name)
{
    static const char *const internal[] = { "objects", "refs",  "logs",    "hooks",   "info",
                                            "modules", "worktrees", "remotes", "branches" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(internal); i++)
        if (strcmp(name, internal[i]) == 0)
            return true;
    return false;
}

/* One entry `name` of the tree directory dfd (= rel). */
static int visit_entry(walk *w, int dfd, const char *rel, const char *name, int depth)
{
    lz_git_plan *p = w->p;
    struct stat st;
    _cleanup_free_ char *child = join_rel(rel, name);
    int sr = sight_lstat(p, dfd, name, &st);
    if (sr < 0) {
        if (errno == ENOENT)
            return 0; /* gone meanwhile */
        fail_at(w, child);
        return lz_error_set(w->err, errno, "Git Sentry: cannot audit %s", child);
    }
    if (!rel[0] && strcmp(name, ".git") == 0 && p->kind != LZ_GIT_NONE)
        return 0; /* the workspace's own: a mount point, protected by the layout */
    if (!rel[0] && p->quarantine_rel && strcmp(name, p->quarantine_rel) == 0)
        return 0;
    if (strcmp(name, ".git") == 0)
        return check_dot_git(w, dfd, rel, &st);
    if (is_ignored(p, child, &st))
        return 0;
    /* The developer's own links (there at start, known by inode) may point
     * anywhere of theirs; one the sandbox makes may not. */
    if (S_ISLNK(st.st_mode) && w->b)
        add_marker(&p->markers, &p->n_markers, child, &st);
    if (S_ISLNK(st.st_mode) &&
        (link_into_sandbox_storage(p, dfd, rel, name) ||
         (!w->b && !known(p->markers, p->n_markers, child, &st) &&
          link_to_developers_own(p, dfd, rel, name)))) {
        if (w->b) {
            fail_at(w, child);
            lz_error_set(w->err, 0, "Git Sentry: the workspace symlink %s/%s points into a "
                                    "directory the sandbox can write outside the workspace",
                         w->b->ws, child);
            return lz_error_hint(w->err, "the host's Git run through it would obey what the "
                                         "sandbox wrote there: remove the symlink, or make the "
                                         "volume read-only");
        }
        return quarantine(w, dfd, rel, name) < 0 ? -1 : 0;
    }
    if (!S_ISDIR(st.st_mode))
        return 0;
    if (!rel[0] && p->kind == LZ_GIT_BARE && bare_internal(name))
        return 0; /* inside the bare workspace's Git directory (docs/git.md) */
    if (depth + 1 > MAX_TREE_DEPTH) {
        /* Deeper than the audit goes: the whole subtree is set aside in
         * the audit (the developer's own at start: refused). */
        if (w->b) {
            fail_at(w, child);
            lz_error_set(w->err, 0, "Git Sentry: %s/%s is nested deeper than %d directories",
                         w->b->ws, child, MAX_TREE_DEPTH);
            return lz_error_hint(w->err, "ignore it in .gitignore, or move it out of the "
                                         "workspace");
        }
        return quarantine(w, dfd, rel, name) < 0 ? -1 : 0;
    }
    /* Taken away by the sandbox? A directory of another sandbox user's
     * that is closed to the developer is audited through the eye. */
    if (st.st_uid == getuid() && (st.st_mode & S_IRWXU) != S_IRWXU)
        make_ours_writable(dfd, name);
    /* A rename the audit followed: its subtree is watched and was audited
     * (or its events are queued), so it is not walked again. */
    if (w->known_subtree && strcmp(child, w->known_subtree) == 0)
        return 0;
    /* In event mode, a directory already under watch (the same inode) was
     * audited and its events come: a mode change of it, say, is no reason
     * to walk it again (attack round i23b: chmod of a 20,000-directory tree
     * made a walk per event, and what waited behind it stayed for seconds). */
    if (w->events) {
        lz_git_dirwatch *pw = watch_by_rel(p, rel);
        int cwd = pw ? child_get(p, pw->wd, name) : -1;
        lz_git_dirwatch *cw = cwd > 0 ? watch_by_wd(p, cwd) : NULL;
        if (cw && cw->dev == st.st_dev && cw->ino == st.st_ino)
            return 0;
    }
    if (w->no_descend)
        return 0; /* judged as an entry now; walked in its turn */
    _cleanup_close_ int cfd = sight_open(p, dfd, name, O_RDONLY | O_DIRECTORY);
    if (cfd < 0) {
        int en = errno;
        if (en == ENOENT)
            return 0;
        /* Another mount inside the workspace: the sandbox does not see it
         * (the workspace is bound without its submounts). */
        if (en == EXDEV)
            return 0;
        if (refused(en) && !sandbox_may_enter(p, &st))
            return 0; /* nothing in it is the sandbox's */
        /* Not readable even by the eye (or no eye): it could hide a
         * repository the developer's git can reach, or one the sandbox
         * opens to it later. */
        fail_at(w, child);
        lz_error_set(w->err, en, "Git Sentry: cannot audit the directory %s%s%s", child,
                     p->eye_error ? ": " : "", p->eye_error ? p->eye_error : "");
        return lz_error_hint(w->err, "make it readable (chmod u+rx), or remove it");
    }
    return walk_dir(w, cfd, child, depth + 1);
}

static int walk_dir(walk *w, int dfd, const char *rel, int depth)
{
    lz_git_plan *p = w->p;
    if (add_watch(w, dfd, rel, ROLE_TREE) < 0)
        return -1;
    if (w->watch && p->n_tree_dirs > MAX_TREE_DIRS) {
        fail_at(w, rel);
        lz_error_set(w->err, 0, "Git Sentry: the workspace has more than %d directories outside "
                                "git-ignored paths",
                     MAX_TREE_DIRS);
        return lz_error_hint(w->err, "ignore generated directories in .gitignore, or choose a "
                                     "smaller workspace");
    }
    size_t n;
    char **names = list_names(dfd, &n);
    if (!names && errno == EACCES && make_ours_writable(dfd, NULL) == 0)
        names = list_names(dfd, &n);
    if (!names) {
        fail_at(w, rel[0] ? rel : ".");
        return lz_error_set(w->err, errno, "Git Sentry: cannot read %s",
                            rel[0] ? rel : "the workspace");
    }
    int r = 0;
    for (size_t i = 0; r == 0 && i < n; i++) {
        r = visit_entry(w, dfd, rel, names[i], depth);
        if (r == 0 && w->peeked && !w->in_peek && ++w->since_peek >= PEEK_EVERY)
            r = peek_urgent(w);
    }
    free_names(names, n);
    if (r == 0)
        r = check_bare(w, dfd, rel);
    return r;
}

/* Would the sequencer state in dfd make Git run a command of the sandbox's:
 * a todo line whose first word is `exec` or `x` (Git skips leading blanks
 * and has no line length limit: neither has this check), or a merge
 * strategy other than Git's own (Git runs `git merge-<strategy>`, which a
 * name with a '/' turns into a path)? Files too large to read are treated
 * as if they did. */
static bool sequencer_runs_something(int dfd)
{
    static const char *const strategies[] = { "ort", "recursive", "resolve", "octopus", "ours",
                                              "subtree" };
    static const char *const files[] = { "git-rebase-todo", "git-rebase-todo.backup", "todo",
                                         "done", "strategy", "opts" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(files); i++) {
        int fd = lz_open_confined(dfd, files[i], O_RDONLY | O_NONBLOCK, 0, files[i], NULL);
        struct stat st;
        if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (64 << 20))) {
            close(fd);
            return true;
        }
        FILE *f = fd >= 0 ? fdopen(fd, "re") : NULL;
        if (!f) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        bool is_strategy = strcmp(files[i], "strategy") == 0, is_opts = strcmp(files[i], "opts") == 0;
        bool found = false;
        char *line = NULL;
        size_t cap = 0;
        while (!found && getline(&line, &cap, f) >= 0) {
            char *c = line + strspn(line, " \t");
            if (is_strategy || is_opts) {
                /* `strategy`: Git takes the whole line. `opts` is a config
                 * file (keys in any case, values maybe quoted): any line
                 * naming a strategy must name exactly one of Git's own. */
                if (is_opts) {
                    /* anywhere on the line: `[options] strategy = x` is
                     * valid Git configuration too */
                    char *k = strcasestr(c, "strategy");
                    if (!k)
                        continue;
                    c = k + 8;
                    c += strspn(c, " \t");
                    if (*c != '=') {
                        found = true; /* not a plain key = value: refuse */
                        continue;
                    }
                    c++;
                    c += strspn(c, " \t");
                }
                size_t w = strlen(c);
                while (w && strchr(" \t\r\n", c[w - 1]))
                    w--;
                if (is_opts && w >= 2 && c[0] == '"' && c[w - 1] == '"') {
                    c++;
                    w -= 2;
                }
                bool known = false;
                for (size_t k = 0; !known && k < LZ_ARRAY_SIZE(strategies); k++)
                    known = w == strlen(strategies[k]) && strncmp(c, strategies[k], w) == 0;
                found = !known && (w > 0 || is_strategy);
            } else {
                size_t w = strcspn(c, " \t\r\n");
                found = (w == 1 && c[0] == 'x') || (w == 4 && strncmp(c, "exec", 4) == 0);
            }
        }
        free(line);
        fclose(f);
        if (found)
            return true;
    }
    return false;
}

/* The sequencer directories of the Git directory gdfd (= gd). */
static int audit_sequencer(walk *w, int gdfd, const char *gd)
{
    lz_git_plan *p = w->p;
    for (size_t k = 0; k < LZ_ARRAY_SIZE(sequencer_dirs); k++) {
        _cleanup_free_ char *rel = join_rel(gd, sequencer_dirs[k]);
        struct stat st;
        if (sight_lstat(p, gdfd, sequencer_dirs[k], &st) < 0)
            continue;
        bool ours = known(p->markers, p->n_markers, rel, &st);
        _cleanup_close_ int sfd = S_ISDIR(st.st_mode)
                                      ? lz_open_confined(gdfd, sequencer_dirs[k],
                                                         O_RDONLY | O_DIRECTORY, 0, rel, NULL)
                                      : -EBADF;
        if (sfd >= 0 && add_watch(w, sfd, rel, ROLE_SEQUENCER) < 0)
            return -1;
        if (sfd >= 0 && !sequencer_runs_something(sfd) && (ours || !p->final))
            continue;
        if (quarantine(w, gdfd, strcmp(gd, ".") ? gd : "", sequencer_dirs[k]) < 0)
            return -1;
    }
    return 0;
}

static bool has_ro_mount(const lz_git_plan *p, const char *rel)
{
    for (size_t i = 0; i < p->n_mounts; i++)
        if (p->mounts[i].readonly && strcmp(p->mounts[i].rel, rel) == 0)
            return true;
    return false;
}

static int walk_git_inner(walk *w, int dfd, const char *rel, int depth);

/* One entry of a Git directory's internals (dfd = rel). The host's Git
 * writes and reads these files by path and follows symlinks there (the
 * reflog is appended to, COMMIT_EDITMSG and FETCH_HEAD rewritten, MERGE_MSG
 * read): no symlink may be in a Git directory, and no repository either
 * (one built in .git/objects/… is reachable through a link). */
static int visit_inner_entry(walk *w, int dfd, const char *rel, const char *name, int depth)
{
    lz_git_plan *p = w->p;
    _cleanup_free_ char *child = join_rel(rel, name);
    if (has_ro_mount(p, child) || listed(p->git_dirs, p->n_git_dirs, child) ||
        (p->quarantine_rel && strcmp(child, p->quarantine_rel) == 0))
        return 0; /* read-only, or audited as a Git directory of its own */
    struct stat st;
    int sr = sight_lstat(p, dfd, name, &st);
    if (sr < 0) {
        if (errno == ENOENT)
            return 0;
        fail_at(w, child);
        return lz_error_set(w->err, errno, "Git Sentry: cannot audit %s", child);
    }
    if (S_ISLNK(st.st_mode) || strcmp(name, ".git") == 0)
        return quarantine(w, dfd, rel, name) < 0 ? -1 : 0;
    if (!S_ISDIR(st.st_mode))
        return 0;
    if (depth + 1 > MAX_TREE_DEPTH)
        return quarantine(w, dfd, rel, name) < 0 ? -1 : 0;
    if (st.st_uid == getuid() && (st.st_mode & S_IRWXU) != S_IRWXU)
        make_ours_writable(dfd, name);
    if (w->no_descend)
        return 0; /* judged as an entry now; walked in its turn */
    _cleanup_close_ int cfd = sight_open(p, dfd, name, O_RDONLY | O_DIRECTORY);
    if (cfd < 0) {
        int en = errno;
        if (en == ENOENT || en == EXDEV)
            return 0;
        fail_at(w, child);
        return lz_error_set(w->err, en, "Git Sentry: cannot audit the directory %s", child);
    }
    return walk_git_inner(w, cfd, child, depth + 1);
}

/* HEAD beside objects/, a commondir or a config, below a Git directory's top
 * level: a Git directory hidden in another (logs/ holds a HEAD beside refs/:
 * the reflog, not a repository). */
static int check_inner_bare(walk *w, int dfd, const char *rel)
{
    struct stat st;
    if (sight_lstat(w->p, dfd, "HEAD", &st) < 0)
        return 0;
    static const char *const companions[] = { "objects", "commondir", "config" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(companions); i++)
        if (sight_lstat(w->p, dfd, companions[i], &st) == 0)
            return quarantine(w, dfd, rel, "HEAD") < 0 ? -1 : 0;
    return 0;
}

static int walk_git_inner(walk *w, int dfd, const char *rel, int depth)
{
    if (add_watch(w, dfd, rel, depth ? ROLE_GITINNER : ROLE_GITDIR) < 0)
        return -1;
    if (w->watch && w->p->n_tree_dirs > MAX_TREE_DIRS) {
        fail_at(w, rel);
        return lz_error_set(w->err, 0, "Git Sentry: the workspace has more than %d directories "
                                       "to watch",
                            MAX_TREE_DIRS);
    }
    size_t n;
    char **names = list_names(dfd, &n);
    if (!names) {
        fail_at(w, rel);
        return lz_error_set(w->err, errno, "Git Sentry: cannot read %s", rel);
    }
    int r = 0;
    for (size_t i = 0; r == 0 && i < n; i++)
        r = visit_inner_entry(w, dfd, rel, names[i], depth);
    free_names(names, n);
    if (r == 0 && depth > 0)
        r = check_inner_bare(w, dfd, rel);
    return r;
}

/* The top level of every protected Git directory: nothing of
 * git_dir_entries may appear that is not a mount (protected at start); in a
 * modules/ directory no member may appear that was not there. */
static int audit_git_dirs(walk *w)
{
    lz_git_plan *p = w->p;
    for (size_t g = 0; g < p->n_git_dirs; g++) {
        const char *gd = p->git_dirs[g];
        lz_error *e = NULL;
        _cleanup_close_ int dfd = open_dir_confined(p->ws_fd, strcmp(gd, ".") ? gd : "",
                                                    O_RDONLY, &e);
        if (dfd < 0) {
            lz_error_free(e);
            continue; /* a nested Git directory that was quarantined or removed */
        }
        if (add_watch(w, dfd, strcmp(gd, ".") ? gd : "", ROLE_GITDIR) < 0)
            return -1;
        for (size_t k = 0; k < LZ_ARRAY_SIZE(git_dir_entries); k++) {
            _cleanup_free_ char *rel = join_rel(gd, git_dir_entries[k]);
            struct stat st;
            if (sight_lstat(p, dfd, git_dir_entries[k], &st) < 0 ||
                has_mount(p, rel))
                continue;
            if (quarantine(w, dfd, strcmp(gd, ".") ? gd : "", git_dir_entries[k]) < 0)
                return -1;
        }
        if (audit_sequencer(w, dfd, gd) < 0)
            return -1;
        /* Then everything inside it: no symlink, no repository. */
        if (walk_git_inner(w, dfd, strcmp(gd, ".") ? gd : "", 0) < 0)
            return -1;
        _cleanup_free_ char *mods = join_rel(gd, "modules");
        if (!has_mount(p, mods))
            continue;
        _cleanup_close_ int mfd = open_dir_confined(p->ws_fd, mods, O_RDONLY, NULL);
        if (mfd < 0)
            continue;
        if (add_watch(w, mfd, mods, ROLE_MODULES) < 0)
            return -1;
        size_t n;
        char **names = list_names(mfd, &n);
        int r = 0;
        for (size_t i = 0; r == 0 && names && i < n; i++) {
            _cleanup_free_ char *member = lz_xasprintf("%s/%s", mods, names[i]);
            struct stat st;
            if (sight_lstat(p, mfd, names[i], &st) == 0 &&
                !known(p->members, p->n_members, member, &st) &&
                quarantine(w, mfd, mods, names[i]) < 0)
                r = -1;
        }
        free_names(names, n);
        if (r < 0)
            return -1;
    }
    return 0;
}

static int finish(walk *w, int r, char **ret_report)
{
    if (r < 0) {
        free(w->report);
        return -1;
    }
    if (ret_report)
        *ret_report = w->report;
    else
        free(w->report);
    return w->moved;
}

static int full_audit(lz_git_plan *p, bool watch, char **ret_report, lz_error **err)
{
    walk w = { .p = p, .watch = watch, .err = err };
    /* (A .git the sandbox makes at the top of a workspace that is not a
     * repository is an entry of the tree like any other.) */
    _cleanup_close_ int top = open_dir_confined(p->ws_fd, "", O_RDONLY, err);
    int r = top < 0 ? -1 : walk_dir(&w, top, "", 0);
    /* The Git directories are audited even when the tree walk failed: a
     * fail-closed stop must not leave their state behind (the first error
     * is the one reported). */
    if (audit_git_dirs(&w) < 0)
        r = -1;
    return finish(&w, r, ret_report);
}

/* ---- plan -------------------------------------------------------------- */

static void put_rec(FILE *f, char tag, unsigned long long a, unsigned long long b, const char *rel);

/* Read one record written by put_rec: 1 with *ret_rel (free it), 0 at the
 * end, -1 when the record is damaged. */
static int read_rec(FILE *f, char *ret_tag, unsigned long long *ret_a, unsigned long long *ret_b,
                    char **ret_rel)
{
    size_t len;
    int k = fscanf(f, "%c %llu %llu %zu ", ret_tag, ret_a, ret_b, &len);
    if (k == EOF)
        return 0;
    if (k != 4 || len == 0 || len >= PATH_MAX)
        return -1;
    char *rel = lz_xcalloc(len + 1, 1);
    if (fread(rel, 1, len, f) != len || fgetc(f) != '\n' || strlen(rel) != len) {
        free(rel);
        return -1;
    }
    *ret_rel = rel;
    return 1;
}

/* Open the Domain Root's record `name` for reading: NULL (errno ENOENT)
 * when there is none. *ret_droot receives the Domain Root's descriptor. */
static FILE *open_record(const lz_resolved_config *cfg, const char *name, int *ret_droot,
                         lz_error **err)
{
    /* *ret_droot only on success (docs/errors.md): a failed open closes
     * what it opened. */
    _cleanup_close_ int droot =
        lz_plan_open(&cfg->storage_domain_root, O_PATH | O_DIRECTORY, true, err);
    if (droot < 0)
        return NULL;
    int fd = lz_open_confined(droot, name, O_RDONLY | O_NONBLOCK, 0, name, NULL);
    if (fd < 0) {
        errno = ENOENT;
        return NULL;
    }
    FILE *f = fdopen(fd, "re");
    if (!f) {
        lz_error_set(err, errno, "cannot read %s/%s", cfg->storage_domain_root.label, name);
        close(fd);
        return NULL;
    }
    *ret_droot = TAKE_FD(droot);
    return f;
}

/* Refuse while an entry that an earlier audit could not neutralise exists. */
static int check_unsafe(builder *b, lz_error **err)
{
    _cleanup_close_ int droot = -1;
    FILE *fp = open_record(b->cfg, UNSAFE_FILE, &droot, err);
    if (!fp)
        return err && *err ? -1 : 0;
    int r = 0;
    for (;;) {
        char tag;
        unsigned long long a, bb;
        _cleanup_free_ char *line = NULL;
        int k = read_rec(fp, &tag, &a, &bb, &line);
        if (k == 0)
            break;
        if (k < 0 || tag != 'U') {
            /* A damaged record refuses like an unsafe one: fail closed. */
            lz_error_set(err, 0, "the Git Sentry's record %s/%s is damaged",
                         b->cfg->storage_domain_root.label, UNSAFE_FILE);
            r = lz_error_hint(err, "check %s for repositories the sandbox made, then delete "
                                   "that file and run again",
                              b->ws);
            break;
        }
        struct stat st;
        bool whole = strcmp(line, ".") == 0 || !lz_path_is_normalized_rel(line);
        if (!whole && lstat_confined(b->ws_fd, line, &st) < 0 && errno == ENOENT)
            continue;
        lz_error_set(err, 0,
                     "Git Sentry: an earlier session of this Domain made %s%s%s, which Lazaret "
                     "could not neutralise, and the sandbox was stopped",
                     whole ? "changes in " : "", whole ? b->ws : line, whole ? "" : "");
        r = lz_error_hint(err,
                          "do not run git in %s until it is inspected: it may make the host's Git "
                          "run a command the sandbox chose. Remove %s%s%s, then run again%s%s/%s "
                          "(what belongs to one of the sandbox's users, which you cannot "
                          "remove, 'lazaret state fix-ownership' gives back to you first)",
                          b->ws, whole ? "" : b->ws, whole ? "what the sandbox made" : "/",
                          whole ? "" : line, whole ? "; then delete " : "",
                          whole ? b->cfg->storage_domain_root.label : "", whole ? UNSAFE_FILE : "");
        break;
    }
    fclose(fp);
    if (r == 0)
        unlinkat(droot, UNSAFE_FILE, 0);
    return r;
}

bool lz_git_sentry_unsafe_recorded(const lz_resolved_config *cfg)
{
    _cleanup_close_ int droot = -1;
    lz_error *e = NULL;
    FILE *fp = open_record(cfg, UNSAFE_FILE, &droot, &e);
    /* Unreadable counts as recorded (fail closed). */
    bool recorded = fp || e;
    lz_error_free(e);
    if (fp)
        fclose(fp);
    return recorded;
}

int lz_git_sentry_mark_unsafe(const lz_resolved_config *cfg, const char *what, lz_error **err)
{
    _cleanup_close_ int droot = lz_plan_open(&cfg->storage_domain_root, O_PATH | O_DIRECTORY,
                                             true, err);
    if (droot < 0)
        return -1;
    int fd = lz_open_confined(droot, UNSAFE_FILE, O_WRONLY | O_CREAT | O_APPEND, 0600,
                              UNSAFE_FILE, err);
    FILE *f = fd >= 0 ? fdopen(fd, "ae") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        return lz_error_set(err, errno, "cannot write %s/%s", cfg->storage_domain_root.label,
                            UNSAFE_FILE);
    }
    /* Length-prefixed: the path is the sandbox's choice (any byte but NUL). */
    put_rec(f, 'U', 0, 0, what && *what ? what : ".");
    bool ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
    if (fclose(f) != 0 || !ok)
        return lz_error_set(err, errno, "cannot write %s/%s", cfg->storage_domain_root.label,
                            UNSAFE_FILE);
    return 0;
}

/* The quarantine: a directory Git never reads, created before the sandbox
 * starts and hidden inside it by an empty read-only mount, so the sandbox
 * can neither see what was moved there nor put anything in its place. */
static int make_quarantine(builder *b, lz_error **err)
{
    lz_git_plan *p = b->p;
    p->quarantine_rel = lz_xstrdup(p->kind == LZ_GIT_REPO   ? ".git/" QUARANTINE_NAME
                                   : p->kind == LZ_GIT_BARE ? QUARANTINE_NAME
                                                            : "." QUARANTINE_NAME);
    const char *name;
    _cleanup_close_ int pfd = open_parent(b->ws_fd, p->quarantine_rel, &name, err);
    if (pfd < 0)
        return -1;
    bool created = mkdirat(pfd, name, 0700) == 0;
    struct stat st;
    if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != getuid()) {
        lz_error_set(err, 0, "the Git Sentry quarantine %s/%s is not a directory of yours", b->ws,
                     p->quarantine_rel);
        return lz_error_hint(err, "an earlier session may have planted it: inspect and remove "
                                  "%s/%s, then run again",
                             b->ws, p->quarantine_rel);
    }
    p->quarantine_fd = lz_open_confined(pfd, name, O_PATH | O_DIRECTORY, 0, p->quarantine_rel, err);
    if (p->quarantine_fd < 0)
        return -1;
    if (created && p->kind != LZ_GIT_REPO && p->kind != LZ_GIT_BARE) {
        /* Outside a Git directory: keep it out of `git status`. */
        _cleanup_close_ int dir = lz_open_confined(pfd, name, O_RDONLY | O_DIRECTORY, 0, name,
                                                   NULL);
        int gi = dir >= 0 ? openat(dir, ".gitignore", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
                                                          O_CLOEXEC, 0600)
                          : -1;
        if (gi >= 0) {
            if (write(gi, "*\n", 2) != 2) {
                /* best effort: only cosmetics in `git status` */
            }
            close(gi);
        }
    }
    add_mount(b, p->quarantine_rel, LZ_MOUNT_FROM_EMPTY, true, true);
    return 0;
}

/* Mounts in an order where every parent comes before what lies inside it
 * (stable: fewer path components first). */
static int cmp_depth(const void *a, const void *b)
{
    const lz_workspace_mount *x = a, *y = b;
    size_t dx = 0, dy = 0;
    for (const char *c = x->rel; *c; c++)
        dx += *c == '/';
    for (const char *c = y->rel; *c; c++)
        dy += *c == '/';
    if (dx != dy)
        return dx < dy ? -1 : 1;
    return x < y ? -1 : x > y;
}

static int recover_previous(builder *b, lz_error **err);

/* The work tree of the Git directory gd (relative, not the workspace's
 * own), relative to the workspace: "x" for x/.git, a submodule's from its
 * core.worktree as the host's Git resolves it; NULL for a bare one or one
 * whose work tree is not inside the workspace below gd's own. */
static char *nested_work_tree(builder *b, const char *gd)
{
    size_t len = strlen(gd);
    if (len > 5 && strcmp(gd + len - 5, "/.git") == 0)
        return lz_xstrndup(gd, len - 5);
    lz_spawn_output out = { 0 };
    char *const args[] = { (char *) "rev-parse", (char *) "--show-toplevel", NULL };
    if (host_git_in(b, gd, NULL, args, &out, NULL) != 0) {
        lz_spawn_output_free(&out);
        return NULL;
    }
    out.data[strcspn(out.data, "\n")] = '\0';
    char *rel = lexical_rel(b->ws, out.data);
    lz_spawn_output_free(&out);
    if (rel && (!*rel || !lz_path_is_normalized_rel(rel))) {
        free(rel);
        rel = NULL;
    }
    return rel;
}

int lz_git_sentry_plan(const lz_resolved_config *cfg, lz_git_plan *ret, lz_error **err)
{
    lz_git_plan p = LZ_GIT_PLAN_INIT;
    builder b = { .p = &p, .cfg = cfg, .ws = cfg->workspace.label, .ws_fd = -1 };
    ignored_run ign = { .droot = -1, .ign = -1 };
    bool isolating = false;
    int r = -1;
    p.ws_fd = lz_plan_open(&cfg->workspace, O_PATH | O_DIRECTORY, true, err);
    if (p.ws_fd < 0)
        return -1;
    b.ws_fd = p.ws_fd;
    p.cfg = cfg;
    if (check_unsafe(&b, err) < 0 || recover_previous(&b, err) < 0)
        goto out;
    struct stat st;
    if (fstatat(b.ws_fd, ".git", &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISDIR(st.st_mode)) {
            p.kind = LZ_GIT_REPO;
        } else if (S_ISREG(st.st_mode)) {
            p.kind = LZ_GIT_GITFILE;
        } else {
            lz_error_set(err, 0, "%s/.git is a symlink or special file", b.ws);
            lz_error_hint(err, "Lazaret cannot keep the sandbox from replacing a symlinked .git; "
                               "make .git a directory (or a gitdir file)");
            goto out;
        }
    } else if (fstatat(b.ws_fd, "HEAD", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
               fstatat(b.ws_fd, "config", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
               fstatat(b.ws_fd, "objects", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
        p.kind = LZ_GIT_BARE;
    }

    switch (p.kind) {
    case LZ_GIT_REPO: {
        _cleanup_free_ char *why = NULL;
        if (!valid_git_dir(b.ws_fd, ".git", &why)) {
            lz_error_set(err, 0, "%s/.git is not a valid Git directory: %s", b.ws, why);
            lz_error_hint(err, "the host's Git would look for another repository — possibly one "
                               "the sandbox made in the workspace; repair it (e.g. 'git "
                               "symbolic-ref HEAD refs/heads/main'), then run again");
            goto out;
        }
        if (protect_git_dir(&b, ".git", 0, err) < 0 || protect_config_sources(&b, ".git", "", err) < 0)
            goto out;
        lz_timing_mark("coordinator: Git Sentry: .git protected");
        if (cfg->isolate_gitignored) {
            isolating = true;
            if (isolate_begin(&b, cfg, &ign, err) < 0 || isolate_recorded(&b, &ign, err) < 0 ||
                isolate_listed(&b, &ign, ".git", "", true, err) < 0 ||
                isolate_finish(&b, cfg, &ign, err) < 0)
                goto out;
            lz_timing_mark("coordinator: Git Sentry: ignored paths listed");
        }
        break;
    }
    case LZ_GIT_GITFILE:
        /* The git dir lies outside the workspace (not visible inside); the
         * .git file itself must not be redirected by the sandbox. */
        add_mount(&b, ".git", LZ_MOUNT_FROM_WORKSPACE, true, false);
        /* A linked worktree or a --separate-git-dir checkout as the
         * workspace has ignored files like any other (attack round i12e,
         * W1: none were isolated): Git follows the protected `.git` file. */
        if (cfg->isolate_gitignored) {
            isolating = true;
            if (isolate_begin(&b, cfg, &ign, err) < 0 || isolate_recorded(&b, &ign, err) < 0 ||
                isolate_listed(&b, &ign, NULL, "", true, err) < 0 ||
                isolate_finish(&b, cfg, &ign, err) < 0)
                goto out;
        }
        break;
    case LZ_GIT_BARE:
        if (protect_git_dir(&b, ".", 0, err) < 0)
            goto out;
        break;
    case LZ_GIT_NONE:
    default:
        break;
    }
    if (make_quarantine(&b, err) < 0)
        goto out;
    /* Every other repository in the tree is the developer's: protect it
     * like the workspace's own. */
    {
        walk w = { .p = &p, .b = &b, .err = err };
        _cleanup_close_ int top = open_dir_confined(b.ws_fd, "", O_RDONLY, err);
        if (top < 0 || walk_dir(&w, top, "", 0) < 0) {
            free(w.report);
            goto out;
        }
        lz_timing_mark("coordinator: Git Sentry: work tree walked");
        if (w.report) { /* what an earlier generation left, set aside now */
            char *all = lz_xasprintf("%s%s%s", p.start_report ? p.start_report : "",
                                     p.start_report ? "; " : "", w.report);
            free(p.start_report);
            free(w.report);
            p.start_report = all;
        }
    }
    /* The configuration of every other repository found (nested ones,
     * submodule git dirs, bare fixtures) may include files or name a hooks
     * directory inside the workspace too. */
    for (size_t g = 0, n = p.n_git_dirs; g < n; g++) {
        const char *gd = p.git_dirs[g];
        if (strcmp(gd, ".git") == 0 && p.kind == LZ_GIT_REPO)
            continue; /* done above */
        size_t len = strlen(gd);
        _cleanup_free_ char *wt = NULL;
        if (len > 5 && strcmp(gd + len - 5, "/.git") == 0)
            wt = lz_xstrndup(gd, len - 5);
        if (protect_config_sources(&b, gd, wt, err) < 0)
            goto out;
    }
    /* The ignored files of every other work tree found (nested repositories,
     * submodule checkouts): the top's Git does not list what lies in a
     * repository of its own (attack round i12c, N1: nested/.env and a
     * submodule's lib/.env were the host's). After the walk, which found
     * them, and after their configuration's protections, which win. */
    if (isolating) {
        for (size_t g = 0, n = p.n_git_dirs; g < n; g++) {
            const char *gd = p.git_dirs[g];
            if (strcmp(gd, ".git") == 0 || strcmp(gd, ".") == 0)
                continue;
            _cleanup_free_ char *wt = nested_work_tree(&b, gd);
            if (wt && isolate_listed(&b, &ign, gd, wt, false, err) < 0)
                goto out;
        }
        /* Work trees behind a `.git` file (round i12d, G1: a linked
         * worktree inside the workspace, a --separate-git-dir repository). */
        for (size_t t = 0; t < b.n_gitfile_trees; t++)
            if (isolate_listed(&b, &ign, NULL, b.gitfile_trees[t], false, err) < 0)
                goto out;
        if (isolate_finish(&b, cfg, &ign, err) < 0)
            goto out;
    }
    if (p.n_mounts > 1)
        qsort(p.mounts, p.n_mounts, sizeof(lz_workspace_mount), cmp_depth);
    index_mounts(&p);
    *ret = p;
    p = (lz_git_plan) LZ_GIT_PLAN_INIT;
    r = 0;
out:
    for (size_t t = 0; t < b.n_gitfile_trees; t++)
        free(b.gitfile_trees[t]);
    free(b.gitfile_trees);
    ignored_run_clear(&ign);
    lz_git_plan_clear(&p);
    return r;
}

/* ---- the baseline, for a generation that ends without its last audit -- */

/* One record a line: a tag, numbers, then a length-prefixed path (names
 * may hold any byte but '/' and NUL). */
static void put_rec(FILE *f, char tag, unsigned long long a, unsigned long long b, const char *rel)
{
    fprintf(f, "%c %llu %llu %zu ", tag, a, b, strlen(rel));
    fwrite(rel, 1, strlen(rel), f);
    fputc('\n', f);
}

static int save_baseline(lz_git_plan *p, lz_error **err)
{
    _cleanup_close_ int droot = lz_plan_open(&p->cfg->storage_domain_root, O_PATH | O_DIRECTORY,
                                             true, err);
    if (droot < 0)
        return -1;
    unlinkat(droot, BASELINE_TMP, 0);
    int fd = lz_open_confined(droot, BASELINE_TMP, O_WRONLY | O_CREAT | O_EXCL, 0600,
                              BASELINE_TMP, err);
    FILE *f = fd >= 0 ? fdopen(fd, "we") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        return lz_error_set(err, errno, "cannot record the Git Sentry baseline in %s",
                            p->cfg->storage_domain_root.label);
    }
    put_rec(f, 'K', (unsigned) p->kind, 0, p->quarantine_rel);
    for (size_t i = 0; i < p->n_mounts; i++)
        put_rec(f, 'T', 0, 0, p->mounts[i].rel);
    for (size_t i = 0; i < p->n_git_dirs; i++)
        put_rec(f, 'G', 0, 0, p->git_dirs[i]);
    for (size_t i = 0; i < p->n_markers; i++)
        put_rec(f, 'M', (unsigned long long) p->markers[i].dev,
                (unsigned long long) p->markers[i].ino, p->markers[i].rel);
    for (size_t i = 0; i < p->n_members; i++)
        put_rec(f, 'N', (unsigned long long) p->members[i].dev,
                (unsigned long long) p->members[i].ino, p->members[i].rel);
    for (size_t i = 0; i < p->n_ignored; i++)
        put_rec(f, 'I', 0, 0, p->ignored[i]);
    bool ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || renameat(droot, BASELINE_TMP, droot, BASELINE_FILE) < 0)
        return lz_error_set(err, errno, "cannot record the Git Sentry baseline in %s",
                            p->cfg->storage_domain_root.label);
    return 0;
}

void lz_git_sentry_done(lz_git_plan *p)
{
    if (!p->cfg)
        return;
    int droot = lz_plan_open(&p->cfg->storage_domain_root, O_PATH | O_DIRECTORY, true, NULL);
    if (droot >= 0) {
        unlinkat(droot, BASELINE_FILE, 0);
        close(droot);
    }
}

static int load_baseline(FILE *f, lz_git_plan *t)
{
    for (size_t n = 0; n < 4 * MAX_TREE_DIRS; n++) {
        char tag;
        unsigned long long a, b;
        char *rel = NULL;
        int k = read_rec(f, &tag, &a, &b, &rel);
        if (k <= 0)
            return k;
        struct stat st = { .st_dev = (dev_t) a, .st_ino = (ino_t) b };
        switch (tag) {
        case 'K':
            t->kind = (lz_git_kind) a;
            free(t->quarantine_rel);
            t->quarantine_rel = rel;
            continue;
        case 'T':
            t->mounts = lz_xrealloc(t->mounts, t->n_mounts + 1, sizeof(*t->mounts));
            t->mounts[t->n_mounts++] = (lz_workspace_mount) { rel, LZ_MOUNT_FROM_WORKSPACE,
                                                              true, true };
            continue;
        case 'G':
            t->git_dirs = lz_xrealloc(t->git_dirs, t->n_git_dirs + 1, sizeof(char *));
            t->git_dirs[t->n_git_dirs++] = rel;
            continue;
        case 'I':
            t->ignored = lz_xrealloc(t->ignored, t->n_ignored + 1, sizeof(char *));
            t->ignored[t->n_ignored++] = rel;
            continue;
        case 'M':
            add_marker(&t->markers, &t->n_markers, rel, &st);
            break;
        case 'N':
            add_marker(&t->members, &t->n_members, rel, &st);
            break;
        default:
            free(rel);
            return -1;
        }
        free(rel);
    }
    return -1;
}

/* The previous generation ended without its last audit (its coordinator was
 * killed): audit the workspace against that generation's baseline before
 * anything else. */
static int recover_previous(builder *b, lz_error **err)
{
    _cleanup_close_ int droot = -1;
    FILE *f = open_record(b->cfg, BASELINE_FILE, &droot, err);
    if (!f)
        return err && *err ? -1 : 0;
    lz_git_plan t = LZ_GIT_PLAN_INIT;
    int r = load_baseline(f, &t);
    fclose(f);
    index_mounts(&t);
    if (r == 0 && t.n_ignored > 1)
        qsort(t.ignored, t.n_ignored, sizeof(char *), cmp_str);
    if (r == 0 && t.quarantine_rel && lz_path_is_normalized_rel(t.quarantine_rel)) {
        t.ws_fd = fcntl(b->ws_fd, F_DUPFD_CLOEXEC, 3);
        t.cfg = b->cfg;
        t.final = true; /* that generation's sandbox is gone */
        t.quarantine_fd = lz_open_confined(b->ws_fd, t.quarantine_rel, O_PATH | O_DIRECTORY, 0,
                                           t.quarantine_rel, err);
        r = t.quarantine_fd < 0 ? -1 : full_audit(&t, false, &b->p->start_report, err);
    } else if (r == 0) {
        r = -1;
    }
    if (r < 0 && !(err && *err))
        lz_error_set(err, 0, "the Git Sentry baseline %s/%s is damaged",
                     b->cfg->storage_domain_root.label, BASELINE_FILE);
    if (r < 0) {
        lz_error_prefix(err, "the previous generation of this Domain ended without its last Git "
                             "Sentry audit, and the audit now failed");
        lz_error_hint(err, "do not run git in %s until you have checked it for repositories the "
                           "sandbox made; then delete %s/%s and run again",
                      b->ws, b->cfg->storage_domain_root.label, BASELINE_FILE);
    } else {
        unlinkat(droot, BASELINE_FILE, 0);
    }
    lz_git_plan_clear(&t);
    return r < 0 ? -1 : 0;
}

/* ---- audit ------------------------------------------------------------- */

int lz_git_sentry_watch(lz_git_plan *p, char **ret_report, lz_error **err)
{
    if (p->inotify_fd < 0) {
        p->inotify_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        if (p->inotify_fd < 0) {
            lz_error_set(err, errno, "Git Sentry: cannot watch the workspace (inotify)");
            return lz_error_hint(err, "raise fs.inotify.max_user_instances (sudo sysctl "
                                      "fs.inotify.max_user_instances=1024)");
        }
    }
    int n = full_audit(p, true, ret_report, err);
    if (n >= 0 && p->cfg && save_baseline(p, err) < 0)
        return -1;
    return n;
}

/* ---- the event audit ---------------------------------------------------- */

/* One round takes at most this much of the event queue (the kernel's queue
 * holds fs.inotify.max_queued_events, 16,384 by default, each at most
 * sizeof(struct inotify_event) + NAME_MAX + 1 bytes); the rest waits for
 * the next round. */
#define EVENT_ROUND_MAX ((size_t) 8 << 20)
/* Rounds with the sandbox frozen in which an event still could not be
 * placed before the whole tree is walked instead. */
#define FROZEN_RETRY_ROUNDS 2

typedef struct ev_rec {
    int wd;
    uint32_t mask, cookie;
    char *name;          /* "" when the event has none */
    bool known_move;     /* a followed rename of a watched subtree: checked, not walked */
    bool done;           /* handled in the round's first pass */
    bool moves_applied;  /* follow_moves saw it already (read by peek_urgent) */
} ev_rec;

typedef struct ev_list {
    ev_rec *v;
    size_t n, cap;
} ev_list;

static void ev_add(ev_list *l, int wd, uint32_t mask, uint32_t cookie, const char *name)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = lz_xrealloc(l->v, l->cap, sizeof(ev_rec));
    }
    l->v[l->n++] = (ev_rec) { .wd = wd, .mask = mask, .cookie = cookie,
                              .name = lz_xstrdup(name) };
}

/* Append a copy of e (its flags too). */
static void ev_copy(ev_list *l, const ev_rec *e)
{
    ev_add(l, e->wd, e->mask, e->cookie, e->name);
    l->v[l->n - 1].known_move = e->known_move;
    l->v[l->n - 1].moves_applied = e->moves_applied;
}

static void ev_clear(ev_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].name);
    l->n = 0;
}

/* Read what the queue holds now. Returns how many events were read. */
static size_t ev_read(lz_git_plan *p, ev_list *out, bool *overflow)
{
    _Alignas(struct inotify_event) char buf[16384];
    size_t bytes = 0, before = out->n;
    for (;;) {
        ssize_t n = read(p->inotify_fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (char *ptr = buf; ptr < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *) ptr;
            ptr += sizeof(*ev) + ev->len;
            if (ev->mask & IN_Q_OVERFLOW)
                *overflow = true;
            else
                ev_add(out, ev->wd, ev->mask, ev->cookie, ev->len ? ev->name : "");
        }
        bytes += (size_t) n;
        if (bytes >= EVENT_ROUND_MAX)
            break;
    }
    return out->n - before;
}

/* Is watch dw at or below the watch `top` (by its chain of parents)? */
static bool watch_below(lz_git_plan *p, const lz_git_dirwatch *dw, int top)
{
    for (size_t n = 0; dw && n <= MAX_TREE_DEPTH * 2 + 2; n++) {
        if (dw->wd == top)
            return true;
        dw = dw->parent_wd < 0 ? NULL : watch_by_wd(p, dw->parent_wd);
    }
    return false;
}

/* A watched directory left the tree (into the quarantine, or a place the
 * audit does not watch): its watch, and those below, go. */
static void unwatch_below(lz_git_plan *p, int top)
{
    int *gone = NULL;
    size_t n = 0;
    for (size_t i = 0; i < p->n_watches; i++)
        if (watch_below(p, &p->watches[i], top)) {
            gone = lz_xrealloc(gone, n + 1, sizeof(int));
            gone[n++] = p->watches[i].wd;
        }
    /* The deepest first, so that each one's chain is whole when dropped. */
    for (size_t k = n; k-- > 0;) {
        lz_git_dirwatch *dw = watch_by_wd(p, gone[k]);
        if (!dw)
            continue;
        inotify_rm_watch(p->inotify_fd, dw->wd);
        drop_watch(p, (size_t) (dw - p->watches));
    }
    free(gone);
}

/* Follow the directory renames among the events from `start` on, in order:
 * a rename inside the watched tree re-parents one watch (the tree below it
 * follows, whatever its size), so that every event can be placed by its
 * directory's path now. What was watched before the rename was audited (or
 * its events are among these), so the subtree is not walked again unless
 * it changed role; a directory renamed in from outside the watches is new
 * and walked. */
/* The MOVED_FROM halves of directory renames whose MOVED_TO has not been
 * read yet: the kernel queues both halves in the same rename, but a read
 * can fall between them. Kept across the rounds of one event audit; what
 * is still unmatched when the queue is empty left the watched tree. */
typedef struct move_pending {
    uint32_t cookie;
    int wd; /* the moved directory's watch, -1: not watched */
    bool matched;
} move_pending;

typedef struct move_list {
    move_pending *v;
    size_t n;
} move_list;

static void follow_moves(lz_git_plan *p, ev_list *l, size_t start, move_list *pend)
{
    for (size_t i = start; i < l->n; i++) {
        ev_rec *e = &l->v[i];
        if (e->moves_applied || !(e->mask & IN_ISDIR) || !e->name[0])
            continue;
        e->moves_applied = true;
        lz_git_dirwatch *parent = watch_by_wd(p, e->wd);
        if (!parent)
            continue;
        if (e->mask & IN_MOVED_FROM) {
            pend->v = lz_xrealloc(pend->v, pend->n + 1, sizeof(*pend->v));
            pend->v[pend->n++] = (move_pending) { .cookie = e->cookie,
                                                  .wd = child_get(p, parent->wd, e->name) };
            continue;
        }
        if (!(e->mask & IN_MOVED_TO))
            continue;
        for (size_t k = pend->n; k-- > 0;) {
            if (pend->v[k].matched || pend->v[k].cookie != e->cookie)
                continue;
            pend->v[k].matched = true;
            lz_git_dirwatch *moved = pend->v[k].wd > 0 ? watch_by_wd(p, pend->v[k].wd) : NULL;
            if (!moved || watch_below(p, parent, moved->wd))
                break; /* not watched (walked as new), or a loop (cannot be) */
            child_del(p, moved->wd);
            free(moved->name);
            moved->name = lz_xstrdup(e->name);
            moved->parent_wd = parent->wd;
            child_put(p, moved->wd);
            e->known_move = (moved->kind & ROLE_TREE) && !(moved->kind & ~ROLE_TREE) &&
                            (parent->kind & ROLE_TREE);
            if (e->known_move)
                p->moves_followed++;
            break;
        }
    }
    /* Matched halves are done with. */
    size_t k = 0;
    for (size_t i = 0; i < pend->n; i++)
        if (!pend->v[i].matched)
            pend->v[k++] = pend->v[i];
    pend->n = k;
}

/* The queue is empty: renames still half-seen took their directory out of
 * the watched tree (into the quarantine, say). */
static void moves_left_the_tree(lz_git_plan *p, move_list *pend)
{
    for (size_t i = 0; i < pend->n; i++)
        if (!pend->v[i].matched && pend->v[i].wd > 0)
            unwatch_below(p, pend->v[i].wd);
    free(pend->v);
    *pend = (move_list) { 0 };
}

/* Open the tree directory rel, confined; where the developer's own
 * directories on the way were shut (mode 000, say: the sandbox may take
 * permissions away from what it made), give them back u+rwx first. */
static int open_dir_healing(lz_git_plan *p, const char *rel)
{
    lz_error *e = NULL;
    int fd = open_dir_confined(p->ws_fd, rel, O_RDONLY, &e);
    int en = fd < 0 ? (e ? e->errnum : errno) : 0;
    lz_error_free(e);
    if (fd >= 0 || en != EACCES)
        return fd;
    int cur = open_dir_confined(p->ws_fd, "", O_RDONLY, NULL);
    if (cur >= 0)
        make_ours_writable(cur, NULL);
    _cleanup_free_ char *copy = lz_xstrdup(rel);
    for (char *save = NULL, *part = strtok_r(copy, "/", &save); part && cur >= 0;
         part = strtok_r(NULL, "/", &save)) {
        make_ours_writable(cur, part);
        int next = lz_open_confined(cur, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, part,
                                    NULL);
        close(cur);
        cur = next;
    }
    if (cur >= 0 || !refused(errno))
        return cur;
    /* A directory on the way belongs to another sandbox user, closed. */
    return sight_open(p, p->ws_fd, rel[0] ? rel : ".", O_RDONLY | O_DIRECTORY);
}

/* Does the event name something Git may obey (a name of git_dir_entries
 * or bare_entries, `.git`), or happen in a Git directory? */
static bool urgent_event(lz_git_plan *p, const ev_rec *ev)
{
    if (!ev->name[0] || (ev->mask & (IN_IGNORED | IN_MOVED_FROM)))
        return false;
    if (strcmp(ev->name, ".git") == 0)
        return true;
    for (size_t k = 0; k < LZ_ARRAY_SIZE(bare_entries); k++)
        if (strcmp(ev->name, bare_entries[k]) == 0)
            return true;
    for (size_t k = 0; k < LZ_ARRAY_SIZE(git_dir_entries); k++)
        if (strcmp(ev->name, git_dir_entries[k]) == 0)
            return true;
    const lz_git_dirwatch *dw = watch_by_wd(p, ev->wd);
    return dw && (dw->kind & (ROLE_GITDIR | ROLE_MODULES));
}

typedef struct round_flags {
    bool need_full;    /* walk the whole tree (with the sandbox frozen) */
    bool need_gitdirs; /* audit the Git directories again (a sequencer changed) */
} round_flags;

/* One event. An event whose directory is not where its watch says (a
 * rename not read yet) goes to `retry`. */
static int handle_event(walk *w, const ev_rec *ev, round_flags *f, ev_list *retry)
{
    lz_git_plan *p = w->p;
    lz_git_dirwatch *dw = watch_by_wd(p, ev->wd);
    if (!dw)
        return 0;
    if (ev->mask & IN_IGNORED) {
        drop_watch(p, (size_t) (dw - p->watches));
        return 0;
    }
    /* A watched directory moved or went away: its parent's events (or
     * IN_IGNORED) say where; renames were followed already. */
    if (ev->mask & (IN_MOVE_SELF | IN_DELETE_SELF | IN_MOVED_FROM))
        return 0;
    bool own_attrib = (ev->mask & IN_ATTRIB) && !ev->name[0];
    if (!own_attrib) {
        if ((ev->mask & IN_ATTRIB) && !(ev->mask & IN_ISDIR))
            return 0; /* a file's mode: nothing Git discovers by */
        if (!(ev->mask & (IN_CREATE | IN_MOVED_TO | IN_ATTRIB | IN_CLOSE_WRITE | IN_MODIFY)) ||
            !ev->name[0])
            return 0;
    }
    /* Reach the directory by its path, confined, and require the same
     * inode: otherwise a rename we have not read yet moved it. */
    _cleanup_free_ char *dir_rel = watch_rel(p, dw);
    _cleanup_close_ int dfd = dir_rel ? open_dir_healing(p, dir_rel) : -1;
    struct stat st;
    if (dfd < 0 || fstat(dfd, &st) < 0 || st.st_ino != dw->ino || st.st_dev != dw->dev) {
        ev_add(retry, ev->wd, ev->mask, ev->cookie, ev->name);
        return 0;
    }
    /* A copy: visiting may add watches (and move the array). */
    unsigned kind = dw->kind;
    dw = NULL;
    int depth = dir_rel[0] ? (int) path_depth(dir_rel) + 1 : 0;
    if (own_attrib) {
        /* The directory's own mode changed. It is under watch, so every
         * event in it was queued whatever its mode: what is needed is that
         * the developer can look in (ours: given back u+rwx; another
         * sandbox user's was watched and audited through the eye while it
         * was closed, so opening it reveals nothing unseen). Git
         * directories' internals are audited again. */
        if (st.st_uid == getuid() && (st.st_mode & S_IRWXU) != S_IRWXU)
            make_ours_writable(dfd, NULL);
        if (kind & (ROLE_GITDIR | ROLE_GITINNER))
            f->need_gitdirs = true;
        return 0;
    }
    int r = 0;
    if (kind & ROLE_TREE) {
        _cleanup_free_ char *moved = ev->known_move ? join_rel(dir_rel, ev->name) : NULL;
        w->known_subtree = moved;
        r = visit_entry(w, dfd, dir_rel, ev->name, depth);
        w->known_subtree = NULL;
        for (size_t k = 0; r == 0 && k < LZ_ARRAY_SIZE(bare_entries); k++)
            if (strcmp(ev->name, bare_entries[k]) == 0)
                r = check_bare(w, dfd, dir_rel);
    }
    if (r == 0 && (kind & (ROLE_GITDIR | ROLE_GITINNER))) {
        r = visit_inner_entry(w, dfd, dir_rel, ev->name, depth);
        if (r == 0 && (kind & ROLE_GITINNER) && !(kind & ROLE_GITDIR))
            r = check_inner_bare(w, dfd, dir_rel);
    }
    if (r == 0 && (kind & ROLE_GITDIR)) {
        for (size_t k = 0; r == 0 && k < LZ_ARRAY_SIZE(git_dir_entries); k++) {
            if (strcmp(ev->name, git_dir_entries[k]) != 0)
                continue;
            _cleanup_free_ char *rel = join_rel(dir_rel, ev->name);
            if (!has_mount(p, rel) && sight_lstat(p, dfd, ev->name, &st) == 0)
                r = quarantine(w, dfd, dir_rel, ev->name) < 0 ? -1 : 0;
        }
    }
    for (size_t k = 0; (kind & ROLE_GITDIR) && k < LZ_ARRAY_SIZE(sequencer_dirs); k++)
        if (strcmp(ev->name, sequencer_dirs[k]) == 0)
            f->need_gitdirs = true; /* a rebase began: watch its todo list */
    if (kind & ROLE_SEQUENCER)
        f->need_gitdirs = true; /* its todo list changed */
    if (r == 0 && (kind & ROLE_MODULES)) {
        _cleanup_free_ char *member = join_rel(dir_rel, ev->name);
        if (sight_lstat(p, dfd, ev->name, &st) == 0 &&
            !known(p->members, p->n_members, member, &st))
            r = quarantine(w, dfd, dir_rel, ev->name) < 0 ? -1 : 0;
    }
    return r;
}

/* In the middle of a walk in event mode: read what has come since, follow
 * its renames, and judge at once what names a Git object — as an entry,
 * never walking (no_descend) — so that a long walk (a directory tree that
 * was shut and opens, one renamed in from outside the watches) never makes
 * a `.git` wait for it. Everything read stays queued in w->peeked and is
 * handled again, in order, after the walk. */
static int peek_urgent(walk *w)
{
    lz_git_plan *p = w->p;
    w->since_peek = 0;
    ev_list *l = w->peeked;
    size_t start = l->n;
    ev_read(p, l, &w->peek_overflow);
    follow_moves(p, l, start, w->moves);
    w->in_peek = true;
    w->no_descend = true;
    const char *known = w->known_subtree;
    w->known_subtree = NULL;
    ev_list ignored = { 0 };
    round_flags f = { 0 };
    int r = 0;
    for (size_t i = start; r == 0 && i < l->n; i++)
        if (urgent_event(p, &l->v[i]))
            r = handle_event(w, &l->v[i], &f, &ignored);
    ev_clear(&ignored);
    free(ignored.v);
    w->known_subtree = known;
    w->no_descend = false;
    w->in_peek = false;
    return r;
}

/* Handle the pending inotify events, in rounds: read what is queued,
 * follow the renames among it, then place and judge every event. An event
 * that cannot be placed (the sandbox renamed its directory again after the
 * read) is retried after the next read; until it is placed, the sandbox is
 * frozen (freezer.h), so the next read holds every rename there will be.
 * Only an event-queue overflow, or an event still unplaceable with the
 * sandbox frozen, costs a walk of the whole tree — frozen too. */
static int event_audit(lz_git_plan *p, char **ret_report, lz_error **err)
{
    ev_list batch = { 0 }, retry = { 0 }, again = { 0 }, peeked = { 0 };
    move_list moves = { 0 };
    walk w = { .p = p, .watch = true, .err = err, .events = true, .peeked = &peeked,
               .moves = &moves };
    bool frozen = false, overflow = false, want_full = false;
    bool can_freeze = lz_freezer_armed(p->freezer);
    int stuck_rounds = 0, rounds = 0, r = 0;
    for (;;) {
        /* Without a freeze the sandbox may keep the queue full forever:
         * give the loop back (the descriptor stays readable, and the
         * watchdog freezes the sandbox if this goes on). */
        if (!frozen && ++rounds > 64)
            break;
        ev_clear(&batch);
        /* What a walk of the last round read meanwhile comes first: it is
         * older than what the queue holds now. */
        for (size_t i = 0; i < peeked.n; i++)
            ev_copy(&batch, &peeked.v[i]);
        size_t n = peeked.n;
        ev_clear(&peeked);
        overflow = overflow || w.peek_overflow;
        w.peek_overflow = false;
        n += ev_read(p, &batch, &overflow);
        follow_moves(p, &batch, 0, &moves);
        round_flags f = { .need_full = overflow || want_full };
        ev_clear(&again);
        /* First what names a Git object (a `.git`, a HEAD, a config...):
         * behind a flood of new directories, each walked, it would wait
         * for all of them (docs/git.md "An audit the sandbox cannot
         * outpace"). Then everything, in order. */
        for (int pass = 0; pass < 2; pass++) {
            ev_list *lists[2] = { &retry, &batch };
            for (int li = 0; li < 2; li++)
                for (size_t i = 0; r == 0 && !f.need_full && i < lists[li]->n; i++) {
                    ev_rec *ev = &lists[li]->v[i];
                    if (ev->done || (pass == 0 && !urgent_event(p, ev)))
                        continue;
                    ev->done = true;
                    r = handle_event(&w, ev, &f, &again);
                }
        }
        ev_list t = retry;
        retry = again;
        again = t;
        if (r < 0)
            break;
        if (!f.need_full && retry.n > 0 && (frozen || !can_freeze) &&
            ++stuck_rounds > FROZEN_RETRY_ROUNDS)
            f.need_full = true;
        want_full = f.need_full;
        if ((f.need_full || retry.n > 0) && !frozen && can_freeze) {
            /* Stop the sandbox, then read once more: everything it did is
             * in the queue now. */
            lz_freezer_hold(p->freezer);
            frozen = true;
            continue;
        }
        if (f.need_full) {
            want_full = false;
            /* Whatever is still queued happened before the freeze (or
             * there is no freezer): the walk covers it. */
            ev_clear(&batch);
            ev_clear(&peeked);
            free(moves.v);
            moves = (move_list) { 0 };
            overflow = false;
            while (ev_read(p, &batch, &overflow) > 0)
                ev_clear(&batch);
            ev_clear(&retry);
            char *more = NULL;
            /* (Our own renames into the quarantine are moves too.) */
            int m = full_audit(p, true, &more, err);
            p->full_walks++;
            if (m < 0) {
                r = -1;
                break;
            }
            if (more)
                report_append(&w, more);
            free(more);
            w.moved += m;
            overflow = false;
            continue; /* the walk's own quarantine moves are events too */
        }
        if (f.need_gitdirs && (r = audit_git_dirs(&w)) < 0)
            break;
        if (n == 0 && retry.n == 0)
            break;
    }
    moves_left_the_tree(p, &moves);
    ev_clear(&batch);
    ev_clear(&retry);
    ev_clear(&again);
    ev_clear(&peeked);
    free(batch.v);
    free(retry.v);
    free(again.v);
    free(peeked.v);
    if (frozen)
        lz_freezer_release(p->freezer);
    return finish(&w, r, ret_report);
}

int lz_git_sentry_audit(lz_git_plan *p, bool full, char **ret_report, lz_error **err)
{
    if (ret_report)
        *ret_report = NULL;
    if (p->ws_fd < 0 || p->quarantine_fd < 0)
        return 0;
    if (full || p->inotify_fd < 0)
        return full_audit(p, p->inotify_fd >= 0, ret_report, err);
    return event_audit(p, ret_report, err);
}

const char *lz_git_sentry_ignored_notice(const lz_git_plan *plan)
{
    return plan->ignored_notice;
}

void lz_git_plan_clear(lz_git_plan *plan)
{
    for (size_t i = 0; i < plan->n_mounts; i++)
        free(plan->mounts[i].rel);
    free(plan->mounts);
    free(plan->mount_index);
    free(plan->ignored_notice);
    for (size_t i = 0; i < plan->n_ignored; i++)
        free(plan->ignored[i]);
    free(plan->ignored);
    free(plan->ignored_dir);
    free(plan->ignored_ids);
    for (size_t i = 0; i < plan->n_markers; i++)
        free(plan->markers[i].rel);
    free(plan->markers);
    for (size_t i = 0; i < plan->n_members; i++)
        free(plan->members[i].rel);
    free(plan->members);
    for (size_t i = 0; i < plan->n_git_dirs; i++)
        free(plan->git_dirs[i]);
    free(plan->git_dirs);
    for (size_t i = 0; i < plan->n_watches; i++)
        free(plan->watches[i].name);
    free(plan->watches);
    free(plan->wd_slots);
    free(plan->child_slots);
    free(plan->quarantine_rel);
    free(plan->failed_rel);
    free(plan->start_report);
    if (plan->ws_fd >= 0)
        close(plan->ws_fd);
    if (plan->quarantine_fd >= 0)
        close(plan->quarantine_fd);
    if (plan->inotify_fd >= 0)
        close(plan->inotify_fd);
    lz_sentry_eye_stop(plan->eye);
    free(plan->eye_error);
    *plan = (lz_git_plan) LZ_GIT_PLAN_INIT;
}
