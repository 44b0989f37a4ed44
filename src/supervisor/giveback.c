/* SPDX-License-Identifier: Apache-2.0 */
#include "supervisor/giveback.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <linux/openat2.h>
#include <unistd.h>

#include "common/syscalls.h"
#include "common/text.h"
#include "common/util.h"
#include "ns/userns.h"

#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452 /* Linux 6.6: the first chmod that takes AT_EMPTY_PATH */
#endif

/* Descriptors the walk may hold besides its two per level. */
#define FD_MARGIN 64

typedef struct gb_walk {
    lz_giveback_stats *s;
    unsigned max_depth;
    char path[1024]; /* the directory being walked, relative to the top (reports only) */
} gb_walk;

static bool subordinate(uint32_t id)
{
    /* Inside lz_userns_call_shifted's namespace the developer is 0, the
     * subordinate ids are the shifted range, and every other owner shows
     * as the overflow id, which that range never holds. */
    return id >= LZ_USERNS_SHIFTED_BASE && id - LZ_USERNS_SHIFTED_BASE < LZ_SUBID_COUNT;
}

/* Open dfd/name (one component) without following a symlink, leaving the
 * tree or crossing into another mount. With O_PATH a trailing symlink is
 * opened as the link itself. */
static int open_beneath(int dfd, const char *name, uint64_t flags)
{
    struct open_how how = {
        .flags = flags | O_NOFOLLOW | O_CLOEXEC,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
    };
    return (int) syscall(SYS_openat2, dfd, name, &how, sizeof(how));
}

/* Append s to buf (size cap, NUL-terminated) as far as it fits. */
static void append_cut(char *buf, size_t cap, const char *s)
{
    size_t o = strlen(buf), k = strlen(s);
    if (o + 1 >= cap)
        return;
    if (k > cap - 1 - o)
        k = cap - 1 - o;
    memcpy(buf + o, s, k);
    buf[o + k] = '\0';
}

static void note_left(gb_walk *w, const char *name, int e)
{
    if (w->s->left++ == 0) {
        w->s->left_errno = e;
        w->s->left_path[0] = '\0';
        append_cut(w->s->left_path, sizeof(w->s->left_path), w->path);
        if (w->path[0] && name[0])
            append_cut(w->s->left_path, sizeof(w->s->left_path), "/");
        append_cut(w->s->left_path, sizeof(w->s->left_path), name);
    }
}

/* Clear setuid/setgid of the object fd (an O_PATH descriptor of dfd/name)
 * while it still belongs to a subordinate id: a file that became the
 * developer's with the bit would be a setuid-developer program. */
static int strip_setid(int dfd, const char *name, int fd, const struct stat *st)
{
    mode_t mode = st->st_mode & 07777 & ~(mode_t) (S_ISUID | S_ISGID);
    if (syscall(SYS_fchmodat2, fd, "", mode, AT_EMPTY_PATH) == 0)
        return 0;
    if ((errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP) || dfd < 0)
        return -1;
    /* Before Linux 6.6 an O_PATH descriptor cannot be chmod-ed: reopen the
     * same object (checked by identity) readable. Only regular files get
     * here, which opening does not disturb. */
    if (!S_ISREG(st->st_mode)) {
        errno = EOPNOTSUPP;
        return -1;
    }
    _cleanup_close_ int rfd = open_beneath(dfd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY);
    struct stat again;
    if (rfd < 0 || fstat(rfd, &again) < 0)
        return -1;
    if (again.st_dev != st->st_dev || again.st_ino != st->st_ino) {
        errno = ESTALE;
        return -1;
    }
    return fchmod(rfd, mode);
}

/* Give the object fd back when a subordinate id owns it (uid, gid or
 * both; only those change). dfd/name name it for the fallback above (dfd
 * -1 for a top). */
static void give_back(gb_walk *w, int dfd, const char *name, int fd, const struct stat *st)
{
    bool u = subordinate(st->st_uid), g = subordinate(st->st_gid);
    if (!u && !g)
        return;
    /* On a directory the bits grant nothing by execution (setgid only
     * picks the group of new entries, the developer's after this), and a
     * symlink has no mode of its own. */
    if (!S_ISDIR(st->st_mode) && !S_ISLNK(st->st_mode) && (st->st_mode & (S_ISUID | S_ISGID))) {
        if (strip_setid(dfd, name, fd, st) < 0) {
            note_left(w, name, errno);
            return; /* never hand over a file that keeps the bit */
        }
        w->s->stripped++;
    }
    /* On the descriptor that was checked, never by name: a symlink is
     * changed as the link itself, its target is never reached. The kernel
     * also drops file capabilities (security.capability) on a chown. */
    if (fchownat(fd, "", u ? 0 : (uid_t) -1, g ? 0 : (gid_t) -1, AT_EMPTY_PATH) < 0) {
        note_left(w, name, errno);
        return;
    }
    w->s->given++;
}

