/* SPDX-License-Identifier: Apache-2.0 */
#include "common/util.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void oom(void)
{
    static const char msg[] = "lazaret: fatal: out of memory\n";
    (void) !write(STDERR_FILENO, msg, sizeof(msg) - 1);
    abort();
}

void *lz_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom();
    return p;
}

void *lz_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        oom();
    return p;
}

void *lz_xrealloc(void *p, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        oom();
    size_t bytes = n * size;
    void *q = realloc(p, bytes > 0 ? bytes : 1);
    if (!q)
        oom();
    return q;
}

char *lz_xstrdup(const char *s)
{
    char *d = strdup(s);
    if (!d)
        oom();
    return d;
}

/* Not strndup(3): the source need not be NUL-terminated (a field of a wire
 * message), and only n bytes are ever read. */
char *lz_xstrndup(const char *s, size_t n)
{
    const char *nul = memchr(s, '\0', n);
    size_t len = nul ? (size_t) (nul - s) : n;
    char *d = lz_xmalloc(len + 1);
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

char *lz_xasprintf(const char *fmt, ...)
{
    char *s = NULL;
    va_list ap;
    va_start(ap, fmt);
    int r = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (r < 0)
        oom();
    return s;
}

bool lz_utf8_valid(const char *buf, size_t len)
{
    const unsigned char *s = (const unsigned char *) buf;
    size_t i = 0;
    while (i < len) {
        unsigned char c = s[i];
        size_t n;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            n = 1;
            cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            n = 2;
            cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            n = 3;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (len - i <= n)
            return false;
        for (size_t k = 1; k <= n; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000))
            return false; /* overlong */
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += n + 1;
    }
    return true;
}
