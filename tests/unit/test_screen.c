/* SPDX-License-Identifier: Apache-2.0
 *
 * client/screen.c: the mode tracker (a bounded parser of the sandbox's
 * output), the repaint encoder and the reset (docs/escalation.md "The
 * screen after a prompt"; docs/errors.md "Terminal").
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "client/screen.h"

static void feed_str(lz_screen *s, const char *t)
{
    lz_screen_feed(s, (const uint8_t *) t, strlen(t));
}

static void modes_feed_str(lz_term_modes *m, const char *t, bool bytewise)
{
    size_t n = strlen(t), at = 0;
    while (at < n) {
        bool sw;
        size_t k = lz_term_modes_feed(m, (const uint8_t *) t + at, bytewise ? 1 : n - at, &sw);
        at += k;
    }
}

static void test_modes_set_and_reset_across_reads(void **state)
{
    (void) state;
    for (int bytewise = 0; bytewise < 2; bytewise++) {
        lz_term_modes m;
        lz_term_modes_init(&m);
        assert_true(m.mode[LZ_MODE_AUTOWRAP] && m.mode[LZ_MODE_CURSOR_VISIBLE]);
        modes_feed_str(&m, "\x1b[?1002;1006h\x1b[?2004h\x1b[?25l\x1b=\x1b[?1h\x1b[?1004h",
                       bytewise);
        assert_true(m.mode[LZ_MODE_MOUSE_BUTTON] && m.mode[LZ_MODE_MOUSE_SGR]);
        assert_true(m.mode[LZ_MODE_BRACKETED_PASTE] && m.mode[LZ_MODE_FOCUS]);
        assert_false(m.mode[LZ_MODE_CURSOR_VISIBLE]);
        assert_true(m.keypad_app && m.mode[LZ_MODE_CURSOR_KEYS]);
        modes_feed_str(&m, "\x1b[?1002l\x1b>", bytewise);
        assert_false(m.mode[LZ_MODE_MOUSE_BUTTON] || m.keypad_app);
        assert_true(m.mode[LZ_MODE_MOUSE_SGR]);
        /* DECSTR: cursor and keypad modes, not the reporting ones */
        modes_feed_str(&m, "\x1b[2;5r\x1b[!p", bytewise);
        assert_true(m.mode[LZ_MODE_CURSOR_VISIBLE] && !m.mode[LZ_MODE_CURSOR_KEYS]);
        assert_true(m.mode[LZ_MODE_BRACKETED_PASTE]);
        assert_int_equal(m.scroll_top + m.scroll_bottom, 0);
        /* RIS: everything */
        modes_feed_str(&m,
                       "\x1b[?1049h\x1b"
                       "c",
                       bytewise);
        assert_false(m.mode[LZ_MODE_BRACKETED_PASTE] || m.mode[LZ_MODE_MOUSE_SGR]);
        assert_int_equal(m.alt_screen, 0);
    }
}

static void test_modes_region_kitty_modify_other_keys(void **state)
{
    (void) state;
    lz_term_modes m;
    lz_term_modes_init(&m);
    modes_feed_str(&m, "\x1b[3;20r", false);
    assert_int_equal(m.scroll_top, 3);
    assert_int_equal(m.scroll_bottom, 20);
    modes_feed_str(&m, "\x1b[9;4r", false); /* invalid: ignored, as terminals do */
    assert_int_equal(m.scroll_top, 3);
    modes_feed_str(&m, "\x1b[>1u\x1b[>3u\x1b[=8;2u", false);
    assert_int_equal(m.kitty_depth, 2);
    assert_int_equal(m.kitty_flags[0], 11);
    assert_int_equal(m.kitty_flags[1], 1);
    modes_feed_str(&m, "\x1b[<u", false);
    assert_int_equal(m.kitty_depth, 1);
    assert_int_equal(m.kitty_flags[0], 1);
    modes_feed_str(&m, "\x1b[<5u", false);
    assert_int_equal(m.kitty_depth + m.kitty_flags[0], 0);
    modes_feed_str(&m, "\x1b[>4;2m", false);
    assert_int_equal(m.modify_other_keys, 2);
    modes_feed_str(&m, "\x1b[>4m", false);
    assert_int_equal(m.modify_other_keys, 0);
}

