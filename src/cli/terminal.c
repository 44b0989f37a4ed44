/* SPDX-License-Identifier: Apache-2.0 */
#include "cli/terminal.h"

#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

static struct termios saved_termios;
static bool termios_saved, termios_raw;

void lz_cli_terminal_restore(void)
{
    if (termios_raw) {
        tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_termios);
        termios_raw = false;
    }
}

void lz_cli_terminal_raw(void)
{
    if (!termios_saved) {
        if (tcgetattr(STDIN_FILENO, &saved_termios) < 0)
            return;
        termios_saved = true;
        atexit(lz_cli_terminal_restore);
    }
    struct termios raw = saved_termios;
    cfmakeraw(&raw);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(STDIN_FILENO, TCSADRAIN, &raw) == 0)
        termios_raw = true;
}

/* Image preparation's phases reach stderr with or without a terminal (a
 * first start can take minutes, and a CI log should say why); notes only
 * on a terminal, where they do not mix into a script's captured stderr. */
void lz_cli_progress(lz_progress_kind kind, const char *line, void *userdata)
{
    (void) userdata;
    if (kind == LZ_PROGRESS_PHASE || isatty(STDERR_FILENO))
        lz_print_remote(stderr, "lazaret: ", line, "\n");
}

void lz_cli_send_resize(lz_client *cl)
{
    struct winsize ws;
    if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0)
        return;
    lz_client_send_resize(cl, ws.ws_row, ws.ws_col);
}

static void ui_started(lz_client *cl)
{
    lz_cli_terminal_raw();
    lz_cli_send_resize(cl); /* the size may have changed while starting */
}

static void ui_restore(lz_client *cl)
{
    (void) cl;
    lz_cli_terminal_restore();
}

static bool ui_raw(const lz_client *cl)
{
    (void) cl;
    return termios_raw;
}

/* The prompt is drawn on stdout (client/prompt.c says why): its size. */
static void ui_prompt_size(const lz_client *cl, unsigned *rows, unsigned *cols)
{
    (void) cl;
    struct winsize ws = { 0 };
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) < 0)
        ws = (struct winsize){ 0 };
    *rows = ws.ws_row;
    *cols = ws.ws_col;
}

static void ui_discard_typeahead(const lz_client *cl)
{
    (void) cl;
    tcflush(STDIN_FILENO, TCIFLUSH);
}

static FILE *ui_stdout(void)
{
    return stdout;
}

static FILE *ui_stderr(void)
{
    return stderr;
}

const lz_client_ui lz_cli_terminal_ui = {
    .started = ui_started,
    .restore = ui_restore,
    .raw = ui_raw,
    .progress = lz_cli_progress,
    .prompt_size = ui_prompt_size,
    .discard_typeahead = ui_discard_typeahead,
    .prompt_out = ui_stdout,
    .notices = ui_stderr,
    .output_fd = STDOUT_FILENO,
};
