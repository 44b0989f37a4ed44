/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests of src/config/grammar.c: profile names, environment names,
 * absolute-path components, the host-path declaration grammar and the
 * sandbox-path grammar (schema "Trusted host configuration"). Every rule has
 * at least one accepting and one refusing case.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "config/grammar.h"

/* ---- profile names ---------------------------------------------------- */

static void test_profile_name_accepts(void **state)
{
    (void) state;
    char max[65];
    memset(max, 'a', 64);
    max[64] = '\0';
    static const char *const ok[] = {
        "a",    "Z",  "0",  "claude", "Claude-2", "a.b",    "a_b",     "a-b",
        "a..b", "a.", "a-", "a_",     "9lives",   "v1.2.3", "A_b-C.d",
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        if (!lz_profile_name_valid(ok[i]))
            fail_msg("profile name '%s' should be valid", ok[i]);
    }
    assert_true(lz_profile_name_valid(max));
}

static void test_profile_name_refuses(void **state)
{
    (void) state;
    char over[66];
    memset(over, 'a', 65);
    over[65] = '\0';
    static const char *const bad[] = {
        "",     ".",    "..",  ".a",  "-a",    "_a",          "a b",
        "a/b",  "a:b",  "a@b", "a+b", "a~",    "caf\xc3\xa9", "\xc3\xa9t\xc3\xa9",
        "a\tb", "a\nb", "a*",  "a$",  "A\x7f",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (lz_profile_name_valid(bad[i]))
            fail_msg("profile name '%s' should be invalid", bad[i]);
    }
    assert_false(lz_profile_name_valid(over));
}

/* ---- environment names ------------------------------------------------ */

static void test_env_name_accepts(void **state)
{
    (void) state;
    static const char *const ok[] = { "A", "_", "a", "HOME", "_X", "GITHUB_TOKEN", "a1", "A_1_b" };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        if (!lz_env_name_valid(ok[i]))
            fail_msg("env name '%s' should be valid", ok[i]);
    }
}

static void test_env_name_refuses(void **state)
{
    (void) state;
    static const char *const bad[] = {
        "", "1A", "9", "A-B", "A.B", "A B", "A=B", "$A", "A$", "\xc3\x89T\xc3\x89", "env:A", " A",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (lz_env_name_valid(bad[i]))
            fail_msg("env name '%s' should be invalid", bad[i]);
    }
}

/* ---- absolute path components ----------------------------------------- */

static void test_abs_components_accepts(void **state)
{
    (void) state;
    static const char *const ok[] = {
        "/a", "/a/b", "/usr/local/bin", "/.a", "/a..", "/...", "/a/.b/c", "/a b", "/~x",
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        const char *what = NULL;
        if (!lz_abs_path_components_valid(ok[i], &what))
            fail_msg("'%s' should be valid, refused: %s", ok[i], what ? what : "?");
    }
}

static void test_abs_components_refuses(void **state)
{
    (void) state;
    static const char *const bad[] = {
        "",      "/",  "a",   "a/b",  "//",    "//a",    "/a//b",   "/a/",
        "/a/b/", "/.", "/..", "/a/.", "/a/..", "/a/./b", "/a/../b", "./a",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *what = NULL;
        if (lz_abs_path_components_valid(bad[i], &what))
            fail_msg("'%s' should be invalid", bad[i]);
        if (!what || !*what)
            fail_msg("'%s' refused without a reason", bad[i]);
    }
}

/* ---- host paths ------------------------------------------------------- */

static void test_host_path_absolute(void **state)
{
    (void) state;
    const char *s = "/home/a/data";
    lz_host_path_anchor anchor = LZ_HOST_HOME;
    const char *suffix = NULL, *what = NULL;
    assert_true(lz_host_path_parse(s, false, &anchor, &suffix, &what));
    assert_int_equal(anchor, LZ_HOST_ABSOLUTE);
    /* For an absolute path the "suffix" is the whole path. */
    assert_ptr_equal(suffix, s);

    suffix = NULL;
    assert_true(lz_host_path_parse(s, true, &anchor, &suffix, &what));
    assert_int_equal(anchor, LZ_HOST_ABSOLUTE);
    assert_ptr_equal(suffix, s);
}

static void test_host_path_home(void **state)
{
    (void) state;
    const char *s = "~/x/y";
    lz_host_path_anchor anchor = LZ_HOST_ABSOLUTE;
    const char *suffix = NULL, *what = NULL;
    assert_true(lz_host_path_parse(s, false, &anchor, &suffix, &what));
    assert_int_equal(anchor, LZ_HOST_HOME);
    assert_ptr_equal(suffix, s + 2);
    assert_string_equal(suffix, "x/y");
}

static void test_host_path_profile_dir(void **state)
{
    (void) state;
    const char *s = "{profile_dir}/cache/x";
    lz_host_path_anchor anchor = LZ_HOST_ABSOLUTE;
    const char *suffix = NULL, *what = NULL;
    assert_true(lz_host_path_parse(s, true, &anchor, &suffix, &what));
    assert_int_equal(anchor, LZ_HOST_PROFILE_DIR);
    assert_ptr_equal(suffix, s + strlen("{profile_dir}/"));
    assert_string_equal(suffix, "cache/x");

    /* Only where the caller allows it (volume hosts). */
    what = NULL;
    suffix = NULL;
    anchor = LZ_HOST_HOME;
    assert_false(lz_host_path_parse(s, false, &anchor, &suffix, &what));
    assert_non_null(what);
    /* Outputs untouched on failure. */
    assert_null(suffix);
    assert_int_equal(anchor, LZ_HOST_HOME);
}

