/* SPDX-License-Identifier: Apache-2.0
 *
 * The one error contract of the Lazaret code base (docs/errors.md).
 *
 *  - A fallible function returns an int: >= 0 on success, -1 on failure.
 *    Functions returning a pointer return NULL on failure.
 *  - On failure it stores a newly allocated lz_error in *err (when err is not
 *    NULL) and leaves every ret_* output parameter untouched.
 *  - The message says what failed and on which object ("cannot open workspace
 *    /home/a/p"); the hint says what the user should do about it.
 *  - A caller either handles the error (and frees it) or adds its context with
 *    lz_error_prefix() and returns -1 itself.
 *  - Library code never prints and never exits; the CLI edge reports an error
 *    once with lz_error_report().
 *  - Values of environment variables never enter an error message.
 */
#ifndef LAZARET_COMMON_ERROR_H
#define LAZARET_COMMON_ERROR_H

#include <stdarg.h>
#include <stdio.h>

/* On every fallible function's declaration: a result nobody looks at is an
 * error the build refuses (-Werror=unused-result). Where a failure really
 * does not matter (best-effort cleanup), say so with lz_best_effort(). */
#define LZ_MUST_CHECK __attribute__((warn_unused_result))

/* Discard the result of a fallible call on purpose. */
static inline void lz_best_effort(int result)
{
    (void) result;
}

typedef struct lz_error {
    int errnum;    /* errno at the failure, 0 when not a system error */
    char *message; /* what failed, on which object (never NULL) */
    char *hint;    /* what the user should do, or NULL */
} lz_error;

/* Fill *err (if err != NULL and *err == NULL) with a formatted message and
 * errnum (0 for none). A system error's strerror() text is appended by
 * lz_error_report(), not stored in the message. Always returns -1. If *err is
 * already set the new error is dropped: the first failure is the cause. */
int lz_error_set(lz_error **err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int lz_error_setv(lz_error **err, int errnum, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* Attach (or replace) the user-facing fix of an existing error. Returns -1.
 * A no-op when err or *err is NULL. */
int lz_error_hint(lz_error **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prepend "<context>: " to the message of an existing error. Returns -1. */
int lz_error_prefix(lz_error **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Free an error; NULL is fine. */
void lz_error_free(lz_error *err);

/* Move the error out: returns *err and sets *err to NULL. */
lz_error *lz_error_take(lz_error **err);

/* Print "lazaret: error: <message>[: <strerror>]" and "  fix: <hint>" (or
 * LZ_ERROR_GENERAL_FIX) to out. */
void lz_error_report(const lz_error *err, FILE *out);

/* The fix line of an error without a specific hint. */
#define LZ_ERROR_GENERAL_FIX                                                                       \
    "run 'lazaret doctor' to check this machine's set-up; if it finds nothing wrong, report "      \
    "the message above with the output of 'lazaret version'"

#endif
