/* SPDX-License-Identifier: Apache-2.0
 *
 * The error contract (src/common/error.h) and lz_utf8_valid()
 * (src/common/util.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/text.h"
#include "common/util.h"

/* ------------------------------------------------------------------------ */
/* lz_error                                                                  */
/* ------------------------------------------------------------------------ */

/* Everything lz_error_report() writes to a stream, as one string. */
static char *report_text(const lz_error *e)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    assert_non_null(f);
    lz_error_report(e, f);
    assert_int_equal(fclose(f), 0);
    assert_non_null(buf);
    return buf;
}

static void test_set(void **state)
{
    (void) state;
    lz_error *err = NULL;
    assert_int_equal(lz_error_set(&err, ENOENT, "cannot open %s (%d)", "/etc/x", 7), -1);
    assert_non_null(err);
    assert_int_equal(err->errnum, ENOENT);
    assert_string_equal(err->message, "cannot open /etc/x (7)");
    assert_null(err->hint);
    lz_error_free(err);

    err = NULL;
    assert_int_equal(lz_error_set(&err, 0, "plain"), -1);
    assert_int_equal(err->errnum, 0);
    assert_string_equal(err->message, "plain");
    lz_error_free(err);

    /* a literal percent sign and an empty message */
    err = NULL;
    lz_error_set(&err, 0, "100%% sure");
    assert_string_equal(err->message, "100% sure");
    lz_error_free(err);
    err = NULL;
    lz_error_set(&err, 0, "%s", "");
    assert_string_equal(err->message, "");
    lz_error_free(err);
}