static void walk_dir(gb_walk *w, int dfd, unsigned depth)
{
    int dup = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
    DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
    if (!d) {
        note_left(w, "", errno);
        if (dup >= 0)
            close(dup);
        return;
    }
    struct dirent *e;
    while ((errno = 0, e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        w->s->entries++;
        int fd = open_beneath(dfd, e->d_name, O_PATH);
        if (fd < 0) {
            if (errno == EXDEV)
                w->s->mounts++; /* another mount: never the sandbox's to have written */
            else if (errno != ENOENT)
                note_left(w, e->d_name, errno);
            continue;
        }
        struct stat st;
        if (fstat(fd, &st) < 0) {
            note_left(w, e->d_name, errno);
            close(fd);
            continue;
        }
        give_back(w, dfd, e->d_name, fd, &st);
        close(fd);
        if (!S_ISDIR(st.st_mode))
            continue;
        if (depth + 1 > w->max_depth) {
            w->s->deep++;
            continue;
        }
        int sub = open_beneath(dfd, e->d_name, O_RDONLY | O_DIRECTORY);
        if (sub < 0) {
            if (errno == EXDEV)
                w->s->mounts++;
            else if ((errno == EACCES || errno == EPERM) && st.st_uid != 0 &&
                     !subordinate(st.st_uid))
                w->s->unreadable++; /* another user's: the sandbox could not write there */
            else if (errno != ENOENT)
                note_left(w, e->d_name, errno);
            continue;
        }
        struct stat again;
        if (fstat(sub, &again) < 0 || again.st_dev != st.st_dev || again.st_ino != st.st_ino) {
            note_left(w, e->d_name, ESTALE); /* replaced under us: not what was checked */
            close(sub);
            continue;
        }
        size_t len = strlen(w->path);
        if (len)
            append_cut(w->path, sizeof(w->path), "/");
        append_cut(w->path, sizeof(w->path), e->d_name);
        walk_dir(w, sub, depth + 1);
        w->path[len] = '\0';
        close(sub);
    }
    if (errno != 0)
        note_left(w, "", errno);
    closedir(d);
}

static void walk_top(gb_walk *w, int top)
{
    struct stat st;
    w->s->entries++;
    if (fstat(top, &st) < 0) {
        note_left(w, ".", errno);
        return;
    }
    give_back(w, -1, ".", top, &st);
    if (!S_ISDIR(st.st_mode))
        return;
    _cleanup_close_ int rd = openat(top, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rd < 0) {
        note_left(w, ".", errno);
        return;
    }
    walk_dir(w, rd, 0);
}

typedef struct gb_job {
    lz_giveback_tree *trees;
    size_t n;
    lz_giveback_stats *shared; /* MAP_SHARED: what the helper counts reaches the caller */
} gb_job;

static int giveback_in_userns(void *arg, lz_error **err)
{
    (void) err;
    gb_job *j = arg;
    /* Two descriptors per level: as deep as the hard limit allows, up to
     * the bound. This process is the helper's own; its limit goes with it. */
    unsigned max_depth = LZ_GIVEBACK_MAX_DEPTH;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rlim_t want = 2 * (rlim_t) LZ_GIVEBACK_MAX_DEPTH + FD_MARGIN;
        if (rl.rlim_cur < want) {
            rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
            lz_best_effort(setrlimit(RLIMIT_NOFILE, &rl));
            lz_best_effort(getrlimit(RLIMIT_NOFILE, &rl));
        }
        if (rl.rlim_cur < want)
            max_depth =
                rl.rlim_cur > 2 * FD_MARGIN ? (unsigned) ((rl.rlim_cur - FD_MARGIN) / 2) : 16;
    }
    for (size_t i = 0; i < j->n; i++) {
        gb_walk w = { .s = &j->shared[i], .max_depth = max_depth };
        memset(w.s, 0, sizeof(*w.s));
        walk_top(&w, j->trees[i].fd);
    }
    return 0;
}

