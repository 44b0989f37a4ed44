/* SPDX-License-Identifier: Apache-2.0
 *
 * Strictness suite for the TOML 1.0 reader (src/config/toml.h).
 *
 * The first half is a table-driven corpus of malformed documents that
 * lz_toml_parse() must refuse, each with the 1-based line and column toml++
 * 3.3.0 reports (columns count code points, not bytes). Every document is
 * copied into an exactly sized heap buffer without a trailing NUL, so that a
 * read past `len` is caught by AddressSanitizer. The second half checks the
 * tree produced for accepted documents: types, values, string lengths, array
 * order, key order, source positions, and the lookup helpers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/toml.h"

/* ------------------------------------------------------------------------ */
/* Corpus of documents that must be refused                                  */
/* ------------------------------------------------------------------------ */

typedef struct bad_case {
    const char *name;
    const char *doc;
    size_t len;          /* explicit: documents may hold NUL or invalid bytes */
    unsigned line;       /* expected diag.line (1-based) */
    unsigned column;     /* expected diag.column, 0 when not pinned */
    const char *message; /* substring expected in diag.message, or NULL */
} bad_case;

/* sizeof() of the literal gives the length, embedded NULs included. */
#define BAD(name, doc, line, col)                                                                  \
    {                                                                                              \
        name, doc, sizeof(doc) - 1, line, col, NULL                                                \
    }
#define BADM(name, doc, line, col, msg)                                                            \
    {                                                                                              \
        name, doc, sizeof(doc) - 1, line, col, msg                                                 \
    }

