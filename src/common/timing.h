/* SPDX-License-Identifier: Apache-2.0
 *
 * Phase timing of a Domain's start and a session's join, for profiling
 * (issue 13; docs/performance.md "Where a cold start goes"). Off unless the
 * environment says LAZARET_LOG=debug; then every process of the start (the
 * CLI, the coordinator and the supervisor it forks) marks its phases and
 * writes them as "timing:" lines: the coordinator and supervisor into the
 * Domain's log (logs/coordinator.log), the CLI to its stderr.
 *
 * Times are CLOCK_MONOTONIC, which is one clock for every process of the
 * machine, printed as milliseconds since the CLI began (the origin is set
 * in main() and inherited by every process forked from it), so the lines
 * of all three processes form one timeline, and as the clock's own reading
 * ("clock"), which places the marks of a Domain started by one CLI on the
 * timeline of another (a joining session's). bench/launch reads them.
 */
#pragma once

#include <stdbool.h>
#include <stdio.h>

/* Is phase timing on (LAZARET_LOG=debug)? Read once. */
bool lz_timing_enabled(void);

/* The origin of this process tree's timeline: now. Called once, by main(). */
void lz_timing_origin(void);

/* Mark the end of a phase: "PROCESS: PHASE". A no-op unless enabled; at
 * most LZ_TIMING_MAX marks are kept until the next flush (more are
 * counted and said as dropped). phase must be a string literal. */
#define LZ_TIMING_MAX 48
void lz_timing_mark(const char *phase);

/* Forget the marks kept so far: a forked process's first call (its
 * parent writes them). */
void lz_timing_forget(void);

/* Write the marks kept so far, one "timing: PHASE at T ms (+D ms, clock
 * C ms)" line
 * each, and forget them. Each line begins with prefix, or with NULL with
 * the Domain log's "TIME [PID] " (coordinator/log.c). */
void lz_timing_flush(FILE *out, const char *prefix);
