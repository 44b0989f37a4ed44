/* SPDX-License-Identifier: Apache-2.0
 *
 * The host escalation prompt on the developer's terminal (FR-5;
 * docs/escalation.md): drawn whole on a clean screen or not at all, keys
 * typed as it appears are no answer, and notices that arrive meanwhile are
 * held back until it is gone. The coordinator holds the session's output
 * back while a prompt is up.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/internal.h"
#include "client/screen.h"
#include "common/text.h"
#include "common/util.h"
#include "protocol/messages.h"

#define HELD_NOTICES_MAX ((size_t) 16384)

/* The sandbox chooses when its prompt appears: possibly just as the
 * developer types "y" and Enter for the agent's own question (attack round
 * i11b, B7: that approved the prompt). Keys that arrive within this long
 * after the prompt was drawn answer nothing. */
#define PROMPT_GRACE_MS 1000

/* The prompt's last line: what to type. */
#define PROMPT_QUESTION "Type y and Enter to approve; anything else denies. Approve? [y/N] "
/* What lz_client_prompt_keys prints for keys typed too early. */
#define PROMPT_GRACE_NOTE                                                                          \
    "(keys typed as the prompt appeared were ignored; read it, then answer) Approve? [y/N] "
/* Narrower than this, a prompt is not shown (each argument would take
 * most of the screen): denied. */
#define PROMPT_MIN_COLS 40
/* Below a denial shown instead of a prompt (it stays until a key). */
#define PROMPT_ANY_KEY "Press any key to go back to the session. "

static int64_t ms_since(const struct timespec *t)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t) (now.tv_sec - t->tv_sec) * 1000 + (now.tv_nsec - t->tv_nsec) / 1000000;
}

void lz_client_hold_notice(lz_client *cl, const char *text)
{
    size_t n = strlen(text);
    if (cl->held_len + n + 1 > HELD_NOTICES_MAX) {
        cl->held_dropped++;
        return;
    }
    cl->held = realloc(cl->held, cl->held_len + n + 2);
    if (!cl->held) {
        cl->held_len = 0;
        return;
    }
    memcpy(cl->held + cl->held_len, text, n);
    cl->held[cl->held_len + n] = '\n';
    cl->held_len += n + 1;
    cl->held[cl->held_len] = '\0';
}

void lz_client_clear(lz_client *cl)
{
    free(cl->held);
    cl->held = NULL;
    cl->held_len = cl->held_dropped = 0;
}

/* The prompt is gone: the session's screen as the program left it
 * (screen.h; docs/escalation.md "The screen after a prompt"), then the
 * notices the prompt held back, then normal service. */
static void release_notices(lz_client *cl)
{
    if (cl->screen) {
        /* Output still being emulated (a sandbox's costly output) gets a
         * short while; past it the repaint shows less (screen.h). */
        lz_screen_catch_up(cl->screen, LZ_CLIENT_REPAINT_WAIT_NS);
        lz_screen_buf b = { 0 };
        lz_screen_repaint(cl->screen, &b);
        FILE *po = cl->ui->prompt_out();
        fwrite(b.data, 1, b.len, po);
        fflush(po);
        lz_screen_buf_free(&b);
    }
    FILE *out = cl->ui->notices();
    const char *p = cl->held;
    while (p && *p) {
        const char *nl = strchr(p, '\n');
        char *line = lz_xstrndup(p, (size_t) (nl - p));
        lz_print_remote(out, "lazaret: ", line, "\r\n");
        free(line);
        p = nl + 1;
    }
    if (cl->held_dropped)
        fprintf(out, "lazaret: %zu more notices arrived during the prompt (see %s)\r\n",
                cl->held_dropped, cl->log_label);
    lz_client_clear(cl);
}

/* The prompt's text as it goes to the raw terminal: each line escaped
 * once more (lz_text_printable is idempotent, and the coordinator's items
 * are ASCII already), newlines as CR LF, and lines longer than the
 * terminal broken by the CLI itself, every continuation starting with
 * "  | ": the terminal never wraps, so a long argument cannot put text
 * that looks like a label at the start of a line (attack round i11c, C1).
 * Returns the lines it takes; with out NULL only counts them. */
