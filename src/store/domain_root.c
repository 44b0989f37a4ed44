/* SPDX-License-Identifier: Apache-2.0 */
#include "store/domain_root.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "common/text.h"
#include "common/util.h"
#include "fs/confined.h"
#include "store/domain_store.h"

bool lz_domain_id_valid(const char *name)
{
    return strlen(name) == 64 && strspn(name, "0123456789abcdef") == 64;
}

char *lz_state_name_escape(const char *path)
{
    size_t n = strlen(path);
    char *out = lz_xmalloc(3 * n + 1);
    size_t o = 0;
    for (size_t i = (path[0] == '/'); i < n; i++) {
        if (path[i] == '/' || path[i] == '%') {
            o += (size_t) sprintf(out + o, "%%%02X", (unsigned char) path[i]);
        } else {
            out[o++] = path[i];
        }
    }
    out[o] = '\0';
    return out;
}

char *lz_state_name_unescape(const char *name)
{
    size_t len = strlen(name);
    char *out = lz_xmalloc(len + 2);
    size_t o = 0;
    out[o++] = '/';
    for (size_t i = 0; i < len; i++) {
        if (name[i] == '%' && name[i + 1] && name[i + 2]) {
            char hex[3] = { name[i + 1], name[i + 2], 0 };
            char *end;
            long v = strtol(hex, &end, 16);
            if (*end || (v != '/' && v != '%')) {
                free(out);
                return NULL;
            }
            out[o++] = (char) v;
            i += 2;
        } else if (name[i] == '/' || name[i] == '%') {
            free(out);
            return NULL;
        } else {
            out[o++] = name[i];
        }
    }
    out[o] = '\0';
    return out;
}

