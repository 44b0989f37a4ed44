/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests for src/common/procid.c: the identity of a host process (boot
 * id, pid, start time, pidfs inode), proving that a recorded identity still
 * names the same process, and killing it only then. Every rule has an
 * accepting and a refusing case. Children are forked by the test, wait in
 * pause() and are always reaped by the test.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/procid.h"
#include "common/util.h"
#include "unit_fds.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#define PIDFS_MAGIC 0x50494446

typedef struct {
    int open_fds;
} fixture;

static int setup(void **state)
{
    fixture *f = lz_xcalloc(1, sizeof(*f));
    f->open_fds = count_open_fds();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    int leaked = count_open_fds() - f->open_fds;
    free(f);
    if (leaked != 0) {
        print_error("%d descriptor(s) leaked\n", leaked);
        return -1;
    }
    return 0;
}

static void expect_ok(lz_error **err)
{
    if (*err)
        print_error("unexpected error: %s\n", (*err)->message);
    assert_null(*err);
}

/* Does this kernel give pidfds their own pidfs inodes? */
static bool have_pidfs(void)
{
    int fd = (int) syscall(SYS_pidfd_open, getpid(), 0);
    if (fd < 0)
        return false;
    struct statfs sfs;
    bool yes = fstatfs(fd, &sfs) == 0 && (unsigned long) sfs.f_type == PIDFS_MAGIC;
    close(fd);
    return yes;
}

/* A child that waits to be killed. */
static pid_t spawn_child(void)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* never outlives a test that failed before reaping it */
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        for (;;)
            pause();
    }
    return pid;
}

static void kill_and_reap(pid_t pid)
{
    kill(pid, SIGKILL);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
}

/* A pid that named a process of ours a moment ago and names none now. */
static pid_t gone_pid(void)
{
    pid_t pid = spawn_child();
    kill_and_reap(pid);
    return pid;
}

static bool alive_not_reaped(pid_t pid)
{
    int status = 0;
    return waitpid(pid, &status, WNOHANG) == 0 && kill(pid, 0) == 0;
}

static lz_process_match verify(const lz_process_identity *id, int *ret_pidfd)
{
    lz_error *err = NULL;
    lz_process_match m = (lz_process_match) -1;
    assert_int_equal(lz_process_verify(id, &m, ret_pidfd, &err), 0);
    expect_ok(&err);
    return m;
}

/* ---- identity ----------------------------------------------------------- */

static void test_boot_id(void **state)
{
    (void) state;
    lz_error *err = NULL;
    char id[37];
    assert_int_equal(lz_boot_id(id, &err), 0);
    expect_ok(&err);
    assert_int_equal(strlen(id), 36);
    FILE *fp = fopen("/proc/sys/kernel/random/boot_id", "re");
    assert_non_null(fp);
    char line[64] = "";
    assert_non_null(fgets(line, sizeof(line), fp));
    fclose(fp);
    assert_memory_equal(id, line, 36);
}

static void test_identity_of_self_and_child(void **state)
{
    (void) state;
    lz_error *err = NULL;
    lz_process_identity self, child;
    assert_int_equal(lz_process_identity_of(getpid(), &self, &err), 0);
    expect_ok(&err);
    assert_int_equal(self.pid, getpid());
    assert_int_equal(strlen(self.boot_id), 36);
    assert_true(self.start_time_ticks > 0);

    pid_t pid = spawn_child();
    assert_int_equal(lz_process_identity_of(pid, &child, &err), 0);
    expect_ok(&err);
    assert_int_equal(child.pid, pid);
    assert_string_equal(child.boot_id, self.boot_id);
    assert_true(child.start_time_ticks >= self.start_time_ticks);

    if (have_pidfs()) {
        assert_true(self.pidfs_ino != 0);
        assert_true(child.pidfs_ino != 0);
        assert_true(self.pidfs_ino != child.pidfs_ino);
        assert_int_equal(self.pidfs_dev, child.pidfs_dev);
    } else {
        print_message("# no pidfs on this kernel: pidfs_ino not checked\n");
        assert_int_equal(self.pidfs_ino, 0);
    }
    /* the same process read twice has the same identity */
    lz_process_identity again;
    assert_int_equal(lz_process_identity_of(pid, &again, &err), 0);
    assert_memory_equal(&again, &child, sizeof(again));
    kill_and_reap(pid);
}

static void test_identity_of_gone_pid(void **state)
{
    (void) state;
    lz_error *err = NULL;
    lz_process_identity id;
    memset(&id, 0xA5, sizeof(id));
    lz_process_identity before = id;
    assert_int_equal(lz_process_identity_of(gone_pid(), &id, &err), -1);
    assert_non_null(err);
    assert_int_equal(err->errnum, ESRCH);
    lz_error_free(lz_error_take(&err));
    assert_memory_equal(&id, &before, sizeof(id)); /* untouched on failure */
}

/* ---- verify ------------------------------------------------------------- */

