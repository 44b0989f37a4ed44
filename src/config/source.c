/* SPDX-License-Identifier: Apache-2.0 */
#include "config/source.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "config/grammar.h"
#include "config/schema.h"

char *lz_env_path_normalize(const char *value, const char **what)
{
    if (!value || value[0] != '/') {
        *what = "it is not an absolute path";
        return NULL;
    }
    size_t n = strlen(value);
    char *out = lz_xmalloc(n + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (value[i] == '/' && o > 0 && out[o - 1] == '/')
            continue;
        out[o++] = value[i];
    }
    if (o > 1 && out[o - 1] == '/')
        o--;
    out[o] = '\0';
    if (strcmp(out, "/") != 0 && !lz_abs_path_components_valid(out, what)) {
        free(out);
        return NULL;
    }
    return out;
}

char *lz_config_source_select(const char *explicit_path, const char *home, lz_error **err)
{
    if (explicit_path) {
        lz_host_path_anchor anchor;
        const char *suffix, *what;
        if (!lz_host_path_parse(explicit_path, false, &anchor, &suffix, &what)) {
            lz_error_set(err, 0, "--config '%s' is not a valid configuration path: %s",
                         explicit_path, what);
            lz_error_hint(err, "give an absolute path (e.g. \"$PWD/config.toml\") or one "
                               "beginning with '~/'");
            return NULL;
        }
        if (anchor == LZ_HOST_HOME)
            return lz_xasprintf("%s/%s", strcmp(home, "/") == 0 ? "" : home, suffix);
        return lz_xstrdup(explicit_path);
    }
    /* An unset, empty or relative XDG_CONFIG_HOME is treated as unset. */
    const char *xdg = getenv("XDG_CONFIG_HOME");
    if (xdg && xdg[0] == '/') {
        const char *what;
        _cleanup_free_ char *norm = lz_env_path_normalize(xdg, &what);
        if (!norm) {
            lz_error_set(err, 0, "XDG_CONFIG_HOME is not a usable path: %s", what);
            lz_error_hint(err, "set XDG_CONFIG_HOME to a normalized absolute path or unset it");
            return NULL;
        }
        return lz_xasprintf("%s/lazaret/config.toml", strcmp(norm, "/") == 0 ? "" : norm);
    }
    return lz_xasprintf("%s/.config/lazaret/config.toml", strcmp(home, "/") == 0 ? "" : home);
}

/* Read exactly len bytes at offset 0. Fails on a short read. */
static int read_exact(int fd, char *buf, size_t len)
{
    size_t done = 0;
    while (done < len) {
        ssize_t r = pread(fd, buf + done, len - done, (off_t) done);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0) {
            errno = EIO;
            return -1;
        }
        done += (size_t) r;
    }
    return 0;
}

static bool same_snapshot(const lz_identity *a, const lz_identity *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

int lz_config_source_read(const char *path, lz_config_source *ret, lz_error **err)
{
    lz_path_plan plan = LZ_PATH_PLAN_INIT;
    _cleanup_close_ int pfd = -EBADF, rfd = -EBADF;
    _cleanup_free_ char *canonical = NULL, *bytes = NULL, *again = NULL;
    lz_identity id, rid, after;
    int r = -1;

    /* A declared symlink is resolved once; from then on the plan forbids
     * symlinks (spec 3.2). */
    canonical = lz_canonicalize(path, err);
    if (!canonical)
        goto out;
    if (access(canonical, F_OK) < 0 && errno == ENOENT) {
        lz_error_set(err, ENOENT, "cannot read the configuration %s", path);
        lz_error_hint(err, "create it (see README, \"Writing config.toml\") or pass --config FILE");
        goto out;
    }
    if (lz_plan_existing(canonical, &plan, err) < 0) {
        lz_error_prefix(err, "cannot open the configuration %s", path);
        goto out;
    }
    /* O_PATH first: checking the type cannot activate a FIFO or device. */
    pfd = lz_plan_open(&plan, O_PATH, true, err);
    if (pfd < 0)
        goto out;
    if (lz_identity_of(pfd, &id, err) < 0)
        goto out;
    if (!S_ISREG(id.mode)) {
        lz_error_set(err, 0, "the configuration %s is not a regular file", canonical);
        lz_error_hint(err, "point --config at a regular TOML file");
        goto out;
    }
    if (id.uid != 0 && id.uid != getuid()) {
        lz_error_set(err, 0, "the configuration %s is owned by uid %u, not by you or root",
                     canonical, (unsigned) id.uid);
        lz_error_hint(err, "copy it to a file you own: cp '%s' ~/.config/lazaret/config.toml",
                      canonical);
        goto out;
    }
    if (id.nlink != 1) {
        lz_error_set(err, 0, "the configuration %s has %lu hard links; exactly one is required",
                     canonical, (unsigned long) id.nlink);
        lz_error_hint(err,
                      "replace it by a copy with a single link: cp '%s' '%s.new' && mv "
                      "'%s.new' '%s'",
                      canonical, canonical, canonical, canonical);
        goto out;
    }
    if (id.mode & (S_IWGRP | S_IWOTH)) {
        lz_error_set(err, 0, "the configuration %s is writable by group or others", canonical);
        lz_error_hint(err, "chmod go-w '%s'", canonical);
        goto out;
    }
    if (id.size > LZ_CONFIG_MAX_BYTES) {
        lz_error_set(err, 0, "the configuration %s is %lld bytes; the limit is %d", canonical,
                     (long long) id.size, LZ_CONFIG_MAX_BYTES);
        lz_error_hint(err, "shorten the file");
        goto out;
    }

    /* Reopen that exact object for a nonblocking read and compare. */
    char proc[64];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
    rfd = open(proc, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (rfd < 0) {
        lz_error_set(err, errno, "cannot open the configuration %s for reading", canonical);
        goto out;
    }
    if (lz_identity_of(rfd, &rid, err) < 0)
        goto out;
    if (!same_snapshot(&id, &rid)) {
        lz_error_set(err, 0, "the configuration %s changed while it was being opened", canonical);
        lz_error_hint(err, "run the command again once nothing is writing the file");
        goto out;
    }

    size_t len = (size_t) rid.size;
    bytes = lz_xmalloc(len + 1);
    again = lz_xmalloc(len + 1);
    char probe;
    if (read_exact(rfd, bytes, len) < 0 || read_exact(rfd, again, len) < 0) {
        lz_error_set(err, errno, "cannot read the configuration %s", canonical);
        lz_error_hint(err, "the file shrank or could not be read; run the command again once "
                           "nothing is writing it");
        goto out;
    }
    ssize_t extra = pread(rfd, &probe, 1, (off_t) len);
    if (lz_identity_of(rfd, &after, err) < 0)
        goto out;
    if (extra != 0 || memcmp(bytes, again, len) != 0 || !same_snapshot(&rid, &after)) {
        lz_error_set(err, 0, "the configuration %s changed while it was being read", canonical);
        lz_error_hint(err, "run the command again once nothing is writing the file");
        goto out;
    }
    bytes[len] = '\0';

    ret->plan = plan;
    plan = (lz_path_plan) LZ_PATH_PLAN_INIT;
    ret->bytes = TAKE_PTR(bytes);
    ret->len = len;
    r = 0;
out:
    lz_plan_clear(&plan);
    return r;
}

void lz_config_source_clear(lz_config_source *src)
{
    lz_plan_clear(&src->plan);
    free(src->bytes);
    src->bytes = NULL;
    src->len = 0;
}
