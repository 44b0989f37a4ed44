/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests for src/common/loop.c, the coordinator's event loop, against
 * the contract in loop.h: descriptor sources fire on readiness (and not
 * without it), events 0 pauses a source, timers fire once, in due order,
 * and re-arm with lz_loop_timer_set; removal during dispatch (a callback
 * removing itself, a source removing another one that is ready in the same
 * round, a timer removing another timer due in the same round) never calls
 * the removed source; a source added during a round waits for the next one;
 * lz_loop_count follows adds and removals. Every test frees its loop with
 * sources still registered, so LeakSanitizer (ASan build) would report a
 * source the loop forgot.
 *
 * Readiness comes from real pipes; timers use short real delays (tens of
 * milliseconds), and no test depends on a wait being exact: each only
 * requires "not before" and "eventually, within a generous bound".
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/loop.h"

/* ---- helpers ------------------------------------------------------------ */

typedef struct rec {
    int calls;
    short last_revents;
    int order;              /* global sequence number of the last call */
    lz_loop_source *src;    /* this record's own source */
    lz_loop_source *victim; /* removed by this callback, when set */
    bool remove_self;
    bool drain; /* read the pipe so it is not ready again */
    int fd;
    /* Added by the callback (once): must not be called in the same round. */
    bool add_other;
    struct rec *added;
    lz_loop *loop;
    int64_t rearm_ms; /* timers: re-arm this many times (rearm_left) */
    int rearm_left;
    bool end_round; /* lz_loop_end_round from the callback */
} rec;

static int seq;

static void fd_cb(lz_loop *loop, lz_loop_source *src, int fd, short revents, void *data)
{
    rec *r = data;
    assert_ptr_equal(src, r->src);
    assert_int_equal(fd, r->fd);
    r->calls++;
    r->last_revents = revents;
    r->order = ++seq;
    if (r->drain) {
        char b[64];
        (void) !read(fd, b, sizeof(b));
    }
    if (r->victim)
        lz_loop_remove(r->victim);
    if (r->remove_self)
        lz_loop_remove(src);
    if (r->add_other && r->added) {
        r->added->src = lz_loop_add_fd(loop, r->added->fd, POLLIN, fd_cb, r->added);
        r->add_other = false;
    }
    if (r->end_round)
        lz_loop_end_round(loop);
}

static void timer_cb(lz_loop *loop, lz_loop_source *src, void *data)
{
    rec *r = data;
    if (r->end_round)
        lz_loop_end_round(loop);
    assert_ptr_equal(src, r->src);
    r->calls++;
    r->order = ++seq;
    if (r->rearm_left > 0) {
        r->rearm_left--;
        lz_loop_timer_set(src, r->rearm_ms);
    }
    if (r->victim)
        lz_loop_remove(r->victim);
    if (r->remove_self)
        lz_loop_remove(src);
}

