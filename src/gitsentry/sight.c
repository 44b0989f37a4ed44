/* SPDX-License-Identifier: Apache-2.0
 *
 * Git Sentry: how the audit looks, and what it does with what it finds: as the
 * developer, then — refused for want of permission — by the eye (eye.h);
 * the quarantine move; the report of what was moved.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/text.h"
#include "common/util.h"
#include "fs/confined.h"
#include "fs/relpath.h"
#include "gitsentry/internal.h"
#include "ns/userns.h"

/* Append an already printable line to the report. */
void lz_gs_report_append(walk *w, const char *line)
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
    lz_gs_report_append(w, line);
    free(line);
}

/* The first thing an audit could not neutralise (what the record names). */
void lz_gs_fail_at(walk *w, const char *rel)
{
    if (!w->p->failed_rel)
        w->p->failed_rel = lz_xstrdup(rel);
}

/* Give the developer's own directory dfd (name NULL) or dfd/name (a
 * directory, reached without following anything) back read, write and search
 * permission for its owner: the sandbox can take them away from what it made,
 * to hide it from the audit. Returns 0 when the directory is the developer's
 * and now u+rwx. */
int lz_gs_make_ours_writable(int dfd, const char *name)
{
    _cleanup_close_ int fd =
        name ? lz_open_confined(dfd, name, O_PATH | O_NOFOLLOW | O_DIRECTORY, 0, name, NULL)
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

/* ---- looking where the developer cannot (eye.h) -------------------------------- */

/* A directory of another sandbox user that it closed (mode 0700, say) is
 * closed to the developer and to this audit, which runs as the developer:
 * the eye opens it, watches it and moves what must go out of it, so that
 * nothing the sandbox builds is unseen until the moment it is opened
 * (attack round i23c; docs/git.md "Directories closed to the developer").
 * The developer's own directory is given back u+rwx instead (what the
 * sandbox took away from it). */

/* The eye, started at its first use. NULL (errno EACCES) when it cannot be
 * started: what the developer cannot look into then fails the audit. */
lz_sentry_eye *lz_gs_eye_of(lz_git_plan *p)
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

bool lz_gs_refused(int en)
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
bool lz_gs_sandbox_may_enter(lz_git_plan *p, const struct stat *st)
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
    bool uid = st->st_uid == getuid() ||
               (st->st_uid >= p->subuid_start && st->st_uid - p->subuid_start < LZ_SUBID_COUNT);
    bool gid = st->st_gid == getgid() ||
               (st->st_gid >= p->subgid_start && st->st_gid - p->subgid_start < LZ_SUBID_COUNT);
    return uid || gid;
}

/* lz_open_confined(dfd, rel, flags) as the developer or, refused for want
 * of permission, by the eye. Returns the fd, or -1 with errno. */
int lz_gs_sight_open(lz_git_plan *p, int dfd, const char *rel, int flags)
{
    lz_error *e = NULL;
    int fd = lz_open_confined(dfd, rel, flags, 0, rel, &e);
    int en = fd < 0 ? (e ? e->errnum : errno) : 0;
    lz_error_free(e);
    if (fd >= 0)
        return fd;
    errno = en;
    if (!lz_gs_refused(en))
        return -1;
    lz_sentry_eye *eye = lz_gs_eye_of(p);
    return eye ? lz_sentry_eye_open(eye, dfd, rel, flags) : -1;
}

/* lstat of dfd/name: as the developer, again after giving the developer's
 * own directory dfd back its search permission, or by the eye. */
int lz_gs_sight_lstat(lz_git_plan *p, int dfd, const char *name, struct stat *st)
{
    if (fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) == 0)
        return 0;
    if (!lz_gs_refused(errno))
        return -1;
    if (lz_gs_make_ours_writable(dfd, NULL) == 0 &&
        fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) == 0)
        return 0;
    lz_sentry_eye *eye = lz_gs_eye_of(p);
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
ssize_t lz_gs_sight_readlink(lz_git_plan *p, int dfd, const char *name, char *buf, size_t size)
{
    ssize_t n = readlinkat(dfd, name, buf, size);
    if (n >= 0 || !lz_gs_refused(errno))
        return n;
    lz_sentry_eye *eye = lz_gs_eye_of(p);
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
int lz_gs_quarantine(walk *w, int dfd, const char *dir_rel, const char *name)
{
    lz_git_plan *p = w->p;
    _cleanup_free_ char *rel = lz_rel_join(dir_rel, name);
    char target[NAME_MAX + 1];
    snprintf(target, sizeof(target), "%lld-%d-%lu-%s-%s", (long long) time(NULL), (int) getpid(),
             ++p->quarantined, dir_rel[0] ? dir_rel : "top", name);
    for (char *c = target; *c; c++)
        if (*c == '/')
            *c = '_';
    int r = renameat(dfd, name, p->quarantine_fd, target);
    if (r < 0 && lz_gs_refused(errno)) {
        /* The sandbox took our write permission away (on the directory, or
         * on a directory entry, which a rename to another parent needs):
         * what we own we can give back; what another sandbox user owns the
         * eye moves. */
        lz_gs_make_ours_writable(dfd, NULL);
        lz_gs_make_ours_writable(dfd, name);
        r = renameat(dfd, name, p->quarantine_fd, target);
        lz_sentry_eye *eye = r < 0 && lz_gs_refused(errno) ? lz_gs_eye_of(p) : NULL;
        if (eye)
            r = lz_sentry_eye_rename(eye, dfd, name, p->quarantine_fd, target);
    }
    if (r < 0) {
        if (errno == ENOENT)
            return 0; /* gone already */
        lz_gs_fail_at(w, rel);
        lz_error_set(w->err, errno, "Git Sentry: cannot move %s into the quarantine %s", rel,
                     p->quarantine_rel);
        return -1;
    }
    report_add(w, "%s (moved to %s/%s)", rel, p->quarantine_rel, target);
    w->moved++;
    return 1;
}