static size_t prompt_lines(const char *text, unsigned cols, FILE *out)
{
    static const char cont[] = "  | ";
    size_t width = cols > sizeof(cont) ? cols - 1 : sizeof(cont), lines = 0;
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t) (nl - p) : strlen(p);
        char *line = lz_xstrndup(p, n);
        char *safe = lz_text_printable(line);
        size_t len = strlen(safe), at = 0;
        do {
            size_t room = at == 0 ? width : width - (sizeof(cont) - 1);
            size_t take = len - at < room ? len - at : room;
            if (out) {
                if (at > 0)
                    fputs(cont, out);
                fwrite(safe + at, 1, take, out);
                fputs("\r\n", out);
            }
            at += take;
            lines++;
        } while (at < len);
        free(safe);
        free(line);
        p += n + (nl ? 1 : 0);
    }
    return lines;
}

/* Whatever state the sandbox's output left the terminal in, the prompt
 * (or a denial) is drawn on a clean, normal screen (attack round i11,
 * A6: a scroll region had hidden the real executable under a fake one):
 * leave the
 * alternate screen, soft reset (DECSTR: margins, origin mode, insert
 * mode, character sets, attributes), explicit resets for terminals
 * without DECSTR (scroll region, G0 ASCII and shift-in, origin mode,
 * autowrap, visible cursor, attributes), then clear the screen and
 * start at its top left: nothing drawn before can pass for a part of
 * the prompt (the scrollback stays the developer's). Before that, every
 * mode that reports input or changes keys goes off (mouse, focus,
 * bracketed paste, kitty keyboard, modifyOtherKeys, application keypad
 * and cursor keys): the answer is typed as plain keys, and a click is
 * no answer. The repaint afterwards sets the program's modes again. */
static void clean_screen(FILE *out)
{
    fputs(LZ_TERM_INPUT_MODES_OFF, out);
    fputs("\x1b[?1049l\x1b[!p\x1b[r\x1b(B\x0f\x1b[?6l\x1b[?7h\x1b[?25h\x1b[0m"
          "\x1b[H\x1b[2J\x1b[H",
          out);
}

/* The prompt is drawn on the terminal the session's output goes to (an
 * interactive session has a terminal on stdout), whatever stderr is
 * (attack round i11d, D6: with stderr redirected to a file the prompt was
 * never seen, and a y typed for the agent approved it): ui->prompt_out. */
int lz_client_on_prompt(void *ctx, lz_proto_msg *m)
{
    lz_client *cl = ctx;
    uint32_t no;
    char *text;
    if (!lz_msg_prompt_decode(&m->r, LZ_MSG_PROMPT, &no, &text))
        return -1;
    FILE *out = cl->ui->prompt_out();
    /* Input typed before the prompt appeared is not an answer: what the
     * terminal holds unread is discarded. Bytes already read were the
     * program's and went to it. */
    cl->ui->discard_typeahead(cl);
    unsigned rows = 0, cols = 0;
    cl->ui->prompt_size(cl, &rows, &cols);
    if (rows == 0 || cols == 0) {
        rows = 24;
        cols = 80;
    }
    /* All of it must be on the screen at once: every line the prompt and
     * whatever it may print below it take at this width, the withdrawal
     * notice, the question and the early-keys note included (C1; D4: a
     * narrow terminal; D5: lines that were not counted scrolled the notice
     * off). What scrolled off cannot be what the developer approves. */
    char *notice = cl->withdrawn
                       ? lz_xasprintf("lazaret: request #%u was withdrawn before you answered. "
                                      "THIS IS A DIFFERENT REQUEST (#%u).\n",
                                      cl->withdrawn_no, no)
                       : lz_xstrdup("");
    size_t need = prompt_lines(text, cols, NULL) + prompt_lines(notice, cols, NULL) +
                  prompt_lines(PROMPT_QUESTION "\n", cols, NULL) +
                  prompt_lines(PROMPT_GRACE_NOTE "\n", cols, NULL) + 1;
    if (cols < PROMPT_MIN_COLS || need > rows) {
        /* Denied without being shown. The denial is said on a clean
         * screen (attack round a26: a string the sandbox left open must
         * not swallow it; the session's own screen must not garble it),
         * kept until the developer presses a key, then the session's
         * screen comes back as after a prompt. */
        lz_wbuf b;
        lz_msg_pair_encode(&b, LZ_MSG_DECISION, no, 0);
        lz_client_post(cl, &b);
        if (cl->screen)
            clean_screen(out);
        else
            fputs(LZ_TERM_STRINGS_END "\r\n", out);
        fprintf(out,
                "lazaret: a host escalation request (#%u) needs %zu lines of at "
                "least %d columns to be shown whole; this terminal has %u of %u: "
                "denied. Make the window larger to be asked such requests.\r\n",
                no, need, PROMPT_MIN_COLS, rows, cols);
        if (cl->screen) {
            fputs(PROMPT_ANY_KEY, out);
            cl->prompting = cl->prompt_is_notice = true;
            cl->prompt_no = no;
            clock_gettime(CLOCK_MONOTONIC, &cl->prompt_shown);
            cl->grace_keys = false;
        }
        fflush(out);
        free(notice);
        free(text);
        return 0;
    }
    cl->prompting = true;
    cl->prompt_is_notice = false;
    cl->prompt_no = no;
    cl->answer_len = 0;
    cl->withdrawn = false;
    clean_screen(out);
    /* The sandbox can withdraw a request and ask another at once: say so,
     * above the new one (attack round i11c, C2). */
    prompt_lines(notice, cols, out);
    prompt_lines(text, cols, out);
    fputs(PROMPT_QUESTION, out);
    fflush(out);
    free(notice);
    free(text);
    clock_gettime(CLOCK_MONOTONIC, &cl->prompt_shown);
    cl->grace_keys = false;
    return 0;
}

