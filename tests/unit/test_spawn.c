/* SPDX-License-Identifier: Apache-2.0
 *
 * Descriptor hygiene of src/common/spawn.h. lz_close_fds_except runs in a
 * forked child here: it closes the test runner's own descriptors too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <sys/wait.h>
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_close_fds_except),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