static const bad_case bad_cases[] = {
    /* duplicate keys */
    BAD("dup_key", "a = 1\na = 2\n", 2, 5),
    BAD("dup_key_basic_quoted", "a = 1\n\"a\" = 2\n", 2, 7),
    BAD("dup_key_literal_quoted", "a = 1\n'a' = 2\n", 2, 7),
    BAD("dup_key_escaped_spelling", "\"\\u0061\" = 1\na = 2\n", 2, 5),
    BAD("dup_key_dotted", "a.\"b\" = 1\na.b = 2\n", 2, 7),
    BAD("dup_key_in_table", "[t]\nx = 1\ny = 2\nx = 3\n", 4, 5),
    BAD("dup_key_in_array_table", "[[a]]\nx = 1\nx = 2\n", 3, 5),
    BAD("dup_key_inline", "a = {b = 1, b = 2}\n", 1, 17),
    BAD("dup_key_inline_dotted", "a = {b.c = 1, b = 2}\n", 1, 19),

    /* duplicate tables and table redefinition */
    BAD("dup_table", "[a]\nx = 1\n[a]\ny = 2\n", 3, 1),
    BAD("dup_table_after_subtable", "[a]\n[a.b]\n[a]\n", 3, 1),
    BAD("dup_subtable", "[a]\n[a.b]\n[a.b]\n", 3, 1),
    BAD("dup_table_quoted_spelling", "[a]\n[\"a\"]\n", 2, 1),
    BAD("header_over_integer", "a = 1\n[a]\n", 2, 1),
    BAD("header_over_dotted_integer", "a.b = 1\n[a.b]\n", 2, 1),
    BAD("header_over_dotted_table", "a.b.c = 1\n[a.b]\n", 2, 1),
    BAD("header_over_root_dotted_table", "a.b = 1\n[a]\n", 2, 1),
    BAD("header_over_nested_dotted_table", "[t1]\nt2.t3.v = 0\n[t1.t2]\n", 3, 1),
    BAD("header_over_string", "[fruit]\ntype = \"apple\"\n[fruit.type]\napple = \"yes\"\n", 3, 1),
    BAD("dotted_extends_integer", "a.b = 1\na.b.c = 2\n", 2, 3),
    BAD("key_over_dotted_table", "a.b = 1\na = {c = 1}\n", 2, 5),
    BAD("dotted_into_header_table_1", "[a.b.c]\nz = 9\n[a]\nb.c.t = 1\n", 4, 3),
    BAD("dotted_into_header_table_2", "[a.b.c.d]\nz = 9\n[a]\nb.c.d.k.t = 1\n", 4, 5),

    /* arrays of tables versus tables and static arrays */
    BAD("table_over_array_of_tables", "[[a]]\n[a]\n", 2, 1),
    BAD("array_of_tables_over_table", "[a]\n[[a]]\n", 2, 1),
    BAD("array_of_tables_over_static_array", "a = []\n[[a]]\n", 2, 1),
    BAD("array_of_tables_over_inline_array", "a = [{b = 1}]\n[[a]]\n", 2, 1),
    BAD("array_of_tables_over_implicit_table", "[[albums.songs]]\nname = 1\n[[albums]]\nname = 2\n",
        3, 1),
    BAD("dotted_over_array_of_tables", "[[tab.arr]]\n[tab]\narr.val1 = 1\n", 3, 1),

    /* inline tables are closed once written */
    BAD("inline_extended_by_dotted_key", "a = {b = 1}\na.c = 2\n", 2, 1),
    BAD("inline_extended_by_header", "a = {b = 1}\n[a.c]\n", 2, 7),
    BAD("inline_redefined_by_header", "a = {b = 1}\n[a]\n", 2, 1),
    BAD("empty_inline_extended_by_header", "a = {}\n[a.b]\n", 2, 7),
    BAD("empty_inline_extended_by_array_of_tables", "a = {}\n[[a.b]]\n", 2, 9),
    BAD("empty_inline_extended_by_dotted_key", "a = {}\na.b = 1\n", 2, 1),
    BAD("inline_dotted_extended_by_header", "a = {b.c = 1}\n[a.b]\n", 2, 7),
    BAD("inline_inner_extended_in_place", "tab = { inner = { dog = 1 }, inner.cat = 2 }\n", 1, 30),
    BAD("inline_nested_dotted_clash",
        "tbl = { fruit = { apple.color = 1 }, fruit.apple.texture = { smooth = true } }\n", 1, 38),

    /* TOML 1.1-only syntax stays refused */
    BAD("v11_unicode_bare_key", "\xc3\xa9 = 1\n", 1, 1),
    BAD("v11_unicode_bare_key_in_header", "[\xc2\xa7]\n", 1, 2),
    BADM("v11_escape_e", "a = \"\\e\"\n", 1, 7, "TOML 1.0.0"),
    BADM("v11_escape_x", "a = \"\\x41\"\n", 1, 7, "TOML 1.0.0"),
    BAD("v11_time_without_seconds", "a = 07:32\n", 1, 10),
    BAD("v11_local_datetime_without_seconds", "a = 1979-05-27T07:32\n", 1, 21),
    BAD("v11_datetime_without_seconds_z", "a = 1987-07-05T17:45Z\n", 1, 21),
    BAD("v11_inline_newline_after_comma", "a = {b = 1,\n c = 2}\n", 1, 12),
    BAD("v11_inline_newline_after_brace", "t = {\na = 1}\n", 1, 6),
    BAD("v11_inline_comment", "t = {a = 1 # c\n}\n", 1, 12),
    BAD("v11_inline_trailing_comma", "a = {b = 1,}\n", 1, 12),

    /* 64-bit integer range */
    BADM("int_overflow_decimal", "a = 9223372036854775808\n", 1, 24, "64 bits"),
    BADM("int_underflow_decimal", "a = -9223372036854775809\n", 1, 25, "64 bits"),
    BADM("int_overflow_hex", "a = 0x8000000000000000\n", 1, 23, "64 bits"),
    BADM("int_overflow_octal", "a = 0o1000000000000000000000\n", 1, 29, "64 bits"),
    BADM("int_overflow_binary",
         "a = 0b1000000000000000000000000000000000000000000000000000000000000000\n", 1, 71,
         "64 bits"),

    /* leading zeros */
    BAD("leading_zero_int", "a = 01\n", 1, 7),
    BAD("leading_zero_negative_int", "a = -01\n", 1, 8),
    BAD("leading_zero_float", "a = 01.5\n", 1, 6),
    BAD("leading_zero_underscore", "a = 0_0\n", 1, 8),

    /* control characters in strings, comments and between tokens */
    BAD("ctl_0x01_in_basic_string", "a = \"x\x01y\"\n", 1, 7),
    BAD("ctl_backspace_in_basic_string",
        "a = \"a\x08"
        "b\"\n",
        1, 7),
    BAD("ctl_del_in_basic_string", "a = \"x\x7fy\"\n", 1, 7),
    BAD("ctl_del_in_literal_string", "a = 'x\x7fy'\n", 1, 7),
    BAD("ctl_0x1f_in_multiline_basic",
        "a = \"\"\"a\x1f"
        "b\"\"\"\n",
        1, 9),
    BAD("ctl_0x01_in_multiline_literal", "a = '''x\x01'''\n", 1, 9),
    BAD("ctl_del_in_multiline_literal",
        "a = '''a\x7f"
        "b'''\n",
        1, 9),
    BAD("ctl_nul_in_basic_string", "a = \"x\x00y\"\n", 1, 7),
    BAD("ctl_newline_in_basic_string", "a = \"ab\nc\"\n", 1, 8),
    BAD("ctl_0x01_in_comment", "# x\x01y\na = 1\n", 1, 4),
    BAD("ctl_del_in_comment", "# x\x7fy\na = 1\n", 1, 4),
    BAD("ctl_nul_in_comment", "# x\x00y\n", 1, 4),
    BAD("ctl_0x01_in_header_comment", "[a] # x\x01\n", 1, 8),
    BAD("ctl_bare_cr_in_comment", "# x\ry\na = 1\n", 1, 5),
    BAD("ctl_bare_cr_at_eof", "# comment\r", 1, 11),
    BAD("ctl_bare_cr_line_break", "a = 1\rb = 2\n", 1, 7),
    BAD("ctl_bare_cr_in_multiline_string", "a = \"\"\"x\ry\"\"\"\n", 1, 10),
    BAD("ctl_vertical_tab", "a = 1\x0b\n", 1, 6),
    BAD("ctl_form_feed", "a = 1\x0c\n", 1, 6),
    BAD("ctl_nul_in_bare_key", "a\x00 = 1\n", 1, 2),

    /* non-ASCII whitespace is not whitespace */
    BAD("nbsp_after_value", "a = 1\xc2\xa0\n", 1, 6),
    BAD("line_separator_as_newline",
        "a = 1\xe2\x80\xa8"
        "b = 2\n",
        1, 6),
    BAD("bom_not_at_start",
        "a = 1\n\xef\xbb\xbf"
        "b = 2\n",
        2, 1),

    /* invalid UTF-8 in strings */
    BAD("utf8_overlong_in_string", "a = \"\xc0\xaf\"\n", 1, 5),
    BAD("utf8_overlong3_in_string", "a = \"\xe0\x80\xaf\"\n", 1, 5),
    BAD("utf8_overlong4_in_string", "a = \"\xf0\x80\x80\xaf\"\n", 1, 5),
    BAD("utf8_surrogate_in_string", "a = \"\xed\xa0\x80\"\n", 1, 5),
    BAD("utf8_truncated_in_string", "a = \"\xe2\x82\"\n", 1, 5),
    BAD("utf8_truncated_mid_string", "a = \"\xe2\x82 x\"\n", 1, 5),
    BAD("utf8_ff_in_string", "a = \"\xff\"\n", 1, 5),
    BAD("utf8_lone_continuation_in_string", "a = \"\x80\"\n", 1, 5),
    BAD("utf8_above_10ffff_in_string", "a = \"\xf4\x90\x80\x80\"\n", 1, 5),
    BAD("utf8_f5_lead_in_string", "a = \"\xf5\x80\x80\x80\"\n", 1, 5),
    BAD("utf8_five_byte_in_string", "a = \"\xf8\x88\x80\x80\x80\"\n", 1, 5),
    BAD("utf8_ff_in_literal_string", "a = '\xff'\n", 1, 5),
    BAD("utf8_overlong_in_multiline_literal", "a = '''\xc0\xaf'''\n", 1, 7),
    BAD("utf8_surrogate_in_multiline_basic", "a = \"\"\"\xed\xbf\xbf\"\"\"\n", 1, 7),
    /* ... in keys */
    BAD("utf8_overlong_in_quoted_key", "\"\xc0\xaf\" = 1\n", 1, 1),
    BAD("utf8_surrogate_in_literal_key", "'\xed\xa0\x80' = 1\n", 1, 1),
    BAD("utf8_ff_as_bare_key", "\xff = 1\n", 1, 1),
    BAD("utf8_ff_in_header_key", "[\"\xff\"]\n", 1, 2),
    /* ... in comments */
    BAD("utf8_overlong_in_comment", "# \xc0\xaf\na = 1\n", 1, 2),
    BAD("utf8_surrogate_in_comment", "# \xed\xa0\x80\n", 1, 2),
    BAD("utf8_ff_in_comment", "# \xff\n", 1, 2),
    BAD("utf8_truncated_at_eof", "# \xe2\x82", 1, 2),
    BAD("utf8_truncated_lead_at_eof", "# x\n\xc3", 1, 4),
    /* ... and other encodings */
    BAD("utf16le_with_bom",
        "\xff\xfe"
        "a\x00 \x00=\x00 \x00"
        "1\x00\n\x00",
        1, 1),

    /* escapes */
    BADM("escape_u0000_in_string", "a = \"x\\u0000y\"\n", 1, 5, "NUL character in a string"),
    BADM("escape_U00000000_in_string", "a = \"\\U00000000\"\n", 1, 5, "NUL character in a string"),
    BADM("escape_u0000_in_multiline", "a = \"\"\"\\u0000\"\"\"\n", 1, 5,
         "NUL character in a string"),
    BADM("escape_u0000_in_nested_array", "[t]\nx = [\"ok\", \"\\u0000\"]\n", 2, 12,
         "NUL character in a string"),
    BADM("escape_u0000_in_quoted_key", "\"a\\u0000b\" = 1\n", 1, 1, "NUL character in a key"),
    BADM("escape_u0000_in_header_key", "[\"a\\u0000\"]\n", 1, 2, "NUL character in a key"),
    BADM("escape_u0000_in_array_table_key", "[[\"\\u0000\"]]\n", 1, 3, "NUL character in a key"),
    BADM("escape_u0000_in_inline_key", "a = {\"\\u0000\" = 1}\n", 1, 6, "NUL character in a key"),
    BADM("escape_high_surrogate", "a = \"\\uD800\"\n", 1, 12, "surrogates"),
    BADM("escape_low_surrogate", "a = \"\\uDFFF\"\n", 1, 12, "surrogates"),
    BAD("escape_above_10ffff", "a = \"\\U00110000\"\n", 1, 16),
    BAD("escape_ffffffff", "a = \"\\UFFFFFFFF\"\n", 1, 16),
    BAD("escape_surrogate_pair_as_U", "a = \"\\UD800DC00\"\n", 1, 16),
    BAD("escape_short_u", "a = \"\\u12\"\n", 1, 10),
    BAD("escape_non_hex_u", "a = \"\\uZZZZ\"\n", 1, 8),
    BAD("escape_unknown_q", "a = \"\\q\"\n", 1, 7),
    BAD("escape_slash", "a = \"\\/\"\n", 1, 7),
    BAD("escape_line_ending_in_basic", "a = \"abc\\\n def\"\n", 1, 10),
    BAD("escape_backslash_space_not_at_eol", "a = \"\"\"a\\ b\"\"\"\n", 1, 11),

    /* unterminated strings, arrays and tables */
    BAD("unterminated_basic", "a = \"abc\n", 1, 9),
    BAD("unterminated_basic_at_eof", "a = \"abc", 1, 9),
    BAD("unterminated_literal", "a = 'abc\n", 1, 9),
    BAD("unterminated_multiline_basic", "a = \"\"\"abc\n\n", 2, 2),
    BAD("unterminated_multiline_literal", "a = '''abc\n\n", 2, 2),
    BAD("unterminated_quoted_header", "[\"where will it end]\n", 1, 21),
    BAD("unterminated_array", "a = [1, 2\n", 1, 11),
    BAD("unterminated_inline_table", "x = [{ key = 42\n", 1, 16),
    BAD("unterminated_array_table_header", "[[a]\n", 1, 5),
    BAD("multiline_basic_six_quotes", "a = \"\"\"a\"\"\"\"\"\"\n", 1, 14),
    BAD("multiline_literal_six_quotes", "a = '''6 apostrophes: ''''''\n", 1, 28),

    /* missing keys, values and separators */
    BAD("missing_value", "a =\n", 1, 4),
    BAD("missing_value_at_eof", "a =", 1, 4),
    BAD("missing_equals", "a\n", 1, 2),
    BAD("missing_key", "= 1\n", 1, 1),
    BAD("key_split_by_newline", "barekey\n= 123\n", 1, 8),
    BAD("two_equals", "key= = 1\n", 1, 6),
    BAD("key_starts_with_dot", ".key = 1\n", 1, 1),
    BAD("partially_quoted_key", "partial\"quoted\" = 5\n", 1, 8),
    BAD("hash_in_bare_key", "a# = 1\n", 1, 2),
    BAD("multiline_basic_key", "\"\"\"long\nkey\"\"\" = 1\n", 1, 1),
    BAD("multiline_basic_key_one_line", "\"\"\"key\"\"\" = 1\n", 1, 1),
    BAD("multiline_literal_key", "'''key''' = 1\n", 1, 1),
    BAD("two_pairs_on_one_line", "a = 1 b = 2\n", 1, 7),
    BAD("text_after_integer", "a = 42 the ultimate\n", 1, 8),
    BAD("bare_word_value", "a = yes\n", 1, 5),

    /* booleans are lowercase and exact */
    BAD("bool_True", "a = True\n", 1, 5),
    BAD("bool_TRUE", "a = TRUE\n", 1, 5),
    BAD("bool_truee", "a = truee\n", 1, 9),
    BAD("bool_fals", "a = fals\n", 1, 9),
    BAD("bool_t", "a = t\n", 1, 6),

    /* table headers */
    BAD("header_empty", "[]\n", 1, 2),
    BAD("header_trailing_dot", "[a.]\n", 1, 4),
    BAD("header_double_dot", "[a..b]\n", 1, 4),
    BAD("header_with_pair", "[a] b = 1\n", 1, 5),
    BAD("array_table_header_with_pair", "[[agencies]] owner = \"S\"\n", 1, 14),
    BAD("header_spaced_open_brackets", "[ [table]]\n", 1, 3),
    BAD("header_spaced_close_brackets", "[[table] ]\n", 1, 9),
    BAD("header_space_in_bare_key", "[invalid key]\n", 1, 10),
    BAD("header_hash", "[key#group]\n", 1, 5),
    BAD("header_nested_open", "[a[b]\nzyx = 42\n", 1, 3),
    BAD("header_equals", "[name=bad]\n", 1, 6),

    /* arrays and inline tables */
    BAD("array_double_comma", "a = [1,,2]\n", 1, 8),
    BAD("array_only_comma", "a = [,]\n", 1, 6),
    BAD("array_missing_comma", "a = [1 2]\n", 1, 8),
    BAD("array_bare_text", "array = [\n  \"Entry 1\",\n  I don't belong,\n]\n", 3, 3),
    BAD("inline_only_comma", "t = {,}\n", 1, 6),
    BAD("inline_double_comma", "t = {a = 1,,b = 2}\n", 1, 12),
    BAD("inline_missing_comma", "t = {a = 1 b = 2}\n", 1, 12),

    /* integers and floats */
    BAD("int_double_underscore", "a = 1__0\n", 1, 7),
    BAD("int_leading_underscore", "a = _1\n", 1, 5),
    BAD("int_trailing_underscore", "a = 1_\n", 1, 6),
    BAD("int_double_sign", "a = --1\n", 1, 6),
    BAD("hex_with_plus", "a = +0x1\n", 1, 5),
    BAD("hex_with_minus", "a = -0x1\n", 1, 5),
    BAD("hex_uppercase_prefix", "a = 0X1\n", 1, 6),
    BAD("hex_underscore_after_prefix", "a = 0x_1\n", 1, 7),
    BAD("hex_bad_digit", "a = 0xg\n", 1, 7),
    BAD("octal_with_plus", "a = +0o1\n", 1, 7),
    BAD("octal_bad_digit", "a = 0o8\n", 1, 7),
    BAD("binary_uppercase_prefix", "a = 0B1\n", 1, 6),
    BAD("binary_underscore_after_prefix", "a = 0b_1\n", 1, 7),
    BAD("binary_bad_digit", "a = 0b2\n", 1, 7),
    BAD("float_no_integer_part", "a = .5\n", 1, 5),
    BAD("float_no_fraction", "a = 5.\n", 1, 7),
    BAD("float_negative_no_fraction", "a = -1.\n", 1, 8),
    BAD("float_plus_dot", "a = +.1\n", 1, 6),
    BAD("float_dot_exponent", "a = 1.e5\n", 1, 7),
    BAD("float_double_e", "a = 1ee2\n", 1, 7),
    BAD("float_fractional_exponent", "a = 1e2.3\n", 1, 8),
    BAD("float_underscore_after_dot", "a = 1._0\n", 1, 7),
    BAD("float_underscore_before_dot", "a = 1_.2\n", 1, 7),
    BAD("float_underscore_exponent", "a = 1.0e_1\n", 1, 9),
    BAD("float_trailing_underscore_exponent", "a = 1e23_\n", 1, 10),
    BAD("float_NaN", "a = NaN\n", 1, 5),
    BAD("float_in", "a = in\n", 1, 7),
    BAD("float_out_of_range", "a = 1e400\n", 1, 10),

    /* dates and times */
    BAD("date_feb_30", "a = 1979-02-30\n", 1, 15),
    BAD("date_feb_29_non_leap", "a = 2023-02-29\n", 1, 15),
    BAD("date_month_13", "a = 1979-13-01\n", 1, 12),
    BAD("date_month_0", "a = 1987-00-07\n", 1, 12),
    BAD("date_day_0", "a = 1987-07-00\n", 1, 15),
    BAD("date_one_digit_month", "a = 1987-7-05T17:45:00Z\n", 1, 11),
    BAD("datetime_no_separator", "a = 1987-07-0517:45:00Z\n", 1, 5),
    BAD("datetime_trailing_t", "a = 1987-07-05T\n", 1, 5),
    BAD("datetime_hour_25", "a = 1979-05-27T25:00:00\n", 1, 18),
    BAD("time_hour_24", "a = 24:00:00\n", 1, 7),
    BAD("datetime_second_60", "a = 1979-05-27T07:32:60Z\n", 1, 24),
    BAD("datetime_one_digit_second", "a = 1987-07-05T17:45:0Z\n", 1, 23),
    BAD("datetime_empty_fraction", "a = 1979-05-27T07:32:00.\n", 1, 25),
    BAD("datetime_empty_fraction_offset", "a = 1979-05-27T07:32:00.-07:00\n", 1, 25),
    BAD("time_empty_fraction", "a = 17:45:56.Z\n", 1, 5),
    BAD("datetime_offset_hour_24", "a = 1979-05-27T07:32:00+24:00\n", 1, 27),
    BAD("datetime_offset_minute_60", "a = 1987-07-05T17:45:00+00:60\n", 1, 30),
    BAD("datetime_offset_no_colon", "a = 1979-05-27T07:32:00+0700\n", 1, 27),
    BAD("datetime_trailing_text", "a = 1979-05-27T07:32:00Zjunk\n", 1, 25),
};

