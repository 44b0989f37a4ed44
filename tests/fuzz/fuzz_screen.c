/* SPDX-License-Identifier: Apache-2.0
 *
 * libFuzzer target for the session's screen (src/client/screen.c): the
 * sandbox's output bytes go to the mode tracker and libvterm, whole and in
 * pieces cut where the first two input bytes say, on a terminal whose size
 * the third and fourth bytes choose; then the repaint, the developer's
 * input with a cursor report in it, and the reset.
 *
 * Invariants checked (a violation aborts, which libFuzzer records as a
 * crash):
 *  - the tracker's state does not depend on how the bytes were cut (the
 *    parser keeps its state across reads; only the parser's own fields
 *    may differ);
 *  - a screen switch stops the tracker only before a final byte, and the
 *    next call always makes progress;
 *  - the repaint holds none of the sandbox's strings or controls: no OSC,
 *    DCS, APC, PM or SOS introducer, no BEL, no C0 control but ESC, CR and
 *    LF... (the repaint writes none of CR/LF either), no C1 control as a
 *    byte or as UTF-8;
 *  - the repaint puts the modes and the cursor (outside origin mode) back: fed to a fresh screen
 *    after the prompt's clearing, that screen has the same modes and
 *    cursor (cells are compared by tests/unit/test_screen.c and the tmux
 *    tests: libvterm's width tables make odd code points — zero-width
 *    ones, marks — land differently when written again);
 *  - the reset ends in "\r" or "\r\n".
 *
 * Run: build-dir/tests/fuzz/fuzz_screen -max_total_time=180 NEW_CORPUS_DIR
 *          tests/fuzz/corpus/fuzz_screen
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/screen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

static void same_modes(const lz_term_modes *a, const lz_term_modes *b)
{
    CHECK(memcmp(a->mode, b->mode, sizeof(a->mode)) == 0);
    CHECK(a->keypad_app == b->keypad_app && a->alt_screen == b->alt_screen);
    CHECK(a->scroll_top == b->scroll_top && a->scroll_bottom == b->scroll_bottom);
    CHECK(a->modify_other_keys == b->modify_other_keys && a->kitty_depth == b->kitty_depth);
    CHECK(memcmp(a->kitty_flags, b->kitty_flags, sizeof(a->kitty_flags)) == 0);
}

static void check_repaint(const lz_screen_buf *b)
{
    for (size_t i = 0; i < b->len; i++) {
        uint8_t c = (uint8_t) b->data[i];
        CHECK(c >= 0x20 || c == 0x1b);
        if (c == 0x1b && i + 1 < b->len) {
            uint8_t n = (uint8_t) b->data[i + 1];
            CHECK(n == '[' || n == '=' || n == '>');
        }
        /* UTF-8 of U+0080..U+009F */
        if (c == 0xc2 && i + 1 < b->len)
            CHECK((uint8_t) b->data[i + 1] >= 0xa0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    unsigned cut1 = data[0], cut2 = data[1];
    unsigned rows = 1 + data[2] % 60, cols = 1 + data[3] % 150;
    data += 4;
    size -= 4;
    uint8_t *copy = malloc(size ? size : 1); /* exactly its length: a read past it is a report */
    memcpy(copy, data, size);

    lz_screen *whole = lz_screen_new(rows, cols), *pieces = lz_screen_new(rows, cols);
    lz_screen_feed(whole, copy, size);
    size_t at = 0, step = 0;
    while (at < size) {
        size_t len = 1 + (step++ % 2 ? cut2 : cut1);
        if (len > size - at)
            len = size - at;
        lz_screen_feed(pieces, copy + at, len);
        at += len;
    }
    same_modes(lz_screen_modes(whole), lz_screen_modes(pieces));

    /* The same output queued and worked through one slice at a time
     * (lz_screen_work with no time to spare), then either caught up
     * (the same screen as at once) or given up (the same modes). */
    lz_screen *sliced = lz_screen_new(rows, cols);
    at = step = 0;
    while (at < size) {
        size_t len = 1 + (step++ % 2 ? cut2 : cut1);
        if (len > size - at)
            len = size - at;
        lz_screen_queue(sliced, copy + at, len);
        (void) lz_screen_work(sliced, 0);
        at += len;
    }
    lz_screen_catch_up(sliced, (cut1 ^ cut2) & 1 ? 0 : -1);
    CHECK(!lz_screen_behind(sliced));
    /* The cursor is not compared: libvterm 0.1.4 is not split-invariant
     * for invalid UTF-8 (the pieces above differ from the whole by a
     * column there too; docs/escalation.md). */
    same_modes(lz_screen_modes(whole), lz_screen_modes(sliced));
    lz_screen_buf rq = { 0 };
    lz_screen_repaint(sliced, &rq);
    check_repaint(&rq);
    lz_screen_buf_free(&rq);
    lz_screen_free(sliced);

    lz_term_modes m;
    lz_term_modes_init(&m);
    at = 0;
    while (at < size) {
        bool sw;
        size_t k = lz_term_modes_feed(&m, copy + at, size - at, &sw);
        CHECK(k <= size - at);
        CHECK(sw ? k < size - at : k == size - at);
        at += k;
        if (sw) {
            uint8_t fin = copy[at];
            CHECK(fin == 'h' || fin == 'l');
            k = lz_term_modes_feed(&m, copy + at, 1, &sw);
            CHECK(k == 1 && !sw);
            at++;
        }
    }

    lz_screen_buf ra = { 0 }, rb = { 0 };
    lz_screen_repaint(whole, &ra);
    if (ra.len) {
        check_repaint(&ra);
        lz_screen *again = lz_screen_new(rows, cols);
        static const char prompt[] = LZ_TERM_INPUT_MODES_OFF
            "\x1b[?1049l\x1b[!p\x1b[r\x1b[?6l\x1b[?7h\x1b[?25h\x1b[0m\x1b[H\x1b[2J\x1b[H";
        lz_screen_feed(again, (const uint8_t *) prompt, sizeof(prompt) - 1);
        lz_screen_feed(again, (const uint8_t *) ra.data, ra.len);
        lz_screen_repaint(again, &rb);
        same_modes(lz_screen_modes(whole), lz_screen_modes(again));
        unsigned r1, c1, r2, c2;
        lz_screen_cursor(whole, &r1, &c1);
        lz_screen_cursor(again, &r2, &c2);
        /* Origin mode with a scroll region the tracker and libvterm
         * validate differently (a bottom beyond the screen) is not
         * checked: a known gap (docs/escalation.md). */
        CHECK((r1 == r2 && c1 == c2) || lz_screen_modes(whole)->mode[LZ_MODE_ORIGIN]);
        lz_screen_free(again);
    }

    size_t n = size;
    lz_screen_take_cursor_report(pieces, copy, &n);
    CHECK(n <= size);

    lz_screen_buf rs = { 0 };
    lz_screen_reset(whole, &rs);
    CHECK(rs.len >= 1 && rs.data[rs.len - 1] == (rs.data[rs.len - 1] == '\n' ? '\n' : '\r'));

    lz_screen_buf_free(&ra);
    lz_screen_buf_free(&rb);
    lz_screen_buf_free(&rs);
    lz_screen_free(whole);
    lz_screen_free(pieces);
    free(copy);
    return 0;
}
