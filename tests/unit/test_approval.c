/* SPDX-License-Identifier: Apache-2.0
 *
 * Auto-approval (src/coordinator/approval.c) and the executable checks at
 * execution time (src/fs/executable.c). Every rule has an accepting and a
 * refusing case. The executable tests work in a mkdtemp() directory; the
 * ownership check needs a second uid and is covered at configuration load
 * by tests/integration/test_config_check.py.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "coordinator/approval.h"
#include "fs/executable.h"

static lz_resolved_rule rule(const char *exe, const char *const *args, size_t n, bool extra)
{
    lz_resolved_rule r = { .executable = LZ_PATH_PLAN_INIT };
    r.executable.label = (char *) exe;
    r.args = (char **) args;
    r.n_args = n;
    r.allow_extra_args = extra;
    return r;
}

#define ARGV(...) ((char *const *) (const char *const[]){ __VA_ARGS__, NULL })
#define N(...) (sizeof((const char *[]){ __VA_ARGS__ }) / sizeof(const char *))
#define MATCH(r, ...) lz_rule_matches(&(r), ARGV(__VA_ARGS__), N(__VA_ARGS__))

static void test_exact_rule(void **state)
{
    (void) state;
    const char *args[] = { "status" };
    lz_resolved_rule r = rule("/usr/bin/git", args, 1, false);
    assert_true(MATCH(r, "/usr/bin/git", "status"));
    assert_false(MATCH(r, "/usr/bin/git", "statusx")); /* no prefix of an argument */
    assert_false(MATCH(r, "/usr/bin/git", "statu"));
    assert_false(MATCH(r, "/usr/bin/git", "status", "-s")); /* no extra arguments */
    assert_false(MATCH(r, "/usr/bin/git"));
    assert_false(MATCH(r, "git", "status"));           /* no PATH lookup, no basename */
    assert_false(MATCH(r, "/usr/bin//git", "status")); /* byte-equal, not canonicalised */
    assert_false(MATCH(r, "/usr/local/bin/git", "status"));
    assert_false(lz_rule_matches(&r, ARGV("/usr/bin/git"), 0));
}

static void test_prefix_rule(void **state)
{
    (void) state;
    const char *args[] = { "sts", "get-caller-identity" };
    lz_resolved_rule r = rule("/usr/bin/aws", args, 2, true);
    assert_true(MATCH(r, "/usr/bin/aws", "sts", "get-caller-identity"));
    assert_true(MATCH(r, "/usr/bin/aws", "sts", "get-caller-identity", "--output", "json"));
    assert_false(MATCH(r, "/usr/bin/aws", "sts"));
    assert_false(MATCH(r, "/usr/bin/aws", "sts", "get-caller-identityx"));
    assert_false(MATCH(r, "/usr/bin/aws", "s3", "get-caller-identity"));
    /* A prefix rule without arguments would approve anything: never. */
    lz_resolved_rule any = rule("/usr/bin/aws", NULL, 0, true);
    assert_false(MATCH(any, "/usr/bin/aws"));
    assert_false(MATCH(any, "/usr/bin/aws", "s3", "rm", "--recursive"));
}

static void test_metacharacters_are_data(void **state)
{
    (void) state;
    const char *args[] = { "x; touch /tmp/pwned" };
    lz_resolved_rule r = rule("/bin/echo", args, 1, false);
    assert_true(MATCH(r, "/bin/echo", "x; touch /tmp/pwned"));
    assert_false(MATCH(r, "/bin/echo", "x;", "touch", "/tmp/pwned"));
    const char *e[] = { "status" };
    lz_resolved_rule g = rule("/usr/bin/git", e, 1, true);
    /* Chaining is an argument like any other: it reaches git verbatim. */
    assert_true(MATCH(g, "/usr/bin/git", "status", "&&", "rm", "-rf", "/"));
    assert_false(MATCH(g, "/usr/bin/git", "status && rm -rf /"));
    assert_false(MATCH(g, "/usr/bin/git", "$(rm -rf /)"));
}

static void test_rules_of_a_profile(void **state)
{
    (void) state;
    const char *a1[] = { "status" };
    const char *a2[] = { "log", "-1" };
    lz_resolved_rule rules[] = { rule("/usr/bin/git", a1, 1, false),
                                 rule("/usr/bin/git", a2, 2, false) };
    lz_resolved_config cfg = { .escalation_enabled = true, .rules = rules, .n_rules = 2 };
    assert_ptr_equal(lz_rules_match(&cfg, ARGV("/usr/bin/git", "log", "-1"), 3), &rules[1]);
    assert_null(lz_rules_match(&cfg, ARGV("/usr/bin/git", "push"), 2));
    cfg.escalation_enabled = false; /* a disabled profile approves nothing */
    assert_null(lz_rules_match(&cfg, ARGV("/usr/bin/git", "status"), 2));
}

