/* SPDX-License-Identifier: Apache-2.0
 *
 * The session's screen (screen.h): libvterm keeps the cells, the cursor and
 * the pen; the tracker below keeps the modes libvterm 0.1.4 keeps to itself
 * (it has no getter for bracketed paste, focus, mouse encodings, cursor
 * and keypad modes, the scroll region or autowrap) and those it does not
 * know (kitty keyboard, modifyOtherKeys). docs/escalation.md says why a
 * repaint from this state, not a redraw asked of the program.
 */
#include "client/screen.h"

#include <stdarg.h>
#include <stdio.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <vterm.h>

#include "common/util.h"

void lz_screen_buf_put(lz_screen_buf *b, const char *p, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        b->data = lz_xrealloc(b->data, cap, 1);
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void put_str(lz_screen_buf *b, const char *s)
{
    lz_screen_buf_put(b, s, strlen(s));
}

__attribute__((format(printf, 2, 3))) static void put_fmt(lz_screen_buf *b, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n > 0)
        lz_screen_buf_put(b, tmp, (size_t) n < sizeof(tmp) ? (size_t) n : sizeof(tmp) - 1);
}

void lz_screen_buf_free(lz_screen_buf *b)
{
    free(b->data);
    *b = (lz_screen_buf){ 0 };
}

/* ---- the mode tracker ---- */

enum { ST_GROUND, ST_ESC, ST_ESC_INTER, ST_CSI, ST_STRING };

/* The DEC private mode numbers, in lz_term_mode's order. */
static const unsigned dec_numbers[LZ_MODE_COUNT] = {
    [LZ_MODE_CURSOR_KEYS] = 1,     [LZ_MODE_ORIGIN] = 6,           [LZ_MODE_AUTOWRAP] = 7,
    [LZ_MODE_CURSOR_VISIBLE] = 25, [LZ_MODE_MOUSE_X10] = 9,        [LZ_MODE_MOUSE_NORMAL] = 1000,
    [LZ_MODE_MOUSE_HILITE] = 1001, [LZ_MODE_MOUSE_BUTTON] = 1002,  [LZ_MODE_MOUSE_ANY] = 1003,
    [LZ_MODE_FOCUS] = 1004,        [LZ_MODE_MOUSE_UTF8] = 1005,    [LZ_MODE_MOUSE_SGR] = 1006,
    [LZ_MODE_MOUSE_URXVT] = 1015,  [LZ_MODE_MOUSE_SGR_PIX] = 1016, [LZ_MODE_BRACKETED_PASTE] = 2004,
};

/* Parameters above this are clamped (no mode number is larger). */
#define PARAM_MAX 99999u

void lz_term_modes_init(lz_term_modes *m)
{
    *m = (lz_term_modes){ 0 };
    m->mode[LZ_MODE_AUTOWRAP] = true;
    m->mode[LZ_MODE_CURSOR_VISIBLE] = true;
}

/* RIS resets the terminal, the parser's state aside. */
static void hard_reset(lz_term_modes *m)
{
    uint8_t state = m->state;
    lz_term_modes_init(m);
    m->state = state;
}

/* DECSTR: what a soft reset resets (xterm). */
static void soft_reset(lz_term_modes *m)
{
    m->mode[LZ_MODE_CURSOR_KEYS] = false;
    m->mode[LZ_MODE_ORIGIN] = false;
    m->mode[LZ_MODE_AUTOWRAP] = true;
    m->mode[LZ_MODE_CURSOR_VISIBLE] = true;
    m->keypad_app = false;
    m->scroll_top = m->scroll_bottom = 0;
}

static unsigned param(const lz_term_modes *m, unsigned i, unsigned dflt)
{
    return i < m->nparams && m->params[i] ? m->params[i] : dflt;
}

static bool is_alt_mode(unsigned p)
{
    return p == 47 || p == 1047 || p == 1049;
}

/* Would this final byte switch between the normal and the alternate
 * screen? */
static bool csi_switches(const lz_term_modes *m, uint8_t final)
{
    if (m->leader != '?' || m->intermediate || (final != 'h' && final != 'l'))
        return false;
    for (unsigned i = 0; i < m->nparams; i++)
        if (is_alt_mode(m->params[i]) && (final == 'h') != (m->alt_screen != 0))
            return true;
    return false;
}

