/* SPDX-License-Identifier: Apache-2.0
 *
 * The mount guard: notices at once when a Git Sentry mount of the
 * workspace tree is gone, and stops the sandbox (docs/git.md "When the
 * host replaces a protected file").
 *
 * Linux lets a process in another mount namespace rename over (or unlink,
 * rmdir) a dentry that is a mount point here, and silently detaches every
 * mount on it, in every namespace. The developer's own host `git config`
 * does exactly that to .git/config (config.lock renamed over it), and from
 * then on the sandbox would reach the host's new file through the
 * workspace bind, writable. No mount can be made to survive that, so the
 * protection is watched instead: the supervisor's /proc/self/mountinfo
 * wakes poll() with POLLPRI|POLLERR on every change of its mount namespace
 * (where the workspace tree was composed), and the guard then checks that
 * every mount it recorded at composition still exists. When one is gone,
 * the sandbox process and the gofer (the only processes that change host
 * files for the sandbox) are killed by pidfd before anything else is done,
 * and the coordinator is told (SUP_FAILED), which ends every session with
 * the message and tears the Domain down.
 */
#include "supervisor/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/text.h"
#include "fs/atomic.h"
#include "fs/confined.h"

/* How long the guard waits for the killed sandbox processes to be gone
 * before it reports (a write in progress in a thread completes first). */
#define GUARD_DEATH_WAIT_MS 2000

void sup_guard_record(sup *s, int mount_fd, const char *rel, const char *label, int old_fd)
{
    struct statx sx;
    if (statx(mount_fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &sx) < 0 ||
        !(sx.stx_mask & STATX_MNT_ID)) {
        /* Unknown: the guard refuses to arm (sup_guard_arm), fail closed. */
        s->guard_unrecordable = true;
        if (old_fd >= 0)
            close(old_fd);
        return;
    }
    s->guards = lz_xrealloc(s->guards, s->n_guards + 1, sizeof(*s->guards));
    s->guards[s->n_guards].mnt_id = sx.stx_mnt_id;
    s->guards[s->n_guards].label = lz_xstrdup(label);
    s->guards[s->n_guards].rel = lz_xstrdup(rel);
    s->guards[s->n_guards].old_fd = old_fd;
    const char *slash = strrchr(s->guards[s->n_guards].rel, '/');
    s->guards[s->n_guards].name = slash ? slash + 1 : s->guards[s->n_guards].rel;
    s->guards[s->n_guards].wd = -1;
    s->n_guards++;
}

void sup_guard_clear(sup *s)
{
    for (size_t i = 0; i < s->n_guards; i++) {
        free(s->guards[i].label);
        free(s->guards[i].rel);
        lz_close(&s->guards[i].old_fd);
    }
    free(s->guards);
    s->guards = NULL;
    s->n_guards = 0;
    s->guard_unrecordable = false;
    lz_close(&s->mountinfo_fd);
    lz_close(&s->guard_inotify_fd);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return x < y ? -1 : x > y;
}

/* How many guarded mounts are missing from the namespace's mount table
 * (each flagged in lost[], when given), -1 (errno) when the table cannot
 * be read. The table is read whole (it grows with the Domain's binds). */
static ssize_t count_missing(sup *s, bool *lost)
{
    if (lseek(s->mountinfo_fd, 0, SEEK_SET) < 0)
        return -1;
    size_t cap = 1 << 16, len = 0;
    char *buf = lz_xmalloc(cap);
    for (;;) {
        if (len + 4096 > cap)
            buf = lz_xrealloc(buf, cap *= 2, 1);
        ssize_t n = read(s->mountinfo_fd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            free(buf);
            errno = e;
            return -1;
        }
        if (n == 0)
            break;
        len += (size_t) n;
    }
    buf[len] = '\0';
    size_t n_ids = 0, cap_ids = 256;
    uint64_t *ids = lz_xmalloc(cap_ids * sizeof(*ids));
    for (char *line = buf; line && *line;) {
        char *end = NULL;
        unsigned long long id = strtoull(line, &end, 10);
        if (end != line) {
            if (n_ids == cap_ids)
                ids = lz_xrealloc(ids, cap_ids *= 2, sizeof(*ids));
            ids[n_ids++] = id;
        }
        line = strchr(line, '\n');
        if (line)
            line++;
    }
    free(buf);
    qsort(ids, n_ids, sizeof(*ids), cmp_u64);
    ssize_t missing = 0;
    for (size_t i = 0; i < s->n_guards; i++)
        if (!bsearch(&s->guards[i].mnt_id, ids, n_ids, sizeof(*ids), cmp_u64)) {
            missing++;
            if (lost)
                lost[i] = true;
        }
    free(ids);
    return missing;
}