static void make_pipe(int p[2])
{
    assert_int_equal(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
}

static void make_ready(int p[2])
{
    assert_int_equal(write(p[1], "x", 1), 1);
}

/* Run rounds until cond or about 2 s have passed; returns the rounds. */
#define RUN_UNTIL(loop, cond)                                                                      \
    do {                                                                                           \
        int64_t until_ = lz_loop_now_ms() + 2000;                                                  \
        while (!(cond) && lz_loop_now_ms() < until_)                                               \
            assert_true(lz_loop_run_once((loop), 50) >= 0);                                        \
        assert_true(cond);                                                                         \
    } while (0)

/* ---- descriptors -------------------------------------------------------- */

static void test_fd_fires_on_readiness_only(void **state)
{
    (void) state;
    lz_loop *loop = lz_loop_new();
    int p[2];
    make_pipe(p);
    rec r = { .fd = p[0], .drain = true };
    r.src = lz_loop_add_fd(loop, p[0], POLLIN, fd_cb, &r);
    assert_int_equal(lz_loop_count(loop), 1);

    /* Not readable: nothing runs (the wait is bounded by max_wait_ms). */
    assert_int_equal(lz_loop_run_once(loop, 20), 0);
    assert_int_equal(r.calls, 0);

    make_ready(p);
    assert_int_equal(lz_loop_run_once(loop, 1000), 1);
    assert_int_equal(r.calls, 1);
    assert_true(r.last_revents & POLLIN);

    /* Drained: quiet again. */
    assert_int_equal(lz_loop_run_once(loop, 20), 0);
    assert_int_equal(r.calls, 1);

    /* The writer's end closed: POLLHUP is reported. */
    close(p[1]);
    assert_int_equal(lz_loop_run_once(loop, 1000), 1);
    assert_true(r.last_revents & POLLHUP);

    lz_loop_free(loop); /* with the source still registered: no leak */
    close(p[0]);
}

static void test_fd_sources_run_in_registration_order(void **state)
{
    (void) state;
    lz_loop *loop = lz_loop_new();
    int a[2], b[2];
    make_pipe(a);
    make_pipe(b);
    rec ra = { .fd = a[0], .drain = true }, rb = { .fd = b[0], .drain = true };
    ra.src = lz_loop_add_fd(loop, a[0], POLLIN, fd_cb, &ra);
    rb.src = lz_loop_add_fd(loop, b[0], POLLIN, fd_cb, &rb);
    make_ready(b);
    make_ready(a);
    assert_int_equal(lz_loop_run_once(loop, 1000), 2);
    assert_int_equal(ra.calls, 1);
    assert_int_equal(rb.calls, 1);
    assert_true(ra.order < rb.order);
    lz_loop_free(loop);
    close(a[0]), close(a[1]), close(b[0]), close(b[1]);
}

static void test_events_zero_pauses(void **state)
{
    (void) state;
    lz_loop *loop = lz_loop_new();
    int p[2];
    make_pipe(p);
    rec r = { .fd = p[0], .drain = true };
    r.src = lz_loop_add_fd(loop, p[0], POLLIN, fd_cb, &r);
    lz_loop_set_events(r.src, 0);
    make_ready(p);
    /* Readable, but paused: not called, and still registered. */
    assert_int_equal(lz_loop_run_once(loop, 30), 0);
    assert_int_equal(r.calls, 0);
    assert_int_equal(lz_loop_count(loop), 1);
    /* Resumed: the pending byte is seen. */
    lz_loop_set_events(r.src, POLLIN);
    assert_int_equal(lz_loop_run_once(loop, 1000), 1);
    assert_int_equal(r.calls, 1);
    /* Paused, POLLHUP is still reported (loop.h). */
    lz_loop_set_events(r.src, 0);
    close(p[1]);
    assert_int_equal(lz_loop_run_once(loop, 1000), 1);
    assert_int_equal(r.calls, 2);
    assert_true(r.last_revents & POLLHUP);
    assert_false(r.last_revents & POLLIN);
    lz_loop_free(loop);
    close(p[0]);
}

/* A paused source is not polled at all: not even POLLHUP wakes it (the
 * PTY relay pauses a hung-up master while its output waits). */
static void test_paused_source_is_not_polled(void **state)
{
    (void) state;
    lz_loop *loop = lz_loop_new();
    int p[2];
    make_pipe(p);
    rec r = { .fd = p[0], .drain = true };
    r.src = lz_loop_add_fd(loop, p[0], POLLIN, fd_cb, &r);
    close(p[1]); /* POLLHUP from now on */
    lz_loop_set_paused(r.src, true);
    assert_int_equal(lz_loop_run_once(loop, 30), 0);
    assert_int_equal(r.calls, 0);
    assert_int_equal(lz_loop_count(loop), 1);
    /* Control: resumed, the hang-up is reported at once. */
    lz_loop_set_paused(r.src, false);
    assert_int_equal(lz_loop_run_once(loop, 1000), 1);
    assert_int_equal(r.calls, 1);
    assert_true(r.last_revents & POLLHUP);
    lz_loop_free(loop);
    close(p[0]);
}

/* ---- timers ------------------------------------------------------------- */

static void test_timer_fires_once_then_is_gone(void **state)
{
    (void) state;
    lz_loop *loop = lz_loop_new();
    rec r = { 0 };
    int64_t t0 = lz_loop_now_ms();
    r.src = lz_loop_add_timer(loop, 40, timer_cb, &r);
    assert_int_equal(lz_loop_count(loop), 1);
    /* Not before it is due. */
    assert_int_equal(lz_loop_run_once(loop, 0), 0);
    assert_int_equal(r.calls, 0);
    /* A negative wait is bounded by the timer: one call returns it. */
    assert_int_equal(lz_loop_run_once(loop, -1), 1);
    assert_int_equal(r.calls, 1);
    assert_true(lz_loop_now_ms() - t0 >= 40);
    /* One-shot: removed after its callback. */
    assert_int_equal(lz_loop_count(loop), 0);
    assert_int_equal(lz_loop_run_once(loop, 60), 0);
    assert_int_equal(r.calls, 1);
    lz_loop_free(loop);
}

static void test_timers_fire_in_due_order(void **state)
{
    (void) state;
    lz_loop *loop = lz_loop_new();
    /* Registered in the reverse of their due order. */
    rec late = { 0 }, mid = { 0 }, early = { 0 };
    late.src = lz_loop_add_timer(loop, 90, timer_cb, &late);
    mid.src = lz_loop_add_timer(loop, 50, timer_cb, &mid);
    early.src = lz_loop_add_timer(loop, 10, timer_cb, &early);
    RUN_UNTIL(loop, late.calls == 1);
    assert_int_equal(early.calls, 1);
    assert_int_equal(mid.calls, 1);
    assert_true(early.order < mid.order);
    assert_true(mid.order < late.order);
    assert_int_equal(lz_loop_count(loop), 0);
    lz_loop_free(loop);
}

static void test_timer_rearms_from_its_callback(void **state)
{
    (void) state;
    lz_loop *loop = lz_loop_new();
    rec r = { .rearm_ms = 10, .rearm_left = 2 };
    r.src = lz_loop_add_timer(loop, 0, timer_cb, &r);
    RUN_UNTIL(loop, r.calls == 3);
    /* Re-armed twice, then one-shot again: gone, never a fourth call. */
    assert_int_equal(lz_loop_count(loop), 0);
    assert_int_equal(lz_loop_run_once(loop, 40), 0);
    assert_int_equal(r.calls, 3);
    lz_loop_free(loop);
}

static void test_timer_set_postpones_a_pending_timer(void **state)
{
    (void) state;
    lz_loop *loop = lz_loop_new();
    rec r = { 0 };
    r.src = lz_loop_add_timer(loop, 0, timer_cb, &r);
    int64_t t0 = lz_loop_now_ms();
    lz_loop_timer_set(r.src, 80); /* before it could fire */
    assert_int_equal(lz_loop_run_once(loop, 20), 0);
    assert_int_equal(r.calls, 0);
    RUN_UNTIL(loop, r.calls == 1);
    assert_true(lz_loop_now_ms() - t0 >= 80);
    lz_loop_free(loop);
}

static void test_timer_runs_before_descriptors(void **state)
{
    (void) state;
    lz_loop *loop = lz_loop_new();
    int p[2];
    make_pipe(p);
    rec rf = { .fd = p[0], .drain = true }, rt = { 0 };
    rf.src = lz_loop_add_fd(loop, p[0], POLLIN, fd_cb, &rf);
    rt.src = lz_loop_add_timer(loop, 0, timer_cb, &rt);
    make_ready(p);
    assert_int_equal(lz_loop_run_once(loop, 1000), 2);
    assert_true(rt.order < rf.order);
    lz_loop_free(loop);
    close(p[0]), close(p[1]);
}

/* ---- removal and addition during dispatch -------------------------------- */

static void test_callback_removes_itself(void **state)
{
    (void) state;
    lz_loop *loop = lz_loop_new();
    int p[2];
    make_pipe(p);
    rec r = { .fd = p[0], .remove_self = true }; /* does not drain: stays ready */
    r.src = lz_loop_add_fd(loop, p[0], POLLIN, fd_cb, &r);
    make_ready(p);
    assert_int_equal(lz_loop_run_once(loop, 1000), 1);
    assert_int_equal(lz_loop_count(loop), 0);
    /* Still readable, but removed: never called again. */
    assert_int_equal(lz_loop_run_once(loop, 20), 0);
    assert_int_equal(r.calls, 1);
    lz_loop_remove(NULL); /* harmless */
    lz_loop_free(loop);
    close(p[0]), close(p[1]);
}

static void test_removing_a_ready_source_of_the_same_round(void **state)
{
    (void) state;
    lz_loop *loop = lz_loop_new();
    int a[2], b[2];
    make_pipe(a);
    make_pipe(b);
    rec ra = { .fd = a[0], .drain = true }, rb = { .fd = b[0], .drain = true };
    ra.src = lz_loop_add_fd(loop, a[0], POLLIN, fd_cb, &ra);
    rb.src = lz_loop_add_fd(loop, b[0], POLLIN, fd_cb, &rb);
    ra.victim = rb.src; /* the first removes the second */
    make_ready(a);
    make_ready(b);
    /* Both ready in this round; b was collected by poll but is removed
     * before its turn: it must not be called. */
    assert_int_equal(lz_loop_run_once(loop, 1000), 1);
    assert_int_equal(ra.calls, 1);
    assert_int_equal(rb.calls, 0);
    assert_int_equal(lz_loop_count(loop), 1);
    ra.victim = NULL;
    /* b's byte is still there, but nobody watches it any more. */
    assert_int_equal(lz_loop_run_once(loop, 20), 0);
    assert_int_equal(rb.calls, 0);
    lz_loop_free(loop);
    close(a[0]), close(a[1]), close(b[0]), close(b[1]);
}

/* The reason for the contract: a callback ends another session, removing
 * its source and closing its descriptor, and the number is reused at once
 * by a new descriptor. The old source must not run for what poll reported
 * about the old descriptor. */
typedef struct reuse {
    lz_loop_source *victim;
    int *victim_fd;
    int newp[2];
} reuse;

static void reuse_cb(lz_loop *loop, lz_loop_source *src, int fd, short revents, void *data)
{
    (void) loop, (void) src, (void) revents;
    reuse *u = data;
    char c;
    (void) !read(fd, &c, 1);
    int old = *u->victim_fd;
    lz_loop_remove(u->victim);
    close(old);
    make_pipe(u->newp);
    /* The kernel would reuse the lowest free number; make it certain. */
    if (u->newp[0] != old) {
        assert_int_equal(dup3(u->newp[0], old, O_CLOEXEC), old);
        close(u->newp[0]);
        u->newp[0] = old;
    }
    make_ready(u->newp);
}

static void test_removing_a_ready_source_then_its_fd_reused(void **state)
{
    (void) state;
    lz_loop *loop = lz_loop_new();
    int a[2], b[2];
    make_pipe(a);
    make_pipe(b);
    rec rb = { .fd = b[0], .drain = true };
    reuse u = { .victim_fd = &b[0] };
    lz_loop_add_fd(loop, a[0], POLLIN, reuse_cb, &u); /* runs first */
    rb.src = lz_loop_add_fd(loop, b[0], POLLIN, fd_cb, &rb);
    u.victim = rb.src;
    make_ready(a);
    make_ready(b);
    assert_int_equal(lz_loop_run_once(loop, 1000), 1);
    assert_int_equal(rb.calls, 0);
    /* The new descriptor under the old number is nobody's source. */
    assert_int_equal(lz_loop_run_once(loop, 20), 0);
    assert_int_equal(rb.calls, 0);
    assert_int_equal(lz_loop_count(loop), 1);
    lz_loop_free(loop);
    close(a[0]), close(a[1]), close(b[1]), close(u.newp[0]), close(u.newp[1]);
}

static void test_timer_removes_a_timer_due_in_the_same_round(void **state)
{
    (void) state;
    lz_loop *loop = lz_loop_new();
    rec first = { 0 }, second = { 0 };
    first.src = lz_loop_add_timer(loop, 0, timer_cb, &first);
    second.src = lz_loop_add_timer(loop, 0, timer_cb, &second);
    first.victim = second.src;
    /* Both are due now; the first fires and removes the second. */
    usleep(2000);
    assert_int_equal(lz_loop_run_once(loop, 0), 1);
    assert_int_equal(first.calls, 1);
    assert_int_equal(second.calls, 0);
    assert_int_equal(lz_loop_count(loop), 0);
    assert_int_equal(lz_loop_run_once(loop, 20), 0);
    assert_int_equal(second.calls, 0);
    lz_loop_free(loop);
}

static void test_timer_removes_a_ready_fd_source(void **state)
{
    (void) state;
    lz_loop *loop = lz_loop_new();
    int p[2];
    make_pipe(p);
    rec rf = { .fd = p[0], .drain = true }, rt = { 0 };
    rf.src = lz_loop_add_fd(loop, p[0], POLLIN, fd_cb, &rf);
    rt.src = lz_loop_add_timer(loop, 0, timer_cb, &rt);
    rt.victim = rf.src;
    make_ready(p);
    usleep(2000);
    /* Timers run first; the removed descriptor source is not called even
     * though poll reported it readable in this round. */
    assert_int_equal(lz_loop_run_once(loop, 1000), 1);
    assert_int_equal(rt.calls, 1);
    assert_int_equal(rf.calls, 0);
    assert_int_equal(lz_loop_count(loop), 0);
    lz_loop_free(loop);
    close(p[0]), close(p[1]);
}

static void test_timer_removing_itself_is_not_rearmed(void **state)
{
    (void) state;
    lz_loop *loop = lz_loop_new();
    /* Re-armed, then removed in the same callback: removal wins. */
    rec r = { .rearm_ms = 0, .rearm_left = 1, .remove_self = true };
    r.src = lz_loop_add_timer(loop, 0, timer_cb, &r);
    RUN_UNTIL(loop, r.calls == 1);
    assert_int_equal(lz_loop_count(loop), 0);
    assert_int_equal(lz_loop_run_once(loop, 20), 0);
    assert_int_equal(r.calls, 1);
    lz_loop_free(loop);
}

static void test_source_added_during_a_round_waits(void **state)
{
    (void) state;
    lz_loop *loop = lz_loop_new();
    int a[2], b[2];
    make_pipe(a);
    make_pipe(b);
    rec rb = { .fd = b[0], .drain = true };
    rec ra = { .fd = a[0], .drain = true, .add_other = true, .added = &rb };
    ra.src = lz_loop_add_fd(loop, a[0], POLLIN, fd_cb, &ra);
    make_ready(a);
    make_ready(b); /* b is ready before its source even exists */
    assert_int_equal(lz_loop_run_once(loop, 1000), 1);
    assert_int_equal(ra.calls, 1);
    assert_int_equal(rb.calls, 0); /* added in this round: not dispatched */
    assert_int_equal(lz_loop_count(loop), 2);
    assert_int_equal(lz_loop_run_once(loop, 1000), 1);
    assert_int_equal(rb.calls, 1);
    lz_loop_free(loop);
    close(a[0]), close(a[1]), close(b[0]), close(b[1]);
}

/* A timer due now, added by a callback, also waits for the next round. */
static rec added_timer;
static void add_timer_cb(lz_loop *loop, lz_loop_source *src, int fd, short revents, void *data)
{
    (void) src, (void) revents, (void) data;
    char c;
    (void) !read(fd, &c, 1);
    added_timer.src = lz_loop_add_timer(loop, 0, timer_cb, &added_timer);
}

static void test_timer_added_during_a_round_waits(void **state)
{
    (void) state;
    lz_loop *loop = lz_loop_new();
    int p[2];
    make_pipe(p);
    memset(&added_timer, 0, sizeof(added_timer));
    lz_loop_add_fd(loop, p[0], POLLIN, add_timer_cb, NULL);
    make_ready(p);
    assert_int_equal(lz_loop_run_once(loop, 1000), 1);
    assert_int_equal(added_timer.calls, 0);
    assert_int_equal(lz_loop_run_once(loop, 1000), 1);
    assert_int_equal(added_timer.calls, 1);
    lz_loop_free(loop);
    close(p[0]), close(p[1]);
}

/* A callback adding many sources grows the loop's arrays (realloc) during
 * the round: every other source that poll reported ready still runs, and
 * none of the added ones does. */
enum { GROW_N = 40, GROW_ADD = 100 };
static rec grow_timers[GROW_ADD];

static void grow_cb(lz_loop *loop, lz_loop_source *src, int fd, short revents, void *data)
{
    fd_cb(loop, src, fd, revents, data);
    for (int i = 0; i < GROW_ADD; i++)
        grow_timers[i].src = lz_loop_add_timer(loop, 0, timer_cb, &grow_timers[i]);
}

static void test_growth_during_a_round(void **state)
{
    (void) state;
    lz_loop *loop = lz_loop_new();
    int p[GROW_N][2];
    rec r[GROW_N];
    memset(r, 0, sizeof(r));
    memset(grow_timers, 0, sizeof(grow_timers));
    for (int i = 0; i < GROW_N; i++) {
        make_pipe(p[i]);
        r[i].fd = p[i][0];
        r[i].drain = true;
        r[i].src = lz_loop_add_fd(loop, p[i][0], POLLIN, i == 0 ? grow_cb : fd_cb, &r[i]);
        make_ready(p[i]);
    }
    assert_int_equal(lz_loop_run_once(loop, 1000), GROW_N);
    for (int i = 0; i < GROW_N; i++)
        assert_int_equal(r[i].calls, 1);
    for (int i = 0; i < GROW_ADD; i++)
        assert_int_equal(grow_timers[i].calls, 0);
    assert_int_equal(lz_loop_count(loop), GROW_N + GROW_ADD);
    /* Next round: the timers (due at once) fire, the drained pipes not. */
    assert_int_equal(lz_loop_run_once(loop, 1000), GROW_ADD);
    for (int i = 0; i < GROW_ADD; i++)
        assert_int_equal(grow_timers[i].calls, 1);
    assert_int_equal(lz_loop_count(loop), GROW_N);
    lz_loop_free(loop);
    for (int i = 0; i < GROW_N; i++)
        close(p[i][0]), close(p[i][1]);
}

static void test_count_follows_adds_and_removals(void **state)
{
    (void) state;
    lz_loop *loop = lz_loop_new();
    assert_int_equal(lz_loop_count(loop), 0);
    int p[2];
    make_pipe(p);
    rec r1 = { .fd = p[0] }, r2 = { 0 };
    r1.src = lz_loop_add_fd(loop, p[0], POLLIN, fd_cb, &r1);
    r2.src = lz_loop_add_timer(loop, 100000, timer_cb, &r2);
    assert_int_equal(lz_loop_count(loop), 2);
    lz_loop_remove(r1.src);
    assert_int_equal(lz_loop_count(loop), 1);
    lz_loop_remove(r1.src); /* same round: the handle is inert, not freed */
    assert_int_equal(lz_loop_count(loop), 1);
    lz_loop_set_events(r1.src, POLLIN); /* inert too */
    lz_loop_timer_set(r1.src, 0);       /* not a timer: ignored */
    assert_int_equal(lz_loop_run_once(loop, 0), 0);
    assert_int_equal(lz_loop_count(loop), 1);
    lz_loop_remove(r2.src);
    assert_int_equal(lz_loop_count(loop), 0);
    assert_int_equal(lz_loop_run_once(loop, 0), 0);
    lz_loop_free(loop);
    lz_loop_free(NULL);
    close(p[0]), close(p[1]);
}

/* A callback that ends the round: lz_loop_run_once returns as soon as it
 * has; what was ready or due and not served is served in the next round
 * (the coordinator's teardown request, domain.h request_teardown_at_once). */
static void test_end_round_serves_nothing_more(void **state)
{
    (void) state;
    lz_loop *loop = lz_loop_new();
    int p[2], q[2];
    make_pipe(p);
    make_pipe(q);
    rec t1 = { .end_round = true }, t2 = { 0 };
    rec f1 = { .fd = p[0], .drain = true, .end_round = true }, f2 = { .fd = q[0], .drain = true };
    t1.src = lz_loop_add_timer(loop, 0, timer_cb, &t1);
    t2.src = lz_loop_add_timer(loop, 0, timer_cb, &t2);
    f1.src = lz_loop_add_fd(loop, p[0], POLLIN, fd_cb, &f1);
    f2.src = lz_loop_add_fd(loop, q[0], POLLIN, fd_cb, &f2);
    make_ready(p);
    make_ready(q);
    /* The first timer ends the round: nothing else runs. */
    assert_int_equal(lz_loop_run_once(loop, 1000), 1);
    assert_int_equal(t1.calls, 1);
    assert_int_equal(t2.calls + f1.calls + f2.calls, 0);
    /* The next round: the timer still due, then f1, which ends it again. */
    assert_int_equal(lz_loop_run_once(loop, 1000), 2);
    assert_int_equal(t2.calls, 1);
    assert_int_equal(f1.calls, 1);
    assert_int_equal(f2.calls, 0);
    /* Then f2, still ready; a round is not ended for good. */
    assert_int_equal(lz_loop_run_once(loop, 1000), 1);
    assert_int_equal(f2.calls, 1);
    assert_int_equal(t1.calls + t2.calls + f1.calls, 3);
    lz_loop_free(loop);
    close(p[0]), close(p[1]);
    close(q[0]), close(q[1]);
}

static void test_poll_error_is_returned(void **state)
{
    (void) state;
    /* A descriptor that is not open: poll reports POLLNVAL for it, which
     * the source's callback receives (the loop never owns descriptors). */
    lz_loop *loop = lz_loop_new();
    int p[2];
    make_pipe(p);
    close(p[0]);
    close(p[1]);
    rec r = { .fd = p[0] };
    r.src = lz_loop_add_fd(loop, p[0], POLLIN, fd_cb, &r);
    assert_int_equal(lz_loop_run_once(loop, 1000), 1);
    assert_true(r.last_revents & POLLNVAL);
    lz_loop_free(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fd_fires_on_readiness_only),
        cmocka_unit_test(test_fd_sources_run_in_registration_order),
        cmocka_unit_test(test_events_zero_pauses),
        cmocka_unit_test(test_paused_source_is_not_polled),
        cmocka_unit_test(test_timer_fires_once_then_is_gone),
        cmocka_unit_test(test_timers_fire_in_due_order),
        cmocka_unit_test(test_timer_rearms_from_its_callback),
        cmocka_unit_test(test_timer_set_postpones_a_pending_timer),
        cmocka_unit_test(test_timer_runs_before_descriptors),
        cmocka_unit_test(test_end_round_serves_nothing_more),
        cmocka_unit_test(test_callback_removes_itself),
        cmocka_unit_test(test_removing_a_ready_source_of_the_same_round),
        cmocka_unit_test(test_removing_a_ready_source_then_its_fd_reused),
        cmocka_unit_test(test_timer_removes_a_timer_due_in_the_same_round),
        cmocka_unit_test(test_timer_removes_a_ready_fd_source),
        cmocka_unit_test(test_timer_removing_itself_is_not_rearmed),
        cmocka_unit_test(test_source_added_during_a_round_waits),
        cmocka_unit_test(test_timer_added_during_a_round_waits),
        cmocka_unit_test(test_growth_during_a_round),
        cmocka_unit_test(test_count_follows_adds_and_removals),
        cmocka_unit_test(test_poll_error_is_returned),
    };
    return cmocka_run_group_tests_name("test_loop", tests, NULL, NULL);
}
