/* SPDX-License-Identifier: Apache-2.0 */
#include "oci/catalog.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "fs/atomic.h"
#include "fs/cache_record.h"

#define REF_KEY_PREFIX "lazaret-image-ref-v1 source="
#define RECORD_MAX 4096

void lz_sha256_hex(const void *data, size_t len, char out[static 65])
{
    unsigned char d[32];
    unsigned int n = 0;
    EVP_Digest(data, len, d, &n, EVP_sha256(), NULL);
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[64] = '\0';
}

static bool is_hex64(const char *s)
{
    return strlen(s) == 64 && strspn(s, "0123456789abcdef") == 64;
}

void lz_catalog_ref_name(const char *source, char name[static 24])
{
    char hex[65];
    lz_sha256_hex(source, strlen(source), hex);
    snprintf(name, 24, LZ_CATALOG_REF_PREFIX "%.16s", hex);
}

void lz_catalog_ref_store(int images_fd, const char *source, const lz_catalog_ref *ref)
{
    char name[24], value[160];
    lz_catalog_ref_name(source, name);
    snprintf(value, sizeof(value), "%s,checked=%lld,used=%lld", ref->digest_hex, ref->checked,
             ref->used);
    _cleanup_free_ char *key = lz_xasprintf(REF_KEY_PREFIX "%s", source);
    lz_cache_record_store(images_fd, name, key, value);
}

static bool parse_ref_value(const char *value, lz_catalog_ref *ret)
{
    lz_catalog_ref r = { 0 };
    int used = 0;
    if (strlen(value) < 65 || value[64] != ',')
        return false;
    memcpy(r.digest_hex, value, 64);
    r.digest_hex[64] = '\0';
    if (!is_hex64(r.digest_hex) ||
        sscanf(value + 65, "checked=%lld,used=%lld%n", &r.checked, &r.used, &used) != 2 ||
        value[65 + used] != '\0' || r.checked < 0 || r.used < 0)
        return false;
    *ret = r;
    return true;
}

int lz_catalog_ref_load(int images_fd, const char *source, lz_catalog_ref *ret)
{
    char name[24], value[256];
    lz_catalog_ref_name(source, name);
    _cleanup_free_ char *key = lz_xasprintf(REF_KEY_PREFIX "%s", source);
    if (lz_cache_record_load(images_fd, name, key, value, sizeof(value)) < 0 ||
        !parse_ref_value(value, ret))
        return -1;
    return 0;
}

/* A small regular file of this user beneath dir_fd, whole (NUL-terminated),
 * without following a symlink. */
static char *read_small(int dir_fd, const char *name, size_t *ret_len)
{
    _cleanup_close_ int fd =
        openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return NULL;
    if (!S_ISREG(st.st_mode) || st.st_uid != getuid() || st.st_size > RECORD_MAX) {
        errno = EINVAL;
        return NULL;
    }
    char *buf = lz_xmalloc(RECORD_MAX + 1);
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, RECORD_MAX + 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            free(buf);
            return NULL;
        }
        if (n == 0)
            break;
        len += (size_t) n;
        if (len > RECORD_MAX) {
            free(buf);
            errno = EINVAL;
            return NULL;
        }
    }
    buf[len] = '\0';
    *ret_len = len;
    return buf;
}

int lz_catalog_ref_read(int images_fd, const char *name, char **ret_source, lz_catalog_ref *ret)
{
    size_t len = 0;
    _cleanup_free_ char *text = read_small(images_fd, name, &len);
    /* One line: the key (which carries the source), one space, the value. */
    if (!text || len < strlen(REF_KEY_PREFIX) + 2 || text[len - 1] != '\n' || strlen(text) != len ||
        strncmp(text, REF_KEY_PREFIX, strlen(REF_KEY_PREFIX)) != 0)
        return -1;
    text[len - 1] = '\0';
    if (strchr(text, '\n'))
        return -1;
    char *space = strrchr(text, ' ');
    if (!space || space < text + strlen(REF_KEY_PREFIX))
        return -1;
    *space = '\0';
    lz_catalog_ref r;
    const char *source = text + strlen(REF_KEY_PREFIX);
    char want[24];
    lz_catalog_ref_name(source, want);
    /* A record under another name is not the record of its source. */
    if (!*source || strcmp(want, name) != 0 || !parse_ref_value(space + 1, &r))
        return -1;
    *ret_source = lz_xstrdup(source);
    *ret = r;
    return 0;
}