/* Print text on one line with control bytes escaped (TAP output is
 * line-oriented and diagnostics may echo document bytes). */
static void print_escaped(const char *s)
{
    for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            print_message("\\x%02x", *p);
        else
            print_message("%c", *p);
    }
}

/* Parse a copy of buf[0..len) held in an exactly sized allocation. */
static int parse_exact(const char *buf, size_t len, lz_toml_node **ret, lz_toml_diag *diag)
{
    char *copy = malloc(len ? len : 1);
    assert_non_null(copy);
    if (len)
        memcpy(copy, buf, len);
    int r = lz_toml_parse(copy, len, ret, diag);
    free(copy);
    return r;
}

static void test_refused(void **state)
{
    const bad_case *c = *state;
    lz_toml_node sentinel_node;
    lz_toml_node *root = &sentinel_node;
    lz_toml_diag diag;
    memset(&diag, 0xA5, sizeof(diag));

    int r = parse_exact(c->doc, c->len, &root, &diag);
    if (r == 0) {
        print_message("# %s: accepted, expected a refusal at %u:%u\n", c->name, c->line, c->column);
        lz_toml_free(root);
        fail();
    }
    assert_int_equal(r, -1);
    assert_ptr_equal(root, &sentinel_node); /* *ret_root untouched */

    assert_true(memchr(diag.message, '\0', sizeof(diag.message)) != NULL);
    assert_true(diag.message[0] != '\0');
    if (diag.line != c->line || (c->column && diag.column != c->column) ||
        (c->message && !strstr(diag.message, c->message))) {
        print_message("# %s: refused at %u:%u \"", c->name, diag.line, diag.column);
        print_escaped(diag.message);
        print_message("\", expected %u:%u%s%s\n", c->line, c->column, c->message ? " with " : "",
                      c->message ? c->message : "");
        fail();
    }
}

