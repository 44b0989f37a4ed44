/* SPDX-License-Identifier: Apache-2.0 */
#include "coordinator/freezer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"

/* Fork safety: the coordinator forks (host commands' keepers, the mapped
 * removal). A child inherits only the forking thread; if the watchdog held
 * `mu` at that instant, the child's copy stays locked. No child touches the
 * freezer, so that is harmless; and the watchdog itself never allocates, so
 * it never holds malloc's locks. */
struct lz_freezer {
    int pidfd[LZ_FREEZER_MAX];
    size_t n;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned holds; /* under mu */
    bool wd_hold;   /* the watchdog's hold is one of them (under mu) */
    bool shutting;  /* under mu */
    bool auditing;  /* the audit is at work (under mu) */
    long long frozen_since_us;
    lz_freeze_stats stats; /* under mu */
    _Atomic unsigned long drained_seq;
    /* the watchdog */
    bool thread_running;
    pthread_t thread;
    int inotify_fd;
    int stop_efd;
};

static long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void signal_all(lz_freezer *f, int sig)
{
    for (size_t i = 0; i < f->n; i++)
        if (f->pidfd[i] >= 0)
            (void) syscall(SYS_pidfd_send_signal, f->pidfd[i], sig, NULL, 0);
}

/* Under mu. */
static void hold_locked(lz_freezer *f, bool watchdog)
{
    if (f->holds++ == 0 && f->n > 0) {
        signal_all(f, SIGSTOP);
        f->frozen_since_us = now_us();
        f->stats.freezes++;
        if (watchdog)
            f->stats.watchdog_freezes++;
    }
}

/* Under mu. */
static void release_locked(lz_freezer *f)
{
    if (f->holds == 0)
        return;
    if (--f->holds == 0 && f->n > 0) {
        signal_all(f, SIGCONT);
        long long d = now_us() - f->frozen_since_us;
        f->stats.total_frozen_us += d;
        if (d > f->stats.max_frozen_us)
            f->stats.max_frozen_us = d;
    }
}

lz_freezer *lz_freezer_new(void)
{
    lz_freezer *f = lz_xcalloc(1, sizeof(*f));
    for (size_t i = 0; i < LZ_FREEZER_MAX; i++)
        f->pidfd[i] = -1;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    f->inotify_fd = -1;
    f->stop_efd = -1;
    return f;
}

int lz_freezer_adopt(lz_freezer *f, const int *pidfds, size_t n, lz_error **err)
{
    if (!f || f->n + n > LZ_FREEZER_MAX) {
        for (size_t i = 0; i < n; i++)
            close(pidfds[i]);
        return lz_error_set(err, 0,
                            f ? "too many sandbox processes to freeze"
                              : "no freezer to keep the sandbox's processes");
    }
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; i < n; i++) {
        f->pidfd[f->n++] = pidfds[i];
        /* A process adopted while a hold is in force is frozen too. */
        if (f->holds > 0)
            (void) syscall(SYS_pidfd_send_signal, pidfds[i], SIGSTOP, NULL, 0);
    }
    pthread_mutex_unlock(&f->mu);
    return 0;
}

bool lz_freezer_armed(const lz_freezer *f)
{
    return f && f->n > 0;
}

/* The pid (in our pid namespace) of the process behind a pidfd, from
 * /proc/self/fdinfo; -1 once it has died, 0 when unreadable. */
static pid_t pidfd_pid(int pidfd)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *p = strstr(buf, "\nPid:");
    if (!p)
        return 0;
    return (pid_t) strtol(p + 5, NULL, 10);
}

/* Is every thread of pid stopped (or dead)? The state is the field after
 * the last ')' of /proc/PID/task/TID/stat (a thread's name may hold one). */
static bool all_threads_stopped(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int) pid);
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return true; /* gone */
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return true;
    }
    bool stopped = true;
    struct dirent *e;
    while (stopped && (e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char name[300], buf[512];
        snprintf(name, sizeof(name), "%s/stat", e->d_name);
        int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue; /* the thread exited */
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
            continue;
        buf[n] = '\0';
        const char *close_paren = strrchr(buf, ')');
        if (!close_paren || close_paren[1] != ' ')
            continue;
        char st = close_paren[2];
        stopped = st == 'T' || st == 't' || st == 'Z' || st == 'X' || st == 'x';
    }
    closedir(d);
    return stopped;
}

bool lz_freezer_wait_stopped(lz_freezer *f)
{
    if (!f || f->n == 0)
        return true;
    long long start = now_us();
    long long deadline = start + (long long) LZ_FREEZE_STOP_WAIT_MS * 1000;
    for (;;) {
        bool all = true;
        for (size_t i = 0; all && i < f->n; i++) {
            pid_t pid = pidfd_pid(f->pidfd[i]);
            if (pid <= 0)
                continue; /* dead (-1); 0: unreadable, nothing to wait for */
            all = all_threads_stopped(pid);
        }
        long long t = now_us();
        if (all || t > deadline) {
            pthread_mutex_lock(&f->mu);
            if (t - start > f->stats.max_stop_us)
                f->stats.max_stop_us = t - start;
            pthread_mutex_unlock(&f->mu);
            return all;
        }
        struct timespec ts = { 0, 50 * 1000 };
        nanosleep(&ts, NULL);
    }
}

