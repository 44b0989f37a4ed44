/* SPDX-License-Identifier: Apache-2.0
 *
 * Git Sentry: reading a stopped sequencer's files (a rebase, cherry-pick or
 * am keeps its plan in the Git directory, and `git rebase --continue` on
 * the host carries it out). Would the files the sandbox wrote make the
 * host's Git run a command of the sandbox's: a todo line whose first word
 * is `exec` or `x`, or a merge strategy other than Git's own (Git runs
 * `git merge-<strategy>`, which a name with a '/' turns into a path)?
 *
 * Pure functions over a byte buffer: they read exactly buf[0..len) and
 * nothing else, allocate nothing and never fail. A file is read as lines
 * ending in '\n' (the last one may lack it), each seen up to its first NUL
 * byte. Git has no line length limit: neither have these. Used by the
 * sequencer audit (sequencer.c), tested by tests/unit/test_sequencer.c
 * and tests/fuzz/fuzz_sequencer.c.
 */
#ifndef LAZARET_GITSENTRY_SEQUENCER_H
#define LAZARET_GITSENTRY_SEQUENCER_H

#include <stdbool.h>
#include <stddef.h>

/* A file larger than this is taken as running something unread. */
#define LZ_GS_SEQUENCER_FILE_MAX ((size_t) 64 << 20)

/* How a file of a sequencer directory is read. */
typedef enum lz_gs_seq_kind {
    LZ_GS_SEQ_TODO,     /* git-rebase-todo, git-rebase-todo.backup, todo, done */
    LZ_GS_SEQ_STRATEGY, /* strategy: the whole line is the strategy's name */
    LZ_GS_SEQ_OPTS,     /* opts: a Git configuration file */
} lz_gs_seq_kind;

/* A todo list: does a line's first word (after blanks and tabs) read
 * `exec` or `x`? */
bool lz_gs_sequencer_todo_runs(const char *buf, size_t len);

/* `strategy`: is any line (blanks around it dropped) something other than
 * one of Git's own strategies (ort, recursive, resolve, octopus, ours,
 * subtree)? An empty line is not one of them. */
bool lz_gs_sequencer_strategy_runs(const char *buf, size_t len);

/* `opts` (keys in any case, values maybe quoted): does a line that names
 * `strategy` (anywhere on it, in any case: `[options] strategy = x` is
 * valid configuration too) go on otherwise than `= <one of Git's own>`?
 * Anything but `=` after the name (blanks skipped) counts as running
 * something; an empty value does not. */
bool lz_gs_sequencer_opts_runs(const char *buf, size_t len);

/* The one of the three above for a file of this kind. */
bool lz_gs_sequencer_file_runs(lz_gs_seq_kind kind, const char *buf, size_t len);

#endif