int sup_guard_open(sup *s, int ws_root, lz_error **err)
{
    if (s->n_guards == 0 || s->mountinfo_fd >= 0)
        return 0;
    /* A host rename of a protected path AWAY (or its removal, and a new
     * object made in its place) moves or keeps the mount, so the mount
     * table does not change: the guarded names are watched in their
     * parent directories too. */
    s->guard_inotify_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (s->guard_inotify_fd < 0)
        return lz_error_set(err, errno,
                            "cannot create an inotify instance for the Git Sentry's "
                            "mounts");
    for (size_t i = 0; i < s->n_guards; i++) {
        struct sup_guard *g = &s->guards[i];
        _cleanup_free_ char *parent = lz_xstrndup(g->rel, (size_t) (g->name - g->rel));
        struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                                .resolve =
                                    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        _cleanup_close_ int dfd =
            (int) syscall(SYS_openat2, ws_root, parent[0] ? parent : ".", &how, sizeof(how));
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/fd/%d", dfd);
        g->wd = dfd < 0 ? -1
                        : inotify_add_watch(s->guard_inotify_fd, path,
                                            IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE | IN_CREATE |
                                                IN_ONLYDIR | IN_MASK_ADD);
        if (g->wd < 0)
            return lz_error_set(err, errno, "cannot watch the directory of %s", g->label);
    }
    s->mountinfo_fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
    if (s->mountinfo_fd < 0)
        return lz_error_set(err, errno,
                            "cannot open /proc/self/mountinfo to guard the Git Sentry's mounts");
    return 0;
}

int sup_guard_arm(sup *s, lz_error **err)
{
    if (s->guard_unrecordable)
        return lz_error_set(err, 0,
                            "cannot learn the mount ID of a Git Sentry mount (statx "
                            "STATX_MNT_ID), so its loss could not be noticed");
    if (s->n_guards == 0)
        return 0;
    if (s->mountinfo_fd < 0)
        return lz_error_set(err, EBADF, "the Git Sentry's mounts are not watched");
    /* Checked once now, before the first session: what changed since the
     * open also wakes the loop's poll(), but the start must not succeed
     * without the protections. */
    ssize_t m = count_missing(s, NULL);
    if (m < 0)
        return lz_error_set(err, errno, "cannot read /proc/self/mountinfo");
    if (m > 0) {
        lz_error_set(err, 0,
                     "a file or directory the Git Sentry protects was replaced or removed on "
                     "the host while the sandbox started");
        return lz_error_hint(err, "run again");
    }
    return 0;
}

/* Kill both sandbox processes and wait (bounded) until they are gone. */
static void signal_sandbox(sup *s, int sig);
static void kill_sandbox_now(sup *s)
{
    int fds[2] = { s->sandbox_pidfd, s->gofer_pidfd };
    signal_sandbox(s, SIGKILL);
    for (int i = 0; i < 2; i++) {
        if (fds[i] < 0)
            continue;
        struct pollfd p = { .fd = fds[i], .events = POLLIN };
        while (poll(&p, 1, GUARD_DEATH_WAIT_MS) < 0 && errno == EINTR)
            ;
    }
}

/* Up to max bytes of fd from its start (NULL when unreadable or larger:
 * the caller then trusts none of it). */
