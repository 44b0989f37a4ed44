/* SPDX-License-Identifier: Apache-2.0
 *
 * The session's screen (screen.h): libvterm keeps the cells, the cursor and
 * the pen; the tracker (term_modes.c) keeps the modes libvterm keeps to
 * itself or does not know. docs/escalation.md says why a repaint from this
 * state, not a redraw asked of the program.
 */
#include "client/screen.h"

#include <stdarg.h>
#include <stdio.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vterm.h>

#include "common/util.h"

#define put_str lz_screen_buf_str
#define put_fmt lz_screen_buf_fmt

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
    /* Session output not yet emulated (lz_screen_queue): a copy, wiped
     * as it is consumed (RELAY_WIPE). */
    uint8_t *pending;
    size_t pending_off, pending_len, pending_cap;
    bool unlooked; /* queued since lz_screen_work last looked for lines scrolled off */
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

/* lz_screen_work's slices. A byte that can start a control sequence or
 * move the cursor down (ESC, LF, VT, FF, and 0xC2, which starts a C1
 * control in UTF-8) may cost the emulator a pass over every cell: DECALN,
 * erasing, inserting or deleting lines, scrolling (about 8 ns a cell,
 * measured: 0.85 ms for one DECALN at 200x500). A slice holds at most
 * SLICE_BYTES bytes and at most as many of those bytes as the screen's
 * cells fit in SLICE_CELLS (at least one), so that one slice costs about
 * 2 ms at most, whatever the output; the clock is read between slices. */
#define SLICE_BYTES 4096
#define SLICE_CELLS 250000

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
    if (s->pending)
        explicit_bzero(s->pending, s->pending_cap); /* session output: RELAY_WIPE */
    free(s->pending);
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
    if (!lz_term_modes_between_sequences(m) || m->scroll_top || m->scroll_bottom ||
        m->mode[LZ_MODE_ORIGIN])
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

/* Output to the tracker and the emulator, in step. */
static void emulate(lz_screen *s, const uint8_t *d, size_t n)
{
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

static size_t skip_at_start(lz_screen *s, const uint8_t *d, size_t n)
{
    return n >= 1024 ? skip_scrolled_off(s, d, n) : 0;
}

static void drop_pending(lz_screen *s)
{
    if (s->pending_len)
        explicit_bzero(s->pending, s->pending_len); /* session output: RELAY_WIPE */
    s->pending_off = s->pending_len = 0;
}

void lz_screen_feed(lz_screen *s, const uint8_t *d, size_t n)
{
    (void) lz_screen_work(s, -1); /* in order: what was queued first */
    size_t skipped = skip_at_start(s, d, n);
    emulate(s, d + skipped, n - skipped);
}

/* Give up emulating what is queued (lz_screen_catch_up, or a backlog
 * past LZ_SCREEN_MAX_BEHIND). The tracker still reads all of it (cheap:
 * one pass, bounded state), so the modes a repaint sets and a reset's view
 * of the alternate screen stay right; the emulator starts over on a blank
 * screen, in the screen the program is in, with its scroll region, origin
 * mode and autowrap, the cursor home. Only the repaint's cells are lost
 * (the program's next redraw brings them back). */
static void skip_pending(lz_screen *s)
{
    const uint8_t *d = s->pending + s->pending_off;
    size_t n = s->pending_len - s->pending_off;
    while (n > 0) {
        bool switching;
        size_t k = lz_term_modes_feed(&s->modes, d, n, &switching);
        d += k;
        n -= k;
    }
    drop_pending(s);
    static const char leave[] = "\x1b[?1049l";
    vterm_write(s, (const uint8_t *) leave, sizeof(leave) - 1);
    vterm_screen_reset(s->vs, 1);
    const lz_term_modes *m = &s->modes;
    lz_screen_buf b = { 0 };
    if (m->alt_screen) {
        keep_normal_screen(s); /* blank */
        put_fmt(&b, "\x1b[?%uh", m->alt_screen);
    }
    if (m->scroll_top || m->scroll_bottom)
        put_fmt(&b, "\x1b[%u;%ur", m->scroll_top, m->scroll_bottom);
    if (m->mode[LZ_MODE_ORIGIN])
        put_str(&b, "\x1b[?6h");
    if (!m->mode[LZ_MODE_AUTOWRAP])
        put_str(&b, "\x1b[?7l");
    put_str(&b, "\x1b[H");
    vterm_write(s, (const uint8_t *) b.data, b.len); /* Lazaret's own bytes */
    lz_screen_buf_free(&b);
}

void lz_screen_queue(lz_screen *s, const uint8_t *d, size_t n)
{
    s->unlooked = true; /* lz_screen_work looks for lines scrolled off */
    if (s->pending_off == s->pending_len) {
        drop_pending(s);
    } else if (s->pending_len - s->pending_off + n > LZ_SCREEN_MAX_BEHIND) {
        skip_pending(s);
    } else if (s->pending_off > 0 && n > s->pending_cap - s->pending_len) {
        /* what was emulated is gone: keep the rest at the start */
        size_t left = s->pending_len - s->pending_off;
        memmove(s->pending, s->pending + s->pending_off, left);
        explicit_bzero(s->pending + left, s->pending_len - left); /* RELAY_WIPE */
        s->pending_off = 0;
        s->pending_len = left;
    }
    if (n > s->pending_cap - s->pending_len) {
        size_t cap = s->pending_len + n;
        cap = cap < LZ_SCREEN_MAX_BEHIND ? LZ_SCREEN_MAX_BEHIND : cap;
        uint8_t *p = lz_xcalloc(1, cap);
        if (s->pending_len)
            memcpy(p, s->pending, s->pending_len);
        if (s->pending)
            explicit_bzero(s->pending, s->pending_cap);
        free(s->pending);
        s->pending = p;
        s->pending_cap = cap;
    }
    memcpy(s->pending + s->pending_len, d, n);
    s->pending_len += n;
}

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t) t.tv_sec * 1000000000 + t.tv_nsec;
}