static void kitty_push(lz_term_modes *m, unsigned flags)
{
    memmove(m->kitty_flags + 1, m->kitty_flags, sizeof(m->kitty_flags) - sizeof(m->kitty_flags[0]));
    m->kitty_flags[0] = flags;
    if (m->kitty_depth < LZ_TERM_MODES_KITTY_DEPTH)
        m->kitty_depth++;
}

static void kitty_pop(lz_term_modes *m, unsigned n)
{
    if (n >= m->kitty_depth) {
        memset(m->kitty_flags, 0, sizeof(m->kitty_flags));
        m->kitty_depth = 0;
        return;
    }
    memmove(m->kitty_flags, m->kitty_flags + n, (LZ_TERM_MODES_KITTY_DEPTH - n) * sizeof(unsigned));
    memset(m->kitty_flags + LZ_TERM_MODES_KITTY_DEPTH - n, 0, n * sizeof(unsigned));
    m->kitty_depth -= n;
}

static void csi_dispatch(lz_term_modes *m, uint8_t final)
{
    if (m->leader == '?' && !m->intermediate && (final == 'h' || final == 'l')) {
        bool on = final == 'h';
        for (unsigned i = 0; i < m->nparams; i++) {
            unsigned p = m->params[i];
            if (is_alt_mode(p)) {
                if (on && !m->alt_screen)
                    m->alt_screen = p;
                else if (!on)
                    m->alt_screen = 0;
                continue;
            }
            for (unsigned k = 0; k < LZ_MODE_COUNT; k++)
                if (dec_numbers[k] == p)
                    m->mode[k] = on;
        }
    } else if (!m->leader && m->intermediate == '!' && final == 'p') {
        soft_reset(m);
    } else if (!m->leader && !m->intermediate && final == 'r') {
        unsigned top = param(m, 0, 0), bottom = param(m, 1, 0);
        if (bottom == 0 || (top ? top : 1) < bottom) {
            m->scroll_top = top || bottom ? (top ? top : 1) : 0;
            m->scroll_bottom = bottom;
        }
    } else if (m->leader == '>' && !m->intermediate && final == 'u') {
        kitty_push(m, param(m, 0, 0));
    } else if (m->leader == '<' && !m->intermediate && final == 'u') {
        kitty_pop(m, param(m, 0, 1));
    } else if (m->leader == '=' && !m->intermediate && final == 'u') {
        unsigned flags = param(m, 0, 0), how = param(m, 1, 1);
        if (how == 1)
            m->kitty_flags[0] = flags;
        else if (how == 2)
            m->kitty_flags[0] |= flags;
        else if (how == 3)
            m->kitty_flags[0] &= ~flags;
    } else if (m->leader == '>' && !m->intermediate && (final == 'm' || final == 'n')) {
        /* xterm's key modifier resources: only modifyOtherKeys (4) matters. */
        if (m->nparams == 0 || (m->params[0] == 4 && final == 'n'))
            m->modify_other_keys = 0;
        else if (m->params[0] == 4)
            m->modify_other_keys = param(m, 1, 0);
    }
}

static void csi_start(lz_term_modes *m)
{
    m->state = ST_CSI;
    m->leader = m->intermediate = 0;
    m->nparams = 0;
    m->param_started = m->in_subparam = false;
    memset(m->params, 0, sizeof(m->params));
}

