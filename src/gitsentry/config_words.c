/* SPDX-License-Identifier: Apache-2.0
 *
 * Git Sentry: the words of a Git configuration value that name places of
 * the workspace — programs, scripts, hooks and template directories —
 * found the way the host's Git (and the shell it runs a `!` alias in)
 * would find them, and protected read-only (config_sources.c asks Git for
 * the values; docs/git.md "Programs and hooks named relative to a work
 * tree").
 */
#include <errno.h>
#include <glob.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "fs/confined.h"
#include "fs/relpath.h"
#include "gitsentry/internal.h"

/* A path value of Git's configuration made absolute the way Git does: `~/`
 * is the developer's home, `~user/` that user's, a relative one is
 * relative to `base`. */
char *lz_gs_expand_git_path(const char *v, const char *base)
{
    if (v[0] == '/')
        return lz_xstrdup(v);
    if (v[0] == '~') {
        const char *slash = strchr(v, '/');
        if (!slash)
            return NULL;
        const char *home = getenv("HOME");
        if (slash > v + 1) {
            /* `~name/`: Git looks the user up; the developer's own name
             * is as good as `~/` (attack round a28, F7). */
            _cleanup_free_ char *name = lz_xstrndup(v + 1, (size_t) (slash - v - 1));
            struct passwd *pw = getpwnam(name);
            home = pw ? pw->pw_dir : NULL;
        }
        if (!home || home[0] != '/')
            return NULL;
        return lz_xasprintf("%s%s", home, slash);
    }
    return lz_xasprintf("%s/%s", base, v);
}

/* The absolute path abs relative to the workspace, NULL when outside it:
 * "." and ".." taken lexically first, since a value relative to the top
 * of an enclosing work tree ("./app/tools/x" from mono/, the workspace
 * mono/app) only reaches the workspace once normalised. */
char *lz_gs_ws_rel(const builder *b, const char *abs)
{
    _cleanup_free_ char *norm = lz_lexical_rel("", abs);
    if (!norm)
        return NULL;
    _cleanup_free_ char *full = lz_xasprintf("/%s", norm);
    return lz_lexical_rel(b->ws, full);
}

/* Does the configuration key (as `git config --list` prints it: section
 * and name lowercased, the subsection as written) name a program the
 * host's Git runs? Those whose value is a command line or a program path
 * (attack round a27b, G6; a28, F2 added what it found missing). Every
 * value's words are protected when they name workspace files; this list
 * only decides which refuse a symlink (protect_value_words). */
static bool key_names_program(const char *key)
{
    const char *first = strchr(key, '.');
    const char *last = strrchr(key, '.');
    if (!first)
        return false;
    size_t sl = (size_t) (first - key);
    const char *name = last + 1;
    bool sub = first != last;
#define SECTION(s) (sl == sizeof(s) - 1 && strncmp(key, s, sl) == 0)
#define NAME(n) (strcmp(name, n) == 0)
    if (SECTION("alias") || SECTION("pager") || SECTION("sendemail"))
        return true;
    if (SECTION("interactive"))
        return NAME("difffilter");
    if (SECTION("instaweb"))
        return NAME("httpd");
    if (!sub) {
        if (SECTION("core"))
            return NAME("fsmonitor") || NAME("editor") || NAME("pager") || NAME("sshcommand") ||
                   NAME("askpass") || NAME("gitproxy") || NAME("alternaterefscommand");
        if (SECTION("sequence"))
            return NAME("editor");
        if (SECTION("uploadpack"))
            return NAME("packobjectshook");
        if (SECTION("diff"))
            return NAME("external");
    } else {
        if (SECTION("filter"))
            return NAME("clean") || NAME("smudge") || NAME("process");
        if (SECTION("diff"))
            return NAME("textconv") || NAME("command");
        if (SECTION("merge"))
            return NAME("driver");
        if (SECTION("difftool") || SECTION("mergetool"))
            return NAME("cmd") || NAME("path");
        if (SECTION("remote"))
            return NAME("uploadpack") || NAME("receivepack");
        if (SECTION("tar") || SECTION("trailer"))
            return NAME("command") || NAME("cmd");
        if (SECTION("submodule"))
            return NAME("update");
        if (SECTION("browser") || SECTION("man"))
            return NAME("cmd") || NAME("path");
        if (SECTION("guitool"))
            return NAME("cmd");
    }
    if (SECTION("gpg"))
        return NAME("program") || NAME("defaultkeycommand");
    if (SECTION("credential"))
        return NAME("helper");
    return false;
#undef SECTION
#undef NAME
}