static int set_via_v(lz_error **err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int set_via_v(lz_error **err, int errnum, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = lz_error_setv(err, errnum, fmt, ap);
    va_end(ap);
    return r;
}

static void test_setv(void **state)
{
    (void) state;
    lz_error *err = NULL;
    assert_int_equal(set_via_v(&err, EACCES, "profile %s: %u rules", "dev", 3u), -1);
    assert_non_null(err);
    assert_int_equal(err->errnum, EACCES);
    assert_string_equal(err->message, "profile dev: 3 rules");
    /* first error wins through setv too */
    assert_int_equal(set_via_v(&err, EIO, "second"), -1);
    assert_string_equal(err->message, "profile dev: 3 rules");
    assert_int_equal(err->errnum, EACCES);
    lz_error_free(err);
}

static void test_first_error_wins(void **state)
{
    (void) state;
    lz_error *err = NULL;
    lz_error_set(&err, EPERM, "root cause");
    lz_error *first = err;
    assert_int_equal(lz_error_set(&err, EIO, "consequence %d", 2), -1);
    assert_ptr_equal(err, first);
    assert_string_equal(err->message, "root cause");
    assert_int_equal(err->errnum, EPERM);
    lz_error_free(err);
}

static void test_null_err_pointer(void **state)
{
    (void) state;
    assert_int_equal(lz_error_set(NULL, ENOENT, "nobody listens %s", "here"), -1);
    assert_int_equal(set_via_v(NULL, 0, "nor here"), -1);
    assert_int_equal(lz_error_hint(NULL, "hint %d", 1), -1);
    assert_int_equal(lz_error_prefix(NULL, "ctx %d", 1), -1);
    lz_error_free(NULL);
    lz_error_report(NULL, stderr);

    /* hint and prefix on an empty slot stay no-ops */
    lz_error *err = NULL;
    assert_int_equal(lz_error_hint(&err, "fix it"), -1);
    assert_null(err);
    assert_int_equal(lz_error_prefix(&err, "context"), -1);
    assert_null(err);
    assert_null(lz_error_take(&err));
    assert_null(err);

    char *text = report_text(NULL);
    assert_string_equal(text, "");
    free(text);
}

static void test_hint(void **state)
{
    (void) state;
    lz_error *err = NULL;
    lz_error_set(&err, 0, "bad profile name");
    assert_int_equal(lz_error_hint(&err, "use [A-Za-z0-9] (at most %d characters)", 64), -1);
    assert_string_equal(err->hint, "use [A-Za-z0-9] (at most 64 characters)");
    /* a second hint replaces the first (the old one is freed: LeakSanitizer) */
    assert_int_equal(lz_error_hint(&err, "rename it"), -1);
    assert_string_equal(err->hint, "rename it");
    assert_string_equal(err->message, "bad profile name");
    lz_error_free(err);
}

static void test_prefix(void **state)
{
    (void) state;
    lz_error *err = NULL;
    lz_error_set(&err, ENOENT, "no such key");
    assert_int_equal(lz_error_prefix(&err, "profile %s", "dev"), -1);
    assert_string_equal(err->message, "profile dev: no such key");
    assert_int_equal(lz_error_prefix(&err, "%s:%u:%u", "config.toml", 3u, 7u), -1);
    assert_string_equal(err->message, "config.toml:3:7: profile dev: no such key");
    /* prefixing keeps errnum and hint */
    lz_error_hint(&err, "add it");
    lz_error_prefix(&err, "load");
    assert_string_equal(err->message, "load: config.toml:3:7: profile dev: no such key");
    assert_int_equal(err->errnum, ENOENT);
    assert_string_equal(err->hint, "add it");
    lz_error_free(err);
}

static void test_take(void **state)
{
    (void) state;
    lz_error *err = NULL;
    lz_error_set(&err, 0, "one");
    lz_error *taken = lz_error_take(&err);
    assert_null(err);
    assert_non_null(taken);
    assert_string_equal(taken->message, "one");
    /* the slot is free again: the next failure is recorded */
    lz_error_set(&err, 0, "two");
    assert_non_null(err);
    assert_string_equal(err->message, "two");
    assert_string_equal(taken->message, "one");
    lz_error_free(taken);
    lz_error_free(err);
}

static void test_report(void **state)
{
    (void) state;
    lz_error *err = NULL;
    lz_error_set(&err, 0, "profile \"dev\" not found");
    char *text = report_text(err);
    /* without a hint, the general fix line: every error has one */
    assert_string_equal(text, "lazaret: error: profile \"dev\" not found\n"
                              "  fix: " LZ_ERROR_GENERAL_FIX "\n");
    free(text);

    lz_error_hint(&err, "list profiles with `lazaret config`");
    text = report_text(err);
    assert_string_equal(text, "lazaret: error: profile \"dev\" not found\n"
                              "  fix: list profiles with `lazaret config`\n");
    free(text);
    lz_error_free(err);

    /* a system error appends strerror() to the message, not to the hint */
    err = NULL;
    lz_error_set(&err, ENOENT, "cannot open %s", "/home/a/p");
    char *want = NULL;
    assert_true(asprintf(&want, "lazaret: error: cannot open /home/a/p: %s\n  fix: %s\n",
                         strerror(ENOENT), LZ_ERROR_GENERAL_FIX) > 0);
    text = report_text(err);
    assert_string_equal(text, want);
    free(text);
    free(want);
    /* strerror() is not stored in the message */
    assert_string_equal(err->message, "cannot open /home/a/p");

    lz_error_hint(&err, "create the directory");
    want = NULL;
    assert_true(asprintf(&want,
                         "lazaret: error: cannot open /home/a/p: %s\n  fix: create the directory\n",
                         strerror(ENOENT)) > 0);
    text = report_text(err);
    assert_string_equal(text, want);
    free(text);
    free(want);
    lz_error_free(err);

    /* errnum 0 never appends a strerror(), whatever errno is */
    err = NULL;
    errno = EACCES;
    lz_error_set(&err, 0, "x");
    text = report_text(err);
    assert_string_equal(text, "lazaret: error: x\n  fix: " LZ_ERROR_GENERAL_FIX "\n");
    free(text);
    lz_error_free(err);
}

/* The conventional caller pattern: a callee fails, callers add context. */
static int inner(lz_error **err)
{
    return lz_error_set(err, EINVAL, "value out of range");
}

static int middle(lz_error **err)
{
    if (inner(err) < 0)
        return lz_error_prefix(err, "key storage.data_root");
    return 0;
}

static int outer(lz_error **err)
{
    if (middle(err) < 0) {
        lz_error_prefix(err, "config.toml:4:13");
        return lz_error_hint(err, "fix the value");
    }
    return 0;
}

/* Bytes someone else chose (a file name, a tool's output) never act on the
 * terminal and never start a line that could pass for Lazaret's own; only
 * the indented continuation lines of a list keep their line feed. */
static void test_report_escapes_control_bytes(void **state)
{
    (void) state;
    lz_error *err = NULL;
    lz_error_set(&err, 0, "cannot remove a\x1b[2K\rb\nlazaret: forged\n  fix: forged\n    x\x7f");
    lz_error_hint(&err, "h\x1b]0;t\x07\n");
    char *text = report_text(err);
    assert_string_equal(text, "lazaret: error: cannot remove a\\x1b[2K\\x0db\\x0alazaret: "
                              "forged\\x0a  fix: forged\n    x\\x7f\n"
                              "  fix: h\\x1b]0;t\\x07\\x0a\n");
    free(text);
    lz_error_free(err);
}

static void test_propagation(void **state)
{
    (void) state;
    lz_error *err = NULL;
    assert_int_equal(outer(&err), -1);
    assert_non_null(err);
    assert_string_equal(err->message,
                        "config.toml:4:13: key storage.data_root: value out of range");
    assert_string_equal(err->hint, "fix the value");
    assert_int_equal(err->errnum, EINVAL);
    lz_error_free(err);

    /* callers that do not want the detail pass NULL */
    assert_int_equal(outer(NULL), -1);
}

/* ------------------------------------------------------------------------ */
/* lz_utf8_valid                                                             */
/* ------------------------------------------------------------------------ */

typedef struct utf8_case {
    const char *name;
    const char *bytes;
    size_t len;
    bool valid;
} utf8_case;

#define U8(name, lit, valid)                                                                       \
    {                                                                                              \
        name, lit, sizeof(lit) - 1, valid                                                          \
    }

static const utf8_case utf8_cases[] = {
    U8("empty", "", true),
    U8("ascii", "hello, world ~\x7f", true),
    U8("nul_is_a_code_point", "a\0b", true),
    U8("two_byte_min_U+0080", "\xc2\x80", true),
    U8("two_byte_e_acute", "caf\xc3\xa9", true),
    U8("two_byte_max_U+07FF", "\xdf\xbf", true),
    U8("three_byte_min_U+0800", "\xe0\xa0\x80", true),
    U8("three_byte_euro", "\xe2\x82\xac", true),
    U8("three_byte_U+D7FF", "\xed\x9f\xbf", true),
    U8("three_byte_U+E000", "\xee\x80\x80", true),
    U8("three_byte_U+FFFE_nonchar", "\xef\xbf\xbe", true),
    U8("three_byte_max_U+FFFF", "\xef\xbf\xbf", true),
    U8("four_byte_min_U+10000", "\xf0\x90\x80\x80", true),
    U8("four_byte_emoji", "\xf0\x9f\x98\x80", true),
    U8("four_byte_max_U+10FFFF", "\xf4\x8f\xbf\xbf", true),
    U8("mixed", "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80z", true),

    U8("overlong_2_nul", "\xc0\x80", false),
    U8("overlong_2_slash", "\xc0\xaf", false),
    U8("overlong_2_max_C1", "\xc1\xbf", false),
    U8("overlong_3_nul", "\xe0\x80\x80", false),
    U8("overlong_3_max", "\xe0\x9f\xbf", false),
    U8("overlong_4_nul", "\xf0\x80\x80\x80", false),
    U8("overlong_4_max", "\xf0\x8f\xbf\xbf", false),
    U8("surrogate_high_min", "\xed\xa0\x80", false),
    U8("surrogate_high_max", "\xed\xaf\xbf", false),
    U8("surrogate_low_min", "\xed\xb0\x80", false),
    U8("surrogate_low_max", "\xed\xbf\xbf", false),
    U8("surrogate_pair_cesu8", "\xed\xa0\xbd\xed\xb8\x80", false),
    U8("above_max_U+110000", "\xf4\x90\x80\x80", false),
    U8("above_max_F5", "\xf5\x80\x80\x80", false),
    U8("above_max_F7", "\xf7\xbf\xbf\xbf", false),
    U8("five_byte_form", "\xf8\x88\x80\x80\x80", false),
    U8("six_byte_form", "\xfc\x84\x80\x80\x80\x80", false),
    U8("byte_FE", "\xfe", false),
    U8("byte_FF", "\xff", false),
    U8("lone_continuation_80", "\x80", false),
    U8("lone_continuation_BF", "a\xbf", false),
    U8("extra_continuation", "\xc3\xa9\xa9", false),
    U8("truncated_2_at_end", "ab\xc3", false),
    U8("truncated_3_at_end_1", "\xe2", false),
    U8("truncated_3_at_end_2", "\xe2\x82", false),
    U8("truncated_4_at_end_3", "\xf0\x9f\x98", false),
    U8("truncated_then_ascii", "\xe2\x82x", false),
    U8("truncated_then_lead", "\xc3\xc3\xa9", false),
    U8("truncated_4_then_ascii", "\xf0\x9f\x98 ", false),
    U8("invalid_after_valid_text", "valid text \xc3\xa9 then \xff", false),
};

static void test_utf8_case(void **state)
{
    const utf8_case *c = *state;
    /* exactly sized copy: a read past len is an AddressSanitizer report */
    char *copy = malloc(c->len ? c->len : 1);
    assert_non_null(copy);
    if (c->len)
        memcpy(copy, c->bytes, c->len);
    bool got = lz_utf8_valid(copy, c->len);
    free(copy);
    if (got != c->valid) {
        print_message("# %s: lz_utf8_valid() = %s, expected %s\n", c->name, got ? "true" : "false",
                      c->valid ? "true" : "false");
        fail();
    }
}

static void test_utf8_length_is_respected(void **state)
{
    (void) state;
    static const char s[] = "a\xc3\xa9\xff";
    assert_true(lz_utf8_valid(s, 0));
    assert_true(lz_utf8_valid(s, 1));  /* "a" */
    assert_false(lz_utf8_valid(s, 2)); /* "a" + cut lead byte */
    assert_true(lz_utf8_valid(s, 3));  /* "aé" */
    assert_false(lz_utf8_valid(s, 4)); /* "aé\xff" */
}

/* Every code point from U+0000 to U+10FFFF encoded by hand is accepted,
 * except the surrogates. */
static void test_utf8_all_code_points(void **state)
{
    (void) state;
    unsigned char b[4];
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        size_t n;
        if (cp < 0x80) {
            b[0] = (unsigned char) cp;
            n = 1;
        } else if (cp < 0x800) {
            b[0] = (unsigned char) (0xC0 | (cp >> 6));
            b[1] = (unsigned char) (0x80 | (cp & 0x3F));
            n = 2;
        } else if (cp < 0x10000) {
            b[0] = (unsigned char) (0xE0 | (cp >> 12));
            b[1] = (unsigned char) (0x80 | ((cp >> 6) & 0x3F));
            b[2] = (unsigned char) (0x80 | (cp & 0x3F));
            n = 3;
        } else {
            b[0] = (unsigned char) (0xF0 | (cp >> 18));
            b[1] = (unsigned char) (0x80 | ((cp >> 12) & 0x3F));
            b[2] = (unsigned char) (0x80 | ((cp >> 6) & 0x3F));
            b[3] = (unsigned char) (0x80 | (cp & 0x3F));
            n = 4;
        }
        bool want = !(cp >= 0xD800 && cp <= 0xDFFF);
        if (lz_utf8_valid((const char *) b, n) != want) {
            print_message("# U+%04X: expected %s\n", (unsigned) cp, want ? "valid" : "invalid");
            fail();
        }
        /* any strict prefix of a multibyte sequence is invalid */
        for (size_t k = 1; k < n; k++)
            if (lz_utf8_valid((const char *) b, k)) {
                print_message("# U+%04X cut to %zu bytes accepted\n", (unsigned) cp, k);
                fail();
            }
    }
}

