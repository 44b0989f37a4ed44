/* SPDX-License-Identifier: Apache-2.0 */
#include "common/timing.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int enabled = -1;
static int64_t origin_ns;
static int64_t last_ns; /* the previous mark's time, for the delta */
static struct {
    const char *phase;
    int64_t ns;
} marks[LZ_TIMING_MAX];
static size_t n_marks, n_dropped;

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t) t.tv_sec * 1000000000 + t.tv_nsec;
}

bool lz_timing_enabled(void)
{
    if (enabled < 0) {
        const char *v = getenv("LAZARET_LOG");
        enabled = v && strcmp(v, "debug") == 0;
    }
    return enabled;
}

void lz_timing_origin(void)
{
    origin_ns = last_ns = now_ns();
}

void lz_timing_mark(const char *phase)
{
    if (!lz_timing_enabled())
        return;
    if (n_marks == LZ_TIMING_MAX) {
        n_dropped++;
        return;
    }
    marks[n_marks].phase = phase;
    marks[n_marks++].ns = now_ns();
}

void lz_timing_forget(void)
{
    n_marks = n_dropped = 0;
    last_ns = now_ns(); /* the first delta counts from the fork */
}

void lz_timing_flush(FILE *out, const char *prefix)
{
    if (!lz_timing_enabled())
        return;
    char log_prefix[64];
    if (!prefix) {
        time_t t = time(NULL);
        struct tm tm;
        gmtime_r(&t, &tm);
        char ts[32];
        strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
        snprintf(log_prefix, sizeof(log_prefix), "%s [%d] ", ts, (int) getpid());
        prefix = log_prefix;
    }
    for (size_t i = 0; i < n_marks; i++) {
        fprintf(out, "%stiming: %s at %.1f ms (+%.1f ms, clock %.3f ms)\n", prefix, marks[i].phase,
                (double) (marks[i].ns - origin_ns) / 1e6, (double) (marks[i].ns - last_ns) / 1e6,
                (double) marks[i].ns / 1e6);
        last_ns = marks[i].ns;
    }
    if (n_dropped)
        fprintf(out, "%stiming: %zu marks dropped (more than %d)\n", prefix, n_dropped,
                LZ_TIMING_MAX);
    fflush(out);
    n_marks = n_dropped = 0;
}
