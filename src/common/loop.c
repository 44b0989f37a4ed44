/* SPDX-License-Identifier: Apache-2.0 */
#include "common/loop.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <time.h>

#include "common/util.h"

struct lz_loop_source {
    lz_loop *loop;
    bool is_timer;
    bool dead;   /* removed: never called again, freed after the round */
    bool paused; /* not polled until resumed */
    int fd;
    short events;
    int64_t due_ms; /* timers */
    bool armed;
    lz_loop_fd_fn fd_fn;
    lz_loop_timer_fn timer_fn;
    void *data;
};

struct lz_loop {
    lz_loop_source **src;
    unsigned n, cap;
    unsigned live;
    struct pollfd *pfd; /* scratch for poll, cap entries */
    unsigned *pfd_src;  /* index into src of each pfd entry */
    bool round_ended;   /* lz_loop_end_round: dispatch nothing more this round */
};

void lz_loop_end_round(lz_loop *loop)
{
    loop->round_ended = true;
}

int64_t lz_loop_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t) t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

lz_loop *lz_loop_new(void)
{
    return lz_xcalloc(1, sizeof(lz_loop));
}

void lz_loop_free(lz_loop *loop)
{
    if (!loop)
        return;
    for (unsigned i = 0; i < loop->n; i++)
        free(loop->src[i]);
    free(loop->src);
    free(loop->pfd);
    free(loop->pfd_src);
    free(loop);
}

static lz_loop_source *add(lz_loop *loop)
{
    if (loop->n == loop->cap) {
        loop->cap = loop->cap ? 2 * loop->cap : 16;
        loop->src = lz_xrealloc(loop->src, loop->cap, sizeof(*loop->src));
        loop->pfd = lz_xrealloc(loop->pfd, loop->cap, sizeof(*loop->pfd));
        loop->pfd_src = lz_xrealloc(loop->pfd_src, loop->cap, sizeof(*loop->pfd_src));
    }
    lz_loop_source *s = lz_xcalloc(1, sizeof(*s));
    s->loop = loop;
    s->fd = -1;
    loop->src[loop->n++] = s;
    loop->live++;
    return s;
}

lz_loop_source *lz_loop_add_fd(lz_loop *loop, int fd, short events, lz_loop_fd_fn fn, void *data)
{
    lz_loop_source *s = add(loop);
    s->fd = fd;
    s->events = events;
    s->fd_fn = fn;
    s->data = data;
    return s;
}

void lz_loop_set_events(lz_loop_source *src, short events)
{
    if (src && !src->dead)
        src->events = events;
}

void lz_loop_set_paused(lz_loop_source *src, bool paused)
{
    if (src && !src->dead)
        src->paused = paused;
}

lz_loop_source *lz_loop_add_timer(lz_loop *loop, int64_t after_ms, lz_loop_timer_fn fn, void *data)
{
    lz_loop_source *s = add(loop);
    s->is_timer = true;
    s->timer_fn = fn;
    s->data = data;
    lz_loop_timer_set(s, after_ms);
    return s;
}

void lz_loop_timer_set(lz_loop_source *src, int64_t after_ms)
{
    if (!src || src->dead || !src->is_timer)
        return;
    src->due_ms = lz_loop_now_ms() + (after_ms > 0 ? after_ms : 0);
    src->armed = true;
}

void lz_loop_remove(lz_loop_source *src)
{
    if (!src || src->dead)
        return;
    src->dead = true;
    src->loop->live--;
}

unsigned lz_loop_count(const lz_loop *loop)
{
    return loop->live;
}

/* Free dead sources; only between rounds (handles stay valid during one). */
static void compact(lz_loop *loop)
{
    unsigned k = 0;
    for (unsigned i = 0; i < loop->n; i++) {
        lz_loop_source *s = loop->src[i];
        if (s->dead) {
            free(s);
            continue;
        }
        loop->src[k++] = s;
    }
    loop->n = k;
}

int lz_loop_run_once(lz_loop *loop, int max_wait_ms)
{
    compact(loop);
    int64_t now = lz_loop_now_ms();
    int64_t wait = max_wait_ms;
    unsigned np = 0;
    for (unsigned i = 0; i < loop->n; i++) {
        lz_loop_source *s = loop->src[i];
        if (s->is_timer) {
            if (!s->armed)
                continue;
            int64_t left = s->due_ms - now;
            if (left < 0)
                left = 0;
            if (wait < 0 || left < wait)
                wait = left;
            continue;
        }
        if (s->paused)
            continue;
        loop->pfd[np] = (struct pollfd){ .fd = s->fd, .events = s->events };
        loop->pfd_src[np++] = i;
    }
    if (wait > 24L * 3600 * 1000)
        wait = 24L * 3600 * 1000;
    if (poll(loop->pfd, np, (int) wait) < 0)
        return errno == EINTR ? 0 : -1;

    int ran = 0;
    loop->round_ended = false;
    /* Sources added by callbacks land beyond n_round and outside pfd: they
     * wait for the next round. */
    unsigned n_round = loop->n;
    now = lz_loop_now_ms();
    for (unsigned i = 0; i < n_round && !loop->round_ended; i++) {
        lz_loop_source *s = loop->src[i];
        if (!s->is_timer || s->dead || !s->armed || s->due_ms > now)
            continue;
        s->armed = false;
        s->timer_fn(loop, s, s->data);
        ran++;
        /* One-shot: gone unless the callback re-armed it. */
        if (!s->dead && !s->armed)
            lz_loop_remove(s);
    }
    for (unsigned j = 0; j < np && !loop->round_ended; j++) {
        lz_loop_source *s = loop->src[loop->pfd_src[j]];
        short rev = loop->pfd[j].revents;
        if (s->dead || !rev)
            continue;
        s->fd_fn(loop, s, s->fd, rev, s->data);
        ran++;
    }
    return ran;
}