/* ------------------------------------------------------------------------ */
/* Accepted documents                                                        */
/* ------------------------------------------------------------------------ */

/* Invariants of every tree: tables strictly sorted by key bytes, strings and
 * keys NUL-free with the stated length, positions known. */
static void check_tree(const lz_toml_node *n)
{
    assert_non_null(n);
    assert_true(n->line >= 1);
    assert_true(n->column >= 1);
    switch (n->type) {
    case LZ_TOML_TABLE:
        assert_true(n->u.table.count == 0 || n->u.table.entries != NULL);
        for (size_t i = 0; i < n->u.table.count; i++) {
            const lz_toml_entry *e = &n->u.table.entries[i];
            assert_non_null(e->key);
            assert_true(e->line >= 1);
            assert_true(e->column >= 1);
            if (i > 0)
                assert_true(strcmp(n->u.table.entries[i - 1].key, e->key) < 0);
            check_tree(e->value);
        }
        break;
    case LZ_TOML_ARRAY:
        assert_true(n->u.array.count == 0 || n->u.array.items != NULL);
        for (size_t i = 0; i < n->u.array.count; i++)
            check_tree(n->u.array.items[i]);
        break;
    case LZ_TOML_STRING:
        assert_non_null(n->u.string.bytes);
        assert_int_equal(strlen(n->u.string.bytes), n->u.string.len);
        break;
    case LZ_TOML_INTEGER:
    case LZ_TOML_FLOAT:
    case LZ_TOML_BOOLEAN:
    case LZ_TOML_DATETIME:
    case LZ_TOML_DATE:
    case LZ_TOML_TIME:
    default:
        break;
    }
}

static lz_toml_node *parse_ok_n(const char *doc, size_t len)
{
    lz_toml_node *root = NULL;
    lz_toml_diag diag;
    memset(&diag, 0, sizeof(diag));
    if (parse_exact(doc, len, &root, &diag) != 0) {
        print_message("# refused at %u:%u: ", diag.line, diag.column);
        print_escaped(diag.message);
        print_message("\n");
        fail();
    }
    assert_non_null(root);
    assert_int_equal(root->type, LZ_TOML_TABLE);
    check_tree(root);
    return root;
}

#define PARSE_OK(doc) parse_ok_n(doc, sizeof(doc) - 1)

/* What the lookup helpers return after fail() (which does not return; the
 * objects only keep compilers from seeing a NULL dereference). */
static lz_toml_node missing_node = { .type = LZ_TOML_TABLE };
static lz_toml_entry missing_entry = { .key = (char *) "", .value = &missing_node };

/* The entry for key in table t (asserting it exists). */
static const lz_toml_entry *entry(const lz_toml_node *t, const char *key)
{
    assert_non_null(t);
    assert_int_equal(t->type, LZ_TOML_TABLE);
    for (size_t i = 0; i < t->u.table.count; i++)
        if (strcmp(t->u.table.entries[i].key, key) == 0)
            return &t->u.table.entries[i];
    print_message("# key \"%s\" missing\n", key);
    fail();
    return &missing_entry;
}

/* The value for key in table t, which must have type `type`. */
static const lz_toml_node *get(const lz_toml_node *t, const char *key, lz_toml_type type)
{
    const lz_toml_node *v = lz_toml_get(t, key);
    if (!v) {
        print_message("# key \"%s\" missing\n", key);
        fail();
        return &missing_node;
    }
    if (v->type != type) {
        print_message("# key \"%s\" is a %s, expected a %s\n", key, lz_toml_type_name(v->type),
                      lz_toml_type_name(type));
        fail();
    }
    return v;
}

static const lz_toml_node *item(const lz_toml_node *a, size_t i, lz_toml_type type)
{
    assert_non_null(a);
    assert_int_equal(a->type, LZ_TOML_ARRAY);
    assert_true(i < a->u.array.count);
    assert_int_equal(a->u.array.items[i]->type, type);
    return a->u.array.items[i];
}

static void assert_string(const lz_toml_node *n, const char *bytes, size_t len)
{
    assert_int_equal(n->type, LZ_TOML_STRING);
    assert_int_equal(n->u.string.len, len);
    assert_memory_equal(n->u.string.bytes, bytes, len);
    assert_int_equal(n->u.string.bytes[len], '\0');
}

#define ASSERT_STRING(n, lit) assert_string(n, lit, sizeof(lit) - 1)

static void assert_pos(unsigned line, unsigned column, unsigned want_line, unsigned want_column)
{
    assert_int_equal(line, want_line);
    assert_int_equal(column, want_column);
}

static void test_empty_document(void **state)
{
    (void) state;
    static const char *const docs[] = { "", "\n", "   \t", "# only a comment", "\n\n# c\r\n  \n" };
    for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
        lz_toml_node *root = parse_ok_n(docs[i], strlen(docs[i]));
        assert_int_equal(root->u.table.count, 0);
        assert_null(lz_toml_get(root, "a"));
        lz_toml_free(root);
    }
}

static void test_value_types(void **state)
{
    (void) state;
    lz_toml_node *root = PARSE_OK("s = \"x\"\n"
                                  "i = 42\n"
                                  "f = 3.5\n"
                                  "b = true\n"
                                  "d = 1979-05-27\n"
                                  "t = 07:32:00.5\n"
                                  "odt = 1979-05-27T07:32:00-07:00\n"
                                  "ldt = 1979-05-27 07:32:00\n"
                                  "zdt = 1979-05-27t07:32:00z\n"
                                  "a = []\n"
                                  "it = {}\n"
                                  "[tbl]\n");
    assert_int_equal(root->u.table.count, 12);
    ASSERT_STRING(get(root, "s", LZ_TOML_STRING), "x");
    assert_int_equal(get(root, "i", LZ_TOML_INTEGER)->u.integer, 42);
    assert_true(get(root, "f", LZ_TOML_FLOAT)->u.floating == 3.5);
    assert_true(get(root, "b", LZ_TOML_BOOLEAN)->u.boolean);
    get(root, "d", LZ_TOML_DATE);
    get(root, "t", LZ_TOML_TIME);
    get(root, "odt", LZ_TOML_DATETIME);
    get(root, "ldt", LZ_TOML_DATETIME);
    get(root, "zdt", LZ_TOML_DATETIME);
    assert_int_equal(get(root, "a", LZ_TOML_ARRAY)->u.array.count, 0);
    assert_int_equal(get(root, "it", LZ_TOML_TABLE)->u.table.count, 0);
    assert_int_equal(get(root, "tbl", LZ_TOML_TABLE)->u.table.count, 0);
    lz_toml_free(root);
}

