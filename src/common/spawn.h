/* SPDX-License-Identifier: Apache-2.0
 *
 * Starting host programs: the only way Lazaret runs another program on the
 * host (OpenSSH misc.c:subprocess in spirit). Two launchers share one set of
 * guarantees:
 *
 *  - lz_spawn_capture(): short-lived programs (probes, nft, git, skopeo,
 *    newuidmap...): waits, captures the output, enforces a deadline;
 *  - lz_spawn_start(): long-lived children (runsc, slirp4netns): returns at
 *    once with the child's pid and a pidfd, wired as the caller asks.
 *
 * What every child started here gets:
 *
 *  - an absolute path and an argv vector; never a shell, never a PATH lookup
 *    at exec time (lz_spawn_find_program() resolves a name beforehand);
 *  - an explicit, minimal environment: nothing of the caller's environment
 *    reaches the child unless the caller puts it into envp;
 *  - no descriptor of the caller leaks: every Lazaret fd is O_CLOEXEC from
 *    birth, and the child additionally closes every fd it was not given
 *    before exec (stdin/stdout/stderr it was not given are /dev/null);
 *  - signal mask empty and every signal disposition default in the child,
 *    whatever the caller ignores or blocks;
 *  - a failed exec is the caller's error (with the exec's errno, e.g.
 *    ENOENT), never a child that "exits 127".
 *
 * lz_spawn_capture specifics: stdin is /dev/null; stdout (and optionally
 * stderr) go to a pipe whose contents are captured up to a bound, the rest is
 * read and dropped so the child never blocks on a full pipe; the child is
 * waited for, and one that outlives its deadline is killed with SIGKILL and
 * reaped. Output is read until every holder of the pipe has closed it, so a
 * grandchild that keeps it open counts against the deadline too. It uses
 * posix_spawn, which cannot set PR_SET_PDEATHSIG: if the caller dies mid-run
 * the child runs on until it ends by itself, which is why long-lived
 * children go through lz_spawn_start (PR_SET_PDEATHSIG, RLIMIT_CORE, a
 * session and controlling terminal, descriptors at fixed numbers).
 *
 * Not program starts, and so not here: forks that run Lazaret's own code
 * without exec - coordinator/bootstrap.c (the coordinator's double fork),
 * supervisor/userns.c (the user-namespace child), supervisor/supervisor.c
 * (the pid-namespace init), supervisor/sidecar.c (in_netns helpers, the
 * address watcher and the --publish forwarders), cli/cmd_doctor.c (namespace probes). A long-lived
 * one drops the descriptors it inherited with lz_close_fds_except(), as O_CLOEXEC only acts at
 * exec. src/guest/ runs inside the sandbox, not on the host.
 *
 * All functions follow the error contract of common/error.h.
 */
#ifndef LAZARET_COMMON_SPAWN_H
#define LAZARET_COMMON_SPAWN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

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
    /* Start in the directory open at cwd_fd (fchdir) instead of the
     * caller's working directory. */
    bool chdir_to_fd;
    int cwd_fd;
    /* Stop the child as soon as it is seen blocked opening a FIFO (a named
     * pipe nothing writes to or reads from: its /proc/PID/wchan says
     * wait_for_partner in two looks a quarter of a second apart), with the
     * timeout's error (ETIMEDOUT) and a message that says so, instead of
     * waiting out timeout_ms. For a program that reads files someone else
     * may have replaced by a FIFO (host Git reading a workspace's
     * .gitignore files). Without the kernel's symbol names in wchan it
     * never fires: the timeout still holds. */
    bool stop_on_fifo_wait;
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
LZ_MUST_CHECK
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
LZ_MUST_CHECK
int lz_spawn_find_program(const char *name, const char *search_path, char **ret_path,
                          lz_error **err);

/* ---- the asynchronous launcher ----------------------------------------- */

/* One descriptor handed to the child: the caller's descriptor `fd` becomes
 * descriptor number `child_fd` in the child (without O_CLOEXEC there). The
 * caller's fd is not changed or closed; the same fd may be listed several
 * times (a PTY slave as stdin, stdout and stderr). */
typedef struct lz_spawn_fd {
    int fd;
    int child_fd;
} lz_spawn_fd;

/* Most descriptors one child can be given. */
#define LZ_SPAWN_FDS_MAX 16

/* Options of lz_spawn_start(). A zero-initialised struct (or NULL) means:
 * default environment, stdin/stdout/stderr on /dev/null, nothing else open,
 * PR_SET_PDEATHSIG(SIGKILL), the caller's session. Stdio is given through
 * `fds` like any other descriptor (child_fd 0, 1, 2), so that a zero field
 * never silently means "the caller's fd 0". */