static char *read_bounded(int fd, size_t max, size_t *len)
{
    char *buf = lz_xmalloc(max + 1);
    size_t n = 0;
    for (;;) {
        ssize_t r = pread(fd, buf + n, max + 1 - n, (off_t) n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 || (r > 0 && n + (size_t) r > max)) {
            free(buf);
            return NULL;
        }
        if (r == 0)
            break;
        n += (size_t) r;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

#define GUARD_READ_MAX (1 << 20)

/* A random suffix for a name beside a guarded one (0 when getrandom
 * fails: the RENAME_NOREPLACE retries then fail safe). */
static unsigned long long random_suffix(void)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof(r), 0) != (ssize_t) sizeof(r))
        return 0;
    return (unsigned long long) r;
}

/* A protected file whose mount was lost: whatever is at its path now, when
 * it differs from what it held before, is moved aside beside it
 * (<name>.lazaret-window-<random>: a name the sandbox cannot have made in
 * advance, attack round a27 F1) and the content from before is put back —
 * even when the move fails. Any difference, not only lines that look like
 * they run a program: a word list missed `protocol.ext.allow` with an
 * `ext::` remote (round a27 F3), and a lock name held for each
 * configuration file keeps the host's own `git config` from ever coming
 * here (docs/git.md). Appends what was done to *report. False when it
 * could not be made safe. */
static bool neutralise(int ws, const struct sup_guard *g, char **report)
{
    const char *name = NULL;
    lz_error *e = NULL;
    _cleanup_close_ int dir = lz_open_parent_confined(ws, g->rel, &name, &e);
    if (dir < 0) {
        bool gone = e && e->errnum == ENOENT; /* its directory went too */
        lz_error_free(e);
        return gone;
    }
    _cleanup_close_ int now = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (now < 0 && errno == ENOENT)
        return true; /* removed, and nothing made in its place */
    struct stat sb, ob;
    size_t old_len = 0, now_len = 0;
    _cleanup_free_ char *old =
        fstat(g->old_fd, &ob) == 0 ? read_bounded(g->old_fd, GUARD_READ_MAX, &old_len) : NULL;
    _cleanup_free_ char *cur = now >= 0 && fstat(now, &sb) == 0 && S_ISREG(sb.st_mode)
                                   ? read_bounded(now, GUARD_READ_MAX, &now_len)
                                   : NULL;
    /* Unreadable, not a regular file (a symlink, say) or too large: not
     * trusted, set aside like a changed one. */
    if (old && cur && old_len == now_len && memcmp(old, cur, old_len) == 0)
        return true;
    _cleanup_free_ char *aside = NULL;
    bool moved = false;
    for (int attempt = 0; attempt < 8 && !moved; attempt++) {
        free(aside);
        aside = lz_xasprintf("%s.lazaret-window-%016llx", name, random_suffix());
        moved = renameat2(dir, name, dir, aside, RENAME_NOREPLACE) == 0;
        if (!moved && errno != EEXIST)
            break;
    }
    /* Put back through a new file renamed over whatever is there now. */
    lz_error *we = NULL;
    bool restored = old && lz_write_atomic(dir, name, old, old_len, ob.st_mode & 0777,
                                           LZ_ATOMIC_NO_SYNC, g->label, &we) == 0;
    lz_error_free(we);
    if (!moved && !restored)
        return false;
    _cleanup_free_ char *label = lz_text_printable(g->label);
    _cleanup_free_ char *aside_label = lz_text_printable(aside);
    char *more =
        lz_xasprintf("%s%s%s %s%s%s", *report ? *report : "", *report ? "; " : "", label,
                     moved ? "moved aside to " : "replaced (it could not be moved aside)",
                     moved ? aside_label : "",
                     restored ? ", and its content from before the host's change put back" : "");
    free(*report);
    *report = more;
    return true;
}

/* Protections lost (lost[], m of them; m < 0: the mount table could not
 * be read, read_errno): stop the sandbox, make the files safe, tell. */