static void test_floats(void **state)
{
    (void) state;
    lz_toml_node *root = PARSE_OK("a = 1e+05\nb = -1E-5\nc = 6.626e-34\nd = -0.0\n"
                                  "e = inf\nf = -inf\ng = nan\nh = +nan\ni = 1e05\nj = 1.0_0\n"
                                  "k = 224_617.445_991_228\n");
    assert_true(get(root, "a", LZ_TOML_FLOAT)->u.floating == 1e5);
    assert_true(get(root, "b", LZ_TOML_FLOAT)->u.floating == -1e-5);
    assert_true(get(root, "c", LZ_TOML_FLOAT)->u.floating == 6.626e-34);
    double d = get(root, "d", LZ_TOML_FLOAT)->u.floating;
    assert_true(d == 0.0 && signbit(d));
    assert_true(isinf(get(root, "e", LZ_TOML_FLOAT)->u.floating));
    assert_true(get(root, "e", LZ_TOML_FLOAT)->u.floating > 0);
    assert_true(get(root, "f", LZ_TOML_FLOAT)->u.floating < 0);
    assert_true(isnan(get(root, "g", LZ_TOML_FLOAT)->u.floating));
    assert_true(isnan(get(root, "h", LZ_TOML_FLOAT)->u.floating));
    assert_true(get(root, "i", LZ_TOML_FLOAT)->u.floating == 1e5);
    assert_true(get(root, "j", LZ_TOML_FLOAT)->u.floating == 1.0);
    assert_true(get(root, "k", LZ_TOML_FLOAT)->u.floating == 224617.445991228);
    lz_toml_free(root);
}

static void test_integers(void **state)
{
    (void) state;
    lz_toml_node *root =
        PARSE_OK("max = 9223372036854775807\n"
                 "min = -9223372036854775808\n"
                 "hexmax = 0x7fffffffffffffff\n"
                 "octmax = 0o777777777777777777777\n"
                 "binmax = 0b111111111111111111111111111111111111111111111111111111111111111\n"
                 "hex = 0xDEAD_beef\n"
                 "oct = 0o755\n"
                 "bin = 0b1010\n"
                 "us = 1_000_000\n"
                 "plus = +17\n"
                 "negzero = -0\n"
                 "pluszero = +0\n"
                 "zero = 0\n");
    assert_int_equal(get(root, "max", LZ_TOML_INTEGER)->u.integer, INT64_MAX);
    assert_true(get(root, "min", LZ_TOML_INTEGER)->u.integer == INT64_MIN);
    assert_int_equal(get(root, "hexmax", LZ_TOML_INTEGER)->u.integer, INT64_MAX);
    assert_int_equal(get(root, "octmax", LZ_TOML_INTEGER)->u.integer, INT64_MAX);
    assert_int_equal(get(root, "binmax", LZ_TOML_INTEGER)->u.integer, INT64_MAX);
    assert_int_equal(get(root, "hex", LZ_TOML_INTEGER)->u.integer, 0xDEADBEEF);
    assert_int_equal(get(root, "oct", LZ_TOML_INTEGER)->u.integer, 0755);
    assert_int_equal(get(root, "bin", LZ_TOML_INTEGER)->u.integer, 10);
    assert_int_equal(get(root, "us", LZ_TOML_INTEGER)->u.integer, 1000000);
    assert_int_equal(get(root, "plus", LZ_TOML_INTEGER)->u.integer, 17);
    assert_int_equal(get(root, "negzero", LZ_TOML_INTEGER)->u.integer, 0);
    assert_int_equal(get(root, "pluszero", LZ_TOML_INTEGER)->u.integer, 0);
    assert_int_equal(get(root, "zero", LZ_TOML_INTEGER)->u.integer, 0);
    lz_toml_free(root);
}

static void test_booleans(void **state)
{
    (void) state;
    lz_toml_node *root = PARSE_OK("t = true\nf = false\narr = [true, false, true]\n");
    assert_true(get(root, "t", LZ_TOML_BOOLEAN)->u.boolean);
    assert_false(get(root, "f", LZ_TOML_BOOLEAN)->u.boolean);
    const lz_toml_node *arr = get(root, "arr", LZ_TOML_ARRAY);
    assert_int_equal(arr->u.array.count, 3);
    assert_true(item(arr, 0, LZ_TOML_BOOLEAN)->u.boolean);
    assert_false(item(arr, 1, LZ_TOML_BOOLEAN)->u.boolean);
    assert_true(item(arr, 2, LZ_TOML_BOOLEAN)->u.boolean);
    lz_toml_free(root);
}

static void test_strings(void **state)
{
    (void) state;
    lz_toml_node *root = PARSE_OK("empty = \"\"\n"
                                  "empty_literal = ''\n"
                                  "escapes = \"\\b\\t\\n\\f\\r\\\"\\\\\"\n"
                                  "u4 = \"\\u00e9\"\n"
                                  "u8 = \"\\U0001F600\"\n"
                                  "umax = \"\\U0010FFFF\"\n"
                                  "raw = \"\xc3\xa9\xe2\x88\x80\xf0\x9f\x98\x80\"\n"
                                  "nonchar = \"\xef\xbf\xbe\"\n"
                                  "tab = \"a\tb\"\n"
                                  "literal = 'C:\\Users\\x \"q\"'\n"
                                  "ml = \"\"\"\nline1\nline2\"\"\"\n"
                                  "ml_crlf = \"\"\"\r\nx\r\ny\"\"\"\n"
                                  "ml_join = \"\"\"a \\\n   \t  b\\   \n c\"\"\"\n"
                                  "ml_quotes = \"\"\"a\"\"\"\"\"\n"
                                  "mll = '''\nraw \\n\n'''\n"
                                  "mll_quote = '''a''''\n");
    ASSERT_STRING(get(root, "empty", LZ_TOML_STRING), "");
    ASSERT_STRING(get(root, "empty_literal", LZ_TOML_STRING), "");
    ASSERT_STRING(get(root, "escapes", LZ_TOML_STRING), "\b\t\n\f\r\"\\");
    ASSERT_STRING(get(root, "u4", LZ_TOML_STRING), "\xc3\xa9");
    ASSERT_STRING(get(root, "u8", LZ_TOML_STRING), "\xf0\x9f\x98\x80");
    ASSERT_STRING(get(root, "umax", LZ_TOML_STRING), "\xf4\x8f\xbf\xbf");
    ASSERT_STRING(get(root, "raw", LZ_TOML_STRING), "\xc3\xa9\xe2\x88\x80\xf0\x9f\x98\x80");
    ASSERT_STRING(get(root, "nonchar", LZ_TOML_STRING), "\xef\xbf\xbe");
    ASSERT_STRING(get(root, "tab", LZ_TOML_STRING), "a\tb");
    ASSERT_STRING(get(root, "literal", LZ_TOML_STRING), "C:\\Users\\x \"q\"");
    ASSERT_STRING(get(root, "ml", LZ_TOML_STRING), "line1\nline2");
    /* toml++ normalizes CRLF inside multi-line strings to LF (allowed) */
    ASSERT_STRING(get(root, "ml_crlf", LZ_TOML_STRING), "x\ny");
    ASSERT_STRING(get(root, "ml_join", LZ_TOML_STRING), "a bc");
    ASSERT_STRING(get(root, "ml_quotes", LZ_TOML_STRING), "a\"\"");
    ASSERT_STRING(get(root, "mll", LZ_TOML_STRING), "raw \\n\n");
    ASSERT_STRING(get(root, "mll_quote", LZ_TOML_STRING), "a'");
    lz_toml_free(root);
}

/* A non-ASCII character right after a line-ending backslash (toml++ issue
 * #190: in 3.3.0 this path reaches TOML_UNREACHABLE in
 * is_non_ascii_horizontal_whitespace(); it is benign in the Debian build of
 * the shared library but fatal under UBSan in a header-only build). */
static void test_non_ascii_after_line_ending_backslash(void **state)
{
    (void) state;
    lz_toml_node *root = PARSE_OK("s = \"\"\"\\\n\xc2\xa7\"\"\"\n");
    ASSERT_STRING(get(root, "s", LZ_TOML_STRING), "\xc2\xa7");
    lz_toml_free(root);
}

