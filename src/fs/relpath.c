/* SPDX-License-Identifier: Apache-2.0 */
#include "fs/relpath.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"

char *lz_rel_join(const char *rel, const char *name)
{
    return (!rel[0] || strcmp(rel, ".") == 0) ? lz_xstrdup(name) : lz_xasprintf("%s/%s", rel, name);
}

char *lz_lexical_rel(const char *root, const char *path)
{
    size_t rl = strlen(root);
    if (strncmp(path, root, rl) != 0 || path[rl] != '/')
        return NULL;
    _cleanup_free_ char *copy = lz_xstrdup(path + rl + 1);
    char *out = lz_xcalloc(strlen(copy) + 2, 1);
    size_t n = 0;
    for (char *save = NULL, *part = strtok_r(copy, "/", &save); part;
         part = strtok_r(NULL, "/", &save)) {
        if (strcmp(part, ".") == 0)
            continue;
        if (strcmp(part, "..") == 0) {
            if (n == 0) {
                free(out);
                return NULL;
            }
            while (n > 0 && out[n - 1] != '/')
                n--;
            if (n > 0)
                n--;
            out[n] = '\0';
            continue;
        }
        if (n)
            out[n++] = '/';
        memcpy(out + n, part, strlen(part) + 1);
        n += strlen(part);
    }
    if (n == 0) {
        free(out);
        return NULL;
    }
    return out;
}

bool lz_path_within(const char *path, const char *root)
{
    size_t n = strlen(root);
    return strncmp(path, root, n) == 0 && (path[n] == '/' || path[n] == '\0');
}
