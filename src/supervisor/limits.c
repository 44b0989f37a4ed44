/* SPDX-License-Identifier: Apache-2.0 */
#include "supervisor/limits.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

uint64_t lz_limit_memory_default(void)
{
    long pages = sysconf(_SC_PHYS_PAGES);
    long size = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || size <= 0)
        return 4ULL << 30; /* unknown: a bound that fits any machine Lazaret supports */
    return (uint64_t) pages * (uint64_t) size / 2;
}

uint64_t lz_limit_memory_effective(void)
{
    uint64_t bound = lz_limit_memory_default();
    struct rlimit cur;
    if (getrlimit(RLIMIT_FSIZE, &cur) == 0 && cur.rlim_cur != RLIM_INFINITY &&
        (uint64_t) cur.rlim_cur < bound)
        bound = (uint64_t) cur.rlim_cur;
    return bound;
}

/* A positive integer sysctl from /proc/sys, or 0 when it cannot be read. */
static uint64_t read_sysctl(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char buf[32];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *end = NULL;
    unsigned long long v = strtoull(buf, &end, 10);
    return end != buf ? (uint64_t) v : 0;
}

uint64_t lz_limit_tasks_default(void)
{
    uint64_t pid_max = read_sysctl("/proc/sys/kernel/pid_max");
    uint64_t threads_max = read_sysctl("/proc/sys/kernel/threads-max");
    uint64_t space = pid_max;
    if (threads_max && (!space || threads_max < space))
        space = threads_max;
    if (!space)
        return LZ_LIMIT_TASKS_FALLBACK;
    uint64_t bound = space / LZ_LIMIT_TASKS_FRACTION;
    return bound < LZ_LIMIT_TASKS_MIN ? LZ_LIMIT_TASKS_MIN : bound;
}

uint64_t lz_limit_tasks_effective(void)
{
    uint64_t bound = lz_limit_tasks_default();
    struct rlimit cur;
    if (getrlimit(RLIMIT_NPROC, &cur) == 0 && cur.rlim_cur != RLIM_INFINITY &&
        (uint64_t) cur.rlim_cur < bound)
        bound = (uint64_t) cur.rlim_cur;
    return bound;
}

int lz_limits_apply(uint64_t memory, uint64_t tasks, lz_error **err)
{
    struct rlimit r = { .rlim_cur = (rlim_t) memory, .rlim_max = (rlim_t) memory };
    if (setrlimit(RLIMIT_FSIZE, &r) < 0) {
        lz_error_set(err, errno, "cannot set the Domain memory bound (RLIMIT_FSIZE %llu bytes)",
                     (unsigned long long) memory);
        return lz_error_hint(err, "see docs/limits.md");
    }
    /* Soft and hard, so that nothing started from here (runsc, its sandbox,
     * the ptrace stubs) can raise it again: in a user namespace raising a
     * hard limit needs CAP_SYS_RESOURCE in the initial one. */
    r = (struct rlimit){ .rlim_cur = (rlim_t) tasks, .rlim_max = (rlim_t) tasks };
    if (setrlimit(RLIMIT_NPROC, &r) < 0) {
        lz_error_set(err, errno, "cannot set the Domain host task bound (RLIMIT_NPROC %llu)",
                     (unsigned long long) tasks);
        return lz_error_hint(err, "see docs/limits.md");
    }
    return 0;
}