static void test_array_order(void **state)
{
    (void) state;
    lz_toml_node *root =
        PARSE_OK("nums = [3, 1, 2]\n"
                 "strs = [\"b\", \"a\", \"c\"]\n"
                 "mixed = [1, \"x\", [2], {b = 3}, 1.5]\n"
                 "multi = [ # comment\n  10, # c\n\n  20,\n  30, # trailing comma\n]\n"
                 "nested = [[1, 2], [], [[3]]]\n"
                 "tables = [{n = 2}, {n = 1}]\n");
    const lz_toml_node *a = get(root, "nums", LZ_TOML_ARRAY);
    assert_int_equal(a->u.array.count, 3);
    assert_int_equal(item(a, 0, LZ_TOML_INTEGER)->u.integer, 3);
    assert_int_equal(item(a, 1, LZ_TOML_INTEGER)->u.integer, 1);
    assert_int_equal(item(a, 2, LZ_TOML_INTEGER)->u.integer, 2);

    a = get(root, "strs", LZ_TOML_ARRAY);
    ASSERT_STRING(item(a, 0, LZ_TOML_STRING), "b");
    ASSERT_STRING(item(a, 1, LZ_TOML_STRING), "a");
    ASSERT_STRING(item(a, 2, LZ_TOML_STRING), "c");

    a = get(root, "mixed", LZ_TOML_ARRAY);
    assert_int_equal(a->u.array.count, 5);
    item(a, 0, LZ_TOML_INTEGER);
    item(a, 1, LZ_TOML_STRING);
    item(a, 2, LZ_TOML_ARRAY);
    assert_int_equal(get(item(a, 3, LZ_TOML_TABLE), "b", LZ_TOML_INTEGER)->u.integer, 3);
    item(a, 4, LZ_TOML_FLOAT);

    a = get(root, "multi", LZ_TOML_ARRAY);
    assert_int_equal(a->u.array.count, 3);
    assert_int_equal(item(a, 0, LZ_TOML_INTEGER)->u.integer, 10);
    assert_int_equal(item(a, 2, LZ_TOML_INTEGER)->u.integer, 30);

    a = get(root, "nested", LZ_TOML_ARRAY);
    assert_int_equal(a->u.array.count, 3);
    assert_int_equal(item(a, 0, LZ_TOML_ARRAY)->u.array.count, 2);
    assert_int_equal(item(item(a, 0, LZ_TOML_ARRAY), 1, LZ_TOML_INTEGER)->u.integer, 2);
    assert_int_equal(item(a, 1, LZ_TOML_ARRAY)->u.array.count, 0);
    assert_int_equal(
        item(item(item(a, 2, LZ_TOML_ARRAY), 0, LZ_TOML_ARRAY), 0, LZ_TOML_INTEGER)->u.integer, 3);

    a = get(root, "tables", LZ_TOML_ARRAY);
    assert_int_equal(get(item(a, 0, LZ_TOML_TABLE), "n", LZ_TOML_INTEGER)->u.integer, 2);
    assert_int_equal(get(item(a, 1, LZ_TOML_TABLE), "n", LZ_TOML_INTEGER)->u.integer, 1);
    lz_toml_free(root);
}

static void test_table_sorted_by_key_bytes(void **state)
{
    (void) state;
    lz_toml_node *root = PARSE_OK("zeta = 1\n"
                                  "\"\xc3\xa9\" = 2\n"
                                  "b = 3\n"
                                  "B = 4\n"
                                  "_ = 5\n"
                                  "A-b = 6\n"
                                  "\"\" = 7\n"
                                  "a = 8\n"
                                  "10 = 9\n"
                                  "9 = 10\n"
                                  "\"a b\" = 11\n");
    static const char *const order[] = { "",  "10",  "9", "A-b",  "B",       "_",
                                         "a", "a b", "b", "zeta", "\xc3\xa9" };
    assert_int_equal(root->u.table.count, sizeof(order) / sizeof(order[0]));
    for (size_t i = 0; i < root->u.table.count; i++)
        assert_string_equal(root->u.table.entries[i].key, order[i]);
    lz_toml_free(root);
}

static void test_keys(void **state)
{
    (void) state;
    lz_toml_node *root = PARSE_OK("\"a.b\" = 1\n"
                                  "a . b = 2\n"
                                  "1.2 = 3\n"
                                  "'quoted \"lit\"' = 4\n"
                                  "\"\\u00e9\\t\" = 5\n"
                                  "- = 6\n"
                                  "1979-05-27 = 7\n"
                                  "[\"\"]\n"
                                  "x = 8\n"
                                  "[ c . \"d\" . 'e' ]\n"
                                  "y = 9\n");
    assert_int_equal(get(root, "a.b", LZ_TOML_INTEGER)->u.integer, 1);
    assert_int_equal(get(get(root, "a", LZ_TOML_TABLE), "b", LZ_TOML_INTEGER)->u.integer, 2);
    assert_int_equal(get(get(root, "1", LZ_TOML_TABLE), "2", LZ_TOML_INTEGER)->u.integer, 3);
    assert_int_equal(get(root, "quoted \"lit\"", LZ_TOML_INTEGER)->u.integer, 4);
    assert_int_equal(get(root, "\xc3\xa9\t", LZ_TOML_INTEGER)->u.integer, 5);
    assert_int_equal(get(root, "-", LZ_TOML_INTEGER)->u.integer, 6);
    assert_int_equal(get(root, "1979-05-27", LZ_TOML_INTEGER)->u.integer, 7);
    assert_int_equal(get(get(root, "", LZ_TOML_TABLE), "x", LZ_TOML_INTEGER)->u.integer, 8);
    const lz_toml_node *e =
        get(get(get(root, "c", LZ_TOML_TABLE), "d", LZ_TOML_TABLE), "e", LZ_TOML_TABLE);
    assert_int_equal(get(e, "y", LZ_TOML_INTEGER)->u.integer, 9);
    lz_toml_free(root);
}

/* Valid ways of defining tables that look close to the refused ones. */
static void test_table_definitions(void **state)
{
    (void) state;
    /* a super-table may be defined after its sub-table */
    lz_toml_node *root = PARSE_OK("[a.b]\nx = 1\n[a]\ny = 2\n");
    assert_int_equal(
        get(get(get(root, "a", LZ_TOML_TABLE), "b", LZ_TOML_TABLE), "x", LZ_TOML_INTEGER)
            ->u.integer,
        1);
    assert_int_equal(get(get(root, "a", LZ_TOML_TABLE), "y", LZ_TOML_INTEGER)->u.integer, 2);
    lz_toml_free(root);

    /* sub-tables may be added beneath tables made by dotted keys */
    root = PARSE_OK("[fruit]\napple.color = 1\napple.taste.sweet = "
                    "true\n[fruit.apple.texture]\nsmooth = true\n");
    const lz_toml_node *apple = get(get(root, "fruit", LZ_TOML_TABLE), "apple", LZ_TOML_TABLE);
    assert_int_equal(apple->u.table.count, 3);
    assert_true(get(get(apple, "texture", LZ_TOML_TABLE), "smooth", LZ_TOML_BOOLEAN)->u.boolean);
    lz_toml_free(root);

    /* an implicit table of an array-of-tables path may be defined later */
    root = PARSE_OK("[[albums.songs]]\nname = 1\n[albums]\nname = 2\n");
    const lz_toml_node *albums = get(root, "albums", LZ_TOML_TABLE);
    assert_int_equal(get(albums, "name", LZ_TOML_INTEGER)->u.integer, 2);
    assert_int_equal(get(albums, "songs", LZ_TOML_ARRAY)->u.array.count, 1);
    lz_toml_free(root);

    /* same key name in different tables; keys are case-sensitive */
    root = PARSE_OK("a = 1\n[t]\na = 2\n[T]\na = 3\n");
    assert_int_equal(get(root, "a", LZ_TOML_INTEGER)->u.integer, 1);
    assert_int_equal(get(get(root, "t", LZ_TOML_TABLE), "a", LZ_TOML_INTEGER)->u.integer, 2);
    assert_int_equal(get(get(root, "T", LZ_TOML_TABLE), "a", LZ_TOML_INTEGER)->u.integer, 3);
    lz_toml_free(root);
}

