/* SPDX-License-Identifier: Apache-2.0
 *
 * Descriptor hygiene and the asynchronous launcher of src/common/spawn.h.
 * lz_close_fds_except runs in a forked child here: it closes the test
 * runner's own descriptors too. The launcher's cases run real programs
 * (/bin/sh, /usr/bin/env, /bin/grep, /bin/cat, /bin/sleep) and check what
 * they saw of their own process: descriptors, environment, signals,
 * session, terminal.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/spawn.h"

static bool is_open(int fd)
{
    return fcntl(fd, F_GETFD) >= 0;
}

/* Exit status: 0 pass, otherwise the number of the failed check. */
static int close_except_child(void)
{
    int fds[8];
    for (int i = 0; i < 8; i++) {
        fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fds[i] < 0)
            return 1;
    }
    /* Unsorted, with a duplicate and a negative entry. */
    int keep[] = { fds[5], 2, -EBADF, fds[1], fds[5], 0, 1 };
    if (lz_close_fds_except(keep, sizeof(keep) / sizeof(keep[0])) < 0)
        return 2;
    for (int i = 0; i < 8; i++) {
        bool kept = i == 1 || i == 5;
        if (is_open(fds[i]) != kept)
            return 10 + i;
    }
    if (!is_open(0) || !is_open(1) || !is_open(2))
        return 3;
    /* Nothing kept: even stdio goes. */
    if (lz_close_fds_except(NULL, 0) < 0 || is_open(0) || is_open(fds[1]))
        return 4;
    return 0;
}

