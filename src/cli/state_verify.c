/* SPDX-License-Identifier: Apache-2.0
 *
 * lazaret state verify: one Domain's structure (the store, the persistent
 * directories' upper and work directories, ownership and modes, no symlink
 * where a directory belongs, no mount inside), read only.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cli/state.h"
#include "common/text.h"
#include "common/util.h"
#include "store/domain_root.h"

typedef struct checks {
    json_t *list;
    int problems;
    uint64_t mnt_id; /* the Domain Root's mount */
    dev_t dev;
    bool have_mnt_id;
} checks;

static void check_add(checks *c, const char *name, const char *object, const char *problem,
                      const char *fix)
{
    json_t *o = json_object();
    json_object_set_new(o, "check", json_string(name));
    _cleanup_free_ char *obj = lz_text_printable(object);
    json_object_set_new(o, "object", json_string(obj));
    json_object_set_new(o, "ok", json_boolean(problem == NULL));
    if (problem) {
        _cleanup_free_ char *p = lz_text_printable(problem);
        json_object_set_new(o, "problem", json_string(p));
        json_object_set_new(o, "fix", json_string(fix));
        c->problems++;
    }
    json_array_append_new(c->list, o);
}

enum ours { OURS, NOT_OURS, WRITABLE_BY_OTHERS };

/* A file of the Domain Root must be the user's and writable by nobody
 * else; a problem is reported (fix_not_ours when someone else owns it, a
 * chmod to paste when others can write it). */
static enum ours check_ours(checks *c, const struct stat *st, const char *label,
                            const char *fix_not_ours)
{
    char problem[128];
    if (st->st_uid != getuid()) {
        snprintf(problem, sizeof(problem), "owned by uid %u, not by you (uid %u)",
                 (unsigned) st->st_uid, (unsigned) getuid());
        check_add(c, "ownership", label, problem, fix_not_ours);
        return NOT_OURS;
    }
    if (st->st_mode & 022) {
        snprintf(problem, sizeof(problem), "mode %04o: writable by group or others",
                 (unsigned) (st->st_mode & 07777));
        _cleanup_free_ char *quoted = lz_text_shell_quote(label);
        _cleanup_free_ char *fix = lz_xasprintf("chmod go-w %s", quoted);
        check_add(c, "modes", label, problem, fix);
        return WRITABLE_BY_OTHERS;
    }
    return OURS;
}

/* Is fd (or dirfd/name, not followed) on the Domain Root's mount? */
static bool same_mount(const checks *c, int dirfd, const char *name)
{
    struct statx sx;
    if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | (name[0] ? 0 : AT_EMPTY_PATH),
              STATX_MNT_ID | STATX_TYPE, &sx) < 0)
        return true; /* gone or unreadable: reported by the type checks */
    if (makedev(sx.stx_dev_major, sx.stx_dev_minor) != c->dev)
        return false;
    return !c->have_mnt_id || !(sx.stx_mask & STATX_MNT_ID) || sx.stx_mnt_id == c->mnt_id;
}

enum expect_flags {
    EXPECT_OURS = 1,     /* owned by the user, no group/other write */
    EXPECT_OPTIONAL = 2, /* absence is no problem */
};

/* A directory Lazaret expects at dirfd/name (label: as the user sees it). */
static void check_dir(checks *c, int dirfd, const char *name, const char *label, int flags,
                      const char *missing_fix)
{
    struct stat st;
    char problem[512];
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno == ENOENT && (flags & EXPECT_OPTIONAL)) {
            check_add(c, "layout", label, NULL, NULL);
            return;
        }
        snprintf(problem, sizeof(problem), "%s: %s", errno == ENOENT ? "missing" : "cannot be read",
                 strerror(errno));
        check_add(c, "layout", label, problem, missing_fix);
        return;
    }
    if (S_ISLNK(st.st_mode)) {
        check_add(c, "layout", label, "a symlink where Lazaret expects a directory (planted?)",
                  "remove the symlink (never follow it: rm, not rm -r on the link target); "
                  "'lazaret state reset' removes it safely");
        return;
    }
    if (!S_ISDIR(st.st_mode)) {
        check_add(c, "layout", label, "not a directory",
                  "remove it; 'lazaret state reset' removes it safely");
        return;
    }
    if (!same_mount(c, dirfd, name)) {
        check_add(c, "mounts", label,
                  "a mount point (another file system mounted in the "
                  "Domain's layers)",
                  "unmount it (umount), then run 'lazaret state verify' again; Lazaret mounts "
                  "nothing there outside a running generation's own mount namespace");
        return;
    }
    if ((flags & EXPECT_OURS) &&
        check_ours(c, &st, label,
                   "it must be yours: remove it with 'lazaret state reset' or chown it back") !=
            OURS)
        return;
    check_add(c, "layout", label, NULL, NULL);
}

