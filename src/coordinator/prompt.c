/* SPDX-License-Identifier: Apache-2.0 */
#include "coordinator/prompt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

char *lz_prompt_item(const char *s, size_t max)
{
    size_t n = strlen(s), shown = n;
    if (max && n > max) {
        shown = max;
        /* Do not split a UTF-8 sequence: back up to a lead byte. */
        while (shown > 0 && ((unsigned char) s[shown] & 0xc0) == 0x80)
            shown--;
    }
    /* Backslash and quote first, so that what lz_text_printable writes
     * (\xNN) is the only single backslash in the result. */
    char *q = lz_xmalloc(2 * shown + 1);
    size_t k = 0;
    for (size_t i = 0; i < shown; i++) {
        if (s[i] == '\\' || s[i] == '\'')
            q[k++] = '\\';
        q[k++] = s[i];
    }
    q[k] = '\0';
    char *p = lz_text_printable(q);
    free(q);
    char *out = shown < n ? lz_xasprintf("'%s'… (%zu more bytes not shown)", p, n - shown)
                          : lz_xasprintf("'%s'", p);
    free(p);
    return out;
}

/* Append a line "  label: item" to *buf. */
static void add_line(char **buf, const char *label, const char *item)
{
    char *line = lz_xasprintf("%s  %-18s %s\n", *buf, label, item);
    free(*buf);
    *buf = line;
}

char *lz_prompt_text(const lz_prompt_fields *f)
{
    char *buf = lz_xstrdup("Host escalation request: the sandbox asks to run a command on "
                           "this computer.\n");
    char *item = lz_prompt_item(f->profile, 0);
    add_line(&buf, "profile:", item);
    free(item);
    item = lz_prompt_item(f->session_id, 0);
    add_line(&buf, "session:", item);
    free(item);
    item = lz_prompt_item(f->cwd, 0);
    add_line(&buf, "working directory:", item);
    free(item);
    item = lz_prompt_item(f->argv[0], 0);
    add_line(&buf, "executable:", item);
    free(item);
    for (size_t i = 1; i < f->argc; i++) {
        char label[32];
        snprintf(label, sizeof(label), "argument %zu:", i);
        item = lz_prompt_item(f->argv[i], 0);
        add_line(&buf, label, item);
        free(item);
    }
    if (f->argc == 1)
        add_line(&buf, "arguments:", "(none)");
    if (f->why && *f->why) {
        item = lz_prompt_item(f->why, LZ_PROMPT_WHY_SHOWN);
        add_line(&buf, "the agent says:", item);
        free(item);
    }
    return buf;
}
