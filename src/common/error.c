/* SPDX-License-Identifier: Apache-2.0 */
#include "common/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/util.h"

/* Allocation failure while building an error must not lose the fact that
 * something failed: fall back to a static error object. */
static lz_error oom_error = { ENOMEM, (char *) "out of memory while reporting an error", NULL };

static char *vformat(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
static char *vformat(const char *fmt, va_list ap)
{
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        return NULL;
    return s;
}

int lz_error_setv(lz_error **err, int errnum, const char *fmt, va_list ap)
{
    if (!err || *err)
        return -1;
    lz_error *e = calloc(1, sizeof(*e));
    if (!e) {
        *err = &oom_error;
        return -1;
    }
    e->errnum = errnum;
    e->message = vformat(fmt, ap);
    if (!e->message) {
        free(e);
        *err = &oom_error;
        return -1;
    }
    *err = e;
    return -1;
}

int lz_error_set(lz_error **err, int errnum, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lz_error_setv(err, errnum, fmt, ap);
    va_end(ap);
    return -1;
}

int lz_error_hint(lz_error **err, const char *fmt, ...)
{
    if (!err || !*err || *err == &oom_error)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    char *h = vformat(fmt, ap);
    va_end(ap);
    if (h) {
        free((*err)->hint);
        (*err)->hint = h;
    }
    return -1;
}

int lz_error_prefix(lz_error **err, const char *fmt, ...)
{
    if (!err || !*err || *err == &oom_error)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    char *ctx = vformat(fmt, ap);
    va_end(ap);
    if (!ctx)
        return -1;
    char *m = NULL;
    if (asprintf(&m, "%s: %s", ctx, (*err)->message) >= 0) {
        free((*err)->message);
        (*err)->message = m;
    }
    free(ctx);
    return -1;
}

void lz_error_free(lz_error *err)
{
    if (!err || err == &oom_error)
        return;
    free(err->message);
    free(err->hint);
    free(err);
}

lz_error *lz_error_take(lz_error **err)
{
    if (!err)
        return NULL;
    lz_error *e = *err;
    *err = NULL;
    return e;
}

/* s with every control byte written as \xNN: an error may carry bytes
 * someone else chose (a tool's output, a file name), and none of them may
 * act on the user's terminal or start a line of its own. A line feed stays
 * only before four spaces, the indented continuation lines of a message
 * that lists things (state's candidates): a line that could pass for
 * "lazaret: ..." or "  fix: ..." cannot be made (attack round i12g).
 * Untrusted text is made printable where it enters a message
 * (lz_text_printable); this is the last line of defence. */
static void put_text(const char *s, FILE *out)
{
    for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
        bool continuation = *p == '\n' && strncmp((const char *) p + 1, "    ", 4) == 0;
        if ((*p < 0x20 && !continuation) || *p == 0x7f)
            fprintf(out, "\\x%02x", *p);
        else
            fputc(*p, out);
    }
}

void lz_error_report(const lz_error *err, FILE *out)
{
    if (!err)
        return;
    fputs("lazaret: error: ", out);
    put_text(err->message, out);
    if (err->errnum)
        fprintf(out, ": %s", strerror(err->errnum));
    /* Every error ends with a fix line (docs/errors.md): where the code
     * knows no specific one, the general next step. */
    fputs("\n  fix: ", out);
    put_text(err->hint ? err->hint : LZ_ERROR_GENERAL_FIX, out);
    fputc('\n', out);
    fflush(out);
}
