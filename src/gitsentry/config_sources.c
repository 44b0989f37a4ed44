/* SPDX-License-Identifier: Apache-2.0
 *
 * Git Sentry: where the host's Git takes its configuration from: the host's Git asked
 * (config --show-origin) about each Git directory, and about the
 * repositories enclosing the workspace, and what it names inside the
 * workspace — included files, core.hooksPath, programs — protected
 * read-only.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "fs/confined.h"
#include "fs/relpath.h"
#include "gitsentry/internal.h"

/* At most this many variables of the developer's environment that choose
 * Git's configuration are passed on (GIT_CONFIG_COUNT pairs included). */
#define LZ_GIT_ENV_CONFIG_MAX 128

/* What the host's Git is given on its command line by spawn_host_git (no
 * fsmonitor, no hooks, no untracked cache), and each as `git config
 * --list -z` prints it back (key lowercased, then a newline), so that
 * is_own_setting can tell it from the developer's configuration. */
static const struct {
    const char *arg, *listed;
} own_settings[] = {
    { "core.fsmonitor=false", "core.fsmonitor\nfalse" },
    { "core.hooksPath=/dev/null", "core.hookspath\n/dev/null" },
    { "core.untrackedCache=false", "core.untrackedcache\nfalse" },
};

/* The host's Git run with args, the extra environment `extra` (n_extra
 * entries, NULL ones skipped) and the working directory cwd_fd. merge:
 * its standard error into the capture too (to tell why it failed). */
static int spawn_host_git(builder *b, char *const *extra, size_t n_extra, int cwd_fd, bool merge,
                          char *const *args, lz_spawn_output *out, lz_error **err)
{
    static char *git = NULL;
    if (!git && lz_spawn_find_program("git", LZ_SPAWN_SYSTEM_PATH, &git, err) < 0)
        return lz_error_hint(err, "install git on the host (sudo apt-get install git), or set "
                                  "isolate_gitignored = false");
    size_t n = 0;
    while (args[n])
        n++;
    /* The host's Git must not be influenced by anything the sandbox wrote:
     * no fsmonitor, no hooks, and no repository discovery: GIT_DIR and
     * GIT_WORK_TREE name the Git directory that was validated, so a
     * repository the sandbox made elsewhere is never used. */
    char **argv = lz_xcalloc(n + 2 + 2 * LZ_ARRAY_SIZE(own_settings), sizeof(char *));
    size_t k = 0;
    argv[k++] = (char *) "git";
    for (size_t i = 0; i < LZ_ARRAY_SIZE(own_settings); i++) {
        argv[k++] = (char *) "-c";
        argv[k++] = (char *) own_settings[i].arg;
    }
    for (size_t i = 0; i < n; i++)
        argv[k++] = args[i];
    argv[k] = NULL;
    /* But it must read the developer's whole configuration, as their own
     * Git does: the system file, the global one wherever the environment
     * puts it (XDG_CONFIG_HOME, GIT_CONFIG_GLOBAL, GIT_CONFIG_SYSTEM), and
     * settings given in the environment (GIT_CONFIG_COUNT, _KEY_n,
     * _VALUE_n, GIT_CONFIG_PARAMETERS). A hooks path or a program named in
     * any of them was missed while only HOME was passed and the system
     * file skipped (attack round a28, F1). */
    char **env = lz_xcalloc(8 + n_extra + LZ_GIT_ENV_CONFIG_MAX, sizeof(char *));
    size_t ne = 0;
    env[ne++] = (char *) "PATH=" LZ_SPAWN_SYSTEM_PATH;
    env[ne++] = (char *) "LC_ALL=C";
    env[ne++] = (char *) "GIT_TERMINAL_PROMPT=0";
    env[ne++] = (char *) "GIT_OPTIONAL_LOCKS=0";
    size_t passed = 0;
    for (char **e = environ; *e && passed < LZ_GIT_ENV_CONFIG_MAX; e++)
        if (strncmp(*e, "HOME=", 5) == 0 || strncmp(*e, "XDG_CONFIG_HOME=", 16) == 0 ||
            strncmp(*e, "GIT_CONFIG_GLOBAL=", 18) == 0 ||
            strncmp(*e, "GIT_CONFIG_SYSTEM=", 18) == 0 ||
            strncmp(*e, "GIT_CONFIG_COUNT=", 17) == 0 || strncmp(*e, "GIT_CONFIG_KEY_", 15) == 0 ||
            strncmp(*e, "GIT_CONFIG_VALUE_", 17) == 0 ||
            strncmp(*e, "GIT_CONFIG_PARAMETERS=", 22) == 0) {
            env[ne++] = *e;
            passed++;
        }
    for (size_t x = 0; x < n_extra; x++)
        if (extra[x])
            env[ne++] = extra[x];
    env[ne] = NULL;
    lz_spawn_options opt = { .envp = env,
                             .capture_max = 4 << 20,
                             .timeout_ms = 60000,
                             .merge_stderr = merge,
                             .stop_on_fifo_wait = true,
                             .chdir_to_fd = true,
                             .cwd_fd = cwd_fd };
    int status = lz_spawn_capture(git, argv, &opt, out, err);
    free(argv);
    free(env);
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
        lz_error_hint(err,
                      "Git blocked reading the workspace %s: a .gitignore, "
                      ".git/info/exclude or configuration file there may be a FIFO, lie "
                      "on a hung file system or be very large (the sandbox can write "
                      ".gitignore); replace it by a regular file of sensible size",
                      b->ws);
    return status;
}