/* A key that names a program names a symlink of the workspace (or a path
 * through one): refused (protect_value_words). */
static int symlinked_program(const builder *b, const char *key, const char *rel, lz_error **err)
{
    lz_error_set(err, 0,
                 "the host's Git configuration (%s) names %s/%s, which is or passes through a "
                 "symbolic link inside the workspace, as a program: the sandbox could point it "
                 "at a program of its own",
                 key, b->ws, rel);
    return lz_error_hint(err, "if you did not make that link, remove it (the sandbox may have); "
                              "otherwise name the program by its real path (readlink -f shows "
                              "it) in the configuration, or move it out of the workspace; then "
                              "run again");
}

/* The workspace-relative path of one word of a value taken against base,
 * or NULL when it does not lie inside the workspace. Through the host's
 * symlinks too (a HOME that is a symlink, an absolute path through a
 * symlinked directory above the workspace: attack round a28, F4). */
static char *word_in_workspace(const builder *b, const char *word, const char *base)
{
    _cleanup_free_ char *abs = lz_gs_expand_git_path(word, base);
    if (!abs)
        return NULL;
    char *rel = lz_gs_ws_rel(b, abs);
    if (rel)
        return rel;
    _cleanup_free_ char *canon = lz_canonicalize(abs, NULL);
    return canon ? lz_gs_ws_rel(b, canon) : NULL;
}

/* Is the key (its first n bytes) one naming a directory Git runs programs
 * from (protect_program_dir)? */
bool lz_gs_is_program_dir_key(const char *key, size_t n)
{
    return (n == 14 && strncmp(key, "core.hookspath", 14) == 0) ||
           (n == 16 && strncmp(key, "init.templatedir", 16) == 0);
}

/* A directory Git runs programs from — core.hooksPath, or init.templateDir
 * (whose hooks/ every `git init` and `git clone` on the host copies and
 * runs: round a28b, T) — given by the value v (relative to top, where Git
 * runs): when inside the workspace, made (every missing level: the sandbox
 * must not make them) and protected. */
int lz_gs_protect_program_dir(builder *b, const char *key, const char *v, const char *top,
                              lz_error **err)
{
    _cleanup_free_ char *abs = lz_gs_expand_git_path(v, top);
    _cleanup_free_ char *rel = abs ? lz_gs_ws_rel(b, abs) : NULL;
    if (!rel && abs) { /* through a host symlink into the workspace */
        _cleanup_free_ char *canon = lz_canonicalize(abs, NULL);
        if (canon)
            rel = lz_gs_ws_rel(b, canon);
    }
    if (!rel)
        return 0;
    struct stat st;
    /* Made when missing, but never from a value the shell still expands
     * (round a28c: `$HOME/…` taken as text made stray directories). */
    if (lz_lstat_confined(b->ws_fd, rel, &st) < 0 && errno == ENOENT && !strchr(v, '$')) {
        int fd = lz_mkdirs_confined(b->ws_fd, rel, rel, err);
        if (fd < 0)
            return -1;
        close(fd);
    }
    if (lz_gs_protect_if_exists(b, rel, err) < 0)
        return -1;
    if (strcmp(key, "core.hookspath") != 0)
        return 0;
    /* husky v9 sets core.hooksPath = .husky/_: the stubs it generates there
     * run the tracked .husky/<hook> one level up (attack round a27b, G3). A
     * hooks directory named `_` is that layout (husky's name for its
     * generated part): its parent is protected too, unless that is the
     * workspace itself (docs/git.md "Hook managers"). */
    const char *last = strrchr(rel, '/');
    if (last && strcmp(last + 1, "_") == 0) {
        _cleanup_free_ char *parent = lz_xstrndup(rel, (size_t) (last - rel));
        return lz_gs_protect_if_exists(b, parent, err);
    }
    return 0;
}

enum { MAX_BASES = 8, MAX_GLOB_MATCHES = 64 };

/* One path candidate `cand` of a value's word, taken against `base` (see
 * protect_value_words): a regular file of the workspace protected; a
 * symlink named as a program refused; a directory added to the bases. */