size_t lz_term_modes_feed(lz_term_modes *m, const uint8_t *d, size_t n, bool *switching)
{
    *switching = false;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = d[i];
        /* CAN and SUB cancel any sequence; ESC starts a new one, also
         * inside a string (where ESC \ is the string terminator). */
        if (c == 0x18 || c == 0x1a) {
            m->state = ST_GROUND;
            continue;
        }
        if (c == 0x1b) {
            m->state = ST_ESC;
            continue;
        }
        switch (m->state) {
        case ST_GROUND:
            break;
        case ST_ESC:
            if (c == '[') {
                csi_start(m);
            } else if (c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_') {
                m->state = ST_STRING;
            } else if (c >= 0x20 && c <= 0x2f) {
                m->state = ST_ESC_INTER;
            } else if (c < 0x20) {
                /* a control inside the sequence is executed; ESC waits on */
            } else {
                if (c == 'c')
                    hard_reset(m);
                else if (c == '=')
                    m->keypad_app = true;
                else if (c == '>')
                    m->keypad_app = false;
                m->state = ST_GROUND;
            }
            break;
        case ST_ESC_INTER:
            if (c >= 0x30 && c <= 0x7e)
                m->state = ST_GROUND;
            break;
        case ST_CSI:
            if (c >= '0' && c <= '9' && m->in_subparam) {
                /* a sub-parameter (after ':') belongs to the parameter
                 * before it: none of the tracker's sequences has one */
            } else if (c >= '0' && c <= '9') {
                if (!m->param_started) {
                    m->param_started = true;
                    if (m->nparams < LZ_TERM_MODES_MAX_PARAMS)
                        m->nparams++;
                }
                if (m->nparams <= LZ_TERM_MODES_MAX_PARAMS) {
                    unsigned *p = &m->params[m->nparams - 1];
                    *p = *p * 10 + (unsigned) (c - '0');
                    if (*p > PARAM_MAX)
                        *p = PARAM_MAX;
                }
            } else if (c == ':') {
                if (!m->param_started && !m->in_subparam && m->nparams < LZ_TERM_MODES_MAX_PARAMS)
                    m->nparams++; /* an empty parameter with sub-parameters */
                m->param_started = true;
                m->in_subparam = true;
            } else if (c == ';') {
                if (!m->param_started && m->nparams < LZ_TERM_MODES_MAX_PARAMS)
                    m->nparams++; /* an empty parameter: its default */
                m->param_started = false;
                m->in_subparam = false;
            } else if (c >= 0x3c && c <= 0x3f) {
                /* a private leader only as the first byte */
                if (m->nparams == 0 && !m->param_started && !m->leader)
                    m->leader = c;
                else
                    m->state = ST_GROUND; /* malformed: ignored whole, as xterm does */
            } else if (c >= 0x20 && c <= 0x2f) {
                m->intermediate = c;
            } else if (c >= 0x40 && c <= 0x7e) {
                if (csi_switches(m, c) && !m->hold_switch) {
                    m->hold_switch = true;
                    *switching = true;
                    return i;
                }
                m->hold_switch = false;
                csi_dispatch(m, c);
                m->state = ST_GROUND;
            }
            /* other controls are executed by the terminal; bytes >= 0x80
             * inside a sequence are ignored */
            break;
        case ST_STRING:
            if (c == 0x07)
                m->state = ST_GROUND;
            break;
        default:
            m->state = ST_GROUND;
            break;
        }
    }
    return n;
}

void lz_term_modes_encode(const lz_term_modes *m, lz_screen_buf *b)
{
    for (unsigned k = 0; k < LZ_MODE_COUNT; k++) {
        if (k == LZ_MODE_ORIGIN || k == LZ_MODE_CURSOR_VISIBLE)
            continue; /* order-sensitive: lz_screen_repaint */
        bool dflt = k == LZ_MODE_AUTOWRAP;
        if (m->mode[k] != dflt)
            put_fmt(b, m->mode[k] ? "\x1b[?%uh" : "\x1b[?%ul", dec_numbers[k]);
    }
    if (m->keypad_app)
        put_str(b, "\x1b=");
    /* The kitty stack bottom first; an entry set without a push is the
     * terminal's own (depth 0). */
    for (unsigned i = m->kitty_depth; i > 0; i--)
        put_fmt(b, "\x1b[>%uu", m->kitty_flags[i - 1]);
    if (m->kitty_depth == 0 && m->kitty_flags[0])
        put_fmt(b, "\x1b[=%u;1u", m->kitty_flags[0]);
    if (m->modify_other_keys)
        put_fmt(b, "\x1b[>4;%um", m->modify_other_keys);
}

/* ---- the screen ---- */

struct lz_screen {
    VTerm *vt;
    VTermScreen *vs;
    VTermState *st;
    lz_term_modes modes;
    /* The normal screen as the program left it for the alternate one
     * (libvterm shows only the current buffer). */
    VTermScreenCell *normal;
    int normal_rows, normal_cols;
    VTermPos normal_cursor;
};

static unsigned clamp(unsigned v, unsigned max)
{
    return v < 1 ? 1 : v > max ? max : v;
}

/* libvterm 0.1.4 crashes (a NULL dereference, found by fuzz_screen) on a
 * wide character in a one-column screen: the emulator is never narrower
 * than LZ_SCREEN_MIN_COLS (a terminal that narrow shows no prompt anyway). */
