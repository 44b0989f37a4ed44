/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests for src/common/options.c, the one option parser of every
 * command: table-driven cases of "--opt value", "--opt=value", "-o value",
 * an empty value refused, a missing value named, a value given to an
 * option without one, an unknown option, "--" and "-" as arguments, and
 * the stop at "--" that 'run' uses for the sandboxed command.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/options.h"
#include "common/util.h"

enum { OPT_WORKSPACE, OPT_OUTPUT, OPT_JSON };

static const lz_option table[] = {
    { "workspace", 0, "DIR", OPT_WORKSPACE },
    { "output", 'o', "FILE", OPT_OUTPUT },
    { "json", 0, NULL, OPT_JSON },
};

#define MAX_WORDS 8

/* The parse of words as a string, one item per result: "workspace=VALUE",
 * "json", "arg:WORD", "error:MESSAGE" (which ends it), then "|next=N". */
static void parse(const char *const *words, bool stop_at_dashdash, char *out, size_t n)
{
    char *argv[MAX_WORDS + 2] = { (char *) "cmd" };
    int argc = 1;
    for (; words[argc - 1]; argc++)
        argv[argc] = (char *) words[argc - 1];
    lz_opt_parser p;
    lz_opt_init(&p, table, LZ_ARRAY_SIZE(table), argc, argv, 1);
    p.stop_at_dashdash = stop_at_dashdash;
    size_t o = 0;
    out[0] = '\0';
    for (int r; (r = lz_opt_next(&p)) != LZ_OPT_DONE;) {
        if (r == LZ_OPT_ERROR) {
            o += (size_t) snprintf(out + o, n - o, "error:%s ", p.error);
            break;
        }
        if (r == LZ_OPT_ARGUMENT)
            o += (size_t) snprintf(out + o, n - o, "arg:%s ", p.arg);
        else if (p.value)
            o += (size_t) snprintf(out + o, n - o, "%s=%s ", p.option->name, p.value);
        else
            o += (size_t) snprintf(out + o, n - o, "%s ", p.option->name);
    }
    snprintf(out + o, n - o, "|next=%d", p.next);
}

static void test_options_table(void **state)
{
    (void) state;
    static const struct {
        const char *words[MAX_WORDS];
        bool stop;
        const char *want;
    } cases[] = {
        /* --opt value and --opt=value mean the same. */
        { { "--workspace", "/w", NULL }, false, "workspace=/w |next=3" },
        { { "--workspace=/w", NULL }, false, "workspace=/w |next=2" },
        /* A value may hold '=' and may start with '-'. */
        { { "--workspace=a=b", NULL }, false, "workspace=a=b |next=2" },
        { { "--workspace", "-x", NULL }, false, "workspace=-x |next=3" },
        /* The short name of an option with one. */
        { { "-o", "f.yaml", "--output=g", NULL }, false, "output=f.yaml output=g |next=4" },
        /* Options and arguments mixed, in their order. */
        { { "p", "--json", "q", NULL }, false, "arg:p json arg:q |next=4" },
        /* An empty value is refused, both ways. */
        { { "--workspace=", NULL },
          false,
          "error:option --workspace needs a non-empty value (DIR) |next=2" },
        { { "--workspace", "", NULL },
          false,
          "error:option --workspace needs a non-empty value (DIR) |next=3" },
        /* A missing value is named. */
        { { "p", "--workspace", NULL },
          false,
          "arg:p error:option --workspace needs a value (DIR) |next=3" },
        { { "-o", NULL }, false, "error:option -o needs a value (FILE) |next=2" },
        /* An option without a value takes none. */
        { { "--json=yes", NULL }, false, "error:option --json takes no value |next=2" },
        /* Unknown options, abbreviations and glued short values included. */
        { { "--frobnicate", NULL }, false, "error:unknown option '--frobnicate' |next=2" },
        { { "--work", "x", NULL }, false, "error:unknown option '--work' |next=2" },
        { { "-x", NULL }, false, "error:unknown option '-x' |next=2" },
        { { "-ofile", NULL }, false, "error:unknown option '-ofile' |next=2" },
        { { "--frob=1", NULL }, false, "error:unknown option '--frob=1' |next=2" },
        /* "-" is an argument; after "--" every word is one. */
        { { "-", NULL }, false, "arg:- |next=2" },
        { { "a", "--", "--json", "-o", NULL }, false, "arg:a arg:--json arg:-o |next=5" },
        /* Stopping at "--": the rest is another program's (run's command). */
        { { "p", "--json", "--", "ls", "--json", NULL }, true, "arg:p json |next=4" },
        { { "p", NULL }, true, "arg:p |next=2" },
        /* Nothing at all. */
        { { NULL }, false, "|next=1" },
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(cases); i++) {
        char got[512];
        parse(cases[i].words, cases[i].stop, got, sizeof(got));
        if (strcmp(got, cases[i].want) != 0)
            print_error("case %zu: got \"%s\", want \"%s\"\n", i, got, cases[i].want);
        assert_string_equal(got, cases[i].want);
    }
}

/* An option whose name is NULL is not in the table (a command offers
 * --stop to some subcommands only). */
static void test_options_disabled_row(void **state)
{
    (void) state;
    static const lz_option rows[] = { { NULL, 0, NULL, 0 }, { "yes", 0, NULL, 1 } };
    char *argv[] = { (char *) "cmd", (char *) "--yes", (char *) "--stop", NULL };
    lz_opt_parser p;
    lz_opt_init(&p, rows, LZ_ARRAY_SIZE(rows), 3, argv, 1);
    assert_int_equal(lz_opt_next(&p), 1);
    assert_int_equal(lz_opt_next(&p), LZ_OPT_ERROR);
    assert_string_equal(p.error, "unknown option '--stop'");
    assert_int_equal(lz_opt_next(&p), LZ_OPT_DONE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_options_table),
        cmocka_unit_test(test_options_disabled_row),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
