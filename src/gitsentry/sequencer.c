/* SPDX-License-Identifier: Apache-2.0
 *
 * Git Sentry: stopped rebases, cherry-picks and ams: whether the sequencer state a
 * sandbox wrote would make the host's Git run a command (sequencer.h: the
 * pure reading of its files), and the audit of the sequencer directories.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "fs/confined.h"
#include "fs/relpath.h"
#include "gitsentry/internal.h"
#include "gitsentry/sequencer.h"

/* A rebase, cherry-pick or am that stopped keeps its plan in the Git
 * directory, and `git rebase --continue` on the host carries it out: an
 * `exec` line of a todo list the sandbox wrote is a command the host's Git
 * runs. What exists at start is the developer's; what the sandbox made is
 * moved aside when its todo list would run a command, and in any case at
 * the end of the generation (docs/git.md). */

const char *const lz_gs_sequencer_dirs[LZ_GS_N_SEQUENCER_DIRS] = { "rebase-merge", "rebase-apply",
                                                                   "sequencer" };

/* ---- reading the files (sequencer.h) ------------------------------------ */

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Is any line running something? A line is given with its '\n' (as
 * getline(3) reads it) and up to its first NUL byte, never beyond. */
typedef bool line_runs_fn(const char *line, size_t n);

static bool any_line_runs(const char *buf, size_t len, line_runs_fn *runs)
{
    for (size_t i = 0; i < len;) {
        const char *line = buf + i;
        const char *nl = memchr(line, '\n', len - i);
        size_t n = nl ? (size_t) (nl - line) + 1 : len - i;
        i += n;
        const char *nul = memchr(line, '\0', n);
        if (nul)
            n = (size_t) (nul - line);
        if (runs(line, n))
            return true;
    }
    return false;
}

/* Skip blanks and tabs at the front of c[0..*n). */
static const char *skip_blanks(const char *c, size_t *n)
{
    while (*n && is_blank(*c)) {
        c++;
        (*n)--;
    }
    return c;
}

static bool git_strategy(const char *c, size_t n)
{
    static const char *const strategies[] = { "ort",     "recursive", "resolve",
                                              "octopus", "ours",      "subtree" };
    for (size_t k = 0; k < LZ_ARRAY_SIZE(strategies); k++)
        if (n == strlen(strategies[k]) && memcmp(c, strategies[k], n) == 0)
            return true;
    return false;
}

static bool todo_line_runs(const char *line, size_t n)
{
    const char *c = skip_blanks(line, &n);
    size_t w = 0;
    while (w < n && !is_space(c[w]))
        w++;
    return (w == 1 && c[0] == 'x') || (w == 4 && memcmp(c, "exec", 4) == 0);
}

/* The value c[0..n), spaces at its end dropped (and its quotes, unquote):
 * not one of Git's own strategies? */
static bool value_runs(const char *c, size_t n, bool unquote, bool empty_runs)
{
    while (n && is_space(c[n - 1]))
        n--;
    if (unquote && n >= 2 && c[0] == '"' && c[n - 1] == '"') {
        c++;
        n -= 2;
    }
    return !git_strategy(c, n) && (n > 0 || empty_runs);
}

/* `strategy`: Git takes the whole line. */
static bool strategy_line_runs(const char *line, size_t n)
{
    const char *c = skip_blanks(line, &n);
    return value_runs(c, n, false, true);
}

/* The first "strategy", in any case (ASCII), in c[0..n): its offset, or n. */
static size_t find_strategy(const char *c, size_t n)
{
    static const char key[] = "strategy";
    size_t kl = sizeof(key) - 1;
    for (size_t i = 0; i + kl <= n; i++) {
        size_t k = 0;
        while (k < kl && (c[i + k] | 0x20) == key[k])
            k++;
        if (k == kl)
            return i;
    }
    return n;
}

/* `opts` is a config file (keys in any case, values maybe quoted): any line
 * naming a strategy must name exactly one of Git's own. */
static bool opts_line_runs(const char *line, size_t n)
{
    const char *c = skip_blanks(line, &n);
    size_t at = find_strategy(c, n);
    if (at == n)
        return false;
    c += at + 8;
    n -= at + 8;
    c = skip_blanks(c, &n);
    if (n == 0 || *c != '=')
        return true; /* not a plain key = value: refuse */
    c++;
    n--;
    c = skip_blanks(c, &n);
    return value_runs(c, n, true, false);
}

