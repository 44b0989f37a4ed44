/* SPDX-License-Identifier: Apache-2.0
 *
 * A small poll(2) event loop: descriptors and one-shot timers, each with a
 * callback. It replaces hand-counted poll slots: adding an event source is
 * one lz_loop_add_fd() or lz_loop_add_timer() call.
 *
 * Contract:
 *  - Single-threaded. Callbacks run from lz_loop_run_once() only.
 *  - A source may be removed (or its events changed) at any time, from any
 *    callback, including its own and another source's of the same round: a
 *    removed source is never called again, not even for events already
 *    collected in the current round. Its memory is reclaimed after the
 *    round, so a handle stays valid (inert) until the callback returns.
 *  - A source added during a round is first considered in the next round.
 *  - Timers are one-shot: a timer fires once, then is removed (its handle
 *    is dead after its callback returns) unless the callback re-arms it
 *    with lz_loop_timer_set(). Time is CLOCK_MONOTONIC in milliseconds.
 *  - The loop never owns or closes a descriptor: removing a source is the
 *    caller's business before it closes the fd.
 *  - events 0 still reports POLLHUP/POLLERR (poll always does); a paused
 *    source (lz_loop_set_paused) is not polled at all, so a hung-up
 *    descriptor whose reader must wait does not spin the loop.
 */
#ifndef LAZARET_COMMON_LOOP_H
#define LAZARET_COMMON_LOOP_H

#include <stdbool.h>
#include <stdint.h>

typedef struct lz_loop lz_loop;
typedef struct lz_loop_source lz_loop_source;

/* revents: what poll reported (POLLIN, POLLOUT, POLLHUP, POLLERR, …). */
typedef void (*lz_loop_fd_fn)(lz_loop *loop, lz_loop_source *src, int fd, short revents,
                              void *data);
typedef void (*lz_loop_timer_fn)(lz_loop *loop, lz_loop_source *src, void *data);

lz_loop *lz_loop_new(void);
/* Frees every source too (no callback runs). NULL is fine. */
void lz_loop_free(lz_loop *loop);

/* Watch fd for events. Returns the source handle (never NULL: allocation
 * failure aborts, as every lz_x* allocation does). */
lz_loop_source *lz_loop_add_fd(lz_loop *loop, int fd, short events, lz_loop_fd_fn fn, void *data);
void lz_loop_set_events(lz_loop_source *src, short events);
void lz_loop_set_paused(lz_loop_source *src, bool paused);

/* A one-shot timer firing after_ms (>= 0) from now. */
lz_loop_source *lz_loop_add_timer(lz_loop *loop, int64_t after_ms, lz_loop_timer_fn fn, void *data);
/* Re-arm a timer (pending or firing now) to fire after_ms from now. */
void lz_loop_timer_set(lz_loop_source *src, int64_t after_ms);

/* Stop watching; safe during dispatch (see the contract). NULL is fine. */
void lz_loop_remove(lz_loop_source *src);

/* Number of live sources (for tests and invariants). */
unsigned lz_loop_count(const lz_loop *loop);

/* Wait for events (at most max_wait_ms; negative: no bound but the next
 * timer) and dispatch one round: due timers first, then descriptors in
 * registration order. Returns the number of callbacks run, or -1 with
 * errno set when poll fails other than by EINTR (EINTR returns 0). */
int lz_loop_run_once(lz_loop *loop, int max_wait_ms);

/* From a callback: run no further callback in this round, so that
 * lz_loop_run_once() returns as soon as the calling callback does. Sources
 * that were ready and not served stay ready (a timer stays due) for the
 * next round. The coordinator uses it when a callback asks for the
 * teardown, which then runs before any other event is served. */
void lz_loop_end_round(lz_loop *loop);

/* Milliseconds of CLOCK_MONOTONIC (for callers' own bookkeeping). */
int64_t lz_loop_now_ms(void);

#endif
