/* SPDX-License-Identifier: Apache-2.0 */
#include "common/io.h"

#include <errno.h>
#include <unistd.h>

ssize_t lz_write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, c + done, n - done);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        done += (size_t) w;
    }
    return (ssize_t) done;
}
