/* SPDX-License-Identifier: Apache-2.0
 *
 * The text of an escalation prompt (FR-5, DX-4), composed by the
 * coordinator and shown by the CLI of the owning session only. What will
 * run is shown completely and unambiguously:
 *
 *  - the profile, the session, the working directory, the executable and
 *    every argument as a separate, numbered, single-quoted item;
 *  - inside an item, a backslash is shown as \\ and a quote as \', and
 *    every byte a terminal could act on (controls, escape sequences, bidi
 *    and zero-width characters, invalid UTF-8) as \xNN (lz_text_printable):
 *    nothing is interpreted, and an escape the agent typed as text cannot
 *    pass for one Lazaret wrote;
 *  - the justification is labelled as the agent's words and is the only
 *    item ever cut (visibly, with the number of bytes left out): the
 *    executable and arguments are always shown in full (the mailbox bounds
 *    them, mailbox.h).
 *
 * The CLI escapes the text once more when it prints it (idempotent).
 */
#ifndef LAZARET_COORDINATOR_PROMPT_H
#define LAZARET_COORDINATOR_PROMPT_H

#include <stddef.h>

/* Bytes of the justification shown before it is cut. */
#define LZ_PROMPT_WHY_SHOWN 300

typedef struct lz_prompt_fields {
    const char *profile;
    const char *session_id;
    const char *cwd;   /* the request's working directory (sandbox path) */
    char *const *argv; /* argc >= 1 */
    size_t argc;
    const char *why;      /* the agent's justification, "" when none */
    unsigned number;      /* the request's number, shown in the header (0: none) */
    const char *resolved; /* the host file argv[0] reaches, when not argv[0] itself */
    const char *host_cwd; /* where it runs on this machine, when not the same place */
} lz_prompt_fields;

/* The prompt's lines, newline-terminated, without the question itself.
 * Newly allocated. */
char *lz_prompt_text(const lz_prompt_fields *f);

/* One item as the prompt shows it: quoted and escaped as above, cut after
 * max bytes of the original (0: never). Newly allocated. */
char *lz_prompt_item(const char *s, size_t max);

#endif