/* ---- executable checks at execution time -------------------------------- */

typedef struct {
    char dir[64];
    char exe[96];
    lz_path_plan plan;
} exe_fixture;

static int exe_setup(void **state)
{
    exe_fixture *f = lz_xcalloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/lz-approval-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    char *real = realpath(f->dir, NULL);
    snprintf(f->dir, sizeof(f->dir), "%s", real);
    free(real);
    snprintf(f->exe, sizeof(f->exe), "%s/tool", f->dir);
    int fd = open(f->exe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
    if (fd < 0 || write(fd, "#!/bin/sh\nexit 0\n", 17) != 17)
        return -1;
    close(fd);
    chmod(f->exe, 0755);
    f->plan = (lz_path_plan) LZ_PATH_PLAN_INIT;
    lz_error *err = NULL;
    if (lz_plan_existing(f->exe, &f->plan, &err) < 0) {
        lz_error_free(err);
        return -1;
    }
    *state = f;
    return 0;
}

static int exe_teardown(void **state)
{
    exe_fixture *f = *state;
    lz_plan_clear(&f->plan);
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "%s/tool", f->dir);
    unlink(cmd);
    snprintf(cmd, sizeof(cmd), "%s/other", f->dir);
    unlink(cmd);
    snprintf(cmd, sizeof(cmd), "%s/link", f->dir);
    unlink(cmd);
    rmdir(f->dir);
    free(f);
    return 0;
}

/* Pin and expect success (want == NULL) or a failure whose message holds want. */
static void expect_pin(exe_fixture *f, const char *want)
{
    lz_error *err = NULL;
    lz_identity id = { 0 };
    int fd = lz_executable_pin(&f->plan, &id, &err);
    if (!want) {
        if (fd < 0)
            fail_msg("pin failed: %s", err->message);
        assert_true(fd >= 0);
        struct stat st;
        assert_int_equal(stat(f->exe, &st), 0);
        assert_int_equal(id.ino, st.st_ino);
        close(fd);
        return;
    }
    assert_int_equal(fd, -1);
    assert_non_null(err);
    if (!strstr(err->message, want))
        fail_msg("want \"%s\" in \"%s\"", want, err->message);
    lz_error_free(err);
}

static void test_pin_unchanged(void **state)
{
    expect_pin(*state, NULL);
}

static void test_pin_replaced(void **state)
{
    exe_fixture *f = *state;
    char other[128];
    snprintf(other, sizeof(other), "%s/other", f->dir);
    int fd = open(other, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
    assert_true(fd >= 0);
    close(fd);
    chmod(other, 0755);
    assert_int_equal(rename(other, f->exe), 0); /* another object at the same path */
    expect_pin(f, "changed");
}

static void test_pin_symlink_swap(void **state)
{
    exe_fixture *f = *state;
    char other[128];
    snprintf(other, sizeof(other), "%s/other", f->dir);
    assert_int_equal(rename(f->exe, other), 0);
    assert_int_equal(symlink(other, f->exe), 0); /* the same object, through a link */
    expect_pin(f, "changed");
}

static void test_pin_relinked(void **state)
{
    exe_fixture *f = *state;
    char link_[128];
    snprintf(link_, sizeof(link_), "%s/link", f->dir);
    assert_int_equal(link(f->exe, link_), 0);
    expect_pin(f, "more than one hard link");
}

static void test_pin_group_writable(void **state)
{
    exe_fixture *f = *state;
    assert_int_equal(chmod(f->exe, 0775), 0);
    expect_pin(f, "writable by group or others");
}

static void test_pin_not_executable(void **state)
{
    exe_fixture *f = *state;
    /* Root too: it may execute a file with any x bit, and 0644 has none. */
    assert_int_equal(chmod(f->exe, 0644), 0);
    expect_pin(f, "not executable");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_rule),
        cmocka_unit_test(test_prefix_rule),
        cmocka_unit_test(test_metacharacters_are_data),
        cmocka_unit_test(test_rules_of_a_profile),
        cmocka_unit_test_setup_teardown(test_pin_unchanged, exe_setup, exe_teardown),
        cmocka_unit_test_setup_teardown(test_pin_replaced, exe_setup, exe_teardown),
        cmocka_unit_test_setup_teardown(test_pin_symlink_swap, exe_setup, exe_teardown),
        cmocka_unit_test_setup_teardown(test_pin_relinked, exe_setup, exe_teardown),
        cmocka_unit_test_setup_teardown(test_pin_group_writable, exe_setup, exe_teardown),
        cmocka_unit_test_setup_teardown(test_pin_not_executable, exe_setup, exe_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
