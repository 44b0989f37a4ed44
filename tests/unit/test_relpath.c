/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests for src/fs/relpath.c: joining relative paths, lexical
 * normalisation below a root, and the prefix test. Pure string logic.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/util.h"
#include "fs/relpath.h"

static void test_rel_join(void **state)
{
    (void) state;
    static const struct {
        const char *rel, *name, *want;
    } cases[] = {
        { "", "a", "a" },  /* the top itself */
        { ".", "a", "a" }, /* "." too */
        { "a", "b", "a/b" },     { "a/b", "c", "a/b/c" },
        { "a", "b/c", "a/b/c" }, /* name is appended as is */
        { "./a", "b", "./a/b" }, /* only "." exactly is the top */
        { "a", "", "a/" },
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(cases); i++) {
        _cleanup_free_ char *got = lz_rel_join(cases[i].rel, cases[i].name);
        assert_string_equal(got, cases[i].want);
    }
}

/* want NULL: refused. */
static void expect_lexical(const char *root, const char *path, const char *want)
{
    _cleanup_free_ char *got = lz_lexical_rel(root, path);
    if (!want) {
        if (got)
            print_error("lz_lexical_rel(\"%s\", \"%s\") = \"%s\", expected NULL\n", root, path,
                        got);
        assert_null(got);
        return;
    }
    if (!got)
        print_error("lz_lexical_rel(\"%s\", \"%s\") = NULL, expected \"%s\"\n", root, path, want);
    assert_non_null(got);
    assert_string_equal(got, want);
}

static void test_lexical_rel_accepts(void **state)
{
    (void) state;
    expect_lexical("/ws", "/ws/a", "a");
    expect_lexical("/ws", "/ws/a/b/c", "a/b/c");
    expect_lexical("/ws", "/ws//a///b/", "a/b");
    expect_lexical("/ws", "/ws/./a/./b", "a/b");
    expect_lexical("/ws", "/ws/a/../b", "b");
    expect_lexical("/ws", "/ws/a/b/../../c", "c");
    expect_lexical("/ws", "/ws/a/b/..", "a");
    expect_lexical("/ws", "/ws/a/b/c/../../d/./e", "a/d/e");
    /* root "": every absolute path, normalised without its leading '/' */
    expect_lexical("", "/etc/passwd", "etc/passwd");
    expect_lexical("", "/proc/self/../1/cwd", "proc/1/cwd");
    expect_lexical("", "//x", "x");
}

static void test_lexical_rel_refuses(void **state)
{
    (void) state;
    expect_lexical("/ws", "/ws", NULL); /* the root itself */
    expect_lexical("/ws", "/ws/", NULL);
    expect_lexical("/ws", "/ws/.", NULL);
    expect_lexical("/ws", "/ws/a/..", NULL); /* back at the root */
    expect_lexical("/ws", "/ws/..", NULL);   /* climbs out */
    expect_lexical("/ws", "/ws/a/../../ws/b", NULL);
    expect_lexical("/ws", "/wsx/a", NULL); /* not component-wise below */
    expect_lexical("/ws", "/other/a", NULL);
    expect_lexical("/ws", "ws/a", NULL);
    expect_lexical("/ws", "", NULL);
    expect_lexical("", "/", NULL);
    expect_lexical("", "/..", NULL);
    expect_lexical("", "relative", NULL);
}

static void test_path_within(void **state)
{
    (void) state;
    static const struct {
        const char *path, *root;
        bool want;
    } cases[] = {
        { "/proc", "/proc", true },
        { "/proc/self/fd", "/proc", true },
        { "/proc/", "/proc", true },
        { "/process", "/proc", false }, /* component-wise, not a prefix */
        { "/pro", "/proc", false },
        { "/dev/../etc", "/dev", true }, /* a string test: nothing resolved */
        { "a/b", "a", true },            /* relative paths too */
        { "ab/c", "a", false },
        { ".git/objects", ".git", true },
        { "x/.git", ".git", false },
        { "/", "/", true },
        { "/a", "/", false }, /* unlike lz_path_is_strict_descendant */
        { "//a", "/", true },
        { "anything", "", false },
        { "", "", true },
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(cases); i++) {
        bool got = lz_path_within(cases[i].path, cases[i].root);
        if (got != cases[i].want)
            print_error("lz_path_within(\"%s\", \"%s\") = %d\n", cases[i].path, cases[i].root, got);
        assert_int_equal(got, cases[i].want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rel_join),
        cmocka_unit_test(test_lexical_rel_accepts),
        cmocka_unit_test(test_lexical_rel_refuses),
        cmocka_unit_test(test_path_within),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