/* Every mount point below dirfd (a tree the sandbox wrote), bounded like
 * the size walk; reports at most 5. */
static void find_mounts(checks *c, int fd, const char *label, unsigned depth,
                        unsigned long long *seen, int *reported)
{
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) && *reported < 5) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (++*seen > WALK_MAX_ENTRIES)
            break;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
            continue;
        _cleanup_free_ char *sub = lz_xasprintf("%s/%s", label, e->d_name);
        if (!same_mount(c, dirfd(d), e->d_name)) {
            check_add(c, "mounts", sub,
                      "a mount point (another file system mounted in the "
                      "Domain's layers)",
                      "unmount it (umount), then run 'lazaret state verify' again");
            ++*reported;
            continue;
        }
        if (depth >= WALK_MAX_DEPTH)
            continue;
        int s = openat(dirfd(d), e->d_name,
                       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (s >= 0)
            find_mounts(c, s, sub, depth + 1, seen, reported);
    }
    closedir(d);
}

static void verify_store(checks *c, const state_target *t)
{
    _cleanup_free_ char *label = lz_xasprintf("%s/store.db", t->droot_label);
    _cleanup_free_ char *fix_damaged = lz_xasprintf(
        "end every session of this Domain and move %s (with its -wal and -shm files) aside; "
        "the next run creates a new store (its history is lost, the persistent state kept)",
        label);
    static const char *const files[] = { "store.db", "store.db-wal", "store.db-shm" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(files); i++) {
        _cleanup_free_ char *fl = lz_xasprintf("%s/%s", t->droot_label, files[i]);
        struct stat st;
        char problem[256];
        if (fstatat(t->droot, files[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (i > 0 && errno == ENOENT)
                continue;
            snprintf(problem, sizeof(problem), "cannot be read: %s", strerror(errno));
            check_add(c, "store", fl, problem, fix_damaged);
            return;
        }
        if (!S_ISREG(st.st_mode)) {
            check_add(c, "store", fl,
                      S_ISLNK(st.st_mode) ? "a symlink, not the store file" : "not a regular file",
                      fix_damaged);
            return;
        }
        if (check_ours(c, &st, fl, fix_damaged) == NOT_OURS)
            return;
    }
    lz_store_health h;
    lz_error *err = NULL;
    if (lz_store_check_health(t->droot, &h, &err) < 0) {
        check_add(c, "store", label, err->message, fix_damaged);
        lz_error_free(err);
        return;
    }
    if (!h.integrity_ok) {
        _cleanup_free_ char *p = lz_xasprintf("SQLite integrity_check: %s", h.integrity);
        check_add(c, "store", label, p, fix_damaged);
    } else if (!h.schema_ok) {
        _cleanup_free_ char *p =
            lz_xasprintf("schema '%s' version %d; this Lazaret reads '%s' "
                         "version %d",
                         h.schema_id[0] ? h.schema_id : "(none)", h.schema_version,
                         LZ_DOMAIN_STORE_SCHEMA_ID, LZ_DOMAIN_STORE_SCHEMA_VERSION);
        check_add(c, "store", label, p,
                  "use the Lazaret version that created it, or move the "
                  "store aside (its history is lost)");
    } else {
        _cleanup_free_ char *ok = lz_xasprintf("%s (schema %s version %d, integrity ok)", label,
                                               h.schema_id, h.schema_version);
        check_add(c, "store", ok, NULL, NULL);
    }
}

int state_verify(const lz_global_options *g, const state_opts *opts)
{
    state_target t = { .droot = -1 };
    if (state_select_or_report(g, opts, &t) < 0)
        return LZ_EXIT_FAILURE;
    checks c = { .list = json_array() };
    struct statx sx;
    if (statx(t.droot, "", AT_EMPTY_PATH, STATX_MNT_ID, &sx) == 0) {
        c.dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
        c.have_mnt_id = (sx.stx_mask & STATX_MNT_ID) != 0;
        c.mnt_id = sx.stx_mnt_id;
    }
    /* The Domain Root itself (opened without following a symlink). */
    struct stat st;
    if (fstat(t.droot, &st) == 0 && st.st_uid != getuid()) {
        check_add(&c, "ownership", t.droot_label, "not owned by you",
                  "a Domain Root must be yours; remove it if you did not make it");
    } else if (fstat(t.droot, &st) == 0 && (st.st_mode & 022)) {
        _cleanup_free_ char *fix = lz_xasprintf("chmod 0700 '%s'", t.droot_label);
        check_add(&c, "modes", t.droot_label, "writable by group or others", fix);
    } else {
        check_add(&c, "layout", t.droot_label, NULL, NULL);
    }
    verify_store(&c, &t);
    _cleanup_free_ char *lstate = lz_xasprintf("%s/state", t.droot_label);
    _cleanup_free_ char *lign = lz_xasprintf("%s/ignored", t.droot_label);
    _cleanup_free_ char *llogs = lz_xasprintf("%s/logs", t.droot_label);
    const char *reset_fix = "'lazaret state reset' removes the Domain's persistent state; the "
                            "next run creates it again";
    check_dir(&c, t.droot, "state", lstate, EXPECT_OURS | EXPECT_OPTIONAL, reset_fix);
    check_dir(&c, t.droot, "ignored", lign, EXPECT_OURS | EXPECT_OPTIONAL, reset_fix);
    check_dir(&c, t.droot, "logs", llogs, EXPECT_OURS | EXPECT_OPTIONAL,
              "the next run creates it again");
    /* Each persistent directory: state/<P>/ is Lazaret's; its upper's mode and
     * owner are the image directory's (and the sandbox's to change: a chmod
     * of the persistent directory's root is copied up), so only its kind
     * and mount are checked; work/ is the kernel's scratch, Lazaret's. */
    size_t n, total;
    char **names = state_list_dir(t.droot, "state", LIST_MAX, &n, &total);
    _cleanup_close_ int sfd =
        openat(t.droot, "state", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    for (size_t i = 0; names && sfd >= 0 && i < n; i++) {
        _cleanup_free_ char *l = lz_xasprintf("%s/%s", lstate, names[i]);
        check_dir(&c, sfd, names[i], l, EXPECT_OURS, reset_fix);
        _cleanup_close_ int pfd =
            openat(sfd, names[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (pfd < 0)
            continue;
        _cleanup_free_ char *lu = lz_xasprintf("%s/upper", l);
        _cleanup_free_ char *lw = lz_xasprintf("%s/work", l);
        check_dir(&c, pfd, "upper", lu, 0, reset_fix);
        check_dir(&c, pfd, "work", lw, EXPECT_OURS, reset_fix);
    }
    state_free_names(names, n);
    /* The ignored copies' top level: a directory or a file Lazaret made,
     * never a symlink or special file. */
    names = state_list_dir(t.droot, "ignored", LIST_MAX, &n, &total);
    _cleanup_close_ int ifd =
        openat(t.droot, "ignored", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    for (size_t i = 0; names && ifd >= 0 && i < n; i++) {
        struct stat is;
        if (fstatat(ifd, names[i], &is, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(is.st_mode) ||
            S_ISREG(is.st_mode))
            continue;
        _cleanup_free_ char *l = lz_xasprintf("%s/%s", lign, names[i]);
        check_add(&c, "layout", l,
                  S_ISLNK(is.st_mode) ? "a symlink among the git-ignored "
                                        "copies (planted?)"
                                      : "a special file among the git-ignored "
                                        "copies",
                  "remove it (the link itself, never its target); 'lazaret state reset' "
                  "removes the copies safely");
    }
    state_free_names(names, n);
    /* Mounts anywhere in what the sandbox wrote. */
    unsigned long long seen = 0;
    int reported = 0;
    static const char *const trees[] = { "state", "ignored" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(trees); i++) {
        if (!same_mount(&c, t.droot, trees[i]))
            continue; /* reported above */
        int fd =
            openat(t.droot, trees[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0)
            find_mounts(&c, fd, i == 0 ? lstate : lign, 0, &seen, &reported);
    }
    if (reported == 0) {
        _cleanup_free_ char *l = lz_xasprintf("%s/{state,ignored}", t.droot_label);
        check_add(&c, "mounts", l, NULL, NULL);
    }

    json_t *o = state_target_header(&t);
    json_object_set_new(o, "ok", json_boolean(c.problems == 0));
    json_object_set_new(o, "problems", json_integer(c.problems));
    json_object_set_new(o, "checks", c.list);
    if (opts->as_json) {
        json_dumpf(o, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
        fputc('\n', stdout);
    } else {
        state_print_header(&t);
        size_t i;
        json_t *k;
        json_array_foreach(c.list, i, k)
        {
            bool good = json_is_true(json_object_get(k, "ok"));
            /* Objects below the Domain Root by their name in it. */
            const char *obj = json_string_value(json_object_get(k, "object"));
            size_t rl = strlen(t.droot_label);
            if (strncmp(obj, t.droot_label, rl) == 0 && obj[rl] == '/')
                obj += rl + 1;
            printf("  %-8s %-10s %s", good ? "ok" : "PROBLEM",
                   json_string_value(json_object_get(k, "check")), obj);
            if (!good)
                printf(": %s\n           fix: %s", json_string_value(json_object_get(k, "problem")),
                       json_string_value(json_object_get(k, "fix")));
            printf("\n");
        }
        if (c.problems)
            printf("%d problem(s) found.\n", c.problems);
        else
            printf("No problem found.\n");
    }
    int status = c.problems ? LZ_EXIT_FAILURE : LZ_EXIT_OK;
    json_decref(o);
    state_target_clear(&t);
    return status;
}
