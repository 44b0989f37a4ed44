/* SPDX-License-Identifier: Apache-2.0 */
#include "common/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"

char *const lz_spawn_default_env[] = {
    (char *) "PATH=" LZ_SPAWN_SYSTEM_PATH,
    (char *) "LC_ALL=C",
    NULL,
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds left until deadline (-1: none), clamped for poll(). */
static int remaining_ms(int64_t deadline)
{
    if (deadline < 0)
        return -1;
    int64_t left = deadline - now_ms();
    if (left <= 0)
        return 0;
    return left > INT32_MAX ? INT32_MAX : (int) left;
}

/* A pipe end that is one of 0, 1, 2 (possible when the caller runs with a
 * standard stream closed) would be clobbered by the child's own dup2 set-up;
 * move it to >= 3, keeping O_CLOEXEC. */
static int move_above_stdio(int *fd)
{
    if (*fd > STDERR_FILENO)
        return 0;
    int nfd = fcntl(*fd, F_DUPFD_CLOEXEC, 3);
    if (nfd < 0)
        return -1;
    close(*fd);
    *fd = nfd;
    return 0;
}

/* Wait for pid until deadline; on timeout kill it and reap it. Returns the
 * wait status, or -1 with errno (ETIMEDOUT after a kill). */
static int reap(pid_t pid, int64_t deadline)
{
    long nap_us = 200;
    for (;;) {
        int status;
        pid_t r = waitpid(pid, &status, deadline < 0 ? 0 : WNOHANG);
        if (r == pid)
            return status;
        if (r < 0 && errno != EINTR)
            return -1;
        if (r == 0) {
            if (remaining_ms(deadline) == 0) {
                kill(pid, SIGKILL);
                while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                    ;
                errno = ETIMEDOUT;
                return -1;
            }
            /* The child closed its output and is usually exiting this very
             * moment: poll briefly, backing off to 10 ms. */
            struct timespec ts = { 0, nap_us * 1000 };
            nanosleep(&ts, NULL);
            if (nap_us < 10000)
                nap_us *= 2;
        }
    }
}

int lz_spawn_capture(const char *path, char *const argv[], const lz_spawn_options *opt,
                     lz_spawn_output *ret_out, lz_error **err)
{
    static const lz_spawn_options defaults = { 0 };
    if (!opt)
        opt = &defaults;
    if (!path || path[0] != '/' || !argv || !argv[0])
        return lz_error_set(err, EINVAL, "cannot run '%s': not an absolute program path",
                            path ? path : "(null)");

    size_t cap = opt->capture_max ? opt->capture_max : LZ_SPAWN_CAPTURE_DEFAULT;
    int timeout = opt->timeout_ms ? opt->timeout_ms : LZ_SPAWN_TIMEOUT_MS_DEFAULT;
    char *const *envp = opt->envp ? opt->envp : lz_spawn_default_env;

    int ret = -1;
    int fds[2] = { -EBADF, -EBADF };
    _cleanup_close_ int rfd = -EBADF;
    _cleanup_close_ int wfd = -EBADF;
    _cleanup_free_ char *buf = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    bool fa_init = false, attr_init = false;
    pid_t pid = -1;

    if (pipe2(fds, O_CLOEXEC) < 0)
        return lz_error_set(err, errno, "cannot create a pipe to run %s", path);
    rfd = fds[0];
    wfd = fds[1];
    if (move_above_stdio(&rfd) < 0 || move_above_stdio(&wfd) < 0) {
        lz_error_set(err, errno, "cannot set up the pipe to run %s", path);
        goto out;
    }

    int r = posix_spawn_file_actions_init(&fa);
    if (r != 0) {
        lz_error_set(err, r, "cannot prepare to run %s", path);
        goto out;
    }
    fa_init = true;
    /* In the child: stdin from /dev/null, stdout (and stderr) to the pipe;
     * dup2 clears O_CLOEXEC on the copies only. */
    r = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    if (r == 0)
        r = posix_spawn_file_actions_adddup2(&fa, wfd, STDOUT_FILENO);
    if (r == 0) {
        if (opt->merge_stderr)
            r = posix_spawn_file_actions_adddup2(&fa, wfd, STDERR_FILENO);
        else
            r = posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    }
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    /* Belt and braces: an fd some library opened without O_CLOEXEC must not
     * reach the child either. */
    if (r == 0)
        r = posix_spawn_file_actions_addclosefrom_np(&fa, STDERR_FILENO + 1);
#endif
    if (r != 0) {
        lz_error_set(err, r, "cannot prepare to run %s", path);
        goto out;
    }

    r = posix_spawnattr_init(&attr);
    if (r != 0) {
        lz_error_set(err, r, "cannot prepare to run %s", path);
        goto out;
    }
    attr_init = true;
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    sigdelset(&all, SIGKILL);
    sigdelset(&all, SIGSTOP);
    r = posix_spawnattr_setsigmask(&attr, &none);
    if (r == 0)
        r = posix_spawnattr_setsigdefault(&attr, &all);
    if (r == 0)
        r = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    if (r != 0) {
        lz_error_set(err, r, "cannot prepare to run %s", path);
        goto out;
    }

    /* glibc's posix_spawn reports a failed exec (ENOENT, EACCES, ENOEXEC...)
     * as its return value, so no child-to-parent error pipe is needed. */
    r = posix_spawn(&pid, path, &fa, &attr, argv, envp);
    if (r != 0) {
        pid = -1;
        lz_error_set(err, r, "cannot run %s", path);
        goto out;
    }
    lz_close(&wfd); /* only the child writes; EOF arrives when it is done */

    int64_t deadline = timeout < 0 ? -1 : now_ms() + timeout;
    buf = lz_xmalloc(cap + 1);
    size_t len = 0;
    bool truncated = false;
    bool timed_out = false;
    while (rfd >= 0) {
        struct pollfd p = { .fd = rfd, .events = POLLIN };
        int n = poll(&p, 1, remaining_ms(deadline));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            lz_error_set(err, errno, "cannot read the output of %s", path);
            goto out;
        }
        if (n == 0) {
            timed_out = true;
            break;
        }
        char chunk[4096];
        ssize_t got = read(rfd, chunk, sizeof(chunk));
        if (got < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            lz_error_set(err, errno, "cannot read the output of %s", path);
            goto out;
        }
        if (got == 0) {
            lz_close(&rfd);
            break;
        }
        size_t keep = (size_t) got;
        if (keep > cap - len) {
            keep = cap - len;
            truncated = true;
        }
        memcpy(buf + len, chunk, keep);
        len += keep;
    }

    int status;
    if (timed_out) {
        kill(pid, SIGKILL);
        status = reap(pid, -1);
        pid = -1;
        lz_error_set(err, ETIMEDOUT, "%s did not finish within %d ms and was stopped", path,
                     timeout);
        goto out;
    }
    status = reap(pid, deadline);
    pid = -1;
    if (status < 0) {
        if (errno == ETIMEDOUT)
            lz_error_set(err, ETIMEDOUT, "%s did not finish within %d ms and was stopped", path,
                         timeout);
        else
            lz_error_set(err, errno, "cannot wait for %s", path);
        goto out;
    }

    buf[len] = '\0';
    if (ret_out) {
        ret_out->data = TAKE_PTR(buf);
        ret_out->len = len;
        ret_out->truncated = truncated;
    }
    if (WIFEXITED(status))
        ret = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
        ret = 128 + WTERMSIG(status);
    else
        ret = 128; /* not reachable without WUNTRACED; keep the result a failure */

out:
    if (pid > 0) {
        /* Error after a successful spawn: do not leave the child behind. */
        kill(pid, SIGKILL);
        reap(pid, -1);
    }
    if (attr_init)
        posix_spawnattr_destroy(&attr);
    if (fa_init)
        posix_spawn_file_actions_destroy(&fa);
    return ret;
}

