/* SPDX-License-Identifier: Apache-2.0 */
#include "common/procid.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/syscalls.h"
#include "common/util.h"

static int read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    int saved = errno;
    close(fd);
    if (n < 0) {
        errno = saved;
        return -1;
    }
    buf[n] = '\0';
    return (int) n;
}

int lz_boot_id(char out[37], lz_error **err)
{
    char buf[64];
    if (read_small("/proc/sys/kernel/random/boot_id", buf, sizeof(buf)) < 36)
        return lz_error_set(err, errno, "cannot read /proc/sys/kernel/random/boot_id");
    memcpy(out, buf, 36);
    out[36] = '\0';
    return 0;
}

/* Field 22 (starttime) of /proc/<pid>/stat. The comm field (2) may contain
 * spaces and parentheses: parse from the last ')'. */
static int start_time_of(pid_t pid, uint64_t *ret)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
    if (read_small(path, buf, sizeof(buf)) < 0)
        return -1;
    char *p = strrchr(buf, ')');
    if (!p) {
        errno = EINVAL;
        return -1;
    }
    p++;
    /* After ')' come fields 3.. separated by single spaces. */
    int field = 2;
    while (*p && field < 22) {
        if (*p == ' ')
            field++;
        p++;
    }
    if (field != 22) {
        errno = EINVAL;
        return -1;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno || end == p) {
        errno = EINVAL;
        return -1;
    }
    *ret = v;
    return 0;
}

/* pidfs identity of a pidfd. On kernels with pidfs (6.9+) the inode number
 * of a pidfd is unique per process for the life of the boot; before that
 * every pidfd shares one anonymous inode, which identifies nothing. */
#define LZ_PIDFS_MAGIC 0x50494446
static void pidfs_identity(int pidfd, uint64_t *dev, uint64_t *ino)
{
    struct statfs sfs;
    struct stat st;
    *dev = *ino = 0;
    if (fstatfs(pidfd, &sfs) == 0 && (unsigned long) sfs.f_type == LZ_PIDFS_MAGIC &&
        fstat(pidfd, &st) == 0) {
        *dev = (uint64_t) st.st_dev;
        *ino = (uint64_t) st.st_ino;
    }
}

int lz_process_identity_of(pid_t pid, lz_process_identity *ret, lz_error **err)
{
    lz_process_identity id = { .pid = pid };
    if (lz_boot_id(id.boot_id, err) < 0)
        return -1;
    int pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0)
        return lz_error_set(err, errno, "cannot open a pidfd for process %d", (int) pid);
    if (start_time_of(pid, &id.start_time_ticks) < 0) {
        int e = errno;
        close(pidfd);
        return lz_error_set(err, e, "cannot read the start time of process %d", (int) pid);
    }
    pidfs_identity(pidfd, &id.pidfs_dev, &id.pidfs_ino);
    close(pidfd);
    *ret = id;
    return 0;
}

int lz_process_verify(const lz_process_identity *id, lz_process_match *ret_match, int *ret_pidfd,
                      lz_error **err)
{
    char boot[37];
    if (lz_boot_id(boot, err) < 0)
        return -1;
    if (strcmp(boot, id->boot_id) != 0 || id->pid <= 0) {
        *ret_match = LZ_PROCESS_GONE;
        return 0;
    }
    int pidfd = (int) syscall(SYS_pidfd_open, id->pid, 0);
    if (pidfd < 0) {
        if (errno == ESRCH) {
            *ret_match = LZ_PROCESS_GONE;
            return 0;
        }
        return lz_error_set(err, errno, "cannot open a pidfd for process %d", (int) id->pid);
    }
    /* pidfd_open(2) sets O_CLOEXEC on the new fd. The pidfd now pins this
     * process: verify that it is the recorded one. */
    uint64_t st;
    if (start_time_of(id->pid, &st) < 0) {
        close(pidfd);
        *ret_match = LZ_PROCESS_GONE;
        return 0;
    }
    uint64_t dev, ino;
    pidfs_identity(pidfd, &dev, &ino);
    if (st != id->start_time_ticks ||
        (id->pidfs_ino != 0 && (dev != id->pidfs_dev || ino != id->pidfs_ino))) {
        close(pidfd);
        *ret_match = LZ_PROCESS_DIFFERENT;
        return 0;
    }
    *ret_match = LZ_PROCESS_SAME;
    if (ret_pidfd)
        *ret_pidfd = pidfd;
    else
        close(pidfd);
    return 0;
}

int lz_process_kill_verified(const lz_process_identity *id, int timeout_ms, lz_error **err)
{
    lz_process_match m;
    int pidfd = -1;
    if (lz_process_verify(id, &m, &pidfd, err) < 0)
        return -1;
    if (m == LZ_PROCESS_GONE)
        return 0;
    if (m == LZ_PROCESS_DIFFERENT)
        return 1;
    if (syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0) < 0 && errno != ESRCH) {
        int e = errno;
        close(pidfd);
        return lz_error_set(err, e, "cannot kill process %d", (int) id->pid);
    }
    /* A pidfd becomes readable when the process exits. */
    struct pollfd pfd = { .fd = pidfd, .events = POLLIN };
    int r = poll(&pfd, 1, timeout_ms);
    close(pidfd);
    if (r <= 0)
        return lz_error_set(err, r < 0 ? errno : ETIMEDOUT, "process %d did not end after SIGKILL",
                            (int) id->pid);
    return 0;
}
