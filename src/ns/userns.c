/* SPDX-License-Identifier: Apache-2.0 */
#include "ns/userns.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <shadow/subid.h>

#include "common/fork.h"
#include "common/spawn.h"
#include "common/util.h"
#include "fs/remove.h"

/* ---- subordinate ids: shadow's libsubid --------------------------------------------- */

/* libsubid writes its diagnostics to a FILE of the caller's choice (stderr by
 * default). Library code does not print (docs/errors.md): each call writes
 * into a memory stream (no descriptor), and what it wrote becomes part of
 * the error. Lazaret has no threads, so the library's global log stream is
 * only ever ours while a call runs. */
static int subid_ranges(lz_subid_kind kind, const char *owner, struct subid_range **ret,
                        char **ret_log)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *log = open_memstream(&buf, &len);
    if (log)
        subid_init(NULL, log); /* NULL progname: "(libsubid)", nothing allocated */
    errno = 0;
    int n =
        kind == LZ_SUBID_UID ? subid_get_uid_ranges(owner, ret) : subid_get_gid_ranges(owner, ret);
    int saved = errno;
    if (log) {
        subid_init(NULL, stderr); /* the library's own default again, before log goes */
        fclose(log);
    }
    /* Untrusted text (an NSS module's): printable ASCII, one line. */
    for (size_t i = 0; buf && i < len; i++)
        if (buf[i] < 0x20 || buf[i] >= 0x7f)
            buf[i] = ' ';
    while (len && buf[len - 1] == ' ')
        buf[--len] = '\0';
    if (ret_log && buf && len)
        *ret_log = TAKE_PTR(buf);
    free(buf);
    errno = saved;
    return n;
}

static const char *subid_file(lz_subid_kind kind)
{
    return kind == LZ_SUBID_UID ? "/etc/subuid" : "/etc/subgid";
}

/* The user's login name, or the uid as text without a passwd entry: the
 * owner libsubid (and newuidmap) look ranges up by. */
static char *owner_name(uid_t uid)
{
    struct passwd *pw = getpwuid(uid);
    return pw ? lz_xstrdup(pw->pw_name) : lz_xasprintf("%u", (unsigned) uid);
}

/* s as one shell word, for a fix line to paste: unchanged when it has only
 * safe characters, else in single quotes. */
static char *shell_word(const char *s)
{
    bool plain = s[0] != '\0';
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              strchr("._-+=:,/@%", *p)))
            plain = false;
    if (plain)
        return lz_xstrdup(s);
    size_t n = 3;
    for (const char *p = s; *p; p++)
        n += *p == '\'' ? 4 : 1;
    char *q = lz_xmalloc(n), *w = q;
    *w++ = '\'';
    for (const char *p = s; *p; p++) {
        if (*p == '\'') {
            memcpy(w, "'\\''", 4);
            w += 4;
        } else {
            *w++ = *p;
        }
    }
    *w++ = '\'';
    *w = '\0';
    return q;
}

typedef struct id_interval {
    unsigned long long start, count;
} id_interval;

/* The first start >= LZ_SUBID_SUGGEST_FIRST where LZ_SUBID_COUNT ids overlap
 * no subordinate uid or gid range of any user of the user database, as
 * libsubid reports them: a range to suggest that cannot collide with another
 * user's ids. libsubid has no call that lists every range, so ranges whose
 * owner is not a user (a deleted account's line) are not seen; usermod
 * --add-subuids does not check overlaps either (docs/runtime.md
 * "Subordinate ids"). Only computed for an error's hint. */
static unsigned long long free_subid_start(void)
{
    char **names = NULL;
    size_t nnames = 0;
    setpwent();
    for (struct passwd *pw; (pw = getpwent());) {
        names = lz_xrealloc(names, nnames + 1, sizeof(*names));
        names[nnames++] = lz_xstrdup(pw->pw_name);
    }
    endpwent();
    id_interval *taken = NULL;
    size_t ntaken = 0;
    for (size_t i = 0; i < nnames; i++) {
        for (int k = 0; k < 2; k++) {
            struct subid_range *r = NULL;
            int n = subid_ranges(k ? LZ_SUBID_GID : LZ_SUBID_UID, names[i], &r, NULL);
            for (int j = 0; j < n; j++) {
                taken = lz_xrealloc(taken, ntaken + 1, sizeof(*taken));
                taken[ntaken++] = (id_interval){ r[j].start, r[j].count };
            }
            free(r);
        }
        free(names[i]);
    }
    free(names);
    unsigned long long s = LZ_SUBID_SUGGEST_FIRST;
    for (bool moved = true; moved;) {
        moved = false;
        for (size_t i = 0; i < ntaken; i++) {
            if (taken[i].start < s + LZ_SUBID_COUNT && s < taken[i].start + taken[i].count) {
                s = taken[i].start + taken[i].count;
                moved = true;
            }
        }
    }
    free(taken);
    return s;
}