static void test_host_path_accepts_misc(void **state)
{
    (void) state;
    static const char *const ok[] = {
        "/a",         "/a/b~", "/a/b~c",      "/a/.b", "/a/b..",
        "/a/b-c_d.e", "~/a",   "~/.config/x", "/a b",  "/caf\xc3\xa9",
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        lz_host_path_anchor anchor;
        const char *suffix = NULL, *what = NULL;
        if (!lz_host_path_parse(ok[i], false, &anchor, &suffix, &what))
            fail_msg("host path '%s' should be valid, refused: %s", ok[i], what ? what : "?");
        if (!lz_host_path_parse(ok[i], true, &anchor, &suffix, &what))
            fail_msg("host path '%s' should be valid with {profile_dir}, refused: %s", ok[i],
                     what ? what : "?");
    }
}

static void test_host_path_refuses(void **state)
{
    (void) state;
    static const char *const bad[] = {
        "",
        "~",
        "~/",
        "~//etc",
        "~/a//b",
        "~/a/",
        "~/.",
        "~/..",
        "~/a/../b",
        "~user/x",
        "~user",
        "{profile_dir}",
        "{profile_dir}/",
        "{profile_dir}//etc",
        "{profile_dir}/a/",
        "{profile_dir}/..",
        "{profile_dir}/a/./b",
        "{PROFILE_DIR}/x",
        "{profile_dir}x",
        " {profile_dir}/x",
        "x",
        "a/b",
        "./a",
        "../a",
        ".",
        "..",
        "/",
        "//",
        "//a",
        "/a//b",
        "/a/",
        "/a/.",
        "/a/..",
        "/a/./b",
        "$HOME/x",
        "${HOME}/x",
        "/a/$X",
        "/a/${X}",
        "/a/*",
        "/a/b*",
        "/a/?",
        "/a/[bc]",
        "/a/`id`",
        "/a/b\\c",
        "/a/~b",
        "/~",
        "/~/x",
        "~/~x",
        "/a/{profile_dir}/x",
        "/a/{b}",
        "~/$X",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        for (int allow = 0; allow <= 1; allow++) {
            lz_host_path_anchor anchor = LZ_HOST_ABSOLUTE;
            const char *suffix = NULL, *what = NULL;
            if (lz_host_path_parse(bad[i], allow, &anchor, &suffix, &what))
                fail_msg("host path '%s' should be invalid (allow_profile_dir=%d)", bad[i], allow);
            if (!what || !*what)
                fail_msg("host path '%s' refused without a reason", bad[i]);
            if (suffix)
                fail_msg("host path '%s': suffix set on failure", bad[i]);
        }
    }
}

/* SPEC GAP (reported to the lead, fails today): the schema says a host path
 * declaration "rejects ... every other expansion, variable, glob, or shell
 * form". Extended-glob patterns (bash extglob / ksh: "@(a|b)", "!(a)",
 * "+(a)") are glob forms and process substitution ("<(cmd)", ">(cmd)") is a
 * shell form, but the character blacklist in grammar.c does not cover '(',
 * ')', '|', '!', '<' or '>', so these declarations are accepted. */
static void test_host_path_refuses_extglob_and_process_substitution(void **state)
{
    (void) state;
    static const char *const bad[] = {
        "/a/@(x|y)", "/a/!(x)", "/a/+(x)", "~/a/@(x)", "{profile_dir}/+(x)", "/a/<(id)", "/a/>(id)",
    };
    char list[256] = "";
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        lz_host_path_anchor anchor;
        const char *suffix = NULL, *what = NULL;
        if (lz_host_path_parse(bad[i], true, &anchor, &suffix, &what)) {
            strncat(list, " ", sizeof(list) - strlen(list) - 1);
            strncat(list, bad[i], sizeof(list) - strlen(list) - 1);
        }
    }
    if (list[0])
        fail_msg("glob or shell forms accepted as host paths:%s", list);
}

/* ---- sandbox paths ---------------------------------------------------- */

static void test_sandbox_path_accepts(void **state)
{
    (void) state;
    static const char *const ok[] = { "/a", "/root", "/home/agent/.cache", "/usr/local", "/a.b" };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        const char *what = NULL;
        if (!lz_sandbox_path_valid(ok[i], &what))
            fail_msg("sandbox path '%s' should be valid, refused: %s", ok[i], what ? what : "?");
    }
}

static void test_sandbox_path_refuses(void **state)
{
    (void) state;
    static const char *const bad[] = {
        "/",     "",   "a",   "~/a",  "{profile_dir}/a", "//", "//a", "/a/",
        "/a//b", "/.", "/..", "/a/.", "/a/../b",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *what = NULL;
        if (lz_sandbox_path_valid(bad[i], &what))
            fail_msg("sandbox path '%s' should be invalid", bad[i]);
        if (!what || !*what)
            fail_msg("sandbox path '%s' refused without a reason", bad[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_profile_name_accepts),
        cmocka_unit_test(test_profile_name_refuses),
        cmocka_unit_test(test_env_name_accepts),
        cmocka_unit_test(test_env_name_refuses),
        cmocka_unit_test(test_abs_components_accepts),
        cmocka_unit_test(test_abs_components_refuses),
        cmocka_unit_test(test_host_path_absolute),
        cmocka_unit_test(test_host_path_home),
        cmocka_unit_test(test_host_path_profile_dir),
        cmocka_unit_test(test_host_path_accepts_misc),
        cmocka_unit_test(test_host_path_refuses),
        cmocka_unit_test(test_host_path_refuses_extglob_and_process_substitution),
        cmocka_unit_test(test_sandbox_path_accepts),
        cmocka_unit_test(test_sandbox_path_refuses),
    };
    return cmocka_run_group_tests_name("grammar", tests, NULL, NULL);
}