static void test_nested_arrays_of_tables(void **state)
{
    (void) state;
    lz_toml_node *root = PARSE_OK("[[a]]\n"
                                  "x = 1\n"
                                  "[[a.b]]\n"
                                  "y = 1\n"
                                  "[[a.b]]\n"
                                  "y = 2\n"
                                  "[a.c]\n"
                                  "z = 1\n"
                                  "[[a]]\n"
                                  "x = 2\n"
                                  "[[a]]\n"
                                  "[[a.b]]\n"
                                  "y = 3\n"
                                  "[[a.b.d]]\n"
                                  "w = 4\n");
    const lz_toml_node *a = get(root, "a", LZ_TOML_ARRAY);
    assert_int_equal(a->u.array.count, 3);

    const lz_toml_node *a0 = item(a, 0, LZ_TOML_TABLE);
    assert_int_equal(get(a0, "x", LZ_TOML_INTEGER)->u.integer, 1);
    const lz_toml_node *b = get(a0, "b", LZ_TOML_ARRAY);
    assert_int_equal(b->u.array.count, 2);
    assert_int_equal(get(item(b, 0, LZ_TOML_TABLE), "y", LZ_TOML_INTEGER)->u.integer, 1);
    assert_int_equal(get(item(b, 1, LZ_TOML_TABLE), "y", LZ_TOML_INTEGER)->u.integer, 2);
    assert_int_equal(get(get(a0, "c", LZ_TOML_TABLE), "z", LZ_TOML_INTEGER)->u.integer, 1);

    const lz_toml_node *a1 = item(a, 1, LZ_TOML_TABLE);
    assert_int_equal(a1->u.table.count, 1);
    assert_int_equal(get(a1, "x", LZ_TOML_INTEGER)->u.integer, 2);

    const lz_toml_node *a2 = item(a, 2, LZ_TOML_TABLE);
    const lz_toml_node *b2 = get(a2, "b", LZ_TOML_ARRAY);
    assert_int_equal(b2->u.array.count, 1);
    const lz_toml_node *b20 = item(b2, 0, LZ_TOML_TABLE);
    assert_int_equal(get(b20, "y", LZ_TOML_INTEGER)->u.integer, 3);
    const lz_toml_node *d = get(b20, "d", LZ_TOML_ARRAY);
    assert_int_equal(get(item(d, 0, LZ_TOML_TABLE), "w", LZ_TOML_INTEGER)->u.integer, 4);
    lz_toml_free(root);

    /* an array of tables whose last element gets a sub-table */
    root = PARSE_OK("[[p]]\nn = 1\n[[p]]\nn = 2\n[p.q]\nm = 3\n");
    a = get(root, "p", LZ_TOML_ARRAY);
    assert_int_equal(a->u.array.count, 2);
    assert_null(lz_toml_get(item(a, 0, LZ_TOML_TABLE), "q"));
    assert_int_equal(
        get(get(item(a, 1, LZ_TOML_TABLE), "q", LZ_TOML_TABLE), "m", LZ_TOML_INTEGER)->u.integer,
        3);
    lz_toml_free(root);

    /* inline arrays of inline arrays of tables */
    root = PARSE_OK("a = [[{b = 1}], [{c = 2}, {c = 3}]]\n");
    a = get(root, "a", LZ_TOML_ARRAY);
    assert_int_equal(
        get(item(item(a, 0, LZ_TOML_ARRAY), 0, LZ_TOML_TABLE), "b", LZ_TOML_INTEGER)->u.integer, 1);
    assert_int_equal(
        get(item(item(a, 1, LZ_TOML_ARRAY), 1, LZ_TOML_TABLE), "c", LZ_TOML_INTEGER)->u.integer, 3);
    lz_toml_free(root);
}

static void test_positions(void **state)
{
    (void) state;
    lz_toml_node *root = PARSE_OK("# leading comment\n"        /* 1 */
                                  "  key = \"v\"\n"            /* 2 */
                                  "[srv.web]\n"                /* 3 */
                                  "port = 8080\n"              /* 4 */
                                  "x.y = true\n"               /* 5 */
                                  "[[list]]\n"                 /* 6 */
                                  "n = 1\n"                    /* 7 */
                                  "[[list]]\n"                 /* 8 */
                                  "\t\"\xc3\xa9\" = [3, 1]\n"  /* 9 */
                                  "inl = { z = 1, a = 2 }\n"); /* 10 */
    assert_pos(root->line, root->column, 1, 1);

    const lz_toml_entry *e = entry(root, "key");
    assert_pos(e->line, e->column, 2, 3);
    assert_pos(e->value->line, e->value->column, 2, 9);

    e = entry(root, "srv");
    assert_pos(e->line, e->column, 3, 2);
    const lz_toml_entry *web = entry(e->value, "web");
    assert_pos(web->line, web->column, 3, 6);
    assert_pos(web->value->line, web->value->column, 3, 1);
    e = entry(web->value, "port");
    assert_pos(e->line, e->column, 4, 1);
    assert_pos(e->value->line, e->value->column, 4, 8);
    e = entry(web->value, "x");
    assert_pos(e->line, e->column, 5, 1);
    e = entry(e->value, "y");
    assert_pos(e->line, e->column, 5, 3);
    assert_pos(e->value->line, e->value->column, 5, 7);

    e = entry(root, "list");
    assert_pos(e->line, e->column, 6, 3);
    const lz_toml_node *list = e->value;
    assert_pos(item(list, 0, LZ_TOML_TABLE)->line, item(list, 0, LZ_TOML_TABLE)->column, 6, 1);
    const lz_toml_node *l1 = item(list, 1, LZ_TOML_TABLE);
    assert_pos(l1->line, l1->column, 8, 1);
    e = entry(item(list, 0, LZ_TOML_TABLE), "n");
    assert_pos(e->line, e->column, 7, 1);
    assert_pos(e->value->line, e->value->column, 7, 5);

    /* columns count code points: the value after "é" starts at column 9 */
    e = entry(l1, "\xc3\xa9");
    assert_pos(e->line, e->column, 9, 2);
    assert_pos(e->value->line, e->value->column, 9, 8);
    assert_pos(item(e->value, 0, LZ_TOML_INTEGER)->line, item(e->value, 0, LZ_TOML_INTEGER)->column,
               9, 9);
    assert_pos(item(e->value, 1, LZ_TOML_INTEGER)->line, item(e->value, 1, LZ_TOML_INTEGER)->column,
               9, 12);

    e = entry(l1, "inl");
    assert_pos(e->value->line, e->value->column, 10, 7);
    const lz_toml_entry *z = entry(e->value, "z");
    assert_pos(z->line, z->column, 10, 9);
    assert_pos(z->value->line, z->value->column, 10, 13);
    const lz_toml_entry *a = entry(e->value, "a");
    assert_pos(a->line, a->column, 10, 16);
    assert_pos(a->value->line, a->value->column, 10, 20);
    lz_toml_free(root);

    /* CRLF line breaks count as one line each */
    root = PARSE_OK("a = 1\r\n\r\nb = \"x\"\r\n");
    e = entry(root, "b");
    assert_pos(e->line, e->column, 3, 1);
    assert_pos(e->value->line, e->value->column, 3, 5);
    lz_toml_free(root);
}

/* A leading UTF-8 byte order mark is skipped. TOML 1.0 does not mention it;
 * toml++ accepts it and so does this reader. */
static void test_leading_bom(void **state)
{
    (void) state;
    lz_toml_node *root = PARSE_OK("\xef\xbb\xbf"
                                  "a = 1\n");
    assert_int_equal(root->u.table.count, 1);
    assert_int_equal(get(root, "a", LZ_TOML_INTEGER)->u.integer, 1);
    lz_toml_free(root);
}

/* Only buf[0..len) is read: the rest of a larger buffer is ignored. */
static void test_length_is_respected(void **state)
{
    (void) state;
    static const char doc[] = "a = 1\nb = 2\n";
    lz_toml_node *root = parse_ok_n(doc, 5);
    assert_int_equal(root->u.table.count, 1);
    assert_int_equal(get(root, "a", LZ_TOML_INTEGER)->u.integer, 1);
    lz_toml_free(root);

    /* cut inside a string: refused, though the bytes after len close it */
    static const char cut[] = "a = \"abc\"\n";
    lz_toml_node *r = NULL;
    lz_toml_diag diag;
    assert_int_equal(parse_exact(cut, 7, &r, &diag), -1);
    assert_null(r);
    assert_int_equal(diag.line, 1);

    /* a document with no final newline */
    root = PARSE_OK("a = 1");
    assert_int_equal(get(root, "a", LZ_TOML_INTEGER)->u.integer, 1);
    lz_toml_free(root);
}