static void vterm_size(unsigned *rows, unsigned *cols)
{
    *rows = clamp(*rows, LZ_SCREEN_MAX_ROWS);
    *cols = clamp(*cols, LZ_SCREEN_MAX_COLS);
    if (*cols < LZ_SCREEN_MIN_COLS)
        *cols = LZ_SCREEN_MIN_COLS;
}

/* libvterm's memory holds the screen, the session's output
 * (RELAY_WIPE, src/cli/relay.h): zeroed on allocation and wiped when freed
 * (a resize frees the old cells; lz_screen_free the rest). */
static void *vterm_alloc(size_t size, void *allocdata)
{
    (void) allocdata;
    return lz_xcalloc(1, size ? size : 1);
}

static void vterm_release(void *p, void *allocdata)
{
    (void) allocdata;
    if (p)
        explicit_bzero(p, malloc_usable_size(p));
    free(p);
}

static VTermAllocatorFunctions wiping_allocator = { .malloc = vterm_alloc, .free = vterm_release };

lz_screen *lz_screen_new(unsigned rows, unsigned cols)
{
    lz_screen *s = lz_xcalloc(1, sizeof(*s));
    vterm_size(&rows, &cols);
    s->vt = vterm_new_with_allocator((int) rows, (int) cols, &wiping_allocator, NULL);
    if (!s->vt)
        abort(); /* libvterm's allocation failed: as lz_xcalloc would */
    vterm_set_utf8(s->vt, 1);
    s->vs = vterm_obtain_screen(s->vt);
    s->st = vterm_obtain_state(s->vt);
    vterm_screen_enable_altscreen(s->vs, 1);
    vterm_screen_reset(s->vs, 1);
    lz_term_modes_init(&s->modes);
    return s;
}

void lz_screen_free(lz_screen *s)
{
    if (!s)
        return;
    vterm_free(s->vt);
    if (s->normal)
        explicit_bzero(s->normal, (size_t) s->normal_rows * (size_t) s->normal_cols *
                                      sizeof(*s->normal)); /* session output: RELAY_WIPE */
    free(s->normal);
    free(s);
}

void lz_screen_resize(lz_screen *s, unsigned rows, unsigned cols)
{
    vterm_size(&rows, &cols);
    vterm_set_size(s->vt, (int) rows, (int) cols);
}

/* libvterm's cursor, inside the screen: libvterm 0.1.4 can leave its
 * column at -1 (fuzz_screen: a wide character with a 1-column program
 * size after ESC 5 and a VT inside a CSI); the repaint and the reset put
 * the cursor where the terminal would have it, the first column. */
static VTermPos cursor_pos(const lz_screen *s)
{
    VTermPos pos;
    vterm_state_get_cursorpos(s->st, &pos);
    int rows, cols;
    vterm_get_size(s->vt, &rows, &cols);
    if (pos.row < 0)
        pos.row = 0;
    if (pos.row >= rows)
        pos.row = rows - 1;
    if (pos.col < 0)
        pos.col = 0;
    if (pos.col >= cols)
        pos.col = cols - 1;
    return pos;
}

static void keep_normal_screen(lz_screen *s)
{
    int rows, cols;
    vterm_get_size(s->vt, &rows, &cols);
    free(s->normal);
    s->normal = lz_xcalloc((size_t) rows * (size_t) cols, sizeof(*s->normal));
    s->normal_rows = rows;
    s->normal_cols = cols;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            vterm_screen_get_cell(s->vs, (VTermPos){ r, c }, &s->normal[r * cols + c]);
    s->normal_cursor = cursor_pos(s);
}

/* libvterm 0.1.4 copies string fragments (OSC, DCS) with strncpy past the
 * bytes it was given, up to a NUL (found by fuzz_screen under ASan): it is
 * given a copy with a NUL after it, never the caller's buffer. */
#define VTERM_CHUNK 4096
static void vterm_write(lz_screen *s, const uint8_t *d, size_t n)
{
    char chunk[VTERM_CHUNK + 1];
    while (n > 0) {
        size_t k = n < VTERM_CHUNK ? n : VTERM_CHUNK;
        memcpy(chunk, d, k);
        chunk[k] = '\0';
        vterm_input_write(s->vt, chunk, k);
        d += k;
        n -= k;
    }
    explicit_bzero(chunk, sizeof(chunk)); /* session output: RELAY_WIPE */
}

static bool plain(uint8_t c)
{
    return c == '\r' || c == '\n' || (c >= 0x20 && c != 0x7f);
}

