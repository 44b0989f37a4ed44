/* SPDX-License-Identifier: Apache-2.0
 *
 * The keeper of an escalated host command (keeper.h). Every host command
 * runs under a keeper: a fork of the coordinator (no exec) that is a child
 * subreaper, starts the command in a session and
 * process group of its own, and waits. When the command's main process
 * ends, when the coordinator asks (SIGTERM: cancellation, session end,
 * teardown) and when the coordinator dies (PR_SET_PDEATHSIG(SIGTERM): a
 * coordinator killed with SIGKILL cannot clean up itself), the keeper kills
 * the command's process group and then every descendant left (orphans come
 * to it, a descendant that left the group with setsid included), reaps
 * them, and exits with the command's status (0..255, 128+N for signal N).
 * Attack round i11 (A3) and the mailbox tests: before it, grandchildren in
 * a new session, or any grandchild after a SIGKILL of the coordinator,
 * outlived the Domain.
 */

#include "coordinator/keeper.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/fork.h"
#include "common/syscalls.h"
#include "common/util.h"

/* Kill and reap every child of this process, round after round (a killed
 * child's own children come to us next, as we are a subreaper). */
static void keeper_kill_all(void)
{
    for (int round = 0; round < 1000; round++) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int) getpid());
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            break;
        char buf[4096];
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
            break;
        buf[n] = '\0';
        char *p = buf;
        while (*p) {
            char *end;
            long pid = strtol(p, &end, 10);
            if (end == p)
                break;
            if (pid > 0)
                kill((pid_t) pid, SIGKILL);
            p = end;
        }
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        }
        struct timespec t = { 0, 1000 * 1000 }; /* let the kills land */
        nanosleep(&t, NULL);
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        }
    }
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

typedef struct keeper_job {
    const char *label;
    char *const *argv;
    const lz_spawn_async *opt;
    void (*wipe)(void *);
    void *wipe_arg;
} keeper_job;

/* The keeper, from the fork (lz_fork_call) to its exit with the command's
 * status: it returns only when the command could not be started. */
static int keeper_main(void *arg, int channel, lz_error **err)
{
    const keeper_job *j = arg;
    const lz_spawn_async *opt = j->opt;
    /* What of the coordinator's memory this fork must not keep. */
    if (j->wipe)
        j->wipe(j->wipe_arg);
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGCHLD);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        return lz_error_set(err, errno, "cannot start the command's keeper");
    int keep[LZ_SPAWN_FDS_MAX + 4];
    size_t nk = 0;
    for (size_t i = 0; i < opt->n_fds; i++)
        keep[nk++] = opt->fds[i].fd;
    keep[nk++] = opt->exec_fd;
    keep[nk++] = opt->cwd_fd;
    keep[nk++] = channel;
    if (lz_close_fds_except(keep, nk) < 0)
        return lz_error_set(err, errno, "cannot start the command's keeper");
    lz_child cmd;
    if (lz_spawn_start(j->label, j->argv, opt, &cmd, err) < 0)
        return -1;
    for (size_t i = 0; i < opt->n_fds; i++)
        close(opt->fds[i].fd); /* the command's pipes: only the command writes them */
    /* Started. A coordinator gone by now sends SIGTERM (PR_SET_PDEATHSIG),
     * which the loop below answers. */
    lz_best_effort(lz_fork_ready(channel));
    close(channel);
    pid_t pid = lz_child_release(&cmd);
    int status = 255;
    for (;;) {
        siginfo_t si;
        if (sigwaitinfo(&mask, &si) < 0)
            continue;
        if (si.si_signo == SIGTERM) {
            kill(-pid, SIGKILL);
            status = 128 + SIGKILL;
            break;
        }
        int st;
        pid_t w;
        bool main_done = false;
        while ((w = waitpid(-1, &st, WNOHANG)) > 0)
            if (w == pid) {
                status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                main_done = true;
            }
        if (main_done)
            break;
    }
    /* The group id is the command's pid, ours until reaped: reaped above
     * only after it ended, and no other group can take that id while a
     * member is left. */
    kill(-pid, SIGKILL);
    keeper_kill_all();
    _exit(status & 0xff);
}

int keeper_start(const char *label, char *const argv[], const lz_spawn_async *opt,
                 void (*wipe)(void *), void *wipe_arg, lz_child *ret, lz_error **err)
{
    keeper_job j = { label, argv, opt, wipe, wipe_arg };
    lz_fork_options fo = { .what = label, .pdeathsig = SIGTERM, .name = "lz-escalated" };
    return lz_fork_call(keeper_main, &j, &fo, ret, err);
}