static void test_verify_same_then_gone(void **state)
{
    (void) state;
    lz_error *err = NULL;
    pid_t pid = spawn_child();
    lz_process_identity id;
    assert_int_equal(lz_process_identity_of(pid, &id, &err), 0);
    expect_ok(&err);

    int pidfd = -1;
    assert_int_equal(verify(&id, &pidfd), LZ_PROCESS_SAME);
    assert_true(pidfd >= 0);
    int fl = fcntl(pidfd, F_GETFD);
    assert_true(fl >= 0 && (fl & FD_CLOEXEC));
    /* the pidfd holds this child: not readable while it lives */
    struct pollfd pfd = { .fd = pidfd, .events = POLLIN };
    assert_int_equal(poll(&pfd, 1, 0), 0);
    assert_int_equal(verify(&id, NULL), LZ_PROCESS_SAME);

    kill_and_reap(pid);
    assert_int_equal(poll(&pfd, 1, 0), 1);
    close(pidfd);
    pidfd = -7;
    assert_int_equal(verify(&id, &pidfd), LZ_PROCESS_GONE);
    assert_int_equal(pidfd, -7); /* only SAME hands out a pidfd */
}

static void test_verify_different(void **state)
{
    (void) state;
    lz_error *err = NULL;
    pid_t pid = spawn_child();
    lz_process_identity id;
    assert_int_equal(lz_process_identity_of(pid, &id, &err), 0);
    expect_ok(&err);

    lz_process_identity other = id;
    other.start_time_ticks++;
    int pidfd = -7;
    assert_int_equal(verify(&other, &pidfd), LZ_PROCESS_DIFFERENT);
    assert_int_equal(pidfd, -7);
    other.start_time_ticks = id.start_time_ticks - 1;
    assert_int_equal(verify(&other, NULL), LZ_PROCESS_DIFFERENT);

    /* the pidfs inode: another process's (ours) */
    if (have_pidfs()) {
        assert_true(id.pidfs_ino != 0);
        other = id;
        other.pidfs_ino++;
        assert_int_equal(verify(&other, NULL), LZ_PROCESS_DIFFERENT);
        other = id;
        other.pidfs_dev++;
        assert_int_equal(verify(&other, NULL), LZ_PROCESS_DIFFERENT);
        /* a record without a pidfs inode (older kernel) is proven by the
         * start time alone */
        other = id;
        other.pidfs_dev = other.pidfs_ino = 0;
        assert_int_equal(verify(&other, NULL), LZ_PROCESS_SAME);
    } else {
        print_message("# no pidfs on this kernel: pidfs_ino not checked\n");
    }
    assert_int_equal(verify(&id, NULL), LZ_PROCESS_SAME);
    kill_and_reap(pid);
}

static void test_verify_other_boot_or_no_pid(void **state)
{
    (void) state;
    lz_error *err = NULL;
    pid_t pid = spawn_child();
    lz_process_identity id;
    assert_int_equal(lz_process_identity_of(pid, &id, &err), 0);
    expect_ok(&err);
    assert_int_equal(verify(&id, NULL), LZ_PROCESS_SAME);

    lz_process_identity other = id;
    other.boot_id[0] = other.boot_id[0] == '0' ? '1' : '0';
    assert_int_equal(verify(&other, NULL), LZ_PROCESS_GONE);
    other = id;
    other.boot_id[0] = '\0';
    assert_int_equal(verify(&other, NULL), LZ_PROCESS_GONE);
    /* pids that are not one process: never verified (nor signalled) */
    static const pid_t bad[] = { 0, -1, -2 };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++) {
        other = id;
        other.pid = bad[i];
        assert_int_equal(verify(&other, NULL), LZ_PROCESS_GONE);
        assert_int_equal(lz_process_kill_verified(&other, 1000, &err), 0);
        expect_ok(&err);
    }
    assert_true(alive_not_reaped(pid));
    kill_and_reap(pid);
}

/* ---- kill --------------------------------------------------------------- */

static void test_kill_verified_kills_same(void **state)
{
    (void) state;
    lz_error *err = NULL;
    pid_t pid = spawn_child();
    lz_process_identity id;
    assert_int_equal(lz_process_identity_of(pid, &id, &err), 0);
    assert_int_equal(lz_process_kill_verified(&id, 5000, &err), 0);
    expect_ok(&err);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGKILL);
    /* a gone pid: nothing to do */
    assert_int_equal(lz_process_kill_verified(&id, 5000, &err), 0);
    expect_ok(&err);
}

static void test_kill_verified_leaves_stranger(void **state)
{
    (void) state;
    lz_error *err = NULL;
    pid_t pid = spawn_child();
    lz_process_identity id;
    assert_int_equal(lz_process_identity_of(pid, &id, &err), 0);

    lz_process_identity other = id;
    other.start_time_ticks += 100;
    assert_int_equal(lz_process_kill_verified(&other, 1000, &err), 1);
    expect_ok(&err);
    assert_true(alive_not_reaped(pid));
    if (have_pidfs()) {
        other = id;
        other.pidfs_ino ^= 1;
        assert_int_equal(lz_process_kill_verified(&other, 1000, &err), 1);
        expect_ok(&err);
        assert_true(alive_not_reaped(pid));
    }
    /* another boot: gone, left alone */
    other = id;
    other.boot_id[35] = other.boot_id[35] == 'a' ? 'b' : 'a';
    assert_int_equal(lz_process_kill_verified(&other, 1000, &err), 0);
    expect_ok(&err);
    assert_true(alive_not_reaped(pid));
    kill_and_reap(pid);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_boot_id),
        T(test_identity_of_self_and_child),
        T(test_identity_of_gone_pid),
        T(test_verify_same_then_gone),
        T(test_verify_different),
        T(test_verify_other_boot_or_no_pid),
        T(test_kill_verified_kills_same),
        T(test_kill_verified_leaves_stranger),
    };
    return cmocka_run_group_tests_name("test_procid", tests, NULL, NULL);
}