/* libvterm moves every row's cells for each line scrolled (about 2 us a
 * line at 30x100: 4 MiB/s for `cat` of a large file, measured). Lines that
 * are scrolled off within one read need not be drawn: when the output
 * starts with plain text (printable bytes, CR, LF) holding at least a
 * screenful of line feeds, followed by plain text that ends a line with CR
 * LF and holds another screenful, the first part can only leave the cursor
 * at the start of the bottom row with every row about to be scrolled off:
 * that is what the emulator is told instead (Lazaret's own CUP). Only with
 * the whole screen as scroll region, no origin mode, and the tracker
 * between sequences. Returns how many bytes were skipped. */
static size_t skip_scrolled_off(lz_screen *s, const uint8_t *d, size_t n)
{
    const lz_term_modes *m = &s->modes;
    if (m->state != ST_GROUND || m->scroll_top || m->scroll_bottom || m->mode[LZ_MODE_ORIGIN])
        return 0;
    int rows, cols;
    vterm_get_size(s->vt, &rows, &cols);
    size_t end = 0;
    while (end < n && plain(d[end]))
        end++;
    /* the cut: just after a CR LF with a screenful of LFs after it */
    size_t cut = end, lfs = 0;
    while (cut > 0 && lfs <= (size_t) rows) {
        cut--;
        if (d[cut] == '\n')
            lfs++;
    }
    if (lfs <= (size_t) rows || cut < 1 || d[cut - 1] != '\r')
        return 0;
    cut++; /* after the LF */
    size_t before = 0;
    for (size_t i = 0; i < cut && before < (size_t) rows; i++)
        before += d[i] == '\n';
    if (before < (size_t) rows)
        return 0;
    char cup[32];
    int len = snprintf(cup, sizeof(cup), "\x1b[%d;1H", rows);
    vterm_input_write(s->vt, cup, (size_t) len);
    return cut;
}

void lz_screen_feed(lz_screen *s, const uint8_t *d, size_t n)
{
    size_t skipped = n >= 1024 ? skip_scrolled_off(s, d, n) : 0;
    d += skipped;
    n -= skipped;
    while (n > 0) {
        bool switching;
        size_t k = lz_term_modes_feed(&s->modes, d, n, &switching);
        vterm_write(s, d, k);
        if (switching && !s->modes.alt_screen)
            keep_normal_screen(s); /* the final byte, next round, enters the alternate one */
        d += k;
        n -= k;
    }
}

const lz_term_modes *lz_screen_modes(const lz_screen *s)
{
    return &s->modes;
}

void lz_screen_cursor(const lz_screen *s, unsigned *row, unsigned *col)
{
    VTermPos pos = cursor_pos(s);
    *row = (unsigned) pos.row;
    *col = (unsigned) pos.col;
}

size_t lz_screen_row_text(const lz_screen *s, unsigned row, char *buf, size_t len)
{
    int rows, cols;
    vterm_get_size(s->vt, &rows, &cols);
    if (len == 0 || row >= (unsigned) rows)
        return 0;
    size_t n = vterm_screen_get_text(
        s->vs, buf, len - 1,
        (VTermRect){
            .start_row = (int) row, .end_row = (int) row + 1, .start_col = 0, .end_col = cols });
    buf[n] = '\0';
    return n;
}

/* ---- the repaint encoder ---- */

static void put_color(lz_screen_buf *b, const VTermColor *col, bool fg)
{
    if (fg ? VTERM_COLOR_IS_DEFAULT_FG(col) : VTERM_COLOR_IS_DEFAULT_BG(col))
        return;
    if (VTERM_COLOR_IS_RGB(col)) {
        char tmp[32];
        snprintf(tmp, sizeof(tmp), ";%u;2;%u;%u;%u", fg ? 38u : 48u, col->rgb.red, col->rgb.green,
                 col->rgb.blue);
        put_str(b, tmp);
    } else if (col->indexed.idx < 8) {
        put_fmt(b, ";%u", (fg ? 30u : 40u) + col->indexed.idx);
    } else if (col->indexed.idx < 16) {
        put_fmt(b, ";%u", (fg ? 90u : 100u) + col->indexed.idx - 8);
    } else {
        put_fmt(b, ";%u;5;%u", fg ? 38u : 48u, col->indexed.idx);
    }
}