int lz_client_on_prompt_closed(void *ctx, lz_proto_msg *m)
{
    lz_client *cl = ctx;
    uint32_t no;
    char *why;
    if (!lz_msg_prompt_decode(&m->r, LZ_MSG_PROMPT_CLOSED, &no, &why))
        return -1;
    if (cl->prompting && !cl->prompt_is_notice && no == cl->prompt_no) {
        FILE *out = cl->ui->prompt_out();
        cl->prompting = false;
        cl->withdrawn = true;
        cl->withdrawn_no = no;
        fputs("\r\n", out);
        fflush(out);
        lz_print_remote(cl->ui->notices(), "lazaret: the request was withdrawn: ", why, "\r\n");
        release_notices(cl);
    }
    free(why);
    return 0;
}

void lz_client_end_notice(lz_client *cl, bool say_again)
{
    if (!cl->prompt_is_notice)
        return;
    if (say_again) {
        char *again = lz_xasprintf("the host escalation request #%u was denied without being "
                                   "shown: it needs a larger window",
                                   cl->prompt_no);
        lz_client_hold_notice(cl, again);
        free(again);
    }
    FILE *out = cl->ui->prompt_out();
    fputs("\r\n", out);
    fflush(out);
    cl->prompting = cl->prompt_is_notice = false;
    release_notices(cl);
}

void lz_client_prompt_keys(lz_client *cl, const uint8_t *data, size_t n)
{
    FILE *out = cl->ui->prompt_out();
    if (ms_since(&cl->prompt_shown) < PROMPT_GRACE_MS) {
        /* Typed before anyone could have read the prompt. */
        if (!cl->grace_keys)
            fputs("\r\n" PROMPT_GRACE_NOTE, out);
        fflush(out);
        cl->grace_keys = true;
        return;
    }
    if (cl->prompt_is_notice) {
        /* A denial shown in place of a prompt: any key takes it away (and
         * goes nowhere else). */
        lz_client_end_notice(cl, false);
        return;
    }
    /* Only printable ASCII is echoed. */
    for (size_t i = 0; i < n && cl->prompting; i++) {
        uint8_t k = data[i];
        bool decide = k == '\r' || k == '\n' || k == 3 || k == 4;
        if (!decide) {
            if ((k == 0x7f || k == 8) && cl->answer_len > 0) {
                cl->answer_len--;
                fputs("\b \b", out);
            } else if (k >= 0x20 && k < 0x7f && cl->answer_len < sizeof(cl->answer) - 1) {
                cl->answer[cl->answer_len++] = (char) k;
                fputc(k, out);
            }
            fflush(out);
            continue;
        }
        cl->answer[cl->answer_len] = '\0';
        bool approve = (k == '\r' || k == '\n') &&
                       (strcmp(cl->answer, "y") == 0 || strcmp(cl->answer, "Y") == 0 ||
                        strcmp(cl->answer, "yes") == 0);
        lz_wbuf b;
        lz_msg_pair_encode(&b, LZ_MSG_DECISION, cl->prompt_no, approve ? 1 : 0);
        lz_client_post(cl, &b);
        fputs(approve ? "\r\nlazaret: approved\r\n" : "\r\nlazaret: denied\r\n", out);
        fflush(out);
        cl->prompting = false;
        cl->answer_len = 0;
        release_notices(cl);
    }
}
