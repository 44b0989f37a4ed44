/* SPDX-License-Identifier: Apache-2.0 */
#include "common/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/nodump.h"
#include "common/syscalls.h"
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

/* lz_spawn_options.stop_on_fifo_wait: how often the child is looked at. */
#define FIFO_LOOK_MS 250

/* Whether pid (an unreaped child of ours: its pid cannot be reused) is
 * blocked in a FIFO's open: fs/pipe.c's wait_for_partner. */
static bool waits_on_fifo(pid_t pid)
{
    char path[64], what[64];
    snprintf(path, sizeof(path), "/proc/%d/wchan", (int) pid);
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, what, sizeof(what) - 1);
    if (n <= 0)
        return false;
    what[n] = '\0';
    return strcmp(what, "wait_for_partner") == 0;
}

/* A pipe end that is one of 0, 1, 2 (possible when the caller runs with a
 * standard stream closed) would be clobbered by the child's own dup2 set-up;
 * move it to >= 3, keeping O_CLOEXEC. */
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

    int fds[2] = { -EBADF, -EBADF };
    if (pipe2(fds, O_CLOEXEC) < 0)
        return lz_error_set(err, errno, "cannot create a pipe to run %s", path);
    _cleanup_close_ int rfd = fds[0];
    _cleanup_close_ int wfd = fds[1];

    /* The one launcher (lz_spawn_start): stdin /dev/null, stdout (and
     * stderr when merged, else /dev/null) to the pipe, nothing else open,
     * PR_SET_PDEATHSIG: a probe or helper never outlives its caller. */
    lz_spawn_fd hand[2] = { { wfd, STDOUT_FILENO }, { wfd, STDERR_FILENO } };
    lz_spawn_async start = { .envp = opt->envp,
                             .fds = hand,
                             .n_fds = opt->merge_stderr ? 2 : 1,
                             .chdir_to_fd = opt->chdir_to_fd,
                             .cwd_fd = opt->cwd_fd };
    lz_child child = { 0 };
    if (lz_spawn_start(path, argv, &start, &child, err) < 0)
        return -1;
    lz_close(&wfd); /* only the child writes; EOF arrives when it is done */

    int ret = -1;
    int64_t deadline = timeout < 0 ? -1 : now_ms() + timeout;
    _cleanup_free_ char *buf = lz_xmalloc(cap + 1);
    size_t len = 0;
    bool truncated = false;
    bool timed_out = false;
    int fifo_looks = 0;
    while (rfd >= 0) {
        struct pollfd p = { .fd = rfd, .events = POLLIN };
        int wait = remaining_ms(deadline);
        if (opt->stop_on_fifo_wait && (wait < 0 || wait > FIFO_LOOK_MS))
            wait = FIFO_LOOK_MS;
        int n = poll(&p, 1, wait);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            lz_error_set(err, errno, "cannot read the output of %s", path);
            goto out;
        }
        if (n == 0 && opt->stop_on_fifo_wait && remaining_ms(deadline) != 0) {
            fifo_looks = waits_on_fifo(child.pid) ? fifo_looks + 1 : 0;
            if (fifo_looks < 2)
                continue;
            lz_error_set(err, ETIMEDOUT,
                         "%s blocked opening a FIFO (a named pipe nothing writes to) and was "
                         "stopped",
                         path);
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
    if (timed_out) {
        lz_error_set(err, ETIMEDOUT, "%s did not finish within %d ms and was stopped", path,
                     timeout);
        goto out;
    }
    /* The child closed its output and is usually exiting this very moment. */
    lz_error *werr = NULL;
    int status = lz_child_wait(&child, timeout < 0 ? -1 : remaining_ms(deadline), &werr);
    if (status < 0) {
        if (werr->errnum == ETIMEDOUT)
            lz_error_set(err, ETIMEDOUT, "%s did not finish within %d ms and was stopped", path,
                         timeout);
        else
            lz_error_set(err, werr->errnum, "cannot wait for %s", path);
        lz_error_free(werr);
        goto out;
    }
    buf[len] = '\0';
    if (ret_out) {
        ret_out->data = TAKE_PTR(buf);
        ret_out->len = len;
        ret_out->truncated = truncated;
    }
    ret = status;

out:
    if (child.pid > 0) {
        /* Error or deadline after a successful start: leave nothing behind. */
        lz_best_effort(lz_child_kill(&child, SIGKILL, NULL));
        lz_best_effort(lz_child_wait(&child, -1, NULL));
    }
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
    if (!name || !name[0] || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
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

/* ---- the asynchronous launcher ----------------------------------------- */

/* What the child reports through the error pipe when a step before or at
 * exec fails. Written in one write() of less than PIPE_BUF: atomic. */
enum start_step {
    STEP_PDEATHSIG = 1,
    STEP_FD,
    STEP_DEVNULL,
    STEP_DUP,
    STEP_CLOSE,
    STEP_SETSID,
    STEP_CTTY,
    STEP_CORE,
    STEP_SIGMASK,
    STEP_CWD,
    STEP_EXEC,
};

typedef struct start_report {
    int32_t step;
    int32_t errnum;
    int32_t index; /* STEP_FD / STEP_DUP: which entry of opt->fds */
} start_report;

/* Everything the child needs, checked and prepared by the parent: the child
 * only makes async-signal-safe calls on memory that already exists. */
typedef struct start_plan {
    const char *path;
    char *const *argv;
    char *const *envp;
    lz_spawn_fd fds[LZ_SPAWN_FDS_MAX];
    size_t n_fds;
    bool need_null[3]; /* stdio numbers not listed: /dev/null */
    int above;         /* every child_fd is below this */
    int pdeathsig;     /* 0: none */
    bool setsid;
    bool ctty;
    int exec_fd; /* -1: exec path */
    bool exec_fd_keep;
    int cwd_fd; /* -1: the caller's working directory */
    pid_t parent;
} start_plan;

static _Noreturn void child_fail(int ep, int step, int index)
{
    start_report r = { step, errno, index };
    (void) !write(ep, &r, sizeof(r));
    _exit(127);
}

/* glibc refuses sigaction() for the real-time signals it keeps for itself
 * (32 and 33), but a SIG_IGN on them set by whoever started the caller
 * survives execve like any other (seen in CI: signal 32 ignored). The
 * kernel call resets them. */
static void reset_reserved_signal(int sig)
{
#if defined(__x86_64__)
    struct {
        void *handler;
        unsigned long flags;
        void *restorer;
        uint64_t mask;
    } ksa = { 0 }; /* SIG_DFL, no flags, empty mask: the x86-64 kernel layout */
    (void) syscall(SYS_rt_sigaction, sig, &ksa, NULL, sizeof(ksa.mask));
#else
    (void) sig;
#endif
}

/* The child between fork and exec. Every signal is blocked on entry (the
 * parent blocked them before the fork), so none of the caller's handlers can
 * run here; they are reset to SIG_DFL before anything else, and the mask is
 * emptied only at the last moment. */
static _Noreturn void child_start(const start_plan *p, int ep)
{
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP)
            continue;
        /* SIG_IGN survives execve, handlers do not: only the former would
         * otherwise reach the program. EINVAL for the signals glibc keeps
         * for itself is fine. */
        struct sigaction sa = { .sa_handler = SIG_DFL };
        if (sigaction(sig, &sa, NULL) < 0 && errno == EINVAL)
            reset_reserved_signal(sig);
    }

    if (p->pdeathsig > 0) {
        if (prctl(PR_SET_PDEATHSIG, p->pdeathsig) < 0)
            child_fail(ep, STEP_PDEATHSIG, 0);
        /* The parent may have died between fork and prctl: then nobody
         * sends the signal, and nobody wants the child. */
        if (getppid() != p->parent)
            _exit(127);
    }

    /* Descriptors: first copy every source above every target number (and
     * the error pipe too), so that no dup2 below can clobber a source that is
     * still needed; then place the copies; then close the rest. */
    int epc = fcntl(ep, F_DUPFD_CLOEXEC, p->above);
    if (epc < 0)
        child_fail(ep, STEP_CLOSE, 0);
    ep = epc;
    int tmp[LZ_SPAWN_FDS_MAX];
    for (size_t i = 0; i < p->n_fds; i++) {
        tmp[i] = fcntl(p->fds[i].fd, F_DUPFD_CLOEXEC, p->above);
        if (tmp[i] < 0)
            child_fail(ep, STEP_FD, (int) i);
    }
    if (p->cwd_fd >= 0 && fchdir(p->cwd_fd) < 0)
        child_fail(ep, STEP_CWD, 0);
    /* The object to run, copied above the targets like the sources: kept
     * open across the exec only for a script's interpreter. */
    int xfd = -1;
    if (p->exec_fd >= 0) {
        xfd = fcntl(p->exec_fd, p->exec_fd_keep ? F_DUPFD : F_DUPFD_CLOEXEC, p->above);
        if (xfd < 0)
            child_fail(ep, STEP_FD, -1);
    }
    int null = -1;
    if (p->need_null[0] || p->need_null[1] || p->need_null[2]) {
        int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (fd < 0)
            child_fail(ep, STEP_DEVNULL, 0);
        null = fcntl(fd, F_DUPFD_CLOEXEC, p->above);
        if (null < 0)
            child_fail(ep, STEP_DEVNULL, 0);
    }
    int keep[LZ_SPAWN_FDS_MAX + 4];
    size_t nk = 0;
    for (size_t i = 0; i < p->n_fds; i++) {
        /* dup2 onto a different number: the copy has no O_CLOEXEC. */
        if (dup2(tmp[i], p->fds[i].child_fd) < 0)
            child_fail(ep, STEP_DUP, (int) i);
        keep[nk++] = p->fds[i].child_fd;
    }
    for (int i = 0; i < 3; i++) {
        if (!p->need_null[i])
            continue;
        if (dup2(null, i) < 0)
            child_fail(ep, STEP_DEVNULL, 0);
        keep[nk++] = i;
    }
    keep[nk++] = ep; /* O_CLOEXEC: closes itself at a successful exec */
    if (xfd >= 0)
        keep[nk++] = xfd; /* O_CLOEXEC unless exec_fd_keep */
    if (lz_close_fds_except(keep, nk) < 0)
        child_fail(ep, STEP_CLOSE, 0);

    if ((p->setsid || p->ctty) && setsid() < 0)
        child_fail(ep, STEP_SETSID, 0);
    if (p->ctty && ioctl(STDIN_FILENO, TIOCSCTTY, 0) < 0)
        child_fail(ep, STEP_CTTY, 0);
    /* execve makes the program dumpable again (an ordinary binary), and
     * runsc exec holds a session's environment: the core limit, which
     * execve keeps, is what stops its dumps. Usually inherited already; set
     * here so that no start can miss it. */
    if (lz_nodump_limit_core() < 0)
        child_fail(ep, STEP_CORE, 0);

    sigset_t none;
    sigemptyset(&none);
    if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
        child_fail(ep, STEP_SIGMASK, 0);
    if (xfd >= 0)
        syscall(SYS_execveat, xfd, "", p->argv, p->envp, AT_EMPTY_PATH);
    else
        execve(p->path, p->argv, p->envp);
    child_fail(ep, STEP_EXEC, 0);
}