/* Why a range cannot be used for a Domain, or NULL when it can. */
static const char *range_unusable(unsigned long start, unsigned long count, unsigned long own)
{
    if (count < LZ_SUBID_COUNT)
        return "too few ids";
    if (start == 0)
        return "it starts at 0: it would map the host's root into the sandbox";
    /* Ids are 32-bit; (uint32_t)-1 is no id (the kernel's "no mapping"). */
    if (start > UINT32_MAX - LZ_SUBID_COUNT)
        return "it ends beyond the largest 32-bit id";
    /* Your own id is mapped to 0 already; the kernel refuses a map whose
     * extents overlap. */
    if (own >= start && own - start < LZ_SUBID_COUNT)
        return "its first 65536 ids contain your own id";
    return NULL;
}

int lz_subid_lookup(lz_subid_kind kind, uid_t uid, gid_t gid, lz_subid_range *ret, lz_error **err)
{
    const char *file = subid_file(kind);
    const char *what = kind == LZ_SUBID_UID ? "uid" : "gid";
    _cleanup_free_ char *owner = owner_name(uid);
    _cleanup_free_ char *log = NULL;
    struct subid_range *r = NULL;
    int n = subid_ranges(kind, owner, &r, &log);
    if (n < 0) {
        lz_error_set(err, errno,
                     "cannot read the subordinate %s ranges of %s from %s (or the "
                     "'subid:' source of /etc/nsswitch.conf)%s%s",
                     what, owner, file, log ? ": " : "", log ? log : "");
    } else {
        unsigned long own = kind == LZ_SUBID_UID ? (unsigned long) uid : (unsigned long) gid;
        for (int i = 0; i < n; i++) {
            if (!range_unusable(r[i].start, r[i].count, own)) {
                *ret = (lz_subid_range){ .start = (uint32_t) r[i].start,
                                         .count = LZ_SUBID_COUNT,
                                         .range_count = r[i].count };
                free(r);
                return 0;
            }
        }
        if (n == 0) {
            lz_error_set(err, 0, "no range for %s (uid %u) in %s", owner, (unsigned) uid, file);
        } else {
            /* Say why each of the user's ranges was refused (the first few). */
            _cleanup_free_ char *why = lz_xstrdup("");
            for (int i = 0; i < n && i < 4; i++) {
                char *next = lz_xasprintf("%s%s%lu-%lu (%lu ids): %s", why, i ? "; " : "",
                                          r[i].start, r[i].start + r[i].count - 1, r[i].count,
                                          range_unusable(r[i].start, r[i].count, own));
                free(why);
                why = next;
            }
            lz_error_set(err, 0,
                         "no usable range for %s in %s: a Domain needs %u subordinate %ss "
                         "starting above 0; %s%s",
                         owner, file, LZ_SUBID_COUNT, what, why, n > 4 ? "; …" : "");
        }
    }
    free(r);
    unsigned long long s = free_subid_start();
    _cleanup_free_ char *word = shell_word(owner);
    return lz_error_hint(err, "sudo usermod --add-sub%ss %llu-%llu %s", what, s,
                         s + LZ_SUBID_COUNT - 1, word);
}

/* The extents of one map (docs/runtime.md "The agent's user"): the default
 * puts the user at 0 and the subordinate range at 1..65536; a keep-id map
 * for sandbox id A swaps 0 and A, so that every other id keeps its host id
 * and only what 0 and A own changes hands. Returns the number of words
 * written to words (3 per extent). */
static size_t map_extents(uint32_t agent, uint32_t base, unsigned own, const lz_subid_range *r,
                          char words[12][16])
{
    size_t n = 0;
#define EXTENT(in, out, count)                                                                     \
    do {                                                                                           \
        snprintf(words[n++], 16, "%u", (unsigned) (in));                                           \
        snprintf(words[n++], 16, "%u", (unsigned) (out));                                          \
        snprintf(words[n++], 16, "%u", (unsigned) (count));                                        \
    } while (0)
    if (agent == 0) {
        EXTENT(0, own, 1);
        EXTENT(base, r->start, r->count);
    } else {
        EXTENT(0, r->start + agent - 1, 1);
        if (agent > 1)
            EXTENT(1, r->start, agent - 1);
        EXTENT(agent, own, 1);
        if (agent < r->count)
            EXTENT(agent + 1, r->start + agent, r->count - agent);
    }
#undef EXTENT
    return n;
}

