/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests for src/gitsentry/sequencer.c's reading of a stopped
 * sequencer's files (sequencer.h): would the todo list, `strategy` or
 * `opts` a sandbox wrote make the host's Git run a command? Every rule has
 * a running and a harmless case; inputs are byte buffers (NULs, no final
 * newline, CRLF) and are read only within their length.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/util.h"
#include "gitsentry/sequencer.h"

typedef struct {
    lz_gs_seq_kind kind;
    const char *buf;
    size_t len; /* 0: strlen(buf) */
    bool runs;
} seq_case;

#define S(s) s, sizeof(s) - 1 /* a literal with its NULs */

static const char *kind_name(lz_gs_seq_kind k)
{
    return k == LZ_GS_SEQ_TODO ? "todo" : k == LZ_GS_SEQ_STRATEGY ? "strategy" : "opts";
}

static bool run_kind(lz_gs_seq_kind kind, const char *buf, size_t len)
{
    if (kind == LZ_GS_SEQ_STRATEGY)
        return lz_gs_sequencer_strategy_runs(buf, len);
    if (kind == LZ_GS_SEQ_OPTS)
        return lz_gs_sequencer_opts_runs(buf, len);
    return lz_gs_sequencer_todo_runs(buf, len);
}

static void check(const seq_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t len = cases[i].len ? cases[i].len : strlen(cases[i].buf);
        /* A copy of exactly len bytes on the heap: reading past it is an
         * error AddressSanitizer reports. */
        char *copy = lz_xmalloc(len ? len : 1);
        memcpy(copy, cases[i].buf, len);
        bool got = run_kind(cases[i].kind, copy, len);
        bool via = lz_gs_sequencer_file_runs(cases[i].kind, copy, len);
        free(copy);
        if (got != cases[i].runs || via != got)
            print_error("case %zu (%s, \"%.*s\"): runs %d, dispatch %d, expected %d\n", i,
                        kind_name(cases[i].kind), (int) len, cases[i].buf, got, via, cases[i].runs);
        assert_int_equal(got, cases[i].runs);
        assert_int_equal(via, got);
    }
}

static void test_todo(void **state)
{
    (void) state;
    static const seq_case cases[] = {
        { LZ_GS_SEQ_TODO, "", 0, false },
        { LZ_GS_SEQ_TODO, "pick 1234abcd subject\nreword 5678 other\n", 0, false },
        { LZ_GS_SEQ_TODO, "pick 1 a\nexec make test\n", 0, true },
        { LZ_GS_SEQ_TODO, "x make\n", 0, true },
        { LZ_GS_SEQ_TODO, "exec", 0, true }, /* no final newline */
        { LZ_GS_SEQ_TODO, "x", 0, true },
        { LZ_GS_SEQ_TODO, " \t exec\tcmd\n", 0, true }, /* Git skips leading blanks */
        { LZ_GS_SEQ_TODO, "exec\r\n", 0, true },
        { LZ_GS_SEQ_TODO, "x\r\n", 0, true },
        { LZ_GS_SEQ_TODO, "pick 1\n\n\nx true", 0, true },
        /* The first word only, exactly. */
        { LZ_GS_SEQ_TODO, "executable 1\n", 0, false },
        { LZ_GS_SEQ_TODO, "xx 1\n", 0, false },
        { LZ_GS_SEQ_TODO, "EXEC cmd\n", 0, false },
        { LZ_GS_SEQ_TODO, "pick 1 exec\n", 0, false },
        { LZ_GS_SEQ_TODO, "# exec cmd\n", 0, false },
        { LZ_GS_SEQ_TODO, "\vexec cmd\n", 0, false }, /* only blanks and tabs skipped */
        /* A NUL ends what is seen of its line, not the file. */
        { LZ_GS_SEQ_TODO, S("\0exec cmd\n"), false },
        { LZ_GS_SEQ_TODO, S("pick\0\nexec cmd\n"), true },
        { LZ_GS_SEQ_TODO, S("ex\0ec cmd\n"), false },
        { LZ_GS_SEQ_TODO, S("x\0 cmd\n"), true },
    };
    check(cases, LZ_ARRAY_SIZE(cases));
}

static void test_strategy(void **state)
{
    (void) state;
    static const seq_case cases[] = {
        { LZ_GS_SEQ_STRATEGY, "", 0, false },
        { LZ_GS_SEQ_STRATEGY, "ort\n", 0, false },
        { LZ_GS_SEQ_STRATEGY, "recursive", 0, false },
        { LZ_GS_SEQ_STRATEGY, "  octopus \t\r\n", 0, false },
        { LZ_GS_SEQ_STRATEGY, "resolve\nours\nsubtree\n", 0, false },
        { LZ_GS_SEQ_STRATEGY, "evil\n", 0, true },
        { LZ_GS_SEQ_STRATEGY, "../../tmp/x\n", 0, true },
        { LZ_GS_SEQ_STRATEGY, "ORT\n", 0, true },     /* exactly Git's names */
        { LZ_GS_SEQ_STRATEGY, "ort x\n", 0, true },   /* the whole line is the name */
        { LZ_GS_SEQ_STRATEGY, "\"ort\"\n", 0, true }, /* no quotes here */
        { LZ_GS_SEQ_STRATEGY, "\n", 0, true },        /* an empty line is no strategy */
        { LZ_GS_SEQ_STRATEGY, "ort\n\n", 0, true },
        { LZ_GS_SEQ_STRATEGY, "ort\nevil", 0, true },
        { LZ_GS_SEQ_STRATEGY, S("ort\0evil\n"), false }, /* seen up to the NUL */
        { LZ_GS_SEQ_STRATEGY, S("\0"), true },
    };
    check(cases, LZ_ARRAY_SIZE(cases));
}

