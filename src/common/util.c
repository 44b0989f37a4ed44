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

/* Length of the valid UTF-8 sequence at s (1..4), or 0. */
static size_t utf8_seq(const unsigned char *s)
{
    size_t n = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3
                                 : (s[0] & 0xf8) == 0xf0                     ? 4
                                                                             : 0;
    for (size_t i = 1; i < n; i++)
        if (!s[i])
            return 0;
    return n && lz_utf8_valid((const char *) s, n) ? n : 0;
}

/* Unicode format characters that change what a line appears to say: the
 * bidirectional embeddings, overrides and isolates, zero-width characters,
 * line/paragraph separators, the byte order mark, the Arabic letter mark. */
static bool invisible(const unsigned char *p, size_t n)
{
    uint32_t cp = n == 2   ? (uint32_t) (p[0] & 0x1f) << 6 | (p[1] & 0x3f)
                  : n == 3 ? (uint32_t) (p[0] & 0x0f) << 12 | (uint32_t) (p[1] & 0x3f) << 6 |
                                 (p[2] & 0x3f)
                  : n == 4 ? (uint32_t) (p[0] & 0x07) << 18 | (uint32_t) (p[1] & 0x3f) << 12 |
                                 (uint32_t) (p[2] & 0x3f) << 6 | (p[3] & 0x3f)
                           : 0;
    static const uint32_t ranges[][2] = {
        { 0x00ad, 0x00ad },   { 0x034f, 0x034f },   { 0x061c, 0x061c },  { 0x115f, 0x1160 },
        { 0x17b4, 0x17b5 },   { 0x180b, 0x180f },   { 0x200b, 0x200f },  { 0x2028, 0x202e },
        { 0x2060, 0x206f },   { 0x2800, 0x2800 },   { 0x3164, 0x3164 },  { 0xfe00, 0xfe0f },
        { 0xfeff, 0xfeff },   { 0xffa0, 0xffa0 },   { 0xfff9, 0xfffb },  { 0x1d173, 0x1d17a },
        { 0xe0000, 0xe007f }, { 0xe0100, 0xe01ef },
    };
    for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++)
        if (cp >= ranges[i][0] && cp <= ranges[i][1])
            return true;
    return false;
}

char *lz_text_printable(const char *s)
{
    if (!s)
        return lz_xstrdup("");
    size_t len = strlen(s);
    char *out = lz_xmalloc(4 * len + 1);
    size_t o = 0;
    const unsigned char *p = (const unsigned char *) s;
    while (*p) {
        size_t n = utf8_seq(p);
        bool c1 = (n == 2 && p[0] == 0xc2 && p[1] < 0xa0) || invisible(p, n);
        if (n == 1 && *p >= 0x20 && *p != 0x7f) {
            out[o++] = (char) *p++;
        } else if (n > 1 && !c1) {
            memcpy(out + o, p, n);
            o += n;
            p += n;
        } else {
            /* one escaped byte; a C1 sequence is escaped byte by byte */
            o += (size_t) snprintf(out + o, 5, "\\x%02x", *p++);
        }
    }
    out[o] = '\0';
    return out;
}

char *lz_vprintable(const char *fmt, va_list ap)
{
    char *line = NULL;
    if (vasprintf(&line, fmt, ap) < 0)
        oom();
    char *safe = lz_text_printable(line);
    free(line);
    return safe;
}