static int write_map(const char *tool, pid_t pid, unsigned id, uint32_t agent, uint32_t base,
                     const lz_subid_range *r, lz_error **err)
{
    _cleanup_free_ char *path = NULL;
    if (lz_spawn_find_program(tool, LZ_SPAWN_SYSTEM_PATH, &path, err) < 0)
        return lz_error_hint(err, "install it: sudo apt-get install uidmap");
    char spid[16], words[12][16];
    snprintf(spid, sizeof(spid), "%d", (int) pid);
    size_t n = map_extents(agent, base, id, r, words);
    char *argv[2 + 12 + 1] = { (char *) tool, spid };
    for (size_t i = 0; i < n; i++)
        argv[2 + i] = words[i];
    argv[2 + n] = NULL;
    lz_spawn_options opt = { .merge_stderr = true };
    lz_spawn_output out = { 0 };
    int status = lz_spawn_capture(path, argv, &opt, &out, err);
    if (status < 0)
        return -1;
    if (status != 0) {
        while (out.len && out.data[out.len - 1] == '\n')
            out.data[--out.len] = '\0';
        lz_error_set(err, 0, "%s failed (status %d): %s", tool, status, out.data ? out.data : "");
        lz_spawn_output_free(&out);
        return lz_error_hint(err,
                             "check that %s is setuid root and that your user has a "
                             "range in /etc/sub%cid (lazaret doctor)",
                             path, tool[3] == 'u' ? 'u' : 'g');
    }
    lz_spawn_output_free(&out);
    return 0;
}

int lz_idmap_check(const lz_idmap *map, lz_error **err)
{
    if (map && (map->uid > LZ_SUBID_COUNT || map->gid > LZ_SUBID_COUNT)) {
        lz_error_set(err, 0,
                     "the image's user (uid %u, gid %u) is outside the sandbox's ids "
                     "0..%u",
                     (unsigned) map->uid, (unsigned) map->gid, LZ_SUBID_COUNT);
        return lz_error_hint(err,
                             "use an image whose configured User has a uid and gid of at "
                             "most %u",
                             LZ_SUBID_COUNT);
    }
    return 0;
}

/* The caller's step between the child's unshare and its becoming root:
 * the child's maps, written from outside its namespace by the setuid
 * helpers (a process inside cannot map ids it does not own). */
typedef struct id_maps {
    uid_t uid;
    gid_t gid;
    uint32_t agent_uid, agent_gid, base;
    lz_subid_range uids, gids;
} id_maps;

static int write_maps(pid_t child, void *arg, lz_error **err)
{
    const id_maps *m = arg;
    if (write_map("newuidmap", child, m->uid, m->agent_uid, m->base, &m->uids, err) < 0 ||
        write_map("newgidmap", child, m->gid, m->agent_gid, m->base, &m->gids, err) < 0)
        return -1;
    return 0;
}

/* What the child runs once it is root in its namespace: fn's exit status
 * (lz_userns_spawn), or call's error (lz_userns_call). */
typedef struct userns_job {
    int (*fn)(void *arg);
    int (*call)(void *arg, lz_error **err);
    void *arg;
} userns_job;

static int enter_userns(void *arg, int channel, lz_error **err)
{
    const userns_job *j = arg;
    if (unshare(CLONE_NEWUSER) < 0) {
        lz_error_set(err, errno, "cannot create a user namespace");
        return lz_error_hint(err, "unprivileged user namespaces must be allowed (sysctl "
                                  "user.max_user_namespaces > 0; lazaret doctor checks it)");
    }
    /* The caller writes the maps now; when it cannot, it says why. */
    if (lz_fork_ready(channel) < 0)
        return 126;
    if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
        return lz_error_set(err, errno, "cannot become root in the new user namespace");
    if (setgroups(0, NULL) < 0 && errno != EPERM)
        return lz_error_set(err, errno,
                            "cannot drop supplementary groups in the new user "
                            "namespace");
    if (j->call)
        return j->call(j->arg, err) < 0 ? -1 : 0;
    return j->fn(j->arg);
}

/* The job in a child of a new user namespace, with the subordinate ids at
 * base..base+65535 inside (1 everywhere but the ownership give-back,
 * lz_userns_call_shifted; a keep-id map (map->uid != 0) always uses 1).
 * With ret the child runs on (lz_userns_spawn); without, it is waited for
 * and its status returned (lz_fork_call). */
