/* SPDX-License-Identifier: Apache-2.0 */
#include "config/grammar.h"

#include <string.h>

static bool is_alnum(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool lz_profile_name_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64 || !is_alnum(s[0]))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!is_alnum(s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
            return false;
    /* "." and ".." cannot match the first-character rule; kept explicit
     * because the schema names them. */
    return strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

bool lz_env_name_valid(const char *s)
{
    if (!s[0] || !((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
        return false;
    for (const char *p = s + 1; *p; p++)
        if (!is_alnum(*p) && *p != '_')
            return false;
    return true;
}

/* Validate "c1/c2/.../cn" (no leading slash). */
static bool components_valid(const char *s, const char **what)
{
    if (!*s) {
        *what = "the path has an empty suffix";
        return false;
    }
    const char *p = s;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t) (slash - p) : strlen(p);
        if (n == 0) {
            *what = slash ? "the path has an empty component (repeated '/')"
                          : "the path has a trailing '/'";
            return false;
        }
        if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) {
            *what = "the path has a '.' or '..' component";
            return false;
        }
        if (!slash)
            return true;
        p = slash + 1;
    }
}

bool lz_abs_path_components_valid(const char *s, const char **what)
{
    if (s[0] != '/') {
        *what = "the path is not absolute";
        return false;
    }
    if (s[1] == '\0') {
        *what = "the path is the root directory";
        return false;
    }
    return components_valid(s + 1, what);
}

/* Characters that would be an expansion, variable, glob or shell form in some
 * other tool (POSIX sh, bash extglob, ksh, csh history, process substitution)
 * and control characters. v1 host paths have exactly two expansions ("~/"
 * and "{profile_dir}/", both only as a prefix); everything else that a shell
 * could read differently is refused so that no reader can disagree about what
 * a path means. Spaces and non-ASCII UTF-8 stay allowed. */
static bool has_expansion_chars(const char *s, const char **what)
{
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char) *p;
        if (c < 0x20 || c == 0x7f) {
            *what = "the path contains a control character";
            return true;
        }
        switch (c) {
        case '~':
            /* "~user" style expansion happens only at a component start. */
            if (p != s && p[-1] != '/')
                break;
            __attribute__((fallthrough));
        case '$':
        case '{':
        case '}':
        case '*':
        case '?':
        case '[':
        case ']':
        case '`':
        case '\\':
        case '(':
        case ')':
        case '|':
        case '!':
        case '<':
        case '>':
        case ';':
        case '&':
        case '\'':
        case '"':
        case '#':
            *what = "the path contains an expansion, variable, glob or shell character";
            return true;
        default:
            break;
        }
    }
    return false;
}

bool lz_host_path_parse(const char *s, bool allow_profile_dir, lz_host_path_anchor *ret_anchor,
                        const char **ret_suffix, const char **what)
{
    static const char profile_prefix[] = "{profile_dir}/";
    lz_host_path_anchor anchor;
    const char *suffix;

    if (s[0] == '/') {
        anchor = LZ_HOST_ABSOLUTE;
        suffix = s + 1;
    } else if (s[0] == '~' && s[1] == '/') {
        anchor = LZ_HOST_HOME;
        suffix = s + 2;
    } else if (strncmp(s, profile_prefix, sizeof(profile_prefix) - 1) == 0) {
        if (!allow_profile_dir) {
            *what = "'{profile_dir}/' is allowed only in a volume's host path";
            return false;
        }
        anchor = LZ_HOST_PROFILE_DIR;
        suffix = s + sizeof(profile_prefix) - 1;
    } else {
        *what = allow_profile_dir
                    ? "the path must be absolute or begin with exactly '~/' or '{profile_dir}/'"
                    : "the path must be absolute or begin with exactly '~/'";
        return false;
    }
    if (!components_valid(suffix, what))
        return false;
    if (has_expansion_chars(suffix, what))
        return false;
    *ret_anchor = anchor;
    *ret_suffix = anchor == LZ_HOST_ABSOLUTE ? s : suffix;
    return true;
}

bool lz_sandbox_path_valid(const char *s, const char **what)
{
    return lz_abs_path_components_valid(s, what);
}
