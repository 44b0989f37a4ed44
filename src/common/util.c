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

char *lz_xvasprintf(const char *fmt, va_list ap)
{
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        oom();
    return s;
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