void lz_spawn_output_free(lz_spawn_output *out)
{
    if (!out)
        return;
    free(out->data);
    out->data = NULL;
    out->len = 0;
    out->truncated = false;
}

int lz_spawn_find_program(const char *name, const char *search_path, char **ret_path,
                          lz_error **err)
{
    if (!name || !name[0] || strchr(name, '/') || strcmp(name, ".") == 0 ||
        strcmp(name, "..") == 0)
        return lz_error_set(err, EINVAL, "'%s' is not a plain program name", name ? name : "");

    const char *p = search_path ? search_path : "";
    while (*p) {
        const char *end = strchrnul(p, ':');
        size_t n = (size_t) (end - p);
        if (n > 0 && p[0] == '/') {
            /* "/usr/bin/" + name: avoid a doubled slash for tidy output. */
            bool slash = p[n - 1] == '/';
            _cleanup_free_ char *cand =
                lz_xasprintf("%.*s%s%s", (int) n, p, slash ? "" : "/", name);
            struct stat st;
            if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0) {
                *ret_path = TAKE_PTR(cand);
                return 0;
            }
        }
        p = *end ? end + 1 : end;
    }
    return lz_error_set(err, ENOENT, "program %s not found", name);
}

int lz_close_fds_except(const int *keep, size_t n)
{
    /* Sorted, positive, unique copy: the gaps between kept fds are closed
     * with one close_range each. No allocation (callers are fresh forks). */
    enum { KEEP_MAX = 256 };
    unsigned int k[KEEP_MAX];
    size_t nk = 0;
    for (size_t i = 0; i < n; i++) {
        if (keep[i] < 0)
            continue;
        if (nk == KEEP_MAX) {
            errno = E2BIG;
            return -1;
        }
        unsigned int v = (unsigned int) keep[i];
        size_t j = nk++;
        while (j > 0 && k[j - 1] > v) {
            k[j] = k[j - 1];
            j--;
        }
        k[j] = v;
    }
    unsigned int lo = 0;
    for (size_t i = 0; i < nk; i++) {
        if (k[i] > lo && close_range(lo, k[i] - 1, 0) < 0)
            return -1;
        lo = k[i] + 1;
    }
    return close_range(lo, ~0U, 0);
}