bool lz_freezer_hold(lz_freezer *f)
{
    if (!f)
        return true;
    pthread_mutex_lock(&f->mu);
    hold_locked(f, false);
    pthread_mutex_unlock(&f->mu);
    return lz_freezer_wait_stopped(f);
}

bool lz_freezer_frozen(lz_freezer *f)
{
    if (!f || f->n == 0)
        return false;
    pthread_mutex_lock(&f->mu);
    bool frozen = f->holds > 0;
    pthread_mutex_unlock(&f->mu);
    return frozen;
}

void lz_freezer_release(lz_freezer *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    release_locked(f);
    pthread_mutex_unlock(&f->mu);
}

void lz_freezer_audit_begin(lz_freezer *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    f->auditing = true;
    pthread_mutex_unlock(&f->mu);
}

bool lz_freezer_audit_drained(lz_freezer *f)
{
    if (!f)
        return false;
    pthread_mutex_lock(&f->mu);
    f->auditing = false;
    atomic_fetch_add(&f->drained_seq, 1);
    bool wd = f->wd_hold;
    pthread_mutex_unlock(&f->mu);
    return wd;
}

void lz_freezer_watchdog_done(lz_freezer *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    if (f->wd_hold) {
        f->wd_hold = false;
        release_locked(f);
        pthread_cond_broadcast(&f->cv);
    }
    pthread_mutex_unlock(&f->mu);
}

/* The watchdog thread. Wakes when the audit's queue has events; if the
 * audit has not drained them LZ_FREEZE_LAG_MS later, freezes the sandbox
 * and waits for the audit to say it caught up. An event therefore waits at
 * most twice the lag before the sandbox stops (it may arrive just after a
 * drain that the watchdog counted for the previous one). */
static void *watchdog_main(void *arg)
{
    lz_freezer *f = arg;
    for (;;) {
        struct pollfd p[2] = { { .fd = f->inotify_fd, .events = POLLIN },
                               { .fd = f->stop_efd, .events = POLLIN } };
        int r = poll(p, 2, -1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 || p[1].revents || (p[0].revents & (POLLNVAL | POLLERR)))
            break;
        if (!(p[0].revents & POLLIN))
            continue;
        unsigned long seq0 = atomic_load(&f->drained_seq);
        struct timespec lag = { 0, (long) LZ_FREEZE_LAG_MS * 1000000L };
        struct pollfd s = { .fd = f->stop_efd, .events = POLLIN };
        r = ppoll(&s, 1, &lag, NULL);
        if (r > 0)
            break;
        if (atomic_load(&f->drained_seq) != seq0)
            continue; /* the audit kept up */
        pthread_mutex_lock(&f->mu);
        /* Re-checked under the lock the audit bumps it under: either the
         * audit drained first (no freeze), or it will see wd_hold — when
         * it is at work, or when events wait, which it will come for. With
         * neither (the audit drained just before this thread looked), a
         * freeze would be noticed by nobody. */
        struct pollfd q = { .fd = f->inotify_fd, .events = POLLIN };
        bool pending = f->auditing || (poll(&q, 1, 0) == 1 && (q.revents & POLLIN));
        if (!f->shutting && pending && atomic_load(&f->drained_seq) == seq0 && !f->wd_hold) {
            f->wd_hold = true;
            hold_locked(f, true);
        }
        while (f->wd_hold && !f->shutting)
            pthread_cond_wait(&f->cv, &f->mu);
        bool stop = f->shutting;
        pthread_mutex_unlock(&f->mu);
        if (stop)
            break;
    }
    return NULL;
}

int lz_freezer_watch(lz_freezer *f, int inotify_fd, lz_error **err)
{
    if (!f || f->thread_running || inotify_fd < 0)
        return 0;
    f->inotify_fd = inotify_fd;
    f->stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (f->stop_efd < 0)
        return lz_error_set(err, errno, "cannot start the Git Sentry's watchdog (eventfd)");
    /* The thread takes no signal: the coordinator's signals go to its
     * signalfd, read by the main thread. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int r = pthread_create(&f->thread, NULL, watchdog_main, f);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r != 0) {
        close(f->stop_efd);
        f->stop_efd = -1;
        return lz_error_set(err, r, "cannot start the Git Sentry's watchdog thread");
    }
    f->thread_running = true;
    return 0;
}

void lz_freezer_kill(lz_freezer *f)
{
    if (f)
        signal_all(f, SIGKILL);
}

void lz_freezer_stats(lz_freezer *f, lz_freeze_stats *ret)
{
    *ret = (lz_freeze_stats){ 0 };
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    *ret = f->stats;
    pthread_mutex_unlock(&f->mu);
}

void lz_freezer_free(lz_freezer *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    f->shutting = true;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    if (f->thread_running) {
        uint64_t one = 1;
        lz_best_effort(write(f->stop_efd, &one, sizeof(one)) == sizeof(one) ? 0 : -1);
        pthread_join(f->thread, NULL);
    }
    if (f->stop_efd >= 0)
        close(f->stop_efd);
    if (f->holds > 0)
        signal_all(f, SIGCONT);
    for (size_t i = 0; i < f->n; i++)
        if (f->pidfd[i] >= 0)
            close(f->pidfd[i]);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    free(f);
}
