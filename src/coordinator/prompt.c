/* SPDX-License-Identifier: Apache-2.0 */
#include "coordinator/prompt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/util.h"

char *lz_prompt_item(const char *s, size_t max)
{
    return lz_text_quoted_ascii(s, max);
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
                                   "command on this computer.\n",
                                   f->number)
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
