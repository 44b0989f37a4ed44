/* SPDX-License-Identifier: Apache-2.0
 *
 * The session's screen as this CLI last drew it (docs/escalation.md "The
 * screen after a prompt"; docs/errors.md "Terminal"): every byte of the
 * session's output is also fed to a terminal emulator (libvterm) and to a
 * small tracker of the terminal modes libvterm does not expose, so that
 *   - after an escalation prompt, which clears the screen and leaves the
 *     alternate screen (attack round i11), the screen is repainted exactly
 *     as the program left it and its modes are set again;
 *   - a session that ends other than by its program's own exit resets what
 *     the program changed and puts Lazaret's message on a fresh line.
 * The repaint writes only printable cell contents and Lazaret's own
 * sequences, never the sandbox's bytes.
 */
#ifndef LAZARET_CLIENT_SCREEN_H
#define LAZARET_CLIENT_SCREEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the encoders append to: grows as needed (a repaint of a large
 * terminal can exceed any fixed buffer); free data when done. */
typedef struct lz_screen_buf {
    char *data;
    size_t len, cap;
} lz_screen_buf;
void lz_screen_buf_put(lz_screen_buf *b, const char *p, size_t n);
void lz_screen_buf_str(lz_screen_buf *b, const char *s);
/* At most 63 bytes of formatted text (sequences and numbers). */
__attribute__((format(printf, 2, 3))) void lz_screen_buf_fmt(lz_screen_buf *b, const char *fmt,
                                                             ...);
void lz_screen_buf_free(lz_screen_buf *b);

/* ---- the mode tracker: a bounded parser of the sandbox's output ---- */

/* Parameters of one control sequence kept; more are ignored (xterm keeps 30,
 * tmux 24: no mode this tracker knows needs more than 2). */
#define LZ_TERM_MODES_MAX_PARAMS 16
/* Depth of the kitty keyboard protocol's flag stack kept. */
#define LZ_TERM_MODES_KITTY_DEPTH 8

typedef enum lz_term_mode {
    LZ_MODE_CURSOR_KEYS,     /* DECCKM ?1: application cursor keys */
    LZ_MODE_ORIGIN,          /* DECOM ?6 */
    LZ_MODE_AUTOWRAP,        /* DECAWM ?7 */
    LZ_MODE_CURSOR_VISIBLE,  /* DECTCEM ?25 */
    LZ_MODE_MOUSE_X10,       /* ?9 */
    LZ_MODE_MOUSE_NORMAL,    /* ?1000 */
    LZ_MODE_MOUSE_HILITE,    /* ?1001 */
    LZ_MODE_MOUSE_BUTTON,    /* ?1002 */
    LZ_MODE_MOUSE_ANY,       /* ?1003 */
    LZ_MODE_FOCUS,           /* ?1004 */
    LZ_MODE_MOUSE_UTF8,      /* ?1005 */
    LZ_MODE_MOUSE_SGR,       /* ?1006 */
    LZ_MODE_MOUSE_URXVT,     /* ?1015 */
    LZ_MODE_MOUSE_SGR_PIX,   /* ?1016 */
    LZ_MODE_BRACKETED_PASTE, /* ?2004 */
    LZ_MODE_COUNT
} lz_term_mode;

typedef struct lz_term_modes {
    /* what the program set */
    bool mode[LZ_MODE_COUNT];
    bool keypad_app;     /* DECKPAM (ESC =) */
    unsigned alt_screen; /* 0, or the mode that entered it: 47, 1047, 1049 */
    unsigned scroll_top; /* DECSTBM's parameters as given; 0 = default */
    unsigned scroll_bottom;
    unsigned modify_other_keys;                      /* xterm CSI > 4 ; n m */
    unsigned kitty_flags[LZ_TERM_MODES_KITTY_DEPTH]; /* [0] is the current entry */
    unsigned kitty_depth;                            /* entries pushed (capped) */
    /* the parser */
    uint8_t state;
    uint8_t leader;       /* '?', '>', '<', '=' or 0 */
    uint8_t intermediate; /* the last intermediate byte or 0 */
    unsigned nparams;
    unsigned params[LZ_TERM_MODES_MAX_PARAMS];
    bool param_started;
    bool in_subparam;
    bool hold_switch; /* stopped before an alternate-screen switch's final byte */
} lz_term_modes;

/* A terminal's modes at power-on (autowrap on, cursor visible, no alternate
 * screen, nothing reported). */
void lz_term_modes_init(lz_term_modes *m);

/* Consume output bytes. Stops before the final byte of a sequence that
 * switches between the normal and the alternate screen and returns how many
 * bytes it consumed (less than n only then); *switching is set. The next
 * call consumes that byte. The caller keeps its emulator in step (it shows
 * the screen being left). */
size_t lz_term_modes_feed(lz_term_modes *m, const uint8_t *d, size_t n, bool *switching);

/* Not inside a control sequence or string. */
bool lz_term_modes_between_sequences(const lz_term_modes *m);

/* The sequences that set m's modes on a terminal whose modes are at their
 * defaults (scroll region excepted: see lz_screen_repaint), appended to b. */
void lz_term_modes_encode(const lz_term_modes *m, lz_screen_buf *b);

/* Ends whatever string or sequence the program left open (attack round a26:
 * an unterminated DCS made tmux swallow the whole prompt as its payload
 * while a fake prompt drawn before it stayed on screen): ST closes a DCS,
 * OSC, APC, PM or SOS string; a second ST covers a string whose last byte
 * was an ESC (tmux takes "ESC ESC" as payload); CAN then abandons any
 * escape or control sequence begun (xterm, VT parsers). On a terminal in
 * its ground state all three do nothing. Written first, before anything
 * of Lazaret's own. */
