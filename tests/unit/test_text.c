/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests for src/common/text.c: the one UTF-8 decoder and the escaping
 * flavours not covered elsewhere (lz_text_printable: test_util.c;
 * lz_text_quoted_ascii: test_prompt.c; the YAML scalar: test_yaml.c).
 * Table-driven: each row an input and what must come out.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/text.h"

static void utf8_decoder_rules(void **state)
{
    (void) state;
    static const struct {
        const char *bytes;
        size_t n;   /* bytes offered */
        size_t len; /* expected sequence length, 0: refused */
        uint32_t cp;
    } rows[] = {
        { "A", 1, 1, 0x41 },
        { "\xc3\xa9", 2, 2, 0xe9 },
        { "\xe2\x82\xac", 3, 3, 0x20ac },
        { "\xf0\x9f\x98\x80", 4, 4, 0x1f600 },
        { "\xf4\x8f\xbf\xbf", 4, 4, 0x10ffff },
        { "\xc3\xa9", 1, 0, 0 },         /* truncated by n */
        { "\xc0\x80", 2, 0, 0 },         /* overlong NUL */
        { "\xe0\x80\xaf", 3, 0, 0 },     /* overlong '/' */
        { "\xed\xa0\x80", 3, 0, 0 },     /* surrogate U+D800 */
        { "\xf4\x90\x80\x80", 4, 0, 0 }, /* above U+10FFFF */
        { "\x80", 1, 0, 0 },             /* lone continuation */
        { "\xc3\x41", 2, 0, 0 },         /* bad continuation */
        { "\xf8\x88\x80\x80", 4, 0, 0 }, /* five-byte lead */
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        uint32_t cp = 0xdeadbeef;
        size_t len = lz_utf8_decode((const unsigned char *) rows[i].bytes, rows[i].n, &cp);
        assert_int_equal(len, rows[i].len);
        assert_int_equal(cp, rows[i].len ? rows[i].cp : 0xdeadbeef);
        assert_int_equal(lz_utf8_valid(rows[i].bytes, rows[i].n), rows[i].len == rows[i].n);
    }
}

static void line_ascii_keeps_one_printable_line(void **state)
{
    (void) state;
    static const struct {
        const char *in;
        size_t max;
        const char *out;
    } rows[] = {
        { "ok: runsc 2023", 80, "ok: runsc 2023" },
        { "first\nsecond", 80, "first" },
        { "\x1b[31mred", 80, "?[31mred" },
        { "caf\xc3\xa9", 80, "caf??" },
        { "abcdef", 3, "abc" },
        { "", 5, "" },
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char *s = lz_text_line_ascii(rows[i].in, rows[i].max);
        assert_string_equal(s, rows[i].out);
        free(s);
    }
}

static void shell_quote_survives_quotes(void **state)
{
    (void) state;
    static const struct {
        const char *in, *out;
    } rows[] = {
        { "plain", "'plain'" },
        { "it's", "'it'\\''s'" },
        { "", "''" },
        { "$(rm -rf ~) `x` \"y\"", "'$(rm -rf ~) `x` \"y\"'" },
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char *s = lz_text_shell_quote(rows[i].in);
        assert_string_equal(s, rows[i].out);
        free(s);
    }
}

/* Each flavour's output passes through lz_text_printable unchanged: what
 * one layer escaped, another escapes again without growing it. */
static void flavours_are_printable_fixed_points(void **state)
{
    (void) state;
    const char *in = "a\x1b]0;x\x07 \xe2\x80\xae b\xc2\x85 'q' \xff";
    char *outs[] = { lz_text_printable(in), lz_text_quoted_ascii(in, 0),
                     lz_text_line_ascii(in, 64) };
    for (size_t i = 0; i < sizeof(outs) / sizeof(outs[0]); i++) {
        char *again = lz_text_printable(outs[i]);
        assert_string_equal(again, outs[i]);
        free(again);
        free(outs[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(utf8_decoder_rules),
        cmocka_unit_test(line_ascii_keeps_one_printable_line),
        cmocka_unit_test(shell_quote_survives_quotes),
        cmocka_unit_test(flavours_are_printable_fixed_points),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
