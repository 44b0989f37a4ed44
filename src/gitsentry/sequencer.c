/* SPDX-License-Identifier: Apache-2.0
 *
 * Git Sentry: stopped rebases, cherry-picks and ams: whether the sequencer state a
 * sandbox wrote would make the host's Git run a command, and the audit of
 * the sequencer directories.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "fs/confined.h"
#include "fs/relpath.h"
#include "gitsentry/internal.h"

/* A rebase, cherry-pick or am that stopped keeps its plan in the Git
 * directory, and `git rebase --continue` on the host carries it out: an
 * `exec` line of a todo list the sandbox wrote is a command the host's Git
 * runs. What exists at start is the developer's; what the sandbox made is
 * moved aside when its todo list would run a command, and in any case at
 * the end of the generation (docs/git.md). */

const char *const lz_gs_sequencer_dirs[LZ_GS_N_SEQUENCER_DIRS] = { "rebase-merge", "rebase-apply",
                                                                  "sequencer" };

/* Would the sequencer state in dfd make Git run a command of the sandbox's:
 * a todo line whose first word is `exec` or `x` (Git skips leading blanks
 * and has no line length limit: neither has this check), or a merge
 * strategy other than Git's own (Git runs `git merge-<strategy>`, which a
 * name with a '/' turns into a path)? Files too large to read are treated
 * as if they did. */
static bool sequencer_runs_something(int dfd)
{
    static const char *const strategies[] = { "ort", "recursive", "resolve", "octopus", "ours",
                                              "subtree" };
    static const char *const files[] = { "git-rebase-todo", "git-rebase-todo.backup", "todo",
                                         "done", "strategy", "opts" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(files); i++) {
        int fd = lz_open_confined(dfd, files[i], O_RDONLY | O_NONBLOCK, 0, files[i], NULL);
        struct stat st;
        if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (64 << 20))) {
            close(fd);
            return true;
        }
        FILE *f = fd >= 0 ? fdopen(fd, "re") : NULL;
        if (!f) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        bool is_strategy = strcmp(files[i], "strategy") == 0, is_opts = strcmp(files[i], "opts") == 0;
        bool found = false;
        char *line = NULL;
        size_t cap = 0;
        while (!found && getline(&line, &cap, f) >= 0) {
            char *c = line + strspn(line, " \t");
            if (is_strategy || is_opts) {
                /* `strategy`: Git takes the whole line. `opts` is a config
                 * file (keys in any case, values maybe quoted): any line
                 * naming a strategy must name exactly one of Git's own. */
                if (is_opts) {
                    /* anywhere on the line: `[options] strategy = x` is
                     * valid Git configuration too */
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
        fclose(f);
        if (found)
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