typedef struct pen {
    bool bold, italic, blink, reverse, strike;
    unsigned underline, font;
    VTermColor fg, bg;
} pen;

static pen default_pen_value(void)
{
    pen p = { 0 };
    p.fg.type = VTERM_COLOR_DEFAULT_FG | VTERM_COLOR_INDEXED;
    p.bg.type = VTERM_COLOR_DEFAULT_BG | VTERM_COLOR_INDEXED;
    return p;
}

static void put_pen(lz_screen_buf *b, const pen *p)
{
    put_str(b, "\x1b[0");
    if (p->bold)
        put_str(b, ";1");
    if (p->italic)
        put_str(b, ";3");
    if (p->underline == 1)
        put_str(b, ";4");
    else if (p->underline > 1)
        put_fmt(b, ";4:%u", p->underline);
    if (p->blink)
        put_str(b, ";5");
    if (p->reverse)
        put_str(b, ";7");
    if (p->strike)
        put_str(b, ";9");
    if (p->font)
        put_fmt(b, ";%u", 10 + p->font);
    put_color(b, &p->fg, true);
    put_color(b, &p->bg, false);
    put_str(b, "m");
}

static pen cell_pen(const VTermScreenCell *c)
{
    return (pen){ .bold = c->attrs.bold,
                  .italic = c->attrs.italic,
                  .blink = c->attrs.blink,
                  .reverse = c->attrs.reverse,
                  .strike = c->attrs.strike,
                  .underline = c->attrs.underline,
                  .font = c->attrs.font,
                  .fg = c->fg,
                  .bg = c->bg };
}

static bool same_color(const VTermColor *a, const VTermColor *b, bool fg)
{
    bool da = fg ? VTERM_COLOR_IS_DEFAULT_FG(a) : VTERM_COLOR_IS_DEFAULT_BG(a);
    bool db = fg ? VTERM_COLOR_IS_DEFAULT_FG(b) : VTERM_COLOR_IS_DEFAULT_BG(b);
    if (da || db)
        return da == db;
    return vterm_color_is_equal(a, b);
}

static bool same_pen(const pen *a, const pen *b)
{
    return a->bold == b->bold && a->italic == b->italic && a->blink == b->blink &&
           a->reverse == b->reverse && a->strike == b->strike && a->underline == b->underline &&
           a->font == b->font && same_color(&a->fg, &b->fg, true) &&
           same_color(&a->bg, &b->bg, false);
}

/* A code point the terminal prints as a glyph: controls (C0, DEL, C1 as
 * code points), surrogates and values beyond Unicode become '?' — only
 * printable text reaches the terminal from a repaint. */
static void put_char(lz_screen_buf *b, uint32_t cp)
{
    char u[4];
    size_t n;
    if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
        cp = '?';
    if (cp < 0x80) {
        u[0] = (char) cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char) (0xc0 | (cp >> 6));
        u[1] = (char) (0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char) (0xe0 | (cp >> 12));
        u[1] = (char) (0x80 | ((cp >> 6) & 0x3f));
        u[2] = (char) (0x80 | (cp & 0x3f));
        n = 3;
    } else {
        u[0] = (char) (0xf0 | (cp >> 18));
        u[1] = (char) (0x80 | ((cp >> 12) & 0x3f));
        u[2] = (char) (0x80 | ((cp >> 6) & 0x3f));
        u[3] = (char) (0x80 | (cp & 0x3f));
        n = 4;
    }
    lz_screen_buf_put(b, u, n);
}

/* An empty cell that EL in the pen tail leaves: no character, no attribute
 * an erase would not give it (only the background counts). */
static bool blank_in(const VTermScreenCell *c, const pen *tail)
{
    pen p = cell_pen(c);
    pen bg_only = default_pen_value();
    bg_only.bg = tail->bg;
    return (c->chars[0] == 0 || c->chars[0] == ' ') && same_pen(&p, tail) &&
           same_pen(tail, &bg_only);
}

/* The combining diacritical blocks: a cell that starts with one (a mark
 * printed first on a line) would merge into nothing when written again. */
static bool combining(uint32_t cp)
{
    return (cp >= 0x300 && cp <= 0x36f) || (cp >= 0x1ab0 && cp <= 0x1aff) ||
           (cp >= 0x1dc0 && cp <= 0x1dff) || (cp >= 0x20d0 && cp <= 0x20ff) ||
           (cp >= 0xfe20 && cp <= 0xfe2f);
}

