/* SPDX-License-Identifier: Apache-2.0
 *
 * The sandbox's freezer: what lets the Git Sentry's audit stay ahead of the
 * sandbox whatever the sandbox does (docs/git.md "An audit the sandbox
 * cannot outpace").
 *
 * Every change the sandbox makes to a host filesystem is made by one of two
 * host processes: runsc's gofer (runsc 2022: every create, rename, link,
 * mkdir) and runsc's sandbox process, the gVisor kernel (writes through
 * donated host descriptors; with directfs, everything). Both are pinned by
 * pidfds that the Runtime Supervisor hands over with SUP_STARTED. Freezing
 * is SIGSTOP to both, then waiting until every thread of both is stopped:
 * a file operation in progress in a thread completes before that thread
 * stops, and none starts after. From then until the thaw (SIGCONT) nothing
 * of the sandbox's reaches the host's filesystems, so an audit that drains
 * its event queue while frozen is current, and stays current.
 *
 * Holders: the freeze lasts while anyone holds it — the audit catching up
 * (taken by the audit itself, or by the watchdog below), and each host
 * command an escalation runs (docs/escalation.md). SIGCONT only when the
 * last one lets go.
 *
 * The watchdog: a thread that watches the Git Sentry's inotify descriptor.
 * When events have been waiting longer than the lag bound without the
 * audit having drained them (the coordinator busy with a long walk, with
 * something else, or simply outpaced by a rename storm), it freezes the
 * sandbox; the audit thaws it once it has drained the queue with the
 * sandbox stopped. So the sandbox never runs more than the lag bound ahead
 * of the audit. The thread only polls, reads clocks and sends signals: no
 * allocation, no locks shared with the rest of the coordinator but this
 * module's own (the coordinator forks: see fork safety in freezer.c).
 */
#ifndef LAZARET_COORDINATOR_FREEZER_H
#define LAZARET_COORDINATOR_FREEZER_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* The longest the audit may be behind the sandbox before the sandbox is
 * frozen (docs/git.md "The window"). */
#define LZ_FREEZE_LAG_MS 5
/* How long a freeze waits for every thread to stop before it says so in
 * the log (it keeps waiting for the stop only this long; the signal stays
 * pending, so the thread stops when it leaves the kernel). */
#define LZ_FREEZE_STOP_WAIT_MS 2000
/* At most this many processes are frozen (the sandbox process and the
 * gofer today). */
#define LZ_FREEZER_MAX 4

typedef struct lz_freezer lz_freezer;

typedef struct lz_freeze_stats {
    unsigned long freezes;          /* freezes begun (any holder) */
    unsigned long watchdog_freezes; /* ... of them by the watchdog */
    long long max_stop_us;          /* the longest wait for every thread to stop */
    long long max_frozen_us;        /* the longest freeze */
    long long total_frozen_us;
} lz_freeze_stats;

/* A freezer with no processes yet: hold/release are no-ops until adopt. */
lz_freezer *lz_freezer_new(void);

/* Take the pidfds (ownership passes, also on failure). */
LZ_MUST_CHECK
int lz_freezer_adopt(lz_freezer *f, const int *pidfds, size_t n, lz_error **err);

/* Does it hold any process? */
bool lz_freezer_armed(const lz_freezer *f);

/* Freeze (when nobody else holds it) and wait until every thread of every
 * process is stopped (bounded by LZ_FREEZE_STOP_WAIT_MS). Returns true when
 * all are stopped (or gone). */
bool lz_freezer_hold(lz_freezer *f);

/* Is the sandbox frozen now (by anyone)? */
bool lz_freezer_frozen(lz_freezer *f);

/* Let go of a hold; the last one thaws. */
void lz_freezer_release(lz_freezer *f);

/* Start the watchdog on the inotify descriptor (the audit's queue). */
LZ_MUST_CHECK
int lz_freezer_watch(lz_freezer *f, int inotify_fd, lz_error **err);

/* The audit's side of the watchdog: the audit begins (the watchdog may
 * freeze the sandbox while it works, however empty the queue looks). */
void lz_freezer_audit_begin(lz_freezer *f);

/* Call after the queue was read empty and
 * everything read was handled. Returns true when the watchdog had frozen
 * the sandbox meanwhile: the caller must then make sure every thread is
 * stopped (lz_freezer_wait_stopped), drain once more, and call
 * lz_freezer_watchdog_done(). */
bool lz_freezer_audit_drained(lz_freezer *f);

/* Wait until every thread of every process is stopped (see hold). */
bool lz_freezer_wait_stopped(lz_freezer *f);

/* The audit is current with the sandbox stopped: the watchdog's hold ends. */
void lz_freezer_watchdog_done(lz_freezer *f);

/* SIGKILL every process (they die stopped or not): the teardown calls it
 * before lz_freezer_free, so that the thaw there wakes no living sandbox
 * (the supervisor may have timed out or been unreachable). */
void lz_freezer_kill(lz_freezer *f);

void lz_freezer_stats(lz_freezer *f, lz_freeze_stats *ret);

/* Stop the watchdog, thaw, close the pidfds. */
void lz_freezer_free(lz_freezer *f);

#endif