/* The host's Git on the Git directory gd with the work tree wt (both
 * relative to the workspace, or absolute for a repository enclosing it;
 * wt NULL: none). */
static int host_git_in(builder *b, const char *gd, const char *wt, bool merge, char *const *args,
                       lz_spawn_output *out, lz_error **err);

int lz_gs_host_git_in(builder *b, const char *gd, const char *wt, char *const *args,
                      lz_spawn_output *out, lz_error **err)
{
    return host_git_in(b, gd, wt, false, args, out, err);
}

/* lz_gs_host_git_in, with standard error in the capture when merge. */
static int host_git_in(builder *b, const char *gd, const char *wt, bool merge, char *const *args,
                       lz_spawn_output *out, lz_error **err)
{
    /* gd NULL: the work tree wt has a `.git` file (a linked worktree, a
     * separate Git directory) that the plan protects read-only; Git follows
     * it from wt, and discovery stops there (GIT_CEILING_DIRECTORIES). */
    _cleanup_free_ char *gitdir = !gd               ? NULL
                                  : gd[0] == '/'    ? lz_xasprintf("GIT_DIR=%s", gd)
                                  : strcmp(gd, ".") ? lz_xasprintf("GIT_DIR=%s/%s", b->ws, gd)
                                                    : lz_xasprintf("GIT_DIR=%s", b->ws);
    _cleanup_free_ char *worktree = !wt || !gd     ? NULL
                                    : wt[0] == '/' ? lz_xasprintf("GIT_WORK_TREE=%s", wt)
                                    : *wt          ? lz_xasprintf("GIT_WORK_TREE=%s/%s", b->ws, wt)
                                                   : lz_xasprintf("GIT_WORK_TREE=%s", b->ws);
    _cleanup_free_ char *ceiling = NULL;
    if (!gd) {
        _cleanup_free_ char *full =
            wt && *wt ? lz_xasprintf("%s/%s", b->ws, wt) : lz_xstrdup(b->ws);
        char *slash = strrchr(full, '/');
        if (slash && slash != full)
            *slash = '\0';
        ceiling = lz_xasprintf("GIT_CEILING_DIRECTORIES=%s", full);
    }
    char *const extra[] = { gitdir, worktree, ceiling };
    /* In the work tree itself, never where the coordinator was started
     * (the developer's current directory: a subdirectory of the
     * workspace, since `run` from one joins the top's Domain). Git answers
     * relative to its working directory: from src/, `ls-files --others
     * --ignored` listed only what is below src/, so a Domain first started
     * there isolated nothing at the top (attack round i12b, F3). An
     * enclosing repository's (absolute wt) runs in the workspace, which
     * lies inside its work tree. */
    _cleanup_close_ int wt_fd =
        wt && *wt && wt[0] != '/'
            ? lz_open_confined(b->ws_fd, wt, O_PATH | O_DIRECTORY, 0, wt, NULL)
            : -1;
    return spawn_host_git(b, extra, LZ_ARRAY_SIZE(extra), wt_fd >= 0 ? wt_fd : b->ws_fd, merge,
                          args, out, err);
}

