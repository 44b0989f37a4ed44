/* SPDX-License-Identifier: Apache-2.0
 *
 * The escalation prompt's text (src/coordinator/prompt.c): nothing the
 * agent chose is interpreted by a terminal, every argument is its own
 * item, only the justification is ever cut, and visibly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/prompt.h"

/* No byte a terminal acts on: no C0/C1 control but the newlines between
 * lines, no DEL, no bidi or zero-width character. */
static void assert_inert(const char *t)
{
    for (const unsigned char *p = (const unsigned char *) t; *p; p++) {
        if (*p == '\n')
            continue;
        assert_true(*p >= 0x20 && *p != 0x7f);
    }
    assert_null(strstr(t, "\xe2\x80\xae")); /* U+202E RIGHT-TO-LEFT OVERRIDE */
    assert_null(strstr(t, "\xe2\x80\x8b")); /* U+200B ZERO WIDTH SPACE */
    assert_null(strstr(t, "\xc2\x9b"));     /* U+009B CSI */
}

static void test_hostile_justification_is_shown_escaped(void **state)
{
    (void) state;
    char *const argv[] = { (char *) "/usr/bin/git", (char *) "status", NULL };
    lz_prompt_fields f = { "bb",
                           "0123456789abcdef0123456789abcdef",
                           "/workspace",
                           argv,
                           2,
                           "\x1b[2J\x1b]0;owned\x07 ok \xe2\x80\xae"
                           "evil\xe2\x80\x8b\xc2\x9b",
                           0,
                           NULL,
                           NULL };
    char *t = lz_prompt_text(&f);
    assert_inert(t);
    assert_non_null(strstr(t, "\\x1b[2J\\x1b]0;owned\\x07 ok "));
    assert_non_null(strstr(t, "the agent says:"));
    free(t);
}

static void test_every_argument_is_its_own_quoted_item(void **state)
{
    (void) state;
    char *const argv[] = { (char *) "/bin/echo",
                           (char *) "a b",
                           (char *) "x; rm -rf /",
                           (char *) "it's",
                           (char *) "\\x1b",
                           (char *) "",
                           NULL };
    lz_prompt_fields f = { "bb", "s", "/workspace/sub", argv, 6, "", 0, NULL, NULL };
    char *t = lz_prompt_text(&f);
    assert_inert(t);
    assert_non_null(strstr(t, "executable:        '/bin/echo'\n"));
    assert_non_null(strstr(t, "argument 1:        'a b'\n"));
    assert_non_null(strstr(t, "argument 2:        'x; rm -rf /'\n"));
    assert_non_null(strstr(t, "argument 3:        'it\\'s'\n"));
    /* A backslash the agent typed is doubled: it cannot pass for an escape
     * Lazaret wrote. */
    assert_non_null(strstr(t, "argument 4:        '\\\\x1b'\n"));
    assert_non_null(strstr(t, "argument 5:        ''\n"));
    assert_non_null(strstr(t, "working directory: '/workspace/sub'\n"));
    assert_null(strstr(t, "the agent says"));
    free(t);
}

static void test_only_the_justification_is_cut(void **state)
{
    (void) state;
    char longarg[5000], why[2000];
    memset(longarg, 'a', sizeof(longarg) - 1);
    longarg[sizeof(longarg) - 1] = '\0';
    memset(why, 'w', sizeof(why) - 1);
    why[sizeof(why) - 1] = '\0';
    char *const argv[] = { (char *) "/bin/echo", longarg, NULL };
    lz_prompt_fields f = { "bb", "s", "/workspace", argv, 2, why, 0, NULL, NULL };
    char *t = lz_prompt_text(&f);
    char *shown = lz_prompt_item(longarg, 0);
    assert_non_null(strstr(t, shown)); /* the whole argument */
    free(shown);
    char expect[64];
    snprintf(expect, sizeof(expect), "… (%d more bytes not shown)",
             (int) (sizeof(why) - 1 - LZ_PROMPT_WHY_SHOWN));
    assert_non_null(strstr(t, expect));
    free(t);
}

static void test_cut_never_splits_a_character(void **state)
{
    (void) state;
    char s[LZ_PROMPT_WHY_SHOWN + 8];
    memset(s, 'x', LZ_PROMPT_WHY_SHOWN - 1);
    memcpy(s + LZ_PROMPT_WHY_SHOWN - 1, "\xc3\xa9zz", 5); /* é across the cut */
    char *item = lz_prompt_item(s, LZ_PROMPT_WHY_SHOWN);
    assert_null(strstr(item, "\\xc3")); /* not a half character escaped */
    assert_non_null(strstr(item, "more bytes not shown"));
    free(item);
}

/* Attack round i11c, C1: look-alike quotes and any other non-ASCII text
 * inside an item are escaped, so an argument cannot draw Lazaret's own
 * quoting or labels; the summary above the question names what runs; the
 * header carries the request's number. */
static void test_items_are_ascii_and_the_summary_names_the_program(void **state)
{
    (void) state;
    char *const argv[] = { (char *) "/usr/bin/dash", (char *) "-c",
                           (char *) "x \xca\xbc/usr/bin/make\xca\xbc caf\xc3\xa9", NULL };
    lz_prompt_fields f = { "bb", "s", "/workspace", argv, 3, "", 7, NULL, NULL };
    char *t = lz_prompt_text(&f);
    assert_non_null(strstr(t, "Host escalation request #7:"));
    assert_non_null(strstr(t, "'x \\xca\\xbc/usr/bin/make\\xca\\xbc caf\\xc3\\xa9'"));
    for (const char *p = t; *p; p++)
        if ((unsigned char) *p >= 0x80)
            /* the only non-ASCII Lazaret writes is its own cut mark */
            assert_true(strncmp(p, "\xe2\x80\xa6", 3) == 0 && (p += 2));
    assert_non_null(strstr(t, "  => runs '/usr/bin/dash' with 2 arguments\n"));
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hostile_justification_is_shown_escaped),
        cmocka_unit_test(test_every_argument_is_its_own_quoted_item),
        cmocka_unit_test(test_only_the_justification_is_cut),
        cmocka_unit_test(test_cut_never_splits_a_character),
        cmocka_unit_test(test_items_are_ascii_and_the_summary_names_the_program),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
