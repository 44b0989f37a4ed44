/* SPDX-License-Identifier: Apache-2.0
 *
 * Text that crosses a trust boundary: one UTF-8 decoder and the escaping
 * flavours (common/text.h says which to use where).
 */
#include "common/text.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/* The length of the UTF-8 sequence at s (of at most n bytes) and its code
 * point, or 0 when it is not a valid, shortest-form sequence of a scalar
 * value. */
size_t lz_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    size_t len;
    uint32_t v, min;
    if ((s[0] & 0xe0) == 0xc0)
        len = 2, v = s[0] & 0x1f, min = 0x80;
    else if ((s[0] & 0xf0) == 0xe0)
        len = 3, v = s[0] & 0x0f, min = 0x800;
    else if ((s[0] & 0xf8) == 0xf0)
        len = 4, v = s[0] & 0x07, min = 0x10000;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return len;
}

bool lz_utf8_valid(const char *buf, size_t len)
{
    const unsigned char *s = (const unsigned char *) buf;
    uint32_t cp;
    for (size_t i = 0, n; i < len; i += n)
        if ((n = lz_utf8_decode(s + i, len - i, &cp)) == 0)
            return false;
    return true;
}

/* Length of the valid UTF-8 sequence at the NUL-terminated s (1..4) with
 * its code point, or 0. */
static size_t utf8_seq(const unsigned char *s, uint32_t *cp)
{
    return lz_utf8_decode(s, strnlen((const char *) s, 4), cp);
}

/* Unicode format characters that change what a line appears to say: the
 * bidirectional embeddings, overrides and isolates, zero-width characters,
 * line/paragraph separators, the byte order mark, the Arabic letter mark. */
static bool invisible(uint32_t cp)
{
    static const uint32_t ranges[][2] = {
        { 0x00ad, 0x00ad },   { 0x034f, 0x034f },   { 0x061c, 0x061c }, { 0x115f, 0x1160 },
        { 0x17b4, 0x17b5 },   { 0x180b, 0x180f },   { 0x200b, 0x200f }, { 0x2028, 0x202e },
        { 0x2060, 0x206f },   { 0x2800, 0x2800 },   { 0x3164, 0x3164 }, { 0xfe00, 0xfe0f },
        { 0xfeff, 0xfeff },   { 0xffa0, 0xffa0 },   { 0xfff9, 0xfffb }, { 0x1d173, 0x1d17a },
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
        uint32_t cp = 0;
        size_t n = utf8_seq(p, &cp);
        bool c1 = (cp >= 0x80 && cp < 0xa0) || (n > 1 && invisible(cp));
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
    char *line = lz_xvasprintf(fmt, ap);
    char *safe = lz_text_printable(line);
    free(line);
    return safe;
}

char *lz_text_quoted_ascii(const char *s, size_t max)
{
    size_t n = strlen(s), shown = n;
    if (max && n > max) {
        shown = max;
        /* Do not split a UTF-8 sequence: back up to a lead byte. */
        while (shown > 0 && ((unsigned char) s[shown] & 0xc0) == 0x80)
            shown--;
    }
    /* Backslash and quote first, so that what lz_text_printable writes
     * (\xNN) is the only single backslash in the result. */
    char *q = lz_xmalloc(2 * shown + 1);
    size_t k = 0;
    for (size_t i = 0; i < shown; i++) {
        if (s[i] == '\\' || s[i] == '\'')
            q[k++] = '\\';
        q[k++] = s[i];
    }
    q[k] = '\0';
    char *t = lz_text_printable(q);
    free(q);
    /* ASCII only: what is left above it (letters of other scripts, and
     * look-alikes of the quote such as U+02BC) is shown as \xNN too, so
     * that nothing inside an item can pass for Lazaret's own quoting or
     * labels (attack round i11c, C1). */
    size_t tn = strlen(t), hi = 0;
    for (size_t i = 0; i < tn; i++)
        hi += (unsigned char) t[i] >= 0x80;
    char *p = lz_xmalloc(tn + 3 * hi + 1);
    k = 0;
    for (size_t i = 0; i < tn; i++) {
        unsigned char ch = (unsigned char) t[i];
        if (ch >= 0x80) {
            snprintf(p + k, 5, "\\x%02x", ch);
            k += 4;
        } else {
            p[k++] = (char) ch;
        }
    }
    p[k] = '\0';
    free(t);
    char *out = shown < n ? lz_xasprintf("'%s'… (%zu more bytes not shown)", p, n - shown)
                          : lz_xasprintf("'%s'", p);
    free(p);
    return out;
}

char *lz_text_line_ascii(const char *s, size_t max)
{
    char *q = lz_xmalloc(max + 1);
    size_t n = 0;
    for (; *s && *s != '\n' && n < max; s++)
        q[n++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?';
    q[n] = '\0';
    return q;
}

char *lz_text_shell_quote(const char *s)
{
    size_t n = 3;
    for (const char *p = s; *p; p++)
        n += *p == '\'' ? 4 : 1;
    char *q = lz_xmalloc(n);
    char *o = q;
    *o++ = '\'';
    for (const char *p = s; *p; p++) {
        if (*p == '\'') {
            memcpy(o, "'\\''", 4);
            o += 4;
        } else {
            *o++ = *p;
        }
    }
    *o++ = '\'';
    *o = '\0';
    return q;
}