/* A configuration file Git reads from `abs` (absolute, from Git's own
 * output): protect it when it lies inside the workspace. Lexically inside
 * means it must be reachable without a symlink (refused otherwise);
 * lexically outside but resolving inside (a host symlink into the
 * workspace) protects the resolved file. create: make a missing file empty
 * first (an empty configuration file is valid). */
static int protect_config_file(builder *b, const char *abs, bool create, lz_error **err)
{
    _cleanup_free_ char *rel = lz_gs_ws_rel(b, abs);
    if (!rel) {
        _cleanup_free_ char *canon = lz_canonicalize(abs, NULL);
        if (canon)
            rel = lz_gs_ws_rel(b, canon);
    }
    if (!rel || strcmp(rel, ".git") == 0)
        return 0;
    struct stat st;
    if (create && lz_lstat_confined(b->ws_fd, rel, &st) < 0 && errno == ENOENT) {
        /* The file and every missing directory above it: the sandbox must
         * not be the one to make them. */
        const char *slash = strrchr(rel, '/');
        _cleanup_free_ char *parent = slash ? lz_xstrndup(rel, (size_t) (slash - rel)) : NULL;
        _cleanup_close_ int pfd =
            parent ? lz_mkdirs_confined(b->ws_fd, parent, parent, err)
                   : lz_open_confined(b->ws_fd, ".", O_PATH | O_DIRECTORY, 0, ".", err);
        if (pfd < 0)
            return -1;
        int fd = openat(pfd, slash ? slash + 1 : rel,
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0)
            close(fd);
    }
    if (lz_gs_protect_if_exists(b, rel, err) < 0)
        return -1;
    /* `git config --file` rewrites it through rel.lock, which the sandbox
     * could write into (attack round a27b, G1): held like config's. */
    if (lz_gs_in_ignored_copy(b->p, rel) || lz_lstat_confined(b->ws_fd, rel, &st) < 0 ||
        !S_ISREG(st.st_mode))
        return 0;
    return lz_gs_hold_lock_name(b, rel, err);
}

/* One entry of `git config --show-origin -z` output: the origin
 * ("file:PATH", "command line:", ...), then "key\nvalue" (or the key
 * alone). Advances *i past it; false at the end. */
typedef struct config_entry {
    const char *origin;
    const char *kv;
} config_entry;

static bool next_config_entry(const lz_spawn_output *out, size_t *i, config_entry *e)
{
    if (*i >= out->len)
        return false;
    e->origin = out->data + *i;
    *i += strnlen(e->origin, out->len - *i) + 1;
    e->kv = *i < out->len ? out->data + *i : "";
    *i += (*i < out->len ? strnlen(e->kv, out->len - *i) : 0) + 1;
    return true;
}

/* The absolute path of a "file:" origin (relative ones are relative to
 * top), or NULL for any other origin. */
static char *origin_file(const char *origin, const char *top)
{
    if (strncmp(origin, "file:", 5) != 0)
        return NULL;
    const char *path = origin + 5;
    return path[0] == '/' ? lz_xstrdup(path) : lz_xasprintf("%s/%s", top, path);
}

/* The host's Git could not list a repository's configuration (exit
 * status `status`): the start is refused (docs/errors.md). */
static int config_unreadable(builder *b, const char *gd, const char *wt, int status, lz_error **err)
{
    /* A repository the host's Git cannot use at all (a stale `.git` file
     * whose Git directory is gone: round i12e, H2) has no configuration it
     * obeys: nothing to protect, and the Domain starts. */
    char *const ask[] = { (char *) "rev-parse", (char *) "--git-dir", NULL };
    lz_spawn_output why = { 0 };
    int st = host_git_in(b, gd, wt, true, ask, &why, err);
    if (st < 0)
        return -1;
    bool unusable = st != 0 && why.data && strstr(why.data, "not a git repository");
    lz_spawn_output_free(&why);
    if (unusable)
        return 0;
    const char *where = wt ? wt : gd ? gd : ".";
    _cleanup_free_ char *dir = where[0] == '/'                ? lz_xstrdup(where)
                               : strcmp(where, ".") && *where ? lz_xasprintf("%s/%s", b->ws, where)
                                                              : lz_xstrdup(b->ws);
    lz_error_set(err, 0,
                 "the host's Git cannot read the configuration of the repository in %s (git config "
                 "--list exited with status %d)",
                 dir, status);
    return lz_error_hint(err, "Lazaret must know what that configuration names in the workspace "
                              "before the sandbox starts: run `git config --list` there to see "
                              "the error, mend it, then run again");
}

