/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests for src/export/yaml.c: every string double-quoted with
 * everything outside printable ASCII escaped, so a value is never read back
 * as another type or as YAML syntax; invalid UTF-8 as \xNN; the block
 * layout of mappings, sequences and empty collections; reals and nulls
 * refused. (tests/integration/test_export_kubernetes.py reads the output
 * back with PyYAML.)
 */
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "export/yaml.h"

static void quoted(const char *in, size_t len, const char *want)
{
    char *q = lz_yaml_quote(in, len);
    assert_string_equal(q, want);
    free(q);
}

static void test_quote(void **state)
{
    (void) state;
    quoted("plain", 5, "\"plain\"");
    quoted("true", 4, "\"true\"");
    quoted("a \"b\" \\c", 8, "\"a \\\"b\\\" \\\\c\"");
    quoted("l1\nl2\t\r", 7, "\"l1\\nl2\\t\\r\"");
    quoted("\x01\x7f", 2, "\"\\u0001\\u007f\"");
    quoted("\xc3\xa9", 2, "\"\\u00e9\"");             /* é */
    quoted("\xc2\x85", 2, "\"\\u0085\"");             /* NEL, a YAML line break */
    quoted("\xe2\x80\xa8", 3, "\"\\u2028\"");         /* LINE SEPARATOR */
    quoted("\xef\xbb\xbf", 3, "\"\\ufeff\"");         /* BOM */
    quoted("\xf0\x9f\x98\x80", 4, "\"\\U0001f600\""); /* astral: \U, not surrogates */
    quoted("\xff", 1, "\"\\xff\"");                   /* invalid byte */
    quoted("\xc0\xaf", 2, "\"\\xc0\\xaf\"");          /* overlong '/' */
    quoted("\xed\xa0\x80", 3, "\"\\xed\\xa0\\x80\""); /* a surrogate */
    quoted("\xe2\x82", 2, "\"\\xe2\\x82\"");          /* truncated */
    quoted("a\0b", 3, "\"a\\u0000b\"");
}

static char *render(json_t *doc, int *rc)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    *rc = lz_yaml_document(f, doc);
    fclose(f);
    json_decref(doc);
    return buf;
}

static void test_layout(void **state)
{
    (void) state;
    int rc;
    char *y = render(json_pack("{s:s, s:{s:i, s:b}, s:[s, {s:s, s:[i]}, []], s:{}, s:[], s:s}",
                               "kind", "X", "spec", "n", 53, "on", 0, "list", "a", "k", "v", "l", 1,
                               "empty", "none", "app.kubernetes.io/name", "z"),
                     &rc);
    assert_int_equal(rc, 0);
    assert_string_equal(y, "---\n"
                           "kind: \"X\"\n"
                           "spec:\n"
                           "  \"n\": 53\n" /* YAML 1.1 reads n as false */
                           "  \"on\": false\n"
                           "list:\n"
                           "  - \"a\"\n"
                           "  - k: \"v\"\n"
                           "    l:\n"
                           "      - 1\n"
                           "  - []\n"
                           "empty: {}\n"
                           "none: []\n"
                           "\"app.kubernetes.io/name\": \"z\"\n");
    free(y);
}

static void test_refused(void **state)
{
    (void) state;
    int rc;
    free(render(json_pack("{s:f}", "r", 1.5), &rc));
    assert_int_equal(rc, -1);
    free(render(json_pack("{s:n}", "n"), &rc));
    assert_int_equal(rc, -1);
    free(render(json_pack("[s]", "a"), &rc));
    assert_int_equal(rc, -1);
    assert_int_equal(errno, EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quote),
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
