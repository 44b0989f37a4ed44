/* SPDX-License-Identifier: Apache-2.0 */
#include "coordinator/log.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/timing.h"
#include "common/text.h"
#include "common/util.h"

/* The log does not grow without bound (issue 12): past LOG_ROTATE_BYTES it
 * is renamed to coordinator.log.1 (replacing the previous one) and a new
 * one is begun, so a Domain keeps at most twice this much log. Checked when
 * a generation opens the log and after every line it writes. logs/ is
 * Lazaret's own (0700, never bound into a sandbox). */
#define LOG_ROTATE_BYTES ((off_t) 4 << 20)

static int open_log(int logs)
{
    struct stat st;
    if (fstatat(logs, "coordinator.log", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
        st.st_size >= LOG_ROTATE_BYTES)
        renameat(logs, "coordinator.log", logs, "coordinator.log.1");
    return openat(logs, "coordinator.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
                  0600);
}

/* (Re)open the log: it becomes stderr too, so what a library, the
 * supervisor or a sanitizer prints lands in it. */
static void attach_log(coord *c, int fd)
{
    if (fd < 0)
        return;
    dup2(fd, STDERR_FILENO);
    FILE *f = fdopen(fd, "a");
    if (!f) {
        close(fd);
        return;
    }
    if (c->log)
        fclose(c->log);
    c->log = f;
}

void clog_open(coord *c)
{
    lz_error *e = NULL;
    int root = lz_plan_open(&c->a->cfg->storage_domain_root, O_PATH | O_DIRECTORY, true, &e);
    lz_error_free(e);
    if (root < 0)
        return;
    mkdirat(root, "logs", 0700);
    c->logs_fd = openat(root, "logs", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close(root);
    if (c->logs_fd >= 0)
        attach_log(c, open_log(c->logs_fd));
}

static void rotate_if_due(coord *c)
{
    struct stat st;
    if (c->logs_fd < 0 || fstat(fileno(c->log), &st) < 0 || st.st_size < LOG_ROTATE_BYTES)
        return;
    attach_log(c, open_log(c->logs_fd));
}

void clog_timing(coord *c)
{
    if (!c->log)
        return;
    lz_timing_flush(c->log, NULL);
    rotate_if_due(c);
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
    rotate_if_due(c);
}

void log_error(coord *c, const char *what, const lz_error *e)
{
    if (e)
        clog_(c, "%s: %s%s%s", what, e->message, e->errnum ? ": " : "",
              e->errnum ? strerror(e->errnum) : "");
}