/* The include keys, whatever their condition. */
#define INCLUDE_KEYS "^(include|includeif\\..*)\\.path$"
/* Git's own bound on nested includes (config.c MAX_INCLUDE_DEPTH): it
 * refuses a deeper one, so nothing below it is ever obeyed. */
#define MAX_INCLUDE_DEPTH 10
/* Distinct included files one repository's configuration may name; more
 * refuses the start (each costs a run of the host's Git). */
#define MAX_INCLUDED_FILES 256

/* The files an include names, followed whatever their condition. */
typedef struct include_walk {
    builder *b;
    const char *gd, *wt, *top;
    char **seen; /* absolute paths whose includes are known */
    size_t n_seen;
} include_walk;

static bool include_seen(const include_walk *w, const char *abs)
{
    for (size_t s = 0; s < w->n_seen; s++)
        if (strcmp(w->seen[s], abs) == 0)
            return true;
    return false;
}

static void include_mark_seen(include_walk *w, const char *abs)
{
    w->seen = lz_xrealloc(w->seen, w->n_seen + 1, sizeof(char *));
    w->seen[w->n_seen++] = lz_xstrdup(abs);
}

/* Is the entry "key\nvalue" one of the settings spawn_host_git gives the
 * host's Git on its command line? */
static bool is_own_setting(const char *kv)
{
    for (size_t i = 0; i < LZ_ARRAY_SIZE(own_settings); i++)
        if (strcmp(kv, own_settings[i].listed) == 0)
            return true;
    return false;
}

static int protect_includes(include_walk *w, const lz_spawn_output *inc, int depth, lz_error **err);

/* Is the entry "key\nvalue" an include (include.path, includeif.*.path;
 * section and name lowercased as Git prints them)? */
static bool is_include_entry(const char *kv)
{
    const char *nl = strchr(kv, '\n');
    size_t n = nl ? (size_t) (nl - kv) : strlen(kv);
    if (n == 12 && strncmp(kv, "include.path", 12) == 0)
        return true;
    return n > 15 && strncmp(kv, "includeif.", 10) == 0 && strncmp(kv + n - 5, ".path", 5) == 0;
}

/* The configuration file abs, which the host's Git read at the start only
 * if at all through a condition that held: its own entries, conditions not
 * evaluated and nested includes not followed (--no-includes). Its
 * includes are followed in turn, and every value's words naming files of
 * the workspace protected as for the configuration read at the start
 * (protect_value_words; top: where Git runs). Only an existing, non-empty
 * regular file can name any. One the host's Git cannot parse is skipped:
 * when its condition holds, Git fails on it and obeys nothing (the sandbox
 * cannot mend it: it is protected, or outside the workspace). */