static void test_modes_strings_cancel_and_bounds(void **state)
{
    (void) state;
    lz_term_modes m;
    lz_term_modes_init(&m);
    /* inside a string (title, BEL-terminated): no sequence */
    modes_feed_str(&m, "\x1b]0;[?2004h\x07", false);
    assert_false(m.mode[LZ_MODE_BRACKETED_PASTE]);
    /* CAN cancels a sequence; a leader after parameters is malformed */
    modes_feed_str(&m, "\x1b[?2004\x18h\x1b[1?2004h", false);
    assert_false(m.mode[LZ_MODE_BRACKETED_PASTE]);
    /* huge parameters are clamped, extra ones ignored, nothing overflows */
    char big[8192];
    size_t n = 0;
    n += (size_t) snprintf(big + n, sizeof(big) - n, "\x1b[?");
    for (int i = 0; i < 500; i++)
        n += (size_t) snprintf(big + n, sizeof(big) - n, "99999999;");
    snprintf(big + n, sizeof(big) - n, "2004h");
    modes_feed_str(&m, big, false);
    assert_false(m.mode[LZ_MODE_BRACKETED_PASTE]); /* the 501st parameter is not kept */
    modes_feed_str(&m, "\x1b[?99999999;2004h", false);
    assert_true(m.mode[LZ_MODE_BRACKETED_PASTE]);
}

static void test_modes_stop_before_a_screen_switch(void **state)
{
    (void) state;
    lz_term_modes m;
    lz_term_modes_init(&m);
    const char *t = "ab\x1b[?1049hcd";
    bool sw;
    size_t k = lz_term_modes_feed(&m, (const uint8_t *) t, strlen(t), &sw);
    assert_true(sw);
    assert_int_equal(k, 9); /* before the 'h' */
    assert_int_equal(m.alt_screen, 0);
    k = lz_term_modes_feed(&m, (const uint8_t *) t + 9, strlen(t) - 9, &sw);
    assert_false(sw);
    assert_int_equal(k, 3);
    assert_int_equal(m.alt_screen, 1049);
}

static void test_modes_encode(void **state)
{
    (void) state;
    lz_term_modes m;
    lz_term_modes_init(&m);
    lz_screen_buf b = { 0 };
    lz_term_modes_encode(&m, &b);
    assert_int_equal(b.len, 0); /* defaults: nothing to say */
    modes_feed_str(&m, "\x1b[?1000;1006;2004h\x1b[?7l\x1b=\x1b[>5u\x1b[>4;1m", false);
    lz_term_modes_encode(&m, &b);
    assert_string_equal(b.data, "\x1b[?7l\x1b[?1000h\x1b[?1006h\x1b[?2004h\x1b=\x1b[>5u\x1b[>4;1m");
    lz_screen_buf_free(&b);
}

/* What the prompt does to the terminal (client/prompt.c), then the repaint:
 * on a fresh emulator that sees all of it, the repaint must give the same
 * screen, cursor, pen and modes as the original; so its own repaint is the
 * same bytes. */
static void roundtrip(const char *program)
{
    lz_screen *a = lz_screen_new(12, 40);
    feed_str(a, program);
    lz_screen_buf ra = { 0 }, rb = { 0 };
    lz_screen_repaint(a, &ra);
    lz_screen *b = lz_screen_new(12, 40);
    feed_str(b, "garbage the prompt\r\nleft behind\x1b[5;5H");
    feed_str(b, LZ_TERM_INPUT_MODES_OFF "\x1b[?1049l\x1b[!p\x1b[r\x1b[?6l\x1b[?7h\x1b[?25h\x1b[0m"
                                        "\x1b[H\x1b[2J\x1b[HHost escalation request\r\n");
    lz_screen_feed(b, (const uint8_t *) ra.data, ra.len);
    lz_screen_repaint(b, &rb);
    assert_string_equal(ra.data, rb.data);
    for (unsigned r = 0; r < 12; r++) {
        char ta[256], tb[256];
        lz_screen_row_text(a, r, ta, sizeof(ta));
        lz_screen_row_text(b, r, tb, sizeof(tb));
        assert_string_equal(ta, tb);
    }
    unsigned ar, ac, br, bc;
    lz_screen_cursor(a, &ar, &ac);
    lz_screen_cursor(b, &br, &bc);
    assert_int_equal(ar, br);
    assert_int_equal(ac, bc);
    assert_memory_equal(lz_screen_modes(a)->mode, lz_screen_modes(b)->mode,
                        sizeof(lz_screen_modes(a)->mode));
    lz_screen_buf_free(&ra);
    lz_screen_buf_free(&rb);
    lz_screen_free(a);
    lz_screen_free(b);
}

