/* SPDX-License-Identifier: Apache-2.0
 *
 * The escalation benchmark's timer (bench/README.md, "escalation/"): runs
 * PROGRAM COUNT times, each a fork + execv + waitpid, and prints the time of
 * each run in nanoseconds (CLOCK_MONOTONIC around fork ... waitpid), one per
 * line, then "ok". A run that does not exit 0 prints "fail RUN STATUS" and
 * stops, so a denied or failed escalation can never count as a sample.
 *
 *   lzbench-timer COUNT /ABSOLUTE/PROGRAM [ARG...]
 *
 * Why a program of its own: the busybox image has no high-resolution clock
 * (its `date` has whole seconds), and timing a whole loop from the host
 * would add the session's relay and a shell's loop to every sample. The
 * same binary, statically linked so it runs in any image, times the
 * baseline on the host, so both sides are measured the same way. The
 * child inherits the environment (the escalation client needs the
 * session's LAZARET_ESCALATE_CAPABILITY) and stdio; no PATH lookup. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long) t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argv[2][0] != '/') {
        fprintf(stderr, "usage: lzbench-timer COUNT /ABSOLUTE/PROGRAM [ARG...]\n");
        return 2;
    }
    char *end;
    long count = strtol(argv[1], &end, 10);
    if (*end || count < 1 || count > 1000000) {
        fprintf(stderr, "lzbench-timer: bad COUNT %s\n", argv[1]);
        return 2;
    }
    /* Results are collected first and printed at the end, so that writing
     * them (through the session's relay, inside the sandbox) is not part
     * of any sample. */
    long long *ns = calloc((size_t) count, sizeof(*ns));
    if (!ns) {
        fprintf(stderr, "lzbench-timer: out of memory\n");
        return 2;
    }
    for (long i = 0; i < count; i++) {
        long long t0 = now_ns();
        pid_t pid = fork();
        if (pid < 0) {
            printf("fail %ld fork: %s\n", i, strerror(errno));
            return 1;
        }
        if (pid == 0) {
            execve(argv[2], argv + 2, environ);
            _exit(127);
        }
        int status;
        while (waitpid(pid, &status, 0) < 0) {
            if (errno != EINTR) {
                printf("fail %ld waitpid: %s\n", i, strerror(errno));
                return 1;
            }
        }
        ns[i] = now_ns() - t0;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            printf("fail %ld status %d\n", i,
                   WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
            return 1;
        }
    }
    for (long i = 0; i < count; i++)
        printf("%lld\n", ns[i]);
    printf("ok\n");
    return fflush(stdout) == 0 ? 0 : 1;
}