/* clone3's argument block, version 0 (Linux 5.3), spelled out here because
 * <linux/sched.h> clashes with glibc's <sched.h>. */
struct start_clone_args {
    uint64_t flags;
    uint64_t pidfd;
    uint64_t child_tid;
    uint64_t parent_tid;
    uint64_t exit_signal;
    uint64_t stack;
    uint64_t stack_size;
    uint64_t tls;
};

/* fork() that also yields a pidfd. clone3(CLONE_PIDFD) makes the pidfd in
 * the same step as the child, so it can never name another process; the
 * fallback, pidfd_open() right after fork(), is as safe as long as nobody
 * reaps the child first (a SIGCHLD set to SIG_IGN auto-reaps: then the
 * pidfd_open fails with ESRCH and the start fails). Both pidfds are
 * O_CLOEXEC. Returns the pid in the parent (pidfd in *ret_pidfd), 0 in the
 * child, -1 with errno on failure (no child left). */
static pid_t fork_pidfd(int *ret_pidfd)
{
    int pidfd = -1;
    struct start_clone_args a = {
        .flags = CLONE_PIDFD,
        .pidfd = (uint64_t) (uintptr_t) &pidfd,
        .exit_signal = SIGCHLD,
    };
    long r = syscall(SYS_clone3, &a, sizeof(a));
    if (r >= 0) {
        if (r > 0)
            *ret_pidfd = pidfd;
        return (pid_t) r;
    }
    if (errno != ENOSYS)
        return -1;
    pid_t pid = fork();
    if (pid <= 0)
        return pid;
    pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0) {
        int e = errno;
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        errno = e;
        return -1;
    }
    *ret_pidfd = pidfd;
    return pid;
}

