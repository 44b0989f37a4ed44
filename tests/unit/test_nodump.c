/* SPDX-License-Identifier: Apache-2.0
 *
 * Core-dump and secret hygiene (src/common/nodump.h). Each case that changes
 * process state runs in a forked child, so the test runner's own state and
 * the other cases are unaffected.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/nodump.h"

/* Run fn in a child; the child's exit status is fn's result (0 = pass). */
static int in_child(int (*fn)(void))
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(fn());
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

static int enter_from_unlimited(void)
{
    struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
    if (setrlimit(RLIMIT_CORE, &rl) < 0 && getuid() == 0)
        return 1;
    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
    if (lz_nodump_enter(NULL) < 0)
        return 2;
    if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0)
        return 3;
    if (getrlimit(RLIMIT_CORE, &rl) < 0 || rl.rlim_cur != LZ_CORE_LIMIT ||
        rl.rlim_max != LZ_CORE_LIMIT)
        return 4;
    /* The hard limit is lowered: nothing after us can raise it again
     * (an unprivileged process; root keeps CAP_SYS_RESOURCE). */
    if (getuid() != 0) {
        rl.rlim_cur = rl.rlim_max = RLIM_INFINITY;
        if (setrlimit(RLIMIT_CORE, &rl) == 0)
            return 5;
    }
    /* fork keeps both. */
    pid_t pid = fork();
    if (pid == 0)
        _exit(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0 && getrlimit(RLIMIT_CORE, &rl) == 0 &&
                      rl.rlim_max == LZ_CORE_LIMIT
                  ? 0
                  : 1);
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0)
        return 6;
    return 0;
}

static void test_enter(void **state)
{
    (void) state;
    assert_int_equal(in_child(enter_from_unlimited), 0);
}

static int enter_from_zero(void)
{
    /* A hard limit of 0 cannot be raised to 1: it stays 0 (which still stops
     * file dumps) and entering does not fail. */
    struct rlimit rl = { 0, 0 };
    if (setrlimit(RLIMIT_CORE, &rl) < 0)
        return 1;
    if (lz_nodump_enter(NULL) < 0)
        return 2;
    if (getrlimit(RLIMIT_CORE, &rl) < 0 || rl.rlim_cur != 0 || rl.rlim_max != 0)
        return 3;
    return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0 ? 0 : 4;
}

static void test_enter_with_zero_hard_limit(void **state)
{
    (void) state;
    assert_int_equal(in_child(enter_from_zero), 0);
}

static int scrub(void)
{
    if (setenv("LZ_UNIT_SECRET", "hunter2-secret", 1) < 0)
        return 1;
    char *v = getenv("LZ_UNIT_SECRET");
    size_t n = strlen(v);
    lz_environ_scrub("LZ_UNIT_SECRET");
    if (getenv("LZ_UNIT_SECRET"))
        return 2;
    /* The bytes themselves are gone, not only the variable. */
    for (size_t i = 0; i < n; i++)
        if (v[i] != '\0')
            return 3;
    lz_environ_scrub("LZ_UNIT_NOT_SET"); /* absent: nothing happens */
    return 0;
}

static void test_environ_scrub(void **state)
{
    (void) state;
    assert_int_equal(in_child(scrub), 0);
}

static void test_secret_free(void **state)
{
    (void) state;
    lz_secret_free(NULL);
    lz_secret_free(strdup("a secret"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enter),
        cmocka_unit_test(test_enter_with_zero_hard_limit),
        cmocka_unit_test(test_environ_scrub),
        cmocka_unit_test(test_secret_free),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
