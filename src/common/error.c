/* SPDX-License-Identifier: Apache-2.0 */
#include "common/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

void lz_error_report(const lz_error *err, FILE *out)
{
    if (!err)
        return;
    if (err->errnum)
        fprintf(out, "lazaret: error: %s: %s\n", err->message, strerror(err->errnum));
    else
        fprintf(out, "lazaret: error: %s\n", err->message);
    /* Every error ends with a fix line (docs/errors.md): where the code
     * knows no specific one, the general next step. */
    fprintf(out, "  fix: %s\n", err->hint ? err->hint : LZ_ERROR_GENERAL_FIX);
    fflush(out);
}