static int protect_includes_of(include_walk *w, const char *abs, int depth, lz_error **err)
{
    struct stat st;
    if (stat(abs, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
        return 0;
    char *const args[] = {
        (char *) "config",        (char *) "--file", (char *) abs,  (char *) "--no-includes",
        (char *) "--show-origin", (char *) "--list", (char *) "-z", NULL
    };
    lz_spawn_output out = { 0 };
    int status = lz_gs_host_git_in(w->b, w->gd, w->wt, args, &out, err);
    if (status < 0)
        return -1;
    int r = 0;
    config_entry e;
    for (size_t i = 0; r == 0 && status == 0 && next_config_entry(&out, &i, &e);) {
        const char *nl = strchr(e.kv, '\n');
        if (!nl || is_include_entry(e.kv))
            continue;
        _cleanup_free_ char *key = lz_xstrndup(e.kv, (size_t) (nl - e.kv));
        if (lz_gs_is_program_dir_key(key, strlen(key)))
            r = lz_gs_protect_program_dir(w->b, key, nl + 1, w->top, err);
        if (r == 0)
            r = lz_gs_protect_value_words(w->b, key, nl + 1, w->top, err);
    }
    if (r == 0 && status == 0)
        r = protect_includes(w, &out, depth, err);
    lz_spawn_output_free(&out);
    return r;
}

/* Each include listed in inc (as `git config --show-origin -z` prints
 * them; other keys skipped), at nesting depth `depth`: the file it names
 * created empty when missing and protected when inside the workspace,
 * then its own includes, recursively. Every condition is taken as true:
 * the sandbox can switch the branch (onbranch:, HEAD is shared), and
 * gitdir: or hasconfig: may hold where the developer runs Git (attack
 * round a28, F8: an onbranch include naming a tracked file that includes
 * a missing one, which the sandbox created and then switched branch). */
static int protect_includes(include_walk *w, const lz_spawn_output *inc, int depth, lz_error **err)
{
    config_entry e;
    for (size_t i = 0; next_config_entry(inc, &i, &e);) {
        if (!is_include_entry(e.kv))
            continue;
        const char *v = strchr(e.kv, '\n');
        if (!v || !*++v)
            continue;
        _cleanup_free_ char *file_abs = origin_file(e.origin, w->top);
        _cleanup_free_ char *abs = NULL;
        if (file_abs) {
            char *slash = strrchr(file_abs, '/');
            if (slash)
                *slash = '\0';
            abs = lz_gs_expand_git_path(v, file_abs);
        } else if (strncmp(e.origin, "command line:", 13) == 0 && (v[0] == '/' || v[0] == '~')) {
            /* From the environment (GIT_CONFIG_COUNT/KEY/VALUE) or -c: Git
             * takes only absolute and `~` paths there (round a28c, E). */
            abs = lz_gs_expand_git_path(v, "/");
        }
        if (!abs)
            continue;
        if (protect_config_file(w->b, abs, true, err) < 0)
            return -1;
        if (depth >= MAX_INCLUDE_DEPTH || include_seen(w, abs))
            continue;
        if (w->n_seen >= MAX_INCLUDED_FILES) {
            lz_error_set(
                err, 0,
                "the Git configuration read for the workspace %s includes more than %d files "
                "(the last one %s)",
                w->b->ws, MAX_INCLUDED_FILES, abs);
            return lz_error_hint(err, "Lazaret protects every file an include names before the "
                                      "sandbox starts: remove the includes that are not needed "
                                      "(git config --show-origin --get-regexp "
                                      "'^include' lists them), then run again");
        }
        include_mark_seen(w, abs);
        if (protect_includes_of(w, abs, depth + 1, err) < 0)
            return -1;
    }
    return 0;
}

/* Configuration files that an include pulls in from inside the workspace,
 * core.hooksPath when it points inside, and the programs that
 * configuration names inside: all sandbox-writable places the host's Git
 * would obey. gd is the Git directory with the work tree wt; gd NULL: Git
 * follows wt's protected `.git` file (a linked worktree, a submodule
 * checkout), and relative values are relative to wt, where Git runs. */
int lz_gs_protect_config_sources(builder *b, const char *gd, const char *wt, lz_error **err)
{
    lz_spawn_output out = { 0 };
    char *const args[] = { (char *) "config", (char *) "--includes", (char *) "--show-origin",
                           (char *) "--list", (char *) "-z",         NULL };
    /* hooksPath and relative origins are relative to the work tree's top
     * (the Git directory where there is none). */
    const char *base = wt ? wt : gd && strcmp(gd, ".") ? gd : "";
    _cleanup_free_ char *top = base[0] == '/' ? lz_xstrdup(base)
                               : *base        ? lz_xasprintf("%s/%s", b->ws, base)
                                              : lz_xstrdup(b->ws);
    int status = lz_gs_host_git_in(b, gd, wt, args, &out, err);
    if (status < 0)
        return -1;
    if (status != 0) {
        /* Unreadable now (a bad line in an included file of the work tree,
         * say): nothing it names could be found, and the sandbox could
         * mend the file into one the host's Git obeys. Fail closed. */
        lz_spawn_output_free(&out);
        return config_unreadable(b, gd, wt, status, err);
    }
    int r = 0;
    config_entry e;
    for (size_t i = 0; r == 0 && status == 0 && next_config_entry(&out, &i, &e);) {
        _cleanup_free_ char *file = origin_file(e.origin, top);
        if (file)
            r = protect_config_file(b, file, false, err);
        if (strncmp(e.origin, "command line:", 13) == 0 && is_own_setting(e.kv))
            continue; /* Lazaret's own -c (spawn_host_git), not the developer's */
        const char *nl0 = strchr(e.kv, '\n');
        if (r == 0 && nl0 && lz_gs_is_program_dir_key(e.kv, (size_t) (nl0 - e.kv))) {
            _cleanup_free_ char *k = lz_xstrndup(e.kv, (size_t) (nl0 - e.kv));
            r = lz_gs_protect_program_dir(b, k, nl0 + 1, top, err);
        }
        const char *nl = strchr(e.kv, '\n');
        if (r == 0 && nl) {
            _cleanup_free_ char *key = lz_xstrndup(e.kv, (size_t) (nl - e.kv));
            r = lz_gs_protect_value_words(b, key, nl + 1, top, err);
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
    char *const inc_args[] = { (char *) "config",
                               (char *) "--includes",
                               (char *) "--show-origin",
                               (char *) "-z",
                               (char *) "--get-regexp",
                               (char *) INCLUDE_KEYS,
                               NULL };
    lz_spawn_output inc = { 0 };
    status = lz_gs_host_git_in(b, gd, wt, inc_args, &inc, err);
    if (status < 0)
        return -1;
    if (status > 1) { /* 1: no include at all */
        lz_spawn_output_free(&inc);
        return config_unreadable(b, gd, wt, status, err);
    }
    include_walk includes = { .b = b, .gd = gd, .wt = wt, .top = top };
    if (status == 0) {
        /* Every file with an entry here had all its includes listed (Git
         * read it): not asked again. */
        size_t i = 0;
        while (next_config_entry(&inc, &i, &e)) {
            _cleanup_free_ char *file = origin_file(e.origin, top);
            if (file && !include_seen(&includes, file))
                include_mark_seen(&includes, file);
        }
        r = protect_includes(&includes, &inc, 1, err);
    }
    lz_spawn_output_free(&inc);
    for (size_t s = 0; s < includes.n_seen; s++)
        free(includes.seen[s]);
    free(includes.seen);
    return r;
}

/* The last non-empty line of out (Git may warn before it answers), cut
 * off at its end in place; "" when none. */
static const char *last_line(lz_spawn_output *out)
{
    size_t n = strlen(out->data);
    while (n > 0 && out->data[n - 1] == '\n')
        n--;
    out->data[n] = '\0';
    const char *nl = memrchr(out->data, '\n', n);
    return nl ? nl + 1 : out->data;
}

/* Git's complaint for a message: its `fatal:` line (warnings may come
 * first), else its first line; bounded. */
static char *first_line(const lz_spawn_output *out)
{
    const char *fatal = strstr(out->data, "fatal: ");
    const char *from = fatal ? fatal : out->data;
    size_t n = strcspn(from, "\n");
    return lz_xstrndup(from, n < 300 ? n : 300);
}

/* The repositories whose work tree encloses the workspace (attack round
 * a27b, G2: `--workspace app` inside the monorepo mono/, whose
 * core.hooksPath is app/.husky). The host's Git run in the workspace (or
 * above it) uses their configuration, which can name hooks, includes and
 * programs inside the workspace: those are protected exactly as for the
 * workspace's own repository, by the same query (the repository given by
 * its absolute Git directory and work tree). Found the way the host's Git
 * finds them: discovery from the workspace's parent upward, then again
 * from the parent of each one found's top (a submodule checkout inside a
 * superproject). Discovery is the widest Git can do — across file systems,
 * no GIT_CEILING_DIRECTORIES — since the developer's shells differ in
 * those (docs/git.md "A workspace inside a repository"). */
int lz_gs_protect_enclosing(builder *b, lz_error **err)
{
    _cleanup_free_ char *from = lz_xstrdup(".."); /* relative to the workspace */
    for (int level = 0; level < MAX_MODULE_DEPTH; level++) {
        _cleanup_close_ int cwd = openat(b->ws_fd, from, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (cwd < 0) {
            lz_error_set(err, errno, "cannot open the directory %s/%s above the workspace", b->ws,
                         from);
            return lz_error_hint(err, "Lazaret asks the host's Git there which repository "
                                      "encloses the workspace: make the directory searchable by "
                                      "you (chmod u+x), then run again");
        }
        char *const across[] = { (char *) "GIT_DISCOVERY_ACROSS_FILESYSTEM=1" };
        char *const ask[] = { (char *) "rev-parse",
                              (char *) "--is-inside-git-dir",
                              (char *) "--path-format=absolute",
                              (char *) "--git-common-dir",
                              (char *) "--absolute-git-dir",
                              NULL };
        lz_spawn_output out = { 0 };
        int status = spawn_host_git(b, across, 1, cwd, true, ask, &out, err);
        if (status < 0)
            return -1;
        if (status != 0) {
            /* None above: the common case. A repository of another user
             * the host's Git refuses ("dubious ownership") is not used by
             * it either. Anything else: it cannot be told what the
             * host's Git would obey there; fail closed. */
            bool none =
                strstr(out.data, "not a git repository") || strstr(out.data, "dubious ownership");
            _cleanup_free_ char *why = none ? NULL : first_line(&out);
            lz_spawn_output_free(&out);
            if (none)
                return 0;
            _cleanup_free_ char *joined = lz_xasprintf("%s/%s", b->ws, from);
            _cleanup_free_ char *dir = lz_lexical_rel("", joined);
            lz_error_set(err, 0,
                         "the Git repository that encloses the workspace %s cannot be read (the "
                         "host's Git in /%s: %s)",
                         b->ws, dir ? dir : "", why);
            return lz_error_hint(err, "the host's Git run in the workspace would use that "
                                      "repository's configuration, which may name files the "
                                      "sandbox could rewrite: repair it ('git status' in the "
                                      "workspace shows the problem), then run again");
        }
        _cleanup_free_ char *gitdir = lz_xstrdup(last_line(&out));
        char *nl = memrchr(out.data, '\n', strlen(out.data));
        if (nl)
            *nl = '\0';
        _cleanup_free_ char *common = lz_xstrdup(last_line(&out));
        nl = memrchr(out.data, '\n', strlen(out.data));
        if (nl)
            *nl = '\0';
        bool in_git_dir = strcmp(last_line(&out), "true") == 0;
        lz_spawn_output_free(&out);
        if (gitdir[0] != '/' || common[0] != '/') {
            lz_error_set(err, 0,
                         "the host's Git gave no Git directory for the repository "
                         "enclosing the workspace %s",
                         b->ws);
            return lz_error_hint(err,
                                 "run 'git rev-parse --absolute-git-dir' in %s to see why, "
                                 "repair the repository, then run again",
                                 b->ws);
        }
        if (in_git_dir) {
            lz_error_set(err, 0, "the workspace %s lies inside the Git directory %s", b->ws,
                         gitdir);
            return lz_error_hint(err, "the sandbox could rewrite what the host's Git runs "
                                      "there: give a workspace in the work tree instead");
        }
        /* Its Git directory inside the workspace (a `.git` file above
         * pointing into it): protected as the workspace's own would be. */
        const char *dirs[] = { gitdir, common };
        for (size_t d = 0; d < LZ_ARRAY_SIZE(dirs); d++) {
            _cleanup_free_ char *rel = lz_gs_ws_rel(b, dirs[d]);
            if (rel && lz_gs_protect_git_dir(b, rel, 0, err) < 0)
                return -1;
        }
        /* Discovery again, not GIT_DIR: with GIT_DIR alone Git takes its
         * working directory for the top. */
        char *const top_args[] = { (char *) "rev-parse", (char *) "--absolute-git-dir",
                                   (char *) "--show-toplevel", NULL };
        status = spawn_host_git(b, across, 1, cwd, false, top_args, &out, err);
        if (status < 0)
            return -1;
        _cleanup_free_ char *top = status == 0 ? lz_xstrdup(last_line(&out)) : NULL;
        nl = status == 0 ? memrchr(out.data, '\n', strlen(out.data)) : NULL;
        if (nl)
            *nl = '\0';
        bool same = status == 0 && strcmp(last_line(&out), gitdir) == 0;
        lz_spawn_output_free(&out);
        if (!top || top[0] != '/' || !same) {
            lz_error_set(err, 0,
                         "the host's Git gave no work tree for the repository %s that "
                         "encloses the workspace %s",
                         gitdir, b->ws);
            return lz_error_hint(err,
                                 "run 'git rev-parse --show-toplevel' in %s to see why, "
                                 "repair the repository, then run again",
                                 b->ws);
        }
        if (lz_gs_protect_config_sources(b, gitdir, top, err) < 0)
            return -1;
        /* Up from its top's parent: a superproject around a submodule
         * checkout. A top that does not hold the workspace (core.worktree
         * elsewhere) or the root ends the search. */
        _cleanup_free_ char *below = lz_lexical_rel(top, b->ws);
        if (!below)
            return 0;
        size_t levels = lz_gs_path_depth(below) + 2; /* its components, and one more */
        free(from);
        from = lz_xcalloc(3 * levels, 1);
        for (size_t i = 0; i < levels; i++)
            strcat(from, i ? "/.." : "..");
    }
    return 0;
}