typedef struct lz_spawn_async {
    /* NULL-terminated "NAME=value" strings; NULL means lz_spawn_default_env. */
    char *const *envp;
    /* n_fds (<= LZ_SPAWN_FDS_MAX) descriptors to hand over, each child_fd
     * once; 0, 1 and 2 not listed are /dev/null, every other fd is closed. */
    const lz_spawn_fd *fds;
    size_t n_fds;
    /* Signal the child gets when the thread that started it ends
     * (PR_SET_PDEATHSIG): 0 means SIGKILL, -1 none. */
    int pdeathsig;
    /* Start a new session (setsid): no signal for the caller's process
     * group or terminal reaches the child. */
    bool new_session;
    /* New session, and the child's fd 0 (a terminal) becomes its
     * controlling terminal (TIOCSCTTY): the kernel then sends the child
     * SIGWINCH when the terminal is resized. */
    bool ctty;
    /* Run the object open at the caller's descriptor exec_fd (any mode,
     * O_PATH included) instead of looking `path` up (path is then only the
     * name errors use): execveat(fd, "", AT_EMPTY_PATH), so a path replaced
     * after the caller checked the object cannot select another one. The
     * child's copy is close-on-exec, so the program gets no extra
     * descriptor; but the kernel cannot run a "#!" script from a
     * close-on-exec descriptor (its interpreter opens /dev/fd/N after the
     * exec), so with exec_fd_keep the copy stays open in the program, at
     * the lowest number above every child_fd, for its interpreter to read. */
    bool exec_from_fd;
    int exec_fd;
    bool exec_fd_keep;
    /* Start in the directory open at cwd_fd (fchdir) instead of the
     * caller's working directory. */
    bool chdir_to_fd;
    int cwd_fd;
} lz_spawn_async;

/* A started child. pid > 0 while it is ours; then pidfd is an O_CLOEXEC
 * pidfd for it, owned by this struct. A zero-initialised lz_child is "no
 * child" (its pidfd field is not a descriptor then). */
typedef struct lz_child {
    pid_t pid;
    int pidfd;
} lz_child;

/* Start the program at the absolute path `path` with argument vector argv
 * (NULL-terminated, argv[0] is the child's name) and return without waiting.
 *
 * The child, before exec: has every signal disposition default, the
 * PR_SET_PDEATHSIG of opt (and ends at once if its parent is already gone:
 * the getppid() check closes the race with the prctl), the descriptors of
 * opt->fds and nothing else (close_range), a new session / controlling
 * terminal if asked, RLIMIT_CORE lowered to LZ_CORE_LIMIT (execve resets
 * dumpability, the limit is what keeps the child's memory out of core
 * dumps; common/nodump.h), and an empty signal mask at exec. Signals are
 * blocked in the caller around the fork so no handler of the caller ever
 * runs in the child.
 *
 * The pidfd comes from clone3(CLONE_PIDFD), so it names this child even if
 * it is reaped elsewhere; where clone3 is filtered (ENOSYS, e.g. container
 * seccomp profiles) fork() and pidfd_open() are used instead.
 *
 * Returns 0 and fills *ret. The caller owns ret->pidfd and reaps the child
 * (lz_child_wait, or its own waitpid loop and lz_child_release). Returns -1
 * with *err set, *ret untouched and no child left behind when: path is not
 * absolute or opt is invalid (EINVAL); a descriptor of opt->fds is not open
 * (EBADF); a set-up step in the child failed (its errno; the message names
 * the step); or the exec failed (its errno: ENOENT, EACCES, ENOEXEC...). */
LZ_MUST_CHECK
int lz_spawn_start(const char *path, char *const argv[], const lz_spawn_async *opt, lz_child *ret,
                   lz_error **err);

/* Send signal sig to the child through its pidfd: never to a recycled pid,
 * even when the child was reaped by someone else's waitpid(-1). Returns 0,
 * or -1 with *err set (ESRCH: it has been reaped; a zombie still takes the
 * signal and returns 0). */
LZ_MUST_CHECK
int lz_child_kill(const lz_child *c, int sig, lz_error **err);

/* Wait up to timeout_ms (negative: no limit) for the child to end and reap
 * it. Returns its status: the exit code (0..255), or 128+N when signal N
 * killed it; *c is then released (pidfd closed, all zero). Returns -1 with
 * *err set: ETIMEDOUT (the child runs on, *c unchanged), or ECHILD when it
 * was reaped elsewhere (*c released too). */
LZ_MUST_CHECK
int lz_child_wait(lz_child *c, int timeout_ms, lz_error **err);

/* Close the pidfd and zero *c without waiting, for a caller that reaps by
 * pid (the supervisor reaps every process of its pid namespace with
 * waitpid(-1)). Returns the pid, which the caller now tracks by itself;
 * 0 for "no child". */
pid_t lz_child_release(lz_child *c);

/* Close every descriptor of the calling process except those in keep[0..n)
 * (any order, duplicates and negative values allowed). For a forked child
 * that runs on without exec: O_CLOEXEC protects only exec, so a fork that
 * keeps running holds every socket, pipe and inotify fd of its parent until
 * it drops them here. Returns 0, or -1 with errno set (nothing was kept
 * open that should not be: on error the caller must exit). */
int lz_close_fds_except(const int *keep, size_t n);

#endif