/* Draw rows x cols cells (get(at, r, c)) from the top left, every row
 * whole: what was on the terminal's screen is overwritten everywhere. */
static void paint(lz_screen_buf *b, int rows, int cols,
                  void (*get)(const void *at, int r, int c, VTermScreenCell *cell), const void *at)
{
    pen cur = default_pen_value();
    put_str(b, "\x1b[0m");
    for (int r = 0; r < rows; r++) {
        put_fmt(b, "\x1b[%u;1H", (unsigned) r + 1);
        /* The row's tail of empty cells of one background (what EL left
         * there) is erased with EL in that background; the rest is drawn. */
        VTermScreenCell cell;
        get(at, r, cols - 1, &cell);
        pen tail = cell_pen(&cell);
        int last = cols - 1;
        if (blank_in(&cell, &tail)) {
            while (last >= 0) {
                get(at, r, last, &cell);
                if (!blank_in(&cell, &tail))
                    break;
                last--;
            }
        }
        for (int c = 0; c <= last && c < cols;) {
            get(at, r, c, &cell);
            int width = cell.width > 0 ? cell.width : 1;
            if (c + width > cols)
                break;
            pen p = cell_pen(&cell);
            if (!same_pen(&p, &cur)) {
                put_pen(b, &p);
                cur = p;
            }
            if (cell.chars[0] == 0 || cell.chars[0] == (uint32_t) -1) {
                put_str(b, " ");
            } else if (combining(cell.chars[0])) {
                put_str(b, "?"); /* a mark with nothing to combine with */
            } else {
                put_char(b, cell.chars[0]);
                for (int k = 1; k < VTERM_MAX_CHARS_PER_CELL && cell.chars[k]; k++)
                    if (cell.chars[k] >= 0x300) /* combining marks only */
                        put_char(b, cell.chars[k]);
            }
            c += width;
        }
        if (last + 1 < cols) {
            if (!same_pen(&cur, &tail)) {
                put_pen(b, &tail);
                cur = tail;
            }
            put_str(b, "\x1b[K");
        }
    }
    put_str(b, "\x1b[0m");
}

static void get_live(const void *at, int r, int c, VTermScreenCell *cell)
{
    if (!vterm_screen_get_cell((const VTermScreen *) at, (VTermPos){ r, c }, cell))
        *cell = (VTermScreenCell){ .width = 1 };
}

static void get_kept(const void *at, int r, int c, VTermScreenCell *cell)
{
    const lz_screen *s = at;
    if (r < s->normal_rows && c < s->normal_cols) {
        *cell = s->normal[r * s->normal_cols + c];
    } else {
        *cell = (VTermScreenCell){ .width = 1 };
        cell->fg.type = VTERM_COLOR_DEFAULT_FG | VTERM_COLOR_INDEXED;
        cell->bg.type = VTERM_COLOR_DEFAULT_BG | VTERM_COLOR_INDEXED;
    }
}

static pen state_pen(const VTermState *st)
{
    VTermValue v;
    pen p = { 0 };
    vterm_state_get_penattr(st, VTERM_ATTR_BOLD, &v);
    p.bold = v.boolean;
    vterm_state_get_penattr(st, VTERM_ATTR_ITALIC, &v);
    p.italic = v.boolean;
    vterm_state_get_penattr(st, VTERM_ATTR_BLINK, &v);
    p.blink = v.boolean;
    vterm_state_get_penattr(st, VTERM_ATTR_REVERSE, &v);
    p.reverse = v.boolean;
    vterm_state_get_penattr(st, VTERM_ATTR_STRIKE, &v);
    p.strike = v.boolean;
    vterm_state_get_penattr(st, VTERM_ATTR_UNDERLINE, &v);
    p.underline = (unsigned) v.number & 3;
    vterm_state_get_penattr(st, VTERM_ATTR_FONT, &v);
    p.font = (unsigned) v.number % 10;
    vterm_state_get_penattr(st, VTERM_ATTR_FOREGROUND, &v);
    p.fg = v.color;
    vterm_state_get_penattr(st, VTERM_ATTR_BACKGROUND, &v);
    p.bg = v.color;
    return p;
}

