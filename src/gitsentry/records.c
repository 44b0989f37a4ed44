/* SPDX-License-Identifier: Apache-2.0
 *
 * Git Sentry: what the Git Sentry keeps in the Domain Root: the unsafe record (an
 * entry an audit could not neutralise refuses the next start), the
 * baseline (for a generation that ended without its last audit), and the
 * lists of isolated ignored paths and placeholders.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/io.h"
#include "common/util.h"
#include "fs/atomic.h"
#include "fs/confined.h"
#include "gitsentry/internal.h"

void lz_gs_names_add(name_list *l, const char *s)
{
    if (l->n == 0 || (l->n & (l->n - 1)) == 0)
        l->v = lz_xrealloc(l->v, l->n ? 2 * l->n : 1, sizeof(char *));
    l->v[l->n++] = lz_xstrdup(s);
}

void lz_gs_names_clear(name_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    *l = (name_list){ 0 };
}

bool lz_gs_names_has(const name_list *l, const char *s)
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
int lz_gs_record_read(int droot, const char *name, size_t max, const char *label, name_list *ret,
                      lz_error **err)
{
    int fd = openat(droot, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return 0;
    struct stat st;
    bool ok =
        fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t) st.st_size <= RECORD_MAX;
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
            lz_gs_names_add(ret, e);
    }
    free(buf);
    if (ok)
        return 0;
    lz_error_set(err, 0,
                 "%s/%s is damaged or longer than Lazaret writes it (at most %zu "
                 "entries)",
                 label, name, max);
    return lz_error_hint(err, "it records which git-ignored paths this Domain keeps hidden; "
                              "lazaret state reset removes it with the copies, and then only "
                              "what the ignore rules say now stays hidden: check them first "
                              "(git status --ignored), then reset and run again");
}

/* Replace a record atomically (a failure keeps the old one). */
int lz_gs_record_write(int droot, const char *name, const name_list *l, const char *label,
                       lz_error **err)
{
    /* Each name with its NUL, one iovec per name. */
    struct iovec *iov = lz_xcalloc(l->n ? l->n : 1, sizeof(*iov));
    for (size_t i = 0; i < l->n; i++)
        iov[i] = (struct iovec){ .iov_base = l->v[i], .iov_len = strlen(l->v[i]) + 1 };
    _cleanup_free_ char *what = lz_xasprintf("%s/%s", label, name);
    int r = lz_write_atomic_iov(droot, name, iov, l->n, 0600, 0, what, err);
    free(iov);
    return r;
}

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
int lz_gs_check_unsafe(builder *b, lz_error **err)
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
            r = lz_error_hint(err,
                              "check %s for repositories the sandbox made, then delete "
                              "that file and run again",
                              b->ws);
            break;
        }
        struct stat st;
        bool whole = strcmp(line, ".") == 0 || !lz_path_is_normalized_rel(line);
        if (!whole && lz_lstat_confined(b->ws_fd, line, &st) < 0 && errno == ENOENT)
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
    _cleanup_close_ int droot =
        lz_plan_open(&cfg->storage_domain_root, O_PATH | O_DIRECTORY, true, err);
    if (droot < 0)
        return -1;
    int fd =
        lz_open_confined(droot, UNSAFE_FILE, O_WRONLY | O_CREAT | O_APPEND, 0600, UNSAFE_FILE, err);
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

/* ---- the baseline, for a generation that ends without its last audit -- */

/* One record a line: a tag, numbers, then a length-prefixed path (names
 * may hold any byte but '/' and NUL). */
static void put_rec(FILE *f, char tag, unsigned long long a, unsigned long long b, const char *rel)
{
    fprintf(f, "%c %llu %llu %zu ", tag, a, b, strlen(rel));
    fwrite(rel, 1, strlen(rel), f);
    fputc('\n', f);
}

int lz_gs_save_baseline(lz_git_plan *p, lz_error **err)
{
    _cleanup_close_ int droot =
        lz_plan_open(&p->cfg->storage_domain_root, O_PATH | O_DIRECTORY, true, err);
    if (droot < 0)
        return -1;
    /* Composed in memory, then written whole (fs/atomic.h). */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return lz_error_set(err, errno, "cannot record the Git Sentry baseline in %s",
                            p->cfg->storage_domain_root.label);
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
    if (fclose(f) != 0) {
        free(text);
        return lz_error_set(err, errno, "cannot record the Git Sentry baseline in %s",
                            p->cfg->storage_domain_root.label);
    }
    _cleanup_free_ char *what =
        lz_xasprintf("the Git Sentry baseline in %s", p->cfg->storage_domain_root.label);
    int r = lz_write_atomic(droot, BASELINE_FILE, text, len, 0600, 0, what, err);
    free(text);
    return r;
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
            t->mounts[t->n_mounts++] =
                (lz_workspace_mount){ rel, LZ_MOUNT_FROM_WORKSPACE, true, true };
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
            lz_gs_add_marker(&t->markers, &t->n_markers, rel, &st);
            break;
        case 'N':
            lz_gs_add_marker(&t->members, &t->n_members, rel, &st);
            break;
        default:
            free(rel);
            return -1;
        }
        free(rel);
    }
    return -1;
}

/* Read the baseline a generation left behind when it ended without its
 * last audit (its coordinator was killed) into *t: 1 when read, 0 when
 * there is none, 2 when it is damaged (*t partly filled), -1 with *err when
 * it cannot be opened. The caller audits against it (plan.c). */
int lz_gs_read_baseline(const lz_resolved_config *cfg, lz_git_plan *t, lz_error **err)
{
    _cleanup_close_ int droot = -1;
    FILE *f = open_record(cfg, BASELINE_FILE, &droot, err);
    if (!f)
        return err && *err ? -1 : 0;
    int r = load_baseline(f, t);
    fclose(f);
    lz_gs_index_mounts(t);
    if (r == 0 && t->n_ignored > 1)
        qsort(t->ignored, t->n_ignored, sizeof(char *), lz_gs_cmp_str);
    return r == 0 && t->quarantine_rel && lz_path_is_normalized_rel(t->quarantine_rel) ? 1 : 2;
}