static int plan_start(const char *path, char *const argv[], const lz_spawn_async *opt,
                      start_plan *p, lz_error **err)
{
    if (!path || path[0] != '/' || !argv || !argv[0])
        return lz_error_set(err, EINVAL, "cannot run '%s': not an absolute program path",
                            path ? path : "(null)");
    p->path = path;
    p->argv = argv;
    p->envp = opt->envp ? opt->envp : lz_spawn_default_env;
    if (opt->n_fds > LZ_SPAWN_FDS_MAX || (opt->n_fds && !opt->fds))
        return lz_error_set(err, EINVAL, "cannot run %s: more than %d descriptors to hand over",
                            path, LZ_SPAWN_FDS_MAX);
    p->n_fds = opt->n_fds;
    p->need_null[0] = p->need_null[1] = p->need_null[2] = true;
    p->above = STDERR_FILENO + 1;
    for (size_t i = 0; i < opt->n_fds; i++) {
        lz_spawn_fd f = opt->fds[i];
        if (f.fd < 0 || f.child_fd < 0 || f.child_fd > 1 << 20)
            return lz_error_set(err, f.fd < 0 ? EBADF : EINVAL,
                                "cannot run %s: descriptor %d cannot be handed over as %d", path,
                                f.fd, f.child_fd);
        for (size_t j = 0; j < i; j++)
            if (opt->fds[j].child_fd == f.child_fd)
                return lz_error_set(err, EINVAL,
                                    "cannot run %s: two descriptors to hand over as %d", path,
                                    f.child_fd);
        p->fds[i] = f;
        if (f.child_fd <= STDERR_FILENO)
            p->need_null[f.child_fd] = false;
        if (f.child_fd >= p->above)
            p->above = f.child_fd + 1;
    }
    if (opt->pdeathsig < -1 || opt->pdeathsig >= NSIG)
        return lz_error_set(err, EINVAL, "cannot run %s: %d is not a signal", path, opt->pdeathsig);
    p->pdeathsig = opt->pdeathsig == 0 ? SIGKILL : opt->pdeathsig < 0 ? 0 : opt->pdeathsig;
    p->setsid = opt->new_session;
    p->ctty = opt->ctty;
    p->exec_fd = -1;
    p->cwd_fd = -1;
    if (opt->chdir_to_fd) {
        if (opt->cwd_fd < 0)
            return lz_error_set(err, EBADF, "cannot run %s: no directory to start it in", path);
        p->cwd_fd = opt->cwd_fd;
    }
    if (opt->exec_from_fd) {
        if (opt->exec_fd < 0)
            return lz_error_set(err, EBADF, "cannot run %s: no descriptor to run it from", path);
        p->exec_fd = opt->exec_fd;
        p->exec_fd_keep = opt->exec_fd_keep;
    }
    p->parent = getpid();
    return 0;
}

