/* SPDX-License-Identifier: Apache-2.0 */
#include "coordinator/git_sentry.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/spawn.h"
#include "common/util.h"

#define MAX_IGNORED 256
#define MAX_MODULE_DEPTH 8
#define QUARANTINE "lazaret-quarantine"

/* ---- plan building ----------------------------------------------------- */

typedef struct builder {
    lz_git_plan *p;
    const char *ws;       /* canonical workspace */
    int ws_fd;
} builder;

static char *own(builder *b, char *s)
{
    b->p->owned = lz_xrealloc(b->p->owned, b->p->n_owned + 1, sizeof(char *));
    b->p->owned[b->p->n_owned++] = s;
    return s;
}

static void add_mount(builder *b, const char *rel, const char *source, bool readonly)
{
    for (size_t i = 0; i < b->p->n_mounts; i++)
        if (strcmp(b->p->mounts[i].destination + strlen("/workspace/"), rel) == 0)
            return;
    b->p->mounts = lz_xrealloc(b->p->mounts, b->p->n_mounts + 1, sizeof(lz_spec_mount));
    lz_spec_mount *m = &b->p->mounts[b->p->n_mounts++];
    m->destination = own(b, lz_xasprintf("/workspace/%s", rel));
    m->source = source ? own(b, lz_xstrdup(source)) : own(b, lz_xasprintf("%s/%s", b->ws, rel));
    m->readonly = readonly;
}

/* Protect an existing path read-only. gVisor lets the sandbox rename a
 * directory that has bind mounts inside it, which would let it move a
 * protected file away with its parent and put its own in the old place; so
 * every ancestor directory below the workspace (and below .git, already a
 * mount point) becomes a read-write bind point too: a mount point cannot be
 * renamed. */