int main(void)
{
    static const struct CMUnitTest fixed[] = {
        cmocka_unit_test(test_set),
        cmocka_unit_test(test_report_escapes_control_bytes),
        cmocka_unit_test(test_setv),
        cmocka_unit_test(test_first_error_wins),
        cmocka_unit_test(test_null_err_pointer),
        cmocka_unit_test(test_hint),
        cmocka_unit_test(test_prefix),
        cmocka_unit_test(test_take),
        cmocka_unit_test(test_report),
        cmocka_unit_test(test_propagation),
        cmocka_unit_test(test_utf8_length_is_respected),
        cmocka_unit_test(test_utf8_all_code_points),
    };
    size_t n_fixed = sizeof(fixed) / sizeof(fixed[0]);
    size_t n_utf8 = sizeof(utf8_cases) / sizeof(utf8_cases[0]);
    struct CMUnitTest *tests = calloc(n_fixed + n_utf8, sizeof(*tests));
    if (!tests)
        return 1;
    /* One group, so that the TAP stream has a single plan. */
    memcpy(tests, fixed, sizeof(fixed));
    for (size_t i = 0; i < n_utf8; i++) {
        tests[n_fixed + i].name = utf8_cases[i].name;
        tests[n_fixed + i].test_func = test_utf8_case;
        tests[n_fixed + i].initial_state = (void *) &utf8_cases[i];
    }
    int r = _cmocka_run_group_tests("error", tests, n_fixed + n_utf8, NULL, NULL);
    free(tests);
    return r;
}
