/* SPDX-License-Identifier: Apache-2.0
 *
 * libFuzzer target for the Git Sentry's reading of a stopped sequencer's
 * files (src/gitsentry/sequencer.c, sequencer.h): the todo lists,
 * `strategy` and `opts` a sandbox writes into a Git directory, which the
 * host's `git rebase --continue` would carry out. Every input is given to
 * each of the three readings, as a heap copy of exactly its length (a read
 * past it is an AddressSanitizer report).
 *
 * Invariants checked (a violation aborts, which libFuzzer records as a
 * crash):
 *  - each reading answers as the oracle below does: the check as the
 *    audit made it before the pure parser (getline(3) over the file, each
 *    line handled as a C string), kept here verbatim, so that the parser
 *    neither misses nor invents anything;
 *  - lz_gs_sequencer_file_runs() gives the same answer for each kind;
 *  - the answer depends only on the bytes within the length (the same
 *    input with a trailing "\nexec x" beyond the length answers the same).
 *
 * Run: build-dir/tests/fuzz/fuzz_sequencer -dict=tests/fuzz/fuzz_sequencer.dict
 *          -max_total_time=180 NEW_CORPUS_DIR tests/fuzz/corpus/fuzz_sequencer
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "gitsentry/sequencer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_NAME "fuzz_sequencer"
#include "fuzz_check.h"

/* The oracle: the line loop of sequencer_runs_something() before
 * sequencer.h, unchanged but for reading from f. */
static bool oracle(FILE *f, bool is_strategy, bool is_opts)
{
    static const char *const strategies[] = { "ort",     "recursive", "resolve",
                                              "octopus", "ours",      "subtree" };
    bool found = false;
    char *line = NULL;
    size_t cap = 0;
    while (!found && getline(&line, &cap, f) >= 0) {
        char *c = line + strspn(line, " \t");
        if (is_strategy || is_opts) {
            if (is_opts) {
                char *k = strcasestr(c, "strategy");
                if (!k)
                    continue;
                c = k + 8;
                c += strspn(c, " \t");
                if (*c != '=') {
                    found = true; /* not a plain key = value: refuse */
                    continue;
                }
                c++;
                c += strspn(c, " \t");
            }
            size_t w = strlen(c);
            while (w && strchr(" \t\r\n", c[w - 1]))
                w--;
            if (is_opts && w >= 2 && c[0] == '"' && c[w - 1] == '"') {
                c++;
                w -= 2;
            }
            bool known = false;
            for (size_t k = 0; !known && k < LZ_ARRAY_SIZE(strategies); k++)
                known = w == strlen(strategies[k]) && strncmp(c, strategies[k], w) == 0;
            found = !known && (w > 0 || is_strategy);
        } else {
            size_t w = strcspn(c, " \t\r\n");
            found = (w == 1 && c[0] == 'x') || (w == 4 && strncmp(c, "exec", 4) == 0);
        }
    }
    free(line);
    return found;
}

static bool oracle_on(const uint8_t *data, size_t size, lz_gs_seq_kind kind)
{
    if (size == 0)
        return false; /* no line at all */
    void *copy = lz_xmalloc(size);
    memcpy(copy, data, size);
    FILE *f = fmemopen(copy, size, "r");
    CHECK(f != NULL);
    bool r = oracle(f, kind == LZ_GS_SEQ_STRATEGY, kind == LZ_GS_SEQ_OPTS);
    fclose(f);
    free(copy);
    return r;
}

static bool reading(lz_gs_seq_kind kind, const char *buf, size_t len)
{
    if (kind == LZ_GS_SEQ_STRATEGY)
        return lz_gs_sequencer_strategy_runs(buf, len);
    if (kind == LZ_GS_SEQ_OPTS)
        return lz_gs_sequencer_opts_runs(buf, len);
    return lz_gs_sequencer_todo_runs(buf, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const lz_gs_seq_kind kinds[] = { LZ_GS_SEQ_TODO, LZ_GS_SEQ_STRATEGY, LZ_GS_SEQ_OPTS };
    static const char tail[] = "\nexec x\nstrategy = evil\n";
    char *exact = lz_xmalloc(size ? size : 1);
    memcpy(exact, data, size);
    char *longer = lz_xmalloc(size + sizeof(tail));
    memcpy(longer, data, size);
    memcpy(longer + size, tail, sizeof(tail));
    for (size_t k = 0; k < LZ_ARRAY_SIZE(kinds); k++) {
        bool runs = reading(kinds[k], exact, size);
        CHECK(runs == oracle_on(data, size, kinds[k]));
        CHECK(lz_gs_sequencer_file_runs(kinds[k], exact, size) == runs);
        CHECK(reading(kinds[k], longer, size) == runs);
    }
    free(longer);
    free(exact);
    return 0;
}