int lz_catalog_use_write(int droot_fd, const char *droot_label, const lz_catalog_use *use,
                         lz_error **err)
{
    if (strchr(use->source, '\n'))
        return lz_error_set(err, 0, "the image reference holds a newline");
    _cleanup_free_ char *text =
        lz_xasprintf("digest %s\nentry %s\nstarted %lld\noffline %d\n"
                     "source %s\n",
                     use->digest_hex, use->entry, use->started, use->offline ? 1 : 0, use->source);
    _cleanup_free_ char *what = lz_xasprintf("%s/" LZ_CATALOG_USE_RECORD, droot_label);
    /* A hint for pruning and a record for the developer; lost in a crash,
     * it is written again by the next start. */
    return lz_write_atomic(droot_fd, LZ_CATALOG_USE_RECORD, text, strlen(text), 0600,
                           LZ_ATOMIC_NO_SYNC, what, err);
}

int lz_catalog_use_read(int droot_fd, lz_catalog_use *ret)
{
    size_t len = 0;
    _cleanup_free_ char *text = read_small(droot_fd, LZ_CATALOG_USE_RECORD, &len);
    if (!text)
        return errno == ENOENT ? 0 : -1;
    lz_catalog_use u = { 0 };
    int offline = 0, used = 0;
    char digest[65] = "", entry[96] = "";
    if (strlen(text) != len ||
        sscanf(text, "digest %64[0-9a-f]\nentry %95[0-9a-f.keepid-]\nstarted %lld\noffline %d\n%n",
               digest, entry, &u.started, &offline, &used) != 4 ||
        used == 0 || strncmp(text + used, "source ", 7) != 0 || text[len - 1] != '\n') {
        errno = EINVAL;
        return -1;
    }
    bool keep_id;
    char entry_digest[65];
    text[len - 1] = '\0';
    if (!is_hex64(digest) || !lz_catalog_entry_parse(entry, entry_digest, &keep_id) ||
        strcmp(entry_digest, digest) != 0 || strchr(text + used, '\n')) {
        errno = EINVAL;
        return -1;
    }
    memcpy(u.digest_hex, digest, sizeof(digest));
    memcpy(u.entry, entry, sizeof(entry));
    u.offline = offline != 0;
    u.source = lz_xstrdup(text + used + 7);
    *ret = u;
    return 1;
}

void lz_catalog_use_clear(lz_catalog_use *use)
{
    free(use->source);
    use->source = NULL;
}

bool lz_catalog_entry_parse(const char *name, char digest_hex[static 65], bool *keep_id)
{
    size_t n = strlen(name);
    if (n < 64 || strspn(name, "0123456789abcdef") < 64)
        return false;
    memcpy(digest_hex, name, 64);
    digest_hex[64] = '\0';
    if (n == 64) {
        *keep_id = false;
        return true;
    }
    unsigned uid = 0, gid = 0;
    int used = 0;
    if (strncmp(name + 64, LZ_CATALOG_KEEP_ID_INFIX, strlen(LZ_CATALOG_KEEP_ID_INFIX)) != 0 ||
        sscanf(name + 64 + strlen(LZ_CATALOG_KEEP_ID_INFIX), "%u-%u%n", &uid, &gid, &used) != 2 ||
        name[64 + strlen(LZ_CATALOG_KEEP_ID_INFIX) + (size_t) used] != '\0')
        return false;
    *keep_id = true;
    return true;
}
