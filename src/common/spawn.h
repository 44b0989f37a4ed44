/* SPDX-License-Identifier: Apache-2.0
 *
 * Running a host program and capturing its output, the only way Lazaret
 * starts another program (OpenSSH misc.c:subprocess in spirit):
 *
 *  - an absolute path and an argv vector; never a shell, never a PATH lookup
 *    at exec time (lz_spawn_find_program() resolves a name beforehand);
 *  - an explicit, minimal environment: nothing of the caller's environment
 *    reaches the child unless the caller puts it into envp;
 *  - stdin is /dev/null; stdout (and optionally stderr) go to a pipe whose
 *    contents are captured up to a bound, the rest is read and dropped so the
 *    child never blocks on a full pipe; stderr otherwise goes to /dev/null;
 *  - no descriptor of the caller leaks: every Lazaret fd is O_CLOEXEC from
 *    birth, and the child additionally closes every fd >= 3 before exec;
 *  - signal mask empty and every signal disposition default in the child,
 *    whatever the caller ignores or blocks;
 *  - the child is waited for; a child that outlives its deadline is killed
 *    with SIGKILL and reaped, so no zombie or stray process remains. Output
 *    is read until every holder of the pipe has closed it, so a grandchild
 *    that keeps it open counts against the deadline too.
 *
 * For short-lived programs (probes, helpers that finish). posix_spawn cannot
 * set PR_SET_PDEATHSIG, so if the caller itself dies mid-run the child runs
 * on until it ends by itself; long-lived children need their own launcher.
 *
 * All functions follow the error contract of common/error.h.
 */
#ifndef LAZARET_COMMON_SPAWN_H
#define LAZARET_COMMON_SPAWN_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* Directories where system tools live, searched after the user's PATH for
 * programs that ordinary users' PATHs often miss (nft is in /usr/sbin). */
#define LZ_SPAWN_SYSTEM_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* Defaults applied when the corresponding option is 0. */
#define LZ_SPAWN_CAPTURE_DEFAULT ((size_t) 64 * 1024)
#define LZ_SPAWN_TIMEOUT_MS_DEFAULT 30000

typedef struct lz_spawn_options {
    /* NULL-terminated "NAME=value" strings; NULL means lz_spawn_default_env
     * (a fixed PATH and LC_ALL=C, nothing inherited). */
    char *const *envp;
    /* Bytes of output kept; 0 means LZ_SPAWN_CAPTURE_DEFAULT. */
    size_t capture_max;
    /* Milliseconds before the child is killed; 0 means
     * LZ_SPAWN_TIMEOUT_MS_DEFAULT, a negative value means no deadline. */
    int timeout_ms;
    /* true: stderr goes into the same capture as stdout (interleaved as the
     * child writes them); false: stderr goes to /dev/null. */
    bool merge_stderr;
} lz_spawn_options;

typedef struct lz_spawn_output {
    char *data;     /* captured bytes plus a terminating NUL; owned by the caller */
    size_t len;     /* bytes captured, excluding the NUL (the data may contain NULs) */
    bool truncated; /* the child wrote more than capture_max bytes */
} lz_spawn_output;

/* The environment used when lz_spawn_options.envp is NULL. */
extern char *const lz_spawn_default_env[];

/* Run the program at the absolute path `path` with argument vector argv
 * (argv[0] is what the child sees as its name; NULL-terminated), wait for it
 * and capture its output.
 *
 * opt may be NULL for all defaults. ret_out may be NULL to discard the
 * output; otherwise on success it receives the capture (free it with
 * lz_spawn_output_free()).
 *
 * Returns the child's status on success: its exit code (0..255), or 128+N
 * when signal N killed it (the shell convention). Returns -1 with *err set
 * when the program could not be started (the errno of the failed exec, e.g.
 * ENOENT or EACCES), when path is not absolute (EINVAL), or when the deadline
 * passed (ETIMEDOUT; the child has then been killed and reaped). On failure
 * *ret_out is untouched. */
int lz_spawn_capture(const char *path, char *const argv[], const lz_spawn_options *opt,
                     lz_spawn_output *ret_out, lz_error **err);

/* Free the captured data and reset *out; NULL or an empty output are fine. */
void lz_spawn_output_free(lz_spawn_output *out);

/* Find the executable `name` in the colon-separated directory list
 * search_path, the way execvp() would but without its dangers:
 *  - name must be a plain file name (no '/', not "." or ".."), else EINVAL;
 *  - directory entries that are empty or relative are skipped: they make the
 *    result depend on the current directory, which for Lazaret is often an
 *    agent-writable workspace that must not supply host programs;
 *  - only a regular file that the real user may execute counts.
 * On success stores a newly allocated absolute path in *ret_path and returns
 * 0. Returns -1 with *err set (errno ENOENT) when no directory holds it. The
 * result is a label found at one moment, not a pinned file: callers exec it
 * soon, or pin it with an fd when the check has security value. */
int lz_spawn_find_program(const char *name, const char *search_path, char **ret_path,
                          lz_error **err);

/* Close every descriptor of the calling process except those in keep[0..n)
 * (any order, duplicates and negative values allowed). For a forked child
 * that runs on without exec: O_CLOEXEC protects only exec, so a fork that
 * keeps running holds every socket, pipe and inotify fd of its parent until
 * it drops them here. Returns 0, or -1 with errno set (nothing was kept
 * open that should not be: on error the caller must exit). */
int lz_close_fds_except(const int *keep, size_t n);

#endif
