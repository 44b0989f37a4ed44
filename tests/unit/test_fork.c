/* SPDX-License-Identifier: Apache-2.0
 *
 * lz_fork_call (src/common/fork.h): a function of ours in a forked child,
 * its error back to the caller, the ready handshake with the caller's step
 * in between, and no child left behind by any failure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fork.h"
#include "common/spawn.h"

/* Every case ends with no child of the test left, zombie or running. */
static void assert_no_child(void)
{
    errno = 0;
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);
}

static int exit_with(void *arg, int channel, lz_error **err)
{
    (void) channel, (void) err;
    return *(int *) arg;
}

static void test_status_of_a_child_run_to_completion(void **state)
{
    (void) state;
    int code = 7;
    lz_error *err = NULL;
    assert_int_equal(lz_fork_call(exit_with, &code, NULL, NULL, &err), 7);
    assert_null(err);
    code = 0;
    assert_int_equal(lz_fork_call(exit_with, &code, NULL, NULL, &err), 0);
    assert_null(err);
    assert_no_child();
}

static int fail_with_error(void *arg, int channel, lz_error **err)
{
    (void) channel;
    lz_error_set(err, ENOTEMPTY, "cannot remove %s\nsecond line", (const char *) arg);
    return lz_error_hint(err, "remove it by hand");
}

static void test_the_childs_error_comes_back_whole(void **state)
{
    (void) state;
    lz_error *err = NULL;
    lz_fork_options opt = { .what = "the remover" };
    assert_int_equal(lz_fork_call(fail_with_error, (void *) "/x/y", &opt, NULL, &err), -1);
    assert_non_null(err);
    assert_int_equal(err->errnum, ENOTEMPTY);
    assert_string_equal(err->message, "cannot remove /x/y\nsecond line");
    assert_string_equal(err->hint, "remove it by hand");
    lz_error_free(err);
    assert_no_child();
}

static int fail_without_hint(void *arg, int channel, lz_error **err)
{
    (void) arg, (void) channel;
    return lz_error_set(err, 0, "no hint here");
}

static void test_an_error_without_hint(void **state)
{
    (void) state;
    lz_error *err = NULL;
    assert_int_equal(lz_fork_call(fail_without_hint, NULL, NULL, NULL, &err), -1);
    assert_int_equal(err->errnum, 0);
    assert_string_equal(err->message, "no hint here");
    assert_null(err->hint);
    lz_error_free(err);
    assert_no_child();
}

static int fail_long(void *arg, int channel, lz_error **err)
{
    (void) arg, (void) channel;
    char big[10000];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    lz_error_set(err, EIO, "%s", big);
    return lz_error_hint(err, "%s", big);
}

static void test_a_long_error_is_cut_not_lost(void **state)
{
    (void) state;
    lz_error *err = NULL;
    assert_int_equal(lz_fork_call(fail_long, NULL, NULL, NULL, &err), -1);
    assert_int_equal(err->errnum, EIO);
    assert_true(strlen(err->message) > 1000);
    assert_true(strlen(err->message) < 4096);
    assert_true(strspn(err->message, "a") == strlen(err->message));
    lz_error_free(err);
    assert_no_child();
}

/* A child that drops every descriptor, its channel with them, and then
 * opens a file that takes the channel's number: its error must not be
 * written there, and the caller sees its exit status. */
static int drop_channel_then_fail(void *arg, int channel, lz_error **err)
{
    const int keep[] = { 0, 1, 2 };
    if (lz_close_fds_except(keep, 3) < 0)
        return 90;
    int fd = open((const char *) arg, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0 || (fd != channel && dup3(fd, channel, O_CLOEXEC) < 0))
        return 91;
    return lz_error_set(err, 0, "lost");
}

static void test_a_child_that_dropped_its_channel(void **state)
{
    (void) state;
    char path[] = "/tmp/lz-test-fork-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    lz_error *err = NULL;
    assert_int_equal(lz_fork_call(drop_channel_then_fail, path, NULL, NULL, &err), 1);
    assert_null(err);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_size, 0); /* nothing written into the impostor */
    close(fd);
    unlink(path);
    assert_no_child();
}

static int die_of_signal(void *arg, int channel, lz_error **err)
{
    (void) arg, (void) channel, (void) err;
    raise(SIGKILL);
    return 0;
}

static void test_a_child_killed_by_a_signal(void **state)
{
    (void) state;
    lz_error *err = NULL;
    assert_int_equal(lz_fork_call(die_of_signal, NULL, NULL, NULL, &err), 128 + SIGKILL);
    assert_null(err);
    assert_no_child();
}

/* Ready, then wait for the test's word on a pipe and exit with it. */
static int ready_then_wait(void *arg, int channel, lz_error **err)
{
    int *p = arg;
    close(p[1]);
    if (lz_fork_ready(channel) < 0)
        return lz_error_set(err, 0, "no go-ahead");
    char c = 0;
    if (read(p[0], &c, 1) != 1)
        return 92;
    return c;
}

static void test_a_child_that_runs_on(void **state)
{
    (void) state;
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    lz_child child = { 0 };
    lz_error *err = NULL;
    lz_fork_options opt = { .what = "the waiter" };
    assert_int_equal(lz_fork_call(ready_then_wait, p, &opt, &child, &err), 0);
    assert_null(err);
    assert_true(child.pid > 0);
    assert_true(child.pidfd >= 0);
    assert_true(fcntl(child.pidfd, F_GETFD) & FD_CLOEXEC);
    close(p[0]);
    /* It runs on: not ended within 100 ms. */
    assert_int_equal(lz_child_wait(&child, 100, &err), -1);
    assert_int_equal(err->errnum, ETIMEDOUT);
    lz_error_free(err);
    err = NULL;
    char c = 42;
    assert_int_equal(write(p[1], &c, 1), 1);
    close(p[1]);
    assert_int_equal(lz_child_wait(&child, -1, &err), 42);
    assert_no_child();
}