static int consider_path(builder *b, const char *key, bool program, const char *cand,
                         const char *base, char **bases, size_t *nbases, lz_error **err)
{
    _cleanup_free_ char *rel = word_in_workspace(b, cand, base);
    struct stat st;
    if (!rel || !*rel || strcmp(rel, ".") == 0)
        return 0;
    /* A bare command name is looked up in PATH, not here: a symlink of that
     * name is no program of the configuration (round a28b, D1: `ln -s
     * /bin/sh false` refused every start through Lazaret's own
     * core.fsmonitor=false). */
    bool path_like = strchr(cand, '/') != NULL;
    if (lz_lstat_confined(b->ws_fd, rel, &st) < 0)
        return errno == ELOOP && program && path_like ? symlinked_program(b, key, rel, err) : 0;
    if (S_ISLNK(st.st_mode) && program && path_like)
        return symlinked_program(b, key, rel, err);
    if (S_ISREG(st.st_mode))
        return lz_gs_protect_if_exists(b, rel, err);
    if (S_ISDIR(st.st_mode) && *nbases < MAX_BASES && cand[0] != '~')
        bases[(*nbases)++] = lz_xasprintf("%s/%s", b->ws, rel); /* for later relative words */
    return 0;
}

/* cand against every base, glob patterns (`*?[`) expanded first as the
 * shell would (round a28b, W: `!./tools/gl?b.sh`). */
static int consider_candidate(builder *b, const char *key, bool program, const char *cand,
                              char **bases, size_t *nbases, lz_error **err)
{
    int r = 0;
    for (size_t i = 0; i < *nbases && r == 0; i++) {
        if (!strpbrk(cand, "*?[")) {
            r = consider_path(b, key, program, cand, bases[i], bases, nbases, err);
            continue;
        }
        _cleanup_free_ char *pattern = lz_gs_expand_git_path(cand, bases[i]);
        glob_t g = { 0 };
        if (!pattern || glob(pattern, GLOB_NOSORT, NULL, &g) != 0) {
            globfree(&g);
            continue;
        }
        for (size_t m = 0; m < g.gl_pathc && m < MAX_GLOB_MATCHES && r == 0; m++)
            r = consider_path(b, key, program, g.gl_pathv[m], bases[i], bases, nbases, err);
        globfree(&g);
    }
    return r;
}

/* word with a leading $HOME/${HOME…} (the developer's home) or
 * $PWD/${PWD…} (where Git runs a `!` alias: the work tree's top) expanded;
 * NULL when it starts with neither. */
static char *expand_known_var(const char *word, const char *top)
{
    static const struct {
        const char *name;
        size_t len;
    } vars[] = { { "HOME", 4 }, { "PWD", 3 } };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(vars); i++) {
        const char *val = i == 0 ? getenv("HOME") : top;
        if (!val || val[0] != '/' || word[0] != '$')
            continue;
        const char *rest = NULL;
        if (strncmp(word + 1, vars[i].name, vars[i].len) == 0 &&
            (word[1 + vars[i].len] == '/' || !word[1 + vars[i].len]))
            rest = word + 1 + vars[i].len;
        else if (word[1] == '{' && strncmp(word + 2, vars[i].name, vars[i].len) == 0 &&
                 strchr("}:-?%#", word[2 + vars[i].len]) && strchr(word, '}'))
            rest = strchr(word, '}') + 1; /* ${HOME:?}, ${HOME%/}: the home all the same */
        if (rest)
            return lz_xasprintf("%s%s", val, rest);
    }
    return NULL;
}

/* A configuration value (of any key, attack round a28, F2: a list of the
 * keys that name programs always missed some) whose words name files of
 * the workspace: each such file is protected. Words are cut as a shell
 * would, roughly: quotes dropped (a quoted space stays in the word), a
 * backslash keeps the next character in the word, split at whitespace and
 * at `;&|()<>` and backquotes. Each word (an alias's leading `!` dropped)
 * gives path candidates: itself; what follows its last `=` (`--opt=./x.sh`),
 * also cut at `:` (`PATH=./tools/bin:$PATH`); what follows a one-letter
 * option (`-Ftools/ssh_config`); `$HOME`, `$PWD` (and `${HOME…}`) expanded,
 * any other leading `$NAME`/`${...}` dropped; and a candidate starting
 * with `/` (what followed `$(git rev-parse --show-toplevel)`) also taken as
 * relative (rounds a28b W, a28c). A relative candidate is taken against
 * the work tree's top, its `.git`, the workspace itself and every
 * directory an earlier word named (`!cd pkgs/app && ./tools/x.sh`, a28 F3;
 * a bare name in a `PATH=` directory). `-c core.hooksPath=DIR` (and
 * init.templateDir) inside a value protects DIR as the key itself would;
 * when DIR is computed (`$(…)`), every later directory word of the value
 * is taken as it. A symlink named as a program by a key that names
 * programs (key_names_program) refuses the start: the sandbox could point
 * it elsewhere, and a symlink cannot be bound read-only (docs/git.md). */