static int report_failure(const start_plan *p, const start_report *r, lz_error **err)
{
    int e = r->errnum;
    const char *path = p->path;
    size_t i = r->index >= 0 && (size_t) r->index < p->n_fds ? (size_t) r->index : 0;
    switch (r->step) {
    case STEP_EXEC:
        return lz_error_set(err, e, "cannot run %s", path);
    case STEP_FD:
    case STEP_DUP:
        return lz_error_set(err, e, "cannot run %s: cannot hand descriptor %d over as %d", path,
                            p->fds[i].fd, p->fds[i].child_fd);
    case STEP_DEVNULL:
        return lz_error_set(err, e, "cannot run %s: cannot open /dev/null for its stdio", path);
    case STEP_CLOSE:
        return lz_error_set(err, e, "cannot run %s: cannot close the descriptors it must not get",
                            path);
    case STEP_SETSID:
        return lz_error_set(err, e, "cannot run %s: cannot give it a session of its own", path);
    case STEP_CTTY:
        return lz_error_set(err, e, "cannot run %s: cannot make its stdin its controlling terminal",
                            path);
    case STEP_PDEATHSIG:
        return lz_error_set(err, e, "cannot run %s: cannot set its parent-death signal", path);
    case STEP_CORE:
        return lz_error_set(err, e, "cannot run %s: cannot limit its core dumps", path);
    case STEP_CWD:
        return lz_error_set(err, e, "cannot run %s: cannot enter its working directory", path);
    case STEP_SIGMASK:
        return lz_error_set(err, e, "cannot run %s: cannot clear its signal mask", path);
    default:
        return lz_error_set(err, EIO, "cannot run %s: its start-up failed", path);
    }
}