static void test_a_failure_before_ready_leaves_no_child(void **state)
{
    (void) state;
    lz_child child = { .pid = 12345, .pidfd = -7 };
    lz_error *err = NULL;
    assert_int_equal(lz_fork_call(fail_with_error, (void *) "/z", NULL, &child, &err), -1);
    assert_string_equal(err->message, "cannot remove /z\nsecond line");
    lz_error_free(err);
    err = NULL;
    /* ret is untouched on failure */
    assert_int_equal(child.pid, 12345);
    assert_int_equal(child.pidfd, -7);
    int code = 0;
    lz_fork_options opt = { .what = "the early leaver" };
    assert_int_equal(lz_fork_call(exit_with, &code, &opt, &child, &err), -1);
    assert_string_equal(err->message, "the early leaver ended before it was ready (status 0)");
    lz_error_free(err);
    assert_no_child();
}

/* The caller's step between ready and go: here it writes a byte the child
 * reads after the go-ahead, and checks it was given the child's pid. */
typedef struct between {
    int pipe[2];
    pid_t seen;
    bool fail;
} between;

static int write_between(pid_t child, void *arg, lz_error **err)
{
    between *b = arg;
    b->seen = child;
    if (b->fail)
        return lz_error_set(err, EPERM, "the step between failed");
    char c = 'm';
    return write(b->pipe[1], &c, 1) == 1 ? 0 : lz_error_set(err, errno, "cannot write");
}

static int ready_then_read(void *arg, int channel, lz_error **err)
{
    between *b = arg;
    close(b->pipe[1]);
    if (lz_fork_ready(channel) < 0)
        return lz_error_set(err, 0, "no go-ahead");
    /* Written before the go-ahead: there without waiting. */
    if (fcntl(b->pipe[0], F_SETFL, O_NONBLOCK) < 0)
        return 93;
    char c = 0;
    return read(b->pipe[0], &c, 1) == 1 && c == 'm' ? 0 : 94;
}

static void test_the_callers_step_runs_between_ready_and_go(void **state)
{
    (void) state;
    between b = { .seen = 0 };
    assert_int_equal(pipe2(b.pipe, O_CLOEXEC), 0);
    lz_fork_options opt = { .on_ready = write_between, .ready_arg = &b };
    lz_error *err = NULL;
    /* Run to completion: the status says what the child read. */
    assert_int_equal(lz_fork_call(ready_then_read, &b, &opt, NULL, &err), 0);
    assert_null(err);
    assert_true(b.seen > 0);
    assert_no_child();

    /* The step fails: the child is killed and reaped, the step's error is
     * the caller's. */
    b.fail = true;
    lz_child child = { 0 };
    assert_int_equal(lz_fork_call(ready_then_read, &b, &opt, &child, &err), -1);
    assert_int_equal(err->errnum, EPERM);
    assert_string_equal(err->message, "the step between failed");
    lz_error_free(err);
    assert_int_equal(child.pid, 0);
    close(b.pipe[0]);
    close(b.pipe[1]);
    assert_no_child();
}

static int check_name_and_deathsig(void *arg, int channel, lz_error **err)
{
    (void) arg, (void) channel, (void) err;
    char name[17] = "";
    int sig = 0;
    if (prctl(PR_GET_NAME, name, 0, 0, 0) < 0 || strcmp(name, "lz-test-child") != 0)
        return 95;
    if (prctl(PR_GET_PDEATHSIG, &sig, 0, 0, 0) < 0 || sig != SIGTERM)
        return 96;
    return 0;
}

static void test_name_and_death_signal(void **state)
{
    (void) state;
    lz_fork_options opt = { .name = "lz-test-child", .pdeathsig = SIGTERM };
    lz_error *err = NULL;
    assert_int_equal(lz_fork_call(check_name_and_deathsig, NULL, &opt, NULL, &err), 0);
    assert_null(err);
    assert_no_child();
}

/* The caller's descriptors (its end of the channel included) are not the
 * child's business beyond the fork: the channel is close-on-exec on both
 * ends, so an exec'd grandchild never holds it. */
static int channel_flags(void *arg, int channel, lz_error **err)
{
    (void) arg, (void) err;
    int fl = fcntl(channel, F_GETFD);
    return fl >= 0 && (fl & FD_CLOEXEC) ? 0 : 97;
}

static void test_the_channel_is_close_on_exec(void **state)
{
    (void) state;
    lz_error *err = NULL;
    assert_int_equal(lz_fork_call(channel_flags, NULL, NULL, NULL, &err), 0);
    assert_no_child();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_of_a_child_run_to_completion),
        cmocka_unit_test(test_the_childs_error_comes_back_whole),
        cmocka_unit_test(test_an_error_without_hint),
        cmocka_unit_test(test_a_long_error_is_cut_not_lost),
        cmocka_unit_test(test_a_child_that_dropped_its_channel),
        cmocka_unit_test(test_a_child_killed_by_a_signal),
        cmocka_unit_test(test_a_child_that_runs_on),
        cmocka_unit_test(test_a_failure_before_ready_leaves_no_child),
        cmocka_unit_test(test_the_callers_step_runs_between_ready_and_go),
        cmocka_unit_test(test_name_and_death_signal),
        cmocka_unit_test(test_the_channel_is_close_on_exec),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