int lz_gs_protect_value_words(builder *b, const char *key, const char *value, const char *top,
                              lz_error **err)
{
    bool program = key_names_program(key);
    _cleanup_free_ char *copy = lz_xmalloc(strlen(value) + 1);
    char *o = copy;
    char quote = 0;
    for (const char *c = value; *c; c++) {
        if (quote && *c == quote)
            quote = 0;
        else if (!quote && (*c == '"' || *c == '\''))
            quote = *c;
        else if (*c == '\\' && c[1] && quote != '\'') /* kept in the word, even a space */
            *o++ = *++c == ' ' ? '\x01' : *c;
        else if (quote && *c == ' ')
            *o++ = '\x01'; /* restored below */
        else
            *o++ = strchr(";&|()<>`", *c) ? ' ' : *c;
    }
    *o = '\0';
    char *bases[MAX_BASES] = { lz_xstrdup(top), lz_xasprintf("%s/.git", top), lz_xstrdup(b->ws) };
    size_t nbases = 3;
    int r = 0;
    _cleanup_free_ char *dir_key = NULL; /* a -c key=DIR whose DIR is computed */
    for (char *save = NULL, *w = strtok_r(copy, " \t\n\r\f\v", &save); w && r == 0;
         w = strtok_r(NULL, " \t\n\r\f\v", &save)) {
        for (char *x = w; *x; x++)
            if (*x == '\x01')
                *x = ' ';
        if (w[0] == '!')
            w++;
        _cleanup_free_ char *word = expand_known_var(w, top);
        if (!word)
            word = lz_xstrdup(w);
        const char *eq = strrchr(word, '=');
        _cleanup_free_ char *eq_value = NULL;
        if (eq && eq > word && eq[1]) { /* -c core.hooksPath=DIR inside an alias */
            eq_value = expand_known_var(eq + 1, top);
            if (!eq_value)
                eq_value = lz_xstrdup(eq + 1);
            _cleanup_free_ char *k = lz_xstrndup(word, (size_t) (eq - word));
            for (char *x = k; *x; x++)
                *x = (char) (*x >= 'A' && *x <= 'Z' ? *x - 'A' + 'a' : *x);
            if (lz_gs_is_program_dir_key(k, strlen(k))) {
                if (eq_value[0] == '$') { /* computed: the directory comes later */
                    free(dir_key);
                    dir_key = TAKE_PTR(k);
                } else {
                    r = lz_gs_protect_program_dir(b, k, eq_value, top, err);
                }
            }
        }
        const char *cands[8] = { word, NULL };
        size_t nc = 1;
        _cleanup_free_ char *parts = eq_value ? lz_xstrdup(eq_value) : NULL;
        for (char *sp = NULL, *part = parts ? strtok_r(parts, ":", &sp) : NULL; part && nc < 5;
             part = strtok_r(NULL, ":", &sp))
            cands[nc++] = part;
        if (word[0] == '-' && word[1] && word[1] != '-' && word[2])
            cands[nc++] = word + 2;
        if (word[0] == '$') { /* $NAME or ${...}: what follows it */
            const char *rest = word[1] == '{' ? strchr(word, '}') : word + 1;
            if (rest && word[1] != '{')
                while (*rest == '_' || (*rest >= 'A' && *rest <= 'Z') ||
                       (*rest >= 'a' && *rest <= 'z') || (*rest >= '0' && *rest <= '9'))
                    rest++;
            else if (rest)
                rest++;
            cands[nc++] = rest && *rest ? rest : NULL;
        }
        for (size_t c = 0; c < nc && r == 0; c++) {
            if (!cands[c] || !*cands[c] || cands[c][0] == '$')
                continue;
            const char *variants[2] = { cands[c], cands[c][0] == '/' ? cands[c] + 1 : NULL };
            for (size_t v = 0; v < 2 && r == 0 && variants[v] && *variants[v]; v++) {
                size_t before = nbases;
                r = consider_candidate(b, key, program, variants[v], bases, &nbases, err);
                /* The computed hooks directory of an earlier -c key=$(…) */
                for (size_t i = before; r == 0 && dir_key && i < nbases; i++) {
                    _cleanup_free_ char *rel = lz_lexical_rel(b->ws, bases[i]);
                    if (rel)
                        r = lz_gs_protect_program_dir(b, dir_key, bases[i], top, err);
                }
            }
        }
    }
    for (size_t i = 0; i < nbases; i++)
        free(bases[i]);
    return r;
}