static char *repeat_doc(const char *head, const char *open, size_t n, const char *mid,
                        const char *close, const char *tail, size_t *ret_len)
{
    size_t lo = strlen(open), lc = strlen(close);
    size_t len = strlen(head) + n * lo + strlen(mid) + n * lc + strlen(tail);
    char *s = malloc(len + 1);
    assert_non_null(s);
    char *p = stpcpy(s, head);
    for (size_t i = 0; i < n; i++)
        p = stpcpy(p, open);
    p = stpcpy(p, mid);
    for (size_t i = 0; i < n; i++)
        p = stpcpy(p, close);
    p = stpcpy(p, tail);
    *ret_len = len;
    return s;
}

/* toml++ bounds the nesting of arrays and inline tables (256 values). */
static void test_nesting_limit(void **state)
{
    (void) state;
    size_t len;
    char *doc = repeat_doc("a = ", "[", 200, "", "]", "\n", &len);
    lz_toml_node *root = parse_ok_n(doc, len);
    lz_toml_free(root);
    free(doc);

    lz_toml_node *r = NULL;
    lz_toml_diag diag;
    doc = repeat_doc("a = ", "[", 300, "", "]", "\n", &len);
    assert_int_equal(parse_exact(doc, len, &r, &diag), -1);
    assert_null(r);
    assert_non_null(strstr(diag.message, "nested"));
    free(doc);

    doc = repeat_doc("a = ", "{b = ", 300, "1", "}", "\n", &len);
    assert_int_equal(parse_exact(doc, len, &r, &diag), -1);
    assert_null(r);
    assert_non_null(strstr(diag.message, "nested"));
    free(doc);
}

/* toml++ bounds neither the parts of a dotted key nor those of a table
 * header: "a.a.a...= 1" with ~2,000 parts overflowed the stack of the shim's
 * recursive convert() under ASan, and with ~30,000 parts (60 KB, well under
 * LZ_CONFIG_MAX_BYTES) toml++'s own recursive pass overflowed the stack inside
 * toml::parse() in a release build. The shim refuses such documents before
 * calling toml::parse(). */
static void test_deep_dotted_keys_refused(void **state)
{
    (void) state;
    static const char *const shapes[][3] = {
        { "a", ".a", " = 1\n" },
        { "[a", ".a", "]\n" },
        { "x = {a", ".a", " = 1}\n" },
    };
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        size_t len;
        char *doc = repeat_doc(shapes[i][0], shapes[i][1], 100000, "", "", shapes[i][2], &len);
        lz_toml_node *r = NULL;
        lz_toml_diag diag;
        assert_int_equal(parse_exact(doc, len, &r, &diag), -1);
        assert_null(r);
        assert_int_equal(diag.line, 1);
        free(doc);
    }
}

/* toml++ copies the offending document character into some messages
 * ("a = fal\x1b" gives "...saw 'fal<ESC>'", "a = fals\n" a raw newline), and
 * the CLI prints diag.message to a terminal: the shim escapes control
 * characters in set_diag(). */
static void test_diag_message_has_no_control_characters(void **state)
{
    (void) state;
    static const char *const docs[] = { "a = fal\x1b[31m\n", "a = fals\n", "a = tru\x07\n" };
    for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
        lz_toml_node *r = NULL;
        lz_toml_diag diag;
        assert_int_equal(parse_exact(docs[i], strlen(docs[i]), &r, &diag), -1);
        for (const unsigned char *p = (const unsigned char *) diag.message; *p; p++)
            assert_true(*p >= 0x20 && *p != 0x7f);
    }
}

static void test_get(void **state)
{
    (void) state;
    lz_toml_node *root = PARSE_OK("a = 1\nab = 2\n\"\" = 3\n[t]\nx = \"y\"\n");
    assert_int_equal(lz_toml_get(root, "a")->u.integer, 1);
    assert_int_equal(lz_toml_get(root, "ab")->u.integer, 2);
    assert_int_equal(lz_toml_get(root, "")->u.integer, 3);
    assert_null(lz_toml_get(root, "b"));
    assert_null(lz_toml_get(root, "A"));
    assert_null(lz_toml_get(root, "a "));
    assert_null(lz_toml_get(root, "x")); /* not looked up recursively */
    const lz_toml_node *t = lz_toml_get(root, "t");
    assert_non_null(t);
    assert_int_equal(t->type, LZ_TOML_TABLE);
    ASSERT_STRING(lz_toml_get(t, "x"), "y");
    /* not a table, or no table at all */
    assert_null(lz_toml_get(lz_toml_get(root, "a"), "a"));
    assert_null(lz_toml_get(lz_toml_get(t, "x"), "x"));
    assert_null(lz_toml_get(NULL, "a"));
    lz_toml_free(root);

    root = PARSE_OK("arr = [{k = 1}]\n");
    assert_null(lz_toml_get(lz_toml_get(root, "arr"), "k"));
    lz_toml_free(root);
}

static void test_type_name(void **state)
{
    (void) state;
    assert_string_equal(lz_toml_type_name(LZ_TOML_TABLE), "table");
    assert_string_equal(lz_toml_type_name(LZ_TOML_ARRAY), "array");
    assert_string_equal(lz_toml_type_name(LZ_TOML_STRING), "string");
    assert_string_equal(lz_toml_type_name(LZ_TOML_INTEGER), "integer");
    assert_string_equal(lz_toml_type_name(LZ_TOML_FLOAT), "float");
    assert_string_equal(lz_toml_type_name(LZ_TOML_BOOLEAN), "boolean");
    assert_string_equal(lz_toml_type_name(LZ_TOML_DATE), "date");
    assert_string_equal(lz_toml_type_name(LZ_TOML_TIME), "time");
    assert_string_equal(lz_toml_type_name(LZ_TOML_DATETIME), "date-time");
}

static void test_free_null(void **state)
{
    (void) state;
    lz_toml_free(NULL);
}

int main(void)
{
    static const struct CMUnitTest fixed[] = {
        cmocka_unit_test(test_empty_document),
        cmocka_unit_test(test_value_types),
        cmocka_unit_test(test_floats),
        cmocka_unit_test(test_integers),
        cmocka_unit_test(test_booleans),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_non_ascii_after_line_ending_backslash),
        cmocka_unit_test(test_array_order),
        cmocka_unit_test(test_table_sorted_by_key_bytes),
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_table_definitions),
        cmocka_unit_test(test_nested_arrays_of_tables),
        cmocka_unit_test(test_positions),
        cmocka_unit_test(test_leading_bom),
        cmocka_unit_test(test_length_is_respected),
        cmocka_unit_test(test_nesting_limit),
        cmocka_unit_test(test_get),
        cmocka_unit_test(test_type_name),
        cmocka_unit_test(test_free_null),
    };
    /* Tests of gaps reported but not yet fixed; they fail (or crash) today.
     * (cmocka's "not ok # SKIP" counts as a failure for meson, so they are
     * left out rather than skipped.) */
    static const struct CMUnitTest known_gaps[] = {
        cmocka_unit_test(test_deep_dotted_keys_refused),
        cmocka_unit_test(test_diag_message_has_no_control_characters),
    };
    size_t n_bad = sizeof(bad_cases) / sizeof(bad_cases[0]);
    size_t n_fixed = sizeof(fixed) / sizeof(fixed[0]);
    size_t n_gaps = sizeof(known_gaps) / sizeof(known_gaps[0]);
    struct CMUnitTest *tests = calloc(n_bad + n_fixed + n_gaps, sizeof(*tests));
    if (!tests)
        return 1;
    /* One group, so that the TAP stream has a single plan. */
    for (size_t i = 0; i < n_bad; i++) {
        tests[i].name = bad_cases[i].name;
        tests[i].test_func = test_refused;
        tests[i].initial_state = (void *) &bad_cases[i];
    }
    memcpy(tests + n_bad, fixed, sizeof(fixed));
    memcpy(tests + n_bad + n_fixed, known_gaps, n_gaps * sizeof(*tests));
    int r = _cmocka_run_group_tests("toml", tests, n_bad + n_fixed + n_gaps, NULL, NULL);
    free(tests);
    return r;
}
