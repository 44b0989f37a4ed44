/* SPDX-License-Identifier: Apache-2.0
 *
 * Git Sentry: the tree audit: one walk of the workspace tree for the plan (which
 * protects the developer's repositories it finds) and for the audit (which
 * moves what the sandbox made into the quarantine): `.git` entries and
 * gitfiles, directories shaped like bare repositories, symlinks into places
 * the audit does not look, and the insides of every Git directory.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "fs/confined.h"
#include "fs/relpath.h"
#include "gitsentry/internal.h"

const char *const lz_gs_git_dir_entries[LZ_GS_N_GIT_DIR_ENTRIES] = {
    "config", "hooks", "commondir", "config.worktree", "worktrees", "modules", "remotes", "branches"
};

/* An ignored path is bound over by the Domain's copy: the sandbox never
 * writes the host's object there, and the audit skips it — but only while it
 * is still the object the plan bound (a parent renamed inside would leave a
 * new, writable one under the old name). */
static bool is_ignored(const lz_git_plan *p, const char *rel, const struct stat *st)
{
    if (p->n_ignored == 0)
        return false;
    char *key = (char *) rel;
    char **hit = bsearch(&key, p->ignored, p->n_ignored, sizeof(char *), lz_gs_cmp_str);
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
    size_t cap = 8;
    char **names = lz_xcalloc(cap, sizeof(char *));
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (n + 2 > cap)
            names = lz_xrealloc(names, cap *= 2, sizeof(char *));
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

/* A walk in event mode looks at the queue every this many entries. */
#define PEEK_EVERY 128

/* A directory of the tree that looks like a Git directory (HEAD beside
 * objects/ or a commondir): the host's Git would use it as a bare
 * repository when run inside it. */
int lz_gs_check_bare(walk *w, int dfd, const char *rel)
{
    lz_git_plan *p = w->p;
    if (!rel[0] && p->kind == LZ_GIT_BARE)
        return 0; /* the workspace itself: protected as a Git directory */
    struct stat hst, st, dst;
    if (lz_gs_sight_lstat(p, dfd, "HEAD", &hst) < 0) {
        if (errno == ENOENT)
            return 0;
        lz_gs_fail_at(w, rel[0] ? rel : ".");
        return lz_error_set(w->err, errno, "Git Sentry: cannot audit %s", rel[0] ? rel : ".");
    }
    /* A HEAD beside anything else of a Git directory: a HEAD and a config
     * the sandbox wrote lack only objects/ and refs/ to be obeyed, and those
     * are ordinary names a build (or a placeholder) may create later. */
    static const char *const companions[] = { "objects", "refs", "commondir", "config" };
    bool companion = false;
    for (size_t i = 0; !companion && i < LZ_ARRAY_SIZE(companions); i++)
        companion = lz_gs_sight_lstat(p, dfd, companions[i], &st) == 0;
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
    if (w->b && rel[0] && lz_gs_valid_git_dir(p->ws_fd, self, &why)) {
        lz_gs_add_marker(&p->markers, &p->n_markers, self, &dst);
        return lz_gs_protect_git_dir(w->b, self, 1, w->err);
    }
    if (lz_gs_known(p->markers, p->n_markers, self, &dst))
        return 0;
    return lz_gs_quarantine(w, dfd, rel, "HEAD") < 0 ? -1 : 0;
}

/* Where a target the sandbox named (a symlink's, a gitfile's) leads, in
 * the forms every check of it considers: abs (relative targets taken from
 * the entry's directory in the workspace), lexical ("/" + abs lexically
 * normalised: what the string says) and resolved (realpath: where the host
 * goes now; NULL when nothing is there). */
typedef struct target_forms {
    char *abs, *lexical, *resolved;
} target_forms;

static void target_forms_of(const lz_resolved_config *cfg, const char *rel, const char *target,
                            target_forms *t)
{
    t->abs = target[0] == '/' ? lz_xstrdup(target)
             : rel[0]         ? lz_xasprintf("%s/%s/%s", cfg->workspace.label, rel, target)
                              : lz_xasprintf("%s/%s", cfg->workspace.label, target);
    _cleanup_free_ char *rest = lz_lexical_rel("", t->abs);
    t->lexical = rest ? lz_xasprintf("/%s", rest) : lz_xstrdup("/");
    t->resolved = realpath(t->abs, NULL);
}

static void target_forms_free(target_forms *t)
{
    free(t->abs);
    free(t->lexical);
    free(t->resolved);
}

/* Does the target lie where the sandbox can write but the audit does not
 * look: Lazaret's storage (the Domain's persistent uppers, ignored copies,
 * volumes' state) and runtime trees, a read-write volume, or /proc and
 * /dev (what those name depends on who follows them)? Judged on the
 * lexical path and on the path as the host resolves it. */
static bool in_sandbox_state(const lz_resolved_config *cfg, const target_forms *t)
{
    const char *forms[] = { t->abs, t->lexical, t->resolved };
    for (size_t f = 0; f < LZ_ARRAY_SIZE(forms); f++) {
        if (!forms[f])
            continue;
        if (lz_path_within(forms[f], "/proc") || lz_path_within(forms[f], "/dev"))
            return true;
        if (f == 0) /* abs only for /proc and /dev: the other places by the normal forms */
            continue;
        if (lz_path_within(forms[f], cfg->storage_root.label) ||
            lz_path_within(forms[f], cfg->runtime_root.label))
            return true;
        for (size_t i = 0; i < cfg->n_volumes; i++)
            if (cfg->volumes[i].access != LZ_ACCESS_READ_ONLY &&
                lz_path_within(forms[f], cfg->volumes[i].source.label))
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
    _cleanup_close_ int fd = lz_gs_sight_open(p, dfd, ".git", O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
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
    target_forms forms;
    target_forms_of(p->cfg, rel, target, &forms);
    bool r = in_sandbox_state(p->cfg, &forms);
    target_forms_free(&forms);
    return r;
}

/* A `.git` entry below the workspace's top level. */
static int check_dot_git(walk *w, int dfd, const char *rel, const struct stat *st)
{
    lz_git_plan *p = w->p;
    _cleanup_free_ char *child = lz_rel_join(rel, ".git");
    /* A gitfile into the sandbox's own state is no repository of the
     * developer's, whoever seems to have made it (attack round i23: a
     * submodule's .git file naming a repository the sandbox built in its
     * persistent directory, whose config runs a filter): set aside at
     * every start, like a Git directory the sandbox made. */
    if (w->b && S_ISREG(st->st_mode) && rel[0] && gitfile_into_sandbox_state(p, dfd, rel))
        return lz_gs_quarantine(w, dfd, rel, ".git") < 0 ? -1 : 0;
    if (w->b) { /* plan: a repository of the developer's */
        if (S_ISLNK(st->st_mode)) {
            lz_error_set(w->err, 0, "Git Sentry: %s/%s is a symlink", w->b->ws, child);
            return lz_error_hint(w->err, "the sandbox could point it at a Git directory of its "
                                         "own: make it a directory or a gitdir file");
        }
        lz_gs_add_marker(&p->markers, &p->n_markers, child, st);
        if (S_ISDIR(st->st_mode))
            return lz_gs_protect_git_dir(w->b, child, 1, w->err);
        if (S_ISREG(st->st_mode) && rel[0]) {
            builder *b = w->b;
            b->gitfile_trees =
                lz_xrealloc(b->gitfile_trees, b->n_gitfile_trees + 1, sizeof(char *));
            b->gitfile_trees[b->n_gitfile_trees++] = lz_xstrdup(rel);
        }
        return lz_gs_protect_if_exists(w->b, child, w->err);
    }
    if (lz_gs_known(p->markers, p->n_markers, child, st))
        return 0;
    return lz_gs_quarantine(w, dfd, rel, ".git") < 0 ? -1 : 0;
}

/* Does the symlink dfd/name (in the tree directory rel) point where the
 * sandbox can write but the audit does not look — a read-write volume, the
 * Storage Root (ignored copies, persistent uppers), the internals of a Git
 * directory? A host git run "in the workspace" through it would obey a
 * repository there. Judged on the lexical target and on the target as the
 * host resolves it. */
static bool link_into_sandbox_storage(lz_git_plan *p, const target_forms *t)
{
    const lz_resolved_config *cfg = p->cfg;
    /* /proc/self/cwd/…, /dev/fd/…: what these name depends on the process
     * that follows them — on the host, the developer's shell. */
    if (in_sandbox_state(cfg, t))
        return true;
    const char *forms[] = { t->lexical, t->resolved };
    for (size_t f = 0; f < LZ_ARRAY_SIZE(forms); f++) {
        if (!forms[f])
            continue;
        /* Inside the workspace, into a Git directory's internals, which the
         * audit does not walk (a repository built in .git/objects/…). */
        _cleanup_free_ char *inside = lz_lexical_rel(cfg->workspace.label, forms[f]);
        for (size_t g = 0; inside && g < p->n_git_dirs; g++)
            if (strcmp(p->git_dirs[g], ".") == 0 || lz_path_within(inside, p->git_dirs[g]))
                return true;
    }
    return false;
}

/* A symlink the sandbox made that points outside the workspace to a place
 * the developer owns (on the host): another profile's volume, another
 * workspace — trees the sandbox (or another Domain's) may write and this
 * audit does not walk. Links to the system's files (not the developer's)
 * stay: inside the sandbox they name the image's own. */
static bool link_to_developers_own(lz_git_plan *p, const target_forms *t)
{
    const char *where = t->resolved ? t->resolved : t->lexical;
    if (lz_path_within(where, p->cfg->workspace.label))
        return false;
    /* Whose place is it? The developer's home, or any existing ancestor
     * the developer owns: a directory the sandbox chowned to another uid
     * inside a volume still lies in the developer's tree. */
    const char *home = getenv("HOME");
    if (home && home[0] == '/' && strcmp(home, "/") != 0 && lz_path_within(where, home))
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
    static const char *const internal[] = { "objects", "refs",      "logs",    "hooks",   "info",
                                            "modules", "worktrees", "remotes", "branches" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(internal); i++)
        if (strcmp(name, internal[i]) == 0)
            return true;
    return false;
}

/* One entry `name` of the tree directory dfd (= rel). */
int lz_gs_visit_entry(walk *w, int dfd, const char *rel, const char *name, int depth)
{
    lz_git_plan *p = w->p;
    struct stat st;
    _cleanup_free_ char *child = lz_rel_join(rel, name);
    int sr = lz_gs_sight_lstat(p, dfd, name, &st);
    if (sr < 0) {
        if (errno == ENOENT)
            return 0; /* gone meanwhile */
        lz_gs_fail_at(w, child);
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
        lz_gs_add_marker(&p->markers, &p->n_markers, child, &st);
    bool bad_link = false;
    if (S_ISLNK(st.st_mode) && p->cfg) {
        char target[PATH_MAX];
        ssize_t n = lz_gs_sight_readlink(p, dfd, name, target, sizeof(target) - 1);
        if (n > 0) {
            target[n] = '\0';
            target_forms forms;
            target_forms_of(p->cfg, rel, target, &forms);
            bad_link = link_into_sandbox_storage(p, &forms) ||
                       (!w->b && !lz_gs_known(p->markers, p->n_markers, child, &st) &&
                        link_to_developers_own(p, &forms));
            target_forms_free(&forms);
        }
    }
    if (bad_link) {
        if (w->b) {
            lz_gs_fail_at(w, child);
            lz_error_set(w->err, 0,
                         "Git Sentry: the workspace symlink %s/%s points into a "
                         "directory the sandbox can write outside the workspace",
                         w->b->ws, child);
            return lz_error_hint(w->err, "the host's Git run through it would obey what the "
                                         "sandbox wrote there: remove the symlink, or make the "
                                         "volume read-only");
        }
        return lz_gs_quarantine(w, dfd, rel, name) < 0 ? -1 : 0;
    }
    if (!S_ISDIR(st.st_mode))
        return 0;
    if (!rel[0] && p->kind == LZ_GIT_BARE && bare_internal(name))
        return 0; /* inside the bare workspace's Git directory (docs/git.md) */
    if (depth + 1 > MAX_TREE_DEPTH) {
        /* Deeper than the audit goes: the whole subtree is set aside in
         * the audit (the developer's own at start: refused). */
        if (w->b) {
            lz_gs_fail_at(w, child);
            lz_error_set(w->err, 0, "Git Sentry: %s/%s is nested deeper than %d directories",
                         w->b->ws, child, MAX_TREE_DEPTH);
            return lz_error_hint(w->err, "ignore it in .gitignore, or move it out of the "
                                         "workspace");
        }
        return lz_gs_quarantine(w, dfd, rel, name) < 0 ? -1 : 0;
    }
    /* Taken away by the sandbox? A directory of another sandbox user's
     * that is closed to the developer is audited through the eye. */
    if (st.st_uid == getuid() && (st.st_mode & S_IRWXU) != S_IRWXU)
        lz_gs_make_ours_writable(dfd, name);
    /* A rename the audit followed: its subtree is watched and was audited
     * (or its events are queued), so it is not walked again. */
    if (w->known_subtree && strcmp(child, w->known_subtree) == 0)
        return 0;
    /* In event mode, a directory already under watch (the same inode) was
     * audited and its events come: a mode change of it, say, is no reason
     * to walk it again (attack round i23b: chmod of a 20,000-directory tree
     * made a walk per event, and what waited behind it stayed for seconds). */
    if (w->events) {
        lz_git_dirwatch *pw = lz_gs_watch_by_rel(p, rel);
        int cwd = pw ? lz_gs_child_get(p, pw->wd, name) : -1;
        lz_git_dirwatch *cw = cwd > 0 ? lz_gs_watch_by_wd(p, cwd) : NULL;
        if (cw && cw->dev == st.st_dev && cw->ino == st.st_ino)
            return 0;
    }
    if (w->no_descend)
        return 0; /* judged as an entry now; walked in its turn */
    _cleanup_close_ int cfd = lz_gs_sight_open(p, dfd, name, O_RDONLY | O_DIRECTORY);
    if (cfd < 0) {
        int en = errno;
        if (en == ENOENT)
            return 0;
        /* Another mount inside the workspace: the sandbox does not see it
         * (the workspace is bound without its submounts). */
        if (en == EXDEV)
            return 0;
        if (lz_gs_refused(en) && !lz_gs_sandbox_may_enter(p, &st))
            return 0; /* nothing in it is the sandbox's */
        /* Not readable even by the eye (or no eye): it could hide a
         * repository the developer's git can reach, or one the sandbox
         * opens to it later. */
        lz_gs_fail_at(w, child);
        lz_error_set(w->err, en, "Git Sentry: cannot audit the directory %s%s%s", child,
                     p->eye_error ? ": " : "", p->eye_error ? p->eye_error : "");
        return lz_error_hint(w->err, "make it readable (chmod u+rx), or remove it");
    }
    return lz_gs_walk_dir(w, cfd, child, depth + 1);
}

int lz_gs_walk_dir(walk *w, int dfd, const char *rel, int depth)
{
    lz_git_plan *p = w->p;
    if (lz_gs_add_watch(w, dfd, rel, ROLE_TREE) < 0)
        return -1;
    if (w->watch && p->n_tree_dirs > MAX_TREE_DIRS) {
        p->over_limit = true;
        lz_error_set(w->err, 0,
                     "Git Sentry: the workspace has more than %d directories outside "
                     "git-ignored paths",
                     MAX_TREE_DIRS);
        return lz_error_hint(w->err, "ignore generated directories in .gitignore, or choose a "
                                     "smaller workspace");
    }
    size_t n;
    char **names = list_names(dfd, &n);
    if (!names && errno == EACCES && lz_gs_make_ours_writable(dfd, NULL) == 0)
        names = list_names(dfd, &n);
    if (!names) {
        lz_gs_fail_at(w, rel[0] ? rel : ".");
        return lz_error_set(w->err, errno, "Git Sentry: cannot read %s",
                            rel[0] ? rel : "the workspace");
    }
    int r = 0;
    for (size_t i = 0; r == 0 && i < n; i++) {
        r = lz_gs_visit_entry(w, dfd, rel, names[i], depth);
        if (r == 0 && w->peek && !w->in_peek && ++w->since_peek >= PEEK_EVERY)
            r = w->peek(w);
    }
    free_names(names, n);
    if (r == 0)
        r = lz_gs_check_bare(w, dfd, rel);
    return r;
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
int lz_gs_visit_inner_entry(walk *w, int dfd, const char *rel, const char *name, int depth)
{
    lz_git_plan *p = w->p;
    _cleanup_free_ char *child = lz_rel_join(rel, name);
    if (has_ro_mount(p, child) || lz_gs_listed(p->git_dirs, p->n_git_dirs, child) ||
        (p->quarantine_rel && strcmp(child, p->quarantine_rel) == 0))
        return 0; /* read-only, or audited as a Git directory of its own */
    struct stat st;
    int sr = lz_gs_sight_lstat(p, dfd, name, &st);
    if (sr < 0) {
        if (errno == ENOENT)
            return 0;
        lz_gs_fail_at(w, child);
        return lz_error_set(w->err, errno, "Git Sentry: cannot audit %s", child);
    }
    if (S_ISLNK(st.st_mode) || strcmp(name, ".git") == 0)
        return lz_gs_quarantine(w, dfd, rel, name) < 0 ? -1 : 0;
    if (!S_ISDIR(st.st_mode))
        return 0;
    if (depth + 1 > MAX_TREE_DEPTH)
        return lz_gs_quarantine(w, dfd, rel, name) < 0 ? -1 : 0;
    if (st.st_uid == getuid() && (st.st_mode & S_IRWXU) != S_IRWXU)
        lz_gs_make_ours_writable(dfd, name);
    if (w->no_descend)
        return 0; /* judged as an entry now; walked in its turn */
    _cleanup_close_ int cfd = lz_gs_sight_open(p, dfd, name, O_RDONLY | O_DIRECTORY);
    if (cfd < 0) {
        int en = errno;
        if (en == ENOENT || en == EXDEV)
            return 0;
        lz_gs_fail_at(w, child);
        return lz_error_set(w->err, en, "Git Sentry: cannot audit the directory %s", child);
    }
    return walk_git_inner(w, cfd, child, depth + 1);
}

/* HEAD beside objects/, a commondir or a config, below a Git directory's top
 * level: a Git directory hidden in another (logs/ holds a HEAD beside refs/:
 * the reflog, not a repository). */
int lz_gs_check_inner_bare(walk *w, int dfd, const char *rel)
{
    struct stat st;
    if (lz_gs_sight_lstat(w->p, dfd, "HEAD", &st) < 0)
        return 0;
    static const char *const companions[] = { "objects", "commondir", "config" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(companions); i++)
        if (lz_gs_sight_lstat(w->p, dfd, companions[i], &st) == 0)
            return lz_gs_quarantine(w, dfd, rel, "HEAD") < 0 ? -1 : 0;
    return 0;
}

static int walk_git_inner(walk *w, int dfd, const char *rel, int depth)
{
    if (lz_gs_add_watch(w, dfd, rel, depth ? ROLE_GITINNER : ROLE_GITDIR) < 0)
        return -1;
    if (w->watch && w->p->n_tree_dirs > MAX_TREE_DIRS) {
        w->p->over_limit = true;
        lz_error_set(w->err, 0,
                     "Git Sentry: the workspace has more than %d directories "
                     "to watch",
                     MAX_TREE_DIRS);
        return lz_error_hint(w->err, "ignore generated directories in .gitignore, or choose a "
                                     "smaller workspace");
    }
    size_t n;
    char **names = list_names(dfd, &n);
    if (!names) {
        lz_gs_fail_at(w, rel);
        return lz_error_set(w->err, errno, "Git Sentry: cannot read %s", rel);
    }
    int r = 0;
    for (size_t i = 0; r == 0 && i < n; i++)
        r = lz_gs_visit_inner_entry(w, dfd, rel, names[i], depth);
    free_names(names, n);
    if (r == 0 && depth > 0)
        r = lz_gs_check_inner_bare(w, dfd, rel);
    return r;
}

/* The top level of every protected Git directory: nothing of
 * lz_gs_git_dir_entries may appear that is not a mount (protected at start); in a
 * modules/ directory no member may appear that was not there. */
int lz_gs_audit_git_dirs(walk *w)
{
    lz_git_plan *p = w->p;
    for (size_t g = 0; g < p->n_git_dirs; g++) {
        const char *gd = p->git_dirs[g];
        lz_error *e = NULL;
        _cleanup_close_ int dfd =
            lz_open_dir_confined(p->ws_fd, strcmp(gd, ".") ? gd : "", O_RDONLY, &e);
        if (dfd < 0) {
            lz_error_free(e);
            continue; /* a nested Git directory that was quarantined or removed */
        }
        if (lz_gs_add_watch(w, dfd, strcmp(gd, ".") ? gd : "", ROLE_GITDIR) < 0)
            return -1;
        for (size_t k = 0; k < LZ_ARRAY_SIZE(lz_gs_git_dir_entries); k++) {
            _cleanup_free_ char *rel = lz_rel_join(gd, lz_gs_git_dir_entries[k]);
            struct stat st;
            if (lz_gs_sight_lstat(p, dfd, lz_gs_git_dir_entries[k], &st) < 0 ||
                lz_gs_has_mount(p, rel))
                continue;
            if (lz_gs_quarantine(w, dfd, strcmp(gd, ".") ? gd : "", lz_gs_git_dir_entries[k]) < 0)
                return -1;
        }
        if (lz_gs_audit_sequencer(w, dfd, gd) < 0)
            return -1;
        /* Then everything inside it: no symlink, no repository. */
        if (walk_git_inner(w, dfd, strcmp(gd, ".") ? gd : "", 0) < 0)
            return -1;
        _cleanup_free_ char *mods = lz_rel_join(gd, "modules");
        if (!lz_gs_has_mount(p, mods))
            continue;
        _cleanup_close_ int mfd = lz_open_dir_confined(p->ws_fd, mods, O_RDONLY, NULL);
        if (mfd < 0)
            continue;
        if (lz_gs_add_watch(w, mfd, mods, ROLE_MODULES) < 0)
            return -1;
        size_t n;
        char **names = list_names(mfd, &n);
        int r = 0;
        for (size_t i = 0; r == 0 && names && i < n; i++) {
            _cleanup_free_ char *member = lz_xasprintf("%s/%s", mods, names[i]);
            struct stat st;
            if (lz_gs_sight_lstat(p, mfd, names[i], &st) == 0 &&
                !lz_gs_known(p->members, p->n_members, member, &st) &&
                lz_gs_quarantine(w, mfd, mods, names[i]) < 0)
                r = -1;
        }
        free_names(names, n);
        if (r < 0)
            return -1;
    }
    return 0;
}

int lz_gs_walk_finish(walk *w, int r, char **ret_report)
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

int lz_gs_full_audit(lz_git_plan *p, bool watch, char **ret_report, lz_error **err)
{
    walk w = { .p = p, .watch = watch, .err = err };
    /* (A .git the sandbox makes at the top of a workspace that is not a
     * repository is an entry of the tree like any other.) */
    _cleanup_close_ int top = lz_open_dir_confined(p->ws_fd, "", O_RDONLY, err);
    int r = top < 0 ? -1 : lz_gs_walk_dir(&w, top, "", 0);
    /* The Git directories are audited even when the tree walk failed: a
     * fail-closed stop must not leave their state behind (the first error
     * is the one reported). */
    if (lz_gs_audit_git_dirs(&w) < 0)
        r = -1;
    return lz_gs_walk_finish(&w, r, ret_report);
}
