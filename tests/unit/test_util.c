/* SPDX-License-Identifier: Apache-2.0
 *
 * src/common/util.c: lz_text_printable, the escaping every name the sandbox
 * chose goes through before it reaches a terminal or a log line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/util.h"

static void expect(const char *in, const char *want)
{
    char *got = lz_text_printable(in);
    assert_string_equal(got, want);
    free(got);
}

static void test_plain_text_unchanged(void **state)
{
    (void) state;
    expect("", "");
    expect("sub/.git (moved to .git/lazaret-quarantine/1-2-3-sub-.git)",
           "sub/.git (moved to .git/lazaret-quarantine/1-2-3-sub-.git)");
    expect("répertoire/日本語", "répertoire/日本語"); /* valid UTF-8 stays readable */
}

static void test_controls_escaped(void **state)
{
    (void) state;
    expect("a\rb", "a\\x0db");
    expect("a\nb", "a\\x0ab");
    expect("\x1b[2K\x1b]52;c;cHduZWQ=\x07", "\\x1b[2K\\x1b]52;c;cHduZWQ=\\x07");
    expect("del\x7f", "del\\x7f");
    expect("back\\slash", "back\\slash");
    /* idempotent: what it returns it returns unchanged */
    char *once = lz_text_printable("a\x1b[2K\xe2\x80\xae\xff");
    expect(once, once);
    free(once);
}

static void test_c1_and_invalid_utf8_escaped(void **state)
{
    (void) state;
    expect("\xc2\x9b"
           "31m",
           "\\xc2\\x9b31m");        /* U+009B CSI */
    expect("\xc2\xa0", "\xc2\xa0"); /* U+00A0 is printable */
    expect("\xff\xfe", "\\xff\\xfe");
    expect("\xe2\x82", "\\xe2\\x82");          /* truncated sequence */
    expect("\xc0\xaf", "\\xc0\\xaf");          /* overlong '/' */
    expect("\xed\xa0\x80", "\\xed\\xa0\\x80"); /* surrogate */
}

static void test_format_characters_escaped(void **state)
{
    (void) state;
    expect("a\xe2\x80\xae"
           "b",
           "a\\xe2\\x80\\xaeb");                        /* U+202E RIGHT-TO-LEFT OVERRIDE */
    expect("\xe2\x80\x8b", "\\xe2\\x80\\x8b");          /* U+200B ZERO WIDTH SPACE */
    expect("\xe2\x81\xa6", "\\xe2\\x81\\xa6");          /* U+2066 LEFT-TO-RIGHT ISOLATE */
    expect("\xef\xbb\xbf", "\\xef\\xbb\\xbf");          /* U+FEFF */
    expect("\xd8\x9c", "\\xd8\\x9c");                   /* U+061C ARABIC LETTER MARK */
    expect("\xe2\x80\x94", "\xe2\x80\x94");             /* U+2014 EM DASH stays */
    expect("\xf3\xa0\x81\x81", "\\xf3\\xa0\\x81\\x81"); /* U+E0041 TAG LATIN CAPITAL A */
    expect("\xe3\x85\xa4", "\\xe3\\x85\\xa4");          /* U+3164 HANGUL FILLER */
    expect("\xc2\xad", "\\xc2\\xad");                   /* U+00AD SOFT HYPHEN */
}

static void test_null_is_empty(void **state)
{
    (void) state;
    char *got = lz_text_printable(NULL);
    assert_string_equal(got, "");
    free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_text_unchanged),
        cmocka_unit_test(test_controls_escaped),
        cmocka_unit_test(test_c1_and_invalid_utf8_escaped),
        cmocka_unit_test(test_format_characters_escaped),
        cmocka_unit_test(test_null_is_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