static void test_close_fds_except(void **state)
{
    (void) state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(close_except_child());
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- lz_spawn_start ------------------------------------------------------ */

/* Everything the child writes to fd until EOF, NUL-terminated. */
static char *read_all(int fd)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    for (;;) {
        if (len + 1 == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        assert_true(n >= 0);
        if (n == 0)
            break;
        len += (size_t) n;
    }
    buf[len] = '\0';
    return buf;
}

static void make_pipe(int p[2])
{
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
}

/* Start path/argv with stdout on a pipe (plus `more` descriptors), wait
 * for it, and return what it wrote; *status gets its status. */
static char *run_collect(const char *path, char *const argv[], lz_spawn_async *opt, int *status)
{
    int out[2];
    make_pipe(out);
    lz_spawn_fd fds[LZ_SPAWN_FDS_MAX];
    size_t n = 0;
    for (size_t i = 0; i < opt->n_fds; i++)
        fds[n++] = opt->fds[i];
    fds[n++] = (lz_spawn_fd){ out[1], 1 };
    lz_spawn_async o = *opt;
    o.fds = fds;
    o.n_fds = n;
    lz_child c;
    lz_error *err = NULL;
    int r = lz_spawn_start(path, argv, &o, &c, &err);
    if (r < 0)
        fail_msg("lz_spawn_start %s: %s (%s)", path, err->message, strerror(err->errnum));
    close(out[1]);
    char *text = read_all(out[0]);
    close(out[0]);
    /* Generous: make check runs this beside whole sandboxes on 2 cores. */
    *status = lz_child_wait(&c, 60000, &err);
    if (err) {
        free(text);
        fail_msg("lz_child_wait %s: %s (%s)", path, err->message, strerror(err->errnum));
    }
    assert_int_equal(c.pid, 0);
    return text;
}

/* stdin, stdout and stderr each wired to the descriptor given; stdio not
 * given is /dev/null. */
static void test_start_stdio(void **state)
{
    (void) state;
    int in[2], out[2], errp[2];
    make_pipe(in);
    make_pipe(out);
    make_pipe(errp);
    assert_int_equal(write(in[1], "ping\n", 5), 5);
    close(in[1]);
    char *const argv[] = { (char *) "sh", (char *) "-c",
                           (char *) "read x; echo \"out:$x\"; echo \"err:$x\" >&2", NULL };
    const lz_spawn_fd fds[] = { { in[0], 0 }, { out[1], 1 }, { errp[1], 2 } };
    lz_spawn_async opt = { .fds = fds, .n_fds = 3 };
    lz_child c;
    lz_error *err = NULL;
    assert_int_equal(lz_spawn_start("/bin/sh", argv, &opt, &c, &err), 0);
    assert_null(err);
    assert_true(c.pid > 0);
    close(in[0]);
    close(out[1]);
    close(errp[1]);
    char *o = read_all(out[0]);
    char *e = read_all(errp[0]);
    assert_string_equal(o, "out:ping\n");
    assert_string_equal(e, "err:ping\n");
    free(o);
    free(e);
    close(out[0]);
    close(errp[0]);
    assert_int_equal(lz_child_wait(&c, 10000, &err), 0);

    /* Only stdout given: 0 and 2 are /dev/null; one descriptor may also be
     * given twice (stdout and fd 7). */
    int twice[2];
    make_pipe(twice);
    char *const argv2[] = { (char *) "sh", (char *) "-c",
                            (char *) "readlink /proc/self/fd/0 /proc/self/fd/2; echo seven >&7",
                            NULL };
    const lz_spawn_fd more[] = { { twice[1], 7 } };
    opt = (lz_spawn_async){ .fds = more, .n_fds = 1 };
    int status;
    /* run_collect puts stdout on its own pipe; fd 7 goes to `twice`. */
    char *text = run_collect("/bin/sh", argv2, &opt, &status);
    close(twice[1]);
    char *seven = read_all(twice[0]);
    close(twice[0]);
    assert_int_equal(status, 0);
    assert_string_equal(text, "/dev/null\n/dev/null\n");
    assert_string_equal(seven, "seven\n");
    free(text);
    free(seven);
}

/* A descriptor that is not handed over is closed in the child, even one
 * without O_CLOEXEC; a handed-over one arrives at its number. */
static void test_start_closes_other_fds(void **state)
{
    (void) state;
    int leaky = open("/dev/null", O_RDONLY); /* no O_CLOEXEC on purpose */
    assert_true(leaky >= 0);
    int high = fcntl(leaky, F_DUPFD, 40); /* still no O_CLOEXEC */
    assert_true(high >= 40);
    int data[2];
    make_pipe(data);
    assert_int_equal(write(data[1], "handed\n", 7), 7);
    close(data[1]);
    char script[256];
    snprintf(script, sizeof(script),
             "test -e /proc/self/fd/%d && echo leaked-%d; "
             "test -e /proc/self/fd/%d && echo leaked-%d; "
             "read line <&5; echo \"fd5:$line\"",
             leaky, leaky, high, high);
    char *const argv[] = { (char *) "sh", (char *) "-c", script, NULL };
    const lz_spawn_fd fds[] = { { data[0], 5 } };
    lz_spawn_async opt = { .fds = fds, .n_fds = 1 };
    int status;
    char *text = run_collect("/bin/sh", argv, &opt, &status);
    assert_int_equal(status, 0);
    assert_string_equal(text, "fd5:handed\n");
    free(text);
    close(data[0]);
    close(high);
    close(leaky);
}

/* PR_SET_PDEATHSIG: a middle process starts `sleep`, then dies. This test
 * process is a child subreaper, so the orphaned sleep becomes its child and
 * its fate can be read with waitpid. Control: with pdeathsig -1 the same
 * sleep survives its parent. */
static pid_t orphan_sleep(int pdeathsig)
{
    int p[2];
    make_pipe(p);
    pid_t mid = fork();
    assert_true(mid >= 0);
    if (mid == 0) {
        char *const argv[] = { (char *) "sleep", (char *) "30", NULL };
        lz_spawn_async opt = { .pdeathsig = pdeathsig };
        lz_child c;
        if (lz_spawn_start("/bin/sleep", argv, &opt, &c, NULL) < 0)
            _exit(1);
        int32_t pid = c.pid;
        _exit(write(p[1], &pid, sizeof(pid)) == sizeof(pid) ? 0 : 2);
    }
    close(p[1]);
    int32_t pid = 0;
    assert_int_equal(read(p[0], &pid, sizeof(pid)), sizeof(pid));
    close(p[0]);
    int status;
    assert_int_equal(waitpid(mid, &status, 0), mid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return pid;
}

static void test_start_pdeathsig(void **state)
{
    (void) state;
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    /* Default: SIGKILL when the parent dies. */
    pid_t pid = orphan_sleep(0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGKILL);
    /* Another signal. */
    pid = orphan_sleep(SIGTERM);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGTERM);
    /* Control: none asked, the orphan lives on. */
    pid = orphan_sleep(-1);
    usleep(300 * 1000);
    assert_int_equal(waitpid(pid, &status, WNOHANG), 0);
    kill(pid, SIGKILL);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
}

/* The pidfd is O_CLOEXEC, polls readable when the child exits, and gives
 * its status; signals go through it; a wait can time out. */
static void test_start_pidfd(void **state)
{
    (void) state;
    char *const argv[] = { (char *) "sh", (char *) "-c", (char *) "read x; exit 7", NULL };
    int in[2];
    make_pipe(in);
    const lz_spawn_fd fds[] = { { in[0], 0 } };
    lz_spawn_async opt = { .fds = fds, .n_fds = 1 };
    lz_child c;
    lz_error *err = NULL;
    assert_int_equal(lz_spawn_start("/bin/sh", argv, &opt, &c, &err), 0);
    close(in[0]);
    assert_true(c.pidfd >= 0);
    assert_true(fcntl(c.pidfd, F_GETFD) & FD_CLOEXEC);
    /* Running: not readable. */
    struct pollfd p = { .fd = c.pidfd, .events = POLLIN };
    assert_int_equal(poll(&p, 1, 100), 0);
    assert_int_equal(lz_child_wait(&c, 50, &err), -1);
    assert_int_equal(err->errnum, ETIMEDOUT);
    lz_error_free(err);
    err = NULL;
    assert_true(c.pid > 0);
    /* Let it exit: readable, without any wait having reaped it. */
    close(in[1]);
    assert_int_equal(poll(&p, 1, 10000), 1);
    assert_true(p.revents & POLLIN);
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    assert_int_equal(waitid(P_PIDFD, (id_t) c.pidfd, &si, WEXITED | WNOWAIT), 0);
    assert_int_equal(si.si_pid, c.pid);
    assert_int_equal(lz_child_wait(&c, 10000, &err), 7);
    assert_int_equal(c.pid, 0);

    /* Killed through the pidfd: 128 + N. */
    char *const sl[] = { (char *) "sleep", (char *) "30", NULL };
    assert_int_equal(lz_spawn_start("/bin/sleep", sl, NULL, &c, &err), 0);
    assert_int_equal(lz_child_kill(&c, SIGTERM, &err), 0);
    assert_int_equal(lz_child_wait(&c, 10000, &err), 128 + SIGTERM);
    assert_null(err);

    /* Reaped elsewhere: the pidfd refuses the signal (never a recycled
     * pid) and the wait says ECHILD. */
    assert_int_equal(lz_spawn_start("/bin/sleep", sl, NULL, &c, &err), 0);
    kill(c.pid, SIGKILL);
    assert_int_equal(waitpid(c.pid, NULL, 0), c.pid);
    assert_int_equal(lz_child_kill(&c, SIGKILL, &err), -1);
    assert_int_equal(err->errnum, ESRCH);
    lz_error_free(err);
    err = NULL;
    assert_int_equal(lz_child_wait(&c, 10000, &err), -1);
    assert_int_equal(err->errnum, ECHILD);
    lz_error_free(err);
    assert_int_equal(c.pid, 0);
}

static bool no_children_left(void)
{
    return waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD;
}

/* A failed start is the caller's error with the child's errno, *ret is
 * untouched, and no child (or zombie) remains. */
static void test_start_failures(void **state)
{
    (void) state;
    const lz_child sentinel = { -42, -43 };
    lz_child c = sentinel;
    lz_error *err = NULL;
    char *const argv[] = { (char *) "x", NULL };

    assert_int_equal(lz_spawn_start("/nonexistent/lazaret-test", argv, NULL, &c, &err), -1);
    assert_non_null(err);
    assert_int_equal(err->errnum, ENOENT);
    assert_non_null(strstr(err->message, "/nonexistent/lazaret-test"));
    lz_error_free(err);
    err = NULL;
    assert_memory_equal(&c, &sentinel, sizeof(c));
    assert_true(no_children_left());

    /* Not executable (no x bit: refused even to root). */
    char path[] = "/tmp/lz-test-spawn-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "#!/bin/sh\n", 10), 10);
    close(fd);
    assert_int_equal(chmod(path, 0644), 0);
    assert_int_equal(lz_spawn_start(path, argv, NULL, &c, &err), -1);
    assert_int_equal(err->errnum, EACCES);
    lz_error_free(err);
    err = NULL;
    unlink(path);
    assert_memory_equal(&c, &sentinel, sizeof(c));
    assert_true(no_children_left());

    /* A descriptor to hand over that is not open: EBADF, named. */
    int p[2];
    make_pipe(p);
    int closed = p[0];
    close(p[0]);
    close(p[1]);
    const lz_spawn_fd fds[] = { { closed, 3 } };
    lz_spawn_async opt = { .fds = fds, .n_fds = 1 };
    assert_int_equal(lz_spawn_start("/bin/true", argv, &opt, &c, &err), -1);
    assert_int_equal(err->errnum, EBADF);
    lz_error_free(err);
    err = NULL;
    assert_true(no_children_left());

    /* Refused before any fork: relative path, one number given twice. */
    assert_int_equal(lz_spawn_start("sh", argv, NULL, &c, &err), -1);
    assert_int_equal(err->errnum, EINVAL);
    lz_error_free(err);
    err = NULL;
    const lz_spawn_fd dup_fds[] = { { 0, 1 }, { 2, 1 } };
    opt = (lz_spawn_async){ .fds = dup_fds, .n_fds = 2 };
    assert_int_equal(lz_spawn_start("/bin/true", argv, &opt, &c, &err), -1);
    assert_int_equal(err->errnum, EINVAL);
    lz_error_free(err);
    assert_memory_equal(&c, &sentinel, sizeof(c));
}

/* The environment is exactly the one given: nothing of the caller's. */
static void test_start_environment(void **state)
{
    (void) state;
    assert_int_equal(setenv("LZ_TEST_CALLER_ONLY", "leak", 1), 0);
    char *const envp[] = { (char *) "A=1", (char *) "B=two words", NULL };
    char *const argv[] = { (char *) "env", NULL };
    lz_spawn_async opt = { .envp = envp };
    int status;
    char *text = run_collect("/usr/bin/env", argv, &opt, &status);
    assert_int_equal(status, 0);
    assert_string_equal(text, "A=1\nB=two words\n");
    free(text);
    /* NULL: the fixed default, still nothing inherited. */
    opt = (lz_spawn_async){ 0 };
    text = run_collect("/usr/bin/env", argv, &opt, &status);
    assert_string_equal(text, "PATH=" LZ_SPAWN_SYSTEM_PATH "\nLC_ALL=C\n");
    free(text);
    unsetenv("LZ_TEST_CALLER_ONLY");
}

/* Whatever the caller blocks or ignores, the program starts with an empty
 * mask and no ignored signal (grep reads its own /proc/self/status). */
static void test_start_signals(void **state)
{
    (void) state;
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    sigaddset(&block, SIGCHLD);
    assert_int_equal(sigprocmask(SIG_BLOCK, &block, &old), 0);
    struct sigaction ign = { .sa_handler = SIG_IGN }, old_term, old_pipe;
    assert_int_equal(sigaction(SIGTERM, &ign, &old_term), 0);
    assert_int_equal(sigaction(SIGPIPE, &ign, &old_pipe), 0);
    /* And signal 32, which glibc's sigaction() refuses to touch: only the
     * kernel call sets (and resets) it. */
    struct {
        void *handler;
        unsigned long flags;
        void *restorer;
        uint64_t mask;
    } k_ign = { (void *) SIG_IGN, 0, NULL, 0 }, k_dfl = { 0 };
    assert_int_equal(syscall(SYS_rt_sigaction, 32, &k_ign, NULL, sizeof(k_ign.mask)), 0);
    char *const argv[] = { (char *) "grep", (char *) "-E",
                           (char *) "^Sig(Blk|Ign):", (char *) "/proc/self/status", NULL };
    lz_spawn_async opt = { 0 };
    int status;
    char *text = run_collect("/bin/grep", argv, &opt, &status);
    sigprocmask(SIG_SETMASK, &old, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGPIPE, &old_pipe, NULL);
    assert_int_equal(syscall(SYS_rt_sigaction, 32, &k_dfl, NULL, sizeof(k_dfl.mask)), 0);
    /* Compare a copy, so a failure reports what the child saw instead of
     * a leak of the buffer. */
    char seen[256];
    snprintf(seen, sizeof(seen), "%s", text);
    free(text);
    if (status != 0)
        fail_msg("grep exited %d; it printed: %s", status, seen);
    assert_string_equal(seen, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
}

/* Field `n` (1-based) of /proc/PID/stat as printed by the child itself. */
static long stat_field(const char *stat, int n)
{
    if (n == 1)
        return strtol(stat, NULL, 10);
    const char *p = strrchr(stat, ')'); /* comm (2) may hold spaces */
    assert_non_null(p);
    p += 2; /* field 3 */
    for (int i = 3; i < n; i++) {
        p = strchr(p, ' ');
        assert_non_null(p);
        p++;
    }
    return strtol(p, NULL, 10);
}

/* Session and controlling terminal: the child's own /proc/self/stat gives
 * pid (1), session (6) and tty_nr (7). */
static void test_start_session_ctty(void **state)
{
    (void) state;
    int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    assert_true(master >= 0);
    assert_int_equal(grantpt(master), 0);
    assert_int_equal(unlockpt(master), 0);
    int slave = open(ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC);
    assert_true(slave >= 0);
    struct stat st;
    assert_int_equal(fstat(slave, &st), 0);
    char *const argv[] = { (char *) "cat", (char *) "/proc/self/stat", NULL };
    const lz_spawn_fd fds[] = { { slave, 0 } };
    int status;

    lz_spawn_async opt = { .fds = fds, .n_fds = 1, .ctty = true };
    char *text = run_collect("/bin/cat", argv, &opt, &status);
    assert_int_equal(status, 0);
    assert_int_equal(stat_field(text, 6), stat_field(text, 1)); /* session leader */
    assert_int_equal(stat_field(text, 7), (long) st.st_rdev);   /* the PTY is its terminal */
    free(text);

    opt = (lz_spawn_async){ .fds = fds, .n_fds = 1, .new_session = true };
    text = run_collect("/bin/cat", argv, &opt, &status);
    assert_int_equal(stat_field(text, 6), stat_field(text, 1));
    assert_int_equal(stat_field(text, 7), 0); /* a session, no terminal */
    free(text);

    opt = (lz_spawn_async){ .fds = fds, .n_fds = 1 };
    text = run_collect("/bin/cat", argv, &opt, &status);
    assert_int_equal(stat_field(text, 6), (long) getsid(0)); /* the caller's session */
    free(text);
    close(slave);
    close(master);
}

/* Where clone3 is filtered with ENOSYS (container seccomp profiles), the
 * fork()+pidfd_open() fallback gives the same child and pidfd. Runs in a
 * forked child that installs such a filter; exit status 0 means pass. */
static int fallback_child(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { .len = (unsigned short) (sizeof(f) / sizeof(f[0])), .filter = f };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
        return 1;
    /* Control: clone3 really is refused now. */
    if (syscall(SYS_clone3, NULL, 0) != -1 || errno != ENOSYS)
        return 2;
    char *const argv[] = { (char *) "sh", (char *) "-c", (char *) "exit 3", NULL };
    lz_child c;
    if (lz_spawn_start("/bin/sh", argv, NULL, &c, NULL) < 0)
        return 3;
    if (c.pidfd < 0 || !(fcntl(c.pidfd, F_GETFD) & FD_CLOEXEC))
        return 4;
    if (lz_child_wait(&c, 10000, NULL) != 3)
        return 5;
    return 0;
}

static void test_start_clone3_fallback(void **state)
{
    (void) state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(fallback_child());
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double) (t1.tv_sec - t0->tv_sec) + (double) (t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* A child blocked opening a FIFO nothing writes to is stopped within a
 * second with stop_on_fifo_wait, its error saying so; control: without
 * it, the same child is stopped only by the timeout. */
static void test_capture_stops_on_fifo_wait(void **state)
{
    (void) state;
    char dir[] = "/tmp/lz-test-fifo-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char fifo[64];
    snprintf(fifo, sizeof(fifo), "%s/f", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    char *const argv[] = { (char *) "cat", fifo, NULL };
    for (int watch = 1; watch >= 0; watch--) {
        lz_spawn_options opt = { .timeout_ms = 2500, .stop_on_fifo_wait = watch };
        lz_spawn_output out = { 0 };
        lz_error *e = NULL;
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        assert_int_equal(lz_spawn_capture("/bin/cat", argv, &opt, &out, &e), -1);
        double took = seconds_since(&t0);
        print_message("# watch=%d: stopped after %.2f s: %s\n", watch, took, e->message);
        assert_int_equal(e->errnum, ETIMEDOUT);
        if (watch) {
            assert_true(took < 1.5);
            assert_non_null(strstr(e->message, "FIFO"));
        } else {
            assert_true(took >= 2.4);
            assert_null(strstr(e->message, "FIFO"));
        }
        lz_error_free(e);
    }
    /* A child that only runs long is not taken for one. */
    char *const sleeper[] = { (char *) "sleep", (char *) "1", NULL };
    lz_spawn_options opt = { .timeout_ms = 5000, .stop_on_fifo_wait = true };
    lz_spawn_output out = { 0 };
    assert_int_equal(lz_spawn_capture("/bin/sleep", sleeper, &opt, &out, NULL), 0);
    lz_spawn_output_free(&out);
    unlink(fifo);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_close_fds_except),
        cmocka_unit_test(test_start_stdio),
        cmocka_unit_test(test_start_closes_other_fds),
        cmocka_unit_test(test_start_pdeathsig),
        cmocka_unit_test(test_start_pidfd),
        cmocka_unit_test(test_start_failures),
        cmocka_unit_test(test_start_environment),
        cmocka_unit_test(test_start_signals),
        cmocka_unit_test(test_start_session_ctty),
        cmocka_unit_test(test_start_clone3_fallback),
        cmocka_unit_test(test_capture_stops_on_fifo_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
