/* SPDX-License-Identifier: Apache-2.0 */
#include "coordinator/log.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

void clog_open(coord *c)
{
    lz_error *e = NULL;
    int root = lz_plan_open(&c->a->cfg->storage_domain_root, O_PATH | O_DIRECTORY, true, &e);
    lz_error_free(e);
    if (root < 0)
        return;
    mkdirat(root, "logs", 0700);
    int fd = openat(root, "logs/coordinator.log",
                    O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
        dup2(fd, STDERR_FILENO);
        c->log = fdopen(fd, "a");
    }
    close(root);
}

void clog_(coord *c, const char *fmt, ...)
{
    if (!c->log)
        return;
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    char ts[32];
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(c->log, "%s [%d] ", ts, (int) getpid());
    va_list ap;
    va_start(ap, fmt);
    /* One line per entry, whatever names the sandbox chose. */
    char *line = lz_vprintable(fmt, ap);
    va_end(ap);
    fputs(line, c->log);
    free(line);
    fputc('\n', c->log);
    fflush(c->log);
}

void log_error(coord *c, const char *what, const lz_error *e)
{
    if (e)
        clog_(c, "%s: %s%s%s", what, e->message, e->errnum ? ": " : "",
              e->errnum ? strerror(e->errnum) : "");
}