static void guard_failed(sup *s, const bool *lost, ssize_t m, int read_errno)
{
    /* Lost (or the table unreadable: fail closed). Stop the sandbox first:
     * from its death on nothing of the sandbox's reaches the host. */
    kill_sandbox_now(s);
    s->sandbox_lost = true; /* its death is this report, not news */
    const lz_resolved_config *cfg = s->sc->cfg;
    _cleanup_free_ char *names = NULL, *report = NULL;
    bool unsafe = m < 0;
    lz_error *e = NULL;
    _cleanup_close_ int ws = lz_plan_open(&cfg->workspace, O_PATH | O_DIRECTORY, true, &e);
    lz_error_free(e);
    for (size_t i = 0; m > 0 && i < s->n_guards; i++) {
        if (!lost[i])
            continue;
        /* Names in the workspace may be the sandbox's (a nested
         * repository's): shown escaped, never as terminal controls. */
        _cleanup_free_ char *label = lz_text_printable(s->guards[i].label);
        char *n = lz_xasprintf("%s%s%s", names ? names : "", names ? ", " : "", label);
        free(names);
        names = n;
        if (s->guards[i].old_fd >= 0 && (ws < 0 || !neutralise(ws, &s->guards[i], &report)))
            unsafe = true;
    }
    fprintf(stderr, "lz-supervisor: Git Sentry: mounts lost (%s); the sandbox was killed; %s\n",
            names ? names : strerror(read_errno), report ? report : "nothing set aside");
    lz_error_set(&e, 0,
                 "Git Sentry: %s was replaced or removed on the host (a host git command such "
                 "as `git config` rewrites it) while the sandbox ran, which ends its read-only "
                 "protection inside the sandbox; the sandbox is stopped now. %s%s",
                 names ? names : "a protected file", report ? report : "",
                 report ? " (a line there could make Git run a program; check it, then "
                          "re-apply your own change)"
                        : "");
    lz_error_hint(&e,
                  "%sthe sandbox could write there in the moment before the stop: before any "
                  "other git command, run `git -C %s config --list --show-origin` and look "
                  "for keys that run programs (core.fsmonitor, core.hooksPath, core.sshCommand, "
                  "core.editor, core.pager, alias.* starting with !, filter.*, "
                  "diff.*.textconv, credential.helper, include.path) that you did not set; "
                  "then run again",
                  unsafe ? "NOT everything could be checked or set aside: " : "",
                  cfg->workspace.label);
    sup_send_failed(s, e);
    lz_error_free(e);
    lz_close(&s->mountinfo_fd);
    lz_close(&s->guard_inotify_fd);
}

/* Send sig to both sandbox processes by pidfd. */
static void signal_sandbox(sup *s, int sig)
{
    int fds[2] = { s->sandbox_pidfd, s->gofer_pidfd };
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            lz_best_effort((int) syscall(SYS_pidfd_send_signal, fds[i], sig, NULL, 0));
}

void sup_guard_changed(sup *s)
{
    if (s->mountinfo_fd < 0)
        return;
    /* Stopped first, then the table is read (attack round a27 F2: the
     * sandbox chose the table's size, 12,000 mounts took up to 751 ms to
     * read and decide while it went on writing): what the sandbox can do
     * after the host's change no longer depends on how long that takes. */
    signal_sandbox(s, SIGSTOP);
    _cleanup_free_ bool *lost = lz_xcalloc(s->n_guards, sizeof(bool));
    ssize_t m = count_missing(s, lost);
    if (m != 0)
        guard_failed(s, lost, m, errno);
    else
        signal_sandbox(s, SIGCONT);
}

void sup_guard_renamed(sup *s)
{
    if (s->guard_inotify_fd < 0)
        return;
    _cleanup_free_ bool *lost = lz_xcalloc(s->n_guards, sizeof(bool));
    ssize_t m = 0;
    /* Aligned for struct inotify_event, as inotify(7) shows. */
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(s->guard_inotify_fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (char *at = buf; at < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *) (void *) at;
            at += sizeof(*ev) + ev->len;
            bool overflow = ev->mask & IN_Q_OVERFLOW;
            for (size_t i = 0; i < s->n_guards; i++) {
                const struct sup_guard *g = &s->guards[i];
                /* A watch that went away (its directory removed) or an
                 * overflow (events lost) is a loss too: fail closed. */
                if (overflow ||
                    (g->wd == ev->wd &&
                     ((ev->mask & IN_IGNORED) || (ev->len && strcmp(ev->name, g->name) == 0)))) {
                    m += !lost[i];
                    lost[i] = true;
                }
            }
        }
    }
    if (m > 0)
        guard_failed(s, lost, m, 0);
}