static void test_repaint_inline(void **state)
{
    (void) state;
    roundtrip(
        "$ agent\r\n\x1b[32mgreen\x1b[0m \x1b[1;4;38;5;200mbold\x1b[0m \xe6\xbc\xa2\xe5\xad\x97 "
        "e\xcc\x81\r\n\x1b[48;2;1;2;3mrgb bg\x1b[K\x1b[0m\r\n> typing\x1b[3D\x1b[?2004h"
        "\x1b[?25l\x1b[7m");
}

static void test_repaint_alternate_screen(void **state)
{
    (void) state;
    roundtrip("shell line one\r\nshell line two\x1b[?1049h\x1b[?1002h\x1b[?1006h\x1b[?1h\x1b="
              "\x1b[H\x1b[2Jtitle\x1b[12;1Hstatus\x1b[2;11r\x1b[?6h\x1b[3;4Hin region");
}

static void test_repaint_writes_no_raw_sandbox_bytes(void **state)
{
    (void) state;
    lz_screen *s = lz_screen_new(10, 40);
    feed_str(s, "\x1b]52;c;ZXZpbA==\x07\x1bPqdcs\x1b\\text \xc2\x9b\x1b[?1000h more\x1b_apc\x1b\\"
                "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\");
    lz_screen_buf b = { 0 };
    lz_screen_repaint(s, &b);
    assert_non_null(b.data);
    assert_null(strstr(b.data, "\x1b]"));
    assert_null(strstr(b.data, "\x1bP"));
    assert_null(strstr(b.data, "\x1b_"));
    assert_null(strstr(b.data, "\x07"));
    assert_null(strstr(b.data, "\xc2\x9b"));
    assert_non_null(strstr(b.data, "text "));
    assert_non_null(strstr(b.data, "link"));
    assert_non_null(strstr(b.data, "\x1b[?1000h")); /* the mode, Lazaret's own encoding */
    lz_screen_buf_free(&b);
    lz_screen_free(s);
}

static void test_reset_and_fresh_line(void **state)
{
    (void) state;
    lz_screen *s = lz_screen_new(10, 40);
    feed_str(s, "prompt$ half a line\x1b[?1049h\x1b[?1003h\x1b[?25lfull screen");
    lz_screen_buf b = { 0 };
    lz_screen_reset(s, &b);
    assert_non_null(strstr(b.data, "\x1b[?1003l"));
    assert_non_null(strstr(b.data, "\x1b[?1049l"));
    assert_non_null(strstr(b.data, "\x1b[?25h"));
    /* back on the normal screen the cursor is mid-line, where the program
     * left it (row 1, column 20), after the resets that move it: a new line */
    assert_non_null(strstr(b.data, "\x1b[1;20H\r\n"));
    assert_int_equal(b.data[b.len - 2], '\r');
    assert_int_equal(b.data[b.len - 1], '\n');
    lz_screen_buf_free(&b);
    lz_screen_free(s);
    s = lz_screen_new(10, 40);
    feed_str(s, "done\r\n");
    lz_screen_reset(s, &b);
    /* already at the start of an empty line */
    assert_non_null(strstr(b.data, "\x1b[2;1H\r"));
    assert_int_equal(b.data[b.len - 1], '\r');
    lz_screen_buf_free(&b);
    lz_screen_free(s);
}

static void test_cursor_report_is_taken_out_of_the_input(void **state)
{
    (void) state;
    lz_screen *s = lz_screen_new(10, 40);
    uint8_t in[] = "ab\x1b[5;7Rcd";
    size_t n = sizeof(in) - 1;
    assert_true(lz_screen_take_cursor_report(s, in, &n));
    assert_int_equal(n, 4);
    assert_memory_equal(in, "abcd", 4);
    unsigned r, c;
    lz_screen_cursor(s, &r, &c);
    assert_int_equal(r, 4);
    assert_int_equal(c, 6);
    uint8_t keys[] = "\x1b[A\x1b[5;R\x1b[;3R";
    n = sizeof(keys) - 1;
    assert_false(lz_screen_take_cursor_report(s, keys, &n));
    assert_int_equal(n, sizeof(keys) - 1);
    lz_screen_free(s);
}

/* Lines scrolled off within one read are not drawn (skip_scrolled_off):
 * the screen is the same as when every byte is fed on its own. */
static void test_scrolled_off_lines_leave_the_same_screen(void **state)
{
    (void) state;
    static const char *tails[] = { "", "partial last line", "\x1b[31mred\x1b[0m after", "\r\n\r\n",
                                   "\n\n\nno CR" };
    for (size_t t = 0; t < sizeof(tails) / sizeof(tails[0]); t++) {
        lz_screen_buf text = { 0 };
        for (int i = 0; i < 401; i++) { /* the last 10 lines do not wrap */
            char line[128];
            int n = snprintf(line, sizeof(line), "%s line %d%s\r\n", i % 7 ? "" : "\xe6\xbc\xa2", i,
                             i % 13 ? "" : " a long one that wraps past the edge of the screen");
            lz_screen_buf_put(&text, line, (size_t) n);
        }
        lz_screen_buf_put(&text, tails[t], strlen(tails[t]));
        lz_screen *whole = lz_screen_new(10, 40), *bytes = lz_screen_new(10, 40);
        /* a screen with something on every row, the cursor in the middle */
        for (int r = 0; r < 10; r++) {
            const char *old =
                r < 9 ? "an old row, longer than the new lines\r\n" : "the last old row";
            feed_str(whole, old);
            feed_str(bytes, old);
        }
        feed_str(whole, "\x1b[5;3Hmoved ");
        feed_str(bytes, "\x1b[5;3Hmoved ");
        lz_screen_feed(whole, (const uint8_t *) text.data, text.len);
        for (size_t i = 0; i < text.len; i++)
            lz_screen_feed(bytes, (const uint8_t *) text.data + i, 1);
        for (unsigned r = 0; r < 10; r++) {
            char a[256], b[256];
            lz_screen_row_text(whole, r, a, sizeof(a));
            lz_screen_row_text(bytes, r, b, sizeof(b));
            assert_string_equal(a, b);
        }
        unsigned ar, ac, br, bc;
        lz_screen_cursor(whole, &ar, &ac);
        lz_screen_cursor(bytes, &br, &bc);
        assert_int_equal(ar, br);
        assert_int_equal(ac, bc);
        lz_screen_buf_free(&text);
        lz_screen_free(whole);
        lz_screen_free(bytes);
    }
}

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t) t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Attack round a26 F4: output that is costly to emulate (DECALN fills the
 * whole screen in 3 bytes) is worked through in slices, each far shorter
 * than the whole, and leaves the same screen as feeding it at once. The
 * control is the whole feed's own time, measured in the same run. */
