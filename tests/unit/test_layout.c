/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests of src/oci/layout.c: the production SandboxLayoutV1 and its
 * ancestry-conflict query.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "config/grammar.h"
#include "oci/layout.h"

static void test_production_contains_workspace(void **state)
{
    (void) state;
    const lz_sandbox_layout *l = lz_sandbox_layout_production();
    assert_non_null(l);
    assert_true(lz_sandbox_layout_count(l) > 0);
    bool found = false;
    for (size_t i = 0; i < lz_sandbox_layout_count(l); i++)
        if (strcmp(lz_sandbox_layout_at(l, i), "/workspace") == 0)
            found = true;
    assert_true(found);
    /* The constructor hands out one immutable value. */
    assert_ptr_equal(l, lz_sandbox_layout_production());
}

static void test_production_members_valid_sorted_unique(void **state)
{
    (void) state;
    const lz_sandbox_layout *l = lz_sandbox_layout_production();
    size_t n = lz_sandbox_layout_count(l);
    for (size_t i = 0; i < n; i++) {
        const char *p = lz_sandbox_layout_at(l, i);
        assert_non_null(p);
        const char *what = NULL;
        if (!lz_sandbox_path_valid(p, &what))
            fail_msg("layout member '%s' is not a sandbox path: %s", p, what ? what : "?");
        if (i > 0) {
            const char *prev = lz_sandbox_layout_at(l, i - 1);
            if (strcmp(prev, p) >= 0)
                fail_msg("layout not strictly sorted: '%s' before '%s'", prev, p);
        }
        for (size_t j = 0; j < n; j++)
            if (j != i && strcmp(lz_sandbox_layout_at(l, j), p) == 0)
                fail_msg("layout member '%s' duplicated", p);
    }
    /* Out of range is NULL, not a read past the end. */
    assert_null(lz_sandbox_layout_at(l, n));
    assert_null(lz_sandbox_layout_at(l, n + 100));
}

static void test_production_has_runtime_destinations(void **state)
{
    (void) state;
    const lz_sandbox_layout *l = lz_sandbox_layout_production();
    /* The kernel file systems the runtime mounts itself are protected. */
    assert_non_null(lz_sandbox_layout_conflict(l, "/proc"));
    assert_non_null(lz_sandbox_layout_conflict(l, "/sys"));
    assert_non_null(lz_sandbox_layout_conflict(l, "/dev"));
}

static void test_conflict_equal(void **state)
{
    (void) state;
    const lz_sandbox_layout *l = lz_sandbox_layout_production();
    const char *hit = lz_sandbox_layout_conflict(l, "/workspace");
    assert_non_null(hit);
    assert_string_equal(hit, "/workspace");
    hit = lz_sandbox_layout_conflict(l, "/run/lazaret");
    assert_non_null(hit);
    assert_string_equal(hit, "/run/lazaret");
}

static void test_conflict_ancestor(void **state)
{
    (void) state;
    const lz_sandbox_layout *l = lz_sandbox_layout_production();
    /* The path is an ancestor of a protected destination. */
    const char *hit = lz_sandbox_layout_conflict(l, "/run");
    assert_non_null(hit);
    assert_string_equal(hit, "/run/lazaret");
}

static void test_conflict_descendant(void **state)
{
    (void) state;
    const lz_sandbox_layout *l = lz_sandbox_layout_production();
    const char *hit = lz_sandbox_layout_conflict(l, "/workspace/x");
    assert_non_null(hit);
    assert_string_equal(hit, "/workspace");
    hit = lz_sandbox_layout_conflict(l, "/workspace/a/b/c");
    assert_non_null(hit);
    assert_string_equal(hit, "/workspace");
    hit = lz_sandbox_layout_conflict(l, "/run/lazaret/mailbox");
    assert_non_null(hit);
    assert_string_equal(hit, "/run/lazaret");
    hit = lz_sandbox_layout_conflict(l, "/proc/self");
    assert_non_null(hit);
    assert_string_equal(hit, "/proc");
}

static void test_conflict_unrelated(void **state)
{
    (void) state;
    const lz_sandbox_layout *l = lz_sandbox_layout_production();
    static const char *const free_paths[] = {
        "/work",          "/workspaces",      "/workspace2",
        "/workspace.d",   "/home/agent",      "/root",
        "/run/lazaret2",  "/run/user",        "/runx",
        "/device",        "/procs",           "/system",
        "/usr/workspace", "/opt/run/lazaret",
    };
    for (size_t i = 0; i < sizeof(free_paths) / sizeof(free_paths[0]); i++) {
        const char *hit = lz_sandbox_layout_conflict(l, free_paths[i]);
        if (hit)
            fail_msg("'%s' should not conflict, but conflicts with '%s'", free_paths[i], hit);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_production_contains_workspace),
        cmocka_unit_test(test_production_members_valid_sorted_unique),
        cmocka_unit_test(test_production_has_runtime_destinations),
        cmocka_unit_test(test_conflict_equal),
        cmocka_unit_test(test_conflict_ancestor),
        cmocka_unit_test(test_conflict_descendant),
        cmocka_unit_test(test_conflict_unrelated),
    };
    return cmocka_run_group_tests_name("layout", tests, NULL, NULL);
}
