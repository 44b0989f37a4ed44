/* SPDX-License-Identifier: Apache-2.0
 *
 * Scope-bound cleanup (systemd style) and small helpers.
 * Ownership hand-over out of a scope is explicit: TAKE_FD() / TAKE_PTR().
 */
#ifndef LAZARET_COMMON_UTIL_H
#define LAZARET_COMMON_UTIL_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#define LZ_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static inline void lz_freep(void *p)
{
    free(*(void **) p);
}
static inline void lz_closep(int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        close(*fd);
        errno = saved;
    }
}

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(lz_freep)
#define _cleanup_close_ _cleanup_(lz_closep)

/* Hand an fd (or pointer) out of a cleanup scope. */
#define TAKE_FD(fd)                                                                                \
    ({                                                                                             \
        int _fd_ = (fd);                                                                           \
        (fd) = -EBADF;                                                                             \
        _fd_;                                                                                      \
    })
#define TAKE_PTR(p)                                                                                \
    ({                                                                                             \
        __typeof__(p) _p_ = (p);                                                                   \
        (p) = NULL;                                                                                \
        _p_;                                                                                       \
    })

/* Close fd if valid and set it to -EBADF. */
static inline void lz_close(int *fd)
{
    lz_closep(fd);
    *fd = -EBADF;
}

/* Abort on allocation failure: Lazaret treats OOM in small allocations as
 * fatal (like OpenSSH's xmalloc); it never continues with a partial state. */
void *lz_xmalloc(size_t n);
void *lz_xcalloc(size_t n, size_t size);
void *lz_xrealloc(void *p, size_t n, size_t size);
char *lz_xstrdup(const char *s);
char *lz_xstrndup(const char *s, size_t n);
char *lz_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *lz_xvasprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

#endif
