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
    char *t = lz_text_printable(q);
    free(q);
    /* ASCII only: what is left above it (letters of other scripts, and
     * look-alikes of the quote such as U+02BC) is shown as \xNN too, so
     * that nothing inside an item can pass for Lazaret's own quoting or
     * labels (attack round i11c, C1). */
    size_t tn = strlen(t), hi = 0;
    for (size_t i = 0; i < tn; i++)
        hi += (unsigned char) t[i] >= 0x80;
    char *p = lz_xmalloc(tn + 3 * hi + 1);
    k = 0;
    for (size_t i = 0; i < tn; i++) {
        unsigned char ch = (unsigned char) t[i];
        if (ch >= 0x80) {
            snprintf(p + k, 5, "\\x%02x", ch);
            k += 4;
        } else {
            p[k++] = (char) ch;
        }
    }
    p[k] = '\0';
    free(t);
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
    char *buf = f->number
                    ? lz_xasprintf("Host escalation request #%u: the sandbox asks to run a "
                                   "command on this computer.\n", f->number)
                    : lz_xstrdup("Host escalation request: the sandbox asks to run a command on "
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
    if (f->host_cwd) {
        item = lz_prompt_item(f->host_cwd, 0);
        add_line(&buf, "runs on this machine in:", item);
        free(item);
    }
    item = lz_prompt_item(f->argv[0], 0);
    add_line(&buf, "executable:", item);
    free(item);
    if (f->resolved) {
        item = lz_prompt_item(f->resolved, 0);
        add_line(&buf, "which is the file:", item);
        free(item);
    }
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
    /* The summary right above the question: whatever scrolled, the line
     * next to the answer names what runs. */
    item = lz_prompt_item(f->argv[0], 120);
    char *sum = lz_xasprintf("%s  => runs %s with %zu argument%s\n", buf, item, f->argc - 1,
                             f->argc == 2 ? "" : "s");
    free(item);
    free(buf);
    return sum;
}