#define LZ_TERM_STRINGS_END "\x1b\\\x1b\\\x18"

/* What Lazaret writes to put back, on the developer's terminal, every mode a
 * program may have changed that reports input or changes keys: mouse (every
 * mode and encoding), focus, bracketed paste, the kitty keyboard protocol,
 * xterm's modifyOtherKeys, application keypad and cursor keys. */
#define LZ_TERM_INPUT_MODES_OFF                                                                    \
    LZ_TERM_STRINGS_END                                                                            \
    "\x1b[?9l\x1b[?1000l\x1b[?1001l\x1b[?1002l\x1b[?1003l\x1b[?1004l\x1b[?1005l\x1b[?1006l"        \
    "\x1b[?1015l\x1b[?1016l\x1b[?2004l\x1b[=0;1u\x1b[<99u\x1b[>4;0m\x1b[?1l\x1b>"
/* ... and the screen's: out of the alternate screen, full scroll region, no
 * origin mode, autowrap, default pen, visible cursor, ASCII in G0 and G1
 * with G0 shifted in, no insert mode (round a26 F2: the line-drawing set and
 * insert mode outlived a stop). */
#define LZ_TERM_SCREEN_MODES_OFF                                                                   \
    "\x1b[?1049l\x1b[r\x1b[?6l\x1b[?7h\x1b[0m\x1b[?25h\x1b(B\x1b)B\x0f\x1b[4l"

/* ---- the screen ---- */

typedef struct lz_screen lz_screen;

/* rows/cols: the terminal's size (clamped to 1..LZ_SCREEN_MAX_*). */
#define LZ_SCREEN_MAX_ROWS 500
#define LZ_SCREEN_MAX_COLS 1000
#define LZ_SCREEN_MIN_COLS 4
lz_screen *lz_screen_new(unsigned rows, unsigned cols);
void lz_screen_free(lz_screen *s);
void lz_screen_resize(lz_screen *s, unsigned rows, unsigned cols);

/* Session output, as it is written to the terminal: emulated now (after
 * anything still queued). */
void lz_screen_feed(lz_screen *s, const uint8_t *d, size_t n);

/* The same, in slices (attack round a26 F4): some output costs the
 * emulator far more than the terminal (DECALN fills the screen in 3
 * bytes; 64 KiB of it took 2 s at 50x200, 19 s at 200x500), and a CLI
 * busy emulating reads no keys and no signals. lz_screen_queue keeps a
 * copy of the output; lz_screen_work emulates it for about budget_ns
 * (negative: all of it) and returns whether some is left
 * (lz_screen_behind). The output itself goes to the terminal at once: the
 * emulator only lags. Lines scrolled off are looked for over everything
 * queued when lz_screen_work starts, so a caller that lets output pile up
 * while more is coming emulates far less of it. A backlog past LZ_SCREEN_MAX_BEHIND is given up
 * (only the mode tracker reads it; the emulator starts over on a blank
 * screen), and so is what lz_screen_catch_up cannot emulate within its
 * budget: a repaint never waits long for the emulator. */
#define LZ_SCREEN_MAX_BEHIND (1u << 20)
void lz_screen_queue(lz_screen *s, const uint8_t *d, size_t n);
bool lz_screen_work(lz_screen *s, int64_t budget_ns);
void lz_screen_catch_up(lz_screen *s, int64_t budget_ns);
bool lz_screen_behind(const lz_screen *s);
size_t lz_screen_backlog(const lz_screen *s); /* bytes queued, not yet emulated */

/* Append to b what redraws the screen and sets the program's modes again on
 * a terminal in the normal screen with default modes (what the prompt
 * leaves): the normal screen's rows, then the alternate screen's when the
 * program is in it, the scroll region, the modes, the cursor's position,
 * the pen and the cursor's visibility. */
void lz_screen_repaint(const lz_screen *s, lz_screen_buf *b);

/* Append to b what ends the program's changes on the developer's terminal
 * (LZ_TERM_INPUT_MODES_OFF, LZ_TERM_SCREEN_MODES_OFF) and leaves the
 * cursor at the start of a line nothing was written on. Output still
 * queued is dropped (the reset does not wait for the emulator). */
void lz_screen_reset(lz_screen *s, lz_screen_buf *b);

/* Where the session starts on the screen: the session's output is drawn
 * from where the cursor was when it started, below what the shell and
 * Lazaret printed before (an inline program such as Ink's redraws relative
 * to that). The CLI asks the terminal (DSR 6, LZ_SCREEN_ASK_CURSOR) as the
 * session starts; the answer (CSI row ; col R) is taken out of the
 * developer's input by lz_screen_take_cursor_report, which returns true
 * once it was found (d and *n then hold the input without it). Only a
 * whole answer within one read is recognised; until then, bytes pass. */
#define LZ_SCREEN_ASK_CURSOR "\x1b[6n"
bool lz_screen_take_cursor_report(lz_screen *s, uint8_t *d, size_t *n);

/* The tracker's view, the cursor (0-based) and a row's text (tests). */
const lz_term_modes *lz_screen_modes(const lz_screen *s);
void lz_screen_cursor(const lz_screen *s, unsigned *row, unsigned *col);
size_t lz_screen_row_text(const lz_screen *s, unsigned row, char *buf, size_t len);

#endif
