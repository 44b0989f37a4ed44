/* SPDX-License-Identifier: Apache-2.0 */
#include "fs/cache_record.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "fs/atomic.h"
#include "fs/confined.h"

void lz_cache_file_identity(const struct stat *st, char buf[static LZ_CACHE_IDENTITY_MAX])
{
    snprintf(buf, LZ_CACHE_IDENTITY_MAX, "%llu:%llu:%lld:%lld.%09ld:%lld.%09ld",
             (unsigned long long) st->st_dev, (unsigned long long) st->st_ino,
             (long long) st->st_size, (long long) st->st_mtim.tv_sec, st->st_mtim.tv_nsec,
             (long long) st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
}

bool lz_cache_value_ok(const char *v)
{
    size_t n = strlen(v);
    if (n == 0 || n > 255)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = v[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("._:=,+-", c)))
            return false;
    }
    return true;
}

bool lz_cache_record_parse(const char *text, size_t len, const char *key, char *value,
                           size_t value_size)
{
    size_t klen = strlen(key);
    if (len > LZ_CACHE_RECORD_MAX || len < klen + 3 || memcmp(text, key, klen) != 0 ||
        text[klen] != ' ' || text[len - 1] != '\n')
        return false;
    size_t vlen = len - klen - 2;
    if (vlen >= value_size || memchr(text + klen + 1, '\0', vlen))
        return false;
    memcpy(value, text + klen + 1, vlen);
    value[vlen] = '\0';
    if (!lz_cache_value_ok(value)) {
        value[0] = '\0';
        return false;
    }
    return true;
}

int lz_cache_record_load(int dir_fd, const char *name, const char *key, char *value,
                         size_t value_size)
{
    if (strchr(name, '/'))
        return -1;
    lz_error *e = NULL;
    _cleanup_close_ int fd =
        lz_open_confined(dir_fd, name, O_RDONLY | O_NOCTTY | O_NONBLOCK, 0, name, &e);
    lz_error_free(e);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        st.st_size > LZ_CACHE_RECORD_MAX)
        return -1;
    char *buf = lz_xmalloc(LZ_CACHE_RECORD_MAX + 1);
    size_t len = 0;
    int r = -1;
    for (;;) {
        ssize_t n = read(fd, buf + len, LZ_CACHE_RECORD_MAX + 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                r = lz_cache_record_parse(buf, len, key, value, value_size) ? 0 : -1;
            break;
        }
        len += (size_t) n;
        if (len > LZ_CACHE_RECORD_MAX)
            break; /* grew past the bound */
    }
    free(buf);
    return r;
}

void lz_cache_record_store(int dir_fd, const char *name, const char *key, const char *value)
{
    if (strchr(name, '/') || strchr(key, '\n') || !lz_cache_value_ok(value) ||
        strlen(key) + strlen(value) + 2 > LZ_CACHE_RECORD_MAX)
        return;
    /* Writers in other Domains may be at it too: the temporary name is a
     * random one of its own (fs/atomic.h). A cache is rebuilt when lost:
     * no fsync. A failure only loses the hint. */
    _cleanup_free_ char *text = lz_xasprintf("%s %s\n", key, value);
    lz_error *e = NULL;
    if (lz_write_atomic(dir_fd, name, text, strlen(text), 0600, LZ_ATOMIC_NO_SYNC, "a cache record",
                        &e) < 0)
        lz_error_free(e);
}