int lz_giveback_trees(lz_giveback_tree *trees, size_t n, lz_error **err)
{
    if (n == 0)
        return 0;
    size_t size = n * sizeof(lz_giveback_stats);
    lz_giveback_stats *shared =
        mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED)
        return lz_error_set(err, errno, "cannot map memory for the ownership give-back");
    memset(shared, 0, size);
    gb_job j = { .trees = trees, .n = n, .shared = shared };
    int r = lz_userns_call_shifted(giveback_in_userns, &j, err);
    if (r == 0)
        for (size_t i = 0; i < n; i++)
            trees[i].stats = shared[i];
    munmap(shared, size);
    if (r < 0)
        return lz_error_prefix(err, "cannot give back what the sandbox left owned by your "
                                    "subordinate ids");
    return 0;
}

char *lz_giveback_tree_line(const lz_giveback_tree *t)
{
    const lz_giveback_stats *s = &t->stats;
    if (!s->given && !s->left && !s->deep && !s->mounts && !s->unreadable)
        return NULL;
    char buf[1536];
    int o = snprintf(buf, sizeof(buf), "%s: %llu of %llu entries given back", t->label,
                     (unsigned long long) s->given, (unsigned long long) s->entries);
    if (s->stripped && o >= 0 && (size_t) o < sizeof(buf))
        o += snprintf(buf + o, sizeof(buf) - (size_t) o, " (setuid/setgid cleared on %llu)",
                      (unsigned long long) s->stripped);
    if (s->left && o >= 0 && (size_t) o < sizeof(buf))
        o += snprintf(buf + o, sizeof(buf) - (size_t) o,
                      "; %llu left with a subordinate id "
                      "(first: %s: %s)",
                      (unsigned long long) s->left, s->left_path, strerror(s->left_errno));
    if (s->deep && o >= 0 && (size_t) o < sizeof(buf))
        o += snprintf(buf + o, sizeof(buf) - (size_t) o,
                      "; %llu directories deeper than the "
                      "walk's bound not entered",
                      (unsigned long long) s->deep);
    if (s->mounts && o >= 0 && (size_t) o < sizeof(buf))
        o += snprintf(buf + o, sizeof(buf) - (size_t) o, "; %llu mount points not entered",
                      (unsigned long long) s->mounts);
    if (s->unreadable && o >= 0 && (size_t) o < sizeof(buf))
        snprintf(buf + o, sizeof(buf) - (size_t) o,
                 "; %llu directories of other users not "
                 "readable",
                 (unsigned long long) s->unreadable);
    return lz_text_printable(buf);
}

static void append(char **report, const char *line)
{
    char *next = lz_xasprintf("%s%s%s", *report ? *report : "", *report ? "\n" : "", line);
    free(*report);
    *report = next;
}

int lz_giveback_domain(const lz_resolved_config *cfg, char **ret_report, bool *ret_incomplete,
                       lz_error **err)
{
    size_t cap = 1 + cfg->n_volumes, n = 0;
    lz_giveback_tree *trees = lz_xcalloc(cap, sizeof(*trees));
    char *report = NULL;
    bool incomplete = false;
    int r = -1;
    trees[n].fd = lz_plan_open(&cfg->workspace, O_PATH | O_DIRECTORY, true, err);
    if (trees[n].fd < 0) {
        lz_error_prefix(err, "cannot give back ownership in the workspace");
        goto out;
    }
    trees[n++].label = cfg->workspace.label;
    for (size_t i = 0; i < cfg->n_volumes; i++) {
        const lz_resolved_volume *v = &cfg->volumes[i];
        if (v->access == LZ_ACCESS_READ_ONLY)
            continue; /* the sandbox could not change it */
        lz_error *e = NULL;
        int fd = lz_plan_open(
            &v->source, O_PATH | (v->kind == LZ_VOLUME_DIRECTORY ? O_DIRECTORY : 0), true, &e);
        if (fd < 0) {
            _cleanup_free_ char *line =
                lz_xasprintf("%s: not walked: %s%s%s", v->source.label, e->message,
                             e->errnum ? ": " : "", e->errnum ? strerror(e->errnum) : "");
            _cleanup_free_ char *p = lz_text_printable(line);
            append(&report, p);
            incomplete = true;
            lz_error_free(e);
            continue;
        }
        trees[n].fd = fd;
        trees[n++].label = v->source.label;
    }
    if (lz_giveback_trees(trees, n, err) < 0)
        goto out;
    for (size_t i = 0; i < n; i++) {
        _cleanup_free_ char *line = lz_giveback_tree_line(&trees[i]);
        if (line)
            append(&report, line);
        if (trees[i].stats.left || trees[i].stats.deep)
            incomplete = true;
    }
    *ret_report = TAKE_PTR(report);
    *ret_incomplete = incomplete;
    r = 0;
out:
    for (size_t i = 0; i < n; i++)
        close(trees[i].fd);
    free(trees);
    free(report);
    return r;
}