bool lz_gs_sequencer_todo_runs(const char *buf, size_t len)
{
    return any_line_runs(buf, len, todo_line_runs);
}

bool lz_gs_sequencer_strategy_runs(const char *buf, size_t len)
{
    return any_line_runs(buf, len, strategy_line_runs);
}

bool lz_gs_sequencer_opts_runs(const char *buf, size_t len)
{
    return any_line_runs(buf, len, opts_line_runs);
}

bool lz_gs_sequencer_file_runs(lz_gs_seq_kind kind, const char *buf, size_t len)
{
    if (kind == LZ_GS_SEQ_STRATEGY)
        return lz_gs_sequencer_strategy_runs(buf, len);
    if (kind == LZ_GS_SEQ_OPTS)
        return lz_gs_sequencer_opts_runs(buf, len);
    return lz_gs_sequencer_todo_runs(buf, len);
}

/* ---- the audit ---------------------------------------------------------- */

/* All of fd, at most LZ_GS_SEQUENCER_FILE_MAX bytes: NULL when there is
 * more (it grew since its size was read); a read error ends what is read. */
static char *read_bounded(int fd, size_t size_hint, size_t *ret_len)
{
    const size_t max = LZ_GS_SEQUENCER_FILE_MAX;
    size_t cap = (size_hint < max ? size_hint : max) + 1;
    char *buf = lz_xmalloc(cap);
    size_t len = 0;
    for (;;) {
        if (len == cap) {
            if (cap > max) {
                free(buf);
                return NULL;
            }
            cap = cap > max / 2 ? max + 1 : cap * 2;
            buf = lz_xrealloc(buf, cap, 1);
        }
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t) n;
    }
    if (len > max) {
        free(buf);
        return NULL;
    }
    *ret_len = len;
    return buf;
}

/* Would the sequencer state in dfd make Git run a command of the sandbox's
 * (sequencer.h)? Files too large to read, and anything but a regular file
 * under those names, are taken as if they did. */
static bool sequencer_runs_something(int dfd)
{
    static const struct {
        const char *name;
        lz_gs_seq_kind kind;
    } files[] = {
        { "git-rebase-todo", LZ_GS_SEQ_TODO },
        { "git-rebase-todo.backup", LZ_GS_SEQ_TODO },
        { "todo", LZ_GS_SEQ_TODO },
        { "done", LZ_GS_SEQ_TODO },
        { "strategy", LZ_GS_SEQ_STRATEGY },
        { "opts", LZ_GS_SEQ_OPTS },
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(files); i++) {
        int fd =
            lz_open_confined(dfd, files[i].name, O_RDONLY | O_NONBLOCK, 0, files[i].name, NULL);
        if (fd < 0)
            continue;
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
            st.st_size > (off_t) LZ_GS_SEQUENCER_FILE_MAX) {
            close(fd);
            return true;
        }
        size_t len = 0;
        char *buf = read_bounded(fd, (size_t) st.st_size, &len);
        close(fd);
        bool runs = !buf || lz_gs_sequencer_file_runs(files[i].kind, buf, len);
        free(buf);
        if (runs)
            return true;
    }
    return false;
}

/* The sequencer directories of the Git directory gdfd (= gd). */
int lz_gs_audit_sequencer(walk *w, int gdfd, const char *gd)
{
    lz_git_plan *p = w->p;
    for (size_t k = 0; k < LZ_ARRAY_SIZE(lz_gs_sequencer_dirs); k++) {
        _cleanup_free_ char *rel = lz_rel_join(gd, lz_gs_sequencer_dirs[k]);
        struct stat st;
        if (lz_gs_sight_lstat(p, gdfd, lz_gs_sequencer_dirs[k], &st) < 0)
            continue;
        bool ours = lz_gs_known(p->markers, p->n_markers, rel, &st);
        _cleanup_close_ int sfd = S_ISDIR(st.st_mode)
                                      ? lz_open_confined(gdfd, lz_gs_sequencer_dirs[k],
                                                         O_RDONLY | O_DIRECTORY, 0, rel, NULL)
                                      : -EBADF;
        if (sfd >= 0 && lz_gs_add_watch(w, sfd, rel, ROLE_SEQUENCER) < 0)
            return -1;
        if (sfd >= 0 && !sequencer_runs_something(sfd) && (ours || !p->final))
            continue;
        if (lz_gs_quarantine(w, gdfd, strcmp(gd, ".") ? gd : "", lz_gs_sequencer_dirs[k]) < 0)
            return -1;
    }
    return 0;
}
