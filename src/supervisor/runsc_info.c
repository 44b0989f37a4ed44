/* SPDX-License-Identifier: Apache-2.0 */
#include "supervisor/runsc_info.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "common/spawn.h"
#include "common/util.h"
#include "fs/cache_record.h"
#include "lazaret-version.h"

const char *const lz_runsc_needed_flags[] = { "root",    "ignore-cgroups",
                                              "network", "overlay2",
                                              "log",     NULL };

/* May a program at this place be trusted to stay what it is? Owned by
 * root or by us, and not writable by anyone else: a group write bit only
 * with root's group (as /usr/local on some systems is not: then the
 * error says so). A sticky directory (/tmp) is fine: others cannot rename
 * or remove the entry below it, which is checked in turn. */
static bool owned_safely(const struct stat *st, uid_t me)
{
    if (st->st_uid != 0 && st->st_uid != me)
        return false;
    if (S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX))
        return true;
    if (st->st_mode & S_IWOTH)
        return false;
    return !(st->st_mode & S_IWGRP) || st->st_gid == 0;
}

/* Check the explicit runsc: canonical path, every directory from / down
 * opened without following symlinks (so what is checked is what is
 * walked), each owned safely, then the file itself. */
static int check_explicit_runsc(const char *value, char **ret_path, lz_error **err)
{
    if (value[0] != '/') {
        lz_error_set(err, EINVAL, "%s is not an absolute path", LZ_RUNSC_ENV);
        return lz_error_hint(err,
                             "set %s to the full path of runsc, e.g. "
                             "/opt/lazaret/runsc-20240729/runsc, or unset it",
                             LZ_RUNSC_ENV);
    }
    _cleanup_free_ char *canon = realpath(value, NULL);
    if (!canon) {
        lz_error_set(err, errno, "the runsc %s names cannot be found", LZ_RUNSC_ENV);
        return lz_error_hint(err,
                             "install it (scripts/install-deps.sh puts release 20240729 in "
                             "/opt/lazaret/runsc-20240729/runsc) or unset %s",
                             LZ_RUNSC_ENV);
    }
    uid_t me = getuid();
    int dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return lz_error_set(err, errno, "cannot open /");
    char *p = canon + 1;
    for (;;) {
        struct stat st;
        if (fstat(dir, &st) < 0) {
            lz_error_set(err, errno, "cannot check the runsc %s names", LZ_RUNSC_ENV);
            close(dir);
            return -1;
        }
        if (!owned_safely(&st, me)) {
            close(dir);
            lz_error_set(err, EPERM,
                         "the runsc %s names, %s, lies in a directory (%.*s) that someone "
                         "other than root and you can write to",
                         LZ_RUNSC_ENV, canon, (int) (p - canon > 1 ? p - canon - 1 : 1), canon);
            return lz_error_hint(err, "put runsc in a directory only root (or you) can write, "
                                      "e.g. /opt/lazaret/runsc-<release>/runsc");
        }
        char *slash = strchr(p, '/');
        if (!slash)
            break;
        *slash = '\0';
        int next = openat(dir, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        *slash = '/';
        close(dir);
        if (next < 0)
            return lz_error_set(err, errno, "cannot open a directory above the runsc %s names",
                                LZ_RUNSC_ENV);
        dir = next;
        p = slash + 1;
    }
    int fd = openat(dir, p, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    close(dir);
    struct stat st;
    int r = fd < 0 ? -1 : fstat(fd, &st);
    int saved = errno;
    if (fd >= 0)
        close(fd);
    if (r < 0)
        return lz_error_set(err, saved, "cannot open the runsc %s names", LZ_RUNSC_ENV);
    if (!S_ISREG(st.st_mode) || access(canon, X_OK) != 0) {
        lz_error_set(err, S_ISREG(st.st_mode) ? errno : 0,
                     "the runsc %s names, %s, is not a program you can run", LZ_RUNSC_ENV, canon);
        return lz_error_hint(err, "set %s to runsc's executable file, or unset it", LZ_RUNSC_ENV);
    }
    if (!owned_safely(&st, me)) {
        lz_error_set(err, EPERM, "the runsc %s names, %s, is owned by uid %u or writable by others",
                     LZ_RUNSC_ENV, canon, (unsigned) st.st_uid);
        return lz_error_hint(err, "only a runsc owned by root or you and writable by no one "
                                  "else is used: chown and chmod go-w it, or install it with "
                                  "scripts/install-deps.sh");
    }
    *ret_path = TAKE_PTR(canon);
    return 0;
}

int lz_runsc_locate(char **ret_path, bool *ret_from_env, lz_error **err)
{
    const char *value = getenv(LZ_RUNSC_ENV);
    if (value && value[0]) {
        if (check_explicit_runsc(value, ret_path, err) < 0)
            return -1;
        *ret_from_env = true;
        return 0;
    }
    if (lz_spawn_find_program("runsc", LZ_SPAWN_SYSTEM_PATH, ret_path, err) < 0) {
        lz_error_prefix(err, "gVisor's runsc is required");
        return lz_error_hint(err,
                             "install it: sudo apt-get install runsc, or set %s to a runsc "
                             "(then: lazaret doctor)",
                             LZ_RUNSC_ENV);
    }
    *ret_from_env = false;
    return 0;
}

/* `runsc flags` prints each flag as a line "  -NAME" (a bool) or
 * "  -NAME TYPE", then its description on indented lines. */
static const char *flag_line(const char *out, const char *name)
{
    size_t n = strlen(name);
    for (const char *line = out; line && *line;) {
        const char *p = line;
        while (*p == ' ')
            p++;
        if (p - line == 2 && p[0] == '-' && strncmp(p + 1, name, n) == 0 &&
            (p[1 + n] == '\n' || p[1 + n] == ' ' || p[1 + n] == '\0'))
            return p;
        line = strchr(line, '\n');
        if (line)
            line++;
    }
    return NULL;
}

bool lz_runsc_flags_has(const char *flags_output, const char *name)
{
    return flag_line(flags_output, name) != NULL;
}

bool lz_runsc_flags_default_platform(const char *out, char *buf, size_t size)
{
    const char *p = flag_line(out, "platform");
    if (!p)
        return false;
    /* The description runs to the next flag line: find its (default "X"). */
    const char *end = strstr(p + 1, "\n  -");
    const char *d = strstr(p, "(default \"");
    if (!d || (end && d > end))
        return false;
    d += strlen("(default \"");
    size_t n = 0;
    while (d[n] && d[n] != '"' && (isalnum((unsigned char) d[n]) || d[n] == '-' || d[n] == '_'))
        n++;
    if (d[n] != '"' || n == 0 || n >= size)
        return false;
    memcpy(buf, d, n);
    buf[n] = '\0';
    return true;
}

/* The release date in "runsc version 0.0~20221219.0" (Debian) or
 * "runsc version release-20221219.0" (upstream) as YYYYMMDD; 0 if none. */
long lz_runsc_release_date(const char *out)
{
    static const char key[] = "runsc version ";
    const char *v = strstr(out, key);
    if (!v)
        return 0;
    v += sizeof(key) - 1;
    const char *eol = strchrnul(v, '\n');
    for (const char *p = v; p < eol;) {
        if (!isdigit((unsigned char) *p)) {
            p++;
            continue;
        }
        size_t n = 0;
        while (p + n < eol && isdigit((unsigned char) p[n]))
            n++;
        if (n == 8) {
            long date = strtol(p, NULL, 10);
            long y = date / 10000, m = date / 100 % 100, dd = date % 100;
            if (y >= 2018 && y <= 2199 && m >= 1 && m <= 12 && dd >= 1 && dd <= 31)
                return date;
        }
        p += n;
    }
    return 0;
}

int lz_runsc_facts_key(const char *runsc_path, char *buf, size_t size)
{
    /* Lazaret's own binary too (this process is a fork of it, never an
     * exec): every build has the same version string, and the probe it
     * runs (lazaret-exec, built with it) may change (attack round i13b). */
    struct stat st, me;
    struct utsname u;
    if (strchr(LAZARET_VERSION, ' ') || stat(runsc_path, &st) < 0 ||
        stat("/proc/self/exe", &me) < 0 || uname(&u) < 0 || strchr(u.release, ' '))
        return -1;
    char me_id[LZ_CACHE_IDENTITY_MAX], runsc_id[LZ_CACHE_IDENTITY_MAX];
    lz_cache_file_identity(&me, me_id);
    lz_cache_file_identity(&st, runsc_id);
    /* The kernel's build string has spaces: its FNV-1a hash stands for it. */
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const char *c = u.version; *c; c++)
        h = (h ^ (unsigned char) *c) * 0x100000001b3ULL;
    int n = snprintf(buf, size, "lazaret-runsc-facts-v2 lazaret=%s:%s runsc=%s kernel=%s:%016llx",
                     LAZARET_VERSION, me_id, runsc_id, u.release, (unsigned long long) h);
    return n > 0 && (size_t) n < size ? 0 : -1;
}

static void facts_value(const lz_runsc_facts *f, char *buf, size_t size)
{
    snprintf(buf, size, "date=%ld,statx=%d,netcover=%d,directfs=%d", f->release_date,
             f->statx_ok ? 1 : 0, f->netstack_cover ? 1 : 0, f->has_directfs ? 1 : 0);
}

bool lz_runsc_facts_parse_value(const char *value, lz_runsc_facts *ret)
{
    long date;
    int statx_ok, cover, directfs, end = -1;
    if (sscanf(value, "date=%8ld,statx=%1d,netcover=%1d,directfs=%1d%n", &date, &statx_ok, &cover,
               &directfs, &end) != 4 ||
        end < 0 || value[end] != '\0' || date < 0 || (statx_ok != 0 && statx_ok != 1) ||
        (cover != 0 && cover != 1) || (directfs != 0 && directfs != 1))
        return false;
    lz_runsc_facts f = { date, statx_ok == 1, cover == 1, directfs == 1 };
    /* Canonical form only: the value must be what facts_value writes. */
    char canon[64];
    facts_value(&f, canon, sizeof(canon));
    if (strcmp(canon, value) != 0)
        return false;
    *ret = f;
    return true;
}

int lz_runsc_facts_load(int dir_fd, const char *key, lz_runsc_facts *ret)
{
    char value[64];
    if (lz_cache_record_load(dir_fd, LZ_RUNSC_FACTS_FILE, key, value, sizeof(value)) < 0)
        return -1;
    return lz_runsc_facts_parse_value(value, ret) ? 0 : -1;
}

void lz_runsc_facts_store(int dir_fd, const char *key, const lz_runsc_facts *f)
{
    char value[64];
    facts_value(f, value, sizeof(value));
    lz_cache_record_store(dir_fd, LZ_RUNSC_FACTS_FILE, key, value);
}