static int userns_fork(const lz_idmap *map, uint32_t base, const userns_job *job, lz_child *ret,
                       lz_error **err)
{
    if (lz_idmap_check(map, err) < 0)
        return -1;
    id_maps m = {
        .uid = getuid(),
        .gid = getgid(),
        .agent_uid = map ? map->uid : 0,
        .agent_gid = map ? map->gid : 0,
        .base = base,
    };
    if (lz_subid_lookup(LZ_SUBID_UID, m.uid, m.gid, &m.uids, err) < 0 ||
        lz_subid_lookup(LZ_SUBID_GID, m.uid, m.gid, &m.gids, err) < 0)
        return -1;
    lz_fork_options opt = {
        .what = "a process in a new user namespace",
        .pdeathsig = SIGKILL,
        .on_ready = write_maps,
        .ready_arg = &m,
    };
    return lz_fork_call(enter_userns, (void *) job, &opt, ret, err);
}

int lz_userns_spawn(const lz_idmap *map, int (*fn)(void *arg), void *arg, pid_t *ret_pid,
                    lz_error **err)
{
    userns_job job = { .fn = fn, .arg = arg };
    lz_child child;
    if (userns_fork(map, 1, &job, &child, err) < 0)
        return -1;
    /* Its callers reap by pid (the supervisor's, the eye's). */
    *ret_pid = lz_child_release(&child);
    return 0;
}

/* ---- running a function as root over the subordinate ids ---------------------------- */

static int userns_call(const lz_idmap *map, uint32_t base, int (*fn)(void *arg, lz_error **err),
                       void *arg, lz_error **err)
{
    userns_job job = { .call = fn, .arg = arg };
    int status = userns_fork(map, base, &job, NULL, err);
    if (status < 0)
        return -1;
    if (status != 0)
        return lz_error_set(err, 0, "a helper process in a user namespace failed (status %d)",
                            status);
    return 0;
}

int lz_userns_call(const lz_idmap *map, int (*fn)(void *arg, lz_error **err), void *arg,
                   lz_error **err)
{
    return userns_call(map, 1, fn, arg, err);
}

int lz_userns_call_shifted(int (*fn)(void *arg, lz_error **err), void *arg, lz_error **err)
{
    /* The base must not hold the kernel's overflow ids, which is what an
     * unmapped owner looks like inside: such a file must never pass for a
     * subordinate id's. */
    static const char *const overflow[] = { "/proc/sys/kernel/overflowuid",
                                            "/proc/sys/kernel/overflowgid" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(overflow); i++) {
        unsigned long v = 65534;
        FILE *f = fopen(overflow[i], "re");
        if (f) {
            if (fscanf(f, "%lu", &v) != 1)
                v = 65534;
            fclose(f);
        }
        if (v >= LZ_USERNS_SHIFTED_BASE && v - LZ_USERNS_SHIFTED_BASE < LZ_SUBID_COUNT) {
            lz_error_set(err, 0,
                         "%s is %lu, inside the ids %u..%u that stand for your "
                         "subordinate ids in a give-back namespace",
                         overflow[i], v, LZ_USERNS_SHIFTED_BASE,
                         LZ_USERNS_SHIFTED_BASE + LZ_SUBID_COUNT - 1);
            return lz_error_hint(err,
                                 "set it back to the kernel's default: sudo sysctl "
                                 "kernel.%s=65534",
                                 overflow[i] + strlen("/proc/sys/kernel/"));
        }
    }
    return userns_call(NULL, LZ_USERNS_SHIFTED_BASE, fn, arg, err);
}

typedef struct rm_job {
    int dirfd;
    const char *name;
    const char *label;
} rm_job;

static int rm_in_userns(void *arg, lz_error **err)
{
    rm_job *j = arg;
    return lz_remove_tree_at(j->dirfd, j->name, j->label, err);
}

int lz_remove_tree_mapped(int dirfd, const char *name, const char *label, lz_error **err)
{
    lz_error *first = NULL;
    if (lz_remove_tree_at(dirfd, name, label, &first) == 0)
        return 0;
    if (first->errnum != EACCES && first->errnum != EPERM) {
        if (err && !*err)
            *err = first;
        else
            lz_error_free(first);
        return -1;
    }
    rm_job j = { .dirfd = dirfd, .name = name, .label = label };
    lz_error *second = NULL;
    if (lz_userns_call(NULL, rm_in_userns, &j, &second) == 0) {
        lz_error_free(first);
        return 0;
    }
    lz_error_free(first);
    if (err && !*err)
        *err = second;
    else
        lz_error_free(second);
    return -1;
}