static void test_opts(void **state)
{
    (void) state;
    static const seq_case cases[] = {
        { LZ_GS_SEQ_OPTS, "", 0, false },
        { LZ_GS_SEQ_OPTS, "[options]\n\tno-commit = true\n", 0, false },
        { LZ_GS_SEQ_OPTS, "[options]\n\tstrategy = ort\n", 0, false },
        { LZ_GS_SEQ_OPTS, "\tstrategy = \"recursive\"\n", 0, false },
        { LZ_GS_SEQ_OPTS, "Strategy=ours", 0, false }, /* keys in any case */
        { LZ_GS_SEQ_OPTS, "STRATEGY\t=\t subtree \r\n", 0, false },
        { LZ_GS_SEQ_OPTS, "strategy =\n", 0, false }, /* an empty value */
        { LZ_GS_SEQ_OPTS, "strategy = \"\"\n", 0, false },
        { LZ_GS_SEQ_OPTS, "[options] strategy = ort\n", 0, false }, /* anywhere on the line */
        { LZ_GS_SEQ_OPTS, "\tstrategy = evil\n", 0, true },
        { LZ_GS_SEQ_OPTS, "\tstrategy = \"evil\"\n", 0, true },
        { LZ_GS_SEQ_OPTS, "\tstrategy = \"ort\n", 0, true }, /* half quoted */
        { LZ_GS_SEQ_OPTS, "[options] StRaTeGy = x\n", 0, true },
        { LZ_GS_SEQ_OPTS, "\tstrategy\n", 0, true }, /* not key = value: refused */
        { LZ_GS_SEQ_OPTS, "\tstrategy", 0, true },
        { LZ_GS_SEQ_OPTS, "\tstrategy-option = theirs\n", 0, true },
        { LZ_GS_SEQ_OPTS, "\tstrategy : ort\n", 0, true },
        { LZ_GS_SEQ_OPTS, "a\nb\nstrategy = ort\nstrategy = no\n", 0, true },
        /* The first "strategy" on a line decides. */
        { LZ_GS_SEQ_OPTS, "strategy = ort # strategy = evil\n", 0, true },
        { LZ_GS_SEQ_OPTS, "x-strategy = ort\n", 0, false },
        /* Up to the NUL of each line. */
        { LZ_GS_SEQ_OPTS, S("strat\0egy = evil\n"), false },
        { LZ_GS_SEQ_OPTS, S("strategy = ort\0evil\n"), false },
        { LZ_GS_SEQ_OPTS, S("strategy\0 = ort\n"), true },
        { LZ_GS_SEQ_OPTS, S("\0\nstrategy = evil\n"), true },
        /* Non-ASCII bytes never fold into the key. */
        { LZ_GS_SEQ_OPTS, "\xd3trategy = evil\n", 0, false },
    };
    check(cases, LZ_ARRAY_SIZE(cases));
}

/* The length bounds what is read: a longer buffer's tail is never seen. */
static void test_bounded(void **state)
{
    (void) state;
    const char buf[] = "pick 1\nexec evil\n";
    assert_false(lz_gs_sequencer_todo_runs(buf, 7));
    assert_true(lz_gs_sequencer_todo_runs(buf, 11));
    assert_true(lz_gs_sequencer_todo_runs(buf, sizeof(buf) - 1));
    const char opts[] = "strategy = ort-evil";
    assert_false(lz_gs_sequencer_opts_runs(opts, 14));
    assert_true(lz_gs_sequencer_opts_runs(opts, sizeof(opts) - 1));
    assert_false(lz_gs_sequencer_strategy_runs("ortx", 3));
    assert_false(lz_gs_sequencer_todo_runs(NULL, 0));

    /* One long line (no limit on its length). */
    size_t n = (size_t) 1 << 20;
    char *big = lz_xmalloc(n);
    memset(big, ' ', n);
    memcpy(big + n - 4, "exec", 4);
    assert_true(lz_gs_sequencer_todo_runs(big, n));
    memcpy(big + n - 4, "pick", 4);
    assert_false(lz_gs_sequencer_todo_runs(big, n));
    free(big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_todo),
        cmocka_unit_test(test_strategy),
        cmocka_unit_test(test_opts),
        cmocka_unit_test(test_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
