/* SPDX-License-Identifier: Apache-2.0
 *
 * How much a Domain's state takes: bounded walks that never follow a
 * symlink, since what is under state/ and ignored/ was written by a
 * sandbox (docs/security.md: untrusted on every later use).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/state.h"
#include "common/util.h"
#include "store/domain_root.h"

static void walk_dir(int fd, unsigned depth, state_walk *w)
{
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        w->partial = true;
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (++w->entries > WALK_MAX_ENTRIES) {
            w->partial = true;
            break;
        }
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            w->partial = true;
            continue;
        }
        w->bytes += (unsigned long long) st.st_blocks * 512ULL;
        if (!S_ISDIR(st.st_mode))
            continue;
        if (depth >= WALK_MAX_DEPTH) {
            w->partial = true;
            continue;
        }
        int sub = openat(dirfd(d), e->d_name,
                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (sub < 0) {
            w->partial = true;
            continue;
        }
        walk_dir(sub, depth + 1, w);
    }
    closedir(d);
}

state_walk state_size_of(int parent, const char *name)
{
    state_walk w = { 0 };
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0)
        walk_dir(fd, 0, &w);
    else if (errno != ENOENT)
        w.partial = true;
    return w;
}

/* The size of the persistent directories: the upper directory of each
 * state/<dir>/, what the sandbox wrote. Their overlay work directories are
 * overlayfs's own (work/work is mode 0, unreadable by design) and hold
 * nothing between generations. */
state_walk state_persistent_size(int droot)
{
    state_walk total = { 0 };
    int fd = openat(droot, "state", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        total.partial = errno != ENOENT;
        return total;
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        total.partial = true;
        return total;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        int dir = openat(dirfd(d), e->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        state_walk w = dir >= 0 ? state_size_of(dir, "upper") : (state_walk){ .partial = true };
        if (dir >= 0)
            close(dir);
        total.bytes += w.bytes;
        total.entries += w.entries;
        total.partial |= w.partial;
    }
    closedir(d);
    return total;
}

void state_human(unsigned long long b, char *out, size_t n)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    double v = (double) b;
    size_t u = 0;
    while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(out, n, "%llu B", b);
    else
        snprintf(out, n, "%.1f %s", v, units[u]);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Entries of the directory parent/name, sorted (at most max, *total all);
 * NULL when it cannot be read (absent included). */
char **state_list_dir(int parent, const char *name, size_t max, size_t *ret_n, size_t *total)
{
    *ret_n = 0;
    *total = 0;
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    char **names = lz_xcalloc(max + 1, sizeof(char *));
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (++*total <= max)
            names[(*ret_n)++] = lz_xstrdup(e->d_name);
    }
    closedir(d);
    qsort(names, *ret_n, sizeof(char *), cmp_str);
    return names;
}

void state_free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}
