/* SPDX-License-Identifier: Apache-2.0
 *
 * The mode tracker (screen.h): a bounded parser of the session's output
 * that keeps the terminal modes libvterm 0.1.4 keeps to itself (it has no
 * getter for bracketed paste, focus, mouse encodings, cursor and keypad
 * modes, the scroll region or autowrap) and those it does not know (kitty
 * keyboard, modifyOtherKeys); and the buffer the encoders append to.
 */
#include "client/screen.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#define put_str lz_screen_buf_str
#define put_fmt lz_screen_buf_fmt

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

void lz_screen_buf_str(lz_screen_buf *b, const char *s)
{
    lz_screen_buf_put(b, s, strlen(s));
}

void lz_screen_buf_fmt(lz_screen_buf *b, const char *fmt, ...)
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

bool lz_term_modes_between_sequences(const lz_term_modes *m)
{
    return m->state == ST_GROUND;
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
