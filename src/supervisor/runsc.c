/* SPDX-License-Identifier: Apache-2.0
 *
 * Running runsc: one subcommand with the supervisor's global flags,
 * started (an exec's runsc) or waited for while every other child is
 * reaped (create, start, kill, delete).
 */
#include "supervisor/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int sup_runsc_run(sup *s, char *const *args, int in, int out, int errfd, int extra_fd,
                  lz_error **err)
{
    return sup_runsc_run_tty(s, args, in, out, errfd, extra_fd, false, err);
}

int sup_runsc_run_tty(sup *s, char *const *args, int in, int out, int errfd, int extra_fd,
                      bool ctty, lz_error **err)
{
    size_t n = 0;
    while (args[n])
        n++;
    _cleanup_free_ char **argv = lz_xcalloc(1 + s->n_globals + n + 1, sizeof(char *));
    size_t k = 0;
    argv[k++] = (char *) "runsc";
    for (size_t i = 0; i < s->n_globals; i++)
        argv[k++] = s->runsc_globals[i];
    for (size_t i = 0; i < n; i++)
        argv[k++] = args[i];
    argv[k] = NULL;

    lz_spawn_fd fds[4];
    size_t nfds = 0;
    const int std[3] = { in, out, errfd };
    for (int i = 0; i < 3; i++)
        if (std[i] >= 0)
            fds[nfds++] = (lz_spawn_fd){ std[i], i };
    if (extra_fd >= 0)
        fds[nfds++] = (lz_spawn_fd){ extra_fd, 3 };
    char *const envp[] = { (char *) "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
    /* PR_SET_PDEATHSIG(SIGKILL), the launcher's default, changes nothing
     * here: the supervisor is pid 1 of the pid namespace runsc runs in, and
     * its end kills the namespace. */
    const lz_spawn_async opt = { .envp = envp, .fds = fds, .n_fds = nfds, .ctty = ctty };
    lz_child child;
    if (lz_spawn_start(s->sc->runsc, argv, &opt, &child, err) < 0)
        return -1;
    return (int) lz_child_release(&child);
}

/* Wait for `pid`. As pid 1 of its pid namespace the supervisor inherits every
 * orphan (runsc's sandbox and gofer processes among them) and must sup_reap them
 * all the time: runsc delete waits until those processes are gone, and an
 * unreaped zombie still "exists". */
int sup_wait_status(sup *s, pid_t pid)
{
    for (;;) {
        int status = 0;
        pid_t r = waitpid(-1, &status, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == pid)
            return status;
        sup_child_exited(s, r, status);
    }
}

/* Last non-empty line of a small file, for error messages. */
char *sup_last_line_of(int dirfd, const char *name)
{
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return NULL;
    char buf[8192];
    off_t size = lseek(fd, 0, SEEK_END);
    off_t off = size > (off_t) sizeof(buf) - 1 ? size - (off_t) sizeof(buf) + 1 : 0;
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, off);
    close(fd);
    if (n <= 0)
        return NULL;
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    char *nl = strrchr(buf, '\n');
    return lz_xstrdup(nl ? nl + 1 : buf);
}

/* Run one runsc subcommand to completion with stderr into <gen>/name. */
int sup_runsc_simple(sup *s, char *const *args, const char *errname, lz_error **err)
{
    int efd =
        openat(s->gen_fd, errname, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (efd < 0) {
        /* gen_fd is O_PATH: openat works relative to it for lookup. */
        return lz_error_set(err, errno, "cannot create %s/%s", s->sc->generation_dir, errname);
    }
    int pid = sup_runsc_run(s, args, -1, -1, efd, -1, err);
    close(efd);
    if (pid < 0)
        return -1;
    int status = sup_wait_status(s, pid);
    if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        _cleanup_free_ char *line = sup_last_line_of(s->gen_fd, errname);
        lz_error_set(err, 0, "runsc %s failed: %s", args[0],
                     line ? line : "(no message; see the runsc log)");
        return lz_error_hint(err, "see %s/%s and the runsc log %s", s->sc->generation_dir, errname,
                             s->sc->log_path ? s->sc->log_path : "(none)");
    }
    return 0;
}