static void protect_if_exists(builder *b, const char *rel)
{
    struct stat st;
    if (fstatat(b->ws_fd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISLNK(st.st_mode))
        return;
    char *copy = lz_xstrdup(rel);
    for (char *p = copy; (p = strchr(p, '/')); p++) {
        *p = '\0';
        if (strcmp(copy, ".git") != 0 && strcmp(copy, ".") != 0 &&
            fstatat(b->ws_fd, copy, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
            add_mount(b, copy, NULL, false);
        *p = '/';
    }
    free(copy);
    add_mount(b, rel, NULL, true);
}

static void add_watch(builder *b, const char *rel, bool dir_members)
{
    b->p->watches = lz_xrealloc(b->p->watches, b->p->n_watches + 1, sizeof(lz_git_watch));
    lz_git_watch *w = &b->p->watches[b->p->n_watches++];
    memset(w, 0, sizeof(*w));
    w->rel = lz_xstrdup(rel);
    w->dir_members = dir_members;
    if (!dir_members)
        return;
    int fd = openat(b->ws_fd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        struct stat st;
        if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        w->known = lz_xrealloc(w->known, w->n_known + 1, sizeof(char *));
        w->known_ino = lz_xrealloc(w->known_ino, w->n_known + 1, sizeof(*w->known_ino));
        w->known_ino[w->n_known] = (unsigned long long) st.st_ino;
        w->known[w->n_known++] = lz_xstrdup(e->d_name);
    }
    closedir(d);
}

/* "gd/name", or "name" when gd is "." (a bare repository's top level). */
static char *join_rel(const char *gd, const char *name)
{
    return strcmp(gd, ".") == 0 ? lz_xstrdup(name) : lz_xasprintf("%s/%s", gd, name);
}

/* The places inside one Git directory `gd` (relative to the workspace) that
 * decide what Git executes or how it is configured. */
static int protect_git_dir(builder *b, const char *gd, int depth, lz_error **err)
{
    _cleanup_free_ char *hooks = join_rel(gd, "hooks");
    struct stat st;
    /* A missing hooks/ would let the sandbox create one: make it exist so
     * that it can be bound read-only (git init creates it too). */
    if (fstatat(b->ws_fd, hooks, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT &&
        mkdirat(b->ws_fd, hooks, 0755) < 0)
        return lz_error_set(err, errno, "cannot create %s/%s", b->ws, hooks);
    static const char *const fixed[] = { "config", "hooks", "commondir", "config.worktree",
                                         "worktrees", "info/attributes" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(fixed); i++) {
        _cleanup_free_ char *rel = join_rel(gd, fixed[i]);
        protect_if_exists(b, rel);
    }
    /* Entries that must not appear later. */
    add_watch(b, gd, false);

    /* Submodule git dirs: modules/<name>[/modules/<name>…]. */
    _cleanup_free_ char *mods = join_rel(gd, "modules");
    int fd = openat(b->ws_fd, mods, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0;
    add_watch(b, mods, true); /* no new submodule git dirs */
    if (depth >= MAX_MODULE_DEPTH) {
        close(fd);
        return 0;
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return 0;
    }
    struct dirent *e;
    int r = 0;
    while (r == 0 && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        _cleanup_free_ char *sub = lz_xasprintf("%s/%s", mods, e->d_name);
        _cleanup_free_ char *cfg = lz_xasprintf("%s/config", sub);
        if (fstatat(b->ws_fd, cfg, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            r = protect_git_dir(b, sub, depth + 1, err);
        else if (fstatat(b->ws_fd, sub, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
            /* A grouping directory (modules/a/b): protect it wholesale. */
            add_mount(b, sub, NULL, true);
    }
    closedir(d);
    return r;
}

static int host_git(builder *b, char *const *args, lz_spawn_output *out, lz_error **err)
{
    static char *git = NULL;
    if (!git && lz_spawn_find_program("git", LZ_SPAWN_SYSTEM_PATH, &git, err) < 0)
        return lz_error_hint(err, "install git on the host (sudo apt-get install git), or set "
                                  "isolate_gitignored = false");
    size_t n = 0;
    while (args[n])
        n++;
    /* The host's Git must not be influenced by anything the sandbox wrote:
     * no fsmonitor, no hooks, no system configuration; -C the workspace. */
    char **argv = lz_xcalloc(n + 12, sizeof(char *));
    size_t k = 0;
    argv[k++] = (char *) "git";
    argv[k++] = (char *) "-c";
    argv[k++] = (char *) "core.fsmonitor=false";
    argv[k++] = (char *) "-c";
    argv[k++] = (char *) "core.hooksPath=/dev/null";
    argv[k++] = (char *) "-c";
    argv[k++] = (char *) "core.untrackedCache=false";
    argv[k++] = (char *) "-C";
    argv[k++] = (char *) b->ws;
    for (size_t i = 0; i < n; i++)
        argv[k++] = args[i];
    argv[k] = NULL;
    _cleanup_free_ char *home = getenv("HOME") ? lz_xasprintf("HOME=%s", getenv("HOME")) : NULL;
    char *env[] = { (char *) "PATH=" LZ_SPAWN_SYSTEM_PATH, (char *) "LC_ALL=C",
                    (char *) "GIT_CONFIG_NOSYSTEM=1", (char *) "GIT_TERMINAL_PROMPT=0",
                    (char *) "GIT_OPTIONAL_LOCKS=0", home, NULL };
    lz_spawn_options opt = { .envp = env, .capture_max = 4 << 20, .timeout_ms = 60000 };
    int status = lz_spawn_capture(git, argv, &opt, out, err);
    free(argv);
    return status;
}

/* Configuration files that an include pulls in from inside the workspace,
 * and core.hooksPath when it points inside: both are sandbox-writable
 * places the host's Git would obey. */
static int protect_config_sources(builder *b, lz_error **err)
{
    lz_spawn_output out = { 0 };
    char *const args[] = { (char *) "config", (char *) "--includes", (char *) "--show-origin",
                           (char *) "--list", (char *) "-z", NULL };
    int status = host_git(b, args, &out, err);
    if (status < 0)
        return -1;
    size_t wl = strlen(b->ws);
    for (size_t i = 0; status == 0 && i < out.len;) {
        const char *origin = out.data + i;
        size_t ol = strnlen(origin, out.len - i);
        i += ol + 1;
        const char *kv = i < out.len ? out.data + i : "";
        size_t kl = i < out.len ? strnlen(kv, out.len - i) : 0;
        i += kl + 1;
        if (strncmp(origin, "file:", 5) == 0) {
            const char *path = origin + 5;
            _cleanup_free_ char *abs = path[0] == '/' ? lz_xstrdup(path)
                                                       : lz_xasprintf("%s/%s", b->ws, path);
            _cleanup_free_ char *canon = realpath(abs, NULL);
            if (canon && strncmp(canon, b->ws, wl) == 0 && canon[wl] == '/')
                protect_if_exists(b, canon + wl + 1);
        }
        if (strncmp(kv, "core.hookspath\n", 15) == 0) {
            const char *v = kv + 15;
            _cleanup_free_ char *abs = v[0] == '/' ? lz_xstrdup(v) : lz_xasprintf("%s/%s", b->ws, v);
            _cleanup_free_ char *canon = lz_canonicalize(abs, NULL);
            if (canon && strncmp(canon, b->ws, wl) == 0 && canon[wl] == '/') {
                const char *rel = canon + wl + 1;
                struct stat st;
                if (fstatat(b->ws_fd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
                    mkdirat(b->ws_fd, rel, 0755); /* a single missing component */
                protect_if_exists(b, rel);
            }
        }
    }
    lz_spawn_output_free(&out);

    /* Includes of files that do not exist yet are not listed above, but the
     * host's Git would read them as soon as they appear: create them empty
     * (an empty configuration file is valid) and protect them. Relative
     * include paths are relative to the including file, .git/config. */
    char *const inc_args[] = { (char *) "config", (char *) "--local", (char *) "-z",
                               (char *) "--get-regexp",
                               (char *) "^(include|includeif\\..*)\\.path$", NULL };
    lz_spawn_output inc = { 0 };
    status = host_git(b, inc_args, &inc, err);
    if (status < 0)
        return -1;
    for (size_t i = 0; status == 0 && i < inc.len;) {
        const char *kv = inc.data + i;
        size_t kl = strnlen(kv, inc.len - i);
        i += kl + 1;
        const char *v = strchr(kv, '\n');
        if (!v || !*++v || v[0] == '~')
            continue;
        _cleanup_free_ char *abs = v[0] == '/' ? lz_xstrdup(v) : lz_xasprintf("%s/.git/%s", b->ws, v);
        _cleanup_free_ char *canon = lz_canonicalize(abs, NULL);
        if (!canon || strncmp(canon, b->ws, wl) != 0 || canon[wl] != '/')
            continue;
        const char *rel = canon + wl + 1;
        struct stat st;
        if (fstatat(b->ws_fd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT) {
            int fd = openat(b->ws_fd, rel, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                            0644);
            if (fd >= 0)
                close(fd);
        }
        protect_if_exists(b, rel);
    }
    lz_spawn_output_free(&inc);
    return 0;
}

/* Gitlinks (submodules, embedded repositories) in the index: the host's
 * `git status` runs Git inside each one that has a .git, with that
 * repository's configuration. */
static char **list_gitlinks(builder *b, size_t *ret_n, lz_error **err)
{
    lz_spawn_output out = { 0 };
    char *const args[] = { (char *) "ls-files", (char *) "-s", (char *) "-z", NULL };
    int status = host_git(b, args, &out, err);
    *ret_n = 0;
    if (status != 0) {
        lz_spawn_output_free(&out);
        return status < 0 ? NULL : lz_xcalloc(1, sizeof(char *));
    }
    char **v = lz_xcalloc(1, sizeof(char *));
    size_t n = 0;
    for (size_t i = 0; i < out.len;) {
        const char *e = out.data + i;
        size_t el = strnlen(e, out.len - i);
        i += el + 1;
        const char *tab = memchr(e, '\t', el);
        if (!tab || strncmp(e, "160000 ", 7) != 0)
            continue;
        v = lz_xrealloc(v, n + 2, sizeof(char *));
        v[n++] = lz_xstrdup(tab + 1);
        v[n] = NULL;
    }
    lz_spawn_output_free(&out);
    *ret_n = n;
    return v;
}

static int protect_gitlinks(builder *b, lz_error **err)
{
    size_t n = 0;
    char **links = list_gitlinks(b, &n, err);
    if (!links)
        return -1;
    b->p->gitlinks = links;
    b->p->n_gitlinks = n;
    for (size_t i = 0; i < n; i++) {
        _cleanup_free_ char *dotgit = lz_xasprintf("%s/.git", links[i]);
        struct stat st;
        if (fstatat(b->ws_fd, dotgit, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue; /* not checked out: a new .git there is caught by the audit */
        if (S_ISDIR(st.st_mode)) {
            if (protect_git_dir(b, dotgit, 1, err) < 0)
                return -1;
        } else {
            protect_if_exists(b, dotgit);
        }
    }
    return 0;
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

/* Ignored paths: the Domain's own copies under <Domain Root>/ignored/,
 * initially empty, bound over the workspace paths. */
static int isolate_ignored(builder *b, const lz_resolved_config *cfg, lz_error **err)
{
    _cleanup_close_ int droot = lz_plan_open(&cfg->storage_domain_root, O_PATH | O_DIRECTORY,
                                             true, err);
    if (droot < 0)
        return -1;
    if (mkdirat(droot, "ignored", 0700) < 0 && errno != EEXIST)
        return lz_error_set(err, errno, "cannot create %s/ignored", cfg->storage_domain_root.label);
    _cleanup_close_ int ign = openat(droot, "ignored", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (ign < 0)
        return lz_error_set(err, errno, "cannot open %s/ignored", cfg->storage_domain_root.label);

    /* Directory patterns of the top-level .gitignore and info/exclude name
     * paths that do not exist yet (node_modules/, target/): give them an
     * empty placeholder on the host so they can be isolated too. */
    static const char *const pattern_files[] = { ".gitignore", ".git/info/exclude" };
    for (size_t f = 0; f < LZ_ARRAY_SIZE(pattern_files); f++) {
        int fd = openat(b->ws_fd, pattern_files[f], O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        FILE *fp = fd >= 0 ? fdopen(fd, "re") : NULL;
        if (!fp) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        char line[512];
        while (fgets(line, sizeof(line), fp)) {
            line[strcspn(line, "\r\n")] = '\0';
            size_t n = strlen(line);
            if (n < 2 || line[n - 1] != '/' || !is_literal_pattern(line))
                continue;
            line[n - 1] = '\0';
            const char *rel = line[0] == '/' ? line + 1 : line;
            if (!*rel || strchr(rel, '/') || strcmp(rel, ".git") == 0 || strcmp(rel, "..") == 0 ||
                strcmp(rel, ".") == 0)
                continue;
            if (mkdirat(b->ws_fd, rel, 0755) < 0 && errno != EEXIST)
                continue;
        }
        fclose(fp);
    }

    lz_spawn_output out = { 0 };
    char *const args[] = { (char *) "ls-files", (char *) "-z", (char *) "--others",
                           (char *) "--ignored", (char *) "--exclude-standard",
                           (char *) "--directory", NULL };
    int status = host_git(b, args, &out, err);
    if (status < 0)
        return -1;
    if (status != 0) {
        lz_spawn_output_free(&out);
        return lz_error_set(err, 0, "git ls-files failed (status %d) in the workspace %s", status,
                            b->ws);
    }
    for (size_t i = 0; i < out.len;) {
        char *entry = out.data + i;
        size_t n = strnlen(entry, out.len - i);
        i += n + 1;
        if (n == 0)
            continue;
        bool dir = entry[n - 1] == '/';
        if (dir)
            entry[n - 1] = '\0';
        if (b->p->n_ignored >= MAX_IGNORED) {
            lz_spawn_output_free(&out);
            lz_error_set(err, 0, "the workspace %s has more than %d ignored paths", b->ws,
                         MAX_IGNORED);
            return lz_error_hint(err, "ignore whole directories rather than many single files, "
                                      "or set isolate_gitignored = false in the profile");
        }
        struct stat st;
        if (fstatat(b->ws_fd, entry, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISLNK(st.st_mode) ||
            (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)))
            continue; /* symlinks and special files are left as they are */
        /* The Domain's copy: same relative path beneath ignored/. */
        char *copy_rel = lz_xstrdup(entry);
        for (char *p = copy_rel; (p = strchr(p, '/')); p++) {
            *p = '\0';
            mkdirat(ign, copy_rel, 0755);
            *p = '/';
        }
        if (S_ISDIR(st.st_mode)) {
            if (mkdirat(ign, copy_rel, 0755) < 0 && errno != EEXIST) {
                free(copy_rel);
                continue;
            }
        } else {
            int cf = openat(ign, copy_rel, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
            if (cf < 0) {
                free(copy_rel);
                continue;
            }
            close(cf);
        }
        char *src = lz_xasprintf("%s/ignored/%s", cfg->storage_domain_root.label, copy_rel);
        free(copy_rel);
        add_mount(b, entry, src, false);
        free(src);
        b->p->n_ignored++;
    }
    lz_spawn_output_free(&out);
    return 0;
}

int lz_git_sentry_plan(const lz_resolved_config *cfg, lz_git_plan *ret, lz_error **err)
{
    lz_git_plan p = { 0 };
    builder b = { &p, cfg->workspace.label, -1 };
    int r = -1;
    b.ws_fd = lz_plan_open(&cfg->workspace, O_RDONLY | O_DIRECTORY, true, err);
    if (b.ws_fd < 0)
        return -1;
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
    case LZ_GIT_REPO:
        p.git_dir = lz_xasprintf("%s/.git", b.ws);
        if (protect_git_dir(&b, ".git", 0, err) < 0 || protect_config_sources(&b, err) < 0 ||
            protect_gitlinks(&b, err) < 0)
            goto out;
        if (cfg->isolate_gitignored && isolate_ignored(&b, cfg, err) < 0)
            goto out;
        break;
    case LZ_GIT_GITFILE:
        /* The git dir lies outside the workspace (not visible inside); the
         * .git file itself must not be redirected by the sandbox. */
        add_mount(&b, ".git", NULL, true);
        break;
    case LZ_GIT_BARE:
        p.git_dir = lz_xstrdup(b.ws);
        if (protect_git_dir(&b, ".", 0, err) < 0)
            goto out;
        break;
    case LZ_GIT_NONE:
        /* A repository the sandbox creates is its own; the audit at the
         * session's end reports a new .git (see docs/git.md). */
        add_watch(&b, ".", false);
        break;
    }
    *ret = p;
    p = (lz_git_plan) { 0 };
    r = 0;
out:
    close(b.ws_fd);
    lz_git_plan_clear(&p);
    return r;
}

/* ---- audit ------------------------------------------------------------- */

/* Names that must not appear in a Git directory during a session. */
static const char *const forbidden_in_git_dir[] = { "commondir", "config.worktree", "worktrees",
                                                    "modules", "gitdir" };

/* A member is known only with its name AND inode: a renamed original and
 * an impostor under the original name are both new. */
static bool known_member(const lz_git_watch *w, const char *name, unsigned long long ino)
{
    for (size_t i = 0; i < w->n_known; i++)
        if (strcmp(w->known[i], name) == 0 && w->known_ino[i] == ino)
            return true;
    return false;
}

static int quarantine(int ws_fd, const lz_git_plan *plan, const char *dir_rel, const char *name,
                      char **report, lz_error **err)
{
    _cleanup_free_ char *qrel = plan->kind == LZ_GIT_BARE ? lz_xstrdup(QUARANTINE)
                                                          : lz_xasprintf(".git/%s", QUARANTINE);
    if (plan->kind == LZ_GIT_NONE)
        return 0; /* reported, never moved: see docs/git.md */
    if (mkdirat(ws_fd, qrel, 0700) < 0 && errno != EEXIST)
        return lz_error_set(err, errno, "cannot create the Git Sentry quarantine %s", qrel);
    _cleanup_close_ int q = openat(ws_fd, qrel, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    _cleanup_close_ int d = openat(ws_fd, dir_rel, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (q < 0 || d < 0)
        return lz_error_set(err, errno, "cannot open the Git Sentry quarantine");
    static unsigned counter;
    char target[512];
    snprintf(target, sizeof(target), "%lld-%d-%u-%s-%s", (long long) time(NULL), (int) getpid(),
             ++counter, strcmp(dir_rel, ".") == 0 ? "top" : dir_rel, name);
    for (char *p = target; *p; p++)
        if (*p == '/')
            *p = '_';
    if (renameat(d, name, q, target) < 0)
        return lz_error_set(err, errno, "cannot quarantine %s/%s", dir_rel, name);
    char *line = lz_xasprintf("%s%s/%s (moved to %s/%s)", *report ? *report : "",
                              dir_rel, name, qrel, target);
    free(*report);
    *report = line;
    return 1;
}

int lz_git_sentry_audit(const lz_resolved_config *cfg, const lz_git_plan *plan, char **ret_report,
                        lz_error **err)
{
    _cleanup_close_ int ws_fd = lz_plan_open(&cfg->workspace, O_RDONLY | O_DIRECTORY, true, err);
    if (ws_fd < 0)
        return -1;
    char *report = NULL;
    int moved = 0;
    for (size_t i = 0; i < plan->n_watches; i++) {
        const lz_git_watch *w = &plan->watches[i];
        if (plan->kind == LZ_GIT_NONE) {
            struct stat st;
            if (fstatat(ws_fd, ".git", &st, AT_SYMLINK_NOFOLLOW) == 0 && !report) {
                report = lz_xstrdup("a new .git appeared in the workspace during the session: it "
                                    "was made inside the sandbox, so its configuration and hooks "
                                    "are the sandbox's; review them before running git on the "
                                    "host");
                moved++;
            }
            continue;
        }
        if (w->dir_members) {
            int fd = openat(ws_fd, w->rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
            if (!d) {
                if (fd >= 0)
                    close(fd);
                continue;
            }
            char *names[64];
            size_t nn = 0;
            struct dirent *e;
            while ((e = readdir(d)) && nn < LZ_ARRAY_SIZE(names)) {
                struct stat st;
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
                    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                    continue;
                if (!known_member(w, e->d_name, (unsigned long long) st.st_ino))
                    names[nn++] = lz_xstrdup(e->d_name);
            }
            closedir(d);
            for (size_t k = 0; k < nn; k++) {
                /* One failure must not stop the audit of the rest. */
                lz_error *e1 = NULL;
                int q = quarantine(ws_fd, plan, w->rel, names[k], &report, &e1);
                if (q < 0) {
                    char *line = lz_xasprintf("%sFAILED to quarantine %s/%s (%s); ",
                                              report ? report : "", w->rel, names[k],
                                              e1 ? e1->message : "?");
                    free(report);
                    report = line;
                    q = 1;
                    lz_error_free(e1);
                }
                free(names[k]);
                moved += q;
            }
        } else {
            for (size_t k = 0; k < LZ_ARRAY_SIZE(forbidden_in_git_dir); k++) {
                _cleanup_free_ char *rel = join_rel(w->rel, forbidden_in_git_dir[k]);
                struct stat st;
                if (fstatat(ws_fd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
                    continue;
                /* Protected at start (it existed then): not a new entry. */
                bool protected_ = false;
                for (size_t m = 0; m < plan->n_mounts; m++)
                    if (plan->mounts[m].readonly &&
                        strcmp(plan->mounts[m].destination + strlen("/workspace/"), rel) == 0)
                        protected_ = true;
                if (protected_)
                    continue;
                /* modules/ that existed at start is watched member-wise. */
                bool watched_dir = false;
                for (size_t m = 0; m < plan->n_watches; m++)
                    if (plan->watches[m].dir_members && strcmp(plan->watches[m].rel, rel) == 0)
                        watched_dir = true;
                if (watched_dir)
                    continue;
                lz_error *e1 = NULL;
                int q = quarantine(ws_fd, plan, w->rel, forbidden_in_git_dir[k], &report, &e1);
                if (q < 0) {
                    char *line = lz_xasprintf("%sFAILED to quarantine %s (%s); ",
                                              report ? report : "", rel,
                                              e1 ? e1->message : "?");
                    free(report);
                    report = line;
                    moved++;
                    lz_error_free(e1);
                    continue;
                }
                moved += q;
            }
        }
    }
    /* Gitlinks: a .git that appeared in a gitlink (a submodule checked out
     * inside, or an embedded repository the sandbox created and added). */
    if (plan->kind == LZ_GIT_REPO) {
        builder b = { (lz_git_plan *) plan, cfg->workspace.label, ws_fd };
        size_t n = 0;
        char **now = list_gitlinks(&b, &n, NULL);
        for (size_t i = 0; now && i < n; i++) {
            bool known = false;
            for (size_t k = 0; k < plan->n_gitlinks; k++)
                if (strcmp(plan->gitlinks[k], now[i]) == 0)
                    known = true;
            _cleanup_free_ char *dotgit = lz_xasprintf("%s/.git", now[i]);
            struct stat st;
            bool protected_ = false;
            for (size_t m = 0; m < plan->n_mounts; m++)
                if (strncmp(plan->mounts[m].destination + strlen("/workspace/"), dotgit,
                            strlen(dotgit)) == 0)
                    protected_ = true;
            if ((known && protected_) || fstatat(ws_fd, dotgit, &st, AT_SYMLINK_NOFOLLOW) < 0)
                continue;
            /* Move the nested repository's .git aside: its configuration is
             * the sandbox's, and the host's git status would obey it. */
            _cleanup_free_ char *parent = lz_xstrdup(now[i]);
            lz_error *e1 = NULL;
            int q = quarantine(ws_fd, plan, parent, ".git", &report, &e1);
            if (q < 0) {
                char *line = lz_xasprintf("%sFAILED to quarantine %s (%s); ", report ? report : "",
                                          dotgit, e1 ? e1->message : "?");
                free(report);
                report = line;
                q = 1;
            }
            lz_error_free(e1);
            moved += q;
        }
        for (size_t i = 0; now && i < n; i++)
            free(now[i]);
        free(now);
    }
    if (ret_report)
        *ret_report = report;
    else
        free(report);
    return moved;
}

void lz_git_plan_clear(lz_git_plan *plan)
{
    for (size_t i = 0; i < plan->n_owned; i++)
        free(plan->owned[i]);
    free(plan->owned);
    free(plan->mounts);
    for (size_t i = 0; i < plan->n_watches; i++) {
        free(plan->watches[i].rel);
        for (size_t k = 0; k < plan->watches[i].n_known; k++)
            free(plan->watches[i].known[k]);
        free(plan->watches[i].known);
        free(plan->watches[i].known_ino);
    }
    free(plan->watches);
    free(plan->git_dir);
    for (size_t i = 0; i < plan->n_gitlinks; i++)
        free(plan->gitlinks[i]);
    free(plan->gitlinks);
    memset(plan, 0, sizeof(*plan));
}