/* How many bytes of d (n > 0) make one slice (SLICE_BYTES). */
static size_t slice_len(const lz_screen *s, const uint8_t *d, size_t n)
{
    int rows, cols;
    vterm_get_size(s->vt, &rows, &cols);
    size_t costly = SLICE_CELLS / ((size_t) rows * (size_t) cols);
    if (costly < 1)
        costly = 1;
    size_t i = 0, seen = 0;
    while (i < n && i < SLICE_BYTES) {
        uint8_t c = d[i++];
        if ((c == 0x1b || c == '\n' || c == '\v' || c == '\f' || c == 0xc2) && ++seen == costly)
            break;
    }
    return i;
}

bool lz_screen_work(lz_screen *s, int64_t budget_ns)
{
    int64_t start = budget_ns >= 0 ? now_ns() : 0;
    if (s->unlooked) {
        /* Over everything queued so far: the more output waited, the more
         * of it is skipped (a `cat` of a large file in 4 KiB reads). */
        s->unlooked = false;
        s->pending_off +=
            skip_at_start(s, s->pending + s->pending_off, s->pending_len - s->pending_off);
    }
    while (s->pending_off < s->pending_len) {
        const uint8_t *d = s->pending + s->pending_off;
        size_t left = s->pending_len - s->pending_off;
        size_t k = budget_ns >= 0 ? slice_len(s, d, left) : left;
        emulate(s, d, k);
        s->pending_off += k;
        if (budget_ns >= 0 && now_ns() - start >= budget_ns)
            break;
    }
    if (s->pending_off < s->pending_len)
        return true;
    drop_pending(s);
    return false;
}

void lz_screen_catch_up(lz_screen *s, int64_t budget_ns)
{
    if (lz_screen_work(s, budget_ns))
        skip_pending(s);
}

bool lz_screen_behind(const lz_screen *s)
{
    return s->pending_off < s->pending_len;
}

size_t lz_screen_backlog(const lz_screen *s)
{
    return s->pending_len - s->pending_off;
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
    if (lz_screen_behind(s)) {
        /* The emulator is behind the terminal (a sandbox's costly output:
         * lz_screen_work), and catching up could take seconds: what the
         * program changed is reset all the same, and the message goes on
         * a new line below wherever the terminal's cursor is. */
        drop_pending(s);
        put_str(b, LZ_TERM_INPUT_MODES_OFF LZ_TERM_SCREEN_MODES_OFF "\r\n");
        return;
    }
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