int lz_domain_lock_open(int dirfd, const char *name, lz_error **err)
{
    int fd = openat(dirfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return lz_error_set(err, errno, "cannot open the Domain lock %s", name);
    return fd;
}

bool lz_domain_lock_held(int dirfd)
{
    int fd = openat(dirfd, LZ_DOMAIN_LOCK, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool held = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
    if (!held)
        flock(fd, LOCK_UN);
    close(fd);
    return held;
}

json_t *lz_domain_running_status(int dirfd)
{
    if (!lz_domain_lock_held(dirfd))
        return NULL;
    int fd = openat(dirfd, "status.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    json_t *st = json_loadfd(fd, JSON_REJECT_DUPLICATES, NULL);
    close(fd);
    return st;
}

int lz_domain_lock_take(const char *runtime_dir, const char *id, int wait_ms, lz_error **err)
{
    _cleanup_close_ int base = open(runtime_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (base < 0)
        return lz_error_set(err, errno, "cannot open XDG_RUNTIME_DIR %s", runtime_dir);
    static const char *const chain[] = { "lazaret", "domains" };
    int cur = base;
    base = -EBADF;
    for (size_t i = 0; i <= LZ_ARRAY_SIZE(chain); i++) {
        const char *name = i < LZ_ARRAY_SIZE(chain) ? chain[i] : id;
        int next = lz_mkdir_at(cur, name, 0700, err) < 0 ? -1 : lz_open_dir_at(cur, name, err);
        close(cur);
        if (next < 0)
            return lz_error_prefix(err, "cannot open the Domain's runtime directory");
        cur = next;
    }
    _cleanup_close_ int dir = cur;
    int fd = lz_domain_lock_open(dir, LZ_DOMAIN_LOCK, err);
    if (fd < 0)
        return lz_error_prefix(err, "in %s/lazaret/domains/%s", runtime_dir, id);
    for (int waited = 0;; waited += 50) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            return fd;
        if (errno != EWOULDBLOCK || waited >= wait_ms)
            break;
        struct timespec d = { 0, 50 * 1000 * 1000 };
        nanosleep(&d, NULL);
    }
    int e = errno;
    close(fd);
    if (e != EWOULDBLOCK)
        return lz_error_set(err, e, "cannot lock the Domain %.16s…", id);
    lz_error_set(err, 0, "Domain %.16s… is running (its coordinator holds the Domain lock)", id);
    return lz_error_hint(err, "end its sessions, or add --stop to stop it first");
}

/* One line naming a candidate Domain for an error: id, profile, workspace. */
static char *candidate_line(int domains_fd, const char *id)
{
    _cleanup_close_ int fd = openat(domains_fd, id, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    lz_domain_summary s = { 0 };
    lz_error *err = NULL;
    char *line;
    if (fd >= 0 && lz_store_read_summary(fd, &s, &err) == 0) {
        _cleanup_free_ char *ws = lz_text_printable(s.workspace);
        line = lz_xasprintf("%s  profile '%s'  workspace %s", id, s.profile, ws);
    } else {
        line = lz_xasprintf("%s  (its store cannot be read)", id);
    }
    lz_error_free(err);
    lz_domain_summary_clear(&s);
    return line;
}

static int refuse_candidates(lz_error **err, int domains_fd, char **ids, size_t n, const char *what,
                             const char *fix)
{
    size_t cap = 256;
    for (size_t i = 0; i < n; i++)
        cap += 300 + strlen(ids[i]);
    char *msg = lz_xmalloc(cap);
    int o = snprintf(msg, cap, "%s matches %zu Domains:", what, n);
    for (size_t i = 0; i < n && o >= 0 && (size_t) o < cap; i++) {
        _cleanup_free_ char *line = candidate_line(domains_fd, ids[i]);
        o += snprintf(msg + o, cap - (size_t) o, "\n    %.250s", line);
    }
    lz_error_set(err, 0, "%s", msg);
    free(msg);
    return lz_error_hint(err, "%s", fix);
}

static bool matches(int dfd, const char *name, const lz_domain_choice *c)
{
    if (c->id_prefix)
        return strncmp(name, c->id_prefix, strlen(c->id_prefix)) == 0;
    if (c->id)
        return strcmp(name, c->id) == 0;
    /* By workspace: what its store records (any profile). */
    _cleanup_close_ int fd = openat(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    lz_domain_summary s = { 0 };
    lz_error *e2 = NULL;
    bool match = fd >= 0 && lz_store_read_summary(fd, &s, &e2) == 0 &&
                 strcmp(s.workspace, c->workspace) == 0;
    lz_error_free(e2);
    lz_domain_summary_clear(&s);
    return match;
}

int lz_domain_root_choose(int domains_fd, const char *domains_label, const lz_domain_choice *choice,
                          char ret_id[65], lz_error **err)
{
    char **ids = NULL;
    size_t n = 0;
    DIR *d = domains_fd >= 0 ? fdopendir(fcntl(domains_fd, F_DUPFD_CLOEXEC, 3)) : NULL;
    if (domains_fd >= 0 && !d)
        return lz_error_set(err, errno, "cannot read %s", domains_label);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!lz_domain_id_valid(e->d_name) || !matches(domains_fd, e->d_name, choice))
            continue;
        ids = lz_xrealloc(ids, n + 1, sizeof(*ids));
        ids[n++] = lz_xstrdup(e->d_name);
    }
    if (d)
        closedir(d);
    int r = -1;
    _cleanup_free_ char *pws = choice->workspace ? lz_text_printable(choice->workspace) : NULL;
    if (n == 0) {
        if (choice->id_prefix)
            lz_error_set(err, 0, "no Domain has an ID starting with '%s' in %s", choice->id_prefix,
                         domains_label);
        else if (choice->id)
            lz_error_set(err, 0, "profile '%s' has no Domain state for the workspace %s",
                         choice->profile, pws);
        else
            lz_error_set(err, 0, "no Domain has state for the workspace %s", pws);
        lz_error_hint(err, "'lazaret state list' shows every Domain with its ID, profile and "
                           "workspace; name one by an ID prefix or with --profile/--workspace");
        r = LZ_DOMAIN_NONE;
    } else if (n > 1) {
        _cleanup_free_ char *what =
            choice->id_prefix ? lz_xasprintf("the Domain ID prefix '%s'", choice->id_prefix)
                              : lz_xasprintf("the workspace %s", pws);
        refuse_candidates(err, domains_fd, ids, n, what,
                          choice->id_prefix ? "give more characters of the Domain ID"
                                            : "choose one with --profile PROFILE (or an ID "
                                              "prefix)");
    } else {
        snprintf(ret_id, 65, "%s", ids[0]);
        r = 0;
    }
    for (size_t i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
    return r;
}
