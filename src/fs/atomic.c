/* SPDX-License-Identifier: Apache-2.0
 *
 * Whole-or-nothing writes of small files (fs/atomic.h).
 */
#include "fs/atomic.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/* Every byte of iov to fd, through short writes and EINTR. */
static int write_iov(int fd, const struct iovec *iov, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *p = iov[i].iov_base;
        size_t left = iov[i].iov_len;
        while (left > 0) {
            ssize_t w = write(fd, p, left);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                if (w == 0)
                    errno = EIO;
                return -1;
            }
            p += w;
            left -= (size_t) w;
        }
    }
    return 0;
}

int lz_write_atomic_iov(int dirfd, const char *name, const struct iovec *iov, size_t n, mode_t mode,
                        unsigned flags, const char *what, lz_error **err)
{
    size_t name_len = strlen(name);
    /* One component, and room for the temporary name's 23 extra bytes. */
    if (name_len == 0 || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0 ||
        name_len + 23 > NAME_MAX)
        return lz_error_set(err, EINVAL, "cannot write %s: '%s' is not a file name", what, name);

    uint64_t rnd;
    if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t) sizeof(rnd))
        return lz_error_set(err, errno, "cannot write %s: no random bytes for a temporary name",
                            what);
    char tmp[NAME_MAX + 1];
    snprintf(tmp, sizeof(tmp), ".%s.tmp-%016llx", name, (unsigned long long) rnd);

    int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0)
        return lz_error_set(err, errno, "cannot create a temporary file beside %s ('%s')", what,
                            name);
    const char *step = "write";
    int saved = 0;
    if (write_iov(fd, iov, n) < 0)
        saved = errno;
    else if (!(flags & LZ_ATOMIC_NO_SYNC) && fsync(fd) < 0)
        saved = errno, step = "sync";
    if (close(fd) < 0 && saved == 0)
        saved = errno, step = "write";
    if (saved == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
        saved = errno, step = "replace";
    if (saved != 0) {
        unlinkat(dirfd, tmp, 0);
        return lz_error_set(err, saved, "cannot %s %s ('%s')", step, what, name);
    }
    if (flags & LZ_ATOMIC_NO_SYNC)
        return 0;
    /* The rename is durable only once the directory is. dirfd is often an
     * O_PATH descriptor, which fsync refuses (EBADF): sync a readable
     * reopening of the same directory instead. */
    int dfd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    saved = dfd < 0 ? errno : fsync(dfd) < 0 && errno != EINVAL ? errno : 0;
    if (dfd >= 0)
        close(dfd);
    if (saved != 0)
        return lz_error_set(err, saved, "cannot sync the directory of %s ('%s')", what, name);
    return 0;
}

int lz_write_atomic(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                    unsigned flags, const char *what, lz_error **err)
{
    struct iovec one = { .iov_base = (void *) data, .iov_len = len };
    return lz_write_atomic_iov(dirfd, name, &one, 1, mode, flags, what, err);
}