int lz_spawn_start(const char *path, char *const argv[], const lz_spawn_async *opt, lz_child *ret,
                   lz_error **err)
{
    static const lz_spawn_async defaults = { 0 };
    start_plan plan = { 0 };
    if (plan_start(path, argv, opt ? opt : &defaults, &plan, err) < 0)
        return -1;

    /* The error pipe: the child writes a start_report when a step fails;
     * its write end closes at a successful exec (O_CLOEXEC), so EOF without
     * data means the program runs. */
    int ep[2];
    if (pipe2(ep, O_CLOEXEC) < 0)
        return lz_error_set(err, errno, "cannot create a pipe to run %s", path);

    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int pidfd = -1;
    pid_t pid = fork_pidfd(&pidfd);
    if (pid == 0) {
        close(ep[0]);
        child_start(&plan, ep[1]);
    }
    int fork_errno = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(ep[1]);
    if (pid < 0) {
        close(ep[0]);
        return lz_error_set(err, fork_errno, "cannot start a process to run %s", path);
    }

    start_report r;
    ssize_t n;
    do
        n = read(ep[0], &r, sizeof(r));
    while (n < 0 && errno == EINTR);
    close(ep[0]);
    if (n == 0) {
        ret->pid = pid;
        ret->pidfd = pidfd;
        return 0;
    }
    /* The child failed before running the program (and has exited, or is
     * about to): reap it so that no zombie remains. */
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    close(pidfd);
    if (n != (ssize_t) sizeof(r))
        r = (start_report){ 0, EIO, 0 };
    return report_failure(&plan, &r, err);
}

int lz_child_kill(const lz_child *c, int sig, lz_error **err)
{
    if (!c || c->pid <= 0)
        return lz_error_set(err, ESRCH, "cannot signal a child that is not running");
    if (syscall(SYS_pidfd_send_signal, c->pidfd, sig, NULL, 0) < 0)
        return lz_error_set(err, errno, "cannot send signal %d to process %d", sig, (int) c->pid);
    return 0;
}

pid_t lz_child_release(lz_child *c)
{
    if (!c || c->pid <= 0)
        return 0;
    pid_t pid = c->pid;
    close(c->pidfd);
    c->pid = 0;
    c->pidfd = 0;
    return pid;
}

int lz_child_wait(lz_child *c, int timeout_ms, lz_error **err)
{
    if (!c || c->pid <= 0)
        return lz_error_set(err, ECHILD, "cannot wait for a child that is not running");
    /* A pidfd polls readable once the process has exited (zombie or gone). */
    int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
    for (;;) {
        struct pollfd p = { .fd = c->pidfd, .events = POLLIN };
        int n = poll(&p, 1, remaining_ms(deadline));
        if (n > 0)
            break;
        if (n == 0)
            return lz_error_set(err, ETIMEDOUT, "process %d did not end within %d ms", (int) c->pid,
                                timeout_ms);
        if (errno != EINTR)
            return lz_error_set(err, errno, "cannot wait for process %d", (int) c->pid);
    }
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    int r;
    do
        r = waitid(P_PIDFD, (id_t) c->pidfd, &si, WEXITED);
    while (r < 0 && errno == EINTR);
    int e = errno;
    pid_t pid = lz_child_release(c);
    if (r < 0)
        return lz_error_set(err, e, "cannot wait for process %d", (int) pid);
    if (si.si_code == CLD_EXITED)
        return si.si_status & 0xff;
    return 128 + si.si_status; /* CLD_KILLED, CLD_DUMPED */
}