void lz_screen_repaint(const lz_screen *s, lz_screen_buf *b)
{
    int rows, cols;
    vterm_get_size(s->vt, &rows, &cols);
    const lz_term_modes *m = &s->modes;
    /* Lazaret's own starting point, whatever the prompt left. */
    put_str(b, "\x1b[r\x1b[?6l\x1b[?7h\x1b[0m");
    if (m->alt_screen) {
        if (s->normal) {
            paint(b, rows, cols, get_kept, s);
            put_fmt(b, "\x1b[%u;%uH", (unsigned) s->normal_cursor.row + 1,
                    (unsigned) s->normal_cursor.col + 1);
        }
        put_fmt(b, "\x1b[?%uh", m->alt_screen);
    }
    paint(b, rows, cols, get_live, s->vs);
    lz_term_modes_encode(m, b);
    if (m->scroll_top || m->scroll_bottom) {
        if (m->scroll_bottom)
            put_fmt(b, "\x1b[%u;%ur", m->scroll_top ? m->scroll_top : 1, m->scroll_bottom);
        else
            put_fmt(b, "\x1b[%ur", m->scroll_top);
    }
    VTermPos pos = cursor_pos(s);
    unsigned row = (unsigned) pos.row + 1;
    if (m->mode[LZ_MODE_ORIGIN]) {
        put_str(b, "\x1b[?6h");
        unsigned top = m->scroll_top ? m->scroll_top : 1;
        row = row >= top ? row - top + 1 : 1;
    }
    put_fmt(b, "\x1b[%u;%uH", row, (unsigned) pos.col + 1);
    pen p = state_pen(s->st);
    put_pen(b, &p);
    if (!m->mode[LZ_MODE_CURSOR_VISIBLE])
        put_str(b, "\x1b[?25l");
}

bool lz_screen_take_cursor_report(lz_screen *s, uint8_t *d, size_t *n)
{
    for (size_t i = 0; i < *n; i++) {
        if (d[i] != 0x1b || i + 1 >= *n || d[i + 1] != '[')
            continue;
        size_t j = i + 2;
        unsigned v[2] = { 0, 0 };
        int k = 0;
        bool digits = false;
        for (; j < *n && k < 2; j++) {
            if (d[j] >= '0' && d[j] <= '9' && v[k] < 100000) {
                v[k] = v[k] * 10 + (unsigned) (d[j] - '0');
                digits = true;
            } else if (d[j] == ';' && k == 0 && digits) {
                k = 1;
                digits = false;
            } else if (d[j] == 'R' && k == 1 && digits) {
                break;
            } else {
                k = 2; /* not a cursor report */
            }
        }
        if (k != 1 || j >= *n || d[j] != 'R')
            continue;
        int rows, cols;
        vterm_get_size(s->vt, &rows, &cols);
        unsigned row = clamp(v[0], (unsigned) rows), col = clamp(v[1], (unsigned) cols);
        char cup[32];
        int len = snprintf(cup, sizeof(cup), "\x1b[%u;%uH", row, col);
        /* Lazaret's own sequence, to the emulator only: the cursor where the
         * terminal says it is (the rows above stay blank: unknown). */
        vterm_input_write(s->vt, cup, (size_t) len);
        memmove(d + i, d + j + 1, *n - (j + 1));
        *n -= j + 1 - i;
        return true;
    }
    return false;
}

void lz_screen_reset(lz_screen *s, lz_screen_buf *b)
{
    static const char leave[] = "\x1b[?1049l";
    /* Out of the alternate screen the cursor goes back where the program
     * left the normal one: the emulator is told too (Lazaret's own bytes),
     * then where the cursor is is written last, since resetting the scroll
     * region and origin mode move it home. */
    if (s->modes.alt_screen)
        lz_screen_feed(s, (const uint8_t *) leave, sizeof(leave) - 1);
    put_str(b, LZ_TERM_INPUT_MODES_OFF LZ_TERM_SCREEN_MODES_OFF);
    VTermPos pos = cursor_pos(s);
    put_fmt(b, "\x1b[%u;%uH", (unsigned) pos.row + 1, (unsigned) pos.col + 1);
    bool line_empty = pos.col == 0;
    int rows, cols;
    vterm_get_size(s->vt, &rows, &cols);
    for (int c = 0; line_empty && c < cols; c++) {
        VTermScreenCell cell;
        get_live(s->vs, pos.row, c, &cell);
        line_empty = cell.chars[0] == 0 || cell.chars[0] == ' ';
    }
    put_str(b, line_empty ? "\r" : "\r\n");
}