static void test_costly_output_is_emulated_in_slices(void **state)
{
    (void) state;
    lz_screen_buf out = { 0 };
    for (int i = 0; i < 300; i++) {
        char piece[64];
        int n = snprintf(piece, sizeof(piece), "\x1b#8\x1b[%d;%dHrow %d%s", i % 100 + 1,
                         i % 400 + 1, i, i % 50 == 0 ? "\x1b[?1049h" : "");
        lz_screen_buf_put(&out, piece, (size_t) n);
    }
    lz_screen *whole = lz_screen_new(100, 500), *sliced = lz_screen_new(100, 500);

    int64_t t0 = now_ns();
    lz_screen_feed(whole, (const uint8_t *) out.data, out.len);
    int64_t whole_ns = now_ns() - t0;

    lz_screen_queue(sliced, (const uint8_t *) out.data, out.len);
    assert_true(lz_screen_behind(sliced));
    unsigned calls = 0;
    int64_t longest = 0;
    for (bool behind = true; behind; calls++) {
        int64_t c0 = now_ns();
        behind = lz_screen_work(sliced, 1000000);
        int64_t took = now_ns() - c0;
        longest = took > longest ? took : longest;
    }
    assert_false(lz_screen_behind(sliced));
    print_message("whole %.1f ms; %u slices of at most %.2f ms\n", (double) whole_ns / 1e6, calls,
                  (double) longest / 1e6);
    /* the control: at once, this output holds the caller for many slices */
    assert_true(whole_ns > 20 * 1000000);
    assert_true(calls >= 10);
    assert_true(longest * 5 < whole_ns);

    for (unsigned r = 0; r < 100; r++) {
        char a[2048], b[2048];
        lz_screen_row_text(whole, r, a, sizeof(a));
        lz_screen_row_text(sliced, r, b, sizeof(b));
        assert_string_equal(a, b);
    }
    unsigned ar, ac, br, bc;
    lz_screen_cursor(whole, &ar, &ac);
    lz_screen_cursor(sliced, &br, &bc);
    assert_int_equal(ar, br);
    assert_int_equal(ac, bc);
    assert_int_equal(lz_screen_modes(whole)->alt_screen, lz_screen_modes(sliced)->alt_screen);

    /* Past its budget, catching up gives up the cells but not the modes
     * nor the screen the program is in. */
    lz_screen *lossy = lz_screen_new(100, 500);
    lz_screen_queue(lossy, (const uint8_t *) out.data, out.len);
    lz_screen_catch_up(lossy, 0);
    assert_false(lz_screen_behind(lossy));
    assert_memory_equal(lz_screen_modes(whole)->mode, lz_screen_modes(lossy)->mode,
                        sizeof(lz_screen_modes(whole)->mode));
    assert_int_equal(lz_screen_modes(whole)->alt_screen, lz_screen_modes(lossy)->alt_screen);
    lz_screen_free(lossy);

    /* A backlog past LZ_SCREEN_MAX_BEHIND: the older part is given up. */
    lz_screen *flood = lz_screen_new(10, 40);
    size_t half = LZ_SCREEN_MAX_BEHIND / 2 + 1;
    uint8_t *xs = malloc(half);
    assert_non_null(xs);
    memset(xs, 'x', half);
    lz_screen_queue(flood, xs, half);
    memset(xs, 'y', half);
    lz_screen_queue(flood, xs, half);
    lz_screen_catch_up(flood, -1);
    char row[64];
    lz_screen_row_text(flood, 0, row, sizeof(row));
    assert_string_equal(row, "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy");
    free(xs);
    lz_screen_free(flood);

    /* a reset while behind drops what is left and still ends on a new line */
    lz_screen_queue(sliced, (const uint8_t *) out.data, out.len);
    lz_screen_buf b = { 0 };
    lz_screen_reset(sliced, &b);
    assert_false(lz_screen_behind(sliced));
    assert_true(b.len >= 2 && memcmp(b.data + b.len - 2, "\r\n", 2) == 0);
    lz_screen_buf_free(&b);

    lz_screen_buf_free(&out);
    lz_screen_free(whole);
    lz_screen_free(sliced);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_modes_set_and_reset_across_reads),
        cmocka_unit_test(test_modes_region_kitty_modify_other_keys),
        cmocka_unit_test(test_modes_strings_cancel_and_bounds),
        cmocka_unit_test(test_modes_stop_before_a_screen_switch),
        cmocka_unit_test(test_modes_encode),
        cmocka_unit_test(test_repaint_inline),
        cmocka_unit_test(test_repaint_alternate_screen),
        cmocka_unit_test(test_repaint_writes_no_raw_sandbox_bytes),
        cmocka_unit_test(test_reset_and_fresh_line),
        cmocka_unit_test(test_cursor_report_is_taken_out_of_the_input),
        cmocka_unit_test(test_scrolled_off_lines_leave_the_same_screen),
        cmocka_unit_test(test_costly_output_is_emulated_in_slices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
